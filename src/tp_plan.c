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

xs_status xs_tp_predict_candidates(xs_tp_plan *pl, int slot, const xs_tp_pace *cand,
                                   const int *usable, int nc, const xs_tp_costs *c,
                                   const xs_profile *prof, double *pred, int *best)
{
    *best = -1;
    for (int i = 0; i < nc; i++) {
        pred[i] = INFINITY;
        if (!usable[i])
            continue;
        XS_TRY(xs_tp_order_shaped(pl, slot, &cand[i], c, prof));
        XS_TRY(xs_tp_order_check(pl, slot));
        xs_tp_pred pp;
        XS_TRY(xs_tp_predict(pl, slot, prof, c, 0, &pp));
        pred[i] = pp.model_ns;
        if (*best < 0 || pred[i] < pred[*best])
            *best = i;
    }
    return XS_OK;
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
