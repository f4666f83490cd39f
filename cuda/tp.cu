/*
 * tp.cu - tensor parallelism on the shared tile engine (cuda/gemm.cuh): the persistent task
 * kernel (GEMM tiles with local, SwiGLU or reduce-scatter epilogues, all-gather pushes,
 * owner-side reductions, every dependency a bounded wait), the naive and shaped task orders, the
 * X-Stage model of an order, the unfused cuBLAS baseline, fp32 references and destination-side
 * verification. cuda/tp.h is the contract; docs/TP.md the design.
 *
 * The kernel: CTA b runs tasks b, b + grid, b + 2 grid, ... of a task list (static round robin;
 * "step" s = tasks [s grid, (s+1) grid)). A task is a slot that may hold
 *   TILE    one 128 x 256 tile of GEMM g: xs_gemm_mainloop, then the staged epilogue to its
 *           destination rows - local output, SwiGLU to local h, or (reduce-scatter) the owner's
 *           slot for this source in the owner's window (row- or tile-major: tp_slot_tile_at,
 *           xs_tp_set_slot_layout), followed by a per-tile signal there
 *           (payload, CTA barrier, st.release.sys of the epoch by thread 0 - raised lazily at the
 *           CTA's next release point, see tp_pend);
 *   PUSH    one 64 KB chunk of this rank's shard to one peer's gathered buffer, then its signal
 *           (the same way);
 *   REDUCE  this rank's own tile t: wait for all P sources' signals, sum the P slots in fp32
 *           (source order 0..P-1, so the result is deterministic), store bf16 to y.
 * Dependencies are bounded waits (%globaltimer) polled by thread 0: a GEMM 0 tile of an
 * all-gathered shard waits for that shard's chunks (virtual peers: for this rank's own chunks at
 * the mirror rank, tp_args.ag_sym); an mlp GEMM 2 tile waits for the count of
 * GEMM 1 tiles of its row block (red.release.gpu / ld.acquire.gpu, reset before each launch);
 * a reduction waits for the P source flags. A timeout is recorded once (xs_devstatus, first
 * failure wins) and every other waiting CTA sees it and stops, so a missed signal ends the
 * kernel within one bound. Tasks wait only on tasks earlier in the list, and every CTA is
 * resident (one per SM), so the order cannot deadlock.
 *
 * Couriers (sm90 engine, xs_tp_set_couriers; tp_sm90.cuh): the last C CTAs of the grid copy the
 * remote reduce-scatter tiles that the first grid - C CTAs (whose lists are built for them)
 * stage in an HBM outbox, in list order, and raise the owners' signals.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gemm.cuh"
#include "tp.h"
#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_device.cuh"
#include "xstage_win.h"

typedef xs_gemm_big TPC; /* 128 x 256 tiles, 8 warps, 4 stages: one CTA per SM */
static_assert(TPC::BM == XS_TP_BM && TPC::BN == XS_TP_BN, "tp.h tile sizes");

/* ---- tasks --------------------------------------------------------------------------------- */

enum {
    TP_T_TILE = XS_TP_K_TILE,
    TP_T_PUSH = XS_TP_K_PUSH,
    TP_T_REDUCE = XS_TP_K_REDUCE,
    TP_T_DEFER = XS_TP_K_DEFER,   /* TILE of a remote owner: staged in the CTA's scratch, its
                                     stores streamed through the CTA's next tile's main loop */
    TP_T_SPREAD = XS_TP_K_SPREAD, /* PUSH riding on a TILE: its stores streamed through that
                                     tile's main loop */
    TP_T_SPLIT = XS_TP_K_SPLIT,   /* TILE: one k-part of a split tile (courier runs, sm90; tp.h
                                     XS_TP_SPLIT_*: w1.x part, w1.y first scratch slot, w1.w
                                     parts) */
};
#define TP_T_ALL (TP_T_TILE | TP_T_PUSH | TP_T_REDUCE | TP_T_DEFER | TP_T_SPREAD | TP_T_SPLIT)
#define TP_SCRATCH_BYTES (XS_TP_BM * XS_TP_BN * 2) /* one staged tile per CTA */
/* One split part's fp32 accumulators: 256 consumer threads x 128 floats, thread-major by float4
 * (tp90_split_put), whatever the fragment layout. */
#define TP_SPLIT_BYTES (XS_TP_BM * XS_TP_BN * 4)
/* Split scratch slots per context (xs_tp_set_couriers): three steps' worth of parts (a split of
 * 8 cascades 8, 4, 2: at most G (7/8 + 3/4 + 1/2) slots). */
#define TP_SPLIT_SLOTS(grid) (3 * (grid))

typedef struct __align__(16) {
    int flags;      /* TP_T_* (0 = nothing: padding of a step) */
    int gemm;       /* TILE: GEMM 0 or 1 */
    int tm, tn;     /* TILE: tile row and column */
    int push_rank;  /* PUSH: destination rank */
    int push_chunk; /* PUSH: first chunk of this rank's shard */
    int red_t;      /* REDUCE: own tile index, 0..t_own-1 */
    int push_n;     /* PUSH: chunks from push_chunk (0 = 1) */
} tp_task;
static_assert(sizeof(tp_task) == 32 && sizeof(xs_tp_task) == 32, "two int4 per task");
static_assert(offsetof(tp_task, red_t) == offsetof(xs_tp_task, red_t) &&
                  offsetof(tp_task, push_rank) == offsetof(xs_tp_task, push_rank) &&
                  offsetof(tp_task, tn) == offsetof(xs_tp_task, tn) &&
                  offsetof(tp_task, push_n) == offsetof(xs_tp_task, push_n),
              "tp.h xs_tp_task is the stored task");

/* Everything the kernel needs besides the window table (by value, in parameter space). */
typedef struct {
    const tp_task *tasks;
    int ntasks;
    int me, P;
    xs_gemm_problem g[2];
    xs_bf16 *out0;               /* GEMM 0 local output when GEMM 0 is not reduce-scattered */
    long long ldo0;              /* elements */
    int swiglu0;
    int rs_gemm;                 /* -1, 0 or 1 */
    int rs_rows, rs_n, rs_tiles_n, t_own, rs_flag0;
    unsigned long long rs_off;   /* bytes */
    int slots;                   /* xs_tp_layout of the reduce-scatter slots */
    xs_bf16 *y;                  /* [rs_rows, rs_n] */
    int ag, shard_rows, ag_k, ag_chunks;
    unsigned long long shard_bytes;
    unsigned int *rb_count;      /* [tiles_m] GEMM 0 tiles done per row block (mlp), or NULL */
    int n0_per_rb;
    unsigned long long epoch, timeout_ns;
    unsigned long long *task_ns; /* [ntasks] %globaltimer at the end of each task, or NULL */
    unsigned long long *cta_ns;  /* [2 grid] start and end per CTA, or NULL */
    xs_devstatus *status;
    int fault;
    char *scratch;               /* [grid][TP_SCRATCH_BYTES]: staged remote tiles (TP_T_DEFER) */
    unsigned long long *list_sum; /* sum of tp_task_hash over the tasks the CTAs read */
    int ag_sym;                  /* 1: the other shards were placed before the launch (virtual
                                    peers): chunk c of shard s "arrives" when this rank's own
                                    chunk c reaches the mirror rank tp_mirror(s), the ring
                                    position at which a symmetric peer s sends to this rank */
    uint64_t *skip_flag;         /* test hook: a flag never raised (XS_TP_FAULT_AG_FLAG), or NULL */
    uint64_t *ag_shadow;         /* [P][ag_chunks] device copy of this rank's push flags, raised
                                    with them; what ag_sym waits poll (the real flags are in
                                    host memory, where a read waits behind the posted writes -
                                    a real peer polls its own HBM) */
    int eager_flags;             /* 1: every queued flag is raised after the next main loop (the
                                    rule before run 5); 0: only urgent ones (tp_pend) */
} tp_args;

/* The rank this rank sends to at the ring position where rank s sends to it. */
XS_HD int tp_mirror(int me, int s, int P) { return ((2 * me - s) % P + P) % P; }

/* The flag a GEMM 1 tile on shard s waits for, chunk c (see tp_args.ag_sym). */
XS_DEV const uint64_t *tp_chunk_flag(const tp_args &a, const xs_wintab &tab, int s, int c)
{
    if (a.ag_sym)
        return a.ag_shadow + (size_t)tp_mirror(a.me, s, a.P) * a.ag_chunks + c;
    return tab.flags[a.me] + (size_t)s * a.ag_chunks + c;
}

/* The shadow of this rank's push flag of chunk c to rank r (ag_sym), or NULL. */
XS_DEV uint64_t *tp_push_shadow(const tp_args &a, int r, int c)
{
    return a.ag_sym ? a.ag_shadow + (size_t)r * a.ag_chunks + c : NULL;
}

/* A hash of task i as read by the kernel; the host sums the same over the list it uploaded, so a
 * kernel that read a list other than the host's (a stale or partly copied upload) is reported
 * instead of silently skipping or repeating work. */
XS_HD unsigned long long tp_task_hash(int i, const int *w)
{
    unsigned long long h = 0x9e3779b97f4a7c15ull ^ (unsigned long long)(unsigned)i;
    for (int j = 0; j < 8; j++) {
        h ^= (unsigned long long)(unsigned)w[j];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h;
}

/* Task i of the launch's list (two int4 words, read-only path) and its hash (tp_task_hash). */
XS_DEV void tp_task_read(const tp_args &a, int i, int4 *w0, int4 *w1)
{
    const int4 *t4 = (const int4 *)(a.tasks + i);
    *w0 = __ldg(t4);
    *w1 = __ldg(t4 + 1);
}

XS_DEV unsigned long long tp_task_hash4(int i, int4 w0, int4 w1)
{
    const int w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
    return tp_task_hash(i, w);
}

/* A courier's hash of entry e of its walk (the list position i of a remote tile, and the task's
 * words as it read them): with couriers the host adds the same sum over the walk to the list's,
 * so a courier that read another walk or list is reported as a compute CTA would be. */
XS_HD unsigned long long tp_courier_hash(int e, int i, const int *w)
{
    return tp_task_hash(i, w) * 0xff51afd7ed558ccdull ^
           (0xc4ceb9fe1a85ec53ull * (unsigned long long)(unsigned)(e + 1));
}

XS_DEV unsigned long long tp_courier_hash4(int e, int i, int4 w0, int4 w1)
{
    const int w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
    return tp_courier_hash(e, i, w);
}

/* Device failure detail: wait kind (1 = shard chunk flag, 2 = row-block count, 3 = source
 * flag of a reduction, 4 = a courier's outbox ready flag, 5 = a split part's scratch flag) in
 * bits 60..63, the flag or row block in bits 32..59, the task below. */
#define TP_DETAIL(kind, idx, task)                                                             \
    (((unsigned long long)(kind) << 60) | ((unsigned long long)((idx) & 0x0fffffff) << 32) |    \
     (unsigned long long)(unsigned)(task))

/* ---- device: bounded waits ---------------------------------------------------------------- */

XS_DEV unsigned int tp_ld_acquire_gpu_u32(const unsigned int *p)
{
    unsigned int v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

XS_DEV int tp_failed(const tp_args &a)
{
    return a.status && *(const volatile unsigned int *)&a.status->code != 0u;
}

/* Signals whose payload is stored but whose flag is not yet raised (thread 0's list, in shared
 * memory). A release fence orders every prior write of the CTA, and on the PCIe path it may
 * have to wait until those writes have left the GPU; raising a tile's flag right after its
 * stores would make the CTA wait for its own drain. So flags are raised at the CTA's next
 * release point - after its next tile's main loop, before it could block in a wait, before its
 * first reduction, when the list is full, and at its end - and never while it holds work others
 * wait for. Under a sustained stream the X-Stage holds up to Q of queued stores ahead of the
 * CTA's last ones whenever it reaches a release point, so every fence waits about Q/R (0.7 MB /
 * 52.8 GB/s = 13 us on the H200 host path, 15 % of a 88 us tile). Only *urgent* flags (all-gather
 * chunks: GEMM 1 tiles wait for them now) are raised at the release point after a main loop;
 * reduce-scatter tile flags, which only the owners' reductions at the end of their lists wait
 * for, wait for one of the other release points (at most TP_PEND of them per fence). */
#define TP_PEND 8
typedef struct {
    uint64_t *flag[TP_PEND];
    uint64_t *shadow[TP_PEND]; /* raised right after its flag (tp_args.ag_shadow), or NULL */
    int n;
    int urgent; /* queued flags that a GEMM tile may be waiting for (all-gather chunks) */
    const uint64_t *skip; /* test hook: never raised (tp_args.skip_flag) */
} tp_pend;

/* Raise every pending flag (thread 0; the payload stores precede a CTA barrier before this). */
XS_DEV void tp_release(tp_pend *pd, unsigned long long epoch)
{
    for (int i = 0; i < pd->n; i++) {
        xs_st_release_sys(pd->flag[i], epoch);
        if (pd->shadow[i]) /* timing only (the data it stands for was placed before the launch) */
            *(volatile uint64_t *)pd->shadow[i] = epoch;
    }
    pd->n = 0;
    pd->urgent = 0;
}

/* Queue a flag (thread 0, after the barrier that follows the payload stores). */
XS_DEV void tp_pend_add(tp_pend *pd, uint64_t *flag, unsigned long long epoch,
                        uint64_t *shadow = NULL, int urgent = 1)
{
    if (flag == pd->skip)
        return;
    if (pd->n == TP_PEND)
        tp_release(pd, epoch);
    pd->shadow[pd->n] = shadow;
    pd->flag[pd->n++] = flag;
    pd->urgent += urgent;
}

/* The two kinds of dependency: a 64-bit flag another GPU (or the host) raises (system scope)
 * and a 32-bit count of this GPU's CTAs (GPU scope). */
XS_DEV uint64_t tp_acquire(const uint64_t *p) { return xs_ld_acquire_sys(p); }
XS_DEV unsigned int tp_acquire(const unsigned int *p) { return tp_ld_acquire_gpu_u32(p); }

/* 0: *p >= want; 1: timed out (recorded); 2: another CTA failed first. Thread 0 only; raises
 * this CTA's pending flags before it blocks. */
template <typename T>
XS_DEV int tp_wait_geq(const tp_args &a, tp_pend *pd, const T *p, T want,
                       unsigned long long detail)
{
    if (tp_acquire(p) >= want)
        return 0;
    tp_release(pd, a.epoch);
    const unsigned long long t0 = xs_globaltimer();
    while (tp_acquire(p) < want) {
        if (tp_failed(a))
            return 2;
        if (xs_globaltimer() - t0 > a.timeout_ns) {
            xs_devfail(a.status, XS_DEVERR_TIMEOUT, detail);
            return 1;
        }
        __nanosleep(64);
    }
    return 0;
}

/* ---- device: streamed stores ---------------------------------------------------------------- */

/* A transfer whose stores are streamed through a tile's main loop (TP_T_DEFER, TP_T_SPREAD):
 * `rows` rows of at most 32 16-byte units (`cpr` per row; a flat range is cut into rows of 32,
 * the last one short: `units` in all), unit (r, c) at src + r * src_ld + 16 c and the same at
 * dst. A row is one warp's worth of stores, so the stream needs no division and no divergence.
 * Its flags are queued (tp_pend) once every unit is stored. */
typedef struct __align__(16) {
    const char *src;
    char *dst;
    long long src_ld, dst_ld;
    int cpr, units, rows;
    int nflags;
    uint64_t *flag; /* the first of nflags consecutive flags */
    uint64_t *shadow; /* their shadows (tp_push_shadow), or NULL */
    int urgent; /* all-gather chunk flags (tp_pend) */
} tp_xfer;

/* The CTA's transfers in flight (shared memory; written by thread 0 between barriers, read by
 * every thread): at most the previous tile's deferred output and this task's riding push. Rows
 * are numbered over both: x[0]'s first, then x[1]'s. */
#define TP_NXF 2
typedef struct {
    tp_xfer x[TP_NXF];
    int n, total, rows; /* transfers, units and rows over all of them */
} tp_xfers;

/* A transfer of `rows` rows of cpr (<= 32) units, or (cpr = 0) a flat range of `units` units
 * (src_ld, dst_ld ignored) cut into rows of 32. */
XS_DEV void tp_xfer_add(tp_xfers *xf, const char *src, long long src_ld, char *dst,
                        long long dst_ld, int cpr, int rows, int units, uint64_t *flag,
                        int nflags, uint64_t *shadow, int urgent)
{
    tp_xfer *x = &xf->x[xf->n++];
    if (cpr == 0) {
        cpr = 32, rows = (units + 31) / 32, src_ld = dst_ld = 32 * 16;
    } else {
        units = cpr * rows;
    }
    x->src = src, x->dst = dst, x->src_ld = src_ld, x->dst_ld = dst_ld;
    x->cpr = cpr, x->units = units, x->rows = rows, x->flag = flag, x->nflags = nflags;
    x->shadow = shadow, x->urgent = urgent;
    xf->total += units;
    xf->rows += rows;
}

/* Unit c of row g (numbered over the CTA's transfers, g < xf.rows; r0 = xf.x[0].rows): false
 * when the row has no such unit (c >= cpr, or past the end of a flat range). */
XS_DEV bool tp_xfer_at(const tp_xfers &xf, int r0, int g, int c, const char **src, char **dst)
{
    const tp_xfer *x = &xf.x[0];
    if (g >= r0) {
        g -= r0;
        x = &xf.x[1];
    }
    if (c >= x->cpr || g * x->cpr + c >= x->units)
        return false;
    *src = x->src + g * x->src_ld + 16 * c;
    *dst = x->dst + g * x->dst_ld + 16 * c;
    return true;
}

/* Store rows [g0, rows) of the CTA's transfers at once (every thread; four loads in flight per
 * thread). The caller puts a barrier after it before the flags are queued. */
XS_DEV void tp_xfer_flush(const tp_xfers &xf, int g0, int nthreads)
{
    const int end = xf.rows * 32;
    for (int i = g0 * 32 + (int)threadIdx.x; i < end; i += 4 * nthreads) {
        uint4 v[4];
        char *d[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int j = i + k * nthreads;
            const char *sp;
            d[k] = NULL;
            if (j < end && tp_xfer_at(xf, xf.x[0].rows, j >> 5, j & 31, &sp, &d[k]))
                v[k] = __ldcg((const uint4 *)sp);
            else
                d[k] = NULL;
        }
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (d[k])
                xs_st16v(d[k], v[k]);
    }
}

/* Thread 0, after a barrier that follows every unit's store: queue the flags, empty the list. */
XS_DEV void tp_xfer_retire(tp_xfers *xf, tp_pend *pd, unsigned long long epoch)
{
    for (int i = 0; i < xf->n; i++)
        for (int k = 0; k < xf->x[i].nflags; k++)
            tp_pend_add(pd, xf->x[i].flag + k, epoch,
                        xf->x[i].shadow ? xf->x[i].shadow + k : NULL, xf->x[i].urgent);
    xf->n = 0;
    xf->total = 0;
    xf->rows = 0;
}

/* The CTA's transfers streamed through a tile's main loop: a main-loop hook of the engine
 * (xs_gemm_mainloop_hooked, cuda/gemm.cuh). At k-tile kt, warp w < rpi loads row
 * kt * rpi + w (one 16-byte unit per lane, from L2) and stores it one k-tile later, so the
 * load's latency hides behind a k-tile of MMAs and each k-tile issues at most one store per
 * thread. rpi spreads the rows over all but the last two k-tiles (what a short loop cannot take
 * is stored after it, in end()). Whole warps stream (no divergence). Each streaming warp walks
 * its rows with lane pointers advanced by rpi rows per k-tile: a step is a store, a load and
 * four additions, with no shared-memory read or multiplication; the transfer list is read
 * (seek) only when a warp enters a transfer, at most twice per tile. Run 5 measured the
 * previous step (row address rebuilt from the list in shared memory every k-tile, a chain of
 * dependent shared loads and 64-bit multiplies before the first MMA) at 8-10 % of each streamed
 * tile's GEMM time. The engine's closing barrier then orders every streamed store before the
 * caller queues the flags. */
template <class C>
struct tp_stream {
    static_assert(C::BN / 8 <= 32, "a tile row is at most one warp of 16-byte units");
    const tp_xfers &xf;
    const char *sp; /* this lane's unit of the warp's next row: source, destination */
    char *dp;
    int ss, ds;     /* bytes to the warp's row after next: rpi rows of the current transfer */
    int g, gend;    /* the warp's next row (over all transfers); end of the current transfer */
    int ul, us;     /* units of the transfer from the next row's start, minus lane; per step */
    int rpi;        /* rows per k-tile */
    uint4 sv;
    char *sd; /* destination of the unit held in sv */

    __device__ __forceinline__ tp_stream(const tp_xfers &x) : xf(x), sd(NULL)
    {
        sv = make_uint4(0, 0, 0, 0);
    }
    /* point the lane at row g (the warp's next); past the last row: inactive (gend = 0) */
    __device__ __forceinline__ void seek()
    {
        const int r0 = xf.x[0].rows;
        if (g >= xf.rows) {
            gend = 0;
            return;
        }
        const tp_xfer *x = g < r0 ? &xf.x[0] : &xf.x[1];
        const int gl = g < r0 ? g : g - r0, lane = (int)(threadIdx.x & 31);
        gend = g < r0 ? r0 : xf.rows;
        sp = x->src + (long long)gl * x->src_ld + 16 * lane;
        dp = x->dst + (long long)gl * x->dst_ld + 16 * lane;
        ss = (int)(rpi * x->src_ld); /* at most 8 rows of a window row (<= 213 KB) */
        ds = (int)(rpi * x->dst_ld);
        ul = lane < x->cpr ? x->units - gl * x->cpr - lane : 0; /* unit valid while ul > 0 */
        us = rpi * x->cpr;
    }
    __device__ __forceinline__ void begin(int KT)
    {
        const int rows = xf.rows;
        rpi = KT > 2 ? (rows + KT - 3) / (KT - 2) : rows;
        if (rpi > C::THREADS / 32)
            rpi = C::THREADS / 32;
        g = (int)(threadIdx.x >> 5);
        gend = 0;
        if (g < rpi) /* warp-uniform */
            seek();
    }
    __device__ __forceinline__ void step(int)
    {
        if (sd) { /* the unit loaded one k-tile ago */
            xs_st16v(sd, sv);
            sd = NULL;
        }
        if (g < gend) { /* warp-uniform */
            if (ul > 0) {
                sv = __ldcg((const uint4 *)sp);
                sd = dp;
            }
            sp += ss, dp += ds, ul -= us, g += rpi;
            if (g >= gend) /* uniform, at most twice per tile */
                seek();
        }
    }
    __device__ __forceinline__ void end(int KT)
    {
        if (sd)
            xs_st16v(sd, sv);
        if (KT * rpi < xf.rows) /* uniform: a loop too short for the stream */
            tp_xfer_flush(xf, KT * rpi, C::THREADS);
    }
};

/* The chunks [*c0, *c1] of shard *s that GEMM 0 tile row tm spans (all-gathered A). */
XS_DEV void tp_chunk_range(const tp_args &a, int tm, int *s, int *c0, int *c1)
{
    const int m0 = tm * XS_TP_BM;
    *s = m0 / a.shard_rows; /* shard_rows is a multiple of BM: one shard per tile */
    const unsigned long long row_bytes = (unsigned long long)a.ag_k * 2;
    const unsigned long long lo = (unsigned long long)(m0 - *s * a.shard_rows) * row_bytes;
    unsigned long long hi = lo + XS_TP_BM * row_bytes;
    if (hi > a.shard_bytes)
        hi = a.shard_bytes;
    *c0 = (int)(lo / XS_TP_CHUNK);
    *c1 = (int)((hi - 1) / XS_TP_CHUNK);
}

/* Warp 0 (every lane): whether every chunk flag of shard s, chunks c0..c1, holds the epoch - one
 * poll, the lanes' loads in parallel (a 405B row block spans 64 chunks; with virtual peers the
 * flags are in host memory). *bad = the first chunk that does not, or INT_MAX. */
XS_DEV bool tp_chunks_ready_warp(const tp_args &a, const xs_wintab &tab, int s, int c0, int c1,
                                 int *bad)
{
    int first = INT_MAX;
    for (int c = c0 + (int)(threadIdx.x & 31); c <= c1; c += 32)
        if (xs_ld_acquire_sys(tp_chunk_flag(a, tab, s, c)) < a.epoch) {
            first = c;
            break;
        }
    *bad = __reduce_min_sync(0xffffffffu, first);
    return *bad == INT_MAX;
}

/* Warp 0 (every lane; the result is the same in every lane): wait, bounded, for the inputs of
 * tile (g, tm) - the shard's chunks (all-gathered A) or GEMM 1's row block. 0: there; 1: timed
 * out (recorded); 2: another CTA failed first. Lane 0 raises the CTA's pending flags before it
 * blocks. */
XS_DEV int tp_tile_wait_warp(const tp_args &a, const xs_wintab &tab, tp_pend *pd, int g, int tm,
                             int task)
{
    const bool lane0 = (threadIdx.x & 31) == 0;
    if (g == 0 && a.ag) {
        int s, c0, c1, bad;
        tp_chunk_range(a, tm, &s, &c0, &c1);
        if (s != a.me && !tp_chunks_ready_warp(a, tab, s, c0, c1, &bad)) {
            if (lane0)
                tp_release(pd, a.epoch);
            const unsigned long long t0 = xs_globaltimer();
            while (!tp_chunks_ready_warp(a, tab, s, c0, c1, &bad)) {
                int w = 0;
                if (lane0) {
                    if (tp_failed(a)) {
                        w = 2;
                    } else if (xs_globaltimer() - t0 > a.timeout_ns) {
                        const int f = s * a.ag_chunks + bad;
                        xs_devfail(a.status, XS_DEVERR_TIMEOUT, TP_DETAIL(1, f, task));
                        w = 1;
                    }
                }
                w = __shfl_sync(0xffffffffu, w, 0);
                if (w)
                    return w;
                __nanosleep(64);
            }
        }
    }
    int w = 0;
    if (lane0 && g == 1 && a.rb_count)
        w = tp_wait_geq(a, pd, a.rb_count + tm, (unsigned)a.n0_per_rb, TP_DETAIL(2, tm, task));
    return __shfl_sync(0xffffffffu, w, 0);
}

/* ---- device: the three kinds of work --------------------------------------------------------- */

/* Warp 0 (every lane; same result in every lane): whether the inputs of task (w0, w1) are all
 * there now (one poll, no wait). A CTA that holds streamed transfers stores them before it
 * blocks (see the kernel). */
XS_DEV bool tp_deps_ready_warp(const tp_args &a, const xs_wintab &tab, int4 w0, int4 w1)
{
    const int lane = threadIdx.x & 31;
    if (w0.x & TP_T_TILE) {
        const int g = w0.y;
        if (g == 0 && a.ag) {
            int s, c0, c1, bad;
            tp_chunk_range(a, w0.z, &s, &c0, &c1);
            if (s != a.me && !tp_chunks_ready_warp(a, tab, s, c0, c1, &bad))
                return false;
        }
        if (g == 1 && a.rb_count) {
            int ok = 0;
            if (lane == 0)
                ok = tp_ld_acquire_gpu_u32(a.rb_count + w0.z) >= (unsigned)a.n0_per_rb;
            if (!__shfl_sync(0xffffffffu, ok, 0))
                return false;
        }
    }
    if (w0.x & TP_T_REDUCE) {
        bool ok = true;
        for (int src = lane; src < a.P; src += 32)
            ok &= xs_ld_acquire_sys(tab.flags[a.me] + a.rs_flag0 + src * a.t_own + w1.z) >= a.epoch;
        if (!__all_sync(0xffffffffu, ok))
            return false;
    }
    return true;
}

/* Tile (tr, tn) of this rank's slot at `owner` (tr: the row block within the owner's rows): the
 * address of its first element; *pitch = bytes between its rows (xs_tp_slot_tile). */
XS_DEV char *tp_slot_tile_at(const tp_args &a, const xs_wintab &tab, int owner, int tr, int tn,
                             long long *pitch)
{
    int pe;
    const size_t e = xs_tp_slot_tile((xs_tp_layout)a.slots, a.rs_n, tr, tn, &pe);
    *pitch = (long long)pe * 2;
    return tab.data[owner] + a.rs_off + ((size_t)a.me * a.rs_rows * (size_t)a.rs_n + e) * 2;
}

/* One tile of GEMM g to its destination rows, streaming the CTA's transfers (xf) through its
 * main loop. defer: a remote owner's tile is staged in the CTA's scratch and becomes a transfer
 * itself (streamed through the CTA's next tile). Starts after a barrier, ends with one. */
template <class C>
XS_DEV void tp_tile(const tp_args &a, const xs_wintab &tab, char *smem, tp_pend *pd, tp_xfers *xf,
                    int g, int tm, int tn, bool defer)
{
    const xs_gemm_problem &p = a.g[g];
    const int tid = threadIdx.x;
    const int m0 = tm * C::BM, n0 = tn * C::BN;
    const bool rs = g == a.rs_gemm;
    const bool sw = g == 0 && a.swiglu0;
    const int owner = rs ? m0 / a.rs_rows : 0; /* rs_rows is a multiple of BM */
    defer = defer && rs && owner != a.me;
    char *const scratch = a.scratch + (size_t)blockIdx.x * TP_SCRATCH_BYTES;
    char **dst = xs_gemm_dst_rows<C>(smem);
    if (tid < C::BM) {
        const int r = m0 + tid;
        char *d = NULL;
        if (r < p.m) {
            if (defer) {
                d = scratch + (size_t)tid * (C::BN * 2); /* dense rows of BN */
            } else if (rs) {
                long long pitch;
                d = tp_slot_tile_at(a, tab, owner, (m0 - owner * a.rs_rows) / C::BM, tn, &pitch);
                d += (size_t)tid * pitch;
            } else {
                d = (char *)(a.out0 + (size_t)r * (size_t)a.ldo0 + (sw ? n0 / 2 : n0));
            }
        }
        dst[tid] = d;
    }
    float acc[C::MT][C::NT][4];
    /* both end with a barrier: dst rows visible, every streamed unit stored (scratch free) */
    if (xf->total) {
        tp_stream<C> stream(*xf);
        xs_gemm_mainloop_hooked<C>(p, m0, n0, smem, acc, stream);
    } else {
        xs_gemm_mainloop<C>(p, m0, n0, smem, acc);
    }
    /* a release point for urgent flags (all of them with a.eager_flags): the previous tasks'
     * stores precede this main loop's barriers; then the flags of the transfers just streamed
     * are queued for the next one */
    if (tid == 0) {
        if (pd->urgent || (pd->n && a.eager_flags))
            tp_release(pd, a.epoch);
        if (xf->n)
            tp_xfer_retire(xf, pd, a.epoch);
    }
    const int nvalid = p.n - n0 < C::BN ? p.n - n0 : C::BN;
    if (sw) {
        xs_gemm_stage_swiglu<C>(smem, acc, NULL);
        __syncthreads();
        xs_gemm_store_rows<C, C::BN / 2>(smem, dst, p.m - m0, nvalid / 2);
    } else {
        xs_gemm_stage_acc<C>(smem, acc, NULL);
        __syncthreads();
        xs_gemm_store_rows<C, C::BN>(smem, dst, p.m - m0, nvalid);
    }
    __syncthreads(); /* every row stored: staging tile and dst rows free */
    if (tid == 0) {
        if (rs) {
            /* the per-tile signal in the owner's window (raised at the next release point) */
            const int t_loc = ((m0 - owner * a.rs_rows) / C::BM) * a.rs_tiles_n + tn;
            const bool skip = a.fault == XS_TP_FAULT_RS_SIGNAL && owner == a.me && t_loc == 0;
            uint64_t *flag = tab.flags[owner] + a.rs_flag0 + (size_t)a.me * a.t_own + t_loc;
            if (defer) {
                /* staged: its stores and then its signal follow the CTA's next tile */
                const int rows = p.m - m0 < C::BM ? p.m - m0 : C::BM;
                long long pitch;
                char *d0 = tp_slot_tile_at(a, tab, owner, (m0 - owner * a.rs_rows) / C::BM, tn,
                                           &pitch);
                tp_xfer_add(xf, scratch, C::BN * 2, d0, pitch, nvalid / 8, rows, 0, flag, 1, NULL,
                            0);
            } else if (!skip) {
                tp_pend_add(pd, flag, a.epoch, NULL, 0);
            }
        } else if (g == 0 && a.rb_count &&
                   !(a.fault == XS_TP_FAULT_H_COUNT && tm == 0 && tn == 0)) {
            /* h rows of this tile complete (GPU scope: the consumers are on this GPU) */
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(a.rb_count + tm)
                         : "memory");
        }
    }
}

/* Bytes of chunks [c, c + n) of a shard (the last chunk may be short). */
XS_DEV unsigned long long tp_push_bytes(const tp_args &a, int c, int n)
{
    const unsigned long long nb = a.shard_bytes - (unsigned long long)c * XS_TP_CHUNK;
    const unsigned long long want = (unsigned long long)n * XS_TP_CHUNK;
    return nb < want ? nb : want;
}

/* The copy of chunks [c, c + n) of this rank's shard (own window) to rank r's gathered buffer,
 * by THREADS threads (tid 0 .. THREADS - 1); the callers then raise the chunks' flags. */
template <int THREADS>
XS_DEV void tp_push_copy(const tp_args &a, const xs_wintab &tab, int r, int c, int n, int tid)
{
    const unsigned long long off =
        (unsigned long long)a.me * a.shard_bytes + (unsigned long long)c * XS_TP_CHUNK;
    const unsigned long long nb = tp_push_bytes(a, c, n);
    const uint4 *src = (const uint4 *)(tab.data[a.me] + off);
    char *dst = tab.data[r] + off;
    const int n16 = (int)(nb / 16);
    for (int j = tid; j < n16; j += 4 * THREADS) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int x = j + u * THREADS;
            v[u] = x < n16 ? __ldg(src + x) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int x = j + u * THREADS;
            if (x < n16)
                xs_st16v(dst + 16 * (size_t)x, v[u]);
        }
    }
}

