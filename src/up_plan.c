// SPDX-License-Identifier: Apache-2.0
/*
 * up_plan.c - the UP planner (docs/UP.md "Criterion"): the per-CTA criterion on the piggyback
 * kernel, and the member of the kernel's reshape family (order x split, couriers, KV splits)
 * with the smallest predicted cost over fa. The bench prints the decision (tools/bench/up.cu).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

static int is_piggyback(const xs_up_family *f, int i)
{
    return f->ord[i] == XS_ATTN_ORDER_SNAKE && f->spl[i] == 0 && f->cou[i] == 0 && f->kv[i] == 0;
}

/* Member i's cost over fa (d; NAN with the failure noted in f) and the output slices of its
 * busiest CTA (*slices), piggyback's included (xs_up_plan_run takes piggyback's from the
 * criterion's simulation, the same programs). */
static double member_cost(const xs_profile *prof, const xs_up_cfg *c, const double *dur,
                          xs_up_family *f, int i, int *slices)
{
    int listed = 1;
    double d;
    *slices = 0;
    if (f->kv[i] > 0) {
        d = xs_up_predict_kv(prof, c, dur, f->kv[i], f->spl[i], slices, &listed);
        if (isnan(d))
            member_failed(f, i, listed ? 1 : 2);
    } else if (f->cou[i] > 0) {
        d = xs_up_predict_courier(prof, c, dur, f->ord[i], f->cou[i]);
        if (isnan(d))
            member_failed(f, i, 1);
    } else { /* slices on the CTA with the most tiles (CTA 0) */
        d = xs_up_predict_delta(prof, c, dur, f->ord[i], f->spl[i], NULL);
        if (isnan(d))
            member_failed(f, i, 1);
        *slices = xs_attn_cta_count(c->tiles, c->grid, 0) * f->spl[i];
    }
    return d;
}

/* The compute the ties are relative to: the tile times' sum, in tile order. */
static double work_sum(const xs_up_cfg *c, const double *dur)
{
    double work = 0;
    for (int t = 0; t < c->tiles; t++)
        work += dur[t];
    return work;
}

/* The largest d that ties with the best prediction `best`: within XS_UP_TIE of the whole
 * predicted time (the compute is the position sums). Non-decreasing in best, also as rounded. */
static double tie_limit(const xs_up_cfg *c, double work, double best)
{
    const double tol = XS_UP_TIE * (work / c->grid + best);
    return best + tol;
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
        int slices = 0;
        if (is_piggyback(f, i))
            f->d[i] = out->d_pb_ns; /* its failure is out->pb_why */
        else
            f->d[i] = member_cost(prof, c, dur, f, i, &slices);
        f->dp[i] = f->d[i] + slices * o->slice_ns;
        if (f->d[i] < best)
            best = f->d[i];
    }
    const double work = work_sum(c, dur);
    int pick = -1;
    for (int i = 0; i < f->n && pick < 0; i++)
        if (f->d[i] <= tie_limit(c, work, best))
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

/* ---- the decision alone (xs_up_plan_decide) ------------------------------------------------ */

/* x less a margin for the rounding between a closed form and the engine's own sums. */
static double round_down(double x)
{
    return x - 1e-9 * fabs(x) - 1e-6;
}

static double round_up(double x)
{
    return x + 1e-9 * fabs(x) + 1e-6;
}

/* A CTA's stores, for the link bound. */
typedef struct {
    double t_first; /* ns: no byte of it is issued before */
    double bytes;   /* at least this many bytes it stores */
    double tail;    /* ns of its work that follow its last byte's entry into the stage */
} cta_store;

static int tail_desc(const void *a, const void *b)
{
    const double x = ((const cta_store *)a)->tail, y = ((const cta_store *)b)->tail;
    return (x < y) - (x > y);
}

/* When the last CTA can end, from the stage alone (drain R, capacity q): by any time tau at most
 * q bytes are held and the stage drains at most R (tau' - tau) until tau', so the bytes of a set
 * of CTAs that cannot issue before tau have all entered no earlier than tau + (those bytes - q)
 * / R, and the last of those CTAs to see its last byte enter still works its tail. Over the sets
 * of the CTAs with the longest tails (each set's least tail counts) and every tau among their
 * first stores. cs[n] is sorted here; by[n] scratch. */
static double link_bound(cta_store *cs, int n, double R, double q, cta_store *by)
{
    qsort(cs, (size_t)n, sizeof *cs, tail_desc);
    double lb = 0;
    for (int j = 0; j < n; j++) {
        /* by[0..j]: the set's CTAs by first store, ascending */
        int k = j;
        for (; k > 0 && by[k - 1].t_first > cs[j].t_first; k--)
            by[k] = by[k - 1];
        by[k] = cs[j];
        double after = 0, t = -INFINITY;
        for (int m = j; m >= 0; m--) {
            after += by[m].bytes;
            const double v = by[m].t_first + (after - q) / R;
            t = v > t ? v : t;
        }
        t += cs[j].tail;
        lb = t > lb ? t : lb;
    }
    return lb;
}

