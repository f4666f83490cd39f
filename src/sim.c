/*
 * sim.c - the per-producer event simulation of the X-Stage (docs/MODEL.md, "Event model").
 *
 * Every producer runs on its own clock: at the start of its row it pays the issue overhead, then
 * offers its burst to the stage in chunks of chunk_bytes, one chunk every chunk/r ns when nothing
 * stalls. The stage is one work-conserving FIFO server draining at R: it accepts a chunk when the
 * chunk fits in the free capacity (and, with a per-producer cap, when the producer's own
 * outstanding bytes leave room). Offers are served first-come-first-served in time order, so a
 * producer that fell behind in one backpressured burst stays behind: this is the drift of
 * DESIGN.md section 2, which a fluid model of synchronised producers cannot represent.
 *
 * State of the FIFO server: the departure time of the last accepted byte (d_last). The backlog at
 * time t is R * max(0, d_last - t), so admission and drain need no per-chunk queue.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"

typedef struct {
    double t;
    int p;
} ev;

typedef struct {
    ev *a;
    int n;
} heap;

static int ev_less(ev x, ev y) { return x.t < y.t || (x.t == y.t && x.p < y.p); }

static void heap_push(heap *h, ev e)
{
    int i = h->n++;
    while (i > 0) {
        int up = (i - 1) / 2;
        if (!ev_less(e, h->a[up]))
            break;
        h->a[i] = h->a[up];
        i = up;
    }
    h->a[i] = e;
}

static ev heap_pop(heap *h)
{
    ev top = h->a[0], last = h->a[--h->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        ev best = last;
        if (l < h->n && ev_less(h->a[l], best)) { m = l; best = h->a[l]; }
        if (r < h->n && ev_less(h->a[r], best)) { m = r; }
        if (m == i)
            break;
        h->a[i] = h->a[m];
        i = m;
    }
    if (h->n > 0)
        h->a[i] = last;
    return top;
}

typedef struct {
    int row;            /* current row */
    int64_t remaining;  /* bytes of the current burst not yet offered */
    double ready;       /* when the pending chunk is ready to be accepted */
    int64_t pending;    /* size of the pending chunk */
    double *ring;       /* departure times of this producer's last `m` chunks (per-producer cap) */
    int ring_head;
    int ring_n;
} producer;

void xs_result_free(xs_result *r)
{
    free(r->rows);
    free(r->win_start);
    free(r->win_end);
    free(r->backlog);
    memset(r, 0, sizeof *r);
}

xs_status xs_result_alloc(xs_result *r, int nrows, int nproducers, int windows)
{
    memset(r, 0, sizeof *r);
    r->nrows = nrows;
    r->nproducers = nproducers;
    r->rows = calloc((size_t)nrows, sizeof *r->rows);
    if (!r->rows)
        return xs_seterr(XS_ENOMEM, "out of memory for %d result rows", nrows);
    if (windows) {
        double cells = (double)nrows * (double)nproducers;
        if (cells > (double)(1 << 26)) {
            xs_result_free(r);
            return xs_seterr(XS_ERANGE, "%d rows x %d producers: too many issue windows to "
                             "record (at most 2^26)", nrows, nproducers);
        }
        size_t n = (size_t)nrows * (size_t)nproducers;
        r->win_start = malloc(n * sizeof(double));
        r->win_end = malloc(n * sizeof(double));
        if (!r->win_start || !r->win_end) {
            xs_result_free(r);
            return xs_seterr(XS_ENOMEM, "out of memory for issue windows");
        }
        for (size_t i = 0; i < n; i++)
            r->win_start[i] = r->win_end[i] = NAN;
    }
    return XS_OK;
}

void xs_result_rows_from_windows(xs_result *r, const xs_schedule *s)
{
    double *tmp = malloc((size_t)r->nproducers * sizeof *tmp);
    for (int i = 0; i < r->nrows && i < s->nrows; i++) {
        int k = s->rows[i].producers, n = 0;
        double end = -INFINITY;
        for (int p = 0; p < k && p < r->nproducers; p++) {
            double a = r->win_start[(size_t)i * r->nproducers + p];
            double b = r->win_end[(size_t)i * r->nproducers + p];
            if (isnan(a) || isnan(b))
                continue;
            if (tmp)
                tmp[n] = b - a;
            n++;
            if (b > end)
                end = b;
        }
        r->rows[i].issue_med_ns = tmp && n ? xs_median(tmp, (size_t)n) : NAN;
        r->rows[i].issue_max_ns = tmp && n ? xs_max(tmp, (size_t)n) : NAN;
        r->rows[i].end_ns = n ? end : NAN;
    }
    free(tmp);
}

/* Backlog samples, decimated by doubling the stride whenever the buffer fills. */
typedef struct {
    xs_sample *a;
    size_t n, cap;
    unsigned long long seen, stride;
} sampler;

