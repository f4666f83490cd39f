// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_model.c - the CPU subcommands: predict, criterion, plan, profile. They need no GPU and run
 * on the embedded profile unless --profile FILE is given.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "xstage.h"
#include "xstage_bench.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_outfile.h"
#include "xstage_results.h"
#include "xstage_sigint.h"

#define PROFILE_OPTIONS                                                                       \
    {"profile", required_argument, 0, XS_OPT_PROFILE}, {"set", required_argument, 0, XS_OPT_SET}

#define PROFILE_HELP                                                                          \
    "  --profile FILE        calibrated profile (JSON); default: the embedded H200 PCIe one\n" \
    "  --set NAME=VALUE      override a numeric profile field (repeatable)\n"

/* Handle the shared profile options inside a getopt loop; 1 when the option was one of them. */
static int profile_opt(int c, xs_profile_args *pa, int *bad)
{
    if (c == XS_OPT_PROFILE) {
        pa->file = optarg;
        return 1;
    }
    if (c == XS_OPT_SET) {
        if (xs_profile_args_add_set(pa, optarg) != XS_OK)
            *bad = 1;
        return 1;
    }
    return 0;
}

enum { XS_OPT_GAP = XS_OPT_FIRST_FREE }; /* criterion's --gap: no short form (-g is --gpus) */

/* Text printed to a memory stream: the header and summary lines, for the report and the
 * JSON. */
typedef struct {
    char *text;
    size_t len;
    FILE *f;
} memtext;

/* 0, or the exit status after the error line */
static int mem_open(memtext *m)
{
    m->text = NULL;
    m->len = 0;
    m->f = open_memstream(&m->text, &m->len);
    return m->f ? 0 : xs_cli_failf("out of memory");
}

/* The text so far ("" when nothing); the stream is closed; free(m->text) after. */
static const char *mem_text(memtext *m)
{
    if (m->f)
        fclose(m->f);
    m->f = NULL;
    return m->text ? m->text : "";
}

/* Open the tables' outputs (xs_results_open) and the memory streams of the report's header and
 * summary; on failure nothing stays open. 0, or the exit status after the error line. */
static int report_open(xs_results *t, const char *cmd, memtext *head, memtext *tail)
{
    int rc = xs_results_open(t, cmd);
    if (!rc && !(rc = mem_open(head)) && (rc = mem_open(tail))) {
        mem_text(head);
        free(head->text);
    }
    if (rc) {
        xs_outfile_discard(&t->csv);
        xs_outfile_discard(&t->json);
    }
    return rc;
}

static void print_profile_line(FILE *f, const xs_profile *p, const char *src)
{
    fprintf(f, "# profile: %s (%s, path %s%s): r %.4g B/ns, o %.4g ns, R %.4g B/ns, Q %.6g B, "
               "Q/producer %.6g B, chunk %.6g B\n",
            src, p->device[0] ? p->device : "?", p->path, p->provisional ? ", provisional" : "",
            p->issue_bytes_per_ns, p->issue_overhead_ns, p->drain_bytes_per_ns, p->capacity_bytes,
            p->capacity_bytes_per_producer, p->chunk_bytes);
    if (p->queue_bytes_per_producer > 0 || p->reserve_bytes_per_producer > 0 ||
        p->arbitration_skew > 0 || p->buffer_bytes_per_producer > 0) {
        fprintf(f, "# profile (extended): producer queue %.6g B, reserve %.6g B per producer, "
                   "arbitration skew %.3g", p->queue_bytes_per_producer,
                p->reserve_bytes_per_producer, p->arbitration_skew);
        if (p->buffer_bytes_per_producer > 0) /* tandem queues (docs/MODEL.md) */
            fprintf(f, ", own buffer %.6g B per producer", p->buffer_bytes_per_producer);
        fputc('\n', f);
    }
}

static int have_program(const char *name)
{
    const char *path = getenv("PATH");
    if (!path)
        return 0;
    char buf[4096];
    const char *c = path;
    while (*c) {
        const char *e = strchr(c, ':');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, c, name);
        if (access(buf, X_OK) == 0)
            return 1;
        c += n + (e ? 1 : 0);
    }
    return 0;
}

