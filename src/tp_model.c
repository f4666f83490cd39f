// SPDX-License-Identifier: Apache-2.0
/*
 * tp_model.c - the X-Stage model of a TP order (include/xstage_tp.h xs_tp_predict): the order as
 * a burst-gap schedule simulated on a profile (xs_simulate), or, for an order built for
 * couriers, a fluid model of the link behind the compute steps (docs/TP.md "Couriers (sm90)").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "tp_plan.h"

/* The ideal stage of profile p: draining at 1e9 bytes/ns, unlimited, no per-producer cap. */
static xs_profile ideal_of(const xs_profile *p)
{
    xs_profile ideal = *p;
    ideal.drain_bytes_per_ns = 1e9;
    ideal.capacity_bytes = 1e15;
    ideal.capacity_bytes_per_producer = 0;
    return ideal;
}

/* Completion (ns) of `sched` after `lead` ns of compute on the ideal stage (draining at 1e9
 * bytes/ns, unlimited, no cap): max(makespan, last byte drained), from the direct run. */
static xs_status ideal_total(const xs_profile *p, const xs_schedule *sc, double lead, double *ns)
{
    if (sc->nrows == 0) {
        *ns = lead;
        return XS_OK;
    }
    const xs_profile ideal = ideal_of(p);
    xs_sim_opts o;
    memset(&o, 0, sizeof o);
    o.skip_row_medians = 1;
    xs_result res;
    double drained = -INFINITY;
    XS_TRY(xs_simulate_free(&ideal, sc, NULL, &o, &res, &drained));
    *ns = lead + (res.makespan_ns > drained ? res.makespan_ns : drained);
    xs_result_free(&res);
    return XS_OK;
}

/* Completion (ns) of `sched` after `lead` ns of compute: max(makespan, last byte drained). */
static xs_status sim_total(const xs_profile *p, const xs_schedule *sc, double lead, double *ns)
{
    if (sc->nrows == 0) {
        *ns = lead;
        return XS_OK;
    }
    double chunks = 0;
    const double cb = p->chunk_bytes > 1 ? p->chunk_bytes : 1;
    for (int r = 0; r < sc->nrows; r++)
        chunks += sc->rows[r].producers * ceil((double)sc->rows[r].bytes_per_producer / cb);
    xs_sim_opts o;
    memset(&o, 0, sizeof o);
    o.record_backlog = 1;
    o.skip_row_medians = 1; /* the rows are not read */
    o.max_samples = (size_t)chunks + 16; /* never decimated: the last sample is the last byte */
    xs_result res;
    XS_TRY(xs_simulate(p, sc, &o, &res));
    double drained = 0;
    if (res.nbacklog) {
        const xs_sample *last = &res.backlog[res.nbacklog - 1];
        drained = last->t_ns + last->backlog_bytes / p->drain_bytes_per_ns;
    }
    *ns = lead + (res.makespan_ns > drained ? res.makespan_ns : drained);
    xs_result_free(&res);
    return XS_OK;
}

/* An order with couriers (docs/TP.md "Couriers (sm90)"): the compute CTAs run steps of G'
 * tasks, each step lasting its mean task cost per CTA (the measured costs; no link); the
 * couriers' pushes are ready at the start and go first; a remote tile's bytes are ready at the
 * end of its task's step and follow in list order; the link carries them at min(R, the pace,
 * C x the per-courier rate of xs_tp_plan_set_courier_rate) from the first ready byte on. model =
 * max(compute end, last byte over the link); ideal = the compute end. No capacity, no issue
 * cost, no copy latency beyond that rate: a simple bound-like model, stated as such. */
