/*
 * test_tp.cu - tensor parallelism (cuda/tp.h) on small odd shapes against a CPU fp64 reference:
 * fused GEMM + reduce-scatter, all-gather + GEMM and the MLP block, naive and shaped orders,
 * local control and virtual peers (rank 0 in HBM, ranks 1..P-1 in pinned host memory), few
 * CTAs (many steps, cross-CTA waits) and a full grid. Every byte sent to a host window is read
 * back by the CPU and compared (pushed shards exactly, partial sums within tolerance), every
 * signal carries the launch's epoch, this rank's reduced rows match the fp64 sum of every
 * source's partial. A missed signal (reduce-scatter tile, all-gather chunk, GEMM1 row-block
 * count) must end the kernel with a one-line XS_ETIMEOUT within its bound, and the context must
 * work again afterwards. Bad shapes are refused with one line.
 *
 * Tolerances (bf16 outputs of fp32 accumulation, inputs O(1)): element |got - ref| <=
 * 2^-7 |ref| + 0.02 rms(ref); relative Frobenius error <= 4e-3 (partials, GEMM outputs),
 * <= 6e-3 (reduced rows: P bf16 partials summed, then rounded).
 *
 * usage: test_tp [--quick]      last line: "N passed, N failed"
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../xt.h"
#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_win.h"
#include "../../cuda/tp.h"

#include <cuda_bf16.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double bf(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t to_bf(double v) /* round to nearest even, as __float2bfloat16 */
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return (uint16_t)(u >> 16);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static uint16_t *d2h(const void *d, size_t elems)
{
    uint16_t *h = (uint16_t *)malloc(elems * 2 + 2);
    if (!h) {
        fprintf(stderr, "test_tp: out of host memory\n");
        exit(1);
    }
    XS_CHECK_CU(cudaMemcpy(h, d, elems * 2, cudaMemcpyDeviceToHost));
    return h;
}

/* ---- CPU fp64 references ------------------------------------------------------------------ */

typedef struct {
    xs_tp_shape s;
    xs_tp_info in;
    int me;
    double *part;   /* [m, rs_n] the partial this rank computes (RS ops) */
    double *y;      /* [rs_rows, rs_n] this rank's reduced rows */
    double *out0;   /* [m, out_n[0]] GEMM 0 output (ag_gemm, mlp h before rounding) */
    uint16_t *shard; /* this rank's shard [rs_rows, ag_k] (exact bytes every peer receives) */
} cref;

