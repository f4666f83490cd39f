// SPDX-License-Identifier: Apache-2.0
/*
 * up.cu - `xstage bench up`: FlashAttention forward with a piggybacked Ulysses all-to-all, on the
 * shared bench harness (tools/bench/harness.h): the workload's options, variant table and point
 * function (the column table, header notes and summary are up_report.cu); the harness owns the
 * common options, the launch over ranks, the timing rule, the L2 flush, the rounds, the
 * statistics, the report and the verdict.
 *
 * One rank of a Ulysses group of P ranks (virtual peers on one GPU: rank 0 is a window in HBM,
 * ranks 1..P-1 are windows in pinned host memory reached over PCIe) holds H heads for the whole
 * sequence; after attention, sequence shard p of its output goes to rank p. Three ways, same
 * inputs, same kernel code (cuda/up/up_kernel.cuh), run side by side:
 *   fa      attention alone, output to a local buffer;
 *   serial  the same, then the all-to-all with cudaMemcpyAsync of each shard into its window;
 *   fused   attention whose output warps store each tile straight into its destination window,
 *           either right away (piggyback, pb: split 0) or in n slices spread evenly over the
 *           next query block's key/value iterations (reshape, split n), the CTAs walking their
 *           tiles heaviest first (snake) or lightest remote first (early), or with couriers (the
 *           last C CTAs of the grid copy the finished remote tiles, paced under the drain rate,
 *           while the others compute), or KV split (tiles cut along the keys into parts on other
 *           CTAs, the last part merging them; task lists built on the host): the planner's
 *           choice. Where the plan splits, one more variant (ls) runs the planned split with
 *           local output: the kernel's own cost of the slices, without the link.
 *   overlapped (one GPU) the attention kernel per head chunk, each finished chunk's all-to-all
 *           as 2-D cudaMemcpyAsync on a side stream (the unfused pipeline overlapped by the copy
 *           engine); head chunks searched by verified pilots.
 * Times: the headline columns fa_us, serial_us, pb_us, fused_us and overlapped_us are the
 * harness's timing rule (xs_bench_time_op: CUDA events around the whole operation until every
 * byte is at its destination); the sender-visible times beside them (*_sent_us) are the
 * kernels' spans from %globaltimer stamps inside the kernel (first CTA start to the last CTA's
 * last store issued - never a fence; serial adds its copies' event time). The variants run in
 * table order (ls, fa, serial, pb, fused, overlapped), one of each per repetition, so that slow
 * drifts of the clock hit all alike and fa's output is the reference of every window check. The planner's prediction
 * uses the calibrated profile (--profile) and per-tile compute times measured in an fa run
 * before.
 * Checks: fa against an fp32 GPU reference on sampled rows (bf16 tolerance), and every byte of
 * every destination window of every serial and fused run against the fa output, after poisoning
 * the windows; every fused CTA also signals every destination, and the flags are checked. A KV
 * split's tiles that ran in parts are compared within a stated tolerance, all others bitwise.
 * -g N (N > 1): one rank per GPU, the N ranks are the Ulysses group (P = N) over NCCL symmetric
 * windows: the same kernels through a rotated send table (shard r to GPU (me + r) % N, one
 * region and one slot of CTA flags per source), serial's copies become one NCCL group of
 * send/recv, every destination waits for and checks every source's signals and bytes; runs
 * between barriers, plans and verdicts agreed over the ranks (docs/MULTIGPU.md).
 * docs/UP.md describes the bench; docs/METRICS.md defines the columns.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "up/up.h"
#include "up_bench.h"
#include "xstage_overlap.h"
#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_cuda.h"
#include "xstage_grid.h"
#include "xstage_win.h"

#define UP_POISON 0xffffffffu  /* bf16 NaN pairs: never an attention output */
#define UP_FLAG_WAIT_MS 20000  /* -g: every source's signals after this rank's own kernel ended */
#define UP_PILOT_REPS 3        /* verified runs per pilot; the median decides */
#define UP_PILOT_TIE 0.01      /* pilots this close to the fastest (relative) are tied: the
                                * model's ranking decides (run_pilots) */
#define UP_KV_ATOL 1e-3f       /* KV split, tiles in parts: |win - fa| <= ATOL + RTOL |fa| (P */
#define UP_KV_RTOL (1.f / 64)  /* rounds to bf16 against another row max: a few bf16 ulps) */
#define UP_TIMEOUT_S 60.0      /* --timeout default: the longest kernel takes well under 1 s, a
                                * courier's or a last part's own wait at least 2 s */

/* ---- variants ------------------------------------------------------------------------------- */

/* The variants of a point, in the order of every repetition: ls (the planned split with local
 * output) before fa, so that O - the reference of every window check - is fa's. */
enum { V_LS, V_FA, V_SERIAL, V_PB, V_FUSED, V_OVL, V_AUTO, UP_NV };
static const char *const up_var_name[UP_NV] = {"ls", "fa", "serial", "pb", "fused",
                                               "overlapped", "auto"};

/* The overlapped pipeline's declared chunk counts (head chunks), searched by UP_PILOT_REPS
 * verified runs each (those that divide the heads); the fastest median is timed. */
#define UP_OV_CHUNKS {1, 2, 4, 8, 16}
#define UP_OV_NCHUNKS 5
#define UP_OV_MAX 16

/* ---- the bench's state ---------------------------------------------------------------------- */

/* Device buffers sized for the largest configuration. */
typedef struct {
    void *q, *k, *v, *o;           /* bf16 [seq, heads, 128] */
    uint64_t *cta_ns;              /* [sm_count * 3] */
    uint64_t *tile_ns;             /* [max tiles] */
    uint64_t *tile_work_ns;        /* [max tiles] */
    void *stage;                   /* couriers: staging of the remote tiles, like o (NULL when
                                      --couriers 0); never o, which holds fa's output, the
                                      reference of every window check */
    uint64_t *sync;                /* couriers: [max tiles + sm_count] ready and done flags */
    /* KV split: the lists of one member (kv_kb key blocks per part; 0: none loaded), grown on
     * demand; the partials' flags are never reset (the signal is new per run) */
    int kv_kb;
    xs_attn_kvbuf kv;              /* the lists, partials and flags (cuda/up/up.h) */
    xs_devstatus *status;
    unsigned long long *bad;
    int *rows;                     /* [2 * samples] */
    float *ref, *got;              /* [samples * 128] */
    cudaEvent_t mid;               /* serial: between the kernel and the copies */
    /* overlapped (one GPU): Q, K, V head-chunk-major for ov_c chunks ([c][seq, heads/C, 128],
     * laid out before the runs, not timed), each chunk's O, the copy stream, one event per
     * chunk kernel, the copies' end and the last kernel's end */
    void *ovq, *ovk, *ovv, *ovo;
    int ov_c;                      /* chunk count of the layout in ovq.. (0: none) */
    cudaStream_t ov_side;
    cudaEvent_t ov_ev[UP_OV_MAX], ov_end, ov_kend;
} up_bufs;

/* -g N, N > 1: this rank's window and the two tables that map the one-GPU problem onto real
 * ranks (xs_up_peer_tables; slot = SM count >= grid flags per source). */
typedef struct {
    xs_winset *ws;
    xs_coll *coll;  /* serial's all-to-all */
    int me, n;
    xs_wintab send; /* the kernel's: problem rank r -> GPU (me + r) % N, region and slot me */
    xs_wintab own;  /* this window: problem rank r's rows, i.e. region and slot of the source
                       (me - r) mod N that sends them */
} up_peer;

/* A point of the sweep. */
typedef struct {
    int seq, heads, causal, peers;
    int index; /* --grid declared: its row of the grid */
} up_point_def;

/* The whole bench: options, harness, buffers, the open windows and the host scratch of a
 * point (sized once, so that a failing point leaks nothing). */
typedef struct {
    const up_opts *o;
    const xs_profile *prof;
    xs_bench_env *e;
    xs_bench_report *rep;
    up_bufs B;
    int max_seq, max_heads;
    up_point_def *pts;
    int npoints;
    /* the windows of the current peer count (0: none open) */
    int win_peers;
    xs_winset *ws;
    const xs_wintab *tab;
    up_peer peer, *pp;     /* pp = &peer with -g N > 1; NULL on one GPU */
    /* the signal of the next run that raises flags (fused runs; KV-split runs, whose partials'
     * flags carry it, in either output): new per run, so that a stale flag never matches */
    uint64_t epoch;
    uint64_t *cta;         /* [sms * 3]: a courier run's grid can exceed the config's grid */
    uint64_t *tns;         /* [max tiles] */
    double *dur;           /* [max tiles] */
    up_tiles tk;           /* the last repetition's fa and piggyback stamps (up_report.cu) */
    const xs_bench_table *t; /* the columns (a row that did not run: xs_bench_row_blank) */
} up_bench;

/* One configuration as the runs see it. */
typedef struct {
    int seq, heads, causal, peers, grid, tiles, rpr;
    int remote;             /* tiles with rows outside rank 0's shard: xs_attn_remote_tiles */
    const xs_wintab *tab;   /* the kernel's destinations */
    const xs_wintab *own;   /* what this process poisons and verifies: rank r's window holds
                               problem rank r's rows (one GPU: = tab; -g: pp->own) */
    up_peer *pp;            /* -g N, N > 1; NULL on one GPU */
    xs_attn_args base;
    int sms;                /* SMs: a courier run has min(tiles, sms - C) compute CTAs + C */
    double pace;            /* couriers' total rate, bytes/ns (0: unpaced) */
    uint64_t timeout_ns;    /* bound on each courier wait: 20x the plan's fa span, >= 2 s */
} up_cfg;

/* A member of the planner's family. */
typedef struct {
    int order, split, couriers, kv;
} up_member;

/* The model's view of this configuration (include/xstage_up.h). */
static xs_up_cfg model_cfg(const up_cfg *c)
{
    xs_up_cfg m;
    memset(&m, 0, sizeof m);
    m.seq = c->seq, m.heads = c->heads, m.causal = c->causal, m.peers = c->peers;
    m.tiles = c->tiles, m.grid = c->grid, m.rows_per_rank = c->rpr, m.remote = c->remote;
    m.sms = c->sms, m.pace_bytes_per_ns = c->pace;
    return m;
}

