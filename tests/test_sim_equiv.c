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
 *
 * Then the unlimited stage's direct run (xs_simulate_free, src/engine.h) against the engine on
 * the same profiles with an unlimited stage: rows, every window, the makespan and the last
 * byte's departure within 1e-9 relative, on drawn schedules and programs and on the UP planner's
 * per-CTA programs (xs_attn_progs_plain, every split); and its refusal where the stage can fill.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "xstage.h"
#include "xstage_up.h"
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

/* Within 1e-9 relative of the engine: times are compared on the scale of the run (a window's
 * start and end are absolute times, so their error is relative to the makespan). */
static int close_to(double a, double b, double scale)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return fabs(a - b) <= REL * fmax(scale, fmax(fabs(a), fabs(b)));
}

/* The engine and the direct run on one unlimited-stage schedule (pg may be NULL); the number of
 * values compared, or -1 on a mismatch (reported). */
static long free_vs_engine(const char *what, const xs_profile *pf, const xs_schedule *s,
                           const xs_programs *pg)
{
    xs_sim_opts o = {0};
    o.record_windows = 1;
    o.record_backlog = 1;
    o.max_samples = 1u << 26; /* never decimated: the last sample is the last chunk */
    xs_result a, b;
    int st = (int)xs_simulate_programs(pf, s, pg, &o, &a);
    XT_CHECK(st == XS_OK, "%s: engine failed: %s", what, xs_errmsg());
    if (st != XS_OK)
        return -1;
    o.record_backlog = 0;
    double drained = NAN;
    st = (int)xs_simulate_free(pf, s, pg, &o, &b, &drained);
    XT_CHECK(st == XS_OK, "%s: direct run failed: %s", what, xs_errmsg());
    if (st != XS_OK) {
        xs_result_free(&a);
        return -1;
    }
    const xs_sample *last = a.nbacklog ? &a.backlog[a.nbacklog - 1] : NULL;
    const double d_eng = last ? last->t_ns + last->backlog_bytes / pf->drain_bytes_per_ns : NAN;
    const double scale = fabs(a.makespan_ns);
    long n = 0, bad = 0;
    char first[160] = "";
#define FREE_CMP(x, y, name, i)                                                               \
    do {                                                                                      \
        n++;                                                                                  \
        if (!close_to((x), (y), scale) && !bad++)                                             \
            snprintf(first, sizeof first, "%s #%ld: direct %.17g, engine %.17g", name,       \
                     (long)(i), (double)(x), (double)(y));                                    \
    } while (0)
    FREE_CMP(b.makespan_ns, a.makespan_ns, "makespan", 0);
    if (last)
        FREE_CMP(drained, d_eng, "last departure", 0);
    for (int i = 0; i < a.nrows; i++) {
        FREE_CMP(b.rows[i].issue_med_ns, a.rows[i].issue_med_ns, "row median", i);
        FREE_CMP(b.rows[i].issue_max_ns, a.rows[i].issue_max_ns, "row max", i);
        FREE_CMP(b.rows[i].end_ns, a.rows[i].end_ns, "row end", i);
    }
    for (size_t k = 0; k < (size_t)a.nrows * a.nproducers; k++) {
        FREE_CMP(b.win_start[k], a.win_start[k], "window start", k);
        FREE_CMP(b.win_end[k], a.win_end[k], "window end", k);
    }
#undef FREE_CMP
    XT_CHECK(bad == 0, "%s: %ld of %ld values differ beyond %g; first %s", what, bad, n, REL,
             first);
    xs_result_free(&a);
    xs_result_free(&b);
    return bad ? -1 : n;
}

/* The direct run on drawn schedules and programs, every profile variant (sync off: the direct
 * run has none), and on UP's per-CTA programs; its refusal on a finite stage. */
