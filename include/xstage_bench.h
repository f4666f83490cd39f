// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_bench.h - the CPU half of the bench harness behind `xstage bench ep|tp|up`: the common
 * option block merged with a workload's own options, interleaved rounds over a point's variants,
 * statistics per variant, one table description written as the human table, CSV and JSON, and
 * the closing verdict. Nothing here touches CUDA (src/bench.c, compiled with cc, CPU-tested in
 * tests/test_bench.c); the GPU half (timing, L2 flush, report header, launch, rank agreement)
 * is tools/bench/harness.h, which also shows how a workload plugs in.
 *
 * Units: times in microseconds (us) unless a name says otherwise; spread in percent of the
 * median; timeouts and budgets in seconds.
 */
#ifndef XSTAGE_BENCH_H
#define XSTAGE_BENCH_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_outfile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- options ---------------------------------------------------------------------------------- */

/* getopt_long ids of the common options that xstage_cli.h does not name (below its
 * XS_OPT_FIRST_FREE, above its own ids): a workload's ids start at XS_OPT_FIRST_FREE. */
enum { XS_BENCH_OPT_TIMEOUT = 1090, XS_BENCH_OPT_MAX_TIME };

/* The options every bench takes, parsed by xs_bench_parse. */
typedef struct {
    xs_bench_opts b;        /* -n -w -d -g --seed --profile --set (xstage_cli.h) */
    const char *csv, *json; /* --csv FILE, --json FILE; NULL: none */
    int quick;              /* --quick: a smaller sweep (the workload decides what) */
    double timeout_s;       /* --timeout S: bound of every device-side wait, s */
    double max_time_s;      /* --max-time S: skip the points left after S s of the sweep (0: no
                             * bound) */
} xs_bench_common;

/* A workload's part of the command line and its defaults. */
typedef struct {
    const char *cmd;               /* "bench ep": usage and error messages */
    const char *about;             /* one paragraph under the usage line ('\n'-ended lines) */
    const char *shortopts;         /* the workload's short options, getopt syntax ("c:t:p:r:");
                                    * n w d g h belong to the common block */
    const struct option *longopts; /* the workload's long options, {0} ended; ids from
                                    * XS_OPT_FIRST_FREE or short letters */
    const char *help;              /* usage lines of those options, '\n'-ended */
    /* One workload option: ch is its id, arg its value (NULL for no_argument). XS_OK, or an
     * error whose message (xs_seterr) names the option and the bad text; the harness prints it
     * as the one error line. */
    xs_status (*opt)(void *ctx, int ch, const char *arg);
    void *ctx;
    /* defaults of the common block */
    int iters, warmup;             /* -n, -w */
    int quick_iters;               /* -n under --quick when -n is not given (0: unchanged) */
    long max_iters;                /* upper bound of -n */
    uint32_t seed;
    double timeout_s, max_time_s;
} xs_bench_spec;

/* Parse argv[1..argc) (argv[0] is the subcommand's name) into *c (reset to s's defaults first),
 * handing every option that is not common to s->opt. Returns 0 to go on; -1 when --help printed
 * the usage to stdout (exit 0); 1 after an error, whose one line "xstage: error: ..." is on
 * stderr (a bad value, an unknown option, a stray argument, or a workload option that reuses a
 * common name or letter). Callable more than once (resets getopt). */
int xs_bench_parse(const xs_bench_spec *s, int argc, char **argv, xs_bench_common *c);

/* The usage: "usage: xstage <cmd> [options]", s->about, the workload's options, then the
 * common options with s's defaults. */
void xs_bench_usage(FILE *f, const xs_bench_spec *s);

/* ---- statistics ------------------------------------------------------------------------------- */

/* One variant's timings over the timed rounds (us). NaN samples (rounds not run) are left out;
 * n = 0 gives NaN everywhere. */
typedef struct {
    double med, min, max; /* xs_median / xs_min / xs_max of src/stats.c */
    double p10, p90;      /* xs_quantile (linear interpolation, numpy's default) */
    int n;                /* finite samples */
} xs_bench_stat;

xs_bench_stat xs_bench_stat_of(const double *x, int n);
/* 100 (max - min) / med: the noise printed next to every timing, % (NaN when med is not > 0). */
double xs_bench_spread_pct(const xs_bench_stat *s);

