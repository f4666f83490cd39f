// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_tp.h - tensor parallelism, the host side in plain C (no CUDA): operations and shapes,
 * what a shape derives (xs_tp_info), the task record the persistent kernel reads, the host plan
 * of one rank (xs_tp_plan: shape, grid, couriers, slot layout and the task lists of its slots),
 * the order builders (naive, shaped), their invariants and statistics, and the X-Stage model of
 * an order (xs_tp_predict). src/tp_*.c implement it and run on any machine; the GPU context of
 * cuda/tp/tp.h embeds one plan and uploads its lists. docs/TP.md explains the orders and the
 * model.
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
 * (GEMMs are numbered from 0 here: GEMM 0 is docs/TP.md's GEMM 1.)
 */
#ifndef XSTAGE_TP_HOST_H
#define XSTAGE_TP_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "xstage.h"
#include "xstage_win.h" /* XS_MAX_RANKS */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define XS_TP_HD static __host__ __device__ __forceinline__
#else
#define XS_TP_HD static inline
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
#define XS_TP_SLOTS 10           /* task lists held per plan */
#define XS_TP_COURIERS_MAX 16    /* courier CTAs of one launch (xs_tp_plan_set_couriers) */

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

/* ---- slot layouts ---------------------------------------------------------------------------- */

/* The layout of the reduce-scatter slots (docs/TP.md "Slot layouts"). row: a slot is [m/P, n]
 * row-major, so one 128 x 256 tile lands as 128 runs of 512 bytes, n * 2 bytes apart (the
 * default). tile: tile-major - the 128-row blocks as in row, and within a row block tile column
 * tc is one contiguous block of 128 rows x w columns, w = min(256, n - 256 tc), rows
 * consecutive: own tile t (the flag index) is one contiguous run (64 KiB when not ragged), the
 * blocks in the order of t. The same bytes as row (no padding: slot_bytes, window_bytes and the
 * flags do not change). Only the slots change: y, the outputs and the expectations stay
 * row-major; the unfused baseline writes its partials row-major (contiguous copies) and reads
 * the received ones in the layout of the GPU context. */
typedef enum { XS_TP_LAYOUT_ROW = 0, XS_TP_LAYOUT_TILE = 1 } xs_tp_layout;
const char *xs_tp_layout_name(xs_tp_layout l);             /* "row", "tile" */
xs_status xs_tp_layout_parse(const char *s, xs_tp_layout *l); /* XS_EINVAL, one line */
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

/* ---- the plan of one rank --------------------------------------------------------------------- */

/* Couriers (docs/TP.md "Couriers (sm90)"): with C > 0 couriers a launch still has one CTA per SM
 * (grid); the last C CTAs are couriers and the first grid - C run the task list, which is
 * therefore built for grid - C CTAs. Couriers carry two kinds of work, in one walk
 * (xs_tp_order_walk), entry j to courier j mod C:
 *   - all-gather pushes (ag_gemm, mlp), first: every chunk of this rank's shard to every peer's
 *     gathered buffer that the list does not push itself - the builders (naive, shaped) put no
 *     push in a courier order - each then its chunk flag, in the order the list's GEMM 0 tiles
 *     need them (the chunks are in the window at kernel start: no wait);
 *   - remote reduce-scatter tiles (gemm_rs, mlp), then: a compute CTA writes a remote owner's
 *     tile into a local HBM outbox and raises a per-tile ready flag instead of storing over the
 *     link; the couriers take them in list order, copy each to the owner's slot and raise the
 *     owner's per-tile signal exactly as the compute CTA would have.
 * The count is a property of an order: orders built after xs_tp_plan_set_couriers (naive,
 * shaped, copy, set) are built for grid - C compute CTAs (xs_tp_order_couriers). */
/* One courier's sustained copy rate (bytes/ns) that the prediction of courier orders assumes by
 * default: the comm-bound gemm_rs rows with 4 couriers on the H200 host path moved their remote
 * bytes at 10.0-10.9 B/ns per courier over the whole kernel (fill included, so a lower bound;
 * bench/results/tp/) - a fit on one set of runs, not a calibration, judged on the same sweep's
 * courier rows (docs/METRICS.md, "Fitted constants"). */
#define XS_TP_COURIER_RATE 11.0
/* Split scratch slots of a launch (xs_tp_pace.split): three steps' worth of parts (a split of 8
 * cascades 8, 4, 2: at most G (7/8 + 3/4 + 1/2) slots). */
#define XS_TP_SPLIT_SLOTS(grid) (3 * (grid))
/* k-tile depth of the sm90 engine (cuda/tp/tp_sm90.cuh tp90_cfg::BK): a split part holds at
 * least one k-tile of it. */
#define XS_TP_SPLIT_BK 64

typedef struct xs_tp_plan xs_tp_plan;

/* A plan of rank `rank` of shape s for `grid` CTAs: empty slots, no couriers, row slot layout,
 * courier pace 0 (unpaced) and rate XS_TP_COURIER_RATE. XS_EINVAL (one line) for a bad shape,
 * rank or grid (1..2^20); XS_ENOMEM. Release with xs_tp_plan_destroy. */
xs_status xs_tp_plan_create(const xs_tp_shape *s, int rank, int grid, xs_tp_plan **out);
void xs_tp_plan_destroy(xs_tp_plan *pl);
/* The same in caller-owned storage (the GPU context embeds its plan); xs_tp_plan_release frees
 * the task lists and walks of an initialized plan and leaves it empty. */
xs_status xs_tp_plan_init(xs_tp_plan *pl, const xs_tp_shape *s, int rank, int grid);
void xs_tp_plan_release(xs_tp_plan *pl);
/* The courier count of the orders built next: 0 <= C <= XS_TP_COURIERS_MAX and C < grid; C > 0
 * only for ops with a reduce-scatter or an all-gather over P > 1 ranks. XS_EINVAL (one line)
 * otherwise. (The GPU context's xs_tp_set_couriers also allocates the couriers' outbox.) */
xs_status xs_tp_plan_check_couriers(const xs_tp_plan *pl, int couriers);
xs_status xs_tp_plan_set_couriers(xs_tp_plan *pl, int couriers);
/* The rate (bytes/ns) all couriers of a launch together may issue; 0 = unpaced (default).
 * Applies to every later launch and prediction. XS_EINVAL outside 0 or 0.1..1e6. */
xs_status xs_tp_plan_set_courier_pace(xs_tp_plan *pl, double bytes_per_ns);
/* One courier's copy rate (bytes/ns) in the prediction of courier orders (the link then carries
 * at most C x this); 0 = no limit. XS_EINVAL outside 0 or 0.1..1e6. */
xs_status xs_tp_plan_set_courier_rate(xs_tp_plan *pl, double bytes_per_ns);
int xs_tp_order_couriers(const xs_tp_plan *pl, int slot); /* the count a slot's order was built for */
/* The couriers' walk of a slot: first its pushes (entries < 0, XS_TP_WALK_PUSH: chunk c to rank
 * r), ordered by the list position of the first GEMM 0 tile that needs them (on the shard of the
 * mirror rank: what the kernel waits for with virtual peers, and with real peers the position at
 * which rank r's rotated list needs this rank's chunk), then the list positions of its remote
 * reduce-scatter tiles (owner != this rank) in increasing order - the order the compute CTAs
 * produce them, step by step. Every push precedes every tile: the deadlock argument of docs/TP.md
 * "Couriers (sm90)" rests on it. Courier c takes entries c, c + C, c + 2C, ... Returns the count
 * (the first xs_tp_order_walk_pushes of them pushes); *pos is owned by the plan and valid
 * until the slot changes. An order built without couriers has no push entries. */
#define XS_TP_WALK_PUSH(r, c, chunks) (-1 - ((r) * (chunks) + (c)))
#define XS_TP_WALK_RANK(e, chunks) ((-1 - (e)) / (chunks))  /* of a push entry e < 0 */
#define XS_TP_WALK_CHUNK(e, chunks) ((-1 - (e)) % (chunks))
int xs_tp_order_walk_pushes(const xs_tp_plan *pl, int slot); /* push entries at the walk's start */
int xs_tp_order_walk(const xs_tp_plan *pl, int slot, const int **pos);

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
xs_status xs_tp_order_naive(xs_tp_plan *pl, int slot);
/* Shaped order into slot (see xs_tp_pace and docs/TP.md). */
xs_status xs_tp_order_shaped(xs_tp_plan *pl, int slot, const xs_tp_pace *p, const xs_tp_costs *c,
                             const xs_profile *prof);
xs_status xs_tp_order_copy(xs_tp_plan *pl, int dst, int src);
int xs_tp_order_tasks(const xs_tp_plan *pl, int slot);   /* 0 when the slot is empty */

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
/* The plan of one rank: what the order builders read and write. The GPU context (cuda/tp/tp.h)
 * embeds one and uploads a slot's list before a launch that uses it. Fields are read-only to
 * callers; the functions above change them. */
struct xs_tp_plan {
    xs_tp_shape s;
    xs_tp_info in;
    int grid;                    /* CTAs of a launch (compute + couriers) */
    int me, P;                   /* this rank, ranks */
    int couriers;                /* courier CTAs of the orders built next */
    double cour_pace;            /* bytes/ns all couriers together may issue; 0 = unpaced */
    double cour_rate;            /* bytes/ns one courier copies (the prediction's limit) */
    xs_tp_layout layout;         /* the reduce-scatter slots' (the GPU context's setting) */
    /* the task lists, per slot */
    xs_tp_task *tasks[XS_TP_SLOTS];
    int ntasks[XS_TP_SLOTS];     /* 0: an empty slot */
    int dirty[XS_TP_SLOTS];      /* changed since the last upload */
    unsigned long long list_hash[XS_TP_SLOTS]; /* sum of xs_tp_task_hash over the list */
    int scour[XS_TP_SLOTS];      /* courier CTAs each slot's order was built for */
    int *walk[XS_TP_SLOTS];      /* each slot's pushes (XS_TP_WALK_PUSH), then the list
                                    positions of its remote tiles, increasing */
    int nwalk[XS_TP_SLOTS];
    int npush[XS_TP_SLOTS];      /* push entries at the start of each walk */
    unsigned long long walk_hash[XS_TP_SLOTS]; /* sum of xs_tp_courier_hash over the walk */
    int nsplit[XS_TP_SLOTS];     /* split tiles in each slot's order */
};

/* The rank this rank sends to at the ring position where rank s sends to it. */
XS_TP_HD int xs_tp_mirror(int me, int s, int P) { return ((2 * me - s) % P + P) % P; }

/* A hash of task i (its eight words w); the kernel sums the same over the tasks it reads and
 * the host over the list it uploads, so a kernel that read a list other than the host's (a
 * stale or partly copied upload) is reported instead of silently skipping or repeating work. */
XS_TP_HD unsigned long long xs_tp_task_hash(int i, const int *w)
{
    unsigned long long h = 0x9e3779b97f4a7c15ull ^ (unsigned long long)(unsigned)i;
    for (int j = 0; j < 8; j++) {
        h ^= (unsigned long long)(unsigned)w[j];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h;
}

/* A courier's hash of entry e of its walk (the list position i of a remote tile, and the task's
 * words as it read them): with couriers the host adds the same sum over the walk to the list's,
 * so a courier that read another walk or list is reported as a compute CTA would be. */
XS_TP_HD unsigned long long xs_tp_courier_hash(int e, int i, const int *w)
{
    return xs_tp_task_hash(i, w) * 0xff51afd7ed558ccdull ^
           (0xc4ceb9fe1a85ec53ull * (unsigned long long)(unsigned)(e + 1));
}
/* The hash of a slot's tasks (the sum the kernel checks; equal lists, equal hashes), 0 if empty. */
unsigned long long xs_tp_order_hash(const xs_tp_plan *pl, int slot);
/* The tasks of a slot (owned by the plan, valid until the slot changes); returns the count. */
int xs_tp_order_get(const xs_tp_plan *pl, int slot, const xs_tp_task **tasks);
/* Replace a slot's tasks with a copy of tasks[0..n) (tests, tools); not checked here - see
 * xs_tp_order_check. */
xs_status xs_tp_order_set(xs_tp_plan *pl, int slot, const xs_tp_task *tasks, int n);

/* The invariants every order must hold, checked on the CPU: every task's fields in range; every
 * tile of every GEMM, every push (destination, chunk) and every reduction exactly once; every
 * dependency on an earlier task of the list (an mlp GEMM 2 tile after all GEMM 1 tiles of its row
 * block - so each row-block counter reaches its target -, a reduction after this rank's own tile
 * that it sums); streamed stores only on remote tiles followed by a tile of the same CTA, and on
 * pushes that ride on a tile. With these, every CTA resident and every CTA taking its tasks in
 * list order, the kernel cannot deadlock: the earliest unfinished task only waits on finished
 * ones. XS_OK, or XS_EINVAL with one line naming the first violation. */
xs_status xs_tp_order_check(const xs_tp_plan *pl, int slot);

/* What an order holds, per step of grid tasks (for reports and tests). */
typedef struct {
    int steps, tasks;          /* steps of grid tasks; tasks incl. padding */
    int remote_tiles, pushes;  /* remote reduce-scatter tiles, push tasks */
    int deferred, spread;      /* remote tiles whose stores stream through the next tile, pushes
                                  streamed through their tile */
    double max_step_bytes;     /* largest remote bytes of one step, burst part (stored at once) */
} xs_tp_order_info;
xs_status xs_tp_order_stats(const xs_tp_plan *pl, int slot, xs_tp_order_info *out);

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
xs_status xs_tp_predict(const xs_tp_plan *pl, int slot, const xs_profile *p, const xs_tp_costs *c,
                        int with_plan, xs_tp_pred *out);

/* ---- choosing an order and a configuration (src/tp_plan.c) ------------------------------------ */

/* Widths of public models (config.json of each; docs/TP.md) and their default token counts
 * (M * H <= 64M: windows of 256 MB at most). */
typedef struct {
    const char *name;
    int hidden, inter;  /* H, I */
    int tokens[2];      /* default token counts */
} xs_tp_model;
#define XS_TP_NMODELS 3  /* llama3-8b, llama3-70b, llama3-405b */
const xs_tp_model *xs_tp_model_at(int i);  /* 0..XS_TP_NMODELS-1, else NULL */
/* The op's full n and k on a model: gemm_rs and mlp (H, I), ag_gemm (2 I, H). */
void xs_tp_model_nk(xs_tp_op op, const xs_tp_model *md, int *n, int *k);
/* Compute time over link time of one shape, estimated: the GEMM FLOPs at `tflops` against the
 * bytes this rank sends at drain_bytes_per_ns. Independent of m; -1 for a bad shape or no
 * remote bytes. */
double xs_tp_balance(const xs_tp_shape *s, double drain_bytes_per_ns, double tflops);
/* The default peer counts of an op on a model at m tokens: the `want` counts of 2, 4, 8, 16
 * whose compute / link balance is nearest 1 (the regime where fusing can pay: far from it one
 * side hides the other anyway), in increasing order, into out; returns their count. */
int xs_tp_default_peers(xs_tp_op op, const xs_tp_model *md, int m, double drain, double tflops,
                        int want, int *out);

/* The candidates of an engine (xs_tp_candidates' cand[0..nc)): one that does not stream
 * (sm90, streams 0) takes the stored candidates and the ring orders with their remote tiles
 * stored (spread cleared); the other streamed ones are not usable (usable[i] = 0). */
void xs_tp_engine_candidates(int streams, xs_tp_pace *cand, int nc, int *usable);
/* The candidates of a courier order (sm90): xs_tp_candidates(cap_q) stored as above, then the
 * front-loaded order (*front), then that order with its head split in splits[0..nsplit) parts
 * (nsplit <= 3; fsplit[v] their indices, -1 where none). cand and usable hold XS_TP_NCAND + 4;
 * returns the count. */
int xs_tp_courier_candidates(double cap_q, const int *splits, int nsplit, xs_tp_pace *cand,
                             int *usable, int *front, int *fsplit);
/* The model's ranking: each usable candidate built into slot, checked and predicted;
 * pred[i] = its model_ns (INFINITY where not usable), *best the lowest, the lowest index among
 * equal ones (-1: none usable). Candidates whose orders give the same schedule share one
 * simulation. pred NULL: *best alone (the same one), simulating only the candidates whose lower
 * bound (src/tp_model.c tp_bound: the unlimited stage's run, the drain at R, the stage's room)
 * does not exceed the best prediction found. The slot holds the last candidate built. The first
 * failure is returned (with pred NULL, failures to build any order come before failures to
 * simulate). At most XS_TP_NCAND + 8 candidates. */
xs_status xs_tp_predict_candidates(xs_tp_plan *pl, int slot, const xs_tp_pace *cand,
                                   const int *usable, int nc, const xs_tp_costs *c,
                                   const xs_profile *prof, double *pred, int *best);
/* A pace's short name: f<finish>/b<burst>/<ring|stream4|stream|capQ|nocap>[/split<S>]. */
void xs_tp_pace_label(const xs_tp_pace *p, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_TP_HOST_H */
