// SPDX-License-Identifier: Apache-2.0
/*
 * test_up_decide.c - the UP planner's decision alone (xs_up_plan_decide, src/up_plan.c) against
 * the full table (xs_up_plan_run): the same member chosen, its d and predicted time
 * bit-identical, and every member's bound at or below its prediction, over bench up's default
 * grid (seq 8K..64K, heads 8/16, causal or not, peers 2/4/8) and the declared grid's sequence
 * lengths (4096..65536), on the embedded profile and on the calibrated one of
 * bench/results/up/profile.json, with and without KV members and the slices' own cost; and over
 * tests/xt_up.h's small grid (20 SMs, forced splits, orders, couriers and KV splits) under its
 * five option sets. Also that the decision simulates fewer members than the family has where
 * the bounds separate them (the default grid's last rows).
 *
 * usage: test_up_decide   last line: "N passed, N failed"
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt.h"
#include "xstage_up.h"
#include "xt_up.h"

#define CALIBRATED "bench/results/up/profile.json"

static int cases, spared, members; /* members: those the engine simulates (not couriers) */

/* One configuration under options o: decide == run, bounds below predictions. */
static void check_one(const xs_up_plan_opts *o, const xs_profile *prof, const xs_up_cfg *c,
                      const double *dur, const uint64_t *tns, const char *what)
{
    xs_up_plan *pl = malloc(sizeof *pl);
    xs_up_decision *dc = malloc(sizeof *dc);
    if (!pl || !dc) {
        XT_CHECK(0, "out of memory");
        free(pl), free(dc);
        return;
    }
    xs_up_plan_run(o, prof, c, dur, tns, pl);
    xs_up_plan_decide(o, prof, c, dur, dc);
    char a[32], b[32];
    xs_up_plan_name(pl->order, pl->split, pl->couriers, pl->kv, a, sizeof a);
    xs_up_plan_name(dc->order, dc->split, dc->couriers, dc->kv, b, sizeof b);
    const xs_up_family *f = &pl->fam;
    XT_CHECK(dc->n == f->n, "%s: %d members, run has %d", what, dc->n, f->n);
    XT_CHECK(!strcmp(a, b) && pl->order == dc->order && pl->split == dc->split &&
                 pl->couriers == dc->couriers && pl->kv == dc->kv,
             "%s: decide chose %s, run %s", what, b, a);
    /* bit-identical: the same bits, NAN included */
    XT_CHECK(!memcmp(&pl->d_fu_ns, &dc->d_fu_ns, sizeof(double)),
             "%s: decide's predicted %.17g, run's %.17g", what, dc->d_fu_ns, pl->d_fu_ns);
    XT_CHECK(dc->pick >= 0 && dc->pick < f->n &&
                 !memcmp(&f->d[dc->pick], &dc->d_ns, sizeof(double)),
             "%s: decide's d %.17g, run's %.17g", what, dc->d_ns,
             dc->pick >= 0 && dc->pick < f->n ? f->d[dc->pick] : NAN);
    XT_CHECK(pl->courier_pace == dc->courier_pace, "%s: pace %g vs %g", what, dc->courier_pace,
             pl->courier_pace);
    for (int i = 0; i < f->n && i < dc->n; i++) {
        char m[32];
        xs_up_plan_name(f->ord[i], f->spl[i], f->cou[i], f->kv[i], m, sizeof m);
        XT_CHECK(isnan(f->d[i]) || !(dc->lb[i] > f->d[i]),
                 "%s: member %s's bound %.17g above its prediction %.17g", what, m, dc->lb[i],
                 f->d[i]);
        XT_CHECK(!dc->evaluated[i] || !memcmp(&f->d[i], &dc->d[i], sizeof(double)),
                 "%s: member %s evaluated %.17g, run %.17g", what, m, dc->d[i], f->d[i]);
    }
    int sims = 0;
    for (int i = 0; i < f->n; i++)
        sims += f->cou[i] == 0 || f->kv[i] > 0;
    cases++, members += sims, spared += sims - dc->simulated;
    free(pl), free(dc);
}

static void cfg_of(xs_up_cfg *c, const xs_profile *prof, int seq, int heads, int causal,
                   int peers, int sms, double pace)
{
    memset(c, 0, sizeof *c);
    c->seq = seq, c->heads = heads, c->causal = causal, c->peers = peers, c->sms = sms;
    c->tiles = xs_attn_tiles(seq, heads);
    c->grid = c->tiles < sms ? c->tiles : sms;
    c->rows_per_rank = seq / peers;
    c->remote = xs_attn_remote_tiles(seq, heads, c->rows_per_rank);
    c->pace_bytes_per_ns = pace * prof->drain_bytes_per_ns;
}

