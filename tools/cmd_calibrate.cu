// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_calibrate.cu - `xstage calibrate`: the microbenchmarks of the X-Stage, each a schedule run
 * by the replay kernel, then the fit (src/fit.c) and the profile.
 *
 *   (a) drain     periodic zero-gap bursts; several K/B splits of one volume side by side
 *   (b) issue     unconstrained bursts and the large-gap plateau
 *   (c) capacity  isolated bursts, volume sweeps for K = 1, 2, 4, every 8 up to all SMs
 *   (d) local     the same loops into local HBM (--target local, the control)
 *   (e) latency   issue-to-visibility round trip seen by the host (host target)
 *   drift         free-running trains above the headroom (fits chunk_bytes)
 *   store bw      a plain large zero-copy store kernel, for comparison with R
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_outfile.h"
#include "xstage_cuda.h"
#include "xstage_launch.h"
#include "xstage_replay.h"
#include "xstage_sigint.h"
#include "xstage_win.h"

typedef struct {
    xs_replayer *rp;
    xs_samples *samples;
    uint32_t seed;
    int runs;
    double bytes;
} calib_ctx;

static xs_status add_samples(calib_ctx *c, const char *exp, const xs_schedule *s, int rep,
                             const xs_result *r)
{
    for (int i = 0; i < s->nrows; i++) {
        xs_sample_row x;
        memset(&x, 0, sizeof x);
        snprintf(x.experiment, sizeof x.experiment, "%s", exp);
        x.producers = s->rows[i].producers;
        x.bytes_per_producer = s->rows[i].bytes_per_producer;
        x.gap_ns = s->rows[0].gap_ns;
        x.rows = s->nrows;
        x.rep = rep;
        x.row = i;
        x.issue_med_ns = r->rows[i].issue_med_ns;
        x.issue_max_ns = r->rows[i].issue_max_ns;
        x.end_ns = r->rows[i].end_ns;
        XS_TRY(xs_samples_add(c->samples, &x));
    }
    return XS_OK;
}

/* Run `rows` equal rows (the last without a gap), `reps` times; record every row. */
static xs_status train(calib_ctx *c, const char *exp, int k, int64_t b, double gap, int rows,
                       int reps, int sync)
{
    xs_schedule s = {0};
    for (int i = 0; i < rows; i++)
        XS_TRY(xs_schedule_append(&s, k, b, i + 1 < rows ? gap : 0));
    xs_status st = XS_OK;
    for (int rep = 0; rep < reps && st == XS_OK; rep++) {
        if (xs_interrupted()) {
            st = xs_interrupt_err("%d calibration runs; no profile or samples written", c->runs);
            break;
        }
        xs_result r;
        xs_replay_stats rs;
        st = xs_replay_run(c->rp, &s, sync, c->seed++, &r, &rs);
        if (st != XS_OK)
            break;
        c->runs++;
        c->bytes += rs.bytes;
        st = add_samples(c, exp, &s, rep, &r);
        xs_result_free(&r);
    }
    xs_schedule_free(&s);
    return st;
}

static double med_of(const xs_samples *s, const char *exp, int k, int64_t b, int row,
                     int use_max, double *spread)
{
    double v[256];
    int n = 0;
    for (size_t i = 0; i < s->n && n < 256; i++) {
        const xs_sample_row *x = &s->v[i];
        if (!strcmp(x->experiment, exp) && x->producers == k && x->bytes_per_producer == b &&
            x->row == row)
            v[n++] = use_max ? x->issue_max_ns : x->issue_med_ns;
    }
    if (spread)
        *spread = n ? (xs_max(v, (size_t)n) - xs_min(v, (size_t)n)) : NAN;
    return n ? xs_median(v, (size_t)n) : NAN;
}

/* A signal after the last training run: one line, no report, no files (xstage_sigint.h). */
static int interrupted_exit(int runs, xs_samples *smp, xs_replayer *rp)
{
    xs_interrupt_err("%d calibration runs; no profile or samples written", runs);
    xs_cli_fail();
    xs_samples_free(smp);
    xs_replayer_close(rp);
    return 1;
}

