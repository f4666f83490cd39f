// SPDX-License-Identifier: Apache-2.0
/*
 * ep.cu - `xstage bench ep`: the fused MoE (expert parallelism) sweep on one GPU with
 * virtual peers: rank 0's window in HBM, ranks 1..N-1 in pinned host memory over PCIe; with -g,
 * real peers, one rank per GPU (docs/MULTIGPU.md). The shared harness (tools/bench/harness.h)
 * owns the options it has in common with bench tp/up, the launch, the L2 flush, the rounds, the
 * statistics and the report; this file brings the variants and one point.
 *
 * For every configuration x routing x token count x peer count, with the same inputs:
 *   unfused      gather, cuBLAS GEMM per expert, SwiGLU, cuBLAS GEMM per expert, scale, one
 *                cudaMemcpyAsync per rank into its window (the same link);
 *   wave         the fused kernel, expert-wave task order (the published baseline);
 *   interleaved  the fused kernel, Linear-1 tiles of later row blocks between Linear-2 bursts
 *                with a minimum row lead D;
 *   overlapped   the unfused steps as a pipeline (virtual peers; docs/EP.md "Overlapped"):
 *                pieces of equal tokens in destination order, each piece's cuBLAS GEMMs per
 *                expert on the compute stream and its combine copied by cudaMemcpyAsync on a
 *                side stream under the next piece's compute (xs_moe_run_overlapped); the
 *                piece count chosen by verified pilot runs, every timed run verified;
 *   auto         what the model picks from its predictions alone (xs_auto_pick): the fused
 *                kernel in the order (and pacing, or couriers) it predicts best, the
 *                overlapped pipeline at the count it predicts best, or unfused (docs/EP.md);
 *   courier      the fused kernel with its best courier candidate forced (docs/EP.md,
 *                "Couriers"): the last C CTAs copy the combine from an HBM staging buffer,
 *                paced under R; side by side with the others (--couriers 0: not run);
 *   local        the fused kernel with every window in HBM, wave and interleaved order (the
 *                control; its traces give the compute costs the auto rule and bound_us use, and
 *                each tile's unstalled main loop for the per-tile MMA-side stall).
 * Runs are interleaved round-robin over the iterations, in the variant table's order, so that
 * drift hits every variant alike; before each run the windows are poisoned (bf16 NaN) and L2 is
 * overwritten. Every variant's last run is verified row by row at the destination against an
 * fp32 reference (the unfused path with fp32 GEMM outputs). docs/EP.md defines every column.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ep_bench.h"
#include "harness.h"
#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_cuda.h"
#include "xstage_ep.h"
#include "xstage_exchange.h"
#include "xstage_grid.h"
#include "xstage_launch.h"
#include "xstage_overlap.h"
#include "xstage_trace.h"
#include "xstage_win.h"

#define EP_MAX_LIST 16
#define EP_MAX_ROWS 1024
#define EP_REF_RUNS 8 /* local-control runs whose main loops give each tile's reference */
/* --long: each configuration at these multiples of its largest default token count, where the
 * combine (T x top-k rows of H bf16 values, all ranks' windows together) stays within
 * EP_LONG_MAX_BYTES (its runs, poisoning and checks all grow with the combine) */
static const int ep_long_mult[] = {8, 16, 32};
static_assert(sizeof ep_long_mult / sizeof ep_long_mult[0] == 3, "--long's help names three");
#define EP_LONG_MAX_GIB 4
/* the overlapped pipeline's declared piece counts (those up to T run) and the runs of a pilot */
#define EP_OV_CHUNKS {1, 2, 4, 8, 16}
#define EP_OV_NCHUNKS 5
#define EP_PILOT_REPS 3
#define EP_LONG_MAX_BYTES (EP_LONG_MAX_GIB * 1024.0 * 1024 * 1024)

static const char *const ep_var_name[EP_NVAR] = {"unfused", "wave", "interleaved", "auto",
                                                 "courier", "adaptive", "wave_bulk",
                                                 "interleaved_bulk", "auto_bulk", "auto_defer",
                                                 "auto_fixed", "overlapped"};

/* The options of bench ep beyond the harness's common block (xs_bench_common). */
typedef struct {
    const char *cfg_arg; /* --config: NAME[,NAME] or all */
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
    int quick, lead, wave_experts;
    int bulk;  /* --bulk: also the *_BULK variants */
    int defer; /* --defer[=ring|spill]: also auto's plan on a deferring kernel (EP_AUTO_DEFER):
                * XS_MOE_DEFER_RING or XS_MOE_DEFER_SPILL; 0: no */
    int spill_depth; /* --spill-depth: xs_moe_run_opts.spill_depth (0: its default) */
    int auto_fixed;  /* --auto-fixed: also auto's decision without the lead search (EP_AUTO_FIXED)
                      * where it differs from auto's */
    xs_moe_model mm; /* the kernel-level model (--block-bytes, --block-speed, --pace-bytes,
                      * --couriers, --courier-pace) */
    const char *tiles;
    const char *trace; /* --trace DIR: each point's runs as trace v1 files */
    int cfg_set, routing_set; /* --config, --routing given */
    int grid;             /* --grid declared: the issue's declared grid (include/xstage_grid.h),
                           * every point a row */
    const char *rows_arg; /* --rows A:B as given (parsed once the grid is known) */
    int rows_lo, rows_hi; /* the grid's rows lo..hi-1 */
} ep_opts;

/* -g/--gpus: this rank's windows and the tables that map the one-rank problem onto real ranks.
 * Every rank runs the same problem (same seed); its problem rank r (token t has problem rank
 * t % N, rank 0 = local in the kernel and the model) is GPU (me + r) % N, and every source owns
 * one region of each destination's window, so destination d's region s holds the rows that
 * source s's problem sends to its problem rank (d - s) mod N (docs/MULTIGPU.md). */
typedef struct {
    xs_coll *coll;   /* the unfused baseline's ncclSend/ncclRecv */
    xs_wintab send;  /* stores: problem rank r -> GPU (me + r) % N, region me */
    xs_wintab own;   /* receives: problem rank r -> this window, region (me - r) mod N */
    int me, n;
    size_t region;   /* bytes per source region (the one-rank problem's window) */
} ep_peer;

/* ---- options -------------------------------------------------------------------------------- */

/* The usage lines of the EP options (the configurations are listed from the table). */
static const char *ep_help(void)
{
    static char h[6144];
    size_t k = (size_t)snprintf(h, sizeof h,
                                "  -c, --config NAME[,NAME]|all  configurations (default all):");
    for (int i = 0; i < xs_moe_nconfigs && k < sizeof h; i++)
        k += (size_t)snprintf(h + k, sizeof h - k, "%s%s%s",
                              i % 4 ? " " : "\n                                  ",
                              xs_moe_configs[i].name, xs_moe_configs[i].sweep ? "" : "(*)");
    if (k >= sizeof h)
        return h;
    snprintf(h + k, sizeof h - k,
         "\n"
         "                               (*: not in the default sweep)\n"
         "  -t, --tokens LIST            token counts (default: 3 per configuration)\n"
         "  -p, --peers LIST             destinations incl. the local rank (default: each\n"
         "                               configuration's own, docs/EP.md); -g N: the N ranks\n"
         "                               are the peers (the combine into real peers' NCCL\n"
         "                               windows; unfused baseline: grouped ncclSend/\n"
         "                               ncclRecv, docs/MULTIGPU.md)\n"
         "  -r, --routing balanced|zipf|all   (default all)\n"
         "      --schedule wave|interleaved|auto|courier|adaptive|overlapped|all\n"
         "                               the variants besides wave and unfused (default all;\n"
         "                               overlapped: virtual peers only)\n"
         "      --lead D                 interleaved row-block lead (default: model rule)\n"
         "      --wave-experts W         experts per wave (default: waves of >= 1 round)\n"
         "      --tiles FILE             one row per tile of every verified run\n"
         "      --trace DIR              each point's verified runs as trace v1 files\n"
         "                               (xstage compare --trace; docs/TRACE.md)\n"
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
         "      --auto-fixed             also auto's decision without the lead search,\n"
         "                               measured in the same rounds where it differs (the\n"
         "                               auto_fixed column)\n"
         "      --bulk                   also wave, interleaved and auto with the combine rows\n"
         "                               handed to the TMA (cp.async.bulk from the staging\n"
         "                               tile), measured in the same rounds (auto: not where\n"
         "                               it chose couriers)\n"
         "      --long                   the long-token points instead of the defaults: %d, %d\n"
         "                               and %d x each configuration's largest default token\n"
         "                               count; a point whose combine exceeds %d GiB is\n"
         "                               skipped (docs/EP.md, \"The long-token limit\")\n"
         "      --grid WORD              declared: the declared grid of issue 33, model (8) x\n"
         "                               routing x tokens per rank (256..16384) x peers\n"
         "                               (2, 4, 8), %d rows, each one reported (columns\n"
         "                               grid_row, status: ok, skipped: <why> when it cannot\n"
         "                               run here, failed: <error>, not run: --max-time\n"
         "                               spent); default: the sweep above\n"
         "      --rows A:B               with --grid declared: rows A..B-1 of it only (A: or\n"
         "                               :B open-ended), to split the grid over runs [all]\n",
             ep_long_mult[0], ep_long_mult[1], ep_long_mult[2], EP_LONG_MAX_GIB, XS_GRID_EP_ROWS);
    return h;
}

enum { O_LEAD = XS_OPT_FIRST_FREE, O_WAVE, O_TILES, O_BLOCK, O_BSPEED, O_PACE, O_COURIERS,
       O_CPACE, O_AUTOCOUR, O_CCOPY, O_BULK, O_AUTOADAPT, O_PACEFRAC, O_DEFER, O_SPILLDEPTH,
       O_AUTOSPILL, O_LONG, O_AUTOFIXED, O_TRACE, O_GRID, O_ROWS };
