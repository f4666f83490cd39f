// SPDX-License-Identifier: Apache-2.0
/*
 * gemm.cuh - the tensor-core tile engine: C = A * B^T in bf16 with fp32 accumulation, one
 * BM x BN output tile at a time, for persistent fused kernels (EP: cuda/ep/, TP: cuda/tp/).
 *
 * Layouts (row-major, element strides):
 *   A [m, k]  activations, k contiguous; rows may be gathered through a row map (fused dispatch)
 *   B [n, k]  weights "K-major", exactly like a PyTorch Linear weight [out, in]; C = A * B^T
 *   C [m, n]  written through one destination pointer per row (local, host or peer windows)
 * Requirements (xs_gemm_check says which one failed): k, lda, ldb multiples of 8 elements and
 * A, B 16-byte aligned (every cp.async moves 16 bytes); output rows 16-byte aligned for the
 * vector stores. m and n are arbitrary (loads zero-fill, stores are predicated per row and per
 * column, a ragged last 8-column chunk is stored element by element).
 *
 * Machinery: cp.async 16-byte copies into a STAGES-deep shared-memory ring (BK = 64, one barrier
 * per k-tile); every 128-byte smem row is XOR-swizzled (16-byte chunk c of row r lives at chunk
 * c ^ (r & 7)) so that both the cp.async writes and the ldmatrix.x4 reads of 8 rows hit 8
 * distinct bank groups; mma.sync.m16n8k16 bf16 -> fp32 with the accumulators in registers.
 * The epilogue goes through a padded smem staging tile so that the global stores are coalesced
 * 16-byte vector stores (what the X-Stage sees), with optional row scale and SwiGLU.
 *
 * SwiGLU weight layout: the Linear-1 weight W1 [2I, H] interleaves gate and up rows in groups of
 * 16: physical row p is gate row xs_swiglu_index(p) when xs_swiglu_is_up(p) == 0, else the up
 * row. Every warp's n-range is a multiple of 32 columns, so each thread holds gate and up of
 * the same output element in its own registers and the SwiGLU needs no data exchange.
 */
#ifndef XSTAGE_GEMM_CUH
#define XSTAGE_GEMM_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "nvtx_launch.h"
#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_device.cuh"

typedef __nv_bfloat16 xs_bf16;

/* ---- tile configurations -------------------------------------------------------------------- */

template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_>
struct xs_gemm_cfg {
    static constexpr int BM = BM_, BN = BN_, BK = 64; /* BK * 2 bytes = one 128-byte smem row */
    static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N; /* warp tile */
    static constexpr int MT = WTM / 16, NT = WTN / 8;              /* mma tiles per warp */
    static constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int PIPE_BYTES = STAGES * STAGE_BYTES;
    static constexpr int A_CHUNKS = BM * 8 / THREADS; /* 16-byte copies per thread per k-tile */
    static constexpr int B_CHUNKS = BN * 8 / THREADS;
    static constexpr int ROWS_PER_PASS = THREADS / 8; /* rows covered by one pass of copies */
    /* staging tile: [BM][BN + 8] bf16; +8 elements shifts each row by 4 banks (conflict-free) */
    static constexpr int OUT_BYTES = BM * (BN + 8) * 2;
    static constexpr int MAIN_BYTES = PIPE_BYTES > OUT_BYTES ? PIPE_BYTES : OUT_BYTES;
    /* aux: per-row destination pointer (8 B) and row scale (4 B), outside the ring */
    static constexpr int AUX_BYTES = BM * 12;
    static constexpr int SMEM_BYTES = MAIN_BYTES + AUX_BYTES;

    static_assert(WTM % 16 == 0 && WTN % 32 == 0, "warp tile: m multiple of 16, n of 32");
    static_assert((BM * 8) % THREADS == 0 && (BN * 8) % THREADS == 0, "copy split");
    static_assert(THREADS % 8 == 0 && BM % (THREADS / 8) == 0, "copy rows");
    static_assert(BM <= THREADS, "aux rows are filled one per thread");
    static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per block");
};

/* 128 x 256 tile, 8 warps of 64 x 64, 4 stages: 194 KB smem, 1 CTA per SM (the persistent
 * shape). 128 x 128, 8 warps of 64 x 32, 4 stages: 130 KB. */
typedef xs_gemm_cfg<128, 256, 2, 4, 4> xs_gemm_big;
typedef xs_gemm_cfg<128, 128, 2, 4, 4> xs_gemm_small;

