// SPDX-License-Identifier: Apache-2.0
/*
 * ep_kernel.cuh - the device code of the fused MoE workload (cuda/ep/ep.h, docs/EP.md): the
 * persistent fused kernel (dispatch -> Linear-1 -> SwiGLU -> Linear-2 -> combine) on its three
 * shared-memory layouts (plain, deferring ring, spilling), the combine pacer, the adaptive
 * choice, the couriers, and the kernels of the unfused baseline and of the set-up (fill, poison).
 *
 * One kernel, every schedule: a persistent grid (one 256-thread CTA per SM, 194 KB of shared
 * memory each) takes tasks from a precomputed list through an atomic counter. A task is one
 * 128 x 256 tile of Linear-1 (gate+up of one 128-row block of one expert; its A rows are
 * gathered straight from the tokens: the dispatch) or of Linear-2 (the down projection of a row
 * block; its epilogue scales each row by its routing weight and stores it to the token's source
 * rank through the window table: the combine). A Linear-2 tile waits (bounded) until the
 * per-row-block counter says all Linear-1 tiles of its row block are done. Schedules differ only
 * in the order of the task list.
 *
 * Included by cuda/ep/ep_runtime.cu (the fused kernel's launches) and cuda/ep/ep_check.cu (the
 * unfused kernels of the GPU reference); the non-template kernels are static so that each
 * translation unit keeps its own.
 */
#ifndef XSTAGE_EP_KERNEL_CUH
#define XSTAGE_EP_KERNEL_CUH

#include "ep_internal.h"
#include "gemm.cuh"

typedef xs_gemm_big xs_moe_cfg; /* 128 x 256 tiles, 8 warps */
/* The deferring kernel (xs_moe_run_opts.defer, docs/EP.md "Deferring"): the same tiles on a 3-stage
 * ring, which leaves room for a staging tile of its own and its rows' destinations, so that a
 * Linear-2 tile the pacer holds back waits there while the CTA computes its next tile. */
typedef xs_gemm_cfg<128, 256, 2, 4, 3> xs_moe_cfg3;
#define XS_MOE_DEFER_STG (xs_moe_cfg3::SMEM_BYTES)                         /* staging tile */
#define XS_MOE_DEFER_DST (XS_MOE_DEFER_STG + xs_moe_cfg3::OUT_BYTES)      /* its rows' pointers */
#define XS_MOE_DEFER_SMEM (XS_MOE_DEFER_DST + xs_moe_cfg3::BM * 8)
static_assert(XS_MOE_DEFER_SMEM <= 227 * 1024, "deferring kernel: shared memory per block");
/* The spilling kernel (xs_moe_run_opts.defer = XS_MOE_DEFER_SPILL, docs/EP.md "The spilling
 * kernel"): the plain 4-stage kernel, where a Linear-2 tile the pacer would hold back writes its
 * remote rows to the staging buffer in device memory (a.cstage: one slot per row and column
 * block) and the CTA computes on; they leave from there at one of its later task boundaries, once
 * the pacer admits them. Its queue of such tiles keeps, per entry, the remote rows' destinations
 * and global row indices after the plain kernel's shared memory. */
#define XS_MOE_SPILL_DST (xs_moe_cfg::SMEM_BYTES)
#define XS_MOE_SPILL_ROW (XS_MOE_SPILL_DST + XS_MOE_SPILL_MAX * xs_moe_cfg::BM * 8)
#define XS_MOE_SPILL_SMEM (XS_MOE_SPILL_ROW + XS_MOE_SPILL_MAX * xs_moe_cfg::BM * 4)
static_assert(XS_MOE_SPILL_SMEM <= 227 * 1024, "spilling kernel: shared memory per block");


/* uniform in [-scale, scale), a function of (seed, index) */
static __global__ void xs_moe_fill_kernel(xs_bf16 *x, size_t n, uint32_t seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = xs_mix32((uint32_t)i * 0x9e3779b1u ^ xs_mix32(seed ^ (uint32_t)(i >> 32)));
        x[i] = __float2bfloat16(((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f) * scale);
    }
}

