// SPDX-License-Identifier: Apache-2.0
/*
 * test_model.c - closed forms, the event simulation against them (property tests over random
 * parameters), producer drift, the per-producer cap, and the planner's invariants.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xstage.h"
#include "xt.h"
#include "xt_profile.h"

static uint64_t rng_state;
static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static double uniform(double a, double b) { return a + (b - a) * urand(); }
static double loguniform(double a, double b) { return exp(uniform(log(a), log(b))); }

/* A fixed PCIe-like profile (the provisional numbers of docs/MODEL.md), so that these tests do
 * not move when the embedded default is recalibrated. */
static xs_profile fixed(void) { return xt_provisional_profile(); }

static xs_profile b200(void)
{
    xs_profile p = fixed();
    p.issue_bytes_per_ns = 43.1;
    p.drain_bytes_per_ns = 717;
    p.capacity_bytes = 4456448;
    p.capacity_bytes_per_producer = 0;
    p.issue_overhead_ns = 0;
    return p;
}

static xs_profile random_profile(void)
{
    xs_profile p = fixed();
    p.issue_bytes_per_ns = loguniform(5, 100);
    p.drain_bytes_per_ns = loguniform(20, 1000);
    p.issue_overhead_ns = urand() < 0.3 ? 0 : uniform(0, 400);
    p.chunk_bytes = 512 * (1 << (int)uniform(0, 5)); /* 512 .. 8K */
    p.capacity_bytes = p.chunk_bytes * floor(loguniform(64, 4096));
    p.capacity_bytes_per_producer = urand() < 0.5 ? 0 : p.chunk_bytes * floor(uniform(2, 32));
    p.queue_bytes_per_producer = urand() < 0.5 ? 0 : p.chunk_bytes * floor(uniform(1, 9));
    p.reserve_bytes_per_producer = urand() < 0.5 ? 0 : p.chunk_bytes * floor(uniform(0, 16));
    /* tandem queues: a buffer of its own behind each producer's issue path (0: none) */
    p.buffer_bytes_per_producer = urand() < 0.5 ? 0 : p.chunk_bytes * floor(uniform(1, 33));
    return p;
}

/* random_profile() with a stage that never fills */
static xs_profile unbounded_profile(void)
{
    xs_profile p = random_profile();
    p.capacity_bytes = 1e14;
    p.capacity_bytes_per_producer = 0;
    return p;
}

static void one_row(xs_schedule *s, int k, int64_t b, double g, int rows)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < rows; i++)
        xs_schedule_append(s, k, b, g);
}

/* One isolated burst of k producers x b bytes, simulated into *r (1), or a failed check (0;
 * nothing left to free). */
static int isolated_burst(const xs_profile *p, int k, int64_t b, xs_schedule *s, xs_result *r)
{
    one_row(s, k, b, 0, 1);
    if (xs_simulate(p, s, NULL, r) != XS_OK) {
        XT_CHECK(0, "simulate: %s", xs_errmsg());
        xs_schedule_free(s);
        return 0;
    }
    return 1;
}

static void test_closed_forms(void)
{
    xs_profile p = b200();
    xs_bg o;
    xs_bg_eval(&p, 148, 32768, 0, &o);
    XT_NEAR(o.t_iss0_ns, 32768 / 43.1, 1e-12);   /* the published ~0.76 us */
    XT_NEAR(o.v_over_r_ns, 148.0 * 32768 / 717, 1e-12);
    XT_NEAR(o.g_star_ns, 148.0 * 32768 / 717 - 32768 / 43.1, 1e-12);
    XT_NEAR(o.q_peak0_bytes, 148.0 * 32768 - 717 * (32768 / 43.1), 1e-12);
    XT_NEAR(o.t_period_ns, 148.0 * 32768 / 717, 1e-12);
    XT_CHECK(!o.rate_ok && o.capacity_ok && !o.no_backpressure, "zero gap at B=32K is rate-bound");
    /* exactly G*: the rate inequality holds with equality */
    xs_bg_eval(&p, 148, 32768, o.g_star_ns, &o);
    XT_CHECK(o.rate_ok && o.no_backpressure, "G = G* meets the criterion");
    XT_NEAR(o.t_period_ns, o.t_iss0_ns + o.g_star_ns, 1e-12);
    XT_CHECK(o.delta_t_iss_ns == 0, "no overhead at G*: %g", o.delta_t_iss_ns);
    /* above the knee an isolated burst is capacity-bound */
    xs_bg_eval(&p, 148, 131072, 0, &o);
    XT_NEAR(o.t_iss_iso_ns, (148.0 * 131072 - 4456448) / 717, 1e-12);
    XT_CHECK(!o.capacity_ok, "148 x 128K exceeds Q");
    /* per-producer cap: Q(K) = min(Q, K * cap) */
    p.capacity_bytes_per_producer = 16384;
    XT_NEAR(xs_capacity(&p, 16), 16.0 * 16384, 1e-12);
    XT_NEAR(xs_capacity(&p, 1000), 4456448, 1e-12);
    /* capacity-aware steady state equals the published one when Q >= R*(G+o) */
    p = b200();
    xs_bg_eval(&p, 148, 65536, 2000, &o);
    XT_NEAR(o.t_iss_steady_ns, o.t_iss_ns, 1e-12);
    /* and differs when the stage runs dry in the gap (small Q, long gap) */
    p.capacity_bytes = 65536;
    xs_bg_eval(&p, 148, 65536, 5000, &o);
    XT_CHECK(o.t_iss_steady_ns > o.t_iss_ns, "steady %g > published %g when Q < R*G",
             o.t_iss_steady_ns, o.t_iss_ns);
}

/* The issue's acceptance figures: the published B200 numbers, B from 8 KB to 256 KB. */
static void test_b200_acceptance(void)
{
    xs_profile p = b200();
    for (int64_t B = 8192; B <= 262144; B *= 2) {
        xs_schedule s;
        xs_result r;
        one_row(&s, 148, B, 0, 1);
        XT_CHECK(xs_simulate(&p, &s, NULL, &r) == XS_OK, "%s", xs_errmsg());
        double want = fmax(B / 43.1, (148.0 * B - 4456448) / 717);
        XT_NEAR(r.rows[0].issue_max_ns, want, 0.02);
        xs_result_free(&r);
        xs_schedule_free(&s);
        one_row(&s, 148, B, 0, 10);
        XT_CHECK(xs_simulate(&p, &s, NULL, &r) == XS_OK, "%s", xs_errmsg());
        if (10.0 * 148 * B > 4456448 + 148.0 * B / 43.1 * 717)
            XT_NEAR(r.rows[9].end_ns, (10.0 * 148 * B - 4456448) / 717, 0.02);
        xs_result_free(&r);
        xs_schedule_free(&s);
    }
}

