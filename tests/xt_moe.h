/*
 * xt_moe.h - synthetic local-control costs for the CPU checks of the MoE model (test_moe --model,
 * test_moe_courier, test_moe_adaptive): 1.6 us per 64-wide k-step, about an H200 main loop of the
 * mma.sync engine, plus a fixed epilogue; Linear-2 tiles store at 52 B/ns into HBM. Include after
 * cuda/moe.h.
 */
#ifndef XT_MOE_H
#define XT_MOE_H

#include <string.h>

static void xt_moe_synth_costs(const xs_moe_config *c, xs_moe_costs *k)
{
    memset(k, 0, sizeof *k);
    const double kstep = 1600.0;
    k->mma1_ns = kstep * c->hidden / 64.0;
    k->mma2_ns = kstep * c->inter / 64.0;
    k->c1_ns = k->mma1_ns + 1000.0;
    k->c2_ns = k->mma2_ns + 300.0;
    k->local_issue_bytes_per_ns = 52.0;
    k->span2_ns = 65536.0 / 52.0;
}

#endif