/* ---- interleaved rounds ----------------------------------------------------------------------- */

/* One variant of a point (e.g. unfused, wave, interleaved, auto). */
typedef struct {
    const char *name; /* as the error lines and the columns name it */
    int on;           /* run at this point (a workload switches variants per point) */
} xs_bench_variant;

enum { XS_BENCH_VERIFY_EVERY = 0, XS_BENCH_VERIFY_LAST = 1 };

/* The rounds of one point: `warmup` untimed rounds, then `iters` timed ones; in each round every
 * variant that is on runs once. Rotated: round r starts at the r-th variant that is on (so no
 * variant always follows the same one); fixed: table order, for variants that depend on an
 * earlier one in the round (a reference output). */
typedef struct {
    int warmup, iters;
    int rotate;      /* 1: rotated order; 0: table order */
    int verify_when; /* XS_BENCH_VERIFY_EVERY run, or only the LAST round's */
    /* Before every run, untimed (the L2 flush: xs_bench_l2_before of tools/bench/harness.h);
     * NULL: nothing. */
    xs_status (*before)(void *before_ctx, int v, int round);
    void *before_ctx;
    /* One run of variant v in round `round` (0-based, warm-up rounds first): *us its time by the
     * harness's rule (events around the whole operation until every byte is visible). */
    xs_status (*run)(void *ctx, int v, int round, double *us);
    /* The run just made: *ok = 0 when its data are wrong (print the first problem). NULL: no
     * check. */
    xs_status (*verify)(void *ctx, int v, int round, int *ok);
    void *ctx;
} xs_bench_rounds;

/* Run the rounds over v[0..nv). samples[v * iters + j] gets variant v's time in timed round j
 * (NaN where it did not run); ok[v] (may be NULL) is 1 unless a verification of v failed. The
 * first error of a callback ends the rounds and is returned (its message kept). */
xs_status xs_bench_rounds_run(const xs_bench_rounds *r, const xs_bench_variant *v, int nv,
                              double *samples, int *ok);

/* ---- one table, three writers ----------------------------------------------------------------- */

enum {
    XS_COL_DOUBLE, /* double at off, or get() */
    XS_COL_INT,    /* int at off, or (int)get() */
    XS_COL_BOOL,   /* int at off, or get() != 0: yes/NO in the table, true/false in CSV, JSON */
    XS_COL_STR,    /* const char * at off, or gets() */
    XS_COL_CHARS,  /* char array at off */
    XS_COL_STAT    /* xs_bench_stat at off: four columns NAME, NAME_spread (%), NAME_min,
                    * NAME_max; the table shows the first two */
};
enum { XS_COL_FILE = 1 }; /* flags: CSV and JSON only (the table stays narrow) */

/* One column. The value comes from the row (a struct the workload owns) at offset `off`, or from
 * get / gets with `arg` (one getter serves a family of columns, e.g. one per variant). */
typedef struct {
    const char *name; /* CSV header, JSON key, table heading: [a-z0-9_], e.g. "wave_us" */
    const char *unit; /* units row: "us", "MB", "%", "x", "" */
    const char *fmt;  /* printf format of one value: "%.1f", "%d", "%s" */
    int kind;         /* XS_COL_* */
    size_t off;       /* offsetof(row, field) when get/gets is NULL */
    double (*get)(const void *row, int arg);
    const char *(*gets)(const void *row, int arg);
    int arg;
    int width;        /* table width (0: from name, unit and a minimum) */
    int flags;        /* XS_COL_FILE */
} xs_bench_col;

/* A getter for XS_COL_DOUBLE: the double at byte offset `off` of the row, ns, as us (/ 1e3);
 * arg = (int)offsetof(row, field). */
double xs_bench_ns_as_us(const void *row, int off);

#define XS_BENCH_MAX_COLS 256 /* after XS_COL_STAT expansion */

/* The expanded description: every writer walks the same leaves in the same order. */
typedef struct {
    struct xs_bench_leaf {
        char name[64];
        const xs_bench_col *col;
        int part; /* XS_COL_STAT: 0 med, 1 spread, 2 min, 3 max; else 0 */
        int width;
    } leaf[XS_BENCH_MAX_COLS];
    int n;
} xs_bench_table;

