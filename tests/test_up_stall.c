// SPDX-License-Identifier: Apache-2.0
/*
 * test_up_stall.c - per-tile stall scored where it matters (src/up_stall.c) and the workloads'
 * stamps as trace v1 records (src/up_stall.c, src/ep_trace.c): the score on hand-made data
 * with known medians; the UP stall on synthetic fa / piggyback stamps with delays put in at
 * random, which the measured sides must give back exactly; the records accepted by the trace
 * loader's checks; bad stamps refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xt.h"
#include "xstage.h"
#include "xstage_ep.h"
#include "xstage_trace.h"
#include "xstage_up.h"
#include "xt_ep.h"
#include "xt_profile.h"
#include "xt_rand.h"

static void test_score(void)
{
    const double meas[] = {100, 600, 1000, 2000, NAN, 3000, 700};
    const double pred[] = {0, 500, 900, 2600, 5, NAN, 100};
    xs_stall_score s;
    XT_CHECK(xs_stall_score_of(meas, pred, 7, 500, &s) == XS_OK, "%s", xs_errmsg());
    /* finite pairs: errors 100 100 100 600 600; stalled (> 500): 600 1000 2000 700 */
    XT_CHECK(s.tiles == 5, "tiles %d", s.tiles);
    XT_NEAR(s.err_med_ns, 100, 1e-12);
    XT_CHECK(s.stalled == 4, "stalled %d", s.stalled);
    XT_NEAR(s.stalled_err_med_ns, 350, 1e-12); /* errors 100 100 600 600 */
    XT_NEAR(s.stalled_zero_med_ns, 850, 1e-12); /* 600 700 1000 2000 */
    XT_CHECK(s.met == 1, "350 <= 425 is met");
    /* the same stalls predicted as 0 score exactly the zero predictor: not met */
    const double zero[] = {0, 0, 0, 0, 0, 0, 0};
    XT_CHECK(xs_stall_score_of(meas, zero, 7, 500, &s) == XS_OK, "%s", xs_errmsg());
    XT_NEAR(s.stalled_err_med_ns, s.stalled_zero_med_ns, 1e-12);
    XT_CHECK(s.met == 0, "zero against zero is not met");
    /* nothing stalled: NAN medians, not met */
    const double small[] = {10, 20, 499};
    XT_CHECK(xs_stall_score_of(small, small, 3, 500, &s) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(s.stalled == 0 && isnan(s.stalled_err_med_ns) && !s.met, "none stalled");
    XT_CHECK(s.tiles == 3 && s.err_med_ns == 0, "exact predictions: error 0");
    XT_CHECK(xs_stall_score_of(meas, pred, -1, 500, &s) == XS_EINVAL, "n < 0 refused");
    XT_CHECK(xs_stall_score_of(NULL, pred, 3, 500, &s) == XS_EINVAL, "NULL refused");
}

/* Synthetic stamps of a plain snake run: every tile's main loop takes loop[t] ns, its epilogue
 * epi[t] ns, CTAs start at t0 + 37 b. cta[grid * 3], work[T], end[T]. */
static void stamps(const xs_up_cfg *c, const double *loop, const double *epi, uint64_t t0,
                   uint64_t *cta, uint64_t *work, uint64_t *end)
{
    for (int b = 0; b < c->grid; b++) {
        uint64_t t = t0 + 37 * (uint64_t)b;
        cta[3 * b] = t, cta[3 * b + 1] = 0, cta[3 * b + 2] = 0;
        const int m = xs_attn_cta_count(c->tiles, c->grid, b);
        for (int k = 0; k < m; k++) {
            const int u = xs_attn_cta_tile(XS_ATTN_ORDER_SNAKE, c->tiles, 0, c->grid, b, k);
            t += (uint64_t)llround(loop[u]);
            work[u] = t;
            t += (uint64_t)llround(epi[u]);
            end[u] = t;
        }
        cta[3 * b + 1] = t;
    }
}