static const struct option ep_long[] = {
    {"config", required_argument, 0, 'c'},   {"tokens", required_argument, 0, 't'},
    {"peers", required_argument, 0, 'p'},    {"routing", required_argument, 0, 'r'},
    {"schedule", required_argument, 0, XS_OPT_SCHEDULE},
    {"tiles", required_argument, 0, O_TILES},
    {"trace", required_argument, 0, O_TRACE},
    {"lead", required_argument, 0, O_LEAD},
    {"wave-experts", required_argument, 0, O_WAVE},
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
    {"auto-fixed", no_argument, 0, O_AUTOFIXED},
    {"grid", required_argument, 0, O_GRID},
    {"rows", required_argument, 0, O_ROWS},
    {0, 0, 0, 0}};

/* --schedule NAME: the fused variants it keeps (wave always: the baseline every ratio divides) */
static xs_status ep_schedule(ep_opts *o, const char *arg)
{
    if (!strcmp(arg, "all"))
        return XS_OK;
    o->run[EP_WAVE] = !strcmp(arg, "wave");
    o->run[EP_INTER] = !strcmp(arg, "interleaved");
    o->run[EP_AUTO] = !strcmp(arg, "auto");
    o->run[EP_COURIER] = !strcmp(arg, "courier");
    o->run[EP_ADAPT] = !strcmp(arg, "adaptive");
    o->run[EP_OVERLAP] = !strcmp(arg, "overlapped");
    if (!o->run[EP_WAVE] && !o->run[EP_INTER] && !o->run[EP_AUTO] && !o->run[EP_COURIER] &&
        !o->run[EP_ADAPT] && !o->run[EP_OVERLAP])
        return xs_seterr(XS_EINVAL, "--schedule '%s': wave, interleaved, auto, courier, adaptive, "
                         "overlapped or all", arg);
    o->run[EP_WAVE] = 1;
    return XS_OK;
}

/* One EP option (xs_bench_spec.opt). */
static xs_status ep_opt(void *ctx, int ch, const char *arg)
{
    ep_opts *o = (ep_opts *)ctx;
    long v;
    int64_t sz;
    switch (ch) {
    case 'c':
        o->cfg_arg = arg;
        o->cfg_set = 1;
        return XS_OK;
    case 't': return xs_parse_list("--tokens", arg, 0, 1, 1 << 20, o->tokens, EP_MAX_LIST,
                                   &o->ntokens);
    case 'p':
        o->peers_set = 1;
        return xs_parse_list("--peers", arg, 0, 1, XS_MAX_RANKS, o->peers, EP_MAX_LIST,
                             &o->npeers);
    case 'r':
        o->routing_set = 1;
        if (!strcmp(arg, "balanced") || !strcmp(arg, "zipf")) {
            o->routings[0] = !strcmp(arg, "zipf") ? XS_ROUTE_ZIPF : XS_ROUTE_BALANCED;
            o->nroutings = 1;
        } else if (strcmp(arg, "all")) {
            return xs_seterr(XS_EINVAL, "--routing '%s': balanced, zipf or all", arg);
        }
        return XS_OK;
    case XS_OPT_SCHEDULE: return ep_schedule(o, arg);
    case O_TILES: o->tiles = arg; return XS_OK;
    case O_TRACE: o->trace = arg; return XS_OK;
    case O_LEAD:
        XS_TRY(xs_parse_int("--lead", arg, 0, 1 << 20, &v));
        o->lead = (int)v;
        return XS_OK;
    case O_WAVE:
        XS_TRY(xs_parse_int("--wave-experts", arg, 1, 4096, &v));
        o->wave_experts = (int)v;
        return XS_OK;
    case O_BLOCK:
        XS_TRY(xs_parse_size("--block-bytes", arg, &sz));
        o->mm.block_bytes = (double)sz;
        return XS_OK;
    case O_BSPEED: return xs_parse_double("--block-speed", arg, 0, 1, &o->mm.block_speed);
    case O_PACE:
        XS_TRY(xs_parse_size("--pace-bytes", arg, &sz));
        o->mm.pace_bytes = (double)sz;
        return XS_OK;
    case O_PACEFRAC:
        return xs_parse_double("--pace-frac", arg, 0.1, 1.2, &o->mm.pace_drain_frac);
    case O_COURIERS:
        XS_TRY(xs_parse_int("--couriers", arg, 0, 64, &v));
        o->mm.couriers = (int)v;
        return XS_OK;
    case O_AUTOCOUR: o->mm.auto_couriers = 1; return XS_OK;
    case O_BULK: o->bulk = 1; return XS_OK;
    case O_DEFER:
        if (!arg || !strcmp(arg, "ring"))
            o->defer = XS_MOE_DEFER_RING;
        else if (!strcmp(arg, "spill"))
            o->defer = XS_MOE_DEFER_SPILL;
        else if (!strcmp(arg, "none"))
            o->defer = XS_MOE_DEFER_NONE;
        else
            return xs_seterr(XS_EINVAL, "bench ep: --defer=%s: ring, spill or none", arg);
        return XS_OK;
    case O_SPILLDEPTH:
        XS_TRY(xs_parse_int("--spill-depth", arg, 1, XS_MOE_SPILL_MAX, &v));
        o->spill_depth = (int)v;
        return XS_OK;
    case O_AUTOADAPT: o->mm.auto_adaptive = 1; return XS_OK;
    case O_AUTOSPILL: o->mm.auto_spill = 0; return XS_OK;
    case O_AUTOFIXED: o->auto_fixed = 1; return XS_OK;
    case O_CCOPY:
        return xs_parse_double("--courier-copy-rate", arg, 0, 1e6,
                               &o->mm.courier_copy_bytes_per_ns);
    case O_CPACE:
        return xs_parse_double("--courier-pace", arg, 0.01, 2, &o->mm.courier_pace_frac);
    case O_LONG: o->long_tokens = 1; return XS_OK;
    case O_GRID: return xs_grid_parse(arg, &o->grid);
    case O_ROWS: o->rows_arg = arg; return XS_OK;
    default: return xs_seterr(XS_EINVAL, "bench ep: unknown option %d", ch);
    }
}

/* --grid declared: the grid fixes the points (XS_EINVAL with one line for an option that would
 * change them; -g in any form: its ranks are the peers), --rows picks a slice, and the
 * configurations become the grid's models in its order. */
static xs_status ep_check_grid(ep_opts *o, const xs_bench_common *c)
{
    const char *bad = o->cfg_set ? "--config" : o->ntokens ? "--tokens" : o->peers_set ? "--peers"
                      : o->routing_set ? "--routing" : o->long_tokens ? "--long"
                      : c->quick ? "--quick" : c->b.gpus_set ? "-g" : NULL;
    XS_TRY(xs_grid_opts_check("bench ep", o->grid, bad, o->rows_arg, XS_GRID_EP_ROWS, &o->rows_lo,
                              &o->rows_hi));
    if (!o->grid)
        return XS_OK;
    o->nconfigs = 0;
    for (int m = 0; m < XS_GRID_EP_NMODELS; m++) {
        const xs_moe_config *cf = xs_moe_config_find(xs_grid_ep_models[m]);
        if (!cf)
            return xs_seterr(XS_EINVAL, "ep grid: model %s is not in the EP configuration table",
                             xs_grid_ep_models[m]);
        o->configs[o->nconfigs++] = cf;
    }
    return XS_OK;
}

/* The checks after parsing, the variants that follow from the options, and the configurations
 * (--config, or the default sweep; --quick: two; --grid declared: the grid's models). */
static xs_status ep_opts_finish(ep_opts *o, const xs_bench_common *c)
{
    XS_TRY(ep_check_grid(o, c));
    const xs_gpus_conflict cf[] = {
        {"--peers", o->peers_set, "with -g the ranks are the peers: N = the number of GPUs"},
        {"--device", c->b.device_set, "rank r runs on GPU r"}};
    XS_TRY(xs_gpus_check("bench ep", c->b.gpus_set, c->b.gpus, cf, 2));
    o->quick = c->quick;
    if (o->long_tokens && (o->ntokens || o->quick))
        return xs_seterr(XS_EINVAL, "bench ep: --long chooses the token counts: not with %s",
                         o->ntokens ? "--tokens" : "--quick");
    o->run[EP_WAVE_BULK] = o->bulk && o->run[EP_WAVE];
    o->run[EP_INTER_BULK] = o->bulk && o->run[EP_INTER];
    o->run[EP_AUTO_BULK] = o->bulk && o->run[EP_AUTO];
    o->run[EP_AUTO_DEFER] = o->defer && o->run[EP_AUTO];
    o->run[EP_AUTO_FIXED] = o->auto_fixed && o->run[EP_AUTO];
    if (o->spill_depth && o->defer != XS_MOE_DEFER_SPILL)
        return xs_seterr(XS_EINVAL, "bench ep: --spill-depth needs --defer=spill");
    if (o->grid)
        return XS_OK;
    if (!strcmp(o->cfg_arg, "all")) {
        if (o->quick) {
            o->configs[o->nconfigs++] = xs_moe_config_find("olmoe-1b-7b");
            o->configs[o->nconfigs++] = xs_moe_config_find("mixtral-8x7b");
        } else {
            for (int i = 0; i < xs_moe_nconfigs && o->nconfigs < EP_MAX_LIST; i++)
                if (xs_moe_configs[i].sweep)
                    o->configs[o->nconfigs++] = &xs_moe_configs[i];
        }
        return XS_OK;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", o->cfg_arg);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        const xs_moe_config *cf = xs_moe_config_find(tok);
        if (!cf)
            return xs_seterr(XS_EINVAL, "--config '%s': unknown (xstage bench ep --help lists "
                             "them)", tok);
        if (o->nconfigs >= EP_MAX_LIST)
            return xs_seterr(XS_EINVAL, "--config: at most %d configurations", EP_MAX_LIST);
        o->configs[o->nconfigs++] = cf;
    }
    return XS_OK;
}

/* ---- one point ------------------------------------------------------------------------------ */

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

/* --trace DIR (rank 0): the last run's tiles as trace v1 (docs/TRACE.md "Workload traces"),
 * DIR/ep_<config>_<routing>_t<tokens>_p<peers>_<schedule>.csv, the last verified run of each
 * point and fused schedule. A courier run has none (its Linear-2 tiles store into HBM; the link
 * is the couriers'), nor has the local control (nothing crosses the link). */