/* Random parameters: an isolated burst agrees with T_iss_iso within 1 %. */
static void test_isolated_property(int trials)
{
    int fails = 0;
    for (int t = 0; t < trials; t++) {
        xs_profile p = random_profile();
        int k = (int)loguniform(1, 257);
        int64_t b = (int64_t)(p.chunk_bytes * floor(loguniform(16, 512)));
        /* how a reserve leaves (when drained, within f*Q of the drain head, when the producer
         * stops offering): with equal shares the last producer stays within the same bounds */
        double u = urand();
        p.reserve_release = u < 0.3;
        p.reserve_shared_fraction = u < 0.3 || u > 0.7 ? 0 : uniform(0, 1);
        xs_schedule s;
        xs_result r;
        if (!isolated_burst(&p, k, b, &s, &r))
            continue;
        xs_bg o;
        xs_bg_eval(&p, k, (double)b, 0, &o);
        double got = r.rows[0].issue_max_ns;
        int bad = p.reserve_bytes_per_producer == 0
                      ? !xt_near(got, o.t_iss_iso_ns, 0.01)
                      : !(got >= o.t_iss_iso_ns * 0.99 && got <= o.t_iss_last_ns * 1.01);
        if (bad) {
            fails++;
            fprintf(stderr, "isolated: r=%g R=%g o=%g Q=%g cap=%g queue=%g chunk=%g K=%d B=%lld: "
                            "sim %g closed %g\n", p.issue_bytes_per_ns, p.drain_bytes_per_ns,
                    p.issue_overhead_ns, p.capacity_bytes, p.capacity_bytes_per_producer,
                    p.queue_bytes_per_producer, p.chunk_bytes, k, (long long)b,
                    r.rows[0].issue_max_ns, o.t_iss_iso_ns);
            fprintf(stderr, "  reserve %g (release %g, fraction %g), buffer %g: last-producer "
                            "form %g\n", p.reserve_bytes_per_producer, p.reserve_release,
                    p.reserve_shared_fraction, p.buffer_bytes_per_producer, o.t_iss_last_ns);
        }
        xs_result_free(&r);
        xs_schedule_free(&s);
    }
    XT_CHECK(fails == 0, "%d of %d isolated bursts off by more than 1 %%", fails, trials);
}

/* A last chunk of s < c bytes behind a store queue enters it by its share: an unconstrained
 * burst of any size (not only whole chunks) issues in o + [B - b]+/r, as the closed form says
 * (random profiles, a stage that never fills, b a whole number of chunks). */
static void test_partial_chunk(int trials)
{
    int fails = 0;
    for (int t = 0; t < trials; t++) {
        xs_profile p = unbounded_profile();
        p.queue_bytes_per_producer = p.chunk_bytes * floor(uniform(1, 9));
        int k = (int)loguniform(1, 64);
        int64_t b = 16 * (int64_t)loguniform(p.queue_bytes_per_producer / 16 + 1, 65536);
        xs_schedule s;
        xs_result r;
        if (!isolated_burst(&p, k, b, &s, &r))
            continue;
        double want = p.issue_overhead_ns +
                      fmax(0, (double)b - p.queue_bytes_per_producer) / p.issue_bytes_per_ns;
        if (!xt_near(r.rows[0].issue_max_ns, want, 1e-6)) {
            fails++;
            fprintf(stderr, "partial chunk: r=%g o=%g chunk=%g queue=%g buffer=%g K=%d B=%lld: "
                            "sim %g, o + (B - b)/r %g\n", p.issue_bytes_per_ns,
                    p.issue_overhead_ns, p.chunk_bytes, p.queue_bytes_per_producer,
                    p.buffer_bytes_per_producer, k, (long long)b, r.rows[0].issue_max_ns, want);
        }
        xs_result_free(&r);
        xs_schedule_free(&s);
    }
    XT_CHECK(fails == 0, "%d of %d unconstrained bursts off o + [B - b]+/r", fails, trials);
}

/* overflow_capacity_loss, overflow_loss_ns: a burst that never fills the stage is unchanged; one
 * that stalls throughout pays loss*Q/R at once, at most that over a time; and the stage, once
 * empty, starts whole again (the second of two synchronised bursts far apart is the first one
 * again). */
static void test_overflow_loss(void)
{
    xs_profile p = fixed();
    p.queue_bytes_per_producer = p.reserve_bytes_per_producer = p.buffer_bytes_per_producer = 0;
    p.capacity_bytes_per_producer = 0;
    p.arbitration_skew = 0;
    const double Q = p.capacity_bytes, R = p.drain_bytes_per_ns;
    const int k = 32;
    double t[2][3]; /* [below, past the knee][none, at once, over a time] */
    for (int v = 0; v < 2; v++)
        for (int m = 0; m < 3; m++) {
            p.overflow_capacity_loss = m ? 0.5 : 0;
            p.overflow_loss_ns = m == 2 ? 4 * Q / R : 0;
            int64_t b = (int64_t)((v ? 4 : 0.5) * Q / k / 16) * 16;
            xs_schedule s = {0};
            xs_schedule_append(&s, k, b, 100 * Q / R); /* the stage runs empty in the gap */
            xs_schedule_append(&s, k, b, 0);
            xs_result r;
            xs_sim_opts so = {.sync = 1}; /* both rows start together: no drift */
            XT_CHECK(xs_simulate(&p, &s, &so, &r) == XS_OK, "%s", xs_errmsg());
            t[v][m] = r.rows[0].issue_max_ns;
            XT_CHECK(xt_near(r.rows[1].issue_max_ns, r.rows[0].issue_max_ns, 1e-9),
                     "loss %g over %g ns: the second burst %g, the first %g",
                     p.overflow_capacity_loss, p.overflow_loss_ns, r.rows[1].issue_max_ns,
                     r.rows[0].issue_max_ns);
            xs_result_free(&r);
            xs_schedule_free(&s);
        }
    XT_CHECK(t[0][1] == t[0][0] && t[0][2] == t[0][0], "below the knee: %g %g %g", t[0][0],
             t[0][1], t[0][2]);
    XT_CHECK(fabs(t[1][1] - t[1][0] - 0.5 * Q / R) < 0.01 * (0.5 * Q / R),
             "past the knee, at once: %g more, loss*Q/R %g", t[1][1] - t[1][0], 0.5 * Q / R);
    XT_CHECK(t[1][2] > t[1][0] && t[1][2] < t[1][1], "over a time: %g between %g and %g",
             t[1][2], t[1][0], t[1][1]);
}

/* Random parameters: steady periodic bursts of identical, synchronised producers reach the
 * capacity-aware steady state: period and issue time within 1 %. */
