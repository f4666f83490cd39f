// SPDX-License-Identifier: Apache-2.0
/*
 * up_check.cu - references and checks of the attention kernel's output (cuda/up/up.h): the
 * fp32 reference on sampled rows, random inputs, destination poisoning, byte and tolerance
 * comparison, the non-finite count and the flags' read-back. Every launcher validates its
 * input, returns an xs_status and never exits.
 */
#include <cuda_bf16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvtx_launch.h"
#include "up/up.h"
#include "xstage_cuda.h"


__global__ void xs_attn_compare_parts_kernel(const unsigned short *win, const unsigned short *ref,
                                             size_t n, int row0, int seq, int heads,
                                             const unsigned char *split, float atol, float rtol,
                                             unsigned long long *bad)
{
    const int nqb = (seq + XS_ATTN_BM - 1) / XS_ATTN_BM;
    unsigned long long nbad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t rh = i / XS_ATTN_D; /* row * heads + head */
        const int row = row0 + (int)(rh / (size_t)heads), h = (int)(rh % (size_t)heads);
        const int tile = (nqb - 1 - row / XS_ATTN_BM) * heads + h;
        const unsigned short x = win[i], y = ref[i];
        if (row >= seq || !split[tile]) {
            nbad += x != y;
        } else {
            const float fx = __uint_as_float((unsigned)x << 16);
            const float fy = __uint_as_float((unsigned)y << 16);
            nbad += !(fabsf(fx - fy) <= atol + rtol * fabsf(fy)); /* NaN fails */
        }
    }
    for (int o = 16; o > 0; o >>= 1)
        nbad += __shfl_xor_sync(0xffffffffu, nbad, o);
    if ((threadIdx.x & 31) == 0 && nbad)
        atomicAdd(bad, nbad);
}

