// SPDX-License-Identifier: Apache-2.0
/*
 * tools/bench/tp.cu - `xstage bench tp`: fused GEMM + reduce-scatter, fused all-gather + GEMM
 * and the fused TP MLP block, against the unfused sequence, on one GPU with virtual peers, or
 * (-g N) on N GPUs, one rank per GPU, with real peers (docs/MULTIGPU.md). A variant table and a
 * point function over the shared bench harness (tools/bench/harness.h): the harness owns the
 * common options, the launch, the rounds, the statistics, the report and the verdict.
 *
 * This rank (0) of P: its window in HBM, ranks 1..P-1 windows in pinned host memory reached
 * over PCIe (the X-Stage under test). Per configuration, same inputs, run side by side:
 *   local    the fused kernel against P windows in HBM (the "GEMM alone" of bound_us)
 *   naive    the fused kernel in natural order: pushes first, this rank's rows first, remote
 *            tiles stored as soon as done (in bursts), reductions last
 *   shaped   the fused kernel in a planned order (cuda/tp.h xs_tp_pace): remote bytes paced at
 *            the drain rate, spread through the compute, this rank's own tiles as the tail
 *   unfused  cuBLAS GEMM(s) (+ SwiGLU kernel), then the collective: cudaMemcpyAsync of each
 *            peer's rows into its window, and the owner-side reduction
 *   overlapped  the unfused steps as a pipeline (virtual peers): the GEMM rows in chunks, each
 *            finished chunk copied to its owner on a side stream while the next chunk computes
 *            (xs_tp_run_overlapped), the chunk count chosen by verified pilot runs
 * The planner builds the naive and several shaped orders as burst-gap schedules (producers =
 * CTAs, one row per step of grid tasks, bytes = the step's remote bytes, gaps = the local run's
 * measured task times) and predicts each with the event model (xs_simulate) on the profile; its
 * four most promising candidates (and the naive order) get one verified pilot run each and the
 * fastest becomes `shaped` (the model's own choice is reported next to it).
 * Times are CUDA events around each launch or sequence (completion: includes the drain of the
 * remote stores), medians of -n rounds after -w warm-up, L2 flushed before each, the variants
 * interleaved round by round (xs_bench_rounds_run, rotated). Every run is verified: the first
 * local run against an fp32 cuBLAS reference (relative Frobenius <= 1e-2, every row <= 2e-2),
 * every later run bitwise against it, every byte that crossed PCIe read back by the CPU at its
 * destination together with its signal. docs/TP.md defines the columns.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp/tp.h"
#include "xstage_overlap.h"
#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_cuda.h"
#include "xstage_grid.h"
#include "xstage_launch.h"
#include "xstage_pattern.h"
#include "xstage_win.h"

#include "harness.h"
#include "tp_bench.h"

/* ---- options --------------------------------------------------------------------------------- */

enum { OPT_MODEL = XS_OPT_FIRST_FREE, OPT_N, OPT_K, OPT_ENGINE, OPT_COURIERS, OPT_GRID,
       OPT_ROWS };

static const struct option tp_long[] = {
    {"op", required_argument, 0, 'o'},        {"model", required_argument, 0, OPT_MODEL},
    {"m", required_argument, 0, 'm'},         {"n", required_argument, 0, OPT_N},
    {"k", required_argument, 0, OPT_K},       {"peers", required_argument, 0, 'p'},
    {"engine", required_argument, 0, OPT_ENGINE},
    {"couriers", required_argument, 0, OPT_COURIERS},
    {"grid", required_argument, 0, OPT_GRID}, {"rows", required_argument, 0, OPT_ROWS},
    {0, 0, 0, 0}};

static const char tp_about[] =
    "Tensor parallelism on one GPU with virtual peers (rank 0 in HBM, ranks 1..P-1 in\n"
    "pinned host memory over PCIe): fused GEMM + reduce-scatter (gemm_rs), all-gather +\n"
    "GEMM (ag_gemm) and the TP MLP block (mlp), naive and shaped, against cuBLAS + the\n"
    "collective; every byte that crosses the link is verified at its destination.\n"
    "With -g N (N > 1) the peers are the ranks (P = N, real windows; docs/MULTIGPU.md);\n"
    "-g 1 is the one-GPU bench (virtual peers). --quick: one token count, fewer peers.\n";

/* The workload's usage lines (their defaults are compile-time constants). */
static const char *tp_help(void)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "  -o, --op LIST         gemm_rs,ag_gemm,mlp or all [all]\n"
             "      --model LIST      llama3-8b,llama3-70b,llama3-405b or all [all]; gemm_rs is the\n"
             "                        down projection (n=H, k=I), ag_gemm the gate+up projection\n"
             "                        (n=2I, k=H), mlp the block (n=H, k=I)\n"
             "  -m, --m LIST          tokens (K suffix ok) [per model: 8b 8K,16K; 70b 4K,8K;\n"
             "                        405b 2K,4K]\n"
             "      --n LIST, --k LIST  explicit full layer widths instead of --model (all pairs)\n"
             "  -p, --peers LIST      ranks, this one included [per operation and model: the\n"
             "                        two of 2,4,8,16 whose compute / PCIe time is nearest 1]\n"
             "      --engine mma|sm90 the fused kernel's tile engine: mma.sync (cuda/gemm.cuh) or\n"
             "                        wgmma/TMA (cuda/gemm_sm90.cuh, H100/H200; stored orders\n"
             "                        only, no streamed stores) [sm90 on compute capability\n"
             "                        9.0, else mma]\n"
             "      --couriers LIST   sm90 only: courier counts (1..16, at most %d) the planner\n"
             "                        weighs against the default kernel (shaped = the fastest\n"
             "                        pilot of the family), all timed in the same rounds; 0\n"
             "                        alone: the default kernel only. The last N CTAs\n"
             "                        of the grid push the all-gather chunks, then copy the\n"
             "                        remote tiles that the other CTAs stage in HBM (docs/TP.md\n"
             "                        \"Couriers (sm90)\"); columns\n"
             "                        naive_cN_us, shaped_cN_us, ... [4,6,8 with sm90, else none]\n"
             "                        The couriers together issue at most %.2f x the profile's\n"
             "                        R; the pilot takes the front order with its first remote\n"
             "                        tiles split along k in 2, 4 and 8 parts (gemm_rs, virtual\n"
             "                        peers); every pilot is the median of %d verified runs\n"
             "      --grid WORD       declared: the declared grid of issue 33, op x model x m\n"
             "                        (1024,4096,16384) x peers (2,4,8), %d rows, every one\n"
             "                        reported (columns grid_row, status: ok, skipped: <why>\n"
             "                        when it cannot run here, failed: <error>, not run:\n"
             "                        --max-time spent); default: the sweep above [default]\n"
             "      --rows A:B        with --grid declared: rows A..B-1 of it only (A: or :B\n"
             "                        open-ended), to split the grid over runs [all]\n",
             TPB_MAX_COUR, TPB_COURIER_PACE, TPB_PILOT_REPS, XS_GRID_TP_ROWS);
    return buf;
}

/* --op LIST: names or all. */
static xs_status tp_opt_ops(tpb_opts *o, const char *arg)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    o->nops = 0;
    for (char *sv = NULL, *tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
        if (!strcmp(tok, "all")) {
            for (int i = 0; i < XS_TP_NOPS; i++)
                o->ops[i] = i;
            o->nops = XS_TP_NOPS;
            continue;
        }
        xs_tp_op op;
        XS_TRY(xs_tp_op_parse(tok, &op));
        if (o->nops >= XS_TP_NOPS)
            return xs_seterr(XS_EINVAL, "--op: at most %d operations", XS_TP_NOPS);
        o->ops[o->nops++] = (int)op;
    }
    if (!o->nops)
        return xs_seterr(XS_EINVAL, "--op: empty list");
    o->ops_set = 1;
    return XS_OK;
}

/* --model LIST: llama3-8b (or 8b), ... or all. */
static xs_status tp_opt_models(tpb_opts *o, const char *arg)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    o->nmodels = 0;
    for (char *sv = NULL, *tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
        int found = -1;
        for (int i = 0; i < XS_TP_NMODELS; i++)
            if (!strcmp(tok, xs_tp_model_at(i)->name) || !strcmp(tok, xs_tp_model_at(i)->name + 7))
                found = i;
        if (!strcmp(tok, "all")) {
            for (int i = 0; i < XS_TP_NMODELS; i++)
                o->models[i] = i;
            o->nmodels = XS_TP_NMODELS;
            continue;
        }
        if (found < 0)
            return xs_seterr(XS_EINVAL, "--model '%s': unknown (llama3-8b, llama3-70b, "
                             "llama3-405b or all)", tok);
        if (o->nmodels >= XS_TP_NMODELS)
            return xs_seterr(XS_EINVAL, "--model: at most %d models", XS_TP_NMODELS);
        o->models[o->nmodels++] = found;
    }
    o->models_set = 1;
    return XS_OK;
}

/* --couriers LIST: distinct counts in 0..XS_TP_COURIERS_MAX, 0 (the default kernel, always
 * run) left out, at most TPB_MAX_COUR others. */
static xs_status tp_opt_couriers(tpb_opts *o, const char *arg)
{
    const char *opt = "--couriers";
    int *out = o->cour, *nout = &o->ncour;
    const int none = 0, most = TPB_MAX_COUR;
    int v[TPB_MAX_LIST], nv = 0;
    o->cour_set = 1;
    XS_TRY(xs_parse_list(opt, arg, 0, 0, XS_TP_COURIERS_MAX, v, TPB_MAX_LIST, &nv));
    *nout = 0;
    for (int i = 0; i < nv; i++) {
        if (v[i] == none)
            continue;
        for (int j = 0; j < *nout; j++)
            if (out[j] == v[i])
                return xs_seterr(XS_EINVAL, "%s: %d given twice", opt, v[i]);
        if (*nout == most)
            return xs_seterr(XS_EINVAL, "%s: at most %d courier counts besides %d", opt, most,
                             none);
        out[(*nout)++] = v[i];
    }
    return XS_OK;
}

