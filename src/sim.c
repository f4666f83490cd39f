// SPDX-License-Identifier: Apache-2.0
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
 *
 * The engine is incremental (src/engine.h): programs hand it bursts through a take callback, and
 * a driver steps it. xs_simulate_programs is one driver (its program walks the schedule's rows,
 * with sync barriers); the EP model (src/ep_sim.c) is the other.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "evheap.h"
#include "xstage.h"

/* Whether time t has come by time now. Times within a relative 1e-12 of each other are one
 * instant: the answer must not depend on how the two were rounded (shifting every time by
 * start_ns would otherwise let a producer's cap release a chunk at one shift and hold it at
 * another, and a producer's window, which reads its last two chunks' times, would move). */
static inline int by_then(double t, double now)
{
    /* the larger magnitude without a libm call (fmax is one without -ffast-math); a NaN gives
     * 0 either way */
    const double at = fabs(t), an = fabs(now);
    return t <= now || fabs(t - now) <= 1e-12 * (at > an ? at : an);
}


/* A burst a producer's program started, queued until its window has closed and its chunks have
 * been offered. */
typedef struct {
    double t0;          /* start, before the issue overhead (ns) */
    double tot;         /* bytes of its stream */
    double stage;       /* of them through the stage (< 0: all) */
    double npb;         /* issue ns per byte of the stream (< 0: 1 / r) */
    double gap;         /* the program's work after its issue ends (ns) */
    int64_t last;       /* index of its last chunk */
    int task;           /* the program's index */
} qburst;