/* The stage the per-CTA programs are simulated on (xs_up_progs_simulate: no CTA queues or
 * buffers) holds at most this many bytes; one chunk more, for a chunk that the engine admits
 * while the last one is still in. */
static double stage_bytes(const xs_profile *pm, int grid)
{
    xs_profile real = *pm;
    real.queue_bytes_per_producer = 0, real.buffer_bytes_per_producer = 0;
    return xs_capacity(&real, grid) + (pm->chunk_bytes > 0 ? pm->chunk_bytes : 0);
}

/* A lower bound on a plain member's d = span - free (xs_up_predict_delta) from its programs'
 * closed forms, without building them. On the unlimited stage a CTA's end is its steps' times
 * plus, per row with bytes, the overhead o and bytes / r (its program, xs_attn_progs_plain:
 * the step's bytes in one row, or in min(split, next step's iterations) rows of slices); the
 * profile's run is no faster (span >= free) and ends no earlier than the last byte enters
 * (link_bound), and each CTA still works after its last byte entered: the rest of the step
 * whose iterations carry its last slice (split 0: all of the next step) and the steps after.
 * -INFINITY where the profile gives no rates. cs: [2 grid] scratch. */
static double plain_bound(const xs_profile *pm, const xs_up_cfg *c, const double *dur,
                          const double *rb, int order, int split, cta_store *cs)
{
    const double r = pm->issue_bytes_per_ns, R = pm->drain_bytes_per_ns;
    const double oh = pm->issue_overhead_ns;
    if (!(r > 0) || !(R > 0) || !(R < INFINITY) || !(oh >= 0) || c->grid < 1 ||
        c->grid > c->tiles)
        return -INFINITY;
    double free_lo = 0, free_hi = 0;
    int n = 0;
    for (int b = 0; b < c->grid; b++) {
        const int m = xs_attn_cta_count(c->tiles, c->grid, b);
        double ns = 0, iss_lo = 0, iss_hi = 0, bytes = 0, first = -1;
        double at_last = 0; /* ns up to the row of its last bytes, that row's work included */
        int t = m > 0 ? xs_attn_cta_tile(order, c->tiles, c->remote, c->grid, b, 0) : 0;
        for (int k = 0; k < m; k++) {
            const int nx = k + 1 < m ? xs_attn_cta_tile(order, c->tiles, c->remote, c->grid, b,
                                                        k + 1)
                                     : -1;
            ns += dur[t] > 0 ? dur[t] : 0;
            const double B = rb[t];
            if (B > 0) {
                int rows = 1;
                at_last = ns; /* the last step's bytes: nothing after them */
                if (nx >= 0) {
                    const double nns = dur[nx] > 0 ? dur[nx] : 0;
                    const int it = xs_attn_tile_iters(c->seq, c->heads, c->causal, nx);
                    const int nk = it > 0 ? it : 1;
                    rows = split > 0 ? (split < nk ? split : nk) : 1;
                    /* the row of the last slice runs from the slice's iteration to the step's
                     * end (split 0: the whole next step) */
                    const int j0 = split > 0 ? xs_attn_slice_iter(split, nk, split - 1) : 0;
                    at_last = ns + nns / nk * j0;
                }
                if (first < 0)
                    first = ns; /* its bytes go out after its own step */
                /* each row's bytes round to 16 cumulatively: the step's total within 8 */
                iss_lo += oh + (B > 8 ? B - 8 : 0) / r;
                iss_hi += rows * oh + (B + 8) / r;
                bytes += B > 8 ? B - 8 : 0;
            }
            t = nx;
        }
        free_lo = fmax(free_lo, ns + iss_lo);
        free_hi = fmax(free_hi, ns + iss_hi);
        if (first >= 0)
            cs[n].t_first = round_down(first), cs[n].bytes = bytes,
            cs[n++].tail = round_down(ns - at_last);
    }
    const double span_lo = fmax(round_down(link_bound(cs, n, R, stage_bytes(pm, c->grid),
                                                      cs + c->grid)),
                                round_down(free_lo));
    return span_lo - round_up(free_hi);
}

/* A lower bound on a KV member's d = span - fa's compute end (xs_up_predict_kv): its CTAs
 * share the tile times (a part's share of its tile's, a last part's wait on top), so the
 * busiest one computes at least their mean; its bytes enter the stage from time 0 on at the
 * earliest. fa_end: the replay xs_up_predict_kv subtracts (the same call, the same value). */
static double kv_bound(const xs_profile *pm, const xs_up_cfg *c, const double *dur,
                       const double *rb, double fa_end)
{
    const double R = pm->drain_bytes_per_ns;
    double work = 0, bytes = 0;
    int neg = 0;
    for (int t = 0; t < c->tiles; t++) {
        work += dur[t];
        neg |= !(dur[t] >= 0);
        bytes += rb[t] > 8 ? rb[t] - 8 : 0;
    }
    double span_lo = neg ? 0 : work / c->grid;
    if (R > 0 && R < INFINITY)
        span_lo = fmax(span_lo, (bytes - stage_bytes(pm, c->grid)) / R);
    return round_down(span_lo) - fa_end;
}