extern "C" xs_status xs_attn_compare_parts(const void *win, const void *ref, int row0, int rows,
                                           int seq, int heads, const unsigned char *split,
                                           float atol, float rtol, unsigned long long *bad,
                                           cudaStream_t s)
{
    if (!win || !ref || !split || !bad || (((uintptr_t)win | (uintptr_t)ref) & 1) || row0 < 0 ||
        rows < 0 || heads < 1 || row0 + rows > seq || !(atol >= 0.f) || !(rtol >= 0.f))
        return xs_seterr(XS_EINVAL, "compare by tile: bad arguments (rows %d..%d of %d, %d heads, "
                         "tolerance %g + %g|ref|)", row0, row0 + rows, seq, heads, (double)atol,
                         (double)rtol);
    const size_t n = (size_t)rows * heads * XS_ATTN_D;
    if (n == 0)
        return XS_OK;
    size_t blocks = (n + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    XS_NVTX_LAUNCH("xs_attn_compare_parts_kernel",
                   xs_attn_compare_parts_kernel<<<(unsigned)blocks, 256, 0, s>>>(
                       (const unsigned short *)win, (const unsigned short *)ref, n, row0, seq,
                       heads, split, atol, rtol, bad));
    XS_CU_LAUNCH();
    return XS_OK;
}

/* ---- fp32 reference on sampled rows -------------------------------------------------------- */

#define XS_REF_THREADS 128 /* one thread per output dimension; 4 warps share the keys */

/* q . k_j over 128 dims: each lane takes 4 dims, then a butterfly leaves the sum in every lane. */
static __device__ float xs_ref_dot(const float *qs, const __nv_bfloat16 *krow, int lane)
{
    const __nv_bfloat162 *k2 = reinterpret_cast<const __nv_bfloat162 *>(krow + 4 * lane);
    float2 a = __bfloat1622float2(k2[0]), b = __bfloat1622float2(k2[1]);
    float d = qs[4 * lane] * a.x + qs[4 * lane + 1] * a.y + qs[4 * lane + 2] * b.x +
              qs[4 * lane + 3] * b.y;
    for (int o = 16; o > 0; o >>= 1)
        d += __shfl_xor_sync(0xffffffffu, d, o);
    return d;
}

__global__ void __launch_bounds__(XS_REF_THREADS)
    xs_attn_ref_kernel(const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v,
                       const __nv_bfloat16 *o, int seq, int heads, int causal, float scale,
                       const int *rows, float *ref, float *got)
{
    __shared__ float qs[XS_ATTN_D];
    __shared__ float ps[XS_REF_THREADS];
    __shared__ float red[XS_REF_THREADS / 32];
    const int i = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int nw = XS_REF_THREADS / 32;
    const int s = rows[2 * i], h = rows[2 * i + 1];
    const size_t hs = (size_t)heads * XS_ATTN_D; /* elements between consecutive rows */
    qs[tid] = __bfloat162float(q[(size_t)s * hs + (size_t)h * XS_ATTN_D + tid]) * scale;
    __syncthreads();
    const int nk = causal ? s + 1 : seq;
    const __nv_bfloat16 *kh = k + (size_t)h * XS_ATTN_D, *vh = v + (size_t)h * XS_ATTN_D;

    /* pass 1: the row maximum */
    float mx = -INFINITY;
    for (int j = warp; j < nk; j += nw)
        mx = fmaxf(mx, xs_ref_dot(qs, kh + (size_t)j * hs, lane));
    if (lane == 0)
        red[warp] = mx;
    __syncthreads();
    mx = red[0];
    for (int w = 1; w < nw; w++)
        mx = fmaxf(mx, red[w]);

    /* pass 2: probabilities of 128 keys at a time, then thread tid sums dimension tid */
    float acc = 0.f, l = 0.f;
    for (int c0 = 0; c0 < nk; c0 += XS_REF_THREADS) {
        for (int jj = warp; jj < XS_REF_THREADS; jj += nw) {
            int j = c0 + jj;
            float p = 0.f;
            if (j < nk)
                p = expf(xs_ref_dot(qs, kh + (size_t)j * hs, lane) - mx);
            if (lane == 0)
                ps[jj] = p;
        }
        __syncthreads();
        int cnt = nk - c0 < XS_REF_THREADS ? nk - c0 : XS_REF_THREADS;
#pragma unroll 8 /* independent loads in flight; the sums stay in order */
        for (int jj = 0; jj < cnt; jj++) {
            float p = ps[jj];
            acc += p * __bfloat162float(vh[(size_t)(c0 + jj) * hs + tid]);
            l += p;
        }
        __syncthreads();
    }
    ref[(size_t)i * XS_ATTN_D + tid] = acc / l;
    got[(size_t)i * XS_ATTN_D + tid] =
        __bfloat162float(o[(size_t)s * hs + (size_t)h * XS_ATTN_D + tid]);
}

extern "C" xs_status xs_attn_ref_rows(const void *q, const void *k, const void *v, const void *o,
                                      int seq, int heads, int causal, float scale,
                                      const int *rows, int n, float *ref, float *got,
                                      cudaStream_t s)
{
    if (!q || !k || !v || !o || !rows || !ref || !got || seq < 1 || heads < 1 || n < 0)
        return xs_seterr(XS_EINVAL, "attention reference: bad arguments (seq %d, heads %d, "
                         "%d samples)", seq, heads, n);
    if (n == 0)
        return XS_OK;
    if (!(scale > 0.f))
        scale = 0.08838834764831845f;
    XS_NVTX_LAUNCH("xs_attn_ref_kernel",
                   xs_attn_ref_kernel<<<n, XS_REF_THREADS, 0, s>>>(
                       (const __nv_bfloat16 *)q, (const __nv_bfloat16 *)k, (const __nv_bfloat16 *)v,
                       (const __nv_bfloat16 *)o, seq, heads, causal, scale, rows, ref, got));
    XS_CU_LAUNCH();
    return XS_OK;
}

/* ---- inputs, poison, comparison, flags ----------------------------------------------------- */

__global__ void xs_attn_fill_random_kernel(__nv_bfloat16 *p, size_t n, uint32_t seed, float lo,
                                           float span)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = xs_pattern_word(seed, i >> 2, (uint32_t)(i & 3));
        float u = (float)(x >> 8) * (1.0f / 16777216.0f); /* [0, 1) */
        p[i] = __float2bfloat16_rn(lo + span * u);
    }
}

