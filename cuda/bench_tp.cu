/*
 * bench_tp.cu - `xstage bench tp`: fused GEMM + reduce-scatter, fused all-gather + GEMM and the
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

#include "tp.h"
#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_cuda.h"
#include "xstage_launch.h"
#include "xstage_sigint.h"
#include "xstage_pattern.h"
#include "xstage_win.h"

#define TPB_MAX_LIST 16
#define TPB_MAX_ITERS 1000
#define TPB_MAX_COUR 3 /* --couriers: courier counts besides 0 in one run (slots 3..8) */
/* The tile engine's rate on an H200 (first run: local_tflops 337-375 over 34 rows), used only to
 * pick default peer counts where compute and PCIe traffic are of comparable size. */
#define TPB_ENGINE_TFLOPS 355.0
/* The same for --engine sm90: the plain gemm_sm90 kernel ran at 700-800 TFLOP/s in run 6
 * (bench/results/h200-2026-11-29-r6/gemm90_call1.log); the fused kernel's own rate is not
 * measured yet. About twice the rate halves compute / traffic, so the defaults move to fewer
 * peers. */
#define TPB_SM90_TFLOPS 700.0

/* ---- shapes of public models (config.json of each; docs/TP.md) -------------------------------- */

typedef struct {
    const char *name;
    int hidden, inter;  /* H, I */
    int tokens[2];      /* default token counts (M * H <= 64M: windows of 256 MB at most) */
} tpb_model;

static const tpb_model tpb_models[] = {
    {"llama3-8b", 4096, 14336, {8192, 16384}},
    {"llama3-70b", 8192, 28672, {4096, 8192}},
    {"llama3-405b", 16384, 53248, {2048, 4096}},
};
#define TPB_NMODELS ((int)(sizeof tpb_models / sizeof tpb_models[0]))
/* default peer counts are chosen among these, per operation and model (default_peers) */
static const int tpb_peer_choices[] = {2, 4, 8, 16};
#define TPB_NPEER_CHOICES ((int)(sizeof tpb_peer_choices / sizeof tpb_peer_choices[0]))

typedef struct {
    int ops[XS_TP_NOPS], nops;
    int models[TPB_NMODELS], nmodels;
    int m[TPB_MAX_LIST], nm;
    int n[TPB_MAX_LIST], nn;
    int k[TPB_MAX_LIST], nk;
    int peers[TPB_MAX_LIST], npeers;
    xs_bench_opts common; /* -n, -w, -d, -g N (N > 1 ranks are the peers: real windows) */
    int quick, model_pick;
    double timeout_s, max_time_s;
    const char *csv;
    xs_tp_engine engine; /* --engine: the fused kernel's tile engine */
    int slots;           /* --slots: TPB_SLOTS_ROW, _TILE or _BOTH */
    int cour[TPB_MAX_COUR], ncour; /* --couriers: courier counts run next to the default (0);
                                      default 4,8 on sm90, none on mma */
    int cour_set;                  /* --couriers given */
    double cour_rate;    /* --courier-rate: one courier's copy rate in the prediction, B/ns */
    double cour_pace;    /* --courier-pace: the couriers' pace, a fraction of the profile's R
                            (0 = unpaced) */
    int split[3], nsplit; /* --split: part counts of the split front candidates (gemm_rs with
                             couriers, virtual peers); default 2,4,8; 1 alone: none */
    int pilot_reps;       /* --pilot-reps: runs per pilot, the median decides [3] */
} tpb_opts;
#define TPB_MAX_PILOT_REPS 9

/* --slots: the reduce-scatter slot layout(s) of the fused runs (xs_tp_set_slot_layout) */
enum { TPB_SLOTS_ROW = 0, TPB_SLOTS_TILE = 1, TPB_SLOTS_BOTH = 2 };

/* One courier count of a configuration (--couriers): its naive and chosen shaped orders, built
 * for grid - n compute CTAs, timed in the same iterations as the rows' default runs. */
typedef struct {
    int n;                                       /* courier CTAs */
    double nai, nai_min, nai_max, shp, shp_min, shp_max; /* us; nan: not run */
    double shp_pred;   /* us: local_us * grid / (grid - n) + (model - ideal), the fluid model of
                          xs_tp_predict for courier orders */
    char cand[32];     /* the chosen order: naive or a pace label (f0.05/b0.0/ring: the front one) */
    char pilot[512];   /* "naive <us>, <label> <us>, ...": its pilot runs */
    double pick_ms;    /* the chosen order's pilot time (real peers: the slowest rank's), ms;
                          nan with --pick model */
} tpb_cour;

/* One configuration and its results. */
typedef struct {
    xs_tp_op op;
    const char *model;
    xs_tp_shape s;
    int grid, tiles, ok, ran, verified;
    double remote_mb, local_tflops;
    double unf, unf_min, unf_max, nai, nai_min, nai_max, shp, shp_min, shp_max; /* us */
    double nai_t, nai_t_min, nai_t_max, shp_t, shp_t_min, shp_t_max; /* --slots both: the same
                                        orders with tile-major slots, us */
    double local_us, bound_us, comm_us, nai_pred, shp_pred;                    /* us */
    double shp_local; /* the chosen shaped order against HBM windows (no link): what the order
                         and its streaming cost the GEMM itself, us */
    double floor_us; /* max(local, fill + comm): nothing to send before the first partial tile
                        when the op has no all-gather (docs/TP.md, columns) */
    int crit_ok, model_rank;
    char cand[32];
    char pilot[512]; /* "naive <us>, <label> <us>, ...": the pilot runs, one each */
    double max_err;
    char how[256];
    int failed;                      /* a library call failed (not a wrong result) */
    double rank_max[3];              /* -g N: the slowest rank's medians naive, shaped, unfused */
    xs_tp_engine engine;             /* the fused kernel's tile engine (--engine) */
    tpb_cour cour[TPB_MAX_COUR];     /* --couriers: the same iterations with courier CTAs */
    /* the planner's choice over the family (docs/TP.md "Couriers (sm90)"): shp, shp_pred and
     * cand are the chosen order's; the default kernel's shaped order is kept here */
    int shp_cour;                    /* courier count of the chosen order (0: default kernel) */
    double shp0, shp0_min, shp0_max; /* the default kernel's shaped order, us */
    double shp0_pred;                /* its prediction, us */
    char cand0[32];                  /* its pace label */
    double pick_ms;                  /* its pilot time (real peers: the slowest rank's), ms */
} tpb_row;

