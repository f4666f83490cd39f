// SPDX-License-Identifier: Apache-2.0
/*
 * test_tp_plan.c - cross-rank deadlock freedom of the TP task lists (include/xstage_tp.h), on the
 * CPU against the plain-C planner (xs_tp_plan_create plans). `bench tp -g N` runs one list per
 * rank; each list holds the per-rank invariants (xs_tp_order_check), but whether the P lists
 * together can deadlock depends on how the ranks' lists line up. This test builds every rank's
 * list for every order the planner makes (naive, the XS_TP_NCAND shaped candidates, and the
 * sm90 engine's stored ring variants), for P = 2, 3, 4, 8, the three operations, small odd
 * shapes (grids 1, 5, 132) and model widths (llama3-8b up to the bench's 16384 tokens, grids 132
 * and 16; P = 3: GPT-3 widths, the llama widths do not split 3 ways), and two cost sets (the
 * planner's budgets, hence its lists, depend on them), and checks:
 *
 *   1. simulation (the real test): the P ranks x G CTAs of the persistent kernels, CTA b of a
 *      rank taking tasks b, b + G, b + 2G, ... of its rank's list in order (tp_kernel's and
 *      tp90_kernel's `for (i = blockIdx.x; i < ntasks; i += gridDim.x)`), every CTA resident.
 *      A task starts once its CTA finished the previous one and its waits hold; it then raises
 *      its signals. The waits and signals are the kernel's with real peers (ag_sym = 0): a
 *      GEMM 0 tile of an all-gathered row block on shard s != me waits for the flags
 *      s x ag_chunks + c, c over the chunks its 128 rows span, in its own window, raised by
 *      rank s's push (a push task, a rider, or with couriers a courier's push entry, which
 *      waits for nothing) of chunk c to this rank; an mlp GEMM 1 tile waits
 *      for the count of its row block's GEMM 0 tiles on its own rank (tiles_n[0]); a reduction
 *      of own tile t waits for every source's signal of t (its own tile included), raised by
 *      that source's reduce-scatter tile. Signals are raised at the task's end: the mma kernel
 *      raises them lazily and streams DEFER / SPREAD stores through the CTA's next main loop,
 *      but every CTA flushes its transfers and raises its queued flags before it blocks in a
 *      wait and at its end, and the sm90 kernel's signal warp raises them at once; so the
 *      stuck states (every unfinished CTA blocked) are the same as with signals raised at once.
 *      Waits are monotone (flags and counts only grow), so the simulation's outcome does not
 *      depend on the order it runs the CTAs in. A deadlock is a state where no CTA can run and
 *      some are not done; it is reported with the operation, P, shape, order, grid, rank, CTA,
 *      task index and what that task waits for. The same simulation in virtual-peer mode
 *      (ag_sym = 1, one rank, the other sources placed: a GEMM 0 tile on shard s waits for this
 *      rank's own push of the same chunks to the mirror rank 2 me - s) runs for every rank too.
 *   2. rotations: rank r's list is rank 0's with every rank-relative field moved by r (push
 *      destination + r, tile row + r m/(128 P), mod P and tiles_m).
 *   3. positions (the stated invariant, a sufficient condition): every wait's signal is raised
 *      by a task at an earlier list position than the waiting task's, on whichever rank raises
 *      it; and a GEMM 0 tile's chunk from rank s is pushed at the same list position as this
 *      rank's push of that chunk to the mirror rank (what ag_sym emulates on one GPU). The
 *      first part alone rules a deadlock out: the earliest unfinished task of all ranks waits
 *      only for earlier positions, and its CTA's previous task is earlier too. (GEMMs are
 *      numbered from 0 here, as in xstage_tp.h: GEMM 0 is docs/TP.md's GEMM 1.)
 *
 * The checks can fail: hand-broken lists must be reported - a push swapped behind the tile
 * that needs the peer's push (P = 2, every rank: a cross-rank cycle); per-rank-valid lists
 * that are not rotations (P = 3: each passes xs_tp_order_check and its virtual-peer
 * simulation, together they deadlock); a GEMM 1 tile swapped before its row block's last GEMM 0
 * tile; a reduction swapped with its own tile, a deadlock when the two are in one CTA and
 * none when they are in different CTAs (the simulation models the grid, not one list); with
 * couriers, a walk against production order (e) and a walk with a remote tile before its pushes
 * (f: the couriers' pushes must come first). And the
 * event-driven simulation agrees with a plain fixpoint sweep on 300 randomly broken list sets.
 *
 * usage: test_tp_plan   last line: "N passed, N failed"
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt.h"
#include "xstage.h"
#include "xstage_tp.h"

/* ---- the P lists of one configuration ------------------------------------------------------- */

typedef struct {
    xs_tp_shape s;
    xs_tp_info in;
    int P, rbpr;
    int n[XS_MAX_RANKS];
    const xs_tp_task *v[XS_MAX_RANKS]; /* rank r's list (not owned) */
    /* couriers (xs_tp_set_couriers): cour courier CTAs per rank next to the G compute CTAs the
     * lists were built for; rank r's couriers walk walk[r][0..nw[r]) (pushes, entries < 0
     * (XS_TP_WALK_PUSH), then list positions of its remote tiles), courier c taking entries
     * c, c + cour, ... */
    int cour;
    int nw[XS_MAX_RANKS];
    const int *walk[XS_MAX_RANKS]; /* not owned */
    /* counters: all-gather flags [dst][src][chunk], reduce-scatter flags [owner][src][t],
     * row-block counts [rank][tm] (mlp), outbox ready flags [src][owner][t] (couriers), split
     * scratch flags [rank][slot] (split tiles: sp_slots per rank) */
    int n_ag, n_rs, n_rb, n_rd, n_sp, sp_slots;
} plan_set;

static void set_init(plan_set *S, const xs_tp_shape *s, const xs_tp_info *in)
{
    memset(S, 0, sizeof *S);
    S->s = *s;
    S->in = *in;
    S->P = s->peers;
    S->rbpr = in->rs_rows / XS_TP_BM;
    S->n_ag = in->ag ? S->P * S->P * in->ag_chunks : 0;
    S->n_rs = in->rs_gemm >= 0 ? S->P * S->P * in->t_own : 0;
    S->n_rb = in->ngemm > 1 ? S->P * in->tiles_m : 0;
    S->n_rd = in->rs_gemm >= 0 ? S->P * S->P * in->t_own : 0;
}

/* Room for split scratch flags: slots per rank (XS_TP_SPLIT_SLOTS: 3 x grid). */
static void set_split_slots(plan_set *S, int slots)
{
    S->sp_slots = slots;
    S->n_sp = S->P * slots;
}

static int ncounters(const plan_set *S)
{
    return S->n_ag + S->n_rs + S->n_rb + S->n_rd + S->n_sp;
}
static int c_ag(const plan_set *S, int dst, int src, int c)
{
    return (dst * S->P + src) * S->in.ag_chunks + c;
}
static int c_rs(const plan_set *S, int owner, int src, int t)
{
    return S->n_ag + (owner * S->P + src) * S->in.t_own + t;
}
static int c_rb(const plan_set *S, int rank, int tm)
{
    return S->n_ag + S->n_rs + rank * S->in.tiles_m + tm;
}
static int c_rd(const plan_set *S, int src, int owner, int t)
{
    return S->n_ag + S->n_rs + S->n_rb + (src * S->P + owner) * S->in.t_own + t;
}
static int c_sp(const plan_set *S, int rank, int slot)
{
    return S->n_ag + S->n_rs + S->n_rb + S->n_rd + rank * S->sp_slots + slot;
}
/* A split tile's part before its last (XS_TP_K_SPLIT): no epilogue, only its scratch flag. */
static int split_early(const xs_tp_task *x)
{
    return (x->kind & XS_TP_K_SPLIT) && XS_TP_SPLIT_PART(x) < XS_TP_SPLIT_PARTS(x) - 1;
}
/* value at which a counter's waiters may go: a flag is raised once, a row block counts its
 * GEMM 0 tiles */
static int target(const plan_set *S, int u)
{
    return u >= S->n_ag + S->n_rs && u < S->n_ag + S->n_rs + S->n_rb ? S->in.tiles_n[0] : 1;
}
/* the rank that raises counter u */
static int raiser(const plan_set *S, int u)
{
    if (u < S->n_ag)
        return (u / S->in.ag_chunks) % S->P;
    if (u < S->n_ag + S->n_rs)
        return ((u - S->n_ag) / S->in.t_own) % S->P;
    if (u < S->n_ag + S->n_rs + S->n_rb)
        return (u - S->n_ag - S->n_rs) / S->in.tiles_m;
    if (u < S->n_ag + S->n_rs + S->n_rb + S->n_rd)
        return (u - S->n_ag - S->n_rs - S->n_rb) / S->in.t_own / S->P;
    return (u - S->n_ag - S->n_rs - S->n_rb - S->n_rd) / S->sp_slots;
}

/* A reduce-scatter tile's owner and own-tile index; -1 when x is not one of another owner's
 * (rank r's remote tiles: what couriers carry). */
static int remote_tile(const plan_set *S, int r, const xs_tp_task *x, int *owner, int *t)
{
    if (!(x->kind & XS_TP_K_TILE) || x->gemm != S->in.rs_gemm || split_early(x))
        return -1;
    *owner = x->tm / S->rbpr;
    *t = (x->tm - *owner * S->rbpr) * S->in.tiles_n[S->in.rs_gemm] + x->tn;
    return *owner == r ? -1 : 0;
}

static int mirror(int me, int s, int P) { return ((2 * me - s) % P + P) % P; }

/* The chunks [*c0, *c1] of its shard that GEMM 0 tile row tm spans (tp_chunk_range). */
static int chunk_range(const plan_set *S, int tm, int *c0, int *c1)
{
    const xs_tp_info *in = &S->in;
    const int m0 = tm * XS_TP_BM, s = m0 / in->rs_rows;
    const unsigned long long row_bytes = (unsigned long long)in->ag_k * 2;
    const unsigned long long lo = (unsigned long long)(m0 - s * in->rs_rows) * row_bytes;
    unsigned long long hi = lo + XS_TP_BM * row_bytes;
    if (hi > in->shard_bytes)
        hi = in->shard_bytes;
    *c0 = (int)(lo / XS_TP_CHUNK);
    *c1 = (int)((hi - 1) / XS_TP_CHUNK);
    return s;
}

