// SPDX-License-Identifier: Apache-2.0
/*
 * ep_model.c - the X-Stage model of the fused MoE kernel's combine (include/xstage_ep.h,
 * docs/EP.md "The model"): a whole run as an event simulation on src/ep_sim.c in which every CTA
 * is a producer that takes its next task when free (the wave, interleaved, adaptive and spilling
 * kernels' rules at the model's time), the couriers' link, the default model terms, and the tile
 * costs of a trace.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ep_sim.h"
#include "xstage_ep.h"

/* ---- costs from traces ----------------------------------------------------------------------- */

void xs_moe_costs_from_trace(const xs_moe_tile *t, int n, xs_moe_costs *c)
{
    memset(c, 0, sizeof *c);
    double *a = calloc((size_t)n + 1, sizeof(double));
    double *b = calloc((size_t)n + 1, sizeof(double));
    double *d = calloc((size_t)n + 1, sizeof(double));
    if (!a || !b || !d) {
        free(a);
        free(b);
        free(d);
        return;
    }
    int na = 0, nb = 0;
    double t0 = INFINITY, t1 = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (t[i].cta < 0)
            continue;
        if (t[i].kind == 1) {
            a[na] = t[i].st1_ns - t[i].mma0_ns;
            d[na++] = t[i].mma1_ns - t[i].mma0_ns;
        }
        c->wait_ns += t[i].mma0_ns - t[i].fetch_ns;
        if (t[i].fetch_ns < t0)
            t0 = t[i].fetch_ns;
        if (t[i].st1_ns > t1)
            t1 = t[i].st1_ns;
    }
    c->c1_ns = xs_median(a, (size_t)na);
    c->mma1_ns = xs_median(d, (size_t)na);
    for (int i = 0; i < n; i++)
        if (t[i].cta >= 0 && t[i].kind == 2) {
            a[nb] = t[i].st0_ns - t[i].mma0_ns;
            b[nb] = t[i].st1_ns - t[i].st0_ns;
            d[nb++] = t[i].mma1_ns - t[i].mma0_ns;
        }
    c->c2_ns = xs_median(a, (size_t)nb);
    c->span2_ns = xs_median(b, (size_t)nb);
    c->mma2_ns = xs_median(d, (size_t)nb);
    /* the streaming rate of the stores: full-size tiles only (a span has a fixed part that a
     * small tile's bytes / span would fold into its rate: zipf points, with many small row
     * blocks, measure 17-35 B/ns that way against 52 for full tiles) */
    int full = 0;
    for (int i = 0; i < n; i++)
        if (t[i].cta >= 0 && t[i].kind == 2 && t[i].total_bytes > full)
            full = t[i].total_bytes;
    nb = 0;
    for (int i = 0; i < n; i++)
        if (t[i].cta >= 0 && t[i].kind == 2 && t[i].st1_ns > t[i].st0_ns &&
            t[i].total_bytes >= 0.75 * full)
            b[nb++] = (double)t[i].total_bytes / (t[i].st1_ns - t[i].st0_ns);
    c->local_issue_bytes_per_ns = xs_median(b, (size_t)nb);
    c->kernel_ns = t1 > t0 ? t1 - t0 : 0;
    free(a);
    free(b);
    free(d);
}

/* ---- the X-Stage model ----------------------------------------------------------------------- */

void xs_moe_model_default(xs_moe_model *mm)
{
    mm->block_bytes = XS_MOE_BLOCK_BYTES;
    mm->block_speed = XS_MOE_BLOCK_SPEED;
    mm->pace_bytes = XS_MOE_PACE_BYTES;
    mm->pace_drain_frac = XS_MOE_PACE_DRAIN_FRAC;
    mm->couriers = XS_MOE_COURIERS_AUTO;
    mm->courier_pace_frac = XS_MOE_COURIER_PACE_FRAC;
    mm->courier_copy_bytes_per_ns = XS_MOE_COURIER_COPY_BYTES_PER_NS;
    mm->auto_couriers = 0;
    mm->auto_adaptive = 0;
    mm->auto_spill = 1;
    mm->lead_search = 1;
    mm->paced_lead = mm->paced_lead_end = 0;
}

/* ---- the whole run (xs_moe_predict) ---- */

/* The main loops' ends by virtual time, in (V, producer) order, as one heap would pop them: a
 * main loop that starts at V ends at V + c1 or V + c2, and V never decreases, so the ends of
 * each cost arrive in order and two FIFOs hold them. Equal ends of one cost (CTAs released
 * together) are kept in producer order at the tail. Each holds at most one end per producer. */
typedef struct {
    double *t; /* [2][np] ring: V of the end */
    int *p;    /* [2][np] ring: producer */
    int head[2], n[2], cap;
    double cost0; /* the cost of FIFO 0 (c1); every other cost goes to FIFO 1 (c2) */
} xs_vq;

static int xs_vq_init(xs_vq *v, int np, double cost0)
{
    memset(v, 0, sizeof *v);
    v->cap = np > 0 ? np : 1;
    v->cost0 = cost0;
    v->t = malloc(sizeof(double) * 2 * (size_t)v->cap);
    v->p = malloc(sizeof(int) * 2 * (size_t)v->cap);
    return v->t && v->p ? 0 : -1;
}

static void xs_vq_free(xs_vq *v)
{
    free(v->t);
    free(v->p);
}

static void xs_vq_push(xs_vq *v, double cost, double t, int p)
{
    const int f = cost == v->cost0 ? 0 : 1;
    double *ft = v->t + (size_t)f * v->cap;
    int *fp = v->p + (size_t)f * v->cap;
    int k = v->head[f] + v->n[f];
    k -= k >= v->cap ? v->cap : 0;
    v->n[f]++;
    /* ties of the tail in producer order (t never falls below the tail's: V is monotone) */
    for (int m = v->n[f] - 1; m > 0; m--) {
        const int j = k > 0 ? k - 1 : v->cap - 1;
        if (!(ft[j] == t && fp[j] > p))
            break;
        ft[k] = ft[j];
        fp[k] = fp[j];
        k = j;
    }
    ft[k] = t;
    fp[k] = p;
}

