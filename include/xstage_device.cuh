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

XS_DEV uint64_t xs_globaltimer(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

XS_DEV uint64_t xs_clock(void)
{
    uint64_t c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
    return c;
}

/* Read %globaltimer right after it ticks, with the clock64 value of that instant, so that one
 * SM's cycle counter can be placed on the common ns time base to within one read. Bounded: gives
 * up after max_cycles and returns the last pair. */
XS_DEV void xs_time_anchor(uint64_t *gt_ns, uint64_t *clk, uint64_t max_cycles)
{
    uint64_t c0 = xs_clock();
    uint64_t g0 = xs_globaltimer(), g = g0, c = c0;
    while (g == g0 && c - c0 < max_cycles) {
        c = xs_clock();
        g = xs_globaltimer();
    }
    *gt_ns = g;
    *clk = c;
}

/* Useful work: spin for the given cycles (no memory traffic). */
XS_DEV void xs_spin_cycles(uint64_t cycles)
{
    uint64_t c0 = xs_clock();
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

/* The calling CTA stores n16 16-byte units of the pattern (seed, first_idx16 + i) to dst.
 * Coalesced: thread t stores units t, t + blockDim.x, ... Unrolled so that several stores are in
 * flight per thread. */
XS_DEV void xs_burst_pattern(char *dst, uint64_t n16, uint32_t seed, uint64_t first_idx16)
{
    const uint64_t step = blockDim.x;
    uint64_t i = threadIdx.x;
#pragma unroll 1
    for (; i + 3 * step < n16; i += 4 * step) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
            uint64_t j = i + u * step, g = first_idx16 + j;
            xs_st16(dst + 16 * j, xs_pattern_word(seed, g, 0), xs_pattern_word(seed, g, 1),
                    xs_pattern_word(seed, g, 2), xs_pattern_word(seed, g, 3));
        }
    }
    for (; i < n16; i += step) {
        uint64_t g = first_idx16 + i;
        xs_st16(dst + 16 * i, xs_pattern_word(seed, g, 0), xs_pattern_word(seed, g, 1),
                xs_pattern_word(seed, g, 2), xs_pattern_word(seed, g, 3));
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
    uint64_t t0 = xs_globaltimer();
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
