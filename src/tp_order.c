// SPDX-License-Identifier: Apache-2.0
/*
 * tp_order.c - the TP task lists of a plan (include/xstage_tp.h): the store of a list into a slot
 * with the couriers' walk and the list's hash, the naive order, copies and caller-made lists,
 * the per-step statistics of an order, and the split of a courier order's first remote tiles
 * along k. The shaped order is tp_shape.c, the invariants tp_check.c, the model tp_model.c.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_plan.h"

/* Tiles of GEMM g over row blocks [rb0, rb1) in grouped raster order: groups of 8 row blocks,
 * column-major within a group, so that tiles running together share A and B panels in L2. */
int tp_raster(tp_list *l, int g, int rb0, int rb1, int tiles_n)
{
    for (int gs = rb0; gs < rb1; gs += 8) {
        const int ge = gs + 8 < rb1 ? gs + 8 : rb1;
        for (int tn = 0; tn < tiles_n; tn++)
            for (int tm = gs; tm < ge; tm++)
                if (tp_list_push(l, tp_mk_tile(g, tm, tn)))
                    return -1;
    }
    return 0;
}

static int cmp_ll(const void *x, const void *y)
{
    const long long a = *(const long long *)x, b = *(const long long *)y;
    return a < b ? -1 : a > b;
}

/* The couriers' pushes of list l (cour > 0, an all-gather over P > 1 ranks): every (rank, chunk)
 * the list does not push, ordered by the list position of the first GEMM 0 tile that needs it -
 * a tile on shard s needs this rank's chunks at the mirror rank (tp_args.ag_sym; with real peers
 * the same position of rank r's rotated list) - then by ring distance and chunk. Appended to
 * walk[*nw ...] with their hashes (the words of tp_mk_push(r, c)). -1: out of host memory. */
static int tp_walk_pushes(const xs_tp_plan *pl, const tp_list *l, int *walk, int *nw,
                          unsigned long long *wh)
{
    const xs_tp_info *in = &pl->in;
    const int P = pl->P, me = pl->me, nch = in->ag_chunks, rbpr = in->rs_rows / XS_TP_BM;
    const size_t np = (size_t)P * nch;
    int *need = (int *)malloc(np * sizeof(int));
    long long *key = (long long *)malloc(np * sizeof(long long));
    if (!need || !key) {
        free(need), free(key);
        return -1;
    }
    for (size_t q = 0; q < np; q++)
        need[q] = INT_MAX;
    for (int i = 0; i < l->n; i++) { /* pushed by the list itself: not the couriers' */
        const xs_tp_task *x = &l->v[i];
        if ((x->kind & XS_TP_K_PUSH) && x->push_rank >= 0 && x->push_rank < P)
            for (int k = 0; k < (x->push_n > 1 ? x->push_n : 1); k++)
                if (x->push_chunk + k >= 0 && x->push_chunk + k < nch)
                    need[(size_t)x->push_rank * nch + x->push_chunk + k] = -1;
    }
    for (int i = 0; i < l->n; i++) {
        const xs_tp_task *x = &l->v[i];
        if (!(x->kind & XS_TP_K_TILE) || x->gemm != 0 || x->tm < 0 || x->tm >= in->tiles_m)
            continue;
        const int s = x->tm / rbpr;
        if (s == me)
            continue;
        const int d = xs_tp_mirror(me, s, P), c1 = tp_ag_last_chunk(in, x->tm);
        const int c0 = (int)((double)(x->tm - s * rbpr) * XS_TP_BM * in->ag_k * 2 / XS_TP_CHUNK);
        for (int c = c0; c <= c1; c++)
            if (need[(size_t)d * nch + c] > i)
                need[(size_t)d * nch + c] = i;
    }
    int nk = 0;
    for (int j = 1; j < P; j++)
        for (int c = 0; c < nch; c++) {
            const int d = (me + j) % P, at = need[(size_t)d * nch + c];
            if (at >= 0) /* at most INT_MAX: a chunk no tile needs (none) goes last */
                key[nk++] = ((long long)at * P + j) * nch + c;
        }
    qsort(key, (size_t)nk, sizeof *key, cmp_ll);
    for (int q = 0; q < nk; q++) {
        const int j = (int)(key[q] / nch % P), c = (int)(key[q] % nch), d = (me + j) % P;
        const xs_tp_task x = tp_mk_push(d, c);
        int w[8];
        memcpy(w, &x, sizeof w);
        const int e = XS_TP_WALK_PUSH(d, c, nch);
        *wh += xs_tp_courier_hash(*nw, e, w);
        walk[(*nw)++] = e;
    }
    free(need);
    free(key);
    return 0;
}

/* Store list l in slot (taking it over) as an order for grid - cour compute CTAs, with the
 * couriers' walk: their pushes (tp_walk_pushes), then the list positions of the remote
 * reduce-scatter tiles, increasing (production order). */
