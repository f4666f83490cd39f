// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_ep.h - the EP (MoE expert-parallel) workload on the host, free of CUDA: the public
 * configurations, routing, the expert-sorted rows and their 128-row blocks, the task lists of the
 * fused kernel's schedules (plans), and the X-Stage model of its combine (prediction, the auto
 * rule, per-tile stalls). Everything here runs on the CPU (src/ep_*.c); cuda/ep/ep.h adds the GPU
 * context that runs these plans. docs/EP.md explains the kernel, the schedules, the model and
 * the auto rule.
 *
 * Rows are (token, k) pairs sorted by expert, rows = T * topk; token t belongs to rank t % N
 * (virtual peers), and rank 0's rows are local (HBM), the others remote (the link).
 */
#ifndef XSTAGE_EP_H
#define XSTAGE_EP_H

#include <stddef.h>
#include <stdint.h>

#include "xstage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- configurations ---------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int hidden;  /* H */
    int inter;   /* I: the expert (moe) intermediate size */
    int experts; /* E: routed experts */
    int topk;    /* experts per token */
    int tokens[3]; /* default token counts of the sweep */
    int peers;     /* default number of destinations of the sweep (0 = 4); docs/EP.md says how
                    * the sweep's points were chosen */
    int sweep;     /* 1: in the default sweep (`bench ep` without --config); 0: on request only */
} xs_moe_config;

extern const xs_moe_config xs_moe_configs[];
extern const int xs_moe_nconfigs;
const xs_moe_config *xs_moe_config_find(const char *name); /* NULL if unknown */
/* XS_EINVAL (one line) unless H is a positive multiple of 8 and I of 16, E >= 1 and topk in
 * 1..E: the shapes the fused kernel's tiles take. */
xs_status xs_moe_config_check(const xs_moe_config *c);

typedef enum { XS_ROUTE_BALANCED = 0, XS_ROUTE_ZIPF = 1 } xs_moe_routing;
typedef enum {
    XS_MOE_WAVE = 0,
    XS_MOE_INTERLEAVED = 1,
    XS_MOE_AUTO = 2,    /* resolved by xs_moe_auto into one of the others */
    XS_MOE_ADAPTIVE = 3 /* no fixed order: each CTA picks its next tile by the link's state */
} xs_moe_sched;
const char *xs_moe_sched_name(xs_moe_sched s);
const char *xs_moe_routing_name(xs_moe_routing r);

#define XS_MOE_BM 128        /* rows of a tile (and of a row block) */
#define XS_MOE_BN 256        /* columns of a tile */
#define XS_MOE_MAX_PEERS 64  /* = XS_MAX_RANKS (xstage_win.h) */
#define XS_MOE_SLOTS 6       /* task lists a problem holds at once */
#define XS_MOE_SPILL_MAX 8   /* held-back tiles per CTA of the spilling kernel, at most */
#define XS_MOE_SPILL_DEPTH 2 /* the spilling kernel's default depth, and auto's candidate's */

/* ---- one problem on the host ---------------------------------------------------------------- */

typedef struct {
    int tokens;             /* T >= 1 */
    int peers;              /* N destinations, 1..XS_MOE_MAX_PEERS; token t belongs to rank t % N */
    xs_moe_routing routing;
    double zipf_s;          /* exponent of the skewed routing; 0 = 1.2 */
    uint32_t seed;          /* routing, routing weights and tokens are functions of the seed */
} xs_moe_opts;

/* A 128-row block of one expert's rows (the same layout as the kernel's int4). */
typedef struct {
    int expert; /* its expert */
    int row0;   /* first row (expert-sorted index) */
    int rows;   /* rows in the block, 1..XS_MOE_BM */
    int remote; /* of them, rows of ranks != 0 */
} xs_moe_rb;

/* One task of a list (the same layout as the kernel's int2): a 128 x 256 tile of Linear-1
 * (kind 1: gate+up of row block rb, n-block nb) or of Linear-2 (kind 2: the down projection and
 * the combine of row block rb, column block nb). */
typedef struct {
    int code; /* kind << 30 | row block */
    int nb;   /* n-block (Linear-1) or column block (Linear-2) */
} xs_moe_task;

