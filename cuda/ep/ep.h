// SPDX-License-Identifier: Apache-2.0
/*
 * ep.h - the fused MoE (expert-parallel) workload on the GPU: weights, the GPU context of a
 * problem (its device copies, task lists and traces), the persistent fused kernel's runs, the
 * unfused cuBLAS baseline, references and destination-side verification. The host shapes, the
 * planner and the model are plain C (include/xstage_ep.h, src/ep_*.c); a GPU context holds a
 * host problem (xs_moe_host) that they take. docs/EP.md explains the kernel, the schedules, the
 * tolerance and the metrics.
 *
 * Data (bf16 unless noted; "rows" are (token, k) pairs sorted by expert, rows = T * topk):
 *   X  [T, H]            tokens; every token has a source rank t % N (virtual peers)
 *   W1 [E, 2I, H]        gate and up, interleaved in groups of 16 rows (cuda/gemm.cuh SwiGLU)
 *   W2 [E, H, I]         down projection
 *   h  [rows, I]         SwiGLU output (workspace)
 *   out: rank r's window, slot (t / N) * topk + k, H values: routing weight * (W2 h)
 * Callable from C++ (.cu) translation units; cudaStream_t appears in the signatures.
 */
#ifndef XSTAGE_EP_CUDA_H
#define XSTAGE_EP_CUDA_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_ep.h"
#include "xstage_win.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- weights (per configuration, reused across token counts) ------------------------------ */

typedef struct xs_moe_weights xs_moe_weights;
/* Random bf16 weights on the current device (scaled so activations stay O(1)). XS_EINVAL when
 * H is not a multiple of 8 or I not a multiple of 16; XS_ECUDA (one line) when out of memory. */
xs_status xs_moe_weights_create(const xs_moe_config *c, uint32_t seed, xs_moe_weights **out);
void xs_moe_weights_destroy(xs_moe_weights *w);

/* ---- one problem on the GPU ---------------------------------------------------------------- */

typedef struct xs_moe xs_moe;
/* Route the tokens, sort rows by expert (a host problem for one CTA per SM), allocate the
 * workspaces; the weights must outlive m. */
xs_status xs_moe_create(const xs_moe_weights *w, const xs_moe_opts *o, xs_moe **out);
void xs_moe_destroy(xs_moe *m);
/* The host problem of m (owned by m): what the planner and the model take (xstage_ep.h). */
xs_moe_problem *xs_moe_host(xs_moe *m);
void xs_moe_get_info(const xs_moe *m, xs_moe_info *info); /* xs_moe_problem_info of its problem */

/* Build the task list of a plan into slot 0..XS_MOE_SLOTS-1 of the host problem and upload it. */
xs_status xs_moe_set_plan(xs_moe *m, int slot, const xs_moe_plan *p);

/* ---- windows -------------------------------------------------------------------------------- */

/* The local control: N windows in this GPU's memory (owned by m), in the same table format. */
xs_status xs_moe_local_table(xs_moe *m, xs_wintab *tab);
/* Fill the payload of every window of tab with 0xff bytes (bf16 NaN) on stream s, the
 * couriers' staging buffer once a courier run has allocated it, and the unfused paths'
 * workspaces once allocated (dispatched rows, Linear-1 and Linear-2 outputs, the combine's
 * staging; not h): a step that never ran shows as NaN at the destination. */
xs_status xs_moe_poison(xs_moe *m, const xs_wintab *tab, cudaStream_t s);
/* Overwrite a scratch buffer larger than L2 so that no run starts with a warm cache. */
xs_status xs_moe_flush_l2(xs_moe *m, cudaStream_t s);

/* ---- runs ------------------------------------------------------------------------------------ */

