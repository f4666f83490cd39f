// SPDX-License-Identifier: Apache-2.0
/*
 * ep_runtime.cu - the host side of the fused MoE workload on the GPU (cuda/ep/ep.h): weights,
 * the problem's device copies, task lists uploaded from the host problem (src/ep_tasks.c), the
 * local control's windows, the fused kernel's launches and their traces, and the unfused cuBLAS
 * baseline. docs/EP.md explains the kernel and its schedules.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_kernel.cuh"
#include "nvtx_launch.h"

/* cudaMalloc with a one-line error naming the buffer and its size */
xs_status xs_moe_dalloc(void **p, size_t bytes, const char *what)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return xs_seterr(XS_ECUDA, "moe: cannot allocate %.1f MB of device memory for %s: %s",
                         (double)bytes / 1e6, what, cudaGetErrorString(e));
    }
    return XS_OK;
}

/* ---- weights -------------------------------------------------------------------------------- */


xs_status xs_moe_weights_create(const xs_moe_config *c, uint32_t seed, xs_moe_weights **out)
{
    *out = NULL;
    XS_TRY(xs_moe_config_check(c));
    xs_moe_weights *w = (xs_moe_weights *)calloc(1, sizeof *w);
    if (!w)
        return xs_seterr(XS_ENOMEM, "moe: out of host memory");
    w->cfg = *c;
    size_t n1 = (size_t)c->experts * 2 * c->inter * c->hidden;
    size_t n2 = (size_t)c->experts * c->hidden * c->inter;
    xs_status st = xs_moe_dalloc((void **)&w->w1, n1 * 2, "Linear-1 weights");
    if (st == XS_OK)
        st = xs_moe_dalloc((void **)&w->w2, n2 * 2, "Linear-2 weights");
    if (st != XS_OK) {
        xs_moe_weights_destroy(w);
        return st;
    }
    /* uniform(-a, a) with a = 3 / sqrt(fan_in): unit-variance outputs for unit-variance inputs */
    XS_NVTX_LAUNCH("xs_moe_fill_kernel",
                   xs_moe_fill_kernel<<<2048, 256>>>(w->w1, n1, seed * 2654435761u + 1u,
                                                     3.0f / sqrtf((float)c->hidden)));
    XS_NVTX_LAUNCH("xs_moe_fill_kernel",
                   xs_moe_fill_kernel<<<2048, 256>>>(w->w2, n2, seed * 2654435761u + 2u,
                                                     3.0f / sqrtf((float)c->inter)));
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        xs_moe_weights_destroy(w);
        return xs_seterr(XS_ECUDA, "moe: filling weights: %s", cudaGetErrorString(e));
    }
    *out = w;
    return XS_OK;
}

void xs_moe_weights_destroy(xs_moe_weights *w)
{
    if (!w)
        return;
    cudaFree(w->w1);
    cudaFree(w->w2);
    free(w);
}

/* ---- the problem on the device ------------------------------------------------------------- */

static xs_status xs_moe_upload(void *dst, const void *src, size_t bytes)
{
    XS_CU(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return XS_OK;
}

/* The device copies of m's host problem, its trace buffers and its tokens (filled from the
 * seed). On failure m is left for xs_moe_destroy. */
static xs_status xs_moe_device_init(xs_moe *m, const xs_moe_opts *o)
{
    const xs_moe_problem *pb = m->pb;
    const size_t rows = (size_t)pb->rows;
    const size_t cap = (size_t)pb->trace_cap + 1;
    XS_TRY(xs_moe_dalloc((void **)&m->x, (size_t)pb->T * pb->H * 2, "tokens"));
    XS_TRY(xs_moe_dalloc((void **)&m->h, rows * pb->I * 2, "SwiGLU output"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_row_token, rows * 4, "row map"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_row_rank, rows * 4, "row ranks"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_row_weight, rows * 4, "routing weights"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_row_off, rows * 8, "row slots"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_rb, sizeof(int4) * (size_t)(pb->nrb + 1), "row blocks"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_queue, 32, "task counters"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_done1, 8 * (size_t)(pb->nrb + 1), "row-block counters"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_status, sizeof(xs_devstatus), "device status"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_pace, 16, "combine pacer"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_rank_base, sizeof(char *) * XS_MAX_RANKS, "rank table"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_rank_host, XS_MAX_RANKS, "rank table"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_trace, 8 * XS_MOE_TRACE_WORDS * cap, "trace"));
    XS_TRY(xs_moe_dalloc((void **)&m->d_anchors, 8 * 4 * (size_t)pb->grid, "time anchors"));
    XS_TRY(xs_moe_upload(m->d_row_token, pb->row_token, rows * 4));
    XS_TRY(xs_moe_upload(m->d_row_rank, pb->row_rank, rows * 4));
    XS_TRY(xs_moe_upload(m->d_row_weight, pb->row_weight, rows * 4));
    XS_TRY(xs_moe_upload(m->d_row_off, pb->row_off, rows * 8));
    if (pb->nrb) /* xs_moe_rb has int4's layout */
        XS_TRY(xs_moe_upload(m->d_rb, pb->rb, sizeof(int4) * (size_t)pb->nrb));
    m->h_trace = (unsigned long long *)malloc(8 * XS_MOE_TRACE_WORDS * cap);
    m->h_anchors = (unsigned long long *)malloc(8 * 4 * (size_t)pb->grid);
    m->tiles = (xs_moe_tile *)calloc(cap, sizeof(xs_moe_tile));
    if (!m->h_trace || !m->h_anchors || !m->tiles)
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for traces");
    for (int i = 0; i < 6; i++)
        XS_CU(cudaEventCreate(&m->ev[i]));
    XS_NVTX_LAUNCH(
        "xs_moe_fill_kernel",
        xs_moe_fill_kernel<<<1024, 256>>>(m->x, (size_t)pb->T * pb->H, o->seed * 7919u + 3u, 1.0f));
    XS_CU_LAUNCH();
    XS_CU(cudaDeviceSynchronize());
    return XS_OK;
}

xs_status xs_moe_create(const xs_moe_weights *w, const xs_moe_opts *o, xs_moe **out)
{
    *out = NULL;
    if (!w)
        return xs_seterr(XS_EINVAL, "moe: no weights");
    int dev = 0, sms = 0;
    XS_CU(cudaGetDevice(&dev));
    XS_CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    xs_moe *m = (xs_moe *)calloc(1, sizeof *m);
    if (!m)
        return xs_seterr(XS_ENOMEM, "moe: out of host memory");
    m->w = w;
    xs_status st = xs_moe_problem_create(&w->cfg, o, sms, &m->pb);
    if (st == XS_OK)
        st = xs_moe_device_init(m, o);
    if (st != XS_OK) {
        xs_moe_destroy(m);
        return st;
    }
    *out = m;
    return XS_OK;
}

void xs_moe_destroy(xs_moe *m)
{
    if (!m)
        return;
    xs_moe_ov_free(m);
    xs_moe_problem_destroy(m->pb); /* the slots' host lists with it */
    free(m->h_trace);
    free(m->h_anchors);
    free(m->tiles);
    free(m->ref);
    free(m->h_clist);
    free(m->h_ctrace);
    free(m->copies);
    free(m->h_crow);
    free(m->h_cdst);
    free(m->h_ccnt);
    for (int i = 0; i < XS_MOE_SLOTS; i++)
        if (m->slots[i].dev)
            cudaFree(m->slots[i].dev);
    free(m->sub.host);
    if (m->sub.dev)
        cudaFree(m->sub.dev);
    for (int i = 0; i < 6; i++)
        if (m->ev[i])
            cudaEventDestroy(m->ev[i]);
    void *dev[] = {m->x, m->h, m->d_row_token, m->d_row_rank, m->d_row_weight, m->d_row_off,
                   m->d_rb, m->d_queue, m->d_done1, m->d_status, m->d_pace, m->d_rank_base,
                   m->d_rank_host, m->d_trace, m->d_anchors, m->local_win, m->xs_sorted, m->y1,
                   m->y2, m->stage, m->y1f, m->y2f, m->reff, m->flush, m->d_kargs, m->ref_h,
                   m->d_cstage, m->d_ready, m->d_clist, m->d_ctrace, m->d_crow, m->d_cdst,
                   m->d_ccnt, m->d_ref, m->d_vpart};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i])
            cudaFree(dev[i]);
    free(m);
}

