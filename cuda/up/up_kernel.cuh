// SPDX-License-Identifier: Apache-2.0
/*
 * up_kernel.cuh - FlashAttention-2-style forward tile engine (bf16 in/out, head dim 128, fp32
 * online softmax) whose output tiles either land in a local buffer or are stored straight into
 * the Ulysses all-to-all destinations through the window table, and its __global__ kernels;
 * cuda/up/up_runtime.cu launches them (xs_attn_fwd, cuda/up/up.h).
 *
 * Layout: Q, K, V and O are [seq, heads, 128] bf16, row-major (batch 1; fold a batch into heads
 * or run one launch per batch element). That is the [batch, seq, heads, dim] layout of
 * flash-attn and of a Ulysses all-to-all: the rows of sequence shard p of all local heads are one
 * contiguous block of O, and that block is exactly what rank p receives from this rank.
 *
 * One CTA: 8 warps, BLOCK_M = 128 query rows (16 per warp), BLOCK_N = 64 keys per iteration.
 *   S = Q K^T and O += P V on tensor cores (mma.sync.m16n8k16 bf16 -> fp32); Q is read once per
 *   tile into registers with ldmatrix, K with ldmatrix, V with ldmatrix.trans; P is reused from
 *   the S accumulators as the A operand without touching shared memory (the C layout of two
 *   adjacent m16n8 tiles is the A layout of one m16k16 tile).
 *   K/V (and the next tile's Q) stream in with cp.async into a 2-stage ring: the loads of item
 *   n+1 (a key block of this tile, or the first key block of the CTA's next tile) are in flight
 *   while item n is computed, so a persistent CTA starts its next query block without a bubble.
 *   Shared tiles are [rows][16 chunks of 16 B] with chunk' = chunk ^ (row & 7): every ldmatrix
 *   phase (8 rows, one chunk column) then hits 8 distinct 16-byte bank groups.
 *   Softmax in fp32 with exp2: p = 2^(s*scale*log2e - m*scale*log2e), one FFMA + one MUFU.EX2.
 *
 * Persistent schedule: tile t is (query block nqb-1 - t/heads, head t%heads): heaviest causal
 * blocks first, and for rank 0 of a Ulysses group the locally kept shard (the first seq/P rows)
 * comes last, so the final wave's stores do not cross the link. Wave w is tiles
 * [w*grid, (w+1)*grid); CTA b takes tile w*grid + b in even waves and w*grid + grid-1-b in odd
 * ones (a snake), so a CTA that drew a long causal block in one wave draws a short one in the
 * next and the CTAs finish together. Which tiles a CTA computes is fixed by the snake; the order
 * it computes them in is one of two:
 *   SNAKE  its waves in order (heaviest first);
 *   EARLY  (windows output) first the waves of its tiles that cross the link, in reverse - for
 *          causal the lightest block first, so the link starts draining after the shortest block
 *          instead of the longest - then its locally kept tiles in order. A CTA's total work is
 *          the same, and at any moment the CTAs still work on one or two neighbouring waves, so
 *          the heads whose K/V they stream together are the same as with SNAKE.
 * A launch with grid = number of tiles is the ordinary one-tile-per-CTA kernel; the code is the
 * same.
 *
 * Output: after the final rescale each warp converts its 16 x 128 fp32 rows to bf16 in its own
 * 4 KB of shared memory (warp-private, so no CTA barrier) and stores them with 16-byte
 * coalesced stores (one 256-byte row per 16 lanes):
 *   split = 0  right away (piggyback: the warps go straight on to the next query block);
 *   split = n  in n equal slices spread evenly over the key-block iterations of the CTA's next
 *              tile: slice s at the start of iteration floor(s*nkb/n) (several at once when
 *              n > nkb), so one tile's stores drain while the next query block computes and the
 *              injection rate is the tile's bytes over the next tile's duration; the last tile's
 *              at the end of the kernel.
 *
 * Couriers (WINDOWS output, couriers = C > 0, docs/UP.md "Couriers"): the grid still has one CTA
 * per SM, but only the first grid - C CTAs compute (the tile assignment and order above over
 * grid - C CTAs); the last C CTAs only move bytes. A compute CTA stores a tile whose rows leave
 * rank 0's shard (a "remote" tile, tiles [0, remote)) into the staging buffer O, then - after a
 * CTA barrier - thread 0 publishes the tile's ready flag (st.release.gpu of the run's signal);
 * tiles that stay in rank 0's shard go straight to window 0 as above. The couriers walk the
 * remote tiles in the order they become ready (position k of every compute CTA, then k + 1:
 * xs_attn_rwalk), round-robin: courier c takes the walk's elements c, c + C, ...; for each it
 * waits for the ready flag (ld.acquire.gpu, bounded), loads the 32 KB from O (16-byte L2 loads,
 * 8 per thread in flight) and stores it to the destination rows in four 8 KB chunks, PACED: the
 * chunks of one courier leave at most pace/C bytes per ns (a token bucket of two chunks on
 * %globaltimer). Why: stores spread over all SMs slow every SM's loads 2-3x while in flight, and
 * a backlogged stage slows every SM; the same bytes from a few SMs paced under the drain rate
 * cost nothing (the probe, docs/UP.md). Signals keep the external contract: every CTA, after
 * its last store, publishes its done flag (fence.sc.sys, then st.release.gpu); the last courier
 * waits for all of them and then raises flags[r][b] for every rank r and every b < grid.
 * Deadlock freedom: compute CTAs never wait on anything but their own CTA's barriers; couriers
 * wait only on flags that compute CTAs (ready) or CTAs that are done with their waits (done)
 * publish; every CTA is resident (one per SM, checked at launch); every wait is bounded by
 * timeout_ns and a failure stops the other couriers' waits (xs_devstatus).
 */
