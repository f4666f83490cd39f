// SPDX-License-Identifier: Apache-2.0
/*
 * test_grid.c - the declared grids (include/xstage_grid.h): their row counts (TP 81, UP 60,
 * EP 192), every point of the cross products listed exactly once and in the declared
 * order, every model name known to its workload's table, every TP shape accepted by
 * xs_tp_info_of, the --grid and --rows parsers, and the footprint and time estimates (TP, UP,
 * EP).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "xstage_ep.h"
#include "xstage_grid.h"
#include "xstage_tp.h"
#include "xt.h"

/* The lists, written out here again so that a change to the tables is caught. */
static const char *const tp_ops[] = {"gemm_rs", "ag_gemm", "mlp"};
static const char *const tp_models[] = {"llama3-8b", "llama3-70b", "llama3-405b"};
static const int tp_m[] = {1024, 4096, 16384};
static const int peers[] = {2, 4, 8};
static const int up_seq[] = {4096, 8192, 16384, 32768, 65536};
static const int up_heads[] = {8, 16};
static const char *const ep_models[] = {"deepseek-v2-lite", "deepseek-v3",    "mixtral-8x7b",
                                        "olmoe-1b-7b",      "qwen1.5-moe-a2.7b",
                                        "qwen2-57b-a14b",   "qwen3-30b-a3b",  "qwen3-235b-a22b"};
static const char *const ep_routing[] = {"balanced", "zipf"};
static const int ep_tokens[] = {256, 1024, 4096, 16384};

static void test_counts(void)
{
    XT_CHECK(XS_GRID_TP_ROWS == 81, "tp rows %d", XS_GRID_TP_ROWS);
    XT_CHECK(XS_GRID_UP_ROWS == 60, "up rows %d", XS_GRID_UP_ROWS);
    XT_CHECK(XS_GRID_EP_ROWS == 192, "ep rows %d", XS_GRID_EP_ROWS);
    xs_grid_tp_row t;
    xs_grid_up_row u;
    xs_grid_ep_row e;
    XT_CHECK(xs_grid_tp_row_at(-1, &t) == XS_ERANGE, "tp -1");
    XT_CHECK(xs_grid_tp_row_at(81, &t) == XS_ERANGE, "tp 81");
    XT_CHECK(xs_grid_up_row_at(60, &u) == XS_ERANGE, "up 60");
    XT_CHECK(xs_grid_ep_row_at(192, &e) == XS_ERANGE, "ep 192");
    XT_CHECK(strstr(xs_errmsg(), "0..191") != NULL, "message: %s", xs_errmsg());
}

/* Every point of the cross product is row `want` (declared order, peers innermost), and the
 * rows are distinct: the grid lists each point once. */
static void test_tp_rows(void)
{
    int want = 0, seen[XS_GRID_TP_ROWS] = {0};
    for (int o = 0; o < 3; o++)
        for (int md = 0; md < 3; md++)
            for (int mi = 0; mi < 3; mi++)
                for (int p = 0; p < 3; p++, want++) {
                    xs_grid_tp_row r;
                    XT_CHECK(xs_grid_tp_row_at(want, &r) == XS_OK, "%s", xs_errmsg());
                    XT_CHECK(r.index == want && !strcmp(xs_tp_op_name(r.op), tp_ops[o]) &&
                                 !strcmp(r.model, tp_models[md]) && r.m == tp_m[mi] &&
                                 r.peers == peers[p],
                             "tp row %d: %s %s m=%d P=%d", want, xs_tp_op_name(r.op), r.model,
                             r.m, r.peers);
                    seen[want]++;
                    /* the shape is one the bench accepts (the status column would say if not) */
                    const xs_tp_model *mm = xs_tp_model_at(r.model_index);
                    xs_tp_shape s = {0};
                    s.op = r.op, s.m = r.m, s.peers = r.peers;
                    xs_tp_model_nk(r.op, mm, &s.n, &s.k);
                    xs_tp_info in;
                    XT_CHECK(xs_tp_info_of(&s, &in) == XS_OK, "tp row %d: %s", want,
                             xs_errmsg());
                }
    XT_CHECK(want == XS_GRID_TP_ROWS, "%d", want);
    for (int i = 0; i < want; i++)
        XT_CHECK(seen[i] == 1, "tp row %d seen %d times", i, seen[i]);
}

