// SPDX-License-Identifier: Apache-2.0
/*
 * up_model.c - the model's view of one UP configuration (docs/UP.md): the bytes each tile
 * sends, the predicted cost over fa of the plain kernel's splits and orders (its per-CTA
 * programs on the profile), of the couriers and of the KV split, and the fluid criterion kept
 * for comparison. Failures return NAN with the message set; nothing is printed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "up_kv.h"

/* Prefix the pending message (xs_errmsg) with `what`: "what: message". */
static void prefix_err(xs_status st, const char *what)
{
    char m[512];
    snprintf(m, sizeof m, "%s", xs_errmsg());
    xs_seterr(st, "%s: %s", what, m);
}

int xs_up_courier_grid(const xs_up_cfg *c, int C)
{
    if (C <= 0)
        return c->grid;
    return (c->tiles < c->sms - C ? c->tiles : c->sms - C) + C;
}

double xs_up_tile_remote_bytes(const xs_up_cfg *c, int t)
{
    int q0 = xs_attn_tile_row0(c->seq, c->heads, t);
    int q1 = q0 + XS_ATTN_BM < c->seq ? q0 + XS_ATTN_BM : c->seq;
    int lo = q0 > c->rows_per_rank ? q0 : c->rows_per_rank; /* rows >= rpr: ranks 1.. */
    return q1 > lo ? (double)(q1 - lo) * XS_ATTN_ROW_BYTES : 0.0;
}

double xs_up_tile_copy_bytes(const xs_up_cfg *c, int t)
{
    int q0 = xs_attn_tile_row0(c->seq, c->heads, t);
    int q1 = q0 + XS_ATTN_BM < c->seq ? q0 + XS_ATTN_BM : c->seq;
    return (double)(q1 - q0) * XS_ATTN_ROW_BYTES;
}

void xs_up_remote_bytes(const xs_up_cfg *c, double *rb)
{
    for (int t = 0; t < c->tiles; t++)
        rb[t] = xs_up_tile_remote_bytes(c, t);
}

void xs_up_tile_durations(const xs_up_cfg *c, const uint64_t *cta_start, size_t cta_stride,
                          const uint64_t *tns, double *dur_ns)
{
    for (int b = 0; b < c->grid; b++) {
        uint64_t prev = cta_start[(size_t)b * cta_stride];
        const int m = xs_attn_cta_count(c->tiles, c->grid, b);
        for (int k = 0; k < m; k++) {
            int t = xs_attn_cta_tile(XS_ATTN_ORDER_SNAKE, c->tiles, 0, c->grid, b, k);
            dur_ns[t] = tns[t] > prev ? (double)(tns[t] - prev) : 0.0;
            prev = tns[t];
        }
    }
}

/* The per-CTA programs simulated (xs_attn_progs_simulate: the profile without the CTAs' own
 * store queues and buffers, docs/UP.md "Per-CTA programs"), with the unlimited stage's run
 * where free_run and the windows' stretch (held_ns) where windows; frees pg. XS_OK or the
 * error. */
static xs_status progs_sim(const xs_profile *p, xs_attn_progs *pg, int free_run, int windows,
                           xs_attn_progsim *out)
{
    const xs_status st = xs_up_progs_simulate(p, pg, free_run, windows, out);
    xs_attn_progs_free(pg);
    return st;
}

/* Remote bytes of every tile ([tiles], free it), or NULL (message set). */
static double *remote_bytes(const xs_up_cfg *c)
{
    double *rb = (double *)malloc((size_t)c->tiles * sizeof(double));
    if (!rb) {
        xs_seterr(XS_ENOMEM, "model: out of memory for %d tiles", c->tiles);
        return NULL;
    }
    xs_up_remote_bytes(c, rb);
    return rb;
}

double xs_up_predict_delta(const xs_profile *p, const xs_up_cfg *c, const double *dur_ns,
                           int order, int split, xs_attn_progsim *sim)
{
    double *rb = remote_bytes(c);
    if (!rb)
        return NAN;
    xs_attn_progs pg;
    xs_attn_progsim r;
    xs_status st = xs_attn_progs_plain(c->seq, c->heads, c->causal, order, c->remote, c->grid,
                                       split, dur_ns, rb, &pg);
    free(rb);
    if (st == XS_OK)
        st = progs_sim(p, &pg, 1, sim != NULL, &r); /* held_ns: only for the caller */
    if (st != XS_OK) {
        prefix_err(st, "model");
        return NAN;
    }
    if (sim)
        *sim = r;
    return r.span_ns - r.free_ns;
}

