// SPDX-License-Identifier: Apache-2.0
/*
 * test_bench.c - the CPU half of the bench harness (include/xstage_bench.h): the common options
 * merged with a workload's (defaults, values, --quick, errors: one line and a non-zero result),
 * statistics, the interleaved rounds (order, rotation, verification, samples), one table
 * written as the human table, CSV and JSON with the same columns and values, the sweep over
 * points (failures, wrong data, lockstep, sticky errors, --max-time, an interrupt), and the -g
 * verdict vector.
 */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xstage_bench.h"
#include "xt.h"

/* ---- a workload's options ------------------------------------------------------------------- */

enum { O_LEAD = XS_OPT_FIRST_FREE, O_BULK };
typedef struct {
    int lead, bulk, peers;
} wl_opts;

static xs_status wl_opt(void *ctx, int ch, const char *arg)
{
    wl_opts *w = (wl_opts *)ctx;
    long v;
    switch (ch) {
    case 'p': XS_TRY(xs_parse_int("--peers", arg, 1, 64, &v)); w->peers = (int)v; return XS_OK;
    case O_LEAD: XS_TRY(xs_parse_int("--lead", arg, 0, 100, &v)); w->lead = (int)v; return XS_OK;
    case O_BULK: w->bulk = 1; return XS_OK;
    }
    return xs_seterr(XS_EINVAL, "bench wl: option %d not handled", ch);
}

static const struct option wl_long[] = {{"peers", required_argument, 0, 'p'},
                                        {"lead", required_argument, 0, O_LEAD},
                                        {"bulk", no_argument, 0, O_BULK},
                                        {0, 0, 0, 0}};

static xs_bench_spec wl_spec(wl_opts *w)
{
    xs_bench_spec s = {"bench wl", "  a test workload\n", "p:", wl_long,
                       "  -p, --peers N   peers\n      --lead D    lead\n      --bulk\n",
                       wl_opt, w, 5, 1, 3, 1000, 12345, 2.0, 200.0};
    return s;
}

/* Run xs_bench_parse on a space-separated command line with stderr (and stdout) captured;
 * returns its result, *lines the stderr lines. */
static int parse_line(const xs_bench_spec *s, const char *line, xs_bench_common *c, int *lines,
                      char *err, size_t errn)
{
    static char buf[1024];
    char *argv[32];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    argv[argc++] = (char *)"wl";
    for (char *sv = NULL, *t = strtok_r(buf, " ", &sv); t && argc < 31; t = strtok_r(NULL, " ", &sv))
        argv[argc++] = t;
    argv[argc] = NULL;
    fflush(stderr);
    fflush(stdout);
    FILE *e = tmpfile(), *o = tmpfile();
    const int se = dup(2), so = dup(1);
    dup2(fileno(e), 2);
    dup2(fileno(o), 1);
    const int rc = xs_bench_parse(s, argc, argv, c);
    fflush(stderr);
    fflush(stdout);
    dup2(se, 2);
    dup2(so, 1);
    close(se);
    close(so);
    rewind(e);
    *lines = 0;
    err[0] = 0;
    char l[512];
    while (fgets(l, sizeof l, e)) {
        if (!*lines)
            snprintf(err, errn, "%s", l);
        ++*lines;
    }
    fclose(e);
    fclose(o);
    return rc;
}