static double *widen(const uint16_t *x, size_t n)
{
    double *d = (double *)malloc(n * sizeof(double) + 8);
    if (!d) {
        fprintf(stderr, "test_tp: out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        d[i] = bf(x[i]);
    return d;
}

/* c [m, n] = a [m, k] * b [n, k]^T in fp64 */
static void gemm64(const uint16_t *a16, const uint16_t *b16, int m, int n, int k, double *c)
{
    double *a = widen(a16, (size_t)m * k), *b = widen(b16, (size_t)n * k);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            const double *x = a + (size_t)i * k, *y = b + (size_t)j * k;
            double s = 0;
            for (int l = 0; l < k; l++)
                s += x[l] * y[l];
            c[(size_t)i * n + j] = s;
        }
    free(a);
    free(b);
}

static void build_ref(xs_tp *t, const xs_tp_shape *s, int me, cref *r)
{
    memset(r, 0, sizeof *r);
    r->s = *s;
    r->me = me;
    xs_tp_get_info(t, &r->in);
    const xs_tp_info *in = &r->in;
    xs_tp_bufs b;
    xs_tp_get_bufs(t, &b);
    const int m = in->gm[0];
    uint16_t *a = d2h(b.a, (size_t)m * in->gk[0]);
    uint16_t *w0 = d2h(b.b[0], (size_t)in->gn[0] * in->gk[0]);
    double *c0 = (double *)malloc((size_t)m * in->gn[0] * sizeof(double));
    gemm64(a, w0, m, in->gn[0], in->gk[0], c0);
    if (in->ag) {
        r->shard = (uint16_t *)malloc(in->shard_bytes);
        memcpy(r->shard, a + (size_t)r->me * in->rs_rows * in->ag_k, in->shard_bytes);
    }
    if (in->rs_gemm == 0) {
        r->part = c0;
        c0 = NULL;
    } else if (in->ngemm == 1) {
        r->out0 = c0;
        c0 = NULL;
    } else {
        /* mlp: h = silu(gate) * up (interleaved in groups of 16), rounded to bf16 as the GEMM 2
         * input of every path */
        const int hn = in->out_n[0], n1 = in->gn[0];
        r->out0 = (double *)malloc((size_t)m * hn * sizeof(double));
        uint16_t *hb = (uint16_t *)malloc((size_t)m * hn * 2);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < hn; j++) {
                const int pg = 32 * (j / 16) + (j % 16);
                const double g = c0[(size_t)i * n1 + pg], u = c0[(size_t)i * n1 + pg + 16];
                const double v = g / (1.0 + exp(-g)) * u;
                r->out0[(size_t)i * hn + j] = v;
                hb[(size_t)i * hn + j] = to_bf(v);
            }
        uint16_t *w1 = d2h(b.b[1], (size_t)in->gn[1] * in->gk[1]);
        r->part = (double *)malloc((size_t)m * in->gn[1] * sizeof(double));
        gemm64(hb, w1, m, in->gn[1], in->gk[1], r->part);
        free(hb);
        free(w1);
    }
    if (in->rs_gemm >= 0) {
        /* y = own rows of the partial + every other source's partial (the slots it received) */
        const size_t ny = (size_t)in->rs_rows * in->rs_n;
        const int P = r->s.peers;
        uint16_t *slots = d2h(b.rs_slots, (size_t)P * ny);
        r->y = (double *)malloc(ny * sizeof(double));
        for (size_t i = 0; i < ny; i++) {
            double v = r->part[(size_t)r->me * ny + i];
            for (int q = 0; q < P; q++)
                if (q != r->me)
                    v += bf(slots[(size_t)q * ny + i]);
            r->y[i] = v;
        }
        free(slots);
    }
    free(c0);
    free(a);
    free(w0);
}

static void free_ref(cref *r)
{
    free(r->part);
    free(r->y);
    free(r->out0);
    free(r->shard);
}

/* got (bf16, row stride ldg) against ref (double, row stride ldr), rows x cols. Returns the
 * relative Frobenius error; *bad counts elements outside 2^-7 |ref| + atol_rms * rms(ref). */
static double compare(const uint16_t *got, size_t ldg, const double *ref, size_t ldr, int rows,
                      int cols, double atol_rms, long *bad)
{
    double ss = 0, se = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            ss += ref[(size_t)i * ldr + j] * ref[(size_t)i * ldr + j];
    const double rms = rows && cols ? sqrt(ss / ((double)rows * cols)) : 0;
    *bad = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            const double g = bf(got[(size_t)i * ldg + j]), w = ref[(size_t)i * ldr + j];
            const double e = g - w;
            if (!(fabs(e) <= 0.0078125 * fabs(w) + atol_rms * rms))
                (*bad)++;
            se += isfinite(e) ? e * e : 1e300;
        }
    return ss > 0 ? sqrt(se / ss) : (se > 0 ? INFINITY : 0);
}

/* ---- one case ---------------------------------------------------------------------------- */

typedef struct {
    xs_tp_op op;
    int m, n, k, peers, grid; /* grid 0 = every SM */
} tcase;

static const char *cname(const tcase *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s m=%d n=%d k=%d P=%d grid=%d", xs_tp_op_name(c->op), c->m, c->n, c->k,
             c->peers, c->grid);
    return buf;
}