/* ---- problem -------------------------------------------------------------------------------- */

typedef struct {
    const xs_bf16 *a;   /* A [m, k]: row i at a + (a_rows ? a_rows[i] : i) * lda */
    const int *a_rows;  /* optional gather map [m] (fused dispatch); NULL = contiguous */
    long long lda;      /* elements */
    const xs_bf16 *b;   /* B [n, k], row j at b + j * ldb */
    long long ldb;      /* elements */
    int m, n, k;        /* extents */
} xs_gemm_problem;

/* Physical Linear-1 column p (SwiGLU layout): intermediate index, and 1 for the up half. */
XS_HD int xs_swiglu_index(int p) { return (p >> 5) * 16 + (p & 15); }
XS_HD int xs_swiglu_is_up(int p) { return (p >> 4) & 1; }

/* Host-side check of the engine's requirements; ldc_elems < 0 skips the output check. */
static inline xs_status xs_gemm_check(const xs_gemm_problem *p, long long ldc_elems,
                                      const void *c)
{
    if (p->m < 0 || p->n < 0 || p->k < 0)
        return xs_seterr(XS_EINVAL, "gemm: negative extent m=%d n=%d k=%d", p->m, p->n, p->k);
    if (p->k % 8)
        return xs_seterr(XS_EINVAL, "gemm: k=%d is not a multiple of 8 (16-byte loads)", p->k);
    if (p->lda % 8 || p->ldb % 8 || p->lda < p->k || p->ldb < p->k)
        return xs_seterr(XS_EINVAL, "gemm: lda=%lld ldb=%lld must be multiples of 8 and >= k=%d",
                         p->lda, p->ldb, p->k);
    if (((uintptr_t)p->a | (uintptr_t)p->b) & 15)
        return xs_seterr(XS_EINVAL, "gemm: A or B not 16-byte aligned");
    if (ldc_elems >= 0 && (ldc_elems % 8 || ((uintptr_t)c & 15)))
        return xs_seterr(XS_EINVAL, "gemm: ldc=%lld not a multiple of 8 or C not 16-byte "
                         "aligned", ldc_elems);
    return XS_OK;
}

/* ---- PTX wrappers ---------------------------------------------------------------------------- */

XS_DEV uint32_t xs_smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16-byte global -> shared copy; src_bytes = 0 reads nothing and zero-fills (boundaries). */
XS_DEV void xs_cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

XS_DEV void xs_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
XS_DEV void xs_cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

XS_DEV void xs_ldsm_x4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

XS_DEV void xs_mma_bf16(float *d, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Byte offset of 16-byte chunk `chunk` (0..7) of row `row` in a swizzled [rows][64] bf16 tile. */
XS_DEV uint32_t xs_swz(int row, int chunk)
{
    return (uint32_t)(row * 128 + ((chunk ^ (row & 7)) << 4));
}

XS_DEV uint32_t xs_pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x = lo (lower address) */
    return *(uint32_t *)&v;
}

XS_DEV float xs_silu(float g) { return g / (1.0f + expf(-g)); }

/* ---- shared-memory layout helpers -------------------------------------------------------------- */

/* Per-row destination pointers (bytes; NULL skips the row), filled by the caller. */
template <class C>
XS_DEV char **xs_gemm_dst_rows(char *smem)
{
    return (char **)(smem + C::MAIN_BYTES);
}

/* Per-row scale factors, filled by the caller when it asks for scaling. */
template <class C>
XS_DEV float *xs_gemm_row_scale(char *smem)
{
    return (float *)(smem + C::MAIN_BYTES + C::BM * 8);
}

/* ---- main loop ------------------------------------------------------------------------------ */

/* A main-loop hook: work a fused kernel interleaves with the k-loop (e.g. TP streams its remote
 * stores through it, one 16-byte store per thread per k-tile). Every thread of the CTA calls
 *   begin(KT)  once, before the first k-tile (KT = number of k-tiles of this tile);
 *   step(kt)   at k-tile kt, after the copies of k-tile kt + STAGES - 1 are issued and the
 *              MMAs of k-tile kt's first 16-wide k-slice (so the hook's scalar work overlaps the
 *              tensor pipe instead of delaying every warp's first MMA after the barrier; a load
 *              issued here still has three k-slices and the next barrier to land);
 *   end(KT)    after the last MMA, before the final cp.async drain and barrier (so that barrier
 *              also orders every store the hook issued).
 * The hook must not touch the ring or __syncthreads() unless every thread calls it uniformly.
 * xs_gemm_no_hook compiles to nothing: xs_gemm_mainloop is exactly the plain loop. */
