// SPDX-License-Identifier: Apache-2.0
/*
 * ep_check.cu - references and destination-side verification of the fused MoE workload
 * (cuda/ep/ep.h, docs/EP.md "Correctness in every run"): the fp32 GPU reference (the unfused
 * path with fp32 GEMM outputs), the fp64 CPU reference for small shapes, and the checks of the
 * combined rows at their destinations and of the intermediate h, row by row.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_kernel.cuh"
#include "nvtx_launch.h"

static float xs_bf16_to_f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t xs_f_to_bf16(float f) /* round to nearest even; NaN stays NaN */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* The reference's h into m->ref_h: from host bf16 bits (hb) or, hb = NULL, from the device h
 * that the reference path just wrote (stream 0). */
static xs_status xs_moe_keep_ref_h(xs_moe *m, const uint16_t *hb)
{
    const size_t bytes = (size_t)m->pb->rows * m->pb->I * 2;
    if (!m->ref_h)
        XS_TRY(xs_moe_dalloc((void **)&m->ref_h, bytes, "reference h"));
    if (hb)
        XS_CU(cudaMemcpy(m->ref_h, hb, bytes, cudaMemcpyHostToDevice));
    else
        XS_CU(cudaMemcpyAsync(m->ref_h, m->h, bytes, cudaMemcpyDeviceToDevice, 0));
    m->have_ref_h = 1;
    return XS_OK;
}

/* The host reference rows m->ref onto the device (m->d_ref), what xs_moe_verify reads. */
static xs_status xs_moe_upload_ref(xs_moe *m)
{
    const size_t bytes = (size_t)m->pb->rows * m->pb->H * 4;
    if (!m->d_ref)
        XS_TRY(xs_moe_dalloc((void **)&m->d_ref, bytes ? bytes : 16, "device reference rows"));
    if (bytes)
        XS_CU(cudaMemcpy(m->d_ref, m->ref, bytes, cudaMemcpyHostToDevice));
    return XS_OK;
}

xs_status xs_moe_reference_gpu(xs_moe *m, xs_cublas *cb)
{
    /* the scatter writes the reference rows straight into the device copy that the checks
     * read: an earlier one is reused as the workspace */
    if (m->d_ref && !m->reff) {
        m->reff = m->d_ref;
        m->d_ref = NULL;
    }
    m->have_ref = 0; /* until both copies hold the new rows */
    XS_TRY(xs_moe_ensure_unfused(m, 1));
    const int blocks = 4 * m->pb->grid;
    cudaStream_t s = 0;
    XS_NVTX_LAUNCH("xs_moe_gather_kernel",
                   xs_moe_gather_kernel<<<blocks, 256, 0, s>>>(m->x, m->d_row_token, m->xs_sorted,
                                                               m->pb->rows, m->pb->H));
    XS_CU_LAUNCH();
    XS_TRY(xs_moe_gemms(m, cb, s, 1, 1));
    XS_NVTX_LAUNCH("xs_moe_swiglu_kernel", xs_moe_swiglu_kernel<float>
                   <<<blocks, 256, 0, s>>>(m->y1f, m->h, m->pb->rows, m->pb->I));
    XS_CU_LAUNCH();
    XS_TRY(xs_moe_keep_ref_h(m, NULL));
    XS_TRY(xs_moe_gemms(m, cb, s, 2, 1));
    XS_NVTX_LAUNCH("xs_moe_scatter_kernel", xs_moe_scatter_kernel<float>
                   <<<blocks, 256, 0, s>>>(m->y2f, m->d_row_weight, m->d_row_rank, m->d_row_off,
                                           (char *)NULL, 0, m->reff, m->pb->rows, m->pb->H));
    XS_CU_LAUNCH();
    XS_CU(cudaDeviceSynchronize());
    if (!m->ref && !(m->ref = (float *)malloc(sizeof(float) * (size_t)m->pb->rows * m->pb->H)))
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for %d reference rows", m->pb->rows);
    XS_CU(cudaMemcpy(m->ref, m->reff, (size_t)m->pb->rows * m->pb->H * 4, cudaMemcpyDeviceToHost));
    /* the rows stay on the device for the checks; the other fp32 temporaries are large: give
     * them back */
    m->d_ref = m->reff;
    m->reff = NULL;
    cudaFree(m->y1f);
    cudaFree(m->y2f);
    m->y1f = m->y2f = NULL;
    m->have_ref = 1;
    return XS_OK;
}

