// SPDX-License-Identifier: Apache-2.0
/*
 * test_up_courier.c - the host side of the attention kernel's couriers (include/xstage_up.h,
 * src/up_tiles.c; docs/UP.md "Couriers"), plain C against the core.
 *
 *   1. the couriers' walk (xs_attn_rwalk through xs_attn_courier_tiles, the kernel's own code):
 *      for both tile orders, many tile counts, compute grids and remote prefixes, it lists every
 *      remote tile exactly once and nothing else, position by position (the k-th tile of every
 *      compute CTA, CTAs in increasing index, then k + 1), as the compute CTAs run them;
 *   2. the prediction (xs_attn_courier_predict, what `bench up` plans couriers with) on cases
 *      worked out by hand - the compute replay, head-of-line waits, several couriers, the
 *      per-tile overhead, the early order - and its properties on random tile times: the span
 *      is the larger of compute end and link end; with no courier it is the compute replay (the
 *      largest sum of a CTA's tile times); the couriers end no earlier than the first ready tile
 *      plus all remote bytes at the full rate, and no later than the last ready tile plus all
 *      of them at one courier's rate; a faster rate never ends later; at an unlimited rate with
 *      no overhead they end with the last ready tile; and bad arguments are refused.
 *
 * usage: test_up_courier [seed]   last line: "N passed, N failed"
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xt.h"
#include "xt_rand.h"
#include "xstage.h"
#include "xstage_up.h"

/* 1. The walk: a permutation of [0, remote), in position order. */
static void check_walk(void)
{
    int bad = 0, cases = 0;
    for (int tiles = 1; tiles <= 400 && bad == 0; tiles += 1 + tiles / 8)
        for (int ncta = 1; ncta <= tiles && bad == 0; ncta += 1 + ncta / 3) {
            const int remotes[5] = {0, 1, tiles / 3, tiles - 1, tiles};
            int *list = (int *)malloc((size_t)tiles * sizeof(int));
            int *pos_k = (int *)malloc((size_t)tiles * sizeof(int));
            int *pos_b = (int *)malloc((size_t)tiles * sizeof(int));
            unsigned char *seen = (unsigned char *)malloc((size_t)tiles);
            for (int ri = 0; ri < 5 && bad == 0; ri++)
                for (int order = XS_ATTN_ORDER_SNAKE; order <= XS_ATTN_ORDER_EARLY; order++) {
                    const int remote = remotes[ri];
                    cases++;
                    /* where each tile sits: CTA b, position k (the compute CTAs' assignment) */
                    for (int b = 0; b < ncta; b++) {
                        const int m = xs_attn_cta_count(tiles, ncta, b);
                        for (int k = 0; k < m; k++) {
                            const int t = xs_attn_cta_tile(order, tiles, remote, ncta, b, k);
                            pos_k[t] = k, pos_b[t] = b;
                        }
                    }
                    const int n = xs_attn_courier_tiles(order, tiles, remote, ncta, list);
                    memset(seen, 0, (size_t)tiles);
                    int e = n != remote;
                    for (int j = 0; j < n && !e; j++) {
                        const int t = list[j];
                        if (t < 0 || t >= remote || seen[t]++) {
                            e = 1;
                            break;
                        }
                        if (j > 0) { /* position by position, CTAs in order within one */
                            const int pk = pos_k[list[j - 1]], pb = pos_b[list[j - 1]];
                            e |= pos_k[t] < pk || (pos_k[t] == pk && pos_b[t] <= pb);
                        }
                    }
                    if (e) {
                        printf("test_up_courier: walk of %d tiles, %d compute CTAs, %d remote, "
                               "order %d: not the position-ordered list of the remote tiles\n",
                               tiles, ncta, remote, order);
                        bad++;
                    }
                }
            free(list);
            free(pos_k);
            free(pos_b);
            free(seen);
        }
    XT_CHECK(bad == 0 && cases > 1000, "courier walk: %d violations in %d cases", bad, cases);
    int l[8];
    XT_CHECK(xs_attn_courier_tiles(0, 4, 5, 2, l) == -1, "remote > tiles accepted");
    XT_CHECK(xs_attn_courier_tiles(0, 4, 2, 0, l) == -1, "0 compute CTAs accepted");
    XT_CHECK(xs_attn_courier_tiles(0, 4, 2, 2, NULL) == -1, "NULL list accepted");
}

