/*
 * tools/bench/tp.cu - `xstage bench tp`: fused GEMM + reduce-scatter, fused all-gather + GEMM and the
 * fused TP MLP block, against the unfused sequence, on one GPU with virtual peers, or (-g N)
 * on N GPUs, one rank per GPU, with real peers (docs/MULTIGPU.md).
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
 * The planner builds the naive and several shaped orders as burst-gap schedules (producers =
 * CTAs, one row per step of grid tasks, bytes = the step's remote bytes, gaps = the local run's
 * measured task times) and predicts each with the event model (xs_simulate) on the profile; its
 * four most promising candidates (and the naive order) get one verified pilot run each and the
 * fastest becomes `shaped` (the model's own choice is reported next to it).
 * Times are CUDA events around each launch or sequence (completion: includes the drain of the
 * remote stores), medians of -n iterations after -w warm-up, L2 flushed before each, the three
 * variants interleaved iteration by iteration. Every run is verified: the first local run
 * against an fp32 cuBLAS reference (relative Frobenius <= 1e-2, every row <= 2e-2), every later
 * run bitwise against it, every byte that crossed PCIe read back by the CPU at its destination
 * together with its signal. docs/TP.md defines the columns.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tp/tp.h"
#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_cuda.h"
#include "xstage_launch.h"
#include "xstage_sigint.h"
#include "xstage_pattern.h"
#include "xstage_win.h"

#include "tp_bench.h"

/* ---- options -------------------------------------------------------------------------------- */

static int parse_list(const char *opt, const char *s, long lo, long hi, int *out, int *n)
{
    return xs_parse_list(opt, s, 1, lo, hi, out, TPB_MAX_LIST, n) != XS_OK ? xs_cli_fail() : 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: xstage bench tp [options]\n"
            "Tensor parallelism on one GPU with virtual peers (rank 0 in HBM, ranks 1..P-1 in\n"
            "pinned host memory over PCIe): fused GEMM + reduce-scatter (gemm_rs), all-gather +\n"
            "GEMM (ag_gemm) and the TP MLP block (mlp), naive and shaped, against cuBLAS + the\n"
            "collective; every byte that crosses the link is verified at its destination.\n"
            "  -o, --op LIST         gemm_rs,ag_gemm,mlp or all [all]\n"
            "      --model LIST      llama3-8b,llama3-70b,llama3-405b or all [all]; gemm_rs is the\n"
            "                        down projection (n=H, k=I), ag_gemm the gate+up projection\n"
            "                        (n=2I, k=H), mlp the block (n=H, k=I)\n"
            "  -m, --m LIST          tokens (K suffix ok) [per model: 8b 8K,16K; 70b 4K,8K;\n"
            "                        405b 2K,4K]\n"
            "      --n LIST, --k LIST  explicit full layer widths instead of --model (all pairs)\n"
            "  -p, --peers LIST      ranks, this one included [per operation and model: the\n"
            "                        two of 2,4,8,16 whose compute / PCIe time is nearest 1]\n"
            "  -n, --iters N         timed iterations of each variant [5]\n"
            "  -w, --warmup N        warm-up iterations [1]\n"
            "      --engine mma|sm90 the fused kernel's tile engine: mma.sync (cuda/gemm.cuh) or\n"
            "                        wgmma/TMA (cuda/gemm_sm90.cuh, H100/H200; stored orders\n"
            "                        only, no streamed stores) [mma]\n"
            "      --slots row|tile|both  layout of the reduce-scatter slots: row-major (a tile\n"
            "                        lands as 128 runs of 512 B) or tile-major (one contiguous\n"
            "                        run per tile); both: naive and shaped also run tile-major\n"
            "                        in the same iterations (columns *_tile_us) [row]\n"
            "      --couriers LIST   sm90 only: courier counts (1..16, at most %d) the planner\n"
            "                        weighs against the default kernel (shaped = the fastest\n"
            "                        pilot of the family), all timed in the same iterations; 0\n"
            "                        alone: the default kernel only. The last N CTAs\n"
            "                        of the grid push the all-gather chunks, then copy the\n"
            "                        remote tiles that the other CTAs stage in HBM (docs/TP.md\n"
            "                        \"Couriers (sm90)\"); columns\n"
            "                        naive_cN_us, shaped_cN_us, ... [4,6,8 with sm90, else none]\n"
            "      --courier-pace F  the couriers together issue at most F x the profile's R\n"
            "                        (0: unpaced); a few SMs paced at 0.74-1.0 of the link\n"
            "                        slow no SM, unpaced above R they slow all; 0.98 beat\n"
            "                        0.95 and 1.0 on gemm_rs (docs/TP.md) [0.98]\n"
            "      --courier-rate B  one courier's copy rate (B/ns) in the courier prediction\n"
            "                        (0: no limit); fitted on one H200 run, not calibrated [%.1f]\n"
            "      --split LIST      gemm_rs, couriers, virtual peers: the planner also pilots\n"
            "                        the front order with its first remote tiles split along\n"
            "                        k in these part counts (2..8; 1: none), so the link\n"
            "                        starts after part of a tile (docs/TP.md, \"Split first\n"
            "                        steps\") [2,4,8]\n"
            "      --pick model|measure  shaped order: the model's best candidate, or the fastest\n"
            "                        of a verified pilot run of the model's candidates [measure]\n"
            "      --pilot-reps N    runs per pilot (1..%d, every one verified); the median\n"
            "                        decides [3]\n"
            "      --timeout S       bound of every device-side wait, seconds [2]\n"
            "      --max-time S      skip the remaining configurations after S seconds [200]\n"
            "      --seed N          input seed [12345]\n"
            "  -d, --device N        CUDA device [0]\n"
            "  -g, --gpus N          N ranks, one process per GPU (rank r on GPU r), the peers\n"
            "                        are the ranks (P = N, real windows; docs/MULTIGPU.md);\n"
            "                        -g 1 is the one-GPU bench (virtual peers)\n"
            "      --csv FILE        write the rows as CSV (with '#' header lines)\n"
            "      --quick           fewer shapes (one token count, fewer peers), -n 3\n"
            "      --profile FILE    calibrated profile (JSON); default: embedded H200 PCIe\n"
            "      --set NAME=VALUE  override a numeric profile field (repeatable)\n"
            "  -h, --help\n", TPB_MAX_COUR, XS_TP_COURIER_RATE, TPB_MAX_PILOT_REPS);
}

