// SPDX-License-Identifier: Apache-2.0
/*
 * test_sim_record.c - recorded outputs of the event engine (xs_simulate_programs, src/sim.c).
 *
 * A fixed-seed generator draws profiles (queues, tandem buffers, per-producer caps, reserves,
 * overflow loss, arbitration skew, start and row set-up times), schedules, per-producer programs
 * (per-CTA bytes and gaps, idle rows, staggered starts) and options (sync barriers, windows and
 * backlog records on or off, chunk traces). Every number the engine returns is printed with
 * %.17g and hashed per case; the hashes must equal tests/data/sim_record.txt, written by the
 * engine before it was restructured. `test_sim_record --dump` prints every case in full (to diff
 * two builds), `--write` prints the expected file.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"
#include "xt.h"
#include "xt_rand.h"

#define NCASES 600
#define EXPECTED "tests/data/sim_record.txt"

/* the text of one case, hashed (FNV-1a 64) and, with --dump, printed */
static uint64_t hash;
static int dump;

static void emit(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (int i = 0; i < n && i < (int)sizeof line - 1; i++) {
        hash ^= (unsigned char)line[i];
        hash *= 0x100000001b3ull;
    }
    if (dump)
        fputs(line, stdout);
}

static int uniform_int(int lo, int hi) /* lo..hi */
{
    return lo + (int)(xt_rng() % (uint64_t)(hi - lo + 1));
}

static double pick(double p_zero, double lo, double hi) /* 0 with probability p_zero */
{
    return xt_urand() < p_zero ? 0 : lo + (hi - lo) * xt_urand();
}

static void trace_cb(void *ctx, const xs_chunk_trace *c)
{
    (void)ctx;
    emit("c %d %d %" PRId64 " %.17g %.17g %.17g %.17g\n", c->producer, c->row, c->bytes,
         c->t_queue_ns, c->t_buffer_ns, c->t_stage_ns, c->t_drained_ns);
}

static void draw_profile(xs_profile *pf)
{
    xs_profile_default(pf);
    static const double chunks[] = {48, 64, 128, 256, 1000};
    pf->chunk_bytes = chunks[uniform_int(0, 4)];
    pf->issue_bytes_per_ns = 2 + 60 * xt_urand();
    pf->drain_bytes_per_ns = 5 + 400 * xt_urand();
    pf->issue_overhead_ns = pick(0.2, 0, 3000);
    pf->capacity_bytes = pf->chunk_bytes * uniform_int(1, 4000);
    pf->capacity_bytes_per_producer = xt_urand() < 0.6 ? 0 : pf->chunk_bytes * uniform_int(1, 80);
    pf->queue_bytes_per_producer = pick(0.4, 0, 6000);
    pf->reserve_bytes_per_producer = pick(0.5, 0, 4000);
    pf->arbitration_skew = pick(0.6, 0, 1.5);
    pf->barrier_ns = pick(0.5, 0, 2000);
    pf->start_ns = pick(0.5, 0, 5000);
    pf->reserve_release = xt_urand() < 0.3;
    pf->row_start_ns = pick(0.5, 0, 800);
    pf->reserve_shared_fraction = pick(0.5, 0, 1);
    pf->buffer_bytes_per_producer = pick(0.6, 0, 8000);
    pf->overflow_capacity_loss = pick(0.6, 0, 0.6);
    pf->overflow_loss_ns = pick(0.5, 0, 4000);
}

