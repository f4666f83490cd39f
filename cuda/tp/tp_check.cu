// SPDX-License-Identifier: Apache-2.0
/*
 * tp/tp_check.cu - references and verification of the TP runs (cuda/tp/tp.h): fp32 cuBLAS
 * references, the exchange of expectations between real peers, and the destination-side checks
 * of a fused, local or unfused run - the bytes and signals at other ranks' host windows by the
 * CPU, this rank's outputs on the GPU, bitwise against the first verified local run or within
 * XS_TP_TOL_FROB / XS_TP_TOL_ROW of the reference (docs/TP.md "Verification and tolerance").
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvtx_launch.h"
#include "tp/tp_ctx.h"

/* ---- references -------------------------------------------------------------------------------- */

/* ref_y from this rank's fp32 partial and the other sources' bf16 partials of its rows: those
 * placed in its fused window (virtual peers), or, with real peers, those its local control
 * table holds (placed, then the sources' own after xs_tp_exchange_expectation). */
static xs_status tp_ref_y(xs_tp *t)
{
    const xs_tp_info *in = &t->pl.in;
    const size_t ny = (size_t)in->rs_rows * in->rs_n;
    const char *own = t->virt ? t->vt.data[t->pl.me] : t->lt.data[t->pl.me];
    XS_NVTX_LAUNCH("tp_ref_y_kernel",
                   tp_ref_y_kernel<<<tp_blocks(ny, 256), 256, 0, t->vstream>>>(
                       t->ref_part + (size_t)t->pl.me * ny, (const xs_bf16 *)(own + in->rs_off),
                       (int)t->pl.layout, t->pl.P, t->pl.me, in->rs_rows, in->rs_n, t->ref_y));
    XS_CU_LAUNCH();
    return XS_OK;
}

extern "C" xs_status xs_tp_reference(xs_tp *t, xs_cublas *cb)
{
    if (!cb)
        return xs_seterr(XS_EINVAL, "tp reference: no cuBLAS handle");
    const xs_tp_info *in = &t->pl.in;
    const size_t m = (size_t)t->pl.s.m;
    cudaStream_t s = t->vstream;
    const char *own = t->vt.data[t->pl.me];
    if (in->rs_gemm >= 0) {
        if (!t->ref_part)
            XS_CU(cudaMalloc((void **)&t->ref_part, m * in->rs_n * 4));
        if (!t->ref_y)
            XS_CU(cudaMalloc((void **)&t->ref_y, (size_t)in->rs_rows * in->rs_n * 4));
    }
    if (t->pl.s.op == XS_TP_AG_GEMM && !t->ref_out0)
        XS_CU(cudaMalloc((void **)&t->ref_out0, m * in->out_n[0] * 4));
    if (t->pl.s.op == XS_TP_MLP) {
        if (!t->ref_out0)
            XS_CU(cudaMalloc((void **)&t->ref_out0, m * in->out_n[0] * 4));
        if (!t->ref_tmp)
            XS_CU(cudaMalloc((void **)&t->ref_tmp, m * in->gn[0] * 4));
        if (!t->ref_h)
            XS_CU(cudaMalloc((void **)&t->ref_h, m * in->out_n[0] * 2));
    }
    switch (t->pl.s.op) {
    case XS_TP_GEMM_RS:
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->pl.s.m, in->gn[0], in->gk[0], t->a_rs, t->w[0], 1,
                                   t->ref_part, 1));
        break;
    case XS_TP_AG_GEMM:
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->pl.s.m, in->gn[0], in->gk[0], own, t->w[0], 1,
                                   t->ref_out0, 1));
        break;
    case XS_TP_MLP: {
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->pl.s.m, in->gn[0], in->gk[0], own, t->w[0], 1,
                                   t->ref_tmp, 1));
        const size_t nh = m * in->out_n[0];
        XS_NVTX_LAUNCH("tp_swiglu_kernel", tp_swiglu_kernel<float>
                       <<<tp_blocks(nh, 256), 256, 0, s>>>(t->ref_tmp, t->ref_h, t->ref_out0,
                                                           t->pl.s.m, in->gn[0]));
        XS_CU_LAUNCH();
        XS_TRY(xs_cublas_gemm_bf16(cb, s, t->pl.s.m, in->gn[1], in->gk[1], t->ref_h, t->w[1], 1,
                                   t->ref_part, 1));
        break;
    }
    }
    if (in->rs_gemm >= 0)
        XS_TRY(tp_ref_y(t));
    XS_CU(cudaStreamSynchronize(s));
    t->have_ref = 1;
    return XS_OK;
}

