// SPDX-License-Identifier: Apache-2.0
/*
 * randsched.c - schedules drawn at random for `xstage validate --random`, and the two reference
 * predictors the calibrated event model is judged against there: zero stall (no backpressure at
 * all) and the published fluid closed forms applied row by row (docs/MODEL.md, "Randomized
 * validation").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"

/* splitmix64: the next 64 bits of *s */
static uint64_t rnd64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uni(uint64_t *s) /* [0, 1) */
{
    return (double)(rnd64(s) >> 11) * (1.0 / 9007199254740992.0);
}

static double log_uni(uint64_t *s, double lo, double hi) /* log-uniform in [lo, hi) */
{
    return exp(log(lo) + uni(s) * (log(hi) - log(lo)));
}

static int64_t r16(double b) /* whole 16-byte units, at least one */
{
    int64_t v = (int64_t)(b / 16) * 16;
    return v < 16 ? 16 : v;
}

void xs_randsched_free(xs_randsched *r)
{
    if (!r)
        return;
    xs_schedule_free(&r->s);
    free(r->bytes);
    free(r->gap_ns);
    memset(r, 0, sizeof *r);
}

xs_programs xs_randsched_programs(const xs_randsched *r)
{
    xs_programs pg = {r->producers, r->bytes, r->gap_ns};
    return pg;
}

/* The window footprint of the drawn rows: every row's producers each a slot of the row's largest
 * burst rounded up to 128-byte lines (the replay's layout). */
static double footprint(const xs_randsched *r, int nrows)
{
    double f = 0;
    for (int i = 0; i < nrows; i++) {
        int64_t mx = 0;
        for (int q = 0; q < r->producers; q++)
            if (r->bytes[(size_t)i * r->producers + q] > mx)
                mx = r->bytes[(size_t)i * r->producers + q];
        f += (double)r->s.rows[i].producers * (double)((mx + 127) / 128 * 128);
    }
    return f;
}

enum { RAND_MIN_ROWS = 3, RAND_MAX_ROWS = 8 };

xs_status xs_randsched_draw(const xs_profile *p, const xs_rand_opts *o, uint64_t *state,
                            xs_randsched *out)
{
    memset(out, 0, sizeof *out);
    const int S = o->max_producers;
    if (S < 1 || S > XS_MAX_PRODUCERS)
        return xs_seterr(XS_EINVAL, "random schedule: %d producers available", S);
    if (!(o->max_bytes >= 16.0 * 128 * S))
        return xs_seterr(XS_EINVAL, "random schedule: %.0f bytes of room is too little for %d "
                         "producers", o->max_bytes, S);
    if (!(p->drain_bytes_per_ns > 0))
        return xs_seterr(XS_EINVAL, "random schedule: the profile's drain rate is not positive");
    const int nstore = RAND_MIN_ROWS + (int)(rnd64(state) % (RAND_MAX_ROWS - RAND_MIN_ROWS + 1));
    out->stagger = uni(state) < 0.7;
    const int nrows = nstore + out->stagger;
    /* irregular producer counts: a quarter of the rows on every SM, the others anywhere */
    int k[RAND_MAX_ROWS + 1], kmax = 1;
    for (int i = out->stagger; i < nrows; i++) {
        k[i] = uni(state) < 0.25 ? S : 1 + (int)(uni(state) * S);
        if (k[i] > S)
            k[i] = S;
        if (k[i] > kmax)
            kmax = k[i];
    }
    if (out->stagger)
        k[0] = kmax;
    out->producers = kmax;
    const size_t cells = (size_t)nrows * (size_t)kmax;
    out->bytes = calloc(cells, sizeof *out->bytes);
    out->gap_ns = calloc(cells, sizeof *out->gap_ns);
    if (!out->bytes || !out->gap_ns) {
        xs_randsched_free(out);
        return xs_seterr(XS_ENOMEM, "out of memory for a random schedule");
    }
    for (int i = 0; i < nrows; i++) {
        xs_status st = xs_schedule_append(&out->s, k[i], 16, 0);
        if (st != XS_OK) {
            xs_randsched_free(out);
            return st;
        }
    }
    if (out->stagger) {
        /* staggered starts: producer q starts up to `span` late (work before its first row) */
        const double span = log_uni(state, 200, 20000);
        for (int q = 0; q < kmax; q++)
            out->gap_ns[q] = span * uni(state);
    }
    for (int i = out->stagger; i < nrows; i++) {
        int64_t *b = out->bytes + (size_t)i * kmax;
        double *g = out->gap_ns + (size_t)i * kmax;
        /* bursts around the knee Q(K)/K (0.15x to 8x), spread within the row by up to e^+-0.8 */
        const double base = xs_capacity(p, k[i]) / k[i] * log_uni(state, 0.15, 8.0);
        const double spread = 0.8 * uni(state);
        double v = 0;
        for (int q = 0; q < k[i]; q++) {
            /* now and then a tile that stores nothing (producer 0 always stores) */
            b[q] = q > 0 && uni(state) < 0.08 ? 0 : r16(base * exp(spread * (2 * uni(state) - 1)));
            v += (double)b[q];
        }
        /* the work after the row: from 3 % to 4x the time the stage needs to drain it, each
         * producer 0.6x to 1.4x the row's; none after the last row */
        const double gap = i + 1 < nrows ? v / p->drain_bytes_per_ns * log_uni(state, 0.03, 4.0)
                                         : 0;
        for (int q = 0; q < kmax; q++)
            g[q] = gap > 0 ? gap * (0.6 + 0.8 * uni(state)) : 0;
    }
    /* within the room: scale every burst down together */
    const double f = footprint(out, nrows);
    if (f > o->max_bytes) {
        const double c = o->max_bytes / f * 0.98;
        for (size_t j = 0; j < cells; j++)
            if (out->bytes[j])
                out->bytes[j] = r16((double)out->bytes[j] * c - 128);
    }
    for (int i = 0; i < nrows; i++) {
        int64_t mx = 16;
        double gs = 0;
        for (int q = 0; q < kmax; q++) {
            const size_t j = (size_t)i * kmax + q;
            if (q < k[i] && out->bytes[j] > mx)
                mx = out->bytes[j];
            if (q >= k[i])
                out->bytes[j] = 0;
            gs += out->gap_ns[j];
        }
        out->s.rows[i].bytes_per_producer = mx;
        out->s.rows[i].gap_ns = gs / kmax;
    }
    if (footprint(out, nrows) > o->max_bytes) { /* not expected: r16 rounds down */
        xs_randsched_free(out);
        return xs_seterr(XS_ERANGE, "random schedule: could not fit %.0f bytes of room",
                         o->max_bytes);
    }
    return XS_OK;
}

