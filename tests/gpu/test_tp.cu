// SPDX-License-Identifier: Apache-2.0
/*
 * test_tp.cu - tensor parallelism (cuda/tp/tp.h) on small odd shapes against a CPU fp64 reference:
 * fused GEMM + reduce-scatter, all-gather + GEMM and the MLP block, naive and shaped orders,
 * local control and virtual peers (rank 0 in HBM, ranks 1..P-1 in pinned host memory), few
 * CTAs (many steps, cross-CTA waits) and a full grid. Every byte sent to a host window is read
 * back by the CPU and compared (pushed shards exactly, partial sums within tolerance), every
 * signal carries the launch's epoch, this rank's reduced rows match the fp64 sum of every
 * source's partial. A missed signal (reduce-scatter tile, all-gather chunk, GEMM1 row-block
 * count) must end the kernel with a one-line XS_ETIMEOUT within its bound, and the context must
 * work again afterwards. Bad shapes are refused with one line. Three orders run per case: naive,
 * shaped (stores after each tile) and streamed (remote tiles staged and streamed through the
 * CTA's next main loop, pushes through their tile's); the faults run in both shaped orders.
 * CPU only, before any GPU work: every order the bench can build for the two shapes that failed
 * on the first H200 run (and one per operation at 16 peers) holds the task-list invariants
 * (xs_tp_order_check), and the checker refuses broken lists. Upload stress: launches right after
 * each re-upload of a multi-page list, every one checked (task hash, outputs bitwise).
 *
 * Tolerances (bf16 outputs of fp32 accumulation, inputs O(1)): element |got - ref| <=
 * 2^-7 |ref| + 0.02 rms(ref); relative Frobenius error <= 4e-3 (partials, GEMM outputs),
 * <= 6e-3 (reduced rows: P bf16 partials summed, then rounded).
 *
 * Every case runs twice: on the mma.sync engine (cuda/gemm.cuh, the default) and on the sm90
 * engine (cuda/gemm_sm90.cuh, xs_tp_set_engine; compute capability 9.0 only), same checks and
 * tolerances; the sm90 engine does not stream stores, so its second shaped order is another
 * stored one (f0.6/b0), its ring order is stored, and a streamed order must be refused.
 *
 * Slot layouts (xs_tp_set_slot_layout): every gemm_rs and mlp case runs again with tile-major
 * reduce-scatter slots, set before the first run, on both engines (--quick: the first gemm_rs
 * and the first mlp case; --tiny: none), with the same checks - every byte at the destination
 * read back in that layout; then it switches to row-major and back between fused runs (what
 * `bench tp --slots both` does), each run checked. CPU only, before any GPU work: the tile-major
 * addressing (xs_tp_slot_index / xs_tp_slot_tile) is a bijection onto the slot with every tile
 * one contiguous run, for ragged and non-ragged widths, and row-major is the identity.
 *
 * Couriers (sm90 only; run_couriers): every case with a reduce-scatter or an all-gather runs the
 * naive and the front-loaded shaped order again with 2 and 4 courier CTAs (the couriers push
 * the all-gather chunks and carry the remote reduce-scatter tiles), same checks, and the
 * destinations bitwise equal to the default kernel's run; an all-gather case also misses a
 * courier's chunk (one line within the bound, then a clean run).
 *
 * usage: test_tp [--quick | --tiny] [--sm90]   last line: "N passed, N failed"
 * --sm90: only the sm90 engine's cases (no CPU order checks, no upload stress); without it the
 * sm90 cases run in the full run only, not with --quick / --tiny (the sanitizer's cases)
 * --tiny: the sanitizer's racecheck case (tests/gpu/sanitize.sh): one small shape per operation,
 * 120 s bounds, no fault injection and no upload stress (their 50 ms and 2 s bounds measure
 * timing, which racecheck slows 10-100x, past the bound of a wait)
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
#include "tp/tp.h"

#include <cuda_bf16.h>


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
        const xs_tp_layout l = xs_tp_get_slot_layout(t);
        r->y = (double *)malloc(ny * sizeof(double));
        for (size_t i = 0; i < ny; i++) {
            const size_t j = xs_tp_slot_index(l, in->rs_n, (int)(i / in->rs_n),
                                              (int)(i % in->rs_n));
            double v = r->part[(size_t)r->me * ny + i];
            for (int q = 0; q < P; q++)
                if (q != r->me)
                    v += bf(slots[(size_t)q * ny + j]);
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

/* The destination-side checks of one fused run, CPU fp64 (the slots read in the context's
 * layout). */
