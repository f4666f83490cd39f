// SPDX-License-Identifier: Apache-2.0
/*
 * ep_bench.h - what the two files of `xstage bench ep` share (tools/bench/ep.cu: options, the
 * points, the runs; tools/bench/ep_report.cu: the column table and the summary): the variants
 * and one row of results. docs/EP.md defines every column; the harness (tools/bench/harness.h)
 * writes the rows as the table, CSV and JSON.
 */
#ifndef XSTAGE_EP_BENCH_H
#define XSTAGE_EP_BENCH_H

#include <stdio.h>

#include "ep/ep.h"
#include "xstage_bench.h"

/* the *_BULK variants (--bulk): the same plans as wave, interleaved and auto, with the Linear-2
 * epilogues handing their rows to the TMA (xs_moe_run_opts.bulk_combine) */
/* EP_AUTO runs auto's pick (ep_row.auto_kind): its fused plan (plan slot 2; the *_BULK, defer
 * and fixed variants run that plan too), the overlapped pipeline or unfused. EP_OVERLAP: the
 * overlapped unfused pipeline at the pilots' chunk count (virtual peers only). */
enum { EP_UNFUSED, EP_WAVE, EP_INTER, EP_AUTO, EP_COURIER, EP_ADAPT, EP_WAVE_BULK,
       EP_INTER_BULK, EP_AUTO_BULK, EP_AUTO_DEFER, EP_AUTO_FIXED, EP_OVERLAP, EP_NVAR };
enum { EP_PICK_FUSED, EP_PICK_OVERLAP, EP_PICK_UNFUSED }; /* ep_row.auto_kind */
#define EP_IS_BULK(v) ((v) >= EP_WAVE_BULK && (v) <= EP_AUTO_BULK)

