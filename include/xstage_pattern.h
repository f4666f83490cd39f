/*
 * xstage_pattern.h - the payload pattern every kernel stores and every destination checks.
 *
 * Shared by host C and CUDA code so that the destination (CPU for host windows, a GPU kernel for
 * device windows) recomputes exactly what the sender stored. A value depends on a seed (rotated
 * per run and per row) and on the 16-byte index within the destination region, so stale data from
 * an earlier run, a misplaced store or a missing one never matches. Never zero-dominated.
 */
#ifndef XSTAGE_PATTERN_H
#define XSTAGE_PATTERN_H

#include <stdint.h>

#if defined(__CUDACC__)
#define XS_HD static __host__ __device__ __forceinline__
#else
#define XS_HD static inline
#endif

XS_HD uint32_t xs_mix32(uint32_t x)
{
    /* murmur3 finaliser: cheap, and every input bit reaches every output bit */
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

/* Word w (0..3) of the 16-byte unit at index idx16 under seed. */
XS_HD uint32_t xs_pattern_word(uint32_t seed, uint64_t idx16, uint32_t w)
{
    uint32_t lo = (uint32_t)idx16, hi = (uint32_t)(idx16 >> 32);
    return xs_mix32(seed * 0x9e3779b9u ^ xs_mix32(lo * 4u + w) ^ (hi * 0x7feb352du)) | 1u;
}

/* Count the 16-byte units of [base, base + n16) that differ from the pattern. */
XS_HD uint64_t xs_pattern_check(const uint32_t *base, uint64_t n16, uint32_t seed,
                                uint64_t first_idx16)
{
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n16; i++) {
        const uint32_t *u = base + 4 * i;
        int ok = 1;
        for (uint32_t w = 0; w < 4; w++)
            ok &= u[w] == xs_pattern_word(seed, first_idx16 + i, w);
        bad += !ok;
    }
    return bad;
}

#endif /* XSTAGE_PATTERN_H */