static xs_status ep_trace_out(const char *dir, const ep_row *r, const char *sched, xs_moe *m,
                              const xs_bench_env *e, const xs_profile *p, int real)
{
    const xs_moe_tile *t;
    int n;
    xs_trace_record *rec = NULL;
    size_t nr = 0;
    char path[4096], dev[300], tgt[40], ker[200], np[40];
    int l = snprintf(path, sizeof path, "%s/ep_%s_%s_t%d_p%d_%s.csv", dir, r->config, r->routing,
                     r->tokens, r->peers, sched);
    if (l < 0 || (size_t)l >= sizeof path)
        return xs_seterr(XS_EINVAL, "--trace %s: path too long", dir);
    for (char *c = path + strlen(dir) + 1; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '.' || *c == '-' || *c == '_'))
            *c = '_';
    XS_TRY(xs_moe_trace(m, &t, &n));
    XS_TRY(xs_moe_trace_records(t, n, &rec, &nr));
    int most = 0;
    for (size_t i = 0; i < nr; i++)
        most = rec[i].cta + 1 > most ? rec[i].cta + 1 : most;
    snprintf(dev, sizeof dev, "device=%s", e->gi.name);
    snprintf(tgt, sizeof tgt, "target=%s", real ? "peer" : p->path[0] ? p->path : "host");
    snprintf(ker, sizeof ker, "kernel=xstage bench ep %s %s tokens %d peers %d %s (the last "
             "verified run)", r->config, r->routing, r->tokens, r->peers, sched);
    snprintf(np, sizeof np, "producers=%d", most);
    const char *meta[] = {dev, tgt, ker, np, "clock=globaltimer", NULL};
    const xs_status st = xs_trace_write(path, rec, nr, 0, meta);
    free(rec);
    return st;
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

/* One point's state, shared by its run and verify callbacks. */
typedef struct {
    const ep_opts *o;
    xs_bench_env *e;
    const xs_profile *prof;
    xs_cublas *cb;
    FILE *tiles;            /* --tiles (rank 0), or NULL */
    xs_moe *m;
    ep_peer *pp;            /* -g: the real peers; NULL: virtual peers */
    const xs_wintab *tab;   /* the rounds' stores: pp->send, or the virtual peers' windows */
    const xs_wintab *chk;   /* what the checks read: pp->own, or tab */
    xs_moe_run_opts ro[3];  /* plain, bulk combine (EP_IS_BULK), deferring (EP_AUTO_DEFER) */
    const double *ref_of[EP_NVAR]; /* each variant's local-control reference, per tile id */
    double r_local;         /* the local control's issue rate, bytes/ns */
    int ntot;               /* Linear-1 + Linear-2 tiles */
    double *ref_acc, *ref[2]; /* per tile: main loops of the local-control runs; medians */
    xs_moe_tile *ltr[2];    /* each order's last local-control trace */
    int nltr[2];
    double gemm[XS_BENCH_MAX_ITERS]; /* unfused runs' cuBLAS GEMM time per timed round, us */
    int last_round;         /* the rounds' last (the fused runs' verified one) */
    double ov_pilot[2][XS_MOE_OV_MAX_CHUNKS + 1]; /* the overlapped pilot's median per GEMM
                                                   * form and piece count, us (NaN: none) */
    ep_row *r;
} ep_pctx;

/* One run of variant var in plan slot `slot` into windows tab: the windows poisoned (with -g:
 * this rank's own window, every source's region), L2 flushed, the ranks met (-g), the run (it
 * times itself), the ranks met again, so that every source's stores are in place before anyone
 * verifies and no one poisons a window that is still being verified. *us its time; *gemm_us
 * the unfused run's GEMM time. EP_OVERLAP runs at r->ovl_chunks pieces; EP_AUTO runs auto's
 * pick (r->auto_kind). */
static xs_status ep_run(ep_pctx *x, int var, int slot, const xs_wintab *tab,
                        const xs_moe_run_opts *ro, int round, double *us, double *gemm_us)
{
    /* poison and flush enqueued on the run's stream (0), not waited for: the unfused sequence
     * launches a cuBLAS call per expert from the host, and its launches queue behind the flush
     * instead of the host's launch latency entering its time (harness.h) */
    XS_TRY(xs_moe_poison(x->m, x->pp ? &x->pp->own : tab, 0));
    XS_TRY(xs_bench_flush_l2_async(x->e, round, 0));
    XS_TRY(xs_bench_barrier(x->e));
    float ms = 0, gms = 0;
    const ep_row *r = x->r;
    if (var == EP_AUTO && r->auto_kind == EP_PICK_UNFUSED)
        var = EP_UNFUSED;
    if (var == EP_OVERLAP || (var == EP_AUTO && r->auto_kind == EP_PICK_OVERLAP))
        XS_TRY(xs_moe_run_overlapped(x->m, x->cb, tab,
                                     var == EP_AUTO ? r->auto_ov_chunks : r->ovl_chunks,
                                     var == EP_AUTO ? r->auto_ov_grouped : r->ovl_grouped, 1, 0,
                                     &ms));
    else if (var == EP_UNFUSED && x->pp)
        XS_TRY(xs_moe_run_unfused_with(x->m, x->cb, tab, ep_nccl_combine, x->pp, 0, &ms, &gms));
    else if (var == EP_UNFUSED)
        XS_TRY(xs_moe_run_unfused(x->m, x->cb, tab, 0, &ms, &gms));
    else
        XS_TRY(xs_moe_run_fused(x->m, slot, tab, ro, 0, &ms));
    XS_TRY(xs_bench_barrier(x->e));
    *us = ms * 1e3;
    *gemm_us = gms * 1e3;
    return XS_OK;
}

/* The rows at the destination against the fp32 reference: *ok = 0 (and r->verified = 0, the
 * first problem printed) when any is wrong. */