/* The plot's title: text with every character outside a plain set (letters, digits, space and
 * ._,:/+=-) replaced by '_'. The title quotes the schedule's name, and nothing the user wrote
 * may reach gnuplot's command language: no quote, backquote, '@' or backslash survives. */
static void plain_text(char *out, size_t n, const char *s)
{
    size_t i = 0;
    for (; *s && i + 1 < n; s++)
        out[i++] = isalnum((unsigned char)*s) || strchr(" ._,:/+=-", *s) ? *s : '_';
    out[i] = 0;
}

/* Run gnuplot on the script plot.gp in dir (its working directory), with nothing of it shown.
 * Returns its exit status (0 ok), 256 + the signal that ended it, -1 when it did not start, or
 * -2 when this process was interrupted (gnuplot is then stopped). */
static int run_gnuplot(const char *dir)
{
    xs_sigint_install(); /* an interrupt ends the plot through the cleanup below */
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || chdir(dir) != 0)
            _exit(127);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        execlp("gnuplot", "gnuplot", "plot.gp", (char *)NULL);
        _exit(127);
    }
    int status;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return -1;
        if (xs_interrupted()) {
            kill(pid, SIGTERM);
            waitpid(pid, &status, 0);
            return -2;
        }
        struct timespec nap = {0, 10 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    if (WIFSIGNALED(status))
        return 256 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Backlog over time (top) and each producer's issue windows (bottom), through gnuplot. gnuplot
 * works in a private temporary directory with fixed file names (backlog.dat, windows.dat,
 * plot.gp, plot.png), so no path reaches its parser; the PNG is checked (size, signature) and
 * then written to png atomically (xstage_outfile.h). The directory is removed on every path,
 * an interrupt included. */
static int plot(const char *png, const xs_result *r, const char *sched, double drain_bytes_per_ns)
{
    if (!have_program("gnuplot"))
        return xs_cli_failf("--plot needs gnuplot, which is not on PATH (Debian: apt-get install "
                            "gnuplot-nox)");
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/xstage-plot-XXXXXX",
             tmp && *tmp && strlen(tmp) < 400 ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return xs_cli_failf("--plot: cannot create a temporary directory in %s: %s",
                            tmp && *tmp ? tmp : "/tmp", strerror(errno));
    char fb[600], fw[600], fs[600], fp[600];
    snprintf(fb, sizeof fb, "%s/backlog.dat", dir);
    snprintf(fw, sizeof fw, "%s/windows.dat", dir);
    snprintf(fs, sizeof fs, "%s/plot.gp", dir);
    snprintf(fp, sizeof fp, "%s/plot.png", dir);
    FILE *b = fopen(fb, "w"), *w = fopen(fw, "w"), *g = fopen(fs, "w");
    char *data = NULL;
    int rc = 0;
    if (!b || !w || !g) {
        rc = xs_cli_failf("--plot: cannot write temporary files in %s", dir);
        goto out;
    }
    /* samples are taken at acceptances; between two of them the stage drains at R, so the
     * curve falls (to empty, or to where the next acceptance finds it) before it rises again */
    fprintf(b, "0 0\n");
    for (size_t i = 0; i < r->nbacklog; i++) {
        double t = r->backlog[i].t_ns, q = r->backlog[i].backlog_bytes;
        fprintf(b, "%.6g %.6g\n", t / 1e3, q / 1048576);
        if (i + 1 < r->nbacklog) {
            double tn = r->backlog[i + 1].t_ns, empty = t + q / drain_bytes_per_ns;
            if (empty < tn) {
                fprintf(b, "%.6g 0\n", empty / 1e3);
                fprintf(b, "%.6g 0\n", tn / 1e3);
            } else {
                fprintf(b, "%.6g %.6g\n", tn / 1e3, (q - (tn - t) * drain_bytes_per_ns) / 1048576);
            }
        }
    }
    for (int row = 0; row < r->nrows; row++)
        for (int p = 0; p < r->nproducers; p++) {
            double a = r->win_start[(size_t)row * r->nproducers + p];
            double e = r->win_end[(size_t)row * r->nproducers + p];
            if (!isnan(a) && !isnan(e))
                fprintf(w, "%.6g %d %.6g %d\n", a / 1e3, p, (e - a) / 1e3, row % 8);
        }
    char title[256];
    plain_text(title, sizeof title, sched);
    fprintf(g,
            "set terminal pngcairo size 1200,800 font ',10' noenhanced\n"
            "set output 'plot.png'\n"
            "set multiplot layout 2,1 title 'xstage predict %s'\n"
            "set xlabel 'time (us)'\n"
            "set ylabel 'backlog (MiB)'\n"
            "set grid\n"
            "plot 'backlog.dat' using 1:2 with lines lw 1.5 title 'stage backlog'\n"
            "set ylabel 'producer'\n"
            "set yrange [-1:%d]\n"
            "plot 'windows.dat' using 1:2:3:(0):4 with vectors nohead lw 2 lc variable "
            "title 'issue windows (colour = row mod 8)'\n"
            "unset multiplot\n",
            title, r->nproducers);
    int werr = ferror(b) | ferror(w) | ferror(g);
    werr |= fclose(b) != 0;
    werr |= fclose(w) != 0;
    werr |= fclose(g) != 0;
    b = w = g = NULL;
    if (werr) {
        rc = xs_cli_failf("--plot: cannot write temporary files in %s", dir);
        goto out;
    }
    int status = run_gnuplot(dir);
    if (status == -2) {
        rc = xs_cli_failf("interrupted by %s while gnuplot drew the plot; %s not written",
                          xs_interrupt_name(), png);
        goto out;
    }
    if (status != 0) {
        rc = status < 0    ? xs_cli_failf("--plot: gnuplot could not be started")
             : status > 256 ? xs_cli_failf("--plot: gnuplot was killed by signal %d; %s not "
                                           "written", status - 256, png)
                           : xs_cli_failf("--plot: gnuplot failed (exit %d); %s not written",
                                          status, png);
        goto out;
    }
    /* the PNG gnuplot left: whole (its signature, more than a header) before it is copied */
    FILE *in = fopen(fp, "rb");
    size_t n = 0, cap = 0;
    if (in) {
        for (;;) {
            if (n == cap) {
                char *nd = cap < (256u << 20) ? realloc(data, cap ? 2 * cap : 1 << 16) : NULL;
                if (!nd)
                    break;
                data = nd;
                cap = cap ? 2 * cap : 1 << 16;
            }
            size_t k = fread(data + n, 1, cap - n, in);
            n += k;
            if (k == 0)
                break;
        }
        if (ferror(in) || !feof(in))
            n = 0;
        fclose(in);
    }
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n < 64 || memcmp(data, sig, sizeof sig)) {
        rc = xs_cli_failf("--plot: gnuplot wrote no usable PNG (%zu bytes; is its pngcairo "
                          "terminal installed?); %s not written", n, png);
        goto out;
    }
    if (xs_outfile_write(png, data, n) != XS_OK)
        rc = xs_cli_failf("--plot: %s", xs_errmsg());
out:
    free(data);
    if (b) fclose(b);
    if (w) fclose(w);
    if (g) fclose(g);
    unlink(fb);
    unlink(fw);
    unlink(fs);
    unlink(fp);
    rmdir(dir);
    return rc;
}

