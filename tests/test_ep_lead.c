// SPDX-License-Identifier: Apache-2.0
/*
 * test_ep_lead.c - the tapered lead (xstage_ep.h: xs_moe_plan.lead_end) and auto's lead search
 * for its paced order (xs_moe_model.lead_search; docs/EP.md "The paced order's lead"), CPU only:
 * host-only problems (xs_moe_problem_create), no device.
 *
 *   1. Plans with a taper end outside 1..lead-1 are refused with one line.
 *   2. The task lists (from the model's trace, which keeps list order): every task once; every
 *      Linear-2 tile after all Linear-1 tiles of its row block; the first row block's Linear-2
 *      tiles at least `lead` row blocks behind Linear-1, every later one at least lead_end; with
 *      a taper, fewer Linear-2 tiles after the last Linear-1 tile than without, and at least
 *      (lead_end + 1) row blocks' worth. The model's run of it keeps every dependency.
 *   3. auto: without the search, no taper and the unpaced order's lead (lead_search = 0);
 *      with it, never predicted slower, a moved plan at least 1 % faster than the plain paced
 *      one and named in the line; a forced lead (paced_lead) is the paced plan's, and a forced
 *      taper it cannot run is refused in one line. On some point
 *      of the set the search moves the plan (else this test would check nothing of it).
 *
 * usage: test_ep_lead   last line: "N passed, N failed"
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
    const int ends[3] = {-1, 6, 9};
    for (int i = 0; i < 3; i++) {
        xs_moe_plan p;
        memset(&p, 0, sizeof p);
        p.kind = XS_MOE_INTERLEAVED;
        p.lead = 6;
        p.lead_end = ends[i];
        const xs_status st = xs_moe_problem_set_plan(m, 0, &p);
        XT_CHECK(st == XS_EINVAL && strstr(xs_errmsg(), "lead_end") && !strchr(xs_errmsg(), '\n'),
                 "lead 6, lead_end %d: want a one-line XS_EINVAL naming lead_end, got %d: %s",
                 ends[i], (int)st, xs_errmsg());
    }
    xs_moe_plan ok;
    memset(&ok, 0, sizeof ok);
    ok.kind = XS_MOE_INTERLEAVED;
    ok.lead = 6;
    ok.lead_end = 5;
    XT_CHECK(xs_moe_problem_set_plan(m, 0, &ok) == XS_OK, "lead 6 tapering to 5: %s", xs_errmsg());
    printf("ok   refusals: lead_end -1, = lead, > lead\n");
    /* plans compare field by field: a copy is equal, one field changed is not */
    xs_moe_plan a = ok, b = ok;
    XT_CHECK(xs_moe_plan_equal(&a, &b), "a plan and its copy differ");
    b.lead_end = 4;
    XT_CHECK(!xs_moe_plan_equal(&a, &b), "plans with lead_end 5 and 4 compare equal");
    b = ok;
    b.pace_bytes = 1;
    XT_CHECK(!xs_moe_plan_equal(&a, &b), "plans with pace_bytes 0 and 1 compare equal");
    xs_moe_problem_destroy(m);
}

typedef struct {
    int after_last_l1; /* Linear-2 tiles after the last Linear-1 tile */
    int min_lead;      /* least number of complete Linear-1 row blocks ahead of a row block's
                        * first Linear-2 tile, minus that row block, over row blocks >= 1 */
    int first_lead;    /* the same for row block 0 */
} order_facts;

/* The plan's list order (the model's trace), checked; facts about its leads into *f. */
static int check_order(xs_moe_problem *m, const xs_moe_plan *p, const xs_profile *prof,
                       const xs_moe_costs *c, const char *what, order_facts *f)
{
    xs_moe_info info;
    xs_moe_problem_info(m, &info);
    const int n = info.l1_tiles + info.l2_tiles, nrb = info.row_blocks;
    xs_moe_tile *t = (xs_moe_tile *)calloc((size_t)n + 1, sizeof *t);
    int *seen = (int *)calloc((size_t)n + 1, sizeof(int));
    int *l1_left = (int *)calloc((size_t)nrb + 1, sizeof(int));
    char *started = (char *)calloc((size_t)nrb + 1, 1);
    int ok = t && seen && l1_left && started;
    XT_CHECK(ok, "memory");
    double tot = NAN;
    if (ok) {
        ok = xs_moe_problem_set_plan(m, 0, p) == XS_OK &&
             xs_moe_predict_trace(m, 0, prof, NULL, c, 1, t, &tot) == XS_OK;
        XT_CHECK(ok, "%s: %s", what, xs_errmsg());
    }
    int dup = 0, early = 0, bad = 0, dep = 0;
    f->after_last_l1 = 0;
    f->min_lead = 1 << 30;
    f->first_lead = -1;
    if (ok) {
        for (int b = 0; b < nrb; b++)
            l1_left[b] = info.l1_per_rb;
        int last1 = -1, done_rb = 0; /* row blocks whose Linear-1 tiles are all placed */
        for (int i = 0; i < n; i++)
            if (t[i].kind == 1)
                last1 = i;
        for (int i = 0; i < n; i++) {
            if (t[i].id < 0 || t[i].id >= n || seen[t[i].id]++) {
                dup++;
                continue;
            }
            if (t[i].kind == 1) {
                if (--l1_left[t[i].rb] == 0)
                    while (done_rb < nrb && l1_left[done_rb] == 0)
                        done_rb++;
                continue;
            }
            if (l1_left[t[i].rb] > 0)
                early++;
            if (i > last1)
                f->after_last_l1++;
            if (!started[t[i].rb]) {
                started[t[i].rb] = 1;
                const int lead = done_rb - 1 - t[i].rb;
                if (t[i].rb == 0)
                    f->first_lead = lead;
                else if (lead < f->min_lead && done_rb < nrb)
                    f->min_lead = lead;
            }
        }
        xt_moe_trace_order(t, n, &info, &bad, &dep);
    }
    XT_CHECK(ok && !dup && !early && !bad && !dep && tot > 0,
             "%s: %d duplicate tasks, %d Linear-2 tiles before their row block's Linear-1, "
             "model: %d tasks out of order, %d dependencies broken", what, dup, early, bad, dep);
    free(t);
    free(seen);
    free(l1_left);
    free(started);
    return ok;
}