/* ---- the planner ---------------------------------------------------------------------------- */

/* The planner in the loop (xs_up_plan_run, docs/UP.md "Criterion"; --split / --order /
 * --couriers / --kv-split restrict the family). Prints the decision and the model's warnings;
 * fills row's criterion and plan columns; *d_pb and *d_fu get the predicted cost (ns) over fa
 * of piggyback and of the choice; *fam the family with its predictions (the pilots read it). */
static void plan(FILE *out, const up_opts *o, const xs_profile *prof0, const up_cfg *c,
                 const double *dur, const uint64_t *tns, int kv_ok, up_row *row, double *d_pb,
                 double *d_fu, xs_up_family *fam)
{
    const xs_up_cfg m = model_cfg(c);
    const xs_up_plan_opts po = {o->split, o->order, o->couriers, o->kv, kv_ok, 0.0, o->slice_ns};
    xs_up_plan pl;
    xs_up_plan_run(&po, prof0, &m, dur, tns, &pl);
    xs_profile pm;
    xs_up_model_profile(prof0, 0.0, &pm);
    const xs_profile *prof = &pm;
    if (pl.pb_why[0])
        fprintf(stderr, "xstage: warning: %s\n", pl.pb_why);
    for (int i = 0; i < pl.fam.n; i++) {
        if (pl.fam.failed[i] == 2)
            fprintf(out, "# note: %s: not in the family\n", pl.fam.why[i]);
        else if (pl.fam.failed[i])
            fprintf(stderr, "xstage: warning: %s\n", pl.fam.why[i]);
    }
    row->crit_fluid_ok = pl.fluid_ok, row->criterion_ok = pl.criterion_ok;
    row->crit_held_us = pl.pb.held_ns / 1e3;
    row->crit_peak_mb = pl.fluid_peak_bytes / 1e6, row->crit_sync_mb = pl.sync_bytes / 1e6;
    row->crit_keff = pl.k_eff;
    row->order = pl.order, row->split = pl.split, row->couriers = pl.couriers, row->kv = pl.kv;
    row->courier_pace = pl.courier_pace;
    *d_pb = pl.d_pb_ns, *d_fu = pl.d_fu_ns, *fam = pl.fam;
    char how[400] = "model failed";
    if (c->remote == 0)
        snprintf(how, sizeof how, "nothing crosses the link");
    else if (pl.criterion_ok >= 0)
        snprintf(how, sizeof how, "per-CTA piggyback: stores held back up to %.2f us (%.3f us "
                 "allowed), stage peak %.2f MB of Q %.2f MB; fluid test %s: peak "
                 "backlog %.2f MB, %d CTAs issuing at once, Q(%d) %.2f MB; synchronised form "
                 "K*B-R*T_iss0 %.2f MB", pl.pb.held_ns / 1e3, pl.held_tol_ns / 1e3,
                 pl.pb.peak_bytes / 1e6, prof->capacity_bytes / 1e6,
                 pl.fluid_ok ? "holds" : "fails", pl.fluid_peak_bytes / 1e6, pl.k_eff, c->grid,
                 xs_capacity(prof, c->grid) / 1e6, pl.sync_bytes / 1e6);
    /* the courier and KV-split members' predictions, next to the choice */
    char cl[256] = "", kl[256] = "", nm[32];
    for (int i = 0; i < fam->n; i++) {
        if (fam->cou[i] > 0)
            snprintf(cl + strlen(cl), sizeof cl - strlen(cl), "%s %s %+.1f us", *cl ? "," : "",
                     xs_up_plan_name(fam->ord[i], 0, fam->cou[i], 0, nm, sizeof nm),
                     fam->d[i] / 1e3);
        if (fam->kv[i] > 0)
            snprintf(kl + strlen(kl), sizeof kl - strlen(kl), "%s %s %+.1f us", *kl ? "," : "",
                     xs_up_plan_name(fam->ord[i], 0, 0, fam->kv[i], nm, sizeof nm),
                     fam->dp[i] / 1e3);
    }
    char pn[32];
    fprintf(out, "# plan seq %d heads %d causal %d peers %d: criterion %s (%s); chosen %s "
            "split %d couriers %d (%s), cost over fa %+.1f us (piggyback %+.1f us)", c->seq,
            c->heads, c->causal, c->peers,
            row->criterion_ok == 1 ? "holds" : row->criterion_ok == 0 ? "fails" : "?", how,
            row->order == XS_ATTN_ORDER_EARLY ? "early" : "snake", row->split, row->couriers,
            xs_up_plan_name(row->order, row->split, row->couriers, row->kv, pn, sizeof pn),
            *d_fu / 1e3, *d_pb / 1e3);
    if (*cl)
        fprintf(out, "; couriers paced at %.1f B/ns (R %.1f):%s", c->pace,
                prof->drain_bytes_per_ns, cl);
    if (*kl)
        fprintf(out, "; KV split:%s", kl);
    fprintf(out, "\n");
}

/* ---- one run of each kind ------------------------------------------------------------------- */

/* A failed device-side check (a courier's or a last part's wait that timed out): one line. */
static xs_status check_devstatus(up_bufs *B, const char *what)
{
    xs_devstatus st;
    XS_CU(cudaMemcpy(&st, B->status, sizeof st, cudaMemcpyDeviceToHost));
    if (st.code) /* the kernel ended: later points can still run */
        return xs_seterr(st.code == XS_DEVERR_TIMEOUT ? XS_ETIMEOUT : XS_EVERIFY,
                         "%s: device failure code %u in CTA %u (detail %llu)", what, st.code,
                         st.block, st.detail);
    return XS_OK;
}

/* Poison every destination window's rows of this configuration. */
static xs_status poison_windows(up_bench *b, const up_cfg *c)
{
    size_t bytes = (size_t)c->rpr * c->heads * XS_ATTN_ROW_BYTES;
    for (int r = 0; r < c->peers; r++)
        XS_TRY(xs_attn_fill_word(c->own->data[r], bytes, UP_POISON, b->e->stream));
    return XS_OK;
}

/* The windows against the fa output, every byte of every rank: *bad the 16-byte units that
 * differ; after a KV-split run (kv) tile by tile instead - bitwise where a tile ran whole,
 * within UP_KV_ATOL + UP_KV_RTOL |fa| where it ran in parts (B->kv.split) - counting bf16
 * values. */
static xs_status verify_windows(up_bench *b, const up_cfg *c, int kv, unsigned long long *bad)
{
    up_bufs *B = &b->B;
    *bad = 0;
    return xs_attn_verify_windows(c->own, c->peers, B->o, c->seq, c->heads, c->rpr,
                                  kv ? B->kv.split : NULL, UP_KV_ATOL, UP_KV_RTOL, B->bad,
                                  b->e->stream, bad);
}

/* KV split: a launch's arguments for kb key blocks per part - its lists in device memory
 * (built, checked and copied when another member's are there), the partials' buffers grown to
 * fit, their flags, and the run's bound on each wait. The caller sets the signal. */
static xs_status kv_args(up_bench *b, const up_cfg *c, int kb, xs_attn_args *a)
{
    up_bufs *B = &b->B;
    if (B->kv_kb != kb) {
        int *off = NULL, nt = 0, ns = 0;
        xs_attn_kvtask *tk = NULL;
        const xs_up_cfg m = model_cfg(c);
        XS_TRY(xs_up_kv_lists(&m, kb, &off, &tk, &nt, &ns));
        const xs_status st = xs_attn_kvbuf_load(&B->kv, c->grid, c->tiles, off, tk, nt, ns,
                                                b->e->stream);
        free(off), free(tk);
        XS_TRY(st);
        B->kv_kb = kb;
    }
    a->tasks = B->kv.tasks, a->task_off = B->kv.off;
    a->part = B->kv.part, a->part_flag = B->kv.flag;
    a->timeout_ns = c->timeout_ns;
    return XS_OK;
}

/* One launch of the kernel: the harness's timed op. */
typedef struct {
    const xs_attn_args *a;
    const xs_wintab *tab; /* WINDOWS output: the destinations */
    int grid;
} up_launch;

static xs_status launch_op(void *ctx, int v, cudaStream_t s)
{
    const up_launch *l = (const up_launch *)ctx;
    return xs_attn_fwd(l->a, l->a->out == XS_ATTN_OUT_WINDOWS ? l->tab : NULL, l->grid, s);
}

/* One launch by the timing rule (xs_bench_time_op: L2 flushed, -g barriers); *span_us the
 * in-kernel span from the CTAs' stamps (read into cta), *evt_us the event time. */
static xs_status timed_launch(up_bench *b, const up_cfg *c, const xs_attn_args *a, int round,
                              const char *what, double *span_us, double *evt_us)
{
    up_launch l = {a, c->tab, c->grid};
    XS_TRY(xs_bench_time_op(b->e, launch_op, &l, 0, round, what, evt_us));
    XS_CU(cudaMemcpy(b->cta, b->B.cta_ns, (size_t)c->grid * 3 * sizeof(uint64_t),
                     cudaMemcpyDeviceToHost));
    *span_us = xs_attn_span_us(b->cta, c->grid);
    return XS_OK;
}

/* One fa run with arguments a (c->base; or a split with local output): O poisoned with NaN
 * first, so that afterwards no element may be NaN/Inf (every output written, and finite: the
 * windows are later compared against it). *span_us the in-kernel span, *evt_us the event time;
 * clears *ok on wrong data. */
