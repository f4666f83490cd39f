/*
 * ep.cu - `xstage bench ep`: the fused MoE (expert parallelism) sweep on one GPU with
 * virtual peers: rank 0's window in HBM, ranks 1..N-1 in pinned host memory over PCIe.
 *
 * For every configuration x routing x token count x peer count, with the same inputs:
 *   unfused      gather, cuBLAS GEMM per expert, SwiGLU, cuBLAS GEMM per expert, scale, one
 *                cudaMemcpyAsync per rank into its window (the same link);
 *   wave         the fused kernel, expert-wave task order (the published baseline);
 *   interleaved  the fused kernel, Linear-1 tiles of later row blocks between Linear-2 bursts
 *                with a minimum row lead D;
 *   auto         the fused kernel in the order (and pacing, or couriers) the model picks
 *                (docs/EP.md);
 *   courier      the fused kernel with its best courier candidate forced (docs/EP.md,
 *                "Couriers"): the last C CTAs copy the combine from an HBM staging buffer,
 *                paced under R; side by side with the others (--couriers 0: not run);
 *   local        the fused kernel with every window in HBM, wave and interleaved order (the
 *                control; its traces give the compute costs the auto rule and bound_us use, and
 *                each tile's unstalled main loop for the per-tile MMA-side stall).
 * Runs are interleaved round-robin over the iterations so that drift hits every variant alike;
 * before each run the windows are poisoned (bf16 NaN) and L2 is overwritten. Every variant's
 * last run is verified row by row at the destination against an fp32 reference (the unfused
 * path with fp32 GEMM outputs). docs/EP.md defines every column.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ep_bench.h"
#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_cuda.h"
#include "xstage_exchange.h"
#include "xstage_launch.h"
#include "xstage_sigint.h"
#include "xstage_win.h"

/* ---- bench ep -------------------------------------------------------------------------------- */

#define EP_MAX_LIST 16
#define EP_MAX_ROWS 1024
#define EP_REF_RUNS 8 /* local-control runs whose main loops give each tile's reference */
/* --long: each configuration at these multiples of its largest default token count, where the
 * combine (T x top-k rows of H bf16 values, all ranks' windows together) stays within
 * EP_LONG_MAX_BYTES; one such point takes up to a minute, most of it poisoning and verifying the
 * windows on the CPU (docs/EP.md, "The long-token limit") */
static const int ep_long_mult[] = {8, 16, 32};
static_assert(sizeof ep_long_mult / sizeof ep_long_mult[0] == 3, "--long's help names three");
#define EP_LONG_MAX_GIB 4
#define EP_LONG_MAX_BYTES (EP_LONG_MAX_GIB * 1024.0 * 1024 * 1024)

static const char *const ep_var_name[EP_NVAR] = {"unfused", "wave", "interleaved", "auto",
                                                 "courier", "adaptive", "wave_bulk",
                                                 "interleaved_bulk", "auto_bulk", "auto_defer",
                                                 "auto_fixed"};

typedef struct {
    const xs_moe_config *configs[EP_MAX_LIST];
    int nconfigs;
    int tokens[EP_MAX_LIST];
    int ntokens; /* 0: each configuration's defaults */
    int long_tokens; /* --long: ep_long_mult x each configuration's largest default */
    int peers[EP_MAX_LIST];
    int npeers;
    xs_moe_routing routings[2];
    int nroutings;
    int run[EP_NVAR];
    int peers_set; /* --peers given: else each configuration's own peer count */
    xs_bench_opts common; /* -n, -w, -d, -g N (N ranks, one per GPU, real peers) */
    int quick, lead, wave_experts;
    int bulk;  /* --bulk: also the *_BULK variants */
    int defer; /* --defer[=ring|spill]: also auto's plan on a deferring kernel (EP_AUTO_DEFER):
                * XS_MOE_DEFER_RING or XS_MOE_DEFER_SPILL; 0: no */
    int spill_depth; /* --spill-depth: xs_moe_run_opts.spill_depth (0: its default) */
    int auto_fixed;  /* --auto-fixed: also auto's decision without the lead search (EP_AUTO_FIXED)
                      * where it differs from auto's */
    xs_moe_model mm; /* the kernel-level model (--block-bytes, --block-speed, --pace-bytes,
                      * --couriers, --courier-pace) */
    double timeout_ms;
    const char *csv, *tiles;
} ep_opts;


/* -g/--gpus: this rank's windows and the tables that map the one-rank problem onto real ranks.
 * Every rank runs the same problem (same seed); its problem rank r (token t has problem rank
 * t % N, rank 0 = local in the kernel and the model) is GPU (me + r) % N, and every source owns
 * one region of each destination's window, so destination d's region s holds the rows that
 * source s's problem sends to its problem rank (d - s) mod N (docs/MULTIGPU.md). */
typedef struct {
    xs_winset *ws;
    xs_coll *coll;   /* the unfused baseline's ncclSend/ncclRecv */
    xs_wintab send;  /* stores: problem rank r -> GPU (me + r) % N, region me */
    xs_wintab own;   /* receives: problem rank r -> this window, region (me - r) mod N */
    int me, n;
    size_t region;   /* bytes per source region (the one-rank problem's window) */
} ep_peer;

enum { EP_BARRIER_MS = 120000 }; /* ranks drift by a point's host-side work, not more */

static void ep_usage(FILE *f)
{
    fprintf(f,
            "usage: xstage bench ep [options]\n"
            "  fused MoE: dispatch -> Linear-1 -> SwiGLU -> Linear-2 -> combine to virtual peers\n"
            "  -c, --config NAME[,NAME]|all  configurations (default all):");
    for (int i = 0; i < xs_moe_nconfigs; i++)
        fprintf(f, "%s%s%s", i % 4 ? " " : "\n                                  ",
                xs_moe_configs[i].name, xs_moe_configs[i].sweep ? "" : "(*)");
    fprintf(f,
            "\n"
            "                               (*: not in the default sweep)\n"
            "  -t, --tokens LIST            token counts (default: 3 per configuration)\n"
            "  -p, --peers LIST             destinations incl. the local rank (default: each\n"
            "                               configuration's own, docs/EP.md)\n"
            "  -r, --routing balanced|zipf|all   (default all)\n"
            "      --schedule wave|interleaved|auto|courier|adaptive|all  fused schedules\n"
            "                               (default all)\n"
            "  -n, --iters N                timed runs per variant (default 5)\n"
            "  -w, --warmup N               warm-up runs per variant (default 1)\n"
            "      --lead D                 interleaved row-block lead (default: model rule)\n"
            "      --wave-experts W         experts per wave (default: waves of >= 1 round)\n"
            "      --csv FILE               one row per point (docs/EP.md columns)\n"
            "      --tiles FILE             one row per tile of every verified run\n"
            "      --profile FILE, --set NAME=VALUE   X-Stage profile (default: embedded)\n"
            "      --block-bytes B          model: backlog above which main loops stall\n"
            "                               (550000)\n"
            "      --block-speed S          model: main-loop speed while stalled (0.05)\n"
            "      --pace-frac F            the pacer drains at F x R of the profile (0.1..1.2;\n"
            "                               default 0.95)\n"
            "      --pace-bytes B           auto may pace the combine at this backlog (128K;\n"
            "                               0: auto never paces)\n"
            "      --couriers N             C CTAs copy the combine from an HBM staging buffer,\n"
            "                               paced: auto weighs only C = N, and the courier\n"
            "                               column runs it (0: no couriers; default: auto\n"
            "                               weighs 4 and 8, the column runs the better)\n"
            "      --courier-pace F         the couriers issue at F x R in all (0.01..2;\n"
            "                               default 0.9)\n"
            "      --auto-couriers          auto may choose couriers (default: predicted and\n"
            "                               reported, never chosen: the forced courier column\n"
            "                               is slower than auto on the sweep)\n"
            "      --courier-copy-rate B    model: bytes/ns one courier copies at most (9.2,\n"
            "                               measured; 0: no limit)\n"
            "      --auto-adaptive          auto may choose the adaptive plan (default: predicted\n"
            "                               and reported; the adaptive column runs it)\n"
            "      --defer[=ring|spill|none] also auto's plan on another kernel, measured in the\n"
            "                               same rounds (the auto_defer column; not where auto\n"
            "                               chose couriers). ring (default) and spill: a\n"
            "                               Linear-2 tile the pacer holds back does not hold its\n"
            "                               CTA - ring: a 3-stage ring with a staging tile of\n"
            "                               its own; spill: the 4-stage kernel, the tile's\n"
            "                               remote rows wait in device memory and leave at a\n"
            "                               later task boundary. none: the plain kernel (where\n"
            "                               auto chose spilling)\n"
            "      --spill-depth N          spill: held-back tiles per CTA, 1-8 (default 2)\n"
            "      --no-auto-spill          auto never runs its paced plan on the spilling\n"
            "                               kernel (default: it does where that is predicted\n"
            "                               >= 1 %% faster; --defer=none runs the same plans on\n"
            "                               the plain kernel in the auto_defer column)\n"
            "      --no-lead-search         auto paces at the unpaced order's best lead, no\n"
            "                               taper (default: it also\n"
            "                               predicts leads D/2..2D and tapers, docs/EP.md)\n"
            "      --auto-lead D[:E]        where auto paces: at lead D (tapering to E where\n"
            "                               Linear-1 ends, 1 <= E < D), not searched\n"
            "      --auto-fixed             also auto's decision without the lead search,\n"
            "                               measured in the same rounds where it differs (the\n"
            "                               auto_fixed column)\n"
            "      --bulk                   also wave, interleaved and auto with the combine rows\n"
            "                               handed to the TMA (cp.async.bulk from the staging\n"
            "                               tile), measured in the same rounds (auto: not where\n"
            "                               it chose couriers)\n"
            "      --seed S                 inputs and routing (default 1)\n"
            "      --timeout-ms MS          bound of every in-kernel wait (default 2000)\n"
            "  -d, --device N               CUDA device (default 0)\n"
            "  -g, --gpus N                 N ranks, one process per GPU (rank r on GPU r), the\n"
            "                               combine into real peers' NCCL windows (N = the peers;\n"
            "                               not with --peers or --device); unfused baseline:\n"
            "                               grouped ncclSend/ncclRecv (docs/MULTIGPU.md)\n"
            "      --long                   the long-token points instead of the defaults: %d, %d\n"
            "                               and %d x each configuration's largest default token\n"
            "                               count; a point whose combine exceeds %d GiB is\n"
            "                               skipped (docs/EP.md, \"The long-token limit\")\n"
            "      --quick                  2 configurations, 3 token counts, 3 iterations\n",
            ep_long_mult[0], ep_long_mult[1], ep_long_mult[2], EP_LONG_MAX_GIB);
}