struct xs_gemm_no_hook {
    __device__ __forceinline__ void begin(int) {}
    __device__ __forceinline__ void step(int) {}
    __device__ __forceinline__ void end(int) {}
};

/* Accumulate the tile C[m0 : m0+BM, n0 : n0+BN] of problem p into acc (zeroed here), calling
 * hook (see above) at each k-tile. Call from all C::THREADS threads of the CTA with the same
 * arguments; smem is the dynamic shared memory (>= C::SMEM_BYTES, 128-byte aligned). Leaves every
 * cp.async drained and ends with a barrier, so the caller may reuse the ring (the staging tile
 * overlaps it) right away. The caller must have a barrier between a previous use of the ring and
 * this call. */
template <class C, class H>
XS_DEV void xs_gemm_mainloop_hooked(const xs_gemm_problem &p, int m0, int n0, char *smem,
                                    float (&acc)[C::MT][C::NT][4], H &hook)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp / C::WARPS_N, warp_n = warp % C::WARPS_N;

#pragma unroll
    for (int i = 0; i < C::MT; i++)
#pragma unroll
        for (int j = 0; j < C::NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0f;

    /* copy roles: thread copies chunk (tid & 7) of rows (tid >> 3) + ROWS_PER_PASS * i */
    const int cchunk = tid & 7, crow = tid >> 3;
    const xs_bf16 *a_src[C::A_CHUNKS];
#pragma unroll
    for (int i = 0; i < C::A_CHUNKS; i++) {
        int r = m0 + crow + C::ROWS_PER_PASS * i;
        a_src[i] = NULL;
        if (r < p.m) {
            long long ar = p.a_rows ? (long long)__ldg(p.a_rows + r) : (long long)r;
            a_src[i] = p.a + ar * p.lda + cchunk * 8;
        }
    }
    const xs_bf16 *b_src0 = p.b + (long long)(n0 + crow) * p.ldb + cchunk * 8;
    const long long b_pass = (long long)C::ROWS_PER_PASS * p.ldb;
    uint32_t b_ok = 0;
#pragma unroll
    for (int i = 0; i < C::B_CHUNKS; i++)
        if (n0 + crow + C::ROWS_PER_PASS * i < p.n)
            b_ok |= 1u << i;
    /* swizzled destinations: (row & 7) == (crow & 7) for every pass */
    const uint32_t s_base = xs_smem_u32(smem);
    const uint32_t c_off = (uint32_t)(crow * 128 + ((cchunk ^ (crow & 7)) << 4));

    const int KT = (p.k + C::BK - 1) / C::BK;

    /* one k-tile of copies into stage s; every thread commits a group per call (uniform count) */
#define XS_GEMM_LOAD(s_, kt_)                                                                   \
    do {                                                                                        \
        const int k0_ = (kt_) * C::BK;                                                          \
        const bool kok_ = k0_ + cchunk * 8 < p.k;                                               \
        const uint32_t sa_ = s_base + (uint32_t)((s_) * C::STAGE_BYTES) + c_off;                \
        const uint32_t sb_ = sa_ + C::A_BYTES;                                                  \
        _Pragma("unroll") for (int i_ = 0; i_ < C::A_CHUNKS; i_++)                              \
        {                                                                                       \
            const bool ok_ = kok_ && a_src[i_] != NULL;                                         \
            xs_cp_async16(sa_ + i_ * C::ROWS_PER_PASS * 128, ok_ ? a_src[i_] + k0_ : p.a,      \
                          ok_ ? 16 : 0);                                                        \
        }                                                                                       \
        _Pragma("unroll") for (int i_ = 0; i_ < C::B_CHUNKS; i_++)                              \
        {                                                                                       \
            const bool ok_ = kok_ && ((b_ok >> i_) & 1u);                                       \
            xs_cp_async16(sb_ + i_ * C::ROWS_PER_PASS * 128,                                   \
                          ok_ ? b_src0 + i_ * b_pass + k0_ : p.b, ok_ ? 16 : 0);               \
        }                                                                                       \
    } while (0)

#pragma unroll
    for (int s = 0; s < C::STAGES - 1; s++) {
        if (s < KT)
            XS_GEMM_LOAD(s, s);
        xs_cp_async_commit();
    }

    /* ldmatrix roles (see the fragment layouts of mma.m16n8k16): A rows lane & 15, k-half
     * lane >> 4; B rows (lane & 7) + 8 * (lane >> 4), k-half (lane >> 3) & 1. Both have
     * (row & 7) == (lane & 7), so the swizzle term is per thread. */
    const int a_row = warp_m * C::WTM + (lane & 15);
    const int b_row = warp_n * C::WTN + (lane & 7) + ((lane >> 4) << 3);
    const int a_khalf = lane >> 4, b_khalf = (lane >> 3) & 1, sw = lane & 7;

    hook.begin(KT);
    int stage = 0;
#pragma unroll 1
    for (int kt = 0; kt < KT; kt++) {
        xs_cp_async_wait<C::STAGES - 2>();
        __syncthreads(); /* k-tile kt visible to all; stage (kt - 1) free for reuse */
        {
            const int nk = kt + C::STAGES - 1;
            int ns = stage + C::STAGES - 1;
            if (ns >= C::STAGES)
                ns -= C::STAGES;
            if (nk < KT)
                XS_GEMM_LOAD(ns, nk);
            xs_cp_async_commit();
        }
        const uint32_t sa = s_base + (uint32_t)(stage * C::STAGE_BYTES);
        const uint32_t sb = sa + C::A_BYTES;
#pragma unroll
        for (int ks = 0; ks < C::BK / 16; ks++) {
            uint32_t af[C::MT][4], bfr[C::NT][2];
            const uint32_t a_chunk = (uint32_t)(((2 * ks + a_khalf) ^ sw) << 4);
            const uint32_t b_chunk = (uint32_t)(((2 * ks + b_khalf) ^ sw) << 4);
#pragma unroll
            for (int i = 0; i < C::MT; i++)
                xs_ldsm_x4(af[i][0], af[i][1], af[i][2], af[i][3],
                           sa + (uint32_t)((a_row + 16 * i) * 128) + a_chunk);
#pragma unroll
            for (int j = 0; j < C::NT / 2; j++)
                xs_ldsm_x4(bfr[2 * j][0], bfr[2 * j][1], bfr[2 * j + 1][0], bfr[2 * j + 1][1],
                           sb + (uint32_t)((b_row + 16 * j) * 128) + b_chunk);
#pragma unroll
            for (int i = 0; i < C::MT; i++)
#pragma unroll
                for (int j = 0; j < C::NT; j++)
                    xs_mma_bf16(acc[i][j], af[i], bfr[j][0], bfr[j][1]);
            if (ks == 0)
                hook.step(kt);
        }
        stage = stage + 1 == C::STAGES ? 0 : stage + 1;
    }
#undef XS_GEMM_LOAD
    hook.end(KT);
    xs_cp_async_wait<0>();
    __syncthreads(); /* ring free: the staging tile may overwrite it (and hook stores ordered) */
}

