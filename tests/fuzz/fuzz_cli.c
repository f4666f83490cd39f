/*
 * fuzz_cli.c - libFuzzer target: the command line of the CPU subcommands and the option value
 * parsers.
 *
 * The input is an argv: words separated by newline or NUL bytes. Every word goes through
 * xs_parse_size/int/double/time_ns and xs_profile_set. When the first word names a CPU
 * subcommand (predict, criterion, plan, profile, compare), the words are its argv and it runs
 * with stdout sent to /dev/null and stderr captured: it returns 0 with nothing on stderr, or 1
 * with at most one line there.
 *
 * Files: this target is built with -Dfopen=xs_fuzz_fopen (make fuzz), so the core and
 * tools/cmd_model.c and cmd_trace.c open files through the seam below. It serves a few small
 * schedules, profiles and traces from memory by name (see `files`), sends every write (--out,
 * --csv, --timeline) to /dev/null and refuses every other path, so the fuzzer never reads or
 * writes the filesystem. PATH is emptied, so --plot stops at "needs gnuplot" and never starts a
 * program. The schedules are small enough that any profile simulates them in well under a
 * second: the fuzzer explores the command line and the model's corners, not run time.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"

#ifndef fopen
#error "build with -Dfopen=xs_fuzz_fopen (make fuzz), or the subcommands open real files"
#endif
#undef fopen
FILE *fopen(const char *restrict path, const char *restrict mode); /* the C library's */

#define H "producers,bytes_per_producer,gap_ns\n"
#define TH "cta,sm,seq,bytes,issue_start_ns,issue_end_ns,work_start_ns,work_end_ns\n"
#define PROFILE_NUMBERS                                                                       \
    "\"issue_bytes_per_ns\": 41, \"issue_overhead_ns\": 100, \"drain_bytes_per_ns\": 52.5, "  \
    "\"capacity_bytes\": 65536, \"chunk_bytes\": 2048"

/* The files the subcommands can open, by the exact name given on the command line. */
static const struct {
    const char *name;
    const char *text;
} files[] = {
    {"s.csv", "# small mixed schedule\n" H "4,16K,2000\n8,4096,0\n3,1,1e6\n2,64K,500.25\n"},
    {"one.csv", H "1,1,0\n"},
    {"wide.csv", H "65536,1,0\n1,16,1e12\n65536,1,1e12\n"},
    {"bad.csv", H "4,16K,0\n4,x,0\n"},
    {"empty.csv", ""},
    {"p.json", "{\"device\": \"fuzz\", \"path\": \"peer\", \"provisional\": false, "
               "\"capacity_bytes_per_producer\": 4096, " PROFILE_NUMBERS "}\n"},
    {"nocap.json", "{\"path\": \"virtual\", \"barrier_ns\": 700, "
                   "\"capacity_bytes_per_producer\": 0, " PROFILE_NUMBERS "}\n"},
    {"queue.json", "{\"path\": \"local\", \"queue_bytes_per_producer\": 8192, "
                   "\"capacity_bytes_per_producer\": 6144, " PROFILE_NUMBERS "}\n"},
    {"bad.json", "{\"path\": \"host\", \"chunk_bytes\": 1,,}\n"},
    {"t.csv", "# xstage-trace v1\n# dropped=0\n# producers=4\n" TH
              "0,1,0,65536,100,1400,-1,-1\n0,1,1,0,1500,1600,-1,-1\n"
              "0,1,2,8192,1700,2000,1600,1690\n3,7,0,200000,0,5000,-1,-1\n1,2,0,16,50,60,-1,-1\n"},
    {"tbad.csv", "# xstage-trace v1\n# dropped=3\n" TH "0,1,0,1,1,2,-1,-1\n"},
};

FILE *xs_fuzz_fopen(const char *path, const char *mode);
FILE *xs_fuzz_fopen(const char *path, const char *mode)
{
    if (strpbrk(mode, "wa+"))
        return fopen("/dev/null", "w");
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (strcmp(path, files[i].name))
            continue;
        size_t n = strlen(files[i].text);
        return n ? fmemopen((void *)files[i].text, n, "r") : fopen("/dev/null", "r");
    }
    errno = ENOENT;
    return NULL;
}

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    devnull = fopen("/dev/null", "w");
    FUZZ_CHECK(devnull != NULL, "/dev/null");
    setenv("PATH", "", 1);
    unsetenv("XS_DEBUG");
    unsetenv("POSIXLY_CORRECT");
    return 0;
}