/* comma list of positive integers */
static int ep_parse_list(const char *opt, const char *s, long lo, long hi, int *out, int *n)
{
    return xs_parse_list(opt, s, 0, lo, hi, out, EP_MAX_LIST, n) != XS_OK ? xs_cli_fail() : 0;
}

static int ep_parse(int argc, char **argv, ep_opts *o)
{
    enum { O_LEAD = XS_OPT_FIRST_FREE, O_WAVE, O_TILES, O_TIMEOUT, O_BLOCK, O_BSPEED, O_PACE,
           O_COURIERS, O_CPACE, O_AUTOCOUR, O_CCOPY, O_BULK, O_AUTOADAPT, O_PACEFRAC,
           O_DEFER, O_SPILLDEPTH, O_AUTOSPILL, O_LONG, O_AUTOLEAD, O_NOSEARCH, O_AUTOFIXED };
    static const struct option lo[] = {
        {"config", required_argument, 0, 'c'},   {"tokens", required_argument, 0, 't'},
        {"peers", required_argument, 0, 'p'},    {"routing", required_argument, 0, 'r'},
        {"schedule", required_argument, 0, XS_OPT_SCHEDULE},
        {"iters", required_argument, 0, 'n'},    {"warmup", required_argument, 0, 'w'},
        {"csv", required_argument, 0, XS_OPT_CSV},
        {"tiles", required_argument, 0, O_TILES},
        {"profile", required_argument, 0, XS_OPT_PROFILE},
        {"set", required_argument, 0, XS_OPT_SET},
        {"seed", required_argument, 0, XS_OPT_SEED},
        {"lead", required_argument, 0, O_LEAD},
        {"wave-experts", required_argument, 0, O_WAVE},
        {"timeout-ms", required_argument, 0, O_TIMEOUT},
        {"block-bytes", required_argument, 0, O_BLOCK},
        {"block-speed", required_argument, 0, O_BSPEED},
        {"pace-bytes", required_argument, 0, O_PACE},
        {"pace-frac", required_argument, 0, O_PACEFRAC},
        {"couriers", required_argument, 0, O_COURIERS},
        {"courier-pace", required_argument, 0, O_CPACE},
        {"auto-couriers", no_argument, 0, O_AUTOCOUR},
        {"courier-copy-rate", required_argument, 0, O_CCOPY},
        {"bulk", no_argument, 0, O_BULK},
        {"defer", optional_argument, 0, O_DEFER},
        {"spill-depth", required_argument, 0, O_SPILLDEPTH},
        {"no-auto-spill", no_argument, 0, O_AUTOSPILL},
        {"auto-adaptive", no_argument, 0, O_AUTOADAPT},
        {"long", no_argument, 0, O_LONG},
        {"auto-lead", required_argument, 0, O_AUTOLEAD},
        {"no-lead-search", no_argument, 0, O_NOSEARCH},
        {"auto-fixed", no_argument, 0, O_AUTOFIXED},
        {"device", required_argument, 0, 'd'},   {"quick", no_argument, 0, XS_OPT_QUICK},
        {"gpus", required_argument, 0, 'g'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->common.iters = 5;
    o->common.warmup = 1;
    o->common.seed = 1;
    o->lead = -1;
    o->timeout_ms = 2000;
    xs_moe_model_default(&o->mm);
    o->peers[0] = 4;
    o->npeers = 1;
    o->routings[0] = XS_ROUTE_BALANCED;
    o->routings[1] = XS_ROUTE_ZIPF;
    o->nroutings = 2;
    for (int v = 0; v < EP_NVAR; v++)
        o->run[v] = 1;
    const char *cfg_arg = "all";
    int c;
    long v;
    int64_t sz;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:t:p:r:n:w:d:g:h", lo, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg_arg = optarg;
            break;
        case 't':
            if (ep_parse_list("--tokens", optarg, 1, 1 << 20, o->tokens, &o->ntokens))
                return 1;
            break;
        case 'p':
            if (ep_parse_list("--peers", optarg, 1, XS_MAX_RANKS, o->peers, &o->npeers))
                return 1;
            o->peers_set = 1;
            break;
        case 'r':
            if (!strcmp(optarg, "balanced")) {
                o->routings[0] = XS_ROUTE_BALANCED;
                o->nroutings = 1;
            } else if (!strcmp(optarg, "zipf")) {
                o->routings[0] = XS_ROUTE_ZIPF;
                o->nroutings = 1;
            } else if (strcmp(optarg, "all")) {
                return xs_cli_failf("--routing '%s': balanced, zipf or all", optarg);
            }
            break;
        case XS_OPT_SCHEDULE:
            if (!strcmp(optarg, "all"))
                break;
            o->run[EP_WAVE] = !strcmp(optarg, "wave");
            o->run[EP_INTER] = !strcmp(optarg, "interleaved");
            o->run[EP_AUTO] = !strcmp(optarg, "auto");
            o->run[EP_COURIER] = !strcmp(optarg, "courier");
            o->run[EP_ADAPT] = !strcmp(optarg, "adaptive");
            if (!o->run[EP_WAVE] && !o->run[EP_INTER] && !o->run[EP_AUTO] &&
                !o->run[EP_COURIER] && !o->run[EP_ADAPT])
                return xs_cli_failf("--schedule '%s': wave, interleaved, auto, courier, adaptive "
                                    "or all", optarg);
            o->run[EP_WAVE] = 1; /* wave is the baseline every ratio divides */
            break;
        case 'n':
        case 'w':
        case 'd':
        case 'g':
        case XS_OPT_SEED:
        case XS_OPT_PROFILE:
        case XS_OPT_SET:
            if (xs_parse_bench_opt(c, optarg, 1000, &o->common) < 0)
                return xs_cli_fail();
            break;
        case XS_OPT_CSV:
            o->csv = optarg;
            break;
        case O_TILES:
            o->tiles = optarg;
            break;
        case O_LEAD:
            if (xs_parse_int("--lead", optarg, 0, 1 << 20, &v) != XS_OK)
                return xs_cli_fail();
            o->lead = (int)v;
            break;
        case O_WAVE:
            if (xs_parse_int("--wave-experts", optarg, 1, 4096, &v) != XS_OK)
                return xs_cli_fail();
            o->wave_experts = (int)v;
            break;
        case O_TIMEOUT:
            if (xs_parse_double("--timeout-ms", optarg, 1, 600000, &o->timeout_ms) != XS_OK)
                return xs_cli_fail();
            break;
        case O_BLOCK:
            if (xs_parse_size("--block-bytes", optarg, &sz) != XS_OK)
                return xs_cli_fail();
            o->mm.block_bytes = (double)sz;
            break;
        case O_BSPEED:
            if (xs_parse_double("--block-speed", optarg, 0, 1, &o->mm.block_speed) != XS_OK)
                return xs_cli_fail();
            break;
        case O_PACE:
            if (xs_parse_size("--pace-bytes", optarg, &sz) != XS_OK)
                return xs_cli_fail();
            o->mm.pace_bytes = (double)sz;
            break;
        case O_PACEFRAC:
            if (xs_parse_double("--pace-frac", optarg, 0.1, 1.2, &o->mm.pace_drain_frac) != XS_OK)
                return xs_cli_fail();
            break;
        case O_COURIERS:
            if (xs_parse_int("--couriers", optarg, 0, 64, &v) != XS_OK)
                return xs_cli_fail();
            o->mm.couriers = (int)v;
            break;
        case O_AUTOCOUR: o->mm.auto_couriers = 1; break;
        case O_BULK: o->bulk = 1; break;
        case O_DEFER:
            if (!optarg || !strcmp(optarg, "ring"))
                o->defer = XS_MOE_DEFER_RING;
            else if (!strcmp(optarg, "spill"))
                o->defer = XS_MOE_DEFER_SPILL;
            else if (!strcmp(optarg, "none"))
                o->defer = XS_MOE_DEFER_NONE;
            else
                return xs_cli_failf("bench ep: --defer=%s: ring, spill or none", optarg);
            break;
        case O_SPILLDEPTH:
            if (xs_parse_int("--spill-depth", optarg, 1, XS_MOE_SPILL_MAX, &v) != XS_OK)
                return xs_cli_fail();
            o->spill_depth = (int)v;
            break;
        case O_AUTOADAPT: o->mm.auto_adaptive = 1; break;
        case O_AUTOSPILL: o->mm.auto_spill = 0; break;
        case O_NOSEARCH: o->mm.lead_search = 0; break;
        case O_AUTOFIXED: o->auto_fixed = 1; break;
        case O_AUTOLEAD: {
            /* D or D:E, 1 <= E < D */
            char buf[64];
            if (strlen(optarg) >= sizeof buf)
                return xs_cli_failf("bench ep: --auto-lead: '%.20s...' is not D or D:E", optarg);
            snprintf(buf, sizeof buf, "%s", optarg);
            char *colon = strchr(buf, ':');
            if (colon)
                *colon = 0;
            if (xs_parse_int("--auto-lead", buf, 1, 100000, &v) != XS_OK)
                return xs_cli_fail();
            o->mm.paced_lead = (int)v;
            o->mm.paced_lead_end = 0;
            if (colon) {
                if (xs_parse_int("--auto-lead", colon + 1, 1, 100000, &v) != XS_OK)
                    return xs_cli_fail();
                if (v >= o->mm.paced_lead)
                    return xs_cli_failf("bench ep: --auto-lead %s: the taper end E of D:E must "
                                        "be below D", optarg);
                o->mm.paced_lead_end = (int)v;
            }
            break;
        }
        case O_CCOPY:
            if (xs_parse_double("--courier-copy-rate", optarg, 0, 1e6,
                                &o->mm.courier_copy_bytes_per_ns) != XS_OK)
                return xs_cli_fail();
            break;
        case O_CPACE:
            if (xs_parse_double("--courier-pace", optarg, 0.01, 2, &o->mm.courier_pace_frac) !=
                XS_OK)
                return xs_cli_fail();
            break;
        case XS_OPT_QUICK:
            o->quick = 1;
            break;
        case O_LONG:
            o->long_tokens = 1;
            break;
        case 'h':
            ep_usage(stdout);
            return -1;
        default:
            ep_usage(stderr);
            return 1;
        }
    }
    if (optind < argc)
        return xs_cli_failf("bench ep: unexpected argument '%s'", argv[optind]);
    {
        const xs_gpus_conflict cf[] = {
            {"--peers", o->peers_set, "with -g the ranks are the peers: N = the number of GPUs"},
            {"--device", o->common.device_set, "rank r runs on GPU r"}};
        if (xs_gpus_check("bench ep", o->common.gpus_set, o->common.gpus, cf, 2) != XS_OK)
            return xs_cli_fail();
    }
    if (o->long_tokens && (o->ntokens || o->quick))
        return xs_cli_failf("bench ep: --long chooses the token counts: not with %s",
                            o->ntokens ? "--tokens" : "--quick");
    if (o->quick && !o->common.iters_set)
        o->common.iters = 3;
    o->run[EP_WAVE_BULK] = o->bulk && o->run[EP_WAVE];
    o->run[EP_INTER_BULK] = o->bulk && o->run[EP_INTER];
    o->run[EP_AUTO_BULK] = o->bulk && o->run[EP_AUTO];
    o->run[EP_AUTO_DEFER] = o->defer && o->run[EP_AUTO];
    o->run[EP_AUTO_FIXED] = o->auto_fixed && o->run[EP_AUTO];
    if (o->auto_fixed && (!o->mm.lead_search || o->mm.paced_lead > 0))
        return xs_cli_failf("bench ep: --auto-fixed compares auto with and without its lead "
                            "search: not with %s", o->mm.paced_lead > 0 ? "--auto-lead"
                                                                        : "--no-lead-search");
    if (o->spill_depth && o->defer != XS_MOE_DEFER_SPILL)
        return xs_cli_failf("bench ep: --spill-depth needs --defer=spill");
    if (!strcmp(cfg_arg, "all")) {
        if (o->quick) {
            o->configs[o->nconfigs++] = xs_moe_config_find("olmoe-1b-7b");
            o->configs[o->nconfigs++] = xs_moe_config_find("mixtral-8x7b");
        } else {
            for (int i = 0; i < xs_moe_nconfigs && o->nconfigs < EP_MAX_LIST; i++)
                if (xs_moe_configs[i].sweep)
                    o->configs[o->nconfigs++] = &xs_moe_configs[i];
        }
    } else {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", cfg_arg);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            const xs_moe_config *cf = xs_moe_config_find(tok);
            if (!cf)
                return xs_cli_failf("--config '%s': unknown (xstage bench ep --help lists them)",
                                    tok);
            if (o->nconfigs >= EP_MAX_LIST)
                return xs_cli_failf("--config: at most %d configurations", EP_MAX_LIST);
            o->configs[o->nconfigs++] = cf;
        }
    }
    return 0;
}

