// SPDX-License-Identifier: Apache-2.0
/*
 * up_stall.c - per-tile stall of the piggyback attention kernel (docs/UP.md "Per-tile stall"):
 * the measured stall of every tile (a piggyback run's stamps against an fa run's), the model's
 * prediction of it from the per-CTA programs (src/up_progs.c), the score where it matters
 * (tiles stalled > XS_UP_STALLED_NS, model beside the zero predictor), and the runs' stamps as
 * trace v1 records (docs/TRACE.md "Workload traces").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "xstage_trace.h"
#include "xstage_up.h"

xs_status xs_stall_score_of(const double *meas, const double *pred, int n, double thresh_ns,
                            xs_stall_score *out)
{
    memset(out, 0, sizeof *out);
    out->err_med_ns = out->stalled_err_med_ns = out->stalled_zero_med_ns = NAN;
    if (n < 0 || (n > 0 && (!meas || !pred)))
        return xs_seterr(XS_EINVAL, "stall score: %d tiles, %s", n, "no data");
    double *e = (double *)malloc(sizeof(double) * (size_t)(3 * n + 1));
    if (!e)
        return xs_seterr(XS_ENOMEM, "stall score: out of memory for %d tiles", n);
    double *se = e + n, *sm = e + 2 * n;
    int k = 0, s = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(meas[i]) || !isfinite(pred[i]))
            continue;
        e[k++] = fabs(pred[i] - meas[i]);
        if (meas[i] > thresh_ns) {
            se[s] = fabs(pred[i] - meas[i]);
            sm[s++] = meas[i];
        }
    }
    out->tiles = k, out->stalled = s;
    if (k)
        out->err_med_ns = xs_median(e, (size_t)k);
    if (s) {
        out->stalled_err_med_ns = xs_median(se, (size_t)s);
        out->stalled_zero_med_ns = xs_median(sm, (size_t)s);
        out->met = out->stalled_err_med_ns <= 0.5 * out->stalled_zero_med_ns;
    }
    free(e);
    return XS_OK;
}

/* Check one run's stamps: every stamp set, and per CTA start <= work <= end <= next work. */
static xs_status stamps_check(const xs_up_cfg *c, const xs_up_stamps *s, const char *what)
{
    if (!s || !s->cta_ns || !s->work_ns || !s->end_ns)
        return xs_seterr(XS_EINVAL, "%s: no stamps", what);
    for (int b = 0; b < c->grid; b++) {
        uint64_t prev = s->cta_ns[3 * (size_t)b];
        if (!prev)
            return xs_seterr(XS_EINVAL, "%s: CTA %d has no start stamp", what, b);
        const int m = xs_attn_cta_count(c->tiles, c->grid, b);
        for (int k = 0; k < m; k++) {
            const int t = xs_attn_cta_tile(XS_ATTN_ORDER_SNAKE, c->tiles, 0, c->grid, b, k);
            const uint64_t w = s->work_ns[t], e = s->end_ns[t];
            if (!w || !e || w < prev || e < w)
                return xs_seterr(XS_EINVAL, "%s: tile %d (CTA %d, step %d): stamps missing or "
                                 "out of order (work %llu, end %llu, previous %llu)", what, t, b,
                                 k, (unsigned long long)w, (unsigned long long)e,
                                 (unsigned long long)prev);
            prev = e;
        }
    }
    return XS_OK;
}

/* The programs pg simulated on profile q (unlimited: its stage never holds a chunk, the direct
 * run), windows recorded: *len[row * grid + b] the window's length (NAN where none). */