static void test_up_rows(void)
{
    int want = 0;
    for (int s = 0; s < 5; s++)
        for (int h = 0; h < 2; h++)
            for (int c = 0; c < 2; c++)
                for (int p = 0; p < 3; p++, want++) {
                    xs_grid_up_row r;
                    XT_CHECK(xs_grid_up_row_at(want, &r) == XS_OK, "%s", xs_errmsg());
                    XT_CHECK(r.index == want && r.seq == up_seq[s] && r.heads == up_heads[h] &&
                                 r.causal == c && r.peers == peers[p],
                             "up row %d: seq %d heads %d causal %d P %d", want, r.seq, r.heads,
                             r.causal, r.peers);
                    /* bench up needs seq to be a multiple of peers */
                    XT_CHECK(r.seq % r.peers == 0, "up row %d", want);
                }
    XT_CHECK(want == XS_GRID_UP_ROWS, "%d", want);
}

static void test_ep_rows(void)
{
    int want = 0;
    for (int m = 0; m < 8; m++) {
        /* every model of the EP grid is in the EP configuration table */
        XT_CHECK(xs_moe_config_find(ep_models[m]) != NULL, "ep model %s missing from "
                 "xs_moe_configs", ep_models[m]);
        for (int ro = 0; ro < 2; ro++)
            for (int t = 0; t < 4; t++)
                for (int p = 0; p < 3; p++, want++) {
                    xs_grid_ep_row r;
                    XT_CHECK(xs_grid_ep_row_at(want, &r) == XS_OK, "%s", xs_errmsg());
                    XT_CHECK(r.index == want && !strcmp(r.model, ep_models[m]) &&
                                 !strcmp(r.routing, ep_routing[ro]) && r.tokens == ep_tokens[t] &&
                                 r.peers == peers[p],
                             "ep row %d: %s %s T=%d P=%d", want, r.model, r.routing, r.tokens,
                             r.peers);
                }
    }
    XT_CHECK(want == XS_GRID_EP_ROWS, "%d", want);
    /* the routing words are the EP code's own */
    XT_CHECK(!strcmp(xs_grid_ep_routing[0], xs_moe_routing_name(XS_ROUTE_BALANCED)), "balanced");
    XT_CHECK(!strcmp(xs_grid_ep_routing[1], xs_moe_routing_name(XS_ROUTE_ZIPF)), "zipf");
}

static void test_parse(void)
{
    int d = -1, lo = -1, hi = -1;
    XT_CHECK(xs_grid_parse("declared", &d) == XS_OK && d == 1, "declared");
    XT_CHECK(xs_grid_parse("default", &d) == XS_OK && d == 0, "default");
    XT_CHECK(xs_grid_parse("declare", &d) == XS_EINVAL, "declare");
    XT_CHECK(strstr(xs_errmsg(), "--grid 'declare'") != NULL, "%s", xs_errmsg());
    XT_CHECK(xs_grid_parse("", &d) == XS_EINVAL, "empty");

    XT_CHECK(xs_grid_rows_parse("0:27", 81, &lo, &hi) == XS_OK && lo == 0 && hi == 27, "0:27");
    XT_CHECK(xs_grid_rows_parse("27:", 81, &lo, &hi) == XS_OK && lo == 27 && hi == 81, "27:");
    XT_CHECK(xs_grid_rows_parse(":10", 81, &lo, &hi) == XS_OK && lo == 0 && hi == 10, ":10");
    XT_CHECK(xs_grid_rows_parse(":", 81, &lo, &hi) == XS_OK && lo == 0 && hi == 81, ":");
    XT_CHECK(xs_grid_rows_parse("80", 81, &lo, &hi) == XS_OK && lo == 80 && hi == 81, "80");
    XT_CHECK(xs_grid_rows_parse("81:81", 81, &lo, &hi) == XS_EINVAL, "81:81 is empty");
    XT_CHECK(xs_grid_rows_parse("81", 81, &lo, &hi) == XS_EINVAL, "81 is not a row");
    XT_CHECK(xs_grid_rows_parse("0:82", 81, &lo, &hi) == XS_EINVAL, "beyond");
    XT_CHECK(strstr(xs_errmsg(), "82 is beyond") != NULL, "%s", xs_errmsg());
    XT_CHECK(xs_grid_rows_parse("5:3", 81, &lo, &hi) == XS_EINVAL, "5:3");
    XT_CHECK(xs_grid_rows_parse("a:3", 81, &lo, &hi) == XS_EINVAL, "a:3");
    XT_CHECK(xs_grid_rows_parse("-1:3", 81, &lo, &hi) == XS_EINVAL, "-1:3");
    XT_CHECK(xs_grid_rows_parse("1:2:3", 81, &lo, &hi) == XS_EINVAL, "1:2:3");
    XT_CHECK(xs_grid_rows_parse("", 81, &lo, &hi) == XS_EINVAL, "empty");
    XT_CHECK(xs_grid_rows_parse("99999999999999999999:", 81, &lo, &hi) == XS_EINVAL, "huge");
}