/* ---- one point ------------------------------------------------------------------------------ */

/* The median and the 10 % and 90 % quantiles (src/stats.c) of the first 1024 samples (us). */
static ep_time ep_stats(const double *v, int n)
{
    ep_time t = {NAN, NAN, NAN};
    if (n <= 0)
        return t;
    const size_t k = n < 1024 ? (size_t)n : 1024;
    t.med = xs_median(v, k);
    t.p10 = xs_quantile(v, k, 0.1);
    t.p90 = xs_quantile(v, k, 0.9);
    return t;
}

/* Every tile of the last run. A courier run (couriers > 0) has no stall prediction (its
 * Linear-2 tiles store into HBM; the link is the couriers'); its copies follow as rows of kind 3:
 * task = position among the Linear-2 tiles, fetch = the courier starts waiting for the tile,
 * mma0 = mma1 = st0 = the tile was ready, st1 = its last copy store issued, remote_bytes =
 * total_bytes = bytes copied, gate_ns = the courier pacer's hold. */
static void ep_tiles_out(FILE *f, const ep_row *r, const char *sched, xs_moe *m,
                         const xs_profile *p, const xs_moe_model *mm, double r_local,
                         const double *ref, int nref, int couriers)
{
    const xs_moe_tile *t;
    int n;
    xs_moe_trace(m, &t, &n);
    double *pred = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *pmma = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    xs_moe_stall s;
    if (pred && pmma && couriers) {
        for (int i = 0; i < n; i++)
            pred[i] = pmma[i] = NAN;
    } else if (!pred || !pmma ||
               xs_moe_stall_predict(t, n, p, mm, r_local, ref, nref, &s, pred, pmma) != XS_OK) {
        free(pred);
        free(pmma);
        return;
    }
    for (int i = 0; i < n; i++) {
        const double t0 = t[i].kind == 2 ? xs_moe_tile_t0(p, t[i].remote_bytes, t[i].total_bytes,
                                                           r_local)
                                         : NAN;
        const double span = t[i].st1_ns - t[i].st0_ns, loop = t[i].mma1_ns - t[i].mma0_ns;
        const double rf = ref && t[i].id >= 0 && t[i].id < nref ? ref[t[i].id] : NAN;
        fprintf(f, "%s,%s,%d,%d,%s,%d,%d,%d,%d,%d,%d,%d,%d,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,"
                   "%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f\n",
                r->config, r->routing, r->tokens, r->peers, sched, i, t[i].kind, t[i].rb,
                t[i].nb, t[i].cta, t[i].smid, t[i].remote_bytes, t[i].total_bytes, t[i].fetch_ns,
                t[i].mma0_ns, t[i].mma1_ns, t[i].st0_ns, t[i].st1_ns, span, pred[i], t0,
                t[i].kind == 2 && t[i].remote_bytes > 0 ? span - t0 : NAN,
                isnan(pred[i]) ? NAN : pred[i] - t0, t[i].gate_ns, rf, loop - rf, pmma[i]);
    }
    const xs_moe_copy *c;
    int nc = 0;
    xs_moe_courier_trace(m, &c, &nc);
    for (int j = 0; couriers && j < nc; j++)
        fprintf(f, "%s,%s,%d,%d,%s,%d,3,%d,%d,%d,%d,%d,%d,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,nan,nan,"
                   "nan,nan,%.0f,nan,nan,nan\n",
                r->config, r->routing, r->tokens, r->peers, sched, c[j].pos, c[j].rb, c[j].nb,
                c[j].cta, c[j].smid, c[j].bytes, c[j].bytes, c[j].wait_ns, c[j].ready_ns,
                c[j].ready_ns, c[j].ready_ns, c[j].end_ns, c[j].end_ns - c[j].ready_ns,
                c[j].gate_ns);
    free(pred);
    free(pmma);
}

