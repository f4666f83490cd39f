// SPDX-License-Identifier: Apache-2.0
/*
 * test_ep_spill.c - the host side of the spilling kernel (xstage_ep.h: xs_moe_plan.spill_depth;
 * cuda/ep/ep.h: xs_moe_run_opts.defer = XS_MOE_DEFER_SPILL; docs/EP.md "The spilling kernel"),
 * CPU only: host-only problems (xs_moe_problem_create), no device.
 *
 *   1. Plans the kernel cannot run are refused with one line: a negative or too deep queue,
 *      spilling without the pacer, spilling in an adaptive plan.
 *   2. The model (xs_moe_predict_trace) with a pacer slow enough to hold most tiles back, at
 *      depths 1, 2 and XS_MOE_SPILL_MAX: every task runs once and after its dependencies; some
 *      tiles are deferred, each a Linear-2 tile with remote bytes whose flush starts after its
 *      main loop; a producer never holds more than `depth` of them at once; depth 0 defers none
 *      and holds tiles at the pacer instead. Each prediction is no faster than the drain at the
 *      pacer's rate.
 *   3. auto: where it paces, the spilling candidate is predicted (spill_ns) and reported in its
 *      line; where it does not pace, not. It is chosen only with auto_spill (the default) and a
 *      1 % gain.
 *
 * usage: test_ep_spill   last line: "N passed, N failed"
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
    xs_moe_plan bad[4];
    memset(bad, 0, sizeof bad);
    for (int i = 0; i < 4; i++) {
        bad[i].kind = XS_MOE_INTERLEAVED;
        bad[i].lead = 4;
        bad[i].pace_bytes = 131072;
        bad[i].pace_bytes_per_ns = 50;
        bad[i].spill_depth = 2;
    }
    bad[0].spill_depth = -1;
    bad[1].spill_depth = XS_MOE_SPILL_MAX + 1;
    bad[2].pace_bytes = 0; /* nothing is held back without the pacer */
    bad[3].kind = XS_MOE_ADAPTIVE;
    for (int i = 0; i < 4; i++) {
        const xs_status st = xs_moe_problem_set_plan(m, 0, &bad[i]);
        XT_CHECK(st == XS_EINVAL && strstr(xs_errmsg(), "spill_depth") &&
                     !strchr(xs_errmsg(), '\n'),
                 "bad spilling plan %d: want a one-line XS_EINVAL naming spill_depth, got %d: %s",
                 i, (int)st, xs_errmsg());
    }
    xs_moe_plan good = bad[0];
    good.spill_depth = XS_MOE_SPILL_MAX;
    XT_CHECK(xs_moe_problem_set_plan(m, 0, &good) == XS_OK, "spilling at the full depth: %s",
             xs_errmsg());
    printf("ok   refusals: depth -1 and %d, no pacer, adaptive\n", XS_MOE_SPILL_MAX + 1);
    xs_moe_problem_destroy(m);
}

/* the most deferred tiles one producer holds at once: a tile is held from its main loop's end
 * to the start of its flush */
static int max_held(const xs_moe_tile *t, int n, int grid)
{
    int worst = 0;
    for (int p = 0; p < grid; p++)
        for (int i = 0; i < n; i++) {
            if (t[i].cta != p || !t[i].deferred)
                continue;
            int held = 0;
            for (int j = 0; j < n; j++)
                held += t[j].cta == p && t[j].deferred && t[j].mma1_ns <= t[i].mma1_ns &&
                        t[j].st0_ns > t[i].mma1_ns;
            if (held > worst)
                worst = held;
        }
    return worst;
}

