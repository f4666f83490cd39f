// SPDX-License-Identifier: Apache-2.0
/*
 * test_gemm.cu - the tensor-core tile engine (cuda/common/gemm.cuh): correctness against a CPU fp64
 * reference on small odd shapes (boundaries, row gather, row scale, SwiGLU, untouched guards),
 * against cuBLAS on large shapes, and throughput next to cuBLAS on MoE-like shapes.
 *
 * Tolerances (bf16 output of an fp32 accumulation, inputs O(1)): per element
 * |c - ref| <= 2^-7 |ref| + 1e-3 rms(ref); relative Frobenius error <= 4e-3 against fp64 and
 * <= 1e-2 against cuBLAS (fp32 output). Throughput is reported, not asserted: median of -n
 * repetitions with p10/p90, after warm-up, inputs rotated over copies larger than L2.
 *
 * usage: test_gemm [--quick | --tiny] [--sm90] [-n reps] [--csv FILE] | --host
 *                                                              last line: "N passed, N failed"
 * --tiny (for compute-sanitizer, tests/gpu/sanitize.sh): the bad-input checks and four small
 * shapes that still cover partial tiles, gather, scale and SwiGLU on both engines; no cuBLAS
 * (its own kernels are not ours to check), no throughput.
 * --sm90: also the Hopper engine (cuda/common/gemm_sm90.cuh, wgmma + TMA) on every small and large
 * shape, and as extra columns of the throughput table (contiguous A through TMA, and the same
 * A through an identity row map, which takes the cp.async gather path).
 * --host: only the CPU checks of gemm_sm90.cuh's layout functions (swizzle, wgmma descriptors,
 * accumulator fragment, tile raster, shared-memory plan); needs no GPU. They also run first in
 * every other mode.
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../xt.h"
#include "xstage.h"
#include "xstage_cuda.h"
#include "gemm.cuh"
#include "gemm_sm90.cuh"

/* ---- inputs ------------------------------------------------------------------------------- */

/* Uniform values in [-scale, scale), a function of (seed, index): never zeros, never constant. */
__global__ void fill_bf16_kernel(xs_bf16 *x, size_t n, uint32_t seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = xs_mix32((uint32_t)i * 0x9e3779b1u ^ xs_mix32(seed ^ (uint32_t)(i >> 32)));
        float u = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
        x[i] = __float2bfloat16(u * scale);
    }
}

static void fill_bf16(xs_bf16 *x, size_t n, uint32_t seed, float scale)
{
    fill_bf16_kernel<<<1024, 256>>>(x, n, seed, scale);
    XS_CHECK_CU(cudaGetLastError());
}

static void *dalloc(size_t bytes)
{
    void *p = NULL;
    XS_CHECK_CU(cudaMalloc(&p, bytes ? bytes : 16));
    return p;
}