xs_moe_problem *xs_moe_host(xs_moe *m) { return m->pb; }

void xs_moe_get_info(const xs_moe *m, xs_moe_info *info) { xs_moe_problem_info(m->pb, info); }

xs_status xs_moe_set_plan(xs_moe *m, int slot, const xs_moe_plan *p)
{
    XS_TRY(xs_moe_problem_set_plan(m->pb, slot, p));
    const xs_moe_tasks *ht = &m->pb->slots[slot];
    xs_moe_tasklist *tl = &m->slots[slot];
    if (!tl->dev)
        XS_TRY(xs_moe_dalloc((void **)&tl->dev, sizeof(int2) * (size_t)(m->pb->trace_cap + 1),
                             "task list"));
    tl->host = ht->tasks;
    tl->n = ht->n;
    tl->plan = ht->plan;
    if (tl->n) /* xs_moe_task has int2's layout */
        XS_CU(cudaMemcpy(tl->dev, tl->host, sizeof(int2) * (size_t)tl->n,
                         cudaMemcpyHostToDevice));
    return XS_OK;
}

/* ---- windows ------------------------------------------------------------------------------ */

xs_status xs_moe_local_table(xs_moe *m, xs_wintab *tab)
{
    if (!m->local_win)
        XS_TRY(xs_moe_dalloc((void **)&m->local_win, m->pb->window_bytes * (size_t)m->pb->N,
                         "local-control windows"));
    memset(tab, 0, sizeof *tab);
    tab->nranks = m->pb->N;
    tab->rank = 0;
    tab->bytes = m->pb->window_bytes;
    tab->nflags = 0;
    for (int r = 0; r < m->pb->N; r++) {
        tab->data[r] = m->local_win + (size_t)r * m->pb->window_bytes;
        tab->host_mem[r] = 0;
    }
    return XS_OK;
}

xs_status xs_moe_check_table(const xs_moe *m, const xs_wintab *tab)
{
    if (!tab || tab->nranks < m->pb->N)
        return xs_seterr(XS_EINVAL, "moe: window table has %d ranks, the problem needs %d",
                         tab ? tab->nranks : 0, m->pb->N);
    if (tab->bytes < m->pb->window_bytes)
        return xs_seterr(XS_EINVAL, "moe: windows of %zu bytes, the combine needs %zu",
                         tab->bytes, m->pb->window_bytes);
    for (int r = 0; r < m->pb->N; r++)
        if (!tab->data[r] || ((uintptr_t)tab->data[r] & 15))
            return xs_seterr(XS_EINVAL, "moe: window of rank %d is missing or not 16-byte "
                             "aligned", r);
    return XS_OK;
}

xs_status xs_moe_poison(xs_moe *m, const xs_wintab *tab, cudaStream_t s)
{
    XS_TRY(xs_moe_check_table(m, tab));
    for (int r = 0; r < m->pb->N; r++) {
        XS_NVTX_LAUNCH("xs_moe_poison_kernel",
                       xs_moe_poison_kernel<<<264, 256, 0, s>>>((uint4 *)tab->data[r],
                                                                m->pb->window_bytes / 16));
        XS_CU_LAUNCH();
    }
    /* the couriers' staging buffer too: a copy of a row that was never staged then arrives as
     * NaN, instead of as the previous run's identical bytes */
    if (m->d_cstage) {
        XS_NVTX_LAUNCH("xs_moe_poison_kernel",
                       xs_moe_poison_kernel<<<264, 256, 0, s>>>(
                           (uint4 *)m->d_cstage, (size_t)m->pb->rows * m->pb->H * 2 / 16));
        XS_CU_LAUNCH();
    }
    /* the unfused paths' workspaces (but h, which a Linear-2-only test run reads as loaded):
     * a piece of the overlapped pipeline (or a step of unfused) that never ran then leaves NaN
     * in the staged rows, instead of an earlier run's identical bytes */
    const size_t rows = (size_t)m->pb->rows;
    const struct { void *p; size_t bytes; } ws[] = {
        {m->xs_sorted, rows * m->pb->H * 2}, {m->y1, rows * 2 * m->pb->I * 2},
        {m->y2, rows * m->pb->H * 2}, {m->stage, m->pb->window_bytes * (size_t)m->pb->N}};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        if (ws[i].p && ws[i].bytes >= 16) {
            XS_NVTX_LAUNCH("xs_moe_poison_kernel",
                           xs_moe_poison_kernel<<<264, 256, 0, s>>>((uint4 *)ws[i].p,
                                                                    ws[i].bytes / 16));
            XS_CU_LAUNCH();
        }
    return XS_OK;
}