static xs_status windows_of(const xs_profile *q, const xs_attn_progs *pg, int unlimited,
                            double *len)
{
    xs_schedule s;
    memset(&s, 0, sizeof s);
    xs_status st = XS_OK;
    for (int i = 0; i < pg->nrows && st == XS_OK; i++)
        st = xs_schedule_append(&s, pg->grid, 16, 0.0);
    const xs_programs prog = {pg->grid, pg->bytes, pg->gap_ns};
    xs_sim_opts so;
    memset(&so, 0, sizeof so);
    so.record_windows = 1;
    so.skip_row_medians = 1; /* the rows are not read */
    xs_result r;
    if (st == XS_OK)
        st = unlimited ? xs_simulate_free(q, &s, &prog, &so, &r, NULL)
                       : xs_simulate_programs(q, &s, &prog, &so, &r);
    if (st == XS_OK) {
        for (int i = 0; i < pg->nrows; i++)
            for (int b = 0; b < pg->grid; b++) {
                const size_t at = (size_t)i * r.nproducers + b;
                len[(size_t)i * pg->grid + b] = b < r.nproducers ? r.win_end[at] - r.win_start[at]
                                                                 : NAN;
            }
        xs_result_free(&r);
    }
    xs_schedule_free(&s);
    return st;
}

xs_status xs_up_tile_stall(const xs_profile *p, const xs_up_cfg *c, const xs_up_stamps *fa,
                           const xs_up_stamps *pb, xs_up_stall *out, double *per_tile)
{
    memset(out, 0, sizeof *out);
    out->issue.err_med_ns = out->issue.stalled_err_med_ns = NAN;
    out->issue.stalled_zero_med_ns = NAN;
    out->mma = out->issue;
    if (!p || !c || c->tiles < 1 || c->grid < 1 || c->grid > c->tiles)
        return xs_seterr(XS_EINVAL, "per-tile stall: bad configuration");
    XS_TRY(stamps_check(c, fa, "per-tile stall, fa run"));
    XS_TRY(stamps_check(c, pb, "per-tile stall, piggyback run"));
    const int T = c->tiles;
    double *dur = (double *)malloc(sizeof(double) * (size_t)T);
    double *rb = (double *)malloc(sizeof(double) * (size_t)T);
    double *v = (double *)malloc(sizeof(double) * (size_t)4 * T);
    xs_attn_progs pg;
    memset(&pg, 0, sizeof pg);
    double *wq = NULL, *wn = NULL, *wi = NULL;
    xs_status st = XS_OK;
    if (!dur || !rb || !v)
        st = xs_seterr(XS_ENOMEM, "per-tile stall: out of memory for %d tiles", T);
    if (st == XS_OK) {
        /* the planner's programs of piggyback (xs_up_predict_delta): fa's measured tile times */
        xs_up_tile_durations(c, fa->cta_ns, 3, fa->end_ns, dur);
        xs_up_remote_bytes(c, rb);
        st = xs_attn_progs_plain(c->seq, c->heads, c->causal, XS_ATTN_ORDER_SNAKE, c->remote,
                                 c->grid, 0, dur, rb, &pg);
    }
    if (st == XS_OK) {
        const size_t nw = (size_t)pg.nrows * pg.grid;
        wq = (double *)malloc(sizeof(double) * nw);
        wn = (double *)malloc(sizeof(double) * nw);
        wi = (double *)malloc(sizeof(double) * nw);
        if (!wq || !wn || !wi)
            st = xs_seterr(XS_ENOMEM, "per-tile stall: out of memory for %zu windows", nw);
    }
    if (st == XS_OK) {
        /* with the CTAs' own queues (an issue stamp ends when the last bytes are in them), as
         * xs_attn_progs_simulate without them (the next tile's loads wait until they are in
         * the stage), and on an unlimited stage (the unstalled window) */
        xs_profile q = *p, n, i;
        q.start_ns = 0, q.row_start_ns = 0;
        n = q;
        n.queue_bytes_per_producer = 0, n.buffer_bytes_per_producer = 0;
        i = n;
        i.drain_bytes_per_ns = 1e9, i.capacity_bytes = 1e15, i.capacity_bytes_per_producer = 0;
        st = windows_of(&q, &pg, 0, wq);
        if (st == XS_OK)
            st = windows_of(&n, &pg, 0, wn);
        if (st == XS_OK)
            st = windows_of(&i, &pg, 1, wi);
    }
    if (st == XS_OK) {
        for (size_t k = 0; k < (size_t)4 * T; k++)
            v[k] = NAN;
        for (int b = 0; b < c->grid; b++) {
            const int m = xs_attn_cta_count(T, c->grid, b);
            double prev_f = (double)fa->cta_ns[3 * (size_t)b];
            double prev_p = (double)pb->cta_ns[3 * (size_t)b];
            double carry = 0; /* the previous tile's held-back stores, paid by this main loop */
            for (int k = 0; k < m; k++) {
                const int t = xs_attn_cta_tile(XS_ATTN_ORDER_SNAKE, T, 0, c->grid, b, k);
                const double wf = (double)fa->work_ns[t], ef = (double)fa->end_ns[t];
                const double wp = (double)pb->work_ns[t], ep = (double)pb->end_ns[t];
                const size_t at = (size_t)(k + 1) * pg.grid + b; /* row k + 1: tile k's bytes */
                const double lq = wq[at], ln = wn[at], li = wi[at];
                double *o = v + 4 * (size_t)t;
                if (rb[t] > 0 && isfinite(lq) && isfinite(li)) {
                    o[0] = (ep - wp) - (ef - wf) - li;
                    o[1] = lq > li ? lq - li : 0.0;
                }
                o[2] = (wp - prev_p) - (wf - prev_f);
                o[3] = carry;
                carry = isfinite(ln) && isfinite(lq) && ln > lq ? ln - lq : 0.0;
                prev_f = ef, prev_p = ep;
            }
        }
        double *mi = dur, *pi = rb; /* reused: [T] each */
        for (int t = 0; t < T; t++)
            mi[t] = v[4 * (size_t)t], pi[t] = v[4 * (size_t)t + 1];
        st = xs_stall_score_of(mi, pi, T, XS_UP_STALLED_NS, &out->issue);
        for (int t = 0; t < T; t++)
            mi[t] = v[4 * (size_t)t + 2], pi[t] = v[4 * (size_t)t + 3];
        if (st == XS_OK)
            st = xs_stall_score_of(mi, pi, T, XS_UP_STALLED_NS, &out->mma);
        if (st == XS_OK && per_tile)
            memcpy(per_tile, v, sizeof(double) * (size_t)4 * T);
    }
    xs_attn_progs_free(&pg);
    free(dur), free(rb), free(v), free(wq), free(wn), free(wi);
    return st;
}