static void sample_add(sampler *s, double t, double b)
{
    if (!s->a)
        return;
    if (s->seen++ % s->stride)
        return;
    if (s->n == s->cap) {
        for (size_t i = 0; i < s->n / 2; i++)
            s->a[i] = s->a[2 * i];
        s->n /= 2;
        s->stride *= 2;
        if ((s->seen - 1) % s->stride)
            return;
    }
    s->a[s->n++] = (xs_sample){t, b};
}

xs_status xs_simulate(const xs_profile *pf, const xs_schedule *s, const xs_sim_opts *opts,
                      xs_result *out)
{
    xs_sim_opts defaults = {0};
    const xs_sim_opts *o = opts ? opts : &defaults;
    memset(out, 0, sizeof *out);
    XS_TRY(xs_profile_check(pf, "profile"));
    if (!s || s->nrows < 1)
        return xs_seterr(XS_EINVAL, "schedule has no rows");

    const double r = pf->issue_bytes_per_ns, R = pf->drain_bytes_per_ns;
    const double oh = pf->issue_overhead_ns, Q = pf->capacity_bytes;
    const int64_t chunk = (int64_t)pf->chunk_bytes > 0 ? (int64_t)pf->chunk_bytes : 1;
    const int np = xs_schedule_max_producers(s);

    /* how much work: chunks offered in total */
    double nchunks = 0;
    for (int i = 0; i < s->nrows; i++)
        nchunks += (double)s->rows[i].producers *
                   ceil((double)s->rows[i].bytes_per_producer / (double)chunk);
    if (nchunks > 2147483647.0)
        return xs_seterr(XS_ERANGE, "schedule offers %.3g chunks of %lld bytes; the simulation "
                         "handles at most 2^31 (raise chunk_bytes with --set)", nchunks,
                         (long long)chunk);

    int ring_m = 0;
    if (pf->capacity_bytes_per_producer > 0) {
        ring_m = (int)floor(pf->capacity_bytes_per_producer / (double)chunk);
        if (ring_m < 1)
            ring_m = 1;
    }

    XS_TRY(xs_result_alloc(out, s->nrows, np, 1));
    producer *pr = calloc((size_t)np, sizeof *pr);
    heap h = {malloc((size_t)np * sizeof(ev)), 0};
    double *rings = ring_m ? malloc((size_t)np * (size_t)ring_m * sizeof(double)) : NULL;
    double *arrive = o->sync ? malloc((size_t)np * sizeof(double)) : NULL;
    sampler smp = {0};
    if (o->record_backlog) {
        smp.cap = o->max_samples ? o->max_samples : 100000;
        if (smp.cap < 2)
            smp.cap = 2;
        smp.a = malloc(smp.cap * sizeof *smp.a);
        smp.stride = 1;
    }
    if (!pr || !h.a || (ring_m && !rings) || (o->sync && !arrive) ||
        (o->record_backlog && !smp.a)) {
        free(pr); free(h.a); free(rings); free(arrive); free(smp.a);
        xs_result_free(out);
        return xs_seterr(XS_ENOMEM, "out of memory simulating %d producers", np);
    }
    for (int p = 0; p < np; p++)
        pr[p].ring = ring_m ? rings + (size_t)p * ring_m : NULL;

    double d_last = 0, peak = 0, makespan = 0;
    int arrived = 0;

    /* Start producer p's row at time t (skipping rows it takes no part in); returns 1 when it
     * has a chunk to offer (pushed to the heap), 0 when it finished the schedule or waits at a
     * sync barrier. */
#define ROW_START(p_, t_)                                                                     \
    do {                                                                                      \
        int pp_ = (p_);                                                                       \
        double tt_ = (t_);                                                                    \
        for (;;) {                                                                            \
            int row_ = pr[pp_].row;                                                           \
            if (row_ >= s->nrows)                                                             \
                break;                                                                        \
            const xs_row *rw_ = &s->rows[row_];                                               \
            if (pp_ < rw_->producers) {                                                       \
                out->win_start[(size_t)row_ * np + pp_] = tt_;                                \
                pr[pp_].remaining = rw_->bytes_per_producer;                                  \
                pr[pp_].pending = pr[pp_].remaining < chunk ? pr[pp_].remaining : chunk;      \
                pr[pp_].remaining -= pr[pp_].pending;                                         \
                pr[pp_].ready = tt_ + oh + (double)pr[pp_].pending / r;                       \
                heap_push(&h, (ev){pr[pp_].ready, pp_});                                      \
                break;                                                                        \
            }                                                                                 \
            /* not in this row: its useful work only */                                       \
            tt_ += rw_->gap_ns;                                                               \
            if (tt_ > makespan)                                                               \
                makespan = tt_;                                                               \
            if (o->sync) {                                                                    \
                arrive[pp_] = tt_;                                                            \
                arrived++;                                                                    \
                break;                                                                        \
            }                                                                                 \
            pr[pp_].row++;                                                                    \
        }                                                                                     \
    } while (0)

    for (int p = 0; p < np; p++)
        ROW_START(p, 0.0);

    for (;;) {
        if (o->sync && h.n == 0 && arrived == np) {
            /* every producer reached the barrier after row `row`: release them together */
            double t = -INFINITY;
            for (int p = 0; p < np; p++)
                if (arrive[p] > t)
                    t = arrive[p];
            t += pf->barrier_ns;
            arrived = 0;
            if (pr[0].row + 1 >= s->nrows)
                break;
            for (int p = 0; p < np; p++) {
                pr[p].row++;
                ROW_START(p, t);
            }
            continue;
        }
        if (h.n == 0)
            break;
        ev e = heap_pop(&h);
        producer *q = &pr[e.p];
        /* the producer's own cap: its m-th most recent chunk must have drained */
        if (ring_m && q->ring_n == ring_m) {
            double tc = q->ring[q->ring_head];
            if (tc > e.t) {
                heap_push(&h, (ev){tc, e.p});
                continue;
            }
        }
        double c = (double)q->pending;
        double t_space = d_last - (Q - c) / R;
        double t_acc = e.t > t_space ? e.t : t_space;
        /* the chunk's bytes streamed in over the c/r before it was complete: the server may
         * start on them then (without this, every burst would start draining c/r late) */
        double t_arr = t_acc - c / r;
        d_last = (d_last > t_arr ? d_last : t_arr) + c / R;
        double backlog = R * (d_last - t_acc);
        if (backlog > peak)
            peak = backlog;
        sample_add(&smp, t_acc, backlog);
        if (ring_m) {
            if (q->ring_n < ring_m) {
                q->ring[(q->ring_head + q->ring_n) % ring_m] = d_last;
                q->ring_n++;
            } else {
                q->ring[q->ring_head] = d_last;
                q->ring_head = (q->ring_head + 1) % ring_m;
            }
        }
        if (q->remaining > 0) {
            q->pending = q->remaining < chunk ? q->remaining : chunk;
            q->remaining -= q->pending;
            q->ready = t_acc + (double)q->pending / r;
            heap_push(&h, (ev){q->ready, e.p});
            continue;
        }
        /* burst done: the last accepted store closes the issue window; then useful work */
        const xs_row *rw = &s->rows[q->row];
        out->win_end[(size_t)q->row * np + e.p] = t_acc;
        double t_next = t_acc + rw->gap_ns;
        if (t_next > makespan)
            makespan = t_next;
        if (o->sync) {
            arrive[e.p] = t_next;
            arrived++;
            continue;
        }
        q->row++;
        ROW_START(e.p, t_next);
    }
#undef ROW_START

    /* rows where a producer was inactive keep NaN windows */
    xs_result_rows_from_windows(out, s);
    out->peak_backlog_bytes = peak;
    out->makespan_ns = makespan;
    if (o->record_backlog) {
        out->backlog = smp.a;
        out->nbacklog = smp.n;
    }
    if (!o->record_windows) {
        free(out->win_start);
        free(out->win_end);
        out->win_start = out->win_end = NULL;
    }
    free(pr);
    free(h.a);
    free(rings);
    free(arrive);
    return XS_OK;
}