typedef struct {
    const char *config;
    const char *routing;
    int tokens, peers, rows, lead, auto_lead, criterion_ok, reshape_ok, auto_paced, verified;
    const char *auto_choice;
    char auto_plan[40];     /* the table's short form of auto's decision, e.g. "inter D=3 p c4" */
    xs_bench_stat t[EP_NVAR]; /* per variant, us */
    xs_bench_stat local, local_inter; /* the local control, wave and interleaved order, us */
    double bound_us, compute_us, drain_us, cublas_gemm_us, gemm_eff;
    double pred_wave_us, pred_inter_us, pred_paced_us, pred_auto_us, remote_mb, max_rel_err;
    double auto_gate_us; /* auto run: median pacer wait of its Linear-2 tiles with remote rows */
    double defer_gate_us; /* auto_defer run: the same (the wait at the deferred tile's flush) */
    double block_bytes, block_speed, pace_bytes; /* the model's numbers (xs_moe_model) */
    xs_moe_stall stall_wave, stall_inter, stall_auto;
    xs_moe_stall stall_bulk[3]; /* the *_BULK runs: measured MMA side only */
    double local_span_us; /* local control: Linear-2 store span, median */
    double local_issue;   /* local control: Linear-2 store bytes per ns of span, median */
    double point_s, model_s; /* wall time of the point; of it, the host-side model (auto, stalls) */
    double fill_us;          /* auto: earliest first combine store of any order (c1 + c2, local) */
    int drain_bound;         /* auto: remote bytes / R >= 0.9 x the local control's kernel */
    int couriers;            /* C of the courier variant (auto's best courier candidate; 0: none) */
    double courier_pace;     /* its pace, fraction of R */
    const char *courier_sched; /* its order */
    double pred_courier_us;  /* its predicted time (xs_moe_auto_result.courier_ns) */
    int auto_couriers;       /* C of auto's decision (0: no couriers) */
    int adaptive;            /* auto proposed an adaptive candidate (the adaptive column) */
    double pred_adaptive_us, adaptive_ahead_us;
    double pred_spill_us;    /* auto's paced candidate on the spilling kernel (NaN: none) */
    int auto_spill;          /* auto's plan runs on the spilling kernel */
    int auto_lead_end;       /* auto's taper (xs_moe_plan.lead_end; 0: none) */
    double pred_paced_plain_us; /* auto's paced order at its unpaced best lead, no taper (NaN:
                                 * the lead search did not run) */
    int fixed_lead, fixed_lead_end; /* the auto_fixed column's plan (-1: the column did not
                                     * run) */
    double pred_fixed_us;    /* its predicted time */
    xs_moe_stall stall_adapt; /* the adaptive run: measured MMA side */
    xs_moe_stall stall_defer; /* the auto_defer run */
    xs_moe_stall stall_fixed; /* the auto_fixed run */
    char defer_kernel[16];    /* which: none, ring, spill:<depth> */
    double defer_frac;        /* auto_defer run: deferred / Linear-2 tiles with remote rows */
    char how[800];
    /* the overlapped pipeline (EP_OVERLAP; docs/EP.md "Overlapped") */
    int ovl_chunks;          /* the pilots' chunk count (0: not run) */
    int ovl_grouped;         /* the pilots' GEMM form: 1 one grouped call per layer and piece,
                              * 0 one call per expert */
    int ovl_model_chunks;    /* the model's (0: no prediction) */
    int ovl_model_grouped;   /* the model's GEMM form */
    double ovl_compute_us;   /* its compute alone: one piece, no copies (cuBLAS), median; the
                              * faster GEMM form's */
    double ovl_compute_form_us[2]; /* the same per GEMM form (per expert, grouped; NaN: none) */
    double ovl_pilot_us;     /* the chosen count's pilot median */
    double ovl_pred_us;      /* the model at the chosen count */
    double ovl_model_pred_us; /* the model at its own count */
    char ovl_pilot[300];     /* every pilot's median, e.g. "C=1 812.0, C=2 650.3, C=1g 700.1"
                              * (g: grouped GEMMs) */
    char ovl_form[12];       /* "grouped" or "per-expert" (the pilots' choice), "-" */
    /* auto's pick among its fused plan, the overlapped pipeline and unfused, from the model
     * alone (xs_auto_pick), and tuned's by the pilots; the columns over every variant */
    int auto_kind;           /* EP_PICK_* */
    int auto_ov_chunks;      /* auto_kind EP_PICK_OVERLAP: its chunk count and GEMM form */
    int auto_ov_grouped;
    double auto_pick_pred_us; /* the prediction of auto's pick */
    char auto_why[300];      /* xs_auto_pick's line */
    double auto_pilot_us;    /* auto's run's pilot median (tuned's input) */
    double tuned_us;         /* the timed median of the variant with the least pilot median */
    char tuned[32];          /* its name */
    double best_other_us;    /* the fastest variant other than auto */
    char best_other[24];     /* its name */
    double comm_over_compute; /* drain_us / compute_us */
    double rank_max_us[EP_NVAR]; /* -g: the slowest rank's median per variant (NaN otherwise) */
    /* --grid declared: the point's row of the grid and what became of it: "ok", "skipped:
     * <why>" (it cannot run here: more memory than is free, out of memory), "failed:
     * <message>", "not run: --max-time spent" */
    int grid_row;
    char status[400];
} ep_row;

/* The columns of one row (table, CSV, JSON): ep_cols[0..ep_ncols). */
extern const xs_bench_col ep_cols[];
extern const int ep_ncols;
/* --grid declared: the two columns after ep_cols, grid_row and status. */
extern const xs_bench_col ep_grid_cols[2];
/* Fill r->auto_plan from auto's decision in the row. */
void ep_row_plan_text(ep_row *r);
/* The closing summary over the n rows of a sweep ('#' notes after the table). */
void ep_summary(xs_bench_report *rep, const ep_row *rows, int n);

#endif /* XSTAGE_EP_BENCH_H */
