// SPDX-License-Identifier: Apache-2.0
/*
 * ep_auto.c - the auto rule of the fused MoE kernel (include/xstage_ep.h, docs/EP.md "The auto
 * rule"): the no-backpressure criterion on the wave order's Linear-2 bursts, the model's times of
 * the wave, interleaved, paced (with its lead search and the spilling kernel), adaptive and
 * courier candidates, each scaled by its order's local control, and the decision with its
 * one-line reason.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_sim.h"
#include "xstage_ep.h"

/* Interleaved candidates of one group (the same pacing) predicted at most: the three unpaced
 * leads, or the paced order and its lead search (6 leads, 3 of them with 3 tapers). */
#define XS_AUTO_GROUP_MAX 26

/* What every candidate's prediction shares: the problem, the profile and model, a task list
 * buffer, and the first failure (once set, later predictions are skipped). The screen: a
 * candidate that only counts if it beats the best so far stops once a bound proves it cannot
 * (xs_moe_predict_cut), and is not predicted at all where an earlier candidate of its group
 * built the same list (equal needs, xs_moe_lead_need): equal times lose the strict comparison. */
typedef struct {
    const xs_moe_problem *pb;
    const xs_profile *p;
    const xs_moe_model *mm;
    xs_moe_task *tasks; /* [trace_cap + 1] */
    xs_status st;
    int screen;         /* 0: every candidate in full (xs_moe_auto_exhaustive) */
    int *need;          /* [XS_AUTO_GROUP_MAX][nrb] the needs of the group's lists so far */
    int nneed;
    /* The model's local traces of the wave and interleaved (lead D) orders, kept from their
     * local controls where the couriers will read one (NULL: not kept): the same run as
     * xs_auto_couriers would make. */
    xs_moe_tile *loc_wave, *loc_inter; /* [trace_cap + 1] */
    const xs_moe_local_traces *lt;     /* the caller's (may be NULL) */
} xs_auto_ctx;

/* A new group of candidates: none predicted yet. */
static void xs_auto_group(xs_auto_ctx *x) { x->nneed = 0; }

/* 1 if an interleaved plan of the group with the same needs was predicted (then q need not be);
 * else q's needs join the group and 0. Without the screen always 0. */
static int xs_auto_repeat(xs_auto_ctx *x, const xs_moe_plan *q)
{
    if (!x->screen || x->nneed >= XS_AUTO_GROUP_MAX)
        return 0;
    const int nrb = x->pb->nrb;
    int *mine = x->need + (size_t)x->nneed * nrb;
    xs_moe_lead_need(x->pb, q, mine);
    for (int k = 0; k < x->nneed; k++)
        if (!memcmp(x->need + (size_t)k * nrb, mine, sizeof(int) * (size_t)nrb))
            return 1;
    x->nneed++;
    return 0;
}

/* The model's time of plan with costs c (link or the local control) into *out_ns, and its trace
 * where `trace` is not NULL; nothing once an earlier prediction failed. */
static void xs_auto_sim_trace(xs_auto_ctx *x, const xs_moe_plan *plan, const xs_moe_costs *c,
                              int link, xs_moe_tile *trace, double *out_ns)
{
    if (x->st != XS_OK)
        return;
    const int n = xs_moe_tasks_build(x->pb, plan, x->tasks);
    x->st = xs_moe_predict_tasks(x->pb, x->tasks, n, plan, x->p, x->mm, c, link, trace, out_ns);
}

static void xs_auto_sim(xs_auto_ctx *x, const xs_moe_plan *plan, const xs_moe_costs *c, int link,
                        double *out_ns)
{
    xs_auto_sim_trace(x, plan, c, link, NULL, out_ns);
}

/* A trace of every task (NULL, with x->st set, when out of memory). */
static xs_moe_tile *xs_auto_trace_alloc(xs_auto_ctx *x)
{
    if (x->st != XS_OK)
        return NULL;
    const int ntask = x->pb->nrb * (x->pb->l1_per_rb + x->pb->l2_per_rb);
    xs_moe_tile *t = calloc((size_t)ntask + 1, sizeof *t);
    if (!t)
        x->st = xs_seterr(XS_ENOMEM, "moe: out of host memory for a trace");
    return t;
}

