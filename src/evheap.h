// SPDX-License-Identifier: Apache-2.0
/*
 * evheap.h - the event heap shared by the core's event engines (src/sim.c and the workload
 * models in src/ep_*.c, src/tp_*.c, src/up_*.c): a binary min-heap of (t, t2, p) events.
 *
 * Order: t, then t2, then p. Ties are broken by the producer index so that a simulation's result
 * never depends on the order in which events were pushed. Internal to the core (not installed).
 *
 * A take (xs_evheap_take) leaves the first slot empty (a hole) instead of restoring the heap at
 * once: the next push fills it with one sift-down, so that an event loop whose handler pushes the
 * same producer's next event (an engine's chunk after chunk) moves the heap once per event, not
 * twice. xs_evheap_peek and xs_evheap_size see through the hole; xs_evheap_pop fills it first.
 */
#ifndef XSTAGE_EVHEAP_H
#define XSTAGE_EVHEAP_H

typedef struct {
    double t;  /* primary key (ns) */
    double t2; /* secondary key (ns); 0 where unused */
    int p;     /* producer (or task) index: the last tie-break */
} xs_ev;

typedef struct {
    xs_ev *a;
    int n, cap; /* slots in use (the hole included); capacity of a */
    int hole;   /* 1: a[0] was taken and is not an event (n - 1 events held) */
} xs_evheap;

/* An empty heap with room for cap events (0: grows from 64 on the first push). 0 on success, -1
 * when out of memory. */
int xs_evheap_init(xs_evheap *h, int cap);
void xs_evheap_free(xs_evheap *h);
/* 1 if x comes before y. */
static inline int xs_ev_less(xs_ev x, xs_ev y)
{
    return x.t < y.t || (x.t == y.t && (x.t2 < y.t2 || (x.t2 == y.t2 && x.p < y.p)));
}
/* Push e, growing the array as needed: 0 on success, -1 when out of memory (h unchanged). */
int xs_evheap_push(xs_evheap *h, xs_ev e);
/* The same for the event (t, t2, p), passed in registers. */
int xs_evheap_put(xs_evheap *h, double t, double t2, int p);
/* Remove and return the first event; h must hold one. */
xs_ev xs_evheap_pop(xs_evheap *h);
/* Close the hole a take left (the last event moves into it); h must have one. */
void xs_evheap_fill(xs_evheap *h);
/* The same as pop, leaving a hole that the next push or pop fills. */
static inline xs_ev xs_evheap_take(xs_evheap *h)
{
    if (h->hole)
        xs_evheap_fill(h);
    h->hole = 1;
    return h->a[0];
}
/* Events held. */
static inline int xs_evheap_size(const xs_evheap *h)
{
    return h->n - h->hole;
}
/* The first event without removing it; h must hold one. After a take it is the earlier of the
 * hole's children. */
static inline xs_ev xs_evheap_peek(const xs_evheap *h)
{
    if (!h->hole)
        return h->a[0];
    if (h->n < 3 || xs_ev_less(h->a[1], h->a[2]))
        return h->a[1];
    return h->a[2];
}

/* ---- a time queue: the same heap for events ordered by (t, p) alone ------------------------
 *
 * Half the bytes of an xs_ev per slot and one key less to compare: for a queue whose events all
 * have t2 = 0 (an engine's chunks by ready time), where it pops in the same order as an xs_evheap
 * would. Takes leave a hole as xs_evheap_take does. */

typedef struct {
    double t; /* key (ns) */
    int p;    /* producer: the tie-break */
} xs_tev;

typedef struct {
    xs_tev *a;
    int n, cap, hole; /* as in xs_evheap */
} xs_tqueue;

int xs_tqueue_init(xs_tqueue *h, int cap);
void xs_tqueue_free(xs_tqueue *h);
/* Push (t, p), growing the array as needed: 0, or -1 when out of memory (h unchanged). */
int xs_tqueue_put(xs_tqueue *h, double t, int p);
/* Close the hole a take left; h must have one. */
void xs_tqueue_fill(xs_tqueue *h);
static inline int xs_tev_less(const xs_tev *x, const xs_tev *y)
{
    return x->t < y->t || (x->t == y->t && x->p < y->p);
}
static inline int xs_tqueue_size(const xs_tqueue *h)
{
    return h->n - h->hole;
}
/* The first event; h must hold one. */
static inline xs_tev xs_tqueue_peek(const xs_tqueue *h)
{
    if (!h->hole)
        return h->a[0];
    if (h->n < 3 || xs_tev_less(&h->a[1], &h->a[2]))
        return h->a[1];
    return h->a[2];
}
/* Remove and return the first event, leaving a hole; h must hold one. */
static inline xs_tev xs_tqueue_take(xs_tqueue *h)
{
    if (h->hole)
        xs_tqueue_fill(h);
    h->hole = 1;
    return h->a[0];
}

#endif /* XSTAGE_EVHEAP_H */
