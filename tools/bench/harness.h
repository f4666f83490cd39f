// SPDX-License-Identifier: Apache-2.0
/*
 * harness.h - the GPU half of the bench harness behind `xstage bench ep|tp|up`, as nccl-tests'
 * common.cu serves every collective: a workload brings a variant table, a column table and a
 * point function; the harness owns the options, the launch over ranks, the timing rule, the L2
 * flush, the interleaved rounds, the statistics, the report and the verdict.
 *
 * The CPU half (options, rounds, statistics, table/CSV/JSON writers, verdict) is
 * include/xstage_bench.h (src/bench.c, tested without a GPU); this file adds what needs CUDA.
 *
 * Contracts
 *   - Timing rule: one CUDA event before the whole operation and one after it, on the bench
 *     stream; the time is read once the second event completed, i.e. every kernel and copy of
 *     the operation finished and every byte it stored is visible. L2 is overwritten before every
 *     timed run (one scratch buffer of twice the L2 size) and, with -g, the ranks meet before and
 *     after the operation, so no source stores into a window its owner is still verifying.
 *   - Times are microseconds (us), spreads percent of the median, bounds seconds.
 *   - Files (--csv, --json) are written by rank 0 only; ranks > 0 print to /dev/null (the
 *     launcher) and hand their verdicts and medians to rank 0 (xs_bench_agree_verdict).
 *   - Every call returns an xs_status with a one-line message; the bench's entry turns a failure
 *     into "xstage: error: ..." and a non-zero exit (xs_cli_fail).
 *
 * How a workload plugs in (tools/bench/<w>.cu; every w_* name is the workload's own):
 *
 *     enum { V_UNFUSED, V_FUSED, NV };                          // the variant table
 *     typedef struct { int tokens, verified; xs_bench_stat t[NV]; double bound_us; } w_row;
 *     static const xs_bench_col w_cols[] = {                    // the column table
 *         {"tokens", "", "%d", XS_COL_INT, offsetof(w_row, tokens)},
 *         {"unfused_us", "us", "%.1f", XS_COL_STAT, offsetof(w_row, t[V_UNFUSED])},
 *         {"fused_us", "us", "%.1f", XS_COL_STAT, offsetof(w_row, t[V_FUSED])},
 *         {"bound_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(w_row, bound_us), 0, 0, 0, 0,
 *          XS_COL_FILE},                                        // CSV/JSON only
 *         {"verified", "", NULL, XS_COL_BOOL, offsetof(w_row, verified)}};
 *
 *     typedef struct { xs_bench_env *e; w_problem *p; } w_ctx;
 *     static xs_status w_op(void *x, int v, cudaStream_t s)   // enqueue one run of v
 *     { w_ctx *c = (w_ctx *)x; return v == V_FUSED ? w_fused(c->p, s) : w_unfused(c->p, s); }
 *     static xs_status w_run(void *x, int v, int round, double *us)
 *     { w_ctx *c = (w_ctx *)x;
 *       XS_TRY(w_poison(c->p, c->e->stream));                 // before the flush
 *       return xs_bench_time_op(c->e, w_op, x, v, round, "w fused", us); }
 *     static xs_status w_verify(void *x, int v, int round, int *ok) { ... w_check(...) ... }
 *
 *     static xs_status w_point(void *ctx, int i, void *rowp, int *verified)   // one point
 *     {
 *         w_row *row = (w_row *)rowp; w_ctx c = {...};         // problem of point i
 *         xs_bench_variant var[NV] = {{"unfused", 1}, {"fused", 1}};
 *         xs_bench_rounds r = xs_bench_rounds_default(c.e, w_run, w_verify, &c);
 *         double s[NV * XS_BENCH_MAX_ITERS], med[NV]; int ok[NV];
 *         XS_TRY(xs_bench_rounds_run(&r, var, NV, s, ok));
 *         for (int v = 0; v < NV; v++)
 *             row->t[v] = xs_bench_stat_of(s + v * r.iters, r.iters), med[v] = row->t[v].med;
 *         *verified = ok[V_UNFUSED] && ok[V_FUSED];
 *         XS_TRY(xs_bench_agree_verdict(c.e, verified, NULL, med, NULL, NV)); // -g: all ranks
 *         row->verified = *verified;
 *         return XS_OK;
 *     }
 *
 *     extern "C" int xs_bench_w(int argc, char **argv)
 *     {
 *         w_opts o = {...};                                     // the workload's defaults
 *         const xs_bench_spec spec = {"bench w", "  what it measures\n", "t:", w_long, w_help,
 *                                     w_opt, &o, 5, 1, 3, XS_BENCH_MAX_ITERS, 1, 2.0, 0};
 *         xs_bench_common c; xs_bench_env e; xs_bench_table t; xs_bench_report rep;
 *         int rc = xs_bench_parse(&spec, argc, argv, &c);
 *         if (rc) return rc < 0 ? 0 : rc;                      // --help: 0; error: 1
 *         ... workload checks after parsing (xs_gpus_check with its conflicts) ...
 *         if ((rc = xs_bench_start(&e, &c, c.b.gpus_set && c.b.gpus > 1)) >= 0) return rc;
 *         XS_CHECK(xs_bench_table_init(&t, w_cols, 5));
 *         if (xs_bench_report_open(&rep, "bench w", &t, stdout, c.csv, c.json) != XS_OK)
 *             { xs_bench_stop(&e, 1); return xs_cli_fail(); }
 *         xs_bench_report_header(&rep, &e, argc, argv);
 *         xs_bench_report_note(&rep, "times: median of %d runs after %d warm-up, ...", ...);
 *         xs_bench_report_begin(&rep);
 *         w_row rows[W_MAX]; w_sweep_ctx sc = {...};
 *         xs_bench_sweep sw = {npoints, rows, sizeof rows[0], w_point, w_label, NULL, &sc};
 *         xs_bench_sweep_hooks(&sw, &e);
 *         xs_bench_tally tally;
 *         xs_bench_sweep_run(&sw, &rep, &tally);
 *         xs_bench_report_end(&rep);
 *         ... summary: xs_bench_report_note(&rep, "geomean ...") ...
 *         rc = xs_bench_sweep_close(&rep, &tally, npoints);   // "# bench w OK" or FAILED
 *         xs_bench_stop(&e, tally.stopped || tally.interrupted);
 *         return rc;
 *     }
 */
