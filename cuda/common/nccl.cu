// SPDX-License-Identifier: Apache-2.0
/*
 * nccl.cu - NCCL loaded at run time, its version checked, and its device API turned into plain
 * pointers: one symmetric window per rank and the LSA pointer of every peer's window.
 *
 * C++ only here (nccl_device.h is C++), behind extern "C". The host API is reached through
 * dlsym, so the tool starts without NCCL; the device side is header-only (ncclGetLsaPointer in a
 * setup kernel). The pointer table that kernels use is filled from that kernel's output; after
 * setup no kernel needs NCCL types. docs/TRANSPORT.md gives the recipe and its pitfalls.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include "libpath.h"
#include "nvtx_launch.h"
#include "xstage_cuda.h"
#include "xstage_exchange.h"
#include "xstage_launch.h"
#include "xstage_win.h"

#define XS_NCCL_MIN_VERSION 22807 /* 2.28.7: first release with one-rank symmetric windows */

/* ---- loading ---------------------------------------------------------------------------- */

static struct {
    void *lib;
    int version;
    char path[1024];
    decltype(&ncclGetVersion) get_version;
    decltype(&ncclGetUniqueId) get_unique_id;
    decltype(&ncclCommInitRankConfig) comm_init_rank_config;
    decltype(&ncclCommGetAsyncError) comm_get_async_error;
    decltype(&ncclCommSplit) comm_split;
    decltype(&ncclMemAlloc) mem_alloc;
    decltype(&ncclMemFree) mem_free;
    decltype(&ncclCommWindowRegister) window_register;
    decltype(&ncclCommWindowDeregister) window_deregister;
    decltype(&ncclDevCommCreate) dev_comm_create;
    decltype(&ncclDevCommDestroy) dev_comm_destroy;
    decltype(&ncclCommFinalize) comm_finalize;
    decltype(&ncclCommDestroy) comm_destroy;
    decltype(&ncclCommAbort) comm_abort;
    decltype(&ncclGetErrorString) error_string;
    decltype(&ncclGetLastError) last_error;
} nc;

extern "C" int xs_nccl_loaded_version(void) { return nc.lib ? nc.version : 0; }
extern "C" const char *xs_nccl_lib_path(void) { return nc.lib ? nc.path : ""; }

static void vstr(int v, char *out, size_t cap)
{
    snprintf(out, cap, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

/* A loaded candidate: resolve the version; returns the handle or NULL (err says why). */
static void *open_candidate(const char *path, int *version, char *real, size_t rcap, char *err,
                            size_t ecap)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(err, ecap, "%s", e ? e : path);
        return NULL;
    }
    decltype(&ncclGetVersion) gv = (decltype(&ncclGetVersion))dlsym(h, "ncclGetVersion");
    int v = 0;
    if (!gv || gv(&v) != ncclSuccess) {
        snprintf(err, ecap, "%s: ncclGetVersion missing or failed", path);
        dlclose(h);
        return NULL;
    }
    Dl_info di;
    if (dladdr((void *)gv, &di) && di.dli_fname)
        snprintf(real, rcap, "%s", di.dli_fname);
    else
        snprintf(real, rcap, "%s", path);
    *version = v;
    return h;
}

/* Candidates in order (src/libpath.h): the active Python environment's pip wheels
 * (nvidia-nccl-cu13 installs nvidia/nccl/lib/libnccl.so.2; the cu13 umbrella layout is
 * nvidia/cu13/lib), then the system loader's libnccl.so.2, then the CUDA toolkit's lib64. */
static int candidates(char paths[][XS_LIBPATH_MAX], int cap)
{
    static const char *const tails[] = {"nvidia/nccl/lib/libnccl.so.2",
                                        "nvidia/cu13/lib/libnccl.so.2",
                                        "nvidia/*/lib/libnccl.so.2"};
    static const char *const names[] = {"libnccl.so.2"};
    return xs_lib_candidates(tails, 3, names, 1, paths, cap);
}

#define NC_SYM(field, name)                                                                   \
    do {                                                                                      \
        nc.field = (decltype(nc.field))dlsym(nc.lib, name);                                   \
        if (!nc.field)                                                                        \
            missing = name;                                                                   \
    } while (0)