/* After option parsing: the checks predict and plan share, then their two inputs. outs[nout]
 * are the command's output files (path NULL: none), refused when one is an input; windows:
 * the simulation will record every issue window (--plot), which bounds rows x producers.
 * Returns 0, or the exit status after printing the one-line error. */
static int load_inputs(const char *cmd, int bad, int argc, char **argv, const char *sched,
                       const xs_profile_args *pa, const xs_file_arg *outs, int nout,
                       int windows, xs_profile *p, xs_schedule *s)
{
    if (bad)
        return xs_cli_fail();
    if (optind < argc)
        return xs_cli_failf("%s: unexpected argument '%s'", cmd, argv[optind]);
    if (!sched)
        return xs_cli_failf("%s: --schedule FILE is required", cmd);
    const xs_file_arg ins[] = {{"--schedule", sched}, {"--profile", pa->file}};
    if (xs_files_distinct(outs, nout, ins, 2) != XS_OK)
        return xs_cli_fail();
    if (xs_profile_args_resolve(pa, p) != XS_OK)
        return xs_cli_fail();
    if (xs_schedule_load(sched, s) != XS_OK)
        return xs_cli_fail();
    if (windows && xs_schedule_check_size(s, sched) != XS_OK) {
        xs_schedule_free(s);
        return xs_cli_fail();
    }
    return 0;
}

