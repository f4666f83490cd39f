// SPDX-License-Identifier: Apache-2.0
/*
 * win.cu - destination windows for all four targets behind one pointer table (xstage_win.h):
 * local HBM, pinned host memory, virtual peers (1 local + N-1 host windows) and real peers
 * (NCCL symmetric windows through cuda/common/nccl.cu). Also destination-side verification: host
 * windows are read by the CPU (threads for large ones), device windows by a GPU kernel on their
 * own GPU.
 *
 * Window layout (xstage_exchange.h): payload, then at a 128-byte aligned offset the user flags,
 * then XS_MAX_RANKS barrier flags. The 128-byte gap keeps flag polling off the payload's last
 * cache line.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "nvtx_launch.h"
#include "xstage_cuda.h"
#include "xstage_device.cuh"
#include "xstage_exchange.h"
#include "xstage_launch.h"
#include "xstage_pattern.h"
#include "xstage_win.h"

#define FLAG_ALIGN 128

struct xs_winset {
    xs_win_opts o;
    xs_wintab tab;
    int device;
    int sm_count;
    size_t flag_off;                 /* payload start -> user flags, bytes */
    size_t win_bytes;                /* one window: payload, gap, user and barrier flags */
    char *dev_base;                  /* cudaMalloc window (local; virtual rank 0) */
    char *host_base[XS_MAX_RANKS];   /* pinned windows, host addresses (host: [0]; virtual) */
    char *peer_local;                /* this rank's ncclMemAlloc window (peer) */
    xs_nccl_comm *nccl;
    cudaStream_t stream;
    unsigned long long *dcount;      /* verify kernel's mismatch counter (device) */
    uint64_t barrier_epoch;
    int failed;
};

extern "C" xs_status xs_target_parse(const char *s, xs_target *t)
{
    static const char *names[] = {"local", "host", "virtual", "peer"};
    for (int i = 0; i < 4; i++)
        if (s && !strcmp(s, names[i])) {
            *t = (xs_target)i;
            return XS_OK;
        }
    return xs_seterr(XS_EINVAL, "unknown target '%s' (local, host, virtual or peer)",
                     s ? s : "");
}

extern "C" const char *xs_target_name(xs_target t)
{
    switch (t) {
    case XS_TARGET_LOCAL: return "local";
    case XS_TARGET_HOST: return "host";
    case XS_TARGET_VIRTUAL: return "virtual";
    case XS_TARGET_PEER: return "peer";
    }
    return "?";
}

extern "C" const xs_wintab *xs_win_table(const xs_winset *w) { return &w->tab; }
extern "C" xs_target xs_win_target(const xs_winset *w) { return w->o.target; }
extern "C" void *xs_win_stream(xs_winset *w) { return (void *)w->stream; }
extern "C" uint64_t xs_win_next_barrier_epoch(xs_winset *w) { return ++w->barrier_epoch; }
extern "C" void xs_win_mark_failed(xs_winset *w) { w->failed = 1; }
extern "C" int xs_win_sm_count(const xs_winset *w) { return w->sm_count; }

extern "C" int xs_win_owns(const xs_winset *w, int r)
{
    if (r < 0 || r >= w->tab.nranks)
        return 0;
    return w->o.target == XS_TARGET_PEER ? r == w->tab.rank : 1;
}

/* The own window of rank r as this process addresses it: *host = 1 for pinned memory (a host
 * address the CPU may touch), else a device address on this GPU. */
static char *own_window(const xs_winset *w, int r, int *host)
{
    *host = w->tab.host_mem[r];
    switch (w->o.target) {
    case XS_TARGET_LOCAL: return w->dev_base;
    case XS_TARGET_HOST: return w->host_base[0];
    case XS_TARGET_VIRTUAL: return r == 0 ? w->dev_base : w->host_base[r];
    case XS_TARGET_PEER: return w->peer_local;
    }
    return NULL;
}

/* ---- allocation ------------------------------------------------------------------------------ */

