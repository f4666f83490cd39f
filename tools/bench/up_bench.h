// SPDX-License-Identifier: Apache-2.0
/*
 * up_bench.h - what the files of `xstage bench up` share: the workload's options and one row of
 * its report. up_opts.cu holds the options; up.cu the runs and the point function; up_report.cu
 * the column table, the header notes and the summary (docs/UP.md, docs/METRICS.md).
 */
#ifndef XSTAGE_BENCH_UP_H
#define XSTAGE_BENCH_UP_H

#include "harness.h"
#include "xstage.h"
#include "xstage_up.h"

#define UP_ATOL 2e-3           /* |out - ref| <= ATOL + RTOL*|ref|: bf16 P and bf16 output */
#define UP_RTOL 2e-2
#define UP_MAX_LIST 32         /* values of --seq, --heads, --peers */
#define UP_MAX_PILOTS 8        /* --pilots */

/* The workload's options (the common ones are the harness's xs_bench_common). */
typedef struct {
    int seq[UP_MAX_LIST], nseq;
    int heads[UP_MAX_LIST], nheads;
    int peers[UP_MAX_LIST], npeers; /* -g N > 1: {N} */
    int seq_set, heads_set, peers_set;
    int causal_lo, causal_hi;
    int split;           /* -1: planner chooses; else forced */
    int order;           /* -1: planner chooses; else xs_attn_order, forced */
    int couriers;        /* -1: planner chooses (UP_COURIERS in the family); 0: none; C: forced */
    double courier_pace; /* couriers' total rate as a fraction of the profile's drain rate R;
                            0 = unpaced */
    int kv;              /* KV split: -1 planner chooses (UP_KV in the family); 0: none; N:
                            forced, N key blocks per part */
    int samples;         /* reference rows per configuration */
    int pilots;          /* --pilots: the planner runs its best `pilots` members by prediction
                            and keeps the fastest (0: the model's choice alone) */
    double pilot_max_us; /* --pilot-max-us: only in rows whose fa takes at most this long */
    double slice_ns;     /* --slice-ns: the kernel's own cost of one output slice, ns */
    const char *trace;   /* --trace DIR: the piggyback run's tiles as trace v1, per point */
    int causal_set;      /* --causal given */
    int grid;            /* --grid declared: the declared grid (include/xstage_grid.h),
                            every point a row */
    const char *rows_arg; /* --rows A:B as given */
    int rows_lo, rows_hi; /* --rows: the declared rows lo..hi-1 [all] */
} up_opts;

/* One row of the report (docs/METRICS.md). Times in us; the stats' medians are the headline
 * columns (the timing rule: events around the whole operation until every byte is at its
 * destination), their min and max the spread; *_sent_us the sender-visible times. */
typedef struct {
    int seq, heads, head_dim, causal, peers, grid, tiles, split, order, criterion_ok, verified;
    int couriers;                           /* the plan's couriers (0: none) */
    int kv;                                 /* the plan's KV split: key blocks per part (0) */
    char plan[32];                          /* the plan's name (xs_up_plan_name): "s0", "e16",
                                               "c4", "k32s8" */
    double courier_pace;                    /* their total rate, bytes/ns (0: none/unpaced) */
    double comm_mb;                         /* bytes that cross the link, MB */
    xs_bench_stat fa, serial, pb, fused;    /* event times of the whole operation, us */
    xs_bench_stat ovl;                      /* the overlapped pipeline (head chunks), us */
    int ovl_chunks;                         /* its chosen head-chunk count (0: not run) */
    double fa_sent_us, serial_sent_us, pb_sent_us, fused_sent_us, ovl_sent_us; /* sender-
                                               visible medians: in-kernel span to the last
                                               store issued (serial: + its copies' events;
                                               overlapped: events to the last kernel's end) */
    double bound_us;                        /* max(fa_us, comm bytes / R) */
    double best_other_us;                   /* fastest of serial, pb, fused, overlapped */
    char best_other[16];                    /* its name */
    double comm_over_compute;               /* (comm bytes / R) / fa_us */
    double ovl_pred_us;                     /* the overlap model at ovl_chunks, from fa_us and
                                               R (include/xstage_overlap.h), us */
    int ovl_model_chunks;                   /* the head chunks the model alone would choose */
    double fa_evt_us, fa_tflops;            /* fa's event time; its throughput, TFLOP/s */
    double copy_us, comm_ratio;             /* serial's copies (events); copy_us / fa_us */
    double pb_pred_us, pb_vis_us;           /* piggyback predicted; its event time */
    double fused_vis_us, pred_us, pred_err_pct, store_us;
    double hidden_pct, speedup, max_err;
    double crit_peak_mb, crit_sync_mb;      /* criterion_measured: peak backlog, sync. form */
    int crit_keff;                          /* most CTAs issuing at once (measured arrivals) */
    int crit_fluid_ok;                      /* the fluid criterion (docs/UP.md; comparison) */
    double crit_held_us;                    /* per-CTA piggyback: most a CTA's stores were held */
    xs_up_stall stall;                      /* piggyback's per-tile stall against fa, the last
                                               repetition's (docs/UP.md "Per-tile stall");
                                               stall_ok 0: not scored */
    int stall_ok;
    /* fused - fa taken apart, medians of per-repetition differences (us): slice_us = the
     * planned split with LOCAL output (no link) - fa, the kernel's own cost of the split;
     * link_us = fused - that run, what the link adds. NAN when the plan has no split. */
    double slice_us, link_us;
    double hidden_lo, hidden_hi;            /* min / max over repetitions of the per-repetition
                                               hidden, 100*(1 - (fused_i-fa_i)/(serial_i-fa_i)) */
    double rank_max_us[4];                  /* -g: the slowest rank's medians of fa, serial, pb
                                               and fused (detail lines, not columns) */
    int done;                               /* the row was measured (its point did not fail) */
    /* auto (the model alone) and tuned (pilots by the timing rule) over every variant */
    double auto_fa_us;                      /* fa's event time at planning (before the rounds) */
    double ovl_pilot_us;                    /* the fastest overlapped pilot median */
    double fused_pilot_us;                  /* the plan's completion time: median of
                                               UP_PILOT_REPS verified runs before the rounds */
    int auto_chunks;                        /* auto picked overlapped at this count (0: not) */
    int auto_own;                           /* auto's pick runs as its own variant */
    char auto_name[24];                     /* auto's pick: serial, pb, fused <plan>,
                                               overlapped C=<n> */
    char auto_why[256];                     /* one line: why (xs_auto_pick) */
    double auto_pred_us;                    /* its predicted completion time */
    xs_bench_stat aut;                      /* auto's own runs (nan: not run) */
    double auto_us;                         /* the median of auto's pick's timed runs */
    char tuned_name[24];                    /* the variant with the fastest pilot */
    double tuned_us;                        /* its timed median */
    /* --grid declared: the point's row of the grid and what became of it: "ok", "skipped:
     * <why>" (it cannot run here: out of device memory), "failed: <message>", "not run: ..." */
    int grid_row;
    char status[200];
} up_row;