int xs_cmd_predict(int argc, char **argv)
{
    /* predict --trace FILE: a recorded kernel's per-CTA programs (tools/cmd_trace.c) */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--trace") || !strncmp(argv[i], "--trace=", 8) ||
            !strcmp(argv[i], "-t"))
            return xs_cmd_predict_trace(argc, argv);
    static const struct option lo[] = {
        {"schedule", required_argument, 0, 's'}, {"csv", required_argument, 0, XS_OPT_CSV},
        {"json", required_argument, 0, XS_OPT_JSON}, {"plot", required_argument, 0, XS_OPT_PLOT},
        {"sync", no_argument, 0, XS_OPT_SYNC}, {"help", no_argument, 0, 'h'}, PROFILE_OPTIONS,
        {0, 0, 0, 0}};
    const char *sched = NULL, *png = NULL;
    xs_results t = {0};
    int sync = 0, bad = 0, c;
    xs_profile_args pa = {0};
    optind = 1;
    opterr = 0; /* one line of ours (xs_cli_badopt) instead of getopt's */
    while ((c = getopt_long(argc, argv, "s:h", lo, NULL)) != -1) {
        if (profile_opt(c, &pa, &bad))
            continue;
        switch (c) {
        case 's': sched = optarg; break;
        case XS_OPT_CSV: t.csv_path = optarg; break;
        case XS_OPT_JSON: t.json_path = optarg; break;
        case XS_OPT_PLOT: png = optarg; break;
        case XS_OPT_SYNC: sync = 1; break;
        case 'h':
            printf("usage: xstage predict --schedule FILE [--csv FILE] [--json FILE] "
                   "[--plot FILE.png] [--sync]\n"
                   "Simulate the schedule producer by producer; one line per row:\n"
                   "row,producers,bytes_per_producer,gap_ns,issue_med_ns,issue_max_ns,end_ns\n\n"
                   "  -s, --schedule FILE   CSV: producers,bytes_per_producer,gap_ns (columns\n"
                   "                        by name, any order); - reads the standard input\n"
                   "  --csv FILE            also write the table as CSV (- : to stdout, alone)\n"
                   "  --json FILE           also write the report as JSON (- : to stdout, alone)\n"
                   "  --plot FILE.png       backlog over time and issue windows (gnuplot)\n"
                   "  --sync                a grid barrier between rows (default: free-running)\n"
                   "  -t, --trace FILE      a kernel's recorded trace instead of a schedule\n"
                   "                        (xstage predict --trace FILE --help)\n"
                   PROFILE_HELP);
            return 0;
        default: return xs_cli_badopt("predict", "s:h", argc, argv);
        }
    }
    xs_profile p;
    xs_schedule s;
    const xs_file_arg outs[] = {{"--plot", png}, {"--csv", t.csv_path}, {"--json", t.json_path}};
    int rc0 = load_inputs("predict", bad, argc, argv, sched, &pa, outs, 3, png != NULL, &p, &s);
    if (rc0)
        return rc0;
    xs_sim_opts so = {.sync = sync, .record_windows = png != NULL, .record_backlog = png != NULL};
    xs_result r;
    if (xs_simulate(&p, &s, &so, &r) != XS_OK) {
        xs_schedule_free(&s);
        return xs_cli_fail();
    }
    memtext head, tail;
    int rc = report_open(&t, "predict", &head, &tail);
    if (rc) {
        xs_result_free(&r);
        xs_schedule_free(&s);
        return rc;
    }
    /* a file sent to stdout (--csv -, --json -, --plot -) goes there alone */
    const int quiet = xs_results_quiet(&t) || (png && !strcmp(png, "-"));
    print_profile_line(head.f, &p, pa.file ? pa.file : "embedded");
    fprintf(head.f, "# schedule: %s, %d rows, %.6g bytes, %s producers\n",
            strcmp(sched, "-") ? sched : "stdin", s.nrows, xs_schedule_bytes(&s),
            sync ? "synchronised" : "free-running");
    fprintf(tail.f, "# total (end_ns of the last row) %.1f ns; makespan with the last gap %.1f "
            "ns; peak backlog %.0f bytes\n", r.rows[r.nrows - 1].end_ns, r.makespan_ns,
            r.peak_backlog_bytes);
    const char *htext = mem_text(&head), *ttext = mem_text(&tail);
    if (!quiet) {
        fputs(htext, stdout);
        xs_result_print(&r, &s, 0, stdout);
        fputs(ttext, stdout);
    }
    xs_results_sim(&t, htext, &r, &s);
    rc = xs_results_close(&t, ttext);
    free(head.text);
    free(tail.text);
    if (png && !rc) {
        rc = plot(png, &r, sched, p.drain_bytes_per_ns);
        if (!rc && !quiet)
            printf("# plot written to %s\n", png);
    }
    xs_result_free(&r);
    xs_schedule_free(&s);
    return rc;
}