/* Each tile's main loop over the local-control runs of one order, by tile id: the median (the
 * MMA side's unstalled reference). acc[id * cap + k] holds run k. */
static void ep_ref_add(double *acc, int cap, int *nruns, xs_moe *m, int ntot)
{
    const xs_moe_tile *t;
    int n;
    xs_moe_trace(m, &t, &n);
    if (*nruns >= cap)
        return;
    for (int i = 0; i < ntot; i++)
        acc[(size_t)i * cap + *nruns] = NAN;
    for (int i = 0; i < n; i++)
        if (t[i].cta >= 0 && t[i].id >= 0 && t[i].id < ntot)
            acc[(size_t)t[i].id * cap + *nruns] = t[i].mma1_ns - t[i].mma0_ns;
    (*nruns)++;
}

static void ep_ref_median(const double *acc, int cap, int nruns, int ntot, double *ref)
{
    for (int i = 0; i < ntot; i++) {
        double v[16];
        int k = 0;
        for (int j = 0; j < nruns && j < 16; j++)
            if (isfinite(acc[(size_t)i * cap + j]))
                v[k++] = acc[(size_t)i * cap + j];
        ref[i] = k ? xs_median(v, (size_t)k) : NAN;
    }
}

/* -g: the unfused baseline's combine between real ranks, one NCCL group: the staged rows of
 * problem rank r to GPU (me + r) % N, and from every source s its rows into region s. */
static xs_status ep_nccl_combine(void *ctx, const char *stage, size_t stride, const size_t *bytes,
                                 int n, cudaStream_t s)
{
    ep_peer *pp = (ep_peer *)ctx;
    const void *snd[XS_MAX_RANKS];
    void *rcv[XS_MAX_RANKS];
    size_t sb[XS_MAX_RANKS], rb[XS_MAX_RANKS];
    int sp[XS_MAX_RANKS], rp[XS_MAX_RANKS];
    if (n != pp->n)
        return xs_seterr(XS_EINVAL, "bench ep: problem of %d ranks on %d GPUs", n, pp->n);
    for (int r = 0; r < n; r++) {
        snd[r] = stage + (size_t)r * stride;
        sb[r] = bytes[r];
        sp[r] = (pp->me + r) % n;
        const int src = (pp->me - r + n) % n; /* its problem rank r lands here */
        rcv[r] = pp->own.data[r];
        rb[r] = bytes[r];
        rp[r] = src;
    }
    return xs_coll_sendrecv(pp->coll, snd, sb, sp, n, rcv, rb, rp, n, (void *)s);
}

/* One verified run of a variant; returns XS_OK and sets *us (and *gemm_us for unfused). With
 * real peers (pp): this rank poisons its own window (every source's region), all ranks meet,
 * run, and meet again, so that every source's stores are in place before anyone verifies and no
 * one poisons a window that is still being verified. */
static xs_status ep_run(xs_moe *m, xs_cublas *cb, int var, int slot, const xs_wintab *tab,
                        ep_peer *pp, const xs_moe_run_opts *ro, double *us, double *gemm_us)
{
    XS_TRY(xs_moe_poison(m, pp ? &pp->own : tab, 0));
    XS_TRY(xs_moe_flush_l2(m, 0));
    if (pp)
        XS_TRY(xs_win_barrier(pp->ws, EP_BARRIER_MS));
    float ms = 0, gms = 0;
    if (var == EP_UNFUSED && pp)
        XS_TRY(xs_moe_run_unfused_with(m, cb, tab, ep_nccl_combine, pp, 0, &ms, &gms));
    else if (var == EP_UNFUSED)
        XS_TRY(xs_moe_run_unfused(m, cb, tab, 0, &ms, &gms));
    else
        XS_TRY(xs_moe_run_fused(m, slot, tab, ro, 0, &ms));
    if (pp)
        XS_TRY(xs_win_barrier(pp->ws, EP_BARRIER_MS));
    *us = ms * 1e3;
    if (gemm_us)
        *gemm_us = gms * 1e3;
    return XS_OK;
}

static xs_status ep_check(xs_moe *m, const xs_wintab *tab, const char *what, ep_row *r)
{
    xs_moe_check c;
    XS_TRY(xs_moe_verify(m, tab, &c));
    if (c.max_row_rel > r->max_rel_err || isnan(c.max_row_rel))
        r->max_rel_err = c.max_row_rel;
    if (!c.ok) {
        r->verified = 0;
        fprintf(stderr, "xstage: error: %s %s T=%d N=%d %s: %ld of %ld rows wrong (%ld NaN/Inf), "
                "rel err %.3g, worst row %ld of expert %d (tolerance %.0e per row, %.0e "
                "overall; tests/gpu/test_moe checks each layer alone)\n", r->config,
                r->routing, r->tokens, r->peers, what, c.bad_rows, c.rows, c.nonfinite,
                c.rel_frob, c.worst_row, c.worst_expert, XS_MOE_TOL_ROW, XS_MOE_TOL_FROB);
    }
    return XS_OK;
}