static int parse_opts(int argc, char **argv, tpb_opts *o)
{
    memset(o, 0, sizeof *o);
    o->common.iters = 5, o->common.warmup = 1;
    o->common.seed = 12345, o->timeout_s = 2, o->max_time_s = 200;
    o->cour_pace = 0.98;
    o->cour_rate = XS_TP_COURIER_RATE;
    o->split[0] = 2, o->split[1] = 4, o->split[2] = 8, o->nsplit = 3;
    o->pilot_reps = 3;
    int ops_set = 0, models_set = 0;
    enum { OPT_MODEL = XS_OPT_FIRST_FREE, OPT_N, OPT_K, OPT_PICK, OPT_TIMEOUT, OPT_MAXTIME,
           OPT_ENGINE, OPT_SLOTS, OPT_COURIERS, OPT_COURIER_PACE, OPT_COURIER_RATE, OPT_SPLIT,
           OPT_PILOT_REPS };
    static const struct option lo[] = {
        {"op", required_argument, 0, 'o'},        {"model", required_argument, 0, OPT_MODEL},
        {"m", required_argument, 0, 'm'},         {"n", required_argument, 0, OPT_N},
        {"k", required_argument, 0, OPT_K},       {"peers", required_argument, 0, 'p'},
        {"iters", required_argument, 0, 'n'},     {"warmup", required_argument, 0, 'w'},
        {"pick", required_argument, 0, OPT_PICK}, {"timeout", required_argument, 0, OPT_TIMEOUT},
        {"max-time", required_argument, 0, OPT_MAXTIME},
        {"engine", required_argument, 0, OPT_ENGINE},
        {"slots", required_argument, 0, OPT_SLOTS},
        {"couriers", required_argument, 0, OPT_COURIERS},
        {"courier-pace", required_argument, 0, OPT_COURIER_PACE},
        {"courier-rate", required_argument, 0, OPT_COURIER_RATE},
        {"split", required_argument, 0, OPT_SPLIT},
        {"pilot-reps", required_argument, 0, OPT_PILOT_REPS},
        {"seed", required_argument, 0, XS_OPT_SEED}, {"device", required_argument, 0, 'd'},
        {"csv", required_argument, 0, XS_OPT_CSV}, {"quick", no_argument, 0, XS_OPT_QUICK},
        {"profile", required_argument, 0, XS_OPT_PROFILE},
        {"gpus", required_argument, 0, 'g'},
        {"set", required_argument, 0, XS_OPT_SET}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    long v;
    double d;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:m:p:n:w:d:g:h", lo, NULL)) != -1) {
        switch (c) {
        case 'o': {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            o->nops = 0;
            for (char *sv = NULL, *tok = strtok_r(buf, ",", &sv); tok;
                 tok = strtok_r(NULL, ",", &sv)) {
                if (!strcmp(tok, "all")) {
                    for (int i = 0; i < XS_TP_NOPS; i++)
                        o->ops[i] = i;
                    o->nops = XS_TP_NOPS;
                    continue;
                }
                xs_tp_op op;
                if (xs_tp_op_parse(tok, &op) != XS_OK)
                    return xs_cli_fail();
                if (o->nops >= XS_TP_NOPS)
                    return xs_cli_failf("--op: at most %d operations", XS_TP_NOPS);
                o->ops[o->nops++] = (int)op;
            }
            if (!o->nops)
                return xs_cli_failf("--op: empty list");
            ops_set = 1;
            break;
        }
        case OPT_MODEL: {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            o->nmodels = 0;
            for (char *sv = NULL, *tok = strtok_r(buf, ",", &sv); tok;
                 tok = strtok_r(NULL, ",", &sv)) {
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
                    return xs_cli_failf("--model '%s': unknown (llama3-8b, llama3-70b, "
                                        "llama3-405b or all)", tok);
                if (o->nmodels >= XS_TP_NMODELS)
                    return xs_cli_failf("--model: at most %d models", XS_TP_NMODELS);
                o->models[o->nmodels++] = found;
            }
            models_set = 1;
            break;
        }
        case 'm':
            if (parse_list("--m", optarg, 1, 1 << 24, o->m, &o->nm))
                return 1;
            break;
        case OPT_N:
            if (parse_list("--n", optarg, 1, 1 << 24, o->n, &o->nn))
                return 1;
            break;
        case OPT_K:
            if (parse_list("--k", optarg, 1, 1 << 24, o->k, &o->nk))
                return 1;
            break;
        case 'p':
            if (parse_list("--peers", optarg, 1, XS_MAX_RANKS, o->peers, &o->npeers))
                return 1;
            break;
        case 'n':
        case 'w':
        case 'd':
        case 'g':
        case XS_OPT_SEED:
        case XS_OPT_PROFILE:
        case XS_OPT_SET:
            if (xs_parse_bench_opt(c, optarg, TPB_MAX_ITERS, &o->common) < 0)
                return xs_cli_fail();
            break;
        case OPT_PICK:
            if (!strcmp(optarg, "model"))
                o->model_pick = 1;
            else if (!strcmp(optarg, "measure"))
                o->model_pick = 0;
            else
                return xs_cli_failf("--pick '%s': expected model or measure", optarg);
            break;
        case OPT_TIMEOUT:
            if (xs_parse_double("--timeout", optarg, 1e-4, 600, &d) != XS_OK)
                return xs_cli_fail();
            o->timeout_s = d;
            break;
        case OPT_MAXTIME:
            if (xs_parse_double("--max-time", optarg, 1, 1e6, &d) != XS_OK)
                return xs_cli_fail();
            o->max_time_s = d;
            break;
        case OPT_ENGINE:
            if (xs_tp_engine_parse(optarg, &o->engine) != XS_OK)
                return xs_cli_failf("--engine '%s': expected mma or sm90", optarg);
            break;
        case OPT_SLOTS:
            if (!strcmp(optarg, "row"))
                o->slots = TPB_SLOTS_ROW;
            else if (!strcmp(optarg, "tile"))
                o->slots = TPB_SLOTS_TILE;
            else if (!strcmp(optarg, "both"))
                o->slots = TPB_SLOTS_BOTH;
            else
                return xs_cli_failf("--slots '%s': expected row, tile or both", optarg);
            break;
        case OPT_COURIERS: {
            int v[TPB_MAX_LIST], nv = 0;
            o->cour_set = 1;
            if (xs_parse_list("--couriers", optarg, 0, 0, XS_TP_COURIERS_MAX, v, TPB_MAX_LIST,
                              &nv) != XS_OK)
                return xs_cli_fail();
            o->ncour = 0;
            for (int i = 0; i < nv; i++) {
                if (v[i] == 0) /* the default kernel: always run */
                    continue;
                for (int j = 0; j < o->ncour; j++)
                    if (o->cour[j] == v[i])
                        return xs_cli_failf("--couriers: %d given twice", v[i]);
                if (o->ncour == TPB_MAX_COUR)
                    return xs_cli_failf("--couriers: at most %d courier counts besides 0",
                                        TPB_MAX_COUR);
                o->cour[o->ncour++] = v[i];
            }
            break;
        }
        case OPT_COURIER_PACE:
            if (xs_parse_double("--courier-pace", optarg, 0, 2, &o->cour_pace) != XS_OK)
                return xs_cli_fail();
            break;
        case OPT_COURIER_RATE:
            if (xs_parse_double("--courier-rate", optarg, 0, 1000, &o->cour_rate) != XS_OK)
                return xs_cli_fail();
            if (o->cour_rate > 0 && o->cour_rate < 0.1)
                return xs_cli_failf("--courier-rate %g: 0 (no limit) or 0.1..1000 B/ns",
                                    o->cour_rate);
            break;
        case OPT_PILOT_REPS: {
            long v = 0;
            if (xs_parse_int("--pilot-reps", optarg, 1, TPB_MAX_PILOT_REPS, &v) != XS_OK)
                return xs_cli_fail();
            o->pilot_reps = (int)v;
            break;
        }
        case OPT_SPLIT: {
            int v[TPB_MAX_LIST], nv = 0;
            if (xs_parse_list("--split", optarg, 0, 1, XS_TP_SPLIT_MAX, v, TPB_MAX_LIST, &nv) !=
                XS_OK)
                return xs_cli_fail();
            o->nsplit = 0;
            for (int i = 0; i < nv; i++) {
                if (v[i] == 1) /* whole tiles: the plain front order, always piloted */
                    continue;
                for (int j = 0; j < o->nsplit; j++)
                    if (o->split[j] == v[i])
                        return xs_cli_failf("--split: %d given twice", v[i]);
                if (o->nsplit == 3)
                    return xs_cli_failf("--split: at most 3 part counts besides 1");
                o->split[o->nsplit++] = v[i];
            }
            break;
        }
        case XS_OPT_CSV: o->csv = optarg; break;
        case XS_OPT_QUICK: o->quick = 1; break;
        case 'h': usage(stdout); return -1;
        default: usage(stderr); return 1;
        }
    }
    if (optind < argc)
        return xs_cli_failf("bench tp: unexpected argument '%s'", argv[optind]);
    if (!o->cour_set && o->engine == XS_TP_ENGINE_SM90) {
        /* the planner's family on sm90: the default kernel and 4, 6 and 8 couriers (on the
         * H200, 6 couriers won 9 of 36 rows, mostly compute-bound ones, where 8 cost the compute
         * 8 SMs and 4 copied too slowly; bench/results/tp/) */
        o->cour[0] = 4, o->cour[1] = 6, o->cour[2] = 8;
        o->ncour = 3;
    }
    if (o->ncour > 0 && o->engine != XS_TP_ENGINE_SM90)
        return xs_cli_failf("--couriers: needs --engine sm90 (the mma engine streams its remote "
                            "stores through the next main loop instead)");
    {
        /* -g 1 is the one-GPU bench (its --peers are virtual); with N > 1 the ranks are the
         * peers */
        const xs_gpus_conflict cf[] = {
            {"--device", o->common.device_set, "rank r runs on GPU r"},
            {"--peers", o->common.gpus > 1 && o->npeers > 0,
             "with -g the ranks are the peers: P = the number of GPUs"}};
        if (xs_gpus_check("bench tp", o->common.gpus_set, o->common.gpus, cf, 2) != XS_OK)
            return xs_cli_fail();
        if (o->common.gpus > 1) {
            o->peers[0] = o->common.gpus;
            o->npeers = 1;
        }
    }
    if ((o->nn > 0) != (o->nk > 0))
        return xs_cli_failf("bench tp: --n and --k go together (explicit layer widths)");
    if (o->nn && models_set)
        return xs_cli_failf("bench tp: --model and --n/--k are alternatives");
    if (o->nn && !o->nm)
        return xs_cli_failf("bench tp: --n/--k need --m (tokens)");
    if (o->nn && !o->npeers)
        return xs_cli_failf("bench tp: --n/--k need --peers");
    if (!ops_set) {
        for (int i = 0; i < XS_TP_NOPS; i++)
            o->ops[i] = i;
        o->nops = XS_TP_NOPS;
    }
    if (!models_set && !o->nn) {
        for (int i = 0; i < XS_TP_NMODELS; i++)
            o->models[i] = i;
        o->nmodels = XS_TP_NMODELS;
    }
    if (o->quick && !o->common.iters_set)
        o->common.iters = 3;
    return 0;
}

