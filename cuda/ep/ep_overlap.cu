// SPDX-License-Identifier: Apache-2.0
/*
 * ep_overlap.cu - EP's overlapped unfused pipeline (cuda/ep/ep.h, xs_moe_run_overlapped): the
 * unfused steps (gather, cuBLAS GEMM per expert, SwiGLU, GEMM per expert, scale/permute) per
 * piece of equal tokens on the compute stream, each staged piece's combine copied to its windows
 * by cudaMemcpyAsync on a side stream under the next piece's compute; the GEMMs one cuBLAS call
 * per expert or one grouped call per layer. The pieces come from the host problem
 * (src/ep_overlap.c); docs/EP.md "Overlapped" explains the choice of pieces.
 */
#include <stdlib.h>
#include <string.h>

#include "ep_kernel.cuh"
#include "nvtx_launch.h"

void xs_moe_ov_free(xs_moe *m)
{
    for (int i = 0; i < XS_MOE_OV_CACHE; i++) {
        xs_moe_ov *v = &m->ov[i];
        void *dev[] = {v->d_token, v->d_rank, v->d_weight, v->d_off, v->d_ptr};
        for (size_t k = 0; k < sizeof dev / sizeof dev[0]; k++)
            if (dev[k])
                cudaFree(dev[k]);
        xs_moe_ovplan_destroy(v->plan);
        free(v->grp_first);
        free(v->grp_m);
        memset(v, 0, sizeof *v);
    }
    for (int i = 0; i < m->ov_nev; i++)
        cudaEventDestroy(m->ov_ev[i]);
    m->ov_nev = 0;
    if (m->ov_side) {
        cudaStreamSynchronize(m->ov_side);
        cudaStreamDestroy(m->ov_side);
        m->ov_side = NULL;
    }
}

/* The grouped GEMMs' operands of plan p into v: per piece its experts with rows, their row
 * counts and both layers' pointers (uploaded). The workspaces must exist. */