void xs_result_print(const xs_result *r, const xs_schedule *s, int csv, FILE *f)
{
    if (csv) {
        fprintf(f, "row,producers,bytes_per_producer,gap_ns,issue_med_ns,issue_max_ns,end_ns\n");
        for (int i = 0; i < r->nrows; i++)
            fprintf(f, "%d,%d,%lld,%.10g,%.1f,%.1f,%.1f\n", i, s->rows[i].producers,
                    (long long)s->rows[i].bytes_per_producer, s->rows[i].gap_ns,
                    r->rows[i].issue_med_ns, r->rows[i].issue_max_ns, r->rows[i].end_ns);
        return;
    }
    fprintf(f, "%5s %9s %18s %12s %12s %12s %14s\n", "row", "producers", "bytes_per_producer",
            "gap_ns", "issue_med_ns", "issue_max_ns", "end_ns");
    fprintf(f, "%5s %9s %18s %12s %12s %12s %14s\n", "", "", "(bytes)", "(ns)", "(ns)", "(ns)",
            "(ns)");
    for (int i = 0; i < r->nrows; i++)
        fprintf(f, "%5d %9d %18lld %12.1f %12.1f %12.1f %14.1f\n", i, s->rows[i].producers,
                (long long)s->rows[i].bytes_per_producer, s->rows[i].gap_ns,
                r->rows[i].issue_med_ns, r->rows[i].issue_max_ns, r->rows[i].end_ns);
}