static xs_status ep_check(xs_moe *m, const xs_wintab *tab, const char *what, ep_row *r, int *ok)
{
    xs_moe_check c;
    XS_TRY(xs_moe_verify(m, tab, &c));
    if (c.max_row_rel > r->max_rel_err || isnan(c.max_row_rel))
        r->max_rel_err = c.max_row_rel;
    *ok = c.ok;
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
        r->t[v] = xs_bench_stat_of(NULL, 0);
    r->local = r->local_inter = xs_bench_stat_of(NULL, 0);
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
    r->ovl_compute_us = r->ovl_pilot_us = r->ovl_pred_us = r->ovl_model_pred_us = NAN;
    r->ovl_compute_form_us[0] = r->ovl_compute_form_us[1] = NAN;
    snprintf(r->ovl_form, sizeof r->ovl_form, "-");
    r->auto_pick_pred_us = r->auto_pilot_us = r->tuned_us = r->best_other_us = NAN;
    r->comm_over_compute = NAN;
    snprintf(r->tuned, sizeof r->tuned, "-");
    snprintf(r->best_other, sizeof r->best_other, "-");
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
 * compute costs without the link (cost[slot]), each tile's median main loop (x->ref[slot]), and
 * each order's last trace (x->ltr, x->nltr) for the courier prediction. Up to 3 timed runs
 * after the warm-up, outside the rounds. */
static xs_status ep_local_control(ep_pctx *x, const xs_wintab *local, xs_moe_costs cost[2])
{
    const xs_bench_common *c = x->e->c;
    ep_row *r = x->r;
    const xs_moe_tile *tr;
    int ntr, ok;
    for (int slot = 0; slot < 2; slot++) {
        double v[64];
        const int n = c->b.iters;
        int nv = 0, nref = 0, runs = c->b.warmup + (n < 3 ? n : 3);
        for (int it = 0; it < runs; it++) {
            double us, gus;
            XS_TRY(ep_run(x, EP_WAVE, slot, local, &x->ro[0], it, &us, &gus));
            if (it >= c->b.warmup && nv < 64)
                v[nv++] = us;
            if (it >= c->b.warmup)
                ep_ref_add(x->ref_acc, EP_REF_RUNS, &nref, x->m, x->ntot);
        }
        ep_ref_median(x->ref_acc, EP_REF_RUNS, nref, x->ntot, x->ref[slot]);
        XS_TRY(ep_check(x->m, local, slot ? "local interleaved" : "local wave", r, &ok));
        xs_moe_trace(x->m, &tr, &ntr);
        xs_moe_costs_from_trace(tr, ntr, &cost[slot]);
        x->nltr[slot] = ntr < x->ntot ? ntr : x->ntot;
        memcpy(x->ltr[slot], tr, sizeof(xs_moe_tile) * (size_t)x->nltr[slot]);
        if (slot == 0) {
            r->local = xs_bench_stat_of(v, nv);
            r->local_span_us = cost[0].span2_ns / 1e3;
        } else {
            r->local_inter = xs_bench_stat_of(v, nv);
        }
        if (x->tiles)
            ep_tiles_out(x->tiles, r, slot ? "local-interleaved" : "local-wave", x->m, x->prof,
                         &x->o->mm, cost[0].local_issue_bytes_per_ns, x->ref[slot], x->ntot, 0);
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

/* auto's decision without the lead search (--auto-fixed), into slot 5 where it differs from
 * auto's. */
static xs_status ep_auto_fixed(ep_pctx *x, const xs_moe_costs cost[2],
                               const xs_moe_local_traces *lt, const xs_moe_auto_result *ar)
{
    ep_row *r = x->r;
    xs_moe_model mf = x->o->mm;
    mf.lead_search = 0;
    xs_moe_auto_result af;
    const double t_model = xs_now_s();
    XS_TRY(xs_moe_auto(xs_moe_host(x->m), x->prof, &mf, &cost[0], &cost[1], lt, &af));
    r->model_s += xs_now_s() - t_model;
    if (xs_moe_plan_equal(&af.plan, &ar->plan))
        return XS_OK;
    r->fixed_lead = af.plan.kind == XS_MOE_INTERLEAVED ? af.plan.lead : 0;
    r->fixed_lead_end = af.plan.lead_end;
    r->pred_fixed_us = af.auto_ns / 1e3;
    return xs_moe_set_plan(x->m, 5, &af.plan);
}

/* auto: the model decides from the profile and the measured costs of both orders (slot 2); the
 * best courier candidate (slot 3, the courier column) and the adaptive candidate (slot 4); each
 * variant's local-control reference (auto: its own order). */
static xs_status ep_auto(ep_pctx *x, const xs_moe_costs cost[2])
{
    ep_row *r = x->r;
    x->r_local = r->local_issue = cost[0].local_issue_bytes_per_ns;
    xs_moe_auto_result ar;
    const double t_model = xs_now_s();
    const xs_moe_local_traces lt = {x->ltr[0], x->nltr[0], x->ltr[1], x->nltr[1]};
    XS_TRY(xs_moe_auto(xs_moe_host(x->m), x->prof, &x->o->mm, &cost[0], &cost[1], &lt, &ar));
    r->model_s += xs_now_s() - t_model;
    XS_TRY(xs_moe_set_plan(x->m, 2, &ar.plan));
    r->couriers = ar.courier.couriers;
    r->auto_couriers = ar.plan.couriers;
    r->pred_courier_us = ar.courier_ns / 1e3;
    if (r->couriers > 0) {
        r->courier_sched = xs_moe_sched_name(ar.courier.kind);
        XS_TRY(xs_moe_set_plan(x->m, 3, &ar.courier));
    }
    r->adaptive = ar.adaptive.kind == XS_MOE_ADAPTIVE;
    r->pred_adaptive_us = ar.adaptive_ns / 1e3;
    r->pred_spill_us = ar.spill_ns / 1e3;
    r->auto_spill = ar.plan.spill_depth > 0;
    r->auto_lead_end = ar.plan.lead_end;
    r->pred_paced_plain_us = ar.paced_plain_ns / 1e3;
    if (x->o->auto_fixed)
        XS_TRY(ep_auto_fixed(x, cost, &lt, &ar));
    r->adaptive_ahead_us = r->adaptive ? ar.adaptive.admit_ahead_ns / 1e3 : NAN;
    if (r->adaptive)
        XS_TRY(xs_moe_set_plan(x->m, 4, &ar.adaptive));
    ep_row_auto(&ar, r);
    const double *ref_auto = ar.plan.kind == XS_MOE_WAVE ? x->ref[0] : x->ref[1];
    const double *ref_fixed = r->fixed_lead == 0 ? x->ref[0] : x->ref[1];
    const double *ref_of[EP_NVAR] = {NULL, x->ref[0], x->ref[1], ref_auto, NULL, x->ref[1],
                                     NULL, NULL, NULL, ref_auto, ref_fixed};
    memcpy(x->ref_of, ref_of, sizeof ref_of);
    return XS_OK;
}

/* The virtual-peer windows, or (-g) one region per source in every real peer's window: x->tab
 * (the stores), x->chk (what the checks read), x->pp and e->ws (the ranks' barrier). */
static xs_status ep_windows(ep_pctx *x, const xs_moe_info *info, xs_winset **ws)
{
    xs_bench_env *e = x->e;
    const int peers = x->r->peers;
    xs_win_opts wo;
    memset(&wo, 0, sizeof wo);
    wo.target = e->coll ? XS_TARGET_PEER : XS_TARGET_VIRTUAL;
    wo.virtual_peers = peers;
    wo.bytes = e->coll ? (size_t)peers * info->window_bytes : info->window_bytes;
    wo.nflags = 1;
    wo.device = e->c->b.device;
    XS_TRY(xs_win_open(&wo, ws));
    const xs_wintab *tab = xs_win_table(*ws);
    x->tab = x->chk = tab;
    if (!e->coll)
        return XS_OK;
    ep_peer *pp = (ep_peer *)calloc(1, sizeof *pp);
    if (!(x->pp = pp))
        return xs_seterr(XS_ENOMEM, "bench ep: out of host memory");
    const int n = tab->nranks, me = tab->rank;
    if (n != peers)
        return xs_seterr(XS_EINVAL, "bench ep: %d peer windows for %d ranks", n, peers);
    pp->coll = e->coll;
    pp->me = me;
    pp->n = n;
    pp->region = info->window_bytes;
    pp->send.nranks = pp->own.nranks = n;
    pp->send.rank = pp->own.rank = 0;
    pp->send.bytes = pp->own.bytes = info->window_bytes;
    for (int q = 0; q < n; q++) {
        pp->send.data[q] = tab->data[(me + q) % n] + (size_t)me * info->window_bytes;
        /* the kernel's "remote" (pacer, trace, model): every row not for this GPU */
        pp->send.host_mem[q] = q != 0;
        pp->own.data[q] = tab->data[me] + (size_t)((me - q + n) % n) * info->window_bytes;
    }
    x->tab = &pp->send;
    x->chk = &pp->own; /* this rank's window, every source's region */
    e->ws = *ws;
    return XS_OK;
}

/* ---- the overlapped pipeline, auto's pick, tuned ---------------------------------------------- */

/* A pilot of variant v: one warm-up run, then EP_PILOT_REPS runs, each verified at the
 * destination as `what` (a wrong run clears r->verified and is printed); *us their median. */
static xs_status ep_pilot(ep_pctx *x, int v, const char *what, double *us)
{
    static const int slot_of[EP_NVAR] = {0, 0, 1, 2, 3, 4, 0, 1, 2, 2, 5, 0};
    double t[EP_PILOT_REPS];
    for (int i = 0; i <= EP_PILOT_REPS; i++) {
        double u = 0, g = 0;
        int ok = 1;
        XS_TRY(ep_run(x, v, slot_of[v], x->tab, &x->ro[0], i, &u, &g));
        if (i == 0)
            continue;
        XS_TRY(ep_check(x->m, x->chk, what, x->r, &ok));
        t[i - 1] = u;
    }
    *us = xs_median(t, EP_PILOT_REPS);
    return XS_OK;
}

/* The overlapped pipeline (virtual peers only), for each GEMM form (one cuBLAS call per expert;
 * one grouped call per layer where cuBLAS has it): its compute alone (one piece, no copies; one
 * warm-up, then the median of EP_PILOT_REPS runs, each after an L2 flush), and from it and R
 * the model's piece count and form (xs_ov_ep_predict); then, when the variant runs, every
 * declared count up to T in each form gets a verified pilot (ep_pilot) and the fastest median
 * is timed in the rounds. */
static xs_status ep_overlap_plan(ep_pctx *x)
{
    static const int chunks[EP_OV_NCHUNKS] = EP_OV_CHUNKS;
    ep_row *r = x->r;
    for (int f = 0; f < 2; f++)
        for (int c = 0; c <= XS_MOE_OV_MAX_CHUNKS; c++)
            x->ov_pilot[f][c] = NAN;
    if (x->pp)
        return XS_OK;
    const int forms = xs_cublas_has_grouped(x->cb) ? 2 : 1;
    for (int f = 0; f < forms; f++) {
        double t[EP_PILOT_REPS];
        for (int i = 0; i <= EP_PILOT_REPS; i++) {
            float ms = 0;
            XS_TRY(xs_bench_flush_l2_async(x->e, i, 0));
            XS_TRY(xs_moe_run_overlapped(x->m, x->cb, x->tab, 1, f, 0, 0, &ms));
            if (i > 0)
                t[i - 1] = ms * 1e3;
        }
        r->ovl_compute_form_us[f] = xs_median(t, EP_PILOT_REPS);
        if (!(r->ovl_compute_form_us[f] >= r->ovl_compute_us))
            r->ovl_compute_us = r->ovl_compute_form_us[f];
    }
    /* the model's choice: each count's pieces from the host problem, in each form */
    const xs_moe_problem *pb = xs_moe_host(x->m);
    const xs_ov_terms terms = xs_ov_terms_default(x->prof->drain_bytes_per_ns);
    double pred[2][EP_OV_NCHUNKS];
    for (int c = 0; c < EP_OV_NCHUNKS; c++) {
        pred[0][c] = pred[1][c] = NAN;
        if (chunks[c] > pb->T)
            continue;
        xs_moe_ovplan *p = NULL;
        xs_ov_ep_piece pc[XS_MOE_OV_MAX_CHUNKS];
        XS_TRY(xs_moe_ovplan_create(pb, chunks[c], &p));
        xs_moe_ovplan_pieces(p, pb, pc);
        xs_moe_ovplan_destroy(p);
        for (int f = 0; f < forms; f++) {
            /* the calls of the measured compute (one piece): gather, SwiGLU, scale/permute and
             * per layer one GEMM per expert with rows, or one grouped GEMM */
            int calls1 = 5;
            if (f) {
                for (int i = 0; i < chunks[c]; i++)
                    pc[i].calls = 5;
            } else {
                calls1 = 3;
                for (int e = 0; e < pb->E; e++)
                    calls1 += 2 * (pb->expert_rows[e] > 0);
            }
            double ns = NAN;
            if (xs_ov_ep_predict(pc, chunks[c], r->ovl_compute_form_us[f] * 1e3, calls1, &terms,
                                 &ns) == XS_OK)
                pred[f][c] = ns / 1e3;
            if (isfinite(pred[f][c]) && !(pred[f][c] >= r->ovl_model_pred_us))
                r->ovl_model_pred_us = pred[f][c], r->ovl_model_chunks = chunks[c],
                r->ovl_model_grouped = f;
        }
    }
    if (!x->o->run[EP_OVERLAP])
        return XS_OK;
    size_t at = 0;
    for (int f = 0; f < forms; f++)
        for (int c = 0; c < EP_OV_NCHUNKS; c++) {
            if (chunks[c] > pb->T)
                continue;
            char what[48];
            double med = NAN;
            snprintf(what, sizeof what, "overlapped pilot, %d chunks%s", chunks[c],
                     f ? ", grouped" : "");
            const int keep = r->ovl_chunks, keepf = r->ovl_grouped;
            r->ovl_chunks = chunks[c], r->ovl_grouped = f;
            XS_TRY(ep_pilot(x, EP_OVERLAP, what, &med));
            r->ovl_chunks = keep, r->ovl_grouped = keepf;
            x->ov_pilot[f][chunks[c]] = med;
            if (at < sizeof r->ovl_pilot)
                at += (size_t)snprintf(r->ovl_pilot + at, sizeof r->ovl_pilot - at,
                                       "%sC=%d%s %.1f", at ? ", " : "", chunks[c], f ? "g" : "",
                                       med);
            if (!(med >= r->ovl_pilot_us)) {
                r->ovl_pilot_us = med, r->ovl_chunks = chunks[c], r->ovl_grouped = f;
                r->ovl_pred_us = pred[f][c];
            }
        }
    if (r->ovl_chunks > 0)
        snprintf(r->ovl_form, sizeof r->ovl_form, "%s", r->ovl_grouped ? "grouped" : "per-expert");
    return XS_OK;
}

/* auto's pick from the model alone (xs_auto_pick): its fused plan (pred_auto_us, ep_auto), the
 * overlapped pipeline at the model's count and unfused (the compute alone, then the remote bytes
 * at R plus one copy call per remote rank) - the last two with virtual peers only. Then auto's
 * pilot (tuned's input): the overlapped pilot at the same count where one ran, else a verified
 * pilot of its own. */
static xs_status ep_auto_pick(ep_pctx *x)
{
    ep_row *r = x->r;
    xs_auto_cand c[3];
    char nm[3][64];
    int kind[3], k = 0;
    ep_row_plan_text(r); /* the fused plan's short form */
    snprintf(nm[k], sizeof nm[k], "fused %s", r->auto_plan);
    c[k].pred_us = r->pred_auto_us, kind[k++] = EP_PICK_FUSED;
    if (isfinite(r->ovl_model_pred_us)) {
        snprintf(nm[k], sizeof nm[k], "overlapped C=%d%s", r->ovl_model_chunks,
                 r->ovl_model_grouped ? " grouped" : "");
        c[k].pred_us = r->ovl_model_pred_us, kind[k++] = EP_PICK_OVERLAP;
    }
    if (isfinite(r->ovl_compute_us)) {
        snprintf(nm[k], sizeof nm[k], "unfused");
        c[k].pred_us = r->ovl_compute_us + r->drain_us +
                       (r->peers - 1) * XS_OV_COPY_CALL_NS / 1e3;
        kind[k++] = EP_PICK_UNFUSED;
    }
    for (int i = 0; i < k; i++)
        c[i].name = nm[i];
    const int i = xs_auto_pick(c, k, r->auto_why, sizeof r->auto_why);
    r->auto_kind = i >= 0 ? kind[i] : EP_PICK_FUSED;
    r->auto_pick_pred_us = i >= 0 ? c[i].pred_us : NAN;
    r->auto_ov_chunks = r->auto_kind == EP_PICK_OVERLAP ? r->ovl_model_chunks : 0;
    r->auto_ov_grouped = r->auto_kind == EP_PICK_OVERLAP ? r->ovl_model_grouped : 0;
    if (!x->o->run[EP_AUTO] || x->pp)
        return XS_OK;
    if (r->auto_kind == EP_PICK_OVERLAP &&
        isfinite(x->ov_pilot[r->auto_ov_grouped][r->auto_ov_chunks])) {
        r->auto_pilot_us = x->ov_pilot[r->auto_ov_grouped][r->auto_ov_chunks];
        return XS_OK;
    }
    return ep_pilot(x, EP_AUTO, "auto pilot", &r->auto_pilot_us);
}

/* After the rounds: the bound over the fastest compute alone (the fused kernel's local control
 * or the overlapped pipeline's compute, cuBLAS) and bytes/R, comm/compute, the fastest variant
 * other than auto, and tuned: of auto's run and the overlapped pipeline at the pilots' count,
 * the one with the smaller pilot median, at its timed median. */
static void ep_row_totals(ep_row *r)
{
    if (isfinite(r->ovl_compute_us) && !(r->ovl_compute_us >= r->compute_us))
        r->compute_us = r->ovl_compute_us;
    r->bound_us = r->compute_us > r->drain_us ? r->compute_us : r->drain_us;
    r->comm_over_compute = r->drain_us / r->compute_us;
    for (int v = 0; v < EP_NVAR; v++)
        if (v != EP_AUTO && isfinite(r->t[v].med) && !(r->t[v].med >= r->best_other_us)) {
            r->best_other_us = r->t[v].med;
            snprintf(r->best_other, sizeof r->best_other, "%s", ep_var_name[v]);
        }
    const double pa = r->auto_pilot_us, po = r->ovl_pilot_us;
    if (isfinite(pa) && isfinite(r->t[EP_AUTO].med) &&
        !(isfinite(po) && isfinite(r->t[EP_OVERLAP].med) && po < pa)) {
        r->tuned_us = r->t[EP_AUTO].med;
        snprintf(r->tuned, sizeof r->tuned, "auto");
    } else if (isfinite(po) && isfinite(r->t[EP_OVERLAP].med)) {
        r->tuned_us = r->t[EP_OVERLAP].med;
        snprintf(r->tuned, sizeof r->tuned, "overlapped C=%d%s", r->ovl_chunks,
                 r->ovl_grouped ? " grouped" : "");
    }
}

/* xs_bench_rounds.run: one run of variant v in its plan slot. */
static xs_status ep_run_cb(void *ctx, int v, int round, double *us)
{
    static const int slot_of[EP_NVAR] = {0, 0, 1, 2, 3, 4, 0, 1, 2, 2, 5, 0};
    ep_pctx *x = (ep_pctx *)ctx;
    const xs_moe_run_opts *ro = EP_IS_BULK(v)        ? &x->ro[1]
                                : v == EP_AUTO_DEFER ? &x->ro[2]
                                                     : &x->ro[0];
    double gus = 0;
    XS_TRY(ep_run(x, v, slot_of[v], x->tab, ro, round, us, &gus));
    const int j = round - x->e->c->b.warmup;
    if (v == EP_UNFUSED && j >= 0)
        x->gemm[j] = gus;
    return XS_OK;
}

/* xs_bench_rounds.verify (every round): variant v's rows verified at the destination (the
 * overlapped pipeline and auto's unfused picks every run, the others the last), then on the
 * last round (fused runs) the per-tile stall prediction of its trace against the local-control reference,
 * its pacer waits and, with --tiles, its tiles. */
static xs_status ep_verify_cb(void *ctx, int v, int round, int *ok)
{
    ep_pctx *x = (ep_pctx *)ctx;
    const xs_moe_model *mm = &x->o->mm;
    ep_row *r = x->r;
    const xs_moe_tile *tr;
    int ntr;
    /* the overlapped pipeline and auto's unfused picks: every run; the others: the last */
    const int unfused = v == EP_UNFUSED || v == EP_OVERLAP ||
                        (v == EP_AUTO && r->auto_kind != EP_PICK_FUSED);
    const int each = v == EP_OVERLAP || (v == EP_AUTO && r->auto_kind != EP_PICK_FUSED);
    if (round != x->last_round && !each) {
        *ok = 1;
        return XS_OK;
    }
    XS_TRY(ep_check(x->m, x->chk, ep_var_name[v], r, ok));
    if (unfused || round != x->last_round)
        return XS_OK;
    if (x->o->trace && x->e->me == 0 && v != EP_COURIER && !(v == EP_AUTO && r->auto_couriers > 0))
        XS_TRY(ep_trace_out(x->o->trace, r, ep_var_name[v], x->m, x->e, x->prof, x->pp != NULL));
    if (v == EP_COURIER || (v == EP_AUTO && r->auto_couriers > 0)) {
        /* no per-tile stall prediction: the link is the couriers' */
        if (x->tiles)
            ep_tiles_out(x->tiles, r, ep_var_name[v], x->m, x->prof, mm, x->r_local, NULL, 0, 1);
        return XS_OK;
    }
    xs_moe_trace(x->m, &tr, &ntr);
    if (EP_IS_BULK(v)) {
        /* measured MMA side only: the model has no bulk-copy issue line, so its predictions
         * (the 16-byte stores') are not reported for these runs */
        const double *rb = x->ref_of[v - EP_WAVE_BULK + EP_WAVE];
        XS_TRY(xs_moe_stall_predict(tr, ntr, x->prof, mm, x->r_local, rb, x->ntot,
                                    &r->stall_bulk[v - EP_WAVE_BULK], NULL, NULL));
        if (x->tiles)
            ep_tiles_out(x->tiles, r, ep_var_name[v], x->m, x->prof, mm, x->r_local, rb,
                         x->ntot, 1);
        return XS_OK;
    }
    xs_moe_stall *sp = v == EP_WAVE         ? &r->stall_wave
                       : v == EP_INTER      ? &r->stall_inter
                       : v == EP_ADAPT      ? &r->stall_adapt
                       : v == EP_AUTO_DEFER ? &r->stall_defer
                       : v == EP_AUTO_FIXED ? &r->stall_fixed
                                            : &r->stall_auto;
    const double t_model = xs_now_s();
    XS_TRY(xs_moe_stall_predict(tr, ntr, x->prof, mm, x->r_local, x->ref_of[v], x->ntot, sp,
                                NULL, NULL));
    r->model_s += xs_now_s() - t_model;
    if ((v == EP_AUTO || v == EP_AUTO_DEFER) && r->auto_paced) {
        double g[4096];
        int ng = 0, nd = 0, nr = 0;
        for (int i = 0; i < ntr && ng < 4096; i++)
            if (tr[i].kind == 2 && tr[i].remote_bytes > 0)
                g[ng++] = tr[i].gate_ns / 1e3;
        *(v == EP_AUTO ? &r->auto_gate_us : &r->defer_gate_us) =
            ng ? xs_median(g, (size_t)ng) : NAN;
        for (int i = 0; v == EP_AUTO_DEFER && i < ntr; i++) {
            nd += tr[i].deferred;
            nr += tr[i].kind == 2 && tr[i].remote_bytes > 0;
        }
        if (v == EP_AUTO_DEFER)
            r->defer_frac = nr ? (double)nd / nr : NAN;
    }
    if (x->tiles)
        ep_tiles_out(x->tiles, r, ep_var_name[v], x->m, x->prof, mm, x->r_local, x->ref_of[v],
                     x->ntot, 0);
    return XS_OK;
}

/* The rounds over the variants that run at this point (fixed order, the last round verified),
 * then the statistics, the bound and (-g) the verdict over the ranks. */
static xs_status ep_rounds(ep_pctx *x, const xs_moe_info *info)
{
    const ep_opts *o = x->o;
    ep_row *r = x->r;
    xs_bench_variant var[EP_NVAR];
    for (int v = 0; v < EP_NVAR; v++) {
        var[v].name = ep_var_name[v];
        var[v].on = o->run[v] && !(v == EP_COURIER && r->couriers <= 0) &&
                    !(v == EP_ADAPT && !r->adaptive) &&
                    !(v == EP_AUTO_FIXED && r->fixed_lead < 0) &&
                    !((v == EP_AUTO_BULK || v == EP_AUTO_DEFER) && r->auto_couriers > 0) &&
                    !(v == EP_OVERLAP && r->ovl_chunks <= 0);
    }
    xs_bench_rounds rr = xs_bench_rounds_default(x->e, ep_run_cb, ep_verify_cb, x);
    rr.rotate = 0;
    rr.verify_when = XS_BENCH_VERIFY_EVERY; /* ep_verify_cb: which runs it checks */
    x->last_round = rr.warmup + rr.iters - 1;
    const int n = rr.iters;
    double *s = (double *)malloc(sizeof(double) * (size_t)EP_NVAR * (size_t)n);
    if (!s)
        return xs_seterr(XS_ENOMEM, "bench ep: out of host memory");
    const xs_status st = xs_bench_rounds_run(&rr, var, EP_NVAR, s, NULL);
    double med[EP_NVAR];
    for (int v = 0; v < EP_NVAR; v++) {
        r->t[v] = xs_bench_stat_of(s + (size_t)v * (size_t)n, n);
        med[v] = r->t[v].med;
    }
    free(s);
    XS_TRY(st);
    r->cublas_gemm_us = xs_bench_stat_of(x->gemm, n).med;
    r->compute_us = r->local.med < r->local_inter.med ? r->local.med : r->local_inter.med;
    r->drain_us = info->remote_bytes / x->prof->drain_bytes_per_ns / 1e3;
    r->gemm_eff = r->cublas_gemm_us / r->local.med;
    ep_row_totals(r);
    /* every rank verified its own window: the point is verified when all are; the slowest
     * rank's medians go next to rank 0's */
    return xs_bench_agree_verdict(x->e, &r->verified, &r->max_rel_err, med, r->rank_max_us,
                                  EP_NVAR);
}

/* The body of one point on problem x->m (x->pp and *ws: what the caller frees). */
static xs_status ep_point_run(ep_pctx *x, xs_winset **ws)
{
    const ep_opts *o = x->o;
    ep_row *r = x->r;
    xs_moe_info info;
    xs_moe_get_info(x->m, &info);
    r->rows = info.rows;
    r->remote_mb = info.remote_bytes / 1e6;
    memset(x->ro, 0, sizeof x->ro);
    x->ro[0].timeout_ns = (unsigned long long)(x->e->c->timeout_s * 1e9);
    x->ro[1] = x->ro[2] = x->ro[0];
    x->ro[1].bulk_combine = 1;
    x->ro[2].defer = o->defer;
    x->ro[2].spill_depth = o->spill_depth;
    for (int j = 0; j < XS_BENCH_MAX_ITERS; j++)
        x->gemm[j] = NAN;
    /* per tile (by id): its main loop in each local-control run, and the median, per order;
     * each order's last local-control trace: the courier prediction's ready times */
    x->ntot = info.l1_tiles + info.l2_tiles;
    const size_t nt = (size_t)x->ntot + 1;
    x->ref_acc = (double *)malloc(sizeof(double) * nt * EP_REF_RUNS);
    for (int k = 0; k < 2; k++) {
        x->ref[k] = (double *)malloc(sizeof(double) * nt);
        x->ltr[k] = (xs_moe_tile *)calloc(nt, sizeof(xs_moe_tile));
    }
    if (!x->ref_acc || !x->ref[0] || !x->ref[1] || !x->ltr[0] || !x->ltr[1])
        return xs_seterr(XS_ENOMEM, "bench ep: out of host memory");
    XS_TRY(xs_moe_reference_gpu(x->m, x->cb));
    /* plans: slot 0 wave, slot 1 interleaved (then auto's in ep_auto) */
    xs_moe_plan wp = {XS_MOE_WAVE, 0, o->wave_experts, 0, 0};
    r->lead = o->lead >= 0 ? o->lead : xs_moe_default_lead(xs_moe_host(x->m));
    xs_moe_plan ip = {XS_MOE_INTERLEAVED, r->lead, 0, 0, 0};
    XS_TRY(xs_moe_set_plan(x->m, 0, &wp));
    XS_TRY(xs_moe_set_plan(x->m, 1, &ip));
    xs_wintab local;
    xs_moe_costs cost[2];
    XS_TRY(xs_moe_local_table(x->m, &local));
    XS_TRY(ep_local_control(x, &local, cost));
    XS_TRY(ep_auto(x, cost));
    XS_TRY(ep_windows(x, &info, ws));
    r->drain_us = info.remote_bytes / x->prof->drain_bytes_per_ns / 1e3;
    XS_TRY(ep_overlap_plan(x));
    XS_TRY(ep_auto_pick(x));
    return ep_rounds(x, &info);
}

/* One point into r: configuration cfg (weights w), tokens, peers, routing. */
static xs_status ep_point(const ep_opts *o, xs_bench_env *e, const xs_profile *prof,
                          xs_cublas *cb, FILE *tiles, const xs_moe_weights *w,
                          const xs_moe_config *cfg, int tokens, int peers,
                          xs_moe_routing routing, ep_row *r)
{
    const double t_point = xs_now_s();
    ep_row_init(o, cfg, tokens, peers, routing, r);
    ep_pctx *x = (ep_pctx *)calloc(1, sizeof *x);
    if (!x)
        return xs_seterr(XS_ENOMEM, "bench ep: out of host memory");
    x->o = o;
    x->e = e;
    x->prof = prof;
    x->cb = cb;
    x->tiles = tiles;
    x->r = r;
    xs_moe_opts mo = {tokens, peers, routing, 0, e->c->b.seed};
    xs_winset *ws = NULL;
    xs_status st = xs_moe_create(w, &mo, &x->m);
    if (st == XS_OK)
        st = ep_point_run(x, &ws);
    r->point_s = xs_now_s() - t_point;
    e->ws = NULL;
    free(x->pp);
    if (ws)
        xs_win_close(ws);
    free(x->ref_acc);
    for (int k = 0; k < 2; k++) {
        free(x->ref[k]);
        free(x->ltr[k]);
    }
    if (x->m)
        xs_moe_destroy(x->m);
    free(x);
    if (st != XS_OK)
        r->verified = 0;
    return st;
}

/* ---- the sweep ------------------------------------------------------------------------------ */

typedef struct {
    int cfg; /* index into ep_opts.configs */
    xs_moe_routing routing;
    int tokens, peers;
    int index; /* --grid declared: its row of the grid */
} ep_pt;

typedef struct {
    const ep_opts *o;
    xs_bench_env *e;
    const xs_profile *prof;
    xs_cublas *cb;
    FILE *tiles;
    xs_outfile tiles_file; /* tiles' file, renamed into place at the end (xstage_outfile.h) */
    ep_pt pts[EP_MAX_ROWS];
    int npts;
    xs_moe_weights *w; /* the weights of configuration wcfg (-1: none) */
    int wcfg;
    int done[EP_MAX_ROWS]; /* the points whose rows were measured, in order */
    int ndone;
    const xs_bench_table *t; /* the report's columns (a blank row's doubles: NaN) */
} ep_sweep;

/* A configuration's token counts: --tokens, --long (ep_long_mult x its largest default, a point
 * whose combine exceeds EP_LONG_MAX_BYTES skipped with a note) or its defaults (--quick:
 * smaller ones). Returns how many. */
static int ep_tokens(const ep_opts *o, const xs_moe_config *cfg, int *toks, xs_bench_report *rep)
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
            else
                xs_bench_report_note(rep, "--long: %s T=%d skipped: its combine is %.1f GiB (at "
                                     "most %d)", cfg->name, t, bytes / (1024.0 * 1024 * 1024),
                                     EP_LONG_MAX_GIB);
        }
        return nt;
    }
    for (int i = 0; i < 3; i++)
        toks[nt++] = o->quick ? cfg->tokens[0] / (i == 2 ? 1 : (2 - i) * 2) : cfg->tokens[i];
    return nt;
}