static xs_status alloc_device(xs_winset *w, const char *what)
{
    cudaError_t e = cudaMalloc((void **)&w->dev_base, w->win_bytes);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* allocation failures are not sticky; clear it */
        w->dev_base = NULL;
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        return xs_seterr(XS_ECUDA, "out of device memory: cudaMalloc(%.1f MiB) for %s failed "
                         "(%.1f MiB free of %.1f MiB): %s", w->win_bytes / 1048576.0, what,
                         fr / 1048576.0, tot / 1048576.0, cudaGetErrorString(e));
    }
    XS_CU(cudaMemset(w->dev_base, 0, w->win_bytes));
    return XS_OK;
}

static xs_status alloc_host(xs_winset *w, int r, const char *what)
{
    /* more than the host has can never be pinned: say so before the driver tries (pinning
     * page by page towards an impossible size would only squeeze the rest of the host) */
    const double host_bytes = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (host_bytes > 0 && (double)w->win_bytes > host_bytes)
        return xs_seterr(XS_ECUDA, "out of pinned host memory: %.1f MiB for %s is more than the "
                         "host's %.1f MiB", w->win_bytes / 1048576.0, what, host_bytes / 1048576.0);
    char *h = NULL;
    cudaError_t e = cudaHostAlloc((void **)&h, w->win_bytes, cudaHostAllocMapped);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return xs_seterr(XS_ECUDA, "out of pinned host memory: cudaHostAlloc(%.1f MiB) for %s "
                         "failed: %s", w->win_bytes / 1048576.0, what, cudaGetErrorString(e));
    }
    w->host_base[r] = h;
    memset(h, 0, w->win_bytes);
    void *d = NULL;
    XS_CU(cudaHostGetDevicePointer(&d, h, 0));
    w->tab.data[r] = (char *)d;
    w->tab.flags[r] = (uint64_t *)((char *)d + w->flag_off);
    w->tab.host_mem[r] = 1;
    return XS_OK;
}

static xs_status open_peer(xs_winset *w)
{
    int rank = 0, n = 1, have = 0;
    unsigned char id[XS_NCCL_ID_BYTES];
    XS_TRY(xs_rank_env(&rank, &n, id, &have));
    if (!have) {
        /* not started by the launcher: a one-rank communicator over this process's window */
        XS_TRY(xs_nccl_unique_id(id));
    }
    void *peers[XS_MAX_RANKS], *local = NULL;
    XS_TRY(xs_nccl_open(n, rank, id, w->win_bytes, &w->nccl, &local, peers));
    w->peer_local = (char *)local;
    w->tab.nranks = n;
    w->tab.rank = rank;
    for (int p = 0; p < n; p++) {
        w->tab.data[p] = (char *)peers[p];
        w->tab.flags[p] = (uint64_t *)((char *)peers[p] + w->flag_off);
    }
    return XS_OK;
}

