// SPDX-License-Identifier: Apache-2.0
/*
 * ep_sim.c - the EP model's run of the event engine (src/ep_sim.h explains it): the producers'
 * programs hand their bursts to the one engine of src/sim.c (src/engine.h) when the EP driver
 * starts them; this file adds the main loops' virtual clock, which slows while the backlog is
 * above block_bytes, and the blocked intervals of the stall replay.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ep_sim.h"

void xs_msim_free(xs_msim *g)
{
    xs_engine_close(g->eng, NULL);
    free(g->pev.a);
    free(g->pr);
    free(g->want);
    free(g->wanted);
    free(g->w0);
    free(g->w1);
    free(g->blk);
    memset(g, 0, sizeof *g);
}

/* The engine's take: the burst the driver started (xs_msim_start), else wait. */
static int xs_msim_take(void *ctx, int p, double t_ns, xs_engine_burst *b)
{
    xs_msim *g = ctx;
    (void)t_ns;
    if (!g->wanted[p])
        return 0;
    g->wanted[p] = 0;
    *b = g->want[p];
    return 1;
}

/* A window closed: in a whole run (g->user set) the producer in a burst steps on at its end; in
 * the stall replay the window is kept by task. */
static void xs_msim_closed(void *ctx, int p, int task, double t_start_ns, double t_end_ns)
{
    xs_msim *g = ctx;
    if (!g->user) {
        if (task >= 0 && task < g->nwin) {
            g->w0[task] = t_start_ns;
            g->w1[task] = t_end_ns;
        }
        return;
    }
    if (g->pr[p].state != XS_P_BURST)
        return;
    if (xs_evheap_push(&g->pev, (xs_ev){t_end_ns, 0, p}))
        g->oom = 1;
}

xs_status xs_msim_init(xs_msim *g, const xs_profile *p, const xs_moe_model *mm, int np, int nwin,
                       double r_local)
{
    memset(g, 0, sizeof *g);
    XS_TRY(xs_profile_check(p, "profile"));
    g->r = p->issue_bytes_per_ns;
    g->R = p->drain_bytes_per_ns;
    g->c = p->chunk_bytes >= 1 ? floor(p->chunk_bytes) : 1;
    /* the state's bound of this model (the engine's reserve counts the tandem buffer: see
     * xs_engine_opts.ep_stage) */
    const double rho = (p->reserve_bytes_per_producer > 0 ? p->reserve_bytes_per_producer : 0) +
                       (p->buffer_bytes_per_producer > 0 ? p->buffer_bytes_per_producer : 0);
    const int q =
        (int)floor((p->queue_bytes_per_producer > 0 ? p->queue_bytes_per_producer : 0) / g->c);
    int ring_m = 0;
    if (p->capacity_bytes_per_producer > 0) {
        double m = floor((p->capacity_bytes_per_producer + rho) / g->c);
        ring_m = m < 1 ? 1 : m > 1e6 ? 1000000 : (int)m;
    }
    if (q > 4096 || (double)np * (q + 1 + ring_m) > (double)(1 << 27))
        return xs_seterr(XS_ERANGE, "moe model: %d producers x a queue of %d and a cap of %d "
                         "chunks: too much state (raise chunk_bytes)", np, q, ring_m);
    g->r_local = r_local > 0 ? r_local : g->r;
    g->X = mm && mm->block_bytes > 0 ? mm->block_bytes : INFINITY;
    g->x_ns = g->X / g->R;
    g->s = mm ? (mm->block_speed < 0 ? 0 : mm->block_speed > 1 ? 1 : mm->block_speed) : 1;
    g->np = np;
    g->t_now = 0;
    g->nwin = nwin > 0 ? nwin : 0;
    g->pr = calloc((size_t)np, sizeof *g->pr);
    g->want = calloc((size_t)np, sizeof *g->want);
    g->wanted = calloc((size_t)np, sizeof *g->wanted);
    g->w0 = malloc(sizeof(double) * (size_t)(g->nwin + 1));
    g->w1 = malloc(sizeof(double) * (size_t)(g->nwin + 1));
    if (!g->pr || !g->want || !g->wanted || !g->w0 || !g->w1) {
        xs_msim_free(g);
        return xs_seterr(XS_ENOMEM, "moe model: out of host memory for %d producers", np);
    }
    for (int i = 0; i < g->nwin; i++)
        g->w0[i] = g->w1[i] = NAN;
    for (int i = 0; i < np; i++)
        g->pr[i].next_wait = -1;
    const xs_engine_program prog = {xs_msim_take, xs_msim_closed, g};
    const xs_engine_opts eo = {.sim = NULL, .nring = -1, .ep_stage = 1};
    xs_status st = xs_engine_open(p, np, &prog, &eo, &g->eng);
    if (st != XS_OK) {
        xs_msim_free(g);
        return st;
    }
    g->d_last = xs_engine_d_last(g->eng);
    g->t_res = g->d_last - g->x_ns;
    return XS_OK;
}

void xs_msim_start(xs_msim *g, int p, double tot, double rem, double ns_per_byte, int task,
                   double t)
{
    g->want[p] = (xs_engine_burst){.start_ns = t, .bytes = tot, .stage_bytes = rem,
                                   .ns_per_byte = ns_per_byte, .gap_ns = 0, .task = task};
    g->wanted[p] = 1;
    xs_engine_wake(g->eng, p, t);
    if (xs_engine_oom(g->eng))
        g->oom = 1;
}

/* The stall replay's blocked intervals: [t_acc, until) merged into the last one it overlaps. */
static void xs_msim_blocked(xs_msim *g, double t_acc, double until)
{
    if (!(until > t_acc))
        return;
    if (g->nblk && t_acc <= g->blk[2 * g->nblk - 1]) {
        if (until > g->blk[2 * g->nblk - 1])
            g->blk[2 * g->nblk - 1] = until;
        return;
    }
    if (g->nblk == g->cap_blk) {
        int nc = g->cap_blk ? 2 * g->cap_blk : 256;
        double *nbk = realloc(g->blk, sizeof(double) * 2 * (size_t)nc);
        if (!nbk) {
            g->oom = 1;
            return;
        }
        g->blk = nbk;
        g->cap_blk = nc;
    }
    g->blk[2 * g->nblk] = t_acc;
    g->blk[2 * g->nblk + 1] = until;
    g->nblk++;
}

void xs_msim_stage_accept(xs_msim *g, double t_next)
{
    (void)t_next; /* the engine accepts at the time xs_msim_stage_next found */
    const double t_acc = xs_engine_step(g->eng);
    g->d_last = xs_engine_d_last(g->eng); /* only an acceptance moves it */
    g->t_res = g->d_last - g->x_ns;
    if (g->record_blocked && !isnan(t_acc))
        xs_msim_blocked(g, t_acc, g->t_res);
    if (xs_engine_oom(g->eng))
        g->oom = 1;
}