/* The bits of kind << 30 | rb, shifted unsigned (kind 2 sets the sign bit of code). */
static inline xs_moe_task xs_moe_task_make(int kind, int rb, int nb)
{
    xs_moe_task t = {(int)(((unsigned)kind << 30) | (unsigned)rb), nb};
    return t;
}
static inline int xs_moe_task_kind(xs_moe_task t) { return (int)(((unsigned)t.code >> 30) & 3u); }
static inline int xs_moe_task_rb(xs_moe_task t) { return t.code & 0x3fffffff; }

typedef struct {
    xs_moe_sched kind;  /* XS_MOE_WAVE, XS_MOE_INTERLEAVED or XS_MOE_ADAPTIVE */
    int lead;           /* interleaved: minimum row-block lead D of Linear-1 over Linear-2 */
    int wave_experts;   /* wave: experts per wave; 0 = each wave grows expert by expert until
                         * it holds >= grid Linear-1 tiles (equal work under skew) */
    double pace_bytes;  /* > 0: pace the combine (any order): a Linear-2 tile stores its remote
                         * rows only once the pacer's backlog (bytes reserved on a software
                         * link draining at pace_bytes_per_ns) is <= pace_bytes; 0 = off */
    double pace_bytes_per_ns; /* the pacer's drain rate (used when pace_bytes > 0) */
    int couriers;       /* C > 0: the last C CTAs of the grid are couriers (docs/EP.md,
                         * "Couriers"): the task list is built for grid - C compute CTAs, a
                         * Linear-2 tile stores its remote rows into a local HBM staging buffer
                         * and the couriers copy them to their windows, paced; 0 = none (the
                         * epilogue stores the combine itself). Not with pace_bytes > 0 */
    double courier_bytes_per_ns; /* the couriers' total issue rate (bytes/ns; each courier gets
                                  * 1/C of it); required when couriers > 0 */
    double admit_ahead_ns; /* adaptive (docs/EP.md, "Adaptive"): two queues, the Linear-1 tiles
                            * and the Linear-2 tiles, each in row-block order. A CTA takes the
                            * next Linear-2 tile when its row block's Linear-1 tiles are done and
                            * the admission clock (the bytes of the Linear-2 tiles admitted so
                            * far, draining at pace_bytes_per_ns) ends within admit_ahead_ns of
                            * now; else the next Linear-1 tile; once those are gone, the
                            * Linear-2 tiles in order. Needs pace_bytes_per_ns > 0; pace_bytes
                            * may add the epilogue's pacer. No couriers */
    int spill_depth;    /* > 0 with pace_bytes > 0: run on the spilling kernel (at most
                         * XS_MOE_SPILL_MAX): a Linear-2 tile the pacer holds back parks its
                         * remote rows in device memory and leaves at a later task boundary of
                         * its CTA; 0 = the plain kernel */
    int lead_end;       /* interleaved, 1..lead-1: the lead tapers linearly from `lead` at the
                         * first row block to lead_end where Linear-1 ends, so fewer Linear-2
                         * tiles are left for the end; 0 = the lead is `lead` throughout */
} xs_moe_plan;

/* The task list of a plan, in list order. */
typedef struct {
    xs_moe_task *tasks; /* [trace_cap + 1], owned by the problem; NULL: no plan set */
    int n;              /* tasks */
    xs_moe_plan plan;
} xs_moe_tasks;

/* Routing, the expert-sorted rows and their row blocks for `grid` CTAs, and the task lists of
 * the plans set on it. Built by xs_moe_problem_create; read-only for its users. */
