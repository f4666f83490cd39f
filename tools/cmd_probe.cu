// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_probe.cu - `xstage probe`: what the X-Stage does to the work around it, and what the
 * write pattern does to the X-Stage. Not fitted; a table of measurements on one path.
 *
 * The model (docs/MODEL.md) assumes that useful work does not slow down while stores are
 * outstanding, and calibrates R with contiguous bursts. The fused kernels say otherwise in two
 * places: their main loops lose time next to remote stores even when the pacer keeps the stage
 * under R (EP: 16-36 us per CTA, bench/results/ep/), and their row-shaped stores see less
 * headroom and a lower rate than the calibration's (UP and TP: 0.74-0.84 R, bench/results/up/,
 * bench/results/tp/). Each case below is one
 * xs_replay_work_probe configuration (include/xstage_replay.h), repeated; every stored byte is
 * verified at the destination.
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
#include "xstage_results.h"
#include "xstage_cuda.h"
#include "xstage_replay.h"
#include "xstage_sigint.h"

typedef struct {
    const char *name;
    int store_ctas;  /* -1: all SMs */
    int row_bytes;   /* 0: contiguous share */
    int interleave;
    double pace;     /* fraction of the reference store rate; 0 unpaced */
    int load;        /* xs_probe_load */
    int bulk;        /* 1: the stores go by TMA bulk copies from shared memory */
} probe_case;

/* The reference (all SMs, contiguous, nothing else running) comes first: its rate sets the pace
 * of the paced cases and its span the load side's duration (0.6 of it) in every case. It runs
 * twice: the first pass of a fresh window ran at 0.93 of the later ones (on an H200: 49.2 GB/s,
 * then 53.1-53.5 for the same stores in the rows cases), so the first is reported as `warm`
 * and not used. */