int xs_cmd_criterion(int argc, char **argv)
{
    static const struct option lo[] = {
        {"producers", required_argument, 0, 'k'}, {"bytes", required_argument, 0, 'b'},
        {"gap", required_argument, 0, XS_OPT_GAP}, {"csv", required_argument, 0, XS_OPT_CSV},
        {"json", required_argument, 0, XS_OPT_JSON}, {"help", no_argument, 0, 'h'},
        PROFILE_OPTIONS, {0, 0, 0, 0}};
    long k = -1;
    int64_t b = -1;
    double g = -1;
    xs_results t = {0};
    int bad = 0, c;
    xs_profile_args pa = {0};
    optind = 1;
    opterr = 0; /* one line of ours (xs_cli_badopt) instead of getopt's */
    while ((c = getopt_long(argc, argv, "k:b:h", lo, NULL)) != -1) {
        if (profile_opt(c, &pa, &bad))
            continue;
        switch (c) {
        case 'k':
            if (xs_parse_int("--producers", optarg, 1, XS_MAX_PRODUCERS, &k) != XS_OK)
                return xs_cli_fail();
            break;
        case 'b':
            if (xs_parse_size("--bytes", optarg, &b) != XS_OK)
                return xs_cli_fail();
            if (b < 1)
                return xs_cli_failf("--bytes %s: a burst stores at least one byte", optarg);
            break;
        case XS_OPT_GAP:
            if (xs_parse_time_ns("--gap", optarg, &g) != XS_OK)
                return xs_cli_fail();
            break;
        case XS_OPT_CSV: t.csv_path = optarg; break;
        case XS_OPT_JSON: t.json_path = optarg; break;
        case 'h':
            printf("usage: xstage criterion --producers K --bytes B --gap NS [--csv FILE] "
                   "[--json FILE]\n"
                   "Burst-Gap closed forms and the no-backpressure criterion for steady periodic\n"
                   "bursts of K producers x B bytes separated by G of useful work.\n\n"
                   "  -k, --producers K     concurrent producers\n"
                   "  -b, --bytes B         bytes per producer per burst (K/M/G suffixes)\n"
                   "  --gap NS              useful work between bursts (ns, or with us/ms)\n"
                   "  --csv FILE            also write the table (quantity,value,unit) as CSV\n"
                   "  --json FILE           also write the report as JSON\n"
                   "                        (- for either: to stdout, instead of the report)\n"
                   PROFILE_HELP);
            return 0;
        default:
            if (optopt == 'g') /* -g is --gpus everywhere in xstage */
                return xs_cli_failf("criterion: option -g is unknown (-g means --gpus; the gap "
                                    "is --gap; --help lists the options)");
            return xs_cli_badopt("criterion", "k:b:h", argc, argv);
        }
    }
    if (bad)
        return xs_cli_fail();
    if (optind < argc)
        return xs_cli_failf("criterion: unexpected argument '%s'", argv[optind]);
    if (k < 0 || b < 0 || g < 0)
        return xs_cli_failf("criterion: --producers, --bytes and --gap are all required");
    xs_profile p;
    if (xs_profile_args_resolve(&pa, &p) != XS_OK)
        return xs_cli_fail();
    const xs_file_arg outs[] = {{"--csv", t.csv_path}, {"--json", t.json_path}};
    const xs_file_arg ins[] = {{"--profile", pa.file}};
    if (xs_files_distinct(outs, 2, ins, 1) != XS_OK)
        return xs_cli_fail();
    xs_bg o;
    xs_bg_eval(&p, (int)k, (double)b, g, &o);
    /* the table: quantity, value (as printed), unit */
    struct { const char *q; char v[40]; const char *unit; } row[16];
    int n = 0;
#define ROW(name, unitname, ...)                                                              \
    (row[n].q = (name), row[n].unit = (unitname),                                             \
     snprintf(row[n].v, sizeof row[n].v, __VA_ARGS__), n++)
    ROW("K (producers)", "", "%d", (int)k);
    ROW("B (bytes per producer)", "bytes", "%lld", (long long)b);
    ROW("V = K*B", "bytes", "%.0f", o.volume_bytes);
    ROW("G (gap)", "ns", "%.1f", g);
    ROW("Q(K) capacity", "bytes", "%.0f", o.capacity_bytes);
    ROW("T_iss0 = o + B/r", "ns", "%.1f", o.t_iss0_ns);
    ROW("V/R", "ns", "%.1f", o.v_over_r_ns);
    ROW("G* = [V/R - T_iss0]+", "ns", "%.1f", o.g_star_ns);
    ROW("q_peak0 = [V - R*T_iss0]+", "bytes", "%.0f", o.q_peak0_bytes);
    ROW("T_iss(G) = max(T_iss0, V/R - G)", "ns", "%.1f", o.t_iss_ns);
    ROW("dT_iss = [V/R - G - T_iss0]+", "ns", "%.1f", o.delta_t_iss_ns);
    ROW("T_period = max(T_iss0 + G, V/R)", "ns", "%.1f", o.t_period_ns);
    ROW("T_iss_iso (isolated burst)", "ns", "%.1f", o.t_iss_iso_ns);
    ROW("T_iss steady (capacity-aware)", "ns", "%.1f", o.t_iss_steady_ns);
    ROW("T_period steady (capacity-aware)", "ns", "%.1f", o.t_period_steady_ns);
#undef ROW
    memtext head, tail;
    int rc = report_open(&t, "criterion", &head, &tail);
    if (rc)
        return rc;
    print_profile_line(head.f, &p, pa.file ? pa.file : "embedded");
    fprintf(tail.f, "rate:     V/(T_iss0+G) = %.4g B/ns %s R = %.4g B/ns  -> %s\n",
            o.injection_bytes_per_ns, o.rate_ok ? "<=" : ">", p.drain_bytes_per_ns,
            o.rate_ok ? "holds" : "fails");
    fprintf(tail.f, "capacity: q_peak0 = %.6g B %s Q(K) = %.6g B  -> %s\n", o.q_peak0_bytes,
            o.capacity_ok ? "<=" : ">", o.capacity_bytes, o.capacity_ok ? "holds" : "fails");
    fprintf(tail.f, "verdict:  %s\n", o.no_backpressure ? "no backpressure (piggyback)"
                                                         : "backpressure (reshape)");
    const char *htext = mem_text(&head), *ttext = mem_text(&tail);
    if (!xs_results_quiet(&t)) {
        fputs(htext, stdout);
        printf("%-34s %14s  %s\n", "quantity", "value", "unit");
        for (int i = 0; i < n; i++)
            printf("%-34s %14s  %s\n", row[i].q, row[i].v, row[i].unit);
        fputs(ttext, stdout);
    }
    static const char *const name[3] = {"quantity", "value", "unit"};
    static const char *const unit[3] = {"", "", ""};
    if (t.csv.f)
        fputs("quantity,value,unit\n", t.csv.f);
    xs_results_head(&t, htext, name, unit, 3);
    for (int i = 0; i < n; i++) {
        if (t.csv.f) {
            xs_csv_field(t.csv.f, row[i].q);
            fprintf(t.csv.f, ",%s,%s\n", row[i].v, row[i].unit);
        }
        const char *const val[3] = {row[i].q, row[i].v, row[i].unit};
        xs_results_row(&t, name, val, 3);
    }
    rc = xs_results_close(&t, ttext);
    free(head.text);
    free(tail.text);
    return rc;
}