static xs_up_cfg cfg_of(int seq, int heads, int causal, int peers, int sms)
{
    xs_up_cfg c;
    memset(&c, 0, sizeof c);
    c.seq = seq, c.heads = heads, c.causal = causal, c.peers = peers;
    c.tiles = xs_attn_tiles(seq, heads);
    c.grid = c.tiles < sms ? c.tiles : sms;
    c.rows_per_rank = seq / peers;
    c.remote = xs_attn_remote_tiles(seq, heads, c.rows_per_rank);
    c.sms = sms;
    return c;
}

static void test_up_stall(const xs_profile *p, int seq, int heads, int causal, int peers,
                          int sms)
{
    const xs_up_cfg c = cfg_of(seq, heads, causal, peers, sms);
    const int T = c.tiles;
    double *loop = calloc(T, sizeof(double)), *epi = calloc(T, sizeof(double));
    double *dl = calloc(T, sizeof(double)), *de = calloc(T, sizeof(double));
    double *l2 = calloc(T, sizeof(double)), *e2 = calloc(T, sizeof(double));
    double *v0 = malloc(sizeof(double) * 4 * T), *v1 = malloc(sizeof(double) * 4 * T);
    uint64_t *fc = calloc((size_t)c.grid * 3, 8), *fw = calloc(T, 8), *fe = calloc(T, 8);
    uint64_t *pc = calloc((size_t)c.grid * 3, 8), *pw = calloc(T, 8), *pe = calloc(T, 8);
    if (!loop || !epi || !dl || !de || !l2 || !e2 || !v0 || !v1 || !fc || !fw || !fe || !pc ||
        !pw || !pe) {
        XT_CHECK(0, "out of memory");
        return;
    }
    for (int t = 0; t < T; t++) {
        loop[t] = 15000 + (double)(xt_rng() % 20000);
        epi[t] = 300 + (double)(xt_rng() % 200);
        dl[t] = xt_rng() % 3 == 0 ? 100 + (double)(xt_rng() % 3000) : 0;
        de[t] = xt_rng() % 3 == 0 ? 100 + (double)(xt_rng() % 3000) : 0;
        l2[t] = loop[t] + dl[t], e2[t] = epi[t] + de[t];
    }
    stamps(&c, loop, epi, 1000000000ull, fc, fw, fe);
    /* piggyback = fa, on another origin: nothing measured on the MMA side */
    stamps(&c, loop, epi, 5000000000ull, pc, pw, pe);
    const xs_up_stamps fa = {fc, fw, fe}, pb = {pc, pw, pe};
    xs_up_stall s;
    if (xs_up_tile_stall(p, &c, &fa, &pb, &s, v0) != XS_OK) {
        XT_CHECK(0, "seq %d heads %d: %s", seq, heads, xs_errmsg());
        return;
    }
    int zero_mma = 1, nonneg = 1, first0 = 1, issue_only_remote = 1;
    double rb_tot = 0;
    for (int t = 0; t < T; t++) {
        zero_mma &= v0[4 * t + 2] == 0;
        nonneg &= !(v0[4 * t + 1] < 0) && !(v0[4 * t + 3] < 0);
        const double rb = xs_up_tile_remote_bytes(&c, t);
        issue_only_remote &= (rb > 0) == !isnan(v0[4 * t]);
        rb_tot += rb;
    }
    for (int b = 0; b < c.grid; b++)
        first0 &= v0[4 * xs_attn_cta_tile(XS_ATTN_ORDER_SNAKE, T, 0, c.grid, b, 0) + 3] == 0;
    XT_CHECK(zero_mma, "seq %d: the same run twice: no MMA-side stall", seq);
    XT_CHECK(s.mma.stalled == 0 && s.mma.tiles == T, "seq %d: %d stalled of %d", seq,
             s.mma.stalled, s.mma.tiles);
    XT_CHECK(nonneg, "seq %d: predictions >= 0", seq);
    XT_CHECK(first0, "seq %d: a CTA's first main loop follows no stores", seq);
    XT_CHECK(issue_only_remote, "seq %d: the issue side scores the tiles with remote bytes", seq);
    /* delays put in: the measured sides give them back exactly */
    stamps(&c, l2, e2, 5000000000ull, pc, pw, pe);
    if (xs_up_tile_stall(p, &c, &fa, &pb, &s, v1) != XS_OK) {
        XT_CHECK(0, "seq %d heads %d: %s", seq, heads, xs_errmsg());
        return;
    }
    int exact_mma = 1, exact_issue = 1, same_pred = 1;
    double mi[4096], pi[4096];
    int n = 0;
    for (int t = 0; t < T; t++) {
        exact_mma &= fabs(v1[4 * t + 2] - dl[t]) < 1e-6;
        if (!isnan(v0[4 * t]))
            exact_issue &= fabs((v1[4 * t] - v0[4 * t]) - de[t]) < 1e-6;
        /* the prediction reads fa alone */
        same_pred &= (isnan(v0[4 * t + 1]) && isnan(v1[4 * t + 1])) ||
                     v0[4 * t + 1] == v1[4 * t + 1];
        same_pred &= v0[4 * t + 3] == v1[4 * t + 3];
        if (n < 4096)
            mi[n] = v1[4 * t + 2], pi[n++] = v1[4 * t + 3];
    }
    XT_CHECK(exact_mma, "seq %d: MMA side = the main-loop delays", seq);
    XT_CHECK(exact_issue, "seq %d: issue side moves by the epilogue delays", seq);
    XT_CHECK(same_pred, "seq %d: the prediction depends on fa only", seq);
    xs_stall_score r;
    XT_CHECK(xs_stall_score_of(mi, pi, n, XS_UP_STALLED_NS, &r) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(r.stalled == s.mma.stalled && r.stalled > 0, "seq %d: %d stalled tiles (%d)", seq,
             s.mma.stalled, r.stalled);
    XT_NEAR(s.mma.stalled_err_med_ns, r.stalled_err_med_ns, 1e-12);
    XT_NEAR(s.mma.stalled_zero_med_ns, r.stalled_zero_med_ns, 1e-12);

    /* the trace records pass the loader's checks and carry the remote bytes */
    xs_trace_record *rec = NULL;
    size_t nr = 0;
    xs_trace tr;
    XT_CHECK(xs_up_trace_records(&c, &pb, 1, &rec, &nr) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(nr == (size_t)T, "%zu records of %d tiles", nr, T);
    if (rec && xs_trace_build(rec, nr, "up", &tr) == XS_OK) {
        XT_CHECK(tr.ncta == c.grid && tr.nwork == nr, "ncta %d nwork %zu", tr.ncta, tr.nwork);
        XT_NEAR((double)xs_trace_bytes(&tr), rb_tot, 1e-9);
        xs_trace_free(&tr);
    } else {
        XT_CHECK(0, "trace build: %s", xs_errmsg());
    }
    /* and through a file, as bench up --trace writes it and compare reads it */
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_up_stall_%d.csv", (int)getpid());
    char np[32];
    snprintf(np, sizeof np, "producers=%d", c.grid);
    const char *meta[] = {"target=host", "kernel=test", np, NULL};
    if (rec && xs_trace_write(path, rec, nr, 0, meta) == XS_OK && xs_trace_load(path, &tr) == XS_OK) {
        XT_CHECK(tr.n == nr && tr.producers == c.grid, "%zu records, producers %d", tr.n,
                 tr.producers);
        xs_trace_free(&tr);
    } else {
        XT_CHECK(0, "trace file: %s", xs_errmsg());
    }
    remove(path);
    free(rec);

    /* bad stamps refused with one message */
    const int t0 = xs_attn_cta_tile(XS_ATTN_ORDER_SNAKE, T, 0, c.grid, 0, 0);
    const uint64_t keep = pw[t0];
    pw[t0] = 0;
    XT_CHECK(xs_up_tile_stall(p, &c, &fa, &pb, &s, NULL) == XS_EINVAL, "missing stamp");
    XT_CHECK(xs_up_trace_records(&c, &pb, 1, &rec, &nr) == XS_EINVAL && !rec, "missing stamp");
    pw[t0] = pe[t0] + 1;
    XT_CHECK(xs_up_tile_stall(p, &c, &fa, &pb, &s, NULL) == XS_EINVAL, "work after end");
    pw[t0] = keep;
    XT_CHECK(xs_up_tile_stall(p, &c, &fa, &pb, &s, NULL) == XS_OK, "restored: %s", xs_errmsg());
    free(loop), free(epi), free(dl), free(de), free(l2), free(e2), free(v0), free(v1);
    free(fc), free(fw), free(fe), free(pc), free(pw), free(pe);
}

/* A stage that never fills predicts no stall on either side. */
static void test_up_unlimited(void)
{
    xs_profile p = xt_provisional_profile();
    p.drain_bytes_per_ns = 1e6, p.capacity_bytes = 1e12, p.capacity_bytes_per_producer = 0;
    const xs_up_cfg c = cfg_of(4096, 4, 0, 4, 16);
    const int T = c.tiles;
    double *loop = calloc(T, sizeof(double)), *epi = calloc(T, sizeof(double));
    double *v = malloc(sizeof(double) * 4 * T);
    uint64_t *fc = calloc((size_t)c.grid * 3, 8), *fw = calloc(T, 8), *fe = calloc(T, 8);
    if (!loop || !epi || !v || !fc || !fw || !fe) {
        XT_CHECK(0, "out of memory");
        return;
    }
    for (int t = 0; t < T; t++)
        loop[t] = 20000, epi[t] = 400;
    stamps(&c, loop, epi, 77, fc, fw, fe);
    const xs_up_stamps fa = {fc, fw, fe};
    xs_up_stall s;
    XT_CHECK(xs_up_tile_stall(&p, &c, &fa, &fa, &s, v) == XS_OK, "%s", xs_errmsg());
    double most = 0;
    for (int t = 0; t < T; t++) {
        most = fmax(most, isnan(v[4 * t + 1]) ? 0 : v[4 * t + 1]);
        most = fmax(most, v[4 * t + 3]);
    }
    XT_CHECK(most < 1, "unlimited stage: largest predicted stall %.3g ns", most);
    free(loop), free(epi), free(v), free(fc), free(fw), free(fe);
}

static void test_ep_records(void)
{
    xs_moe_tile t[5];
    memset(t, 0, sizeof t);
    /* CTA 0: a Linear-1 tile, then a Linear-2 tile whose (deferred) flush began before the
     * previous tile's stores ended; CTA 1: one tile; one tile with no CTA */
    t[0] = (xs_moe_tile){.mma0_ns = 0, .mma1_ns = 900, .st0_ns = 950, .st1_ns = 1200, .kind = 1,
                         .cta = 0, .smid = 5, .remote_bytes = 0, .total_bytes = 4096};
    t[1] = (xs_moe_tile){.mma0_ns = 1000, .mma1_ns = 2000, .st0_ns = 1100, .st1_ns = 2500,
                         .kind = 2, .cta = 0, .smid = 5, .remote_bytes = 8192,
                         .total_bytes = 16384, .deferred = 1};
    t[2] = (xs_moe_tile){.mma0_ns = 10, .mma1_ns = 800, .st0_ns = 820, .st1_ns = 900, .kind = 2,
                         .cta = 1, .smid = 9, .remote_bytes = 4096, .total_bytes = 4096};
    t[3] = (xs_moe_tile){.mma0_ns = 10, .mma1_ns = 20, .kind = 2, .cta = -1};
    t[4] = (xs_moe_tile){.mma0_ns = 2100, .mma1_ns = 2300, .st0_ns = NAN, .st1_ns = NAN,
                         .kind = 1, .cta = 0, .smid = 5};
    xs_trace_record *r = NULL;
    size_t n = 0;
    XT_CHECK(xs_moe_trace_records(t, 5, &r, &n) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(n == 4, "%zu records (the tile without a CTA left out)", n);
    xs_trace tr;
    if (r && xs_trace_build(r, n, "ep", &tr) == XS_OK) {
        XT_CHECK(xs_trace_bytes(&tr) == 8192 + 4096, "remote bytes only: %lld",
                 (long long)xs_trace_bytes(&tr));
        xs_trace_free(&tr);
    } else {
        XT_CHECK(0, "trace build: %s", xs_errmsg());
    }
    if (r && n == 4) {
        XT_CHECK(r[1].seq == 1 && r[1].issue_start_ns == 1200 && r[1].issue_end_ns == 2500,
                 "the flush held after the previous issue end: %lld..%lld",
                 (long long)r[1].issue_start_ns, (long long)r[1].issue_end_ns);
        XT_CHECK(r[2].seq == 2 && r[2].issue_start_ns == 2500 && r[2].issue_end_ns == 2500,
                 "no stores: an empty window at the main loop's end, held after the flush");
        XT_CHECK(r[3].cta == 1 && r[3].sm == 9 && r[3].seq == 0, "CTA 1's tile");
    }
    free(r);
    t[2].st1_ns = 700; /* reversed */
    XT_CHECK(xs_moe_trace_records(t, 5, &r, &n) == XS_EINVAL && !r, "reversed span refused");
}

/* A model trace of a real EP problem (both kinds of tile, 132 CTAs, wave and interleaved
 * plans) gives records the trace loader accepts, one per tile, with the remote bytes. */
static void test_ep_model_records(const char *name, int tokens, int peers, xs_moe_routing rt,
                                  xs_moe_sched kind, const xs_profile *p)
{
    xt_moe_fixture f;
    if (!xt_moe_fixture_open(&f, name, tokens, peers, rt))
        return;
    const xs_moe_plan pl = {.kind = kind};
    double tot = NAN;
    if (xs_moe_problem_set_plan(f.m, 0, &pl) != XS_OK ||
        xs_moe_predict_trace(f.m, 0, p, NULL, &f.c, 1, f.t, &tot) != XS_OK) {
        XT_CHECK(0, "%s: set-up: %s", name, xs_errmsg());
        xt_moe_fixture_close(&f);
        return;
    }
    double rem = 0;
    int with_cta = 0;
    for (int i = 0; i < f.n; i++) {
        with_cta += f.t[i].cta >= 0;
        rem += f.t[i].cta >= 0 && f.t[i].kind == 2 ? f.t[i].remote_bytes : 0;
    }
    xs_trace_record *r = NULL;
    size_t n = 0;
    xs_trace tr;
    XT_CHECK(xs_moe_trace_records(f.t, f.n, &r, &n) == XS_OK, "%s: %s", name, xs_errmsg());
    XT_CHECK(n == (size_t)with_cta, "%s: %zu records of %d tiles", name, n, with_cta);
    if (r && xs_trace_build(r, n, name, &tr) == XS_OK) {
        XT_NEAR((double)xs_trace_bytes(&tr), rem, 1e-12);
        XT_CHECK(tr.nwork == n, "%s: every record has its main loop", name);
        xs_trace_free(&tr);
    } else {
        XT_CHECK(0, "%s: trace build: %s", name, xs_errmsg());
    }
    free(r);
    xt_moe_fixture_close(&f);
}

int main(int argc, char **argv)
{
    xt_seed("test_up_stall", argc > 1 ? argv[1] : NULL);
    test_score();
    const xs_profile p = xt_provisional_profile();
    test_up_stall(&p, 4096, 4, 0, 4, 16);
    test_up_stall(&p, 8192, 8, 1, 8, 132);
    test_up_stall(&p, 3000, 2, 1, 2, 132);
    test_up_unlimited();
    test_ep_records();
    test_ep_model_records("olmoe-1b-7b", 2048, 4, XS_ROUTE_ZIPF, XS_MOE_WAVE, &p);
    test_ep_model_records("deepseek-v2-lite", 1024, 8, XS_ROUTE_BALANCED, XS_MOE_INTERLEAVED,
                          &p);
    return xt_done();
}
