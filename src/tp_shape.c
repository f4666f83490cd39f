// SPDX-License-Identifier: Apache-2.0
/*
 * tp_shape.c - the shaped TP order (include/xstage_tp.h xs_tp_order_shaped, xs_tp_pace): steps
 * of G tasks filled one after the other from queues of pushes, remote reduce-scatter tiles,
 * local GEMM tiles and this rank's own tiles, the remote bytes of each step held to a steady
 * pace (docs/TP.md "Orders: naive and shaped"). A ready-task queue keeps every dependency on an earlier
 * step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_plan.h"

/* A queue of candidate tasks with a taken mark, scanned from its first untaken entry. While the
 * readiness of its entries stays the same (one epoch of tp_ready: a step's pass; entries are
 * only taken meanwhile), a scan resumes where the last one stopped: the entries before it were
 * taken or not ready, and still are. So a step scans each queue about once, not once per task. */
typedef struct {
    tp_list l;
    unsigned char *taken;
    int front, left;
    unsigned memo_epoch; /* the tp_ready epoch of memo_pos (0: none) */
    int memo_pos;        /* the last scan's stop in that epoch */
} tp_queue;

static int queue_seal(tp_queue *q)
{
    q->taken = (unsigned char *)calloc((size_t)(q->l.n ? q->l.n : 1), 1);
    q->front = 0;
    q->memo_epoch = 0;
    q->memo_pos = 0;
    q->left = q->l.n;
    return q->taken ? 0 : -1;
}

static void queue_free(tp_queue *q)
{
    free(q->l.v);
    free(q->taken);
}

/* Readiness while an order is built. mlp: GEMM 2 tiles of row block tm wait for every GEMM 1
 * tile of it, `lead` steps. All-gather: a GEMM 1 tile on another rank's shard s waits, `ag_lead`
 * steps, for this rank's pushes of the same chunks to the mirror rank (what the kernel waits for
 * with virtual peers, tp_args.ag_sym; a symmetric peer's chunks arrive in the same order).
 * Chunks of one destination are placed in increasing order, so "chunks 0..c placed" is
 * placed[r] > c and the last of them went at pstep[r][c]. */
typedef struct {
    const int *done;      /* GEMM 1 tiles placed per row block (mlp), or NULL */
    const int *last_step; /* step of the last of them */
    int need;             /* tiles per row block */
    const int *placed;    /* [P] chunks placed per destination (all-gather), or NULL */
    const int *pstep;     /* [P][ag_chunks] step of each placed push */
    const int *ag_at;     /* [tiles_m] the push a GEMM 0 tile row waits for last: destination
                           * * ag_chunks + chunk (tp_ag_last_chunk to the mirror rank), -1 for
                           * this rank's own shard */
    const xs_tp_info *in;
    int me, P;
    int step, lead, ag_lead;
    unsigned epoch;       /* changes with step, lead or ag_lead, and with the placed state */
} tp_ready;

static int is_ready(const xs_tp_task *x, const tp_ready *r)
{
    if (!r || !(x->kind & XS_TP_K_TILE))
        return 1;
    if (x->gemm == 1 && r->done)
        return r->done[x->tm] == r->need && r->last_step[x->tm] <= r->step - r->lead;
    if (x->gemm == 0 && r->placed) {
        const int at = r->ag_at[x->tm];
        if (at < 0)
            return 1;
        const int nch = r->in->ag_chunks, d = at / nch, c = at - d * nch;
        return r->placed[d] > c && r->pstep[at] <= r->step - r->ag_lead;
    }
    return 1;
}

/* Index of the first untaken ready entry, or -1. */
static int queue_find(tp_queue *q, const tp_ready *r)
{
    while (q->front < q->l.n && q->taken[q->front])
        q->front++;
    int i = q->front;
    if (r && q->memo_epoch == r->epoch && q->memo_pos > i)
        i = q->memo_pos;
    for (; i < q->l.n; i++)
        if (!q->taken[i] && is_ready(&q->l.v[i], r))
            break;
    if (r) {
        q->memo_epoch = r->epoch;
        q->memo_pos = i;
    }
    return i < q->l.n ? i : -1;
}