/* The footprint grows with m and the weights' share with 1/P; the largest TP row fits an
 * H200 (139 GiB), and an absurd shape does not. The time estimates are positive and finite;
 * their totals are printed (the numbers gpu_grid.sh quotes). */
static void test_estimates(void)
{
    double tp_total = 0, tp_max = 0, up_total = 0, up_max = 0;
    size_t dev_max = 0, host_max = 0;
    for (int i = 0; i < XS_GRID_TP_ROWS; i++) {
        xs_grid_tp_row r;
        xs_grid_tp_row_at(i, &r);
        xs_tp_shape s = {0};
        s.op = r.op, s.m = r.m, s.peers = r.peers;
        xs_tp_model_nk(r.op, xs_tp_model_at(r.model_index), &s.n, &s.k);
        xs_tp_info in;
        xs_tp_info_of(&s, &in);
        size_t dev, host;
        xs_grid_tp_bytes(&in, r.m, &dev, &host);
        XT_CHECK(dev > in.window_bytes && (r.peers == 1 || host >= in.window_bytes),
                 "tp row %d: dev %zu host %zu", i, dev, host);
        dev_max = dev > dev_max ? dev : dev_max;
        host_max = host > host_max ? host : host_max;
        const double est = xs_grid_tp_est_s(&in, 355.0, 50.0, 10.0);
        XT_CHECK(isfinite(est) && est > 0, "tp row %d: %g s", i, est);
        tp_total += est;
        tp_max = est > tp_max ? est : tp_max;
        if (r.m < 16384) { /* 4x the tokens: more bytes */
            xs_tp_shape s4 = s;
            s4.m = 4 * r.m;
            xs_tp_info in4;
            size_t dev4, host4;
            xs_tp_info_of(&s4, &in4);
            xs_grid_tp_bytes(&in4, s4.m, &dev4, &host4);
            XT_CHECK(dev4 > dev && host4 > host, "tp row %d: 4x m", i);
        }
    }
    XT_CHECK(dev_max < ((size_t)139 << 30), "largest TP row needs %.1f GiB", dev_max / 1073741824.0);
    xs_tp_shape big = {0};
    big.op = XS_TP_MLP, big.m = 1 << 20, big.n = 16384, big.k = 53248, big.peers = 2;
    xs_tp_info bin;
    XT_CHECK(xs_tp_info_of(&big, &bin) == XS_OK, "%s", xs_errmsg());
    size_t bdev, bhost;
    xs_grid_tp_bytes(&bin, big.m, &bdev, &bhost);
    XT_CHECK(bdev > ((size_t)139 << 30), "1M-token mlp: %.1f GiB", bdev / 1073741824.0);
    for (int i = 0; i < XS_GRID_UP_ROWS; i++) {
        xs_grid_up_row r;
        xs_grid_up_row_at(i, &r);
        const double est = xs_grid_up_est_s(&r, 310.0, 50.0, 10.0);
        XT_CHECK(isfinite(est) && est > 0, "up row %d: %g s", i, est);
        up_total += est;
        up_max = est > up_max ? est : up_max;
    }
    printf("estimate: tp grid %.0f s (worst row %.1f s), largest row %.1f GiB device, %.1f GiB "
           "pinned host; up grid %.0f s (worst row %.1f s)\n", tp_total, tp_max,
           dev_max / 1073741824.0, host_max / 1073741824.0, up_total, up_max);
}