/* The pace's short name: f<finish>/b<burst>/<ring|stream4|stream|capQ|nocap>. */
static void pace_label(const xs_tp_pace *p, char *buf, size_t n)
{
    const int l = snprintf(buf, n, "f%.2f/b%.1f/%s", p->finish, p->burst,
                           p->ring             ? "ring"
                           : p->spread == 2    ? "stream4"
                           : p->spread         ? "stream"
                           : p->cap_bytes > 0  ? "capQ"
                                               : "nocap");
    if (p->split > 1 && l > 0 && (size_t)l < n)
        snprintf(buf + l, n - (size_t)l, "/split%d", p->split);
}

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
            "                        (0: unpaced); run 8's probe: a few SMs paced at 0.74-1.0\n"
            "                        of the link slow no SM, unpaced above R they slow all;\n"
            "                        run 9: 0.98 beat 0.95 and 1.0 on gemm_rs [0.98]\n"
            "      --courier-rate B  one courier's copy rate (B/ns) in the courier prediction\n"
            "                        (0: no limit); fitted on run 8 call 4, not calibrated [%.1f]\n"
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
                for (int i = 0; i < TPB_NMODELS; i++)
                    if (!strcmp(tok, tpb_models[i].name) || !strcmp(tok, tpb_models[i].name + 7))
                        found = i;
                if (!strcmp(tok, "all")) {
                    for (int i = 0; i < TPB_NMODELS; i++)
                        o->models[i] = i;
                    o->nmodels = TPB_NMODELS;
                    continue;
                }
                if (found < 0)
                    return xs_cli_failf("--model '%s': unknown (llama3-8b, llama3-70b, "
                                        "llama3-405b or all)", tok);
                if (o->nmodels >= TPB_NMODELS)
                    return xs_cli_failf("--model: at most %d models", TPB_NMODELS);
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
        /* the planner's family on sm90: the default kernel and 4, 6 and 8 couriers (run 9 call
         * 3: 6 couriers won 9 of 36 rows, mostly compute-bound ones, where 8 cost the compute
         * 8 SMs and 4 copied too slowly) */
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
        for (int i = 0; i < TPB_NMODELS; i++)
            o->models[i] = i;
        o->nmodels = TPB_NMODELS;
    }
    if (o->quick && !o->common.iters_set)
        o->common.iters = 3;
    return 0;
}

/* ---- configurations -------------------------------------------------------------------------- */

/* The full layer widths of an op on a model: gemm_rs the down projection, ag_gemm gate+up. */
static void model_nk(xs_tp_op op, const tpb_model *md, int *n, int *k)
{
    switch (op) {
    case XS_TP_GEMM_RS: *n = md->hidden, *k = md->inter; break;
    case XS_TP_AG_GEMM: *n = 2 * md->inter, *k = md->hidden; break;
    case XS_TP_MLP: *n = md->hidden, *k = md->inter; break;
    }
}

/* Compute time over PCIe time of one configuration, estimated: the GEMM FLOPs at the engine's
 * rate against the bytes this rank sends at the drain rate. Independent of m. */
static double balance_of(const xs_tp_shape *s, double drain_bytes_per_ns, double tflops)
{
    xs_tp_info in;
    if (xs_tp_info_of(s, &in) != XS_OK)
        return -1;
    const double bytes = in.ag_remote_bytes + in.rs_remote_bytes;
    if (!(bytes > 0))
        return -1;
    return (in.flops / (tflops * 1e3)) / (bytes / drain_bytes_per_ns);
}

/* The default peer counts of an operation on a model: the `want` counts of tpb_peer_choices
 * whose compute / PCIe balance is nearest 1 (the regime where fusing can pay: far from it one
 * side hides the other anyway), in increasing order. The fused kernel can at best reach
 * max(compute, traffic); the unfused sequence costs cuBLAS + traffic. */
static int default_peers(xs_tp_op op, const tpb_model *md, int m, double drain, int want,
                         xs_tp_engine engine, int *out)
{
    const double tflops = engine == XS_TP_ENGINE_SM90 ? TPB_SM90_TFLOPS : TPB_ENGINE_TFLOPS;
    int nn = 0, kk = 0, n = 0;
    double dist[TPB_NPEER_CHOICES];
    model_nk(op, md, &nn, &kk);
    for (int i = 0; i < TPB_NPEER_CHOICES; i++) {
        xs_tp_shape s = {op, m, nn, kk, tpb_peer_choices[i]};
        const double b = balance_of(&s, drain, tflops);
        dist[i] = b > 0 ? fabs(log(b)) : INFINITY;
    }
    for (int k = 0; k < want; k++) {
        int best = -1;
        for (int i = 0; i < TPB_NPEER_CHOICES; i++)
            if (isfinite(dist[i]) && (best < 0 || dist[i] < dist[best]))
                best = i;
        if (best < 0)
            break;
        out[n++] = tpb_peer_choices[best];
        dist[best] = INFINITY;
    }
    for (int i = 1; i < n; i++) /* increasing */
        for (int j = i; j > 0 && out[j] < out[j - 1]; j--) {
            const int x = out[j];
            out[j] = out[j - 1];
            out[j - 1] = x;
        }
    return n;
}

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
            const tpb_model *md = &tpb_models[o->models[mi]];
            int nn = 0, kk = 0;
            model_nk(op, md, &nn, &kk);
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
                    nps = default_peers(op, md, ms[a], drain, o->quick ? 1 : 2, o->engine, ps);
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
    const unsigned long long h = xs_tp_order_hash(t, 2);
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
    seen[nseen++] = xs_tp_order_hash(t, sn);
    for (int i = 0; i < *np; i++) {
        XS_TRY(xs_tp_order_shaped(t, 2, &cand[pilot[i]], cost, cx->prof));
        nd[i] = tpb_new_list(t, seen, &nseen);
    }
    XS_TRY(tpb_agree_max(cx, nd, *np > 0 ? *np : 1));
    for (int i = 0; i < *np; i++)
        must_run[i] = nd[i] != 0.0;
    return XS_OK;
}

