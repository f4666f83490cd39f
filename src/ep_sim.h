/*
 * ep_sim.h - the event engine of the EP model (src/ep_sim.c), shared by the whole-run prediction
 * (src/ep_model.c) and the per-tile stall replay (src/ep_stall.c). Internal to the core.
 *
 * One event simulation serves the prediction of a whole run (xs_moe_predict: every CTA takes the
 * next task when free) and the per-tile stall of a measured run (xs_moe_stall_predict: every burst
 * starts when it did). Producers are CTAs. Their combine bursts pass through the X-Stage exactly
 * as in src/sim.c (docs/MODEL.md, "Event model"): a burst pays the overhead o and streams its rows
 * in chunks of c into the producer's queue of b bytes; a chunk is offered when it is complete and
 * its place in the queue is free; the stage is one FIFO server draining at R whose room is Q plus a
 * reserve per producer with bytes in it (and an optional per-producer cap); chunks ready at the
 * same acceptance contend in start-time fair queueing with the producers' arbitration weights; a
 * burst's issue window ends when its last chunk entered the queue. A Linear-2 tile's rows go to
 * rank 0 (HBM) or to the link: its stream carries both, so a chunk takes c / r_tile to issue and
 * brings c * remote / total bytes into the stage. What the kernel adds (xs_moe_model): while the
 * backlog is above block_bytes every CTA's main loop runs at block_speed; a paced plan holds a
 * tile's burst until a software link at pace_drain_frac * R has at most pace_bytes reserved.
 */
#ifndef XSTAGE_EP_SIM_H
#define XSTAGE_EP_SIM_H

#include <stdint.h>

#include "evheap.h"
#include "xstage_ep.h"

typedef struct {
    double t0;       /* start of the burst (before the overhead); NaN until started */
    double tot, rem; /* bytes of the stream; of them through the stage */
    double ns_per_byte; /* issue time of one byte of the stream */
    int64_t first, last; /* producer-global indices of its chunks (set when started) */
    int64_t nch;
    double end;      /* issue window end; NaN until known */
    int next;        /* the producer's next burst (-1: none) */
    int task;        /* the caller's index */
} xs_burst;

enum { XS_P_IDLE, XS_P_DEP, XS_P_COMP, XS_P_GATE, XS_P_BURST, XS_P_LOCAL, XS_P_DONE };

typedef struct {
    /* chunks: the producer's bursts in order; the oldest whose window is open; the one offered */
    int head, tail, settle, ob;
    int64_t assigned, accepted, oidx;
    double orem;             /* stream bytes of ob not yet offered */
    double pend_tot, pend_rem; /* the chunk on offer */
    int offering;            /* 1 while a chunk is offered (in a heap) */
    double ready, a_prev, ftag, weight, d_own;
    int outstanding;
    double *acc;             /* acceptance times of the last q+1 chunks */
    double *ring;            /* departure times of the last ring_m chunks (per-producer cap) */
    int ring_head, ring_n;
    /* program (xs_moe_predict) */
    int state, kind, rb, nb, next_wait;
    int cur;                 /* the task it runs (index in the list) */
    double rem, tot;         /* the Linear-2 tile's bytes */
} xs_mprod;

typedef struct {
    /* profile */
    double r, R, o, Q, rho, c, r_local;
    int q, ring_m;
    /* kernel */
    double X, s;
    /* stage */
    double d_last, vtime, t_now, V;
    int n_out;
    xs_evheap fut, el, held, pev, vev;
    xs_mprod *pr;
    int np;
    double *mem;
    xs_burst *b;
    int nb, cap_b;
    /* blocked intervals (stall replay), merged */
    double *blk;
    int nblk, cap_blk;
    int record_blocked, oom;
    void *user;        /* the whole run (src/ep_model.c) that closed windows step on; NULL in
                        * the stall replay, which reads the windows from the bursts */
} xs_msim;

void xs_msim_free(xs_msim *g);
/* The engine for np producers and about nbursts bursts (it grows) with the profile p and the
 * kernel's terms mm (NULL: no blocking); r_local: the issue rate of local rows (0: the
 * profile's r). On failure g holds nothing. */
xs_status xs_msim_init(xs_msim *g, const xs_profile *p, const xs_moe_model *mm, int np,
                       int nbursts, double r_local);
/* A new burst of producer p (not started yet); returns its index or -1 when out of memory. */
int xs_msim_burst(xs_msim *g, int p, double tot, double rem, double ns_per_byte, int task);
/* Advance the clock (and the main loops' virtual clock V) to t. */
void xs_msim_advance(xs_msim *g, double t);
/* The time at which V reaches v (no acceptance in between). */
double xs_msim_t_of_v(const xs_msim *g, double v);
/* Producer p starts burst bi at time t: its chunks go to the queue. */
void xs_msim_start(xs_msim *g, int p, int bi, double t);
/* When the stage next accepts a chunk (INFINITY: no chunk offered). */
double xs_msim_stage_next(xs_msim *g);
/* Accept the next chunk at t_next (from xs_msim_stage_next, the clock advanced to it). */
void xs_msim_stage_accept(xs_msim *g, double t_next);

#endif /* XSTAGE_EP_SIM_H */
