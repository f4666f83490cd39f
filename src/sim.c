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
 * drift of docs/MODEL.md ("Event model"), which a fluid model of synchronised producers cannot
 * represent.
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

#include "evheap.h"
#include "xstage.h"

/* Whether time t has come by time now. Times within a relative 1e-12 of each other are one
 * instant: the answer must not depend on how the two were rounded (shifting every time by
 * start_ns would otherwise let a producer's cap release a chunk at one shift and hold it at
 * another, and a producer's window, which reads its last two chunks' times, would move). */
static int by_then(double t, double now)
{
    return t <= now || fabs(t - now) <= 1e-12 * fmax(fabs(t), fabs(now));
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

/* ---- the engine ------------------------------------------------------------------------------
 *
 * One simulation is an xs_engine: the inputs, the profile's numbers in the units the engine uses,
 * the producers and the stage. Its steps are plain functions of it:
 *   engine_init      size and allocate (every limit is checked before anything is allocated)
 *   program_start    a producer's program starts a row, skips idle rows or reaches a barrier
 *   stream_buffer    tandem queues: chunks stream from the store queue into the producer's buffer
 *   offer_next       the producer offers the head of its queue (or buffer) to the stage
 *   settle           a burst's issue ends once its last chunk is in the queue; the program goes on
 *   release_barrier  sync: every producer reached the barrier; release them together
 *   accept_next      the stage accepts the next chunk (or holds it at the producer's cap)
 *   engine_finish    the result; engine_free releases everything else
 * Rows (the schedule's, or per-producer programs) are read only through row_bytes, row_gap and
 * row_active; the stage side (accept_next, admit) sees producers and chunks, never rows. */

typedef struct {
    /* inputs */
    const xs_profile *pf;
    const xs_schedule *s;
    const xs_programs *pg; /* NULL: every producer of a row runs the row's burst and gap */
    const xs_sim_opts *o;
    /* the profile, in the engine's terms */
    double r, R;           /* issue rate of one producer, drain rate of the stage (bytes/ns) */
    double oh;             /* issue overhead of one burst (ns) */
    double Q;              /* shared capacity (bytes) */
    double reserve;        /* capacity each producer with bytes in the stage adds (bytes) */
    int release_at_issue;  /* the reserve leaves when the producer has nothing left to offer */
    int track_drain;       /* the reserve leaves when its bytes are within hold_ns of drained */
    double hold_ns;        /* f*Q/R: how long before its last byte drains the reserve leaves */
    double loss, loss_ns;  /* overflow loss: share of Q lost and over how long (ns) */
    double row_start;      /* set-up before each later row (ns) */
    int64_t chunk;         /* acceptance granularity (bytes, >= 1) */
    int np;                /* producers: the schedule's widest row */
    int ring_m, nring;     /* per-producer cap: chunks outstanding, producers that need a ring */
    int q, qr;             /* store queue (chunks); size of each producer's acc ring (q + 2) */
    int nbuf, tandem;      /* tandem queues: each producer's own buffer (chunks); nbuf > 0 */
    int held_cap;          /* capacity of held, stale entries included */
    /* producers and their storage */
    producer *pr;          /* [np] */
    double *rings, *accs, *bufs; /* backing arrays of pr[].ring, .acc, .qa/.rdy/.inq */
    double *arrive;        /* [np] sync: when each producer reached the barrier (ns) */
    double *win0, *win1;   /* the result's windows: start and end of (row, producer) (ns) */
    /* the stage */
    xs_evheap future;      /* chunks not yet ready, by ready time (t) */
    xs_evheap eligible;    /* ready chunks contending, by start tag (t) then ready time (t2) */
    xs_evheap held;        /* reserve releases: when each holder's reserve leaves (t) */
    int n_out;             /* producers holding a reserve */
    double d_last;         /* departure time of the last accepted byte (ns) */
    double t_now;          /* the last acceptance (ns) */
    double vtime;          /* fair queueing: the start tag of the last accepted chunk */
    int overflowed;        /* the stage has refused a ready chunk and not yet run empty */
    double t_fill;         /* the first refusal of the current overflow (ns) */
    double peak;           /* largest backlog (bytes) */
    double makespan;       /* the latest end of a producer's work (ns) */
    sampler smp;           /* backlog record */
    int arrived;           /* sync: producers at the barrier */
    int barrier_row;       /* sync: the row the last barrier released */
} xs_engine;

/* A producer's bytes and work in a row: its program's, or the row's (every producer of the row
 * alike). A producer takes part in a row when the row names it and, with programs, when its
 * program stores something there. */
static int64_t row_bytes(const xs_engine *e, int row, int p)
{
    return e->pg ? e->pg->bytes[(size_t)row * (size_t)e->pg->producers + (size_t)p]
                 : e->s->rows[row].bytes_per_producer;
}

static double row_gap(const xs_engine *e, int row, int p)
{
    return e->pg ? e->pg->gap_ns[(size_t)row * (size_t)e->pg->producers + (size_t)p]
                 : e->s->rows[row].gap_ns;
}

static int row_active(const xs_engine *e, int row, int p)
{
    return p < e->s->rows[row].producers && (!e->pg || row_bytes(e, row, p) > 0);
}

static int64_t row_chunks(const xs_engine *e, int row, int p)
{
    return (row_bytes(e, row, p) + e->chunk - 1) / e->chunk;
}

static size_t win_at(const xs_engine *e, int row, int p) /* index into win0 / win1 */
{
    return (size_t)row * e->np + p;
}

static xs_status check_programs(const xs_schedule *s, const xs_programs *pg)
{
    const int w = xs_schedule_max_producers(s);
    if (pg->producers < w || !pg->bytes || !pg->gap_ns)
        return xs_seterr(XS_EINVAL, "programs: %d producers given for a schedule of %d, or "
                         "no arrays", pg->producers, w);
    for (int i = 0; i < s->nrows; i++)
        for (int p = 0; p < pg->producers; p++) {
            const size_t at = (size_t)i * (size_t)pg->producers + (size_t)p;
            const int64_t b = pg->bytes[at];
            const double g = pg->gap_ns[at];
            if (b < 0 || b > XS_MAX_BYTES_PER_PRODUCER || !(g >= 0) || g > XS_MAX_GAP_NS)
                return xs_seterr(XS_EINVAL, "programs: row %d, producer %d: %lld bytes, gap "
                                 "%g ns out of range", i, p, (long long)b, g);
        }
    return XS_OK;
}

/* The per-producer cap: a producer with m chunks outstanding waits for the oldest of them to
 * drain, which takes a ring of its last m departure times. Rows take producers 0..K-1, so the
 * chunks a producer offers over the schedule fall with its index, and one that offers at most m
 * is never held and needs no ring: only producers 0..nring-1 get one (a cap of 1e15 bytes, or
 * 65536 producers of which a few store much, must not allocate m rings each). With programs the
 * chunks need not fall with the index: every producer up to the last one that offers more than m
 * gets a ring. Sets e->ring_m and e->nring. */
static xs_status size_rings(xs_engine *e)
{
    const xs_profile *pf = e->pf;
    e->ring_m = e->nring = 0;
    if (!(pf->capacity_bytes_per_producer > 0))
        return XS_OK;
    /* the cap limits a producer's share of Q; its reserve comes on top of it */
    double m = floor((pf->capacity_bytes_per_producer + pf->reserve_bytes_per_producer) /
                     (double)e->chunk);
    if (m < 1)
        m = 1;
    double *offered = calloc((size_t)e->np, sizeof *offered); /* by producer p */
    if (!offered)
        return xs_seterr(XS_ENOMEM, "out of memory simulating %d producers", e->np);
    for (int i = 0; i < e->s->nrows; i++)
        for (int p = 0; p < e->s->rows[i].producers; p++)
            offered[p] += ceil((double)row_bytes(e, i, p) / (double)e->chunk);
    int nring = 0;
    for (int p = e->np - 1; p >= 0 && !nring; p--)
        if (offered[p] > m)
            nring = p + 1;
    free(offered);
    if (nring && m * nring > (double)(1 << 28))
        return xs_seterr(XS_ERANGE, "%d producers x a per-producer cap of %.0f chunks: too "
                         "many outstanding chunks to track (at most 2^28; raise chunk_bytes "
                         "with --set)", nring, m);
    e->nring = nring;
    if (nring)
        e->ring_m = (int)m; /* < total <= 2^31 */
    return XS_OK;
}

/* The engine's numbers and sizes from the profile and the rows; no allocation but the cap's
 * count. Fails with XS_ERANGE when the work or the state would be too large. */
static xs_status engine_size(xs_engine *e)
{
    const xs_profile *pf = e->pf;
    const xs_schedule *s = e->s;
    e->r = pf->issue_bytes_per_ns;
    e->R = pf->drain_bytes_per_ns;
    e->oh = pf->issue_overhead_ns;
    e->Q = pf->capacity_bytes;
    e->reserve = pf->reserve_bytes_per_producer;
    /* When a producer's reserve leaves the stage (docs/MODEL.md, event model step 4):
     * reserve_release = 1: when it has nothing left to offer (its bytes stay in the backlog);
     * otherwise when its last accepted byte is within f*Q of the drain head, f =
     * reserve_shared_fraction (0: when drained; 1: when its bytes have left a buffer of its own
     * for a shared one of size Q) */
    e->release_at_issue = pf->reserve_release == 1;
    e->hold_ns = pf->reserve_shared_fraction * e->Q / e->R;
    e->loss = pf->overflow_capacity_loss;
    e->loss_ns = pf->overflow_loss_ns;
    e->row_start = pf->row_start_ns;
    e->chunk = (int64_t)pf->chunk_bytes > 0 ? (int64_t)pf->chunk_bytes : 1;
    e->np = xs_schedule_max_producers(s);

    /* how much work: chunks offered in total */
    double nchunks = 0;
    for (int i = 0; i < s->nrows; i++)
        if (!e->pg)
            nchunks += (double)s->rows[i].producers *
                       ceil((double)s->rows[i].bytes_per_producer / (double)e->chunk);
        else
            for (int p = 0; p < s->rows[i].producers; p++)
                nchunks += ceil((double)row_bytes(e, i, p) / (double)e->chunk);
    if (nchunks > 2147483647.0)
        return xs_seterr(XS_ERANGE, "schedule offers %.3g chunks of %lld bytes; the simulation "
                         "handles at most 2^31 (raise chunk_bytes with --set)", nchunks,
                         (long long)e->chunk);
    XS_TRY(size_rings(e));

    /* the producer's queue, in whole chunks */
    e->q = (int)floor(pf->queue_bytes_per_producer / (double)e->chunk);
    e->qr = e->q + 2; /* acc ring: the last q+1 chunks and the one before them (settle) */
    if ((double)e->np * e->qr > (double)(1 << 28))
        return xs_seterr(XS_ERANGE, "%d producers x a queue of %d chunks: too much state (raise "
                         "chunk_bytes with --set)", e->np, e->q);

    /* tandem queues: the producer's own buffer, in whole chunks (0: none, the earlier model) */
    e->nbuf = (int)fmin(floor(pf->buffer_bytes_per_producer / (double)e->chunk), 1 << 28);
    e->tandem = e->nbuf > 0;
    if (e->tandem && (double)e->np * 3 * e->nbuf > (double)(1 << 28))
        return xs_seterr(XS_ERANGE, "%d producers x a buffer of %d chunks: too much state (raise "
                         "chunk_bytes with --set)", e->np, e->nbuf);
    e->track_drain = e->reserve > 0 && !e->release_at_issue;
    e->held_cap = 4 * e->np + 16; /* producers' drain times (reserve), with stale entries */
    return XS_OK;
}

static void engine_free(xs_engine *e)
{
    free(e->pr);
    xs_evheap_free(&e->future);
    xs_evheap_free(&e->eligible);
    xs_evheap_free(&e->held);
    free(e->rings);
    free(e->accs);
    free(e->bufs);
    free(e->arrive);
    free(e->smp.a);
    e->pr = NULL;
    e->rings = e->accs = e->bufs = e->arrive = NULL;
    e->smp.a = NULL;
}

/* Allocate the producers and the stage for a sized engine and the result's windows in *out.
 * On failure everything is released, *out included. */
static xs_status engine_init(xs_engine *e, xs_result *out)
{
    const int np = e->np;
    XS_TRY(xs_result_alloc(out, e->s->nrows, np, 1));
    e->win0 = out->win_start;
    e->win1 = out->win_end;
    e->pr = calloc((size_t)np, sizeof *e->pr);
    /* each producer has at most one chunk in future or eligible, and held is compacted when it
     * fills: the heaps never grow, so their pushes cannot fail */
    int heaps_ok = xs_evheap_init(&e->future, np) == 0 && xs_evheap_init(&e->eligible, np) == 0;
    if (e->track_drain)
        heaps_ok = heaps_ok && xs_evheap_init(&e->held, e->held_cap) == 0;
    if (e->nring)
        e->rings = malloc((size_t)e->nring * (size_t)e->ring_m * sizeof(double));
    e->accs = malloc((size_t)np * (size_t)e->qr * sizeof(double));
    if (e->tandem)
        e->bufs = malloc((size_t)np * 3 * (size_t)e->nbuf * sizeof(double));
    if (e->o->sync)
        e->arrive = malloc((size_t)np * sizeof(double));
    if (e->o->record_backlog) {
        e->smp.cap = e->o->max_samples ? e->o->max_samples : 100000;
        if (e->smp.cap < 2)
            e->smp.cap = 2;
        e->smp.a = malloc(e->smp.cap * sizeof *e->smp.a);
        e->smp.stride = 1;
    }
    if (!e->pr || !heaps_ok || (e->nring && !e->rings) || !e->accs || (e->tandem && !e->bufs) ||
        (e->o->sync && !e->arrive) || (e->o->record_backlog && !e->smp.a)) {
        engine_free(e);
        xs_result_free(out);
        return xs_seterr(XS_ENOMEM, "out of memory simulating %d producers", np);
    }
    for (int p = 0; p < np; p++) {
        producer *z = &e->pr[p];
        z->ring = p < e->nring ? e->rings + (size_t)p * e->ring_m : NULL;
        z->acc = e->accs + (size_t)p * e->qr;
        z->orow = -1;
        z->owait = 1;
        z->a_prev = -INFINITY;
        z->weight = xs_arbitration_weight(e->pf, p);
        z->srow = -1;
        z->s_prev = -INFINITY;
        if (e->tandem) {
            z->qa = e->bufs + (size_t)p * 3 * e->nbuf;
            z->rdy = z->qa + e->nbuf;
            z->inq = z->rdy + e->nbuf;
        }
    }
    e->d_last = e->peak = e->makespan = e->vtime = 0;
    e->t_now = -INFINITY;
    return XS_OK;
}

/* The first row after `after` in which producer p takes part and whose burst its program has
 * started; -1 when there is none (yet). */
static int next_started_row(const xs_engine *e, int p, int after)
{
    int row = after + 1;
    while (row < e->s->nrows && !row_active(e, row, p))
        row++;
    if (row >= e->s->nrows || isnan(e->win0[win_at(e, row, p)]))
        return -1; /* no more chunks, or the program has not started that row */
    return row;
}

/* Offer the next chunk of producer p (the head of its queue) to the stage, if its row has
 * started: it joins the future heap at its ready time. Sets owait when there is none. */
static void offer_next(xs_engine *e, int p)
{
    producer *z = &e->pr[p];
    if (e->tandem && z->accepted >= z->known) {
        z->owait = 1; /* tandem: the next chunk is not in the buffer yet */
        return;
    }
    if (z->orem == 0) {
        const int row = next_started_row(e, p, z->orow);
        if (row < 0) {
            z->owait = 1;
            return;
        }
        z->orow = row;
        z->orem = row_bytes(e, row, p);
    }
    z->owait = 0;
    z->pending = z->orem < e->chunk ? z->orem : e->chunk;
    z->orem -= z->pending;
    z->oidx = z->accepted;
    double ready;
    if (e->tandem) {
        /* the head of its own buffer: there since the stream put it there */
        z->in_t = z->inq[z->oidx % e->nbuf];
        ready = z->rdy[z->oidx % e->nbuf];
    } else {
        /* in the queue once the program has started and there is room; streamed at r after
         * the previous chunk left */
        double in = e->win0[win_at(e, z->orow, p)] + e->oh;
        if (e->q > 0 && z->oidx - e->q >= 0 && z->acc[(z->oidx - e->q) % e->qr] > in)
            in = z->acc[(z->oidx - e->q) % e->qr];
        z->in_t = in;
        ready = (in > z->a_prev ? in : z->a_prev) + (double)z->pending / e->r;
    }
    z->ready = ready;
    xs_evheap_push(&e->future, (xs_ev){ready, 0, p});
}

/* Tandem queues: stream producer p's next chunks at r into its own buffer while the buffer has
 * room (the chunk nbuf places earlier has entered the stage), their row has started and they are
 * in the store queue (the chunk q places earlier has left it for the buffer). */
static void stream_buffer(xs_engine *e, int p)
{
    producer *w = &e->pr[p];
    const int q = e->q, qr = e->qr, nbuf = e->nbuf;
    for (;;) {
        const int64_t n = w->known;
        if (n - nbuf >= w->accepted)
            return; /* buffer full */
        if (w->srem == 0) {
            const int row = next_started_row(e, p, w->srow);
            if (row < 0)
                return;
            w->srow = row;
            w->srem = row_bytes(e, row, p);
        }
        const int64_t size = w->srem < e->chunk ? w->srem : e->chunk;
        w->srem -= size;
        double in = e->win0[win_at(e, w->srow, p)] + e->oh;
        if (q > 0 && n - q >= 0 && w->acc[(n - q) % qr] > in)
            in = w->acc[(n - q) % qr];
        double ready = (in > w->s_prev ? in : w->s_prev) + (double)size / e->r;
        /* its bytes stream in while the buffer's oldest chunk waits; it is complete once that
         * one has gone on into the stage (the producer holds q + nbuf chunks then) */
        if (n - nbuf >= 0 && w->qa[(n - nbuf) % nbuf] > ready)
            ready = w->qa[(n - nbuf) % nbuf];
        w->acc[n % qr] = ready; /* it has left the store queue */
        w->rdy[n % nbuf] = ready;
        w->inq[n % nbuf] = in;
        w->s_prev = ready;
        w->known = n + 1;
    }
}

/* Producer p reached the end of a row's work at time t (ns): with sync it waits at the barrier
 * (1), otherwise its program goes on to the next row (0). */
static int row_done(xs_engine *e, int p, double t)
{
    if (t > e->makespan)
        e->makespan = t;
    if (!e->o->sync)
        return 0;
    e->arrive[p] = t;
    e->arrived++;
    return 1;
}

/* Start producer p's program at time t (ns) at its row prow: skip the rows it takes no part in
 * (their work only), stop at a sync barrier, or start an active row and hand its chunks to the
 * queue. */
static void program_start(xs_engine *e, int p, double t)
{
    producer *y = &e->pr[p];
    for (;;) {
        if (y->prow >= e->s->nrows) {
            y->pwait = 0;
            return;
        }
        if (y->prow > 0)
            t += e->row_start; /* every later row: its descriptor, the barriers */
        if (row_active(e, y->prow, p)) {
            e->win0[win_at(e, y->prow, p)] = t;
            y->assigned += row_chunks(e, y->prow, p);
            y->plast = y->assigned - 1;
            y->pwait = 1;
            if (e->tandem)
                stream_buffer(e, p);
            if (y->owait)
                offer_next(e, p);
            return;
        }
        t += row_gap(e, y->prow, p);
        if (row_done(e, p, t)) {
            y->pwait = 0;
            return;
        }
        y->prow++;
    }
}

/* The program's issue of its row ends when the row's last chunk is in the queue, i.e. when the
 * chunk q places before it has left the queue: been accepted, or with tandem queues entered the
 * producer's own buffer (with no queue: the last chunk itself); then its work, then the next row
 * (or the barrier). Repeats while ends are known. */
static void settle(xs_engine *e, int p)
{
    producer *x = &e->pr[p];
    const int q = e->q, qr = e->qr;
    while (x->pwait && x->plast - q < (e->tandem ? x->known : x->accepted)) {
        const int64_t need = x->plast - q;
        double end = e->win0[win_at(e, x->prow, p)] + e->oh;
        double end_prev = end; /* the same with the row's last chunk left out */
        if (need >= 0 && x->acc[need % qr] > end)
            end = x->acc[need % qr];
        if (need >= 1 && x->acc[(need - 1) % qr] > end_prev)
            end_prev = x->acc[(need - 1) % qr];
        /* with a queue, a last chunk of s < c bytes enters it once s/c of the chunk q places
         * before it has left: that share of the step between the two (continuous in B; whole
         * chunks alone put a burst's stall on a grid of c bytes per producer) */
        const int64_t tail = row_bytes(e, x->prow, p) % e->chunk;
        if (q > 0 && tail > 0 && end > end_prev)
            end = end_prev + (end - end_prev) * (double)tail / (double)e->chunk;
        e->win1[win_at(e, x->prow, p)] = end;
        x->pwait = 0;
        const double t = end + row_gap(e, x->prow, p);
        if (row_done(e, p, t))
            return;
        x->prow++;
        program_start(e, p, t);
    }
}

/* Sync: every producer reached the barrier after barrier_row; release them together. 1 when
 * the simulation ends here. */
static int release_barrier(xs_engine *e)
{
    double t = -INFINITY;
    for (int p = 0; p < e->np; p++)
        if (e->arrive[p] > t)
            t = e->arrive[p];
    t += e->pf->barrier_ns;
    e->arrived = 0;
    e->barrier_row++;
    if (e->barrier_row >= e->s->nrows) {
        /* every window has closed. Chunks may still sit in queues or buffers: with tandem
         * buffers or a trace they are accepted to the end (the backlog record and the trace
         * then hold every byte); otherwise stop here, as the earlier model did (no window
         * changes either way) */
        return !e->tandem && !e->o->trace;
    }
    for (int p = 0; p < e->np; p++) {
        e->pr[p].prow = e->barrier_row;
        program_start(e, p, t);
    }
    /* a burst entirely within the queue ends at once */
    for (int p = 0; p < e->np; p++)
        settle(e, p);
    return 0;
}

/* Reserves whose holders' bytes have drained (to within f*Q) by t_now leave the stage. Entries
 * of producers that accepted a chunk since are stale and dropped. */
static void release_drained(xs_engine *e)
{
    while (e->track_drain && e->held.n && by_then(e->held.a[0].t, e->t_now)) {
        xs_ev d = xs_evheap_pop(&e->held);
        if (d.t == e->pr[d.p].d_own - e->hold_ns) {
            e->pr[d.p].outstanding = 0;
            e->n_out--;
        }
    }
}

/* When the stage has room for a chunk, no earlier than t_next (ns); records the first refusal
 * of an overflow (overflow loss: the stage holds Q (1 - loss) from its first refusal until it
 * next runs empty, and the earliest offer finds it empty again). */
static double stage_room(xs_engine *e, double t_next)
{
    const double R = e->R, Q = e->Q, c = (double)e->chunk;
    if (e->overflowed && by_then(e->d_last, t_next))
        e->overflowed = 0;
    /* Q shared, plus a reserve for each producer with stores in it (at least one: the producer
     * about to offer brings its own into an empty stage) */
    const double rsv = e->reserve * (double)(e->n_out > 0 ? e->n_out : 1);
    double t_space = e->overflowed
                         ? room_time(Q, e->loss, e->loss_ns, e->t_fill, rsv, c, R, e->d_last)
                         : e->d_last - (Q + rsv - c) / R;
    if (!by_then(t_space, t_next) && e->loss > 0 && !e->overflowed) {
        e->overflowed = 1; /* a ready chunk finds no room: the first refusal */
        e->t_fill = t_next;
        t_space = room_time(Q, e->loss, e->loss_ns, e->t_fill, rsv, c, R, e->d_last);
    }
    return t_space > t_next ? t_space : t_next;
}

/* Producer e.p's pending chunk enters the stage no earlier than t_next (ns): the stage's
 * backlog, the producer's reserve and cap ring, the trace and the backlog record follow; then
 * the producer's queue moves on. */
static void admit(xs_engine *e, xs_ev ev, double t_next)
{
    producer *z = &e->pr[ev.p];
    const double c = (double)z->pending, R = e->R;
    double t_acc = t_next > z->ready ? t_next : z->ready;
    if (t_acc < e->t_now)
        t_acc = e->t_now;
    e->t_now = t_acc;
    e->vtime = ev.t;
    z->ftag = ev.t + c / z->weight;
    const double t_arr = t_acc - c / e->r;
    e->d_last = (e->d_last > t_arr ? e->d_last : t_arr) + c / R;
    if (e->reserve > 0 && !z->outstanding) {
        z->outstanding = 1;
        e->n_out++;
    }
    if (e->track_drain) {
        /* this producer holds its reserve until its last accepted byte has drained (or is
         * within f*Q of the drain head) */
        z->d_own = e->d_last;
        if (e->held.n == e->held_cap) {
            /* stale entries only: compact by re-pushing the live ones */
            e->held.n = 0;
            for (int p = 0; p < e->np; p++)
                if (e->pr[p].outstanding)
                    xs_evheap_push(&e->held, (xs_ev){e->pr[p].d_own - e->hold_ns, 0, p});
        }
        xs_evheap_push(&e->held, (xs_ev){e->d_last - e->hold_ns, 0, ev.p});
    }
    if (e->o->trace) {
        xs_chunk_trace ct = {ev.p, z->orow, z->pending, z->in_t, z->ready, t_acc, e->d_last};
        e->o->trace(e->o->trace_ctx, &ct);
    }
    const double backlog = R * (e->d_last - t_acc);
    if (backlog > e->peak)
        e->peak = backlog;
    sample_add(&e->smp, t_acc, backlog);
    if (z->ring) {
        if (z->ring_n < e->ring_m) {
            z->ring[(z->ring_head + z->ring_n) % e->ring_m] = e->d_last;
            z->ring_n++;
        } else {
            z->ring[z->ring_head] = e->d_last;
            z->ring_head = (z->ring_head + 1) % e->ring_m;
        }
    }
    z->a_prev = t_acc;
    z->accepted = z->oidx + 1;
    if (e->tandem) {
        /* room in its buffer: stream on; the head of the buffer is offered next */
        z->qa[z->oidx % e->nbuf] = t_acc;
        z->owait = 1;
        stream_buffer(e, ev.p);
        settle(e, ev.p);
        if (z->owait)
            offer_next(e, ev.p);
    } else {
        z->acc[z->oidx % e->qr] = t_acc;
        settle(e, ev.p);
        offer_next(e, ev.p);
    }
    if (e->release_at_issue && z->outstanding && z->owait) {
        /* nothing left to offer: its reserve leaves now; its bytes stay in the backlog */
        z->outstanding = 0;
        e->n_out--;
    }
}

/* The next acceptance: when the stage has room for a chunk, or the earliest chunk is ready,
 * whichever is later. Every chunk ready by then contends; the stage serves them in start-tag
 * order (start-time fair queueing, weighted by each producer's share), so with equal shares
 * contending producers take turns, and with skewed shares some are starved: the unfairness
 * measured on the H200. A chunk whose producer is at its own cap goes back to wait for its
 * oldest outstanding chunk to drain. Needs a chunk in future or eligible. */
static void accept_next(xs_engine *e)
{
    release_drained(e);
    const double t_next = stage_room(e, e->eligible.n ? e->t_now : e->future.a[0].t);
    while (e->future.n && by_then(e->future.a[0].t, t_next)) {
        xs_ev f = xs_evheap_pop(&e->future);
        const producer *y = &e->pr[f.p];
        double tag = y->ftag > e->vtime ? y->ftag : e->vtime;
        xs_evheap_push(&e->eligible, (xs_ev){tag, f.t, f.p});
    }
    xs_ev ev = xs_evheap_pop(&e->eligible);
    const producer *z = &e->pr[ev.p];
    /* the producer's own cap: its m-th most recent chunk must have drained */
    if (z->ring && z->ring_n == e->ring_m) {
        double tc = z->ring[z->ring_head];
        if (!by_then(tc, t_next)) {
            xs_evheap_push(&e->future, (xs_ev){tc, 0, ev.p});
            return;
        }
    }
    admit(e, ev, t_next);
}

/* Run the programs to the end: every producer's program begins start_ns after the schedule's
 * start instant; chunks are accepted until none is left (or, with sync, the last barrier). */
static void engine_run(xs_engine *e)
{
    for (int p = 0; p < e->np; p++) {
        program_start(e, p, e->pf->start_ns);
        settle(e, p);
    }
    for (;;) {
        if (e->o->sync && e->arrived == e->np) {
            if (release_barrier(e))
                break;
            continue;
        }
        if (e->future.n == 0 && e->eligible.n == 0)
            break;
        accept_next(e);
    }
}

/* Move the results into *out (which engine_init allocated) and release the engine. Fails, with
 * *out released, when a window stayed open: a defect of the engine. */
static xs_status engine_finish(xs_engine *e, xs_result *out)
{
    /* every active window must have closed */
    for (int row = 0; row < e->s->nrows; row++)
        for (int p = 0; p < e->s->rows[row].producers; p++)
            if (row_active(e, row, p) && isnan(e->win1[win_at(e, row, p)])) {
                engine_free(e);
                xs_result_free(out);
                return xs_seterr(XS_ERANGE, "simulation did not complete (row %d, producer %d)",
                                 row, p);
            }
    /* rows where a producer was inactive keep NaN windows */
    xs_result_rows_from_windows(out, e->s);
    out->peak_backlog_bytes = e->peak;
    out->makespan_ns = e->makespan;
    if (e->o->record_backlog) {
        out->backlog = e->smp.a;
        out->nbacklog = e->smp.n;
        e->smp.a = NULL;
    }
    if (!e->o->record_windows) {
        free(out->win_start);
        free(out->win_end);
        out->win_start = out->win_end = NULL;
    }
    engine_free(e);
    return XS_OK;
}

xs_status xs_simulate(const xs_profile *pf, const xs_schedule *s, const xs_sim_opts *opts,
                      xs_result *out)
{
    return xs_simulate_programs(pf, s, NULL, opts, out);
}

xs_status xs_simulate_programs(const xs_profile *pf, const xs_schedule *s, const xs_programs *pg,
                               const xs_sim_opts *opts, xs_result *out)
{
    static const xs_sim_opts defaults = {0};
    memset(out, 0, sizeof *out);
    XS_TRY(xs_profile_check(pf, "profile"));
    if (!s || s->nrows < 1)
        return xs_seterr(XS_EINVAL, "schedule has no rows");
    if (pg)
        XS_TRY(check_programs(s, pg));
    xs_engine e = {.pf = pf, .s = s, .pg = pg, .o = opts ? opts : &defaults};
    XS_TRY(engine_size(&e));
    XS_TRY(engine_init(&e, out));
    engine_run(&e);
    return engine_finish(&e, out);
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