static void usage(void)
{
    printf("usage: xstage calibrate [--target host|local] [--out FILE] [--samples FILE] [--quick]\n"
           "Measure the X-Stage of one path on this GPU and fit a profile: drain rate R from\n"
           "periodic zero-gap bursts (several K/B splits), issue rate r and overhead o from\n"
           "unconstrained bursts and the large-gap plateau, capacity Q(K) from isolated bursts\n"
           "(K = 1, 2, 4, every 8 to all SMs), chunk_bytes from free-running trains; plus a plain\n"
           "zero-copy store kernel and (host) the visibility round trip. Every byte verified.\n\n"
           "  -t, --target T        host (pinned host memory over PCIe, default), local (HBM),\n"
           "                        peer (NCCL windows; one rank: its own window) or virtual\n"
           "  --virtual-peers N     with --target virtual: 1 local + N-1 host windows\n"
           "  -g, --gpus N          with --target peer: N ranks, one process per GPU\n"
           "  -o, --out FILE        write the fitted profile (JSON)\n"
           "  --samples FILE        write the raw samples (CSV), the fit's input\n"
           "  --out-published FILE  also write the fit restricted to the published model (no\n"
           "                        producer queue, no reserve): the embedded default's form\n"
           "  --quick               fewer repetitions and sizes (< 15 s)\n"
           "  --volumes LIST        the capacity sweep's burst volumes (all K producers\n"
           "                        together; K/M suffixes, 64K..64M, at most 24), default\n"
           "                        512K, 1M to 4M in quarter octaves, 5.66M, 8M, 16M;\n"
           "                        with --quick 1M,4M,16M\n"
           "  -d, --device N        CUDA device (default 0)\n"
           "  --window SIZE         destination window, default 256M\n"
           "  --timeout S           bound on one run, seconds (default 30)\n"
           "  --dest keep|flush|dirty  host windows after each run's verification: lines left\n"
           "                        in the CPU caches (default), flushed out, or rewritten\n"
           "  --fixed-offsets       every run stores at the window's start; default: each run\n"
           "                        starts where the last one's footprint ended, round the window\n"
           "  --max-skew NS         rerun a run whose producers left the common start more\n"
           "                        than NS apart (up to 8 attempts; default 128, 0 keeps all)\n"
           "  --sms spread|LIST     producer p on the p-th SM of the even SMs then the odd ones\n"
           "                        (spread: over every GPC and both halves of the chip) or of\n"
           "                        LIST; default: where the block scheduler puts CTA p\n"
           "  --load-probe          also (f): the store kernel's rate while its SMs run other\n"
           "                        memory traffic (HBM, L2); reported, not fitted; the L2\n"
           "                        rate goes into the profile (drain_under_load_bytes_per_ns)\n"
           "  --peer-dests all|one  with -g N: producer p stores to the other ranks in turn (all,\n"
           "                        default: all-to-all traffic) or every producer to the next\n"
           "                        rank (one destination); with N = 2 both are the one peer\n");
}

/* The command line of calibrate. */
typedef struct {
    xs_replay_opts ro;
    const char *out, *samples_out, *out_pub, *sms_spec; /* files to write; --sms */
    int quick, gpus, load_probe, device_set;
    int vols[24], nvols; /* the capacity sweep's volumes, bytes; 0: the default */
} calib_args;