xs_status xs_moe_flush_l2(xs_moe *m, cudaStream_t s)
{
    if (!m->flush) {
        int dev = 0, l2 = 0;
        XS_CU(cudaGetDevice(&dev));
        XS_CU(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
        m->flush_bytes = (size_t)(l2 > 0 ? l2 : (64 << 20)) * 2;
        XS_TRY(xs_moe_dalloc(&m->flush, m->flush_bytes, "L2 flush buffer"));
    }
    XS_CU(cudaMemsetAsync(m->flush, (m->flush_count++ & 0x7f) + 1, m->flush_bytes, s));
    return XS_OK;
}

static xs_status xs_moe_upload_table(xs_moe *m, const xs_wintab *tab, cudaStream_t s)
{
    /* static: cudaMemcpyAsync from pageable memory copies before returning */
    char *base[XS_MAX_RANKS];
    unsigned char host[XS_MAX_RANKS];
    for (int r = 0; r < XS_MAX_RANKS; r++) {
        base[r] = r < m->pb->N ? tab->data[r] : NULL;
        host[r] = r < m->pb->N ? tab->host_mem[r] : 0;
    }
    XS_CU(cudaMemcpyAsync(m->d_rank_base, base, sizeof base, cudaMemcpyHostToDevice, s));
    XS_CU(cudaMemcpyAsync(m->d_rank_host, host, sizeof host, cudaMemcpyHostToDevice, s));
    XS_CU(cudaStreamSynchronize(s));
    return XS_OK;
}

/* ---- running the fused kernel ---------------------------------------------------------------- */

static void xs_moe_decode_trace(xs_moe *m, const xs_moe_tasklist *tl)
{
    /* clock64 -> ns on the global time base, per CTA: ns = g0 + (clk - k0) * (g1 - g0)/(k1 - k0).
     * Integer differences first: %globaltimer counts ns since the epoch (~2^61), beyond the 53
     * bits a double holds exactly. */
    unsigned long long g_origin = ~0ull;
    for (int c = 0; c < m->pb->grid; c++)
        if (m->h_anchors[4 * (size_t)c] < g_origin)
            g_origin = m->h_anchors[4 * (size_t)c];
    double t_min = INFINITY;
    m->ntiles = tl->n;
    for (int i = 0; i < tl->n; i++) {
        const unsigned long long *r = m->h_trace + (size_t)i * XS_MOE_TRACE_WORDS;
        xs_moe_tile *t = &m->tiles[i];
        int cta = (int)(r[5] >> 32);
        if (cta < 0 || cta >= m->pb->grid) {
            memset(t, 0, sizeof *t);
            t->cta = -1;
            t->seq = -1;
            continue;
        }
        const unsigned long long *an = m->h_anchors + 4 * (size_t)cta;
        double dg = (double)(long long)(an[2] - an[0]), dk = (double)(long long)(an[3] - an[1]);
        double ns_per_clk = dk > 0 ? dg / dk : 0.0;
        double base = (double)(long long)(an[0] - g_origin);
        double v[5];
        for (int j = 0; j < 5; j++)
            v[j] = base + (double)(long long)(r[j] - an[1]) * ns_per_clk;
        t->fetch_ns = v[0];
        t->mma0_ns = v[1];
        t->mma1_ns = v[2];
        t->st0_ns = v[3];
        t->st1_ns = v[4];
        t->kind = xs_moe_task_kind(tl->host[i]);
        t->rb = xs_moe_task_rb(tl->host[i]);
        t->nb = tl->host[i].nb;
        t->cta = cta;
        t->smid = (int)(r[5] & 0xffffffffu);
        t->remote_bytes = (int)(r[6] >> 32);
        t->total_bytes = (int)(r[6] & 0xffffffffu);
        t->gate_ns = (double)r[7];
        t->seq = r[8] == ~0ull ? -1 : (long long)r[8];
        t->deferred = r[9] == 1ull;
        t->id = t->kind == 1 ? t->rb * m->pb->l1_per_rb + t->nb
                             : m->pb->nrb * m->pb->l1_per_rb + t->rb * m->pb->l2_per_rb + t->nb;
        if (v[0] < t_min)
            t_min = v[0];
    }
    for (int i = 0; i < tl->n; i++) {
        xs_moe_tile *t = &m->tiles[i];
        if (t->cta < 0)
            continue;
        t->fetch_ns -= t_min;
        t->mma0_ns -= t_min;
        t->mma1_ns -= t_min;
        t->st0_ns -= t_min;
        t->st1_ns -= t_min;
    }
    /* the couriers' copies, on the same base */
    for (int j = 0; j < m->ncopies; j++) {
        const unsigned long long *r = m->h_ctrace + (size_t)j * XS_MOE_COPY_WORDS;
        xs_moe_copy *c = &m->copies[j];
        memset(c, 0, sizeof *c);
        c->pos = j;
        c->rb = m->h_clist[j].x;
        c->nb = m->h_clist[j].y;
        c->id = m->pb->nrb * m->pb->l1_per_rb + c->rb * m->pb->l2_per_rb + c->nb;
        const int cta = (int)(r[3] >> 32);
        if (cta < 0 || cta >= m->pb->grid) {
            c->cta = -1;
            continue;
        }
        const unsigned long long *an = m->h_anchors + 4 * (size_t)cta;
        const double dg = (double)(long long)(an[2] - an[0]);
        const double dk = (double)(long long)(an[3] - an[1]);
        const double ns_per_clk = dk > 0 ? dg / dk : 0.0;
        const double base = (double)(long long)(an[0] - g_origin) - (isfinite(t_min) ? t_min : 0);
        c->cta = cta;
        c->smid = (int)(r[3] & 0xffffffffu);
        c->wait_ns = base + (double)(long long)(r[0] - an[1]) * ns_per_clk;
        c->ready_ns = base + (double)(long long)(r[1] - an[1]) * ns_per_clk;
        c->end_ns = base + (double)(long long)(r[2] - an[1]) * ns_per_clk;
        c->bytes = (int)r[4];
        c->gate_ns = (double)r[5];
    }
}

/* The tasks of one kind (1 = Linear-1, 2 = Linear-2) of a task list, in its order, into m->sub. */
static xs_status xs_moe_subset(xs_moe *m, const xs_moe_tasklist *from, int kind)
{
    xs_moe_tasklist *t = &m->sub;
    if (!t->host) {
        t->host = (xs_moe_task *)malloc(sizeof(xs_moe_task) * (size_t)(m->pb->trace_cap + 1));
        if (!t->host)
            return xs_seterr(XS_ENOMEM, "moe: out of host memory for a task list");
        XS_TRY(xs_moe_dalloc((void **)&t->dev, sizeof(int2) * (size_t)(m->pb->trace_cap + 1),
                         "task list"));
    }
    int n = 0;
    for (int i = 0; i < from->n; i++)
        if (xs_moe_task_kind(from->host[i]) == kind)
            t->host[n++] = from->host[i];
    t->n = n;
    t->plan = from->plan;
    if (n)
        XS_CU(cudaMemcpy(t->dev, t->host, sizeof(int2) * (size_t)n, cudaMemcpyHostToDevice));
    return XS_OK;
}

/* The combine staging buffer, [rows, H] bf16 (couriers, spilling kernel): allocated once per
 * problem, NaN until rows are staged. */
static xs_status xs_moe_cstage_alloc(xs_moe *m, cudaStream_t s)
{
    if (m->d_cstage)
        return XS_OK;
    XS_TRY(xs_moe_dalloc((void **)&m->d_cstage, (size_t)m->pb->rows * m->pb->H * 2,
                         "combine staging buffer"));
    XS_CU(cudaMemsetAsync(m->d_cstage, 0xff, (size_t)m->pb->rows * m->pb->H * 2, s)); /* bf16 NaN */
    return XS_OK;
}

/* A courier run's buffers (allocated once per problem) and its copy list: the Linear-2 tiles of
 * task list tl in position order, uploaded on stream s; ready flags cleared, copy trace
 * poisoned. */
static xs_status xs_moe_courier_setup(xs_moe *m, const xs_moe_tasklist *tl, cudaStream_t s)
{
    const size_t n2 = (size_t)m->pb->nrb * m->pb->l2_per_rb;
    if (n2 >= (1u << 30))
        return xs_seterr(XS_ERANGE, "moe: %zu Linear-2 tiles: too many for the couriers", n2);
    XS_TRY(xs_moe_cstage_alloc(m, s));
    if (!m->d_ready) {
        XS_TRY(xs_moe_dalloc((void **)&m->d_ready, 8 * (n2 + 1), "courier ready flags"));
        XS_TRY(xs_moe_dalloc((void **)&m->d_clist, sizeof(int2) * (n2 + 1), "courier tile list"));
        XS_TRY(xs_moe_dalloc((void **)&m->d_ctrace, 8 * XS_MOE_COPY_WORDS * (n2 + 1),
                         "courier trace"));
    }
    if (!m->h_clist) {
        m->h_clist = (int2 *)malloc(sizeof(int2) * (n2 + 1));
        m->h_ctrace = (unsigned long long *)malloc(8 * XS_MOE_COPY_WORDS * (n2 + 1));
        m->copies = (xs_moe_copy *)calloc(n2 + 1, sizeof(xs_moe_copy));
        if (!m->h_clist || !m->h_ctrace || !m->copies)
            return xs_seterr(XS_ENOMEM, "moe: out of host memory for the courier lists");
    }
    int n = 0;
    for (int i = 0; i < tl->n; i++)
        if ((xs_moe_task_kind(tl->host[i])) == 2)
            m->h_clist[n++] = make_int2(xs_moe_task_rb(tl->host[i]), tl->host[i].nb);
    m->ncopies = n;
    /* pageable source: staged before the call returns, ordered before the launch on s */
    if (n)
        XS_CU(cudaMemcpyAsync(m->d_clist, m->h_clist, sizeof(int2) * (size_t)n,
                              cudaMemcpyHostToDevice, s));
    XS_CU(cudaMemsetAsync(m->d_ready, 0, 8 * (n2 + 1), s));
    XS_CU(cudaMemsetAsync(m->d_ctrace, 0xff, 8 * XS_MOE_COPY_WORDS * ((size_t)n + 1), s));
    return XS_OK;
}

/* The couriers' row plan for the window table of this run (docs/EP.md "Couriers"): per row
 * block, its rows whose rank's window is host memory (remote over PCIe), in row order, with
 * each row's slot in that window, uploaded on s. A courier then finds a tile's rows and their
 * destinations in two independent loads it can issue before its previous tile's stores leave
 * (loads behind those stores would be a third of a courier's time). */
static xs_status xs_moe_courier_rows(xs_moe *m, const xs_wintab *tab, cudaStream_t s)
{
    typedef xs_moe_cfg C;
    const size_t nb = (size_t)m->pb->nrb * C::BM;
    if (!m->d_crow) {
        XS_TRY(xs_moe_dalloc((void **)&m->d_crow, sizeof(int) * (nb + 1), "courier row plan"));
        XS_TRY(xs_moe_dalloc((void **)&m->d_cdst, sizeof(char *) * (nb + 1), "courier row plan"));
        XS_TRY(xs_moe_dalloc((void **)&m->d_ccnt, sizeof(int) * ((size_t)m->pb->nrb + 1),
                         "courier row plan"));
    }
    if (!m->h_crow) {
        m->h_crow = (int *)malloc(sizeof(int) * (nb + 1));
        m->h_cdst = (char **)malloc(sizeof(char *) * (nb + 1));
        m->h_ccnt = (int *)malloc(sizeof(int) * ((size_t)m->pb->nrb + 1));
        if (!m->h_crow || !m->h_cdst || !m->h_ccnt)
            return xs_seterr(XS_ENOMEM, "moe: out of host memory for the courier row plan");
    }
    for (int b = 0; b < m->pb->nrb; b++) {
        const int row0 = m->pb->rb[b].row0, nrows = m->pb->rb[b].rows;
        int n = 0;
        for (int i = 0; i < nrows && i < C::BM; i++) {
            const int gr = row0 + i, r = m->pb->row_rank[gr];
            if (r < 0 || r >= m->pb->N || !tab->host_mem[r])
                continue;
            m->h_crow[(size_t)b * C::BM + n] = gr;
            m->h_cdst[(size_t)b * C::BM + n] = tab->data[r] + m->pb->row_off[gr];
            n++;
        }
        m->h_ccnt[b] = n;
    }
    /* pageable sources: staged before the calls return, ordered before the launch on s */
    XS_CU(cudaMemcpyAsync(m->d_crow, m->h_crow, sizeof(int) * nb, cudaMemcpyHostToDevice, s));
    XS_CU(cudaMemcpyAsync(m->d_cdst, m->h_cdst, sizeof(char *) * nb, cudaMemcpyHostToDevice, s));
    XS_CU(cudaMemcpyAsync(m->d_ccnt, m->h_ccnt, sizeof(int) * (size_t)m->pb->nrb,
                          cudaMemcpyHostToDevice, s));
    return XS_OK;
}

/* The fused kernel's arguments for task list tl (only: a subset; defer: the kernel; spill_depth:
 * the spilling kernel's queue). */
static void xs_moe_kargs_fill(const xs_moe *m, const xs_moe_tasklist *tl, const xs_moe_run_opts *o,
                              int only, int defer, int spill_depth, xs_moe_kargs *a)
{
    const int couriers = tl->plan.couriers;
    memset(a, 0, sizeof *a);
    a->x = m->x;
    a->w1 = m->w->w1;
    a->w2 = m->w->w2;
    a->h = m->h;
    a->row_token = m->d_row_token;
    a->row_weight = m->d_row_weight;
    a->row_rank = m->d_row_rank;
    a->row_off = m->d_row_off;
    a->rbs = m->d_rb;
    a->tasks = tl->dev;
    a->ntasks = tl->n;
    a->queue = m->d_queue;
    a->seq = (unsigned long long *)m->d_queue + 1; /* bytes 8..15, zeroed with the counter */
    a->done1 = m->d_done1;
    a->hidden = m->pb->H;
    a->inter = m->pb->I;
    a->l1_per_rb = m->pb->l1_per_rb;
    a->timeout_ns = o && o->timeout_ns ? o->timeout_ns : 2000000000ull;
    a->fault_skip_l1 = o ? o->fault_skip_l1 : 0;
    a->status = m->d_status;
    a->pace = m->d_pace;
    if (tl->plan.pace_bytes > 0 && tl->plan.pace_bytes_per_ns > 0) {
        a->pace_ns_per_byte = 1.0 / tl->plan.pace_bytes_per_ns;
        a->pace_slack_ns = (unsigned long long)(tl->plan.pace_bytes / tl->plan.pace_bytes_per_ns);
    }
    a->rank_base = m->d_rank_base;
    a->rank_host = m->d_rank_host;
    a->trace = m->d_trace;
    a->anchors = m->d_anchors;
    a->l2_per_rb = m->pb->l2_per_rb;
    a->bulk_combine = o ? o->bulk_combine : 0;
    if (tl->plan.kind == XS_MOE_ADAPTIVE && !only) { /* a subset runs in its list's order */
        a->adaptive = 1;
        a->n1 = m->pb->nrb * m->pb->l1_per_rb;
        a->queue2 = m->d_queue + 4;   /* bytes 16..19, zeroed with the counter */
        a->admit = m->d_pace + 1;     /* zeroed with the pacer */
        a->admit_ns_per_byte = 1.0 / tl->plan.pace_bytes_per_ns;
        a->admit_ahead_ns = (unsigned long long)tl->plan.admit_ahead_ns;
        xs_moe_info info;
        xs_moe_get_info(m, &info);
        a->admit_tile_bytes = info.l2_tiles ? info.remote_bytes / info.l2_tiles : 0.0;
    }
    if (couriers > 0) {
        a->couriers = couriers;
        a->cstage = m->d_cstage;
        a->ready = m->d_ready;
        a->clist = m->d_clist;
        a->nclist = m->ncopies;
        a->crow = m->d_crow;
        a->cdst = m->d_cdst;
        a->ccnt = m->d_ccnt;
        a->courier_ns_per_byte = couriers / tl->plan.courier_bytes_per_ns;
        a->ctrace = m->d_ctrace;
    }
    if (defer == XS_MOE_DEFER_SPILL) {
        a->cstage = m->d_cstage;
        a->spill_depth = spill_depth;
    }
}

/* The device status of a run as one line: a dependency, pacer or courier wait that expired
 * (XS_ETIMEOUT), another device failure (XS_ECUDA); XS_OK when none. */
static xs_status xs_moe_run_status(const xs_moe *m, const xs_moe_tasklist *tl,
                                   const xs_devstatus *st, unsigned long long timeout_ns)
{
    const int couriers = tl->plan.couriers;
    const unsigned int low = (unsigned int)(st->detail & 0xffffffffu);
    if (st->code == XS_DEVERR_TIMEOUT && low == XS_MOE_CPACE_DETAIL)
        return xs_seterr(XS_ETIMEOUT, "fused MoE: courier CTA %u waited more than %.0f ms for its "
                         "pacer (%d couriers at %.1f bytes/ns in all)",
                         (unsigned)(st->detail >> 32), (double)timeout_ns / 1e6, couriers,
                         tl->plan.courier_bytes_per_ns);
    if (st->code == XS_DEVERR_TIMEOUT && low != XS_MOE_PACE_DETAIL && (low & XS_MOE_CWAIT_DETAIL)) {
        const int j = (int)(low & ~XS_MOE_CWAIT_DETAIL);
        return xs_seterr(XS_ETIMEOUT, "fused MoE: courier CTA %u waited more than %.0f ms for "
                         "Linear-2 tile %d of row block %d (its rows were never staged)",
                         (unsigned)(st->detail >> 32), (double)timeout_ns / 1e6,
                         j < m->ncopies ? m->h_clist[j].y : -1,
                         j < m->ncopies ? m->h_clist[j].x : -1);
    }
    if (st->code == XS_DEVERR_TIMEOUT && low == XS_MOE_PACE_DETAIL)
        return xs_seterr(XS_ETIMEOUT, "fused MoE: CTA %u waited more than %.0f ms for the combine "
                         "pacer (pace %.0f bytes at %.1f bytes/ns)", (unsigned)(st->detail >> 32),
                         (double)timeout_ns / 1e6, tl->plan.pace_bytes,
                         tl->plan.pace_bytes_per_ns);
    if (st->code == XS_DEVERR_TIMEOUT)
        return xs_seterr(XS_ETIMEOUT, "fused MoE: CTA %u waited more than %.0f ms for the "
                         "Linear-1 tiles of row block %u (dependency never signalled)",
                         (unsigned)(st->detail >> 32), (double)timeout_ns / 1e6,
                         (unsigned)(st->detail & 0xffffffffu));
    if (st->code)
        return xs_seterr(XS_ECUDA, "fused MoE: device failure code %u in CTA %u", st->code,
                         st->block);
    return XS_OK;
}

xs_status xs_moe_run_fused(xs_moe *m, int slot, const xs_wintab *tab, const xs_moe_run_opts *o,
                           cudaStream_t s, float *ms)
{
    typedef xs_moe_cfg C;
    if (slot < 0 || slot >= XS_MOE_SLOTS || !m->slots[slot].host)
        return xs_seterr(XS_EINVAL, "moe: plan slot %d has no task list", slot);
    XS_TRY(xs_moe_check_table(m, tab));
    const xs_moe_tasklist *tl = &m->slots[slot];
    const int only = o ? o->only : 0;
    if (only < 0 || only > 2)
        return xs_seterr(XS_EINVAL, "moe: run option only=%d: 0 (the layer), 1 (Linear-1 tiles) "
                         "or 2 (Linear-2 tiles)", only);
    if (o && o->bulk_combine && tl->plan.couriers > 0)
        return xs_seterr(XS_EINVAL, "moe: bulk combine copies and couriers (plan slot %d, %d "
                         "couriers) are exclusive: the couriers store the combine", slot,
                         tl->plan.couriers);
    int defer = o ? o->defer : XS_MOE_DEFER_PLAN;
    if (defer < XS_MOE_DEFER_PLAN || defer > XS_MOE_DEFER_NONE)
        return xs_seterr(XS_EINVAL, "moe: run option defer=%d: %d (the plan's), %d (3-stage ring), "
                         "%d (spill to device memory) or %d (none)", defer, XS_MOE_DEFER_PLAN,
                         XS_MOE_DEFER_RING, XS_MOE_DEFER_SPILL, XS_MOE_DEFER_NONE);
    if (defer == XS_MOE_DEFER_PLAN)
        defer = tl->plan.spill_depth > 0 ? XS_MOE_DEFER_SPILL : 0;
    else if (defer == XS_MOE_DEFER_NONE)
        defer = 0;
    if (defer && (tl->plan.couriers > 0 || (o && o->bulk_combine)))
        return xs_seterr(XS_EINVAL, "moe: deferred Linear-2 stores are not for %s (plan slot %d)",
                         o && o->bulk_combine ? "bulk combine copies" : "couriers", slot);
    const int spill_depth = o && o->spill_depth       ? o->spill_depth
                            : tl->plan.spill_depth > 0 ? tl->plan.spill_depth
                                                       : XS_MOE_SPILL_DEPTH;
    if (spill_depth < 1 || spill_depth > XS_MOE_SPILL_MAX)
        return xs_seterr(XS_EINVAL, "moe: run option spill_depth=%d: 1..%d held-back tiles per "
                         "CTA", spill_depth, XS_MOE_SPILL_MAX);
    if (only) {
        XS_TRY(xs_moe_subset(m, tl, only));
        tl = &m->sub;
    }
    if (!m->d_kargs)
        XS_TRY(xs_moe_dalloc(&m->d_kargs, sizeof(xs_moe_kargs), "kernel arguments"));
    static int attr_done;
    if (!attr_done) {
        XS_CU(cudaFuncSetAttribute(xs_moe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   C::SMEM_BYTES));
        XS_CU(cudaFuncSetAttribute(xs_moe_kernel_defer,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_MOE_DEFER_SMEM));
        XS_CU(cudaFuncSetAttribute(xs_moe_kernel_spill,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_MOE_SPILL_SMEM));
        int per_sm = 0, per_sm_d = 0, per_sm_s = 0;
        XS_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, xs_moe_kernel, C::THREADS,
                                                            C::SMEM_BYTES));
        XS_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_d, xs_moe_kernel_defer,
                                                            C::THREADS, XS_MOE_DEFER_SMEM));
        XS_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_s, xs_moe_kernel_spill,
                                                            C::THREADS, XS_MOE_SPILL_SMEM));
        if (per_sm < 1 || per_sm_d < 1 || per_sm_s < 1)
            return xs_seterr(XS_ECUDA, "moe: the fused kernel (%d threads, %d, %d or %d bytes of "
                             "shared memory) does not fit on an SM", C::THREADS, C::SMEM_BYTES,
                             (int)XS_MOE_DEFER_SMEM, (int)XS_MOE_SPILL_SMEM);
        attr_done = 1;
    }
    XS_TRY(xs_moe_upload_table(m, tab, s));
    XS_CU(cudaMemsetAsync(m->d_queue, 0, 32, s));
    XS_CU(cudaMemsetAsync(m->d_done1, 0, 8 * (size_t)(m->pb->nrb + 1), s));
    if (only == 1) /* a missing h store reads as NaN in xs_moe_verify_h */
        XS_CU(cudaMemsetAsync(m->h, 0xff, (size_t)m->pb->rows * m->pb->I * 2, s));
    if (only == 2) {
        /* every row block's Linear-1 tiles count as done (h is whatever the caller left) */
        unsigned long long *full =
            (unsigned long long *)malloc(8 * (size_t)(m->pb->nrb + 1));
        if (!full)
            return xs_seterr(XS_ENOMEM, "moe: out of host memory");
        for (int b = 0; b <= m->pb->nrb; b++)
            full[b] = (unsigned long long)m->pb->l1_per_rb;
        /* pageable source: the copy is staged before cudaMemcpyAsync returns */
        cudaError_t e = cudaMemcpyAsync(m->d_done1, full, 8 * (size_t)(m->pb->nrb + 1),
                                        cudaMemcpyHostToDevice, s);
        free(full);
        if (e != cudaSuccess)
            return xs_seterr(XS_ECUDA, "moe: presetting the dependency counters: %s",
                             cudaGetErrorString(e));
    }
    XS_CU(cudaMemsetAsync(m->d_status, 0, sizeof(xs_devstatus), s));
    XS_CU(cudaMemsetAsync(m->d_pace, 0, 16, s));
    XS_CU(cudaMemsetAsync(m->d_trace, 0xff, 8 * XS_MOE_TRACE_WORDS * (size_t)(tl->n + 1), s));
    const int couriers = tl->plan.couriers;
    m->ncopies = 0;
    if (couriers > 0) {
        XS_TRY(xs_moe_courier_setup(m, tl, s));
        XS_TRY(xs_moe_courier_rows(m, tab, s));
    }
    if (defer == XS_MOE_DEFER_SPILL)
        XS_TRY(xs_moe_cstage_alloc(m, s));

    xs_moe_kargs a;
    xs_moe_kargs_fill(m, tl, o, only, defer, spill_depth, &a);
    /* pageable source: staged before the call returns, ordered before the launch on s */
    XS_CU(cudaMemcpyAsync(m->d_kargs, &a, sizeof a, cudaMemcpyHostToDevice, s));

    XS_CU(cudaEventRecord(m->ev[0], s));
    if (defer == XS_MOE_DEFER_RING)
        XS_NVTX_LAUNCH("xs_moe_kernel_defer",
                       xs_moe_kernel_defer<<<m->pb->grid, C::THREADS, XS_MOE_DEFER_SMEM, s>>>(
                           (const xs_moe_kargs *)m->d_kargs));
    else if (defer == XS_MOE_DEFER_SPILL)
        XS_NVTX_LAUNCH("xs_moe_kernel_spill",
                       xs_moe_kernel_spill<<<m->pb->grid, C::THREADS, XS_MOE_SPILL_SMEM, s>>>(
                           (const xs_moe_kargs *)m->d_kargs));
    else
        XS_NVTX_LAUNCH("xs_moe_kernel",
                       xs_moe_kernel<<<m->pb->grid, C::THREADS, C::SMEM_BYTES, s>>>(
                           (const xs_moe_kargs *)m->d_kargs));
    XS_CU_LAUNCH();
    XS_CU(cudaEventRecord(m->ev[1], s));
    XS_CU(cudaEventSynchronize(m->ev[1]));
    float t = 0;
    XS_CU(cudaEventElapsedTime(&t, m->ev[0], m->ev[1]));
    if (ms)
        *ms = t;
    xs_devstatus st;
    XS_CU(cudaMemcpy(&st, m->d_status, sizeof st, cudaMemcpyDeviceToHost));
    XS_CU(cudaMemcpy(m->h_trace, m->d_trace, 8 * XS_MOE_TRACE_WORDS * (size_t)tl->n,
                     cudaMemcpyDeviceToHost));
    XS_CU(cudaMemcpy(m->h_anchors, m->d_anchors, 8 * 4 * (size_t)m->pb->grid,
                     cudaMemcpyDeviceToHost));
    if (m->ncopies)
        XS_CU(cudaMemcpy(m->h_ctrace, m->d_ctrace, 8 * XS_MOE_COPY_WORDS * (size_t)m->ncopies,
                         cudaMemcpyDeviceToHost));
    XS_TRY(xs_moe_run_status(m, tl, &st, a.timeout_ns));
    /* every task ran exactly once (the trace was poisoned with 0xff before the launch) */
    for (int i = 0; i < tl->n; i++)
        if (m->h_trace[(size_t)i * XS_MOE_TRACE_WORDS + 5] == ~0ull)
            return xs_seterr(XS_EVERIFY, "fused MoE: task %d of %d never ran", i, tl->n);
    /* and every Linear-2 tile's copy by its courier (poisoned the same way) */
    for (int j = 0; j < m->ncopies; j++)
        if (m->h_ctrace[(size_t)j * XS_MOE_COPY_WORDS + 3] == ~0ull)
            return xs_seterr(XS_EVERIFY, "fused MoE: courier %d never copied Linear-2 tile %d of "
                             "row block %d (copy %d of %d)", j % couriers, m->h_clist[j].y,
                             m->h_clist[j].x, j, m->ncopies);
    xs_moe_decode_trace(m, tl);
    return XS_OK;
}

