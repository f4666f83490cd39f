// SPDX-License-Identifier: Apache-2.0
/*
 * plan_timing.c - wall time of the planners' decisions on this CPU (single thread): the EP auto
 * rule (xs_moe_auto) on every configuration of the EP table at its three default token counts,
 * both routings, its default peer count, 132 CTAs, synthetic costs (tests/xt_ep.h's) and the
 * embedded profile; the TP planner's decision (xs_tp_predict_candidates, the best alone; -v also
 * checks it against the full ranking) on the default sweep's
 * shapes (bench tp: models x token counts x default peers, 132 CTAs, the mma engine's usable
 * candidates, tests/test_tp_orders.c's synthetic costs); the UP planner's decision alone
 * (xs_up_plan_decide, which simulates only members that can win; -v also checks it against the
 * full table, and `upfull` times the full table, xs_up_plan_run, which the bench prints) on bench
 * up's default grid (seq 8K..64K, heads 8 and 16, causal or not, peers 2, 4, 8, 132 SMs); and
 * the EP decision cache (xs_moe_auto_cached): the median hit per case. Prints per decision lines with
 * -v, and the median, min and max per workload. No assertion: a measurement.
 *
 * usage: build/lab/plan_timing [-v] [-r REPS] [ep|tp|up|upfull|cache ...]
 *        (default: ep tp up cache, 3 reps)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xstage.h"
#include "xstage_ep.h"
#include "xstage_tp.h"
#include "xstage_up.h"

static int verbose;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the machine is shared */
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int dcmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, dcmp);
    return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : NAN;
}

static void summary(const char *what, double *ms, int n)
{
    if (!n)
        return;
    double lo = INFINITY, hi = -INFINITY;
    int over1 = 0, over2 = 0;
    for (int i = 0; i < n; i++) {
        lo = ms[i] < lo ? ms[i] : lo;
        hi = ms[i] > hi ? ms[i] : hi;
        over1 += ms[i] > 1.0;
        over2 += ms[i] > 2.0;
    }
    const double med = median_of(ms, n);
    printf("%-10s %4d decisions: median %9.3f ms  min %9.3f  max %9.3f  (>1 ms: %d, >2 ms: %d)\n",
           what, n, med, lo, hi, over1, over2);
}

/* the synthetic costs of tests/xt_ep.h */
static void ep_costs(const xs_moe_config *c, xs_moe_costs *k)
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

/* One EP case: the problem and its costs (the wave order's local control as kernel time). */
static xs_moe_problem *ep_case(const xs_moe_config *cfg, int T, int rt, const xs_profile *pf,
                               xs_moe_costs *c)
{
    xs_moe_opts o = {T, cfg->peers ? cfg->peers : 4, (xs_moe_routing)rt, 0, 5u};
    xs_moe_problem *m = NULL;
    if (xs_moe_problem_create(cfg, &o, 132, &m) != XS_OK)
        return NULL;
    ep_costs(cfg, c);
    const xs_moe_plan wp = {.kind = XS_MOE_WAVE};
    double kern = NAN;
    if (xs_moe_problem_set_plan(m, 0, &wp) == XS_OK &&
        xs_moe_predict(m, 0, pf, NULL, c, 0, &kern) == XS_OK)
        c->kernel_ns = kern;
    return m;
}

static void time_ep(int reps)
{
    xs_profile pf;
    xs_profile_default(&pf);
    double *ms = malloc(sizeof(double) * 64 * 6);
    int n = 0;
    for (int ci = 0; ci < xs_moe_nconfigs; ci++)
        for (int ti = 0; ti < 3; ti++)
            for (int rt = 0; rt < 2; rt++) {
                const xs_moe_config *cfg = &xs_moe_configs[ci];
                xs_moe_costs c;
                xs_moe_problem *m = ep_case(cfg, cfg->tokens[ti], rt, &pf, &c);
                if (!m)
                    continue;
                double v[16];
                xs_moe_auto_result r;
                for (int k = 0; k < reps; k++) {
                    const double t0 = now_ns();
                    xs_moe_auto(m, &pf, NULL, &c, NULL, NULL, &r);
                    v[k] = (now_ns() - t0) / 1e6;
                }
                ms[n] = median_of(v, reps);
                if (verbose)
                    printf("ep %-18s T=%5d %-8s %9.3f ms  -> %s D=%d\n", cfg->name,
                           cfg->tokens[ti], rt ? "zipf" : "balanced", ms[n],
                           xs_moe_sched_name(r.plan.kind), r.plan.lead);
                n++;
                xs_moe_problem_destroy(m);
            }
    summary("ep auto", ms, n);
    free(ms);
}

/* The decision cache: a miss (xs_moe_auto and the store), then the median of 201 hits timed one
 * by one, per case, exact and bucketed keys. */