/* A row's fields before its point runs: names, NaN where nothing is measured or predicted. */
static void ep_row_init(const ep_opts *o, const xs_moe_config *cfg, int tokens, int peers,
                        xs_moe_routing routing, ep_row *r)
{
    memset(r, 0, sizeof *r);
    r->config = cfg->name;
    r->routing = xs_moe_routing_name(routing);
    r->tokens = tokens;
    r->peers = peers;
    r->verified = 1;
    r->auto_choice = "-";
    for (int v = 0; v < EP_NVAR; v++)
        r->t[v].med = r->t[v].p10 = r->t[v].p90 = NAN;
    r->stall_wave.abs_err_med_ns = r->stall_inter.abs_err_med_ns = NAN;
    r->stall_auto.abs_err_med_ns = NAN;
    r->stall_wave.mma_abs_err_med_ns = r->stall_inter.mma_abs_err_med_ns = NAN;
    r->stall_auto.mma_abs_err_med_ns = NAN;
    r->stall_wave.mma_meas_med_ns = r->stall_inter.mma_meas_med_ns = NAN;
    r->stall_auto.mma_meas_med_ns = NAN;
    for (int k = 0; k < 3; k++)
        r->stall_bulk[k].mma_meas_med_ns = NAN;
    r->stall_adapt.mma_meas_med_ns = NAN;
    r->stall_defer.mma_meas_med_ns = r->stall_defer.abs_err_med_ns = NAN;
    r->stall_fixed.mma_meas_med_ns = r->stall_fixed.abs_err_med_ns = NAN;
    r->pred_adaptive_us = r->adaptive_ahead_us = r->pred_spill_us = NAN;
    r->pred_paced_us = r->pred_auto_us = r->auto_gate_us = r->fill_us = NAN;
    r->defer_gate_us = r->defer_frac = NAN;
    r->pred_paced_plain_us = r->pred_fixed_us = NAN;
    r->fixed_lead = r->fixed_lead_end = -1;
    if (o->defer == XS_MOE_DEFER_SPILL)
        snprintf(r->defer_kernel, sizeof r->defer_kernel, "spill:%d",
                 o->spill_depth ? o->spill_depth : XS_MOE_SPILL_DEPTH);
    else
        snprintf(r->defer_kernel, sizeof r->defer_kernel, "%s",
                 o->defer == XS_MOE_DEFER_RING ? "ring" : o->defer ? "none" : "-");
    r->pred_courier_us = NAN;
    r->courier_sched = "-";
    r->courier_pace = o->mm.courier_pace_frac;
    for (int v = 0; v < EP_NVAR; v++)
        r->rank_max_us[v] = NAN;
    r->block_bytes = o->mm.block_bytes;
    r->block_speed = o->mm.block_speed;
    r->pace_bytes = o->mm.pace_bytes;

}

/* The local control of both orders (slot 0 wave, slot 1 interleaved, windows `local`): the
 * compute costs without the link, each tile's median main loop (ref[slot], from ref_acc), and
 * each order's last trace (ltr, nltr) for the courier prediction. */
static xs_status ep_local_control(const ep_opts *o, xs_moe *m, xs_cublas *cb,
                                  const xs_wintab *local, const xs_moe_run_opts *ro,
                                  const xs_profile *prof, FILE *tiles, int ntot, double *ref_acc,
                                  double *ref[2], xs_moe_tile *ltr[2], int nltr[2],
                                  xs_moe_costs cost[2], ep_row *r)
{
    const xs_moe_tile *tr;
    int ntr;
    for (int slot = 0; slot < 2; slot++) {
        double v[64];
        const int n = o->common.iters;
        int nv = 0, nref = 0, runs = o->common.warmup + (n < 3 ? n : 3);
        for (int it = 0; it < runs; it++) {
            double us;
            XS_TRY(ep_run(m, cb, EP_WAVE, slot, local, NULL, ro, &us, NULL));
            if (it >= o->common.warmup && nv < 64)
                v[nv++] = us;
            if (it >= o->common.warmup)
                ep_ref_add(ref_acc, EP_REF_RUNS, &nref, m, ntot);
        }
        ep_ref_median(ref_acc, EP_REF_RUNS, nref, ntot, ref[slot]);
        XS_TRY(ep_check(m, local, slot ? "local interleaved" : "local wave", r));
        xs_moe_trace(m, &tr, &ntr);
        xs_moe_costs_from_trace(tr, ntr, &cost[slot]);
        nltr[slot] = ntr < ntot ? ntr : ntot;
        memcpy(ltr[slot], tr, sizeof(xs_moe_tile) * (size_t)nltr[slot]);
        if (slot == 0) {
            r->local = ep_stats(v, nv);
            r->local_span_us = cost[0].span2_ns / 1e3;
        } else {
            r->local_inter = ep_stats(v, nv);
        }
        if (tiles)
            ep_tiles_out(tiles, r, slot ? "local-interleaved" : "local-wave", m, prof,
                         &o->mm, cost[0].local_issue_bytes_per_ns, ref[slot], ntot, 0);
    }
    return XS_OK;
}

/* auto's decision and predictions into the row. */
static void ep_row_auto(const xs_moe_auto_result *ar, ep_row *r)
{
    r->auto_choice = xs_moe_sched_name(ar->plan.kind);
    r->auto_lead = ar->plan.kind == XS_MOE_INTERLEAVED ? ar->plan.lead : 0;
    r->auto_paced = ar->plan.pace_bytes > 0;
    r->criterion_ok = ar->criterion_ok;
    r->reshape_ok = ar->reshape_ok;
    r->pred_wave_us = ar->wave_ns / 1e3;
    r->pred_inter_us = ar->inter_ns / 1e3;
    r->pred_paced_us = ar->paced_ns / 1e3;
    r->pred_auto_us = ar->auto_ns / 1e3;
    r->fill_us = ar->fill_ns / 1e3;
    r->drain_bound = ar->drain_bound;
    snprintf(r->how, sizeof r->how, "%s", ar->how);
}

/* The last round's checks of variant var after its run: its rows verified at the destination,
 * then (fused runs) the per-tile stall prediction of its trace against the local-control
 * reference ref_of[var], its pacer waits and, with --tiles, its tiles. */
static xs_status ep_last_round(const ep_opts *o, xs_moe *m, int var, const xs_wintab *tab,
                               const xs_profile *prof, double r_local,
                               const double *const *ref_of, int ntot, FILE *tiles, ep_row *r)
{
    const xs_moe_tile *tr;
    int ntr;
    double t_model;
    XS_TRY(ep_check(m, tab, ep_var_name[var], r));
    if (var == EP_UNFUSED)
        return XS_OK;
    const int cour = var == EP_COURIER || (var == EP_AUTO && r->auto_couriers > 0);
    if (cour) {
        /* no per-tile stall prediction: the link is the couriers' */
        if (tiles)
            ep_tiles_out(tiles, r, ep_var_name[var], m, prof, &o->mm, r_local,
                         NULL, 0, 1);
        return XS_OK;
    }
    xs_moe_trace(m, &tr, &ntr);
    if (EP_IS_BULK(var)) {
        /* measured MMA side only: the model has no bulk-copy issue line, so its
         * predictions (the 16-byte stores') are not reported for these runs */
        const double *rb = ref_of[var - EP_WAVE_BULK + EP_WAVE];
        XS_TRY(xs_moe_stall_predict(tr, ntr, prof, &o->mm, r_local, rb, ntot,
                                    &r->stall_bulk[var - EP_WAVE_BULK], NULL, NULL));
        if (tiles)
            ep_tiles_out(tiles, r, ep_var_name[var], m, prof, &o->mm, r_local, rb,
                         ntot, 1);
        return XS_OK;
    }
    xs_moe_stall *sp = var == EP_WAVE         ? &r->stall_wave
                       : var == EP_INTER      ? &r->stall_inter
                       : var == EP_ADAPT      ? &r->stall_adapt
                       : var == EP_AUTO_DEFER ? &r->stall_defer
                       : var == EP_AUTO_FIXED ? &r->stall_fixed
                                              : &r->stall_auto;
    t_model = xs_now_s();
    XS_TRY(xs_moe_stall_predict(tr, ntr, prof, &o->mm, r_local, ref_of[var], ntot,
                                sp, NULL, NULL));
    r->model_s += xs_now_s() - t_model;
    if ((var == EP_AUTO || var == EP_AUTO_DEFER) && r->auto_paced) {
        double g[4096];
        int ng = 0;
        for (int i = 0; i < ntr && ng < 4096; i++)
            if (tr[i].kind == 2 && tr[i].remote_bytes > 0)
                g[ng++] = tr[i].gate_ns / 1e3;
        *(var == EP_AUTO ? &r->auto_gate_us : &r->defer_gate_us) =
            ng ? xs_median(g, (size_t)ng) : NAN;
        if (var == EP_AUTO_DEFER) {
            int nd = 0, nr = 0;
            for (int i = 0; i < ntr; i++) {
                nd += tr[i].deferred;
                nr += tr[i].kind == 2 && tr[i].remote_bytes > 0;
            }
            r->defer_frac = nr ? (double)nd / nr : NAN;
        }
    }
    if (tiles)
        ep_tiles_out(tiles, r, ep_var_name[var], m, prof, &o->mm, r_local,
                     ref_of[var], ntot, 0);
    return XS_OK;
}

