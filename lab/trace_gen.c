// SPDX-License-Identifier: Apache-2.0
/*
 * trace_gen.c - a synthetic v1 trace (docs/TRACE.md) from the event model: K CTAs, each a
 * staggered start and then tiles of log-normal bytes separated by log-normal compute, simulated
 * on a profile and recorded the way a kernel stamps itself (issue window and work span per tile,
 * on an offset clock, in completion order). It gives the tests a recorded trace of a contended
 * kernel without a GPU; it says nothing about the model's accuracy (the model predicting its own
 * output is circular).
 *
 *   build/lab/trace_gen OUT.csv [PROFILE.json] [NAME=VALUE ...]
 *   names: ctas (132), tiles (12: each CTA 1/2..1x of it), bytes (median, 32768), sigma (0.8),
 *          work_ns (median, 40000), stagger_ns (4000), seed (1), nowork (0: 1 drops work spans)
 *
 * tests/data/trace_sim132.csv is `trace_gen tests/data/trace_sim132.csv
 * bench/results/calibrate/profile.json`.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"
#include "xstage_trace.h"

static uint64_t rng_state;

static double urand(void) /* splitmix64, uniform in (0, 1) */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double lognormal(double median, double sigma)
{
    const double g = sqrt(-2 * log(urand())) * cos(2 * M_PI * urand());
    return median * exp(sigma * g);
}