static xs_status fa_once(up_bench *b, const up_cfg *c, const xs_attn_args *a, int round,
                         double *span_us, double *evt_us, int *ok)
{
    up_bufs *B = &b->B;
    cudaStream_t s = b->e->stream;
    const size_t nel = (size_t)c->seq * c->heads * XS_ATTN_D;
    XS_TRY(xs_attn_fill_word(B->o, nel * 2, UP_POISON, s));
    XS_TRY(timed_launch(b, c, a, round, "attention", span_us, evt_us));
    unsigned long long nonfinite = 0;
    XS_CU(cudaMemsetAsync(B->bad, 0, sizeof *B->bad, s));
    XS_TRY(xs_attn_count_nonfinite(B->o, nel, B->bad, s));
    XS_CU(cudaMemcpyAsync(&nonfinite, B->bad, sizeof nonfinite, cudaMemcpyDeviceToHost, s));
    XS_CU(cudaStreamSynchronize(s));
    if (nonfinite) {
        fprintf(stderr, "xstage: error: attention seq %d heads %d causal %d: %llu of %zu "
                "outputs unwritten or not finite\n", c->seq, c->heads, c->causal, nonfinite,
                nel);
        *ok = 0;
    }
    return XS_OK;
}

/* The planned split with LOCAL output (LOCAL walks the snake; a KV split its lists): the
 * kernel's cost of the slices without the link; its O is checked complete and finite. */
static xs_status ls_once(up_bench *b, const up_cfg *c, const up_member *m, int round,
                         double *span_us, double *evt_us, int *ok)
{
    xs_attn_args a = c->base;
    a.split = m->split;
    if (m->kv > 0) { /* the KV split's lists, LOCAL output: its kernel cost alone */
        XS_TRY(kv_args(b, c, m->kv, &a));
        a.signal = ++b->epoch;
    }
    XS_TRY(fa_once(b, c, &a, round, span_us, evt_us, ok));
    if (m->kv > 0)
        XS_TRY(check_devstatus(&b->B, "attention, KV split, local output"));
    return XS_OK;
}

/* -g: wait (bounded, acquire loads) until all N x grid signals of this run are in this rank's
 * window: slot s holds source s's CTAs. A source that never signals fails the point with one
 * line naming it (the launcher then stops the other ranks). */
static xs_status wait_signals(up_bench *b, const up_cfg *c, uint64_t value, const char *what)
{
    unsigned long long missing = 0;
    uint64_t late = 0;
    const xs_status st = xs_attn_flags_wait(c->own, c->peers, c->grid, value, UP_FLAG_WAIT_MS,
                                            b->B.bad, b->e->stream, &missing, &late);
    if (st != XS_ETIMEOUT)
        return st;
    char who[XS_MAX_RANKS * 4] = "";
    for (int r = 0; r < c->peers; r++)
        if (late >> r & 1)
            snprintf(who + strlen(who), sizeof who - strlen(who), "%s%d", *who ? "," : "",
                     (c->pp->me - r + c->pp->n) % c->pp->n);
    return xs_seterr(XS_ETIMEOUT, "%s: the signals of source(s) %s did not arrive within %d ms "
                     "(%llu of %d x %d missing)", what, who, UP_FLAG_WAIT_MS, missing, c->peers,
                     c->grid);
}

/* Serial's operation: the attention kernel, then one cudaMemcpyAsync per rank of its shard of
 * O into its window (-g: one NCCL group of send/recv, xs_up_alltoall); B->mid between them. */
typedef struct {
    const up_bench *b;
    const up_cfg *c;
} up_serial;

static xs_status serial_op(void *ctx, int v, cudaStream_t s)
{
    const up_bench *b = ((const up_serial *)ctx)->b;
    const up_cfg *c = ((const up_serial *)ctx)->c;
    const size_t shard = (size_t)c->rpr * c->heads * XS_ATTN_ROW_BYTES;
    XS_TRY(xs_attn_fwd(&c->base, NULL, c->grid, s));
    XS_CU(cudaEventRecord(b->B.mid, s));
    if (c->pp)
        return xs_up_alltoall(c->pp->coll, &c->pp->own, (const char *)b->B.o, shard, s);
    for (int r = 0; r < c->peers; r++)
        XS_CU(cudaMemcpyAsync(c->tab->data[r], (const char *)b->B.o + r * shard, shard,
                              cudaMemcpyDefault, s));
    return XS_OK;
}

/* One serial run, windows poisoned first, every byte checked after at its destination.
 * *us = kernel span + copy time (the sender-visible form); *copy_us the copies alone (events);
 * *evt_us the whole operation (events: the headline). */
static xs_status serial_once(up_bench *b, const up_cfg *c, int round, double *us,
                             double *copy_us, double *evt_us, int *ok)
{
    XS_TRY(poison_windows(b, c));
    up_serial ctx = {b, c};
    double evt;
    XS_TRY(xs_bench_time_op(b->e, serial_op, &ctx, 0, round, "serial", &evt));
    float ms = 0;
    XS_CU(cudaEventElapsedTime(&ms, b->B.mid, b->e->ev[1]));
    XS_CU(cudaMemcpy(b->cta, b->B.cta_ns, (size_t)c->grid * 3 * sizeof(uint64_t),
                     cudaMemcpyDeviceToHost));
    const double sp = xs_attn_span_us(b->cta, c->grid);
    unsigned long long bad = 0;
    XS_TRY(verify_windows(b, c, 0, &bad));
    if (bad) {
        fprintf(stderr, "xstage: error: serial all-to-all: %llu 16-byte units differ at their "
                "destinations\n", bad);
        *ok = 0;
    }
    *copy_us = ms * 1e3;
    *us = sp + ms * 1e3;
    *evt_us = evt;
    return XS_OK;
}

/* One fused run of member m (split 0 and snake: piggyback; with C couriers the grid has
 * courier_grid's CTAs, all of which must signal): windows poisoned first; every byte checked at
 * its destination and every CTA's signal to every rank checked (a new flag value per run, so a
 * stale flag never passes; -g: every source's, waited for first). The couriers stage in
 * B->stage, never in O (fa's output, the windows' reference). *us the span, *evt_us the event
 * time (with the drain), *store_us the median over CTAs of warp 0's store time (a courier's:
 * its copying time). */
static xs_status fused_once(up_bench *b, const up_cfg *c0, const up_member *m, int round,
                            double *us, double *evt_us, double *store_us, int *ok)
{
    up_bufs *B = &b->B;
    cudaStream_t s = b->e->stream;
    up_cfg rc = *c0; /* the run's grid: c0->grid, or the courier grid */
    const up_cfg *c = &rc;
    xs_attn_args a = c->base;
    a.out = XS_ATTN_OUT_WINDOWS;
    a.rows_per_rank = c->rpr;
    a.split = m->split;
    a.order = m->order;
    a.signal = ++b->epoch;
    if (m->couriers > 0) {
        const xs_up_cfg mc = model_cfg(c0);
        rc.grid = xs_up_courier_grid(&mc, m->couriers);
        a.couriers = m->couriers;
        a.pace_bytes_per_ns = (float)c->pace;
        a.o = B->stage;
        a.sync = B->sync;
        a.timeout_ns = c->timeout_ns;
    }
    if (m->kv > 0)
        XS_TRY(kv_args(b, c, m->kv, &a));
    XS_TRY(poison_windows(b, c)); /* landed before timing: the flush waits for it */
    const int pb = !(m->split || m->order || m->couriers || m->kv);
    XS_TRY(timed_launch(b, c, &a, round, pb ? "piggyback" : "fused", us, evt_us));
    if (c->pp) {
        XS_TRY(wait_signals(b, c, a.signal, pb ? "piggyback" : "fused"));
        XS_TRY(xs_bench_barrier(b->e));
    }
    unsigned long long bad = 0, bad_flags = 0;
    XS_TRY(verify_windows(b, c, m->kv > 0, &bad));
    XS_CU(cudaMemsetAsync(B->bad, 0, sizeof *B->bad, s));
    XS_TRY(xs_attn_flags_check(c->own, c->grid, a.signal, B->bad, s));
    XS_CU(cudaMemcpyAsync(&bad_flags, B->bad, sizeof bad_flags, cudaMemcpyDeviceToHost, s));
    XS_CU(cudaStreamSynchronize(s));
    if (bad_flags) {
        fprintf(stderr, "xstage: error: fused order %d split %d couriers %d KV split %d: %llu of "
                "%d x %d CTA signals missing\n", m->order, m->split, m->couriers, m->kv,
                bad_flags, c->peers, c->grid);
        *ok = 0;
    }
    if (bad) {
        fprintf(stderr, "xstage: error: fused order %d split %d couriers %d KV split %d (seq %d "
                "heads %d causal %d peers %d): %llu of %zu %s differ at their destinations\n",
                m->order, m->split, m->couriers, m->kv, c->seq, c->heads, c->causal, c->peers,
                bad, (size_t)c->rpr * c->heads * XS_ATTN_ROW_BYTES / (m->kv > 0 ? 2 : 16) *
                c->peers, m->kv > 0 ? "bf16 values" : "16-byte units");
        *ok = 0;
    }
    if (m->couriers > 0 || m->kv > 0) /* a courier's or a last part's timeout: name it now */
        XS_TRY(check_devstatus(B, m->couriers > 0 ? "attention with couriers"
                                                  : "attention, KV split"));
    *store_us = xs_attn_store_us(b->cta, c->grid);
    return XS_OK;
}

/* ---- the overlapped unfused pipeline (one GPU) ------------------------------------------------ */

/* Q, K and V laid out head-chunk-major for C chunks: chunk j is [seq, heads/C, 128] at
 * j * seq * heads/C rows, so that the attention kernel runs on it as a problem of heads/C heads
 * (a 2-D copy per chunk and tensor, on the bench stream, before the timed runs). */
static xs_status ov_layout(up_bench *b, const up_cfg *c, int C)
{
    up_bufs *B = &b->B;
    if (B->ov_c == C)
        return XS_OK;
    const int hc = c->heads / C;
    const size_t w = (size_t)hc * XS_ATTN_ROW_BYTES, pitch = (size_t)c->heads * XS_ATTN_ROW_BYTES;
    const void *src[3] = {B->q, B->k, B->v};
    void *dst[3] = {B->ovq, B->ovk, B->ovv};
    for (int t = 0; t < 3; t++)
        for (int j = 0; j < C; j++)
            XS_CU(cudaMemcpy2DAsync((char *)dst[t] + (size_t)j * c->seq * w, w,
                                    (const char *)src[t] + (size_t)j * w, pitch, w,
                                    (size_t)c->seq, cudaMemcpyDeviceToDevice, b->e->stream));
    XS_CU(cudaStreamSynchronize(b->e->stream));
    B->ov_c = C;
    return XS_OK;
}

