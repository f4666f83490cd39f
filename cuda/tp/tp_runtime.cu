// SPDX-License-Identifier: Apache-2.0
/*
 * tp/tp_runtime.cu - the TP GPU context (cuda/tp/tp.h): creation (inputs, windows, the local
 * control table, placed data of the virtual peers), engines, couriers and slot layouts, the
 * upload of a plan slot's list, fused and local runs with their failure reports, per-task costs
 * of the last run, the unfused cuBLAS baseline and the glue to the caller's collectives.
 * References and verification are tp_check.cu; the orders and their model src/tp_*.c.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvtx_launch.h"
#include "tp/tp_ctx.h"

static size_t tp_align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static xs_status tp_fill(xs_tp *t, xs_bf16 *x, size_t n, uint32_t seed, float scale)
{
    if (!n)
        return XS_OK;
    XS_NVTX_LAUNCH("tp_fill_kernel",
                   tp_fill_kernel<<<tp_blocks(n, 256), 256, 0, t->vstream>>>(x, n, seed, scale));
    XS_CU_LAUNCH();
    return XS_OK;
}

static xs_status tp_word(cudaStream_t s, void *p, size_t bytes, uint32_t w)
{
    if (!bytes)
        return XS_OK;
    if (bytes % 16 || ((uintptr_t)p & 15))
        return xs_seterr(XS_EINVAL, "tp: fill of %zu bytes at %p is not 16-byte aligned", bytes,
                         p);
    XS_NVTX_LAUNCH("tp_word_kernel", tp_word_kernel<<<tp_blocks(bytes / 16, 256), 256, 0, s>>>(
                                         (uint4 *)p, bytes / 16, w));
    XS_CU_LAUNCH();
    return XS_OK;
}

static xs_status tp_setflags(cudaStream_t s, uint64_t *f, int n, unsigned long long v)
{
    if (n <= 0)
        return XS_OK;
    XS_NVTX_LAUNCH("tp_flags_kernel",
                   tp_flags_kernel<<<tp_blocks((size_t)n, 256), 256, 0, s>>>(f, n, v));
    XS_CU_LAUNCH();
    return XS_OK;
}

/* cudaMalloc of `bytes` (none when 0) into *p; XS_ECUDA naming the problem and the size. */
static xs_status tp_alloc(const xs_tp *t, void **p, size_t bytes)
{
    if (!bytes)
        return XS_OK;
    const cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaSuccess)
        return XS_OK;
    cudaGetLastError();
    const xs_tp_shape *s = &t->pl.s;
    return xs_seterr(XS_ECUDA, "tp %s m=%d n=%d k=%d P=%d: cudaMalloc of %.1f MB: %s",
                     xs_tp_op_name(s->op), s->m, s->n, s->k, s->peers, bytes / 1e6,
                     cudaGetErrorString(e));
}
#define TP_ALLOC(ptr, bytes) XS_TRY(tp_alloc(t, (void **)&(ptr), (bytes)))