static xs_status tp_predict_couriers(const xs_tp_plan *pl, int slot, const xs_profile *p,
                                     const xs_tp_costs *c, xs_tp_pred *out)
{
    const int G = tp_slot_grid(pl, slot), n = pl->ntasks[slot], S = (n + G - 1) / G;
    const xs_tp_task *v = pl->tasks[slot];
    double *end = (double *)calloc((size_t)S, sizeof(double));
    if (!end)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a schedule");
    for (int i = 0; i < n; i++) {
        xs_tp_task x = v[i];
        end[i / G] += tp_task_cost(c, &x) / G;
    }
    for (int s = 1; s < S; s++)
        end[s] += end[s - 1];
    /* the link: R, or the couriers' pace, or what C couriers copy, whichever is lowest */
    double R = p->drain_bytes_per_ns > 0 ? p->drain_bytes_per_ns : 1e-9;
    const char *lim = "R";
    if (pl->cour_pace > 0 && pl->cour_pace < R)
        R = pl->cour_pace, lim = "their pace";
    if (pl->cour_rate > 0 && pl->scour[slot] * pl->cour_rate < R)
        R = pl->scour[slot] * pl->cour_rate, lim = "their copy rate";
    /* the couriers' pushes first: ready at the start, on the link before any tile */
    double link = 0;
    for (int e = 0; e < pl->npush[slot]; e++) {
        const int w = pl->walk[slot][e];
        const xs_tp_task x = tp_mk_push(XS_TP_WALK_RANK(w, pl->in.ag_chunks),
                                  XS_TP_WALK_CHUNK(w, pl->in.ag_chunks));
        const double b = tp_task_bytes(pl, &x);
        link += b / R;
        out->bytes += b;
    }
    for (int i = 0; i < n; i++) {
        xs_tp_task x = v[i];
        const double b = tp_task_bytes(pl, &x);
        if (b > 0) {
            link = (link > end[i / G] ? link : end[i / G]) + b / R;
            out->bytes += b;
        }
    }
    out->ideal_ns = S > 0 ? end[S - 1] : 0;
    out->model_ns = link > out->ideal_ns ? link : out->ideal_ns;
    out->rows = 0;
    out->criterion_ok = -1;
    snprintf(out->how, sizeof out->how, "%d couriers: link at %.1f B/ns (%s) from the first ready "
             "remote byte (%d pushes first), compute on %d CTAs (fluid model)", pl->scour[slot], R,
             lim, pl->npush[slot], G);
    free(end);
    return XS_OK;
}

xs_status xs_tp_predict(const xs_tp_plan *pl, int slot, const xs_profile *p, const xs_tp_costs *c,
                        int with_plan, xs_tp_pred *out)
{
    return tp_predict(pl, slot, p, c, with_plan, 1, out);
}

/* The non-courier order of slot as a burst-gap schedule of G producers (*sc, free with
 * xs_schedule_free; empty when no step stores), the compute before its first row (*lead, ns)
 * and its remote bytes (*bytes_out). */
static xs_status tp_schedule_of(const xs_tp_plan *pl, int slot, const xs_tp_costs *c,
                                xs_schedule *sc_out, double *lead_out, double *bytes_out)
{
    *bytes_out = 0;
    const int G = pl->grid, n = pl->ntasks[slot], S = (n + G - 1) / G;
    const xs_tp_task *v = pl->tasks[slot];
    /* per step: bytes stored at its end (burst), bytes streamed through its main loops, mean
     * compute per CTA */
    double *bytes = (double *)calloc((size_t)S, sizeof(double));
    double *strm = (double *)calloc((size_t)S + 1, sizeof(double));
    double *comp = (double *)calloc((size_t)S, sizeof(double));
    if (!bytes || !strm || !comp) {
        free(bytes);
        free(strm);
        free(comp);
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for a schedule");
    }
    for (int i = 0; i < n; i++) {
        const int s = i / G;
        xs_tp_task x = v[i];
        double b = tp_task_bytes(pl, &x);
        if ((x.kind & (XS_TP_K_SPREAD | XS_TP_K_PUSH | XS_TP_K_TILE)) ==
            (XS_TP_K_SPREAD | XS_TP_K_PUSH | XS_TP_K_TILE)) {
            xs_tp_task push = x;
            push.kind = XS_TP_K_PUSH;
            const double pb = tp_task_bytes(pl, &push);
            strm[s] += pb; /* through this tile's main loop */
            b -= pb;
        }
        if ((x.kind & XS_TP_K_DEFER) && s + 1 < S)
            strm[s + 1] += b; /* through the CTA's next tile */
        else
            bytes[s] += b;
        comp[s] += tp_task_cost(c, &x) / G;
    }
    /* the timeline, one (bytes, gap) pair after the other: step s computes for comp[s] while its
     * streamed bytes go out in NS equal parts, then stores its burst; pairs with no bytes fold
     * their gap into the previous row (or the lead) */
    const int NS = 8;
    xs_schedule sc;
    memset(&sc, 0, sizeof sc);
    double lead = 0, carry = 0; /* carry: burst bytes waiting for the next row */
    xs_status st = XS_OK;
    for (int s = 0; s < S && st == XS_OK; s++) {
        *bytes_out += bytes[s] + strm[s];
        const int parts = strm[s] >= 16.0 * G ? NS : 1;
        for (int j = 0; j < parts && st == XS_OK; j++) {
            const double b = carry + (parts > 1 ? strm[s] / NS : strm[s]);
            const double gap = comp[s] / parts;
            carry = 0;
            const int64_t per = (int64_t)llround(b / G / 16.0) * 16;
            if (per < 16) {
                if (sc.nrows)
                    sc.rows[sc.nrows - 1].gap_ns += gap;
                else
                    lead += gap;
            } else {
                st = xs_schedule_append(&sc, G, per, gap);
            }
        }
        carry = bytes[s];
    }
    if (st == XS_OK && carry / G >= 8.0)
        st = xs_schedule_append(&sc, G, (int64_t)llround(carry / G / 16.0) * 16, 0.0);
    free(bytes);
    free(strm);
    free(comp);
    if (st != XS_OK) {
        xs_schedule_free(&sc);
        return st;
    }
    *sc_out = sc;
    *lead_out = lead;
    return XS_OK;
}