/* The FIFO whose head comes first (-1: both empty). */
static inline int xs_vq_first(const xs_vq *v)
{
    if (!v->n[0])
        return v->n[1] ? 1 : -1;
    if (!v->n[1])
        return 0;
    const double t0 = v->t[v->head[0]], t1 = v->t[v->cap + v->head[1]];
    return t1 < t0 || (t1 == t0 && v->p[v->cap + v->head[1]] < v->p[v->head[0]]) ? 1 : 0;
}

static inline double xs_vq_peek_t(const xs_vq *v, int f)
{
    return v->t[(size_t)f * v->cap + v->head[f]];
}

static xs_ev xs_vq_pop(xs_vq *v, int f)
{
    const size_t i = (size_t)f * v->cap + v->head[f];
    const xs_ev e = {v->t[i], 0, v->p[i]};
    v->head[f] = v->head[f] + 1 == v->cap ? 0 : v->head[f] + 1;
    v->n[f]--;
    return e;
}

typedef struct {
    xs_msim *g;
    const xs_moe_problem *pb;
    const xs_moe_task *tasks;
    int ntasks;
    const xs_moe_costs *c;
    int link;
    double pace_ns_per_byte, pace_slack_ns, pace_until;
    int q;              /* next task */
    /* adaptive plans (xs_mrun_next_adaptive): the two queues' heads, the admission clock */
    int adaptive, n1, q1, q2;
    int *pending;       /* per producer: a claimed Linear-2 tile not run yet (-1: none) */
    double adm_until, adm_ns_per_byte, adm_ahead_ns, adm_tile_bytes;
    int *dep_cnt, *wait_head;
    xs_vq vq;           /* the main loops' ends */
    double end;
    xs_moe_tile *trace; /* optional [ntasks]: the predicted trace */
    /* the spilling kernel (plan.spill_depth > 0, paced): per producer its held-back tiles (a ring
     * of XS_MOE_SPILL_MAX task indices and remote bytes) and the one being flushed (-1: none) */
    int spill_depth;
    int *sq_head, *sq_n, *sq_task, *flushing;
    double *sq_rem, *fwait0; /* fwait0: when the producer began to wait for a flush */
    /* The pacer's wait list: the producers held at the gate (XS_P_GATE), keyed by producer
     * index alone ({0, 0, p}). Only its first one is due, at the gate's opening (xs_mrun_events):
     * every waiter would wake there, in producer order, and all but the first would find the
     * gate moved on by the first one's bytes, so they wait on without events of their own. */
    xs_evheap gate;
    /* The screen (xs_moe_predict_cut): the run stops once a lower bound on its end, times
     * cut_fi, is at least cut_best (off: cut_best = INFINITY); then `cut` is set. The bound needs
     * what is left: the main-loop ns of the tasks not taken yet and the remote bytes of the
     * Linear-2 tiles whose bursts have not started. */
    double cut_fi, cut_best;
    int cut;
    double left_cost_ns, left_bytes;
    double max_tile_bytes; /* the most remote bytes of one Linear-2 tile */
    int relax_at;          /* the list bound (xs_mrun_relaxed) is next taken once this many
                            * tasks are taken (INT_MAX: not again) */
    double *rx;            /* the list bound's workspace (NULL until its first call) */
    int *rx_n;
} xs_mrun;

static void xs_mrun_take(xs_mrun *u, int p);

static void xs_mrun_compute(xs_mrun *u, int p, double cost)
{
    xs_msim *g = u->g;
    g->pr[p].state = XS_P_COMP;
    if (u->trace)
        u->trace[g->pr[p].cur].mma0_ns = g->t_now;
    xs_vq_push(&u->vq, cost, g->V + cost, p);
}

/* The kernel's choice (xs_moe_take_adaptive) for producer p at the model's time: a Linear-1 tile
 * is done at the end of its main loop here (the kernel counts it after its h stores) */
static int xs_mrun_next_adaptive(xs_mrun *u, int p)
{
    const int n2 = u->ntasks - u->n1, l1 = u->pb->l1_per_rb, l2 = u->pb->l2_per_rb;
    int *pend = &u->pending[p];
    if (*pend >= 0) {
        if (u->q1 >= u->n1 || u->dep_cnt[(*pend - u->n1) / l2] >= l1) {
            const int t = *pend;
            *pend = -1;
            return t;
        }
    } else if (u->q1 < u->n1) {
        const double now = u->g->t_now;
        if (u->adm_until <= now + u->adm_ahead_ns && u->q2 < n2) {
            const int j = u->q2++;
            u->adm_until = (u->adm_until > now ? u->adm_until : now) +
                           u->adm_tile_bytes * u->adm_ns_per_byte;
            if (u->dep_cnt[j / l2] >= l1)
                return u->n1 + j;
            *pend = u->n1 + j;
        }
    }
    if (u->q1 < u->n1)
        return u->q1++;
    if (*pend >= 0) {
        const int t = *pend;
        *pend = -1;
        return t;
    }
    return u->q2 < n2 ? u->n1 + u->q2++ : u->ntasks;
}

/* The spilling kernel's flush of producer p's oldest held-back tile (xs_moe_spill_drain): its
 * remote bytes leave as a burst once the pacer's backlog allows; with `wait` (the CTA's end) the
 * producer waits for that, else nothing happens while it is closed. 1 = started or waiting. */
