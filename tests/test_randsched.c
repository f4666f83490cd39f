// SPDX-License-Identifier: Apache-2.0
/*
 * test_randsched.c - validate --random's generator (src/randsched.c: bounds, repeatability,
 * variety) and its two reference predictors: zero stall against the event model with a stage
 * that never pushes back, and the fluid rows against the published closed forms (xs_bg_eval).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"
#include "xt.h"
#include "xt_profile.h"
#include "xt_rand.h"

static xs_profile prof(void) { return xt_provisional_profile(); }

/* Footprint as the replay lays a schedule out: each row's producers a slot of its largest burst
 * rounded up to 128 bytes. */
static double footprint(const xs_randsched *r)
{
    double f = 0;
    for (int i = 0; i < r->s.nrows; i++) {
        int64_t m = 0;
        for (int q = 0; q < r->s.rows[i].producers; q++)
            if (r->bytes[(size_t)i * r->producers + q] > m)
                m = r->bytes[(size_t)i * r->producers + q];
        f += (double)r->s.rows[i].producers * (double)((m + 127) / 128 * 128);
    }
    return f;
}

static void test_bounds_and_variety(void)
{
    xs_profile p = prof();
    int staggered = 0, uneven = 0, partial = 0, idle = 0, kvaried = 0, bad = 0;
    for (int t = 0; t < 300; t++) {
        xs_rand_opts o;
        o.max_producers = 1 + (int)(xt_rng() % 132);
        o.max_bytes = (double)(16 + xt_rng() % 64) * 1048576 / 4;
        uint64_t st = xt_rng();
        xs_randsched r;
        if (xs_randsched_draw(&p, &o, &st, &r) != XS_OK) {
            XT_CHECK(0, "draw: %s", xs_errmsg());
            continue;
        }
        const int np = r.producers;
        bad += r.s.nrows < 3 || r.s.nrows > 9 || np > o.max_producers || np < 1;
        bad += footprint(&r) > o.max_bytes;
        staggered += r.stagger;
        int kprev = -1;
        for (int i = 0; i < r.s.nrows; i++) {
            const int k = r.s.rows[i].producers;
            int64_t lo = INT64_MAX, hi = 0;
            bad += k < 1 || k > np;
            for (int q = 0; q < np; q++) {
                const int64_t b = r.bytes[(size_t)i * np + q];
                const double g = r.gap_ns[(size_t)i * np + q];
                bad += b < 0 || b % 16 || (q >= k && b) || !(g >= 0);
                bad += i + 1 == r.s.nrows && g != 0; /* no work after the last row */
                if (q < k && b) {
                    lo = b < lo ? b : lo;
                    hi = b > hi ? b : hi;
                }
                idle += q < k && !b && !(r.stagger && i == 0);
            }
            if (r.stagger && i == 0) {
                bad += hi != 0; /* the staggered start stores nothing */
                continue;
            }
            bad += r.bytes[(size_t)i * np] < 16; /* producer 0 stores in every storing row */
            uneven += hi > lo;
            partial += k < np;
            kvaried += kprev >= 0 && k != kprev;
            kprev = k;
        }
        xs_randsched_free(&r);
    }
    XT_CHECK(bad == 0, "%d bound violations", bad);
    XT_CHECK(staggered > 100 && staggered < 300, "%d of 300 staggered", staggered);
    XT_CHECK(uneven > 300, "%d rows with uneven bytes", uneven);
    XT_CHECK(partial > 100 && kvaried > 300 && idle > 10, "partial %d, varied %d, idle %d",
             partial, kvaried, idle);
}

static int same(const xs_randsched *a, const xs_randsched *b)
{
    if (a->s.nrows != b->s.nrows || a->producers != b->producers || a->stagger != b->stagger)
        return 0;
    const size_t n = (size_t)a->s.nrows * a->producers;
    return !memcmp(a->bytes, b->bytes, n * sizeof *a->bytes) &&
           !memcmp(a->gap_ns, b->gap_ns, n * sizeof *a->gap_ns);
}

