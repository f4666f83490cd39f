// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_trace.c - the trace subcommands: `xstage predict --trace FILE` (the per-CTA programs a
 * trace implies, predicted on a profile) and `xstage compare --trace FILE` (measured against
 * predicted, tile by tile, beside a zero-stall predictor); both draw a timeline (--timeline,
 * Chrome trace-event JSON; --plot, PNG through gnuplot). docs/TRACE.md describes the format, the
 * conversion and every figure.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_outfile.h"
#include "xstage_trace.h"

enum { OPT_TRACE = XS_OPT_FIRST_FREE, OPT_TIMELINE, OPT_WORST };

typedef struct {
    const char *trace, *timeline, *png, *csv_file;
    int csv;      /* --csv -: the CSV alone on stdout */
    int worst;    /* compare: tiles listed */
    xs_profile_args pa;
} trace_args;

/* ---- the PNG, through gnuplot ------------------------------------------------------------------
 * Nothing of the user's reaches gnuplot or a shell: the data and the script go into a private
 * mkdtemp directory under fixed names, gnuplot runs there (no shell) and writes a fixed name,
 * which is then moved to the user's path. */

static int write_file(const char *dir, const char *name, FILE **f)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *f = fopen(path, "w");
    return *f ? 0 : -1;
}

static void remove_in(const char *dir, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

/* Move src to dst: rename, or across file systems an atomic copy (xs_outfile_write). 0 on
 * success. */
static int move_file(const char *src, const char *dst)
{
    if (rename(src, dst) == 0)
        return 0;
    if (errno != EXDEV)
        return -1;
    FILE *a = fopen(src, "rb");
    if (!a)
        return -1;
    char *buf = NULL;
    size_t n = 0, cap = 0, k;
    int rc = 0;
    do {
        if (n == cap) {
            char *nb = realloc(buf, cap = cap ? 2 * cap : 1 << 20);
            if (!nb) {
                rc = -1;
                break;
            }
            buf = nb;
        }
        k = fread(buf + n, 1, cap - n, a);
        n += k;
    } while (k > 0);
    if (ferror(a))
        rc = -1;
    fclose(a);
    if (rc == 0 && xs_outfile_write(dst, buf, n) != XS_OK)
        rc = -1;
    free(buf);
    return rc;
}

/* Run gnuplot on plot.gp in dir; 0, or the exit status (127: not found). */
static int run_gnuplot(const char *dir)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (chdir(dir) != 0)
            _exit(126);
        int log = open("gnuplot.log", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (log >= 0) {
            dup2(log, 1);
            dup2(log, 2);
        }
        execlp("gnuplot", "gnuplot", "plot.gp", (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Whether PATH names an executable `name`: asked before anything is written or started. */
static int on_path(const char *name)
{
    const char *c = getenv("PATH");
    char buf[4096];
    while (c && *c) {
        const char *e = strchr(c, ':');
        const size_t n = e ? (size_t)(e - c) : strlen(c);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, c, name);
        if (n && access(buf, X_OK) == 0)
            return 1;
        c += n + (e ? 1 : 0);
    }
    return 0;
}

/* The timeline as a PNG: measured windows above, predicted below, one line per CTA. */
static int plot(const char *png, const xs_trace *t, const xs_trace_prediction *pr)
{
    if (!on_path("gnuplot"))
        return xs_cli_failf("--plot needs gnuplot, which is not on PATH (Debian: apt-get install "
                            "gnuplot-nox)");
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/xstage-plot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return xs_cli_failf("--plot: cannot create a temporary directory: %s", strerror(errno));
    FILE *m = NULL, *p = NULL, *g = NULL;
    int rc = 0;
    if (write_file(dir, "measured.dat", &m) || write_file(dir, "predicted.dat", &p) ||
        write_file(dir, "plot.gp", &g)) {
        rc = xs_cli_failf("--plot: cannot write temporary files in %s", dir);
        goto out;
    }
    double xmax = (double)t->end_ns;
    for (size_t i = 0; i < t->n; i++) {
        const xs_trace_record *r = &t->recs[i];
        fprintf(m, "%.6g %d %.6g\n", (double)r->issue_start_ns / 1e3, (int)r->cta,
                (double)(r->issue_end_ns - r->issue_start_ns) / 1e3);
        fprintf(p, "%.6g %d %.6g\n", pr->tiles[i].start_ns / 1e3, (int)r->cta,
                (pr->tiles[i].end_ns - pr->tiles[i].start_ns) / 1e3);
        if (pr->tiles[i].end_ns > xmax)
            xmax = pr->tiles[i].end_ns;
    }
    fprintf(g,
            "set terminal pngcairo size 1400,%d font ',10'\n"
            "set output 'timeline.png'\n"
            "set multiplot layout 2,1 title 'issue windows per CTA: measured (top), predicted "
            "(bottom)'\n"
            "set xlabel 'time (us)'\n"
            "set ylabel 'CTA'\n"
            "set xrange [0:%.6g]\n"
            "set yrange [-1:%d]\n"
            "set grid x\n"
            "plot 'measured.dat' using 1:2:3:(0) with vectors nohead lw 2 lc rgb '#1f77b4' "
            "title 'measured'\n"
            "plot 'predicted.dat' using 1:2:3:(0) with vectors nohead lw 2 lc rgb '#d62728' "
            "title 'predicted'\n"
            "unset multiplot\n",
            t->ncta > 64 ? 1200 : 900, xmax / 1e3 * 1.02, t->ncta);
    if (fclose(m) | fclose(p) | fclose(g)) {
        m = p = g = NULL;
        rc = xs_cli_failf("--plot: cannot write temporary files in %s", dir);
        goto out;
    }
    m = p = g = NULL;
    const int st = run_gnuplot(dir);
    char out_png[600];
    snprintf(out_png, sizeof out_png, "%s/timeline.png", dir);
    if (st == 127)
        rc = xs_cli_failf("--plot needs gnuplot, which is not on PATH (Debian: apt-get install "
                          "gnuplot-nox)");
    else if (st != 0)
        rc = xs_cli_failf("--plot: gnuplot failed (exit %d) drawing %s", st, png);
    else if (move_file(out_png, png) != 0)
        rc = xs_cli_failf("--plot: cannot write %s: %s", png, strerror(errno));
out:
    if (m) fclose(m);
    if (p) fclose(p);
    if (g) fclose(g);
    remove_in(dir, "measured.dat");
    remove_in(dir, "predicted.dat");
    remove_in(dir, "plot.gp");
    remove_in(dir, "gnuplot.log");
    remove_in(dir, "timeline.png");
    rmdir(dir);
    return rc;
}

/* ---- shared ---------------------------------------------------------------------------------- */

static void print_trace_line(FILE *f, const char *file, const xs_trace *t)
{
    fprintf(f, "# trace: %s: %d CTAs, %zu tiles, %.6g bytes, work spans on %zu tiles; device %s; "
               "kernel %s; target %s\n",
            file, t->ncta, t->n, (double)xs_trace_bytes(t), t->nwork,
            t->device[0] ? t->device : "?", t->kernel[0] ? t->kernel : "?",
            t->target[0] ? t->target : "?");
}

static void print_profile_line(FILE *f, const xs_profile *p, const char *src)
{
    fprintf(f, "# profile: %s (%s, path %s%s): r %.4g B/ns, o %.4g ns, R %.4g B/ns, Q %.6g B, "
               "chunk %.6g B; start_ns and row_start_ns 0 (the trace measured them)\n",
            src, p->device[0] ? p->device : "?", p->path, p->provisional ? ", provisional" : "",
            p->issue_bytes_per_ns, p->issue_overhead_ns, p->drain_bytes_per_ns,
            p->capacity_bytes, p->chunk_bytes);
}

static void usage(int compare)
{
    if (compare)
        printf("usage: xstage compare --trace FILE [--profile P] [--csv FILE] [--timeline "
               "FILE.json] [--plot FILE.png]\n"
               "Predict the per-CTA programs a recorded trace implies (docs/TRACE.md) and compare\n"
               "them with the measurement tile by tile: issue-time and stall errors (median,\n"
               "p90), the total error, the worst tiles, and the same for a zero-stall predictor\n"
               "(every tile in T_iss0 = o + [B - b]+/r) beside them (docs/TRACE.md).\n\n"
               "  -t, --trace FILE      the trace (xstage-trace v1 CSV)\n"
               "  --csv FILE            every tile's measured, predicted and zero-stall row\n"
               "  --worst N             tiles listed by issue-time error (default 10)\n");
    else
        printf("usage: xstage predict --trace FILE [--profile P] [--csv FILE] "
               "[--timeline FILE.json] [--plot FILE.png]\n"
               "Predict the per-CTA programs a recorded trace implies (docs/TRACE.md): each CTA\n"
               "starts when it first issued and works, between its tiles, as long as it measured;\n"
               "the model gives every tile's issue window and stall. One line per tile, then per\n"
               "CTA, then the totals.\n\n"
               "  -t, --trace FILE      the trace (xstage-trace v1 CSV)\n"
               "  --csv FILE            the tiles as CSV (- : to stdout, alone)\n");
    printf("  --timeline FILE.json  measured and predicted issue windows as Chrome trace-event\n"
           "                        JSON (open in ui.perfetto.dev)\n"
           "  --plot FILE.png       the same picture as a PNG (gnuplot)\n"
           "  --profile FILE        calibrated profile (JSON); default: the embedded H200 PCIe\n"
           "                        one\n"
           "  --set NAME=VALUE      override a numeric profile field (repeatable)\n");
}

static int parse(int argc, char **argv, int compare, trace_args *a)
{
    static const struct option lo[] = {
        {"trace", required_argument, 0, 't'}, {"timeline", required_argument, 0, OPT_TIMELINE},
        {"plot", required_argument, 0, XS_OPT_PLOT}, {"csv", required_argument, 0, XS_OPT_CSV},
        {"worst", required_argument, 0, OPT_WORST},
        {"profile", required_argument, 0, XS_OPT_PROFILE},
        {"set", required_argument, 0, XS_OPT_SET}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *cmd = compare ? "compare" : "predict";
    memset(a, 0, sizeof *a);
    a->worst = 10;
    int c;
    optind = 1;
    opterr = 0; /* one line of ours (xs_cli_badopt) instead of getopt's */
    while ((c = getopt_long(argc, argv, "t:h", lo, NULL)) != -1) {
        switch (c) {
        case 't': a->trace = optarg; break;
        case OPT_TIMELINE: a->timeline = optarg; break;
        case XS_OPT_PLOT: a->png = optarg; break;
        case XS_OPT_CSV: /* --csv FILE; "-": the standard output, alone (docs/CLI.md) */
            a->csv_file = optarg;
            a->csv = !strcmp(optarg, "-");
            break;
        case OPT_WORST: {
            long v;
            if (!compare)
                return xs_cli_failf("predict: --worst belongs to compare");
            if (xs_parse_int("--worst", optarg, 0, 1000000, &v) != XS_OK)
                return xs_cli_fail();
            a->worst = (int)v;
            break;
        }
        case XS_OPT_PROFILE: a->pa.file = optarg; break;
        case XS_OPT_SET:
            if (xs_profile_args_add_set(&a->pa, optarg) != XS_OK)
                return xs_cli_fail();
            break;
        case 'h': usage(compare); return -1;
        default: return xs_cli_badopt(cmd, "t:h", argc, argv);
        }
    }
    if (optind < argc)
        return xs_cli_failf("%s: unexpected argument '%s'", cmd, argv[optind]);
    if (!a->trace)
        return xs_cli_failf("%s: --trace FILE is required", cmd);
    /* an output that is an input (or another output) is refused before anything runs */
    const xs_file_arg outs[] = {{"--csv", a->csv_file}, {"--timeline", a->timeline},
                                {"--plot", a->png}};
    const xs_file_arg ins[] = {{"--trace", a->trace}, {"--profile", a->pa.file}};
    if (xs_files_distinct(outs, 3, ins, 2) != XS_OK)
        return xs_cli_fail();
    /* --csv -: the CSV alone on stdout, the human report to /dev/null */
    if (a->csv && xs_outfile_claim_stdout() != XS_OK)
        return xs_cli_fail();
    return 0;
}

/* Profile, trace and prediction; 0 or the exit status (error printed). */
static int load(const trace_args *a, xs_profile *p, xs_trace *t, xs_trace_prediction *pr)
{
    if (xs_profile_args_resolve(&a->pa, p) != XS_OK)
        return xs_cli_fail();
    if (xs_trace_load(a->trace, t) != XS_OK)
        return xs_cli_fail();
    if (xs_trace_predict(p, t, pr) != XS_OK) {
        xs_trace_free(t);
        return xs_cli_fail();
    }
    return 0;
}

/* --timeline and --plot; 0 or the exit status. */
static int pictures(const trace_args *a, const xs_profile *p, const xs_trace *t,
                    const xs_trace_prediction *pr, int quiet)
{
    if (a->timeline) {
        double *s = malloc(2 * t->n * sizeof *s);
        if (!s)
            return xs_cli_failf("--timeline: out of memory");
        for (size_t i = 0; i < t->n; i++) {
            s[i] = pr->tiles[i].start_ns;
            s[t->n + i] = pr->tiles[i].end_ns;
        }
        char title[600];
        snprintf(title, sizeof title, "xstage: %s, measured and predicted", a->trace);
        xs_status st = xs_timeline_write(a->timeline, t, s, s + t->n, p, title);
        free(s);
        if (st != XS_OK)
            return xs_cli_fail();
        if (!quiet)
            printf("# timeline written to %s (Chrome trace-event JSON: ui.perfetto.dev)\n",
                   a->timeline);
    }
    if (a->png) {
        int rc = plot(a->png, t, pr);
        if (rc)
            return rc;
        if (!quiet)
            printf("# plot written to %s\n", a->png);
    }
    return 0;
}

/* ---- predict --trace ------------------------------------------------------------------------- */

int xs_cmd_predict_trace(int argc, char **argv)
{
    trace_args a;
    int rc = parse(argc, argv, 0, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    xs_profile p;
    xs_trace t;
    xs_trace_prediction pr;
    if ((rc = load(&a, &p, &t, &pr)))
        return rc;
    xs_outfile of; /* atomic (xstage_outfile.h); "-": the standard output */
    if (a.csv_file && xs_outfile_open(&of, a.csv_file) != XS_OK) {
        xs_trace_prediction_free(&pr);
        xs_trace_free(&t);
        return xs_cli_fail();
    }
    if (a.csv_file) {
        fprintf(of.f, "cta,sm,seq,bytes,pred_start_ns,pred_end_ns,pred_issue_ns,pred_stall_ns,"
                "zero_start_ns,zero_end_ns\n");
        for (size_t i = 0; i < t.n; i++) {
            const xs_trace_record *r = &t.recs[i];
            const xs_trace_pred *o = &pr.tiles[i];
            const double iss = o->end_ns - o->start_ns;
            fprintf(of.f, "%d,%d,%d,%lld,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f\n", (int)r->cta,
                    (int)r->sm, (int)r->seq, (long long)r->bytes, o->start_ns, o->end_ns, iss,
                    r->bytes > 0 ? iss - xs_trace_unstalled_ns(&p, r->bytes) : 0.0,
                    o->zero_start_ns, o->zero_end_ns);
        }
        if (xs_outfile_commit(&of) != XS_OK) {
            xs_trace_prediction_free(&pr);
            xs_trace_free(&t);
            return xs_cli_fail();
        }
    }
    {
        print_profile_line(stdout, &p, a.pa.file ? a.pa.file : "embedded");
        print_trace_line(stdout, a.trace, &t);
        printf("%5s %5s %5s %10s %10s %10s %9s %9s\n", "cta", "sm", "seq", "bytes", "start",
               "end", "issue", "stall");
        printf("%5s %5s %5s %10s %10s %10s %9s %9s\n", "", "", "", "B", "us", "us", "us", "us");
        for (size_t i = 0; i < t.n; i++) {
            const xs_trace_record *r = &t.recs[i];
            const xs_trace_pred *o = &pr.tiles[i];
            const double iss = o->end_ns - o->start_ns;
            printf("%5d %5d %5d %10lld %10.3f %10.3f %9.3f %9.3f\n", (int)r->cta, (int)r->sm,
                   (int)r->seq, (long long)r->bytes, o->start_ns / 1e3, o->end_ns / 1e3,
                   iss / 1e3,
                   (r->bytes > 0 ? iss - xs_trace_unstalled_ns(&p, r->bytes) : 0.0) / 1e3);
        }
        printf("# per CTA\n%5s %5s %5s %12s %10s %10s %9s\n", "cta", "sm", "tiles", "bytes",
               "first", "last end", "stall");
        printf("%5s %5s %5s %12s %10s %10s %9s\n", "", "", "", "B", "us", "us", "us");
        double stall = 0;
        for (int c = 0; c < t.ncta; c++) {
            if (t.first[c] == t.first[c + 1])
                continue;
            double s = 0, b = 0;
            for (size_t i = t.first[c]; i < t.first[c + 1]; i++) {
                const double iss = pr.tiles[i].end_ns - pr.tiles[i].start_ns;
                if (t.recs[i].bytes > 0)
                    s += iss - xs_trace_unstalled_ns(&p, t.recs[i].bytes);
                b += (double)t.recs[i].bytes;
            }
            stall += s;
            printf("%5d %5d %5zu %12.0f %10.3f %10.3f %9.3f\n", c, (int)t.recs[t.first[c]].sm,
                   t.first[c + 1] - t.first[c], b, pr.tiles[t.first[c]].start_ns / 1e3,
                   pr.tiles[t.first[c + 1] - 1].end_ns / 1e3, s / 1e3);
        }
        printf("# total: predicted %.3f us (the latest issue end; measured %.3f us), stall %.3f us "
               "over all tiles, zero-stall predictor %.3f us; peak backlog %.0f bytes\n",
               pr.end_ns / 1e3, (double)t.end_ns / 1e3, stall / 1e3, pr.zero_end_ns / 1e3,
               pr.peak_backlog_bytes);
    }
    rc = pictures(&a, &p, &t, &pr, a.csv);
    xs_trace_prediction_free(&pr);
    xs_trace_free(&t);
    return rc;
}

/* ---- compare --------------------------------------------------------------------------------- */

typedef struct {
    size_t i;      /* record */
    double err;    /* |pred - meas| issue time (ns) */
} worst_tile;

static int by_err_desc(const void *a, const void *b)
{
    const worst_tile *x = a, *y = b;
    if (x->err != y->err)
        return x->err > y->err ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int write_csv(const char *path, const xs_profile *p, const xs_trace *t,
                     const xs_trace_prediction *pr)
{
    xs_outfile of; /* atomic: a failed write leaves the old file, if any (xstage_outfile.h) */
    if (xs_outfile_open(&of, path) != XS_OK)
        return xs_cli_fail();
    FILE *f = of.f;
    int argc;
    char **argv = xs_cli_command(&argc);
    fputs("# xstage compare:", f);
    for (int i = 0; i < argc; i++)
        fprintf(f, " %s", argv[i]);
    fputc('\n', f);
    fprintf(f, "cta,sm,seq,bytes,meas_start_ns,meas_end_ns,pred_start_ns,pred_end_ns,"
               "zero_start_ns,zero_end_ns,unstalled_ns,meas_issue_ns,pred_issue_ns,"
               "meas_stall_ns,pred_stall_ns,issue_err_pct,zero_issue_err_pct,stall_err_ns,"
               "zero_stall_err_ns\n");
    for (size_t i = 0; i < t->n; i++) {
        const xs_trace_record *r = &t->recs[i];
        const xs_trace_pred *o = &pr->tiles[i];
        const double t0 = xs_trace_unstalled_ns(p, r->bytes);
        const double mi = (double)(r->issue_end_ns - r->issue_start_ns);
        const double pi = o->end_ns - o->start_ns;
        const int cmp = r->bytes > 0 && mi > 0;
        fprintf(f, "%d,%d,%d,%lld,%lld,%lld,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,",
                (int)r->cta, (int)r->sm, (int)r->seq, (long long)r->bytes,
                (long long)r->issue_start_ns, (long long)r->issue_end_ns, o->start_ns, o->end_ns,
                o->zero_start_ns, o->zero_end_ns, t0, mi, pi, r->bytes > 0 ? mi - t0 : 0.0,
                r->bytes > 0 ? pi - t0 : 0.0);
        if (cmp)
            fprintf(f, "%.2f,%.2f,%.1f,%.1f\n", 100 * fabs(pi - mi) / mi, 100 * fabs(t0 - mi) / mi,
                    fabs(pi - mi), fabs(mi - t0));
        else
            fprintf(f, ",,,\n"); /* not compared: no bytes or no measured issue time */
    }
    return xs_outfile_commit(&of) == XS_OK ? 0 : xs_cli_fail();
}

int xs_cmd_compare(int argc, char **argv)
{
    trace_args a;
    int rc = parse(argc, argv, 1, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    xs_profile p;
    xs_trace t;
    xs_trace_prediction pr;
    if ((rc = load(&a, &p, &t, &pr)))
        return rc;
    xs_trace_summary s;
    if (xs_trace_compare(&p, &t, &pr, &s) != XS_OK) {
        xs_trace_prediction_free(&pr);
        xs_trace_free(&t);
        return xs_cli_fail();
    }
    print_profile_line(stdout, &p, a.pa.file ? a.pa.file : "embedded");
    print_trace_line(stdout, a.trace, &t);
    printf("# %zu tiles compared (bytes > 0, measured issue time > 0); stall = issue time - "
           "T_iss0 (o + [B - b]+/r); zero-stall predictor: every tile in T_iss0\n", s.ntiles);
    printf("%-34s %12s %12s  %s\n", "quantity", "model", "zero-stall", "unit");
    printf("%-34s %12.3f %12.3f  us (measured %.3f)\n", "total (latest issue end)",
           pr.end_ns / 1e3, pr.zero_end_ns / 1e3, s.total_ns / 1e3);
    printf("%-34s %+12.2f %+12.2f  %%\n", "total error", s.total_err_pct, s.zero_total_err_pct);
    printf("%-34s %12.2f %12.2f  %%\n", "CTA end error, median", s.cta_err_med_pct,
           s.zero_cta_err_med_pct);
    printf("%-34s %12.2f %12.2f  %%\n", "CTA end error, p90", s.cta_err_p90_pct,
           s.zero_cta_err_p90_pct);
    printf("%-34s %12.2f %12.2f  %%\n", "issue-time error, median", s.issue_err_med_pct,
           s.zero_issue_err_med_pct);
    printf("%-34s %12.2f %12.2f  %%\n", "issue-time error, p90", s.issue_err_p90_pct,
           s.zero_issue_err_p90_pct);
    printf("%-34s %12.3f %12.3f  us\n", "stall error, median", s.stall_err_med_ns / 1e3,
           s.zero_stall_err_med_ns / 1e3);
    printf("%-34s %12.3f %12.3f  us\n", "stall error, p90", s.stall_err_p90_ns / 1e3,
           s.zero_stall_err_p90_ns / 1e3);
    printf("%-34s %12.3f %12.3f  us (%zu tiles stall > %.1f us; ratio %.3f)\n",
           "stall error on stalled tiles, med", s.stalled_err_med_ns / 1e3,
           s.zero_stalled_err_med_ns / 1e3, s.nstalled, XS_TRACE_STALLED_NS / 1e3,
           s.stalled_ratio);
    size_t nw = 0;
    worst_tile *w = malloc((t.n ? t.n : 1) * sizeof *w);
    if (!w) {
        xs_trace_prediction_free(&pr);
        xs_trace_free(&t);
        return xs_cli_failf("compare: out of memory");
    }
    for (size_t i = 0; i < t.n; i++) {
        const double mi = (double)(t.recs[i].issue_end_ns - t.recs[i].issue_start_ns);
        if (t.recs[i].bytes > 0 && mi > 0)
            w[nw++] = (worst_tile){i, fabs(pr.tiles[i].end_ns - pr.tiles[i].start_ns - mi)};
    }
    qsort(w, nw, sizeof *w, by_err_desc);
    const size_t nlist = (size_t)a.worst < nw ? (size_t)a.worst : nw;
    if (nlist) {
        printf("# worst %zu tiles by issue-time error\n", nlist);
        printf("%5s %5s %5s %10s %10s %10s %10s %10s %10s %8s\n", "cta", "sm", "seq", "bytes",
               "start", "meas iss", "pred iss", "zero iss", "meas stl", "error");
        printf("%5s %5s %5s %10s %10s %10s %10s %10s %10s %8s\n", "", "", "", "B", "us", "us",
               "us", "us", "us", "%");
    }
    for (size_t k = 0; k < nlist; k++) {
        const xs_trace_record *r = &t.recs[w[k].i];
        const double mi = (double)(r->issue_end_ns - r->issue_start_ns);
        const double pi = pr.tiles[w[k].i].end_ns - pr.tiles[w[k].i].start_ns;
        const double t0 = xs_trace_unstalled_ns(&p, r->bytes);
        printf("%5d %5d %5d %10lld %10.3f %10.3f %10.3f %10.3f %10.3f %+8.1f\n", (int)r->cta,
               (int)r->sm, (int)r->seq, (long long)r->bytes, (double)r->issue_start_ns / 1e3,
               mi / 1e3, pi / 1e3, t0 / 1e3, (mi - t0) / 1e3, 100 * (pi - mi) / mi);
    }
    free(w);
    /* the figures, one line, for scripts and for the record */
    printf("# figures: total_err_pct %+.2f, issue_err_med_pct %.2f, stalled_tiles %zu, "
           "stall_err_med_us %.3f, zero_stall_err_med_us %.3f, stall_ratio %.3f\n",
           s.total_err_pct, s.issue_err_med_pct, s.nstalled, s.stalled_err_med_ns / 1e3,
           s.zero_stalled_err_med_ns / 1e3, s.stalled_ratio);
    if (a.csv_file && (rc = write_csv(a.csv_file, &p, &t, &pr)) == 0)
        printf("# tiles written to %s\n", a.csv_file);
    if (!rc)
        rc = pictures(&a, &p, &t, &pr, 0);
    xs_trace_prediction_free(&pr);
    xs_trace_free(&t);
    return rc;
}

/* ---- replay --windows and --timeline --------------------------------------------------------- */

int xs_replay_trace_files(const char *windows, const char *timeline, const xs_schedule *s,
                          const xs_result *m, const xs_result *pw, const int *sm, int nsm,
                          const xs_profile *p, const char *const *meta)
{
    xs_trace_record *rm = NULL, *rp = NULL;
    size_t nm = 0, np = 0;
    xs_trace t;
    memset(&t, 0, sizeof t);
    double *ps = NULL;
    int rc = 0;
    if (xs_trace_from_windows(s, m, sm, nsm, &rm, &nm) != XS_OK) {
        rc = xs_cli_fail();
        goto out;
    }
    if (windows && xs_trace_write(windows, rm, nm, 0, meta) != XS_OK) {
        rc = xs_cli_fail();
        goto out;
    }
    if (!timeline)
        goto out;
    /* the measured run and, per record in the same (producer, row) order, the schedule's
     * prediction, both on the trace's clock */
    if (xs_trace_build(rm, nm, "replay", &t) != XS_OK ||
        xs_trace_from_windows(s, pw, sm, nsm, &rp, &np) != XS_OK) {
        rc = xs_cli_fail();
        goto out;
    }
    if (np != t.n) {
        rc = xs_cli_failf("replay --timeline: %zu predicted windows for %zu measured", np, t.n);
        goto out;
    }
    if (!(ps = malloc(2 * t.n * sizeof *ps))) {
        rc = xs_cli_failf("replay --timeline: out of memory");
        goto out;
    }
    for (size_t i = 0; i < t.n; i++) {
        ps[i] = (double)(rp[i].issue_start_ns - t.origin_ns);
        ps[t.n + i] = (double)(rp[i].issue_end_ns - t.origin_ns);
    }
    if (xs_timeline_write(timeline, &t, ps, ps + t.n, p, "xstage replay: measured and predicted")
        != XS_OK)
        rc = xs_cli_fail();
out:
    free(ps);
    free(rm);
    free(rp);
    xs_trace_free(&t);
    return rc;
}