extern "C" xs_status xs_tp_exchange_expectation(xs_tp *t)
{
    const xs_tp_info *in = &t->pl.in;
    if (t->virt || in->rs_gemm < 0)
        return XS_OK;
    if (!t->have_exp || !t->exp_part)
        return xs_seterr(XS_EINVAL, "tp exchange: needs a verified first local run");
    if (!t->have_coll || !t->coll.alltoall)
        return xs_seterr(XS_EUNSUPPORTED, "tp exchange on real peers: no collectives were given "
                         "(xs_tp_set_coll)");
    const size_t ny = (size_t)in->rs_rows * in->rs_n;
    if (!t->exp_recv)
        XS_CU(cudaMalloc((void **)&t->exp_recv, (size_t)t->pl.P * ny * 2));
    /* exp_part slot r: what this rank sends owner r; received slot s: what source s sends here */
    XS_TRY(t->coll.alltoall(t->coll.ctx, t->exp_part, t->exp_recv, in->slot_bytes, t->vstream));
    char *own = t->lt.data[t->pl.me] + in->rs_off;
    for (int src = 0; src < t->pl.P; src++)
        if (src != t->pl.me)
            XS_TRY(tp_slot_copy(t, own + (size_t)src * in->slot_bytes, t->pl.layout,
                                t->exp_recv + src * ny, XS_TP_LAYOUT_ROW, 1));
    if (t->have_ref)
        XS_TRY(tp_ref_y(t));
    XS_CU(cudaStreamSynchronize(t->vstream));
    t->have_exp = 0; /* the next local run is checked against the new reference */
    return XS_OK;
}

/* ---- verification -------------------------------------------------------------------------------- */

/* 16-byte units of [a, a+bytes) and [b, b+bytes) that differ (CPU). */
static uint64_t cpu_diff_units(const void *a, const void *b, size_t bytes)
{
    const size_t blk = 1 << 16;
    uint64_t bad = 0;
    const char *x = (const char *)a, *y = (const char *)b;
    for (size_t off = 0; off < bytes; off += blk) {
        const size_t len = bytes - off < blk ? bytes - off : blk;
        if (!memcmp(x + off, y + off, len))
            continue;
        for (size_t u = 0; u < len; u += 16)
            bad += memcmp(x + off + u, y + off + u, len - u < 16 ? len - u : 16) != 0;
    }
    return bad;
}

static xs_status gpu_diff_units(xs_tp *t, const void *a, const void *b, size_t bytes,
                                uint64_t *bad)
{
    if (!bytes) {
        *bad = 0;
        return XS_OK;
    }
    unsigned long long h = 0;
    XS_CU(cudaMemsetAsync(t->d_bad, 0, sizeof h, t->vstream));
    XS_NVTX_LAUNCH("tp_cmp_kernel",
                   tp_cmp_kernel<<<tp_blocks(bytes / 16, 256), 256, 0, t->vstream>>>(
                       (const uint4 *)a, (const uint4 *)b, bytes / 16, t->d_bad));
    XS_CU_LAUNCH();
    XS_CU(cudaMemcpyAsync(&h, t->d_bad, sizeof h, cudaMemcpyDeviceToHost, t->vstream));
    XS_CU(cudaStreamSynchronize(t->vstream));
    *bad = h;
    return XS_OK;
}