/* The same for a candidate that only counts if t x fi < best (the screen, xs_moe_predict_cut):
 * *out_ns is INFINITY where a lower bound proved it cannot be. */
static void xs_auto_sim_cut(xs_auto_ctx *x, const xs_moe_plan *plan, const xs_moe_costs *c,
                            double fi, double best, double *out_ns)
{
    if (x->st != XS_OK)
        return;
    const int n = xs_moe_tasks_build(x->pb, plan, x->tasks);
    x->st = x->screen ? xs_moe_predict_cut(x->pb, x->tasks, n, plan, x->p, x->mm, c, fi, best,
                                           out_ns)
                      : xs_moe_predict_tasks(x->pb, x->tasks, n, plan, x->p, x->mm, c, 1, NULL,
                                             out_ns);
}

/* The criterion's inputs and the decision's terms, between the steps of xs_moe_auto. */
typedef struct {
    double rem_sum;  /* remote bytes of all Linear-2 tiles */
    double mean_rem; /* per Linear-2 tile */
    double kern;     /* the faster order's local-control kernel time (0: none measured) */
    xs_bg bg;        /* the wave order's bursts */
    double w_loc;    /* the model's wave order without the link */
    double fi;       /* interleaved: local control / the model's local time */
    double i_loc;    /* the model's interleaved order (lead D) without the link */
    int d0;          /* the default lead D */
    int best_lead;   /* the unpaced interleaved order's best lead */
    double rp;       /* the pacer's rate (0: no pacing) */
    double rc;       /* the couriers' rate (0: none) */
    xs_moe_plan paced_plan;
} xs_auto_terms;

/* The criterion on the wave order's Linear-2 bursts (K producers, the mean remote bytes of a
 * Linear-2 tile, the compute of the next Linear-2 tile as the gap) and on the same bursts
 * reshaped: out->criterion_ok, out->reshape_ok, out->fill_ns. */
static void xs_auto_criterion(const xs_moe_problem *pb, const xs_profile *p,
                              const xs_moe_costs *wc, const xs_moe_costs *inter,
                              xs_auto_terms *a, xs_moe_auto_result *out)
{
    int n2 = 0;
    for (int b = 0; b < pb->nrb; b++)
        for (int nb = 0; nb < pb->l2_per_rb; nb++) {
            double rem, tot;
            xs_moe_tile_bytes(pb, b, nb, &rem, &tot);
            a->rem_sum += rem;
            n2++;
        }
    a->mean_rem = n2 ? a->rem_sum / n2 : 0;
    const int k = pb->grid < n2 ? pb->grid : (n2 ? n2 : 1);
    xs_bg_eval(p, k, a->mean_rem, wc->c2_ns, &a->bg);
    /* rate: every CTA injects one tile burst per (T_iss0 + G). capacity: in a persistent grid the
     * CTAs' Linear-2 epilogues are staggered, so about K * T_iss0 / (T_iss0 + G) of them burst at
     * once (at least one) - the synchronised form would fail for every 64 KB tile burst */
    double keff = k * a->bg.t_iss0_ns / (a->bg.t_iss0_ns + wc->c2_ns);
    if (keff < 1)
        keff = 1;
    const int cap_ok =
        keff * a->mean_rem - p->drain_bytes_per_ns * a->bg.t_iss0_ns <= xs_capacity(p, k);
    out->criterion_ok = a->mean_rem <= 0 || (a->bg.rate_ok && cap_ok);
    /* reshaping: the same bursts spread evenly over the part of the kernel where any order can
     * have them: from the earliest possible first combine store (one Linear-1 tile, then one
     * Linear-2 tile of its row block: c1 + c2 of the local control) to the end of the local
     * control's kernel. The fill is no room for bursts: rows with drain ~ compute would pass the
     * rate part although fill + drain exceeds the kernel. */
    a->kern = wc->kernel_ns > 0 && (inter->kernel_ns <= 0 || wc->kernel_ns < inter->kernel_ns)
                  ? wc->kernel_ns
                  : inter->kernel_ns;
    out->fill_ns = wc->c1_ns + wc->c2_ns;
    const double per_cta = n2 ? (double)n2 / pb->grid : 0;
    const double room = a->kern - out->fill_ns;
    double gs = per_cta > 0 && room > 0 ? room / per_cta - a->bg.t_iss0_ns : wc->c2_ns;
    if (gs < 0)
        gs = 0;
    xs_bg bs;
    xs_bg_eval(p, k, a->mean_rem, gs, &bs);
    double ks = k * bs.t_iss0_ns / (bs.t_iss0_ns + gs);
    if (ks < 1)
        ks = 1;
    out->reshape_ok = a->mean_rem <= 0 ||
                      (bs.rate_ok && ks * a->mean_rem - p->drain_bytes_per_ns * bs.t_iss0_ns <=
                                         xs_capacity(p, k));
}

