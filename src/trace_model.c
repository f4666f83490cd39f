// SPDX-License-Identifier: Apache-2.0
/*
 * trace_model.c - a loaded trace as per-producer programs of the event model, its prediction,
 * and measured against predicted (docs/TRACE.md, "Conversion to programs" and "Comparison").
 *
 * The conversion is causal: a tile's predicted ready time is the predicted end of its CTA's
 * previous issue plus the CTA's own measured time in between (its compute, barriers, stamps),
 * never the measured absolute time, which would carry the measured stall of earlier tiles into
 * the prediction. Only each CTA's first start is taken as measured.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xstage_trace.h"

/* The CTA's own time after tile j (index i in t->recs): to the next tile's issue start, and for a
 * tile that stores nothing its measured issue window as well (the model issues nothing there). */
static double gap_after(const xs_trace *t, int c, size_t i)
{
    const xs_trace_record *r = &t->recs[i];
    double g = 0;
    if (i + 1 < t->first[c + 1])
        g = (double)(t->recs[i + 1].issue_start_ns - r->issue_end_ns);
    if (r->bytes == 0)
        g += (double)(r->issue_end_ns - r->issue_start_ns);
    return g;
}

xs_status xs_trace_from_windows(const xs_schedule *s, const xs_result *r, const int *sm, int nsm,
                                xs_trace_record **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!r->win_start || !r->win_end || r->nrows != s->nrows)
        return xs_seterr(XS_EINVAL, "trace: a result without windows, or of another schedule");
    const size_t np = (size_t)r->nproducers;
    xs_trace_record *v = malloc((s->nrows ? (size_t)s->nrows : 1) * (np ? np : 1) * sizeof *v);
    if (!v)
        return xs_seterr(XS_ENOMEM, "trace: out of memory for %d x %zu windows", s->nrows, np);
    size_t k = 0;
    for (size_t p = 0; p < np; p++) {
        int seq = 0;
        for (int row = 0; row < s->nrows; row++) {
            const size_t at = (size_t)row * np + p;
            const double a = r->win_start[at], e = r->win_end[at];
            if ((int)p >= s->rows[row].producers || isnan(a) || isnan(e))
                continue;
            v[k++] = (xs_trace_record){.cta = (int32_t)p, .sm = (int)p < nsm ? sm[p] : (int32_t)p,
                                       .seq = seq++, .bytes = s->rows[row].bytes_per_producer,
                                       .issue_start_ns = llround(a), .issue_end_ns = llround(e),
                                       .work_start_ns = -1, .work_end_ns = -1};
        }
    }
    *out = v;
    *n = k;
    return XS_OK;
}

void xs_trace_programs_free(xs_trace_progs *pr)
{
    xs_schedule_free(&pr->sched);
    free(pr->bytes);
    free(pr->gap_ns);
    memset(pr, 0, sizeof *pr);
}

xs_status xs_trace_programs(const xs_trace *t, xs_trace_progs *out)
{
    memset(out, 0, sizeof *out);
    if (!t || t->n == 0 || t->ncta < 1)
        return xs_seterr(XS_EINVAL, "trace: no records to convert");
    size_t tiles = 0;
    for (int c = 0; c < t->ncta; c++)
        if (t->first[c + 1] - t->first[c] > tiles)
            tiles = t->first[c + 1] - t->first[c];
    const size_t nrows = tiles + 1, np = (size_t)t->ncta;
    if ((double)nrows * (double)np > (double)(1 << 28))
        return xs_seterr(XS_ERANGE, "trace: %d CTAs x %zu tiles is too large to simulate (at "
                         "most 2^28 CTA-tiles, the longest CTA's count for every CTA)", t->ncta,
                         tiles);
    out->bytes = calloc(nrows * np, sizeof *out->bytes);
    out->gap_ns = calloc(nrows * np, sizeof *out->gap_ns);
    if (!out->bytes || !out->gap_ns) {
        xs_trace_programs_free(out);
        return xs_seterr(XS_ENOMEM, "trace: out of memory for %zu x %zu programs", nrows, np);
    }
    for (size_t row = 0; row < nrows; row++) {
        xs_status st = xs_schedule_append(&out->sched, t->ncta, 1, 0);
        if (st != XS_OK) {
            xs_trace_programs_free(out);
            return st;
        }
    }
    for (int c = 0; c < t->ncta; c++) {
        if (t->first[c] == t->first[c + 1])
            continue; /* a CTA without tiles: (0, 0) rows */
        out->gap_ns[c] = (double)t->recs[t->first[c]].issue_start_ns;
        for (size_t i = t->first[c]; i < t->first[c + 1]; i++) {
            const size_t at = (size_t)(t->recs[i].seq + 1) * np + (size_t)c;
            out->bytes[at] = t->recs[i].bytes;
            out->gap_ns[at] = gap_after(t, c, i);
        }
    }
    out->pg = (xs_programs){.producers = t->ncta, .bytes = out->bytes, .gap_ns = out->gap_ns};
    return XS_OK;
}