double xs_up_courier_rate(const xs_profile *p, const xs_up_cfg *c, int C)
{
    double rate = c->pace_bytes_per_ns > 0 ? c->pace_bytes_per_ns : INFINITY;
    if (p->drain_bytes_per_ns > 0 && p->drain_bytes_per_ns < rate)
        rate = p->drain_bytes_per_ns;
    if (p->issue_bytes_per_ns > 0 && C * p->issue_bytes_per_ns < rate)
        rate = C * p->issue_bytes_per_ns;
    return rate;
}

double xs_up_predict_courier(const xs_profile *p, const xs_up_cfg *c, const double *dur,
                             int order, int C)
{
    double *cb = (double *)malloc((size_t)c->tiles * sizeof(double));
    if (!cb) {
        xs_seterr(XS_ENOMEM, "courier prediction: out of memory");
        return NAN;
    }
    for (int t = 0; t < c->tiles; t++)
        cb[t] = t < c->remote ? xs_up_tile_copy_bytes(c, t) : 0.0;
    const double rate = xs_up_courier_rate(p, c, C);
    const double o = p->issue_overhead_ns > 0 ? p->issue_overhead_ns : 0.0;
    xs_attn_courier_pred fa, cu;
    xs_status st = xs_attn_courier_predict(XS_ATTN_ORDER_SNAKE, c->tiles, c->remote, c->grid, 0,
                                           dur, cb, rate, o, &fa);
    if (st == XS_OK)
        st = xs_attn_courier_predict(order, c->tiles, c->remote, xs_up_courier_grid(c, C) - C, C,
                                     dur, cb, rate, o, &cu);
    free(cb);
    if (st != XS_OK)
        return NAN;
    return cu.span_ns - fa.compute_end_ns;
}

xs_status xs_up_kv_lists(const xs_up_cfg *c, int kb, int **off, xs_attn_kvtask **tasks,
                         int *ntasks, int *nslots)
{
    const int cap = xs_attn_kv_max_tasks(c->seq, c->heads);
    *off = (int *)malloc((size_t)(c->grid + 1) * sizeof(int));
    *tasks = (xs_attn_kvtask *)malloc((size_t)cap * sizeof(xs_attn_kvtask));
    xs_status st = !*off || !*tasks ? xs_seterr(XS_ENOMEM, "KV split: out of host memory for "
                                                "%d tasks", cap)
                                    : xs_attn_kv_build(c->seq, c->heads, c->causal, c->remote,
                                                       c->grid, kb, *off, *tasks, cap, ntasks,
                                                       nslots);
    if (st == XS_OK)
        st = xs_attn_kv_check(c->seq, c->heads, c->causal, c->grid, *off, *tasks, *nslots);
    if (st == XS_OK && (unsigned long long)*nslots * XS_ATTN_KV_SLOT_BYTES > XS_UP_KV_MAX_BYTES)
        st = xs_seterr(XS_EINVAL, "KV split %d: %d partials need %.2f GB, over %.2f", kb,
                       *nslots, (double)*nslots * XS_ATTN_KV_SLOT_BYTES / 1e9,
                       (double)XS_UP_KV_MAX_BYTES / 1e9);
    if (st != XS_OK) {
        free(*off), free(*tasks);
        *off = NULL, *tasks = NULL;
    }
    return st;
}

double xs_up_predict_kv(const xs_profile *p, const xs_up_cfg *c, const double *dur, int kb,
                        int split, int *slices, int *listed)
{
    int *off = NULL, nt = 0, ns = 0;
    xs_attn_kvtask *tk = NULL;
    *listed = 0;
    if (xs_up_kv_lists(c, kb, &off, &tk, &nt, &ns) != XS_OK)
        return NAN;
    *listed = 1;
    double *rb = remote_bytes(c);
    double d = NAN;
    if (rb) {
        xs_attn_courier_pred fa;
        xs_attn_progs pg;
        xs_attn_progsim kv;
        if (xs_attn_courier_predict(XS_ATTN_ORDER_SNAKE, c->tiles, c->remote, c->grid, 0, dur,
                                    rb, 1.0, 0.0, &fa) == XS_OK &&
            xs_attn_progs_kv(c->seq, c->heads, c->causal, c->grid, off, tk, split, dur, rb, &pg) ==
                XS_OK &&
            progs_sim(p, &pg, 0, 0, &kv) == XS_OK) { /* the span alone */
            int most = 0; /* slices of the busiest CTA: split per task that stores its tile */
            for (int b = 0; b < c->grid; b++) {
                int n = 0;
                for (int i = off[b]; i < off[b + 1]; i++)
                    n += xs_attn_kv_stores(tk[i].part);
                most = n > most ? n : most;
            }
            d = kv.span_ns - fa.compute_end_ns;
            *slices = most * split;
        }
        else
            prefix_err(XS_EINVAL, "KV split prediction");
    }
    free(rb), free(off), free(tk);
    return d;
}

