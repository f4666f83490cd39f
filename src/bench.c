// SPDX-License-Identifier: Apache-2.0
/*
 * bench.c - the CPU half of the bench harness (include/xstage_bench.h): common options merged
 * with a workload's, statistics, interleaved rounds, the sweep over points, and the verdict
 * vector of -g runs. The table writers and the report are bench_report.c.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage_bench.h"
#include "xstage_outfile.h"
#include "xstage_sigint.h"

/* ---- options ---------------------------------------------------------------------------------- */

static const struct option common_long[] = {
    {"iters", required_argument, 0, 'n'},
    {"warmup", required_argument, 0, 'w'},
    {"device", required_argument, 0, 'd'},
    {"gpus", required_argument, 0, 'g'},
    {"seed", required_argument, 0, XS_OPT_SEED},
    {"profile", required_argument, 0, XS_OPT_PROFILE},
    {"set", required_argument, 0, XS_OPT_SET},
    {"csv", required_argument, 0, XS_OPT_CSV},
    {"json", required_argument, 0, XS_OPT_JSON},
    {"quick", no_argument, 0, XS_OPT_QUICK},
    {"timeout", required_argument, 0, XS_BENCH_OPT_TIMEOUT},
    {"max-time", required_argument, 0, XS_BENCH_OPT_MAX_TIME},
    {"help", no_argument, 0, 'h'},
};
enum { NCOMMON = sizeof common_long / sizeof common_long[0], MAX_LONG = 128 };
static const char common_short[] = "n:w:d:g:h";

void xs_bench_usage(FILE *f, const xs_bench_spec *s)
{
    fprintf(f, "usage: xstage %s [options]\n%s", s->cmd, s->about ? s->about : "");
    if (s->help && *s->help)
        fprintf(f, "%s options:\n%s", s->cmd, s->help);
    fprintf(f,
            "common options:\n"
            "  -n, --iters N         timed rounds per point; every variant runs once a round "
            "[%d]\n"
            "  -w, --warmup N        untimed rounds first [%d]\n"
            "  -d, --device N        CUDA device [0]\n"
            "  -g, --gpus N          N ranks, one process per GPU (rank r on GPU r; "
            "docs/MULTIGPU.md)\n"
            "      --seed N          input seed [%u]\n"
            "      --profile FILE    calibrated profile (JSON) [embedded]\n"
            "      --set NAME=VALUE  override one profile field (repeatable)\n"
            "      --csv FILE        the table as CSV ('#' header lines, a units line)\n"
            "      --json FILE       the table as JSON (the same columns; format 1)\n"
            "                        (- for either: to stdout, instead of the report)\n"
            "      --quick           a smaller sweep%s\n"
            "      --timeout S       bound of every device-side wait, s [%g]\n"
            "      --max-time S      skip the points left after S s (0: no bound) [%g]\n"
            "  -h, --help\n",
            s->iters, s->warmup, (unsigned)s->seed,
            s->quick_iters > 0 ? ", -n 3 unless -n is given" : "", s->timeout_s, s->max_time_s);
}

/* The merged option tables: common first, then the workload's; a reused name, id or letter is
 * an error of the workload's table (XS_EINVAL, one line). */
static xs_status merge_opts(const xs_bench_spec *s, struct option *lo, char *so, size_t so_n)
{
    int n = 0;
    for (int i = 0; i < NCOMMON; i++)
        lo[n++] = common_long[i];
    for (const struct option *o = s->longopts; o && o->name; o++) {
        if (n >= MAX_LONG - 1)
            return xs_seterr(XS_EINVAL, "%s: more than %d options", s->cmd, MAX_LONG - 1);
        for (int i = 0; i < n; i++)
            if (!strcmp(lo[i].name, o->name) || (i < NCOMMON && lo[i].val == o->val))
                return xs_seterr(XS_EINVAL, "%s: option --%s clashes with --%s", s->cmd,
                                 o->name, lo[i].name);
        lo[n++] = *o;
    }
    memset(&lo[n], 0, sizeof lo[n]);
    const char *ws = s->shortopts ? s->shortopts : "";
    for (const char *p = ws; *p; p++)
        if (*p != ':' && strchr(common_short, *p))
            return xs_seterr(XS_EINVAL, "%s: short option -%c is a common one", s->cmd, *p);
    if (strlen(common_short) + strlen(ws) + 1 > so_n)
        return xs_seterr(XS_EINVAL, "%s: short options too long", s->cmd);
    snprintf(so, so_n, "%s%s", common_short, ws);
    return XS_OK;
}