/* Expand cols[0..n) into t (the cols array must outlive t: leaves point into it). XS_EINVAL
 * with one line for a name outside [a-z0-9_] or longer than 50, a duplicate name, a missing
 * format, or more than XS_BENCH_MAX_COLS leaves. */
xs_status xs_bench_table_init(xs_bench_table *t, const xs_bench_col *cols, int n);

/* A row with no measurement: every XS_COL_DOUBLE read from the row (no getter) becomes NaN and
 * every XS_COL_STAT NaN with n = 0; integers and strings are left as they are (the workload sets
 * the point's identity and status). For rows of points that did not run. */
void xs_bench_row_blank(const xs_bench_table *t, void *row);

/* The three forms of one row (no newline from the value writers): */
void xs_bench_table_head(FILE *f, const xs_bench_table *t, int all); /* names, then units */
void xs_bench_table_row(FILE *f, const xs_bench_table *t, const void *row, int all);
void xs_bench_csv_head(FILE *f, const xs_bench_table *t);   /* "# units: ..." and the names */
void xs_bench_csv_row(FILE *f, const xs_bench_table *t, const void *row);
void xs_bench_json_row(FILE *f, const xs_bench_table *t, const void *row); /* {"name": v, ...} */
/* s as a JSON string: quoted, with quotes, backslashes and control characters escaped. */
void xs_json_string(FILE *f, const char *s);
/* all = 0: the table leaves out XS_COL_FILE columns and the min/max parts of XS_COL_STAT. The
 * table heads a spread column "sprd" (right after its timing; CSV and JSON: NAME_spread). NaN
 * prints as "nan" (table, CSV) and null (JSON). */

/* ---- the report: stdout, --csv, --json ------------------------------------------------------- */

/* The report of one bench run. Files are written by the primary rank only (xs_rank_primary):
 * the others pass their results to rank 0 through the collectives. */
typedef struct {
    const xs_bench_table *t;
    FILE *out;         /* the human report (stdout; a test passes a temporary file) */
    FILE *csv, *json;  /* NULL: not asked for (or not the primary rank) */
    xs_outfile csv_file, json_file; /* csv and json: renamed into place at close */
    const char *cmd;   /* "bench ep" */
    int phase;         /* 0 keys, 1 notes, 2 rows, 3 summary (the JSON's parts) */
    int json_items;    /* items in the current JSON array/object */
    int rows;          /* rows written */
} xs_bench_report;

/* Open --csv/--json (NULL: none) for table t on out. XS_EIO "--csv FILE: cannot write". */
xs_status xs_bench_report_open(xs_bench_report *r, const char *cmd, const xs_bench_table *t,
                               FILE *out, const char *csv, const char *json);
/* Header text ('#' lines, '\n'-ended; e.g. xs_gpu_report_header's) to the report and the CSV,
 * each line as a JSON note; before xs_bench_report_begin. */
void xs_bench_report_text(xs_bench_report *r, const char *text);
/* JSON only: "key": {fragment} (fragment: "a": 1, "b": "x"; e.g. xs_gpu_json_fields'), before
 * the notes. */
void xs_bench_report_json_object(xs_bench_report *r, const char *key, const char *fragment);
/* One '#' line ("# " + the text): the report, the CSV and the JSON ("notes" before the table,
 * "summary" after xs_bench_report_end). Between xs_bench_report_begin and _end (a detail line
 * under a row) the report only: the CSV's and JSON's rows stay contiguous. */