static __global__ void xs_moe_poison_kernel(uint4 *p, size_t n16)
{
    const uint4 v = make_uint4(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

/* ---- the fused kernel ------------------------------------------------------------------------ */

typedef struct {
    const xs_bf16 *x;           /* [T, H] */
    const xs_bf16 *w1;          /* [E, 2I, H] */
    const xs_bf16 *w2;          /* [E, H, I] */
    xs_bf16 *h;                 /* [rows, I] */
    const int *row_token;       /* [rows] */
    const float *row_weight;    /* [rows] */
    const int *row_rank;        /* [rows] */
    const long long *row_off;   /* [rows] bytes within the rank's window */
    const int4 *rbs;            /* [nrb] {expert, first row, rows, remote rows} */
    const int2 *tasks;          /* [ntasks] */
    int ntasks;
    unsigned int *queue;        /* next task */
    unsigned long long *seq;    /* order tickets: Linear-1 before its release, Linear-2 after
                                 * its acquire (one counter, so the order is the device's) */
    unsigned long long *done1;  /* [nrb] finished Linear-1 tiles */
    int hidden, inter, l1_per_rb;
    unsigned long long timeout_ns;
    int fault_skip_l1;
    xs_devstatus *status;
    unsigned long long *pace;   /* the pacer's reserved-until time (ns, %globaltimer) */
    double pace_ns_per_byte;    /* > 0: pace the combine (xs_moe_pace) */
    unsigned long long pace_slack_ns; /* backlog the pacer lets a burst start into, as time */
    char *const *rank_base;     /* [N] device-usable window payload pointers */
    const unsigned char *rank_host; /* [N] 1 = the window is host memory (remote over PCIe) */
    unsigned long long *trace;  /* [ntasks][XS_MOE_TRACE_WORDS] */
    unsigned long long *anchors; /* [grid][4]: globaltimer/clock64 pairs at start and end */
    /* couriers (xs_moe_courier); couriers = 0: none, and the fields below are unused */
    int couriers;               /* the last `couriers` CTAs of the grid copy the combine */
    int l2_per_rb;
    char *cstage;               /* [rows, hidden] bf16: remote rows staged by the epilogues */
    unsigned long long *ready;  /* [nrb * l2_per_rb] 1 once a Linear-2 tile's rows are staged */
    const int2 *clist;          /* [nclist] the Linear-2 tiles (rb, nb) in task-list order */
    const int *crow;            /* [nrb][BM] each row block's remote rows (xs_moe_courier_rows) */
    char *const *cdst;          /* [nrb][BM] their destinations (column 0) */
    const int *ccnt;            /* [nrb] how many */
    int nclist;
    double courier_ns_per_byte; /* one courier's pace: couriers / the couriers' total rate */
    unsigned long long *ctrace; /* [nclist][XS_MOE_COPY_WORDS] */
    int bulk_combine;           /* 1: Linear-2 epilogues issue their rows by TMA bulk copies */
    /* adaptive plans (xs_moe_take_adaptive); adaptive = 0: one queue, the list's order */
    int adaptive;
    int n1;                     /* the Linear-1 tiles: tasks [0, n1); Linear-2: [n1, ntasks) */
    unsigned int *queue2;       /* next Linear-2 tile (0-based among them) */
    unsigned long long *admit;  /* the admission clock: reserved-until time (ns, %globaltimer) */
    double admit_ns_per_byte;
    double admit_tile_bytes;    /* what a claim reserves: a Linear-2 tile's mean remote bytes */
    unsigned long long admit_ahead_ns;
    int spill_depth;            /* the spilling kernel: its queue's capacity per CTA */
} xs_moe_kargs;

/* xs_devstatus detail, low 32 bits: a row block (< 2^30, a Linear-2 dependency), or one of */
#define XS_MOE_PACE_DETAIL 0xffffffffu    /* the epilogue's pacer */
#define XS_MOE_CPACE_DETAIL 0xfffffffeu   /* a courier's pacer */
#define XS_MOE_CWAIT_DETAIL 0x80000000u   /* | j: a courier waiting for Linear-2 tile j (clist) */


/* The combine pacer without waiting (thread 0): reserves the link time of `bytes` at the pacer's
 * rate and returns 1 when the backlog is at most pace_slack_ns, else returns 0
 * (xs_link_try). */
static __device__ int xs_moe_pace_try(const xs_moe_kargs &a, double bytes)
{
    return xs_link_try(a.pace, xs_link_need_ns(bytes, a.pace_ns_per_byte), a.pace_slack_ns);
}

/* The combine pacer (thread 0 of a Linear-2 tile with remote rows, after the epilogue staged the
 * tile and before its stores): a software link (xs_link_pace) draining at the calibrated rate.
 * The tile waits until the backlog is at most pace_slack_ns, then reserves its own bytes; bounded
 * by timeout_ns. Returns the ns waited. The reason (docs/EP.md, "The model"): on the PCIe path
 * every SM's main loop stalls while the combine backlog is above ~0.55 MB, so bursts that pile up
 * cost every CTA; held back at their source they cost only their own CTA. */
static __device__ unsigned long long xs_moe_pace(const xs_moe_kargs &a, double bytes)
{
    return xs_link_pace(a.pace, xs_link_need_ns(bytes, a.pace_ns_per_byte), a.pace_slack_ns,
                        a.timeout_ns, a.status, XS_MOE_PACE_DETAIL);
}

/* An adaptive plan's next task (thread 0; docs/EP.md, "Adaptive"). *pending is the Linear-2
 * tile this CTA claimed and has not run yet (-1: none).
 * - A pending tile runs as soon as its row block's Linear-1 tiles are done, or once the Linear-1
 *   queue is empty; until then the CTA runs Linear-1 tiles.
 * - Else, when the admission clock (the remote bytes of the Linear-2 tiles claimed so far,
 *   draining at the plan's rate) ends within admit_ahead_ns of now, the CTA claims the next
 *   Linear-2 tile and reserves its bytes on the clock; it runs it at once if its row block is
 *   done, else it becomes pending.
 * - Else the next Linear-1 tile; once those are gone, the next Linear-2 tile.
 * Claims are atomicAdd tickets (a compare-and-swap on the queue head serialised 132 CTAs behind
 * loads that wait for their own stores in flight: 36 us between tasks). No CTA waits
 * for a dependency while a Linear-1 tile is left to take, and once none is left every Linear-1
 * tile is held by a running CTA that never waits: no deadlock. Never waits itself; returns a task
 * index, ntasks when none is left. */
static __device__ int xs_moe_take_adaptive(const xs_moe_kargs &a, int *pending)
{
    const unsigned n1 = (unsigned)a.n1, n2 = (unsigned)(a.ntasks - a.n1);
    const unsigned h1 = *(volatile unsigned int *)a.queue;
    const unsigned long long clk0 = *(volatile unsigned long long *)a.admit;
    if (*pending >= 0) {
        const int rbi = (*pending - a.n1) / a.l2_per_rb;
        if (h1 >= n1 || *(volatile unsigned long long *)(a.done1 + rbi) >=
                            (unsigned long long)a.l1_per_rb) {
            const int t = *pending;
            *pending = -1;
            return t;
        }
    } else if (h1 < n1) {
        const unsigned long long now = xs_globaltimer();
        if (clk0 <= now + a.admit_ahead_ns) {
            const unsigned u = atomicAdd(a.queue2, 1u);
            if (u < n2) {
                xs_link_reserve(a.admit, clk0,
                                (unsigned long long)(a.admit_tile_bytes * a.admit_ns_per_byte) +
                                    1ull,
                                0, 0);
                const int rbi = (int)(u / (unsigned)a.l2_per_rb);
                if (*(volatile unsigned long long *)(a.done1 + rbi) >=
                    (unsigned long long)a.l1_per_rb)
                    return (int)(n1 + u);
                *pending = (int)(n1 + u);
            }
        }
    }
    const unsigned u = h1 < n1 ? atomicAdd(a.queue, 1u) : n1;
    if (u < n1)
        return (int)u;
    if (*pending >= 0) { /* the Linear-1 queue ran dry: run the claimed tile */
        const int t = *pending;
        *pending = -1;
        return t;
    }
    const unsigned v = atomicAdd(a.queue2, 1u);
    return v < n2 ? (int)(n1 + v) : a.ntasks;
}

/* A courier's wait for Linear-2 tile j's ready flag (thread 0). Bounded by timeout_ns, and given
 * up as soon as any CTA recorded a failure (that tile may then never be staged). 1 = stop. */
static __device__ __forceinline__ const uint64_t *xs_moe_ready_flag(const xs_moe_kargs &a,
                                                                    int rbi, int nb)
{
    return (const uint64_t *)(a.ready + (size_t)rbi * a.l2_per_rb + nb);
}

static __device__ int xs_moe_courier_wait(const xs_moe_kargs &a, int j, int rbi, int nb)
{
    const uint64_t *flag = xs_moe_ready_flag(a, rbi, nb);
    const unsigned long long t0 = xs_globaltimer();
    while (xs_ld_acquire_gpu(flag) == 0ull) {
        if (*(volatile unsigned int *)&a.status->code != 0)
            return 1;
        if (xs_globaltimer() - t0 > a.timeout_ns) {
            xs_devfail(a.status, XS_DEVERR_TIMEOUT, ((unsigned long long)blockIdx.x << 32) |
                                                        XS_MOE_CWAIT_DETAIL | (unsigned int)j);
            return 1;
        }
        __nanosleep(128);
    }
    return 0;
}

/* A courier's pacer (thread 0): xs_courier_pace at the courier's share of the pace, so each
 * courier is a FIFO server at rate / C (xs_moe_courier_drain is the same on the host). Returns
 * the ns it held the chunk; *stop = 1 after a timeout (recorded in the status). */
static __device__ unsigned long long xs_moe_courier_pace(const xs_moe_kargs &a,
                                                         unsigned long long *next, double bytes,
                                                         int *stop)
{
    return xs_courier_pace(next, bytes, a.courier_ns_per_byte, a.timeout_ns, a.status,
                           XS_MOE_CPACE_DETAIL, stop);
}

/* A courier's chunk: thread tid's units base + u * THREADS + tid (u < XS_MOE_COURIER_UNITS) of
 * the tile's remote rows (s_row, cpr units each, starting at byte column col): loaded from the
 * staging buffer (.cg: written by another SM during this kernel) into v, their destinations
 * (s_dst: each row's, from shared memory) into d (NULL past the end). The only global loads are
 * the data's: an SM's loads wait behind its own stores in flight (docs/EP.md "Couriers"), and
 * the destinations used to be two dependent global loads per unit (row_rank, then rank_base). */
static __device__ __forceinline__ void xs_moe_courier_load(const xs_moe_kargs &a,
                                                           const int *s_row, char *const *s_dst,
                                                           int cpr, long long col, int units,
                                                           int base, int tid, uint4 *v, char **d)
{
#pragma unroll
    for (int u = 0; u < XS_MOE_COURIER_UNITS; u++) {
        const int i = base + u * xs_moe_cfg::THREADS + tid;
        d[u] = NULL;
        if (i < units) {
            const int r = i / cpr;
            const long long c16 = 16LL * (i - r * cpr);
            v[u] = __ldcg((const uint4 *)(a.cstage + (long long)s_row[r] * a.hidden * 2 + col +
                                          c16));
            d[u] = s_dst[r] + col + c16;
        }
    }
}

static __device__ __forceinline__ void xs_moe_courier_store(const uint4 *v, char *const *d)
{
#pragma unroll
    for (int u = 0; u < XS_MOE_COURIER_UNITS; u++)
        if (d[u])
            xs_st16v(d[u], v[u]);
}

/* Courier k of C (docs/EP.md, "Couriers"): copies the remote rows of the Linear-2 tiles k, k + C,
 * k + 2C, ... of a.clist (the task list's Linear-2 tiles in position order, roughly the order in
 * which the compute CTAs finish them) from the staging buffer to their windows: the same bytes to
 * the same addresses as the epilogue would have stored (rank_base[rank] + row_off + column),
 * in paced chunks of up to XS_MOE_COURIER_UNITS x 16 bytes per thread.
 *
 * Deadlock freedom: a courier waits only for ready flags raised by compute CTAs; a compute CTA
 * never waits for a courier (the staging buffer has one slot per row and tile, nothing is
 * recycled), so the compute CTAs finish the task list as they would without couriers, and every
 * flag a courier waits for gets raised. That needs the compute CTAs to be running: they are
 * blocks 0..grid-C-1, which the hardware dispatches before the couriers (the last C blocks); were
 * a courier resident in their place, its wait would end in the bounded timeout, not a hang.
 * Signals: the fused combine raises no flag at the destination (the host verifies after the
 * kernel; the kernel's end is the completion signal), so the couriers raise none either; the
 * kernel ends only after the couriers' last stores were issued, so the measured kernel time
 * covers them. smem: the kernel's dynamic shared memory (unused by a courier otherwise). */
static __device__ __noinline__ void xs_moe_courier(const xs_moe_kargs &a, int k,
                                                   unsigned int smid, char *smem)
{
    typedef xs_moe_cfg C;
    enum { U = XS_MOE_COURIER_UNITS };
    char **s_dst = (char **)smem;        /* [BM] the tile's remote rows' destinations */
    int *s_row = (int *)(s_dst + C::BM); /* [BM] the tile's remote rows, in row order */
    const int tid = threadIdx.x, step = a.couriers;
    unsigned long long next = 0;         /* thread 0: the pacer (xs_moe_courier_pace) */
    /* the next tile's plan, loaded one tile ahead (xs_moe_courier_rows: its remote rows, their
     * destinations, their count), and its tile list entry two tiles ahead, so that none of these
     * loads is issued behind the previous tile's stores (a courier's loads wait behind its own
     * stores in flight; a tile would otherwise start with six dependent loads) */
    int j = k;
    int2 tk = j < a.nclist ? a.clist[j] : make_int2(0, 0);
    int2 tk_next = j + step < a.nclist ? a.clist[j + step] : make_int2(0, 0);
    int p_cnt = 0, p_row = 0;
    char *p_dst = NULL;
    if (j < a.nclist) {
        p_cnt = a.ccnt[tk.x];
        if (tid < p_cnt) {
            p_row = a.crow[(size_t)tk.x * C::BM + tid];
            p_dst = a.cdst[(size_t)tk.x * C::BM + tid];
        }
    }
    int ready_early = 0; /* thread 0: this tile's ready flag was seen set one tile ahead */
#pragma unroll 1
    for (; j < a.nclist; j += step) {
        const uint64_t c_wait = xs_clock();
        const int rbi = tk.x, nb = tk.y, nrem = p_cnt;
        const int nv = a.hidden - nb * C::BN;
        const int cpr = (nv < C::BN ? nv : C::BN) / 8; /* 16-byte units per row (H % 8 == 0) */
        /* s_row, s_dst: the previous tile's readers passed the barrier at its end */
        if (tid < nrem) {
            s_row[tid] = p_row;
            s_dst[tid] = p_dst;
        }
        int stop = 0;
        if (tid == 0 && nrem > 0 && !ready_early)
            stop = xs_moe_courier_wait(a, j, rbi, nb);
        /* barrier: s_row, s_dst, the decision, and (thread 0's acquire before it) the staged
         * rows */
        if (__syncthreads_or(stop))
            break;
        const uint64_t c_ready = xs_clock();
        unsigned long long gate = 0;
        const int units = nrem * cpr, CH = U * C::THREADS;
        const long long col = (long long)nb * C::BN * 2;
        /* two chunks in flight: the loads of chunk i + 1 leave before the stores of chunk i, so
         * they do not queue behind them (load, then store, chunk by chunk, copies 6.6-6.9 B/ns
         * per courier, the loads waiting behind the courier's own stores) */
        uint4 v0[U], v1[U];
        char *d0[U], *d1[U];
        xs_moe_courier_load(a, s_row, s_dst, cpr, col, units, 0, tid, v0, d0);
        /* the next tile's plan and ready flag, and the entry after it: before this tile's
         * stores */
        const int jn = j + step;
        const int2 tk_after = jn + step < a.nclist ? a.clist[jn + step] : make_int2(0, 0);
        if (jn < a.nclist) {
            p_cnt = a.ccnt[tk_next.x];
            if (tid < p_cnt) {
                p_row = a.crow[(size_t)tk_next.x * C::BM + tid];
                p_dst = a.cdst[(size_t)tk_next.x * C::BM + tid];
            }
            if (tid == 0)
                ready_early =
                    xs_ld_acquire_gpu(xs_moe_ready_flag(a, tk_next.x, tk_next.y)) != 0ull;
        }
#pragma unroll 1
        for (int base = 0; base < units; base += 2 * CH) {
            if (base + CH < units)
                xs_moe_courier_load(a, s_row, s_dst, cpr, col, units, base + CH, tid, v1, d1);
            if (tid == 0)
                gate += xs_moe_courier_pace(a, &next, 16.0 * min(units - base, CH), &stop);
            if (__syncthreads_or(stop))
                break;
            xs_moe_courier_store(v0, d0);
            if (base + CH >= units)
                break;
            if (base + 2 * CH < units)
                xs_moe_courier_load(a, s_row, s_dst, cpr, col, units, base + 2 * CH, tid, v0,
                                    d0);
            if (tid == 0)
                gate += xs_moe_courier_pace(a, &next, 16.0 * min(units - base - CH, CH), &stop);
            if (__syncthreads_or(stop))
                break;
            xs_moe_courier_store(v1, d1);
        }
        if (__syncthreads_or(stop)) /* every store of the tile issued, s_row and s_dst free */
            break;
        if (tid == 0 && a.ctrace) {
            unsigned long long *r = a.ctrace + (size_t)j * XS_MOE_COPY_WORDS;
            r[0] = c_wait;
            r[1] = c_ready;
            r[2] = xs_clock();
            r[3] = ((unsigned long long)blockIdx.x << 32) | smid;
            r[4] = (unsigned long long)units * 16ull;
            r[5] = gate;
        }
        tk = tk_next;
        tk_next = tk_after;
    }
}

/* A deferred Linear-2 tile's stores (DEFER; all threads, after a barrier that follows the tile's
 * staging): thread 0 waits for the pacer (bounded), then the rows go out from the staging tile
 * and thread 0 completes the tile's trace: st0, st1 and the wait. */
template <class C>
static __device__ void xs_moe_flush(const xs_moe_kargs &a, const char *stg, char *const *ddst,
                                    int ti, int nrows, int ncols, int nremote)
{
    __shared__ unsigned long long s_gate;
    if (threadIdx.x == 0)
        s_gate = nremote > 0 && a.pace_ns_per_byte > 0.0
                     ? xs_moe_pace(a, (double)nremote * ncols * 2.0)
                     : 0ull;
    __syncthreads();
    const uint64_t c0 = xs_clock();
    xs_gemm_store_rows<C, C::BN>(stg, ddst, nrows, ncols);
    __syncthreads(); /* every store issued; the staging tile and ddst are free again */
    if (threadIdx.x == 0 && a.trace) {
        unsigned long long *r = a.trace + (size_t)ti * XS_MOE_TRACE_WORDS;
        r[3] = c0;
        r[4] = xs_clock();
        r[7] = s_gate;
        r[9] = 1;
    }
}

/* The spilling kernel's queue of held-back Linear-2 tiles (one per CTA, shared memory): entry e
 * is {task index, remote rows, column block, columns}; its rows' destinations and global row
 * indices are xs_moe_spill_dst(smem, e) and xs_moe_spill_row(smem, e). Thread 0 changes it,
 * between barriers. */
struct xs_moe_spillq {
    int4 e[XS_MOE_SPILL_MAX];
    int head, n;
    int cnt;                 /* rows written into the entry being filled */
    int go;                  /* the drain's decision, for every thread */
    unsigned long long gate; /* ns thread 0 waited for the pacer (the drain's last tile) */
};

static __device__ __forceinline__ char **xs_moe_spill_dst(char *smem, int e)
{
    return (char **)(smem + XS_MOE_SPILL_DST) + e * xs_moe_cfg::BM;
}

static __device__ __forceinline__ int *xs_moe_spill_row(char *smem, int e)
{
    return (int *)(smem + XS_MOE_SPILL_ROW) + e * xs_moe_cfg::BM;
}

/* The spilling kernel holds a Linear-2 tile back (all threads, after the barrier that follows
 * its staging, s_sq.cnt zeroed): its remote rows (rem[r] != 0) are redirected to their slots in
 * the staging buffer, and the queue's next entry keeps where they go on. s_sq.head and s_sq.n
 * change only at thread 0 after the barrier here. Not inlined, so that nothing of it is hoisted
 * into the kernel's loop (its main loop must stay the plain kernel's). */
static __device__ __noinline__ void xs_moe_spill_tile(const xs_moe_kargs &a, char *smem,
                                                      xs_moe_spillq *q,
                                                      const unsigned char *rem, char **dst,
                                                      int ti, int row0, int nrows, int nb,
                                                      int ncols)
{
    const int tid = threadIdx.x;
    const int e = (q->head + q->n) % XS_MOE_SPILL_MAX;
    if (tid < nrows && rem[tid]) {
        const int k = atomicAdd(&q->cnt, 1);
        xs_moe_spill_dst(smem, e)[k] = dst[tid];
        xs_moe_spill_row(smem, e)[k] = row0 + tid;
        dst[tid] = a.cstage + ((long long)(row0 + tid) * a.hidden +
                               (long long)nb * xs_moe_cfg::BN) * 2;
    }
    __syncthreads(); /* dst and q->cnt */
    if (tid == 0) {
        q->e[e] = make_int4(ti, q->cnt, nb, ncols);
        q->n++;
    }
}

/* A held-back tile's nrem remote rows leave from the staging buffer (all threads, after a
 * barrier that follows any use of the ring; ends with one): 16-byte units of ncols columns from
 * column block nb are copied into the ring by cp.async (L2, where the spill wrote them; no
 * register holds them), then stored from there. Registers matter: a version that loaded them
 * into registers made the kernel's main loop longer (255 registers against 245, 4 % slower on
 * every row). */
static __device__ __forceinline__ void xs_moe_spill_store(const xs_moe_kargs &a, char *smem,
                                                          const int *srow, char *const *sdst,
                                                          int nrem, int nb, int ncols)
{
    typedef xs_moe_cfg C;
    static_assert(C::BM * C::BN * 2 <= C::MAIN_BYTES, "a held-back tile fits in the ring");
    const volatile xs_moe_kargs &va = a; /* read here, not hoisted into the kernel's loop */
    const char *const cstage = va.cstage;
    const int cpr = ncols / 8, units = nrem * cpr; /* H % 8 == 0; units * 16 <= the ring */
    const long long col = (long long)nb * C::BN * 2, pitch = (long long)va.hidden * 2;
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem);
#pragma unroll 1
    for (int i = threadIdx.x; i < units; i += C::THREADS) {
        const int r = i / cpr, c16 = 16 * (i - r * cpr);
        xs_cp_async16(s0 + 16u * (uint32_t)i, cstage + srow[r] * pitch + col + c16, 16);
    }
    xs_cp_async_commit();
    xs_cp_async_wait<0>();
    __syncthreads();
#pragma unroll 4
    for (int i = threadIdx.x; i < units; i += C::THREADS) {
        const int r = i / cpr, c16 = 16 * (i - r * cpr);
        xs_st16v(sdst[r] + c16, *(const uint4 *)(smem + 16 * i));
    }
}

/* The spilling kernel's held-back tiles leave, oldest first (all threads, uniformly): while the
 * pacer admits the next one at once (xs_moe_pace_try), or, with `wait` (the CTA's end), every
 * one after a bounded wait (xs_moe_pace). After a recorded failure the end drops them: the run
 * has failed, and its windows are not checked. Thread 0 completes each tile's trace: st0, st1
 * and the wait. */
static __device__ __forceinline__ void xs_moe_spill_drain(const xs_moe_kargs &a, char *smem,
                                                          xs_moe_spillq *q, int wait)
{
    for (;;) {
        if (threadIdx.x == 0) {
            int go = 0;
            unsigned long long w = 0;
            if (q->n > 0) {
                const int4 e = q->e[q->head];
                const double bytes = (double)e.y * e.w * 2.0;
                if (!wait) {
                    go = xs_moe_pace_try(a, bytes);
                } else if (*(volatile unsigned int *)&a.status->code == 0) {
                    w = xs_moe_pace(a, bytes);
                    go = 1;
                }
            }
            q->go = go;
            q->gate = w;
        }
        __syncthreads();
        if (!q->go)
            return;
        const int h = q->head;
        const int4 e = q->e[h];
        const uint64_t c0 = xs_clock();
        xs_moe_spill_store(a, smem, xs_moe_spill_row(smem, h), xs_moe_spill_dst(smem, h), e.y,
                           e.z, e.w);
        __syncthreads(); /* every store issued: the entry is free */
        if (threadIdx.x == 0) {
            if (a.trace) {
                unsigned long long *r = a.trace + (size_t)e.x * XS_MOE_TRACE_WORDS;
                r[3] = c0;
                r[4] = xs_clock();
                r[7] = q->gate;
                r[9] = 1;
            }
            q->head = (h + 1) % XS_MOE_SPILL_MAX;
            q->n--;
        }
    }
}

/* The arguments are read from device memory (xs_moe_run_fused copies them before the launch),
 * not from a by-value kernel parameter. With `a` a by-value (or __grid_constant__) struct,
 * nvcc 13.0 (V13.0.88, NVVM 7.0.1) miscompiles the if/else that fills the GEMM problem below:
 * it turns the two loads of p.a into one load through a phi of parameter addresses, loses the
 * Linear-2 side, and every Linear-2 tile reads its A operand from X instead of h (PTX: no load
 * of the h field but the Linear-1 destinations). Loads from global memory are lowered
 * correctly; test_moe runs Linear-1 and Linear-2 alone to catch any regression (docs/EP.md). */
template <class C, int MODE>
__global__ void __launch_bounds__(C::THREADS, 1)
    xs_moe_kernel_t(const xs_moe_kargs *__restrict__ args)
{
    constexpr bool DEFER = MODE == XS_MOE_DEFER_RING, SPILL = MODE == XS_MOE_DEFER_SPILL;
    const xs_moe_kargs &a = *args;
    extern __shared__ __align__(128) char xs_moe_smem[];
    char *smem = xs_moe_smem;
    __shared__ int s_task, s_abort;
    int pending = -1; /* thread 0, adaptive plans: a claimed Linear-2 tile not run yet */
    /* DEFER: the Linear-2 staging tile of its own and the pointers of a deferred tile's rows;
     * s_def: the deferred tile (its task index, -1: none), its rows, columns and remote rows */
    char *stg = DEFER ? smem + XS_MOE_DEFER_STG : smem;
    char **ddst = (char **)(smem + XS_MOE_DEFER_DST);
    __shared__ int s_def, s_def_rows, s_def_cols, s_def_rem, s_go;
    /* SPILL: the held-back tiles, and which rows of the current tile are remote */
    __shared__ xs_moe_spillq s_sq;
    __shared__ unsigned char s_rem[SPILL ? C::BM : 1];
    const int tid = threadIdx.x;
    if (DEFER && tid == 0)
        s_def = -1; /* seen by all at the loop's first barrier */
    if (SPILL && tid == 0)
        s_sq.head = s_sq.n = 0;
    char **dst = xs_gemm_dst_rows<C>(smem);
    float *scale = xs_gemm_row_scale<C>(smem);
    unsigned long long g0 = 0, k0 = 0;
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    if (tid == 0)
        xs_time_anchor(&g0, &k0, 1ull << 23);
    /* the last a.couriers CTAs are couriers; they take no task */
    const int courier = a.couriers > 0 && (int)blockIdx.x >= (int)gridDim.x - a.couriers;
    if (courier)
        xs_moe_courier(a, (int)blockIdx.x - ((int)gridDim.x - a.couriers), smid, smem);

#pragma unroll 1
    for (; !courier;) {
        if (tid == 0) {
            int t = -1;
            /* stop taking work once any CTA recorded a failure */
            if (*(volatile unsigned int *)&a.status->code == 0)
                t = a.adaptive ? xs_moe_take_adaptive(a, &pending)
                               : (int)atomicAdd(a.queue, 1u);
            s_task = t;
            s_abort = 0;
        }
        __syncthreads();
        const int ti = s_task;
        if (ti < 0 || ti >= a.ntasks)
            break;
        if (SPILL) /* held-back tiles the pacer admits now leave before this task */
            xs_moe_spill_drain(a, smem, &s_sq, 0);
        const uint64_t c_fetch = xs_clock();
        const int2 tk = a.tasks[ti];
        const int kind = (tk.x >> 30) & 3, rbi = tk.x & 0x3fffffff, nb = tk.y;
        const int4 rb = a.rbs[rbi];
        const int expert = rb.x, row0 = rb.y, nrows = rb.z;

        if (kind == 2 && tid == 0 &&
            xs_wait_geq((const uint64_t *)(a.done1 + rbi), (uint64_t)a.l1_per_rb,
                        a.timeout_ns) != XS_WAIT_OK) {
            xs_devfail(a.status, XS_DEVERR_TIMEOUT,
                       ((unsigned long long)blockIdx.x << 32) | (unsigned int)rbi);
            s_abort = 1;
        }
        /* Linear-2: a ticket after the acquire. Every Linear-1 tile of the row block took its
         * ticket before its release, so a correct order gives this one a larger number, whatever
         * the clocks say (xs_moe_tile.seq) */
        unsigned long long ticket = ~0ull;
        if (kind == 2 && tid == 0 && a.trace)
            ticket = atomicAdd(a.seq, 1ull);
        int remote = 0;
        if (tid < C::BM) {
            char *d = NULL;
            float sc = 1.0f;
            if (tid < nrows) {
                const int gr = row0 + tid;
                if (kind == 1) {
                    d = (char *)(a.h + (long long)gr * a.inter + nb * (C::BN / 2));
                } else {
                    const int rank = a.row_rank[gr];
                    d = a.rank_base[rank] + a.row_off[gr] + (long long)nb * C::BN * 2;
                    sc = a.row_weight[gr];
                    remote = a.rank_host[rank];
                    /* couriers: a remote row goes to the staging buffer, they copy it on */
                    if (remote && !SPILL && a.cstage)
                        d = a.cstage + ((long long)gr * a.hidden + (long long)nb * C::BN) * 2;
                }
            }
            dst[tid] = d;
            scale[tid] = sc;
            if (SPILL)
                s_rem[tid] = (unsigned char)remote;
        }
        /* barrier: s_abort, the acquired dependency and the row tables are seen by all */
        const int nremote = __syncthreads_count(remote);
        if (s_abort)
            break;
        const uint64_t c_mma0 = xs_clock();

        xs_gemm_problem p;
        if (kind == 1) {
            p.a = a.x;
            p.a_rows = a.row_token + row0; /* fused dispatch: gather token rows */
            p.lda = a.hidden;
            p.b = a.w1 + (long long)expert * 2 * a.inter * a.hidden;
            p.ldb = a.hidden;
            p.m = nrows;
            p.n = 2 * a.inter;
            p.k = a.hidden;
        } else {
            p.a = a.h + (long long)row0 * a.inter;
            p.a_rows = NULL;
            p.lda = a.inter;
            p.b = a.w2 + (long long)expert * a.hidden * a.inter;
            p.ldb = a.inter;
            p.m = nrows;
            p.n = a.hidden;
            p.k = a.inter;
        }
        float acc[C::MT][C::NT][4];
        xs_gemm_mainloop<C>(p, 0, nb * C::BN, smem, acc);
        const uint64_t c_mma1 = xs_clock();
        int ncols;
        if (kind == 1) {
            const int nv = 2 * a.inter - nb * C::BN;
            ncols = (nv < C::BN ? nv : C::BN) / 2;
            xs_gemm_stage_swiglu<C>(smem, acc, NULL);
        } else {
            const int nv = a.hidden - nb * C::BN;
            ncols = nv < C::BN ? nv : C::BN;
            /* DEFER: the tile the pacer held back last time leaves first, from the staging
             * tile this one is about to use (its wait mostly ran out during this main loop) */
            if (DEFER && s_def >= 0) {
                xs_moe_flush<C>(a, stg, ddst, s_def, s_def_rows, s_def_cols, s_def_rem);
                if (tid == 0)
                    s_def = -1;
            }
            xs_gemm_stage_acc<C>(stg, acc, scale); /* routing weight per row */
        }
        const int bulk = kind == 2 && a.bulk_combine;
        if (bulk)
            xs_bulk_fence_smem(); /* this thread's staging writes, for the TMA's reads */
        unsigned long long gate_ns = 0;
        const int paced = kind == 2 && nremote > 0 && a.pace_ns_per_byte > 0.0;
        if (DEFER) {
            /* a tile the pacer would hold back waits in the staging tile instead */
            if (tid == 0)
                s_go = !paced || xs_moe_pace_try(a, (double)nremote * ncols * 2.0);
        } else if (SPILL) {
            /* a tile the pacer would hold back spills, unless the queue is full: then it waits */
            if (tid == 0) {
                const double bytes = (double)nremote * ncols * 2.0;
                s_go = !paced || xs_moe_pace_try(a, bytes);
                if (!s_go && s_sq.n >= ((const volatile xs_moe_kargs &)a).spill_depth) {
                    gate_ns = xs_moe_pace(a, bytes);
                    s_go = 1;
                }
                s_sq.cnt = 0;
            }
        } else if (paced && tid == 0) {
            gate_ns = xs_moe_pace(a, (double)nremote * ncols * 2.0);
        }
        __syncthreads(); /* the staged tile, and the pacer's permission, for every thread */
        if (SPILL && kind == 2 && !s_go)
            xs_moe_spill_tile(a, smem, &s_sq, s_rem, dst, ti, row0, nrows, nb, ncols);
        const int defer = DEFER && kind == 2 && !s_go;
        if (defer) {
            if (tid < C::BM)
                ddst[tid] = dst[tid];
            if (tid == 0) {
                s_def = ti;
                s_def_rows = nrows;
                s_def_cols = ncols;
                s_def_rem = nremote;
            }
        }
        const uint64_t c_st0 = xs_clock();
        if (defer)
            ; /* stored by the next Linear-2 epilogue of this CTA, or at its end */
        else if (kind == 1)
            xs_gemm_store_rows<C, C::BN / 2>(smem, dst, nrows, ncols);
        else if (bulk)
            xs_gemm_store_rows_bulk<C, C::BN>(smem, dst, nrows, ncols);
        else
            xs_gemm_store_rows<C, C::BN>(stg, dst, nrows, ncols);
        /* every store of the tile issued (accepted by the SM); bulk: every copy has read its
         * row, so the next tile may overwrite the staging tile; DEFER: ddst and s_def set */
        __syncthreads();
        if (tid == 0) {
            const uint64_t c_st1 = xs_clock();
            if (kind == 2 && a.ready) {
                /* the staged rows to the couriers: the barrier above ordered every thread's
                 * stores before this release (cumulative) */
                __threadfence();
                xs_st_release_gpu((uint64_t *)(a.ready + (size_t)rbi * a.l2_per_rb + nb), 1ull);
            }
            if (kind == 1 && !(a.fault_skip_l1 && ti == 0)) {
                if (a.trace)
                    ticket = atomicAdd(a.seq, 1ull); /* before the release (see Linear-2) */
                /* release: the CTA's h stores (ordered by the barrier) before the count */
                __threadfence();
                atomicAdd(a.done1 + rbi, 1ull);
            }
            if (a.trace) {
                unsigned long long *r = a.trace + (size_t)ti * XS_MOE_TRACE_WORDS;
                r[0] = c_fetch;
                r[1] = c_mma0;
                r[2] = c_mma1;
                r[3] = c_st0; /* a deferred tile: st0, st1 and the wait at its flush */
                r[4] = c_st1;
                r[5] = ((unsigned long long)blockIdx.x << 32) | smid;
                r[6] = ((unsigned long long)(nremote * ncols * 2) << 32) |
                       (unsigned int)(nrows * ncols * 2);
                r[7] = gate_ns;
                r[8] = ticket;
                r[9] = 0; /* a deferred tile: 1 at its flush */
            }
        }
    }
    if (DEFER) {
        /* the loop's exits are uniform (s_task, s_abort): every thread is here */
        __syncthreads();
        if (s_def >= 0)
            xs_moe_flush<C>(a, stg, ddst, s_def, s_def_rows, s_def_cols, s_def_rem);
    }
    if (SPILL) {
        __syncthreads(); /* as above */
        xs_moe_spill_drain(a, smem, &s_sq, 1);
    }
    if (a.bulk_combine)
        xs_bulk_wait_done(); /* the writes of this thread's copies, before the CTA ends */
    if (tid == 0 && a.anchors) {
        unsigned long long g1, k1;
        xs_time_anchor(&g1, &k1, 1ull << 23);
        unsigned long long *an = a.anchors + 4 * (size_t)blockIdx.x;
        an[0] = g0;
        an[1] = k0;
        an[2] = g1;
        an[3] = k1;
    }
}

#define xs_moe_kernel xs_moe_kernel_t<xs_moe_cfg, 0>
#define xs_moe_kernel_defer xs_moe_kernel_t<xs_moe_cfg3, XS_MOE_DEFER_RING>
#define xs_moe_kernel_spill xs_moe_kernel_t<xs_moe_cfg, XS_MOE_DEFER_SPILL>

/* Xs[gr] = X[row_token[gr]]: the dispatch as its own pass (16-byte copies) */
static __global__ void xs_moe_gather_kernel(const xs_bf16 *x, const int *row_token, xs_bf16 *xs,
                                     int rows, int hidden)
{
    const int per_row = hidden / 8;
    const size_t total = (size_t)rows * per_row;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / per_row), c = (int)(i % per_row);
        ((uint4 *)(xs + (size_t)r * hidden))[c] =
            __ldg((const uint4 *)(x + (size_t)row_token[r] * hidden) + c);
    }
}

