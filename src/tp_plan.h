// SPDX-License-Identifier: Apache-2.0
/*
 * tp_plan.h - internals shared by the TP planner's files (src/tp_*.c; not installed): the growing
 * task list, the task constructors, a task's remote bytes and measured compute, and the store of
 * a finished list into a plan slot. include/xstage_tp.h is the public side.
 */
#ifndef XSTAGE_TP_PLAN_H
#define XSTAGE_TP_PLAN_H

#include <stdlib.h>
#include <string.h>

#include "xstage_tp.h"

/* Every kind bit a task may carry. */
#define TP_K_ALL (XS_TP_K_TILE | XS_TP_K_PUSH | XS_TP_K_REDUCE | XS_TP_K_DEFER | XS_TP_K_SPREAD | \
                  XS_TP_K_SPLIT)

typedef struct {
    xs_tp_task *v;
    int n, cap;
} tp_list;

static inline int tp_list_push(tp_list *l, xs_tp_task x)
{
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 1024;
        xs_tp_task *nv = (xs_tp_task *)realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = x;
    return 0;
}

static inline xs_tp_task tp_mk_tile(int g, int tm, int tn)
{
    xs_tp_task x;
    memset(&x, 0, sizeof x);
    x.kind = XS_TP_K_TILE, x.gemm = g, x.tm = tm, x.tn = tn;
    return x;
}

static inline xs_tp_task tp_mk_push(int r, int c)
{
    xs_tp_task x;
    memset(&x, 0, sizeof x);
    x.kind = XS_TP_K_PUSH, x.push_rank = r, x.push_chunk = c;
    return x;
}

static inline xs_tp_task tp_mk_reduce(int t_own)
{
    xs_tp_task x;
    memset(&x, 0, sizeof x);
    x.kind = XS_TP_K_REDUCE, x.red_t = t_own;
    return x;
}

/* Tiles of GEMM g over row blocks [rb0, rb1) in grouped raster order: groups of 8 row blocks,
 * column-major within a group, so that tiles running together share A and B panels in L2.
 * -1: out of host memory. */
int tp_raster(tp_list *l, int g, int rb0, int rb1, int tiles_n);

/* A split tile's parts: the last one carries the tile's epilogue (bytes, signal). */
static inline int tp_split_last(const xs_tp_task *x)
{
    return !(x->kind & XS_TP_K_SPLIT) || XS_TP_SPLIT_PART(x) == XS_TP_SPLIT_PARTS(x) - 1;
}

/* Remote bytes of a task: reduce-scatter tiles to another owner (a split tile's at its last
 * part), pushes. */
static inline double tp_task_bytes(const xs_tp_plan *pl, const xs_tp_task *x)
{
    const xs_tp_info *in = &pl->in;
    double b = 0;
    if ((x->kind & XS_TP_K_TILE) && x->gemm == in->rs_gemm && tp_split_last(x)) {
        const int owner = x->tm * XS_TP_BM / in->rs_rows;
        if (owner != pl->me) {
            const int n0 = x->tn * XS_TP_BN;
            const int cols = in->gn[x->gemm] - n0 < XS_TP_BN ? in->gn[x->gemm] - n0 : XS_TP_BN;
            b += (double)XS_TP_BM * cols * 2;
        }
    }
    if (x->kind & XS_TP_K_PUSH) {
        const double rest = (double)in->shard_bytes - (double)x->push_chunk * XS_TP_CHUNK;
        const double want = (double)(x->push_n > 1 ? x->push_n : 1) * XS_TP_CHUNK;
        b += rest < want ? rest : want;
    }
    return b;
}

/* The last chunk of shard s that GEMM 0 tile row tm needs (all-gathered A; s = tm's shard). */
static inline int tp_ag_last_chunk(const xs_tp_info *in, int tm)
{
    const int s = tm * XS_TP_BM / in->rs_rows;
    const double row_bytes = (double)in->ag_k * 2;
    double hi = ((double)(tm * XS_TP_BM - s * in->rs_rows) + XS_TP_BM) * row_bytes;
    if (hi > (double)in->shard_bytes)
        hi = (double)in->shard_bytes;
    return (int)((hi - 1) / XS_TP_CHUNK);
}

/* Compute (ns) of a task on its CTA, from measured costs; a push riding on a tile adds none
 * (its issue is what the model adds); a split part its share of the tile's k-tiles. */
static inline double tp_task_cost(const xs_tp_costs *c, const xs_tp_task *x)
{
    double ns = 0;
    if (x->kind & XS_TP_K_SPLIT)
        ns += c->tile_ns[x->gemm] / XS_TP_SPLIT_PARTS(x);
    else if (x->kind & XS_TP_K_TILE)
        ns += c->tile_ns[x->gemm];
    else if (x->kind & XS_TP_K_PUSH)
        ns += c->push_ns;
    if (x->kind & XS_TP_K_REDUCE)
        ns += c->reduce_ns;
    return ns;
}

/* The compute CTAs of a slot's order: those it was built for. */
static inline int tp_slot_grid(const xs_tp_plan *pl, int slot)
{
    return pl->grid - pl->scour[slot];
}

/* Store list l in slot (taking it over, freed on failure) as an order for grid - cour compute
 * CTAs, with the couriers' walk: their pushes, then the list positions of the remote
 * reduce-scatter tiles, increasing (production order). XS_EINVAL for a bad slot, XS_ENOMEM. */
xs_status tp_store_order(xs_tp_plan *pl, int slot, tp_list *l, int cour);
/* Split the remote reduce-scatter tiles at the head of list l in k-parts (xs_tp_pace.split = S0
 * for G compute CTAs; tp_order.c). -1: out of memory. */
int tp_split_head(const xs_tp_plan *pl, tp_list *l, int G, int S0);

/* xs_tp_predict; with_ideal 0 leaves ideal_ns NAN (the ranking reads model_ns alone). */
xs_status tp_predict(const xs_tp_plan *pl, int slot, const xs_profile *p, const xs_tp_costs *c,
                     int with_plan, int with_ideal, xs_tp_pred *out);

/* One candidate of a ranking that only wants the best (xs_tp_predict_candidates, pred NULL):
 * its schedule, a lower bound on its prediction, and the prediction once simulated. */
typedef struct {
    xs_schedule sc;     /* the order's schedule (empty for a courier order or no rows) */
    double lead;        /* compute before its first row (ns) */
    double lb;          /* pred >= lb (ns; the prediction itself once done) */
    double pred;        /* xs_tp_predict's model_ns, once done */
    int done;
} tp_rank_item;
/* The order in slot: its schedule (lb 0); courier orders and orders with no rows: their
 * prediction at once. Free with tp_rank_free. */
xs_status tp_rank_prep(const xs_tp_plan *pl, int slot, const xs_profile *p, const xs_tp_costs *c,
                       tp_rank_item *x);
/* The item's lower bound (x->lb): the unlimited stage's makespan, the drain of each row suffix
 * at R from its earliest window (tp_model.c tp_bound). */
xs_status tp_rank_bound(const xs_profile *p, tp_rank_item *x);
/* Simulate the item's schedule: x->pred (what xs_tp_predict's model_ns is). */
xs_status tp_rank_finish(const xs_profile *p, tp_rank_item *x);
void tp_rank_free(tp_rank_item *x);

#endif /* XSTAGE_TP_PLAN_H */