/* The points in sweep order: configuration, routing, token count, peer count (peers: --peers,
 * or the configuration's own, docs/EP.md, "Choosing the sweep"). */
static void ep_points(ep_sweep *s, xs_bench_report *rep)
{
    const ep_opts *o = s->o;
    s->npts = 0;
    for (int i = o->rows_lo; o->grid && i < o->rows_hi && s->npts < EP_MAX_ROWS; i++) {
        /* the declared rows lo..hi-1 in the grid's order (model outermost: one set of weights
         * per model); ep_check_grid made o->configs the grid's models in its order */
        xs_grid_ep_row g;
        xs_grid_ep_row_at(i, &g);
        int ci = 0;
        while (ci < o->nconfigs - 1 && strcmp(o->configs[ci]->name, g.model))
            ci++;
        const ep_pt p = {ci, strcmp(g.routing, "zipf") ? XS_ROUTE_BALANCED : XS_ROUTE_ZIPF,
                         g.tokens, g.peers, i};
        s->pts[s->npts++] = p;
    }
    if (o->grid)
        return;
    for (int ci = 0; ci < o->nconfigs; ci++) {
        const xs_moe_config *cfg = o->configs[ci];
        int toks[EP_MAX_LIST], peers[EP_MAX_LIST], npeers = o->npeers;
        const int nt = ep_tokens(o, cfg, toks, rep);
        memcpy(peers, o->peers, sizeof peers);
        if (!o->peers_set) {
            peers[0] = cfg->peers > 0 ? cfg->peers : 4;
            npeers = 1;
        }
        for (int ri = 0; ri < o->nroutings; ri++)
            for (int ti = 0; ti < nt; ti++)
                for (int pi = 0; pi < npeers && s->npts < EP_MAX_ROWS; pi++) {
                    const ep_pt p = {ci, o->routings[ri], toks[ti], peers[pi]};
                    s->pts[s->npts++] = p;
                }
    }
}

