// SPDX-License-Identifier: Apache-2.0
/*
 * tp_check.c - the invariants of a TP order (include/xstage_tp.h xs_tp_order_check), on the CPU:
 * every task's fields in range, every tile, push and reduction exactly once, every dependency on
 * an earlier task of the list, streamed stores and split parts only where the kernel can run
 * them. With these, every CTA resident and taking its tasks in list order, the persistent kernel
 * cannot deadlock (docs/TP.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_plan.h"

/* One check of one slot's list: the positions of everything seen so far and the first
 * violation. */
typedef struct {
    const xs_tp_plan *pl;
    const xs_tp_info *in;
    const xs_tp_task *v;
    int slot, n, G, P, me, rbpr;
    size_t nt0, nt1;
    int *pos0, *pos1, *posp, *posr; /* list position of every tile, push, reduction; -1 unseen */
    int *split_seen;   /* split scratch slots: -1 free, the task of the part that writes it, -2
                          consumed by its tile's last part */
    int nss;
    char why[200];     /* the first violation, "" while none */
} tp_chk;

#define TP_BAD(...)                                                                             \
    do {                                                                                        \
        if (!k->why[0])                                                                         \
            snprintf(k->why, sizeof k->why, __VA_ARGS__);                                       \
    } while (0)

/* A split part at task i (tile of GEMM g, its position slot *slotp): parts 0 .. S-1 of one tile,
 * each once, the last one last (the tile's position: its epilogue); every part's scratch slot
 * inside the launch's. -1: stop the scan; 1: an earlier part, nothing more to check; 0: the last
 * part, checked as its tile. */
static int chk_split(tp_chk *k, int i, const xs_tp_task *x, int g, const int *slotp)
{
    const xs_tp_info *in = k->in;
    const xs_tp_task *v = k->v;
    const int part = XS_TP_SPLIT_PART(x), S = XS_TP_SPLIT_PARTS(x);
    const int slot0 = XS_TP_SPLIT_SLOT(x);
    const int KT = (in->gk[g] + XS_TP_SPLIT_BK - 1) / XS_TP_SPLIT_BK;
    if (S < 2 || S > XS_TP_SPLIT_MAX || part < 0 || part >= S) {
        TP_BAD("task %d: split part %d of %d parts (2..%d)", i, part, S, XS_TP_SPLIT_MAX);
        return -1;
    }
    if (k->pl->scour[k->slot] == 0 || g != in->rs_gemm || in->ngemm != 1)
        TP_BAD("task %d: a split tile outside a gemm_rs order with couriers", i);
    else if (KT < S)
        TP_BAD("task %d: a tile of %d k-tiles split in %d parts", i, KT, S);
    else if (slot0 < 0 || slot0 + S - 1 > XS_TP_SPLIT_SLOTS(k->pl->grid))
        TP_BAD("task %d: split scratch slots %d..%d outside 0..%d", i, slot0, slot0 + S - 2,
               XS_TP_SPLIT_SLOTS(k->pl->grid) - 1);
    else if (part < S - 1) {
        /* an earlier part: the last one must follow (checked when it comes) */
        if (*slotp >= 0)
            TP_BAD("task %d: a part of tile (GEMM %d, %d, %d) after its last part (task %d)", i,
                   g, x->tm, x->tn, *slotp);
        if (k->split_seen[(size_t)slot0 + part] != -1)
            TP_BAD("task %d: split scratch slot %d used twice", i, slot0 + part);
        else
            k->split_seen[(size_t)slot0 + part] = i;
        return 1;
    } else {
        /* the last part: every earlier part of the same tile is before it */
        for (int q = 0; q < S - 1 && !k->why[0]; q++) {
            const int at = k->split_seen[(size_t)slot0 + q];
            if (at < 0 || v[at].gemm != g || v[at].tm != x->tm || v[at].tn != x->tn ||
                XS_TP_SPLIT_PARTS(&v[at]) != S || XS_TP_SPLIT_PART(&v[at]) != q)
                TP_BAD("task %d: the last part of tile (GEMM %d, %d, %d) without its part %d "
                       "before it (scratch slot %d)", i, g, x->tm, x->tn, q, slot0 + q);
            else
                k->split_seen[(size_t)slot0 + q] = -2; /* consumed */
        }
    }
    return 0;
}

