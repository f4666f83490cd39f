/*
 * up.cu - `xstage bench up`: FlashAttention forward with a piggybacked Ulysses all-to-all.
 *
 * One rank of a Ulysses group of P ranks (virtual peers on one GPU: rank 0 is a window in HBM,
 * ranks 1..P-1 are windows in pinned host memory reached over PCIe) holds H heads for the whole
 * sequence; after attention, sequence shard p of its output goes to rank p. Three ways, same
 * inputs, same kernel code (cuda/up/up_kernel.cuh), run side by side:
 *   fa      attention alone, output to a local buffer;
 *   serial  the same, then the all-to-all with cudaMemcpyAsync of each shard into its window;
 *   fused   attention whose output warps store each tile straight into its destination window,
 *           either right away (piggyback, split 0) or in n slices spread evenly over the next
 *           query block's key/value iterations (reshape, split n), the CTAs walking their tiles
 *           heaviest first (snake) or lightest remote first (early), or with couriers (the last
 *           C CTAs of the grid copy the finished remote tiles, paced under the drain rate, while
 *           the others compute), or KV split (tiles cut along the keys into parts on other CTAs,
 *           the last part merging them; task lists built on the host): the planner's choice.
 * Checks of a KV split: tiles that ran in parts within a stated tolerance of the fa output,
 * all others bitwise, as below.
 * Times: the kernels' spans come from %globaltimer stamps inside the kernel (first CTA start to
 * the last CTA's last store issued - never a fence); the copies are timed with events. fa,
 * serial, piggyback and the planned fused kernel run interleaved, one of each per repetition,
 * so that slow drifts of the clock hit all four alike. The planner's prediction uses the
 * calibrated profile (--profile) and per-tile compute times measured in an fa run before.
 * Checks: fa against an fp32 GPU reference on sampled rows (bf16 tolerance), and every byte of
 * every destination window of every serial and fused repetition against the fa output, after
 * poisoning the windows; every fused CTA also signals every destination, and the flags are
 * checked.
 * -g N (N > 1): one rank per GPU, the N ranks are the Ulysses group (P = N) over NCCL symmetric
 * windows: the same kernels through a rotated send table (shard r to GPU (me + r) % N, one
 * region and one slot of CTA flags per source), serial's copies become one NCCL group of
 * send/recv, every destination waits for and checks every source's signals and bytes; runs
 * between barriers, plans and verdicts agreed through xs_coll_max (docs/MULTIGPU.md).
 * docs/UP.md defines every column.
 */
#include <getopt.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "up/up.h"
#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_cuda.h"
#include "xstage_launch.h"
#include "xstage_sigint.h"
#include "xstage_win.h"

#define UP_ATOL 2e-3           /* |out - ref| <= ATOL + RTOL*|ref|: bf16 P and bf16 output */
#define UP_RTOL 2e-2
#define UP_POISON 0xffffffffu  /* bf16 NaN pairs: never an attention output */
#define UP_MAX_LIST 32
#define UP_MAX_ITERS 1000
#define UP_BARRIER_MS 120000   /* -g: ranks drift by a configuration's host-side work, not more */
#define UP_FLAG_WAIT_MS 20000  /* -g: every source's signals after this rank's own kernel ended */
#define UP_MAX_PILOTS 8        /* --pilots */
#define UP_PILOT_REPS 3        /* verified runs per pilot; the median decides */
#define UP_PILOT_TIE 0.01      /* pilots this close to the fastest (relative) are tied: the
                                * model's ranking decides (run_pilots) */
#define UP_KV_ATOL 1e-3f       /* KV split, tiles in parts: |win - fa| <= ATOL + RTOL |fa| (P */
#define UP_KV_RTOL (1.f / 64)  /* rounds to bf16 against another row max: a few bf16 ulps) */

typedef struct {
    int seq[UP_MAX_LIST], nseq;
    int heads[UP_MAX_LIST], nheads;
    int peers[UP_MAX_LIST], npeers;
    int causal_lo, causal_hi;
    xs_bench_opts common; /* -n, -w, -d, -g N (N > 1 ranks are the Ulysses group) */
    int split;        /* -1: planner chooses; else forced */
    int order;        /* -1: planner chooses; else xs_attn_order, forced */
    int couriers;     /* -1: planner chooses (UP_COURIERS in the family); 0: none; C: forced */
    double courier_pace; /* couriers' total rate as a fraction of the profile's drain rate R;
                            0 = unpaced */
    int kv;           /* KV split: -1 planner chooses (UP_KV in the family); 0: none; N: forced,
                         N key blocks per part */
    int samples;      /* reference rows per configuration */
    int pilots;       /* --pilots: the planner runs its best `pilots` members by prediction
                         and keeps the fastest (0: the model's choice alone) */
    double pilot_max_us; /* --pilot-max-us: only in rows whose fa takes at most this long */
    double load_drain;   /* --load-drain: the model's drain rate for the fused kernel's stores,
                          * bytes/ns (0: the profile's R) */
    double slice_ns;     /* --slice-ns: the kernel's own cost of one output slice, ns */
    const char *csv;
    const char *kv_trace; /* --kv-trace FILE: per-task stamps of KV-split runs (CSV) */
} up_opts;

/* Device buffers sized for the largest configuration. */
typedef struct {
    void *q, *k, *v, *o;           /* bf16 [seq, heads, 128] */
    void *flush;                   /* written before each timed run: evicts L2 */
    size_t flush_bytes;
    uint64_t *cta_ns;              /* [sm_count * 3] */
    uint64_t *tile_ns;             /* [max tiles] */
    void *stage;                   /* couriers: staging of the remote tiles, like o (NULL when
                                      --couriers 0); never o, which holds fa's output, the
                                      reference of every window check */
    uint64_t *sync;                /* couriers: [max tiles + sm_count] ready and done flags */
    /* KV split: the lists of one member (kv_kb key blocks per part; 0: none loaded), grown on
     * demand; the partials' flags are never reset (the signal is new per run) */
    int kv_kb;
    xs_attn_kvbuf kv;              /* the lists, partials and flags (cuda/up/up.h) */
    uint64_t *kv_tns;              /* --kv-trace: [tasks x 4] stamps (NULL: none), and whether
                                      the next KV-split run records them */
    size_t kv_tns_cap;
    int kv_tns_on;
    xs_devstatus *status;
    unsigned long long *bad;
    int *rows;                     /* [2 * samples] */
    float *ref, *got;              /* [samples * 128] */
    cudaStream_t stream;
    cudaEvent_t ev[3];
} up_bufs;

/* One row of the report. */
typedef struct {
    int seq, heads, causal, peers, grid, tiles, split, order, criterion_ok, verified;
    int couriers;                           /* the plan's couriers (0: none) */
    int kv;                                 /* the plan's KV split: key blocks per part (0) */
    double courier_pace;                    /* their total rate, bytes/ns (0: none/unpaced) */
    double comm_mb;                         /* bytes that cross the link, MB */
    double fa_us, fa_min, fa_max, fa_evt_us, fa_tflops;
    double copy_us, serial_us, serial_min, serial_max, comm_ratio; /* copy_us / fa_us */
    double pb_us, pb_min, pb_max, pb_pred_us, pb_vis_us;
    double fused_us, fused_min, fused_max, fused_vis_us, pred_us, pred_err_pct, store_us;
    double hidden_pct, speedup, max_err;
    double crit_peak_mb, crit_sync_mb;      /* criterion_measured: peak backlog, sync. form */
    int crit_keff;                          /* most CTAs issuing at once (measured arrivals) */
    int crit_fluid_ok;                      /* the fluid criterion (docs/UP.md; comparison) */
    double crit_held_us;                    /* per-CTA piggyback: most a CTA's stores were held */
    /* fused - fa taken apart, medians of per-repetition differences (us): slice_us = the
     * planned split with LOCAL output (no link) - fa, the kernel's own cost of the split;
     * link_us = fused - that run, what the link adds. NAN when the plan has no split. */
    double slice_us, link_us;
    double hidden_lo, hidden_hi;            /* min / max over repetitions of the per-repetition
                                               hidden, 100*(1 - (fused_i-fa_i)/(serial_i-fa_i)) */
    double rank_max_us[4];                  /* -g: the slowest rank's medians of fa, serial, pb
                                               and fused (not in the CSV) */
} up_row;

/* ---- options -------------------------------------------------------------------------------- */

static int parse_list(const char *opt, const char *s, int sizes, long lo, long hi, int *out,
                      int *n)
{
    return xs_parse_list(opt, s, sizes, lo, hi, out, UP_MAX_LIST, n) != XS_OK ? xs_cli_fail()
                                                                              : 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: xstage bench up [options]\n"
            "FlashAttention forward (bf16, head dim 128) + Ulysses all-to-all to virtual peers:\n"
            "fa (local output), serial (attention, then cudaMemcpyAsync per peer) and fused\n"
            "(output warps store straight into the peers' windows; planner picks piggyback or\n"
            "reshape). Every window byte is verified in every repetition.\n"
            "  -s, --seq LIST        sequence lengths, K suffix ok\n"
            "                        [8192,16384,32768,49152,65536]\n"
            "  -H, --heads LIST      heads held by this rank [8,16]\n"
            "  -p, --peers LIST      ranks of the Ulysses group, incl. this one [2,4,8]\n"
            "  -c, --causal 0|1|both [both]\n"
            "  -n, --iters N         timed repetitions [5]\n"
            "  -w, --warmup N        warm-up repetitions [1]\n"
            "      --split N         -1: planner decides; 0: piggyback; 1..256: spread each tile\n"
            "                        in N slices over the iterations of the next query block [-1]\n"
            "      --order WORD      auto (planner decides), snake (heaviest tiles first) or\n"
            "                        early (tiles crossing the link first, lightest first) [auto]\n"
            "      --couriers N      -1: planner decides (4 and 8 in its family); 0: none; N: the\n"
            "                        last N CTAs copy the remote tiles, paced, while the others\n"
            "                        compute [-1]\n"
            "      --courier-pace F  couriers' total rate as a fraction of the profile's drain\n"
            "                        rate R; 0 = unpaced [0.9]\n"
            "      --kv-split N      -1: planner decides (32, 16, 64 in its family, where pilots\n"
            "                        run); 0: none; N: tiles cut along the keys into parts of at\n"
            "                        most N key blocks on other CTAs, the last part merges them\n"
            "                        and stores the tile in --split slices (8) [-1]\n"
            "      --kv-trace FILE   where the plan is a KV split, one more local and one fused\n"
            "                        run with every task's stamps, written to FILE (CSV)\n"
            "      --pilots N        the planner also runs its N best members by prediction,\n"
            "                        and piggyback and every KV split, 3 verified runs each, and\n"
            "                        keeps the fastest (median; those within 1 %% of it\n"
            "                        are tied, the model's ranking decides); 0: the model's\n"
            "                        choice alone; one GPU only [4]\n"
            "      --pilot-max-us T  pilot only rows whose attention takes at most T us [3000]\n"
            "      --load-drain X    the model's drain rate (bytes/ns) for the fused kernel's\n"
            "                        stores while every SM computes; 0: the profile's\n"
            "                        drain_under_load_bytes_per_ns (calibrate --load-probe),\n"
            "                        else its R [0]\n"
            "      --slice-ns X      the kernel's own cost of one output slice (ns), added to a\n"
            "                        split member's prediction once per slice of its busiest\n"
            "                        CTA: the slice_us column of an earlier run [0]\n"
            "      --samples N       reference rows checked per configuration [256]\n"
            "      --seed N          input seed [fixed per run: 12345]\n"
            "  -d, --device N        CUDA device [0]\n"
            "  -g, --gpus N          N ranks, one process per GPU (rank r on GPU r), the\n"
            "                        Ulysses group over NCCL windows (P = N; no --peers);\n"
            "                        1: this one-GPU bench (docs/MULTIGPU.md)\n"
            "      --csv FILE        write the rows as CSV (with '#' header lines)\n"
            "      --quick           seq 8192,16384, heads 16, peers 8, -n 3\n"
            "      --profile FILE    calibrated profile (JSON); default: embedded H200 PCIe\n"
            "      --set NAME=VALUE  override a numeric profile field (repeatable)\n"
            "  -h, --help\n");
}

