// SPDX-License-Identifier: Apache-2.0
/*
 * test_ep_cache.c - the EP decision cache (src/ep_cache.c): with the exact key a miss and a hit
 * both return xs_moe_auto's result field by field, over configurations, token counts, peers,
 * routings, both profiles and a non-default model; any decisive input changed is a miss; the
 * bucketed key shares an entry within a token bucket (returning the first input's result) and
 * not across buckets; eviction, counts, clearing, bypass with measured traces, bad options.
 *
 * usage: test_ep_cache   last line: "N passed, N failed"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt.h"
#include "xstage.h"
#include "xstage_ep.h"
#include "xt_ep.h"

/* Every field of a result, doubles with %.17g (memcmp would compare the plans' padding). */
static void fmt_plan(char *b, size_t n, const xs_moe_plan *p)
{
    snprintf(b, n, "%d/%d/%d/%.17g/%.17g/%d/%.17g/%.17g/%d/%d", (int)p->kind, p->lead,
             p->wave_experts, p->pace_bytes, p->pace_bytes_per_ns, p->couriers,
             p->courier_bytes_per_ns, p->admit_ahead_ns, p->spill_depth, p->lead_end);
}

static void fmt_result(char *b, size_t n, const xs_moe_auto_result *r)
{
    char p0[256], p1[256], p2[256];
    fmt_plan(p0, sizeof p0, &r->plan);
    fmt_plan(p1, sizeof p1, &r->courier);
    fmt_plan(p2, sizeof p2, &r->adaptive);
    snprintf(b, n, "%s %d %d %.17g %.17g %.17g %.17g %.17g %d %s %.17g %.17g %.17g %s %.17g "
             "%.17g %.17g | %s", p0, r->criterion_ok, r->reshape_ok, r->wave_ns, r->inter_ns,
             r->paced_ns, r->auto_ns, r->fill_ns, r->drain_bound, p1, r->courier_ns,
             r->courier_compute_ns, r->courier_link_ns, p2, r->adaptive_ns, r->spill_ns,
             r->paced_plain_ns, r->how);
}

/* 1 if two results are equal field by field */
static int same_result(const xs_moe_auto_result *x, const xs_moe_auto_result *y)
{
    static char a[2048], b[2048];
    fmt_result(a, sizeof a, x);
    fmt_result(b, sizeof b, y);
    return !strcmp(a, b);
}

/* A problem and its costs (the wave order's local control as kernel time); NULL on failure. */
static xs_moe_problem *one_problem(const char *name, int T, int N, xs_moe_routing rt,
                                   unsigned seed, const xs_profile *pf, xs_moe_costs *c)
{
    const xs_moe_config *cfg = xs_moe_config_find(name);
    xs_moe_opts o = {T, N, rt, 0, seed};
    xs_moe_problem *m = NULL;
    XT_CHECK(cfg && xs_moe_problem_create(cfg, &o, 132, &m) == XS_OK, "create %s T=%d: %s",
             name, T, xs_errmsg());
    if (!m)
        return NULL;
    xt_moe_synth_costs(cfg, c);
    const xs_moe_plan wp = {.kind = XS_MOE_WAVE};
    double kern = 0;
    XT_CHECK(xs_moe_problem_set_plan(m, 0, &wp) == XS_OK &&
                 xs_moe_predict(m, 0, pf, NULL, c, 0, &kern) == XS_OK,
             "wave local %s: %s", name, xs_errmsg());
    c->kernel_ns = kern;
    return m;
}

/* Exact key: miss then hit, both equal to xs_moe_auto's result field by field (and the hit to
 * the miss byte for byte: a copy of it). */