/* 2a. Cases worked out by hand. */
static void check_predict_cases(void)
{
    xs_attn_courier_pred p;
    /* 4 tiles on 2 compute CTAs (snake): CTA 0 tiles 0, 3; CTA 1 tiles 1, 2; each 10 ns, so
     * tiles 0 and 1 are ready at 10, 2 and 3 at 20. Remote: 0 and 1, 100 bytes each. */
    const double d10[4] = {10, 10, 10, 10}, cb[4] = {100, 100, 0, 0};
    XT_CHECK(xs_attn_courier_predict(0, 4, 2, 2, 1, d10, cb, 20.0, 0.0, &p) == XS_OK, "%s",
             xs_errmsg());
    /* one courier at 20 B/ns: tile 0 10..15, tile 1 15..20 */
    XT_NEAR(p.compute_end_ns, 20.0, 1e-12);
    XT_NEAR(p.link_end_ns, 20.0, 1e-12);
    XT_NEAR(p.span_ns, 20.0, 1e-12);
    /* 5 B/ns: 10..30, 30..50 - the link decides */
    xs_attn_courier_predict(0, 4, 2, 2, 1, d10, cb, 5.0, 0.0, &p);
    XT_NEAR(p.link_end_ns, 50.0, 1e-12);
    XT_NEAR(p.span_ns, 50.0, 1e-12);
    /* two couriers sharing 5 B/ns (2.5 each): both 10..50 */
    xs_attn_courier_predict(0, 4, 2, 2, 2, d10, cb, 5.0, 0.0, &p);
    XT_NEAR(p.link_end_ns, 50.0, 1e-12);
    /* overhead 3 ns per tile at 20 B/ns: 10..18, 18..26 */
    xs_attn_courier_predict(0, 4, 2, 2, 1, d10, cb, 20.0, 3.0, &p);
    XT_NEAR(p.link_end_ns, 26.0, 1e-12);
    XT_NEAR(p.span_ns, 26.0, 1e-12);
    /* no courier: the compute replay alone */
    xs_attn_courier_predict(0, 4, 2, 2, 0, d10, NULL, 0.0, 0.0, &p);
    XT_NEAR(p.span_ns, 20.0, 1e-12);
    XT_CHECK(p.link_end_ns == 0.0, "link end %g without couriers", p.link_end_ns);
    /* uneven tiles: 3 tiles on 2 CTAs, CTA 0 tile 0 (5), CTA 1 tiles 1 (7) and 2 (11) */
    const double du[3] = {5, 7, 11};
    xs_attn_courier_predict(0, 3, 0, 2, 0, du, NULL, 0.0, 0.0, &p);
    XT_NEAR(p.compute_end_ns, 18.0, 1e-12);
    /* head of line: tile 1 (ready at 7) waits behind tile 0 (ready at 5, 100 bytes at 4 B/ns,
     * until 30); tiles 0 and 1 remote */
    const double cu3[3] = {100, 40, 0};
    xs_attn_courier_predict(0, 3, 2, 2, 1, du, cu3, 4.0, 0.0, &p);
    XT_NEAR(p.link_end_ns, 40.0, 1e-12);
    XT_NEAR(p.span_ns, 40.0, 1e-12);
    /* early: 6 tiles on 2 CTAs, 4 remote. CTA 0 holds 0, 3, 4 and walks 3, 0, 4; CTA 1 holds
     * 1, 2, 5 and walks 2, 1, 5. The couriers' walk: 3, 2 (position 0), 0, 1 (position 1). */
    int l[6];
    XT_CHECK(xs_attn_courier_tiles(XS_ATTN_ORDER_EARLY, 6, 4, 2, l) == 4 && l[0] == 3 &&
                 l[1] == 2 && l[2] == 0 && l[3] == 1,
             "early walk %d %d %d %d, expected 3 2 0 1", l[0], l[1], l[2], l[3]);
    const double d6[6] = {10, 10, 10, 10, 10, 10}, c6[6] = {100, 100, 100, 100, 0, 0};
    /* ready: 3 and 2 at 10, 0 and 1 at 20; one courier at 10 B/ns: 10..20, 20..30, 30..40,
     * 40..50; compute ends at 30 */
    xs_attn_courier_predict(XS_ATTN_ORDER_EARLY, 6, 4, 2, 1, d6, c6, 10.0, 0.0, &p);
    XT_NEAR(p.compute_end_ns, 30.0, 1e-12);
    XT_NEAR(p.link_end_ns, 50.0, 1e-12);
    /* snake, the same tiles: the walk is 0, 1 (ready at 10), 3, 2 (ready at 20); two couriers
     * at 5 B/ns each: courier 0 takes 0 (10..30) and 3 (30..50), courier 1 takes 1 (10..30)
     * and 2 (30..50) */
    xs_attn_courier_predict(0, 6, 4, 2, 2, d6, c6, 10.0, 0.0, &p);
    XT_NEAR(p.link_end_ns, 50.0, 1e-12);
    /* bad arguments */
    XT_CHECK(xs_attn_courier_predict(0, 4, 2, 0, 1, d10, cb, 5.0, 0.0, &p) == XS_EINVAL,
             "0 compute CTAs accepted");
    XT_CHECK(xs_attn_courier_predict(0, 4, 2, 2, 1, d10, cb, 0.0, 0.0, &p) == XS_EINVAL,
             "rate 0 accepted with couriers");
    XT_CHECK(xs_attn_courier_predict(0, 4, 2, 2, 1, d10, NULL, 5.0, 0.0, &p) == XS_EINVAL,
             "no copy bytes accepted with couriers");
    XT_CHECK(xs_attn_courier_predict(0, 4, 5, 2, 1, d10, cb, 5.0, 0.0, &p) == XS_EINVAL,
             "remote > tiles accepted");
    XT_CHECK(xs_attn_courier_predict(0, 4, 2, 2, 1, NULL, cb, 5.0, 0.0, &p) == XS_EINVAL,
             "no tile times accepted");
}