/* The courier counts the model lets auto predict into cand[2]; returns how many. */
static int xs_auto_courier_cands(const xs_moe_model *mm, int *cand)
{
    int n = 0;
    if (mm->couriers == XS_MOE_COURIERS_AUTO) {
        cand[n++] = 4;
        cand[n++] = 8;
    } else if (mm->couriers > 0) {
        cand[n++] = mm->couriers;
    }
    return n;
}

/* 1 if xs_auto_couriers will read the model's local trace of an order: it predicts couriers and
 * the caller measured no local trace (a->rc and a->mean_rem set). */
static int xs_auto_couriers_want(const xs_auto_ctx *x, const xs_auto_terms *a)
{
    int cand[2];
    const xs_moe_local_traces *lt = x->lt;
    return xs_auto_courier_cands(x->mm, cand) > 0 && a->rc > 0 && a->mean_rem > 0 &&
           (!lt || !lt->wave || lt->nwave <= 0 || !lt->inter || lt->ninter <= 0);
}

/* The wave order and the unpaced interleaved order at the leads D, 2D, D/2, each scaled by its
 * local control: out->wave_ns, out->inter_ns, a->best_lead. */
static void xs_auto_orders(xs_auto_ctx *x, const xs_moe_costs *wc, const xs_moe_costs *inter,
                           xs_auto_terms *a, xs_moe_auto_result *out)
{
    const int d0 = a->d0;
    a->fi = 1.0;
    a->i_loc = NAN;
    /* the interleaved local control first: where the couriers will want a local trace, it
     * tells which order's (xs_auto_couriers) before the wave order's runs */
    const int keep = xs_auto_couriers_want(x, a);
    const xs_moe_plan ip0 = {.kind = XS_MOE_INTERLEAVED, .lead = d0};
    if (keep)
        x->loc_inter = xs_auto_trace_alloc(x);
    xs_auto_sim_trace(x, &ip0, inter, 0, x->loc_inter, &a->i_loc);
    if (inter->kernel_ns > 0 && a->i_loc > 0)
        a->fi = inter->kernel_ns / a->i_loc;
    double w_link = NAN;
    a->w_loc = NAN;
    const xs_moe_plan wave = {.kind = XS_MOE_WAVE};
    xs_auto_sim(x, &wave, wc, 1, &w_link);
    const double ki = inter->kernel_ns > 0 ? inter->kernel_ns : a->i_loc * a->fi;
    if (keep && !(wc->kernel_ns > 0 && ki < wc->kernel_ns))
        x->loc_wave = xs_auto_trace_alloc(x);
    xs_auto_sim_trace(x, &wave, wc, 0, x->loc_wave, &a->w_loc);
    const double fw = wc->kernel_ns > 0 && a->w_loc > 0 ? wc->kernel_ns / a->w_loc : 1.0;
    out->wave_ns = w_link * fw;
    const int leads[3] = {d0, 2 * d0, d0 / 2 > 1 ? d0 / 2 : 1};
    double best = INFINITY;
    a->best_lead = d0;
    xs_auto_group(x);
    for (int i = 0; i < 3; i++) {
        const xs_moe_plan ip = {.kind = XS_MOE_INTERLEAVED, .lead = leads[i]};
        if (xs_auto_repeat(x, &ip))
            continue;
        double t = NAN;
        xs_auto_sim_cut(x, &ip, inter, a->fi, best, &t);
        if (t * a->fi < best) {
            best = t * a->fi;
            a->best_lead = leads[i];
        }
    }
    out->inter_ns = best;
}