#ifndef XSTAGE_UP_KERNEL_CUH
#define XSTAGE_UP_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "up/up.h"

/* ---- device tile engine ------------------------------------------------------------------ */
#ifdef __CUDACC__

XS_DEV uint32_t xs_attn_smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* Byte offset of 16-byte chunk `ch` (0..15) of row `r` in a swizzled [rows][256 B] tile. */
XS_DEV uint32_t xs_attn_swz(int r, int ch) { return (uint32_t)(r * 256 + ((ch ^ (r & 7)) << 4)); }

XS_DEV void xs_cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}
XS_DEV void xs_cp_async_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
XS_DEV void xs_cp_async_wait_all(void) { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

XS_DEV void xs_ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
XS_DEV void xs_ldsm_x4_t(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

/* c += a * b for one m16n8k16 tile: a row-major 16x16 bf16 (4 regs), b 16x8 "col" (2 regs). */
XS_DEV void xs_mma_bf16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* 2^x; ex2.approx(-inf) = +0, which is what masked scores need. */
XS_DEV float xs_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* Two floats to a bf16x2 register: `lo` in the low half (the lower column index). */
XS_DEV uint32_t xs_pack_bf16(float lo, float hi)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

/* cp.async ROWS rows (one head) starting at sequence row row0 into a swizzled tile at shared
 * address s. g points at row 0 of the head; rows are row_stride bytes apart. Rows at or past seq
 * are zero-filled (src-size 0), so masked keys multiply exact zeros, never stale NaNs. */
template <int ROWS>
XS_DEV void xs_attn_load_tile(uint32_t s, const char *g, int row0, int seq, size_t row_stride)
{
#pragma unroll
    for (int i = 0; i < ROWS * 16 / XS_ATTN_THREADS; i++) {
        int c = (int)threadIdx.x + i * XS_ATTN_THREADS;
        int r = c >> 4, ch = c & 15, gr = row0 + r;
        int ok = gr < seq;
        const char *src = g + (size_t)(ok ? gr : 0) * row_stride + ch * 16;
        xs_cp_async16(s + xs_attn_swz(r, ch), src, ok ? 16 : 0);
    }
}

/* Rank whose shard holds sequence row `row` (WINDOWS; 0 for LOCAL): computed once per staged
 * tile, so that the stores divide only for rows past that rank's shard (a warp's 16 rows
 * straddle two shards only when rows_per_rank is not a multiple of 16). */
XS_DEV int xs_attn_rank_of(const xs_attn_args &a, int row)
{
    return a.out == XS_ATTN_OUT_WINDOWS ? row / a.rows_per_rank : 0;
}

/* Store 16-byte units [u0, u1) of one warp's staged rows (unit u = row u/16, chunk u%16;
 * row0 = the sequence row of staged row 0, h its head, p0 = xs_attn_rank_of(a, row0)) to their
 * destination. */
XS_DEV void xs_attn_store_units(const xs_attn_args &a, const xs_wintab &tab,
                                const unsigned char *stg, int row0, int h, int p0, int u0,
                                int u1, int lane)
{
    const int pend = (p0 + 1) * a.rows_per_rank; /* first row past rank p0's shard */
    for (int u = u0 + lane; u < u1; u += 32) {
        int r = u >> 4, ch = u & 15, grow = row0 + r;
        if (grow >= a.seq)
            continue;
        uint4 val = *reinterpret_cast<const uint4 *>(stg + xs_attn_swz(r, ch));
        char *dst;
        if (a.out == XS_ATTN_OUT_LOCAL) {
            dst = (char *)a.o + ((size_t)grow * a.heads + h) * XS_ATTN_ROW_BYTES + ch * 16;
        } else {
            const int p = grow < pend ? p0 : grow / a.rows_per_rank;
            if (p >= tab.nranks) {
                xs_devfail(a.status, XS_DEVERR_BOUNDS, (unsigned long long)grow);
                continue;
            }
            const int dh = a.dst_heads > 0 ? a.dst_heads : a.heads;
            dst = tab.data[p] +
                  ((size_t)(grow - p * a.rows_per_rank) * dh + a.dst_head0 + h) *
                      XS_ATTN_ROW_BYTES +
                  ch * 16;
        }
        xs_st16v(dst, val);
    }
}

/* The kernel's walk of the same placement, without a division per slice: the next slice s, its
 * iteration it = floor(s*nkb/n) = s*qs + floor(s*rs/n) (nkb = qs*n + rs) and rem = s*rs mod n.
 * One division per tile (init); advancing by one slice is two adds and a compare, where
 * xs_attn_slices_due and xs_attn_slice_iter (include/xstage_up.h) cost a 64-bit division each,
 * a few hundred cycles of dependent latency, in all 8 warps at once, for every slice. */
typedef struct {
    int n, s, it, rem, qs, rs;
} xs_attn_slicewalk;
XS_HD void xs_attn_slicewalk_init(xs_attn_slicewalk *w, int n, int nkb)
{
    w->n = n, w->s = 0, w->it = 0, w->rem = 0;
    w->qs = nkb / n;
    w->rs = nkb - w->qs * n;
}
/* Slices due by iteration j (= xs_attn_slices_due(n, nkb, j) when j only grows). */
XS_HD int xs_attn_slicewalk_due(xs_attn_slicewalk *w, int j)
{
    while (w->s < w->n && w->it <= j) {
        w->s++;
        w->it += w->qs;
        w->rem += w->rs;
        if (w->rem >= w->n) {
            w->rem -= w->n;
            w->it++;
        }
    }
    return w->s;
}
/* Iteration of the next slice; INT_MAX when all n are due. */
XS_HD int xs_attn_slicewalk_next(const xs_attn_slicewalk *w)
{
    return w->s < w->n ? w->it : INT_MAX;
}


/* ---- couriers' memory operations (docs/UP.md "Couriers": who waits on whom) ------------- */

/* 16 bytes from L2 (.cg: not from this SM's L1, which never saw the compute CTAs' stores). */
XS_DEV uint4 xs_attn_ld16_cg(const void *p)
{
    uint4 v;
    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

/* One thread waits until *p == v (acquire, gpu scope): 0 when it does, 1 after timeout_ns,
 * 2 as soon as another CTA recorded a failure in *st (so that one timeout stops every courier
 * within one poll, not one timeout each). */
XS_DEV int xs_attn_wait_eq(const uint64_t *p, uint64_t v, uint64_t timeout_ns,
                           const xs_devstatus *st)
{
    const unsigned long long t0 = xs_globaltimer();
    while (xs_ld_acquire_gpu(p) != v) {
        if (st && *(const volatile unsigned int *)&st->code)
            return 2;
        if (xs_globaltimer() - t0 > timeout_ns)
            return 1;
        __nanosleep(32);
    }
    return 0;
}

/* Courier mode, compute CTA: store one warp's staged rows (row0 its first sequence row, h the
 * head) to the staging buffer O at [row, h] - the LOCAL layout - for a courier to move. */
XS_DEV void xs_attn_store_stage(const xs_attn_args &a, const unsigned char *stg, int row0, int h,
                                int lane)
{
    for (int u = lane; u < XS_ATTN_UNITS_PER_WARP; u += 32) {
        int r = u >> 4, ch = u & 15, grow = row0 + r;
        if (grow >= a.seq)
            continue;
        uint4 val = *reinterpret_cast<const uint4 *>(stg + xs_attn_swz(r, ch));
        xs_st16v((char *)a.o + ((size_t)grow * a.heads + h) * XS_ATTN_ROW_BYTES + ch * 16, val);
    }
}

/* KV split: one warp's partial (its 16 rows' unnormalised O, row max m and thread-partial row
 * sum l) into slot `slot`, then - after every lane's stores (a warp barrier orders them before
 * lane 0's release, which is cumulative) - lane 0 publishes it with a release of the run's
 * signal. Lane-major, so every store is coalesced. */
XS_DEV void xs_attn_kv_put(const xs_attn_args &a, int slot, int warp, int lane,
                           const float (&oacc)[16][4], const float (&m)[2], const float (&l)[2])
{
    float *pp = a.part + ((size_t)slot * XS_ATTN_WARPS + warp) * XS_ATTN_KV_FLOATS * 32 + lane;
#pragma unroll
    for (int dt = 0; dt < 16; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            __stcg(pp + (dt * 4 + e) * 32, oacc[dt][e]);
    __stcg(pp + 64 * 32, m[0]);
    __stcg(pp + 65 * 32, m[1]);
    __stcg(pp + 66 * 32, l[0]);
    __stcg(pp + 67 * 32, l[1]);
    __syncwarp(); /* orders every lane's stores before lane 0's release (cumulative) */
    if (lane == 0)
        xs_st_release_gpu(a.part_flag + (size_t)slot * XS_ATTN_WARPS + warp, a.signal);
}

/* KV split, the last part of a tile: lane 0 waits (bounded) for the n - 1 partials of this
 * warp's rows in slots slot .. slot + n - 2, then every lane merges them into its own state:
 * m' = max(m, m_i), O' = O 2^((m - m')s) + O_i 2^((m_i - m')s), l' likewise (s = scale log2 e;
 * a row with no visible key in a part has m_i = -inf and weighs 0). A timeout is recorded in
 * a.status and the partials are not merged: the run has failed, the output is garbage. */
XS_DEV void xs_attn_kv_merge(const xs_attn_args &a, int slot, int n, int warp, int lane,
                             float sl2, float (&oacc)[16][4], float (&m)[2], float (&l)[2])
{
    int res = 0;
    if (lane == 0) {
        const uint64_t tmo = a.timeout_ns ? a.timeout_ns : XS_ATTN_TIMEOUT_NS;
        const unsigned long long t0 = xs_globaltimer();
        for (int i = 0; i < n - 1 && !res; i++) {
            const uint64_t left = xs_globaltimer() - t0; /* one bound for the whole wait */
            res = xs_attn_wait_eq(a.part_flag + (size_t)(slot + i) * XS_ATTN_WARPS + warp,
                                  a.signal, left < tmo ? tmo - left : 0, a.status);
            if (res == 1)
                xs_devfail(a.status, XS_DEVERR_TIMEOUT,
                           (2ull << 32) | (unsigned)((slot + i) * XS_ATTN_WARPS + warp));
        }
    }
    res = __shfl_sync(0xffffffffu, res, 0);
    __syncwarp(); /* lane 0's acquire, then every lane's loads */
    if (res)
        return;
    for (int i = 0; i < n - 1; i++) {
        const float *pp =
            a.part + ((size_t)(slot + i) * XS_ATTN_WARPS + warp) * XS_ATTN_KV_FLOATS * 32 + lane;
        float wo[2], wi[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float mi = __ldcg(pp + (64 + r) * 32), li = __ldcg(pp + (66 + r) * 32);
            const float mn = fmaxf(m[r], mi);
            wo[r] = m[r] == -INFINITY ? 0.f : xs_exp2((m[r] - mn) * sl2);
            wi[r] = mi == -INFINITY ? 0.f : xs_exp2((mi - mn) * sl2);
            l[r] = l[r] * wo[r] + li * wi[r];
            m[r] = mn;
        }
#pragma unroll
        for (int dt = 0; dt < 16; dt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                oacc[dt][e] =
                    oacc[dt][e] * wo[e >> 1] + __ldcg(pp + (dt * 4 + e) * 32) * wi[e >> 1];
    }
}

/* The whole CTA: walk its tiles in its order (see the top of the file). COURIER: a compute CTA
 * of the courier kernel - the first gridDim.x - couriers CTAs share the tiles, remote tiles go
 * to the staging buffer O and publish their ready flag, the others to window 0 as usual, and
 * the CTA ends with its done flag instead of the signals. LIST: the KV-split kernel - the CTA
 * walks its task list (a.tasks), a part's key blocks only; a part other than a tile's last
 * leaves a partial and stores nothing, the last merges the partials and stores the tile. */
template <bool CAUSAL, bool COURIER = false, bool LIST = false>
XS_DEV void xs_attn_cta(const xs_attn_args &a, const xs_wintab &tab, unsigned char *smem)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    const int seq = a.seq, heads = a.heads;
    const int nqb = (seq + XS_ATTN_BM - 1) / XS_ATTN_BM;
    const int ntiles = nqb * heads;
    const size_t row_stride = (size_t)heads * XS_ATTN_ROW_BYTES;
    const float scale = a.scale > 0.f ? a.scale : 0.08838834764831845f; /* 1/sqrt(128) */
    const float sl2 = scale * 1.4426950408889634f;                     /* scale * log2(e) */

    const uint32_t s_q = xs_attn_smem_u32(smem);
    const uint32_t s_k = s_q + XS_ATTN_Q_BYTES;
    const uint32_t s_v = s_k + 2 * XS_ATTN_KV_BYTES;
    unsigned char *stg = smem + XS_ATTN_Q_BYTES + 4 * XS_ATTN_KV_BYTES +
                         warp * XS_ATTN_WARP_OUT_BYTES; /* this warp's output rows */

    const uint64_t t_start = xs_globaltimer();
    /* warp 0's store time in clock64 cycles (a cheap counter read; %globaltimer around every
     * slice cost two slow special-register reads per slice), converted to ns at the end with
     * this CTA's own globaltimer/clock ratio */
    const long long c_start = clock64();
    long long store_cyc = 0;

    /* Units per slice when a tile's stores are spread over the next tile (split > 0); couriers
     * run with split 0 (validated) */
    const int split = COURIER ? 0 : a.split;
    const int upi = split > 0 ? (XS_ATTN_UNITS_PER_WARP + split - 1) / split : 0;
    int pend_u = XS_ATTN_UNITS_PER_WARP; /* units of the staged tile already stored */
    int pend_row0 = 0, pend_h = 0, pend_p = 0;
    /* The iteration at which the staged tile's next slice is due (INT_MAX: none left) and the
     * walk that places them. The main loop only compares j with due_j: a division on every
     * iteration costs ~5 % against split = 0, and two per slice ~0.5 us per slice (0.5-1 % of
     * fa); the walk advances without one (docs/UP.md). */
    int due_j = INT_MAX;
    xs_attn_slicewalk sw;
    xs_attn_slicewalk_init(&sw, 1, 1);

    /* this CTA's tiles: k-th of `mine` (grid <= tiles, so mine >= 1); the compute CTAs of the
     * courier kernel share them as a grid of gridDim.x - couriers */
    const int ncta = COURIER ? (int)gridDim.x - a.couriers : (int)gridDim.x;
    const int nrem = COURIER ? xs_attn_remote_count(seq, heads, a.rows_per_rank) : 0;
    const int rev = (a.out == XS_ATTN_OUT_WINDOWS && a.order == XS_ATTN_ORDER_EARLY)
                        ? xs_attn_remote_count(seq, heads, a.rows_per_rank)
                        : 0;
    /* LIST: this CTA's tasks; cur is the task at hand ({tile, key blocks [y, z), part}) */
    const int toff = LIST ? a.task_off[blockIdx.x] : 0;
    const int mine = LIST ? a.task_off[blockIdx.x + 1] - toff
                          : xs_attn_count_below(ntiles, ncta, blockIdx.x);
    int k = 0;
    int4 cur = make_int4(ntiles, 0, 0, -1);
    if (LIST && mine > 0)
        cur = a.tasks[toff];
    int tile = LIST ? cur.x : xs_attn_cta_kth(rev, ncta, blockIdx.x, 0);
    int stage = 0;
    if (tile < ntiles) {
        int qb = nqb - 1 - tile / heads, h = tile % heads;
        const char *qg = (const char *)a.q + (size_t)h * XS_ATTN_ROW_BYTES;
        const char *kg = (const char *)a.k + (size_t)h * XS_ATTN_ROW_BYTES;
        const char *vg = (const char *)a.v + (size_t)h * XS_ATTN_ROW_BYTES;
        const int key0 = LIST ? cur.y * XS_ATTN_BN : 0;
        xs_attn_load_tile<XS_ATTN_BM>(s_q, qg, qb * XS_ATTN_BM, seq, row_stride);
        xs_attn_load_tile<XS_ATTN_BN>(s_k, kg, key0, seq, row_stride);
        xs_attn_load_tile<XS_ATTN_BN>(s_v, vg, key0, seq, row_stride);
    }
    xs_cp_async_commit();

    while (tile < ntiles) {
        const int qb = nqb - 1 - tile / heads, h = tile % heads;
        const int q0 = qb * XS_ATTN_BM;
        const int wrow0 = q0 + warp * 16; /* first query row of this warp */
        const int last_row = min(q0 + XS_ATTN_BM, seq) - 1;
        const int nkb = CAUSAL ? last_row / XS_ATTN_BN + 1 : (seq + XS_ATTN_BN - 1) / XS_ATTN_BN;
        /* this task's key blocks [jb, je); LIST: the next task (its tile ntiles after the last) */
        const int jb = LIST ? cur.y : 0, je = LIST ? cur.z : nkb;
        uint64_t *tns = LIST && a.task_ns && tid == 0 ? a.task_ns + 4 * (size_t)(toff + k) : NULL;
        if (tns)
            tns[0] = xs_globaltimer();
        int4 nxt = make_int4(ntiles, 0, 0, -1);
        if (LIST && k + 1 < mine)
            nxt = a.tasks[toff + k + 1];
        /* the next tile of this CTA; ntiles when this is its last */
        const int next = LIST ? nxt.x
                              : k + 1 < mine ? xs_attn_cta_kth(rev, ncta, blockIdx.x, k + 1)
                                             : ntiles;
        const char *kg = (const char *)a.k + (size_t)h * XS_ATTN_ROW_BYTES;
        const char *vg = (const char *)a.v + (size_t)h * XS_ATTN_ROW_BYTES;

        /* the staged tile's slices ride on this task's iterations (counted from jb) */
        if (pend_u < XS_ATTN_UNITS_PER_WARP)
            xs_attn_slicewalk_init(&sw, split, je - jb);

        uint32_t qf[8][4];
        float oacc[16][4];
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
        for (int i = 0; i < 16; i++)
            oacc[i][0] = oacc[i][1] = oacc[i][2] = oacc[i][3] = 0.f;

        for (int j = jb; j < je; j++) {
            xs_cp_async_wait_all();
            __syncthreads(); /* item j (and at j = jb this tile's Q) visible to every warp */
            if (j == jb) {
#pragma unroll
                for (int ks = 0; ks < 8; ks++) {
                    int r = warp * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                    int ch = 2 * ks + (lane >> 4);
                    xs_ldsm_x4(s_q + xs_attn_swz(r, ch), qf[ks][0], qf[ks][1], qf[ks][2],
                               qf[ks][3]);
                }
                /* every warp holds its Q: the Q buffer may take the next tile's rows */
                __syncthreads();
            }
            /* prefetch item n+1 into the other stage; its last reader finished item n-1 before
             * the barrier above */
            {
                const uint32_t ko = s_k + (stage ^ 1) * XS_ATTN_KV_BYTES;
                const uint32_t vo = s_v + (stage ^ 1) * XS_ATTN_KV_BYTES;
                if (j + 1 < je) {
                    xs_attn_load_tile<XS_ATTN_BN>(ko, kg, (j + 1) * XS_ATTN_BN, seq, row_stride);
                    xs_attn_load_tile<XS_ATTN_BN>(vo, vg, (j + 1) * XS_ATTN_BN, seq, row_stride);
                } else if (next < ntiles) {
                    int nqb2 = nqb - 1 - next / heads, nh = next % heads;
                    size_t ho = (size_t)nh * XS_ATTN_ROW_BYTES;
                    const int nkey0 = LIST ? nxt.y * XS_ATTN_BN : 0;
                    xs_attn_load_tile<XS_ATTN_BM>(s_q, (const char *)a.q + ho,
                                                  nqb2 * XS_ATTN_BM, seq, row_stride);
                    xs_attn_load_tile<XS_ATTN_BN>(ko, (const char *)a.k + ho, nkey0, seq,
                                                  row_stride);
                    xs_attn_load_tile<XS_ATTN_BN>(vo, (const char *)a.v + ho, nkey0, seq,
                                                  row_stride);
                }
                xs_cp_async_commit();
            }
            /* reshape: the previous tile's slices due by this iteration ride on it; slice s
             * belongs to iteration floor(s*nkb/split), so ceil((j+1)*split/nkb) are due (j and
             * nkb counted within the task: from jb, je - jb of them) */
            if (j - jb >= due_j) {
                const int u1 =
                    min(XS_ATTN_UNITS_PER_WARP, xs_attn_slicewalk_due(&sw, j - jb) * upi);
                if (u1 > pend_u) {
                    const long long c0 = clock64();
                    xs_attn_store_units(a, tab, stg, pend_row0, pend_h, pend_p, pend_u, u1, lane);
                    store_cyc += clock64() - c0;
                    pend_u = u1;
                }
                due_j = pend_u < XS_ATTN_UNITS_PER_WARP ? xs_attn_slicewalk_next(&sw) : INT_MAX;
            }

            const int key0 = j * XS_ATTN_BN;
            const uint32_t sk = s_k + stage * XS_ATTN_KV_BYTES;
            const uint32_t sv = s_v + stage * XS_ATTN_KV_BYTES;
            stage ^= 1;
            if (CAUSAL && key0 > wrow0 + 15)
                continue; /* every key of the block is after every row of this warp */

            /* S = Q K^T: 16 x 64 per warp */
            float sacc[8][4];
#pragma unroll
            for (int i = 0; i < 8; i++)
                sacc[i][0] = sacc[i][1] = sacc[i][2] = sacc[i][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < 8; ks++) {
#pragma unroll
                for (int np = 0; np < 4; np++) {
                    const int mi = lane >> 3;
                    int r = np * 16 + (lane & 7) + ((mi >> 1) << 3);
                    int ch = 2 * ks + (mi & 1);
                    uint32_t b0, b1, b2, b3;
                    xs_ldsm_x4(sk + xs_attn_swz(r, ch), b0, b1, b2, b3);
                    xs_mma_bf16(sacc[2 * np], qf[ks], b0, b1);
                    xs_mma_bf16(sacc[2 * np + 1], qf[ks], b2, b3);
                }
            }

            /* mask keys past the end and, causally, keys after the query */
            if (key0 + XS_ATTN_BN > seq || (CAUSAL && key0 + XS_ATTN_BN - 1 > wrow0)) {
#pragma unroll
                for (int nt = 0; nt < 8; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int key = key0 + nt * 8 + 2 * t4 + (e & 1);
                        int row = wrow0 + g + ((e >> 1) << 3);
                        if (key >= seq || (CAUSAL && key > row))
                            sacc[nt][e] = -INFINITY;
                    }
            }

            /* online softmax; thread holds rows g (e = 0,1) and g + 8 (e = 2,3), and the 4
             * threads of a quad share a row */
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = -INFINITY;
#pragma unroll
                for (int nt = 0; nt < 8; nt++)
                    mx = fmaxf(mx, fmaxf(sacc[nt][2 * r], sacc[nt][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float mnew = fmaxf(m[r], mx);
                /* a row with no visible key yet keeps p = 0 and alpha = 0, never NaN */
                const float msc = mnew == -INFINITY ? 0.f : mnew * sl2;
                const float alpha = xs_exp2(m[r] * sl2 - msc);
                m[r] = mnew;
                float sum = 0.f;
#pragma unroll
                for (int nt = 0; nt < 8; nt++) {
                    float p0 = xs_exp2(fmaf(sacc[nt][2 * r], sl2, -msc));
                    float p1 = xs_exp2(fmaf(sacc[nt][2 * r + 1], sl2, -msc));
                    sacc[nt][2 * r] = p0;
                    sacc[nt][2 * r + 1] = p1;
                    sum += p0 + p1;
                }
                l[r] = l[r] * alpha + sum; /* thread-partial; the quad is summed at the end */
#pragma unroll
                for (int dt = 0; dt < 16; dt++) {
                    oacc[dt][2 * r] *= alpha;
                    oacc[dt][2 * r + 1] *= alpha;
                }
            }

            /* O += P V: P (16 x 64) from the S registers, V^T fragments via ldmatrix.trans */
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                uint32_t pf[4];
                pf[0] = xs_pack_bf16(sacc[2 * kk][0], sacc[2 * kk][1]);
                pf[1] = xs_pack_bf16(sacc[2 * kk][2], sacc[2 * kk][3]);
                pf[2] = xs_pack_bf16(sacc[2 * kk + 1][0], sacc[2 * kk + 1][1]);
                pf[3] = xs_pack_bf16(sacc[2 * kk + 1][2], sacc[2 * kk + 1][3]);
#pragma unroll
                for (int dp = 0; dp < 8; dp++) {
                    const int mi = lane >> 3;
                    int r = kk * 16 + (lane & 7) + ((mi & 1) << 3);
                    int ch = 2 * dp + (mi >> 1);
                    uint32_t b0, b1, b2, b3;
                    xs_ldsm_x4_t(sv + xs_attn_swz(r, ch), b0, b1, b2, b3);
                    xs_mma_bf16(oacc[2 * dp], pf, b0, b1);
                    xs_mma_bf16(oacc[2 * dp + 1], pf, b2, b3);
                }
            }
        }

        if (tns)
            tns[1] = xs_globaltimer();
        if (LIST && cur.w >= 0) {
            const int slot = cur.w >> 8, p = (cur.w >> 4) & 15, np = cur.w & 15;
            if (p < np - 1) {
                /* an earlier part: its partial for the tile's last part, and nothing else (the
                 * previous tile's slices are all due by this task's last iteration) */
                if (pend_u < XS_ATTN_UNITS_PER_WARP) {
                    const long long c0 = clock64();
                    xs_attn_store_units(a, tab, stg, pend_row0, pend_h, pend_p, pend_u,
                                        XS_ATTN_UNITS_PER_WARP, lane);
                    store_cyc += clock64() - c0;
                    pend_u = XS_ATTN_UNITS_PER_WARP;
                    due_j = INT_MAX;
                }
                xs_attn_kv_put(a, slot + p, warp, lane, oacc, m, l);
                if (tns)
                    tns[2] = tns[3] = xs_globaltimer();
                tile = next, cur = nxt;
                k++;
                continue;
            }
            xs_attn_kv_merge(a, slot, np, warp, lane, sl2, oacc, m, l);
        }
        if (tns)
            tns[2] = xs_globaltimer();
        if (tid == 0 && a.tile_work_ns)
            a.tile_work_ns[tile] = xs_globaltimer();

        /* ---- epilogue: final rescale, bf16, this warp's 16 rows out ---- */
        float inv[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float s = l[r];
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2);
            inv[r] = s > 0.f ? 1.f / s : 0.f;
        }
        if (pend_u < XS_ATTN_UNITS_PER_WARP) {
            /* every slice is due by the last iteration; kept so that no unit is ever dropped */
            const long long c0 = clock64();
            xs_attn_store_units(a, tab, stg, pend_row0, pend_h, pend_p, pend_u,
                                XS_ATTN_UNITS_PER_WARP, lane);
            store_cyc += clock64() - c0;
            pend_u = XS_ATTN_UNITS_PER_WARP;
        }
        __syncwarp(); /* every lane has read the old rows before they are overwritten */
#pragma unroll
        for (int dt = 0; dt < 16; dt++) {
            *reinterpret_cast<uint32_t *>(stg + xs_attn_swz(g, dt) + 4 * t4) =
                xs_pack_bf16(oacc[dt][0] * inv[0], oacc[dt][1] * inv[0]);
            *reinterpret_cast<uint32_t *>(stg + xs_attn_swz(g + 8, dt) + 4 * t4) =
                xs_pack_bf16(oacc[dt][2] * inv[1], oacc[dt][3] * inv[1]);
        }
        __syncwarp();
        const int p0 = xs_attn_rank_of(a, wrow0);
        if (COURIER && tile < nrem) {
            /* a courier moves it: stage in O, then the ready flag. The barrier orders every
             * warp's stores before thread 0's release (cumulative at gpu scope), so a courier
             * that acquires the flag reads the whole tile. */
            const long long c0 = clock64();
            xs_attn_store_stage(a, stg, wrow0, h, lane);
            store_cyc += clock64() - c0;
            __syncthreads();
            if (tid == 0)
                xs_st_release_gpu(a.sync + tile, a.signal);
        } else if (split == 0) {
            const long long c0 = clock64();
            xs_attn_store_units(a, tab, stg, wrow0, h, p0, 0, XS_ATTN_UNITS_PER_WARP, lane);
            store_cyc += clock64() - c0;
            pend_u = XS_ATTN_UNITS_PER_WARP;
        } else {
            pend_u = 0;
            pend_row0 = wrow0;
            pend_h = h;
            pend_p = p0;
            due_j = 0; /* slice 0 rides on iteration 0 of the next tile */
        }
        if (tid == 0 && a.tile_ns)
            a.tile_ns[tile] = xs_globaltimer();
        if (tns)
            tns[3] = xs_globaltimer();
        tile = next;
        if (LIST)
            cur = nxt;
        k++;
    }

    if (pend_u < XS_ATTN_UNITS_PER_WARP) {
        const long long c0 = clock64();
        xs_attn_store_units(a, tab, stg, pend_row0, pend_h, pend_p, pend_u,
                            XS_ATTN_UNITS_PER_WARP, lane);
        store_cyc += clock64() - c0;
    }
    xs_cp_async_wait_all(); /* nothing may still be landing in shared memory at exit */
    __syncthreads();        /* every warp has issued its last store */
    if (tid == 0) {
        uint64_t t_end = xs_globaltimer();
        const long long c_span = clock64() - c_start;
        if (a.cta_ns) {
            a.cta_ns[3 * blockIdx.x + 0] = t_start;
            a.cta_ns[3 * blockIdx.x + 1] = t_end;
            a.cta_ns[3 * blockIdx.x + 2] =
                c_span > 0 ? (uint64_t)((double)store_cyc * (double)(t_end - t_start) /
                                        (double)c_span)
                           : 0;
        }
        if (COURIER) {
            /* done: every store of this CTA (window 0's rows included) before the flag that
             * the raising courier acquires; it raises the signals for all */
            __threadfence_system();
            xs_st_release_gpu(a.sync + ntiles + blockIdx.x, a.signal);
        } else if (a.out == XS_ATTN_OUT_WINDOWS && a.signal) {
            /* release at system scope after the barrier: cumulative over the CTA's payload
             * stores, so a destination that acquires the flag sees this CTA's rows */
            for (int r = 0; r < tab.nranks; r++)
                xs_st_release_sys(tab.flags[r] + blockIdx.x, a.signal);
        }
    }
}

/* A courier CTA (the last `couriers` CTAs of the courier kernel; see the top of the file and
 * docs/UP.md "Couriers"). Waits only on flags that CTAs publish without waiting on couriers -
 * ready flags (compute CTAs, which never wait) and done flags (published by every CTA once its
 * own waits are over) - so no cycle exists, and every wait is bounded by timeout_ns. */
XS_DEV void xs_attn_courier(const xs_attn_args &a, const xs_wintab &tab, unsigned char *smem)
{
    volatile int *s_res = reinterpret_cast<volatile int *>(smem); /* thread 0's verdicts */
    const int tid = threadIdx.x;
    const int C = a.couriers, ncta = (int)gridDim.x - C, c = (int)blockIdx.x - ncta;
    const int seq = a.seq, heads = a.heads, rpr = a.rows_per_rank;
    const int nqb = (seq + XS_ATTN_BM - 1) / XS_ATTN_BM, ntiles = nqb * heads;
    const int nrem = xs_attn_remote_count(seq, heads, rpr);
    const int dh = a.dst_heads > 0 ? a.dst_heads : heads;
    const uint64_t tmo = a.timeout_ns ? a.timeout_ns : XS_ATTN_TIMEOUT_NS;
    /* pacing (thread 0): chunk i leaves at due_i = max(due_{i-1} + its bytes / rate, now -
     * credit) - a token bucket. The credit is what a courier may bank while it waits for tiles:
     * the remote tiles become ready in waves and a courier idles between them, so with a credit
     * of one chunk (8 KB) 8 couriers at 0.9 R move only ~28 B/ns and cannot make the time up
     * (docs/UP.md "Couriers"). Two tiles (64 KB), at most 512 KB over all couriers (under the
     * stage's ~0.9 MB, so a burst after an idle wave does not backlog it) */
    const double rate = a.pace_bytes_per_ns > 0.f ? (double)a.pace_bytes_per_ns / C : 0.0;
    const double credit_bytes = fmin(2.0 * XS_ATTN_BM * XS_ATTN_ROW_BYTES, 524288.0 / C);
    const double credit_ns = rate > 0 ? credit_bytes / rate : 0.0;
    const unsigned long long t_start = xs_globaltimer();
    double due_ns = 0; /* from t_start */
    unsigned long long busy_ns = 0; /* copying: from a tile's flag to its last chunk issued */
    int failed = 0;

    xs_attn_rwalk w;
    xs_attn_rwalk_init(&w, a.order == XS_ATTN_ORDER_EARLY ? nrem : 0, ncta, nrem);
    for (int j = 0;; j++) {
        const int t = xs_attn_rwalk_next(&w); /* alike in every thread */
        if (t < 0)
            break;
        if (j % C != c)
            continue;
        if (tid == 0)
            s_res[0] = xs_attn_wait_eq(a.sync + t, a.signal, tmo, a.status);
        __syncthreads(); /* thread 0's acquire, then every thread's loads (causality order) */
        const int res = s_res[0];
        __syncthreads(); /* every thread read the verdict before thread 0 writes the next */
        if (res) {
            if (res == 1 && tid == 0)
                xs_devfail(a.status, XS_DEVERR_TIMEOUT, (unsigned long long)t);
            failed = 1;
            break;
        }
        const unsigned long long t_copy = xs_globaltimer();
        const int q0 = (nqb - 1 - t / heads) * XS_ATTN_BM, h = t % heads;
        /* unit u = i*256 + tid: row u/16 (32 rows per pair i = 2q, 2q+1: chunk q), 16 B u%16 */
        uint4 v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int u = i * XS_ATTN_THREADS + tid, row = q0 + (u >> 4);
            if (row < seq)
                v[i] = xs_attn_ld16_cg((const char *)a.o +
                                       ((size_t)row * heads + h) * XS_ATTN_ROW_BYTES +
                                       (u & 15) * 16);
            else
                v[i] = make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int q = 0; q < XS_ATTN_BM / XS_ATTN_CHUNK_ROWS; q++) {
            const int r0 = q0 + q * XS_ATTN_CHUNK_ROWS;
            const int nrow = min(XS_ATTN_CHUNK_ROWS, seq - r0);
            if (nrow <= 0)
                break;
            if (rate > 0) {
                /* bounded: go - now <= one chunk's time after the credit (validated pace) */
                if (tid == 0) {
                    const double go = xs_bucket_credit_wait(due_ns, t_start, credit_ns);
                    due_ns = go + nrow * XS_ATTN_ROW_BYTES / rate;
                }
                __syncthreads(); /* the chunk leaves when thread 0 says so */
            }
#pragma unroll
            for (int i = 2 * q; i < 2 * q + 2; i++) {
                const int u = i * XS_ATTN_THREADS + tid, row = q0 + (u >> 4);
                if (row >= seq)
                    continue;
                const int p = row / rpr;
                if (p >= tab.nranks) {
                    xs_devfail(a.status, XS_DEVERR_BOUNDS, (unsigned long long)row);
                    continue;
                }
                xs_st16v(tab.data[p] +
                             ((size_t)(row - p * rpr) * dh + a.dst_head0 + h) *
                                 XS_ATTN_ROW_BYTES +
                             (u & 15) * 16,
                         v[i]);
            }
        }
        busy_ns += xs_globaltimer() - t_copy;
    }
    __syncthreads(); /* every thread has issued its last store */
    if (tid == 0) {
        const unsigned long long t_end = xs_globaltimer();
        if (a.cta_ns) {
            a.cta_ns[3 * blockIdx.x + 0] = t_start;
            a.cta_ns[3 * blockIdx.x + 1] = t_end; /* the last courier's: sender-visible end */
            a.cta_ns[3 * blockIdx.x + 2] = busy_ns;
        }
        if (!failed) {
            /* this courier's stores, host windows included, before its done flag */
            __threadfence_system();
            xs_st_release_gpu(a.sync + ntiles + blockIdx.x, a.signal);
        }
    }
    if (failed || c != C - 1)
        return;
    /* The last courier raises every signal once every CTA is done. Why its flags cover the
     * other CTAs' stores: CTA b's stores precede (its barrier, fence.sc.sys) its st.release.gpu
     * of done[b]; this thread's ld.acquire.gpu of done[b] reads it, so those stores precede,
     * in causality order, everything after the barrier below; each thread's fence.sc.sys then
     * makes its st.relaxed.sys of a flag a release pattern, cumulative over them. A destination
     * that acquires flags[r][b] (system scope) therefore sees every byte of the run. */
    if (tid == 0) {
        int res = 0;
        const unsigned long long t0 = xs_globaltimer();
        for (int b = 0; b < (int)gridDim.x && !res; b++) {
            if (b == (int)blockIdx.x)
                continue;
            const uint64_t left = xs_globaltimer() - t0; /* one bound for the whole wait */
            res = xs_attn_wait_eq(a.sync + ntiles + b, a.signal, left < tmo ? tmo - left : 0,
                                  a.status);
            if (res == 1)
                xs_devfail(a.status, XS_DEVERR_TIMEOUT, (1ull << 32) | (unsigned)b);
        }
        s_res[0] = res;
    }
    __syncthreads();
    if (s_res[0])
        return;
    __threadfence_system();
    const int nflags = tab.nranks * (int)gridDim.x;
    for (int i = tid; i < nflags; i += XS_ATTN_THREADS)
        xs_st_relaxed_sys(tab.flags[i / gridDim.x] + i % gridDim.x, a.signal);
}



/* ---- the forward kernel ------------------------------------------------------------------ */

template <bool CAUSAL>
__global__ void __launch_bounds__(XS_ATTN_THREADS, 1)
    xs_attn_kernel(const __grid_constant__ xs_attn_args a, const __grid_constant__ xs_wintab tab)
{
    extern __shared__ __align__(1024) unsigned char xs_attn_smem[];
    xs_attn_cta<CAUSAL>(a, tab, xs_attn_smem);
}

/* couriers > 0: its own kernel, so that the kernel above (couriers = 0) stays as it was. */
template <bool CAUSAL>
__global__ void __launch_bounds__(XS_ATTN_THREADS, 1)
    xs_attn_courier_kernel(const __grid_constant__ xs_attn_args a,
                           const __grid_constant__ xs_wintab tab)
{
    extern __shared__ __align__(1024) unsigned char xs_attn_smem[];
    if ((int)blockIdx.x >= (int)gridDim.x - a.couriers)
        xs_attn_courier(a, tab, xs_attn_smem);
    else
        xs_attn_cta<CAUSAL, true>(a, tab, xs_attn_smem);
}

/* tasks != NULL: the KV-split kernel, its own instantiation (the kernels above unchanged). */
template <bool CAUSAL>
__global__ void __launch_bounds__(XS_ATTN_THREADS, 1)
    xs_attn_kv_kernel(const __grid_constant__ xs_attn_args a, const __grid_constant__ xs_wintab tab)
{
    extern __shared__ __align__(1024) unsigned char xs_attn_smem[];
    xs_attn_cta<CAUSAL, false, true>(a, tab, xs_attn_smem);
}

#endif /* __CUDACC__ */
#endif /* XSTAGE_UP_KERNEL_CUH */