static void ep_label(void *ctx, int i, char *buf, size_t n)
{
    const ep_sweep *s = (const ep_sweep *)ctx;
    const ep_pt *p = &s->pts[i];
    char row[24] = "";
    if (s->o->grid)
        snprintf(row, sizeof row, "grid row %d: ", p->index);
    snprintf(buf, n, "%s%s %s T=%d N=%d", row, s->o->configs[p->cfg]->name,
             xs_moe_routing_name(p->routing), p->tokens, p->peers);
}

/* A stall summary with nothing measured: NaN times, no tiles. */
static void ep_stall_blank(xs_moe_stall *st)
{
    memset(st, 0, sizeof *st);
    st->meas_stall_med_ns = st->pred_stall_med_ns = st->abs_err_med_ns = NAN;
    st->abs_err_p90_ns = st->mma_meas_med_ns = st->mma_pred_med_ns = NAN;
    st->mma_abs_err_med_ns = st->mma_abs_err_p90_ns = st->blocked_ns = NAN;
    st->stalled_err_med_ns = st->stalled_zero_err_med_ns = NAN;
    st->mma_stalled_err_med_ns = st->mma_stalled_zero_err_med_ns = NAN;
}

/* A row of point i with no measurement (--grid declared): its identity, NaN timings, status. */
static void ep_blank(const ep_sweep *s, int i, ep_row *r, const char *status)
{
    const ep_pt *p = &s->pts[i];
    char why[sizeof r->status];
    snprintf(why, sizeof why, "%s", status); /* status may be r->status itself */
    ep_row_init(s->o, s->o->configs[p->cfg], p->tokens, p->peers, p->routing, r);
    xs_bench_row_blank(s->t, r);
    /* the stall columns read through getters (ns as us), which the blank leaves alone */
    xs_moe_stall *st[] = {&r->stall_wave, &r->stall_inter, &r->stall_auto, &r->stall_bulk[0],
                          &r->stall_bulk[1], &r->stall_bulk[2], &r->stall_adapt,
                          &r->stall_defer, &r->stall_fixed};
    for (size_t k = 0; k < sizeof st / sizeof st[0]; k++)
        ep_stall_blank(st[k]);
    r->verified = 0;
    r->grid_row = p->index;
    snprintf(r->auto_plan, sizeof r->auto_plan, "-");
    snprintf(r->ovl_form, sizeof r->ovl_form, "-");
    snprintf(r->status, sizeof r->status, "%s", why);
}