/* The CPU address of a device-usable pointer into pinned host memory, or NULL. */
static void *tp_host_view(void *p)
{
    cudaPointerAttributes at;
    memset(&at, 0, sizeof at);
    if (!p || cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (at.type != cudaMemoryTypeHost || !at.hostPointer)
        return NULL;
    return at.hostPointer;
}

extern "C" void xs_tp_destroy(xs_tp *t)
{
    if (!t)
        return;
    if (t->vstream)
        cudaStreamSynchronize(t->vstream);
    cudaFree(t->lmem);
    cudaFree(t->lflags);
    cudaFree(t->a_rs);
    cudaFree(t->w[0]);
    cudaFree(t->w[1]);
    cudaFree(t->out0);
    cudaFree(t->y);
    cudaFree(t->rb_count);
    cudaFree(t->status);
    cudaFree(t->task_ns);
    cudaFree(t->cta_ns);
    cudaFree(t->d_bad);
    cudaFree(t->d_nonfinite);
    cudaFree(t->d_err);
    cudaFree(t->flush);
    cudaFree(t->scratch);
    cudaFree(t->ag_shadow);
    cudaFree(t->d_list_sum);
    cudaFree(t->ref_part);
    cudaFree(t->ref_y);
    cudaFree(t->ref_out0);
    cudaFree(t->ref_tmp);
    cudaFree(t->ref_h);
    cudaFree(t->exp_part);
    cudaFree(t->exp_y);
    cudaFree(t->exp_out0);
    cudaFree(t->exp_recv);
    cudaFree(t->u_c0);
    cudaFree(t->u_h);
    cudaFree(t->u_c);
    cudaFree(t->u_y);
    for (int i = 0; i < XS_TP_SLOTS; i++) {
        cudaFree(t->d_tasks[i]);
        cudaFree(t->d_walk[i]);
    }
    xs_tp_plan_release(&t->pl);
    cudaFree(t->outbox);
    cudaFree(t->ready);
    cudaFree(t->split);
    cudaFree(t->split_ready);
    cudaFree(t->split_tmp);
    cudaFree(t->d_split_tiles);
    free(t->exp_part_h);
    free(t->exp_shard_h);
    free(t->u_part_h);
    if (t->ev0)
        cudaEventDestroy(t->ev0);
    if (t->ev1)
        cudaEventDestroy(t->ev1);
    if (t->vstream)
        cudaStreamDestroy(t->vstream);
    if (t->ov_side) {
        cudaStreamSynchronize(t->ov_side);
        cudaStreamDestroy(t->ov_side);
    }
    for (int i = 0; i < t->ov_nev; i++)
        cudaEventDestroy(t->ov_ev[i]);
    free(t->ov_ev);
    cudaGetLastError();
    free(t);
}

/* Allocate and fill the problem of context t for the window table tab (xs_tp_create's work
 * after its checks); the caller destroys t on failure. */
static xs_status tp_setup(xs_tp *t, const xs_tp_shape *s, const xs_wintab *tab, uint32_t seed)
{
    const xs_tp_info in = t->pl.in;
    const int grid = t->pl.grid;
    const char *op = xs_tp_op_name(s->op);
    t->seed = seed;
    t->vt = *tab;
    const int P = t->pl.P, me = t->pl.me;
    const size_t m = (size_t)s->m;
    XS_CU(cudaGetDevice(&t->device));
    int l2 = 0;
    XS_CU(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, t->device));
    t->l2_bytes = (size_t)l2;
    XS_CU(cudaStreamCreateWithFlags(&t->vstream, cudaStreamNonBlocking));
    XS_CU(cudaEventCreate(&t->ev0));
    XS_CU(cudaEventCreate(&t->ev1));

    /* the local control table: same layout, every window in this GPU's memory */
    t->lstride = tp_align_up(in.window_bytes, 4096);
    XS_TRY(tp_alloc(t, (void **)&t->lmem, (size_t)P * t->lstride));
    XS_TRY(tp_alloc(t, (void **)&t->lflags, (size_t)P * in.nflags * 8));
    memset(&t->lt, 0, sizeof t->lt);
    t->lt.nranks = P;
    t->lt.rank = me;
    t->lt.bytes = t->lstride;
    t->lt.nflags = in.nflags;
    for (int r = 0; r < P; r++) {
        t->lt.data[r] = t->lmem + (size_t)r * t->lstride;
        t->lt.flags[r] = t->lflags + (size_t)r * in.nflags;
    }
    for (int r = 0; r < P; r++) {
        t->host[r] = tab->host_mem[r] ? tp_host_view(tab->data[r]) : NULL;
        t->host_flags[r] = tab->host_mem[r] ? (uint64_t *)tp_host_view(tab->flags[r]) : NULL;
        if (tab->host_mem[r] && (!t->host[r] || !t->host_flags[r])) {
            return xs_seterr(XS_EINVAL, "tp %s: rank %d's window is marked host memory but "
                             "has no CPU address (cudaPointerGetAttributes)", op, r);
        }
    }

    /* virtual peers: every other rank's window is this process's host memory, so this rank
     * also plays the other sources; real peers write their own data and flags */
    int virt = 1;
    for (int r = 0; r < P; r++)
        if (r != me && !tab->host_mem[r])
            virt = 0;
    t->virt = virt;
    /* real peers hold different weight shards (and A of gemm_rs): a rank salt, 0 for rank 0
     * and for virtual peers (the one-GPU inputs) */
    const uint32_t salt = virt ? 0u : (uint32_t)me * 0x9e3779b9u;

    /* inputs: O(1) activations; weights scaled so that every output is O(1) */
    if (s->op == XS_TP_GEMM_RS) {
        XS_TRY(tp_alloc(t, (void **)&t->a_rs, m * in.gk[0] * 2));
        XS_TRY(tp_fill(t, t->a_rs, m * in.gk[0], seed * 7u + 1u + salt, 1.0f));
    }
    for (int g = 0; g < in.ngemm; g++) {
        XS_TRY(tp_alloc(t, (void **)&t->w[g], (size_t)in.gn[g] * in.gk[g] * 2));
        XS_TRY(tp_fill(t, t->w[g], (size_t)in.gn[g] * in.gk[g], seed * 7u + 2u + g + salt,
                       sqrtf(3.0f / (float)in.gk[g])));
    }
    if (in.rs_gemm != 0)
        XS_TRY(tp_alloc(t, (void **)&t->out0, m * in.out_n[0] * 2));
    if (in.rs_gemm >= 0)
        XS_TRY(tp_alloc(t, (void **)&t->y, (size_t)in.rs_rows * in.rs_n * 2));
    XS_TRY(tp_alloc(t, (void **)&t->rb_count, (size_t)in.tiles_m * sizeof(unsigned)));
    XS_TRY(tp_alloc(t, (void **)&t->status, sizeof(xs_devstatus)));
    XS_TRY(tp_alloc(t, (void **)&t->cta_ns, (size_t)2 * grid * sizeof(unsigned long long)));
    XS_TRY(tp_alloc(t, (void **)&t->scratch, (size_t)grid * TP_SCRATCH_BYTES));
    if (in.ag) {
        XS_TRY(tp_alloc(t, (void **)&t->ag_shadow, (size_t)P * in.ag_chunks * sizeof(uint64_t)));
        XS_CU(cudaMemsetAsync(t->ag_shadow, 0, (size_t)P * in.ag_chunks * sizeof(uint64_t),
                               t->vstream));
    }
    XS_TRY(tp_alloc(t, (void **)&t->d_list_sum, sizeof(unsigned long long)));
    XS_TRY(tp_alloc(t, (void **)&t->d_bad, sizeof(unsigned long long)));
    XS_TRY(tp_alloc(t, (void **)&t->d_nonfinite, sizeof(unsigned long long)));
    t->err_rows = m;
    XS_TRY(tp_alloc(t, (void **)&t->d_err, 2 * m * sizeof(double)));
    t->flush_bytes = 2 * t->l2_bytes > ((size_t)64 << 20) ? 2 * t->l2_bytes : (size_t)64 << 20;
    XS_TRY(tp_alloc(t, (void **)&t->flush, t->flush_bytes));
    XS_CU(cudaMemsetAsync(t->status, 0, sizeof(xs_devstatus), t->vstream));
    XS_CU(cudaMemsetAsync(t->rb_count, 0, (size_t)in.tiles_m * sizeof(unsigned), t->vstream));

    /* this rank's windows (both tables): the gathered buffer holds every shard (its own,
     * and the ones it would have received), the reduce-scatter region the other sources'
     * partials of its rows; the own slot is written by the runs */
    const xs_wintab *tabs[2] = {&t->vt, &t->lt};
    for (int q = 0; q < 2; q++) {
        char *own = tabs[q]->data[me];
        if (in.ag)
            XS_TRY(tp_fill(t, (xs_bf16 *)own, m * in.ag_k, seed * 7u + 5u, 1.0f));
        if (in.rs_gemm >= 0)
            for (int src = 0; src < P; src++) {
                char *slot = own + in.rs_off + (size_t)src * in.slot_bytes;
                if (src != me && !virt && q == 0)
                    continue;
                if (src == me)
                    XS_TRY(tp_word(t->vstream, slot, in.slot_bytes, 0xffffffffu));
                else
                    XS_TRY(tp_fill(t, (xs_bf16 *)slot, in.slot_bytes / 2,
                                   seed * 7u + 11u + (uint32_t)src, 1.0f));
            }
        /* flags: zero this problem's range everywhere (real peers: only this rank's own
         * window; a peer's is its owner's, which may still be verifying the previous
         * problem), then raise what has "arrived" */
        for (int r = 0; r < P; r++)
            if (virt || q == 1 || r == me)
                XS_TRY(tp_setflags(t->vstream, tabs[q]->flags[r], in.nflags, 0));
        for (int src = 0; src < P; src++) {
            if (src == me || (!virt && q == 0))
                continue;
            if (in.ag)
                XS_TRY(tp_setflags(t->vstream, tabs[q]->flags[me] + (size_t)src * in.ag_chunks,
                                   in.ag_chunks, XS_TP_ARRIVED));
            if (in.rs_gemm >= 0)
                XS_TRY(tp_setflags(t->vstream,
                                   tabs[q]->flags[me] + in.rs_flag0 + (size_t)src * in.t_own,
                                   in.t_own, XS_TP_ARRIVED));
        }
    }
    XS_CU(cudaStreamSynchronize(t->vstream));
    return XS_OK;
}

extern "C" xs_status xs_tp_create(const xs_tp_shape *s, const xs_wintab *tab, int grid,
                                  uint32_t seed, xs_tp **out)
{
    *out = NULL;
    xs_tp_info in;
    XS_TRY(xs_tp_info_of(s, &in));
    const char *op = xs_tp_op_name(s->op);
    if (!tab)
        return xs_seterr(XS_EINVAL, "tp %s: no window table", op);
    if (tab->nranks != s->peers)
        return xs_seterr(XS_EINVAL, "tp %s: the window table has %d ranks, the shape %d peers", op,
                         tab->nranks, s->peers);
    if (tab->rank < 0 || tab->rank >= tab->nranks)
        return xs_seterr(XS_EINVAL, "tp %s: window table rank %d outside 0..%d", op, tab->rank,
                         tab->nranks - 1);
    if (tab->bytes < in.window_bytes || tab->nflags < in.nflags)
        return xs_seterr(XS_EINVAL, "tp %s m=%d n=%d k=%d P=%d: windows hold %zu bytes and %d "
                         "flags; the problem needs %zu bytes and %d flags", op, s->m, s->n, s->k,
                         s->peers, tab->bytes, tab->nflags, in.window_bytes, in.nflags);
    for (int r = 0; r < tab->nranks; r++)
        if (!tab->data[r] || !tab->flags[r] || ((uintptr_t)tab->data[r] & 15) ||
            ((uintptr_t)tab->flags[r] & 7))
            return xs_seterr(XS_EINVAL, "tp %s: window of rank %d is NULL or misaligned", op, r);
    if (grid < 1 || grid > 1 << 20)
        return xs_seterr(XS_EINVAL, "tp %s: grid %d outside 1..%d", op, grid, 1 << 20);

    xs_tp *t = (xs_tp *)calloc(1, sizeof *t);
    if (!t)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory");
    xs_status st = xs_tp_plan_init(&t->pl, s, tab->rank, grid);
    if (st == XS_OK)
        st = tp_setup(t, s, tab, seed);
    if (st != XS_OK) {
        xs_tp_destroy(t);
        return st;
    }
    *out = t;
    return XS_OK;
}