static xs_tp_task queue_take(tp_queue *q, int i)
{
    q->taken[i] = 1;
    q->left--;
    return q->l.v[i];
}

/* The state of one shaped build. */
typedef struct {
    const xs_tp_plan *pl;
    const xs_tp_info *in;
    const xs_tp_pace *pace;
    const xs_tp_costs *c;
    int P, me, G, rbpr;
    int cpush;               /* couriers push: no push in the list */
    tp_queue qp, qr, ql, qo; /* pushes, remote reduce-scatter tiles, local GEMM tiles, own
                                reduce-scatter tiles */
    int *done, *last_step;   /* GEMM 0 tiles placed per row block (mlp), step of the last */
    int *placed, *pstep;     /* chunks placed per destination, step of each placed push */
    int *pidx;               /* [P][ag_chunks] position in qp, or -1 */
    int *ag_at;              /* [tiles_m] tp_ready.ag_at */
    size_t nch;
    tp_list out;             /* the order */
    xs_tp_task *step, *riders; /* [G] one step's tasks and pushes */
    tp_ready rd;
    const tp_ready *rdp;     /* &rd where anything waits, else NULL */
    double rate, d_step, credit; /* remote bytes/ns of the pace, mean step ns, bytes of slack */
    double sent, rem_left, comp_left; /* bytes placed; bytes and compute (ns) left to place */
    int off_r, off_p;        /* rotation of remote tiles and riders over the CTAs */
} tp_shaper;

/* The queues' contents (-1: out of memory): remote reduce-scatter tiles (owners interleaved so
 * that tiles running together walk the same columns, or owner after owner), own ones, local
 * GEMM tiles in row groups interleaved over the shards. */
static int shape_tiles(tp_shaper *h)
{
    const xs_tp_info *in = h->in;
    const int P = h->P, me = h->me, rbpr = h->rbpr;
    int bad = 0;
    for (int g = 0; g < in->ngemm; g++) {
        if (g == in->rs_gemm) {
            /* per-owner rasters merged round robin over the other owners (ring: one after the
             * other) */
            tp_list per[XS_MAX_RANKS];
            memset(per, 0, sizeof per);
            for (int j = 1; j < P; j++)
                bad |= tp_raster(&per[j], g, ((me + j) % P) * rbpr, ((me + j) % P + 1) * rbpr,
                                 in->tiles_n[g]);
            const int each = rbpr * in->tiles_n[g];
            if (h->pace->ring) /* owner after owner: the naive order's raster */
                for (int j = 1; j < P; j++)
                    for (int i = 0; i < each && !bad; i++)
                        bad |= tp_list_push(&h->qr.l, per[j].v[i]);
            else
                for (int i = 0; i < each && !bad; i++)
                    for (int j = 1; j < P; j++)
                        bad |= tp_list_push(&h->qr.l, per[j].v[i]);
            for (int j = 1; j < P; j++)
                free(per[j].v);
            bad |= tp_raster(&h->qo.l, g, me * rbpr, (me + 1) * rbpr, in->tiles_n[g]);
        } else {
            /* row groups interleaved over the shards (ring order from this rank): every shard's
             * first rows come early (the pushes are chunk-major, so a shard's first chunks are
             * the first to arrive), and in the mlp, row blocks of every owner complete early,
             * so remote GEMM 2 tiles become available all along */
            const int gs = rbpr < 8 ? rbpr : 8, ng = (rbpr + gs - 1) / gs;
            /* this rank's group j runs ahead of the other shards' group j (its rows are there
             * from the start), and the last round ends with its own group, so the last remote
             * GEMM 2 row blocks complete while local work remains to hide their drain */
            for (int j = -1; j < ng; j++)
                for (int i = 1; i <= P; i++) {
                    const int r = (me + i) % P, jj = i == P ? j + 1 : j;
                    if (jj < 0 || jj >= ng)
                        continue;
                    const int lo = r * rbpr + jj * gs;
                    const int hi = lo + gs < (r + 1) * rbpr ? lo + gs : (r + 1) * rbpr;
                    bad |= tp_raster(&h->ql.l, g, lo, hi, in->tiles_n[g]);
                }
        }
    }
    return bad;
}

