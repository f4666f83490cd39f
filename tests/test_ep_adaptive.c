// SPDX-License-Identifier: Apache-2.0
/*
 * test_ep_adaptive.c - the host side of the fused MoE kernel's adaptive plan (xstage_ep.h,
 * docs/EP.md "Adaptive"), CPU only: host-only problems (xs_moe_problem_create), no device.
 *
 *   1. Plans the kernel cannot run are refused with one line: no admission rate, a negative or
 *      huge lookahead, couriers.
 *   2. The list: the Linear-1 tiles in row-block order, then the Linear-2 tiles in row-block
 *      order (the two queues the kernel's CTAs choose between).
 *   3. The model's choice (the kernel's rule at the model's time), link-less: every task runs
 *      once, no Linear-2 tile starts before its row block's Linear-1 tiles end, and the
 *      admission clock decides: at a rate that admits one tile per hour, at most one Linear-2
 *      tile starts before the last Linear-1 tile is taken; with a lookahead
 *      that admits everything, most of them do.
 *   4. With the link: the prediction is no faster than the drain (remote bytes / R) or the
 *      link-less run.
 *   5. auto: the adaptive candidate is predicted where there are remote bytes and pacing is
 *      allowed, not with N = 1 or pace_bytes = 0; chosen only with auto_adaptive and a 2 % gain.
 *
 * usage: test_ep_adaptive   last line: "N passed, N failed"
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* plans are written positionally: the fields after the last one given are 0 */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include "xt.h"
#include "xstage.h"
#include "xstage_ep.h"
#include "xt_ep.h"


static void refusals(void)
{
    xs_moe_problem *m = xt_moe_problem("olmoe-1b-7b", 1024, 4, XS_ROUTE_BALANCED);
    if (!m)
        return;
    const xs_moe_plan bad[] = {
        {XS_MOE_ADAPTIVE, 0, 0, 0, 0, 0, 0, 1000},            /* no rate */
        {XS_MOE_ADAPTIVE, 0, 0, 0, 50, 0, 0, -1},             /* negative lookahead */
        {XS_MOE_ADAPTIVE, 0, 0, 0, 50, 0, 0, 1e13},           /* huge lookahead */
        {XS_MOE_ADAPTIVE, 0, 0, 0, 50, 4, 40, 1000},          /* couriers */
        {XS_MOE_ADAPTIVE, 0, 0, 0, NAN, 0, 0, 1000},          /* NaN rate */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const xs_status st = xs_moe_problem_set_plan(m, 0, &bad[i]);
        XT_CHECK(st == XS_EINVAL && strstr(xs_errmsg(), "adaptive") && !strchr(xs_errmsg(), '\n'),
                 "bad adaptive plan %zu: want a one-line XS_EINVAL naming the plan, got %d: %s",
                 i, (int)st, xs_errmsg());
    }
    const xs_moe_plan good = {XS_MOE_ADAPTIVE, 0, 0, 0, 50, 0, 0, 0};
    XT_CHECK(xs_moe_problem_set_plan(m, 0, &good) == XS_OK, "adaptive, unpaced stores, lookahead 0: %s",
             xs_errmsg());
    printf("ok   refusals: no rate, negative or huge lookahead, couriers, NaN\n");
    xs_moe_problem_destroy(m);
}

typedef struct {
    int n1, n2, n;          /* tasks */
    int l2_before;          /* Linear-2 tiles fetched before the last Linear-1 fetch */
    int l2_remote;          /* Linear-2 tiles (with N > 1 every row block has remote rows) */
    double total;
} adapt_run;

static int adaptive_run(xs_moe_problem *m, const xs_profile *p, const xs_moe_costs *c, double rate,
                        double ahead, int link, xs_moe_tile *t, adapt_run *r)
{
    memset(r, 0, sizeof *r);
    xs_moe_info info;
    xs_moe_problem_info(m, &info);
    r->n1 = info.l1_tiles;
    r->n2 = info.l2_tiles;
    r->n = r->n1 + r->n2;
    const xs_moe_plan pl = {XS_MOE_ADAPTIVE, 0, 0, 0, rate, 0, 0, ahead};
    if (xs_moe_problem_set_plan(m, 0, &pl) != XS_OK)
        return 0;
    if (xs_moe_predict_trace(m, 0, p, NULL, c, link, t, &r->total) != XS_OK)
        return 0;
    double last1 = -1;
    for (int i = 0; i < r->n; i++)
        if (t[i].kind == 1 && t[i].fetch_ns > last1)
            last1 = t[i].fetch_ns;
    for (int i = 0; i < r->n; i++)
        if (t[i].kind == 2) {
            r->l2_remote++;
            r->l2_before += t[i].fetch_ns < last1;
        }
    return 1;
}