double xs_trace_unstalled_ns(const xs_profile *p, int64_t bytes)
{
    if (bytes <= 0)
        return 0;
    xs_bg bg;
    xs_bg_eval(p, 1, (double)bytes, 0, &bg);
    /* the same unstalled issue time the event model gives the burst (its store loop's tail) */
    return bg.t_iss0_ns + xs_store_tail_ns(p, (double)bytes);
}

void xs_trace_prediction_free(xs_trace_prediction *pr)
{
    free(pr->tiles);
    memset(pr, 0, sizeof *pr);
}

xs_status xs_trace_predict(const xs_profile *p, const xs_trace *t, xs_trace_prediction *out)
{
    memset(out, 0, sizeof *out);
    xs_trace_progs pg;
    XS_TRY(xs_trace_programs(t, &pg));
    /* the trace measured the prologue (first starts) and every set-up (gaps) */
    xs_profile q = *p;
    q.start_ns = 0;
    q.row_start_ns = 0;
    xs_sim_opts so = {.record_windows = 1};
    xs_result r;
    xs_status st = xs_simulate_programs(&q, &pg.sched, &pg.pg, &so, &r);
    if (st != XS_OK) {
        xs_trace_programs_free(&pg);
        return st;
    }
    out->tiles = calloc(t->n, sizeof *out->tiles);
    if (!out->tiles) {
        xs_result_free(&r);
        xs_trace_programs_free(&pg);
        return xs_seterr(XS_ENOMEM, "trace: out of memory for %zu predicted tiles", t->n);
    }
    const size_t np = (size_t)r.nproducers;
    double end = 0, zend = 0;
    for (int c = 0; c < t->ncta; c++) {
        if (t->first[c] == t->first[c + 1])
            continue;
        double ready = pg.gap_ns[c], zready = ready; /* row 0: the CTA's first start */
        for (size_t i = t->first[c]; i < t->first[c + 1]; i++) {
            const xs_trace_record *x = &t->recs[i];
            xs_trace_pred *o = &out->tiles[i];
            const size_t at = (size_t)(x->seq + 1) * np + (size_t)c;
            if (x->bytes > 0) {
                o->start_ns = r.win_start[at];
                o->end_ns = r.win_end[at];
                o->zero_start_ns = zready;
                o->zero_end_ns = zready + xs_trace_unstalled_ns(p, x->bytes);
            } else {
                /* nothing to store: the window is the CTA's own time, as long as measured (its
                 * gap holds it too) */
                const double own = (double)(x->issue_end_ns - x->issue_start_ns);
                o->start_ns = ready;
                o->end_ns = ready + own;
                o->zero_start_ns = zready;
                o->zero_end_ns = zready + own;
            }
            const double g = pg.gap_ns[at];
            ready = o->start_ns + g;
            zready = o->zero_start_ns + g;
            if (x->bytes > 0) {
                ready += o->end_ns - o->start_ns;
                zready += o->zero_end_ns - o->zero_start_ns;
            }
            if (o->end_ns > end)
                end = o->end_ns;
            if (o->zero_end_ns > zend)
                zend = o->zero_end_ns;
        }
    }
    out->end_ns = end;
    out->zero_end_ns = zend;
    out->peak_backlog_bytes = r.peak_backlog_bytes;
    xs_result_free(&r);
    xs_trace_programs_free(&pg);
    return XS_OK;
}