#ifndef XSTAGE_BENCH_HARNESS_H
#define XSTAGE_BENCH_HARNESS_H

#include <cuda_runtime.h>
#include "xstage_bench.h"
#include "xstage_cuda.h"
#include "xstage_launch.h"
#include "xstage_win.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XS_BENCH_MAX_ITERS 1000     /* -n bound of every bench */
#define XS_BENCH_BARRIER_MS 120000  /* -g: ranks drift by a point's host-side work, not more */

/* One scratch buffer larger than L2; overwriting it evicts whatever a previous run left. */
typedef struct {
    void *buf;
    size_t bytes; /* 2 x L2, at least 64 MiB */
} xs_bench_l2;

/* Everything a point needs from the harness. Filled by xs_bench_start. */
typedef struct {
    const xs_bench_common *c; /* the parsed options */
    xs_gpu_info gi;           /* this process's GPU (a rank's: XS_DEVICE) */
    int me, nranks;           /* rank of a -g run; 0 of 1 otherwise */
    int real;                 /* -g N: the ranks are real peers (coll is open) */
    xs_coll *coll;            /* -g: the collectives of the baselines and the agreements */
    xs_winset *ws;            /* -g: the windows whose barrier holds the ranks in lockstep; the
                               * workload sets it when it opens a point's windows (NULL: none) */
    cudaStream_t stream;      /* the bench stream (non-blocking) */
    cudaEvent_t ev[2];        /* the timing rule's two events */
    xs_bench_l2 l2;
    double t0;                /* xs_now_s() at the start of the sweep, s */
} xs_bench_env;

/* The launch decision and the setup of a bench:
 *   real = 1 (-g N with real peers): the parent starts one rank per GPU (xs_bench_launch) and
 *   waits; each rank goes on with its rank, GPU and collectives;
 *   then the GPU (xs_gpu_open), the stream, the events and the L2 scratch buffer.
 * Returns -1 when this process does the work (*e filled), otherwise the exit status the bench
 * returns at once: the ranks' status in the launching parent, 1 after a failure (its one line
 * printed). */
int xs_bench_start(xs_bench_env *e, const xs_bench_common *c, int real);
/* Release what xs_bench_start made; abort = 1 after an error (the collectives are aborted, not
 * closed collectively). */
