// SPDX-License-Identifier: Apache-2.0
/*
 * byo_nccl.cuh - byo's -g window: an NCCL symmetric window per rank, stored into by the previous
 * rank through NCCL's load/store-accessible (LSA) pointers.
 *
 * Ranks come from the launcher's environment (torchrun, mpirun, srun), one rank without one.
 * Rank 0 makes the NCCL unique id and shares it through a file (BYO_ID_FILE, by default one in
 * /tmp named after the launcher's run); every rank then joins one communicator, allocates its
 * window with ncclMemAlloc, registers it (ncclCommWindowRegister, symmetric) and reads the LSA
 * pointer of every peer's window in a setup kernel (ncclGetLsaPointer: NCCL 2.28's device API).
 *
 * Window layout, the same on every rank (a symmetric window):
 *   [0, total)            the previous rank's tiles (with one rank: this rank's own)
 *   done (at flag_off)    uint64: CTAs of the previous rank whose tiles are all stored
 *   bar[nranks]           uint64: one barrier flag per rank
 *
 * NCCL's host API is loaded at run time (dlopen) so that the host path needs no NCCL and the
 * library is the active Python environment's nvidia-nccl wheel rather than an older system one;
 * the device API is header-only. Every wait is bounded by XS_RANK_TIMEOUT seconds (default 120)
 * and ends in one line naming what did not arrive. Built only where nccl_device.h is found.
 */
#ifndef BYO_NCCL_CUH
#define BYO_NCCL_CUH

#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>
#include <nccl_device.h>

#define BYO_NCCL_MIN 22807 /* 2.28.7: the first release that registers one-rank windows */
#define BYO_MAX_RANKS 72   /* one NVLink domain */

/* ---- errors and time ---------------------------------------------------------------------- */

static char byo_err[512];

/* Record one line for the caller to print; returns 1 (a failed step). */
static int byo_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(byo_err, sizeof byo_err, fmt, ap);
    va_end(ap);
    return 1;
}

static double byo_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void byo_nap_ms(int ms)
{
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

/* ---- ranks from the launcher --------------------------------------------------------------- */

typedef struct {
    const char *launcher; /* NULL: none, one rank */
    int rank, nranks, local_rank;
    double timeout_s;     /* XS_RANK_TIMEOUT */
} byo_ranks;

static int byo_int_env(const char *name, long lo, long hi, long *v)
{
    const char *s = getenv(name);
    char *end = NULL;
    errno = 0;
    const long x = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || x < lo || x > hi)
        return byo_fail("%s='%s': not an integer in %ld..%ld", name, s ? s : "", lo, hi);
    *v = x;
    return 0;
}

