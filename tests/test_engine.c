// SPDX-License-Identifier: Apache-2.0
/*
 * test_engine.c - the incremental API of the event engine (src/engine.h, src/sim.c).
 *
 * 1. A program handed to the engine through take, driven with xs_engine_wake / xs_engine_next_ns /
 *    xs_engine_step, gives the same windows, to the bit, as xs_simulate_programs on the same
 *    per-producer programs (random profiles and programs).
 * 2. The EP kernel's stage (ep_stage): a producer woken again before its window closed queues the
 *    second burst behind the first; a burst's local bytes take issue time but bring nothing into
 *    the stage.
 *
 * usage: test_engine [seed]   last line: "N passed, N failed"
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "xstage.h"
#include "xt.h"
#include "xt_rand.h"

/* a per-producer program over rows, and the windows the engine reports */
typedef struct {
    const xs_programs *pg;
    int nrows, np;
    int *cur;
    double *w0, *w1;
} prog_run;

static int prog_take(void *ctx, int p, double t, xs_engine_burst *b)
{
    prog_run *d = ctx;
    const int row = d->cur[p]++;
    if (row >= d->nrows)
        return -1;
    const size_t at = (size_t)row * (size_t)d->np + (size_t)p;
    b->start_ns = t;
    b->bytes = (double)d->pg->bytes[at];
    b->gap_ns = d->pg->gap_ns[at];
    b->task = row;
    return 1;
}

static void prog_closed(void *ctx, int p, int task, double t0, double t1)
{
    prog_run *d = ctx;
    d->w0[(size_t)task * d->np + p] = t0;
    d->w1[(size_t)task * d->np + p] = t1;
}

static void test_against_programs(int cases)
{
    for (int k = 0; k < cases; k++) {
        xs_profile pf;
        xs_profile_default(&pf);
        pf.row_start_ns = 0; /* the built-in program adds it before every later row */
        pf.queue_bytes_per_producer = xt_urand() < 0.5 ? 0 : 16384.0 * (1 + (int)(4 * xt_urand()));
        pf.reserve_bytes_per_producer = xt_urand() < 0.5 ? 0 : 65536 * xt_urand();
        pf.capacity_bytes = 65536.0 * (2 + (int)(30 * xt_urand()));
        pf.arbitration_skew = xt_urand() < 0.5 ? 0 : xt_urand();
        const int nrows = 1 + (int)(6 * xt_urand()), np = 1 + (int)(40 * xt_urand());
        xs_row *rows = calloc((size_t)nrows, sizeof *rows);
        int64_t *bytes = malloc(sizeof(int64_t) * (size_t)(nrows * np));
        double *gaps = malloc(sizeof(double) * (size_t)(nrows * np));
        for (int i = 0; i < nrows; i++) {
            rows[i].producers = np;
            rows[i].bytes_per_producer = 1;
            for (int p = 0; p < np; p++) {
                bytes[i * np + p] = 1 + (int64_t)(200000 * xt_urand());
                gaps[i * np + p] = 3000 * xt_urand();
            }
        }
        xs_schedule s = {.nrows = nrows, .rows = rows};
        xs_programs pg = {.producers = np, .bytes = bytes, .gap_ns = gaps};
        xs_sim_opts o = {.record_windows = 1};
        xs_result r;
        XT_CHECK(xs_simulate_programs(&pf, &s, &pg, &o, &r) == XS_OK, "case %d: %s", k,
                 xs_errmsg());

        prog_run d = {&pg, nrows, np, calloc((size_t)np, sizeof(int)),
                      malloc(sizeof(double) * (size_t)(nrows * np)),
                      malloc(sizeof(double) * (size_t)(nrows * np))};
        const xs_engine_program prog = {prog_take, prog_closed, &d};
        const xs_engine_opts eo = {.nring = -1};
        xs_engine *e = NULL;
        XT_CHECK(xs_engine_open(&pf, np, &prog, &eo, &e) == XS_OK, "case %d: %s", k,
                 xs_errmsg());
        for (int p = 0; e && p < np; p++)
            xs_engine_wake(e, p, pf.start_ns);
        while (e && xs_engine_next_ns(e) < INFINITY)
            xs_engine_step(e);
        int same = 1;
        for (int i = 0; i < nrows * np; i++)
            same &= d.w0[i] == r.win_start[i] && d.w1[i] == r.win_end[i];
        XT_CHECK(same, "case %d (%d rows x %d producers): windows differ", k, nrows, np);
        xs_engine_close(e, NULL);
        xs_result_free(&r);
        free(d.cur);
        free(d.w0);
        free(d.w1);
        free(rows);
        free(bytes);
        free(gaps);
    }
}