/* xs_bench_sweep.unrun (--grid declared): point i failed or was not started. */
static void ep_unrun(void *ctx, int i, void *row, const char *status)
{
    ep_blank((const ep_sweep *)ctx, i, (ep_row *)row, status);
}

/* --grid declared, before point i runs (the weights of another configuration already freed):
 * 1 with the row's status "skipped: ..." when its footprint (xs_grid_ep_bytes: the weights
 * unless loaded, the point's device peak; the pinned windows and pageable host memory) exceeds
 * cudaMemGetInfo's free bytes or the host's MemAvailable; 0 to run it. */
static int ep_cannot_run(const ep_sweep *s, int i, ep_row *r)
{
    const ep_pt *p = &s->pts[i];
    size_t w = 0, dev = 0, pin = 0, host = 0, free_b = 0, total_b = 0;
    xs_grid_ep_bytes(s->o->configs[p->cfg], p->tokens, p->peers, &w, &dev, &pin, &host);
    if (s->w)
        w = 0; /* this configuration's, loaded */
    char why[sizeof r->status];
    const size_t avail = xs_grid_host_avail();
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && w + dev > free_b)
        snprintf(why, sizeof why, "skipped: needs %.1f GiB of device memory > %.1f GiB free "
                 "(estimate, xs_grid_ep_bytes)", (w + dev) / 1073741824.0,
                 free_b / 1073741824.0);
    else if (avail && pin + host > avail)
        snprintf(why, sizeof why, "skipped: needs %.1f GiB of host memory (%.1f GiB pinned) > "
                 "%.1f GiB available (estimate, xs_grid_ep_bytes)", (pin + host) / 1073741824.0,
                 pin / 1073741824.0, avail / 1073741824.0);
    else
        return 0;
    (void)cudaGetLastError();
    ep_blank(s, i, r, why);
    return 1;
}

/* Out of device, pinned or host memory: a point that cannot run here, not a failure. */
static int ep_out_of_memory(xs_status st)
{
    const char *m = xs_errmsg();
    return st == XS_ENOMEM ||
           (st == XS_ECUDA && (strstr(m, "out of memory") || strstr(m, "out of pinned host")));
}

/* xs_bench_sweep.point: the configuration's weights (made when it changes), then the point.
 * --grid declared: a point that does not fit (ep_cannot_run), or runs out of memory (not a
 * sticky CUDA error), is a row with its reason; the others say ok or failed: wrong data. */
static xs_status ep_sweep_point(void *ctx, int i, void *row, int *verified)
{
    ep_sweep *s = (ep_sweep *)ctx;
    const ep_pt *p = &s->pts[i];
    const xs_moe_config *cfg = s->o->configs[p->cfg];
    const int declared = s->o->grid;
    ep_row *r = (ep_row *)row;
    if (s->wcfg != p->cfg) {
        if (s->w)
            xs_moe_weights_destroy(s->w);
        s->w = NULL;
        s->wcfg = -1;
    }
    if (declared && ep_cannot_run(s, i, r)) {
        *verified = XS_BENCH_CANNOT_RUN;
        return XS_OK;
    }
    xs_status st = XS_OK;
    if (!s->w) {
        st = xs_moe_weights_create(cfg, s->e->c->b.seed, &s->w);
        if (st == XS_OK)
            s->wcfg = p->cfg;
    }
    if (st == XS_OK)
        st = ep_point(s->o, s->e, s->prof, s->cb, s->tiles, s->w, cfg, p->tokens, p->peers,
                      p->routing, r);
    r->grid_row = p->index;
    if (declared && ep_out_of_memory(st)) {
        char why[sizeof r->status];
        snprintf(why, sizeof why, "skipped: out of %s memory: %s",
                 st == XS_ENOMEM ? "host" : strstr(xs_errmsg(), "pinned") ? "pinned host"
                                                                          : "device",
                 xs_errmsg());
        (void)cudaGetLastError(); /* cudaErrorMemoryAllocation is not sticky */
        ep_blank(s, i, r, why);
        *verified = XS_BENCH_CANNOT_RUN;
        return XS_OK;
    }
    XS_TRY(st);
    ep_row_plan_text(r);
    snprintf(r->status, sizeof r->status, "%s", r->verified ? "ok" : "failed: wrong data");
    *verified = r->verified;
    return XS_OK;
}

/* xs_bench_sweep.detail: remember the written rows for the summary. */
static void ep_detail(void *ctx, int i, const void *row, xs_bench_report *rep)
{
    ep_sweep *s = (ep_sweep *)ctx;
    (void)row;
    (void)rep;
    s->done[s->ndone++] = i;
}

/* ---- entry ---------------------------------------------------------------------------------- */

/* The '#' lines after the device header: the ranks, the profile and the kernel model, the
 * couriers, the timing rule. */
static void ep_notes(xs_bench_report *rep, const xs_bench_env *e, const ep_opts *o,
                     const xs_profile *prof)
{
    const xs_moe_model *mm = &o->mm;
    if (e->real)
        xs_bench_report_note(rep, "ranks: combine into the peers' NCCL symmetric windows (LSA "
                             "pointers), one region per source; unfused combine: grouped "
                             "ncclSend/ncclRecv; every rank verifies every region of its own "
                             "window");
    xs_bench_report_note(rep, "profile: %s path, R %.1f B/ns, Q %.0f B (per producer %.0f), r "
                         "%.1f B/ns, o %.0f ns, chunk %.0f B%s", prof->path,
                         prof->drain_bytes_per_ns, prof->capacity_bytes,
                         prof->capacity_bytes_per_producer, prof->issue_bytes_per_ns,
                         prof->issue_overhead_ns, prof->chunk_bytes,
                         prof->provisional ? " (provisional)" : "");
    xs_bench_report_note(rep, "profile: queue %.0f B, reserve %.0f B (+ tandem buffer %.0f B, "
                         "modelled as reserve) per producer, arbitration skew %.2f; kernel "
                         "model: main loops stall above %.0f B of backlog (speed %.2f); auto "
                         "may pace at %.0f B (%.2f R)", prof->queue_bytes_per_producer,
                         prof->reserve_bytes_per_producer, prof->buffer_bytes_per_producer,
                         prof->arbitration_skew, mm->block_bytes, mm->block_speed,
                         mm->pace_bytes, mm->pace_drain_frac);
    xs_bench_report_note(rep, "profile: %s, R %.3f B/ns, Q %.0f B, r %.3f B/ns, o %.1f ns, chunk "
                         "%.0f B, queue %.0f B, reserve %.0f B, skew %.3f; kernel model: block "
                         "%.0f B at speed %.3f, pace %.0f B at %.3f R",
                         prof->date[0] ? prof->date : "undated", prof->drain_bytes_per_ns,
                         prof->capacity_bytes, prof->issue_bytes_per_ns, prof->issue_overhead_ns,
                         prof->chunk_bytes, prof->queue_bytes_per_producer,
                         prof->reserve_bytes_per_producer, prof->arbitration_skew,
                         mm->block_bytes, mm->block_speed, mm->pace_bytes, mm->pace_drain_frac);
    const double cr = mm->courier_pace_frac * prof->drain_bytes_per_ns;
    if (mm->couriers == 0)
        xs_bench_report_note(rep, "couriers: off (--couriers 0)");
    else if (mm->couriers < 0)
        xs_bench_report_note(rep, "couriers: auto weighs C = 4 and 8 at %.2f R (%.1f B/ns in "
                             "all); the courier column runs the better one, forced",
                             mm->courier_pace_frac, cr);
    else
        xs_bench_report_note(rep, "couriers: auto weighs C = %d at %.2f R (%.1f B/ns in all); "
                             "the courier column runs it, forced", mm->couriers,
                             mm->courier_pace_frac, cr);
    xs_bench_report_note(rep, "times: median of %d runs after %d warm-up, variants interleaved "
                         "round-robin; windows poisoned and L2 overwritten before every run; "
                         "every variant's last run verified at the destination, the overlapped "
                         "pipeline's every run and pilot (row tolerance %.0e, overall %.0e); "
                         "each time from events around the whole operation until every byte is "
                         "at its destination", e->c->b.iters, e->c->b.warmup, XS_MOE_TOL_ROW,
                         XS_MOE_TOL_FROB);
}

