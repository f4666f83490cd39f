// SPDX-License-Identifier: Apache-2.0
/*
 * ep_stall.c - per-tile stalls of a measured (or predicted) run of the fused MoE kernel
 * (include/xstage_ep.h, docs/EP.md "The model"): every Linear-2 tile's combine burst is replayed
 * through the event engine of src/ep_sim.c from its measured first store, and the predicted
 * issue windows and blocked main-loop time are set against the trace's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ep_sim.h"
#include "xstage_ep.h"

typedef struct {
    int cta, i;
    double st0;
} xs_bkey;

static int cmp_burst_start(const void *x, const void *y)
{
    const xs_bkey *a = (const xs_bkey *)x, *b = (const xs_bkey *)y;
    if (a->cta != b->cta)
        return a->cta < b->cta ? -1 : 1;
    if (a->st0 != b->st0)
        return a->st0 < b->st0 ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* blocked time within [a, b] from merged intervals blk[2k], blk[2k+1] (sorted, disjoint) and the
 * prefix sums of their lengths (pre[k]: intervals 0..k-1): two binary searches, O(log n). The
 * intervals that meet (a, b) are lo..last; the first and the last are clipped, the ones between
 * are whole. (A walk over the intervals instead would cost O(n) per tile: the bench's host side
 * replays tens of thousands of tiles.) */