xs_status tp_predict(const xs_tp_plan *pl, int slot, const xs_profile *p, const xs_tp_costs *c,
                     int with_plan, int with_ideal, xs_tp_pred *out)
{
    memset(out, 0, sizeof *out);
    if (slot < 0 || slot >= XS_TP_SLOTS || !pl->ntasks[slot])
        return xs_seterr(XS_EINVAL, "tp: order slot %d is empty", slot);
    if (!c)
        return xs_seterr(XS_EINVAL, "tp: prediction needs measured costs");
    if (pl->scour[slot] > 0)
        return tp_predict_couriers(pl, slot, p, c, out);
    xs_schedule sc;
    double lead = 0;
    xs_status st = tp_schedule_of(pl, slot, c, &sc, &lead, &out->bytes);
    if (st != XS_OK)
        return st;
    if (st == XS_OK)
        st = sim_total(p, &sc, lead, &out->model_ns);
    if (st == XS_OK)
        out->ideal_ns = NAN;
    if (st == XS_OK && with_ideal)
        st = ideal_total(p, &sc, lead, &out->ideal_ns);
    out->rows = sc.nrows;
    out->criterion_ok = 1;
    if (st == XS_OK && sc.nrows && !with_plan) {
        out->criterion_ok = -1;
        snprintf(out->how, sizeof out->how, "(not planned)");
    } else if (st == XS_OK && sc.nrows) {
        xs_plan xp;
        st = xs_plan_schedule(p, &sc, NULL, &xp);
        if (st == XS_OK) {
            out->criterion_ok = xp.criterion_ok;
            snprintf(out->how, sizeof out->how, "%s", xp.how);
            xs_plan_free(&xp);
        }
    } else if (st == XS_OK) {
        snprintf(out->how, sizeof out->how, "no remote bytes");
    }
    xs_schedule_free(&sc);
    return st;
}

/* A lower bound on the completion sim_total finds for `sc` after `lead` on profile p: the
 * stage only delays (every chunk is accepted no earlier than on the unlimited stage, so every
 * window ends no earlier), so the makespan is at least the unlimited stage's; and the stage
 * drains at most R bytes/ns, none of a row's bytes before the row's earliest window has opened
 * and paid the issue overhead, so the last byte leaves no earlier than, for every row j, that
 * time over rows j.. + their bytes / R. */
