// SPDX-License-Identifier: Apache-2.0
/*
 * test_io.c - profile and schedule parsing: the good forms, and every bad input with the one-line
 * message that names the file, the line and the problem.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xstage.h"
#include "xstage_cli.h"
#include "xt.h"

static int one_line(const char *m) { return m && *m && !strchr(m, '\n'); }

#define EXPECT_ERR(call, code, needle)                                                        \
    do {                                                                                      \
        xs_status s_ = (call);                                                                \
        XT_CHECK(s_ == (code), "%s returned %s (%s)", #call, xs_status_name(s_), xs_errmsg());\
        XT_CHECK(strstr(xs_errmsg(), (needle)) != NULL && one_line(xs_errmsg()),              \
                 "message '%s' lacks '%s'", xs_errmsg(), (needle));                           \
    } while (0)

static xs_status sched(const char *text, xs_schedule *s)
{
    return xs_schedule_parse(text, strlen(text), "t.csv", s);
}

static xs_status prof(const char *text, xs_profile *p)
{
    return xs_profile_parse(text, strlen(text), "p.json", p);
}

static const char *H = "producers,bytes_per_producer,gap_ns\n";

static void test_schedule_good(void)
{
    xs_schedule s;
    const char *t = "# an expert wave\n\n  producers , bytes_per_producer , gap_ns \r\n"
                    "132,16384,0\r\n# mid comment\n 8 , 64K , 1500.5\n132,1M,2e3";
    XT_CHECK(sched(t, &s) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(s.nrows == 3, "rows %d", s.nrows);
    XT_CHECK(s.rows[1].producers == 8 && s.rows[1].bytes_per_producer == 65536 &&
                 s.rows[1].gap_ns == 1500.5, "row 1");
    XT_CHECK(s.rows[2].bytes_per_producer == 1048576 && s.rows[2].gap_ns == 2000, "row 2");
    XT_CHECK(xs_schedule_max_producers(&s) == 132, "max producers");
    /* round trip through the writer */
    char path[] = "/tmp/xs-test-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    XT_CHECK(xs_schedule_save(&s, path, "round\ntrip") == XS_OK, "%s", xs_errmsg());
    xs_schedule s2;
    XT_CHECK(xs_schedule_load(path, &s2) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(s2.nrows == 3 && s2.rows[2].bytes_per_producer == 1048576 &&
                 s2.rows[1].gap_ns == 1500.5, "round trip");
    unlink(path);
    xs_schedule_free(&s);
    xs_schedule_free(&s2);
}