static double xs_blocked_within(const double *blk, const double *pre, int n, double a, double b)
{
    if (!(b > a) || n == 0)
        return 0;
    int lo = 0, hi = n; /* first interval ending after a */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (blk[2 * mid + 1] <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    int end = n, l2 = lo; /* first interval (from lo) starting at or after b */
    while (l2 < end) {
        const int mid = l2 + (end - l2) / 2;
        if (blk[2 * mid] < b)
            l2 = mid + 1;
        else
            end = mid;
    }
    const int last = l2 - 1;
    if (last < lo)
        return 0;
    double s = 0;
    const int ends[2] = {lo, last};
    for (int j = 0; j < (last > lo ? 2 : 1); j++) {
        const int k = ends[j];
        const double x0 = blk[2 * k] > a ? blk[2 * k] : a;
        const double x1 = blk[2 * k + 1] < b ? blk[2 * k + 1] : b;
        if (x1 > x0)
            s += x1 - x0;
    }
    if (last > lo + 1)
        s += pre[last] - pre[lo + 1];
    return s;
}

/* The Linear-2 tiles with remote bytes of trace t, per CTA in the order their bursts started
 * (task indices into order[nb]); returns nb, or -1 when out of memory. */
static int xs_stall_order(const xs_moe_tile *t, int n, int *order)
{
    int nb = 0;
    for (int i = 0; i < n; i++)
        nb += t[i].cta >= 0 && t[i].kind == 2 && t[i].remote_bytes > 0;
    xs_bkey *keys = malloc(sizeof(xs_bkey) * (size_t)(nb + 1));
    if (!keys)
        return -1;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (t[i].cta >= 0 && t[i].kind == 2 && t[i].remote_bytes > 0)
            keys[k++] = (xs_bkey){t[i].cta, i, t[i].st0_ns};
    qsort(keys, (size_t)nb, sizeof *keys, cmp_burst_start);
    for (int j = 0; j < nb; j++)
        order[j] = keys[j].i;
    free(keys);
    return nb;
}

/* The stream of task u's burst: *tot bytes, *rem of them remote, *npb ns per byte to issue. */
static void xs_stall_stream(const xs_msim *g, const xs_moe_tile *u, double *tot, double *rem,
                            double *npb)
{
    *rem = u->remote_bytes;
    *tot = u->total_bytes > *rem ? u->total_bytes : *rem;
    *npb = (*rem / g->r + (*tot - *rem) / g->r_local) / *tot;
}

/* Replay the bursts order[0..nb) (each starts at its measured first store) on g; the window of
 * order[j] is g->w0[j], g->w1[j]. */
static xs_status xs_stall_replay(xs_msim *g, const xs_moe_tile *t, const int *order, int nb)
{
    double chunks = 0;
    for (int j = 0; j < nb; j++) {
        const xs_moe_tile *u = &t[order[j]];
        double tot, rem, npb;
        xs_stall_stream(g, u, &tot, &rem, &npb);
        chunks += (double)(int64_t)ceil(tot / g->c);
        if (xs_evheap_push(&g->pev, (xs_ev){u->st0_ns, 0, j}))
            g->oom = 1;
    }
    const double max_events = 16.0 * (chunks + nb) + 1e6; /* as in xs_moe_predict_tasks */
    double events = 0;
    int stalled = 0;
    while (!g->oom) {
        if (++events > max_events) {
            stalled = 1;
            break;
        }
        const double ts = xs_msim_stage_next(g);
        const double tp = g->pev.n ? g->pev.a[0].t : INFINITY;
        if (ts == INFINITY && tp == INFINITY)
            break;
        if (tp <= ts) {
            xs_msim_advance(g, tp);
            xs_ev e = xs_evheap_pop(&g->pev);
            double tot, rem, npb;
            xs_stall_stream(g, &t[order[e.p]], &tot, &rem, &npb);
            xs_msim_start(g, t[order[e.p]].cta, tot, rem, npb, e.p, e.t);
        } else {
            xs_msim_advance(g, ts);
            xs_msim_stage_accept(g, ts);
        }
    }
    if (g->oom)
        return xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    if (stalled)
        return xs_seterr(XS_ERANGE, "moe model: the stall replay found no end after %.0f events "
                         "(%d bursts): a bug in the event model", max_events, nb);
    return XS_OK;
}

/* The tiles whose measured stall meas[i] exceeds XS_MOE_STALLED_NS: how many, the median of
 * the model's |error| err[i] over them, and the zero predictor's (the median measured stall).
 * Reorders nothing; NaN medians when none. */
static void stalled_errs(const double *meas, const double *err, int n, int *count,
                         double *err_med, double *zero_med)
{
    double *a = malloc(sizeof(double) * (size_t)(2 * n + 1));
    int k = 0;
    *err_med = *zero_med = NAN;
    *count = 0;
    if (!a)
        return;
    for (int i = 0; i < n; i++)
        if (meas[i] > XS_MOE_STALLED_NS) {
            a[k] = err[i];
            a[n + k] = meas[i];
            k++;
        }
    if (k) {
        *count = k;
        *err_med = xs_median(a, (size_t)k);
        *zero_med = xs_median(a + n, (size_t)k);
    }
    free(a);
}

/* The issue side: predicted window vs measured span, both minus T_iss0. e1..e3: [nb] scratch. */
static xs_status xs_stall_issue(const xs_msim *g, const xs_moe_tile *t, const int *order,
                                int nb, const xs_profile *pf,
                                double local_bytes_per_ns, double *e1, double *e2, double *e3,
                                xs_moe_stall *out, double *pred_span)
{
    int ne = 0;
    for (int j = 0; j < nb; j++) {
        const xs_moe_tile *u = &t[order[j]];
        if (isnan(g->w1[j]))
            return xs_seterr(XS_ERANGE, "moe model: the burst of task %d never completed",
                             order[j]);
        const double t0 = xs_moe_tile_t0(pf, u->remote_bytes, u->total_bytes, local_bytes_per_ns);
        const double pred = g->w1[j] - g->w0[j], meas = u->st1_ns - u->st0_ns;
        if (pred_span)
            pred_span[order[j]] = pred;
        e1[ne] = meas - t0;
        e2[ne] = pred - t0;
        e3[ne] = fabs(pred - meas);
        ne++;
    }
    if (ne) {
        out->tiles = ne;
        out->meas_stall_med_ns = xs_median(e1, (size_t)ne);
        out->pred_stall_med_ns = xs_median(e2, (size_t)ne);
        out->abs_err_med_ns = xs_median(e3, (size_t)ne);
        out->abs_err_p90_ns = xs_quantile_lower(e3, (size_t)ne, 0.9);
        stalled_errs(e1, e3, ne, &out->stalled_tiles, &out->stalled_err_med_ns,
                     &out->stalled_zero_err_med_ns);
    }
    return XS_OK;
}

/* The MMA side: blocked time within every tile's measured main loop, against its main loop
 * minus the local control's. e1..e3: [n] scratch. */
static xs_status xs_stall_mma(const xs_msim *g, const xs_moe_tile *t, int n, const double *ref,
                              int nref, double *e1, double *e2, double *e3, xs_moe_stall *out,
                              double *pred_mma)
{
    double *pre = malloc(sizeof(double) * (size_t)(g->nblk + 1));
    if (!pre)
        return xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    pre[0] = 0;
    for (int i = 0; i < g->nblk; i++)
        pre[i + 1] = pre[i] + (g->blk[2 * i + 1] - g->blk[2 * i]);
    out->blocked_ns = pre[g->nblk];
    const double lost = 1.0 - g->s;
    int nm = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].cta < 0)
            continue;
        const double pm =
            lost * xs_blocked_within(g->blk, pre, g->nblk, t[i].mma0_ns, t[i].mma1_ns);
        if (pred_mma)
            pred_mma[i] = pm;
        if (!ref || t[i].id < 0 || t[i].id >= nref || !isfinite(ref[t[i].id]))
            continue;
        const double mm_meas = (t[i].mma1_ns - t[i].mma0_ns) - ref[t[i].id];
        e1[nm] = mm_meas;
        e2[nm] = pm;
        e3[nm] = fabs(pm - mm_meas);
        nm++;
    }
    if (nm) {
        out->mma_tiles = nm;
        out->mma_meas_med_ns = xs_median(e1, (size_t)nm);
        out->mma_pred_med_ns = xs_median(e2, (size_t)nm);
        out->mma_abs_err_med_ns = xs_median(e3, (size_t)nm);
        out->mma_abs_err_p90_ns = xs_quantile_lower(e3, (size_t)nm, 0.9);
        stalled_errs(e1, e3, nm, &out->mma_stalled_tiles, &out->mma_stalled_err_med_ns,
                     &out->mma_stalled_zero_err_med_ns);
    }
    free(pre);
    return XS_OK;
}

