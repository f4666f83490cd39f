/*
 * tp.h - tensor parallelism: fused GEMM + reduce-scatter, fused all-gather + GEMM and the fused
 * TP MLP block (all-gather + GEMM1 + SwiGLU -> GEMM2 + reduce-scatter), in one persistent task
 * kernel on the shared tile engine (cuda/gemm.cuh, or cuda/gemm_sm90.cuh: xs_tp_set_engine); the
 * task orders (naive and shaped), the
 * X-Stage model of an order, the unfused cuBLAS baseline, references and destination-side
 * verification. docs/TP.md explains the kernel, the orders, the window layout, the tolerance and
 * what one GPU with virtual peers can and cannot exercise.
 *
 * Shapes (one rank `me` of P; "full" widths are the unsharded layer's; bf16 unless noted):
 *   gemm_rs  row-parallel linear:    A [m, k/P] x B [n, k/P]^T -> partial [m, n], reduce-scattered
 *            over rows: rank p owns rows [p m/P, (p+1) m/P) and receives every source's partial
 *            of them; it sums the P partials into its output y [m/P, n].
 *   ag_gemm  column-parallel linear:  X [m, k] all-gathered over rows (rank p holds shard p, rows
 *            [p m/P, (p+1) m/P)) x W [n/P, k]^T -> out [m, n/P] (local).
 *   mlp      n = hidden H, k = intermediate I: all-gather X [m, H]; GEMM1 with W1 [2I/P, H]
 *            (gate and up interleaved in groups of 16, gemm.cuh SwiGLU layout) -> h [m, I/P] =
 *            silu(gate) * up (local); GEMM2 h x W2 [H, I/P]^T -> partial [m, H], reduce-scattered.
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
#include "xstage_win.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- operations and shapes ------------------------------------------------------------------ */

typedef enum { XS_TP_GEMM_RS = 0, XS_TP_AG_GEMM = 1, XS_TP_MLP = 2 } xs_tp_op;
#define XS_TP_NOPS 3
const char *xs_tp_op_name(xs_tp_op op);            /* "gemm_rs", "ag_gemm", "mlp" */
xs_status xs_tp_op_parse(const char *s, xs_tp_op *op);

#define XS_TP_BM 128             /* tile rows (cuda/gemm.cuh xs_gemm_big) */
#define XS_TP_BN 256             /* tile columns */
#define XS_TP_CHUNK 65536        /* bytes of one all-gather chunk (one flag, one destination) */
#define XS_TP_PUSH_MAX 4         /* chunks one push task may carry (streamed riders) */
#define XS_TP_ARRIVED (1ull << 62) /* flag value of data placed before the launch */
#define XS_TP_SLOTS 10           /* task lists held per context */
#define XS_TP_COURIERS_MAX 16    /* courier CTAs of one launch (xs_tp_set_couriers) */

typedef struct {
    xs_tp_op op;
    int m;     /* tokens: rows of the activations; a multiple of 128 * peers */
    int n;     /* full output width (gemm_rs, ag_gemm) or hidden size H (mlp) */
    int k;     /* full input width (gemm_rs, ag_gemm) or intermediate size I (mlp) */
    int peers; /* P ranks, 1..XS_MAX_RANKS */
} xs_tp_shape;