/* Chunks [c, c + n) of this rank's shard (own window) to rank r's gathered buffer, then their
 * flags. */
template <class C>
XS_DEV void tp_push(const tp_args &a, const xs_wintab &tab, tp_pend *pd, int r, int c, int n)
{
    tp_push_copy<C::THREADS>(a, tab, r, c, n, (int)threadIdx.x);
    __syncthreads(); /* every thread's stores precede the flags */
    if (threadIdx.x == 0)
        for (int k = 0; k < n; k++)
            tp_pend_add(pd, tab.flags[r] + (size_t)a.me * a.ag_chunks + c + k, a.epoch,
                        tp_push_shadow(a, r, c + k));
}

XS_DEV int tp_reduce_wait(const tp_args &a, const xs_wintab &tab, tp_pend *pd, int t, int task)
{
    for (int s = 0; s < a.P; s++) {
        const int f = a.rs_flag0 + s * a.t_own + t;
        const int w = tp_wait_geq(a, pd, tab.flags[a.me] + f, (uint64_t)a.epoch,
                                  TP_DETAIL(3, f, task));
        if (w)
            return w;
    }
    return 0;
}

XS_DEV void tp_acc8(float *s, uint4 v)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        __nv_bfloat162 b;
        memcpy(&b, &w[i], 4);
        const float2 f = __bfloat1622float2(b);
        s[2 * i] += f.x;
        s[2 * i + 1] += f.y;
    }
}

/* Own tile t: y = sum over sources of their partials (fp32, source order), bf16. */
template <class C>
XS_DEV void tp_reduce(const tp_args &a, const xs_wintab &tab, int t)
{
    const int trow = t / a.rs_tiles_n, tn = t % a.rs_tiles_n;
    const int row0 = trow * C::BM, col0 = tn * C::BN;
    const int ncols = a.rs_n - col0 < C::BN ? a.rs_n - col0 : C::BN;
    const int cpr = ncols / 8; /* rs_n is a multiple of 8 */
    int pitch;                 /* elements between the tile's rows in a slot */
    const char *base = tab.data[a.me] + a.rs_off +
                       xs_tp_slot_tile((xs_tp_layout)a.slots, a.rs_n, trow, tn, &pitch) * 2;
    const size_t slot = (size_t)a.rs_rows * a.rs_n * 2;
    for (int j = threadIdx.x; j < C::BM * cpr; j += C::THREADS) {
        const int ri = j / cpr, ci = (j % cpr) * 8;
        const int row = row0 + ri, col = col0 + ci;
        const char *at = base + ((size_t)ri * pitch + ci) * 2;
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int src = 0; src < a.P; src++)
            tp_acc8(s, __ldcg((const uint4 *)(at + (size_t)src * slot)));
        uint4 o;
        o.x = xs_pack_bf16(s[0], s[1]);
        o.y = xs_pack_bf16(s[2], s[3]);
        o.z = xs_pack_bf16(s[4], s[5]);
        o.w = xs_pack_bf16(s[6], s[7]);
        *(uint4 *)(a.y + (size_t)row * a.rs_n + col) = o;
    }
}

/* ---- the kernel ---------------------------------------------------------------------------- */

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
    tp_kernel(const __grid_constant__ tp_args a, const __grid_constant__ xs_wintab tab)
{
    extern __shared__ __align__(128) char tp_smem[];
    __shared__ int s_abort, s_flush;
    __shared__ tp_pend s_pend; /* used by thread 0 only */
    __shared__ tp_xfers s_xf;  /* written by thread 0 between barriers, read by every thread */
    const int tid = threadIdx.x;
    const unsigned long long t_start = xs_globaltimer();
    unsigned long long lsum = 0; /* thread 0: hash of the tasks read */
    if (tid == 0) {
        s_abort = 0;
        s_pend.n = 0;
        s_pend.skip = a.skip_flag;
        s_xf.n = 0;
        s_xf.total = 0;
        s_xf.rows = 0;
    }
    __syncthreads();
    for (int i = blockIdx.x; i < a.ntasks; i += gridDim.x) {
        int4 w0, w1;
        tp_task_read(a, i, &w0, &w1);
        const int kind = w0.x;
        if (tid == 0)
            lsum += tp_task_hash4(i, w0, w1);
        const bool tile = kind & TP_T_TILE;
        const bool spread = tile && (kind & TP_T_SPREAD) && (kind & TP_T_PUSH);
        const int push_n = w1.w > 1 ? w1.w : 1; /* chunks of a push task */
        if (kind & (TP_T_TILE | TP_T_REDUCE)) {
            /* a CTA never blocks holding streamed transfers: if this task's inputs are not all
             * there yet, store them now (others may wait for them), then wait */
            if (tid < 32) {
                const bool flush = s_xf.total > 0 && !tp_deps_ready_warp(a, tab, w0, w1);
                if (tid == 0)
                    s_flush = flush;
            }
            __syncthreads();
            if (s_flush) {
                tp_xfer_flush(s_xf, 0, C::THREADS);
                __syncthreads();
                if (tid == 0)
                    tp_xfer_retire(&s_xf, &s_pend, a.epoch);
            }
        }
        if (tile) {
            int w = 0;
            if (tid < 32) /* warp 0 polls the chunk flags in parallel */
                w = tp_tile_wait_warp(a, tab, &s_pend, w0.y, w0.z, i);
            if (tid == 0) {
                if (w) {
                    s_abort = 1;
                } else if (spread) {
                    /* the riding push streams through this tile's main loop */
                    const unsigned long long off = (unsigned long long)a.me * a.shard_bytes +
                                                   (unsigned long long)w1.y * XS_TP_CHUNK;
                    const unsigned long long nb = tp_push_bytes(a, w1.y, push_n);
                    tp_xfer_add(&s_xf, tab.data[a.me] + off, 0, tab.data[w1.x] + off, 0, 0, 0,
                                (int)(nb / 16),
                                tab.flags[w1.x] + (size_t)a.me * a.ag_chunks + w1.y, push_n,
                                tp_push_shadow(a, w1.x, w1.y), 1);
                }
            }
            __syncthreads();
            if (s_abort)
                break;
            tp_tile<C>(a, tab, tp_smem, &s_pend, &s_xf, w0.y, w0.z, w0.w,
                       (kind & TP_T_DEFER) != 0);
        }
        if ((kind & TP_T_PUSH) && !spread)
            tp_push<C>(a, tab, &s_pend, w1.x, w1.y, push_n);
        if (kind & TP_T_REDUCE) {
            if (tid == 0) {
                /* a release point: others' reductions may wait on them. The count is read
                 * through volatile inside thread 0's branch: as `tid == 0 && s_pend.n` the
                 * compiler loaded it in every thread, racing with thread 0's reset in
                 * tp_release (racecheck, run 5; the other threads never used the value). */
                if (*(volatile int *)&s_pend.n)
                    tp_release(&s_pend, a.epoch);
                if (tp_reduce_wait(a, tab, &s_pend, w1.z, i))
                    s_abort = 1;
            }
            __syncthreads();
            if (s_abort)
                break;
            tp_reduce<C>(a, tab, w1.z);
        }
        if (tid == 0 && a.task_ns)
            a.task_ns[i] = xs_globaltimer();
        /* s_abort is read by every thread after a barrier and written by thread 0 only before
         * the next one: this barrier keeps a fast thread 0 from raising it while a slow thread
         * still reads the previous value */
        __syncthreads();
    }
    __syncthreads();
    /* transfers still held (the CTA's last tile was deferred): store them now */
    if (s_xf.total) {
        tp_xfer_flush(s_xf, 0, C::THREADS);
        __syncthreads();
    }
    if (tid == 0) {
        /* the last release point: every store of the CTA precedes the barriers above */
        const unsigned long long t_end = xs_globaltimer(); /* sender-visible: before the fence */
        if (s_xf.n) /* (written only when flushed above, after its barrier) */
            tp_xfer_retire(&s_xf, &s_pend, a.epoch);
        tp_release(&s_pend, a.epoch);
        if (a.cta_ns) {
            a.cta_ns[2 * blockIdx.x] = t_start;
            a.cta_ns[2 * blockIdx.x + 1] = t_end;
        }
        if (a.list_sum && !s_abort)
            atomicAdd(a.list_sum, lsum);
    }
}

/* the same task kernel on the Hopper tile engine (xs_tp_set_engine) */
#include "tp_sm90.cuh"

/* ---- helper kernels ------------------------------------------------------------------------- */

/* Uniform values in [-scale, scale) from (seed, index): never all zeros, never constant. */
__global__ void tp_fill_kernel(xs_bf16 *x, size_t n, uint32_t seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = xs_mix32((uint32_t)i * 0x9e3779b1u ^ xs_mix32(seed ^ (uint32_t)(i >> 32)));
        float u = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
        x[i] = __float2bfloat16(u * scale);
    }
}

/* Fill n16 16-byte units with a repeated word (device or mapped host memory). */
__global__ void tp_word_kernel(uint4 *p, size_t n16, uint32_t w)
{
    const uint4 v = make_uint4(w, w, w, w);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

__global__ void tp_flags_kernel(uint64_t *f, int n, unsigned long long v)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        f[i] = v;
}

/* The offset (elements) in a slot of layout l of 16-byte unit u of the row-major [rows, n]. */
static __device__ __forceinline__ size_t tp_unit_at(int l, int n, size_t u)
{
    const size_t e = u * 8;
    if (l == XS_TP_LAYOUT_ROW)
        return e;
    return xs_tp_slot_index((xs_tp_layout)l, n, (int)(e / (size_t)n), (int)(e % (size_t)n));
}

/* Copy nslots slots [rows, n] between layouts: dst (layout dl) = src (layout sl), slot by slot
 * (slots rows * n elements apart in both; n a multiple of 8). */
__global__ void tp_slot_copy_kernel(xs_bf16 *dst, int dl, const xs_bf16 *src, int sl, int rows,
                                    int n, int nslots)
{
    const size_t per = (size_t)rows * n / 8, total = per * (size_t)nslots;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t q = i / per, u = i % per, o = q * per * 8;
        const uint4 v = *(const uint4 *)(src + o + tp_unit_at(sl, n, u));
        *(uint4 *)(dst + o + tp_unit_at(dl, n, u)) = v;
    }
}

/* Copy n whole tiles (own-tile indices tiles[], tiles_n per row block) of the row-major
 * [rows, rs_n] src into dst: one block per tile row. */
__global__ void tp_copy_tiles_kernel(xs_bf16 *dst, const xs_bf16 *src, int rs_n, int tiles_n,
                                     const int *tiles)
{
    const int t = tiles[blockIdx.x / XS_TP_BM];
    const size_t row = (size_t)(t / tiles_n) * XS_TP_BM + blockIdx.x % XS_TP_BM;
    const int c0 = (t % tiles_n) * XS_TP_BN;
    const int cols = rs_n - c0 < XS_TP_BN ? rs_n - c0 : XS_TP_BN;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        dst[row * rs_n + c0 + c] = src[row * rs_n + c0 + c];
}

/* Count 16-byte units of a slot (layout l) that differ from the row-major rows [rows, n]. */
__global__ void tp_cmp_slot_kernel(const xs_bf16 *slot, int l, const xs_bf16 *rows_, int rows,
                                   int n, unsigned long long *bad)
{
    unsigned long long mine = 0;
    const size_t n16 = (size_t)rows * n / 8;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint4 x = __ldcg((const uint4 *)(slot + tp_unit_at(l, n, i)));
        const uint4 y = __ldcg((const uint4 *)rows_ + i);
        mine += x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w;
    }
    if (mine)
        atomicAdd(bad, mine);
}

/* Count 16-byte units of a and b that differ. */
__global__ void tp_cmp_kernel(const uint4 *a, const uint4 *b, size_t n16, unsigned long long *bad)
{
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 x = __ldcg(a + i), y = __ldcg(b + i);
        mine += (x.x != y.x) | (x.y != y.y) | (x.z != y.z) | (x.w != y.w);
    }
    for (int o = 16; o > 0; o >>= 1)
        mine += __shfl_xor_sync(0xffffffffu, mine, o);
    if ((threadIdx.x & 31) == 0 && mine)
        atomicAdd(bad, mine);
}

/* Per row r: err2[r] = sum (got - ref)^2, ref2[r] = sum ref^2 over finite values; non-finite
 * values of got are counted. One block (256 threads) per row, grid-stride over rows. */
__global__ void tp_err_kernel(const xs_bf16 *got, long long ldg, const float *ref, long long ldr,
                              int rows, int cols, double *err2, double *ref2,
                              unsigned long long *nonfinite)
{
    __shared__ double se[8], sr[8];
    __shared__ unsigned long long sn[8];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        double e = 0, q = 0;
        unsigned long long nf = 0;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            const double g = __bfloat162float(got[(size_t)r * ldg + c]);
            const double w = ref[(size_t)r * ldr + c];
            if (!isfinite(g)) {
                nf++;
                continue;
            }
            e += (g - w) * (g - w);
            q += w * w;
        }
        for (int o = 16; o > 0; o >>= 1) {
            e += __shfl_xor_sync(0xffffffffu, e, o);
            q += __shfl_xor_sync(0xffffffffu, q, o);
            nf += __shfl_xor_sync(0xffffffffu, nf, o);
        }
        const int w = threadIdx.x >> 5;
        if ((threadIdx.x & 31) == 0)
            se[w] = e, sr[w] = q, sn[w] = nf;
        __syncthreads();
        if (threadIdx.x == 0) {
            double te = 0, tq = 0;
            unsigned long long tn = 0;
            for (int i = 0; i < (int)(blockDim.x >> 5); i++)
                te += se[i], tq += sr[i], tn += sn[i];
            err2[r] = te;
            ref2[r] = tq;
            if (tn)
                atomicAdd(nonfinite, tn);
        }
        __syncthreads();
    }
}

/* ref_y = ref_own (fp32 [rows, n], ld n) + the other sources' partials (bf16 slots, layout l). */
__global__ void tp_ref_y_kernel(const float *ref_own, const xs_bf16 *slots, int l, int P, int me,
                                int rows, int n, float *ref_y)
{
    const size_t total = (size_t)rows * n, slot = (size_t)rows * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t j = l == XS_TP_LAYOUT_ROW
                             ? i
                             : xs_tp_slot_index((xs_tp_layout)l, n, (int)(i / n), (int)(i % n));
        float s = ref_own[i];
        for (int q = 0; q < P; q++)
            if (q != me)
                s += __bfloat162float(slots[(size_t)q * slot + j]);
        ref_y[i] = s;
    }
}

/* SwiGLU of an interleaved Linear-1 output [m, n_phys] into h [m, n_phys/2] (bf16). */
template <typename T>
__global__ void tp_swiglu_kernel(const T *y, xs_bf16 *h, float *h32, int m, int n_phys)
{
    const int hn = n_phys / 2;
    const size_t total = (size_t)m * hn;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / hn), j = (int)(i % hn);
        const int pg = 32 * (j / 16) + (j % 16);
        const float g = (float)y[(size_t)r * n_phys + pg], u = (float)y[(size_t)r * n_phys + pg + 16];
        const float v = g / (1.0f + expf(-g)) * u;
        h[i] = __float2bfloat16(v);
        if (h32)
            h32[i] = v;
    }
}

/* y [rows, n] = sum over sources q of slot q (layout l; own partial from `own`, row-major),
 * fp32, bf16 out. */
__global__ void tp_sum_kernel(const xs_bf16 *slots, int l, const xs_bf16 *own, int P, int me,
                              int rows, int n, xs_bf16 *y)
{
    const size_t n8 = (size_t)rows * n / 8, slot = (size_t)rows * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8;
         i += (size_t)gridDim.x * blockDim.x) {
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        const size_t at = tp_unit_at(l, n, i);
        for (int q = 0; q < P; q++) {
            if (q == me)
                tp_acc8(s, __ldcg((const uint4 *)own + i));
            else
                tp_acc8(s, __ldcg((const uint4 *)(slots + (size_t)q * slot + at)));
        }
        uint4 o;
        o.x = xs_pack_bf16(s[0], s[1]);
        o.y = xs_pack_bf16(s[2], s[3]);
        o.z = xs_pack_bf16(s[4], s[5]);
        o.w = xs_pack_bf16(s[6], s[7]);
        ((uint4 *)y)[i] = o;
    }
}

/* ---- ops and shapes --------------------------------------------------------------------------- */

static const char *const tp_op_names[XS_TP_NOPS] = {"gemm_rs", "ag_gemm", "mlp"};

extern "C" const char *xs_tp_op_name(xs_tp_op op)
{
    return (unsigned)op < XS_TP_NOPS ? tp_op_names[op] : "?";
}

