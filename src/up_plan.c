// SPDX-License-Identifier: Apache-2.0
/*
 * up_plan.c - the UP planner (docs/UP.md "Criterion"): the per-CTA criterion on the piggyback
 * kernel, and the member of the kernel's reshape family (order x split, couriers, KV splits)
 * with the smallest predicted cost over fa. The bench prints the decision (tools/bench/up.cu).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "xstage_up.h"

/* The kernel's reshape family in the planner's order of preference among predictions that tie
 * (within XS_UP_TIE of the best): 8 slices first (two 256-byte rows per warp per slice), then
 * the most spread split (16: one row per warp; the lowest injection rate), then fewer slices;
 * the snake before early (the order fa runs in); the KV splits (docs/UP.md "KV split": parts of
 * at most 32, 16 or 64 key blocks, each tile's stores in 8 slices over the next task; only
 * where pilots run, since the model has no term for their partials and merges) after the
 * slices; couriers after them (they give up C SMs of compute, so they are taken only where
 * predicted better), 4 before 8; piggyback last. 8 before 16: the model has no term for the
 * kernel's own cost of a slice, and 16 slices cost about twice 8 (about 190 ns per extra
 * slice, bench/results/up/) while the link hides the same; forced 8 slices hide the exchange
 * in more rows than 16 or 4 (docs/UP.md). */
static const struct {
    int order, split, couriers, kv;
} up_cands[XS_UP_NCANDS] = {
    {XS_ATTN_ORDER_SNAKE, 8, 0, 0},  {XS_ATTN_ORDER_SNAKE, 16, 0, 0},
    {XS_ATTN_ORDER_SNAKE, 4, 0, 0},  {XS_ATTN_ORDER_SNAKE, 2, 0, 0},
    {XS_ATTN_ORDER_EARLY, 8, 0, 0},  {XS_ATTN_ORDER_EARLY, 16, 0, 0},
    {XS_ATTN_ORDER_EARLY, 4, 0, 0},  {XS_ATTN_ORDER_EARLY, 2, 0, 0},
    {XS_ATTN_ORDER_SNAKE, 8, 0, 32}, {XS_ATTN_ORDER_SNAKE, 8, 0, 16},
    {XS_ATTN_ORDER_SNAKE, 8, 0, 64}, {XS_ATTN_ORDER_SNAKE, 0, 4, 0},
    {XS_ATTN_ORDER_SNAKE, 0, 8, 0},  {XS_ATTN_ORDER_EARLY, 0, 4, 0},
    {XS_ATTN_ORDER_EARLY, 0, 8, 0},  {XS_ATTN_ORDER_EARLY, 0, 0, 0},
    {XS_ATTN_ORDER_SNAKE, 0, 0, 0}};

const char *xs_up_plan_name(int order, int split, int couriers, int kv, char *buf, size_t n)
{
    if (kv > 0 && split > 0)
        snprintf(buf, n, "k%ds%d", kv, split);
    else if (kv > 0)
        snprintf(buf, n, "k%d", kv);
    else if (couriers > 0)
        snprintf(buf, n, "%sc%d", order == XS_ATTN_ORDER_EARLY ? "e" : "", couriers);
    else
        snprintf(buf, n, "%c%d", order == XS_ATTN_ORDER_EARLY ? 'e' : 's', split);
    return buf;
}

/* The family, restricted by the options: --split / --order / --couriers / --kv-split; couriers
 * need one SM to compute; KV splits only where kv_ok, and only unforced where nothing else is
 * forced. */
