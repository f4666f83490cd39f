/*
 * ep_sim.c - the event engine of the EP model (src/ep_sim.h explains it): producers' bursts in
 * chunks through their queues into the X-Stage (one FIFO server at R with room Q, reserves, an
 * optional per-producer cap, start-time fair queueing), and the main loops' virtual clock that
 * slows while the backlog is above block_bytes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ep_sim.h"

void xs_msim_free(xs_msim *g)
{
    free(g->fut.a);
    free(g->el.a);
    free(g->held.a);
    free(g->pev.a);
    free(g->vev.a);
    free(g->pr);
    free(g->mem);
    free(g->b);
    free(g->blk);
    memset(g, 0, sizeof *g);
}

xs_status xs_msim_init(xs_msim *g, const xs_profile *p, const xs_moe_model *mm, int np,
                       int nbursts, double r_local)
{
    memset(g, 0, sizeof *g);
    XS_TRY(xs_profile_check(p, "profile"));
    g->r = p->issue_bytes_per_ns;
    g->R = p->drain_bytes_per_ns;
    g->o = p->issue_overhead_ns;
    g->Q = p->capacity_bytes;
    /* The tandem buffer (buffer_bytes_per_producer, src/sim.c) is not modelled here: it
     * counts as reserve, which keeps the capacity a producer's bursts see (Q plus its own
     * bytes) where the fit put it. A profile fitted with a buffer and no reserve would
     * otherwise lose grid x buffer bytes (2.1 MB at 16 KiB) in this model. */
    g->rho = (p->reserve_bytes_per_producer > 0 ? p->reserve_bytes_per_producer : 0) +
             (p->buffer_bytes_per_producer > 0 ? p->buffer_bytes_per_producer : 0);
    g->c = p->chunk_bytes >= 1 ? floor(p->chunk_bytes) : 1;
    g->q = (int)floor((p->queue_bytes_per_producer > 0 ? p->queue_bytes_per_producer : 0) / g->c);
    if (p->capacity_bytes_per_producer > 0) {
        double m = floor((p->capacity_bytes_per_producer + g->rho) / g->c);
        g->ring_m = m < 1 ? 1 : m > 1e6 ? 1000000 : (int)m;
    }
    g->r_local = r_local > 0 ? r_local : g->r;
    g->X = mm && mm->block_bytes > 0 ? mm->block_bytes : INFINITY;
    g->s = mm ? (mm->block_speed < 0 ? 0 : mm->block_speed > 1 ? 1 : mm->block_speed) : 1;
    g->np = np;
    g->t_now = 0;
    if (g->q > 4096 || (double)np * (g->q + 1 + g->ring_m) > (double)(1 << 27))
        return xs_seterr(XS_ERANGE, "moe model: %d producers x a queue of %d and a cap of %d "
                         "chunks: too much state (raise chunk_bytes)", np, g->q, g->ring_m);
    g->pr = calloc((size_t)np, sizeof *g->pr);
    g->mem = calloc((size_t)np * (size_t)(g->q + 1 + g->ring_m) + 1, sizeof(double));
    g->cap_b = nbursts > 0 ? nbursts : 1;
    g->b = calloc((size_t)g->cap_b, sizeof *g->b);
    if (!g->pr || !g->mem || !g->b) {
        xs_msim_free(g);
        return xs_seterr(XS_ENOMEM, "moe model: out of host memory for %d producers", np);
    }
    for (int i = 0; i < np; i++) {
        xs_mprod *z = &g->pr[i];
        z->acc = g->mem + (size_t)i * (g->q + 1 + g->ring_m);
        z->ring = g->ring_m ? z->acc + g->q + 1 : NULL;
        z->head = z->tail = z->settle = z->ob = -1;
        z->a_prev = -INFINITY;
        z->weight = xs_arbitration_weight(p, i);
        z->next_wait = -1;
    }
    return XS_OK;
}

/* a new burst of producer p (not started yet); returns its index or -1 when out of memory */
int xs_msim_burst(xs_msim *g, int p, double tot, double rem, double ns_per_byte, int task)
{
    if (g->nb == g->cap_b) {
        int nc = 2 * g->cap_b;
        xs_burst *nbuf = realloc(g->b, sizeof(xs_burst) * (size_t)nc);
        if (!nbuf) {
            g->oom = 1;
            return -1;
        }
        g->b = nbuf;
        g->cap_b = nc;
    }
    const int i = g->nb++;
    xs_burst *u = &g->b[i];
    u->t0 = NAN;
    u->end = NAN;
    u->tot = tot;
    u->rem = rem;
    u->ns_per_byte = ns_per_byte;
    u->nch = (int64_t)ceil(tot / g->c);
    u->next = -1;
    u->task = task;
    xs_mprod *z = &g->pr[p];
    if (z->tail >= 0)
        g->b[z->tail].next = i;
    else
        z->head = i;
    z->tail = i;
    return i;
}

