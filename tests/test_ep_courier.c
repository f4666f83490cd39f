// SPDX-License-Identifier: Apache-2.0
/*
 * test_ep_courier.c - the host side of the fused MoE kernel's couriers (xstage_ep.h, docs/EP.md
 * "Couriers"), CPU only: host-only problems (xs_moe_problem_create), no device.
 *
 *   1. xs_moe_courier_drain, the couriers' link as auto predicts it: hand cases (one FIFO server at
 *      the pace; C servers at pace / C fed round-robin in position order; a tile without bytes is
 *      skipped without a wait; bad arguments give NaN), and on fresh random inputs: agreement
 *      with a nanosecond-stepped simulation of the C couriers (a different formulation: each
 *      courier works on its next tile once it is ready, one ns at a time), the lower bounds
 *      (every tile's ready time plus its own copy; all bytes at the full pace), monotonicity in the
 *      ready times and in the rate, and scaling (times x k at rate / k).
 *   2. Task lists: a courier plan's list is built for grid - C compute CTAs, so that the orders
 *      keep their meaning: a wave plan with C couriers on a grid of G gives the same list, and the
 *      same link-less prediction, as the wave plan on a grid of G - C; likewise interleaved with
 *      xs_moe_default_lead_ctas(G - C) = xs_moe_default_lead on G - C.
 *   3. The model of a courier plan: max(compute, courier link) with the link's bounds; a fast
 *      link gives the compute alone.
 *   4. Plans the kernel cannot run are refused with one line: C >= grid, C < 0, no rate, couriers
 *      with the epilogue pacer.
 *   5. The auto rule: with measured local-control traces its courier prediction is exactly
 *      compute = kernel x G/(G-C), link = xs_moe_courier_drain of the Linear-2 tiles' ends x
 *      G/(G-C), in the order whose local control is faster; it chooses couriers where the model
 *      blocks every main loop on a small backlog (all other candidates stall), not on a
 *      compute-bound point (a fast link), never with --couriers 0 or without remote bytes, and
 *      only the forced count with mm.couriers = C.
 *
 * usage: test_ep_courier   last line: "N passed, N failed"
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* plans are written positionally: the fields after the last one given are 0 */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include "xt.h"
#include "xt_rand.h"
#include "xstage.h"
#include "xstage_ep.h"
#include "xt_ep.h"

static int rnd(int n) { return (int)(xt_rng() % (uint64_t)n); }

/* ---- 1. the drain ------------------------------------------------------------------------------- */

/* The C couriers stepped one ns at a time: courier k works on its next tile (positions k, k + C,
 * ...) once the tile is ready, for bytes x C / rate ns; integer inputs keep the steps exact. */
static double drain_stepped(const int *ready, const int *work_ns, int n, int C)
{
    int next[64], left[64];
    for (int k = 0; k < C; k++) {
        next[k] = k;
        left[k] = -1; /* not started */
    }
    long t = 0, end = 0;
    for (;;) {
        int busy = 0;
        for (int k = 0; k < C; k++) {
            while (next[k] < n && work_ns[next[k]] == 0)
                next[k] += C; /* no bytes: skipped */
            if (next[k] >= n)
                continue;
            busy = 1;
            const int j = next[k];
            if (ready[j] > t)
                continue;
            if (left[k] < 0)
                left[k] = work_ns[j];
            if (--left[k] == 0) {
                left[k] = -1;
                next[k] += C;
                end = t + 1;
            }
        }
        if (!busy)
            break;
        t++;
    }
    return (double)end;
}