static int xs_mrun_flush(xs_mrun *u, int p, int wait)
{
    xs_msim *g = u->g;
    xs_mprod *z = &g->pr[p];
    const int e = p * XS_MOE_SPILL_MAX + u->sq_head[p];
    const double open = u->pace_until - u->pace_slack_ns;
    if (open > g->t_now) {
        if (!wait)
            return 0;
        if (u->flushing[p] < 0)
            u->fwait0[p] = g->t_now;
        u->flushing[p] = u->sq_task[e];
        z->state = XS_P_GATE;
        if (xs_evheap_push(&u->gate, (xs_ev){0, 0, p}))
            g->oom = 1;
        return 1;
    }
    const double rem = u->sq_rem[e];
    u->pace_until = (u->pace_until > g->t_now ? u->pace_until : g->t_now) +
                    rem * u->pace_ns_per_byte;
    if (u->trace) {
        xs_moe_tile *r = &u->trace[u->sq_task[e]];
        r->gate_ns = u->flushing[p] >= 0 ? g->t_now - u->fwait0[p] : 0;
        r->st0_ns = g->t_now;
    }
    u->flushing[p] = u->sq_task[e];
    z->state = XS_P_BURST;
    xs_msim_start(g, p, rem, rem, 1.0 / g->r, -1, g->t_now);
    return 1;
}

static void xs_mrun_take(xs_mrun *u, int p)
{
    xs_msim *g = u->g;
    xs_mprod *z = &g->pr[p];
    /* the spilling kernel: held-back tiles the pacer admits leave before the next task */
    if (u->spill_depth && u->sq_n[p] > 0 && xs_mrun_flush(u, p, 0))
        return;
    const int idx = u->adaptive            ? xs_mrun_next_adaptive(u, p)
                    : u->q < u->ntasks ? u->q++
                                       : u->ntasks;
    if (idx >= u->ntasks) {
        if (u->spill_depth && u->sq_n[p] > 0) { /* the CTA's end: all of them, waiting */
            xs_mrun_flush(u, p, 1);
            return;
        }
        z->state = XS_P_DONE;
        if (g->t_now > u->end)
            u->end = g->t_now;
        return;
    }
    z->cur = idx;
    const xs_moe_task tk = u->tasks[idx];
    z->kind = xs_moe_task_kind(tk);
    u->left_cost_ns -= z->kind == 1 ? u->c->c1_ns : u->c->c2_ns;
    z->rb = xs_moe_task_rb(tk);
    z->nb = tk.nb;
    if (u->trace) {
        xs_moe_tile *r = &u->trace[z->cur];
        memset(r, 0, sizeof *r);
        r->seq = -1;
        r->fetch_ns = g->t_now;
        r->kind = z->kind;
        r->rb = z->rb;
        r->nb = z->nb;
        r->cta = r->smid = p;
        r->id = z->kind == 1 ? z->rb * u->pb->l1_per_rb + z->nb
                             : u->pb->nrb * u->pb->l1_per_rb + z->rb * u->pb->l2_per_rb + z->nb;
    }
    if (z->kind == 2 && u->dep_cnt[z->rb] < u->pb->l1_per_rb) {
        z->state = XS_P_DEP;
        z->next_wait = u->wait_head[z->rb];
        u->wait_head[z->rb] = p;
        return;
    }
    xs_mrun_compute(u, p, z->kind == 1 ? u->c->c1_ns : u->c->c2_ns);
}

/* a Linear-2 tile's stores: through the pacer and the stage, or local only */
static void xs_mrun_burst(xs_mrun *u, int p)
{
    xs_msim *g = u->g;
    xs_mprod *z = &g->pr[p];
    if (u->trace) {
        xs_moe_tile *r = &u->trace[z->cur];
        r->st0_ns = g->t_now;
        r->gate_ns = g->t_now - r->mma1_ns;
        r->remote_bytes = (int)z->rem;
        r->total_bytes = (int)z->tot;
    }
    if (!(z->rem > 0)) {
        z->state = XS_P_LOCAL;
        if (xs_evheap_push(&g->pev, (xs_ev){g->t_now + z->tot / g->r_local, 0, p}))
            g->oom = 1;
        return;
    }
    if (u->pace_ns_per_byte > 0) {
        const double open = u->pace_until - u->pace_slack_ns;
        if (open > g->t_now && u->spill_depth && u->sq_n[p] < u->spill_depth) {
            /* the spilling kernel: the tile's rows go to device memory, the CTA goes on */
            const int e = p * XS_MOE_SPILL_MAX + (u->sq_head[p] + u->sq_n[p]) % XS_MOE_SPILL_MAX;
            u->sq_task[e] = z->cur;
            u->sq_rem[e] = z->rem;
            u->sq_n[p]++;
            if (u->trace) {
                u->trace[z->cur].deferred = 1;
                u->trace[z->cur].gate_ns = 0;
            }
            z->state = XS_P_LOCAL;
            if (xs_evheap_push(&g->pev, (xs_ev){g->t_now + z->tot / g->r_local, 0, p}))
                g->oom = 1;
            return;
        }
        if (open > g->t_now) {
            z->state = XS_P_GATE;
            if (xs_evheap_push(&u->gate, (xs_ev){0, 0, p}))
                g->oom = 1;
            return;
        }
        u->pace_until = (u->pace_until > g->t_now ? u->pace_until : g->t_now) +
                        z->rem * u->pace_ns_per_byte;
    }
    const double ns_per_byte = (z->rem / g->r + (z->tot - z->rem) / g->r_local) / z->tot;
    u->left_bytes -= z->rem;
    z->state = XS_P_BURST;
    xs_msim_start(g, p, z->tot, z->rem, ns_per_byte, -1, g->t_now);
}

static void xs_mrun_free(xs_mrun *u)
{
    xs_evheap_free(&u->gate);
    xs_vq_free(&u->vq);
    free(u->rx);
    free(u->rx_n);
    free(u->dep_cnt);
    free(u->wait_head);
    free(u->pending);
    free(u->sq_head);
    free(u->sq_n);
    free(u->flushing);
    free(u->sq_task);
    free(u->sq_rem);
    free(u->fwait0);
}

