// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_up.h - UP (Ulysses sequence parallelism: FlashAttention forward + all-to-all) on the
 * host, plain C: the kernel's tile geometry and orders, the couriers' walk, the KV split's task
 * lists, the per-CTA programs and their simulation, the model's predictions and the planner
 * (docs/UP.md). CUDA-free: src/up_*.c implement it with cc; the kernel (cuda/up/up_kernel.cuh)
 * shares the XS_HD helpers below, so host and device walk the same orders.
 *
 * Tiles: query block x head, numbered heaviest causal block first (tile t is query block
 * nqb-1 - t/heads, head t%heads); tiles [0, remote) hold rows outside rank 0's shard.
 */
#ifndef XSTAGE_UP_H
#define XSTAGE_UP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "xstage.h"

#ifndef XS_HD
#if defined(__CUDACC__)
#define XS_HD static __host__ __device__ __forceinline__
#else
#define XS_HD static inline
#endif
#endif

#define XS_ATTN_D 128                                 /* head dim (fixed) */
#define XS_ATTN_BM 128                                /* query rows per tile */
#define XS_ATTN_BN 64                                 /* keys per iteration */
#define XS_ATTN_WARPS 8
#define XS_ATTN_THREADS (32 * XS_ATTN_WARPS)
#define XS_ATTN_ROW_BYTES (XS_ATTN_D * 2)             /* one row of one head: 256 B */
#define XS_ATTN_Q_BYTES (XS_ATTN_BM * XS_ATTN_ROW_BYTES) /* 32 KB */
#define XS_ATTN_KV_BYTES (XS_ATTN_BN * XS_ATTN_ROW_BYTES) /* 16 KB per K or V stage */
#define XS_ATTN_WARP_OUT_BYTES (16 * XS_ATTN_ROW_BYTES)   /* 4 KB: one warp's output rows */
#define XS_ATTN_UNITS_PER_WARP (XS_ATTN_WARP_OUT_BYTES / 16) /* 256 16-byte stores */
/* Q | K stage 0,1 | V stage 0,1 | output staging (8 warps x 4 KB) = 128 KB: one CTA per SM */
#define XS_ATTN_SMEM_BYTES (2 * XS_ATTN_Q_BYTES + 4 * XS_ATTN_KV_BYTES)
#define XS_ATTN_MAX_SPLIT XS_ATTN_UNITS_PER_WARP
#define XS_ATTN_MAX_SEQ (1 << 24)
#define XS_ATTN_MAX_HEADS 4096
#define XS_ATTN_MAX_COURIERS 64
#define XS_ATTN_CHUNK_ROWS 32                         /* a courier's paced chunk: 32 rows, 8 KB */
#define XS_ATTN_TIMEOUT_NS 2000000000ull              /* couriers' waits when timeout_ns = 0 */
#define XS_ATTN_MIN_PACE 0.01                         /* bytes/ns per courier: a chunk every <= 0.82 ms */
#define XS_ATTN_KV_MAX_PARTS 8                        /* KV split: parts per tile */
#define XS_ATTN_KV_FLOATS 68                          /* a thread's partial: 64 O, 2 max, 2 sum */
#define XS_ATTN_KV_SLOT_BYTES (XS_ATTN_WARPS * XS_ATTN_KV_FLOATS * 32 * 4) /* 68 KB */
/* a KV part's code (xs_attn_args.tasks[].w): slot < 2^23, p < n, 2 <= n <= 15 */
#define XS_ATTN_KV_PART(slot, p, n) (((slot) << 8) | ((p) << 4) | (n))
/* A task's code read back (host side: lists, checks, predictions; -1 = a whole tile): its parts,
 * its part, its slot base, and whether it stores its tile (a whole tile or the last part). */
XS_HD int xs_attn_kv_nparts(int w) { return w < 0 ? 1 : w & 15; }
XS_HD int xs_attn_kv_partno(int w) { return w < 0 ? 0 : (w >> 4) & 15; }
XS_HD int xs_attn_kv_slot(int w) { return w < 0 ? 0 : w >> 8; }
XS_HD int xs_attn_kv_stores(int w) { return xs_attn_kv_partno(w) == xs_attn_kv_nparts(w) - 1; }