/* The push queue (-1: out of memory): pushes in the order the GEMM 1 tiles of other shards
 * consume the chunks (to the mirror rank, whose chunks a symmetric peer sends at the same time;
 * see is_ready): a shard of one row block needs all its chunks, so a chunk-major order would
 * complete no shard before the last chunk; with several row blocks per shard the order is row
 * group by row group. */
static int shape_pushes(tp_shaper *h)
{
    const xs_tp_info *in = h->in;
    const int P = h->P, me = h->me, rbpr = h->rbpr;
    int bad = 0;
    for (size_t q = 0; q < h->nch; q++)
        h->pidx[q] = -1;
    /* a tile row's chunks are queued at its first tile; its other tiles find them there */
    unsigned char *seen = (unsigned char *)calloc((size_t)(in->tiles_m > 0 ? in->tiles_m : 1), 1);
    if (!seen)
        return -1;
    for (int i = 0; i < h->ql.l.n && !bad; i++) {
        const xs_tp_task *x = &h->ql.l.v[i];
        const int s = x->tm / rbpr;
        if (x->gemm != 0 || s == me || seen[x->tm])
            continue;
        seen[x->tm] = 1;
        const int d = xs_tp_mirror(me, s, P), c1 = tp_ag_last_chunk(in, x->tm);
        const int c0 = (int)((double)(x->tm - s * rbpr) * XS_TP_BM * in->ag_k * 2 / XS_TP_CHUNK);
        for (int cc = c0; cc <= c1; cc++)
            if (h->pidx[(size_t)d * in->ag_chunks + cc] < 0) {
                h->pidx[(size_t)d * in->ag_chunks + cc] = h->qp.l.n;
                bad |= tp_list_push(&h->qp.l, tp_mk_push(d, cc));
            }
    }
    free(seen);
    for (int cc = 0; cc < in->ag_chunks && !bad; cc++) /* (none left: every chunk is needed) */
        for (int j = 1; j < P; j++)
            if (h->pidx[(size_t)((me + j) % P) * in->ag_chunks + cc] < 0) {
                h->pidx[(size_t)((me + j) % P) * in->ag_chunks + cc] = h->qp.l.n;
                bad |= tp_list_push(&h->qp.l, tp_mk_push((me + j) % P, cc));
            }
    return bad;
}

/* The pace: all remote bytes issued by `finish` of the estimated compute time. With couriers
 * pushing, their chunks' arrival steps. */
