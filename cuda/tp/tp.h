// SPDX-License-Identifier: Apache-2.0
/*
 * tp/tp.h - tensor parallelism on the GPU: fused GEMM + reduce-scatter, fused all-gather + GEMM
 * and the fused TP MLP block (all-gather + GEMM1 + SwiGLU -> GEMM2 + reduce-scatter), in one
 * persistent task kernel on the shared tile engine (cuda/gemm.cuh, or cuda/gemm_sm90.cuh:
 * xs_tp_set_engine); the context that holds one problem and the plan of its rank
 * (include/xstage_tp.h: shapes, task orders and their model, in plain C), runs of an order, the
 * unfused cuBLAS baseline, references and destination-side verification. docs/TP.md explains
 * the kernel, the orders, the window layout, the tolerance and what one GPU with virtual peers
 * can and cannot exercise.
 *
 * Window layout of every rank (xstage_win.h; payload bytes, then 64-bit flags):
 *   [0, ag_bytes)              gathered X [m, K0]: shard s at rows [s m/P, (s+1) m/P)
 *   [rs_off, +P*slot_bytes)    reduce-scatter slots: slot s = source s's partial of the rank's
 *                              rows, [m/P, n] row-major, or tile-major (xs_tp_set_slot_layout:
 *                              own tile t one contiguous block; same bytes, no padding)
 *   flags [0, P*ag_chunks)     flag s*ag_chunks + c: chunk c of shard s has arrived
 *   flags [rs_flag0, +P*t_own) flag rs_flag0 + s*t_own + t: source s's partial of own tile t
 * Flags carry the launch's epoch (a value that grows with every launch), so they are never reset
 * between launches.
 *
 * Callable from C++ (.cu) translation units; cudaStream_t appears in the signatures.
 */
#ifndef XSTAGE_TP_H
#define XSTAGE_TP_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_tp.h"
#include "xstage_win.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XS_TP_ARRIVED (1ull << 62) /* flag value of data placed before the launch */


/* ---- one problem -------------------------------------------------------------------------- */

typedef struct xs_tp xs_tp;

/* Allocate and fill one problem for the rank tab->rank of the window table `tab` (virtual peers:
 * rank 0 in HBM, ranks 1.. in pinned host memory; or peer windows). Inputs are random, never
 * zero, functions of `seed`. The windows must hold info.window_bytes and info.nflags (XS_EINVAL
 * otherwise). Also builds a local control table (P windows in this GPU's memory, same layout).
 * Places the other ranks' data that this rank would receive (their shards and their partials of
 * its rows, random) in its own windows with their flags raised (XS_TP_ARRIVED): one GPU plays
 * every source but its own. Real peers (xs_tp_real_peers): the weights and A of gemm_rs are
 * also functions of the rank (rank 0's are the one-GPU inputs; the gathered X is one tensor, the
 * same on every rank), nothing is placed in the fused window (the peers send), only this rank's
 * own flags are zeroed there (a peer may still be verifying its window), and the local control
 * table holds placed data as with virtual peers. XS_ECUDA (one line) when out of memory. */
xs_status xs_tp_create(const xs_tp_shape *s, const xs_wintab *tab, int grid, uint32_t seed,
                       xs_tp **out);
void xs_tp_destroy(xs_tp *t);
void xs_tp_get_info(const xs_tp *t, xs_tp_info *info);
int xs_tp_grid(const xs_tp *t);
/* Real peers (windows of other GPUs, `bench tp -g N`; docs/MULTIGPU.md): the collectives of the
 * unfused baseline and of the exchange of expectations, supplied by the caller (bench_tp.cu wires
 * xs_coll_* of xstage_launch.h), so that tp.cu needs no NCCL of its own. Every function is
 * collective over the ranks and enqueues on stream s; counts and bytes are per rank. */