/* A producer's bytes and work in row i: its program's, or the row's. */
static int64_t cell_bytes(const xs_schedule *s, const xs_programs *pg, int i, int q)
{
    if (q >= s->rows[i].producers)
        return 0;
    return pg ? pg->bytes[(size_t)i * pg->producers + q] : s->rows[i].bytes_per_producer;
}

static double cell_gap(const xs_schedule *s, const xs_programs *pg, int i, int q)
{
    return pg ? pg->gap_ns[(size_t)i * pg->producers + q] : s->rows[i].gap_ns;
}

static int columns(const xs_schedule *s, const xs_programs *pg)
{
    return pg ? pg->producers : xs_schedule_max_producers(s);
}

static xs_status check_pg(const xs_schedule *s, const xs_programs *pg)
{
    if (s->nrows < 1)
        return xs_seterr(XS_EINVAL, "predict: empty schedule");
    if (pg && (pg->producers < xs_schedule_max_producers(s) || !pg->bytes || !pg->gap_ns))
        return xs_seterr(XS_EINVAL, "predict: programs of %d producers for a schedule of %d",
                         pg->producers, xs_schedule_max_producers(s));
    return XS_OK;
}

static double t_iss0(const xs_profile *p, double bytes)
{
    double b = bytes - p->queue_bytes_per_producer;
    return p->issue_overhead_ns + (b > 0 ? b / p->issue_bytes_per_ns : 0) +
           xs_store_tail_ns(p, bytes);
}

xs_status xs_predict_zero(const xs_profile *p, const xs_schedule *s, const xs_programs *pg,
                          xs_result *out)
{
    memset(out, 0, sizeof *out);
    XS_TRY(check_pg(s, pg));
    const int np = columns(s, pg);
    XS_TRY(xs_result_alloc(out, s->nrows, np, 1));
    double mk = 0;
    for (int q = 0; q < np; q++) {
        double t = p->start_ns;
        for (int i = 0; i < s->nrows; i++) {
            if (i > 0)
                t += p->row_start_ns;
            const int64_t b = cell_bytes(s, pg, i, q);
            if (b > 0) {
                out->win_start[(size_t)i * np + q] = t;
                t += t_iss0(p, (double)b);
                out->win_end[(size_t)i * np + q] = t;
            }
            t += cell_gap(s, pg, i, q);
        }
        if (t > mk)
            mk = t;
    }
    out->makespan_ns = mk;
    xs_result_rows_from_windows(out, s);
    return XS_OK;
}

xs_status xs_predict_fluid(const xs_profile *p, const xs_schedule *s, const xs_programs *pg,
                           xs_result *out)
{
    memset(out, 0, sizeof *out);
    XS_TRY(check_pg(s, pg));
    const int np = columns(s, pg);
    XS_TRY(xs_result_alloc(out, s->nrows, np, 0));
    const double R = p->drain_bytes_per_ns;
    double t = p->start_ns, since = 0;
    int stored = 0;
    for (int i = 0; i < s->nrows; i++) {
        if (i > 0)
            t += p->row_start_ns;
        int k = 0;
        double v = 0, bmax = 0, g = 0;
        for (int q = 0; q < np; q++) {
            const int64_t b = cell_bytes(s, pg, i, q);
            if (b > 0) {
                k++;
                v += (double)b;
                bmax = fmax(bmax, (double)b);
            }
            g += cell_gap(s, pg, i, q);
        }
        g /= np;
        if (k == 0) {
            out->rows[i].issue_med_ns = out->rows[i].issue_max_ns = out->rows[i].end_ns = NAN;
            t += g;
            since += g;
            continue;
        }
        const double t0 = t_iss0(p, bmax);
        const double tiss = stored ? fmax(t0, v / R - since)
                                   : fmax(t0, (v - xs_capacity(p, k)) / R);
        out->rows[i].issue_med_ns = out->rows[i].issue_max_ns = tiss;
        t += tiss;
        out->rows[i].end_ns = t;
        t += g;
        since = g;
        stored = 1;
    }
    out->makespan_ns = t;
    return XS_OK;
}