/* One workload option (xs_bench_spec.opt). */
static xs_status tp_opt(void *ctx, int ch, const char *arg)
{
    tpb_opts *o = (tpb_opts *)ctx;
    switch (ch) {
    case 'o': return tp_opt_ops(o, arg);
    case OPT_MODEL: return tp_opt_models(o, arg);
    case 'm': return xs_parse_list("--m", arg, 1, 1, 1 << 24, o->m, TPB_MAX_LIST, &o->nm);
    case OPT_N: return xs_parse_list("--n", arg, 1, 1, 1 << 24, o->n, TPB_MAX_LIST, &o->nn);
    case OPT_K: return xs_parse_list("--k", arg, 1, 1, 1 << 24, o->k, TPB_MAX_LIST, &o->nk);
    case 'p':
        return xs_parse_list("--peers", arg, 1, 1, XS_MAX_RANKS, o->peers, TPB_MAX_LIST,
                             &o->npeers);
    case OPT_ENGINE:
        if (xs_tp_engine_parse(arg, &o->engine) != XS_OK)
            return xs_seterr(XS_EINVAL, "--engine '%s': expected mma or sm90", arg);
        o->engine_set = 1;
        return XS_OK;
    case OPT_COURIERS: return tp_opt_couriers(o, arg);
    case OPT_GRID: return xs_grid_parse(arg, &o->grid);
    case OPT_ROWS: o->rows_arg = arg; return XS_OK;
    }
    return xs_seterr(XS_EINVAL, "bench tp: unhandled option");
}

/* --grid declared: the grid fixes the points (XS_EINVAL with one line for an option that would
 * change them), --rows picks a slice. */
static xs_status tp_check_grid(tpb_opts *o, const xs_bench_common *c)
{
    const char *bad = o->ops_set ? "--op" : o->models_set ? "--model" : o->nm ? "--m"
                      : o->nn ? "--n/--k" : o->npeers ? "--peers" : c->quick ? "--quick"
                      : c->b.gpus > 1 ? "-g N > 1" : NULL;
    return xs_grid_opts_check("bench tp", o->grid, bad, o->rows_arg, XS_GRID_TP_ROWS, &o->rows_lo,
                              &o->rows_hi);
}

/* The checks and defaults after parsing (XS_EINVAL with its one line). */
/* The engine when --engine is not given: sm90 on a device of compute capability 9.0 (its
 * wgmma/TMA GEMM runs at about twice the mma engine's rate: TPB_SM90_TFLOPS against
 * TPB_ENGINE_TFLOPS), mma elsewhere. Asked before any rank starts (one GPU) or in each rank (-g N);
 * a device that cannot be asked leaves mma, and the bench's own start reports the device. */
static void tp_engine_default(tpb_opts *o, int device)
{
    if (o->engine_set)
        return;
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    o->engine = major == 9 && minor == 0 ? XS_TP_ENGINE_SM90 : XS_TP_ENGINE_MMA;
}

/* The engine's courier defaults and checks, once the engine is known. */
static xs_status tp_check_engine(tpb_opts *o)
{
    if (!o->cour_set && o->engine == XS_TP_ENGINE_SM90 && o->ncour == 0) {
        /* the planner's family on sm90: the default kernel and 4, 6 and 8 couriers (on the
         * H200, 6 couriers won 9 of 36 rows, mostly compute-bound ones, where 8 cost the compute
         * 8 SMs and 4 copied too slowly; bench/results/tp/) */
        o->cour[0] = 4, o->cour[1] = 6, o->cour[2] = 8;
        o->ncour = 3;
    }
    if (o->ncour > 0 && o->engine != XS_TP_ENGINE_SM90)
        return xs_seterr(XS_EINVAL, "--couriers: needs the sm90 engine (the mma engine streams "
                         "its remote stores through the next main loop instead)");
    return XS_OK;
}

static xs_status tp_check(tpb_opts *o, const xs_bench_common *c)
{
    XS_TRY(tp_check_grid(o, c));
    /* with -g N the ranks choose the default engine on their own GPUs */
    if (o->engine_set || !(c->b.gpus_set && c->b.gpus > 1))
        XS_TRY(tp_check_engine(o));
    /* -g 1 is the one-GPU bench (its --peers are virtual); with N > 1 the ranks are the peers */
    const xs_gpus_conflict cf[] = {
        {"--device", c->b.device_set, "rank r runs on GPU r"},
        {"--peers", c->b.gpus > 1 && o->npeers > 0,
         "with -g the ranks are the peers: P = the number of GPUs"}};
    XS_TRY(xs_gpus_check("bench tp", c->b.gpus_set, c->b.gpus, cf, 2));
    if (c->b.gpus > 1) {
        o->peers[0] = c->b.gpus;
        o->npeers = 1;
    }
    if ((o->nn > 0) != (o->nk > 0))
        return xs_seterr(XS_EINVAL, "bench tp: --n and --k go together (explicit layer widths)");
    if (o->nn && o->models_set)
        return xs_seterr(XS_EINVAL, "bench tp: --model and --n/--k are alternatives");
    if (o->nn && !o->nm)
        return xs_seterr(XS_EINVAL, "bench tp: --n/--k need --m (tokens)");
    if (o->nn && !o->npeers)
        return xs_seterr(XS_EINVAL, "bench tp: --n/--k need --peers");
    if (!o->ops_set) {
        for (int i = 0; i < XS_TP_NOPS; i++)
            o->ops[i] = i;
        o->nops = XS_TP_NOPS;
    }
    if (!o->models_set && !o->nn) {
        for (int i = 0; i < XS_TP_NMODELS; i++)
            o->models[i] = i;
        o->nmodels = XS_TP_NMODELS;
    }
    return XS_OK;
}

/* ---- configurations -------------------------------------------------------------------------- */

enum { TPB_MAX_ROWS = 256 };

/* One more configuration (its shape checked: xs_tp_info_of's one line on a bad one). */
static xs_status tp_add_row(tpb_row *rows, int *n, xs_tp_op op, const char *model, int m, int nn,
                            int k, int p)
{
    if (*n == TPB_MAX_ROWS)
        return xs_seterr(XS_EINVAL, "bench tp: more than %d configurations", TPB_MAX_ROWS);
    tpb_row *r = &rows[*n];
    r->index = (*n)++;
    r->op = op, r->model = model;
    r->s.op = op, r->s.m = m, r->s.n = nn, r->s.k = k, r->s.peers = p;
    xs_tp_info in;
    return xs_tp_info_of(&r->s, &in);
}

/* The configurations in the order they are built: per op, explicit widths (--n/--k) or per
 * model its token counts and peer counts (default: xs_tp_default_peers on the profile's drain
 * rate). Then grouped by peer count, in first-appearance order (one window set per group);
 * each row keeps its built index, which seeds its inputs. rows: TPB_MAX_ROWS. */
static xs_status build_rows(const tpb_opts *o, int quick, double drain, tpb_row *rows, int *nout)
{
    tpb_row *built = (tpb_row *)calloc(TPB_MAX_ROWS, sizeof *built);
    if (!built)
        return xs_seterr(XS_ENOMEM, "out of host memory");
    int n = 0;
    xs_status st = XS_OK;
    for (int i = o->rows_lo; o->grid && i < o->rows_hi && st == XS_OK; i++) {
        /* the declared grid: a shape the kernel refuses is a row that cannot run */
        xs_grid_tp_row g;
        if ((st = xs_grid_tp_row_at(i, &g)) != XS_OK)
            break;
        int nn = 0, kk = 0;
        xs_tp_model_nk(g.op, xs_tp_model_at(g.model_index), &nn, &kk);
        if (tp_add_row(built, &n, g.op, g.model, g.m, nn, kk, g.peers) != XS_OK)
            snprintf(built[n - 1].status, sizeof built[n - 1].status, "skipped: %s",
                     xs_errmsg());
        built[n - 1].index = i;
    }
    for (int oi = 0; !o->grid && oi < o->nops && st == XS_OK; oi++) {
        const xs_tp_op op = (xs_tp_op)o->ops[oi];
        if (o->nn) {
            for (int a = 0; a < o->nm; a++)
                for (int b = 0; b < o->nn; b++)
                    for (int c = 0; c < o->nk; c++)
                        for (int p = 0; p < o->npeers && st == XS_OK; p++)
                            st = tp_add_row(built, &n, op, "custom", o->m[a], o->n[b], o->k[c],
                                            o->peers[p]);
            continue;
        }
        for (int mi = 0; mi < o->nmodels && st == XS_OK; mi++) {
            const xs_tp_model *md = xs_tp_model_at(o->models[mi]);
            int nn = 0, kk = 0;
            xs_tp_model_nk(op, md, &nn, &kk);
            int ms[TPB_MAX_LIST], nms = 0, ps[TPB_MAX_LIST], nps = 0;
            if (o->nm) {
                memcpy(ms, o->m, sizeof(int) * o->nm);
                nms = o->nm;
            } else {
                ms[nms++] = md->tokens[0];
                if (!quick)
                    ms[nms++] = md->tokens[1];
            }
            for (int a = 0; a < nms && st == XS_OK; a++) {
                if (o->npeers) {
                    memcpy(ps, o->peers, sizeof(int) * o->npeers);
                    nps = o->npeers;
                } else {
                    nps = xs_tp_default_peers(op, md, ms[a], drain,
                                              o->engine == XS_TP_ENGINE_SM90 ? TPB_SM90_TFLOPS
                                                                             : TPB_ENGINE_TFLOPS,
                                              quick ? 1 : 2, ps);
                }
                for (int p = 0; p < nps && st == XS_OK; p++)
                    st = tp_add_row(built, &n, op, md->name, ms[a], nn, kk, ps[p]);
            }
        }
    }
    /* grouped by peer count, first appearance first */
    int m = 0;
    for (int i = 0; i < n && st == XS_OK; i++) {
        int first = 1;
        for (int j = 0; j < i; j++)
            first &= built[j].s.peers != built[i].s.peers;
        for (int j = i; first && j < n; j++)
            if (built[j].s.peers == built[i].s.peers)
                rows[m++] = built[j];
    }
    free(built);
    *nout = m;
    return st;
}

/* ---- one configuration ----------------------------------------------------------------------- */

/* What every configuration shares. With -g N, N > 1 (e->coll), the ranks walk every
 * configuration in lockstep: every decision that could differ between ranks (costs, pilot set
 * and choice, skips) is agreed through the collectives, every fused or unfused run sits between
 * two barriers (e->ws). */