/* The order in which a CTA walks its tiles (cuda/up/up_kernel.cuh, docs/UP.md). */
typedef enum { XS_ATTN_ORDER_SNAKE = 0, XS_ATTN_ORDER_EARLY = 1 } xs_attn_order;

/* One task of a KV-split CTA list (layout of CUDA's int4, which the kernel reads): a tile's key
 * blocks [kb0, kb1) and its part code (-1: the whole tile; else XS_ATTN_KV_PART). */
typedef struct __attribute__((aligned(16))) {
    int tile; /* tile index, kernel order */
    int kb0;  /* first key block */
    int kb1;  /* end key block (exclusive) */
    int part; /* -1 or XS_ATTN_KV_PART(slot, p, n) */
} xs_attn_kvtask;
XS_HD xs_attn_kvtask xs_attn_kvtask_of(int tile, int kb0, int kb1, int part)
{
    xs_attn_kvtask k;
    k.tile = tile, k.kb0 = kb0, k.kb1 = kb1, k.part = part;
    return k;
}

/* Slice placement for split = n over a tile of nkb iterations: slice s rides on iteration
 * floor(s*nkb/n); by iteration j, ceil((j+1)*n/nkb) slices (at most n) are due. The definition:
 * the per-CTA programs (src/up_progs.c) use it, test_attn checks the kernel's walk
 * (xs_attn_slicewalk) against it. */
XS_HD int xs_attn_slice_iter(int n, int nkb, int s)
{
    return (int)((long long)s * nkb / n);
}
XS_HD int xs_attn_slices_due(int n, int nkb, int j)
{
    const long long d = ((long long)(j + 1) * n + nkb - 1) / nkb;
    return d < n ? (int)d : n;
}

/* Tile of CTA b in wave w: the snake assignment (cuda/up/up_kernel.cuh, docs/UP.md). */
XS_HD int xs_attn_snake(int grid, int w, int b) { return w * grid + ((w & 1) ? grid - 1 - b : b); }

/* Tiles of CTA b below n (n <= tiles): the snake is increasing in w; the waves before n/grid lie
 * below n, wave n/grid straddles it. */
XS_HD int xs_attn_count_below(int n, int grid, int b)
{
    const int w = n / grid;
    return w + (xs_attn_snake(grid, w, b) < n);
}

/* Tiles with a row at or past rows_per_rank: the query blocks above the last block that lies
 * entirely in rank 0's shard; with the heaviest-first numbering they are tiles [0, n). */
XS_HD int xs_attn_remote_count(int seq, int heads, int rows_per_rank)
{
    if (rows_per_rank >= seq)
        return 0;
    const int nqb = (seq + XS_ATTN_BM - 1) / XS_ATTN_BM;
    return (nqb - rows_per_rank / XS_ATTN_BM) * heads;
}

/* The k-th tile CTA b computes: its waves in order, except that the waves of its tiles below
 * `rev` come first, in reverse. rev = 0 is the snake order; rev = the remote tiles is EARLY. */
XS_HD int xs_attn_cta_kth(int rev, int grid, int b, int k)
{
    const int nr = xs_attn_count_below(rev, grid, b);
    return xs_attn_snake(grid, k < nr ? nr - 1 - k : k, b);
}

/* The couriers' walk of the remote tiles: position k of every compute CTA b = 0..ncta-1 (its
 * k-th tile in its order, xs_attn_cta_kth), then position k + 1, keeping the tiles below
 * `remote`: the order in which the compute CTAs finish them when their tiles take alike. Every
 * remote tile comes once: in both orders a CTA's first count_below(remote) positions are its
 * remote tiles and the later ones are not, so positions below ceil(remote / ncta) hold them all.
 * Used by the couriers (each thread walks it alike) and by the host's prediction. */
typedef struct {
    int rev, ncta, remote, k, b, kmax;
} xs_attn_rwalk;
XS_HD void xs_attn_rwalk_init(xs_attn_rwalk *w, int rev, int ncta, int remote)
{
    w->rev = rev, w->ncta = ncta, w->remote = remote, w->k = 0, w->b = 0;
    w->kmax = remote > 0 ? (remote + ncta - 1) / ncta : 0;
}
/* The next remote tile of the walk; -1 after the last. */
XS_HD int xs_attn_rwalk_next(xs_attn_rwalk *w)
{
    while (w->k < w->kmax) {
        const int t = xs_attn_cta_kth(w->rev, w->ncta, w->b, w->k);
        if (++w->b == w->ncta)
            w->b = 0, w->k++;
        if (t < w->remote)
            return t;
    }
    return -1;
}