/* The estimates against the measured runs they are fitted to (bench/results/overlap/auto.log:
 * bench tp over gemm_rs, ag_gemm, mlp x llama3-8b, llama3-70b x m 4096 x peers 4, 8 in 11.9 s;
 * bench up over seq 8192, 16384 x heads 16 x causal 0, 1 x peers 4, 8 in 4 s). */
static void test_estimate_fit(void)
{
    double tp = 0, up = 0;
    for (int op = 0; op < XS_TP_NOPS; op++)
        for (int md = 0; md < 2; md++)
            for (int p = 4; p <= 8; p += 4) {
                xs_tp_shape s = {0};
                s.op = (xs_tp_op)op, s.m = 4096, s.peers = p;
                xs_tp_model_nk(s.op, xs_tp_model_at(md), &s.n, &s.k);
                xs_tp_info in;
                XT_CHECK(xs_tp_info_of(&s, &in) == XS_OK, "%s", xs_errmsg());
                tp += xs_grid_tp_est_s(&in, 355.0, 50.0, 10.0);
            }
    for (int seq = 8192; seq <= 16384; seq *= 2)
        for (int c = 0; c < 2; c++)
            for (int p = 4; p <= 8; p += 4) {
                const xs_grid_up_row r = {0, seq, 16, c, p};
                up += xs_grid_up_est_s(&r, 310.0, 50.0, 10.0);
            }
    XT_NEAR(tp, 11.9, 0.15);
    XT_NEAR(up, 4.0, 0.15);
}

/* EP: the footprint of every declared row fits an H200 (139 GiB device with the weights, the
 * pinned windows and the pageable host memory well under its host's 128 GiB); it grows with the
 * tokens; an absurd point does not fit. The estimates are positive and finite; the totals per
 * model slice are printed (the numbers gpu_grid.sh quotes). */