static void test_options(void)
{
    wl_opts w = {0, 0, 0};
    xs_bench_spec s = wl_spec(&w);
    xs_bench_common c;
    int lines;
    char err[512];

    XT_CHECK(parse_line(&s, "", &c, &lines, err, sizeof err) == 0, "no options");
    XT_CHECK(c.b.iters == 5 && c.b.warmup == 1 && c.b.seed == 12345 && c.timeout_s == 2.0 &&
             c.max_time_s == 200.0 && !c.csv && !c.json && !c.quick && !c.b.gpus_set,
             "defaults");

    XT_CHECK(parse_line(&s, "-n 7 -w 0 -d 3 --seed 9 --csv a.csv --json a.json --timeout 0.5 "
                        "--max-time 0 --set drain_bytes_per_ns=20 --lead 4 -p 8 --bulk",
                        &c, &lines, err, sizeof err) == 0, "all options: %s", err);
    XT_CHECK(c.b.iters == 7 && c.b.iters_set && c.b.warmup == 0 && c.b.device == 3 &&
             c.b.device_set && c.b.seed == 9, "common values");
    XT_CHECK(c.csv && !strcmp(c.csv, "a.csv") && c.json && !strcmp(c.json, "a.json"), "files");
    XT_CHECK(c.timeout_s == 0.5 && c.max_time_s == 0 && c.b.pa.nsets == 1, "timeout, set");
    XT_CHECK(w.lead == 4 && w.peers == 8 && w.bulk == 1, "workload values reach its handler");

    XT_CHECK(parse_line(&s, "--quick", &c, &lines, err, sizeof err) == 0 && c.quick &&
             c.b.iters == 3, "--quick: -n 3");
    XT_CHECK(parse_line(&s, "--quick -n 9", &c, &lines, err, sizeof err) == 0 && c.b.iters == 9,
             "--quick keeps a given -n");
    XT_CHECK(parse_line(&s, "-g 4", &c, &lines, err, sizeof err) == 0 && c.b.gpus == 4 &&
             c.b.gpus_set, "-g");
    XT_CHECK(parse_line(&s, "-h", &c, &lines, err, sizeof err) == -1 && lines == 0, "--help");

    /* errors: one line on stderr, a result of 1 */
    static const char *const bad[] = {
        "-n 0", "-n x", "-n 1001", "-w 101", "-d -1", "-g 65", "--seed -3", "--timeout 0",
        "--timeout 1h", "--max-time -1", "--lead 101", "--lead", "-p 0", "--nosuch",
        "-z", "stray", "-n", "--iters",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const int rc = parse_line(&s, bad[i], &c, &lines, err, sizeof err);
        XT_CHECK(rc == 1, "'%s': result %d", bad[i], rc);
        XT_CHECK(lines == 1 && !strncmp(err, "xstage: error: ", 15), "'%s': %d lines: %s",
                 bad[i], lines, err);
    }
    parse_line(&s, "--lead 200", &c, &lines, err, sizeof err);
    XT_CHECK(strstr(err, "--lead") && strstr(err, "200"), "the line names option and value: %s",
             err);
    parse_line(&s, "--iters", &c, &lines, err, sizeof err);
    XT_CHECK(strstr(err, "'--iters'") != NULL, "a long option is named as typed: %s", err);

    /* a workload table that reuses a common name, id or letter */
    static const struct option clash_long[] = {{"iters", required_argument, 0, O_LEAD},
                                               {0, 0, 0, 0}};
    static const struct option clash_id[] = {{"count", required_argument, 0, 'n'},
                                             {0, 0, 0, 0}};
    xs_bench_spec s2 = s;
    s2.longopts = clash_long;
    XT_CHECK(parse_line(&s2, "", &c, &lines, err, sizeof err) == 1 && lines == 1 &&
             strstr(err, "--iters"), "clashing name: %s", err);
    s2.longopts = clash_id;
    XT_CHECK(parse_line(&s2, "", &c, &lines, err, sizeof err) == 1 && lines == 1,
             "clashing id: %s", err);
    s2.longopts = wl_long;
    s2.shortopts = "p:n:";
    XT_CHECK(parse_line(&s2, "", &c, &lines, err, sizeof err) == 1 && lines == 1 &&
             strstr(err, "-n"), "clashing letter: %s", err);

    /* the usage names both parts */
    char *u = NULL;
    size_t un = 0;
    FILE *f = open_memstream(&u, &un);
    xs_bench_usage(f, &s);
    fclose(f);
    XT_CHECK(strstr(u, "usage: xstage bench wl") && strstr(u, "--lead") && strstr(u, "--iters") &&
             strstr(u, "--json") && strstr(u, "[12345]"), "usage: %s", u);
    free(u);
}

/* ---- statistics ------------------------------------------------------------------------------ */

static void test_stats(void)
{
    const double x[] = {5, 1, 4, NAN, 2, 3};
    xs_bench_stat s = xs_bench_stat_of(x, 6);
    XT_CHECK(s.n == 5, "NaN left out: n %d", s.n);
    XT_NEAR(s.med, 3.0, 1e-12);
    XT_NEAR(s.min, 1.0, 1e-12);
    XT_NEAR(s.max, 5.0, 1e-12);
    XT_NEAR(s.p10, 1.4, 1e-12); /* type 7: 1 + 0.4 (2 - 1) */
    XT_NEAR(s.p90, 4.6, 1e-12);
    XT_NEAR(xs_bench_spread_pct(&s), 100.0 * 4 / 3, 1e-12);
    const double y[] = {10, 12};
    s = xs_bench_stat_of(y, 2);
    XT_NEAR(s.med, 11.0, 1e-12);
    s = xs_bench_stat_of(x, 0);
    XT_CHECK(s.n == 0 && isnan(s.med) && isnan(s.min) && isnan(xs_bench_spread_pct(&s)),
             "empty: NaN");
    const double z[] = {NAN, NAN};
    s = xs_bench_stat_of(z, 2);
    XT_CHECK(s.n == 0 && isnan(s.max), "all NaN");
}