/* Everything derived from a shape (per rank). */
typedef struct {
    int ngemm;                   /* 1, or 2 for mlp */
    int gm[2], gn[2], gk[2];     /* GEMM g: [gm, gk] x [gn, gk]^T (gn physical: 2I/P for GEMM1) */
    int out_n[2];                /* output columns of GEMM g (gn/2 after SwiGLU) */
    int swiglu0;                 /* GEMM 0 output goes through SwiGLU */
    int rs_gemm;                 /* the GEMM whose output is reduce-scattered, or -1 */
    int ag;                      /* GEMM 0's A is all-gathered */
    int tiles_m, tiles_n[2], tiles[2];
    int rs_rows;                 /* m / P: rows owned by each rank */
    int rs_n;                    /* columns of the reduce-scattered output */
    int t_own;                   /* tiles of one owner's rows: (rs_rows/128) * ceil(rs_n/256) */
    int ag_k;                    /* columns of the gathered activation (K of GEMM 0) */
    int ag_chunks;               /* push tasks per shard per destination */
    int push_tasks, reduce_tasks;
    size_t ag_bytes, shard_bytes; /* gathered buffer, one shard */
    size_t rs_off, slot_bytes;   /* reduce-scatter region offset, one slot */
    size_t window_bytes;         /* payload each window needs */
    int rs_flag0, nflags;        /* first reduce-scatter flag; flags each window needs */
    double flops;                /* 2 * sum of m * n * k over the GEMMs */
    double ag_remote_bytes;      /* all-gather bytes this rank sends to the P-1 other ranks */
    double rs_remote_bytes;      /* reduce-scatter bytes this rank sends to the P-1 other ranks */
} xs_tp_info;

/* Check a shape (XS_EINVAL, one line naming the constraint) and derive its info. */
xs_status xs_tp_info_of(const xs_tp_shape *s, xs_tp_info *info);

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
 * device that is not compute capability 9.0. A plan-only context takes either. */
xs_status xs_tp_set_engine(xs_tp *t, xs_tp_engine e);
xs_tp_engine xs_tp_get_engine(const xs_tp *t);
/* 1 when the engine runs the order's stream bits (XS_TP_K_DEFER, XS_TP_K_SPREAD): mma only. */
int xs_tp_engine_streams(xs_tp_engine e);
/* Courier CTAs (sm90 engine only; docs/TP.md "Couriers (sm90)"). With C > 0 couriers the launch
 * still has one CTA per SM (grid = xs_tp_grid); the last C CTAs are couriers and the first
 * grid - C run the task list, which is therefore built for grid - C CTAs. Couriers carry two
 * kinds of work, in one walk (xs_tp_order_walk), entry j to courier j mod C:
 *   - all-gather pushes (ag_gemm, mlp), first: every chunk of this rank's shard to every peer's
 *     gathered buffer that the list does not push itself - the builders (naive, shaped) put no
 *     push in a courier order - each then its chunk flag, in the order the list's GEMM 0 tiles
 *     need them (the chunks are in the window at kernel start: no wait);
 *   - remote reduce-scatter tiles (gemm_rs, mlp), then: a compute CTA writes a remote owner's
 *     tile into a local HBM outbox (tile-major, one 128 x 256 block per remote tile) and raises a
 *     per-tile ready flag (gpu scope) instead of storing over the link; the couriers take them in
 *     list order, wait (bounded) for each tile's ready flag, copy it to the owner's slot and
 *     raise the owner's per-tile signal exactly as the compute CTA would have.
 * This rank's own tiles and the reductions are unchanged. The count is a property of an order:
 * orders built after this call (naive, shaped, copy, set) are built for grid - C compute CTAs
 * and run with C couriers (xs_tp_order_couriers); xs_tp_run refuses a courier order on the mma
 * engine (one line). 0 <= C <= XS_TP_COURIERS_MAX and C < grid; C > 0 only for ops with a
 * reduce-scatter or an all-gather over P > 1 ranks. The first C > 0 of an op with a
 * reduce-scatter allocates the outbox ((P - 1) slots, the remote partial bytes) and its ready
 * flags (XS_ECUDA, one line, when out of memory; a plan-only context allocates nothing).
 * XS_EINVAL (one line) otherwise. */
xs_status xs_tp_set_couriers(xs_tp *t, int couriers);
int xs_tp_get_couriers(const xs_tp *t);   /* the count of orders built next */
/* The rate (bytes/ns) all couriers of a launch together may issue, each its share (a token bucket
 * on %globaltimer, per tile and per round of the copy); 0 = unpaced (default). Applies to every
 * later launch and prediction. XS_EINVAL outside 0 or 0.1..1e6. */
