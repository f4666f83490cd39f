// SPDX-License-Identifier: Apache-2.0
/*
 * up_opts.cu - `xstage bench up`'s own options: the option table, the help, the parser, the
 * defaults and the checks after parsing (the harness owns the common options; up.cu the bench).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "up_bench.h"
#include "xstage.h"
#include "xstage_cli.h"
#include "xstage_cmd.h"
#include "xstage_cuda.h"
#include "xstage_grid.h"

enum { OPT_SPLIT = XS_OPT_FIRST_FREE, OPT_SAMPLES, OPT_ORDER, OPT_COURIERS, OPT_PACE, OPT_PILOTS,
       OPT_PILOT_MAX, OPT_KV, OPT_SLICE_NS, OPT_TRACE, OPT_GRID, OPT_ROWS };

const struct option xs_upb_long[] = {
    {"seq", required_argument, 0, 's'},
    {"heads", required_argument, 0, 'H'},
    {"peers", required_argument, 0, 'p'},
    {"causal", required_argument, 0, 'c'},
    {"split", required_argument, 0, OPT_SPLIT},
    {"order", required_argument, 0, OPT_ORDER},
    {"couriers", required_argument, 0, OPT_COURIERS},
    {"courier-pace", required_argument, 0, OPT_PACE},
    {"kv-split", required_argument, 0, OPT_KV},
    {"pilots", required_argument, 0, OPT_PILOTS},
    {"pilot-max-us", required_argument, 0, OPT_PILOT_MAX},
    {"slice-ns", required_argument, 0, OPT_SLICE_NS},
    {"trace", required_argument, 0, OPT_TRACE},
    {"samples", required_argument, 0, OPT_SAMPLES},
    {"grid", required_argument, 0, OPT_GRID},
    {"rows", required_argument, 0, OPT_ROWS},
    {0, 0, 0, 0}};

const char xs_upb_about[] =
    "FlashAttention forward (bf16, head dim 128) + Ulysses all-to-all to virtual peers:\n"
    "fa (local output), serial (attention, then cudaMemcpyAsync per peer) and fused\n"
    "(output warps store straight into the peers' windows; planner picks piggyback or\n"
    "reshape). Every window byte is verified in every repetition. -g N (N > 1): the N\n"
    "ranks are the Ulysses group over NCCL windows (P = N; no --peers); -g 1: this\n"
    "one-GPU bench (docs/MULTIGPU.md). --quick: seq 8192,16384, heads 16, peers 8, -n 3.\n";

const char xs_upb_help[] =
    "  -s, --seq LIST        sequence lengths, K suffix ok\n"
    "                        [8192,16384,32768,49152,65536]\n"
    "  -H, --heads LIST      heads held by this rank [8,16]\n"
    "  -p, --peers LIST      ranks of the Ulysses group, incl. this one [2,4,8]\n"
    "  -c, --causal 0|1|both [both]\n"
    "      --split N         -1: planner decides; 0: piggyback; 1..256: spread each tile\n"
    "                        in N slices over the iterations of the next query block [-1]\n"
    "      --order WORD      auto (planner decides), snake (heaviest tiles first) or\n"
    "                        early (tiles crossing the link first, lightest first) [auto]\n"
    "      --couriers N      -1: planner decides (4 and 8 in its family); 0: none; N: the\n"
    "                        last N CTAs copy the remote tiles, paced, while the others\n"
    "                        compute [-1]\n"
    "      --courier-pace F  couriers' total rate as a fraction of the profile's drain\n"
    "                        rate R; 0 = unpaced [0.9]\n"
    "      --kv-split N      -1: planner decides (32, 16, 64 in its family, where pilots\n"
    "                        run); 0: none; N: tiles cut along the keys into parts of at\n"
    "                        most N key blocks on other CTAs, the last part merges them\n"
    "                        and stores the tile in --split slices (8) [-1]\n"
    "      --pilots N        the planner also runs its N best members by prediction,\n"
    "                        and piggyback and every KV split, 3 verified runs each, and\n"
    "                        keeps the fastest (median; those within 1 % of it\n"
    "                        are tied, the model's ranking decides); 0: the model's\n"
    "                        choice alone; one GPU only [4]\n"
    "      --pilot-max-us T  pilot only rows whose attention takes at most T us [3000]\n"
    "      --slice-ns X      the kernel's own cost of one output slice (ns), added to a\n"
    "                        split member's prediction once per slice of its busiest\n"
    "                        CTA: the slice_us column of an earlier run [0]\n"
    "      --samples N       reference rows checked per configuration [256]\n"
    "      --trace DIR       each point's last piggyback run as a trace v1 file,\n"
    "                        DIR/up_s<seq>_h<heads>_c<causal>_p<peers>_pb.csv\n"
    "                        (xstage compare --trace; docs/TRACE.md)\n"
    "      --grid WORD       declared: the declared grid of issue 33, seq (4096..65536) x\n"
    "                        heads (8,16) x causal (0,1) x peers (2,4,8), 60 rows, every\n"
    "                        one reported (columns grid_row, status: ok, skipped: <why>\n"
    "                        when it cannot run here, failed: <error>, not run:\n"
    "                        --max-time spent); default: the sweep above [default]\n"
    "      --rows A:B        with --grid declared: rows A..B-1 of it only (A: or :B\n"
    "                        open-ended), to split the grid over runs [all]\n"
    "  The model's drain rate for the fused kernel's stores is the profile's\n"
    "  drain_under_load_bytes_per_ns (calibrate --load-probe; --set to override), else R.\n";

xs_status xs_upb_opt(void *ctx, int ch, const char *arg)
{
    up_opts *o = (up_opts *)ctx;
    long v;
    switch (ch) {
    case 's':
        XS_TRY(xs_parse_list("--seq", arg, 1, 1, XS_ATTN_MAX_SEQ, o->seq, UP_MAX_LIST, &o->nseq));
        o->seq_set = 1;
        return XS_OK;
    case 'H':
        XS_TRY(xs_parse_list("--heads", arg, 0, 1, XS_ATTN_MAX_HEADS, o->heads, UP_MAX_LIST,
                             &o->nheads));
        o->heads_set = 1;
        return XS_OK;
    case 'p':
        XS_TRY(xs_parse_list("--peers", arg, 0, 1, XS_MAX_RANKS, o->peers, UP_MAX_LIST,
                             &o->npeers));
        o->peers_set = 1;
        return XS_OK;
    case 'c':
        if (!strcmp(arg, "0"))
            o->causal_lo = o->causal_hi = 0;
        else if (!strcmp(arg, "1"))
            o->causal_lo = o->causal_hi = 1;
        else if (!strcmp(arg, "both"))
            o->causal_lo = 0, o->causal_hi = 1;
        else
            return xs_seterr(XS_EINVAL, "--causal '%s': expected 0, 1 or both", arg);
        o->causal_set = 1;
        return XS_OK;
    case OPT_SPLIT:
        XS_TRY(xs_parse_int("--split", arg, -1, XS_ATTN_MAX_SPLIT, &v));
        o->split = (int)v;
        return XS_OK;
    case OPT_ORDER:
        if (!strcmp(arg, "auto"))
            o->order = -1;
        else if (!strcmp(arg, "snake"))
            o->order = XS_ATTN_ORDER_SNAKE;
        else if (!strcmp(arg, "early"))
            o->order = XS_ATTN_ORDER_EARLY;
        else
            return xs_seterr(XS_EINVAL, "--order '%s': expected auto, snake or early", arg);
        return XS_OK;
    case OPT_COURIERS:
        XS_TRY(xs_parse_int("--couriers", arg, -1, XS_ATTN_MAX_COURIERS, &v));
        o->couriers = (int)v;
        return XS_OK;
    case OPT_PACE:
        return xs_parse_double("--courier-pace", arg, 0.0, 4.0, &o->courier_pace);
    case OPT_PILOTS:
        XS_TRY(xs_parse_int("--pilots", arg, 0, UP_MAX_PILOTS, &v));
        o->pilots = (int)v;
        return XS_OK;
    case OPT_KV:
        XS_TRY(xs_parse_int("--kv-split", arg, -1, 1 << 20, &v));
        o->kv = (int)v;
        return XS_OK;
    case OPT_PILOT_MAX:
        return xs_parse_double("--pilot-max-us", arg, 0.0, 1e9, &o->pilot_max_us);
    case OPT_SLICE_NS:
        return xs_parse_double("--slice-ns", arg, 0.0, 1e6, &o->slice_ns);
    case OPT_TRACE: o->trace = arg; return XS_OK;
    case OPT_SAMPLES:
        XS_TRY(xs_parse_int("--samples", arg, 1, 65536, &v));
        o->samples = (int)v;
        return XS_OK;
    case OPT_GRID: return xs_grid_parse(arg, &o->grid);
    case OPT_ROWS: o->rows_arg = arg; return XS_OK;
    }
    return xs_seterr(XS_EINVAL, "bench up: unhandled option %d", ch);
}

void xs_upb_defaults(up_opts *o)
{
    static const int seq_def[] = {8192, 16384, 32768, 49152, 65536};
    memset(o, 0, sizeof *o);
    memcpy(o->seq, seq_def, sizeof seq_def);
    o->nseq = 5;
    o->heads[0] = 8, o->heads[1] = 16, o->nheads = 2;
    o->peers[0] = 2, o->peers[1] = 4, o->peers[2] = 8, o->npeers = 3;
    o->causal_lo = 0, o->causal_hi = 1;
    o->split = -1, o->order = -1, o->samples = 256;
    o->couriers = -1, o->courier_pace = 0.9, o->kv = -1;
    o->pilots = 4, o->pilot_max_us = 3000;
}

/* --grid declared: the grid fixes the points (one line for an option that would change them),
 * --rows picks a slice; the lists become the grid's axes (the buffers' sizes). 0, or 1 after
 * the one error line. */