/* Which rank this process is: the first launcher whose rank and size variables are both set. */
static int byo_ranks_detect(byo_ranks *r)
{
    static const char *const vars[][5] = {
        /* name, rank, size, local rank, also needed */
        {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", NULL},
        {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
         NULL},
        {"mpirun (PMI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", NULL},
        {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_ID"},
    };
    memset(r, 0, sizeof *r);
    r->nranks = 1;
    r->local_rank = -1;
    r->timeout_s = 120;
    const char *t = getenv("XS_RANK_TIMEOUT");
    if (t) {
        char *end = NULL;
        r->timeout_s = strtod(t, &end);
        if (!*t || *end || !(r->timeout_s > 0) || r->timeout_s > 86400)
            return byo_fail("XS_RANK_TIMEOUT='%s': seconds in (0, 86400]", t);
    }
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        if (!getenv(vars[i][1]) || !getenv(vars[i][2]) || (vars[i][4] && !getenv(vars[i][4])))
            continue;
        long n, k, l = -1;
        if (byo_int_env(vars[i][2], 1, BYO_MAX_RANKS, &n) ||
            byo_int_env(vars[i][1], 0, n - 1, &k) ||
            (getenv(vars[i][3]) && byo_int_env(vars[i][3], 0, BYO_MAX_RANKS - 1, &l)))
            return 1;
        r->launcher = vars[i][0];
        r->rank = (int)k;
        r->nranks = (int)n;
        r->local_rank = (int)l;
        return 0;
    }
    return 0;
}

/* ---- the unique id through a file ------------------------------------------------------------ */

/* The file the ranks share: BYO_ID_FILE, else /tmp/byo-nccl-id.<the launcher's run or port>. */
static int byo_id_path(char *path, size_t cap)
{
    const char *f = getenv("BYO_ID_FILE");
    if (f && *f) {
        snprintf(path, cap, "%s", f);
        return 0;
    }
    static const char *const keys[] = {"TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid",
                                       "PMIX_NAMESPACE", "SLURM_JOB_ID", "MASTER_PORT"};
    const char *key = "default";
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (getenv(keys[i]) && *getenv(keys[i])) {
            key = getenv(keys[i]);
            break;
        }
    int n = snprintf(path, cap, "/tmp/byo-nccl-id.%s", key);
    for (char *c = path + strlen("/tmp/byo-nccl-id."); *c; c++)
        if (!(*c == '-' || *c == '.' || *c == '_' || (*c >= '0' && *c <= '9') ||
              (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
            *c = '_';
    return n < (int)cap ? 0 : byo_fail("id file path too long");
}

/* Rank 0 writes "byo-nccl-id1 NRANKS CTAS TOTAL HEX" (written aside, then renamed); every other
 * rank waits for a file of this run (no older than a minute before it started, the same rank
 * count) and checks that rank 0 planned the same window. Bounded by r->timeout_s. */
static int byo_id_share(const byo_ranks *r, const char *path, ncclUniqueId *id, int ctas,
                        unsigned long long total, time_t started)
{
    char hex[2 * sizeof *id + 1];
    if (r->rank == 0) {
        const unsigned char *b = (const unsigned char *)id;
        for (size_t i = 0; i < sizeof *id; i++)
            snprintf(hex + 2 * i, 3, "%02x", b[i]);
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
        FILE *f = fopen(tmp, "w");
        if (!f)
            return byo_fail("id file %s: %s", tmp, strerror(errno));
        const int bad = fprintf(f, "byo-nccl-id1 %d %d %llu %s\n", r->nranks, ctas, total, hex) < 0;
        if ((fclose(f) != 0) | bad || rename(tmp, path) != 0) {
            unlink(tmp);
            return byo_fail("id file %s: cannot write: %s", path, strerror(errno));
        }
        return 0;
    }
    const double deadline = byo_now_s() + r->timeout_s;
    while (byo_now_s() < deadline) {
        struct stat sb;
        FILE *f = stat(path, &sb) == 0 && sb.st_mtime >= started - 60 ? fopen(path, "r") : NULL;
        int n = 0, c = 0;
        unsigned long long t = 0;
        const int got = f ? fscanf(f, "byo-nccl-id1 %d %d %llu %256s", &n, &c, &t, hex) : 0;
        if (f)
            fclose(f);
        if (got == 4 && n == r->nranks && strlen(hex) == 2 * sizeof *id) {
            if (c != ctas || t != total)
                return byo_fail("rank 0 plans %d CTAs and %llu bytes, rank %d %d and %llu: give "
                                "every rank the same --shape, --seed and --ctas", c, t, r->rank,
                                ctas, total);
            unsigned char *b = (unsigned char *)id;
            for (size_t i = 0; i < sizeof *id; i++) {
                unsigned int v;
                sscanf(hex + 2 * i, "%2x", &v);
                b[i] = (unsigned char)v;
            }
            return 0;
        }
        byo_nap_ms(20);
    }
    return byo_fail("rank %d of %d: no NCCL id from rank 0 in %s within %g s (XS_RANK_TIMEOUT; "
                    "set BYO_ID_FILE to one path every rank sees)", r->rank, r->nranks, path,
                    r->timeout_s);
}

/* ---- NCCL, loaded at run time ---------------------------------------------------------------- */

static struct {
    void *lib;
    char path[600];
    int version;
    decltype(&ncclGetVersion) get_version;
    decltype(&ncclGetUniqueId) get_unique_id;
    decltype(&ncclCommInitRankConfig) init_rank_config;
    decltype(&ncclCommGetAsyncError) async_error;
    decltype(&ncclMemAlloc) mem_alloc;
    decltype(&ncclMemFree) mem_free;
    decltype(&ncclCommWindowRegister) win_register;
    decltype(&ncclCommWindowDeregister) win_deregister;
    decltype(&ncclDevCommCreate) dev_create;
    decltype(&ncclDevCommDestroy) dev_destroy;
    decltype(&ncclCommFinalize) finalize;
    decltype(&ncclCommDestroy) destroy;
    decltype(&ncclCommAbort) abort_;
    decltype(&ncclGetErrorString) error_string;
    decltype(&ncclGetLastError) last_error;
} bn;

/* XS_NCCL_LIB, else the active Python environment's nvidia-nccl wheel ($VIRTUAL_ENV, the
 * PyTorch venv on our GPU machines), else the loader's libnccl.so.2. The first that loads is
 * used and must be 2.28.7 or newer, of the headers' major.minor (the device API reads NCCL's
 * window structure, whose layout a later minor release may change). */
static int byo_nccl_load(void)
{
    char cand[8][600];
    int n = 0;
    const char *env = getenv("XS_NCCL_LIB");
    if (env && *env) {
        snprintf(cand[n++], sizeof cand[0], "%s", env);
    } else {
        const char *venv = getenv("VIRTUAL_ENV");
        if (venv && *venv) {
            char pat[600];
            snprintf(pat, sizeof pat, "%s/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
                     venv);
            glob_t g;
            if (glob(pat, 0, NULL, &g) == 0)
                for (size_t i = 0; i < g.gl_pathc && n < 7; i++)
                    snprintf(cand[n++], sizeof cand[0], "%s", g.gl_pathv[i]);
            globfree(&g);
        }
        snprintf(cand[n++], sizeof cand[0], "libnccl.so.2");
    }
    const char *why = "";
    for (int i = 0; i < n && !bn.lib; i++) {
        bn.lib = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
        if (!bn.lib)
            why = dlerror();
        else
            memcpy(bn.path, cand[i], sizeof bn.path); /* both 600 bytes, NUL-terminated */
    }
    if (!bn.lib)
        return byo_fail("NCCL cannot be loaded (%s; set XS_NCCL_LIB or activate the venv with "
                        "nvidia-nccl-cu13)", why ? why : "?");
    const char *missing = NULL;
#define BYO_SYM(field, name)                                                                      \
    if (!(bn.field = (decltype(bn.field))dlsym(bn.lib, name)) && !missing)                        \
        missing = name;
    BYO_SYM(get_version, "ncclGetVersion");
    BYO_SYM(get_unique_id, "ncclGetUniqueId");
    BYO_SYM(init_rank_config, "ncclCommInitRankConfig");
    BYO_SYM(async_error, "ncclCommGetAsyncError");
    BYO_SYM(mem_alloc, "ncclMemAlloc");
    BYO_SYM(mem_free, "ncclMemFree");
    BYO_SYM(win_register, "ncclCommWindowRegister");
    BYO_SYM(win_deregister, "ncclCommWindowDeregister");
    BYO_SYM(dev_create, "ncclDevCommCreate");
    BYO_SYM(dev_destroy, "ncclDevCommDestroy");
    BYO_SYM(finalize, "ncclCommFinalize");
    BYO_SYM(destroy, "ncclCommDestroy");
    BYO_SYM(abort_, "ncclCommAbort");
    BYO_SYM(error_string, "ncclGetErrorString");
    BYO_SYM(last_error, "ncclGetLastError");
#undef BYO_SYM
    if (!bn.get_version || bn.get_version(&bn.version) != ncclSuccess)
        return byo_fail("NCCL at %s: ncclGetVersion missing or failed", bn.path);
    const int v = bn.version;
    if (v < BYO_NCCL_MIN || v / 100 != NCCL_MAJOR * 100 + NCCL_MINOR)
        return byo_fail("NCCL %d.%d.%d at %s: -g needs %d.%d.x (2.28.7 or newer), the release of "
                        "the headers it was built with; set XS_NCCL_LIB", v / 10000,
                        v / 100 % 100, v % 100, bn.path, NCCL_MAJOR, NCCL_MINOR);
    if (missing)
        return byo_fail("NCCL at %s lacks %s", bn.path, missing);
    return 0;
}

/* One line for a failed NCCL call: its name, NCCL's error string and last-error text. */
static int byo_nccl_fail(ncclComm_t comm, const char *what, ncclResult_t r)
{
    const char *last = bn.last_error ? bn.last_error(comm) : NULL;
    return byo_fail("%s: %s%s%s%s", what, bn.error_string(r), last && *last ? " (" : "",
                    last && *last ? last : "", last && *last ? ")" : "");
}

/* A call on a non-blocking communicator: poll until it completes or the deadline passes. */
static int byo_nccl_done(ncclComm_t comm, ncclResult_t r, double timeout_s, const char *what)
{
    const double deadline = byo_now_s() + timeout_s;
    while (r == ncclInProgress && comm) {
        if (bn.async_error(comm, &r) != ncclSuccess)
            r = ncclInternalError;
        if (r == ncclInProgress && byo_now_s() > deadline)
            return byo_fail("%s: not complete within %g s (XS_RANK_TIMEOUT): a rank did not join "
                            "or cannot be reached", what, timeout_s);
        if (r == ncclInProgress)
            byo_nap_ms(1);
    }
    return r == ncclSuccess ? 0 : byo_nccl_fail(comm, what, r);
}

/* ---- the window ------------------------------------------------------------------------------ */

typedef struct {
    byo_ranks ranks;
    int device;
    ncclComm_t comm;
    void *base;                  /* this rank's window (ncclMemAlloc) */
    size_t bytes, flag_off;      /* window size (a multiple of 4096); payload -> done flag */
    ncclWindow_t win;
    int have_dev;
    void *peer[BYO_MAX_RANKS];   /* every rank's window, mapped here (LSA pointers) */
    /* ncclDevComm as the library writes it, with room to spare for a longer 2.28.x layout */
    alignas(64) unsigned char dev[sizeof(ncclDevComm) + 4096];
} byo_nccl;

__global__ void byo_lsa_kernel(ncclWindow_t win, int n, void **out)
{
    if ((int)threadIdx.x < n)
        out[threadIdx.x] = ncclGetLsaPointer(win, 0, (int)threadIdx.x);
}

/* The whole set-up for payload_bytes of tiles: id, communicator, window, peer pointers. On
 * failure byo_err says why and the communicator is aborted. */
static int byo_nccl_open(byo_nccl *w, const byo_ranks *r, int ctas, unsigned long long payload,
                         time_t started)
{
    memset(w, 0, sizeof *w);
    w->ranks = *r;
    const double T = r->timeout_s;
    if (byo_nccl_load())
        return 1;
    setenv("NCCL_NVLS_ENABLE", "0", 0); /* no multicast objects: plain LSA stores only */
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    char path[512] = "";
    if (r->nranks > 1 && byo_id_path(path, sizeof path))
        return 1;
    if (r->rank == 0 && path[0])
        unlink(path); /* a failed run's id: no rank may take it for this run's */
    ncclResult_t res;
    if (r->rank == 0 && (res = bn.get_unique_id(&id)) != ncclSuccess)
        return byo_nccl_fail(NULL, "ncclGetUniqueId", res);
    if (path[0] && byo_id_share(r, path, &id, ctas, payload, started))
        return 1;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = r->nranks == 1; /* more ranks: polled, so that a missing one ends in time */
    char what[160];
    snprintf(what, sizeof what, "ncclCommInitRank(rank %d of %d)", r->rank, r->nranks);
    res = bn.init_rank_config(&w->comm, r->nranks, id, r->rank, &cfg);
    if (res != ncclSuccess && res != ncclInProgress)
        return byo_nccl_fail(NULL, what, res);
    if (byo_nccl_done(w->comm, res, T, what))
        goto fail;
    if (r->rank == 0 && path[0])
        unlink(path); /* every rank has joined, so every rank has read it */

    w->flag_off = (payload + 127) / 128 * 128;
    w->bytes = (w->flag_off + (1 + (size_t)r->nranks) * sizeof(uint64_t) + 4095) / 4096 * 4096;
    snprintf(what, sizeof what, "ncclMemAlloc(%.1f MiB)", w->bytes / 1048576.0);
    if ((res = bn.mem_alloc(&w->base, w->bytes)) != ncclSuccess) {
        byo_nccl_fail(w->comm, what, res);
        goto fail;
    }
    /* zeroed before it is registered: no peer can store into it before registration returns */
    if (cudaMemset(w->base, 0, w->bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
        byo_fail("zeroing the window: %s", cudaGetErrorString(cudaGetLastError()));
        goto fail;
    }
    snprintf(what, sizeof what, "ncclCommWindowRegister(%.1f MiB, symmetric)",
             w->bytes / 1048576.0);
    res = bn.win_register(w->comm, w->base, w->bytes, &w->win, NCCL_WIN_COLL_SYMMETRIC);
    if (byo_nccl_done(w->comm, res, T, what))
        goto fail;
    {
        /* 2.28 takes zeroed requirements: no NCCL barriers or resources, only the LSA team */
        alignas(64) unsigned char reqs[sizeof(ncclDevCommRequirements) + 1024];
        memset(reqs, 0, sizeof reqs);
        res = bn.dev_create(w->comm, (const ncclDevCommRequirements *)reqs, (ncclDevComm *)w->dev);
        if (byo_nccl_done(w->comm, res, T, "ncclDevCommCreate"))
            goto fail;
        w->have_dev = 1;
        const ncclDevComm *dc = (const ncclDevComm *)w->dev;
        if (dc->lsaSize != r->nranks || dc->lsaRank != r->rank) {
            byo_fail("rank %d of %d: %d ranks are load/store accessible (LSA rank %d): -g needs "
                     "every rank in one NVLink domain", r->rank, r->nranks, dc->lsaSize,
                     dc->lsaRank);
            goto fail;
        }
    }
    {
        void **dptr = NULL;
        cudaError_t e = cudaMalloc((void **)&dptr, (size_t)r->nranks * sizeof(void *));
        if (e == cudaSuccess) {
            byo_lsa_kernel<<<1, BYO_MAX_RANKS>>>(w->win, r->nranks, dptr);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess)
            e = cudaMemcpy(w->peer, dptr, (size_t)r->nranks * sizeof(void *),
                           cudaMemcpyDeviceToHost);
        cudaFree(dptr);
        if (e != cudaSuccess) {
            byo_fail("reading the peers' LSA pointers: %s", cudaGetErrorString(e));
            goto fail;
        }
        for (int p = 0; p < r->nranks; p++)
            if (!w->peer[p] || ((uintptr_t)w->peer[p] & 4095)) {
                byo_fail("ncclGetLsaPointer gave %p for rank %d (not a 4096-byte aligned window)",
                         w->peer[p], p);
                goto fail;
            }
    }
    return 0;
fail:
    if (r->rank == 0 && path[0])
        unlink(path);
    if (w->comm)
        bn.abort_(w->comm); /* a half-built communicator: no collective step a peer may miss */
    w->comm = NULL;
    if (w->base)
        bn.mem_free(w->base);
    w->base = NULL;
    return 1;
}

/* Tear down after every rank has passed the barrier (deregistering is collective); failed: the
 * barrier was not passed, so abort without the collective steps a peer may never join. Returns 1 when a step failed
 * (byo_err says which). */
static int byo_nccl_close(byo_nccl *w, int failed)
{
    const double T = w->ranks.timeout_s;
    int bad = failed;
    cudaDeviceSynchronize();
    if (!bad && w->have_dev)
        bad |= byo_nccl_done(w->comm, bn.dev_destroy(w->comm, (const ncclDevComm *)w->dev), T,
                             "ncclDevCommDestroy");
    if (!bad && w->win)
        bad |= byo_nccl_done(w->comm, bn.win_deregister(w->comm, w->win), T,
                             "ncclCommWindowDeregister");
    if (!bad)
        bad |= byo_nccl_done(w->comm, bn.finalize(w->comm), T, "ncclCommFinalize");
    if (bad)
        bn.abort_(w->comm);
    else
        bn.destroy(w->comm);
    bn.mem_free(w->base);
    return bad && !failed;
}

/* After the tiles: wait until the previous rank's ctas CTAs have all signalled this window's done
 * flag (their release is cumulative over their tiles' stores), then a barrier of every rank: set
 * this rank's flag in every peer's window and wait for every rank's flag in this one. One thread;
 * each wait bounded by timeout_ns, a timeout recorded in st (detail 0: the tiles; 1 + q: rank q's
 * barrier flag). */
__global__ void byo_barrier_kernel(uint64_t *done, uint64_t ctas, uint64_t **peer_bar,
                                   uint64_t *bar, int nranks, int rank, uint64_t timeout_ns,
                                   xs_devstatus *st)
{
    if (xs_wait_geq(done, ctas, timeout_ns) != XS_WAIT_OK) {
        xs_devfail(st, XS_DEVERR_TIMEOUT, 0);
        return;
    }
    for (int p = 0; p < nranks; p++)
        xs_st_release_sys(peer_bar[p] + rank, 1);
    for (int q = 0; q < nranks; q++)
        if (xs_wait_geq(bar + q, 1, timeout_ns) != XS_WAIT_OK) {
            xs_devfail(st, XS_DEVERR_TIMEOUT, 1 + (unsigned long long)q);
            return;
        }
}

#endif /* BYO_NCCL_CUH */