void xs_bench_stop(xs_bench_env *e, int abort);

/* ---- the timing rule ------------------------------------------------------------------------ */

/* Enqueue one operation of variant v on stream s (kernels, copies, collectives). */
typedef xs_status (*xs_bench_op)(void *ctx, int v, cudaStream_t s);

/* One timed run: L2 flushed (value round & 0xff), -g barrier, event, op, event, wait for the
 * second event (bounded by --timeout, XS_ETIMEOUT "WHAT did not finish within N s"), -g barrier;
 * *us the time between the events. */
xs_status xs_bench_time_op(xs_bench_env *e, xs_bench_op op, void *ctx, int v, int round,
                           const char *what, double *us);
/* For operations that time themselves (a library call returning its own event time): the same
 * rule around them without the events: flush, barrier, run, barrier. The flush overwrites the
 * scratch buffer with round & 0xff on the bench stream and returns once it is done (after
 * whatever the caller enqueued on that stream before), so an operation on any stream starts
 * with a cold L2. */
xs_status xs_bench_flush_l2(xs_bench_env *e, int round);
/* The same overwrite enqueued on stream s without waiting for it: for an operation that runs on
 * s after it and is launched from the host in many pieces (a cuBLAS call per expert), so that its
 * launches queue up while the flush runs, as they would behind earlier work in a pipeline;
 * waiting for the flush instead would add the host's launch latency to the measured time. */
xs_status xs_bench_flush_l2_async(xs_bench_env *e, int round, cudaStream_t s);
xs_status xs_bench_barrier(const xs_bench_env *e); /* -g: all ranks meet (no-op otherwise) */
/* xs_bench_rounds.before: the L2 flush before every run (before_ctx = the xs_bench_env), for a
 * run callback that neither poisons nor calls xs_bench_time_op (which flushes itself). A run
 * that poisons its windows flushes after the poison: poison, then xs_bench_time_op. */
xs_status xs_bench_l2_before(void *env, int v, int round);

/* Rounds filled from the options: -w warm-up, -n timed, rotated, every run verified, no before
 * hook (xs_bench_time_op flushes); the caller changes rotate / verify_when / before where its
 * variants need it. */
xs_bench_rounds xs_bench_rounds_default(const xs_bench_env *e,
                                        xs_status (*run)(void *, int, int, double *),
                                        xs_status (*verify)(void *, int, int, int *), void *ctx);

/* ---- the report ----------------------------------------------------------------------------- */

/* The '#' header (device, SMs, clocks, driver, CUDA, NCCL, date, command) on the report and the
 * CSV, and as the JSON "gpu" object; with -g one more line naming the ranks. */
void xs_bench_report_header(xs_bench_report *r, const xs_bench_env *e, int argc, char **argv);

/* ---- ranks in lockstep (-g; every call is a no-op without collectives) ---------------------- */

/* v[0..n) becomes the element-wise maximum over the ranks (n <= 64). */
xs_status xs_bench_agree_max(const xs_bench_env *e, double *v, int n);
/* Every rank takes rank 0's v[0..n) (values >= -1: a decision such as a plan index). */
xs_status xs_bench_agree_rank0(const xs_bench_env *e, double *v, int n);
/* A point's verdict over the ranks: *ok = every rank verified, *max_err (may be NULL) the worst,
 * rank_max[i] (may be NULL) the slowest rank's med[i] (NaN without -g). n <= 62. */
xs_status xs_bench_agree_verdict(const xs_bench_env *e, int *ok, double *max_err,
                                 const double *med, double *rank_max, int n);
/* The sweep's hooks from the environment: the rank in error lines and lockstep with -g, the
 * interrupt and the --max-time budget agreed over the ranks, the sticky-error check
 * (xs_bench_cuda_sticky). */
void xs_bench_sweep_hooks(xs_bench_sweep *s, xs_bench_env *e);
/* --max-time: *late = 1 once the sweep ran longer than max_time_s on any rank (0: no bound). */
xs_status xs_bench_late(const xs_bench_env *e, int *late);
/* After an XS_ECUDA failure: 1 when the device is in a sticky error state (every later point
 * would fail: end the sweep), 0 when later points can still run. */
int xs_bench_cuda_sticky(void);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_BENCH_HARNESS_H */
