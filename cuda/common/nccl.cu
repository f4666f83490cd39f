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
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

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
    decltype(&ncclCommInitRank) comm_init_rank;
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

/* Candidates in order; *n set. The pip wheel nvidia-nccl-cu13 installs nvidia/nccl/lib/
 * libnccl.so.2 (the cu13 umbrella layout nvidia/cu13/lib is searched as well). */
static int candidates(char paths[][1024], int cap)
{
    int n = 0;
    const char *home = getenv("HOME"), *venv = getenv("VIRTUAL_ENV"),
               *conda = getenv("CONDA_PREFIX");
    char pat[64][1024];
    int np = 0;
    const char *tails[] = {"nvidia/nccl/lib/libnccl.so.2", "nvidia/cu13/lib/libnccl.so.2",
                           "nvidia/*/lib/libnccl.so.2"};
    const char *roots[] = {"/opt/torch/.venv/lib/python3*/site-packages", NULL, NULL, NULL,
                           "/opt/*/.venv/lib/python3*/site-packages",
                           "/opt/*/lib/python3*/site-packages",
                           "/usr/local/lib/python3*/dist-packages",
                           "/usr/local/lib/python3*/site-packages",
                           "/usr/lib/python3*/dist-packages", "/usr/lib/python3/dist-packages"};
    char r1[512] = "", r2[512] = "", r3[512] = "";
    if (venv)
        snprintf(r1, sizeof r1, "%s/lib/python3*/site-packages", venv), roots[1] = r1;
    if (conda)
        snprintf(r2, sizeof r2, "%s/lib/python3*/site-packages", conda), roots[2] = r2;
    if (home)
        snprintf(r3, sizeof r3, "%s/.local/lib/python3*/site-packages", home), roots[3] = r3;
    for (size_t r = 0; r < sizeof roots / sizeof roots[0]; r++)
        for (size_t t = 0; roots[r] && t < sizeof tails / sizeof tails[0] && np < 64; t++)
            snprintf(pat[np++], sizeof pat[0], "%s/%s", roots[r], tails[t]);
    /* PYTHONPATH entries are site-packages-like too */
    const char *pp = getenv("PYTHONPATH");
    while (pp && *pp && np < 64) {
        const char *e = strchr(pp, ':');
        size_t len = e ? (size_t)(e - pp) : strlen(pp);
        if (len && len < 900)
            snprintf(pat[np++], sizeof pat[0], "%.*s/nvidia/*/lib/libnccl.so.2", (int)len, pp);
        pp = e ? e + 1 : NULL;
    }
    for (int i = 0; i < np && n < cap; i++) {
        glob_t g;
        if (glob(pat[i], 0, NULL, &g) == 0)
            for (size_t j = 0; j < g.gl_pathc && n < cap; j++) {
                int dup = 0;
                for (int k = 0; k < n; k++)
                    dup |= !strcmp(paths[k], g.gl_pathv[j]);
                if (!dup)
                    snprintf(paths[n++], 1024, "%s", g.gl_pathv[j]);
            }
        globfree(&g);
    }
    if (n < cap)
        snprintf(paths[n++], 1024, "/usr/local/cuda/lib64/libnccl.so.2");
    if (n < cap)
        snprintf(paths[n++], 1024, "libnccl.so.2");
    return n;
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
        static char paths[32][1024];
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
            return xs_seterr(XS_ENCCL, "NCCL not found (tried pip wheels nvidia/nccl and "
                             "nvidia/cu13 under /opt/torch/.venv and other site-packages, "
                             "/usr/local/cuda/lib64, libnccl.so.2; set XS_NCCL_LIB): %s", err);
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
    NC_SYM(comm_init_rank, "ncclCommInitRank");
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

/* ncclCommInitRank, one line on failure (a communicator that failed to initialise is NCCL's to
 * clean up, not ours). */
static xs_status init_rank(ncclComm_t *out, int nranks, ncclUniqueId u, int rank)
{
    *out = NULL;
    ncclResult_t r = nc.comm_init_rank(out, nranks, u, rank);
    if (r == ncclSuccess)
        return XS_OK;
    *out = NULL;
    char what[64];
    snprintf(what, sizeof what, "ncclCommInitRank(rank %d of %d)", rank, nranks);
    return nccl_fail(NULL, what, r);
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

    /* blocking init: a missing peer is bounded by the launcher's timeout, which kills all */
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
        ncclResult_t r = nc.comm_split(root.comm, 0, rank, &comm, NULL);
        if (r != ncclSuccess || !comm) {
            snprintf(what, sizeof what, "ncclCommSplit(rank %d of %d) for a window set", rank,
                     nranks);
            st = nccl_fail(root.comm, what, r != ncclSuccess ? r : ncclInternalError);
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