int xs_cmd_plan(int argc, char **argv)
{
    static const struct option lo[] = {
        {"schedule", required_argument, 0, 's'}, {"out", required_argument, 0, 'o'},
        {"move-cost", required_argument, 0, 'm'}, {"headroom", required_argument, 0, 'H'},
        {"max-split", required_argument, 0, 'x'}, {"no-move", no_argument, 0, 'n'},
        {"csv", required_argument, 0, XS_OPT_CSV}, {"json", required_argument, 0, XS_OPT_JSON},
        {"help", no_argument, 0, 'h'}, PROFILE_OPTIONS, {0, 0, 0, 0}};
    const char *sched = NULL, *outp = NULL;
    xs_results t = {0};
    int bad = 0, c;
    xs_plan_opts po;
    xs_plan_opts_default(&po);
    xs_profile_args pa = {0};
    optind = 1;
    opterr = 0; /* one line of ours (xs_cli_badopt) instead of getopt's */
    while ((c = getopt_long(argc, argv, "s:o:h", lo, NULL)) != -1) {
        if (profile_opt(c, &pa, &bad))
            continue;
        switch (c) {
        case 's': sched = optarg; break;
        case 'o': outp = optarg; break;
        case 'm':
            if (xs_parse_double("--move-cost", optarg, 0, 100, &po.move_cost) != XS_OK)
                return xs_cli_fail();
            break;
        case 'H':
            if (xs_parse_double("--headroom", optarg, 0.01, 1, &po.headroom) != XS_OK)
                return xs_cli_fail();
            break;
        case 'x': {
            long v;
            if (xs_parse_int("--max-split", optarg, 1, 4096, &v) != XS_OK)
                return xs_cli_fail();
            po.max_split = (int)v;
            break;
        }
        case 'n': po.allow_move = 0; break;
        case XS_OPT_CSV: t.csv_path = optarg; break;
        case XS_OPT_JSON: t.json_path = optarg; break;
        case 'h':
            printf("usage: xstage plan --schedule FILE [--out FILE] [options]\n"
                   "The gaps of the schedule are the useful work available between bursts.\n"
                   "Piggyback when every burst meets the criterion; otherwise reshape: split\n"
                   "bursts to fit the headroom and move work earlier so the injection rate\n"
                   "stays at or under R. Prints both predictions; --out writes the plan.\n\n"
                   "  -s, --schedule FILE   the schedule to plan\n"
                   "  -o, --out FILE        write the planned schedule (CSV; - : to stdout, alone)\n"
                   "  --move-cost X         extra work per unit of work moved (locality), def 0\n"
                   "  --headroom F          fraction of Q(K) a planned burst may fill, def 0.9\n"
                   "  --max-split N         most pieces per burst, default 64\n"
                   "  --no-move             split only; never move work between rows\n"
                   "  --csv FILE            write the plan's predicted rows as CSV\n"
                   "  --json FILE           the same rows, with the report's lines, as JSON\n"
                   "                        (- for either: to stdout, instead of the report)\n"
                   PROFILE_HELP);
            return 0;
        default: return xs_cli_badopt("plan", "s:o:h", argc, argv);
        }
    }
    xs_profile p;
    xs_schedule s;
    const xs_file_arg outs[] = {{"--out", outp}, {"--csv", t.csv_path}, {"--json", t.json_path}};
    int rc0 = load_inputs("plan", bad, argc, argv, sched, &pa, outs, 3, 0, &p, &s);
    if (rc0)
        return rc0;
    xs_plan pl;
    if (xs_plan_schedule(&p, &s, &po, &pl) != XS_OK) {
        xs_schedule_free(&s);
        return xs_cli_fail();
    }
    xs_result r = {0};
    memtext head, tail;
    int rc = 0, have_r = 0;
    if ((t.csv_path || t.json_path) && xs_simulate(&p, &pl.planned, NULL, &r) != XS_OK)
        rc = xs_cli_fail();
    else
        have_r = t.csv_path || t.json_path;
    if (!rc)
        rc = report_open(&t, "plan", &head, &tail);
    if (rc) {
        if (have_r)
            xs_result_free(&r);
        xs_plan_free(&pl);
        xs_schedule_free(&s);
        return rc;
    }
    /* a file sent to stdout (--csv -, --json -, --out -) goes there alone */
    const int quiet = xs_results_quiet(&t) || (outp && !strcmp(outp, "-"));
    print_profile_line(head.f, &p, pa.file ? pa.file : "embedded");
    fprintf(head.f, "# schedule: %s, %d rows, %.6g bytes, %.1f us of useful work\n",
            strcmp(sched, "-") ? sched : "stdin", s.nrows, xs_schedule_bytes(&s),
            xs_schedule_gap_ns(&s) / 1e3);
    FILE *f = tail.f;
    fprintf(f, "criterion:     %s\n", pl.criterion_ok ? "holds on every burst"
                                                      : "fails on at least one burst");
    fprintf(f, "decision:      %s\n", pl.how);
    fprintf(f, "%-14s %12s  %s\n", "prediction", "makespan", "");
    fprintf(f, "%-14s %12.1f  us\n", "original", pl.original_ns / 1e3);
    fprintf(f, "%-14s %12.1f  us  (%.3fx)\n", "planned", pl.planned_ns / 1e3,
            pl.original_ns / pl.planned_ns);
    fprintf(f, "%-14s %12.1f  us  (max(work + unstalled issue, (bytes - Q)/R))\n", "bound",
            pl.bound_ns / 1e3);
    const char *htext = mem_text(&head), *ttext = mem_text(&tail);
    if (!quiet) {
        fputs(htext, stdout);
        fputs(ttext, stdout);
    }
    if (have_r) {
        xs_results_sim(&t, htext, &r, &pl.planned);
        xs_result_free(&r);
    }
    rc = xs_results_close(&t, ttext);
    free(head.text);
    free(tail.text);
    if (outp) {
        char comment[1024];
        snprintf(comment, sizeof comment,
                 "planned by xstage plan from %s\n%s\npredicted makespan %.1f us (original %.1f "
                 "us)", sched, pl.how, pl.planned_ns / 1e3, pl.original_ns / 1e3);
        if (!rc && xs_schedule_save(&pl.planned, outp, comment) != XS_OK)
            rc = xs_cli_fail();
        else if (!rc && !quiet)
            printf("# planned schedule written to %s (%d rows)\n", outp, pl.planned.nrows);
    }
    xs_plan_free(&pl);
    xs_schedule_free(&s);
    return rc;
}

