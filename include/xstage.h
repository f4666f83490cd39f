// SPDX-License-Identifier: Apache-2.0
/*
 * xstage.h - public C API of the xstage CPU core.
 *
 * The X-Stage is the interval after a remote store is accepted by the issuing SM and before it
 * is visible at its destination. This header covers everything that needs no GPU: status and
 * errors, calibrated profiles, burst-gap schedules, the Burst-Gap closed forms, the
 * per-producer event simulation, the planner, calibration fitting and small statistics.
 * Units are in every name or field comment: ns, bytes, bytes per ns (= GB/s).
 * docs/MODEL.md states the model; docs/METRICS.md defines every derived number.
 */
#ifndef XSTAGE_H
#define XSTAGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version (semantic versioning; CHANGELOG.md) ------------------------------------------ */

#define XSTAGE_VERSION_MAJOR 0
#define XSTAGE_VERSION_MINOR 1
#define XSTAGE_VERSION_PATCH 0
#define XSTAGE_VERSION_STRING "0.1.0"
/* One number for compile-time comparisons: 10000 * major + 100 * minor + patch. */
#define XSTAGE_VERSION                                                                        \
    (XSTAGE_VERSION_MAJOR * 10000 + XSTAGE_VERSION_MINOR * 100 + XSTAGE_VERSION_PATCH)

/* ---- status and errors ------------------------------------------------------------------ */

typedef enum {
    XS_OK = 0,
    XS_EINVAL,      /* bad argument or bad input value */
    XS_EIO,         /* file missing, unreadable or unwritable */
    XS_EPARSE,      /* malformed file */
    XS_ENOMEM,      /* host allocation failed */
    XS_ERANGE,      /* value outside what the model or hardware can represent */
    XS_ECUDA,       /* CUDA runtime error, no GPU, no driver, out of device memory */
    XS_ENCCL,       /* NCCL missing, too old, or an NCCL call failed */
    XS_ETIMEOUT,    /* a bounded wait expired */
    XS_EVERIFY,     /* data at a destination was wrong or missing */
    XS_EUNSUPPORTED, /* built without the component that is needed */
    XS_EINTR        /* stopped by SIGINT or SIGTERM (xstage_sigint.h) */
} xs_status;

/* The library never prints and never exits: a failing call returns a status and leaves a
 * one-line message (no trailing newline) that names the input, the line and the problem.
 * xs_errmsg returns it; it stays valid until the next failing call in the same thread. */