/* Parse calibrate's options into *a: -1 to go on, otherwise the exit status (--help: 0). */
static int calib_parse(int argc, char **argv, calib_args *a)
{
    static const struct option lo[] = {
        {"target", required_argument, 0, 't'}, {"out", required_argument, 0, 'o'},
        {"samples", required_argument, 0, 's'}, {"quick", no_argument, 0, 'q'},
        {"out-published", required_argument, 0, 'P'},
        {"device", required_argument, 0, 'd'}, {"window", required_argument, 0, 'W'},
        {"timeout", required_argument, 0, 'T'}, {"help", no_argument, 0, 'h'},
        {"gpus", required_argument, 0, 'g'}, {"virtual-peers", required_argument, 0, 'V'},
        {"dest", required_argument, 0, 'D'}, {"max-skew", required_argument, 0, 'S'},
        {"load-probe", no_argument, 0, 'L'}, {"peer-dests", required_argument, 0, 'E'},
        {"sms", required_argument, 0, 'M'}, {"volumes", required_argument, 0, 'U'},
        {"fixed-offsets", no_argument, 0, 'F'},
        {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->ro.target = XS_TARGET_HOST;
    a->ro.window_bytes = 256u << 20;
    a->ro.timeout_s = 30;
    a->ro.max_skew_ns = XS_REPLAY_MAX_SKEW_NS;
    a->gpus = 1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:o:d:g:h", lo, NULL)) != -1) {
        switch (c) {
        case 't':
            if (xs_target_parse(optarg, &a->ro.target) != XS_OK)
                return xs_cli_fail();
            break;
        case 'g': {
            long v;
            if (xs_parse_int("--gpus", optarg, 1, XS_MAX_RANKS, &v) != XS_OK)
                return xs_cli_fail();
            a->gpus = (int)v;
            break;
        }
        case 'V': {
            long v;
            if (xs_parse_int("--virtual-peers", optarg, 1, XS_MAX_RANKS, &v) != XS_OK)
                return xs_cli_fail();
            a->ro.virtual_peers = (int)v;
            break;
        }
        case 'o': a->out = optarg; break;
        case 's': a->samples_out = optarg; break;
        case 'P': a->out_pub = optarg; break;
        case 'q': a->quick = 1; break;
        case 'd': {
            long v;
            if (xs_parse_int("--device", optarg, 0, 63, &v) != XS_OK)
                return xs_cli_fail();
            a->ro.device = (int)v;
            a->device_set = 1;
            break;
        }
        case 'W': {
            int64_t v;
            if (xs_parse_size("--window", optarg, &v) != XS_OK)
                return xs_cli_fail();
            if (v < (64 << 20))
                return xs_cli_failf("--window %s: at least 64M", optarg);
            a->ro.window_bytes = (size_t)v;
            break;
        }
        case 'T':
            if (xs_parse_double("--timeout", optarg, 1, 3600, &a->ro.timeout_s) != XS_OK)
                return xs_cli_fail();
            break;
        case 'L': a->load_probe = 1; break;
        case 'E':
            if (!strcmp(optarg, "one"))
                a->ro.one_dest = 1;
            else if (!strcmp(optarg, "all"))
                a->ro.one_dest = 0;
            else
                return xs_cli_failf("--peer-dests '%s': expected all or one", optarg);
            break;
        case 'S':
            if (xs_parse_double("--max-skew", optarg, 0, 1e6, &a->ro.max_skew_ns) != XS_OK)
                return xs_cli_fail();
            break;
        case 'D':
            if (xs_dest_state_parse(optarg, &a->ro.dest) != XS_OK)
                return xs_cli_failf("--dest: %s", xs_errmsg());
            break;
        case 'M':
            if (xs_replay_sms_check(optarg) != XS_OK)
                return xs_cli_fail();
            a->sms_spec = optarg;
            break;
        case 'F': a->ro.fixed_offsets = 1; break;
        case 'U':
            if (xs_parse_list("--volumes", optarg, 1, 65536, 64L << 20, a->vols,
                              (int)(sizeof a->vols / sizeof a->vols[0]), &a->nvols) != XS_OK)
                return xs_cli_fail();
            break;
        case 'h': usage(); return 0;
        default: return xs_cli_badopt("calibrate", "t:o:d:g:h", argc, argv);
        }
    }
    if (optind < argc)
        return xs_cli_failf("calibrate: unexpected argument '%s'", argv[optind]);
    if (a->ro.target == XS_TARGET_VIRTUAL && a->ro.virtual_peers < 1)
        return xs_cli_failf("calibrate: --target virtual needs --virtual-peers N");
    if (a->gpus > 1 && a->ro.target != XS_TARGET_PEER)
        return xs_cli_failf("calibrate: --gpus %d needs --target peer", a->gpus);
    if (a->gpus > 1 && a->device_set)
        return xs_cli_failf("calibrate: --gpus %d cannot be combined with --device (rank r runs on "
                            "GPU r)", a->gpus);
    if (a->sms_spec && a->gpus > 1)
        return xs_cli_failf("calibrate: --sms with --gpus %d: one rank only", a->gpus);
    return -1;
}

/* The unconstrained issue sizes of (b), shared by the runs and the report. */
static const int64_t issue_b[] = {256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};

/* Bytes of one row of the drain experiment (a): every SM's 32 KiB. */
static int64_t drain_row_bytes(int sms) { return (int64_t)sms * 32768; }

/* The capacity sweep's producer counts: 1, 2, 4, every multiple of 8 below sms, and sms. Returns
 * the count (at most XS_CAL_MAX_KS). */
enum { XS_CAL_MAX_KS = 32, XS_CAL_STEP_K = 8 };
static int calib_capacity_ks(int sms, int *ks)
{
    int n = 0;
    for (int k = 1; k < XS_CAL_STEP_K && k < sms; k *= 2)
        ks[n++] = k;
    for (int k = XS_CAL_STEP_K; k < sms && n < XS_CAL_MAX_KS - 1; k += XS_CAL_STEP_K)
        ks[n++] = k;
    ks[n++] = sms;
    return n;
}

/* Repetitions of each capacity point, so that the sweep's cost is bounded by construction: at
 * most 48 sweeps of the volume list in all (24 with --quick), at most 4 (2 with --quick) per
 * point. The powers-of-two grid it replaced ran 8 K x 4 = 32 sweeps (8 x 2 = 16 quick); every
 * 8 producers on 132 SMs is 20 K: 2 repetitions (40 sweeps), quick 1 (20). */
static int calib_capacity_reps(int nk, int quick)
{
    const int budget = quick ? 24 : 48, most = quick ? 2 : 4;
    int r = budget / (nk > 0 ? nk : 1);
    return r < 1 ? 1 : r > most ? most : r;
}

/* The training runs (b), (a), (c) and drift into cx->samples, with a preliminary fit into *p
 * after (a) (r, o and R size the later steps). */
static xs_status calib_train_all(calib_ctx *cx, calib_args *a, int sms, xs_profile *p,
                                 xs_fit_report *fr)
{
    xs_status st = XS_OK;
    const int reps = a->quick ? 2 : 4;
    /* (b) issue: unconstrained bursts (one and four producers, every size), and the large-gap
     * plateau of all SMs (each burst well under the headroom, gap long enough to drain) */
    for (int i = 0; i < 9 && st == XS_OK; i++)
        st = train(cx, "issue", 1, issue_b[i], 0, 1, reps, 0);
    for (int i = 0; i < 6 && st == XS_OK; i++)
        st = train(cx, "issue", 4, issue_b[i], 0, 1, reps, 0);
    /* long single-producer bursts: one producer issues below R, so these are unconstrained too
     * and pin the steady issue rate */
    st = st == XS_OK ? train(cx, "issue", 1, 262144, 0, 1, reps, 0) : st;
    st = st == XS_OK ? train(cx, "issue", 1, 1048576, 0, 1, reps, 0) : st;
    for (int i = 3; i < 6 && st == XS_OK; i++) {
        double v = (double)sms * issue_b[i];
        st = train(cx, "issue", sms, issue_b[i], 3 * v / p->drain_bytes_per_ns + 5000, 4,
                   a->quick ? 1 : 2, 0);
    }
    /* (a) drain: one volume per row, several K/B splits side by side; synchronised rows, so
     * that each row's end is the whole grid's and the period of the second half is V/R */
    const int64_t vrow = drain_row_bytes(sms);
    static const int split_div[] = {1, 2, 4, 8};
    for (int i = 0; i < 4 && st == XS_OK; i++) {
        int k = sms / split_div[i];
        int64_t b = (vrow / k) / 16 * 16;
        st = train(cx, "drain", k, b, 0, 16, a->quick ? 1 : 2, 1);
    }
    /* preliminary r, o and R for the steps below: the fit sets them in order and stops at the
     * stage step, whose samples do not exist yet (so its error is expected and ignored) */
    if (st == XS_OK)
        (void)xs_fit_profile(cx->samples, p, fr);
    /* (c) capacity: isolated bursts, volume sweeps per K. The default is dense where the
     * bursts of every K start to stall (1-4 MiB on the H200 host path): there the time of a
     * burst turns on Q(K) (a burst at 1.3 Q stalls for 0.3 Q / R, so 5 % of Q is 17 % of its
     * time), and the fit sees the knee of each K at 9 volumes instead of 3 */
    static const double dense[] = {0.5, 1, 1.1892, 1.4142, 1.6818, 2, 2.3784, 2.8284, 3.3636,
                                   4, 5.6569, 8, 16};
    static const double brief[] = {1, 4, 16};
    if (a->nvols == 0) {
        const double *d = a->quick ? brief : dense;
        a->nvols = a->quick ? (int)(sizeof brief / sizeof brief[0])
                      : (int)(sizeof dense / sizeof dense[0]);
        for (int j = 0; j < a->nvols; j++)
            a->vols[j] = (int)(d[j] * 1048576);
    }
    /* per K: 1, 2, 4, then every 8 producers up to all SMs, so that Q(K) is sampled at the
     * producer counts schedules use (validate's 24 and 96 among them) rather than interpolated
     * between powers of two */
    int ks[XS_CAL_MAX_KS], nk = calib_capacity_ks(sms, ks);
    const int creps = calib_capacity_reps(nk, a->quick);
    for (int i = 0; i < nk && st == XS_OK; i++) {
        const int k = ks[i];
        for (int j = 0; j < a->nvols && st == XS_OK; j++) {
            int64_t b = ((int64_t)a->vols[j] / k) / 16 * 16;
            if (b < 16)
                continue;
            st = train(cx, "capacity", k, b, 0, 1, creps, 0);
        }
    }
    /* drift: trains far above the headroom with enough work between bursts to average under
     * R (1.25 V/R), so that free-running producers desynchronise */
    if (st == XS_OK) {
        double rr = p->drain_bytes_per_ns > 0 ? p->drain_bytes_per_ns : 50;
        int64_t b1 = 65536, b2 = 131072;
        st = train(cx, "drift", sms, b1, 1.25 * sms * b1 / rr, 6, a->quick ? 1 : 2, 0);
        if (st == XS_OK)
            st = train(cx, "drift", sms / 2, b2, 1.25 * (sms / 2) * b2 / rr, 6, a->quick ? 1 : 2,
                       0);
    }
    return st;
}

/* What calibrate measures beside the training runs: reported, and R's comparisons. */
typedef struct {
    double bw_med, bw_min, bw_max; /* plain store kernel (GB/s) */
    double nccl_gbps;              /* N > 1: NCCL's all-to-all per GPU (GB/s) */
    double ld_med[3], ld_min[3], ld_max[3]; /* (f) drain under load none/hbm/l2 (GB/s) */
    double vis_med[4], vis_p90[4]; /* (e) visibility round trip per vis_b size (ns) */
} calib_extra;

/* The sizes of the visibility round trip (e). */
static const size_t vis_b[] = {16, 4096, 65536, 1048576};

/* The plain store kernel, NCCL's all-to-all (N > 1), the drain under load (--load-probe) and the
 * visibility round trip (host target), in that order; stops at the first failure. */
static xs_status calib_extras(xs_replayer *rp, const calib_args *a, int nranks, calib_extra *x)
{
    const int quick = a->quick;
    for (int i = 0; i < 3; i++)
        x->ld_med[i] = x->ld_min[i] = x->ld_max[i] = NAN;
    for (int i = 0; i < 4; i++)
        x->vis_med[i] = x->vis_p90[i] = NAN;
    x->bw_med = x->bw_min = x->bw_max = x->nccl_gbps = NAN;
    /* plain store kernel, same window, same run */
    XS_TRY(xs_replay_store_bw(rp, a->ro.window_bytes, quick ? 3 : 5, &x->bw_med, &x->bw_min,
                              &x->bw_max));
    /* N > 1: NCCL's own all-to-all in the same run, R's comparison (docs/TRANSPORT.md) */
    if (nranks > 1) {
        xs_coll *coll = NULL;
        xs_status cs = xs_coll_open(&coll);
        if (cs == XS_OK)
            cs = xs_coll_alltoall_bw(coll, 1u << 20, NULL);
        if (cs == XS_OK)
            cs = xs_coll_alltoall_bw(coll, 32u << 20, &x->nccl_gbps);
        if (coll)
            xs_coll_close(coll, cs != XS_OK);
        XS_TRY(cs);
    }
    /* (f) drain under load (--load-probe): reported next to R, not fitted */
    for (int l = 0; a->load_probe && l < 3; l++)
        XS_TRY(xs_replay_store_bw_load(rp, a->ro.window_bytes, l, quick ? 3 : 5, &x->ld_med[l],
                                       &x->ld_min[l], &x->ld_max[l]));
    /* (e) visibility round trip (host) */
    if (a->ro.target == XS_TARGET_HOST)
        for (int i = 0; i < 4; i++)
            XS_TRY(xs_replay_visibility(rp, vis_b[i], quick ? 50 : 200, &x->vis_med[i],
                                        &x->vis_p90[i]));
    return XS_OK;
}

/* The report: each experiment's table next to the fitted model, then the fit's notes. */
static void calib_report(const calib_args *a, const xs_samples *smp, const xs_profile *p,
                         const xs_fit_report *fr, int sms, int nranks, const calib_extra *x)
{
    const int64_t vrow = drain_row_bytes(sms);
    printf("\n## (b) issue: T = o + [B - b]+/r on unconstrained bursts (%d samples)\n",
           fr->n_issue);
    printf("%10s %10s %14s %14s %10s\n", "producers", "bytes", "issue_med_ns", "model_ns", "resid");
    for (int i = 0; i < 9; i++) {
        double m = med_of(smp, "issue", 1, issue_b[i], 0, 0, NULL);
        double pr = p->issue_overhead_ns +
                    fmax(0, issue_b[i] - p->queue_bytes_per_producer) / p->issue_bytes_per_ns;
        printf("%10d %10lld %14.1f %14.1f %9.1f%%\n", 1, (long long)issue_b[i], m, pr,
               100 * (m - pr) / m);
    }
    for (int i = 3; i < 6; i++) {
        double m = med_of(smp, "issue", sms, issue_b[i], 3, 0, NULL);
        double pr = p->issue_overhead_ns +
                    fmax(0, issue_b[i] - p->queue_bytes_per_producer) / p->issue_bytes_per_ns;
        printf("%10d %10lld %14.1f %14.1f %9.1f%%   (plateau, row 3 of 4)\n", sms,
               (long long)issue_b[i], m, pr, 100 * (m - pr) / m);
    }
    printf("r = %.2f bytes/ns per producer, o = %.1f ns, queue b = %.0f bytes; |residual| median "
           "%.1f%%, max %.1f%%\n", p->issue_bytes_per_ns, p->issue_overhead_ns,
           p->queue_bytes_per_producer, 100 * fr->issue_resid_med, 100 * fr->issue_resid_max);
    printf("\n## (a) drain: synchronised periodic zero-gap bursts of %.2f MB per row, K/B "
           "splits\n", vrow / 1e6);
    printf("%10s %12s %14s\n", "producers", "bytes", "R_bytes_per_ns");
    for (int i = 0; i < fr->n_splits; i++)
        printf("%10d %12lld %14.2f\n", fr->drain_split_k[i],
               (long long)((vrow / fr->drain_split_k[i]) / 16 * 16), fr->drain_by_split[i]);
    printf("R = %.2f bytes/ns (median of splits; spread %.1f%%)\n", p->drain_bytes_per_ns,
           100 * fr->drain_spread);
    printf("plain zero-copy store kernel (%d CTAs x 256 threads, %.0f MiB): %.2f GB/s median "
           "[%.2f, %.2f]; R / store bw = %.3f\n", 4 * sms, a->ro.window_bytes / 1048576.0,
           x->bw_med, x->bw_min, x->bw_max, p->drain_bytes_per_ns / x->bw_med);
    if (nranks > 1)
        printf("NCCL ncclAlltoAll, 32 MiB per rank pair, same run: %.2f GB/s to the peers per GPU; "
               "R / NCCL = %.3f (R: this rank's stores to %s)\n", x->nccl_gbps,
               p->drain_bytes_per_ns / x->nccl_gbps,
               a->ro.one_dest || nranks == 2 ? "one peer" : "all peers");
    if (a->load_probe) {
        static const char *const ln[3] = {"none", "hbm", "l2"};
        printf("\n## (f) drain under load: one CTA per SM, 128 threads store their share of %.0f "
               "MiB, 128 threads run read-modify-write passes (hbm: 1 GiB buffer, l2: 24 MiB) "
               "until the stores end; not fitted\n", a->ro.window_bytes / 1048576.0);
        printf("%6s %12s %12s %12s %10s\n", "load", "GB/s", "min", "max", "/ R");
        for (int l = 0; l < 3; l++)
            printf("%6s %12.2f %12.2f %12.2f %10.3f\n", ln[l], x->ld_med[l], x->ld_min[l],
                   x->ld_max[l], x->ld_med[l] / p->drain_bytes_per_ns);
    }
    printf("\n## (c) capacity: isolated bursts; apparent Q(K) = V - R (T_max - o), smallest over "
           "stalled bursts\n");
    printf("%10s %14s %14s %10s\n", "producers", "apparent_bytes", "model_Q(K)", "resid");
    for (int i = 0; i < fr->n_k; i++) {
        double m = xs_capacity(p, fr->capacity_k[i]);
        printf("%10d %14.0f %14.0f %9.1f%%\n", fr->capacity_k[i], fr->capacity_by_k[i], m,
               100 * (fr->capacity_by_k[i] - m) / fr->capacity_by_k[i]);
    }
    printf("Q = %.0f bytes shared; per producer: queue %.0f bytes, reserve %.0f bytes, tandem "
           "buffer %.0f bytes; arbitration skew %.2f; chunk_bytes = %.0f\n", p->capacity_bytes,
           p->queue_bytes_per_producer, p->reserve_bytes_per_producer,
           p->buffer_bytes_per_producer, p->arbitration_skew, p->chunk_bytes);
    printf("\n## the event model on the isolated bursts and drift trains it was fitted to: mean "
           "|error| %.1f%%\n", 100 * fr->chunk_err);
    xs_fit_report_loss_print(fr, stdout);
    if (a->ro.target == XS_TARGET_HOST) {
        printf("\n## (e) visibility: payload, flag (release.sys) -> host acquires, answers -> "
               "GPU sees the answer\n");
        printf("%12s %14s %14s\n", "bytes", "rtt_med_ns", "rtt_p90_ns");
        for (int i = 0; i < 4; i++)
            printf("%12zu %14.0f %14.0f\n", vis_b[i], x->vis_med[i], x->vis_p90[i]);
    }
    if (fr->notes[0])
        printf("# notes: %s\n", fr->notes);
}

int xs_cmd_calibrate(int argc, char **argv)
{
    calib_args a;
    const int parsed = calib_parse(argc, argv, &a);
    if (parsed >= 0)
        return parsed;
    xs_replay_opts ro = a.ro;
    const int quick = a.quick, gpus = a.gpus;
    const char *out = a.out, *samples_out = a.samples_out, *out_pub = a.out_pub;
    {
        const xs_file_arg outs[] = {{"--out", out}, {"--out-published", out_pub},
                                    {"--samples", samples_out}};
        if (xs_files_distinct(outs, 3, NULL, 0) != XS_OK)
            return xs_cli_fail();
    }
    if (gpus > 1)
        setenv("XS_LAUNCH_TIMEOUT", "900", 0); /* calibrate's bound, as before; the user's wins */
    {
        /* N > 1: the bench launcher, which also hands the ranks the id of a communicator for
         * NCCL's own all-to-all (R's comparison below); bound: XS_LAUNCH_TIMEOUT, else 4 h */
        int ec = 0, l = gpus > 1 ? xs_bench_launch(gpus, &ec) : xs_launch_or_run(gpus, 0, NULL, &ec);
        if ((l = xs_launch_exit(l, ec)) >= 0)
            return l;
    }
    int nranks = 1;
    {
        int me = 0, have = 0;
        if (ro.target == XS_TARGET_PEER && xs_rank_env(&me, &nranks, NULL, &have) != XS_OK)
            return xs_cli_fail();
    }

    if (!xs_rank_primary()) /* -g N: rank 0 writes the files */
        out = samples_out = out_pub = NULL;
    time_t t_start = time(NULL);
    xs_replayer *rp;
    if (xs_replayer_open(&ro, &rp) != XS_OK)
        return xs_cli_fail();
    if (a.sms_spec && xs_replayer_use_sms(rp, a.sms_spec) != XS_OK) {
        xs_replayer_close(rp);
        return xs_cli_fail();
    }
    const xs_gpu_info *gpu = xs_replayer_gpu(rp);
    const int sms = gpu->sm_count;
    xs_gpu_report_header(stdout, gpu, argc + 1, argv - 1);
    printf("# target %s, window %.0f MiB, offsets %s, %s\n", xs_target_name(ro.target),
           ro.window_bytes / 1048576.0, ro.fixed_offsets ? "fixed" : "rotating",
           quick ? "quick" : "full");
    if (nranks > 1)
        printf("# ranks: %d processes, rank r on GPU r; producer p of rank r stores to rank %s; "
               "one region of %.0f MiB per source in every window; every rank verifies its own "
               "window; rank 0's numbers reported\n", nranks,
               ro.one_dest ? "r + 1 (one destination)" : "r + 1 + p % (N - 1) (all-to-all)",
               ro.window_bytes / 1048576.0);
    fflush(stdout);

    xs_samples smp = {0};
    calib_ctx cx = {rp, &smp, 0x5eed1u + (uint32_t)t_start, 0, 0};
    xs_status st = XS_OK;
    xs_profile p;
    xs_profile_default(&p); /* metadata and starting values; every number is refitted */
    xs_fit_report fr;

    st = calib_train_all(&cx, &a, sms, &p, &fr);
    if (st == XS_OK)
        st = xs_fit_profile(&smp, &p, &fr);
    calib_extra x;
    if (st == XS_OK)
        st = calib_extras(rp, &a, nranks, &x);
    if (st != XS_OK) {
        xs_cli_fail();
        xs_samples_free(&smp);
        xs_replayer_close(rp);
        return 1;
    }

    /* a signal during the fits, the store kernel or the round trips (seconds of CPU and GPU
     * work that train() does not check): no report, no files (xstage_sigint.h) */
    if (xs_interrupted())
        return interrupted_exit(cx.runs, &smp, rp);
    calib_report(&a, &smp, &p, &fr, sms, nranks, &x);

    /* the profile */
    snprintf(p.device, sizeof p.device, "%.127s", gpu->name);
    snprintf(p.path, sizeof p.path, "%s", xs_target_name(ro.target));
    strftime(p.date, sizeof p.date, "%Y-%m-%d", gmtime(&t_start));
    {
        size_t n = 0;
        n += (size_t)snprintf(p.command + n, sizeof p.command - n, "xstage");
        for (int i = 0; i < argc && n < sizeof p.command; i++)
            n += (size_t)snprintf(p.command + n, sizeof p.command - n, " %s", argv[i]);
    }
    snprintf(p.notes, sizeof p.notes,
             "driver %d, CUDA runtime %d, %d SMs; R/store-bw %.3f; residuals: issue %.1f%% med, "
             "drain split spread %.1f%%, event model on fitting data %.1f%%",
             gpu->driver_version, gpu->runtime_version, sms, p.drain_bytes_per_ns / x.bw_med,
             100 * fr.issue_resid_med, 100 * fr.drain_spread, 100 * fr.chunk_err);
    printf("\n");
    xs_profile_print(&p, stdout);
    int rc = 0;
    /* the same samples fitted in the published model's form (the embedded default's form) */
    xs_profile pp = p;
    xs_fit_report fp;
    if (xs_fit_profile_published(&smp, &pp, &fp) != XS_OK) {
        rc = xs_cli_fail();
    } else {
        printf("\n## the published form (no producer queue, no reserve) fitted to the same samples: "
               "r %.2f B/ns, o %.1f ns, R %.2f B/ns, Q %.0f B, skew %.2f, chunk %.0f B; event model "
               "on the fitting data: mean |error| %.1f%% (extended form: %.1f%%)\n",
               pp.issue_bytes_per_ns, pp.issue_overhead_ns, pp.drain_bytes_per_ns,
               pp.capacity_bytes, pp.arbitration_skew, pp.chunk_bytes, 100 * fp.chunk_err,
               100 * fr.chunk_err);
        snprintf(pp.notes, sizeof pp.notes,
                 "published form (queue 0, reserve 0) of the calibration; driver %d, CUDA runtime "
                 "%d, %d SMs; issue residual %.1f%% med; event model on fitting data %.1f%%",
                 gpu->driver_version, gpu->runtime_version, sms, 100 * fp.issue_resid_med,
                 100 * fp.chunk_err);
        if (out_pub && !xs_interrupted() && xs_profile_save(&pp, out_pub) != XS_OK)
            rc = xs_cli_fail();
    }
    /* files last, after the published fit (seconds): a signal before this point writes none */
    if (xs_interrupted())
        return interrupted_exit(cx.runs, &smp, rp);
    /* the drain under L2 load, for the models of fused kernels (bench up): measured, not fitted */
    if (a.load_probe && x.ld_med[2] > 0)
        p.drain_under_load_bytes_per_ns = x.ld_med[2];
    if (out && xs_profile_save(&p, out) != XS_OK)
        rc = xs_cli_fail();
    if (samples_out) {
        char comment[2048];
        snprintf(comment, sizeof comment,
                 "xstage calibrate raw samples\ndevice %s, %d SMs, driver %d, CUDA runtime %d\n"
                 "date %s\ncommand %s", gpu->name, sms, gpu->driver_version,
                 gpu->runtime_version, p.date, p.command);
        if (xs_samples_save(&smp, samples_out, comment) != XS_OK)
            rc = xs_cli_fail();
    }
    printf("# %d runs, %.1f MB stored and verified, %ld s; calibrate %s\n", cx.runs,
           cx.bytes / 1e6, (long)(time(NULL) - t_start), rc ? "FAILED" : "OK");
    xs_samples_free(&smp);
    xs_replayer_close(rp);
    return rc;
}