/* The counters task x of rank r waits for (w[], at most ag_chunks + P + 1); virt: virtual peers
 * (ag_sym: this rank's own pushes to the mirror rank; the other sources' partials placed). */
static int task_waits(const plan_set *S, int r, const xs_tp_task *x, int virt, int *w)
{
    const xs_tp_info *in = &S->in;
    int n = 0;
    if (x->kind & XS_TP_K_TILE) {
        if (x->gemm == 0 && in->ag) {
            int c0, c1;
            const int s = chunk_range(S, x->tm, &c0, &c1);
            if (s != r)
                for (int c = c0; c <= c1; c++)
                    w[n++] = virt ? c_ag(S, mirror(r, s, S->P), r, c) : c_ag(S, r, s, c);
        }
        if (x->gemm == 1 && in->ngemm > 1)
            w[n++] = c_rb(S, r, x->tm);
        if ((x->kind & XS_TP_K_SPLIT) && !split_early(x)) /* the last part: the others */
            for (int q = 0; q < XS_TP_SPLIT_PARTS(x) - 1; q++)
                w[n++] = c_sp(S, r, XS_TP_SPLIT_SLOT(x) + q);
    }
    if (x->kind & XS_TP_K_REDUCE)
        for (int src = 0; src < S->P; src++)
            if (!virt || src == r)
                w[n++] = c_rs(S, r, src, x->red_t);
    return n;
}

/* The counters task x of rank r raises (w[], at most XS_TP_PUSH_MAX + 1). With couriers a
 * remote owner's tile raises its outbox ready flag; the courier raises the owner's signal. */
static int task_signals(const plan_set *S, int r, const xs_tp_task *x, int *w)
{
    const xs_tp_info *in = &S->in;
    int n = 0, ow, t;
    if (split_early(x)) { /* its part in scratch: the last part's wait */
        w[n++] = c_sp(S, r, XS_TP_SPLIT_SLOT(x) + XS_TP_SPLIT_PART(x));
        return n;
    }
    if (x->kind & XS_TP_K_TILE) {
        if (S->cour > 0 && remote_tile(S, r, x, &ow, &t) == 0) {
            w[n++] = c_rd(S, r, ow, t);
        } else if (x->gemm == in->rs_gemm) {
            const int owner = x->tm / S->rbpr;
            w[n++] = c_rs(S, owner, r, (x->tm - owner * S->rbpr) * in->tiles_n[in->rs_gemm] +
                                           x->tn);
        } else if (x->gemm == 0 && in->ngemm > 1) {
            w[n++] = c_rb(S, r, x->tm);
        }
    }
    if (x->kind & XS_TP_K_PUSH)
        for (int k = 0; k < (x->push_n > 1 ? x->push_n : 1); k++)
            w[n++] = c_ag(S, x->push_rank, r, x->push_chunk + k);
    return n;
}

/* What counter u is, for a report. */
static void describe(const plan_set *S, int u, char *buf, size_t len)
{
    const xs_tp_info *in = &S->in;
    if (u < S->n_ag) {
        const int c = u % in->ag_chunks, src = (u / in->ag_chunks) % S->P,
                  dst = u / in->ag_chunks / S->P;
        snprintf(buf, len, "rank %d's push of chunk %d to rank %d", src, c, dst);
    } else if (u < S->n_ag + S->n_rs) {
        const int v = u - S->n_ag, t = v % in->t_own, src = (v / in->t_own) % S->P,
                  owner = v / in->t_own / S->P;
        snprintf(buf, len, "rank %d's signal of owner %d's tile %d", src, owner, t);
    } else if (u < S->n_ag + S->n_rs + S->n_rb) {
        const int v = u - S->n_ag - S->n_rs;
        snprintf(buf, len, "rank %d's GEMM 0 tiles of row block %d (%d)", v / in->tiles_m,
                 v % in->tiles_m, in->tiles_n[0]);
    } else if (u < S->n_ag + S->n_rs + S->n_rb + S->n_rd) {
        const int v = u - S->n_ag - S->n_rs - S->n_rb, t = v % in->t_own,
                  owner = (v / in->t_own) % S->P, src = v / in->t_own / S->P;
        snprintf(buf, len, "rank %d's outbox ready flag of owner %d's tile %d", src, owner, t);
    } else {
        const int v = u - S->n_ag - S->n_rs - S->n_rb - S->n_rd;
        snprintf(buf, len, "rank %d's split scratch slot %d", v / S->sp_slots, v % S->sp_slots);
    }
}

/* ---- agents: the compute CTAs and the couriers of the simulated ranks ---------------------- */

/* Agents 0 .. nr G - 1 are compute CTAs (rank r0 + q / G, first task q % G, step G), agents
 * nr G .. nr (G + cour) - 1 couriers (rank r0 + j / cour, first walk entry j % cour, step cour,
 * j = q - nr G). An agent's position indexes its rank's list or walk. */
typedef struct {
    const plan_set *S;
    int G, r0, nr, virt;
} agents;

static int ag_count(const agents *A) { return A->nr * (A->G + A->S->cour); }
static int ag_courier(const agents *A, int q) { return q >= A->nr * A->G; }
static int ag_rank(const agents *A, int q)
{
    return A->r0 + (ag_courier(A, q) ? (q - A->nr * A->G) / A->S->cour : q / A->G);
}
static int ag_first(const agents *A, int q)
{
    return ag_courier(A, q) ? (q - A->nr * A->G) % A->S->cour : q % A->G;
}
static int ag_step(const agents *A, int q) { return ag_courier(A, q) ? A->S->cour : A->G; }
static int ag_end(const agents *A, int q)
{
    return ag_courier(A, q) ? A->S->nw[ag_rank(A, q)] : A->S->n[ag_rank(A, q)];
}

/* The counters agent q waits for at position i (w[]), and those it raises after (sg[]). A
 * courier's tile entry waits for its tile's ready flag and raises the owner's signal of it; a
 * push entry waits for nothing (the chunk is there at the start) and raises the chunk's flag at
 * the peer. */
static void ag_work(const agents *A, int q, int i, int *w, int *nw, int *sg, int *ns)
{
    const plan_set *S = A->S;
    const int r = ag_rank(A, q);
    if (ag_courier(A, q)) {
        int ow = 0, t = 0;
        const int e = S->walk[r][i];
        *nw = *ns = 0;
        if (e < 0) {
            sg[(*ns)++] = c_ag(S, XS_TP_WALK_RANK(e, S->in.ag_chunks), r,
                               XS_TP_WALK_CHUNK(e, S->in.ag_chunks));
            return;
        }
        if (remote_tile(S, r, &S->v[r][e], &ow, &t) == 0) {
            w[(*nw)++] = c_rd(S, r, ow, t);
            sg[(*ns)++] = c_rs(S, ow, r, t);
        }
        return;
    }
    *nw = task_waits(S, r, &S->v[r][i], A->virt, w);
    *ns = task_signals(S, r, &S->v[r][i], sg);
}

static const char *kind_name(int kind)
{
    if (kind & XS_TP_K_REDUCE)
        return "reduction";
    if ((kind & XS_TP_K_TILE) && (kind & XS_TP_K_PUSH))
        return "tile + push";
    if (kind & XS_TP_K_TILE)
        return "tile";
    if (kind & XS_TP_K_PUSH)
        return "push";
    return "empty";
}

/* ---- 1. the simulation ------------------------------------------------------------------- */

typedef struct {
    int deadlock;  /* some CTA can never finish */
    long tasks;    /* tasks run */
    char what[400]; /* the earliest blocked task and what it waits for */
} sim_out;

/* Run the ranks' lists on G CTAs each, plus S->cour couriers per rank (virt_rank < 0: all P
 * ranks, real peers; else that rank alone with virtual peers) until no agent can run. Out of
 * host memory counts as a deadlock. */