typedef struct {
    const char *cfg;
    int tokens, peers;
    xs_moe_routing rt;
} lead_point;

static void orders(const xs_profile *prof)
{
    const lead_point pts[] = {{"olmoe-1b-7b", 1024, 2, XS_ROUTE_BALANCED},
                              {"deepseek-v2-lite", 2048, 4, XS_ROUTE_ZIPF},
                              {"qwen3-30b-a3b", 2048, 2, XS_ROUTE_ZIPF}};
    for (size_t k = 0; k < sizeof pts / sizeof pts[0]; k++) {
        xs_moe_problem *m = xt_moe_problem(pts[k].cfg, pts[k].tokens, pts[k].peers, pts[k].rt);
        if (!m)
            continue;
        xs_moe_info info;
        xs_moe_problem_info(m, &info);
        xs_moe_costs c;
        xt_moe_synth_costs(xs_moe_config_find(pts[k].cfg), &c);
        const int d = xs_moe_default_lead(m);
        order_facts plain, f;
        char what[160];
        for (int paced = 0; paced < 2; paced++) {
            xs_moe_plan p;
            memset(&p, 0, sizeof p);
            p.kind = XS_MOE_INTERLEAVED;
            p.lead = d;
            if (paced) {
                p.pace_bytes = 131072;
                p.pace_bytes_per_ns = 50;
            }
            snprintf(what, sizeof what, "%s %s T=%d N=%d D=%d%s", pts[k].cfg,
                     xs_moe_routing_name(pts[k].rt), pts[k].tokens, pts[k].peers, d,
                     paced ? " paced" : "");
            if (!check_order(m, &p, prof, &c, what, &plain))
                continue;
            XT_CHECK(plain.first_lead >= d && plain.min_lead >= d,
                     "%s: leads %d (row block 0), %d (others)", what, plain.first_lead,
                     plain.min_lead);
            const int ends[3] = {1, d / 2, d - 1};
            for (int e = 0; e < 3; e++) {
                if (ends[e] < 1 || ends[e] >= d)
                    continue;
                p.lead_end = ends[e];
                char w2[200];
                snprintf(w2, sizeof w2, "%s tapering to %d", what, ends[e]);
                if (!check_order(m, &p, prof, &c, w2, &f))
                    continue;
                XT_CHECK(f.first_lead >= d && f.min_lead >= ends[e] &&
                             f.after_last_l1 < plain.after_last_l1 &&
                             f.after_last_l1 >= (ends[e] + 1) * info.l2_per_rb,
                         "%s: leads %d (row block 0), %d (others); %d Linear-2 tiles after the "
                         "last Linear-1 (untapered %d, at least %d)", w2, f.first_lead,
                         f.min_lead, f.after_last_l1, plain.after_last_l1,
                         (ends[e] + 1) * info.l2_per_rb);
            }
            p.lead_end = 0;
        }
        printf("ok   orders: %s %s T=%d N=%d, D=%d: %d Linear-2 tiles after the last Linear-1 "
               "untapered, tapers to 1, D/2, D-1 checked\n", pts[k].cfg,
               xs_moe_routing_name(pts[k].rt), pts[k].tokens, pts[k].peers, d,
               plain.after_last_l1);
        xs_moe_problem_destroy(m);
    }
}