static void family_members(const xs_up_plan_opts *o, const xs_up_cfg *c, xs_up_family *f)
{
    int n = 0;
    for (int i = 0; i < XS_UP_NCANDS && o->kv <= 0; i++) {
        const int cc = up_cands[i].couriers, kk = up_cands[i].kv;
        const int keep_c = o->couriers < 0 ? (cc == 0 || o->split < 0) : cc == o->couriers;
        const int keep_k =
            kk == 0 || (o->kv_ok && o->kv < 0 && o->split < 0 && o->couriers <= 0);
        if ((o->order < 0 || up_cands[i].order == o->order) &&
            (o->split < 0 || up_cands[i].split == o->split) && keep_c && keep_k && cc < c->sms)
            f->ord[n] = up_cands[i].order, f->spl[n] = up_cands[i].split, f->cou[n] = cc,
            f->kv[n++] = kk;
    }
    if (o->kv > 0) /* forced: that member alone (8 slices unless --split says otherwise) */
        f->ord[n] = XS_ATTN_ORDER_SNAKE, f->spl[n] = o->split >= 0 ? o->split : 8,
        f->cou[n] = 0, f->kv[n++] = o->kv;
    if (o->split >= 0 || o->couriers > 0)
        for (int z = XS_ATTN_ORDER_SNAKE; z <= XS_ATTN_ORDER_EARLY; z++) {
            const int want_s = o->split >= 0 ? o->split : 0;
            const int want_c = o->couriers > 0 ? o->couriers : 0;
            int have = 0;
            for (int i = 0; i < n; i++)
                have |= f->ord[i] == z && f->spl[i] == want_s && f->cou[i] == want_c;
            if (!have && (o->order < 0 || o->order == z) && o->kv <= 0)
                f->ord[n] = z, f->spl[n] = want_s, f->cou[n] = want_c, f->kv[n++] = 0;
        }
    f->n = n;
}

/* Note member i's failed prediction (kind 1: the model failed; 2: KV lists not buildable). */
static void member_failed(xs_up_family *f, int i, int kind)
{
    f->failed[i] = kind;
    snprintf(f->why[i], sizeof f->why[i], "%s", xs_errmsg());
}

void xs_up_model_profile(const xs_profile *p, double load_drain_bytes_per_ns, xs_profile *out)
{
    *out = *p;
    if (load_drain_bytes_per_ns > 0)
        out->drain_bytes_per_ns = load_drain_bytes_per_ns;
    else if (p->drain_under_load_bytes_per_ns > 0)
        out->drain_bytes_per_ns = p->drain_under_load_bytes_per_ns;
}

void xs_up_plan_run(const xs_up_plan_opts *o, const xs_profile *prof0, const xs_up_cfg *c,
                    const double *dur, const uint64_t *tns, xs_up_plan *out)
{
    memset(out, 0, sizeof *out);
    /* the model's profile: the calibrated one, draining at the given load drain where given,
     * else at the profile's drain under load where it has one (the couriers' pace stays a
     * fraction of the calibrated R: c->pace_bytes_per_ns) */
    xs_profile pm;
    xs_up_model_profile(prof0, o->load_drain_bytes_per_ns, &pm);
    const xs_profile *prof = &pm;
    xs_up_family *f = &out->fam;
    /* the criterion: piggyback's per-CTA programs (fa's measured tile times, snake) with no
     * CTA's stores held back by the stage beyond one chunk at the drain rate */
    out->d_pb_ns = xs_up_predict_delta(prof, c, dur, XS_ATTN_ORDER_SNAKE, 0, &out->pb);
    if (isnan(out->d_pb_ns))
        snprintf(out->pb_why, sizeof out->pb_why, "%s", xs_errmsg());
    out->held_tol_ns = prof->chunk_bytes / prof->drain_bytes_per_ns;
    out->fluid_ok = xs_up_criterion_fluid(prof, c, tns, &out->fluid_peak_bytes, &out->k_eff,
                                          &out->sync_bytes);
    out->criterion_ok = out->fluid_ok < 0 || isnan(out->d_pb_ns) ? -1
                                                                 : out->pb.held_ns <=
                                                                       out->held_tol_ns;
    if (c->remote == 0)
        out->criterion_ok = 1;
    out->order = XS_ATTN_ORDER_SNAKE, out->split = 0, out->couriers = 0, out->kv = 0;
    out->d_fu_ns = out->d_pb_ns;
    family_members(o, c, f);
    /* d: the link's cost, by which the members rank; dp: the prediction, d plus the slices' own
     * cost on the busiest CTA (slice_ns). Not in the ranking: with it the model prefers 4 and 2
     * slices (fewer of them), whose link cost it underestimates (docs/UP.md) */
    double best = INFINITY;
    for (int i = 0; i < f->n; i++) {
        int slices = 0, listed = 1;
        if (f->kv[i] > 0) {
            f->d[i] = xs_up_predict_kv(prof, c, dur, f->kv[i], f->spl[i], &slices, &listed);
            if (isnan(f->d[i]))
                member_failed(f, i, listed ? 1 : 2);
        } else if (f->cou[i] > 0) {
            f->d[i] = xs_up_predict_courier(prof, c, dur, f->ord[i], f->cou[i]);
            if (isnan(f->d[i]))
                member_failed(f, i, 1);
        } else if (f->spl[i] == 0 && f->ord[i] == XS_ATTN_ORDER_SNAKE) {
            f->d[i] = out->d_pb_ns; /* its failure is out->pb_why */
        } else { /* slices on the CTA with the most tiles (CTA 0) */
            f->d[i] = xs_up_predict_delta(prof, c, dur, f->ord[i], f->spl[i], NULL);
            if (isnan(f->d[i]))
                member_failed(f, i, 1);
            slices = xs_attn_cta_count(c->tiles, c->grid, 0) * f->spl[i];
        }
        f->dp[i] = f->d[i] + slices * o->slice_ns;
        if (f->d[i] < best)
            best = f->d[i];
    }
    /* ties relative to the whole predicted time: the compute is the position sums */
    double work = 0;
    for (int t = 0; t < c->tiles; t++)
        work += dur[t];
    const double tol = XS_UP_TIE * (work / c->grid + best);
    int pick = -1;
    for (int i = 0; i < f->n && pick < 0; i++)
        if (f->d[i] <= best + tol)
            pick = i;
    if (pick < 0) /* every prediction failed: keep what the kernel does unplanned */
        pick = f->n - 1;
    out->order = f->ord[pick], out->split = f->spl[pick], out->couriers = f->cou[pick];
    out->kv = f->kv[pick], out->d_fu_ns = f->dp[pick];
    out->courier_pace = out->couriers > 0 ? c->pace_bytes_per_ns : 0.0;
}