xs_status xs_moe_trace(xs_moe *m, const xs_moe_tile **tiles, int *n)
{
    *tiles = m->tiles;
    *n = m->ntiles;
    return XS_OK;
}

xs_status xs_moe_courier_trace(xs_moe *m, const xs_moe_copy **copies, int *n)
{
    *copies = m->copies;
    *n = m->ncopies;
    return XS_OK;
}

xs_status xs_moe_ensure_unfused(xs_moe *m, int reference)
{
    size_t rows = (size_t)m->pb->rows;
    if (!m->xs_sorted)
        XS_TRY(xs_moe_dalloc((void **)&m->xs_sorted, rows * m->pb->H * 2, "dispatched tokens"));
    if (reference) {
        if (!m->y1f)
            XS_TRY(xs_moe_dalloc((void **)&m->y1f, rows * 2 * m->pb->I * 4,
                                 "fp32 Linear-1 output"));
        if (!m->y2f)
            XS_TRY(xs_moe_dalloc((void **)&m->y2f, rows * m->pb->H * 4, "fp32 Linear-2 output"));
        if (!m->reff)
            XS_TRY(xs_moe_dalloc((void **)&m->reff, rows * m->pb->H * 4, "reference rows"));
    } else {
        if (!m->y1)
            XS_TRY(xs_moe_dalloc((void **)&m->y1, rows * 2 * m->pb->I * 2, "Linear-1 output"));
        if (!m->y2)
            XS_TRY(xs_moe_dalloc((void **)&m->y2, rows * m->pb->H * 2, "Linear-2 output"));
        if (!m->stage)
            XS_TRY(xs_moe_dalloc((void **)&m->stage, m->pb->window_bytes * (size_t)m->pb->N,
                             "combine staging"));
    }
    return XS_OK;
}