static void time_cache(void)
{
    xs_profile pf;
    xs_profile_default(&pf);
    for (int kind = 0; kind < 2; kind++) {
        const xs_moe_cache_opts co = {(xs_moe_cache_key)kind, 0, 0, 0, 0};
        xs_moe_cache *mc = NULL;
        if (xs_moe_cache_create(&co, &mc) != XS_OK)
            return;
        double hit_us[64 * 6];
        int n = 0;
        for (int ci = 0; ci < xs_moe_nconfigs; ci++)
            for (int ti = 0; ti < 3; ti++)
                for (int rt = 0; rt < 2; rt++) {
                    const xs_moe_config *cfg = &xs_moe_configs[ci];
                    xs_moe_costs c;
                    xs_moe_problem *m = ep_case(cfg, cfg->tokens[ti], rt, &pf, &c);
                    if (!m)
                        continue;
                    xs_moe_auto_result r;
                    int hit = 0;
                    xs_moe_auto_cached(mc, m, &pf, NULL, &c, NULL, NULL, &r, &hit);
                    double one[201];
                    for (int k = 0; k < 201; k++) {
                        const double t0 = now_ns();
                        xs_moe_auto_cached(mc, m, &pf, NULL, &c, NULL, NULL, &r, &hit);
                        one[k] = (now_ns() - t0) / 1e3;
                    }
                    hit_us[n] = median_of(one, 201);
                    if (verbose)
                        printf("cache %-8s %-18s T=%5d %-8s hit %7.3f us\n",
                               kind ? "bucketed" : "exact", cfg->name, cfg->tokens[ti],
                               rt ? "zipf" : "balanced", hit_us[n]);
                    n++;
                    xs_moe_problem_destroy(m);
                }
        xs_moe_cache_stats st;
        xs_moe_cache_stats_get(mc, &st);
        double lo = INFINITY, hi = 0;
        for (int i = 0; i < n; i++) {
            lo = hit_us[i] < lo ? hit_us[i] : lo;
            hi = hit_us[i] > hi ? hit_us[i] : hi;
        }
        printf("cache %-8s %3d cases: hit median %7.3f us  min %7.3f  max %7.3f  (lookups %lld, "
               "hits %lld, misses %lld, hit rate %.4f)\n", kind ? "bucketed" : "exact", n,
               median_of(hit_us, n), lo, hi, st.lookups, st.hits, st.misses,
               st.lookups ? (double)st.hits / st.lookups : 0.0);
        xs_moe_cache_destroy(mc);
    }
}

static void tp_costs(const xs_tp_info *in, xs_tp_costs *c)
{
    memset(c, 0, sizeof *c);
    for (int g = 0; g < in->ngemm; g++)
        c->tile_ns[g] = 2.0 * XS_TP_BM * XS_TP_BN * in->gk[g] / 2.65e12 * 1e9 + 1000;
    c->push_ns = 1600;
    c->reduce_ns = 3000;
}

static void time_tp(int reps)
{
    xs_profile pf;
    xs_profile_default(&pf);
    double ms[512];
    int n = 0;
    for (int op = 0; op < 3; op++)
        for (int mi = 0; mi < XS_TP_NMODELS; mi++) {
            const xs_tp_model *md = xs_tp_model_at(mi);
            int nn = 0, kk = 0;
            xs_tp_model_nk((xs_tp_op)op, md, &nn, &kk);
            for (int a = 0; a < 2; a++) {
                int ps[8];
                const int nps = xs_tp_default_peers((xs_tp_op)op, md, md->tokens[a],
                                                    pf.drain_bytes_per_ns, 355.0, 2, ps);
                for (int pi = 0; pi < nps && n < 512; pi++) {
                    const xs_tp_shape s = {(xs_tp_op)op, md->tokens[a], nn, kk, ps[pi]};
                    xs_tp_info in;
                    if (xs_tp_info_of(&s, &in) != XS_OK)
                        continue;
                    xs_tp_costs c;
                    tp_costs(&in, &c);
                    xs_tp_plan *pl = NULL;
                    if (xs_tp_plan_create(&s, 0, 132, &pl) != XS_OK)
                        continue;
                    xs_tp_pace cand[XS_TP_NCAND];
                    const int nc = xs_tp_candidates(0.9 * xs_capacity(&pf, 132), cand,
                                                    XS_TP_NCAND);
                    int usable[XS_TP_NCAND], best = -1;
                    xs_tp_engine_candidates(1, cand, nc, usable);
                    double pred[XS_TP_NCAND], v[16];
                    for (int k = 0; k < reps; k++) { /* the decision: the best alone */
                        const double t0 = now_ns();
                        xs_tp_predict_candidates(pl, 2, cand, usable, nc, &c, &pf, NULL, &best);
                        v[k] = (now_ns() - t0) / 1e6;
                    }
                    ms[n] = median_of(v, reps);
                    if (verbose) {
                        /* and the full ranking (every prediction), untimed: the same pick */
                        int full = -1;
                        xs_tp_predict_candidates(pl, 2, cand, usable, nc, &c, &pf, pred, &full);
                        printf("tp %-8s %-12s m=%5d P=%2d %9.3f ms -> candidate %d%s\n",
                               xs_tp_op_name((xs_tp_op)op), md->name, s.m, s.peers, ms[n],
                               best, full == best ? "" : "  MISMATCH with the full ranking");
                    }
                    n++;
                    xs_tp_plan_destroy(pl);
                }
            }
        }
    summary("tp rank", ms, n);
}