static void drain_checks(void)
{
    const double r1[3] = {0, 0, 100}, b1[3] = {1000, 1000, 0};
    XT_NEAR(xs_moe_courier_drain(r1, b1, 3, 1, 10.0), 200.0, 1e-12);
    const double r2[2] = {0, 500}, b2[2] = {1000, 1000};
    XT_NEAR(xs_moe_courier_drain(r2, b2, 2, 1, 10.0), 600.0, 1e-12);
    const double r3[3] = {0, 0, 0}, b3[3] = {1000, 1000, 1000};
    XT_NEAR(xs_moe_courier_drain(r3, b3, 3, 2, 10.0), 400.0, 1e-12); /* courier 0 has two */
    const double r4[2] = {0, 1e9}, b4[2] = {1000, 0};
    XT_NEAR(xs_moe_courier_drain(r4, b4, 2, 1, 10.0), 100.0, 1e-12); /* the empty tile waits not */
    /* round-robin, not first-free: tile 2 goes to courier 0 although courier 1 is idle */
    const double r5[3] = {0, 0, 0}, b5[3] = {1000, 10, 1000};
    XT_NEAR(xs_moe_courier_drain(r5, b5, 3, 2, 10.0), 400.0, 1e-12);
    XT_CHECK(xs_moe_courier_drain(r1, b1, 0, 3, 10.0) == 0.0, "no tile: 0");
    XT_CHECK(isnan(xs_moe_courier_drain(r1, b1, 3, 0, 10.0)), "no courier: NaN");
    XT_CHECK(isnan(xs_moe_courier_drain(r1, b1, 3, 2, 0.0)), "no rate: NaN");
    printf("ok   drain: hand cases\n");

    enum { NCASE = 400, NMAX = 14 };
    int bad_step = 0, bad_bound = 0, bad_mono = 0, bad_scale = 0;
    for (int cs = 0; cs < NCASE; cs++) {
        const int n = 1 + rnd(NMAX), C = 1 + rnd(5);
        const double rate = 0.5 + rnd(8); /* B/ns in all */
        int ready[NMAX], work[NMAX];
        double rd[NMAX], by[NMAX], tmp[NMAX];
        double sum = 0, lo = 0;
        for (int j = 0; j < n; j++) {
            ready[j] = rnd(4) ? rnd(300) : 0;
            work[j] = rnd(5) ? 1 + rnd(60) : 0; /* ns of one courier's work */
            rd[j] = ready[j];
            by[j] = work[j] * rate / C; /* bytes whose copy takes work[j] ns at rate / C */
            sum += by[j];
            if (work[j] && rd[j] + work[j] > lo)
                lo = rd[j] + work[j];
        }
        const double d = xs_moe_courier_drain(rd, by, n, C, rate);
        bad_step += fabs(d - drain_stepped(ready, work, n, C)) > 1e-6 * (1 + d);
        bad_bound += d < lo - 1e-9 || d < sum / rate - 1e-9;
        /* a later tile or a slower rate never ends earlier */
        const int j = rnd(n);
        memcpy(tmp, rd, sizeof(double) * (size_t)n);
        tmp[j] += 1 + rnd(100);
        bad_mono += xs_moe_courier_drain(tmp, by, n, C, rate) < d - 1e-9;
        bad_mono += xs_moe_courier_drain(rd, by, n, C, 0.5 * rate) < d - 1e-9;
        /* times x k at rate / k: the end x k */
        for (int i = 0; i < n; i++)
            tmp[i] = 3.0 * rd[i];
        bad_scale += fabs(xs_moe_courier_drain(tmp, by, n, C, rate / 3.0) - 3.0 * d) >
                     1e-9 * (1 + d);
    }
    XT_CHECK(bad_step == 0, "drain vs the stepped simulation: %d of %d cases differ", bad_step,
             NCASE);
    XT_CHECK(bad_bound == 0, "drain below its bounds on %d of %d cases", bad_bound, NCASE);
    XT_CHECK(bad_mono == 0, "drain not monotone on %d of %d cases", bad_mono, NCASE);
    XT_CHECK(bad_scale == 0, "drain does not scale on %d of %d cases", bad_scale, NCASE);
    printf("%s drain: %d random cases = the stepped simulation, bounds, monotone, scaling\n",
           bad_step + bad_bound + bad_mono + bad_scale ? "FAIL" : "ok  ", NCASE);
}

