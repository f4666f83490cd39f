// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_device.cuh - the public device API: store, timing, signalling, pacing and trace
 * primitives, shared by xstage's own kernels and by any kernel a user wants to model.
 *
 * Header-only and self-contained: it needs the CUDA headers nvcc includes anyway, <stdint.h> and
 * its companion xstage_pattern.h (the payload pattern; stdint only). Compiles for sm_80 and later;
 * the bulk (TMA) stores need sm_90.
 *
 * A producer is one CTA of 128 threads (one per SM). It stores with 16-byte coalesced vector
 * stores, stamps its issue with %globaltimer (ns, comparable across SMs) and clock64 (cycles,
 * fine-grained within one SM), spins for "useful work" on clock64, and signals with a flag that
 * has release semantics at system scope. Every wait here is bounded: it returns XS_WAIT_TIMEOUT
 * (or records the failure in an xs_devstatus that the host reads after the kernel).
 *
 * Pacers (a store rate chosen below the link's drain rate R keeps the stage from backlogging):
 * - xs_link_reserve / xs_link_pace: a software link shared by every CTA, one word in device
 *   memory; a burst reserves its bytes' time at the chosen rate (e.g. 0.9 R) and waits while the
 *   backlog reserved before it is longer than a slack.
 * - xs_courier_pace: one courier CTA's own FIFO pace (no credit for idle time).
 * - xs_bucket_take / xs_bucket_credit_wait: token buckets, one CTA's, without or with a credit.
 * Trace stamps (xs_trace_*): per CTA and tile, the issue span, the bytes and optionally the work
 * span, recorded into a fixed-capacity device buffer with an overflow count; the host writes
 * them with xs_trace_write (xstage_trace.h) in the format docs/TRACE.md describes.
 */
#ifndef XSTAGE_DEVICE_CUH
#define XSTAGE_DEVICE_CUH

#include <stdint.h>
#include "xstage_pattern.h"

#define XS_DEV static __device__ __forceinline__
#define XS_DEV_FN static __device__ /* larger helpers: inlined or not as the compiler sees fit */
#define XS_PRODUCER_THREADS 128
#define XS_WAIT_OK 0
#define XS_WAIT_TIMEOUT 1

/* ---- time -------------------------------------------------------------------------------- */

XS_DEV unsigned long long xs_globaltimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

XS_DEV unsigned long long xs_clock(void)
{
    unsigned long long c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
    return c;
}

/* Read %globaltimer right after it ticks, with the clock64 value of that instant, so that one
 * SM's cycle counter can be placed on the common ns time base to within one read. Bounded: gives
 * up after max_cycles and returns the last pair. */
XS_DEV void xs_time_anchor(unsigned long long *gt_ns, unsigned long long *clk,
                           unsigned long long max_cycles)
{
    unsigned long long c0 = xs_clock();
    unsigned long long g0 = xs_globaltimer(), g = g0, c = c0;
    while (g == g0 && c - c0 < max_cycles) {
        c = xs_clock();
        g = xs_globaltimer();
    }
    *gt_ns = g;
    *clk = c;
}

/* Useful work: spin for the given cycles (no memory traffic). */
XS_DEV void xs_spin_cycles(unsigned long long cycles)
{
    unsigned long long c0 = xs_clock();
    while (xs_clock() - c0 < cycles) {
    }
}

/* ---- stores ------------------------------------------------------------------------------ */

XS_DEV void xs_st16(void *p, uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(a), "r"(b), "r"(c),
                 "r"(d)
                 : "memory");
}

XS_DEV void xs_st16v(void *p, uint4 v) { xs_st16(p, v.x, v.y, v.z, v.w); }

/* ---- bulk stores (TMA, sm_90) ---------------------------------------------------------------
 * The SM's tensor memory accelerator copies `bytes` (a multiple of 16; both addresses 16-byte
 * aligned) from the CTA's shared memory to global memory, which may be a host or peer window:
 * one instruction per copy instead of bytes / 16 stores through the load/store unit. Each copy
 * joins the issuing thread's open bulk group; xs_bulk_commit closes it. Before a copy reads what
 * the CTA's threads wrote to shared memory with ordinary stores, every writer runs
 * xs_bulk_fence_smem and the CTA meets at a barrier (the generic proxy's writes made visible to
 * the async proxy). xs_bulk_wait_read(N) returns when at most N of the thread's committed groups
 * may still read their shared-memory source (the buffer can be rewritten); xs_bulk_wait_done(0)
 * when every copy's writes are complete. */