/* The lead search of the paced order: the lead the unpaced order likes best need not be the
 * paced order's: a paced link has room in the middle of the kernel, and the last `lead` row
 * blocks' Linear-2 tiles, which follow the last Linear-1 tile, meet the pacer together
 * (docs/EP.md, "The paced order's lead"). Leads D/2..2D; around D also tapers to 1/2, 2/3 and
 * 3/4 of the lead where Linear-1 ends. *pp becomes the best if it is 1 % faster. */
static void xs_auto_lead_search(xs_auto_ctx *x, const xs_moe_costs *inter,
                                const xs_auto_terms *a, xs_moe_plan *pp,
                                xs_moe_auto_result *out)
{
    const int d0 = a->d0;
    out->paced_plain_ns = out->paced_ns;
    xs_moe_plan best_pp = *pp;
    double best_t = out->paced_ns;
    const int cand[6] = {3 * d0 / 4, d0, 5 * d0 / 4, d0 / 2, 3 * d0 / 2, 2 * d0};
    xs_auto_group(x);
    xs_auto_repeat(x, pp); /* predicted: out->paced_ns */
    for (int i = 0; i < 6; i++) {
        const int L = cand[i] > 1 ? cand[i] : 1;
        const int ends[4] = {0, L / 2, 2 * L / 3, 3 * L / 4};
        for (int j = 0; j < (i < 3 ? 4 : 1); j++) {
            if (j && (ends[j] < 1 || ends[j] >= L || ends[j] == ends[j - 1]))
                continue;
            xs_moe_plan q = *pp;
            q.lead = L;
            q.lead_end = ends[j];
            if (xs_auto_repeat(x, &q))
                continue; /* the same list as a candidate predicted before */
            double tq = NAN;
            xs_auto_sim_cut(x, &q, inter, a->fi, best_t, &tq);
            if (tq * a->fi < best_t) {
                best_t = tq * a->fi;
                best_pp = q;
            }
        }
    }
    /* a 1 % margin against the model's own error, as for pacing */
    if (best_t <= 0.99 * out->paced_ns) {
        *pp = best_pp;
        out->paced_ns = best_t;
    }
}

/* Pacing is a reshaping action: only where the wave order's bursts fail the criterion (where it
 * holds, piggyback: the stores leave as they come). The paced order (its lead searched unless
 * forced) and the same on the spilling kernel: out->paced_ns, out->spill_ns, a->paced_plan. */
static void xs_auto_paced(xs_auto_ctx *x, const xs_moe_costs *inter, xs_auto_terms *a,
                          xs_moe_auto_result *out)
{
    const xs_moe_model *mm = x->mm;
    const xs_moe_plan base = {.kind = XS_MOE_INTERLEAVED, .lead = a->best_lead,
                              .pace_bytes = mm->pace_bytes, .pace_bytes_per_ns = a->rp};
    a->paced_plan = base;
    if (!(mm->pace_bytes > 0 && a->rp > 0 && a->mean_rem > 0 && !out->criterion_ok))
        return;
    xs_moe_plan pp = base;
    double t = NAN;
    if (mm->paced_lead > 0) {
        pp.lead = mm->paced_lead;
        pp.lead_end = mm->paced_lead_end;
    }
    xs_auto_sim(x, &pp, inter, 1, &t);
    out->paced_ns = t * a->fi;
    if (mm->lead_search && mm->paced_lead <= 0)
        xs_auto_lead_search(x, inter, a, &pp, out);
    a->paced_plan = pp;
    /* the same on the spilling kernel: held-back tiles do not hold their CTAs */
    pp.spill_depth = XS_MOE_SPILL_DEPTH;
    t = NAN;
    xs_auto_sim(x, &pp, inter, 1, &t);
    out->spill_ns = t * a->fi;
}

/* Adaptive: the CTAs choose Linear-2 tiles at the link's pace (the kernel's adaptive rule); its
 * compute is taken to be the interleaved order's (scaled by that control). */
static void xs_auto_adaptive(xs_auto_ctx *x, const xs_moe_costs *inter, const xs_auto_terms *a,
                             xs_moe_auto_result *out)
{
    const xs_moe_model *mm = x->mm;
    if (!(mm->pace_bytes > 0 && a->rp > 0 && a->mean_rem > 0))
        return;
    const xs_moe_plan ap = {.kind = XS_MOE_ADAPTIVE, .pace_bytes = mm->pace_bytes,
                            .pace_bytes_per_ns = a->rp,
                            .admit_ahead_ns = inter->c2_ns + mm->pace_bytes / a->rp};
    double t = NAN;
    xs_auto_sim(x, &ap, inter, 1, &t);
    out->adaptive = ap;
    out->adaptive_ns = t * a->fi;
}