static xs_status ep_point(const ep_opts *o, const xs_moe_weights *w, const xs_moe_config *cfg,
                          int tokens, int peers, xs_moe_routing routing, const xs_profile *prof,
                          xs_cublas *cb, xs_coll *coll, FILE *tiles, ep_row *r)
{
    const double t_point = xs_now_s();
    ep_row_init(o, cfg, tokens, peers, routing, r);

    xs_moe *m = NULL;
    xs_moe_opts mo = {tokens, peers, routing, 0, o->common.seed};
    XS_TRY(xs_moe_create(w, &mo, &m));
    xs_status st = XS_OK;
    xs_winset *ws = NULL;
    ep_peer *pp = NULL;
    xs_moe_info info;
    xs_moe_get_info(m, &info);
    r->rows = info.rows;
    r->remote_mb = info.remote_bytes / 1e6;
    xs_moe_run_opts ro = {(unsigned long long)(o->timeout_ms * 1e6), 0};
    double *samples[EP_NVAR] = {0};
    double *gemm_samples = NULL;
    int ns[EP_NVAR] = {0};
    int nsv = o->common.iters;
    /* per tile (by id): its main loop in each local-control run, and the median, per order */
    const int ntot = info.l1_tiles + info.l2_tiles;
    double *ref_acc = (double *)malloc(sizeof(double) * (size_t)(ntot + 1) * EP_REF_RUNS);
    double *ref[2] = {(double *)malloc(sizeof(double) * (size_t)(ntot + 1)),
                      (double *)malloc(sizeof(double) * (size_t)(ntot + 1))};
    /* each order's last local-control trace: the courier prediction's ready times */
    xs_moe_tile *ltr[2] = {(xs_moe_tile *)calloc((size_t)ntot + 1, sizeof(xs_moe_tile)),
                           (xs_moe_tile *)calloc((size_t)ntot + 1, sizeof(xs_moe_tile))};
    int nltr[2] = {0, 0};
#define EP_TRY(call)                                                                           \
    do {                                                                                       \
        st = (call);                                                                           \
        if (st != XS_OK)                                                                       \
            goto done;                                                                         \
    } while (0)

    for (int v = 0; v < EP_NVAR; v++)
        samples[v] = (double *)calloc((size_t)nsv + 1, sizeof(double));
    gemm_samples = (double *)calloc((size_t)nsv + 1, sizeof(double));
    for (int v = 0; v < EP_NVAR; v++)
        if (!samples[v])
            EP_TRY(xs_seterr(XS_ENOMEM, "bench ep: out of host memory"));
    if (!gemm_samples || !ref_acc || !ref[0] || !ref[1] || !ltr[0] || !ltr[1])
        EP_TRY(xs_seterr(XS_ENOMEM, "bench ep: out of host memory"));

    EP_TRY(xs_moe_reference_gpu(m, cb));
    {
        /* plans: slot 0 wave, slot 1 interleaved, slot 2 auto */
        xs_moe_plan wp = {XS_MOE_WAVE, 0, o->wave_experts, 0, 0};
        r->lead = o->lead >= 0 ? o->lead : xs_moe_default_lead(xs_moe_host(m));
        xs_moe_plan ip = {XS_MOE_INTERLEAVED, r->lead, 0, 0, 0};
        EP_TRY(xs_moe_set_plan(m, 0, &wp));
        EP_TRY(xs_moe_set_plan(m, 1, &ip));

        /* the local control, both orders: compute costs without the link */
        xs_wintab local;
        EP_TRY(xs_moe_local_table(m, &local));
        xs_moe_costs cost[2];
        const xs_moe_tile *tr;
        int ntr;
        EP_TRY(ep_local_control(o, m, cb, &local, &ro, prof, tiles, ntot, ref_acc, ref, ltr,
                                nltr, cost, r));
        const double r_local = cost[0].local_issue_bytes_per_ns;
        r->local_issue = r_local;
        /* auto: the model decides from the profile and the measured costs of both orders */
        xs_moe_auto_result ar;
        double t_model = xs_now_s();
        const xs_moe_local_traces lt = {ltr[0], nltr[0], ltr[1], nltr[1]};
        EP_TRY(xs_moe_auto(xs_moe_host(m), prof, &o->mm, &cost[0], &cost[1], &lt, &ar));
        r->model_s += xs_now_s() - t_model;
        EP_TRY(xs_moe_set_plan(m, 2, &ar.plan));
        /* slot 3: the best courier candidate, forced (the courier column) */
        r->couriers = ar.courier.couriers;
        r->auto_couriers = ar.plan.couriers;
        r->pred_courier_us = ar.courier_ns / 1e3;
        if (r->couriers > 0) {
            r->courier_sched = xs_moe_sched_name(ar.courier.kind);
            EP_TRY(xs_moe_set_plan(m, 3, &ar.courier));
        }
        /* slot 4: the adaptive candidate (the adaptive column) */
        r->adaptive = ar.adaptive.kind == XS_MOE_ADAPTIVE;
        r->pred_adaptive_us = ar.adaptive_ns / 1e3;
        r->pred_spill_us = ar.spill_ns / 1e3;
        r->auto_spill = ar.plan.spill_depth > 0;
        r->auto_lead_end = ar.plan.lead_end;
        r->pred_paced_plain_us = ar.paced_plain_ns / 1e3;
        /* slot 5: auto's decision without the lead search, where it differs (--auto-fixed) */
        if (o->auto_fixed) {
            xs_moe_model mf = o->mm;
            mf.lead_search = 0;
            xs_moe_auto_result af;
            t_model = xs_now_s();
            EP_TRY(xs_moe_auto(xs_moe_host(m), prof, &mf, &cost[0], &cost[1], &lt, &af));
            r->model_s += xs_now_s() - t_model;
            if (!xs_moe_plan_equal(&af.plan, &ar.plan)) {
                r->fixed_lead = af.plan.kind == XS_MOE_INTERLEAVED ? af.plan.lead : 0;
                r->fixed_lead_end = af.plan.lead_end;
                r->pred_fixed_us = af.auto_ns / 1e3;
                EP_TRY(xs_moe_set_plan(m, 5, &af.plan));
            }
        }
        r->adaptive_ahead_us = r->adaptive ? ar.adaptive.admit_ahead_ns / 1e3 : NAN;
        if (r->adaptive)
            EP_TRY(xs_moe_set_plan(m, 4, &ar.adaptive));
        ep_row_auto(&ar, r);
        /* the local-control reference of each variant's order (auto: its own order) */
        const double *ref_auto = ar.plan.kind == XS_MOE_WAVE ? ref[0] : ref[1];
        const double *ref_fixed = r->fixed_lead == 0 ? ref[0] : ref[1];
        const double *ref_of[EP_NVAR] = {NULL, ref[0], ref[1], ref_auto, NULL,
                                         ref[1], NULL, NULL, NULL, ref_auto, ref_fixed};

        /* the virtual-peer windows, or (-g) one region per source in every real peer's window */
        xs_win_opts wo;
        memset(&wo, 0, sizeof wo);
        wo.target = coll ? XS_TARGET_PEER : XS_TARGET_VIRTUAL;
        wo.virtual_peers = peers;
        wo.bytes = coll ? (size_t)peers * info.window_bytes : info.window_bytes;
        wo.nflags = 1;
        wo.device = o->common.device;
        EP_TRY(xs_win_open(&wo, &ws));
        const xs_wintab *tab = xs_win_table(ws);
        if (coll) {
            if (!(pp = (ep_peer *)calloc(1, sizeof *pp)))
                EP_TRY(xs_seterr(XS_ENOMEM, "bench ep: out of host memory"));
            const int n = tab->nranks, me = tab->rank;
            if (n != peers)
                EP_TRY(xs_seterr(XS_EINVAL, "bench ep: %d peer windows for %d ranks", n, peers));
            pp->ws = ws;
            pp->coll = coll;
            pp->me = me;
            pp->n = n;
            pp->region = info.window_bytes;
            pp->send.nranks = pp->own.nranks = n;
            pp->send.rank = pp->own.rank = 0;
            pp->send.bytes = pp->own.bytes = info.window_bytes;
            for (int q = 0; q < n; q++) {
                pp->send.data[q] = tab->data[(me + q) % n] + (size_t)me * info.window_bytes;
                /* the kernel's "remote" (pacer, trace, model): every row not for this GPU */
                pp->send.host_mem[q] = q != 0;
                pp->own.data[q] = tab->data[me] + (size_t)((me - q + n) % n) * info.window_bytes;
            }
            tab = &pp->own; /* what ep_check reads: this rank's window, every source's region */
        }
        const xs_wintab *run_tab = pp ? &pp->send : tab;

        /* round-robin over the variants, the last round verified */
        const int slot_of[EP_NVAR] = {0, 0, 1, 2, 3, 4, 0, 1, 2, 2, 5};
        xs_moe_run_opts ro_bulk = ro, ro_defer = ro;
        ro_bulk.bulk_combine = 1;
        ro_defer.defer = o->defer;
        ro_defer.spill_depth = o->spill_depth;
        for (int it = 0; it < o->common.warmup + o->common.iters; it++) {
            const int last = it == o->common.warmup + o->common.iters - 1;
            for (int var = 0; var < EP_NVAR; var++) {
                if (!o->run[var] || (var == EP_COURIER && r->couriers <= 0) ||
                    (var == EP_ADAPT && !r->adaptive) ||
                    (var == EP_AUTO_FIXED && r->fixed_lead < 0) ||
                    ((var == EP_AUTO_BULK || var == EP_AUTO_DEFER) && r->auto_couriers > 0))
                    continue;
                double us = 0, gus = 0;
                EP_TRY(ep_run(m, cb, var, slot_of[var], run_tab, pp,
                              EP_IS_BULK(var)            ? &ro_bulk
                              : var == EP_AUTO_DEFER     ? &ro_defer
                                                         : &ro,
                              &us, &gus));
                if (it >= o->common.warmup) {
                    samples[var][ns[var]++] = us;
                    if (var == EP_UNFUSED)
                        gemm_samples[ns[var] - 1] = gus;
                }
                if (last)
                    EP_TRY(ep_last_round(o, m, var, tab, prof, r_local, ref_of, ntot, tiles, r));
            }
        }
        for (int v = 0; v < EP_NVAR; v++)
            r->t[v] = ep_stats(samples[v], ns[v]);
        ep_time g = ep_stats(gemm_samples, ns[EP_UNFUSED]);
        r->cublas_gemm_us = g.med;
        double local_best = r->local.med < r->local_inter.med ? r->local.med : r->local_inter.med;
        r->compute_us = local_best;
        r->drain_us = info.remote_bytes / prof->drain_bytes_per_ns / 1e3;
        r->bound_us = r->compute_us > r->drain_us ? r->compute_us : r->drain_us;
        r->gemm_eff = r->cublas_gemm_us / r->local.med;
        if (coll) {
            /* every rank verified its own window: the point is verified when all are; the
             * slowest rank's medians go next to rank 0's */
            double g[2 + EP_NVAR];
            g[0] = r->verified ? 0.0 : 1.0;
            g[1] = isnan(r->max_rel_err) ? INFINITY : r->max_rel_err;
            for (int v = 0; v < EP_NVAR; v++)
                g[2 + v] = isnan(r->t[v].med) ? -1.0 : r->t[v].med;
            EP_TRY(xs_coll_max(coll, g, 2 + EP_NVAR));
            r->verified = g[0] == 0.0;
            r->max_rel_err = isinf(g[1]) ? NAN : g[1];
            for (int v = 0; v < EP_NVAR; v++)
                r->rank_max_us[v] = g[2 + v] < 0 ? NAN : g[2 + v];
        }
    }
done:
#undef EP_TRY
    r->point_s = xs_now_s() - t_point;
    free(pp);
    if (ws)
        xs_win_close(ws);
    for (int v = 0; v < EP_NVAR; v++)
        free(samples[v]);
    free(gemm_samples);
    free(ref_acc);
    free(ref[0]);
    free(ref[1]);
    free(ltr[0]);
    free(ltr[1]);
    xs_moe_destroy(m);
    if (st != XS_OK)
        r->verified = 0;
    return st;
}

