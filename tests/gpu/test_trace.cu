// SPDX-License-Identifier: Apache-2.0
/*
 * test_trace.cu - the public trace stamps and pacers of xstage_device.cuh on one GPU.
 *
 *   - every tile of every CTA leaves one record: count, cta, sm, seq 0..T-1 once each, bytes,
 *     flags, and times monotone per CTA (work_start <= work_end <= issue_start <= issue_end <=
 *     the next tile's work_start); a tile without work stamps has work times -1;
 *   - a buffer too small: count says every attempt, exactly `capacity` records are stored and
 *     valid, nothing is written past the capacity (a guard stays poisoned); capacity 0 stores
 *     nothing; tracing off (NULL count) stores nothing and the kernel still runs;
 *   - the link pacer: CTAs sharing one link word at a rate R issue their tiles no faster than R
 *     (the issue starts, in time order, at most the backlog's slack ahead of the reservations);
 *   - the courier pacer: one CTA's chunks start at least bytes * ns_per_byte apart.
 * The last line is "N passed, N failed".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../xt.h"
#include "xstage_device.cuh"
#include "xstage_pattern.h"

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("xstage: error: %s: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__,    \
                   __LINE__);                                                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define THREADS 128
#define TILE_BYTES 8192
#define POISON 0x5a
#define TICK_NS 1100.0 /* %globaltimer may tick as coarsely as ~1 us: a bound's allowance */

/* G CTAs x T tiles: spin (work, stamped on even tiles only), then store TILE_BYTES to dst. With
 * link, each tile first reserves its bytes at ns_per_byte (slack_ns). */
__global__ void stamp_kernel(char *dst, int tiles, xs_trace_buf tb, unsigned long long *link,
                             double ns_per_byte, unsigned long long slack_ns, xs_devstatus *st,
                             int *stored)
{
    xs_trace_cta tc = xs_trace_cta_begin();
    for (int k = 0; k < tiles; k++) {
        const int work = (k & 1) == 0;
        if (threadIdx.x == 0 && work)
            xs_trace_work_start(&tc);
        xs_spin_cycles(2000 + 500 * (unsigned long long)((blockIdx.x + k) % 5));
        __syncthreads();
        if (threadIdx.x == 0) {
            if (work)
                xs_trace_work_end(&tc);
            if (link)
                xs_link_pace(link, xs_link_need_ns(TILE_BYTES, ns_per_byte), slack_ns,
                             1000000000ull, st, (unsigned int)k);
            xs_trace_issue_start(&tc);
        }
        __syncthreads();
        const uint64_t u0 = ((uint64_t)blockIdx.x * tiles + k) * (TILE_BYTES / 16);
        xs_burst_pattern(dst + 16 * u0, TILE_BYTES / 16, 3u, u0);
        __syncthreads();
        if (threadIdx.x == 0 && xs_trace_issue_end(tb, &tc, TILE_BYTES))
            atomicAdd(stored, 1);
    }
}

/* One CTA: n chunks of `bytes` through the courier pacer; starts[i] = when chunk i was let go. */
__global__ void courier_kernel(int n, double bytes, double ns_per_byte,
                               unsigned long long *starts, xs_devstatus *st)
{
    if (threadIdx.x != 0)
        return;
    unsigned long long next = 0;
    int stop = 0;
    for (int i = 0; i < n && !stop; i++) {
        xs_courier_pace(&next, bytes, ns_per_byte, 1000000000ull, st, 0u, &stop);
        starts[i] = xs_globaltimer();
    }
}

typedef struct {
    xs_trace_record *recs; /* device: capacity + guard records */
    unsigned long long *count;
    int *stored;
    char *dst;
    xs_devstatus *st;
    unsigned long long *link;
} bufs;

static int sm_count;

/* Runs stamp_kernel with the given capacity (-1: tracing off) and copies back what it wrote.
 * Returns the records (capacity + guard of them, host) and sets *count, *stored. */