static void shape_pace(tp_shaper *h, const xs_profile *prof)
{
    const xs_tp_info *in = h->in;
    const xs_tp_pace *pace = h->pace;
    const int G = h->G;
    double remote = 0, compute = 0;
    for (int i = 0; i < h->qp.l.n && !h->cpush; i++)
        remote += tp_task_bytes(h->pl, &h->qp.l.v[i]);
    for (int i = 0; i < h->qr.l.n; i++) {
        remote += tp_task_bytes(h->pl, &h->qr.l.v[i]);
        compute += tp_task_cost(h->c, &h->qr.l.v[i]);
    }
    for (int i = 0; i < h->ql.l.n; i++)
        compute += tp_task_cost(h->c, &h->ql.l.v[i]);
    for (int i = 0; i < h->qo.l.n; i++)
        compute += tp_task_cost(h->c, &h->qo.l.v[i]);
    const int items = h->qr.l.n + h->ql.l.n + h->qo.l.n;
    const int steps_est = (items + G - 1) / G > 0 ? (items + G - 1) / G : 1;
    const double d_step = compute / G / steps_est; /* mean step duration, ns */
    h->d_step = d_step;
    h->rate = remote / (pace->finish * (compute / G > 1 ? compute / G : 1));
    const double tile_b = (double)XS_TP_BM * XS_TP_BN * 2;
    h->credit = 0.5 * (h->qp.l.n && !h->cpush ? (double)XS_TP_CHUNK : tile_b);
    h->rem_left = remote;
    h->comp_left = compute;
    if (h->cpush) {
        /* the couriers push every chunk from the kernel's start, in qp's order (the order
         * the GEMM 0 tiles below need them, which the walk's order by need then follows),
         * at the link's rate (R, or their pace where lower): chunk (d, c) arrives in step
         * floor(bytes up to it / rate / d_step). No rate in the profile: all at step 0.
         * The queue is then empty: nothing is placed as a push. */
        double R = prof && prof->drain_bytes_per_ns > 0 ? prof->drain_bytes_per_ns : 0;
        if (h->pl->cour_pace > 0 && (R == 0 || h->pl->cour_pace < R))
            R = h->pl->cour_pace;
        double pb = 0;
        for (int i = 0; i < h->qp.l.n; i++) {
            const xs_tp_task *x = &h->qp.l.v[i];
            pb += tp_task_bytes(h->pl, x);
            const double st_ = R > 0 && d_step > 0 ? pb / R / d_step : 0;
            h->pstep[(size_t)x->push_rank * in->ag_chunks + x->push_chunk] =
                st_ < 1e9 ? (int)st_ : 1000000000;
            h->qp.taken[i] = 1;
        }
        h->qp.left = 0;
        for (int r = 0; r < h->P; r++)
            h->placed[r] = r == h->me ? 0 : in->ag_chunks;
    }
    tp_ready *rd = &h->rd;
    memset(rd, 0, sizeof *rd);
    rd->done = in->ngemm > 1 ? h->done : NULL;
    rd->last_step = h->last_step;
    rd->need = in->tiles_n[0];
    rd->placed = in->ag && h->P > 1 ? h->placed : NULL;
    rd->pstep = h->pstep;
    rd->ag_at = h->ag_at;
    rd->in = in;
    rd->me = h->me, rd->P = h->P;
    h->rdp = rd->done || rd->placed ? rd : NULL;
}

/* Step s's byte budget: the steady rate plus credit, less what went out already, limited by the
 * burst factor; at least what must still drain while the compute left runs (one step before
 * its end: the last step's local work hides the last drain); at most the cap. */
static double shape_budget(const tp_shaper *h, int s)
{
    const xs_tp_pace *pace = h->pace;
    const double rate = h->rate, d_step = h->d_step, credit = h->credit;
    double budget = rate * (s + 1) * d_step + credit - h->sent;
    if (pace->burst > 0 && budget > pace->burst * rate * d_step + credit)
        budget = pace->burst * rate * d_step + credit; /* no catching up in one burst */
    const double cover = h->comp_left / h->G - d_step;
    const double need = cover > d_step ? h->rem_left * d_step / cover : h->rem_left;
    if (budget < need)
        budget = need;
    if (pace->cap_bytes > 0 && budget > pace->cap_bytes)
        budget = pace->cap_bytes;
    return budget;
}

/* Pushes ride on this step's tasks, within the budget; while more chunks are left than tiles to
 * carry them (spread 2: always), a streamed rider takes up to XS_TP_PUSH_MAX consecutive chunks
 * of one destination (else the rest would go as bursts of pushes alone after the tiles). */
static void shape_riders(tp_shaper *h, double budget, double *used, int *np, int nrem)
{
    const xs_tp_info *in = h->in;
    tp_queue *qp = &h->qp;
    while (*np < h->G) {
        int i = queue_find(qp, NULL);
        if (i < 0)
            break;
        const double b = tp_task_bytes(h->pl, &qp->l.v[i]);
        if (*used + b > budget && !(*np == 0 && nrem == 0 && budget > 0.5 * b))
            break;
        h->riders[(*np)++] = queue_take(qp, i);
        *used += b;
        xs_tp_task *rd_ = &h->riders[*np - 1];
        const int multi = h->pace->spread == 2 ||
                          (h->pace->spread && qp->left > h->qr.left + h->ql.left + h->qo.left);
        for (int k = 1; multi && k < XS_TP_PUSH_MAX; k++) {
            const int c2 = rd_->push_chunk + k;
            if (c2 >= in->ag_chunks)
                break;
            const int i2 = h->pidx[(size_t)rd_->push_rank * in->ag_chunks + c2];
            if (i2 < 0 || qp->taken[i2])
                break;
            const double b2 = tp_task_bytes(h->pl, &qp->l.v[i2]);
            if (*used + b2 > budget)
                break;
            queue_take(qp, i2);
            rd_->push_n = k + 1;
            *used += b2;
        }
    }
}