/* The plain main loop: xs_gemm_mainloop_hooked without a hook (same contract). */
template <class C>
XS_DEV void xs_gemm_mainloop(const xs_gemm_problem &p, int m0, int n0, char *smem,
                             float (&acc)[C::MT][C::NT][4])
{
    xs_gemm_no_hook none;
    xs_gemm_mainloop_hooked<C>(p, m0, n0, smem, acc, none);
}

/* ---- epilogue ------------------------------------------------------------------------------- */

/* Accumulators -> bf16 staging tile [BM][BN + 8], each row multiplied by row_scale[r] when
 * row_scale is not NULL (a shared-memory array the caller filled, e.g. xs_gemm_row_scale).
 * The caller puts a barrier between this and xs_gemm_store_rows. */
template <class C>
XS_DEV void xs_gemm_stage_acc(char *smem, const float (&acc)[C::MT][C::NT][4],
                              const float *row_scale)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warp_m = warp / C::WARPS_N, warp_n = warp % C::WARPS_N;
    const int ld = C::BN + 8;
    uint32_t *out = (uint32_t *)smem;
#pragma unroll
    for (int i = 0; i < C::MT; i++) {
        const int r = warp_m * C::WTM + 16 * i + (lane >> 2);
        const float s0 = row_scale ? row_scale[r] : 1.0f;
        const float s1 = row_scale ? row_scale[r + 8] : 1.0f;
#pragma unroll
        for (int j = 0; j < C::NT; j++) {
            const int c = warp_n * C::WTN + 8 * j + 2 * (lane & 3);
            out[(r * ld + c) >> 1] = xs_pack_bf16(acc[i][j][0] * s0, acc[i][j][1] * s0);
            out[((r + 8) * ld + c) >> 1] = xs_pack_bf16(acc[i][j][2] * s1, acc[i][j][3] * s1);
        }
    }
}