static void check_fused(xs_tp *t, const cref *r, const char *name, const char *variant)
{
    const xs_tp_info *in = &r->in;
    const int P = r->s.peers, me = r->me;
    const xs_tp_layout l = xs_tp_get_slot_layout(t);
    xs_tp_bufs b;
    xs_tp_get_bufs(t, &b);
    double sent = 0;
    uint16_t *rows = (uint16_t *)malloc(in->slot_bytes + 2); /* one slot, row-major */
    if (!rows) {
        fprintf(stderr, "test_tp: out of host memory\n");
        exit(1);
    }
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
            const uint16_t *slot = (const uint16_t *)(w + in->rs_off + (size_t)me * in->slot_bytes);
            for (int i = 0; i < in->rs_rows; i++)
                for (int j = 0; j < in->rs_n; j++)
                    rows[(size_t)i * in->rs_n + j] = slot[xs_tp_slot_index(l, in->rs_n, i, j)];
            const uint16_t *got = rows;
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
    free(rows);
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

static int g_tiny; /* --tiny */

/* After a switch of the context's slot layout: both fused orders of slots 0 and 1, each
 * checked by the library and against the reference, then a local run on `local_slot`, checked
 * by the library. */
static void runs_after_switch(xs_tp *t, const cref *r, xs_tp_run_opts ro, cudaStream_t st,
                              const char *name, const char *const *vname, const char *v,
                              double bytes, int local_slot)
{
    float ms = 0;
    ro.local = 0;
    for (int slot = 0; slot < 2; slot++) {
        XT_CHECK(xs_tp_run(t, slot, &ro, st, &ms) == XS_OK, "%s %s %s: %s", name, v,
                 vname[slot], xs_errmsg());
        lib_verify(t, name, v, 1, bytes);
        check_fused(t, r, name, v);
    }
    ro.local = 1;
    XT_CHECK(xs_tp_run(t, local_slot, &ro, st, &ms) == XS_OK, "%s %s local: %s", name, v,
             xs_errmsg());
    lib_verify(t, name, v, 0, 0);
}

/* What a fused run delivered, for a bitwise comparison of two runs: this rank's partial slot
 * and shard bytes at every other rank's (host) window, its reduced rows and its GEMM 0 output.
 * Caller frees. */
static unsigned char *snap_dest(xs_tp *t, const xs_tp_info *in, int me, int P, int m,
                                size_t *len)
{
    xs_tp_bufs b;
    xs_tp_get_bufs(t, &b);
    const size_t per = (in->rs_gemm >= 0 ? in->slot_bytes : 0) + (in->ag ? in->shard_bytes : 0);
    const size_t ny = in->rs_gemm >= 0 ? (size_t)in->rs_rows * in->rs_n * 2 : 0;
    const size_t no = b.out0 ? (size_t)m * in->out_n[0] * 2 : 0;
    *len = (size_t)P * per + ny + no;
    unsigned char *v = (unsigned char *)calloc(*len + 1, 1);
    if (!v)
        return NULL;
    for (int q = 0; q < P; q++) {
        if (q == me || !b.host[q])
            continue;
        const char *w = (const char *)b.host[q];
        unsigned char *o = v + (size_t)q * per;
        if (in->rs_gemm >= 0) {
            memcpy(o, w + in->rs_off + (size_t)me * in->slot_bytes, in->slot_bytes);
            o += in->slot_bytes;
        }
        if (in->ag)
            memcpy(o, w + (size_t)me * in->shard_bytes, in->shard_bytes);
    }
    if (ny)
        XS_CHECK_CU(cudaMemcpy(v + (size_t)P * per, b.y, ny, cudaMemcpyDeviceToHost));
    if (no)
        XS_CHECK_CU(cudaMemcpy(v + (size_t)P * per + ny, b.out0, no, cudaMemcpyDeviceToHost));
    return v;
}

/* Split first steps (gemm_rs with C couriers; xs_tp_pace.split, docs/TP.md "Split first
 * steps"): the front order with its head split in 2, 4 and 8 k-parts (slots 5-7), run fused and
 * local, each checked by the library (split tiles against the fp32 reference within the
 * tolerance, every other tile bitwise against the expectation) and the fused run against the
 * reference here; the number of 16-byte units that differ from the whole-tile run is printed
 * (different sums, so some may). A part that never raises its flag (XS_TP_FAULT_SPLIT) ends
 * the run with one line naming the split wait within its bound, then a clean run. */
static void run_split(xs_tp *t, const cref *r, const xs_tp_costs *cost, xs_tp_run_opts ro,
                      cudaStream_t st, const char *name, double bytes, int C,
                      const xs_profile *prof)
{
    const xs_tp_info *in = &r->in;
    const int P = r->s.peers;
    float ms = 0;
    size_t n0 = 0, n1 = 0;
    ro.local = 0;
    XT_CHECK(xs_tp_run(t, 4, &ro, st, &ms) == XS_OK, "%s: %d couriers, front: %s", name, C,
             xs_errmsg());
    unsigned char *whole = snap_dest(t, in, r->me, P, r->s.m, &n0);
    for (int sp = 2; sp <= 8 && whole; sp *= 2) {
        const int slot = sp == 2 ? 5 : sp == 4 ? 6 : 7;
        char v[96];
        snprintf(v, sizeof v, "front split %d, %d couriers", sp, C);
        xs_tp_pace pace;
        xs_tp_pace_front(&pace);
        pace.split = sp;
        if (xs_tp_order_shaped(xs_tp_plan_of(t), slot, &pace, cost, prof) != XS_OK ||
            xs_tp_order_check(xs_tp_plan_of(t), slot) != XS_OK) {
            XT_CHECK(0, "%s %s: order: %s", name, v, xs_errmsg());
            continue;
        }
        const xs_tp_task *x;
        const int n = xs_tp_order_get(xs_tp_plan_of(t), slot, &x);
        int parts = 0, tiles = 0;
        for (int i = 0; i < n; i++)
            if (x[i].kind & XS_TP_K_SPLIT) {
                parts++;
                tiles += XS_TP_SPLIT_PART(&x[i]) == XS_TP_SPLIT_PARTS(&x[i]) - 1;
            }
        XT_CHECK(xs_tp_run(t, slot, &ro, st, &ms) == XS_OK, "%s %s: %s", name, v, xs_errmsg());
        lib_verify(t, name, v, 1, bytes);
        check_fused(t, r, name, v);
        unsigned char *got = snap_dest(t, in, r->me, P, r->s.m, &n1);
        long diff = 0;
        for (size_t u = 0; got && n1 == n0 && u + 16 <= n0; u += 16)
            diff += memcmp(got + u, whole + u, 16) != 0;
        XT_CHECK(got && n1 == n0, "%s %s: destinations", name, v);
        free(got);
        ro.local = 1;
        XT_CHECK(xs_tp_run(t, slot, &ro, st, &ms) == XS_OK, "%s %s local: %s", name, v,
                 xs_errmsg());
        lib_verify(t, name, v, 0, 0);
        ro.local = 0;
        printf("ok %s %s: %d split tiles in %d parts, fused and local verified; %ld of %zu "
               "16-byte units differ from the whole-tile run (other sums)\n", name, v, tiles,
               parts, diff, n0 / 16);
        if (tiles > 0 && !g_tiny) {
            xs_tp_run_opts fo = ro;
            fo.fault = XS_TP_FAULT_SPLIT;
            fo.timeout_ns = 50000000ull; /* 50 ms */
            const double t0 = xs_now_s();
            const xs_status e = xs_tp_run(t, slot, &fo, st, &ms);
            const double dt = xs_now_s() - t0;
            XT_CHECK(e == XS_ETIMEOUT && !strchr(xs_errmsg(), '\n') &&
                         strstr(xs_errmsg(), "split") && dt < 2.05,
                     "%s %s, a missing part: status %s in %.3f s (%s)", name, v,
                     xs_status_name(e), dt, xs_errmsg());
            printf("ok %s %s, a missing part -> %.3f s: %s\n", name, v, dt, xs_errmsg());
            XT_CHECK(xs_tp_run(t, slot, &ro, st, &ms) == XS_OK, "%s %s after a fault: %s", name,
                     v, xs_errmsg());
            lib_verify(t, name, v, 1, bytes);
        }
    }
    XT_CHECK(whole != NULL, "%s split: out of host memory", name);
    free(whole);
}

/* Couriers (sm90; xs_tp_set_couriers, docs/TP.md "Couriers (sm90)"): with C = 2 and 4 courier
 * CTAs the naive and the front-loaded shaped order (slots 3, 4; pushes by the couriers, remote
 * tiles through the outbox), each fused run checked by the library, against the reference and
 * bitwise against the default kernel's naive run (slot 0) just before; for an all-gather a
 * courier's missed chunk (XS_TP_FAULT_AG_FLAG: the couriers honour the hook) ends the run with
 * one line within its bound. The count goes back to 0. */
static void run_couriers(xs_tp *t, const cref *r, const xs_tp_costs *cost, xs_tp_run_opts ro,
                         cudaStream_t st, const char *name, double bytes, int grid)
{
    const xs_tp_info *in = &r->in;
    const int P = r->s.peers;
    if (in->rs_gemm < 0 && !(in->ag && P > 1))
        return;
    xs_profile prof;
    xs_profile_default(&prof);
    float ms = 0;
    ro.local = 0;
    XT_CHECK(xs_tp_run(t, 0, &ro, st, &ms) == XS_OK, "%s couriers: default naive: %s", name,
             xs_errmsg());
    size_t n0 = 0, n1 = 0;
    unsigned char *want = snap_dest(t, in, r->me, P, r->s.m, &n0);
    static const int counts[2] = {2, 4};
    for (int ci = 0; ci < 2 && want; ci++) {
        const int C = counts[ci];
        if (C >= grid)
            continue;
        char v[96];
        XT_CHECK(xs_tp_set_couriers(t, C) == XS_OK, "%s: %d couriers: %s", name, C, xs_errmsg());
        xs_tp_pace front;
        xs_tp_pace_front(&front);
        XT_CHECK(xs_tp_order_naive(xs_tp_plan_of(t), 3) == XS_OK && xs_tp_order_check(xs_tp_plan_of(t), 3) == XS_OK &&
                     xs_tp_order_shaped(xs_tp_plan_of(t), 4, &front, cost, &prof) == XS_OK &&
                     xs_tp_order_check(xs_tp_plan_of(t), 4) == XS_OK,
                 "%s: %d couriers: orders: %s", name, C, xs_errmsg());
        for (int slot = 3; slot < 5; slot++) {
            const int *w = NULL;
            const int nw = xs_tp_order_walk(xs_tp_plan_of(t), slot, &w), np = xs_tp_order_walk_pushes(xs_tp_plan_of(t), slot);
            XT_CHECK(xs_tp_order_couriers(xs_tp_plan_of(t), slot) == C &&
                         np == (in->ag && P > 1 ? (P - 1) * in->ag_chunks : 0) && nw >= np,
                     "%s: %d couriers slot %d: walk %d entries, %d pushes", name, C, slot, nw, np);
            snprintf(v, sizeof v, "%s, %d couriers", slot == 3 ? "naive" : "shaped front", C);
            XT_CHECK(xs_tp_run(t, slot, &ro, st, &ms) == XS_OK, "%s %s: %s", name, v,
                     xs_errmsg());
            lib_verify(t, name, v, 1, bytes);
            check_fused(t, r, name, v);
            unsigned char *got = snap_dest(t, in, r->me, P, r->s.m, &n1);
            XT_CHECK(got && n1 == n0 && !memcmp(got, want, n0),
                     "%s %s: destinations differ from the default kernel's run", name, v);
            free(got);
            printf("ok %s %s: %d walk entries (%d pushes), destinations bit-identical to the "
                   "default kernel's, %.1f us\n", name, v, nw, np, ms * 1e3);
        }
        if (in->rs_gemm >= 0 && r->s.op == XS_TP_GEMM_RS && P > 1)
            run_split(t, r, cost, ro, st, name, bytes, C, &prof);
        if (in->ag && P > 1 && !g_tiny) {
            xs_tp_run_opts fo = ro;
            fo.fault = XS_TP_FAULT_AG_FLAG;
            fo.timeout_ns = 50000000ull; /* 50 ms */
            const double t0 = xs_now_s();
            const xs_status e = xs_tp_run(t, 4, &fo, st, &ms);
            const double dt = xs_now_s() - t0;
            XT_CHECK(e == XS_ETIMEOUT && !strchr(xs_errmsg(), '\n') && dt < 2.05,
                     "%s: %d couriers, a missed chunk: status %s in %.3f s (%s)", name, C,
                     xs_status_name(e), dt, xs_errmsg());
            printf("ok %s: %d couriers, a missed chunk -> %.3f s: %s\n", name, C, dt, xs_errmsg());
            XT_CHECK(xs_tp_run(t, 4, &ro, st, &ms) == XS_OK, "%s: %d couriers after a fault: %s",
                     name, C, xs_errmsg());
            lib_verify(t, name, "couriers, after a fault", 1, bytes);
        }
    }
    XT_CHECK(want != NULL, "%s couriers: out of host memory", name);
    free(want);
    XT_CHECK(xs_tp_set_couriers(t, 0) == XS_OK, "%s: 0 couriers: %s", name, xs_errmsg());
}

static void run_case(const tcase *tc, const xs_gpu_info *gi, xs_cublas *cb, int quick,
                     xs_tp_engine engine, xs_tp_layout layout)
{
    char name[160];
    cname(tc, name, sizeof name);
    const int sm90 = engine == XS_TP_ENGINE_SM90;
    if (sm90) /* the mma cases keep their names */
        snprintf(name + strlen(name), sizeof name - strlen(name), " engine=sm90");
    if (layout != XS_TP_LAYOUT_ROW) /* so do the row-major ones */
        snprintf(name + strlen(name), sizeof name - strlen(name), " slots=%s",
                 xs_tp_layout_name(layout));
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
    {
        xs_status e = xs_tp_set_engine(t, engine);
        XT_CHECK(e == XS_OK && xs_tp_get_engine(t) == engine, "%s: set engine: %s", name,
                 xs_errmsg());
        if (e != XS_OK) {
            xs_tp_destroy(t);
            xs_win_close(ws);
            return;
        }
        e = xs_tp_set_slot_layout(t, layout);
        XT_CHECK(e == XS_OK && xs_tp_get_slot_layout(t) == layout, "%s: set slot layout: %s",
                 name, xs_errmsg());
        if (e != XS_OK) {
            xs_tp_destroy(t);
            xs_win_close(ws);
            return;
        }
    }
    cref r;
    build_ref(t, &s, tab->rank, &r);
    const double bytes = in.ag_remote_bytes + in.rs_remote_bytes;
    cudaStream_t st;
    XS_CHECK_CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    xs_tp_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.timeout_ns = g_tiny ? 120000000000ull : 2000000000ull;
    float ms = 0;

    XT_CHECK(xs_tp_reference(t, cb) == XS_OK, "%s: reference: %s", name, xs_errmsg());
    XT_CHECK(xs_tp_order_naive(xs_tp_plan_of(t), 0) == XS_OK, "%s: naive: %s", name, xs_errmsg());
    /* local control: outputs against fp64, then the library's expectation */
    ro.local = 1;
    XT_CHECK(xs_tp_run(t, 0, &ro, st, &ms) == XS_OK, "%s: local run: %s", name, xs_errmsg());
    lib_verify(t, name, "local", 0, 0);
    {
        /* the engine is fixed once a run became the expectation */
        const xs_tp_engine other = sm90 ? XS_TP_ENGINE_MMA : XS_TP_ENGINE_SM90;
        XT_CHECK(xs_tp_set_engine(t, other) == XS_EINVAL && !strchr(xs_errmsg(), '\n') &&
                     xs_tp_get_engine(t) == engine,
                 "%s: engine changed after a run (%s)", name, xs_errmsg());
    }
    xs_tp_costs cost;
    XT_CHECK(xs_tp_costs_of_last(t, &cost) == XS_OK, "%s: costs: %s", name, xs_errmsg());
    XT_CHECK(cost.tile_ns[0] > 0 && (in.ngemm < 2 || cost.tile_ns[1] > 0), "%s: tile costs %g %g",
             name, cost.tile_ns[0], cost.tile_ns[1]);

    /* fused: naive (slot 0), shaped with stores after each tile (slot 1) and shaped with the
     * stores streamed through the main loops (slot 2: staged remote tiles, streamed pushes);
     * the sm90 engine does not stream: slot 2 is then a second stored shaped order (front-
     * loaded, no burst limit) */
    xs_profile prof;
    xs_profile_default(&prof);
    static const char *const vname_mma[3] = {"naive", "shaped", "streamed"};
    static const char *const vname_sm90[3] = {"naive", "shaped", "shaped f0.6/b0"};
    const char *const *vname = sm90 ? vname_sm90 : vname_mma;
    xs_tp_pred pred;
    for (int sp = 0; sp < 2; sp++) {
        static const xs_tp_pace front = {0.6, 0, 0, 2, 0, 0};
        xs_tp_pace pace = {0.8, 1.5, 0, 2, sp, 0};
        if (sm90 && sp)
            pace = front;
        XT_CHECK(xs_tp_order_shaped(xs_tp_plan_of(t), 1 + sp, &pace, &cost, &prof) == XS_OK, "%s: %s: %s",
                 name, vname[1 + sp], xs_errmsg());
        XT_CHECK(xs_tp_order_check(xs_tp_plan_of(t), 1 + sp) == XS_OK, "%s: %s order: %s", name, vname[1 + sp],
                 xs_errmsg());
        XT_CHECK(xs_tp_predict(xs_tp_plan_of(t), 1 + sp, &prof, &cost, 1, &pred) == XS_OK &&
                     pred.model_ns >= pred.ideal_ns && pred.ideal_ns > 0,
                 "%s: predict %s: %s (%g, %g)", name, vname[1 + sp], xs_errmsg(), pred.model_ns,
                 pred.ideal_ns);
    }
    XT_CHECK(xs_tp_order_check(xs_tp_plan_of(t), 0) == XS_OK, "%s: naive order: %s", name, xs_errmsg());
    if (sm90) {
        /* a streamed order is refused with one line, before anything is launched */
        const xs_tp_pace streamed = {0.8, 1.5, 0, 2, 1, 0};
        XT_CHECK(xs_tp_order_shaped(xs_tp_plan_of(t), 3, &streamed, &cost, &prof) == XS_OK, "%s: streamed: %s",
                 name, xs_errmsg());
        xs_tp_order_info oi;
        XT_CHECK(xs_tp_order_stats(xs_tp_plan_of(t), 3, &oi) == XS_OK, "%s: stats: %s", name, xs_errmsg());
        if (oi.deferred + oi.spread > 0) {
            xs_status e = xs_tp_run(t, 3, &ro, st, &ms);
            XT_CHECK(e == XS_EINVAL && !strchr(xs_errmsg(), '\n'),
                     "%s: a streamed order ran on the sm90 engine (%s: %s)", name,
                     xs_status_name(e), xs_errmsg());
            printf("ok %s: streamed order refused: %s\n", name, xs_errmsg());
        }
    } else {
        /* the streamed order streams something wherever there is something to stream */
        xs_tp_order_info oi;
        XT_CHECK(xs_tp_order_stats(xs_tp_plan_of(t), 2, &oi) == XS_OK, "%s: stats: %s", name, xs_errmsg());
        XT_CHECK(oi.pushes == 0 || oi.spread > 0, "%s: streamed order: %d pushes, none streamed",
                 name, oi.pushes);
        printf("ok %s: streamed order: %d of %d remote tiles staged, %d of %d pushes streamed\n",
               name, oi.deferred, oi.remote_tiles, oi.spread, oi.pushes);
    }
    ro.local = 0;
    for (int slot = 0; slot < 3; slot++)
        for (int rep = 0; rep < (quick ? 1 : 2); rep++) {
            XT_CHECK(xs_tp_run(t, slot, &ro, st, &ms) == XS_OK, "%s %s: %s", name, vname[slot],
                     xs_errmsg());
            lib_verify(t, name, vname[slot], 1, bytes);
            check_fused(t, &r, name, vname[slot]);
        }
    ro.local = 1;
    for (int slot = 1; slot < 3; slot++) {
        XT_CHECK(xs_tp_run(t, slot, &ro, st, &ms) == XS_OK, "%s: local %s: %s", name, vname[slot],
                 xs_errmsg());
        lib_verify(t, name, slot == 1 ? "local shaped" : "local streamed", 0, 0);
    }
    ro.local = 0;
    if (in.rs_gemm >= 0) {
        /* the ring order (remote owners one after the other, streamed), fused and local, in
         * slot 1; then slot 1 gets its shaped order back for the fault runs */
        const xs_tp_pace ring = {0.3, 0, 0, 2, sm90 ? 0 : 1, 1}, back = {0.8, 1.5, 0, 2, 0, 0};
        XT_CHECK(xs_tp_order_shaped(xs_tp_plan_of(t), 1, &ring, &cost, &prof) == XS_OK &&
                     xs_tp_order_check(xs_tp_plan_of(t), 1) == XS_OK,
                 "%s: ring order: %s", name, xs_errmsg());
        /* 0: fused, 1: local, 2: fused with every signal raised eagerly (eager_flags) */
        static const char *const rname[3] = {"ring", "local ring", "ring, eager signals"};
        for (int v = 0; v < 3; v++) {
            ro.local = v == 1;
            ro.eager_flags = v == 2;
            XT_CHECK(xs_tp_run(t, 1, &ro, st, &ms) == XS_OK, "%s %s: %s", name, rname[v],
                     xs_errmsg());
            lib_verify(t, name, rname[v], v != 1, v == 1 ? 0 : bytes);
            if (v != 1)
                check_fused(t, &r, name, rname[v]);
        }
        ro.local = 0;
        ro.eager_flags = 0;
        XT_CHECK(xs_tp_order_shaped(xs_tp_plan_of(t), 1, &back, &cost, &prof) == XS_OK, "%s: shaped: %s", name,
                 xs_errmsg());
    }

    if (layout != XS_TP_LAYOUT_ROW && in.rs_gemm >= 0) {
        /* switching between fused runs (bench tp --slots both): the held partials are
         * rewritten, values unchanged, so the same expectations hold in either layout */
        const xs_tp_layout seq[2] = {XS_TP_LAYOUT_ROW, layout};
        for (int k = 0; k < 2; k++) {
            char v[64];
            snprintf(v, sizeof v, "after a switch to %s slots", xs_tp_layout_name(seq[k]));
            XT_CHECK(xs_tp_set_slot_layout(t, seq[k]) == XS_OK &&
                         xs_tp_get_slot_layout(t) == seq[k],
                     "%s %s: %s", name, v, xs_errmsg());
            runs_after_switch(t, &r, ro, st, name, vname, v, bytes, 1);
            XT_CHECK(xs_tp_run_unfused(t, cb, st, &ms) == XS_OK, "%s %s unfused: %s", name, v,
                     xs_errmsg());
            lib_verify(t, name, v, 1, bytes);
        }
        printf("ok %s: fused, local and unfused runs right after switches to row and back\n",
               name);
    }

    if (sm90)
        run_couriers(t, &r, &cost, ro, st, name, bytes, grid);

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
    /* in both shaped orders (--quick: the streamed one): the streamed one also takes the path
     * where a CTA stores the transfers it holds before it blocks */
    for (int i = quick ? 1 : 0; !g_tiny && i < 2 * nf; i += quick ? 2 : 1) {
        const int slot = 1 + i % 2, f = faults[i / 2];
        xs_tp_run_opts fo = ro;
        fo.fault = f;
        fo.timeout_ns = 50000000ull; /* 50 ms */
        const double t0 = xs_now_s();
        xs_status e = xs_tp_run(t, slot, &fo, st, &ms);
        const double dt = xs_now_s() - t0;
        const char *msg = xs_errmsg();
        XT_CHECK(e == XS_ETIMEOUT, "%s %s fault %d: status %s (%s)", name, vname[slot], f,
                 xs_status_name(e), msg);
        XT_CHECK(dt < 0.05 + 2.0, "%s %s fault %d: took %.3f s for a 0.05 s bound", name,
                 vname[slot], f, dt);
        XT_CHECK(strchr(msg, '\n') == NULL && strstr(msg, "waited longer than") != NULL,
                 "%s %s fault %d: message '%s'", name, vname[slot], f, msg);
        printf("ok %s %s fault %d -> %.3f s: %s\n", name, vname[slot], f, dt, msg);
        XT_CHECK(xs_tp_run(t, slot == 1 ? 0 : 2, &ro, st, &ms) == XS_OK, "%s after fault %d: %s",
                 name, f, xs_errmsg());
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

/* ---- slot layouts on the CPU (no GPU needed) ------------------------------------------------ */

/* xs_tp_slot_index: row-major is the identity; tile-major maps [rows, n] one to one onto
 * [0, rows n), each tile (tr, tc) onto the contiguous run [base, base + 128 w) in the order of
 * the flag index t = tr tiles_n + tc, its rows pitch = w apart (xs_tp_slot_tile). */
static void check_slot_layout(int rows, int n)
{
    const size_t ne = (size_t)rows * n;
    unsigned char *hit = (unsigned char *)calloc(ne, 1);
    if (!hit) {
        fprintf(stderr, "test_tp: out of host memory\n");
        exit(1);
    }
    long out = 0, twice = 0, row_bad = 0, tile_bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < n; c++) {
            row_bad += xs_tp_slot_index(XS_TP_LAYOUT_ROW, n, r, c) != (size_t)r * n + c;
            const size_t j = xs_tp_slot_index(XS_TP_LAYOUT_TILE, n, r, c);
            if (j >= ne)
                out++;
            else
                twice += hit[j]++ != 0;
        }
    long missed = 0;
    for (size_t j = 0; j < ne; j++)
        missed += !hit[j];
    const int tiles_n = (n + XS_TP_BN - 1) / XS_TP_BN;
    size_t next = 0; /* tiles in the order of t: each starts where the previous ended */
    for (int tr = 0; tr < rows / XS_TP_BM; tr++)
        for (int tc = 0; tc < tiles_n; tc++) {
            int pitch = 0;
            const size_t b = xs_tp_slot_tile(XS_TP_LAYOUT_TILE, n, tr, tc, &pitch);
            const int w = n - tc * XS_TP_BN < XS_TP_BN ? n - tc * XS_TP_BN : XS_TP_BN;
            tile_bad += b != next || pitch != w || (b * 2) % 16 != 0;
            for (int i = 0; i < XS_TP_BM; i++)
                for (int c = 0; c < w; c++)
                    tile_bad += xs_tp_slot_index(XS_TP_LAYOUT_TILE, n, tr * XS_TP_BM + i,
                                                 tc * XS_TP_BN + c) != b + (size_t)i * w + c;
            next = b + (size_t)XS_TP_BM * w;
        }
    XT_CHECK(out == 0 && twice == 0 && missed == 0 && row_bad == 0 && tile_bad == 0 &&
                 next == ne,
             "slot layout [%d, %d]: %ld outside, %ld twice, %ld missed, row %ld, tiles %ld, end "
             "%zu of %zu", rows, n, out, twice, missed, row_bad, tile_bad, next, ne);
    free(hit);
}

/* ---- task orders on the CPU (no GPU needed) ------------------------------------------------- */

/* Synthetic costs: a tile's time proportional to its K (the engine's rate), pushes and reductions
 * a few microseconds. The orders' structure, not their timing, is under test. */
static xs_tp_costs synth_costs(const xs_tp_info *in)
{
    xs_tp_costs c;
    memset(&c, 0, sizeof c);
    for (int g = 0; g < in->ngemm; g++)
        c.tile_ns[g] = 2.0 * XS_TP_BM * XS_TP_BN * in->gk[g] / 2.65e12 * 1e9 + 1000;
    c.push_ns = 1600;
    c.reduce_ns = 3000;
    return c;
}

/* Every order the bench can build for a shape (naive, the XS_TP_NCAND candidates) holds the
 * invariants. */
static void check_orders(const xs_tp_shape *s, int grid)
{
    char name[128];
    snprintf(name, sizeof name, "%s m=%d n=%d k=%d P=%d grid=%d", xs_tp_op_name(s->op), s->m,
             s->n, s->k, s->peers, grid);
    xs_tp_plan *pl = NULL;
    if (xs_tp_plan_create(s, 0, grid, &pl) != XS_OK) {
        XT_CHECK(0, "%s: plan context: %s", name, xs_errmsg());
        return;
    }
    xs_tp_info in;
    in = pl->in;
    const xs_tp_costs c = synth_costs(&in);
    xs_profile prof;
    xs_profile_default(&prof);
    XT_CHECK(xs_tp_order_naive(pl, 0) == XS_OK && xs_tp_order_check(pl, 0) == XS_OK,
             "%s naive: %s", name, xs_errmsg());
    xs_tp_pace cand[XS_TP_NCAND];
    const int n = xs_tp_candidates(0.9 * xs_capacity(&prof, grid), cand, XS_TP_NCAND);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const xs_tp_pace *p = &cand[i];
        if (xs_tp_order_shaped(pl, 1, p, &c, &prof) != XS_OK || xs_tp_order_check(pl, 1) != XS_OK) {
            bad++;
            XT_CHECK(0, "%s f%.2f b%.1f cap %.0f spread %d ring %d: %s", name, p->finish,
                     p->burst, p->cap_bytes, p->spread, p->ring, xs_errmsg());
        }
    }
    XT_CHECK(bad == 0, "%s: %d of %d shaped orders broken", name, bad, n);
    printf("ok %s: naive and %d shaped orders hold the invariants (%d tasks naive)\n", name, n,
           xs_tp_order_tasks(pl, 0));
    xs_tp_plan_destroy(pl);
}

/* The checker itself: each kind of broken list is refused with one line. */
static void check_checker(void)
{
    const xs_tp_shape s = {XS_TP_MLP, 1024, 264, 512, 4};
    xs_tp_plan *pl = NULL;
    if (xs_tp_plan_create(&s, 0, 7, &pl) != XS_OK) {
        XT_CHECK(0, "plan context: %s", xs_errmsg());
        return;
    }
    xs_tp_info in;
    in = pl->in;
    const xs_tp_costs c = synth_costs(&in);
    xs_profile prof;
    xs_profile_default(&prof);
    const xs_tp_pace pace = {0.8, 1.5, 0, 2, 1};
    XT_CHECK(xs_tp_order_shaped(pl, 0, &pace, &c, &prof) == XS_OK, "shaped: %s", xs_errmsg());
    const xs_tp_task *v0;
    const int n = xs_tp_order_get(pl, 0, &v0);
    xs_tp_task *v = (xs_tp_task *)malloc((size_t)n * sizeof *v);
    if (!v || n < 1) {
        XT_CHECK(0, "no order to break");
        free(v);
        xs_tp_plan_destroy(pl);
        return;
    }
    int first1 = -1, last0 = -1, own = -1, red = -1, defer = -1, spread = -1, remote0 = -1;
    const int rbpr = in.rs_rows / XS_TP_BM;
    for (int i = 0; i < n; i++) {
        const xs_tp_task *x = &v0[i];
        if ((x->kind & XS_TP_K_TILE) && x->gemm == 1 && x->tm == 0 && first1 < 0)
            first1 = i;
        if ((x->kind & XS_TP_K_TILE) && x->gemm == 0 && x->tm == 0)
            last0 = i;
        if ((x->kind & XS_TP_K_TILE) && x->gemm == 1 && x->tm == 0 && x->tn == 0)
            own = i;
        if ((x->kind & XS_TP_K_REDUCE) && x->red_t == 0)
            red = i;
        if ((x->kind & XS_TP_K_DEFER) && defer < 0)
            defer = i;
        if ((x->kind & XS_TP_K_SPREAD) && spread < 0)
            spread = i;
        if ((x->kind & XS_TP_K_TILE) && x->gemm == 0 && x->tm / rbpr != 0 && remote0 < 0)
            remote0 = i;
    }
    XT_CHECK(first1 > last0 && own >= 0 && red > own && defer >= 0 && spread >= 0 &&
                 remote0 > 0,
             "order landmarks %d %d %d %d %d %d %d", first1, last0, own, red, defer, spread,
             remote0);
    struct {
        const char *what, *expect;
    } cases[] = {
        {"a task zeroed", "missing"},
        {"a tile twice", "also at"},
        {"a GEMM 2 tile before its row block", "before the last GEMM 1 tile"},
        {"a reduction before its own tile", "before the tile itself"},
        {"staging on this rank's own tile", "not a remote owner"},
        {"a streamed push with no tile", "no tile to ride on"},
        {"a tile outside the problem", "outside the problem"},
        {"a 4 KB page of tasks zeroed", "missing"},
        {"a tile on another rank's shard before its chunks", "before the push of its chunks"},
    };
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        memcpy(v, v0, (size_t)n * sizeof *v);
        switch (k) {
        case 0: memset(&v[last0], 0, sizeof v[0]); break;
        case 1: v[first1 == 0 ? 1 : 0] = v[first1]; break;
        case 2: {
            const xs_tp_task x = v[first1];
            v[first1] = v[last0];
            v[last0] = x;
            break;
        }
        case 3: {
            for (int i = 0; i < n; i++) /* (a staged tile before the moved reduction would be
                                           reported first) */
                v[i].kind &= ~XS_TP_K_DEFER;
            const xs_tp_task x = v[red];
            v[red] = v[own];
            v[own] = x;
            break;
        }
        case 4: v[own].kind |= XS_TP_K_DEFER; break;
        case 5: v[spread].kind &= ~XS_TP_K_TILE; break;
        case 6: v[defer].tn = in.tiles_n[v[defer].gemm]; break;
        case 7: memset(v, 0, (size_t)(n < 128 ? n : 128) * sizeof *v); break;
        case 8: {
            for (int i = 0; i < n; i++) /* (see case 3) */
                v[i].kind &= ~XS_TP_K_DEFER;
            const xs_tp_task x = v[0];
            v[0] = v[remote0];
            v[remote0] = x;
            break;
        }
        }
        XT_CHECK(xs_tp_order_set(pl, 1, v, n) == XS_OK, "set: %s", xs_errmsg());
        const xs_status e = xs_tp_order_check(pl, 1);
        const char *msg = xs_errmsg();
        XT_CHECK(e == XS_EINVAL && strstr(msg, cases[k].expect) && !strchr(msg, '\n'),
                 "broken order (%s) not refused as expected: %s (%s)", cases[k].what,
                 xs_status_name(e), msg);
    }
    memcpy(v, v0, (size_t)n * sizeof *v);
    XT_CHECK(xs_tp_order_set(pl, 1, v, n) == XS_OK && xs_tp_order_check(pl, 1) == XS_OK,
             "the unbroken copy: %s", xs_errmsg());
    printf("ok order checker refuses 9 kinds of broken lists, accepts the unbroken one\n");
    free(v);
    xs_tp_plan_destroy(pl);
}