/* The destination-side checks of one fused run, CPU fp64. */
static void check_fused(xs_tp *t, const cref *r, const char *name, const char *variant)
{
    const xs_tp_info *in = &r->in;
    const int P = r->s.peers, me = r->me;
    xs_tp_bufs b;
    xs_tp_get_bufs(t, &b);
    double sent = 0;
    for (int q = 0; q < P; q++) {
        if (q == me)
            continue;
        XT_CHECK(b.host[q] != NULL, "%s %s: rank %d's window has no CPU address", name, variant,
                 q);
        if (!b.host[q])
            continue;
        const char *w = (const char *)b.host[q];
        if (in->rs_gemm >= 0) {
            /* slot `me` of owner q: the partial of q's rows */
            const uint16_t *got = (const uint16_t *)(w + in->rs_off + (size_t)me * in->slot_bytes);
            long bad = 0;
            const double rel = compare(got, in->rs_n, r->part + (size_t)q * in->rs_rows * in->rs_n,
                                       in->rs_n, in->rs_rows, in->rs_n, 0.02, &bad);
            XT_CHECK(bad == 0 && rel <= 4e-3, "%s %s: partial at rank %d: %ld elements off, rel "
                     "%.3g", name, variant, q, bad, rel);
            sent += (double)in->slot_bytes;
        }
        if (in->ag) {
            const char *got = w + (size_t)me * in->shard_bytes;
            XT_CHECK(!memcmp(got, r->shard, in->shard_bytes), "%s %s: shard bytes at rank %d "
                     "differ", name, variant, q);
            sent += (double)in->shard_bytes;
        }
    }
    XT_CHECK(sent == in->ag_remote_bytes + in->rs_remote_bytes, "%s %s: %.0f bytes checked, "
             "%.0f sent", name, variant, sent, in->ag_remote_bytes + in->rs_remote_bytes);
    if (in->rs_gemm >= 0) {
        uint16_t *y = d2h(b.y, (size_t)in->rs_rows * in->rs_n);
        long bad = 0;
        const double rel = compare(y, in->rs_n, r->y, in->rs_n, in->rs_rows, in->rs_n,
                                   0.02 * (P + 1), &bad);
        XT_CHECK(bad == 0 && rel <= 6e-3, "%s %s: reduced rows: %ld elements off, rel %.3g", name,
                 variant, bad, rel);
        free(y);
    }
    if (b.out0) {
        uint16_t *o0 = d2h(b.out0, (size_t)r->s.m * in->out_n[0]);
        long bad = 0;
        const double rel = compare(o0, in->out_n[0], r->out0, in->out_n[0], r->s.m, in->out_n[0],
                                   0.02, &bad);
        XT_CHECK(bad == 0 && rel <= 4e-3, "%s %s: GEMM 0 output: %ld elements off, rel %.3g",
                 name, variant, bad, rel);
        free(o0);
    }
}

static void lib_verify(xs_tp *t, const char *name, const char *variant, int fused, double bytes)
{
    xs_tp_check c;
    xs_status st = xs_tp_verify(t, &c);
    XT_CHECK(st == XS_OK, "%s %s: verify: %s", name, variant, xs_errmsg());
    XT_CHECK(c.ok, "%s %s: %s", name, variant, c.what);
    if (fused)
        XT_CHECK(c.remote_bytes == bytes, "%s %s: library checked %.0f remote bytes of %.0f",
                 name, variant, c.remote_bytes, bytes);
}