/* The tile part of task i: in range, once, and its stream mark on a remote tile followed by a
 * tile of its CTA. -1: stop the scan; 1: a split part with nothing more to check. */
static int chk_tile(tp_chk *k, int i, const xs_tp_task *x)
{
    const xs_tp_info *in = k->in;
    const int g = x->gemm;
    if (g < 0 || g >= in->ngemm || x->tm < 0 || x->tm >= in->tiles_m || x->tn < 0 ||
        x->tn >= in->tiles_n[g]) {
        TP_BAD("task %d: tile (GEMM %d, %d, %d) outside the problem", i, g, x->tm, x->tn);
        return -1;
    }
    int *slotp = (g == 0 ? k->pos0 : k->pos1) + (size_t)x->tm * in->tiles_n[g] + x->tn;
    if (x->kind & XS_TP_K_SPLIT) {
        const int r = chk_split(k, i, x, g, slotp);
        if (r)
            return r;
    }
    if (*slotp >= 0)
        TP_BAD("task %d: tile (GEMM %d, %d, %d) also at task %d", i, g, x->tm, x->tn, *slotp);
    *slotp = i;
    if (x->kind & XS_TP_K_DEFER) {
        if (g != in->rs_gemm || x->tm / k->rbpr == k->me)
            TP_BAD("task %d: deferred stores on a tile that is not a remote owner's", i);
        else if (i + k->G >= k->n || !(k->v[i + k->G].kind & XS_TP_K_TILE))
            TP_BAD("task %d: deferred tile not followed by a tile of its CTA", i);
    }
    return 0;
}

/* The push and reduction parts of task i. -1: stop the scan. */
static int chk_push_reduce(tp_chk *k, int i, const xs_tp_task *x)
{
    const xs_tp_info *in = k->in;
    if (x->kind & XS_TP_K_PUSH) {
        const int pn = x->push_n > 1 ? x->push_n : 1;
        if (!in->ag || x->push_rank < 0 || x->push_rank >= k->P || x->push_rank == k->me ||
            x->push_chunk < 0 || x->push_n < 0 || pn > XS_TP_PUSH_MAX ||
            x->push_chunk + pn > in->ag_chunks) {
            TP_BAD("task %d: push (rank %d, chunks %d..%d) outside the problem", i, x->push_rank,
                   x->push_chunk, x->push_chunk + pn - 1);
            return -1;
        }
        for (int q = 0; q < pn; q++) {
            int *slotp = k->posp + (size_t)x->push_rank * in->ag_chunks + x->push_chunk + q;
            if (*slotp >= 0)
                TP_BAD("task %d: push (rank %d, chunk %d) also at task %d", i, x->push_rank,
                       x->push_chunk + q, *slotp);
            *slotp = i;
        }
        if ((x->kind & XS_TP_K_SPREAD) && !(x->kind & XS_TP_K_TILE))
            TP_BAD("task %d: a streamed push with no tile to ride on", i);
    } else if (x->kind & XS_TP_K_SPREAD) {
        TP_BAD("task %d: streamed stores without a push", i);
    } else if (x->push_n) {
        TP_BAD("task %d: %d push chunks without a push", i, x->push_n);
    }
    if (x->kind & XS_TP_K_REDUCE) {
        if (x->red_t < 0 || x->red_t >= in->reduce_tasks) {
            TP_BAD("task %d: reduction of tile %d outside 0..%d", i, x->red_t,
                   in->reduce_tasks - 1);
            return -1;
        }
        if (k->posr[x->red_t] >= 0)
            TP_BAD("task %d: reduction of tile %d also at task %d", i, x->red_t, k->posr[x->red_t]);
        k->posr[x->red_t] = i;
    }
    return 0;
}