typedef struct {
    xs_moe_config cfg;
    xs_moe_opts opts;
    int T, H, I, E, K, N;   /* tokens, hidden, inter, experts, topk, peers */
    int rows;               /* T * K */
    int nrb;                /* row blocks */
    int l1_per_rb, l2_per_rb; /* tiles per row block: ceil(2I / 256), ceil(H / 256) */
    int grid;               /* persistent CTAs */
    int trace_cap;          /* tasks of a full list: nrb * (l1_per_rb + l2_per_rb) */
    /* [rows] per expert-sorted row */
    int *row_token, *row_k, *row_rank, *row_expert;
    float *row_weight;      /* routing weight */
    long long *row_off;     /* byte offset of the row's slot in its rank's window */
    int *expert_off;        /* [E + 1] first row of each expert */
    int *expert_rows;       /* [E] */
    xs_moe_rb *rb;          /* [nrb] */
    size_t window_bytes;    /* payload bytes each rank's window needs */
    size_t *rank_used;      /* [N] bytes of rank r's window that receive rows */
    xs_moe_tasks slots[XS_MOE_SLOTS];
} xs_moe_problem;

/* Route the tokens, sort the rows by expert and cut the row blocks, for `grid` CTAs (1..65536):
 * no GPU needed. *out is the caller's (xs_moe_problem_destroy). XS_EINVAL on a bad shape. */
xs_status xs_moe_problem_create(const xs_moe_config *c, const xs_moe_opts *o, int grid,
                                xs_moe_problem **out);
void xs_moe_problem_destroy(xs_moe_problem *pb);

typedef struct {
    int hidden, inter, experts, topk, tokens, peers;
    int rows;                  /* T * topk */
    int row_blocks;            /* 128-row blocks of expert-sorted rows */
    int l1_per_rb, l2_per_rb;  /* tiles per row block: ceil(2I / 256), ceil(H / 256) */
    int l1_tiles, l2_tiles;
    int min_expert_rows, max_expert_rows;
    int grid;                  /* persistent CTAs (one per SM) */
    double flops;              /* 2 * rows * H * 3I */
    double total_bytes;        /* combine bytes, all ranks */
    double remote_bytes;       /* combine bytes to ranks whose window is host memory (N > 1) */
    size_t window_bytes;       /* payload bytes each rank's window needs */
} xs_moe_info;
void xs_moe_problem_info(const xs_moe_problem *pb, xs_moe_info *info);

/* ---- task lists ----------------------------------------------------------------------------- */

/* Build the task list of plan p into slot 0..XS_MOE_SLOTS-1 of pb (host memory). XS_EINVAL
 * (one line) on a plan the kernel cannot run. */
xs_status xs_moe_problem_set_plan(xs_moe_problem *pb, int slot, const xs_moe_plan *p);
/* XS_EINVAL (one line) unless the kernel can run plan p on pb. */
xs_status xs_moe_plan_check(const xs_moe_problem *pb, const xs_moe_plan *p);
/* The task list of a checked plan into t[trace_cap]; returns the number of tasks. */
int xs_moe_tasks_build(const xs_moe_problem *pb, const xs_moe_plan *p, xs_moe_task *t);
/* 1 if two plans are the same, field by field (not memcmp: the struct has padding) */
int xs_moe_plan_equal(const xs_moe_plan *a, const xs_moe_plan *b);
/* The default lead: ceil(grid / l1_per_rb) + 1 row blocks (one machine-wide round of Linear-1
 * tiles between a row block's last Linear-1 tile and its first Linear-2 tile). */
int xs_moe_default_lead(const xs_moe_problem *pb);
/* The same rule for a task list run by `ctas` compute CTAs (a courier plan: grid - couriers), so
 * that a lead means one machine-wide round of the CTAs that compute. */
int xs_moe_default_lead_ctas(const xs_moe_problem *pb, int ctas);
int xs_moe_default_wave(const xs_moe_problem *pb); /* experts in the first wave (wave_experts 0) */
/* Remote and total combine bytes of Linear-2 tile (rb, nb) for the virtual-peer layout. */
void xs_moe_tile_bytes(const xs_moe_problem *pb, int rb, int nb, double *remote, double *total);

/* ---- traces ---------------------------------------------------------------------------------- */