static int parse_opts(int argc, char **argv, up_opts *o)
{
    memset(o, 0, sizeof *o);
    static const int seq_def[] = {8192, 16384, 32768, 49152, 65536};
    memcpy(o->seq, seq_def, sizeof seq_def);
    o->nseq = 5;
    o->heads[0] = 8, o->heads[1] = 16, o->nheads = 2;
    o->peers[0] = 2, o->peers[1] = 4, o->peers[2] = 8, o->npeers = 3;
    o->causal_lo = 0, o->causal_hi = 1;
    o->common.iters = 5, o->common.warmup = 1;
    o->split = -1, o->order = -1, o->samples = 256, o->common.seed = 12345;
    o->couriers = -1, o->courier_pace = 0.9, o->kv = -1;
    o->pilots = 4, o->pilot_max_us = 3000;
    int seq_set = 0, heads_set = 0, peers_set = 0, quick = 0;
    enum { OPT_SPLIT = XS_OPT_FIRST_FREE, OPT_SAMPLES, OPT_ORDER, OPT_COURIERS, OPT_PACE,
           OPT_PILOTS, OPT_PILOT_MAX, OPT_KV, OPT_KV_TRACE, OPT_LOAD_DRAIN, OPT_SLICE_NS };
    static const struct option lo[] = {
        {"seq", required_argument, 0, 's'},       {"heads", required_argument, 0, 'H'},
        {"peers", required_argument, 0, 'p'},     {"causal", required_argument, 0, 'c'},
        {"iters", required_argument, 0, 'n'},     {"warmup", required_argument, 0, 'w'},
        {"device", required_argument, 0, 'd'},    {"split", required_argument, 0, OPT_SPLIT},
        {"samples", required_argument, 0, OPT_SAMPLES}, {"order", required_argument, 0, OPT_ORDER},
        {"seed", required_argument, 0, XS_OPT_SEED}, {"csv", required_argument, 0, XS_OPT_CSV},
        {"quick", no_argument, 0, XS_OPT_QUICK},  {"profile", required_argument, 0, XS_OPT_PROFILE},
        {"gpus", required_argument, 0, 'g'},
        {"couriers", required_argument, 0, OPT_COURIERS},
        {"courier-pace", required_argument, 0, OPT_PACE},
        {"pilots", required_argument, 0, OPT_PILOTS},
        {"pilot-max-us", required_argument, 0, OPT_PILOT_MAX},
        {"load-drain", required_argument, 0, OPT_LOAD_DRAIN},
        {"slice-ns", required_argument, 0, OPT_SLICE_NS},
        {"kv-split", required_argument, 0, OPT_KV},
        {"kv-trace", required_argument, 0, OPT_KV_TRACE},
        {"set", required_argument, 0, XS_OPT_SET}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    long v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "s:H:p:c:n:w:d:g:h", lo, NULL)) != -1) {
        switch (c) {
        case 's':
            if (parse_list("--seq", optarg, 1, 1, XS_ATTN_MAX_SEQ, o->seq, &o->nseq))
                return 1;
            seq_set = 1;
            break;
        case 'H':
            if (parse_list("--heads", optarg, 0, 1, XS_ATTN_MAX_HEADS, o->heads, &o->nheads))
                return 1;
            heads_set = 1;
            break;
        case 'p':
            if (parse_list("--peers", optarg, 0, 1, XS_MAX_RANKS, o->peers, &o->npeers))
                return 1;
            peers_set = 1;
            break;
        case 'c':
            if (!strcmp(optarg, "0")) o->causal_lo = o->causal_hi = 0;
            else if (!strcmp(optarg, "1")) o->causal_lo = o->causal_hi = 1;
            else if (!strcmp(optarg, "both")) o->causal_lo = 0, o->causal_hi = 1;
            else return xs_cli_failf("--causal '%s': expected 0, 1 or both", optarg);
            break;
        case 'n':
        case 'w':
        case 'd':
        case 'g':
        case XS_OPT_SEED:
        case XS_OPT_PROFILE:
        case XS_OPT_SET:
            if (xs_parse_bench_opt(c, optarg, UP_MAX_ITERS, &o->common) < 0)
                return xs_cli_fail();
            break;
        case OPT_SPLIT:
            if (xs_parse_int("--split", optarg, -1, XS_ATTN_MAX_SPLIT, &v) != XS_OK)
                return xs_cli_fail();
            o->split = (int)v;
            break;
        case OPT_ORDER:
            if (!strcmp(optarg, "auto")) o->order = -1;
            else if (!strcmp(optarg, "snake")) o->order = XS_ATTN_ORDER_SNAKE;
            else if (!strcmp(optarg, "early")) o->order = XS_ATTN_ORDER_EARLY;
            else return xs_cli_failf("--order '%s': expected auto, snake or early", optarg);
            break;
        case OPT_COURIERS:
            if (xs_parse_int("--couriers", optarg, -1, XS_ATTN_MAX_COURIERS, &v) != XS_OK)
                return xs_cli_fail();
            o->couriers = (int)v;
            break;
        case OPT_PACE:
            if (xs_parse_double("--courier-pace", optarg, 0.0, 4.0, &o->courier_pace) != XS_OK)
                return xs_cli_fail();
            break;
        case OPT_PILOTS:
            if (xs_parse_int("--pilots", optarg, 0, UP_MAX_PILOTS, &v) != XS_OK)
                return xs_cli_fail();
            o->pilots = (int)v;
            break;
        case OPT_KV:
            if (xs_parse_int("--kv-split", optarg, -1, 1 << 20, &v) != XS_OK)
                return xs_cli_fail();
            o->kv = (int)v;
            break;
        case OPT_PILOT_MAX:
            if (xs_parse_double("--pilot-max-us", optarg, 0.0, 1e9, &o->pilot_max_us) != XS_OK)
                return xs_cli_fail();
            break;
        case OPT_LOAD_DRAIN:
            if (xs_parse_double("--load-drain", optarg, 0.0, 1e6, &o->load_drain) != XS_OK)
                return xs_cli_fail();
            break;
        case OPT_SLICE_NS:
            if (xs_parse_double("--slice-ns", optarg, 0.0, 1e6, &o->slice_ns) != XS_OK)
                return xs_cli_fail();
            break;
        case OPT_SAMPLES:
            if (xs_parse_int("--samples", optarg, 1, 65536, &v) != XS_OK)
                return xs_cli_fail();
            o->samples = (int)v;
            break;
        case XS_OPT_CSV: o->csv = optarg; break;
        case OPT_KV_TRACE: o->kv_trace = optarg; break;
        case XS_OPT_QUICK: quick = 1; break;
        case 'h': usage(stdout); return -1;
        default: usage(stderr); return 1;
        }
    }
    if (optind < argc)
        return xs_cli_failf("bench up: unexpected argument '%s'", argv[optind]);
    if (o->couriers > 0 && o->split >= 0)
        return xs_cli_failf("--couriers %d cannot be combined with --split %d (a courier run "
                            "stores each tile once, unsliced)", o->couriers, o->split);
    if (o->kv > 0 && o->couriers > 0)
        return xs_cli_failf("--kv-split %d cannot be combined with --couriers (a KV-split run "
                            "stores each tile from its last part)", o->kv);
    if (o->kv > 0 && o->common.gpus > 1)
        return xs_cli_failf("--kv-split %d: one GPU only (the planner keeps KV split out of -g "
                            "runs)", o->kv);
    {
        /* -g 1 is the one-GPU bench (its --peers are virtual); with N > 1 the ranks are the
         * Ulysses group: P = N */
        const xs_gpus_conflict cf[] = {
            {"--device", o->common.device_set, "rank r runs on GPU r"},
            {"--peers", o->common.gpus > 1 && peers_set,
             "with -g the ranks are the peers: P = the number of GPUs"}};
        if (xs_gpus_check("bench up", o->common.gpus_set, o->common.gpus, cf, 2) != XS_OK)
            return xs_cli_fail();
        if (o->common.gpus > 1)
            o->peers[0] = o->common.gpus, o->npeers = 1, peers_set = 1;
    }
    if (quick) {
        if (!seq_set) o->seq[0] = 8192, o->seq[1] = 16384, o->nseq = 2;
        if (!heads_set) o->heads[0] = 16, o->nheads = 1;
        if (!peers_set) o->peers[0] = 8, o->npeers = 1;
        if (!o->common.iters_set) o->common.iters = 3;
    }
    for (int i = 0; i < o->nseq; i++)
        for (int j = 0; j < o->npeers; j++)
            if (o->seq[i] % o->peers[j])
                return xs_cli_failf("--seq %d is not a multiple of %s %d (each rank "
                                    "receives seq/peers rows)", o->seq[i],
                                    o->common.gpus > 1 ? "-g/--gpus" : "--peers", o->peers[j]);
    return 0;
}

