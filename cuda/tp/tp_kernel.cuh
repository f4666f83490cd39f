// SPDX-License-Identifier: Apache-2.0
/*
 * tp/tp_kernel.cuh - the TP persistent task kernel on the shared tile engine (cuda/gemm.cuh),
 * its device helpers, the same kernel on the Hopper engine (tp_sm90.cuh) and the small helper
 * kernels of the runtime and the checks: GEMM tiles with local, SwiGLU or reduce-scatter
 * epilogues, all-gather pushes, owner-side reductions, every dependency a bounded wait.
 * cuda/tp/tp.h is the contract; docs/TP.md the design.
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
 *
 * Included by tp_runtime.cu (which launches the fused kernels) and tp_check.cu; the helper
 * kernels are static, so each includer compiles its own.
 */
#ifndef XSTAGE_TP_KERNEL_CUH
#define XSTAGE_TP_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "gemm.cuh"
#include "tp/tp.h"
#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_device.cuh"
#include "xstage_tp.h"
#include "xstage_win.h"

typedef xs_gemm_big TPC; /* 128 x 256 tiles, 8 warps, 4 stages: one CTA per SM */
static_assert(TPC::BM == XS_TP_BM && TPC::BN == XS_TP_BN, "xstage_tp.h tile sizes");

/* ---- tasks --------------------------------------------------------------------------------- */

enum {
    TP_T_TILE = XS_TP_K_TILE,
    TP_T_PUSH = XS_TP_K_PUSH,
    TP_T_REDUCE = XS_TP_K_REDUCE,
    TP_T_DEFER = XS_TP_K_DEFER,   /* TILE of a remote owner: staged in the CTA's scratch, its
                                     stores streamed through the CTA's next tile's main loop */
    TP_T_SPREAD = XS_TP_K_SPREAD, /* PUSH riding on a TILE: its stores streamed through that
                                     tile's main loop */
    TP_T_SPLIT = XS_TP_K_SPLIT,   /* TILE: one k-part of a split tile (courier runs, sm90; xstage_tp.h
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
#define TP_SPLIT_SLOTS(grid) XS_TP_SPLIT_SLOTS(grid)

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
              "xstage_tp.h xs_tp_task is the stored task");

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
                                    chunk c reaches the mirror rank xs_tp_mirror(s), the ring
                                    position at which a symmetric peer s sends to this rank */
    uint64_t *skip_flag;         /* test hook: a flag never raised (XS_TP_FAULT_AG_FLAG), or NULL */
    uint64_t *ag_shadow;         /* [P][ag_chunks] device copy of this rank's push flags, raised
                                    with them; what ag_sym waits poll (the real flags are in
                                    host memory, where a read waits behind the posted writes -
                                    a real peer polls its own HBM) */
    int eager_flags;             /* 1: every queued flag is raised after the next main loop (the
                                    eager rule, docs/TP.md "The kernel"); 0: only urgent ones
                                    (tp_pend) */
} tp_args;

/* The flag a GEMM 1 tile on shard s waits for, chunk c (see tp_args.ag_sym). */
XS_DEV const uint64_t *tp_chunk_flag(const tp_args &a, const xs_wintab &tab, int s, int c)
{
    if (a.ag_sym)
        return a.ag_shadow + (size_t)xs_tp_mirror(a.me, s, a.P) * a.ag_chunks + c;
    return tab.flags[a.me] + (size_t)s * a.ag_chunks + c;
}

/* The shadow of this rank's push flag of chunk c to rank r (ag_sym), or NULL. */
XS_DEV uint64_t *tp_push_shadow(const tp_args &a, int r, int c)
{
    return a.ag_sym ? a.ag_shadow + (size_t)r * a.ag_chunks + c : NULL;
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
    return xs_tp_task_hash(i, w);
}

XS_DEV unsigned long long tp_courier_hash4(int e, int i, int4 w0, int4 w1)
{
    const int w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
    return xs_tp_courier_hash(e, i, w);
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
 * (seek) only when a warp enters a transfer, at most twice per tile: rebuilding the row address
 * from the list in shared memory every k-tile (a chain of dependent shared loads and 64-bit
 * multiplies before the first MMA) cost 8-10 % of each streamed tile's GEMM time on the H200
 * (docs/TP.md "Streamed stores"). The engine's closing barrier then orders every streamed store before the
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
static __global__ void __launch_bounds__(C::THREADS, 1)
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
                 * tp_release (compute-sanitizer racecheck; the other threads never used the value). */
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
#include "tp/tp_sm90.cuh"

/* ---- helper kernels ------------------------------------------------------------------------- */

/* Uniform values in [-scale, scale) from (seed, index): never all zeros, never constant. */
static __global__ void tp_fill_kernel(xs_bf16 *x, size_t n, uint32_t seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = xs_mix32((uint32_t)i * 0x9e3779b1u ^ xs_mix32(seed ^ (uint32_t)(i >> 32)));
        float u = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
        x[i] = __float2bfloat16(u * scale);
    }
}

/* Fill n16 16-byte units with a repeated word (device or mapped host memory). */
static __global__ void tp_word_kernel(uint4 *p, size_t n16, uint32_t w)
{
    const uint4 v = make_uint4(w, w, w, w);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

static __global__ void tp_flags_kernel(uint64_t *f, int n, unsigned long long v)
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
static __global__ void tp_slot_copy_kernel(xs_bf16 *dst, int dl, const xs_bf16 *src, int sl, int rows,
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
static __global__ void tp_copy_tiles_kernel(xs_bf16 *dst, const xs_bf16 *src, int rs_n, int tiles_n,
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
static __global__ void tp_cmp_slot_kernel(const xs_bf16 *slot, int l, const xs_bf16 *rows_, int rows,
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
static __global__ void tp_cmp_kernel(const uint4 *a, const uint4 *b, size_t n16, unsigned long long *bad)
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
static __global__ void tp_err_kernel(const xs_bf16 *got, long long ldg, const float *ref, long long ldr,
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
static __global__ void tp_ref_y_kernel(const float *ref_own, const xs_bf16 *slots, int l, int P, int me,
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
static __global__ void tp_swiglu_kernel(const T *y, xs_bf16 *h, float *h32, int m, int n_phys)
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
static __global__ void tp_sum_kernel(const xs_bf16 *slots, int l, const xs_bf16 *own, int P, int me,
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

#endif /* XSTAGE_TP_KERNEL_CUH */