/* Fill step s: riders and tasks; *n tasks (the first *nr of them the remote ones that rotate),
 * *np riders, *used bytes. A second pass relaxes the leads when nothing was ready. */
static void shape_fill(tp_shaper *h, int s, int *n_, int *nr_, int *np_, double *used_)
{
    const int G = h->G;
    const double budget = shape_budget(h, s);
    double used = 0;
    int n = 0, nr = 0, np = 0, nrem = 0;
    tp_ready *rd = &h->rd;
    rd->step = s;
    rd->lead = h->pace->lead;
    rd->ag_lead = h->pace->lead > 1 ? h->pace->lead : 1;
    rd->epoch++; /* a new step: steps placed since the last one changed readiness */
    for (int pass = 0; pass < 2 && n == 0 && np == 0; pass++) {
        /* 1. pushes riding on this step's tasks */
        shape_riders(h, budget, &used, &np, nrem);
        /* 2. remote tiles, within the budget */
        while (n < G) {
            int i = queue_find(&h->qr, h->rdp);
            if (i < 0)
                break;
            const double b = tp_task_bytes(h->pl, &h->qr.l.v[i]);
            if (used + b > budget && !(np == 0 && nrem == 0 && budget > 0.5 * b))
                break;
            h->step[n++] = queue_take(&h->qr, i);
            used += b;
            nrem++;
        }
        nr = n;
        /* 3. local work: GEMM 0 tiles, then this rank's own reduce-scatter tiles */
        while (n < G) {
            int i = queue_find(&h->ql, h->rdp);
            if (i < 0)
                i = -2;
            if (i == -2) {
                i = queue_find(&h->qo, h->rdp);
                if (i < 0)
                    break;
                h->step[n++] = queue_take(&h->qo, i);
            } else {
                h->step[n++] = queue_take(&h->ql, i);
            }
        }
        /* 4. no local work left: remote tiles beyond the budget (drain-bound) */
        while (n < G) {
            int i = queue_find(&h->qr, h->rdp);
            if (i < 0)
                break;
            used += tp_task_bytes(h->pl, &h->qr.l.v[i]);
            h->step[n++] = queue_take(&h->qr, i);
            nr = n;
        }
        /* 5. nothing but pushes left, or nothing else ready (tiles waiting for their
         * all-gathered chunks): pushes alone */
        if (h->qr.left + h->ql.left + h->qo.left == 0 || (pass == 1 && n == 0))
            while (n + np < G) {
                int i = queue_find(&h->qp, NULL);
                if (i < 0)
                    break;
                used += tp_task_bytes(h->pl, &h->qp.l.v[i]);
                h->riders[np++] = queue_take(&h->qp, i);
            }
        /* nothing was ready (waiting on the lead): the next pass relaxes it */
        rd->lead = 0;
        rd->ag_lead = 1; /* a push in an earlier step, at least */
        if (h->cpush) /* the couriers' pushes are on their way: the CTAs will wait */
            rd->ag_lead = -1000000000;
        rd->epoch++;
    }
    *n_ = n, *nr_ = nr, *np_ = np, *used_ = used;
}

/* Place step s's n tasks and np riders (-1: out of memory): remote tiles rotate over the CTAs
 * step by step; pushes ride from their own rotating offset; a push with no task to ride on is a
 * task of its own. Then the bookkeeping of what was placed. */