/* Bench up's default grid and the declared grid's sequence lengths on profile prof. */
static void bench_grid(const xs_profile *prof, const char *pname)
{
    static const int seqs[] = {4096, 8192, 16384, 32768, 49152, 65536};
    static const int heads[] = {8, 16};
    static const int peers[] = {2, 4, 8};
    /* plan_timing's options; KV members and the slices' own cost; a lower load drain */
    static const xs_up_plan_opts opts[] = {{-1, -1, -1, -1, 0, 0.0, 0.0},
                                           {-1, -1, -1, -1, 1, 0.0, 190.0},
                                           {-1, -1, -1, -1, 0, 20.0, 0.0}};
    int k = 0;
    for (int is = 0; is < 6; is++)
        for (int ih = 0; ih < 2; ih++)
            for (int causal = 0; causal <= 1; causal++)
                for (int ip = 0; ip < 3; ip++, k++) {
                    xs_up_cfg c;
                    cfg_of(&c, prof, seqs[is], heads[ih], causal, peers[ip], 132, 0.9);
                    double *dur = malloc((size_t)c.tiles * sizeof(double));
                    uint64_t *tns = malloc((size_t)c.tiles * sizeof(uint64_t));
                    if (!dur || !tns) {
                        XT_CHECK(0, "out of memory");
                        free(dur), free(tns);
                        return;
                    }
                    xt_up_inputs(c.seq, c.heads, c.causal, c.grid, c.tiles, dur, tns);
                    char what[160];
                    /* every configuration under plan_timing's options, the others in turn */
                    for (int v = 0; v < 3; v += (v == 0 ? 1 + k % 2 : 3)) {
                        snprintf(what, sizeof what, "%s seq=%d heads=%d causal=%d peers=%d "
                                 "opts %d", pname, c.seq, c.heads, causal, c.peers, v);
                        check_one(&opts[v], prof, &c, dur, tns, what);
                    }
                    free(dur), free(tns);
                }
}

/* tests/xt_up.h's grid under its option sets (forced members, few SMs). */
static void small_grid(const xs_profile *prof, const char *pname)
{
    for (int is = 0; is < XT_UP_N(xt_up_seqs); is++)
        for (int ih = 0; ih < XT_UP_N(xt_up_heads); ih++)
            for (int causal = 0; causal <= 1; causal++)
                for (int ip = 0; ip < XT_UP_N(xt_up_peers); ip++)
                    for (int im = 0; im < XT_UP_N(xt_up_sms); im++) {
                        xs_up_cfg c;
                        const int sms = xt_up_sms[im];
                        cfg_of(&c, prof, xt_up_seqs[is], xt_up_heads[ih], causal,
                               xt_up_peers[ip], sms, sms == 132 ? XT_UP_PACE : 0.0);
                        double *dur = malloc((size_t)c.tiles * sizeof(double));
                        uint64_t *tns = malloc((size_t)c.tiles * sizeof(uint64_t));
                        if (!dur || !tns) {
                            XT_CHECK(0, "out of memory");
                            free(dur), free(tns);
                            return;
                        }
                        xt_up_inputs(c.seq, c.heads, c.causal, c.grid, c.tiles, dur, tns);
                        for (int v = 0; v < XT_UP_N(xt_up_variants); v++) {
                            const xt_up_variant *vr = &xt_up_variants[v];
                            const xs_up_plan_opts o = {vr->split,      vr->order,
                                                       vr->couriers,   vr->kv,
                                                       vr->kv_ok,      vr->load_drain,
                                                       vr->slice_ns};
                            char what[160];
                            snprintf(what, sizeof what, "%s seq=%d heads=%d causal=%d peers=%d "
                                     "sms=%d %s", pname, c.seq, c.heads, causal, c.peers, sms,
                                     vr->name);
                            check_one(&o, prof, &c, dur, tns, what);
                        }
                        free(dur), free(tns);
                    }
}

int main(void)
{
    xs_profile emb, cal;
    xs_profile_default(&emb);
    const int have_cal = xs_profile_load(CALIBRATED, &cal) == XS_OK;
    XT_CHECK(have_cal, "%s: %s", CALIBRATED, xs_errmsg());
    bench_grid(&emb, "embedded");
    if (have_cal)
        bench_grid(&cal, "calibrated");
    small_grid(&emb, "embedded");
    if (have_cal)
        small_grid(&cal, "calibrated");
    /* the bounds must spare simulations somewhere, or the decision is the table again */
    XT_CHECK(spared > 0, "no member spared over %d cases", cases);
    printf("# %d cases: %d of %d engine simulations spared\n", cases, spared, members);
    return xt_done();
}