/* SwiGLU: accumulators of a tile of the interleaved Linear-1 output -> staging tile
 * [BM][BN/2 + 8] of silu(gate) * up (bf16), optionally scaled per row. Output column q of the
 * tile is intermediate index n0 / 2 + q. */
template <class C>
XS_DEV void xs_gemm_stage_swiglu(char *smem, const float (&acc)[C::MT][C::NT][4],
                                 const float *row_scale)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warp_m = warp / C::WARPS_N, warp_n = warp % C::WARPS_N;
    const int ld = C::BN / 2 + 8;
    uint32_t *out = (uint32_t *)smem;
#pragma unroll
    for (int i = 0; i < C::MT; i++) {
        const int r = warp_m * C::WTM + 16 * i + (lane >> 2);
        const float s0 = row_scale ? row_scale[r] : 1.0f;
        const float s1 = row_scale ? row_scale[r + 8] : 1.0f;
#pragma unroll
        for (int q = 0; q < C::WTN / 32; q++)
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const float *g = acc[i][4 * q + j], *u = acc[i][4 * q + 2 + j];
                const int c = warp_n * (C::WTN / 2) + 16 * q + 8 * j + 2 * (lane & 3);
                out[(r * ld + c) >> 1] =
                    xs_pack_bf16(xs_silu(g[0]) * u[0] * s0, xs_silu(g[1]) * u[1] * s0);
                out[((r + 8) * ld + c) >> 1] =
                    xs_pack_bf16(xs_silu(g[2]) * u[2] * s1, xs_silu(g[3]) * u[3] * s1);
            }
    }
}

/* Store the staging tile (WIDTH = BN, or BN / 2 after SwiGLU) row by row: row r's first ncols
 * columns go to dst_rows[r] (a byte pointer, 16-byte aligned; NULL skips the row), as coalesced
 * 16-byte stores (a ragged last chunk element by element). Rows >= nrows are skipped. Call from
 * all threads after a barrier that follows the staging; the caller puts a barrier after it
 * before the staging tile or dst_rows are written again. */
template <class C, int WIDTH>
XS_DEV void xs_gemm_store_rows(const char *smem, char *const *dst_rows, int nrows, int ncols)
{
    constexpr int CPR = WIDTH / 8;               /* 16-byte chunks per row */
    constexpr int TOTAL = C::BM * CPR;
    constexpr int UNROLL = 4;
    constexpr int ROW_BYTES = (WIDTH + 8) * 2;
    static_assert(TOTAL % (UNROLL * C::THREADS) == 0, "store split");
    const int tid = threadIdx.x;
#pragma unroll 1
    for (int base = 0; base < TOTAL; base += UNROLL * C::THREADS) {
        uint4 v[UNROLL];
        char *d[UNROLL];
        int col[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int i = base + u * C::THREADS + tid;
            const int r = i / CPR, c = i % CPR;
            v[u] = *(const uint4 *)(smem + r * ROW_BYTES + c * 16);
            d[u] = r < nrows ? dst_rows[r] : NULL;
            col[u] = c * 8;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (!d[u] || col[u] >= ncols)
                continue;
            if (col[u] + 8 <= ncols) {
                xs_st16v(d[u] + 2 * col[u], v[u]);
            } else {
                /* ragged chunk: compile-time element indices keep v in registers */
                const uint32_t w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
                unsigned short *o = (unsigned short *)(d[u] + 2 * col[u]);
#pragma unroll
                for (int x = 0; x < 8; x++)
                    if (x < ncols - col[u])
                        o[x] = (unsigned short)(w[x >> 1] >> (16 * (x & 1)));
            }
        }
    }
}

/* The staging tile's rows (WIDTH = BN) by TMA bulk copies: thread r < min(nrows, BM) whose
 * dst_rows[r] is not NULL copies row r's first ncols columns (ncols * 2 bytes: a multiple of 16,
 * i.e. ncols % 8 == 0, and dst 16-byte aligned) and waits until the copy has read shared memory.
 * Call from all threads after each of them staged its part, ran xs_bulk_fence_smem and met the
 * others at a barrier; the caller's barrier after it frees the staging tile. The writes complete
 * asynchronously: every thread runs xs_bulk_wait_done before the CTA ends. */
