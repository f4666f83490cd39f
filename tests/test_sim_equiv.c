// SPDX-License-Identifier: Apache-2.0
/*
 * test_sim_equiv.c - the engine's equivalence corpus: predictions of the event simulation
 * (xs_simulate_programs, src/sim.c) on larger schedules than test_sim_record's, checked against
 * values recorded before the engine's fast paths (tests/data/sim_equiv.txt).
 *
 * The corpus crosses the regimes the fast paths separate: bursts that never contend (gaps of
 * 10 K B / R), bursts at the drain rate (gaps of K B / R), bursts well beyond it (no gap), an
 * unlimited stage (the TP and UP planners' ideal run); with per-CTA programs or the schedule's
 * rows, sync or async rows, and profiles with a store queue, tandem buffers, a per-producer cap
 * and reserves. Each case records its per-row medians, maxima and ends, its peak backlog and its
 * makespan with %.17g; every number must be within 1e-9 relative of the record (NaN where the
 * record has NaN). `test_sim_equiv --write` prints the expected file.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"
#include "xt.h"
#include "xt_rand.h"

#define EXPECTED "tests/data/sim_equiv.txt"
#define REL 1e-9

enum { NPROF = 6, NLOAD = 4 };

/* profile variant v on the embedded profile with 4 KiB chunks (64 KiB bursts: 16 chunks) */
static void profile_variant(int v, xs_profile *pf)
{
    xs_profile_default(pf);
    pf->chunk_bytes = 4096;
    switch (v) {
    case 1: /* a store queue in front of the stage */
        pf->queue_bytes_per_producer = 8192;
        break;
    case 2: /* tandem queues */
        pf->buffer_bytes_per_producer = 16384;
        break;
    case 3: /* a per-producer cap and reserves that leave once drained */
        pf->capacity_bytes_per_producer = 32768;
        pf->reserve_bytes_per_producer = 4096;
        break;
    case 4: /* skewed shares, overflow loss, set-up times */
        pf->arbitration_skew = 0.7;
        pf->overflow_capacity_loss = 0.3;
        pf->overflow_loss_ns = 2000;
        pf->start_ns = 1500;
        pf->row_start_ns = 300;
        pf->barrier_ns = 800;
        break;
    case 5: /* reserves released at issue, shared fraction */
        pf->reserve_bytes_per_producer = 8192;
        pf->reserve_release = 1;
        break;
    default:
        break;
    }
}

static int uniform_int(int lo, int hi) /* lo..hi */
{
    return lo + (int)(xt_rng() % (uint64_t)(hi - lo + 1));
}

/* the numbers of one case, in the order they are recorded */
typedef struct {
    double *v;
    size_t n, cap;
} nums;

static void put(nums *x, double v)
{
    if (x->n == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 256;
        x->v = realloc(x->v, x->cap * sizeof *x->v);
        if (!x->v) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
    }
    x->v[x->n++] = v;
}

/* Case k: profile variant, load (0: gaps 10 K B / R, 1: K B / R, 2: none, 3: an unlimited
 * stage), sync, programs; sizes drawn from the fixed seed. Returns the status. */
static int run_case(int k, nums *out)
{
    const int v = k % NPROF, load = (k / NPROF) % NLOAD, sync = (k / (NPROF * NLOAD)) % 2;
    const int programs = (k / (NPROF * NLOAD * 2)) % 2;
    xs_profile pf;
    profile_variant(v, &pf);
    if (load == 3) {
        pf.drain_bytes_per_ns = 1e9;
        pf.capacity_bytes = 1e15;
        pf.capacity_bytes_per_producer = 0;
    }
    const int K = uniform_int(8, 132), nrows = uniform_int(20, 60);
    const int64_t B = 65536;
    const double kbr = (double)K * (double)B / pf.drain_bytes_per_ns;
    const double gap = load == 0 ? 10 * kbr : load == 1 ? kbr : 0;
    xs_schedule s = {0};
    for (int i = 0; i < nrows; i++)
        xs_schedule_append(&s, programs ? K : uniform_int(K / 2, K), B, gap);
    xs_programs pg = {0};
    int64_t *bytes = NULL;
    double *gaps = NULL;
    if (programs) {
        /* per-CTA tiles: bytes 1..2 B, some idle, gaps spread about the row's */
        pg.producers = K;
        bytes = malloc((size_t)nrows * K * sizeof *bytes);
        gaps = malloc((size_t)nrows * K * sizeof *gaps);
        for (size_t at = 0; at < (size_t)nrows * K; at++) {
            bytes[at] = xt_urand() < 0.1 ? 0 : (int64_t)(B / 2 + (double)B * xt_urand());
            gaps[at] = gap * (0.5 + xt_urand());
        }
        pg.bytes = bytes;
        pg.gap_ns = gaps;
    }
    xs_sim_opts o = {0};
    o.sync = sync;
    xs_result r;
    int st = (int)xs_simulate_programs(&pf, &s, programs ? &pg : NULL, &o, &r);
    if (st == XS_OK) {
        for (int i = 0; i < r.nrows; i++) {
            put(out, r.rows[i].issue_med_ns);
            put(out, r.rows[i].issue_max_ns);
            put(out, r.rows[i].end_ns);
        }
        put(out, r.peak_backlog_bytes);
        put(out, r.makespan_ns);
        xs_result_free(&r);
    }
    free(bytes);
    free(gaps);
    xs_schedule_free(&s);
    return st;
}

static int same(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return a == b || fabs(a - b) <= REL * fmax(fabs(a), fabs(b));
}

int main(int argc, char **argv)
{
    const int write = argc > 1 && !strcmp(argv[1], "--write");
    FILE *f = write ? NULL : fopen(EXPECTED, "r");
    XT_CHECK(write || f, "%s: cannot open (run from the repository root)", EXPECTED);
    if (!write && !f)
        return xt_done();
    xt_rng_state = 20261203;
    const int ncases = NPROF * NLOAD * 4;
    int agree = 0;
    for (int k = 0; k < ncases; k++) {
        nums x = {0};
        const int st = run_case(k, &x);
        if (write) {
            printf("case %d status %d n %zu\n", k, st, x.n);
            for (size_t i = 0; i < x.n; i++)
                printf("%.17g\n", x.v[i]);
            free(x.v);
            continue;
        }
        int kk = -1, want_st = -1;
        size_t want_n = 0;
        int ok = fscanf(f, " case %d status %d n %zu", &kk, &want_st, &want_n) == 3 &&
                 kk == k && want_st == st && want_n == x.n;
        XT_CHECK(ok, "case %d: status %d, %zu numbers; recorded case %d status %d, %zu", k, st,
                 x.n, kk, want_st, want_n);
        if (!ok) {
            free(x.v);
            break;
        }
        size_t bad = 0, first = 0;
        double got = 0, rec = 0;
        for (size_t i = 0; i < want_n; i++) {
            double w;
            if (fscanf(f, " %lf", &w) != 1)
                w = -1;
            if (!same(x.v[i], w) && !bad++) {
                first = i, got = x.v[i], rec = w;
            }
        }
        XT_CHECK(bad == 0, "case %d: %zu of %zu numbers differ beyond %g; first #%zu: %.17g, "
                 "recorded %.17g", k, bad, want_n, REL, first, got, rec);
        agree += bad == 0;
        free(x.v);
    }
    if (write)
        return 0;
    fclose(f);
    printf("ok sim_equiv: %d of %d cases within %g of %s\n", agree, ncases, REL, EXPECTED);
    return xt_done();
}