static void test_periodic_property(int trials)
{
    int fails = 0;
    for (int t = 0; t < trials; t++) {
        xs_profile p = random_profile();
        p.barrier_ns = 0;
        p.reserve_bytes_per_producer = 0; /* the steady forms assume producers that finish
                                           * together; a reserve is bounded (isolated test) */
        int k = (int)loguniform(1, 257);
        int64_t b = (int64_t)(p.chunk_bytes * floor(loguniform(16, 256)));
        xs_bg o;
        xs_bg_eval(&p, k, (double)b, 0, &o);
        /* gaps from far below to far above G* */
        double g = o.g_star_ns * loguniform(0.05, 3) + uniform(0, 2000);
        xs_bg_eval(&p, k, (double)b, g, &o);
        /* enough bursts to fill the stage when the train is drain-limited, plus 20 */
        double unstalled = fmax(o.t_iss0_ns + g, (double)b / p.issue_bytes_per_ns);
        double grow = o.volume_bytes - p.drain_bytes_per_ns * unstalled;
        double fill = grow > 0 ? o.capacity_bytes / grow : 0;
        if (fill > 2000) {
            t--; /* too slow to reach steady state here: draw again */
            continue;
        }
        const int rows = 20 + (int)ceil(fill);
        xs_schedule s;
        xs_result r;
        one_row(&s, k, b, g, rows);
        xs_sim_opts so = {.sync = 1};
        if (xs_simulate(&p, &s, &so, &r) != XS_OK) {
            XT_CHECK(0, "simulate: %s", xs_errmsg());
            xs_schedule_free(&s);
            continue;
        }
        double period = (r.rows[rows - 1].end_ns - r.rows[rows - 11].end_ns) / 10;
        double iss = r.rows[rows - 1].issue_max_ns;
        if (!xt_near(period, o.t_period_steady_ns, 0.01) || !xt_near(iss, o.t_iss_steady_ns, 0.01)) {
            fails++;
            fprintf(stderr, "periodic: r=%g R=%g o=%g Q(K)=%g queue=%g buffer=%g chunk=%g K=%d "
                            "B=%lld G=%g: period sim %g closed %g; issue sim %g closed %g\n",
                    p.issue_bytes_per_ns, p.drain_bytes_per_ns, p.issue_overhead_ns,
                    o.capacity_bytes, p.queue_bytes_per_producer, p.buffer_bytes_per_producer,
                    p.chunk_bytes, k,
                    (long long)b, g, period,
                    o.t_period_steady_ns, iss, o.t_iss_steady_ns);
        }
        /* where the published assumptions hold (no producer queue, Q >= R(G+o)), the
         * published forms too */
        if (p.queue_bytes_per_producer == 0 &&
            o.capacity_bytes >= p.drain_bytes_per_ns * (g + p.issue_overhead_ns) &&
            !xt_near(period, o.t_period_ns, 0.01)) {
            fails++;
            fprintf(stderr, "periodic (published): K=%d B=%lld G=%g: period sim %g, published "
                            "%g\n", k, (long long)b, g, period, o.t_period_ns);
        }
        xs_result_free(&r);
        xs_schedule_free(&s);
    }
    XT_CHECK(fails == 0, "%d of %d periodic trains off by more than 1 %%", fails, trials);
}

/* docs/MODEL.md ("Event model"): free-running producers drift after one backpressured burst,
 * and later equal bursts are then accepted without stall; synchronised producers stall every time.
 * */