/* One pilot's time: the median of --pilot-reps verified runs of slot (ms). Run 9: a single run
 * let noise pick the slower of two orders a few percent apart (8b m=8192 P=2: 8 couriers piloted
 * ahead of 6, then timed 774 against 731 us). */
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
    seen[nseen++] = xs_tp_order_hash(t, sn);
    snprintf(what, sizeof what, "pilot shaped%s", tag);
    for (int i = 0; i < np; i++) {
        XS_TRY(xs_tp_order_shaped(t, 2, &cand[pilot[i]], cost, cx->prof));
        int fresh = tpb_new_list(t, seen, &nseen);
        if (must_run[i] >= 0) /* real peers: new on any rank */
            fresh = must_run[i];
        if (!fresh)
            continue;
        XS_TRY(tpb_pilot_time(cx, t, row, 2, ro, what, ok, &pr, &ms));
        pilot_ms[npr] = ms, pilot_of[npr++] = pilot[i];
        char lab[32];
        pace_label(&cand[pilot[i]], lab, sizeof lab);
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
    XS_TRY(xs_tp_order_naive(t, sn));
    XS_TRY(xs_tp_order_check(t, sn));
    xs_tp_pred pn;
    XS_TRY(xs_tp_predict(t, sn, cx->prof, cost, 0, &pn));
    xs_tp_pace cand[XS_TP_NCAND + 4];
    double pred[XS_TP_NCAND + 4];
    int usable[XS_TP_NCAND + 4];
    int nc = xs_tp_candidates(0.9 * xs_capacity(cx->prof, Gc), cand, XS_TP_NCAND);
    for (int i = 0; i < nc; i++) { /* the sm90 engine stores every tile */
        usable[i] = !cand[i].spread || cand[i].ring;
        cand[i].spread = 0;
    }
    xs_tp_pace_front(&cand[nc]);
    usable[nc++] = 1;
    const int front = nc - 1;
    /* gemm_rs with virtual peers: the front order with its first remote tiles split along k
     * (--split), so that the link starts after part of a tile (docs/TP.md "Split first
     * steps"); the kernel verifies split tiles against the reference only with virtual peers */
    int fsplit[3] = {-1, -1, -1};
    for (int v = 0; v < o->nsplit && row->op == XS_TP_GEMM_RS && !cx->coll; v++) {
        cand[nc] = cand[front];
        cand[nc].split = o->split[v];
        usable[nc] = 1;
        fsplit[v] = nc++;
    }
    int mbest = -1;
    for (int i = 0; i < nc; i++) {
        pred[i] = INFINITY;
        if (!usable[i])
            continue;
        XS_TRY(xs_tp_order_shaped(t, 2, &cand[i], cost, cx->prof));
        XS_TRY(xs_tp_order_check(t, 2));
        xs_tp_pred pp;
        XS_TRY(xs_tp_predict(t, 2, cx->prof, cost, 0, &pp));
        pred[i] = pp.model_ns;
        if (mbest < 0 || pred[i] < pred[mbest])
            mbest = i;
    }
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
        XS_TRY(xs_tp_order_copy(t, ss, sn));
        snprintf(rc->cand, sizeof rc->cand, "naive");
    } else {
        XS_TRY(xs_tp_order_shaped(t, ss, &cand[best], cost, cx->prof));
        XS_TRY(xs_tp_order_check(t, ss));
        pace_label(&cand[best], rc->cand, sizeof rc->cand);
    }
    XS_TRY(xs_tp_predict(t, ss, cx->prof, cost, 0, &ps));
    rc->shp_pred = row->local_us * cx->grid / Gc + (ps.model_ns - ps.ideal_ns) / 1e3;
    return xs_tp_set_couriers(t, 0);
}