/* the backlog is above X before this time (given no further acceptance) */
static double xs_msim_tres(const xs_msim *g) { return g->d_last - g->X / g->R; }

/* advance the clock (and the main loops' virtual clock V) to t */
void xs_msim_advance(xs_msim *g, double t)
{
    if (!(t > g->t_now))
        return;
    const double tr = xs_msim_tres(g);
    if (g->t_now < tr) {
        const double seg = (t < tr ? t : tr) - g->t_now;
        g->V += g->s * seg;
        g->t_now += seg;
    }
    g->V += t - g->t_now;
    g->t_now = t;
}

/* the time at which V reaches v (no acceptance in between) */
double xs_msim_t_of_v(const xs_msim *g, double v)
{
    double dv = v - g->V;
    if (!(dv > 0))
        return g->t_now;
    const double tr = xs_msim_tres(g);
    if (g->t_now < tr) {
        const double gain = g->s * (tr - g->t_now);
        if (dv <= gain)
            return g->t_now + dv / g->s;
        return tr + (dv - gain);
    }
    return g->t_now + dv;
}

/* Offer the next chunk of producer p (the head of its queue), if its burst has started. */
static void xs_msim_offer_next(xs_msim *g, int p)
{
    xs_mprod *z = &g->pr[p];
    if (z->offering)
        return;
    if (!(z->orem > 0)) {
        const int nb = z->ob < 0 ? z->head : g->b[z->ob].next;
        if (nb < 0 || isnan(g->b[nb].t0))
            return; /* no more chunks, or the program has not started that burst */
        z->ob = nb;
        z->orem = g->b[nb].tot;
    }
    const xs_burst *u = &g->b[z->ob];
    z->pend_tot = z->orem < g->c ? z->orem : g->c;
    z->pend_rem = u->tot > 0 ? z->pend_tot * u->rem / u->tot : 0;
    z->orem -= z->pend_tot;
    if (z->orem < 0.5)
        z->orem = 0;
    z->oidx = z->accepted;
    /* in the queue once the burst has started and there is room in it; streamed after the
     * previous chunk */
    double in = u->t0 + g->o;
    if (g->q > 0 && z->oidx - g->q >= 0 && z->acc[(z->oidx - g->q) % (g->q + 1)] > in)
        in = z->acc[(z->oidx - g->q) % (g->q + 1)];
    z->ready = (in > z->a_prev ? in : z->a_prev) + z->pend_tot * u->ns_per_byte;
    z->offering = 1;
    if (xs_evheap_push(&g->fut, (xs_ev){z->ready, 0, p}))
        g->oom = 1;
}

/* A window closed: in a whole run (g->user set) the producer in a burst steps on at its end. */
static void xs_msim_window(xs_msim *g, int p, int bi, double end)
{
    (void)bi;
    if (!g->user || g->pr[p].state != XS_P_BURST)
        return; /* stall replay: the window is read from the burst */
    if (xs_evheap_push(&g->pev, (xs_ev){end, 0, p}))
        g->oom = 1;
}

/* Close every window of producer p whose end is known: its last chunk minus the queue has been
 * accepted. */
static void xs_msim_settle(xs_msim *g, int p)
{
    xs_mprod *z = &g->pr[p];
    while (z->settle >= 0) {
        xs_burst *u = &g->b[z->settle];
        if (isnan(u->t0) || !(u->last - g->q < z->accepted))
            return;
        const int64_t need = u->last - g->q;
        double en = u->t0 + g->o;
        if (need >= 0 && z->acc[need % (g->q + 1)] > en)
            en = z->acc[need % (g->q + 1)];
        u->end = en;
        const int bi = z->settle;
        z->settle = u->next;
        xs_msim_window(g, p, bi, en);
    }
}

