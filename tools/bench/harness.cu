// SPDX-License-Identifier: Apache-2.0
/*
 * harness.cu - the GPU half of the bench harness (tools/bench/harness.h): the launch over ranks,
 * the bench stream, the timing rule (events around the whole operation, L2 flushed first, ranks
 * in lockstep), the report header, and the agreements between ranks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "xstage_cli.h"

/* ---- setup ---------------------------------------------------------------------------------- */

static xs_status env_open(xs_bench_env *e)
{
    XS_TRY(xs_gpu_open(e->c->b.device, &e->gi)); /* a launched rank: XS_DEVICE */
    XS_CU(cudaStreamCreateWithFlags(&e->stream, cudaStreamNonBlocking));
    XS_CU(cudaEventCreate(&e->ev[0]));
    XS_CU(cudaEventCreate(&e->ev[1]));
    size_t bytes = 2 * e->gi.l2_bytes;
    if (bytes < ((size_t)64 << 20))
        bytes = (size_t)64 << 20;
    XS_CU(cudaMalloc(&e->l2.buf, bytes));
    e->l2.bytes = bytes;
    if (e->real)
        XS_TRY(xs_coll_open(&e->coll));
    return XS_OK;
}

int xs_bench_start(xs_bench_env *e, const xs_bench_common *c, int real)
{
    memset(e, 0, sizeof *e);
    e->c = c;
    e->nranks = 1;
    e->real = real;
    if (real) {
        /* the parent starts one rank per GPU and waits; a rank goes on */
        int ec = 0, l = xs_bench_launch(c->b.gpus, &ec);
        if ((l = xs_launch_exit(l, ec)) >= 0)
            return l;
        int have = 0;
        if (xs_rank_env(&e->me, &e->nranks, NULL, &have) != XS_OK)
            return xs_cli_fail();
    }
    if (env_open(e) != XS_OK) {
        const int rc = xs_cli_fail();
        xs_bench_stop(e, 1);
        return rc;
    }
    e->t0 = xs_now_s();
    return -1;
}

void xs_bench_stop(xs_bench_env *e, int abort)
{
    if (e->l2.buf)
        cudaFree(e->l2.buf);
    for (int i = 0; i < 2; i++)
        if (e->ev[i])
            cudaEventDestroy(e->ev[i]);
    if (e->stream)
        cudaStreamDestroy(e->stream);
    xs_coll_close(e->coll, abort);
    e->l2.buf = NULL;
    e->ev[0] = e->ev[1] = NULL;
    e->stream = NULL;
    e->coll = NULL;
}

/* ---- the timing rule ------------------------------------------------------------------------ */

xs_status xs_bench_flush_l2(xs_bench_env *e, int round)
{
    XS_CU(cudaMemsetAsync(e->l2.buf, round & 0xff, e->l2.bytes, e->stream));
    /* done before the caller's operation starts, whatever stream that runs on */
    XS_CU(cudaStreamSynchronize(e->stream));
    return XS_OK;
}

xs_status xs_bench_flush_l2_async(xs_bench_env *e, int round, cudaStream_t s)
{
    XS_CU(cudaMemsetAsync(e->l2.buf, round & 0xff, e->l2.bytes, s));
    return XS_OK;
}

xs_status xs_bench_l2_before(void *env, int v, int round)
{
    return xs_bench_flush_l2((xs_bench_env *)env, round);
}

xs_status xs_bench_barrier(const xs_bench_env *e)
{
    return e->ws ? xs_win_barrier(e->ws, XS_BENCH_BARRIER_MS) : XS_OK;
}

xs_status xs_bench_time_op(xs_bench_env *e, xs_bench_op op, void *ctx, int v, int round,
                           const char *what, double *us)
{
    XS_TRY(xs_bench_flush_l2(e, round)); /* also waits for what the caller enqueued before */
    XS_TRY(xs_bench_barrier(e));
    XS_CU(cudaEventRecord(e->ev[0], e->stream));
    XS_TRY(op(ctx, v, e->stream));
    XS_CU(cudaEventRecord(e->ev[1], e->stream));
    XS_TRY(xs_event_wait(e->ev[1], e->c->timeout_s > 0 ? e->c->timeout_s : 60, what));
    float ms = 0;
    XS_CU(cudaEventElapsedTime(&ms, e->ev[0], e->ev[1]));
    *us = 1e3 * (double)ms;
    return xs_bench_barrier(e);
}