xs_status xs_tp_set_courier_pace(xs_tp *t, double bytes_per_ns);
double xs_tp_get_courier_pace(const xs_tp *t);
/* One courier's sustained copy rate (bytes/ns) in the prediction of courier orders (the link
 * then carries at most C x this); 0 = no limit. Default XS_TP_COURIER_RATE: fitted on run 8
 * call 4 (H200 host path, the unpipelined copy): the comm-bound gemm_rs rows with 4 couriers
 * moved their remote bytes at 10.0-10.9 B/ns per courier over the whole kernel (fill included,
 * so a lower bound) - a fit on one run, not a calibration. XS_EINVAL outside 0 or 0.1..1e6. */
#define XS_TP_COURIER_RATE 11.0
xs_status xs_tp_set_courier_rate(xs_tp *t, double bytes_per_ns);
double xs_tp_get_courier_rate(const xs_tp *t);
int xs_tp_order_couriers(const xs_tp *t, int slot); /* the count a slot's order was built for */
/* The couriers' walk of a slot: first its pushes (entries < 0, XS_TP_WALK_PUSH: chunk c to rank
 * r), ordered by the list position of the first GEMM 0 tile that needs them (on the shard of the
 * mirror rank: what the kernel waits for with virtual peers, and with real peers the position at
 * which rank r's rotated list needs this rank's chunk), then the list positions of its remote
 * reduce-scatter tiles (owner != this rank) in increasing order - the order the compute CTAs
 * produce them, step by step. Every push precedes every tile: the deadlock argument of docs/TP.md
 * "Couriers (sm90)" rests on it. Courier c takes entries c, c + C, c + 2C, ... Returns the count
 * (the first xs_tp_order_walk_pushes of them pushes); *pos is owned by the context and valid
 * until the slot changes. An order built without couriers has no push entries. */
#define XS_TP_WALK_PUSH(r, c, chunks) (-1 - ((r) * (chunks) + (c)))
#define XS_TP_WALK_RANK(e, chunks) ((-1 - (e)) / (chunks))  /* of a push entry e < 0 */
#define XS_TP_WALK_CHUNK(e, chunks) ((-1 - (e)) % (chunks))
int xs_tp_order_walk_pushes(const xs_tp *t, int slot); /* push entries at the walk's start */
int xs_tp_order_walk(const xs_tp *t, int slot, const int **pos);
/* The layout of the reduce-scatter slots (docs/TP.md "Slot layouts"). row: a slot is [m/P, n]
 * row-major, so one 128 x 256 tile lands as 128 runs of 512 bytes, n * 2 bytes apart (the
 * default). tile: tile-major - the 128-row blocks as in row, and within a row block tile column
 * tc is one contiguous block of 128 rows x w columns, w = min(256, n - 256 tc), rows
 * consecutive: own tile t (the flag index) is one contiguous run (64 KiB when not ragged), the
 * blocks in the order of t. The same bytes as row (no padding: slot_bytes, window_bytes and the
 * flags do not change). Only the slots change: y, the outputs and the expectations stay
 * row-major; the unfused baseline writes its partials row-major (contiguous copies) and reads
 * the received ones in the context's layout. */
typedef enum { XS_TP_LAYOUT_ROW = 0, XS_TP_LAYOUT_TILE = 1 } xs_tp_layout;
const char *xs_tp_layout_name(xs_tp_layout l);             /* "row", "tile" */
xs_status xs_tp_layout_parse(const char *s, xs_tp_layout *l); /* XS_EINVAL, one line */
/* Choose the slot layout of every later run (fused, local, unfused). Any time: after a run the
 * partials this rank holds for the other sources (placed or exchanged, fused window and local
 * control table) are rewritten in the new layout, so every slot keeps its values and the
 * references and expectations stay valid (bitwise: the same values summed in the same order);
 * the last run can no longer be verified (verify a run before switching). Real peers: every
 * rank switches between the same runs (a source writes in its own layout). XS_ECUDA (one line)
 * when out of memory. A plan-only context takes either. */