static void test_drift(void)
{
    xs_profile p = fixed();
    p.capacity_bytes_per_producer = 0;
    xs_schedule s;
    one_row(&s, 132, 32768, 100000, 6);
    xs_result fr, sr;
    xs_sim_opts so = {.sync = 1, .record_windows = 1};
    xs_sim_opts fo = {.sync = 0, .record_windows = 1};
    XT_CHECK(xs_simulate(&p, &s, &fo, &fr) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(xs_simulate(&p, &s, &so, &sr) == XS_OK, "%s", xs_errmsg());
    xs_bg o;
    xs_bg_eval(&p, 132, 32768, 100000, &o);
    /* the first burst is the same in both */
    XT_NEAR(fr.rows[0].issue_max_ns, sr.rows[0].issue_max_ns, 1e-9);
    XT_NEAR(sr.rows[0].issue_max_ns, o.t_iss_iso_ns, 0.01);
    /* after it, producers are spread: at least one round of chunks (K*c/R) */
    double lo = INFINITY, hi = -INFINITY;
    for (int q = 0; q < 132; q++) {
        double e = fr.win_end[q];
        lo = e < lo ? e : lo;
        hi = e > hi ? e : hi;
    }
    double stall = o.t_iss_iso_ns - o.t_iss0_ns;
    double round = 132 * p.chunk_bytes / p.drain_bytes_per_ns;
    XT_CHECK(hi - lo > 0.9 * round, "end-time spread %.0f ns vs one round %.0f ns", hi - lo,
             round);
    /* from the third burst on, free-running producers issue unstalled; synchronised ones stall */
    XT_NEAR(fr.rows[4].issue_max_ns, o.t_iss0_ns, 0.01);
    XT_NEAR(sr.rows[4].issue_max_ns, o.t_iss_iso_ns, 0.01);
    double ratio = sr.rows[5].end_ns / fr.rows[5].end_ns;
    XT_CHECK(ratio > 1.15, "synchronised/free-running total %.3f (drift should save > 15 %%)",
             ratio);
    xs_result_free(&fr);
    xs_result_free(&sr);

    /* with chunks as large as half a burst, the spread after one burst is about the stall */
    p.chunk_bytes = 16384;
    XT_CHECK(xs_simulate(&p, &s, &fo, &fr) == XS_OK, "%s", xs_errmsg());
    lo = INFINITY, hi = -INFINITY;
    for (int q = 0; q < 132; q++) {
        lo = fmin(lo, fr.win_end[q]);
        hi = fmax(hi, fr.win_end[q]);
    }
    XT_CHECK(hi - lo > 0.5 * stall, "end-time spread %.0f ns vs stall %.0f ns", hi - lo, stall);
    XT_NEAR(fr.rows[1].issue_max_ns, o.t_iss0_ns, 0.01);
    xs_result_free(&fr);
    xs_schedule_free(&s);
}

/* Fewer producers stall on smaller volumes when each producer's outstanding bytes are capped. */
static void test_per_producer_cap(void)
{
    xs_profile p = fixed();
    p.capacity_bytes_per_producer = 16384;
    xs_schedule s;
    xs_result r;
    one_row(&s, 16, 65536, 0, 1);
    XT_CHECK(xs_simulate(&p, &s, NULL, &r) == XS_OK, "%s", xs_errmsg());
    xs_bg o;
    xs_bg_eval(&p, 16, 65536, 0, &o);
    XT_NEAR(o.capacity_bytes, 16.0 * 16384, 1e-12);
    XT_NEAR(r.rows[0].issue_max_ns, o.t_iss_iso_ns, 0.01);
    XT_CHECK(o.t_iss_iso_ns > o.t_iss0_ns * 1.5, "16 x 64K stalls with a 16K cap");
    xs_result_free(&r);
    xs_schedule_free(&s);
    p.capacity_bytes_per_producer = 0;
    one_row(&s, 16, 65536, 0, 1);
    XT_CHECK(xs_simulate(&p, &s, NULL, &r) == XS_OK, "%s", xs_errmsg());
    XT_NEAR(r.rows[0].issue_max_ns, p.issue_overhead_ns + 65536 / p.issue_bytes_per_ns, 0.01);
    xs_result_free(&r);
    xs_schedule_free(&s);
}

/* Unequal shares (arbitration skew) and per-producer reserves, as measured on the H200. */
static void test_skew_reserve(void)
{
    xs_profile p = fixed();
    p.capacity_bytes = 900000;
    p.capacity_bytes_per_producer = 0;
    p.queue_bytes_per_producer = 6144;
    xs_schedule s;
    xs_result fair, skew;
    one_row(&s, 132, 65536, 0, 1);
    XT_CHECK(xs_simulate(&p, &s, NULL, &fair) == XS_OK, "%s", xs_errmsg());
    p.arbitration_skew = 1.5;
    XT_CHECK(xs_simulate(&p, &s, NULL, &skew) == XS_OK, "%s", xs_errmsg());
    xs_bg o;
    xs_bg_eval(&p, 132, 65536, 0, &o);
    /* the stage is work-conserving either way: the last producer is no earlier than the fluid
     * form; unequal shares let most producers finish much earlier */
    XT_CHECK(skew.rows[0].issue_max_ns >= 0.99 * o.t_iss_iso_ns, "skewed last %g vs %g",
             skew.rows[0].issue_max_ns, o.t_iss_iso_ns);
    XT_CHECK(skew.rows[0].issue_med_ns < 0.85 * fair.rows[0].issue_med_ns,
             "skew lowers the median: %g vs fair %g", skew.rows[0].issue_med_ns,
             fair.rows[0].issue_med_ns);
    XT_NEAR(fair.rows[0].issue_max_ns, o.t_iss_iso_ns, 0.02);
    xs_result_free(&fair);
    xs_result_free(&skew);
    xs_schedule_free(&s);

    /* a reserve per producer: many producers absorb a burst that few cannot */
    p.arbitration_skew = 0;
    p.reserve_bytes_per_producer = 16384;
    one_row(&s, 128, 16384, 0, 1); /* 2 MiB over 128 producers: within Q + 128 x reserve */
    XT_CHECK(xs_simulate(&p, &s, NULL, &fair) == XS_OK, "%s", xs_errmsg());
    xs_bg_eval(&p, 128, 16384, 0, &o);
    XT_CHECK(o.capacity_ok, "criterion counts every producer's reserve");
    XT_NEAR(fair.rows[0].issue_max_ns, o.t_iss0_ns, 0.02);
    xs_result_free(&fair);
    xs_schedule_free(&s);
    one_row(&s, 4, 524288, 0, 1); /* the same 2 MiB over 4 producers stalls */
    XT_CHECK(xs_simulate(&p, &s, NULL, &fair) == XS_OK, "%s", xs_errmsg());
    xs_bg_eval(&p, 4, 524288, 0, &o);
    XT_CHECK(fair.rows[0].issue_max_ns > 1.5 * o.t_iss0_ns, "4 producers stall: %g vs %g",
             fair.rows[0].issue_max_ns, o.t_iss0_ns);
    XT_CHECK(fair.rows[0].issue_max_ns >= 0.99 * o.t_iss_iso_ns &&
                 fair.rows[0].issue_max_ns <= 1.01 * o.t_iss_last_ns,
             "between the fluid and the last-producer forms: %g in [%g, %g]",
             fair.rows[0].issue_max_ns, o.t_iss_iso_ns, o.t_iss_last_ns);
    xs_result_free(&fair);
    xs_schedule_free(&s);
}

/* When a reserve leaves the stage. Unequal shares leave a few producers last; the earlier the
 * others' reserves leave, the less capacity those stragglers see: the last producer's time grows
 * from "when drained" over "within f*Q of the drain head" (f = 1/2, 1) to "when it stops
 * offering", never below the fluid form, and at most the form with only the straggler's own
 * queue and reserve left in the stage. The median producer is not delayed by more than the last.
 * With equal shares producers finish together and the choice hardly matters (isolated test). */
static void test_reserve_release(void)
{
    xs_profile p = fixed();
    p.capacity_bytes = 900000;
    p.capacity_bytes_per_producer = 0;
    p.queue_bytes_per_producer = 6144;
    p.reserve_bytes_per_producer = 16384;
    p.arbitration_skew = 1.5;
    xs_schedule s;
    one_row(&s, 132, 65536, 0, 1);
    xs_bg o;
    xs_bg_eval(&p, 132, 65536, 0, &o);
    double own = p.issue_overhead_ns + (o.volume_bytes - p.capacity_bytes -
                                        p.queue_bytes_per_producer -
                                        p.reserve_bytes_per_producer) / p.drain_bytes_per_ns;
    static const double mode[4][2] = {{0, 0}, {0, 0.5}, {0, 1}, {1, 0}}; /* release, fraction */
    double last[4];
    for (int i = 0; i < 4; i++) {
        p.reserve_release = mode[i][0];
        p.reserve_shared_fraction = mode[i][1];
        xs_result r;
        XT_CHECK(xs_simulate(&p, &s, NULL, &r) == XS_OK, "%s", xs_errmsg());
        last[i] = r.rows[0].issue_max_ns;
        XT_CHECK(last[i] >= 0.99 * o.t_iss_iso_ns && last[i] <= 1.01 * own,
                 "release %g fraction %g: last %g outside [%g, %g]", mode[i][0], mode[i][1],
                 last[i], o.t_iss_iso_ns, own);
        xs_result_free(&r);
    }
    XT_CHECK(last[0] < last[1] && last[1] < last[2] && last[2] < last[3],
             "stragglers later the earlier reserves leave: %g %g %g %g", last[0], last[1],
             last[2], last[3]);
    /* release 1 puts the straggler near the only-its-own form (the H200's (V - ~0.9 MiB)/R) */
    XT_CHECK(last[3] > 0.9 * own, "release at issue end: %g vs own-capacity form %g", last[3],
             own);
    xs_schedule_free(&s);
}

/* Tandem queues (buffer_bytes_per_producer): each producer's own buffer in front of the shared
 * Q. With unequal shares the producers that finish early leave their buffers empty behind them,
 * so a straggler of an isolated burst sees only Q plus its own queue and buffer (the H200's
 * (V - ~0.9 MiB)/R), like a reserve released at issue end; unlike that rule, a free-running train
 * that drifts apart then issues unstalled in every later row (a reserve released at issue end
 * leaves the backlog of the producers that just finished in the FIFO ahead of a re-aligned
 * producer, which then stalls for tens of us: the run-4/5 drift-train failure). */
static void test_tandem(void)
{
    xs_profile p = fixed();
    p.capacity_bytes = 900000;
    p.capacity_bytes_per_producer = 0;
    p.queue_bytes_per_producer = 6144;
    p.buffer_bytes_per_producer = 16384;
    xs_schedule s;
    one_row(&s, 132, 65536, 0, 1);
    xs_bg o;
    xs_bg_eval(&p, 132, 65536, 0, &o);
    XT_NEAR(o.capacity_bytes, 900000 + 132.0 * (6144 + 16384), 1e-12);
    double own = p.issue_overhead_ns + (o.volume_bytes - p.capacity_bytes - 6144 - 16384) /
                                           p.drain_bytes_per_ns;
    xs_result r;
    XT_CHECK(xs_simulate(&p, &s, NULL, &r) == XS_OK, "%s", xs_errmsg());
    XT_NEAR(r.rows[0].issue_max_ns, o.t_iss_iso_ns, 0.02); /* equal shares: together */
    xs_result_free(&r);
    p.arbitration_skew = 1.5;
    XT_CHECK(xs_simulate(&p, &s, NULL, &r) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(r.rows[0].issue_max_ns >= 0.99 * o.t_iss_iso_ns &&
                 r.rows[0].issue_max_ns <= 1.01 * own && r.rows[0].issue_max_ns > 0.9 * own,
             "straggler %g: within [%g, %g] and near its own-capacity form", r.rows[0].issue_max_ns,
             o.t_iss_iso_ns, own);
    XT_CHECK(r.rows[0].issue_med_ns < 0.8 * r.rows[0].issue_max_ns, "median %g vs last %g",
             r.rows[0].issue_med_ns, r.rows[0].issue_max_ns);
    xs_result_free(&r);
    xs_schedule_free(&s);

    /* a drift train (the calibration's: 6 bursts, 1.25 V/R of work between them) */
    one_row(&s, 132, 65536, 1.25 * 132 * 65536 / p.drain_bytes_per_ns, 6);
    s.rows[5].gap_ns = 0;
    XT_CHECK(xs_simulate(&p, &s, NULL, &r) == XS_OK, "%s", xs_errmsg());
    for (int i = 3; i < 6; i++)
        XT_CHECK(r.rows[i].issue_max_ns < 1.5 * o.t_iss0_ns, "tandem: row %d stalls %g vs %g", i,
                 r.rows[i].issue_max_ns, o.t_iss0_ns);
    xs_result_free(&r);
    xs_profile rel = p;
    rel.buffer_bytes_per_producer = 0;
    rel.reserve_bytes_per_producer = 16384;
    rel.reserve_release = 1;
    XT_CHECK(xs_simulate(&rel, &s, NULL, &r) == XS_OK, "%s", xs_errmsg());
    double worst = 0;
    for (int i = 3; i < 6; i++)
        worst = fmax(worst, r.rows[i].issue_max_ns);
    XT_CHECK(worst > 10 * o.t_iss0_ns, "release at issue end: a late row stalls (%g)", worst);
    xs_result_free(&r);
    xs_schedule_free(&s);

    /* absent = the earlier model: a buffer smaller than one chunk is no buffer, exactly */
    xs_profile a = fixed(), b;
    a.queue_bytes_per_producer = 4096;
    a.arbitration_skew = 1;
    b = a;
    b.buffer_bytes_per_producer = a.chunk_bytes - 1;
    memset(&s, 0, sizeof s);
    xs_schedule_append(&s, 132, 65536, 20000);
    xs_schedule_append(&s, 40, 300000, 0);
    xs_schedule_append(&s, 100, 50000, 1000);
    xs_result ra, rb;
    XT_CHECK(xs_simulate(&a, &s, NULL, &ra) == XS_OK && xs_simulate(&b, &s, NULL, &rb) == XS_OK,
             "%s", xs_errmsg());
    int same = 1;
    for (int i = 0; i < 3; i++)
        same &= ra.rows[i].issue_med_ns == rb.rows[i].issue_med_ns &&
                ra.rows[i].issue_max_ns == rb.rows[i].issue_max_ns &&
                ra.rows[i].end_ns == rb.rows[i].end_ns;
    XT_CHECK(same && ra.makespan_ns == rb.makespan_ns, "a buffer of no whole chunk changed it");
    xs_result_free(&ra);
    xs_result_free(&rb);
    xs_schedule_free(&s);
}

/* Every chunk's way through the model (xs_sim_opts.trace), random profiles with and without
 * tandem buffers, random mixed schedules, free-running and synchronised: bytes are conserved
 * (every producer's chunks add up to its bytes of every row), each producer's chunks keep their
 * order, a chunk streams at no more than r and reaches the stage only after its buffer, a
 * producer never has more than its queue and buffer outside the stage (a whole buffer holds
 * at most nbuf chunks; at the end of an issue window at most q + nbuf chunks are not in the
 * stage), and the stage never holds more than Q (plus the reserves where there are). */
typedef struct {
    xs_chunk_trace *v;
    size_t n, cap;
} trace_buf;

static void trace_add(void *ctx, const xs_chunk_trace *c)
{
    trace_buf *t = ctx;
    if (t->n == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 4096;
        xs_chunk_trace *nv = realloc(t->v, nc * sizeof *nv);
        if (!nv)
            return;
        t->v = nv;
        t->cap = nc;
    }
    t->v[t->n++] = *c;
}

static void test_chunk_invariants(int trials)
{
    int bad_bytes = 0, bad_order = 0, bad_rate = 0, bad_buf = 0, bad_out = 0, bad_stage = 0;
    for (int t = 0; t < trials; t++) {
        xs_profile p = random_profile();
        if (urand() < 0.7)
            p.buffer_bytes_per_producer = p.chunk_bytes * floor(uniform(1, 33));
        p.capacity_bytes_per_producer = 0;
        p.reserve_release = urand() < 0.2;
        p.arbitration_skew = urand() < 0.5 ? 0 : uniform(0, 2);
        /* a stage small enough to fill */
        p.capacity_bytes = p.chunk_bytes * floor(loguniform(4, 256));
        xs_schedule s = {0};
        int rows = 1 + (int)(urand() * 6);
        for (int i = 0; i < rows; i++)
            xs_schedule_append(&s, 1 + (int)(urand() * 48), 16 * (int64_t)loguniform(1, 16384),
                               urand() < 0.3 ? 0 : loguniform(10, 1e5));
        trace_buf tb = {0};
        xs_sim_opts so = {.sync = urand() < 0.3, .record_windows = 1, .trace = trace_add,
                          .trace_ctx = &tb};
        xs_result r;
        if (xs_simulate(&p, &s, &so, &r) != XS_OK) {
            XT_CHECK(0, "simulate: %s", xs_errmsg());
            free(tb.v);
            xs_schedule_free(&s);
            continue;
        }
        const int np = r.nproducers, q = (int)floor(p.queue_bytes_per_producer / p.chunk_bytes);
        const int nbuf = (int)floor(p.buffer_bytes_per_producer / p.chunk_bytes);
        const double eps = 1e-6, R = p.drain_bytes_per_ns;
        /* per producer and row, bytes; per producer, its chunks in order */
        double *got = calloc((size_t)rows * np, sizeof *got);
        size_t *cnt = calloc((size_t)np, sizeof *cnt);
        const xs_chunk_trace **per = malloc(tb.n * sizeof *per); /* grouped by producer */
        size_t *at = calloc((size_t)np + 1, sizeof *at);
        for (size_t i = 0; i < tb.n; i++) {
            const xs_chunk_trace *c = &tb.v[i];
            got[(size_t)c->row * np + c->producer] += (double)c->bytes;
            cnt[c->producer]++;
            /* the stage: what it holds just after this acceptance */
            double hold = R * (c->t_drained_ns - c->t_stage_ns);
            double room = p.capacity_bytes + (p.reserve_bytes_per_producer > 0
                                                  ? p.reserve_bytes_per_producer * np : 0);
            bad_stage += hold > room * (1 + 1e-9) + eps;
            bad_rate += c->t_buffer_ns < c->t_queue_ns + (double)c->bytes / p.issue_bytes_per_ns -
                                             eps * (1 + fabs(c->t_buffer_ns)) ||
                        c->t_stage_ns < c->t_buffer_ns - eps * (1 + fabs(c->t_stage_ns)) ||
                        /* drained no sooner than streamed in at r and out at R */
                        c->t_drained_ns < c->t_stage_ns - (double)c->bytes / p.issue_bytes_per_ns +
                                              (double)c->bytes / R - 1e-3;
        }
        for (int i = 0; i < np; i++)
            at[i + 1] = at[i] + cnt[i];
        memset(cnt, 0, (size_t)np * sizeof *cnt);
        for (size_t i = 0; i < tb.n; i++) {
            int pp = tb.v[i].producer;
            per[at[pp] + cnt[pp]++] = &tb.v[i];
        }
        for (int row = 0; row < rows; row++)
            for (int pp = 0; pp < np; pp++) {
                double want = pp < s.rows[row].producers ? (double)s.rows[row].bytes_per_producer
                                                         : 0;
                bad_bytes += got[(size_t)row * np + pp] != want;
            }
        for (int pp = 0; pp < np; pp++) {
            const xs_chunk_trace **c = per + at[pp];
            size_t n = cnt[pp];
            for (size_t i = 1; i < n; i++)
                bad_order += c[i]->row < c[i - 1]->row || c[i]->t_stage_ns < c[i - 1]->t_stage_ns;
            for (size_t i = 0; i < n; i++) {
                double tol = eps * (1 + fabs(c[i]->t_buffer_ns));
                /* a whole buffer of nbuf chunks: the chunk nbuf places earlier has gone on */
                if (nbuf > 0 && i >= (size_t)nbuf &&
                    c[i]->t_buffer_ns < c[i - nbuf]->t_stage_ns - tol)
                    bad_buf++;
                /* the store queue: a chunk enters it once the one q places earlier left it */
                if (q > 0 && i >= (size_t)q &&
                    c[i]->t_queue_ns < (nbuf > 0 ? c[i - q]->t_buffer_ns : c[i - q]->t_stage_ns) -
                                           tol)
                    bad_buf++;
            }
            /* at the end of each issue window, at most q + nbuf chunks not in the stage; one
             * more where the row ends in a partial chunk behind a queue (it enters the queue
             * once its share of the chunk q places before it has left: docs/MODEL.md) */
            size_t last = 0;
            for (int row = 0; row < rows; row++) {
                if (pp >= s.rows[row].producers)
                    continue;
                while (last < n && c[last]->row <= row)
                    last++;
                double end = r.win_end[(size_t)row * np + pp];
                size_t outside = 0;
                for (size_t i = 0; i < last; i++)
                    outside += c[i]->t_stage_ns > end + eps * (1 + fabs(end));
                int64_t bytes = s.rows[row].bytes_per_producer;
                int partial = q > 0 && bytes % (int64_t)p.chunk_bytes != 0;
                bad_out += outside > (size_t)(q + nbuf + partial);
            }
        }
        free(got);
        free(cnt);
        free(per);
        free(at);
        free(tb.v);
        xs_result_free(&r);
        xs_schedule_free(&s);
    }
    XT_CHECK(bad_bytes == 0, "%d producer-rows whose chunks do not add up to their bytes",
             bad_bytes);
    XT_CHECK(bad_order == 0, "%d chunks out of their producer's order", bad_order);
    XT_CHECK(bad_rate == 0, "%d chunks faster than r, or in the stage before their buffer",
             bad_rate);
    XT_CHECK(bad_buf == 0, "%d chunks past a full buffer or store queue", bad_buf);
    XT_CHECK(bad_out == 0, "%d issue windows ended with more than q + nbuf (+1) chunks outside",
             bad_out);
    XT_CHECK(bad_stage == 0, "%d acceptances left the stage above its capacity", bad_stage);
}

/* row_start_ns: every later row starts that much later on every producer. With a stage that
 * never fills and no producer queue, row i's window end moves by exactly i * row_start_ns and the windows keep their
 * length, free-running or synchronised (random profiles and schedules). */
static void test_row_start(int trials)
{
    int bad = 0;
    for (int t = 0; t < trials; t++) {
        xs_profile p = unbounded_profile();
        /* no producer queue: a queue still streaming the previous row when the next starts
         * would shorten the next window by the extra time it was given */
        p.queue_bytes_per_producer = 0;
        xs_schedule s = {0};
        int rows = 1 + (int)(urand() * 6);
        for (int i = 0; i < rows; i++)
            xs_schedule_append(&s, 1 + (int)(urand() * 40), 16 * (int64_t)loguniform(1, 16384),
                               urand() < 0.3 ? 0 : loguniform(10, 1e5));
        xs_sim_opts so = {.sync = urand() < 0.3};
        xs_result a, b;
        XT_CHECK(xs_simulate(&p, &s, &so, &a) == XS_OK, "%s", xs_errmsg());
        p.row_start_ns = loguniform(1, 5000);
        XT_CHECK(xs_simulate(&p, &s, &so, &b) == XS_OK, "%s", xs_errmsg());
        for (int i = 0; i < rows; i++) {
            double tol = 1e-9 * (1 + fabs(b.rows[i].end_ns));
            if (fabs(b.rows[i].end_ns - a.rows[i].end_ns - i * p.row_start_ns) > tol ||
                fabs(b.rows[i].issue_max_ns - a.rows[i].issue_max_ns) > tol ||
                fabs(b.rows[i].issue_med_ns - a.rows[i].issue_med_ns) > tol)
                bad++;
        }
        double shift = (rows - 1) * p.row_start_ns;
        if (fabs(b.makespan_ns - a.makespan_ns - shift) > 1e-9 * (1 + b.makespan_ns))
            bad++;
        xs_result_free(&a);
        xs_result_free(&b);
        xs_schedule_free(&s);
    }
    XT_CHECK(bad == 0, "%d rows or makespans of %d schedules not shifted by row_start_ns", bad,
             trials);
}

/* Mixed rows: windows, ordering, inactive producers and the backlog record. */
/* start_ns: the schedule's first bursts begin that much after its start instant. With free-running
 * producers and one shared start, every window and end moves by exactly start_ns (random profiles
 * and schedules; the stage is empty before the first acceptance, so nothing else may change). */
static void test_start(int trials)
{
    int bad = 0;
    for (int t = 0; t < trials; t++) {
        xs_profile p = random_profile();
        xs_schedule s = {0};
        int rows = 1 + (int)(urand() * 5);
        for (int i = 0; i < rows; i++)
            xs_schedule_append(&s, 1 + (int)(urand() * 40), 16 * (int64_t)loguniform(1, 16384),
                               urand() < 0.3 ? 0 : loguniform(10, 1e5));
        xs_sim_opts so = {.record_windows = 1, .sync = urand() < 0.3};
        xs_result a, b;
        XT_CHECK(xs_simulate(&p, &s, &so, &a) == XS_OK, "%s", xs_errmsg());
        /* Two offers at exactly the same instant are served in a fixed order; shifting every
         * time by start_ns can round one of them by an ulp and swap them (a valid outcome too).
         * A rounding accident of one shift: a defect fails every shift, so try three. */
        int fail = 0;
        for (int attempt = 0; attempt < 3; attempt++) {
            p.start_ns = loguniform(1, 5000);
            XT_CHECK(xs_simulate(&p, &s, &so, &b) == XS_OK, "%s", xs_errmsg());
            fail = 0;
            for (int i = 0; i < rows; i++) {
                double tol = 1e-9 * (1 + fabs(b.rows[i].end_ns));
                if (fabs(b.rows[i].end_ns - a.rows[i].end_ns - p.start_ns) > tol ||
                    fabs(b.rows[i].issue_max_ns - a.rows[i].issue_max_ns) > tol ||
                    fabs(b.rows[i].issue_med_ns - a.rows[i].issue_med_ns) > tol)
                    fail++;
            }
            if (fabs(b.makespan_ns - a.makespan_ns - p.start_ns) > 1e-9 * (1 + b.makespan_ns))
                fail++;
            xs_result_free(&b);
            if (!fail)
                break;
        }
        bad += fail;
        xs_result_free(&a);
        xs_schedule_free(&s);
    }
    XT_CHECK(bad == 0, "%d rows or makespans of %d schedules not shifted by start_ns alone", bad,
             trials);
}

static void test_sim_invariants(void)
{
    xs_profile p = fixed();
    xs_schedule s = {0};
    xs_schedule_append(&s, 132, 65536, 5000);
    xs_schedule_append(&s, 8, 4096, 0);
    xs_schedule_append(&s, 64, 100000, 20000);
    xs_schedule_append(&s, 132, 16, 0);
    xs_sim_opts so = {.record_windows = 1, .record_backlog = 1, .max_samples = 1000};
    xs_result r;
    XT_CHECK(xs_simulate(&p, &s, &so, &r) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(r.nproducers == 132 && r.nrows == 4, "shape %d x %d", r.nrows, r.nproducers);
    int bad = 0;
    for (int row = 0; row < 4; row++)
        for (int q = 0; q < 132; q++) {
            double a = r.win_start[row * 132 + q], e = r.win_end[row * 132 + q];
            int active = q < s.rows[row].producers;
            if (active != !isnan(a))
                bad++;
            if (active && e < a + p.issue_overhead_ns +
                                  s.rows[row].bytes_per_producer / p.issue_bytes_per_ns - 1e-6)
                bad++; /* faster than unconstrained issue */
        }
    XT_CHECK(bad == 0, "%d windows inconsistent", bad);
    XT_CHECK(r.nbacklog > 0 && r.nbacklog <= 1000, "%zu backlog samples", r.nbacklog);
    double peak = 0;
    for (size_t i = 0; i < r.nbacklog; i++) {
        peak = fmax(peak, r.backlog[i].backlog_bytes);
        if (i && r.backlog[i].t_ns < r.backlog[i - 1].t_ns)
            bad++;
    }
    XT_CHECK(bad == 0, "backlog samples out of order");
    XT_CHECK(peak <= xs_capacity(&p, 132) + 1e-6, "peak %g above capacity", peak);
    XT_CHECK(r.peak_backlog_bytes <= p.capacity_bytes + 1e-6, "peak %g", r.peak_backlog_bytes);
    XT_CHECK(r.makespan_ns >= r.rows[3].end_ns, "makespan %g", r.makespan_ns);
    xs_result_free(&r);
    xs_schedule_free(&s);

    /* too much work is refused, not attempted */
    xs_schedule_append(&s, 65536, INT64_C(1) << 40, 0);
    XT_CHECK(xs_simulate(&p, &s, NULL, &r) == XS_ERANGE, "huge schedule refused");
    XT_CHECK(strstr(xs_errmsg(), "chunks") != NULL, "message: %s", xs_errmsg());
    xs_schedule_free(&s);
}

/* Per-producer programs (xs_simulate_programs). A program that repeats the schedule's rows gives
 * the schedule's result exactly, on random profiles and schedules; a row of 0 bytes is work only;
 * producers that store one after another see an empty stage, the same bursts together stall;
 * malformed programs are refused. */
static void test_programs(int trials)
{
    int same = 0, n = 0;
    for (int t = 0; t < trials; t++) {
        xs_profile p = random_profile();
        xs_schedule s = {0};
        const int rows = 1 + (int)uniform(0, 5);
        for (int i = 0; i < rows; i++)
            xs_schedule_append(&s, 1 + (int)uniform(0, 40), 16 * (int64_t)loguniform(1, 8192),
                               urand() < 0.3 ? 0 : loguniform(10, 1e5));
        const int np = xs_schedule_max_producers(&s) + (urand() < 0.5 ? 3 : 0);
        int64_t *b = malloc((size_t)rows * np * sizeof *b);
        double *g = malloc((size_t)rows * np * sizeof *g);
        for (int i = 0; i < rows; i++)
            for (int q = 0; q < np; q++) {
                b[i * np + q] = q < s.rows[i].producers ? s.rows[i].bytes_per_producer
                                                        : (int64_t)uniform(0, 1e6);
                g[i * np + q] = s.rows[i].gap_ns;
            }
        xs_programs pg = {np, b, g};
        xs_sim_opts so = {.record_windows = 1};
        xs_result a, c;
        if (xs_simulate(&p, &s, &so, &a) == XS_OK) {
            n++;
            if (xs_simulate_programs(&p, &s, &pg, &so, &c) == XS_OK) {
                int eq = a.makespan_ns == c.makespan_ns &&
                         a.peak_backlog_bytes == c.peak_backlog_bytes;
                for (int k = 0; k < rows * a.nproducers && eq; k++)
                    eq = (isnan(a.win_end[k]) && isnan(c.win_end[k])) ||
                         a.win_end[k] == c.win_end[k];
                same += eq;
                xs_result_free(&c);
            }
            xs_result_free(&a);
        }
        free(b), free(g);
        xs_schedule_free(&s);
    }
    XT_CHECK(n > trials / 2 && same == n, "programs = rows in %d of %d simulations", same, n);

    /* one producer: (0 bytes, G), then (B, 0): its burst starts after G and the set-ups */
    xs_profile p = fixed();
    p.start_ns = 300, p.row_start_ns = 100;
    xs_schedule s = {0};
    xs_schedule_append(&s, 1, 16, 0);
    xs_schedule_append(&s, 1, 16, 0);
    int64_t b1[2] = {0, 4096};
    double g1[2] = {5000, 0};
    xs_programs pg = {1, b1, g1};
    xs_sim_opts so = {.record_windows = 1};
    xs_result r;
    XT_CHECK(xs_simulate_programs(&p, &s, &pg, &so, &r) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(isnan(r.win_start[0]), "a row of 0 bytes has no window");
    XT_NEAR(r.win_start[1], 300.0 + 5000 + 100, 1e-12);
    xs_result_free(&r);
    xs_schedule_free(&s);

    /* 64 producers x 64 KiB: together they overflow Q(64); one after another (each alone in the
     * stage: its lead is the previous ones' drain time) none is held back */
    p = fixed();
    p.start_ns = p.row_start_ns = 0;
    const int K = 64;
    const int64_t B = 65536;
    XT_CHECK((double)K * B > xs_capacity(&p, K) * 1.5, "the burst overflows Q(%d)", K);
    xs_schedule_append(&s, K, 16, 0);
    xs_schedule_append(&s, K, 16, 0);
    int64_t bb[2 * 64];
    double gg[2 * 64];
    double worst[2];
    for (int mode = 0; mode < 2; mode++) {
        for (int q = 0; q < K; q++) {
            bb[q] = 0, gg[q] = mode ? q * (1.2 * B / p.drain_bytes_per_ns) : 0;
            bb[K + q] = B, gg[K + q] = 0;
        }
        xs_programs pk = {K, bb, gg};
        XT_CHECK(xs_simulate_programs(&p, &s, &pk, &so, &r) == XS_OK, "%s", xs_errmsg());
        worst[mode] = 0;
        for (int q = 0; q < K; q++)
            worst[mode] = fmax(worst[mode], r.win_end[K + q] - r.win_start[K + q]);
        xs_result_free(&r);
    }
    const double t0 = p.issue_overhead_ns +
                      fmax(0, B - p.queue_bytes_per_producer) / p.issue_bytes_per_ns;
    XT_CHECK(worst[0] > 3 * t0, "together: the last window %.0f ns, unconstrained %.0f", worst[0],
             t0);
    XT_NEAR(worst[1], t0, 0.01);

    /* malformed programs */
    xs_programs narrow = {K - 1, bb, gg};
    XT_CHECK(xs_simulate_programs(&p, &s, &narrow, NULL, &r) == XS_EINVAL, "narrow refused");
    bb[3] = -1;
    xs_programs neg = {K, bb, gg};
    XT_CHECK(xs_simulate_programs(&p, &s, &neg, NULL, &r) == XS_EINVAL, "negative refused");
    XT_CHECK(strstr(xs_errmsg(), "producer 3") != NULL, "message: %s", xs_errmsg());
    xs_schedule_free(&s);
}

static void check_plan_invariants(const xs_schedule *s, const xs_plan *pl, double move_cost)
{
    XT_NEAR(xs_schedule_bytes(&pl->planned), xs_schedule_bytes(s), 1e-12);
    if (move_cost == 0)
        XT_NEAR(xs_schedule_gap_ns(&pl->planned), xs_schedule_gap_ns(s), 1e-9);
    else
        XT_CHECK(xs_schedule_gap_ns(&pl->planned) >= xs_schedule_gap_ns(s) - 1e-6,
                 "moved work never shrinks");
    XT_CHECK(pl->planned_ns <= pl->original_ns + 1e-6, "plan %g slower than original %g",
             pl->planned_ns, pl->original_ns);
    XT_CHECK(pl->planned_ns >= pl->bound_ns * 0.999, "plan %g below the bound %g",
             pl->planned_ns, pl->bound_ns);
}

static void test_planner(void)
{
    xs_profile p = fixed();
    xs_plan_opts po;
    xs_plan_opts_default(&po);
    xs_plan pl;

    /* criterion holds: piggyback, unchanged */
    xs_schedule s;
    one_row(&s, 132, 4096, 20000, 8);
    XT_CHECK(xs_plan_schedule(&p, &s, &po, &pl) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(pl.criterion_ok && !pl.reshaped, "piggyback expected: %s", pl.how);
    XT_CHECK(pl.planned.nrows == s.nrows, "unchanged rows");
    check_plan_invariants(&s, &pl, 0);
    xs_plan_free(&pl);
    xs_schedule_free(&s);

    /* an expert-wave train: long work, then a burst far over the headroom: reshape wins */
    memset(&s, 0, sizeof s);
    for (int w = 0; w < 6; w++) {
        xs_schedule_append(&s, 132, 131072, 50000);
        xs_schedule_append(&s, 132, 1024, 300000);
    }
    XT_CHECK(xs_plan_schedule(&p, &s, &po, &pl) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(!pl.criterion_ok && pl.reshaped, "reshape expected: %s", pl.how);
    XT_CHECK(pl.planned_ns < 0.9 * pl.original_ns, "reshape gains: %g -> %g", pl.original_ns,
             pl.planned_ns);
    check_plan_invariants(&s, &pl, 0);
    /* every planned burst fits the headroom */
    int over = 0;
    for (int r = 0; r < pl.planned.nrows; r++) {
        xs_bg o;
        xs_bg_eval(&p, pl.planned.rows[r].producers,
                   (double)pl.planned.rows[r].bytes_per_producer, 0, &o);
        over += o.q_peak0_bytes > 0.9 * o.capacity_bytes * (1 + 1e-9);
    }
    XT_CHECK(over == 0, "%d planned bursts over the headroom", over);
    xs_plan_free(&pl);

    /* a locality cost makes moving dearer but the plan is still never worse */
    po.move_cost = 0.5;
    XT_CHECK(xs_plan_schedule(&p, &s, &po, &pl) == XS_OK, "%s", xs_errmsg());
    check_plan_invariants(&s, &pl, 0.5);
    xs_plan_free(&pl);
    xs_schedule_free(&s);

    /* drain-bound with no work to move: nothing helps, schedule kept */
    xs_plan_opts_default(&po);
    one_row(&s, 132, 262144, 0, 4);
    XT_CHECK(xs_plan_schedule(&p, &s, &po, &pl) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(!pl.reshaped, "nothing to gain: %s", pl.how);
    check_plan_invariants(&s, &pl, 0);
    xs_plan_free(&pl);
    xs_schedule_free(&s);

    /* random schedules: invariants always hold */
    for (int t = 0; t < 30; t++) {
        memset(&s, 0, sizeof s);
        int rows = (int)uniform(1, 12);
        for (int r = 0; r < rows; r++)
            xs_schedule_append(&s, (int)uniform(1, 133), 16 * (int64_t)loguniform(1, 16384),
                               loguniform(1, 400000));
        XT_CHECK(xs_plan_schedule(&p, &s, &po, &pl) == XS_OK, "%s", xs_errmsg());
        check_plan_invariants(&s, &pl, 0);
        xs_plan_free(&pl);
        xs_schedule_free(&s);
    }
}

static void test_stats(void)
{
    double x[] = {5, 1, 4, 2, 3};
    XT_NEAR(xs_median(x, 5), 3, 1e-12);
    XT_NEAR(xs_quantile(x, 5, 0.25), 2, 1e-12);
    XT_NEAR(xs_quantile(x, 4, 0.5), 3, 1e-12); /* {5,1,4,2}: (2+4)/2 */
    double g[] = {1, 4, 16};
    XT_NEAR(xs_geomean(g, 3), 4, 1e-12);
    XT_CHECK(isnan(xs_median(x, 0)), "empty median is NaN");
    XT_CHECK(x[0] == 5, "input untouched");
    XT_NEAR(xs_min(x, 5), 1, 0);
    XT_NEAR(xs_max(x, 5), 5, 0);
    /* the median's interval: order statistics 5 and 12 of 16 (1-based), 25 and 40 of 64 */
    double u[64];
    for (int i = 0; i < 64; i++)
        u[i] = (double)((i * 37) % 64 + 1); /* 1..64, shuffled */
    double v[16];
    for (int i = 0; i < 16; i++)
        v[i] = (double)((i * 7) % 16 + 1); /* 1..16, shuffled */
    XT_NEAR(xs_median_ci_rel(v, 16), (12.0 - 5.0) / (2 * 8.5), 1e-12);
    XT_NEAR(xs_median_ci_rel(u, 64), (40.0 - 25.0) / (2 * 32.5), 1e-12);
    XT_CHECK(v[0] == 1 && v[1] == 8, "input untouched");
    XT_CHECK(isinf(xs_median_ci_rel(v, 1)), "one value: no interval");
    double same[16];
    for (int i = 0; i < 16; i++)
        same[i] = 7;
    XT_NEAR(xs_median_ci_rel(same, 16), 0, 0);
    double neg[] = {-1, -2, -3};
    XT_CHECK(isinf(xs_median_ci_rel(neg, 3)), "median <= 0: no relative width");
}

int main(void)
{
    const char *seed = getenv("XT_SEED");
    rng_state = seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL) * 2654435761u + 1;
    printf("# XT_SEED=%llu\n", (unsigned long long)rng_state);
    test_closed_forms();
    test_b200_acceptance();
    test_isolated_property(300);
    test_periodic_property(300);
    test_drift();
    test_per_producer_cap();
    test_skew_reserve();
    test_sim_invariants();
    test_start(100);
    test_reserve_release();
    test_tandem();
    test_chunk_invariants(200);
    test_row_start(100);
    test_partial_chunk(300);
    test_overflow_loss();
    test_programs(200);
    test_planner();
    test_stats();
    return xt_done();
}