static void list_and_rule(const xs_profile *p)
{
    xt_moe_fixture f;
    if (!xt_moe_fixture_open(&f, "olmoe-1b-7b", 2048, 4, XS_ROUTE_ZIPF))
        return;
    xs_moe_problem *m = f.m;
    const xs_moe_costs c = f.c;
    const xs_moe_info info = f.info;
    const int n = f.n;
    xs_moe_tile *t = f.t;
    /* 2. the list, read back from the trace (one record per list position) */
    adapt_run r;
    XT_CHECK(adaptive_run(m, p, &c, 50.0, 0.0, 0, t, &r), "adaptive: %s", xs_errmsg());
    int bad_list = 0;
    const int l1 = info.l1_tiles / info.row_blocks, l2 = info.l2_tiles / info.row_blocks;
    for (int i = 0; i < n; i++) {
        const int k = i < info.l1_tiles ? 1 : 2;
        const int j = k == 1 ? i : i - info.l1_tiles, per = k == 1 ? l1 : l2;
        bad_list += t[i].kind != k || t[i].rb != j / per || t[i].nb != j % per;
    }
    XT_CHECK(bad_list == 0, "adaptive list: %d positions out of order", bad_list);
    printf("%s list: %d Linear-1 then %d Linear-2 tiles, each in row-block order\n",
           bad_list ? "FAIL" : "ok  ", info.l1_tiles, info.l2_tiles);

    /* 3. the rule, link-less: every task once, dependencies, the admission clock */
    const double rates[3] = {1e-9, 50.0, 1e6};
    const double aheads[3] = {0.0, 30000.0, 1e11};
    int l2_before[3] = {0, 0, 0}, l2_remote = 0;
    for (int s = 0; s < 3; s++) {
        memset(t, 0, sizeof *t * (size_t)n);
        const int ok = adaptive_run(m, p, &c, rates[s], aheads[s], 0, t, &r);
        XT_CHECK(ok, "adaptive rate %g ahead %g: %s", rates[s], aheads[s], xs_errmsg());
        if (!ok)
            continue;
        l2_before[s] = r.l2_before;
        l2_remote = r.l2_remote;
        int bad_run, bad_dep;
        xt_moe_trace_order(t, n, &info, &bad_run, &bad_dep);
        XT_CHECK(bad_run == 0, "rate %g ahead %g: %d tasks did not run once, in order", rates[s],
                 aheads[s], bad_run);
        XT_CHECK(bad_dep == 0, "rate %g ahead %g: %d Linear-2 tiles before their Linear-1",
                 rates[s], aheads[s], bad_dep);
        XT_CHECK(r.total > 0 && isfinite(r.total), "rate %g: total %g", rates[s], r.total);
    }
    XT_CHECK(l2_remote > 100, "the problem has %d Linear-2 tiles with remote bytes", l2_remote);
    XT_CHECK(l2_before[0] <= 1, "one tile per hour admitted %d Linear-2 tiles before the last "
             "Linear-1 tile was taken", l2_before[0]);
    XT_CHECK(l2_before[2] >= l2_remote / 2, "admitting everything: only %d of %d Linear-2 tiles "
             "before the last Linear-1 tile", l2_before[2], l2_remote);
    XT_CHECK(l2_before[1] >= l2_before[0] && l2_before[1] <= l2_before[2],
             "the admission rule is not monotone: %d, %d, %d tiles early", l2_before[0],
             l2_before[1], l2_before[2]);
    printf("ok   rule: Linear-2 tiles taken before the last Linear-1 tile: %d (closed clock), %d "
           "(50 B/ns, 30 us), %d (open) of %d\n", l2_before[0], l2_before[1], l2_before[2],
           l2_remote);

    /* 4. with the link: never faster than the drain or the link-less run */
    memset(t, 0, sizeof *t * (size_t)n);
    adapt_run rl, r0;
    const double rate = 0.95 * p->drain_bytes_per_ns;
    XT_CHECK(adaptive_run(m, p, &c, rate, c.c2_ns + 5000.0, 0, t, &r0) &&
             adaptive_run(m, p, &c, rate, c.c2_ns + 5000.0, 1, t, &rl), "with the link: %s",
             xs_errmsg());
    const double drain = info.remote_bytes / p->drain_bytes_per_ns;
    XT_CHECK(rl.total >= drain && rl.total >= r0.total * (1 - 1e-9),
             "with the link %.1f us: faster than the drain %.1f us or the link-less run %.1f us",
             rl.total / 1e3, drain / 1e3, r0.total / 1e3);
    printf("ok   with the link %.1f us >= drain %.1f us, link-less %.1f us\n", rl.total / 1e3,
           drain / 1e3, r0.total / 1e3);
    xt_moe_fixture_close(&f);
}