typedef struct {
    /* started bursts by sequence number: bq[seq & (bcap - 1)] for the live ones */
    qburst *bq;
    int64_t bcap;       /* a power of two */
    int bq_own;         /* 1 once bq is its own allocation (else in the engine's qblock) */
    int64_t nstart;     /* bursts started */
    int64_t bst;        /* the oldest whose window is open (nstart: none) */
    int64_t assigned;   /* chunks handed to the queue so far (indices 0..assigned-1) */
    /* offer side: the chunk at the head of the queue */
    int64_t ob;         /* burst of the chunk being offered (-1 before the first) */
    double orem;        /* stream bytes of ob not yet offered */
    int64_t oidx;       /* index of the chunk being offered */
    double pending;     /* its stream bytes */
    double pstage;      /* of them through the stage */
    int owait;          /* 1 when no chunk is offered (none started, or tandem: none buffered) */
    int64_t accepted;   /* chunks accepted so far */
    double in_t;        /* when the pending chunk entered the store queue (traces) */
    /* tandem queues only: the stream into the producer's own buffer, ahead of the offer side */
    int64_t sb;         /* burst of the last chunk streamed into the buffer (-1 before) */
    double srem;        /* bytes of sb not yet streamed */
    int64_t known;      /* chunks entirely in the buffer (or beyond) so far */
    double s_prev;      /* when the last of them was entirely in the buffer */
    double *qa;         /* stage acceptance times of its last nbuf chunks: qa[idx % nbuf] */
    double *rdy;        /* buffer entry times of chunks accepted..known-1: rdy[idx % nbuf] */
    double *inq;        /* their store-queue entry times (traces) */
    double a_prev;      /* acceptance time of the previous chunk */
    double ready;       /* when the pending chunk is ready */
    double ftag;        /* finish tag of its last accepted chunk (fair queueing) */
    double weight;      /* its share of the stage when producers contend */
    double fq_c, fq;    /* the last chunk's bytes and bytes / weight (kept: a division) */
    double d_own;       /* when its last accepted byte will have drained */
    int outstanding;    /* 1 while it has bytes in the stage (holds its reserve) */
    int held_gen;       /* the engine's held_gen once its newest release is kept in a compaction */
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
        if (cells > (double)XS_MAX_SIM_CELLS) {
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
 * One simulation is an xs_engine: the profile's numbers in the units the engine uses, the
 * producers and the stage. Its steps are plain functions of it:
 *   xs_engine_open   size and allocate
 *   program_start    a producer's program hands over its next burst (take), or waits
 *   stream_buffer    tandem queues: chunks stream from the store queue into the producer's buffer
 *   offer_next       the producer offers the head of its queue (or buffer) to the stage
 *   settle           a burst's issue ends once its last chunk is in the queue; the program goes on
 *   xs_engine_next_ns / xs_engine_step   the stage accepts the next chunk (or holds it at the
 *                    producer's cap)
 * The stage side (accept, admit) sees producers and chunks; programs are seen only through
 * take and closed. */

enum { QB_FIRST = 4 }; /* bursts a producer's queue holds before it grows (a power of two) */

/* An accepted chunk of the unlimited stage's run: its acceptance time and stage bytes. */
typedef struct {
    double t, c;
    int p, n;              /* its producer, and how many alike producers accepted the same */
} fchunk;

/* x / d for the last x asked for (d fixed per engine). */
typedef struct {
    double x, q;
} quot;

static inline double quot_of(quot *m, double x, double d)
{
    if (x != m->x || x == 0) { /* 0: the cache starts empty (and -0.0 == 0.0) */
        m->x = x;
        m->q = x / d;
    }
    return m->q;
}

struct xs_engine {
    const xs_profile *pf;
    xs_engine_program prog;
    const xs_sim_opts *so; /* trace and backlog record (never NULL) */
    int ep;                /* the EP kernel's stage rules (xs_engine_opts.ep_stage) */
    /* the profile, in the engine's terms */
    double r, R;           /* issue rate of one producer, drain rate of the stage (bytes/ns) */
    double oh;             /* issue overhead of one burst (ns) */
    double Q;              /* shared capacity (bytes) */
    double reserve;        /* capacity each producer with bytes in the stage adds (bytes) */
    int release_at_issue;  /* the reserve leaves when the producer has nothing left to offer */
    int track_drain;       /* the reserve leaves when its bytes are within hold_ns of drained */
    double hold_ns;        /* f*Q/R: how long before its last byte drains the reserve leaves */
    double loss, loss_ns;  /* overflow loss: share of Q lost and over how long (ns) */
    double c;              /* acceptance granularity (bytes, a whole number >= 1) */
    int tail_share;        /* a short last chunk ends its window at its share of the step */
    int np;                /* producers */
    int ring_m, nring;     /* per-producer cap: chunks outstanding, producers that have a ring */
    int q, qr;             /* store queue (chunks); size of each producer's acc ring: q + 2
                            * rounded up to a power of two (indexed by a mask, no division) */
    int nbuf, tandem;      /* tandem queues: each producer's own buffer (chunks); nbuf > 0 */
    int held_cap;          /* capacity of held, stale entries included */
    int held_gen;          /* compactions of held so far (producer.held_gen) */
    /* producers and their storage */
    producer *pr;          /* [np] */
    double *rings, *accs, *bufs; /* backing arrays of pr[].ring, .acc, .qa/.rdy/.inq */
    qburst *qblock;        /* [np * QB_FIRST] each producer's first burst queue */
    /* the stage */
    xs_tqueue future;      /* chunks not yet ready, by ready time (t) */
    xs_evheap eligible;    /* ready chunks contending, by start tag (t) then ready time (t2) */
    /* reserve releases: when each holder's reserve leaves (t), a ring in the order of the
     * acceptances that set them; d_last never moves back, so that order is time order and the
     * ring's head is the earliest (a heap would pop equal times in another order, which no
     * release depends on) */
    xs_tev *held;          /* [held_cap] */
    int held_head, held_n; /* the earliest entry, and entries held */
    int n_out;             /* producers holding a reserve */
    double d_last;         /* departure time of the last accepted byte (ns) */
    double t_now;          /* the last acceptance, or with ep the driver's clock (ns) */
    double t_next;         /* the acceptance xs_engine_next_ns found (ns) */
    /* ep: xs_engine_next_ns's answer, kept while no wake or step has happened: the drivers ask
     * again after every event of their own, and the answer then moves only with the clock */
    int nx_ok;             /* 1 while nx_t0 and nx_space hold */
    double nx_t0;          /* the first offer's time before the clock (INFINITY: none offered;
                            * -INFINITY: a chunk waits, so the clock decides) */
    double nx_space;       /* when the stage has room (ns) */
    double vtime;          /* fair queueing: the start tag of the last accepted chunk */
    int overflowed;        /* the stage has refused a ready chunk and not yet run empty */
    double t_fill;         /* the first refusal of the current overflow (ns) */
    double peak;           /* largest backlog (bytes) */
    sampler smp;           /* backlog record */
    int oom;               /* a burst queue could not grow */
    /* quotients on the per-chunk path, kept for the last numerator (chunks are mostly equal, and
     * a division is slow): the same bits as dividing again */
    quot q_r, q_R, q_room; /* bytes / r, bytes / R, room bytes / R */
    /* the unlimited stage (xs_simulate_free): chunks are accepted at their ready times,
     * producer by producer, with no heap; the last departure is found from the late chunks */
    int free_run;
    int copies;            /* producer 0 stands for this many alike producers (0, 1: itself) */
    double horizon_ns;     /* stage bytes of the whole run / R: how far back a chunk can still
                            * set the last departure (ns) */
    double arr_max;        /* latest arrival at the stage so far (ns) */
    fchunk *late;          /* chunks accepted no earlier than arr_max - horizon_ns, when taken */
    size_t nlate, late_cap;
};

/* Whether time t has come by time now: exactly, or within one instant (by_then). */
static int reached(const xs_engine *e, double t, double now)
{
    return e->ep ? t <= now : by_then(t, now);
}

static qburst *qb(const producer *y, int64_t seq)
{
    return &y->bq[seq & (y->bcap - 1)];
}

/* The issue time of `bytes` of burst u's stream (ns). */
static double issue_ns(xs_engine *e, const qburst *u, double bytes)
{
    return u->npb < 0 ? quot_of(&e->q_r, bytes, e->r) : bytes * u->npb;
}

/* Append a started burst to producer p's queue; 0, or -1 when out of memory. Bursts before the
 * oldest one still offered, streamed or open are dropped. */
static int burst_push(xs_engine *e, int p, const xs_engine_burst *b)
{
    producer *y = &e->pr[p];
    int64_t lo = y->bst;
    if (y->ob < lo)
        lo = y->ob < 0 ? 0 : y->ob;
    if (e->tandem && y->sb < lo)
        lo = y->sb < 0 ? 0 : y->sb;
    if (y->nstart - lo >= y->bcap) {
        const int64_t nc = 2 * y->bcap;
        qburst *nq = malloc((size_t)nc * sizeof *nq);
        if (!nq) {
            e->oom = 1;
            return -1;
        }
        for (int64_t s = lo; s < y->nstart; s++)
            nq[s & (nc - 1)] = *qb(y, s);
        if (y->bq_own)
            free(y->bq);
        y->bq = nq;
        y->bq_own = 1;
        y->bcap = nc;
    }
    const int64_t nch = (int64_t)ceil(b->bytes / e->c);
    qburst *u = qb(y, y->nstart);
    *u = (qburst){b->start_ns, b->bytes, b->stage_bytes, b->ns_per_byte, b->gap_ns,
                  y->assigned + nch - 1, b->task};
    y->assigned += nch;
    y->nstart++;
    return 0;
}

void xs_engine_close(xs_engine *e, xs_result *out)
{
    if (!e)
        return;
    if (out) {
        out->peak_backlog_bytes = e->peak;
        if (e->so->record_backlog) {
            out->backlog = e->smp.a;
            out->nbacklog = e->smp.n;
            e->smp.a = NULL;
        }
    }
    for (int p = 0; e->pr && p < e->np; p++)
        if (e->pr[p].bq_own)
            free(e->pr[p].bq);
    free(e->pr);
    free(e->qblock);
    xs_tqueue_free(&e->future);
    xs_evheap_free(&e->eligible);
    free(e->held);
    free(e->rings);
    free(e->accs);
    free(e->bufs);
    free(e->smp.a);
    free(e->late);
    free(e);
}

/* The engine's numbers from the profile (see xs_engine_opts for the EP kernel's rules). Fails
 * with XS_ERANGE when the state would be too large. */
static xs_status engine_size(xs_engine *e, const xs_engine_opts *o)
{
    const xs_profile *pf = e->pf;
    e->r = pf->issue_bytes_per_ns;
    e->R = pf->drain_bytes_per_ns;
    e->oh = pf->issue_overhead_ns;
    e->Q = pf->capacity_bytes;
    e->c = pf->chunk_bytes >= 1 ? floor(pf->chunk_bytes) : 1;
    e->q = (int)floor((pf->queue_bytes_per_producer > 0 ? pf->queue_bytes_per_producer : 0) /
                      e->c);
    e->qr = e->q + 2; /* acc ring: the last q+1 chunks and the one before them (settle) */
    if ((double)e->np * e->qr > (double)(1 << 28))
        return xs_seterr(XS_ERANGE, "%d producers x a queue of %d chunks: too much state (raise "
                         "chunk_bytes with --set)", e->np, e->q);
    int pow2 = 2;
    while (pow2 < e->qr)
        pow2 *= 2;
    e->qr = pow2;
    if (e->ep) {
        /* the tandem buffer counts as reserve: it keeps the capacity a producer's bursts see
         * (Q plus its own bytes) where the fit put it */
        e->reserve = (pf->reserve_bytes_per_producer > 0 ? pf->reserve_bytes_per_producer : 0) +
                     (pf->buffer_bytes_per_producer > 0 ? pf->buffer_bytes_per_producer : 0);
        e->track_drain = e->reserve > 0;
        e->t_now = 0;
    } else {
        e->reserve = pf->reserve_bytes_per_producer;
        /* When a producer's reserve leaves the stage (docs/MODEL.md, event model step 4):
         * reserve_release = 1: when it has nothing left to offer (its bytes stay in the
         * backlog); otherwise when its last accepted byte is within f*Q of the drain head, f =
         * reserve_shared_fraction (0: when drained; 1: when its bytes have left a buffer of its
         * own for a shared one of size Q) */
        e->release_at_issue = pf->reserve_release == 1;
        e->hold_ns = pf->reserve_shared_fraction * e->Q / e->R;
        e->loss = pf->overflow_capacity_loss;
        e->loss_ns = pf->overflow_loss_ns;
        e->tail_share = 1;
        /* tandem queues: the producer's own buffer, in whole chunks (0: none) */
        e->nbuf = (int)fmin(floor(pf->buffer_bytes_per_producer / e->c), 1 << 28);
        e->tandem = e->nbuf > 0;
        if (e->tandem && (double)e->np * 3 * e->nbuf > (double)(1 << 28))
            return xs_seterr(XS_ERANGE, "%d producers x a buffer of %d chunks: too much state "
                             "(raise chunk_bytes with --set)", e->np, e->nbuf);
        e->track_drain = e->reserve > 0 && !e->release_at_issue;
        e->t_now = -INFINITY;
    }
    e->nring = o->nring < 0 ? e->np : o->nring;
    if (pf->capacity_bytes_per_producer > 0 && e->nring > 0) {
        /* the cap limits a producer's share of Q; its reserve comes on top of it */
        double m = floor((pf->capacity_bytes_per_producer + e->reserve) / e->c);
        m = m < 1 ? 1 : e->ep && m > 1e6 ? 1e6 : m;
        e->ring_m = (int)m;
    } else {
        e->nring = 0;
    }
    e->held_cap = 4 * e->np + 16; /* producers' drain times (reserve), with stale entries */
    return XS_OK;
}

xs_status xs_engine_open(const xs_profile *pf, int np, const xs_engine_program *prog,
                         const xs_engine_opts *opts, xs_engine **out)
{
    static const xs_sim_opts no_sim = {0};
    *out = NULL;
    XS_TRY(xs_profile_check(pf, "profile"));
    xs_engine *e = calloc(1, sizeof *e);
    if (!e)
        return xs_seterr(XS_ENOMEM, "out of memory simulating %d producers", np);
    e->pf = pf;
    e->prog = *prog;
    e->so = opts->sim ? opts->sim : &no_sim;
    e->ep = opts->ep_stage;
    e->np = np;
    xs_status st = engine_size(e, opts);
    if (st != XS_OK) {
        free(e);
        return st;
    }
    e->pr = calloc((size_t)np, sizeof *e->pr);
    /* each producer has at most one chunk in future or eligible, and held is compacted when it
     * fills: the heaps never grow, so their pushes cannot fail */
    int heaps_ok = xs_tqueue_init(&e->future, np) == 0 && xs_evheap_init(&e->eligible, np) == 0;
    if (e->track_drain)
        heaps_ok = heaps_ok && (e->held = malloc((size_t)e->held_cap * sizeof *e->held));
    if (e->nring)
        e->rings = malloc((size_t)e->nring * (size_t)e->ring_m * sizeof(double));
    e->accs = malloc((size_t)np * (size_t)e->qr * sizeof(double));
    e->qblock = malloc((size_t)np * QB_FIRST * sizeof *e->qblock);
    if (e->tandem)
        e->bufs = malloc((size_t)np * 3 * (size_t)e->nbuf * sizeof(double));
    if (e->so->record_backlog) {
        e->smp.cap = e->so->max_samples ? e->so->max_samples : 100000;
        if (e->smp.cap < 2)
            e->smp.cap = 2;
        e->smp.a = malloc(e->smp.cap * sizeof *e->smp.a);
        e->smp.stride = 1;
    }
    if (!e->pr || !heaps_ok || (e->nring && !e->rings) || !e->accs || !e->qblock ||
        (e->tandem && !e->bufs) ||
        (e->so->record_backlog && !e->smp.a)) {
        xs_engine_close(e, NULL);
        return xs_seterr(XS_ENOMEM, "out of memory simulating %d producers", np);
    }
    for (int p = 0; p < np; p++) {
        producer *z = &e->pr[p];
        z->ring = p < e->nring ? e->rings + (size_t)p * e->ring_m : NULL;
        z->acc = e->accs + (size_t)p * e->qr;
        z->bq = e->qblock + (size_t)p * QB_FIRST;
        z->bcap = QB_FIRST;
        z->ob = z->sb = -1;
        z->owait = 1;
        z->a_prev = -INFINITY;
        z->weight = xs_arbitration_weight(pf, p);
        z->s_prev = -INFINITY;
        if (e->tandem) {
            z->qa = e->bufs + (size_t)p * 3 * e->nbuf;
            z->rdy = z->qa + e->nbuf;
            z->inq = z->rdy + e->nbuf;
        }
    }
    *out = e;
    return XS_OK;
}

/* Offer the next chunk of producer p (the head of its queue) to the stage, if its burst has
 * started: it joins the future heap at its ready time. Sets owait when there is none. */
static void offer_next(xs_engine *e, int p)
{
    producer *z = &e->pr[p];
    if (e->tandem && z->accepted >= z->known) {
        z->owait = 1; /* tandem: the next chunk is not in the buffer yet */
        return;
    }
    if (!(z->orem > 0)) {
        if (z->ob + 1 >= z->nstart) {
            z->owait = 1; /* no more chunks, or the program has not started that burst */
            return;
        }
        z->ob++;
        z->orem = qb(z, z->ob)->tot;
    }
    const qburst *u = qb(z, z->ob);
    z->owait = 0;
    z->pending = z->orem < e->c ? z->orem : e->c;
    /* a stream that carries local bytes too brings its share of each chunk into the stage */
    z->pstage = u->stage < 0 ? z->pending : u->tot > 0 ? z->pending * u->stage / u->tot : 0;
    z->orem -= z->pending;
    if (z->orem < 0.5)
        z->orem = 0;
    z->oidx = z->accepted;
    double ready;
    if (e->tandem) {
        /* the head of its own buffer: there since the stream put it there */
        z->in_t = z->inq[z->oidx % e->nbuf];
        ready = z->rdy[z->oidx % e->nbuf];
    } else {
        /* in the queue once the program has started and there is room; streamed at r after
         * the previous chunk left */
        double in = u->t0 + e->oh;
        if (e->q > 0 && z->oidx - e->q >= 0 && z->acc[(z->oidx - e->q) & (e->qr - 1)] > in)
            in = z->acc[(z->oidx - e->q) & (e->qr - 1)];
        z->in_t = in;
        ready = (in > z->a_prev ? in : z->a_prev) + issue_ns(e, u, z->pending);
    }
    z->ready = ready;
    if (!e->free_run) /* the unlimited stage takes each producer's chunks in turn (free_accept) */
        xs_tqueue_put(&e->future, ready, p);
}

/* Tandem queues: stream producer p's next chunks at r into its own buffer while the buffer has
 * room (the chunk nbuf places earlier has entered the stage), their burst has started and they
 * are in the store queue (the chunk q places earlier has left it for the buffer). */
static void stream_buffer(xs_engine *e, int p)
{
    producer *w = &e->pr[p];
    const int q = e->q, qr = e->qr, nbuf = e->nbuf;
    for (;;) {
        const int64_t n = w->known;
        if (n - nbuf >= w->accepted)
            return; /* buffer full */
        if (!(w->srem > 0)) {
            if (w->sb + 1 >= w->nstart)
                return;
            w->sb++;
            w->srem = qb(w, w->sb)->tot;
        }
        const qburst *u = qb(w, w->sb);
        const double size = w->srem < e->c ? w->srem : e->c;
        w->srem -= size;
        double in = u->t0 + e->oh;
        if (q > 0 && n - q >= 0 && w->acc[(n - q) & (qr - 1)] > in)
            in = w->acc[(n - q) & (qr - 1)];
        double ready = (in > w->s_prev ? in : w->s_prev) + issue_ns(e, u, size);
        /* its bytes stream in while the buffer's oldest chunk waits; it is complete once that
         * one has gone on into the stage (the producer holds q + nbuf chunks then) */
        if (n - nbuf >= 0 && w->qa[(n - nbuf) % nbuf] > ready)
            ready = w->qa[(n - nbuf) % nbuf];
        w->acc[n & (qr - 1)] = ready; /* it has left the store queue */
        w->rdy[n % nbuf] = ready;
        w->inq[n % nbuf] = in;
        w->s_prev = ready;
        w->known = n + 1;
    }
}

/* Producer p's program at time t (ns): it hands over its next burst, whose chunks go to the
 * queue, or waits. */
static void program_start(xs_engine *e, int p, double t)
{
    producer *y = &e->pr[p];
    xs_engine_burst b = {.start_ns = t, .stage_bytes = -1, .ns_per_byte = -1};
    if (e->prog.take(e->prog.ctx, p, t, &b) <= 0 || burst_push(e, p, &b))
        return;
    if (e->tandem)
        stream_buffer(e, p);
    if (y->owait)
        offer_next(e, p);
}

/* A burst's issue ends when its last chunk is in the queue, i.e. when the chunk q places before
 * it has left the queue: been accepted, or with tandem queues entered the producer's own buffer
 * (with no queue: the last chunk itself). Its window closes; after the newest burst's window its
 * gap, then the program goes on. Repeats while ends are known. */
static void settle(xs_engine *e, int p)
{
    producer *x = &e->pr[p];
    const int q = e->q, qr = e->qr;
    while (x->bst < x->nstart) {
        const qburst *u = qb(x, x->bst);
        const int64_t need = u->last - q;
        if (!(need < (e->tandem ? x->known : x->accepted)))
            return;
        double end = u->t0 + e->oh;
        double end_prev = end; /* the same with the burst's last chunk left out */
        if (need >= 0 && x->acc[need & (qr - 1)] > end)
            end = x->acc[need & (qr - 1)];
        if (e->tail_share) {
            if (need >= 1 && x->acc[(need - 1) & (qr - 1)] > end_prev)
                end_prev = x->acc[(need - 1) & (qr - 1)];
            /* with a queue, a last chunk of s < c bytes enters it once s/c of the chunk q places
             * before it has left: that share of the step between the two (continuous in B;
             * whole chunks alone put a burst's stall on a grid of c bytes per producer) */
            const double tail = fmod(u->tot, e->c);
            if (q > 0 && tail > 0 && end > end_prev)
                end = end_prev + (end - end_prev) * tail / e->c;
        }
        const double t0 = u->t0, t = end + u->gap;
        const int task = u->task;
        x->bst++;
        if (e->prog.closed)
            e->prog.closed(e->prog.ctx, p, task, t0, end);
        if (x->bst == x->nstart)
            program_start(e, p, t);
    }
}

void xs_engine_wake(xs_engine *e, int p, double t_ns)
{
    e->nx_ok = 0;
    program_start(e, p, t_ns);
    settle(e, p);
}

void xs_engine_advance(xs_engine *e, double t_ns)
{
    if (t_ns > e->t_now)
        e->t_now = t_ns;
}

double xs_engine_d_last(const xs_engine *e) { return e->d_last; }

int xs_engine_oom(const xs_engine *e) { return e->oom; }

/* Reserves whose holders' bytes have drained (to within f*Q) by t_now leave the stage. Entries
 * of producers that accepted a chunk since are stale and dropped. */
static void release_drained(xs_engine *e)
{
    while (e->track_drain && e->held_n && reached(e, e->held[e->held_head].t, e->t_now)) {
        const xs_tev d = e->held[e->held_head];
        e->held_head = e->held_head + 1 == e->held_cap ? 0 : e->held_head + 1;
        e->held_n--;
        /* the schedule's stage releases on every entry that matches its holder's drain time
         * (a second acceptance with the same drain time releases twice); EP's once */
        if (d.t == e->pr[d.p].d_own - e->hold_ns && (e->pr[d.p].outstanding || !e->ep)) {
            e->pr[d.p].outstanding = 0;
            e->n_out--;
        }
    }
}

/* When the stage has room for a chunk, with no overflow loss (ns). */
static inline double room_free(xs_engine *e)
{
    /* Q shared, plus a reserve for each producer with stores in it (at least one: the producer
     * about to offer brings its own into an empty stage) */
    const double rsv = e->reserve * (double)(e->n_out > 0 ? e->n_out : 1);
    return e->d_last - quot_of(&e->q_room, e->Q + rsv - e->c, e->R);
}

/* When the stage has room for a chunk, no earlier than t_next (ns); records the first refusal
 * of an overflow (overflow loss: the stage holds Q (1 - loss) from its first refusal until it
 * next runs empty, and the earliest offer finds it empty again). */
static double stage_room(xs_engine *e, double t_next)
{
    const double R = e->R, Q = e->Q, c = e->c;
    if (e->overflowed && by_then(e->d_last, t_next))
        e->overflowed = 0;
    const double rsv = e->reserve * (double)(e->n_out > 0 ? e->n_out : 1);
    double t_space = e->overflowed
                         ? room_time(Q, e->loss, e->loss_ns, e->t_fill, rsv, c, R, e->d_last)
                         : room_free(e);
    if (!by_then(t_space, t_next) && e->loss > 0 && !e->overflowed) {
        e->overflowed = 1; /* a ready chunk finds no room: the first refusal */
        e->t_fill = t_next;
        t_space = room_time(Q, e->loss, e->loss_ns, e->t_fill, rsv, c, R, e->d_last);
    }
    return t_space > t_next ? t_space : t_next;
}

/* The release ring is full of stale entries (a producer's older ones, superseded by its newest):
 * keep the newest entry of each producer that holds its reserve, in their order, and for the
 * producer p being admitted (its d_own already the new one) its new drain time, which the push
 * that follows repeats (the schedule's stage then releases it twice, as it always has). */
static void held_compact(xs_engine *e, int p)
{
    const int cap = e->held_cap, gen = ++e->held_gen;
    for (int i = e->held_n - 1; i >= 0; i--) { /* newest first: mark the rest dropped */
        xs_tev *d = &e->held[(e->held_head + i) % cap];
        producer *z = &e->pr[d->p];
        if (z->outstanding && z->held_gen != gen && d->p != p)
            z->held_gen = gen;
        else
            d->p = -1;
    }
    int n = 0; /* the kept ones move up, in order (slot n is at or before slot i) */
    for (int i = 0; i < e->held_n; i++) {
        const xs_tev d = e->held[(e->held_head + i) % cap];
        if (d.p >= 0)
            e->held[(e->held_head + n++) % cap] = d;
    }
    if (e->pr[p].outstanding)
        e->held[(e->held_head + n++) % cap] = (xs_tev){e->pr[p].d_own - e->hold_ns, p};
    e->held_n = n;
}

/* Producer ev.p's pending chunk enters the stage no earlier than t_next (ns): the stage's
 * backlog, the producer's reserve and cap ring, the trace and the backlog record follow; then
 * the producer's queue moves on. Returns the acceptance time. */
static double admit(xs_engine *e, xs_ev ev, double t_next)
{
    producer *z = &e->pr[ev.p];
    const double c = z->pstage, R = e->R;
    double t_acc = t_next > z->ready ? t_next : z->ready;
    if (t_acc < e->t_now)
        t_acc = e->t_now;
    if (!e->ep)
        e->t_now = t_acc; /* with ep the driver moves the clock */
    e->vtime = ev.t;
    if (c != z->fq_c || c == 0) { /* 0: not yet computed (and -0.0 == 0.0) */
        z->fq_c = c;
        z->fq = c / z->weight;
    }
    z->ftag = ev.t + z->fq;
    const double t_arr = t_acc - quot_of(&e->q_r, c, e->r);
    e->d_last = (e->d_last > t_arr ? e->d_last : t_arr) + quot_of(&e->q_R, c, R);
    if (e->reserve > 0 && !z->outstanding) {
        z->outstanding = 1;
        e->n_out++;
    }
    if (e->track_drain) {
        /* this producer holds its reserve until its last accepted byte has drained (or is
         * within f*Q of the drain head) */
        z->d_own = e->d_last;
        if (e->held_n == e->held_cap)
            held_compact(e, ev.p);
        int at = e->held_head + e->held_n++;
        if (at >= e->held_cap)
            at -= e->held_cap;
        e->held[at] = (xs_tev){e->d_last - e->hold_ns, ev.p};
    }
    if (e->so->trace) {
        xs_chunk_trace ct = {ev.p, qb(z, z->ob)->task, (int64_t)z->pending, z->in_t, z->ready,
                             t_acc, e->d_last};
        e->so->trace(e->so->trace_ctx, &ct);
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
        z->acc[z->oidx & (e->qr - 1)] = t_acc;
        settle(e, ev.p);
        offer_next(e, ev.p);
    }
    if (e->release_at_issue && z->outstanding && z->owait) {
        /* nothing left to offer: its reserve leaves now; its bytes stay in the backlog */
        z->outstanding = 0;
        e->n_out--;
    }
    return t_acc;
}

/* The next acceptance found again (and, ep, kept). */
static inline double next_found(xs_engine *e)
{
    if (!e->eligible.n && !xs_tqueue_size(&e->future)) {
        e->nx_ok = 1;
        e->nx_t0 = INFINITY;
        return INFINITY;
    }
    release_drained(e);
    double t = e->eligible.n ? e->t_now : xs_tqueue_peek(&e->future).t;
    if (!e->ep)
        return e->t_next = stage_room(e, t);
    e->nx_ok = 1;
    e->nx_t0 = e->eligible.n ? -INFINITY : t;
    /* ep's stage has no overflow loss (stage_room's other rules): its room follows d_last and
     * the reserves alone */
    if (t < e->t_now)
        t = e->t_now;
    e->nx_space = room_free(e);
    e->t_next = e->nx_space > t ? e->nx_space : t;
    return e->t_next;
}

/* next_found out of line for ep's drivers: the kept answer's path then saves no registers. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static double next_found_ep(xs_engine *e)
{
    return next_found(e);
}

/* The next acceptance: when the stage has room for a chunk, or the earliest chunk is ready,
 * whichever is later (with ep, no earlier than the driver's clock). */
double xs_engine_next_ns(xs_engine *e)
{
    if (!e->ep) /* its driver (rows_run_all) asks once per step: nothing to keep */
        return next_found(e);
    /* nothing moved since the last answer but the clock: the same answer, taken against the
     * clock again, unless a reserve leaves by it (which moves the stage's room) */
    if (!e->nx_ok || (e->track_drain && e->held_n && e->held[e->held_head].t <= e->t_now))
        return next_found_ep(e);
    if (e->nx_t0 == INFINITY)
        return INFINITY;
    const double t = e->nx_t0 < e->t_now ? e->t_now : e->nx_t0;
    e->t_next = e->nx_space > t ? e->nx_space : t;
    return e->t_next;
}

/* Every chunk ready by the acceptance contends; the stage serves them in start-tag order
 * (start-time fair queueing, weighted by each producer's share), so with equal shares contending
 * producers take turns, and with skewed shares some are starved: the unfairness measured on the
 * H200. A chunk whose producer is at its own cap goes back to wait for its oldest outstanding
 * chunk to drain. */
double xs_engine_step(xs_engine *e)
{
    const double t_next = e->t_next;
    e->nx_ok = 0;
    /* a take leaves a hole that the admitted producer's next chunk fills (offer_next): one
     * heap move per chunk where a producer's chunks follow each other */
    xs_ev ev;
    int sole = 0;
    while (xs_tqueue_size(&e->future) && reached(e, xs_tqueue_peek(&e->future).t, t_next)) {
        xs_tev f = xs_tqueue_take(&e->future);
        const producer *y = &e->pr[f.p];
        double tag = y->ftag > e->vtime ? y->ftag : e->vtime;
        ev = (xs_ev){tag, f.t, f.p};
        /* the only contender (none waiting, no other ready): it is the one served */
        if (!e->eligible.n &&
            !(xs_tqueue_size(&e->future) && reached(e, xs_tqueue_peek(&e->future).t, t_next))) {
            sole = 1;
            break;
        }
        xs_evheap_put(&e->eligible, ev.t, ev.t2, ev.p);
    }
    if (!sole) {
        if (!e->eligible.n)
            return NAN;
        ev = xs_evheap_pop(&e->eligible);
    }
    const producer *z = &e->pr[ev.p];
    /* the producer's own cap: its m-th most recent chunk must have drained */
    if (z->ring && z->ring_n == e->ring_m) {
        double tc = z->ring[z->ring_head];
        if (!reached(e, tc, t_next)) {
            xs_tqueue_put(&e->future, tc, ev.p);
            return NAN;
        }
    }
    return admit(e, ev, t_next);
}

/* ---- the unlimited stage (xs_simulate_free) --------------------------------------------------
 *
 * When the stage never holds a chunk back (its room is never short, no producer reaches a cap),
 * a chunk is accepted at its ready time, and a producer's times follow from its own program
 * alone: its chunks are taken one after the other, producer by producer, with no heap. What the
 * engine sums in acceptance order, the departure of the last byte d_last, is the FIFO recurrence
 * d = max(d, arrival) + c / R over every chunk in acceptance order; its final value is the
 * largest arrival + (bytes accepted from that chunk on) / R, which only chunks accepted within
 * (stage bytes of the run) / R of the latest arrival can reach. Those are kept (free_keep) and
 * the recurrence runs over them in acceptance order at the end (free_drain). */

/* Keep chunk (t, c) of producer p while it can still set the last departure (-1: out of
 * memory). */
static int free_keep(xs_engine *e, double t, double c, int p)
{
    const double arr = t - quot_of(&e->q_r, c, e->r);
    if (arr > e->arr_max)
        e->arr_max = arr;
    const double lo = e->arr_max - e->horizon_ns;
    if (t < lo)
        return 0;
    if (e->nlate == e->late_cap) {
        size_t n = 0; /* drop those that fell behind the horizon since they were kept */
        for (size_t i = 0; i < e->nlate; i++)
            if (e->late[i].t >= lo)
                e->late[n++] = e->late[i];
        e->nlate = n;
        if (n >= e->late_cap / 2) {
            const size_t nc = e->late_cap ? 2 * e->late_cap : 1024;
            fchunk *nl = realloc(e->late, nc * sizeof *nl);
            if (!nl)
                return -1;
            e->late = nl;
            e->late_cap = nc;
        }
    }
    e->late[e->nlate++] = (fchunk){t, c, p, e->copies > 1 ? e->copies : 1};
    return 0;
}

/* Producer p's pending chunk is accepted at its ready time; its queue moves on (admit's
 * producer side). */
static void free_accept(xs_engine *e, int p)
{
    producer *z = &e->pr[p];
    const double t_acc = z->ready;
    if (free_keep(e, t_acc, z->pstage, p))
        e->oom = 1;
    z->a_prev = t_acc;
    z->accepted = z->oidx + 1;
    if (e->tandem) {
        z->qa[z->oidx % e->nbuf] = t_acc;
        z->owait = 1;
        stream_buffer(e, p);
        settle(e, p);
        if (z->owait)
            offer_next(e, p);
    } else {
        z->acc[z->oidx & (e->qr - 1)] = t_acc;
        settle(e, p);
        offer_next(e, p);
    }
}

static int fchunk_cmp(const void *a, const void *b)
{
    const fchunk *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t ? 1 : (x->p > y->p) - (x->p < y->p);
}

/* The departure of the last accepted byte: the FIFO recurrence over the kept chunks in
 * acceptance order (producers in index order where times tie). -INFINITY when none. */
static double free_drain(xs_engine *e)
{
    const double lo = e->arr_max - e->horizon_ns;
    size_t n = 0;
    for (size_t i = 0; i < e->nlate; i++)
        if (e->late[i].t >= lo)
            e->late[n++] = e->late[i];
    if (n > 1)
        qsort(e->late, n, sizeof *e->late, fchunk_cmp);
    double d = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        const double c = e->late[i].c, t_arr = e->late[i].t - quot_of(&e->q_r, c, e->r);
        for (int k = 0; k < e->late[i].n; k++)
            d = (d > t_arr ? d : t_arr) + quot_of(&e->q_R, c, e->R);
    }
    return d;
}

/* ---- the schedule's programs (xs_simulate_programs) -------------------------------------------
 *
 * The built-in program: every producer walks the schedule's rows, starting the burst of each row
 * it takes part in (its program's bytes, or the row's); with sync it waits at a grid barrier
 * after each row. The windows of the result are the bursts' windows, by (row, producer). */

/* A row's issue windows as they close: the row's statistics (median and maximum of the windows'
 * lengths, the latest end) are taken once its last window has closed, and its lengths freed, so
 * that memory follows the rows in flight, not rows x producers. */
typedef struct {
    double *len;           /* [active] lengths of the closed windows (ns); NULL until the first */
    int active;            /* windows the row opens: its producers taking part */
    int closed;            /* windows closed so far */
    double max;            /* longest window so far (ns) */
    double end;            /* latest end so far (ns) */
} rowacc;

typedef struct {
    const xs_profile *pf;
    const xs_schedule *s;
    const xs_programs *pg; /* NULL: every producer of a row runs the row's burst and gap */
    const xs_sim_opts *o;
    int np;                /* producers: the schedule's widest row */
    double chunk;          /* the engine's chunk (bytes) */
    double *win0, *win1;   /* the result's windows: start and end of (row, producer) (ns);
                            * NULL unless the caller records them */
    rowacc *acc;           /* [nrows] each row's closed windows, until the row is complete */
    xs_rowres *res;        /* [nrows] the result's rows */
    int oom;               /* a row's accumulator could not be allocated */
    int *cur;              /* [np] the row each producer's program is at */
    char *started;         /* [np] 1 while the burst of cur runs (its end comes next) */
    double *arrive;        /* [np] sync: when each producer reached the barrier (ns) */
    int arrived;           /* sync: producers at the barrier */
    int barrier_row;       /* sync: the row the last barrier released */
    double makespan;       /* the latest end of a producer's work (ns) */
    int copies;            /* unlimited stage, every row of the same producers and no programs:
                            * producer 0's run stands for producers 0..copies-1 (0: none) */
} rows_run;

/* A producer's bytes and work in a row: its program's, or the row's (every producer of the row
 * alike). A producer takes part in a row when the row names it and, with programs, when its
 * program stores something there. */
static int64_t row_bytes(const rows_run *d, int row, int p)
{
    return d->pg ? d->pg->bytes[(size_t)row * (size_t)d->pg->producers + (size_t)p]
                 : d->s->rows[row].bytes_per_producer;
}

static double row_gap(const rows_run *d, int row, int p)
{
    return d->pg ? d->pg->gap_ns[(size_t)row * (size_t)d->pg->producers + (size_t)p]
                 : d->s->rows[row].gap_ns;
}

static int row_active(const rows_run *d, int row, int p)
{
    return p < d->s->rows[row].producers && (!d->pg || row_bytes(d, row, p) > 0);
}

static size_t win_at(const rows_run *d, int row, int p) /* index into win0 / win1 */
{
    return (size_t)row * d->np + p;
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
 * gets a ring. Sets *nring. */
static xs_status size_rings(const rows_run *d, int *nring_out)
{
    const xs_profile *pf = d->pf;
    *nring_out = 0;
    if (!(pf->capacity_bytes_per_producer > 0))
        return XS_OK;
    /* the cap limits a producer's share of Q; its reserve comes on top of it */
    double m = floor((pf->capacity_bytes_per_producer + pf->reserve_bytes_per_producer) /
                     d->chunk);
    if (m < 1)
        m = 1;
    double *offered = calloc((size_t)d->np, sizeof *offered); /* by producer p */
    if (!offered)
        return xs_seterr(XS_ENOMEM, "out of memory simulating %d producers", d->np);
    for (int i = 0; i < d->s->nrows; i++)
        for (int p = 0; p < d->s->rows[i].producers; p++)
            offered[p] += ceil((double)row_bytes(d, i, p) / d->chunk);
    int nring = 0;
    for (int p = d->np - 1; p >= 0 && !nring; p--)
        if (offered[p] > m)
            nring = p + 1;
    free(offered);
    if (nring && m * nring > (double)(1 << 28))
        return xs_seterr(XS_ERANGE, "%d producers x a per-producer cap of %.0f chunks: too "
                         "many outstanding chunks to track (at most 2^28; raise chunk_bytes "
                         "with --set)", nring, m);
    *nring_out = nring;
    return XS_OK;
}

/* How much work: chunks offered in total (at most 2^31), and the cap's rings; in the same pass
 * the windows each row opens (d->acc[].active) and the bytes of the whole run (*bytes). */
static xs_status rows_size(const rows_run *d, int *nring, double *bytes)
{
    const xs_schedule *s = d->s;
    double nchunks = 0, b = 0;
    for (int i = 0; i < s->nrows; i++)
        if (!d->pg) {
            const double per = (double)s->rows[i].bytes_per_producer;
            nchunks += (double)s->rows[i].producers * ceil(per / d->chunk);
            b += (double)s->rows[i].producers * per;
            d->acc[i].active = s->rows[i].producers;
        } else {
            int active = 0;
            for (int p = 0; p < s->rows[i].producers; p++) {
                const int64_t x = row_bytes(d, i, p);
                nchunks += ceil((double)x / d->chunk);
                b += (double)x;
                active += x > 0;
            }
            d->acc[i].active = active;
        }
    *bytes = b;
    if (nchunks > 2147483647.0)
        return xs_seterr(XS_ERANGE, "schedule offers %.3g chunks of %lld bytes; the simulation "
                         "handles at most 2^31 (raise chunk_bytes with --set)", nchunks,
                         (long long)d->chunk);
    return size_rings(d, nring);
}

/* Producer p reached the end of a row's work at time t (ns): with sync it waits at the barrier
 * (1), otherwise its program goes on to the next row (0). */
static int row_done(rows_run *d, int p, double t)
{
    if (t > d->makespan)
        d->makespan = t;
    if (!d->o->sync)
        return 0;
    d->arrive[p] = t;
    d->arrived++;
    return 1;
}

/* The program's take (xs_engine_program): after a row's burst its work (the gap, already in t)
 * and the barrier; then the rows it takes no part in (their work only) up to the next active row,
 * whose burst it hands over, or a barrier (0), or the end (-1). */
static int rows_take(void *ctx, int p, double t, xs_engine_burst *b)
{
    rows_run *d = ctx;
    if (d->started[p]) {
        d->started[p] = 0;
        if (row_done(d, p, t))
            return 0;
        d->cur[p]++;
    }
    for (;;) {
        const int row = d->cur[p];
        if (row >= d->s->nrows)
            return -1;
        if (row > 0)
            t += d->pf->row_start_ns; /* every later row: its descriptor, the barriers */
        if (row_active(d, row, p)) {
            if (d->win0)
                d->win0[win_at(d, row, p)] = t;
            d->started[p] = 1;
            b->bytes = (double)row_bytes(d, row, p);
            /* a store loop split in its last unrolled pass issues later (issue_tail_ns): the
             * window opens at t, the burst's stream starts that much later */
            b->start_ns = t + xs_store_tail_ns(d->pf, b->bytes);
            b->gap_ns = row_gap(d, row, p);
            b->task = row;
            return 1;
        }
        t += row_gap(d, row, p);
        if (row_done(d, p, t))
            return 0;
        d->cur[p]++;
    }
}

static void row_window(rows_run *d, int p, int task, double t_start_ns, double t_end_ns)
{
    if (d->win1)
        d->win1[win_at(d, task, p)] = t_end_ns;
    rowacc *a = &d->acc[task];
    /* the window opened issue_tail_ns before the burst's stream started (rows_take) */
    const double len =
        t_end_ns - (t_start_ns - xs_store_tail_ns(d->pf, (double)row_bytes(d, task, p)));
    /* the same statistics as xs_result_rows_from_windows: order-free, so the order in which
     * the windows close does not matter */
    if (!d->o->skip_row_medians) {
        if (!a->len && !(a->len = malloc((size_t)a->active * sizeof *a->len))) {
            d->oom = 1;
            return;
        }
        a->len[a->closed] = len;
    }
    if (!a->closed || len > a->max)
        a->max = len;
    if (!a->closed || t_end_ns > a->end)
        a->end = t_end_ns;
    if (++a->closed == a->active) {
        d->res[task].issue_med_ns =
            a->len ? xs_median(a->len, (size_t)a->active) : NAN;
        d->res[task].issue_max_ns = a->max;
        d->res[task].end_ns = a->end;
        free(a->len);
        a->len = NULL;
    }
}

static void rows_closed(void *ctx, int p, int task, double t_start_ns, double t_end_ns)
{
    rows_run *d = ctx;
    row_window(d, p, task, t_start_ns, t_end_ns);
    for (int q = 1; q < d->copies; q++) { /* producer 0's window stands for theirs */
        if (d->win0)
            d->win0[win_at(d, task, q)] = d->win0[win_at(d, task, 0)];
        row_window(d, q, task, t_start_ns, t_end_ns);
    }
}

/* Sync: every producer reached the barrier after barrier_row; release them together. 1 when
 * the simulation ends here. */
static int release_barrier(rows_run *d, xs_engine *e)
{
    double t = -INFINITY;
    for (int p = 0; p < d->np; p++)
        if (d->arrive[p] > t)
            t = d->arrive[p];
    t += d->pf->barrier_ns;
    d->arrived = 0;
    d->barrier_row++;
    if (d->barrier_row >= d->s->nrows) {
        /* every window has closed. Chunks may still sit in queues or buffers: with tandem
         * buffers or a trace they are accepted to the end (the backlog record and the trace
         * then hold every byte); otherwise stop here, as the earlier model did (no window
         * changes either way) */
        const int tandem = fmin(floor(d->pf->buffer_bytes_per_producer / d->chunk), 1 << 28) > 0;
        return !tandem && !d->o->trace;
    }
    /* a burst entirely within the queue ends at once */
    for (int p = 0; p < d->np; p++) {
        d->cur[p] = d->barrier_row;
        xs_engine_wake(e, p, t);
    }
    return 0;
}

/* Run the programs to the end: every producer's program begins start_ns after the schedule's
 * start instant; chunks are accepted until none is left (or, with sync, the last barrier). */
static void rows_run_all(rows_run *d, xs_engine *e)
{
    for (int p = 0; p < d->np; p++)
        xs_engine_wake(e, p, d->pf->start_ns);
    for (;;) {
        if (d->o->sync && d->arrived == d->np) {
            if (release_barrier(d, e))
                break;
            continue;
        }
        if (xs_engine_next_ns(e) == INFINITY)
            break;
        xs_engine_step(e);
    }
}

/* The result from a finished run: fails, with *out released, when a window stayed open (a defect
 * of the engine) or memory ran out. */
static xs_status rows_finish(rows_run *d, xs_engine *e, xs_result *out)
{
    const int oom = xs_engine_oom(e) || d->oom;
    xs_engine_close(e, out);
    if (oom) {
        xs_result_free(out);
        return xs_seterr(XS_ENOMEM, "out of memory simulating %d producers", d->np);
    }
    /* every active window must have closed; rows nobody took part in have NaN statistics */
    for (int row = 0; row < d->s->nrows; row++) {
        const rowacc *a = &d->acc[row];
        if (a->closed < a->active) {
            xs_result_free(out);
            return xs_seterr(XS_ERANGE, "simulation did not complete (row %d: %d of %d windows "
                             "closed)", row, a->closed, a->active);
        }
        if (!a->active)
            out->rows[row].issue_med_ns = out->rows[row].issue_max_ns = out->rows[row].end_ns =
                NAN;
    }
    out->makespan_ns = d->makespan;
    return XS_OK;
}

xs_status xs_simulate(const xs_profile *pf, const xs_schedule *s, const xs_sim_opts *opts,
                      xs_result *out)
{
    return xs_simulate_programs(pf, s, NULL, opts, out);
}

/* Producer p's program on the unlimited stage with no store queue and no buffer of its own: a
 * burst's chunks stream at r one after the other from its start plus the overhead (or from the
 * previous chunk), each accepted when it has streamed, and its window ends with its last
 * chunk. The engine's arithmetic (offer_next, settle) without its producer state. */
static void free_direct(rows_run *d, xs_engine *e, int p)
{
    double t = d->pf->start_ns, a_prev = -INFINITY;
    for (;;) {
        xs_engine_burst b = {.start_ns = t, .stage_bytes = -1, .ns_per_byte = -1};
        if (rows_take(d, p, t, &b) <= 0)
            return;
        const double in = b.start_ns + e->oh;
        double rem = b.bytes;
        while (rem > 0) {
            const double pending = rem < e->c ? rem : e->c;
            rem -= pending;
            if (rem < 0.5)
                rem = 0;
            const double ready = (in > a_prev ? in : a_prev) + quot_of(&e->q_r, pending, e->r);
            if (free_keep(e, ready, pending, p)) {
                e->oom = 1;
                return;
            }
            a_prev = ready;
        }
        /* the window ends when its last chunk is accepted (a burst of no bytes: at once, or
         * when the chunk before it was) */
        const double end = in > a_prev ? in : a_prev;
        rows_closed(d, p, b.task, b.start_ns, end);
        t = end + b.gap_ns;
    }
}

/* The unlimited stage's run (xs_simulate_free): every producer's program to its end, one producer
 * after the other, each chunk accepted at its ready time; producers that are alike (no programs,
 * every row of the same width) run once. */
static void rows_run_free(rows_run *d, xs_engine *e)
{
    /* producers alike (the same rows, bursts and gaps, and no stage between them): one runs */
    int alike = !d->pg;
    for (int i = 1; i < d->s->nrows && alike; i++)
        alike = d->s->rows[i].producers == d->s->rows[0].producers;
    const int direct = e->q == 0 && !e->tandem;
    if (alike)
        d->copies = e->copies = d->np;
    for (int p = 0; p < (alike ? 1 : d->np) && !e->oom; p++) {
        if (direct) {
            free_direct(d, e, p);
            continue;
        }
        xs_engine_wake(e, p, d->pf->start_ns);
        while (!e->pr[p].owait && !e->oom)
            free_accept(e, p);
    }
}

/* Whether the stage of pf can hold back a chunk of a run of `bytes` stage bytes: its room may
 * run short (they exceed Q less one chunk) or a producer may reach its cap (nring > 0). */
static int stage_can_hold(const rows_run *d, int nring, double bytes)
{
    return nring > 0 || bytes > d->pf->capacity_bytes - d->chunk;
}

static xs_status simulate(const xs_profile *pf, const xs_schedule *s, const xs_programs *pg,
                          const xs_sim_opts *opts, int free_run, xs_result *out,
                          double *drained_ns)
{
    static const xs_sim_opts defaults = {0};
    memset(out, 0, sizeof *out);
    /* ---- entry checks: what the simulation accepts (bad input fails here, one message) ---- */
    XS_TRY(xs_profile_check(pf, "profile"));
    if (!s || s->nrows < 1)
        return xs_seterr(XS_EINVAL, "schedule has no rows");
    if (pg)
        XS_TRY(check_programs(s, pg));
    rows_run d = {.pf = pf, .s = s, .pg = pg, .o = opts ? opts : &defaults};
    d.np = xs_schedule_max_producers(s);
    d.chunk = (int64_t)pf->chunk_bytes > 0 ? (double)(int64_t)pf->chunk_bytes : 1;
    d.acc = calloc((size_t)s->nrows, sizeof *d.acc);
    if (!d.acc)
        return xs_seterr(XS_ENOMEM, "out of memory for %d rows", s->nrows);
    int nring = 0;
    double stage_bytes = 0;
    xs_status st = rows_size(&d, &nring, &stage_bytes);
    if (st == XS_OK && free_run && (d.o->sync || d.o->trace || d.o->record_backlog))
        st = xs_seterr(XS_EINVAL, "unlimited-stage run: no sync, trace or backlog record");
    if (st == XS_OK && free_run && stage_can_hold(&d, nring, stage_bytes))
        st = xs_seterr(XS_EINVAL, "unlimited-stage run: the stage can hold chunks back (%.6g "
                       "bytes through a stage of %.6g, or a per-producer cap)", stage_bytes,
                       pf->capacity_bytes);
    /* ---- end of entry checks -------------------------------------------------------------- */
    const xs_engine_program prog = {rows_take, rows_closed, &d};
    const xs_engine_opts eo = {.sim = d.o, .nring = nring, .ep_stage = 0};
    xs_engine *e = NULL;
    if (st == XS_OK)
        st = xs_engine_open(pf, d.np, &prog, &eo, &e);
    if (st != XS_OK) {
        free(d.acc);
        return st;
    }
    if (free_run) {
        e->free_run = 1;
        e->horizon_ns = stage_bytes / e->R * (1 + 1e-9);
        e->arr_max = -INFINITY;
    }
    /* issue windows only where they are recorded: without them the memory is linear in the
     * producers (and the rows), not in rows x producers */
    st = xs_result_alloc(out, s->nrows, d.np, d.o->record_windows);
    d.cur = calloc((size_t)d.np, sizeof *d.cur);
    d.started = calloc((size_t)d.np, sizeof *d.started);
    if (d.o->sync)
        d.arrive = malloc((size_t)d.np * sizeof *d.arrive);
    if (st == XS_OK && (!d.cur || !d.started || (d.o->sync && !d.arrive))) {
        xs_result_free(out);
        st = xs_seterr(XS_ENOMEM, "out of memory simulating %d producers", d.np);
    }
    if (st == XS_OK) {
        d.win0 = out->win_start;
        d.win1 = out->win_end;
        d.res = out->rows;
        double drained = -INFINITY;
        if (free_run) {
            rows_run_free(&d, e);
            drained = free_drain(e);
        } else {
            rows_run_all(&d, e);
        }
        st = rows_finish(&d, e, out);
        if (free_run && st == XS_OK) {
            out->peak_backlog_bytes = NAN; /* not followed */
            if (drained_ns)
                *drained_ns = drained;
        }
    } else {
        xs_engine_close(e, NULL);
    }
    for (int row = 0; d.acc && row < s->nrows; row++)
        free(d.acc[row].len);
    free(d.acc);
    free(d.cur);
    free(d.started);
    free(d.arrive);
    return st;
}

xs_status xs_simulate_programs(const xs_profile *pf, const xs_schedule *s, const xs_programs *pg,
                               const xs_sim_opts *opts, xs_result *out)
{
    return simulate(pf, s, pg, opts, 0, out, NULL);
}

xs_status xs_simulate_free(const xs_profile *pf, const xs_schedule *s, const xs_programs *pg,
                           const xs_sim_opts *opts, xs_result *out, double *drained_ns)
{
    return simulate(pf, s, pg, opts, 1, out, drained_ns);
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