/* A member's cost for ranking: failed predictions last. */
static double rank_cost(const xs_up_family *f, int i)
{
    return isnan(f->d[i]) ? INFINITY : f->d[i];
}

static int is_piggyback(const xs_up_family *f, int i)
{
    return f->ord[i] == XS_ATTN_ORDER_SNAKE && f->spl[i] == 0 && f->cou[i] == 0 && f->kv[i] == 0;
}

int xs_up_pilot_members(const xs_up_family *f, int order, int split, int couriers, int kv,
                        int pilots, int *idx)
{
    int m = 0, cur = -1;
    for (int i = 0; i < f->n; i++) {
        if (f->ord[i] == order && f->spl[i] == split && f->cou[i] == couriers && f->kv[i] == kv)
            cur = i;
        /* insertion by prediction, failed predictions last */
        const double di = rank_cost(f, i);
        int q = m++;
        for (; q > 0 && rank_cost(f, idx[q - 1]) > di; q--)
            idx[q] = idx[q - 1];
        idx[q] = i;
    }
    const int np = pilots < m ? pilots : m;
    int have = 0;
    for (int k = 0; k < np; k++)
        have |= idx[k] == cur;
    if (!have && cur >= 0 && np > 0)
        idx[np - 1] = cur;
    /* and every KV split and piggyback not among them: the model has no term for what stores
     * from every SM cost the compute next to them (which piggyback concentrates), nor for a KV
     * split's partials and merges, so it cannot rank these (piggyback can be the fastest where
     * every split member ties, and KV splits of 32 key blocks faster than those of 16 that the
     * model puts first: docs/UP.md "Pilots") */
    int np2 = np;
    for (int k = np; k < m && np > 0; k++)
        if ((f->kv[idx[k]] > 0 || is_piggyback(f, idx[k])) && !isnan(f->d[idx[k]])) {
            const int t = idx[np2];
            idx[np2] = idx[k], idx[k] = t;
            np2++;
        }
    return np2;
}

int xs_up_pilot_pick(const xs_up_family *f, const int *idx, const double *med, int n, double tie)
{
    double best = INFINITY;
    for (int k = 0; k < n; k++)
        best = fmin(best, med[k]);
    int bi = -1;
    for (int k = 0; k < n; k++) {
        const int i = idx[k];
        if (med[k] <= best * (1 + tie) && (bi < 0 || rank_cost(f, i) < rank_cost(f, bi)))
            bi = i;
    }
    return bi;
}
