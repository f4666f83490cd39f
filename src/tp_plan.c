// SPDX-License-Identifier: Apache-2.0
/*
 * tp_plan.c - the CPU side of choosing a TP order and a TP configuration
 * (include/xstage_tp.h): public model widths and the default peer counts (where compute and
 * link traffic are of comparable size), the candidate sets of an engine and of courier
 * orders, the model's ranking of candidates, and a pace's short name. `bench tp` pilots what
 * these propose; nothing here touches a GPU.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tp_plan.h"

/* ---- model widths and default peers ------------------------------------------------------------ */

static const xs_tp_model tp_models[XS_TP_NMODELS] = {
    {"llama3-8b", 4096, 14336, {8192, 16384}},
    {"llama3-70b", 8192, 28672, {4096, 8192}},
    {"llama3-405b", 16384, 53248, {2048, 4096}},
};

const xs_tp_model *xs_tp_model_at(int i)
{
    return i >= 0 && i < XS_TP_NMODELS ? &tp_models[i] : NULL;
}

void xs_tp_model_nk(xs_tp_op op, const xs_tp_model *md, int *n, int *k)
{
    switch (op) {
    case XS_TP_GEMM_RS: *n = md->hidden, *k = md->inter; break;
    case XS_TP_AG_GEMM: *n = 2 * md->inter, *k = md->hidden; break;
    case XS_TP_MLP: *n = md->hidden, *k = md->inter; break;
    }
}

double xs_tp_balance(const xs_tp_shape *s, double drain_bytes_per_ns, double tflops)
{
    xs_tp_info in;
    if (xs_tp_info_of(s, &in) != XS_OK)
        return -1;
    const double bytes = in.ag_remote_bytes + in.rs_remote_bytes;
    if (!(bytes > 0))
        return -1;
    return (in.flops / (tflops * 1e3)) / (bytes / drain_bytes_per_ns);
}

int xs_tp_default_peers(xs_tp_op op, const xs_tp_model *md, int m, double drain, double tflops,
                        int want, int *out)
{
    static const int choices[] = {2, 4, 8, 16};
    enum { NCHOICES = (int)(sizeof choices / sizeof choices[0]) };
    int nn = 0, kk = 0, n = 0;
    double dist[NCHOICES];
    xs_tp_model_nk(op, md, &nn, &kk);
    for (int i = 0; i < NCHOICES; i++) {
        xs_tp_shape s = {op, m, nn, kk, choices[i]};
        const double b = xs_tp_balance(&s, drain, tflops);
        dist[i] = b > 0 ? fabs(log(b)) : INFINITY;
    }
    for (int k = 0; k < want; k++) {
        int best = -1;
        for (int i = 0; i < NCHOICES; i++)
            if (isfinite(dist[i]) && (best < 0 || dist[i] < dist[best]))
                best = i;
        if (best < 0)
            break;
        out[n++] = choices[best];
        dist[best] = INFINITY;
    }
    for (int i = 1; i < n; i++) /* increasing */
        for (int j = i; j > 0 && out[j] < out[j - 1]; j--) {
            const int x = out[j];
            out[j] = out[j - 1];
            out[j - 1] = x;
        }
    return n;
}

/* ---- candidate sets and their ranking ----------------------------------------------------------- */

void xs_tp_engine_candidates(int streams, xs_tp_pace *cand, int nc, int *usable)
{
    for (int i = 0; i < nc; i++) {
        usable[i] = streams || !cand[i].spread || cand[i].ring;
        if (!streams)
            cand[i].spread = 0;
    }
}

int xs_tp_courier_candidates(double cap_q, const int *splits, int nsplit, xs_tp_pace *cand,
                             int *usable, int *front, int *fsplit)
{
    int nc = xs_tp_candidates(cap_q, cand, XS_TP_NCAND);
    for (int i = 0; i < nc; i++) { /* the sm90 engine stores every tile */
        usable[i] = !cand[i].spread || cand[i].ring;
        cand[i].spread = 0;
    }
    xs_tp_pace_front(&cand[nc]);
    usable[nc++] = 1;
    *front = nc - 1;
    for (int v = 0; v < 3; v++)
        fsplit[v] = -1;
    for (int v = 0; v < nsplit && v < 3; v++) {
        cand[nc] = cand[*front];
        cand[nc].split = splits[v];
        usable[nc] = 1;
        fsplit[v] = nc++;
    }
    return nc;
}

/* Whether two prepared candidates predict the same: the same schedule and lead, bit for bit
 * (the prediction is a function of them alone). Courier orders and orders with no rows are not
 * compared (their predictions cost nothing). */