xs_bench_rounds xs_bench_rounds_default(const xs_bench_env *e,
                                        xs_status (*run)(void *, int, int, double *),
                                        xs_status (*verify)(void *, int, int, int *), void *ctx)
{
    xs_bench_rounds r;
    memset(&r, 0, sizeof r);
    r.warmup = e->c->b.warmup;
    r.iters = e->c->b.iters;
    r.rotate = 1;
    r.verify_when = XS_BENCH_VERIFY_EVERY;
    r.run = run;
    r.verify = verify;
    r.ctx = ctx;
    return r;
}

/* ---- the report ----------------------------------------------------------------------------- */

void xs_bench_report_header(xs_bench_report *r, const xs_bench_env *e, int argc, char **argv)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (m) {
        xs_gpu_json_fields(m, &e->gi, argc, argv);
        fclose(m);
        xs_bench_report_json_object(r, "gpu", buf);
        free(buf);
    }
    buf = NULL;
    n = 0;
    m = open_memstream(&buf, &n);
    if (m) {
        xs_gpu_report_header(m, &e->gi, argc, argv);
        fclose(m);
        xs_bench_report_text(r, buf);
        free(buf);
    }
    if (e->real)
        xs_bench_report_note(r, "ranks: %d processes, rank r on GPU r; every rank verifies what "
                             "its own window received; times are rank 0's (the slowest rank's "
                             "medians where printed)", e->nranks);
}

/* ---- ranks ---------------------------------------------------------------------------------- */

xs_status xs_bench_agree_max(const xs_bench_env *e, double *v, int n)
{
    return e->coll ? xs_coll_max(e->coll, v, n) : XS_OK;
}

xs_status xs_bench_agree_rank0(const xs_bench_env *e, double *v, int n)
{
    if (!e->coll)
        return XS_OK;
    if (xs_coll_rank(e->coll) != 0) /* the others send less than any valid value */
        for (int i = 0; i < n; i++)
            v[i] = -2;
    return xs_coll_max(e->coll, v, n);
}

xs_status xs_bench_agree_verdict(const xs_bench_env *e, int *ok, double *max_err,
                                 const double *med, double *rank_max, int n)
{
    if (n < 0 || n > 62)
        return xs_seterr(XS_EINVAL, "bench: %d medians to agree on (at most 62)", n);
    if (!e->coll) {
        for (int i = 0; rank_max && i < n; i++)
            rank_max[i] = NAN;
        return XS_OK;
    }
    double g[64], rm[62];
    xs_bench_verdict_pack(*ok, max_err ? *max_err : NAN, med, n, g);
    XS_TRY(xs_coll_max(e->coll, g, 2 + n));
    double err;
    xs_bench_verdict_unpack(g, n, ok, &err, rm);
    if (max_err)
        *max_err = err;
    if (rank_max)
        memcpy(rank_max, rm, sizeof(double) * (size_t)n);
    return XS_OK;
}

xs_status xs_bench_late(const xs_bench_env *e, int *late)
{
    const double max_s = e->c->max_time_s;
    double v = max_s > 0 && xs_now_s() - e->t0 > max_s ? 1.0 : 0.0;
    XS_TRY(xs_bench_agree_max(e, &v, 1)); /* skipped on every rank when out on any */
    *late = v != 0;
    return XS_OK;
}

/* Interrupt and budget, agreed over the ranks in one maximum. */
static xs_status sweep_between(void *env, int *interrupted, int *late)
{
    const xs_bench_env *e = (const xs_bench_env *)env;
    const double max_s = e->c->max_time_s;
    double v[2] = {*interrupted ? 1.0 : 0.0, max_s > 0 && xs_now_s() - e->t0 > max_s ? 1.0 : 0.0};
    XS_TRY(xs_bench_agree_max(e, v, 2));
    *interrupted = v[0] != 0;
    *late = v[1] != 0;
    return XS_OK;
}

void xs_bench_sweep_hooks(xs_bench_sweep *s, xs_bench_env *e)
{
    s->rank = e->me;
    s->lockstep = e->real;
    s->between = sweep_between;
    s->sticky = xs_bench_cuda_sticky;
    s->hctx = e;
}

int xs_bench_cuda_sticky(void)
{
    return cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess;
}