xs_status xs_tp_set_slot_layout(xs_tp *t, xs_tp_layout l);
xs_tp_layout xs_tp_get_slot_layout(const xs_tp *t);

#if defined(__CUDACC__)
#define XS_TP_HD static __host__ __device__ __forceinline__
#else
#define XS_TP_HD static inline
#endif
/* Tile (tr, tc) of a slot [rows, n] (n a multiple of 8, tr < rows / XS_TP_BM, tc <
 * ceil(n / XS_TP_BN)): the element offset of its first element; *pitch = elements between its
 * rows (row: n; tile: the tile's width). Pure, host and device. */
XS_TP_HD size_t xs_tp_slot_tile(xs_tp_layout l, int n, int tr, int tc, int *pitch)
{
    const size_t rb = (size_t)tr * XS_TP_BM * (size_t)n; /* the row block: the same in both */
    if (l == XS_TP_LAYOUT_TILE) {
        const int w = n - tc * XS_TP_BN;
        *pitch = w < XS_TP_BN ? w : XS_TP_BN;
        return rb + (size_t)tc * XS_TP_BM * XS_TP_BN;
    }
    *pitch = n;
    return rb + (size_t)tc * XS_TP_BN;
}
/* The element offset of (r, c) in a slot [rows, n] (a bijection onto [0, rows n), each tile's
 * elements contiguous in tile layout). Pure, host and device. */
XS_TP_HD size_t xs_tp_slot_index(xs_tp_layout l, int n, int r, int c)
{
    int pitch;
    const size_t b = xs_tp_slot_tile(l, n, r / XS_TP_BM, c / XS_TP_BN, &pitch);
    return b + (size_t)(r % XS_TP_BM) * (size_t)pitch + (size_t)(c % XS_TP_BN);
}

/* A plan-only context: no GPU memory, no CUDA call (works on a machine without a GPU). Task
 * orders, xs_tp_order_check, xs_tp_order_stats and xs_tp_predict work on it; runs, references
 * and verification refuse it (XS_EINVAL). Release with xs_tp_destroy. */
xs_status xs_tp_plan_create(const xs_tp_shape *s, int rank, int grid, xs_tp **out);

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

/* ---- task orders ---------------------------------------------------------------------------- */

/* Measured costs of one task of each kind (local control run; ns). */
typedef struct {
    double tile_ns[2];   /* a tile of GEMM g, main loop + epilogue */
    double push_ns;      /* one push chunk alone */
    double reduce_ns;    /* one owner-side reduction of a tile */
    int n_tile[2], n_push, n_reduce; /* tasks measured */
} xs_tp_costs;

/* The shaped order's pacing. Steps of `grid` tasks are filled one after the other: remote bytes
 * (pushes riding on tiles, remote reduce-scatter tiles) first, up to the step's budget, then
 * local tiles (GEMM 1, then this rank's own reduce-scatter tiles, which therefore form the tail
 * that hides the last drain), then - only when no local work is left - remote tiles beyond the
 * budget. The budget keeps the cumulative remote bytes at a steady rate that would issue them
 * all by `finish` x the estimated compute time; one step may not exceed `burst` x the steady
 * per-step volume (0 = may catch up at once) nor cap_bytes (0 = no cap; 0.9 Q(grid) fits every
 * burst in the headroom). mlp GEMM 2 tiles start `lead` steps after the last GEMM 1 tile of
 * their row block. Remote tiles rotate over the CTAs from step to step. */