#ifdef __cplusplus
extern "C" {
#endif

/* Query blocks x heads. */
int xs_attn_tiles(int seq, int heads);
/* Tiles with a row outside rank 0's shard [0, rows_per_rank): a prefix [0, n) of the tile order
 * (0 when rank 0 keeps every row). */
int xs_attn_remote_tiles(int seq, int heads, int rows_per_rank);
/* Tiles CTA `cta` of a grid of `grid` computes (the snake assignment), and the k-th of them in
 * the order `order` (0 <= k < count); `remote` from xs_attn_remote_tiles (used by EARLY). */
int xs_attn_cta_count(int tiles, int grid, int cta);
int xs_attn_cta_tile(int order, int tiles, int remote, int grid, int cta, int k);
/* Key-block iterations of tile t (0 <= t < tiles), in the kernel's tile order. */
int xs_attn_tile_iters(int seq, int heads, int causal, int t);
/* First query row of tile t. */
int xs_attn_tile_row0(int seq, int heads, int t);
/* The remote tiles (tiles [0, remote)) in the couriers' order for `ncompute` compute CTAs
 * walking `order` (xs_attn_rwalk, the kernel's): list[j] for j < remote; courier c of C takes
 * list[c], list[c + C], ... Returns the count (= remote), or -1 for bad arguments. */
int xs_attn_courier_tiles(int order, int tiles, int remote, int ncompute, int *list);

/* The courier kernel's predicted timing (docs/UP.md "Couriers", the prediction): the compute
 * CTAs replayed with measured per-tile times, and the couriers as C servers fed in the walk's
 * order, each at rate/C. Times in ns from the kernel's start. */
typedef struct {
    double compute_end_ns; /* last compute CTA's end: max over CTAs of its tiles' dur_ns sum */
    double link_end_ns;    /* last courier's last byte issued (0 when nothing is remote) */
    double span_ns;        /* max of the two: the predicted sender-visible span */
} xs_attn_courier_pred;
/* ncompute CTAs (1 <= ncompute <= tiles) walk their tiles in `order` (the kernel's assignment:
 * xs_attn_cta_tile), tile t taking dur_ns[t]; remote tile t is ready when its CTA finishes it.
 * couriers = 0: the compute replay alone (link_end 0). couriers = C > 0: courier c serves the
 * walk's elements c, c + C, ... in that order, each from max(its previous end, the tile's ready
 * time) for overhead_ns + copy_bytes[t] / (rate / C) ns. rate_bytes_per_ns > 0 (the paced rate,
 * already capped by the caller at the link's drain and the couriers' issue rate). XS_EINVAL /
 * XS_ENOMEM with one line. */
xs_status xs_attn_courier_predict(int order, int tiles, int remote, int ncompute, int couriers,
                                  const double *dur_ns, const double *copy_bytes,
                                  double rate_bytes_per_ns, double overhead_ns,
                                  xs_attn_courier_pred *out);
/* KV split (docs/UP.md "KV split"): task lists for `grid` CTAs. A remote tile (tiles [0,
 * remote)) of more than part_kb key blocks is cut into n = min(ceil(iters / part_kb),
 * XS_ATTN_KV_MAX_PARTS) parts of near-equal length, a local tile likewise at min(part_kb, a
 * CTA's share of the local key blocks) (part_kb 0: nothing is cut). The remote tiles come
 * first, so that they leave early, then the local ones that fill the CTAs up; each class
 * longest parts first, then head by head (tiles of one head share their keys and values in
 * L2). They are handed out in batches of at most grid / n tiles with n parts (which run side by
 * side), tile by tile, a tile's last part after its others, each task to the CTA free first
 * counted in key blocks, one more for a task that stores its tile (so the stores rotate over
 * the CTAs). A last part therefore only waits for tasks handed out before it. Slots are
 * numbered in that order. task_off holds grid + 1 entries, tasks up to cap
 * (xs_attn_kv_max_tasks is always enough). XS_EINVAL / XS_ENOMEM, one line. */
int xs_attn_kv_max_tasks(int seq, int heads);
xs_status xs_attn_kv_build(int seq, int heads, int causal, int remote, int grid, int part_kb,
                           int *task_off, xs_attn_kvtask *tasks, int cap, int *ntasks, int *nslots);
/* Check task lists as the kernel will read them: every task's tile and key blocks in range,
 * every tile's key blocks covered exactly once (a whole tile, or parts 0..n-1 in order, all
 * with one slot base), slots below nslots and never shared, and no wait cycle (the CTAs
 * replayed with each last part blocked until its parts are done: all tasks must finish).
 * XS_EINVAL naming the first problem. */
xs_status xs_attn_kv_check(int seq, int heads, int causal, int grid, const int *task_off,
                           const xs_attn_kvtask *tasks, int nslots);
/* The KV-split kernel's predicted timing: each CTA runs its tasks back to back, part p of tile
 * t taking dur_ns[t] x its share of the tile's key blocks, a last part ending no earlier than
 * its other parts; a tile's remote_bytes[t] enter the link when it is stored and drain in
 * order at drain_bytes_per_ns. The sender sees the end of its stores: span = max(compute end,
 * link end - headroom_bytes / drain). XS_EINVAL (bad lists or arguments) / XS_ENOMEM. */
xs_status xs_attn_kv_predict(int seq, int heads, int causal, int grid, const int *task_off,
                             const xs_attn_kvtask *tasks, const double *dur_ns,
                             const double *remote_bytes, double drain_bytes_per_ns,
                             double headroom_bytes, xs_attn_courier_pred *out);
/* The fused kernel as one program per CTA (docs/UP.md "Per-CTA programs"), for the event model
 * (xs_simulate_programs): a CTA's steps (its tiles, or its KV tasks) in the order it runs them,
 * each taking its measured time, and after each step the step's remote bytes: split 0 in one
 * burst, then the next step's work; split n in the kernel's n slices over the next step's
 * iterations (xs_attn_slices_due, the step's time spread evenly over them), the last step's
 * bytes in one burst at the end. The first row is the first step's work (no bytes). Row i of
 * CTA b is bytes[i * grid + b], gap_ns[i * grid + b]; programs shorter than nrows end in (0, 0)
 * rows. Free with xs_attn_progs_free. */
typedef struct {
    int grid, nrows;
    int64_t *bytes;
    double *gap_ns;
} xs_attn_progs;
void xs_attn_progs_free(xs_attn_progs *p);
/* The plain kernel in `order` (xs_attn_cta_tile), tile t taking dur_ns[t] (finite; below 0
 * counts as 0) with remote_bytes[t] >= 0 to store; split 0..256. XS_EINVAL / XS_ENOMEM with
 * one line. */
xs_status xs_attn_progs_plain(int seq, int heads, int causal, int order, int remote, int grid,
                              int split, const double *dur_ns, const double *remote_bytes,
                              xs_attn_progs *out);
/* The KV-split kernel's lists (checked as xs_attn_kv_check does): each task's time from the
 * replay of xs_attn_kv_predict (its share of dur_ns[t]; a last part's wait for its other parts
 * counted in its time); a task that stores its tile (whole, or the last part) stores its
 * remote_bytes. */
xs_status xs_attn_progs_kv(int seq, int heads, int causal, int grid, const int *task_off,
                           const xs_attn_kvtask *tasks, int split, const double *dur_ns,
                           const double *remote_bytes, xs_attn_progs *out);
/* The programs on profile p and on an unlimited stage (the same issue rate and overhead; no
 * drain or capacity limit), with no schedule set-up (start_ns and row_start_ns belong to the
 * replay kernel, not to this one) and without the producers' own store queues and buffers (the
 * kernel's work waits for its held-back stores; docs/UP.md "Per-CTA programs"): the two
 * makespans, and the most any CTA's issue of one step's bytes was held back by the stage (its
 * window minus the unlimited one). */
typedef struct {
    double span_ns;      /* makespan on the profile */
    double free_ns;      /* makespan on the unlimited stage */
    double held_ns;      /* largest window stretch over every row and CTA */
    double peak_bytes;   /* peak backlog of the shared stage */
} xs_attn_progsim;
xs_status xs_attn_progs_simulate(const xs_profile *p, const xs_attn_progs *pg,
                                 xs_attn_progsim *out);

/* ---- the model of one configuration (src/up_model.c, docs/UP.md "Per-CTA programs") ------- */

/* What the model needs of one run configuration (the bench's shape and grid). */
typedef struct {
    int seq, heads, causal; /* the attention problem on one rank */
    int peers;              /* Ulysses group size (reports only) */
    int tiles;              /* xs_attn_tiles(seq, heads) */
    int grid;               /* CTAs of the plain kernel: min(tiles, sms) */
    int rows_per_rank;      /* rank p receives sequence rows [p*rpr, (p+1)*rpr) */
    int remote;             /* tiles with rows outside rank 0's shard: xs_attn_remote_tiles */
    int sms;                /* SMs: a courier run has min(tiles, sms - C) compute CTAs + C */
    double pace_bytes_per_ns; /* couriers' total rate (0: unpaced) */
} xs_up_cfg;

/* KV split: partials of one member at most, bytes (a member over it is not in the family). */
#define XS_UP_KV_MAX_BYTES (4ull << 30)

/* Grid of a run with C couriers: as many compute CTAs as the plain kernel would have, up to the
 * SMs the couriers leave, plus the couriers (C = 0: c->grid). */
int xs_up_courier_grid(const xs_up_cfg *c, int couriers);
/* Bytes of tile t that go to a rank other than rank 0 (i.e. cross the link). */
double xs_up_tile_remote_bytes(const xs_up_cfg *c, int t);
/* Bytes a courier copies for tile t: all its rows inside the sequence (rank 0's rows of a tile
 * that straddles its shard included: the courier moves the whole tile). */
double xs_up_tile_copy_bytes(const xs_up_cfg *c, int t);
/* Remote bytes of every tile into rb[tiles]. */
void xs_up_remote_bytes(const xs_up_cfg *c, double *rb);
/* Per-tile times (ns) of a plain run that walked the snake on c->grid CTAs, from its stamps:
 * tile t's time runs from its CTA's previous stamp (cta_start[b] for the first) to tns[t];
 * dur_ns[tiles]. */
void xs_up_tile_durations(const xs_up_cfg *c, const uint64_t *cta_start, size_t cta_stride,
                          const uint64_t *tns, double *dur_ns);

/* The model's backpressure cost (ns) of the fused kernel in this order with this split: its
 * per-CTA programs (xs_attn_progs_plain: each CTA's tiles in `order`, with the measured tile
 * times dur_ns[tiles], and each tile's remote bytes in one burst or in the kernel's slices)
 * simulated on the profile, minus the same programs on an unlimited stage. The compute itself is
 * measured, so the predicted sender-visible time is fa + this. *sim (optional) gets the
 * simulation's numbers. NAN with the message set (xs_errmsg, "model: ...") when it fails. */
double xs_up_predict_delta(const xs_profile *p, const xs_up_cfg *c, const double *dur_ns,
                           int order, int split, xs_attn_progsim *sim);
/* The couriers' rate in the prediction: the paced total, capped by the link (the profile's R)
 * and by C CTAs' issue rate (the profile's r each); unpaced, the two caps. Bytes/ns. */
double xs_up_courier_rate(const xs_profile *p, const xs_up_cfg *c, int couriers);
/* The predicted cost (ns) of the courier member (order, C) over fa (docs/UP.md "Couriers"): the
 * per-tile times replayed on the min(tiles, SMs - C) compute CTAs in `order` (a tile is ready at
 * its end), the couriers as C servers of the remote tiles in the kernel's walk, each at
 * xs_up_courier_rate / C plus the profile's overhead o per tile; predicted span = max(compute
 * end, last courier's end). Minus the same replay of fa itself (c->grid CTAs, snake), so that
 * it adds to the measured fa like the other members' cost. NAN (message set) on failure. */
double xs_up_predict_courier(const xs_profile *p, const xs_up_cfg *c, const double *dur_ns,
                             int order, int couriers);
/* The KV-split member's task lists (kb key blocks per part), checked as the kernel will read
 * them, and refused when their partials exceed XS_UP_KV_MAX_BYTES: *off [grid + 1] and *tasks
 * (malloc'ed; the caller frees both). XS_OK, or the error (message set, nothing allocated). */
xs_status xs_up_kv_lists(const xs_up_cfg *c, int kb, int **off, xs_attn_kvtask **tasks,
                         int *ntasks, int *nslots);
/* The predicted cost (ns) of the KV-split member (kb key blocks per part) over fa (docs/UP.md
 * "KV split"): its per-CTA programs (xs_attn_progs_kv) simulated on the profile, minus the
 * replay of fa (snake), as for the couriers. The partials' and merges' own cost is not in it.
 * *slices gets the busiest CTA's output slices (its tasks that store their tile x split).
 * NAN where the member cannot run: *listed = 0 when its lists cannot be built (not in the
 * family), 1 when the prediction itself failed; the message is set either way. */
double xs_up_predict_kv(const xs_profile *p, const xs_up_cfg *c, const double *dur_ns, int kb,
                        int split, int *slices, int *listed);

/* The fluid criterion (docs/UP.md "Criterion"), kept for comparison with the per-CTA one: tile
 * t's remote bytes B_t enter the stage from its end stamp tns[t] on, after the profile's
 * overhead o, at the producer's issue rate r; the stage drains at R. Holds when this fluid
 * backlog never exceeds Q(grid). Fills the peak backlog (bytes), the most CTAs issuing at once
 * and the synchronised form's largest K*B - R*T_iss0 (bytes). Returns 1 (holds), 0 (fails) or
 * -1 (no stamps, no rates). */
int xs_up_criterion_fluid(const xs_profile *p, const xs_up_cfg *c, const uint64_t *tns,
                          double *peak_bytes, int *k_eff, double *sync_bytes);

/* ---- the planner (src/up_plan.c, docs/UP.md "Criterion") ---------------------------------- */

#define XS_UP_NCANDS 17                 /* members of the kernel's reshape family */
#define XS_UP_MAX_MEMBERS (2 * XS_UP_NCANDS)
#define XS_UP_TIE 1e-3 /* relative: predictions this close to the best count as equal */

/* What restricts the family: -1 leaves a dimension to the planner. */
typedef struct {
    int split;    /* -1, or the forced split (no couriers then) */
    int order;    /* -1, or the forced xs_attn_order */
    int couriers; /* -1: the family's; 0: none; C: only C */
    int kv;       /* -1: the family's (where kv_ok); 0: none; N: forced, N key blocks per part */
    int kv_ok;    /* KV members may join (only where pilots measure them) */
    double load_drain_bytes_per_ns; /* the model's drain for the fused kernel (0: the profile's
                                       drain under load where it has one, else R) */
    double slice_ns; /* the kernel's own cost of one output slice, ns (in dp, not in ranking) */
} xs_up_plan_opts;

/* The planner's family with its predictions. */
typedef struct {
    int n;
    int ord[XS_UP_MAX_MEMBERS], spl[XS_UP_MAX_MEMBERS], cou[XS_UP_MAX_MEMBERS];
    int kv[XS_UP_MAX_MEMBERS];
    double d[XS_UP_MAX_MEMBERS];  /* the model's cost over fa, ns, by which members rank (NAN:
                                     the model failed) */
    double dp[XS_UP_MAX_MEMBERS]; /* the predicted cost over fa: d + the slices' own cost, ns */
    int failed[XS_UP_MAX_MEMBERS]; /* 0; 1 the prediction failed; 2 a KV member whose lists
                                      cannot be built (not in the family) */
    char why[XS_UP_MAX_MEMBERS][200]; /* the message where failed */
} xs_up_family;

/* The planner's decision and the numbers behind it. */
typedef struct {
    int criterion_ok;   /* 1 no piggyback CTA's stores held back beyond held_tol_ns, 0 some
                           are, -1 unknown (no stamps, model failed) */
    int fluid_ok;       /* xs_up_criterion_fluid's verdict */
    xs_attn_progsim pb; /* piggyback's per-CTA programs on the model's profile */
    char pb_why[200];   /* why piggyback's prediction failed ("": it did not) */
    double held_tol_ns; /* one chunk at the model's drain rate */
    double fluid_peak_bytes, sync_bytes; /* the fluid test's numbers */
    int k_eff;
    int order, split, couriers, kv; /* the choice */
    double courier_pace;            /* its couriers' total rate, bytes/ns (0: none/unpaced) */
    double d_pb_ns, d_fu_ns;        /* predicted cost over fa of piggyback and of the choice */
    xs_up_family fam;
} xs_up_plan;

/* The model's profile: p draining at load_drain_bytes_per_ns where > 0, else at p's drain under
 * load where it has one, else at p's R (the couriers' pace stays a fraction of p's R). */
void xs_up_model_profile(const xs_profile *p, double load_drain_bytes_per_ns, xs_profile *out);
/* The planner: the criterion on the piggyback kernel's per-CTA programs (fa's tile times
 * dur_ns, stamps tns for the fluid test), and the member of the kernel's family (order x split,
 * piggyback included, couriers and KV splits) with the smallest predicted cost, ties (within
 * XS_UP_TIE of the whole predicted time) resolved by the family's order of preference
 * (docs/UP.md, "Criterion"). Fills *out; prints nothing. Always succeeds (a failed prediction
 * is a NAN member, noted in out->fam). */
void xs_up_plan_run(const xs_up_plan_opts *o, const xs_profile *prof, const xs_up_cfg *c,
                    const double *dur_ns, const uint64_t *tns, xs_up_plan *out);
/* The planner's decision alone (xs_up_plan_decide): the member xs_up_plan_run chooses and its
 * predicted cost, with the bounds that spared the other members' simulations. Member i is the
 * i-th of the family xs_up_plan_run lists in out->fam (the same options, the same order). */
typedef struct {
    int order, split, couriers, kv; /* the choice, as in xs_up_plan */
    double courier_pace;            /* as in xs_up_plan */
    double d_ns;                    /* the choice's cost over fa by which it ranks (fam.d) */
    double d_fu_ns;                 /* its predicted cost over fa (xs_up_plan's d_fu_ns) */
    int n;                          /* members of the family */
    int pick;                       /* the choice's index in the family */
    int simulated;                  /* members whose engine simulation ran */
    double lb[XS_UP_MAX_MEMBERS];   /* a proven lower bound on member i's d (ns; -INFINITY:
                                       none; a courier member's is its exact d) */
    double d[XS_UP_MAX_MEMBERS];    /* member i's d where it was evaluated, else NAN */
    int evaluated[XS_UP_MAX_MEMBERS]; /* 1 where d[i] is member i's prediction */
} xs_up_decision;
/* The decision of xs_up_plan_run (same arguments but the stamps, which only its criteria
 * read) without the full table: every member gets a lower bound from closed forms (its CTAs'
 * compute and issue alone on an unlimited stage; its remote bytes through the stage's capacity
 * at the drain rate; the couriers' replay, exact and cheap); then members are simulated only
 * while one of them can still be the choice, the one the ties need first (docs/UP.md
 * "Criterion"): a member whose bound lies above the tie threshold of the best prediction found
 * cannot be chosen. The choice, its d and d_fu_ns are bit-identical to xs_up_plan_run's. Fills
 * *out; prints nothing; always succeeds (as xs_up_plan_run: a failed prediction loses). */
void xs_up_plan_decide(const xs_up_plan_opts *o, const xs_profile *prof, const xs_up_cfg *c,
                       const double *dur_ns, xs_up_decision *out);
/* Pilots (docs/UP.md "Pilots": the model proposes, short verified runs decide among its best):
 * the members to time, into idx[f->n]: the `pilots` best by prediction (failed predictions
 * last), the current choice (order, split, couriers, kv) always among them, then every KV split
 * and piggyback not yet among them (the model cannot rank those). Returns how many. */
int xs_up_pilot_members(const xs_up_family *f, int order, int split, int couriers, int kv,
                        int pilots, int *idx);
/* The pilot that wins: med[k] the median time of member idx[k] (any unit); the fastest, where
 * the pilots can tell; pilots within `tie` (relative) of the fastest are tied and the model's
 * ranking decides among them (a difference that small does not repeat in the timed runs).
 * Returns the member's index in f, or -1 (n = 0 or no finite time). */
int xs_up_pilot_pick(const xs_up_family *f, const int *idx, const double *med, int n,
                     double tie);
/* A plan's short name, as in the bench's plan column: s|e (snake | early order) and the split
 * ("s8", "e16"; "s0" is piggyback), c and the couriers ("c4"; "ec8" with the early order), or
 * k and the KV split's key blocks per part, with its slices ("k16s8"; "k16": stored whole).
 * Returns buf. */
const char *xs_up_plan_name(int order, int split, int couriers, int kv, char *buf, size_t n);

/* ---- per-tile stall of the piggyback kernel (src/up_stall.c, docs/UP.md "Per-tile stall") -- */

/* A tile counts as stalled above this measured stall (ns), issue side or MMA side (EP's
 * XS_MOE_STALLED_NS). */
#define XS_UP_STALLED_NS 500.0

/* A per-tile prediction scored where it matters: over the tiles whose measured stall exceeds
 * a threshold, the model's median |pred - meas| beside the zero predictor's (stall 0: the
 * median measured stall). Times in ns; NAN where no tile counts. */
typedef struct {
    int tiles;                  /* tiles with finite meas and pred */
    double err_med_ns;          /* median |pred - meas| over them */
    int stalled;                /* of those, meas > the threshold */
    double stalled_err_med_ns;  /* the model's median |pred - meas| over the stalled tiles */
    double stalled_zero_med_ns; /* the zero predictor's: their median meas */
    int met;                    /* stalled > 0 and stalled_err_med_ns <= 0.5 stalled_zero_med_ns */
} xs_stall_score;

/* Score pred[n] against meas[n] (ns; a NAN in either leaves the tile out) on the tiles with
 * meas > thresh_ns. XS_OK, or XS_ENOMEM / XS_EINVAL (n < 0, NULL arrays with n > 0). */
xs_status xs_stall_score_of(const double *meas, const double *pred, int n, double thresh_ns,
                            xs_stall_score *out);

/* One plain run's stamps (xs_attn_args cta_ns, tile_work_ns, tile_ns), %globaltimer ns. */
typedef struct {
    const uint64_t *cta_ns;  /* [grid * 3]: CTA b started at cta_ns[3 b] */
    const uint64_t *work_ns; /* [tiles]: warp 0 finished tile t's main loop */
    const uint64_t *end_ns;  /* [tiles]: warp 0 issued tile t's last store */
} xs_up_stamps;

/* Per-tile stall of the piggyback kernel (docs/UP.md "Per-tile stall"). */
typedef struct {
    xs_stall_score issue;  /* tiles with remote bytes: issue time over fa's, minus unstalled */
    xs_stall_score mma;    /* every tile: main loop over fa's */
} xs_up_stall;

/* The piggyback run pb (split 0, snake, c->grid CTAs) against the fa run fa of the same
 * configuration, tile by tile, and the model's prediction of both sides from fa's stamps (its
 * per-CTA programs, xs_attn_progs_plain, simulated three times: with the CTAs' own store queues
 * (the issue side), without them (the work waits for the held-back stores), and on an unlimited
 * stage). per_tile (optional, [4 * c->tiles]): meas_issue, pred_issue, meas_mma, pred_mma of
 * tile t at 4 t .. 4 t + 3 (NAN where the side does not score the tile). XS_EINVAL when a stamp
 * is missing (0) or out of order; XS_ENOMEM; the simulation's errors. */
xs_status xs_up_tile_stall(const xs_profile *p, const xs_up_cfg *c, const xs_up_stamps *fa,
                           const xs_up_stamps *pb, xs_up_stall *out, double *per_tile);

struct xs_trace_record;
/* The trace v1 records (include/xstage_trace.h, docs/TRACE.md "Workload traces") of a plain run
 * in the snake order on c->grid CTAs: CTA b's k-th tile is seq k; sm = b (the kernel records no
 * %smid; one CTA per SM); bytes = its remote bytes (remote != 0) or 0; issue = [work_ns, end_ns]
 * (warp 0's epilogue: final rescale and stores), work = [previous end_ns or the CTA's start,
 * work_ns]. *out malloc'd (free it), *n = c->tiles. XS_EINVAL when a stamp is missing or out of
 * order, XS_ENOMEM. */
xs_status xs_up_trace_records(const xs_up_cfg *c, const xs_up_stamps *s, int remote,
                              struct xs_trace_record **out, size_t *n);

#ifdef __cplusplus
}
#endif

#endif /* XSTAGE_UP_H */