extern "C" xs_status xs_tp_op_parse(const char *s, xs_tp_op *op)
{
    for (int i = 0; i < XS_TP_NOPS; i++)
        if (s && !strcmp(s, tp_op_names[i])) {
            *op = (xs_tp_op)i;
            return XS_OK;
        }
    return xs_seterr(XS_EINVAL, "unknown tp operation '%s' (gemm_rs, ag_gemm or mlp)",
                     s ? s : "");
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

extern "C" xs_status xs_tp_info_of(const xs_tp_shape *s, xs_tp_info *in)
{
    memset(in, 0, sizeof *in);
    if (!s)
        return xs_seterr(XS_EINVAL, "tp: no shape");
    const char *op = xs_tp_op_name(s->op);
    if ((unsigned)s->op >= XS_TP_NOPS)
        return xs_seterr(XS_EINVAL, "tp: operation %d unknown", (int)s->op);
    const int P = s->peers, m = s->m, n = s->n, k = s->k;
    if (P < 1 || P > XS_MAX_RANKS)
        return xs_seterr(XS_EINVAL, "tp %s: peers %d outside 1..%d", op, P, XS_MAX_RANKS);
    if (m < 1 || n < 1 || k < 1 || m > (1 << 24) || n > (1 << 24) || k > (1 << 24))
        return xs_seterr(XS_EINVAL, "tp %s: m=%d n=%d k=%d must be in 1..16M", op, m, n, k);
    if (m % (XS_TP_BM * P))
        return xs_seterr(XS_EINVAL, "tp %s: m=%d is not a multiple of %d x peers %d (every rank "
                         "owns whole 128-row blocks)", op, m, XS_TP_BM, P);
    in->rs_rows = m / P;
    in->tiles_m = m / XS_TP_BM;
    in->rs_gemm = -1;
    switch (s->op) {
    case XS_TP_GEMM_RS:
        if (k % (8 * P))
            return xs_seterr(XS_EINVAL, "tp gemm_rs: k=%d must be a multiple of 8 x peers %d "
                             "(k/P is the GEMM's K, 16-byte loads)", k, P);
        if (n % 8)
            return xs_seterr(XS_EINVAL, "tp gemm_rs: n=%d is not a multiple of 8 (16-byte "
                             "stores and reductions)", n);
        in->ngemm = 1;
        in->gm[0] = m, in->gn[0] = n, in->gk[0] = k / P, in->out_n[0] = n;
        in->rs_gemm = 0;
        in->rs_n = n;
        break;
    case XS_TP_AG_GEMM:
        if (n % (8 * P))
            return xs_seterr(XS_EINVAL, "tp ag_gemm: n=%d must be a multiple of 8 x peers %d "
                             "(n/P output columns, 16-byte stores)", n, P);
        if (k % 8)
            return xs_seterr(XS_EINVAL, "tp ag_gemm: k=%d is not a multiple of 8", k);
        in->ngemm = 1;
        in->gm[0] = m, in->gn[0] = n / P, in->gk[0] = k, in->out_n[0] = n / P;
        in->ag = 1;
        in->ag_k = k;
        break;
    case XS_TP_MLP:
        if (k % (16 * P))
            return xs_seterr(XS_EINVAL, "tp mlp: intermediate k=%d must be a multiple of 16 x "
                             "peers %d (SwiGLU groups of 16 per rank)", k, P);
        if (n % 8)
            return xs_seterr(XS_EINVAL, "tp mlp: hidden n=%d is not a multiple of 8", n);
        in->ngemm = 2;
        in->gm[0] = m, in->gn[0] = 2 * (k / P), in->gk[0] = n, in->out_n[0] = k / P;
        in->swiglu0 = 1;
        in->gm[1] = m, in->gn[1] = n, in->gk[1] = k / P, in->out_n[1] = n;
        in->rs_gemm = 1;
        in->rs_n = n;
        in->ag = 1;
        in->ag_k = n;
        break;
    }
    for (int g = 0; g < in->ngemm; g++) {
        in->tiles_n[g] = (in->gn[g] + XS_TP_BN - 1) / XS_TP_BN;
        in->tiles[g] = in->tiles_m * in->tiles_n[g];
        in->flops += 2.0 * in->gm[g] * (double)in->gn[g] * in->gk[g];
    }
    if (in->ag) {
        in->ag_bytes = (size_t)m * in->ag_k * 2;
        in->shard_bytes = (size_t)in->rs_rows * in->ag_k * 2;
        in->ag_chunks = (int)((in->shard_bytes + XS_TP_CHUNK - 1) / XS_TP_CHUNK);
        in->push_tasks = (P - 1) * in->ag_chunks;
        in->ag_remote_bytes = (double)(P - 1) * in->shard_bytes;
    }
    in->rs_off = align_up(in->ag_bytes, 4096);
    in->window_bytes = in->rs_off;
    in->rs_flag0 = in->ag ? P * in->ag_chunks : 0;
    in->nflags = in->rs_flag0;
    if (in->rs_gemm >= 0) {
        in->slot_bytes = (size_t)in->rs_rows * in->rs_n * 2;
        in->t_own = (in->rs_rows / XS_TP_BM) * in->tiles_n[in->rs_gemm];
        in->reduce_tasks = in->t_own;
        in->window_bytes += (size_t)P * in->slot_bytes;
        in->nflags += P * in->t_own;
        in->rs_remote_bytes = (double)(P - 1) * in->slot_bytes;
    }
    if (in->nflags < 1)
        in->nflags = 1;
    if ((double)in->nflags > 268435455.0)
        return xs_seterr(XS_ERANGE, "tp %s: %d flags per window are too many", op, in->nflags);
    return XS_OK;
}

/* ---- the context ------------------------------------------------------------------------------ */

typedef enum { TP_RUN_NONE = 0, TP_RUN_FUSED, TP_RUN_LOCAL, TP_RUN_UNFUSED } tp_run_kind;

struct xs_tp {
    xs_tp_shape s;
    xs_tp_info in;
    int grid, me, P, device;
    uint32_t seed;
    size_t l2_bytes;
    xs_wintab vt;                  /* the caller's table (virtual peers or peers) */
    xs_wintab lt;                  /* local control: P windows in this GPU's memory */
    char *lmem;                    /* payload of lt, P * lstride bytes */
    uint64_t *lflags;              /* flags of lt, P * nflags */
    size_t lstride;
    void *host[XS_MAX_RANKS];      /* CPU view of vt's host windows (payload) */
    uint64_t *host_flags[XS_MAX_RANKS];
    xs_bf16 *a_rs;                 /* gemm_rs A [m, k/P] */
    xs_bf16 *w[2];                 /* weights */
    xs_bf16 *out0;                 /* GEMM 0 local output [m, out_n[0]] (ag_gemm, mlp) */
    xs_bf16 *y;                    /* [rs_rows, rs_n] */
    unsigned int *rb_count;        /* [tiles_m] */
    xs_devstatus *status;
    unsigned long long *task_ns, *cta_ns;
    size_t task_cap;
    unsigned long long *d_bad, *d_nonfinite;
    double *d_err;                 /* [2 * max rows] */
    size_t err_rows;
    void *flush;
    size_t flush_bytes;
    cudaEvent_t ev0, ev1;
    cudaStream_t vstream;          /* internal work (fills, checks) */
    int plan_only;                 /* xs_tp_plan_create: no GPU memory */
    int virt;                      /* every other rank's window is this process's host memory */
    char *scratch;                 /* [grid][TP_SCRATCH_BYTES] staged remote tiles */
    uint64_t *ag_shadow;           /* [P][ag_chunks] device shadow of this rank's push flags */
    unsigned long long *d_list_sum; /* the kernel's sum of task hashes */
    /* task lists */
    tp_task *h_tasks[XS_TP_SLOTS], *d_tasks[XS_TP_SLOTS];
    int ntasks[XS_TP_SLOTS], d_cap[XS_TP_SLOTS], dirty[XS_TP_SLOTS];
    unsigned long long list_hash[XS_TP_SLOTS]; /* sum of tp_task_hash over the host list */
    unsigned long long epoch_v, epoch_l;
    /* the last run */
    tp_run_kind last;
    int last_slot, last_failed;
    unsigned long long last_epoch;
    /* references (device, fp32) */
    int have_ref;
    float *ref_part;               /* [m, rs_n] */
    float *ref_y;                  /* [rs_rows, rs_n] */
    float *ref_out0;               /* ag_gemm out [m, n/P]; mlp h [m, I/P] (fp32 of the ref h) */
    float *ref_tmp;                /* mlp GEMM1 output [m, 2I/P] */
    xs_bf16 *ref_h;                /* mlp reference h, bf16 */
    /* expectations: the first local run's bytes, checked against the reference */
    int have_exp;
    xs_bf16 *exp_part;             /* device [m, rs_n]: what this rank sends, every owner */
    xs_bf16 *exp_y, *exp_out0;
    xs_bf16 *exp_part_h;           /* host copy of exp_part */
    xs_bf16 *exp_shard_h;          /* host copy of this rank's shard */
    /* unfused */
    xs_bf16 *u_c0, *u_h, *u_c, *u_y;
    xs_bf16 *u_part_h;             /* host snapshot of u_c */
    xs_tp_coll coll;               /* real peers: the collectives (xs_tp_set_coll) */
    int have_coll;
    xs_bf16 *exp_recv;             /* real peers: [P][rs_rows][rs_n] what each source sends here */
    xs_tp_engine engine;           /* the fused kernel's tile engine (xs_tp_set_engine) */
    xs_tp_layout layout;           /* the reduce-scatter slots' (xs_tp_set_slot_layout) */
    /* couriers (xs_tp_set_couriers; docs/TP.md "Couriers (sm90)") */
    int couriers;                  /* courier CTAs of the orders built next */
    int scour[XS_TP_SLOTS];        /* courier CTAs each slot's order was built for */
    int *walk[XS_TP_SLOTS];        /* each slot's pushes (XS_TP_WALK_PUSH), then the list
                                      positions of its remote tiles, increasing */
    int nwalk[XS_TP_SLOTS];
    int npush[XS_TP_SLOTS];        /* push entries at the start of each walk */
    unsigned long long walk_hash[XS_TP_SLOTS]; /* sum of tp_courier_hash over the walk */
    int *d_walk[XS_TP_SLOTS];      /* device copies, uploaded with the list */
    int d_walk_cap[XS_TP_SLOTS];
    char *outbox;                  /* [P - 1][slot_bytes] remote tiles staged for the couriers */
    double cour_pace;              /* bytes/ns all couriers together may issue; 0 = unpaced */
    double cour_rate;              /* bytes/ns one courier copies (the prediction's limit) */
    uint64_t *ready;               /* [2][P - 1][t_own] outbox ready flags: fused, local table */
    float *split;                  /* [TP_SPLIT_SLOTS(grid)][TP_SPLIT_BYTES] split parts */
    uint64_t *split_ready;         /* [2][TP_SPLIT_SLOTS(grid)] their flags: fused, local table */
    int nsplit[XS_TP_SLOTS];       /* split tiles in each slot's order */
    xs_bf16 *split_tmp;            /* [rs_rows, rs_n] verification of split tiles (row-major) */
    int *d_split_tiles;            /* [t_own] own-tile indices of split tiles (verification) */
};

static int tp_blocks(size_t n, int threads)
{
    size_t b = (n + threads - 1) / threads;
    if (b > 4096)
        b = 4096;
    return b < 1 ? 1 : (int)b;
}

static xs_status tp_fill(xs_tp *t, xs_bf16 *x, size_t n, uint32_t seed, float scale)
{
    if (!n)
        return XS_OK;
    tp_fill_kernel<<<tp_blocks(n, 256), 256, 0, t->vstream>>>(x, n, seed, scale);
    XS_CU_LAUNCH();
    return XS_OK;
}

static xs_status tp_word(cudaStream_t s, void *p, size_t bytes, uint32_t w)
{
    if (!bytes)
        return XS_OK;
    if (bytes % 16 || ((uintptr_t)p & 15))
        return xs_seterr(XS_EINVAL, "tp: fill of %zu bytes at %p is not 16-byte aligned", bytes,
                         p);
    tp_word_kernel<<<tp_blocks(bytes / 16, 256), 256, 0, s>>>((uint4 *)p, bytes / 16, w);
    XS_CU_LAUNCH();
    return XS_OK;
}

static xs_status tp_setflags(cudaStream_t s, uint64_t *f, int n, unsigned long long v)
{
    if (n <= 0)
        return XS_OK;
    tp_flags_kernel<<<tp_blocks((size_t)n, 256), 256, 0, s>>>(f, n, v);
    XS_CU_LAUNCH();
    return XS_OK;
}

#define TP_ALLOC(ptr, bytes)                                                                   \
    do {                                                                                       \
        size_t b_ = (bytes);                                                                   \
        if (b_) {                                                                              \
            cudaError_t e_ = cudaMalloc((void **)&(ptr), b_);                                  \
            if (e_ != cudaSuccess) {                                                           \
                cudaGetLastError();                                                            \
                st = xs_seterr(XS_ECUDA, "tp %s m=%d n=%d k=%d P=%d: cudaMalloc of %.1f MB: %s", \
                               xs_tp_op_name(s->op), s->m, s->n, s->k, s->peers, b_ / 1e6,     \
                               cudaGetErrorString(e_));                                        \
                goto fail;                                                                     \
            }                                                                                  \
        }                                                                                      \
    } while (0)

#define TP_TRY(call)                                                                           \
    do {                                                                                       \
        st = (call);                                                                           \
        if (st != XS_OK)                                                                       \
            goto fail;                                                                         \
    } while (0)

#define TP_CUF(call)                                                                           \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            st = xs_seterr(XS_ECUDA, "%s: %s", #call, cudaGetErrorString(e_));                 \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)

/* The CPU address of a device-usable pointer into pinned host memory, or NULL. */
static void *tp_host_view(void *p)
{
    cudaPointerAttributes at;
    memset(&at, 0, sizeof at);
    if (!p || cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (at.type != cudaMemoryTypeHost || !at.hostPointer)
        return NULL;
    return at.hostPointer;
}

extern "C" void xs_tp_destroy(xs_tp *t)
{
    if (!t)
        return;
    if (t->plan_only) {
        for (int i = 0; i < XS_TP_SLOTS; i++) {
            free(t->h_tasks[i]);
            free(t->walk[i]);
        }
        free(t);
        return;
    }
    if (t->vstream)
        cudaStreamSynchronize(t->vstream);
    cudaFree(t->lmem);
    cudaFree(t->lflags);
    cudaFree(t->a_rs);
    cudaFree(t->w[0]);
    cudaFree(t->w[1]);
    cudaFree(t->out0);
    cudaFree(t->y);
    cudaFree(t->rb_count);
    cudaFree(t->status);
    cudaFree(t->task_ns);
    cudaFree(t->cta_ns);
    cudaFree(t->d_bad);
    cudaFree(t->d_nonfinite);
    cudaFree(t->d_err);
    cudaFree(t->flush);
    cudaFree(t->scratch);
    cudaFree(t->ag_shadow);
    cudaFree(t->d_list_sum);
    cudaFree(t->ref_part);
    cudaFree(t->ref_y);
    cudaFree(t->ref_out0);
    cudaFree(t->ref_tmp);
    cudaFree(t->ref_h);
    cudaFree(t->exp_part);
    cudaFree(t->exp_y);
    cudaFree(t->exp_out0);
    cudaFree(t->exp_recv);
    cudaFree(t->u_c0);
    cudaFree(t->u_h);
    cudaFree(t->u_c);
    cudaFree(t->u_y);
    for (int i = 0; i < XS_TP_SLOTS; i++) {
        free(t->h_tasks[i]);
        cudaFree(t->d_tasks[i]);
        free(t->walk[i]);
        cudaFree(t->d_walk[i]);
    }
    cudaFree(t->outbox);
    cudaFree(t->ready);
    cudaFree(t->split);
    cudaFree(t->split_ready);
    cudaFree(t->split_tmp);
    cudaFree(t->d_split_tiles);
    free(t->exp_part_h);
    free(t->exp_shard_h);
    free(t->u_part_h);
    if (t->ev0)
        cudaEventDestroy(t->ev0);
    if (t->ev1)
        cudaEventDestroy(t->ev1);
    if (t->vstream)
        cudaStreamDestroy(t->vstream);
    cudaGetLastError();
    free(t);
}

/* A zeroed context for rank me of shape s (the part xs_tp_create and xs_tp_plan_create share);
 * NULL when out of host memory. */
static xs_tp *tp_new(const xs_tp_shape *s, const xs_tp_info *in, int grid, int me)
{
    xs_tp *t = (xs_tp *)calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->s = *s;
    t->in = *in;
    t->grid = grid;
    t->me = me;
    t->P = s->peers;
    t->cour_rate = XS_TP_COURIER_RATE;
    return t;
}

extern "C" xs_status xs_tp_create(const xs_tp_shape *s, const xs_wintab *tab, int grid,
                                  uint32_t seed, xs_tp **out)
{
    *out = NULL;
    xs_tp_info in;
    XS_TRY(xs_tp_info_of(s, &in));
    const char *op = xs_tp_op_name(s->op);
    if (!tab)
        return xs_seterr(XS_EINVAL, "tp %s: no window table", op);
    if (tab->nranks != s->peers)
        return xs_seterr(XS_EINVAL, "tp %s: the window table has %d ranks, the shape %d peers", op,
                         tab->nranks, s->peers);
    if (tab->rank < 0 || tab->rank >= tab->nranks)
        return xs_seterr(XS_EINVAL, "tp %s: window table rank %d outside 0..%d", op, tab->rank,
                         tab->nranks - 1);
    if (tab->bytes < in.window_bytes || tab->nflags < in.nflags)
        return xs_seterr(XS_EINVAL, "tp %s m=%d n=%d k=%d P=%d: windows hold %zu bytes and %d "
                         "flags; the problem needs %zu bytes and %d flags", op, s->m, s->n, s->k,
                         s->peers, tab->bytes, tab->nflags, in.window_bytes, in.nflags);
    for (int r = 0; r < tab->nranks; r++)
        if (!tab->data[r] || !tab->flags[r] || ((uintptr_t)tab->data[r] & 15) ||
            ((uintptr_t)tab->flags[r] & 7))
            return xs_seterr(XS_EINVAL, "tp %s: window of rank %d is NULL or misaligned", op, r);
    if (grid < 1 || grid > 1 << 20)
        return xs_seterr(XS_EINVAL, "tp %s: grid %d outside 1..%d", op, grid, 1 << 20);

    xs_status st = XS_OK;
    xs_tp *t = tp_new(s, &in, grid, tab->rank);
    if (!t)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory");
    t->seed = seed;
    t->vt = *tab;
    {
        const int P = t->P, me = t->me;
        const size_t m = (size_t)s->m;
        TP_CUF(cudaGetDevice(&t->device));
        int l2 = 0;
        TP_CUF(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, t->device));
        t->l2_bytes = (size_t)l2;
        TP_CUF(cudaStreamCreateWithFlags(&t->vstream, cudaStreamNonBlocking));
        TP_CUF(cudaEventCreate(&t->ev0));
        TP_CUF(cudaEventCreate(&t->ev1));

        /* the local control table: same layout, every window in this GPU's memory */
        t->lstride = align_up(in.window_bytes, 4096);
        TP_ALLOC(t->lmem, (size_t)P * t->lstride);
        TP_ALLOC(t->lflags, (size_t)P * in.nflags * 8);
        memset(&t->lt, 0, sizeof t->lt);
        t->lt.nranks = P;
        t->lt.rank = me;
        t->lt.bytes = t->lstride;
        t->lt.nflags = in.nflags;
        for (int r = 0; r < P; r++) {
            t->lt.data[r] = t->lmem + (size_t)r * t->lstride;
            t->lt.flags[r] = t->lflags + (size_t)r * in.nflags;
        }
        for (int r = 0; r < P; r++) {
            t->host[r] = tab->host_mem[r] ? tp_host_view(tab->data[r]) : NULL;
            t->host_flags[r] = tab->host_mem[r] ? (uint64_t *)tp_host_view(tab->flags[r]) : NULL;
            if (tab->host_mem[r] && (!t->host[r] || !t->host_flags[r])) {
                st = xs_seterr(XS_EINVAL, "tp %s: rank %d's window is marked host memory but "
                               "has no CPU address (cudaPointerGetAttributes)", op, r);
                goto fail;
            }
        }

        /* virtual peers: every other rank's window is this process's host memory, so this rank
         * also plays the other sources; real peers write their own data and flags */
        int virt = 1;
        for (int r = 0; r < P; r++)
            if (r != me && !tab->host_mem[r])
                virt = 0;
        t->virt = virt;
        /* real peers hold different weight shards (and A of gemm_rs): a rank salt, 0 for rank 0
         * and for virtual peers (the one-GPU inputs) */
        const uint32_t salt = virt ? 0u : (uint32_t)me * 0x9e3779b9u;

        /* inputs: O(1) activations; weights scaled so that every output is O(1) */
        if (s->op == XS_TP_GEMM_RS) {
            TP_ALLOC(t->a_rs, m * in.gk[0] * 2);
            TP_TRY(tp_fill(t, t->a_rs, m * in.gk[0], seed * 7u + 1u + salt, 1.0f));
        }
        for (int g = 0; g < in.ngemm; g++) {
            TP_ALLOC(t->w[g], (size_t)in.gn[g] * in.gk[g] * 2);
            TP_TRY(tp_fill(t, t->w[g], (size_t)in.gn[g] * in.gk[g], seed * 7u + 2u + g + salt,
                           sqrtf(3.0f / (float)in.gk[g])));
        }
        if (in.rs_gemm != 0)
            TP_ALLOC(t->out0, m * in.out_n[0] * 2);
        if (in.rs_gemm >= 0)
            TP_ALLOC(t->y, (size_t)in.rs_rows * in.rs_n * 2);
        TP_ALLOC(t->rb_count, (size_t)in.tiles_m * sizeof(unsigned));
        TP_ALLOC(t->status, sizeof(xs_devstatus));
        TP_ALLOC(t->cta_ns, (size_t)2 * grid * sizeof(unsigned long long));
        TP_ALLOC(t->scratch, (size_t)grid * TP_SCRATCH_BYTES);
        if (in.ag) {
            TP_ALLOC(t->ag_shadow, (size_t)P * in.ag_chunks * sizeof(uint64_t));
            TP_CUF(cudaMemsetAsync(t->ag_shadow, 0, (size_t)P * in.ag_chunks * sizeof(uint64_t),
                                   t->vstream));
        }
        TP_ALLOC(t->d_list_sum, sizeof(unsigned long long));
        TP_ALLOC(t->d_bad, sizeof(unsigned long long));
        TP_ALLOC(t->d_nonfinite, sizeof(unsigned long long));
        t->err_rows = m;
        TP_ALLOC(t->d_err, 2 * m * sizeof(double));
        t->flush_bytes = 2 * t->l2_bytes > ((size_t)64 << 20) ? 2 * t->l2_bytes : (size_t)64 << 20;
        TP_ALLOC(t->flush, t->flush_bytes);
        TP_CUF(cudaMemsetAsync(t->status, 0, sizeof(xs_devstatus), t->vstream));
        TP_CUF(cudaMemsetAsync(t->rb_count, 0, (size_t)in.tiles_m * sizeof(unsigned), t->vstream));

        /* this rank's windows (both tables): the gathered buffer holds every shard (its own,
         * and the ones it would have received), the reduce-scatter region the other sources'
         * partials of its rows; the own slot is written by the runs */
        const xs_wintab *tabs[2] = {&t->vt, &t->lt};
        for (int q = 0; q < 2; q++) {
            char *own = tabs[q]->data[me];
            if (in.ag)
                TP_TRY(tp_fill(t, (xs_bf16 *)own, m * in.ag_k, seed * 7u + 5u, 1.0f));
            if (in.rs_gemm >= 0)
                for (int src = 0; src < P; src++) {
                    char *slot = own + in.rs_off + (size_t)src * in.slot_bytes;
                    if (src != me && !virt && q == 0)
                        continue;
                    if (src == me)
                        TP_TRY(tp_word(t->vstream, slot, in.slot_bytes, 0xffffffffu));
                    else
                        TP_TRY(tp_fill(t, (xs_bf16 *)slot, in.slot_bytes / 2,
                                       seed * 7u + 11u + (uint32_t)src, 1.0f));
                }
            /* flags: zero this problem's range everywhere (real peers: only this rank's own
             * window; a peer's is its owner's, which may still be verifying the previous
             * problem), then raise what has "arrived" */
            for (int r = 0; r < P; r++)
                if (virt || q == 1 || r == me)
                    TP_TRY(tp_setflags(t->vstream, tabs[q]->flags[r], in.nflags, 0));
            for (int src = 0; src < P; src++) {
                if (src == me || (!virt && q == 0))
                    continue;
                if (in.ag)
                    TP_TRY(tp_setflags(t->vstream, tabs[q]->flags[me] + (size_t)src * in.ag_chunks,
                                       in.ag_chunks, XS_TP_ARRIVED));
                if (in.rs_gemm >= 0)
                    TP_TRY(tp_setflags(t->vstream,
                                       tabs[q]->flags[me] + in.rs_flag0 + (size_t)src * in.t_own,
                                       in.t_own, XS_TP_ARRIVED));
            }
        }
        TP_CUF(cudaStreamSynchronize(t->vstream));
    }
    *out = t;
    return XS_OK;
fail:
    xs_tp_destroy(t);
    return st;
}

extern "C" xs_status xs_tp_plan_create(const xs_tp_shape *s, int rank, int grid, xs_tp **out)
{
    *out = NULL;
    xs_tp_info in;
    XS_TRY(xs_tp_info_of(s, &in));
    if (rank < 0 || rank >= s->peers)
        return xs_seterr(XS_EINVAL, "tp %s: rank %d outside 0..%d", xs_tp_op_name(s->op), rank,
                         s->peers - 1);
    if (grid < 1 || grid > 1 << 20)
        return xs_seterr(XS_EINVAL, "tp %s: grid %d outside 1..%d", xs_tp_op_name(s->op), grid,
                         1 << 20);
    xs_tp *t = tp_new(s, &in, grid, rank);
    if (!t)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory");
    t->plan_only = 1;
    *out = t;
    return XS_OK;
}

static const char *const tp_engine_names[2] = {"mma", "sm90"};

extern "C" const char *xs_tp_engine_name(xs_tp_engine e)
{
    return (unsigned)e < 2u ? tp_engine_names[e] : "?";
}

extern "C" xs_status xs_tp_engine_parse(const char *s, xs_tp_engine *e)
{
    for (int i = 0; i < 2; i++)
        if (s && !strcmp(s, tp_engine_names[i])) {
            *e = (xs_tp_engine)i;
            return XS_OK;
        }
    return xs_seterr(XS_EINVAL, "tp: engine '%s': expected mma or sm90", s ? s : "");
}

extern "C" int xs_tp_engine_streams(xs_tp_engine e) { return e == XS_TP_ENGINE_MMA; }

extern "C" xs_status xs_tp_set_engine(xs_tp *t, xs_tp_engine e)
{
    if (e != XS_TP_ENGINE_MMA && e != XS_TP_ENGINE_SM90)
        return xs_seterr(XS_EINVAL, "tp: engine %d unknown", (int)e);
    if (e == t->engine)
        return XS_OK;
    if (t->have_exp || t->last != TP_RUN_NONE)
        return xs_seterr(XS_EINVAL, "tp: the engine is chosen before the first run (the first "
                         "local run's bytes are the expectation of the later ones)");
    if (e == XS_TP_ENGINE_SM90 && !t->plan_only) {
        int major = 0, minor = 0;
        XS_CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, t->device));
        XS_CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, t->device));
        if (major != 9 || minor != 0)
            return xs_seterr(XS_EINVAL, "tp: engine sm90 needs compute capability 9.0, device "
                             "%d has %d.%d", t->device, major, minor);
    }
    t->engine = e;
    return XS_OK;
}