typedef struct {
    xs_bench_env *e;
    xs_cublas *cb;
    const xs_profile *prof;
    const tpb_opts *o;
    int grid;
} tpb_ctx;

/* ---- real peers (-g N): the collectives behind xs_tp_coll, runs between barriers ------------- */

static xs_status tpb_all_gather(void *c, const void *send, void *recv, size_t bytes,
                                cudaStream_t s)
{
    return xs_coll_all_gather((xs_coll *)c, send, recv, bytes, (void *)s);
}
static xs_status tpb_reduce_scatter(void *c, const void *send, void *recv, size_t count,
                                    cudaStream_t s)
{
    return xs_coll_reduce_scatter_bf16((xs_coll *)c, send, recv, count, (void *)s);
}
static xs_status tpb_alltoall(void *c, const void *send, void *recv, size_t bytes,
                              cudaStream_t s)
{
    return xs_coll_alltoall((xs_coll *)c, send, recv, bytes, (void *)s);
}

/* A fused run (or, unfused = 1, the unfused sequence). Real peers, not local: all ranks meet
 * before (no one stores into a window its owner is still verifying) and after (every source's
 * stores are in place before the owner verifies); xs_bench_barrier is a no-op without them. */
static xs_status tpb_run(const tpb_ctx *cx, xs_tp *t, int slot, const xs_tp_run_opts *ro,
                         int unfused, float *ms)
{
    const int sync = unfused || !ro->local;
    if (sync)
        XS_TRY(xs_bench_barrier(cx->e));
    XS_TRY(unfused ? xs_tp_run_unfused(t, cx->cb, cx->e->stream, ms)
                   : xs_tp_run(t, slot, ro, cx->e->stream, ms));
    if (sync)
        XS_TRY(xs_bench_barrier(cx->e));
    return XS_OK;
}

/* Whether the task list in slot 2 is one not yet in seen[0..*n) (naive's is the first); a new
 * one is added. Small problems: most candidates coincide, and a list is measured once. */
static int tpb_new_list(const xs_tp *t, unsigned long long *seen, int *n)
{
    const unsigned long long h = xs_tp_order_hash(xs_tp_plan_of(t), 2);
    for (int j = 0; j < *n; j++)
        if (seen[j] == h)
            return 0;
    seen[(*n)++] = h;
    return 1;
}

/* Verify the last run; print the first problem once per variant. */
static int verified(xs_tp *t, const tpb_row *row, const char *variant, int *printed,
                    double *max_err)
{
    xs_tp_check c;
    if (xs_tp_verify(t, &c) != XS_OK) {
        fprintf(stderr, "xstage: error: %s %s m=%d P=%d %s: verify: %s\n", xs_tp_op_name(row->op),
                row->model, row->s.m, row->s.peers, variant, xs_errmsg());
        return 0;
    }
    if (c.checked_ref && c.rel_frob > *max_err)
        *max_err = c.rel_frob;
    if (!c.ok && !*printed) {
        fprintf(stderr, "xstage: error: %s %s m=%d n=%d k=%d P=%d %s: %s\n",
                xs_tp_op_name(row->op), row->model, row->s.m, row->s.n, row->s.k, row->s.peers,
                variant, c.what[0] ? c.what : "verification failed");
        *printed = 1;
    }
    return c.ok;
}

enum { TPB_MAX_PILOT = 10 }; /* the most pilots of a planner (the helpers' arrays) */

/* The pilot set: fixed[0..nfix) in order, less those outside 0..nc, not usable or repeated,
 * into pilot[]; returns their count. must_run[0..nfix) = -1: decided by this rank's own
 * duplicate check (one GPU; tpb_agree_pilot_set decides for real peers). */
static int tpb_pilot_set(const int *fixed, int nfix, int nc, const int *usable, int *pilot,
                         int *must_run)
{
    int np = 0;
    for (int i = 0; i < nfix; i++) {
        int dup = fixed[i] < 0 || fixed[i] >= nc || !usable[fixed[i]];
        for (int j = 0; j < np; j++)
            dup |= pilot[j] == fixed[i];
        if (!dup)
            pilot[np++] = fixed[i];
    }
    for (int i = 0; i < nfix; i++)
        must_run[i] = -1;
    return np;
}

/* Real peers (a no-op otherwise): every rank takes rank 0's pilot set pilot[0..*np) (nfix <=
 * TPB_MAX_PILOT slots), and must_run[i] becomes whether pilot i's list is new on any rank
 * (naive's list, in slot sn, counts as seen; slot 2 is overwritten). */
static xs_status tpb_agree_pilot_set(const tpb_ctx *cx, xs_tp *t, int sn, const xs_tp_pace *cand,
                                     const xs_tp_costs *cost, int nfix, int *pilot, int *np,
                                     int *must_run)
{
    if (!cx->e->coll)
        return XS_OK;
    double v[1 + TPB_MAX_PILOT];
    v[0] = *np;
    for (int i = 0; i < nfix; i++)
        v[1 + i] = i < *np ? pilot[i] : -1;
    XS_TRY(xs_bench_agree_rank0(cx->e, v, 1 + nfix));
    *np = (int)v[0];
    for (int i = 0; i < *np; i++)
        pilot[i] = (int)v[1 + i];
    /* a list is run when it is new on any rank */
    double nd[TPB_MAX_PILOT];
    unsigned long long seen[TPB_MAX_PILOT + 1];
    int nseen = 0;
    seen[nseen++] = xs_tp_order_hash(xs_tp_plan_of(t), sn);
    for (int i = 0; i < *np; i++) {
        XS_TRY(xs_tp_order_shaped(xs_tp_plan_of(t), 2, &cand[pilot[i]], cost, cx->prof));
        nd[i] = tpb_new_list(t, seen, &nseen);
    }
    XS_TRY(xs_bench_agree_max(cx->e, nd, *np > 0 ? *np : 1));
    for (int i = 0; i < *np; i++)
        must_run[i] = nd[i] != 0.0;
    return XS_OK;
}

/* One pilot's time: the median of --pilot-reps verified runs of slot (ms). A single run lets
 * noise pick the slower of two orders a few percent apart (on the H200, 8b m=8192 P=2: 8
 * couriers piloted ahead of 6, then timed 774 against 731 us). */
static xs_status tpb_pilot_time(const tpb_ctx *cx, xs_tp *t, const tpb_row *row, int slot,
                                const xs_tp_run_opts *ro, const char *what, int *ok, int *pr,
                                float *ms)
{
    double v[TPB_PILOT_REPS];
    double dummy = 0;
    const int n = TPB_PILOT_REPS;
    for (int j = 0; j < n; j++) {
        float one = 0;
        XS_TRY(tpb_run(cx, t, slot, ro, 0, &one));
        *ok &= verified(t, row, what, pr, &dummy);
        v[j] = one;
    }
    *ms = (float)xs_median(v, (size_t)n);
    return XS_OK;
}

/* The pilot runs: naive (slot sn; run once more first, to warm the outbox and the windows up),
 * then each candidate cand[pilot[i]], i < np <= TPB_MAX_PILOT, built into slot 2, whose list is
 * new (must_run[i] >= 0 decides instead: real peers, new on any rank); each timed by the median
 * of --pilot-reps runs, each run verified as "pilot naive<tag>" / "pilot shaped<tag>" (failures
 * clear *ok). buf (size bytes) gets
 * "naive <us>, <label> <us>, ...". *best: the fastest (kept when naive is the fastest on one
 * GPU; callers start it at -1, naive), *pick_ms its time; real peers: the fastest by the
 * slowest rank's time, and coll_note (when not NULL) is appended to buf. */
static xs_status tpb_pilot_runs(const tpb_ctx *cx, xs_tp *t, const tpb_row *row, int sn,
                                const xs_tp_run_opts *ro, const xs_tp_pace *cand,
                                const xs_tp_costs *cost, const int *pilot, int np,
                                const int *must_run, const char *tag, const char *coll_note,
                                char *buf, size_t size, int *ok, int *best, double *pick_ms)
{
    float ms = 0, best_ms = 0;
    int pr = 0;
    double dummy = 0;
    double pilot_ms[TPB_MAX_PILOT + 1];
    int pilot_of[TPB_MAX_PILOT + 1], npr = 0;
    char what[64];
    snprintf(what, sizeof what, "pilot naive%s", tag);
    XS_TRY(tpb_run(cx, t, sn, ro, 0, &ms));
    *ok &= verified(t, row, what, &pr, &dummy);
    XS_TRY(tpb_pilot_time(cx, t, row, sn, ro, what, ok, &pr, &best_ms));
    pilot_ms[npr] = best_ms, pilot_of[npr++] = -1;
    size_t pl = (size_t)snprintf(buf, size, "naive %.1f", best_ms * 1e3);
    unsigned long long seen[TPB_MAX_PILOT + 1];
    int nseen = 0;
    seen[nseen++] = xs_tp_order_hash(xs_tp_plan_of(t), sn);
    snprintf(what, sizeof what, "pilot shaped%s", tag);
    for (int i = 0; i < np; i++) {
        XS_TRY(xs_tp_order_shaped(xs_tp_plan_of(t), 2, &cand[pilot[i]], cost, cx->prof));
        int fresh = tpb_new_list(t, seen, &nseen);
        if (must_run[i] >= 0) /* real peers: new on any rank */
            fresh = must_run[i];
        if (!fresh)
            continue;
        XS_TRY(tpb_pilot_time(cx, t, row, 2, ro, what, ok, &pr, &ms));
        pilot_ms[npr] = ms, pilot_of[npr++] = pilot[i];
        char lab[32];
        xs_tp_pace_label(&cand[pilot[i]], lab, sizeof lab);
        if (pl < size)
            pl += (size_t)snprintf(buf + pl, size - pl, ", %s %.1f", lab, ms * 1e3);
        if (ms < best_ms)
            best_ms = ms, *best = pilot[i];
    }
    *pick_ms = best_ms;
    if (cx->e->coll) {
        /* the fastest by the slowest rank's time: the same choice on every rank */
        double v[TPB_MAX_PILOT + 1];
        for (int i = 0; i < npr; i++)
            v[i] = pilot_ms[i];
        XS_TRY(xs_bench_agree_max(cx->e, v, npr));
        *best = -1;
        int b = 0;
        for (int i = 1; i < npr; i++)
            if (v[i] < v[b])
                b = i, *best = pilot_of[i];
        *pick_ms = v[b];
        if (coll_note && pl < size)
            snprintf(buf + pl, size - pl, "%s", coll_note);
    }
    return XS_OK;
}