/* After the table: the summary over the written rows (compacted to the front of rows), auto's
 * reasoning per row and (-g) the slowest rank's medians. */
static void ep_closing(xs_bench_report *rep, const ep_sweep *s, ep_row *rows)
{
    const int n = s->ndone;
    for (int k = 0; k < n; k++)
        if (s->done[k] != k)
            memcpy(&rows[k], &rows[s->done[k]], sizeof rows[0]);
    ep_summary(rep, rows, n);
    for (int i = 0; i < n; i++)
        if (rows[i].how[0])
            xs_bench_report_note(rep, "auto %s %s T=%d N=%d: %s", rows[i].config,
                                 rows[i].routing, rows[i].tokens, rows[i].peers, rows[i].how);
    for (int i = 0; i < n; i++) {
        const ep_row *r = &rows[i];
        if (r->ovl_pilot[0] || isfinite(r->ovl_compute_us))
            xs_bench_report_note(rep, "overlapped %s %s T=%d N=%d: pilots, us: %s; compute "
                                 "alone (cuBLAS) %.1f per expert, %.1f grouped; chosen C=%d %s "
                                 "%.1f (%.1f%%), model %.1f (its own choice C=%d%s, %.1f); best "
                                 "other: %s %.1f", r->config, r->routing, r->tokens, r->peers,
                                 r->ovl_pilot[0] ? r->ovl_pilot : "none",
                                 r->ovl_compute_form_us[0], r->ovl_compute_form_us[1],
                                 r->ovl_chunks, r->ovl_form, r->t[EP_OVERLAP].med,
                                 xs_bench_spread_pct(&r->t[EP_OVERLAP]), r->ovl_pred_us,
                                 r->ovl_model_chunks, r->ovl_model_grouped ? " grouped" : "",
                                 r->ovl_model_pred_us, r->best_other,
                                 r->best_other_us);
        if (r->auto_why[0])
            xs_bench_report_note(rep, "auto pick %s %s T=%d N=%d: %s; timed %.1f us; tuned "
                                 "(pilots): %s %.1f us", r->config, r->routing, r->tokens,
                                 r->peers, r->auto_why, r->t[EP_AUTO].med, r->tuned, r->tuned_us);
    }
    for (int i = 0; s->e->real && i < n; i++)
        xs_bench_report_note(rep, "ranks %s %s T=%d N=%d: slowest rank's medians (us) unfused "
                             "%.1f wave %.1f interleaved %.1f auto %.1f courier %.1f",
                             rows[i].config, rows[i].routing, rows[i].tokens, rows[i].peers,
                             rows[i].rank_max_us[EP_UNFUSED], rows[i].rank_max_us[EP_WAVE],
                             rows[i].rank_max_us[EP_INTER], rows[i].rank_max_us[EP_AUTO],
                             rows[i].rank_max_us[EP_COURIER]);
}

static const char ep_tiles_head[] =
    "config,routing,tokens,peers,schedule,task,kind,rb,nb,cta,smid,remote_bytes,total_bytes,"
    "fetch_ns,mma0_ns,mma1_ns,st0_ns,st1_ns,span_ns,pred_span_ns,t_iss0_ns,stall_meas_ns,"
    "stall_pred_ns,gate_ns,ref_mainloop_ns,mma_stall_meas_ns,mma_stall_pred_ns\n";

/* The sweep on a started environment: the report, the points, the closing lines. *abort = 1
 * unless the sweep ended in order (the collectives are then closed, not aborted). */
static int ep_run_sweep(ep_sweep *s, int argc, char **argv, int *abort)
{
    static ep_row rows[EP_MAX_ROWS];
    xs_bench_env *e = s->e;
    const xs_bench_common *c = e->c;
    xs_bench_table t;
    xs_bench_report rep;
    *abort = 1;
    /* --grid declared: ep_cols, then grid_row and status */
    static xs_bench_col cols[XS_BENCH_MAX_COLS];
    int ncols = ep_ncols;
    memcpy(cols, ep_cols, sizeof(xs_bench_col) * (size_t)ep_ncols);
    if (s->o->grid) {
        memcpy(cols + ncols, ep_grid_cols, sizeof ep_grid_cols);
        ncols += 2;
    }
    XS_CHECK(xs_bench_table_init(&t, cols, ncols));
    s->t = &t;
    if (s->o->trace && e->me == 0 && mkdir(s->o->trace, 0777) != 0 && errno != EEXIST)
        return xs_cli_failf("--trace %s: %s", s->o->trace, strerror(errno));
    if (s->o->tiles && e->me == 0) {
        if (xs_outfile_open(&s->tiles_file, s->o->tiles) != XS_OK)
            return xs_cli_failf("--tiles %s", xs_errmsg());
        s->tiles = s->tiles_file.f;
    }
    if (e->coll && (xs_coll_alltoall_bw(e->coll, 1u << 20, NULL) != XS_OK ||
                    xs_coll_alltoall_bw(e->coll, 32u << 20, NULL) != XS_OK))
        return xs_cli_fail();
    if (xs_bench_report_open(&rep, "bench ep", &t, stdout, c->csv, c->json) != XS_OK)
        return xs_cli_fail();
    xs_bench_report_header(&rep, e, argc, argv);
    ep_notes(&rep, e, s->o, s->prof);
    ep_points(s, &rep);
    if (s->tiles)
        fputs(ep_tiles_head, s->tiles);
    xs_bench_report_begin(&rep);
    xs_bench_sweep sw;
    memset(&sw, 0, sizeof sw);
    sw.npoints = s->npts;
    sw.rows = rows;
    sw.row_bytes = sizeof rows[0];
    sw.point = ep_sweep_point;
    sw.label = ep_label;
    sw.detail = ep_detail;
    sw.ctx = s;
    sw.unrun = s->o->grid ? ep_unrun : NULL;
    xs_bench_sweep_hooks(&sw, e);
    xs_bench_tally tally;
    xs_bench_sweep_run(&sw, &rep, &tally);
    xs_bench_report_end(&rep);
    if (s->o->grid) {
        int nok = 0, nskip = 0, nfail = 0, nlate = 0;
        for (int i = 0; i < s->npts; i++) {
            nok += !strcmp(rows[i].status, "ok");
            nskip += !strncmp(rows[i].status, "skipped:", 8);
            nfail += !strncmp(rows[i].status, "failed:", 7);
            nlate += !strncmp(rows[i].status, "not run:", 8);
        }
        xs_bench_report_note(&rep, "declared grid: rows %d..%d of %d: %d ok, %d skipped (cannot "
                             "run here), %d failed, %d not run (--max-time), %d without a row",
                             s->o->rows_lo, s->o->rows_hi - 1, XS_GRID_EP_ROWS, nok, nskip,
                             nfail, nlate, s->npts - nok - nskip - nfail - nlate);
    }
    ep_closing(&rep, s, rows);
    if (tally.interrupted && s->tiles)
        fputs("# INTERRUPTED: partial results\n", s->tiles);
    *abort = tally.stopped || tally.interrupted;
    return xs_bench_sweep_close(&rep, &tally, s->npts);
}

int xs_bench_ep(int argc, char **argv)
{
    static ep_opts o;
    memset(&o, 0, sizeof o);
    o.cfg_arg = "all";
    o.lead = -1;
    xs_moe_model_default(&o.mm);
    o.peers[0] = 4;
    o.npeers = 1;
    o.routings[0] = XS_ROUTE_BALANCED;
    o.routings[1] = XS_ROUTE_ZIPF;
    o.nroutings = 2;
    for (int v = 0; v < EP_NVAR; v++)
        o.run[v] = 1;
    const xs_bench_spec spec = {
        "bench ep",
        "  fused MoE: dispatch -> Linear-1 -> SwiGLU -> Linear-2 -> combine to virtual peers\n"
        "  (--quick: 2 configurations, 3 smaller token counts)\n",
        "c:t:p:r:", ep_long, ep_help(), ep_opt, &o, 5, 1, 3, XS_BENCH_MAX_ITERS, 1, 2.0, 0};
    xs_bench_common c;
    int rc = xs_bench_parse(&spec, argc, argv, &c);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (ep_opts_finish(&o, &c) != XS_OK)
        return xs_cli_fail();
    xs_profile prof;
    if (xs_profile_args_resolve(&c.b.pa, &prof) != XS_OK)
        return xs_cli_fail();
    static ep_sweep s;
    xs_bench_env e;
    if ((rc = xs_bench_start(&e, &c, c.b.gpus_set)) >= 0) /* -g 1 too: real peers */
        return rc;
    if (e.real) {
        o.peers[0] = e.nranks; /* the ranks are the peers */
        o.npeers = 1;
        o.peers_set = 1;
    }
    memset(&s, 0, sizeof s);
    s.o = &o;
    s.e = &e;
    s.prof = &prof;
    s.wcfg = -1;
    if (xs_cublas_open(&s.cb) != XS_OK) { /* the baseline and the reference need it */
        xs_bench_stop(&e, 1);
        return xs_cli_fail();
    }
    int abort = 1;
    rc = ep_run_sweep(&s, argc, argv, &abort);
    if (s.w)
        xs_moe_weights_destroy(s.w);
    if (s.tiles && xs_outfile_commit(&s.tiles_file) != XS_OK && !rc)
        rc = xs_cli_fail();
    xs_cublas_close(s.cb);
    xs_bench_stop(&e, abort);
    return rc;
}