extern "C" xs_tp_engine xs_tp_get_engine(const xs_tp *t) { return t->engine; }

extern "C" xs_status xs_tp_set_couriers(xs_tp *t, int couriers)
{
    const xs_tp_shape *s = &t->s;
    const char *op = xs_tp_op_name(s->op);
    if (couriers < 0 || couriers > XS_TP_COURIERS_MAX || couriers >= t->grid)
        return xs_seterr(XS_EINVAL, "tp %s: %d couriers outside 0..%d (and below the grid of %d)",
                         op, couriers, XS_TP_COURIERS_MAX, t->grid);
    if (couriers > 0 && t->in.rs_gemm < 0 && !(t->in.ag && t->P > 1))
        return xs_seterr(XS_EINVAL, "tp %s: couriers carry reduce-scatter tiles and all-gather "
                         "pushes, and this operation has neither (P = %d)", op, t->P);
    if (couriers > 0 && !t->plan_only && !t->outbox && t->P > 1 && t->in.rs_gemm >= 0) {
        /* the outbox: this rank's partials of the other owners' rows (the remote partial bytes),
         * and one ready flag per remote tile for each window table */
        const size_t ob = (size_t)(t->P - 1) * t->in.slot_bytes;
        const size_t rb = (size_t)2 * (t->P - 1) * t->in.t_own * sizeof(uint64_t);
        /* and the split parts' scratch with its flags (xs_tp_pace.split) */
        const size_t sb = (size_t)TP_SPLIT_SLOTS(t->grid) * TP_SPLIT_BYTES;
        const size_t sf = (size_t)2 * TP_SPLIT_SLOTS(t->grid) * sizeof(uint64_t);
        cudaError_t e = cudaMalloc((void **)&t->outbox, ob);
        if (e == cudaSuccess)
            e = cudaMalloc((void **)&t->ready, rb);
        if (e == cudaSuccess)
            e = cudaMalloc((void **)&t->split, sb);
        if (e == cudaSuccess)
            e = cudaMalloc((void **)&t->split_ready, sf);
        if (e == cudaSuccess) /* zero before any launch may read it (the launch streams have
                                 no implicit order with the legacy stream: wait here) */
            e = cudaMemsetAsync(t->ready, 0, rb, t->vstream);
        if (e == cudaSuccess)
            e = cudaMemsetAsync(t->split_ready, 0, sf, t->vstream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(t->vstream);
        if (e != cudaSuccess) {
            cudaGetLastError();
            cudaFree(t->outbox);
            cudaFree(t->ready);
            cudaFree(t->split);
            cudaFree(t->split_ready);
            t->outbox = NULL;
            t->ready = NULL;
            t->split = NULL;
            t->split_ready = NULL;
            return xs_seterr(XS_ECUDA, "tp %s m=%d n=%d k=%d P=%d: the couriers' outbox and split "
                             "scratch (%.1f MB): %s", op, s->m, s->n, s->k, s->peers,
                             (double)(ob + rb + sb + sf) / 1e6, cudaGetErrorString(e));
        }
    }
    t->couriers = couriers;
    return XS_OK;
}

extern "C" int xs_tp_get_couriers(const xs_tp *t) { return t->couriers; }

/* *to = bytes_per_ns when it is 0 (what0: "unpaced", "no limit") or in 0.1..1e6 B/ns: below 0.1
 * B/ns a 64 KiB tile would take over 0.6 ms of pacing per courier. */
static xs_status tp_set_courier_bytes_per_ns(double *to, double bytes_per_ns, const char *what,
                                             const char *what0)
{
    if (!(bytes_per_ns == 0 || (bytes_per_ns >= 0.1 && bytes_per_ns <= 1e6)))
        return xs_seterr(XS_EINVAL, "tp: courier %s %.3g B/ns (0 = %s, else 0.1..1e6)", what,
                         bytes_per_ns, what0);
    *to = bytes_per_ns;
    return XS_OK;
}

extern "C" xs_status xs_tp_set_courier_pace(xs_tp *t, double bytes_per_ns)
{
    return tp_set_courier_bytes_per_ns(&t->cour_pace, bytes_per_ns, "pace", "unpaced");
}

extern "C" double xs_tp_get_courier_pace(const xs_tp *t) { return t->cour_pace; }

extern "C" xs_status xs_tp_set_courier_rate(xs_tp *t, double bytes_per_ns)
{
    return tp_set_courier_bytes_per_ns(&t->cour_rate, bytes_per_ns, "rate", "no limit");
}

extern "C" double xs_tp_get_courier_rate(const xs_tp *t) { return t->cour_rate; }

extern "C" int xs_tp_order_couriers(const xs_tp *t, int slot)
{
    return slot >= 0 && slot < XS_TP_SLOTS && t->ntasks[slot] ? t->scour[slot] : 0;
}

extern "C" int xs_tp_order_walk_pushes(const xs_tp *t, int slot)
{
    return slot >= 0 && slot < XS_TP_SLOTS && t->ntasks[slot] ? t->npush[slot] : 0;
}

extern "C" int xs_tp_order_walk(const xs_tp *t, int slot, const int **pos)
{
    if (slot < 0 || slot >= XS_TP_SLOTS || !t->ntasks[slot]) {
        *pos = NULL;
        return 0;
    }
    *pos = t->walk[slot];
    return t->nwalk[slot];
}

static const char *const tp_layout_names[2] = {"row", "tile"};

extern "C" const char *xs_tp_layout_name(xs_tp_layout l)
{
    return (unsigned)l < 2 ? tp_layout_names[l] : "?";
}

extern "C" xs_status xs_tp_layout_parse(const char *s, xs_tp_layout *l)
{
    for (int i = 0; i < 2; i++)
        if (s && !strcmp(s, tp_layout_names[i])) {
            *l = (xs_tp_layout)i;
            return XS_OK;
        }
    return xs_seterr(XS_EINVAL, "tp: slot layout '%s': expected row or tile", s ? s : "");
}

/* Copy nslots slots between layouts on the context's internal stream (tp_slot_copy_kernel). */
static xs_status tp_slot_copy(xs_tp *t, void *dst, xs_tp_layout dl, const void *src,
                              xs_tp_layout sl, int nslots)
{
    const xs_tp_info *in = &t->in;
    const size_t units = (size_t)in->rs_rows * in->rs_n / 8 * (size_t)nslots;
    if (!units)
        return XS_OK;
    tp_slot_copy_kernel<<<tp_blocks(units, 256), 256, 0, t->vstream>>>(
        (xs_bf16 *)dst, (int)dl, (const xs_bf16 *)src, (int)sl, in->rs_rows, in->rs_n, nslots);
    XS_CU_LAUNCH();
    return XS_OK;
}

extern "C" xs_status xs_tp_set_slot_layout(xs_tp *t, xs_tp_layout l)
{
    if (l != XS_TP_LAYOUT_ROW && l != XS_TP_LAYOUT_TILE)
        return xs_seterr(XS_EINVAL, "tp: slot layout %d unknown", (int)l);
    if (l == t->layout)
        return XS_OK;
    const xs_tp_info *in = &t->in;
    if (!t->plan_only && in->rs_gemm >= 0) {
        /* the partials this rank holds for the other sources keep their values: each slot is
         * rewritten in the new layout through a copy (fused window: virtual peers only - real
         * peers rewrite theirs every run; the local control table always) */
        void *tmp = NULL;
        XS_CU(cudaMalloc(&tmp, in->slot_bytes));
        xs_status st = XS_OK;
        const xs_wintab *tabs[2] = {&t->vt, &t->lt};
        for (int q = 0; q < 2 && st == XS_OK; q++) {
            if (q == 0 && !t->virt)
                continue;
            char *own = tabs[q]->data[t->me] + in->rs_off;
            for (int src = 0; src < t->P && st == XS_OK; src++) {
                if (src == t->me)
                    continue;
                char *slot = own + (size_t)src * in->slot_bytes;
                cudaError_t e = cudaMemcpyAsync(tmp, slot, in->slot_bytes, cudaMemcpyDefault,
                                                t->vstream);
                if (e != cudaSuccess)
                    st = xs_seterr(XS_ECUDA, "tp: slot layout: %s", cudaGetErrorString(e));
                else
                    st = tp_slot_copy(t, slot, l, tmp, t->layout, 1);
            }
        }
        cudaError_t e = cudaStreamSynchronize(t->vstream);
        cudaFree(tmp);
        if (st != XS_OK)
            return st;
        if (e != cudaSuccess)
            return xs_seterr(XS_ECUDA, "tp: slot layout: %s", cudaGetErrorString(e));
        /* the last run's slots are in the old layout: it cannot be verified any more */
        t->last = TP_RUN_NONE;
    }
    t->layout = l;
    return XS_OK;
}

extern "C" xs_tp_layout xs_tp_get_slot_layout(const xs_tp *t) { return t->layout; }

extern "C" void xs_tp_get_info(const xs_tp *t, xs_tp_info *info) { *info = t->in; }
extern "C" void xs_tp_set_coll(xs_tp *t, const xs_tp_coll *c)
{
    t->have_coll = c != NULL;
    if (c)
        t->coll = *c;
}
extern "C" int xs_tp_real_peers(const xs_tp *t) { return !t->plan_only && !t->virt; }
extern "C" int xs_tp_grid(const xs_tp *t) { return t->grid; }

extern "C" void xs_tp_get_bufs(const xs_tp *t, xs_tp_bufs *b)
{
    memset(b, 0, sizeof *b);
    b->a = t->s.op == XS_TP_GEMM_RS ? (const void *)t->a_rs : (const void *)t->vt.data[t->me];
    b->b[0] = t->w[0];
    b->b[1] = t->w[1];
    b->rs_slots = t->in.rs_gemm >= 0 ? t->vt.data[t->me] + t->in.rs_off : NULL;
    b->y = t->y;
    b->out0 = t->out0;
    for (int r = 0; r < t->P; r++)
        b->host[r] = t->host[r];
}

extern "C" void xs_tp_reference_ptrs(const xs_tp *t, const float **ref_y, const float **ref_out0)
{
    if (ref_y)
        *ref_y = t->have_ref ? t->ref_y : NULL;
    if (ref_out0)
        *ref_out0 = t->have_ref ? t->ref_out0 : NULL;
}

/* ---- task orders ------------------------------------------------------------------------------ */

typedef struct {
    tp_task *v;
    int n, cap;
} tp_list;

static int list_push(tp_list *l, tp_task x)
{
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 1024;
        tp_task *nv = (tp_task *)realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = x;
    return 0;
}

static tp_task mk_tile(int g, int tm, int tn)
{
    tp_task x;
    memset(&x, 0, sizeof x);
    x.flags = TP_T_TILE, x.gemm = g, x.tm = tm, x.tn = tn;
    return x;
}

static tp_task mk_push(int r, int c)
{
    tp_task x;
    memset(&x, 0, sizeof x);
    x.flags = TP_T_PUSH, x.push_rank = r, x.push_chunk = c;
    return x;
}

static tp_task mk_reduce(int t_own)
{
    tp_task x;
    memset(&x, 0, sizeof x);
    x.flags = TP_T_REDUCE, x.red_t = t_own;
    return x;
}

/* Tiles of GEMM g over row blocks [rb0, rb1) in grouped raster order: groups of 8 row blocks,
 * column-major within a group, so that tiles running together share A and B panels in L2. */
static int raster(tp_list *l, int g, int rb0, int rb1, int tiles_n)
{
    for (int gs = rb0; gs < rb1; gs += 8) {
        const int ge = gs + 8 < rb1 ? gs + 8 : rb1;
        for (int tn = 0; tn < tiles_n; tn++)
            for (int tm = gs; tm < ge; tm++)
                if (list_push(l, mk_tile(g, tm, tn)))
                    return -1;
    }
    return 0;
}

/* A split tile's parts: the last one carries the tile's epilogue (bytes, signal). */
static int split_last(const tp_task *x)
{
    return !(x->flags & TP_T_SPLIT) || XS_TP_SPLIT_PART(x) == XS_TP_SPLIT_PARTS(x) - 1;
}

/* Remote bytes of a task: reduce-scatter tiles to another owner (a split tile's at its last
 * part), pushes. */
static double task_bytes(const xs_tp *t, const tp_task *x)
{
    const xs_tp_info *in = &t->in;
    double b = 0;
    if ((x->flags & TP_T_TILE) && x->gemm == in->rs_gemm && split_last(x)) {
        const int owner = x->tm * XS_TP_BM / in->rs_rows;
        if (owner != t->me) {
            const int n0 = x->tn * XS_TP_BN;
            const int cols = in->gn[x->gemm] - n0 < XS_TP_BN ? in->gn[x->gemm] - n0 : XS_TP_BN;
            b += (double)XS_TP_BM * cols * 2;
        }
    }
    if (x->flags & TP_T_PUSH) {
        const double rest = (double)in->shard_bytes - (double)x->push_chunk * XS_TP_CHUNK;
        const double want = (double)(x->push_n > 1 ? x->push_n : 1) * XS_TP_CHUNK;
        b += rest < want ? rest : want;
    }
    return b;
}

/* The last chunk of shard s that GEMM 0 tile row tm needs (all-gathered A; s = tm's shard). */
static int ag_last_chunk(const xs_tp_info *in, int tm)
{
    const int s = tm * XS_TP_BM / in->rs_rows;
    const double row_bytes = (double)in->ag_k * 2;
    double hi = ((double)(tm * XS_TP_BM - s * in->rs_rows) + XS_TP_BM) * row_bytes;
    if (hi > (double)in->shard_bytes)
        hi = (double)in->shard_bytes;
    return (int)((hi - 1) / XS_TP_CHUNK);
}

/* Compute (ns) of a task on its CTA, from measured costs; a push riding on a tile adds none
 * (its issue is what the model adds); a split part its share of the tile's k-tiles. */
static double task_cost(const xs_tp_costs *c, const tp_task *x)
{
    double ns = 0;
    if (x->flags & TP_T_SPLIT)
        ns += c->tile_ns[x->gemm] / XS_TP_SPLIT_PARTS(x);
    else if (x->flags & TP_T_TILE)
        ns += c->tile_ns[x->gemm];
    else if (x->flags & TP_T_PUSH)
        ns += c->push_ns;
    if (x->flags & TP_T_REDUCE)
        ns += c->reduce_ns;
    return ns;
}

static int cmp_ll(const void *x, const void *y)
{
    const long long a = *(const long long *)x, b = *(const long long *)y;
    return a < b ? -1 : a > b;
}

/* The couriers' pushes of list l (cour > 0, an all-gather over P > 1 ranks): every (rank, chunk)
 * the list does not push, ordered by the list position of the first GEMM 0 tile that needs it -
 * a tile on shard s needs this rank's chunks at the mirror rank (tp_args.ag_sym; with real peers
 * the same position of rank r's rotated list) - then by ring distance and chunk. Appended to
 * walk[*nw ...] with their hashes (the words of mk_push(r, c)). -1: out of host memory. */
static int tp_walk_pushes(const xs_tp *t, const tp_list *l, int *walk, int *nw,
                          unsigned long long *wh)
{
    const xs_tp_info *in = &t->in;
    const int P = t->P, me = t->me, nch = in->ag_chunks, rbpr = in->rs_rows / XS_TP_BM;
    const size_t np = (size_t)P * nch;
    int *need = (int *)malloc(np * sizeof(int));
    long long *key = (long long *)malloc(np * sizeof(long long));
    if (!need || !key) {
        free(need), free(key);
        return -1;
    }
    for (size_t q = 0; q < np; q++)
        need[q] = INT_MAX;
    for (int i = 0; i < l->n; i++) { /* pushed by the list itself: not the couriers' */
        const tp_task *x = &l->v[i];
        if ((x->flags & TP_T_PUSH) && x->push_rank >= 0 && x->push_rank < P)
            for (int k = 0; k < (x->push_n > 1 ? x->push_n : 1); k++)
                if (x->push_chunk + k >= 0 && x->push_chunk + k < nch)
                    need[(size_t)x->push_rank * nch + x->push_chunk + k] = -1;
    }
    for (int i = 0; i < l->n; i++) {
        const tp_task *x = &l->v[i];
        if (!(x->flags & TP_T_TILE) || x->gemm != 0 || x->tm < 0 || x->tm >= in->tiles_m)
            continue;
        const int s = x->tm / rbpr;
        if (s == me)
            continue;
        const int d = tp_mirror(me, s, P), c1 = ag_last_chunk(in, x->tm);
        const int c0 = (int)((double)(x->tm - s * rbpr) * XS_TP_BM * in->ag_k * 2 / XS_TP_CHUNK);
        for (int c = c0; c <= c1; c++)
            if (need[(size_t)d * nch + c] > i)
                need[(size_t)d * nch + c] = i;
    }
    int nk = 0;
    for (int j = 1; j < P; j++)
        for (int c = 0; c < nch; c++) {
            const int d = (me + j) % P, at = need[(size_t)d * nch + c];
            if (at >= 0) /* at most INT_MAX: a chunk no tile needs (none) goes last */
                key[nk++] = ((long long)at * P + j) * nch + c;
        }
    qsort(key, (size_t)nk, sizeof *key, cmp_ll);
    for (int q = 0; q < nk; q++) {
        const int j = (int)(key[q] / nch % P), c = (int)(key[q] % nch), d = (me + j) % P;
        const tp_task x = mk_push(d, c);
        int w[8];
        memcpy(w, &x, sizeof w);
        const int e = XS_TP_WALK_PUSH(d, c, nch);
        *wh += tp_courier_hash(*nw, e, w);
        walk[(*nw)++] = e;
    }
    free(need);
    free(key);
    return 0;
}

/* Store list l in slot (taking it over) as an order for grid - cour compute CTAs, with the
 * couriers' walk: their pushes (tp_walk_pushes), then the list positions of the remote
 * reduce-scatter tiles, increasing (production order). */
static xs_status tp_store_order(xs_tp *t, int slot, tp_list *l, int cour)
{
    if (slot < 0 || slot >= XS_TP_SLOTS) {
        free(l->v);
        return xs_seterr(XS_EINVAL, "tp: order slot %d outside 0..%d", slot, XS_TP_SLOTS - 1);
    }
    if (l->n == 0 && list_push(l, mk_reduce(0)) == 0)
        l->v[0].flags = 0; /* nothing to do (not reachable for a valid shape): one empty task */
    const int cpush = cour > 0 && t->in.ag && t->P > 1;
    const size_t wcap = (size_t)l->n + (cpush ? (size_t)t->P * t->in.ag_chunks : 0) + 1;
    int *walk = (int *)malloc(wcap * sizeof(int));
    if (!walk) {
        free(l->v);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    }
    int nw = 0;
    unsigned long long wh = 0;
    if (cpush && tp_walk_pushes(t, l, walk, &nw, &wh)) {
        free(walk);
        free(l->v);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    }
    const int npush = nw;
    for (int i = 0; i < l->n; i++) {
        const tp_task *x = &l->v[i];
        if ((x->flags & TP_T_TILE) && x->gemm == t->in.rs_gemm && t->in.rs_gemm >= 0 &&
            x->tm >= 0 && x->tm < t->in.tiles_m && x->tm * XS_TP_BM / t->in.rs_rows != t->me &&
            split_last(x)) { /* a split tile: at its last part, which writes the outbox */
            int w[8];
            memcpy(w, x, sizeof w);
            wh += tp_courier_hash(nw, i, w);
            walk[nw++] = i;
        }
    }
    free(t->h_tasks[slot]);
    t->h_tasks[slot] = l->v;
    t->ntasks[slot] = l->n;
    t->dirty[slot] = 1; /* uploaded by the next run that uses it */
    free(t->walk[slot]);
    t->walk[slot] = walk;
    t->nwalk[slot] = nw;
    t->npush[slot] = npush;
    t->walk_hash[slot] = wh;
    t->scour[slot] = cour; /* built for grid - cour compute CTAs */
    unsigned long long h = 0;
    int nsplit = 0;
    for (int i = 0; i < l->n; i++) {
        int w[8];
        memcpy(w, &l->v[i], sizeof w);
        h += tp_task_hash(i, w);
        nsplit += (l->v[i].flags & TP_T_SPLIT) && split_last(&l->v[i]);
    }
    t->nsplit[slot] = nsplit;
    t->list_hash[slot] = h;
    return XS_OK;
}

/* The compute CTAs of a slot's order: those it was built for. */
static int tp_slot_grid(const xs_tp *t, int slot) { return t->grid - t->scour[slot]; }

/* Upload a task list (stream-ordered before the launch on s) and size the per-task stamps for
 * it. The copy is on s, not a cudaMemcpy on the legacy default stream: the launch stream is
 * non-blocking (no implicit order with stream 0), and a cudaMemcpy from pageable memory returns
 * once the data is staged, possibly before it has reached the device - a kernel launched right
 * after could read part of the previous contents (the two failures of the first H200 run).
 * From pageable memory, cudaMemcpyAsync stages the data before it returns, so the host list may
 * change afterwards. */
static xs_status tp_upload_order(xs_tp *t, int slot, cudaStream_t s)
{
    const int n = t->ntasks[slot];
    if (n > t->d_cap[slot]) {
        XS_CU(cudaStreamSynchronize(s)); /* nothing in flight may use the old list */
        cudaFree(t->d_tasks[slot]);
        t->d_tasks[slot] = NULL;
        t->d_cap[slot] = 0;
        XS_CU(cudaMalloc((void **)&t->d_tasks[slot], (size_t)n * sizeof(tp_task)));
        t->d_cap[slot] = n;
    }
    XS_CU(cudaMemcpyAsync(t->d_tasks[slot], t->h_tasks[slot], (size_t)n * sizeof(tp_task),
                          cudaMemcpyHostToDevice, s));
    const int nw = t->nwalk[slot];
    if (nw > t->d_walk_cap[slot]) {
        XS_CU(cudaStreamSynchronize(s));
        cudaFree(t->d_walk[slot]);
        t->d_walk[slot] = NULL;
        t->d_walk_cap[slot] = 0;
        XS_CU(cudaMalloc((void **)&t->d_walk[slot], (size_t)nw * sizeof(int)));
        t->d_walk_cap[slot] = nw;
    }
    if (nw > 0)
        XS_CU(cudaMemcpyAsync(t->d_walk[slot], t->walk[slot], (size_t)nw * sizeof(int),
                              cudaMemcpyHostToDevice, s));
    if ((size_t)n > t->task_cap) {
        cudaFree(t->task_ns);
        t->task_ns = NULL;
        t->task_cap = 0;
        XS_CU(cudaMalloc((void **)&t->task_ns, (size_t)n * sizeof(unsigned long long)));
        t->task_cap = (size_t)n;
    }
    t->dirty[slot] = 0;
    return XS_OK;
}

extern "C" xs_status xs_tp_order_naive(xs_tp *t, int slot)
{
    const xs_tp_info *in = &t->in;
    const int P = t->P, me = t->me, rbpr = in->rs_rows / XS_TP_BM;
    tp_list l = {NULL, 0, 0};
    int bad = 0;
    if (in->ag && t->couriers == 0) /* with couriers they push (tp_walk_pushes) */
        for (int c = 0; c < in->ag_chunks; c++)
            for (int j = 1; j < P; j++)
                bad |= list_push(&l, mk_push((me + j) % P, c));
    /* GEMM 0 and (mlp) GEMM 1: this rank's rows first, then the ring */
    for (int g = 0; g < in->ngemm; g++)
        for (int j = 0; j < P; j++) {
            const int r = (me + j) % P;
            bad |= raster(&l, g, r * rbpr, (r + 1) * rbpr, in->tiles_n[g]);
        }
    for (int i = 0; i < in->reduce_tasks; i++)
        bad |= list_push(&l, mk_reduce(i));
    if (bad) {
        free(l.v);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    }
    return tp_store_order(t, slot, &l, t->couriers);
}

extern "C" xs_status xs_tp_order_copy(xs_tp *t, int dst, int src)
{
    if (src < 0 || src >= XS_TP_SLOTS || !t->ntasks[src])
        return xs_seterr(XS_EINVAL, "tp: order slot %d is empty", src);
    tp_list l = {(tp_task *)malloc((size_t)t->ntasks[src] * sizeof(tp_task)), t->ntasks[src],
                 t->ntasks[src]};
    if (!l.v)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    memcpy(l.v, t->h_tasks[src], (size_t)l.n * sizeof(tp_task));
    return tp_store_order(t, dst, &l, t->scour[src]); /* for the source's compute CTAs */
}

extern "C" int xs_tp_order_tasks(const xs_tp *t, int slot)
{
    return slot >= 0 && slot < XS_TP_SLOTS ? t->ntasks[slot] : 0;
}

extern "C" unsigned long long xs_tp_order_hash(const xs_tp *t, int slot)
{
    return slot >= 0 && slot < XS_TP_SLOTS && t->ntasks[slot] ? t->list_hash[slot] : 0;
}

extern "C" int xs_tp_order_get(const xs_tp *t, int slot, const xs_tp_task **tasks)
{
    if (slot < 0 || slot >= XS_TP_SLOTS) {
        *tasks = NULL;
        return 0;
    }
    *tasks = (const xs_tp_task *)t->h_tasks[slot];
    return t->ntasks[slot];
}

extern "C" xs_status xs_tp_order_set(xs_tp *t, int slot, const xs_tp_task *tasks, int n)
{
    if (n < 1 || !tasks)
        return xs_seterr(XS_EINVAL, "tp: an order needs at least one task");
    tp_list l = {(tp_task *)malloc((size_t)n * sizeof(tp_task)), n, n};
    if (!l.v)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    memcpy(l.v, tasks, (size_t)n * sizeof(tp_task));
    return tp_store_order(t, slot, &l, t->couriers);
}

extern "C" xs_status xs_tp_order_check(const xs_tp *t, int slot)
{
    if (slot < 0 || slot >= XS_TP_SLOTS || !t->ntasks[slot])
        return xs_seterr(XS_EINVAL, "tp: order slot %d is empty", slot);
    const xs_tp_info *in = &t->in;
    const int n = t->ntasks[slot], G = tp_slot_grid(t, slot), P = t->P, me = t->me;
    const int rbpr = in->rs_rows / XS_TP_BM;
    const tp_task *v = t->h_tasks[slot];
    const char *op = xs_tp_op_name(t->s.op);
    /* position of every tile, push and reduction; -1 = not (yet) seen */
    const size_t nt0 = (size_t)in->tiles[0], nt1 = in->ngemm > 1 ? (size_t)in->tiles[1] : 0;
    const size_t npu = (size_t)P * (in->ag_chunks > 0 ? in->ag_chunks : 1);
    int *pos = (int *)malloc((nt0 + nt1 + npu + (size_t)in->reduce_tasks + 1) * sizeof(int));
    if (!pos)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory checking an order");
    int *pos0 = pos, *pos1 = pos + nt0, *posp = pos1 + nt1, *posr = posp + npu;
    for (size_t i = 0; i < nt0 + nt1 + npu + (size_t)in->reduce_tasks; i++)
        pos[i] = -1;
    char why[200] = "";
#define TP_BAD(...)                                                                             \
    do {                                                                                        \
        if (!why[0])                                                                            \
            snprintf(why, sizeof why, __VA_ARGS__);                                             \
    } while (0)
    /* split scratch slots: -1 free, the task of the part that writes it, -2 consumed by its
     * tile's last part */
    const int nss = TP_SPLIT_SLOTS(t->grid);
    int *split_seen = (int *)malloc((size_t)nss * sizeof(int));
    if (!split_seen) {
        free(pos);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory checking an order");
    }
    for (int q = 0; q < nss; q++)
        split_seen[q] = -1;
    for (int i = 0; i < n && !why[0]; i++) {
        const tp_task *x = &v[i];
        if (x->flags & ~TP_T_ALL)
            TP_BAD("task %d: unknown kind bits %#x", i, x->flags);
        if ((x->flags & TP_T_SPLIT) && (!(x->flags & TP_T_TILE) ||
                                        (x->flags & (TP_T_PUSH | TP_T_DEFER | TP_T_SPREAD)))) {
            TP_BAD("task %d: a split part must be a tile with nothing else", i);
            break;
        }
        if ((x->flags & TP_T_TILE) && (x->flags & TP_T_REDUCE))
            TP_BAD("task %d: a tile and a reduction in one task", i);
        if (x->flags & TP_T_TILE) {
            const int g = x->gemm;
            if (g < 0 || g >= in->ngemm || x->tm < 0 || x->tm >= in->tiles_m || x->tn < 0 ||
                x->tn >= in->tiles_n[g]) {
                TP_BAD("task %d: tile (GEMM %d, %d, %d) outside the problem", i, g, x->tm, x->tn);
                break;
            }
            int *slotp = (g == 0 ? pos0 : pos1) + (size_t)x->tm * in->tiles_n[g] + x->tn;
            if (x->flags & TP_T_SPLIT) {
                /* parts 0 .. S-1 of one tile, each once, the last one last (the tile's
                 * position: its epilogue); every part's scratch slot inside the context's */
                const int part = XS_TP_SPLIT_PART(x), S = XS_TP_SPLIT_PARTS(x);
                const int slot0 = XS_TP_SPLIT_SLOT(x);
                const int KT = (in->gk[g] + TP90C::BK - 1) / TP90C::BK;
                if (S < 2 || S > XS_TP_SPLIT_MAX || part < 0 || part >= S) {
                    TP_BAD("task %d: split part %d of %d parts (2..%d)", i, part, S,
                           XS_TP_SPLIT_MAX);
                    break;
                }
                if (t->scour[slot] == 0 || g != in->rs_gemm || in->ngemm != 1)
                    TP_BAD("task %d: a split tile outside a gemm_rs order with couriers", i);
                else if (KT < S)
                    TP_BAD("task %d: a tile of %d k-tiles split in %d parts", i, KT, S);
                else if (slot0 < 0 || slot0 + S - 1 > TP_SPLIT_SLOTS(t->grid))
                    TP_BAD("task %d: split scratch slots %d..%d outside 0..%d", i, slot0,
                           slot0 + S - 2, TP_SPLIT_SLOTS(t->grid) - 1);
                else if (part < S - 1) {
                    /* an earlier part: the last one must follow (checked when it comes) */
                    if (*slotp >= 0)
                        TP_BAD("task %d: a part of tile (GEMM %d, %d, %d) after its last part "
                               "(task %d)", i, g, x->tm, x->tn, *slotp);
                    if (split_seen[(size_t)slot0 + part] != -1)
                        TP_BAD("task %d: split scratch slot %d used twice", i, slot0 + part);
                    else
                        split_seen[(size_t)slot0 + part] = i;
                    continue;
                } else {
                    /* the last part: every earlier part of the same tile is before it */
                    for (int q = 0; q < S - 1 && !why[0]; q++) {
                        const int at = split_seen[(size_t)slot0 + q];
                        if (at < 0 || v[at].gemm != g || v[at].tm != x->tm ||
                            v[at].tn != x->tn || XS_TP_SPLIT_PARTS(&v[at]) != S ||
                            XS_TP_SPLIT_PART(&v[at]) != q)
                            TP_BAD("task %d: the last part of tile (GEMM %d, %d, %d) without "
                                   "its part %d before it (scratch slot %d)", i, g, x->tm,
                                   x->tn, q, slot0 + q);
                        else
                            split_seen[(size_t)slot0 + q] = -2; /* consumed */
                    }
                }
            }
            if (*slotp >= 0)
                TP_BAD("task %d: tile (GEMM %d, %d, %d) also at task %d", i, g, x->tm, x->tn,
                       *slotp);
            *slotp = i;
            if (x->flags & TP_T_DEFER) {
                if (g != in->rs_gemm || x->tm / rbpr == me)
                    TP_BAD("task %d: deferred stores on a tile that is not a remote owner's", i);
                else if (i + G >= n || !(v[i + G].flags & TP_T_TILE))
                    TP_BAD("task %d: deferred tile not followed by a tile of its CTA", i);
            }
        } else if (x->flags & TP_T_DEFER) {
            TP_BAD("task %d: deferred stores without a tile", i);
        }
        if (x->flags & TP_T_SPLIT)
            continue; /* its push fields are the split's */
        if (x->flags & TP_T_PUSH) {
            const int pn = x->push_n > 1 ? x->push_n : 1;
            if (!in->ag || x->push_rank < 0 || x->push_rank >= P || x->push_rank == me ||
                x->push_chunk < 0 || x->push_n < 0 || pn > XS_TP_PUSH_MAX ||
                x->push_chunk + pn > in->ag_chunks) {
                TP_BAD("task %d: push (rank %d, chunks %d..%d) outside the problem", i,
                       x->push_rank, x->push_chunk, x->push_chunk + pn - 1);
                break;
            }
            for (int k = 0; k < pn; k++) {
                int *slotp = posp + (size_t)x->push_rank * in->ag_chunks + x->push_chunk + k;
                if (*slotp >= 0)
                    TP_BAD("task %d: push (rank %d, chunk %d) also at task %d", i, x->push_rank,
                           x->push_chunk + k, *slotp);
                *slotp = i;
            }
            if ((x->flags & TP_T_SPREAD) && !(x->flags & TP_T_TILE))
                TP_BAD("task %d: a streamed push with no tile to ride on", i);
        } else if (x->flags & TP_T_SPREAD) {
            TP_BAD("task %d: streamed stores without a push", i);
        } else if (x->push_n) {
            TP_BAD("task %d: %d push chunks without a push", i, x->push_n);
        }
        if (x->flags & TP_T_REDUCE) {
            if (x->red_t < 0 || x->red_t >= in->reduce_tasks) {
                TP_BAD("task %d: reduction of tile %d outside 0..%d", i, x->red_t,
                       in->reduce_tasks - 1);
                break;
            }
            if (posr[x->red_t] >= 0)
                TP_BAD("task %d: reduction of tile %d also at task %d", i, x->red_t,
                       posr[x->red_t]);
            posr[x->red_t] = i;
        }
    }
    for (int q = 0; q < nss && !why[0]; q++)
        if (split_seen[q] >= 0)
            TP_BAD("task %d: split part without the last part of its tile after it",
                   split_seen[q]);
    free(split_seen);
    /* everything once */
    for (size_t q = 0; q < nt0 + nt1 && !why[0]; q++)
        if (pos[q] < 0) {
            const int g = q < nt0 ? 0 : 1, r = (int)(g ? q - nt0 : q);
            TP_BAD("tile (GEMM %d, %d, %d) is missing", g, r / in->tiles_n[g],
                   r % in->tiles_n[g]);
        }
    /* (with couriers the walk pushes what the list does not: tp_walk_pushes) */
    for (int r = 0; r < P && in->ag && t->scour[slot] == 0 && !why[0]; r++)
        for (int c = 0; c < in->ag_chunks && r != me && !why[0]; c++)
            if (posp[(size_t)r * in->ag_chunks + c] < 0)
                TP_BAD("push of chunk %d to rank %d is missing", c, r);
    for (int q = 0; q < in->reduce_tasks && !why[0]; q++)
        if (posr[q] < 0)
            TP_BAD("reduction of tile %d is missing", q);
    /* dependencies: only on earlier tasks */
    if (in->ngemm > 1)
        for (int tm = 0; tm < in->tiles_m && !why[0]; tm++) {
            int last0 = -1, first1 = n;
            for (int tn = 0; tn < in->tiles_n[0]; tn++)
                last0 = pos0[(size_t)tm * in->tiles_n[0] + tn] > last0
                            ? pos0[(size_t)tm * in->tiles_n[0] + tn]
                            : last0;
            for (int tn = 0; tn < in->tiles_n[1]; tn++)
                first1 = pos1[(size_t)tm * in->tiles_n[1] + tn] < first1
                             ? pos1[(size_t)tm * in->tiles_n[1] + tn]
                             : first1;
            if (first1 <= last0)
                TP_BAD("row block %d: GEMM 2 tile at task %d before the last GEMM 1 tile (task %d)",
                       tm, first1, last0);
        }
    /* an all-gathered tile on shard s after this rank's pushes of the same chunks to the mirror
     * rank (the kernel's wait with virtual peers; a symmetric peer's order is the same list); a
     * chunk the couriers push has no position (-1): they push before they carry any tile */
    if (in->ag && P > 1)
        for (int tm = 0; tm < in->tiles_m && !why[0]; tm++) {
            const int s = tm / rbpr;
            if (s == me)
                continue;
            const int d = tp_mirror(me, s, P), c1 = ag_last_chunk(in, tm);
            const int c0 = (int)((double)(tm - s * rbpr) * XS_TP_BM * in->ag_k * 2 / XS_TP_CHUNK);
            int lastp = -1;
            for (int c = c0; c <= c1; c++)
                lastp = posp[(size_t)d * in->ag_chunks + c] > lastp
                            ? posp[(size_t)d * in->ag_chunks + c]
                            : lastp;
            for (int tn = 0; tn < in->tiles_n[0] && !why[0]; tn++) {
                const int pt = pos0[(size_t)tm * in->tiles_n[0] + tn];
                if (pt <= lastp)
                    TP_BAD("tile (GEMM 0, %d, %d) at task %d before the push of its chunks to "
                           "rank %d (task %d)", tm, tn, pt, d, lastp);
            }
        }
    if (in->rs_gemm >= 0) {
        const int *prs = in->rs_gemm == 0 ? pos0 : pos1, tn_rs = in->tiles_n[in->rs_gemm];
        for (int q = 0; q < in->reduce_tasks && !why[0]; q++) {
            const int tm = me * rbpr + q / tn_rs, tn = q % tn_rs;
            const int src = prs[(size_t)tm * tn_rs + tn];
            if (src >= posr[q])
                TP_BAD("reduction of own tile %d at task %d before the tile itself (task %d)", q,
                       posr[q], src);
        }
    }
#undef TP_BAD
    free(pos);
    if (why[0])
        return xs_seterr(XS_EINVAL, "tp %s m=%d n=%d k=%d P=%d rank %d grid %d, slot %d: %s", op,
                         t->s.m, t->s.n, t->s.k, P, me, G, slot, why);
    return XS_OK;
}

extern "C" xs_status xs_tp_order_stats(const xs_tp *t, int slot, xs_tp_order_info *o)
{
    memset(o, 0, sizeof *o);
    if (slot < 0 || slot >= XS_TP_SLOTS || !t->ntasks[slot])
        return xs_seterr(XS_EINVAL, "tp: order slot %d is empty", slot);
    const int n = t->ntasks[slot], G = tp_slot_grid(t, slot);
    const tp_task *v = t->h_tasks[slot];
    o->tasks = n;
    o->steps = (n + G - 1) / G;
    for (int s0 = 0; s0 < n; s0 += G) {
        double burst = 0;
        for (int i = s0; i < n && i < s0 + G; i++) {
            tp_task x = v[i];
            double b = task_bytes(t, &x);
            if ((x.flags & TP_T_TILE) && x.gemm == t->in.rs_gemm &&
                x.tm * XS_TP_BM / t->in.rs_rows != t->me)
                o->remote_tiles++;
            if (x.flags & TP_T_PUSH)
                o->pushes++;
            if ((x.flags & TP_T_SPREAD) && (x.flags & TP_T_PUSH)) {
                o->spread++;
                tp_task push = x;
                push.flags = TP_T_PUSH;
                b -= task_bytes(t, &push);
            }
            if (x.flags & TP_T_DEFER) {
                o->deferred++;
                b = 0;
            }
            burst += b;
        }
        if (burst > o->max_step_bytes)
            o->max_step_bytes = burst;
    }
    return XS_OK;
}

/* A queue of candidate tasks with a taken mark, scanned from its first untaken entry. */
typedef struct {
    tp_list l;
    unsigned char *taken;
    int front, left;
} tp_queue;

static int queue_seal(tp_queue *q)
{
    q->taken = (unsigned char *)calloc((size_t)(q->l.n ? q->l.n : 1), 1);
    q->front = 0;
    q->left = q->l.n;
    return q->taken ? 0 : -1;
}

static void queue_free(tp_queue *q)
{
    free(q->l.v);
    free(q->taken);
}

/* Readiness while an order is built. mlp: GEMM 2 tiles of row block tm wait for every GEMM 1
 * tile of it, `lead` steps. All-gather: a GEMM 1 tile on another rank's shard s waits, `ag_lead`
 * steps, for this rank's pushes of the same chunks to the mirror rank (what the kernel waits for
 * with virtual peers, tp_args.ag_sym; a symmetric peer's chunks arrive in the same order).
 * Chunks of one destination are placed in increasing order, so "chunks 0..c placed" is
 * placed[r] > c and the last of them went at pstep[r][c]. */
typedef struct {
    const int *done;      /* GEMM 1 tiles placed per row block (mlp), or NULL */
    const int *last_step; /* step of the last of them */
    int need;             /* tiles per row block */
    const int *placed;    /* [P] chunks placed per destination (all-gather), or NULL */
    const int *pstep;     /* [P][ag_chunks] step of each placed push */
    const xs_tp_info *in;
    int me, P;
    int step, lead, ag_lead;
} tp_ready;

static int is_ready(const tp_task *x, const tp_ready *r)
{
    if (!r || !(x->flags & TP_T_TILE))
        return 1;
    if (x->gemm == 1 && r->done)
        return r->done[x->tm] == r->need && r->last_step[x->tm] <= r->step - r->lead;
    if (x->gemm == 0 && r->placed) {
        const int s = x->tm * XS_TP_BM / r->in->rs_rows;
        if (s == r->me)
            return 1;
        const int c = ag_last_chunk(r->in, x->tm), d = tp_mirror(r->me, s, r->P);
        return r->placed[d] > c && r->pstep[(size_t)d * r->in->ag_chunks + c] <= r->step - r->ag_lead;
    }
    return 1;
}

/* Index of the first untaken ready entry, or -1. */
static int queue_find(tp_queue *q, const tp_ready *r)
{
    while (q->front < q->l.n && q->taken[q->front])
        q->front++;
    for (int i = q->front; i < q->l.n; i++)
        if (!q->taken[i] && is_ready(&q->l.v[i], r))
            return i;
    return -1;
}

static tp_task queue_take(tp_queue *q, int i)
{
    q->taken[i] = 1;
    q->left--;
    return q->l.v[i];
}

/* Split the remote reduce-scatter tiles at the head of list l (xs_tp_pace.split = S0; G compute
 * CTAs; docs/TP.md "Split first steps"): the first step holds G / S0 of them in S0 k-parts each
 * - every tile's parts 0 .. S0-2 first, then the last parts, so each last part follows its
 * tile's other parts in the same step -, the next step G / (S0 / 2) tiles in S0 / 2 parts, and
 * so on down to whole tiles; the rest of the list follows unchanged (S0 is at most the tile's
 * k-tiles). Scratch slots are numbered in order. A list that does not start with remote tiles
 * is left as it is. -1: out of memory. */
static int split_head(const xs_tp *t, tp_list *l, int G, int S0)
{
    const xs_tp_info *in = &t->in;
    const int KT = (in->gk[in->rs_gemm] + TP90C::BK - 1) / TP90C::BK;
    if (S0 > KT) /* a part has at least one k-tile */
        S0 = KT;
    int lead = 0; /* remote reduce-scatter tiles at the head, nothing else in their tasks */
    while (lead < l->n && l->v[lead].flags == TP_T_TILE && l->v[lead].gemm == in->rs_gemm &&
           l->v[lead].tm * XS_TP_BM / in->rs_rows != t->me)
        lead++;
    tp_list nl = {NULL, 0, 0};
    int i = 0, slot = 0;
    for (int S = S0; S >= 2 && i < lead; S /= 2) {
        int n1 = G / S;
        if (n1 > lead - i)
            n1 = lead - i;
        for (int p = 0; p < S; p++)
            for (int j = 0; j < n1; j++) {
                tp_task x = l->v[i + j];
                x.flags |= TP_T_SPLIT;
                XS_TP_SPLIT_PART(&x) = p;
                XS_TP_SPLIT_SLOT(&x) = slot + j * (S - 1);
                XS_TP_SPLIT_PARTS(&x) = S;
                if (list_push(&nl, x)) {
                    free(nl.v);
                    return -1;
                }
            }
        slot += n1 * (S - 1);
        i += n1;
    }
    for (; i < l->n; i++)
        if (list_push(&nl, l->v[i])) {
            free(nl.v);
            return -1;
        }
    free(l->v);
    *l = nl;
    return 0;
}

extern "C" int xs_tp_candidates(double cap_q, xs_tp_pace *out, int max)
{
    const double fin[3] = {0.6, 0.8, 0.95}, bur[2] = {0, 1.5}, cap[2] = {0, cap_q};
    const double ring_fin[3] = {0.3, 0.6, 0.95};
    int n = 0;
    for (int sp = 0; sp < 3; sp++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < (sp ? 1 : 2); c++)
                    if (n < max) {
                        const xs_tp_pace p = {fin[a], bur[b], cap[c], 2, sp, 0, 0};
                        out[n++] = p;
                    }
    for (int a = 0; a < 3 && n < max; a++) {
        const xs_tp_pace p = {ring_fin[a], 0, 0, 2, 1, 1, 0};
        out[n++] = p;
    }
    return n;
}

extern "C" void xs_tp_pace_front(xs_tp_pace *p)
{
    const xs_tp_pace f = {0.05, 0, 0, 2, 0, 1, 0};
    *p = f;
}

extern "C" xs_status xs_tp_order_shaped(xs_tp *t, int slot, const xs_tp_pace *pace,
                                        const xs_tp_costs *c, const xs_profile *prof)
{
    const xs_tp_info *in = &t->in;
    /* built for the compute CTAs of the current courier count (xs_tp_set_couriers) */
    const int P = t->P, me = t->me, G = t->grid - t->couriers, rbpr = in->rs_rows / XS_TP_BM;
    if (!pace || !(pace->finish > 0 && pace->finish <= 1) || pace->lead < 0 ||
        !(pace->cap_bytes >= 0) || !(pace->burst >= 0) || pace->spread < 0 || pace->spread > 2 ||
        pace->ring < 0 || pace->ring > 1 || pace->split < 0 || pace->split > XS_TP_SPLIT_MAX)
        return xs_seterr(XS_EINVAL, "tp: pace finish must be in (0, 1], lead, burst and cap >= 0, "
                         "spread 0, 1 or 2, ring 0 or 1, split 0..%d", XS_TP_SPLIT_MAX);
    if (pace->split > 1 && (t->couriers == 0 || t->s.op != XS_TP_GEMM_RS || P < 2 || pace->spread))
        return xs_seterr(XS_EINVAL, "tp %s P=%d: split tiles (pace split %d) need a gemm_rs order "
                         "with couriers over P > 1 ranks and stored tiles (spread 0)",
                         xs_tp_op_name(t->s.op), P, pace->split);
    if (!c || !(c->tile_ns[0] > 0) || (in->ngemm > 1 && !(c->tile_ns[1] > 0)))
        return xs_seterr(XS_EINVAL, "tp: shaping needs measured tile costs (a local run)");
    /* couriers push (tp_walk_pushes): no push in the list; a GEMM 0 tile of another shard is
     * ready once the couriers' pushes of its chunks have crossed the link (below) */
    const int cpush = t->couriers > 0 && in->ag && P > 1;

    /* queues: pushes (in the order the local GEMM tiles need them), remote reduce-scatter tiles
     * (owners interleaved so that tiles running together walk the same columns), local GEMM
     * tiles, own reduce-scatter tiles, reductions */
    tp_queue qp, qr, ql, qo;
    memset(&qp, 0, sizeof qp), memset(&qr, 0, sizeof qr);
    memset(&ql, 0, sizeof ql), memset(&qo, 0, sizeof qo);
    int *done = (int *)calloc((size_t)in->tiles_m, sizeof(int));
    int *last_step = (int *)calloc((size_t)in->tiles_m, sizeof(int));
    int *placed = (int *)calloc((size_t)P, sizeof(int));
    int *pstep = (int *)calloc((size_t)P * (in->ag_chunks > 0 ? in->ag_chunks : 1), sizeof(int));
    const size_t nch = (size_t)P * (in->ag_chunks > 0 ? in->ag_chunks : 1);
    int *pidx = (int *)malloc(nch * sizeof(int)); /* [P][ag_chunks] position in qp, or -1 */
    int bad = !done || !last_step || !placed || !pstep || !pidx;
    xs_status st = XS_OK;
    for (int g = 0; g < in->ngemm; g++) {
        if (g == in->rs_gemm) {
            /* per-owner rasters merged round robin over the other owners (ring: one after the
             * other) */
            tp_list per[XS_MAX_RANKS];
            memset(per, 0, sizeof per);
            for (int j = 1; j < P; j++)
                bad |= raster(&per[j], g, ((me + j) % P) * rbpr, ((me + j) % P + 1) * rbpr,
                              in->tiles_n[g]);
            const int each = rbpr * in->tiles_n[g];
            if (pace->ring) /* owner after owner: the naive order's raster */
                for (int j = 1; j < P; j++)
                    for (int i = 0; i < each && !bad; i++)
                        bad |= list_push(&qr.l, per[j].v[i]);
            else
                for (int i = 0; i < each && !bad; i++)
                    for (int j = 1; j < P; j++)
                        bad |= list_push(&qr.l, per[j].v[i]);
            for (int j = 1; j < P; j++)
                free(per[j].v);
            bad |= raster(&qo.l, g, me * rbpr, (me + 1) * rbpr, in->tiles_n[g]);
        } else {
            /* row groups interleaved over the shards (ring order from this rank): every shard's
             * first rows come early (the pushes are chunk-major, so a shard's first chunks are
             * the first to arrive), and in the mlp, row blocks of every owner complete early,
             * so remote GEMM 2 tiles become available all along */
            const int gs = rbpr < 8 ? rbpr : 8, ng = (rbpr + gs - 1) / gs;
            /* this rank's group j runs ahead of the other shards' group j (its rows are there
             * from the start), and the last round ends with its own group, so the last remote
             * GEMM 2 row blocks complete while local work remains to hide their drain */
            for (int j = -1; j < ng; j++)
                for (int i = 1; i <= P; i++) {
                    const int r = (me + i) % P, jj = i == P ? j + 1 : j;
                    if (jj < 0 || jj >= ng)
                        continue;
                    const int lo = r * rbpr + jj * gs;
                    const int hi = lo + gs < (r + 1) * rbpr ? lo + gs : (r + 1) * rbpr;
                    bad |= raster(&ql.l, g, lo, hi, in->tiles_n[g]);
                }
        }
    }
    /* pushes in the order the GEMM 1 tiles of other shards consume the chunks (to the mirror
     * rank, whose chunks a symmetric peer sends at the same time; see is_ready): a shard of one
     * row block needs all its chunks, so a chunk-major order would complete no shard before the
     * last chunk; with several row blocks per shard the order is row group by row group */
    if (in->ag && P > 1 && !bad) {
        for (size_t q = 0; q < nch; q++)
            pidx[q] = -1;
        for (int i = 0; i < ql.l.n && !bad; i++) {
            const tp_task *x = &ql.l.v[i];
            const int s = x->tm / rbpr;
            if (x->gemm != 0 || s == me)
                continue;
            const int d = tp_mirror(me, s, P), c1 = ag_last_chunk(in, x->tm);
            const int c0 =
                (int)((double)(x->tm - s * rbpr) * XS_TP_BM * in->ag_k * 2 / XS_TP_CHUNK);
            for (int cc = c0; cc <= c1; cc++)
                if (pidx[(size_t)d * in->ag_chunks + cc] < 0) {
                    pidx[(size_t)d * in->ag_chunks + cc] = qp.l.n;
                    bad |= list_push(&qp.l, mk_push(d, cc));
                }
        }
        for (int cc = 0; cc < in->ag_chunks && !bad; cc++) /* (none left: every chunk is needed) */
            for (int j = 1; j < P; j++)
                if (pidx[(size_t)((me + j) % P) * in->ag_chunks + cc] < 0) {
                    pidx[(size_t)((me + j) % P) * in->ag_chunks + cc] = qp.l.n;
                    bad |= list_push(&qp.l, mk_push((me + j) % P, cc));
                }
    }
    tp_list out = {NULL, 0, 0};
    tp_task *step = (tp_task *)calloc((size_t)G, sizeof(tp_task));
    tp_task *riders = (tp_task *)calloc((size_t)G, sizeof(tp_task));
    bad |= !step || !riders;
    bad |= queue_seal(&qp) | queue_seal(&qr) | queue_seal(&ql) | queue_seal(&qo);
    if (bad) {
        st = xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
        goto done;
    }
    {
        /* the pace: all remote bytes issued by `finish` of the estimated compute time */
        double remote = 0, compute = 0;
        for (int i = 0; i < qp.l.n && !cpush; i++)
            remote += task_bytes(t, &qp.l.v[i]);
        for (int i = 0; i < qr.l.n; i++) {
            remote += task_bytes(t, &qr.l.v[i]);
            compute += task_cost(c, &qr.l.v[i]);
        }
        for (int i = 0; i < ql.l.n; i++)
            compute += task_cost(c, &ql.l.v[i]);
        for (int i = 0; i < qo.l.n; i++)
            compute += task_cost(c, &qo.l.v[i]);
        const int items = qr.l.n + ql.l.n + qo.l.n;
        const int steps_est = (items + G - 1) / G > 0 ? (items + G - 1) / G : 1;
        const double d_step = compute / G / steps_est; /* mean step duration, ns */
        const double rate = remote / (pace->finish * (compute / G > 1 ? compute / G : 1));
        const double tile_b = (double)XS_TP_BM * XS_TP_BN * 2;
        const double credit = 0.5 * (qp.l.n && !cpush ? (double)XS_TP_CHUNK : tile_b);
        if (cpush) {
            /* the couriers push every chunk from the kernel's start, in qp's order (the order
             * the GEMM 0 tiles below need them, which the walk's order by need then follows),
             * at the link's rate (R, or their pace where lower): chunk (d, c) arrives in step
             * floor(bytes up to it / rate / d_step). No rate in the profile: all at step 0.
             * The queue is then empty: nothing is placed as a push. */
            double R = prof && prof->drain_bytes_per_ns > 0 ? prof->drain_bytes_per_ns : 0;
            if (t->cour_pace > 0 && (R == 0 || t->cour_pace < R))
                R = t->cour_pace;
            double pb = 0;
            for (int i = 0; i < qp.l.n; i++) {
                const tp_task *x = &qp.l.v[i];
                pb += task_bytes(t, x);
                const double st_ = R > 0 && d_step > 0 ? pb / R / d_step : 0;
                pstep[(size_t)x->push_rank * in->ag_chunks + x->push_chunk] =
                    st_ < 1e9 ? (int)st_ : 1000000000;
                qp.taken[i] = 1;
            }
            qp.left = 0;
            for (int r = 0; r < P; r++)
                placed[r] = r == me ? 0 : in->ag_chunks;
        }
        tp_ready rd;
        memset(&rd, 0, sizeof rd);
        rd.done = in->ngemm > 1 ? done : NULL;
        rd.last_step = last_step;
        rd.need = in->tiles_n[0];
        rd.placed = in->ag && P > 1 ? placed : NULL;
        rd.pstep = pstep;
        rd.in = in;
        rd.me = me, rd.P = P;
        const tp_ready *rdp = rd.done || rd.placed ? &rd : NULL;
        /* bytes left to place; compute left (ns summed over tasks) */
        double sent = 0, rem_left = remote, comp_left = compute;
        int off_r = 0, off_p = 0;
        for (int s = 0; qp.left + qr.left + ql.left + qo.left > 0; s++) {
            double budget = rate * (s + 1) * d_step + credit - sent;
            if (pace->burst > 0 && budget > pace->burst * rate * d_step + credit)
                budget = pace->burst * rate * d_step + credit; /* no catching up in one burst */
            /* floor: what is left must still drain while the compute left runs, one step
             * before its end (the last step's local work hides the last drain) */
            const double cover = comp_left / G - d_step;
            const double need = cover > d_step ? rem_left * d_step / cover : rem_left;
            if (budget < need)
                budget = need;
            if (pace->cap_bytes > 0 && budget > pace->cap_bytes)
                budget = pace->cap_bytes;
            double used = 0;
            int n = 0, nr = 0, np = 0, nrem = 0;
            rd.step = s;
            rd.lead = pace->lead;
            rd.ag_lead = pace->lead > 1 ? pace->lead : 1;
            for (int pass = 0; pass < 2 && n == 0 && np == 0; pass++) {
                /* 1. pushes ride on this step's tasks, within the budget; while more chunks are
                 * left than tiles to carry them (spread 2: always), a streamed rider takes up to
                 * XS_TP_PUSH_MAX consecutive chunks of one destination (else the rest would go
                 * as bursts of pushes alone after the tiles) */
                while (np < G) {
                    int i = queue_find(&qp, NULL);
                    if (i < 0)
                        break;
                    const double b = task_bytes(t, &qp.l.v[i]);
                    if (used + b > budget && !(np == 0 && nrem == 0 && budget > 0.5 * b))
                        break;
                    riders[np++] = queue_take(&qp, i);
                    used += b;
                    tp_task *rd_ = &riders[np - 1];
                    const bool multi = pace->spread == 2 ||
                                       (pace->spread && qp.left > qr.left + ql.left + qo.left);
                    for (int k = 1; multi && k < XS_TP_PUSH_MAX; k++) {
                        const int c2 = rd_->push_chunk + k;
                        if (c2 >= in->ag_chunks)
                            break;
                        const int i2 = pidx[(size_t)rd_->push_rank * in->ag_chunks + c2];
                        if (i2 < 0 || qp.taken[i2])
                            break;
                        const double b2 = task_bytes(t, &qp.l.v[i2]);
                        if (used + b2 > budget)
                            break;
                        queue_take(&qp, i2);
                        rd_->push_n = k + 1;
                        used += b2;
                    }
                }
                /* 2. remote tiles, within the budget */
                while (n < G) {
                    int i = queue_find(&qr, rdp);
                    if (i < 0)
                        break;
                    const double b = task_bytes(t, &qr.l.v[i]);
                    if (used + b > budget && !(np == 0 && nrem == 0 && budget > 0.5 * b))
                        break;
                    step[n++] = queue_take(&qr, i);
                    used += b;
                    nrem++;
                }
                nr = n;
                /* 3. local work: GEMM 0 tiles, then this rank's own reduce-scatter tiles */
                while (n < G) {
                    int i = queue_find(&ql, rdp);
                    if (i < 0)
                        i = -2;
                    if (i == -2) {
                        i = queue_find(&qo, rdp);
                        if (i < 0)
                            break;
                        step[n++] = queue_take(&qo, i);
                    } else {
                        step[n++] = queue_take(&ql, i);
                    }
                }
                /* 4. no local work left: remote tiles beyond the budget (drain-bound) */
                while (n < G) {
                    int i = queue_find(&qr, rdp);
                    if (i < 0)
                        break;
                    used += task_bytes(t, &qr.l.v[i]);
                    step[n++] = queue_take(&qr, i);
                    nr = n;
                }
                /* 5. nothing but pushes left, or nothing else ready (tiles waiting for their
                 * all-gathered chunks): pushes alone */
                if (qr.left + ql.left + qo.left == 0 || (pass == 1 && n == 0))
                    while (n + np < G) {
                        int i = queue_find(&qp, NULL);
                        if (i < 0)
                            break;
                        used += task_bytes(t, &qp.l.v[i]);
                        riders[np++] = queue_take(&qp, i);
                    }
                /* nothing was ready (waiting on the lead): the next pass relaxes it */
                rd.lead = 0;
                rd.ag_lead = 1; /* a push in an earlier step, at least */
                if (cpush) /* the couriers' pushes are on their way: the CTAs will wait */
                    rd.ag_lead = -1000000000;
            }
            if (n == 0 && np == 0) {
                st = xs_seterr(XS_EINVAL, "tp: shaping made no progress at step %d (internal)",
                               s);
                goto done;
            }
            /* place: remote tiles rotate over the CTAs step by step; pushes ride from their own
             * rotating offset; a push with no task to ride on is a task of its own */
            const int base = (int)out.n;
            for (int j = 0; j < G; j++) {
                tp_task x;
                memset(&x, 0, sizeof x);
                if (list_push(&out, x)) {
                    st = xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
                    goto done;
                }
            }
            for (int j = 0; j < n; j++) {
                tp_task x = step[j];
                if (pace->spread && x.gemm == in->rs_gemm && x.tm * XS_TP_BM / in->rs_rows != me)
                    x.flags |= TP_T_DEFER; /* kept only if the CTA's next task is a tile */
                out.v[base + (j + off_r) % G] = x;
            }
            for (int j = 0; j < np; j++) {
                tp_task *x = &out.v[base + (j + off_p) % G];
                x->flags |= TP_T_PUSH;
                if (pace->spread && (x->flags & TP_T_TILE))
                    x->flags |= TP_T_SPREAD;
                x->push_rank = riders[j].push_rank;
                x->push_chunk = riders[j].push_chunk;
                x->push_n = riders[j].push_n;
            }
            off_r = (off_r + nr) % G;
            off_p = (off_p + np) % G;
            sent += used;
            for (int j = 0; j < np; j++) {
                const int r = riders[j].push_rank, pn = riders[j].push_n > 1 ? riders[j].push_n : 1;
                for (int k = 0; k < pn; k++)
                    pstep[(size_t)r * in->ag_chunks + riders[j].push_chunk + k] = s;
                placed[r] += pn;
            }
            rem_left -= used;
            for (int j = 0; j < n; j++)
                comp_left -= task_cost(c, &step[j]);
            for (int j = 0; j < n; j++)
                if (step[j].gemm == 0 && in->ngemm > 1) {
                    done[step[j].tm]++;
                    last_step[step[j].tm] = s;
                }
        }
        /* a deferred tile streams through the CTA's next task's main loop: keep the mark only
         * where that task is a tile (else the stores would wait, then go as one burst) */
        for (int i = 0; i < out.n; i++)
            if ((out.v[i].flags & TP_T_DEFER) &&
                (i + G >= out.n || !(out.v[i + G].flags & TP_T_TILE)))
                out.v[i].flags &= ~TP_T_DEFER;
        /* reductions last, packed */
        for (int i = 0; i < in->reduce_tasks; i++)
            if (list_push(&out, mk_reduce(i))) {
                st = xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
                goto done;
            }
    }
    if (pace->split > 1 && split_head(t, &out, G, pace->split)) {
        st = xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
        goto done;
    }
    st = tp_store_order(t, slot, &out, t->couriers);
    out.v = NULL;
done:
    free(out.v);
    free(step);
    free(riders);
    free(done);
    free(last_step);
    free(placed);
    free(pstep);
    free(pidx);
    queue_free(&qp);
    queue_free(&qr);
    queue_free(&ql);
    queue_free(&qo);
    return st;
}

/* ---- the model of an order ----------------------------------------------------------------------- */

/* Completion (ns) of `sched` after `lead` ns of compute: max(makespan, last byte drained). */
static xs_status sim_total(const xs_profile *p, const xs_schedule *sc, double lead, double *ns)
{
    if (sc->nrows == 0) {
        *ns = lead;
        return XS_OK;
    }
    double chunks = 0;
    const double cb = p->chunk_bytes > 1 ? p->chunk_bytes : 1;
    for (int r = 0; r < sc->nrows; r++)
        chunks += sc->rows[r].producers * ceil((double)sc->rows[r].bytes_per_producer / cb);
    xs_sim_opts o;
    memset(&o, 0, sizeof o);
    o.record_backlog = 1;
    o.max_samples = (size_t)chunks + 16; /* never decimated: the last sample is the last byte */
    xs_result res;
    XS_TRY(xs_simulate(p, sc, &o, &res));
    double drained = 0;
    if (res.nbacklog) {
        const xs_sample *last = &res.backlog[res.nbacklog - 1];
        drained = last->t_ns + last->backlog_bytes / p->drain_bytes_per_ns;
    }
    *ns = lead + (res.makespan_ns > drained ? res.makespan_ns : drained);
    xs_result_free(&res);
    return XS_OK;
}

/* An order with couriers (docs/TP.md "Couriers (sm90)"): the compute CTAs run steps of G'
 * tasks, each step lasting its mean task cost per CTA (the measured costs; no link); the
 * couriers' pushes are ready at the start and go first; a remote tile's bytes are ready at the
 * end of its task's step and follow in list order; the link carries them at min(R, the pace,
 * C x the per-courier rate of xs_tp_set_courier_rate) from the first ready byte on. model =
 * max(compute end, last byte over the link); ideal = the compute end. No capacity, no issue
 * cost, no copy latency beyond that rate: a simple bound-like model, stated as such. */
static xs_status tp_predict_couriers(xs_tp *t, int slot, const xs_profile *p,
                                     const xs_tp_costs *c, xs_tp_pred *out)
{
    const int G = tp_slot_grid(t, slot), n = t->ntasks[slot], S = (n + G - 1) / G;
    const tp_task *v = t->h_tasks[slot];
    double *end = (double *)calloc((size_t)S, sizeof(double));
    if (!end)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a schedule");
    for (int i = 0; i < n; i++) {
        tp_task x = v[i];
        end[i / G] += task_cost(c, &x) / G;
    }
    for (int s = 1; s < S; s++)
        end[s] += end[s - 1];
    /* the link: R, or the couriers' pace, or what C couriers copy, whichever is lowest */
    double R = p->drain_bytes_per_ns > 0 ? p->drain_bytes_per_ns : 1e-9;
    const char *lim = "R";
    if (t->cour_pace > 0 && t->cour_pace < R)
        R = t->cour_pace, lim = "their pace";
    if (t->cour_rate > 0 && t->scour[slot] * t->cour_rate < R)
        R = t->scour[slot] * t->cour_rate, lim = "their copy rate";
    /* the couriers' pushes first: ready at the start, on the link before any tile */
    double link = 0;
    for (int e = 0; e < t->npush[slot]; e++) {
        const int w = t->walk[slot][e];
        const tp_task x = mk_push(XS_TP_WALK_RANK(w, t->in.ag_chunks),
                                  XS_TP_WALK_CHUNK(w, t->in.ag_chunks));
        const double b = task_bytes(t, &x);
        link += b / R;
        out->bytes += b;
    }
    for (int i = 0; i < n; i++) {
        tp_task x = v[i];
        const double b = task_bytes(t, &x);
        if (b > 0) {
            link = (link > end[i / G] ? link : end[i / G]) + b / R;
            out->bytes += b;
        }
    }
    out->ideal_ns = S > 0 ? end[S - 1] : 0;
    out->model_ns = link > out->ideal_ns ? link : out->ideal_ns;
    out->rows = 0;
    out->criterion_ok = -1;
    snprintf(out->how, sizeof out->how, "%d couriers: link at %.1f B/ns (%s) from the first ready "
             "remote byte (%d pushes first), compute on %d CTAs (fluid model)", t->scour[slot], R,
             lim, t->npush[slot], G);
    free(end);
    return XS_OK;
}

extern "C" xs_status xs_tp_predict(xs_tp *t, int slot, const xs_profile *p, const xs_tp_costs *c,
                                   int with_plan, xs_tp_pred *out)
{
    memset(out, 0, sizeof *out);
    if (slot < 0 || slot >= XS_TP_SLOTS || !t->ntasks[slot])
        return xs_seterr(XS_EINVAL, "tp: order slot %d is empty", slot);
    if (!c)
        return xs_seterr(XS_EINVAL, "tp: prediction needs measured costs");
    if (t->scour[slot] > 0)
        return tp_predict_couriers(t, slot, p, c, out);
    const int G = t->grid, n = t->ntasks[slot], S = (n + G - 1) / G;
    const tp_task *v = t->h_tasks[slot];
    /* per step: bytes stored at its end (burst), bytes streamed through its main loops, mean
     * compute per CTA */
    double *bytes = (double *)calloc((size_t)S, sizeof(double));
    double *strm = (double *)calloc((size_t)S + 1, sizeof(double));
    double *comp = (double *)calloc((size_t)S, sizeof(double));
    if (!bytes || !strm || !comp) {
        free(bytes);
        free(strm);
        free(comp);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a schedule");
    }
    for (int i = 0; i < n; i++) {
        const int s = i / G;
        tp_task x = v[i];
        double b = task_bytes(t, &x);
        if ((x.flags & (TP_T_SPREAD | TP_T_PUSH | TP_T_TILE)) ==
            (TP_T_SPREAD | TP_T_PUSH | TP_T_TILE)) {
            tp_task push = x;
            push.flags = TP_T_PUSH;
            const double pb = task_bytes(t, &push);
            strm[s] += pb; /* through this tile's main loop */
            b -= pb;
        }
        if ((x.flags & TP_T_DEFER) && s + 1 < S)
            strm[s + 1] += b; /* through the CTA's next tile */
        else
            bytes[s] += b;
        comp[s] += task_cost(c, &x) / G;
    }
    /* the timeline, one (bytes, gap) pair after the other: step s computes for comp[s] while its
     * streamed bytes go out in NS equal parts, then stores its burst; pairs with no bytes fold
     * their gap into the previous row (or the lead) */
    const int NS = 8;
    xs_schedule sc;
    memset(&sc, 0, sizeof sc);
    double lead = 0, carry = 0; /* carry: burst bytes waiting for the next row */
    xs_status st = XS_OK;
    for (int s = 0; s < S && st == XS_OK; s++) {
        out->bytes += bytes[s] + strm[s];
        const int parts = strm[s] >= 16.0 * G ? NS : 1;
        for (int j = 0; j < parts && st == XS_OK; j++) {
            const double b = carry + (parts > 1 ? strm[s] / NS : strm[s]);
            const double gap = comp[s] / parts;
            carry = 0;
            const int64_t per = (int64_t)llround(b / G / 16.0) * 16;
            if (per < 16) {
                if (sc.nrows)
                    sc.rows[sc.nrows - 1].gap_ns += gap;
                else
                    lead += gap;
            } else {
                st = xs_schedule_append(&sc, G, per, gap);
            }
        }
        carry = bytes[s];
    }
    if (st == XS_OK && carry / G >= 8.0)
        st = xs_schedule_append(&sc, G, (int64_t)llround(carry / G / 16.0) * 16, 0.0);
    free(bytes);
    free(strm);
    free(comp);
    if (st == XS_OK) {
        xs_profile ideal = *p;
        ideal.drain_bytes_per_ns = 1e9;
        ideal.capacity_bytes = 1e15;
        ideal.capacity_bytes_per_producer = 0;
        st = sim_total(p, &sc, lead, &out->model_ns);
        if (st == XS_OK)
            st = sim_total(&ideal, &sc, lead, &out->ideal_ns);
    }
    out->rows = sc.nrows;
    out->criterion_ok = 1;
    if (st == XS_OK && sc.nrows && !with_plan) {
        out->criterion_ok = -1;
        snprintf(out->how, sizeof out->how, "(not planned)");
    } else if (st == XS_OK && sc.nrows) {
        xs_plan pl;
        st = xs_plan_schedule(p, &sc, NULL, &pl);
        if (st == XS_OK) {
            out->criterion_ok = pl.criterion_ok;
            snprintf(out->how, sizeof out->how, "%s", pl.how);
            xs_plan_free(&pl);
        }
    } else if (st == XS_OK) {
        snprintf(out->how, sizeof out->how, "no remote bytes");
    }
    xs_schedule_free(&sc);
    return st;
}

/* ---- runs -------------------------------------------------------------------------------------- */



/* Poison every destination a run writes through `tab`, and this rank's outputs. */
static xs_status tp_poison(xs_tp *t, const xs_wintab *tab, cudaStream_t s)
{
    const xs_tp_info *in = &t->in;
    const uint32_t w = 0xffffffffu; /* bf16 NaN pairs: never a result */
    for (int r = 0; r < t->P; r++) {
        if (in->rs_gemm >= 0)
            XS_TRY(tp_word(s, tab->data[r] + in->rs_off + (size_t)t->me * in->slot_bytes,
                           in->slot_bytes, w));
        if (in->ag && r != t->me)
            XS_TRY(tp_word(s, tab->data[r] + (size_t)t->me * in->shard_bytes, in->shard_bytes, w));
    }
    if (t->y)
        XS_TRY(tp_word(s, t->y, (size_t)in->rs_rows * in->rs_n * 2, w));
    if (t->out0)
        XS_TRY(tp_word(s, t->out0, (size_t)t->s.m * in->out_n[0] * 2, w));
    return XS_OK;
}

static xs_status tp_flush(xs_tp *t, cudaStream_t s, int salt)
{
    XS_CU(cudaMemsetAsync(t->flush, salt & 0xff, t->flush_bytes, s));
    return XS_OK;
}

static const char *wait_kind(unsigned long long detail)
{
    switch ((int)(detail >> 60)) {
    case 1: return "a shard chunk's arrival flag";
    case 2: return "the GEMM 1 tiles of its row block";
    case 3: return "a source's partial-tile flag";
    case 4: return "an outbox tile's ready flag (courier)";
    case 5: return "an earlier part of its split tile (scratch slot flag)";
    default: return "a flag";
    }
}

extern "C" xs_status xs_tp_run(xs_tp *t, int slot, const xs_tp_run_opts *o, cudaStream_t s,
                               float *ms)
{
    xs_tp_run_opts def;
    memset(&def, 0, sizeof def);
    if (!o)
        o = &def;
    if (slot < 0 || slot >= XS_TP_SLOTS || !t->ntasks[slot])
        return xs_seterr(XS_EINVAL, "tp: order slot %d is empty", slot);
    if (t->plan_only)
        return xs_seterr(XS_EINVAL, "tp: a plan-only context cannot run");
    const xs_tp_info *in = &t->in;
    if (!xs_tp_engine_streams(t->engine))
        for (int i = 0; i < t->ntasks[slot]; i++)
            if (t->h_tasks[slot][i].flags & (TP_T_DEFER | TP_T_SPREAD))
                return xs_seterr(XS_EINVAL, "tp: engine %s does not stream stores, and task %d "
                                 "of slot %d is streamed (use an order with spread = 0)",
                                 xs_tp_engine_name(t->engine), i, slot);
    /* couriers: the count the order was built for (xs_tp_set_couriers) */
    const int ncour = t->scour[slot];
    if (ncour > 0 && t->engine != XS_TP_ENGINE_SM90)
        return xs_seterr(XS_EINVAL, "tp: slot %d's order was built for %d couriers, which only the "
                         "sm90 engine runs (engine %s)", slot, ncour, xs_tp_engine_name(t->engine));
    if (ncour > 0 && t->nwalk[slot] > t->npush[slot] && !t->outbox)
        return xs_seterr(XS_EINVAL, "tp: slot %d has couriers but the context no outbox "
                         "(xs_tp_set_couriers)", slot);
    if (t->nsplit[slot] > 0 && (ncour == 0 || !t->split || !t->virt))
        return xs_seterr(XS_EINVAL, "tp: slot %d holds %d split tiles, which only a courier run "
                         "with virtual peers takes (their partials are verified against the "
                         "fp32 reference at the destination)", slot, t->nsplit[slot]);
    const xs_wintab *tab = o->local ? &t->lt : &t->vt;
    const unsigned long long epoch = o->local ? ++t->epoch_l : ++t->epoch_v;
    t->last = TP_RUN_NONE;

    if (t->dirty[slot])
        XS_TRY(tp_upload_order(t, slot, s));
    XS_TRY(tp_poison(t, tab, s));
    if (ncour > 0 && t->outbox) /* a courier that copied before the tile was written would
                                   deliver poison, not the previous run's equal bytes */
        XS_TRY(tp_word(s, t->outbox, (size_t)(t->P - 1) * in->slot_bytes, 0xffffffffu));
    XS_CU(cudaMemsetAsync(t->rb_count, 0, (size_t)in->tiles_m * sizeof(unsigned), s));
    XS_CU(cudaMemsetAsync(t->status, 0, sizeof(xs_devstatus), s));
    XS_CU(cudaMemsetAsync(t->d_list_sum, 0, sizeof(unsigned long long), s));
    /* virtual peers, fused: the other shards were placed before the launch; a GEMM 1 tile on
     * shard s waits until this rank's own chunk reached the mirror rank (when a symmetric peer's
     * chunk would arrive), so the fused timing includes the all-gather's arrival as the unfused
     * one does. The local control (the GEMM alone) does not wait. */
    const int sym = !o->local && t->virt && in->ag && t->P > 1;
    /* test hook: one received chunk (chunk 0 of shard me + 1) that never arrives */
    uint64_t *fault_flag = NULL, *skip_flag = NULL;
    if (o->fault == XS_TP_FAULT_AG_FLAG && in->ag && t->P > 1) {
        if (sym) {
            skip_flag = tab->flags[tp_mirror(t->me, (t->me + 1) % t->P, t->P)] +
                        (size_t)t->me * in->ag_chunks;
        } else {
            fault_flag = tab->flags[t->me] + (size_t)((t->me + 1) % t->P) * in->ag_chunks;
            XS_TRY(tp_setflags(s, fault_flag, 1, 0));
        }
    }
    /* the poison has crossed the link before the timed launch starts (nothing of it queues
     * in front of the kernel's stores) */
    XS_CU(cudaStreamSynchronize(s));
    if (o->flush_l2)
        XS_TRY(tp_flush(t, s, (int)epoch));

    tp_args a;
    memset(&a, 0, sizeof a);
    a.tasks = t->d_tasks[slot];
    a.ntasks = t->ntasks[slot];
    a.me = t->me;
    a.P = t->P;
    const xs_gemm_problem none = {NULL, NULL, 8, NULL, 8, 0, 0, 8};
    a.g[0] = a.g[1] = none;
    {
        xs_gemm_problem *g0 = &a.g[0];
        g0->a = t->s.op == XS_TP_GEMM_RS ? t->a_rs : (const xs_bf16 *)tab->data[t->me];
        g0->a_rows = NULL;
        g0->lda = in->gk[0];
        g0->b = t->w[0];
        g0->ldb = in->gk[0];
        g0->m = in->gm[0], g0->n = in->gn[0], g0->k = in->gk[0];
        XS_TRY(xs_gemm_check(g0, -1, NULL));
        if (in->ngemm > 1) {
            xs_gemm_problem *g1 = &a.g[1];
            g1->a = t->out0; /* h */
            g1->a_rows = NULL;
            g1->lda = in->out_n[0];
            g1->b = t->w[1];
            g1->ldb = in->gk[1];
            g1->m = in->gm[1], g1->n = in->gn[1], g1->k = in->gk[1];
            XS_TRY(xs_gemm_check(g1, -1, NULL));
        }
    }
    a.out0 = t->out0;
    a.ldo0 = in->out_n[0];
    a.swiglu0 = in->swiglu0;
    a.rs_gemm = in->rs_gemm;
    a.rs_rows = in->rs_rows;
    a.rs_n = in->rs_n;
    a.rs_tiles_n = in->rs_gemm >= 0 ? in->tiles_n[in->rs_gemm] : 1;
    a.t_own = in->t_own;
    a.rs_flag0 = in->rs_flag0;
    a.rs_off = in->rs_off;
    a.slots = (int)t->layout;
    a.y = t->y;
    a.ag = in->ag;
    a.shard_rows = in->rs_rows;
    a.ag_k = in->ag_k;
    a.ag_chunks = in->ag_chunks;
    a.shard_bytes = in->shard_bytes;
    a.rb_count = in->ngemm > 1 ? t->rb_count : NULL;
    a.n0_per_rb = in->tiles_n[0];
    a.epoch = epoch;
    a.timeout_ns = o->timeout_ns ? o->timeout_ns : 2000000000ull;
    a.task_ns = t->task_ns;
    a.cta_ns = t->cta_ns;
    a.status = t->status;
    a.fault = o->fault;
    a.eager_flags = o->eager_flags != 0;
    a.scratch = t->scratch;
    a.list_sum = t->d_list_sum;
    a.ag_sym = sym;
    a.skip_flag = skip_flag;
    a.ag_shadow = t->ag_shadow;

    if (t->engine == XS_TP_ENGINE_SM90) {
        /* tensor maps of this run's operands (GEMM 0's A is the gathered buffer of the table
         * this run uses); host work outside the timed interval */
        tp90_maps maps;
        memset(&maps, 0, sizeof maps);
        for (int g = 0; g < in->ngemm; g++) {
            const xs_gemm_problem *p = &a.g[g];
            XS_TRY(xs_gemm90_tmap(&maps.a[g], p->a, p->m, p->k, p->lda, TP90C::BM));
            XS_TRY(xs_gemm90_tmap(&maps.b[g], p->b, p->n, p->k, p->ldb, TP90C::BN));
        }
        tp90_cour k;
        memset(&k, 0, sizeof k);
        k.ncomp = t->grid - ncour;
        k.ncour = ncour;
        if (ncour > 0) {
            k.walk = t->d_walk[slot];
            k.nwalk = t->nwalk[slot];
            k.outbox = t->outbox;
            k.slot_bytes = in->slot_bytes;
            k.ready = t->ready ? t->ready + (o->local ? (size_t)(t->P - 1) * in->t_own : 0)
                               : NULL;
            k.pace_bytes_per_ns = (float)(t->cour_pace / ncour);
            k.split = t->split;
            k.split_ready = t->split_ready ? t->split_ready +
                                                 (o->local ? (size_t)TP_SPLIT_SLOTS(t->grid) : 0)
                                           : NULL;
            XS_CU(cudaFuncSetAttribute(tp90_kernel<TP90K>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       TP90K::SMEM_BYTES));
        } else {
            XS_CU(cudaFuncSetAttribute(tp90_kernel<TP90C>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       TP90C::SMEM_BYTES));
        }
        XS_CU(cudaEventRecord(t->ev0, s));
        if (ncour > 0)
            tp90_kernel<TP90K><<<t->grid, TP90K::THREADS, TP90K::SMEM_BYTES, s>>>(a, *tab, maps,
                                                                                 k);
        else
            tp90_kernel<TP90C><<<t->grid, TP90C::THREADS, TP90C::SMEM_BYTES, s>>>(a, *tab, maps,
                                                                                 k);
    } else {
        XS_CU(cudaFuncSetAttribute(tp_kernel<TPC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   TPC::SMEM_BYTES));
        XS_CU(cudaEventRecord(t->ev0, s));
        tp_kernel<TPC><<<t->grid, TPC::THREADS, TPC::SMEM_BYTES, s>>>(a, *tab);
    }
    XS_CU_LAUNCH();
    XS_CU(cudaEventRecord(t->ev1, s));
    /* backstop: every device wait is bounded; allow for all of them in a chain plus the work */
    const double bound_s = 60.0 + 4.0 * (double)a.timeout_ns * 1e-9;
    XS_TRY(xs_event_wait(t->ev1, bound_s, "tp kernel"));
    float e_ms = 0;
    XS_CU(cudaEventElapsedTime(&e_ms, t->ev0, t->ev1));
    if (ms)
        *ms = e_ms;
    xs_devstatus ds;
    unsigned long long lsum = 0;
    XS_CU(cudaMemcpyAsync(&ds, t->status, sizeof ds, cudaMemcpyDeviceToHost, s));
    XS_CU(cudaMemcpyAsync(&lsum, t->d_list_sum, sizeof lsum, cudaMemcpyDeviceToHost, s));
    XS_CU(cudaStreamSynchronize(s));
    if (fault_flag) {
        XS_TRY(tp_setflags(s, fault_flag, 1, XS_TP_ARRIVED));
        XS_CU(cudaStreamSynchronize(s));
    }
    t->last = o->local ? TP_RUN_LOCAL : TP_RUN_FUSED;
    t->last_slot = slot;
    t->last_epoch = epoch;
    t->last_failed = ds.code != 0;
    if (ds.code) {
        const unsigned task = (unsigned)(ds.detail & 0xffffffffu);
        const unsigned idx = (unsigned)((ds.detail >> 32) & 0x0fffffffu);
        if (ds.code == XS_DEVERR_TIMEOUT)
            return xs_seterr(XS_ETIMEOUT, "tp %s (%s): %s %u, task %u waited longer than %.3f s "
                             "for %s (%s %u)", xs_tp_op_name(t->s.op),
                             o->local ? "local" : "fused",
                             (int)ds.block >= t->grid - ncour ? "courier CTA" : "CTA", ds.block,
                             task, (double)a.timeout_ns * 1e-9, wait_kind(ds.detail),
                             (ds.detail >> 60) == 2 ? "row block" : "flag", idx);
        return xs_seterr(XS_ECUDA, "tp %s: device failure %u in CTA %u (detail %llu)",
                         xs_tp_op_name(t->s.op), ds.code, ds.block, ds.detail);
    }
    /* the compute CTAs hash every task they read, the couriers every walk entry */
    const unsigned long long want = t->list_hash[slot] + (ncour > 0 ? t->walk_hash[slot] : 0ull);
    if (lsum != want) {
        t->last_failed = 1;
        return xs_seterr(XS_ECUDA, "tp %s (%s): the kernel read a task list other than the one "
                         "uploaded to slot %d (task hash %016llx, expected %016llx%s)",
                         xs_tp_op_name(t->s.op), o->local ? "local" : "fused", slot, lsum, want,
                         ncour > 0 ? ", list and courier walk" : "");
    }
    return XS_OK;
}

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double med(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

extern "C" xs_status xs_tp_costs_of_last(xs_tp *t, xs_tp_costs *c)
{
    memset(c, 0, sizeof *c);
    if (t->last != TP_RUN_LOCAL && t->last != TP_RUN_FUSED)
        return xs_seterr(XS_EINVAL, "tp: no fused or local run to take costs from");
    const int slot = t->last_slot, n = t->ntasks[slot], G = tp_slot_grid(t, slot);
    unsigned long long *tn = (unsigned long long *)malloc((size_t)n * sizeof *tn);
    unsigned long long *cn = (unsigned long long *)malloc((size_t)2 * G * sizeof *cn);
    double *d[4];
    int nd[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++)
        d[i] = (double *)malloc((size_t)n * sizeof(double));
    if (!tn || !cn || !d[0] || !d[1] || !d[2] || !d[3]) {
        free(tn), free(cn);
        for (int i = 0; i < 4; i++)
            free(d[i]);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for %d stamps", n);
    }
    xs_status st = XS_OK;
    if (cudaMemcpy(tn, t->task_ns, (size_t)n * sizeof *tn, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(cn, t->cta_ns, (size_t)2 * G * sizeof *cn, cudaMemcpyDeviceToHost) !=
            cudaSuccess) {
        st = xs_seterr(XS_ECUDA, "tp: reading stamps: %s", cudaGetErrorString(cudaGetLastError()));
    } else {
        const tp_task *v = t->h_tasks[slot];
        for (int b = 0; b < G && b < n; b++) {
            unsigned long long prev = cn[2 * b];
            for (int i = b; i < n; i += G) {
                const double dur = tn[i] > prev ? (double)(tn[i] - prev) : 0.0;
                prev = tn[i] > prev ? tn[i] : prev;
                const int f = v[i].flags & (TP_T_TILE | TP_T_PUSH | TP_T_REDUCE);
                if (f == TP_T_TILE)
                    d[v[i].gemm][nd[v[i].gemm]++] = dur;
                else if (f == TP_T_PUSH)
                    d[2][nd[2]++] = dur;
                else if (f == TP_T_REDUCE)
                    d[3][nd[3]++] = dur;
            }
        }
        c->tile_ns[0] = med(d[0], nd[0]);
        c->tile_ns[1] = med(d[1], nd[1]);
        c->push_ns = med(d[2], nd[2]);
        c->reduce_ns = med(d[3], nd[3]);
        c->n_tile[0] = nd[0], c->n_tile[1] = nd[1], c->n_push = nd[2], c->n_reduce = nd[3];
    }
    free(tn), free(cn);
    for (int i = 0; i < 4; i++)
        free(d[i]);
    return st;
}

/* ---- real peers: the caller's collectives (xs_tp_set_coll) ---------------------------------------- */

/* Reduce-scatter (send [m, n] partial, receive [m/P, n]) or all-gather (send own shard, receive
 * the gathered buffer, in place) through the caller's collectives. */
static xs_status tp_nccl(xs_tp *t, int allgather, const void *send, void *recv, size_t count,
                         cudaStream_t s)
{
    if (!t->have_coll || !(allgather ? (void *)t->coll.all_gather
                                     : (void *)t->coll.reduce_scatter_bf16))
        return xs_seterr(XS_EUNSUPPORTED, "tp unfused on real peers: no collectives were given "
                         "(xs_tp_set_coll)");
    return allgather ? t->coll.all_gather(t->coll.ctx, send, recv, count * 2, s)
                     : t->coll.reduce_scatter_bf16(t->coll.ctx, send, recv, count, s);
}

/* ---- the unfused baseline ------------------------------------------------------------------------ */

static xs_status tp_unfused_alloc(xs_tp *t)
{
    const xs_tp_info *in = &t->in;
    const size_t m = (size_t)t->s.m;
    if (t->s.op != XS_TP_GEMM_RS && !t->u_c0)
        XS_CU(cudaMalloc((void **)&t->u_c0, m * in->gn[0] * 2));
    if (t->s.op == XS_TP_MLP && !t->u_h)
        XS_CU(cudaMalloc((void **)&t->u_h, m * in->out_n[0] * 2));
    if (in->rs_gemm >= 0 && !t->u_c) {
        XS_CU(cudaMalloc((void **)&t->u_c, m * in->rs_n * 2));
        XS_CU(cudaMalloc((void **)&t->u_y, (size_t)in->rs_rows * in->rs_n * 2));
    }
    return XS_OK;
}

extern "C" xs_status xs_tp_run_unfused(xs_tp *t, xs_cublas *cb, cudaStream_t s, float *ms)
{
    if (!cb)
        return xs_seterr(XS_EINVAL, "tp unfused: no cuBLAS handle");
    if (t->plan_only)
        return xs_seterr(XS_EINVAL, "tp: a plan-only context cannot run");
    const xs_tp_info *in = &t->in;
    const int P = t->P, me = t->me, peer = !t->virt && P > 1;
    const size_t m = (size_t)t->s.m;
    XS_TRY(tp_unfused_alloc(t));
    t->last = TP_RUN_NONE;
    /* poison what this run writes: the other ranks' windows and the outputs (real peers: what
     * this rank receives, the other shards of its own gathered buffer; the collectives write
     * no other window) */
    const uint32_t w = 0xffffffffu;
    for (int r = 0; r < P; r++) {
        if (r == me)
            continue;
        if (peer) {
            if (in->ag)
                XS_TRY(tp_word(s, t->vt.data[me] + (size_t)r * in->shard_bytes, in->shard_bytes,
                               w));
            continue;
        }
        if (in->rs_gemm >= 0)
            XS_TRY(tp_word(s, t->vt.data[r] + in->rs_off + (size_t)me * in->slot_bytes,
                           in->slot_bytes, w));
        if (in->ag)
            XS_TRY(tp_word(s, t->vt.data[r] + (size_t)me * in->shard_bytes, in->shard_bytes, w));
    }
    if (t->u_y)
        XS_TRY(tp_word(s, t->u_y, (size_t)in->rs_rows * in->rs_n * 2, w));
    if (t->u_c0)
        XS_TRY(tp_word(s, t->u_c0, m * in->gn[0] * 2, w));
    XS_CU(cudaStreamSynchronize(s)); /* the poison has crossed the link before timing */
    XS_TRY(tp_flush(t, s, 0x5a));

    char *own = t->vt.data[me];
    XS_CU(cudaEventRecord(t->ev0, s));
    /* all-gather */
    if (in->ag) {
        if (peer) {
            XS_TRY(tp_nccl(t, 1, own + (size_t)me * in->shard_bytes, own, in->shard_bytes / 2, s));
        } else {
            for (int j = 1; j < P; j++) {
                const int r = (me + j) % P;
                XS_CU(cudaMemcpyAsync(t->vt.data[r] + (size_t)me * in->shard_bytes,
                                      own + (size_t)me * in->shard_bytes, in->shard_bytes,
                                      cudaMemcpyDefault, s));
            }
        }
    }
    /* GEMMs */
    if (t->s.op == XS_TP_GEMM_RS) {
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->s.m, in->gn[0], in->gk[0], t->a_rs, t->w[0], 1, t->u_c,
                                   0));
    } else {
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->s.m, in->gn[0], in->gk[0], own, t->w[0], 1, t->u_c0,
                                   0));
        if (t->s.op == XS_TP_MLP) {
            const size_t nh = m * in->out_n[0];
            tp_swiglu_kernel<xs_bf16><<<tp_blocks(nh, 256), 256, 0, s>>>(t->u_c0, t->u_h, NULL,
                                                                         t->s.m, in->gn[0]);
            XS_CU_LAUNCH();
            XS_TRY(xs_cublas_gemm_bf16(cb, s, t->s.m, in->gn[1], in->gk[1], t->u_h, t->w[1], 1,
                                       t->u_c, 0));
        }
    }
    /* reduce-scatter */
    if (in->rs_gemm >= 0) {
        if (peer) {
            XS_TRY(tp_nccl(t, 0, t->u_c, t->u_y, (size_t)in->rs_rows * in->rs_n, s));
        } else {
            for (int j = 1; j < P; j++) {
                const int r = (me + j) % P;
                XS_CU(cudaMemcpyAsync(t->vt.data[r] + in->rs_off + (size_t)me * in->slot_bytes,
                                      (const char *)t->u_c + (size_t)r * in->slot_bytes,
                                      in->slot_bytes, cudaMemcpyDefault, s));
            }
            /* this rank's copies are row-major (contiguous); the partials it received are read
             * in the context's slot layout */
            const size_t n8 = (size_t)in->rs_rows * in->rs_n / 8;
            tp_sum_kernel<<<tp_blocks(n8, 256), 256, 0, s>>>(
                (const xs_bf16 *)(own + in->rs_off), (int)t->layout,
                t->u_c + (size_t)me * in->rs_rows * in->rs_n, P, me, in->rs_rows, in->rs_n,
                t->u_y);
            XS_CU_LAUNCH();
        }
    }
    XS_CU(cudaEventRecord(t->ev1, s));
    XS_TRY(xs_event_wait(t->ev1, 120.0, "tp unfused"));
    float e_ms = 0;
    XS_CU(cudaEventElapsedTime(&e_ms, t->ev0, t->ev1));
    if (ms)
        *ms = e_ms;
    t->last = TP_RUN_UNFUSED;
    return XS_OK;
}