xs_status xs_moe_stall_predict(const xs_moe_tile *t, int n, const xs_profile *pf,
                               const xs_moe_model *mm, double local_bytes_per_ns,
                               const double *ref, int nref, xs_moe_stall *out,
                               double *pred_span, double *pred_mma)
{
    memset(out, 0, sizeof *out);
    out->meas_stall_med_ns = out->pred_stall_med_ns = out->abs_err_med_ns = NAN;
    out->abs_err_p90_ns = out->mma_meas_med_ns = out->mma_pred_med_ns = NAN;
    out->mma_abs_err_med_ns = out->mma_abs_err_p90_ns = NAN;
    out->stalled_err_med_ns = out->stalled_zero_err_med_ns = NAN;
    out->mma_stalled_err_med_ns = out->mma_stalled_zero_err_med_ns = NAN;
    for (int i = 0; i < n; i++) {
        if (pred_span)
            pred_span[i] = NAN;
        if (pred_mma)
            pred_mma[i] = NAN;
    }
    int np = 1, nb = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].cta + 1 > np)
            np = t[i].cta + 1;
        nb += t[i].cta >= 0 && t[i].kind == 2 && t[i].remote_bytes > 0;
    }
    xs_msim g;
    XS_TRY(xs_msim_init(&g, pf, mm, np, nb, local_bytes_per_ns));
    g.record_blocked = 1;
    int *order = malloc(sizeof(int) * (size_t)(nb + 1));
    double *e1 = malloc(sizeof(double) * (size_t)(n + 1));
    double *e2 = malloc(sizeof(double) * (size_t)(n + 1));
    double *e3 = malloc(sizeof(double) * (size_t)(n + 1));
    xs_status st = XS_OK;
    if (!order || !e1 || !e2 || !e3 || xs_stall_order(t, n, order) < 0)
        st = xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    if (st == XS_OK)
        st = xs_stall_replay(&g, t, order, nb);
    if (st == XS_OK)
        st = xs_stall_issue(&g, t, order, nb, pf, local_bytes_per_ns, e1, e2, e3, out, pred_span);
    if (st == XS_OK)
        st = xs_stall_mma(&g, t, n, ref, nref, e1, e2, e3, out, pred_mma);
    free(order);
    free(e1);
    free(e2);
    free(e3);
    xs_msim_free(&g);
    return st;
}