/* Task by task, until the first violation that stops the scan. */
static void chk_tasks(tp_chk *k)
{
    for (int i = 0; i < k->n && !k->why[0]; i++) {
        const xs_tp_task *x = &k->v[i];
        if (x->kind & ~TP_K_ALL)
            TP_BAD("task %d: unknown kind bits %#x", i, x->kind);
        if ((x->kind & XS_TP_K_SPLIT) &&
            (!(x->kind & XS_TP_K_TILE) ||
             (x->kind & (XS_TP_K_PUSH | XS_TP_K_DEFER | XS_TP_K_SPREAD)))) {
            TP_BAD("task %d: a split part must be a tile with nothing else", i);
            break;
        }
        if ((x->kind & XS_TP_K_TILE) && (x->kind & XS_TP_K_REDUCE))
            TP_BAD("task %d: a tile and a reduction in one task", i);
        if (x->kind & XS_TP_K_TILE) {
            const int r = chk_tile(k, i, x);
            if (r < 0)
                break;
            if (r > 0)
                continue;
        } else if (x->kind & XS_TP_K_DEFER) {
            TP_BAD("task %d: deferred stores without a tile", i);
        }
        if (x->kind & XS_TP_K_SPLIT)
            continue; /* its push fields are the split's */
        if (chk_push_reduce(k, i, x) < 0)
            break;
    }
    for (int q = 0; q < k->nss && !k->why[0]; q++)
        if (k->split_seen[q] >= 0)
            TP_BAD("task %d: split part without the last part of its tile after it",
                   k->split_seen[q]);
}

/* Every tile, push (without couriers: with them the walk pushes what the list does not) and
 * reduction once. */
static void chk_once(tp_chk *k)
{
    const xs_tp_info *in = k->in;
    for (size_t q = 0; q < k->nt0 + k->nt1 && !k->why[0]; q++)
        if (k->pos0[q] < 0) {
            const int g = q < k->nt0 ? 0 : 1, r = (int)(g ? q - k->nt0 : q);
            TP_BAD("tile (GEMM %d, %d, %d) is missing", g, r / in->tiles_n[g], r % in->tiles_n[g]);
        }
    for (int r = 0; r < k->P && in->ag && k->pl->scour[k->slot] == 0 && !k->why[0]; r++)
        for (int c = 0; c < in->ag_chunks && r != k->me && !k->why[0]; c++)
            if (k->posp[(size_t)r * in->ag_chunks + c] < 0)
                TP_BAD("push of chunk %d to rank %d is missing", c, r);
    for (int q = 0; q < in->reduce_tasks && !k->why[0]; q++)
        if (k->posr[q] < 0)
            TP_BAD("reduction of tile %d is missing", q);
}

/* Dependencies only on earlier tasks: an mlp GEMM 1 tile after every GEMM 0 tile of its row
 * block; an all-gathered tile on shard s after this rank's pushes of the same chunks to the
 * mirror rank (the kernel's wait with virtual peers; a symmetric peer's order is the same list;
 * a chunk the couriers push has no position (-1): they push before they carry any tile); a
 * reduction after this rank's own tile that it sums. */
