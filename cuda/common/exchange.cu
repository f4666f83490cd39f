// SPDX-License-Identifier: Apache-2.0
/*
 * exchange.cu - the N-rank path: all-pairs stores into per-source slots, flag signals, bounded
 * flag waits, and a barrier across ranks built from flags (host-called and device-side).
 *
 * Written for N ranks (one process per GPU, peer target) and run here with one rank, or with one
 * process playing every virtual rank (virtual target: rank 0 in HBM, ranks 1..N-1 in pinned host
 * memory). Every wait is bounded by a deadline shared by the whole kernel, and a timeout comes
 * back as XS_ETIMEOUT naming the window and the source or rank that did not arrive.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "nvtx_launch.h"
#include "xstage_cuda.h"
#include "xstage_device.cuh"
#include "xstage_exchange.h"
#include "xstage_win.h"

/* What a wait kernel reports: the first failure (devstatus, detail = which flag), how many flags
 * were missing, and the value the first missing flag had. Lives in device memory; the host
 * copies it back after the kernel (no host-memory atomics). */
typedef struct {
    xs_devstatus st;
    unsigned long long missing;      /* flags that did not reach their value */
    unsigned long long seen;         /* value of the first missing flag at the deadline */
    unsigned long long missing_mask; /* barrier: bit s = rank s did not arrive */
} xs_waitrec;

/* detail = phase << 40 | window << 20 | source */
#define PHASE_DATA 1ull
#define PHASE_BARRIER 2ull
#define PHASE_FLAG 3ull

/* Wait (one thread) for *flag >= value until the kernel's deadline; on a miss record it. */
static __device__ int wait_until(const uint64_t *flag, uint64_t value, unsigned long long deadline,
                                 xs_waitrec *rec, unsigned long long detail, int bit)
{
    unsigned long long now = xs_globaltimer();
    uint64_t left = deadline > now ? deadline - now : 0;
    if (xs_wait_geq(flag, value, left) == XS_WAIT_OK)
        return 1;
    if (atomicAdd(&rec->missing, 1ull) == 0)
        rec->seen = xs_ld_acquire_sys(flag);
    if (bit >= 0)
        atomicOr(&rec->missing_mask, 1ull << bit);
    xs_devfail(&rec->st, XS_DEVERR_TIMEOUT, detail);
    return 0;
}

/* Barrier across the ranks this process plays (own_lo .. own_lo + nown - 1) and all others:
 * each own rank o arrives at every rank d (barrier flag o of d's window := epoch, release), then
 * waits until every rank s has arrived at o. Called by all threads of one CTA. */
static __device__ void flag_barrier(const xs_wintab &tab, int own_lo, int nown, uint64_t epoch,
                                    unsigned long long deadline, xs_waitrec *rec)
{
    const int n = tab.nranks;
    __syncthreads(); /* everything this CTA did before happens before the arrivals */
    for (int i = threadIdx.x; i < nown * n; i += blockDim.x) {
        int o = own_lo + i / n, d = i % n;
        xs_st_release_sys(XS_WIN_BARRIER(&tab, d) + o, epoch);
    }
    for (int i = threadIdx.x; i < nown * n; i += blockDim.x) {
        int o = own_lo + i / n, s = i % n;
        wait_until(XS_WIN_BARRIER(&tab, o) + s, epoch, deadline, rec,
                   PHASE_BARRIER << 40 | (unsigned long long)o << 20 | (unsigned long long)s, s);
    }
    __syncthreads();
}

__global__ void xs_barrier_kernel(const __grid_constant__ xs_wintab tab, int own_lo, int nown,
                                  uint64_t epoch, uint64_t timeout_ns, xs_waitrec *rec)
{
    /* stores of earlier kernels (complete: the host synchronised) are ordered before the
     * arrivals */
    __threadfence_system();
    flag_barrier(tab, own_lo, nown, epoch, xs_globaltimer() + timeout_ns, rec);
}

/* Producers: item = (pair, piece); pair = (source s, destination d), destinations staggered by
 * source so that concurrent producers spread over the destinations. The last piece of a pair to
 * finish sets flag s of d. Counters start at 0 (memset per round). */