/* --couriers: plan courier count N (rc->n) of a configuration: its naive order into slot sn and
 * the fastest of a verified pilot run of its candidates into slot ss, both built for grid - N compute CTAs (xs_tp_set_couriers; the context's own count is
 * 0 again afterwards). Candidates: the stored shaped ones and the ring ones stored (the sm90
 * engine's set) and the front-loaded order (xs_tp_pace_front: remote tiles as early as they are
 * ready, this rank's own tiles last), and for gemm_rs with virtual peers the front one with its
 * head split along k in 2, 4 and 8 parts; the pilot takes the front ones, the model's best, the three
 * ring ones and two stored ones. The prediction: local_us * grid / (grid - N) + (model - ideal) of
 * xs_tp_predict's fluid model for courier orders. Real peers: the same lockstep rules as the
 * default planner (rank 0's model decides the pilot set, a list runs when it is new on any rank,
 * the fastest by the slowest rank's time). Verification failures clear *ok. */
static xs_status plan_couriers(const tpb_ctx *cx, xs_tp *t, const tpb_row *row, tpb_cour *rc,
                               int sn, int ss, const xs_tp_costs *cost, int *ok)
{
    const int N = rc->n, Gc = cx->grid - N;
    xs_tp_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.timeout_ns = (unsigned long long)(cx->e->c->timeout_s * 1e9);
    ro.flush_l2 = 1;
    XS_TRY(xs_tp_set_couriers(t, N));
    XS_TRY(xs_tp_order_naive(xs_tp_plan_of(t), sn));
    XS_TRY(xs_tp_order_check(xs_tp_plan_of(t), sn));
    xs_tp_pred pn;
    XS_TRY(xs_tp_predict(xs_tp_plan_of(t), sn, cx->prof, cost, 0, &pn));
    xs_tp_pace cand[XS_TP_NCAND + 4];
    double pred[XS_TP_NCAND + 4];
    int usable[XS_TP_NCAND + 4];
    /* the stored candidates, the front-loaded order, and for gemm_rs with virtual peers the
     * front one with its first remote tiles split along k, so that the link starts after
     * part of a tile; the kernel verifies split tiles
     * against the reference only with virtual peers */
    int front, fsplit[3];
    static const int split[3] = {2, 4, 8};
    const int nc = xs_tp_courier_candidates(0.9 * xs_capacity(cx->prof, Gc), split,
                                            row->op == XS_TP_GEMM_RS && !cx->e->coll ? 3 : 0,
                                            cand, usable, &front, fsplit);
    int mbest = -1;
    XS_TRY(xs_tp_predict_candidates(xs_tp_plan_of(t), 2, cand, usable, nc, cost, cx->prof, pred,
                                    &mbest));
    enum { NFIX = 10 };
    static_assert(NFIX <= TPB_MAX_PILOT, "tpb_agree_pilot_set, tpb_pilot_runs: pilot arrays");
    const int fixed[NFIX] = {front, fsplit[0], fsplit[1], fsplit[2], mbest, 24, 25, 26, 0,
                             2 * 4 + 1 * 2 + 0};
    int pilot[NFIX], must_run[NFIX];
    int np = tpb_pilot_set(fixed, NFIX, nc, usable, pilot, must_run);
    int best = -1; /* -1: the naive order */
    XS_TRY(tpb_agree_pilot_set(cx, t, sn, cand, cost, NFIX, pilot, &np, must_run));
    rc->pilot[0] = 0;
    char tag[32];
    snprintf(tag, sizeof tag, ", %d couriers", N);
    XS_TRY(tpb_pilot_runs(cx, t, row, sn, &ro, cand, cost, pilot, np, must_run, tag, NULL,
                          rc->pilot, sizeof rc->pilot, ok, &best, &rc->pick_ms));
    xs_tp_pred ps;
    if (best < 0) {
        XS_TRY(xs_tp_order_copy(xs_tp_plan_of(t), ss, sn));
        snprintf(rc->cand, sizeof rc->cand, "naive");
    } else {
        XS_TRY(xs_tp_order_shaped(xs_tp_plan_of(t), ss, &cand[best], cost, cx->prof));
        XS_TRY(xs_tp_order_check(xs_tp_plan_of(t), ss));
        xs_tp_pace_label(&cand[best], rc->cand, sizeof rc->cand);
    }
    XS_TRY(xs_tp_predict(xs_tp_plan_of(t), ss, cx->prof, cost, 0, &ps));
    rc->shp_pred = row->local_us * cx->grid / Gc + (ps.model_ns - ps.ideal_ns) / 1e3;
    return xs_tp_set_couriers(t, 0);
}

/* The default kernel's planner (slot 1): the candidate shaped orders ranked by the model,
 * the naive order (slot 0, predicted as *pn) and the pilot set run and verified, the fastest
 * built into slot 1; row->cand, pilot, pick_ms and
 * model_rank. Verification failures clear *ok. */