static xs_status nccl_load(void)
{
    if (nc.lib)
        return XS_OK;
    char err[512] = "", real[1024] = "";
    int v = 0;
    void *h = NULL;
    const char *env = getenv("XS_NCCL_LIB");
    if (env && *env) {
        h = open_candidate(env, &v, real, sizeof real, err, sizeof err);
        if (!h)
            return xs_seterr(XS_ENCCL, "NCCL cannot be loaded from XS_NCCL_LIB=%s: %s", env, err);
    } else {
        static char paths[32][XS_LIBPATH_MAX];
        int n = candidates(paths, 32);
        int old_v = 0;
        char old_path[1024] = "";
        for (int i = 0; i < n && !h; i++) {
            int cv = 0;
            char cr[1024];
            void *ch = open_candidate(paths[i], &cv, cr, sizeof cr, err, sizeof err);
            if (!ch)
                continue;
            if (cv >= XS_NCCL_MIN_VERSION) {
                h = ch, v = cv;
                snprintf(real, sizeof real, "%s", cr);
            } else if (!old_v) {
                /* remember the first too-old one for the message; keep looking */
                old_v = cv;
                snprintf(old_path, sizeof old_path, "%s", cr);
            }
        }
        if (!h && old_v) {
            char vs[32];
            vstr(old_v, vs, sizeof vs);
            return xs_seterr(XS_ENCCL, "NCCL %s at %s is too old: 2.28.7 or newer is needed "
                             "(older releases reject one-rank and symmetric windows); set "
                             "XS_NCCL_LIB", vs, old_path);
        }
        if (!h)
            return xs_seterr(XS_ENCCL, "NCCL not found (tried %d places: the active Python "
                             "environment's nvidia-nccl wheel, the system's libnccl.so.2, the "
                             "CUDA toolkit's lib64; set XS_NCCL_LIB or activate the venv that "
                             "has nvidia-nccl-cu13, docs/INSTALL.md): %s", n, err);
    }
    if (v < XS_NCCL_MIN_VERSION) {
        char vs[32];
        vstr(v, vs, sizeof vs);
        dlclose(h);
        return xs_seterr(XS_ENCCL, "NCCL %s at %s is too old: 2.28.7 or newer is needed (older "
                         "releases reject one-rank and symmetric windows)", vs, real);
    }
    nc.lib = h;
    const char *missing = NULL;
    NC_SYM(get_version, "ncclGetVersion");
    NC_SYM(get_unique_id, "ncclGetUniqueId");
    NC_SYM(comm_init_rank_config, "ncclCommInitRankConfig");
    NC_SYM(comm_get_async_error, "ncclCommGetAsyncError");
    NC_SYM(comm_split, "ncclCommSplit");
    NC_SYM(mem_alloc, "ncclMemAlloc");
    NC_SYM(mem_free, "ncclMemFree");
    NC_SYM(window_register, "ncclCommWindowRegister");
    NC_SYM(window_deregister, "ncclCommWindowDeregister");
    NC_SYM(dev_comm_create, "ncclDevCommCreate");
    NC_SYM(dev_comm_destroy, "ncclDevCommDestroy");
    NC_SYM(comm_finalize, "ncclCommFinalize");
    NC_SYM(comm_destroy, "ncclCommDestroy");
    NC_SYM(comm_abort, "ncclCommAbort");
    NC_SYM(error_string, "ncclGetErrorString");
    NC_SYM(last_error, "ncclGetLastError");
    if (missing) {
        dlclose(h);
        memset(&nc, 0, sizeof nc);
        return xs_seterr(XS_ENCCL, "NCCL at %s lacks %s", real, missing);
    }
    nc.version = v;
    snprintf(nc.path, sizeof nc.path, "%s", real);
    return XS_OK;
}

extern "C" xs_status xs_nccl_version(int *version)
{
    *version = 0;
    XS_TRY(nccl_load());
    *version = nc.version;
    return XS_OK;
}

/* NVLink SHARP needs multicast objects we never use (and must not create): keep it off unless the
 * user chose otherwise. Set before any communicator exists. */
static void nccl_env(void) { setenv("NCCL_NVLS_ENABLE", "0", 0); }

/* One-line NCCL failure: the call, NCCL's error string and its last-error text. */
static xs_status nccl_fail(ncclComm_t comm, const char *what, ncclResult_t r)
{
    const char *last = nc.last_error ? nc.last_error(comm) : NULL;
    return xs_seterr(XS_ENCCL, "%s: %s%s%s%s", what, nc.error_string ? nc.error_string(r) : "?",
                     last && *last ? " (" : "", last && *last ? last : "",
                     last && *last ? ")" : "");
}