__global__ void __launch_bounds__(XS_PRODUCER_THREADS)
    xs_exchange_send_kernel(const __grid_constant__ xs_wintab tab, int src_lo, int nsrc,
                            uint64_t n16, size_t bytes_per_pair, uint32_t seed, uint64_t epoch,
                            int pieces, unsigned int *counters)
{
    const int n = tab.nranks;
    const long long items = (long long)nsrc * n * pieces;
    for (long long it = blockIdx.x; it < items; it += gridDim.x) {
        const int pair = (int)(it / pieces), piece = (int)(it % pieces);
        const int s = src_lo + pair / n, d = (s + pair % n) % n;
        const uint64_t c0 = n16 * (uint64_t)piece / (uint64_t)pieces;
        const uint64_t c1 = n16 * (uint64_t)(piece + 1) / (uint64_t)pieces;
        char *slot = tab.data[d] + (size_t)s * bytes_per_pair;
        xs_burst_pattern(slot + 16 * c0, c1 - c0, seed ^ (uint32_t)s, (uint64_t)s * n16 + c0);
        /* the CTA's stores (ordered by the barrier) -> fence -> counter: the piece that completes
         * the pair observes every other piece's fenced increment, fences, then releases the
         * flag, so a receiver that acquires it sees the whole slot */
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence_system();
            unsigned int old = atomicAdd(&counters[pair], 1u);
            if (old == (unsigned int)pieces - 1) {
                __threadfence_system();
                xs_st_release_sys(tab.flags[d] + s, epoch);
            }
        }
        __syncthreads(); /* thread 0's signal precedes the next item's stores */
    }
}

/* Receivers: every own window waits for the flag of every source, then the barrier. */
__global__ void xs_exchange_wait_kernel(const __grid_constant__ xs_wintab tab, int own_lo,
                                        int nown, uint64_t epoch, uint64_t bepoch,
                                        uint64_t timeout_ns, xs_waitrec *rec)
{
    const int n = tab.nranks;
    const unsigned long long deadline = xs_globaltimer() + timeout_ns;
    for (int i = threadIdx.x; i < nown * n; i += blockDim.x) {
        int o = own_lo + i / n, s = i % n;
        wait_until(tab.flags[o] + s, epoch, deadline, rec,
                   PHASE_DATA << 40 | (unsigned long long)o << 20 | (unsigned long long)s, -1);
    }
    __syncthreads();
    /* a rank that is missing data stops here: its peers then time out in their barrier and
     * name it, instead of everyone reporting the same missing flag */
    if (*(volatile unsigned int *)&rec->st.code)
        return;
    flag_barrier(tab, own_lo, nown, bepoch, xs_globaltimer() + timeout_ns, rec);
}

__global__ void xs_wait_flag_kernel(const uint64_t *flag, uint64_t value, uint64_t timeout_ns,
                                    xs_waitrec *rec)
{
    wait_until(flag, value, xs_globaltimer() + timeout_ns, rec, PHASE_FLAG << 40, -1);
}

/* ---- host side ------------------------------------------------------------------------------- */

/* The own ranks of this process: [lo, lo + n). */
static void own_range(xs_winset *w, int *lo, int *n)
{
    const xs_wintab *t = xs_win_table(w);
    if (xs_win_target(w) == XS_TARGET_PEER) {
        *lo = t->rank;
        *n = 1;
    } else {
        *lo = 0;
        *n = t->nranks;
    }
}

static void rank_list(char *buf, size_t cap, unsigned long long mask)
{
    size_t len = 0;
    buf[0] = 0;
    for (int r = 0; r < 64 && len + 8 < cap; r++)
        if (mask >> r & 1)
            len += (size_t)snprintf(buf + len, cap - len, len ? ",%d" : "%d", r);
}

/* Launch-free part of every wait: copy the record back, turn a failure into one line. */
static xs_status wait_result(xs_winset *w, xs_waitrec *drec, const char *what, uint64_t timeout_ns)
{
    cudaStream_t st = (cudaStream_t)xs_win_stream(w);
    xs_waitrec rec;
    XS_CU(cudaMemcpyAsync(&rec, drec, sizeof rec, cudaMemcpyDeviceToHost, st));
    XS_CU(cudaStreamSynchronize(st));
    if (rec.st.code == 0)
        return XS_OK;
    xs_win_mark_failed(w);
    const double ms = timeout_ns / 1e6;
    const unsigned long long phase = rec.st.detail >> 40;
    const int win = (int)(rec.st.detail >> 20 & 0xfffff), src = (int)(rec.st.detail & 0xfffff);
    if (rec.st.code != XS_DEVERR_TIMEOUT)
        return xs_seterr(XS_ECUDA, "%s: device failure %u on CTA %u", what, rec.st.code,
                         rec.st.block);
    if (phase == PHASE_BARRIER) {
        char ranks[256];
        rank_list(ranks, sizeof ranks, rec.missing_mask);
        return xs_seterr(XS_ETIMEOUT, "%s: barrier timed out after %.0f ms at rank %d: rank%s %s "
                         "did not arrive", what, ms, win,
                         (rec.missing_mask & (rec.missing_mask - 1)) ? "s" : "", ranks);
    }
    if (phase == PHASE_DATA)
        return xs_seterr(XS_ETIMEOUT, "%s: the window of rank %d never got the flag of source %d "
                         "within %.0f ms (%llu flag%s missing; first one at %llu)", what, win, src,
                         ms, rec.missing, rec.missing == 1 ? "" : "s", rec.seen);
    return xs_seterr(XS_ETIMEOUT, "%s: stayed at %llu for %.0f ms", what, rec.seen, ms);
}