static void run_case(const tcase *tc, const xs_gpu_info *gi, xs_cublas *cb)
{
    char name[128];
    cname(tc, name, sizeof name);
    xs_tp_shape s = {tc->op, tc->m, tc->n, tc->k, tc->peers};
    xs_tp_info in;
    XT_CHECK(xs_tp_info_of(&s, &in) == XS_OK, "%s: %s", name, xs_errmsg());
    xs_win_opts wo;
    memset(&wo, 0, sizeof wo);
    wo.target = XS_TARGET_VIRTUAL;
    wo.virtual_peers = tc->peers;
    wo.bytes = in.window_bytes;
    wo.nflags = in.nflags;
    wo.device = gi->device;
    xs_winset *ws = NULL;
    if (xs_win_open(&wo, &ws) != XS_OK) {
        XT_CHECK(0, "%s: windows: %s", name, xs_errmsg());
        return;
    }
    const xs_wintab *tab = xs_win_table(ws);
    const int grid = tc->grid ? tc->grid : gi->sm_count;
    xs_tp *t = NULL;
    if (xs_tp_create(&s, tab, grid, 1234u + (uint32_t)tc->m * 7u + (uint32_t)tc->op, &t) !=
        XS_OK) {
        XT_CHECK(0, "%s: create: %s", name, xs_errmsg());
        xs_win_close(ws);
        return;
    }
    cref r;
    build_ref(t, &s, tab->rank, &r);
    const double bytes = in.ag_remote_bytes + in.rs_remote_bytes;
    cudaStream_t st;
    XS_CHECK_CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    xs_tp_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.timeout_ns = 2000000000ull;
    float ms = 0;

    XT_CHECK(xs_tp_reference(t, cb) == XS_OK, "%s: reference: %s", name, xs_errmsg());
    XT_CHECK(xs_tp_order_naive(t, 0) == XS_OK, "%s: naive: %s", name, xs_errmsg());
    /* local control: outputs against fp64, then the library's expectation */
    ro.local = 1;
    XT_CHECK(xs_tp_run(t, 0, &ro, st, &ms) == XS_OK, "%s: local run: %s", name, xs_errmsg());
    lib_verify(t, name, "local", 0, 0);
    xs_tp_costs cost;
    XT_CHECK(xs_tp_costs_of_last(t, &cost) == XS_OK, "%s: costs: %s", name, xs_errmsg());
    XT_CHECK(cost.tile_ns[0] > 0 && (in.ngemm < 2 || cost.tile_ns[1] > 0), "%s: tile costs %g %g",
             name, cost.tile_ns[0], cost.tile_ns[1]);

    /* fused, naive and a shaped order */
    xs_profile prof;
    xs_profile_default(&prof);
    const xs_tp_pace pace = {0.8, 1.5, 0, 2};
    XT_CHECK(xs_tp_order_shaped(t, 1, &pace, &cost, &prof) == XS_OK, "%s: shaped: %s", name,
             xs_errmsg());
    xs_tp_pred pred;
    XT_CHECK(xs_tp_predict(t, 1, &prof, &cost, 1, &pred) == XS_OK && pred.model_ns >= pred.ideal_ns &&
                 pred.ideal_ns > 0,
             "%s: predict: %s (%g, %g)", name, xs_errmsg(), pred.model_ns, pred.ideal_ns);
    ro.local = 0;
    for (int slot = 0; slot < 2; slot++)
        for (int rep = 0; rep < 2; rep++) {
            const char *v = slot ? "shaped" : "naive";
            XT_CHECK(xs_tp_run(t, slot, &ro, st, &ms) == XS_OK, "%s %s: %s", name, v, xs_errmsg());
            lib_verify(t, name, v, 1, bytes);
            check_fused(t, &r, name, v);
        }
    ro.local = 1;
    XT_CHECK(xs_tp_run(t, 1, &ro, st, &ms) == XS_OK, "%s: local shaped: %s", name, xs_errmsg());
    lib_verify(t, name, "local shaped", 0, 0);
    ro.local = 0;

    /* unfused baseline: same windows, checked against the reference and its sources */
    XT_CHECK(xs_tp_run_unfused(t, cb, st, &ms) == XS_OK, "%s: unfused: %s", name, xs_errmsg());
    lib_verify(t, name, "unfused", 1, bytes);

    /* missed signals: one line, within the bound, and the context works afterwards */
    int faults[3] = {0, 0, 0}, nf = 0;
    if (in.rs_gemm >= 0)
        faults[nf++] = XS_TP_FAULT_RS_SIGNAL;
    if (in.ag && tc->peers > 1)
        faults[nf++] = XS_TP_FAULT_AG_FLAG;
    if (in.ngemm > 1)
        faults[nf++] = XS_TP_FAULT_H_COUNT;
    for (int i = 0; i < nf; i++) {
        xs_tp_run_opts fo = ro;
        fo.fault = faults[i];
        fo.timeout_ns = 50000000ull; /* 50 ms */
        const double t0 = now_s();
        xs_status e = xs_tp_run(t, 1, &fo, st, &ms);
        const double dt = now_s() - t0;
        const char *msg = xs_errmsg();
        XT_CHECK(e == XS_ETIMEOUT, "%s fault %d: status %s (%s)", name, faults[i],
                 xs_status_name(e), msg);
        XT_CHECK(dt < 0.05 + 2.0, "%s fault %d: took %.3f s for a 0.05 s bound", name, faults[i],
                 dt);
        XT_CHECK(strchr(msg, '\n') == NULL && strstr(msg, "waited longer than") != NULL,
                 "%s fault %d: message '%s'", name, faults[i], msg);
        printf("ok %s fault %d -> %.3f s: %s\n", name, faults[i], dt, msg);
        XT_CHECK(xs_tp_run(t, 0, &ro, st, &ms) == XS_OK, "%s after fault %d: %s", name, faults[i],
                 xs_errmsg());
        lib_verify(t, name, "after a fault", 1, bytes);
        check_fused(t, &r, name, "after a fault");
    }
    printf("ok %s: local %.0f ns/tile, model %.1f us (ideal %.1f us)\n", name, cost.tile_ns[0],
           pred.model_ns / 1e3, pred.ideal_ns / 1e3);
    free_ref(&r);
    xs_tp_destroy(t);
    cudaStreamDestroy(st);
    xs_win_close(ws);
}