/* 16-byte units of a slot (layout l, CPU view) that differ from the row-major rows (CPU). */
static uint64_t cpu_diff_slot(const xs_tp *t, const void *slot, const xs_bf16 *rows)
{
    const xs_tp_info *in = &t->pl.in;
    if (t->pl.layout == XS_TP_LAYOUT_ROW)
        return cpu_diff_units(slot, rows, in->slot_bytes);
    uint64_t bad = 0;
    const int tiles_n = (in->rs_n + XS_TP_BN - 1) / XS_TP_BN;
    for (int tr = 0; tr < in->rs_rows / XS_TP_BM; tr++)
        for (int tc = 0; tc < tiles_n; tc++) {
            int pitch;
            const size_t b = xs_tp_slot_tile(t->pl.layout, in->rs_n, tr, tc, &pitch);
            for (int i = 0; i < XS_TP_BM; i++)
                bad += cpu_diff_units((const xs_bf16 *)slot + b + (size_t)i * pitch,
                                      rows + (size_t)(tr * XS_TP_BM + i) * in->rs_n +
                                          (size_t)tc * XS_TP_BN,
                                      (size_t)pitch * 2);
        }
    return bad;
}

/* The same on the GPU (slot: device or mapped host memory). */
static xs_status gpu_diff_slot(xs_tp *t, const void *slot, const xs_bf16 *rows, uint64_t *bad)
{
    const xs_tp_info *in = &t->pl.in;
    if (t->pl.layout == XS_TP_LAYOUT_ROW)
        return gpu_diff_units(t, slot, rows, in->slot_bytes, bad);
    unsigned long long h = 0;
    XS_CU(cudaMemsetAsync(t->d_bad, 0, sizeof h, t->vstream));
    XS_NVTX_LAUNCH(
        "tp_cmp_slot_kernel",
        tp_cmp_slot_kernel<<<tp_blocks(in->slot_bytes / 16, 256), 256, 0, t->vstream>>>(
            (const xs_bf16 *)slot, (int)t->pl.layout, rows, in->rs_rows, in->rs_n, t->d_bad));
    XS_CU_LAUNCH();
    XS_CU(cudaMemcpyAsync(&h, t->d_bad, sizeof h, cudaMemcpyDeviceToHost, t->vstream));
    XS_CU(cudaStreamSynchronize(t->vstream));
    *bad = h;
    return XS_OK;
}

/* Tolerance check of got (bf16 [rows, ldg]) against ref (fp32 [rows, ldr]) over `cols`. */
static xs_status tol_check(xs_tp *t, const xs_bf16 *got, long long ldg, const float *ref,
                           long long ldr, int rows, int cols, xs_tp_check *c, const char *what)
{
    if ((size_t)rows > t->err_rows)
        return xs_seterr(XS_EINVAL, "tp: %d rows to check, room for %zu", rows, t->err_rows);
    unsigned long long nf = 0;
    XS_CU(cudaMemsetAsync(t->d_nonfinite, 0, sizeof nf, t->vstream));
    XS_NVTX_LAUNCH("tp_err_kernel",
                   tp_err_kernel<<<rows < 4096 ? rows : 4096, 256, 0, t->vstream>>>(
                       got, ldg, ref, ldr, rows, cols, t->d_err, t->d_err + rows, t->d_nonfinite));
    XS_CU_LAUNCH();
    double *h = (double *)malloc((size_t)2 * rows * sizeof(double));
    if (!h)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory checking %d rows", rows);
    cudaError_t e1 = cudaMemcpyAsync(h, t->d_err, (size_t)2 * rows * sizeof(double),
                                     cudaMemcpyDeviceToHost, t->vstream);
    cudaError_t e2 = cudaMemcpyAsync(&nf, t->d_nonfinite, sizeof nf, cudaMemcpyDeviceToHost,
                                     t->vstream);
    cudaError_t e3 = cudaStreamSynchronize(t->vstream);
    if (e1 != cudaSuccess || e2 != cudaSuccess || e3 != cudaSuccess) {
        free(h);
        return xs_seterr(XS_ECUDA, "tp: reading check sums: %s",
                         cudaGetErrorString(e1 != cudaSuccess ? e1 : e2 != cudaSuccess ? e2 : e3));
    }
    double se = 0, sr = 0, worst = 0;
    for (int r = 0; r < rows; r++) {
        se += h[r];
        sr += h[rows + r];
        const double rr = h[rows + r] > 0 ? sqrt(h[r] / h[rows + r]) : (h[r] > 0 ? INFINITY : 0);
        if (!(rr <= worst))
            worst = rr;
    }
    free(h);
    const double rel = sr > 0 ? sqrt(se / sr) : (se > 0 ? INFINITY : 0);
    c->checked_ref = 1;
    if (!(rel <= c->rel_frob) || c->rel_frob < 0)
        c->rel_frob = rel;
    if (!(worst <= c->max_row_rel))
        c->max_row_rel = worst;
    c->nonfinite += (long)nf;
    if ((nf || !(rel <= XS_TP_TOL_FROB) || !(worst <= XS_TP_TOL_ROW)) && !c->what[0])
        snprintf(c->what, sizeof c->what, "%s: relative Frobenius error %.3g (tol %.0e), worst "
                 "row %.3g (tol %.0e), %llu non-finite", what, rel, XS_TP_TOL_FROB, worst,
                 XS_TP_TOL_ROW, nf);
    return XS_OK;
}