/* ---- references -------------------------------------------------------------------------------- */

/* ref_y from this rank's fp32 partial and the other sources' bf16 partials of its rows: those
 * placed in its fused window (virtual peers), or, with real peers, those its local control
 * table holds (placed, then the sources' own after xs_tp_exchange_expectation). */
static xs_status tp_ref_y(xs_tp *t)
{
    const xs_tp_info *in = &t->in;
    const size_t ny = (size_t)in->rs_rows * in->rs_n;
    const char *own = t->virt ? t->vt.data[t->me] : t->lt.data[t->me];
    tp_ref_y_kernel<<<tp_blocks(ny, 256), 256, 0, t->vstream>>>(
        t->ref_part + (size_t)t->me * ny, (const xs_bf16 *)(own + in->rs_off), (int)t->layout,
        t->P, t->me, in->rs_rows, in->rs_n, t->ref_y);
    XS_CU_LAUNCH();
    return XS_OK;
}

extern "C" xs_status xs_tp_reference(xs_tp *t, xs_cublas *cb)
{
    if (!cb)
        return xs_seterr(XS_EINVAL, "tp reference: no cuBLAS handle");
    if (t->plan_only)
        return xs_seterr(XS_EINVAL, "tp: a plan-only context has no data");
    const xs_tp_info *in = &t->in;
    const size_t m = (size_t)t->s.m;
    cudaStream_t s = t->vstream;
    const char *own = t->vt.data[t->me];
    if (in->rs_gemm >= 0) {
        if (!t->ref_part)
            XS_CU(cudaMalloc((void **)&t->ref_part, m * in->rs_n * 4));
        if (!t->ref_y)
            XS_CU(cudaMalloc((void **)&t->ref_y, (size_t)in->rs_rows * in->rs_n * 4));
    }
    if (t->s.op == XS_TP_AG_GEMM && !t->ref_out0)
        XS_CU(cudaMalloc((void **)&t->ref_out0, m * in->out_n[0] * 4));
    if (t->s.op == XS_TP_MLP) {
        if (!t->ref_out0)
            XS_CU(cudaMalloc((void **)&t->ref_out0, m * in->out_n[0] * 4));
        if (!t->ref_tmp)
            XS_CU(cudaMalloc((void **)&t->ref_tmp, m * in->gn[0] * 4));
        if (!t->ref_h)
            XS_CU(cudaMalloc((void **)&t->ref_h, m * in->out_n[0] * 2));
    }
    switch (t->s.op) {
    case XS_TP_GEMM_RS:
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->s.m, in->gn[0], in->gk[0], t->a_rs, t->w[0], 1,
                                   t->ref_part, 1));
        break;
    case XS_TP_AG_GEMM:
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->s.m, in->gn[0], in->gk[0], own, t->w[0], 1,
                                   t->ref_out0, 1));
        break;
    case XS_TP_MLP: {
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->s.m, in->gn[0], in->gk[0], own, t->w[0], 1,
                                   t->ref_tmp, 1));
        const size_t nh = m * in->out_n[0];
        tp_swiglu_kernel<float><<<tp_blocks(nh, 256), 256, 0, s>>>(t->ref_tmp, t->ref_h,
                                                                   t->ref_out0, t->s.m, in->gn[0]);
        XS_CU_LAUNCH();
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->s.m, in->gn[1], in->gk[1], t->ref_h, t->w[1], 1,
                                   t->ref_part, 1));
        break;
    }
    }
    if (in->rs_gemm >= 0)
        XS_TRY(tp_ref_y(t));
    XS_CU(cudaStreamSynchronize(s));
    t->have_ref = 1;
    return XS_OK;
}