typedef struct {
    void *ctx;
    xs_status (*all_gather)(void *ctx, const void *send, void *recv, size_t bytes, cudaStream_t s);
    xs_status (*reduce_scatter_bf16)(void *ctx, const void *send, void *recv, size_t count,
                                     cudaStream_t s);
    xs_status (*alltoall)(void *ctx, const void *send, void *recv, size_t bytes, cudaStream_t s);
} xs_tp_coll;
/* Real peers: the collectives (copied; NULL clears). Without them the unfused run and
 * xs_tp_exchange_expectation fail with one line. */
void xs_tp_set_coll(xs_tp *t, const xs_tp_coll *c);
/* 1 when the other ranks' windows are other GPUs' (real peers: they write their own data and
 * signals, nothing is placed in this rank's fused window); 0 for virtual peers and P = 1. */
int xs_tp_real_peers(const xs_tp *t);
/* Real peers, after the first verified local run (collective): every rank sends each owner the
 * partials it verified (its expectation, bitwise what its fused runs send) through the alltoall.
 * They become what the local control table holds in place of the placed random partials, and
 * what this rank's fused runs must receive, slot by slot; the reference of the reduced rows is
 * recomputed from them, and the next local run is verified as a first one again (against the
 * new reference; its reduced rows are then the bitwise expectation of the fused runs'). A no-op
 * for virtual peers and for ops without a reduce-scatter. */
xs_status xs_tp_exchange_expectation(xs_tp *t);
/* The plan of this rank (include/xstage_tp.h): the order builders, checks, statistics and
 * the model take it; a run uploads the slot it launches when that changed. Owned by the
 * context. */
xs_tp_plan *xs_tp_plan_of(const xs_tp *t);
/* The GEMM tile engine of the fused kernel (docs/TP.md "Engines"). mma: cuda/gemm.cuh (mma.sync,
 * 8 warps; every order, incl. streamed stores and lazy signals; the default). sm90:
 * cuda/gemm_sm90.cuh (wgmma + TMA, a producer warpgroup and two consumer warpgroups; compute
 * capability 9.0 only): naive and shaped orders whose stores follow each tile (no XS_TP_K_DEFER
 * / XS_TP_K_SPREAD tasks: xs_tp_run refuses them), every signal raised right after its payload
 * (eager; xs_tp_run_opts.eager_flags has no effect). Same windows, flags, waits, verification. */
typedef enum { XS_TP_ENGINE_MMA = 0, XS_TP_ENGINE_SM90 = 1 } xs_tp_engine;
const char *xs_tp_engine_name(xs_tp_engine e);         /* "mma", "sm90" */
xs_status xs_tp_engine_parse(const char *s, xs_tp_engine *e); /* XS_EINVAL, one line */
/* Choose the engine of every later run (fused and local). Before the first run only: the first
 * local run's bytes become the bitwise expectation of the later runs, and the two engines round
 * differently (XS_EINVAL once a run has been verified). XS_EINVAL when sm90 is asked for on a
 * device that is not compute capability 9.0. */
xs_status xs_tp_set_engine(xs_tp *t, xs_tp_engine e);
xs_tp_engine xs_tp_get_engine(const xs_tp *t);
/* 1 when the engine runs the order's stream bits (XS_TP_K_DEFER, XS_TP_K_SPREAD): mma only. */
int xs_tp_engine_streams(xs_tp_engine e);
/* The courier count of the orders built next (xs_tp_plan_set_couriers; docs/TP.md "Couriers
 * (sm90)"), sm90 engine only: xs_tp_run refuses a courier order on the mma engine (one line).
 * With C > 0 couriers the launch still has one CTA per SM (grid = xs_tp_grid); the last C CTAs
 * are couriers. The first C > 0 of an op with a reduce-scatter allocates the outbox ((P - 1)
 * slots, the remote partial bytes), its ready flags and the split parts' scratch (XS_ECUDA, one
 * line, when out of memory). XS_EINVAL (one line) for a count the plan refuses. */
xs_status xs_tp_set_couriers(xs_tp *t, int couriers);
int xs_tp_get_couriers(const xs_tp *t);   /* the count of orders built next */
/* The couriers' pace and the per-courier rate of the prediction (xs_tp_plan_set_courier_pace,
 * xs_tp_plan_set_courier_rate); the pace is a token bucket on %globaltimer each courier keeps
 * for its share, per tile and per round of the copy. */