xs_status xs_moe_reference_cpu(xs_moe *m)
{
    const int H = m->pb->H, I = m->pb->I;
    if ((double)m->pb->rows * H * 3.0 * I > 8589934592.0)
        return xs_seterr(XS_EINVAL, "moe: %d rows x H=%d x I=%d is too large for the CPU "
                         "reference; use the GPU reference", m->pb->rows, H, I);
    m->have_ref = 0; /* until both copies hold the new rows */
    size_t nx = (size_t)m->pb->T * H, n1 = (size_t)m->pb->E * 2 * I * H,
           n2 = (size_t)m->pb->E * H * I;
    uint16_t *xb = (uint16_t *)malloc(nx * 2), *w1 = (uint16_t *)malloc(n1 * 2),
             *w2 = (uint16_t *)malloc(n2 * 2);
    double *y1 = (double *)malloc(sizeof(double) * 2 * (size_t)I);
    float *hr = (float *)malloc(sizeof(float) * (size_t)I);
    uint16_t *hb = (uint16_t *)malloc(2 * (size_t)m->pb->rows * I + 2); /* h of every row, bf16 */
    if (!m->ref)
        m->ref = (float *)malloc(sizeof(float) * (size_t)m->pb->rows * H);
    if (!xb || !w1 || !w2 || !y1 || !hr || !hb || !m->ref) {
        free(xb); free(w1); free(w2); free(y1); free(hr); free(hb);
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for the CPU reference");
    }
    cudaError_t e = cudaMemcpy(xb, m->x, nx * 2, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(w1, m->w->w1, n1 * 2, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(w2, m->w->w2, n2 * 2, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        free(xb); free(w1); free(w2); free(y1); free(hr); free(hb);
        return xs_seterr(XS_ECUDA, "moe: copying inputs for the CPU reference: %s",
                         cudaGetErrorString(e));
    }
    for (int gr = 0; gr < m->pb->rows; gr++) {
        const int ex = m->pb->row_expert[gr];
        const uint16_t *xr = xb + (size_t)m->pb->row_token[gr] * H;
        for (int p = 0; p < 2 * I; p++) {
            const uint16_t *wr = w1 + ((size_t)ex * 2 * I + p) * H;
            double s = 0;
            for (int c = 0; c < H; c++)
                s += (double)xs_bf16_to_f(xr[c]) * (double)xs_bf16_to_f(wr[c]);
            y1[p] = s;
        }
        for (int j = 0; j < I; j++) {
            int pg = 32 * (j / 16) + (j % 16);
            double g = y1[pg], u = y1[pg + 16];
            /* h is bf16 in every path: round it the same way */
            hb[(size_t)gr * I + j] = xs_f_to_bf16((float)(g / (1.0 + exp(-g)) * u));
            hr[j] = xs_bf16_to_f(hb[(size_t)gr * I + j]);
        }
        for (int o = 0; o < H; o++) {
            const uint16_t *wr = w2 + ((size_t)ex * H + o) * I;
            double s = 0;
            for (int j = 0; j < I; j++)
                s += (double)hr[j] * (double)xs_bf16_to_f(wr[j]);
            m->ref[(size_t)gr * H + o] = (float)(s * m->pb->row_weight[gr]);
        }
    }
    free(xb); free(w1); free(w2); free(y1); free(hr);
    xs_status st = xs_moe_keep_ref_h(m, hb);
    free(hb);
    XS_TRY(st);
    XS_TRY(xs_moe_upload_ref(m));
    m->have_ref = 1;
    return XS_OK;
}

/* ---- verification ---------------------------------------------------------------------------- */

/* Both checks of the combined rows score a row the same way: se and sr, the sums of (got - ref)^2
 * and ref^2 over its finite values (fp64), nf its non-finite values, rel = sqrt(se / max(sr,
 * 1e-30)); the row is bad when nf > 0 or rel > XS_MOE_TOL_ROW. The worst row is the one of
 * highest score (infinite with non-finite values, else rel), the lowest such row on a tie. */

/* A share of the rows: its sums and counts and its worst row (-1: none yet). */
typedef struct {
    double se, sr, max_rel, worst_score;
    long long bad, nonfinite, worst;
} xs_vpart;

/* 1 when row ra of score sa is worse than row rb of score sb (rb < 0: no row yet) */
__host__ __device__ static inline int xs_vworse(double sa, long long ra, double sb, long long rb)
{
    if (ra < 0)
        return 0;
    return rb < 0 || sa > sb || (sa == sb && ra < rb);
}

__host__ __device__ static inline void xs_vpart_init(xs_vpart *p)
{
    p->se = p->sr = p->max_rel = p->worst_score = 0;
    p->bad = p->nonfinite = 0;
    p->worst = -1;
}

/* One row's result into p. */
__host__ __device__ static inline void xs_vpart_row(xs_vpart *p, long long gr, double se,
                                                    double sr, long long nf)
{
    const double rel = sqrt(se / (sr > 1e-30 ? sr : 1e-30));
    p->bad += nf || rel > XS_MOE_TOL_ROW;
    if (rel > p->max_rel)
        p->max_rel = rel;
    const double score = nf ? INFINITY : rel;
    if (xs_vworse(score, gr, p->worst_score, p->worst)) {
        p->worst = gr;
        p->worst_score = score;
    }
    p->nonfinite += nf;
    p->se += se;
    p->sr += sr;
}

/* Another share q into p. */
__host__ __device__ static inline void xs_vpart_add(xs_vpart *p, const xs_vpart *q)
{
    p->se += q->se;
    p->sr += q->sr;
    p->bad += q->bad;
    p->nonfinite += q->nonfinite;
    if (q->max_rel > p->max_rel)
        p->max_rel = q->max_rel;
    if (xs_vworse(q->worst_score, q->worst, p->worst_score, p->worst)) {
        p->worst = q->worst;
        p->worst_score = q->worst_score;
    }
}

/* out from the totals of every row */
static void xs_vpart_finish(const xs_moe *m, const xs_vpart *t, xs_moe_check *out)
{
    out->rows = m->pb->rows;
    out->bad_rows = t->bad;
    out->nonfinite = t->nonfinite;
    out->max_row_rel = t->max_rel;
    out->worst_row = t->worst;
    out->worst_expert = t->worst >= 0 ? m->pb->row_expert[t->worst] : -1;
    out->rel_frob = sqrt(t->se / (t->sr > 1e-30 ? t->sr : 1e-30));
    out->ok = out->bad_rows == 0 && out->nonfinite == 0 && out->rel_frob <= XS_MOE_TOL_FROB;
}

/* The checks' common start: out cleared (no row checked), a reference and the table. */
static xs_status xs_moe_verify_begin(xs_moe *m, const xs_wintab *tab, xs_moe_check *out)
{
    memset(out, 0, sizeof *out);
    out->worst_row = -1;
    out->worst_expert = -1;
    if (!m->have_ref)
        return xs_seterr(XS_EINVAL, "moe: verify needs a reference (xs_moe_reference_*)");
    return xs_moe_check_table(m, tab);
}

/* -- on the GPU -- */

#define XS_VWARPS 8             /* warps (rows in flight) per block */
#define XS_VERIFY_TIMEOUT_S 120 /* the host's bound on the check (it has no waits of its own) */

/* the windows' payloads, device-usable pointers (xs_wintab.data) */
typedef struct {
    const char *p[XS_MAX_RANKS];
} xs_vbase;

/* One warp per row (grid-stride): its H bf16 values read where they landed (window row_rank[gr],
 * byte row_off[gr]; ld.global.cv: fetched again, never a cached copy) against the reference row
 * ref[gr], 8 values per lane and step; the lanes' sums meet by butterfly, every lane holds the
 * row's totals and lane 0 keeps the warp's share. A block's warps meet in shared memory and its
 * share goes to part[blockIdx.x]. H is a multiple of 8 and every row 16-byte aligned
 * (xs_moe_weights_create, xs_moe_check_table). No waits. */
static __global__ void __launch_bounds__(32 * XS_VWARPS)
    xs_moe_verify_kernel(const __grid_constant__ xs_vbase win, const int *__restrict__ row_rank,
                         const long long *__restrict__ row_off, const float *__restrict__ ref,
                         int rows, int H, xs_vpart *__restrict__ part)
{
    __shared__ xs_vpart warp_part[XS_VWARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, units = H / 8;
    xs_vpart mine;
    xs_vpart_init(&mine);
    for (long long gr = (long long)blockIdx.x * XS_VWARPS + warp; gr < rows;
         gr += (long long)gridDim.x * XS_VWARPS) {
        const uint4 *got = (const uint4 *)(win.p[row_rank[gr]] + row_off[gr]);
        const float4 *want = (const float4 *)(ref + gr * H);
        double se = 0, sr = 0;
        int nf = 0;
        for (int u = lane; u < units; u += 32) {
            const uint4 g = __ldcv(got + u);
            const float4 a = want[2 * u], b = want[2 * u + 1];
            const unsigned int gw[4] = {g.x, g.y, g.z, g.w};
            const float rv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
            for (int k = 0; k < 8; k++) {
                /* value 2j in the low half of word j (little-endian) */
                const unsigned int bits = (gw[k >> 1] >> (16 * (k & 1))) & 0xffffu;
                if ((bits & 0x7f80u) == 0x7f80u) { /* Inf or NaN */
                    nf++;
                    continue;
                }
                const double d = (double)__uint_as_float(bits << 16) - (double)rv[k];
                se += d * d;
                sr += (double)rv[k] * rv[k];
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            se += __shfl_xor_sync(0xffffffffu, se, o);
            sr += __shfl_xor_sync(0xffffffffu, sr, o);
            nf += __shfl_xor_sync(0xffffffffu, nf, o);
        }
        xs_vpart_row(&mine, gr, se, sr, nf);
    }
    if (lane == 0)
        warp_part[warp] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        xs_vpart t = warp_part[0];
        for (int w = 1; w < XS_VWARPS; w++)
            xs_vpart_add(&t, &warp_part[w]);
        part[blockIdx.x] = t;
    }
}

xs_status xs_moe_verify(xs_moe *m, const xs_wintab *tab, xs_moe_check *out)
{
    XS_TRY(xs_moe_verify_begin(m, tab, out));
    const int rows = m->pb->rows;
    xs_vpart total;
    xs_vpart_init(&total);
    if (rows <= 0) {
        xs_vpart_finish(m, &total, out);
        return XS_OK;
    }
    if (!m->d_ref) /* a reference whose device copy was lost: the host rows again */
        XS_TRY(xs_moe_upload_ref(m));
    const int cap = 4 * (m->pb->grid > 0 ? m->pb->grid : 1);
    if (!m->d_vpart)
        XS_TRY(xs_moe_dalloc(&m->d_vpart, sizeof(xs_vpart) * (size_t)cap, "check results"));
    const int need = (rows + XS_VWARPS - 1) / XS_VWARPS;
    const int blocks = need < cap ? need : cap;
    xs_vbase win;
    memset(&win, 0, sizeof win);
    for (int r = 0; r < m->pb->N; r++)
        win.p[r] = tab->data[r];
    xs_vpart *part = (xs_vpart *)malloc(sizeof(xs_vpart) * (size_t)blocks);
    if (!part)
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for the check's results");
    cudaEvent_t done = NULL;
    xs_status st = XS_OK;
    cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    /* stream 0, as the host check's cudaMemcpy: after the run's work on the blocking streams */
    if (e == cudaSuccess) {
        XS_NVTX_LAUNCH("xs_moe_verify_kernel",
                       xs_moe_verify_kernel<<<blocks, 32 * XS_VWARPS, 0, 0>>>(
                           win, m->d_row_rank, m->d_row_off, m->d_ref, rows, m->pb->H,
                           (xs_vpart *)m->d_vpart));
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaEventRecord(done, 0);
    if (e != cudaSuccess)
        st = xs_seterr(XS_ECUDA, "moe: the check on the GPU: %s", cudaGetErrorString(e));
    if (st == XS_OK)
        st = xs_event_wait(done, XS_VERIFY_TIMEOUT_S, "moe: the check of the combined rows");
    if (st == XS_OK) {
        e = cudaMemcpy(part, m->d_vpart, sizeof(xs_vpart) * (size_t)blocks,
                       cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            st = xs_seterr(XS_ECUDA, "moe: reading the check's results: %s",
                           cudaGetErrorString(e));
    }
    if (done)
        cudaEventDestroy(done);
    if (st == XS_OK) {
        for (int b = 0; b < blocks; b++)
            xs_vpart_add(&total, &part[b]);
        xs_vpart_finish(m, &total, out);
    }
    free(part);
    return st;
}

/* -- on the host -- */

typedef struct {
    const xs_moe *m;
    unsigned char *const *win;
    int r0, r1;
    xs_vpart p;
} xs_vjob;

static void *xs_moe_verify_worker(void *arg)
{
    xs_vjob *j = (xs_vjob *)arg;
    const xs_moe *m = j->m;
    const int H = m->pb->H;
    for (int gr = j->r0; gr < j->r1; gr++) {
        const uint16_t *got = (const uint16_t *)(j->win[m->pb->row_rank[gr]] + m->pb->row_off[gr]);
        const float *ref = m->ref + (size_t)gr * H;
        double se = 0, sr = 0;
        long nf = 0;
        for (int c = 0; c < H; c++) {
            float g = xs_bf16_to_f(got[c]);
            if (!isfinite(g)) {
                nf++;
                continue;
            }
            double d = (double)g - (double)ref[c];
            se += d * d;
            sr += (double)ref[c] * ref[c];
        }
        xs_vpart_row(&j->p, gr, se, sr, nf);
    }
    return NULL;
}

xs_status xs_moe_verify_host(xs_moe *m, const xs_wintab *tab, xs_moe_check *out)
{
    XS_TRY(xs_moe_verify_begin(m, tab, out));
    unsigned char *win[XS_MAX_RANKS];
    memset(win, 0, sizeof win);
    xs_status st = XS_OK;
    /* destination side: each rank's window as its owner sees it (host memory read by the CPU
     * through the runtime's copy; device memory copied back) */
    for (int r = 0; r < m->pb->N && st == XS_OK; r++) {
        win[r] = (unsigned char *)malloc(m->pb->rank_used[r] ? m->pb->rank_used[r] : 16);
        if (!win[r]) {
            st = xs_seterr(XS_ENOMEM, "moe: out of host memory for window %d", r);
            break;
        }
        if (m->pb->rank_used[r]) {
            cudaError_t e =
                cudaMemcpy(win[r], tab->data[r], m->pb->rank_used[r], cudaMemcpyDefault);
            if (e != cudaSuccess)
                st = xs_seterr(XS_ECUDA, "moe: reading window %d: %s", r, cudaGetErrorString(e));
        }
    }
    if (st == XS_OK) {
        enum { NJ = 8 };
        xs_vjob jobs[NJ];
        pthread_t th[NJ];
        int started[NJ] = {0};
        for (int i = 0; i < NJ; i++) {
            jobs[i].m = m;
            jobs[i].win = win;
            xs_vpart_init(&jobs[i].p);
            jobs[i].r0 = (int)((long long)m->pb->rows * i / NJ);
            jobs[i].r1 = (int)((long long)m->pb->rows * (i + 1) / NJ);
            started[i] = pthread_create(&th[i], NULL, xs_moe_verify_worker, &jobs[i]) == 0;
            if (!started[i])
                xs_moe_verify_worker(&jobs[i]);
        }
        xs_vpart total;
        xs_vpart_init(&total);
        for (int i = 0; i < NJ; i++) {
            if (started[i])
                pthread_join(th[i], NULL);
            xs_vpart_add(&total, &jobs[i].p);
        }
        xs_vpart_finish(m, &total, out);
    }
    for (int r = 0; r < m->pb->N; r++)
        free(win[r]);
    return st;
}

xs_status xs_moe_verify_h(xs_moe *m, int expert, xs_moe_check *out)
{
    memset(out, 0, sizeof *out);
    out->worst_row = -1;
    out->worst_expert = -1;
    if (!m->have_ref_h)
        return xs_seterr(XS_EINVAL, "moe: verify_h needs a reference (xs_moe_reference_*)");
    if (expert >= m->pb->E)
        return xs_seterr(XS_EINVAL, "moe: verify_h: expert %d of %d", expert, m->pb->E);
    const int I = m->pb->I;
    const int r0 = expert < 0 ? 0 : m->pb->expert_off[expert];
    const int r1 = expert < 0 ? m->pb->rows : r0 + m->pb->expert_rows[expert];
    const size_t n = (size_t)(r1 - r0) * I;
    uint16_t *got = (uint16_t *)malloc(2 * n + 2), *want = (uint16_t *)malloc(2 * n + 2);
    if (!got || !want) {
        free(got);
        free(want);
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for %d rows of h", r1 - r0);
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess && n)
        e = cudaMemcpy(got, m->h + (size_t)r0 * I, 2 * n, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && n)
        e = cudaMemcpy(want, m->ref_h + (size_t)r0 * I, 2 * n, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        free(got);
        free(want);
        return xs_seterr(XS_ECUDA, "moe: reading h: %s", cudaGetErrorString(e));
    }
    double se_all = 0, sr_all = 0, worst_score = 0;
    for (int gr = r0; gr < r1; gr++) {
        const uint16_t *g = got + (size_t)(gr - r0) * I, *w = want + (size_t)(gr - r0) * I;
        double se = 0, sr = 0;
        long nf = 0;
        for (int j = 0; j < I; j++) {
            const float a = xs_bf16_to_f(g[j]), b = xs_bf16_to_f(w[j]);
            if (!isfinite(a)) {
                nf++;
                continue;
            }
            se += ((double)a - b) * ((double)a - b);
            sr += (double)b * b;
        }
        const double rel = sqrt(se / (sr > 1e-30 ? sr : 1e-30));
        out->bad_rows += nf || rel > XS_MOE_TOL_ROW;
        if (rel > out->max_row_rel)
            out->max_row_rel = rel;
        const double score = nf ? INFINITY : rel;
        if (out->worst_row < 0 || score > worst_score) {
            out->worst_row = gr;
            worst_score = score;
        }
        out->nonfinite += nf;
        se_all += se;
        sr_all += sr;
    }
    free(got);
    free(want);
    out->rows = r1 - r0;
    out->worst_expert = out->worst_row >= 0 ? m->pb->row_expert[out->worst_row] : -1;
    out->rel_frob = sqrt(se_all / (sr_all > 1e-30 ? sr_all : 1e-30));
    out->ok = out->bad_rows == 0 && out->nonfinite == 0 && out->rel_frob <= XS_MOE_TOL_FROB;
    return XS_OK;
}

xs_status xs_moe_load_reference_h(xs_moe *m)
{
    if (!m->have_ref_h)
        return xs_seterr(XS_EINVAL, "moe: no reference h (xs_moe_reference_*)");
    XS_CU(cudaMemcpy(m->h, m->ref_h, (size_t)m->pb->rows * m->pb->I * 2, cudaMemcpyDeviceToDevice));
    return XS_OK;
}