xs_status xs_up_trace_records(const xs_up_cfg *c, const xs_up_stamps *s, int remote,
                              xs_trace_record **out, size_t *n)
{
    *out = NULL, *n = 0;
    if (!c || c->tiles < 1 || c->grid < 1 || c->grid > c->tiles)
        return xs_seterr(XS_EINVAL, "trace records: bad configuration");
    XS_TRY(stamps_check(c, s, "trace records"));
    xs_trace_record *r = (xs_trace_record *)calloc((size_t)c->tiles, sizeof *r);
    if (!r)
        return xs_seterr(XS_ENOMEM, "trace records: out of memory for %d tiles", c->tiles);
    size_t j = 0;
    for (int b = 0; b < c->grid; b++) {
        int64_t prev = (int64_t)s->cta_ns[3 * (size_t)b];
        const int m = xs_attn_cta_count(c->tiles, c->grid, b);
        for (int k = 0; k < m; k++, j++) {
            const int t = xs_attn_cta_tile(XS_ATTN_ORDER_SNAKE, c->tiles, 0, c->grid, b, k);
            r[j].cta = b, r[j].sm = b, r[j].seq = k, r[j].flags = XS_TRACE_WORK;
            r[j].bytes = remote ? (int64_t)llround(xs_up_tile_remote_bytes(c, t)) : 0;
            r[j].issue_start_ns = (int64_t)s->work_ns[t];
            r[j].issue_end_ns = (int64_t)s->end_ns[t];
            r[j].work_start_ns = prev;
            r[j].work_end_ns = (int64_t)s->work_ns[t];
            prev = r[j].issue_end_ns;
        }
    }
    *out = r, *n = j;
    return XS_OK;
}
