// SPDX-License-Identifier: Apache-2.0
/*
 * up_runtime.cu - the attention kernel's host side (cuda/up/up.h): argument validation and the
 * launcher that picks the plain, courier or KV-split instantiation (cuda/up/up_kernel.cuh).
 * Validates its input, returns an xs_status and never exits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nvtx_launch.h"
#include "up/up_kernel.cuh"
#include "xstage_cuda.h"

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
    } else if (a->tasks) {
        if (a->signal == 0)
            return xs_seterr(XS_EINVAL, "attention: KV-split task lists need a nonzero signal "
                             "(the partials' flags carry it)");
        if (!a->task_off || !a->part || !a->part_flag || ((uintptr_t)a->part & 15) ||
            ((uintptr_t)a->part_flag & 7))
            return xs_seterr(XS_EINVAL, "attention: KV-split task lists need task offsets, a "
                             "16-byte aligned partial buffer and 8-byte aligned flags");
        if (grid < 1 || grid > tiles)
            return xs_seterr(XS_EINVAL, "attention: grid %d outside 1..%d (the tiles of seq %d x "
                             "%d heads)", grid, tiles, a->seq, a->heads);
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
        XS_CU(cudaFuncSetAttribute(xs_attn_kv_kernel<false>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_ATTN_SMEM_BYTES));
        XS_CU(cudaFuncSetAttribute(xs_attn_kv_kernel<true>,
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
    if (a->couriers > 0 || a->tasks) {
        /* couriers and last parts wait on other CTAs: all of them must run at once (a CTA that
         * waited for an SM would leave the waits to their timeout) */
        const int can = dev >= 0 && dev < XS_MAX_RANKS ? resident[dev] : 0;
        if (grid > can)
            return xs_seterr(XS_EINVAL, "attention: %s need all %d CTAs resident at once; "
                             "device %d holds %d", a->tasks ? "KV-split lists" : "couriers",
                             grid, dev, can);
    }
    xs_wintab none;
    if (!tab) {
        memset(&none, 0, sizeof none);
        tab = &none;
    }
    if (a->tasks && a->causal)
        XS_NVTX_LAUNCH("xs_attn_kv_kernel", xs_attn_kv_kernel<true>
                       <<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab));
    else if (a->tasks)
        XS_NVTX_LAUNCH("xs_attn_kv_kernel", xs_attn_kv_kernel<false>
                       <<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab));
    else if (a->couriers > 0 && a->causal)
        XS_NVTX_LAUNCH("xs_attn_courier_kernel", xs_attn_courier_kernel<true>
                       <<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab));
    else if (a->couriers > 0)
        XS_NVTX_LAUNCH("xs_attn_courier_kernel", xs_attn_courier_kernel<false>
                       <<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab));
    else if (a->causal)
        XS_NVTX_LAUNCH("xs_attn_kernel", xs_attn_kernel<true>
                       <<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab));
    else
        XS_NVTX_LAUNCH("xs_attn_kernel", xs_attn_kernel<false>
                       <<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab));
    XS_CU_LAUNCH();
    return XS_OK;
}

/* ---- the KV split's device buffers -------------------------------------------------------- */

