// SPDX-License-Identifier: Apache-2.0
/*
 * cli.c - option value parsing shared by every subcommand (sizes with K/M/G, times with units,
 * bounded integers) and the --profile / --set resolution.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xstage_cli.h"

xs_status xs_parse_size(const char *opt, const char *s, int64_t *out)
{
    if (!s || !*s)
        return xs_seterr(XS_EINVAL, "%s: missing size", opt);
    errno = 0;
    char *end;
    /* strtod skips leading white space, so the sign is looked for after it */
    const char *sign = s;
    while (isspace((unsigned char)*sign))
        sign++;
    if (*sign == '-')
        return xs_seterr(XS_EINVAL, "%s '%s': a size cannot be negative", opt, s);
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v))
        return xs_seterr(XS_EINVAL, "%s '%s': not a size (e.g. 4096, 64K, 2M, 1G)", opt, s);
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mul = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mul = 1024.0 * 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return xs_seterr(XS_EINVAL, "%s '%s': not a size (e.g. 4096, 64K, 2M, 1G)", opt, s);
    v *= mul;
    if (v > 9.0e18 || v != floor(v))
        return xs_seterr(XS_EINVAL, "%s '%s': not a whole number of bytes in range", opt, s);
    *out = (int64_t)v;
    return XS_OK;
}

xs_status xs_parse_int(const char *opt, const char *s, long lo, long hi, long *out)
{
    if (!s || !*s)
        return xs_seterr(XS_EINVAL, "%s: missing value", opt);
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno == ERANGE)
        return xs_seterr(XS_EINVAL, "%s '%s': not an integer", opt, s);
    if (v < lo || v > hi)
        return xs_seterr(XS_EINVAL, "%s %ld: outside %ld..%ld", opt, v, lo, hi);
    *out = v;
    return XS_OK;
}

int xs_parse_bench_opt(int ch, const char *arg, long max_iters, xs_bench_opts *b)
{
    long v;
    switch (ch) {
    case 'n':
        if (xs_parse_int("--iters", arg, 1, max_iters, &v) != XS_OK)
            return -1;
        b->iters = (int)v;
        b->iters_set = 1;
        return 1;
    case 'w':
        if (xs_parse_int("--warmup", arg, 0, 100, &v) != XS_OK)
            return -1;
        b->warmup = (int)v;
        return 1;
    case 'd':
        if (xs_parse_int("--device", arg, 0, 1023, &v) != XS_OK)
            return -1;
        b->device = (int)v;
        b->device_set = 1;
        return 1;
    case 'g':
        if (xs_parse_int("--gpus", arg, 1, 64, &v) != XS_OK) /* XS_LAUNCH_MAX_RANKS */
            return -1;
        b->gpus = (int)v;
        b->gpus_set = 1;
        return 1;
    case XS_OPT_SEED:
        if (xs_parse_int("--seed", arg, 0, 4294967295L, &v) != XS_OK)
            return -1;
        b->seed = (uint32_t)v;
        return 1;
    case XS_OPT_PROFILE:
        b->pa.file = arg;
        return 1;
    case XS_OPT_SET:
        return xs_profile_args_add_set(&b->pa, arg) == XS_OK ? 1 : -1;
    }
    return 0;
}

xs_status xs_parse_double(const char *opt, const char *s, double lo, double hi, double *out)
{
    if (!s || !*s)
        return xs_seterr(XS_EINVAL, "%s: missing value", opt);
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(v))
        return xs_seterr(XS_EINVAL, "%s '%s': not a number", opt, s);
    if (v < lo || v > hi)
        return xs_seterr(XS_EINVAL, "%s %g: outside %g..%g", opt, v, lo, hi);
    *out = v;
    return XS_OK;
}

xs_status xs_parse_time_ns(const char *opt, const char *s, double *out)
{
    if (!s || !*s)
        return xs_seterr(XS_EINVAL, "%s: missing time", opt);
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v))
        return xs_seterr(XS_EINVAL, "%s '%s': not a time (e.g. 500, 500ns, 2us, 1.5ms)", opt, s);
    double mul = 1;
    if (!*end || !strcmp(end, "ns")) mul = 1;
    else if (!strcmp(end, "us")) mul = 1e3;
    else if (!strcmp(end, "ms")) mul = 1e6;
    else if (!strcmp(end, "s")) mul = 1e9;
    else
        return xs_seterr(XS_EINVAL, "%s '%s': unknown time unit '%s' (ns, us, ms, s)", opt, s,
                         end);
    if (v < 0)
        return xs_seterr(XS_EINVAL, "%s '%s': a time cannot be negative", opt, s);
    v *= mul;
    if (v > XS_MAX_GAP_NS)
        return xs_seterr(XS_EINVAL, "%s '%s': longer than 1000 s", opt, s);
    *out = v;
    return XS_OK;
}