/* The UP planner on bench up's default grid: the decision alone (full 0) or the full table. */
static void time_up(int reps, int full)
{
    xs_profile pf;
    xs_profile_default(&pf);
    static const int seqs[] = {8192, 16384, 32768, 49152, 65536};
    static const int heads[] = {8, 16};
    static const int peers[] = {2, 4, 8};
    double ms[128];
    int n = 0;
    for (int is = 0; is < 5; is++)
        for (int ih = 0; ih < 2; ih++)
            for (int causal = 0; causal <= 1; causal++)
                for (int ip = 0; ip < 3; ip++) {
                    xs_up_cfg c;
                    memset(&c, 0, sizeof c);
                    c.seq = seqs[is], c.heads = heads[ih], c.causal = causal;
                    c.peers = peers[ip], c.sms = 132;
                    c.tiles = xs_attn_tiles(c.seq, c.heads);
                    c.grid = c.tiles < c.sms ? c.tiles : c.sms;
                    c.rows_per_rank = c.seq / c.peers;
                    c.remote = xs_attn_remote_tiles(c.seq, c.heads, c.rows_per_rank);
                    c.pace_bytes_per_ns = 0.9 * pf.drain_bytes_per_ns;
                    double *dur = malloc((size_t)c.tiles * sizeof(double));
                    uint64_t *tns = malloc((size_t)c.tiles * sizeof(uint64_t));
                    for (int t = 0; t < c.tiles; t++) {
                        const uint32_t h = ((uint32_t)t * 2654435761u) >> 28;
                        dur[t] = 1000.0 + 37.5 * xs_attn_tile_iters(c.seq, c.heads, c.causal, t) *
                                              (1.0 + h / 64.0);
                    }
                    for (int b = 0; b < c.grid; b++) {
                        uint64_t clk = 1000000;
                        const int m = xs_attn_cta_count(c.tiles, c.grid, b);
                        for (int k = 0; k < m; k++) {
                            const int t = xs_attn_cta_tile(0, c.tiles, 0, c.grid, b, k);
                            clk += (uint64_t)dur[t];
                            tns[t] = clk;
                        }
                    }
                    const xs_up_plan_opts o = {-1, -1, -1, -1, 0, 0.0, 0.0};
                    xs_up_plan *pl = malloc(sizeof *pl);
                    xs_up_decision *dc = malloc(sizeof *dc);
                    double v[16];
                    for (int k = 0; k < reps; k++) {
                        const double t0 = now_ns();
                        if (full)
                            xs_up_plan_run(&o, &pf, &c, dur, tns, pl);
                        else
                            xs_up_plan_decide(&o, &pf, &c, dur, dc);
                        v[k] = (now_ns() - t0) / 1e6;
                    }
                    ms[n] = median_of(v, reps);
                    if (verbose) {
                        char nm[32], fn[32];
                        if (!full) /* the full table's choice, to compare */
                            xs_up_plan_run(&o, &pf, &c, dur, tns, pl);
                        xs_up_plan_name(pl->order, pl->split, pl->couriers, pl->kv, fn,
                                        sizeof fn);
                        if (full)
                            printf("up seq=%5d heads=%2d causal=%d peers=%d %9.3f ms -> %s "
                                   "(full table, %d members)\n", c.seq, c.heads, causal,
                                   c.peers, ms[n], fn, pl->fam.n);
                        else {
                            xs_up_plan_name(dc->order, dc->split, dc->couriers, dc->kv, nm,
                                            sizeof nm);
                            const int same = !strcmp(nm, fn) && !memcmp(&dc->d_fu_ns,
                                                                         &pl->d_fu_ns,
                                                                         sizeof(double));
                            printf("up seq=%5d heads=%2d causal=%d peers=%d %9.3f ms -> %s "
                                   "(%d of %d members simulated)%s\n", c.seq, c.heads, causal,
                                   c.peers, ms[n], nm, dc->simulated, dc->n,
                                   same ? "" : "  MISMATCH with the full table");
                        }
                    }
                    n++;
                    free(pl);
                    free(dc);
                    free(dur);
                    free(tns);
                }
    summary(full ? "up table" : "up decide", ms, n);
}

int main(int argc, char **argv)
{
    int reps = 3, want[5] = {0, 0, 0, 0, 0}, any = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "ep"))
            want[0] = any = 1;
        else if (!strcmp(argv[i], "tp"))
            want[1] = any = 1;
        else if (!strcmp(argv[i], "up"))
            want[2] = any = 1;
        else if (!strcmp(argv[i], "cache"))
            want[3] = any = 1;
        else if (!strcmp(argv[i], "upfull"))
            want[4] = any = 1;
        else {
            fprintf(stderr, "usage: plan_timing [-v] [-r REPS] [ep|tp|up|upfull|cache ...]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 16)
        reps = 3;
    if (want[0] || !any)
        time_ep(reps);
    if (want[1] || !any)
        time_tp(reps);
    if (want[2] || !any)
        time_up(reps, 0);
    if (want[4])
        time_up(reps, 1);
    if (want[3] || !any)
        time_cache();
    return 0;
}