int main(int argc, char **argv)
{
    int quick = 0;
    static const struct option opts[] = {{"quick", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
        switch (ch) {
        case 'q': quick = 1; break;
        case 'h': printf("usage: test_tp [--quick]\n"); return 0;
        default: fprintf(stderr, "usage: test_tp [--quick]\n"); return 2;
        }
    }
    /* bad shapes: one line each, before any GPU work */
    {
        xs_tp_info in;
        const xs_tp_shape bad[] = {
            {XS_TP_GEMM_RS, 1000, 256, 256, 2}, /* m not a multiple of 128 P */
            {XS_TP_GEMM_RS, 512, 256, 100, 2},  /* k/P not a multiple of 8 */
            {XS_TP_GEMM_RS, 512, 250, 256, 2},  /* n not a multiple of 8 */
            {XS_TP_AG_GEMM, 512, 100, 256, 4},  /* n/P not a multiple of 8 */
            {XS_TP_MLP, 512, 256, 200, 2},      /* I/P not a multiple of 16 */
            {XS_TP_MLP, 512, 256, 256, 0},      /* no peers */
            {XS_TP_MLP, 0, 256, 256, 2},        /* no tokens */
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            xs_status e = xs_tp_info_of(&bad[i], &in);
            XT_CHECK(e == XS_EINVAL && !strchr(xs_errmsg(), '\n'), "bad shape %zu accepted (%s)",
                     i, xs_errmsg());
        }
        xs_tp_op op;
        XT_CHECK(xs_tp_op_parse("gemm-rs", &op) == XS_EINVAL, "op name 'gemm-rs' accepted");
        printf("ok bad shapes refused (%s)\n", xs_errmsg());
    }
    xs_gpu_info gi;
    if (xs_gpu_open(0, &gi) != XS_OK) {
        fprintf(stderr, "test_tp: %s\n", xs_errmsg());
        XT_CHECK(0, "no GPU");
        return xt_done();
    }
    xs_gpu_report_header(stdout, &gi, argc, argv);
    xs_cublas *cb = NULL;
    if (xs_cublas_open(&cb) != XS_OK) {
        fprintf(stderr, "test_tp: %s\n", xs_errmsg());
        XT_CHECK(0, "cuBLAS unavailable: the references and the unfused baseline need it");
        return xt_done();
    }
    static const tcase cases[] = {
        {XS_TP_GEMM_RS, 512, 320, 144, 2, 5},   /* ragged n, K = 72 (a partial k-tile) */
        {XS_TP_GEMM_RS, 1024, 264, 256, 4, 3},  /* 2 row blocks per owner, ragged n */
        {XS_TP_AG_GEMM, 512, 400, 136, 2, 4},   /* n/P = 200: one ragged tile */
        {XS_TP_AG_GEMM, 1024, 288, 520, 4, 6},  /* 5 chunks per shard, the last partial */
        {XS_TP_MLP, 512, 136, 192, 2, 5},       /* I/P = 96: GEMM 2 K not a multiple of 64 */
        {XS_TP_MLP, 1024, 264, 512, 4, 7},      /* 3 chunks per shard */
        {XS_TP_MLP, 1024, 128, 512, 8, 9},      /* 8 ranks, one row block each */
        {XS_TP_GEMM_RS, 2048, 1024, 512, 2, 0}, /* a full grid */
        {XS_TP_MLP, 2048, 512, 1024, 4, 0},     /* a full grid */
    };
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < ncases; i++) {
        if (quick && i >= 7)
            break;
        run_case(&cases[i], &gi, cb);
    }
    xs_cublas_close(cb);
    XS_CHECK_CU(cudaDeviceSynchronize());
    return xt_done();
}