/* Producer p starts burst bi at time t: its chunks go to the queue. */
void xs_msim_start(xs_msim *g, int p, int bi, double t)
{
    xs_mprod *z = &g->pr[p];
    xs_burst *u = &g->b[bi];
    u->t0 = t;
    u->first = z->assigned;
    z->assigned += u->nch;
    u->last = z->assigned - 1;
    if (z->settle < 0)
        z->settle = bi;
    xs_msim_offer_next(g, p);
    xs_msim_settle(g, p);
}

/* When the stage next accepts a chunk (INFINITY: no chunk offered). */
double xs_msim_stage_next(xs_msim *g)
{
    if (!g->el.n && !g->fut.n)
        return INFINITY;
    while (g->rho > 0 && g->held.n && g->held.a[0].t <= g->t_now) {
        xs_ev d = xs_evheap_pop(&g->held);
        if (d.t == g->pr[d.p].d_own && g->pr[d.p].outstanding) {
            g->pr[d.p].outstanding = 0;
            g->n_out--;
        }
    }
    const double room = g->Q + g->rho * (g->n_out > 0 ? g->n_out : 1) - g->c;
    const double t_space = g->d_last - room / g->R;
    double t = g->el.n ? g->t_now : g->fut.a[0].t;
    if (t < g->t_now)
        t = g->t_now;
    return t_space > t ? t_space : t;
}

/* Accept the next chunk at t_next (from xs_msim_stage_next, the clock advanced to it). */
void xs_msim_stage_accept(xs_msim *g, double t_next)
{
    while (g->fut.n && g->fut.a[0].t <= t_next) {
        xs_ev f = xs_evheap_pop(&g->fut);
        const xs_mprod *y = &g->pr[f.p];
        const double tag = y->ftag > g->vtime ? y->ftag : g->vtime;
        if (xs_evheap_push(&g->el, (xs_ev){tag, f.t, f.p}))
            g->oom = 1;
    }
    if (!g->el.n)
        return;
    xs_ev e = xs_evheap_pop(&g->el);
    xs_mprod *z = &g->pr[e.p];
    if (z->ring && z->ring_n == g->ring_m) {
        const double tc = z->ring[z->ring_head];
        if (tc > t_next) { /* its own cap holds it: retry when its oldest chunk drained */
            if (xs_evheap_push(&g->fut, (xs_ev){tc, 0, e.p}))
                g->oom = 1;
            return;
        }
    }
    double t_acc = t_next > z->ready ? t_next : z->ready;
    if (t_acc < g->t_now)
        t_acc = g->t_now;
    g->vtime = e.t;
    const double c = z->pend_rem;
    z->ftag = e.t + c / z->weight;
    const double t_arr = t_acc - c / g->r;
    g->d_last = (g->d_last > t_arr ? g->d_last : t_arr) + c / g->R;
    if (g->rho > 0) {
        if (!z->outstanding) {
            z->outstanding = 1;
            g->n_out++;
        }
        z->d_own = g->d_last;
        if (xs_evheap_push(&g->held, (xs_ev){g->d_last, 0, e.p}))
            g->oom = 1;
    }
    if (z->ring) {
        if (z->ring_n < g->ring_m) {
            z->ring[(z->ring_head + z->ring_n) % g->ring_m] = g->d_last;
            z->ring_n++;
        } else {
            z->ring[z->ring_head] = g->d_last;
            z->ring_head = (z->ring_head + 1) % g->ring_m;
        }
    }
    if (g->record_blocked) {
        const double until = xs_msim_tres(g);
        if (until > t_acc) {
            if (g->nblk && t_acc <= g->blk[2 * g->nblk - 1]) {
                if (until > g->blk[2 * g->nblk - 1])
                    g->blk[2 * g->nblk - 1] = until;
            } else {
                if (g->nblk == g->cap_blk) {
                    int nc = g->cap_blk ? 2 * g->cap_blk : 256;
                    double *nbk = realloc(g->blk, sizeof(double) * 2 * (size_t)nc);
                    if (!nbk) {
                        g->oom = 1;
                        nc = 0;
                    } else {
                        g->blk = nbk;
                        g->cap_blk = nc;
                    }
                }
                if (g->nblk < g->cap_blk) {
                    g->blk[2 * g->nblk] = t_acc;
                    g->blk[2 * g->nblk + 1] = until;
                    g->nblk++;
                }
            }
        }
    }
    z->acc[z->oidx % (g->q + 1)] = t_acc;
    z->a_prev = t_acc;
    z->accepted = z->oidx + 1;
    z->offering = 0;
    xs_msim_settle(g, e.p);
    xs_msim_offer_next(g, e.p);
}