static xs_status ov_groups(xs_moe *m, const xs_moe_ovplan *p, xs_moe_ov *v)
{
    const int C = p->chunks, E = p->experts, H = m->pb->H, I = m->pb->I;
    int n = 0;
    for (int q = 0; q < C * E; q++)
        n += p->grp_rows[q] > 0;
    v->ngrp = n;
    v->grp_first = (int *)malloc(sizeof(int) * (size_t)(C + 1));
    v->grp_m = (int *)malloc(sizeof(int) * (size_t)(n + 1));
    void **hp = (void **)malloc(sizeof(void *) * (size_t)(6 * n + 1));
    if (!v->grp_first || !v->grp_m || !hp) {
        free(hp);
        return xs_seterr(XS_ENOMEM, "ep overlapped: out of host memory for %d groups", n);
    }
    int g = 0;
    for (int i = 0; i < C; i++) {
        v->grp_first[i] = g;
        for (int e = 0; e < E; e++) {
            const int r = p->grp_rows[(size_t)i * E + e], o = p->grp_off[(size_t)i * E + e];
            if (!r)
                continue;
            v->grp_m[g] = r;
            hp[0 * n + g] = m->xs_sorted + (size_t)o * H;
            hp[1 * n + g] = m->w->w1 + (size_t)e * 2 * I * H;
            hp[2 * n + g] = m->y1 + (size_t)o * 2 * I;
            hp[3 * n + g] = m->h + (size_t)o * I;
            hp[4 * n + g] = m->w->w2 + (size_t)e * H * I;
            hp[5 * n + g] = m->y2 + (size_t)o * H;
            g++;
        }
    }
    v->grp_first[C] = g;
    xs_status st = xs_moe_dalloc((void **)&v->d_ptr, sizeof(void *) * (size_t)(6 * n + 1),
                                 "grouped GEMM pointers");
    if (st == XS_OK) {
        const cudaError_t e = cudaMemcpy(v->d_ptr, hp, sizeof(void *) * (size_t)6 * n,
                                         cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            st = xs_seterr(XS_ECUDA, "ep overlapped: upload of %d groups' pointers: %s", n,
                           cudaGetErrorString(e));
    }
    free(hp);
    return st;
}

/* The uploaded pipeline of `chunks` pieces: found among the cached ones, or planned on the host
 * and its per-row arrays uploaded into the next cache entry. */
static xs_status ov_get(xs_moe *m, int chunks, xs_moe_ov **out)
{
    for (int i = 0; i < XS_MOE_OV_CACHE; i++)
        if (m->ov[i].plan && m->ov[i].plan->chunks == chunks) {
            *out = &m->ov[i];
            return XS_OK;
        }
    xs_moe_ovplan *p = NULL;
    XS_TRY(xs_moe_ovplan_create(m->pb, chunks, &p));
    xs_moe_ov *v = &m->ov[m->ov_next];
    m->ov_next = (m->ov_next + 1) % XS_MOE_OV_CACHE;
    xs_moe_ovplan_destroy(v->plan);
    v->plan = NULL;
    free(v->grp_first);
    free(v->grp_m);
    v->grp_first = v->grp_m = NULL;
    if (v->d_ptr)
        cudaFree(v->d_ptr);
    v->d_ptr = NULL;
    const size_t rows = (size_t)m->pb->rows;
    int *tok = (int *)malloc(sizeof(int) * (rows + 1)), *rk = (int *)malloc(sizeof(int) * (rows + 1));
    float *wt = (float *)malloc(sizeof(float) * (rows + 1));
    long long *off = (long long *)malloc(sizeof(long long) * (rows + 1));
    xs_status st = XS_OK;
    if (!tok || !rk || !wt || !off)
        st = xs_seterr(XS_ENOMEM, "ep overlapped: out of host memory for %zu rows", rows);
    for (size_t q = 0; st == XS_OK && q < rows; q++) {
        const int gr = p->perm[q];
        tok[q] = m->pb->row_token[gr];
        rk[q] = m->pb->row_rank[gr];
        wt[q] = m->pb->row_weight[gr];
        off[q] = m->pb->row_off[gr];
    }
    if (st == XS_OK && !v->d_token)
        st = xs_moe_dalloc((void **)&v->d_token, sizeof(int) * rows, "overlapped row tokens");
    if (st == XS_OK && !v->d_rank)
        st = xs_moe_dalloc((void **)&v->d_rank, sizeof(int) * rows, "overlapped row ranks");
    if (st == XS_OK && !v->d_weight)
        st = xs_moe_dalloc((void **)&v->d_weight, sizeof(float) * rows, "overlapped weights");
    if (st == XS_OK && !v->d_off)
        st = xs_moe_dalloc((void **)&v->d_off, sizeof(long long) * rows, "overlapped offsets");
    if (st == XS_OK && rows) {
        cudaError_t e = cudaMemcpy(v->d_token, tok, sizeof(int) * rows, cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = cudaMemcpy(v->d_rank, rk, sizeof(int) * rows, cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = cudaMemcpy(v->d_weight, wt, sizeof(float) * rows, cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = cudaMemcpy(v->d_off, off, sizeof(long long) * rows, cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            st = xs_seterr(XS_ECUDA, "ep overlapped: upload of %zu rows: %s", rows,
                           cudaGetErrorString(e));
    }
    free(tok), free(rk), free(wt), free(off);
    if (st == XS_OK)
        st = ov_groups(m, p, v);
    if (st != XS_OK) {
        xs_moe_ovplan_destroy(p);
        return st;
    }
    v->plan = p;
    *out = v;
    return XS_OK;
}

xs_status xs_moe_run_overlapped(xs_moe *m, xs_cublas *cb, const xs_wintab *tab, int chunks,
                                int grouped, int copies, cudaStream_t s, float *ms)
{
    if (!cb)
        return xs_seterr(XS_EINVAL, "ep overlapped: no cuBLAS handle");
    if (grouped && !xs_cublas_has_grouped(cb))
        return xs_seterr(XS_EUNSUPPORTED, "ep overlapped: grouped GEMMs need "
                         "cublasGemmGroupedBatchedEx (cuBLAS 12.5 or newer; not under "
                         "XS_CUBLAS_SIMT)");
    XS_TRY(xs_moe_check_table(m, tab));
    XS_TRY(xs_moe_ensure_unfused(m, 0));
    xs_moe_ov *v = NULL;
    XS_TRY(ov_get(m, chunks, &v));
    const xs_moe_ovplan *p = v->plan;
    const int C = p->chunks, E = m->pb->E, H = m->pb->H, I = m->pb->I;
    if (!m->ov_side)
        XS_CU(cudaStreamCreateWithFlags(&m->ov_side, cudaStreamNonBlocking));
    for (; m->ov_nev < XS_MOE_OV_MAX_CHUNKS + 1; m->ov_nev++)
        XS_CU(cudaEventCreateWithFlags(&m->ov_ev[m->ov_nev], cudaEventDisableTiming));
    cudaStream_t side = m->ov_side;
    const int blocks = 4 * m->pb->grid;
    XS_CU(cudaEventRecord(m->ev[0], s));
    for (int i = 0; i < C; i++) {
        const int p0 = p->piece_off[i], n = p->piece_off[i + 1] - p->piece_off[i];
        if (n > 0) {
            XS_NVTX_LAUNCH("xs_moe_gather_kernel",
                           xs_moe_gather_kernel<<<blocks, 256, 0, s>>>(
                               m->x, v->d_token + p0, m->xs_sorted + (size_t)p0 * H, n, H));
            XS_CU_LAUNCH();
            const int g0 = v->grp_first[i], ng = v->grp_first[i + 1] - g0, G = v->ngrp;
            void **dp = v->d_ptr;
            if (grouped)
                XS_TRY(xs_cublas_gemm_bf16_grouped(cb, s, ng, v->grp_m + g0, 2 * I, H,
                                                   (const void *const *)dp + g0,
                                                   (const void *const *)dp + G + g0,
                                                   dp + 2 * G + g0));
            for (int e = 0; !grouped && e < E; e++) {
                const int g = p->grp_rows[(size_t)i * E + e], o = p->grp_off[(size_t)i * E + e];
                if (g)
                    XS_TRY(xs_cublas_gemm_bf16(cb, s, g, 2 * I, H, m->xs_sorted + (size_t)o * H,
                                               m->w->w1 + (size_t)e * 2 * I * H, 1,
                                               m->y1 + (size_t)o * 2 * I, 0));
            }
            XS_NVTX_LAUNCH("xs_moe_swiglu_kernel", xs_moe_swiglu_kernel<xs_bf16>
                           <<<blocks, 256, 0, s>>>(m->y1 + (size_t)p0 * 2 * I,
                                                   m->h + (size_t)p0 * I, n, I));
            XS_CU_LAUNCH();
            if (grouped)
                XS_TRY(xs_cublas_gemm_bf16_grouped(cb, s, ng, v->grp_m + g0, H, I,
                                                   (const void *const *)dp + 3 * G + g0,
                                                   (const void *const *)dp + 4 * G + g0,
                                                   dp + 5 * G + g0));
            for (int e = 0; !grouped && e < E; e++) {
                const int g = p->grp_rows[(size_t)i * E + e], o = p->grp_off[(size_t)i * E + e];
                if (g)
                    XS_TRY(xs_cublas_gemm_bf16(cb, s, g, H, I, m->h + (size_t)o * I,
                                               m->w->w2 + (size_t)e * H * I, 1,
                                               m->y2 + (size_t)o * H, 0));
            }
            XS_NVTX_LAUNCH("xs_moe_scatter_kernel", xs_moe_scatter_kernel<xs_bf16>
                           <<<blocks, 256, 0, s>>>(m->y2 + (size_t)p0 * H, v->d_weight + p0,
                                                   v->d_rank + p0, v->d_off + p0,
                                                   (char *)m->stage, m->pb->window_bytes,
                                                   (float *)NULL, n, H));
            XS_CU_LAUNCH();
        }
        if (!copies)
            continue;
        /* the piece is staged: its windows' byte ranges leave on the side stream */
        XS_CU(cudaEventRecord(m->ov_ev[i], s));
        XS_CU(cudaStreamWaitEvent(side, m->ov_ev[i], 0));
        for (int k = p->seg_off[i]; k < p->seg_off[i + 1]; k++) {
            const int r = p->seg_rank[k];
            XS_CU(cudaMemcpyAsync(tab->data[r] + p->seg_start[k],
                                  (const char *)m->stage + (size_t)r * m->pb->window_bytes +
                                      p->seg_start[k],
                                  p->seg_bytes[k], cudaMemcpyDefault, side));
        }
    }
    if (copies) { /* every copy done before the end is recorded */
        XS_CU(cudaEventRecord(m->ov_ev[XS_MOE_OV_MAX_CHUNKS], side));
        XS_CU(cudaStreamWaitEvent(s, m->ov_ev[XS_MOE_OV_MAX_CHUNKS], 0));
    }
    XS_CU(cudaEventRecord(m->ev[1], s));
    XS_TRY(xs_event_wait(m->ev[1], 120.0, "ep overlapped"));
    float t = 0;
    XS_CU(cudaEventElapsedTime(&t, m->ev[0], m->ev[1]));
    if (ms)
        *ms = t;
    return XS_OK;
}