static void chk_deps(tp_chk *k)
{
    const xs_tp_info *in = k->in;
    const int rbpr = k->rbpr, me = k->me, P = k->P;
    if (in->ngemm > 1)
        for (int tm = 0; tm < in->tiles_m && !k->why[0]; tm++) {
            int last0 = -1, first1 = k->n;
            for (int tn = 0; tn < in->tiles_n[0]; tn++)
                last0 = k->pos0[(size_t)tm * in->tiles_n[0] + tn] > last0
                            ? k->pos0[(size_t)tm * in->tiles_n[0] + tn]
                            : last0;
            for (int tn = 0; tn < in->tiles_n[1]; tn++)
                first1 = k->pos1[(size_t)tm * in->tiles_n[1] + tn] < first1
                             ? k->pos1[(size_t)tm * in->tiles_n[1] + tn]
                             : first1;
            if (first1 <= last0)
                TP_BAD("row block %d: GEMM 2 tile at task %d before the last GEMM 1 tile (task %d)",
                       tm, first1, last0);
        }
    if (in->ag && P > 1)
        for (int tm = 0; tm < in->tiles_m && !k->why[0]; tm++) {
            const int s = tm / rbpr;
            if (s == me)
                continue;
            const int d = xs_tp_mirror(me, s, P), c1 = tp_ag_last_chunk(in, tm);
            const int c0 = (int)((double)(tm - s * rbpr) * XS_TP_BM * in->ag_k * 2 / XS_TP_CHUNK);
            int lastp = -1;
            for (int c = c0; c <= c1; c++)
                lastp = k->posp[(size_t)d * in->ag_chunks + c] > lastp
                            ? k->posp[(size_t)d * in->ag_chunks + c]
                            : lastp;
            for (int tn = 0; tn < in->tiles_n[0] && !k->why[0]; tn++) {
                const int pt = k->pos0[(size_t)tm * in->tiles_n[0] + tn];
                if (pt <= lastp)
                    TP_BAD("tile (GEMM 0, %d, %d) at task %d before the push of its chunks to "
                           "rank %d (task %d)", tm, tn, pt, d, lastp);
            }
        }
    if (in->rs_gemm >= 0) {
        const int *prs = in->rs_gemm == 0 ? k->pos0 : k->pos1, tn_rs = in->tiles_n[in->rs_gemm];
        for (int q = 0; q < in->reduce_tasks && !k->why[0]; q++) {
            const int tm = me * rbpr + q / tn_rs, tn = q % tn_rs;
            const int src = prs[(size_t)tm * tn_rs + tn];
            if (src >= k->posr[q])
                TP_BAD("reduction of own tile %d at task %d before the tile itself (task %d)", q,
                       k->posr[q], src);
        }
    }
}

#undef TP_BAD

xs_status xs_tp_order_check(const xs_tp_plan *pl, int slot)
{
    if (slot < 0 || slot >= XS_TP_SLOTS || !pl->ntasks[slot])
        return xs_seterr(XS_EINVAL, "tp: order slot %d is empty", slot);
    static const tp_chk zero;
    tp_chk chk = zero, *k = &chk;
    const xs_tp_info *in = &pl->in;
    k->pl = pl;
    k->in = in;
    k->v = pl->tasks[slot];
    k->slot = slot;
    k->n = pl->ntasks[slot];
    k->G = tp_slot_grid(pl, slot);
    k->P = pl->P;
    k->me = pl->me;
    k->rbpr = in->rs_rows / XS_TP_BM;
    k->nt0 = (size_t)in->tiles[0];
    k->nt1 = in->ngemm > 1 ? (size_t)in->tiles[1] : 0;
    const size_t npu = (size_t)k->P * (in->ag_chunks > 0 ? in->ag_chunks : 1);
    const size_t npos = k->nt0 + k->nt1 + npu + (size_t)in->reduce_tasks;
    int *pos = (int *)malloc((npos + 1) * sizeof(int));
    if (!pos)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory checking an order");
    k->pos0 = pos, k->pos1 = pos + k->nt0, k->posp = k->pos1 + k->nt1, k->posr = k->posp + npu;
    for (size_t i = 0; i < npos; i++)
        pos[i] = -1;
    k->nss = XS_TP_SPLIT_SLOTS(pl->grid);
    k->split_seen = (int *)malloc((size_t)k->nss * sizeof(int));
    if (!k->split_seen) {
        free(pos);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory checking an order");
    }
    for (int q = 0; q < k->nss; q++)
        k->split_seen[q] = -1;
    chk_tasks(k);
    free(k->split_seen);
    chk_once(k);
    chk_deps(k);
    free(pos);
    if (k->why[0])
        return xs_seterr(XS_EINVAL, "tp %s m=%d n=%d k=%d P=%d rank %d grid %d, slot %d: %s",
                         xs_tp_op_name(pl->s.op), pl->s.m, pl->s.n, pl->s.k, k->P, k->me, k->G,
                         slot, k->why);
    return XS_OK;
}