static xs_trace_record *run(bufs *b, int ctas, int tiles, long long capacity, int guard,
                            double ns_per_byte, unsigned long long slack_ns,
                            unsigned long long *count, int *stored)
{
    const size_t cap = capacity > 0 ? (size_t)capacity : 0;
    CU(cudaMemset(b->recs, POISON, (cap + guard) * sizeof(xs_trace_record)));
    CU(cudaMemset(b->count, 0, sizeof *b->count));
    CU(cudaMemset(b->stored, 0, sizeof *b->stored));
    CU(cudaMemset(b->st, 0, sizeof *b->st));
    CU(cudaMemset(b->link, 0, sizeof *b->link));
    xs_trace_buf tb;
    tb.recs = capacity >= 0 ? b->recs : NULL;
    tb.capacity = (uint32_t)cap;
    tb.count = capacity >= 0 ? b->count : NULL;
    stamp_kernel<<<ctas, THREADS>>>(b->dst, tiles, tb, ns_per_byte > 0 ? b->link : NULL,
                                    ns_per_byte, slack_ns, b->st, b->stored);
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    xs_trace_record *h = (xs_trace_record *)malloc((cap + guard) * sizeof *h);
    CU(cudaMemcpy(h, b->recs, (cap + guard) * sizeof *h, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(count, b->count, sizeof *count, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(stored, b->stored, sizeof *stored, cudaMemcpyDeviceToHost));
    xs_devstatus hs;
    CU(cudaMemcpy(&hs, b->st, sizeof hs, cudaMemcpyDeviceToHost));
    XT_CHECK(hs.code == 0, "device status %u (CTA %u, detail %llu)", hs.code, hs.block,
             hs.detail);
    return h;
}

static int poisoned(const xs_trace_record *r)
{
    const unsigned char *p = (const unsigned char *)r;
    for (size_t i = 0; i < sizeof *r; i++)
        if (p[i] != POISON)
            return 0;
    return 1;
}

/* One record on its own: fields in range, times ordered, flags match the work stamps. */
static int record_ok(const xs_trace_record *r, int ctas, int tiles)
{
    if (r->cta < 0 || r->cta >= ctas || r->sm < 0 || r->sm >= sm_count || r->seq < 0 ||
        r->seq >= tiles || r->bytes != TILE_BYTES || r->issue_start_ns > r->issue_end_ns)
        return 0;
    const int work = (r->seq & 1) == 0;
    if (work)
        return r->flags == XS_TRACE_WORK && r->work_start_ns >= 0 &&
               r->work_start_ns <= r->work_end_ns && r->work_end_ns <= r->issue_start_ns;
    return r->flags == 0 && r->work_start_ns == -1 && r->work_end_ns == -1;
}

static void test_full(bufs *b)
{
    const int ctas = sm_count, tiles = 16, n = ctas * tiles;
    unsigned long long count = 0;
    int stored = 0;
    xs_trace_record *h = run(b, ctas, tiles, n, 4, 0, 0, &count, &stored);
    XT_CHECK(count == (unsigned long long)n, "count %llu, %d tiles", count, n);
    XT_CHECK(stored == n, "stored %d of %d", stored, n);
    /* per CTA, by seq: each seq once, monotone, one SM */
    xs_trace_record *by = (xs_trace_record *)calloc((size_t)n, sizeof *by);
    int bad = 0, dup = 0;
    for (int i = 0; i < n; i++) {
        if (!record_ok(&h[i], ctas, tiles)) {
            bad++;
            continue;
        }
        xs_trace_record *slot = &by[h[i].cta * tiles + h[i].seq];
        dup += slot->bytes != 0;
        *slot = h[i];
    }
    XT_CHECK(bad == 0, "%d of %d records malformed", bad, n);
    XT_CHECK(dup == 0, "%d (cta, seq) pairs recorded twice", dup);
    int missing = 0, order = 0, moved = 0;
    for (int c = 0; c < ctas; c++)
        for (int k = 0; k < tiles; k++) {
            const xs_trace_record *r = &by[c * tiles + k];
            missing += r->bytes == 0;
            if (k == 0 || r->bytes == 0 || r[-1].bytes == 0)
                continue;
            const int64_t next_start = r->flags ? r->work_start_ns : r->issue_start_ns;
            order += next_start < r[-1].issue_end_ns;
            moved += r->sm != r[-1].sm;
        }
    XT_CHECK(missing == 0, "%d (cta, seq) pairs missing", missing);
    XT_CHECK(order == 0, "%d tiles start before their CTA's previous tile ended", order);
    XT_CHECK(moved == 0, "%d records name another SM than their CTA's first", moved);
    for (int g = 0; g < 4; g++)
        XT_CHECK(poisoned(&h[n + g]), "guard record %d written", g);
    /* the payload went where the tiles say */
    char *hd = (char *)malloc((size_t)n * TILE_BYTES);
    CU(cudaMemcpy(hd, b->dst, (size_t)n * TILE_BYTES, cudaMemcpyDeviceToHost));
    XT_CHECK(xs_pattern_check((const uint32_t *)hd, (uint64_t)n * TILE_BYTES / 16, 3u, 0) == 0,
             "payload wrong");
    free(hd);
    free(by);
    free(h);
}

static void test_overflow(bufs *b)
{
    const int ctas = sm_count, tiles = 16, n = ctas * tiles;
    const long long caps[] = {n / 3, 1, 0};
    for (int i = 0; i < 3; i++) {
        const long long cap = caps[i];
        unsigned long long count = 0;
        int stored = 0;
        xs_trace_record *h = run(b, ctas, tiles, cap, 8, 0, 0, &count, &stored);
        XT_CHECK(count == (unsigned long long)n, "capacity %lld: count %llu, %d tiles", cap,
                 count, n);
        XT_CHECK(stored == cap, "capacity %lld: %d stored", cap, stored);
        XT_CHECK(count - (unsigned long long)stored == (unsigned long long)(n - cap),
                 "capacity %lld: dropped %llu", cap, count - stored);
        int bad = 0;
        for (long long j = 0; j < cap; j++)
            bad += !record_ok(&h[j], ctas, tiles);
        XT_CHECK(bad == 0, "capacity %lld: %d stored records malformed", cap, bad);
        int written = 0;
        for (int g = 0; g < 8; g++)
            written += !poisoned(&h[cap + g]);
        XT_CHECK(written == 0, "capacity %lld: %d records written past it", cap, written);
        free(h);
    }
    unsigned long long count = 0;
    int stored = 0;
    xs_trace_record *h = run(b, ctas, tiles, -1, 8, 0, 0, &count, &stored);
    XT_CHECK(count == 0 && stored == 0, "tracing off: count %llu, stored %d", count, stored);
    int written = 0;
    for (int g = 0; g < 8; g++)
        written += !poisoned(&h[g]);
    XT_CHECK(written == 0, "tracing off: %d records written", written);
    free(h);
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* 32 CTAs x 8 tiles of 8 KiB through one link at 4 B/ns (2.05 us per tile): the k-th issue start
 * in time order is at least (k - 1) x 2.05 us - slack after the first (a tile waits while the
 * backlog reserved before it exceeds the slack; the one tile of margin covers the time from the
 * first reservation to its stamp and a coarse timer tick). */
static void test_link_pace(bufs *b)
{
    const int ctas = sm_count < 32 ? sm_count : 32, tiles = 8, n = ctas * tiles;
    const double ns_per_byte = 0.25;
    const unsigned long long slack = 4000;
    unsigned long long count = 0;
    int stored = 0;
    xs_trace_record *h = run(b, ctas, tiles, n, 0, ns_per_byte, slack, &count, &stored);
    XT_CHECK(stored == n, "paced: stored %d of %d", stored, n);
    int64_t *t = (int64_t *)malloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++)
        t[i] = h[i].issue_start_ns;
    qsort(t, (size_t)n, sizeof *t, cmp_i64);
    const double need = TILE_BYTES * ns_per_byte + 1;
    int early = 0;
    for (int k = 1; k < n; k++)
        early += (double)(t[k] - t[0]) < (k - 1) * need - (double)slack;
    XT_CHECK(early == 0, "paced: %d of %d tiles issued ahead of the link's rate", early, n);
    const double span = (double)(t[n - 1] - t[0]), floor_ns = (n - 1) * need - (double)slack;
    XT_CHECK(span >= floor_ns, "paced: %d tiles issued over %.0f ns, the rate needs %.0f", n,
             span, floor_ns);
    free(t);
    free(h);
}

static void test_courier_pace(bufs *b)
{
    const int n = 20;
    const double bytes = 4096, ns_per_byte = 0.5; /* 2048 ns per chunk */
    unsigned long long *d, h[20];
    CU(cudaMalloc((void **)&d, sizeof h));
    CU(cudaMemset(b->st, 0, sizeof *b->st));
    courier_kernel<<<1, 32>>>(n, bytes, ns_per_byte, d, b->st);
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    int early = 0;
    for (int i = 1; i < n; i++)
        early += (double)(h[i] - h[0]) < i * bytes * ns_per_byte - TICK_NS;
    XT_CHECK(early == 0, "courier: %d of %d chunks let go ahead of the pace", early, n - 1);
    const double span = (double)(h[n - 1] - h[0]);
    XT_CHECK(span < 4.0 * (n - 1) * bytes * ns_per_byte,
             "courier: %d chunks took %.0f ns, far slower than the pace", n, span);
    CU(cudaFree(d));
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("xstage: error: no CUDA device\n");
        XT_CHECK(0, "no CUDA device");
        return xt_done();
    }
    CU(cudaSetDevice(0));
    CU(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
    const int max_recs = sm_count * 16 + 8;
    bufs b;
    CU(cudaMalloc((void **)&b.recs, (size_t)max_recs * sizeof(xs_trace_record)));
    CU(cudaMalloc((void **)&b.count, sizeof *b.count));
    CU(cudaMalloc((void **)&b.stored, sizeof *b.stored));
    CU(cudaMalloc((void **)&b.dst, (size_t)sm_count * 16 * TILE_BYTES));
    CU(cudaMalloc((void **)&b.st, sizeof *b.st));
    CU(cudaMalloc((void **)&b.link, sizeof *b.link));
    test_full(&b);
    test_overflow(&b);
    test_link_pace(&b);
    test_courier_pace(&b);
    return xt_done();
}