/* The overlapped operation: the attention kernel per head chunk on the bench stream (local
 * output, chunk j's O at its place in ovo), and after each chunk's event the all-to-all of that
 * chunk on the side stream: for every rank p one 2-D cudaMemcpyAsync of rows [p rpr,
 * (p+1) rpr) of the chunk's heads into their columns of rank p's window ([rpr, heads, 128]).
 * The bench stream waits for the side stream's last copy: the harness's second event marks
 * every byte at its destination. ov_kend: after the last chunk kernel (the sender-visible
 * end). */
typedef struct {
    up_bench *b;
    const up_cfg *c;
    int C;
} up_ovl;

static xs_status ovl_op(void *ctx, int v, cudaStream_t s)
{
    const up_ovl *x = (const up_ovl *)ctx;
    up_bench *b = x->b;
    up_bufs *B = &b->B;
    const up_cfg *c = x->c;
    const int C = x->C, hc = c->heads / C;
    const size_t w = (size_t)hc * XS_ATTN_ROW_BYTES, pitch = (size_t)c->heads * XS_ATTN_ROW_BYTES;
    const size_t chunk = (size_t)c->seq * w;
    const int tiles = xs_attn_tiles(c->seq, hc);
    const int grid = tiles < c->sms ? tiles : c->sms;
    (void)v;
    for (int j = 0; j < C; j++) {
        xs_attn_args a = c->base;
        a.q = (const char *)B->ovq + j * chunk;
        a.k = (const char *)B->ovk + j * chunk;
        a.v = (const char *)B->ovv + j * chunk;
        a.o = (char *)B->ovo + j * chunk;
        a.heads = hc;
        XS_TRY(xs_attn_fwd(&a, NULL, grid, s));
        XS_CU(cudaEventRecord(B->ov_ev[j], s));
        XS_CU(cudaStreamWaitEvent(B->ov_side, B->ov_ev[j], 0));
        for (int r = 0; r < c->peers; r++)
            XS_CU(cudaMemcpy2DAsync((char *)c->tab->data[r] + (size_t)j * w, pitch,
                                    (const char *)a.o + (size_t)r * c->rpr * w, w, w,
                                    (size_t)c->rpr, cudaMemcpyDefault, B->ov_side));
    }
    XS_CU(cudaEventRecord(B->ov_kend, s));
    XS_CU(cudaEventRecord(B->ov_end, B->ov_side));
    XS_CU(cudaStreamWaitEvent(s, B->ov_end, 0));
    return XS_OK;
}

/* One overlapped run of C chunks: windows poisoned first, every byte checked after at its
 * destination against fa's output (bitwise: a chunk's tiles are fa's tiles). *us the event time
 * until the last copy completed, *sent_us until the last chunk kernel ended. */
static xs_status ovl_once(up_bench *b, const up_cfg *c, int C, int round, double *us,
                          double *sent_us, int *ok)
{
    XS_TRY(ov_layout(b, c, C));
    XS_TRY(poison_windows(b, c));
    up_ovl x = {b, c, C};
    XS_TRY(xs_bench_time_op(b->e, ovl_op, &x, 0, round, "overlapped", us));
    float ms = 0;
    XS_CU(cudaEventElapsedTime(&ms, b->e->ev[0], b->B.ov_kend));
    *sent_us = ms * 1e3;
    unsigned long long bad = 0;
    XS_TRY(verify_windows(b, c, 0, &bad));
    if (bad) {
        fprintf(stderr, "xstage: error: overlapped, %d head chunks (seq %d heads %d causal %d "
                "peers %d): %llu 16-byte units differ at their destinations\n", C, c->seq,
                c->heads, c->causal, c->peers, bad);
        *ok = 0;
    }
    return XS_OK;
}

/* The overlapped pipeline's chunk count (one GPU): every declared count that divides the heads
 * gets one warm-up and UP_PILOT_REPS verified runs; the fastest median is *chunks (0: not
 * run). Prints one line. */
static xs_status ovl_plan(up_bench *b, const up_cfg *c, up_row *row, int *chunks, int *ok)
{
    static const int cs[UP_OV_NCHUNKS] = UP_OV_CHUNKS;
    *chunks = 0;
    if (c->pp || !b->B.ovq)
        return XS_OK;
    double best = INFINITY;
    char line[512];
    int l = snprintf(line, sizeof line, "# overlapped seq %d heads %d causal %d peers %d "
                     "(head chunks: median of %d verified runs, us):", c->seq, c->heads,
                     c->causal, c->peers, UP_PILOT_REPS);
    for (int i = 0; i < UP_OV_NCHUNKS; i++) {
        const int C = cs[i];
        if (C > c->heads || c->heads % C)
            continue;
        double t[UP_PILOT_REPS], sent;
        for (int r = 0; r <= UP_PILOT_REPS; r++) {
            double us;
            XS_TRY(ovl_once(b, c, C, 0, &us, &sent, ok));
            if (r > 0)
                t[r - 1] = us;
        }
        const double med = xs_median(t, UP_PILOT_REPS);
        if (l > 0 && (size_t)l < sizeof line)
            l += snprintf(line + l, sizeof line - (size_t)l, " C=%d %.1f", C, med);
        if (med < best)
            best = med, *chunks = C;
    }
    row->ovl_chunks = *chunks;
    row->ovl_pilot_us = *chunks > 0 ? best : NAN;
    fprintf(b->rep->out, "%s; chosen C=%d\n", line, *chunks);
    return XS_OK;
}

/* Pilots (--pilots, one GPU; docs/UP.md "Pilots"): the family's o->pilots best members by
 * prediction, the model's choice always among them, each timed by the median of UP_PILOT_REPS
 * fused runs (every run verified: *ok); the fastest becomes the plan (*m), and its prediction
 * the reported one (*d_fu). The same choice rule as bench tp's planner: the model proposes,
 * short verified runs decide among its best. Prints one line. */
static xs_status run_pilots(up_bench *b, const up_cfg *c, const xs_up_family *f, up_member *m,
                            up_row *row, double *d_fu, int *ok)
{
    int idx[XS_UP_MAX_MEMBERS];
    const int np2 = xs_up_pilot_members(f, m->order, m->split, m->couriers, m->kv,
                                        b->o->pilots, idx);
    double med[XS_UP_MAX_MEMBERS];
    char line[1024], nm[32];
    int l = snprintf(line, sizeof line, "# pilots seq %d heads %d causal %d peers %d (median of "
                     "%d verified runs, us):", c->seq, c->heads, c->causal, c->peers,
                     UP_PILOT_REPS);
    for (int k = 0; k < np2; k++) {
        const int i = idx[k];
        const up_member pm = {f->ord[i], f->spl[i], f->cou[i], f->kv[i]};
        double t[UP_PILOT_REPS];
        for (int r = 0; r < UP_PILOT_REPS; r++) {
            double e, st;
            XS_TRY(fused_once(b, c, &pm, 0, &t[r], &e, &st, ok));
        }
        med[k] = xs_median(t, UP_PILOT_REPS);
        if (l > 0 && (size_t)l < sizeof line)
            l += snprintf(line + l, sizeof line - (size_t)l, " %s %.1f (pred %+.1f)",
                          xs_up_plan_name(pm.order, pm.split, pm.couriers, pm.kv, nm, sizeof nm),
                          med[k], f->dp[i] / 1e3);
    }
    const int bi = xs_up_pilot_pick(f, idx, med, np2, UP_PILOT_TIE);
    if (bi >= 0) {
        m->order = f->ord[bi], m->split = f->spl[bi], m->couriers = f->cou[bi];
        m->kv = f->kv[bi];
        row->courier_pace = m->couriers > 0 ? c->pace : 0.0;
        *d_fu = f->dp[bi];
    }
    fprintf(b->rep->out, "%s; chosen %s\n", line,
            xs_up_plan_name(m->order, m->split, m->couriers, m->kv, nm, sizeof nm));
    return XS_OK;
}

/* ---- one point ------------------------------------------------------------------------------ */

/* The rounds of one point (xs_bench_rounds callbacks). */
typedef struct {
    up_bench *b;
    up_cfg *c;
    up_member plan;                   /* the fused variant's member */
    int warmup, iters;
    int last_ok[UP_NV];               /* the data of v's latest run were right */
    int ov_chunks;                    /* the overlapped variant's head chunks (0: off) */
    int auto_chunks;                  /* V_AUTO's head chunks (0: off) */
    double s[UP_NV * XS_BENCH_MAX_ITERS];   /* per timed round j: s[v * iters + j], us: the
                                               timing rule's event time (the headline) */
    double sent[UP_NV * XS_BENCH_MAX_ITERS]; /* the same rounds' sender-visible time: the
                                                in-kernel span to the last store issued
                                                (serial: span + its copies' events;
                                                overlapped: events to the last kernel's end) */
    double evt[UP_NV * XS_BENCH_MAX_ITERS]; /* per timed round: fa, pb, fused: the event time;
                                               serial: its copies' time */
    double store[UP_NV];              /* pb, fused: store_us of the last timed round */
} up_rounds;