/* The run's per-producer state and its limits: 0, or -1 when out of memory. */
static int xs_mrun_alloc(xs_mrun *u, int nrb, int np)
{
    u->dep_cnt = calloc((size_t)nrb + 1, sizeof(int));
    u->wait_head = malloc(sizeof(int) * ((size_t)nrb + 1));
    u->pending = malloc(sizeof(int) * ((size_t)np + 1));
    u->sq_head = calloc((size_t)np + 1, sizeof(int));
    u->sq_n = calloc((size_t)np + 1, sizeof(int));
    u->flushing = malloc(sizeof(int) * ((size_t)np + 1));
    u->sq_task = malloc(sizeof(int) * XS_MOE_SPILL_MAX * ((size_t)np + 1));
    u->sq_rem = malloc(sizeof(double) * XS_MOE_SPILL_MAX * ((size_t)np + 1));
    u->fwait0 = calloc((size_t)np + 1, sizeof(double));
    if (xs_vq_init(&u->vq, np, u->c->c1_ns))
        return -1;
    if (!u->dep_cnt || !u->wait_head || !u->pending || !u->sq_head || !u->sq_n || !u->flushing ||
        !u->sq_task || !u->sq_rem || !u->fwait0)
        return -1;
    for (int b = 0; b <= nrb; b++)
        u->wait_head[b] = -1;
    for (int p = 0; p <= np; p++)
        u->pending[p] = u->flushing[p] = -1;
    return 0;
}

/* The plan's pacing, adaptive admission and spilling into the run. */
static void xs_mrun_plan(xs_mrun *u, const xs_moe_plan *plan, int link)
{
    const xs_moe_problem *pb = u->pb;
    if (link && plan && plan->pace_bytes > 0 && plan->pace_bytes_per_ns > 0) {
        u->pace_ns_per_byte = 1.0 / plan->pace_bytes_per_ns;
        u->pace_slack_ns = plan->pace_bytes / plan->pace_bytes_per_ns;
    }
    if (plan && plan->kind == XS_MOE_ADAPTIVE) {
        /* the choice is the kernel's with or without the link: the same clock, the same
         * problem's remote bytes (the local control admits as the real run does) */
        u->adaptive = 1;
        u->n1 = pb->nrb * pb->l1_per_rb;
        u->adm_ns_per_byte = 1.0 / plan->pace_bytes_per_ns;
        u->adm_ahead_ns = plan->admit_ahead_ns;
        xs_moe_info info;
        xs_moe_problem_info(pb, &info);
        u->adm_tile_bytes = info.l2_tiles ? info.remote_bytes / info.l2_tiles : 0.0;
    }
    if (u->pace_ns_per_byte > 0 && plan && plan->spill_depth > 0)
        u->spill_depth = plan->spill_depth < XS_MOE_SPILL_MAX ? plan->spill_depth
                                                              : XS_MOE_SPILL_MAX;
}

/* The end of producer e.p's main loop: a Linear-1 tile counts for its row block (and releases
 * the Linear-2 tiles that wait for it), a Linear-2 tile issues its stores. */
static void xs_mrun_mma_end(xs_mrun *u, xs_ev e)
{
    xs_msim *g = u->g;
    const xs_moe_problem *pb = u->pb;
    if (g->V < e.t)
        g->V = e.t; /* rounding */
    xs_mprod *z = &g->pr[e.p];
    if (u->trace) {
        xs_moe_tile *r = &u->trace[z->cur];
        r->mma1_ns = g->t_now;
        if (z->kind == 1)
            r->st0_ns = r->st1_ns = g->t_now;
    }
    if (z->kind == 1) {
        if (++u->dep_cnt[z->rb] == pb->l1_per_rb) {
            for (int w = u->wait_head[z->rb]; w >= 0;) {
                const int nw = g->pr[w].next_wait;
                xs_mrun_compute(u, w, u->c->c2_ns);
                w = nw;
            }
            u->wait_head[z->rb] = -1;
        }
        xs_mrun_take(u, e.p);
    } else {
        double rem, tot;
        xs_moe_tile_bytes(pb, z->rb, z->nb, &rem, &tot);
        z->rem = u->link ? rem : 0;
        z->tot = tot;
        xs_mrun_burst(u, e.p);
    }
}

/* A producer's timed step: a pacer gate opened, a flush or a tile's stores ended. */
static void xs_mrun_step(xs_mrun *u, xs_ev e)
{
    xs_msim *g = u->g;
    xs_mprod *z = &g->pr[e.p];
    if (z->state == XS_P_GATE && u->spill_depth && u->flushing[e.p] >= 0) {
        xs_mrun_flush(u, e.p, 1);
    } else if (z->state == XS_P_GATE) {
        xs_mrun_burst(u, e.p);
    } else if (u->spill_depth && u->flushing[e.p] >= 0) {
        /* a held-back tile's flush ended: its entry is free */
        if (u->trace)
            u->trace[u->flushing[e.p]].st1_ns = g->t_now;
        u->flushing[e.p] = -1;
        u->sq_head[e.p] = (u->sq_head[e.p] + 1) % XS_MOE_SPILL_MAX;
        u->sq_n[e.p]--;
        xs_mrun_take(u, e.p);
    } else {
        if (u->trace && !u->trace[z->cur].deferred)
            u->trace[z->cur].st1_ns = g->t_now;
        xs_mrun_take(u, e.p);
    }
}

/* A lower bound on the run's end, now: the stage drains at most R after the departure of its
 * last accepted byte (d_last grows by at least each later chunk's bytes / R); the main loops of
 * the tasks not taken yet need their ns of virtual time, which no CTA gains faster than real
 * time; and paced, every tile passes the gate no earlier than pace_until - slack, which each
 * pass moves on by its bytes at the pacer's rate, so the last of the bytes left passes no
 * earlier than pace_until - slack + (left - the largest tile) / rate. Lowered by 1e-9 (relative)
 * for the rounding of the sums it stands for. */