static int by_issue_end(const void *a, const void *b)
{
    const xs_trace_record *x = a, *y = b;
    if (x->issue_end_ns != y->issue_end_ns)
        return x->issue_end_ns < y->issue_end_ns ? -1 : 1;
    return x->cta < y->cta ? -1 : x->cta > y->cta;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: trace_gen OUT.csv [PROFILE.json] [NAME=VALUE ...]\n");
        return 2;
    }
    double ctas = 132, tiles = 12, bytes = 32768, sigma = 0.8, work_ns = 40000,
           stagger_ns = 4000, seed = 1, nowork = 0;
    xs_profile p;
    xs_profile_default(&p);
    const char *pfile = "embedded";
    for (int i = 2; i < argc; i++) {
        double v;
        char name[32];
        if (sscanf(argv[i], "%31[a-z_]=%lf", name, &v) == 2) {
            double *d = !strcmp(name, "ctas")         ? &ctas
                        : !strcmp(name, "tiles")      ? &tiles
                        : !strcmp(name, "bytes")      ? &bytes
                        : !strcmp(name, "sigma")      ? &sigma
                        : !strcmp(name, "work_ns")    ? &work_ns
                        : !strcmp(name, "stagger_ns") ? &stagger_ns
                        : !strcmp(name, "seed")       ? &seed
                        : !strcmp(name, "nowork")     ? &nowork
                                                      : NULL;
            if (!d) {
                fprintf(stderr, "trace_gen: unknown name '%s'\n", name);
                return 2;
            }
            *d = v;
        } else if (i == 2) {
            if (xs_profile_load(argv[i], &p) != XS_OK) {
                fprintf(stderr, "trace_gen: %s\n", xs_errmsg());
                return 1;
            }
            pfile = argv[i];
        } else {
            fprintf(stderr, "trace_gen: '%s' is not NAME=VALUE\n", argv[i]);
            return 2;
        }
    }
    const int K = (int)ctas, T = (int)tiles;
    if (K < 1 || K > 4096 || T < 1 || T > 10000) {
        fprintf(stderr, "trace_gen: ctas 1..4096, tiles 1..10000\n");
        return 2;
    }
    rng_state = (uint64_t)seed;
    /* programs: row 0 the stagger and the first tile's work; row j + 1 tile j, then the next
     * tile's work; each CTA stops after its own count of tiles */
    const int nrows = T + 1;
    int64_t *b = calloc((size_t)nrows * K, sizeof *b);
    double *g = calloc((size_t)nrows * K, sizeof *g);
    double *work = calloc((size_t)nrows * K, sizeof *work); /* work before tile j: [j * K + c] */
    int *ntiles = calloc((size_t)K, sizeof *ntiles);
    xs_schedule s = {0};
    for (int r = 0; r < nrows; r++)
        if (xs_schedule_append(&s, K, 1, 0) != XS_OK)
            return 1;
    for (int c = 0; c < K; c++) {
        ntiles[c] = T / 2 + (int)(urand() * (T - T / 2 + 1));
        if (ntiles[c] > T)
            ntiles[c] = T;
        if (ntiles[c] < 1)
            ntiles[c] = 1;
        for (int j = 0; j < ntiles[c]; j++) {
            double x = lognormal(bytes, sigma);
            b[(size_t)(j + 1) * K + c] = x < 16 ? 16 : x > 4e6 ? 4000000 : (int64_t)(x / 16) * 16;
            work[(size_t)j * K + c] = lognormal(work_ns, sigma);
        }
        g[c] = urand() * stagger_ns + work[c];
        for (int j = 0; j + 1 < ntiles[c]; j++)
            g[(size_t)(j + 1) * K + c] = work[(size_t)(j + 1) * K + c];
    }
    xs_programs pg = {.producers = K, .bytes = b, .gap_ns = g};
    xs_sim_opts so = {.record_windows = 1};
    xs_result res;
    if (xs_simulate_programs(&p, &s, &pg, &so, &res) != XS_OK) {
        fprintf(stderr, "trace_gen: %s\n", xs_errmsg());
        return 1;
    }
    /* stamps on a clock that started long ago, as %globaltimer does */
    const int64_t clock0 = INT64_C(1764000000000000000);
    size_t n = 0;
    xs_trace_record *rec = calloc((size_t)K * T, sizeof *rec);
    for (int c = 0; c < K; c++)
        for (int j = 0; j < ntiles[c]; j++) {
            const size_t at = (size_t)(j + 1) * K + c;
            const double a = res.win_start[at], e = res.win_end[at];
            /* the tile's work ends just before its issue (the row's set-up in between) */
            const double we = a - p.row_start_ns, ws = we - work[(size_t)j * K + c];
            rec[n++] = (xs_trace_record){
                .cta = c, .sm = (c * 7) % K, .seq = j, .flags = nowork ? 0 : XS_TRACE_WORK,
                .bytes = b[at], .issue_start_ns = clock0 + llround(a),
                .issue_end_ns = clock0 + llround(e), .work_start_ns = clock0 + llround(ws),
                .work_end_ns = clock0 + llround(we)};
        }
    qsort(rec, n, sizeof *rec, by_issue_end);
    char m[6][160];
    snprintf(m[0], sizeof m[0], "capacity=%zu", (size_t)K * T);
    snprintf(m[1], sizeof m[1], "producers=%d", K);
    snprintf(m[2], sizeof m[2], "device=simulated on %.100s", pfile);
    snprintf(m[3], sizeof m[3], "kernel=trace_gen ctas=%d tiles=%d bytes=%.0f sigma=%.2f "
             "work_ns=%.0f stagger_ns=%.0f seed=%.0f", K, T, bytes, sigma, work_ns, stagger_ns,
             seed);
    snprintf(m[4], sizeof m[4], "clock=globaltimer");
    snprintf(m[5], sizeof m[5], "target=%s", p.path[0] ? p.path : "host");
    const char *meta[] = {m[0], m[1], m[2], m[3], m[4], m[5], NULL};
    if (xs_trace_write(argv[1], rec, n, 0, meta) != XS_OK) {
        fprintf(stderr, "trace_gen: %s\n", xs_errmsg());
        return 1;
    }
    double total = 0;
    for (size_t i = 0; i < n; i++)
        total += (double)rec[i].bytes;
    fprintf(stderr, "trace_gen: %zu tiles of %d CTAs, %.4g bytes, last issue end %.1f us, peak "
            "backlog %.0f bytes\n", n, K, total, res.makespan_ns / 1e3, res.peak_backlog_bytes);
    xs_result_free(&res);
    xs_schedule_free(&s);
    free(b);
    free(g);
    free(work);
    free(ntiles);
    free(rec);
    return 0;
}