typedef struct {
    double finish;     /* 0 < finish <= 1 */
    double burst;      /* >= 0 */
    double cap_bytes;  /* >= 0 */
    int lead;          /* steps, >= 0 */
    int spread;        /* 1: stream remote stores through main loops instead of storing each tile
                          or push at once (docs/TP.md "Streamed stores"): a remote reduce-scatter
                          tile is staged in a per-CTA HBM scratch and its stores are spread over
                          the CTA's next tile's main loop; a push riding on a tile is spread over
                          that tile's main loop, and carries up to XS_TP_PUSH_MAX chunks while
                          more chunks are left than tiles. 2: as 1, riders always carry up to
                          XS_TP_PUSH_MAX chunks (all-gather early). 0: the stores follow the tile
                          as a burst. */
    int ring;          /* 1: remote reduce-scatter tiles in the naive order's raster, owner after
                          owner round the ring from this rank + 1 (the L2 locality of the naive
                          order: tiles running together share 8 row panels), instead of the
                          owners' rasters merged round robin (tiles running together share column
                          panels but span 8 row panels per owner) */
    int split;         /* 0 or 1: none. 2..XS_TP_SPLIT_MAX (courier orders of gemm_rs): the
                          remote tiles at the head of the list are split along k so that the
                          link starts after a fraction of a tile - the first step runs
                          G / split tiles in `split` parts each, the next step tiles in split/2
                          parts, ... down to whole tiles (docs/TP.md "Split first steps") */
} xs_tp_pace;

/* The shaped candidates the bench pilots and the tests check, in a fixed order (the bench's
 * pilot picks refer to their indices): 0..11 stored after each tile (finish 0.6/0.8/0.95 x
 * burst 0/1.5 x cap none/cap_q), 12..17 streamed (finish x burst), 18..23 streamed with riders
 * carrying several chunks, 24..26 streamed in ring order (finish 0.3/0.6/0.95, burst 0).
 * Returns the count (<= max; XS_TP_NCAND fills all). lead = 2 for all. */
#define XS_TP_NCAND 27
int xs_tp_candidates(double cap_q, xs_tp_pace *out, int max);
/* The pace of the courier runs' front-loaded order: the shaped order with remote reduce-scatter
 * tiles as early as they are ready (ring order, owner after owner; finish 0.05: a budget far
 * above any step's remote bytes; no burst limit, no cap; lead 2; stored, spread 0), so the link
 * starts with the first tile and this rank's own tiles form the tail. */
void xs_tp_pace_front(xs_tp_pace *p);

/* Natural order into slot: pushes first, tiles in rank-ring row order from this rank (grouped
 * raster within each rank's rows), owner-side reductions last. */
xs_status xs_tp_order_naive(xs_tp *t, int slot);
/* Shaped order into slot (see xs_tp_pace and docs/TP.md). */
xs_status xs_tp_order_shaped(xs_tp *t, int slot, const xs_tp_pace *p, const xs_tp_costs *c,
                             const xs_profile *prof);
xs_status xs_tp_order_copy(xs_tp *t, int dst, int src);
int xs_tp_order_tasks(const xs_tp *t, int slot);   /* 0 when the slot is empty */

/* One task of an order as stored and uploaded (32 bytes; the kernel reads two int4). kind: bits
 * of XS_TP_K_*; 0 = an empty slot of a step. */
enum { XS_TP_K_TILE = 1, XS_TP_K_PUSH = 2, XS_TP_K_REDUCE = 4, XS_TP_K_DEFER = 8,
       XS_TP_K_SPREAD = 16, XS_TP_K_SPLIT = 32 };
/* A TILE with XS_TP_K_SPLIT is one of XS_TP_SPLIT_PARTS(x) k-parts of a reduce-scatter tile
 * (courier runs on the sm90 engine only; docs/TP.md "Split first steps"): part
 * XS_TP_SPLIT_PART(x) accumulates k-tiles [part KT / parts, (part + 1) KT / parts) of the tile's
 * KT. Every part but the last writes its fp32 accumulators to scratch slot
 * XS_TP_SPLIT_SLOT(x) + part and raises that slot's flag; the last part waits for them, adds
 * them and runs the tile's epilogue (its bytes, its signal). The fields are the push fields,
 * which a TILE does not use. */