xs_status xs_tp_set_courier_pace(xs_tp *t, double bytes_per_ns);
double xs_tp_get_courier_pace(const xs_tp *t);
xs_status xs_tp_set_courier_rate(xs_tp *t, double bytes_per_ns);
double xs_tp_get_courier_rate(const xs_tp *t);

/* Choose the slot layout of every later run (fused, local, unfused). Any time: after a run the
 * partials this rank holds for the other sources (placed or exchanged, fused window and local
 * control table) are rewritten in the new layout, so every slot keeps its values and the
 * references and expectations stay valid (bitwise: the same values summed in the same order);
 * the last run can no longer be verified (verify a run before switching). Real peers: every
 * rank switches between the same runs (a source writes in its own layout). XS_ECUDA (one line)
 * when out of memory. */
xs_status xs_tp_set_slot_layout(xs_tp *t, xs_tp_layout l);
xs_tp_layout xs_tp_get_slot_layout(const xs_tp *t);

/* Device pointers, for tests that build their own references. */
typedef struct {
    const void *a;        /* GEMM 0 A: gathered X [m, ag_k] in the own window, or A [m, k/P] */
    const void *b[2];     /* weights of GEMM 0 and 1 */
    const void *rs_slots; /* own window's reduce-scatter slots [P][rs_rows][rs_n], each in the
                             slot layout (xs_tp_slot_index) */
    const void *y;        /* this rank's reduced rows [rs_rows, rs_n] (last fused run) */
    const void *out0;     /* GEMM 0 local output: ag_gemm out [m, n/P], mlp h [m, I/P] */
    void *host[XS_MAX_RANKS]; /* CPU pointer of rank r's window payload (host windows), or NULL */
} xs_tp_bufs;
void xs_tp_get_bufs(const xs_tp *t, xs_tp_bufs *b);

/* ---- runs ------------------------------------------------------------------------------------- */

enum { XS_TP_FAULT_NONE = 0, XS_TP_FAULT_RS_SIGNAL = 1, XS_TP_FAULT_AG_FLAG = 2,
       XS_TP_FAULT_H_COUNT = 3, XS_TP_FAULT_SPLIT = 4 };

typedef struct {
    int local;                     /* 1: run against the local control table (all HBM) */
    unsigned long long timeout_ns; /* bound of every device-side wait; 0 = 2 s */
    int flush_l2;                  /* overwrite a buffer larger than L2 before the launch */
    int fault;                     /* test hook: XS_TP_FAULT_RS_SIGNAL (the first own tile never
                                      signals), _AG_FLAG (one received shard chunk never arrives),
                                      _H_COUNT (a GEMM1 tile never counts), _SPLIT (the first
                                      part of the first split tile never raises its flag) */
    int eager_flags;               /* diagnostics: raise every queued signal after the CTA's next
                                      main loop (the eager rule, docs/TP.md "The kernel")
                                      instead of only the all-gather ones (reduce-scatter tile
                                      signals then wait for the CTA's next wait, first
                                      reduction, full list or end) */
} xs_tp_run_opts;

/* Poison every destination the launch writes, upload the order in `slot` if it changed (on s,
 * ordered before the launch), launch it, wait. *ms = kernel time (events; includes the drain of
 * the remote stores, which completes with the kernel). XS_ETIMEOUT with one line (which wait,
 * which CTA, which flag) when a device wait expired; XS_ECUDA when the kernel read a task list
 * other than the slot's (a hash of every task as read, summed on the device, against the host's);
 * the context stays usable. */
xs_status xs_tp_run(xs_tp *t, int slot, const xs_tp_run_opts *o, cudaStream_t s, float *ms);
/* Per-kind median task durations of the last run (its per-task %globaltimer stamps). */
xs_status xs_tp_costs_of_last(xs_tp *t, xs_tp_costs *c);