/* ---- upload stress: a launch right after each upload of a multi-page list ------------------ */

/* The first H200 run read a partly stale task list twice (uploaded by a cudaMemcpy on the legacy
 * stream, launched on a non-blocking one). Here: one mid-size problem, a full grid, a list of ~8
 * pages re-uploaded before every launch (orders alternate in one slot), every launch checked by
 * the kernel's task hash and every output bitwise against the first verified run. */
static void run_upload_stress(const xs_gpu_info *gi, xs_cublas *cb, int reps)
{
    const xs_tp_shape s = {XS_TP_MLP, 8192, 1024, 4096, 4};
    xs_tp_info in;
    XT_CHECK(xs_tp_info_of(&s, &in) == XS_OK, "stress shape: %s", xs_errmsg());
    xs_win_opts wo;
    memset(&wo, 0, sizeof wo);
    wo.target = XS_TARGET_VIRTUAL;
    wo.virtual_peers = s.peers;
    wo.bytes = in.window_bytes;
    wo.nflags = in.nflags;
    wo.device = gi->device;
    xs_winset *ws = NULL;
    if (xs_win_open(&wo, &ws) != XS_OK) {
        XT_CHECK(0, "stress windows: %s", xs_errmsg());
        return;
    }
    xs_tp *t = NULL;
    if (xs_tp_create(&s, xs_win_table(ws), gi->sm_count, 777u, &t) != XS_OK) {
        XT_CHECK(0, "stress create: %s", xs_errmsg());
        xs_win_close(ws);
        return;
    }
    cudaStream_t st;
    XS_CHECK_CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    xs_tp_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.timeout_ns = 2000000000ull;
    ro.local = 1;
    float ms = 0;
    const double bytes = in.ag_remote_bytes + in.rs_remote_bytes;
    XT_CHECK(xs_tp_reference(t, cb) == XS_OK, "stress reference: %s", xs_errmsg());
    XT_CHECK(xs_tp_order_naive(xs_tp_plan_of(t), 0) == XS_OK, "stress naive: %s", xs_errmsg());
    XT_CHECK(xs_tp_run(t, 0, &ro, st, &ms) == XS_OK, "stress local: %s", xs_errmsg());
    lib_verify(t, "stress", "local", 0, 0);
    xs_tp_costs cost;
    XT_CHECK(xs_tp_costs_of_last(t, &cost) == XS_OK, "stress costs: %s", xs_errmsg());
    xs_profile prof;
    xs_profile_default(&prof);
    int fails = 0;
    for (int i = 0; i < reps; i++) {
        /* a new list in slot 1 every time: naive, shaped, streamed (spread 1 and 2), ... */
        const xs_tp_pace pace = {i % 2 ? 0.6 : 0.95, 1.5, 0, 2, (i / 2) % 3};
        const xs_status e = i % 3 == 0 ? xs_tp_order_naive(xs_tp_plan_of(t), 1)
                                       : xs_tp_order_shaped(xs_tp_plan_of(t), 1, &pace, &cost, &prof);
        XT_CHECK(e == XS_OK && xs_tp_order_check(xs_tp_plan_of(t), 1) == XS_OK, "stress order %d: %s", i,
                 xs_errmsg());
        ro.local = i % 2;
        const xs_status r = xs_tp_run(t, 1, &ro, st, &ms);
        XT_CHECK(r == XS_OK, "stress launch %d (%s): %s", i, ro.local ? "local" : "fused",
                 xs_errmsg());
        xs_tp_check c;
        XT_CHECK(xs_tp_verify(t, &c) == XS_OK && c.ok, "stress launch %d: %s", i, c.what);
        if (!ro.local)
            XT_CHECK(c.remote_bytes == bytes, "stress launch %d: %.0f of %.0f bytes checked", i,
                     c.remote_bytes, bytes);
        fails += r != XS_OK || !c.ok;
    }
    printf("ok upload stress: %d launches right after a new %d-task list, %d failed\n", reps,
           xs_tp_order_tasks(xs_tp_plan_of(t), 1), fails);
    xs_tp_destroy(t);
    cudaStreamDestroy(st);
    xs_win_close(ws);
}