static double xs_mrun_lower_bound(const xs_mrun *u, int np)
{
    const xs_msim *g = u->g;
    const double left = u->left_bytes > 0 ? u->left_bytes : 0;
    double lb = xs_msim_d_last(g) + left / g->R;
    const double comp = g->t_now + (u->left_cost_ns > 0 ? u->left_cost_ns : 0) / np;
    lb = comp > lb ? comp : lb;
    if (u->pace_ns_per_byte > 0 && left > u->max_tile_bytes) {
        const double pace = u->pace_until - u->pace_slack_ns +
                            (left - u->max_tile_bytes) * u->pace_ns_per_byte;
        lb = pace > lb ? pace : lb;
    }
    return lb * (1 - 1e-9);
}

#define XS_MRUN_BUCKETS 2048

/* The remote combine bytes of Linear-2 tile (rb, nb): xs_moe_tile_bytes's. */
static inline double xs_mrun_tile_remote(const xs_moe_problem *pb, int rb, int nb)
{
    const int nv = pb->H - nb * XS_MOE_BN;
    const int ncols = nv < XS_MOE_BN ? nv : XS_MOE_BN;
    return pb->N > 1 ? (double)pb->rb[rb].remote * ncols * 2.0 : 0.0;
}

/* Merge sorted a[na] and b[nb] into out (apart from both). */
static void xs_mrun_merge(const double *a, int na, const double *b, int nb, double *out)
{
    int i = 0, j = 0, k = 0;
    while (i < na && j < nb)
        out[k++] = b[j] < a[i] ? b[j++] : a[i++];
    while (i < na)
        out[k++] = a[i++];
    while (j < nb)
        out[k++] = b[j++];
}

/* The screen's bound from the list (xs_moe_predict_cut), before the run and at a few points of
 * it: the tasks not taken yet on a relaxed machine where a CTA waits for nothing but its row
 * block's Linear-1 tiles and every main loop runs at full speed (no stage, no gate, no
 * blocking). The relaxed CTAs are free when the run's could be at the earliest: now, or where a
 * main loop runs, now + what is left of it in V (V gains at most real time), or where a Linear-2
 * tile waits for its row block, now + c2. They take the tasks in list order, each as soon as one
 * is free, and are free again at the end of the main loop. By induction over the list, the
 * relaxed free times, sorted, are never later than the run's: in the run a CTA is free no
 * earlier than its main loop ended, which began no earlier than its take and its row block's
 * Linear-1 ends. So every main loop ends in the run no earlier than its relaxed end E, and the
 * run, which ends after every main loop, no earlier than max E. Paced, the Linear-2 tiles that
 * have not passed the gate and have E >= s pass it after s, each moving pace_until on by its
 * bytes at the pacer's rate, so the last pass, before the run's end, comes no earlier than s +
 * (their bytes - the largest tile's) / rate - slack; s runs over the lower edges of
 * XS_MRUN_BUCKETS equal buckets of [now, max E]. Lowered by 1e-9 (relative) as
 * xs_mrun_lower_bound. 0 (no bound) where a Linear-2 tile comes before its row block's Linear-1
 * tiles or the ends of a kind do not keep their order (below), or out of memory. Not for
 * adaptive plans, whose CTAs choose their tasks. */