/* A configuration's token counts: --tokens, --long (ep_long_mult x its largest default, a point
 * whose combine exceeds EP_LONG_MAX_BYTES skipped, with a note where note is set) or its
 * defaults (--quick: smaller ones). Returns how many. */
static int ep_tokens(const ep_opts *o, const xs_moe_config *cfg, int *toks, int note)
{
    int nt = 0;
    if (o->ntokens) {
        memcpy(toks, o->tokens, sizeof(int) * (size_t)o->ntokens);
        return o->ntokens;
    }
    if (o->long_tokens) {
        for (size_t i = 0; i < sizeof ep_long_mult / sizeof ep_long_mult[0]; i++) {
            const int t = cfg->tokens[2] * ep_long_mult[i];
            const double bytes = (double)t * cfg->topk * cfg->hidden * 2;
            if (bytes <= EP_LONG_MAX_BYTES)
                toks[nt++] = t;
            else if (note)
                printf("# --long: %s T=%d skipped: its combine is %.1f GiB (at most %d)\n",
                       cfg->name, t, bytes / (1024.0 * 1024 * 1024), EP_LONG_MAX_GIB);
        }
        return nt;
    }
    for (int i = 0; i < 3; i++)
        toks[nt++] = o->quick ? cfg->tokens[0] / (i == 2 ? 1 : (2 - i) * 2) : cfg->tokens[i];
    return nt;
}

/* ---- entry ---------------------------------------------------------------------------------- */

