// SPDX-License-Identifier: Apache-2.0
/*
 * xstage - the command-line tool: predict, criterion, plan, profile and compare run anywhere;
 * calibrate, replay, validate and bench need a GPU (and a build with nvcc).
 */
#include <stdio.h>
#include <string.h>

#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_sigint.h"

/* GPU subcommands are weak: a build without nvcc has none, and says so. */
#pragma weak xs_cmd_calibrate
#pragma weak xs_cmd_replay
#pragma weak xs_cmd_validate
#pragma weak xs_cmd_probe
#pragma weak xs_bench_ep
#pragma weak xs_bench_tp
#pragma weak xs_bench_up

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} xs_subcmd;

static int cmd_bench(int argc, char **argv);
int xs_bench_model(int argc, char **argv); /* tools/cmd_bench_model.c: CPU only */

static const xs_subcmd subcmds[] = {
    {"predict", xs_cmd_predict, "simulate a schedule on a profile: per-row issue and end times"},
    {"criterion", xs_cmd_criterion, "closed forms and the no-backpressure criterion for K, B, G"},
    {"plan", xs_cmd_plan, "piggyback or reshape a schedule; write the planned schedule"},
    {"profile", xs_cmd_profile, "show or check a profile (JSON)"},
    {"compare", xs_cmd_compare, "a kernel's recorded trace against its prediction, tile by tile"},
    {"calibrate", NULL, "measure R, issue rate, overhead and capacity on the GPU; fit a profile"},
    {"replay", NULL, "run a schedule on the GPU and measure the same columns as predict"},
    {"validate", NULL, "predict and replay a built-in suite of schedules; report the errors"},
    {"probe", NULL, "work under stores, and the drain of row-shaped stores (measured, not fitted)"},
    {"bench", cmd_bench, "fused workloads: bench ep | tp | up; the model's CPU cost: bench model"},
};

static int (*gpu_fn(const char *name))(int, char **)
{
    if (!strcmp(name, "calibrate")) return xs_cmd_calibrate;
    if (!strcmp(name, "replay")) return xs_cmd_replay;
    if (!strcmp(name, "validate")) return xs_cmd_validate;
    if (!strcmp(name, "probe")) return xs_cmd_probe;
    if (!strcmp(name, "ep")) return xs_bench_ep;
    if (!strcmp(name, "tp")) return xs_bench_tp;
    if (!strcmp(name, "up")) return xs_bench_up;
    return NULL;
}

static int not_built(const char *name)
{
    return xs_cli_failf("'%s' needs the CUDA side, and this xstage was built without nvcc", name);
}

static int cmd_bench(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: xstage bench ep|tp|up|model [options]   (xstage bench ep --help for "
               "options)\n"
               "  ep  fused MoE: dispatch, Linear-1, SwiGLU, Linear-2, combine (expert parallel)\n"
               "  tp  fused GEMM + reduce-scatter, all-gather + GEMM, TP MLP block\n"
               "  up  attention with a piggybacked Ulysses all-to-all\n"
               "  model  the model's own cost on this CPU (no GPU)\n");
        return argc < 2 ? 1 : 0;
    }
    if (!strcmp(argv[1], "model"))
        return xs_bench_model(argc - 1, argv + 1);
    int (*fn)(int, char **) = NULL;
    if (!strcmp(argv[1], "ep") || !strcmp(argv[1], "tp") || !strcmp(argv[1], "up"))
        fn = gpu_fn(argv[1]);
    else {
        return xs_cli_failf("unknown benchmark '%s' (ep, tp, up or model)", argv[1]);
    }
    if (!fn)
        return not_built(argv[1]);
    xs_sigint_install();
    return fn(argc - 1, argv + 1);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: xstage <command> [options]   (xstage <command> --help for its options)\n"
               "       xstage --version\n\n");
    for (size_t i = 0; i < sizeof subcmds / sizeof subcmds[0]; i++)
        fprintf(f, "  %-10s %s\n", subcmds[i].name, subcmds[i].help);
    fprintf(f, "\nProfiles: --profile FILE and --set NAME=VALUE on every command that reads one;\n"
               "without --profile the embedded H200 PCIe profile is used.\n");
}

int main(int argc, char **argv)
{
    xs_cli_set_command(argc, argv);
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("xstage %s\n", XSTAGE_VERSION_STRING);
        return 0;
    }
    for (size_t i = 0; i < sizeof subcmds / sizeof subcmds[0]; i++) {
        if (strcmp(argv[1], subcmds[i].name))
            continue;
        int (*fn)(int, char **) = subcmds[i].fn ? subcmds[i].fn : gpu_fn(argv[1]);
        if (!fn)
            return not_built(argv[1]);
        if (!subcmds[i].fn)
            xs_sigint_install(); /* GPU commands stop cleanly between runs (xstage_sigint.h) */
        return fn(argc - 1, argv + 1);
    }
    return xs_cli_failf("unknown command '%s' (xstage --help lists them)", argv[1]);
}
