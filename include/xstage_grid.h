// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_grid.h - the declared grids of the benches (issue 33, item 4): the points every
 * reference run of `bench tp`, `bench up` and `bench ep` reports, each one a row, none dropped
 * after seeing results. A point that cannot run is still a row, with its reason in the status
 * column. The grids are data (src/grid.c), enumerated in a fixed order so that a row's index
 * names the same point in every run, and a slice A:B of them is a run of its own (one device
 * call each: the lead splits a grid over calls and concatenates the CSVs).
 *
 *   TP: op (gemm_rs, ag_gemm, mlp) x model (llama3-8b, llama3-70b, llama3-405b)
 *       x m (1024, 4096, 16384) x peers (2, 4, 8)                                  81 rows
 *   UP: seq (4096, 8192, 16384, 32768, 65536) x heads (8, 16) x causal (0, 1)
 *       x peers (2, 4, 8)                                                           60 rows
 *   EP: model (deepseek-v2-lite, deepseek-v3, mixtral-8x7b, olmoe-1b-7b, qwen1.5-moe-a2.7b,
 *       qwen2-57b-a14b, qwen3-30b-a3b, qwen3-235b-a22b) x routing (balanced, zipf)
 *       x tokens per rank (256, 1024, 4096, 16384) x peers (2, 4, 8)              192 rows
 *
 * Order: the first axis listed is the outermost, peers the innermost; row i of a grid is
 * xs_grid_*_row(i). CPU only (tests/test_grid.c).
 */
#ifndef XSTAGE_GRID_H
#define XSTAGE_GRID_H

#include <stddef.h>

#include "xstage.h"
#include "xstage_ep.h"
#include "xstage_tp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the axes ------------------------------------------------------------------------------- */

#define XS_GRID_TP_NOPS 3
#define XS_GRID_TP_NMODELS 3
#define XS_GRID_TP_NM 3
#define XS_GRID_NPEERS 3
#define XS_GRID_UP_NSEQ 5
#define XS_GRID_UP_NHEADS 2
#define XS_GRID_UP_NCAUSAL 2
#define XS_GRID_EP_NMODELS 8
#define XS_GRID_EP_NROUTING 2
#define XS_GRID_EP_NTOKENS 4

#define XS_GRID_TP_ROWS (XS_GRID_TP_NOPS * XS_GRID_TP_NMODELS * XS_GRID_TP_NM * XS_GRID_NPEERS)
#define XS_GRID_UP_ROWS (XS_GRID_UP_NSEQ * XS_GRID_UP_NHEADS * XS_GRID_UP_NCAUSAL * XS_GRID_NPEERS)
#define XS_GRID_EP_ROWS \
    (XS_GRID_EP_NMODELS * XS_GRID_EP_NROUTING * XS_GRID_EP_NTOKENS * XS_GRID_NPEERS)

extern const int xs_grid_peers[XS_GRID_NPEERS];                  /* 2, 4, 8 */
extern const char *const xs_grid_tp_ops[XS_GRID_TP_NOPS];        /* xs_tp_op_name's words */
extern const char *const xs_grid_tp_models[XS_GRID_TP_NMODELS];  /* xs_tp_model_at's names */
extern const int xs_grid_tp_m[XS_GRID_TP_NM];                    /* tokens */
extern const int xs_grid_up_seq[XS_GRID_UP_NSEQ];
extern const int xs_grid_up_heads[XS_GRID_UP_NHEADS];            /* heads held by this rank */
extern const char *const xs_grid_ep_models[XS_GRID_EP_NMODELS];  /* xs_moe_configs' names */
extern const char *const xs_grid_ep_routing[XS_GRID_EP_NROUTING]; /* xs_moe_routing_name's */
extern const int xs_grid_ep_tokens[XS_GRID_EP_NTOKENS];          /* tokens per rank */

/* ---- the rows ------------------------------------------------------------------------------- */

typedef struct {
    int index;           /* its place in the grid, 0..XS_GRID_TP_ROWS-1 */
    xs_tp_op op;
    const char *model;   /* xs_tp_model_at(model_index)->name */
    int model_index;     /* 0..XS_TP_NMODELS-1 */
    int m, peers;
} xs_grid_tp_row;