/* ---- small helpers ------------------------------------------------------------------------ */

static void check_devstatus(up_bufs *B, const char *what)
{
    xs_devstatus st;
    XS_CHECK_CU(cudaMemcpy(&st, B->status, sizeof st, cudaMemcpyDeviceToHost));
    if (st.code) {
        fprintf(stderr, "xstage: error: %s: device failure code %u in CTA %u (detail %llu)\n",
                what, st.code, st.block, st.detail);
        exit(1);
    }
}

/* Evict L2 so that no run starts on inputs a previous run left cached. */
static void flush_l2(up_bufs *B, int rep)
{
    XS_CHECK_CU(cudaMemsetAsync(B->flush, rep & 0xff, B->flush_bytes, B->stream));
}

/* ---- one configuration --------------------------------------------------------------------- */

/* -g N, N > 1: this rank's window and the two tables that map the one-GPU problem onto real
 * ranks (xs_up_peer_tables; slot = SM count >= grid flags per source). */
typedef struct {
    xs_winset *ws;
    xs_coll *coll;  /* serial's all-to-all and the agreements between ranks */
    int me, n;
    xs_wintab send; /* the kernel's: problem rank r -> GPU (me + r) % N, region and slot me */
    xs_wintab own;  /* this window: problem rank r's rows, i.e. region and slot of the source
                       (me - r) mod N that sends them */
} up_peer;

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

/* The planner in the loop (xs_up_plan_run, docs/UP.md "Criterion"; --split / --order /
 * --couriers / --kv-split restrict the family). Prints the decision and the model's warnings;
 * fills row's criterion and plan columns; *d_pb and *d_fu get the predicted cost (ns) over fa
 * of piggyback and of the choice; *fam the family with its predictions (the pilots read it). */