static int has_digit(const char *s) { return strpbrk(s, "0123456789") != NULL; }

/* The value parsers on one word: a value in range, or a one-line message naming the option. */
static void values(const char *w)
{
    int64_t size;
    long l;
    double d;
    xs_status st = xs_parse_size("--bytes", w, &size);
    if (st == XS_OK)
        FUZZ_CHECK(size >= 0 && has_digit(w), "size '%s' -> %lld", w, (long long)size);
    else
        fuzz_check_error(st, "--bytes");
    st = xs_parse_int("-n", w, -1000, 1000, &l);
    if (st == XS_OK)
        FUZZ_CHECK(l >= -1000 && l <= 1000 && has_digit(w), "int '%s' -> %ld", w, l);
    else
        fuzz_check_error(st, "-n");
    st = xs_parse_double("--headroom", w, 0.01, 1, &d);
    if (st == XS_OK)
        FUZZ_CHECK(d >= 0.01 && d <= 1 && has_digit(w), "double '%s' -> %g", w, d);
    else
        fuzz_check_error(st, "--headroom");
    st = xs_parse_time_ns("--gap", w, &d);
    if (st == XS_OK)
        FUZZ_CHECK(d >= 0 && d <= XS_MAX_GAP_NS && has_digit(w), "time '%s' -> %g", w, d);
    else
        fuzz_check_error(st, "--gap");

    xs_profile p;
    xs_profile_default(&p);
    st = xs_profile_set(&p, w);
    if (st == XS_OK) {
        const char *v = strchr(w, '=') + 1;
        FUZZ_CHECK(has_digit(v), "--set '%s' accepted without a number", w);
        st = xs_profile_check(&p, "profile after --set");
        if (st != XS_OK)
            fuzz_check_error(st, "profile after --set");
    } else {
        fuzz_check_error(st, "--set");
    }
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
} cmds[] = {
    {"predict", xs_cmd_predict},
    {"criterion", xs_cmd_criterion},
    {"plan", xs_cmd_plan},
    {"profile", xs_cmd_profile},
    {"compare", xs_cmd_compare},
};

/* Run one subcommand as the tool would, stdout to /dev/null, stderr to memory. */
static void run(int (*fn)(int, char **), int argc, char **argv)
{
    /* glibc's getopt keeps the position inside a cluster of short options ("-hk") across calls
     * and only forgets it when optind is 0; the subcommands set optind = 1 as a fresh process
     * would, so start every run from a completed scan */
    static char *done[] = {"fuzz", NULL};
    optind = 0;
    while (getopt(1, done, "") != -1) {
    }

    char *err = NULL;
    size_t errlen = 0;
    FILE *errf = open_memstream(&err, &errlen);
    FUZZ_CHECK(errf != NULL, "open_memstream");
    FILE *out0 = stdout, *err0 = stderr;
    stdout = devnull;
    stderr = errf;
    int rc = fn(argc, argv);
    fflush(stdout);
    stdout = out0;
    stderr = err0;
    fclose(errf);

    int lines = 0;
    for (size_t i = 0; i < errlen; i++)
        lines += err[i] == '\n';
    FUZZ_CHECK(rc == 0 || rc == 1, "%s returned %d", argv[0], rc);
    if (rc == 0)
        FUZZ_CHECK(errlen == 0, "%s succeeded with stderr '%s'", argv[0], err);
    else
        FUZZ_CHECK(lines <= 1 && (errlen == 0 || err[errlen - 1] == '\n'),
                   "%s failed with %d stderr lines: '%s'", argv[0], lines, err);
    free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { MAX_WORDS = 64 };
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[MAX_WORDS + 1];
    int argc = 0;
    char *w = buf;
    for (size_t i = 0; i < size && argc < MAX_WORDS; i++) {
        if (buf[i] == '\n' || buf[i] == 0) {
            buf[i] = 0;
            argv[argc++] = w;
            w = buf + i + 1;
        }
    }
    if (*w && argc < MAX_WORDS) /* a last word without a separator after it */
        argv[argc++] = w;
    if (argc == 0) {
        free(buf);
        return 0;
    }
    argv[argc] = NULL;

    for (int i = 0; i < argc; i++)
        values(argv[i]);
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++)
        if (!strcmp(argv[0], cmds[c].name))
            run(cmds[c].fn, argc, argv);
    free(buf);
    return 0;
}