static int upb_check_grid(up_opts *o, const xs_bench_common *c)
{
    const char *bad = o->seq_set ? "--seq" : o->heads_set ? "--heads" : o->peers_set ? "--peers"
                      : o->causal_set ? "--causal" : c->quick ? "--quick"
                      : c->b.gpus > 1 ? "-g N > 1" : NULL;
    if (xs_grid_opts_check("bench up", o->grid, bad, o->rows_arg, XS_GRID_UP_ROWS, &o->rows_lo,
                           &o->rows_hi) != XS_OK)
        return xs_cli_fail();
    if (!o->grid)
        return 0;
    memcpy(o->seq, xs_grid_up_seq, sizeof xs_grid_up_seq);
    o->nseq = XS_GRID_UP_NSEQ;
    memcpy(o->heads, xs_grid_up_heads, sizeof xs_grid_up_heads);
    o->nheads = XS_GRID_UP_NHEADS;
    memcpy(o->peers, xs_grid_peers, sizeof xs_grid_peers);
    o->npeers = XS_GRID_NPEERS;
    o->causal_lo = 0, o->causal_hi = 1;
    return 0;
}

/* The checks across options, after parsing: 0, or 1 after the one error line. */
int xs_upb_check_opts(up_opts *o, const xs_bench_common *c)
{
    const int gpus = c->b.gpus;
    if (upb_check_grid(o, c))
        return 1;
    if (o->couriers > 0 && o->split >= 0)
        return xs_cli_failf("--couriers %d cannot be combined with --split %d (a courier run "
                            "stores each tile once, unsliced)", o->couriers, o->split);
    if (o->kv > 0 && o->couriers > 0)
        return xs_cli_failf("--kv-split %d cannot be combined with --couriers (a KV-split run "
                            "stores each tile from its last part)", o->kv);
    if (o->kv > 0 && gpus > 1)
        return xs_cli_failf("--kv-split %d: one GPU only (the planner keeps KV split out of -g "
                            "runs)", o->kv);
    /* -g 1 is the one-GPU bench (its --peers are virtual); with N > 1 the ranks are the
     * Ulysses group: P = N */
    const xs_gpus_conflict cf[] = {
        {"--device", c->b.device_set, "rank r runs on GPU r"},
        {"--peers", gpus > 1 && o->peers_set,
         "with -g the ranks are the peers: P = the number of GPUs"}};
    if (xs_gpus_check("bench up", c->b.gpus_set, gpus, cf, 2) != XS_OK)
        return xs_cli_fail();
    if (gpus > 1)
        o->peers[0] = gpus, o->npeers = 1, o->peers_set = 1;
    if (c->quick) {
        if (!o->seq_set)
            o->seq[0] = 8192, o->seq[1] = 16384, o->nseq = 2;
        if (!o->heads_set)
            o->heads[0] = 16, o->nheads = 1;
        if (!o->peers_set)
            o->peers[0] = 8, o->npeers = 1;
    }
    for (int i = 0; i < o->nseq; i++)
        for (int j = 0; j < o->npeers; j++)
            if (o->seq[i] % o->peers[j])
                return xs_cli_failf("--seq %d is not a multiple of %s %d (each rank "
                                    "receives seq/peers rows)", o->seq[i],
                                    gpus > 1 ? "-g/--gpus" : "--peers", o->peers[j]);
    return 0;
}