extern "C" xs_status xs_attn_fill_random(void *p, size_t n, uint32_t seed, float lo, float hi,
                                         cudaStream_t s)
{
    if (!p || !(hi > lo))
        return xs_seterr(XS_EINVAL, "random fill: NULL buffer or empty range [%g, %g)",
                         (double)lo, (double)hi);
    if (n == 0)
        return XS_OK;
    size_t blocks = (n + 255) / 256;
    if (blocks > 65536)
        blocks = 65536;
    XS_NVTX_LAUNCH("xs_attn_fill_random_kernel",
                   xs_attn_fill_random_kernel<<<(unsigned)blocks, 256, 0, s>>>(
                       (__nv_bfloat16 *)p, n, seed, lo, hi - lo));
    XS_CU_LAUNCH();
    return XS_OK;
}

__global__ void xs_attn_fill_word_kernel(uint4 *p, size_t n16, uint32_t w)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = make_uint4(w, w, w, w);
}

extern "C" xs_status xs_attn_fill_word(void *p, size_t bytes, uint32_t word, cudaStream_t s)
{
    if (!p || (bytes & 15) || ((uintptr_t)p & 15))
        return xs_seterr(XS_EINVAL, "fill: NULL, unaligned, or %zu bytes not a multiple of 16",
                         bytes);
    if (bytes == 0)
        return XS_OK;
    size_t n16 = bytes / 16, blocks = (n16 + 255) / 256;
    if (blocks > 8192)
        blocks = 8192;
    XS_NVTX_LAUNCH(
        "xs_attn_fill_word_kernel",
        xs_attn_fill_word_kernel<<<(unsigned)blocks, 256, 0, s>>>((uint4 *)p, n16, word));
    XS_CU_LAUNCH();
    return XS_OK;
}

__global__ void xs_attn_compare_kernel(const uint4 *a, const uint4 *b, size_t n16,
                                       unsigned long long *bad)
{
    unsigned long long nbad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 x = a[i], y = b[i];
        nbad += (x.x != y.x) | (x.y != y.y) | (x.z != y.z) | (x.w != y.w);
    }
    for (int o = 16; o > 0; o >>= 1)
        nbad += __shfl_xor_sync(0xffffffffu, nbad, o);
    if ((threadIdx.x & 31) == 0 && nbad)
        atomicAdd(bad, nbad);
}

extern "C" xs_status xs_attn_compare(const void *a, const void *b, size_t bytes,
                                     unsigned long long *bad, cudaStream_t s)
{
    if (!a || !b || !bad || (bytes & 15) || (((uintptr_t)a | (uintptr_t)b) & 15))
        return xs_seterr(XS_EINVAL, "compare: NULL, unaligned, or %zu bytes not a multiple of "
                         "16", bytes);
    if (bytes == 0)
        return XS_OK;
    size_t n16 = bytes / 16, blocks = (n16 + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    XS_NVTX_LAUNCH("xs_attn_compare_kernel",
                   xs_attn_compare_kernel<<<(unsigned)blocks, 256, 0, s>>>(
                       (const uint4 *)a, (const uint4 *)b, n16, bad));
    XS_CU_LAUNCH();
    return XS_OK;
}

__global__ void xs_attn_nonfinite_kernel(const unsigned short *p, size_t n,
                                         unsigned long long *count)
{
    unsigned long long c = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        c += (p[i] & 0x7f80u) == 0x7f80u; /* exponent all ones: Inf or NaN */
    for (int o = 16; o > 0; o >>= 1)
        c += __shfl_xor_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0 && c)
        atomicAdd(count, c);
}

extern "C" xs_status xs_attn_count_nonfinite(const void *p, size_t n, unsigned long long *count,
                                             cudaStream_t s)
{
    if (!p || !count)
        return xs_seterr(XS_EINVAL, "count non-finite: NULL buffer or counter");
    if (n == 0)
        return XS_OK;
    size_t blocks = (n + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    XS_NVTX_LAUNCH("xs_attn_nonfinite_kernel",
                   xs_attn_nonfinite_kernel<<<(unsigned)blocks, 256, 0, s>>>(
                       (const unsigned short *)p, n, count));
    XS_CU_LAUNCH();
    return XS_OK;
}

__global__ void xs_attn_flags_kernel(const __grid_constant__ xs_wintab tab, int n,
                                     uint64_t value, unsigned long long *bad)
{
    const uint64_t *f = tab.flags[blockIdx.x];
    unsigned long long c = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        c += xs_ld_acquire_sys(f + i) != value;
    for (int o = 16; o > 0; o >>= 1)
        c += __shfl_xor_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0 && c)
        atomicAdd(bad, c);
}