/* ---- rounds ------------------------------------------------------------------------------------ */

typedef struct {
    char log[512];
    int bad_var;  /* verification of this variant fails (-1: none) */
    int fail_at;  /* the run with this index fails (-1: never) */
    int runs, befores, verifies;
} fake;

static xs_status fake_before(void *ctx, int v, int round)
{
    ((fake *)ctx)->befores++;
    return XS_OK;
}

static xs_status fake_run(void *ctx, int v, int round, double *us)
{
    fake *f = (fake *)ctx;
    if (f->runs++ == f->fail_at)
        return xs_seterr(XS_ECUDA, "fake failure at index %d", f->runs - 1);
    const size_t n = strlen(f->log);
    snprintf(f->log + n, sizeof f->log - n, "%d", v);
    *us = 100.0 * v + round;
    return XS_OK;
}

static xs_status fake_verify(void *ctx, int v, int round, int *ok)
{
    fake *f = (fake *)ctx;
    f->verifies++;
    *ok = v != f->bad_var;
    return XS_OK;
}

static void test_rounds(void)
{
    xs_bench_variant v[4] = {{"a", 1}, {"b", 1}, {"c", 0}, {"d", 1}};
    fake f;
    memset(&f, 0, sizeof f);
    f.bad_var = 3;
    f.fail_at = -1;
    xs_bench_rounds r = {1, 3, 1, XS_BENCH_VERIFY_EVERY, fake_before, &f, fake_run, fake_verify,
                         &f};
    double s[4 * 3];
    int ok[4];
    XT_CHECK(xs_bench_rounds_run(&r, v, 4, s, ok) == XS_OK, "rounds");
    XT_CHECK(!strcmp(f.log, "013130301013"), "rotated order: %s", f.log);
    XT_CHECK(f.runs == 12 && f.befores == 12 && f.verifies == 12, "runs %d befores %d verifies %d",
             f.runs, f.befores, f.verifies);
    XT_CHECK(ok[0] && ok[1] && ok[2] && !ok[3], "ok flags %d %d %d %d", ok[0], ok[1], ok[2],
             ok[3]);
    /* samples: variant-major, timed rounds only (round 1..3), NaN where off */
    XT_CHECK(s[0] == 1 && s[1] == 2 && s[2] == 3 && s[3] == 101 && s[5] == 103, "samples a, b");
    XT_CHECK(isnan(s[6]) && isnan(s[8]) && s[9] == 301, "samples c (off), d");

    memset(&f, 0, sizeof f);
    f.bad_var = -1;
    f.fail_at = -1;
    r.rotate = 0;
    r.verify_when = XS_BENCH_VERIFY_LAST;
    r.before = NULL;
    XT_CHECK(xs_bench_rounds_run(&r, v, 4, s, NULL) == XS_OK, "fixed order");
    XT_CHECK(!strcmp(f.log, "013013013013"), "table order: %s", f.log);
    XT_CHECK(f.verifies == 3, "last round verified only: %d", f.verifies);

    memset(&f, 0, sizeof f);
    f.bad_var = -1;
    f.fail_at = 4;
    XT_CHECK(xs_bench_rounds_run(&r, v, 4, s, ok) == XS_ECUDA && strstr(xs_errmsg(), "index 4"),
             "the first error ends the rounds: %s", xs_errmsg());
    XT_CHECK(f.runs == 5, "no run after the error: %d", f.runs);
}

/* ---- table, CSV, JSON ------------------------------------------------------------------------ */

typedef struct {
    const char *config;
    int tokens, verified;
    char choice[16];
    xs_bench_stat t[2];
    double bound_us;
} row_t;

static double ratio(const void *row, int arg)
{
    const row_t *r = (const row_t *)row;
    return r->t[0].med / r->t[arg].med;
}

