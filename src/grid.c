// SPDX-License-Identifier: Apache-2.0
/*
 * grid.c - the declared grids of the benches (include/xstage_grid.h): their axes as tables, row
 * i of each in the declared order, the --grid and --rows options, and what a point needs before
 * it runs (device and host bytes, expected seconds).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xstage_grid.h"

const int xs_grid_peers[XS_GRID_NPEERS] = {2, 4, 8};
const char *const xs_grid_tp_ops[XS_GRID_TP_NOPS] = {"gemm_rs", "ag_gemm", "mlp"};
const char *const xs_grid_tp_models[XS_GRID_TP_NMODELS] = {"llama3-8b", "llama3-70b",
                                                           "llama3-405b"};
const int xs_grid_tp_m[XS_GRID_TP_NM] = {1024, 4096, 16384};
const int xs_grid_up_seq[XS_GRID_UP_NSEQ] = {4096, 8192, 16384, 32768, 65536};
const int xs_grid_up_heads[XS_GRID_UP_NHEADS] = {8, 16};
const char *const xs_grid_ep_models[XS_GRID_EP_NMODELS] = {
    "deepseek-v2-lite", "deepseek-v3",    "mixtral-8x7b",  "olmoe-1b-7b",
    "qwen1.5-moe-a2.7b", "qwen2-57b-a14b", "qwen3-30b-a3b", "qwen3-235b-a22b"};
const char *const xs_grid_ep_routing[XS_GRID_EP_NROUTING] = {"balanced", "zipf"};
const int xs_grid_ep_tokens[XS_GRID_EP_NTOKENS] = {256, 1024, 4096, 16384};

/* i as digits of the mixed radix dims[0..n) (dims[n-1] the innermost) into at[]. */
static void grid_digits(int i, const int *dims, int n, int *at)
{
    for (int d = n - 1; d >= 0; d--) {
        at[d] = i % dims[d];
        i /= dims[d];
    }
}

xs_status xs_grid_tp_row_at(int i, xs_grid_tp_row *r)
{
    static const int dims[4] = {XS_GRID_TP_NOPS, XS_GRID_TP_NMODELS, XS_GRID_TP_NM,
                                XS_GRID_NPEERS};
    int at[4];
    memset(r, 0, sizeof *r);
    if (i < 0 || i >= XS_GRID_TP_ROWS)
        return xs_seterr(XS_ERANGE, "tp grid: row %d outside 0..%d", i, XS_GRID_TP_ROWS - 1);
    grid_digits(i, dims, 4, at);
    XS_TRY(xs_tp_op_parse(xs_grid_tp_ops[at[0]], &r->op));
    r->model_index = -1;
    for (int j = 0; j < XS_TP_NMODELS; j++)
        if (!strcmp(xs_tp_model_at(j)->name, xs_grid_tp_models[at[1]]))
            r->model_index = j;
    if (r->model_index < 0)
        return xs_seterr(XS_EINVAL, "tp grid: model %s is not in the model table",
                         xs_grid_tp_models[at[1]]);
    r->index = i;
    r->model = xs_tp_model_at(r->model_index)->name;
    r->m = xs_grid_tp_m[at[2]];
    r->peers = xs_grid_peers[at[3]];
    return XS_OK;
}

xs_status xs_grid_up_row_at(int i, xs_grid_up_row *r)
{
    static const int dims[4] = {XS_GRID_UP_NSEQ, XS_GRID_UP_NHEADS, XS_GRID_UP_NCAUSAL,
                                XS_GRID_NPEERS};
    int at[4];
    memset(r, 0, sizeof *r);
    if (i < 0 || i >= XS_GRID_UP_ROWS)
        return xs_seterr(XS_ERANGE, "up grid: row %d outside 0..%d", i, XS_GRID_UP_ROWS - 1);
    grid_digits(i, dims, 4, at);
    r->index = i;
    r->seq = xs_grid_up_seq[at[0]];
    r->heads = xs_grid_up_heads[at[1]];
    r->causal = at[2];
    r->peers = xs_grid_peers[at[3]];
    return XS_OK;
}

xs_status xs_grid_ep_row_at(int i, xs_grid_ep_row *r)
{
    static const int dims[4] = {XS_GRID_EP_NMODELS, XS_GRID_EP_NROUTING, XS_GRID_EP_NTOKENS,
                                XS_GRID_NPEERS};
    int at[4];
    memset(r, 0, sizeof *r);
    if (i < 0 || i >= XS_GRID_EP_ROWS)
        return xs_seterr(XS_ERANGE, "ep grid: row %d outside 0..%d", i, XS_GRID_EP_ROWS - 1);
    grid_digits(i, dims, 4, at);
    r->index = i;
    r->model = xs_grid_ep_models[at[0]];
    r->routing = xs_grid_ep_routing[at[1]];
    r->tokens = xs_grid_ep_tokens[at[2]];
    r->peers = xs_grid_peers[at[3]];
    return XS_OK;
}