xs_status xs_parse_list(const char *opt, const char *s, int sizes, long lo, long hi, int *out,
                        int max, int *n)
{
    char buf[1024];
    if (!s || strlen(s) >= sizeof buf)
        return xs_seterr(XS_EINVAL, "%s: list missing or longer than %zu characters", opt,
                         sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n >= max)
            return xs_seterr(XS_EINVAL, "%s: at most %d values", opt, max);
        long v;
        if (sizes) {
            int64_t b;
            XS_TRY(xs_parse_size(opt, tok, &b));
            if (b < lo || b > hi)
                return xs_seterr(XS_EINVAL, "%s %lld: outside %ld..%ld", opt, (long long)b, lo,
                                 hi);
            v = (long)b;
        } else {
            XS_TRY(xs_parse_int(opt, tok, lo, hi, &v));
        }
        out[(*n)++] = (int)v;
    }
    if (*n == 0)
        return xs_seterr(XS_EINVAL, "%s: empty list", opt);
    return XS_OK;
}

xs_status xs_profile_args_add_set(xs_profile_args *a, const char *assignment)
{
    if (a->nsets >= (int)(sizeof a->sets / sizeof a->sets[0]))
        return xs_seterr(XS_EINVAL, "--set: at most 64 overrides");
    a->sets[a->nsets++] = assignment;
    return XS_OK;
}

xs_status xs_profile_args_resolve(const xs_profile_args *a, xs_profile *p)
{
    if (a->file)
        XS_TRY(xs_profile_load(a->file, p));
    else
        xs_profile_default(p);
    for (int i = 0; i < a->nsets; i++)
        XS_TRY(xs_profile_set(p, a->sets[i]));
    return xs_profile_check(p, a->nsets ? "profile after --set" : (a->file ? a->file
                                                                            : "embedded profile"));
}

static int cmd_argc;
static char **cmd_argv;
static int error_printed; /* an error line went out: the exit status already says so */

/* Write prefix msg "\n" as one line: a newline, ESC or any other control byte in msg (it may
 * quote the user's arguments or a file) becomes a space, as in xs_seterr's messages, so that a
 * message never spans lines or drives the terminal. */
static void say_error(const char *prefix, const char *msg)
{
    char out[2048];
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)msg; *c && n + 1 < sizeof out; c++)
        out[n++] = *c < 0x20 || *c == 0x7f ? ' ' : (char)*c;
    out[n] = 0;
    fflush(stdout); /* what the command printed comes first */
    fprintf(stderr, "%s%s\n", prefix, out);
    error_printed = 1;
}

/* At exit: a table that did not reach the standard output (a full disk, /dev/full, a closed
 * descriptor) is a failure, reported once, unless an error was reported already. */
static void check_stdout(void)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return;
    if (error_printed)
        return;
    int e = errno;
    char msg[256];
    snprintf(msg, sizeof msg, "cannot write the standard output: %s",
             strerror(e ? e : EIO));
    say_error("xstage: error: ", msg);
    _exit(1);
}

void xs_cli_set_command(int argc, char **argv)
{
    cmd_argc = argc;
    cmd_argv = argv;
    /* getopt's own messages are replaced by one line of ours (xs_cli_badopt) */
    opterr = 0;
    /* a write past `ulimit -f` fails with EFBIG and is reported, instead of killing the process
     * half-way through a file */
    signal(SIGXFSZ, SIG_IGN);
    static int registered;
    if (!registered++)
        atexit(check_stdout);
}

char **xs_cli_command(int *argc)
{
    *argc = cmd_argc;
    return cmd_argv;
}

int xs_cli_fail(void)
{
    say_error("xstage: error: ", xs_errmsg());
    if (getenv("XS_DEBUG") && *xs_errwhere()) {
        char where[600];
        snprintf(where, sizeof where, "%s)", xs_errwhere());
        say_error("xstage: (first seen at ", where);
    }
    return 1;
}

int xs_cli_badopt(const char *cmd, const char *optstring, int argc, char **argv)
{
    int at = optind - 1 < argc ? optind - 1 : argc - 1;
    const char *bad = at >= 1 ? argv[at] : "?";
    /* a short option (-x) is named by its letter; a long one (--seq) as typed */
    if (optopt > 0 && optopt < 256 && strncmp(bad, "--", 2))
        return xs_cli_failf("%s: option -%c %s (--help lists the options)", cmd, optopt,
                            strchr(optstring, optopt) ? "needs a value" : "is unknown");
    /* getopt_long sets optopt to the option's value when it exists: "--csv=1" gave a value to
     * an option that takes none, "--schedule" at the end lacks its value */
    const char *why = !optopt            ? "is unknown or ambiguous"
                      : strchr(bad, '=') ? "takes no value"
                                         : "needs a value";
    return xs_cli_failf("%s: option '%s' %s (--help lists the options)", cmd, bad, why);
}

int xs_launch_exit(int l, int ec)
{
    if (l == 0)
        return -1;
    if (l < 0)
        return xs_cli_fail();
    if (ec)
        xs_cli_fail();
    return ec;
}

int xs_cli_failf(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    say_error("xstage: error: ", msg);
    return 1;
}
