// SPDX-License-Identifier: Apache-2.0
/*
 * plan.c - the planner: piggyback where the criterion holds, reshape where it fails.
 *
 * A schedule's gaps are the useful work available between bursts; that work is independent of
 * the stores, so it may be done earlier (interleaving later work between bursts) and a burst may
 * be split into pieces spread across the work that follows it. The planner never changes the
 * bytes a producer stores or (beyond the stated move cost) the work it does; it only chooses
 * where the stores go. Candidates are scored by the event simulation (makespan), and the plan is
 * kept only when it is predicted faster than the original.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"

void xs_plan_opts_default(xs_plan_opts *o)
{
    memset(o, 0, sizeof *o);
    o->headroom = 0.9;
    o->max_split = 64;
    o->allow_move = 1;
}

void xs_plan_free(xs_plan *pl) { xs_schedule_free(&pl->planned); }

/* Smallest split factor whose pieces fit the headroom without a capacity stall. */
static int split_needed(const xs_profile *p, const xs_row *rw, double headroom, int max_split)
{
    const double Q = headroom * xs_capacity(p, rw->producers);
    for (int n = 1; n <= max_split; n++) {
        double b = (double)rw->bytes_per_producer / n;
        if (b < 16 && n > 1)
            return n - 1;
        xs_bg bg;
        xs_bg_eval(p, rw->producers, b, 0, &bg);
        if (bg.q_peak0_bytes <= Q)
            return n;
    }
    return max_split;
}

/* Work a row needs after each of its n pieces so that the average injection stays <= R. */
static double gap_needed(const xs_profile *p, const xs_row *rw, int n)
{
    xs_bg bg;
    xs_bg_eval(p, rw->producers, (double)rw->bytes_per_producer / n, 0, &bg);
    return n * bg.g_star_ns;
}

/* Append row r split into n pieces (multiples of 16 bytes, the remainder on the last) with the
 * work `gap` spread evenly after them. */
static xs_status emit_split(xs_schedule *out, const xs_row *rw, int n, double gap)
{
    int64_t B = rw->bytes_per_producer;
    int64_t base = (B / n) / 16 * 16;
    if (base < 16) {
        n = 1;
        base = B;
    }
    for (int i = 0; i < n; i++) {
        int64_t b = i < n - 1 ? base : B - base * (n - 1);
        XS_TRY(xs_schedule_append(out, rw->producers, b, gap / n));
    }
    return XS_OK;
}

static xs_status predict_makespan(const xs_profile *p, const xs_schedule *s, double *ns)
{
    xs_result r;
    const xs_sim_opts so = {.skip_row_medians = 1}; /* the makespan alone: memory in producers */
    XS_TRY(xs_simulate(p, s, &so, &r));
    *ns = r.makespan_ns;
    xs_result_free(&r);
    return XS_OK;
}

/* Candidate: split each burst to fit the headroom; optionally move work from later rows with
 * surplus (gap beyond what they need) to earlier rows short of it, nearest donors first. */
static xs_status build_candidate(const xs_profile *p, const xs_schedule *s, const xs_plan_opts *o,
                                 int move, xs_schedule *out, double *moved_ns, int *nsplit)
{
    const int n = s->nrows;
    int *split = malloc((size_t)n * sizeof *split);
    double *gap = malloc((size_t)n * sizeof *gap), *need = malloc((size_t)n * sizeof *need);
    xs_status st = XS_OK;
    memset(out, 0, sizeof *out);
    *moved_ns = 0;
    *nsplit = 0;
    if (!split || !gap || !need) {
        st = xs_seterr(XS_ENOMEM, "out of memory planning %d rows", n);
        goto done;
    }
    for (int r = 0; r < n; r++) {
        split[r] = split_needed(p, &s->rows[r], o->headroom, o->max_split);
        *nsplit += split[r] > 1;
        gap[r] = s->rows[r].gap_ns;
        need[r] = gap_needed(p, &s->rows[r], split[r]);
    }
    if (move) {
        int j = 1;
        for (int r = 0; r < n; r++) {
            double deficit = need[r] - gap[r];
            if (j <= r)
                j = r + 1;
            while (deficit > 0 && j < n) {
                double surplus = gap[j] - need[j];
                if (surplus <= 0) {
                    j++;
                    continue;
                }
                double t = surplus < deficit / (1 + o->move_cost) ? surplus
                                                                  : deficit / (1 + o->move_cost);
                gap[j] -= t;
                gap[r] += t * (1 + o->move_cost);
                deficit -= t * (1 + o->move_cost);
                *moved_ns += t;
                if (gap[j] - need[j] <= 1e-9)
                    j++;
            }
        }
    }
    for (int r = 0; r < n && st == XS_OK; r++)
        st = emit_split(out, &s->rows[r], split[r], gap[r]);
    if (st != XS_OK)
        xs_schedule_free(out);
done:
    free(split);
    free(gap);
    free(need);
    return st;
}