typedef struct {
    int index;
    int seq, heads, causal, peers;
} xs_grid_up_row;

typedef struct {
    int index;
    const char *model;   /* a name of xs_moe_configs (include/xstage_ep.h) */
    const char *routing; /* "balanced" or "zipf" */
    int tokens, peers;   /* tokens per rank */
} xs_grid_ep_row;

/* Row i of a grid into *r: XS_OK, or XS_ERANGE (one line) outside 0..ROWS-1. TP resolves the
 * op and the model through xs_tp_op_parse and the model table (XS_EINVAL if either is gone). */
xs_status xs_grid_tp_row_at(int i, xs_grid_tp_row *r);
xs_status xs_grid_up_row_at(int i, xs_grid_up_row *r);
xs_status xs_grid_ep_row_at(int i, xs_grid_ep_row *r);

/* ---- options -------------------------------------------------------------------------------- */

/* --grid WORD: "declared" sets *declared = 1, "default" 0 (the bench's own sweep); XS_EINVAL
 * with one line otherwise. */
xs_status xs_grid_parse(const char *arg, int *declared);
/* --rows A:B over a grid of n rows: rows A..B-1 (either end may be left out: ":B" from 0, "A:"
 * to n; "A" alone is row A). XS_EINVAL with one line for anything else, an empty range or an
 * end beyond n. */
xs_status xs_grid_rows_parse(const char *arg, int n, int *lo, int *hi);
/* A bench's grid options once parsed (cmd names it in the messages): --rows needs --grid
 * declared; with it, `bad` (the first option given that would change the points, or NULL) is
 * refused in one line, and [*lo, *hi) is the --rows slice of the n rows, or all of them.
 * Without --grid declared *lo and *hi are left alone. XS_EINVAL with one line. */
xs_status xs_grid_opts_check(const char *cmd, int declared, const char *bad, const char *rows_arg,
                             int n, int *lo, int *hi);

/* ---- what a point needs, before it runs ----------------------------------------------------- */

/* Device and pinned host bytes of one `bench tp` configuration on one GPU with virtual peers
 * (cuda/tp: this rank's window, the local control table of P windows, A, the weights, the
 * outputs, the unfused and fp32 reference buffers, the expectations, the L2 flush buffer;
 * pinned host: the P - 1 peer windows). An upper estimate of the largest allocations (task lists
 * and flags of a few MB are left out): the bench compares it with cudaMemGetInfo's free bytes
 * and reports a point that does not fit as skipped instead of running it. */
void xs_grid_tp_bytes(const xs_tp_info *in, int m, size_t *dev, size_t *host);

/* Seconds one declared row is expected to take, from its shape, for the bench's defaults
 * (-n 5 -w 1, the pilots of the planner and of the overlapped pipeline, every run verified):
 * runs x the slower of compute (flops at tflops) and the link (remote bytes at
 * drain_bytes_per_ns; UP: their sum, serial and pipelined variants), plus the CPU's check of
 * every remote byte (verify_gbps) and a per-row setup (inputs, references, TP's placed host
 * window bytes at verify_gbps, the host-side model). runs: the bench's runs per point. The setup terms are fitted, with 355 TFLOP/s (TP),
 * 310 (UP), R = 50 B/ns and 10 GB/s, to the runs of bench/results/overlap/ (auto.log: TP's 12
 * rows in 11.9 s, UP's 8 rows in 4 s); tests/test_grid.c checks the fit within 15 %. */
#define XS_GRID_TP_RUNS 85 /* local 7, planner pilots ~16, local shaped 6, overlapped 4 + 5 x 4,
                              rounds 6 x 5 variants */
#define XS_GRID_TP_SETUP_S 0.4
#define XS_GRID_UP_RUNS 40 /* overlapped pilots up to 5 x 4, rounds 6 x 5 variants; the
                              planner's pilots (3 runs each) only where fa <= 3 ms */
#define XS_GRID_UP_SETUP_S 0.15
double xs_grid_tp_est_s(const xs_tp_info *in, double tflops, double drain_bytes_per_ns,
                        double verify_gbps);
double xs_grid_up_est_s(const xs_grid_up_row *r, double tflops, double drain_bytes_per_ns,
                        double verify_gbps);

