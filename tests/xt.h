// SPDX-License-Identifier: Apache-2.0
/*
 * xt.h - the test framework: two macros and a summary.
 *
 * XT_CHECK(cond, fmt, ...) records one assertion; XT_NEAR(a, b, rel) one relative comparison.
 * xt_done() prints "N passed, N failed" as the last line and returns the exit status.
 */
#ifndef XT_H
#define XT_H

#include <math.h>
#include <stdio.h>

static int xt_passed, xt_failed;

#define XT_CHECK(cond, ...)                                                                   \
    do {                                                                                      \
        if (cond) {                                                                           \
            xt_passed++;                                                                      \
        } else {                                                                              \
            xt_failed++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                   \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
        }                                                                                     \
    } while (0)

/* |a - b| <= rel * max(|b|, floor) ; NaN never passes */
#define XT_NEAR(a, b, rel)                                                                    \
    XT_CHECK(xt_near((a), (b), (rel)), "%s = %.6g, %s = %.6g, rel tol %.3g", #a, (double)(a), \
             #b, (double)(b), (double)(rel))

static inline int xt_near(double a, double b, double rel)
{
    if (isnan(a) || isnan(b))
        return 0;
    double scale = fabs(b) > 1e-9 ? fabs(b) : 1e-9;
    return fabs(a - b) <= rel * scale;
}

static inline int xt_done(void)
{
    printf("%d passed, %d failed\n", xt_passed, xt_failed);
    return xt_failed ? 1 : 0;
}

#endif