static xs_status tpb_plan_default(const tpb_ctx *cx, xs_tp *t, tpb_row *row, xs_tp_run_opts *ro,
                                  const xs_tp_costs *cost, const xs_tp_pred *pn, int *ok)
{
    const tpb_opts *o = cx->o;
    const int streams = xs_tp_engine_streams(o->engine); /* the engine runs streamed orders */
    const double Qh = 0.9 * xs_capacity(cx->prof, cx->grid);
    xs_tp_pace cand[XS_TP_NCAND];
    double pred[XS_TP_NCAND];
    /* 0..11: stores after each tile (finish x burst x cap); 12..17: streamed through the
     * main loops (finish x burst; no cap: nothing is stored as a burst); 18..23: streamed,
     * riders always carrying several chunks; 24..26: streamed in ring order */
    const int nc = xs_tp_candidates(Qh, cand, XS_TP_NCAND);
    /* an engine that does not stream (sm90) takes the stored candidates and the ring
     * orders with their remote tiles stored; the other streamed ones are left out (never
     * piloted, never ranked) */
    int usable[XS_TP_NCAND], mbest;
    xs_tp_engine_candidates(streams, cand, nc, usable);
    XS_TRY(xs_tp_predict_candidates(xs_tp_plan_of(t), 2, cand, usable, nc, cost, cx->prof,
                                     pred, &mbest));
    /* the pilot set: the model's best, the front-loaded, the spread and the capped
     * candidates, the model's best streamed one, the streamed front-loaded and spread ones,
     * and the three ring-order ones (the mean-field model cannot see producer drift or the
     * L2 locality of an order; the pilot can) */
    int order[XS_TP_NCAND];
    for (int i = 0; i < nc; i++)
        order[i] = i;
    for (int i = 1; i < nc; i++)
        for (int j = i; j > 0 && pred[order[j]] < pred[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    int best_stream = -1;
    for (int i = 0; i < nc && best_stream < 0; i++)
        if (cand[order[i]].spread && usable[order[i]])
            best_stream = order[i];
    enum { TPB_NFIXED = 10 };
    static_assert(TPB_NFIXED <= TPB_MAX_PILOT, "tpb_agree_pilot_set, tpb_pilot_runs");
    const int fixed[TPB_NFIXED] = {order[0], 0 * 4 + 0 * 2 + 0, 2 * 4 + 1 * 2 + 0,
                                   2 * 4 + 1 * 2 + 1, best_stream, 12 + 0 * 2 + 0,
                                   12 + 2 * 2 + 0, 24, 25, 26};
    int pilot[TPB_NFIXED], must_run[TPB_NFIXED];
    int np = tpb_pilot_set(fixed, TPB_NFIXED, nc, usable, pilot, must_run);
    int best = -1; /* -1: the naive order */
    /* real peers: rank 0's model decides the pilot set (each rank's order is its own
     * rotation of the same plan, and all ranks must run the same number of launches) */
    XS_TRY(tpb_agree_pilot_set(cx, t, 0, cand, cost, TPB_NFIXED, pilot, &np, must_run));
    ro->local = 0;
    /* naive first (its run also warms the virtual windows up), then the candidates */
    XS_TRY(tpb_pilot_runs(cx, t, row, 0, ro, cand, cost, pilot, np, must_run, "",
                          " (chosen by the slowest rank's time)", row->pilot, sizeof row->pilot,
                          ok, &best, &row->pick_ms));
    /* rank of the chosen order in the model's ranking of naive and the candidates */
    const double chosen = best < 0 ? pn->model_ns : pred[best];
    row->model_rank = 1 + (pn->model_ns < chosen);
    for (int i = 0; i < nc; i++)
        row->model_rank += usable[i] && pred[i] < chosen;
    if (best < 0) {
        XS_TRY(xs_tp_order_copy(xs_tp_plan_of(t), 1, 0));
        snprintf(row->cand, sizeof row->cand, "naive");
    } else {
        XS_TRY(xs_tp_order_shaped(xs_tp_plan_of(t), 1, &cand[best], cost, cx->prof));
        XS_TRY(xs_tp_order_check(xs_tp_plan_of(t), 1));
        xs_tp_pace_label(&cand[best], row->cand, sizeof row->cand);
    }
    return XS_OK;
}

/* The local control in natural order (slot 0): the GEMM-alone time (row->local_us), the task
 * costs (*cost) and the expectation; real peers first exchange the sources' verified partials,
 * then take the slowest rank's costs and go on only when every rank's control is right.
 * Verification failures clear *ok. */
static xs_status tpb_local_naive(const tpb_ctx *cx, xs_tp *t, tpb_row *row, xs_tp_run_opts *ro,
                                 xs_tp_costs *cost, int *ok, int *pr_l)
{
    const int n = cx->e->c->b.iters, W = cx->e->c->b.warmup;
    XS_TRY(xs_tp_order_naive(xs_tp_plan_of(t), 0));
    XS_TRY(xs_tp_order_check(xs_tp_plan_of(t), 0));
    if (xs_tp_real_peers(t)) {
        /* the sources' verified partials of this rank's rows replace the placed ones: the
         * reference and the local control then hold what the fused runs must receive */
        float ms = 0;
        ro->local = 1;
        XS_TRY(xs_tp_run(t, 0, ro, cx->e->stream, &ms));
        *ok &= verified(t, row, "local (before the exchange)", pr_l, &row->max_err);
        XS_TRY(xs_tp_exchange_expectation(t));
    }
    {
        double loc_n[XS_BENCH_MAX_ITERS];
        ro->local = 1;
        for (int i = 0; i < W + n; i++) {
            float ms = 0;
            XS_TRY(xs_tp_run(t, 0, ro, cx->e->stream, &ms));
            *ok &= verified(t, row, "local", pr_l, &row->max_err);
            if (i >= W)
                loc_n[i - W] = ms * 1e3;
        }
        XS_TRY(xs_tp_costs_of_last(t, cost));
        row->local_us = xs_median(loc_n, (size_t)n);
    }
    if (cx->e->coll) {
        /* one plan for all ranks: the slowest rank's task costs, and go on only when every
         * rank's local control is right */
        double v[5] = {cost->tile_ns[0], cost->tile_ns[1], cost->push_ns, cost->reduce_ns,
                       *ok ? 0.0 : 1.0};
        XS_TRY(xs_bench_agree_max(cx->e, v, 5));
        cost->tile_ns[0] = v[0], cost->tile_ns[1] = v[1], cost->push_ns = v[2];
        cost->reduce_ns = v[3];
        *ok = v[4] == 0.0;
    }
    return XS_OK;
}

/* A row before its runs: its engine, nothing chosen, every timing nan. */
static void tpb_row_init(const tpb_opts *o, tpb_row *row)
{
    static const xs_bench_stat none = {NAN, NAN, NAN, NAN, NAN, 0};
    for (int v = 0; v < TPB_MAX_COUR; v++) {
        tpb_cour *rc = &row->cour[v];
        rc->n = v < o->ncour ? o->cour[v] : 0;
        rc->nai = rc->shp = none;
        rc->shp_pred = rc->pick_ms = NAN;
        snprintf(rc->cand, sizeof rc->cand, "-");
        rc->pilot[0] = 0;
    }
    row->ok = row->verified = 0;
    row->unf = row->nai = row->shp = row->shp0 = none;
    row->engine = o->engine;
    row->max_err = 0;
    snprintf(row->cand, sizeof row->cand, "-");
    snprintf(row->cand0, sizeof row->cand0, "-");
    row->pilot[0] = 0;
    row->shp_cour = 0;
    row->shp0_pred = row->pick_ms = NAN;
    row->ovl = none;
    row->ovl_chunks = 0;
    row->ovl_pilot[0] = 0;
    row->cublas_us = row->best_other_us = row->comm_over_compute = row->ovl_pred_us = NAN;
    row->ovl_model_chunks = 0;
    snprintf(row->best_other, sizeof row->best_other, "-");
    row->ovl_model_pred_us = row->ovl_pilot_us = row->auto_pred_us = NAN;
    row->auto_us = row->tuned_us = NAN;
    row->auto_v = row->tuned_v = -1;
    row->auto_chunks = 0;
    row->aut = none;
    snprintf(row->auto_name, sizeof row->auto_name, "-");
    snprintf(row->tuned_name, sizeof row->tuned_name, "-");
    row->auto_why[0] = 0;
}

/* The row's statistics from the timed rounds x[v * n + j] (nan where variant v did not run:
 * courier counts not planned),
 * and the planner's choice `pick` (-1: the default kernel) as `shaped`. */
static void tpb_row_stats(tpb_row *row, const double *x, int n, int pick)
{
    row->nai = xs_bench_stat_of(x + TPB_V_NAIVE * n, n);
    row->shp = xs_bench_stat_of(x + TPB_V_SHAPED * n, n);
    row->unf = xs_bench_stat_of(x + TPB_V_UNFUSED * n, n);
    row->ovl = xs_bench_stat_of(x + TPB_V_OVERLAP * n, n);
    row->aut = xs_bench_stat_of(x + TPB_V_AUTO * n, n);
    for (int v = 0; v < TPB_MAX_COUR; v++) {
        row->cour[v].nai = xs_bench_stat_of(x + (TPB_V_COUR + 2 * v) * n, n);
        row->cour[v].shp = xs_bench_stat_of(x + (TPB_V_COUR + 2 * v + 1) * n, n);
    }
    /* shaped: the planner's choice (the same timed runs as its own column) */
    row->shp0 = row->shp;
    row->shp0_pred = row->shp_pred;
    snprintf(row->cand0, sizeof row->cand0, "%s", row->cand);
    row->shp_cour = 0;
    if (pick >= 0) {
        const tpb_cour *rc = &row->cour[pick];
        row->shp = rc->shp;
        row->shp_pred = rc->shp_pred;
        row->shp_cour = rc->n;
        snprintf(row->cand, sizeof row->cand, "c%d %.26s", rc->n, rc->cand);
    }
}

/* The local control in the chosen shaped order (slot 1): its time (shp_local), the
 * predictions of naive and shaped, the eager-signal diagnostic run after a pilot, and the
 * bound's GEMM-alone time (the faster of the two local orders). Failures clear *ok. */
static xs_status tpb_local_shaped(const tpb_ctx *cx, xs_tp *t, tpb_row *row, xs_tp_run_opts *ro,
                                  const xs_tp_costs *cost, const xs_tp_pred *pn,
                                  const xs_tp_info *in, int *ok, int *pr_l)
{
    const int n = cx->e->c->b.iters, W = cx->e->c->b.warmup;
    double loc_s[XS_BENCH_MAX_ITERS];
    ro->local = 1;
    for (int i = 0; i < W + n; i++) {
        float ms = 0;
        XS_TRY(xs_tp_run(t, 1, ro, cx->e->stream, &ms));
        *ok &= verified(t, row, "local shaped", pr_l, &row->max_err);
        if (i >= W)
            loc_s[i - W] = ms * 1e3;
    }
    const double ls = xs_median(loc_s, (size_t)n);
    xs_tp_pred ps;
    XS_TRY(xs_tp_predict(xs_tp_plan_of(t), 1, cx->prof, cost, 0, &ps));
    row->nai_pred = (row->local_us * 1e3 + (pn->model_ns - pn->ideal_ns)) / 1e3;
    row->shp_pred = (ls * 1e3 + (ps.model_ns - ps.ideal_ns)) / 1e3;
    row->shp_local = ls;
    if (row->pilot[0] && in->rs_gemm >= 0) {
        /* diagnostics: the chosen order once more, every signal raised right after the
         * CTA's next main loop (the eager rule), against the link */
        float ms = 0;
        int pr = 0;
        double dummy = 0;
        ro->local = 0;
        ro->eager_flags = 1;
        XS_TRY(tpb_run(cx, t, 1, ro, 0, &ms));
        *ok &= verified(t, row, "shaped, eager signals", &pr, &dummy);
        ro->eager_flags = 0;
        ro->local = 1;
        const size_t pl = strlen(row->pilot);
        snprintf(row->pilot + pl, sizeof row->pilot - pl, "; chosen with eager signals %.1f",
                 ms * 1e3);
    }
    if (ls < row->local_us)
        row->local_us = ls;
    return XS_OK;
}

/* --couriers: each courier count's orders (slots 3 + 2v and 4 + 2v, *cour_run of them), then
 * the planner's choice over the family (*pick: -1 the default kernel's shaped order, else
 * courier count v): the fastest by the pilot runs. Real peers: rank 0's choice, so that every
 * rank runs the same slots. */
static xs_status tpb_plan_family(const tpb_ctx *cx, xs_tp *t, tpb_row *row, const xs_tp_info *in,
                                 const xs_tp_costs *cost, int *ok, int *cour_run, int *pick)
{
    const tpb_opts *o = cx->o;
    /* every op has something for the couriers: pushes in ag_gemm and mlp, remote tiles in
     * gemm_rs and mlp */
    if (in->rs_gemm >= 0 || (in->ag && row->s.peers > 1))
        for (int v = 0; v < o->ncour; v++) {
            XS_TRY(plan_couriers(cx, t, row, &row->cour[v], 3 + 2 * v, 4 + 2 * v, cost, ok));
            *cour_run = v + 1;
        }
    double best = row->pick_ms;
    for (int v = 0; v < *cour_run; v++) {
        const double c = row->cour[v].pick_ms;
        if (isfinite(c) && (!isfinite(best) || c < best))
            best = c, *pick = v;
    }
    double pv = *pick;
    XS_TRY(xs_bench_agree_rank0(cx->e, &pv, 1));
    *pick = (int)pv;
    return XS_OK;
}

/* The overlapped unfused pipeline (virtual peers only): the GEMMs alone (cublas_us: one piece
 * per rank block, no copies; one warm-up, then the median of TPB_PILOT_REPS runs), then the
 * chunk count: every declared count that fits the shape gets one warm-up and TPB_PILOT_REPS
 * verified runs, the fastest median is timed in the rounds as `overlapped`. A wrong pilot run
 * clears *ok. */
static xs_status tpb_plan_overlap(const tpb_ctx *cx, xs_tp *t, tpb_row *row, const xs_tp_info *in,
                                  int *ok)
{
    static const int chunks[TPB_OV_NCHUNKS] = TPB_OV_CHUNKS;
    if (cx->e->real || !xs_tp_overlap_fits(in, 1))
        return XS_OK;
    double x[TPB_PILOT_REPS];
    for (int i = 0; i <= TPB_PILOT_REPS; i++) {
        float ms = 0;
        XS_TRY(xs_tp_run_overlapped(t, cx->cb, 1, 0, cx->e->stream, &ms));
        if (i > 0)
            x[i - 1] = ms * 1e3;
    }
    row->cublas_us = xs_median(x, TPB_PILOT_REPS);
    /* the model's choice from the compute alone and R */
    const xs_ov_terms terms = xs_ov_terms_default(cx->prof->drain_bytes_per_ns);
    double pbest = INFINITY;
    for (int c = 0; c < TPB_OV_NCHUNKS; c++) {
        double ns;
        if (xs_tp_overlap_fits(in, chunks[c]) &&
            xs_ov_tp_predict(in, row->s.peers, row->cublas_us * 1e3, &terms, chunks[c],
                             &ns) == XS_OK && ns < pbest)
            pbest = ns, row->ovl_model_chunks = chunks[c];
    }
    if (isfinite(pbest))
        row->ovl_model_pred_us = pbest / 1e3;
    double best = INFINITY;
    size_t at = 0;
    for (int c = 0; c < TPB_OV_NCHUNKS; c++) {
        if (!xs_tp_overlap_fits(in, chunks[c]))
            continue;
        int pr = 0;
        double dummy = 0;
        char what[32];
        snprintf(what, sizeof what, "overlapped pilot, %d chunks", chunks[c]);
        for (int i = 0; i <= TPB_PILOT_REPS; i++) {
            float ms = 0;
            XS_TRY(xs_tp_run_overlapped(t, cx->cb, chunks[c], 1, cx->e->stream, &ms));
            *ok &= verified(t, row, what, &pr, &dummy);
            if (i > 0)
                x[i - 1] = ms * 1e3;
        }
        const double med = xs_median(x, TPB_PILOT_REPS);
        if (at < sizeof row->ovl_pilot)
            at += (size_t)snprintf(row->ovl_pilot + at, sizeof row->ovl_pilot - at, "%sC=%d %.1f",
                                   at ? ", " : "", chunks[c], med);
        if (med < best)
            best = med, row->ovl_chunks = chunks[c];
    }
    if (row->ovl_chunks > 0)
        row->ovl_pilot_us = best;
    double ns;
    if (row->ovl_chunks > 0 &&
        xs_ov_tp_predict(in, row->s.peers, row->cublas_us * 1e3, &terms, row->ovl_chunks,
                         &ns) == XS_OK)
        row->ovl_pred_us = ns / 1e3;
    return XS_OK;
}

/* auto, before the rounds: every variant with a prediction of its completion time - naive and
 * the default kernel's shaped order (the measured local control plus the model's cost of the
 * link), each courier count's shaped order, unfused (cuBLAS alone, then the remote bytes at R
 * plus one copy call per peer) and the overlapped pipeline at the model's own chunk count -
 * and the least prediction wins (xs_auto_pick). Its timed runs are those of the variant with
 * the same parameters; the overlapped pipeline at a count the pilots did not choose runs as
 * TPB_V_AUTO. */
static void tpb_auto(tpb_row *row)
{
    xs_auto_cand c[4 + TPB_MAX_COUR];
    int vof[4 + TPB_MAX_COUR], chk[4 + TPB_MAX_COUR];
    char nm[4 + TPB_MAX_COUR][64];
    int k = 0;
    snprintf(nm[k], sizeof nm[k], "naive");
    c[k].pred_us = row->nai_pred, vof[k] = TPB_V_NAIVE, chk[k++] = 0;
    snprintf(nm[k], sizeof nm[k], "shaped %.30s", row->cand);
    c[k].pred_us = row->shp_pred, vof[k] = TPB_V_SHAPED, chk[k++] = 0;
    for (int v = 0; v < TPB_MAX_COUR; v++)
        if (row->cour[v].n > 0 && isfinite(row->cour[v].shp_pred)) {
            snprintf(nm[k], sizeof nm[k], "shaped_c%d %.24s", row->cour[v].n, row->cour[v].cand);
            c[k].pred_us = row->cour[v].shp_pred, vof[k] = TPB_V_COUR + 2 * v + 1, chk[k++] = 0;
        }
    snprintf(nm[k], sizeof nm[k], "unfused");
    c[k].pred_us = row->cublas_us + row->comm_us +
                   (row->s.peers - 1) * XS_OV_COPY_CALL_NS / 1e3;
    vof[k] = TPB_V_UNFUSED, chk[k++] = 0;
    if (row->ovl_model_chunks > 0) {
        snprintf(nm[k], sizeof nm[k], "overlapped C=%d", row->ovl_model_chunks);
        c[k].pred_us = row->ovl_model_pred_us;
        vof[k] = row->ovl_model_chunks == row->ovl_chunks ? TPB_V_OVERLAP : TPB_V_AUTO;
        chk[k++] = row->ovl_model_chunks;
    }
    for (int i = 0; i < k; i++)
        c[i].name = nm[i];
    const int i = xs_auto_pick(c, k, row->auto_why, sizeof row->auto_why);
    if (i < 0)
        return;
    row->auto_v = vof[i];
    row->auto_chunks = chk[i];
    row->auto_pred_us = c[i].pred_us;
    snprintf(row->auto_name, sizeof row->auto_name, "%s", nm[i]);
}

/* tuned, after the rounds: the variant whose pilot median was the fastest - the default
 * kernel's chosen shaped order, each courier count's, the overlapped pipeline's chosen count -
 * and its timed median (the same parameters as its pilot). */
static void tpb_tuned(tpb_row *row)
{
    double best = row->pick_ms * 1e3;
    if (isfinite(best)) {
        row->tuned_v = TPB_V_SHAPED, row->tuned_us = row->shp0.med;
        snprintf(row->tuned_name, sizeof row->tuned_name, "shaped %.30s", row->cand0);
    }
    for (int v = 0; v < TPB_MAX_COUR; v++) {
        const tpb_cour *rc = &row->cour[v];
        if (isfinite(rc->pick_ms) && isfinite(rc->shp.med) &&
            !(rc->pick_ms * 1e3 >= best)) {
            best = rc->pick_ms * 1e3;
            row->tuned_v = TPB_V_COUR + 2 * v + 1, row->tuned_us = rc->shp.med;
            snprintf(row->tuned_name, sizeof row->tuned_name, "shaped_c%d %.24s", rc->n,
                     rc->cand);
        }
    }
    if (isfinite(row->ovl_pilot_us) && !(row->ovl_pilot_us >= best)) {
        row->tuned_v = TPB_V_OVERLAP, row->tuned_us = row->ovl.med;
        snprintf(row->tuned_name, sizeof row->tuned_name, "overlapped C=%d", row->ovl_chunks);
    }
}

/* After the rounds: the bound over the fastest compute alone (the fused kernel's local control
 * or the cuBLAS GEMMs), the fastest variant other than a tuned pick, and comm/compute. */
static void tpb_row_totals(tpb_row *row)
{
    const double comp = isfinite(row->cublas_us) && row->cublas_us < row->local_us
                            ? row->cublas_us : row->local_us;
    row->bound_us = comp > row->comm_us ? comp : row->comm_us;
    row->comm_over_compute = row->comm_us / comp;
    const struct { const char *name; double us; } v[] = {
        {"naive", row->nai.med}, {"shaped", row->shp0.med}, {"unfused", row->unf.med},
        {"overlapped", row->ovl.med}};
    row->best_other_us = NAN;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (isfinite(v[i].us) && !(v[i].us >= row->best_other_us)) {
            row->best_other_us = v[i].us;
            snprintf(row->best_other, sizeof row->best_other, "%s", v[i].name);
        }
    for (int c = 0; c < TPB_MAX_COUR; c++) {
        const tpb_cour *rc = &row->cour[c];
        const double u[2] = {rc->nai.med, rc->shp.med};
        for (int k = 0; k < 2; k++)
            if (isfinite(u[k]) && !(u[k] >= row->best_other_us)) {
                row->best_other_us = u[k];
                snprintf(row->best_other, sizeof row->best_other, "%s_c%d", k ? "shaped" : "naive",
                         rc->n);
            }
    }
    /* auto's time: its own runs, or the median of the variant run with the same parameters */
    const double med[TPB_NV] = {
        row->nai.med, row->shp0.med, row->unf.med,
#define TPB_C2(v) row->cour[v].nai.med, row->cour[v].shp.med
        TPB_C2(0), TPB_C2(1), TPB_C2(2),
#undef TPB_C2
        row->ovl.med, row->aut.med};
    static_assert(TPB_MAX_COUR == 3 && TPB_NV == 11, "one median per variant");
    if (row->auto_v >= 0)
        row->auto_us = med[row->auto_v];
    tpb_tuned(row);
}

/* ---- the rounds: the variants of one configuration ------------------------------------------- */

/* The configuration under way, for the rounds' callbacks. */
typedef struct {
    const tpb_ctx *cx;
    xs_tp *t;
    tpb_row *row;
    xs_tp_run_opts ro;
    int printed[TPB_NV]; /* a variant's first wrong run printed */
} tpb_point;

/* The plan slot of variant v: naive 0, shaped 1 (unfused, overlapped: none), courier count v'
 * naive 3 + 2v', shaped 4 + 2v'. */
static int tpb_slot(int v)
{
    if (v >= TPB_V_COUR && v < TPB_V_OVERLAP)
        return v - TPB_V_COUR + 3;
    return v == TPB_V_SHAPED ? 1 : 0;
}

/* xs_bench_rounds.run: one run of variant v. */
static xs_status tpb_round_run(void *x, int v, int round, double *us)
{
    tpb_point *p = (tpb_point *)x;
    float ms = 0;
    (void)round;
    if (v == TPB_V_OVERLAP || v == TPB_V_AUTO)
        XS_TRY(xs_tp_run_overlapped(p->t, p->cx->cb,
                                    v == TPB_V_AUTO ? p->row->auto_chunks : p->row->ovl_chunks,
                                    1, p->cx->e->stream, &ms));
    else
        XS_TRY(tpb_run(p->cx, p->t, tpb_slot(v), &p->ro, v == TPB_V_UNFUSED, &ms));
    *us = ms * 1e3;
    return XS_OK;
}

/* xs_bench_rounds.verify: every byte of the run just made (verified()). */
static xs_status tpb_round_verify(void *x, int v, int round, int *ok)
{
    static const char *const what[TPB_V_COUR] = {"naive", "shaped", "unfused"};
    tpb_point *p = (tpb_point *)x;
    char buf[48];
    (void)round;
    if (v == TPB_V_OVERLAP || v == TPB_V_AUTO)
        snprintf(buf, sizeof buf, "%soverlapped, %d chunks", v == TPB_V_AUTO ? "auto: " : "",
                 v == TPB_V_AUTO ? p->row->auto_chunks : p->row->ovl_chunks);
    else if (v >= TPB_V_COUR)
        snprintf(buf, sizeof buf, "%s, %d couriers", (v - TPB_V_COUR) % 2 ? "shaped" : "naive",
                 p->row->cour[(v - TPB_V_COUR) / 2].n);
    *ok = verified(p->t, p->row, v >= TPB_V_COUR ? buf : what[v], &p->printed[v],
                   &p->row->max_err);
    return XS_OK;
}

/* The timed rounds of the variants that are on (the courier ones for the cour_run planned
 * counts), every run verified; the
 * row's statistics, and over the ranks the verdict and the slowest rank's medians. */
static xs_status tpb_rounds(tpb_point *p, const xs_tp_info *in, int cour_run, int pick, int *ok)
{
    const tpb_ctx *cx = p->cx;
    const int n = cx->e->c->b.iters;
    static const char *const name[TPB_NV] = {"naive",     "shaped",    "unfused",
                                              "naive_c1",  "shaped_c1", "naive_c2",
                                              "shaped_c2", "naive_c3",  "shaped_c3",
                                              "overlapped", "auto"};
    static_assert(TPB_NV == 11, "one name per variant");
    xs_bench_variant var[TPB_NV];
    for (int v = 0; v < TPB_NV; v++) {
        var[v].name = name[v]; /* courier variants by their place in --couriers */
        var[v].on = v < TPB_V_COUR || (v - TPB_V_COUR) / 2 < cour_run;
    }
    var[TPB_V_OVERLAP].on = p->row->ovl_chunks > 0;
    var[TPB_V_AUTO].on = p->row->auto_v == TPB_V_AUTO;
    xs_bench_rounds r = xs_bench_rounds_default(cx->e, tpb_round_run, tpb_round_verify, p);
    double *x = (double *)malloc(sizeof(double) * TPB_NV * (size_t)n);
    if (!x)
        return xs_seterr(XS_ENOMEM, "out of host memory");
    int okv[TPB_NV];
    p->ro.local = 0;
    const xs_status st = xs_bench_rounds_run(&r, var, TPB_NV, x, okv);
    if (st == XS_OK) {
        for (int v = 0; v < TPB_NV; v++)
            *ok &= okv[v];
        tpb_row_stats(p->row, x, n, pick);
    }
    free(x);
    XS_TRY(st);
    /* verified only when every rank verified; the slowest rank's medians */
    const double med[3] = {p->row->nai.med, p->row->shp.med, p->row->unf.med};
    return xs_bench_agree_verdict(cx->e, ok, &p->row->max_err, med, p->row->rank_max, 3);
}

/* The problem of a configuration: the context (engine, courier pace and rate, slot layout,
 * the collectives with real peers), its size columns and the fp32 reference. */
static xs_status tpb_setup(tpb_point *p, const xs_wintab *tab, uint32_t seed, xs_tp_info *in)
{
    const tpb_ctx *cx = p->cx;
    const tpb_opts *o = cx->o;
    tpb_row *row = p->row;
    XS_TRY(xs_tp_create(&row->s, tab, cx->grid, seed, &p->t));
    XS_TRY(xs_tp_set_engine(p->t, o->engine));
    XS_TRY(xs_tp_set_courier_pace(p->t, TPB_COURIER_PACE * cx->prof->drain_bytes_per_ns));
    XS_TRY(xs_tp_set_courier_rate(p->t, XS_TP_COURIER_RATE));
    /* row-major reduce-scatter slots: a tile lands as 128 runs of 512 B */
    XS_TRY(xs_tp_set_slot_layout(p->t, XS_TP_LAYOUT_ROW));
    if (cx->e->coll) {
        const xs_tp_coll tc = {cx->e->coll, tpb_all_gather, tpb_reduce_scatter, tpb_alltoall};
        xs_tp_set_coll(p->t, &tc);
    }
    xs_tp_get_info(p->t, in);
    row->grid = cx->grid;
    row->tiles = in->tiles[0] + (in->ngemm > 1 ? in->tiles[1] : 0);
    row->remote_mb = (in->ag_remote_bytes + in->rs_remote_bytes) / 1e6;
    row->comm_us = (in->ag_remote_bytes + in->rs_remote_bytes) / cx->prof->drain_bytes_per_ns /
                   1e3;
    return xs_tp_reference(p->t, cx->cb);
}

/* One configuration into p->row: the local control, the planner (pilots), the local shaped
 * control, the courier family, then the timed rounds. *verified = every run of it verified
 * (on every rank). A failed call returns its status (the sweep prints it under the label). */
static xs_status tpb_config(tpb_point *p, const xs_wintab *tab, uint32_t seed, int *verified)
{
    const tpb_ctx *cx = p->cx;
    tpb_row *row = p->row;
    int ok = 1, pr_l = 0, cour_run = 0, pick = -1;
    xs_tp_info in;
    xs_tp_costs cost;
    xs_tp_pred pn;
    memset(&pn, 0, sizeof pn);
    *verified = 0;
    XS_TRY(tpb_setup(p, tab, seed, &in));

    /* ---- local control, natural order: the GEMM-alone time, task costs, the expectation ---- */
    XS_TRY(tpb_local_naive(cx, p->t, row, &p->ro, &cost, &ok, &pr_l));
    if (!ok) {
        fprintf(stderr, "xstage: error: %s %s m=%d P=%d: the local control run is wrong; the "
                "fused variants are not timed\n", xs_tp_op_name(row->op), row->model, row->s.m,
                row->s.peers);
        return XS_OK; /* a row with wrong data (agreed over the ranks: all go on) */
    }

    /* ---- planner: naive and candidate shaped orders, each predicted by the model ---- */
    XS_TRY(xs_tp_predict(xs_tp_plan_of(p->t), 0, cx->prof, &cost, 1, &pn));
    row->crit_ok = pn.criterion_ok;
    snprintf(row->how, sizeof row->how, "%s", pn.how);
    XS_TRY(tpb_plan_default(cx, p->t, row, &p->ro, &cost, &pn, &ok));

    /* ---- local control, shaped order: the bound takes the faster of the two ---- */
    XS_TRY(tpb_local_shaped(cx, p->t, row, &p->ro, &cost, &pn, &in, &ok, &pr_l));
    row->local_tflops = in.flops / (row->local_us * 1e-6) / 1e12;
    row->bound_us = row->local_us > row->comm_us ? row->local_us : row->comm_us;
    {
        /* without pushes the first remote byte exists once the first tile of the
         * reduce-scattered GEMM is done: one measured tile time of fill */
        const double fill = in.ag ? 0.0 : cost.tile_ns[in.rs_gemm >= 0 ? in.rs_gemm : 0] / 1e3;
        row->floor_us = row->local_us > fill + row->comm_us ? row->local_us : fill + row->comm_us;
    }
    /* ---- couriers (--couriers): orders for grid - N compute CTAs, and the family's pick ---- */
    XS_TRY(tpb_plan_family(cx, p->t, row, &in, &cost, &ok, &cour_run, &pick));

    /* ---- the overlapped unfused pipeline: its chunk count ---- */
    XS_TRY(tpb_plan_overlap(cx, p->t, row, &in, &ok));
    tpb_auto(row); /* from the model alone, before any variant is timed */

    /* ---- the variants, interleaved round by round ---- */
    XS_TRY(tpb_rounds(p, &in, cour_run, pick, &ok));
    tpb_row_totals(row);
    row->ok = 1;
    row->verified = *verified = ok;
    return XS_OK;
}

/* ---- the sweep ------------------------------------------------------------------------------- */

/* The sweep's state: the rows grouped by peer count, one window set per group. */
typedef struct {
    tpb_ctx cx;
    const tpb_row *rows;
    int nrows;
    int P;                 /* peer count of the open window set (0: none) */
    xs_winset *ws;
    const xs_wintab *tab;
    int bad_P;             /* virtual peers whose windows could not be opened (0: none) */
    xs_status bad_st;
    char bad[320];         /* that failure's line, repeated for the group's other rows */
    const xs_bench_table *t; /* the columns (a row that did not run: xs_bench_row_blank) */
} tpb_sweep;

/* The window set of row i's peer count, sized for the group's largest configuration: opened
 * when the peer count changes (the previous group's closed). */
static xs_status tpb_windows(tpb_sweep *sw, int i)
{
    const int P = sw->rows[i].s.peers;
    xs_bench_env *e = sw->cx.e;
    if (P == sw->P)
        return XS_OK;
    if (P == sw->bad_P)
        return xs_seterr(sw->bad_st, "%s", sw->bad);
    if (sw->ws)
        xs_win_close(sw->ws);
    sw->ws = NULL, sw->tab = NULL, sw->P = 0, e->ws = NULL;
    size_t bytes = 0;
    int nflags = 1;
    for (int j = i; j < sw->nrows; j++) {
        if (sw->rows[j].s.peers != P)
            continue;
        xs_tp_info in;
        xs_tp_info_of(&sw->rows[j].s, &in);
        bytes = in.window_bytes > bytes ? in.window_bytes : bytes;
        nflags = in.nflags > nflags ? in.nflags : nflags;
    }
    xs_win_opts wo;
    memset(&wo, 0, sizeof wo);
    wo.target = e->real ? XS_TARGET_PEER : XS_TARGET_VIRTUAL;
    wo.virtual_peers = P;
    wo.bytes = bytes;
    wo.nflags = nflags;
    wo.device = e->c->b.device;
    const xs_status st = xs_win_open(&wo, &sw->ws);
    if (st != XS_OK) {
        snprintf(sw->bad, sizeof sw->bad, "%d %s peers with %.1f MB windows: %s", P,
                 e->real ? "real" : "virtual", bytes / 1e6, xs_errmsg());
        sw->ws = NULL, sw->bad_P = P, sw->bad_st = st;
        return xs_seterr(st, "%s", sw->bad);
    }
    sw->tab = xs_win_table(sw->ws);
    sw->P = P;
    e->ws = e->real ? sw->ws : NULL; /* real peers: the barriers around every run */
    if (e->real && (sw->tab->nranks != P || sw->tab->rank != e->me))
        return xs_seterr(XS_EINVAL, "bench tp: peer windows of %d ranks (rank %d) for %d ranks "
                         "(rank %d)", sw->tab->nranks, sw->tab->rank, P, e->me);
    return XS_OK;
}

/* A row of the declared grid that does not run: no measurement, its status. */
static void tpb_blank(const tpb_sweep *sw, tpb_row *row, const char *status)
{
    tpb_row_init(sw->cx.o, row);
    xs_bench_row_blank(sw->t, row);
    row->ran = row->ok = row->verified = 0;
    row->grid = row->tiles = 0;
    snprintf(row->status, sizeof row->status, "%s", status);
}

/* xs_bench_sweep.unrun (--grid declared): point i failed or was not started. */
static void tpb_unrun(void *ctx, int i, void *rowp, const char *status)
{
    tpb_blank((const tpb_sweep *)ctx, (tpb_row *)rowp, status);
}

/* --grid declared, before point i runs (its windows open): 1 with the row's status "skipped:
 * ..." when it cannot run here: a shape the kernel refuses (build_rows), or more device memory
 * than is free (xs_grid_tp_bytes against cudaMemGetInfo; this rank's window, already open,
 * left out); 0 to run it. */
static int tpb_cannot_run(const tpb_sweep *sw, tpb_row *row)
{
    char why[sizeof row->status];
    if (!strncmp(row->status, "skipped:", 8)) {
        snprintf(why, sizeof why, "%s", row->status);
        tpb_blank(sw, row, why);
        return 1;
    }
    xs_tp_info in;
    size_t dev = 0, host = 0, free_b = 0, total_b = 0;
    if (xs_tp_info_of(&row->s, &in) != XS_OK || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        return 0; /* the run reports it */
    xs_grid_tp_bytes(&in, row->s.m, &dev, &host);
    dev = dev > in.window_bytes ? dev - in.window_bytes : 0;
    if (dev <= free_b)
        return 0;
    snprintf(why, sizeof why, "skipped: needs %.1f GiB > %.1f GiB free (estimate, "
             "xs_grid_tp_bytes)", dev / 1073741824.0, free_b / 1073741824.0);
    tpb_blank(sw, row, why);
    return 1;
}

/* xs_bench_sweep.point: configuration i. */
static xs_status tpb_point_run(void *ctx, int i, void *rowp, int *verified)
{
    tpb_sweep *sw = (tpb_sweep *)ctx;
    tpb_row *row = (tpb_row *)rowp;
    const int declared = sw->cx.o->grid;
    tpb_row_init(sw->cx.o, row);
    row->ran = 1;
    /* a shape the kernel refuses is skipped before its windows are opened */
    if (declared && !strncmp(row->status, "skipped:", 8) && tpb_cannot_run(sw, row)) {
        *verified = XS_BENCH_CANNOT_RUN;
        return XS_OK;
    }
    XS_TRY(tpb_windows(sw, i));
    if (declared && tpb_cannot_run(sw, row)) {
        *verified = XS_BENCH_CANNOT_RUN;
        return XS_OK;
    }
    const uint32_t seed = sw->cx.e->c->b.seed ^
                          xs_mix32((uint32_t)row->index * 2654435761u + 17u);
    tpb_point p;
    memset(&p, 0, sizeof p);
    p.cx = &sw->cx;
    p.row = row;
    p.ro.timeout_ns = (unsigned long long)(sw->cx.e->c->timeout_s * 1e9);
    p.ro.flush_l2 = 1; /* the flush sits between xs_tp_run's own poison and its events */
    xs_status st = tpb_config(&p, sw->tab, seed, verified);
    xs_tp_destroy(p.t);
    if (declared && st == XS_ECUDA && strstr(xs_errmsg(), "out of memory")) {
        /* cudaErrorMemoryAllocation is not sticky: the row says so and the sweep goes on */
        char why[sizeof row->status];
        snprintf(why, sizeof why, "skipped: out of device memory: %s", xs_errmsg());
        cudaGetLastError();
        tpb_blank(sw, row, why);
        *verified = XS_BENCH_CANNOT_RUN;
        return XS_OK;
    }
    if (st == XS_OK)
        snprintf(row->status, sizeof row->status, "%s", *verified ? "ok" : "failed: wrong data");
    return st;
}

static void tpb_label(void *ctx, int i, char *buf, size_t n)
{
    const tpb_sweep *sw = (const tpb_sweep *)ctx;
    const tpb_row *r = &sw->rows[i];
    char row[24] = "";
    if (sw->cx.o->grid)
        snprintf(row, sizeof row, "grid row %d: ", r->index);
    snprintf(buf, n, "%s%s %s m=%d n=%d k=%d P=%d", row, xs_tp_op_name(r->op), r->model, r->s.m,
             r->s.n, r->s.k, r->s.peers);
}

/* The report and the sweep over rows[0..nrows); returns the exit status, *abort = 1 when the
 * collectives must be aborted (a failure ended the sweep, or an interrupt). */
static int tpb_sweep_all(xs_bench_env *e, const tpb_opts *o, const xs_profile *prof,
                         xs_cublas *cb, tpb_row *rows, int nrows, int argc, char **argv,
                         int *abort)
{
    static xs_bench_col cols[TPB_MAX_COLS];
    static xs_bench_table t;
    xs_bench_report rep;
    *abort = 1;
    if (xs_bench_table_init(&t, cols, tpb_cols(o, cols)) != XS_OK ||
        xs_bench_report_open(&rep, "bench tp", &t, stdout, e->c->csv, e->c->json) != XS_OK)
        return xs_cli_fail();
    xs_bench_report_header(&rep, e, argc, argv);
    tpb_report_notes(&rep, e, o, prof);
    xs_bench_report_begin(&rep);
    tpb_sweep sw;
    memset(&sw, 0, sizeof sw);
    sw.cx.e = e, sw.cx.cb = cb, sw.cx.prof = prof, sw.cx.o = o, sw.cx.grid = e->gi.sm_count;
    sw.rows = rows, sw.nrows = nrows;
    sw.t = &t;
    xs_bench_sweep s;
    memset(&s, 0, sizeof s);
    s.npoints = nrows, s.rows = rows, s.row_bytes = sizeof *rows;
    s.point = tpb_point_run, s.label = tpb_label, s.detail = tpb_detail, s.ctx = &sw;
    s.unrun = o->grid ? tpb_unrun : NULL;
    xs_bench_sweep_hooks(&s, e);
    xs_bench_tally tally;
    xs_bench_sweep_run(&s, &rep, &tally);
    /* after a failure that ended a -g run the teardown is not collective: the rank exits */
    if (sw.ws && !(tally.stopped && e->real))
        xs_win_close(sw.ws);
    e->ws = NULL;
    xs_bench_report_end(&rep);
    if (!tally.interrupted)
        tpb_summary(&rep, rows, nrows);
    if (o->grid) {
        int nok = 0, nskip = 0, nfail = 0, nlate = 0;
        for (int i = 0; i < nrows; i++) {
            nok += !strcmp(rows[i].status, "ok");
            nskip += !strncmp(rows[i].status, "skipped:", 8);
            nfail += !strncmp(rows[i].status, "failed:", 7);
            nlate += !strncmp(rows[i].status, "not run:", 8);
        }
        xs_bench_report_note(&rep, "declared grid: rows %d..%d of %d: %d ok, %d skipped (cannot "
                             "run here), %d failed, %d not run (--max-time), %d without a row",
                             o->rows_lo, o->rows_hi - 1, XS_GRID_TP_ROWS, nok, nskip, nfail,
                             nlate, nrows - nok - nskip - nfail - nlate);
    }
    xs_bench_report_note(&rep, "wall time %.1f s", xs_now_s() - e->t0);
    *abort = tally.stopped || tally.interrupted;
    return xs_bench_sweep_close(&rep, &tally, nrows);
}

/* ---- entry ----------------------------------------------------------------------------------- */

/* A rank of -g N chooses the default engine on its GPU; --engine sm90 needs compute
 * capability 9.0. */
static xs_status tpb_device_check(const xs_bench_env *e, tpb_opts *o)
{
    if (e->real && !o->engine_set) {
        tp_engine_default(o, e->gi.device);
        XS_TRY(tp_check_engine(o));
    }
    if (o->engine != XS_TP_ENGINE_SM90)
        return XS_OK;
    int major = 0, minor = 0;
    XS_CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, e->gi.device));
    XS_CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, e->gi.device));
    if (major != 9 || minor != 0)
        return xs_seterr(XS_EINVAL, "--engine sm90: device %d has compute capability %d.%d, "
                         "not 9.0", e->gi.device, major, minor);
    return XS_OK;
}

