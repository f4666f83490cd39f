// SPDX-License-Identifier: Apache-2.0
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

/* Word w (0..3) of the 16-byte unit at index idx16 under seed. Linear in the index within each
 * word (so a producer generates it with one add per word per store and the pattern never limits
 * the issue rate), with a per-seed, per-word base: a missing, misplaced or stale unit mismatches. */
#define XS_PATTERN_STEP 0x9e3779b1u
XS_HD uint32_t xs_pattern_base(uint32_t seed, uint32_t w) { return xs_mix32(seed * 4u + w + 1u); }

XS_HD uint32_t xs_pattern_word(uint32_t seed, uint64_t idx16, uint32_t w)
{
    return (xs_pattern_base(seed, w) + (uint32_t)idx16 * XS_PATTERN_STEP) ^
           ((uint32_t)(idx16 >> 32) * 0x85ebca6bu);
}

/* Count the 16-byte units of [base, base + n16) that differ from the pattern. */
XS_HD uint64_t xs_pattern_check(const uint32_t *base, uint64_t n16, uint32_t seed,
                                uint64_t first_idx16)
{
    uint64_t bad = 0;
    uint32_t b[4];
    for (uint32_t w = 0; w < 4; w++)
        b[w] = xs_pattern_base(seed, w);
    for (uint64_t i = 0; i < n16; i++) {
        uint64_t g = first_idx16 + i;
        uint32_t lin = (uint32_t)g * XS_PATTERN_STEP, hi = (uint32_t)(g >> 32) * 0x85ebca6bu;
        const uint32_t *u = base + 4 * i;
        bad += ((u[0] ^ ((b[0] + lin) ^ hi)) | (u[1] ^ ((b[1] + lin) ^ hi)) |
                (u[2] ^ ((b[2] + lin) ^ hi)) | (u[3] ^ ((b[3] + lin) ^ hi))) != 0;
    }
    return bad;
}

#endif /* XSTAGE_PATTERN_H */
