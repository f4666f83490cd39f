/*
 * xstage_cmd.h - the subcommands of the xstage tool. Each takes (argc, argv) with argv[0] the
 * subcommand name and returns the process exit status. CPU subcommands live in tools/; GPU ones
 * in cuda/ (or tools/nocuda.inc when the build has no nvcc).
 */
#ifndef XSTAGE_TOOL_H
#define XSTAGE_TOOL_H

#ifdef __cplusplus
extern "C" {
#endif

int xs_cmd_predict(int argc, char **argv);
int xs_cmd_criterion(int argc, char **argv);
int xs_cmd_plan(int argc, char **argv);
int xs_cmd_profile(int argc, char **argv);
int xs_cmd_compare(int argc, char **argv);       /* tools/cmd_trace.c */
int xs_cmd_predict_trace(int argc, char **argv); /* predict --trace FILE */

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