extern "C" xs_status xs_tp_exchange_expectation(xs_tp *t)
{
    const xs_tp_info *in = &t->in;
    if (t->plan_only || t->virt || in->rs_gemm < 0)
        return XS_OK;
    if (!t->have_exp || !t->exp_part)
        return xs_seterr(XS_EINVAL, "tp exchange: needs a verified first local run");
    if (!t->have_coll || !t->coll.alltoall)
        return xs_seterr(XS_EUNSUPPORTED, "tp exchange on real peers: no collectives were given "
                         "(xs_tp_set_coll)");
    const size_t ny = (size_t)in->rs_rows * in->rs_n;
    if (!t->exp_recv)
        XS_CU(cudaMalloc((void **)&t->exp_recv, (size_t)t->P * ny * 2));
    /* exp_part slot r: what this rank sends owner r; received slot s: what source s sends here */
    XS_TRY(t->coll.alltoall(t->coll.ctx, t->exp_part, t->exp_recv, in->slot_bytes, t->vstream));
    char *own = t->lt.data[t->me] + in->rs_off;
    for (int src = 0; src < t->P; src++)
        if (src != t->me)
            XS_TRY(tp_slot_copy(t, own + (size_t)src * in->slot_bytes, t->layout,
                                t->exp_recv + src * ny, XS_TP_LAYOUT_ROW, 1));
    if (t->have_ref)
        XS_TRY(tp_ref_y(t));
    XS_CU(cudaStreamSynchronize(t->vstream));
    t->have_exp = 0; /* the next local run is checked against the new reference */
    return XS_OK;
}