XS_DEV void xs_bulk_s2g(void *gdst, const void *ssrc, uint32_t bytes)
{
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gdst),
                 "r"((uint32_t)__cvta_generic_to_shared(ssrc)), "r"(bytes)
                 : "memory");
}

XS_DEV void xs_bulk_commit(void) { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

template <int N>
XS_DEV void xs_bulk_wait_read(void)
{
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

XS_DEV void xs_bulk_wait_done(void) { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

XS_DEV void xs_bulk_fence_smem(void)
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* The calling CTA stores n16 16-byte units of the pattern (seed, first_idx16 + i) to dst.
 * Coalesced: thread t stores units t, t + blockDim.x, ... Four stores in flight per thread per
 * iteration; the pattern costs one add per word per store (xstage_pattern.h), so the stores, not
 * the data generation, set the issue rate. Units beyond 2^32 within one burst are not supported
 * (64 GiB). */
XS_DEV void xs_burst_pattern(char *dst, uint64_t n16, uint32_t seed, uint64_t first_idx16)
{
    const uint32_t step = blockDim.x;
    uint32_t b0 = xs_pattern_base(seed, 0), b1 = xs_pattern_base(seed, 1);
    uint32_t b2 = xs_pattern_base(seed, 2), b3 = xs_pattern_base(seed, 3);
    uint64_t i = threadIdx.x;
    /* the high word of the index is constant over a burst except across a 2^32 boundary */
    uint32_t hi = (uint32_t)((first_idx16 + i) >> 32) * 0x85ebca6bu;
    uint32_t lin = (uint32_t)(first_idx16 + i) * XS_PATTERN_STEP;
    const uint32_t dlin = step * XS_PATTERN_STEP;
    if (((first_idx16 + n16) >> 32) != (first_idx16 >> 32)) {
        /* rare: crosses a 2^32-unit boundary; take the exact (slower) path */
        for (; i < n16; i += step) {
            uint64_t g = first_idx16 + i;
            xs_st16(dst + 16 * i, xs_pattern_word(seed, g, 0), xs_pattern_word(seed, g, 1),
                    xs_pattern_word(seed, g, 2), xs_pattern_word(seed, g, 3));
        }
        return;
    }
#pragma unroll 1
    for (; i + 3 * (uint64_t)step < n16; i += 4 * (uint64_t)step) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
            xs_st16(dst + 16 * (i + u * (uint64_t)step), (b0 + lin) ^ hi, (b1 + lin) ^ hi,
                    (b2 + lin) ^ hi, (b3 + lin) ^ hi);
            lin += dlin;
        }
    }
    for (; i < n16; i += step) {
        xs_st16(dst + 16 * i, (b0 + lin) ^ hi, (b1 + lin) ^ hi, (b2 + lin) ^ hi, (b3 + lin) ^ hi);
        lin += dlin;
    }
}

/* ---- signals ----------------------------------------------------------------------------- */

XS_DEV uint64_t xs_ld_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

XS_DEV void xs_st_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* gpu scope: flags whose writer and readers are CTAs of this GPU (couriers, grid barriers) */
XS_DEV uint64_t xs_ld_acquire_gpu(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

XS_DEV void xs_st_release_gpu(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* A strong store at system scope; after a fence.sc.sys by the same thread it is a release
 * pattern (one fence for many flags instead of one st.release.sys each). */
XS_DEV void xs_st_relaxed_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Payload first, then the flag: every thread of the CTA has issued its payload stores before the
 * barrier; the release by thread 0 is cumulative over them, so a receiver that acquires the flag
 * sees the payload. Call from all threads of the CTA. */
XS_DEV void xs_signal_cta(uint64_t *flag, uint64_t value)
{
    __syncthreads();
    if (threadIdx.x == 0)
        xs_st_release_sys(flag, value);
}

/* Wait until *flag >= value, for at most timeout_ns. One thread polls; returns XS_WAIT_OK or
 * XS_WAIT_TIMEOUT. */
XS_DEV int xs_wait_geq(const uint64_t *flag, uint64_t value, uint64_t timeout_ns)
{
    unsigned long long t0 = xs_globaltimer();
    while (xs_ld_acquire_sys(flag) < value) {
        if (xs_globaltimer() - t0 > timeout_ns)
            return XS_WAIT_TIMEOUT;
        __nanosleep(64);
    }
    return XS_WAIT_OK;
}

/* ---- device-side failure record ------------------------------------------------------------ */

/* Lives in mapped pinned host memory (or device memory copied back). The first failure wins. */
typedef struct {
    unsigned int code;   /* 0 = ok, else an XS_DEVERR_* */
    unsigned int block;  /* CTA that failed */
    unsigned long long detail; /* e.g. the flag index or the value waited for */
} xs_devstatus;

#define XS_DEVERR_TIMEOUT 1u
#define XS_DEVERR_VERIFY 2u
#define XS_DEVERR_BOUNDS 3u

XS_DEV void xs_devfail(xs_devstatus *st, unsigned int code, unsigned long long detail)
{
    if (st && atomicCAS(&st->code, 0u, code) == 0u) {
        st->block = blockIdx.x;
        st->detail = detail;
        __threadfence_system();
    }
}

/* ---- pacers ------------------------------------------------------------------------------- */

/* The link time (ns) that `bytes` reserve at a pace of ns_per_byte, rounded down, plus 1 ns so
 * that a reservation always moves the link on. Pacing at a fraction f of the drain rate R
 * (bytes/ns): ns_per_byte = 1 / (f * R) (xs_pace_ns_per_byte). */
static __host__ __device__ __forceinline__ double xs_pace_ns_per_byte(double rate_bytes_per_ns,
                                                                      double fraction)
{
    return 1.0 / (fraction * rate_bytes_per_ns);
}

XS_DEV unsigned long long xs_link_need_ns(double bytes, double ns_per_byte)
{
    return (unsigned long long)(bytes * ns_per_byte) + 1ull;
}

/* A software link, one word in device memory (zero it before the launch): the %globaltimer time
 * until which the bytes reserved so far keep the link busy. Reserves need_ns after that backlog
 * and returns 1; with `limit`, only while the backlog ends within slack_ns of now (else 0, nothing
 * reserved). d: the word as the caller last read it (a stale value costs one retry). Every pass
 * returns or lost a race to a reservation that moved the word forward, so it never waits. Any
 * thread may call it; one per CTA and burst is the intended use. */
XS_DEV_FN int xs_link_reserve(unsigned long long *word, unsigned long long d,
                              unsigned long long need_ns, int limit, unsigned long long slack_ns)
{
    for (;;) {
        const unsigned long long now = xs_globaltimer();
        if (limit && d > now + slack_ns)
            return 0;
        const unsigned long long start = d > now ? d : now;
        const unsigned long long prev = atomicCAS(word, d, start + need_ns);
        if (prev == d)
            return 1;
        d = prev; /* another burst reserved first: its bytes go before ours */
    }
}

/* The link pacer without waiting: reserves need_ns on the link and returns 1 when its backlog is
 * at most slack_ns, else returns 0 (nothing reserved). */
XS_DEV int xs_link_try(unsigned long long *word, unsigned long long need_ns,
                       unsigned long long slack_ns)
{
    return xs_link_reserve(word, *(volatile unsigned long long *)word, need_ns, 1, slack_ns);
}

/* The link pacer (one thread of the CTA, before the burst's stores; the CTA meets at a barrier
 * after it): waits until the link's backlog is at most slack_ns, then reserves need_ns. It
 * depends only on time passing (a reservation never waits for another CTA), so it cannot
 * deadlock; it is bounded by timeout_ns all the same: on a timeout it records XS_DEVERR_TIMEOUT
 * with detail (blockIdx.x << 32) | detail_lo in st (may be NULL) and returns without reserving.
 * Returns the ns waited. */
XS_DEV_FN unsigned long long xs_link_pace(unsigned long long *word, unsigned long long need_ns,
                                          unsigned long long slack_ns,
                                          unsigned long long timeout_ns, xs_devstatus *st,
                                          unsigned int detail_lo)
{
    const unsigned long long t0 = xs_globaltimer();
    while (!xs_link_try(word, need_ns, slack_ns)) {
        if (xs_globaltimer() - t0 > timeout_ns) {
            xs_devfail(st, XS_DEVERR_TIMEOUT, ((unsigned long long)blockIdx.x << 32) | detail_lo);
            break;
        }
        __nanosleep(64);
    }
    return xs_globaltimer() - t0;
}

/* A courier's pacer (one thread): a chunk may start at *next (ns, %globaltimer) at the earliest,
 * and moves *next on by bytes * ns_per_byte from when it starts: no credit for idle time, so a
 * courier that waited for its data does not burst. Each courier is a FIFO server at its share of
 * the rate (start *next at 0). A chunk that had to wait starts at *next itself, not at the timer
 * value that ended the wait: %globaltimer can tick coarsely, and the tick's overshoot must not
 * lower the rate. Bounded by timeout_ns: then records XS_DEVERR_TIMEOUT with detail
 * (blockIdx.x << 32) | detail_lo in st (may be NULL) and sets *stop = 1. Returns the ns it held
 * the chunk. */
XS_DEV_FN unsigned long long xs_courier_pace(unsigned long long *next, double bytes,
                                             double ns_per_byte, unsigned long long timeout_ns,
                                             xs_devstatus *st, unsigned int detail_lo, int *stop)
{
    const unsigned long long t0 = xs_globaltimer();
    unsigned long long now = t0;
    int waited = 0;
    while (now < *next) {
        if (now - t0 > timeout_ns) {
            xs_devfail(st, XS_DEVERR_TIMEOUT, ((unsigned long long)blockIdx.x << 32) | detail_lo);
            *stop = 1;
            break;
        }
        waited = 1;
        __nanosleep(64);
        now = xs_globaltimer();
    }
    const unsigned long long start = waited || *next > now ? *next : now;
    const double dt = bytes * ns_per_byte; /* < 1e18 ns: a rate far below any plan's */
    *next = start + (dt < 1e18 ? (unsigned long long)dt : 1000000000000000000ull);
    return now - t0;
}

/* Spin (no sleep: the pace's resolution is the timer's) until %globaltimer reaches t_ns. The
 * caller bounds t_ns (a pace's due time is at most one burst's bytes / rate ahead). */
XS_DEV void xs_spin_until(unsigned long long t_ns)
{
    while (xs_globaltimer() < t_ns) {
    }
}

/* A token bucket without credit (one thread): the next burst starts at max(due, now) (ns,
 * %globaltimer), and the caller moves its due time on to that start + the burst's bytes / rate;
 * a burst that waited for its data banks no time. The burst's stores then leave no earlier than
 * start + (their offset) / rate (xs_spin_until). xs_bucket_take does both steps. */
XS_DEV unsigned long long xs_bucket_start(unsigned long long due)
{
    const unsigned long long now = xs_globaltimer();
    return max(due, now);
}

XS_DEV unsigned long long xs_bucket_take(unsigned long long *due, double bytes,
                                         double bytes_per_ns)
{
    const unsigned long long start = xs_bucket_start(*due);
    *due = start + (unsigned long long)(bytes / bytes_per_ns);
    return start;
}

/* A token bucket with a credit (one thread; times in ns from t_start): a burst due at due_ns
 * leaves at go = max(due_ns, now - credit_ns), after a spin until then; the caller then moves
 * its due time to go + the burst's bytes / rate. The credit is what the CTA may bank while it
 * idles (waiting for data that arrives in waves). Returns go. Bounded: go - now <= the previous
 * burst's time. */
XS_DEV double xs_bucket_credit_wait(double due_ns, unsigned long long t_start, double credit_ns)
{
    const double now = (double)(xs_globaltimer() - t_start);
    const double go = fmax(due_ns, now - credit_ns);
    while ((double)(xs_globaltimer() - t_start) < go) {
    }
    return go;
}

/* ---- trace stamps ---------------------------------------------------------------------------
 * One record per (CTA, tile): when the CTA began and finished issuing the tile's stores, the
 * bytes they stored, and optionally the compute span that produced the tile, all on %globaltimer
 * (ns). The layout is the core's (xstage_trace.h defines the same struct under the same guard, so
 * a .cu that includes both compiles). The host allocates recs[capacity] and a zeroed count (device
 * or mapped pinned memory), passes the xs_trace_buf by value, and after the kernel writes
 * min(count, capacity) records with xs_trace_write, dropped = count - capacity when above. */
#ifndef XS_TRACE_RECORD_DEFINED
#define XS_TRACE_RECORD_DEFINED
typedef struct xs_trace_record {
    int32_t cta, sm, seq, flags;      /* flags: XS_TRACE_WORK when the work span is recorded */
    int64_t bytes;                    /* stored by this tile */
    int64_t issue_start_ns, issue_end_ns; /* first store issued .. last store issued */
    int64_t work_start_ns, work_end_ns;   /* the tile's compute span; -1 when not recorded */
} xs_trace_record;
#endif
#define XS_TRACE_WORK 1

typedef struct xs_trace_buf {
    xs_trace_record *recs;     /* [capacity]; NULL (with count NULL): tracing off */
    uint32_t capacity;         /* records */
    unsigned long long *count; /* records attempted; dropped = max(0, count - capacity) */
} xs_trace_buf;

/* The SM the calling thread runs on. */
XS_DEV int32_t xs_smid(void)
{
    uint32_t s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return (int32_t)s;
}

/* Append one record (one thread). Takes a slot with atomicAdd on *count; past the capacity the
 * record is dropped (the count still says it was attempted). Returns 1 when stored, 0 when
 * dropped or tracing is off. */
XS_DEV int xs_trace_put(xs_trace_buf b, const xs_trace_record &r)
{
    if (!b.count)
        return 0;
    const unsigned long long slot = atomicAdd(b.count, 1ull);
    if (slot >= b.capacity)
        return 0;
    b.recs[slot] = r;
    return 1;
}

/* One CTA's stamps (thread 0 keeps it in registers): a tile's work and issue spans, then
 * xs_trace_tile_end appends the record and moves on to the next tile (seq + 1).
 *
 *     xs_trace_cta tc = xs_trace_cta_begin();          // every thread may hold it; thread 0 stamps
 *     for each tile:
 *         if (tid == 0) xs_trace_work_start(&tc);
 *         ... compute ...
 *         __syncthreads();
 *         if (tid == 0) { xs_trace_work_end(&tc); xs_trace_issue_start(&tc); }
 *         ... every thread's stores of the tile ...
 *         __syncthreads();                              // all stores issued
 *         if (tid == 0) xs_trace_issue_end(buf, &tc, tile_bytes);
 */
typedef struct xs_trace_cta {
    int32_t cta, sm, seq;
    int64_t work_start_ns, work_end_ns, issue_start_ns;
} xs_trace_cta;

XS_DEV xs_trace_cta xs_trace_cta_begin(void)
{
    xs_trace_cta t;
    t.cta = (int32_t)blockIdx.x;
    t.sm = xs_smid();
    t.seq = 0;
    t.work_start_ns = t.work_end_ns = -1;
    t.issue_start_ns = -1;
    return t;
}

XS_DEV void xs_trace_work_start(xs_trace_cta *t) { t->work_start_ns = (int64_t)xs_globaltimer(); }
XS_DEV void xs_trace_work_end(xs_trace_cta *t) { t->work_end_ns = (int64_t)xs_globaltimer(); }
XS_DEV void xs_trace_issue_start(xs_trace_cta *t)
{
    t->issue_start_ns = (int64_t)xs_globaltimer();
}

/* Closes the tile: stamps issue_end now, appends the record (xs_trace_put) and resets the spans
 * for the next tile. A tile without xs_trace_work_* calls has no work span (both -1); one without
 * xs_trace_issue_start gets issue_start = issue_end. Returns xs_trace_put's result. */
XS_DEV int xs_trace_issue_end(xs_trace_buf b, xs_trace_cta *t, int64_t bytes)
{
    xs_trace_record r;
    r.issue_end_ns = (int64_t)xs_globaltimer();
    r.cta = t->cta;
    r.sm = t->sm;
    r.seq = t->seq++;
    const int work = t->work_start_ns >= 0 && t->work_end_ns >= t->work_start_ns;
    r.flags = work ? XS_TRACE_WORK : 0;
    r.bytes = bytes;
    r.issue_start_ns = t->issue_start_ns >= 0 ? t->issue_start_ns : r.issue_end_ns;
    r.work_start_ns = work ? t->work_start_ns : -1;
    r.work_end_ns = work ? t->work_end_ns : -1;
    t->work_start_ns = t->work_end_ns = t->issue_start_ns = -1;
    return xs_trace_put(b, r);
}

#endif /* XSTAGE_DEVICE_CUH */
