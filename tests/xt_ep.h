// SPDX-License-Identifier: Apache-2.0
/*
 * xt_ep.h - synthetic local-control costs for the CPU checks of the EP model (tests/test_ep_*.c):
 * 1.6 us per 64-wide k-step, about an H200 main loop of the mma.sync engine, plus a fixed
 * epilogue; Linear-2 tiles store at 52 B/ns into HBM. And the host-only problems those checks
 * build. Include after xt.h and xstage_ep.h (C, or C++ in tests/gpu/test_moe.cu).
 */
#ifndef XT_EP_H
#define XT_EP_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline void xt_moe_synth_costs(const xs_moe_config *c, xs_moe_costs *k)
{
    memset(k, 0, sizeof *k);
    const double kstep = 1600.0;
    k->mma1_ns = kstep * c->hidden / 64.0;
    k->mma2_ns = kstep * c->inter / 64.0;
    k->c1_ns = k->mma1_ns + 1000.0;
    k->c2_ns = k->mma2_ns + 300.0;
    k->local_issue_bytes_per_ns = 52.0;
    k->span2_ns = 65536.0 / 52.0;
}

/* A host-only problem (a 132-CTA grid, seed 5) of a public configuration; NULL (a failed check)
 * if it cannot be built. */
static inline xs_moe_problem *xt_moe_problem(const char *name, int tokens, int peers,
                                             xs_moe_routing rt)
{
    const xs_moe_config *cfg = xs_moe_config_find(name);
    XT_CHECK(cfg != NULL, "configuration %s", name);
    if (!cfg)
        return NULL;
    xs_moe_opts o = {tokens, peers, rt, 0, 5u};
    xs_moe_problem *m = NULL;
    XT_CHECK(xs_moe_problem_create(cfg, &o, 132, &m) == XS_OK, "create %s: %s", name,
             xs_errmsg());
    return m;
}

/* A problem with its synthetic costs, its info and a zeroed trace of one record per task: the
 * model checks' set-up (test_ep_adaptive, test_ep_spill). 0 (a failed check) if it cannot be
 * built; xt_moe_fixture_close frees it. */
typedef struct {
    xs_moe_problem *m;
    xs_moe_costs c;
    xs_moe_info info;
    int n;          /* tasks: info.l1_tiles + info.l2_tiles */
    xs_moe_tile *t; /* [n + 1] */
} xt_moe_fixture;

static inline int xt_moe_fixture_open(xt_moe_fixture *f, const char *name, int tokens, int peers,
                               xs_moe_routing rt)
{
    memset(f, 0, sizeof *f);
    f->m = xt_moe_problem(name, tokens, peers, rt);
    if (!f->m)
        return 0;
    xt_moe_synth_costs(xs_moe_config_find(name), &f->c);
    xs_moe_problem_info(f->m, &f->info);
    f->n = f->info.l1_tiles + f->info.l2_tiles;
    f->t = (xs_moe_tile *)calloc((size_t)f->n + 1, sizeof *f->t);
    XT_CHECK(f->t != NULL, "memory");
    if (!f->t) {
        xs_moe_problem_destroy(f->m);
        f->m = NULL;
        return 0;
    }
    return 1;
}

static inline void xt_moe_fixture_close(xt_moe_fixture *f)
{
    free(f->t);
    xs_moe_problem_destroy(f->m);
    memset(f, 0, sizeof *f);
}

/* A trace's order (predicted or measured; list order, n tasks): *bad = tasks that did not run
 * once in order (producer outside the grid, main loop before the fetch or of no length); *dep =
 * Linear-2 tiles whose main loop began before their row block's last Linear-1 tile ended. */
static inline void xt_moe_trace_order(const xs_moe_tile *t, int n, const xs_moe_info *info,
                                      int *bad, int *dep)
{
    *bad = *dep = 0;
    double *end1 = (double *)calloc((size_t)info->row_blocks + 1, sizeof(double));
    XT_CHECK(end1 != NULL, "memory");
    for (int i = 0; i < n; i++) {
        *bad += !(t[i].cta >= 0 && t[i].cta < info->grid && t[i].mma0_ns >= t[i].fetch_ns &&
                  t[i].mma1_ns > t[i].mma0_ns);
        if (end1 && t[i].kind == 1 && t[i].mma1_ns > end1[t[i].rb])
            end1[t[i].rb] = t[i].mma1_ns;
    }
    for (int i = 0; end1 && i < n; i++)
        *dep += t[i].kind == 2 && t[i].mma0_ns < end1[t[i].rb] - 1e-6;
    free(end1);
}

/* Synthetic costs of configuration `name` for problem m, with the local control's kernel time
 * (what xs_moe_auto scales by) taken from the model's link-less wave order. Uses plan slot 0. */
static inline void xt_moe_auto_costs(xs_moe_problem *m, const xs_profile *p, const char *name,
                              xs_moe_costs *c)
{
    xt_moe_synth_costs(xs_moe_config_find(name), c);
    const xs_moe_plan wp = {.kind = XS_MOE_WAVE};
    double kern = NAN;
    XT_CHECK(xs_moe_problem_set_plan(m, 0, &wp) == XS_OK &&
             xs_moe_predict(m, 0, p, NULL, c, 0, &kern) == XS_OK, "%s: %s", name, xs_errmsg());
    c->kernel_ns = kern;
}

#endif