static void search(const xs_profile *prof)
{
    const lead_point pts[] = {{"olmoe-1b-7b", 1024, 2, XS_ROUTE_BALANCED},
                              {"olmoe-1b-7b", 2048, 2, XS_ROUTE_BALANCED},
                              {"deepseek-v2-lite", 1024, 4, XS_ROUTE_BALANCED},
                              {"deepseek-v2-lite", 2048, 4, XS_ROUTE_ZIPF},
                              {"qwen1.5-moe-a2.7b", 2048, 8, XS_ROUTE_ZIPF}};
    int moved = 0, paced_pts = 0;
    for (size_t k = 0; k < sizeof pts / sizeof pts[0]; k++) {
        xs_moe_problem *m = xt_moe_problem(pts[k].cfg, pts[k].tokens, pts[k].peers, pts[k].rt);
        if (!m)
            continue;
        xs_moe_costs c;
        xt_moe_auto_costs(m, prof, pts[k].cfg, &c);
        char what[160];
        snprintf(what, sizeof what, "%s %s T=%d N=%d", pts[k].cfg, xs_moe_routing_name(pts[k].rt),
                 pts[k].tokens, pts[k].peers);
        xs_moe_model mm;
        xs_moe_model_default(&mm);
        mm.couriers = 0;
        xs_moe_auto_result on, off;
        mm.lead_search = 0;
        const int ok0 = xs_moe_auto(m, prof, &mm, &c, NULL, NULL, &off) == XS_OK;
        mm.lead_search = 1;
        const int ok1 = xs_moe_auto(m, prof, &mm, &c, NULL, NULL, &on) == XS_OK;
        XT_CHECK(ok0 && ok1, "%s: auto: %s", what, xs_errmsg());
        if (!ok0 || !ok1) {
            xs_moe_problem_destroy(m);
            continue;
        }
        XT_CHECK(off.plan.lead_end == 0 && isnan(off.paced_plain_ns) &&
                     (off.plan.kind != XS_MOE_INTERLEAVED || strstr(off.how, "tapering") == NULL),
                 "%s: without the search: lead_end %d, paced_plain %g: %s", what,
                 off.plan.lead_end, off.paced_plain_ns, off.how);
        XT_CHECK(on.auto_ns <= off.auto_ns * (1 + 1e-12),
                 "%s: the search predicted slower: %.1f against %.1f us", what, on.auto_ns / 1e3,
                 off.auto_ns / 1e3);
        const int paced = on.plan.pace_bytes > 0;
        paced_pts += paced;
        if (paced && !isnan(on.paced_plain_ns)) {
            XT_CHECK(fabs(on.paced_plain_ns - off.paced_ns) <= 1e-6 * off.paced_ns,
                     "%s: the plain paced prediction %.1f differs from the rule's %.1f us", what,
                     on.paced_plain_ns / 1e3, off.paced_ns / 1e3);
            const int mv = on.plan.lead != off.plan.lead || on.plan.lead_end != 0;
            moved += mv;
            XT_CHECK(!mv || on.paced_ns <= 0.99 * on.paced_plain_ns + 1e-6,
                     "%s: moved to D=%d E=%d at %.1f us, not 1 %% below %.1f us", what,
                     on.plan.lead, on.plan.lead_end, on.paced_ns / 1e3,
                     on.paced_plain_ns / 1e3);
            XT_CHECK((on.plan.lead_end > 0) == (strstr(on.how, "tapering") != NULL),
                     "%s: the line and the taper (%d) disagree: %s", what, on.plan.lead_end,
                     on.how);
            /* a forced lead is the paced plan's */
            xs_moe_model fm = mm;
            fm.paced_lead = 5;
            fm.paced_lead_end = 2;
            xs_moe_auto_result fr;
            XT_CHECK(xs_moe_auto(m, prof, &fm, &c, NULL, NULL, &fr) == XS_OK &&
                         (fr.plan.pace_bytes <= 0 ||
                          (fr.plan.lead == 5 && fr.plan.lead_end == 2)) &&
                         isnan(fr.paced_plain_ns),
                     "%s: forced lead 5:2 gave D=%d E=%d", what, fr.plan.lead, fr.plan.lead_end);
            /* and a forced taper it cannot run is refused in one line, not dropped */
            const int bad[3][2] = {{5, 5}, {0, 2}, {-1, 0}};
            for (int b = 0; b < 3; b++) {
                fm.paced_lead = bad[b][0];
                fm.paced_lead_end = bad[b][1];
                const xs_status st = xs_moe_auto(m, prof, &fm, &c, NULL, NULL, &fr);
                XT_CHECK(st == XS_EINVAL && strstr(xs_errmsg(), "forced paced lead") &&
                             !strchr(xs_errmsg(), '\n'),
                         "%s: forced lead %d:%d: want a one-line XS_EINVAL, got %d: %s", what,
                         bad[b][0], bad[b][1], (int)st, xs_errmsg());
            }
        }
        printf("ok   search: %s: %s\n", what, on.how);
        xs_moe_problem_destroy(m);
    }
    XT_CHECK(paced_pts > 0 && moved > 0, "the search moved the paced plan on %d of %d paced points",
             moved, paced_pts);
    printf("ok   search moved the paced plan on %d of %d paced points\n", moved, paced_pts);
}

int main(void)
{
    xs_profile prof;
    xs_profile_default(&prof);
    refusals();
    orders(&prof);
    search(&prof);
    return xt_done();
}