template <class C, int WIDTH>
XS_DEV void xs_gemm_store_rows_bulk(const char *smem, char *const *dst_rows, int nrows,
                                    int ncols)
{
    constexpr int ROW_BYTES = (WIDTH + 8) * 2;
    const int r = threadIdx.x;
    if (r < C::BM && r < nrows && dst_rows[r]) {
        xs_bulk_s2g(dst_rows[r], smem + r * ROW_BYTES, (uint32_t)ncols * 2);
        xs_bulk_commit();
        xs_bulk_wait_read<0>();
    }
}

/* ---- a plain GEMM kernel on the engine (tests, baselines, TP building block) ----------------- */

/* One tile per CTA, tiles rasterised in groups of 8 tile-rows so that concurrently running
 * CTAs share A and B panels in L2. C = diag(row_scale) * A * B^T (row_scale may be NULL); with
 * SWIGLU, p.n is the physical Linear-1 width (a multiple of 32) and C has p.n / 2 columns. */
template <class C, bool SWIGLU>
__global__ void __launch_bounds__(C::THREADS, 1)
    xs_gemm_bf16_kernel(xs_gemm_problem p, xs_bf16 *c, long long ldc, const float *row_scale)
{
    extern __shared__ __align__(128) char xs_gemm_smem[];
    char *smem = xs_gemm_smem;
    const int tiles_m = (p.m + C::BM - 1) / C::BM, tiles_n = (p.n + C::BN - 1) / C::BN;
    const int group = 8, per_group = group * tiles_n;
    const int g = blockIdx.x / per_group, first_m = g * group;
    const int gsize = tiles_m - first_m < group ? tiles_m - first_m : group;
    const int in_g = blockIdx.x % per_group;
    const int tm = first_m + in_g % gsize, tn = in_g / gsize;
    const int m0 = tm * C::BM, n0 = tn * C::BN;

    char **dst = xs_gemm_dst_rows<C>(smem);
    float *scale = xs_gemm_row_scale<C>(smem);
    const int out_n0 = SWIGLU ? n0 / 2 : n0;
    if (threadIdx.x < C::BM) {
        const int r = m0 + threadIdx.x;
        dst[threadIdx.x] = r < p.m ? (char *)(c + (long long)r * ldc + out_n0) : NULL;
        scale[threadIdx.x] = (row_scale && r < p.m) ? row_scale[r] : 1.0f;
    }
    float acc[C::MT][C::NT][4];
    xs_gemm_mainloop<C>(p, m0, n0, smem, acc); /* ends with a barrier: aux rows visible */
    const int nvalid = p.n - n0 < C::BN ? p.n - n0 : C::BN;
    if (SWIGLU) {
        xs_gemm_stage_swiglu<C>(smem, acc, row_scale ? scale : NULL);
        __syncthreads();
        xs_gemm_store_rows<C, C::BN / 2>(smem, dst, p.m - m0, nvalid / 2);
    } else {
        xs_gemm_stage_acc<C>(smem, acc, row_scale ? scale : NULL);
        __syncthreads();
        xs_gemm_store_rows<C, C::BN>(smem, dst, p.m - m0, nvalid);
    }
}

/* Launch xs_gemm_bf16_kernel on stream s. Checks the requirements first (XS_EINVAL with one line)
 * and the launch (XS_ECUDA). */
template <class C, bool SWIGLU>
static inline xs_status xs_gemm_bf16(const xs_gemm_problem *p, xs_bf16 *c, long long ldc,
                                     const float *row_scale, cudaStream_t s)
{
    XS_TRY(xs_gemm_check(p, ldc, c));
    if (SWIGLU && p->n % 32)
        return xs_seterr(XS_EINVAL, "gemm: SwiGLU needs n=%d to be a multiple of 32", p->n);
    if (p->m == 0 || p->n == 0)
        return XS_OK;
    XS_CU(cudaFuncSetAttribute(xs_gemm_bf16_kernel<C, SWIGLU>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM_BYTES));
    const long long tiles =
        (long long)((p->m + C::BM - 1) / C::BM) * ((p->n + C::BN - 1) / C::BN);
    if (tiles > 0x7fffffffLL)
        return xs_seterr(XS_ERANGE, "gemm: %lld tiles exceed the grid", tiles);
    XS_NVTX_LAUNCH("xs_gemm_bf16_kernel", xs_gemm_bf16_kernel<C, SWIGLU>
                   <<<(unsigned)tiles, C::THREADS, C::SMEM_BYTES, s>>>(*p, c, ldc, row_scale));
    XS_CU_LAUNCH();
    return XS_OK;
}

#endif /* XSTAGE_GEMM_CUH */