static double xs_mrun_relaxed(xs_mrun *u, int np)
{
    const xs_moe_problem *pb = u->pb;
    const xs_msim *g = u->g;
    const double c1 = u->c->c1_ns, c2 = u->c->c2_ns, now = g->t_now;
    const int paced = u->pace_ns_per_byte > 0;
    const size_t cap = (size_t)u->ntasks + (size_t)np + 1;
    if (!u->rx) {
        /* the workspace of every call of this run: 3 FIFOs, the Linear-2 tiles' E and pacer
         * ns, 2 x np for the CTAs now, the buckets and the row blocks' Linear-1 ends */
        u->rx = malloc(sizeof(double) * (5 * cap + 2 * ((size_t)np + 1) + XS_MRUN_BUCKETS + 1 +
                                         (size_t)pb->nrb + 1));
        u->rx_n = malloc(sizeof(int) * ((size_t)pb->nrb + 1));
        if (!u->rx || !u->rx_n)
            return 0;
    }
    double *q[3] = {u->rx, u->rx + cap, u->rx + 2 * cap};
    double *e2 = u->rx + 3 * cap, *b2 = u->rx + 4 * cap;
    double *fa = u->rx + 5 * cap, *fb = fa + np + 1;
    double *suffix = fb + np + 1, *l1_end = suffix + XS_MRUN_BUCKETS + 1;
    int *l1_n = u->rx_n;
    for (int b = 0; b < pb->nrb; b++) {
        l1_n[b] = u->dep_cnt ? u->dep_cnt[b] : 0;
        l1_end[b] = 0;
    }
    /* The relaxed CTAs now, sorted into q[2]: those free now, then the main loops in progress
     * (each FIFO of u->vq is in order) merged with those waiting for their row block (now + c2).
     * The Linear-2 tiles not past the gate go to e2/b2, the Linear-1 tiles in progress to
     * l1_n/l1_end. */
    int n2 = 0, nnow = 0, ndep = 0, nrun[2] = {0, 0};
    for (int p = 0; p < np; p++) {
        const xs_mprod *z = &g->pr[p];
        if (z->state == XS_P_DEP) {
            ndep++;
            if (paced) {
                e2[n2] = now + c2;
                b2[n2++] = xs_mrun_tile_remote(pb, z->rb, z->nb) * u->pace_ns_per_byte;
            }
        } else if (z->state == XS_P_GATE) {
            nnow++;
            if (paced && z->rem > 0) {
                e2[n2] = now;
                b2[n2++] = z->rem * u->pace_ns_per_byte;
            }
        } else if (z->state != XS_P_COMP && z->state != XS_P_DONE) {
            nnow++;
        }
    }
    for (int f = 0; f < 2; f++) {
        double *dst = f ? fb : fa;
        for (int k = 0, i = u->vq.head[f]; k < u->vq.n[f]; k++) {
            const size_t at = (size_t)f * u->vq.cap + i;
            const xs_mprod *z = &g->pr[u->vq.p[at]];
            const double left = u->vq.t[at] - g->V;
            const double e = now + (left > 0 ? left : 0);
            dst[nrun[f]++] = e;
            if (z->kind == 1) {
                l1_n[z->rb]++;
                l1_end[z->rb] = e > l1_end[z->rb] ? e : l1_end[z->rb];
            } else if (paced) {
                e2[n2] = e;
                b2[n2++] = xs_mrun_tile_remote(pb, z->rb, z->nb) * u->pace_ns_per_byte;
            }
            i = i + 1 == u->vq.cap ? 0 : i + 1;
        }
    }
    for (int i = 0; i < nnow; i++)
        q[2][i] = now;
    xs_mrun_merge(fa, nrun[0], fb, nrun[1], q[0]); /* q[0], q[1]: empty yet, room for np */
    for (int i = 0; i < ndep; i++)
        q[1][i] = now + c2;
    xs_mrun_merge(q[0], nrun[0] + nrun[1], q[1], ndep, q[2] + nnow);
    int head[3] = {0, 0, 0}, end[3] = {0, 0, nnow + nrun[0] + nrun[1] + ndep};
    double hv[3] = {INFINITY, INFINITY, end[2] ? q[2][0] : INFINITY}; /* the heads */
    double e_max = end[2] ? q[2][end[2] - 1] : now;
    e_max = e_max > now ? e_max : now;
    if (!end[2] && u->q < u->ntasks)
        return 0;
    for (int i = u->q; i < u->ntasks; i++) {
        const xs_moe_task tk = u->tasks[i];
        const int kind = xs_moe_task_kind(tk), rb = xs_moe_task_rb(tk);
        /* the earliest free CTA takes it */
        const int f = hv[1] < hv[0] ? (hv[2] < hv[1] ? 2 : 1) : (hv[2] < hv[0] ? 2 : 0);
        double start = hv[f];
        head[f]++;
        hv[f] = head[f] < end[f] ? q[f][head[f]] : INFINITY;
        if (kind == 2) {
            if (l1_n[rb] < pb->l1_per_rb)
                return 0; /* the run would wait forever */
            start = l1_end[rb] > start ? l1_end[rb] : start;
        }
        const double e = start + (kind == 1 ? c1 : c2);
        const int k = kind == 1 ? 0 : 1;
        if (end[k] > head[k] && e < q[k][end[k] - 1])
            return 0; /* not in row-block order */
        if (end[k] == head[k])
            hv[k] = e;
        q[k][end[k]++] = e;
        if (kind == 1) {
            l1_n[rb]++;
            l1_end[rb] = e > l1_end[rb] ? e : l1_end[rb];
        } else if (paced) {
            e2[n2] = e;
            b2[n2++] = xs_mrun_tile_remote(pb, rb, tk.nb) * u->pace_ns_per_byte;
        }
        e_max = e > e_max ? e : e_max;
    }
    double lb = e_max;
    if (paced && n2 && e_max > now) {
        const double w = (e_max - now) / XS_MRUN_BUCKETS;
        memset(suffix, 0, sizeof(double) * XS_MRUN_BUCKETS);
        for (int j = 0; j < n2; j++) {
            int k = (int)((e2[j] - now) / w);
            k = k < 0 ? 0 : k > XS_MRUN_BUCKETS - 1 ? XS_MRUN_BUCKETS - 1 : k;
            suffix[k] += b2[j];
        }
        const double drop = u->max_tile_bytes * u->pace_ns_per_byte + u->pace_slack_ns;
        double after = 0; /* pacer ns of the tiles in buckets >= k */
        for (int k = XS_MRUN_BUCKETS - 1; k >= 0; k--) {
            after += suffix[k];
            const double pace = now + k * w + after - drop;
            lb = pace > lb ? pace : lb;
        }
    }
    return lb * (1 - 1e-9);
}

/* Run the events until none is left; 1 if the bound on their number was hit (a model bug). With
 * a cut (u->cut_best finite), every 64 events the run stops once the lower bound proves its end
 * x cut_fi >= cut_best (u->cut set). */
static int xs_mrun_events(xs_mrun *u, double max_events)
{
    xs_msim *g = u->g;
    double events = 0;
    unsigned tick = 0;
    while (!g->oom) {
        if (++events > max_events)
            return 1;
        if (u->cut_best < INFINITY && (tick++ & 63u) == 0 &&
            xs_mrun_lower_bound(u, g->np) * u->cut_fi >= u->cut_best) {
            u->cut = 1;
            return 0;
        }
        if (u->q >= u->relax_at) {
            /* halfway through what was left, the list bound again */
            const int left = u->ntasks - u->q;
            u->relax_at = left >= 256 ? u->q + left / 2 : INT_MAX;
            if (xs_mrun_relaxed(u, g->np) * u->cut_fi >= u->cut_best) {
                u->cut = 1;
                return 0;
            }
        }
        const double ts = xs_msim_stage_next(g);
        double tp = g->pev.n ? g->pev.a[0].t : INFINITY;
        const int vf = xs_vq_first(&u->vq);
        const double tv = vf >= 0 ? xs_msim_t_of_v(g, xs_vq_peek_t(&u->vq, vf)) : INFINITY;
        /* the wait list's first producer is due when the gate opens (or now, where rounding
         * left it open): among the timed steps in (time, producer) order, as a timed step of
         * its own would be */
        int gate_due = 0;
        if (u->gate.n) {
            const double open = u->pace_until - u->pace_slack_ns;
            const double tg = open > g->t_now ? open : g->t_now;
            if (!g->pev.n || tg < tp || (tg == tp && u->gate.a[0].p < g->pev.a[0].p)) {
                tp = tg;
                gate_due = 1;
            }
        }
        if (ts == INFINITY && tp == INFINITY && tv == INFINITY)
            break;
        if (tv <= tp && tv <= ts) {
            xs_msim_advance(g, tv);
            xs_mrun_mma_end(u, xs_vq_pop(&u->vq, vf));
        } else if (tp <= ts) {
            xs_msim_advance(g, tp);
            xs_mrun_step(u, gate_due ? xs_evheap_pop(&u->gate) : xs_evheap_pop(&g->pev));
        } else {
            xs_msim_advance(g, ts);
            xs_msim_stage_accept(g, ts);
        }
    }
    return 0;
}