static xs_status win_open(const xs_win_opts *o, xs_winset *w)
{
    if (o->bytes == 0 || o->bytes % 16)
        return xs_seterr(XS_EINVAL, "window of %zu bytes: the payload must be a positive multiple "
                         "of 16 bytes", o->bytes);
    if (o->nflags < 1 || o->nflags > 65536)
        return xs_seterr(XS_EINVAL, "window with %d flags: between 1 and 65536 are supported",
                         o->nflags);
    if (o->target == XS_TARGET_VIRTUAL && (o->virtual_peers < 1 || o->virtual_peers > XS_MAX_RANKS))
        return xs_seterr(XS_EINVAL, "--virtual-peers %d: between 1 and %d are supported",
                         o->virtual_peers, XS_MAX_RANKS);
    if ((int)o->target < 0 || o->target > XS_TARGET_PEER)
        return xs_seterr(XS_EINVAL, "unknown window target %d", (int)o->target);
    w->flag_off = (o->bytes + FLAG_ALIGN - 1) / FLAG_ALIGN * FLAG_ALIGN;
    w->win_bytes = w->flag_off + ((size_t)o->nflags + XS_MAX_RANKS) * sizeof(uint64_t);

    int count = 0;
    XS_TRY(xs_gpu_count(&count));
    if (count == 0)
        return xs_seterr(XS_ECUDA, "no CUDA GPU: no device is visible");
    w->device = xs_rank_device(o->device);
    if (w->device < 0 || w->device >= count)
        return xs_seterr(XS_ECUDA, "GPU %d does not exist: %d visible", w->device, count);
    XS_CU(cudaSetDevice(w->device));
    XS_CU(cudaDeviceGetAttribute(&w->sm_count, cudaDevAttrMultiProcessorCount, w->device));
    XS_CU(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
    XS_CU(cudaMalloc((void **)&w->dcount, sizeof(unsigned long long)));

    w->tab.bytes = o->bytes;
    w->tab.nflags = o->nflags;
    w->tab.nranks = 1;
    w->tab.rank = 0;
    char what[64];
    switch (o->target) {
    case XS_TARGET_LOCAL:
        XS_TRY(alloc_device(w, "the local window"));
        w->tab.data[0] = w->dev_base;
        w->tab.flags[0] = (uint64_t *)(w->dev_base + w->flag_off);
        break;
    case XS_TARGET_HOST:
        XS_TRY(alloc_host(w, 0, "the host window"));
        break;
    case XS_TARGET_VIRTUAL:
        w->tab.nranks = o->virtual_peers;
        XS_TRY(alloc_device(w, "virtual peer 0 (local)"));
        w->tab.data[0] = w->dev_base;
        w->tab.flags[0] = (uint64_t *)(w->dev_base + w->flag_off);
        for (int r = 1; r < o->virtual_peers; r++) {
            snprintf(what, sizeof what, "virtual peer %d of %d", r, o->virtual_peers);
            XS_TRY(alloc_host(w, r, what));
        }
        break;
    case XS_TARGET_PEER:
        XS_TRY(open_peer(w));
        break;
    }
    XS_CU(cudaDeviceSynchronize());
    return XS_OK;
}

extern "C" xs_status xs_win_open(const xs_win_opts *o, xs_winset **out)
{
    *out = NULL;
    if (!o)
        return xs_seterr(XS_EINVAL, "xs_win_open: no options");
    xs_winset *w = (xs_winset *)calloc(1, sizeof *w);
    if (!w)
        return xs_seterr(XS_ENOMEM, "out of host memory");
    w->o = *o;
    xs_status st = win_open(o, w);
    if (st != XS_OK) {
        w->failed = 1; /* a half-open peer set must not run collective teardown */
        xs_win_close(w);
        return st;
    }
    *out = w;
    return XS_OK;
}

extern "C" void xs_win_close(xs_winset *w)
{
    if (!w)
        return;
    cudaDeviceSynchronize(); /* nothing may still store into what is freed */
    if (w->nccl)
        xs_nccl_close(w->nccl, w->failed);
    if (w->dev_base)
        cudaFree(w->dev_base);
    for (int r = 0; r < XS_MAX_RANKS; r++)
        if (w->host_base[r])
            cudaFreeHost(w->host_base[r]);
    if (w->dcount)
        cudaFree(w->dcount);
    if (w->stream)
        cudaStreamDestroy(w->stream);
    free(w);
}

/* ---- reset -------------------------------------------------------------------------------- */

static xs_status fill_own(xs_winset *w, unsigned char poison, int flags_too)
{
    /* kernels of any stream may still write the windows: wait for all of them */
    XS_CU(cudaDeviceSynchronize());
    for (int r = 0; r < w->tab.nranks; r++) {
        if (!xs_win_owns(w, r))
            continue;
        int host = 0;
        char *p = own_window(w, r, &host);
        if (host) {
            memset(p, poison, w->o.bytes);
            if (flags_too)
                memset(p + w->flag_off, 0, (size_t)w->o.nflags * sizeof(uint64_t));
        } else {
            XS_CU(cudaMemsetAsync(p, poison, w->o.bytes, w->stream));
            if (flags_too)
                XS_CU(cudaMemsetAsync(p + w->flag_off, 0, (size_t)w->o.nflags * sizeof(uint64_t),
                                      w->stream));
        }
    }
    XS_CU(cudaStreamSynchronize(w->stream));
    return XS_OK;
}

extern "C" xs_status xs_win_poison(xs_winset *w, unsigned char poison)
{
    return fill_own(w, poison, 0);
}

extern "C" xs_status xs_win_reset(xs_winset *w, unsigned char poison)
{
    XS_TRY(fill_own(w, poison, 1));
    /* several ranks: collective, so that no peer stores or signals into a window before its
     * owner has reset it (the barrier flags themselves are never reset) */
    if (w->o.target == XS_TARGET_PEER && w->tab.nranks > 1)
        XS_TRY(xs_win_barrier(w, 60000));
    return XS_OK;
}

/* ---- verification ---------------------------------------------------------------------------- */

/* Count 16-byte units that differ from the pattern. A warp sums its threads' counts and one lane
 * adds them to the global counter. Loads bypass L1 (ld.global.cv): the data was written by other
 * SMs or other GPUs. */
__global__ void xs_verify_kernel(const uint4 *p, uint64_t n16, uint32_t seed, uint64_t first16,
                                 unsigned long long *bad)
{
    const uint32_t b0 = xs_pattern_base(seed, 0), b1 = xs_pattern_base(seed, 1);
    const uint32_t b2 = xs_pattern_base(seed, 2), b3 = xs_pattern_base(seed, 3);
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    unsigned int mine = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride) {
        uint4 v = __ldcv(p + i);
        uint64_t g = first16 + i;
        uint32_t lin = (uint32_t)g * XS_PATTERN_STEP, hi = (uint32_t)(g >> 32) * 0x85ebca6bu;
        mine += ((v.x ^ ((b0 + lin) ^ hi)) | (v.y ^ ((b1 + lin) ^ hi)) |
                 (v.z ^ ((b2 + lin) ^ hi)) | (v.w ^ ((b3 + lin) ^ hi))) != 0;
    }
    /* every thread reaches this point: the loop has no early exit */
    mine = __reduce_add_sync(0xffffffffu, mine);
    if ((threadIdx.x & 31) == 0 && mine)
        atomicAdd(bad, (unsigned long long)mine);
}