/* The ready times (ns, list order) and remote bytes of the Linear-2 tiles of a local-control trace
 * (or the model's), times x scale; returns their number. */
static int xs_moe_ready_of(const xs_moe_problem *pb, const xs_moe_tile *t, int n, double scale,
                           double *ready, double *bytes)
{
    int n2 = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].kind != 2 || t[i].cta < 0 || t[i].rb < 0 || t[i].rb >= pb->nrb)
            continue;
        double rem, tot;
        xs_moe_tile_bytes(pb, t[i].rb, t[i].nb, &rem, &tot);
        ready[n2] = t[i].st1_ns * scale;
        bytes[n2++] = rem;
    }
    return n2;
}

/* The courier candidates over ready times c_ready[c_n] (local control, kernel time c_kern) of
 * the order c_inter: the best into out->courier*. */
static void xs_auto_courier_pick(const xs_moe_problem *pb, const xs_moe_model *mm,
                                 const int *cand, int ncand, int c_inter, double c_kern,
                                 double rc, const double *c_ready, const double *c_bytes,
                                 double *c_scaled, int c_n, xs_moe_auto_result *out)
{
    for (int i = 0; i < ncand; i++) {
        const int C = cand[i];
        if (C < 1 || C >= pb->grid)
            continue;
        const double sc = (double)pb->grid / (pb->grid - C);
        for (int j = 0; j < c_n; j++)
            c_scaled[j] = c_ready[j] * sc;
        const double comp = c_kern * sc;
        /* the couriers drain at their pace, or at what C of them copy (measured) */
        const double rcc =
            mm->courier_copy_bytes_per_ns > 0 && C * mm->courier_copy_bytes_per_ns < rc
                ? C * mm->courier_copy_bytes_per_ns
                : rc;
        const double link = xs_moe_courier_drain(c_scaled, c_bytes, c_n, C, rcc);
        const double t = link > comp ? link : comp;
        if (!isnan(out->courier_ns) && !(t < out->courier_ns))
            continue; /* the best candidate so far stays */
        const xs_moe_plan cp = {
            .kind = c_inter ? XS_MOE_INTERLEAVED : XS_MOE_WAVE,
            .lead = c_inter ? xs_moe_default_lead_ctas(pb, pb->grid - C) : 0,
            .couriers = C,
            .courier_bytes_per_ns = rc};
        out->courier = cp;
        out->courier_ns = t;
        out->courier_compute_ns = comp;
        out->courier_link_ns = link;
    }
}

/* Couriers: in the order whose local control is faster (the model's local times where none was
 * measured), ready times from that control's per-tile stamps (or the model's local trace of it,
 * scaled to the control's kernel time). */