/* ---- EP: what a point needs, and how long it takes ------------------------------------------ */

/* The bytes of one `bench ep` point (configuration c, tokens per rank T, peers N) on one GPU with
 * virtual peers, from the allocations of cuda/ep (rows = T x topk, W = the window of one rank,
 * ceil(T / N) x topk rows of H bf16 values):
 *   *weights  the configuration's Linear-1 and Linear-2 weights, E x 3 I x H bf16 (allocated once
 *             per configuration, before its first point);
 *   *dev      the point's own device peak: tokens, SwiGLU output h, the row maps, the dispatched
 *             tokens, the reference h and the fp32 reference rows (the checks read them on the
 *             device), then the larger of the fp32 reference's temporaries (y1f, y2f; freed
 *             after it) and the runs' buffers (the local control's N
 *             windows, the unfused y1, y2 and staging, the couriers' staging buffer, rank 0's
 *             window, the overlapped pipelines' row arrays), plus 256 MB for the L2 flush
 *             buffers, cuBLAS's workspace, task lists and traces;
 *   *pinned   the N - 1 virtual peers' windows in pinned host memory;
 *   *host     pageable host memory: the fp32 reference rows (host copy), the host problem's
 *             per-row arrays.
 * An upper estimate: the bench compares it with cudaMemGetInfo and MemAvailable before a
 * declared row runs and reports a point that does not fit as skipped. */
void xs_grid_ep_bytes(const xs_moe_config *c, int tokens, int peers, size_t *weights, size_t *dev,
                      size_t *pinned, size_t *host);
/* MemAvailable of /proc/meminfo (bytes; the free pages where it cannot be read; 0: unknown). */
size_t xs_grid_host_avail(void);

/* Seconds one declared EP row is expected to take with the bench's defaults (-n 5 -w 1, every
 * variant, both GEMM forms of the overlapped pipeline): runs x (compute at tflops + the remote
 * bytes at drain_bytes_per_ns twice: the run's combine and the poisoning of the windows before
 * it), checks x the combine bytes (T x topk x H bf16) at verify_gbps, the host-side model
 * (XS_GRID_EP_MODEL_S_PER_GB of combine) and a fixed setup. Constants fitted to
 * bench/results/ep/sweep.csv (48 points of the default sweep, run before the overlapped
 * variant, 44 runs and 8 checks a point, 84.6 s of point_s in all; tests/test_grid.c checks the
 * fit within 15 %) with 300 TFLOP/s, R = 52 B/ns and XS_GRID_EP_HOST_VERIFY_GBPS per check: in
 * that run each check copied every window back and compared every row on the CPU
 * (xs_moe_verify_host). The bench now checks on the GPU (xs_moe_verify: a kernel reads every
 * row where it landed, the host windows over PCIe); XS_GRID_EP_VERIFY_GBPS is its rate as
 * estimated from that path, not yet measured. */
#define XS_GRID_EP_HOST_VERIFY_GBPS 0.68 /* fitted: the CPU check of the sweep's run */
#define XS_GRID_EP_VERIFY_GBPS 20.0      /* estimate (not measured): the GPU check, bounded by
                                          * reading the host windows over PCIe */
#define XS_GRID_EP_RUNS 100  /* local control 2 x 4, overlapped compute alone 2 forms x 4,
                                overlapped pilots 5 counts x 2 forms x 4, auto pilot 4,
                                rounds 6 x 7 variants */
#define XS_GRID_EP_CHECKS 47 /* local control 2, overlapped pilots 10 x 3, auto pilot 3, rounds:
                                each variant's last (7) and the overlapped pipeline's other 5 */
#define XS_GRID_EP_SETUP_S 0.04
#define XS_GRID_EP_MODEL_S_PER_GB 2.26
double xs_grid_ep_est_s(const xs_grid_ep_row *r, double tflops, double drain_bytes_per_ns,
                        double verify_gbps);
/* The same for `runs` runs and `checks` checks a point (the fit against the older sweep). */
double xs_grid_ep_est_runs_s(const xs_grid_ep_row *r, int runs, int checks, double tflops,
                             double drain_bytes_per_ns, double verify_gbps);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_GRID_H */