typedef struct {
    const uint32_t *base;
    uint64_t n16, first16, bad;
    uint32_t seed;
} check_job;

static void *check_thread(void *arg)
{
    check_job *j = (check_job *)arg;
    j->bad = xs_pattern_check(j->base, j->n16, j->seed, j->first16);
    return NULL;
}

/* CPU check of a host window: up to 16 threads, each at least 1 Mi units (16 MiB). */
static uint64_t check_host(const char *p, uint64_t n16, uint32_t seed, uint64_t first16)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t nt = n16 >> 20;
    if (nt > 16) nt = 16;
    if (ncpu > 0 && nt > (uint64_t)ncpu) nt = (uint64_t)ncpu;
    if (nt < 2)
        return xs_pattern_check((const uint32_t *)p, n16, seed, first16);
    check_job jobs[16];
    pthread_t th[16];
    int started[16] = {0};
    for (uint64_t t = 0; t < nt; t++) {
        uint64_t a = n16 * t / nt, b = n16 * (t + 1) / nt;
        jobs[t].base = (const uint32_t *)(p + 16 * a);
        jobs[t].n16 = b - a;
        jobs[t].first16 = first16 + a;
        jobs[t].seed = seed;
        jobs[t].bad = 0;
        started[t] = pthread_create(&th[t], NULL, check_thread, &jobs[t]) == 0;
        if (!started[t])
            check_thread(&jobs[t]); /* no thread: do this share here */
    }
    uint64_t bad = 0;
    for (uint64_t t = 0; t < nt; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
        bad += jobs[t].bad;
    }
    return bad;
}

extern "C" xs_status xs_dest_state_parse(const char *s, xs_dest_state *out)
{
    static const char *const names[] = {"keep", "flush", "dirty"};
    for (int i = 0; i < 3; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *out = (xs_dest_state)i;
            return XS_OK;
        }
    return xs_seterr(XS_EINVAL, "destination state '%s': expected keep, flush or dirty",
                     s ? s : "");
}