void xs_bench_report_note(xs_bench_report *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void xs_bench_report_begin(xs_bench_report *r);           /* the table's heading rows */
void xs_bench_report_row(xs_bench_report *r, const void *row); /* one row in all three */
void xs_bench_report_end(xs_bench_report *r);             /* after the last row */
/* The closing line and the exit status: "# <cmd> OK: N points, every run verified" (0), or
 * "# <cmd> FAILED: F point(s) failed or did not verify" (1); interrupted = 1 writes
 * "# INTERRUPTED: partial results" instead and returns 1. Closes the files. */
int xs_bench_report_close(xs_bench_report *r, int points, int failures, int interrupted);

/* ---- the sweep -------------------------------------------------------------------------------- */

/* The points of a sweep, run in order, one row each (the workload's row struct). */
typedef struct {
    int npoints;
    void *rows;       /* npoints rows of row_bytes bytes, owned by the workload */
    size_t row_bytes;
    /* Point i into row: XS_OK with *verified (0: some run's data were wrong; its line printed;
     * XS_BENCH_CANNOT_RUN: the point cannot run here, e.g. it does not fit the device's memory,
     * and its row says why in a status column: written, counted in tally.cannot, not a
     * failure), or an error, which the sweep prints as "xstage: error: [rank R: ]LABEL:
     * message". */
    xs_status (*point)(void *ctx, int i, void *row, int *verified);
    /* Point i's name for error lines, e.g. "olmoe-1b-7b balanced T=512 N=4" (NULL: none). */
    void (*label)(void *ctx, int i, char *buf, size_t n);
    /* After point i's row: detail lines under it (xs_bench_report_note: the report only), e.g.
     * pilot runs or the slowest rank's medians (NULL: none). */
    void (*detail)(void *ctx, int i, const void *row, xs_bench_report *r);
    void *ctx;
    /* From the harness (xs_bench_sweep_hooks of tools/bench/harness.h); zero: one process */
    int lockstep;     /* -g: a failed point ends the sweep (the other ranks would wait for it);
                       * error lines name the rank */
    int rank;         /* -g: this rank */
    /* Before each point: *interrupted comes in as this process's xs_interrupted(); the hook
     * sets *late (--max-time spent) and agrees both over the ranks, so that lockstep ranks stop
     * or skip at the same point. NULL: never late. */
    xs_status (*between)(void *hctx, int *interrupted, int *late);
    int (*sticky)(void); /* after XS_ECUDA: 1 when no later point can run; NULL: never */
    void *hctx;
    /* A declared grid reports every point (issue 33): a point that failed or was not started
     * (--max-time) still gets its row, filled by this hook with its status line ("failed:
     * <message>", "not run: --max-time 200 s spent"); the failure still counts as one. NULL: such
     * points have no row. */
    void (*unrun)(void *ctx, int i, void *row, const char *status);
} xs_bench_sweep;

enum { XS_BENCH_CANNOT_RUN = -1 }; /* xs_bench_sweep.point's *verified: see there */

/* What a sweep did, in points. */
typedef struct {
    int run;         /* started */
    int ok;          /* rows written, every run verified */
    int wrong;       /* rows written with wrong data */
    int failed;      /* a call failed: no row */
    int skipped;     /* not started: --max-time spent */
    int cannot;      /* rows of points that cannot run here (XS_BENCH_CANNOT_RUN) */
    int interrupted; /* SIGINT/SIGTERM arrived: the sweep stopped between points */
    int stopped;     /* a failure ended the sweep (lockstep ranks, or a sticky CUDA error) */
} xs_bench_tally;

/* Run the points in order: stop between points on an interrupt (xstage_sigint.h), skip the
 * rest once late, write each completed point's row to r (NULL: none), print each failure's one
 * line (a failed `between` hook counts as the point's failure). */
void xs_bench_sweep_run(const xs_bench_sweep *s, xs_bench_report *r, xs_bench_tally *t);
/* End the table (if the workload has not), note skipped points, write the verdict and close
 * the report (xs_bench_report_close: OK when no point failed or had wrong data). Returns the
 * exit status; an interrupt also prints "xstage: error: <cmd>: interrupted by SIGINT after N of
 * M points; partial results marked". */
int xs_bench_sweep_close(xs_bench_report *r, const xs_bench_tally *t, int npoints);

/* ---- ranks (-g) ------------------------------------------------------------------------------- */

/* A point's verdict and medians as one vector for an element-wise maximum over the ranks
 * (xs_coll_max): g[0] = wrong data (0/1), g[1] = max error (NaN as +Inf), g[2 + i] = med[i]
 * (NaN as -1). After the maximum, unpack: *ok = no rank saw wrong data, *max_err the worst
 * (NaN when none), rank_max[i] the slowest rank's median (NaN where none ran). */
void xs_bench_verdict_pack(int ok, double max_err, const double *med, int n, double *g);
void xs_bench_verdict_unpack(const double *g, int n, int *ok, double *max_err, double *rank_max);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_BENCH_H */