/* ---- configurations -------------------------------------------------------------------------- */

/* The full layer widths of an op on a model: gemm_rs the down projection, ag_gemm gate+up. */
static int build_rows(const tpb_opts *o, double drain, tpb_row **out, int *nout)
{
    int cap = 256, n = 0;
    tpb_row *rows = (tpb_row *)calloc((size_t)cap, sizeof *rows);
    if (!rows)
        return xs_cli_failf("out of host memory");
#define ADD_ROW(op_, model_, m_, n_, k_, p_)                                                  \
    do {                                                                                      \
        if (n == cap) {                                                                       \
            free(rows);                                                                       \
            return xs_cli_failf("bench tp: more than %d configurations", cap);                \
        }                                                                                     \
        tpb_row *r_ = &rows[n++];                                                             \
        r_->op = (xs_tp_op)(op_), r_->model = (model_);                                       \
        r_->s.op = (xs_tp_op)(op_), r_->s.m = (m_), r_->s.n = (n_), r_->s.k = (k_);           \
        r_->s.peers = (p_);                                                                   \
        xs_tp_info in_;                                                                       \
        if (xs_tp_info_of(&r_->s, &in_) != XS_OK) {                                           \
            free(rows);                                                                       \
            return xs_cli_fail();                                                             \
        }                                                                                     \
    } while (0)
    for (int oi = 0; oi < o->nops; oi++) {
        const xs_tp_op op = (xs_tp_op)o->ops[oi];
        if (o->nn) {
            for (int a = 0; a < o->nm; a++)
                for (int b = 0; b < o->nn; b++)
                    for (int c = 0; c < o->nk; c++)
                        for (int p = 0; p < o->npeers; p++)
                            ADD_ROW(op, "custom", o->m[a], o->n[b], o->k[c], o->peers[p]);
            continue;
        }
        for (int mi = 0; mi < o->nmodels; mi++) {
            const xs_tp_model *md = xs_tp_model_at(o->models[mi]);
            int nn = 0, kk = 0;
            xs_tp_model_nk(op, md, &nn, &kk);
            int ms[TPB_MAX_LIST], nms = 0, ps[TPB_MAX_LIST], nps = 0;
            if (o->nm) {
                memcpy(ms, o->m, sizeof(int) * o->nm);
                nms = o->nm;
            } else {
                ms[nms++] = md->tokens[0];
                if (!o->quick)
                    ms[nms++] = md->tokens[1];
            }
            for (int a = 0; a < nms; a++) {
                if (o->npeers) {
                    memcpy(ps, o->peers, sizeof(int) * o->npeers);
                    nps = o->npeers;
                } else {
                    nps = xs_tp_default_peers(op, md, ms[a], drain,
                                              o->engine == XS_TP_ENGINE_SM90 ? TPB_SM90_TFLOPS
                                                                             : TPB_ENGINE_TFLOPS,
                                              o->quick ? 1 : 2, ps);
                }
                for (int p = 0; p < nps; p++)
                    ADD_ROW(op, md->name, ms[a], nn, kk, ps[p]);
            }
        }
    }
#undef ADD_ROW
    *out = rows;
    *nout = n;
    return 0;
}