static int shape_place(tp_shaper *h, int s, int n, int nr, int np, double used)
{
    const xs_tp_info *in = h->in;
    const int G = h->G;
    const int base = (int)h->out.n;
    for (int j = 0; j < G; j++) {
        xs_tp_task x;
        memset(&x, 0, sizeof x);
        if (tp_list_push(&h->out, x))
            return -1;
    }
    for (int j = 0; j < n; j++) {
        xs_tp_task x = h->step[j];
        if (h->pace->spread && x.gemm == in->rs_gemm && x.tm * XS_TP_BM / in->rs_rows != h->me)
            x.kind |= XS_TP_K_DEFER; /* kept only if the CTA's next task is a tile */
        h->out.v[base + (j + h->off_r) % G] = x;
    }
    for (int j = 0; j < np; j++) {
        xs_tp_task *x = &h->out.v[base + (j + h->off_p) % G];
        x->kind |= XS_TP_K_PUSH;
        if (h->pace->spread && (x->kind & XS_TP_K_TILE))
            x->kind |= XS_TP_K_SPREAD;
        x->push_rank = h->riders[j].push_rank;
        x->push_chunk = h->riders[j].push_chunk;
        x->push_n = h->riders[j].push_n;
    }
    h->off_r = (h->off_r + nr) % G;
    h->off_p = (h->off_p + np) % G;
    h->sent += used;
    for (int j = 0; j < np; j++) {
        const int r = h->riders[j].push_rank, pn = h->riders[j].push_n > 1 ? h->riders[j].push_n : 1;
        for (int k = 0; k < pn; k++)
            h->pstep[(size_t)r * in->ag_chunks + h->riders[j].push_chunk + k] = s;
        h->placed[r] += pn;
    }
    h->rem_left -= used;
    for (int j = 0; j < n; j++)
        h->comp_left -= tp_task_cost(h->c, &h->step[j]);
    for (int j = 0; j < n; j++)
        if (h->step[j].gemm == 0 && in->ngemm > 1) {
            h->done[h->step[j].tm]++;
            h->last_step[h->step[j].tm] = s;
        }
    return 0;
}

/* The steps, then the finishing touches: a deferred tile streams through the CTA's next task's
 * main loop, so the mark stays only where that task is a tile (else the stores would wait, then
 * go as one burst); the reductions last, packed. */
static xs_status shape_steps(tp_shaper *h)
{
    const int G = h->G;
    for (int s = 0; h->qp.left + h->qr.left + h->ql.left + h->qo.left > 0; s++) {
        int n, nr, np;
        double used;
        shape_fill(h, s, &n, &nr, &np, &used);
        if (n == 0 && np == 0)
            return xs_seterr(XS_EINVAL, "tp: shaping made no progress at step %d (internal)", s);
        if (shape_place(h, s, n, nr, np, used))
            return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    }
    tp_list *out = &h->out;
    for (int i = 0; i < out->n; i++)
        if ((out->v[i].kind & XS_TP_K_DEFER) &&
            (i + G >= out->n || !(out->v[i + G].kind & XS_TP_K_TILE)))
            out->v[i].kind &= ~XS_TP_K_DEFER;
    for (int i = 0; i < h->in->reduce_tasks; i++)
        if (tp_list_push(out, tp_mk_reduce(i)))
            return xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    return XS_OK;
}

static void shaper_free(tp_shaper *h)
{
    free(h->out.v);
    free(h->step);
    free(h->riders);
    free(h->done);
    free(h->last_step);
    free(h->placed);
    free(h->pstep);
    free(h->pidx);
    free(h->ag_at);
    queue_free(&h->qp);
    queue_free(&h->qr);
    queue_free(&h->ql);
    queue_free(&h->qo);
}