typedef struct {
    unsigned long long timeout_ns; /* bound of every dependency wait; 0 = 2 s */
    int fault_skip_l1;             /* test hook: the first Linear-1 tile never signals */
    int only;                      /* test hook, 0 = the whole layer. 1 = the plan's Linear-1
                                    * tiles alone (h is poisoned first; check it with
                                    * xs_moe_verify_h). 2 = its Linear-2 tiles alone, reading h
                                    * as it is (e.g. xs_moe_load_reference_h), every dependency
                                    * counted as met; check the windows with xs_moe_verify */
    int bulk_combine;              /* 1: each Linear-2 epilogue hands its rows to the TMA (one
                                    * cp.async.bulk copy per row from the staging tile) instead
                                    * of storing them with 16-byte stores; the CTA waits only
                                    * until the copies have read shared memory. Not with
                                    * couriers. 0: 16-byte stores */
    int defer;                     /* a Linear-2 tile the pacer would hold back does not hold
                                    * its CTA (docs/EP.md). XS_MOE_DEFER_PLAN (0): as the plan
                                    * says (xs_moe_plan.spill_depth: spilling, else the plain
                                    * kernel, where it does). XS_MOE_DEFER_NONE: the plain kernel
                                    * whatever the plan. XS_MOE_DEFER_RING: a 3-stage ring and a
                                    * staging tile of its own; the tile waits there while the CTA
                                    * computes its next tile, and leaves before that CTA's next
                                    * Linear-2 tile is staged (or at its end). XS_MOE_DEFER_SPILL
                                    * (docs/EP.md, "The spilling kernel"): the plain 4-stage
                                    * kernel; the tile's remote rows go to
                                    * a staging buffer in device memory and leave from there at a
                                    * later task boundary of the CTA once the pacer admits them
                                    * (or at its end); up to spill_depth such tiles per CTA, then
                                    * the next one waits as in the plain kernel. Not with couriers
                                    * or bulk copies */
    int spill_depth;               /* spilling: 1..XS_MOE_SPILL_MAX; 0 = the plan's, else
                                    * XS_MOE_SPILL_DEPTH */
} xs_moe_run_opts;

#define XS_MOE_DEFER_PLAN 0
#define XS_MOE_DEFER_RING 1
#define XS_MOE_DEFER_SPILL 2
#define XS_MOE_DEFER_NONE 3

/* One launch of the fused kernel with the task list of `slot`, storing the combine through tab.
 * Waits for it; *ms = kernel time (events). XS_ETIMEOUT (one line: which row block, which CTA)
 * when a dependency wait expired; XS_ECUDA on a CUDA failure. The per-tile trace of the run is
 * kept in m (xs_moe_trace). */
xs_status xs_moe_run_fused(xs_moe *m, int slot, const xs_wintab *tab, const xs_moe_run_opts *o,
                           cudaStream_t s, float *ms);

/* The unfused baseline: gather, cuBLAS GEMM per expert, SwiGLU kernel, cuBLAS GEMM per expert,
 * scale/permute, then one cudaMemcpyAsync per rank into its window. *ms = whole sequence,
 * *gemm_ms = the cuBLAS GEMMs alone (both from events). */
xs_status xs_moe_run_unfused(xs_moe *m, xs_cublas *cb, const xs_wintab *tab, cudaStream_t s,
                             float *ms, float *gemm_ms);

/* The same baseline with the combine handed to `combine` instead of the cudaMemcpyAsync loop
 * (e.g. grouped ncclSend/ncclRecv between real ranks): it is called on stream s, inside the
 * timed sequence, with the staged rows (stage + r * stride holds bytes[r] bytes for rank r of the
 * problem, r < n) and must enqueue its transfers on s. combine NULL: xs_moe_run_unfused. */
typedef xs_status (*xs_moe_combine_fn)(void *ctx, const char *stage, size_t stride,
                                       const size_t *bytes, int n, cudaStream_t s);
xs_status xs_moe_run_unfused_with(xs_moe *m, xs_cublas *cb, const xs_wintab *tab,
                                  xs_moe_combine_fn combine, void *ctx, cudaStream_t s,
                                  float *ms, float *gemm_ms);

/* The unfused steps as a pipeline (virtual peers; docs/EP.md "Overlapped"): the rows in
 * `chunks` pieces of equal tokens in destination order (xs_moe_ovplan: host windows first, rank
 * 0 last), each piece's gather, cuBLAS GEMM per expert with rows in it (grouped = 1: one grouped
 * GEMM per layer over those experts, xs_cublas_gemm_bf16_grouped; XS_EUNSUPPORTED where cuBLAS
 * lacks it), SwiGLU, the same for Linear-2, and scale/permute on stream s; once a piece is staged (an event), its rows go to their windows
 * by one cudaMemcpyAsync per window it touches on a side stream, under the next piece's compute.
 * copies = 0: no copies (the compute alone). *ms from events on s around the whole operation,
 * the end recorded after s has waited for the side stream's last copy (every byte at its
 * destination). Waits for the end, bounded (XS_ETIMEOUT). XS_EINVAL (one line) on a bad chunk
 * count (1..XS_MOE_OV_MAX_CHUNKS, at most T) or table. The workspaces (h among them) are left in
 * the pipeline's row order: xs_moe_verify_h does not apply after it. */
xs_status xs_moe_run_overlapped(xs_moe *m, xs_cublas *cb, const xs_wintab *tab, int chunks,
                                int grouped, int copies, cudaStream_t s, float *ms);

/* ---- references and verification ------------------------------------------------------------ */