extern "C" int xs_bench_tp(int argc, char **argv)
{
    tpb_opts o;
    memset(&o, 0, sizeof o);
    xs_bench_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.cmd = "bench tp";
    spec.about = tp_about;
    spec.shortopts = "o:m:p:";
    spec.longopts = tp_long;
    spec.help = tp_help();
    spec.opt = tp_opt;
    spec.ctx = &o;
    spec.iters = 5, spec.warmup = 1, spec.quick_iters = 3, spec.max_iters = XS_BENCH_MAX_ITERS;
    spec.seed = 12345, spec.timeout_s = 2, spec.max_time_s = 200;
    xs_bench_common c;
    int rc = xs_bench_parse(&spec, argc, argv, &c);
    if (rc)
        return rc < 0 ? 0 : rc;
    xs_profile prof;
    if (!(c.b.gpus_set && c.b.gpus > 1))
        tp_engine_default(&o, c.b.device);
    if (tp_check(&o, &c) != XS_OK || xs_profile_args_resolve(&c.b.pa, &prof) != XS_OK)
        return xs_cli_fail();
    tpb_row *rows = (tpb_row *)calloc(TPB_MAX_ROWS, sizeof *rows);
    int nrows = 0;
    if (!rows)
        return xs_cli_failf("out of host memory");
    /* the shapes are checked before any GPU is touched (one line for a bad one) */
    if (build_rows(&o, c.quick, prof.drain_bytes_per_ns, rows, &nrows) != XS_OK) {
        free(rows);
        return xs_cli_fail();
    }
    xs_bench_env e;
    if ((rc = xs_bench_start(&e, &c, c.b.gpus_set && c.b.gpus > 1)) >= 0) {
        free(rows); /* the launching parent (the ranks' status), or a failure */
        return rc;
    }
    xs_cublas *cb = NULL;
    int abort = 1;
    if (tpb_device_check(&e, &o) != XS_OK || xs_cublas_open(&cb) != XS_OK)
        rc = xs_cli_fail();
    else
        rc = tpb_sweep_all(&e, &o, &prof, cb, rows, nrows, argc, argv, &abort);
    xs_cublas_close(cb);
    xs_bench_stop(&e, abort);
    free(rows);
    return rc;
}