xs_status tp_store_order(xs_tp_plan *pl, int slot, tp_list *l, int cour)
{
    if (slot < 0 || slot >= XS_TP_SLOTS) {
        free(l->v);
        return xs_seterr(XS_EINVAL, "tp: order slot %d outside 0..%d", slot, XS_TP_SLOTS - 1);
    }
    if (l->n == 0 && tp_list_push(l, tp_mk_reduce(0)) == 0)
        l->v[0].kind = 0; /* nothing to do (not reachable for a valid shape): one empty task */
    const int cpush = cour > 0 && pl->in.ag && pl->P > 1;
    const size_t wcap = (size_t)l->n + (cpush ? (size_t)pl->P * pl->in.ag_chunks : 0) + 1;
    int *walk = (int *)malloc(wcap * sizeof(int));
    if (!walk) {
        free(l->v);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    }
    int nw = 0;
    unsigned long long wh = 0;
    if (cpush && tp_walk_pushes(pl, l, walk, &nw, &wh)) {
        free(walk);
        free(l->v);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    }
    const int npush = nw;
    for (int i = 0; i < l->n; i++) {
        const xs_tp_task *x = &l->v[i];
        if ((x->kind & XS_TP_K_TILE) && x->gemm == pl->in.rs_gemm && pl->in.rs_gemm >= 0 &&
            x->tm >= 0 && x->tm < pl->in.tiles_m && x->tm * XS_TP_BM / pl->in.rs_rows != pl->me &&
            tp_split_last(x)) { /* a split tile: at its last part, which writes the outbox */
            int w[8];
            memcpy(w, x, sizeof w);
            wh += xs_tp_courier_hash(nw, i, w);
            walk[nw++] = i;
        }
    }
    free(pl->tasks[slot]);
    pl->tasks[slot] = l->v;
    pl->ntasks[slot] = l->n;
    pl->dirty[slot] = 1; /* uploaded by the next run that uses it */
    free(pl->walk[slot]);
    pl->walk[slot] = walk;
    pl->nwalk[slot] = nw;
    pl->npush[slot] = npush;
    pl->walk_hash[slot] = wh;
    pl->scour[slot] = cour; /* built for grid - cour compute CTAs */
    unsigned long long h = 0;
    int nsplit = 0;
    for (int i = 0; i < l->n; i++) {
        int w[8];
        memcpy(w, &l->v[i], sizeof w);
        h += xs_tp_task_hash(i, w);
        nsplit += (l->v[i].kind & XS_TP_K_SPLIT) && tp_split_last(&l->v[i]);
    }
    pl->nsplit[slot] = nsplit;
    pl->list_hash[slot] = h;
    return XS_OK;
}

xs_status xs_tp_order_naive(xs_tp_plan *pl, int slot)
{
    const xs_tp_info *in = &pl->in;
    const int P = pl->P, me = pl->me, rbpr = in->rs_rows / XS_TP_BM;
    tp_list l = {NULL, 0, 0};
    int bad = 0;
    if (in->ag && pl->couriers == 0) /* with couriers they push (tp_walk_pushes) */
        for (int c = 0; c < in->ag_chunks; c++)
            for (int j = 1; j < P; j++)
                bad |= tp_list_push(&l, tp_mk_push((me + j) % P, c));
    /* GEMM 0 and (mlp) GEMM 1: this rank's rows first, then the ring */
    for (int g = 0; g < in->ngemm; g++)
        for (int j = 0; j < P; j++) {
            const int r = (me + j) % P;
            bad |= tp_raster(&l, g, r * rbpr, (r + 1) * rbpr, in->tiles_n[g]);
        }
    for (int i = 0; i < in->reduce_tasks; i++)
        bad |= tp_list_push(&l, tp_mk_reduce(i));
    if (bad) {
        free(l.v);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    }
    return tp_store_order(pl, slot, &l, pl->couriers);
}

xs_status xs_tp_order_copy(xs_tp_plan *pl, int dst, int src)
{
    if (src < 0 || src >= XS_TP_SLOTS || !pl->ntasks[src])
        return xs_seterr(XS_EINVAL, "tp: order slot %d is empty", src);
    tp_list l = {(xs_tp_task *)malloc((size_t)pl->ntasks[src] * sizeof(xs_tp_task)), pl->ntasks[src],
                 pl->ntasks[src]};
    if (!l.v)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    memcpy(l.v, pl->tasks[src], (size_t)l.n * sizeof(xs_tp_task));
    return tp_store_order(pl, dst, &l, pl->scour[src]); /* for the source's compute CTAs */
}

int xs_tp_order_tasks(const xs_tp_plan *pl, int slot)
{
    return slot >= 0 && slot < XS_TP_SLOTS ? pl->ntasks[slot] : 0;
}

unsigned long long xs_tp_order_hash(const xs_tp_plan *pl, int slot)
{
    return slot >= 0 && slot < XS_TP_SLOTS && pl->ntasks[slot] ? pl->list_hash[slot] : 0;
}