/* the cuBLAS GEMMs of one layer, one call per expert with rows (grouped by hand) */
xs_status xs_moe_gemms(xs_moe *m, xs_cublas *cb, cudaStream_t s, int layer, int f32)
{
    const int H = m->pb->H, I = m->pb->I;
    for (int e = 0; e < m->pb->E; e++) {
        const int n = m->pb->expert_rows[e], off = m->pb->expert_off[e];
        if (!n)
            continue;
        if (layer == 1) {
            void *c = f32 ? (void *)(m->y1f + (size_t)off * 2 * I)
                          : (void *)(m->y1 + (size_t)off * 2 * I);
            XS_TRY(xs_cublas_gemm_bf16(cb, s, n, 2 * I, H, m->xs_sorted + (size_t)off * H,
                                       m->w->w1 + (size_t)e * 2 * I * H, 1, c, f32));
        } else {
            void *c = f32 ? (void *)(m->y2f + (size_t)off * H) : (void *)(m->y2 + (size_t)off * H);
            XS_TRY(xs_cublas_gemm_bf16(cb, s, n, H, I, m->h + (size_t)off * I,
                                       m->w->w2 + (size_t)e * H * I, 1, c, f32));
        }
    }
    return XS_OK;
}

xs_status xs_moe_run_unfused(xs_moe *m, xs_cublas *cb, const xs_wintab *tab, cudaStream_t s,
                             float *ms, float *gemm_ms)
{
    return xs_moe_run_unfused_with(m, cb, tab, NULL, NULL, s, ms, gemm_ms);
}