static void check_exact(const xs_profile *pfs, int npf)
{
    xs_moe_cache *mc = NULL;
    XT_CHECK(xs_moe_cache_create(NULL, &mc) == XS_OK, "create: %s", xs_errmsg());
    if (!mc)
        return;
    const char *names[3] = {"mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v2-lite"};
    const int peers[3] = {1, 2, 8};
    int calls = 0;
    for (int pi = 0; pi < npf; pi++)
        for (int ci = 0; ci < 3; ci++)
            for (int ni = 0; ni < 3; ni++)
                for (int rt = 0; rt < 2; rt++) {
                    const xs_moe_config *cfg = xs_moe_config_find(names[ci]);
                    xs_moe_costs c;
                    xs_moe_problem *m = one_problem(names[ci], cfg->tokens[0] / 4, peers[ni],
                                                    (xs_moe_routing)rt, 5, &pfs[pi], &c);
                    if (!m)
                        continue;
                    xs_moe_model mm;
                    xs_moe_model_default(&mm);
                    mm.auto_adaptive = mm.auto_couriers = rt; /* a variant on zipf */
                    xs_moe_costs ic = c;
                    ic.c1_ns *= 1.02;
                    ic.kernel_ns *= 1.01;
                    for (int v = 0; v < 2; v++) {
                        const xs_moe_model *mp = v ? &mm : NULL;
                        const xs_moe_costs *icp = v ? &ic : NULL;
                        xs_moe_auto_result ref, a, b;
                        memset(&a, 0x5a, sizeof a);
                        memset(&b, 0xa5, sizeof b);
                        int h1 = -1, h2 = -1;
                        const xs_status s0 = xs_moe_auto(m, &pfs[pi], mp, &c, icp, NULL, &ref);
                        const xs_status s1 =
                            xs_moe_auto_cached(mc, m, &pfs[pi], mp, &c, icp, NULL, &a, &h1);
                        const xs_status s2 =
                            xs_moe_auto_cached(mc, m, &pfs[pi], mp, &c, icp, NULL, &b, &h2);
                        XT_CHECK(s0 == XS_OK && s1 == XS_OK && s2 == XS_OK, "%s N=%d: %s",
                                 names[ci], peers[ni], xs_errmsg());
                        XT_CHECK(h1 == 0 && h2 == 1, "%s N=%d v%d: miss then hit (%d, %d)",
                                 names[ci], peers[ni], v, h1, h2);
                        XT_CHECK(same_result(&ref, &a) && !memcmp(&a, &b, sizeof a),
                                 "%s N=%d rt=%d v%d: cached result differs from xs_moe_auto's",
                                 names[ci], peers[ni], rt, v);
                        calls += 2;
                    }
                    xs_moe_problem_destroy(m);
                }
    xs_moe_cache_stats st;
    xs_moe_cache_stats_get(mc, &st);
    XT_CHECK(st.lookups == calls && st.hits == calls / 2 && st.misses == calls / 2 &&
                 st.bypassed == 0 && st.entries == calls / 2 && st.evictions == 0,
             "counts: lookups %lld hits %lld misses %lld entries %d (calls %d)", st.lookups,
             st.hits, st.misses, st.entries, calls);
    xs_moe_cache_destroy(mc);
}

/* Any decisive input changed is a miss under the exact key; the default model passed
 * explicitly is the same key as NULL. */
