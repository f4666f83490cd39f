// SPDX-License-Identifier: Apache-2.0
/*
 * xt_rand.h - the tests' random numbers: splitmix64, seeded by setting xt_rng_state (a test
 * binary takes its seed from the command line or the clock, and prints it).
 */
#ifndef XT_RAND_H
#define XT_RAND_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t xt_rng_state;

/* Seed from arg (a number; NULL: the clock) and print the seed, so that a failing run can be
 * repeated */
static inline void xt_seed(const char *test, const char *arg)
{
    xt_rng_state = arg ? strtoull(arg, NULL, 0) : (uint64_t)time(NULL);
    printf("%s: seed %llu (pass it as the first argument to repeat)\n", test,
           (unsigned long long)xt_rng_state);
}

/* the next 64 random bits */
static inline uint64_t xt_rng(void)
{
    uint64_t z = (xt_rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1), 53 bits */
static inline double xt_urand(void)
{
    return (double)(xt_rng() >> 11) * (1.0 / 9007199254740992.0);
}

#endif