extern "C" xs_status xs_nccl_unique_id(unsigned char id[128])
{
    XS_TRY(nccl_load());
    nccl_env();
    ncclUniqueId u;
    ncclResult_t r = nc.get_unique_id(&u);
    if (r != ncclSuccess)
        return nccl_fail(NULL, "ncclGetUniqueId", r);
    static_assert(sizeof u == 128, "ncclUniqueId is 128 bytes");
    memcpy(id, &u, sizeof u);
    return XS_OK;
}

/* ---- communicator and window ----------------------------------------------------------------- */

struct xs_nccl_comm {
    ncclComm_t comm;
    void *base;         /* ncclMemAlloc pointer of this rank's window */
    size_t bytes;       /* registered size (multiple of 4096) */
    ncclWindow_t win;   /* NULL until registered */
    int have_dev;
    int nranks, rank;
    /* ncclDevComm as written by the library: room to spare in case the loaded 2.28.x release
     * lays it out larger than the headers this was compiled with */
    alignas(64) unsigned char dev[sizeof(ncclDevComm) + 4096];
};

/* LSA pointer of every rank's window, offset 0. One thread per rank. */
__global__ void xs_lsa_ptrs_kernel(ncclWindow_t win, int nranks, void **out)
{
    int p = (int)threadIdx.x;
    if (p < nranks)
        out[p] = ncclGetLsaPointer(win, 0, p);
}

extern "C" void xs_nccl_close(xs_nccl_comm *c, int abort)
{
    if (!c)
        return;
    cudaDeviceSynchronize(); /* no kernel may still use the window */
    if (c->comm && abort) {
        nc.comm_abort(c->comm);
    } else if (c->comm) {
        if (c->have_dev)
            nc.dev_comm_destroy(c->comm, (const ncclDevComm *)c->dev);
        if (c->win)
            nc.window_deregister(c->comm, c->win);
        nc.comm_finalize(c->comm);
        nc.comm_destroy(c->comm);
    }
    if (c->base)
        nc.mem_free(c->base);
    free(c);
}

/* Wait for a non-blocking communicator's pending operation (r = ncclInProgress) until the
 * deadline (xs_now_s() seconds). Returns its final result, or ncclInProgress when the deadline
 * passed first. */
static ncclResult_t settle(ncclComm_t comm, ncclResult_t r, double deadline)
{
    while (r == ncclInProgress) {
        if (nc.comm_get_async_error(comm, &r) != ncclSuccess)
            return ncclInternalError;
        if (r != ncclInProgress || xs_now_s() > deadline)
            break;
        struct timespec t = {0, 200000}; /* 0.2 ms: set-up takes milliseconds to seconds */
        nanosleep(&t, NULL);
    }
    return r;
}

/* A communicator's set-up (ncclCommInitRankConfig, ncclCommSplit), bounded by XS_RANK_TIMEOUT:
 * r is the call's result, *comm its communicator. On failure or at the deadline the
 * communicator is aborted, *comm is NULL and one line names the call; a rank that never joins
 * makes every other rank's set-up fail this way (XS_ETIMEOUT). */
static xs_status setup_done(ncclComm_t *comm, ncclResult_t r, double timeout_s,
                            const char *what)
{
    if (r == ncclInProgress && *comm)
        r = settle(*comm, r, xs_now_s() + timeout_s);
    if (r == ncclSuccess)
        return XS_OK;
    xs_status st;
    if (r == ncclInProgress)
        st = xs_seterr(XS_ETIMEOUT, "%s: not complete within %g s (XS_RANK_TIMEOUT): a rank did "
                       "not join or cannot be reached", what, timeout_s);
    else
        st = nccl_fail(*comm, what, r);
    if (*comm)
        nc.comm_abort(*comm);
    *comm = NULL;
    return st;
}

/* ncclCommInitRank; with more than one rank as a non-blocking communicator polled against
 * XS_RANK_TIMEOUT, so that a missing rank fails this one within the bound instead of blocking
 * in NCCL's bootstrap (only the root of nranks > 1 is non-blocking: the window sets' are split
 * from it as blocking ones). One line on failure. */