static void test_schedule_bad(void)
{
    xs_schedule s;
    char buf[512];
    EXPECT_ERR(xs_schedule_load("/nonexistent/x.csv", &s), XS_EIO, "/nonexistent/x.csv: cannot open");
    EXPECT_ERR(sched("", &s), XS_EPARSE, "t.csv: empty schedule");
    EXPECT_ERR(sched("# only a comment\n\n", &s), XS_EPARSE, "t.csv: empty schedule");
    EXPECT_ERR(sched("132,16384,0\n", &s), XS_EPARSE, "t.csv:1: expected the header");
    EXPECT_ERR(sched("producers,bytes,gap_ns\n1,2,3\n", &s), XS_EPARSE, "t.csv:1: expected the header");
    EXPECT_ERR(sched(H, &s), XS_EPARSE, "no rows after the header");
#define ROW(r, needle)                                                                        \
    snprintf(buf, sizeof buf, "%s# c\n%s\n", H, r);                                           \
    EXPECT_ERR(sched(buf, &s), XS_EPARSE, needle)
    ROW("abc,16384,0", "t.csv:3: producers 'abc' is not a number");
    ROW("132,x16,0", "t.csv:3: bytes_per_producer 'x16' is not a number");
    ROW("132,16384,fast", "t.csv:3: gap_ns 'fast' is not a number");
    ROW("-4,16384,0", "t.csv:3: producers '-4' is negative");
    ROW("4,-16384,0", "t.csv:3: bytes_per_producer '-16384' is negative");
    ROW("4,16384,-1", "t.csv:3: gap_ns '-1' is negative");
    ROW("0,16384,0", "t.csv:3: zero producers");
    ROW("4,0,0", "t.csv:3: bytes_per_producer is zero");
    ROW("99999999999999999999999,1,0", "t.csv:3: producers '99999999999999999999999' overflows");
    ROW("70000,1,0", "t.csv:3: producers '70000' is too large");
    ROW("4,99999999999999999999,0", "overflows");
    ROW("4,2000000000000,0", "t.csv:3: bytes_per_producer '2000000000000' is too large");
    ROW("4,1,1e400", "t.csv:3: gap_ns '1e400' overflows");
    ROW("4,1,1e13", "is too large");
    ROW("4,1.5,0", "is not an integer");
    ROW("4,16384", "t.csv:3: too few fields");
    ROW("4", "t.csv:3: too few fields");
    ROW("4,16384,0,7", "t.csv:3: too many fields");
    ROW("4,,0", "bytes_per_producer '' is empty");
    ROW("4,16K,nan", "gap_ns 'nan'");
#undef ROW
    char nul[] = "producers,bytes_per_producer,gap_ns\n1,1\0,0\n";
    EXPECT_ERR(xs_schedule_parse(nul, sizeof nul - 1, "t.csv", &s), XS_EPARSE, "NUL");
    char *longl = malloc(6000);
    memset(longl, '1', 5999);
    longl[5999] = 0;
    EXPECT_ERR(sched(longl, &s), XS_EPARSE, "t.csv:1: line longer than");
    free(longl);
}

static const char *GOOD =
    "{\"device\": \"NVIDIA H200\", \"path\": \"host\", \"date\": \"2026-11-29\",\n"
    " \"command\": \"xstage calibrate\",\n"
    " \"issue_bytes_per_ns\": 41, \"issue_overhead_ns\": 80, \"drain_bytes_per_ns\": 52.5,\n"
    " \"capacity_bytes\": 2359296, \"capacity_bytes_per_producer\": 18432,\n"
    " \"chunk_bytes\": 2048}\n";