/* ---- verification -------------------------------------------------------------------------------- */

/* 16-byte units of [a, a+bytes) and [b, b+bytes) that differ (CPU). */
static uint64_t cpu_diff_units(const void *a, const void *b, size_t bytes)
{
    const size_t blk = 1 << 16;
    uint64_t bad = 0;
    const char *x = (const char *)a, *y = (const char *)b;
    for (size_t off = 0; off < bytes; off += blk) {
        const size_t len = bytes - off < blk ? bytes - off : blk;
        if (!memcmp(x + off, y + off, len))
            continue;
        for (size_t u = 0; u < len; u += 16)
            bad += memcmp(x + off + u, y + off + u, len - u < 16 ? len - u : 16) != 0;
    }
    return bad;
}

static xs_status gpu_diff_units(xs_tp *t, const void *a, const void *b, size_t bytes,
                                uint64_t *bad)
{
    if (!bytes) {
        *bad = 0;
        return XS_OK;
    }
    unsigned long long h = 0;
    XS_CU(cudaMemsetAsync(t->d_bad, 0, sizeof h, t->vstream));
    tp_cmp_kernel<<<tp_blocks(bytes / 16, 256), 256, 0, t->vstream>>>(
        (const uint4 *)a, (const uint4 *)b, bytes / 16, t->d_bad);
    XS_CU_LAUNCH();
    XS_CU(cudaMemcpyAsync(&h, t->d_bad, sizeof h, cudaMemcpyDeviceToHost, t->vstream));
    XS_CU(cudaStreamSynchronize(t->vstream));
    *bad = h;
    return XS_OK;
}