static void simulate(const plan_set *S, int G, int virt_rank, sim_out *o)
{
    memset(o, 0, sizeof *o);
    const agents A = {S, G, virt_rank < 0 ? 0 : virt_rank, virt_rank < 0 ? S->P : 1,
                      virt_rank >= 0};
    const int nc = ncounters(S), na = ag_count(&A);
    const size_t nwmax = (size_t)S->in.ag_chunks + S->P + XS_TP_PUSH_MAX + XS_TP_SPLIT_MAX + 2;
    int *cnt = (int *)calloc((size_t)nc + 1, sizeof(int));
    int *head = (int *)malloc(((size_t)nc + 1) * sizeof(int));
    int *next = (int *)malloc((size_t)na * sizeof(int));    /* waiter list link */
    int *pos = (int *)malloc((size_t)na * sizeof(int));     /* agent's next position */
    int *waiting = (int *)malloc((size_t)na * sizeof(int)); /* counter it waits for, or -1 */
    int *stack = (int *)malloc((size_t)na * sizeof(int));
    int *w = (int *)malloc(nwmax * sizeof(int));
    int *sg = (int *)malloc(nwmax * sizeof(int));
    if (!cnt || !head || !next || !pos || !waiting || !stack || !w || !sg) {
        free(cnt), free(head), free(next), free(pos), free(waiting), free(stack), free(w);
        free(sg);
        o->deadlock = 1;
        snprintf(o->what, sizeof o->what, "out of host memory");
        return;
    }
    for (int u = 0; u < nc; u++)
        head[u] = -1;
    int sp = 0;
    for (int q = 0; q < na; q++) {
        pos[q] = ag_first(&A, q);
        waiting[q] = -1;
        stack[sp++] = q;
    }
    while (sp > 0) {
        const int q = stack[--sp], end = ag_end(&A, q), step = ag_step(&A, q);
        waiting[q] = -1;
        while (pos[q] < end) {
            int nw, ns;
            ag_work(&A, q, pos[q], w, &nw, sg, &ns);
            int blocked = -1;
            for (int j = 0; j < nw && blocked < 0; j++)
                if (cnt[w[j]] < target(S, w[j]))
                    blocked = w[j];
            if (blocked >= 0) {
                waiting[q] = blocked;
                next[q] = head[blocked];
                head[blocked] = q;
                break;
            }
            for (int j = 0; j < ns; j++) {
                const int u = sg[j];
                if (++cnt[u] == target(S, u)) {
                    for (int z = head[u]; z >= 0; z = next[z])
                        stack[sp++] = z; /* an agent waits on one counter at a time: fits */
                    head[u] = -1;
                }
            }
            o->tasks++;
            pos[q] += step;
        }
    }
    /* the earliest blocked agent (smallest list position - a courier's entry at its tile's -
     * then rank) */
    int best = -1, bestp = 0;
    for (int q = 0; q < na; q++) {
        if (pos[q] >= ag_end(&A, q))
            continue;
        const int r = ag_rank(&A, q);
        const int p = ag_courier(&A, q) ? S->walk[r][pos[q]] : pos[q];
        if (best < 0 || p < bestp)
            best = q, bestp = p;
    }
    if (best >= 0) {
        const int r = ag_rank(&A, best), u = waiting[best];
        char d[160];
        describe(S, u, d, sizeof d);
        /* where the awaited signal is raised, if anywhere: by a task of the raising rank, or by
         * its courier for the task at that position */
        const int rr = raiser(S, u);
        int at = -1, by_courier = 0;
        if (rr >= A.r0 && rr < A.r0 + A.nr) {
            for (int k = 0; k < S->n[rr] && at < 0; k++) {
                const int ns = task_signals(S, rr, &S->v[rr][k], sg);
                for (int j = 0; j < ns; j++)
                    if (sg[j] == u)
                        at = k;
            }
            for (int e = 0; e < S->nw[rr] && at < 0 && S->cour > 0; e++) {
                int ow, t;
                const int we = S->walk[rr][e];
                if (we < 0 ? c_ag(S, XS_TP_WALK_RANK(we, S->in.ag_chunks), rr,
                                  XS_TP_WALK_CHUNK(we, S->in.ag_chunks)) == u
                           : remote_tile(S, rr, &S->v[rr][we], &ow, &t) == 0 &&
                                 c_rs(S, ow, rr, t) == u)
                    at = e, by_courier = 1;
            }
        }
        char where[96];
        if (at >= 0 && by_courier && S->walk[rr][at] < 0)
            snprintf(where, sizeof where, "its courier %d's entry %d (a push), never reached",
                     at % S->cour, at);
        else if (at >= 0 && by_courier)
            snprintf(where, sizeof where, "its courier %d's entry %d (task %d), never reached",
                     at % S->cour, at, S->walk[rr][at]);
        else if (at >= 0)
            snprintf(where, sizeof where, "its task %d (CTA %d), never reached", at, at % G);
        else
            snprintf(where, sizeof where, "no task of its list raises it");
        o->deadlock = 1;
        if (ag_courier(&A, best)) { /* a tile entry: a push entry never waits */
            const int e = pos[best], i = S->walk[r][e];
            snprintf(o->what, sizeof o->what, "rank %d courier %d entry %d (task %d, %s tm %d "
                     "tn %d) waits for %s: %s", r, e % S->cour, e, i, kind_name(S->v[r][i].kind),
                     S->v[r][i].tm, S->v[r][i].tn, d, where);
        } else {
            const int i = pos[best];
            snprintf(o->what, sizeof o->what,
                     "rank %d CTA %d task %d (%s GEMM %d tm %d tn %d red %d) waits for %s: %s",
                     r, best % G, i, kind_name(S->v[r][i].kind), S->v[r][i].gemm, S->v[r][i].tm,
                     S->v[r][i].tn, S->v[r][i].red_t, d, where);
        }
    }
    free(cnt), free(head), free(next), free(pos), free(waiting), free(stack), free(w), free(sg);
}

/* The same outcome the slow way (the simulation's own check): sweep over the agents (real
 * peers), running every step whose waits hold, until a sweep runs none. Returns the steps run;
 * *stuck = 1 when some agent is not done. */
static long simulate_sweeps(const plan_set *S, int G, int *stuck)
{
    const agents A = {S, G, 0, S->P, 0};
    const int nc = ncounters(S), na = ag_count(&A);
    int *cnt = (int *)calloc((size_t)nc + 1, sizeof(int));
    int *pos = (int *)malloc((size_t)na * sizeof(int));
    int w[64], sg[64];
    long run = 0;
    *stuck = 1;
    if (!cnt || !pos || S->in.ag_chunks + S->P + XS_TP_PUSH_MAX + XS_TP_SPLIT_MAX + 2 > 64) {
        free(cnt), free(pos);
        return -1;
    }
    for (int q = 0; q < na; q++)
        pos[q] = ag_first(&A, q);
    for (int progress = 1; progress;) {
        progress = 0;
        for (int q = 0; q < na; q++) {
            for (int ok = 1; ok && pos[q] < ag_end(&A, q);) {
                int nw, ns;
                ag_work(&A, q, pos[q], w, &nw, sg, &ns);
                for (int j = 0; j < nw; j++)
                    ok &= cnt[w[j]] >= target(S, w[j]);
                if (!ok)
                    break;
                for (int j = 0; j < ns; j++)
                    cnt[sg[j]]++;
                pos[q] += ag_step(&A, q);
                run++;
                progress = 1;
            }
        }
    }
    *stuck = 0;
    for (int q = 0; q < na; q++)
        *stuck |= pos[q] < ag_end(&A, q);
    free(cnt);
    free(pos);
    return run;
}

/* ---- 2. rotations; 3. positions ------------------------------------------------------------ */

/* Task x of rank 0's list as rank r's list holds it: every rank-relative field moved by r. */
static xs_tp_task rotate_task(const plan_set *S, xs_tp_task x, int r)
{
    if (x.kind & XS_TP_K_TILE)
        x.tm = (x.tm + r * S->rbpr) % S->in.tiles_m;
    if (x.kind & XS_TP_K_PUSH)
        x.push_rank = (x.push_rank + r) % S->P;
    return x;
}

/* Rank r's list is rank 0's rotated by r. 0, or the first mismatch (*r, *i) and -1. */
static int check_rotations(const plan_set *S, int *rbad, int *ibad)
{
    for (int r = 1; r < S->P; r++) {
        if (S->n[r] != S->n[0]) {
            *rbad = r, *ibad = -1;
            return -1;
        }
        for (int i = 0; i < S->n[0]; i++) {
            const xs_tp_task x = rotate_task(S, S->v[0][i], r);
            if (memcmp(&x, &S->v[r][i], sizeof x)) {
                *rbad = r, *ibad = i;
                return -1;
            }
        }
    }
    return 0;
}

/* Every wait's signal at an earlier list position (on the raising rank), and every all-gather
 * chunk from rank s pushed at the position of this rank's push of it to the mirror rank.
 * Returns the number of violations; the first in why. -1 when out of memory. With couriers a
 * remote tile's signal counts at its tile's position (the courier raises it after the tile, and
 * check_walk checks that couriers go in position order), and a courier's push before position 0
 * (check_walk: every push precedes every tile in the walk, and a push waits for nothing). */
static long check_positions(const plan_set *S_, char *why, size_t len)
{
    plan_set S0 = *S_;
    S0.cour = 0; /* positions: every signal at the position of the task it follows */
    const plan_set *S = &S0;
    const int nc = ncounters(S);
    int *at = (int *)malloc(((size_t)nc + 1) * sizeof(int)); /* position of the (last) raiser */
    const size_t nwmax = (size_t)S->in.ag_chunks + S->P + XS_TP_PUSH_MAX + XS_TP_SPLIT_MAX + 2;
    int *w = (int *)malloc(nwmax * sizeof(int));
    if (!at || !w) {
        free(at), free(w);
        return -1;
    }
    /* at[u] = 1 + the position of u's (last) raiser; 0: a courier's push; -1: none */
    for (int u = 0; u < nc; u++)
        at[u] = -1;
    for (int r = 0; r < S->P && S_->cour > 0; r++)
        for (int e = 0; e < S_->nw[r]; e++)
            if (S_->walk[r][e] < 0)
                at[c_ag(S, XS_TP_WALK_RANK(S_->walk[r][e], S->in.ag_chunks), r,
                        XS_TP_WALK_CHUNK(S_->walk[r][e], S->in.ag_chunks))] = 0;
    for (int r = 0; r < S->P; r++)
        for (int i = 0; i < S->n[r]; i++) {
            const int ns = task_signals(S, r, &S->v[r][i], w);
            for (int j = 0; j < ns; j++)
                if (at[w[j]] < i + 1)
                    at[w[j]] = i + 1;
        }
    long bad = 0;
    why[0] = 0;
    for (int r = 0; r < S->P; r++)
        for (int i = 0; i < S->n[r]; i++) {
            const xs_tp_task *x = &S->v[r][i];
            const int nw = task_waits(S, r, x, 0, w);
            for (int j = 0; j < nw; j++) {
                const int u = w[j];
                int mir = -2;
                if (u < S->n_ag) { /* chunk c of shard s: at the mirror push's position */
                    const int c = u % S->in.ag_chunks, s = (u / S->in.ag_chunks) % S->P;
                    mir = at[c_ag(S, mirror(r, s, S->P), r, c)];
                }
                if (at[u] >= 0 && at[u] < i + 1 && (mir == -2 || mir == at[u]))
                    continue;
                if (!bad++) {
                    char d[160];
                    describe(S, u, d, sizeof d);
                    snprintf(why, len, "rank %d task %d (%s) waits for %s at position %d "
                             "(mirror push at %d; positions + 1: 0 a courier's push, -1 none, "
                             "-2 not a chunk)", r, i, kind_name(x->kind), d, at[u], mir);
                }
            }
        }
    free(at);
    free(w);
    return bad;
}

/* The couriers' walks: rank r's holds first every push its list does not do (each (peer, chunk)
 * once; with an all-gather), then every remote reduce-scatter tile of its list once, in
 * increasing list positions - pushes before tiles and tiles in production order are what the
 * deadlock argument keys a courier's entries on (docs/TP.md "Couriers (sm90)"). Returns the
 * violations; the first in why. */
