// SPDX-License-Identifier: Apache-2.0
/*
 * engine.h - the incremental API of the X-Stage event engine (src/sim.c, docs/MODEL.md "Event
 * model"). Internal to the core: xs_simulate_programs drives it with a built-in program that walks
 * the schedule's rows; the EP model (src/ep_sim.c) drives it with the kernel's tasks, interleaving
 * its own events (main loops, pacer gates) by time with xs_engine_next_ns.
 *
 * A producer's program hands the engine one burst at a time through take: the engine calls it when
 * the producer starts (xs_engine_wake) and whenever the window of the producer's newest burst
 * closes (at the window's end plus the burst's gap). take returns 1 with a burst filled in, 0 when
 * the producer waits (until the driver wakes it) and -1 when its program is done. A producer may
 * have several bursts in flight (woken again before its window closed): they queue in order.
 */
#ifndef XSTAGE_ENGINE_H
#define XSTAGE_ENGINE_H

#include "xstage.h"

typedef struct {
    double start_ns;    /* when the burst starts, before the issue overhead (ns; preset: take's t) */
    double bytes;       /* bytes of the producer's stream (>= 0) */
    double stage_bytes; /* of them through the stage, pro rata per chunk (preset -1: all) */
    double ns_per_byte; /* issue time of one byte of the stream (preset -1: 1 / the profile's r) */
    double gap_ns;      /* the program's work after the burst's issue ends (ns; preset 0) */
    int task;           /* the caller's index: closed, and the chunk trace's row */
} xs_engine_burst;

typedef struct {
    int (*take)(void *ctx, int p, double t_ns, xs_engine_burst *b);
    /* the issue window of producer p's burst `task` closed: [t_start_ns, t_end_ns] (may be NULL) */
    void (*closed)(void *ctx, int p, int task, double t_start_ns, double t_end_ns);
    void *ctx;
} xs_engine_program;

typedef struct {
    const xs_sim_opts *sim; /* the chunk trace and the backlog record (NULL: neither) */
    /* The per-producer cap (capacity_bytes_per_producer): producers 0..nring-1 are tracked (the
     * driver knows which producers can offer more than the cap); -1: every producer. */
    int nring;
    /* The EP kernel's stage (src/ep_sim.c), which differs from the schedule's in these rules:
     * times compare exactly (no relative 1e-12 instant); the stage's clock is the driver's
     * (xs_engine_advance, from 0): reserves leave once drained by that clock and the next
     * acceptance is no earlier than it; the profile's buffer_bytes_per_producer counts as
     * reserve (no tandem queues), which leaves when its holder's bytes have drained (reserve_release
     * and reserve_shared_fraction ignored) and leaves once per holder; no overflow loss; a
     * burst's window ends when the chunk q places before its last one left the queue (no share
     * for a short last chunk); the cap is at most 1e6 chunks. Bursts carry their own issue rate
     * and stage share (xs_engine_burst) under either rules. */
    int ep_stage;
} xs_engine_opts;

typedef struct xs_engine xs_engine;

/* Open an engine for np producers with the profile pf and the program prog (copied). On success
 * *out owns the engine (xs_engine_close releases it); on failure *out is NULL. */
xs_status xs_engine_open(const xs_profile *pf, int np, const xs_engine_program *prog,
                         const xs_engine_opts *opts, xs_engine **out);
/* Producer p's program (re)starts at t_ns: take is called and any window that closes at once
 * closes. */
void xs_engine_wake(xs_engine *e, int p, double t_ns);
/* When the stage next accepts a chunk (INFINITY: no chunk offered); releases the reserves that
 * have drained by the clock. xs_engine_step accepts at this time. */
double xs_engine_next_ns(xs_engine *e);
/* Accept the next chunk at the time the last xs_engine_next_ns returned; windows close, programs
 * go on. Returns the acceptance time, or NAN when the chunk was held back at its producer's cap. */
double xs_engine_step(xs_engine *e);
/* ep_stage: the driver's clock moves to t_ns (no earlier than now). */
void xs_engine_advance(xs_engine *e, double t_ns);
/* The departure time of the last accepted byte (ns): the backlog at t is R * (that - t). */
double xs_engine_d_last(const xs_engine *e);
/* 1 once the engine ran out of host memory (its state is then incomplete). */
int xs_engine_oom(const xs_engine *e);
/* Release the engine; with out, its peak backlog and backlog record go there first. */
void xs_engine_close(xs_engine *e, xs_result *out);

/* The run of xs_simulate_programs on a stage that never holds a chunk back (the TP and UP
 * planners' ideal run, docs/MODEL.md "Event model"): each producer's chunks are accepted at their
 * ready times, its times computed from its own program in O(chunks) with no event heap. The
 * rows, windows (o->record_windows) and makespan are the engine's (within 1e-9 relative:
 * acceptances the engine takes as one instant may shift by 1e-12 relative); *drained_ns (may be
 * NULL) is the departure of the last accepted byte (the engine's d_last); the peak backlog is
 * not followed (NAN) and o may ask for no sync, trace or backlog record. Fails with XS_EINVAL
 * when the profile's stage could hold a chunk back: the run's bytes exceed its capacity less one
 * chunk, or a producer could reach its per-producer cap. */
xs_status xs_simulate_free(const xs_profile *pf, const xs_schedule *s, const xs_programs *pg,
                           const xs_sim_opts *o, xs_result *out, double *drained_ns);

#endif /* XSTAGE_ENGINE_H */
