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

/* Put e at slot i (a hole, n slots in use) and sift it down to its place. */
static void sift_down(xs_evheap *h, int i, xs_ev e)
{
    const int n = h->n;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, k = i;
        xs_ev best = e;
        if (l < n && xs_ev_less(h->a[l], best)) {
            k = l;
            best = h->a[l];
        }
        if (r < n && xs_ev_less(h->a[r], best))
            k = r;
        if (k == i)
            break;
        h->a[i] = h->a[k];
        i = k;
    }
    h->a[i] = e;
}

/* Close the hole left by a take: the last event moves into it. */
static void fill_hole(xs_evheap *h)
{
    h->hole = 0;
    xs_ev last = h->a[--h->n];
    if (h->n > 0)
        sift_down(h, 0, last);
}

int xs_evheap_push(xs_evheap *h, xs_ev e)
{
    if (h->hole) {
        h->hole = 0;
        sift_down(h, 0, e);
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
        if (!xs_ev_less(e, h->a[up]))
            break;
        h->a[i] = h->a[up];
        i = up;
    }
    h->a[i] = e;
    return 0;
}

xs_ev xs_evheap_pop(xs_evheap *h)
{
    if (h->hole)
        fill_hole(h);
    xs_ev top = h->a[0];
    h->hole = 1;
    fill_hole(h);
    return top;
}

xs_ev xs_evheap_take(xs_evheap *h)
{
    if (h->hole)
        fill_hole(h);
    h->hole = 1;
    return h->a[0];
}