static void xs_auto_couriers(xs_auto_ctx *x, const xs_moe_costs *wc, const xs_moe_costs *inter,
                             const xs_moe_local_traces *lt, const xs_auto_terms *a,
                             xs_moe_auto_result *out)
{
    const xs_moe_problem *pb = x->pb;
    const xs_moe_model *mm = x->mm;
    const int ntask = pb->nrb * (pb->l1_per_rb + pb->l2_per_rb);
    int cand[2];
    const int ncand = xs_auto_courier_cands(mm, cand);
    if (!(x->st == XS_OK && ncand && a->rc > 0 && a->mean_rem > 0))
        return;
    const double kw = wc->kernel_ns > 0 ? wc->kernel_ns : a->w_loc;
    const double ki = inter->kernel_ns > 0 ? inter->kernel_ns : a->i_loc * a->fi;
    const int c_inter = ki < kw;
    const double c_kern = c_inter ? ki : kw;
    const xs_moe_tile *tr = lt ? (c_inter ? lt->inter : lt->wave) : NULL;
    int ntr = lt ? (c_inter ? lt->ninter : lt->nwave) : 0;
    xs_moe_tile *own = NULL;
    double scale = 1.0;
    xs_moe_tile *kept = c_inter ? x->loc_inter : x->loc_wave;
    if ((!tr || ntr <= 0) && kept) {
        /* the model's local trace of the order (its local control's run), scaled to the
         * measured kernel time */
        const double t_loc = c_inter ? a->i_loc : a->w_loc;
        scale = t_loc > 0 ? c_kern / t_loc : 1.0;
        tr = kept;
        ntr = ntask;
    } else if (!tr || ntr <= 0) {
        /* the same, run here */
        own = calloc((size_t)ntask + 1, sizeof *own);
        if (!own) {
            x->st = xs_seterr(XS_ENOMEM, "moe: out of host memory for a trace");
        } else {
            const xs_moe_plan op = {.kind = c_inter ? XS_MOE_INTERLEAVED : XS_MOE_WAVE,
                                    .lead = c_inter ? a->d0 : 0};
            double t_loc = NAN;
            const int n = xs_moe_tasks_build(pb, &op, x->tasks);
            x->st = xs_moe_predict_tasks(pb, x->tasks, n, &op, x->p, mm, c_inter ? inter : wc,
                                         0, own, &t_loc);
            scale = t_loc > 0 ? c_kern / t_loc : 1.0;
        }
        tr = own;
        ntr = ntask;
    }
    double *c_ready = malloc(sizeof(double) * (size_t)(ntr + 1));
    double *c_bytes = malloc(sizeof(double) * (size_t)(ntr + 1));
    double *c_scaled = malloc(sizeof(double) * (size_t)(ntr + 1));
    if (x->st == XS_OK && (!c_ready || !c_bytes || !c_scaled))
        x->st = xs_seterr(XS_ENOMEM, "moe: out of host memory for ready times");
    int c_n = 0;
    if (x->st == XS_OK)
        c_n = xs_moe_ready_of(pb, tr, ntr, scale, c_ready, c_bytes);
    free(own);
    if (x->st == XS_OK)
        xs_auto_courier_pick(pb, mm, cand, ncand, c_inter, c_kern, a->rc, c_ready, c_bytes,
                             c_scaled, c_n, out);
    free(c_ready);
    free(c_bytes);
    free(c_scaled);
}

/* The interleaved decision's reason (out->plan set, paced or not, spilling or not). */
static void xs_auto_how_inter(const xs_auto_terms *a, const char *crit, double R, int paced,
                              int spill, double alt, xs_moe_auto_result *out)
{
    char taper[48] = "";
    if (out->plan.lead_end > 0)
        snprintf(taper, sizeof taper, " tapering to %d", out->plan.lead_end);
    snprintf(out->how, sizeof out->how, "%s (%.1f B/ns vs R %.1f): interleaved D=%d%s%s "
             "predicted %.1f us vs wave %.1f us (unpaced %.1f us)", crit,
             a->bg.injection_bytes_per_ns, R, out->plan.lead, taper,
             !paced                                     ? ""
             : out->paced_ns < out->inter_ns * 0.99     ? " paced"
             : out->drain_bound                         ? " paced (drain-bound)"
                                                        : " paced (within 1 %)",
             alt / 1e3, out->wave_ns / 1e3, out->inter_ns / 1e3);
    if (paced && !isnan(out->paced_plain_ns) &&
        (out->plan.lead != a->best_lead || out->plan.lead_end > 0)) {
        const size_t k = strlen(out->how);
        snprintf(out->how + k, sizeof out->how - k, "; paced at D=%d without taper "
                 "predicted %.1f us", a->best_lead, out->paced_plain_ns / 1e3);
    }
    if (paced) {
        const size_t k = strlen(out->how);
        snprintf(out->how + k, sizeof out->how - k, "; spilling predicted %.1f us%s",
                 out->spill_ns / 1e3,
                 spill                                      ? ": chosen"
                 : out->spill_ns <= 0.99 * out->paced_ns     ? ": not chosen (--no-auto-spill)"
                                                            : ": not chosen (< 1 % gain)");
    }
}

/* The decision between wave and the interleaved (paced, spilling) order, with its reason.
 * Drain-bound (remote bytes / R >= 0.9 x the local control's kernel): pace unless predicted more
 * than 5 % slower, since there the model is biased: unpaced interleaved runs 3-14 % slower than
 * predicted, paced within -5..+4 %, and the unpaced ones end at 1.24-1.35 x the drain where drain
 * > compute, the paced ones at 1.09-1.14 x. Elsewhere pace unless predicted more than 1 % slower:
 * on the host path every row that auto paces runs faster than unpaced interleaved (docs/EP.md,
 * "The auto rule"; bench/results/ep/). */