static xs_status init_rank(ncclComm_t *out, int nranks, ncclUniqueId u, int rank)
{
    *out = NULL;
    double timeout_s;
    XS_TRY(xs_rank_timeout(&timeout_s));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    /* one rank waits for nobody, and its communicator carries the window itself: blocking */
    cfg.blocking = nranks == 1;
    ncclResult_t r = nc.comm_init_rank_config(out, nranks, u, rank, &cfg);
    char what[64];
    snprintf(what, sizeof what, "ncclCommInitRank(rank %d of %d)", rank, nranks);
    return setup_done(out, r, timeout_s, what);
}

extern "C" xs_status xs_nccl_open(int nranks, int rank, const unsigned char id[128],
                                  size_t win_bytes, xs_nccl_comm **out, void **local,
                                  void **peers)
{
    *out = NULL;
    XS_TRY(nccl_load());
    if (nc.version / 100 != NCCL_MAJOR * 100 + NCCL_MINOR) {
        char vs[32];
        vstr(nc.version, vs, sizeof vs);
        return xs_seterr(XS_ENCCL, "NCCL %s at %s: this build uses the device API of NCCL %d.%d "
                         "(headers %d.%d.%d), whose window layout other releases may change; set "
                         "XS_NCCL_LIB to a 2.28.7+ %d.%d.x library", vs, nc.path, NCCL_MAJOR,
                         NCCL_MINOR, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_MAJOR, NCCL_MINOR);
    }
    if (nranks < 1 || nranks > XS_MAX_RANKS || rank < 0 || rank >= nranks)
        return xs_seterr(XS_EINVAL, "NCCL communicator: rank %d of %d (1..%d ranks)", rank,
                         nranks, XS_MAX_RANKS);
    nccl_env();
    xs_nccl_comm *c = (xs_nccl_comm *)calloc(1, sizeof *c);
    if (!c)
        return xs_seterr(XS_ENOMEM, "out of host memory");
    c->nranks = nranks;
    c->rank = rank;
    c->bytes = (win_bytes + NCCL_WIN_REQUIRED_ALIGNMENT - 1) / NCCL_WIN_REQUIRED_ALIGNMENT *
               NCCL_WIN_REQUIRED_ALIGNMENT;
    void **dptrs = NULL;
    xs_status st = XS_OK;
    char what[160];
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);

