// SPDX-License-Identifier: Apache-2.0
/*
 * test_ep_stalled.c - the per-tile stall scored where it matters (xs_moe_stall's stalled_* and
 * mma_stalled_* fields, src/ep_stall.c): on a model trace standing in for a measurement, with
 * some tiles stretched to stall, the fields must equal the same statistics recomputed from the
 * per-tile predictions over the tiles whose measured stall exceeds XS_MOE_STALLED_NS, and the
 * zero predictor's error must be the measured stall.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt.h"
#include "xstage.h"
#include "xstage_ep.h"
#include "xt_ep.h"
#include "xt_profile.h"
#include "xt_rand.h"

static double med(double *x, int n) { return n ? xs_median(x, (size_t)n) : NAN; }

static void check_one(const char *name, int tokens, int peers, xs_moe_routing rt,
                      const xs_profile *p)
{
    xt_moe_fixture f;
    if (!xt_moe_fixture_open(&f, name, tokens, peers, rt))
        return;
    const int n = f.n;
    xs_moe_tile *tl = calloc((size_t)n + 1, sizeof *tl);
    double *ref = malloc(sizeof(double) * ((size_t)n + 1));
    double *ps = malloc(sizeof(double) * ((size_t)n + 1));
    double *pm = malloc(sizeof(double) * ((size_t)n + 1));
    double *a = malloc(sizeof(double) * ((size_t)n + 1));
    double *b = malloc(sizeof(double) * ((size_t)n + 1));
    const xs_moe_plan wp = {.kind = XS_MOE_WAVE};
    double tot = NAN, loc = NAN;
    if (!tl || !ref || !ps || !pm || !a || !b || xs_moe_problem_set_plan(f.m, 0, &wp) != XS_OK ||
        xs_moe_predict_trace(f.m, 0, p, NULL, &f.c, 1, f.t, &tot) != XS_OK ||
        xs_moe_predict_trace(f.m, 0, p, NULL, &f.c, 0, tl, &loc) != XS_OK) {
        XT_CHECK(0, "%s: set-up: %s", name, xs_errmsg());
        goto out;
    }
    for (int i = 0; i < n; i++)
        ref[tl[i].id] = tl[i].mma1_ns - tl[i].mma0_ns;
    /* the "measurement": some tiles' issue spans and main loops stretched by 0.2-3 us */
    for (int i = 0; i < n; i++) {
        if (xt_rng() % 3 == 0)
            f.t[i].st1_ns += 200 + (double)(xt_rng() % 2800);
        if (xt_rng() % 3 == 0)
            f.t[i].mma1_ns += 200 + (double)(xt_rng() % 2800);
    }
    xs_moe_stall s;
    if (xs_moe_stall_predict(f.t, n, p, NULL, f.c.local_issue_bytes_per_ns, ref, n, &s, ps,
                             pm) != XS_OK) {
        XT_CHECK(0, "%s: stall: %s", name, xs_errmsg());
        goto out;
    }
    /* issue side: Linear-2 tiles with remote rows, measured stall = span - T_iss0 */
    int k = 0, all = 0;
    for (int i = 0; i < n; i++) {
        if (f.t[i].cta < 0 || f.t[i].kind != 2 || !(f.t[i].remote_bytes > 0))
            continue;
        all++;
        const double t0 = xs_moe_tile_t0(p, f.t[i].remote_bytes, f.t[i].total_bytes,
                                         f.c.local_issue_bytes_per_ns);
        const double span = f.t[i].st1_ns - f.t[i].st0_ns;
        if (span - t0 > XS_MOE_STALLED_NS) {
            a[k] = fabs(ps[i] - span);
            b[k] = span - t0;
            k++;
        }
    }
    /* k may equal all: with this seed's stretches every issue tile can stall */
    XT_CHECK(s.tiles == all && k > 0, "%s: %d of %d issue tiles stalled (fields %d)",
             name, k, all, s.tiles);
    XT_CHECK(s.stalled_tiles == k, "%s: stalled_tiles %d, recomputed %d", name, s.stalled_tiles,
             k);
    XT_NEAR(s.stalled_err_med_ns, med(a, k), 1e-12);
    XT_NEAR(s.stalled_zero_err_med_ns, med(b, k), 1e-12);
    XT_CHECK(s.stalled_zero_err_med_ns > XS_MOE_STALLED_NS, "%s: zero's error %.1f ns", name,
             s.stalled_zero_err_med_ns);
    /* MMA side: main loop minus the local control's, every tile with a reference */
    k = 0;
    for (int i = 0; i < n; i++) {
        if (f.t[i].cta < 0 || f.t[i].id < 0 || f.t[i].id >= n)
            continue;
        const double meas = (f.t[i].mma1_ns - f.t[i].mma0_ns) - ref[f.t[i].id];
        if (meas > XS_MOE_STALLED_NS) {
            a[k] = fabs(pm[i] - meas);
            b[k] = meas;
            k++;
        }
    }
    XT_CHECK(s.mma_stalled_tiles == k && k > 0, "%s: mma_stalled_tiles %d, recomputed %d", name,
             s.mma_stalled_tiles, k);
    XT_NEAR(s.mma_stalled_err_med_ns, med(a, k), 1e-12);
    XT_NEAR(s.mma_stalled_zero_err_med_ns, med(b, k), 1e-12);
out:
    free(tl);
    free(ref);
    free(ps);
    free(pm);
    free(a);
    free(b);
    xt_moe_fixture_close(&f);
}

/* Nothing stretched and nothing stalled: the fields say none (NaN medians). */
static void check_none(const xs_profile *p)
{
    xs_moe_tile t[2];
    memset(t, 0, sizeof t);
    xs_moe_stall s;
    XT_CHECK(xs_moe_stall_predict(t, 0, p, NULL, 52, NULL, 0, &s, NULL, NULL) == XS_OK, "%s",
             xs_errmsg());
    XT_CHECK(s.stalled_tiles == 0 && s.mma_stalled_tiles == 0 && isnan(s.stalled_err_med_ns) &&
             isnan(s.stalled_zero_err_med_ns) && isnan(s.mma_stalled_err_med_ns),
             "empty trace: %d, %d tiles", s.stalled_tiles, s.mma_stalled_tiles);
}

int main(int argc, char **argv)
{
    xt_seed("test_ep_stalled", argc > 1 ? argv[1] : NULL);
    xs_profile p = xt_provisional_profile();
    check_one("olmoe-1b-7b", 2048, 4, XS_ROUTE_ZIPF, &p);
    check_one("deepseek-v2-lite", 1024, 8, XS_ROUTE_BALANCED, &p);
    check_none(&p);
    return xt_done();
}