/* A courier plan's link: a Linear-2 tile's rows are ready for the couriers when its staging
 * stores end; in the trace it hands them its remote bytes, as the kernel's trace says. *end
 * becomes the couriers' drain where that is later (with the link). */
static xs_status xs_mrun_couriers(const xs_moe_problem *pb, xs_moe_tile *trace, int ntasks,
                                  const xs_moe_plan *plan, int courier_link, double *end)
{
    double *ready = calloc((size_t)ntasks + 1, sizeof(double));
    double *rb = calloc((size_t)ntasks + 1, sizeof(double));
    int n2 = 0;
    for (int i = 0; ready && rb && i < ntasks; i++) {
        if (trace[i].kind != 2)
            continue;
        double rem, tot;
        xs_moe_tile_bytes(pb, trace[i].rb, trace[i].nb, &rem, &tot);
        trace[i].remote_bytes = (int)rem;
        ready[n2] = trace[i].st1_ns;
        rb[n2++] = rem;
    }
    if (courier_link && ready && rb) {
        const double drained = xs_moe_courier_drain(ready, rb, n2, plan->couriers,
                                                    plan->courier_bytes_per_ns);
        if (drained > *end)
            *end = drained;
    }
    const int lost = !ready || !rb;
    free(ready);
    free(rb);
    return lost ? xs_seterr(XS_ENOMEM, "moe model: out of host memory") : XS_OK;
}

/* The whole run on an initialised engine g with np producers; *end: when the last CTA finished
 * and the stage drained. */
static xs_status xs_mrun_run(xs_mrun *u, int np, double *end)
{
    xs_msim *g = u->g;
    const xs_moe_problem *pb = u->pb;
    if (xs_mrun_alloc(u, pb->nrb, np))
        return xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    g->user = u;
    for (int p = 0; p < np; p++)
        xs_mrun_take(u, p);
    /* every event is a chunk accepted (or retried under a cap), a task's step or a pacer gate:
     * a bound far above that count turns a model bug into an error instead of a hang */
    const double max_events =
        16.0 * ((double)pb->rows * pb->H * 2.0 / g->c + 8.0 * u->ntasks) + 1e6;
    const int stalled = xs_mrun_events(u, max_events);
    if (u->cut && !g->oom) {
        *end = INFINITY;
        return XS_OK;
    }
    int stuck = 0;
    for (int p = 0; p < np; p++)
        stuck += g->pr[p].state != XS_P_DONE;
    const double d_last = xs_msim_d_last(g);
    *end = u->end > d_last ? u->end : d_last;
    if (g->oom)
        return xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    if (stalled)
        return xs_seterr(XS_ERANGE, "moe model: no end after %.0f events (%d tasks): a bug in "
                         "the event model", max_events, u->ntasks);
    if (stuck)
        return xs_seterr(XS_ERANGE, "moe model: %d CTAs did not finish (a Linear-2 tile before "
                         "its row block's Linear-1 tiles?)", stuck);
    return XS_OK;
}

/* xs_moe_predict_tasks with the screen: cut_best < INFINITY (only without couriers, spilling or
 * a trace) stops the run as soon as its end x cut_fi is proven >= cut_best; *total_ns is then
 * INFINITY. */