static const char *const tp_engine_names[2] = {"mma", "sm90"};

extern "C" const char *xs_tp_engine_name(xs_tp_engine e)
{
    return (unsigned)e < 2u ? tp_engine_names[e] : "?";
}

extern "C" xs_status xs_tp_engine_parse(const char *s, xs_tp_engine *e)
{
    for (int i = 0; i < 2; i++)
        if (s && !strcmp(s, tp_engine_names[i])) {
            *e = (xs_tp_engine)i;
            return XS_OK;
        }
    return xs_seterr(XS_EINVAL, "tp: engine '%s': expected mma or sm90", s ? s : "");
}

extern "C" int xs_tp_engine_streams(xs_tp_engine e) { return e == XS_TP_ENGINE_MMA; }

extern "C" xs_status xs_tp_set_engine(xs_tp *t, xs_tp_engine e)
{
    if (e != XS_TP_ENGINE_MMA && e != XS_TP_ENGINE_SM90)
        return xs_seterr(XS_EINVAL, "tp: engine %d unknown", (int)e);
    if (e == t->engine)
        return XS_OK;
    if (t->have_exp || t->last != TP_RUN_NONE)
        return xs_seterr(XS_EINVAL, "tp: the engine is chosen before the first run (the first "
                         "local run's bytes are the expectation of the later ones)");
    if (e == XS_TP_ENGINE_SM90) {
        int major = 0, minor = 0;
        XS_CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, t->device));
        XS_CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, t->device));
        if (major != 9 || minor != 0)
            return xs_seterr(XS_EINVAL, "tp: engine sm90 needs compute capability 9.0, device "
                             "%d has %d.%d", t->device, major, minor);
    }
    t->engine = e;
    return XS_OK;
}

extern "C" xs_tp_engine xs_tp_get_engine(const xs_tp *t) { return t->engine; }