static void model_checks(const xs_profile *p)
{
    xt_moe_fixture f;
    if (!xt_moe_fixture_open(&f, "olmoe-1b-7b", 2048, 4, XS_ROUTE_ZIPF))
        return;
    xs_moe_problem *m = f.m;
    const xs_moe_costs c = f.c;
    const xs_moe_info info = f.info;
    const int n = f.n;
    xs_moe_tile *t = f.t;
    /* a third of the link: most tiles find the pacer closed */
    const double rate = p->drain_bytes_per_ns / 3;
    const int depths[4] = {0, 1, 2, XS_MOE_SPILL_MAX};
    for (int d = 0; d < 4; d++) {
        const xs_moe_plan pl = {XS_MOE_INTERLEAVED, xs_moe_default_lead(m), 0, 131072, rate,
                                0, 0, 0, depths[d]};
        double total = NAN;
        memset(t, 0, sizeof *t * (size_t)n);
        const int ok = xs_moe_problem_set_plan(m, 0, &pl) == XS_OK &&
                       xs_moe_predict_trace(m, 0, p, NULL, &c, 1, t, &total) == XS_OK;
        XT_CHECK(ok, "depth %d: %s", depths[d], xs_errmsg());
        if (!ok)
            continue;
        int bad_run, bad_dep, deferred = 0, bad_def = 0, held = 0;
        xt_moe_trace_order(t, n, &info, &bad_run, &bad_dep);
        for (int i = 0; i < n; i++) {
            bad_run += !(t[i].st1_ns >= t[i].st0_ns);
            if (t[i].deferred) {
                deferred++;
                bad_def += t[i].kind != 2 || t[i].remote_bytes <= 0 ||
                           t[i].st0_ns < t[i].mma1_ns;
            }
            held += t[i].kind == 2 && t[i].gate_ns > 0 && !t[i].deferred;
        }
        const int most = max_held(t, n, info.grid);
        const double drain = info.remote_bytes / rate;
        XT_CHECK(bad_run == 0 && bad_dep == 0, "depth %d: %d tasks not run once in order, %d "
                 "Linear-2 tiles before their Linear-1", depths[d], bad_run, bad_dep);
        XT_CHECK(bad_def == 0, "depth %d: %d deferred tiles without remote bytes or flushed "
                 "before their main loop ended", depths[d], bad_def);
        XT_CHECK(depths[d] ? deferred > info.l2_tiles / 10 : deferred == 0 && held > 0,
                 "depth %d: %d tiles deferred, %d held at the pacer", depths[d], deferred, held);
        XT_CHECK(most <= depths[d], "depth %d: a producer held %d deferred tiles at once",
                 depths[d], most);
        XT_CHECK(total >= drain * (1 - 1e-9), "depth %d: %.1f us, faster than the drain at the "
                 "pacer's rate %.1f us", depths[d], total / 1e3, drain / 1e3);
        printf("ok   model depth %d: %.1f us (drain at the pacer's rate %.1f us), %d of %d "
               "Linear-2 tiles deferred (at most %d per CTA at once), %d held at the pacer\n",
               depths[d], total / 1e3, drain / 1e3, deferred, info.l2_tiles, most, held);
    }
    xt_moe_fixture_close(&f);
}

static void auto_checks(const xs_profile *p)
{
    const char *names[2] = {"olmoe-1b-7b", "mixtral-8x7b"};
    for (int k = 0; k < 2; k++) {
        xs_moe_problem *m = xt_moe_problem(names[k], k ? 512 : 2048, k ? 8 : 4, XS_ROUTE_BALANCED);
        if (!m)
            continue;
        xs_moe_costs c;
        xt_moe_auto_costs(m, p, names[k], &c);
        xs_moe_model mm;
        xs_moe_model_default(&mm);
        XT_CHECK(mm.auto_spill == 1, "auto_spill is not the default");
        mm.auto_spill = 0;
        xs_moe_auto_result ar;
        XT_CHECK(xs_moe_auto(m, p, &mm, &c, NULL, NULL, &ar) == XS_OK, "auto: %s", xs_errmsg());
        const int paced = ar.plan.pace_bytes > 0;
        XT_CHECK(ar.plan.spill_depth == 0, "%s: spilling chosen without auto_spill: %s",
                 names[k], ar.how);
        XT_CHECK(paced ? isfinite(ar.spill_ns) && strstr(ar.how, "spilling") != NULL
                       : !strstr(ar.how, "spilling"),
                 "%s: paced %d, spilling predicted %.1f us, reported: %s", names[k], paced,
                 ar.spill_ns / 1e3, ar.how);
        const double paced_ns = ar.paced_ns;
        mm.auto_spill = 1;
        XT_CHECK(xs_moe_auto(m, p, &mm, &c, NULL, NULL, &ar) == XS_OK, "auto: %s", xs_errmsg());
        const int gain = paced && ar.spill_ns <= 0.99 * paced_ns;
        XT_CHECK((ar.plan.spill_depth > 0) == gain &&
                     (!gain || (ar.plan.spill_depth == XS_MOE_SPILL_DEPTH &&
                                ar.auto_ns == ar.spill_ns)),
                 "%s: auto_spill: spilling %.1f us vs paced %.1f us, depth %d", names[k],
                 ar.spill_ns / 1e3, paced_ns / 1e3, ar.plan.spill_depth);
        printf("ok   %s: %s; spilling %.1f us vs paced %.1f us: %s\n", names[k],
               paced ? "paced" : "not paced", ar.spill_ns / 1e3, paced_ns / 1e3,
               gain ? "chosen with auto_spill" : "not chosen");
        xs_moe_problem_destroy(m);
    }
}

int main(void)
{
    xs_profile p;
    xs_profile_default(&p);
    refusals();
    model_checks(&p);
    auto_checks(&p);
    return xt_done();
}