xs_status xs_plan_schedule(const xs_profile *p, const xs_schedule *s, const xs_plan_opts *opts,
                           xs_plan *out)
{
    xs_plan_opts o;
    if (opts)
        o = *opts;
    else
        xs_plan_opts_default(&o);
    if (!(o.headroom > 0 && o.headroom <= 1))
        o.headroom = 0.9;
    if (o.max_split < 1)
        o.max_split = 64;
    if (!(o.move_cost >= 0))
        return xs_seterr(XS_EINVAL, "move cost %g must be >= 0", o.move_cost);
    memset(out, 0, sizeof *out);
    XS_TRY(xs_profile_check(p, "profile"));

    out->criterion_ok = 1;
    double work = 0, bytes = 0;
    for (int r = 0; r < s->nrows; r++) {
        const xs_row *rw = &s->rows[r];
        xs_bg bg;
        xs_bg_eval(p, rw->producers, (double)rw->bytes_per_producer, rw->gap_ns, &bg);
        out->criterion_ok &= bg.no_backpressure;
        work += bg.t_iss0_ns + rw->gap_ns;
        bytes += bg.volume_bytes;
    }
    /* producer 0 takes part in every row, so no makespan beats its unstalled timeline; and the
     * last byte cannot be accepted before all but Q bytes have drained (less the c/r by which a
     * chunk's first bytes precede its acceptance in the event model) */
    double drain = (bytes - p->capacity_bytes) / p->drain_bytes_per_ns -
                   p->chunk_bytes / p->issue_bytes_per_ns;
    out->bound_ns = work > drain ? work : drain;
    /* a plan that splits must stay a schedule: refused now, in the user's numbers, not after
     * the original's simulation (the simulations keep no issue windows, so rows x producers is
     * not bounded; rows are, by XS_MAX_ROWS) */
    if (!out->criterion_ok && (int64_t)s->nrows * o.max_split > XS_MAX_ROWS) {
        int64_t rows = 0;
        for (int r = 0; r < s->nrows; r++)
            rows += split_needed(p, &s->rows[r], o.headroom, o.max_split);
        if (rows > XS_MAX_ROWS)
            return xs_seterr(XS_ERANGE, "splitting the bursts of %d rows (--max-split %d, "
                             "--headroom %g) gives %" PRId64 " rows; a schedule has at most %d "
                             "rows (docs/MODEL.md, Sizes): lower --max-split", s->nrows,
                             o.max_split, o.headroom, rows, XS_MAX_ROWS);
    }
    XS_TRY(predict_makespan(p, s, &out->original_ns));

    /* the plan starts as the original */
    for (int r = 0; r < s->nrows; r++)
        XS_TRY(xs_schedule_append(&out->planned, s->rows[r].producers,
                                  s->rows[r].bytes_per_producer, s->rows[r].gap_ns));
    out->planned_ns = out->original_ns;
    if (out->criterion_ok) {
        snprintf(out->how, sizeof out->how,
                 "piggyback: every burst meets the criterion; schedule kept");
        return XS_OK;
    }

    int best = -1;
    double best_moved = 0;
    int best_split = 0;
    for (int move = 0; move <= (o.allow_move ? 1 : 0); move++) {
        xs_schedule cand;
        double moved, ns;
        int nsplit;
        XS_TRY(build_candidate(p, s, &o, move, &cand, &moved, &nsplit));
        xs_status st = predict_makespan(p, &cand, &ns);
        if (st != XS_OK) {
            xs_schedule_free(&cand);
            return st;
        }
        /* keep a change only when it is predicted at least 0.5 % faster */
        if (ns < out->planned_ns * 0.995) {
            xs_schedule_free(&out->planned);
            out->planned = cand;
            out->planned_ns = ns;
            best = move;
            best_moved = moved;
            best_split = nsplit;
        } else {
            xs_schedule_free(&cand);
        }
    }
    if (best < 0) {
        snprintf(out->how, sizeof out->how,
                 "reshape cannot help: no split or move is predicted faster (%s); schedule kept",
                 drain >= work ? "drain-bound" : "issue-bound");
        return XS_OK;
    }
    out->reshaped = 1;
    snprintf(out->how, sizeof out->how,
             "reshape: split %d of %d bursts to fit %.0f%% of the headroom%s%.1f us of work "
             "moved earlier; %d rows planned", best_split, s->nrows, 100 * o.headroom,
             best ? ", " : "", best ? best_moved / 1e3 : 0.0, out->planned.nrows);
    if (!best) {
        /* no move: drop the zero-work phrase */
        snprintf(out->how, sizeof out->how,
                 "reshape: split %d of %d bursts to fit %.0f%% of the headroom; %d rows planned",
                 best_split, s->nrows, 100 * o.headroom, out->planned.nrows);
    }
    return XS_OK;
}
