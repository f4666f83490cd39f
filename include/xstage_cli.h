// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_cli.h - command-line helpers shared by the tool's CPU and GPU subcommands.
 *
 * Sizes accept K/M/G suffixes (powers of 1024), times accept ns/us/ms/s suffixes; every parser
 * returns XS_EINVAL with a one-line message naming the option and the bad text.
 */
#ifndef XSTAGE_CLI_H
#define XSTAGE_CLI_H

#include <getopt.h>
#include <stdint.h>
#include "xstage.h"

#ifdef __cplusplus
extern "C" {
#endif

xs_status xs_parse_size(const char *opt, const char *s, int64_t *out);   /* "64K" -> 65536 */
xs_status xs_parse_int(const char *opt, const char *s, long lo, long hi, long *out);
xs_status xs_parse_double(const char *opt, const char *s, double lo, double hi, double *out);
xs_status xs_parse_time_ns(const char *opt, const char *s, double *out); /* "2us" -> 2000 */
/* A comma list of integers in lo..hi (sizes: each with K/M/G suffixes allowed), at most max of
 * them, into out[]; *n gets the count. */
xs_status xs_parse_list(const char *opt, const char *s, int sizes, long lo, long hi, int *out,
                        int max, int *n);

/* Profile options common to every subcommand that reads a profile: --profile FILE and any number
 * of --set NAME=VALUE. Collect them while parsing, then resolve: the file (or the embedded
 * default), then the overrides in order, then xs_profile_check. */
typedef struct {
    const char *file;
    const char *sets[64];
    int nsets;
} xs_profile_args;

xs_status xs_profile_args_add_set(xs_profile_args *a, const char *assignment);
xs_status xs_profile_args_resolve(const xs_profile_args *a, xs_profile *p);

/* The options every bench takes: -n/--iters N (1..max_iters), -w/--warmup N (0..100),
 * -d/--device N (0..1023), -g/--gpus N (1..64 ranks), --seed N, --profile FILE and --set
 * NAME=VALUE; each *_set says the option was given. */
typedef struct {
    int iters, warmup, device, gpus;
    int iters_set, device_set, gpus_set;
    uint32_t seed;
    xs_profile_args pa;
} xs_bench_opts;

/* getopt_long ids for the shared options, above the ASCII range. */
enum { XS_OPT_PROFILE = 1000, XS_OPT_SET, XS_OPT_CSV, XS_OPT_JSON, XS_OPT_PLOT, XS_OPT_OUT,
       XS_OPT_TARGET, XS_OPT_SYNC, XS_OPT_QUICK, XS_OPT_VPEERS, XS_OPT_SCHEDULE, XS_OPT_SEED,
       XS_OPT_FIRST_FREE = 1100 };

/* ch one of 'n', 'w', 'd', 'g', XS_OPT_SEED, XS_OPT_PROFILE, XS_OPT_SET: parse arg into b;
 * returns 1 when ch was one of them, 0 when not (nothing touched), -1 on a bad value (one-line
 * error). */
int xs_parse_bench_opt(int ch, const char *arg, long max_iters, xs_bench_opts *b);

/* The tool's whole command line, recorded by main() so that every report names the exact command
 * that produced it. xs_cli_command returns NULL (and *argc = 0) when none was recorded. */
void xs_cli_set_command(int argc, char **argv);
char **xs_cli_command(int *argc);

/* Every error line of the tool goes through these two: "xstage: error: <msg>" on one line, with
 * every control character in msg (newline, ESC: it may quote arguments or files) folded to a
 * space. xs_cli_set_command also arranges for a failed write to the standard
 * output to be reported at exit (one line, exit status 1), makes getopt silent (opterr = 0: see
 * xs_cli_badopt) and ignores SIGXFSZ (a write past `ulimit -f` fails and is reported).
 *
 * Print "xstage: error: <xs_errmsg()>" (one line) and return 1; for subcommands' error paths. */
int xs_cli_fail(void);
/* A -g run's launch decision (l and ec of xs_launch_or_run or xs_bench_launch) as a
 * subcommand's exit: -1 when this process does the work (l == 0, a rank or a one-GPU run), else
 * the status to return: the ranks' exit code when this process launched them, 1 when nothing
 * could start; a failure prints its one line. */
int xs_launch_exit(int l, int ec);
/* The same with a message built here. */
int xs_cli_failf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* getopt_long returned '?' (opterr is 0): print one line naming the bad option of cmd, as
 * typed, and return 1. optstring is the short-option string given to getopt_long. */
int xs_cli_badopt(const char *cmd, const char *optstring, int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