/* 5. auto's candidate */
static void auto_checks(const xs_profile *p)
{
    const char *names[2] = {"olmoe-1b-7b", "qwen3-30b-a3b"};
    for (int k = 0; k < 2; k++) {
        xs_moe_problem *m = xt_moe_problem(names[k], 2048, k ? 2 : 4, XS_ROUTE_BALANCED);
        if (!m)
            continue;
        xs_moe_costs c;
        xt_moe_auto_costs(m, p, names[k], &c);
        xs_moe_model mm;
        xs_moe_model_default(&mm);
        xs_moe_auto_result ar;
        XT_CHECK(xs_moe_auto(m, p, &mm, &c, NULL, NULL, &ar) == XS_OK, "auto: %s", xs_errmsg());
        XT_CHECK(ar.adaptive.kind == XS_MOE_ADAPTIVE && isfinite(ar.adaptive_ns) &&
                 ar.adaptive.pace_bytes_per_ns > 0 && ar.adaptive.admit_ahead_ns > 0,
                 "%s: no adaptive candidate (%s)", names[k], ar.how);
        XT_CHECK(ar.plan.kind != XS_MOE_ADAPTIVE && strstr(ar.how, "adaptive"),
                 "%s: adaptive chosen without auto_adaptive, or not reported: %s", names[k],
                 ar.how);
        const double before = ar.auto_ns;
        mm.auto_adaptive = 1;
        XT_CHECK(xs_moe_auto(m, p, &mm, &c, NULL, NULL, &ar) == XS_OK, "auto: %s", xs_errmsg());
        const int gain = ar.adaptive_ns <= 0.98 * before;
        XT_CHECK((ar.plan.kind == XS_MOE_ADAPTIVE) == gain,
                 "%s: auto_adaptive: adaptive %.1f us vs %.1f us, chosen %d", names[k],
                 ar.adaptive_ns / 1e3, before / 1e3, ar.plan.kind == XS_MOE_ADAPTIVE);
        printf("ok   %s: adaptive predicted %.1f us, the other rules' decision %.1f us: %s\n",
               names[k], ar.adaptive_ns / 1e3, before / 1e3,
               gain ? "chosen with auto_adaptive" : "not chosen (< 2 % gain)");
        mm.pace_bytes = 0;
        XT_CHECK(xs_moe_auto(m, p, &mm, &c, NULL, NULL, &ar) == XS_OK &&
                 ar.adaptive.kind != XS_MOE_ADAPTIVE && isnan(ar.adaptive_ns),
                 "%s: an adaptive candidate with pacing off", names[k]);
        xs_moe_problem_destroy(m);
    }
    xs_moe_problem *m1 = xt_moe_problem("olmoe-1b-7b", 1024, 1, XS_ROUTE_BALANCED);
    if (m1) {
        xs_moe_costs c;
        xt_moe_synth_costs(xs_moe_config_find("olmoe-1b-7b"), &c);
        xs_moe_model mm;
        xs_moe_model_default(&mm);
        mm.auto_adaptive = 1;
        xs_moe_auto_result ar;
        XT_CHECK(xs_moe_auto(m1, p, &mm, &c, NULL, NULL, &ar) == XS_OK &&
                 ar.adaptive.kind != XS_MOE_ADAPTIVE && ar.plan.kind != XS_MOE_ADAPTIVE,
                 "N=1: an adaptive candidate without remote bytes");
        xs_moe_problem_destroy(m1);
    }
}

int main(void)
{
    xs_profile p;
    xs_profile_default(&p);
    refusals();
    list_and_rule(&p);
    auto_checks(&p);
    return xt_done();
}