static int same_schedule(const tp_rank_item *x, const tp_rank_item *y)
{
    if (x->done || y->done || x->sc.nrows != y->sc.nrows ||
        memcmp(&x->lead, &y->lead, sizeof x->lead))
        return 0;
    for (int r = 0; r < x->sc.nrows; r++) {
        const xs_row *a = &x->sc.rows[r], *b = &y->sc.rows[r];
        if (a->producers != b->producers || a->bytes_per_producer != b->bytes_per_producer ||
            memcmp(&a->gap_ns, &b->gap_ns, sizeof a->gap_ns))
            return 0;
    }
    return 1;
}

xs_status xs_tp_predict_candidates(xs_tp_plan *pl, int slot, const xs_tp_pace *cand,
                                   const int *usable, int nc, const xs_tp_costs *c,
                                   const xs_profile *prof, double *pred, int *best)
{
    enum { NMAX = XS_TP_NCAND + 8 };
    *best = -1;
    if (nc > NMAX)
        return xs_seterr(XS_EINVAL, "tp: %d candidates, at most %d", nc, NMAX);
    tp_rank_item it[NMAX];
    int same[NMAX], idx[NMAX], n = 0, m = 0;
    xs_status st = XS_OK;
    /* every usable candidate built, checked and turned into its schedule; one whose schedule
     * an earlier candidate has predicts what that one does */
    for (int i = 0; i < nc; i++) {
        if (pred)
            pred[i] = INFINITY;
        same[i] = -1;
        if (!usable[i] || st != XS_OK)
            continue;
        st = xs_tp_order_shaped(pl, slot, &cand[i], c, prof);
        if (st == XS_OK)
            st = xs_tp_order_check(pl, slot);
        if (st == XS_OK)
            st = tp_rank_prep(pl, slot, prof, c, &it[i]);
        if (st != XS_OK)
            break;
        for (int k = 0; k < n && same[i] < 0; k++)
            if (same_schedule(&it[i], &it[idx[k]]))
                same[i] = idx[k];
        if (same[i] < 0)
            idx[n++] = i;
        else
            tp_rank_free(&it[i]);
        m++;
    }
    if (st == XS_OK && pred) {
        /* every prediction */
        for (int k = 0; k < n && st == XS_OK; k++)
            st = tp_rank_finish(prof, &it[idx[k]]);
        for (int i = 0; i < nc && st == XS_OK; i++) {
            if (!usable[i])
                continue;
            pred[i] = it[same[i] < 0 ? i : same[i]].pred;
            if (*best < 0 || pred[i] < pred[*best])
                *best = i;
        }
    } else if (st == XS_OK) {
        /* the best alone: a candidate with the schedule of an earlier one never beats it (a tie
         * goes to the lower index); the others simulated in the order of their bounds until the
         * next bound exceeds the best prediction found (1e-9 relative of slack for the
         * bound's rounding) */
        for (int k = 0; k < n && st == XS_OK; k++)
            st = tp_rank_bound(prof, &it[idx[k]]);
        for (int a = 1; a < n && st == XS_OK; a++)
            for (int b = a; b > 0; b--) {
                const tp_rank_item *x = &it[idx[b]], *y = &it[idx[b - 1]];
                if (!(x->lb < y->lb || (x->lb == y->lb && idx[b] < idx[b - 1])))
                    break;
                const int t = idx[b];
                idx[b] = idx[b - 1];
                idx[b - 1] = t;
            }
        double bp = INFINITY;
        for (int k = 0; k < n && st == XS_OK; k++) {
            tp_rank_item *x = &it[idx[k]];
            if (*best >= 0 && x->lb * (1 - 1e-9) > bp)
                break; /* this bound and every later one exceed the best */
            st = tp_rank_finish(prof, x);
            if (st == XS_OK && (*best < 0 || x->pred < bp || (x->pred == bp && idx[k] < *best)))
                bp = x->pred, *best = idx[k];
        }
    }
    for (int k = 0; k < n; k++)
        tp_rank_free(&it[idx[k]]);
    if (st != XS_OK)
        *best = -1;
    return st;
}

void xs_tp_pace_label(const xs_tp_pace *p, char *buf, size_t n)
{
    const int l = snprintf(buf, n, "f%.2f/b%.1f/%s", p->finish, p->burst,
                           p->ring             ? "ring"
                           : p->spread == 2    ? "stream4"
                           : p->spread         ? "stream"
                           : p->cap_bytes > 0  ? "capQ"
                                               : "nocap");
    if (p->split > 1 && l > 0 && (size_t)l < n)
        snprintf(buf + l, n - (size_t)l, "/split%d", p->split);
}