static void check_exact_keys(const xs_profile *pf)
{
    xs_moe_cache *mc = NULL;
    XT_CHECK(xs_moe_cache_create(NULL, &mc) == XS_OK, "create: %s", xs_errmsg());
    xs_moe_costs c, c2;
    xs_moe_problem *m = one_problem("qwen3-30b-a3b", 1000, 2, XS_ROUTE_ZIPF, 5, pf, &c);
    xs_moe_problem *m2 = one_problem("qwen3-30b-a3b", 1024, 2, XS_ROUTE_ZIPF, 5, pf, &c2);
    xs_moe_problem *m3 = one_problem("qwen3-30b-a3b", 1000, 2, XS_ROUTE_ZIPF, 6, pf, &c2);
    if (!mc || !m || !m2 || !m3)
        return;
    xs_moe_auto_result r;
    int hit = -1;
    XT_CHECK(xs_moe_auto_cached(mc, m, pf, NULL, &c, NULL, NULL, &r, &hit) == XS_OK && !hit,
             "first: a miss");
    xs_moe_model mm;
    xs_moe_model_default(&mm);
    XT_CHECK(xs_moe_auto_cached(mc, m, pf, &mm, &c, NULL, NULL, &r, &hit) == XS_OK && hit,
             "the default model given explicitly: the same key");
    mm.block_speed = 0.06;
    XT_CHECK(xs_moe_auto_cached(mc, m, pf, &mm, &c, NULL, NULL, &r, &hit) == XS_OK && !hit,
             "a model term changed: a miss");
    xs_profile p2 = *pf;
    p2.drain_bytes_per_ns *= 1.0000001;
    XT_CHECK(xs_moe_auto_cached(mc, m, &p2, NULL, &c, NULL, NULL, &r, &hit) == XS_OK && !hit,
             "the profile's R changed: a miss");
    snprintf(p2.notes, sizeof p2.notes, "other notes");
    XT_CHECK(xs_moe_auto_cached(mc, m, &p2, NULL, &c, NULL, NULL, &r, &hit) == XS_OK && hit,
             "only the profile's notes changed: a hit");
    xs_moe_costs cc = c;
    cc.kernel_ns += 1;
    XT_CHECK(xs_moe_auto_cached(mc, m, pf, NULL, &cc, NULL, NULL, &r, &hit) == XS_OK && !hit,
             "the local control's kernel time changed: a miss");
    XT_CHECK(xs_moe_auto_cached(mc, m2, pf, NULL, &c, NULL, NULL, &r, &hit) == XS_OK && !hit,
             "another token count (1024): a miss under the exact key");
    XT_CHECK(xs_moe_auto_cached(mc, m3, pf, NULL, &c, NULL, NULL, &r, &hit) == XS_OK && !hit,
             "another seed's routing: a miss under the exact key");
    /* measured traces: not cached */
    xs_moe_tile t[1];
    memset(t, 0, sizeof t);
    t[0].cta = -1;
    const xs_moe_local_traces lt = {t, 1, NULL, 0};
    XT_CHECK(xs_moe_auto_cached(mc, m, pf, NULL, &c, NULL, &lt, &r, &hit) == XS_OK && !hit,
             "with measured traces: evaluated");
    xs_moe_cache_stats st;
    xs_moe_cache_stats_get(mc, &st);
    XT_CHECK(st.lookups == 8 && st.hits == 2 && st.misses == 6 && st.bypassed == 1,
             "counts: lookups %lld hits %lld misses %lld bypassed %lld", st.lookups, st.hits,
             st.misses, st.bypassed);
    xs_moe_cache_clear(mc);
    xs_moe_cache_stats_get(mc, &st);
    XT_CHECK(st.lookups == 0 && st.entries == 0 && st.capacity == 256, "cleared");
    XT_CHECK(xs_moe_auto_cached(mc, m, pf, NULL, &c, NULL, NULL, &r, &hit) == XS_OK && !hit,
             "after clearing: a miss");
    xs_moe_problem_destroy(m);
    xs_moe_problem_destroy(m2);
    xs_moe_problem_destroy(m3);
    xs_moe_cache_destroy(mc);
}

/* The bucketed key: T = 1000 and 1024 share a bucket (4 per octave: (2^9.75, 2^10]) and get the
 * first one's result; 1100 is in the next bucket. */