static xs_status up_run(void *x, int v, int round, double *us)
{
    up_rounds *p = (up_rounds *)x;
    up_bench *b = p->b;
    static const up_member pb = {XS_ATTN_ORDER_SNAKE, 0, 0, 0};
    double evt = NAN, store = NAN, sent = NAN, total = NAN;
    int ok = 1;
    switch (v) {
    case V_LS: XS_TRY(ls_once(b, p->c, &p->plan, round, &sent, &evt, &ok)); break;
    case V_FA: XS_TRY(fa_once(b, p->c, &p->c->base, round, &sent, &evt, &ok)); break;
    case V_SERIAL: XS_TRY(serial_once(b, p->c, round, &sent, &evt, &total, &ok)); break;
    case V_PB: XS_TRY(fused_once(b, p->c, &pb, round, &sent, &evt, &store, &ok)); break;
    case V_OVL: XS_TRY(ovl_once(b, p->c, p->ov_chunks, round, &total, &sent, &ok)); break;
    case V_AUTO: XS_TRY(ovl_once(b, p->c, p->auto_chunks, round, &total, &sent, &ok)); break;
    default: XS_TRY(fused_once(b, p->c, &p->plan, round, &sent, &evt, &store, &ok)); break;
    }
    /* the headline: the whole operation by events (kernels: their event time) */
    *us = v == V_SERIAL || v == V_OVL || v == V_AUTO ? total : evt;
    p->last_ok[v] = ok;
    const int j = round - p->warmup;
    if (j >= 0) {
        p->evt[v * p->iters + j] = evt;
        p->sent[v * p->iters + j] = sent;
        p->store[v] = store;
    }
    return XS_OK;
}

/* The last repetition's fa (pb = 0) or piggyback (pb = 1) stamps into b->tk; after
 * piggyback's, its per-tile stall and trace (up_tiles_point). */
static xs_status read_stamps(up_bench *b, const up_cfg *c, int pb)
{
    up_tiles *t = &b->tk;
    memcpy(t->cta[pb], b->cta, (size_t)c->grid * 3 * sizeof(uint64_t));
    XS_CU(cudaMemcpy(t->work[pb], b->B.tile_work_ns, (size_t)c->tiles * sizeof(uint64_t),
                     cudaMemcpyDeviceToHost));
    XS_CU(cudaMemcpy(t->end[pb], b->B.tile_ns, (size_t)c->tiles * sizeof(uint64_t),
                     cudaMemcpyDeviceToHost));
    t->have_fa = !pb || t->have_fa;
    if (!pb || !t->have_fa)
        return XS_OK;
    t->have_fa = 0;
    const xs_up_cfg mc = model_cfg(c);
    return up_tiles_point(t, b->prof, &mc, b->o->trace, b->e, c->pp != NULL);
}

static xs_status up_verify(void *x, int v, int round, int *ok)
{
    up_rounds *p = (up_rounds *)x;
    *ok = p->last_ok[v]; /* the run checked its own data */
    if (*ok && (v == V_FA || v == V_PB) && round == p->warmup + p->iters - 1)
        XS_TRY(read_stamps(p->b, p->c, v == V_PB));
    return XS_OK;
}

/* A point's inputs (fresh for every configuration; never zeros) and c->base. */
static xs_status config_setup(up_bench *b, up_cfg *c, up_row *row, uint32_t *seed)
{
    up_bufs *B = &b->B;
    cudaStream_t s = b->e->stream;
    const size_t nel = (size_t)c->seq * c->heads * XS_ATTN_D;
    row->seq = c->seq, row->heads = c->heads, row->causal = c->causal, row->peers = c->peers;
    row->head_dim = XS_ATTN_D;
    row->tiles = c->tiles = xs_attn_tiles(c->seq, c->heads);
    row->grid = c->grid = c->tiles < b->e->gi.sm_count ? c->tiles : b->e->gi.sm_count;
    c->sms = b->e->gi.sm_count;
    c->pace = b->o->courier_pace * b->prof->drain_bytes_per_ns;
    c->rpr = c->seq / c->peers;
    c->remote = xs_attn_remote_tiles(c->seq, c->heads, c->rpr);
    row->comm_mb = (double)(c->seq - c->rpr) * c->heads * XS_ATTN_ROW_BYTES / 1e6;

    *seed = b->e->c->b.seed ^ xs_mix32((uint32_t)c->seq * 131u + (uint32_t)c->heads * 7u +
                                       (uint32_t)c->causal * 3u + (uint32_t)c->peers * 17u);
    XS_TRY(xs_attn_fill_random(B->q, nel, *seed * 3u + 1u, -2.f, 2.f, s));
    XS_TRY(xs_attn_fill_random(B->k, nel, *seed * 3u + 2u, -2.f, 2.f, s));
    XS_TRY(xs_attn_fill_random(B->v, nel, *seed * 3u + 3u, -1.f, 1.f, s));
    XS_CU(cudaMemsetAsync(B->status, 0, sizeof(xs_devstatus), s));
    B->kv_kb = 0; /* another shape: the lists are rebuilt on first use */
    B->ov_c = 0;  /* and the overlapped pipeline's head-chunk layout */

    xs_attn_args *a = &c->base;
    memset(a, 0, sizeof *a);
    a->q = B->q, a->k = B->k, a->v = B->v, a->o = B->o;
    a->seq = c->seq, a->heads = c->heads, a->causal = c->causal;
    a->out = XS_ATTN_OUT_LOCAL;
    a->cta_ns = B->cta_ns, a->tile_ns = B->tile_ns, a->status = B->status;
    a->tile_work_ns = B->tile_work_ns;
    b->tk.row = row, b->tk.have_fa = 0;
    return XS_OK;
}

/* Before the rounds: warm-up, then one fa run whose per-tile stamps give the model its work;
 * fa against the fp32 reference; the plan (and pilots), agreed over the ranks. Fills *m with
 * the fused variant's member and *d_pb / *d_fu with the predictions; clears *ok on wrong data. */
static xs_status plan_point(up_bench *b, up_cfg *c, up_row *row, uint32_t seed, up_member *m,
                            double *d_pb, double *d_fu, int *ok)
{
    up_bufs *B = &b->B;
    const up_opts *o = b->o;
    double evt, fa_plan_us = 0;
    for (int i = 0; i <= b->e->c->b.warmup; i++)
        XS_TRY(fa_once(b, c, &c->base, i, &fa_plan_us, &evt, ok));
    row->auto_fa_us = evt;
    XS_TRY(check_devstatus(B, "attention"));
    /* couriers' waits: no wait can last longer than the kernel; 20x fa, at least 2 s */
    c->timeout_ns = (uint64_t)fmax(2e9, isfinite(fa_plan_us) ? 20e3 * fa_plan_us : 2e9);
    XS_CU(cudaMemcpy(b->tns, B->tile_ns, (size_t)c->tiles * sizeof(uint64_t),
                     cudaMemcpyDeviceToHost));
    const xs_up_cfg mc = model_cfg(c); /* fa walks the snake: tile times from its stamps */
    xs_up_tile_durations(&mc, b->cta, 3, b->tns, b->dur);
    /* fa against the fp32 reference on sampled rows: <= 1 passes */
    double ref_ratio = 0;
    XS_TRY(xs_attn_check_rows(B->q, B->k, B->v, B->o, c->seq, c->heads, c->causal, c->rpr,
                              o->samples, (uint64_t)seed * 7919u, UP_ATOL, UP_RTOL, B->rows,
                              B->ref, B->got, b->e->stream, &ref_ratio, &row->max_err));
    if (!(ref_ratio <= 1.0)) {
        *ok = 0;
        fprintf(stderr, "xstage: error: seq %d heads %d causal %d: output differs from the fp32 "
                "reference by %.3g (%.2fx the tolerance %.0e + %.0e|ref|)\n", c->seq, c->heads,
                c->causal, row->max_err, ref_ratio, UP_ATOL, UP_RTOL);
    }
    xs_up_family fam;
    /* KV splits only where pilots measure them (one GPU, rows they run in) */
    const int piloted = !c->pp && o->pilots > 0 && fa_plan_us <= o->pilot_max_us;
    plan(b->rep->out, o, b->prof, c, b->dur, b->tns, piloted, row, d_pb, d_fu, &fam);
    m->order = row->order, m->split = row->split, m->couriers = row->couriers, m->kv = row->kv;
    if (piloted && fam.n > 1)
        XS_TRY(run_pilots(b, c, &fam, m, row, d_fu, ok));
    /* every rank runs rank 0's plan (the others' fa stamps differ a little): the same runs in
     * the same order, so barriers and signal values agree */
    double v[4] = {(double)m->split, (double)m->order, (double)m->couriers, (double)m->kv};
    XS_TRY(xs_bench_agree_rank0(b->e, v, 4));
    m->split = (int)v[0], m->order = (int)v[1], m->couriers = (int)v[2], m->kv = (int)v[3];
    row->order = m->order, row->split = m->split, row->couriers = m->couriers, row->kv = m->kv;
    if (c->pp)
        row->courier_pace = row->couriers > 0 ? c->pace : 0.0;
    xs_up_plan_name(row->order, row->split, row->couriers, row->kv, row->plan, sizeof row->plan);
    return XS_OK;
}

/* The row's figures from the rounds' samples and the predictions. The headline stats are the
 * timing rule's event times; the planner's predictions and the split's cost terms stay on the
 * sender-visible spans they model. */
