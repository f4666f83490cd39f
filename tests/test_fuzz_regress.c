// SPDX-License-Identifier: Apache-2.0
/*
 * test_fuzz_regress.c - what the fuzz targets (tests/fuzz/) found, each input fed to the library
 * with the check that failed on it. The inputs are the files under tests/fuzz/regress/ (the fuzz
 * script replays them through the targets as well); run from the repository root, as
 * tests/run.sh does. Each input's comment below says what the target found.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xstage.h"
#include "xstage_cli.h"
#include "xt.h"
#include "xt_profile.h"

#define REGRESS "tests/fuzz/regress/"

/* AddressSanitizer reserves terabytes of address space: no address-space limit under it. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* The whole file, NUL-terminated (the length excludes the NUL); NULL if it cannot be read. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 16);
    size_t n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = 0;
    *len = n;
    return buf;
}

#define INPUT(var, len, name)                                                                 \
    size_t len = 0;                                                                           \
    char *var = slurp(REGRESS name, &len);                                                    \
    XT_CHECK(var != NULL, "cannot read %s (run from the repository root)", REGRESS name);     \
    if (!var)                                                                                 \
        return

/* One line a terminal shows as one line: not empty, no control character. */
static int printable_line(const char *m)
{
    if (!m || !*m)
        return 0;
    for (const unsigned char *c = (const unsigned char *)m; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            return 0;
    return 1;
}

/* A vertical tab in a file came back in the message: the line broke on a terminal. */
static void test_control_characters(void)
{
    xs_schedule s;
    xs_profile p;
    INPUT(sched, slen, "schedule/control_char_in_header");
    XT_CHECK(xs_schedule_parse(sched, slen, "t.csv", &s) == XS_EPARSE, "schedule parses");
    XT_CHECK(printable_line(xs_errmsg()) && strstr(xs_errmsg(), "t.csv:1: expected the header"),
             "message '%s'", xs_errmsg());
    free(sched);
    INPUT(prof, plen, "profile/control_char");
    XT_CHECK(xs_profile_parse(prof, plen, "p.json", &p) == XS_EPARSE, "profile parses");
    XT_CHECK(printable_line(xs_errmsg()) && strstr(xs_errmsg(), "p.json:1:"), "message '%s'",
             xs_errmsg());
    free(prof);
    xs_seterr(XS_EINVAL, "a\tb\x1b[1Ac\r\nd\x7f");
    XT_CHECK(!strcmp(xs_errmsg(), "a b [1Ac  d "), "folded '%s'", xs_errmsg());
}

/* The writer kept 10 digits of a gap: 55550155555 came back as 55550155560. */
static void test_schedule_gap_digits(void)
{
    INPUT(text, len, "schedule/gap_digits");
    xs_schedule s, t;
    XT_CHECK(xs_schedule_parse(text, len, "t.csv", &s) == XS_OK, "%s", xs_errmsg());
    free(text);
    /* a planner's gap/n needs all 17 digits; a hand-written gap stays as it was written */
    XT_CHECK(xs_schedule_append(&s, 8, 4096, 12500.0 / 3) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(xs_schedule_append(&s, 8, 4096, 1500.5) == XS_OK, "%s", xs_errmsg());
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream(&out, &outlen);
    XT_CHECK(xs_schedule_write(&s, f, "round trip") == XS_OK, "%s", xs_errmsg());
    fclose(f);
    XT_CHECK(strstr(out, "\n4,4294967296,55550155555\n") && strstr(out, "\n8,4096,1500.5\n"),
             "written:\n%s", out);
    XT_CHECK(xs_schedule_parse(out, outlen, "w.csv", &t) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(t.nrows == 3, "rows %d", t.nrows);
    for (int i = 0; i < 3 && i < t.nrows; i++)
        XT_CHECK(t.rows[i].gap_ns == s.rows[i].gap_ns, "row %d gap %.17g -> %.17g", i,
                 s.rows[i].gap_ns, t.rows[i].gap_ns);
    free(out);
    xs_schedule_free(&s);
    xs_schedule_free(&t);
}

static void save_load(const xs_profile *p, xs_profile *q)
{
    char path[] = "/tmp/xs-regress-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    XT_CHECK(xs_profile_save(p, path) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(xs_profile_load(path, q) == XS_OK, "%s", xs_errmsg());
    unlink(path);
}

/* A date longer than its field was cut inside a UTF-8 character; jansson refused to write the
 * half character, so the saved profile silently lost the date. */
static void test_profile_utf8_cut(void)
{
    INPUT(text, len, "profile/utf8_cut");
    xs_profile p, q;
    XT_CHECK(xs_profile_parse(text, len, "p.json", &p) == XS_OK, "%s", xs_errmsg());
    free(text);
    XT_CHECK(!strcmp(p.date, "2026-11-29, \xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                             "\xc3\xa9\xc3\xa9"),
             "date cut at a character: '%s'", p.date);
    save_load(&p, &q);
    XT_CHECK(!strcmp(p.date, q.date), "date '%s' -> '%s'", p.date, q.date);
}

/* The profile was saved with 10 digits: 41.123456789012345 came back as 41.12345679. */
static void test_profile_number_digits(void)
{
    INPUT(text, len, "profile/number_digits");
    xs_profile p, q;
    XT_CHECK(xs_profile_parse(text, len, "p.json", &p) == XS_OK, "%s", xs_errmsg());
    free(text);
    save_load(&p, &q);
    XT_CHECK(q.issue_bytes_per_ns == p.issue_bytes_per_ns &&
                 q.issue_overhead_ns == p.issue_overhead_ns &&
                 q.drain_bytes_per_ns == p.drain_bytes_per_ns, "%.17g %.17g %.17g",
             q.issue_bytes_per_ns, q.issue_overhead_ns, q.drain_bytes_per_ns);
}

/* "\r-2" was a size of -2: the sign test looked at the first byte, strtod skipped the space. */
static void test_size_sign_after_space(void)
{
    INPUT(word, len, "cli/size_negative_after_space");
    int64_t v = 7;
    XT_CHECK(xs_parse_size("--bytes", word, &v) == XS_EINVAL && v == 7, "'%s' -> %lld", word,
             (long long)v);
    XT_CHECK(strstr(xs_errmsg(), "cannot be negative") && printable_line(xs_errmsg()),
             "message '%s'", xs_errmsg());
    XT_CHECK(xs_parse_size("--bytes", " \t-1K", &v) == XS_EINVAL, "' \\t-1K' -> %lld",
             (long long)v);
    XT_CHECK(xs_parse_size("--bytes", " 1K", &v) == XS_OK && v == 1024, "' 1K'");
    free(word);
}

/* The words of a command-line input, separated by newlines (the fuzz_cli format). */
static int words(char *text, char **w, int max)
{
    int n = 0;
    for (char *c = strtok(text, "\n"); c && n < max; c = strtok(NULL, "\n"))
        w[n++] = c;
    return n;
}

/* "--set chunk_bytes= " set the chunk to 0: strtod read nothing and the white space passed. */
static void test_set_blank_value(void)
{
    INPUT(text, len, "cli/set_blank_value");
    char *w[32];
    int n = words(text, w, 32), seen = 0;
    for (int i = 0; i + 1 < n; i++) {
        if (strcmp(w[i], "--set"))
            continue;
        xs_profile p;
        xs_profile_default(&p);
        double before = p.chunk_bytes;
        XT_CHECK(xs_profile_set(&p, w[i + 1]) == XS_EINVAL && p.chunk_bytes == before,
                 "'%s' accepted: chunk_bytes %g", w[i + 1], p.chunk_bytes);
        XT_CHECK(strstr(xs_errmsg(), "is not a finite number"), "message '%s'", xs_errmsg());
        seen++;
    }
    XT_CHECK(seen == 1, "the input has one --set");
    free(text);
}

/* "predict -s wide.csv --set chunk_bytes=1": the default per-producer cap (18432 bytes) became a
 * ring of 18432 departure times for every one of 65536 producers, 9.7 GB, though each offers at
 * most 18 chunks and the cap can never hold one. wide.csv is the schedule of that name in
 * tests/fuzz/fuzz_cli.c. */
static void test_ring_per_producer_cap(void)
{
    INPUT(text, len, "cli/ring_per_producer_cap");
    char *w[32];
    int n = words(text, w, 32);
    /* the profile the finding was made with: the provisional default of the time (the embedded
     * default has since been recalibrated) */
    xs_profile p = xt_provisional_profile(), nocap;
    for (int i = 0; i + 1 < n; i++)
        if (!strcmp(w[i], "--set"))
            XT_CHECK(xs_profile_set(&p, w[i + 1]) == XS_OK, "%s", xs_errmsg());
    free(text);
    XT_CHECK(p.chunk_bytes == 1 && p.capacity_bytes_per_producer == 18432, "profile");
    nocap = p;
    nocap.capacity_bytes_per_producer = 0;

    static const char wide[] = "producers,bytes_per_producer,gap_ns\n65536,1,0\n1,16,1e12\n"
                               "65536,1,1e12\n";
    xs_schedule s;
    XT_CHECK(xs_schedule_parse(wide, sizeof wide - 1, "wide.csv", &s) == XS_OK, "%s",
             xs_errmsg());
    xs_result a, b;
#ifndef UNDER_ASAN
    /* the simulation fits in 1 GiB of address space (a child process, so the limit stays there) */
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit lim = {1 << 30, 1 << 30};
        setrlimit(RLIMIT_AS, &lim);
        _exit(xs_simulate(&p, &s, NULL, &a) == XS_OK ? 0 : 1);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    XT_CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "simulation in 1 GiB of address space: status %d", status);
#endif
    XT_CHECK(xs_simulate(&p, &s, NULL, &a) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(xs_simulate(&nocap, &s, NULL, &b) == XS_OK, "%s", xs_errmsg());
    /* a cap that never holds anyone changes nothing */
    XT_CHECK(a.makespan_ns == b.makespan_ns && a.peak_backlog_bytes == b.peak_backlog_bytes,
             "makespan %.17g vs %.17g", a.makespan_ns, b.makespan_ns);
    for (int i = 0; i < a.nrows; i++)
        XT_CHECK(a.rows[i].end_ns == b.rows[i].end_ns &&
                     a.rows[i].issue_max_ns == b.rows[i].issue_max_ns, "row %d", i);
    xs_result_free(&a);
    xs_result_free(&b);
    xs_schedule_free(&s);

    /* one producer stores 20000 chunks, issuing far faster than the stage drains: it alone
     * gets a ring, and the cap holds it */
    static const char one[] = "producers,bytes_per_producer,gap_ns\n65536,1,0\n1,20000,0\n";
    XT_CHECK(xs_schedule_parse(one, sizeof one - 1, "one.csv", &s) == XS_OK, "%s", xs_errmsg());
    p.issue_bytes_per_ns = nocap.issue_bytes_per_ns = 1000;
    p.drain_bytes_per_ns = nocap.drain_bytes_per_ns = 1;
    XT_CHECK(xs_simulate(&p, &s, NULL, &a) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(xs_simulate(&nocap, &s, NULL, &b) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(a.makespan_ns > b.makespan_ns, "the cap holds the storing producer: %g vs %g",
             a.makespan_ns, b.makespan_ns);
    xs_result_free(&a);
    /* a cap of 1e12 chunks: (int)1e12 was undefined (INT_MIN on x86, then a ring of one chunk
     * that held every producer); it never binds */
    p.capacity_bytes_per_producer = 1e12;
    XT_CHECK(xs_simulate(&p, &s, NULL, &a) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(a.makespan_ns == b.makespan_ns, "cap of 1e12 chunks: makespan %.17g vs %.17g",
             a.makespan_ns, b.makespan_ns);
    xs_result_free(&a);
    xs_result_free(&b);
    xs_schedule_free(&s);
}

/* --set values the profile's physical bounds refuse (docs/MODEL.md, "Profile bounds"): a producer
 * queue of 1e15 bytes overflowed the simulator's int count of queue chunks (UBSan; "out of
 * memory" in the release build), and rates of 3e-308 bytes/ns gave inf/NaN times and exit 0. */
static void test_profile_bounds(void)
{
    static const char *const inputs[] = {"cli/queue_1e15", "cli/drain_rate_tiny",
                                         "cli/issue_rate_tiny"};
    static const char *const field[] = {"queue_bytes_per_producer", "drain_bytes_per_ns",
                                        "issue_bytes_per_ns"};
    for (int k = 0; k < 3; k++) {
        char path[128];
        snprintf(path, sizeof path, REGRESS "%s", inputs[k]);
        size_t len = 0;
        char *text = slurp(path, &len);
        XT_CHECK(text != NULL, "cannot read %s (run from the repository root)", path);
        if (!text)
            continue;
        char *w[32];
        int n = words(text, w, 32), seen = 0;
        xs_profile p;
        xs_profile_default(&p);
        for (int i = 0; i + 1 < n; i++)
            if (!strcmp(w[i], "--set")) {
                XT_CHECK(xs_profile_set(&p, w[i + 1]) == XS_OK, "%s", xs_errmsg());
                seen++;
            }
        free(text);
        XT_CHECK(seen == 1, "%s: one --set", inputs[k]);
        XT_CHECK(xs_profile_check(&p, "profile") == XS_ERANGE && strstr(xs_errmsg(), field[k]),
                 "%s: accepted, or '%s' does not name %s", inputs[k], xs_errmsg(), field[k]);
        xs_schedule s;
        static const char one[] = "producers,bytes_per_producer,gap_ns\n4,16384,100\n";
        XT_CHECK(xs_schedule_parse(one, sizeof one - 1, "one.csv", &s) == XS_OK, "%s",
                 xs_errmsg());
        xs_result r;
        XT_CHECK(xs_simulate(&p, &s, NULL, &r) == XS_ERANGE, "%s: simulated", inputs[k]);
        xs_schedule_free(&s);
    }
}

int main(void)
{
    test_control_characters();
    test_schedule_gap_digits();
    test_profile_utf8_cut();
    test_profile_number_digits();
    test_size_sign_after_space();
    test_set_blank_value();
    test_ring_per_producer_cap();
    test_profile_bounds();
    return xt_done();
}