static long check_walk(const plan_set *S, char *why, size_t len)
{
    long bad = 0;
    why[0] = 0;
    const int nch = S->in.ag_chunks;
    const size_t np = S->in.ag && S->P > 1 ? (size_t)S->P * nch : 0;
    unsigned char *seen = (unsigned char *)calloc(np + 1, 1);
    if (!seen) {
        snprintf(why, len, "out of host memory");
        return 1;
    }
    for (int r = 0; r < S->P; r++) {
        memset(seen, 0, np + 1);
        for (int i = 0; i < S->n[r] && np; i++) { /* the list's own pushes */
            const xs_tp_task *x = &S->v[r][i];
            if (x->kind & XS_TP_K_PUSH)
                for (int k = 0; k < (x->push_n > 1 ? x->push_n : 1); k++)
                    seen[(size_t)x->push_rank * nch + x->push_chunk + k] = 2;
        }
        int e = 0, ow, t;
        for (; e < S->nw[r] && S->walk[r][e] < 0; e++) {
            const int we = S->walk[r][e];
            const int d = XS_TP_WALK_RANK(we, nch), c = XS_TP_WALK_CHUNK(we, nch);
            if (!np || d < 0 || d >= S->P || d == r || c < 0 || c >= nch ||
                seen[(size_t)d * nch + c]) {
                if (!bad++)
                    snprintf(why, len, "rank %d: walk entry %d pushes chunk %d to rank %d, "
                             "outside the problem or pushed already", r, e, c, d);
                continue;
            }
            seen[(size_t)d * nch + c] = 1;
        }
        for (int d = 0; d < S->P && np; d++)
            for (int c = 0; c < nch && d != r; c++)
                if (!seen[(size_t)d * nch + c] && !bad++)
                    snprintf(why, len, "rank %d: nobody pushes chunk %d to rank %d", r, c, d);
        for (int i = 0; i < S->n[r]; i++) {
            if (remote_tile(S, r, &S->v[r][i], &ow, &t) != 0)
                continue;
            if (e >= S->nw[r] || S->walk[r][e] != i) {
                if (!bad++)
                    snprintf(why, len, "rank %d: walk entry %d is %d, the next remote tile is "
                             "task %d (a push after a tile, or tiles out of order)", r, e,
                             e < S->nw[r] ? S->walk[r][e] : -1, i);
            }
            e++;
        }
        if (e != S->nw[r] && !bad++)
            snprintf(why, len, "rank %d: walk of %d entries for %d pushes and remote tiles", r,
                     S->nw[r], e);
    }
    free(seen);
    return bad;
}

/* ---- the configurations --------------------------------------------------------------------- */

static xs_tp_costs make_costs(const xs_tp_info *in, int comm_heavy)
{
    xs_tp_costs c;
    memset(&c, 0, sizeof c);
    for (int g = 0; g < in->ngemm; g++) /* the tile engine at 2.65 TFLOP/s per SM, + 1 us */
        c.tile_ns[g] = 2.0 * XS_TP_BM * XS_TP_BN * in->gk[g] / 2.65e12 * 1e9 + 1000;
    c.push_ns = 1600;
    c.reduce_ns = 3000;
    if (comm_heavy) { /* slow pushes and reductions, fast tiles: other budgets, other lists */
        for (int g = 0; g < in->ngemm; g++)
            c.tile_ns[g] = c.tile_ns[g] / 8 + 200;
        c.push_ns = 20000;
        c.reduce_ns = 9000;
    }
    return c;
}

static void pace_label(const xs_tp_pace *p, int sm90, char *buf, size_t n)
{
    snprintf(buf, n, "f%.2f/b%.1f/%s%s%s", p->finish, p->burst,
             p->ring             ? "ring"
             : p->spread == 2    ? "stream4"
             : p->spread         ? "stream"
             : p->cap_bytes > 0  ? "capQ"
                                 : "nocap",
             sm90 ? "/stored" : "",
             p->split == 2   ? "/split2"
             : p->split == 4 ? "/split4"
             : p->split == 8 ? "/split8"
                             : "");
}

static long g_cases, g_distinct, g_lists, g_sim_tasks;

/* Every order of one (shape, grid): naive, the candidates, the sm90 engine's stored ring ones,
 * under both cost sets; each rank's list built in its own plan context. */
static long g_cour_cases;

/* C > 0: the same with C couriers per rank (xs_tp_set_couriers: lists for G - C compute CTAs;
 * the sm90 engine's orders only - naive, the stored candidates, the ring ones stored, and the
 * front-loaded one), simulated as P x (G - C) compute CTAs and P x C couriers. */
static void check_config_c(const xs_tp_shape *s, int G, int C)
{
    char name[160];
    snprintf(name, sizeof name, "%s m=%d n=%d k=%d P=%d grid=%d%s", xs_tp_op_name(s->op), s->m,
             s->n, s->k, s->peers, G, C ? " couriers=" : "");
    if (C)
        snprintf(name + strlen(name), sizeof name - strlen(name), "%d", C);
    xs_tp_info in;
    if (xs_tp_info_of(s, &in) != XS_OK) {
        XT_CHECK(0, "%s: %s", name, xs_errmsg());
        return;
    }
    if (C > 0 && (G - C < 1 || (in.rs_gemm < 0 && !(in.ag && s->peers > 1))))
        return; /* no compute CTA left, or nothing for couriers to carry */
    const int P = s->peers, Gc = G - C;
    xs_tp_plan *t[XS_MAX_RANKS];
    memset(t, 0, sizeof t);
    for (int r = 0; r < P; r++)
        if (xs_tp_plan_create(s, r, G, &t[r]) != XS_OK || xs_tp_plan_set_couriers(t[r], C) != XS_OK) {
            XT_CHECK(0, "%s rank %d: plan context: %s", name, r, xs_errmsg());
            for (int q = 0; q <= r; q++)
                xs_tp_plan_destroy(t[q]);
            return;
        }
    xs_profile prof;
    xs_profile_default(&prof);
    xs_tp_pace cand[XS_TP_NCAND + 4];
    int nc = xs_tp_candidates(0.9 * xs_capacity(&prof, Gc), cand, XS_TP_NCAND);
    if (C > 0) { /* the sm90 engine's: stored only, plus the front-loaded order */
        int k = 0;
        for (int i = 0; i < nc; i++)
            if (!cand[i].spread || cand[i].ring) {
                cand[k] = cand[i];
                cand[k++].spread = 0;
            }
        nc = k;
        xs_tp_pace_front(&cand[nc++]);
        const int front = nc - 1;
        if (s->op == XS_TP_GEMM_RS && s->peers > 1) /* and its head split along k */
            for (int sp = 2; sp <= 8; sp *= 2) {
                cand[nc] = cand[front];
                cand[nc++].split = sp;
            }
    }
    int sm90_from = nc;
    for (int i = 0; i < XS_TP_NCAND && C == 0; i++) /* sm90: ring candidates with spread 0 */
        if (cand[i].ring) {
            cand[nc] = cand[i];
            cand[nc++].spread = 0;
        }
    int orders = 0, bad = 0, distinct = 0;
    long tasks0 = 0;
    unsigned long long seen[2 * (XS_TP_NCAND + 4) + 1]; /* rank 0's list hashes */
    for (int cost = 0; cost < 2; cost++) {
        const xs_tp_costs c = make_costs(&in, cost);
        for (int o = -1; o < nc; o++) {
            if (o < 0 && cost) /* naive: no costs */
                continue;
            char lab[64];
            if (o < 0)
                snprintf(lab, sizeof lab, "naive");
            else
                pace_label(&cand[o], o >= sm90_from, lab, sizeof lab);
            plan_set S;
            set_init(&S, s, &in);
            set_split_slots(&S, 3 * G);
            int built = 1;
            for (int r = 0; r < P && built; r++) {
                const xs_status st = o < 0 ? xs_tp_order_naive(t[r], 0)
                                           : xs_tp_order_shaped(t[r], 0, &cand[o], &c, &prof);
                if (st != XS_OK || xs_tp_order_check(t[r], 0) != XS_OK) {
                    XT_CHECK(0, "%s %s cost set %d rank %d: %s", name, lab, cost, r, xs_errmsg());
                    built = 0;
                }
                S.n[r] = xs_tp_order_get(t[r], 0, &S.v[r]);
                S.nw[r] = xs_tp_order_walk(t[r], 0, &S.walk[r]);
                if (built && xs_tp_order_couriers(t[r], 0) != C) {
                    XT_CHECK(0, "%s %s rank %d: order built for %d couriers", name, lab, r,
                             xs_tp_order_couriers(t[r], 0));
                    built = 0;
                }
            }
            S.cour = C;
            g_cases++;
            orders++;
            if (!built) {
                bad++;
                continue;
            }
            g_lists += P;
            tasks0 += S.n[0];
            const unsigned long long h = xs_tp_order_hash(t[0], 0);
            int dup = 0;
            for (int j = 0; j < distinct; j++)
                dup |= seen[j] == h;
            if (!dup)
                seen[distinct++] = h;
            int rb = 0, ib = 0;
            const int rot = check_rotations(&S, &rb, &ib);
            XT_CHECK(rot == 0, "%s %s cost set %d: rank %d's list is not rank 0's rotated "
                     "(first difference at task %d)", name, lab, cost, rb, ib);
            char why[400];
            const long pb = check_positions(&S, why, sizeof why);
            XT_CHECK(pb == 0, "%s %s cost set %d: %ld waits off their position; first: %s", name,
                     lab, cost, pb, why);
            long wb = 0;
            if (C > 0) {
                wb = check_walk(&S, why, sizeof why);
                XT_CHECK(wb == 0, "%s %s cost set %d: courier walk: %s", name, lab, cost, why);
                g_cour_cases++;
            }
            sim_out so, sv;
            simulate(&S, Gc, -1, &so);
            g_sim_tasks += so.tasks;
            XT_CHECK(!so.deadlock, "%s %s cost set %d: DEADLOCK with real peers: %s", name, lab,
                     cost, so.what);
            int vdead = 0;
            for (int r = 0; r < P && !vdead; r++) {
                simulate(&S, Gc, r, &sv);
                g_sim_tasks += sv.tasks;
                vdead = sv.deadlock;
            }
            XT_CHECK(!vdead, "%s %s cost set %d: DEADLOCK with virtual peers: %s", name, lab,
                     cost, sv.what);
            bad += rot != 0 || pb != 0 || wb != 0 || so.deadlock || vdead;
        }
    }
    XT_CHECK(bad == 0, "%s: %d of %d orders fail", name, bad, orders);
    g_distinct += distinct;
    printf("ok %s: %d orders (%d distinct lists) x %d ranks, %ld tasks per list on average: "
           "rotations, positions, %sno deadlock (real and virtual peers)\n", name, orders,
           distinct, P, orders ? tasks0 / orders : 0, C ? "courier walks, " : "");
    for (int r = 0; r < P; r++)
        xs_tp_plan_destroy(t[r]);
}