extern "C" xs_status xs_tp_set_couriers(xs_tp *t, int couriers)
{
    const xs_tp_shape *s = &t->pl.s;
    const char *op = xs_tp_op_name(s->op);
    XS_TRY(xs_tp_plan_check_couriers(&t->pl, couriers));
    if (couriers > 0 && !t->outbox && t->pl.P > 1 && t->pl.in.rs_gemm >= 0) {
        /* the outbox: this rank's partials of the other owners' rows (the remote partial bytes),
         * and one ready flag per remote tile for each window table */
        const size_t ob = (size_t)(t->pl.P - 1) * t->pl.in.slot_bytes;
        const size_t rb = (size_t)2 * (t->pl.P - 1) * t->pl.in.t_own * sizeof(uint64_t);
        /* and the split parts' scratch with its flags (xs_tp_pace.split) */
        const size_t sb = (size_t)TP_SPLIT_SLOTS(t->pl.grid) * TP_SPLIT_BYTES;
        const size_t sf = (size_t)2 * TP_SPLIT_SLOTS(t->pl.grid) * sizeof(uint64_t);
        cudaError_t e = cudaMalloc((void **)&t->outbox, ob);
        if (e == cudaSuccess)
            e = cudaMalloc((void **)&t->ready, rb);
        if (e == cudaSuccess)
            e = cudaMalloc((void **)&t->split, sb);
        if (e == cudaSuccess)
            e = cudaMalloc((void **)&t->split_ready, sf);
        if (e == cudaSuccess) /* zero before any launch may read it (the launch streams have
                                 no implicit order with the legacy stream: wait here) */
            e = cudaMemsetAsync(t->ready, 0, rb, t->vstream);
        if (e == cudaSuccess)
            e = cudaMemsetAsync(t->split_ready, 0, sf, t->vstream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(t->vstream);
        if (e != cudaSuccess) {
            cudaGetLastError();
            cudaFree(t->outbox);
            cudaFree(t->ready);
            cudaFree(t->split);
            cudaFree(t->split_ready);
            t->outbox = NULL;
            t->ready = NULL;
            t->split = NULL;
            t->split_ready = NULL;
            return xs_seterr(XS_ECUDA, "tp %s m=%d n=%d k=%d P=%d: the couriers' outbox and split "
                             "scratch (%.1f MB): %s", op, s->m, s->n, s->k, s->peers,
                             (double)(ob + rb + sb + sf) / 1e6, cudaGetErrorString(e));
        }
    }
    return xs_tp_plan_set_couriers(&t->pl, couriers);
}

extern "C" int xs_tp_get_couriers(const xs_tp *t) { return t->pl.couriers; }

extern "C" xs_status xs_tp_set_courier_pace(xs_tp *t, double bytes_per_ns)
{
    return xs_tp_plan_set_courier_pace(&t->pl, bytes_per_ns);
}

extern "C" double xs_tp_get_courier_pace(const xs_tp *t) { return t->pl.cour_pace; }

extern "C" xs_status xs_tp_set_courier_rate(xs_tp *t, double bytes_per_ns)
{
    return xs_tp_plan_set_courier_rate(&t->pl, bytes_per_ns);
}

extern "C" double xs_tp_get_courier_rate(const xs_tp *t) { return t->pl.cour_rate; }

/* Copy nslots slots between layouts on the context's internal stream (tp_slot_copy_kernel). */
xs_status tp_slot_copy(xs_tp *t, void *dst, xs_tp_layout dl, const void *src,
                              xs_tp_layout sl, int nslots)
{
    const xs_tp_info *in = &t->pl.in;
    const size_t units = (size_t)in->rs_rows * in->rs_n / 8 * (size_t)nslots;
    if (!units)
        return XS_OK;
    XS_NVTX_LAUNCH(
        "tp_slot_copy_kernel",
        tp_slot_copy_kernel<<<tp_blocks(units, 256), 256, 0, t->vstream>>>(
            (xs_bf16 *)dst, (int)dl, (const xs_bf16 *)src, (int)sl, in->rs_rows, in->rs_n, nslots));
    XS_CU_LAUNCH();
    return XS_OK;
}

extern "C" xs_status xs_tp_set_slot_layout(xs_tp *t, xs_tp_layout l)
{
    if (l != XS_TP_LAYOUT_ROW && l != XS_TP_LAYOUT_TILE)
        return xs_seterr(XS_EINVAL, "tp: slot layout %d unknown", (int)l);
    if (l == t->pl.layout)
        return XS_OK;
    const xs_tp_info *in = &t->pl.in;
    if (in->rs_gemm >= 0) {
        /* the partials this rank holds for the other sources keep their values: each slot is
         * rewritten in the new layout through a copy (fused window: virtual peers only - real
         * peers rewrite theirs every run; the local control table always) */
        void *tmp = NULL;
        XS_CU(cudaMalloc(&tmp, in->slot_bytes));
        xs_status st = XS_OK;
        const xs_wintab *tabs[2] = {&t->vt, &t->lt};
        for (int q = 0; q < 2 && st == XS_OK; q++) {
            if (q == 0 && !t->virt)
                continue;
            char *own = tabs[q]->data[t->pl.me] + in->rs_off;
            for (int src = 0; src < t->pl.P && st == XS_OK; src++) {
                if (src == t->pl.me)
                    continue;
                char *slot = own + (size_t)src * in->slot_bytes;
                cudaError_t e = cudaMemcpyAsync(tmp, slot, in->slot_bytes, cudaMemcpyDefault,
                                                t->vstream);
                if (e != cudaSuccess)
                    st = xs_seterr(XS_ECUDA, "tp: slot layout: %s", cudaGetErrorString(e));
                else
                    st = tp_slot_copy(t, slot, l, tmp, t->pl.layout, 1);
            }
        }
        cudaError_t e = cudaStreamSynchronize(t->vstream);
        cudaFree(tmp);
        if (st != XS_OK)
            return st;
        if (e != cudaSuccess)
            return xs_seterr(XS_ECUDA, "tp: slot layout: %s", cudaGetErrorString(e));
        /* the last run's slots are in the old layout: it cannot be verified any more */
        t->last = TP_RUN_NONE;
    }
    t->pl.layout = l;
    return XS_OK;
}

extern "C" xs_tp_layout xs_tp_get_slot_layout(const xs_tp *t) { return t->pl.layout; }

extern "C" void xs_tp_get_info(const xs_tp *t, xs_tp_info *info) { *info = t->pl.in; }
extern "C" void xs_tp_set_coll(xs_tp *t, const xs_tp_coll *c)
{
    t->have_coll = c != NULL;
    if (c)
        t->coll = *c;
}
extern "C" int xs_tp_real_peers(const xs_tp *t) { return !t->virt; }
extern "C" xs_tp_plan *xs_tp_plan_of(const xs_tp *t) { return (xs_tp_plan *)&t->pl; }
extern "C" int xs_tp_grid(const xs_tp *t) { return t->pl.grid; }

extern "C" void xs_tp_get_bufs(const xs_tp *t, xs_tp_bufs *b)
{
    memset(b, 0, sizeof *b);
    b->a = t->pl.s.op == XS_TP_GEMM_RS ? (const void *)t->a_rs : (const void *)t->vt.data[t->pl.me];
    b->b[0] = t->w[0];
    b->b[1] = t->w[1];
    b->rs_slots = t->pl.in.rs_gemm >= 0 ? t->vt.data[t->pl.me] + t->pl.in.rs_off : NULL;
    b->y = t->y;
    b->out0 = t->out0;
    for (int r = 0; r < t->pl.P; r++)
        b->host[r] = t->host[r];
}

extern "C" void xs_tp_reference_ptrs(const xs_tp *t, const float **ref_y, const float **ref_out0)
{
    if (ref_y)
        *ref_y = t->have_ref ? t->ref_y : NULL;
    if (ref_out0)
        *ref_out0 = t->have_ref ? t->ref_out0 : NULL;
}

/* ---- runs ---------------------------------------------------------------------------------------- */

/* Upload a task list (stream-ordered before the launch on s) and size the per-task stamps for
 * it. The copy is on s, not a cudaMemcpy on the legacy default stream: the launch stream is
 * non-blocking (no implicit order with stream 0), and a cudaMemcpy from pageable memory returns
 * once the data is staged, possibly before it has reached the device - a kernel launched right
 * after could read part of the previous contents (seen on the H200 as lists the kernel
 * reported with the wrong hash).
 * From pageable memory, cudaMemcpyAsync stages the data before it returns, so the host list may
 * change afterwards. */
static xs_status tp_upload_order(xs_tp *t, int slot, cudaStream_t s)
{
    const int n = t->pl.ntasks[slot];
    if (n > t->d_cap[slot]) {
        XS_CU(cudaStreamSynchronize(s)); /* nothing in flight may use the old list */
        cudaFree(t->d_tasks[slot]);
        t->d_tasks[slot] = NULL;
        t->d_cap[slot] = 0;
        XS_CU(cudaMalloc((void **)&t->d_tasks[slot], (size_t)n * sizeof(tp_task)));
        t->d_cap[slot] = n;
    }
    XS_CU(cudaMemcpyAsync(t->d_tasks[slot], t->pl.tasks[slot], (size_t)n * sizeof(tp_task),
                          cudaMemcpyHostToDevice, s));
    const int nw = t->pl.nwalk[slot];
    if (nw > t->d_walk_cap[slot]) {
        XS_CU(cudaStreamSynchronize(s));
        cudaFree(t->d_walk[slot]);
        t->d_walk[slot] = NULL;
        t->d_walk_cap[slot] = 0;
        XS_CU(cudaMalloc((void **)&t->d_walk[slot], (size_t)nw * sizeof(int)));
        t->d_walk_cap[slot] = nw;
    }
    if (nw > 0)
        XS_CU(cudaMemcpyAsync(t->d_walk[slot], t->pl.walk[slot], (size_t)nw * sizeof(int),
                              cudaMemcpyHostToDevice, s));
    if ((size_t)n > t->task_cap) {
        cudaFree(t->task_ns);
        t->task_ns = NULL;
        t->task_cap = 0;
        XS_CU(cudaMalloc((void **)&t->task_ns, (size_t)n * sizeof(unsigned long long)));
        t->task_cap = (size_t)n;
    }
    t->pl.dirty[slot] = 0;
    return XS_OK;
}
/* Poison every destination a run writes through `tab`, and this rank's outputs. */
static xs_status tp_poison(xs_tp *t, const xs_wintab *tab, cudaStream_t s)
{
    const xs_tp_info *in = &t->pl.in;
    const uint32_t w = 0xffffffffu; /* bf16 NaN pairs: never a result */
    for (int r = 0; r < t->pl.P; r++) {
        if (in->rs_gemm >= 0)
            XS_TRY(tp_word(s, tab->data[r] + in->rs_off + (size_t)t->pl.me * in->slot_bytes,
                           in->slot_bytes, w));
        if (in->ag && r != t->pl.me)
            XS_TRY(tp_word(s, tab->data[r] + (size_t)t->pl.me * in->shard_bytes, in->shard_bytes, w));
    }
    if (t->y)
        XS_TRY(tp_word(s, t->y, (size_t)in->rs_rows * in->rs_n * 2, w));
    if (t->out0)
        XS_TRY(tp_word(s, t->out0, (size_t)t->pl.s.m * in->out_n[0] * 2, w));
    return XS_OK;
}

static xs_status tp_flush(xs_tp *t, cudaStream_t s, int salt)
{
    XS_CU(cudaMemsetAsync(t->flush, salt & 0xff, t->flush_bytes, s));
    return XS_OK;
}

static const char *wait_kind(unsigned long long detail)
{
    switch ((int)(detail >> 60)) {
    case 1: return "a shard chunk's arrival flag";
    case 2: return "the GEMM 1 tiles of its row block";
    case 3: return "a source's partial-tile flag";
    case 4: return "an outbox tile's ready flag (courier)";
    case 5: return "an earlier part of its split tile (scratch slot flag)";
    default: return "a flag";
    }
}

/* The kernel's arguments for a launch of slot's order through tab (xs_tp_run): the task list,
 * both GEMMs (checked), the window layout, this launch's epoch and hooks. */
static xs_status tp_args_of(const xs_tp *t, int slot, const xs_wintab *tab,
                            const xs_tp_run_opts *o, unsigned long long epoch, int sym,
                            uint64_t *skip_flag, tp_args *a)
{
    const xs_tp_info *in = &t->pl.in;
    memset(a, 0, sizeof *a);
    a->tasks = t->d_tasks[slot];
    a->ntasks = t->pl.ntasks[slot];
    a->me = t->pl.me;
    a->P = t->pl.P;
    const xs_gemm_problem none = {NULL, NULL, 8, NULL, 8, 0, 0, 8};
    a->g[0] = a->g[1] = none;
    {
        xs_gemm_problem *g0 = &a->g[0];
        g0->a = t->pl.s.op == XS_TP_GEMM_RS ? t->a_rs : (const xs_bf16 *)tab->data[t->pl.me];
        g0->a_rows = NULL;
        g0->lda = in->gk[0];
        g0->b = t->w[0];
        g0->ldb = in->gk[0];
        g0->m = in->gm[0], g0->n = in->gn[0], g0->k = in->gk[0];
        XS_TRY(xs_gemm_check(g0, -1, NULL));
        if (in->ngemm > 1) {
            xs_gemm_problem *g1 = &a->g[1];
            g1->a = t->out0; /* h */
            g1->a_rows = NULL;
            g1->lda = in->out_n[0];
            g1->b = t->w[1];
            g1->ldb = in->gk[1];
            g1->m = in->gm[1], g1->n = in->gn[1], g1->k = in->gk[1];
            XS_TRY(xs_gemm_check(g1, -1, NULL));
        }
    }
    a->out0 = t->out0;
    a->ldo0 = in->out_n[0];
    a->swiglu0 = in->swiglu0;
    a->rs_gemm = in->rs_gemm;
    a->rs_rows = in->rs_rows;
    a->rs_n = in->rs_n;
    a->rs_tiles_n = in->rs_gemm >= 0 ? in->tiles_n[in->rs_gemm] : 1;
    a->t_own = in->t_own;
    a->rs_flag0 = in->rs_flag0;
    a->rs_off = in->rs_off;
    a->slots = (int)t->pl.layout;
    a->y = t->y;
    a->ag = in->ag;
    a->shard_rows = in->rs_rows;
    a->ag_k = in->ag_k;
    a->ag_chunks = in->ag_chunks;
    a->shard_bytes = in->shard_bytes;
    a->rb_count = in->ngemm > 1 ? t->rb_count : NULL;
    a->n0_per_rb = in->tiles_n[0];
    a->epoch = epoch;
    a->timeout_ns = o->timeout_ns ? o->timeout_ns : 2000000000ull;
    a->task_ns = t->task_ns;
    a->cta_ns = t->cta_ns;
    a->status = t->status;
    a->fault = o->fault;
    a->eager_flags = o->eager_flags != 0;
    a->scratch = t->scratch;
    a->list_sum = t->d_list_sum;
    a->ag_sym = sym;
    a->skip_flag = skip_flag;
    a->ag_shadow = t->ag_shadow;
    return XS_OK;
}

extern "C" xs_status xs_tp_run(xs_tp *t, int slot, const xs_tp_run_opts *o, cudaStream_t s,
                               float *ms)
{
    xs_tp_run_opts def;
    memset(&def, 0, sizeof def);
    if (!o)
        o = &def;
    if (slot < 0 || slot >= XS_TP_SLOTS || !t->pl.ntasks[slot])
        return xs_seterr(XS_EINVAL, "tp: order slot %d is empty", slot);
    const xs_tp_info *in = &t->pl.in;
    if (!xs_tp_engine_streams(t->engine))
        for (int i = 0; i < t->pl.ntasks[slot]; i++)
            if (t->pl.tasks[slot][i].kind & (XS_TP_K_DEFER | XS_TP_K_SPREAD))
                return xs_seterr(XS_EINVAL, "tp: engine %s does not stream stores, and task %d "
                                 "of slot %d is streamed (use an order with spread = 0)",
                                 xs_tp_engine_name(t->engine), i, slot);
    /* couriers: the count the order was built for (xs_tp_set_couriers) */
    const int ncour = t->pl.scour[slot];
    if (ncour > 0 && t->engine != XS_TP_ENGINE_SM90)
        return xs_seterr(XS_EINVAL, "tp: slot %d's order was built for %d couriers, which only the "
                         "sm90 engine runs (engine %s)", slot, ncour, xs_tp_engine_name(t->engine));
    if (ncour > 0 && t->pl.nwalk[slot] > t->pl.npush[slot] && !t->outbox)
        return xs_seterr(XS_EINVAL, "tp: slot %d has couriers but the context no outbox "
                         "(xs_tp_set_couriers)", slot);
    if (t->pl.nsplit[slot] > 0 && (ncour == 0 || !t->split || !t->virt))
        return xs_seterr(XS_EINVAL, "tp: slot %d holds %d split tiles, which only a courier run "
                         "with virtual peers takes (their partials are verified against the "
                         "fp32 reference at the destination)", slot, t->pl.nsplit[slot]);
    const xs_wintab *tab = o->local ? &t->lt : &t->vt;
    const unsigned long long epoch = o->local ? ++t->epoch_l : ++t->epoch_v;
    t->last = TP_RUN_NONE;

    if (t->pl.dirty[slot])
        XS_TRY(tp_upload_order(t, slot, s));
    XS_TRY(tp_poison(t, tab, s));
    if (ncour > 0 && t->outbox) /* a courier that copied before the tile was written would
                                   deliver poison, not the previous run's equal bytes */
        XS_TRY(tp_word(s, t->outbox, (size_t)(t->pl.P - 1) * in->slot_bytes, 0xffffffffu));
    XS_CU(cudaMemsetAsync(t->rb_count, 0, (size_t)in->tiles_m * sizeof(unsigned), s));
    XS_CU(cudaMemsetAsync(t->status, 0, sizeof(xs_devstatus), s));
    XS_CU(cudaMemsetAsync(t->d_list_sum, 0, sizeof(unsigned long long), s));
    /* virtual peers, fused: the other shards were placed before the launch; a GEMM 1 tile on
     * shard s waits until this rank's own chunk reached the mirror rank (when a symmetric peer's
     * chunk would arrive), so the fused timing includes the all-gather's arrival as the unfused
     * one does. The local control (the GEMM alone) does not wait. */
    const int sym = !o->local && t->virt && in->ag && t->pl.P > 1;
    /* test hook: one received chunk (chunk 0 of shard me + 1) that never arrives */
    uint64_t *fault_flag = NULL, *skip_flag = NULL;
    if (o->fault == XS_TP_FAULT_AG_FLAG && in->ag && t->pl.P > 1) {
        if (sym) {
            skip_flag = tab->flags[xs_tp_mirror(t->pl.me, (t->pl.me + 1) % t->pl.P, t->pl.P)] +
                        (size_t)t->pl.me * in->ag_chunks;
        } else {
            fault_flag = tab->flags[t->pl.me] + (size_t)((t->pl.me + 1) % t->pl.P) * in->ag_chunks;
            XS_TRY(tp_setflags(s, fault_flag, 1, 0));
        }
    }
    /* the poison has crossed the link before the timed launch starts (nothing of it queues
     * in front of the kernel's stores) */
    XS_CU(cudaStreamSynchronize(s));
    if (o->flush_l2)
        XS_TRY(tp_flush(t, s, (int)epoch));

    tp_args a;
    XS_TRY(tp_args_of(t, slot, tab, o, epoch, sym, skip_flag, &a));

    if (t->engine == XS_TP_ENGINE_SM90) {
        /* tensor maps of this run's operands (GEMM 0's A is the gathered buffer of the table
         * this run uses); host work outside the timed interval */
        tp90_maps maps;
        memset(&maps, 0, sizeof maps);
        for (int g = 0; g < in->ngemm; g++) {
            const xs_gemm_problem *p = &a.g[g];
            XS_TRY(xs_gemm90_tmap(&maps.a[g], p->a, p->m, p->k, p->lda, TP90C::BM));
            XS_TRY(xs_gemm90_tmap(&maps.b[g], p->b, p->n, p->k, p->ldb, TP90C::BN));
        }
        tp90_cour k;
        memset(&k, 0, sizeof k);
        k.ncomp = t->pl.grid - ncour;
        k.ncour = ncour;
        if (ncour > 0) {
            k.walk = t->d_walk[slot];
            k.nwalk = t->pl.nwalk[slot];
            k.outbox = t->outbox;
            k.slot_bytes = in->slot_bytes;
            k.ready = t->ready ? t->ready + (o->local ? (size_t)(t->pl.P - 1) * in->t_own : 0)
                               : NULL;
            k.pace_bytes_per_ns = (float)(t->pl.cour_pace / ncour);
            k.split = t->split;
            k.split_ready = t->split_ready ? t->split_ready +
                                                 (o->local ? (size_t)TP_SPLIT_SLOTS(t->pl.grid) : 0)
                                           : NULL;
            XS_CU(cudaFuncSetAttribute(tp90_kernel<TP90K>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       TP90K::SMEM_BYTES));
        } else {
            XS_CU(cudaFuncSetAttribute(tp90_kernel<TP90C>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       TP90C::SMEM_BYTES));
        }
        XS_CU(cudaEventRecord(t->ev0, s));
        if (ncour > 0)
            XS_NVTX_LAUNCH(
                "tp90_kernel", tp90_kernel<TP90K>
                <<<t->pl.grid, TP90K::THREADS, TP90K::SMEM_BYTES, s>>>(a, *tab, maps, k));
        else
            XS_NVTX_LAUNCH(
                "tp90_kernel", tp90_kernel<TP90C>
                <<<t->pl.grid, TP90C::THREADS, TP90C::SMEM_BYTES, s>>>(a, *tab, maps, k));
    } else {
        XS_CU(cudaFuncSetAttribute(tp_kernel<TPC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   TPC::SMEM_BYTES));
        XS_CU(cudaEventRecord(t->ev0, s));
        XS_NVTX_LAUNCH("tp_kernel",
                       tp_kernel<TPC><<<t->pl.grid, TPC::THREADS, TPC::SMEM_BYTES, s>>>(a, *tab));
    }
    XS_CU_LAUNCH();
    XS_CU(cudaEventRecord(t->ev1, s));
    /* backstop: every device wait is bounded; allow for all of them in a chain plus the work */
    const double bound_s = 60.0 + 4.0 * (double)a.timeout_ns * 1e-9;
    XS_TRY(xs_event_wait(t->ev1, bound_s, "tp kernel"));
    float e_ms = 0;
    XS_CU(cudaEventElapsedTime(&e_ms, t->ev0, t->ev1));
    if (ms)
        *ms = e_ms;
    xs_devstatus ds;
    unsigned long long lsum = 0;
    XS_CU(cudaMemcpyAsync(&ds, t->status, sizeof ds, cudaMemcpyDeviceToHost, s));
    XS_CU(cudaMemcpyAsync(&lsum, t->d_list_sum, sizeof lsum, cudaMemcpyDeviceToHost, s));
    XS_CU(cudaStreamSynchronize(s));
    if (fault_flag) {
        XS_TRY(tp_setflags(s, fault_flag, 1, XS_TP_ARRIVED));
        XS_CU(cudaStreamSynchronize(s));
    }
    t->last = o->local ? TP_RUN_LOCAL : TP_RUN_FUSED;
    t->last_slot = slot;
    t->last_epoch = epoch;
    t->last_failed = ds.code != 0;
    if (ds.code) {
        const unsigned task = (unsigned)(ds.detail & 0xffffffffu);
        const unsigned idx = (unsigned)((ds.detail >> 32) & 0x0fffffffu);
        if (ds.code == XS_DEVERR_TIMEOUT)
            return xs_seterr(XS_ETIMEOUT, "tp %s (%s): %s %u, task %u waited longer than %.3f s "
                             "for %s (%s %u)", xs_tp_op_name(t->pl.s.op),
                             o->local ? "local" : "fused",
                             (int)ds.block >= t->pl.grid - ncour ? "courier CTA" : "CTA", ds.block,
                             task, (double)a.timeout_ns * 1e-9, wait_kind(ds.detail),
                             (ds.detail >> 60) == 2 ? "row block" : "flag", idx);
        return xs_seterr(XS_ECUDA, "tp %s: device failure %u in CTA %u (detail %llu)",
                         xs_tp_op_name(t->pl.s.op), ds.code, ds.block, ds.detail);
    }
    /* the compute CTAs hash every task they read, the couriers every walk entry */
    const unsigned long long want = t->pl.list_hash[slot] + (ncour > 0 ? t->pl.walk_hash[slot] : 0ull);
    if (lsum != want) {
        t->last_failed = 1;
        return xs_seterr(XS_ECUDA, "tp %s (%s): the kernel read a task list other than the one "
                         "uploaded to slot %d (task hash %016llx, expected %016llx%s)",
                         xs_tp_op_name(t->pl.s.op), o->local ? "local" : "fused", slot, lsum, want,
                         ncour > 0 ? ", list and courier walk" : "");
    }
    return XS_OK;
}

extern "C" xs_status xs_tp_costs_of_last(xs_tp *t, xs_tp_costs *c)
{
    memset(c, 0, sizeof *c);
    if (t->last != TP_RUN_LOCAL && t->last != TP_RUN_FUSED)
        return xs_seterr(XS_EINVAL, "tp: no fused or local run to take costs from");
    const int slot = t->last_slot, n = t->pl.ntasks[slot], G = tp_compute_grid(t, slot);
    unsigned long long *tn = (unsigned long long *)malloc((size_t)n * sizeof *tn);
    unsigned long long *cn = (unsigned long long *)malloc((size_t)2 * G * sizeof *cn);
    double *d[4];
    int nd[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++)
        d[i] = (double *)malloc((size_t)n * sizeof(double));
    if (!tn || !cn || !d[0] || !d[1] || !d[2] || !d[3]) {
        free(tn), free(cn);
        for (int i = 0; i < 4; i++)
            free(d[i]);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for %d stamps", n);
    }
    xs_status st = XS_OK;
    if (cudaMemcpy(tn, t->task_ns, (size_t)n * sizeof *tn, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(cn, t->cta_ns, (size_t)2 * G * sizeof *cn, cudaMemcpyDeviceToHost) !=
            cudaSuccess) {
        st = xs_seterr(XS_ECUDA, "tp: reading stamps: %s", cudaGetErrorString(cudaGetLastError()));
    } else {
        const xs_tp_task *v = t->pl.tasks[slot];
        for (int b = 0; b < G && b < n; b++) {
            unsigned long long prev = cn[2 * b];
            for (int i = b; i < n; i += G) {
                const double dur = tn[i] > prev ? (double)(tn[i] - prev) : 0.0;
                prev = tn[i] > prev ? tn[i] : prev;
                const int f = v[i].kind & (XS_TP_K_TILE | XS_TP_K_PUSH | XS_TP_K_REDUCE);
                if (f == TP_T_TILE)
                    d[v[i].gemm][nd[v[i].gemm]++] = dur;
                else if (f == TP_T_PUSH)
                    d[2][nd[2]++] = dur;
                else if (f == TP_T_REDUCE)
                    d[3][nd[3]++] = dur;
            }
        }
        double md[4]; /* the median of each kind, 0 where none ran */
        for (int k = 0; k < 4; k++)
            md[k] = nd[k] > 0 ? xs_median(d[k], (size_t)nd[k]) : 0;
        c->tile_ns[0] = md[0];
        c->tile_ns[1] = md[1];
        c->push_ns = md[2];
        c->reduce_ns = md[3];
        c->n_tile[0] = nd[0], c->n_tile[1] = nd[1], c->n_push = nd[2], c->n_reduce = nd[3];
    }
    free(tn), free(cn);
    for (int i = 0; i < 4; i++)
        free(d[i]);
    return st;
}

/* ---- real peers: the caller's collectives (xs_tp_set_coll) ---------------------------------------- */

/* Reduce-scatter (send [m, n] partial, receive [m/P, n]) or all-gather (send own shard, receive
 * the gathered buffer, in place) through the caller's collectives. */
static xs_status tp_nccl(xs_tp *t, int allgather, const void *send, void *recv, size_t count,
                         cudaStream_t s)
{
    if (!t->have_coll || !(allgather ? (void *)t->coll.all_gather
                                     : (void *)t->coll.reduce_scatter_bf16))
        return xs_seterr(XS_EUNSUPPORTED, "tp unfused on real peers: no collectives were given "
                         "(xs_tp_set_coll)");
    return allgather ? t->coll.all_gather(t->coll.ctx, send, recv, count * 2, s)
                     : t->coll.reduce_scatter_bf16(t->coll.ctx, send, recv, count, s);
}

/* ---- the unfused baseline ------------------------------------------------------------------------ */

static xs_status tp_unfused_alloc(xs_tp *t)
{
    const xs_tp_info *in = &t->pl.in;
    const size_t m = (size_t)t->pl.s.m;
    if (t->pl.s.op != XS_TP_GEMM_RS && !t->u_c0)
        XS_CU(cudaMalloc((void **)&t->u_c0, m * in->gn[0] * 2));
    if (t->pl.s.op == XS_TP_MLP && !t->u_h)
        XS_CU(cudaMalloc((void **)&t->u_h, m * in->out_n[0] * 2));
    if (in->rs_gemm >= 0 && !t->u_c) {
        XS_CU(cudaMalloc((void **)&t->u_c, m * in->rs_n * 2));
        XS_CU(cudaMalloc((void **)&t->u_y, (size_t)in->rs_rows * in->rs_n * 2));
    }
    return XS_OK;
}

/* Before an unfused or overlapped run: poison what it writes, wait until the poison has crossed
 * the link, then overwrite L2. */
static xs_status tp_unfused_prepare(xs_tp *t, cudaStream_t s)
{
    const xs_tp_info *in = &t->pl.in;
    const int P = t->pl.P, me = t->pl.me, peer = !t->virt && P > 1;
    const size_t m = (size_t)t->pl.s.m;
    /* poison what this run writes: the other ranks' windows and the outputs (real peers: what
     * this rank receives, the other shards of its own gathered buffer; the collectives write
     * no other window) */
    const uint32_t w = 0xffffffffu;
    for (int r = 0; r < P; r++) {
        if (r == me)
            continue;
        if (peer) {
            if (in->ag)
                XS_TRY(tp_word(s, t->vt.data[me] + (size_t)r * in->shard_bytes, in->shard_bytes,
                               w));
            continue;
        }
        if (in->rs_gemm >= 0)
            XS_TRY(tp_word(s, t->vt.data[r] + in->rs_off + (size_t)me * in->slot_bytes,
                           in->slot_bytes, w));
        if (in->ag)
            XS_TRY(tp_word(s, t->vt.data[r] + (size_t)me * in->shard_bytes, in->shard_bytes, w));
    }
    if (t->u_y)
        XS_TRY(tp_word(s, t->u_y, (size_t)in->rs_rows * in->rs_n * 2, w));
    if (t->u_c0)
        XS_TRY(tp_word(s, t->u_c0, m * in->gn[0] * 2, w));
    XS_CU(cudaStreamSynchronize(s)); /* the poison has crossed the link before timing */
    XS_TRY(tp_flush(t, s, 0x5a));
    return XS_OK;
}

extern "C" xs_status xs_tp_run_unfused(xs_tp *t, xs_cublas *cb, cudaStream_t s, float *ms)
{
    if (!cb)
        return xs_seterr(XS_EINVAL, "tp unfused: no cuBLAS handle");
    const xs_tp_info *in = &t->pl.in;
    const int P = t->pl.P, me = t->pl.me, peer = !t->virt && P > 1;
    const size_t m = (size_t)t->pl.s.m;
    XS_TRY(tp_unfused_alloc(t));
    t->last = TP_RUN_NONE;
    XS_TRY(tp_unfused_prepare(t, s));

    char *own = t->vt.data[me];
    XS_CU(cudaEventRecord(t->ev0, s));
    /* all-gather */
    if (in->ag) {
        if (peer) {
            XS_TRY(tp_nccl(t, 1, own + (size_t)me * in->shard_bytes, own, in->shard_bytes / 2, s));
        } else {
            for (int j = 1; j < P; j++) {
                const int r = (me + j) % P;
                XS_CU(cudaMemcpyAsync(t->vt.data[r] + (size_t)me * in->shard_bytes,
                                      own + (size_t)me * in->shard_bytes, in->shard_bytes,
                                      cudaMemcpyDefault, s));
            }
        }
    }
    /* GEMMs */
    if (t->pl.s.op == XS_TP_GEMM_RS) {
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->pl.s.m, in->gn[0], in->gk[0], t->a_rs, t->w[0], 1, t->u_c,
                                   0));
    } else {
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->pl.s.m, in->gn[0], in->gk[0], own, t->w[0], 1, t->u_c0,
                                   0));
        if (t->pl.s.op == XS_TP_MLP) {
            const size_t nh = m * in->out_n[0];
            XS_NVTX_LAUNCH(
                "tp_swiglu_kernel", tp_swiglu_kernel<xs_bf16>
                <<<tp_blocks(nh, 256), 256, 0, s>>>(t->u_c0, t->u_h, NULL, t->pl.s.m, in->gn[0]));
            XS_CU_LAUNCH();
            XS_TRY(xs_cublas_gemm_bf16(cb, s, t->pl.s.m, in->gn[1], in->gk[1], t->u_h, t->w[1], 1,
                                       t->u_c, 0));
        }
    }
    /* reduce-scatter */
    if (in->rs_gemm >= 0) {
        if (peer) {
            XS_TRY(tp_nccl(t, 0, t->u_c, t->u_y, (size_t)in->rs_rows * in->rs_n, s));
        } else {
            for (int j = 1; j < P; j++) {
                const int r = (me + j) % P;
                XS_CU(cudaMemcpyAsync(t->vt.data[r] + in->rs_off + (size_t)me * in->slot_bytes,
                                      (const char *)t->u_c + (size_t)r * in->slot_bytes,
                                      in->slot_bytes, cudaMemcpyDefault, s));
            }
            /* this rank's copies are row-major (contiguous); the partials it received are read
             * in the context's slot layout */
            const size_t n8 = (size_t)in->rs_rows * in->rs_n / 8;
            XS_NVTX_LAUNCH("tp_sum_kernel",
                           tp_sum_kernel<<<tp_blocks(n8, 256), 256, 0, s>>>(
                               (const xs_bf16 *)(own + in->rs_off), (int)t->pl.layout,
                               t->u_c + (size_t)me * in->rs_rows * in->rs_n, P, me, in->rs_rows,
                               in->rs_n, t->u_y));
            XS_CU_LAUNCH();
        }
    }
    XS_CU(cudaEventRecord(t->ev1, s));
    XS_TRY(xs_event_wait(t->ev1, 120.0, "tp unfused"));
    float e_ms = 0;
    XS_CU(cudaEventElapsedTime(&e_ms, t->ev0, t->ev1));
    if (ms)
        *ms = e_ms;
    t->last = TP_RUN_UNFUSED;
    return XS_OK;
}

