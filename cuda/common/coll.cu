// SPDX-License-Identifier: Apache-2.0
/*
 * coll.cu - benches over ranks (bench ep|tp|up -g N, docs/MULTIGPU.md): the launcher that starts
 * one rank per GPU, and the NCCL communicator of the unfused baselines' collectives (declared in
 * xstage_launch.h). The windows' communicator stays the transport's (cuda/common/nccl.cu): the
 * collectives get a second one, from a second unique id that the launcher's parent exports.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nccl.h>

#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_exchange.h"
#include "xstage_launch.h"
#include "xstage_win.h"

static xs_status bench_make_ids(unsigned char id[XS_NCCL_ID_BYTES])
{
    XS_TRY(xs_nccl_unique_id(id)); /* the windows' (XS_NCCL_ID) */
    unsigned char cid[XS_NCCL_ID_BYTES];
    XS_TRY(xs_nccl_unique_id(cid));
    char hex[2 * XS_NCCL_ID_BYTES + 1];
    xs_hex_encode(cid, XS_NCCL_ID_BYTES, hex);
    /* before the fork: xs_launch copies this environment into every rank's */
    if (setenv(XS_NCCL_COLL_ID_VAR, hex, 1) != 0)
        return xs_seterr(XS_EIO, "launch: cannot set %s", XS_NCCL_COLL_ID_VAR);
    return XS_OK;
}

extern "C" int xs_bench_launch(int ngpus, int *exit_code)
{
    xs_launch_hooks h;
    h.count_gpus = xs_gpu_count;
    h.make_id = bench_make_ids;
    xs_launch_opts lo;
    memset(&lo, 0, sizeof lo);
    lo.quiet_stdout = 1; /* rank 0 reports; the others' errors still reach stderr */
    /* sweeps run longer than a calibration: XS_LAUNCH_TIMEOUT, else 4 h */
    const char *t = getenv("XS_LAUNCH_TIMEOUT");
    long v = t ? strtol(t, NULL, 10) : 0;
    lo.timeout_s = v > 0 && v < (1L << 30) ? (int)v : 4 * 3600;
    return xs_launch_or_run_with(ngpus, 0, NULL, &h, &lo, exit_code);
}

struct xs_coll {
    void *lib;
    ncclComm_t comm;
    int rank, nranks;
    double *dbuf;        /* [64] device scratch of xs_coll_max */
    cudaStream_t hs;     /* stream of the blocking host helpers */
    double timeout_s;    /* XS_RANK_TIMEOUT: bound on set-up and on every wait for the others */
    decltype(&ncclCommInitRankConfig) init_rank_config;
    decltype(&ncclCommGetAsyncError) async_error;
    decltype(&ncclGroupStart) group_start;
    decltype(&ncclGroupEnd) group_end;
    decltype(&ncclSend) send;
    decltype(&ncclRecv) recv;
    decltype(&ncclAllReduce) all_reduce;
    decltype(&ncclReduceScatter) reduce_scatter;
    decltype(&ncclAllGather) all_gather;
    decltype(&ncclAlltoAll) alltoall; /* NULL when the library lacks it */
    decltype(&ncclCommFinalize) finalize;
    decltype(&ncclCommDestroy) destroy;
    decltype(&ncclCommAbort) abort_;
    decltype(&ncclGetErrorString) error_string;
    decltype(&ncclGetLastError) last_error;
};

static xs_status coll_fail(const xs_coll *c, const char *what, ncclResult_t r)
{
    const char *last = c->last_error ? c->last_error(c->comm) : NULL;
    return xs_seterr(XS_ENCCL, "%s (rank %d of %d): %s%s%s%s", what, c->rank, c->nranks,
                     c->error_string ? c->error_string(r) : "?", last && *last ? " (" : "",
                     last && *last ? last : "", last && *last ? ")" : "");
}

/* The communicator is non-blocking (so that its set-up is bounded): a call may answer
 * ncclInProgress, and the next call must wait until it is done. Wait at most c->timeout_s;
 * returns the final result, or ncclInProgress when the bound passed first. */
static ncclResult_t coll_settle(const xs_coll *c, ncclResult_t r)
{
    const double deadline = xs_now_s() + c->timeout_s;
    while (r == ncclInProgress && c->comm) {
        if (c->async_error(c->comm, &r) != ncclSuccess)
            return ncclInternalError;
        if (r != ncclInProgress || xs_now_s() > deadline)
            break;
        struct timespec t = {0, 50000}; /* 50 us */
        nanosleep(&t, NULL);
    }
    return r;
}