/* ---- 2.-4. plans and the model -------------------------------------------------------------------- */

/* (kind, rb, nb) of every list position of slot's plan, from the model's link-less trace */
static int list_of(xs_moe_problem *m, int slot, const xs_profile *p, const xs_moe_costs *c,
                   xs_moe_tile *t, double *total)
{
    return xs_moe_predict_trace(m, slot, p, NULL, c, 0, t, total) == XS_OK;
}

static int same_list(const xs_moe_tile *a, const xs_moe_tile *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].kind != b[i].kind || a[i].rb != b[i].rb || a[i].nb != b[i].nb)
            return 0;
    return 1;
}

/* m's task count (its Linear-1 and Linear-2 tiles), *info filled */
static int task_count(xs_moe_problem *m, xs_moe_info *info)
{
    xs_moe_problem_info(m, info);
    return info->l1_tiles + info->l2_tiles;
}

/* a zeroed trace of n tasks (one record to spare); NULL when out of memory */
static xs_moe_tile *trace_new(int n)
{
    return (xs_moe_tile *)calloc((size_t)n + 1, sizeof(xs_moe_tile));
}


static void plan_checks(const xs_profile *prof)
{
    const xs_moe_config *cfg = xs_moe_config_find("olmoe-1b-7b");
    XT_CHECK(cfg != NULL, "olmoe-1b-7b");
    if (!cfg)
        return;
    const int G = 132, C = 8;
    xs_moe_opts o = {1024, 2, XS_ROUTE_ZIPF, 0, 7u};
    xs_moe_problem *m = NULL, *m2 = NULL;
    XT_CHECK(xs_moe_problem_create(cfg, &o, G, &m) == XS_OK, "create: %s", xs_errmsg());
    XT_CHECK(xs_moe_problem_create(cfg, &o, G - C, &m2) == XS_OK, "create: %s", xs_errmsg());
    if (!m || !m2) {
        xs_moe_problem_destroy(m);
        xs_moe_problem_destroy(m2);
        return;
    }
    xs_moe_info info;
    const int n = task_count(m, &info);
    xs_moe_tile *a = trace_new(n), *b = trace_new(n);
    xs_moe_costs c;
    xt_moe_synth_costs(cfg, &c);
    const double rate = XS_MOE_COURIER_PACE_FRAC * prof->drain_bytes_per_ns;

    /* 2. lists built for grid - C */
    XT_CHECK(xs_moe_default_lead_ctas(m, G - C) == xs_moe_default_lead(m2),
             "lead for %d CTAs: %d, on a grid of %d: %d", G - C,
             xs_moe_default_lead_ctas(m, G - C), G - C, xs_moe_default_lead(m2));
    const xs_moe_plan cw = {XS_MOE_WAVE, 0, 0, 0, 0, C, rate}, w = {XS_MOE_WAVE, 0, 0, 0, 0};
    const int d = xs_moe_default_lead_ctas(m, G - C);
    const xs_moe_plan ci = {XS_MOE_INTERLEAVED, d, 0, 0, 0, C, rate};
    const xs_moe_plan in = {XS_MOE_INTERLEAVED, d, 0, 0, 0};
    const xs_moe_plan *pc[2] = {&cw, &ci}, *pn[2] = {&w, &in};
    for (int i = 0; i < 2 && a && b; i++) {
        double ta = NAN, tb = NAN;
        const int ok = xs_moe_problem_set_plan(m, 0, pc[i]) == XS_OK &&
                       xs_moe_problem_set_plan(m2, 0, pn[i]) == XS_OK && list_of(m, 0, prof, &c, a, &ta) &&
                       list_of(m2, 0, prof, &c, b, &tb);
        XT_CHECK(ok, "%s: %s", xs_moe_sched_name(pn[i]->kind), xs_errmsg());
        XT_CHECK(ok && same_list(a, b, n), "%s with %d couriers on %d CTAs: not the list of %d "
                 "CTAs", xs_moe_sched_name(pn[i]->kind), C, G, G - C);
        XT_CHECK(ok && ta == tb, "%s: link-less prediction %.1f us with couriers, %.1f us on %d "
                 "CTAs", xs_moe_sched_name(pn[i]->kind), ta / 1e3, tb / 1e3, G - C);
        int on_courier = 0;
        for (int k = 0; ok && k < n; k++)
            on_courier += a[k].cta >= G - C;
        XT_CHECK(on_courier == 0, "%d tasks predicted on courier CTAs", on_courier);
    }
    /* without couriers the lists differ (waves of >= 132 vs >= 124 Linear-1 tiles): the test
     * above can fail */
    {
        double ta, tb;
        const int ok = xs_moe_problem_set_plan(m, 0, &w) == XS_OK && list_of(m, 0, prof, &c, a, &ta) &&
                       list_of(m2, 0, prof, &c, b, &tb);
        XT_CHECK(ok && !same_list(a, b, n), "wave on %d and on %d CTAs give the same list: the "
                 "list check proves nothing", G, G - C);
    }
    printf("ok   task lists with %d couriers = the lists of %d CTAs (wave, interleaved D=%d)\n", C,
           G - C, d);

    /* 3. the model of a courier plan */
    {
        double t0 = NAN, tl = NAN, tfast = NAN, tslow = NAN;
        XT_CHECK(xs_moe_problem_set_plan(m, 0, &cw) == XS_OK, "plan: %s", xs_errmsg());
        XT_CHECK(xs_moe_predict(m, 0, prof, NULL, &c, 0, &t0) == XS_OK, "%s", xs_errmsg());
        XT_CHECK(xs_moe_predict(m, 0, prof, NULL, &c, 1, &tl) == XS_OK, "%s", xs_errmsg());
        XT_CHECK(tl >= t0 && tl >= info.remote_bytes / rate * (1 - 1e-12),
                 "courier plan: %.1f us below compute %.1f us or drain %.1f us", tl / 1e3,
                 t0 / 1e3, info.remote_bytes / rate / 1e3);
        xs_moe_plan fast = cw, slow = cw;
        fast.courier_bytes_per_ns = 1e8;
        slow.courier_bytes_per_ns = 1.0;
        XT_CHECK(xs_moe_problem_set_plan(m, 0, &fast) == XS_OK &&
                 xs_moe_predict(m, 0, prof, NULL, &c, 1, &tfast) == XS_OK, "%s", xs_errmsg());
        XT_NEAR(tfast, t0, 1e-6);
        XT_CHECK(xs_moe_problem_set_plan(m, 0, &slow) == XS_OK &&
                 xs_moe_predict(m, 0, prof, NULL, &c, 1, &tslow) == XS_OK, "%s", xs_errmsg());
        XT_CHECK(tslow >= info.remote_bytes / 1.0 && tslow <= info.remote_bytes / 1.0 + t0,
                 "1 B/ns couriers: %.1f us, remote bytes %.0f, compute %.1f us", tslow / 1e3,
                 info.remote_bytes, t0 / 1e3);
        /* the predicted trace hands every Linear-2 tile's remote bytes to the couriers */
        double tt, sum = 0;
        XT_CHECK(xs_moe_problem_set_plan(m, 0, &cw) == XS_OK &&
                 xs_moe_predict_trace(m, 0, prof, NULL, &c, 1, a, &tt) == XS_OK, "%s",
                 xs_errmsg());
        for (int k = 0; k < n; k++)
            sum += a[k].kind == 2 ? a[k].remote_bytes : 0;
        XT_NEAR(sum, info.remote_bytes, 1e-12);
        XT_NEAR(tt, tl, 1e-12);
        printf("ok   model: courier plan %.1f us (compute %.1f, remote bytes at %.1f B/ns %.1f)\n",
               tl / 1e3, t0 / 1e3, rate, info.remote_bytes / rate / 1e3);
    }

    /* 4. refused plans, one line each */
    const xs_moe_plan bad[5] = {
        {XS_MOE_WAVE, 0, 0, 0, 0, G, rate},       {XS_MOE_WAVE, 0, 0, 0, 0, -2, rate},
        {XS_MOE_WAVE, 0, 0, 0, 0, 4, 0},          {XS_MOE_WAVE, 0, 0, 0, 0, 4, INFINITY},
        {XS_MOE_INTERLEAVED, 3, 0, 262144, 40.0, 4, rate},
    };
    for (int i = 0; i < 5; i++) {
        XT_CHECK(xs_moe_problem_set_plan(m, 0, &bad[i]) == XS_EINVAL, "bad courier plan %d accepted", i);
        XT_CHECK(strchr(xs_errmsg(), '\n') == NULL && strlen(xs_errmsg()) > 10,
                 "one-line message: %s", xs_errmsg());
    }
    const xs_moe_plan most = {XS_MOE_WAVE, 0, 0, 0, 0, G - 1, rate}; /* one CTA computes */
    XT_CHECK(xs_moe_problem_set_plan(m, 0, &most) == XS_OK, "%d couriers of %d: %s", G - 1, G,
             xs_errmsg());
    printf("ok   bad courier plans refused: %s\n", xs_errmsg());

    free(a);
    free(b);
    xs_moe_problem_destroy(m);
    xs_moe_problem_destroy(m2);
}