static float *to_host_f32(const xs_bf16 *d, size_t n)
{
    xs_bf16 *h = (xs_bf16 *)malloc(n * sizeof *h + 1);
    float *f = (float *)malloc(n * sizeof *f + 1);
    if (!h || !f) {
        fprintf(stderr, "test_gemm: out of host memory\n");
        exit(1);
    }
    XS_CHECK_CU(cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        f[i] = __bfloat162float(h[i]);
    free(h);
    return f;
}

static uint32_t rng_state = 12345u;
static uint32_t rng(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return xs_mix32(rng_state);
}

/* ---- engines ------------------------------------------------------------------------------------ */

/* One launcher per tile configuration: gemm.cuh's configurations, and the Hopper engine. */
template <class C>
struct engine {
    static xs_status run(const xs_gemm_problem *p, int swiglu, xs_bf16 *c, long long ldc,
                         const float *scale)
    {
        return swiglu ? xs_gemm_bf16<C, true>(p, c, ldc, scale, 0)
                      : xs_gemm_bf16<C, false>(p, c, ldc, scale, 0);
    }
};
template <>
struct engine<xs_gemm90> {
    static xs_status run(const xs_gemm_problem *p, int swiglu, xs_bf16 *c, long long ldc,
                         const float *scale)
    {
        return swiglu ? xs_gemm90_bf16<xs_gemm90, true>(p, c, ldc, scale, 0)
                      : xs_gemm90_bf16<xs_gemm90, false>(p, c, ldc, scale, 0);
    }
};

/* ---- host checks of gemm_sm90.cuh's layouts (no GPU) --------------------------------------------- */

/* The 128-byte swizzle as TMA and wgmma define it on shared-memory byte addresses: address bits
 * [4, 7) (the 16-byte chunk in a 128-byte row) XOR bits [7, 10) (the row in an 8-row atom). */
static uint32_t sw128_addr(uint32_t addr) { return addr ^ (((addr >> 7) & 7u) << 4); }

/* Byte address the hardware reads for element (row r, k kk < 16) of a K-major operand through
 * descriptor d, as the PTX ISA describes the canonical 128B-swizzled K-major layout: 8-row
 * core-matrix groups SBO bytes apart, rows 128 bytes apart inside a group, the swizzle applied to
 * the final address (base offset 0). Fails (returns ~0) on a descriptor field it does not model. */
static uint32_t desc_read_addr(uint64_t d, int r, int kk)
{
    const uint32_t start = (uint32_t)(d & 0x3FFFu) << 4;
    const uint32_t sbo = (uint32_t)((d >> 32) & 0x3FFFu) << 4;
    const unsigned swz = (unsigned)(d >> 62), base_off = (unsigned)((d >> 49) & 7u);
    if (swz != 1 || base_off != 0)
        return ~0u;
    return sw128_addr(start + (uint32_t)(r / 8) * sbo + (uint32_t)(r % 8) * 128 + (uint32_t)kk * 2);
}

/* ---- a model of the ring protocol (mbarriers, roles, gather lag), run on random interleavings --- */

/* mbarrier: phase = number of completed phases; try_wait.parity(par) passes when the current
 * (incomplete) phase's parity differs from par, so a fresh barrier passes parity 1 */
typedef struct {
    int init, pending, tx;
    unsigned phase;
} mb_t;
static void mb_init(mb_t *b, int n) { b->init = b->pending = n, b->tx = 0, b->phase = 0; }
static void mb_settle(mb_t *b)
{
    if (b->pending == 0 && b->tx == 0)
        b->phase++, b->pending = b->init;
}
static int mb_arrive(mb_t *b, int tx) /* arrive (with expect_tx bytes); 0 on over-arrival */
{
    b->tx += tx;
    if (--b->pending < 0)
        return 0;
    mb_settle(b);
    return 1;
}
static void mb_complete_tx(mb_t *b, int tx) { b->tx -= tx, mb_settle(b); }
static int mb_passed(const mb_t *b, unsigned parity) { return (b->phase & 1u) != parity; }

enum { PM_STAGES = xs_gemm90::STAGES, PM_LAG = xs_gemm90::LAG, PM_WARPS = 4 * xs_gemm90::CONSUMERS,
       PM_GT = 4 /* gather threads modelled (128 in the kernel) */, PM_MAXJ = 64 };

typedef struct {
    mb_t full[PM_STAGES], empty[PM_STAGES];
    int tag_a[PM_STAGES], tag_b[PM_STAGES], tag_g[PM_STAGES][PM_GT]; /* k-tile that landed */
    int reading[PM_STAGES]; /* wgmma groups in flight on a stage */
    /* in-flight copies: (stage, k-tile, kind: 0 = A box, 1 = B box, 2 + t = gather piece of t) */
    int fl_s[4 * PM_MAXJ * (PM_GT + 2)], fl_j[4 * PM_MAXJ * (PM_GT + 2)],
        fl_k[4 * PM_MAXJ * (PM_GT + 2)], nfl;
    int landed_g[PM_GT][PM_MAXJ]; /* gather thread t's piece of k-tile j has landed */
    /* producer threads: next k-tile, ring position, arrival position, pending lag */
    int p_j[PM_GT], p_stage[PM_GT], p_arr[PM_GT], p_pend[PM_GT], p_flushed[PM_GT], p_lag[PM_GT];
    unsigned p_phase[PM_GT];
    /* consumer warps: next k-tile, ring position, in-flight groups (k-tile stage, in order) */
    int c_j[PM_WARPS], c_stage[PM_WARPS], c_prev[PM_WARPS], c_grp[PM_WARPS][2], c_ngrp[PM_WARPS];
    unsigned c_phase[PM_WARPS];
} pm_t;

/* One random interleaving of `tiles` tiles of KT k-tiles; returns an error string or NULL. */
static const char *pm_run(int gather, int tiles, int KT, uint32_t seed)
{
    static pm_t m;
    memset(&m, 0, sizeof m);
    const int J = tiles * KT, np = gather ? PM_GT : 1;
    if (J > PM_MAXJ)
        return "model: too many k-tiles";
    for (int s = 0; s < PM_STAGES; s++) {
        mb_init(&m.full[s], gather ? 1 + PM_GT : 1); /* xs_gemm90_init: 1 or 1 + 128 */
        mb_init(&m.empty[s], PM_WARPS);
        m.tag_a[s] = m.tag_b[s] = -1;
        for (int t = 0; t < PM_GT; t++)
            m.tag_g[s][t] = -1;
    }
    uint32_t st = seed;
    int stuck = 0;
    for (int steps = 0; steps < 1000000; steps++) {
        /* candidate actions: producers 0..np-1, consumer warps, one landing, one wgmma done */
        int progressed = 0;
        for (int tries = 0; tries < 64 && !progressed; tries++) {
            st = st * 1664525u + 1013904223u;
            int who = (int)(xs_mix32(st) % (uint32_t)(np + PM_WARPS + 2));
            if (who < np) { /* producer thread who */
                int t = who;
                if (m.p_lag[t]) {
                    /* after issuing k-tile j: cp.async.wait_group LAG (piece j - LAG landed),
                     * fence, arrive on that k-tile's full barrier */
                    if (!m.landed_g[t][m.p_j[t] - 1 - PM_LAG])
                        continue;
                    if (!mb_arrive(&m.full[m.p_arr[t]], 0))
                        return "full: over-arrival (gather)";
                    m.p_arr[t] = (m.p_arr[t] + 1) % PM_STAGES;
                    m.p_lag[t] = 0;
                    progressed = 1;
                } else if (m.p_j[t] < J) {
                    int s = m.p_stage[t];
                    if (!mb_passed(&m.empty[s], m.p_phase[t] ^ 1u))
                        continue;
                    if (m.reading[s])
                        return "producer refills a stage wgmma still reads";
                    int j = m.p_j[t];
                    if (!gather || t == 0) { /* arrive.expect_tx, then the TMA box(es) */
                        if (!mb_arrive(&m.full[s], gather ? 1 : 2))
                            return "full: over-arrival";
                        for (int k = gather ? 1 : 0; k < 2; k++)
                            m.fl_s[m.nfl] = s, m.fl_j[m.nfl] = j, m.fl_k[m.nfl++] = k;
                    }
                    if (gather) {
                        m.fl_s[m.nfl] = s, m.fl_j[m.nfl] = j, m.fl_k[m.nfl++] = 2 + t;
                        if (m.p_pend[t] == PM_LAG)
                            m.p_lag[t] = 1;
                        else
                            m.p_pend[t]++;
                    }
                    m.p_j[t]++;
                    if (++m.p_stage[t] == PM_STAGES)
                        m.p_stage[t] = 0, m.p_phase[t] ^= 1u;
                    progressed = 1;
                } else if (gather && !m.p_flushed[t]) {
                    int all = 1;
                    for (int j = 0; j < J; j++)
                        all &= m.landed_g[t][j];
                    if (!all)
                        continue;
                    for (; m.p_pend[t] > 0; m.p_pend[t]--) {
                        if (!mb_arrive(&m.full[m.p_arr[t]], 0))
                            return "full: over-arrival (flush)";
                        m.p_arr[t] = (m.p_arr[t] + 1) % PM_STAGES;
                    }
                    m.p_flushed[t] = 1;
                    progressed = 1;
                }
            } else if (who < np + PM_WARPS) { /* consumer warp */
                int w = who - np;
                /* wgmma.wait_group 0 at a tile's end: drain before the next tile's first wait */
                const int drain = m.c_j[w] % KT == 0 && m.c_j[w] > 0 && m.c_ngrp[w] > 0;
                if (m.c_j[w] < J && m.c_ngrp[w] < 2 && !drain) {
                    int s = m.c_stage[w];
                    if (!mb_passed(&m.full[s], m.c_phase[w]))
                        continue;
                    int j = m.c_j[w];
                    int ok = (gather || m.tag_a[s] == j) && m.tag_b[s] == j;
                    for (int t = 0; gather && t < PM_GT; t++)
                        ok &= m.tag_g[s][t] == j;
                    if (!ok)
                        return "consumer passed full before the stage's data landed";
                    m.c_grp[w][m.c_ngrp[w]++] = s, m.reading[s]++;
                    m.c_j[w]++;
                    if (++m.c_stage[w] == PM_STAGES)
                        m.c_stage[w] = 0, m.c_phase[w] ^= 1u;
                    progressed = 1;
                } else if (m.c_ngrp[w] > 0) {
                    /* wgmma.wait_group: 1 inside a tile (after the next issue), 0 at its end */
                    if (m.c_ngrp[w] == 2 || drain) {
                        /* the oldest group completes, then the warp releases its stage */
                        int s = m.c_grp[w][0];
                        m.reading[s]--;
                        m.c_grp[w][0] = m.c_grp[w][1];
                        m.c_ngrp[w]--;
                        if (!mb_arrive(&m.empty[s], 0))
                            return "empty: over-arrival";
                        progressed = 1;
                    }
                }
            } else if (who == np + PM_WARPS && m.nfl > 0) { /* one copy lands */
                st = st * 1664525u + 1013904223u;
                int i = (int)(xs_mix32(st) % (uint32_t)m.nfl);
                int s = m.fl_s[i], j = m.fl_j[i], k = m.fl_k[i];
                if (m.reading[s])
                    return "a copy landed on a stage wgmma still reads";
                if (k == 0)
                    m.tag_a[s] = j, mb_complete_tx(&m.full[s], 1);
                else if (k == 1)
                    m.tag_b[s] = j, mb_complete_tx(&m.full[s], 1);
                else
                    m.tag_g[s][k - 2] = j, m.landed_g[k - 2][j] = 1;
                m.nfl--;
                m.fl_s[i] = m.fl_s[m.nfl], m.fl_j[i] = m.fl_j[m.nfl], m.fl_k[i] = m.fl_k[m.nfl];
                progressed = 1;
            }
        }
        if (!progressed) {
            int done = m.nfl == 0;
            for (int t = 0; t < np; t++)
                done &= m.p_j[t] == J && (!gather || m.p_flushed[t]);
            for (int w = 0; w < PM_WARPS; w++)
                done &= m.c_j[w] == J && m.c_ngrp[w] == 0;
            if (done)
                return NULL;
            /* nothing moved in 64 random picks, many times over: a deadlock */
            if (++stuck > 2000)
                return "deadlock: no role can make progress";
        } else {
            stuck = 0;
        }
    }
    return "model: step limit";
}

static void host_checks(void)
{
    typedef xs_gemm90 C;
    /* 1. swizzle: xs_sw128_offset == the address-bit definition on a 1024-aligned base, and a
     * bijection on every 1024-byte atom */
    long bad = 0;
    for (int r = 0; r < 256; r++)
        for (int c = 0; c < 64; c++)
            bad += xs_sw128_offset(r, c) != sw128_addr((uint32_t)(r * 128 + c * 2));
    for (int atom = 0; atom < 4; atom++) {
        unsigned char seen[1024];
        memset(seen, 0, sizeof seen);
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < 64; c++) {
                uint32_t o = xs_sw128_offset(8 * atom + r, c) - 1024u * atom;
                bad += o >= 1024 || (o & 1) || seen[o]++;
            }
    }
    XT_CHECK(bad == 0, "sm90 swizzle: %ld offsets differ from the address-bit definition", bad);

    /* 2. descriptor fields */
    const uint32_t addrs[] = {0x400u, 0x1400u, 0x8400u + 0xC000u, 0x33c00u};
    bad = 0;
    for (size_t i = 0; i < sizeof addrs / sizeof addrs[0]; i++) {
        uint64_t d = xs_wgmma_desc_sw128(addrs[i]);
        bad += (uint32_t)(d & 0x3FFF) != addrs[i] >> 4;
        bad += ((d >> 16) & 0x3FFF) != 1 || ((d >> 32) & 0x3FFF) != 1024 / 16;
        bad += ((d >> 49) & 7) != 0 || (d >> 62) != 1;
        bad += (d & 0x3FFFC000C000C000ull) != 0; /* reserved bits */
    }
    XT_CHECK(bad == 0, "sm90 descriptor: %ld field errors", bad);

    /* 3. operand reads: fill an emulated ring stage the way TMA / the gather producer write it
     * (element (r, c) of the box at tile + xs_sw128_offset(r, c)), then read every k16 slice of
     * each consumer's A rows and of B through the descriptors the main loop builds (tile
     * descriptor + 2 * ks); every element must be the one wgmma expects there. */
    const uint32_t ring_base = 0x400u; /* 1024-aligned, past the reserved 1 KB */
    const size_t span = (size_t)ring_base + C::RING_BYTES;
    uint32_t *tag = (uint32_t *)malloc(span / 2 * sizeof(uint32_t)); /* per 2-byte element */
    bad = 0;
    for (int s = 0; s < C::STAGES; s++) {
        const uint32_t a_tile = ring_base + (uint32_t)(s * C::STAGE_BYTES);
        const uint32_t b_tile = a_tile + C::A_BYTES;
        for (size_t i = 0; i < span / 2; i++)
            tag[i] = 0xffffffffu;
        for (int r = 0; r < C::BM; r++)
            for (int c = 0; c < C::BK; c++)
                tag[(a_tile + xs_sw128_offset(r, c)) / 2] = (uint32_t)(r << 8 | c);
        for (int r = 0; r < C::BN; r++)
            for (int c = 0; c < C::BK; c++)
                tag[(b_tile + xs_sw128_offset(r, c)) / 2] = (uint32_t)(0x800000 | r << 8 | c);
        for (int ks = 0; ks < C::BK / 16; ks++) {
            for (int wg = 0; wg < C::CONSUMERS; wg++) {
                uint64_t da = xs_wgmma_desc_sw128(a_tile + (uint32_t)(wg * C::WG_M * 128)) +
                              (uint64_t)(2 * ks);
                for (int r = 0; r < C::WG_M; r++)
                    for (int kk = 0; kk < 16; kk++) {
                        uint32_t ad = desc_read_addr(da, r, kk);
                        bad += ad >= span || tag[ad / 2] != (uint32_t)((wg * C::WG_M + r) << 8 |
                                                                       (16 * ks + kk));
                    }
            }
            uint64_t db = xs_wgmma_desc_sw128(b_tile) + (uint64_t)(2 * ks);
            for (int r = 0; r < C::BN; r++)
                for (int kk = 0; kk < 16; kk++) {
                    uint32_t ad = desc_read_addr(db, r, kk);
                    bad += ad >= span || tag[ad / 2] != (uint32_t)(0x800000 | r << 8 |
                                                                   (16 * ks + kk));
                }
        }
    }
    free(tag);
    XT_CHECK(bad == 0, "sm90 operand emulation: %ld elements read from the wrong place", bad);

    /* 4. accumulator fragment: (warp, lane, register) -> (row, col) is a bijection onto 64 x 256,
     * and the SwiGLU pairing (gate register e, up register e + 8) is column + 16 in one group */
    {
        static unsigned char seen[64 * 256];
        memset(seen, 0, sizeof seen);
        bad = 0;
        for (int w = 0; w < 4; w++)
            for (int l = 0; l < 32; l++)
                for (int e = 0; e < C::ACC; e++) {
                    int r = xs_wgmma_acc_row(w, l, e), c = xs_wgmma_acc_col(l, e);
                    bad += r < 0 || r >= 64 || c < 0 || c >= 256 || seen[r * 256 + c]++;
                    if (xs_swiglu_is_up(c) == 0)
                        bad += xs_wgmma_acc_col(l, e + 8) != c + 16 ||
                               xs_wgmma_acc_row(w, l, e + 8) != r;
                }
        XT_CHECK(bad == 0, "sm90 accumulator fragment: %ld errors", bad);
    }

    /* 5. tile raster: every tile exactly once, for grids with ragged groups */
    {
        const int dims[][2] = {{1, 1}, {3, 5}, {8, 8}, {9, 2}, {17, 11}, {64, 8}, {16, 112}};
        bad = 0;
        for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
            int tm_n = dims[i][0], tn_n = dims[i][1];
            unsigned char *seen = (unsigned char *)calloc((size_t)tm_n * tn_n, 1);
            for (int t = 0; t < tm_n * tn_n; t++) {
                int tm, tn;
                xs_gemm90_tile(t, tm_n, tn_n, &tm, &tn);
                bad += tm < 0 || tm >= tm_n || tn < 0 || tn >= tn_n || seen[tm * tn_n + tn]++;
            }
            free(seen);
        }
        XT_CHECK(bad == 0, "sm90 tile raster: %ld tiles missed or repeated", bad);
    }

    /* 6. shared-memory plan: fits with the 1024-byte alignment slack, pieces aligned */
    XT_CHECK(C::SMEM_BYTES <= 227 * 1024 && C::SMEM_USED + 1023 <= C::SMEM_BYTES &&
                 C::EPI_OFF % 16 == 0 && (C::EPI_LD * 2) % 16 == 0 && C::DST_OFF % 8 == 0 &&
                 C::BAR_OFF % 8 == 0 && C::RING_BYTES % 1024 == 0,
             "sm90 shared-memory plan: %d bytes", C::SMEM_BYTES);

    /* 7. ring protocol model: both load paths, 1-3 tiles of 1-9 k-tiles, random interleavings:
     * no deadlock, no read before the data landed, no refill under a reading wgmma */
    {
        const char *err = NULL;
        int runs = 0;
        for (int gather = 0; gather < 2 && !err; gather++)
            for (int tiles = 1; tiles <= 3 && !err; tiles++)
                for (int KT = 1; KT <= 9 && !err; KT += 2)
                    for (uint32_t seed = 1; seed <= 40 && !err; seed++, runs++)
                        err = pm_run(gather, tiles, KT, seed * 2654435761u + (uint32_t)KT);
        XT_CHECK(err == NULL, "sm90 ring protocol model: %s", err);
        if (!err)
            printf("ok sm90 ring protocol model: %d random interleavings (TMA and gather paths)\n",
                   runs);
    }
    printf("ok sm90 host checks: swizzle, descriptors, operand emulation, fragment, raster, "
           "smem %d B\n", C::SMEM_BYTES);
}

