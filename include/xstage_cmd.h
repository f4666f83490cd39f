// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_cmd.h - the subcommands of the xstage tool. Each takes (argc, argv) with argv[0] the
 * subcommand name and returns the process exit status. CPU subcommands live in tools/; GPU ones
 * in cuda/ (or tools/nocuda.inc when the build has no nvcc).
 */
#ifndef XSTAGE_TOOL_H
#define XSTAGE_TOOL_H

#include "xstage.h"

#ifdef __cplusplus
extern "C" {
#endif

int xs_cmd_predict(int argc, char **argv);
int xs_cmd_criterion(int argc, char **argv);
int xs_cmd_plan(int argc, char **argv);
int xs_cmd_profile(int argc, char **argv);
int xs_cmd_compare(int argc, char **argv);       /* tools/cmd_trace.c */
int xs_cmd_predict_trace(int argc, char **argv); /* predict --trace FILE */
/* replay --windows FILE (trace v1, docs/TRACE.md) and --timeline FILE.json (either may be NULL):
 * the reported run m against the schedule's prediction pw, both with windows; sm[p] the SM of
 * producer p (nsm of them); meta "key=value" lines (NULL-terminated). 0, or the exit status after
 * a one-line error (tools/cmd_trace.c). */
int xs_replay_trace_files(const char *windows, const char *timeline, const xs_schedule *s,
                          const xs_result *m, const xs_result *pw, const int *sm, int nsm,
                          const xs_profile *p, const char *const *meta);

/* GPU subcommands */
int xs_cmd_calibrate(int argc, char **argv);
int xs_cmd_replay(int argc, char **argv);
int xs_cmd_validate(int argc, char **argv);
int xs_cmd_probe(int argc, char **argv);
int xs_bench_ep(int argc, char **argv);
int xs_bench_tp(int argc, char **argv);
int xs_bench_up(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
