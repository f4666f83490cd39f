/*
 * fuzz_schedule.c - libFuzzer target: xs_schedule_parse on arbitrary bytes.
 *
 * A schedule that parses has rows within the documented limits and survives xs_schedule_write
 * and a second parse unchanged (every field exactly); one that does not leaves a one-line
 * message naming the input. A small one (up to 1000 chunks) is also simulated, free-running
 * and synchronised, and planned, on the embedded profile with and without a per-producer store
 * queue: the plan stores the same bytes and is not slower.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "xstage.h"

static void check_rows(const xs_schedule *s)
{
    FUZZ_CHECK(s->nrows >= 1 && s->nrows <= s->cap && s->rows, "nrows %d cap %d", s->nrows,
               s->cap);
    for (int i = 0; i < s->nrows; i++) {
        const xs_row *r = &s->rows[i];
        FUZZ_CHECK(r->producers >= 1 && r->producers <= XS_MAX_PRODUCERS, "row %d producers %d",
                   i, r->producers);
        FUZZ_CHECK(r->bytes_per_producer >= 1 && r->bytes_per_producer <= XS_MAX_BYTES_PER_PRODUCER,
                   "row %d bytes %lld", i, (long long)r->bytes_per_producer);
        FUZZ_CHECK(r->gap_ns >= 0 && r->gap_ns <= XS_MAX_GAP_NS, "row %d gap %g", i, r->gap_ns);
    }
}

/* Simulate and plan a schedule small enough to take well under a millisecond, on the embedded
 * profile or (queue) with a store queue of a few chunks per producer. */
static void model(const xs_schedule *s, int queue)
{
    xs_profile p;
    xs_profile_default(&p);
    p.queue_bytes_per_producer = queue ? 4 * p.chunk_bytes : 0;
    double chunks = 0;
    for (int i = 0; i < s->nrows; i++)
        chunks += s->rows[i].producers * ceil((double)s->rows[i].bytes_per_producer / p.chunk_bytes);
    if (chunks > 1000 || (double)s->nrows * xs_schedule_max_producers(s) > 1000)
        return;
    for (int sync = 0; sync <= 1; sync++) {
        xs_sim_opts o = {.sync = sync, .record_windows = 1, .record_backlog = 1, .max_samples = 64};
        xs_result r;
        xs_status st = xs_simulate(&p, s, &o, &r);
        FUZZ_CHECK(st == XS_OK, "simulate (sync %d): %s", sync, xs_errmsg());
        FUZZ_CHECK(isfinite(r.makespan_ns) && r.makespan_ns >= 0 && r.nbacklog <= 64,
                   "makespan %g, %zu samples", r.makespan_ns, r.nbacklog);
        for (int i = 0; i < r.nrows; i++)
            FUZZ_CHECK(r.rows[i].end_ns >= 0 && r.rows[i].end_ns <= r.makespan_ns &&
                           r.rows[i].issue_med_ns <= r.rows[i].issue_max_ns,
                       "row %d: end %g, issue med %g max %g, makespan %g", i, r.rows[i].end_ns,
                       r.rows[i].issue_med_ns, r.rows[i].issue_max_ns, r.makespan_ns);
        xs_result_free(&r);
    }
    xs_plan pl;
    xs_status st = xs_plan_schedule(&p, s, NULL, &pl);
    FUZZ_CHECK(st == XS_OK, "plan: %s", xs_errmsg());
    check_rows(&pl.planned);
    FUZZ_CHECK(xs_schedule_bytes(&pl.planned) == xs_schedule_bytes(s), "plan stores %g bytes, "
               "the schedule %g", xs_schedule_bytes(&pl.planned), xs_schedule_bytes(s));
    FUZZ_CHECK(pl.planned_ns <= pl.original_ns, "plan %g ns slower than the original %g ns",
               pl.planned_ns, pl.original_ns);
    xs_plan_free(&pl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    xs_schedule s;
    xs_status st = xs_schedule_parse((const char *)data, size, "fuzz.csv", &s);
    if (st != XS_OK) {
        fuzz_check_error(st, "fuzz.csv");
        FUZZ_CHECK(s.rows == NULL && s.nrows == 0, "a failed parse keeps %d rows", s.nrows);
        return 0;
    }
    check_rows(&s);

    /* write to memory, with a comment of several lines, and parse again */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    FUZZ_CHECK(f != NULL, "open_memstream");
    st = xs_schedule_write(&s, f, "fuzz round trip\nsecond comment line\n");
    FUZZ_CHECK(st == XS_OK, "write: %s", xs_errmsg());
    fclose(f);
    xs_schedule t;
    st = xs_schedule_parse(text, len, "written.csv", &t);
    FUZZ_CHECK(st == XS_OK, "written schedule does not parse: %s", xs_errmsg());
    FUZZ_CHECK(t.nrows == s.nrows, "rows %d -> %d", s.nrows, t.nrows);
    for (int i = 0; i < s.nrows; i++) {
        const xs_row *a = &s.rows[i], *b = &t.rows[i];
        FUZZ_CHECK(a->producers == b->producers && a->bytes_per_producer == b->bytes_per_producer &&
                       a->gap_ns == b->gap_ns,
                   "row %d: %d,%lld,%.17g -> %d,%lld,%.17g", i, a->producers,
                   (long long)a->bytes_per_producer, a->gap_ns, b->producers,
                   (long long)b->bytes_per_producer, b->gap_ns);
    }
    FUZZ_CHECK(xs_schedule_bytes(&s) == xs_schedule_bytes(&t), "bytes");
    FUZZ_CHECK(xs_schedule_max_producers(&s) == xs_schedule_max_producers(&t), "producers");
    xs_schedule_free(&t);
    free(text);
    model(&s, 0);
    model(&s, 1);
    xs_schedule_free(&s);
    return 0;
}