int xs_tp_order_get(const xs_tp_plan *pl, int slot, const xs_tp_task **tasks)
{
    if (slot < 0 || slot >= XS_TP_SLOTS) {
        *tasks = NULL;
        return 0;
    }
    *tasks = (const xs_tp_task *)pl->tasks[slot];
    return pl->ntasks[slot];
}

xs_status xs_tp_order_set(xs_tp_plan *pl, int slot, const xs_tp_task *tasks, int n)
{
    if (n < 1 || !tasks)
        return xs_seterr(XS_EINVAL, "tp: an order needs at least one task");
    tp_list l = {(xs_tp_task *)malloc((size_t)n * sizeof(xs_tp_task)), n, n};
    if (!l.v)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    memcpy(l.v, tasks, (size_t)n * sizeof(xs_tp_task));
    return tp_store_order(pl, slot, &l, pl->couriers);
}

xs_status xs_tp_order_stats(const xs_tp_plan *pl, int slot, xs_tp_order_info *o)
{
    memset(o, 0, sizeof *o);
    if (slot < 0 || slot >= XS_TP_SLOTS || !pl->ntasks[slot])
        return xs_seterr(XS_EINVAL, "tp: order slot %d is empty", slot);
    const int n = pl->ntasks[slot], G = tp_slot_grid(pl, slot);
    const xs_tp_task *v = pl->tasks[slot];
    o->tasks = n;
    o->steps = (n + G - 1) / G;
    for (int s0 = 0; s0 < n; s0 += G) {
        double burst = 0;
        for (int i = s0; i < n && i < s0 + G; i++) {
            xs_tp_task x = v[i];
            double b = tp_task_bytes(pl, &x);
            if ((x.kind & XS_TP_K_TILE) && x.gemm == pl->in.rs_gemm &&
                x.tm * XS_TP_BM / pl->in.rs_rows != pl->me)
                o->remote_tiles++;
            if (x.kind & XS_TP_K_PUSH)
                o->pushes++;
            if ((x.kind & XS_TP_K_SPREAD) && (x.kind & XS_TP_K_PUSH)) {
                o->spread++;
                xs_tp_task push = x;
                push.kind = XS_TP_K_PUSH;
                b -= tp_task_bytes(pl, &push);
            }
            if (x.kind & XS_TP_K_DEFER) {
                o->deferred++;
                b = 0;
            }
            burst += b;
        }
        if (burst > o->max_step_bytes)
            o->max_step_bytes = burst;
    }
    return XS_OK;
}

/* Split the remote reduce-scatter tiles at the head of list l (xs_tp_pace.split = S0; G compute
 * CTAs; docs/TP.md "Split first steps"): the first step holds G / S0 of them in S0 k-parts each
 * - every tile's parts 0 .. S0-2 first, then the last parts, so each last part follows its
 * tile's other parts in the same step -, the next step G / (S0 / 2) tiles in S0 / 2 parts, and
 * so on down to whole tiles; the rest of the list follows unchanged (S0 is at most the tile's
 * k-tiles). Scratch slots are numbered in order. A list that does not start with remote tiles
 * is left as it is. -1: out of memory. */
int tp_split_head(const xs_tp_plan *pl, tp_list *l, int G, int S0)
{
    const xs_tp_info *in = &pl->in;
    const int KT = (in->gk[in->rs_gemm] + XS_TP_SPLIT_BK - 1) / XS_TP_SPLIT_BK;
    if (S0 > KT) /* a part has at least one k-tile */
        S0 = KT;
    int lead = 0; /* remote reduce-scatter tiles at the head, nothing else in their tasks */
    while (lead < l->n && l->v[lead].kind == XS_TP_K_TILE && l->v[lead].gemm == in->rs_gemm &&
           l->v[lead].tm * XS_TP_BM / in->rs_rows != pl->me)
        lead++;
    tp_list nl = {NULL, 0, 0};
    int i = 0, slot = 0;
    for (int S = S0; S >= 2 && i < lead; S /= 2) {
        int n1 = G / S;
        if (n1 > lead - i)
            n1 = lead - i;
        for (int p = 0; p < S; p++)
            for (int j = 0; j < n1; j++) {
                xs_tp_task x = l->v[i + j];
                x.kind |= XS_TP_K_SPLIT;
                XS_TP_SPLIT_PART(&x) = p;
                XS_TP_SPLIT_SLOT(&x) = slot + j * (S - 1);
                XS_TP_SPLIT_PARTS(&x) = S;
                if (tp_list_push(&nl, x)) {
                    free(nl.v);
                    return -1;
                }
            }
        slot += n1 * (S - 1);
        i += n1;
    }
    for (; i < l->n; i++)
        if (tp_list_push(&nl, l->v[i])) {
            free(nl.v);
            return -1;
        }
    free(l->v);
    *l = nl;
    return 0;
}

