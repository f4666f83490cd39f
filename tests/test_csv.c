// SPDX-License-Identifier: Apache-2.0
/*
 * test_csv.c - CSV headers matched by name (src/csv.c) and the schedule reader built on them:
 * any column order, extra columns, the missing ones named; the results JSON of a CSV text; the
 * model symbols of --set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csv.h"
#include "xstage.h"
#include "xstage_results.h"
#include "xt.h"

#define EXPECT_ERR(call, code, needle)                                                        \
    do {                                                                                      \
        xs_status s_ = (call);                                                                \
        XT_CHECK(s_ == (code), "%s returned %s (%s)", #call, xs_status_name(s_), xs_errmsg());\
        XT_CHECK(strstr(xs_errmsg(), (needle)) != NULL && !strchr(xs_errmsg(), '\n'),         \
                 "message '%s' lacks '%s'", xs_errmsg(), (needle));                           \
    } while (0)

static xs_status sched(const char *text, xs_schedule *s)
{
    return xs_schedule_parse(text, strlen(text), "t.csv", s);
}

static void test_split(void)
{
    char line[] = " a , b,,c ";
    char *f[4];
    XT_CHECK(xs_csv_split(line, f, 4) == 4, "four fields");
    XT_CHECK(!strcmp(f[0], "a") && !strcmp(f[1], "b") && !strcmp(f[2], "") && !strcmp(f[3], "c"),
             "fields trimmed: '%s' '%s' '%s' '%s'", f[0], f[1], f[2], f[3]);
    char more[] = "1,2,3";
    XT_CHECK(xs_csv_split(more, f, 2) == 3, "more fields than room: max + 1");
    char one[] = "";
    XT_CHECK(xs_csv_split(one, f, 4) == 1 && !strcmp(f[0], ""), "an empty line is one field");
}

static void test_columns(void)
{
    static const char *const want[3] = {"producers", "bytes_per_producer", "gap_ns"};
    int col[3];
    char h1[] = "gap_ns,note,producers,bytes_per_producer";
    char *f[8];
    int n = xs_csv_split(h1, f, 8);
    XT_CHECK(xs_csv_columns(f, n, want, 3, col, "t.csv:1") == XS_OK, "%s", xs_errmsg());
    XT_CHECK(col[0] == 2 && col[1] == 3 && col[2] == 0, "positions %d %d %d", col[0], col[1],
             col[2]);
    char h2[] = "gap_ns,note";
    n = xs_csv_split(h2, f, 8);
    EXPECT_ERR(xs_csv_columns(f, n, want, 3, col, "t.csv:1"), XS_EPARSE,
               "t.csv:1: expected the header 'producers,bytes_per_producer,gap_ns' (any order, "
               "extra columns allowed); missing: producers, bytes_per_producer");
    char h3[] = "gap_ns,producers,bytes_per_producer,gap_ns";
    n = xs_csv_split(h3, f, 8);
    EXPECT_ERR(xs_csv_columns(f, n, want, 3, col, "t.csv:2"), XS_EPARSE,
               "t.csv:2: column 'gap_ns' appears twice");
    char h4[] = "Producers,bytes_per_producer,gap_ns"; /* names are exact */
    n = xs_csv_split(h4, f, 8);
    EXPECT_ERR(xs_csv_columns(f, n, want, 3, col, "t.csv:1"), XS_EPARSE, "missing: producers");
}