static void test_profile_good(void)
{
    xs_profile p;
    XT_CHECK(prof(GOOD, &p) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(p.issue_overhead_ns == 80 && p.barrier_ns == 0 && p.start_ns == 0 &&
                 !strcmp(p.path, "host") &&
                 !strcmp(p.device, "NVIDIA H200"), "fields");
    XT_CHECK(xs_profile_set(&p, "drain_bytes_per_ns=60.5") == XS_OK, "%s", xs_errmsg());
    XT_CHECK(p.drain_bytes_per_ns == 60.5, "set applied");
    XT_CHECK(xs_profile_set(&p, "start_ns=556.5") == XS_OK && p.start_ns == 556.5, "%s",
             xs_errmsg());
    XT_CHECK(xs_profile_set(&p, "start_ns=-1") == XS_OK &&
                 xs_profile_check(&p, "t") == XS_ERANGE && strstr(xs_errmsg(), "start_ns"),
             "negative start_ns refused: %s", xs_errmsg());
    p.start_ns = 556.5;
    XT_CHECK(p.reserve_release == 0 && p.reserve_shared_fraction == 0 && p.row_start_ns == 0 &&
                 p.buffer_bytes_per_producer == 0 && p.drain_under_load_bytes_per_ns == 0 &&
                 p.overflow_capacity_loss == 0 && p.overflow_loss_ns == 0,
             "new optional fields default to the earlier model");
    static const char *const refused[] = {"reserve_release=0.5", "reserve_release=2",
                                          "reserve_shared_fraction=1.01",
                                          "reserve_shared_fraction=-0.1", "row_start_ns=-1",
                                          "buffer_bytes_per_producer=-1",
                                          "drain_under_load_bytes_per_ns=-1",
                                          "overflow_capacity_loss=1.01",
                                          "overflow_capacity_loss=-0.1", "overflow_loss_ns=-1",
                                          "overflow_loss_ns=2e9"};
    for (int i = 0; i < (int)(sizeof refused / sizeof refused[0]); i++) {
        xs_profile b = p;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(strchr(refused[i], '=') - refused[i]),
                 refused[i]);
        XT_CHECK(xs_profile_set(&b, refused[i]) == XS_OK &&
                     xs_profile_check(&b, "t") == XS_ERANGE && strstr(xs_errmsg(), name),
                 "%s refused: %s", refused[i], xs_errmsg());
    }
    XT_CHECK(xs_profile_set(&p, "reserve_shared_fraction=0.5") == XS_OK &&
                 xs_profile_set(&p, "row_start_ns=141.5") == XS_OK &&
                 xs_profile_set(&p, "buffer_bytes_per_producer=16384") == XS_OK &&
                 xs_profile_set(&p, "drain_under_load_bytes_per_ns=50.43") == XS_OK &&
                 xs_profile_set(&p, "overflow_capacity_loss=0.4") == XS_OK &&
                 xs_profile_set(&p, "overflow_loss_ns=20000") == XS_OK &&
                 xs_profile_check(&p, "t") == XS_OK, "%s", xs_errmsg());
    char path[] = "/tmp/xs-prof-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    XT_CHECK(xs_profile_save(&p, path) == XS_OK, "%s", xs_errmsg());
    xs_profile q;
    XT_CHECK(xs_profile_load(path, &q) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(q.drain_bytes_per_ns == 60.5 && q.chunk_bytes == 2048 && q.start_ns == 556.5 &&
                 q.reserve_shared_fraction == 0.5 && q.row_start_ns == 141.5 &&
                 q.buffer_bytes_per_producer == 16384 &&
                 q.drain_under_load_bytes_per_ns == 50.43 && q.overflow_capacity_loss == 0.4 &&
                 q.overflow_loss_ns == 20000 && !strcmp(q.date, p.date),
             "round trip");
    unlink(path);
    xs_profile d;
    xs_profile_default(&d);
    XT_CHECK(xs_profile_check(&d, "embedded") == XS_OK && !strcmp(d.path, "host") &&
                 !strcmp(d.device, "NVIDIA H200"), "embedded profile");
    /* --set through the CLI resolver, in order */
    xs_profile_args pa = {0};
    xs_profile_args_add_set(&pa, "capacity_bytes=4456448");
    xs_profile_args_add_set(&pa, "capacity_bytes=1048576");
    XT_CHECK(xs_profile_args_resolve(&pa, &q) == XS_OK && q.capacity_bytes == 1048576,
             "overrides apply in order");
}

static void test_profile_bad(void)
{
    xs_profile p;
    char buf[2048];
    EXPECT_ERR(xs_profile_load("/nonexistent/p.json", &p), XS_EIO, "/nonexistent/p.json: cannot open");
    EXPECT_ERR(prof("", &p), XS_EPARSE, "p.json: empty profile");
    EXPECT_ERR(prof("{\"path\": \"host\",\n \"chunk_bytes\": 12,,}", &p), XS_EPARSE,
               "p.json:2:");
    EXPECT_ERR(prof("[1, 2]", &p), XS_EPARSE, "a profile is a JSON object");
    /* missing field */
    snprintf(buf, sizeof buf, "%s", GOOD);
    char *c = strstr(buf, " \"chunk_bytes\": 2048");
    strcpy(c, "\"x\": 1}");
    c = strstr(buf, "\"x\": 1}");
    strcpy(c, "\"notes\": \"n\"}");
    EXPECT_ERR(prof(buf, &p), XS_EPARSE, "p.json: missing field 'chunk_bytes'");
    /* mistyped value */
    snprintf(buf, sizeof buf, "%s", GOOD);
    c = strstr(buf, "52.5");
    memcpy(c, "\"55\"", 4);
    EXPECT_ERR(prof(buf, &p), XS_EPARSE, "p.json:3: field 'drain_bytes_per_ns' must be a number");
    /* misspelled name */
    snprintf(buf, sizeof buf, "%s", GOOD);
    c = strstr(buf, "drain_bytes_per_ns");
    memcpy(c, "drain_bytes_per_nz", 18);
    EXPECT_ERR(prof(buf, &p), XS_EPARSE,
               "p.json:3: unknown field 'drain_bytes_per_nz' (did you mean 'drain_bytes_per_ns'?)");
    /* wrong path value, wrong metadata type */
    snprintf(buf, sizeof buf, "%s", GOOD);
    c = strstr(buf, "\"host\"");
    memcpy(c, "\"pcie\"", 6);
    EXPECT_ERR(prof(buf, &p), XS_EPARSE, "p.json:1: field 'path' is 'pcie'");
    snprintf(buf, sizeof buf, "%s", GOOD);
    c = strstr(buf, "\"NVIDIA H200\"");
    memcpy(c, "12345678901234", 13);
    EXPECT_ERR(prof(buf, &p), XS_EPARSE, "field 'device' must be a string");
    /* physically impossible */
    static const char *imp[][2] = {
        {"\"drain_bytes_per_ns\": 52.5", "drain_bytes_per_ns = 0"},
        {"\"issue_bytes_per_ns\": 41", "issue_bytes_per_ns = -41"},
        {"\"capacity_bytes\": 2359296", "capacity_bytes = 1000"},
    };
    static const char *rep[] = {"\"drain_bytes_per_ns\": 0   ", "\"issue_bytes_per_ns\":-41",
                                "\"capacity_bytes\": 1000   "};
    for (int i = 0; i < 3; i++) {
        snprintf(buf, sizeof buf, "%s", GOOD);
        c = strstr(buf, imp[i][0]);
        memcpy(c, rep[i], strlen(rep[i]));
        EXPECT_ERR(prof(buf, &p), XS_ERANGE, imp[i][1]);
    }
    /* --set */
    xs_profile_default(&p);
    EXPECT_ERR(xs_profile_set(&p, "drain=5"), XS_EINVAL, "unknown profile field 'drain'");
    EXPECT_ERR(xs_profile_set(&p, "chunk_byte=5"), XS_EINVAL, "did you mean 'chunk_bytes'?");
    EXPECT_ERR(xs_profile_set(&p, "chunk_bytes=lots"), XS_EINVAL, "'lots' is not a finite number");
    EXPECT_ERR(xs_profile_set(&p, "chunk_bytes"), XS_EINVAL, "expected NAME=VALUE");
    EXPECT_ERR(xs_profile_set(&p, "chunk_bytes="), XS_EINVAL, "not a finite number");
    xs_profile_args pa = {0};
    xs_profile_args_add_set(&pa, "drain_bytes_per_ns=-3");
    EXPECT_ERR(xs_profile_args_resolve(&pa, &p), XS_ERANGE, "a drain rate must be > 0");
}

static void test_cli_values(void)
{
    int64_t v;
    double d;
    long l;
    XT_CHECK(xs_parse_size("-b", "64K", &v) == XS_OK && v == 65536, "64K");
    XT_CHECK(xs_parse_size("-b", "2MB", &v) == XS_OK && v == 2097152, "2MB");
    XT_CHECK(xs_parse_size("-b", "1.5K", &v) == XS_OK && v == 1536, "1.5K");
    EXPECT_ERR(xs_parse_size("-b", "12Q", &v), XS_EINVAL, "-b '12Q': not a size");
    EXPECT_ERR(xs_parse_size("-b", "-5", &v), XS_EINVAL, "cannot be negative");
    XT_CHECK(xs_parse_time_ns("-g", "2us", &d) == XS_OK && d == 2000, "2us");
    XT_CHECK(xs_parse_time_ns("-g", "1.5ms", &d) == XS_OK && d == 1.5e6, "1.5ms");
    EXPECT_ERR(xs_parse_time_ns("-g", "3 weeks", &d), XS_EINVAL, "unknown time unit");
    XT_CHECK(xs_parse_int("-n", "12", 1, 100, &l) == XS_OK && l == 12, "int");
    int lst[4], nl = 0;
    XT_CHECK(xs_parse_list("--seq", "4K,8192", 1, 1, 1 << 20, lst, 4, &nl) == XS_OK && nl == 2 &&
                 lst[0] == 4096 && lst[1] == 8192, "size list");
    EXPECT_ERR(xs_parse_list("--peers", "2,x", 0, 1, 64, lst, 4, &nl), XS_EINVAL,
               "--peers 'x': not an integer");
    EXPECT_ERR(xs_parse_list("--peers", "1,2,3,4,5", 0, 1, 64, lst, 4, &nl), XS_EINVAL,
               "--peers: at most 4 values");
    EXPECT_ERR(xs_parse_list("--peers", ",", 0, 1, 64, lst, 4, &nl), XS_EINVAL,
               "--peers: empty list");
    EXPECT_ERR(xs_parse_list("--seq", "4K,1G", 1, 1, 1 << 20, lst, 4, &nl), XS_EINVAL,
               "--seq 1073741824: outside 1..1048576");
    EXPECT_ERR(xs_parse_int("-n", "0", 1, 100, &l), XS_EINVAL, "-n 0: outside 1..100");
    xs_bench_opts b;
    memset(&b, 0, sizeof b);
    b.gpus = -1;
    XT_CHECK(xs_parse_bench_opt('d', "3", 100, &b) == 1 && b.device == 3 && b.device_set &&
                 b.gpus == -1 && !b.gpus_set, "--device 3");
    XT_CHECK(xs_parse_bench_opt('g', "8", 100, &b) == 1 && b.gpus == 8 && b.gpus_set &&
                 b.device == 3, "--gpus 8");
    XT_CHECK(xs_parse_bench_opt('n', "7", 100, &b) == 1 && b.iters == 7 && b.iters_set,
             "--iters 7");
    XT_CHECK(xs_parse_bench_opt('w', "2", 100, &b) == 1 && b.warmup == 2, "--warmup 2");
    XT_CHECK(xs_parse_bench_opt('x', "8", 100, &b) == 0 && b.gpus == 8,
             "other options are left alone");
    XT_CHECK(xs_parse_bench_opt('g', "65", 100, &b) == -1 &&
                 strstr(xs_errmsg(), "--gpus 65: outside 1..64") && b.gpus == 8,
             "--gpus 65 refused in one line, nothing changed");
    XT_CHECK(xs_parse_bench_opt('n', "101", 100, &b) == -1 &&
                 strstr(xs_errmsg(), "--iters 101: outside 1..100") && b.iters == 7,
             "--iters above the bench's maximum refused");
    XT_CHECK(xs_parse_bench_opt(XS_OPT_SEED, "4294967295", 100, &b) == 1 &&
                 b.seed == 4294967295u, "--seed 2^32-1");
    XT_CHECK(xs_parse_bench_opt(XS_OPT_PROFILE, "p.json", 100, &b) == 1 &&
                 !strcmp(b.pa.file, "p.json"), "--profile");
    XT_CHECK(xs_parse_bench_opt(XS_OPT_SET, "drain_bytes_per_ns=717", 100, &b) == 1 &&
                 b.pa.nsets == 1, "--set");
    XT_CHECK(xs_launch_exit(0, 0) == -1, "a rank (or a one-GPU run) does the work");
    XT_CHECK(xs_launch_exit(1, 0) == 0 && xs_launch_exit(1, 3) == 3,
             "the launcher returns its ranks' status");
    xs_seterr(XS_EINVAL, "test: nothing could start");
    XT_CHECK(xs_launch_exit(-1, 0) == 1, "a launch that could not start fails");
    xs_bench_opts c;
    memset(&c, 0, sizeof c);
    xs_profile pr;
    XT_CHECK(xs_parse_bench_opt(XS_OPT_SET, "no_such_field=1", 100, &c) == 1 &&
                 xs_profile_args_resolve(&c.pa, &pr) != XS_OK &&
                 strstr(xs_errmsg(), "no_such_field"), "--set of an unknown field refused");
}

int main(void)
{
    test_schedule_good();
    test_schedule_bad();
    test_profile_good();
    test_profile_bad();
    test_cli_values();
    return xt_done();
}
