/*
 * sim.c - the per-producer event simulation of the X-Stage (docs/MODEL.md, "Event model").
 *
 * Every producer runs on its own clock. Its program starts a burst, pays the issue overhead, and
 * issues the burst into its own small queue (the SM's store queue, queue_bytes_per_producer, in
 * chunks); the queue streams each chunk towards the stage at the producer's issue rate r. The
 * stage is one work-conserving FIFO server draining at R: it accepts a chunk when the chunk fits
 * in its free capacity Q (and, with a per-producer cap, when the producer's own outstanding bytes
 * leave room). The program's issue of a burst ends when its last chunk has entered the queue;
 * with no queue, when the last chunk is accepted. Offers are served first-come-first-served in
 * time order, so a producer that fell behind in one backpressured burst stays behind: this is the
 * drift of DESIGN.md section 2, which a fluid model of synchronised producers cannot represent.
 *
 * Optionally (tandem queues, buffer_bytes_per_producer) each producer streams its chunks at r into
 * a buffer of its own, from which arbitration moves them into the stage; the store queue then
 * empties into that buffer, and a producer stalls only once its buffer is full.
 *
 * State of the FIFO server: the departure time of the last accepted byte (d_last). The backlog at
 * time t is R * max(0, d_last - t), so admission and drain need no per-chunk queue.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"

typedef struct {
    double t;  /* primary key: ready time (future heap) or start tag (eligible heap) */
    double t2; /* secondary key: ready time in the eligible heap, 0 in the future heap */
    int p;
} ev;

typedef struct {
    ev *a;
    int n;
} heap;

/* Whether time t has come by time now. Times within a relative 1e-12 of each other are one
 * instant: the answer must not depend on how the two were rounded (shifting every time by
 * start_ns would otherwise let a producer's cap release a chunk at one shift and hold it at
 * another, and a producer's window, which reads its last two chunks' times, would move). */
static int by_then(double t, double now)
{
    return t <= now || fabs(t - now) <= 1e-12 * fmax(fabs(t), fabs(now));
}

static int ev_less(ev x, ev y)
{
    return x.t < y.t || (x.t == y.t && (x.t2 < y.t2 || (x.t2 == y.t2 && x.p < y.p)));
}

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
    /* program side: the row whose issue end is awaited, or the barrier */
    int prow;           /* program row (nrows: finished) */
    int64_t plast;      /* index of prow's last chunk (prow active and issuing) */
    int pwait;          /* 1 while prow's issue end is not yet known */
    int64_t assigned;   /* chunks handed to the queue so far (indices 0..assigned-1) */
    /* offer side: the chunk at the head of the queue */
    int orow;           /* row of the chunk being offered (-1 before the first) */
    int64_t orem;       /* bytes of orow not yet offered */
    int64_t oidx;       /* index of the chunk being offered */
    int64_t pending;    /* its size */
    int owait;          /* 1 when the next chunk's row has not been started by the program */
    int64_t accepted;   /* chunks accepted so far */
    double in_t;        /* when the pending chunk entered the store queue (traces) */
    /* tandem queues only: the stream into the producer's own buffer, ahead of the offer side */
    int srow;           /* row of the last chunk streamed into the buffer (-1 before) */
    int64_t srem;       /* bytes of srow not yet streamed */
    int64_t known;      /* chunks entirely in the buffer (or beyond) so far */
    double s_prev;      /* when the last of them was entirely in the buffer */
    double *qa;         /* stage acceptance times of its last nbuf chunks: qa[idx % nbuf] */
    double *rdy;        /* buffer entry times of chunks accepted..known-1: rdy[idx % nbuf] */
    double *inq;        /* their store-queue entry times (traces) */
    double a_prev;      /* acceptance time of the previous chunk */
    double ready;       /* when the pending chunk is ready */
    double ftag;        /* finish tag of its last accepted chunk (fair queueing) */
    double weight;      /* its share of the stage when producers contend */
    double d_own;       /* when its last accepted byte will have drained */
    int outstanding;    /* 1 while it has bytes in the stage (holds its reserve) */
    double *acc;        /* when each of the last q+2 chunks left the store queue: acc[idx %
                         * (q+2)]; its acceptance into the stage, or with tandem queues its
                         * entry into the producer's own buffer */
    double *ring;       /* departure times of its last ring_m chunks (per-producer cap); NULL
                         * when the cap never holds this producer */
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