static xs_status alloc_rec(xs_winset *w, xs_waitrec **drec)
{
    XS_CU(cudaMalloc((void **)drec, sizeof(xs_waitrec)));
    cudaError_t e = cudaMemsetAsync(*drec, 0, sizeof(xs_waitrec), (cudaStream_t)xs_win_stream(w));
    if (e != cudaSuccess) {
        cudaFree(*drec);
        *drec = NULL;
        return xs_seterr(XS_ECUDA, "cudaMemsetAsync: %s", cudaGetErrorString(e));
    }
    return XS_OK;
}

extern "C" xs_status xs_win_barrier(xs_winset *w, int timeout_ms)
{
    const xs_wintab *t = xs_win_table(w);
    if (xs_win_target(w) != XS_TARGET_PEER || t->nranks == 1)
        return XS_OK; /* one process: nobody to wait for */
    if (timeout_ms <= 0)
        return xs_seterr(XS_EINVAL, "barrier timeout %d ms must be positive", timeout_ms);
    const uint64_t epoch = xs_win_next_barrier_epoch(w);
    const uint64_t tns = (uint64_t)timeout_ms * 1000000ull;
    XS_CU(cudaDeviceSynchronize());
    xs_waitrec *drec = NULL;
    XS_TRY(alloc_rec(w, &drec));
    int lo, n;
    own_range(w, &lo, &n);
    XS_NVTX_LAUNCH("xs_barrier_kernel",
                   xs_barrier_kernel<<<1, 64, 0, (cudaStream_t)xs_win_stream(w)>>>(*t, lo, n, epoch,
                                                                                   tns, drec));
    cudaError_t e = cudaGetLastError();
    char what[64];
    snprintf(what, sizeof what, "host barrier %llu", (unsigned long long)epoch);
    xs_status st = e == cudaSuccess ? wait_result(w, drec, what, tns)
                                    : xs_seterr(XS_ECUDA, "barrier launch: %s",
                                                cudaGetErrorString(e));
    cudaFree(drec);
    return st;
}

extern "C" xs_status xs_win_wait_flag(xs_winset *w, int rank, int flag, uint64_t value,
                                      uint64_t timeout_ns)
{
    const xs_wintab *t = xs_win_table(w);
    if (rank < 0 || rank >= t->nranks || flag < 0 || flag >= t->nflags)
        return xs_seterr(XS_EINVAL, "wait: flag %d of rank %d outside %d flags x %d windows",
                         flag, rank, t->nflags, t->nranks);
    xs_waitrec *drec = NULL;
    XS_TRY(alloc_rec(w, &drec));
    XS_NVTX_LAUNCH("xs_wait_flag_kernel",
                   xs_wait_flag_kernel<<<1, 1, 0, (cudaStream_t)xs_win_stream(w)>>>(
                       t->flags[rank] + flag, value, timeout_ns, drec));
    cudaError_t e = cudaGetLastError();
    char what[96];
    snprintf(what, sizeof what, "flag %d of rank %d's window did not reach %llu", flag, rank,
             (unsigned long long)value);
    xs_status st = e == cudaSuccess ? wait_result(w, drec, what, timeout_ns)
                                    : xs_seterr(XS_ECUDA, "wait launch: %s",
                                                cudaGetErrorString(e));
    cudaFree(drec);
    return st;
}

extern "C" size_t xs_exchange_max_bytes(const xs_winset *w)
{
    const xs_wintab *t = xs_win_table(w);
    return t->bytes / (size_t)t->nranks / 16 * 16;
}