/* Every order of one (shape, grid), without couriers and with 1 and 4 per rank. */
static void check_config(const xs_tp_shape *s, int G)
{
    check_config_c(s, G, 0);
    check_config_c(s, G, 1);
    check_config_c(s, G, 4);
}

/* ---- the broken lists --------------------------------------------------------------------- */

/* Build rank r's naive list of shape s into a fresh copy (caller frees). */
static xs_tp_task *naive_copy(const xs_tp_shape *s, int r, int *n)
{
    xs_tp_plan *t = NULL;
    *n = 0;
    if (xs_tp_plan_create(s, r, 1, &t) != XS_OK || xs_tp_order_naive(t, 0) != XS_OK) {
        xs_tp_plan_destroy(t);
        return NULL;
    }
    const xs_tp_task *v;
    *n = xs_tp_order_get(t, 0, &v);
    xs_tp_task *c = (xs_tp_task *)malloc((size_t)*n * sizeof *c);
    if (c)
        memcpy(c, v, (size_t)*n * sizeof *c);
    xs_tp_plan_destroy(t);
    return c;
}

/* Whether rank r's list passes xs_tp_order_check. */
static int order_ok(const xs_tp_shape *s, int r, const xs_tp_task *v, int n)
{
    xs_tp_plan *t = NULL;
    int ok = xs_tp_plan_create(s, r, 1, &t) == XS_OK && xs_tp_order_set(t, 0, v, n) == XS_OK &&
             xs_tp_order_check(t, 0) == XS_OK;
    xs_tp_plan_destroy(t);
    return ok;
}

static void swap_tasks(xs_tp_task *v, int i, int j)
{
    xs_tp_task x = v[i];
    v[i] = v[j];
    v[j] = x;
}

static int find_tile(const xs_tp_task *v, int n, int g, int tm, int tn)
{
    for (int i = 0; i < n; i++)
        if ((v[i].kind & XS_TP_K_TILE) && v[i].gemm == g && v[i].tm == tm &&
            (tn < 0 || v[i].tn == tn))
            return i;
    return -1;
}

static void check_broken(void)
{
    /* a: P = 2 all-gather, one chunk per shard; on every rank the push swapped with the tile on
     * the peer's shard: each rank's first task waits for the peer's push, its last task */
    {
        const xs_tp_shape s = {XS_TP_AG_GEMM, 256, 512, 256, 2};
        xs_tp_info in;
        xs_tp_info_of(&s, &in);
        plan_set S;
        set_init(&S, &s, &in);
        xs_tp_task *v[2];
        for (int r = 0; r < 2; r++) {
            v[r] = naive_copy(&s, r, &S.n[r]);
            if (!v[r]) {
                XT_CHECK(0, "broken a: naive list: %s", xs_errmsg());
                return;
            }
            const int remote = find_tile(v[r], S.n[r], 0, (r + 1) % 2, -1);
            XT_CHECK(in.ag_chunks == 1 && (v[r][0].kind & XS_TP_K_PUSH) && remote > 0,
                     "broken a: naive list of rank %d: push first, a remote tile", r);
            swap_tasks(v[r], 0, remote);
            S.v[r] = v[r];
        }
        sim_out so;
        simulate(&S, 1, -1, &so);
        XT_CHECK(so.deadlock, "broken a (push behind the tile that needs the peer's): no "
                 "deadlock reported");
        printf("ok broken a (P = 2, push swapped behind the remote tile, grid 1): %s\n", so.what);
        char why[400];
        XT_CHECK(check_positions(&S, why, sizeof why) > 0, "broken a: positions not flagged");
        int rb, ib;
        XT_CHECK(check_rotations(&S, &rb, &ib) == 0, "broken a: still rotations");
        XT_CHECK(!order_ok(&s, 0, v[0], S.n[0]), "broken a: xs_tp_order_check accepts it");
        sim_out sv;
        simulate(&S, 1, 0, &sv);
        XT_CHECK(sv.deadlock, "broken a: no deadlock with virtual peers");
        free(v[0]);
        free(v[1]);
    }
    /* b: P = 3, one chunk per shard, grid 1: rank 0 and rank 1 each push to the mirror rank
     * before every tile that needs it (xs_tp_order_check and the virtual-peer simulation pass),
     * but in mirrored orders - not rotations of one plan - and together they deadlock */
    {
        const xs_tp_shape s = {XS_TP_AG_GEMM, 384, 768, 256, 3};
        xs_tp_info in;
        xs_tp_info_of(&s, &in);
        plan_set S;
        set_init(&S, &s, &in);
        xs_tp_task v[3][8];
        memset(v, 0, sizeof v);
        int n2 = 0;
        xs_tp_task *nv = naive_copy(&s, 2, &n2);
        if (!nv || n2 > 8 || in.ag_chunks != 1 || in.tiles_n[0] != 1) {
            XT_CHECK(0, "broken b: unexpected shape (%d tasks, %d chunks)", n2, in.ag_chunks);
            free(nv);
            return;
        }
        memcpy(v[2], nv, (size_t)n2 * sizeof *nv);
        free(nv);
        /* rank 0: push -> 2, tile shard 1, push -> 1, tile shard 2, own tile;
         * rank 1: push -> 2, tile shard 0, push -> 0, tile shard 2, own tile */
        const int order_[2][5][2] = {{{1, 2}, {0, 1}, {1, 1}, {0, 2}, {0, 0}},
                                     {{1, 2}, {0, 0}, {1, 0}, {0, 2}, {0, 1}}};
        for (int r = 0; r < 2; r++) {
            for (int i = 0; i < 5; i++) {
                xs_tp_task *x = &v[r][i];
                if (order_[r][i][0]) {
                    x->kind = XS_TP_K_PUSH, x->push_rank = order_[r][i][1];
                } else {
                    x->kind = XS_TP_K_TILE, x->tm = order_[r][i][1];
                }
            }
            S.v[r] = v[r];
            S.n[r] = 5;
        }
        S.v[2] = v[2];
        S.n[2] = n2;
        for (int r = 0; r < 3; r++)
            XT_CHECK(order_ok(&s, r, S.v[r], S.n[r]), "broken b: rank %d's list should pass "
                     "xs_tp_order_check: %s", r, xs_errmsg());
        for (int r = 0; r < 3; r++) {
            sim_out sv;
            simulate(&S, 1, r, &sv);
            XT_CHECK(!sv.deadlock, "broken b: rank %d alone (virtual peers) deadlocks: %s", r,
                     sv.what);
        }
        sim_out so;
        simulate(&S, 1, -1, &so);
        XT_CHECK(so.deadlock, "broken b (per-rank valid, not rotations): no deadlock reported");
        printf("ok broken b (P = 3, each list valid alone, mirrored orders): %s\n", so.what);
        int rb, ib;
        XT_CHECK(check_rotations(&S, &rb, &ib) != 0, "broken b: taken for rotations");
        char why[400];
        XT_CHECK(check_positions(&S, why, sizeof why) > 0, "broken b: positions not flagged");
    }
    /* c: mlp, grid 3: on every rank a GEMM 1 tile swapped with the last GEMM 0 tile of its row
     * block, both in one CTA */
    {
        const xs_tp_shape s = {XS_TP_MLP, 512, 264, 192, 2};
        xs_tp_info in;
        xs_tp_info_of(&s, &in);
        plan_set S;
        set_init(&S, &s, &in);
        xs_tp_task *v[2];
        const int G = 3;
        int ok = 1;
        for (int r = 0; r < 2; r++) {
            v[r] = naive_copy(&s, r, &S.n[r]);
            S.v[r] = v[r];
            if (!v[r]) {
                ok = 0;
                continue;
            }
            /* the last GEMM 0 tile of the rank's first row block, and a GEMM 1 tile of the same
             * row block after it in the same CTA */
            const int tm = r * S.rbpr;
            int last0 = -1, g1 = -1;
            for (int i = 0; i < S.n[r]; i++)
                if ((v[r][i].kind & XS_TP_K_TILE) && v[r][i].gemm == 0 && v[r][i].tm == tm)
                    last0 = i;
            for (int i = last0 + 1; i < S.n[r] && g1 < 0; i++)
                if ((v[r][i].kind & XS_TP_K_TILE) && v[r][i].gemm == 1 && v[r][i].tm == tm &&
                    i % G == last0 % G)
                    g1 = i;
            ok &= last0 >= 0 && g1 > last0;
            if (last0 >= 0 && g1 > last0)
                swap_tasks(v[r], last0, g1);
        }
        XT_CHECK(ok, "broken c: no GEMM 1 tile in the CTA of its row block's last GEMM 0 tile");
        if (ok) {
            sim_out so;
            simulate(&S, G, -1, &so);
            XT_CHECK(so.deadlock, "broken c (GEMM 1 tile before its row block's last GEMM 0 "
                     "tile, one CTA): no deadlock reported");
            printf("ok broken c (mlp P = 2, GEMM 1 tile swapped before its row block, grid 3): "
                   "%s\n", so.what);
        }
        free(v[0]);
        free(v[1]);
    }
    /* d: gemm_rs, rank 0's reduction of own tile 0 swapped with that tile (rank 1 naive):
     * grid 2 with the two in one CTA deadlocks; with the two in different CTAs it does not (the
     * tile's CTA does not depend on the reduction's); grid 1 deadlocks either way */
    {
        const xs_tp_shape s = {XS_TP_GEMM_RS, 512, 264, 128, 2};
        xs_tp_info in;
        xs_tp_info_of(&s, &in);
        for (int same = 0; same < 2; same++) {
            plan_set S;
            set_init(&S, &s, &in);
            xs_tp_task *v[2];
            v[0] = naive_copy(&s, 0, &S.n[0]);
            v[1] = naive_copy(&s, 1, &S.n[1]);
            S.v[0] = v[0], S.v[1] = v[1];
            int ok = v[0] && v[1];
            const int tile = ok ? find_tile(v[0], S.n[0], 0, 0, 0) : -1;
            int red = -1;
            for (int i = ok ? S.n[0] - 1 : -1; i > tile && red < 0; i--)
                if ((v[0][i].kind & XS_TP_K_REDUCE) && v[0][i].red_t == 0)
                    red = i;
            ok &= tile >= 0 && red > tile;
            if (ok && (red - tile) % 2 != (same ? 0 : 1)) {
                /* move the reduction one place (swap it with a neighbouring reduction) */
                const int nb = (v[0][red - 1].kind & XS_TP_K_REDUCE) ? red - 1 : red + 1;
                ok &= nb < S.n[0] && (v[0][nb].kind & XS_TP_K_REDUCE);
                if (ok) {
                    swap_tasks(v[0], red, nb);
                    red = nb;
                }
            }
            if (ok)
                swap_tasks(v[0], tile, red);
            XT_CHECK(ok, "broken d: could not place the reduction");
            if (ok) {
                sim_out s2, s1;
                simulate(&S, 2, -1, &s2);
                simulate(&S, 1, -1, &s1);
                XT_CHECK(s1.deadlock, "broken d: reduction before its own tile, grid 1: no "
                         "deadlock reported");
                if (same) {
                    XT_CHECK(s2.deadlock, "broken d: reduction before its own tile in one CTA: "
                             "no deadlock reported");
                    printf("ok broken d (gemm_rs P = 2, rank 0's reduction swapped with its own "
                           "tile, one CTA of 2): %s\n", s2.what);
                } else {
                    XT_CHECK(!s2.deadlock, "broken d: reduction and its tile in different CTAs "
                             "of 2 reported as a deadlock: %s", s2.what);
                    char why[400];
                    XT_CHECK(check_positions(&S, why, sizeof why) > 0,
                             "broken d: positions not flagged");
                    printf("ok broken d (the same, tile and reduction in different CTAs of 2): "
                           "no deadlock, as in the kernel; grid 1: %s\n", s1.what);
                }
            }
            free(v[0]);
            free(v[1]);
        }
    }
}

