/*
 * attn.cu - launchers of the attention forward kernel (cuda/attn.cuh) and its helpers: the fp32
 * reference on sampled rows, random inputs, destination poisoning, byte comparison and flag
 * read-back. Every launcher validates its input, returns an xs_status and never exits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn.cuh"
#include "xstage_cuda.h"

/* ---- tile order (must match xs_attn_cta) ------------------------------------------------- */

extern "C" int xs_attn_tiles(int seq, int heads)
{
    return (seq + XS_ATTN_BM - 1) / XS_ATTN_BM * heads;
}

extern "C" int xs_attn_remote_tiles(int seq, int heads, int rows_per_rank)
{
    return xs_attn_remote_count(seq, heads, rows_per_rank);
}

extern "C" int xs_attn_cta_count(int tiles, int grid, int cta)
{
    return xs_attn_count_below(tiles, grid, cta);
}

extern "C" int xs_attn_cta_tile(int order, int tiles, int remote, int grid, int cta, int k)
{
    return xs_attn_cta_kth(order == XS_ATTN_ORDER_EARLY ? remote : 0, grid, cta, k);
}

extern "C" int xs_attn_tile_row0(int seq, int heads, int t)
{
    int nqb = (seq + XS_ATTN_BM - 1) / XS_ATTN_BM;
    return (nqb - 1 - t / heads) * XS_ATTN_BM;
}

extern "C" int xs_attn_tile_iters(int seq, int heads, int causal, int t)
{
    int q0 = xs_attn_tile_row0(seq, heads, t);
    int last = (q0 + XS_ATTN_BM < seq ? q0 + XS_ATTN_BM : seq) - 1;
    return causal ? last / XS_ATTN_BN + 1 : (seq + XS_ATTN_BN - 1) / XS_ATTN_BN;
}

extern "C" int xs_attn_courier_tiles(int order, int tiles, int remote, int ncompute, int *list)
{
    if (!list || tiles < 1 || remote < 0 || remote > tiles || ncompute < 1 || ncompute > tiles)
        return -1;
    xs_attn_rwalk w;
    xs_attn_rwalk_init(&w, order == XS_ATTN_ORDER_EARLY ? remote : 0, ncompute, remote);
    int n = 0, t;
    while ((t = xs_attn_rwalk_next(&w)) >= 0 && n < remote)
        list[n++] = t;
    return n;
}

/* ---- the couriers' prediction (host; docs/UP.md "Couriers") ------------------------------- */