xs_status xs_tp_order_shaped(xs_tp_plan *pl, int slot, const xs_tp_pace *pace,
                             const xs_tp_costs *c, const xs_profile *prof)
{
    const xs_tp_info *in = &pl->in;
    /* built for the compute CTAs of the current courier count (xs_tp_plan_set_couriers) */
    const int P = pl->P, G = pl->grid - pl->couriers;
    if (!pace || !(pace->finish > 0 && pace->finish <= 1) || pace->lead < 0 ||
        !(pace->cap_bytes >= 0) || !(pace->burst >= 0) || pace->spread < 0 || pace->spread > 2 ||
        pace->ring < 0 || pace->ring > 1 || pace->split < 0 || pace->split > XS_TP_SPLIT_MAX)
        return xs_seterr(XS_EINVAL, "tp: pace finish must be in (0, 1], lead, burst and cap >= 0, "
                         "spread 0, 1 or 2, ring 0 or 1, split 0..%d", XS_TP_SPLIT_MAX);
    if (pace->split > 1 && (pl->couriers == 0 || pl->s.op != XS_TP_GEMM_RS || P < 2 || pace->spread))
        return xs_seterr(XS_EINVAL, "tp %s P=%d: split tiles (pace split %d) need a gemm_rs order "
                         "with couriers over P > 1 ranks and stored tiles (spread 0)",
                         xs_tp_op_name(pl->s.op), P, pace->split);
    if (!c || !(c->tile_ns[0] > 0) || (in->ngemm > 1 && !(c->tile_ns[1] > 0)))
        return xs_seterr(XS_EINVAL, "tp: shaping needs measured tile costs (a local run)");
    static const tp_shaper zero;
    tp_shaper sh = zero, *h = &sh;
    h->pl = pl, h->in = in, h->pace = pace, h->c = c;
    h->P = P, h->me = pl->me, h->G = G, h->rbpr = in->rs_rows / XS_TP_BM;
    /* couriers push (tp_order.c's walk): no push in the list; a GEMM 0 tile of another shard is
     * ready once the couriers' pushes of its chunks have crossed the link (shape_pace) */
    h->cpush = pl->couriers > 0 && in->ag && P > 1;
    h->done = (int *)calloc((size_t)in->tiles_m, sizeof(int));
    h->last_step = (int *)calloc((size_t)in->tiles_m, sizeof(int));
    h->placed = (int *)calloc((size_t)P, sizeof(int));
    h->pstep = (int *)calloc((size_t)P * (in->ag_chunks > 0 ? in->ag_chunks : 1), sizeof(int));
    h->nch = (size_t)P * (in->ag_chunks > 0 ? in->ag_chunks : 1);
    h->pidx = (int *)malloc(h->nch * sizeof(int));
    h->ag_at = (int *)malloc((size_t)(in->tiles_m > 0 ? in->tiles_m : 1) * sizeof(int));
    int bad = !h->done || !h->last_step || !h->placed || !h->pstep || !h->pidx || !h->ag_at;
    for (int tm = 0; !bad && tm < in->tiles_m; tm++) {
        const int s = tm * XS_TP_BM / in->rs_rows;
        h->ag_at[tm] = s == pl->me || !(in->ag && P > 1)
                           ? -1
                           : xs_tp_mirror(pl->me, s, P) * in->ag_chunks + tp_ag_last_chunk(in, tm);
    }
    if (!bad)
        bad |= shape_tiles(h);
    if (in->ag && P > 1 && !bad)
        bad |= shape_pushes(h);
    h->step = (xs_tp_task *)calloc((size_t)G, sizeof(xs_tp_task));
    h->riders = (xs_tp_task *)calloc((size_t)G, sizeof(xs_tp_task));
    bad |= !h->step || !h->riders;
    bad |= queue_seal(&h->qp) | queue_seal(&h->qr) | queue_seal(&h->ql) | queue_seal(&h->qo);
    xs_status st = XS_OK;
    if (bad)
        st = xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    if (st == XS_OK) {
        shape_pace(h, prof);
        st = shape_steps(h);
    }
    if (st == XS_OK && pace->split > 1 && tp_split_head(pl, &h->out, G, pace->split))
        st = xs_seterr(XS_ENOMEM, "tp: out of host memory for a task list");
    if (st == XS_OK) {
        st = tp_store_order(pl, slot, &h->out, pl->couriers);
        h->out.v = NULL;
    }
    shaper_free(h);
    return st;
}