static xs_status coll_result(const xs_coll *c, ncclResult_t r, const char *what)
{
    r = coll_settle(c, r);
    if (r == ncclSuccess)
        return XS_OK;
    if (r == ncclInProgress)
        return xs_seterr(XS_ETIMEOUT, "%s (rank %d of %d): not complete within %g s "
                         "(XS_RANK_TIMEOUT): a rank stopped taking part", what, c->rank,
                         c->nranks, c->timeout_s);
    return coll_fail(c, what, r);
}

#define COLL_CALL(c, call, what)                                                              \
    do {                                                                                      \
        xs_status s_ = coll_result((c), (call), (what));                                      \
        if (s_ != XS_OK)                                                                      \
            return s_;                                                                        \
    } while (0)

extern "C" int xs_coll_rank(const xs_coll *c) { return c->rank; }
extern "C" int xs_coll_nranks(const xs_coll *c) { return c->nranks; }

extern "C" void xs_coll_close(xs_coll *c, int abort)
{
    if (!c)
        return;
    cudaDeviceSynchronize();
    if (c->comm && abort) {
        c->abort_(c->comm);
    } else if (c->comm) {
        /* non-blocking: finalize answers ncclInProgress until every rank is done; a rank that
         * never comes leaves only the abort */
        if (coll_settle(c, c->finalize(c->comm)) == ncclSuccess)
            c->destroy(c->comm);
        else
            c->abort_(c->comm);
    }
    if (c->dbuf)
        cudaFree(c->dbuf);
    if (c->hs)
        cudaStreamDestroy(c->hs);
    if (c->lib)
        dlclose(c->lib);
    free(c);
}

extern "C" xs_status xs_coll_open(xs_coll **out)
{
    *out = NULL;
    int v = 0;
    XS_TRY(xs_nccl_version(&v)); /* loads and version-checks NCCL (cuda/common/nccl.cu) */
    int rank, n, have;
    XS_TRY(xs_rank_env(&rank, &n, NULL, &have));
    unsigned char id[XS_NCCL_ID_BYTES];
    int have_id = 0;
    XS_TRY(xs_rank_env_id(XS_NCCL_COLL_ID_VAR, id, &have_id));
    if (n > 1 && !have_id)
        return xs_seterr(XS_EINVAL, "%s is not set (rank %d of %d: bench ranks get the id of the "
                         "collectives' communicator from the -g/--gpus launcher)",
                         XS_NCCL_COLL_ID_VAR, rank, n);
    xs_coll *c = (xs_coll *)calloc(1, sizeof *c);
    if (!c)
        return xs_seterr(XS_ENOMEM, "out of host memory");
    c->rank = rank;
    c->nranks = n;
    xs_status tst = xs_rank_timeout(&c->timeout_s);
    if (tst != XS_OK) {
        free(c);
        return tst;
    }
    /* the very library the windows loaded: dlopen of a loaded object returns it */
    c->lib = dlopen(xs_nccl_lib_path(), RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) {
        const char *e = dlerror();
        xs_coll_close(c, 0);
        return xs_seterr(XS_ENCCL, "NCCL at %s: %s", xs_nccl_lib_path(), e ? e : "dlopen failed");
    }
    const char *missing = NULL;
#define COLL_SYM(field, name)                                                                 \
    do {                                                                                      \
        c->field = (decltype(c->field))dlsym(c->lib, name);                                   \
        if (!c->field && !missing)                                                            \
            missing = name;                                                                   \
    } while (0)
    COLL_SYM(init_rank_config, "ncclCommInitRankConfig");
    COLL_SYM(async_error, "ncclCommGetAsyncError");
    COLL_SYM(group_start, "ncclGroupStart");
    COLL_SYM(group_end, "ncclGroupEnd");
    COLL_SYM(send, "ncclSend");
    COLL_SYM(recv, "ncclRecv");
    COLL_SYM(all_reduce, "ncclAllReduce");
    COLL_SYM(reduce_scatter, "ncclReduceScatter");
    COLL_SYM(all_gather, "ncclAllGather");
    COLL_SYM(finalize, "ncclCommFinalize");
    COLL_SYM(destroy, "ncclCommDestroy");
    COLL_SYM(abort_, "ncclCommAbort");
    COLL_SYM(error_string, "ncclGetErrorString");
    COLL_SYM(last_error, "ncclGetLastError");
#undef COLL_SYM
    c->alltoall = (decltype(c->alltoall))dlsym(c->lib, "ncclAlltoAll");
    if (missing) {
        xs_coll_close(c, 0);
        return xs_seterr(XS_ENCCL, "NCCL at %s lacks %s", xs_nccl_lib_path(), missing);
    }
    if (!have_id) {
        /* one rank, no launcher: our own id */
        xs_status st = xs_nccl_unique_id(id);
        if (st != XS_OK) {
            xs_coll_close(c, 0);
            return st;
        }
    }
    setenv("NCCL_NVLS_ENABLE", "0", 0); /* as for the windows: no multicast objects */
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    /* non-blocking, polled against XS_RANK_TIMEOUT: a rank that never joins fails the others
     * within the bound (the communicator stays non-blocking: COLL_CALL waits on each call) */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t comm = NULL;
    ncclResult_t r = c->init_rank_config(&comm, n, u, rank, &cfg);
    c->comm = comm;
    xs_status ist = c->comm ? coll_result(c, r, "ncclCommInitRank (collectives)")
                            : coll_fail(c, "ncclCommInitRank (collectives)",
                                        r != ncclSuccess ? r : ncclInternalError);
    if (ist != XS_OK) {
        xs_coll_close(c, 1);
        return ist;
    }
    cudaError_t e = cudaMalloc((void **)&c->dbuf, 64 * sizeof(double));
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&c->hs, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        xs_coll_close(c, 1);
        return xs_seterr(XS_ECUDA, "collectives' scratch: %s", cudaGetErrorString(e));
    }
    *out = c;
    return XS_OK;
}