static const probe_case cases[] = {
    {"warm", -1, 0, 1, 0, XS_PROBE_LOAD_NONE},
    {"ref", -1, 0, 1, 0, XS_PROBE_LOAD_NONE},
    {"control", 0, 0, 1, 0, XS_PROBE_LOAD_HBM},
    {"control", 0, 0, 1, 0, XS_PROBE_LOAD_L2},
    {"control", 0, 0, 1, 0, XS_PROBE_LOAD_FMA},
    {"all", -1, 0, 1, 0, XS_PROBE_LOAD_HBM},
    {"all", -1, 0, 1, 0, XS_PROBE_LOAD_L2},
    {"all", -1, 0, 1, 0, XS_PROBE_LOAD_FMA},
    {"paced", -1, 0, 1, 0.8, XS_PROBE_LOAD_HBM},
    {"paced", -1, 0, 1, 0.8, XS_PROBE_LOAD_L2},
    {"paced", -1, 0, 1, 0.8, XS_PROBE_LOAD_FMA},
    {"paced", -1, 0, 1, 0.5, XS_PROBE_LOAD_HBM},
    {"paced", -1, 0, 1, 0.5, XS_PROBE_LOAD_L2},
    {"few", 4, 0, 1, 0, XS_PROBE_LOAD_HBM},
    {"few", 4, 0, 1, 0, XS_PROBE_LOAD_L2},
    {"few", 4, 0, 1, 0, XS_PROBE_LOAD_FMA},
    {"few", 16, 0, 1, 0, XS_PROBE_LOAD_HBM},
    {"few", 16, 0, 1, 0, XS_PROBE_LOAD_L2},
    {"fewpace", 4, 0, 1, 0.8, XS_PROBE_LOAD_HBM},
    {"fewpace", 4, 0, 1, 0.8, XS_PROBE_LOAD_L2},
    {"fewpace", 16, 0, 1, 0.8, XS_PROBE_LOAD_HBM},
    {"fewpace", 16, 0, 1, 0.8, XS_PROBE_LOAD_L2},
    {"fewpace", 4, 0, 1, 0.9, XS_PROBE_LOAD_HBM},
    {"fewpace", 4, 0, 1, 0.95, XS_PROBE_LOAD_HBM},
    {"fewpace", 4, 0, 1, 1.0, XS_PROBE_LOAD_HBM},
    {"fewpace", 8, 0, 1, 0.95, XS_PROBE_LOAD_HBM},
    {"fewpace", 8, 0, 1, 0.95, XS_PROBE_LOAD_L2},
    {"fewpace", 8, 0, 1, 1.0, XS_PROBE_LOAD_L2},
    {"rows", -1, 256, 1, 0, XS_PROBE_LOAD_NONE},
    {"rows", -1, 256, 8, 0, XS_PROBE_LOAD_NONE},
    {"rows", -1, 256, 16, 0, XS_PROBE_LOAD_NONE},
    {"rows", -1, 512, 32, 0, XS_PROBE_LOAD_NONE},
    {"rows", -1, 4096, 4, 0, XS_PROBE_LOAD_NONE},
    {"rows", -1, 256, 16, 0, XS_PROBE_LOAD_HBM},
    /* between few (4-16 SMs: loads unaffected) and all (132: loads at 0.3-0.4): how many
     * SMs may store at nearly R before their own loads suffer? (a schedule that keeps the
     * combine on a subset of the CTAs, docs/EP.md) */
    {"manypace", 32, 0, 1, 0.9, XS_PROBE_LOAD_HBM},
    {"manypace", 32, 0, 1, 0.9, XS_PROBE_LOAD_L2},
    {"manypace", 44, 0, 1, 0.9, XS_PROBE_LOAD_HBM},
    {"manypace", 44, 0, 1, 0.9, XS_PROBE_LOAD_L2},
    {"manypace", 64, 0, 1, 0.9, XS_PROBE_LOAD_HBM},
    {"manypace", 64, 0, 1, 0.9, XS_PROBE_LOAD_L2},
    {"manypace", 44, 0, 1, 0.7, XS_PROBE_LOAD_HBM},
    {"manypace", 44, 0, 1, 0.7, XS_PROBE_LOAD_L2},
    {"manypace", 44, 512, 4, 0.9, XS_PROBE_LOAD_HBM},
    {"rowpace", -1, 512, 32, 0.8, XS_PROBE_LOAD_HBM},
    {"rowpace", -1, 512, 32, 0.8, XS_PROBE_LOAD_L2},
    /* the same bytes through the TMA (cp.async.bulk from shared memory): does a store that
     * the SM's load/store unit never sees still hold its loads back? (the fused kernels'
     * main loops lose time next to their paced stores, docs/EP.md "Couriers", the probe) */
    {"bulk", -1, 0, 1, 0, XS_PROBE_LOAD_NONE, 1},
    {"bulk", -1, 0, 1, 0, XS_PROBE_LOAD_HBM, 1},
    {"bulk", -1, 0, 1, 0, XS_PROBE_LOAD_L2, 1},
    {"bulk", -1, 0, 1, 0, XS_PROBE_LOAD_FMA, 1},
    {"bulkpace", -1, 0, 1, 0.8, XS_PROBE_LOAD_HBM, 1},
    {"bulkpace", -1, 0, 1, 0.8, XS_PROBE_LOAD_L2, 1},
    {"bulkpace", -1, 0, 1, 0.5, XS_PROBE_LOAD_HBM, 1},
    {"bulkrows", -1, 512, 32, 0, XS_PROBE_LOAD_NONE, 1},
    {"bulkrows", -1, 512, 32, 0.8, XS_PROBE_LOAD_HBM, 1},
    {"bulkrows", -1, 512, 32, 0.8, XS_PROBE_LOAD_L2, 1},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static const char *const load_names[] = {"none", "hbm", "l2", "fma"};

static void usage(void)
{
    printf("usage: xstage probe [--target host|local] [--window SIZE] [--only NAME] [-n N] "
           "[--csv FILE] [--json FILE]\n"
           "Work under stores, and the drain of row-shaped stores, on one path; not fitted.\n"
           "One CTA of 256 threads per SM: 128 threads of the storing CTAs store their share of\n"
           "the window, 128 threads of every CTA run a load (HBM or L2 read-modify-write passes,\n"
           "or FMA chains) for 0.6 of the reference's span while the stores drain. Cases: the\n"
           "reference store rate (all SMs, contiguous); each load alone (control); each load next\n"
           "to the stores of all SMs, unpaced and paced at 0.8 and 0.5 of the reference; stores\n"
           "from 4, 8 and 16 SMs, unpaced and paced at 0.8-1.0, with the load on all; rows of 256-4096\n"
           "bytes interleaved across CTAs (the layouts of the fused kernels' outputs); the same\n"
           "stores as TMA bulk copies from shared memory (bulk*: cp.async.bulk, their span ends\n"
           "when the writes are complete). Every byte verified.\n\n"
           "  -t, --target T        host (pinned host memory over PCIe, default) or local (HBM)\n"
           "  --window SIZE         bytes stored per run, at least 1M (default 64M); small\n"
           "                        windows are isolated bursts: their store rate says how\n"
           "                        much of the burst the stage absorbed\n"
           "  --only LIST           warm, ref and the cases named in LIST only (comma\n"
           "                        separated, e.g. rows,bulkrows)\n"
           "  -n, --iters N         repetitions per case after one warm-up (default 5)\n"
           "  --csv FILE            also write the table as CSV\n"
           "  --json FILE           also write the table as JSON (format 1, xstage_results.h)\n"
           "                        (- for either: to stdout, instead of the report)\n"
           "  -d, --device N        CUDA device (default 0)\n"
           "  --timeout S           bound on one run, seconds (default 30)\n");
}

static double ratio(double a, double b) { return b > 0 ? a / b : NAN; }

/* --only LIST: case names separated by commas */
static int only_has(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        const size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !strncmp(p, name, n))
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

/* every name of LIST is a case; else the first one that is not, in bad */
static int only_known(const char *list, char *bad, size_t nbad)
{
    for (const char *p = list;;) {
        const char *e = strchr(p, ',');
        const size_t k = e ? (size_t)(e - p) : strlen(p);
        int found = 0;
        for (int i = 0; i < NCASES && !found; i++)
            found = strlen(cases[i].name) == k && !strncmp(cases[i].name, p, k);
        if (!found) {
            snprintf(bad, nbad, "%.*s", (int)k, p);
            return 0;
        }
        if (!e)
            return 1;
        p = e + 1;
    }
}

int xs_cmd_probe(int argc, char **argv)
{
    static const struct option lo[] = {
        {"target", required_argument, 0, 't'}, {"window", required_argument, 0, 'W'},
        {"iters", required_argument, 0, 'n'},  {"csv", required_argument, 0, 'c'},
        {"json", required_argument, 0, 'J'},
        {"device", required_argument, 0, 'd'}, {"timeout", required_argument, 0, 'T'},
        {"only", required_argument, 0, 'O'},   {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    xs_replay_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.target = XS_TARGET_HOST;
    ro.window_bytes = 64u << 20;
    ro.timeout_s = 30;
    const char *csv = NULL, *json = NULL, *only = NULL;
    int reps = 5, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:n:d:h", lo, NULL)) != -1) {
        switch (c) {
        case 't':
            if (xs_target_parse(optarg, &ro.target) != XS_OK)
                return xs_cli_fail();
            if (ro.target != XS_TARGET_HOST && ro.target != XS_TARGET_LOCAL)
                return xs_cli_failf("probe: --target %s: host or local", optarg);
            break;
        case 'W': {
            int64_t v;
            if (xs_parse_size("--window", optarg, &v) != XS_OK)
                return xs_cli_fail();
            if (v < (1 << 20))
                return xs_cli_failf("--window %s: at least 1M", optarg);
            ro.window_bytes = (size_t)v;
            break;
        }
        case 'n': {
            long v;
            if (xs_parse_int("--iters", optarg, 1, 64, &v) != XS_OK)
                return xs_cli_fail();
            reps = (int)v;
            break;
        }
        case 'c': csv = optarg; break;
        case 'J': json = optarg; break;
        case 'O': {
            char bad[64];
            if (!only_known(optarg, bad, sizeof bad))
                return xs_cli_failf("probe: --only %s: no case named '%s' (ref, control, all, "
                                    "paced, few, fewpace, manypace, rows, rowpace, bulk, "
                                    "bulkpace, bulkrows)", optarg, bad);
            only = optarg;
            break;
        }
        case 'd': {
            long v;
            if (xs_parse_int("--device", optarg, 0, 63, &v) != XS_OK)
                return xs_cli_fail();
            ro.device = (int)v;
            break;
        }
        case 'T':
            if (xs_parse_double("--timeout", optarg, 1, 3600, &ro.timeout_s) != XS_OK)
                return xs_cli_fail();
            break;
        case 'h': usage(); return 0;
        default: return xs_cli_badopt("probe", "t:n:d:h", argc, argv);
        }
    }
    if (optind < argc)
        return xs_cli_failf("probe: unexpected argument '%s'", argv[optind]);
    {
        const xs_file_arg outs[] = {{"--csv", csv}, {"--json", json}};
        if (xs_files_distinct(outs, 2, NULL, 0) != XS_OK)
            return xs_cli_fail();
    }
    xs_outfile cfo = {0}, jfo = {0}; /* atomic (xstage_outfile.h) */
    /* --csv - or --json -: that file alone on stdout, the report to /dev/null */
    if (((csv && !strcmp(csv, "-")) || (json && !strcmp(json, "-"))) &&
        xs_outfile_claim_stdout() != XS_OK)
        return xs_cli_fail();
    if (csv && xs_outfile_open(&cfo, csv) != XS_OK)
        return xs_cli_fail();
    if (json && xs_outfile_open(&jfo, json) != XS_OK) {
        xs_outfile_discard(&cfo);
        return xs_cli_fail();
    }
    /* the table's CSV is gathered in memory, then written to --csv and, as JSON, to --json */
    char *ctext = NULL;
    size_t clen = 0;
    FILE *cf = cfo.f || jfo.f ? open_memstream(&ctext, &clen) : NULL;
    time_t t_start = time(NULL);
    xs_replayer *rp;
    if (xs_replayer_open(&ro, &rp) != XS_OK) {
        if (cf)
            fclose(cf);
        free(ctext);
        xs_outfile_discard(&cfo);
        xs_outfile_discard(&jfo);
        return xs_cli_fail();
    }
    const xs_gpu_info *gpu = xs_replayer_gpu(rp);
    const int sms = gpu->sm_count;
    xs_gpu_report_header(stdout, gpu, argc + 1, argv - 1);
    char *htext = NULL; /* the header again, as the JSON's notes (the CSV has none) */
    size_t hlen = 0;
    FILE *hf = jfo.f ? open_memstream(&htext, &hlen) : NULL;
    if (hf) {
        xs_gpu_report_header(hf, gpu, argc + 1, argv - 1);
        fclose(hf);
    }
    printf("# target %s, %.0f MiB per run, %d repetitions per case after a warm-up; load work per "
           "SM: MB/s of read-modify-write traffic (hbm, l2) or GFLOP/s (fma); spread = "
           "(max - min) / median\n", xs_target_name(ro.target), ro.window_bytes / 1048576.0,
           reps);
    printf("%-8s %6s %6s %5s %6s %5s %10s %7s %8s %12s %7s %8s %12s %8s %10s\n", "case", "ctas",
           "row", "ilv", "pace", "load", "store_GB/s", "spread", "/ref", "load_storing", "spread",
           "/alone", "load_others", "/alone", "kernel_us");
    if (cf)
        fprintf(cf, "case,store_ctas,row_bytes,interleave,pace_gbps,load,store_gbps,store_min,"
                    "store_max,store_over_ref,load_storing,load_storing_min,load_storing_max,"
                    "storing_over_alone,load_others,load_others_min,load_others_max,"
                    "others_over_alone,kernel_us,bytes,verified,bulk\n");
    double ref_gbps = NAN, ref_span_ns = NAN, alone[4] = {NAN, NAN, NAN, NAN};
    int rc = 0;
    for (int i = 0; i < NCASES && !rc; i++) {
        if (xs_interrupted()) {
            xs_interrupt_err("probe: %d of %d cases done", i, NCASES);
            rc = 1;
            break;
        }
        const probe_case *pc = &cases[i];
        if (only && i > 1 && !only_has(only, pc->name))
            continue; /* warm and ref always run: the others' pace and load span */
        xs_probe_cfg cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.store_ctas = pc->store_ctas < 0 ? sms : pc->store_ctas;
        cfg.bytes = ro.window_bytes;
        cfg.row_bytes = pc->row_bytes;
        cfg.interleave = pc->interleave;
        cfg.load = pc->load;
        cfg.bulk = pc->bulk;
        cfg.pace_gbps = pc->pace > 0 ? pc->pace * ref_gbps : 0;
        /* the load side stops on its own clock before the slowest stores end (paced at 0.5:
         * twice the reference span); the controls run as long */
        cfg.duration_ns = 0.6 * ref_span_ns;
        xs_probe_res m, l, h;
        if (xs_replay_work_probe(rp, &cfg, reps, &m, &l, &h) != XS_OK) {
            rc = xs_cli_fail();
            break;
        }
        if (i == 1) {
            ref_gbps = m.store_gbps;
            ref_span_ns = m.store_span_us * 1e3;
        }
        if (cfg.store_ctas == 0)
            alone[cfg.load] = m.load_store_sms;
        const double a = cfg.load ? alone[cfg.load] : NAN;
        /* a control's own load is on every SM: its column is "storing" by construction, and its
         * ratio 1 */
        printf("%-8s %6d %6d %5d %6.1f %5s %10.2f %6.1f%% %8.3f %12.1f %6.1f%% %8.3f %12.1f %8.3f "
               "%10.1f\n", pc->name, cfg.store_ctas, cfg.row_bytes, cfg.interleave,
               cfg.pace_gbps, load_names[cfg.load], m.store_gbps,
               100 * ratio(h.store_gbps - l.store_gbps, m.store_gbps),
               ratio(m.store_gbps, i ? ref_gbps : m.store_gbps), m.load_store_sms,
               100 * ratio(h.load_store_sms - l.load_store_sms, m.load_store_sms),
               ratio(m.load_store_sms, a), m.load_other_sms, ratio(m.load_other_sms, a),
               m.kernel_us);
        if (cf)
            fprintf(cf, "%s,%d,%d,%d,%.3f,%s,%.4f,%.4f,%.4f,%.4f,%.3f,%.3f,%.3f,%.4f,%.3f,%.3f,"
                        "%.3f,%.4f,%.2f,%.0f,1,%d\n", pc->name, cfg.store_ctas, cfg.row_bytes,
                    cfg.interleave, cfg.pace_gbps, load_names[cfg.load], m.store_gbps,
                    l.store_gbps, h.store_gbps, ratio(m.store_gbps, i ? ref_gbps : m.store_gbps),
                    m.load_store_sms,
                    l.load_store_sms, h.load_store_sms, ratio(m.load_store_sms, a),
                    m.load_other_sms, l.load_other_sms, h.load_other_sms,
                    ratio(m.load_other_sms, a), m.kernel_us, m.bytes, pc->bulk);
        fflush(stdout);
    }
    if (cf) {
        fclose(cf);
        if (cfo.f && clen)
            fwrite(ctext, 1, clen, cfo.f);
        size_t n = hlen + clen + 1;
        char *all = jfo.f ? (char *)malloc(n) : NULL;
        if (all)
            snprintf(all, n, "%s%s", htext ? htext : "", ctext ? ctext : "");
        if (jfo.f && (!all || xs_results_json_from_csv(jfo.f, all) != XS_OK) && !rc)
            rc = all ? xs_cli_fail() : xs_cli_failf("probe: out of memory for --json");
        free(all);
        free(ctext);
    }
    free(htext);
    if (xs_outfile_commit(&cfo) != XS_OK && !rc)
        rc = xs_cli_fail();
    if (xs_outfile_commit(&jfo) != XS_OK && !rc)
        rc = xs_cli_fail();
    xs_outfile_discard(&jfo);
    printf("# %ld s; probe %s\n", (long)(time(NULL) - t_start), rc ? "FAILED" : "OK");
    xs_replayer_close(rp);
    return rc;
}
