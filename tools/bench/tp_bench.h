// SPDX-License-Identifier: Apache-2.0
/*
 * tools/bench/tp_bench.h - the configurations and results of `xstage bench tp` shared by its driver
 * (tools/bench/tp.cu: options, the planner's pilots, the point function over the shared harness,
 * tools/bench/harness.h) and its report (tools/bench/tp_report.cu: columns, notes, summary).
 * Private to the bench.
 */
#ifndef XSTAGE_BENCH_TP_H
#define XSTAGE_BENCH_TP_H

#include <stdio.h>

#include "harness.h"
#include "tp/tp.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_cuda.h"

#define TPB_MAX_LIST 16
#define TPB_MAX_COUR 3 /* --couriers: courier counts besides 0 in one run (slots 3..8) */
/* The tile engine's rate on an H200 (local_tflops 337-375 over 34 rows), used only to
 * pick default peer counts where compute and PCIe traffic are of comparable size. */
#define TPB_ENGINE_TFLOPS 355.0
/* The same for --engine sm90: the plain gemm_sm90 kernel runs at 700-800 TFLOP/s on the H200
 * (bench/results/tp/); the fused kernel's own rate is not measured yet. About twice the rate
 * halves compute / traffic, so the defaults move to fewer peers. */
#define TPB_SM90_TFLOPS 700.0

/* The workload's options (the common ones, -n -w -d -g --seed --profile --set --csv --json
 * --quick --timeout --max-time, are the harness's xs_bench_common). */
typedef struct {
    int ops[XS_TP_NOPS], nops;
    int models[XS_TP_NMODELS], nmodels;
    int ops_set, models_set; /* --op, --model given */
    int m[TPB_MAX_LIST], nm;
    int n[TPB_MAX_LIST], nn;
    int k[TPB_MAX_LIST], nk;
    int peers[TPB_MAX_LIST], npeers;
    xs_tp_engine engine; /* --engine: the fused kernel's tile engine */
    int engine_set;      /* --engine given; else the device decides (tp_engine_default) */
    int cour[TPB_MAX_COUR], ncour; /* --couriers: courier counts run next to the default (0);
                                      default 4,6,8 on sm90, none on mma */
    int cour_set;                  /* --couriers given */
    int grid;                      /* --grid declared: the declared grid
                                      (include/xstage_grid.h), every point a row */
    const char *rows_arg;          /* --rows A:B as given (parsed once the grid is known) */
    int rows_lo, rows_hi;          /* --rows: the declared rows lo..hi-1 [all] */
} tpb_opts;

/* The couriers together issue at most this fraction of the profile's R: a few SMs paced at
 * 0.74-1.0 of the link slow no SM, unpaced above R they slow all; 0.98 beat 0.95 and 1.0 on
 * gemm_rs on the H200. */
#define TPB_COURIER_PACE 0.98
/* Runs per pilot, every one verified; the median decides (one run lets noise pick the slower
 * of two orders a few percent apart). */
#define TPB_PILOT_REPS 3

/* The variants of a configuration, run in the same rounds: the default kernel's naive and
 * shaped orders, the unfused sequence, then naive and shaped per courier count v
 * (TPB_V_COUR + 2v, + 2v + 1), then the overlapped unfused pipeline at its chosen chunk count
 * (virtual peers only), then auto's pick when no other variant runs it with the same
 * parameters (the overlapped pipeline at the model's chunk count; else not run). */
enum { TPB_V_NAIVE, TPB_V_SHAPED, TPB_V_UNFUSED, TPB_V_COUR,
       TPB_V_OVERLAP = TPB_V_COUR + 2 * TPB_MAX_COUR, TPB_V_AUTO, TPB_NV };

/* The overlapped pipeline's declared chunk counts (pieces per rank block), searched like the
 * fused orders: TPB_PILOT_REPS verified pilot runs each, the fastest median is timed. */
#define TPB_OV_CHUNKS {1, 2, 4, 8, 16}
#define TPB_OV_NCHUNKS 5

/* One courier count of a configuration (--couriers): its naive and chosen shaped orders, built
 * for grid - n compute CTAs, timed in the same rounds as the rows' default runs. */
typedef struct {
    int n;                /* courier CTAs */
    xs_bench_stat nai, shp; /* us; nan: not run */
    double shp_pred;   /* us: local_us * grid / (grid - n) + (model - ideal), the fluid model of
                          xs_tp_predict for courier orders */
    char cand[32];     /* the chosen order: naive or a pace label (f0.05/b0.0/ring: the front
                          one) */
    char pilot[512];   /* "naive <us>, <label> <us>, ...": its pilot runs */
    double pick_ms;    /* the chosen order's pilot time (real peers: the slowest rank's), ms;
                          nan with --pick model */
} tpb_cour;