#define NC_STEP(call, ...)                                                                    \
    do {                                                                                      \
        ncclResult_t r_ = (call);                                                             \
        if (r_ != ncclSuccess) {                                                              \
            snprintf(what, sizeof what, __VA_ARGS__);                                         \
            st = nccl_fail(c->comm, what, r_);                                                \
            goto fail;                                                                        \
        }                                                                                     \
    } while (0)

    /* init bounded by XS_RANK_TIMEOUT (init_rank); the window sets' communicators are blocking
     * (the calls on them need no polling), split from a root that every rank has joined */
    if (nranks == 1) {
        if ((st = init_rank(&c->comm, nranks, u, rank)) != XS_OK)
            goto fail;
    } else {
        /* A unique id bootstraps one communicator only: its root's listening socket is gone
         * once the first init returns, so a second ncclCommInitRank on the launcher's id fails
         * ("connect ... Connection refused"; bench ep opens windows per point). The id's first
         * use makes a root communicator that lives as long as the process and only bootstraps;
         * every window set gets its own communicator split from it (collective on the root: the
         * ranks open window sets in lockstep), which xs_nccl_close destroys as before. */
        static struct {
            ncclComm_t comm;
            unsigned char id[128];
            int nranks, rank;
        } root;
        if (!root.comm || memcmp(root.id, id, sizeof root.id) || root.nranks != nranks ||
            root.rank != rank) {
            ncclComm_t comm = NULL;
            if ((st = init_rank(&comm, nranks, u, rank)) != XS_OK)
                goto fail;
            root.comm = comm; /* a previous root (another id) is left alone: rare, and harmless */
            memcpy(root.id, id, sizeof root.id);
            root.nranks = nranks;
            root.rank = rank;
        }
        ncclComm_t comm = NULL;
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 1;
        double timeout_s;
        if ((st = xs_rank_timeout(&timeout_s)) != XS_OK)
            goto fail;
        ncclResult_t r = nc.comm_split(root.comm, 0, rank, &comm, &cfg);
        snprintf(what, sizeof what, "ncclCommSplit(rank %d of %d) for a window set", rank,
                 nranks);
        if ((st = setup_done(&comm, r, timeout_s, what)) != XS_OK)
            goto fail;
        if (!comm) {
            st = nccl_fail(root.comm, what, ncclInternalError);
            goto fail;
        }
        c->comm = comm;
    }
    /* window memory must come from ncclMemAlloc (cuMem); plain cudaMalloc cannot register */
    NC_STEP(nc.mem_alloc(&c->base, c->bytes), "ncclMemAlloc(%.1f MiB) for the peer window",
            c->bytes / 1048576.0);
    /* zero before registering: no peer holds a pointer to it until registration returns, so a
     * fast peer's first flag store cannot be wiped by this rank's initialisation */
    XS_CU_GOTO(st, fail, cudaMemset(c->base, 0, c->bytes));
    XS_CU_GOTO(st, fail, cudaDeviceSynchronize());
    NC_STEP(nc.window_register(c->comm, c->base, c->bytes, &c->win, NCCL_WIN_COLL_SYMMETRIC),
            "ncclCommWindowRegister(%.1f MiB, symmetric)", c->bytes / 1048576.0);
    {
        /* 2.28 takes a zeroed requirements struct (2.29 wants its initializer macro); we need
         * no barriers or resources from NCCL: our signals and barrier are plain flags */
        alignas(64) unsigned char reqs[sizeof(ncclDevCommRequirements) + 1024];
        memset(reqs, 0, sizeof reqs);
        memset(c->dev, 0, sizeof c->dev);
        NC_STEP(nc.dev_comm_create(c->comm, (const ncclDevCommRequirements *)reqs,
                                   (ncclDevComm *)c->dev),
                "ncclDevCommCreate");
        c->have_dev = 1;
        const ncclDevComm *dc = (const ncclDevComm *)c->dev;
        if (dc->nRanks != nranks || dc->rank != rank) {
            st = xs_seterr(XS_ENCCL, "ncclDevCommCreate: device communicator says rank %d of %d, "
                           "expected %d of %d", dc->rank, dc->nRanks, rank, nranks);
            goto fail;
        }
        if (dc->lsaSize != nranks || dc->lsaRank != rank) {
            st = xs_seterr(XS_ENCCL, "only %d of %d ranks are load/store accessible from rank %d "
                           "(LSA rank %d): every rank must be on one NVLink domain (across nodes "
                           "LSA does not reach; NCCL's GIN would be needed)", dc->lsaSize, nranks,
                           rank, dc->lsaRank);
            goto fail;
        }
    }
    XS_CU_GOTO(st, fail, cudaMalloc((void **)&dptrs, (size_t)nranks * sizeof(void *)));
    XS_NVTX_LAUNCH("xs_lsa_ptrs_kernel", xs_lsa_ptrs_kernel<<<1, 64>>>(c->win, nranks, dptrs));
    XS_CU_GOTO(st, fail, cudaGetLastError());
    XS_CU_GOTO(st, fail, cudaMemcpy(peers, dptrs, (size_t)nranks * sizeof(void *),
                                    cudaMemcpyDeviceToHost));
    cudaFree(dptrs);
    dptrs = NULL;
    for (int p = 0; p < nranks; p++)
        if (!peers[p] || ((uintptr_t)peers[p] & 4095)) {
            st = xs_seterr(XS_ENCCL, "ncclGetLsaPointer gave %p for rank %d (expected a 4096-byte "
                           "aligned window)", peers[p], p);
            goto fail;
        }
    *local = c->base;
    *out = c;
    return XS_OK;
fail:
    if (dptrs)
        cudaFree(dptrs);
    /* a half-built communicator: abort (no collective steps a failed peer would never join) */
    xs_nccl_close(c, 1);
    return st;
#undef NC_STEP
}

/* ---- launcher hooks ------------------------------------------------------------------------ */

extern "C" int xs_launch_or_run(int ngpus, int argc, char **argv, int *exit_code)
{
    xs_launch_hooks h;
    h.count_gpus = xs_gpu_count;
    h.make_id = xs_nccl_unique_id;
    return xs_launch_or_run_with(ngpus, argc, argv, &h, NULL, exit_code);
}