/* 2b. Properties on random tile times. */
static void check_predict_random(void)
{
    int bad = 0, cases = 0;
    for (int it = 0; it < 400; it++) {
        const int tiles = 1 + (int)(xt_urand() * 600);
        const int ncta = 1 + (int)(xt_urand() * (tiles < 140 ? tiles : 140));
        const int remote = (int)(xt_urand() * (tiles + 1));
        const int C = 1 + (int)(xt_urand() * 9);
        const int order = xt_urand() < 0.5 ? XS_ATTN_ORDER_SNAKE : XS_ATTN_ORDER_EARLY;
        const double rate = 1 + xt_urand() * 60, o = xt_urand() < 0.5 ? 0 : xt_urand() * 500;
        double *dur = (double *)malloc((size_t)tiles * sizeof(double));
        double *cb = (double *)malloc((size_t)tiles * sizeof(double));
        double *ready = (double *)malloc((size_t)tiles * sizeof(double));
        double total = 0;
        for (int t = 0; t < tiles; t++) {
            dur[t] = 1000 + xt_urand() * 30000;
            cb[t] = t < remote ? 256.0 * (1 + (int)(xt_urand() * 128)) : 0.0;
            total += cb[t];
        }
        /* the replay, independently: each CTA's tiles back to back */
        double cend = 0, rmin = INFINITY, rmax = 0;
        for (int b = 0; b < ncta; b++) {
            double tb = 0;
            for (int k = 0; k < xs_attn_cta_count(tiles, ncta, b); k++) {
                const int t = xs_attn_cta_tile(order, tiles, remote, ncta, b, k);
                tb += dur[t];
                ready[t] = tb;
            }
            cend = tb > cend ? tb : cend;
        }
        for (int t = 0; t < remote; t++) {
            rmin = ready[t] < rmin ? ready[t] : rmin;
            rmax = ready[t] > rmax ? ready[t] : rmax;
        }
        xs_attn_courier_pred p, p0, pf, pinf;
        int e = 0;
        e |= xs_attn_courier_predict(order, tiles, remote, ncta, C, dur, cb, rate, o, &p) != XS_OK;
        e |= xs_attn_courier_predict(order, tiles, remote, ncta, 0, dur, cb, rate, o, &p0) !=
             XS_OK;
        e |= xs_attn_courier_predict(order, tiles, remote, ncta, C, dur, cb, 2 * rate, o, &pf) !=
             XS_OK;
        e |= xs_attn_courier_predict(order, tiles, remote, ncta, C, dur, cb, 1e30, 0.0, &pinf) !=
             XS_OK;
        const double eps = 1e-9 * (cend + total / rate + tiles * o + 1);
        if (!e) {
            e |= fabs(p0.span_ns - cend) > eps || fabs(p.compute_end_ns - cend) > eps;
            e |= fabs(p.span_ns - fmax(p.compute_end_ns, p.link_end_ns)) > eps;
            if (remote > 0) {
                e |= p.link_end_ns < rmin + total / rate - eps;
                e |= p.link_end_ns > rmax + total / (rate / C) + remote * o + eps;
                e |= pf.link_end_ns > p.link_end_ns + eps;
                e |= fabs(pinf.link_end_ns - rmax) > 1e-6 * rmax;
            } else {
                e |= p.link_end_ns != 0.0;
            }
        }
        if (e && bad < 5)
            printf("test_up_courier: prediction of %d tiles, %d CTAs, %d remote, %d couriers, "
                   "order %d, rate %.3g, o %.3g: compute %.6g (replay %.6g), link %.6g, span "
                   "%.6g; 2x rate: link %.6g; unlimited: link %.6g (last ready %.6g)\n", tiles,
                   ncta, remote, C, order, rate, o, p.compute_end_ns, cend, p.link_end_ns,
                   p.span_ns, pf.link_end_ns, pinf.link_end_ns, rmax);
        bad += e;
        cases++;
        free(dur);
        free(cb);
        free(ready);
    }
    XT_CHECK(bad == 0, "courier prediction: %d of %d random cases violate its properties", bad,
             cases);
}

int main(int argc, char **argv)
{
    xt_seed("test_up_courier", argc > 1 ? argv[1] : NULL);
    check_walk();
    check_predict_cases();
    check_predict_random();
    return xt_done();
}