static void point_figures(up_rounds *p, int same, double d_pb, double d_fu, double drain,
                          up_row *row)
{
    const int n = p->iters;
    double *s = p->s, *sn = p->sent;
    const up_cfg *c = p->c;
    double *fa = s + V_FA * n, *se = s + V_SERIAL * n, *pb = s + V_PB * n, *fu = s + V_FUSED * n;
    double *fa_s = sn + V_FA * n, *pb_s = sn + V_PB * n, *fu_s = sn + V_FUSED * n;
    double *ls_s = sn + V_LS * n;
    const double *ev = p->evt;
    if (same) { /* the plan is piggyback: its runs are fused's */
        memcpy(fu, pb, (size_t)n * sizeof(double));
        memcpy(fu_s, pb_s, (size_t)n * sizeof(double));
    }
    const double *fu_evt = ev + (same ? V_PB : V_FUSED) * n;
    row->fa = xs_bench_stat_of(fa, n);
    row->serial = xs_bench_stat_of(se, n);
    row->pb = xs_bench_stat_of(pb, n);
    row->fused = xs_bench_stat_of(fu, n);
    row->ovl = xs_bench_stat_of(s + V_OVL * n, n);
    row->fa_sent_us = xs_median(fa_s, (size_t)n);
    row->serial_sent_us = xs_median(sn + V_SERIAL * n, (size_t)n);
    row->pb_sent_us = xs_median(pb_s, (size_t)n);
    row->fused_sent_us = xs_median(fu_s, (size_t)n);
    row->ovl_sent_us = p->ov_chunks > 0 ? xs_median(sn + V_OVL * n, (size_t)n) : NAN;
    row->store_us = p->store[same ? V_PB : V_FUSED];
    row->fa_evt_us = xs_median(ev + V_FA * n, (size_t)n);
    const double flops = 4.0 * c->seq * (double)c->seq * XS_ATTN_D * c->heads *
                         (c->causal ? 0.5 : 1);
    row->fa_tflops = flops / (row->fa_sent_us * 1e-6) / 1e12;
    row->copy_us = xs_median(ev + V_SERIAL * n, (size_t)n);
    row->comm_ratio = row->copy_us / row->fa_sent_us;
    row->pb_vis_us = xs_median(ev + V_PB * n, (size_t)n);
    row->fused_vis_us = xs_median(fu_evt, (size_t)n);
    row->pb_pred_us = row->fa_sent_us + d_pb / 1e3;
    row->pred_us = row->fa_sent_us + d_fu / 1e3;
    row->pred_err_pct = 100.0 * (row->pred_us - row->fused_sent_us) / row->fused_sent_us;
    /* hidden = (serial - fused) / (serial - fa) = 1 - (fused - fa) / (serial - fa), with both
     * differences taken per repetition (the runs of one repetition are back to back) and their
     * medians: a slow drift of the clock over the runs then cancels instead of landing in a
     * difference of a few percent of a long kernel */
    double d[XS_BENCH_MAX_ITERS], dse[XS_BENCH_MAX_ITERS];
    row->slice_us = row->link_us = NAN;
    if (row->split > 0) {
        for (int j = 0; j < n; j++)
            d[j] = ls_s[j] - fa_s[j];
        row->slice_us = xs_median(d, (size_t)n);
        for (int j = 0; j < n; j++)
            d[j] = fu_s[j] - ls_s[j];
        row->link_us = xs_median(d, (size_t)n);
    }
    row->hidden_lo = INFINITY, row->hidden_hi = -INFINITY;
    for (int j = 0; j < n; j++) {
        d[j] = fu[j] - fa[j], dse[j] = se[j] - fa[j];
        const double h = 100.0 * (1.0 - d[j] / dse[j]);
        row->hidden_lo = fmin(row->hidden_lo, h);
        row->hidden_hi = fmax(row->hidden_hi, h);
    }
    row->hidden_pct = 100.0 * (1.0 - xs_median(d, (size_t)n) / xs_median(dse, (size_t)n));
    row->speedup = row->serial.med / row->fused.med;
    /* the columns over every variant: the bound (fa is the fastest compute alone measured
     * here), the fastest complete operation, comm/compute */
    const double comm = row->comm_mb * 1e6 / drain / 1e3;
    row->bound_us = row->fa.med > comm ? row->fa.med : comm;
    row->comm_over_compute = comm / row->fa.med;
    const struct { const char *name; double us; } v[] = {
        {"serial", row->serial.med}, {"pb", row->pb.med}, {"fused", row->fused.med},
        {"overlapped", p->ov_chunks > 0 ? row->ovl.med : NAN}};
    row->best_other_us = NAN;
    snprintf(row->best_other, sizeof row->best_other, "-");
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (isfinite(v[i].us) && !(v[i].us >= row->best_other_us)) {
            row->best_other_us = v[i].us;
            snprintf(row->best_other, sizeof row->best_other, "%s", v[i].name);
        }
    /* the overlap model from fa_us and R: at the measured choice, and its own choice */
    static const int cs[UP_OV_NCHUNKS] = UP_OV_CHUNKS;
    const xs_ov_terms terms = xs_ov_terms_default(drain);
    const int tph = xs_attn_tiles(c->seq, 1);
    double pbest = INFINITY, ns;
    row->ovl_pred_us = NAN;
    row->ovl_model_chunks = 0;
    for (int i = 0; i < UP_OV_NCHUNKS && isfinite(row->fa.med); i++) {
        if (cs[i] > c->heads || c->heads % cs[i] ||
            xs_ov_up_predict(row->fa.med * 1e3, c->heads, tph, c->sms, c->peers, c->causal,
                             row->comm_mb * 1e6, &terms, cs[i], &ns) != XS_OK)
            continue;
        if (ns < pbest)
            pbest = ns, row->ovl_model_chunks = cs[i];
        if (cs[i] == p->ov_chunks)
            row->ovl_pred_us = ns / 1e3;
    }
    /* auto's time: its own runs, or the timed median of the variant with its parameters */
    row->aut = xs_bench_stat_of(s + V_AUTO * n, n);
    if (row->auto_own)
        row->auto_us = row->aut.med;
    else if (row->auto_chunks > 0)
        row->auto_us = row->ovl.med;
    else if (!strcmp(row->auto_name, "serial"))
        row->auto_us = row->serial.med;
    else if (!strcmp(row->auto_name, "pb"))
        row->auto_us = row->pb.med;
    else if (!strncmp(row->auto_name, "fused", 5))
        row->auto_us = row->fused.med;
    /* tuned: the faster pilot by the timing rule, the plan's or the overlapped pipeline's */
    if (isfinite(row->ovl_pilot_us) && !(row->ovl_pilot_us >= row->fused_pilot_us)) {
        row->tuned_us = row->ovl.med;
        snprintf(row->tuned_name, sizeof row->tuned_name, "overlapped C=%d", p->ov_chunks);
    } else if (isfinite(row->fused_pilot_us)) {
        row->tuned_us = row->fused.med;
        snprintf(row->tuned_name, sizeof row->tuned_name, "fused %.16s", row->plan);
    }
}

/* auto, before the rounds, from the model alone and by completion times (the timing rule), like
 * with like: serial = fa + the crossing bytes at R + one copy call per remote rank; pb and the
 * planned fused kernel = fa + the planner's cost over fa (d_pb, d_fu: it models the
 * sender-visible span, so fa's event time, not its span, is the base: the kernel's exit and
 * its last stores' visibility are in fa's event time as in theirs); overlapped = the overlap
 * model at its own head-chunk count. fa is the event time measured at planning. Then tuned's
 * pilot of the plan: UP_PILOT_REPS verified runs by the timing rule (the overlapped pilots are
 * ovl_plan's; one GPU only). Prints nothing; up_detail prints the line under the row. */
static xs_status up_auto(up_bench *b, up_cfg *c, up_row *row, up_rounds *p, double d_pb,
                         double d_fu, int *ok)
{
    const double fa = row->auto_fa_us, drain = b->prof->drain_bytes_per_ns;
    const double comm = row->comm_mb * 1e6 / drain / 1e3;
    static const int cs[UP_OV_NCHUNKS] = UP_OV_CHUNKS;
    const xs_ov_terms terms = xs_ov_terms_default(drain);
    double ov = INFINITY, ns;
    int oc = 0;
    for (int i = 0; i < UP_OV_NCHUNKS && p->ov_chunks > 0 && isfinite(fa); i++)
        if (cs[i] <= c->heads && c->heads % cs[i] == 0 &&
            xs_ov_up_predict(fa * 1e3, c->heads, xs_attn_tiles(c->seq, 1), c->sms, c->peers,
                             c->causal, row->comm_mb * 1e6, &terms, cs[i], &ns) == XS_OK &&
            ns < ov)
            ov = ns, oc = cs[i];
    char fu[24], ovn[24];
    snprintf(fu, sizeof fu, "fused %.16s", row->plan);
    snprintf(ovn, sizeof ovn, "overlapped C=%d", oc);
    const xs_auto_cand k[4] = {
        {"serial", fa + comm + (c->peers - 1) * XS_OV_COPY_CALL_NS / 1e3},
        {"pb", fa + d_pb / 1e3},
        {fu, fa + d_fu / 1e3},
        {ovn, oc > 0 ? ov / 1e3 : NAN}};
    const int i = xs_auto_pick(k, 4, row->auto_why, sizeof row->auto_why);
    if (i >= 0) {
        snprintf(row->auto_name, sizeof row->auto_name, "%s", k[i].name);
        row->auto_pred_us = k[i].pred_us;
        row->auto_chunks = i == 3 ? oc : 0;
        row->auto_own = i == 3 && oc != p->ov_chunks;
        p->auto_chunks = row->auto_own ? oc : 0;
    }
    /* tuned: the plan's pilot by completion, against the overlapped pipeline's best pilot
     * (one GPU only, as the planner's pilots) */
    if (c->pp)
        return XS_OK;
    double t[UP_PILOT_REPS];
    for (int r = 0; r <= UP_PILOT_REPS; r++) {
        double sent, evt, st;
        XS_TRY(fused_once(b, c, &p->plan, 0, &sent, &evt, &st, ok));
        if (r > 0)
            t[r - 1] = evt;
    }
    row->fused_pilot_us = xs_median(t, UP_PILOT_REPS);
    return XS_OK;
}

/* One configuration: plan, the overlapped pipeline's chunk count, then the rounds of ls, fa,
 * serial, pb, fused and overlapped, then the row. */