void xs_up_plan_decide(const xs_up_plan_opts *o, const xs_profile *prof0, const xs_up_cfg *c,
                       const double *dur, xs_up_decision *out)
{
    memset(out, 0, sizeof *out);
    xs_profile pm;
    xs_up_model_profile(prof0, o->load_drain_bytes_per_ns, &pm);
    const xs_profile *prof = &pm;
    xs_up_family f; /* its predictions where evaluated; failures noted but not reported */
    memset(&f, 0, sizeof f);
    family_members(o, c, &f);
    const int n = f.n;
    out->n = n;
    int slices[XS_UP_MAX_MEMBERS] = {0};
    double *rb = (double *)malloc((size_t)(c->tiles > 0 ? c->tiles : 1) * sizeof(double));
    cta_store *cs = (cta_store *)malloc((size_t)(c->grid > 0 ? 2 * c->grid : 1) * sizeof *cs);
    double fa_end = NAN;
    if (rb && cs && c->tiles > 0) {
        xs_up_remote_bytes(c, rb);
        xs_attn_courier_pred fa;
        if (xs_attn_courier_predict(XS_ATTN_ORDER_SNAKE, c->tiles, c->remote, c->grid, 0, dur,
                                    rb, 1.0, 0.0, &fa) == XS_OK)
            fa_end = fa.compute_end_ns;
    }
    /* the bounds; the couriers' replay is the prediction itself */
    for (int i = 0; i < n; i++) {
        out->d[i] = NAN;
        out->lb[i] = -INFINITY;
        if (f.cou[i] > 0 && f.kv[i] <= 0) {
            out->d[i] = member_cost(prof, c, dur, &f, i, &slices[i]);
            out->evaluated[i] = 1;
            out->lb[i] = out->d[i];
        } else if (!rb || !cs || c->tiles < 1) {
            continue;
        } else if (f.kv[i] > 0) {
            if (!isnan(fa_end))
                out->lb[i] = kv_bound(prof, c, dur, rb, fa_end);
        } else {
            out->lb[i] = plain_bound(prof, c, dur, rb, f.ord[i], f.spl[i], cs);
        }
    }
    free(rb), free(cs);
    const double work = work_sum(c, dur);
    /* The choice is the first member (family order) with d <= tie_limit(best), best the least
     * d. With the evaluated members' least d as hi and the least of it and the others' bounds
     * as lo, best lies in [lo, hi], and tie_limit is monotone: an evaluated member with d <=
     * tie_limit(lo) ties for sure, one with d > tie_limit(hi) (or NAN) never, and an
     * unevaluated one never once its bound exceeds tie_limit(hi). While a member before the
     * first sure tie is in doubt, the unevaluated member of least bound is evaluated (bound
     * order: it lowers hi, or raises lo, soonest); each round evaluates one, so it ends. */
    int pick = -1;
    for (;;) {
        double hi = INFINITY, lo;
        for (int i = 0; i < n; i++)
            if (out->evaluated[i] && out->d[i] < hi)
                hi = out->d[i];
        lo = hi;
        int least = -1;
        for (int i = 0; i < n; i++)
            if (!out->evaluated[i]) {
                if (out->lb[i] < lo)
                    lo = out->lb[i];
                if (least < 0 || out->lb[i] < out->lb[least])
                    least = i;
            }
        const double lim_lo = tie_limit(c, work, lo), lim_hi = tie_limit(c, work, hi);
        int need = -1;
        for (int i = 0; i < n && pick < 0 && need < 0; i++) {
            if (out->evaluated[i]) {
                if (out->d[i] <= lim_lo)
                    pick = i;
                else if (out->d[i] <= lim_hi)
                    need = least;
            } else if (!(out->lb[i] > lim_hi)) {
                need = least; /* its bound is no less than least's */
            }
        }
        if (pick >= 0)
            break;
        if (need < 0 && n > 0 && !out->evaluated[n - 1])
            need = n - 1; /* no member ties (every prediction failed): xs_up_plan_run keeps the
                             last, with its prediction */
        else if (need < 0) {
            pick = n - 1;
            break;
        }
        if (is_piggyback(&f, need))
            out->d[need] = xs_up_predict_delta(prof, c, dur, XS_ATTN_ORDER_SNAKE, 0, NULL);
        else
            out->d[need] = member_cost(prof, c, dur, &f, need, &slices[need]);
        out->evaluated[need] = 1;
        out->simulated++;
    }
    out->order = XS_ATTN_ORDER_SNAKE, out->split = 0, out->couriers = 0, out->kv = 0;
    out->pick = pick;
    if (pick >= 0) {
        out->order = f.ord[pick], out->split = f.spl[pick], out->couriers = f.cou[pick];
        out->kv = f.kv[pick], out->d_ns = out->d[pick];
        out->d_fu_ns = out->d[pick] + slices[pick] * o->slice_ns;
    }
    out->courier_pace = out->couriers > 0 ? c->pace_bytes_per_ns : 0.0;
}