static void test_repeatable(void)
{
    xs_profile p = prof();
    xs_rand_opts o = {132, 16.0 * 1048576};
    const uint64_t seed = xt_rng();
    uint64_t s1 = seed, s2 = seed, s3 = seed + 1;
    xs_randsched a, b, c, a2, b2;
    XT_CHECK(xs_randsched_draw(&p, &o, &s1, &a) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(xs_randsched_draw(&p, &o, &s2, &b) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(xs_randsched_draw(&p, &o, &s3, &c) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(same(&a, &b), "the same seed drew different schedules");
    XT_CHECK(!same(&a, &c), "seeds %llu and %llu drew the same schedule",
             (unsigned long long)seed, (unsigned long long)seed + 1);
    /* the state advances: the next draw differs from the first, the same on both streams */
    XT_CHECK(xs_randsched_draw(&p, &o, &s1, &a2) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(xs_randsched_draw(&p, &o, &s2, &b2) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(same(&a2, &b2) && !same(&a, &a2), "the second draws");
    xs_randsched_free(&a);
    xs_randsched_free(&b);
    xs_randsched_free(&c);
    xs_randsched_free(&a2);
    xs_randsched_free(&b2);
}

static void test_bad_input(void)
{
    xs_profile p = prof();
    uint64_t st = 1;
    xs_randsched r;
    xs_rand_opts o = {0, 1e9};
    XT_CHECK(xs_randsched_draw(&p, &o, &st, &r) == XS_EINVAL, "no producers accepted");
    o.max_producers = 132;
    o.max_bytes = 1000;
    XT_CHECK(xs_randsched_draw(&p, &o, &st, &r) == XS_EINVAL, "no room accepted");
    xs_schedule s;
    memset(&s, 0, sizeof s);
    xs_result out;
    XT_CHECK(xs_predict_zero(&p, &s, NULL, &out) == XS_EINVAL, "empty schedule accepted");
    XT_CHECK(xs_predict_fluid(&p, &s, NULL, &out) == XS_EINVAL, "empty schedule accepted");
    xs_schedule_append(&s, 8, 4096, 0);
    int64_t b[4] = {16, 16, 16, 16};
    double g[4] = {0, 0, 0, 0};
    xs_programs pg = {4, b, g}; /* narrower than the schedule's 8 producers */
    XT_CHECK(xs_predict_zero(&p, &s, &pg, &out) == XS_EINVAL, "narrow programs accepted");
    xs_schedule_free(&s);
}

/* Zero stall is the event model with a stage that never pushes back: the same windows. */
static void test_zero_is_unbounded_model(void)
{
    xs_profile p = prof();
    p.queue_bytes_per_producer = 4096;
    p.start_ns = 300;
    p.row_start_ns = 150;
    p.issue_tail_ns = 70; /* both sides add it to a split store loop's burst */
    xs_profile u = p;
    u.drain_bytes_per_ns = 1e9;
    u.capacity_bytes = 1e15;
    u.capacity_bytes_per_producer = 0;
    xs_rand_opts o = {64, 8.0 * 1048576};
    int bad = 0, rows = 0;
    for (int t = 0; t < 20; t++) {
        uint64_t st = xt_rng();
        xs_randsched r;
        if (xs_randsched_draw(&p, &o, &st, &r) != XS_OK) {
            XT_CHECK(0, "draw: %s", xs_errmsg());
            continue;
        }
        const xs_programs pg = xs_randsched_programs(&r);
        xs_result z, m, c;
        xs_sim_opts so;
        memset(&so, 0, sizeof so);
        so.record_windows = 1;
        if (xs_predict_zero(&p, &r.s, &pg, &z) != XS_OK ||
            xs_simulate_programs(&u, &r.s, &pg, &so, &m) != XS_OK ||
            xs_simulate_programs(&p, &r.s, &pg, &so, &c) != XS_OK) {
            XT_CHECK(0, "predict: %s", xs_errmsg());
            xs_randsched_free(&r);
            continue;
        }
        for (int i = 0; i < r.s.nrows; i++) {
            const double a = z.rows[i].issue_max_ns, b = m.rows[i].issue_max_ns;
            if (isnan(a) || isnan(b)) {
                bad += isnan(a) != isnan(b); /* both: a row that stores nothing */
                continue;
            }
            rows++;
            /* the same windows up to the engine's chunk streaming (one chunk at r) */
            bad += fabs(a - b) > p.chunk_bytes / p.issue_bytes_per_ns + 1;
            bad += fabs(z.rows[i].end_ns - m.rows[i].end_ns) >
                   (i + 1) * (p.chunk_bytes / p.issue_bytes_per_ns + 1);
            /* and the calibrated model never issues faster than with no backpressure */
            bad += c.rows[i].issue_max_ns < a - p.chunk_bytes / p.issue_bytes_per_ns - 1;
        }
        xs_result_free(&z);
        xs_result_free(&m);
        xs_result_free(&c);
        xs_randsched_free(&r);
    }
    XT_CHECK(bad == 0 && rows > 40, "%d of %d rows differ", bad, rows);
}

/* xs_store_tail_diverges against xs_burst_pattern's loop run thread by thread (128 threads:
 * thread t takes the 4-store pass at i = t + 512k while i + 384 < n16), and the event model
 * opening such a burst's window issue_tail_ns earlier than its stream: exactly that much longer
 * in a stage that never pushes back, and no change for a burst that does not split. */
static void test_store_tail(void)
{
    int bad = 0, split = 0;
    for (int64_t n16 = 1; n16 <= 5000; n16++) {
        int div = 0;
        for (int64_t k = 0; 512 * k + 384 < n16; k++) {
            int takers = 0;
            for (int64_t t = 0; t < 128; t++)
                takers += t + 512 * k + 384 < n16;
            div |= takers > 0 && takers < 128;
        }
        split += div;
        bad += div != xs_store_tail_diverges((double)(16 * n16));
    }
    XT_CHECK(bad == 0 && split > 500, "%d of 5000 sizes misjudged (%d split)", bad, split);
    XT_CHECK(!xs_store_tail_diverges(8192) && xs_store_tail_diverges(6544) &&
                 !xs_store_tail_diverges(0) && !xs_store_tail_diverges(-16),
             "8192 B whole passes, 6544 B split");
    xs_profile p = prof();
    p.queue_bytes_per_producer = 4096;
    p.drain_bytes_per_ns = 1e9;
    p.capacity_bytes = 1e15;
    p.capacity_bytes_per_producer = 0;
    xs_profile t = p;
    t.issue_tail_ns = 77.5;
    XT_CHECK(xs_store_tail_ns(&t, 6544) == 77.5 && xs_store_tail_ns(&t, 8192) == 0 &&
                 xs_store_tail_ns(&p, 6544) == 0, "tail ns");
    const int64_t sizes[] = {6544, 8192, 14560, 4096};
    for (int i = 0; i < 4; i++) {
        xs_row row = {8, sizes[i], 100};
        xs_schedule s = {&row, 1, 1};
        xs_result a, b;
        if (xs_simulate(&p, &s, NULL, &a) != XS_OK || xs_simulate(&t, &s, NULL, &b) != XS_OK) {
            XT_CHECK(0, "simulate: %s", xs_errmsg());
            continue;
        }
        const double want = xs_store_tail_diverges((double)sizes[i]) ? 77.5 : 0;
        XT_CHECK(fabs(b.rows[0].issue_max_ns - a.rows[0].issue_max_ns - want) < 1e-6,
                 "%lld B: window %g vs %g", (long long)sizes[i], b.rows[0].issue_max_ns,
                 a.rows[0].issue_max_ns);
        xs_result_free(&a);
        xs_result_free(&b);
    }
}

/* The fluid rows are the published closed forms: a train of equal rows gives T_iss_iso first,
 * then T_iss(G) = max(T_iss0, V/R - G) of xs_bg_eval. */
static void test_fluid_closed_forms(void)
{
    xs_profile p = prof();
    int bad = 0;
    for (int t = 0; t < 200; t++) {
        const int k = 1 + (int)(xt_rng() % 132);
        const int64_t b = 16 * (int64_t)(1 + xt_rng() % 40000);
        const double g = (double)(xt_rng() % 200000);
        xs_schedule s;
        memset(&s, 0, sizeof s);
        for (int i = 0; i < 4; i++)
            xs_schedule_append(&s, k, b, i < 3 ? g : 0);
        xs_result f;
        if (xs_predict_fluid(&p, &s, NULL, &f) != XS_OK) {
            XT_CHECK(0, "fluid: %s", xs_errmsg());
            xs_schedule_free(&s);
            continue;
        }
        xs_bg o;
        xs_bg_eval(&p, k, (double)b, g, &o);
        const double iso = fmax(o.t_iss0_ns, (o.volume_bytes - o.capacity_bytes) /
                                                 p.drain_bytes_per_ns);
        bad += !xt_near(f.rows[0].issue_max_ns, iso, 1e-12);
        for (int i = 1; i < 4; i++)
            bad += !xt_near(f.rows[i].issue_max_ns, o.t_iss_ns, 1e-12);
        /* rows follow each other: the end is the sum of issues and gaps */
        const double end = iso + 3 * (o.t_iss_ns + g);
        bad += !xt_near(f.rows[3].end_ns, p.start_ns + 3 * p.row_start_ns + end, 1e-9);
        xs_result_free(&f);
        xs_schedule_free(&s);
    }
    XT_CHECK(bad == 0, "%d fluid rows off the closed forms", bad);
    /* per-producer bytes: T_iss0 of the largest burst, V of all; a row storing nothing is NaN
     * and its work counts towards the next row's G */
    xs_schedule s;
    memset(&s, 0, sizeof s);
    xs_schedule_append(&s, 4, 16, 0);
    xs_schedule_append(&s, 4, 16, 0);
    xs_schedule_append(&s, 4, 16, 0);
    int64_t by[12] = {65536, 16384, 0, 16384, 0, 0, 0, 0, 65536, 65536, 65536, 65536};
    double gp[12] = {1000, 1000, 1000, 1000, 500, 500, 500, 500, 0, 0, 0, 0};
    xs_programs pg = {4, by, gp};
    xs_result f;
    XT_CHECK(xs_predict_fluid(&p, &s, &pg, &f) == XS_OK, "%s", xs_errmsg());
    const double t0a = p.issue_overhead_ns + 65536 / p.issue_bytes_per_ns;
    XT_NEAR(f.rows[0].issue_max_ns, fmax(t0a, (98304 - xs_capacity(&p, 3)) /
                                                   p.drain_bytes_per_ns), 1e-12);
    XT_CHECK(isnan(f.rows[1].issue_max_ns), "a row storing nothing has no issue");
    XT_NEAR(f.rows[2].issue_max_ns, fmax(t0a, 262144 / p.drain_bytes_per_ns - 1500), 1e-12);
    xs_result_free(&f);
    xs_schedule_free(&s);
}

int main(int argc, char **argv)
{
    xt_seed("test_randsched", argc > 1 ? argv[1] : NULL);
    test_bounds_and_variety();
    test_repeatable();
    test_bad_input();
    test_zero_is_unbounded_model();
    test_store_tail();
    test_fluid_closed_forms();
    return xt_done();
}