/* ---- the overlapped unfused baseline --------------------------------------------------------- */

/* Rows [*a, *b) of piece i of C of an owner's rs_rows rows: boundaries on multiples of 64 rows
 * (XS_TP_OV_ROWS); xs_tp_overlap_fits has checked that no piece is empty. */
static void tp_ov_piece(int rows, int C, int i, int *a, int *b)
{
    const int u = rows / XS_TP_OV_ROWS;
    *a = (int)((long)u * i / C) * XS_TP_OV_ROWS;
    *b = i + 1 == C ? rows : (int)((long)u * (i + 1) / C) * XS_TP_OV_ROWS;
}

extern "C" int xs_tp_overlap_fits(const xs_tp_info *in, int chunks)
{
    return chunks >= 1 && chunks <= XS_TP_OV_MAX_CHUNKS && in->rs_rows % XS_TP_OV_ROWS == 0 &&
           in->rs_rows / XS_TP_OV_ROWS >= chunks;
}

/* n events without timing, held by the context (grown on demand). */
static xs_status tp_ov_events(xs_tp *t, int n)
{
    if (!t->ov_side)
        XS_CU(cudaStreamCreateWithFlags(&t->ov_side, cudaStreamNonBlocking));
    if (n <= t->ov_nev)
        return XS_OK;
    cudaEvent_t *ev = (cudaEvent_t *)realloc(t->ov_ev, sizeof(cudaEvent_t) * (size_t)n);
    if (!ev)
        return xs_seterr(XS_ENOMEM, "out of host memory");
    t->ov_ev = ev;
    for (; t->ov_nev < n; t->ov_nev++)
        XS_CU(cudaEventCreateWithFlags(&t->ov_ev[t->ov_nev], cudaEventDisableTiming));
    return XS_OK;
}