xs_status xs_trace_compare(const xs_profile *p, const xs_trace *t, const xs_trace_prediction *pr,
                           xs_trace_summary *out)
{
    memset(out, 0, sizeof *out);
    double *v = malloc(6 * (t->n ? t->n : 1) * sizeof *v);
    if (!v)
        return xs_seterr(XS_ENOMEM, "trace: out of memory comparing %zu tiles", t->n);
    double *ie = v, *zie = v + t->n, *se = v + 2 * t->n, *zse = v + 3 * t->n;
    double *sse = v + 4 * t->n, *zsse = v + 5 * t->n;
    size_t n = 0, ns = 0;
    for (size_t i = 0; i < t->n; i++) {
        const xs_trace_record *x = &t->recs[i];
        const double meas = (double)(x->issue_end_ns - x->issue_start_ns);
        if (x->bytes == 0 || !(meas > 0))
            continue;
        const double pred = pr->tiles[i].end_ns - pr->tiles[i].start_ns;
        const double t0 = xs_trace_unstalled_ns(p, x->bytes);
        ie[n] = 100 * fabs(pred - meas) / meas;
        zie[n] = 100 * fabs(t0 - meas) / meas;
        /* stall = issue time - T_iss0: the difference of two stalls is that of the issue times */
        se[n] = fabs(pred - meas);
        zse[n] = fabs(meas - t0);
        if (meas - t0 > XS_TRACE_STALLED_NS) {
            sse[ns] = se[n];
            zsse[ns] = zse[n];
            ns++;
        }
        n++;
    }
    out->ntiles = n;
    out->nstalled = ns;
    out->total_ns = (double)t->end_ns;
    out->total_err_pct = t->end_ns > 0 ? 100 * (pr->end_ns - out->total_ns) / out->total_ns : NAN;
    out->zero_total_err_pct =
        t->end_ns > 0 ? 100 * (pr->zero_end_ns - out->total_ns) / out->total_ns : NAN;
    out->issue_err_med_pct = xs_median(ie, n);
    out->issue_err_p90_pct = xs_quantile(ie, n, 0.9);
    out->zero_issue_err_med_pct = xs_median(zie, n);
    out->zero_issue_err_p90_pct = xs_quantile(zie, n, 0.9);
    out->stall_err_med_ns = xs_median(se, n);
    out->stall_err_p90_ns = xs_quantile(se, n, 0.9);
    out->zero_stall_err_med_ns = xs_median(zse, n);
    out->zero_stall_err_p90_ns = xs_quantile(zse, n, 0.9);
    out->stalled_err_med_ns = xs_median(sse, ns);
    out->zero_stalled_err_med_ns = xs_median(zsse, ns);
    out->stalled_ratio = ns && out->zero_stalled_err_med_ns > 0
                             ? out->stalled_err_med_ns / out->zero_stalled_err_med_ns
                             : NAN;
    /* per CTA: the end of its last issue */
    size_t nc = 0;
    for (int c = 0; c < t->ncta; c++) {
        if (t->first[c] == t->first[c + 1])
            continue;
        const size_t last = t->first[c + 1] - 1;
        const double meas = (double)t->recs[last].issue_end_ns;
        if (!(meas > 0))
            continue;
        ie[nc] = 100 * fabs(pr->tiles[last].end_ns - meas) / meas;
        zie[nc] = 100 * fabs(pr->tiles[last].zero_end_ns - meas) / meas;
        nc++;
    }
    out->nctas = nc;
    out->cta_err_med_pct = xs_median(ie, nc);
    out->cta_err_p90_pct = xs_quantile(ie, nc, 0.9);
    out->zero_cta_err_med_pct = xs_median(zie, nc);
    out->zero_cta_err_p90_pct = xs_quantile(zie, nc, 0.9);
    free(v);
    return XS_OK;
}