extern "C" xs_status xs_attn_flags_check(const xs_wintab *tab, int n, uint64_t value,
                                         unsigned long long *bad, cudaStream_t s)
{
    if (!tab || !bad || tab->nranks < 1 || tab->nranks > XS_MAX_RANKS || n < 1 ||
        n > tab->nflags)
        return xs_seterr(XS_EINVAL, "flags check: no table or counter, or %d flags of %d", n,
                         tab ? tab->nflags : 0);
    for (int r = 0; r < tab->nranks; r++)
        if (!tab->flags[r])
            return xs_seterr(XS_EINVAL, "flags check: rank %d has no flag pointer", r);
    XS_NVTX_LAUNCH("xs_attn_flags_kernel",
                   xs_attn_flags_kernel<<<tab->nranks, 256, 0, s>>>(*tab, n, value, bad));
    XS_CU_LAUNCH();
    return XS_OK;
}

/* ---- host-side checks over the kernel's stamps and outputs -------------------------------- */

extern "C" double xs_attn_span_us(const uint64_t *cta_ns, int grid)
{
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (int b = 0; b < grid; b++) {
        if (cta_ns[3 * b] < t0) t0 = cta_ns[3 * b];
        if (cta_ns[3 * b + 1] > t1) t1 = cta_ns[3 * b + 1];
    }
    return t1 > t0 ? (double)(t1 - t0) / 1e3 : NAN;
}

extern "C" double xs_attn_store_us(const uint64_t *cta_ns, int grid)
{
    double *x = (double *)malloc((size_t)grid * sizeof *x);
    if (!x)
        return NAN;
    for (int b = 0; b < grid; b++)
        x[b] = (double)cta_ns[3 * b + 2] / 1e3;
    double m = xs_median(x, (size_t)grid);
    free(x);
    return m;
}

/* splitmix64: the sampled rows' generator (reproducible from the caller's seed). */
static uint64_t check_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