/* ---- correctness against fp64 ------------------------------------------------------------------ */

typedef struct {
    int m, n, k;
    int gather; /* A rows through a random row map (with repeats) */
    int scale;  /* random row scale */
    int swiglu; /* interleaved gate/up; output n/2 columns */
} gcase;

static double silu_d(double g) { return g / (1.0 + exp(-g)); }

template <class C>
static void check_small(const gcase *t, const char *cfg_name)
{
    const int m = t->m, n = t->n, k = t->k;
    const int nout = t->swiglu ? n / 2 : n;
    const int arows = t->gather ? m + 7 : m;
    const long long lda = k + 8, ldb = k + 16;       /* strides wider than k */
    const long long ldc = ((nout + 7) / 8) * 8 + 8;  /* guard columns after nout */
    const int crows = m + 3;                         /* guard rows after m */

    xs_bf16 *a = (xs_bf16 *)dalloc((size_t)arows * lda * 2);
    xs_bf16 *b = (xs_bf16 *)dalloc((size_t)n * ldb * 2);
    xs_bf16 *c = (xs_bf16 *)dalloc((size_t)crows * ldc * 2);
    int *rows_d = (int *)dalloc((size_t)m * sizeof(int));
    float *scale_d = (float *)dalloc((size_t)m * sizeof(float));
    uint32_t seed = rng();
    fill_bf16(a, (size_t)arows * lda, seed, 1.0f);
    fill_bf16(b, (size_t)n * ldb, seed + 1, 1.0f);
    XS_CHECK_CU(cudaMemset(c, 0xff, (size_t)crows * ldc * 2)); /* poison: bf16 NaN */

    int *rows_h = (int *)malloc((size_t)m * sizeof(int) + 1);
    float *scale_h = (float *)malloc((size_t)m * sizeof(float) + 1);
    for (int i = 0; i < m; i++) {
        rows_h[i] = t->gather ? (int)(rng() % (uint32_t)arows) : i;
        scale_h[i] = t->scale ? 0.25f + (float)(rng() % 1000) / 500.0f : 1.0f;
    }
    XS_CHECK_CU(cudaMemcpy(rows_d, rows_h, (size_t)m * sizeof(int), cudaMemcpyHostToDevice));
    XS_CHECK_CU(cudaMemcpy(scale_d, scale_h, (size_t)m * sizeof(float), cudaMemcpyHostToDevice));

    xs_gemm_problem p = {a, t->gather ? rows_d : NULL, lda, b, ldb, m, n, k};
    xs_status st = engine<C>::run(&p, t->swiglu, c, ldc, t->scale ? scale_d : NULL);
    XT_CHECK(st == XS_OK, "%s m=%d n=%d k=%d: launch: %s", cfg_name, m, n, k, xs_errmsg());
    XS_CHECK_CU(cudaDeviceSynchronize());

    float *ah = to_host_f32(a, (size_t)arows * lda);
    float *bh = to_host_f32(b, (size_t)n * ldb);
    xs_bf16 *ch = (xs_bf16 *)malloc((size_t)crows * ldc * 2);
    XS_CHECK_CU(cudaMemcpy(ch, c, (size_t)crows * ldc * 2, cudaMemcpyDeviceToHost));

    /* reference: fp64 dot products, then SwiGLU and the row scale in fp64 */
    double *ref = (double *)malloc((size_t)m * nout * sizeof(double) + 1);
    double *full = (double *)malloc((size_t)n * sizeof(double) + 1);
    double ss_ref = 0;
    for (int i = 0; i < m; i++) {
        const float *ar = ah + (size_t)rows_h[i] * lda;
        for (int j = 0; j < n; j++) {
            const float *br = bh + (size_t)j * ldb;
            double s = 0;
            for (int x = 0; x < k; x++)
                s += (double)ar[x] * (double)br[x];
            full[j] = s;
        }
        for (int j = 0; j < nout; j++) {
            double v;
            if (t->swiglu) {
                /* output j = intermediate j: gate at physical 32*(j/16) + j%16, up 16 later */
                int pg = 32 * (j / 16) + (j % 16);
                v = silu_d(full[pg]) * full[pg + 16];
            } else {
                v = full[j];
            }
            v *= scale_h[i];
            ref[(size_t)i * nout + j] = v;
            ss_ref += v * v;
        }
    }
    double rms = m && nout ? sqrt(ss_ref / ((double)m * nout)) : 0;
    double ss_err = 0;
    long bad = 0, guard_bad = 0;
    for (int i = 0; i < crows; i++)
        for (long long j = 0; j < ldc; j++) {
            xs_bf16 raw = ch[(size_t)i * ldc + j];
            uint16_t bits;
            memcpy(&bits, &raw, 2);
            if (i >= m || j >= nout) {
                guard_bad += bits != 0xffff; /* nothing may be written outside [m, nout) */
                continue;
            }
            double got = __bfloat162float(raw), want = ref[(size_t)i * nout + j];
            double e = got - want;
            ss_err += e * e;
            if (!(fabs(e) <= 0.0078125 * fabs(want) + 1e-3 * rms)) {
                if (bad < 3)
                    fprintf(stderr, "  %s m=%d n=%d k=%d: C[%d][%lld] = %g, want %g\n", cfg_name,
                            m, n, k, i, j, got, want);
                bad++;
            }
        }
    double rel = ss_ref > 0 ? sqrt(ss_err / ss_ref) : 0;
    XT_CHECK(bad == 0, "%s m=%d n=%d k=%d gather=%d scale=%d swiglu=%d: %ld elements off", cfg_name,
             m, n, k, t->gather, t->scale, t->swiglu, bad);
    XT_CHECK(guard_bad == 0, "%s m=%d n=%d k=%d: %ld guard elements written", cfg_name, m, n, k,
             guard_bad);
    XT_CHECK(rel <= 4e-3, "%s m=%d n=%d k=%d: relative Frobenius error %.3g > 4e-3", cfg_name, m,
             n, k, rel);
    printf("ok %-6s m=%4d n=%4d k=%4d gather=%d scale=%d swiglu=%d  rel_err=%.2e\n", cfg_name, m,
           n, k, t->gather, t->scale, t->swiglu, rel);

    free(ah); free(bh); free(ch); free(ref); free(full); free(rows_h); free(scale_h);
    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(rows_d); cudaFree(scale_d);
}