static void xs_auto_decide(const xs_moe_problem *pb, const xs_profile *p,
                           const xs_moe_model *mm, const xs_auto_terms *a,
                           xs_moe_auto_result *out)
{
    const xs_moe_plan wave = {.kind = XS_MOE_WAVE};
    out->plan = wave;
    out->auto_ns = out->wave_ns;
    const double drain_ns = a->rem_sum / p->drain_bytes_per_ns;
    out->drain_bound = a->kern > 0 && drain_ns >= 0.9 * a->kern;
    const int paced = out->paced_ns < out->inter_ns * (out->drain_bound ? 1.05 : 1.01);
    const double alt = paced ? out->paced_ns : out->inter_ns;
    const char *crit = a->mean_rem <= 0    ? "no remote combine bytes"
                       : out->criterion_ok ? "criterion met"
                       : out->reshape_ok   ? "criterion fails, reshaping meets it"
                                           : "criterion fails even reshaped";
    if (alt <= out->wave_ns * 0.98) {
        out->plan.kind = XS_MOE_INTERLEAVED;
        out->plan.lead = a->best_lead;
        if (paced)
            out->plan = a->paced_plan; /* its lead (and taper) may differ: the lead search */
        out->auto_ns = alt;
        /* spilling: where auto paces, if predicted >= 1 % faster (and allowed) */
        const int spill = paced && mm->auto_spill && out->spill_ns <= 0.99 * out->paced_ns;
        if (spill) {
            out->plan.spill_depth = XS_MOE_SPILL_DEPTH;
            out->auto_ns = out->spill_ns;
        }
        xs_auto_how_inter(a, crit, p->drain_bytes_per_ns, paced, spill, alt, out);
    } else if (a->mean_rem <= 0) {
        /* N = 1 (or no row for ranks 1..N-1): every combine store goes to this GPU's memory */
        snprintf(out->how, sizeof out->how, "piggyback: no remote combine bytes (N=%d: every "
                 "row is stored locally), nothing reaches the X-Stage; keep wave", pb->N);
    } else {
        snprintf(out->how, sizeof out->how, "keep wave: %s (%.1f B/ns vs R %.1f); interleaved "
                 "predicted %.1f us vs wave %.1f us (< 2 %% gain)", crit,
                 a->bg.injection_bytes_per_ns, p->drain_bytes_per_ns, alt / 1e3,
                 out->wave_ns / 1e3);
    }
}

/* The adaptive and courier candidates replace the decision only if predicted >= 2 % faster
 * than it (the margin an order change needs) and allowed: the courier prediction has no
 * measured bias yet. Their lines join the reason. */
static void xs_auto_alternatives(const xs_profile *p, const xs_moe_model *mm,
                                 const xs_auto_terms *a, xs_moe_auto_result *out)
{
    if (out->adaptive.kind == XS_MOE_ADAPTIVE) {
        const int better = out->adaptive_ns <= 0.98 * out->auto_ns;
        const int take = better && mm->auto_adaptive;
        const size_t k = strlen(out->how);
        snprintf(out->how + k, sizeof out->how - k, "; adaptive (lookahead %.1f us) predicted "
                 "%.1f us%s", out->adaptive.admit_ahead_ns / 1e3, out->adaptive_ns / 1e3,
                 take ? ": chosen" : better ? ": not chosen (--auto-adaptive off)"
                                            : ": not chosen (< 2 % gain)");
        if (take) {
            out->plan = out->adaptive;
            out->auto_ns = out->adaptive_ns;
        }
    }
    if (out->courier.couriers > 0) {
        const int better = out->courier_ns <= 0.98 * out->auto_ns;
        const int take = better && mm->auto_couriers;
        const size_t k = strlen(out->how);
        snprintf(out->how + k, sizeof out->how - k, "; couriers C=%d %s at %.2f R predicted "
                 "%.1f us (compute %.1f, link %.1f)%s", out->courier.couriers,
                 xs_moe_sched_name(out->courier.kind), a->rc / p->drain_bytes_per_ns,
                 out->courier_ns / 1e3, out->courier_compute_ns / 1e3,
                 out->courier_link_ns / 1e3,
                 take ? ": chosen" : better ? ": not chosen (--auto-couriers off)"
                                            : ": not chosen (< 2 % gain)");
        if (take) {
            out->plan = out->courier;
            out->auto_ns = out->courier_ns;
        }
    }
}

