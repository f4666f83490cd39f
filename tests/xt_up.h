// SPDX-License-Identifier: Apache-2.0
/*
 * xt_up.h - the grid of UP configurations and the deterministic inputs (per-tile times and end
 * stamps) of the recorded-decisions test (tests/test_up_plans.c, tests/data/up_plans.txt).
 *
 * The inputs stand in for a measured fa run: tile t takes dur_ns[t], a function of its key-block
 * iterations and a hash of t, and the CTAs walk the snake from 1 ms, so tns[t] is tile t's end.
 * Pure integer and double arithmetic without contraction, so the file is reproduced exactly.
 */
#ifndef XT_UP_H
#define XT_UP_H

#include <stdint.h>
#include <stdlib.h>

static const int xt_up_seqs[] = {1000, 4096, 16384};
static const int xt_up_heads[] = {1, 8};
static const int xt_up_peers[] = {2, 8};
static const int xt_up_sms[] = {132, 20};
#define XT_UP_N(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define XT_UP_PACE 0.9 /* couriers' pace, a fraction of R, where sms = 132 (else unpaced) */

/* Planner options of one variant: split, order, couriers, kv (-1: the planner chooses), the
 * model's drain (0: the profile's), slice_ns, and whether KV members may join (kv_ok). */
typedef struct {
    int split, order, couriers, kv;
    double load_drain, slice_ns;
    int kv_ok;
    const char *name;
} xt_up_variant;
static const xt_up_variant xt_up_variants[] = {
    {-1, -1, -1, -1, 0.0, 0.0, 1, "free+kv"},
    {-1, -1, -1, -1, 20.0, 190.0, 0, "free,drain20,slice190"},
    {8, 1, -1, -1, 0.0, 0.0, 0, "split8,early"},
    {-1, -1, 4, -1, 0.0, 0.0, 0, "couriers4"},
    {-1, -1, -1, 32, 0.0, 50.0, 1, "kv32"},
};

/* Tile times (ns) and end stamps (ns) of the snake on grid CTAs; both [tiles]. */
static void xt_up_inputs(int seq, int heads, int causal, int grid, int tiles, double *dur,
                         uint64_t *tns)
{
    for (int t = 0; t < tiles; t++) {
        const uint32_t h = ((uint32_t)t * 2654435761u) >> 28;
        dur[t] = 1000.0 + 37.5 * xs_attn_tile_iters(seq, heads, causal, t) * (1.0 + h / 64.0);
    }
    for (int b = 0; b < grid; b++) {
        uint64_t clk = 1000000;
        const int m = xs_attn_cta_count(tiles, grid, b);
        for (int k = 0; k < m; k++) {
            const int t = xs_attn_cta_tile(0, tiles, 0, grid, b, k);
            clk += (uint64_t)dur[t];
            tns[t] = clk;
        }
    }
}

#endif /* XT_UP_H */