#define XS_TP_SPLIT_MAX 8                       /* parts of one tile */
#define XS_TP_SPLIT_PART(x) ((x)->push_rank)
#define XS_TP_SPLIT_SLOT(x) ((x)->push_chunk)   /* the tile's first scratch slot */
#define XS_TP_SPLIT_PARTS(x) ((x)->push_n)
typedef struct {
    int kind;
    int gemm, tm, tn;            /* TILE: GEMM 0 or 1, tile row and column */
    int push_rank, push_chunk;   /* PUSH: destination rank, first chunk of this rank's shard */
    int red_t;                   /* REDUCE: own tile 0..t_own-1 */
    int push_n;                  /* PUSH: chunks push_chunk.. push_chunk + push_n - 1 (0 = 1) */
} xs_tp_task;
/* The hash of a slot's tasks (the sum the kernel checks; equal lists, equal hashes), 0 if empty. */
unsigned long long xs_tp_order_hash(const xs_tp *t, int slot);
/* The tasks of a slot (owned by the context, valid until the slot changes); returns the count. */
int xs_tp_order_get(const xs_tp *t, int slot, const xs_tp_task **tasks);
/* Replace a slot's tasks with a copy of tasks[0..n) (tests, tools); not checked here - see
 * xs_tp_order_check. */
xs_status xs_tp_order_set(xs_tp *t, int slot, const xs_tp_task *tasks, int n);

/* The invariants every order must hold, checked on the CPU: every task's fields in range; every
 * tile of every GEMM, every push (destination, chunk) and every reduction exactly once; every
 * dependency on an earlier task of the list (an mlp GEMM 2 tile after all GEMM 1 tiles of its row
 * block - so each row-block counter reaches its target -, a reduction after this rank's own tile
 * that it sums); streamed stores only on remote tiles followed by a tile of the same CTA, and on
 * pushes that ride on a tile. With these, every CTA resident and every CTA taking its tasks in
 * list order, the kernel cannot deadlock: the earliest unfinished task only waits on finished
 * ones. XS_OK, or XS_EINVAL with one line naming the first violation. */
xs_status xs_tp_order_check(const xs_tp *t, int slot);

/* What an order holds, per step of grid tasks (for reports and tests). */
typedef struct {
    int steps, tasks;          /* steps of grid tasks; tasks incl. padding */
    int remote_tiles, pushes;  /* remote reduce-scatter tiles, push tasks */
    int deferred, spread;      /* remote tiles whose stores stream through the next tile, pushes
                                  streamed through their tile */
    double max_step_bytes;     /* largest remote bytes of one step, burst part (stored at once) */
} xs_tp_order_info;
xs_status xs_tp_order_stats(const xs_tp *t, int slot, xs_tp_order_info *out);

/* ---- the X-Stage model of an order ------------------------------------------------------------ */

typedef struct {
    double model_ns;     /* the order as a burst-gap schedule (producers = CTAs, one row per step of
                            `grid` tasks, bytes = the step's remote bytes, gaps = the next step's
                            measured compute; streamed stores as 8 equal rows spread through the
                            step that streams them), simulated on the profile: completion incl.
                            drain */
    double ideal_ns;     /* the same schedule on an unlimited stage */
    double bytes;        /* remote bytes of the schedule */
    int rows;            /* schedule rows */
    int criterion_ok;    /* every row meets the no-backpressure criterion (xs_plan_schedule) */
    char how[256];       /* the planner's one line on the schedule */
} xs_tp_pred;
/* with_plan: also run xs_plan_schedule on the schedule (criterion_ok, how); costs a few more
 * simulations. An order built for couriers (xs_tp_order_couriers > 0) is predicted with a fluid
 * model instead: steps of grid - C compute CTAs at the measured costs, every remote byte ready
 * at the end of its task's step, the link carrying ready bytes in list order at R from the
 * first one on; model_ns = max(compute end, last byte), ideal_ns = the compute end, rows 0,
 * criterion_ok -1 (docs/TP.md "Couriers (sm90)"). */
xs_status xs_tp_predict(xs_tp *t, int slot, const xs_profile *p, const xs_tp_costs *c,
                        int with_plan, xs_tp_pred *out);

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
                                      main loop (the rule of runs 1-4) instead of only the
                                      all-gather ones (reduce-scatter tile signals then wait for
                                      the CTA's next wait, first reduction, full list or end) */
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