static void check_bucketed(const xs_profile *pf)
{
    const xs_moe_cache_opts o = {XS_MOE_CACHE_BUCKETED, 8, 0, 0, 0};
    xs_moe_cache *mc = NULL;
    XT_CHECK(xs_moe_cache_create(&o, &mc) == XS_OK, "create: %s", xs_errmsg());
    xs_moe_costs c1, c2, c3;
    xs_moe_problem *m1 = one_problem("qwen3-30b-a3b", 1000, 2, XS_ROUTE_BALANCED, 5, pf, &c1);
    xs_moe_problem *m2 = one_problem("qwen3-30b-a3b", 1024, 2, XS_ROUTE_BALANCED, 9, pf, &c2);
    xs_moe_problem *m3 = one_problem("qwen3-30b-a3b", 1100, 2, XS_ROUTE_BALANCED, 5, pf, &c3);
    if (!mc || !m1 || !m2 || !m3)
        return;
    xs_moe_auto_result r1, r2, r3, ref;
    int hit = -1;
    XT_CHECK(xs_moe_auto_cached(mc, m1, pf, NULL, &c1, NULL, NULL, &r1, &hit) == XS_OK && !hit,
             "1000: a miss");
    XT_CHECK(xs_moe_auto(m1, pf, NULL, &c1, NULL, NULL, &ref) == XS_OK &&
                 same_result(&ref, &r1),
             "a bucketed miss returns xs_moe_auto's result");
    /* the local control's kernel time (which grows with T) is not in the bucketed key */
    XT_CHECK(xs_moe_auto_cached(mc, m2, pf, NULL, &c2, NULL, NULL, &r2, &hit) == XS_OK && hit,
             "1024 (another seed): a hit in 1000's bucket");
    XT_CHECK(!memcmp(&r1, &r2, sizeof r1), "the hit returns the bucket's first result");
    XT_CHECK(xs_moe_auto_cached(mc, m3, pf, NULL, &c3, NULL, NULL, &r3, &hit) == XS_OK && !hit,
             "1100: the next bucket, a miss");
    xs_moe_cache_destroy(mc);

    /* eviction: 4 entries (one set), 5 keys; the least recently used goes */
    const xs_moe_cache_opts small = {XS_MOE_CACHE_EXACT, 3, 0, 0, 0};
    XT_CHECK(xs_moe_cache_create(&small, &mc) == XS_OK, "create small");
    xs_moe_cache_stats st;
    xs_moe_cache_stats_get(mc, &st);
    XT_CHECK(st.capacity == 4, "3 entries round up to 4 (got %d)", st.capacity);
    xs_moe_problem *mp[5] = {m1, m2, m3, NULL, NULL};
    xs_moe_costs cp[5] = {c1, c2, c3, c1, c1};
    mp[3] = one_problem("qwen3-30b-a3b", 512, 2, XS_ROUTE_BALANCED, 5, pf, &cp[3]);
    mp[4] = one_problem("qwen3-30b-a3b", 256, 2, XS_ROUTE_BALANCED, 5, pf, &cp[4]);
    for (int i = 0; i < 5 && mp[3] && mp[4]; i++) {
        XT_CHECK(xs_moe_auto_cached(mc, mp[i], pf, NULL, &cp[i], NULL, NULL, &r1, &hit) == XS_OK,
                 "fill %d", i);
        if (i == 3) /* touch the first: the second is then the least recent */
            XT_CHECK(xs_moe_auto_cached(mc, mp[0], pf, NULL, &cp[0], NULL, NULL, &r1, &hit) ==
                             XS_OK && hit, "touch");
    }
    xs_moe_cache_stats_get(mc, &st);
    XT_CHECK(st.entries == 4 && st.evictions == 1, "entries %d evictions %lld", st.entries,
             st.evictions);
    XT_CHECK(xs_moe_auto_cached(mc, mp[0], pf, NULL, &cp[0], NULL, NULL, &r1, &hit) == XS_OK &&
                 hit, "the recently used entry stayed");
    XT_CHECK(xs_moe_auto_cached(mc, mp[1], pf, NULL, &cp[1], NULL, NULL, &r1, &hit) == XS_OK &&
                 !hit, "the least recently used entry went");
    xs_moe_cache_destroy(mc);
    for (int i = 0; i < 5; i++)
        xs_moe_problem_destroy(mp[i]);
}

static void check_bad_opts(void)
{
    xs_moe_cache *mc = (xs_moe_cache *)&mc;
    const xs_moe_cache_opts neg = {XS_MOE_CACHE_EXACT, -1, 0, 0, 0};
    XT_CHECK(xs_moe_cache_create(&neg, &mc) == XS_EINVAL && mc == NULL, "negative entries");
    const xs_moe_cache_opts key = {(xs_moe_cache_key)7, 0, 0, 0, 0};
    XT_CHECK(xs_moe_cache_create(&key, &mc) == XS_EINVAL, "unknown key");
    const xs_moe_cache_opts step = {XS_MOE_CACHE_BUCKETED, 0, 0, -0.5, 0};
    XT_CHECK(xs_moe_cache_create(&step, &mc) == XS_EINVAL, "negative step");
    XT_CHECK(strchr(xs_errmsg(), '\n') == NULL, "one line: %s", xs_errmsg());
    xs_moe_cache_destroy(NULL);
}

int main(void)
{
    xs_profile pfs[2];
    xs_profile_default(&pfs[0]);
    int npf = 1;
    if (xs_profile_load("tests/data/h200_host_profile.json", &pfs[1]) == XS_OK)
        npf = 2;
    XT_CHECK(npf == 2, "tests/data/h200_host_profile.json (run from the repository root)");
    check_exact(pfs, npf);
    check_exact_keys(&pfs[0]);
    check_bucketed(&pfs[0]);
    check_bad_opts();
    return xt_done();
}