static void test_schedule_columns(void)
{
    xs_schedule a, b;
    XT_CHECK(sched("producers,bytes_per_producer,gap_ns\n132,16K,0\n8,64K,1500.5\n", &a) == XS_OK,
             "%s", xs_errmsg());
    /* reordered, with extra columns before, between and after, spaces around the names */
    XT_CHECK(sched("# layer 3\nlayer, gap_ns ,x,bytes_per_producer , producers,comment\n"
                   "3,0,y,16K,132,first\n3, 1500.5 ,y,64K,8,\n", &b) == XS_OK, "%s",
             xs_errmsg());
    XT_CHECK(b.nrows == 2, "rows %d", b.nrows);
    for (int i = 0; i < 2 && b.nrows == 2; i++)
        XT_CHECK(a.rows[i].producers == b.rows[i].producers &&
                     a.rows[i].bytes_per_producer == b.rows[i].bytes_per_producer &&
                     a.rows[i].gap_ns == b.rows[i].gap_ns, "row %d read by name", i);
    xs_schedule_free(&a);
    xs_schedule_free(&b);
    /* an extra column's value is not read: text there is fine */
    XT_CHECK(sched("producers,why,bytes_per_producer,gap_ns\n4,not a number,1K,0\n", &a) == XS_OK,
             "%s", xs_errmsg());
    xs_schedule_free(&a);
    EXPECT_ERR(sched("producers,gap_ns,layer\n4,0,1\n", &a), XS_EPARSE,
               "t.csv:1: expected the header");
    EXPECT_ERR(sched("producers,gap_ns,layer\n4,0,1\n", &a), XS_EPARSE,
               "missing: bytes_per_producer");
    EXPECT_ERR(sched("# c\nk,b,g\n1,2,3\n", &a), XS_EPARSE,
               "t.csv:2: expected the header 'producers,bytes_per_producer,gap_ns' (any order, "
               "extra columns allowed); missing: producers, bytes_per_producer, gap_ns");
    EXPECT_ERR(sched("layer,producers,bytes_per_producer,gap_ns\n1,4,1K\n", &a), XS_EPARSE,
               "t.csv:2: too few fields; the header has 4 columns");
    EXPECT_ERR(sched("layer,producers,bytes_per_producer,gap_ns\n1,4,1K,0,9\n", &a), XS_EPARSE,
               "t.csv:2: too many fields");
    /* the error of a moved column still names it */
    EXPECT_ERR(sched("gap_ns,bytes_per_producer,producers\n0,1K,x\n", &a), XS_EPARSE,
               "t.csv:2: producers 'x' is not a number");
}

static void test_schedule_stdin(void)
{
    /* "-" is the standard input: a pipe with a schedule in it */
    int fd[2];
    XT_CHECK(pipe(fd) == 0, "pipe");
    const char text[] = "bytes_per_producer,producers,gap_ns\n32K,66,100\n";
    XT_CHECK(write(fd[1], text, sizeof text - 1) == (ssize_t)(sizeof text - 1), "write");
    close(fd[1]);
    int saved = dup(0);
    dup2(fd[0], 0);
    close(fd[0]);
    clearerr(stdin);
    xs_schedule s;
    xs_status st = xs_schedule_load("-", &s);
    XT_CHECK(st == XS_OK, "%s", xs_errmsg());
    XT_CHECK(st == XS_OK && s.nrows == 1 && s.rows[0].producers == 66 &&
                 s.rows[0].bytes_per_producer == 32768 && s.rows[0].gap_ns == 100,
             "the schedule read from stdin");
    if (st == XS_OK)
        xs_schedule_free(&s);
    /* an empty standard input names stdin */
    EXPECT_ERR(xs_schedule_load("-", &s), XS_EPARSE, "stdin: empty schedule");
    dup2(saved, 0);
    close(saved);
    clearerr(stdin);
}

static void test_json_from_csv(void)
{
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    const char csv[] = "# device X\n# driver 1\ncase,bytes,\"name, quoted\"\nref,4096,\"a, b\"\n"
                       "few,8,nan\n# probe OK\n";
    XT_CHECK(xs_results_json_from_csv(f, csv) == XS_OK, "%s", xs_errmsg());
    fclose(f);
    XT_CHECK(out && strstr(out, "{\"format\": 1, \"command\": "), "format first: %s", out);
    XT_CHECK(out && strstr(out, "\"notes\": [\n\"# device X\",\n\"# driver 1\"]"), "notes: %s",
             out);
    XT_CHECK(out && strstr(out, "{\"name\": \"name, quoted\", \"unit\": \"\"}"), "columns: %s",
             out);
    XT_CHECK(out && strstr(out, "{\"case\": \"ref\", \"bytes\": 4096, \"name, quoted\": \"a, b\"}"),
             "row 0: %s", out);
    XT_CHECK(out && strstr(out, "{\"case\": \"few\", \"bytes\": 8, \"name, quoted\": \"nan\"}"),
             "row 1 (nan is no JSON number): %s", out);
    XT_CHECK(out && strstr(out, "\"summary\": [\n\"# probe OK\"]}"), "summary: %s", out);
    free(out);
}