static void run_config(const tpb_ctx *cx, const xs_wintab *tab, tpb_row *row, uint32_t seed)
{
    const tpb_opts *o = cx->o;
    const int n = o->common.iters, W = o->common.warmup;
    const int streams = xs_tp_engine_streams(o->engine); /* the engine runs streamed orders */
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
    for (int v = 0; v < TPB_MAX_COUR; v++) {
        tpb_cour *rc = &row->cour[v];
        rc->n = v < o->ncour ? o->cour[v] : 0;
        rc->nai = rc->nai_min = rc->nai_max = rc->shp = rc->shp_min = rc->shp_max = NAN;
        rc->shp_pred = rc->pick_ms = NAN;
        snprintf(rc->cand, sizeof rc->cand, "-");
        rc->pilot[0] = 0;
    }
    xs_tp_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.timeout_ns = (unsigned long long)(o->timeout_s * 1e9);
    ro.flush_l2 = 1;
    xs_tp_info in;
    xs_tp_costs cost;
    xs_tp_pred pn, ps;
    memset(&pn, 0, sizeof pn);
    memset(&ps, 0, sizeof ps);
    row->ran = 1;
    row->engine = o->engine;
    row->max_err = 0;
    snprintf(row->cand, sizeof row->cand, "-");
    snprintf(row->cand0, sizeof row->cand0, "-");
    row->pilot[0] = 0;
    row->shp_cour = 0;
    row->shp0 = row->shp0_min = row->shp0_max = row->shp0_pred = row->pick_ms = NAN;
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
    ROW_TRY(xs_tp_order_naive(t, 0));
    ROW_TRY(xs_tp_order_check(t, 0));
    if (xs_tp_real_peers(t)) {
        /* the sources' verified partials of this rank's rows replace the placed ones: the
         * reference and the local control then hold what the fused runs must receive */
        float ms = 0;
        ro.local = 1;
        ROW_TRY(xs_tp_run(t, 0, &ro, cx->s, &ms));
        ok &= verified(t, row, "local (before the exchange)", &pr_l, &row->max_err);
        ROW_TRY(xs_tp_exchange_expectation(t));
    }
    {
        double loc_n[TPB_MAX_ITERS];
        ro.local = 1;
        for (int i = 0; i < W + n; i++) {
            float ms = 0;
            ROW_TRY(xs_tp_run(t, 0, &ro, cx->s, &ms));
            ok &= verified(t, row, "local", &pr_l, &row->max_err);
            if (i >= W)
                loc_n[i - W] = ms * 1e3;
        }
        ROW_TRY(xs_tp_costs_of_last(t, &cost));
        row->local_us = xs_median(loc_n, (size_t)n);
    }
    if (cx->coll) {
        /* one plan for all ranks: the slowest rank's task costs, and go on only when every
         * rank's local control is right */
        double v[5] = {cost.tile_ns[0], cost.tile_ns[1], cost.push_ns, cost.reduce_ns,
                       ok ? 0.0 : 1.0};
        ROW_TRY(tpb_agree_max(cx, v, 5));
        cost.tile_ns[0] = v[0], cost.tile_ns[1] = v[1], cost.push_ns = v[2];
        cost.reduce_ns = v[3];
        ok = v[4] == 0.0;
    }
    if (!ok) {
        fprintf(stderr, "xstage: error: %s %s m=%d P=%d: the local control run is wrong; the "
                "fused variants are not timed\n", xs_tp_op_name(row->op), row->model, row->s.m,
                row->s.peers);
        goto out;
    }

    /* ---- planner: naive and candidate shaped orders, each predicted by the model ---- */
    ROW_TRY(xs_tp_predict(t, 0, cx->prof, &cost, 1, &pn));
    row->crit_ok = pn.criterion_ok;
    snprintf(row->how, sizeof row->how, "%s", pn.how);
    {
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
        int usable[XS_TP_NCAND];
        for (int i = 0; i < nc; i++) {
            usable[i] = streams || !cand[i].spread || cand[i].ring;
            if (!streams)
                cand[i].spread = 0;
        }
        for (int i = 0; i < nc; i++) {
            if (!usable[i]) {
                pred[i] = INFINITY;
                continue;
            }
            ROW_TRY(xs_tp_order_shaped(t, 2, &cand[i], &cost, cx->prof));
            ROW_TRY(xs_tp_order_check(t, 2));
            xs_tp_pred pp;
            ROW_TRY(xs_tp_predict(t, 2, cx->prof, &cost, 0, &pp));
            pred[i] = pp.model_ns;
        }
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
            int choice = pred[order[0]] < pn.model_ns ? order[0] : -1;
            ROW_TRY(tpb_agree_pilot_set(cx, t, 0, cand, &cost, TPB_NFIXED, pilot, &np, &choice,
                                        must_run));
            if (o->model_pick)
                best = choice;
        }
        row->pick_ms = NAN;
        if (o->model_pick && !cx->coll) {
            best = pred[order[0]] < pn.model_ns ? order[0] : -1;
        } else if (!o->model_pick) {
            ro.local = 0;
            /* naive first (its run also warms the virtual windows up), then the candidates */
            ROW_TRY(tpb_pilot_runs(cx, t, row, 0, &ro, cand, &cost, pilot, np, must_run, "",
                                   " (chosen by the slowest rank's time)", row->pilot,
                                   sizeof row->pilot, &ok, &best, &row->pick_ms));
        }
        /* rank of the chosen order in the model's ranking of naive and the candidates */
        const double chosen = best < 0 ? pn.model_ns : pred[best];
        row->model_rank = 1 + (pn.model_ns < chosen);
        for (int i = 0; i < nc; i++)
            row->model_rank += usable[i] && pred[i] < chosen;
        if (best < 0) {
            ROW_TRY(xs_tp_order_copy(t, 1, 0));
            snprintf(row->cand, sizeof row->cand, "naive");
        } else {
            ROW_TRY(xs_tp_order_shaped(t, 1, &cand[best], &cost, cx->prof));
            ROW_TRY(xs_tp_order_check(t, 1));
            pace_label(&cand[best], row->cand, sizeof row->cand);
        }
    }

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
        ROW_TRY(xs_tp_predict(t, 1, cx->prof, &cost, 0, &ps));
        row->nai_pred = (row->local_us * 1e3 + (pn.model_ns - pn.ideal_ns)) / 1e3;
        row->shp_pred = (ls * 1e3 + (ps.model_ns - ps.ideal_ns)) / 1e3;
        row->shp_local = ls;
        if (row->pilot[0] && in.rs_gemm >= 0) {
            /* diagnostics: the chosen order once more, every signal raised right after the
             * CTA's next main loop (the rule of runs 1-4), against the link */
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
    {
        tpb_stat a = stat_of(x[0], n), b = stat_of(x[1], n), c = stat_of(x[2], n);
        row->nai = a.med, row->nai_min = a.min, row->nai_max = a.max;
        row->shp = b.med, row->shp_min = b.min, row->shp_max = b.max;
        row->unf = c.med, row->unf_min = c.min, row->unf_max = c.max;
        if (both && in.rs_gemm >= 0) {
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

/* ---- report ------------------------------------------------------------------------------------ */

static const char csv_header[] =
    "op,model,m,n,k,peers,grid,tiles,remote_mb,local_tflops,unfused_us,unfused_min_us,"
    "unfused_max_us,naive_us,naive_min_us,naive_max_us,shaped_us,shaped_min_us,shaped_max_us,"
    "local_us,shaped_local_us,comm_us,bound_us,floor_us,naive_pred_us,shaped_pred_us,shaped_order,model_rank,"
    "criterion_ok,unfused_over_shaped,naive_over_shaped,shaped_over_bound,shaped_over_floor,"
    "max_err,verified,engine";
/* appended with --slots both (nan where the op has no reduce-scatter: ag_gemm) */
static const char csv_header_tile[] =
    ",naive_tile_us,naive_tile_min_us,naive_tile_max_us,shaped_tile_us,shaped_tile_min_us,"
    "shaped_tile_max_us";

/* appended with --couriers, per courier count N */
static void csv_header_cour(FILE *f, int nc)
{
    fprintf(f, ",naive_c%d_us,naive_c%d_min_us,naive_c%d_max_us,shaped_c%d_us,shaped_c%d_min_us,"
            "shaped_c%d_max_us,shaped_c%d_pred_us,shaped_c%d_order,shaped_c%d_over_bound,"
            "shaped_c0_over_shaped_c%d", nc, nc, nc, nc, nc, nc, nc, nc, nc, nc);
}
/* appended always: the planner's choice (shaped_us is its time) and the default kernel's
 * shaped order (the whole family's column without couriers) */
static const char csv_header_pick[] =
    ",shaped_couriers,shaped_c0_us,shaped_c0_min_us,shaped_c0_max_us,shaped_c0_pred_us,"
    "shaped_c0_order";

static void csv_row(FILE *f, const tpb_row *r, int both, int ncour)
{
    fprintf(f,
            "%s,%s,%d,%d,%d,%d,%d,%d,%.3f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,"
            "%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%s,%d,%d,%.4f,%.4f,%.4f,%.4f,%.3g,%d,%s",
            xs_tp_op_name(r->op), r->model, r->s.m, r->s.n, r->s.k, r->s.peers, r->grid, r->tiles,
            r->remote_mb, r->local_tflops, r->unf, r->unf_min, r->unf_max, r->nai, r->nai_min,
            r->nai_max, r->shp, r->shp_min, r->shp_max, r->local_us, r->shp_local, r->comm_us,
            r->bound_us,
            r->floor_us, r->nai_pred, r->shp_pred, r->cand, r->model_rank, r->crit_ok,
            r->unf / r->shp, r->nai / r->shp, r->shp / r->bound_us, r->shp / r->floor_us,
            r->max_err, r->verified, xs_tp_engine_name(r->engine));
    if (both)
        fprintf(f, ",%.1f,%.1f,%.1f,%.1f,%.1f,%.1f", r->nai_t, r->nai_t_min, r->nai_t_max,
                r->shp_t, r->shp_t_min, r->shp_t_max);
    for (int v = 0; v < ncour; v++) {
        const tpb_cour *c = &r->cour[v];
        fprintf(f, ",%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%s,%.4f,%.4f", c->nai, c->nai_min,
                c->nai_max, c->shp, c->shp_min, c->shp_max, c->shp_pred, c->cand,
                c->shp / r->bound_us, r->shp0 / c->shp);
    }
    fprintf(f, ",%d,%.1f,%.1f,%.1f,%.1f,%s", r->shp_cour, r->shp0, r->shp0_min, r->shp0_max,
            r->shp0_pred, r->cand0);
    fputc('\n', f);
}

static double spread_pct(double med, double lo, double hi) { return 100.0 * (hi - lo) / med; }

static void table_header(void)
{
    printf("%-7s %-11s %6s %6s %6s %2s %7s %9s %5s %9s %5s %9s %5s %9s %9s %9s %9s %9s %9s "
           "%-17s %6s %6s %6s %6s %3s\n",
           "op", "model", "m", "n", "k", "P", "remote", "unfused", "sprd", "naive", "sprd",
           "shaped", "sprd", "local", "loc_shp", "bound", "floor", "pred_nai", "pred_shp", "shaped order",
           "unf/", "nai/", "shp/", "shp/", "ok");
    printf("%-7s %-11s %6s %6s %6s %2s %7s %9s %5s %9s %5s %9s %5s %9s %9s %9s %9s %9s %9s "
           "%-17s %6s %6s %6s %6s %3s\n",
           "", "", "", "", "", "", "MB", "us", "%", "us", "%", "us", "%", "us", "us", "us", "us",
           "us", "us", "", "shp", "shp", "bound", "floor", "");
}

static void table_row(const tpb_row *r)
{
    printf("%-7s %-11s %6d %6d %6d %2d %7.1f %9.1f %5.1f %9.1f %5.1f %9.1f %5.1f %9.1f %9.1f %9.1f "
           "%9.1f %9.1f %9.1f %-17s %6.3f %6.3f %6.3f %6.3f %3s\n",
           xs_tp_op_name(r->op), r->model, r->s.m, r->s.n, r->s.k, r->s.peers, r->remote_mb, r->unf,
           spread_pct(r->unf, r->unf_min, r->unf_max), r->nai,
           spread_pct(r->nai, r->nai_min, r->nai_max), r->shp,
           spread_pct(r->shp, r->shp_min, r->shp_max), r->local_us, r->shp_local, r->bound_us,
           r->floor_us,
           r->nai_pred, r->shp_pred, r->cand, r->unf / r->shp, r->nai / r->shp,
           r->shp / r->bound_us, r->shp / r->floor_us, r->verified ? "yes" : "NO");
    if (r->pilot[0])
        printf("#   pilot runs, us: %s\n", r->pilot);
    if (isfinite(r->shp_t))
        printf("#   tile slots, us: naive %.1f (%.1f%%), shaped %.1f (%.1f%%); row/tile naive "
               "%.3f, shaped %.3f; shaped/bound %.3f\n", r->nai_t,
               spread_pct(r->nai_t, r->nai_t_min, r->nai_t_max), r->shp_t,
               spread_pct(r->shp_t, r->shp_t_min, r->shp_t_max), r->nai / r->nai_t,
               r->shp / r->shp_t, r->shp_t / r->bound_us);
    if (r->shp_cour > 0 || isfinite(r->cour[0].shp))
        printf("#   planner's choice: %d couriers; default kernel shaped %.1f us (%.1f%%) %s, pred "
               "%.1f\n", r->shp_cour, r->shp0, spread_pct(r->shp0, r->shp0_min, r->shp0_max),
               r->cand0, r->shp0_pred);
    for (int v = 0; v < TPB_MAX_COUR; v++) {
        const tpb_cour *c = &r->cour[v];
        if (!isfinite(c->shp))
            continue;
        printf("#   %d couriers, us: naive %.1f (%.1f%%), shaped %.1f (%.1f%%) %s, pred %.1f; "
               "naive/naive_c %.3f, shaped_c0/shaped_c %.3f; shaped_c/bound %.3f\n", c->n, c->nai,
               spread_pct(c->nai, c->nai_min, c->nai_max), c->shp,
               spread_pct(c->shp, c->shp_min, c->shp_max), c->cand, c->shp_pred, r->nai / c->nai,
               r->shp0 / c->shp, c->shp / r->bound_us);
        if (c->pilot[0])
            printf("#   %d couriers, pilot runs, us: %s\n", c->n, c->pilot);
    }
    fflush(stdout);
}

static void ratio_line(const char *what, const tpb_row *rows, int nrows, int op, int num)
{
    double v[512];
    int n = 0;
    for (int i = 0; i < nrows && n < 512; i++) {
        const tpb_row *r = &rows[i];
        if (!r->ok || (op >= 0 && (int)r->op != op))
            continue;
        v[n++] = (num ? r->nai : r->unf) / r->shp;
    }
    if (!n)
        return;
    printf("# summary: %-7s %s/shaped: geomean %.3f, min %.3f, max %.3f over %d rows\n", what,
           num ? "naive" : "unfused", xs_geomean(v, (size_t)n), xs_min(v, (size_t)n),
           xs_max(v, (size_t)n), n);
}

/* --slots both: row/tile of the naive or shaped medians over the rows of op (> 1: tile-major
 * slots faster). */
static void tile_ratio_line(const tpb_row *rows, int nrows, int op, int shaped)
{
    double v[512];
    int n = 0;
    for (int i = 0; i < nrows && n < 512; i++) {
        const tpb_row *r = &rows[i];
        if (!r->ok || (int)r->op != op || !isfinite(r->shp_t))
            continue;
        v[n++] = shaped ? r->shp / r->shp_t : r->nai / r->nai_t;
    }
    if (!n)
        return;
    printf("# summary: %-7s %s row/tile: geomean %.3f, min %.3f, max %.3f over %d rows\n",
           xs_tp_op_name((xs_tp_op)op), shaped ? "shaped" : "naive", xs_geomean(v, (size_t)n),
           xs_min(v, (size_t)n), xs_max(v, (size_t)n), n);
}

/* --couriers: shaped_c0/shaped_cN (the default kernel's shaped order over N couriers' shaped
 * order; > 1: couriers faster) over the rows of op, the gemm_rs rows within 10 % of bound_us
 * with couriers, and the courier prediction's error. */
static void cour_lines(const tpb_row *rows, int nrows, int v)
{
    int nc = 0;
    for (int op = 0; op < XS_TP_NOPS; op++) {
        double x[512];
        int n = 0;
        for (int i = 0; i < nrows && n < 512; i++) {
            const tpb_row *r = &rows[i];
            if (!r->ok || (int)r->op != op || !isfinite(r->cour[v].shp))
                continue;
            nc = r->cour[v].n;
            x[n++] = r->shp0 / r->cour[v].shp;
        }
        if (n)
            printf("# summary: %-7s shaped_c0/shaped_c%d (%d couriers): geomean %.3f, min %.3f, max "
                   "%.3f over %d rows\n", xs_tp_op_name((xs_tp_op)op), nc, nc,
                   xs_geomean(x, (size_t)n), xs_min(x, (size_t)n), xs_max(x, (size_t)n), n);
    }
    int nrs = 0, nrs10 = 0, npe = 0;
    double worst = 0, pe[512];
    for (int i = 0; i < nrows; i++) {
        const tpb_row *r = &rows[i];
        if (!r->ok || !isfinite(r->cour[v].shp))
            continue;
        if (npe < 512 && isfinite(r->cour[v].shp_pred))
            pe[npe++] = fabs(r->cour[v].shp_pred - r->cour[v].shp) / r->cour[v].shp * 100;
        if (r->op != XS_TP_GEMM_RS)
            continue;
        nrs++;
        nrs10 += r->cour[v].shp <= 1.10 * r->bound_us;
        worst = fmax(worst, r->cour[v].shp / r->bound_us);
    }
    if (nrs)
        printf("# summary: gemm_rs shaped, %d couriers, within 10%% of bound_us in %d of %d rows "
               "(worst %.3f x bound)\n", nc, nrs10, nrs, worst);
    if (npe)
        printf("# summary: %d couriers: shaped prediction error median %.1f%%, max %.1f%%\n", nc,
               xs_median(pe, (size_t)npe), xs_max(pe, (size_t)npe));
}

static int summary(const tpb_row *rows, int nrows, int skipped)
{
    int nok = 0, nran = 0, ntimed = 0, nge = 0, nrs = 0, nrs10 = 0, nrsf10 = 0, nagree = 0;
    int nstream = 0, nrs_t = 0, nrs10_t = 0, ntile = 0;
    double worst_rs = 0, worst_rsf = 0, worst_ge = INFINITY, worst_rs_t = 0;
    double perr[512];
    int npe = 0;
    for (int i = 0; i < nrows; i++) {
        const tpb_row *r = &rows[i];
        if (!r->ran)
            continue;
        nran++;
        nok += r->verified;
        if (!r->ok)
            continue;
        ntimed++;
        ntile += isfinite(r->shp_t) != 0;
        /* within noise: the shaped median no slower than the naive one by more than the larger
         * of the two spreads */
        const double noise = fmax(r->nai_max - r->nai_min, r->shp_max - r->shp_min);
        nge += r->shp <= r->nai + noise;
        worst_ge = fmin(worst_ge, r->nai / r->shp);
        if (r->op == XS_TP_GEMM_RS) {
            nrs++;
            nrs10 += r->shp <= 1.10 * r->bound_us;
            nrsf10 += r->shp <= 1.10 * r->floor_us;
            worst_rs = fmax(worst_rs, r->shp / r->bound_us);
            worst_rsf = fmax(worst_rsf, r->shp / r->floor_us);
            if (isfinite(r->shp_t)) {
                nrs_t++;
                nrs10_t += r->shp_t <= 1.10 * r->bound_us;
                worst_rs_t = fmax(worst_rs_t, r->shp_t / r->bound_us);
            }
        }
        /* ring orders stream on the mma engine; sm90 runs them stored */
        nstream += strstr(r->cand, "stream") != NULL ||
                   (strstr(r->cand, "ring") != NULL && xs_tp_engine_streams(r->engine));
        nagree += r->model_rank == 1;
        if (npe < 512 && r->shp > 0)
            perr[npe++] = fabs(r->shp_pred - r->shp) / r->shp * 100;
    }
    printf("# summary: %d configurations run, %d verified, %d timed\n", nran, nok, ntimed);
    if (skipped)
        printf("# summary: %d configurations skipped (--max-time)\n", skipped);
    ratio_line("all", rows, nrows, -1, 0);
    ratio_line("all", rows, nrows, -1, 1);
    for (int op = 0; op < XS_TP_NOPS; op++) {
        ratio_line(xs_tp_op_name((xs_tp_op)op), rows, nrows, op, 0);
        ratio_line(xs_tp_op_name((xs_tp_op)op), rows, nrows, op, 1);
    }
    if (ntimed)
        printf("# summary: shaped >= naive within noise in %d of %d rows (worst naive/shaped "
               "%.3f)\n", nge, ntimed, worst_ge);
    if (nrs) {
        printf("# summary: gemm_rs shaped within 10%% of bound_us in %d of %d rows (worst %.3f x "
               "bound)\n", nrs10, nrs, worst_rs);
        printf("# summary: gemm_rs shaped within 10%% of floor_us in %d of %d rows (worst %.3f x "
               "floor)\n", nrsf10, nrs, worst_rsf);
    }
    if (ntile) /* --slots both: the rows above are row-major slots */
        for (int sh = 0; sh < 2; sh++) {
            tile_ratio_line(rows, nrows, XS_TP_GEMM_RS, sh);
            tile_ratio_line(rows, nrows, XS_TP_MLP, sh);
        }
    if (nrs_t) {
        printf("# summary: gemm_rs shaped, tile slots, within 10%% of bound_us in %d of %d rows "
               "(worst %.3f x bound)\n", nrs10_t, nrs_t, worst_rs_t);
    }
    for (int v = 0; v < TPB_MAX_COUR; v++)
        cour_lines(rows, nrows, v);
    {
        /* the planner's choice per row: how often each courier count won */
        int cnt[XS_TP_COURIERS_MAX + 1], any = 0;
        memset(cnt, 0, sizeof cnt);
        for (int i = 0; i < nrows; i++)
            if (rows[i].ok && rows[i].shp_cour >= 0 && rows[i].shp_cour <= XS_TP_COURIERS_MAX) {
                cnt[rows[i].shp_cour]++;
                any |= rows[i].shp_cour > 0 || isfinite(rows[i].cour[0].shp);
            }
        if (any) {
            char line[256];
            size_t l = 0;
            for (int c = 0; c <= XS_TP_COURIERS_MAX; c++)
                if (cnt[c] && l < sizeof line)
                    l += (size_t)snprintf(line + l, sizeof line - l, "%s%d couriers in %d",
                                          l ? ", " : "", c, cnt[c]);
            printf("# summary: planner's choice (shaped): %s of %d rows\n", line, ntimed);
        }
    }
    if (ntimed)
        printf("# summary: shaped order streams its stores in %d of %d rows\n", nstream, ntimed);
    {
        double v[512];
        int n = 0;
        for (int i = 0; i < nrows && n < 512; i++)
            if (rows[i].ok && rows[i].op == XS_TP_MLP)
                v[n++] = rows[i].unf / rows[i].shp;
        if (n) {
            const double g = xs_geomean(v, (size_t)n), mx = xs_max(v, (size_t)n);
            printf("# summary: mlp unfused/shaped geomean %.3f (target 1.5: %s), max %.3f (target "
                   "1.75: %s)\n", g, g >= 1.5 ? "MET" : "NOT MET", mx,
                   mx >= 1.75 ? "MET" : "NOT MET");
        }
    }
    if (npe)
        printf("# summary: model picked the measured best order in %d of %d rows; shaped "
               "prediction error median %.1f%%, max %.1f%%\n", nagree, ntimed,
               xs_median(perr, (size_t)npe), xs_max(perr, (size_t)npe));
    if (nok != nran || ntimed != nran) {
        printf("# bench tp FAILED: %d of %d configurations not verified or not run\n",
               nran - nok, nran);
        return 1;
    }
    printf("# bench tp OK\n");
    return 0;
}

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
    xs_gpu_report_header(stdout, &gi, argc, argv);
    if (real)
        printf("# ranks: %d processes, rank r on GPU r, P = %d real peers: pushes and partials "
               "into the peers' NCCL symmetric windows (LSA pointers); unfused: ncclAllGather / "
               "ncclReduceScatter; every rank verifies every byte and signal its window received; "
               "times are rank 0's (the slowest rank's medians under each row)\n", nranks, nranks);
    printf("# profile: %s R %.4g B/ns, Q %.6g B, Q/producer %.6g B, r %.4g B/ns%s\n",
           o.common.pa.file ? o.common.pa.file : "embedded", prof.drain_bytes_per_ns, prof.capacity_bytes,
           prof.capacity_bytes_per_producer, prof.issue_bytes_per_ns,
           prof.provisional ? " (provisional)" : "");
    const char *engine_line =
        o.engine == XS_TP_ENGINE_SM90
            ? "sm90: cuda/gemm_sm90.cuh, bf16 wgmma m64n256k16 + TMA, producer warpgroup + 2 "
              "consumer warpgroups, fp32 accumulate; stored orders only (no streamed stores), "
              "signals raised right after their payload"
            : "mma: cuda/gemm.cuh, bf16 mma.sync, fp32 accumulate; stored and streamed orders, "
              "lazy signals";
    printf("# engine: %s\n", engine_line);
    const char *slots_line =
        o.slots == TPB_SLOTS_BOTH
            ? "both: row-major slots in the naive_us/shaped_us columns, tile-major slots "
              "(xs_tp_set_slot_layout; one contiguous run per tile) in naive_tile_us/"
              "shaped_tile_us, the same orders and inputs in the same iterations"
        : o.slots == TPB_SLOTS_TILE
            ? "tile: tile-major reduce-scatter slots (one contiguous run per tile) in every "
              "fused column; the unfused baseline copies row-major"
            : "row: row-major reduce-scatter slots (a tile lands as 128 runs of 512 B)";
    printf("# slots: %s\n", slots_line);
    char cour_line[384] = "none: every fused column runs the default kernel (no couriers)";
    if (o.ncour) {
        size_t cl = 0;
        for (int v = 0; v < o.ncour; v++)
            cl += (size_t)snprintf(cour_line + cl, sizeof cour_line - cl, "%s%d", v ? " and " : "",
                                   o.cour[v]);
        cl += (size_t)snprintf(cour_line + cl, sizeof cour_line - cl, " courier CTAs next to the "
                 "default kernel (0), same iterations (columns *_c<N>_*); local_us and bound_us "
                 "without couriers; they push the all-gather chunks (ag_gemm, mlp), then carry "
                 "the remote reduce-scatter tiles (gemm_rs, mlp); ");
        if (o.cour_pace > 0)
            snprintf(cour_line + cl, sizeof cour_line - cl, "paced at %.2f x R = %.1f B/ns",
                     o.cour_pace, o.cour_pace * prof.drain_bytes_per_ns);
        else
            snprintf(cour_line + cl, sizeof cour_line - cl, "unpaced");
    }
    printf("# couriers: %s\n", cour_line);
    printf("# tiles %dx%d (engine %s), persistent grid = %d "
           "SMs; push chunks %d KB; tolerance: relative Frobenius <= %.0e, rows <= %.0e vs fp32; "
           "times: CUDA events (completion incl. drain), median of %d after %d warm-up, L2 "
           "flushed\n", XS_TP_BM, XS_TP_BN, xs_tp_engine_name(o.engine), gi.sm_count,
           XS_TP_CHUNK / 1024, XS_TP_TOL_FROB, XS_TP_TOL_ROW, o.common.iters, o.common.warmup);
    if (csv) {
        xs_gpu_report_header(csv, &gi, argc, argv);
        fprintf(csv, "# engine: %s\n", engine_line);
        fprintf(csv, "# slots: %s\n", slots_line);
        fprintf(csv, "# couriers: %s\n", cour_line);
        fprintf(csv, "%s%s", csv_header, o.slots == TPB_SLOTS_BOTH ? csv_header_tile : "");
        for (int v = 0; v < o.ncour; v++)
            csv_header_cour(csv, o.cour[v]);
        fputs(csv_header_pick, csv);
        fputc('\n', csv);
    }
    cudaStream_t stream;
    XS_CHECK_CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    tpb_ctx cx = {stream, cb, &prof, &o, gi.sm_count, coll, NULL};
    int fatal = 0; /* real peers: a failed call on this rank ends the run */
    const double t0 = xs_now_s();
    int skipped = 0;
    table_header();
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
                table_row(&rows[j]);
            if (real && rows[j].ok)
                printf("#   ranks: slowest rank's medians, us: naive %.1f, shaped %.1f, unfused "
                       "%.1f\n", rows[j].rank_max[0], rows[j].rank_max[1], rows[j].rank_max[2]);
            if (csv && rows[j].ok) {
                csv_row(csv, &rows[j], o.slots == TPB_SLOTS_BOTH, o.ncour);
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
    rc = intr ? 1 : summary(rows, nrows, skipped);
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
