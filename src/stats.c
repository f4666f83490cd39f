// SPDX-License-Identifier: Apache-2.0
/*
 * stats.c - medians, quantiles and geometric means for reports (copies; inputs untouched), and
 * the host's monotonic clock the timings and bounds read.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xstage.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A sorted copy of x[0..n-1] (n > 0), or NULL when out of memory; the caller frees it. */
static double *sorted_copy(const double *x, size_t n)
{
    double *c = malloc(n * sizeof *c);
    if (!c)
        return NULL;
    memcpy(c, x, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_double);
    return c;
}

/* Linear interpolation between order statistics of sorted c (type 7, as numpy's default). */
static double quantile_sorted(const double *c, size_t n, double q)
{
    if (q <= 0) q = 0;
    if (q >= 1) q = 1;
    double h = q * (double)(n - 1);
    size_t i = (size_t)floor(h);
    return i + 1 < n ? c[i] + (h - (double)i) * (c[i + 1] - c[i]) : c[n - 1];
}

double xs_quantile(const double *x, size_t n, double q)
{
    double *c = n ? sorted_copy(x, n) : NULL;
    if (!c)
        return NAN;
    double v = quantile_sorted(c, n, q);
    free(c);
    return v;
}

double xs_median(const double *x, size_t n) { return xs_quantile(x, n, 0.5); }

double xs_quantile_lower(const double *x, size_t n, double q)
{
    double *c = n ? sorted_copy(x, n) : NULL;
    if (!c)
        return NAN;
    if (q <= 0) q = 0;
    if (q >= 1) q = 1;
    double v = c[(size_t)(q * (double)(n - 1))];
    free(c);
    return v;
}

double xs_median_ci_rel(const double *x, size_t n)
{
    double *c = n >= 2 ? sorted_copy(x, n) : NULL;
    if (!c)
        return INFINITY;
    const double h = 0.98 * sqrt((double)n);
    double lo = floor((double)n / 2 - h), hi = ceil((double)n / 2 + h) - 1;
    if (lo < 0)
        lo = 0;
    if (hi > (double)(n - 1))
        hi = (double)(n - 1);
    const double m = quantile_sorted(c, n, 0.5), w = c[(size_t)hi] - c[(size_t)lo];
    free(c);
    return m > 0 ? w / (2 * m) : INFINITY;
}

double xs_geomean(const double *x, size_t n)
{
    if (n == 0)
        return NAN;
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(x[i] > 0))
            return NAN;
        s += log(x[i]);
    }
    return exp(s / (double)n);
}

double xs_min(const double *x, size_t n)
{
    double m = n ? x[0] : NAN;
    for (size_t i = 1; i < n; i++)
        if (x[i] < m) m = x[i];
    return m;
}

double xs_max(const double *x, size_t n)
{
    double m = n ? x[0] : NAN;
    for (size_t i = 1; i < n; i++)
        if (x[i] > m) m = x[i];
    return m;
}

double xs_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