extern "C" xs_status xs_coll_sendrecv(xs_coll *c, const void *const *send,
                                      const size_t *send_bytes, const int *send_peer, int nsend,
                                      void *const *recv, const size_t *recv_bytes,
                                      const int *recv_peer, int nrecv, void *s)
{
    COLL_CALL(c, c->group_start(), "ncclGroupStart");
    ncclResult_t r = ncclSuccess;
    const char *what = "";
    for (int i = 0; i < nsend && (r == ncclSuccess || r == ncclInProgress); i++)
        if (send_bytes[i])
            r = c->send(send[i], send_bytes[i], ncclInt8, send_peer[i], c->comm,
                        (cudaStream_t)s), what = "ncclSend";
    for (int i = 0; i < nrecv && (r == ncclSuccess || r == ncclInProgress); i++)
        if (recv_bytes[i])
            r = c->recv(recv[i], recv_bytes[i], ncclInt8, recv_peer[i], c->comm,
                        (cudaStream_t)s), what = "ncclRecv";
    ncclResult_t re = c->group_end();
    if (r != ncclSuccess && r != ncclInProgress)
        return coll_fail(c, what, r);
    COLL_CALL(c, re, "ncclGroupEnd (grouped send/recv)");
    return XS_OK;
}

extern "C" xs_status xs_coll_alltoall(xs_coll *c, const void *send, void *recv, size_t bytes,
                                      void *s)
{
    if (c->alltoall) {
        COLL_CALL(c, c->alltoall(send, recv, bytes, ncclInt8, c->comm, (cudaStream_t)s),
                  "ncclAlltoAll");
        return XS_OK;
    }
    /* older library: the same as grouped send/recv */
    COLL_CALL(c, c->group_start(), "ncclGroupStart");
    ncclResult_t r = ncclSuccess;
    for (int p = 0; p < c->nranks && (r == ncclSuccess || r == ncclInProgress); p++) {
        r = c->send((const char *)send + (size_t)p * bytes, bytes, ncclInt8, p, c->comm,
                    (cudaStream_t)s);
        if (r == ncclSuccess || r == ncclInProgress)
            r = c->recv((char *)recv + (size_t)p * bytes, bytes, ncclInt8, p, c->comm,
                        (cudaStream_t)s);
    }
    ncclResult_t re = c->group_end();
    if (r != ncclSuccess && r != ncclInProgress)
        return coll_fail(c, "ncclSend/ncclRecv (all-to-all)", r);
    COLL_CALL(c, re, "ncclGroupEnd (all-to-all)");
    return XS_OK;
}

extern "C" xs_status xs_coll_reduce_scatter_bf16(xs_coll *c, const void *send, void *recv,
                                                 size_t count, void *s)
{
    COLL_CALL(c, c->reduce_scatter(send, recv, count, ncclBfloat16, ncclSum, c->comm,
                                   (cudaStream_t)s),
              "ncclReduceScatter");
    return XS_OK;
}