/* 16-byte units of a slot (layout l, CPU view) that differ from the row-major rows (CPU). */
static uint64_t cpu_diff_slot(const xs_tp *t, const void *slot, const xs_bf16 *rows)
{
    const xs_tp_info *in = &t->in;
    if (t->layout == XS_TP_LAYOUT_ROW)
        return cpu_diff_units(slot, rows, in->slot_bytes);
    uint64_t bad = 0;
    const int tiles_n = (in->rs_n + XS_TP_BN - 1) / XS_TP_BN;
    for (int tr = 0; tr < in->rs_rows / XS_TP_BM; tr++)
        for (int tc = 0; tc < tiles_n; tc++) {
            int pitch;
            const size_t b = xs_tp_slot_tile(t->layout, in->rs_n, tr, tc, &pitch);
            for (int i = 0; i < XS_TP_BM; i++)
                bad += cpu_diff_units((const xs_bf16 *)slot + b + (size_t)i * pitch,
                                      rows + (size_t)(tr * XS_TP_BM + i) * in->rs_n +
                                          (size_t)tc * XS_TP_BN,
                                      (size_t)pitch * 2);
        }
    return bad;
}

/* The same on the GPU (slot: device or mapped host memory). */
static xs_status gpu_diff_slot(xs_tp *t, const void *slot, const xs_bf16 *rows, uint64_t *bad)
{
    const xs_tp_info *in = &t->in;
    if (t->layout == XS_TP_LAYOUT_ROW)
        return gpu_diff_units(t, slot, rows, in->slot_bytes, bad);
    unsigned long long h = 0;
    XS_CU(cudaMemsetAsync(t->d_bad, 0, sizeof h, t->vstream));
    tp_cmp_slot_kernel<<<tp_blocks(in->slot_bytes / 16, 256), 256, 0, t->vstream>>>(
        (const xs_bf16 *)slot, (int)t->layout, rows, in->rs_rows, in->rs_n, t->d_bad);
    XS_CU_LAUNCH();
    XS_CU(cudaMemcpyAsync(&h, t->d_bad, sizeof h, cudaMemcpyDeviceToHost, t->vstream));
    XS_CU(cudaStreamSynchronize(t->vstream));
    *bad = h;
    return XS_OK;
}

/* Tolerance check of got (bf16 [rows, ldg]) against ref (fp32 [rows, ldr]) over `cols`. */
static xs_status tol_check(xs_tp *t, const xs_bf16 *got, long long ldg, const float *ref,
                           long long ldr, int rows, int cols, xs_tp_check *c, const char *what)
{
    if ((size_t)rows > t->err_rows)
        return xs_seterr(XS_EINVAL, "tp: %d rows to check, room for %zu", rows, t->err_rows);
    unsigned long long nf = 0;
    XS_CU(cudaMemsetAsync(t->d_nonfinite, 0, sizeof nf, t->vstream));
    tp_err_kernel<<<rows < 4096 ? rows : 4096, 256, 0, t->vstream>>>(
        got, ldg, ref, ldr, rows, cols, t->d_err, t->d_err + rows, t->d_nonfinite);
    XS_CU_LAUNCH();
    double *h = (double *)malloc((size_t)2 * rows * sizeof(double));
    if (!h)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory checking %d rows", rows);
    cudaError_t e1 = cudaMemcpyAsync(h, t->d_err, (size_t)2 * rows * sizeof(double),
                                     cudaMemcpyDeviceToHost, t->vstream);
    cudaError_t e2 = cudaMemcpyAsync(&nf, t->d_nonfinite, sizeof nf, cudaMemcpyDeviceToHost,
                                     t->vstream);
    cudaError_t e3 = cudaStreamSynchronize(t->vstream);
    if (e1 != cudaSuccess || e2 != cudaSuccess || e3 != cudaSuccess) {
        free(h);
        return xs_seterr(XS_ECUDA, "tp: reading check sums: %s",
                         cudaGetErrorString(e1 != cudaSuccess ? e1 : e2 != cudaSuccess ? e2 : e3));
    }
    double se = 0, sr = 0, worst = 0;
    for (int r = 0; r < rows; r++) {
        se += h[r];
        sr += h[rows + r];
        const double rr = h[rows + r] > 0 ? sqrt(h[r] / h[rows + r]) : (h[r] > 0 ? INFINITY : 0);
        if (!(rr <= worst))
            worst = rr;
    }
    free(h);
    const double rel = sr > 0 ? sqrt(se / sr) : (se > 0 ? INFINITY : 0);
    c->checked_ref = 1;
    if (!(rel <= c->rel_frob) || c->rel_frob < 0)
        c->rel_frob = rel;
    if (!(worst <= c->max_row_rel))
        c->max_row_rel = worst;
    c->nonfinite += (long)nf;
    if ((nf || !(rel <= XS_TP_TOL_FROB) || !(worst <= XS_TP_TOL_ROW)) && !c->what[0])
        snprintf(c->what, sizeof c->what, "%s: relative Frobenius error %.3g (tol %.0e), worst "
                 "row %.3g (tol %.0e), %llu non-finite", what, rel, XS_TP_TOL_FROB, worst,
                 XS_TP_TOL_ROW, nf);
    return XS_OK;
}

static void note(xs_tp_check *c, const char *what, unsigned long long n, const char *problem)
{
    if (!c->what[0])
        snprintf(c->what, sizeof c->what, "%s: %llu %s", what, n, problem);
}

/* Signals of this rank at rank r's window: every chunk and every tile sent there carries the
 * epoch. flags = a CPU view of rank r's flags. */
static uint64_t flags_wrong(const xs_tp *t, const uint64_t *flags, int r, unsigned long long epoch,
                            int src)
{
    const xs_tp_info *in = &t->in;
    uint64_t bad = 0;
    const volatile uint64_t *f = flags;
    if (in->ag && r != src)
        for (int c = 0; c < in->ag_chunks; c++)
            bad += f[(size_t)src * in->ag_chunks + c] != epoch;
    if (in->rs_gemm >= 0)
        for (int i = 0; i < in->t_own; i++)
            bad += f[in->rs_flag0 + (size_t)src * in->t_own + i] != epoch;
    return bad;
}

/* Real peers: what every other source sent to this rank's window in the last fused run, at the
 * destination: its partials of this rank's rows against what it verified and sent through the
 * exchange (bitwise), its shard of the gathered X against the same rows of the local control
 * table (one tensor on every rank), and every signal with the run's epoch (the ranks launch in
 * lockstep, so their epochs agree). */
static xs_status check_received(xs_tp *t, unsigned long long epoch, xs_tp_check *c)
{
    const xs_tp_info *in = &t->in;
    const int me = t->me;
    const size_t ny = (size_t)in->rs_rows * in->rs_n;
    if (in->rs_gemm >= 0 && !t->exp_recv)
        return xs_seterr(XS_EINVAL, "tp verify: a fused run on real peers needs "
                         "xs_tp_exchange_expectation first");
    uint64_t *fl = (uint64_t *)malloc((size_t)in->nflags * 8);
    if (!fl)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for flags");
    xs_status st = XS_OK;
    cudaError_t e = cudaMemcpy(fl, t->vt.flags[me], (size_t)in->nflags * 8, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        st = xs_seterr(XS_ECUDA, "tp: reading flags: %s", cudaGetErrorString(e));
    for (int src = 0; src < t->P && st == XS_OK; src++) {
        if (src == me)
            continue;
        uint64_t bad = 0, b = 0;
        if (in->rs_gemm >= 0) {
            st = gpu_diff_slot(t, t->vt.data[me] + in->rs_off + (size_t)src * in->slot_bytes,
                               t->exp_recv + src * ny, &b);
            bad += b;
            c->remote_bytes += (double)in->slot_bytes;
        }
        if (in->ag && st == XS_OK) {
            const size_t off = (size_t)src * in->shard_bytes;
            st = gpu_diff_units(t, t->vt.data[me] + off, t->lt.data[me] + off, in->shard_bytes,
                                &b);
            bad += b;
            c->remote_bytes += (double)in->shard_bytes;
        }
        c->bad_units += bad;
        if (bad)
            note(c, "received bytes", bad, "16-byte units differ from what a peer sent");
        const uint64_t bf = flags_wrong(t, fl, me, epoch, src);
        c->bad_flags += bf;
        if (bf)
            note(c, "received signals", bf, "missing or stale in this rank's window");
    }
    free(fl);
    return st;
}

/* A run whose order split tiles along k (TP_T_SPLIT) sums their parts in another order than the
 * expectation's whole tiles, so their bf16 partials may differ from it in the last bit. The
 * slot sent to owner r (slot: a device or mapped host pointer, the context's layout): the whole
 * slot against the fp32 reference within the stated tolerance, then every tile that was not
 * split bitwise against the expectation (*bad: 16-byte units that differ). *nsplit = split
 * tiles of owner r in the last run's order; 0: nothing done (the caller diffs as usual). */
static xs_status split_diff(xs_tp *t, const void *slot, int r, xs_tp_check *c, uint64_t *bad,
                            int *nsplit)
{
    const xs_tp_info *in = &t->in;
    const int tiles_n = (in->rs_n + XS_TP_BN - 1) / XS_TP_BN, rbpr = in->rs_rows / XS_TP_BM;
    const size_t ny = (size_t)in->rs_rows * in->rs_n;
    *nsplit = 0;
    *bad = 0;
    const int ls = t->last_slot;
    if (ls < 0 || ls >= XS_TP_SLOTS || t->nsplit[ls] == 0)
        return XS_OK;
    int *idx = (int *)malloc((size_t)in->t_own * sizeof(int));
    if (!idx)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory checking split tiles");
    int n = 0;
    for (int i = 0; i < t->ntasks[ls]; i++) {
        const tp_task *x = &t->h_tasks[ls][i];
        if ((x->flags & TP_T_SPLIT) && split_last(x) && x->tm / rbpr == r && n < in->t_own)
            idx[n++] = (x->tm - r * rbpr) * tiles_n + x->tn;
    }
    *nsplit = n;
    xs_status st = XS_OK;
    if (n > 0 && !t->have_ref)
        st = xs_seterr(XS_EINVAL, "tp verify: a run with split tiles needs xs_tp_reference");
    if (n > 0 && st == XS_OK && !t->split_tmp) {
        cudaError_t e = cudaMalloc((void **)&t->split_tmp, ny * 2);
        if (e == cudaSuccess)
            e = cudaMalloc((void **)&t->d_split_tiles, (size_t)in->t_own * sizeof(int));
        if (e != cudaSuccess)
            st = xs_seterr(XS_ECUDA, "tp: verification buffer of split tiles (%.1f MB): %s",
                           (double)ny * 2 / 1e6, cudaGetErrorString(e));
    }
    if (n > 0 && st == XS_OK) {
        /* row-major copy; tolerance of the whole slot; the expectation's split tiles patched in;
         * then bitwise */
        st = tp_slot_copy(t, t->split_tmp, XS_TP_LAYOUT_ROW, slot, t->layout, 1);
        if (st == XS_OK)
            st = tol_check(t, t->split_tmp, in->rs_n, t->ref_part + (size_t)r * ny, in->rs_n,
                           in->rs_rows, in->rs_n, c, "partial sums sent (split tiles)");
        if (st == XS_OK) {
            cudaError_t e = cudaMemcpyAsync(t->d_split_tiles, idx, (size_t)n * sizeof(int),
                                            cudaMemcpyHostToDevice, t->vstream);
            if (e == cudaSuccess) {
                tp_copy_tiles_kernel<<<n * XS_TP_BM, 128, 0, t->vstream>>>(
                    t->split_tmp, t->exp_part + (size_t)r * ny, in->rs_n, tiles_n,
                    t->d_split_tiles);
                e = cudaGetLastError();
            }
            if (e != cudaSuccess)
                st = xs_seterr(XS_ECUDA, "tp: checking split tiles: %s", cudaGetErrorString(e));
        }
        if (st == XS_OK)
            st = gpu_diff_units(t, t->split_tmp, t->exp_part + (size_t)r * ny, ny * 2, bad);
    }
    free(idx);
    return st;
}

/* The bytes a fused or local run sent to each rank, against the expectation. */
static xs_status check_sent(xs_tp *t, const xs_wintab *tab, int cpu_side, unsigned long long epoch,
                            xs_tp_check *c)
{
    const xs_tp_info *in = &t->in;
    uint64_t *fl = (uint64_t *)malloc((size_t)in->nflags * 8);
    if (!fl)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for flags");
    xs_status st = XS_OK;
    for (int r = 0; r < t->P && st == XS_OK; r++) {
        const int host = cpu_side && t->host[r];
        if (cpu_side && !host && r != t->me)
            continue; /* a peer's device window: verified by that peer */
        uint64_t bad = 0;
        if (in->rs_gemm >= 0) {
            const size_t off = in->rs_off + (size_t)t->me * in->slot_bytes;
            uint64_t b = 0;
            int nsplit = 0;
            st = split_diff(t, tab->data[r] + off, r, c, &b, &nsplit);
            if (st != XS_OK)
                break;
            if (nsplit > 0) {
                if (host)
                    c->remote_bytes += (double)in->slot_bytes;
            } else if (host) {
                b = cpu_diff_slot(t, (const char *)t->host[r] + off,
                                  t->exp_part_h + (size_t)r * in->rs_rows * in->rs_n);
                c->remote_bytes += (double)in->slot_bytes;
            } else {
                st = gpu_diff_slot(t, tab->data[r] + off,
                                   t->exp_part + (size_t)r * in->rs_rows * in->rs_n, &b);
            }
            bad += b;
        }
        if (in->ag && r != t->me && st == XS_OK) {
            const size_t off = (size_t)t->me * in->shard_bytes;
            uint64_t b = 0;
            if (host) {
                b = cpu_diff_units((const char *)t->host[r] + off, t->exp_shard_h,
                                   in->shard_bytes);
                c->remote_bytes += (double)in->shard_bytes;
            } else {
                st = gpu_diff_units(t, tab->data[r] + off, tab->data[t->me] + off,
                                    in->shard_bytes, &b);
            }
            bad += b;
        }
        if (st != XS_OK)
            break;
        if (host) {
            c->bad_units += bad;
            if (bad)
                note(c, "sent bytes", bad, "16-byte units differ at a host window");
            const uint64_t bf = flags_wrong(t, t->host_flags[r], r, epoch, t->me);
            c->bad_flags += bf;
            if (bf)
                note(c, "signals", bf, "missing or stale at a host window");
        } else {
            c->local_bad += bad;
            if (bad)
                note(c, "sent bytes", bad, "16-byte units differ in a device window");
            cudaError_t e = cudaMemcpy(fl, tab->flags[r], (size_t)in->nflags * 8,
                                       cudaMemcpyDeviceToHost);
            if (e != cudaSuccess) {
                st = xs_seterr(XS_ECUDA, "tp: reading flags: %s", cudaGetErrorString(e));
                break;
            }
            const uint64_t bf = flags_wrong(t, fl, r, epoch, t->me);
            c->bad_flags += bf;
            if (bf)
                note(c, "signals", bf, "missing or stale in a device window");
        }
    }
    free(fl);
    return st;
}

extern "C" xs_status xs_tp_verify(xs_tp *t, xs_tp_check *c)
{
    memset(c, 0, sizeof *c);
    c->rel_frob = -1;
    const xs_tp_info *in = &t->in;
    const size_t m = (size_t)t->s.m;
    const int P = t->P, me = t->me;
    if (t->last == TP_RUN_NONE)
        return xs_seterr(XS_EINVAL, "tp verify: no completed run");
    if (t->last_failed) {
        snprintf(c->what, sizeof c->what, "the run failed");
        return XS_OK;
    }
    const size_t ny = (size_t)in->rs_rows * in->rs_n;
    if (t->last == TP_RUN_LOCAL && !t->have_exp) {
        /* the first local run: against the fp32 reference, then it is the expectation */
        if (!t->have_ref)
            return xs_seterr(XS_EINVAL, "tp verify: the first local run needs xs_tp_reference");
        if (in->rs_gemm >= 0) {
            if (!t->exp_part)
                XS_CU(cudaMalloc((void **)&t->exp_part, m * in->rs_n * 2));
            if (!t->exp_y)
                XS_CU(cudaMalloc((void **)&t->exp_y, ny * 2));
            /* the expectation is row-major whatever the slot layout */
            for (int r = 0; r < P; r++)
                XS_TRY(tp_slot_copy(t, t->exp_part + (size_t)r * ny, XS_TP_LAYOUT_ROW,
                                    t->lt.data[r] + in->rs_off + (size_t)me * in->slot_bytes,
                                    t->layout, 1));
            XS_CU(cudaMemcpyAsync(t->exp_y, t->y, ny * 2, cudaMemcpyDeviceToDevice, t->vstream));
            XS_TRY(tol_check(t, t->exp_part, in->rs_n, t->ref_part, in->rs_n, t->s.m, in->rs_n, c,
                             "partial sums sent"));
            XS_TRY(tol_check(t, t->y, in->rs_n, t->ref_y, in->rs_n, in->rs_rows, in->rs_n, c,
                             "reduced rows"));
            if (!t->exp_part_h)
                t->exp_part_h = (xs_bf16 *)malloc(m * in->rs_n * 2);
            if (!t->exp_part_h)
                return xs_seterr(XS_ENOMEM, "tp: out of host memory for the expectation");
            XS_CU(cudaMemcpy(t->exp_part_h, t->exp_part, m * in->rs_n * 2,
                             cudaMemcpyDeviceToHost));
        }
        if (t->out0) {
            if (!t->exp_out0)
                XS_CU(cudaMalloc((void **)&t->exp_out0, m * in->out_n[0] * 2));
            XS_CU(cudaMemcpyAsync(t->exp_out0, t->out0, m * in->out_n[0] * 2,
                                  cudaMemcpyDeviceToDevice, t->vstream));
            XS_TRY(tol_check(t, t->out0, in->out_n[0], t->ref_out0, in->out_n[0], t->s.m,
                             in->out_n[0], c, t->s.op == XS_TP_MLP ? "h" : "GEMM output"));
        }
        if (in->ag) {
            if (!t->exp_shard_h)
                t->exp_shard_h = (xs_bf16 *)malloc(in->shard_bytes);
            if (!t->exp_shard_h)
                return xs_seterr(XS_ENOMEM, "tp: out of host memory for the expectation");
            XS_CU(cudaMemcpy(t->exp_shard_h, t->vt.data[me] + (size_t)me * in->shard_bytes,
                             in->shard_bytes, cudaMemcpyDeviceToHost));
        }
        XS_CU(cudaStreamSynchronize(t->vstream));
        t->have_exp = 1;
        XS_TRY(check_sent(t, &t->lt, 0, t->last_epoch, c));
    } else if (t->last == TP_RUN_LOCAL || t->last == TP_RUN_FUSED) {
        if (!t->have_exp)
            return xs_seterr(XS_EINVAL, "tp verify: a fused run needs a verified local run first");
        const int fused = t->last == TP_RUN_FUSED;
        XS_TRY(check_sent(t, fused ? &t->vt : &t->lt, fused, t->last_epoch, c));
        if (fused && !t->virt)
            XS_TRY(check_received(t, t->last_epoch, c));
        uint64_t b = 0;
        if (t->y) {
            XS_TRY(gpu_diff_units(t, t->y, t->exp_y, ny * 2, &b));
            c->local_bad += b;
            if (b)
                note(c, "reduced rows", b, "16-byte units differ from the verified local run");
        }
        if (t->out0) {
            XS_TRY(gpu_diff_units(t, t->out0, t->exp_out0, m * in->out_n[0] * 2, &b));
            c->local_bad += b;
            if (b)
                note(c, "GEMM 0 output", b, "16-byte units differ from the verified local run");
        }
    } else { /* unfused */
        if (!t->have_ref)
            return xs_seterr(XS_EINVAL, "tp verify: the unfused run needs xs_tp_reference");
        if (in->rs_gemm >= 0) {
            if (!t->u_part_h)
                t->u_part_h = (xs_bf16 *)malloc(m * in->rs_n * 2);
            if (!t->u_part_h)
                return xs_seterr(XS_ENOMEM, "tp: out of host memory for the unfused check");
            XS_CU(cudaMemcpy(t->u_part_h, t->u_c, m * in->rs_n * 2, cudaMemcpyDeviceToHost));
            XS_TRY(tol_check(t, t->u_y, in->rs_n, t->ref_y, in->rs_n, in->rs_rows, in->rs_n, c,
                             "unfused reduced rows"));
        }
        if (t->s.op == XS_TP_AG_GEMM)
            XS_TRY(tol_check(t, t->u_c0, in->gn[0], t->ref_out0, in->out_n[0], t->s.m,
                             in->out_n[0], c, "unfused GEMM output"));
        if (in->ag && !t->exp_shard_h) {
            t->exp_shard_h = (xs_bf16 *)malloc(in->shard_bytes);
            if (!t->exp_shard_h)
                return xs_seterr(XS_ENOMEM, "tp: out of host memory for the expectation");
            XS_CU(cudaMemcpy(t->exp_shard_h, t->vt.data[me] + (size_t)me * in->shard_bytes,
                             in->shard_bytes, cudaMemcpyDeviceToHost));
        }
        for (int r = 0; r < P && !t->virt && in->ag; r++) {
            /* real peers: the all-gather's shards at this destination (rs: the tolerance check
             * of the reduced rows above covers what the reduce-scatter delivered) */
            uint64_t bad = 0;
            if (r == me)
                continue;
            const size_t off = (size_t)r * in->shard_bytes;
            XS_TRY(gpu_diff_units(t, t->vt.data[me] + off, t->lt.data[me] + off, in->shard_bytes,
                                  &bad));
            c->remote_bytes += (double)in->shard_bytes;
            c->bad_units += bad;
            if (bad)
                note(c, "unfused all-gather", bad, "16-byte units differ from the peer's shard");
        }
        for (int r = 0; r < P; r++) {
            if (r == me || !t->host[r])
                continue;
            uint64_t bad = 0;
            if (in->rs_gemm >= 0) {
                bad += cpu_diff_units((const char *)t->host[r] + in->rs_off +
                                          (size_t)me * in->slot_bytes,
                                      t->u_part_h + (size_t)r * ny, in->slot_bytes);
                c->remote_bytes += (double)in->slot_bytes;
            }
            if (in->ag) {
                bad += cpu_diff_units((const char *)t->host[r] + (size_t)me * in->shard_bytes,
                                      t->exp_shard_h, in->shard_bytes);
                c->remote_bytes += (double)in->shard_bytes;
            }
            c->bad_units += bad;
            if (bad)
                note(c, "unfused copies", bad, "16-byte units differ from their source at a host window");
        }
    }
    c->ok = c->bad_units == 0 && c->bad_flags == 0 && c->local_bad == 0 && c->nonfinite == 0 &&
            (!c->checked_ref || (c->rel_frob <= XS_TP_TOL_FROB && c->max_row_rel <= XS_TP_TOL_ROW));
    return XS_OK;
}