extern "C" const char *xs_dest_state_name(xs_dest_state d)
{
    return d == XS_DEST_FLUSH ? "flush" : d == XS_DEST_DIRTY ? "dirty" : "keep";
}

extern "C" xs_status xs_win_host_state(xs_winset *w, int rank, uint64_t off16, uint64_t n16,
                                       xs_dest_state d)
{
    if (d == XS_DEST_KEEP || n16 == 0)
        return XS_OK;
    if (rank < 0 || rank >= w->tab.nranks || !xs_win_owns(w, rank))
        return xs_seterr(XS_EINVAL, "destination state: rank %d is not a window of this process",
                         rank);
    const uint64_t cap16 = w->o.bytes / 16;
    if (off16 > cap16 || n16 > cap16 - off16)
        return xs_seterr(XS_ERANGE, "destination state: units [%llu, %llu) outside the window",
                         (unsigned long long)off16, (unsigned long long)(off16 + n16));
    int host = 0;
    char *p = own_window(w, rank, &host) + 16 * off16;
    if (!host)
        return XS_OK;
    if (d == XS_DEST_DIRTY) {
        /* rewrite every line with its own content: modified in the CPU's caches, data intact */
        volatile uint64_t *q = (volatile uint64_t *)p;
        for (uint64_t i = 0; i < 2 * n16; i += 8)
            q[i] = q[i];
        return XS_OK;
    }
#if defined(__x86_64__) || defined(__i386__)
    for (uint64_t b = 0; b < 16 * n16; b += 64)
        __builtin_ia32_clflush(p + b);
    __builtin_ia32_mfence();
    return XS_OK;
#else
    return xs_seterr(XS_EINVAL, "destination state flush: no cache-line flush on this CPU");
#endif
}

extern "C" xs_status xs_win_verify(xs_winset *w, int rank, uint64_t off16, uint64_t n16,
                                   uint32_t seed, uint64_t first_idx16, uint64_t *bad)
{
    *bad = 0;
    if (rank < 0 || rank >= w->tab.nranks)
        return xs_seterr(XS_EINVAL, "verify: rank %d outside the %d windows", rank,
                         w->tab.nranks);
    if (!xs_win_owns(w, rank))
        return xs_seterr(XS_EINVAL, "verify: rank %d's window belongs to another process (rank "
                         "%d verifies only its own)", rank, w->tab.rank);
    const uint64_t cap16 = w->o.bytes / 16;
    if (off16 > cap16 || n16 > cap16 - off16)
        return xs_seterr(XS_ERANGE, "verify: units [%llu, %llu) outside the %llu-unit window",
                         (unsigned long long)off16, (unsigned long long)(off16 + n16),
                         (unsigned long long)cap16);
    if (n16 == 0)
        return XS_OK;
    XS_CU(cudaDeviceSynchronize()); /* the writers are done (and their stores performed) */
    int host = 0;
    char *p = own_window(w, rank, &host) + 16 * off16;
    if (host) {
        *bad = check_host(p, n16, seed, first_idx16);
        return XS_OK;
    }
    unsigned long long got = 0;
    XS_CU(cudaMemsetAsync(w->dcount, 0, sizeof got, w->stream));
    uint64_t blocks = (n16 + 255) / 256;
    const uint64_t max_blocks = (uint64_t)(w->sm_count > 0 ? w->sm_count : 1) * 8;
    if (blocks > max_blocks)
        blocks = max_blocks;
    XS_NVTX_LAUNCH("xs_verify_kernel", xs_verify_kernel<<<(unsigned)blocks, 256, 0, w->stream>>>(
                                           (const uint4 *)p, n16, seed, first_idx16, w->dcount));
    XS_CU_LAUNCH();
    XS_CU(cudaMemcpyAsync(&got, w->dcount, sizeof got, cudaMemcpyDeviceToHost, w->stream));
    XS_CU(cudaStreamSynchronize(w->stream));
    *bad = got;
    return XS_OK;
}