static void free_corpus(void)
{
    long values = 0;
    int cases = 0, ok = 0;
    for (int k = 0; k < NPROF * 2 * 3 * 2; k++) {
        const int v = k % NPROF, programs = (k / NPROF) % 2, gapkind = (k / (NPROF * 2)) % 3;
        const int slow = k / (NPROF * 2 * 3); /* the profile's drain rate: a backlog builds */
        xs_profile pf;
        profile_variant(v, &pf);
        if (!slow)
            pf.drain_bytes_per_ns = 1e9;
        pf.capacity_bytes = 1e15;
        pf.capacity_bytes_per_producer = 0;
        if (gapkind == 2)
            pf.queue_bytes_per_producer = 3 * 4096 + 1000; /* a queue of 3 chunks */
        const int K = uniform_int(8, 132), nrows = uniform_int(20, 60);
        xs_schedule s = {0};
        /* odd sizes (short last chunks); rows of one width (gapkind 0: producers alike, which
         * the direct run runs once) or of drawn widths */
        for (int i = 0; i < nrows; i++)
            xs_schedule_append(&s, programs || gapkind == 0 ? K : uniform_int(K / 2, K),
                               16 * uniform_int(1, 8192), gapkind ? 20000 * xt_urand() : 0.0);
        int64_t *bytes = NULL;
        double *gaps = NULL;
        xs_programs pg = {0};
        if (programs) {
            pg.producers = K;
            bytes = malloc((size_t)nrows * K * sizeof *bytes);
            gaps = malloc((size_t)nrows * K * sizeof *gaps);
            for (size_t at = 0; at < (size_t)nrows * K; at++) {
                bytes[at] = xt_urand() < 0.2 ? 0 : 16 * uniform_int(1, 8192);
                gaps[at] = gapkind ? 30000 * xt_urand() : 0.0;
            }
            pg.bytes = bytes, pg.gap_ns = gaps;
        }
        char what[64];
        snprintf(what, sizeof what, "free case %d (variant %d, programs %d, slow drain %d)", k, v,
                 programs, slow);
        const long n = free_vs_engine(what, &pf, &s, programs ? &pg : NULL);
        cases++, ok += n >= 0, values += n > 0 ? n : 0;
        if (k == 0) { /* the same schedule on the finite stage: refused */
            xs_profile fin;
            profile_variant(0, &fin);
            xs_result r;
            xs_sim_opts o = {0};
            XT_CHECK(xs_simulate_free(&fin, &s, NULL, &o, &r, NULL) == XS_EINVAL,
                     "a finite stage must be refused");
        }
        free(bytes), free(gaps);
        xs_schedule_free(&s);
    }
    /* UP's programs (xs_attn_progs_simulate's unlimited stage: no queue, no buffer), snake and
     * early, every split, from the planner's synthetic tile times (lab/plan_timing.c) */
    static const int seqs[] = {8192, 16384}, splits[] = {0, 2, 8, 16};
    for (int is = 0; is < 2; is++)
        for (int causal = 0; causal <= 1; causal++)
            for (int order = XS_ATTN_ORDER_SNAKE; order <= XS_ATTN_ORDER_EARLY; order++)
                for (int sp = 0; sp < 4; sp++) {
                    const int seq = seqs[is], heads = 8, P = 4;
                    const int tiles = xs_attn_tiles(seq, heads), grid = tiles < 132 ? tiles : 132;
                    const int remote = xs_attn_remote_tiles(seq, heads, seq / P);
                    double *dur = malloc((size_t)tiles * sizeof *dur);
                    double *rb = malloc((size_t)tiles * sizeof *rb);
                    for (int t = 0; t < tiles; t++) {
                        dur[t] = 1000.0 + 37.5 * xs_attn_tile_iters(seq, heads, causal, t) *
                                              (1.0 + xt_urand() / 4);
                        rb[t] = t < remote ? 128.0 * 256 : 0.0;
                    }
                    xs_attn_progs ap;
                    xs_profile pf;
                    xs_profile_default(&pf);
                    pf.start_ns = 0, pf.row_start_ns = 0;
                    pf.queue_bytes_per_producer = 0, pf.buffer_bytes_per_producer = 0;
                    pf.drain_bytes_per_ns = 1e9, pf.capacity_bytes = 1e15;
                    pf.capacity_bytes_per_producer = 0;
                    if (xs_attn_progs_plain(seq, heads, causal, order, remote, grid,
                                            splits[sp], dur, rb, &ap) == XS_OK) {
                        xs_schedule s = {0};
                        for (int i = 0; i < ap.nrows; i++)
                            xs_schedule_append(&s, ap.grid, 16, 0.0);
                        const xs_programs pg = {ap.grid, ap.bytes, ap.gap_ns};
                        char what[64];
                        snprintf(what, sizeof what, "up seq %d causal %d order %d split %d",
                                 seq, causal, order, splits[sp]);
                        const long n = free_vs_engine(what, &pf, &s, &pg);
                        cases++, ok += n >= 0, values += n > 0 ? n : 0;
                        xs_schedule_free(&s);
                        xs_attn_progs_free(&ap);
                    } else {
                        XT_CHECK(0, "up programs: %s", xs_errmsg());
                    }
                    free(dur), free(rb);
                }
    printf("ok sim_equiv: the direct unlimited-stage run agrees with the engine on %d of %d "
           "cases (%ld values)\n", ok, cases, values);
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
    free_corpus();
    return xt_done();
}