/* The fluid criterion's events: issuers starting and ending. The closed forms of xs_bg_eval
 * assume either synchronised producers (K*B - R*T_iss0 <= Q(K)) or, in EP's staggered form,
 * producers spread evenly over the period; which one this kernel is depends on the shape
 * (non-causal waves end together, causal blocks of one wave end apart). So the test runs on the
 * arrivals the piggyback kernel would make, taken from the fa run's stamps (same order, snake),
 * as a fluid queue. What it misses (docs/UP.md "Criterion"): a grid's Q(grid) counts every
 * CTA's own queue and buffer, while the CTAs that store at one moment have only theirs, and
 * this kernel's work waits for its held-back stores (xs_attn_progs_simulate); the per-CTA
 * criterion of xs_up_plan_run replaces it. */
typedef struct {
    double t;   /* ns */
    int d;      /* +1 an issuer starts, -1 one ends */
} up_ev;

static int up_ev_cmp(const void *a, const void *b)
{
    const up_ev *x = (const up_ev *)a, *y = (const up_ev *)b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->d - y->d; /* ends before starts at one instant */
}

int xs_up_criterion_fluid(const xs_profile *p, const xs_up_cfg *c, const uint64_t *tns,
                           double *peak_bytes, int *k_eff, double *sync_bytes)
{
    const double r = p->issue_bytes_per_ns, R = p->drain_bytes_per_ns;
    const double o = p->issue_overhead_ns;
    *peak_bytes = 0, *k_eff = 0, *sync_bytes = 0;
    if (!(r > 0) || !(R > 0))
        return -1;
    up_ev *ev = (up_ev *)malloc((size_t)2 * c->tiles * sizeof *ev);
    if (!ev)
        return -1;
    int n = 0;
    /* the synchronised form per position k of the snake: K_k CTAs x mean B_k */
    const int W = (c->tiles + c->grid - 1) / c->grid;
    for (int k = 0; k < W; k++) {
        double kk = 0, bb = 0;
        for (int b = 0; b < c->grid; b++) {
            if (k >= xs_attn_cta_count(c->tiles, c->grid, b))
                continue;
            const double rb = xs_up_tile_remote_bytes(
                c, xs_attn_cta_tile(XS_ATTN_ORDER_SNAKE, c->tiles, 0, c->grid, b, k));
            kk += rb > 0, bb += rb;
        }
        if (kk > 0) {
            const double v = bb - R * (o + bb / kk / r);
            if (v > *sync_bytes)
                *sync_bytes = v;
        }
    }
    for (int t = 0; t < c->tiles; t++) {
        const double rb = xs_up_tile_remote_bytes(c, t);
        if (rb <= 0)
            continue;
        if (tns[t] == 0) {
            free(ev);
            return -1;
        }
        ev[n].t = (double)tns[t] + o, ev[n++].d = 1;
        ev[n].t = (double)tns[t] + o + rb / r, ev[n++].d = -1;
    }
    qsort(ev, (size_t)n, sizeof *ev, up_ev_cmp);
    /* fluid queue: inflow r per active issuer, outflow R while anything is held */
    double q = 0, peak = 0;
    int act = 0, kmax = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0) {
            const double dt = ev[i].t - ev[i - 1].t;
            q += (act * r - R) * dt;
            if (q < 0)
                q = 0;
            if (q > peak)
                peak = q;
        }
        act += ev[i].d;
        if (act > kmax)
            kmax = act;
    }
    free(ev);
    *peak_bytes = peak, *k_eff = kmax;
    return peak <= xs_capacity(p, c->grid) * (1 + 1e-9);
}