static void note(xs_tp_check *c, const char *what, unsigned long long n, const char *problem)
{
    if (!c->what[0])
        snprintf(c->what, sizeof c->what, "%s: %llu %s", what, n, problem);
}

/* Signals of this rank at rank r's window: every chunk and every tile sent there carries the
 * epoch. flags = a CPU view of rank r's flags. */
static uint64_t flags_wrong(const xs_tp *t, const uint64_t *flags, int r, unsigned long long epoch,
                            int src)
{
    const xs_tp_info *in = &t->pl.in;
    uint64_t bad = 0;
    const volatile uint64_t *f = flags;
    if (in->ag && r != src)
        for (int c = 0; c < in->ag_chunks; c++)
            bad += f[(size_t)src * in->ag_chunks + c] != epoch;
    if (in->rs_gemm >= 0)
        for (int i = 0; i < in->t_own; i++)
            bad += f[in->rs_flag0 + (size_t)src * in->t_own + i] != epoch;
    return bad;
}

/* Real peers: what every other source sent to this rank's window in the last fused run, at the
 * destination: its partials of this rank's rows against what it verified and sent through the
 * exchange (bitwise), its shard of the gathered X against the same rows of the local control
 * table (one tensor on every rank), and every signal with the run's epoch (the ranks launch in
 * lockstep, so their epochs agree). */
