// SPDX-License-Identifier: Apache-2.0
/*
 * evheap.c - the binary min-heap of events shared by the core's event engines (src/evheap.h).
 */
#include "evheap.h"

#include <stdlib.h>

int xs_evheap_init(xs_evheap *h, int cap)
{
    h->n = 0;
    h->hole = 0;
    h->cap = cap > 0 ? cap : 0;
    h->a = NULL;
    if (cap > 0 && !(h->a = malloc((size_t)cap * sizeof *h->a))) {
        h->cap = 0;
        return -1;
    }
    return 0;
}

void xs_evheap_free(xs_evheap *h)
{
    free(h->a);
    h->a = NULL;
    h->n = h->cap = h->hole = 0;
}

/* x before the event (t, t2, p) */
static inline int ev_before(const xs_ev *x, double t, double t2, int p)
{
    return x->t < t || (x->t == t && (x->t2 < t2 || (x->t2 == t2 && x->p < p)));
}

/* Put the event (t, t2, p) at slot i (a hole, n slots in use) and sift it down to its place.
 * The event travels in registers (an xs_ev by value goes through the stack, and reading back a
 * struct just stored stalls the load). */
static void sift_down(xs_evheap *h, int i, double t, double t2, int p)
{
    const int n = h->n;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, k;
        if (l >= n)
            break;
        k = l;
        if (r < n) {
            /* the earlier child without branches (every comparison evaluated, combined
             * bitwise): which child wins is data, and a mispredicted branch per level costs
             * more than the comparisons */
            const xs_ev *x = &h->a[r], *y = &h->a[l];
            k += (x->t < y->t) | ((x->t == y->t) & ((x->t2 < y->t2) |
                                                    ((x->t2 == y->t2) & (x->p < y->p))));
        }
        if (!ev_before(&h->a[k], t, t2, p))
            break;
        h->a[i] = h->a[k];
        i = k;
    }
    h->a[i].t = t;
    h->a[i].t2 = t2;
    h->a[i].p = p;
}

void xs_evheap_fill(xs_evheap *h)
{
    h->hole = 0;
    const xs_ev *last = &h->a[--h->n];
    if (h->n > 0)
        sift_down(h, 0, last->t, last->t2, last->p);
}

int xs_evheap_push(xs_evheap *h, xs_ev e)
{
    return xs_evheap_put(h, e.t, e.t2, e.p);
}

int xs_evheap_put(xs_evheap *h, double t, double t2, int p)
{
    if (h->hole) {
        h->hole = 0;
        sift_down(h, 0, t, t2, p);
        return 0;
    }
    if (h->n == h->cap) {
        int nc = h->cap ? 2 * h->cap : 64;
        xs_ev *na = realloc(h->a, sizeof *na * (size_t)nc);
        if (!na)
            return -1;
        h->a = na;
        h->cap = nc;
    }
    int i = h->n++;
    while (i > 0) {
        int up = (i - 1) / 2;
        const xs_ev *u = &h->a[up];
        if (!(t < u->t || (t == u->t && (t2 < u->t2 || (t2 == u->t2 && p < u->p)))))
            break;
        h->a[i] = *u;
        i = up;
    }
    h->a[i].t = t;
    h->a[i].t2 = t2;
    h->a[i].p = p;
    return 0;
}

xs_ev xs_evheap_pop(xs_evheap *h)
{
    if (h->hole)
        xs_evheap_fill(h);
    xs_ev top = h->a[0];
    h->hole = 1;
    xs_evheap_fill(h);
    return top;
}

/* ---- the time queue ---------------------------------------------------------------------------- */

int xs_tqueue_init(xs_tqueue *h, int cap)
{
    h->n = h->hole = 0;
    h->cap = cap > 0 ? cap : 0;
    h->a = NULL;
    if (cap > 0 && !(h->a = malloc((size_t)cap * sizeof *h->a))) {
        h->cap = 0;
        return -1;
    }
    return 0;
}

void xs_tqueue_free(xs_tqueue *h)
{
    free(h->a);
    h->a = NULL;
    h->n = h->cap = h->hole = 0;
}

/* (t, p) into the hole at slot i, sifted down (as sift_down) */
static void tq_sift_down(xs_tqueue *h, int i, double t, int p)
{
    const int n = h->n;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, k = l;
        if (l >= n)
            break;
        if (r < n) {
            const xs_tev *x = &h->a[r], *y = &h->a[l];
            k += (x->t < y->t) | ((x->t == y->t) & (x->p < y->p));
        }
        const xs_tev *c = &h->a[k];
        if (!(c->t < t || (c->t == t && c->p < p)))
            break;
        h->a[i] = *c;
        i = k;
    }
    h->a[i].t = t;
    h->a[i].p = p;
}

void xs_tqueue_fill(xs_tqueue *h)
{
    h->hole = 0;
    const xs_tev *last = &h->a[--h->n];
    if (h->n > 0)
        tq_sift_down(h, 0, last->t, last->p);
}

int xs_tqueue_put(xs_tqueue *h, double t, int p)
{
    if (h->hole) {
        h->hole = 0;
        tq_sift_down(h, 0, t, p);
        return 0;
    }
    if (h->n == h->cap) {
        int nc = h->cap ? 2 * h->cap : 64;
        xs_tev *na = realloc(h->a, sizeof *na * (size_t)nc);
        if (!na)
            return -1;
        h->a = na;
        h->cap = nc;
    }
    int i = h->n++;
    while (i > 0) {
        int up = (i - 1) / 2;
        const xs_tev *u = &h->a[up];
        if (!(t < u->t || (t == u->t && p < u->p)))
            break;
        h->a[i] = *u;
        i = up;
    }
    h->a[i].t = t;
    h->a[i].p = p;
    return 0;
}