xs_status xs_grid_parse(const char *arg, int *declared)
{
    if (arg && !strcmp(arg, "declared"))
        *declared = 1;
    else if (arg && !strcmp(arg, "default"))
        *declared = 0;
    else
        return xs_seterr(XS_EINVAL, "--grid '%s': expected declared or default",
                         arg ? arg : "");
    return XS_OK;
}

/* One end of A:B: digits only, 0..n; an empty end takes dflt. */
static xs_status grid_end(const char *arg, const char *s, size_t len, int n, int dflt, int *out)
{
    if (!len) {
        *out = dflt;
        return XS_OK;
    }
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9' || v > n)
            return xs_seterr(XS_EINVAL, "--rows '%s': expected A:B, row numbers 0..%d", arg, n);
        v = v * 10 + (s[i] - '0');
    }
    if (v > n)
        return xs_seterr(XS_EINVAL, "--rows '%s': %ld is beyond the grid's %d rows", arg, v, n);
    *out = (int)v;
    return XS_OK;
}

xs_status xs_grid_rows_parse(const char *arg, int n, int *lo, int *hi)
{
    if (!arg || !*arg)
        return xs_seterr(XS_EINVAL, "--rows: empty (expected A:B)");
    const char *colon = strchr(arg, ':');
    if (!colon) {
        XS_TRY(grid_end(arg, arg, strlen(arg), n, 0, lo));
        if (*lo >= n)
            return xs_seterr(XS_EINVAL, "--rows '%s': the grid's rows are 0..%d", arg, n - 1);
        *hi = *lo + 1;
        return XS_OK;
    }
    if (strchr(colon + 1, ':'))
        return xs_seterr(XS_EINVAL, "--rows '%s': expected A:B", arg);
    XS_TRY(grid_end(arg, arg, (size_t)(colon - arg), n, 0, lo));
    XS_TRY(grid_end(arg, colon + 1, strlen(colon + 1), n, n, hi));
    if (*lo >= *hi)
        return xs_seterr(XS_EINVAL, "--rows '%s': empty range (A must be below B)", arg);
    return XS_OK;
}

xs_status xs_grid_opts_check(const char *cmd, int declared, const char *bad, const char *rows_arg,
                             int n, int *lo, int *hi)
{
    if (!declared)
        return rows_arg ? xs_seterr(XS_EINVAL, "%s: --rows needs --grid declared", cmd) : XS_OK;
    if (bad)
        return xs_seterr(XS_EINVAL, "%s: --grid declared fixes the points; %s cannot be combined "
                         "with it (--rows A:B picks a slice)", cmd, bad);
    *lo = 0, *hi = n;
    return rows_arg ? xs_grid_rows_parse(rows_arg, n, lo, hi) : XS_OK;
}

void xs_grid_tp_bytes(const xs_tp_info *in, int m, size_t *dev, size_t *host)
{
    const size_t M = (size_t)m, P = (size_t)(in->rs_rows ? m / in->rs_rows : 1);
    const int rs = in->rs_gemm >= 0, mlp = in->ngemm > 1, gemm_rs = rs && !mlp && !in->ag;
    size_t d = (P + 1) * in->window_bytes; /* this rank's window and the local control table */
    for (int g = 0; g < in->ngemm; g++)
        d += (size_t)in->gn[g] * in->gk[g] * 2; /* weights */
    if (gemm_rs)
        d += M * in->gk[0] * 2; /* A */
    else
        d += M * in->out_n[0] * 2 * 2 + M * in->gn[0] * 2; /* out0, its expectation, unfused c0 */
    if (mlp)
        d += M * in->out_n[0] * (2 + 4 + 2) + M * in->gn[0] * 4; /* u_h, ref_out0, ref_h, ref_tmp */
    else if (in->ag)
        d += M * in->out_n[0] * 4; /* ref_out0 */
    if (rs) {
        const size_t ny = (size_t)in->rs_rows * in->rs_n;
        d += ny * (2 + 2 + 4 + 2);     /* y, u_y, ref_y, exp_y */
        d += M * in->rs_n * (2 + 4 + 2); /* u_c, ref_part, exp_part */
        d += P * ny * 2;               /* a received slot's scratch, exp_recv (real peers) */
    }
    d += (size_t)256 << 20; /* the L2 flush (2 x L2 or 64 MB), cuBLAS workspace, task lists */
    *dev = d;
    *host = (P - 1) * in->window_bytes;
}