static xs_status xs_moe_predict_run(const xs_moe_problem *pb, const xs_moe_task *tasks,
                                    int ntasks, const xs_moe_plan *plan, const xs_profile *pf,
                                    const xs_moe_model *mm, const xs_moe_costs *c, int link,
                                    xs_moe_tile *trace, double cut_fi, double cut_best,
                                    double *total_ns)
{
    *total_ns = NAN;
    if (!(c->c1_ns > 0) || !(c->c2_ns > 0))
        return xs_seterr(XS_EINVAL, "moe model: tile costs c1=%g c2=%g ns must be positive",
                         c->c1_ns, c->c2_ns);
    if (plan && plan->kind == XS_MOE_ADAPTIVE &&
        ntasks != pb->nrb * (pb->l1_per_rb + pb->l2_per_rb))
        return xs_seterr(XS_EINVAL, "moe model: an adaptive plan runs the whole list (%d of %d "
                         "tasks)", ntasks, pb->nrb * (pb->l1_per_rb + pb->l2_per_rb));
    const xs_moe_model none = {.block_bytes = 0, .block_speed = 1};
    /* a courier plan: grid - C CTAs compute and stage every row locally; the couriers' link
     * follows from their ends (xs_moe_courier_drain) */
    const int couriers = plan ? plan->couriers : 0;
    const int np = pb->grid - couriers;
    const int courier_link = link && couriers > 0;
    if (courier_link && !(plan->courier_bytes_per_ns > 0))
        return xs_seterr(XS_EINVAL, "moe model: %d couriers without an issue rate", couriers);
    xs_moe_tile *own_trace = NULL; /* the tiles' ends, when the caller wants no trace */
    if (couriers > 0) {
        link = 0;
        if (!trace && !(trace = own_trace = calloc((size_t)ntasks + 1, sizeof *trace)))
            return xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    }
    xs_msim g;
    xs_status st = xs_msim_init(&g, pf, link ? mm : &none, np, 0, c->local_issue_bytes_per_ns);
    if (st != XS_OK) {
        free(own_trace);
        return st;
    }
    xs_mrun u;
    memset(&u, 0, sizeof u);
    u.g = &g;
    u.pb = pb;
    u.tasks = tasks;
    u.ntasks = ntasks;
    u.c = c;
    u.link = link;
    u.trace = trace;
    xs_mrun_plan(&u, plan, link);
    u.cut_fi = cut_fi;
    u.cut_best = INFINITY;
    if (cut_best < INFINITY && cut_fi > 0 && !trace && couriers == 0 && u.spill_depth == 0) {
        u.cut_best = cut_best;
        for (int i = 0; i < ntasks; i++) {
            const xs_moe_task tk = tasks[i];
            const int kind = xs_moe_task_kind(tk);
            u.left_cost_ns += kind == 1 ? c->c1_ns : c->c2_ns;
            if (kind == 2 && link) {
                double rem, tot;
                xs_moe_tile_bytes(pb, xs_moe_task_rb(tk), tk.nb, &rem, &tot);
                u.left_bytes += rem;
                u.max_tile_bytes = rem > u.max_tile_bytes ? rem : u.max_tile_bytes;
            }
        }
    }
    double end = NAN;
    u.relax_at = u.cut_best < INFINITY && !u.adaptive ? ntasks / 2 : INT_MAX;
    if (u.cut_best < INFINITY && !u.adaptive && xs_mrun_relaxed(&u, np) * cut_fi >= cut_best) {
        xs_mrun_free(&u); /* screened out before it ran */
        xs_msim_free(&g);
        free(own_trace);
        *total_ns = INFINITY;
        return XS_OK;
    }
    st = xs_mrun_run(&u, np, &end);
    xs_mrun_free(&u);
    xs_msim_free(&g);
    if (st == XS_OK && couriers > 0)
        st = xs_mrun_couriers(pb, trace, ntasks, plan, courier_link, &end);
    free(own_trace);
    XS_TRY(st);
    *total_ns = end;
    return XS_OK;
}

xs_status xs_moe_predict_tasks(const xs_moe_problem *pb, const xs_moe_task *tasks, int ntasks,
                               const xs_moe_plan *plan, const xs_profile *pf,
                               const xs_moe_model *mm, const xs_moe_costs *c, int link,
                               xs_moe_tile *trace, double *total_ns)
{
    return xs_moe_predict_run(pb, tasks, ntasks, plan, pf, mm, c, link, trace, 1.0, INFINITY,
                              total_ns);
}

xs_status xs_moe_predict_cut(const xs_moe_problem *pb, const xs_moe_task *tasks, int ntasks,
                             const xs_moe_plan *plan, const xs_profile *pf,
                             const xs_moe_model *mm, const xs_moe_costs *c, double fi,
                             double best, double *total_ns)
{
    return xs_moe_predict_run(pb, tasks, ntasks, plan, pf, mm, c, 1, NULL, fi, best, total_ns);
}

xs_status xs_moe_predict(const xs_moe_problem *pb, int slot, const xs_profile *pf,
                         const xs_moe_model *mm, const xs_moe_costs *c, int link,
                         double *total_ns)
{
    return xs_moe_predict_trace(pb, slot, pf, mm, c, link, NULL, total_ns);
}

xs_status xs_moe_predict_trace(const xs_moe_problem *pb, int slot, const xs_profile *pf,
                               const xs_moe_model *mm, const xs_moe_costs *c, int link,
                               xs_moe_tile *tiles, double *total_ns)
{
    *total_ns = NAN;
    if (slot < 0 || slot >= XS_MOE_SLOTS || !pb->slots[slot].tasks)
        return xs_seterr(XS_EINVAL, "moe: plan slot %d has no task list", slot);
    const xs_moe_tasks *tl = &pb->slots[slot];
    return xs_moe_predict_tasks(pb, tl->tasks, tl->n, &tl->plan, pf, mm, c, link, tiles,
                                total_ns);
}

double xs_moe_tile_t0(const xs_profile *p, double remote_bytes, double total_bytes,
                      double local_bytes_per_ns)
{
    const double rl = local_bytes_per_ns > 0 ? local_bytes_per_ns : p->issue_bytes_per_ns;
    if (!(remote_bytes > 0))
        return total_bytes / rl;
    const double b = p->queue_bytes_per_producer > 0 ? p->queue_bytes_per_producer : 0;
    const double stream = remote_bytes / p->issue_bytes_per_ns + (total_bytes - remote_bytes) / rl;
    return p->issue_overhead_ns + (total_bytes > b ? (total_bytes - b) / total_bytes : 0) * stream;
}

double xs_moe_courier_drain(const double *ready_ns, const double *bytes, int n, int couriers,
                            double bytes_per_ns)
{
    if (couriers < 1 || !(bytes_per_ns > 0))
        return NAN;
    double *busy = calloc((size_t)couriers, sizeof(double)); /* each one's FIFO end */
    if (!busy)
        return NAN;
    const double ns_per_byte = couriers / bytes_per_ns; /* one courier's share */
    double end = 0;
    for (int j = 0; j < n; j++) {
        if (!(bytes[j] > 0))
            continue; /* no remote row: the courier skips it without waiting */
        double *b = &busy[j % couriers];
        const double start = *b > ready_ns[j] ? *b : ready_ns[j];
        *b = start + bytes[j] * ns_per_byte;
        if (*b > end)
            end = *b;
    }
    free(busy);
    return end;
}