/* The unfused baseline on the same inputs: cuBLAS GEMM(s) (+ SwiGLU kernel), then the
 * collective over the same link: one cudaMemcpyAsync per peer window (virtual peers), or NCCL
 * (peer target; needs the communicator of the window set), then the owner-side reduction.
 * *ms = the whole sequence (events). */
xs_status xs_tp_run_unfused(xs_tp *t, xs_cublas *cb, cudaStream_t s, float *ms);

/* The overlapped unfused baseline (docs/TP.md "Overlapped"): the same steps as
 * xs_tp_run_unfused on the same inputs and outputs, decomposed so that the copy engine overlaps
 * the GEMMs. Each rank's block of m/P rows is cut into `chunks` pieces (boundaries on multiples
 * of XS_TP_OV_ROWS rows); every piece is one cuBLAS call (the handle of the unfused run) on s,
 * and, for the reduce-scattered GEMM, each finished remote piece is copied to its owner's slot
 * with cudaMemcpyAsync on a side stream after an event (the other owners' rows first, this
 * rank's own last). All-gather: this rank's shard goes to the peers in ring order in the same
 * pieces on the side stream, first; the GEMM piece of shard s waits for the event of the same
 * piece of the push to the mirror rank (xs_tp_mirror: one GPU, virtual peers). mlp: GEMM 1,
 * SwiGLU and GEMM 2 per piece, this rank's own GEMM 2 rows last. The side stream joins s, then
 * the owner-side reduction; *ms = events on s from before the first piece to after the
 * reduction (every copy complete). Verified as an unfused run (xs_tp_verify). copies = 0: the
 * compute alone (the same pieces, no copies, no waits; not verifiable). Virtual peers only
 * (XS_EUNSUPPORTED, one line); XS_EINVAL when !xs_tp_overlap_fits. */
#define XS_TP_OV_ROWS 64
#define XS_TP_OV_MAX_CHUNKS 16
int xs_tp_overlap_fits(const xs_tp_info *in, int chunks);
xs_status xs_tp_run_overlapped(xs_tp *t, xs_cublas *cb, int chunks, int copies, cudaStream_t s,
                               float *ms);

/* ---- references and verification ---------------------------------------------------------------- */

/* fp32 references on the GPU (cuBLAS with fp32 output; h rounded to bf16 as in every path). */
xs_status xs_tp_reference(xs_tp *t, xs_cublas *cb);

#define XS_TP_TOL_FROB 1e-2 /* relative Frobenius error of an output against the fp32 reference */
#define XS_TP_TOL_ROW 2e-2  /* relative L2 error of any one row */

typedef struct {
    double remote_bytes;     /* bytes checked at other ranks' (host) windows, CPU-side */
    uint64_t bad_units;      /* 16-byte units there that differ from what was sent */
    uint64_t bad_flags;      /* signals there missing or with the wrong epoch */
    uint64_t local_bad;      /* 16-byte units of this rank's own outputs that differ (bitwise) */
    double rel_frob;         /* worst relative Frobenius error of a tolerance check, -1 if none */
    double max_row_rel;      /* worst row of the same */
    long nonfinite;          /* NaN/Inf in checked outputs (poison left = a missing store) */
    int checked_ref;         /* 1 when this call compared against the fp32 reference */
    int ok;
    char what[160];          /* one line on the first failure */
} xs_tp_check;

/* Verify the last run (fused, local or unfused) at every destination it wrote: other ranks'
 * host windows by the CPU (bytes and signals), this rank's outputs on the GPU. The first local
 * run is compared with the fp32 reference (needs xs_tp_reference) and becomes the bitwise
 * expectation of every later fused run; unfused runs are compared with the reference and their
 * sent bytes with their sources. XS_EVERIFY is not returned: the caller decides from out->ok. */
xs_status xs_tp_verify(xs_tp *t, xs_tp_check *out);

/* The fp32 reference of this rank's reduced rows [rs_rows, rs_n] and of GEMM 0's output
 * [m, out_n[0]] (device pointers, NULL when the op has none); valid after xs_tp_reference. */
void xs_tp_reference_ptrs(const xs_tp *t, const float **ref_y, const float **ref_out0);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_TP_H */