typedef struct {
    double fetch_ns, mma0_ns, mma1_ns, st0_ns, st1_ns; /* from the kernel's first fetch */
    double gate_ns;            /* time the tile waited for the pacer (between mma1 and st0) */
    int kind;                  /* 1 = Linear-1 (+SwiGLU, local h), 2 = Linear-2 (+combine) */
    int rb, nb, cta, smid;
    int id;                    /* the tile, independent of the order: Linear-1 rb * l1_per_rb +
                                * nb, Linear-2 l1_tiles + rb * l2_per_rb + nb */
    int remote_bytes, total_bytes; /* combine bytes of the tile (Linear-2) */
    int deferred;              /* 1: the tile's stores left at a later point of its CTA (a
                                * deferring kernel): st0..st1 and gate_ns are then those of its
                                * flush */
    long long seq;             /* order ticket from one device counter: a Linear-1 tile takes it
                                * just before its release, a Linear-2 tile just after its acquire;
                                * a Linear-2 tile's ticket exceeds its row block's Linear-1
                                * tickets in a correct run, independent of clocks (-1: none) */
} xs_moe_tile;

/* ---- the X-Stage model of the combine -------------------------------------------------------- */

typedef struct {
    double c1_ns;        /* Linear-1 tile: main loop + SwiGLU + local h stores (median) */
    double c2_ns;        /* Linear-2 tile up to its first combine store (median) */
    double mma1_ns, mma2_ns; /* main loops alone (median) */
    double span2_ns;     /* Linear-2 combine store span (median) */
    double local_issue_bytes_per_ns; /* Linear-2 store bytes / span, median over the full-size
                                      * tiles (>= 3/4 of the largest): the unstalled issue rate
                                      * of local (HBM) rows; from a local-control trace */
    double wait_ns;      /* dependency waits, summed over tiles */
    double kernel_ns;    /* first fetch to last store */
} xs_moe_costs;

/* Per-tile medians of a trace (a local-control trace gives the compute costs of an order). */
void xs_moe_costs_from_trace(const xs_moe_tile *t, int n, xs_moe_costs *c);

/* What the kernel-level model adds to the profile (docs/EP.md, "The model"). On the H200's
 * PCIe path the fused kernel's combine stores are accepted without stalling the issuing CTA, but
 * while the combine backlog is above block_bytes every CTA's main loop (its loads) runs at
 * block_speed: the backpressure reaches the tensor cores through the loads, on every SM. */
typedef struct {
    double block_bytes;     /* X: backlog above which the main loops stall; <= 0: never */
    double block_speed;     /* s: main-loop speed while blocked, 0..1 */
    double pace_bytes;      /* P: pacer threshold that auto may use (0: auto never paces) */
    double pace_drain_frac; /* the pacer drains at this fraction of the profile's R */
    int couriers;           /* courier counts auto may choose: XS_MOE_COURIERS_AUTO (-1) = the
                             * candidates 4 and 8, 0 = never, C > 0 = only C */
    double courier_pace_frac; /* the couriers together issue at this fraction of R */
    double courier_copy_bytes_per_ns; /* what one courier CTA copies per ns at most (staging ->
                                       * window); the couriers drain at min(pace, C x this) */
    int auto_couriers;      /* 1: auto may choose its courier candidate; 0: it is predicted and
                             * reported (the courier column runs it) but never chosen */
    int auto_adaptive;      /* 1: auto may choose its adaptive candidate (same 2 % rule); 0: it
                             * is predicted and reported (bench ep's adaptive column runs it) */
    int auto_spill;         /* 1 (the default): where auto paces, it runs its plan on the
                             * spilling kernel (spill_depth XS_MOE_SPILL_DEPTH) if that is
                             * predicted at least 1 % faster; 0: predicted and reported only */
    int lead_search;        /* 1 (the default): where auto paces, it also predicts the paced order
                             * at the leads D/2, 3D/4, D, 5D/4, 3D/2 and 2D, the middle three
                             * also tapering to 1/2, 2/3 and 3/4 of themselves where Linear-1
                             * ends (xs_moe_plan.lead_end), and takes the best if predicted at
                             * least 1 % faster than the paced order at the unpaced order's best
                             * lead; 0: that lead, no taper */
    int paced_lead, paced_lead_end; /* paced_lead > 0: the paced candidate's lead is this, tapering
                                     * to paced_lead_end (0: no taper; else 1..paced_lead-1), not
                                     * searched; 0, 0: the rule */
} xs_moe_model;