static xs_status tp_bound(const xs_profile *p, const xs_schedule *sc, double lead, double *lb)
{
    const xs_profile ideal = ideal_of(p);
    xs_sim_opts o;
    memset(&o, 0, sizeof o);
    o.record_windows = 1;
    o.skip_row_medians = 1;
    xs_result res;
    XS_TRY(xs_simulate_free(&ideal, sc, NULL, &o, &res, NULL));
    double lo = res.makespan_ns, first = INFINITY, tail = 0;
    for (int j = sc->nrows - 1; j >= 0; j--) {
        for (int q = 0; q < sc->rows[j].producers; q++) {
            const double w = res.win_start[(size_t)j * res.nproducers + q];
            first = w < first ? w : first;
        }
        tail += (double)sc->rows[j].producers * (double)sc->rows[j].bytes_per_producer;
        const double d = first + p->issue_overhead_ns + tail / p->drain_bytes_per_ns;
        lo = d > lo ? d : lo;
    }
    /* With no store queue and no buffer a window ends when its last chunk is accepted, so the
     * last window of row j ends once the stage has taken every byte of rows 0..j, which it holds
     * (Q plus every producer's reserve) less what it drained since the first byte arrived (at
     * R); the program then has the rest of its work, no shorter than on the unlimited stage
     * (each burst starts after the previous one's last acceptance: the rest does not depend on
     * when it starts). Where the producers are alike (every row the same width, the TP
     * schedules), that rest is the unlimited run's makespan less its end of row j. */
    const double c = p->chunk_bytes >= 1 ? floor(p->chunk_bytes) : 1;
    int alike = floor(p->queue_bytes_per_producer > 0 ? p->queue_bytes_per_producer / c : 0) == 0 &&
                !(floor(p->buffer_bytes_per_producer / c) > 0);
    for (int j = 1; j < sc->nrows && alike; j++)
        alike = sc->rows[j].producers == sc->rows[0].producers;
    if (alike) {
        const double K = sc->rows[0].producers;
        const double room = p->capacity_bytes +
                            K * (p->reserve_bytes_per_producer > 0 ? p->reserve_bytes_per_producer
                                                                   : 0);
        double head = 0, start = INFINITY;
        for (int q = 0; q < sc->rows[0].producers; q++) {
            const double w = res.win_start[q];
            start = w < start ? w : start;
        }
        start += p->issue_overhead_ns; /* no byte arrives earlier */
        for (int j = 0; j < sc->nrows; j++) {
            head += K * (double)sc->rows[j].bytes_per_producer;
            double end_j = -INFINITY; /* the unlimited run's end of row j (alike: all equal) */
            for (int q = 0; q < sc->rows[j].producers; q++) {
                const double w = res.win_end[(size_t)j * res.nproducers + q];
                end_j = w > end_j ? w : end_j;
            }
            const double d = start + (head - room) / p->drain_bytes_per_ns +
                             (res.makespan_ns - end_j);
            lo = d > lo ? d : lo;
        }
    }
    xs_result_free(&res);
    *lb = lead + lo;
    return XS_OK;
}

xs_status tp_rank_prep(const xs_tp_plan *pl, int slot, const xs_profile *p, const xs_tp_costs *c,
                       tp_rank_item *x)
{
    memset(x, 0, sizeof *x);
    if (slot < 0 || slot >= XS_TP_SLOTS || !pl->ntasks[slot])
        return xs_seterr(XS_EINVAL, "tp: order slot %d is empty", slot);
    if (!c)
        return xs_seterr(XS_EINVAL, "tp: prediction needs measured costs");
    if (pl->scour[slot] > 0) { /* the fluid model: as cheap as a bound */
        xs_tp_pred pp;
        XS_TRY(tp_predict_couriers(pl, slot, p, c, &pp));
        x->pred = x->lb = pp.model_ns;
        x->done = 1;
        return XS_OK;
    }
    double bytes = 0;
    XS_TRY(tp_schedule_of(pl, slot, c, &x->sc, &x->lead, &bytes));
    if (x->sc.nrows == 0) {
        x->pred = x->lb = x->lead;
        x->done = 1;
        return XS_OK;
    }
    x->lb = 0;
    return XS_OK;
}

xs_status tp_rank_bound(const xs_profile *p, tp_rank_item *x)
{
    return x->done ? XS_OK : tp_bound(p, &x->sc, x->lead, &x->lb);
}

xs_status tp_rank_finish(const xs_profile *p, tp_rank_item *x)
{
    if (x->done)
        return XS_OK;
    XS_TRY(sim_total(p, &x->sc, x->lead, &x->pred));
    x->done = 1;
    return XS_OK;
}

void tp_rank_free(tp_rank_item *x)
{
    xs_schedule_free(&x->sc);
}