/* ---- statistics ------------------------------------------------------------------------------- */

typedef struct {
    double med, min, max;
} tpb_stat;

static tpb_stat stat_of(const double *x, int n)
{
    tpb_stat s = {xs_median(x, (size_t)n), xs_min(x, (size_t)n), xs_max(x, (size_t)n)};
    return s;
}


/* ---- one configuration ----------------------------------------------------------------------- */

typedef struct {
    cudaStream_t s;
    xs_cublas *cb;
    const xs_profile *prof;
    const tpb_opts *o;
    int grid;
    /* -g N, N > 1: real peers (NULL otherwise). The ranks walk every configuration in lockstep:
     * every decision that could differ between ranks (costs, pilot set and choice, skips) is
     * agreed through the collectives, every fused or unfused run sits between two barriers. */
    xs_coll *coll;
    xs_winset *ws;
} tpb_ctx;

enum { TPB_BARRIER_MS = 120000 }; /* ranks drift by a configuration's host-side work, not more */

/* A failed library call inside a configuration: print it, mark the row, leave the row. With
 * real peers the rank then stops the run (the others would wait for it in the next barrier). */
#define ROW_TRY(call)                                                                          \
    do {                                                                                       \
        if ((call) != XS_OK) {                                                                 \
            fprintf(stderr, "xstage: error: %s %s m=%d n=%d k=%d P=%d: %s\n",                  \
                    xs_tp_op_name(row->op), row->model, row->s.m, row->s.n, row->s.k,          \
                    row->s.peers, xs_errmsg());                                                \
            ok = 0;                                                                            \
            row->failed = 1;                                                                   \
            goto out;                                                                          \
        }                                                                                      \
    } while (0)

/* ---- real peers (-g N): the collectives behind xs_tp_coll, runs between barriers ---------- */

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
 * stores are in place before the owner verifies). */
static xs_status tpb_run(const tpb_ctx *cx, xs_tp *t, int slot, const xs_tp_run_opts *ro,
                         int unfused, float *ms)
{
    const int sync = cx->ws && (unfused || !ro->local);
    if (sync)
        XS_TRY(xs_win_barrier(cx->ws, TPB_BARRIER_MS));
    XS_TRY(unfused ? xs_tp_run_unfused(t, cx->cb, cx->s, ms) : xs_tp_run(t, slot, ro, cx->s, ms));
    if (sync)
        XS_TRY(xs_win_barrier(cx->ws, TPB_BARRIER_MS));
    return XS_OK;
}

/* 1 when the list hash h is among seen[0..n): a list already measured (small problems: most
 * candidates coincide). */
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

/* Real peers: v[0..n) becomes the maximum over the ranks (no-op otherwise). */
static xs_status tpb_agree_max(const tpb_ctx *cx, double *v, int n)
{
    return cx->coll ? xs_coll_max(cx->coll, v, n) : XS_OK;
}

/* Real peers: every rank takes rank 0's v[0..n) (values >= -1; a max in which the others send
 * -2). */