/* X and s are fitted on the first full H200 sweep (the model with these numbers reproduces all
 * 84 measured wave and interleaved times, mean |error| 1.4 % and 2.8 %): X = 0.55 MB, s = 0.05.
 * The pacer: P = 128 KB at 0.95 R. 128 KB beat 256 KB (below X) on a whole sweep: every
 * reshapable row faster (median 2.7 %), 29 of 30 within 10 % of bound_us, no other row slower
 * than 0.2 %; with fewer tiles' stores in flight at once the loads of the other SMs slow less
 * (docs/EP.md, "The pacer"; bench/results/ep/). X and s were fitted on every configuration that
 * bench ep's sweep judges them on; the split to refit them on is bench/results/ep/split.csv
 * (docs/METRICS.md, "Fitted constants"). */
#define XS_MOE_BLOCK_BYTES 550000.0
#define XS_MOE_BLOCK_SPEED 0.05
#define XS_MOE_PACE_BYTES 131072.0
#define XS_MOE_PACE_DRAIN_FRAC 0.95
/* Couriers (docs/EP.md, "Couriers"): a few SMs that issue the combine paced under R cost the
 * other SMs nothing (a probe with 4 or 16 SMs storing at 0.8 R kept the loads on the other SMs
 * at 1.00 of their rate alone). auto weighs 4 and 8 couriers at 0.9 R. */
#define XS_MOE_COURIERS_AUTO (-1)
#define XS_MOE_COURIER_PACE_FRAC 0.9
/* Measured, not calibrated: with the row plan and the ready flag loaded one tile ahead, a
 * courier moves 9.2-10.7 B/ns from ready to last store (pacer holds excluded; copy phase 9.9 B/ns
 * median); 9.2, the lower, is the model's rate. Its own loads of the staged rows wait behind its
 * stores in flight, so a few couriers drain well below 0.9 R. auto does not
 * choose couriers by default (--auto-couriers): the forced courier column is slower than auto
 * on nearly every point of the sweep (docs/EP.md, "Couriers"). */
#define XS_MOE_COURIER_COPY_BYTES_PER_NS 9.2
void xs_moe_model_default(xs_moe_model *mm);

/* Predicted kernel time of task list `slot` (and its pacing) with the given tile costs: an event
 * simulation in which every CTA is a producer that takes the next task when free, waits for its
 * row block's Linear-1 tiles (Linear-2), computes (c1 / c2, slowed while the backlog is above
 * block_bytes), and issues its combine rows as one burst through the X-Stage of src/sim.c (the
 * profile's r, o, R, Q, per-producer cap, queue, reserve, arbitration skew, chunks; rank 0's
 * rows at local_issue_bytes_per_ns). link = 0: every row local (the local control). The result
 * ends when the last CTA finished and the stage has drained. A courier plan (couriers = C): grid
 * - C producers store every row locally (the staging buffer), and with the link the result is
 * max(their end, xs_moe_courier_drain of the Linear-2 tiles at their predicted ends). */
xs_status xs_moe_predict(const xs_moe_problem *pb, int slot, const xs_profile *p,
                         const xs_moe_model *mm, const xs_moe_costs *c, int link,
                         double *total_ns);
/* The same, and the model's trace of the run into tiles[ntasks] (one record per task, in list
 * order, the fields of a measured trace; cta = smid = the producer; Linear-1 tiles store at
 * their end, st0 = st1 = mma1). A CPU-only stand-in for a measured trace. */
xs_status xs_moe_predict_trace(const xs_moe_problem *pb, int slot, const xs_profile *p,
                               const xs_moe_model *mm, const xs_moe_costs *c, int link,
                               xs_moe_tile *tiles, double *total_ns);
/* The same on a task list in the caller's memory (plan: its pacing, couriers and spilling;
 * NULL: none); trace optional. */
xs_status xs_moe_predict_tasks(const xs_moe_problem *pb, const xs_moe_task *tasks, int ntasks,
                               const xs_moe_plan *plan, const xs_profile *p,
                               const xs_moe_model *mm, const xs_moe_costs *c, int link,
                               xs_moe_tile *trace, double *total_ns);