extern "C" xs_status xs_attn_kvbuf_load(xs_attn_kvbuf *b, int grid, int tiles, const int *off,
                                        const xs_attn_kvtask *tk, int nt, int ns, cudaStream_t s)
{
    static_assert(sizeof(xs_attn_kvtask) == sizeof(int4) &&
                      alignof(xs_attn_kvtask) == alignof(int4),
                  "xs_attn_kvtask must have int4's layout");
    if (!b || grid < 1 || tiles < 1 || !off || (nt > 0 && !tk) || nt < 0 || ns < 0)
        return xs_seterr(XS_EINVAL, "KV split buffers: bad arguments (grid %d, %d tasks)", grid,
                         nt);
    unsigned char *split = (unsigned char *)calloc((size_t)tiles, 1);
    if (!split)
        return xs_seterr(XS_ENOMEM, "KV split buffers: out of host memory for %d tiles", tiles);
    for (int i = 0; i < nt; i++)
        split[tk[i].tile] |= tk[i].part >= 0;
    xs_status st = XS_OK;
    if ((size_t)grid + 1 > b->off_cap) {
        cudaFree(b->off), b->off = NULL, b->off_cap = 0;
        XS_CU_FIRST(st, cudaMalloc((void **)&b->off, (size_t)(grid + 1) * sizeof(int)));
        if (st == XS_OK)
            b->off_cap = (size_t)grid + 1;
    }
    if (st == XS_OK && (size_t)nt > b->tasks_cap) {
        cudaFree(b->tasks), b->tasks = NULL, b->tasks_cap = 0;
        XS_CU_FIRST(st, cudaMalloc((void **)&b->tasks, (size_t)nt * sizeof(int4)));
        if (st == XS_OK)
            b->tasks_cap = (size_t)nt;
    }
    /* at least one slot: the kernel wants valid pointers even with no partial at all */
    const size_t slots = ns > 0 ? (size_t)ns : 1;
    if (st == XS_OK && slots > b->slots_cap) {
        cudaFree(b->part), cudaFree(b->flag);
        b->part = NULL, b->flag = NULL, b->slots_cap = 0;
        XS_CU_FIRST(st, cudaMalloc((void **)&b->part, slots * XS_ATTN_KV_SLOT_BYTES));
        XS_CU_FIRST(st, cudaMalloc((void **)&b->flag, slots * XS_ATTN_WARPS * sizeof(uint64_t)));
        XS_CU_FIRST(st, cudaMemsetAsync(b->flag, 0, slots * XS_ATTN_WARPS * sizeof(uint64_t), s));
        if (st == XS_OK)
            b->slots_cap = slots;
    }
    if (st == XS_OK && (size_t)tiles > b->split_cap) {
        cudaFree(b->split), b->split = NULL, b->split_cap = 0;
        XS_CU_FIRST(st, cudaMalloc((void **)&b->split, (size_t)tiles));
        if (st == XS_OK)
            b->split_cap = (size_t)tiles;
    }
    if (st == XS_OK) {
        XS_CU_FIRST(st, cudaMemcpyAsync(b->off, off, (size_t)(grid + 1) * sizeof(int),
                                        cudaMemcpyHostToDevice, s));
        XS_CU_FIRST(st, cudaMemcpyAsync(b->tasks, tk, (size_t)nt * sizeof(int4),
                                        cudaMemcpyHostToDevice, s));
        XS_CU_FIRST(st, cudaMemcpyAsync(b->split, split, (size_t)tiles, cudaMemcpyHostToDevice, s));
        XS_CU_FIRST(st, cudaStreamSynchronize(s));
    }
    free(split);
    return st;
}

extern "C" void xs_attn_kvbuf_free(xs_attn_kvbuf *b)
{
    if (!b)
        return;
    cudaFree(b->off), cudaFree(b->tasks), cudaFree(b->part), cudaFree(b->flag);
    cudaFree(b->split);
    memset(b, 0, sizeof *b);
}

/* ---- real peers (-g N, docs/MULTIGPU.md) -------------------------------------------------- */

extern "C" void xs_up_peer_tables(const xs_wintab *tab, size_t region, int slot, xs_wintab *send,
                                  xs_wintab *own)
{
    const int n = tab->nranks, me = tab->rank;
    memset(send, 0, sizeof *send); /* host_mem 0: every window is device memory */
    send->nranks = n, send->rank = me, send->bytes = region, send->nflags = slot;
    *own = *send;
    for (int r = 0; r < n; r++) {
        const int d = (me + r) % n, s = (me - r + n) % n; /* r's destination; r's source here */
        send->data[r] = tab->data[d] + (size_t)me * region;
        send->flags[r] = tab->flags[d] + (size_t)me * slot;
        own->data[r] = tab->data[me] + (size_t)s * region;
        own->flags[r] = tab->flags[me] + (size_t)s * slot;
    }
}

extern "C" xs_status xs_up_alltoall(xs_coll *coll, const xs_wintab *own, const char *o,
                                    size_t shard, cudaStream_t s)
{
    const int n = own->nranks, me = own->rank;
    const void *snd[XS_MAX_RANKS];
    void *rcv[XS_MAX_RANKS];
    size_t sz[XS_MAX_RANKS];
    int to[XS_MAX_RANKS], from[XS_MAX_RANKS];
    for (int r = 0; r < n; r++)
        snd[r] = o + (size_t)r * shard, rcv[r] = own->data[r], sz[r] = shard,
        to[r] = (me + r) % n, from[r] = (me - r + n) % n;
    return xs_coll_sendrecv(coll, snd, sz, to, n, rcv, sz, from, n, (void *)s);
}
