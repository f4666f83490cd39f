// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_bench_model.c - `xstage bench model`: what the model costs on this CPU (single thread).
 *
 * Times the event simulation (xs_simulate: 132 producers x N rows of 64 KiB bursts, with no
 * contention, gaps of 10 K B / R, and saturated, gaps of K B / R), the planner (xs_plan_schedule)
 * and the workload decisions (EP xs_moe_auto, TP xs_tp_predict and xs_tp_predict_candidates' best,
 * UP xs_up_plan_run) on fixed
 * configurations, next to two reference floors: a minimal binary-heap event loop over the same
 * producers with one event per burst, and the same with one event per chunk. Each line gives the
 * median of -n timed runs (after -w warm-up runs), the spread (max - min) / median, the events
 * (chunks, bursts or decisions) of one run, ns per event and, for the simulations, the ratio to
 * the floor it is held against. Times are the thread's CPU time (a shared machine's waits left
 * out). No GPU; it needs nothing the NOCUDA build lacks.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_outfile.h"
#include "xstage_ep.h"
#include "xstage_tp.h"
#include "xstage_up.h"

#define CHECK(call)                                                                           \
    do {                                                                                      \
        if ((call) != XS_OK) {                                                                \
            fprintf(stderr, "xstage: error: %s (%s:%d): %s\n", #call, __FILE__, __LINE__,      \
                    xs_errmsg());                                                             \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

enum { K_PRODUCERS = 132 };
static const int64_t B_BURST = 65536; /* bytes of one burst */

/* ---- the reference floors ---------------------------------------------------------------------
 *
 * K producers, each issuing `rows` bursts of `nch` chunks at rate r with a gap after each burst,
 * into a FIFO drained at R (d_last, as the engine keeps it; no capacity). One heap entry per
 * producer: pop the earliest, advance that producer by one event (a burst, or one chunk), push it
 * back. Nothing else: the least an event-driven simulation of these producers can do. */

typedef struct {
    double t;
    int p;
} fev;

static void fpush(fev *h, int *n, fev e)
{
    int i = (*n)++;
    while (i > 0) {
        int up = (i - 1) / 2;
        if (!(e.t < h[up].t || (e.t == h[up].t && e.p < h[up].p)))
            break;
        h[i] = h[up];
        i = up;
    }
    h[i] = e;
}

static fev fpop(fev *h, int *n)
{
    fev top = h[0], last = h[--*n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, k = i;
        fev best = last;
        if (l < *n && (h[l].t < best.t || (h[l].t == best.t && h[l].p < best.p))) {
            k = l;
            best = h[l];
        }
        if (r < *n && (h[r].t < best.t || (h[r].t == best.t && h[r].p < best.p)))
            k = r;
        if (k == i)
            break;
        h[i] = h[k];
        i = k;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

/* per_chunk 0: one event per burst; 1: one per chunk. Returns the last drain time (ns) so that
 * the loop is not optimised away. */
static double floor_run(const xs_profile *pf, int rows, double gap, int per_chunk)
{
    const int K = K_PRODUCERS;
    const double c = pf->chunk_bytes, r = pf->issue_bytes_per_ns, R = pf->drain_bytes_per_ns;
    const int nch = (int)ceil((double)B_BURST / c);
    fev *h = malloc(K * sizeof *h);
    int *left = malloc(K * sizeof *left); /* events left of the producer's program */
    int *inb = malloc(K * sizeof *inb);   /* chunk within the current burst */
    if (!h || !left || !inb) {
        fprintf(stderr, "xstage: error: out of memory\n");
        exit(1);
    }
    int n = 0;
    for (int p = 0; p < K; p++) {
        left[p] = per_chunk ? rows * nch : rows;
        inb[p] = 0;
        fpush(h, &n, (fev){pf->issue_overhead_ns, p});
    }
    double d_last = 0;
    const double burst_ns = (double)B_BURST / r, chunk_ns = c / r;
    while (n) {
        fev e = fpop(h, &n);
        double t;
        if (per_chunk) {
            const double arr = e.t;
            d_last = (d_last > arr ? d_last : arr) + c / R;
            t = e.t + chunk_ns;
            if (++inb[e.p] == nch) {
                inb[e.p] = 0;
                t += gap + pf->issue_overhead_ns;
            }
        } else {
            d_last = (d_last > e.t ? d_last : e.t) + (double)B_BURST / R;
            t = e.t + burst_ns + gap + pf->issue_overhead_ns;
        }
        if (--left[e.p] > 0)
            fpush(h, &n, (fev){t, e.p});
    }
    free(h);
    free(left);
    free(inb);
    return d_last;
}

/* ---- timing ------------------------------------------------------------------------------------ */

typedef struct {
    int iters, warmup;
    FILE *csv; /* --csv FILE (NULL: none) */
} bopts;

typedef struct {
    double med_ns, spread;
} timing;

/* A case: run(ctx) once per call; its events per run. */
typedef struct {
    const char *name;
    void (*run)(void *ctx);
    void *ctx;
    double events;
    const char *unit; /* what an event is */
} bcase;

static volatile double sink;

/* This thread's CPU time (s): on a shared machine, the time the case ran, not the time it waited
 * for a core. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static timing time_case(const bopts *o, const bcase *c)
{
    double *t = malloc((size_t)o->iters * sizeof *t);
    if (!t) {
        fprintf(stderr, "xstage: error: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < o->warmup; i++)
        c->run(c->ctx);
    for (int i = 0; i < o->iters; i++) {
        double t0 = cpu_s();
        c->run(c->ctx);
        t[i] = (cpu_s() - t0) * 1e9;
    }
    timing tm = {xs_median(t, (size_t)o->iters), 0};
    tm.spread = tm.med_ns > 0 ? (xs_max(t, (size_t)o->iters) - xs_min(t, (size_t)o->iters)) /
                                    tm.med_ns
                              : 0;
    free(t);
    return tm;
}

/* ---- the cases ----------------------------------------------------------------------------------- */

typedef struct {
    xs_profile pf;
    xs_schedule s;
    double gap;
    int rows, per_chunk;
    xs_programs pg; /* staggered: per-producer programs (bytes NULL: the schedule's rows) */
} simcase;

static void run_floor(void *ctx)
{
    simcase *c = ctx;
    sink = floor_run(&c->pf, c->rows, c->gap, c->per_chunk);
}

static void run_sim(void *ctx)
{
    simcase *c = ctx;
    xs_result r;
    CHECK(xs_simulate_programs(&c->pf, &c->s, c->pg.bytes ? &c->pg : NULL, NULL, &r));
    sink = r.makespan_ns;
    xs_result_free(&r);
}

static void run_plan(void *ctx)
{
    simcase *c = ctx;
    xs_plan pl;
    CHECK(xs_plan_schedule(&c->pf, &c->s, NULL, &pl));
    sink = pl.planned_ns;
    xs_plan_free(&pl);
}

typedef struct {
    xs_profile pf;
    xs_moe_problem *pb;
    xs_moe_costs costs;
} epcase;

static void run_ep(void *ctx)
{
    epcase *c = ctx;
    xs_moe_auto_result r;
    CHECK(xs_moe_auto(c->pb, &c->pf, NULL, &c->costs, NULL, NULL, &r));
    sink = r.auto_ns;
}

typedef struct {
    xs_profile pf;
    xs_tp_plan *pl;
    xs_tp_costs costs;
    xs_tp_pace cand[XS_TP_NCAND]; /* the ranking's candidates (tp_rank) */
    int usable[XS_TP_NCAND], nc;
} tpcase;

static void run_tp(void *ctx)
{
    tpcase *c = ctx;
    xs_tp_pred pr;
    CHECK(xs_tp_predict(c->pl, 0, &c->pf, &c->costs, 0, &pr));
    sink = pr.model_ns;
}

/* The TP planner's decision: the best of the candidate shaped orders (built in slot 2). */
static void run_tp_rank(void *ctx)
{
    tpcase *c = ctx;
    int best = -1;
    CHECK(xs_tp_predict_candidates(c->pl, 2, c->cand, c->usable, c->nc, &c->costs, &c->pf, NULL,
                                   &best));
    sink = best;
}

typedef struct {
    xs_profile pf;
    xs_up_cfg cfg;
    double *dur;
    uint64_t *tns;
} upcase;

static void run_up(void *ctx)
{
    upcase *c = ctx;
    const xs_up_plan_opts o = {-1, -1, -1, -1, 0.0, 0.0, 0};
    xs_up_plan pl;
    xs_up_plan_run(&o, &c->pf, &c->cfg, c->dur, c->tns, &pl);
    sink = pl.d_pb_ns;
}

/* ---- the command ------------------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f, "usage: xstage bench model [options]\n"
               "  -r, --rows N       rows of the simulated schedules (default 1000)\n"
               "  -n, --iters N      timed runs per case (default 7)\n"
               "  -w, --warmup N     untimed runs first (default 1)\n"
               "      --quick        a smoke run: 20 rows, 1 timed run, no warm-up\n"
               "      --csv FILE     also write the table as CSV (- : to stdout, alone)\n"
               "  -h, --help\n"
               "Times xs_simulate (132 producers x N rows of 64 KiB bursts, without and with\n"
               "contention), xs_plan_schedule and the EP, TP and UP decisions on the embedded\n"
               "profile, next to a binary-heap event loop with one event per burst and one with\n"
               "one event per chunk (the floors). Single thread, no GPU.\n");
}

static void print_row(const bopts *o, const bcase *c, timing tm, double ref_ns, const char *ref)
{
    const double per = c->events > 0 ? tm.med_ns / c->events : NAN;
    const double ratio = ref_ns > 0 ? tm.med_ns / ref_ns : NAN;
    if (o->csv)
        fprintf(o->csv, "%s,%.0f,%s,%.0f,%.3f,%.4f,%.3f,%s\n", c->name, c->events, c->unit,
                tm.med_ns, per, tm.spread, ratio, ref ? ref : "");
    printf("%-22s %12.0f %-8s %14.0f %10.2f %7.1f%% %8.2f %s\n", c->name, c->events,
               c->unit, tm.med_ns, per, 100 * tm.spread, ratio, ref ? ref : "");
}

int xs_bench_model(int argc, char **argv)
{
    bopts o = {7, 1, NULL};
    int rows = 1000;
    const char *csv_path = NULL;
    static const struct option lo[] = {{"rows", required_argument, 0, 'r'},
                                       {"iters", required_argument, 0, 'n'},
                                       {"warmup", required_argument, 0, 'w'},
                                       {"quick", no_argument, 0, 'q'},
                                       {"csv", required_argument, 0, 'C'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int ch;
    optind = 1;
    opterr = 0; /* one line of ours (xs_cli_badopt) instead of getopt's */
    while ((ch = getopt_long(argc, argv, "r:n:w:h", lo, NULL)) != -1) {
        char *end = NULL;
        long v = 0;
        switch (ch) {
        case 'r':
        case 'n':
        case 'w':
            v = strtol(optarg, &end, 10);
            if (!end || *end || v < (ch == 'w' ? 0 : 1) || v > 1000000) {
                return xs_cli_failf("bench model: -%c %s: expected a whole number %s..1000000", ch,
                                    optarg, ch == 'w' ? "0" : "1");
            }
            if (ch == 'r')
                rows = (int)v;
            else if (ch == 'n')
                o.iters = (int)v;
            else
                o.warmup = (int)v;
            break;
        case 'q':
            rows = 20, o.iters = 1, o.warmup = 0;
            break;
        case 'C':
            csv_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return xs_cli_badopt("bench model", "r:n:w:h", argc, argv);
        }
    }
    if (optind < argc) {
        return xs_cli_failf("bench model: unexpected argument '%s'", argv[optind]);
    }
    /* --csv -: the CSV alone on stdout, the report to /dev/null (docs/CLI.md) */
    if (csv_path && !strcmp(csv_path, "-") && xs_outfile_claim_stdout() != XS_OK)
        return xs_cli_fail();

    xs_profile pf;
    xs_profile_default(&pf);
    const int K = K_PRODUCERS;
    const double kbr = (double)K * (double)B_BURST / pf.drain_bytes_per_ns;
    const double nch = ceil((double)B_BURST / pf.chunk_bytes);
    const double bursts = (double)K * rows, chunks = bursts * nch;

    /* the simulations: free (gaps 10 K B / R) and saturated (gaps K B / R) */
    simcase sc[2];
    for (int i = 0; i < 2; i++) {
        memset(&sc[i], 0, sizeof sc[i]);
        sc[i].pf = pf;
        sc[i].rows = rows;
        sc[i].gap = i == 0 ? 10 * kbr : kbr;
        for (int k = 0; k < rows; k++)
            CHECK(xs_schedule_append(&sc[i].s, K, B_BURST, sc[i].gap));
    }
    /* staggered: producer p starts p slots late (an idle first row), a slot holding one burst
     * (o + B/r), and every producer's period is K slots: the bursts never overlap, so each
     * producer's chunks follow each other in the stage */
    simcase stg;
    memset(&stg, 0, sizeof stg);
    stg.pf = pf;
    const double slot = 1.05 * (pf.issue_overhead_ns + (double)B_BURST / pf.issue_bytes_per_ns);
    const size_t cells = (size_t)(rows + 1) * K;
    int64_t *sb = malloc(cells * sizeof *sb);
    double *sg = malloc(cells * sizeof *sg);
    if (!sb || !sg) {
        fprintf(stderr, "xstage: error: out of memory\n");
        return 1;
    }
    for (int k = 0; k <= rows; k++) {
        CHECK(xs_schedule_append(&stg.s, K, B_BURST, 0));
        for (int p = 0; p < K; p++) {
            sb[(size_t)k * K + p] = k ? B_BURST : 0;
            sg[(size_t)k * K + p] =
                k ? K * slot - (pf.issue_overhead_ns + (double)B_BURST / pf.issue_bytes_per_ns)
                  : p * slot;
        }
    }
    stg.pg = (xs_programs){K, sb, sg};
    simcase fl[4];
    for (int i = 0; i < 4; i++) {
        fl[i] = sc[i / 2];
        fl[i].per_chunk = i % 2;
    }
    /* the planner: 100 rows of 256 KiB bursts with no gap (it reshapes) */
    simcase plc;
    memset(&plc, 0, sizeof plc);
    plc.pf = pf;
    for (int k = 0; k < (rows < 100 ? rows : 100); k++)
        CHECK(xs_schedule_append(&plc.s, K, 4 * B_BURST, k % 2 ? 0 : 2 * kbr));

    /* EP: the first public configuration, half its first token count, 8 peers, zipf routing */
    epcase ep;
    memset(&ep, 0, sizeof ep);
    ep.pf = pf;
    const xs_moe_config *cfg = &xs_moe_configs[0];
    xs_moe_opts mo = {cfg->tokens[0] / 2, 8, XS_ROUTE_ZIPF, 0, 5u};
    CHECK(xs_moe_problem_create(cfg, &mo, K, &ep.pb));
    ep.costs.mma1_ns = 1600.0 * cfg->hidden / 64.0;
    ep.costs.mma2_ns = 1600.0 * cfg->inter / 64.0;
    ep.costs.c1_ns = ep.costs.mma1_ns + 1000.0;
    ep.costs.c2_ns = ep.costs.mma2_ns + 300.0;
    ep.costs.local_issue_bytes_per_ns = 52.0;
    ep.costs.span2_ns = 65536.0 / 52.0;
    const xs_moe_plan wave = {.kind = XS_MOE_WAVE};
    double kern = NAN;
    CHECK(xs_moe_problem_set_plan(ep.pb, 0, &wave));
    CHECK(xs_moe_predict(ep.pb, 0, &pf, NULL, &ep.costs, 0, &kern));
    ep.costs.kernel_ns = kern;

    /* TP: GEMM + reduce-scatter, llama3-8b width over 4 peers, 132 CTAs, the naive order */
    tpcase tp;
    memset(&tp, 0, sizeof tp);
    tp.pf = pf;
    const xs_tp_shape shape = {XS_TP_GEMM_RS, 4096, 4096, 14336, 4};
    CHECK(xs_tp_plan_create(&shape, 0, K, &tp.pl));
    CHECK(xs_tp_order_naive(tp.pl, 0));
    xs_tp_info in;
    CHECK(xs_tp_info_of(&shape, &in));
    for (int g = 0; g < in.ngemm; g++)
        tp.costs.tile_ns[g] = 2.0 * XS_TP_BM * XS_TP_BN * in.gk[g] / 2.65e12 * 1e9 + 1000;
    tp.costs.push_ns = 1600;
    tp.costs.reduce_ns = 3000;
    tp.nc = xs_tp_candidates(0.9 * xs_capacity(&pf, K), tp.cand, XS_TP_NCAND);
    xs_tp_engine_candidates(1, tp.cand, tp.nc, tp.usable);

    /* UP: 4096 tokens, 8 heads, causal, 8 peers, 132 SMs; synthetic tile times */
    upcase up;
    memset(&up, 0, sizeof up);
    up.pf = pf;
    up.cfg.seq = 4096, up.cfg.heads = 8, up.cfg.causal = 1, up.cfg.peers = 8, up.cfg.sms = K;
    up.cfg.tiles = xs_attn_tiles(up.cfg.seq, up.cfg.heads);
    up.cfg.grid = up.cfg.tiles < K ? up.cfg.tiles : K;
    up.cfg.pace_bytes_per_ns = 0.9 * pf.drain_bytes_per_ns;
    up.cfg.rows_per_rank = up.cfg.seq / up.cfg.peers;
    up.cfg.remote = xs_attn_remote_tiles(up.cfg.seq, up.cfg.heads, up.cfg.rows_per_rank);
    up.dur = malloc((size_t)up.cfg.tiles * sizeof *up.dur);
    up.tns = malloc((size_t)up.cfg.tiles * sizeof *up.tns);
    if (!up.dur || !up.tns) {
        fprintf(stderr, "xstage: error: out of memory\n");
        return 1;
    }
    for (int t = 0; t < up.cfg.tiles; t++) {
        const uint32_t h = ((uint32_t)t * 2654435761u) >> 28;
        up.dur[t] = 1000.0 + 37.5 * xs_attn_tile_iters(up.cfg.seq, up.cfg.heads, 1, t) *
                                 (1.0 + h / 64.0);
    }
    for (int b = 0; b < up.cfg.grid; b++) {
        uint64_t clk = 1000000;
        const int m = xs_attn_cta_count(up.cfg.tiles, up.cfg.grid, b);
        for (int k = 0; k < m; k++) {
            const int t = xs_attn_cta_tile(0, up.cfg.tiles, 0, up.cfg.grid, b, k);
            clk += (uint64_t)up.dur[t];
            up.tns[t] = clk;
        }
    }

    const bcase cases[] = {
        {"floor_burst_free", run_floor, &fl[0], bursts, "burst"},
        {"floor_chunk_free", run_floor, &fl[1], chunks, "chunk"},
        {"floor_burst_sat", run_floor, &fl[2], bursts, "burst"},
        {"floor_chunk_sat", run_floor, &fl[3], chunks, "chunk"},
        {"simulate_free", run_sim, &sc[0], chunks, "chunk"},
        {"simulate_sat", run_sim, &sc[1], chunks, "chunk"},
        {"simulate_staggered", run_sim, &stg, chunks, "chunk"},
        {"plan", run_plan, &plc, 1, "decision"},
        {"ep_auto", run_ep, &ep, 1, "decision"},
        {"tp_predict", run_tp, &tp, 1, "decision"},
        {"tp_rank", run_tp_rank, &tp, 1, "decision"},
        {"up_plan", run_up, &up, 1, "decision"},
    };
    enum { NC = sizeof cases / sizeof cases[0] };
    timing tm[NC];

    printf("# xstage bench model: %d producers x %d rows of %lld-byte bursts (%.0f chunks of "
           "%.0f bytes each), profile embedded (R %.4g B/ns, r %.4g B/ns, Q %.6g B)\n",
           K, rows, (long long)B_BURST, nch, pf.chunk_bytes, pf.drain_bytes_per_ns,
           pf.issue_bytes_per_ns, pf.capacity_bytes);
    printf("# free: gaps 10 K B / R = %.0f ns; sat: gaps K B / R = %.0f ns; median of %d runs "
           "after %d warm-up; thread CPU time, single thread\n", 10 * kbr, kbr, o.iters, o.warmup);
    printf("# staggered: producer p starts p x %.0f ns late, period K x that: no two bursts "
           "overlap\n", slot);
    printf("# ep_auto: %s T=%d N=8 zipf; tp_predict: gemm_rs 4096x4096x14336 P=4 naive; "
           "tp_rank: the same, the best of %d candidate orders; up_plan: seq 4096 heads 8 causal "
           "P=8\n", cfg->name, mo.tokens, tp.nc);
    /* opened here, after every set-up that can fail: nothing below returns early */
    xs_outfile cof = {0}; /* atomic (xstage_outfile.h) */
    if (csv_path && xs_outfile_open(&cof, csv_path) != XS_OK)
        return xs_cli_fail();
    o.csv = cof.f;
    if (o.csv)
        fprintf(o.csv, "case,events,unit,median_ns,ns_per_event,spread,ratio,ratio_to\n");
    printf("%-22s %12s %-8s %14s %10s %8s %8s %s\n", "case", "events", "unit", "median",
           "per_event", "spread", "ratio", "ratio_to");
    printf("%-22s %12s %-8s %14s %10s %8s %8s %s\n", "", "", "", "(ns)", "(ns)", "", "(x)", "");
    for (int i = 0; i < NC; i++) {
        tm[i] = time_case(&o, &cases[i]);
        double ref = 0;
        const char *rn = NULL;
        if (i == 4)
            ref = tm[0].med_ns, rn = "floor_burst_free";
        else if (i == 5)
            ref = tm[3].med_ns, rn = "floor_chunk_sat";
        else if (i == 6)
            ref = tm[0].med_ns, rn = "floor_burst_free";
        else if (i == 1 || i == 3)
            ref = tm[i - 1].med_ns, rn = cases[i - 1].name;
        print_row(&o, &cases[i], tm[i], ref, rn);
    }
    printf("# targets: simulate_free <= 3x floor_burst_free (%s), simulate_sat <= 2x "
           "floor_chunk_sat (%s)\n", tm[4].med_ns <= 3 * tm[0].med_ns ? "met" : "not met",
           tm[5].med_ns <= 2 * tm[3].med_ns ? "met" : "not met");
    int rc = 0;
    if (xs_outfile_commit(&cof) != XS_OK)
        rc = xs_cli_fail();
    printf("# bench model %s\n", rc ? "FAILED" : "OK");
    for (int i = 0; i < 2; i++)
        xs_schedule_free(&sc[i].s);
    xs_schedule_free(&plc.s);
    xs_schedule_free(&stg.s);
    free(sb);
    free(sg);
    xs_moe_problem_destroy(ep.pb);
    xs_tp_plan_destroy(tp.pl);
    free(up.dur);
    free(up.tns);
    return rc;
}