/* xs_moe_auto, with the screen (screen = 1) or without it (xs_moe_auto_exhaustive). */
static xs_status xs_auto_run(const xs_moe_problem *pb, const xs_profile *p, const xs_moe_model *mm,
                             const xs_moe_costs *wc, const xs_moe_costs *ic,
                             const xs_moe_local_traces *lt, int screen, xs_moe_auto_result *out)
{
    memset(out, 0, sizeof *out);
    out->paced_ns = NAN;
    out->courier_ns = out->courier_compute_ns = out->courier_link_ns = NAN;
    out->adaptive_ns = out->spill_ns = out->paced_plain_ns = NAN;
    XS_TRY(xs_profile_check(p, "profile"));
    xs_moe_model mdef;
    if (!mm) {
        xs_moe_model_default(&mdef);
        mm = &mdef;
    }
    if (mm->paced_lead < 0 || mm->paced_lead_end < 0 ||
        (mm->paced_lead_end > 0 && mm->paced_lead_end >= mm->paced_lead))
        return xs_seterr(XS_EINVAL, "moe: auto's forced paced lead %d tapering to %d: a lead >= 1 "
                         "and a taper end in 1..lead-1 (or 0, 0: the rule)", mm->paced_lead,
                         mm->paced_lead_end);
    const int ntask = pb->nrb * (pb->l1_per_rb + pb->l2_per_rb);
    xs_moe_costs inter = *wc;
    if (ic && ic->c1_ns > 0 && ic->c2_ns > 0) {
        inter = *ic;
    } else {
        inter.c1_ns *= 1.03; /* no measurement of the interleaved order: assume 3 % locality loss */
        inter.c2_ns *= 1.03;
        inter.kernel_ns = 0;
    }
    xs_auto_terms a;
    memset(&a, 0, sizeof a);
    xs_auto_criterion(pb, p, wc, &inter, &a, out);

    /* the model's times with and without the link; each order scaled by its local control */
    xs_auto_ctx x = {pb, p, mm, malloc(sizeof(xs_moe_task) * (size_t)(ntask + 1)), XS_OK, screen,
                     malloc(sizeof(int) * XS_AUTO_GROUP_MAX * ((size_t)pb->nrb + 1)), 0,
                     NULL, NULL, lt};
    if (!x.tasks || !x.need) {
        free(x.tasks);
        free(x.need);
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for a task list");
    }
    a.d0 = xs_moe_default_lead(pb);
    a.rp = mm->pace_drain_frac > 0 ? mm->pace_drain_frac * p->drain_bytes_per_ns : 0;
    a.rc = mm->courier_pace_frac > 0 ? mm->courier_pace_frac * p->drain_bytes_per_ns : 0;
    xs_auto_orders(&x, wc, &inter, &a, out);
    xs_auto_paced(&x, &inter, &a, out);
    xs_auto_adaptive(&x, &inter, &a, out);
    xs_auto_couriers(&x, wc, &inter, lt, &a, out);
    free(x.tasks);
    free(x.need);
    free(x.loc_wave);
    free(x.loc_inter);
    XS_TRY(x.st);
    xs_auto_decide(pb, p, mm, &a, out);
    xs_auto_alternatives(p, mm, &a, out);
    return XS_OK;
}

xs_status xs_moe_auto(const xs_moe_problem *pb, const xs_profile *p, const xs_moe_model *mm,
                      const xs_moe_costs *wc, const xs_moe_costs *ic,
                      const xs_moe_local_traces *lt, xs_moe_auto_result *out)
{
    return xs_auto_run(pb, p, mm, wc, ic, lt, 1, out);
}

xs_status xs_moe_auto_exhaustive(const xs_moe_problem *pb, const xs_profile *p,
                                 const xs_moe_model *mm, const xs_moe_costs *wc,
                                 const xs_moe_costs *ic, const xs_moe_local_traces *lt,
                                 xs_moe_auto_result *out)
{
    return xs_auto_run(pb, p, mm, wc, ic, lt, 0, out);
}