/* ep_stage: bursts handed over one per wake */
typedef struct {
    xs_engine_burst next;
    int has;
    int nclosed;
    double w0[4], w1[4];
} ep_run;

static int ep_take(void *ctx, int p, double t, xs_engine_burst *b)
{
    ep_run *d = ctx;
    (void)p;
    (void)t;
    if (!d->has)
        return 0;
    d->has = 0;
    *b = d->next;
    return 1;
}

static void ep_closed(void *ctx, int p, int task, double t0, double t1)
{
    ep_run *d = ctx;
    (void)p;
    XT_CHECK(task == d->nclosed, "window of burst %d closed as number %d", task, d->nclosed);
    if (task >= 0 && task < 4) {
        d->w0[task] = t0;
        d->w1[task] = t1;
    }
    d->nclosed++;
}

static void ep_wake(xs_engine *e, ep_run *d, double t, double bytes, double stage, double npb,
                    int task)
{
    d->next = (xs_engine_burst){t, bytes, stage, npb, 0, task};
    d->has = 1;
    xs_engine_advance(e, t);
    xs_engine_wake(e, 0, t);
}

static void test_ep_stage(void)
{
    xs_profile pf;
    xs_profile_default(&pf);
    pf.queue_bytes_per_producer = 0;
    pf.capacity_bytes = 1e12; /* no backpressure: a chunk enters when it is streamed */
    pf.drain_bytes_per_ns = 1e6;
    const double c = pf.chunk_bytes, o = pf.issue_overhead_ns, npb = 1.0 / pf.issue_bytes_per_ns;
    ep_run d = {0};
    const xs_engine_program prog = {ep_take, ep_closed, &d};
    const xs_engine_opts eo = {.nring = -1, .ep_stage = 1};
    xs_engine *e = NULL;
    XT_CHECK(xs_engine_open(&pf, 1, &prog, &eo, &e) == XS_OK, "%s", xs_errmsg());
    if (!e)
        return;
    /* burst 0: 4 chunks from 0; burst 1: 2 chunks from 10 ns, before burst 0's window closed */
    ep_wake(e, &d, 0, 4 * c, 4 * c, npb, 0);
    int step = 0;
    for (double t; (t = xs_engine_next_ns(e)) < INFINITY; step++) {
        xs_engine_advance(e, t);
        xs_engine_step(e);
        if (step == 0)
            ep_wake(e, &d, 10, 2 * c, 2 * c, npb, 1);
    }
    XT_CHECK(d.nclosed == 2, "%d windows closed", d.nclosed);
    XT_NEAR(d.w1[0], o + 4 * c * npb, 1e-12);
    XT_CHECK(d.w0[1] == 10, "burst 1 started at %g", d.w0[1]);
    XT_NEAR(d.w1[1], d.w1[0] + 2 * c * npb, 1e-12);
    /* burst 2: local only (no stage bytes), at a quarter of the rate: it leaves no backlog (the
     * last byte drains when its last chunk is accepted, at the window's end with no queue) */
    ep_wake(e, &d, 1e6, 2 * c, 0, 4 * npb, 2);
    for (double t; (t = xs_engine_next_ns(e)) < INFINITY;) {
        xs_engine_advance(e, t);
        xs_engine_step(e);
    }
    XT_CHECK(d.nclosed == 3, "%d windows closed", d.nclosed);
    XT_NEAR(d.w1[2], 1e6 + o + 2 * c * 4 * npb, 1e-12);
    XT_CHECK(xs_engine_d_last(e) == d.w1[2], "local bytes left a backlog: drained at %g, "
             "window end %g", xs_engine_d_last(e), d.w1[2]);
    xs_engine_close(e, NULL);
}

int main(int argc, char **argv)
{
    xt_seed("test_engine", argc > 1 ? argv[1] : NULL);
    test_against_programs(200);
    test_ep_stage();
    return xt_done();
}