static xs_status tpb_agree_rank0(const tpb_ctx *cx, double *v, int n)
{
    if (!cx->coll)
        return XS_OK;
    if (xs_coll_rank(cx->coll) != 0)
        for (int i = 0; i < n; i++)
            v[i] = -2;
    return xs_coll_max(cx->coll, v, n);
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
 * TPB_MAX_PILOT slots) and model choice *choice, and must_run[i] becomes whether pilot i's list
 * is new on any rank (naive's list, in slot sn, counts as seen; slot 2 is overwritten). */
static xs_status tpb_agree_pilot_set(const tpb_ctx *cx, xs_tp *t, int sn, const xs_tp_pace *cand,
                                     const xs_tp_costs *cost, int nfix, int *pilot, int *np,
                                     int *choice, int *must_run)
{
    if (!cx->coll)
        return XS_OK;
    double v[2 + TPB_MAX_PILOT];
    v[0] = *np;
    v[1] = *choice;
    for (int i = 0; i < nfix; i++)
        v[2 + i] = i < *np ? pilot[i] : -1;
    XS_TRY(tpb_agree_rank0(cx, v, 2 + nfix));
    *np = (int)v[0];
    *choice = (int)v[1];
    for (int i = 0; i < *np; i++)
        pilot[i] = (int)v[2 + i];
    /* a list is run when it is new on any rank */
    double nd[TPB_MAX_PILOT];
    unsigned long long seen[TPB_MAX_PILOT + 1];
    int nseen = 0;
    seen[nseen++] = xs_tp_order_hash(xs_tp_plan_of(t), sn);
    for (int i = 0; i < *np; i++) {
        XS_TRY(xs_tp_order_shaped(xs_tp_plan_of(t), 2, &cand[pilot[i]], cost, cx->prof));
        nd[i] = tpb_new_list(t, seen, &nseen);
    }
    XS_TRY(tpb_agree_max(cx, nd, *np > 0 ? *np : 1));
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
    double v[TPB_MAX_PILOT_REPS];
    double dummy = 0;
    const int n = cx->o->pilot_reps;
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
    if (cx->coll) {
        /* the fastest by the slowest rank's time: the same choice on every rank */
        double v[TPB_MAX_PILOT + 1];
        for (int i = 0; i < npr; i++)
            v[i] = pilot_ms[i];
        XS_TRY(tpb_agree_max(cx, v, npr));
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
 * the fastest of a verified pilot run of its candidates (or the model's best, --pick model) into
 * slot ss, both built for grid - N compute CTAs (xs_tp_set_couriers; the context's own count is
 * 0 again afterwards). Candidates: the stored shaped ones and the ring ones stored (the sm90
 * engine's set) and the front-loaded order (xs_tp_pace_front: remote tiles as early as they are
 * ready, this rank's own tiles last), and for gemm_rs with virtual peers the front one with its
 * head split along k (--split); the pilot takes the front ones, the model's best, the three
 * ring ones and two stored ones. The prediction: local_us * grid / (grid - N) + (model - ideal) of
 * xs_tp_predict's fluid model for courier orders. Real peers: the same lockstep rules as the
 * default planner (rank 0's model decides the pilot set, a list runs when it is new on any rank,
 * the fastest by the slowest rank's time). Verification failures clear *ok. */
static xs_status plan_couriers(const tpb_ctx *cx, xs_tp *t, const tpb_row *row, tpb_cour *rc,
                               int sn, int ss, const xs_tp_costs *cost, int *ok)
{
    const tpb_opts *o = cx->o;
    const int N = rc->n, Gc = cx->grid - N;
    xs_tp_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.timeout_ns = (unsigned long long)(o->timeout_s * 1e9);
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
     * front one with its first remote tiles split along k (--split), so that the link starts
     * after part of a tile (docs/TP.md "Split first steps"); the kernel verifies split tiles
     * against the reference only with virtual peers */
    int front, fsplit[3];
    const int nc = xs_tp_courier_candidates(0.9 * xs_capacity(cx->prof, Gc), o->split,
                                            row->op == XS_TP_GEMM_RS && !cx->coll ? o->nsplit : 0,
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
    int model_choice = mbest >= 0 && pred[mbest] < pn.model_ns ? mbest : -1;
    XS_TRY(tpb_agree_pilot_set(cx, t, sn, cand, cost, NFIX, pilot, &np, &model_choice,
                               must_run));
    rc->pilot[0] = 0;
    rc->pick_ms = NAN;
    if (o->model_pick) {
        best = model_choice;
    } else {
        char tag[32];
        snprintf(tag, sizeof tag, ", %d couriers", N);
        XS_TRY(tpb_pilot_runs(cx, t, row, sn, &ro, cand, cost, pilot, np, must_run, tag, NULL,
                              rc->pilot, sizeof rc->pilot, ok, &best, &rc->pick_ms));
    }
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

/* A row before its runs: ran, its engine, nothing chosen, every courier column nan. */
static void tpb_row_init(const tpb_opts *o, tpb_row *row)
{
    for (int v = 0; v < TPB_MAX_COUR; v++) {
        tpb_cour *rc = &row->cour[v];
        rc->n = v < o->ncour ? o->cour[v] : 0;
        rc->nai = rc->nai_min = rc->nai_max = rc->shp = rc->shp_min = rc->shp_max = NAN;
        rc->shp_pred = rc->pick_ms = NAN;
        snprintf(rc->cand, sizeof rc->cand, "-");
        rc->pilot[0] = 0;
    }
    row->ran = 1;
    row->engine = o->engine;
    row->max_err = 0;
    snprintf(row->cand, sizeof row->cand, "-");
    snprintf(row->cand0, sizeof row->cand0, "-");
    row->pilot[0] = 0;
    row->shp_cour = 0;
    row->shp0 = row->shp0_min = row->shp0_max = row->shp0_pred = row->pick_ms = NAN;
}

/* The default kernel's planner (slot 1): the candidate shaped orders ranked by the model,
 * the naive order (slot 0, predicted as *pn) and the pilot set run and verified (or with --pick
 * model, the model's best), the chosen one built into slot 1; row->cand, pilot, pick_ms and
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
    if (cx->coll) {
        int choice = pred[order[0]] < pn->model_ns ? order[0] : -1;
        XS_TRY(tpb_agree_pilot_set(cx, t, 0, cand, cost, TPB_NFIXED, pilot, &np, &choice,
                                    must_run));
        if (o->model_pick)
            best = choice;
    }
    row->pick_ms = NAN;
    if (o->model_pick && !cx->coll) {
        best = pred[order[0]] < pn->model_ns ? order[0] : -1;
    } else if (!o->model_pick) {
        ro->local = 0;
        /* naive first (its run also warms the virtual windows up), then the candidates */
        XS_TRY(tpb_pilot_runs(cx, t, row, 0, ro, cand, cost, pilot, np, must_run, "",
                               " (chosen by the slowest rank's time)", row->pilot,
                               sizeof row->pilot, ok, &best, &row->pick_ms));
    }
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

/* The row's medians and spreads from the timed iterations x[v][0..n) (naive, shaped, unfused,
 * tile naive, tile shaped - tiles: measured -, then naive and shaped of each of the cour_run
 * courier counts), and the planner's choice `pick` (-1: the default kernel) as `shaped`. */
static void tpb_row_stats(tpb_row *row, double *const *x, int n, int tiles, int cour_run,
                          int pick)
{
    tpb_stat a = stat_of(x[0], n), b = stat_of(x[1], n), c = stat_of(x[2], n);
    row->nai = a.med, row->nai_min = a.min, row->nai_max = a.max;
    row->shp = b.med, row->shp_min = b.min, row->shp_max = b.max;
    row->unf = c.med, row->unf_min = c.min, row->unf_max = c.max;
    if (tiles) {
        tpb_stat d = stat_of(x[3], n), e = stat_of(x[4], n);
        row->nai_t = d.med, row->nai_t_min = d.min, row->nai_t_max = d.max;
        row->shp_t = e.med, row->shp_t_min = e.min, row->shp_t_max = e.max;
    } else {
        /* not measured (no --slots both, or no reduce-scatter to lay out: ag_gemm) */
        row->nai_t = row->nai_t_min = row->nai_t_max = NAN;
        row->shp_t = row->shp_t_min = row->shp_t_max = NAN;
    }
    for (int v = 0; v < cour_run; v++) {
        tpb_cour *rc = &row->cour[v];
        tpb_stat d = stat_of(x[5 + 2 * v], n), e = stat_of(x[6 + 2 * v], n);
        rc->nai = d.med, rc->nai_min = d.min, rc->nai_max = d.max;
        rc->shp = e.med, rc->shp_min = e.min, rc->shp_max = e.max;
    }
    /* shaped: the planner's choice (the same timed runs as its own column) */
    row->shp0 = row->shp, row->shp0_min = row->shp_min, row->shp0_max = row->shp_max;
    row->shp0_pred = row->shp_pred;
    snprintf(row->cand0, sizeof row->cand0, "%s", row->cand);
    row->shp_cour = 0;
    if (pick >= 0) {
        const tpb_cour *rc = &row->cour[pick];
        row->shp = rc->shp, row->shp_min = rc->shp_min, row->shp_max = rc->shp_max;
        row->shp_pred = rc->shp_pred;
        row->shp_cour = rc->n;
        snprintf(row->cand, sizeof row->cand, "c%d %.26s", rc->n, rc->cand);
    }
}

/* The local control in natural order (slot 0): the GEMM-alone time (row->local_us), the task
 * costs (*cost) and the expectation; real peers first exchange the sources' verified partials,
 * then take the slowest rank's costs and go on only when every rank's control is right.
 * Verification failures clear *ok. */
static xs_status tpb_local_naive(const tpb_ctx *cx, xs_tp *t, tpb_row *row, xs_tp_run_opts *ro,
                                 xs_tp_costs *cost, int *ok, int *pr_l)
{
    const int n = cx->o->common.iters, W = cx->o->common.warmup;
    XS_TRY(xs_tp_order_naive(xs_tp_plan_of(t), 0));
    XS_TRY(xs_tp_order_check(xs_tp_plan_of(t), 0));
    if (xs_tp_real_peers(t)) {
        /* the sources' verified partials of this rank's rows replace the placed ones: the
         * reference and the local control then hold what the fused runs must receive */
        float ms = 0;
        ro->local = 1;
        XS_TRY(xs_tp_run(t, 0, ro, cx->s, &ms));
        *ok &= verified(t, row, "local (before the exchange)", pr_l, &row->max_err);
        XS_TRY(xs_tp_exchange_expectation(t));
    }
    {
        double loc_n[TPB_MAX_ITERS];
        ro->local = 1;
        for (int i = 0; i < W + n; i++) {
            float ms = 0;
            XS_TRY(xs_tp_run(t, 0, ro, cx->s, &ms));
            *ok &= verified(t, row, "local", pr_l, &row->max_err);
            if (i >= W)
                loc_n[i - W] = ms * 1e3;
        }
        XS_TRY(xs_tp_costs_of_last(t, cost));
        row->local_us = xs_median(loc_n, (size_t)n);
    }
    if (cx->coll) {
        /* one plan for all ranks: the slowest rank's task costs, and go on only when every
         * rank's local control is right */
        double v[5] = {cost->tile_ns[0], cost->tile_ns[1], cost->push_ns, cost->reduce_ns,
                       *ok ? 0.0 : 1.0};
        XS_TRY(tpb_agree_max(cx, v, 5));
        cost->tile_ns[0] = v[0], cost->tile_ns[1] = v[1], cost->push_ns = v[2];
        cost->reduce_ns = v[3];
        *ok = v[4] == 0.0;
    }
    return XS_OK;
}

static void run_config(const tpb_ctx *cx, const xs_wintab *tab, tpb_row *row, uint32_t seed)
{
    const tpb_opts *o = cx->o;
    const int n = o->common.iters, W = o->common.warmup;
    xs_tp *t = NULL;
    int ok = 1, pr_l = 0, pr_n = 0, pr_s = 0, pr_u = 0, pr_nt = 0, pr_st = 0;
    int pr_c[2 * TPB_MAX_COUR];
    const int both = o->slots == TPB_SLOTS_BOTH;
    /* naive, shaped, unfused, tile naive, tile shaped, then naive and shaped per courier count */
    enum { NX = 5 + 2 * TPB_MAX_COUR };
    double *x[NX];
    int xfail = 0;
    for (int i = 0; i < NX; i++) {
        x[i] = (double *)calloc((size_t)n, sizeof(double));
        xfail |= !x[i];
    }
    int cour_run = 0; /* courier counts planned */
    int pick = -1;    /* the planner's choice: -1 the default kernel (slot 1), else courier
                         count v (slot 4 + 2v) */
    for (int v = 0; v < 2 * TPB_MAX_COUR; v++)
        pr_c[v] = 0;
    xs_tp_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.timeout_ns = (unsigned long long)(o->timeout_s * 1e9);
    ro.flush_l2 = 1;
    xs_tp_info in;
    xs_tp_costs cost;
    xs_tp_pred pn, ps;
    memset(&pn, 0, sizeof pn);
    memset(&ps, 0, sizeof ps);
    tpb_row_init(o, row);
    if (xfail) {
        fprintf(stderr, "xstage: error: out of host memory\n");
        ok = 0;
        goto out;
    }
    ROW_TRY(xs_tp_create(&row->s, tab, cx->grid, seed, &t));
    ROW_TRY(xs_tp_set_engine(t, o->engine));
    ROW_TRY(xs_tp_set_courier_pace(t, o->cour_pace * cx->prof->drain_bytes_per_ns));
    ROW_TRY(xs_tp_set_courier_rate(t, o->cour_rate));
    /* both: everything up to the timed loop in row layout; the loop switches per iteration */
    ROW_TRY(xs_tp_set_slot_layout(t, o->slots == TPB_SLOTS_TILE ? XS_TP_LAYOUT_TILE
                                                                : XS_TP_LAYOUT_ROW));
    if (cx->coll) {
        const xs_tp_coll tc = {cx->coll, tpb_all_gather, tpb_reduce_scatter, tpb_alltoall};
        xs_tp_set_coll(t, &tc);
    }
    xs_tp_get_info(t, &in);
    row->grid = cx->grid;
    row->tiles = in.tiles[0] + (in.ngemm > 1 ? in.tiles[1] : 0);
    row->remote_mb = (in.ag_remote_bytes + in.rs_remote_bytes) / 1e6;
    row->comm_us = (in.ag_remote_bytes + in.rs_remote_bytes) / cx->prof->drain_bytes_per_ns / 1e3;
    ROW_TRY(xs_tp_reference(t, cx->cb));

    /* ---- local control, natural order: the GEMM-alone time, task costs, the expectation ---- */
    ROW_TRY(tpb_local_naive(cx, t, row, &ro, &cost, &ok, &pr_l));
    if (!ok) {
        fprintf(stderr, "xstage: error: %s %s m=%d P=%d: the local control run is wrong; the "
                "fused variants are not timed\n", xs_tp_op_name(row->op), row->model, row->s.m,
                row->s.peers);
        goto out;
    }

    /* ---- planner: naive and candidate shaped orders, each predicted by the model ---- */
    ROW_TRY(xs_tp_predict(xs_tp_plan_of(t), 0, cx->prof, &cost, 1, &pn));
    row->crit_ok = pn.criterion_ok;
    snprintf(row->how, sizeof row->how, "%s", pn.how);
    ROW_TRY(tpb_plan_default(cx, t, row, &ro, &cost, &pn, &ok));

    /* ---- local control, shaped order: the bound takes the faster of the two ---- */
    {
        double loc_s[TPB_MAX_ITERS];
        ro.local = 1;
        for (int i = 0; i < W + n; i++) {
            float ms = 0;
            ROW_TRY(xs_tp_run(t, 1, &ro, cx->s, &ms));
            ok &= verified(t, row, "local shaped", &pr_l, &row->max_err);
            if (i >= W)
                loc_s[i - W] = ms * 1e3;
        }
        const double ls = xs_median(loc_s, (size_t)n);
        ROW_TRY(xs_tp_predict(xs_tp_plan_of(t), 1, cx->prof, &cost, 0, &ps));
        row->nai_pred = (row->local_us * 1e3 + (pn.model_ns - pn.ideal_ns)) / 1e3;
        row->shp_pred = (ls * 1e3 + (ps.model_ns - ps.ideal_ns)) / 1e3;
        row->shp_local = ls;
        if (row->pilot[0] && in.rs_gemm >= 0) {
            /* diagnostics: the chosen order once more, every signal raised right after the
             * CTA's next main loop (the eager rule), against the link */
            float ms = 0;
            int pr = 0;
            double dummy = 0;
            ro.local = 0;
            ro.eager_flags = 1;
            ROW_TRY(tpb_run(cx, t, 1, &ro, 0, &ms));
            ok &= verified(t, row, "shaped, eager signals", &pr, &dummy);
            ro.eager_flags = 0;
            ro.local = 1;
            const size_t pl = strlen(row->pilot);
            snprintf(row->pilot + pl, sizeof row->pilot - pl, "; chosen with eager signals %.1f",
                     ms * 1e3);
        }
        if (ls < row->local_us)
            row->local_us = ls;
    }
    row->local_tflops = in.flops / (row->local_us * 1e-6) / 1e12;
    row->bound_us = row->local_us > row->comm_us ? row->local_us : row->comm_us;
    {
        /* without pushes the first remote byte exists once the first tile of the
         * reduce-scattered GEMM is done: one measured tile time of fill */
        const double fill = in.ag ? 0.0 : cost.tile_ns[in.rs_gemm >= 0 ? in.rs_gemm : 0] / 1e3;
        row->floor_us = row->local_us > fill + row->comm_us ? row->local_us : fill + row->comm_us;
    }
    /* ---- couriers (--couriers): orders for grid - N compute CTAs, slots 3 + 2v and 4 + 2v ---- */
    /* (every op has something for them: pushes in ag_gemm and mlp, remote tiles in gemm_rs
     * and mlp) */
    if (in.rs_gemm >= 0 || (in.ag && row->s.peers > 1))
        for (int v = 0; v < o->ncour; v++) {
            ROW_TRY(plan_couriers(cx, t, row, &row->cour[v], 3 + 2 * v, 4 + 2 * v, &cost, &ok));
            cour_run = v + 1;
        }
    /* the planner's choice over the family: the default kernel's shaped order or a courier
     * count's, by the pilot runs (each candidate once, verified; the fastest) or with --pick
     * model by the predictions (the default kernel's burst-gap model against the couriers'
     * fluid one, both on this row's local_us) */
    {
        double best = o->model_pick ? row->shp_pred : row->pick_ms;
        for (int v = 0; v < cour_run; v++) {
            const double c = o->model_pick ? row->cour[v].shp_pred : row->cour[v].pick_ms;
            if (isfinite(c) && (!isfinite(best) || c < best))
                best = c, pick = v;
        }
        if (cx->coll) { /* rank 0's choice: every rank runs the same slots */
            double pv = pick;
            ROW_TRY(tpb_agree_rank0(cx, &pv, 1));
            pick = (int)pv;
        }
    }

    /* ---- the three variants, interleaved iteration by iteration ---- */
    ro.local = 0;
    for (int i = 0; i < W + n; i++) {
        float ms[3] = {0, 0, 0};
        ROW_TRY(tpb_run(cx, t, 0, &ro, 0, &ms[0]));
        ok &= verified(t, row, "naive", &pr_n, &row->max_err);
        ROW_TRY(tpb_run(cx, t, 1, &ro, 0, &ms[1]));
        ok &= verified(t, row, "shaped", &pr_s, &row->max_err);
        ROW_TRY(tpb_run(cx, t, 0, &ro, 1, &ms[2]));
        ok &= verified(t, row, "unfused", &pr_u, &row->max_err);
        if (both && in.rs_gemm >= 0) {
            /* the same two orders with tile-major slots (the placed partials are rewritten in
             * that layout, values unchanged: same inputs, same expectations), then back */
            float mt[2] = {0, 0};
            ROW_TRY(xs_tp_set_slot_layout(t, XS_TP_LAYOUT_TILE));
            ROW_TRY(tpb_run(cx, t, 0, &ro, 0, &mt[0]));
            ok &= verified(t, row, "naive, tile slots", &pr_nt, &row->max_err);
            ROW_TRY(tpb_run(cx, t, 1, &ro, 0, &mt[1]));
            ok &= verified(t, row, "shaped, tile slots", &pr_st, &row->max_err);
            ROW_TRY(xs_tp_set_slot_layout(t, XS_TP_LAYOUT_ROW));
            if (i >= W)
                x[3][i - W] = mt[0] * 1e3, x[4][i - W] = mt[1] * 1e3;
        }
        for (int v = 0; v < cour_run; v++) {
            /* the same configuration with courier CTAs (same inputs, same expectations) */
            float mc[2] = {0, 0};
            char what[48];
            snprintf(what, sizeof what, "naive, %d couriers", row->cour[v].n);
            ROW_TRY(tpb_run(cx, t, 3 + 2 * v, &ro, 0, &mc[0]));
            ok &= verified(t, row, what, &pr_c[2 * v], &row->max_err);
            snprintf(what, sizeof what, "shaped, %d couriers", row->cour[v].n);
            ROW_TRY(tpb_run(cx, t, 4 + 2 * v, &ro, 0, &mc[1]));
            ok &= verified(t, row, what, &pr_c[2 * v + 1], &row->max_err);
            if (i >= W)
                x[5 + 2 * v][i - W] = mc[0] * 1e3, x[6 + 2 * v][i - W] = mc[1] * 1e3;
        }
        if (i >= W)
            for (int v = 0; v < 3; v++)
                x[v][i - W] = ms[v] * 1e3;
    }
    tpb_row_stats(row, x, n, both && in.rs_gemm >= 0, cour_run, pick);
    if (cx->coll) {
        /* verified only when every rank verified; the slowest rank's medians */
        double v[5] = {ok ? 0.0 : 1.0, row->max_err, row->nai, row->shp, row->unf};
        ROW_TRY(tpb_agree_max(cx, v, 5));
        ok = v[0] == 0.0;
        row->max_err = v[1];
        row->rank_max[0] = v[2], row->rank_max[1] = v[3], row->rank_max[2] = v[4];
    }
    row->ok = 1;
out:
    row->verified = ok && row->ok;
    for (int i = 0; i < NX; i++)
        free(x[i]);
    xs_tp_destroy(t);
}
#undef ROW_TRY

/* ---- entry -------------------------------------------------------------------------------------- */

extern "C" int xs_bench_tp(int argc, char **argv)
{
    tpb_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    xs_profile prof;
    if (xs_profile_args_resolve(&o.common.pa, &prof) != XS_OK)
        return xs_cli_fail();
    tpb_row *rows = NULL;
    int nrows = 0;
    if (build_rows(&o, prof.drain_bytes_per_ns, &rows, &nrows))
        return 1;
    /* -g N, N > 1: one rank per GPU (xs_bench_launch, shared with bench ep); this process either
     * launched them and reports their status, or is one of them */
    const int real = o.common.gpus_set && o.common.gpus > 1;
    int me = 0, nranks = 1;
    if (real) {
        int ec = 0, l = xs_bench_launch(o.common.gpus, &ec);
        if ((l = xs_launch_exit(l, ec)) >= 0) {
            free(rows);
            return l;
        }
        int have = 0;
        if (xs_rank_env(&me, &nranks, NULL, &have) != XS_OK) {
            free(rows);
            return xs_cli_fail();
        }
    }
    xs_gpu_info gi;
    if (xs_gpu_open(o.common.device, &gi) != XS_OK) { /* a launched rank: XS_DEVICE */
        free(rows);
        return xs_cli_fail();
    }
    if (o.engine == XS_TP_ENGINE_SM90) {
        int major = 0, minor = 0;
        XS_CHECK_CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, gi.device));
        XS_CHECK_CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, gi.device));
        if (major != 9 || minor != 0) {
            free(rows);
            return xs_cli_failf("--engine sm90: device %d has compute capability %d.%d, not 9.0",
                                gi.device, major, minor);
        }
    }
    xs_coll *coll = NULL;
    if (real && xs_coll_open(&coll) != XS_OK) {
        free(rows);
        return xs_cli_fail();
    }
    xs_cublas *cb = NULL;
    if (xs_cublas_open(&cb) != XS_OK) {
        free(rows);
        xs_coll_close(coll, 1);
        return xs_cli_fail();
    }
    FILE *csv = NULL;
    /* files: rank 0 only (the others' results reach it through the collectives) */
    if (me == 0 && o.csv && !(csv = fopen(o.csv, "w"))) {
        free(rows);
        xs_cublas_close(cb);
        xs_coll_close(coll, 1);
        return xs_cli_failf("--csv %s: cannot open for writing", o.csv);
    }
    tpb_report_header(csv, &gi, &o, &prof, real ? nranks : 0, argc, argv);
    cudaStream_t stream;
    XS_CHECK_CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    tpb_ctx cx = {stream, cb, &prof, &o, gi.sm_count, coll, NULL};
    int fatal = 0; /* real peers: a failed call on this rank ends the run */
    const double t0 = xs_now_s();
    int skipped = 0;
    tpb_table_header();
    /* one window set per peer count, sized for its largest configuration */
    for (int i = 0; i < nrows && !fatal; i++) {
        if (rows[i].ran || rows[i].s.peers == 0 || xs_interrupted())
            continue;
        const int P = rows[i].s.peers;
        size_t bytes = 0;
        int nflags = 1;
        for (int j = i; j < nrows; j++) {
            if (rows[j].s.peers != P)
                continue;
            xs_tp_info in;
            xs_tp_info_of(&rows[j].s, &in);
            bytes = in.window_bytes > bytes ? in.window_bytes : bytes;
            nflags = in.nflags > nflags ? in.nflags : nflags;
        }
        xs_win_opts wo;
        memset(&wo, 0, sizeof wo);
        wo.target = real ? XS_TARGET_PEER : XS_TARGET_VIRTUAL;
        wo.virtual_peers = P;
        wo.bytes = bytes;
        wo.nflags = nflags;
        wo.device = o.common.device;
        xs_winset *ws = NULL;
        if (xs_win_open(&wo, &ws) != XS_OK) {
            fprintf(stderr, "xstage: error: %d %s peers with %.1f MB windows: %s\n", P,
                    real ? "real" : "virtual", bytes / 1e6, xs_errmsg());
            if (real) {
                fatal = 1;
                break;
            }
            for (int j = i; j < nrows; j++)
                if (rows[j].s.peers == P)
                    rows[j].ran = 1; /* counted as run and failed */
            continue;
        }
        const xs_wintab *tab = xs_win_table(ws);
        cx.ws = real ? ws : NULL;
        if (real && (tab->nranks != P || tab->rank != me)) {
            fprintf(stderr, "xstage: error: bench tp: peer windows of %d ranks (rank %d) for "
                    "%d ranks (rank %d)\n", tab->nranks, tab->rank, P, me);
            fatal = 1;
            xs_win_close(ws);
            break;
        }
        for (int j = i; j < nrows; j++) {
            if (rows[j].s.peers != P)
                continue;
            if (xs_interrupted()) /* stop between configurations (xstage_sigint.h) */
                break;
            /* real peers: skipped on every rank when the budget is out on any */
            double late = xs_now_s() - t0 > o.max_time_s;
            if (real && xs_coll_max(coll, &late, 1) != XS_OK) {
                fprintf(stderr, "xstage: error: bench tp: %s\n", xs_errmsg());
                fatal = 1;
                break;
            }
            if (late) {
                skipped++;
                rows[j].s.peers = 0; /* not run */
                continue;
            }
            const uint32_t seed = o.common.seed ^ xs_mix32((uint32_t)j * 2654435761u + 17u);
            run_config(&cx, tab, &rows[j], seed);
            if (real && rows[j].failed) {
                fatal = 1; /* the others wait in a barrier or collective: end the run */
                break;
            }
            if (rows[j].ok)
                tpb_table_row(&rows[j]);
            if (real && rows[j].ok)
                printf("#   ranks: slowest rank's medians, us: naive %.1f, shaped %.1f, unfused "
                       "%.1f\n", rows[j].rank_max[0], rows[j].rank_max[1], rows[j].rank_max[2]);
            if (csv && rows[j].ok) {
                tpb_csv_row(csv, &rows[j], o.slots == TPB_SLOTS_BOTH, o.ncour);
                fflush(csv);
            }
        }
        if (!fatal) /* a failed rank exits; the teardown is collective */
            xs_win_close(ws);
    }
    int nran = 0;
    for (int j = 0; j < nrows; j++)
        nran += rows[j].ran;
    const int intr = xs_interrupted() && nran + skipped < nrows; /* stopped early: no verdict */
    rc = intr ? 1 : tpb_summary(rows, nrows, skipped);
    printf("# wall time %.1f s\n", xs_now_s() - t0);
    if (csv) {
        fprintf(csv, "# %s\n", intr ? "INTERRUPTED: partial results"
                               : rc ? "bench tp FAILED" : "bench tp OK");
        fclose(csv);
    }
    cudaStreamDestroy(stream);
    xs_cublas_close(cb);
    xs_coll_close(coll, fatal || intr);
    free(rows);
    if (fatal)
        return xs_cli_failf("bench tp: rank %d stopped the run after a failed call (above)", me);
    if (intr)
        return xs_cli_failf("interrupted by %s after %d of %d configurations%s",
                            xs_interrupt_name(), nran, nrows, o.csv ? "; partial CSV marked" : "");
    return rc;
}