extern "C" xs_status xs_attn_courier_predict(int order, int tiles, int remote, int ncompute,
                                             int couriers, const double *dur_ns,
                                             const double *copy_bytes, double rate_bytes_per_ns,
                                             double overhead_ns, xs_attn_courier_pred *out)
{
    if (!out || !dur_ns || tiles < 1 || remote < 0 || remote > tiles || ncompute < 1 ||
        ncompute > tiles || couriers < 0 || (couriers > 0 && !copy_bytes) ||
        (couriers > 0 && !(rate_bytes_per_ns > 0)) || !(overhead_ns >= 0))
        return xs_seterr(XS_EINVAL, "courier prediction: bad arguments (%d tiles, %d remote, %d "
                         "compute CTAs, %d couriers, rate %g B/ns)", tiles, remote, ncompute,
                         couriers, rate_bytes_per_ns);
    memset(out, 0, sizeof *out);
    double *ready = (double *)malloc((size_t)tiles * sizeof(double));
    double *free_at = (double *)calloc((size_t)(couriers > 0 ? couriers : 1), sizeof(double));
    if (!ready || !free_at) {
        free(ready);
        free(free_at);
        return xs_seterr(XS_ENOMEM, "courier prediction: out of memory for %d tiles", tiles);
    }
    /* the compute CTAs: each walks its tiles back to back; a tile is ready at its end */
    for (int b = 0; b < ncompute; b++) {
        const int m = xs_attn_cta_count(tiles, ncompute, b);
        double t_b = 0;
        for (int k = 0; k < m; k++) {
            const int t = xs_attn_cta_tile(order, tiles, remote, ncompute, b, k);
            t_b += dur_ns[t];
            ready[t] = t_b;
        }
        if (t_b > out->compute_end_ns)
            out->compute_end_ns = t_b;
    }
    /* the couriers: the walk's j-th tile to courier j % C, served in order at rate / C */
    if (couriers > 0 && remote > 0) {
        const double rc = rate_bytes_per_ns / couriers;
        xs_attn_rwalk w;
        xs_attn_rwalk_init(&w, order == XS_ATTN_ORDER_EARLY ? remote : 0, ncompute, remote);
        int t;
        for (int j = 0; (t = xs_attn_rwalk_next(&w)) >= 0; j++) {
            double *f = &free_at[j % couriers];
            *f = (*f > ready[t] ? *f : ready[t]) + overhead_ns + copy_bytes[t] / rc;
            if (*f > out->link_end_ns)
                out->link_end_ns = *f;
        }
    }
    out->span_ns = out->compute_end_ns > out->link_end_ns ? out->compute_end_ns
                                                          : out->link_end_ns;
    free(ready);
    free(free_at);
    return XS_OK;
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

extern "C" xs_status xs_attn_validate(const xs_attn_args *a, const xs_wintab *tab, int grid)
{
    if (!a)
        return xs_seterr(XS_EINVAL, "attention: no arguments");
    if (a->seq < 1 || a->seq > XS_ATTN_MAX_SEQ)
        return xs_seterr(XS_EINVAL, "attention: seq %d outside 1..%d", a->seq, XS_ATTN_MAX_SEQ);
    if (a->heads < 1 || a->heads > XS_ATTN_MAX_HEADS)
        return xs_seterr(XS_EINVAL, "attention: heads %d outside 1..%d", a->heads,
                         XS_ATTN_MAX_HEADS);
    if (!a->q || !a->k || !a->v)
        return xs_seterr(XS_EINVAL, "attention: q, k or v is NULL");
    if (((uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v) & 15)
        return xs_seterr(XS_EINVAL, "attention: q, k and v must be 16-byte aligned");
    if (!(a->scale >= 0.f) || isinf(a->scale))
        return xs_seterr(XS_EINVAL, "attention: softmax scale %g must be finite and >= 0 "
                         "(0 = 1/sqrt(128))", (double)a->scale);
    if (a->split < 0 || a->split > XS_ATTN_MAX_SPLIT)
        return xs_seterr(XS_EINVAL, "attention: split %d outside 0..%d", a->split,
                         XS_ATTN_MAX_SPLIT);
    if (a->order != XS_ATTN_ORDER_SNAKE && a->order != XS_ATTN_ORDER_EARLY)
        return xs_seterr(XS_EINVAL, "attention: order %d is neither snake (0) nor early (1)",
                         a->order);
    int tiles = xs_attn_tiles(a->seq, a->heads);
    if (a->couriers < 0 || a->couriers > XS_ATTN_MAX_COURIERS)
        return xs_seterr(XS_EINVAL, "attention: couriers %d outside 0..%d", a->couriers,
                         XS_ATTN_MAX_COURIERS);
    if (a->couriers > 0) {
        const int C = a->couriers;
        if (a->out != XS_ATTN_OUT_WINDOWS || a->split != 0 || a->signal == 0)
            return xs_seterr(XS_EINVAL, "attention: couriers need windows output, split 0 and a "
                             "nonzero signal (the ready flags carry it)");
        if (!a->sync || ((uintptr_t)a->sync & 7))
            return xs_seterr(XS_EINVAL, "attention: couriers need a sync buffer of tiles + grid "
                             "flags (8-byte aligned device memory)");
        if (!a->o || ((uintptr_t)a->o & 15))
            return xs_seterr(XS_EINVAL, "attention: couriers need a 16-byte aligned staging "
                             "buffer o");
        if (!(a->pace_bytes_per_ns == 0.f ||
              (a->pace_bytes_per_ns >= XS_ATTN_MIN_PACE * C && !isinf(a->pace_bytes_per_ns))))
            return xs_seterr(XS_EINVAL, "attention: courier pace %g B/ns: 0 (unpaced) or %g..inf "
                             "(%g per courier)", (double)a->pace_bytes_per_ns,
                             XS_ATTN_MIN_PACE * C, XS_ATTN_MIN_PACE);
        if (grid - C < 1 || grid - C > tiles)
            return xs_seterr(XS_EINVAL, "attention: grid %d with %d couriers leaves %d compute "
                             "CTAs, outside 1..%d (the tiles of seq %d x %d heads)", grid, C,
                             grid - C, tiles, a->seq, a->heads);
    } else if (grid < 1 || grid > tiles) {
        return xs_seterr(XS_EINVAL, "attention: grid %d outside 1..%d (the tiles of seq %d x "
                         "%d heads)", grid, tiles, a->seq, a->heads);
    }
    if (a->out == XS_ATTN_OUT_LOCAL) {
        if (!a->o || ((uintptr_t)a->o & 15))
            return xs_seterr(XS_EINVAL, "attention: local output is NULL or not 16-byte "
                             "aligned");
        return XS_OK;
    }
    if (a->out != XS_ATTN_OUT_WINDOWS)
        return xs_seterr(XS_EINVAL, "attention: output mode %d is neither local nor windows",
                         a->out);
    if (!tab || tab->nranks < 1 || tab->nranks > XS_MAX_RANKS)
        return xs_seterr(XS_EINVAL, "attention: windows output needs a window table with 1..%d "
                         "ranks", XS_MAX_RANKS);
    if (a->rows_per_rank < 1 || (long long)a->rows_per_rank * tab->nranks < a->seq)
        return xs_seterr(XS_EINVAL, "attention: %d ranks x %d rows per rank do not cover seq "
                         "%d", tab->nranks, a->rows_per_rank, a->seq);
    const int dh = a->dst_heads > 0 ? a->dst_heads : a->heads;
    if (a->dst_heads < 0 || a->dst_head0 < 0 || a->dst_head0 + a->heads > dh)
        return xs_seterr(XS_EINVAL, "attention: heads %d..%d do not fit %d heads per "
                         "destination row", a->dst_head0, a->dst_head0 + a->heads - 1, dh);
    size_t need = (size_t)a->rows_per_rank * dh * XS_ATTN_ROW_BYTES;
    if (need > tab->bytes)
        return xs_seterr(XS_EINVAL, "attention: a rank's rows need %zu bytes, its window holds "
                         "%zu", need, tab->bytes);
    for (int r = 0; r < tab->nranks; r++) {
        if (!tab->data[r] || ((uintptr_t)tab->data[r] & 15))
            return xs_seterr(XS_EINVAL, "attention: window of rank %d is NULL or not 16-byte "
                             "aligned", r);
        if (a->signal && (tab->nflags < grid || !tab->flags[r]))
            return xs_seterr(XS_EINVAL, "attention: signalling %d CTAs needs %d flags per "
                             "window; rank %d has %d", grid, grid, r,
                             tab->flags[r] ? tab->nflags : 0);
    }
    return XS_OK;
}

extern "C" xs_status xs_attn_fwd(const xs_attn_args *a, const xs_wintab *tab, int grid,
                                 cudaStream_t s)
{
    XS_TRY(xs_attn_validate(a, tab, grid));
    /* once per device: 128 KB of dynamic shared memory needs the opt-in. Done outside any
     * timed window by the first (warm-up) launch. */
    static unsigned char attr_done[XS_MAX_RANKS];
    static int resident[XS_MAX_RANKS]; /* courier kernel CTAs the device holds at once */
    int dev = 0;
    XS_CU(cudaGetDevice(&dev));
    if (dev < 0 || dev >= XS_MAX_RANKS || !attr_done[dev]) {
        XS_CU(cudaFuncSetAttribute(xs_attn_kernel<false>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_ATTN_SMEM_BYTES));
        XS_CU(cudaFuncSetAttribute(xs_attn_kernel<true>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_ATTN_SMEM_BYTES));
        XS_CU(cudaFuncSetAttribute(xs_attn_courier_kernel<false>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_ATTN_SMEM_BYTES));
        XS_CU(cudaFuncSetAttribute(xs_attn_courier_kernel<true>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_ATTN_SMEM_BYTES));
        int per_sm = 0, sms = 0;
        XS_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, xs_attn_courier_kernel<true>, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES));
        XS_CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        if (dev >= 0 && dev < XS_MAX_RANKS) {
            resident[dev] = per_sm * sms;
            attr_done[dev] = 1;
        }
    }
    if (a->couriers > 0) {
        /* couriers wait on other CTAs: all of them must run at once (a CTA that waited for an
         * SM would leave the couriers to their timeout) */
        const int can = dev >= 0 && dev < XS_MAX_RANKS ? resident[dev] : 0;
        if (grid > can)
            return xs_seterr(XS_EINVAL, "attention: couriers need all %d CTAs resident at once; "
                             "device %d holds %d", grid, dev, can);
    }
    xs_wintab none;
    if (!tab) {
        memset(&none, 0, sizeof none);
        tab = &none;
    }
    if (a->couriers > 0 && a->causal)
        xs_attn_courier_kernel<true><<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab);
    else if (a->couriers > 0)
        xs_attn_courier_kernel<false><<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab);
    else if (a->causal)
        xs_attn_kernel<true><<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab);
    else
        xs_attn_kernel<false><<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab);
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
    xs_attn_ref_kernel<<<n, XS_REF_THREADS, 0, s>>>(
        (const __nv_bfloat16 *)q, (const __nv_bfloat16 *)k, (const __nv_bfloat16 *)v,
        (const __nv_bfloat16 *)o, seq, heads, causal, scale, rows, ref, got);
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
    xs_attn_fill_random_kernel<<<(unsigned)blocks, 256, 0, s>>>((__nv_bfloat16 *)p, n, seed, lo,
                                                                hi - lo);
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
    xs_attn_fill_word_kernel<<<(unsigned)blocks, 256, 0, s>>>((uint4 *)p, n16, word);
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
    xs_attn_compare_kernel<<<(unsigned)blocks, 256, 0, s>>>((const uint4 *)a, (const uint4 *)b,
                                                            n16, bad);
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
    xs_attn_nonfinite_kernel<<<(unsigned)blocks, 256, 0, s>>>((const unsigned short *)p, n,
                                                              count);
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
    xs_attn_flags_kernel<<<tab->nranks, 256, 0, s>>>(*tab, n, value, bad);
    XS_CU_LAUNCH();
    return XS_OK;
}