/* The couriers' link, as the auto rule predicts it (docs/EP.md, "Couriers"): n Linear-2 tiles in
 * task-list position order, tile j ready (its rows staged) at ready_ns[j] with bytes[j] remote
 * bytes; courier j % couriers copies it after its previous tiles, no earlier than ready_ns[j],
 * at bytes_per_ns / couriers (each courier is a FIFO server at its share of the pace; a tile
 * without bytes is skipped without a wait). Returns when the last byte has left (0 if there is
 * none); with couriers = 1, a FIFO server at bytes_per_ns. couriers < 1 or bytes_per_ns <= 0:
 * NaN. */
double xs_moe_courier_drain(const double *ready_ns, const double *bytes, int n, int couriers,
                            double bytes_per_ns);

typedef struct {
    xs_moe_plan plan;      /* the decision (wave, or interleaved with lead, maybe paced) */
    int criterion_ok;      /* the wave order's Linear-2 bursts meet the no-backpressure criterion:
                            * K * B / (T_iss0 + G) <= R and, with K * T_iss0 / (T_iss0 + G)
                            * staggered producers bursting at once, the capacity part */
    int reshape_ok;        /* the same criterion holds for the Linear-2 bursts spread evenly
                            * over the kernel after the fill (G = (the local control's kernel
                            * time - fill_ns) per Linear-2 burst of a CTA): reshaping can meet it */
    double wave_ns;        /* predicted, scaled by the local control (below) */
    double inter_ns;       /* predicted, best lead, unpaced */
    double paced_ns;       /* predicted, best lead, paced (NaN if not considered) */
    double auto_ns;        /* predicted time of the decision */
    double fill_ns;        /* earliest first combine store of any order: c1 + c2 (local control);
                            * the reshaped criterion spreads the bursts after it */
    int drain_bound;       /* remote bytes / R >= 0.9 x the local control's kernel time */
    xs_moe_plan courier;   /* the best courier candidate (couriers = 0: none considered) */
    double courier_ns;     /* its predicted time: max(compute_ns, link_ns) (NaN: none) */
    double courier_compute_ns; /* the local control's kernel time of its order x grid/(grid-C) */
    double courier_link_ns;    /* xs_moe_courier_drain of its Linear-2 tiles (ready times from
                                * the local control's stamps, scaled the same way) */
    xs_moe_plan adaptive;  /* the adaptive candidate (kind XS_MOE_ADAPTIVE; where there are remote
                            * bytes and pacing is allowed): admission at the pacer's rate, lookahead
                            * = the interleaved control's Linear-2 tile + the pacer's slack, and the
                            * pacer */
    double adaptive_ns;    /* its predicted time, scaled by the interleaved control (NaN: none) */
    double spill_ns;       /* the paced candidate on the spilling kernel (NaN: not considered) */
    double paced_plain_ns; /* paced at the unpaced order's best lead without taper, where the
                            * lead search (xs_moe_model.lead_search) ran (NaN: it did not) */
    char how[800];         /* one line: why */
} xs_moe_auto_result;

/* Local-control traces of both orders (list order, as a measured trace gives them; owned by the
 * caller): the ready times of the courier prediction. NULL (or n = 0): the model's own local
 * trace of the order, scaled to the local control's kernel time. */
typedef struct {
    const xs_moe_tile *wave;
    int nwave;
    const xs_moe_tile *inter;
    int ninter;
} xs_moe_local_traces;

/* The auto rule (docs/EP.md): predict wave, interleaved with leads D, 2D, D/2 and, where the
 * wave order's bursts fail the criterion (and mm->pace_bytes > 0), the best of those paced (and,
 * with mm->lead_search, the paced order at other leads and tapers), each
 * as the model's time with the link x (the order's local-control kernel time / the model's time
 * of it without the link); keep wave unless another is predicted >= 2 % faster, pace only if
 * that is predicted >= 1 % faster than unpaced, or, drain-bound, no more than 5 % slower.
 * interleaved costs carry its locality loss (NULL = wave costs + 3 %). Then, where there are
 * remote bytes and mm->couriers allows, the courier candidates (in the order whose local control
 * is faster): chosen if predicted >= 2 % faster than that decision. lt: the local-control traces
 * for the courier prediction (NULL: the model's). mm NULL: xs_moe_model_default. No slot of pb
 * is touched. */