/* Rank r's courier walk of list v (the positions of its remote tiles, increasing): what
 * xs_tp_order_walk holds, for hand-made lists. Caller frees. */
static int *make_walk(const plan_set *S, int r, const xs_tp_task *v, int n, int *nw)
{
    int *w = (int *)malloc((size_t)(n > 0 ? n : 1) * sizeof(int)), ow, t;
    *nw = 0;
    for (int i = 0; w && i < n; i++)
        if (remote_tile(S, r, &v[i], &ow, &t) == 0)
            w[(*nw)++] = i;
    return w;
}

/* e: couriers. gemm_rs P = 2 with two tiles per owner; every rank's list (a rotation, valid for
 * xs_tp_order_check) puts a reduction between its two remote tiles: remote 0, own 0, reduce
 * own 0, remote 1, own 1, reduce own 1. One compute CTA and one courier per rank. In production
 * order (walk = positions 0, 3) the couriers deliver remote tile 0 while the reduction waits
 * for it: no deadlock. Reversed (3, 0), each courier waits for remote tile 1, which its compute
 * CTA reaches only after the reduction, which waits for the other rank's courier: a cross-rank
 * cycle through both couriers - reported by the simulation and by check_walk. With two compute
 * CTAs the reversed walk does not deadlock (remote tile 1 is in the other CTA). */
static void check_broken_couriers(void)
{
    const xs_tp_shape s = {XS_TP_GEMM_RS, 256, 512, 128, 2};
    xs_tp_info in;
    xs_tp_info_of(&s, &in);
    plan_set S;
    set_init(&S, &s, &in);
    if (S.rbpr != 1 || in.tiles_n[0] != 2 || in.t_own != 2) {
        XT_CHECK(0, "broken e: unexpected shape (%d row blocks per owner, %d column tiles)",
                 S.rbpr, in.tiles_n[0]);
        return;
    }
    xs_tp_task v[2][6];
    int fwd[2][2] = {{0, 3}, {0, 3}}, rev[2][2] = {{3, 0}, {3, 0}};
    memset(v, 0, sizeof v);
    for (int r = 0; r < 2; r++) {
        const int other = (r + 1) % 2;
        const int tm[6] = {other, r, -1, other, r, -1}, tn[6] = {0, 0, 0, 1, 1, 1};
        for (int i = 0; i < 6; i++) {
            if (tm[i] < 0) {
                v[r][i].kind = XS_TP_K_REDUCE;
                v[r][i].red_t = tn[i];
            } else {
                v[r][i].kind = XS_TP_K_TILE;
                v[r][i].tm = tm[i];
                v[r][i].tn = tn[i];
            }
        }
        S.v[r] = v[r];
        S.n[r] = 6;
        XT_CHECK(order_ok(&s, r, v[r], 6), "broken e: rank %d's list should pass "
                 "xs_tp_order_check: %s", r, xs_errmsg());
    }
    int rb, ib;
    XT_CHECK(check_rotations(&S, &rb, &ib) == 0, "broken e: the lists are not rotations");
    S.cour = 1;
    char why[400];
    for (int r = 0; r < 2; r++) {
        int nw = 0;
        int *w = make_walk(&S, r, v[r], 6, &nw);
        XT_CHECK(w && nw == 2 && w[0] == 0 && w[1] == 3, "broken e: rank %d's walk", r);
        free(w);
        S.walk[r] = fwd[r];
        S.nw[r] = 2;
    }
    XT_CHECK(check_walk(&S, why, sizeof why) == 0, "broken e: production-order walk flagged: %s",
             why);
    sim_out so;
    simulate(&S, 1, -1, &so);
    XT_CHECK(!so.deadlock, "broken e: production-order walk deadlocks: %s", so.what);
    int stuck = 1;
    const long run = simulate_sweeps(&S, 1, &stuck);
    XT_CHECK(!stuck && run == so.tasks, "broken e: sweeps disagree (%ld, %ld)", run, so.tasks);
    for (int r = 0; r < 2; r++)
        S.walk[r] = rev[r];
    simulate(&S, 1, -1, &so);
    XT_CHECK(so.deadlock, "broken e (courier walk against production order, one compute CTA): "
             "no deadlock reported");
    printf("ok broken e (gemm_rs P = 2, couriers walking against production order, 1 compute CTA "
           "+ 1 courier): %s\n", so.what);
    XT_CHECK(check_walk(&S, why, sizeof why) > 0, "broken e: reversed walk not flagged");
    simulate_sweeps(&S, 1, &stuck);
    XT_CHECK(stuck, "broken e: the sweeps find no deadlock");
    sim_out s2;
    simulate(&S, 2, -1, &s2);
    XT_CHECK(!s2.deadlock, "broken e: reversed walk with 2 compute CTAs reported as a deadlock: "
             "%s", s2.what);
    printf("ok broken e (the same with 2 compute CTAs: no deadlock, remote tile 1 is in the other "
           "CTA)\n");
    /* without couriers the same lists run (the tile raises the owner's signal itself) */
    S.cour = 0;
    simulate(&S, 1, -1, &so);
    XT_CHECK(!so.deadlock, "broken e: the lists deadlock without couriers: %s", so.what);
}

/* f: couriers that push. mlp P = 2, grid 2 with one courier per rank (one compute CTA), the
 * planner's naive order for it: no push in the list, the walk's pushes first. As built, the
 * compute CTA's GEMM 0 tiles on the peer's shard wait for the peer courier's pushes, which wait
 * for nothing: no deadlock (real and virtual peers). Broken by hand - the walk's first remote
 * tile moved in front of its pushes - each courier waits for the ready flag of a GEMM 1 tile
 * whose row block needs the peer's chunks, which the peer's courier would push only after its
 * own such tile: a cross-rank cycle through both couriers (and with virtual peers a cycle
 * through this rank's own courier) - reported by the simulation and by check_walk. */
static void check_broken_courier_pushes(void)
{
    const xs_tp_shape s = {XS_TP_MLP, 512, 264, 192, 2};
    xs_tp_info in;
    xs_tp_info_of(&s, &in);
    plan_set S;
    set_init(&S, &s, &in);
    xs_tp_plan *t[2] = {NULL, NULL};
    int *bw[2] = {NULL, NULL};
    int ok = 1;
    for (int r = 0; r < 2; r++) {
        ok &= xs_tp_plan_create(&s, r, 2, &t[r]) == XS_OK && xs_tp_plan_set_couriers(t[r], 1) == XS_OK &&
              xs_tp_order_naive(t[r], 0) == XS_OK && xs_tp_order_check(t[r], 0) == XS_OK;
        if (!ok)
            break;
        S.n[r] = xs_tp_order_get(t[r], 0, &S.v[r]);
        S.nw[r] = xs_tp_order_walk(t[r], 0, &S.walk[r]);
        const int np = xs_tp_order_walk_pushes(t[r], 0);
        for (int i = 0; i < S.n[r]; i++)
            ok &= !(S.v[r][i].kind & XS_TP_K_PUSH);
        ok &= np == in.ag_chunks && S.nw[r] > np; /* P = 2: every chunk to the one peer */
        bw[r] = (int *)malloc((size_t)S.nw[r] * sizeof(int));
        ok &= bw[r] != NULL;
        if (ok) { /* the first remote tile in front of the pushes */
            bw[r][0] = S.walk[r][np];
            memcpy(bw[r] + 1, S.walk[r], (size_t)np * sizeof(int));
            memcpy(bw[r] + np + 1, S.walk[r] + np + 1, (size_t)(S.nw[r] - np - 1) * sizeof(int));
        }
    }
    XT_CHECK(ok, "broken f: the naive courier order of mlp P = 2 (no push in the list, the "
             "walk's pushes first): %s", xs_errmsg());
    if (ok) {
        S.cour = 1;
        char why[400];
        XT_CHECK(check_walk(&S, why, sizeof why) == 0, "broken f: the planner's walk flagged: %s",
                 why);
        XT_CHECK(check_positions(&S, why, sizeof why) == 0, "broken f: positions: %s", why);
        sim_out so, sv;
        simulate(&S, 1, -1, &so);
        XT_CHECK(!so.deadlock, "broken f: the planner's courier order deadlocks: %s", so.what);
        int stuck = 1;
        const long run = simulate_sweeps(&S, 1, &stuck);
        XT_CHECK(!stuck && run == so.tasks, "broken f: sweeps disagree (%ld, %ld)", run, so.tasks);
        simulate(&S, 1, 0, &sv);
        XT_CHECK(!sv.deadlock, "broken f: virtual peers deadlock: %s", sv.what);
        const int *keep[2] = {S.walk[0], S.walk[1]};
        S.walk[0] = bw[0], S.walk[1] = bw[1];
        simulate(&S, 1, -1, &so);
        XT_CHECK(so.deadlock, "broken f (a remote tile before the pushes in the walk): no "
                 "deadlock reported");
        printf("ok broken f (mlp P = 2, a courier's remote tile moved before its pushes, 1 compute "
               "CTA + 1 courier): %s\n", so.what);
        simulate_sweeps(&S, 1, &stuck);
        XT_CHECK(stuck, "broken f: the sweeps find no deadlock");
        simulate(&S, 1, 0, &sv);
        XT_CHECK(sv.deadlock, "broken f: no deadlock with virtual peers");
        XT_CHECK(check_walk(&S, why, sizeof why) > 0, "broken f: the broken walk not flagged");
        S.walk[0] = keep[0], S.walk[1] = keep[1];
    }
    free(bw[0]);
    free(bw[1]);
    xs_tp_plan_destroy(t[0]);
    xs_tp_plan_destroy(t[1]);
}