extern "C" xs_status xs_coll_all_gather(xs_coll *c, const void *send, void *recv, size_t bytes,
                                        void *s)
{
    COLL_CALL(c, c->all_gather(send, recv, bytes, ncclInt8, c->comm, (cudaStream_t)s),
              "ncclAllGather");
    return XS_OK;
}

extern "C" xs_status xs_coll_max(xs_coll *c, double *v, int n)
{
    if (n < 1 || n > 64)
        return xs_seterr(XS_EINVAL, "xs_coll_max: %d values (1..64)", n);
    XS_CU(cudaMemcpyAsync(c->dbuf, v, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice, c->hs));
    COLL_CALL(c, c->all_reduce(c->dbuf, c->dbuf, (size_t)n, ncclFloat64, ncclMax, c->comm, c->hs),
              "ncclAllReduce (max)");
    XS_CU(cudaMemcpyAsync(v, c->dbuf, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost, c->hs));
    /* a host collective: bounded, so that a rank that stopped fails the others in one line */
    const double deadline = xs_now_s() + c->timeout_s;
    for (;;) {
        cudaError_t e = cudaStreamQuery(c->hs);
        if (e == cudaSuccess)
            break;
        if (e != cudaErrorNotReady)
            return xs_seterr(XS_ECUDA, "ncclAllReduce (max, rank %d of %d): %s", c->rank,
                             c->nranks, cudaGetErrorString(e));
        ncclResult_t ae = ncclSuccess;
        if (c->async_error(c->comm, &ae) == ncclSuccess && ae != ncclSuccess &&
            ae != ncclInProgress)
            return coll_fail(c, "ncclAllReduce (max)", ae);
        if (xs_now_s() > deadline)
            return xs_seterr(XS_ETIMEOUT, "ncclAllReduce (max, rank %d of %d): not complete "
                             "within %g s (XS_RANK_TIMEOUT): a rank stopped taking part",
                             c->rank, c->nranks, c->timeout_s);
        struct timespec t = {0, 50000};
        nanosleep(&t, NULL);
    }
    return XS_OK;
}

extern "C" xs_status xs_coll_barrier(xs_coll *c)
{
    double v = 0;
    return xs_coll_max(c, &v, 1);
}

/* NCCL's own all-to-all bandwidth on this machine, for comparison with the calibrated R of the
 * peer path (docs/TRANSPORT.md): ncclAlltoAll of `bytes` per rank pair, median of 10 after 2
 * warm-up, events around each call. Collective: every rank calls it; rank 0 prints. */
extern "C" xs_status xs_coll_alltoall_bw(xs_coll *c, size_t bytes, double *peer_gbps)
{
    const int n = xs_coll_nranks(c);
    char *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double t[10];
    xs_status st = XS_OK;
    XS_CU_FIRST(st, cudaMalloc((void **)&a, (size_t)n * bytes));
    XS_CU_FIRST(st, cudaMalloc((void **)&b, (size_t)n * bytes));
    XS_CU_FIRST(st, cudaEventCreate(&e0));
    XS_CU_FIRST(st, cudaEventCreate(&e1));
    if (st == XS_OK)
        XS_CU_FIRST(st, cudaMemset(a, 0x3c, (size_t)n * bytes));
    for (int it = 0; it < 12 && st == XS_OK; it++) {
        XS_CU_FIRST(st, cudaEventRecord(e0, 0));
        if (st == XS_OK)
            st = xs_coll_alltoall(c, a, b, bytes, 0);
        XS_CU_FIRST(st, cudaEventRecord(e1, 0));
        XS_CU_FIRST(st, cudaEventSynchronize(e1));
        float ms = 0;
        XS_CU_FIRST(st, cudaEventElapsedTime(&ms, e0, e1));
        if (it >= 2)
            t[it - 2] = ms * 1e3;
    }
    if (st == XS_OK) {
        const double us = xs_median(t, 10), lo = xs_min(t, 10), hi = xs_max(t, 10);
        const double to_peers = (double)(n - 1) * bytes / (us * 1e3);
        if (peer_gbps)
            *peer_gbps = to_peers;
        printf("# nccl: ncclAlltoAll of %.1f MiB per rank pair over %d ranks: %.1f us median "
               "[%.1f, %.1f]; to the peers %.1f GB/s per GPU ((N-1) x bytes / time), algbw %.1f "
               "GB/s (N x bytes / time)\n", bytes / 1048576.0, n, us, lo, hi, to_peers,
               (double)n * bytes / (us * 1e3));
    }
    if (a)
        cudaFree(a);
    if (b)
        cudaFree(b);
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    return st;
}