xs_status xs_moe_auto(const xs_moe_problem *pb, const xs_profile *p, const xs_moe_model *mm,
                      const xs_moe_costs *wave_costs, const xs_moe_costs *inter_costs,
                      const xs_moe_local_traces *lt, xs_moe_auto_result *out);

/* ---- the decision cache (src/ep_cache.c) ----------------------------------------------------- */

/* A server plans the same batch shapes again and again: the cache keeps xs_moe_auto's results
 * by the inputs that decide them. Two keys:
 *
 * XS_MOE_CACHE_EXACT (the default): every input the auto rule reads - the shape (H, the tiles
 * per row block, E, topk, N, T, grid), the routing as the model sees it (rows per expert; each
 * row block's expert, rows and remote rows), the profile's numbers, the model terms and both
 * cost sets. A hit returns the very result xs_moe_auto computed for equal inputs (every field
 * equal): the cache never changes a decision. Two seeds that route to the same row blocks share
 * an entry.
 *
 * XS_MOE_CACHE_BUCKETED (opt-in, for serving): the configuration (H, I, E, topk, N, grid), the
 * token count's bucket (tokens_per_octave buckets per doubling: T in (2^((b-1)/n), 2^(b/n)]),
 * the routing histogram's bucket (the largest expert's rows over the mean, in steps of
 * imbalance_step; the remote rows' share, in steps of remote_step), and the profile, model and
 * costs exactly. A hit returns the result computed for the first input of that bucket: its
 * plan (a lead in row blocks, a pace, couriers) is one the kernel runs on any problem of the
 * configuration, but its predicted times are that input's, and a full evaluation of this input
 * may decide otherwise. That is the price of the hit; use EXACT where decisions must equal
 * xs_moe_auto's.
 *
 * Calls with measured local traces (lt with n > 0) are not cached (counted in `bypassed`). Not
 * thread-safe: one cache per thread, or the caller serialises. */
typedef enum { XS_MOE_CACHE_EXACT = 0, XS_MOE_CACHE_BUCKETED = 1 } xs_moe_cache_key;

typedef struct {
    xs_moe_cache_key key;
    int entries;            /* capacity (rounded up to a multiple of 4; 0: 256); the least
                             * recently used of four candidate entries is replaced */
    int tokens_per_octave;  /* BUCKETED: token buckets per doubling of T (0: 4, about 19 %) */
    double imbalance_step;  /* BUCKETED: max expert rows / mean expert rows, step (0: 0.25) */
    double remote_step;     /* BUCKETED: remote rows / rows, step (0: 1/16) */
} xs_moe_cache_opts;

typedef struct {
    long long lookups;  /* xs_moe_auto_cached calls with inputs the auto rule accepted */
    long long hits;     /* of them answered from the cache */
    long long misses;   /* of them evaluated by xs_moe_auto (and stored) */
    long long bypassed; /* calls not cached (measured local traces); not in lookups */
    long long evictions;
    int entries, capacity; /* entries held now, capacity */
} xs_moe_cache_stats;

typedef struct xs_moe_cache xs_moe_cache;

/* A cache with options o (NULL: exact, 256 entries). *out is the caller's (xs_moe_cache_destroy;
 * NULL on failure). XS_EINVAL (one line) on an unknown key, a negative count or step or more than
 * 2^20 entries; XS_ENOMEM. */
xs_status xs_moe_cache_create(const xs_moe_cache_opts *o, xs_moe_cache **out);
void xs_moe_cache_destroy(xs_moe_cache *c);
/* xs_moe_auto through cache c (its arguments and result as there): a hit copies the stored
 * result into *out; a miss runs xs_moe_auto and stores a successful result. *hit (optional): 1
 * on a hit, else 0. Failures are xs_moe_auto's (not stored), or XS_ENOMEM for a key. */