double xs_grid_tp_est_s(const xs_tp_info *in, double tflops, double drain_bytes_per_ns,
                        double verify_gbps)
{
    const double remote = in->ag_remote_bytes + in->rs_remote_bytes;
    const double comp_s = in->flops / (tflops * 1e12), link_s = remote / (drain_bytes_per_ns * 1e9);
    const double run_s = (comp_s > link_s ? comp_s : link_s) + remote / (verify_gbps * 1e9);
    /* setup: the fp32 reference (about 3 GEMMs at fp32 rate), the placed data of the P - 1
     * host windows written by the CPU (at the rate it checks them), a fixed part */
    const int m = in->tiles_m * XS_TP_BM, P = in->rs_rows ? m / in->rs_rows : 1;
    const double placed = (double)(P - 1) * in->window_bytes;
    return XS_GRID_TP_RUNS * run_s + 3.0 * comp_s + placed / (verify_gbps * 1e9) +
           XS_GRID_TP_SETUP_S;
}

double xs_grid_up_est_s(const xs_grid_up_row *r, double tflops, double drain_bytes_per_ns,
                        double verify_gbps)
{
    const double s = r->seq, rows_bytes = s * r->heads * 256.0; /* bf16, head dim 128 */
    const double flops = 4.0 * s * s * r->heads * 128.0 * (r->causal ? 0.5 : 1.0);
    const double remote = rows_bytes * (r->peers - 1) / r->peers;
    const double comp_s = flops / (tflops * 1e12), link_s = remote / (drain_bytes_per_ns * 1e9);
    const double run_s = comp_s + link_s + remote / (verify_gbps * 1e9);
    return XS_GRID_UP_RUNS * run_s + XS_GRID_UP_SETUP_S;
}

void xs_grid_ep_bytes(const xs_moe_config *c, int tokens, int peers, size_t *weights, size_t *dev,
                      size_t *pinned, size_t *host)
{
    const size_t T = (size_t)tokens, N = (size_t)(peers > 0 ? peers : 1), K = (size_t)c->topk;
    const size_t H = (size_t)c->hidden, I = (size_t)c->inter, rows = T * K;
    const size_t win = (T + N - 1) / N * K * H * 2; /* one rank's window */
    *weights = (size_t)c->experts * 3 * I * H * 2;
    /* kept for the whole point: tokens, h, the row maps (token, rank, weight, slot), the
     * dispatched tokens, the reference h, the fp32 reference rows (what the checks read) */
    const size_t keep = T * H * 2 + rows * I * 2 + rows * 20 + rows * H * 2 + rows * I * 2 +
                        rows * H * 4;
    /* the fp32 reference's temporaries: y1f, y2f */
    const size_t ref = rows * 2 * I * 4 + rows * H * 4;
    /* the runs: local-control windows, unfused y1, y2 and staging, couriers' staging, rank 0's
     * window, the overlapped pipelines' row arrays (six chunk counts cached) */
    const size_t runs = N * win + rows * 2 * I * 2 + rows * H * 2 + N * win + rows * H * 2 + win +
                        6 * rows * 20;
    *dev = keep + (ref > runs ? ref : runs) + ((size_t)256 << 20);
    *pinned = (N - 1) * win;
    /* the fp32 reference rows (host copy), the host problem */
    *host = rows * H * 4 + rows * 64;
}

size_t xs_grid_host_avail(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    if (kb)
        return (size_t)kb * 1024;
#if defined(_SC_AVPHYS_PAGES) && defined(_SC_PAGESIZE)
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        return (size_t)pages * (size_t)page;
#endif
    return 0;
}

double xs_grid_ep_est_runs_s(const xs_grid_ep_row *r, int runs, int checks, double tflops,
                             double drain_bytes_per_ns, double verify_gbps)
{
    const xs_moe_config *c = xs_moe_config_find(r->model);
    if (!c)
        return NAN;
    const double rows = (double)r->tokens * c->topk;
    const double bytes = rows * c->hidden * 2.0; /* the combine, every rank's rows */
    const double remote = bytes * (r->peers - 1) / r->peers;
    const double flops = 2.0 * rows * c->hidden * 3.0 * c->inter;
    const double run_s = flops / (tflops * 1e12) + 2.0 * remote / (drain_bytes_per_ns * 1e9);
    return runs * run_s + checks * bytes / (verify_gbps * 1e9) +
           XS_GRID_EP_MODEL_S_PER_GB * bytes / 1e9 + XS_GRID_EP_SETUP_S;
}

double xs_grid_ep_est_s(const xs_grid_ep_row *r, double tflops, double drain_bytes_per_ns,
                        double verify_gbps)
{
    return xs_grid_ep_est_runs_s(r, XS_GRID_EP_RUNS, XS_GRID_EP_CHECKS, tflops,
                                 drain_bytes_per_ns, verify_gbps);
}
