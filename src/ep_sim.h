// SPDX-License-Identifier: Apache-2.0
/*
 * ep_sim.h - the EP model's run of the event engine (src/engine.h, src/sim.c), shared by the
 * whole-run prediction (src/ep_model.c) and the per-tile stall replay (src/ep_stall.c). Internal
 * to the core.
 *
 * One event simulation serves the prediction of a whole run (xs_moe_predict: every CTA takes the
 * next task when free) and the per-tile stall of a measured run (xs_moe_stall_predict: every burst
 * starts when it did). Producers are CTAs. Their combine bursts pass through the X-Stage of the
 * one engine of src/sim.c (docs/MODEL.md, "Event model") under its EP kernel's rules
 * (xs_engine_opts.ep_stage). A Linear-2 tile's rows go to rank 0 (HBM) or to the link: its stream
 * carries both, so a chunk takes c / r_tile to issue and brings c * remote / total bytes into the
 * stage. What the kernel adds here (xs_moe_model): while the backlog is above block_bytes every
 * CTA's main loop runs at block_speed (the main loops' virtual clock V); a paced plan holds a
 * tile's burst until a software link at pace_drain_frac * R has at most pace_bytes reserved (in
 * src/ep_model.c). The driver interleaves its own events (pev; the main loops' ends, in
 * src/ep_model.c) with the stage's by time.
 */
#ifndef XSTAGE_EP_SIM_H
#define XSTAGE_EP_SIM_H

#include <stdint.h>

#include "engine.h"
#include "evheap.h"
#include "xstage_ep.h"

enum { XS_P_IDLE, XS_P_DEP, XS_P_COMP, XS_P_GATE, XS_P_BURST, XS_P_LOCAL, XS_P_DONE };

/* a producer's program (xs_moe_predict) */
typedef struct {
    int state, kind, rb, nb, next_wait;
    int cur;                 /* the task it runs (index in the list) */
    double rem, tot;         /* the Linear-2 tile's bytes */
} xs_mprod;

typedef struct {
    /* profile */
    double r, R, c, r_local; /* issue rate, drain rate (bytes/ns), chunk (bytes), local rate */
    /* kernel */
    double X, s;             /* block_bytes, block_speed */
    double x_ns;             /* X / R: how long a backlog of X takes to drain (ns) */
    double d_last;           /* the stage's departure time of its last accepted byte (ns), as
                              * of its last acceptance (nothing else moves it) */
    double t_res;            /* d_last - x_ns: the backlog is above X before this time (given no
                              * further acceptance) */
    double t_now, V;         /* the clock and the main loops' virtual clock (ns) */
    xs_engine *eng;          /* the stage */
    xs_evheap pev;           /* the driver's timed steps (t) */
    xs_mprod *pr;
    int np;
    xs_engine_burst *want;   /* [np] the burst a producer's program hands over next */
    char *wanted;            /* [np] 1 while want holds one */
    double *w0, *w1;         /* [nwin] windows of the bursts by task (stall replay; NAN: open) */
    int nwin;
    /* blocked intervals (stall replay), merged */
    double *blk;
    int nblk, cap_blk;
    int record_blocked, oom;
    void *user;        /* the whole run (src/ep_model.c) that closed windows step on; NULL in
                        * the stall replay, which reads the windows from w0/w1 */
} xs_msim;

void xs_msim_free(xs_msim *g);
/* The engine for np producers with the profile p and the kernel's terms mm (NULL: no blocking);
 * nwin: bursts whose windows are kept, by task (0: none); r_local: the issue rate of local rows
 * (0: the profile's r). On failure g holds nothing. */
xs_status xs_msim_init(xs_msim *g, const xs_profile *p, const xs_moe_model *mm, int np, int nwin,
                       double r_local);
/* Producer p starts a burst at time t: tot bytes of stream, rem of them through the stage,
 * ns_per_byte to issue; task: its index for the windows (-1: none). */
void xs_msim_start(xs_msim *g, int p, double tot, double rem, double ns_per_byte, int task,
                   double t);
/* Advance the clock (and the main loops' virtual clock V) to t. */
static inline void xs_msim_advance(xs_msim *g, double t)
{
    if (!(t > g->t_now))
        return;
    const double tr = g->t_res;
    if (g->t_now < tr) {
        const double seg = (t < tr ? t : tr) - g->t_now;
        g->V += g->s * seg;
        g->t_now += seg;
    }
    g->V += t - g->t_now;
    g->t_now = t;
    xs_engine_advance(g->eng, t);
}
/* The time at which V reaches v (no acceptance in between). */
static inline double xs_msim_t_of_v(const xs_msim *g, double v)
{
    const double dv = v - g->V;
    if (!(dv > 0))
        return g->t_now;
    const double tr = g->t_res;
    if (g->t_now < tr) {
        const double gain = g->s * (tr - g->t_now);
        if (dv <= gain)
            return g->t_now + dv / g->s;
        return tr + (dv - gain);
    }
    return g->t_now + dv;
}
/* When the stage next accepts a chunk (INFINITY: no chunk offered). */
static inline double xs_msim_stage_next(xs_msim *g) { return xs_engine_next_ns(g->eng); }
/* Accept the next chunk at t_next (from xs_msim_stage_next, the clock advanced to it). */
void xs_msim_stage_accept(xs_msim *g, double t_next);
/* The departure time of the stage's last accepted byte (ns). */
static inline double xs_msim_d_last(const xs_msim *g) { return g->d_last; }

/* The screen of the auto rule (src/ep_auto.c): xs_moe_predict_tasks with the link, no trace,
 * that gives up on a candidate that cannot win. *total_ns is the model's time as there, or
 * INFINITY once a lower bound on it proves total x fi >= best (exactly: the bound holds in
 * floating point, so a candidate compared by `total * fi < best` loses either way). Two bounds
 * (src/ep_model.c): the list's on a relaxed machine (no stage, gate or blocking), before the run
 * and each time half of the tasks left have been taken; and every 64 events the stage's drain,
 * the main loops left and the pacer. Plans with couriers or spilling run whole; adaptive plans
 * only with the second. */
xs_status xs_moe_predict_cut(const xs_moe_problem *pb, const xs_moe_task *tasks, int ntasks,
                             const xs_moe_plan *plan, const xs_profile *pf,
                             const xs_moe_model *mm, const xs_moe_costs *c, double fi,
                             double best, double *total_ns);

/* The row block whose Linear-1 tiles the interleaved plan p places before each row block b's
 * Linear-2 tiles: need[b] = min(b + its lead at b, nrb - 1), b in [0, nrb). The interleaved list
 * (xs_moe_tasks_build) is a function of these alone: two interleaved plans with equal needs
 * build the same list. */
void xs_moe_lead_need(const xs_moe_problem *pb, const xs_moe_plan *p, int *need);

/* xs_moe_auto with every candidate predicted in full: no run stops at a bound and no repeated
 * list is skipped. The reference that the screen is tested against (tests/test_ep_screen.c):
 * both give the same result, field by field. */
xs_status xs_moe_auto_exhaustive(const xs_moe_problem *pb, const xs_profile *p,
                                 const xs_moe_model *mm, const xs_moe_costs *wave_costs,
                                 const xs_moe_costs *inter_costs, const xs_moe_local_traces *lt,
                                 xs_moe_auto_result *out);

#endif /* XSTAGE_EP_SIM_H */