static const xs_bench_col cols[] = {
    {"config", "", "%s", XS_COL_STR, offsetof(row_t, config), 0, 0, 0, 12, 0},
    {"tokens", "", "%d", XS_COL_INT, offsetof(row_t, tokens), 0, 0, 0, 0, 0},
    {"wave_us", "us", "%.1f", XS_COL_STAT, offsetof(row_t, t[0]), 0, 0, 0, 0, 0},
    {"auto_us", "us", "%.1f", XS_COL_STAT, offsetof(row_t, t[1]), 0, 0, 0, 0, 0},
    {"wave_over_auto", "x", "%.3f", XS_COL_DOUBLE, 0, ratio, 0, 1, 0, 0},
    {"bound_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(row_t, bound_us), 0, 0, 0, 0,
     XS_COL_FILE},
    {"choice", "", "%s", XS_COL_CHARS, offsetof(row_t, choice), 0, 0, 0, 0, 0},
    {"verified", "", NULL, XS_COL_BOOL, offsetof(row_t, verified), 0, 0, 0, 0, 0},
};
enum { NCOLS = sizeof cols / sizeof cols[0], NLEAVES = NCOLS + 2 * 3 };

static int count_fields(const char *line, char sep)
{
    int n = *line ? 1 : 0;
    for (; *line && *line != '\n'; line++)
        n += *line == sep;
    return n;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void test_table(void)
{
    xs_bench_table t;
    XT_CHECK(xs_bench_table_init(&t, cols, NCOLS) == XS_OK, "init: %s", xs_errmsg());
    XT_CHECK(t.n == NLEAVES, "leaves %d", t.n);
    XT_CHECK(!strcmp(t.leaf[2].name, "wave_us") && !strcmp(t.leaf[3].name, "wave_us_spread") &&
             !strcmp(t.leaf[4].name, "wave_us_min") && !strcmp(t.leaf[5].name, "wave_us_max"),
             "stat leaves");

    /* description errors */
    xs_bench_col badc[2] = {cols[0], cols[0]};
    XT_CHECK(xs_bench_table_init(&t, badc, 2) == XS_EINVAL && strstr(xs_errmsg(), "twice"),
             "duplicate: %s", xs_errmsg());
    badc[1].name = "Bad-Name";
    XT_CHECK(xs_bench_table_init(&t, badc, 2) == XS_EINVAL, "bad name");
    badc[1].name = "x";
    badc[1].fmt = NULL;
    XT_CHECK(xs_bench_table_init(&t, badc, 2) == XS_EINVAL, "no format");
    XT_CHECK(xs_bench_table_init(&t, cols, NCOLS) == XS_OK, "init again");

    const double a[] = {100, 110, 90}, b[] = {50, 55, NAN};
    row_t rows[2] = {{"olmoe", 512, 1, "inter D=3", {xs_bench_stat_of(a, 3),
                                                       xs_bench_stat_of(b, 3)}, 80},
                     {"mix,tral \"q\"", 1024, 0, "wave", {xs_bench_stat_of(a, 3),
                                                          xs_bench_stat_of(a, 0)}, NAN}};

    char path_csv[] = "/tmp/xs_bench_csv_XXXXXX", path_json[] = "/tmp/xs_bench_json_XXXXXX";
    close(mkstemp(path_csv));
    close(mkstemp(path_json));
    FILE *out = tmpfile();
    xs_bench_report r;
    XT_CHECK(xs_bench_report_open(&r, "bench wl", &t, out, path_csv, path_json) == XS_OK,
             "open: %s", xs_errmsg());
    xs_bench_report_json_object(&r, "gpu", "\"device\": \"fake\", \"sms\": 132");
    xs_bench_report_text(&r, "# device: fake\n# sms: 132\n");
    xs_bench_report_note(&r, "times: median of %d", 3);
    xs_bench_report_begin(&r);
    xs_bench_report_row(&r, &rows[0]);
    xs_bench_report_note(&r, "between rows: the report only");
    xs_bench_report_row(&r, &rows[1]);
    xs_bench_report_end(&r);
    xs_bench_report_note(&r, "summary %d", 1);
    XT_CHECK(xs_bench_report_close(&r, 2, 1, 0) == 1, "a failure: exit 1");

    /* the human table: names, units, two rows; file-only columns and min/max left out */
    rewind(out);
    char line[1024], head[1024] = "", units[1024] = "", row1[1024] = "", last[1024] = "";
    int nl = 0;
    while (fgets(line, sizeof line, out)) {
        if (line[0] != '#') {
            char *dst[] = {head, units, row1};
            if (nl < 3)
                snprintf(dst[nl], sizeof head, "%s", line);
            nl++;
        } else {
            snprintf(last, sizeof last, "%s", line);
        }
    }
    fclose(out);
    XT_CHECK(nl == 4, "table lines %d", nl);
    XT_CHECK(strstr(head, "wave_us  sprd") && !strstr(head, "wave_us_min") &&
             !strstr(head, "bound_us"), "table head: %s", head);
    XT_CHECK(strstr(units, "us") && strstr(units, "%"), "units row: %s", units);
    XT_CHECK(strstr(row1, "olmoe") && strstr(row1, "100.0") && strstr(row1, "20.0") &&
             strstr(row1, "yes"), "row: %s", row1);
    XT_CHECK(!strcmp(last, "# bench wl FAILED: 1 point(s) failed or did not verify\n"),
             "verdict: %s", last);

    /* CSV: the units line and the header have every leaf; rows as many fields */
    char *csv = slurp(path_csv);
    XT_CHECK(csv != NULL, "csv read");
    char *u = csv ? strstr(csv, "# units: ") : NULL;
    char *h = u ? strchr(u, '\n') + 1 : NULL;
    XT_CHECK(h && count_fields(u + 9, ',') == NLEAVES && count_fields(h, ',') == NLEAVES,
             "csv units and header: %d leaves", NLEAVES);
    char *r1 = h ? strchr(h, '\n') + 1 : NULL;
    static const char want1[] =
        "olmoe,512,100.0,20.0,90.0,110.0,52.5,9.5,50.0,55.0,1.905,80.0,inter D=3,true\n";
    XT_CHECK(r1 && !strncmp(r1, want1, sizeof want1 - 1), "csv row 1: %.90s", r1 ? r1 : "");
    XT_CHECK(csv && strstr(csv, "\"mix,tral \"\"q\"\"\",1024,") && strstr(csv, ",nan,") &&
             strstr(csv, ",false\n"), "csv quoting, nan, false");
    XT_CHECK(csv && strstr(csv, "# device: fake\n") && strstr(csv, "# summary 1\n") &&
             strstr(csv, "# bench wl FAILED") && !strstr(csv, "between rows"), "csv notes");

    /* JSON: valid; columns = the CSV header; each row has those keys with the same numbers */
    json_error_t je;
    json_t *doc = json_load_file(path_json, 0, &je);
    XT_CHECK(doc != NULL, "json parses: %s (line %d)", je.text, je.line);
    if (doc) {
        json_t *jc = json_object_get(doc, "columns"), *jr = json_object_get(doc, "rows");
        XT_CHECK(json_array_size(jc) == NLEAVES && json_array_size(jr) == 2, "json sizes");
        for (size_t i = 0; i < json_array_size(jc) && i < (size_t)t.n; i++) {
            const char *nm = json_string_value(json_object_get(json_array_get(jc, i), "name"));
            XT_CHECK(nm && !strcmp(nm, t.leaf[i].name), "json column %zu", i);
            XT_CHECK(json_object_get(json_array_get(jr, 0), t.leaf[i].name) != NULL,
                     "row key %s", t.leaf[i].name);
        }
        json_t *j0 = json_array_get(jr, 0), *j1 = json_array_get(jr, 1);
        XT_NEAR(json_number_value(json_object_get(j0, "wave_us_spread")), 20.0, 1e-12);
        XT_NEAR(json_number_value(json_object_get(j0, "wave_over_auto")), 1.905, 1e-12);
        XT_CHECK(json_is_true(json_object_get(j0, "verified")) &&
                 json_is_false(json_object_get(j1, "verified")), "json booleans");
        XT_CHECK(json_is_null(json_object_get(j1, "auto_us")) &&
                 json_is_null(json_object_get(j1, "bound_us")), "NaN is null");
        XT_CHECK(!strcmp(json_string_value(json_object_get(j1, "config")), "mix,tral \"q\""),
                 "json string escaped");
        XT_CHECK(json_array_size(json_object_get(doc, "notes")) == 3 &&
                 json_array_size(json_object_get(doc, "summary")) == 2, "notes 3, summary 2");
        XT_CHECK(json_is_false(json_object_get(doc, "ok")) &&
                 json_integer_value(json_object_get(doc, "failures")) == 1, "json verdict");
        XT_CHECK(json_integer_value(json_object_get(json_object_get(doc, "gpu"), "sms")) == 132,
                 "gpu object");
        json_decref(doc);
    }

    /* an OK run, no notes, no files; an interrupted run */
    out = tmpfile();
    XT_CHECK(xs_bench_report_open(&r, "bench wl", &t, out, NULL, path_json) == XS_OK, "open");
    xs_bench_report_begin(&r);
    xs_bench_report_row(&r, &rows[0]);
    xs_bench_report_end(&r);
    XT_CHECK(xs_bench_report_close(&r, 1, 0, 0) == 0, "OK: exit 0");
    doc = json_load_file(path_json, 0, &je);
    XT_CHECK(doc && json_is_true(json_object_get(doc, "ok")) &&
             json_array_size(json_object_get(doc, "notes")) == 0, "ok json: %s", je.text);
    json_decref(doc);
    rewind(out);
    while (fgets(line, sizeof line, out))
        snprintf(last, sizeof last, "%s", line);
    XT_CHECK(!strcmp(last, "# bench wl OK: 1 points, every run verified\n"), "ok line: %s",
             last);
    fclose(out);
    out = tmpfile();
    XT_CHECK(xs_bench_report_open(&r, "bench wl", &t, out, path_csv, NULL) == XS_OK, "open");
    xs_bench_report_begin(&r);
    xs_bench_report_row(&r, &rows[0]);
    xs_bench_report_note(&r, "detail under a row");
    xs_bench_report_end(&r);
    XT_CHECK(xs_bench_report_close(&r, 0, 0, 1) == 1, "interrupted: exit 1");
    csv = slurp(path_csv);
    XT_CHECK(csv && !strstr(csv, "detail under a row") &&
             strstr(csv, "# INTERRUPTED: partial results"), "CSV alone: rows contiguous");
    fclose(out);
    XT_CHECK(xs_bench_report_open(&r, "bench wl", &t, stdout, "/nonexistent/x.csv", NULL) ==
                 XS_EIO && strstr(xs_errmsg(), "--csv /nonexistent/x.csv"),
             "unwritable: %s", xs_errmsg());
    unlink(path_csv);
    unlink(path_json);
}

/* ---- the sweep -------------------------------------------------------------------------------- */

typedef struct {
    int id, verified;
} pt_row;

typedef struct {
    int fail_at, fail_code, wrong_at, late_from, interrupt_at, sticky_calls, calls;
} pt_ctx;

static xs_status pt_point(void *ctx, int i, void *row, int *verified)
{
    pt_ctx *c = (pt_ctx *)ctx;
    c->calls++;
    if (i == c->fail_at)
        return xs_seterr((xs_status)c->fail_code, "point %d broke", i);
    pt_row *r = (pt_row *)row;
    r->id = i;
    r->verified = *verified = i != c->wrong_at;
    return XS_OK;
}

static void pt_label(void *ctx, int i, char *buf, size_t n) { snprintf(buf, n, "P%d", i); }

static void pt_detail(void *ctx, int i, const void *row, xs_bench_report *r)
{
    xs_bench_report_note(r, "detail of %d", ((const pt_row *)row)->id);
}

static xs_status pt_between(void *hctx, int *interrupted, int *late)
{
    pt_ctx *c = (pt_ctx *)hctx;
    *late = c->late_from >= 0 && c->calls >= c->late_from;
    /* an interrupt as lockstep ranks see it: agreed in this hook (no real signal: a test run
     * in the background may have SIGINT ignored) */
    if (c->interrupt_at >= 0 && c->calls > c->interrupt_at)
        *interrupted = 1;
    return XS_OK;
}

static int pt_sticky_yes(void) { return 1; }

static const xs_bench_col pt_cols[] = {
    {"id", "", "%d", XS_COL_INT, offsetof(pt_row, id), 0, 0, 0, 0, 0},
    {"verified", "", NULL, XS_COL_BOOL, offsetof(pt_row, verified), 0, 0, 0, 0, 0}};

static int sweep_details; /* "# detail of" lines of the last sweep6 */

/* Sweep 6 points with ctx c and hooks; the report on a temporary file, its last line in last. */
static int sweep6(pt_ctx *c, int lockstep, int sticky, xs_bench_tally *t, char *last, size_t n)
{
    pt_row rows[6];
    memset(rows, 0, sizeof rows);
    xs_bench_table tab;
    xs_bench_table_init(&tab, pt_cols, 2);
    xs_bench_sweep s = {6, rows, sizeof rows[0], pt_point, pt_label, pt_detail, c, lockstep, 1,
                        pt_between, sticky ? pt_sticky_yes : NULL, c, NULL};
    FILE *out = tmpfile();
    xs_bench_report r;
    xs_bench_report_open(&r, "bench pt", &tab, out, NULL, NULL);
    xs_bench_report_begin(&r);
    fflush(stderr);
    const int se = dup(2);
    FILE *e = tmpfile();
    dup2(fileno(e), 2);
    xs_bench_sweep_run(&s, &r, t);
    const int rc = xs_bench_sweep_close(&r, t, 6);
    fflush(stderr);
    dup2(se, 2);
    close(se);
    fclose(e);
    rewind(out);
    char line[256];
    last[0] = 0;
    sweep_details = 0;
    while (fgets(line, sizeof line, out)) {
        snprintf(last, n, "%s", line);
        sweep_details += !strncmp(line, "# detail of ", 12);
    }
    fclose(out);
    return rc;
}

static void test_sweep(void)
{
    xs_bench_tally t;
    char last[256];
    pt_ctx c = {-1, XS_EINVAL, -1, -1, -1, 0, 0};
    XT_CHECK(sweep6(&c, 0, 0, &t, last, sizeof last) == 0 && t.ok == 6 && t.run == 6,
             "all points: ok %d", t.ok);
    XT_CHECK(!strcmp(last, "# bench pt OK: 6 points, every run verified\n"), "%s", last);
    XT_CHECK(sweep_details == 6, "a detail line under each row: %d", sweep_details);

    pt_ctx c2 = {2, XS_EINVAL, 4, -1, -1, 0, 0};
    XT_CHECK(sweep6(&c2, 0, 0, &t, last, sizeof last) == 1, "failures: exit 1");
    XT_CHECK(t.failed == 1 && t.wrong == 1 && t.ok == 4 && t.run == 6 && !t.stopped,
             "a failed call and wrong data go on: failed %d wrong %d ok %d", t.failed, t.wrong,
             t.ok);
    XT_CHECK(strstr(last, "FAILED: 2 point(s)"), "%s", last);

    pt_ctx c3 = {1, XS_EINVAL, -1, -1, -1, 0, 0};
    XT_CHECK(sweep6(&c3, 1, 0, &t, last, sizeof last) == 1 && t.stopped && t.run == 2,
             "lockstep: the first failure ends the sweep (run %d)", t.run);
    pt_ctx c4 = {1, XS_ECUDA, -1, -1, -1, 0, 0};
    XT_CHECK(sweep6(&c4, 0, 1, &t, last, sizeof last) == 1 && t.stopped && t.run == 2,
             "sticky CUDA error ends the sweep");
    pt_ctx c5 = {1, XS_EINVAL, -1, -1, -1, 0, 0};
    XT_CHECK(sweep6(&c5, 0, 1, &t, last, sizeof last) == 1 && !t.stopped && t.run == 6,
             "a non-CUDA failure does not ask the device");

    pt_ctx c6 = {-1, XS_EINVAL, -1, 3, -1, 0, 0};
    XT_CHECK(sweep6(&c6, 0, 0, &t, last, sizeof last) == 0 && t.skipped == 3 && t.ok == 3,
             "--max-time: skipped %d", t.skipped);

    pt_ctx c7 = {-1, XS_EINVAL, -1, -1, 2, 0, 0};
    XT_CHECK(sweep6(&c7, 0, 0, &t, last, sizeof last) == 1 && t.interrupted && t.run == 3 &&
             t.ok == 3, "interrupt: stops after the point in flight (run %d)", t.run);
    XT_CHECK(strstr(last, "# INTERRUPTED: partial results"), "%s", last);
}

/* A declared grid: every point has a row, its status says what became of it. */
typedef struct {
    int id;
    double us;
    xs_bench_stat t;
    char status[96];
} dg_row;

static xs_status dg_point(void *ctx, int i, void *row, int *verified)
{
    pt_ctx *c = (pt_ctx *)ctx;
    dg_row *r = (dg_row *)row;
    c->calls++;
    r->id = i;
    if (i == c->fail_at)
        return xs_seterr(XS_ECUDA, "point %d broke", i);
    if (i == c->wrong_at) { /* here: cannot run */
        snprintf(r->status, sizeof r->status, "skipped: needs 180.0 GiB > 139.0 GiB free");
        *verified = XS_BENCH_CANNOT_RUN;
        return XS_OK;
    }
    r->us = 10 + i;
    snprintf(r->status, sizeof r->status, "ok");
    *verified = 1;
    return XS_OK;
}

static const xs_bench_col dg_cols[] = {
    {"id", "", "%d", XS_COL_INT, offsetof(dg_row, id), 0, 0, 0, 0, 0},
    {"x_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(dg_row, us), 0, 0, 0, 0, 0},
    {"t", "us", "%.1f", XS_COL_STAT, offsetof(dg_row, t), 0, 0, 0, 0, 0},
    {"status", "", "%s", XS_COL_CHARS, offsetof(dg_row, status), 0, 0, 0, 0, 0}};

static xs_bench_table dg_tab;

static void dg_unrun(void *ctx, int i, void *row, const char *status)
{
    dg_row *r = (dg_row *)row;
    xs_bench_row_blank(&dg_tab, row);
    r->id = i;
    snprintf(r->status, sizeof r->status, "%s", status);
}

static void test_sweep_declared(void)
{
    dg_row rows[6];
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < 6; i++)
        rows[i].t = xs_bench_stat_of((const double[]){1, 2, 3}, 3);
    XT_CHECK(xs_bench_table_init(&dg_tab, dg_cols, 4) == XS_OK, "%s", xs_errmsg());
    /* point 1 fails, point 2 cannot run, points 4 and 5 are late */
    pt_ctx c = {1, XS_ECUDA, 2, 4, -1, 0, 0};
    xs_bench_sweep s = {6, rows, sizeof rows[0], dg_point, pt_label, NULL, &c, 0, 0,
                        pt_between, NULL, &c, dg_unrun};
    FILE *out = tmpfile();
    xs_bench_report r;
    xs_bench_report_open(&r, "bench dg", &dg_tab, out, NULL, NULL);
    xs_bench_report_begin(&r);
    fflush(stderr);
    const int se = dup(2);
    FILE *e = tmpfile();
    dup2(fileno(e), 2);
    xs_bench_tally t;
    xs_bench_sweep_run(&s, &r, &t);
    const int rc = xs_bench_sweep_close(&r, &t, 6);
    fflush(stderr);
    dup2(se, 2);
    close(se);
    fclose(e);
    XT_CHECK(rc == 1 && t.failed == 1 && t.cannot == 1 && t.skipped == 2 && t.ok == 2,
             "rc %d failed %d cannot %d skipped %d ok %d", rc, t.failed, t.cannot, t.skipped,
             t.ok);
    XT_CHECK(!strcmp(rows[0].status, "ok") && rows[0].us == 10, "row 0: %s", rows[0].status);
    XT_CHECK(!strncmp(rows[1].status, "failed: point 1 broke", 21) && isnan(rows[1].us) &&
                 isnan(rows[1].t.med) && rows[1].t.n == 0 && rows[1].id == 1,
             "row 1: %s", rows[1].status);
    XT_CHECK(!strncmp(rows[2].status, "skipped: needs", 14), "row 2: %s", rows[2].status);
    XT_CHECK(!strcmp(rows[4].status, "not run: --max-time spent") && isnan(rows[4].us) &&
                 !strcmp(rows[5].status, rows[4].status),
             "rows 4, 5: %s, %s", rows[4].status, rows[5].status);
    /* every point is a row of the table, in order */
    rewind(out);
    char line[256];
    int n = 0, ids_in_order = 1, cannot_note = 0;
    while (fgets(line, sizeof line, out)) {
        cannot_note |= strstr(line, "1 of 6 points cannot run here") != NULL;
        int id;
        if (line[0] != '#' && sscanf(line, " %d", &id) == 1)
            ids_in_order &= id == n++;
    }
    fclose(out);
    XT_CHECK(n == 6 && ids_in_order, "%d rows in the table", n);
    XT_CHECK(cannot_note, "a note counts the points that cannot run");
}

static void test_ns_as_us(void)
{
    struct { int a; double ns; } r = {1, 2500};
    XT_NEAR(xs_bench_ns_as_us(&r, (int)offsetof(__typeof__(r), ns)), 2.5, 1e-15);
}

static void test_verdict(void)
{
    const double med[3] = {10, NAN, 30};
    double g[5], rm[3], err;
    int ok;
    xs_bench_verdict_pack(0, NAN, med, 3, g);
    XT_CHECK(g[0] == 1 && isinf(g[1]) && g[3] == -1, "pack");
    xs_bench_verdict_unpack(g, 3, &ok, &err, rm);
    XT_CHECK(!ok && isnan(err) && rm[0] == 10 && isnan(rm[1]) && rm[2] == 30, "unpack");
    xs_bench_verdict_pack(1, 0.5, med, 3, g);
    xs_bench_verdict_unpack(g, 3, &ok, &err, rm);
    XT_CHECK(ok && err == 0.5, "ok round trip");
}

int main(void)
{
    test_options();
    test_stats();
    test_rounds();
    test_table();
    test_sweep();
    test_sweep_declared();
    test_ns_as_us();
    test_verdict();
    return xt_done();
}