extern "C" xs_status xs_attn_check_rows(const void *q, const void *k, const void *v,
                                        const void *o, int seq, int heads, int causal,
                                        int rows_per_rank, int nsamples, uint64_t rng,
                                        double atol, double rtol, int *rows_dev, float *ref_dev,
                                        float *got_dev, cudaStream_t s, double *worst,
                                        double *max_abs)
{
    const int n = nsamples;
    if (n < 1 || seq < 1 || heads < 1 || !worst || !max_abs)
        return xs_seterr(XS_EINVAL, "attention check: bad arguments (%d samples)", n);
    int *rows = (int *)malloc((size_t)2 * n * sizeof(int));
    float *ref = (float *)malloc((size_t)n * XS_ATTN_D * sizeof(float));
    float *got = (float *)malloc((size_t)n * XS_ATTN_D * sizeof(float));
    if (!rows || !ref || !got) {
        free(rows), free(ref), free(got);
        return xs_seterr(XS_ENOMEM, "attention check: out of host memory for %d rows", n);
    }
    /* edges, shard and block boundaries, then random rows */
    const int fixed[] = {0, seq - 1, XS_ATTN_BM - 1, XS_ATTN_BM, XS_ATTN_BN - 1,
                         rows_per_rank - 1, rows_per_rank, seq / 2, seq - XS_ATTN_BM};
    const int nfixed = (int)(sizeof fixed / sizeof fixed[0]);
    for (int i = 0; i < n; i++) {
        int r = i < nfixed ? fixed[i] : (int)(check_next(&rng) % (uint64_t)seq);
        if (r < 0) r = 0;
        if (r >= seq) r = seq - 1;
        rows[2 * i] = r;
        rows[2 * i + 1] = i < nfixed ? (i * 7) % heads : (int)(check_next(&rng) % (uint64_t)heads);
    }
    xs_status st = XS_OK;
    cudaError_t e = cudaMemcpyAsync(rows_dev, rows, (size_t)2 * n * sizeof(int),
                                    cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess) {
        st = xs_attn_ref_rows(q, k, v, o, seq, heads, causal, 0.f, rows_dev, n, ref_dev, got_dev,
                              s);
        if (st == XS_OK) {
            e = cudaMemcpyAsync(ref, ref_dev, (size_t)n * XS_ATTN_D * sizeof(float),
                                cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(got, got_dev, (size_t)n * XS_ATTN_D * sizeof(float),
                                    cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess)
                e = cudaStreamSynchronize(s);
        }
    }
    if (st == XS_OK && e != cudaSuccess)
        st = xs_seterr(XS_ECUDA, "attention check: %s", cudaGetErrorString(e));
    *worst = 0, *max_abs = 0;
    for (int i = 0; st == XS_OK && i < n * XS_ATTN_D; i++) {
        double err = fabs((double)got[i] - (double)ref[i]);
        double r = err / (atol + rtol * fabs((double)ref[i]));
        if (!(r <= *worst)) /* NaN propagates as a failure */
            *worst = isnan(r) ? INFINITY : r;
        if (err > *max_abs || isnan(err))
            *max_abs = isnan(err) ? INFINITY : err;
    }
    free(rows), free(ref), free(got);
    return st;
}

extern "C" xs_status xs_attn_verify_windows(const xs_wintab *own, int peers, const void *o,
                                            int seq, int heads, int rows_per_rank,
                                            const unsigned char *split, float atol, float rtol,
                                            unsigned long long *bad_dev, cudaStream_t s,
                                            unsigned long long *bad)
{
    if (!own || peers < 1 || peers > own->nranks || !o || !bad_dev || !bad)
        return xs_seterr(XS_EINVAL, "window check: bad arguments (%d peers)", peers);
    const size_t bytes = (size_t)rows_per_rank * heads * XS_ATTN_ROW_BYTES;
    XS_CU(cudaMemsetAsync(bad_dev, 0, sizeof *bad_dev, s));
    for (int r = 0; r < peers; r++) {
        const char *ref = (const char *)o + (size_t)r * bytes;
        if (split)
            XS_TRY(xs_attn_compare_parts(own->data[r], ref, r * rows_per_rank, rows_per_rank, seq,
                                         heads, split, atol, rtol, bad_dev, s));
        else
            XS_TRY(xs_attn_compare(own->data[r], ref, bytes, bad_dev, s));
    }
    *bad = 0;
    XS_CU(cudaMemcpyAsync(bad, bad_dev, sizeof *bad, cudaMemcpyDeviceToHost, s));
    XS_CU(cudaStreamSynchronize(s));
    return XS_OK;
}

extern "C" xs_status xs_attn_flags_wait(const xs_wintab *own, int sources, int grid,
                                        uint64_t value, double timeout_ms,
                                        unsigned long long *bad_dev, cudaStream_t s,
                                        unsigned long long *missing, uint64_t *late)
{
    if (!own || sources < 1 || sources > own->nranks || sources > 64 || grid < 1 || !bad_dev ||
        !missing || !late)
        return xs_seterr(XS_EINVAL, "flag wait: bad arguments (%d sources, grid %d)", sources,
                         grid);
    const double t_end = 1e3 * xs_now_s() + timeout_ms;
    *missing = 0, *late = 0;
    for (;;) {
        XS_CU(cudaMemsetAsync(bad_dev, 0, sizeof *bad_dev, s));
        XS_TRY(xs_attn_flags_check(own, grid, value, bad_dev, s));
        XS_CU(cudaMemcpyAsync(missing, bad_dev, sizeof *missing, cudaMemcpyDeviceToHost, s));
        XS_CU(cudaStreamSynchronize(s));
        if (!*missing)
            return XS_OK;
        if (1e3 * xs_now_s() > t_end)
            break;
        usleep(50);
    }
    for (int r = 0; r < sources; r++) { /* which sources: one slot at a time */
        xs_wintab one = *own;
        unsigned long long m = 0;
        one.nranks = 1, one.flags[0] = own->flags[r];
        XS_CU(cudaMemsetAsync(bad_dev, 0, sizeof *bad_dev, s));
        XS_TRY(xs_attn_flags_check(&one, grid, value, bad_dev, s));
        XS_CU(cudaMemcpyAsync(&m, bad_dev, sizeof m, cudaMemcpyDeviceToHost, s));
        XS_CU(cudaStreamSynchronize(s));
        if (m)
            *late |= 1ull << r;
    }
    return xs_seterr(XS_ETIMEOUT, "flag wait: %llu of %d x %d signals missing after %.0f ms",
                     *missing, sources, grid, timeout_ms);
}