const char *xs_errmsg(void);
const char *xs_status_name(xs_status s);
xs_status xs_seterr(xs_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Source position of the first failure, for XS_DEBUG=1 traces (file:line of the library). */
const char *xs_errwhere(void);
void xs_errwhere_set(const char *file, int line);

/* Propagate a failing status, recording where it was first seen. */
#define XS_TRY(call)                                                                          \
    do {                                                                                      \
        xs_status xs_try_s_ = (call);                                                         \
        if (xs_try_s_ != XS_OK) {                                                             \
            xs_errwhere_set(__FILE__, __LINE__);                                              \
            return xs_try_s_;                                                                 \
        }                                                                                     \
    } while (0)

/* ---- profile: the calibrated numbers of one path ------------------------------------------ */

typedef struct {
    double issue_bytes_per_ns;          /* one producer's unconstrained issue rate */
    double issue_overhead_ns;           /* fixed cost of one burst on one producer */
    double drain_bytes_per_ns;          /* R: aggregate drain rate of the stage */
    double capacity_bytes;              /* Q: shared outstanding capacity */
    double capacity_bytes_per_producer; /* per-producer cap; 0 = none; Q(K) = min(Q, K*cap) */
    double chunk_bytes;                 /* acceptance granularity of the stage */
    double queue_bytes_per_producer;    /* optional: each producer's own store queue in front
                                         * of the stage (the SM's); issue of the last bytes of a
                                         * burst completes into it; default 0 */
    double reserve_bytes_per_producer;  /* optional: stage capacity each producer with stores
                                         * outstanding adds to Q (Q(K) grows with K); default 0 */
    double arbitration_skew;            /* optional: spread of the producers' shares of a
                                         * contended stage, log scale; 0 = fair; default 0 */
    double barrier_ns;                  /* optional: one grid barrier (sync replay); default 0 */
    double start_ns;                    /* optional: from the schedule's start instant to every
                                         * producer's first burst (kernel prologue: reading the
                                         * first row, a CTA barrier); shifts all ends; default 0 */
    double reserve_release;             /* optional: 1 = a producer's reserve leaves when it
                                         * has no store left to offer (its bytes stay in the
                                         * backlog); 0 = by reserve_shared_fraction; default 0 */
    double row_start_ns;                /* optional: set-up before each later row on every
                                         * producer (reading the row, CTA barriers); default 0 */
    double reserve_shared_fraction;     /* optional, f in 0..1: with reserve_release 0 a
                                         * producer's reserve leaves once its last accepted byte
                                         * is within f*Q of the drain head (its bytes have left a
                                         * buffer of its own for the shared Q); 0 = once drained;
                                         * default 0 */
    double buffer_bytes_per_producer;   /* optional: tandem queues: each producer's own buffer
                                         * between its issue path (rate r) and the shared stage Q,
                                         * filled by its producer only and emptied into Q by
                                         * arbitration; a producer stalls when it is full;
                                         * 0 = none (the earlier model); default 0 */
    double drain_under_load_bytes_per_ns; /* optional: the drain rate while every SM also runs
                                         * L2 traffic (calibrate --load-probe, line 'l2'); not
                                         * used by the event model itself, but by the models of
                                         * fused kernels whose SMs compute while their stores
                                         * drain (bench up); 0 = not measured; default 0 */
    double overflow_capacity_loss;      /* optional, in 0..1: the share of Q the stage loses
                                         * from its first refusal (a ready chunk that finds no
                                         * room) until it next runs empty; 0 = none (the earlier
                                         * model); default 0 */
    double overflow_loss_ns;            /* optional: the time over which that share is lost,
                                         * linearly from the first refusal; 0 = at once;
                                         * default 0 */
    double issue_tail_ns;               /* optional: extra issue time of a burst whose store
                                         * loop's last unrolled pass is taken by only part of the
                                         * CTA (xs_store_tail_diverges: xs_burst_pattern with 128
                                         * threads, the replay's and examples/byo's stores);
                                         * fitted by calibrate from its unconstrained bursts;
                                         * 0 = none (the earlier model); default 0 */
    char device[128];                   /* e.g. "NVIDIA H200" */
    char path[16];                      /* "host", "local", "peer" or "virtual" */
    char date[32];                      /* ISO date of the calibration */
    char command[512];                  /* command line that produced it */
    char notes[512];                    /* versions, fit residuals (informational) */
    int provisional;                    /* 1 until a calibration replaced the numbers */
} xs_profile;

/* Whether a burst of `bytes` stored by xs_burst_pattern with XS_PRODUCER_THREADS (128) threads
 * ends in an unrolled pass that only part of the CTA takes: n16 = bytes/16 units, thread t runs
 * the 4-store pass at t + 512k while t + 512k + 384 < n16, so pass k is split when
 * 0 < n16 - 384 - 512k < 128. Such a burst issues issue_tail_ns slower than its size alone
 * says (docs/MODEL.md, "Profile fields"). */
int xs_store_tail_diverges(double bytes);
/* The extra issue time of a burst of `bytes`: issue_tail_ns when xs_store_tail_diverges, else
 * 0 (ns). */
double xs_store_tail_ns(const xs_profile *p, double bytes);

/* The profile embedded in the library (H200, PCIe path to pinned host memory). */
void xs_profile_default(xs_profile *p);
/* Load a JSON profile; every required numeric field must be present and a number. */
xs_status xs_profile_load(const char *path, xs_profile *p);
xs_status xs_profile_parse(const char *text, size_t len, const char *name, xs_profile *p);
xs_status xs_profile_save(const xs_profile *p, const char *path);
/* Apply one "NAME=VALUE" override of a numeric field (the names of the JSON file). */
xs_status xs_profile_set(xs_profile *p, const char *assignment);
/* Physical plausibility: positive rates, positive capacity and chunk, chunk <= capacity. */
xs_status xs_profile_check(const xs_profile *p, const char *name);
void xs_profile_print(const xs_profile *p, FILE *f);
/* Names of the numeric fields, NULL-terminated, in file order. */
extern const char *const xs_profile_fields[];

/* ---- schedule: rows of bursts and gaps ------------------------------------------------------ */

/* Row r: producers 0..producers-1 each store bytes_per_producer bytes, then every producer
 * does gap_ns of useful work before row r+1. */
typedef struct {
    int producers;
    int64_t bytes_per_producer;
    double gap_ns;
} xs_row;

typedef struct {
    xs_row *rows;
    int nrows;
    int cap;
} xs_schedule;

#define XS_MAX_PRODUCERS 65536
#define XS_MAX_ROWS 10000000
#define XS_MAX_BYTES_PER_PRODUCER (INT64_C(1) << 40)
#define XS_MAX_GAP_NS 1e12
/* When asked to record every issue window (record_windows), the simulator keeps one per row and
 * producer: rows x the widest row's producers is then at most XS_MAX_SIM_CELLS (2^26); without
 * windows its memory is linear in producers. The one place this limit is set; docs/MODEL.md,
 * "Sizes". */
#define XS_MAX_SIM_CELLS (INT64_C(1) << 26)

/* A schedule CSV: '#' comment lines, a header naming the columns producers,
 * bytes_per_producer and gap_ns in any order (other columns are allowed and ignored; a missing
 * one is named in the error), then one row per burst. path "-" reads the standard input. */
xs_status xs_schedule_load(const char *path, xs_schedule *s);
xs_status xs_schedule_parse(const char *text, size_t len, const char *name, xs_schedule *s);
xs_status xs_schedule_append(xs_schedule *s, int producers, int64_t bytes, double gap_ns);
xs_status xs_schedule_write(const xs_schedule *s, FILE *f, const char *comment);
/* Each line of comment (may be NULL) as a '#' line: the header of every CSV xstage writes. */
void xs_write_comment(FILE *f, const char *comment);
xs_status xs_schedule_save(const xs_schedule *s, const char *path, const char *comment);
void xs_schedule_free(xs_schedule *s);
/* XS_ERANGE, naming name and the schedule's own numbers, when s is larger than a simulation that
 * records issue windows takes (rows x widest row's producers > XS_MAX_SIM_CELLS); commands that
 * record windows (predict --plot) check it before running. */
xs_status xs_schedule_check_size(const xs_schedule *s, const char *name);
int xs_schedule_max_producers(const xs_schedule *s);
double xs_schedule_bytes(const xs_schedule *s); /* sum over rows of producers*bytes */
double xs_schedule_gap_ns(const xs_schedule *s); /* sum of gaps */

/* ---- Burst-Gap closed forms (docs/MODEL.md) -------------------------------------------------- */

typedef struct {
    int producers;               /* K */
    double bytes_per_producer;   /* B */
    double volume_bytes;         /* V = K*B */
    double gap_ns;               /* G */
    double capacity_bytes;       /* Q(K) = min(Q, K*cap) + K*(queue + reserve + buffer) */
    double t_iss0_ns;            /* issue time without backpressure: o + [B - queue]+/r */
    double v_over_r_ns;          /* V/R */
    double t_period_ns;          /* published: max(T_iss0 + G, V/R) */
    double t_iss_ns;             /* published: max(T_iss0, V/R - G) */
    double delta_t_iss_ns;       /* [V/R - G - T_iss0]+ */
    double g_star_ns;            /* [V/R - T_iss0]+ */
    double q_peak0_bytes;        /* [V - R*T_iss0]+ */
    double t_iss_iso_ns;         /* isolated burst: o + max([B-queue]+/r, (V-Q(K))/R) */
    double t_iss_last_ns;        /* the same for a producer left last: only its own reserve
                                  * and buffer, Q(K) - (K-1)*(reserve + buffer) instead of Q(K)
                                  * (>= t_iss_iso) */
    double injection_bytes_per_ns; /* V / (T_iss0 + G) */
    int rate_ok;                 /* V/(T_iss0+G) <= R */
    int capacity_ok;             /* q_peak0 <= Q(K) */
    int no_backpressure;         /* both */
    /* capacity-aware steady state (ours; equals the published form when Q >= R*G) */
    double t_iss_steady_ns;      /* max(T_iss0, o + (V-Q(K))/R, max(V/R, B/r) - G) */
    double t_period_steady_ns;   /* t_iss_steady + G */
} xs_bg;

double xs_capacity(const xs_profile *p, int producers);
/* Producer p's share weight in a contended stage: exp(skew * z_p), z_p fixed in [-1, 1]. */
double xs_arbitration_weight(const xs_profile *p, int index);
void xs_bg_eval(const xs_profile *p, int producers, double bytes_per_producer, double gap_ns,
                xs_bg *out);

/* ---- per-producer event simulation --------------------------------------------------------- */

typedef struct {
    double issue_med_ns; /* median over the row's producers of first store -> last accepted */
    double issue_max_ns; /* maximum of the same */
    double end_ns;       /* when the row's last producer finished issuing, from schedule start */
} xs_rowres;

typedef struct {
    double t_ns;          /* time from schedule start */
    double backlog_bytes; /* bytes accepted and not yet drained, just after t */
} xs_sample;

typedef struct {
    int nrows;
    int nproducers;      /* max producers over rows */
    xs_rowres *rows;     /* [nrows] */
    double *win_start;   /* [nrows * nproducers] issue start per producer, NaN if inactive */
    double *win_end;     /* [nrows * nproducers] last acceptance per producer, NaN if inactive */
    xs_sample *backlog;  /* [nbacklog], only when asked for */
    size_t nbacklog;
    double peak_backlog_bytes;
    double makespan_ns;  /* when the last producer finished its last row's useful work */
} xs_result;

/* One chunk's way through the model, for tests and traces (xs_sim_opts.trace). */
typedef struct {
    int producer, row;
    int64_t bytes;
    double t_queue_ns;    /* issued by the program into its store queue (after o) */
    double t_buffer_ns;   /* streamed at r entirely into the producer's own buffer (tandem
                           * queues) or, without one, to the stage's door */
    double t_stage_ns;    /* accepted into the shared stage */
    double t_drained_ns;  /* its last byte drained (left the stage) */
} xs_chunk_trace;

typedef struct {
    int sync;             /* grid barrier between rows (all producers wait for the slowest) */
    int record_windows;   /* fill win_start / win_end */
    int record_backlog;   /* fill backlog samples (at most max_samples, evenly decimated) */
    size_t max_samples;   /* 0 = 100000 */
    /* optional: called once per chunk at its acceptance into the stage, in acceptance order */
    void (*trace)(void *ctx, const xs_chunk_trace *c);
    void *trace_ctx;
    /* 1: rows[].issue_med_ns is left NaN and the windows' lengths are not kept, so that memory
     * stays linear in the producers however far they drift apart (issue_max_ns, end_ns and
     * everything else are filled as usual); 0: every row's median (default) */
    int skip_row_medians;
} xs_sim_opts;

/* Simulate a schedule. Fills *out (free with xs_result_free). Fails with XS_ERANGE when the
 * schedule has more chunks than can be simulated in reasonable time (> 2^31), or when windows are
 * recorded for more than 2^26 (row, producer) cells. Without record_windows the memory is linear
 * in rows plus producers x the rows in flight (skip_row_medians: producers alone). */
xs_status xs_simulate(const xs_profile *p, const xs_schedule *s, const xs_sim_opts *o,
                      xs_result *out);

/* Per-producer programs (docs/MODEL.md, "Per-producer programs"): producer p's row i stores
 * bytes[i * producers + p] bytes (0: it takes no part in the row, only in its work) and then
 * works gap_ns[i * producers + p] ns, in place of the row's bytes_per_producer and gap_ns. The
 * schedule's rows give the producers taking part (p < rows[i].producers); their bytes and gaps
 * are not read. A kernel whose CTAs run different tiles (different lengths, different bytes) is
 * one program per CTA, padded with (0, 0) rows to a common length. */
typedef struct {
    int producers;          /* columns of the two arrays: at least the schedule's widest row */
    const int64_t *bytes;   /* [nrows * producers], each 0 or 1..XS_MAX_BYTES_PER_PRODUCER */
    const double *gap_ns;   /* [nrows * producers], each 0..XS_MAX_GAP_NS */
} xs_programs;

/* xs_simulate with per-producer programs (NULL: the schedule's rows, as xs_simulate). */
xs_status xs_simulate_programs(const xs_profile *p, const xs_schedule *s, const xs_programs *pg,
                               const xs_sim_opts *o, xs_result *out);
xs_status xs_result_alloc(xs_result *r, int nrows, int nproducers, int windows);
/* Per-row columns from per-producer windows (used by replay as well as by the simulation). */
void xs_result_rows_from_windows(xs_result *r, const xs_schedule *s);
void xs_result_free(xs_result *r);
/* One line per row: row,producers,bytes_per_producer,gap_ns,issue_med_ns,issue_max_ns,end_ns */
void xs_result_print(const xs_result *r, const xs_schedule *s, int csv, FILE *f);

/* ---- randomized schedules and reference predictors (src/randsched.c) ----------------------- */

/* validate --random draws schedules the calibration never ran (docs/MODEL.md, "Randomized
 * validation"): irregular producer counts, per-producer bytes and gaps, staggered starts. */
typedef struct {
    int max_producers;    /* K <= this (the SM count: one producer per SM) */
    double max_bytes;     /* the schedule's bytes, all rows, at most this (the window's room) */
} xs_rand_opts;

/* One drawn schedule in the per-producer program form. Row 0 may store nothing (stagger = 1):
 * its gaps are the producers' start offsets. rows[i].bytes_per_producer is the row's largest
 * producer (16 in a stagger row) and rows[i].gap_ns its mean gap, for printing. */
typedef struct {
    xs_schedule s;        /* rows[i].producers: producers 0..K_i-1 take part in row i */
    int producers;        /* columns of bytes / gap_ns: the widest row */
    int64_t *bytes;       /* [nrows * producers] 0 (no store) or a multiple of 16 */
    double *gap_ns;       /* [nrows * producers] work after the row's store */
    int stagger;          /* 1: row 0 is the staggered start */
} xs_randsched;

/* Draw one schedule from *state (advanced; splitmix64). The same state gives the same schedule
 * on every machine for the same profile and options. Free with xs_randsched_free. */
xs_status xs_randsched_draw(const xs_profile *p, const xs_rand_opts *o, uint64_t *state,
                            xs_randsched *out);
/* The drawn programs as xs_simulate_programs and the replay take them (views into r). */
xs_programs xs_randsched_programs(const xs_randsched *r);
void xs_randsched_free(xs_randsched *r);

/* Zero-stall predictor: every producer issues each burst in T_iss0 = o + [B - b]+/r, its clock
 * chained through its gaps (start_ns, row_start_ns as the event model), nothing ever pushes
 * back. pg may be NULL (the schedule's rows). Fills out's rows and windows like xs_simulate. */
xs_status xs_predict_zero(const xs_profile *p, const xs_schedule *s, const xs_programs *pg,
                          xs_result *out);
/* The published fluid model, row by row (docs/MODEL.md): synchronised equal producers; a row
 * of K storing producers, V bytes in all and the largest burst B issues in
 * T_iss = max(T_iss0, V/R - G) where G is the work since the previous storing row (mean over
 * producers), and in T_iss_iso = max(T_iss0, (V - Q(K))/R) when no row stored before it;
 * T_iss0 = o + [B - b]+/r. Every producer of a row gets the row's window (issue_med = issue_max);
 * rows follow each other without overlap. Fills out's rows (no windows). */
xs_status xs_predict_fluid(const xs_profile *p, const xs_schedule *s, const xs_programs *pg,
                           xs_result *out);

/* ---- planner ---------------------------------------------------------------------------------- */

typedef struct {
    double move_cost;      /* extra compute per ns of work moved between rows (locality loss) */
    double headroom;       /* fraction of Q(K) a planned burst may fill; 0 = 0.9 */
    int max_split;         /* largest split factor of one burst; 0 = 64 */
    int allow_move;        /* may move useful work between rows (default on via xs_plan_opts_default) */
} xs_plan_opts;

typedef struct {
    int reshaped;          /* 0: piggyback (kept as is) */
    int criterion_ok;      /* every row of the original meets the criterion */
    double original_ns;    /* predicted total of the original */
    double planned_ns;     /* predicted total of the plan */
    double bound_ns;       /* max(useful work + unstalled issue, bytes/R) lower bound */
    xs_schedule planned;   /* owned; free with xs_plan_free */
    char how[256];         /* one line: what the planner did */
} xs_plan;

void xs_plan_opts_default(xs_plan_opts *o);
xs_status xs_plan_schedule(const xs_profile *p, const xs_schedule *s, const xs_plan_opts *o,
                           xs_plan *out);
void xs_plan_free(xs_plan *pl);

/* ---- calibration samples and fitting (src/fit.c) ------------------------------------------- */

/* One measured row of one calibration run. experiment: "issue" (unconstrained bursts, for r and
 * o), "drain" (periodic zero-gap bursts, for R), "capacity" (isolated bursts, for Q(K)),
 * "drift" (free-running trains, for chunk_bytes). */
typedef struct {
    char experiment[16];
    int producers;
    int64_t bytes_per_producer;
    double gap_ns;
    int rows;            /* rows of the run's schedule (all equal) */
    int rep;             /* repetition */
    int row;             /* this row */
    double issue_med_ns, issue_max_ns, end_ns;
} xs_sample_row;

typedef struct {
    xs_sample_row *v;
    size_t n, cap;
} xs_samples;

xs_status xs_samples_add(xs_samples *s, const xs_sample_row *r);
void xs_samples_free(xs_samples *s);
/* CSV with the header experiment,producers,bytes_per_producer,gap_ns,rows,rep,row,issue_med_ns,
 * issue_max_ns,end_ns; '#' lines are comments (device, date, command). */
xs_status xs_samples_load(const char *path, xs_samples *s);
xs_status xs_samples_save(const xs_samples *s, const char *path, const char *comment);

typedef struct {
    int n_issue, n_drain, n_capacity, n_drift; /* samples used */
    double issue_resid_med, issue_resid_max;    /* |rel| residual of o + [B-b]+/r on "issue" */
    double drain_spread;                        /* (max - min)/median of R over K/B splits */
    double drain_by_split[16];                  /* R of each K/B split, bytes/ns */
    int drain_split_k[16];
    int n_splits;
    double capacity_by_k[32];                   /* apparent Q(K) = V - R (T_max - o), bytes,
                                                 * the smallest over stalled isolated bursts */
    int capacity_k[32];
    int n_k;
    double capacity_resid_med, capacity_resid_max; /* |rel| of the model's Q(K) against them */
    double chunk_err;                           /* event model on isolated bursts and drift
                                                 * trains: exp(mean |log(pred/meas)|) - 1 */
    int n_loss;                                 /* the overflow-loss grid on the best structure
                                                 * (entry 0: no loss, the fitted profile), each
                                                 * with Q and the skew polished, and its score
                                                 * (the search's mean |log| error, issue runs
                                                 * included); reported, not adopted */
    double loss_frac[8], loss_ns[8], loss_q[8], loss_skew[8], loss_score[8];
    char notes[512];
} xs_fit_report;

/* The report's overflow-loss grid, one line per entry ("## overflow loss" and a table). */
void xs_fit_report_loss_print(const xs_fit_report *rep, FILE *f);
/* Fit a profile from calibration samples (metadata fields of *p are kept). */
xs_status xs_fit_profile(const xs_samples *s, xs_profile *p, xs_fit_report *rep);
/* The same restricted to the published model's numbers: no producer queue, no reserve, equal
 * shares (queue_bytes_per_producer = reserve_bytes_per_producer = arbitration_skew = 0). */
xs_status xs_fit_profile_published(const xs_samples *s, xs_profile *p, xs_fit_report *rep);

/* ---- statistics ------------------------------------------------------------------------------- */

double xs_median(const double *x, size_t n);           /* does not modify x; NaN if n == 0 */
/* Half-width of the distribution-free 95 % confidence interval of the median (the order
 * statistics n/2 -+ 0.98 sqrt(n), clamped to the sample), relative to the median; INFINITY for
 * n < 2, a median <= 0 or no memory. x is not modified. */
double xs_median_ci_rel(const double *x, size_t n);
double xs_quantile(const double *x, size_t n, double q);
/* The order statistic x_(floor(q (n - 1))) of the sorted sample (0-based), no interpolation;
 * NaN if n == 0. x is not modified. */
double xs_quantile_lower(const double *x, size_t n, double q);
double xs_geomean(const double *x, size_t n);
double xs_min(const double *x, size_t n);
double xs_max(const double *x, size_t n);
double xs_now_s(void); /* seconds on the monotonic clock: host timing and host-side bounds */

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_H */