extern "C" xs_status xs_exchange(xs_winset *w, const xs_exchange_opts *o, xs_exchange_result *r)
{
    memset(r, 0, sizeof *r);
    const xs_wintab *t = xs_win_table(w);
    const int n = t->nranks;
    const size_t bpp = o->bytes_per_pair;
    if (bpp == 0 || bpp % 16)
        return xs_seterr(XS_EINVAL, "exchange: %zu bytes per pair is not a positive multiple of "
                         "16", bpp);
    if (bpp > xs_exchange_max_bytes(w))
        return xs_seterr(XS_ERANGE, "exchange: %d slots of %zu bytes do not fit a %zu-byte "
                         "window", n, bpp, t->bytes);
    if (t->nflags < n)
        return xs_seterr(XS_EINVAL, "exchange: one flag per source is needed (%d flags < %d "
                         "ranks)", t->nflags, n);
    if (o->epoch == 0)
        return xs_seterr(XS_EINVAL, "exchange: epoch must be >= 1 (flags start at 0)");
    const uint64_t tns = o->timeout_ns ? o->timeout_ns : 10000000000ull;
    const uint64_t n16 = bpp / 16;
    int lo, nown;
    own_range(w, &lo, &nown);
    r->sources = nown;
    r->destinations = n;
    cudaStream_t st = (cudaStream_t)xs_win_stream(w);

    /* 1. own windows poisoned before any peer may store: poison, then the host barrier */
    XS_TRY(xs_win_poison(w, 0xA5));
    XS_TRY(xs_win_barrier(w, (int)(tns / 1000000ull) + 1));

    /* 2-3. producers, then the receivers' waits and the device barrier */
    const int pairs = nown * n;
    const int ctas = o->ctas > 0 ? o->ctas : xs_win_sm_count(w);
    int pieces = ctas / pairs > 1 ? ctas / pairs : 1;
    if ((uint64_t)pieces > (n16 + 127) / 128)
        pieces = (int)((n16 + 127) / 128); /* at least 2 KiB per piece */
    if (pieces < 1)
        pieces = 1;
    long long items = (long long)pairs * pieces;
    const int grid = items < ctas ? (int)items : ctas;
    const uint64_t bepoch = xs_win_next_barrier_epoch(w);

    xs_waitrec *drec = NULL;
    unsigned int *dcnt = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    xs_status s = XS_OK;
    s = alloc_rec(w, &drec);
    if (s != XS_OK)
        goto done;
    XS_CU_GOTO(s, done, cudaMalloc((void **)&dcnt, (size_t)pairs * sizeof(unsigned int)));
    XS_CU_GOTO(s, done, cudaMemsetAsync(dcnt, 0, (size_t)pairs * sizeof(unsigned int), st));
    XS_CU_GOTO(s, done, cudaEventCreate(&e0));
    XS_CU_GOTO(s, done, cudaEventCreate(&e1));
    XS_CU_GOTO(s, done, cudaEventRecord(e0, st));
    if (!o->skip_send) {
        XS_NVTX_LAUNCH("xs_exchange_send_kernel",
                       xs_exchange_send_kernel<<<grid, XS_PRODUCER_THREADS, 0, st>>>(
                           *t, lo, nown, n16, bpp, o->seed, o->epoch, pieces, dcnt));
        XS_CU_GOTO(s, done, cudaGetLastError());
    }
    XS_NVTX_LAUNCH("xs_exchange_wait_kernel", xs_exchange_wait_kernel<<<1, 256, 0, st>>>(
                                                  *t, lo, nown, o->epoch, bepoch, tns, drec));
    XS_CU_GOTO(s, done, cudaGetLastError());
    XS_CU_GOTO(s, done, cudaEventRecord(e1, st));
    XS_CU_GOTO(s, done, cudaStreamSynchronize(st));
    {
        float ms = 0;
        XS_CU_GOTO(s, done, cudaEventElapsedTime(&ms, e0, e1));
        r->ms = ms;
        char what[64];
        snprintf(what, sizeof what, "exchange epoch %llu", (unsigned long long)o->epoch);
        s = wait_result(w, drec, what, tns);
        if (s != XS_OK)
            goto done;
    }

    /* 4. every slot of every own window, destination-side */
    for (int ow = lo; ow < lo + nown; ow++)
        for (int src = 0; src < n; src++) {
            uint64_t bad = 0;
            s = xs_win_verify(w, ow, (uint64_t)src * n16, n16, o->seed ^ (uint32_t)src,
                              (uint64_t)src * n16, &bad);
            if (s != XS_OK)
                goto done;
            r->bad16 += bad;
            r->checked16 += n16;
        }
    if (r->bad16)
        s = xs_seterr(XS_EVERIFY, "exchange epoch %llu: %llu of %llu 16-byte units arrived wrong",
                      (unsigned long long)o->epoch, (unsigned long long)r->bad16,
                      (unsigned long long)r->checked16);
done:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (dcnt) cudaFree(dcnt);
    if (drec) cudaFree(drec);
    return s;
}
