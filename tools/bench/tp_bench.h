/*
 * tools/bench/tp_bench.h - the configurations and results of `xstage bench tp` shared by its driver
 * (tools/bench/tp.cu: options, runs, the planner's pilots) and its report
 * (tools/bench/tp_report.cu). Private to the bench.
 */
#ifndef XSTAGE_BENCH_TP_H
#define XSTAGE_BENCH_TP_H

#include <stdio.h>

#include "tp/tp.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_cuda.h"

#define TPB_MAX_LIST 16
#define TPB_MAX_ITERS 1000
#define TPB_MAX_COUR 3 /* --couriers: courier counts besides 0 in one run (slots 3..8) */
/* The tile engine's rate on an H200 (local_tflops 337-375 over 34 rows), used only to
 * pick default peer counts where compute and PCIe traffic are of comparable size. */
#define TPB_ENGINE_TFLOPS 355.0
/* The same for --engine sm90: the plain gemm_sm90 kernel runs at 700-800 TFLOP/s on the H200
 * (bench/results/tp/); the fused kernel's own rate is not measured yet. About twice the rate
 * halves compute / traffic, so the defaults move to fewer peers. */
#define TPB_SM90_TFLOPS 700.0

typedef struct {
    int ops[XS_TP_NOPS], nops;
    int models[XS_TP_NMODELS], nmodels;
    int m[TPB_MAX_LIST], nm;
    int n[TPB_MAX_LIST], nn;
    int k[TPB_MAX_LIST], nk;
    int peers[TPB_MAX_LIST], npeers;
    xs_bench_opts common; /* -n, -w, -d, -g N (N > 1 ranks are the peers: real windows) */
    int quick, model_pick;
    double timeout_s, max_time_s;
    const char *csv;
    xs_tp_engine engine; /* --engine: the fused kernel's tile engine */
    int slots;           /* --slots: TPB_SLOTS_ROW, _TILE or _BOTH */
    int cour[TPB_MAX_COUR], ncour; /* --couriers: courier counts run next to the default (0);
                                      default 4,8 on sm90, none on mma */
    int cour_set;                  /* --couriers given */
    double cour_rate;    /* --courier-rate: one courier's copy rate in the prediction, B/ns */
    double cour_pace;    /* --courier-pace: the couriers' pace, a fraction of the profile's R
                            (0 = unpaced) */
    int split[3], nsplit; /* --split: part counts of the split front candidates (gemm_rs with
                             couriers, virtual peers); default 2,4,8; 1 alone: none */
    int pilot_reps;       /* --pilot-reps: runs per pilot, the median decides [3] */
} tpb_opts;
#define TPB_MAX_PILOT_REPS 9

/* --slots: the reduce-scatter slot layout(s) of the fused runs (xs_tp_set_slot_layout) */
enum { TPB_SLOTS_ROW = 0, TPB_SLOTS_TILE = 1, TPB_SLOTS_BOTH = 2 };

/* One courier count of a configuration (--couriers): its naive and chosen shaped orders, built
 * for grid - n compute CTAs, timed in the same iterations as the rows' default runs. */
typedef struct {
    int n;                                       /* courier CTAs */
    double nai, nai_min, nai_max, shp, shp_min, shp_max; /* us; nan: not run */
    double shp_pred;   /* us: local_us * grid / (grid - n) + (model - ideal), the fluid model of
                          xs_tp_predict for courier orders */
    char cand[32];     /* the chosen order: naive or a pace label (f0.05/b0.0/ring: the front one) */
    char pilot[512];   /* "naive <us>, <label> <us>, ...": its pilot runs */
    double pick_ms;    /* the chosen order's pilot time (real peers: the slowest rank's), ms;
                          nan with --pick model */
} tpb_cour;

/* One configuration and its results. */
typedef struct {
    xs_tp_op op;
    const char *model;
    xs_tp_shape s;
    int grid, tiles, ok, ran, verified;
    double remote_mb, local_tflops;
    double unf, unf_min, unf_max, nai, nai_min, nai_max, shp, shp_min, shp_max; /* us */
    double nai_t, nai_t_min, nai_t_max, shp_t, shp_t_min, shp_t_max; /* --slots both: the same
                                        orders with tile-major slots, us */
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
    int failed;                      /* a library call failed (not a wrong result) */
    double rank_max[3];              /* -g N: the slowest rank's medians naive, shaped, unfused */
    xs_tp_engine engine;             /* the fused kernel's tile engine (--engine) */
    tpb_cour cour[TPB_MAX_COUR];     /* --couriers: the same iterations with courier CTAs */
    /* the planner's choice over the family (docs/TP.md "Couriers (sm90)"): shp, shp_pred and
     * cand are the chosen order's; the default kernel's shaped order is kept here */
    int shp_cour;                    /* courier count of the chosen order (0: default kernel) */
    double shp0, shp0_min, shp0_max; /* the default kernel's shaped order, us */
    double shp0_pred;                /* its prediction, us */
    char cand0[32];                  /* its pace label */
    double pick_ms;                  /* its pilot time (real peers: the slowest rank's), ms */
} tpb_row;

/* ---- the report (tp_report.cu) ----------------------------------------------------------------- */

void tpb_csv_header(FILE *f, const tpb_opts *o); /* the column line, after the # lines */
/* The # lines on stdout (and csv with its column line, when not NULL); nranks > 0: real peers. */
void tpb_report_header(FILE *csv, const xs_gpu_info *gi, const tpb_opts *o,
                       const xs_profile *prof, int nranks, int argc, char **argv);
void tpb_csv_row(FILE *f, const tpb_row *r, int both, int ncour);
void tpb_table_header(void);
void tpb_table_row(const tpb_row *r);
/* The summary lines and the closing "# bench tp OK" / "FAILED" line; 1 when a configuration
 * was not verified or not run. */
int tpb_summary(const tpb_row *rows, int nrows, int skipped);

#endif /* XSTAGE_BENCH_TP_H */