double xs_arbitration_weight(const xs_profile *p, int index)
{
    if (!(p->arbitration_skew > 0))
        return 1;
    /* a fixed pseudo-random place in [-1, 1] per producer index: which SMs are favoured depends on
     * where they sit, which the model does not know; only the spread of shares matters */
    uint32_t x = (uint32_t)index * 0x9e3779b9u + 0x7f4a7c15u;
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    double z = 2.0 * ((double)x / 4294967296.0) - 1.0;
    return exp(p->arbitration_skew * z);
}

/* Overflow loss (overflow_capacity_loss, overflow_loss_ns): from the stage's first refusal at
 * t_fill, Q shrinks linearly by loss*Q over loss_ns (at once if 0), and stays there until the
 * stage runs empty. The earliest time at which a chunk of c bytes fits: the backlog
 * R (d_last - t) plus c within the room, Q - shrink(t) + rsv (never less than one chunk). */
static double room_time(double Q, double loss, double loss_ns, double t_fill, double rsv,
                        double c, double R, double d_last)
{
    const double lo = fmax(Q * (1 - loss), c) + rsv - c; /* the room once fully shrunk, less c */
    const double t_end = t_fill + loss_ns;
    if (loss_ns > 0) {
        const double lam = (Q + rsv - c - lo) / loss_ns; /* bytes of room lost per ns */
        if (lam < R) {
            /* while it shrinks: R (d_last - t) = Q + rsv - c - lam (t - t_fill) */
            double t = (R * d_last - (Q + rsv - c) - lam * t_fill) / (R - lam);
            if (t <= t_end)
                return t;
        }
        /* the backlog falls no faster than the room shrinks: not before it has shrunk */
        double t = d_last - lo / R;
        return t > t_end ? t : t_end;
    }
    return d_last - lo / R;
}

xs_status xs_simulate(const xs_profile *pf, const xs_schedule *s, const xs_sim_opts *opts,
                      xs_result *out)
{
    return xs_simulate_programs(pf, s, NULL, opts, out);
}