/* One configuration and its results. */
typedef struct {
    xs_tp_op op;
    const char *model;
    xs_tp_shape s;
    int index;                       /* its place in the sweep as built (the input seed) */
    int grid, tiles, ok, ran, verified;
    double remote_mb, local_tflops;
    xs_bench_stat unf, nai, shp;     /* us */
    double local_us, bound_us, comm_us, nai_pred, shp_pred;                    /* us */
    double shp_local; /* the chosen shaped order against HBM windows (no link): what the order
                         and its streaming cost the GEMM itself, us */
    double floor_us; /* max(local, fill + comm): nothing to send before the first partial tile
                        when the op has no all-gather (docs/TP.md, columns) */
    int crit_ok, model_rank;
    char cand[32];
    char pilot[512]; /* "naive <us>, <label> <us>, ...": the pilot runs, one each */
    double max_err;
    char how[256];
    double rank_max[3];              /* -g N: the slowest rank's medians naive, shaped, unfused */
    xs_tp_engine engine;             /* the fused kernel's tile engine (--engine) */
    tpb_cour cour[TPB_MAX_COUR];     /* --couriers: the same rounds with courier CTAs */
    /* the planner's choice over the family (docs/TP.md "Couriers (sm90)"): shp, shp_pred and
     * cand are the chosen order's; the default kernel's shaped order is kept here */
    int shp_cour;                    /* courier count of the chosen order (0: default kernel) */
    xs_bench_stat shp0;              /* the default kernel's shaped order, us */
    double shp0_pred;                /* its prediction, us */
    char cand0[32];                  /* its pace label */
    double pick_ms;                  /* its pilot time (real peers: the slowest rank's), ms */
    /* the overlapped unfused pipeline (xs_tp_run_overlapped) and the columns over all variants */
    xs_bench_stat ovl;               /* at ovl_chunks, us; nan: not run (real peers) */
    int ovl_chunks;                  /* the chunk count the pilots chose (0: not run) */
    char ovl_pilot[160];             /* "C=<n> <us>, ...": the pilot medians */
    double cublas_us;                /* the pipeline's GEMMs alone (1 piece per rank block, no
                                        copies): the cuBLAS compute-alone time, us */
    double best_other_us;            /* the fastest median of naive, shaped, unfused,
                                        overlapped and the courier orders, us */
    char best_other[16];             /* its variant's name */
    double comm_over_compute;        /* comm_us / the fastest compute alone */
    double ovl_pred_us;              /* the overlap model (include/xstage_overlap.h) at
                                        ovl_chunks, from cublas_us and R, us */
    int ovl_model_chunks;            /* the chunk count the model alone would choose */
    double ovl_model_pred_us;        /* the overlap model at ovl_model_chunks, us */
    double ovl_pilot_us;             /* the fastest overlapped pilot median, us */
    /* auto (the model alone) and tuned (the pilots) over every variant (docs/TP.md "auto") */
    int auto_v;                      /* the variant whose timed runs are auto's (TPB_V_*;
                                        TPB_V_AUTO: its own runs), -1: no pick */
    int auto_chunks;                 /* auto's pick is the overlapped pipeline at this count
                                        (0: a fused or unfused variant) */
    char auto_name[64];              /* auto's pick */
    char auto_why[256];              /* one line: the pick over the runner-up, predictions */
    double auto_pred_us;             /* its predicted completion time, us */
    xs_bench_stat aut;               /* TPB_V_AUTO's own runs, us; nan: not run */
    double auto_us;                  /* the median of auto's pick's timed runs, us */
    int tuned_v;                     /* the variant with the fastest pilot, -1: none */
    char tuned_name[64];             /* its name */
    double tuned_us;                 /* its timed median, us */
    /* --grid declared: what became of the point (index is its row of the grid): "ok",
     * "skipped: <why>" (it cannot run here, e.g. not enough memory), "failed: <message>",
     * "not run: ..." */
    char status[200];
} tpb_row;

/* ---- the report (tp_report.cu) --------------------------------------------------------------- */

enum { TPB_MAX_COLS = 112 };
/* The columns of this run into cols (TPB_MAX_COLS): the base set, one set per courier count;
 * returns their count. Names of the per-count columns live in
 * a static buffer (one table per process). */
int tpb_cols(const tpb_opts *o, xs_bench_col *cols);
/* The '#' notes after the device header: real peers, profile, engine, slots, couriers, tiles,
 * tolerance and timing. */
void tpb_report_notes(xs_bench_report *r, const xs_bench_env *e, const tpb_opts *o,
                      const xs_profile *prof);
/* The sweep's detail hook: pilot runs, the planner's choice, couriers, and the
 * slowest rank's medians under a row. */
void tpb_detail(void *ctx, int i, const void *row, xs_bench_report *r);
/* The summary notes over the rows (after xs_bench_report_end); the verdict is the harness's. */
void tpb_summary(xs_bench_report *r, const tpb_row *rows, int nrows);

#endif /* XSTAGE_BENCH_TP_H */