int xs_cmd_profile(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: xstage profile show [FILE] [--set NAME=VALUE ...]\n"
               "       xstage profile check FILE\n"
               "show prints the numbers (the embedded profile without FILE); check validates\n"
               "a profile (JSON syntax, every required field, types, physical plausibility).\n");
        return argc < 2 ? 1 : 0;
    }
    const char *verb = argv[1];
    if (strcmp(verb, "show") && strcmp(verb, "check"))
        return xs_cli_failf("profile: unknown action '%s' (show or check)", verb);
    xs_profile_args pa = {0};
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            if (xs_profile_args_add_set(&pa, argv[++i]) != XS_OK)
                return xs_cli_fail();
        } else if (!strncmp(argv[i], "--set=", 6)) {
            if (xs_profile_args_add_set(&pa, argv[i] + 6) != XS_OK)
                return xs_cli_fail();
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return xs_cli_failf("profile %s: option '%s' is unknown (--help lists the "
                                "options)", verb, argv[i]);
        } else if (!pa.file) {
            pa.file = argv[i];
        } else {
            return xs_cli_failf("profile %s: more than one file given", verb);
        }
    }
    if (!strcmp(verb, "check") && !pa.file)
        return xs_cli_failf("profile check: FILE is required");
    xs_profile p;
    if (xs_profile_args_resolve(&pa, &p) != XS_OK)
        return xs_cli_fail();
    if (!strcmp(verb, "check")) {
        printf("%s: ok (%s, path %s%s)\n", pa.file, p.device[0] ? p.device : "no device",
               p.path, p.provisional ? ", provisional" : "");
        return 0;
    }
    xs_profile_print(&p, stdout);
    return 0;
}