/* The event-driven simulation against the sweeps on lists with random swaps (same swaps on
 * every rank, or on rank 0 only): the same verdict and the same tasks run, and both verdicts
 * occur. */
static void check_sim_random(void)
{
    const xs_tp_shape shapes[] = {
        {XS_TP_AG_GEMM, 1536, 600, 264, 3}, /* 2 row blocks per shard, 2 chunks */
        {XS_TP_MLP, 1024, 264, 192, 4},
        {XS_TP_GEMM_RS, 1024, 264, 64, 2},
    };
    uint32_t seed = 12345u;
    int trials = 0, agree = 0, dead = 0, ctrials = 0, cagree = 0, cdead = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const xs_tp_shape *s = &shapes[si];
        xs_tp_info in;
        xs_tp_info_of(s, &in);
        for (int trial = 0; trial < 100; trial++) {
            plan_set S;
            set_init(&S, s, &in);
            xs_tp_task *v[XS_MAX_RANKS];
            int ok = 1;
            for (int r = 0; r < S.P; r++) {
                v[r] = naive_copy(s, r, &S.n[r]);
                S.v[r] = v[r];
                ok &= v[r] != NULL;
            }
            const int G = 1 + trial % 3, nswap = 1 + trial % 4, all = trial % 2;
            for (int k = 0; k < nswap && ok; k++) {
                seed = seed * 1664525u + 1013904223u;
                const int i = (int)((seed >> 8) % (uint32_t)S.n[0]);
                seed = seed * 1664525u + 1013904223u;
                const int j = (int)((seed >> 8) % (uint32_t)S.n[0]);
                for (int r = 0; r < (all ? S.P : 1); r++)
                    swap_tasks(v[r], i, j);
            }
            if (ok) {
                sim_out so;
                simulate(&S, G, -1, &so);
                int stuck = 0;
                const long run = simulate_sweeps(&S, G, &stuck);
                trials++;
                agree += stuck == so.deadlock && run == so.tasks;
                dead += so.deadlock;
            }
            /* the same lists with couriers (1 or 2 per rank, walks in production order, or
             * every other trial one rank's walk rotated by one entry) */
            if (ok && in.rs_gemm >= 0) {
                int *w[XS_MAX_RANKS];
                int wok = 1;
                for (int r = 0; r < S.P; r++) {
                    w[r] = make_walk(&S, r, v[r], S.n[r], &S.nw[r]);
                    S.walk[r] = w[r];
                    wok &= w[r] != NULL;
                }
                if (wok) {
                    S.cour = 1 + trial % 2;
                    if (trial % 4 >= 2 && S.nw[0] > 1) {
                        const int f = w[0][0];
                        memmove(w[0], w[0] + 1, (size_t)(S.nw[0] - 1) * sizeof(int));
                        w[0][S.nw[0] - 1] = f;
                    }
                    sim_out so;
                    simulate(&S, G, -1, &so);
                    int stuck = 0;
                    const long run = simulate_sweeps(&S, G, &stuck);
                    ctrials++;
                    cagree += stuck == so.deadlock && run == so.tasks;
                    cdead += so.deadlock;
                    S.cour = 0;
                }
                for (int r = 0; r < S.P; r++)
                    free(w[r]);
            }
            for (int r = 0; r < S.P; r++)
                free(v[r]);
        }
    }
    XT_CHECK(trials == 300 && agree == trials && dead > 0 && dead < trials,
             "random swaps: %d trials, %d agree with the sweeps, %d deadlocks", trials, agree,
             dead);
    printf("ok simulation vs sweeps on %d randomly broken list sets: %d agree, %d deadlocks\n",
           trials, agree, dead);
    XT_CHECK(ctrials == 200 && cagree == ctrials && cdead > 0 && cdead < ctrials,
             "random swaps with couriers: %d trials, %d agree with the sweeps, %d deadlocks",
             ctrials, cagree, cdead);
    printf("ok the same with couriers on %d list sets (gemm_rs, mlp): %d agree, %d deadlocks\n",
           ctrials, cagree, cdead);
}

/* g: split first steps (xs_tp_pace.split; docs/TP.md "Split first steps"). gemm_rs llama3-8b
 * m = 8192 P = 4 on the H200's grid of 132 with 8 couriers (124 compute CTAs), the front order
 * whole and with its head split in 2 and 4 parts:
 *   - structure: split 4 puts 31 tiles in 4 parts in the first step (positions 0..123, every
 *     tile's parts 0..2 before its last part) and 62 tiles in 2 parts in the second; split 2
 *     62 tiles in 2 parts in the first; every tile's last part is in the courier walk, its
 *     other parts are not;
 *   - the fluid model: with comm-bound costs the link starts after a part, so split 4 <
 *     split 2 < whole;
 *   - xs_tp_order_check rejects hand-broken split lists (a last part before one of its parts,
 *     a part without its last part, a scratch slot outside the context's, a part of an order
 *     without couriers), and the simulation reports the deadlock of a last part queued on the
 *     same CTA before its part 0;
 *   - xs_tp_order_shaped refuses a split pace for ag_gemm and without couriers. */