static xs_status check_received(xs_tp *t, unsigned long long epoch, xs_tp_check *c)
{
    const xs_tp_info *in = &t->pl.in;
    const int me = t->pl.me;
    const size_t ny = (size_t)in->rs_rows * in->rs_n;
    if (in->rs_gemm >= 0 && !t->exp_recv)
        return xs_seterr(XS_EINVAL, "tp verify: a fused run on real peers needs "
                         "xs_tp_exchange_expectation first");
    uint64_t *fl = (uint64_t *)malloc((size_t)in->nflags * 8);
    if (!fl)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for flags");
    xs_status st = XS_OK;
    cudaError_t e = cudaMemcpy(fl, t->vt.flags[me], (size_t)in->nflags * 8, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        st = xs_seterr(XS_ECUDA, "tp: reading flags: %s", cudaGetErrorString(e));
    for (int src = 0; src < t->pl.P && st == XS_OK; src++) {
        if (src == me)
            continue;
        uint64_t bad = 0, b = 0;
        if (in->rs_gemm >= 0) {
            st = gpu_diff_slot(t, t->vt.data[me] + in->rs_off + (size_t)src * in->slot_bytes,
                               t->exp_recv + src * ny, &b);
            bad += b;
            c->remote_bytes += (double)in->slot_bytes;
        }
        if (in->ag && st == XS_OK) {
            const size_t off = (size_t)src * in->shard_bytes;
            st = gpu_diff_units(t, t->vt.data[me] + off, t->lt.data[me] + off, in->shard_bytes,
                                &b);
            bad += b;
            c->remote_bytes += (double)in->shard_bytes;
        }
        c->bad_units += bad;
        if (bad)
            note(c, "received bytes", bad, "16-byte units differ from what a peer sent");
        const uint64_t bf = flags_wrong(t, fl, me, epoch, src);
        c->bad_flags += bf;
        if (bf)
            note(c, "received signals", bf, "missing or stale in this rank's window");
    }
    free(fl);
    return st;
}

/* A run whose order split tiles along k (TP_T_SPLIT) sums their parts in another order than the
 * expectation's whole tiles, so their bf16 partials may differ from it in the last bit. The
 * slot sent to owner r (slot: a device or mapped host pointer, the context's layout): the whole
 * slot against the fp32 reference within the stated tolerance, then every tile that was not
 * split bitwise against the expectation (*bad: 16-byte units that differ). *nsplit = split
 * tiles of owner r in the last run's order; 0: nothing done (the caller diffs as usual). */
static xs_status split_diff(xs_tp *t, const void *slot, int r, xs_tp_check *c, uint64_t *bad,
                            int *nsplit)
{
    const xs_tp_info *in = &t->pl.in;
    const int tiles_n = (in->rs_n + XS_TP_BN - 1) / XS_TP_BN, rbpr = in->rs_rows / XS_TP_BM;
    const size_t ny = (size_t)in->rs_rows * in->rs_n;
    *nsplit = 0;
    *bad = 0;
    const int ls = t->last_slot;
    if (ls < 0 || ls >= XS_TP_SLOTS || t->pl.nsplit[ls] == 0)
        return XS_OK;
    int *idx = (int *)malloc((size_t)in->t_own * sizeof(int));
    if (!idx)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory checking split tiles");
    int n = 0;
    for (int i = 0; i < t->pl.ntasks[ls]; i++) {
        const xs_tp_task *x = &t->pl.tasks[ls][i];
        if ((x->kind & XS_TP_K_SPLIT) && XS_TP_SPLIT_PART(x) == XS_TP_SPLIT_PARTS(x) - 1 &&
            x->tm / rbpr == r && n < in->t_own) /* the last part: the tile's epilogue */
            idx[n++] = (x->tm - r * rbpr) * tiles_n + x->tn;
    }
    *nsplit = n;
    xs_status st = XS_OK;
    if (n > 0 && !t->have_ref)
        st = xs_seterr(XS_EINVAL, "tp verify: a run with split tiles needs xs_tp_reference");
    if (n > 0 && st == XS_OK && !t->split_tmp) {
        cudaError_t e = cudaMalloc((void **)&t->split_tmp, ny * 2);
        if (e == cudaSuccess)
            e = cudaMalloc((void **)&t->d_split_tiles, (size_t)in->t_own * sizeof(int));
        if (e != cudaSuccess)
            st = xs_seterr(XS_ECUDA, "tp: verification buffer of split tiles (%.1f MB): %s",
                           (double)ny * 2 / 1e6, cudaGetErrorString(e));
    }
    if (n > 0 && st == XS_OK) {
        /* row-major copy; tolerance of the whole slot; the expectation's split tiles patched in;
         * then bitwise */
        st = tp_slot_copy(t, t->split_tmp, XS_TP_LAYOUT_ROW, slot, t->pl.layout, 1);
        if (st == XS_OK)
            st = tol_check(t, t->split_tmp, in->rs_n, t->ref_part + (size_t)r * ny, in->rs_n,
                           in->rs_rows, in->rs_n, c, "partial sums sent (split tiles)");
        if (st == XS_OK) {
            cudaError_t e = cudaMemcpyAsync(t->d_split_tiles, idx, (size_t)n * sizeof(int),
                                            cudaMemcpyHostToDevice, t->vstream);
            if (e == cudaSuccess) {
                XS_NVTX_LAUNCH("tp_copy_tiles_kernel",
                               tp_copy_tiles_kernel<<<n * XS_TP_BM, 128, 0, t->vstream>>>(
                                   t->split_tmp, t->exp_part + (size_t)r * ny, in->rs_n, tiles_n,
                                   t->d_split_tiles));
                e = cudaGetLastError();
            }
            if (e != cudaSuccess)
                st = xs_seterr(XS_ECUDA, "tp: checking split tiles: %s", cudaGetErrorString(e));
        }
        if (st == XS_OK)
            st = gpu_diff_units(t, t->split_tmp, t->exp_part + (size_t)r * ny, ny * 2, bad);
    }
    free(idx);
    return st;
}

/* The bytes a fused or local run sent to each rank, against the expectation. */
static xs_status check_sent(xs_tp *t, const xs_wintab *tab, int cpu_side, unsigned long long epoch,
                            xs_tp_check *c)
{
    const xs_tp_info *in = &t->pl.in;
    uint64_t *fl = (uint64_t *)malloc((size_t)in->nflags * 8);
    if (!fl)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory for flags");
    xs_status st = XS_OK;
    for (int r = 0; r < t->pl.P && st == XS_OK; r++) {
        const int host = cpu_side && t->host[r];
        if (cpu_side && !host && r != t->pl.me)
            continue; /* a peer's device window: verified by that peer */
        uint64_t bad = 0;
        if (in->rs_gemm >= 0) {
            const size_t off = in->rs_off + (size_t)t->pl.me * in->slot_bytes;
            uint64_t b = 0;
            int nsplit = 0;
            st = split_diff(t, tab->data[r] + off, r, c, &b, &nsplit);
            if (st != XS_OK)
                break;
            if (nsplit > 0) {
                if (host)
                    c->remote_bytes += (double)in->slot_bytes;
            } else if (host) {
                b = cpu_diff_slot(t, (const char *)t->host[r] + off,
                                  t->exp_part_h + (size_t)r * in->rs_rows * in->rs_n);
                c->remote_bytes += (double)in->slot_bytes;
            } else {
                st = gpu_diff_slot(t, tab->data[r] + off,
                                   t->exp_part + (size_t)r * in->rs_rows * in->rs_n, &b);
            }
            bad += b;
        }
        if (in->ag && r != t->pl.me && st == XS_OK) {
            const size_t off = (size_t)t->pl.me * in->shard_bytes;
            uint64_t b = 0;
            if (host) {
                b = cpu_diff_units((const char *)t->host[r] + off, t->exp_shard_h,
                                   in->shard_bytes);
                c->remote_bytes += (double)in->shard_bytes;
            } else {
                st = gpu_diff_units(t, tab->data[r] + off, tab->data[t->pl.me] + off,
                                    in->shard_bytes, &b);
            }
            bad += b;
        }
        if (st != XS_OK)
            break;
        if (host) {
            c->bad_units += bad;
            if (bad)
                note(c, "sent bytes", bad, "16-byte units differ at a host window");
            const uint64_t bf = flags_wrong(t, t->host_flags[r], r, epoch, t->pl.me);
            c->bad_flags += bf;
            if (bf)
                note(c, "signals", bf, "missing or stale at a host window");
        } else {
            c->local_bad += bad;
            if (bad)
                note(c, "sent bytes", bad, "16-byte units differ in a device window");
            cudaError_t e = cudaMemcpy(fl, tab->flags[r], (size_t)in->nflags * 8,
                                       cudaMemcpyDeviceToHost);
            if (e != cudaSuccess) {
                st = xs_seterr(XS_ECUDA, "tp: reading flags: %s", cudaGetErrorString(e));
                break;
            }
            const uint64_t bf = flags_wrong(t, fl, r, epoch, t->pl.me);
            c->bad_flags += bf;
            if (bf)
                note(c, "signals", bf, "missing or stale in a device window");
        }
    }
    free(fl);
    return st;
}

extern "C" xs_status xs_tp_verify(xs_tp *t, xs_tp_check *c)
{
    memset(c, 0, sizeof *c);
    c->rel_frob = -1;
    const xs_tp_info *in = &t->pl.in;
    const size_t m = (size_t)t->pl.s.m;
    const int P = t->pl.P, me = t->pl.me;
    if (t->last == TP_RUN_NONE)
        return xs_seterr(XS_EINVAL, "tp verify: no completed run");
    if (t->last_failed) {
        snprintf(c->what, sizeof c->what, "the run failed");
        return XS_OK;
    }
    const size_t ny = (size_t)in->rs_rows * in->rs_n;
    if (t->last == TP_RUN_LOCAL && !t->have_exp) {
        /* the first local run: against the fp32 reference, then it is the expectation */
        if (!t->have_ref)
            return xs_seterr(XS_EINVAL, "tp verify: the first local run needs xs_tp_reference");
        if (in->rs_gemm >= 0) {
            if (!t->exp_part)
                XS_CU(cudaMalloc((void **)&t->exp_part, m * in->rs_n * 2));
            if (!t->exp_y)
                XS_CU(cudaMalloc((void **)&t->exp_y, ny * 2));
            /* the expectation is row-major whatever the slot layout */
            for (int r = 0; r < P; r++)
                XS_TRY(tp_slot_copy(t, t->exp_part + (size_t)r * ny, XS_TP_LAYOUT_ROW,
                                    t->lt.data[r] + in->rs_off + (size_t)me * in->slot_bytes,
                                    t->pl.layout, 1));
            XS_CU(cudaMemcpyAsync(t->exp_y, t->y, ny * 2, cudaMemcpyDeviceToDevice, t->vstream));
            XS_TRY(tol_check(t, t->exp_part, in->rs_n, t->ref_part, in->rs_n, t->pl.s.m, in->rs_n, c,
                             "partial sums sent"));
            XS_TRY(tol_check(t, t->y, in->rs_n, t->ref_y, in->rs_n, in->rs_rows, in->rs_n, c,
                             "reduced rows"));
            if (!t->exp_part_h)
                t->exp_part_h = (xs_bf16 *)malloc(m * in->rs_n * 2);
            if (!t->exp_part_h)
                return xs_seterr(XS_ENOMEM, "tp: out of host memory for the expectation");
            XS_CU(cudaMemcpy(t->exp_part_h, t->exp_part, m * in->rs_n * 2,
                             cudaMemcpyDeviceToHost));
        }
        if (t->out0) {
            if (!t->exp_out0)
                XS_CU(cudaMalloc((void **)&t->exp_out0, m * in->out_n[0] * 2));
            XS_CU(cudaMemcpyAsync(t->exp_out0, t->out0, m * in->out_n[0] * 2,
                                  cudaMemcpyDeviceToDevice, t->vstream));
            XS_TRY(tol_check(t, t->out0, in->out_n[0], t->ref_out0, in->out_n[0], t->pl.s.m,
                             in->out_n[0], c, t->pl.s.op == XS_TP_MLP ? "h" : "GEMM output"));
        }
        if (in->ag) {
            if (!t->exp_shard_h)
                t->exp_shard_h = (xs_bf16 *)malloc(in->shard_bytes);
            if (!t->exp_shard_h)
                return xs_seterr(XS_ENOMEM, "tp: out of host memory for the expectation");
            XS_CU(cudaMemcpy(t->exp_shard_h, t->vt.data[me] + (size_t)me * in->shard_bytes,
                             in->shard_bytes, cudaMemcpyDeviceToHost));
        }
        XS_CU(cudaStreamSynchronize(t->vstream));
        t->have_exp = 1;
        XS_TRY(check_sent(t, &t->lt, 0, t->last_epoch, c));
    } else if (t->last == TP_RUN_LOCAL || t->last == TP_RUN_FUSED) {
        if (!t->have_exp)
            return xs_seterr(XS_EINVAL, "tp verify: a fused run needs a verified local run first");
        const int fused = t->last == TP_RUN_FUSED;
        XS_TRY(check_sent(t, fused ? &t->vt : &t->lt, fused, t->last_epoch, c));
        if (fused && !t->virt)
            XS_TRY(check_received(t, t->last_epoch, c));
        uint64_t b = 0;
        if (t->y) {
            XS_TRY(gpu_diff_units(t, t->y, t->exp_y, ny * 2, &b));
            c->local_bad += b;
            if (b)
                note(c, "reduced rows", b, "16-byte units differ from the verified local run");
        }
        if (t->out0) {
            XS_TRY(gpu_diff_units(t, t->out0, t->exp_out0, m * in->out_n[0] * 2, &b));
            c->local_bad += b;
            if (b)
                note(c, "GEMM 0 output", b, "16-byte units differ from the verified local run");
        }
    } else { /* unfused */
        if (!t->have_ref)
            return xs_seterr(XS_EINVAL, "tp verify: the unfused run needs xs_tp_reference");
        if (in->rs_gemm >= 0) {
            if (!t->u_part_h)
                t->u_part_h = (xs_bf16 *)malloc(m * in->rs_n * 2);
            if (!t->u_part_h)
                return xs_seterr(XS_ENOMEM, "tp: out of host memory for the unfused check");
            XS_CU(cudaMemcpy(t->u_part_h, t->u_c, m * in->rs_n * 2, cudaMemcpyDeviceToHost));
            XS_TRY(tol_check(t, t->u_y, in->rs_n, t->ref_y, in->rs_n, in->rs_rows, in->rs_n, c,
                             "unfused reduced rows"));
        }
        if (t->pl.s.op == XS_TP_AG_GEMM)
            XS_TRY(tol_check(t, t->u_c0, in->gn[0], t->ref_out0, in->out_n[0], t->pl.s.m,
                             in->out_n[0], c, "unfused GEMM output"));
        if (in->ag && !t->exp_shard_h) {
            t->exp_shard_h = (xs_bf16 *)malloc(in->shard_bytes);
            if (!t->exp_shard_h)
                return xs_seterr(XS_ENOMEM, "tp: out of host memory for the expectation");
            XS_CU(cudaMemcpy(t->exp_shard_h, t->vt.data[me] + (size_t)me * in->shard_bytes,
                             in->shard_bytes, cudaMemcpyDeviceToHost));
        }
        for (int r = 0; r < P && !t->virt && in->ag; r++) {
            /* real peers: the all-gather's shards at this destination (rs: the tolerance check
             * of the reduced rows above covers what the reduce-scatter delivered) */
            uint64_t bad = 0;
            if (r == me)
                continue;
            const size_t off = (size_t)r * in->shard_bytes;
            XS_TRY(gpu_diff_units(t, t->vt.data[me] + off, t->lt.data[me] + off, in->shard_bytes,
                                  &bad));
            c->remote_bytes += (double)in->shard_bytes;
            c->bad_units += bad;
            if (bad)
                note(c, "unfused all-gather", bad, "16-byte units differ from the peer's shard");
        }
        for (int r = 0; r < P; r++) {
            if (r == me || !t->host[r])
                continue;
            uint64_t bad = 0;
            if (in->rs_gemm >= 0) {
                bad += cpu_diff_units((const char *)t->host[r] + in->rs_off +
                                          (size_t)me * in->slot_bytes,
                                      t->u_part_h + (size_t)r * ny, in->slot_bytes);
                c->remote_bytes += (double)in->slot_bytes;
            }
            if (in->ag) {
                bad += cpu_diff_units((const char *)t->host[r] + (size_t)me * in->shard_bytes,
                                      t->exp_shard_h, in->shard_bytes);
                c->remote_bytes += (double)in->shard_bytes;
            }
            c->bad_units += bad;
            if (bad)
                note(c, "unfused copies", bad, "16-byte units differ from their source at a host window");
        }
    }
    c->ok = c->bad_units == 0 && c->bad_flags == 0 && c->local_bad == 0 && c->nonfinite == 0 &&
            (!c->checked_ref || (c->rel_frob <= XS_TP_TOL_FROB && c->max_row_rel <= XS_TP_TOL_ROW));
    return XS_OK;
}