static void plan(const up_opts *o, const xs_profile *prof0, const up_cfg *c, const double *dur,
                 const uint64_t *tns, int kv_ok, up_row *row, double *d_pb, double *d_fu,
                 xs_up_family *fam)
{
    const xs_up_cfg m = model_cfg(c);
    const xs_up_plan_opts po = {o->split, o->order, o->couriers, o->kv, kv_ok, o->load_drain,
                                o->slice_ns};
    xs_up_plan pl;
    xs_up_plan_run(&po, prof0, &m, dur, tns, &pl);
    xs_profile pm;
    xs_up_model_profile(prof0, o->load_drain, &pm);
    const xs_profile *prof = &pm;
    if (pl.pb_why[0])
        fprintf(stderr, "xstage: warning: %s\n", pl.pb_why);
    for (int i = 0; i < pl.fam.n; i++) {
        if (pl.fam.failed[i] == 2)
            printf("# note: %s: not in the family\n", pl.fam.why[i]);
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
                 "allowed), stage peak %.2f MB of Q %.2f MB; fluid test of runs 5-10 %s: peak "
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
    printf("# plan seq %d heads %d causal %d peers %d: criterion %s (%s); chosen %s "
           "split %d couriers %d (%s), cost over fa %+.1f us (piggyback %+.1f us)", c->seq,
           c->heads, c->causal, c->peers,
           row->criterion_ok == 1 ? "holds" : row->criterion_ok == 0 ? "fails" : "?", how,
           row->order == XS_ATTN_ORDER_EARLY ? "early" : "snake", row->split, row->couriers,
           xs_up_plan_name(row->order, row->split, row->couriers, row->kv, pn, sizeof pn),
           *d_fu / 1e3, *d_pb / 1e3);
    if (*cl)
        printf("; couriers paced at %.1f B/ns (R %.1f):%s", c->pace, prof->drain_bytes_per_ns,
               cl);
    if (*kl)
        printf("; KV split:%s", kl);
    printf("\n");
}

/* Poison every destination window's rows of this configuration. */
static void poison_windows(up_bufs *B, const up_cfg *c)
{
    size_t bytes = (size_t)c->rpr * c->heads * XS_ATTN_ROW_BYTES;
    for (int r = 0; r < c->peers; r++)
        XS_CHECK(xs_attn_fill_word(c->own->data[r], bytes, UP_POISON, B->stream));
}

/* The windows against the fa output, every byte of every rank: the 16-byte units that differ;
 * after a KV-split run (kv) tile by tile instead - bitwise where a tile ran whole, within
 * UP_KV_ATOL + UP_KV_RTOL |fa| where it ran in parts (B->kv.split) - counting bf16 values. */
static unsigned long long verify_windows(up_bufs *B, const up_cfg *c, int kv)
{
    unsigned long long bad = 0;
    XS_CHECK(xs_attn_verify_windows(c->own, c->peers, B->o, c->seq, c->heads, c->rpr,
                                    kv ? B->kv.split : NULL, UP_KV_ATOL, UP_KV_RTOL, B->bad,
                                    B->stream, &bad));
    return bad;
}

/* KV split: the lists of kb key blocks per part in device memory (built, checked and copied
 * when another member's are there), the partials' buffers grown to fit. Exits with one line
 * when they cannot be built (the planner offers only members whose lists build). */
static void kv_load(up_bufs *B, const up_cfg *c, int kb)
{
    if (B->kv_kb == kb)
        return;
    int *off = NULL, nt = 0, ns = 0;
    xs_attn_kvtask *tk = NULL;
    const xs_up_cfg m = model_cfg(c);
    XS_CHECK(xs_up_kv_lists(&m, kb, &off, &tk, &nt, &ns));
    XS_CHECK(xs_attn_kvbuf_load(&B->kv, c->grid, c->tiles, off, tk, nt, ns, B->stream));
    free(off), free(tk);
    B->kv_kb = kb;
}

/* A launch's arguments for the KV split of kb key blocks per part: its lists (kv_load), its
 * partials and their flags, and the run's bound on each wait. The caller sets the signal. */
static void kv_args(up_bufs *B, const up_cfg *c, int kb, xs_attn_args *a)
{
    kv_load(B, c, kb);
    a->tasks = B->kv.tasks, a->task_off = B->kv.off;
    a->part = B->kv.part, a->part_flag = B->kv.flag;
    a->timeout_ns = c->timeout_ns;
}

/* The signal of the next run that raises flags (fused runs; KV-split runs, whose partials' flags
 * carry it, in either output): new per run, so that a stale flag never matches. */
static uint64_t up_epoch;

/* One kernel launch between events, after an L2 flush; returns the in-kernel span (us). */
static double timed_launch(up_bufs *B, const up_cfg *c, const xs_attn_args *a, int rep,
                           double *evt_us, uint64_t *cta_host)
{
    flush_l2(B, rep);
    XS_CHECK_CU(cudaEventRecord(B->ev[0], B->stream));
    XS_CHECK(xs_attn_fwd(a, a->out == XS_ATTN_OUT_WINDOWS ? c->tab : NULL, c->grid, B->stream));
    XS_CHECK_CU(cudaEventRecord(B->ev[1], B->stream));
    XS_CHECK_CU(cudaStreamSynchronize(B->stream));
    float ms = 0;
    XS_CHECK_CU(cudaEventElapsedTime(&ms, B->ev[0], B->ev[1]));
    *evt_us = ms * 1e3;
    XS_CHECK_CU(cudaMemcpy(cta_host, B->cta_ns, (size_t)c->grid * 3 * sizeof(uint64_t),
                           cudaMemcpyDeviceToHost));
    return xs_attn_span_us(cta_host, c->grid);
}

/* One fa run: O poisoned with NaN first, so that afterwards no element may be NaN/Inf (every
 * output written, and finite: the windows are later compared against it). Returns the
 * in-kernel span (us); *evt_us the event time; clears *ok on a failure. */
static double fa_once(up_bufs *B, const up_cfg *c, int rep, double *evt_us, uint64_t *cta,
                      int *ok)
{
    const size_t nel = (size_t)c->seq * c->heads * XS_ATTN_D;
    XS_CHECK(xs_attn_fill_word(B->o, nel * 2, UP_POISON, B->stream));
    double sp = timed_launch(B, c, &c->base, rep, evt_us, cta);
    unsigned long long nonfinite = 0;
    XS_CHECK_CU(cudaMemsetAsync(B->bad, 0, sizeof *B->bad, B->stream));
    XS_CHECK(xs_attn_count_nonfinite(B->o, nel, B->bad, B->stream));
    XS_CHECK_CU(cudaMemcpyAsync(&nonfinite, B->bad, sizeof nonfinite, cudaMemcpyDeviceToHost,
                                B->stream));
    XS_CHECK_CU(cudaStreamSynchronize(B->stream));
    if (nonfinite) {
        fprintf(stderr, "xstage: error: attention seq %d heads %d causal %d: %llu of %zu "
                "outputs unwritten or not finite\n", c->seq, c->heads, c->causal, nonfinite,
                nel);
        *ok = 0;
    }
    return sp;
}

/* ---- real peers (-g N): lockstep, serial's all-to-all, the signals' wait -------------------- */

/* -g: all ranks meet (no-op on one GPU). Serial and fused runs sit between two of these: no
 * source stores into a window before its owner poisoned it, and the ranks stay in lockstep. */
static void up_barrier(const up_cfg *c)
{
    if (c->pp)
        XS_CHECK(xs_win_barrier(c->pp->ws, UP_BARRIER_MS));
}

/* -g: wait (bounded, acquire loads) until all N x grid signals of this run are in this rank's
 * window: slot s holds source s's CTAs. A source that never signals ends the run with one line
 * naming it (the launcher then stops the other ranks). */
static void up_wait_signals(up_bufs *B, const up_cfg *c, uint64_t value, const char *what)
{
    unsigned long long missing = 0;
    uint64_t late = 0;
    const xs_status st = xs_attn_flags_wait(c->own, c->peers, c->grid, value, UP_FLAG_WAIT_MS,
                                            B->bad, B->stream, &missing, &late);
    if (st == XS_OK)
        return;
    if (st != XS_ETIMEOUT)
        XS_CHECK(st);
    char who[XS_MAX_RANKS * 4] = "";
    for (int r = 0; r < c->peers; r++)
        if (late >> r & 1)
            snprintf(who + strlen(who), sizeof who - strlen(who), "%s%d", *who ? "," : "",
                     (c->pp->me - r + c->pp->n) % c->pp->n);
    fprintf(stderr, "xstage: error: bench up rank %d: %s (seq %d heads %d causal %d): the "
            "signals of source(s) %s did not arrive within %d ms (%llu of %d x %d missing)\n",
            c->pp->me, what, c->seq, c->heads, c->causal, who, UP_FLAG_WAIT_MS, missing,
            c->peers, c->grid);
    exit(1);
}

/* One serial run: the attention kernel, then one cudaMemcpyAsync per rank of its shard of O
 * into its window (-g: one NCCL group of send/recv, xs_up_alltoall), windows poisoned first,
 * every byte checked after at its destination. Returns kernel span + copy time (us); *copy_us
 * the copies alone (events). */
static double serial_once(up_bufs *B, const up_cfg *c, int rep, double *copy_us, uint64_t *cta,
                          int *ok)
{
    const size_t shard = (size_t)c->rpr * c->heads * XS_ATTN_ROW_BYTES;
    poison_windows(B, c);
    XS_CHECK_CU(cudaStreamSynchronize(B->stream));
    flush_l2(B, rep);
    up_barrier(c);
    XS_CHECK_CU(cudaEventRecord(B->ev[0], B->stream));
    XS_CHECK(xs_attn_fwd(&c->base, NULL, c->grid, B->stream));
    XS_CHECK_CU(cudaEventRecord(B->ev[1], B->stream));
    if (c->pp)
        XS_CHECK(xs_up_alltoall(c->pp->coll, &c->pp->own, (const char *)B->o, shard, B->stream));
    else
        for (int r = 0; r < c->peers; r++)
            XS_CHECK_CU(cudaMemcpyAsync(c->tab->data[r], (const char *)B->o + r * shard, shard,
                                        cudaMemcpyDefault, B->stream));
    XS_CHECK_CU(cudaEventRecord(B->ev[2], B->stream));
    XS_CHECK_CU(cudaStreamSynchronize(B->stream));
    up_barrier(c);
    float ms = 0;
    XS_CHECK_CU(cudaEventElapsedTime(&ms, B->ev[1], B->ev[2]));
    XS_CHECK_CU(cudaMemcpy(cta, B->cta_ns, (size_t)c->grid * 3 * sizeof(uint64_t),
                           cudaMemcpyDeviceToHost));
    double sp = xs_attn_span_us(cta, c->grid);
    unsigned long long bad = verify_windows(B, c, 0);
    if (bad) {
        fprintf(stderr, "xstage: error: serial all-to-all: %llu 16-byte units differ at their "
                "destinations\n", bad);
        *ok = 0;
    }
    *copy_us = ms * 1e3;
    return sp + ms * 1e3;
}

/* One fused run in this order with this split, or with C couriers (split 0; the grid then
 * has courier_grid's CTAs, all of which must signal): windows poisoned first; every byte checked
 * at its destination and every CTA's signal to every rank checked (a new flag value per run, so
 * a stale flag never passes; -g: every source's, waited for first). The couriers stage in
 * B->stage, never in O (fa's output, the windows' reference). Returns the span (us); *evt_us the
 * event time (with the drain), *store_us the median over CTAs of warp 0's store time (a
 * courier's: its copying time). */
static double fused_once(up_bufs *B, const up_cfg *c0, int order, int split, int couriers,
                         int kv, int rep, double *evt_us, double *store_us, uint64_t *cta,
                         int *ok)
{
    up_cfg rc = *c0; /* the run's grid: c0->grid, or the courier grid */
    const up_cfg *c = &rc;
    xs_attn_args a = c->base;
    a.out = XS_ATTN_OUT_WINDOWS;
    a.rows_per_rank = c->rpr;
    a.split = split;
    a.order = order;
    a.signal = ++up_epoch;
    if (couriers > 0) {
        const xs_up_cfg m = model_cfg(c0);
        rc.grid = xs_up_courier_grid(&m, couriers);
        a.couriers = couriers;
        a.pace_bytes_per_ns = (float)c->pace;
        a.o = B->stage;
        a.sync = B->sync;
        a.timeout_ns = c->timeout_ns;
    }
    if (kv > 0) {
        kv_args(B, c, kv, &a);
        a.task_ns = B->kv_tns_on ? B->kv_tns : NULL;
    }
    poison_windows(B, c);
    XS_CHECK_CU(cudaStreamSynchronize(B->stream)); /* poison landed before timing */
    up_barrier(c);
    double sp = timed_launch(B, c, &a, rep, evt_us, cta);
    if (c->pp) {
        up_wait_signals(B, c, a.signal, split || order || couriers || kv ? "fused" : "piggyback");
        up_barrier(c);
    }
    unsigned long long bad = verify_windows(B, c, kv > 0);
    unsigned long long bad_flags = 0;
    XS_CHECK_CU(cudaMemsetAsync(B->bad, 0, sizeof *B->bad, B->stream));
    XS_CHECK(xs_attn_flags_check(c->own, c->grid, a.signal, B->bad, B->stream));
    XS_CHECK_CU(cudaMemcpyAsync(&bad_flags, B->bad, sizeof bad_flags, cudaMemcpyDeviceToHost,
                                B->stream));
    XS_CHECK_CU(cudaStreamSynchronize(B->stream));
    if (bad_flags) {
        fprintf(stderr, "xstage: error: fused order %d split %d couriers %d KV split %d: %llu of "
                "%d x %d CTA signals missing\n", order, split, couriers, kv, bad_flags,
                c->peers, c->grid);
        *ok = 0;
    }
    if (bad) {
        fprintf(stderr, "xstage: error: fused order %d split %d couriers %d KV split %d (seq %d "
                "heads %d causal %d peers %d): %llu of %zu %s differ at their destinations\n",
                order, split, couriers, kv, c->seq, c->heads, c->causal, c->peers, bad,
                (size_t)c->rpr * c->heads * XS_ATTN_ROW_BYTES / (kv > 0 ? 2 : 16) * c->peers,
                kv > 0 ? "bf16 values" : "16-byte units");
        *ok = 0;
    }
    if (couriers > 0 || kv > 0) /* a courier's or a last part's timeout: name it now */
        check_devstatus(B, couriers > 0 ? "attention with couriers" : "attention, KV split");
    *store_us = xs_attn_store_us(cta, c->grid);
    return sp;
}

/* Pilots (--pilots, one GPU; docs/UP.md "Pilots"): the family's o->pilots best members by
 * prediction, the model's choice always among them, each timed by the median of UP_PILOT_REPS
 * fused runs (every run verified: *ok); the fastest becomes the plan, and its prediction the
 * reported one (*d_fu). The same choice rule as bench tp's planner: the model proposes, short
 * verified runs decide among its best. Prints one line. */
static void run_pilots(up_bufs *B, const up_opts *o, const up_cfg *c, const xs_up_family *f,
                       up_row *row, double *d_fu, uint64_t *cta, int *ok)
{
    int idx[XS_UP_MAX_MEMBERS];
    const int np2 = xs_up_pilot_members(f, row->order, row->split, row->couriers, row->kv,
                                        o->pilots, idx);
    double med[XS_UP_MAX_MEMBERS];
    char line[1024], nm[32];
    int l = snprintf(line, sizeof line, "# pilots seq %d heads %d causal %d peers %d (median of "
                     "%d verified runs, us):", c->seq, c->heads, c->causal, c->peers,
                     UP_PILOT_REPS);
    for (int k = 0; k < np2; k++) {
        const int i = idx[k];
        double t[UP_PILOT_REPS];
        for (int r = 0; r < UP_PILOT_REPS; r++) {
            double e, st;
            t[r] = fused_once(B, c, f->ord[i], f->spl[i], f->cou[i], f->kv[i], 0, &e, &st, cta,
                              ok);
        }
        med[k] = xs_median(t, UP_PILOT_REPS);
        if (l > 0 && (size_t)l < sizeof line)
            l += snprintf(line + l, sizeof line - (size_t)l, " %s %.1f (pred %+.1f)",
                          xs_up_plan_name(f->ord[i], f->spl[i], f->cou[i], f->kv[i], nm, sizeof nm),
                          med[k], f->dp[i] / 1e3);
    }
    const int bi = xs_up_pilot_pick(f, idx, med, np2, UP_PILOT_TIE);
    if (bi >= 0) {
        row->order = f->ord[bi], row->split = f->spl[bi], row->couriers = f->cou[bi];
        row->kv = f->kv[bi];
        row->courier_pace = row->couriers > 0 ? c->pace : 0.0;
        *d_fu = f->dp[bi];
    }
    printf("%s; chosen %s\n", line,
           xs_up_plan_name(row->order, row->split, row->couriers, row->kv, nm, sizeof nm));
}

/* --kv-trace: one fused KV-split run and one with local output (after it: it overwrites O, the
 * reference of the fused run's check), every task stamped; appends one CSV line per task
 * (times in ns from the run's first task start). */
static void kv_trace(up_bufs *B, const up_opts *o, const up_cfg *c, const up_row *row)
{
    int *off = NULL, nt = 0, ns = 0;
    xs_attn_kvtask *tk = NULL;
    const xs_up_cfg m = model_cfg(c);
    XS_CHECK(xs_up_kv_lists(&m, row->kv, &off, &tk, &nt, &ns));
    if ((size_t)nt * 4 > B->kv_tns_cap) {
        cudaFree(B->kv_tns);
        XS_CHECK_CU(cudaMalloc((void **)&B->kv_tns, (size_t)nt * 4 * sizeof(uint64_t)));
        B->kv_tns_cap = (size_t)nt * 4;
    }
    uint64_t *h = (uint64_t *)malloc((size_t)nt * 4 * sizeof(uint64_t));
    uint64_t *cta = (uint64_t *)malloc((size_t)(c->grid + 1) * 3 * sizeof(uint64_t));
    FILE *f = fopen(o->kv_trace, "a");
    if (!h || !cta || !f) {
        fprintf(stderr, "xstage: error: --kv-trace %s: %s\n", o->kv_trace,
                f ? "out of host memory" : strerror(errno));
        exit(1);
    }
    if (ftell(f) == 0)
        fprintf(f, "seq,heads,causal,peers,kv,split,out,cta,pos,tile,kb0,kb1,part,parts,"
                "remote_bytes,start_ns,loop_end_ns,merged_ns,end_ns\n");
    for (int pass = 0; pass < 2; pass++) {
        const int out = 1 - pass; /* fused first: its check compares with fa's O */
        int ok = 1;
        double e, st;
        XS_CHECK_CU(cudaMemsetAsync(B->kv_tns, 0, (size_t)nt * 4 * sizeof(uint64_t), B->stream));
        if (out == 0) {
            up_cfg lc = *c;
            lc.base.split = row->split;
            kv_args(B, c, row->kv, &lc.base);
            lc.base.signal = ++up_epoch;
            lc.base.task_ns = B->kv_tns;
            fa_once(B, &lc, 0, &e, cta, &ok);
        } else {
            B->kv_tns_on = 1;
            fused_once(B, c, row->order, row->split, 0, row->kv, 0, &e, &st, cta, &ok);
            B->kv_tns_on = 0;
        }
        check_devstatus(B, "attention, KV split, traced");
        XS_CHECK_CU(cudaMemcpy(h, B->kv_tns, (size_t)nt * 4 * sizeof(uint64_t),
                               cudaMemcpyDeviceToHost));
        uint64_t t0 = UINT64_MAX;
        for (int i = 0; i < nt; i++)
            t0 = h[4 * i] && h[4 * i] < t0 ? h[4 * i] : t0;
        for (int b = 0; b < c->grid; b++)
            for (int i = off[b]; i < off[b + 1]; i++) {
                const xs_attn_kvtask q = tk[i];
                fprintf(f, "%d,%d,%d,%d,%d,%d,%s,%d,%d,%d,%d,%d,%d,%d,%.0f", c->seq, c->heads,
                        c->causal, c->peers, row->kv, row->split, out ? "windows" : "local", b,
                        i - off[b], q.tile, q.kb0, q.kb1, xs_attn_kv_partno(q.part),
                        xs_attn_kv_nparts(q.part), xs_up_tile_remote_bytes(&m, q.tile));
                for (int k = 0; k < 4; k++)
                    fprintf(f, ",%lld", h[4 * i + k] ? (long long)(h[4 * i + k] - t0) : -1LL);
                fputc('\n', f);
            }
        if (!ok) {
            fprintf(stderr, "xstage: error: the traced KV-split run failed its check\n");
            exit(1);
        }
    }
    fclose(f);
    free(h), free(cta), free(off), free(tk);
}

static void run_config(up_bufs *B, const up_opts *o, const xs_profile *prof,
                       const xs_gpu_info *gi, up_cfg *c, up_row *row)
{
    const size_t nel = (size_t)c->seq * c->heads * XS_ATTN_D;
    memset(row, 0, sizeof *row);
    row->seq = c->seq, row->heads = c->heads, row->causal = c->causal, row->peers = c->peers;
    row->tiles = c->tiles = xs_attn_tiles(c->seq, c->heads);
    row->grid = c->grid = c->tiles < gi->sm_count ? c->tiles : gi->sm_count;
    c->sms = gi->sm_count;
    c->pace = o->courier_pace * prof->drain_bytes_per_ns;
    c->rpr = c->seq / c->peers;
    c->remote = xs_attn_remote_tiles(c->seq, c->heads, c->rpr);
    row->comm_mb = (double)(c->seq - c->rpr) * c->heads * XS_ATTN_ROW_BYTES / 1e6;

    /* fresh inputs for every configuration; never zeros */
    uint32_t seed = o->common.seed ^ xs_mix32((uint32_t)c->seq * 131u + (uint32_t)c->heads * 7u +
                                       (uint32_t)c->causal * 3u + (uint32_t)c->peers * 17u);
    XS_CHECK(xs_attn_fill_random(B->q, nel, seed * 3u + 1u, -2.f, 2.f, B->stream));
    XS_CHECK(xs_attn_fill_random(B->k, nel, seed * 3u + 2u, -2.f, 2.f, B->stream));
    XS_CHECK(xs_attn_fill_random(B->v, nel, seed * 3u + 3u, -1.f, 1.f, B->stream));
    XS_CHECK_CU(cudaMemsetAsync(B->status, 0, sizeof(xs_devstatus), B->stream));
    B->kv_kb = 0; /* another shape: the lists are rebuilt on first use */

    xs_attn_args *a = &c->base;
    memset(a, 0, sizeof *a);
    a->q = B->q, a->k = B->k, a->v = B->v, a->o = B->o;
    a->seq = c->seq, a->heads = c->heads, a->causal = c->causal;
    a->out = XS_ATTN_OUT_LOCAL;
    a->cta_ns = B->cta_ns, a->tile_ns = B->tile_ns, a->status = B->status;

    const int n = o->common.iters, nw = o->common.warmup;
    double *x = (double *)malloc((size_t)9 * n * sizeof(double));
    /* [sms * 3]: a courier run's grid can exceed c->grid (courier_grid) */
    uint64_t *cta = (uint64_t *)malloc((size_t)gi->sm_count * 3 * sizeof(uint64_t));
    uint64_t *tns = (uint64_t *)malloc((size_t)c->tiles * sizeof(uint64_t));
    double *dur = (double *)malloc((size_t)c->tiles * sizeof(double));
    if (!x || !cta || !tns || !dur) {
        fprintf(stderr, "xstage: error: out of host memory for seq %d heads %d\n", c->seq,
                c->heads);
        exit(1);
    }
    double *fa = x, *fa_evt = x + n, *se = x + 2 * n, *cp = x + 3 * n, *pb = x + 4 * n,
           *pb_evt = x + 5 * n, *fu = x + 6 * n, *fu_evt = x + 7 * n, *ls = x + 8 * n;

    /* ---- plan: warm-up, then one fa run whose per-tile stamps give the model its work ---- */
    int ok = 1;
    double evt, store_pb = NAN, fa_plan_us = 0;
    for (int i = 0; i <= nw; i++)
        fa_plan_us = fa_once(B, c, i, &evt, cta, &ok);
    check_devstatus(B, "attention");
    /* couriers' waits: no wait can last longer than the kernel; 20x fa, at least 2 s */
    c->timeout_ns = (uint64_t)fmax(2e9, isfinite(fa_plan_us) ? 20e3 * fa_plan_us : 2e9);
    XS_CHECK_CU(cudaMemcpy(tns, B->tile_ns, (size_t)c->tiles * sizeof(uint64_t),
                           cudaMemcpyDeviceToHost));
    const xs_up_cfg mc = model_cfg(c); /* fa walks the snake: tile times from its stamps */
    xs_up_tile_durations(&mc, cta, 3, tns, dur);
    /* fa against the fp32 reference on sampled rows: <= 1 passes */
    double ref_ratio = 0;
    XS_CHECK(xs_attn_check_rows(B->q, B->k, B->v, B->o, c->seq, c->heads, c->causal, c->rpr,
                                o->samples, (uint64_t)seed * 7919u, UP_ATOL, UP_RTOL, B->rows,
                                B->ref, B->got, B->stream, &ref_ratio, &row->max_err));
    if (!(ref_ratio <= 1.0)) {
        ok = 0;
        fprintf(stderr, "xstage: error: seq %d heads %d causal %d: output differs from the fp32 "
                "reference by %.3g (%.2fx the tolerance %.0e + %.0e|ref|)\n", c->seq, c->heads,
                c->causal, row->max_err, ref_ratio, UP_ATOL, UP_RTOL);
    }
    double d_pb, d_fu;
    xs_up_family fam;
    /* KV splits only where pilots measure them (one GPU, rows they run in) */
    const int piloted = !c->pp && o->pilots > 0 && fa_plan_us <= o->pilot_max_us;
    plan(o, prof, c, dur, tns, piloted, row, &d_pb, &d_fu, &fam);
    if (piloted && fam.n > 1)
        run_pilots(B, o, c, &fam, row, &d_fu, cta, &ok);
    if (c->pp) {
        /* every rank runs rank 0's plan (the others' fa stamps differ a little): the same runs
         * in the same order, so barriers and signal values agree; the others send -2 */
        double v[4] = {(double)row->split, (double)row->order, (double)row->couriers,
                       (double)row->kv};
        if (c->pp->me)
            v[0] = v[1] = v[2] = v[3] = -2;
        XS_CHECK(xs_coll_max(c->pp->coll, v, 4));
        row->split = (int)v[0], row->order = (int)v[1], row->couriers = (int)v[2];
        row->kv = (int)v[3];
        row->courier_pace = row->couriers > 0 ? c->pace : 0.0;
    }
    const int same = row->split == 0 && row->order == XS_ATTN_ORDER_SNAKE &&
                     row->couriers == 0 && row->kv == 0;

    /* ---- measure: fa, serial, piggyback and the plan, one of each per repetition ---- */
    for (int i = 0; i < nw + n; i++) {
        const int j = i - nw; /* >= 0: a timed repetition */
        double e1, e2, cu, st;
        if (row->split > 0) {
            /* the plan's split with LOCAL output (LOCAL walks the snake; a KV split its lists):
             * the kernel's cost of the slices without the link. Run before fa, so that O - the
             * reference of every window check - is fa's; this run's O is checked complete and
             * finite. */
            up_cfg lc = *c;
            lc.base.split = row->split;
            if (row->kv > 0) { /* the KV split's lists, LOCAL output: its kernel cost alone */
                kv_args(B, c, row->kv, &lc.base);
                lc.base.signal = ++up_epoch;
            }
            double t_ls = fa_once(B, &lc, i, &e1, cta, &ok);
            if (row->kv > 0)
                check_devstatus(B, "attention, KV split, local output");
            if (j >= 0)
                ls[j] = t_ls;
        }
        double t_fa = fa_once(B, c, i, &e1, cta, &ok);
        double t_se = serial_once(B, c, i, &cu, cta, &ok);
        double t_pb = fused_once(B, c, XS_ATTN_ORDER_SNAKE, 0, 0, 0, i, &e2, &st, cta, &ok);
        if (j >= 0) {
            fa[j] = t_fa, fa_evt[j] = e1, se[j] = t_se, cp[j] = cu, pb[j] = t_pb, pb_evt[j] = e2;
            store_pb = st;
        }
        if (!same) {
            double t_fu = fused_once(B, c, row->order, row->split, row->couriers, row->kv, i,
                                     &e2, &st, cta, &ok);
            if (j >= 0)
                fu[j] = t_fu, fu_evt[j] = e2, row->store_us = st;
        }
    }
    check_devstatus(B, "attention");
    if (o->kv_trace && row->kv > 0)
        kv_trace(B, o, c, row);
    if (same) {
        memcpy(fu, pb, (size_t)n * sizeof(double));
        memcpy(fu_evt, pb_evt, (size_t)n * sizeof(double));
        row->store_us = store_pb;
    }

    const size_t nn = (size_t)n;
    row->fa_us = xs_median(fa, nn), row->fa_min = xs_min(fa, nn), row->fa_max = xs_max(fa, nn);
    row->fa_evt_us = xs_median(fa_evt, (size_t)n);
    double flops = 4.0 * c->seq * (double)c->seq * XS_ATTN_D * c->heads * (c->causal ? 0.5 : 1);
    row->fa_tflops = flops / (row->fa_us * 1e-6) / 1e12;
    row->serial_us = xs_median(se, nn), row->serial_min = xs_min(se, nn);
    row->serial_max = xs_max(se, nn);
    row->copy_us = xs_median(cp, (size_t)n);
    row->comm_ratio = row->copy_us / row->fa_us;
    row->pb_us = xs_median(pb, nn), row->pb_min = xs_min(pb, nn), row->pb_max = xs_max(pb, nn);
    row->pb_vis_us = xs_median(pb_evt, (size_t)n);
    row->fused_us = xs_median(fu, nn), row->fused_min = xs_min(fu, nn);
    row->fused_max = xs_max(fu, nn);
    row->fused_vis_us = xs_median(fu_evt, (size_t)n);
    row->pb_pred_us = row->fa_us + d_pb / 1e3;
    row->pred_us = row->fa_us + d_fu / 1e3;
    row->pred_err_pct = 100.0 * (row->pred_us - row->fused_us) / row->fused_us;
    /* hidden = (serial - fused) / (serial - fa) = 1 - (fused - fa) / (serial - fa), with both
     * differences taken per repetition (the runs of one repetition are back to back) and their
     * medians: a slow drift of the clock over the runs then cancels instead of landing in a
     * difference of a few percent of a long kernel */
    row->slice_us = row->link_us = NAN;
    if (row->split > 0) {
        double *d = pb_evt; /* reused: no longer needed */
        for (int j = 0; j < n; j++)
            d[j] = ls[j] - fa[j];
        row->slice_us = xs_median(d, (size_t)n);
        for (int j = 0; j < n; j++)
            d[j] = fu[j] - ls[j];
        row->link_us = xs_median(d, (size_t)n);
    }
    row->hidden_lo = INFINITY, row->hidden_hi = -INFINITY;
    for (int j = 0; j < n; j++) {
        fu[j] -= fa[j], se[j] -= fa[j];
        const double h = 100.0 * (1.0 - fu[j] / se[j]);
        row->hidden_lo = fmin(row->hidden_lo, h);
        row->hidden_hi = fmax(row->hidden_hi, h);
    }
    row->hidden_pct = 100.0 * (1.0 - xs_median(fu, (size_t)n) / xs_median(se, (size_t)n));
    row->speedup = row->serial_us / row->fused_us;
    if (c->pp) {
        /* each rank verified what its window received: the row is verified when all did; the
         * worst error and the slowest rank's medians (NaN sent as -1) */
        double g[6] = {ok ? 0.0 : 1.0, isnan(row->max_err) ? INFINITY : row->max_err,
                       row->fa_us, row->serial_us, row->pb_us, row->fused_us};
        for (int i = 2; i < 6; i++)
            g[i] = isnan(g[i]) ? -1.0 : g[i];
        XS_CHECK(xs_coll_max(c->pp->coll, g, 6));
        ok = g[0] == 0.0;
        row->max_err = g[1];
        for (int i = 0; i < 4; i++)
            row->rank_max_us[i] = g[2 + i] < 0 ? NAN : g[2 + i];
    }
    row->verified = ok;

    free(x); free(cta); free(tns); free(dur);
}

/* ---- report ---------------------------------------------------------------------------------- */

static const char csv_header[] =
    "seq,heads,head_dim,causal,peers,grid,tiles,comm_mb,fa_us,fa_min_us,fa_max_us,fa_evt_us,"
    "fa_tflops,copy_us,serial_us,serial_min_us,serial_max_us,pb_us,pb_min_us,pb_max_us,"
    "pb_pred_us,pb_vis_us,criterion_ok,split,fused_us,fused_min_us,fused_max_us,fused_vis_us,"
    "pred_us,pred_err_pct,store_us,hidden_pct,speedup,max_err,verified,order,comm_ratio,"
    "crit_peak_mb,crit_sync_mb,crit_keff,slice_us,link_us,hidden_lo_pct,hidden_hi_pct,couriers,"
    "courier_pace,kv_split,crit_held_us,crit_fluid_ok";

static void csv_row(FILE *f, const up_row *r)
{
    fprintf(f,
            "%d,%d,%d,%d,%d,%d,%d,%.4f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,"
            "%.2f,%.2f,%.2f,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%.2f,%.4f,%.3g,%d,%d,%.4f,"
            "%.4f,%.4f,%d,%.2f,%.2f,%.2f,%.2f,%d,%.3f,%d,%.3f,%d\n",
            r->seq, r->heads, XS_ATTN_D, r->causal, r->peers, r->grid, r->tiles, r->comm_mb,
            r->fa_us, r->fa_min, r->fa_max, r->fa_evt_us, r->fa_tflops, r->copy_us,
            r->serial_us, r->serial_min, r->serial_max, r->pb_us, r->pb_min, r->pb_max,
            r->pb_pred_us, r->pb_vis_us, r->criterion_ok, r->split, r->fused_us, r->fused_min,
            r->fused_max, r->fused_vis_us, r->pred_us, r->pred_err_pct, r->store_us,
            r->hidden_pct, r->speedup, r->max_err, r->verified, r->order, r->comm_ratio,
            r->crit_peak_mb, r->crit_sync_mb, r->crit_keff, r->slice_us, r->link_us,
            r->hidden_lo, r->hidden_hi, r->couriers, r->courier_pace, r->kv, r->crit_held_us,
            r->crit_fluid_ok);
}

static void table_header(void)
{
    printf("%6s %5s %2s %2s %8s %10s %6s %7s %10s %6s %10s %5s %10s %6s %10s %6s %7s %7s %3s\n",
           "seq", "heads", "c", "P", "comm", "fa", "spread", "fa", "serial", "spread", "pb",
           "plan", "fused", "spread", "pred", "err", "hidden", "serial/", "ok");
    printf("%6s %5s %2s %2s %8s %10s %6s %7s %10s %6s %10s %5s %10s %6s %10s %6s %7s %7s %3s\n",
           "", "", "", "", "MB", "us", "%", "TFLOP/s", "us", "%", "us", "", "us", "%", "us", "%",
           "%", "fused", "");
}

static double spread_pct(double med, double lo, double hi) { return 100.0 * (hi - lo) / med; }

static void table_row(const up_row *r)
{
    /* plan: s|e (snake | early order) and the split, e.g. "e16"; "s0" is piggyback; "c4" /
     * "ec4": four couriers, snake / early */
    char plan_s[32];
    xs_up_plan_name(r->order, r->split, r->couriers, r->kv, plan_s, sizeof plan_s);
    printf("%6d %5d %2d %2d %8.2f %10.1f %6.1f %7.1f %10.1f %6.1f %10.1f %5s %10.1f %6.1f "
           "%10.1f %+6.1f %7.1f %7.3f %3s\n",
           r->seq, r->heads, r->causal, r->peers, r->comm_mb, r->fa_us,
           spread_pct(r->fa_us, r->fa_min, r->fa_max), r->fa_tflops, r->serial_us,
           spread_pct(r->serial_us, r->serial_min, r->serial_max), r->pb_us, plan_s,
           r->fused_us, spread_pct(r->fused_us, r->fused_min, r->fused_max), r->pred_us,
           r->pred_err_pct, r->hidden_pct, r->speedup, r->verified ? "yes" : "NO");
    fflush(stdout);
}

/* "Communication and compute of the same size" (docs/UP.md): the serial all-to-all takes between
 * half and twice the attention, comm_ratio = copy_us / fa_us in [UP_SAME_LO, UP_SAME_HI], both
 * measured in the row. The acceptance row of a (heads, causal, peers) group is its shortest
 * swept sequence in that band (4096 included when swept); the speedup
 * target applies there. Next to it the summary prints the bound serial/fused can reach with
 * every byte hidden, 1 + min(r, 1/r) (r = comm_ratio: 1.5x at r = 0.5, 2x at r = 1), and, as a
 * second reading, the same rule over the issue's own sequences (>= UP_ISSUE_SEQ0) only. */
#define UP_ISSUE_SEQ0 8192
#define UP_SAME_LO 0.5
#define UP_SAME_HI 2.0
#define UP_SPEEDUP_TARGET 1.4
#define UP_HIDDEN_TARGET 90.0
#define UP_PRED_TOL_PCT 10.0

static int in_band(const up_row *r)
{
    return r->comm_ratio >= UP_SAME_LO && r->comm_ratio <= UP_SAME_HI;
}

/* The speedup target's rows among sequences >= seq0: per (heads, causal, peers) group the
 * shortest in the band. Prints one line per row when tag is non-NULL; returns the count and
 * *met those at or above the target. */
static int same_size_rows(const up_row *rows, int nrows, int seq0, const char *tag, int *met)
{
    int n = 0;
    *met = 0;
    for (int i = 0; i < nrows; i++) {
        const up_row *r = &rows[i];
        if (r->seq < seq0 || !in_band(r))
            continue;
        int shortest = 1;
        for (int j = 0; j < nrows; j++) {
            const up_row *q = &rows[j];
            if (q->heads == r->heads && q->causal == r->causal && q->peers == r->peers &&
                q->seq >= seq0 && q->seq < r->seq && in_band(q))
                shortest = 0;
        }
        if (!shortest)
            continue;
        n++;
        *met += r->speedup >= UP_SPEEDUP_TARGET;
        char pn[32];
        if (tag)
            printf("# summary: %s: seq %d heads %d causal %d peers %d: comm/compute %.2f "
                   "(bound %.2fx), serial/fused %.3fx (%s), hidden %.1f%% (%.1f..%.1f), plan "
                   "%s\n", tag, r->seq, r->heads, r->causal, r->peers, r->comm_ratio,
                   1.0 + fmin(r->comm_ratio, 1.0 / r->comm_ratio), r->speedup,
                   r->speedup >= UP_SPEEDUP_TARGET ? "met" : "below 1.4x", r->hidden_pct,
                   r->hidden_lo, r->hidden_hi,
                   xs_up_plan_name(r->order, r->split, r->couriers, r->kv, pn, sizeof pn));
    }
    return n;
}

static int summary(const up_row *rows, int nrows)
{
    double *sp = (double *)malloc((size_t)nrows * sizeof(double));
    int nok = 0, ncrit = 0, ncrit90 = 0, nresh = 0, nresh90 = 0, npb = 0, nerr = 0, npred = 0;
    int nacc = 0, nacc_met = 0;
    double worst_err = 0, min_hid_crit = INFINITY, min_hid_resh = INFINITY;
    double min_tf = INFINITY, max_tf = 0;
    char pn[32];
    for (int i = 0; i < nrows; i++) {
        const up_row *r = &rows[i];
        sp[i] = r->speedup;
        nok += r->verified;
        const int reshaped = r->split > 0 || r->order == XS_ATTN_ORDER_EARLY || r->couriers > 0;
        if (r->criterion_ok == 1) { /* the plan's hiding, whichever member it chose */
            ncrit++;
            ncrit90 += r->hidden_pct >= UP_HIDDEN_TARGET;
            min_hid_crit = fmin(min_hid_crit, r->hidden_pct);
            npb += !reshaped;
        } else {
            nresh++;
            nresh90 += r->hidden_pct >= UP_HIDDEN_TARGET;
            min_hid_resh = fmin(min_hid_resh, r->hidden_pct);
        }
        if (isfinite(r->pred_err_pct)) {
            npred++;
            nerr += fabs(r->pred_err_pct) <= UP_PRED_TOL_PCT;
            worst_err = fmax(worst_err, fabs(r->pred_err_pct));
        }
        min_tf = fmin(min_tf, r->fa_tflops);
        max_tf = fmax(max_tf, r->fa_tflops);
    }
    printf("# summary: %d rows, %d verified; serial/fused geomean %.3fx\n", nrows, nok,
           xs_geomean(sp, (size_t)nrows));
    /* the speedup target: per group, the shortest swept sequence in the band */
    nacc = same_size_rows(rows, nrows, 0, "same size", &nacc_met);
    printf("# summary: serial/fused >= %.1fx at the shortest sequence where comm/compute is in "
           "[%.1f, %.1f]: %d of %d rows\n", UP_SPEEDUP_TARGET, UP_SAME_LO, UP_SAME_HI, nacc_met,
           nacc);
    {
        int met2 = 0, n2 = same_size_rows(rows, nrows, UP_ISSUE_SEQ0, NULL, &met2);
        printf("# summary: the same rule over the issue's sequences only (>= %d): %d of %d rows "
               "(groups with no row in the band there have no target)\n", UP_ISSUE_SEQ0, met2,
               n2);
    }
    printf("# summary: criterion holds (per-CTA piggyback, fa's tile times): hidden >= 90%% in "
           "%d of %d rows "
           "(min %.1f%%; plan piggyback in %d of them)%s\n", ncrit90, ncrit,
           ncrit ? min_hid_crit : NAN, npb, ncrit ? "" : ": the criterion holds in no row");
    for (int i = 0; i < nrows; i++) {
        const up_row *r = &rows[i];
        if (r->criterion_ok == 1 && !(r->hidden_pct >= UP_HIDDEN_TARGET))
            printf("# summary:   hidden %.1f%% (%.1f..%.1f over repetitions): seq %d heads %d "
                   "causal %d peers %d (plan %s, comm/compute %.2f; fused - fa: slices "
                   "%.1f us + link %.1f us; piggyback %.1f us over fa)\n", r->hidden_pct,
                   r->hidden_lo, r->hidden_hi, r->seq, r->heads, r->causal, r->peers,
                   xs_up_plan_name(r->order, r->split, r->couriers, r->kv, pn, sizeof pn),
                   r->comm_ratio, r->slice_us, r->link_us, r->pb_us - r->fa_us);
    }
    printf("# summary: criterion fails: hidden >= 90%% in %d of %d rows (min %.1f%%)\n",
           nresh90, nresh, nresh ? min_hid_resh : NAN);
    /* the criterion against the piggyback kernel it speaks of: how much of the all-to-all the
     * measured pb run hides where the criterion holds and where it fails (and the same for the
     * fluid test) */
    for (int which = 0; which < 2; which++) {
        double *h[2] = {(double *)malloc((size_t)nrows * sizeof(double)),
                        (double *)malloc((size_t)nrows * sizeof(double))};
        if (!h[0] || !h[1]) {
            free(h[0]), free(h[1]);
            break;
        }
        int nh[2] = {0, 0};
        for (int i = 0; i < nrows; i++) {
            const up_row *r = &rows[i];
            const int ok = which ? r->crit_fluid_ok : r->criterion_ok;
            const double d = r->serial_us - r->fa_us;
            if (ok >= 0 && d > 0 && isfinite(r->pb_us))
                h[ok][nh[ok]++] = 100.0 * (r->serial_us - r->pb_us) / d;
        }
        printf("# summary: %s: piggyback (pb) hides median %.1f%% of the all-to-all in the %d "
               "rows where it holds, %.1f%% in the %d where it fails\n",
               which ? "fluid criterion of runs 5-10" : "criterion",
               nh[1] ? xs_median(h[1], (size_t)nh[1]) : NAN, nh[1],
               nh[0] ? xs_median(h[0], (size_t)nh[0]) : NAN, nh[0]);
        free(h[0]), free(h[1]);
    }
    printf("# summary: planner's predicted fused time within %.0f%% in %d of %d rows (worst "
           "%.1f%%)\n", UP_PRED_TOL_PCT, nerr, npred, worst_err);
    for (int i = 0; i < nrows; i++) {
        const up_row *r = &rows[i];
        if (isfinite(r->pred_err_pct) && fabs(r->pred_err_pct) > UP_PRED_TOL_PCT)
            printf("# summary:   off by %+.1f%%: seq %d heads %d causal %d peers %d (plan %s, "
                   "comm/compute %.2f)\n", r->pred_err_pct, r->seq, r->heads, r->causal,
                   r->peers, xs_up_plan_name(r->order, r->split, r->couriers, r->kv, pn, sizeof pn),
                   r->comm_ratio);
    }
    for (int kind = 0; kind < 2; kind++) { /* couriers, then KV splits */
        int cnt = 0;
        for (int i = 0; i < nrows; i++)
            cnt += kind ? rows[i].kv > 0 : rows[i].couriers > 0;
        printf("# summary: %s in %d of %d rows' plans\n", kind ? "KV split" : "couriers", cnt,
               nrows);
        for (int i = 0; i < nrows; i++) {
            const up_row *r = &rows[i];
            if (kind ? r->kv <= 0 : r->couriers <= 0)
                continue;
            char pace[32] = "";
            if (!kind)
                snprintf(pace, sizeof pace, " at %.1f B/ns", r->courier_pace);
            printf("# summary:   %s%s: seq %d heads %d causal %d peers %d: fused %.1f us (pred "
                   "%.1f), fa %.1f, piggyback %.1f, serial %.1f: hidden %.1f%% (%.1f..%.1f), "
                   "serial/fused %.3fx, comm/compute %.2f\n",
                   xs_up_plan_name(r->order, r->split, r->couriers, r->kv, pn, sizeof pn), pace,
                   r->seq, r->heads, r->causal, r->peers, r->fused_us, r->pred_us, r->fa_us,
                   r->pb_us, r->serial_us, r->hidden_pct, r->hidden_lo, r->hidden_hi,
                   r->speedup, r->comm_ratio);
        }
    }
    printf("# summary: attention %.1f..%.1f TFLOP/s (scripts/sdpa_ref.py: the reference)\n",
           min_tf, max_tf);
    free(sp);
    if (nok != nrows) {
        printf("# bench up FAILED: %d of %d rows not verified\n", nrows - nok, nrows);
        return 1;
    }
    printf("# bench up OK\n");
    return 0;
}

/* ---- entry -------------------------------------------------------------------------------- */

/* Stop between configurations after an interrupt (xstage_sigint.h); -g: when any rank was
 * interrupted, all stop at the same configuration (sticky in up_stopped). */
static int up_stopped;
static int up_stop(up_peer *pp)
{
    double v = xs_interrupted() || up_stopped;
    if (pp)
        XS_CHECK(xs_coll_max(pp->coll, &v, 1));
    return up_stopped = v != 0;
}

/* Device buffers sized for the largest configuration (max_seq x max_heads). */
static void bufs_open(up_bufs *B, const up_opts *o, const xs_gpu_info *gi, int max_seq,
                      int max_heads)
{
    memset(B, 0, sizeof *B);
    size_t nbytes = (size_t)max_seq * max_heads * XS_ATTN_ROW_BYTES;
    int max_tiles = xs_attn_tiles(max_seq, max_heads);
    XS_CHECK_CU(cudaStreamCreateWithFlags(&B->stream, cudaStreamNonBlocking));
    for (int i = 0; i < 3; i++)
        XS_CHECK_CU(cudaEventCreate(&B->ev[i]));
    XS_CHECK_CU(cudaMalloc(&B->q, nbytes));
    XS_CHECK_CU(cudaMalloc(&B->k, nbytes));
    XS_CHECK_CU(cudaMalloc(&B->v, nbytes));
    XS_CHECK_CU(cudaMalloc(&B->o, nbytes));
    B->flush_bytes = 2 * gi->l2_bytes > ((size_t)64 << 20) ? 2 * gi->l2_bytes
                                                             : (size_t)64 << 20;
    XS_CHECK_CU(cudaMalloc(&B->flush, B->flush_bytes));
    XS_CHECK_CU(cudaMalloc((void **)&B->cta_ns, (size_t)gi->sm_count * 3 * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMalloc((void **)&B->tile_ns, (size_t)max_tiles * sizeof(uint64_t)));
    if (o->couriers != 0) {
        /* couriers: a staging buffer the size of O, and their flags (zeros: never a signal) */
        XS_CHECK_CU(cudaMalloc(&B->stage, nbytes));
        XS_CHECK_CU(cudaMemsetAsync(B->stage, 0, nbytes, B->stream));
        const size_t nsync = ((size_t)max_tiles + gi->sm_count) * sizeof(uint64_t);
        XS_CHECK_CU(cudaMalloc((void **)&B->sync, nsync));
        XS_CHECK_CU(cudaMemsetAsync(B->sync, 0, nsync, B->stream));
    }
    XS_CHECK_CU(cudaMalloc((void **)&B->status, sizeof(xs_devstatus)));
    XS_CHECK_CU(cudaMalloc((void **)&B->bad, sizeof(unsigned long long)));
    XS_CHECK_CU(cudaMalloc((void **)&B->rows, (size_t)2 * o->samples * sizeof(int)));
    XS_CHECK_CU(cudaMalloc((void **)&B->ref, (size_t)o->samples * XS_ATTN_D * sizeof(float)));
    XS_CHECK_CU(cudaMalloc((void **)&B->got, (size_t)o->samples * XS_ATTN_D * sizeof(float)));
    /* the output buffer is compared against windows: never leave it uninitialised */
    XS_CHECK_CU(cudaMemsetAsync(B->o, 0, nbytes, B->stream));
}

static void bufs_close(up_bufs *B)
{
    cudaFree(B->q); cudaFree(B->k); cudaFree(B->v); cudaFree(B->o); cudaFree(B->flush);
    cudaFree(B->cta_ns); cudaFree(B->tile_ns); cudaFree(B->status); cudaFree(B->bad);
    cudaFree(B->stage); cudaFree(B->sync);
    xs_attn_kvbuf_free(&B->kv);
    cudaFree(B->kv_tns);
    cudaFree(B->rows); cudaFree(B->ref); cudaFree(B->got);
    for (int i = 0; i < 3; i++)
        cudaEventDestroy(B->ev[i]);
    cudaStreamDestroy(B->stream);
}

extern "C" int xs_bench_up(int argc, char **argv)
{
    up_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    xs_profile prof;
    if (xs_profile_args_resolve(&o.common.pa, &prof) != XS_OK)
        return xs_cli_fail();
    /* -g N, N > 1: one rank per GPU (xs_bench_launch, shared with bench ep|tp); this process
     * either launched them and reports their status, or is one of them */
    const int real = o.common.gpus_set && o.common.gpus > 1;
    int me = 0, nranks = 1;
    if (real) {
        int ec = 0, have = 0, l = xs_bench_launch(o.common.gpus, &ec);
        if ((l = xs_launch_exit(l, ec)) >= 0)
            return l;
        if (xs_rank_env(&me, &nranks, NULL, &have) != XS_OK)
            return xs_cli_fail();
    }
    xs_gpu_info gi;
    if (xs_gpu_open(o.common.device, &gi) != XS_OK) /* a launched rank: XS_DEVICE */
        return xs_cli_fail();
    if (o.couriers >= gi.sm_count)
        return xs_cli_failf("--couriers %d: leaves no SM to compute (%d SMs)", o.couriers,
                            gi.sm_count);
    xs_coll *coll = NULL;
    if (real) {
        /* the flag slots and the checks assume one grid on every rank: equal SM counts */
        double sm[2] = {(double)gi.sm_count, -(double)gi.sm_count};
        if (xs_coll_open(&coll) != XS_OK || xs_coll_max(coll, sm, 2) != XS_OK) {
            xs_coll_close(coll, 1);
            return xs_cli_fail();
        }
        if (sm[0] != -sm[1]) {
            xs_coll_close(coll, 1);
            return xs_cli_failf("bench up: the ranks' GPUs have %g to %g SMs; -g needs one "
                                "kind of GPU (one persistent grid)", -sm[1], sm[0]);
        }
    }

    FILE *csv = NULL;
    /* files: rank 0 only (the others' results reach it through the collectives) */
    if (me == 0 && o.csv && !(csv = fopen(o.csv, "w"))) {
        xs_coll_close(coll, 1);
        return xs_cli_failf("--csv %s: cannot open for writing", o.csv);
    }
    xs_gpu_report_header(stdout, &gi, argc, argv);
    if (real)
        printf("# ranks: %d processes, rank r on GPU r, P = %d real peers: every rank runs the "
               "same problem, shard r of its output to GPU (me + r) %% P, into the source's "
               "region and flag slot of that GPU's NCCL symmetric window (LSA pointers); serial: "
               "attention, then one NCCL group of send/recv; every rank verifies every byte and "
               "signal its window received; times are rank 0's (the slowest rank's medians "
               "under each row)\n", nranks, nranks);
    printf("# profile: %s R %.4g B/ns, Q %.6g B, Q/producer %.6g B, queue %.6g B, reserve %.6g "
           "B, skew %.3g, chunk %.6g B, r %.4g B/ns, o %.4g ns%s; Q(%d) = %.6g B\n",
           o.common.pa.file ? o.common.pa.file : "embedded", prof.drain_bytes_per_ns, prof.capacity_bytes,
           prof.capacity_bytes_per_producer, prof.queue_bytes_per_producer,
           prof.reserve_bytes_per_producer, prof.arbitration_skew, prof.chunk_bytes,
           prof.issue_bytes_per_ns, prof.issue_overhead_ns,
           prof.provisional ? " (provisional)" : "", gi.sm_count, xs_capacity(&prof, gi.sm_count));
    if (o.slice_ns > 0)
        printf("# model: %.4g ns per output slice of the busiest CTA (--slice-ns: the kernel's "
               "own cost of a split)\n", o.slice_ns);
    {
        const double ld = o.load_drain > 0 ? o.load_drain : prof.drain_under_load_bytes_per_ns;
        if (ld > 0)
            printf("# model: the fused kernel's stores drain at %.4g B/ns (%s: stores under L2 "
                   "load), %.3f x R\n", ld, o.load_drain > 0 ? "--load-drain" : "the profile's "
                   "drain_under_load_bytes_per_ns", ld / prof.drain_bytes_per_ns);
    }
    printf("# layout [seq, heads, 128] bf16; BLOCK_M %d, BLOCK_N %d, %d warps, persistent grid "
           "= min(tiles, %d SMs); tolerance %.0e + %.0e|ref|\n", XS_ATTN_BM, XS_ATTN_BN,
           XS_ATTN_WARPS, gi.sm_count, UP_ATOL, UP_RTOL);
    if (o.couriers < 0)
        printf("# couriers: C = 4 and 8 in the planner's family");
    else if (o.couriers > 0)
        printf("# couriers: C = %d forced", o.couriers);
    if (o.couriers != 0)
        printf(", paced at %.2f x R = %.1f B/ns in all (0: unpaced); staged in a buffer apart "
               "from O (docs/UP.md \"Couriers\")\n", o.courier_pace,
               o.courier_pace * prof.drain_bytes_per_ns);
    if (csv) {
        xs_gpu_report_header(csv, &gi, argc, argv);
        fprintf(csv, "%s\n", csv_header);
    }

    int max_seq = 0, max_heads = 0;
    for (int i = 0; i < o.nseq; i++) max_seq = o.seq[i] > max_seq ? o.seq[i] : max_seq;
    for (int i = 0; i < o.nheads; i++) max_heads = o.heads[i] > max_heads ? o.heads[i] : max_heads;

    up_bufs B;
    bufs_open(&B, &o, &gi, max_seq, max_heads);

    int nrows_max = o.nseq * o.nheads * o.npeers * (o.causal_hi - o.causal_lo + 1);
    up_row *rows = (up_row *)calloc((size_t)nrows_max, sizeof(up_row));
    if (!rows)
        return xs_cli_failf("out of host memory for %d rows", nrows_max);
    int nrows = 0;
    table_header();
    for (int pi = 0; pi < o.npeers && !xs_interrupted(); pi++) { /* xstage_sigint.h */
        const int P = o.peers[pi];
        xs_win_opts wo;
        memset(&wo, 0, sizeof wo);
        wo.target = real ? XS_TARGET_PEER : XS_TARGET_VIRTUAL;
        wo.virtual_peers = P;
        const size_t region = (size_t)(max_seq / P) * max_heads * XS_ATTN_ROW_BYTES;
        /* one per CTA of the persistent grid; -g: a region and a slot of flags per source */
        wo.bytes = real ? (size_t)P * region : region;
        wo.nflags = real ? P * gi.sm_count : gi.sm_count;
        wo.device = o.common.device;
        xs_winset *ws = NULL;
        XS_CHECK(xs_win_open(&wo, &ws));
        const xs_wintab *tab = xs_win_table(ws);
        if (tab->nranks != P || (real && tab->rank != me)) {
            fprintf(stderr, "xstage: error: asked for %d %s peers, the window table has "
                    "%d ranks\n", P, real ? "real" : "virtual", tab->nranks);
            exit(1);
        }
        up_peer peer, *pp = NULL;
        if (real) {
            memset(&peer, 0, sizeof peer);
            pp = &peer, pp->ws = ws, pp->coll = coll;
            pp->me = tab->rank, pp->n = tab->nranks;
            xs_up_peer_tables(tab, region, gi.sm_count, &pp->send, &pp->own);
        }
        for (int hi = 0; hi < o.nheads; hi++)
            for (int si = 0; si < o.nseq; si++)
                for (int cz = o.causal_lo; cz <= o.causal_hi && !up_stop(pp); cz++) {
                    up_cfg c;
                    memset(&c, 0, sizeof c);
                    c.seq = o.seq[si], c.heads = o.heads[hi], c.causal = cz, c.peers = P;
                    c.tab = pp ? &pp->send : tab;
                    c.own = pp ? &pp->own : tab;
                    c.pp = pp;
                    run_config(&B, &o, &prof, &gi, &c, &rows[nrows]);
                    table_row(&rows[nrows]);
                    if (pp)
                        printf("#   ranks: slowest rank's medians, us: fa %.1f, serial %.1f, pb "
                               "%.1f, fused %.1f\n", rows[nrows].rank_max_us[0],
                               rows[nrows].rank_max_us[1], rows[nrows].rank_max_us[2],
                               rows[nrows].rank_max_us[3]);
                    if (csv) {
                        csv_row(csv, &rows[nrows]);
                        fflush(csv);
                    }
                    nrows++;
                }
        xs_win_close(ws);
    }
    /* stopped early: no verdict (-g: every rank stopped at the same configuration) */
    const int intr = (xs_interrupted() || up_stopped) && nrows < nrows_max;
    rc = intr ? 1 : summary(rows, nrows);
    if (csv) {
        fprintf(csv, "# %s\n", intr ? "INTERRUPTED: partial results"
                               : rc ? "bench up FAILED" : "bench up OK");
        fclose(csv);
    }
    free(rows);
    bufs_close(&B);
    xs_coll_close(coll, intr);
    if (intr)
        return xs_cli_failf("interrupted by %s after %d of %d configurations%s",
                            xs_interrupt_name(), nrows, nrows_max,
                            o.csv ? "; partial CSV marked" : "");
    return rc;
}