static void check_split(void)
{
    const xs_tp_shape s = {XS_TP_GEMM_RS, 8192, 4096, 14336, 4};
    const int grid = 132, C = 8, Gc = grid - C;
    xs_tp_info in;
    xs_tp_plan *t = NULL;
    if (xs_tp_info_of(&s, &in) != XS_OK || xs_tp_plan_create(&s, 0, grid, &t) != XS_OK ||
        xs_tp_plan_set_couriers(t, C) != XS_OK) {
        XT_CHECK(0, "split: plan context: %s", xs_errmsg());
        xs_tp_plan_destroy(t);
        return;
    }
    xs_profile prof;
    xs_profile_default(&prof);
    const xs_tp_costs c = make_costs(&in, 0);
    double model[4] = {0, 0, 0, 0};
    for (int v = 0; v < 4; v++) {
        xs_tp_pace pace;
        xs_tp_pace_front(&pace);
        pace.split = v == 0 ? 0 : 1 << v; /* whole, 2, 4, 8 */
        xs_tp_pred pr;
        if (xs_tp_order_shaped(t, v, &pace, &c, &prof) != XS_OK ||
            xs_tp_order_check(t, v) != XS_OK || xs_tp_predict(t, v, &prof, &c, 0, &pr) != XS_OK) {
            XT_CHECK(0, "split %d: %s", pace.split, xs_errmsg());
            xs_tp_plan_destroy(t);
            return;
        }
        model[v] = pr.model_ns;
    }
    XT_CHECK(model[3] <= model[2] && model[2] < model[1] && model[1] < model[0],
             "split: predicted %.1f (split 8), %.1f (split 4), %.1f (split 2), %.1f (whole) us: "
             "the earlier the link starts, the sooner a comm-bound order ends", model[3] / 1e3,
             model[2] / 1e3, model[1] / 1e3, model[0] / 1e3);
    {
        /* split 8 (slot 3): 15 tiles in 8 parts, 31 in 4, 62 in 2 (G / 8 leaves 4 places of
         * the first step to the next tiles' parts); every tile's parts once, the last one last,
         * only the last one in the walk */
        const xs_tp_task *x;
        const int n = xs_tp_order_get(t, 3, &x);
        const int *walk;
        const int nw = xs_tp_order_walk(t, 3, &walk);
        int bad = 0, by[9] = {0};
        for (int i = 0; i < n; i++) {
            if (!(x[i].kind & XS_TP_K_SPLIT))
                continue;
            const int S = XS_TP_SPLIT_PARTS(&x[i]), last = XS_TP_SPLIT_PART(&x[i]) == S - 1;
            int in_w = 0, before = 0, after = 0;
            for (int e = 0; e < nw; e++)
                in_w |= walk[e] == i;
            for (int j = 0; j < n; j++)
                if ((x[j].kind & XS_TP_K_SPLIT) && j != i && x[j].tm == x[i].tm &&
                    x[j].tn == x[i].tn)
                    before += j < i, after += j > i;
            bad += in_w != last || before + after != S - 1 || (last && after);
            by[S] += last;
        }
        XT_CHECK(bad == 0 && by[8] == Gc / 8 && by[4] == Gc / 4 && by[2] == Gc / 2,
                 "split 8: %d structure faults, %d / %d / %d tiles in 8 / 4 / 2 parts", bad,
                 by[8], by[4], by[2]);
    }
    /* structure of split 4 (slot 2) and split 2 (slot 1) */
    const int want[2][2] = {{Gc / 2, 0}, {Gc / 4, Gc / 2}}; /* tiles per step: split 2, split 4 */
    for (int v = 1; v <= 2; v++) {
        const xs_tp_task *x;
        const int n = xs_tp_order_get(t, v, &x);
        const int *walk;
        const int nw = xs_tp_order_walk(t, v, &walk);
        int bad = 0, tiles[2] = {0, 0}, inwalk = 0, early_in_walk = 0;
        for (int i = 0; i < n; i++) {
            if (!(x[i].kind & XS_TP_K_SPLIT))
                continue;
            const int S = XS_TP_SPLIT_PARTS(&x[i]), step = i / Gc;
            bad += step > 1 || (step == 0 && S != 2 * v) || (step == 1 && S != 2);
            int in_w = 0;
            for (int e = 0; e < nw; e++)
                in_w |= walk[e] == i;
            if (XS_TP_SPLIT_PART(&x[i]) == S - 1) {
                if (step <= 1)
                    tiles[step]++;
                inwalk += in_w;
                /* its other parts: earlier, in the same step */
                for (int j = i / Gc * Gc; j < i; j++)
                    bad -= (x[j].kind & XS_TP_K_SPLIT) && x[j].tm == x[i].tm &&
                           x[j].tn == x[i].tn;
                bad += S - 1;
            } else {
                early_in_walk += in_w;
            }
        }
        XT_CHECK(bad == 0 && tiles[0] == want[v - 1][0] && tiles[1] == want[v - 1][1] &&
                     inwalk == tiles[0] + tiles[1] && early_in_walk == 0,
                 "split %d: %d structure faults, %d + %d split tiles (want %d + %d), %d last "
                 "parts and %d other parts in the walk", 2 * v, bad, tiles[0], tiles[1],
                 want[v - 1][0], want[v - 1][1], inwalk, early_in_walk);
    }
    printf("ok split (gemm_rs 8b m=8192 P=4, 124 compute CTAs + 8 couriers): split 4 = 31 tiles "
           "x 4 parts, then 62 x 2; split 2 = 62 x 2; fluid model %.1f / %.1f / %.1f us (split "
           "4 / 2 / whole), split 8 %.1f us\n", model[2] / 1e3, model[1] / 1e3, model[0] / 1e3,
           model[3] / 1e3);

    /* hand-broken copies of the split 4 list */
    const xs_tp_task *x0;
    const int n = xs_tp_order_get(t, 2, &x0);
    xs_tp_task *b = (xs_tp_task *)malloc((size_t)n * sizeof *b);
    if (!b) {
        XT_CHECK(0, "split: out of host memory");
        xs_tp_plan_destroy(t);
        return;
    }
    const int last0 = 3 * (Gc / 4); /* tile 0's last part (its parts 0..2 at 0, 31, 62) */
    XT_CHECK(XS_TP_SPLIT_PART(&x0[last0]) == 3 && XS_TP_SPLIT_PART(&x0[0]) == 0 &&
                 x0[0].tm == x0[last0].tm && x0[0].tn == x0[last0].tn,
             "split: tile 0's parts not where expected");
    const char *what[4] = {"a last part before its part 0", "a part without its last part",
                           "a scratch slot outside the context's", "a part of a tile split twice"};
    for (int k = 0; k < 4; k++) {
        memcpy(b, x0, (size_t)n * sizeof *b);
        if (k == 0)
            swap_tasks(b, 0, last0);
        else if (k == 1)
            b[last0].kind &= ~XS_TP_K_SPLIT, XS_TP_SPLIT_PART(&b[last0]) = 0,
                XS_TP_SPLIT_SLOT(&b[last0]) = 0, XS_TP_SPLIT_PARTS(&b[last0]) = 0;
        else if (k == 2)
            for (int q = 0; q < 4; q++)
                XS_TP_SPLIT_SLOT(&b[q * (Gc / 4)]) = 3 * grid - 2;
        else
            XS_TP_SPLIT_SLOT(&b[1]) = XS_TP_SPLIT_SLOT(&b[0]); /* tile 1's part 0: tile 0's slot */
        const int ok = xs_tp_order_set(t, 3, b, n) == XS_OK && xs_tp_order_check(t, 3) == XS_OK;
        XT_CHECK(!ok, "split: xs_tp_order_check accepts %s", what[k]);
        if (!ok)
            printf("ok split broken (%s): %s\n", what[k], xs_errmsg());
    }
    /* the simulation: tile 0's part 0 moved behind its last part on the same CTA (position
     * last0 + Gc): the last part waits for a part its own CTA runs only after it */
    memcpy(b, x0, (size_t)n * sizeof *b);
    swap_tasks(b, 0, last0 + Gc);
    {
        plan_set S;
        set_init(&S, &s, &in);
        set_split_slots(&S, 3 * grid);
        xs_tp_task *v[XS_MAX_RANKS];
        int okr = 1;
        for (int r = 0; r < s.peers; r++) { /* the same list rotated, as every rank's */
            v[r] = (xs_tp_task *)malloc((size_t)n * sizeof *b);
            okr &= v[r] != NULL;
            for (int i = 0; i < n && v[r]; i++)
                v[r][i] = rotate_task(&S, b[i], r);
            S.v[r] = v[r];
            S.n[r] = n;
        }
        sim_out so;
        if (okr) {
            simulate(&S, Gc, -1, &so);
            XT_CHECK(so.deadlock, "split: a last part before its part 0 on one CTA: no deadlock "
                     "reported");
            printf("ok split broken (part 0 behind its last part on one CTA): %s\n", so.what);
            for (int r = 0; r < s.peers; r++)
                for (int i = 0; i < n; i++)
                    v[r][i] = rotate_task(&S, x0[i], r);
            simulate(&S, Gc, -1, &so);
            XT_CHECK(!so.deadlock, "split: the list as built deadlocks: %s", so.what);
        }
        for (int r = 0; r < s.peers; r++)
            free(v[r]);
    }
    free(b);
    /* refused: split without couriers, split for ag_gemm */
    xs_tp_pace pace;
    xs_tp_pace_front(&pace);
    pace.split = 2;
    XT_CHECK(xs_tp_plan_set_couriers(t, 0) == XS_OK &&
                 xs_tp_order_shaped(t, 4, &pace, &c, &prof) == XS_EINVAL,
             "split: a split pace without couriers is not refused");
    xs_tp_plan_destroy(t);
    const xs_tp_shape sa = {XS_TP_AG_GEMM, 8192, 2 * 14336, 4096, 4};
    xs_tp_info ina;
    xs_tp_plan *ta = NULL;
    if (xs_tp_info_of(&sa, &ina) == XS_OK && xs_tp_plan_create(&sa, 0, grid, &ta) == XS_OK &&
        xs_tp_plan_set_couriers(ta, C) == XS_OK) {
        const xs_tp_costs ca = make_costs(&ina, 0);
        XT_CHECK(xs_tp_order_shaped(ta, 0, &pace, &ca, &prof) == XS_EINVAL,
                 "split: a split pace for ag_gemm is not refused");
        printf("ok split refused without couriers and for ag_gemm: %s\n", xs_errmsg());
    } else {
        XT_CHECK(0, "split: ag_gemm plan context: %s", xs_errmsg());
    }
    xs_tp_plan_destroy(ta);
}

int main(void)
{
    check_broken();
    check_broken_couriers();
    check_broken_courier_pushes();
    check_split();
    check_sim_random();
    /* small odd shapes (per P: 2 row blocks per owner, ragged widths, partial chunks, one row
     * block per owner), grids 1, 5 and 132 */
    static const int Ps[] = {2, 3, 4, 8};
    for (int pi = 0; pi < 4; pi++) {
        const int P = Ps[pi];
        const xs_tp_shape small[] = {
            {XS_TP_GEMM_RS, 256 * P, 264, 64 * P, P},   /* 2 row blocks per owner, ragged n */
            {XS_TP_GEMM_RS, 128 * P, 520, 24 * P, P},   /* one row block, 3 column tiles */
            {XS_TP_AG_GEMM, 256 * P, 200 * P, 520, P},  /* 5 chunks per shard, the last partial */
            {XS_TP_AG_GEMM, 128 * P, 64 * P, 1032, P},  /* 5 chunks per row block */
            {XS_TP_MLP, 128 * P, 264, 96 * P, P},       /* 2 chunks per shard */
            {XS_TP_MLP, 384 * P, 136, 48 * P, P},       /* 3 row blocks per shard */
        };
        static const int grids[] = {1, 5, 132};
        for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
            for (int gi = 0; gi < 3; gi++)
                check_config(&small[i], grids[gi]);
    }
    /* model widths (llama3-8b: gemm_rs n = H, k = I; ag_gemm n = 2I, k = H; mlp n = H, k = I)
     * at m = 128 P and 512 P (grids 132 and 16) and the bench's token counts 8192 and 16384
     * (grid 132, the H200's); P = 3: GPT-3 widths (H 12288, I 49152; the llama widths do not
     * split 3 ways), m = 384 and 1536 */
    for (int pi = 0; pi < 4; pi++) {
        const int P = Ps[pi];
        const int H = P == 3 ? 12288 : 4096, I = P == 3 ? 49152 : 14336;
        const int ms[4] = {128 * P, 512 * P, P == 3 ? 0 : 8192, P == 3 ? 0 : 16384};
        for (int mi = 0; mi < 4; mi++) {
            if (!ms[mi])
                continue;
            const xs_tp_shape big[] = {
                {XS_TP_GEMM_RS, ms[mi], H, I, P},
                {XS_TP_AG_GEMM, ms[mi], 2 * I, H, P},
                {XS_TP_MLP, ms[mi], H, I, P},
            };
            for (int i = 0; i < 3; i++) {
                check_config(&big[i], 132);
                if (mi == 0)
                    check_config(&big[i], 16);
            }
        }
    }
    printf("ok %ld orders checked (op, P, shape, grid, couriers, cost set, order; %ld distinct "
           "lists; %ld with couriers), %ld rank lists, %ld simulated task runs\n", g_cases,
           g_distinct, g_cour_cases, g_lists, g_sim_tasks);
    return xt_done();
}