static xs_status common_opt(xs_bench_common *c, const xs_bench_spec *s, int ch, const char *arg)
{
    switch (ch) {
    case XS_OPT_CSV: c->csv = arg; return XS_OK;
    case XS_OPT_JSON: c->json = arg; return XS_OK;
    case XS_OPT_QUICK: c->quick = 1; return XS_OK;
    case XS_BENCH_OPT_TIMEOUT:
        return xs_parse_double("--timeout", arg, 1e-4, 3600, &c->timeout_s);
    case XS_BENCH_OPT_MAX_TIME:
        return xs_parse_double("--max-time", arg, 0, 1e7, &c->max_time_s);
    }
    /* -n -w -d -g --seed --profile --set: xstage_cli.h's parser (it sets the message) */
    return xs_parse_bench_opt(ch, arg, s->max_iters, &c->b) < 0 ? XS_EINVAL : XS_OK;
}

static int is_common(int ch)
{
    for (int i = 0; i < NCOMMON; i++)
        if (common_long[i].val == ch)
            return 1;
    return 0;
}

int xs_bench_parse(const xs_bench_spec *s, int argc, char **argv, xs_bench_common *c)
{
    memset(c, 0, sizeof *c);
    c->b.iters = s->iters;
    c->b.warmup = s->warmup;
    c->b.seed = s->seed;
    c->timeout_s = s->timeout_s;
    c->max_time_s = s->max_time_s;
    struct option lo[MAX_LONG];
    char so[128];
    if (merge_opts(s, lo, so, sizeof so) != XS_OK)
        return xs_cli_fail();
    int ch;
    optind = 0; /* glibc: 0 resets getopt's state fully (a previous parse may have stopped
                 * inside an argument) */
    opterr = 0; /* one line of our own instead of getopt's */
    while ((ch = getopt_long(argc, argv, so, lo, NULL)) != -1) {
        if (ch == 'h') {
            xs_bench_usage(stdout, s);
            return -1;
        }
        if (ch == '?' || ch == ':') {
            const char *bad = argv[optind - 1 < argc ? optind - 1 : argc - 1];
            /* a long option (--seq) is named as typed, not by its short letter */
            if (optopt && optopt < 256 && strncmp(bad, "--", 2))
                return xs_cli_failf("%s: option -%c %s (--help lists the options)", s->cmd,
                                    optopt, ch == ':' || strchr(so, optopt) ? "needs a value"
                                                                            : "is unknown");
            return xs_cli_failf("%s: option '%s' is unknown or needs a value (--help lists "
                                "the options)", s->cmd, bad);
        }
        xs_status st = is_common(ch) ? common_opt(c, s, ch, optarg)
                       : s->opt      ? s->opt(s->ctx, ch, optarg)
                                     : xs_seterr(XS_EINVAL, "%s: unhandled option", s->cmd);
        if (st != XS_OK)
            return xs_cli_fail();
    }
    if (optind < argc)
        return xs_cli_failf("%s: unexpected argument '%s'", s->cmd, argv[optind]);
    const xs_file_arg outs[] = {{"--csv", c->csv}, {"--json", c->json}};
    const xs_file_arg ins[] = {{"--profile", c->b.pa.file}};
    if (xs_files_distinct(outs, 2, ins, 1) != XS_OK)
        return xs_cli_fail();
    if (c->quick && s->quick_iters > 0 && !c->b.iters_set)
        c->b.iters = s->quick_iters;
    return 0;
}

/* ---- statistics ------------------------------------------------------------------------------- */

xs_bench_stat xs_bench_stat_of(const double *x, int n)
{
    xs_bench_stat s = {NAN, NAN, NAN, NAN, NAN, 0};
    double *f = n > 0 ? malloc(sizeof *f * (size_t)n) : NULL;
    if (!f)
        return s;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]))
            f[s.n++] = x[i];
    if (s.n) {
        const size_t k = (size_t)s.n;
        s.med = xs_median(f, k);
        s.min = xs_min(f, k);
        s.max = xs_max(f, k);
        s.p10 = xs_quantile(f, k, 0.1);
        s.p90 = xs_quantile(f, k, 0.9);
    }
    free(f);
    return s;
}

double xs_bench_spread_pct(const xs_bench_stat *s)
{
    return s->med > 0 ? 100.0 * (s->max - s->min) / s->med : NAN;
}

/* ---- interleaved rounds ----------------------------------------------------------------------- */

