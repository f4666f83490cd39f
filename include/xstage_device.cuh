/*
 * xstage_device.cuh - store, timing, signalling and pacing primitives shared by every kernel.
 *
 * A producer is one CTA of 128 threads (one per SM). It stores with 16-byte coalesced vector
 * stores, stamps its issue with %globaltimer (ns, comparable across SMs) and clock64 (cycles,
 * fine-grained within one SM), spins for "useful work" on clock64, and signals with a flag that
 * has release semantics at system scope. Every wait here is bounded: it returns XS_WAIT_TIMEOUT
 * and the caller records the failure in an xs_devstatus that the host reads after the kernel.
 */
#ifndef XSTAGE_DEVICE_CUH
#define XSTAGE_DEVICE_CUH

#include <stdint.h>
#include "xstage_pattern.h"

#define XS_DEV static __device__ __forceinline__
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

#endif /* XSTAGE_DEVICE_CUH */