xs_status xs_simulate_programs(const xs_profile *pf, const xs_schedule *s, const xs_programs *pg,
                               const xs_sim_opts *opts, xs_result *out)
{
    xs_sim_opts defaults = {0};
    const xs_sim_opts *o = opts ? opts : &defaults;
    memset(out, 0, sizeof *out);
    XS_TRY(xs_profile_check(pf, "profile"));
    if (!s || s->nrows < 1)
        return xs_seterr(XS_EINVAL, "schedule has no rows");
    /* A producer's bytes and work in a row: its program's, or the row's (every producer of the
     * row alike). A producer takes part in a row when the row names it and, with programs, when
     * its program stores something there. */
#define BYTES(row, p)                                                                         \
    (pg ? pg->bytes[(size_t)(row) * (size_t)pg->producers + (size_t)(p)]                     \
        : s->rows[row].bytes_per_producer)
#define GAP(row, p)                                                                           \
    (pg ? pg->gap_ns[(size_t)(row) * (size_t)pg->producers + (size_t)(p)] : s->rows[row].gap_ns)
#define ACTIVE(row, p) ((p) < s->rows[row].producers && (!pg || BYTES(row, p) > 0))
    if (pg) {
        const int w = xs_schedule_max_producers(s);
        if (pg->producers < w || !pg->bytes || !pg->gap_ns)
            return xs_seterr(XS_EINVAL, "programs: %d producers given for a schedule of %d, or "
                             "no arrays", pg->producers, w);
        for (int i = 0; i < s->nrows; i++)
            for (int p = 0; p < pg->producers; p++) {
                const int64_t b = BYTES(i, p);
                const double g = GAP(i, p);
                if (b < 0 || b > XS_MAX_BYTES_PER_PRODUCER || !(g >= 0) || g > XS_MAX_GAP_NS)
                    return xs_seterr(XS_EINVAL, "programs: row %d, producer %d: %lld bytes, gap "
                                     "%g ns out of range", i, p, (long long)b, g);
            }
    }

    const double r = pf->issue_bytes_per_ns, R = pf->drain_bytes_per_ns;
    const double oh = pf->issue_overhead_ns, Q = pf->capacity_bytes;
    const double reserve = pf->reserve_bytes_per_producer;
    /* When a producer's reserve leaves the stage (docs/MODEL.md, event model step 4):
     * reserve_release = 1: when it has nothing left to offer (its bytes stay in the backlog);
     * otherwise when its last accepted byte is within f*Q of the drain head, f =
     * reserve_shared_fraction (0: when drained; 1: when its bytes have left a buffer of its own
     * for a shared one of size Q) */
    const int release_at_issue = pf->reserve_release == 1;
    const double hold_ns = pf->reserve_shared_fraction * Q / R;
    const double loss = pf->overflow_capacity_loss, loss_ns = pf->overflow_loss_ns;
    int overflowed = 0;
    double t_fill = 0; /* the first refusal of the current overflow */
    const double row_start = pf->row_start_ns;
    const int64_t chunk = (int64_t)pf->chunk_bytes > 0 ? (int64_t)pf->chunk_bytes : 1;
    const int np = xs_schedule_max_producers(s);

    /* how much work: chunks offered in total */
    double nchunks = 0;
    for (int i = 0; i < s->nrows; i++)
        if (!pg)
            nchunks += (double)s->rows[i].producers *
                       ceil((double)s->rows[i].bytes_per_producer / (double)chunk);
        else
            for (int p = 0; p < s->rows[i].producers; p++)
                nchunks += ceil((double)BYTES(i, p) / (double)chunk);
    if (nchunks > 2147483647.0)
        return xs_seterr(XS_ERANGE, "schedule offers %.3g chunks of %lld bytes; the simulation "
                         "handles at most 2^31 (raise chunk_bytes with --set)", nchunks,
                         (long long)chunk);

    /* The per-producer cap: a producer with m chunks outstanding waits for the oldest of them
     * to drain, which takes a ring of its last m departure times. Rows take producers 0..K-1, so
     * the chunks a producer offers over the schedule fall with its index, and one that offers at
     * most m is never held and needs no ring: only producers 0..nring-1 get one (a cap of 1e15
     * bytes, or 65536 producers of which a few store much, must not allocate m rings each). With
     * programs the chunks need not fall with the index: every producer up to the last one that
     * offers more than m gets a ring. */
    int ring_m = 0, nring = 0;
    if (pf->capacity_bytes_per_producer > 0) {
        /* the cap limits a producer's share of Q; its reserve comes on top of it */
        double m = floor((pf->capacity_bytes_per_producer + pf->reserve_bytes_per_producer) /
                         (double)chunk);
        if (m < 1)
            m = 1;
        double *offered = calloc((size_t)np, sizeof *offered); /* by producer p */
        if (!offered)
            return xs_seterr(XS_ENOMEM, "out of memory simulating %d producers", np);
        for (int i = 0; i < s->nrows; i++)
            for (int p = 0; p < s->rows[i].producers; p++)
                offered[p] += ceil((double)BYTES(i, p) / (double)chunk);
        for (int p = np - 1; p >= 0 && !nring; p--)
            if (offered[p] > m)
                nring = p + 1;
        free(offered);
        if (nring && m * nring > (double)(1 << 28))
            return xs_seterr(XS_ERANGE, "%d producers x a per-producer cap of %.0f chunks: too "
                             "many outstanding chunks to track (at most 2^28; raise chunk_bytes "
                             "with --set)", nring, m);
        if (nring)
            ring_m = (int)m; /* < total <= 2^31 */
    }

    /* the producer's queue, in whole chunks */
    const int q = (int)floor(pf->queue_bytes_per_producer / (double)chunk);
    const int qr = q + 2; /* acc ring: the last q+1 chunks and the one before them (SETTLE) */
    if ((double)np * qr > (double)(1 << 28))
        return xs_seterr(XS_ERANGE, "%d producers x a queue of %d chunks: too much state (raise "
                         "chunk_bytes with --set)", np, q);

    /* tandem queues: the producer's own buffer, in whole chunks (0: none, the earlier model) */
    const int nbuf = (int)fmin(floor(pf->buffer_bytes_per_producer / (double)chunk), 1 << 28);
    const int tandem = nbuf > 0;
    if (tandem && (double)np * 3 * nbuf > (double)(1 << 28))
        return xs_seterr(XS_ERANGE, "%d producers x a buffer of %d chunks: too much state (raise "
                         "chunk_bytes with --set)", np, nbuf);

    XS_TRY(xs_result_alloc(out, s->nrows, np, 1));
    producer *pr = calloc((size_t)np, sizeof *pr);
    heap h = {malloc((size_t)np * sizeof(ev)), 0};  /* chunks not yet ready, by ready time */
    heap el = {malloc((size_t)np * sizeof(ev)), 0}; /* ready chunks contending, by start tag */
    const int held_cap = 4 * np + 16; /* producers' drain times (reserve), with stale entries */
    const int track_drain = reserve > 0 && !release_at_issue;
    heap held = {track_drain ? malloc((size_t)held_cap * sizeof(ev)) : NULL, 0};
    int n_out = 0;
    double *rings = nring ? malloc((size_t)nring * (size_t)ring_m * sizeof(double)) : NULL;
    double *accs = malloc((size_t)np * (size_t)qr * sizeof(double));
    double *bufs = tandem ? malloc((size_t)np * 3 * (size_t)nbuf * sizeof(double)) : NULL;
    double *arrive = o->sync ? malloc((size_t)np * sizeof(double)) : NULL;
    sampler smp = {0};
    if (o->record_backlog) {
        smp.cap = o->max_samples ? o->max_samples : 100000;
        if (smp.cap < 2)
            smp.cap = 2;
        smp.a = malloc(smp.cap * sizeof *smp.a);
        smp.stride = 1;
    }
    if (!pr || !h.a || !el.a || (track_drain && !held.a) || (nring && !rings) || !accs ||
        (tandem && !bufs) || (o->sync && !arrive) || (o->record_backlog && !smp.a)) {
        free(pr); free(h.a); free(el.a); free(held.a); free(rings); free(accs); free(bufs);
        free(arrive); free(smp.a);
        xs_result_free(out);
        return xs_seterr(XS_ENOMEM, "out of memory simulating %d producers", np);
    }
    for (int p = 0; p < np; p++) {
        pr[p].ring = p < nring ? rings + (size_t)p * ring_m : NULL;
        pr[p].acc = accs + (size_t)p * qr;
        pr[p].orow = -1;
        pr[p].owait = 1;
        pr[p].a_prev = -INFINITY;
        pr[p].weight = xs_arbitration_weight(pf, p);
        pr[p].srow = -1;
        pr[p].s_prev = -INFINITY;
        if (tandem) {
            pr[p].qa = bufs + (size_t)p * 3 * nbuf;
            pr[p].rdy = pr[p].qa + nbuf;
            pr[p].inq = pr[p].rdy + nbuf;
        }
    }

    double d_last = 0, peak = 0, makespan = 0, t_now = -INFINITY, vtime = 0;
    int arrived = 0, barrier_row = 0;
    double *win0 = out->win_start, *win1 = out->win_end;
#define W(row, p) ((size_t)(row) * np + (p))
#define NCHUNKS(row, p) ((BYTES(row, p) + chunk - 1) / chunk)

    /* Offer the next chunk of producer p (the head of its queue), if its row has started. */
#define OFFER_NEXT(p_)                                                                        \
    do {                                                                                      \
        producer *z_ = &pr[p_];                                                               \
        if (tandem && z_->accepted >= z_->known) {                                            \
            z_->owait = 1; /* tandem: the next chunk is not in the buffer yet */              \
            break;                                                                            \
        }                                                                                     \
        if (z_->orem == 0) {                                                                  \
            int nr_ = z_->orow + 1;                                                           \
            while (nr_ < s->nrows && !ACTIVE(nr_, p_))                                        \
                nr_++;                                                                        \
            if (nr_ >= s->nrows || isnan(win0[W(nr_, p_)])) {                                 \
                z_->owait = 1; /* no more chunks, or the program has not started that row */  \
                break;                                                                        \
            }                                                                                 \
            z_->orow = nr_;                                                                   \
            z_->orem = BYTES(nr_, p_);                                                        \
        }                                                                                     \
        z_->owait = 0;                                                                        \
        z_->pending = z_->orem < chunk ? z_->orem : chunk;                                    \
        z_->orem -= z_->pending;                                                              \
        z_->oidx = z_->accepted;                                                              \
        double rd_;                                                                           \
        if (tandem) {                                                                         \
            /* the head of its own buffer: there since the stream put it there */             \
            z_->in_t = z_->inq[z_->oidx % nbuf];                                              \
            rd_ = z_->rdy[z_->oidx % nbuf];                                                   \
        } else {                                                                              \
            /* in the queue once the program has started and there is room; streamed at r     \
             * after the previous chunk left */                                               \
            double in_ = win0[W(z_->orow, p_)] + oh;                                          \
            if (q > 0 && z_->oidx - q >= 0 && z_->acc[(z_->oidx - q) % qr] > in_)             \
                in_ = z_->acc[(z_->oidx - q) % qr];                                           \
            z_->in_t = in_;                                                                   \
            rd_ = (in_ > z_->a_prev ? in_ : z_->a_prev) + (double)z_->pending / r;            \
        }                                                                                     \
        z_->ready = rd_;                                                                      \
        heap_push(&h, (ev){rd_, 0, (p_)});                                                    \
    } while (0)

    /* Tandem queues: stream producer p's next chunks at r into its own buffer while the buffer
     * has room (the chunk nbuf places earlier has entered the stage), their row has started and
     * they are in the store queue (the chunk q places earlier has left it for the buffer). */
#define ADVANCE(p_)                                                                           \
    do {                                                                                      \
        producer *w_ = &pr[p_];                                                               \
        for (;;) {                                                                            \
            int64_t n_ = w_->known;                                                           \
            if (n_ - nbuf >= w_->accepted)                                                    \
                break; /* buffer full */                                                      \
            if (w_->srem == 0) {                                                              \
                int nr_ = w_->srow + 1;                                                       \
                while (nr_ < s->nrows && !ACTIVE(nr_, p_))                                    \
                    nr_++;                                                                    \
                if (nr_ >= s->nrows || isnan(win0[W(nr_, p_)]))                               \
                    break; /* no more chunks, or the program has not started that row */      \
                w_->srow = nr_;                                                               \
                w_->srem = BYTES(nr_, p_);                                                    \
            }                                                                                 \
            int64_t sz_ = w_->srem < chunk ? w_->srem : chunk;                                \
            w_->srem -= sz_;                                                                  \
            double in_ = win0[W(w_->srow, p_)] + oh;                                          \
            if (q > 0 && n_ - q >= 0 && w_->acc[(n_ - q) % qr] > in_)                         \
                in_ = w_->acc[(n_ - q) % qr];                                                 \
            double rd_ = (in_ > w_->s_prev ? in_ : w_->s_prev) + (double)sz_ / r;             \
            /* its bytes stream in while the buffer's oldest chunk waits; it is complete once    \
             * that one has gone on into the stage (the producer holds q + nbuf chunks then) */ \
            if (n_ - nbuf >= 0 && w_->qa[(n_ - nbuf) % nbuf] > rd_)                           \
                rd_ = w_->qa[(n_ - nbuf) % nbuf];                                             \
            w_->acc[n_ % qr] = rd_; /* it has left the store queue */                         \
            w_->rdy[n_ % nbuf] = rd_;                                                         \
            w_->inq[n_ % nbuf] = in_;                                                         \
            w_->s_prev = rd_;                                                                 \
            w_->known = n_ + 1;                                                               \
        }                                                                                     \
    } while (0)

    /* Start producer p's program at time t: skip the rows it takes no part in (their work
     * only), stop at a sync barrier, or start an active row and hand its chunks to the queue. */
#define PROGRAM_START(p_, t_)                                                                 \
    do {                                                                                      \
        producer *y_ = &pr[p_];                                                               \
        double tt_ = (t_);                                                                    \
        for (;;) {                                                                            \
            if (y_->prow >= s->nrows) {                                                       \
                y_->pwait = 0;                                                                \
                break;                                                                        \
            }                                                                                 \
            if (y_->prow > 0)                                                                 \
                tt_ += row_start; /* every later row: its descriptor, the barriers */         \
            if (ACTIVE(y_->prow, p_)) {                                                       \
                win0[W(y_->prow, p_)] = tt_;                                                  \
                y_->assigned += NCHUNKS(y_->prow, p_);                                        \
                y_->plast = y_->assigned - 1;                                                 \
                y_->pwait = 1;                                                                \
                if (tandem)                                                                   \
                    ADVANCE(p_);                                                              \
                if (y_->owait)                                                                \
                    OFFER_NEXT(p_);                                                           \
                break;                                                                        \
            }                                                                                 \
            tt_ += GAP(y_->prow, p_);                                                         \
            if (tt_ > makespan)                                                               \
                makespan = tt_;                                                               \
            if (o->sync) {                                                                    \
                arrive[p_] = tt_;                                                             \
                arrived++;                                                                    \
                y_->pwait = 0;                                                                \
                break;                                                                        \
            }                                                                                 \
            y_->prow++;                                                                       \
        }                                                                                     \
    } while (0)

    /* The program's issue of its row ends when the row's last chunk is in the queue, i.e. when
     * the chunk q places before it has left the queue: been accepted, or with tandem queues
     * entered the producer's own buffer (with no queue: the last chunk itself); then its work,
     * then the next row (or the barrier). Repeats while ends are known. */
#define SETTLE(p_)                                                                            \
    do {                                                                                      \
        producer *x_ = &pr[p_];                                                               \
        while (x_->pwait && x_->plast - q < (tandem ? x_->known : x_->accepted)) {            \
            int64_t need_ = x_->plast - q;                                                    \
            double en_ = win0[W(x_->prow, p_)] + oh;                                          \
            double ep_ = en_; /* the same with the row's last chunk left out */               \
            if (need_ >= 0 && x_->acc[need_ % qr] > en_)                                      \
                en_ = x_->acc[need_ % qr];                                                    \
            if (need_ >= 1 && x_->acc[(need_ - 1) % qr] > ep_)                                \
                ep_ = x_->acc[(need_ - 1) % qr];                                              \
            /* with a queue, a last chunk of s < c bytes enters it once s/c of the chunk q     \
             * places before it has left: that share of the step between the two (continuous  \
             * in B; whole chunks alone put a burst's stall on a grid of c bytes per producer) */ \
            int64_t tail_ = BYTES(x_->prow, p_) % chunk;                                      \
            if (q > 0 && tail_ > 0 && en_ > ep_)                                              \
                en_ = ep_ + (en_ - ep_) * (double)tail_ / (double)chunk;                      \
            win1[W(x_->prow, p_)] = en_;                                                      \
            x_->pwait = 0;                                                                    \
            double tn_ = en_ + GAP(x_->prow, p_);                                             \
            if (tn_ > makespan)                                                               \
                makespan = tn_;                                                               \
            if (o->sync) {                                                                    \
                arrive[p_] = tn_;                                                             \
                arrived++;                                                                    \
                break;                                                                        \
            }                                                                                 \
            x_->prow++;                                                                       \
            PROGRAM_START(p_, tn_);                                                           \
        }                                                                                     \
    } while (0)

    /* every producer's program begins start_ns after the schedule's start instant */
    for (int p = 0; p < np; p++) {
        PROGRAM_START(p, pf->start_ns);
        SETTLE(p);
    }

    for (;;) {
        if (o->sync && arrived == np) {
            /* every producer reached the barrier after barrier_row: release them together */
            double t = -INFINITY;
            for (int p = 0; p < np; p++)
                if (arrive[p] > t)
                    t = arrive[p];
            t += pf->barrier_ns;
            arrived = 0;
            barrier_row++;
            if (barrier_row >= s->nrows) {
                /* every window has closed. Chunks may still sit in queues or buffers: with
                 * tandem buffers or a trace they are accepted to the end (the backlog record and
                 * the trace then hold every byte); otherwise stop here, as the earlier model
                 * did (no window changes either way) */
                if (!tandem && !o->trace)
                    break;
                continue;
            }
            for (int p = 0; p < np; p++) {
                pr[p].prow = barrier_row;
                PROGRAM_START(p, t);
            }
            /* a burst entirely within the queue ends at once */
            for (int p = 0; p < np; p++)
                SETTLE(p);
            continue;
        }
        if (h.n == 0 && el.n == 0)
            break;
        /* The next acceptance: when the stage has room for a chunk, or the earliest chunk is
         * ready, whichever is later. Every chunk ready by then contends; the stage serves them in
         * start-tag order (start-time fair queueing, weighted by each producer's share), so with
         * equal shares contending producers take turns, and with skewed shares some are starved:
         * the unfairness measured on the H200. */
        /* the stage's room: Q shared, plus a reserve for each producer with stores in it (at
         * least one: the producer about to offer brings its own into an empty stage) */
        while (track_drain && held.n && by_then(held.a[0].t, t_now)) {
            ev d = heap_pop(&held);
            if (d.t == pr[d.p].d_own - hold_ns) {
                pr[d.p].outstanding = 0;
                n_out--;
            }
        }
        double t_next = el.n ? t_now : h.a[0].t;
        /* overflow loss: the stage holds Q (1 - loss) from its first refusal until it next
         * runs empty (the earliest offer finds it empty again) */
        if (overflowed && by_then(d_last, t_next))
            overflowed = 0;
        const double rsv = reserve * (double)(n_out > 0 ? n_out : 1);
        double t_space = overflowed ? room_time(Q, loss, loss_ns, t_fill, rsv, chunk, R, d_last)
                                    : d_last - (Q + rsv - (double)chunk) / R;
        if (!by_then(t_space, t_next) && loss > 0 && !overflowed) {
            overflowed = 1; /* a ready chunk finds no room: the first refusal */
            t_fill = t_next;
            t_space = room_time(Q, loss, loss_ns, t_fill, rsv, chunk, R, d_last);
        }
        if (t_space > t_next)
            t_next = t_space;
        while (h.n && by_then(h.a[0].t, t_next)) {
            ev f = heap_pop(&h);
            producer *y = &pr[f.p];
            double tag = y->ftag > vtime ? y->ftag : vtime;
            heap_push(&el, (ev){tag, f.t, f.p});
        }
        ev e = heap_pop(&el);
        producer *z = &pr[e.p];
        /* the producer's own cap: its m-th most recent chunk must have drained */
        if (z->ring && z->ring_n == ring_m) {
            double tc = z->ring[z->ring_head];
            if (!by_then(tc, t_next)) {
                heap_push(&h, (ev){tc, 0, e.p});
                continue;
            }
        }
        double c = (double)z->pending;
        double t_acc = t_next > z->ready ? t_next : z->ready;
        if (t_acc < t_now)
            t_acc = t_now;
        t_now = t_acc;
        vtime = e.t;
        z->ftag = e.t + c / z->weight;
        double t_arr = t_acc - c / r;
        d_last = (d_last > t_arr ? d_last : t_arr) + c / R;
        if (reserve > 0 && !z->outstanding) {
            z->outstanding = 1;
            n_out++;
        }
        if (track_drain) {
            /* this producer holds its reserve until its last accepted byte has drained (or is
             * within f*Q of the drain head) */
            z->d_own = d_last;
            if (held.n == held_cap) {
                /* stale entries only: compact by re-pushing the live ones */
                held.n = 0;
                for (int p = 0; p < np; p++)
                    if (pr[p].outstanding)
                        heap_push(&held, (ev){pr[p].d_own - hold_ns, 0, p});
            }
            heap_push(&held, (ev){d_last - hold_ns, 0, e.p});
        }
        if (o->trace) {
            xs_chunk_trace ct = {e.p, z->orow, z->pending, z->in_t, z->ready, t_acc, d_last};
            o->trace(o->trace_ctx, &ct);
        }
        double backlog = R * (d_last - t_acc);
        if (backlog > peak)
            peak = backlog;
        sample_add(&smp, t_acc, backlog);
        if (z->ring) {
            if (z->ring_n < ring_m) {
                z->ring[(z->ring_head + z->ring_n) % ring_m] = d_last;
                z->ring_n++;
            } else {
                z->ring[z->ring_head] = d_last;
                z->ring_head = (z->ring_head + 1) % ring_m;
            }
        }
        z->a_prev = t_acc;
        z->accepted = z->oidx + 1;
        if (tandem) {
            /* room in its buffer: stream on; the head of the buffer is offered next */
            z->qa[z->oidx % nbuf] = t_acc;
            z->owait = 1;
            ADVANCE(e.p);
            SETTLE(e.p);
            if (z->owait)
                OFFER_NEXT(e.p);
        } else {
            z->acc[z->oidx % qr] = t_acc;
            SETTLE(e.p);
            OFFER_NEXT(e.p);
        }
        if (release_at_issue && z->outstanding && z->owait) {
            /* nothing left to offer: its reserve leaves now; its bytes stay in the backlog */
            z->outstanding = 0;
            n_out--;
        }
    }
    /* every active window must have closed; anything else is a defect of this function */
    for (int row = 0; row < s->nrows; row++)
        for (int p = 0; p < s->rows[row].producers; p++)
            if (ACTIVE(row, p) && isnan(win1[W(row, p)])) {
                free(pr); free(h.a); free(el.a); free(held.a); free(rings); free(accs);
                free(bufs); free(arrive); free(smp.a);
                xs_result_free(out);
                return xs_seterr(XS_ERANGE, "simulation did not complete (row %d, producer %d)",
                                 row, p);
            }
#undef OFFER_NEXT
#undef ADVANCE
#undef PROGRAM_START
#undef SETTLE
#undef W
#undef NCHUNKS
#undef ACTIVE
#undef GAP
#undef BYTES

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
    free(el.a);
    free(held.a);
    free(rings);
    free(accs);
    free(bufs);
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