xs_status xs_moe_run_unfused_with(xs_moe *m, xs_cublas *cb, const xs_wintab *tab,
                                  xs_moe_combine_fn combine, void *ctx, cudaStream_t s,
                                  float *ms, float *gemm_ms)
{
    XS_TRY(xs_moe_check_table(m, tab));
    XS_TRY(xs_moe_ensure_unfused(m, 0));
    const int blocks = 4 * m->pb->grid;
    XS_CU(cudaEventRecord(m->ev[0], s));
    XS_NVTX_LAUNCH("xs_moe_gather_kernel",
                   xs_moe_gather_kernel<<<blocks, 256, 0, s>>>(m->x, m->d_row_token, m->xs_sorted,
                                                               m->pb->rows, m->pb->H));
    XS_CU_LAUNCH();
    XS_CU(cudaEventRecord(m->ev[2], s));
    XS_TRY(xs_moe_gemms(m, cb, s, 1, 0));
    XS_CU(cudaEventRecord(m->ev[3], s));
    XS_NVTX_LAUNCH("xs_moe_swiglu_kernel", xs_moe_swiglu_kernel<xs_bf16>
                   <<<blocks, 256, 0, s>>>(m->y1, m->h, m->pb->rows, m->pb->I));
    XS_CU_LAUNCH();
    XS_CU(cudaEventRecord(m->ev[4], s));
    XS_TRY(xs_moe_gemms(m, cb, s, 2, 0));
    XS_CU(cudaEventRecord(m->ev[5], s));
    XS_NVTX_LAUNCH("xs_moe_scatter_kernel", xs_moe_scatter_kernel<xs_bf16>
                   <<<blocks, 256, 0, s>>>(m->y2, m->d_row_weight, m->d_row_rank, m->d_row_off,
                                           (char *)m->stage, m->pb->window_bytes, (float *)NULL,
                                           m->pb->rows, m->pb->H));
    XS_CU_LAUNCH();
    if (combine) {
        XS_TRY(combine(ctx, (const char *)m->stage, m->pb->window_bytes, m->pb->rank_used,
                       m->pb->N, s));
    } else {
        for (int r = 0; r < m->pb->N; r++)
            if (m->pb->rank_used[r])
                XS_CU(cudaMemcpyAsync(tab->data[r],
                                      (char *)m->stage + (size_t)r * m->pb->window_bytes,
                                      m->pb->rank_used[r], cudaMemcpyDefault, s));
    }
    XS_CU(cudaEventRecord(m->ev[1], s));
    XS_CU(cudaEventSynchronize(m->ev[1]));
    float t = 0, g1 = 0, g2 = 0;
    XS_CU(cudaEventElapsedTime(&t, m->ev[0], m->ev[1]));
    XS_CU(cudaEventElapsedTime(&g1, m->ev[2], m->ev[3]));
    XS_CU(cudaEventElapsedTime(&g2, m->ev[4], m->ev[5]));
    if (ms)
        *ms = t;
    if (gemm_ms)
        *gemm_ms = g1 + g2;
    return XS_OK;
}
