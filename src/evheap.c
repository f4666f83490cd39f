/*
 * evheap.c - the binary min-heap of events shared by the core's event engines (src/evheap.h).
 */
#include "evheap.h"

#include <stdlib.h>

int xs_evheap_init(xs_evheap *h, int cap)
{
    h->n = 0;
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
    h->n = h->cap = 0;
}

int xs_evheap_push(xs_evheap *h, xs_ev e)
{
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
    xs_ev top = h->a[0], last = h->a[--h->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, k = i;
        xs_ev best = last;
        if (l < h->n && xs_ev_less(h->a[l], best)) {
            k = l;
            best = h->a[l];
        }
        if (r < h->n && xs_ev_less(h->a[r], best))
            k = r;
        if (k == i)
            break;
        h->a[i] = h->a[k];
        i = k;
    }
    if (h->n > 0)
        h->a[i] = last;
    return top;
}