static void test_ep_estimates(void)
{
    size_t dev_max = 0, host_max = 0;
    double total = 0, worst = 0, checks = 0, slice[XS_GRID_EP_NMODELS] = {0};
    for (int i = 0; i < XS_GRID_EP_ROWS; i++) {
        xs_grid_ep_row r;
        XT_CHECK(xs_grid_ep_row_at(i, &r) == XS_OK, "%s", xs_errmsg());
        const xs_moe_config *c = xs_moe_config_find(r.model);
        size_t w, dev, pin, host, w4, dev4, pin4, host4;
        xs_grid_ep_bytes(c, r.tokens, r.peers, &w, &dev, &pin, &host);
        const size_t win = (size_t)((r.tokens + r.peers - 1) / r.peers) * c->topk * c->hidden * 2;
        XT_CHECK(w == (size_t)c->experts * 3 * c->inter * c->hidden * 2, "ep row %d weights", i);
        XT_CHECK(pin == (size_t)(r.peers - 1) * win, "ep row %d pinned %zu", i, pin);
        XT_CHECK(dev > 2 * win && host > (size_t)r.tokens * c->topk * c->hidden * 4,
                 "ep row %d: dev %zu host %zu", i, dev, host);
        xs_grid_ep_bytes(c, 4 * r.tokens, r.peers, &w4, &dev4, &pin4, &host4);
        XT_CHECK(w4 == w && dev4 > dev && pin4 > pin && host4 > host, "ep row %d: 4x T", i);
        dev_max = w + dev > dev_max ? w + dev : dev_max;
        host_max = pin + host > host_max ? pin + host : host_max;
        const double est = xs_grid_ep_est_s(&r, 300.0, 52.0, XS_GRID_EP_VERIFY_GBPS);
        XT_CHECK(isfinite(est) && est > 0, "ep row %d: %g s", i, est);
        total += est;
        checks += est - xs_grid_ep_est_s(&r, 300.0, 52.0, INFINITY);
        worst = est > worst ? est : worst;
        slice[i / (XS_GRID_EP_ROWS / XS_GRID_EP_NMODELS)] += est;
    }
    XT_CHECK(dev_max < ((size_t)139 << 30), "largest EP row needs %.1f GiB", dev_max / 1073741824.0);
    XT_CHECK(host_max < ((size_t)64 << 30), "largest EP row needs %.1f GiB of host memory",
             host_max / 1073741824.0);
    size_t w, dev, pin, host;
    xs_grid_ep_bytes(xs_moe_config_find("deepseek-v3"), 1 << 20, 2, &w, &dev, &pin, &host);
    XT_CHECK(w + dev > ((size_t)139 << 30), "1M-token deepseek-v3: %.1f GiB", (w + dev) / 1073741824.0);
    XT_CHECK(xs_grid_host_avail() > 0, "MemAvailable unknown");
    /* a model the table lacks has no estimate */
    const xs_grid_ep_row bad = {0, "no-such-model", "balanced", 256, 2};
    XT_CHECK(isnan(xs_grid_ep_est_s(&bad, 300.0, 52.0, XS_GRID_EP_VERIFY_GBPS)),
             "unknown model");
    printf("estimate: ep grid %.0f s (the checks %.0f s, worst row %.1f s), largest row %.1f "
           "GiB device, %.1f GiB host; per model (24 rows each, 4 token counts x 6):", total,
           checks, worst,
           dev_max / 1073741824.0, host_max / 1073741824.0);
    for (int m = 0; m < XS_GRID_EP_NMODELS; m++)
        printf(" %s %.0f s", xs_grid_ep_models[m], slice[m]);
    printf("\n");
    /* per model and token count (6 rows each: routing x peers), the slices gpu_grid.sh names */
    for (int m = 0; m < XS_GRID_EP_NMODELS; m++) {
        printf("estimate: ep %s rows %d:%d", xs_grid_ep_models[m], m * 24, m * 24 + 24);
        for (int t = 0; t < XS_GRID_EP_NTOKENS; t++) {
            double s = 0;
            for (int ro = 0; ro < 2; ro++)
                for (int p = 0; p < 3; p++) {
                    xs_grid_ep_row r;
                    xs_grid_ep_row_at(m * 24 + ro * 12 + t * 3 + p, &r);
                    s += xs_grid_ep_est_s(&r, 300.0, 52.0, XS_GRID_EP_VERIFY_GBPS);
                }
            printf("; T=%d %.0f s", xs_grid_ep_tokens[t], s);
        }
        printf("\n");
    }
}

/* The EP estimate with the older bench's counts (44 runs, 8 checks a point, each on the CPU at
 * XS_GRID_EP_HOST_VERIFY_GBPS) against the run it is fitted to: bench/results/ep/sweep.csv, the
 * default sweep (each configuration's three default token counts at its own peer count, both
 * routings), 84.6 s of point_s in all. */
static void test_ep_estimate_fit(void)
{
    double s = 0;
    for (int i = 0; i < xs_moe_nconfigs; i++) {
        const xs_moe_config *c = &xs_moe_configs[i];
        if (!c->sweep)
            continue;
        for (int ro = 0; ro < 2; ro++)
            for (int t = 0; t < 3; t++) {
                const xs_grid_ep_row r = {0, c->name, ep_routing[ro], c->tokens[t],
                                          c->peers > 0 ? c->peers : 4};
                s += xs_grid_ep_est_runs_s(&r, 44, 8, 300.0, 52.0,
                                          XS_GRID_EP_HOST_VERIFY_GBPS);
            }
    }
    XT_NEAR(s, 84.6, 0.15);
}

int main(void)
{
    test_estimate_fit();
    test_counts();
    test_tp_rows();
    test_up_rows();
    test_ep_rows();
    test_parse();
    test_estimates();
    test_ep_estimate_fit();
    test_ep_estimates();
    return xt_done();
}