/* fp32 reference of every row, kept in m on the device (what xs_moe_verify reads) and on the
 * host (xs_moe_verify_host): the unfused path with fp32 GEMM outputs (h rounded to bf16, as in
 * every path). */
xs_status xs_moe_reference_gpu(xs_moe *m, xs_cublas *cb);
/* fp64 reference on the CPU (small shapes only: rows * H * 3I <= 2^33), rounded to fp32 and
 * kept as xs_moe_reference_gpu keeps its rows. */
xs_status xs_moe_reference_cpu(xs_moe *m);

typedef struct {
    long rows;            /* rows checked (every slot of every rank that receives one) */
    long bad_rows;        /* relative L2 error above the row tolerance, or non-finite values */
    long nonfinite;       /* NaN/Inf values (poison left = a missing store) */
    double rel_frob;      /* global relative Frobenius error */
    double max_row_rel;   /* worst row */
    long worst_row;       /* its index in expert-sorted order (-1: no row checked) */
    int worst_expert;     /* its expert (-1: no row checked) */
    int ok;               /* bad_rows == 0 && rel_frob <= XS_MOE_TOL_FROB */
} xs_moe_check;

#define XS_MOE_TOL_ROW 2e-2  /* per row: ||out - ref|| / ||ref|| */
#define XS_MOE_TOL_FROB 1e-2 /* whole output */

/* Read every combined row at its destination and compare it with the reference, on the GPU:
 * a kernel (one warp per row) reads each row's bytes where they landed, through tab's
 * device-usable pointers (device windows, pinned host windows over PCIe, a peer's window), and
 * reduces the per-row errors; only the totals come back. Runs on stream 0 after the work
 * enqueued before it, waited for with a bound (XS_ETIMEOUT, one line). Needs a reference;
 * XS_EVERIFY is not returned here: the caller decides from out->ok. */
xs_status xs_moe_verify(xs_moe *m, const xs_wintab *tab, xs_moe_check *out);
/* The same check on the CPU: every window copied back and every row compared by 8 host
 * threads (the GPU check's cross-check in tests/gpu/test_moe; far slower). Same rules, same
 * result: the counts and the worst row (highest score, the lowest row on a tie) exactly, the
 * fp64 sums within rounding (they add in another order). */
xs_status xs_moe_verify_host(xs_moe *m, const xs_wintab *tab, xs_moe_check *out);

/* The intermediate h [rows, I] that the last run left on the device against the reference's h
 * (bf16 in every path; kept by xs_moe_reference_cpu and xs_moe_reference_gpu), row by row with
 * the tolerances above: the rows of one expert (0..E-1), or every row (expert < 0). With
 * xs_moe_run_opts.only = 1 this checks Linear-1, the gather and SwiGLU alone. */
xs_status xs_moe_verify_h(xs_moe *m, int expert, xs_moe_check *out);
/* Overwrite the device h with the reference's h, so that a run with only = 2 checks Linear-2
 * and the combine alone. */
xs_status xs_moe_load_reference_h(xs_moe *m);

/* ---- traces ---------------------------------------------------------------------------------- */


/* The trace of the last run (ns on the global time base, from clock64 anchored to
 * %globaltimer per CTA); *n = number of tasks. Owned by m, valid until the next run. In a
 * courier run a Linear-2 tile's st0..st1 is the span of its stores into the staging buffer
 * (and rank 0's window); remote_bytes are the bytes it hands to the couriers. */
xs_status xs_moe_trace(xs_moe *m, const xs_moe_tile **tiles, int *n);

/* One courier copy of a courier run: the remote rows of one Linear-2 tile, from the staging
 * buffer to their windows. Times in ns on the same base as xs_moe_tile's. */
typedef struct {
    int id;                /* the Linear-2 tile (xs_moe_tile.id) */
    int rb, nb, cta, smid; /* the tile and the courier that copied it */
    int pos;               /* index among the Linear-2 tiles of the task list (position order):
                            * courier pos % C took it */
    int bytes;             /* remote bytes copied (0: no remote row, no wait) */
    double wait_ns;        /* the courier started waiting for the tile's ready flag */
    double ready_ns;       /* it saw the flag (the copy starts) */
    double end_ns;         /* its last store of the tile issued (after a CTA barrier) */
    double gate_ns;        /* time its pacer held the copy's chunks */
} xs_moe_copy;

/* The copies of the last run (one per Linear-2 tile of the task list, in position order; *n = 0
 * after a run without couriers). Owned by m, valid until the next run. */
xs_status xs_moe_courier_trace(xs_moe *m, const xs_moe_copy **copies, int *n);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_EP_CUDA_H */