/* h = silu(gate) * up from the interleaved Linear-1 output (bf16 or fp32), h in bf16 */
template <typename T>
__global__ void xs_moe_swiglu_kernel(const T *y, xs_bf16 *h, int rows, int inter)
{
    const size_t total = (size_t)rows * inter;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / inter), j = (int)(i % inter);
        const int pg = 32 * (j / 16) + (j % 16);
        const float g = (float)y[(size_t)r * 2 * inter + pg];
        const float u = (float)y[(size_t)r * 2 * inter + pg + 16];
        h[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
    }
}

/* combine preparation: row gr scaled by its routing weight, written to its rank's staging
 * region at the window offset (bf16), or to the fp32 reference in sorted order */
template <typename T>
__global__ void xs_moe_scatter_kernel(const T *y2, const float *w, const int *row_rank,
                                      const long long *row_off, char *stage, size_t win_bytes,
                                      float *ref, int rows, int hidden)
{
    const size_t total = (size_t)rows * hidden;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / hidden), c = (int)(i % hidden);
        const float v = (float)y2[i] * w[r];
        if (ref) {
            ref[i] = v;
        } else {
            xs_bf16 *o = (xs_bf16 *)(stage + (size_t)row_rank[r] * win_bytes + row_off[r]);
            o[c] = __float2bfloat16(v);
        }
    }
}

#endif /* XSTAGE_EP_KERNEL_CUH */