/* one case: 0 when the engine accepted it, its status otherwise (both are recorded) */
static void run_case(int k)
{
    xs_profile pf;
    draw_profile(&pf);
    xs_schedule s = {0};
    const int nrows = uniform_int(1, 7), wide = uniform_int(1, 40);
    for (int i = 0; i < nrows; i++) {
        int64_t b = (int64_t)pick(0, 1, 12000);
        if (xt_urand() < 0.1)
            b = uniform_int(1, 300); /* less than a chunk */
        xs_schedule_append(&s, uniform_int(1, wide), b > 0 ? b : 1, pick(0.3, 0, 30000));
    }
    const int np = xs_schedule_max_producers(&s);
    int64_t *bytes = NULL;
    double *gaps = NULL;
    xs_programs pg = {0};
    const int programs = xt_urand() < 0.5;
    if (programs) {
        pg.producers = np + uniform_int(0, 2);
        bytes = calloc((size_t)nrows * pg.producers, sizeof *bytes);
        gaps = calloc((size_t)nrows * pg.producers, sizeof *gaps);
        const double idle = 0.3 * xt_urand(), stagger = pick(0.5, 0, 20000);
        for (int i = 0; i < nrows; i++)
            for (int p = 0; p < pg.producers; p++) {
                size_t at = (size_t)i * pg.producers + p;
                /* staggered starts: an idle first row whose work differs per producer */
                if (i == 0 && stagger > 0) {
                    bytes[at] = 0;
                    gaps[at] = stagger * xt_urand();
                    continue;
                }
                bytes[at] = xt_urand() < idle ? 0 : (int64_t)pick(0, 1, 15000);
                gaps[at] = pick(0.3, 0, 25000);
            }
        pg.bytes = bytes;
        pg.gap_ns = gaps;
    }
    xs_sim_opts o = {0};
    o.sync = xt_urand() < 0.35;
    o.record_windows = xt_urand() < 0.7;
    o.record_backlog = xt_urand() < 0.5;
    o.max_samples = (size_t)uniform_int(0, 40);
    if (xt_urand() < 0.4)
        o.trace = trace_cb;

    hash = 0xcbf29ce484222325ull;
    emit("case %d rows %d producers %d programs %d sync %d windows %d backlog %d trace %d\n", k,
         nrows, np, programs, o.sync, o.record_windows, o.record_backlog, o.trace != NULL);
    xs_result r;
    xs_status st = xs_simulate_programs(&pf, &s, programs ? &pg : NULL, &o, &r);
    emit("status %d\n", (int)st);
    if (st == XS_OK) {
        for (int i = 0; i < r.nrows; i++)
            emit("r %d %.17g %.17g %.17g\n", i, r.rows[i].issue_med_ns, r.rows[i].issue_max_ns,
                 r.rows[i].end_ns);
        if (r.win_start)
            for (size_t i = 0; i < (size_t)r.nrows * r.nproducers; i++)
                emit("w %zu %.17g %.17g\n", i, r.win_start[i], r.win_end[i]);
        for (size_t i = 0; i < r.nbacklog; i++)
            emit("b %.17g %.17g\n", r.backlog[i].t_ns, r.backlog[i].backlog_bytes);
        emit("peak %.17g makespan %.17g\n", r.peak_backlog_bytes, r.makespan_ns);
        xs_result_free(&r);
    }
    free(bytes);
    free(gaps);
    xs_schedule_free(&s);
}

int main(int argc, char **argv)
{
    const int write = argc > 1 && !strcmp(argv[1], "--write");
    dump = argc > 1 && !strcmp(argv[1], "--dump");
    FILE *f = write || dump ? NULL : fopen(EXPECTED, "r");
    XT_CHECK(write || dump || f, "%s: cannot open (run from the repository root)", EXPECTED);
    xt_rng_state = 20261202;
    int same = 0;
    for (int k = 0; k < NCASES; k++) {
        run_case(k);
        if (write)
            printf("%d %016" PRIx64 "\n", k, hash);
        if (!f)
            continue;
        int kk = -1;
        uint64_t want = 0;
        if (fscanf(f, "%d %" SCNx64, &kk, &want) != 2)
            kk = -1;
        XT_CHECK(kk == k && want == hash, "case %d: hash %016" PRIx64 ", recorded %016" PRIx64,
                 k, hash, want);
        same += kk == k && want == hash;
    }
    if (write || dump)
        return 0;
    if (f)
        fclose(f);
    printf("ok sim_record: %d of %d cases byte-identical to %s\n", same, NCASES, EXPECTED);
    return xt_done();
}