static xs_status run_config(up_bench *b, up_cfg *c, up_row *row)
{
    memset(row, 0, sizeof *row);
    row->auto_fa_us = row->ovl_pilot_us = row->fused_pilot_us = row->auto_pred_us = NAN;
    row->auto_us = row->tuned_us = NAN;
    snprintf(row->auto_name, sizeof row->auto_name, "-");
    snprintf(row->tuned_name, sizeof row->tuned_name, "-");
    uint32_t seed;
    XS_TRY(config_setup(b, c, row, &seed));
    int ok = 1;
    double d_pb, d_fu;
    up_rounds *p = (up_rounds *)calloc(1, sizeof *p);
    if (!p)
        return xs_seterr(XS_ENOMEM, "out of host memory for seq %d heads %d", c->seq, c->heads);
    p->b = b, p->c = c;
    xs_status st = plan_point(b, c, row, seed, &p->plan, &d_pb, &d_fu, &ok);
    const int same = p->plan.split == 0 && p->plan.order == XS_ATTN_ORDER_SNAKE &&
                     p->plan.couriers == 0 && p->plan.kv == 0;
    if (st == XS_OK)
        st = ovl_plan(b, c, row, &p->ov_chunks, &ok);
    if (st == XS_OK)
        st = up_auto(b, c, row, p, d_pb, d_fu, &ok);
    xs_bench_variant var[UP_NV] = {{up_var_name[V_LS], p->plan.split > 0},
                                   {up_var_name[V_FA], 1},
                                   {up_var_name[V_SERIAL], 1},
                                   {up_var_name[V_PB], 1},
                                   {up_var_name[V_FUSED], !same},
                                   {up_var_name[V_OVL], p->ov_chunks > 0},
                                   {up_var_name[V_AUTO], p->auto_chunks > 0}};
    /* fixed order: fa's O is the reference of every window check (ls before fa) */
    xs_bench_rounds r = xs_bench_rounds_default(b->e, up_run, up_verify, p);
    r.rotate = 0;
    p->warmup = r.warmup, p->iters = r.iters;
    int vok[UP_NV];
    if (st == XS_OK)
        st = xs_bench_rounds_run(&r, var, UP_NV, p->s, vok);
    if (st == XS_OK)
        st = check_devstatus(&b->B, "attention");
    if (st != XS_OK) {
        free(p);
        return st;
    }
    for (int v = 0; v < UP_NV; v++)
        ok = ok && vok[v];
    point_figures(p, same, d_pb, d_fu, b->prof->drain_bytes_per_ns, row);
    free(p);
    /* each rank verified what its window received: the row is verified when all did; the
     * worst error and the slowest rank's medians */
    const double med[4] = {row->fa.med, row->serial.med, row->pb.med, row->fused.med};
    XS_TRY(xs_bench_agree_verdict(b->e, &ok, &row->max_err, med, row->rank_max_us, 4));
    row->verified = ok;
    row->done = 1;
    return XS_OK;
}

/* ---- the sweep ------------------------------------------------------------------------------ */

/* The windows of P peers (closing those of another P): one region per destination, one flag
 * per CTA of the persistent grid; -g: a region and a slot of flags per source. */
static xs_status open_windows(up_bench *b, int P)
{
    xs_bench_env *e = b->e;
    if (b->ws) {
        e->ws = NULL;
        xs_win_close(b->ws);
        b->ws = NULL, b->pp = NULL, b->win_peers = 0;
    }
    xs_win_opts wo;
    memset(&wo, 0, sizeof wo);
    wo.target = e->real ? XS_TARGET_PEER : XS_TARGET_VIRTUAL;
    wo.virtual_peers = P;
    const size_t region = (size_t)(b->max_seq / P) * b->max_heads * XS_ATTN_ROW_BYTES;
    wo.bytes = e->real ? (size_t)P * region : region;
    wo.nflags = e->real ? P * e->gi.sm_count : e->gi.sm_count;
    wo.device = e->c->b.device;
    XS_TRY(xs_win_open(&wo, &b->ws));
    b->tab = xs_win_table(b->ws);
    if (b->tab->nranks != P || (e->real && b->tab->rank != e->me))
        return xs_seterr(XS_EINVAL, "asked for %d %s peers, the window table has %d ranks", P,
                         e->real ? "real" : "virtual", b->tab->nranks);
    if (e->real) {
        up_peer *pp = &b->peer;
        memset(pp, 0, sizeof *pp);
        pp->ws = b->ws, pp->coll = e->coll;
        pp->me = b->tab->rank, pp->n = b->tab->nranks;
        xs_up_peer_tables(b->tab, region, e->gi.sm_count, &pp->send, &pp->own);
        b->pp = pp;
        e->ws = b->ws; /* the harness's barriers hold the ranks in lockstep */
    }
    b->win_peers = P;
    return XS_OK;
}

/* A row of point i with no measurement (xs_bench_row_blank), its identity and status. */
static void up_blank(const up_bench *b, int i, up_row *row, const char *status)
{
    const up_point_def *d = &b->pts[i];
    memset(row, 0, sizeof *row);
    xs_bench_row_blank(b->t, row);
    row->seq = d->seq, row->heads = d->heads, row->causal = d->causal, row->peers = d->peers;
    row->head_dim = XS_ATTN_D;
    row->grid_row = d->index;
    snprintf(row->plan, sizeof row->plan, "-");
    snprintf(row->best_other, sizeof row->best_other, "-");
    snprintf(row->auto_name, sizeof row->auto_name, "-");
    snprintf(row->tuned_name, sizeof row->tuned_name, "-");
    snprintf(row->status, sizeof row->status, "%s", status);
}

static xs_status up_point(void *ctx, int i, void *rowp, int *verified)
{
    up_bench *b = (up_bench *)ctx;
    const up_point_def *d = &b->pts[i];
    up_row *row = (up_row *)rowp;
    if (d->peers != b->win_peers)
        XS_TRY(open_windows(b, d->peers));
    up_cfg c;
    memset(&c, 0, sizeof c);
    c.seq = d->seq, c.heads = d->heads, c.causal = d->causal, c.peers = d->peers;
    c.pp = b->pp;
    c.tab = b->pp ? &b->pp->send : b->tab;
    c.own = b->pp ? &b->pp->own : b->tab;
    const xs_status st = run_config(b, &c, row);
    row->grid_row = d->index;
    if (b->o->grid && st == XS_ECUDA && strstr(xs_errmsg(), "out of memory")) {
        /* cudaErrorMemoryAllocation is not sticky: the row says so and the sweep goes on */
        char why[sizeof row->status];
        snprintf(why, sizeof why, "skipped: out of device memory: %s", xs_errmsg());
        cudaGetLastError();
        up_blank(b, i, row, why);
        *verified = XS_BENCH_CANNOT_RUN;
        return XS_OK;
    }
    XS_TRY(st);
    snprintf(row->status, sizeof row->status, "%s", row->verified ? "ok" : "failed: wrong data");
    *verified = row->verified;
    return XS_OK;
}

/* xs_bench_sweep.unrun (--grid declared): point i failed or was not started. */
static void up_unrun(void *ctx, int i, void *rowp, const char *status)
{
    up_blank((const up_bench *)ctx, i, (up_row *)rowp, status);
}

static void up_label(void *ctx, int i, char *buf, size_t n)
{
    const up_bench *b = (const up_bench *)ctx;
    const up_point_def *d = &b->pts[i];
    char row[24] = "";
    if (b->o->grid)
        snprintf(row, sizeof row, "grid row %d: ", d->index);
    snprintf(buf, n, "%sseq %d heads %d causal %d peers %d", row, d->seq, d->heads, d->causal,
             d->peers);
}

static void up_detail(void *ctx, int i, const void *rowp, xs_bench_report *r)
{
    const up_row *row = (const up_row *)rowp;
    if (row->auto_why[0])
        xs_bench_report_note(r, "  auto: %s; timed %.1f us%s; tuned (pilots by completion: "
                             "fused %.1f, overlapped %.1f): %s %.1f us", row->auto_why,
                             row->auto_us, row->auto_own ? " (its own runs)" : "",
                             row->fused_pilot_us, row->ovl_pilot_us, row->tuned_name,
                             row->tuned_us);
    if (((const up_bench *)ctx)->e->real)
        xs_bench_report_note(r, "  ranks: slowest rank's medians, us: fa %.1f, serial %.1f, pb "
                             "%.1f, fused %.1f", row->rank_max_us[0], row->rank_max_us[1],
                             row->rank_max_us[2], row->rank_max_us[3]);
}

/* The points in sweep order: peers, then heads, then seq, then causal. */
static int make_points(const up_opts *o, up_point_def *pts)
{
    int n = 0;
    if (o->grid) {
        /* the declared rows lo..hi-1, grouped by peer count (one window set per group) */
        for (int pi = 0; pi < XS_GRID_NPEERS; pi++)
            for (int i = o->rows_lo; i < o->rows_hi; i++) {
                xs_grid_up_row g;
                xs_grid_up_row_at(i, &g);
                if (g.peers != xs_grid_peers[pi])
                    continue;
                up_point_def *d = &pts[n++];
                d->seq = g.seq, d->heads = g.heads, d->causal = g.causal, d->peers = g.peers;
                d->index = i;
            }
        return n;
    }
    for (int pi = 0; pi < o->npeers; pi++)
        for (int hi = 0; hi < o->nheads; hi++)
            for (int si = 0; si < o->nseq; si++)
                for (int cz = o->causal_lo; cz <= o->causal_hi; cz++) {
                    up_point_def *d = &pts[n++];
                    d->seq = o->seq[si], d->heads = o->heads[hi], d->causal = cz;
                    d->peers = o->peers[pi];
                }
    return n;
}

/* ---- buffers and header --------------------------------------------------------------------- */

/* Device buffers sized for the largest configuration (max_seq x max_heads), and the host
 * scratch of a point. */