int xs_bench_ep(int argc, char **argv)
{
    ep_opts o;
    int rc = ep_parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    xs_profile prof;
    if (xs_profile_args_resolve(&o.common.pa, &prof) != XS_OK)
        return xs_cli_fail();
    int me = 0, nranks = 1;
    if (o.common.gpus_set) {
        /* as calibrate -g: the parent starts one rank per GPU and waits; a rank goes on */
        int ec = 0, l = xs_bench_launch(o.common.gpus, &ec);
        if ((l = xs_launch_exit(l, ec)) >= 0)
            return l;
        int have = 0;
        if (xs_rank_env(&me, &nranks, NULL, &have) != XS_OK)
            return xs_cli_fail();
        o.peers[0] = nranks; /* the ranks are the peers */
        o.npeers = 1;
        o.peers_set = 1;
    }
    xs_gpu_info gi;
    if (xs_gpu_open(o.common.device, &gi) != XS_OK) /* a launched rank: XS_DEVICE */
        return xs_cli_fail();
    xs_coll *coll = NULL;
    if (o.common.gpus_set && xs_coll_open(&coll) != XS_OK)
        return xs_cli_fail();
    xs_cublas *cb = NULL;
    if (xs_cublas_open(&cb) != XS_OK) {
        xs_coll_close(coll, 1);
        return xs_cli_fail(); /* the baseline and the reference need it */
    }
    FILE *csv = NULL, *tiles = NULL;
    /* files: rank 0 only (the others' results reach it through the collectives) */
    if (me == 0 && o.csv && !(csv = fopen(o.csv, "w"))) {
        xs_cublas_close(cb);
        xs_coll_close(coll, 1);
        return xs_cli_failf("--csv %s: cannot write", o.csv);
    }
    if (me == 0 && o.tiles && !(tiles = fopen(o.tiles, "w"))) {
        if (csv)
            fclose(csv);
        xs_cublas_close(cb);
        xs_coll_close(coll, 1);
        return xs_cli_failf("--tiles %s: cannot write", o.tiles);
    }
    xs_gpu_report_header(stdout, &gi, argc, argv);
    if (coll)
        printf("# ranks: %d processes, rank r on GPU r; combine into the peers' NCCL symmetric "
               "windows (LSA pointers), one region per source; unfused combine: grouped "
               "ncclSend/ncclRecv; every rank verifies every region of its own window; times are "
               "rank 0's (the slowest rank's medians at the end)\n", nranks);
    if (coll && (xs_coll_alltoall_bw(coll, 1u << 20, NULL) != XS_OK ||
                 xs_coll_alltoall_bw(coll, 32u << 20, NULL) != XS_OK)) {
        if (csv)
            fclose(csv);
        if (tiles)
            fclose(tiles);
        xs_cublas_close(cb);
        xs_coll_close(coll, 1);
        return xs_cli_fail();
    }
    printf("# profile: %s path, R %.1f B/ns, Q %.0f B (per producer %.0f), r %.1f B/ns, o %.0f "
           "ns, chunk %.0f B%s\n", prof.path, prof.drain_bytes_per_ns, prof.capacity_bytes,
           prof.capacity_bytes_per_producer, prof.issue_bytes_per_ns, prof.issue_overhead_ns,
           prof.chunk_bytes, prof.provisional ? " (provisional)" : "");
    printf("# profile: queue %.0f B, reserve %.0f B (+ tandem buffer %.0f B, modelled as "
           "reserve) per producer, arbitration skew %.2f; kernel model: main loops stall above "
           "%.0f B of backlog (speed %.2f); auto may pace at %.0f B (%.2f R)\n",
           prof.queue_bytes_per_producer, prof.reserve_bytes_per_producer,
           prof.buffer_bytes_per_producer, prof.arbitration_skew, o.mm.block_bytes,
           o.mm.block_speed, o.mm.pace_bytes, o.mm.pace_drain_frac);
    char cline[200];
    if (o.mm.couriers == 0)
        snprintf(cline, sizeof cline, "# couriers: off (--couriers 0)\n");
    else if (o.mm.couriers < 0)
        snprintf(cline, sizeof cline, "# couriers: auto weighs C = 4 and 8 at %.2f R (%.1f B/ns "
                 "in all); the courier column runs the better one, forced\n",
                 o.mm.courier_pace_frac, o.mm.courier_pace_frac * prof.drain_bytes_per_ns);
    else
        snprintf(cline, sizeof cline, "# couriers: auto weighs C = %d at %.2f R (%.1f B/ns in "
                 "all); the courier column runs it, forced\n", o.mm.couriers,
                 o.mm.courier_pace_frac, o.mm.courier_pace_frac * prof.drain_bytes_per_ns);
    fputs(cline, stdout);
    printf("# times: median of %d runs after %d warm-up, variants interleaved round-robin; "
           "windows poisoned and L2 overwritten before every run; every variant's last run "
           "verified at the destination (row tolerance %.0e, overall %.0e)\n", o.common.iters,
           o.common.warmup, XS_MOE_TOL_ROW, XS_MOE_TOL_FROB);
    if (csv) {
        xs_gpu_report_header(csv, &gi, argc, argv);
        fprintf(csv, "# profile: %s path, %s, R %.3f B/ns, Q %.0f B, r %.3f B/ns, o %.1f ns, "
                "chunk %.0f B, queue %.0f B, reserve %.0f B, skew %.3f%s; kernel model: block "
                "%.0f B at speed %.3f, pace %.0f B at %.3f R\n", prof.path,
                prof.date[0] ? prof.date : "undated", prof.drain_bytes_per_ns, prof.capacity_bytes,
                prof.issue_bytes_per_ns, prof.issue_overhead_ns, prof.chunk_bytes,
                prof.queue_bytes_per_producer, prof.reserve_bytes_per_producer,
                prof.arbitration_skew, prof.provisional ? " (provisional)" : "",
                o.mm.block_bytes, o.mm.block_speed, o.mm.pace_bytes, o.mm.pace_drain_frac);
        fputs(cline, csv);
        fputs(ep_csv_header, csv);
    }
    if (tiles)
        fputs("config,routing,tokens,peers,schedule,task,kind,rb,nb,cta,smid,remote_bytes,"
              "total_bytes,fetch_ns,mma0_ns,mma1_ns,st0_ns,st1_ns,span_ns,pred_span_ns,"
              "t_iss0_ns,stall_meas_ns,stall_pred_ns,gate_ns,ref_mainloop_ns,mma_stall_meas_ns,"
              "mma_stall_pred_ns\n", tiles);

    static ep_row rows[EP_MAX_ROWS];
    int nrows = 0, failures = 0, tried = 0, intr = 0, coll_failed = 0;
    int total = 0;
    for (int ci = 0; ci < o.nconfigs; ci++) {
        int toks[EP_MAX_LIST];
        total += o.nroutings * ep_tokens(&o, o.configs[ci], toks, 0) *
                 (o.peers_set ? o.npeers : 1);
    }
    ep_table_header();
    for (int ci = 0; ci < o.nconfigs; ci++) {
        const xs_moe_config *cfg = o.configs[ci];
        xs_moe_weights *w = NULL;
        if (xs_moe_weights_create(cfg, o.common.seed, &w) != XS_OK) {
            fprintf(stderr, "xstage: error: %s: %s\n", cfg->name, xs_errmsg());
            failures++;
            if (coll) {
                coll_failed = 1;
                goto finish;
            }
            continue;
        }
        int toks[EP_MAX_LIST];
        const int nt = ep_tokens(&o, cfg, toks, 1);
        /* peers: --peers, or the configuration's own (docs/EP.md, "Choosing the sweep") */
        int peers[EP_MAX_LIST], npeers = o.npeers;
        memcpy(peers, o.peers, sizeof peers);
        if (!o.peers_set) {
            peers[0] = cfg->peers > 0 ? cfg->peers : 4;
            npeers = 1;
        }
        for (int ri = 0; ri < o.nroutings; ri++)
            for (int ti = 0; ti < nt; ti++)
                for (int pi = 0; pi < npeers && nrows < EP_MAX_ROWS; pi++) {
                    if (xs_interrupted()) { /* stop between points (xstage_sigint.h) */
                        intr = 1;
                        xs_moe_weights_destroy(w);
                        goto finish;
                    }
                    tried++;
                    ep_row *r = &rows[nrows];
                    xs_status st = ep_point(&o, w, cfg, toks[ti], peers[pi], o.routings[ri],
                                            &prof, cb, coll, tiles, r);
                    if (st != XS_OK) {
                        fprintf(stderr, "xstage: error: %s%s %s T=%d N=%d: %s\n",
                                coll ? "rank " : "", cfg->name,
                                xs_moe_routing_name(o.routings[ri]), toks[ti], peers[pi],
                                xs_errmsg());
                        failures++;
                        if (coll) {
                            /* the ranks walk the points in lockstep: one rank's error ends the
                             * run (its exit stops the others through the launcher) */
                            coll_failed = 1;
                            xs_moe_weights_destroy(w);
                            goto finish;
                        }
                        if (st == XS_ECUDA) {
                            /* a sticky CUDA error poisons every later point: stop here */
                            cudaError_t e = cudaGetLastError();
                            if (e != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
                                xs_moe_weights_destroy(w);
                                goto finish;
                            }
                        }
                        continue;
                    }
                    failures += !r->verified;
                    ep_table_row(r);
                    if (csv)
                        ep_csv_row(csv, r);
                    nrows++;
                }
        xs_moe_weights_destroy(w);
    }
finish:
    ep_summary(rows, nrows);
    for (int i = 0; i < nrows; i++)
        if (rows[i].how[0])
            printf("# auto %s %s T=%d N=%d: %s\n", rows[i].config, rows[i].routing,
                   rows[i].tokens, rows[i].peers, rows[i].how);
    for (int i = 0; coll && i < nrows; i++)
        printf("# ranks %s %s T=%d N=%d: slowest rank's medians (us) unfused %.1f wave %.1f "
               "interleaved %.1f auto %.1f courier %.1f\n", rows[i].config, rows[i].routing,
               rows[i].tokens, rows[i].peers, rows[i].rank_max_us[EP_UNFUSED],
               rows[i].rank_max_us[EP_WAVE], rows[i].rank_max_us[EP_INTER],
               rows[i].rank_max_us[EP_AUTO], rows[i].rank_max_us[EP_COURIER]);
    if (intr && csv)
        fputs("# INTERRUPTED: partial results\n", csv);
    if (intr && tiles)
        fputs("# INTERRUPTED: partial results\n", tiles);
    if (csv)
        fclose(csv);
    if (tiles)
        fclose(tiles);
    xs_cublas_close(cb);
    xs_coll_close(coll, coll_failed || intr);
    if (intr)
        return xs_cli_failf("interrupted by %s after %d of %d points%s", xs_interrupt_name(),
                            tried, total, o.csv || o.tiles ? "; partial CSV marked" : "");
    if (failures) {
        printf("# bench ep FAILED: %d point(s) failed or did not verify\n", failures);
        return 1;
    }
    printf("# bench ep OK: %d points, every run verified\n", nrows);
    return 0;
}