/* ---- 5. the auto rule ------------------------------------------------------------------------------ */

static void auto_checks(const xs_profile *prof)
{
    xs_moe_config cfg = {"model", 2048, 1024, 64, 8, {0, 0, 0}, 4, 0};
    const int G = 132;
    xs_moe_opts o = {1024, 4, XS_ROUTE_BALANCED, 0, 2u};
    xs_moe_problem *m = NULL;
    XT_CHECK(xs_moe_problem_create(&cfg, &o, G, &m) == XS_OK, "create: %s", xs_errmsg());
    if (!m)
        return;
    xs_moe_info info;
    const int n = task_count(m, &info);
    xs_moe_tile *tw = trace_new(n), *ti = trace_new(n), *tb = trace_new(n);
    if (!tw || !ti || !tb) {
        XT_CHECK(0, "out of memory");
        free(tw); free(ti); free(tb);
        xs_moe_problem_destroy(m);
        return;
    }
    xs_moe_costs c;
    xt_moe_synth_costs(&cfg, &c);
    /* "measured" local controls: the model's link-less traces, stretched by 10 % (wave) and
     * 5 % (interleaved), so the scaling of the stamps is visible */
    const xs_moe_plan wp = {XS_MOE_WAVE, 0, 0, 0, 0};
    const xs_moe_plan ip = {XS_MOE_INTERLEAVED, xs_moe_default_lead(m), 0, 0, 0};
    double kw = NAN, ki = NAN;
    XT_CHECK(xs_moe_problem_set_plan(m, 0, &wp) == XS_OK && xs_moe_problem_set_plan(m, 1, &ip) == XS_OK &&
             xs_moe_predict_trace(m, 0, prof, NULL, &c, 0, tw, &kw) == XS_OK &&
             xs_moe_predict_trace(m, 1, prof, NULL, &c, 0, ti, &ki) == XS_OK, "%s", xs_errmsg());
    const double stretch[2] = {1.10, 1.05};
    xs_moe_tile *tr[2] = {tw, ti};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < n; k++) {
            tr[s][k].fetch_ns *= stretch[s];
            tr[s][k].mma0_ns *= stretch[s];
            tr[s][k].mma1_ns *= stretch[s];
            tr[s][k].st0_ns *= stretch[s];
            tr[s][k].st1_ns *= stretch[s];
        }
    xs_moe_costs wc = c, ic = c;
    wc.kernel_ns = kw * stretch[0];
    ic.kernel_ns = ki * stretch[1];
    const xs_moe_local_traces lt = {tw, n, ti, n};
    xs_moe_model mm;
    xs_moe_model_default(&mm);
    XT_CHECK(mm.couriers == XS_MOE_COURIERS_AUTO && mm.courier_pace_frac == 0.9 &&
                 mm.auto_couriers == 0 && mm.courier_copy_bytes_per_ns == 9.2,
             "defaults: couriers %d at %.2f R, auto may choose them %d, copy %.2f B/ns",
             mm.couriers, mm.courier_pace_frac, mm.auto_couriers, mm.courier_copy_bytes_per_ns);
    /* the default model never chooses couriers, and a courier copies at most 9.2 B/ns */
    {
        xs_moe_model d = mm;
        d.block_bytes = 65536; /* where couriers win by far (below) */
        xs_moe_auto_result a1, a2;
        xs_moe_model u = d;
        u.courier_copy_bytes_per_ns = 0;
        XT_CHECK(xs_moe_auto(m, prof, &d, &wc, &ic, &lt, &a1) == XS_OK &&
                     xs_moe_auto(m, prof, &u, &wc, &ic, &lt, &a2) == XS_OK,
                 "auto: %s", xs_errmsg());
        XT_CHECK(a1.plan.couriers == 0 && strstr(a1.how, "not chosen") != NULL,
                 "default model chose couriers: %s", a1.how);
        XT_CHECK(a1.courier.couriers > 0 && a2.courier.couriers > 0 &&
                     a1.courier_link_ns >= a2.courier_link_ns,
                 "a copy-limited link (%.1f us) is no faster than an unlimited one (%.1f us)",
                 a1.courier_link_ns / 1e3, a2.courier_link_ns / 1e3);
        printf("ok   default model: couriers predicted, not chosen: %s\n", a1.how);
    }
    /* below: the choice logic as such, couriers allowed and their copy unlimited */
    mm.auto_couriers = 1;
    mm.courier_copy_bytes_per_ns = 0;
    const double rate = mm.courier_pace_frac * prof->drain_bytes_per_ns;
    xs_moe_auto_result ar;
    XT_CHECK(xs_moe_auto(m, prof, &mm, &wc, &ic, &lt, &ar) == XS_OK, "auto: %s", xs_errmsg());
    const int fast_inter = ic.kernel_ns < wc.kernel_ns;
    XT_CHECK(ar.courier.couriers == 4 || ar.courier.couriers == 8, "courier candidate C=%d",
             ar.courier.couriers);
    XT_CHECK(ar.courier.kind == (fast_inter ? XS_MOE_INTERLEAVED : XS_MOE_WAVE),
             "couriers in the %s order, the faster local control is %s",
             xs_moe_sched_name(ar.courier.kind), fast_inter ? "interleaved" : "wave");
    XT_CHECK(ar.courier.courier_bytes_per_ns == rate && ar.courier.pace_bytes == 0,
             "courier plan at %.2f B/ns (want %.2f), pace_bytes %.0f",
             ar.courier.courier_bytes_per_ns, rate, ar.courier.pace_bytes);
    XT_CHECK(ar.courier.kind == XS_MOE_WAVE ||
             ar.courier.lead == xs_moe_default_lead_ctas(m, G - ar.courier.couriers),
             "courier plan's lead %d, want the default for %d CTAs", ar.courier.lead,
             G - ar.courier.couriers);
    /* the prediction by hand: both candidates, from the faster order's stamps */
    {
        const xs_moe_tile *src = fast_inter ? ti : tw;
        const double kern = fast_inter ? ic.kernel_ns : wc.kernel_ns;
        /* the Linear-2 tiles' remote bytes: a courier plan's predicted trace hands them over */
        const xs_moe_plan cp = {XS_MOE_WAVE, 0, 0, 0, 0, 4, rate};
        double tt;
        XT_CHECK(xs_moe_problem_set_plan(m, 2, &cp) == XS_OK &&
                 xs_moe_predict_trace(m, 2, prof, NULL, &c, 0, tb, &tt) == XS_OK, "%s",
                 xs_errmsg());
        double *rem_of = (double *)calloc((size_t)n + 1, sizeof(double));
        double *ready = (double *)malloc(sizeof(double) * (size_t)(n + 1));
        double *bytes = (double *)malloc(sizeof(double) * (size_t)(n + 1));
        double best = INFINITY, best_comp = NAN, best_link = NAN;
        int best_c = 0;
        if (rem_of && ready && bytes) {
            for (int k = 0; k < n; k++)
                if (tb[k].kind == 2)
                    rem_of[tb[k].id] = tb[k].remote_bytes;
            const int cands[2] = {4, 8};
            for (int q = 0; q < 2; q++) {
                const double sc = (double)G / (G - cands[q]);
                int n2 = 0;
                for (int k = 0; k < n; k++)
                    if (src[k].kind == 2) {
                        ready[n2] = src[k].st1_ns * sc;
                        bytes[n2++] = rem_of[src[k].id];
                    }
                const double comp = kern * sc;
                const double link = xs_moe_courier_drain(ready, bytes, n2, cands[q], rate);
                const double t = comp > link ? comp : link;
                if (t < best) {
                    best = t;
                    best_c = cands[q];
                    best_comp = comp;
                    best_link = link;
                }
            }
        }
        XT_CHECK(ar.courier.couriers == best_c, "auto's candidate C=%d, by hand C=%d",
                 ar.courier.couriers, best_c);
        XT_NEAR(ar.courier_ns, best, 1e-9);
        XT_NEAR(ar.courier_compute_ns, best_comp, 1e-9);
        XT_NEAR(ar.courier_link_ns, best_link, 1e-9);
        printf("ok   auto's courier prediction = compute x G/(G-C), link = drain of the scaled "
               "stamps: C=%d %s %.1f us (compute %.1f, link %.1f)\n", best_c,
               xs_moe_sched_name(ar.courier.kind), best / 1e3, best_comp / 1e3, best_link / 1e3);
        free(rem_of);
        free(ready);
        free(bytes);
    }
    /* the decision: couriers replace the other rules' decision only if >= 2 % faster */
    {
        xs_moe_model none = mm;
        none.couriers = 0;
        xs_moe_auto_result a0;
        XT_CHECK(xs_moe_auto(m, prof, &none, &wc, &ic, &lt, &a0) == XS_OK, "auto: %s",
                 xs_errmsg());
        const int take = ar.courier_ns <= 0.98 * a0.auto_ns;
        XT_CHECK((ar.plan.couriers > 0) == take, "couriers predicted %.1f us vs the others' "
                 "decision %.1f us: chosen %d", ar.courier_ns / 1e3, a0.auto_ns / 1e3,
                 ar.plan.couriers);
        XT_CHECK(take ? ar.auto_ns == ar.courier_ns : ar.auto_ns == a0.auto_ns &&
                 ar.plan.kind == a0.plan.kind && ar.plan.lead == a0.plan.lead &&
                 ar.plan.pace_bytes == a0.plan.pace_bytes, "the decision changed without "
                 "couriers chosen");
    }
    XT_CHECK(strstr(ar.how, "couriers C=") != NULL, "the how line names the couriers: %s", ar.how);
    printf("     %s\n", ar.how);

    /* every main loop stalls above 64 KB of backlog: every epilogue burst (and a pacer that lets
     * 256 KB in) blocks the GPU, the couriers at 0.9 R do not: couriers chosen. (With the default
     * 128 KB pacer, the lead search finds a paced order within 2 % of them; docs/EP.md, "The
     * paced order's lead".) */
    xs_moe_model tight = mm;
    tight.block_bytes = 65536;
    tight.pace_bytes = 262144;
    XT_CHECK(xs_moe_auto(m, prof, &tight, &wc, &ic, &lt, &ar) == XS_OK, "auto: %s", xs_errmsg());
    XT_CHECK(ar.plan.couriers > 0 && ar.auto_ns == ar.courier_ns && strstr(ar.how, ": chosen"),
             "blocking at 64 KB: couriers %.1f us not chosen: %s", ar.courier_ns / 1e3, ar.how);
    printf("ok   auto, blocking at 64 KB: %s\n", ar.how);
    /* forced count */
    tight.couriers = 6;
    XT_CHECK(xs_moe_auto(m, prof, &tight, &wc, &ic, &lt, &ar) == XS_OK, "auto: %s", xs_errmsg());
    XT_CHECK(ar.courier.couriers == 6 && ar.plan.couriers == 6, "--couriers 6: candidate %d, "
             "chosen %d", ar.courier.couriers, ar.plan.couriers);
    /* never */
    tight.couriers = 0;
    XT_CHECK(xs_moe_auto(m, prof, &tight, &wc, &ic, &lt, &ar) == XS_OK, "auto: %s", xs_errmsg());
    XT_CHECK(ar.courier.couriers == 0 && ar.plan.couriers == 0 && isnan(ar.courier_ns),
             "--couriers 0: candidate %d, chosen %d", ar.courier.couriers, ar.plan.couriers);
    /* compute-bound (a fast link): losing C of G SMs is never won back */
    xs_profile fast = *prof;
    fast.drain_bytes_per_ns = 1e6;
    fast.capacity_bytes = 1e12;
    fast.capacity_bytes_per_producer = 0;
    XT_CHECK(xs_moe_auto(m, &fast, &mm, &wc, &ic, &lt, &ar) == XS_OK, "auto: %s", xs_errmsg());
    XT_CHECK(ar.plan.couriers == 0 && ar.courier_ns >= ar.auto_ns,
             "compute-bound: couriers chosen (%d) or predicted faster (%.1f vs %.1f us)",
             ar.plan.couriers, ar.courier_ns / 1e3, ar.auto_ns / 1e3);
    XT_CHECK(strstr(ar.how, "not chosen") != NULL, "compute-bound: %s", ar.how);
    printf("ok   auto, compute-bound: %s\n", ar.how);
    /* the model's own local traces (no measured stamps): a prediction all the same */
    XT_CHECK(xs_moe_auto(m, prof, &mm, &wc, &ic, NULL, &ar) == XS_OK && ar.courier.couriers > 0 &&
             ar.courier_ns > 0, "auto without traces: %s", xs_errmsg());
    xs_moe_problem_destroy(m);

    /* N = 1: no remote byte, no courier */
    o.peers = 1;
    XT_CHECK(xs_moe_problem_create(&cfg, &o, G, &m) == XS_OK, "create: %s", xs_errmsg());
    if (m) {
        XT_CHECK(xs_moe_auto(m, prof, &mm, &c, NULL, NULL, &ar) == XS_OK, "auto: %s", xs_errmsg());
        XT_CHECK(ar.courier.couriers == 0 && ar.plan.couriers == 0,
                 "N=1: courier candidate %d", ar.courier.couriers);
        xs_moe_problem_destroy(m);
    }
    free(tw);
    free(ti);
    free(tb);
}

int main(void)
{
    const uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    xt_rng_state = seed;
    printf("# seed %llu\n", (unsigned long long)seed);
    xs_profile prof;
    xs_profile_default(&prof);
    drain_checks();
    plan_checks(&prof);
    auto_checks(&prof);
    return xt_done();
}