/* ---- against cuBLAS -------------------------------------------------------------------------- */

/* relative Frobenius error of bf16 `got` [m, ldc] against fp32 `want` [m, n] (host copies) */
static double rel_frob(const xs_bf16 *got_d, long long ldc, const float *want_d, int m, int n,
                       long *nonfinite)
{
    size_t cn = (size_t)m * ldc, wn = (size_t)m * n;
    xs_bf16 *g = (xs_bf16 *)malloc(cn * 2 + 1);
    float *w = (float *)malloc(wn * 4 + 1);
    if (!g || !w) {
        fprintf(stderr, "test_gemm: out of host memory\n");
        exit(1);
    }
    XS_CHECK_CU(cudaMemcpy(g, got_d, cn * 2, cudaMemcpyDeviceToHost));
    XS_CHECK_CU(cudaMemcpy(w, want_d, wn * 4, cudaMemcpyDeviceToHost));
    double se = 0, sr = 0;
    long nf = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double a = __bfloat162float(g[(size_t)i * ldc + j]), b = w[(size_t)i * n + j];
            if (!isfinite(a)) {
                nf++;
                continue;
            }
            se += (a - b) * (a - b);
            sr += b * b;
        }
    free(g);
    free(w);
    *nonfinite = nf;
    return sr > 0 ? sqrt(se / sr) : (se > 0 ? INFINITY : 0);
}