xs_status xs_bench_rounds_run(const xs_bench_rounds *r, const xs_bench_variant *v, int nv,
                              double *samples, int *ok)
{
    int on[64], non = 0;
    if (nv > 64)
        return xs_seterr(XS_EINVAL, "bench: %d variants (at most 64)", nv);
    for (int i = 0; i < nv; i++) {
        if (v[i].on)
            on[non++] = i;
        if (ok)
            ok[i] = 1;
    }
    for (size_t i = 0; i < (size_t)nv * (size_t)r->iters; i++)
        samples[i] = NAN;
    const int rounds = r->warmup + r->iters;
    for (int round = 0; round < rounds; round++) {
        const int j = round - r->warmup; /* >= 0: a timed round */
        for (int k = 0; k < non; k++) {
            const int var = on[r->rotate ? (k + round) % non : k];
            if (r->before)
                XS_TRY(r->before(r->before_ctx, var, round));
            double us = NAN;
            XS_TRY(r->run(r->ctx, var, round, &us));
            if (j >= 0)
                samples[(size_t)var * (size_t)r->iters + (size_t)j] = us;
            if (r->verify && (r->verify_when == XS_BENCH_VERIFY_EVERY || round == rounds - 1)) {
                int good = 1;
                XS_TRY(r->verify(r->ctx, var, round, &good));
                if (!good && ok)
                    ok[var] = 0;
            }
        }
    }
    return XS_OK;
}

/* ---- the sweep -------------------------------------------------------------------------------- */

void xs_bench_sweep_run(const xs_bench_sweep *s, xs_bench_report *r, xs_bench_tally *t)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < s->npoints; i++) {
        int intr = xs_interrupted() != 0, late = 0; /* between points (xstage_sigint.h) */
        xs_status st = s->between ? s->between(s->hctx, &intr, &late) : XS_OK;
        if (st == XS_OK && intr) {
            t->interrupted = 1;
            return;
        }
        char label[256] = "";
        if (s->label)
            s->label(s->ctx, i, label, sizeof label);
        if (st == XS_OK && late) {
            t->skipped++;
            if (r && s->unrun) {
                char why[96];
                snprintf(why, sizeof why, "not run: --max-time spent");
                s->unrun(s->ctx, i, (char *)s->rows + (size_t)i * s->row_bytes, why);
                xs_bench_report_row(r, (char *)s->rows + (size_t)i * s->row_bytes);
            }
            continue;
        }
        void *row = (char *)s->rows + (size_t)i * s->row_bytes;
        int verified = 1;
        if (st == XS_OK) {
            t->run++;
            st = s->point(s->ctx, i, row, &verified);
        }
        if (st != XS_OK) {
            char who[32] = "";
            if (s->lockstep)
                snprintf(who, sizeof who, "rank %d: ", s->rank);
            fprintf(stderr, "xstage: error: %s%s%s%s\n", who, label, *label ? ": " : "",
                    xs_errmsg());
            t->failed++;
            if (r && s->unrun) {
                char why[400];
                snprintf(why, sizeof why, "failed: %s", xs_errmsg());
                s->unrun(s->ctx, i, row, why);
                xs_bench_report_row(r, row);
            }
            /* the ranks walk the points in lockstep: one rank's error ends the sweep (its exit
             * stops the others through the launcher); a sticky CUDA error poisons every later
             * point */
            if (s->lockstep || (st == XS_ECUDA && s->sticky && s->sticky())) {
                t->stopped = 1;
                return;
            }
            continue;
        }
        if (verified == XS_BENCH_CANNOT_RUN) {
            t->cannot++;
            if (r)
                xs_bench_report_row(r, row);
            continue;
        }
        t->wrong += !verified;
        t->ok += verified;
        if (r)
            xs_bench_report_row(r, row);
        if (r && s->detail)
            s->detail(s->ctx, i, row, r);
    }
}

int xs_bench_sweep_close(xs_bench_report *r, const xs_bench_tally *t, int npoints)
{
    xs_bench_report_end(r); /* no-op after the workload's own call */
    if (t->skipped)
        xs_bench_report_note(r, "--max-time: %d of %d points skipped", t->skipped, npoints);
    if (t->cannot)
        xs_bench_report_note(r, "%d of %d points cannot run here (status column)", t->cannot,
                             npoints);
    const int files = r->csv || r->json;
    const int rc = xs_bench_report_close(r, t->ok + t->wrong, t->failed + t->wrong,
                                         t->interrupted);
    if (t->interrupted)
        return xs_cli_failf("%s: interrupted by %s after %d of %d points%s", r->cmd,
                            xs_interrupt_name(), t->run, npoints,
                            files ? "; partial results marked" : "");
    return rc;
}

/* ---- ranks ------------------------------------------------------------------------------------ */

void xs_bench_verdict_pack(int ok, double max_err, const double *med, int n, double *g)
{
    g[0] = ok ? 0.0 : 1.0;
    g[1] = isnan(max_err) ? INFINITY : max_err;
    for (int i = 0; i < n; i++)
        g[2 + i] = isnan(med[i]) ? -1.0 : med[i];
}

void xs_bench_verdict_unpack(const double *g, int n, int *ok, double *max_err, double *rank_max)
{
    *ok = g[0] == 0.0;
    *max_err = isinf(g[1]) ? NAN : g[1];
    for (int i = 0; i < n; i++)
        rank_max[i] = g[2 + i] < 0 ? NAN : g[2 + i];
}