xs_status xs_moe_auto_cached(xs_moe_cache *c, const xs_moe_problem *pb, const xs_profile *p,
                             const xs_moe_model *mm, const xs_moe_costs *wave_costs,
                             const xs_moe_costs *inter_costs, const xs_moe_local_traces *lt,
                             xs_moe_auto_result *out, int *hit);
/* The counts so far (hit rate: hits / lookups). */
void xs_moe_cache_stats_get(const xs_moe_cache *c, xs_moe_cache_stats *out);
/* Forget every entry and zero the counts. */
void xs_moe_cache_clear(xs_moe_cache *c);

typedef struct {
    /* issue side (sender-visible): Linear-2 tiles with remote rows */
    int tiles;
    double meas_stall_med_ns;  /* measured span - T_iss0, median */
    double pred_stall_med_ns;  /* predicted window - T_iss0, median */
    double abs_err_med_ns;     /* median |predicted - measured| */
    double abs_err_p90_ns;
    /* MMA side: every tile with a local-control reference main loop */
    int mma_tiles;
    double mma_meas_med_ns;    /* main loop - the same tile's main loop in the local control */
    double mma_pred_med_ns;    /* (1 - block_speed) x blocked time within the main loop */
    double mma_abs_err_med_ns;
    double mma_abs_err_p90_ns;
    double blocked_ns;         /* predicted time with the backlog above block_bytes */
    /* where it matters: the tiles whose measured stall exceeds XS_MOE_STALLED_NS, the model's
     * median |pred - meas| beside the zero predictor's (stall 0: the measured stall itself) */
    int stalled_tiles;               /* issue side */
    double stalled_err_med_ns;
    double stalled_zero_err_med_ns;
    int mma_stalled_tiles;           /* MMA side */
    double mma_stalled_err_med_ns;
    double mma_stalled_zero_err_med_ns;
} xs_moe_stall;

/* A tile counts as stalled above this measured stall (ns), issue side or MMA side. */
#define XS_MOE_STALLED_NS 500.0

/* Per-tile stalls of a run, predicted given when the combine bursts started: every Linear-2
 * tile's burst (producer = its CTA, start = its measured first store) goes through the same
 * event model as xs_moe_predict. Issue side: predicted window (start to the last store handed
 * to the SM's queue) vs measured span (st0 to st1), both minus the same T_iss0. MMA side: the
 * predicted blocked time within the tile's measured main loop vs its main loop minus ref[id]
 * (the same tile's main loop in the local control; NaN or nref <= id: no reference). pred_span
 * and pred_mma (optional, [n]) receive per-task predictions (NaN where none). */
xs_status xs_moe_stall_predict(const xs_moe_tile *t, int n, const xs_profile *p,
                               const xs_moe_model *mm, double local_bytes_per_ns,
                               const double *ref, int nref, xs_moe_stall *out,
                               double *pred_span, double *pred_mma);
/* T_iss0 of a Linear-2 tile: with remote rows o + [total - b]+ x (remote / r + local / r_local)
 * / total (the rows issue in one stream, the queue b takes its last bytes); without, total /
 * r_local (the local control's measured rate; 0 = the profile's r). */
double xs_moe_tile_t0(const xs_profile *p, double remote_bytes, double total_bytes,
                      double local_bytes_per_ns);

/* The trace v1 records (include/xstage_trace.h, docs/TRACE.md "Workload traces") of a run's
 * tiles t[n] (xs_moe_trace): per CTA, its tiles in the order their main loops began are seq
 * 0, 1, ...; sm = smid; bytes = the tile's remote bytes (a Linear-1 tile: 0); issue = [st0_ns,
 * st1_ns] (a tile without stores: [mma1_ns, mma1_ns]), held after the CTA's previous issue end
 * where a deferring kernel's flush overlaps it; work = [mma0_ns, mma1_ns]; times rounded to ns
 * (all moved by the same amount where one is negative). Tiles with cta < 0 are left out. *out malloc'd (free it). XS_EINVAL on a reversed span,
 * XS_ENOMEM. */
struct xs_trace_record;
xs_status xs_moe_trace_records(const xs_moe_tile *t, int n, struct xs_trace_record **out,
                               size_t *nout);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_EP_H */