/* SwiGLU of an fp32 interleaved Linear-1 output (device) into fp32 [m, n/2] */
__global__ void swiglu_ref_kernel(const float *y, float *h, int m, int n)
{
    size_t total = (size_t)m * (n / 2);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(i / (n / 2)), j = (int)(i % (n / 2));
        int pg = 32 * (j / 16) + (j % 16);
        float g = y[(size_t)r * n + pg], u = y[(size_t)r * n + pg + 16];
        h[i] = g / (1.0f + expf(-g)) * u;
    }
}

/* identity row map [m] on the device (the gather path on contiguous rows) */
static int *identity_rows(int m)
{
    int *h = (int *)malloc((size_t)m * sizeof(int) + 1), *d = (int *)dalloc((size_t)m * sizeof(int));
    for (int i = 0; i < m; i++)
        h[i] = i;
    XS_CHECK_CU(cudaMemcpy(d, h, (size_t)m * sizeof(int), cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* engine: 0 = gemm.cuh 128x256, 1 = gemm_sm90 (A by TMA), 2 = gemm_sm90 through an identity
 * row map (A by the cp.async gather path) */
static const char *const large_engine_name[] = {"big", "sm90", "sm90-gather"};

static void check_large(xs_cublas *cb, int m, int n, int k, int swiglu, int eng)
{
    xs_bf16 *a = (xs_bf16 *)dalloc((size_t)m * k * 2);
    xs_bf16 *b = (xs_bf16 *)dalloc((size_t)n * k * 2);
    int nout = swiglu ? n / 2 : n;
    xs_bf16 *c = (xs_bf16 *)dalloc((size_t)m * nout * 2);
    float *ref = (float *)dalloc((size_t)m * n * 4);
    float *ref2 = swiglu ? (float *)dalloc((size_t)m * nout * 4) : NULL;
    uint32_t seed = rng();
    fill_bf16(a, (size_t)m * k, seed, 1.0f);
    fill_bf16(b, (size_t)n * k, seed + 7, 1.0f / sqrtf((float)k) * 4.0f);
    XS_CHECK_CU(cudaMemset(c, 0xff, (size_t)m * nout * 2));
    int *rows = eng == 2 ? identity_rows(m) : NULL;
    xs_gemm_problem p = {a, rows, k, b, k, m, n, k};
    xs_status st = eng == 0 ? engine<xs_gemm_big>::run(&p, swiglu, c, nout, NULL)
                            : engine<xs_gemm90>::run(&p, swiglu, c, nout, NULL);
    XT_CHECK(st == XS_OK, "large %s launch: %s", large_engine_name[eng], xs_errmsg());
    st = xs_cublas_gemm_bf16(cb, NULL, m, n, k, a, b, 1, ref, 1);
    XT_CHECK(st == XS_OK, "cuBLAS: %s", xs_errmsg());
    if (swiglu) {
        swiglu_ref_kernel<<<1024, 256>>>(ref, ref2, m, n);
        XS_CHECK_CU(cudaGetLastError());
    }
    XS_CHECK_CU(cudaDeviceSynchronize());
    long nf = 0;
    double rel = rel_frob(c, nout, swiglu ? ref2 : ref, m, nout, &nf);
    const char *en = large_engine_name[eng];
    XT_CHECK(nf == 0, "large %s m=%d n=%d k=%d swiglu=%d: %ld non-finite outputs", en, m, n, k,
             swiglu, nf);
    XT_CHECK(rel <= 1e-2, "large %s m=%d n=%d k=%d swiglu=%d: rel Frobenius vs cuBLAS %.3g > "
             "1e-2", en, m, n, k, swiglu, rel);
    if (eng == 0)
        printf("ok large  m=%5d n=%5d k=%5d swiglu=%d  rel_err_vs_cublas=%.2e\n", m, n, k,
               swiglu, rel);
    else
        printf("ok large %s m=%5d n=%5d k=%5d swiglu=%d  rel_err_vs_cublas=%.2e\n", en, m, n, k,
               swiglu, rel);
    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(ref);
    if (rows)
        cudaFree(rows);
    if (ref2)
        cudaFree(ref2);
}

/* ---- throughput ------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int m, n, k;
} pshape;

static const pshape perf_shapes[] = {
    {"olmoe-l1", 8192, 2048, 2048},    {"olmoe-l2", 8192, 2048, 1024},
    {"qwen15-l1", 8192, 2816, 2048},   {"qwen15-l2", 8192, 2048, 1408},
    {"qwen2-l1", 4096, 5120, 3584},    {"qwen2-l2", 4096, 3584, 2560},
    {"mixtral-l1", 2048, 28672, 4096}, {"mixtral-l2", 2048, 4096, 14336},
};

typedef struct {
    double med, p10, p90; /* TFLOP/s */
} perf;

/* variant: 0 = engine big, 1 = engine small, 2 = cuBLAS, 3 = sm90 (A by TMA), 4 = sm90 with
 * A through the identity row map `rows` (the cp.async gather path) */
static perf time_variant(int variant, xs_cublas *cb, xs_bf16 **as, xs_bf16 **bs, int copies,
                         xs_bf16 *c, const pshape *s, int reps, int *last_copy, const int *rows)
{
    cudaEvent_t e0, e1;
    XS_CHECK_CU(cudaEventCreate(&e0));
    XS_CHECK_CU(cudaEventCreate(&e1));
    float *ms = (float *)malloc(sizeof(float) * (size_t)reps);
    const int warm = 3;
    /* sm90: tensor maps encoded once per input copy, outside the timing (as a workload with
     * fixed buffers would); every variant's timing still includes its launch */
    xs_gemm90_plan plans[8];
    for (int cp = 0; variant >= 3 && cp < copies; cp++) {
        xs_gemm_problem p = {as[cp], variant == 4 ? rows : NULL, s->k, bs[cp], s->k,
                             s->m, s->n, s->k};
        XS_CHECK((xs_gemm90_prepare<xs_gemm90, false>(&p, c, s->n, NULL, &plans[cp])));
    }
    for (int it = 0; it < warm + reps; it++) {
        int cp = it % copies;
        xs_gemm_problem p = {as[cp], variant == 4 ? rows : NULL, s->k, bs[cp], s->k,
                             s->m, s->n, s->k};
        XS_CHECK_CU(cudaEventRecord(e0, 0));
        if (variant >= 3)
            XS_CHECK((xs_gemm90_launch<xs_gemm90, false>(&plans[cp], 0)));
        else if (variant == 0)
            XS_CHECK((xs_gemm_bf16<xs_gemm_big, false>(&p, c, s->n, NULL, 0)));
        else if (variant == 1)
            XS_CHECK((xs_gemm_bf16<xs_gemm_small, false>(&p, c, s->n, NULL, 0)));
        else
            XS_CHECK(xs_cublas_gemm_bf16(cb, NULL, s->m, s->n, s->k, as[cp], bs[cp], 1, c, 0));
        XS_CHECK_CU(cudaEventRecord(e1, 0));
        XS_CHECK_CU(cudaEventSynchronize(e1));
        if (it >= warm)
            XS_CHECK_CU(cudaEventElapsedTime(&ms[it - warm], e0, e1));
        *last_copy = cp;
    }
    double *msd = (double *)malloc((size_t)reps * sizeof *msd);
    if (!msd) {
        fprintf(stderr, "test_gemm: out of host memory\n");
        exit(1);
    }
    for (int i = 0; i < reps; i++)
        msd[i] = ms[i];
    double flop = 2.0 * s->m * (double)s->n * s->k;
    perf r;
    r.med = flop / (xs_median(msd, (size_t)reps) * 1e-3) / 1e12;
    r.p10 = flop / (xs_quantile(msd, (size_t)reps, 0.9) * 1e-3) / 1e12; /* slow end of times */
    r.p90 = flop / (xs_quantile(msd, (size_t)reps, 0.1) * 1e-3) / 1e12;
    free(msd);
    free(ms);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return r;
}

static void run_perf(xs_cublas *cb, const xs_gpu_info *gi, int quick, int reps, FILE *csv,
                     int sm90)
{
    int nshapes = (int)(sizeof perf_shapes / sizeof perf_shapes[0]);
    printf("\n# gemm throughput: bf16 in, fp32 accumulate, bf16 out; TFLOP/s median [p10 p90] of "
           "%d reps after 3 warm-up, inputs rotated over copies > 3x L2\n", reps);
    printf("%-11s %5s %6s %6s  %-22s %-22s %-22s %9s", "shape", "m", "n", "k",
           "engine 128x256", "engine 128x128", "cuBLAS", "best/cuBL");
    if (sm90)
        printf("  %-22s %-22s %9s", "sm90 128x256 TMA", "sm90 gather (id map)", "sm90/cuBL");
    printf("\n");
    if (csv) {
        fprintf(csv, "shape,m,n,k,big_tflops,big_p10,big_p90,small_tflops,small_p10,small_p90,"
                     "cublas_tflops,cublas_p10,cublas_p90,ratio,big_rel_err,small_rel_err");
        if (sm90)
            fprintf(csv, ",sm90_tflops,sm90_p10,sm90_p90,sm90g_tflops,sm90g_p10,sm90g_p90,"
                         "sm90_ratio,sm90_rel_err,sm90g_rel_err");
        fprintf(csv, "\n");
    }
    double logsum = 0, logsum90 = 0;
    int counted = 0;
    for (int si = 0; si < nshapes; si++) {
        if (quick && si % 3 != 0)
            continue;
        const pshape *s = &perf_shapes[si];
        size_t abytes = (size_t)s->m * s->k * 2, bbytes = (size_t)s->n * s->k * 2;
        int copies = (int)((3.0 * (double)gi->l2_bytes) / (double)(abytes + bbytes)) + 1;
        if (copies < 2)
            copies = 2;
        if (copies > 8)
            copies = 8;
        xs_bf16 *as[8], *bs[8];
        for (int cp = 0; cp < copies; cp++) {
            as[cp] = (xs_bf16 *)dalloc(abytes);
            bs[cp] = (xs_bf16 *)dalloc(bbytes);
            fill_bf16(as[cp], abytes / 2, 1000u + 17u * cp + si, 1.0f);
            fill_bf16(bs[cp], bbytes / 2, 2000u + 31u * cp + si, 4.0f / sqrtf((float)s->k));
        }
        xs_bf16 *c = (xs_bf16 *)dalloc((size_t)s->m * s->n * 2);
        float *ref = (float *)dalloc((size_t)s->m * s->n * 4);
        perf pv[5];
        double rel[5] = {0, 0, 0, 0, 0};
        int *rows = sm90 ? identity_rows(s->m) : NULL;
        for (int v = 0; v < (sm90 ? 5 : 3); v++) {
            int last = 0;
            XS_CHECK_CU(cudaMemset(c, 0xff, (size_t)s->m * s->n * 2));
            pv[v] = time_variant(v, cb, as, bs, copies, c, s, reps, &last, rows);
            if (v != 2) {
                /* the timed output itself is checked against cuBLAS on the same inputs */
                XS_CHECK(xs_cublas_gemm_bf16(cb, NULL, s->m, s->n, s->k, as[last], bs[last], 1,
                                             ref, 1));
                XS_CHECK_CU(cudaDeviceSynchronize());
                long nf = 0;
                rel[v] = rel_frob(c, s->n, ref, s->m, s->n, &nf);
                XT_CHECK(nf == 0 && rel[v] <= 1e-2, "perf %s variant %d: %ld non-finite, rel "
                         "err %.3g", s->name, v, nf, rel[v]);
            }
        }
        double best = pv[0].med > pv[1].med ? pv[0].med : pv[1].med;
        double ratio = best / pv[2].med;
        logsum += log(ratio);
        counted++;
        char b0[32], b1[32], b2[32];
        snprintf(b0, sizeof b0, "%6.1f [%5.1f %5.1f]", pv[0].med, pv[0].p10, pv[0].p90);
        snprintf(b1, sizeof b1, "%6.1f [%5.1f %5.1f]", pv[1].med, pv[1].p10, pv[1].p90);
        snprintf(b2, sizeof b2, "%6.1f [%5.1f %5.1f]", pv[2].med, pv[2].p10, pv[2].p90);
        printf("%-11s %5d %6d %6d  %-22s %-22s %-22s %9.3f", s->name, s->m, s->n, s->k, b0, b1,
               b2, ratio);
        const double ratio90 = sm90 ? pv[3].med / pv[2].med : 0;
        if (sm90) {
            char b3[32], b4[32];
            snprintf(b3, sizeof b3, "%6.1f [%5.1f %5.1f]", pv[3].med, pv[3].p10, pv[3].p90);
            snprintf(b4, sizeof b4, "%6.1f [%5.1f %5.1f]", pv[4].med, pv[4].p10, pv[4].p90);
            printf("  %-22s %-22s %9.3f", b3, b4, ratio90);
            logsum90 += log(ratio90);
        }
        printf("\n");
        if (csv) {
            fprintf(csv, "%s,%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.4f,%.3g,%.3g",
                    s->name, s->m, s->n, s->k, pv[0].med, pv[0].p10, pv[0].p90, pv[1].med,
                    pv[1].p10, pv[1].p90, pv[2].med, pv[2].p10, pv[2].p90, ratio, rel[0], rel[1]);
            if (sm90)
                fprintf(csv, ",%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.4f,%.3g,%.3g", pv[3].med,
                        pv[3].p10, pv[3].p90, pv[4].med, pv[4].p10, pv[4].p90, ratio90, rel[3],
                        rel[4]);
            fprintf(csv, "\n");
        }
        if (rows)
            cudaFree(rows);
        for (int cp = 0; cp < copies; cp++) {
            cudaFree(as[cp]);
            cudaFree(bs[cp]);
        }
        cudaFree(c);
        cudaFree(ref);
    }
    if (counted) {
        double g = exp(logsum / counted);
        printf("# gemm: geomean engine/cuBLAS = %.3f over %d shapes (target >= 0.50): %s\n", g,
               counted, g >= 0.5 ? "MET" : "NOT MET");
        if (sm90) {
            double g90 = exp(logsum90 / counted);
            printf("# gemm: geomean sm90/cuBLAS = %.3f over %d shapes (target >= 0.80): %s\n",
                   g90, counted, g90 >= 0.8 ? "MET" : "NOT MET");
        }
    }
}

int main(int argc, char **argv)
{
    int quick = 0, tiny = 0, reps = 20, sm90 = 0, host_only = 0;
    const char *csv_path = NULL;
    static const struct option opts[] = {{"quick", no_argument, 0, 'q'},
                                         {"tiny", no_argument, 0, 't'},
                                         {"csv", required_argument, 0, 'c'},
                                         {"sm90", no_argument, 0, '9'},
                                         {"host", no_argument, 0, 'H'},
                                         {"iters", required_argument, 0, 'n'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "qn:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'q': quick = 1; break;
        case 't': tiny = 1; break;
        case '9': sm90 = 1; break;
        case 'H': host_only = 1; break;
        case 'c': csv_path = optarg; break;
        case 'n':
            reps = atoi(optarg);
            if (reps < 1 || reps > 100000) {
                fprintf(stderr, "test_gemm: error: -n %s: want 1..100000 repetitions\n", optarg);
                return 2;
            }
            break;
        case 'h':
            printf("usage: test_gemm [--quick | --tiny] [--sm90] [-n reps] [--csv FILE] | --host\n");
            return 0;
        default:
            fprintf(stderr, "usage: test_gemm [--quick | --tiny] [--sm90] [-n reps] [--csv FILE] | "
                            "--host\n");
            return 2;
        }
    }
    host_checks();
    if (host_only)
        return xt_done();
    xs_gpu_info gi;
    if (xs_gpu_open(0, &gi) != XS_OK) {
        fprintf(stderr, "test_gemm: %s\n", xs_errmsg());
        XT_CHECK(0, "no GPU");
        return xt_done();
    }
    xs_gpu_report_header(stdout, &gi, argc, argv);

    /* bad input is refused with one line, never launched */
    {
        xs_gemm_problem p = {NULL, NULL, 16, NULL, 16, 4, 4, 12};
        XT_CHECK((xs_gemm_bf16<xs_gemm_big, false>(&p, NULL, 8, NULL, 0)) == XS_EINVAL,
                 "k=12 accepted");
        p.k = 8;
        p.lda = 10; /* not a multiple of 8 */
        XT_CHECK((xs_gemm_bf16<xs_gemm_big, false>(&p, NULL, 8, NULL, 0)) == XS_EINVAL,
                 "lda=10 accepted");
        p.lda = 8;
        p.n = 48;
        XT_CHECK((xs_gemm_bf16<xs_gemm_big, true>(&p, NULL, 24, NULL, 0)) == XS_EINVAL,
                 "SwiGLU n=48 accepted");
        printf("ok bad input refused (%s)\n", xs_errmsg());
        if (sm90) {
            p.lda = 16;
            p.n = 4;
            p.k = 12;
            XT_CHECK((xs_gemm90_bf16<xs_gemm90, false>(&p, NULL, 8, NULL, 0)) == XS_EINVAL,
                     "sm90: k=12 accepted");
            p.k = 8;
            p.n = 48;
            XT_CHECK((xs_gemm90_bf16<xs_gemm90, true>(&p, NULL, 24, NULL, 0)) == XS_EINVAL,
                     "sm90: SwiGLU n=48 accepted");
            printf("ok sm90 bad input refused (%s)\n", xs_errmsg());
        }
    }

    static const gcase cases[] = {
        {1, 8, 8, 0, 0, 0},      {17, 24, 40, 0, 0, 0},    {77, 131, 200, 0, 0, 0},
        {128, 256, 64, 0, 0, 0}, {129, 257, 72, 0, 0, 0},  {255, 100, 8, 0, 0, 0},
        {300, 520, 1000, 0, 0, 0}, {200, 264, 136, 1, 1, 0}, {33, 19, 520, 1, 0, 0},
        {150, 320, 264, 0, 0, 1}, {64, 96, 128, 1, 1, 1},  {257, 544, 72, 0, 1, 1},
    };
    /* --tiny: a partial tile in every dimension (17x24x40, 129x257x72), gather + scale +
     * SwiGLU (64x96x128), scale + SwiGLU across tile edges (257x544x72) */
    static const size_t tiny_cases[] = {1, 4, 10, 11};
    const size_t ncases = tiny ? sizeof tiny_cases / sizeof tiny_cases[0]
                               : sizeof cases / sizeof cases[0];
    for (size_t j = 0; j < ncases; j++) {
        const gcase *c = &cases[tiny ? tiny_cases[j] : j];
        check_small<xs_gemm_big>(c, "big");
        check_small<xs_gemm_small>(c, "small");
        if (sm90)
            check_small<xs_gemm90>(c, "sm90");
    }
    if (tiny) {
        XS_CHECK_CU(cudaDeviceSynchronize());
        return xt_done();
    }

    xs_cublas *cb = NULL;
    if (xs_cublas_open(&cb) != XS_OK) {
        fprintf(stderr, "test_gemm: %s\n", xs_errmsg());
        XT_CHECK(0, "cuBLAS unavailable: large-shape checks and throughput not run");
        return xt_done();
    }
    for (int eng = 0; eng < (sm90 ? 3 : 1); eng++) {
        check_large(cb, 2048, 2816, 2048, 0, eng);
        check_large(cb, 1000, 4096, 1408, 0, eng);
        check_large(cb, 2048, 2816, 2048, 1, eng);
        if (!quick)
            check_large(cb, 4096, 5120, 3584, 0, eng);
    }

    FILE *csv = NULL;
    if (csv_path && !(csv = fopen(csv_path, "w"))) {
        fprintf(stderr, "test_gemm: error: cannot write %s\n", csv_path);
        XT_CHECK(0, "csv");
    }
    run_perf(cb, &gi, quick, quick ? (reps < 10 ? reps : 10) : reps, csv, sm90);
    if (csv)
        fclose(csv);
    xs_cublas_close(cb);
    XS_CHECK_CU(cudaDeviceSynchronize());
    return xt_done();
}