static xs_status bufs_open(up_bench *b)
{
    up_bufs *B = &b->B;
    const up_opts *o = b->o;
    const int sms = b->e->gi.sm_count;
    cudaStream_t s = b->e->stream;
    const size_t nbytes = (size_t)b->max_seq * b->max_heads * XS_ATTN_ROW_BYTES;
    const int max_tiles = xs_attn_tiles(b->max_seq, b->max_heads);
    XS_CU(cudaEventCreate(&B->mid));
    XS_CU(cudaMalloc(&B->q, nbytes));
    XS_CU(cudaMalloc(&B->k, nbytes));
    XS_CU(cudaMalloc(&B->v, nbytes));
    XS_CU(cudaMalloc(&B->o, nbytes));
    XS_CU(cudaMalloc((void **)&B->cta_ns, (size_t)sms * 3 * sizeof(uint64_t)));
    XS_CU(cudaMalloc((void **)&B->tile_ns, (size_t)max_tiles * sizeof(uint64_t)));
    XS_CU(cudaMalloc((void **)&B->tile_work_ns, (size_t)max_tiles * sizeof(uint64_t)));
    XS_TRY(up_tiles_open(&b->tk, sms, max_tiles));
    if (o->couriers != 0) {
        /* couriers: a staging buffer the size of O, and their flags (zeros: never a signal) */
        XS_CU(cudaMalloc(&B->stage, nbytes));
        XS_CU(cudaMemsetAsync(B->stage, 0, nbytes, s));
        const size_t nsync = ((size_t)max_tiles + sms) * sizeof(uint64_t);
        XS_CU(cudaMalloc((void **)&B->sync, nsync));
        XS_CU(cudaMemsetAsync(B->sync, 0, nsync, s));
    }
    XS_CU(cudaMalloc((void **)&B->status, sizeof(xs_devstatus)));
    XS_CU(cudaMalloc((void **)&B->bad, sizeof(unsigned long long)));
    XS_CU(cudaMalloc((void **)&B->rows, (size_t)2 * o->samples * sizeof(int)));
    XS_CU(cudaMalloc((void **)&B->ref, (size_t)o->samples * XS_ATTN_D * sizeof(float)));
    XS_CU(cudaMalloc((void **)&B->got, (size_t)o->samples * XS_ATTN_D * sizeof(float)));
    if (!b->e->real) { /* overlapped: virtual peers only */
        XS_CU(cudaMalloc(&B->ovq, nbytes));
        XS_CU(cudaMalloc(&B->ovk, nbytes));
        XS_CU(cudaMalloc(&B->ovv, nbytes));
        XS_CU(cudaMalloc(&B->ovo, nbytes));
        XS_CU(cudaStreamCreateWithFlags(&B->ov_side, cudaStreamNonBlocking));
        for (int i = 0; i < UP_OV_MAX; i++)
            XS_CU(cudaEventCreateWithFlags(&B->ov_ev[i], cudaEventDisableTiming));
        XS_CU(cudaEventCreateWithFlags(&B->ov_end, cudaEventDisableTiming));
        XS_CU(cudaEventCreate(&B->ov_kend));
    }
    /* the output buffer is compared against windows: never leave it uninitialised */
    XS_CU(cudaMemsetAsync(B->o, 0, nbytes, s));
    b->cta = (uint64_t *)malloc((size_t)sms * 3 * sizeof(uint64_t));
    b->tns = (uint64_t *)malloc((size_t)max_tiles * sizeof(uint64_t));
    b->dur = (double *)malloc((size_t)max_tiles * sizeof(double));
    if (!b->cta || !b->tns || !b->dur)
        return xs_seterr(XS_ENOMEM, "bench up: out of host memory for %d tiles", max_tiles);
    return XS_OK;
}

static void bufs_close(up_bench *b)
{
    up_bufs *B = &b->B;
    cudaFree(B->q), cudaFree(B->k), cudaFree(B->v), cudaFree(B->o);
    cudaFree(B->cta_ns), cudaFree(B->tile_ns), cudaFree(B->status), cudaFree(B->bad);
    cudaFree(B->tile_work_ns);
    up_tiles_close(&b->tk);
    cudaFree(B->stage), cudaFree(B->sync);
    xs_attn_kvbuf_free(&B->kv);
    cudaFree(B->rows), cudaFree(B->ref), cudaFree(B->got);
    if (B->mid)
        cudaEventDestroy(B->mid);
    cudaFree(B->ovq), cudaFree(B->ovk), cudaFree(B->ovv), cudaFree(B->ovo);
    if (B->ov_side) {
        cudaStreamSynchronize(B->ov_side);
        cudaStreamDestroy(B->ov_side);
        for (int i = 0; i < UP_OV_MAX; i++)
            cudaEventDestroy(B->ov_ev[i]);
        cudaEventDestroy(B->ov_end);
        cudaEventDestroy(B->ov_kend);
    }
    free(b->cta), free(b->tns), free(b->dur);
    memset(B, 0, sizeof *B);
    b->cta = b->tns = NULL, b->dur = NULL;
}

/* ---- entry ---------------------------------------------------------------------------------- */

/* Every rank's GPU has the same SM count (the flag slots and the checks assume one grid): 0, or
 * 1 after the one error line. */
static int up_check_gpus(const xs_bench_env *e, const up_opts *o)
{
    if (o->couriers >= e->gi.sm_count)
        return xs_cli_failf("--couriers %d: leaves no SM to compute (%d SMs)", o->couriers,
                            e->gi.sm_count);
    double sm[2] = {(double)e->gi.sm_count, -(double)e->gi.sm_count};
    if (xs_bench_agree_max(e, sm, 2) != XS_OK)
        return xs_cli_fail();
    if (sm[0] != -sm[1])
        return xs_cli_failf("bench up: the ranks' GPUs have %g to %g SMs; -g needs one kind of "
                            "GPU (one persistent grid)", -sm[1], sm[0]);
    return 0;
}

/* The sweep over the points, its report and the summary; returns the exit status. */
static int up_sweep(up_bench *b, xs_bench_report *rep, xs_bench_tally *tally)
{
    const int np = b->npoints;
    up_row *rows = (up_row *)calloc((size_t)np, sizeof(up_row));
    if (!rows)
        return xs_cli_failf("out of host memory for %d rows", np);
    xs_bench_sweep sw;
    memset(&sw, 0, sizeof sw);
    sw.npoints = np, sw.rows = rows, sw.row_bytes = sizeof rows[0];
    sw.point = up_point, sw.label = up_label, sw.detail = up_detail, sw.ctx = b;
    sw.unrun = b->o->grid ? up_unrun : NULL;
    xs_bench_sweep_hooks(&sw, b->e);
    xs_bench_report_begin(rep);
    xs_bench_sweep_run(&sw, rep, tally);
    if (b->ws) {
        b->e->ws = NULL;
        xs_win_close(b->ws);
        b->ws = NULL;
    }
    xs_bench_report_end(rep);
    if (b->o->grid) {
        int nok = 0, nskip = 0, nfail = 0, nlate = 0;
        for (int i = 0; i < np; i++) {
            nok += !strcmp(rows[i].status, "ok");
            nskip += !strncmp(rows[i].status, "skipped:", 8);
            nfail += !strncmp(rows[i].status, "failed:", 7);
            nlate += !strncmp(rows[i].status, "not run:", 8);
        }
        xs_bench_report_note(rep, "declared grid: rows %d..%d of %d: %d ok, %d skipped (cannot "
                             "run here), %d failed, %d not run (--max-time), %d without a row",
                             b->o->rows_lo, b->o->rows_hi - 1, XS_GRID_UP_ROWS, nok, nskip,
                             nfail, nlate, np - nok - nskip - nfail - nlate);
    }
    if (!tally->interrupted) { /* stopped early: no figures */
        int n = 0;
        for (int i = 0; i < np; i++)
            if (rows[i].done)
                rows[n++] = rows[i];
        up_summary(rep, rows, n);
    }
    free(rows);
    return xs_bench_sweep_close(rep, tally, np);
}

extern "C" int xs_bench_up(int argc, char **argv)
{
    up_opts o;
    xs_upb_defaults(&o);
    const xs_bench_spec spec = {"bench up", xs_upb_about, "s:H:p:c:", xs_upb_long, xs_upb_help, xs_upb_opt, &o,
                                5, 1, 3, XS_BENCH_MAX_ITERS, 12345, UP_TIMEOUT_S, 0};
    xs_bench_common c;
    int rc = xs_bench_parse(&spec, argc, argv, &c);
    if (rc)
        return rc < 0 ? 0 : rc;
    if ((rc = xs_upb_check_opts(&o, &c)))
        return rc;
    xs_profile prof;
    if (xs_profile_args_resolve(&c.b.pa, &prof) != XS_OK)
        return xs_cli_fail();
    /* -g N, N > 1: one rank per GPU; this process either launched them and reports their
     * status, or is one of them */
    xs_bench_env e;
    if ((rc = xs_bench_start(&e, &c, c.b.gpus_set && c.b.gpus > 1)) >= 0)
        return rc;
    up_bench b;
    memset(&b, 0, sizeof b);
    b.o = &o, b.prof = &prof, b.e = &e;
    for (int i = 0; i < o.nseq; i++)
        b.max_seq = o.seq[i] > b.max_seq ? o.seq[i] : b.max_seq;
    for (int i = 0; i < o.nheads; i++)
        b.max_heads = o.heads[i] > b.max_heads ? o.heads[i] : b.max_heads;
    const int npts = o.nseq * o.nheads * o.npeers * (o.causal_hi - o.causal_lo + 1);
    xs_bench_table t;
    xs_bench_report rep;
    /* --grid declared: up_cols, then grid_row and status */
    static xs_bench_col cols[XS_BENCH_MAX_COLS];
    int ncols = up_ncols;
    memcpy(cols, up_cols, sizeof(xs_bench_col) * (size_t)up_ncols);
    if (o.grid) {
        memcpy(cols + ncols, up_grid_cols, sizeof up_grid_cols);
        ncols += 2;
    }
    b.t = &t;
    b.pts = (up_point_def *)calloc((size_t)npts, sizeof *b.pts);
    if ((rc = up_check_gpus(&e, &o)) == 0) {
        if (!b.pts)
            rc = xs_cli_failf("out of host memory for %d points", npts);
        else if (bufs_open(&b) != XS_OK || xs_bench_table_init(&t, cols, ncols) != XS_OK ||
                 xs_bench_report_open(&rep, "bench up", &t, stdout, c.csv, c.json) != XS_OK)
            rc = xs_cli_fail();
    }
    xs_bench_tally tally;
    memset(&tally, 0, sizeof tally);
    if (rc == 0) {
        b.rep = &rep;
        xs_bench_report_header(&rep, &e, argc, argv);
        up_header_notes(&rep, &e, &o, &prof, c.b.pa.file);
        b.npoints = make_points(&o, b.pts);
        rc = up_sweep(&b, &rep, &tally);
    }
    bufs_close(&b);
    free(b.pts);
    xs_bench_stop(&e, !b.rep || tally.stopped || tally.interrupted);
    return rc;
}