extern "C" xs_status xs_tp_run_overlapped(xs_tp *t, xs_cublas *cb, int chunks, int copies,
                                          cudaStream_t s, float *ms)
{
    if (!cb)
        return xs_seterr(XS_EINVAL, "tp overlapped: no cuBLAS handle");
    const xs_tp_info *in = &t->pl.in;
    const xs_tp_op op = t->pl.s.op;
    const int P = t->pl.P, me = t->pl.me, C = chunks;
    if (!t->virt && P > 1)
        return xs_seterr(XS_EUNSUPPORTED, "tp overlapped: virtual peers only (real peers run "
                         "the unfused NCCL baseline)");
    if (!xs_tp_overlap_fits(in, C))
        return xs_seterr(XS_EINVAL, "tp overlapped: %d chunks of %d rows per rank (1..%d "
                         "chunks of at least %d rows)", C, in->rs_rows, XS_TP_OV_MAX_CHUNKS,
                         XS_TP_OV_ROWS);
    XS_TRY(tp_unfused_alloc(t));
    XS_TRY(tp_ov_events(t, 2 * P * C + 1));
    t->last = TP_RUN_NONE;
    XS_TRY(tp_unfused_prepare(t, s));

    cudaStream_t side = t->ov_side;
    cudaEvent_t *ev_push = t->ov_ev, *ev_done = t->ov_ev + P * C, ev_end = t->ov_ev[2 * P * C];
    char *own = t->vt.data[me];
    const size_t rr = (size_t)in->rs_rows;
    const size_t rs_row_b = (size_t)in->rs_n * 2, ag_row_b = (size_t)in->ag_k * 2;
    XS_CU(cudaEventRecord(t->ev0, s));
    XS_CU(cudaStreamWaitEvent(side, t->ev0, 0)); /* the copies start with the operation */

    /* all-gather: this rank's shard to every peer in ring order, C pieces each; piece i of the
     * push to rank r stands for piece i of the shard its mirror sends here (one GPU, virtual
     * peers: the placed shards are in the window already; the wait is what a symmetric peer's
     * arrival would cost) */
    if (in->ag && copies)
        for (int j = 1; j < P; j++) {
            const int r = (me + j) % P;
            for (int i = 0; i < C; i++) {
                int a, b;
                tp_ov_piece(in->rs_rows, C, i, &a, &b);
                const size_t off = (size_t)me * in->shard_bytes + (size_t)a * ag_row_b;
                XS_CU(cudaMemcpyAsync(t->vt.data[r] + off, own + off, (size_t)(b - a) * ag_row_b,
                                      cudaMemcpyDefault, side));
                XS_CU(cudaEventRecord(ev_push[r * C + i], side));
            }
        }

    /* Rank blocks in the order their inputs arrive (all-gather: own shard, then the shard of
     * rank me - j, whose mirror is the j-th push) or their outputs are needed (reduce-scatter:
     * the other owners first, own rows last). */
    int order[XS_MAX_RANKS];
    for (int j = 0; j < P; j++)
        order[j] = in->ag ? ((me - j) % P + P) % P : (me + 1 + j) % P;

    /* GEMM 0 (and for mlp the SwiGLU and GEMM 2) per piece; the reduce-scattered GEMM's finished
     * pieces go to their owners on the side stream */
    for (int j = 0; j < P; j++) {
        const int blk = order[j];
        for (int i = 0; i < C; i++) {
            int a, b;
            tp_ov_piece(in->rs_rows, C, i, &a, &b);
            const size_t row0 = (size_t)blk * rr + (size_t)a;
            const int rows = b - a;
            if (in->ag && blk != me && copies) {
                const int d = xs_tp_mirror(me, blk, P);
                XS_CU(cudaStreamWaitEvent(s, ev_push[d * C + i], 0));
            }
            if (op == XS_TP_GEMM_RS) {
                XS_TRY(xs_cublas_gemm_bf16(cb, s, rows, in->gn[0], in->gk[0],
                                           t->a_rs + row0 * in->gk[0], t->w[0], 1,
                                           t->u_c + row0 * in->gn[0], 0));
            } else {
                XS_TRY(xs_cublas_gemm_bf16(cb, s, rows, in->gn[0], in->gk[0],
                                           own + row0 * ag_row_b, t->w[0], 1,
                                           t->u_c0 + row0 * in->gn[0], 0));
                if (op == XS_TP_MLP) {
                    const size_t nh = (size_t)rows * in->out_n[0];
                    XS_NVTX_LAUNCH("tp_swiglu_kernel", tp_swiglu_kernel<xs_bf16>
                                   <<<tp_blocks(nh, 256), 256, 0, s>>>(
                                       t->u_c0 + row0 * in->gn[0], t->u_h + row0 * in->out_n[0],
                                       NULL, rows, in->gn[0]));
                    XS_CU_LAUNCH();
                    if (blk == me)
                        continue; /* own GEMM 2 rows: after every remote piece (below) */
                    XS_TRY(xs_cublas_gemm_bf16(cb, s, rows, in->gn[1], in->gk[1],
                                               t->u_h + row0 * in->out_n[0], t->w[1], 1,
                                               t->u_c + row0 * in->gn[1], 0));
                }
            }
            if (in->rs_gemm >= 0 && blk != me && copies) {
                XS_CU(cudaEventRecord(ev_done[blk * C + i], s));
                XS_CU(cudaStreamWaitEvent(side, ev_done[blk * C + i], 0));
                XS_CU(cudaMemcpyAsync(t->vt.data[blk] + in->rs_off +
                                          (size_t)me * in->slot_bytes + (size_t)a * rs_row_b,
                                      (const char *)t->u_c + row0 * rs_row_b,
                                      (size_t)rows * rs_row_b, cudaMemcpyDefault, side));
            }
        }
    }
    if (op == XS_TP_MLP) /* own GEMM 2 rows, hidden under the last copies */
        XS_TRY(xs_cublas_gemm_bf16(cb, s, in->rs_rows, in->gn[1], in->gk[1],
                                   t->u_h + (size_t)me * rr * in->out_n[0], t->w[1], 1,
                                   t->u_c + (size_t)me * rr * in->gn[1], 0));
    /* every copy done, then the owner-side reduction as in the unfused sequence */
    XS_CU(cudaEventRecord(ev_end, side));
    XS_CU(cudaStreamWaitEvent(s, ev_end, 0));
    if (in->rs_gemm >= 0) {
        const size_t n8 = rr * in->rs_n / 8;
        XS_NVTX_LAUNCH("tp_sum_kernel",
                       tp_sum_kernel<<<tp_blocks(n8, 256), 256, 0, s>>>(
                           (const xs_bf16 *)(own + in->rs_off), (int)t->pl.layout,
                           t->u_c + (size_t)me * rr * in->rs_n, P, me, in->rs_rows, in->rs_n,
                           t->u_y));
        XS_CU_LAUNCH();
    }
    XS_CU(cudaEventRecord(t->ev1, s));
    XS_TRY(xs_event_wait(t->ev1, 120.0, "tp overlapped"));
    float e_ms = 0;
    XS_CU(cudaEventElapsedTime(&e_ms, t->ev0, t->ev1));
    if (ms)
        *ms = e_ms;
    t->last = copies ? TP_RUN_UNFUSED : TP_RUN_NONE;
    return XS_OK;
}