int main(int argc, char **argv)
{
    int quick = 0, only_sm90 = 0;
    static const struct option opts[] = {{"quick", no_argument, 0, 'q'},
                                         {"tiny", no_argument, 0, 't'},
                                         {"sm90", no_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    static const char usage[] = "usage: test_tp [--quick | --tiny] [--sm90]\n";
    int ch;
    while ((ch = getopt_long(argc, argv, "qtsh", opts, NULL)) != -1) {
        switch (ch) {
        case 'q': quick = 1; break;
        case 't': quick = g_tiny = 1; break;
        case 's': only_sm90 = 1; break;
        case 'h': printf("%s", usage); return 0;
        default: fprintf(stderr, "%s", usage); return 2;
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
    /* slot layouts, CPU only: the test cases' slots (ragged 320, 264, 136), whole tiles, one
     * narrow tile, and a model's (llama3-8b gemm_rs at P = 4: [2048, 4096]) */
    {
        static const int sl[][2] = {{256, 320}, {256, 264}, {128, 136}, {256, 128}, {1024, 1024},
                                    {128, 8},   {384, 776}, {2048, 4096}};
        const xs_tp_layout l0 = XS_TP_LAYOUT_ROW;
        xs_tp_layout lp;
        XT_CHECK(xs_tp_layout_parse("tile", &lp) == XS_OK && lp == XS_TP_LAYOUT_TILE &&
                     xs_tp_layout_parse("row", &lp) == XS_OK && lp == l0 &&
                     xs_tp_layout_parse("col", &lp) == XS_EINVAL && !strchr(xs_errmsg(), '\n'),
                 "slot layout names (%s)", xs_errmsg());
        for (size_t i = 0; i < sizeof sl / sizeof sl[0]; i++)
            check_slot_layout(sl[i][0], sl[i][1]);
        printf("ok slot layouts: tile-major a bijection with contiguous tiles on %zu shapes\n",
               sizeof sl / sizeof sl[0]);
    }
    /* task orders, CPU only: the checker, then the two shapes that failed on the first H200 run
     * (a zeroed page of the naive list left 128 GEMM 2 tiles undone; a missing GEMM 1 tile left
     * row block 16 short of its count) and one shape per operation at 16 peers */
    if (!only_sm90)
        check_checker();
    if (!only_sm90) {
        const xs_tp_shape big[] = {
            {XS_TP_MLP, 8192, 4096, 14336, 4},   /* llama3-8b, failed 1 */
            {XS_TP_MLP, 4096, 8192, 28672, 8},   /* llama3-70b, failed 2 */
            {XS_TP_GEMM_RS, 2048, 16384, 53248, 16},
            {XS_TP_AG_GEMM, 2048, 106496, 16384, 16},
            {XS_TP_MLP, 2048, 16384, 53248, 16},
        };
        for (int i = 0; i < (int)(sizeof big / sizeof big[0]); i++)
            if (!quick || i < 2)
                check_orders(&big[i], 132);
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
    /* the mma engine, then the same cases on the sm90 engine (compute capability 9.0 only;
     * skipped with a line elsewhere, a failure with --sm90) */
    int cc_major = 0, cc_minor = 0;
    XS_CHECK_CU(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, gi.device));
    XS_CHECK_CU(cudaDeviceGetAttribute(&cc_minor, cudaDevAttrComputeCapabilityMinor, gi.device));
    const int have_sm90 = cc_major == 9 && cc_minor == 0;
    /* --quick and --tiny are the sanitizer's cases (tests/gpu/sanitize.sh): racecheck cannot
     * follow TMA / mbarrier pipelines (it drowns cuBLAS's Hopper kernels in hazard reports), and
     * the sanitized budget is shared; there the sm90 cases run only when asked for */
    const int run_sm90 = have_sm90 && (only_sm90 || !quick);
    if (only_sm90)
        XT_CHECK(have_sm90, "--sm90: device %d has compute capability %d.%d, not 9.0", gi.device,
                 cc_major, cc_minor);
    else if (!have_sm90)
        printf("skip sm90 engine cases: compute capability %d.%d\n", cc_major, cc_minor);
    else if (!run_sm90)
        printf("skip sm90 engine cases: --quick / --tiny without --sm90\n");
    /* each engine: every case with row-major slots, then the reduce-scattering ones with
     * tile-major slots (--quick: the first gemm_rs and mlp; --tiny: none) */
    for (int e = only_sm90 ? 1 : 0; e < (run_sm90 ? 2 : 1); e++)
        for (int l = 0; l < 2; l++)
            for (int i = 0; i < ncases; i++) {
                if (quick && i >= 7)
                    break;
                if (g_tiny && i != 0 && i != 2 && i != 4) /* one gemm_rs, one ag_gemm, one mlp */
                    continue;
                if (l && (cases[i].op == XS_TP_AG_GEMM || g_tiny || (quick && i != 0 && i != 4)))
                    continue;
                run_case(&cases[i], &gi, cb, quick, e ? XS_TP_ENGINE_SM90 : XS_TP_ENGINE_MMA,
                         l ? XS_TP_LAYOUT_TILE : XS_TP_LAYOUT_ROW);
            }
    if (!g_tiny && !only_sm90)
        run_upload_stress(&gi, cb, quick ? 6 : 24);
    xs_cublas_close(cb);
    XS_CHECK_CU(cudaDeviceSynchronize());
    return xt_done();
}