static void test_set_symbols(void)
{
    static const struct { const char *sym, *field; } s[] = {
        {"r", "issue_bytes_per_ns"}, {"o", "issue_overhead_ns"}, {"R", "drain_bytes_per_ns"},
        {"Q", "capacity_bytes"}, {"q", "capacity_bytes_per_producer"}, {"c", "chunk_bytes"},
        {"b", "queue_bytes_per_producer"}};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        xs_profile a, b;
        xs_profile_default(&a);
        xs_profile_default(&b);
        char x[80], y[80];
        snprintf(x, sizeof x, "%s=12345", s[i].sym);
        snprintf(y, sizeof y, "%s=12345", s[i].field);
        XT_CHECK(xs_profile_set(&a, x) == XS_OK && xs_profile_set(&b, y) == XS_OK, "%s",
                 xs_errmsg());
        XT_CHECK(!memcmp(&a, &b, sizeof a), "--set %s = --set %s", x, y);
    }
    xs_profile p;
    xs_profile_default(&p);
    EXPECT_ERR(xs_profile_set(&p, "capacity_byte=1"), XS_EINVAL,
               "did you mean 'capacity_bytes'?");
    /* "date" and "notes" are profile keys but not settable: never suggested */
    EXPECT_ERR(xs_profile_set(&p, "dates=1"), XS_EINVAL, "unknown profile field 'dates'");
    XT_CHECK(!strstr(xs_errmsg(), "did you mean"), "no suggestion: %s", xs_errmsg());
    EXPECT_ERR(xs_profile_set(&p, "notes=1"), XS_EINVAL, "unknown profile field 'notes'");
    XT_CHECK(!strstr(xs_errmsg(), "did you mean"), "no suggestion: %s", xs_errmsg());
    EXPECT_ERR(xs_profile_set(&p, "X=1"), XS_EINVAL, "or the symbols r, o, R, Q, q, c, b");
}

/* calibrate's samples file (xs_samples_load): the same header rules */
static void test_samples_columns(void)
{
    char path[] = "/tmp/xs-samples-XXXXXX";
    int fd = mkstemp(path);
    XT_CHECK(fd >= 0, "mkstemp");
    const char text[] = "# reordered, with an extra column\n"
                        "end_ns,rep,note,experiment,producers,bytes_per_producer,gap_ns,rows,row,"
                        "issue_med_ns,issue_max_ns\n"
                        "5000.5,0,x,issue,132,16384,0,1,0,300.5,400.5\n";
    XT_CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1), "write");
    close(fd);
    xs_samples s;
    XT_CHECK(xs_samples_load(path, &s) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(s.n == 1 && !strcmp(s.v[0].experiment, "issue") && s.v[0].producers == 132 &&
                 s.v[0].bytes_per_producer == 16384 && s.v[0].rows == 1 &&
                 s.v[0].issue_med_ns == 300.5 && s.v[0].issue_max_ns == 400.5 &&
                 s.v[0].end_ns == 5000.5, "the sample read by column name");
    xs_samples_free(&s);
    FILE *f = fopen(path, "w");
    fputs("experiment,producers,bytes_per_producer,gap_ns,rows,rep,row,issue_med_ns\n", f);
    fclose(f);
    EXPECT_ERR(xs_samples_load(path, &s), XS_EPARSE, "missing: issue_max_ns, end_ns");
    unlink(path);
}

int main(void)
{
    test_samples_columns();
    test_split();
    test_columns();
    test_schedule_columns();
    test_schedule_stdin();
    test_json_from_csv();
    test_set_symbols();
    return xt_done();
}