/* Host copies of the stamps of the last timed repetition's fa run ([0]) and piggyback run
 * ([1]) of a point (xs_up_stamps), for the per-tile stall and the trace (up_report.cu). */
typedef struct {
    uint64_t *cta[2];  /* [sms * 3] */
    uint64_t *work[2]; /* [max tiles]: warp 0 finished the tile's main loop */
    uint64_t *end[2];  /* [max tiles]: warp 0 issued the tile's last store */
    int have_fa;       /* [0] holds this repetition's fa stamps */
    up_row *row;       /* the point's row */
} up_tiles;

xs_status up_tiles_open(up_tiles *t, int sms, int max_tiles);
void up_tiles_close(up_tiles *t);
/* After a piggyback run whose stamps are in [1] (fa's in [0]): the per-tile stall of c into
 * t->row (stall, stall_ok; xs_up_tile_stall on the model's profile, xs_up_model_profile) and,
 * with trace_dir (rank 0), the piggyback run as trace v1 in
 * trace_dir/up_s<seq>_h<heads>_c<causal>_p<peers>_pb.csv (created where missing). Errors
 * (stamps missing or out of order, the file) return with the message set. */
xs_status up_tiles_point(up_tiles *t, const xs_profile *prof, const xs_up_cfg *c,
                         const char *trace_dir, const xs_bench_env *e, int real);

/* The column table (up_report.cu): the CSV keeps the names and formats of the bench's earlier
 * writer; the table shows the columns without XS_COL_FILE. */
extern const xs_bench_col up_cols[];
extern const int up_ncols;
/* --grid declared: the two columns after up_cols, grid_row and status. */
extern const xs_bench_col up_grid_cols[2];

/* The bench's own '#' lines under the harness's header: the real peers, the profile and the
 * model's terms, the kernel's layout, the couriers, the timing. profile_file NULL: embedded. */
void up_header_notes(xs_bench_report *rep, const xs_bench_env *e, const up_opts *o,
                     const xs_profile *prof, const char *profile_file);
/* The sweep's figures (docs/UP.md "Current figures") over the measured rows rows[0..nrows), as
 * notes after the table; the verdict line is the harness's. */
void up_summary(xs_bench_report *rep, const up_row *rows, int nrows);

/* up_opts.cu: the bench's own options for the harness's parser (xs_bench_spec): the long-option
 * table, the one-paragraph description, the help lines, the parser of one option (ctx: the
 * up_opts), the defaults before parsing and the checks after it (0, or the exit status after the
 * one-line error). */
extern const struct option xs_upb_long[];
extern const char xs_upb_about[];
extern const char xs_upb_help[];
xs_status xs_upb_opt(void *ctx, int ch, const char *arg);
void xs_upb_defaults(up_opts *o);
int xs_upb_check_opts(up_opts *o, const xs_bench_common *c);

#endif /* XSTAGE_BENCH_UP_H */
