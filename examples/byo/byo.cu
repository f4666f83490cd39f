// SPDX-License-Identifier: Apache-2.0
/*
 * byo.cu - "bring your own kernel": a user kernel stamped with xstage's public device API.
 *
 * Each CTA runs a compute loop per tile (an integer multiply-add chain whose length comes from
 * the tile table: data-dependent) and then stores the finished tile to a remote window: mapped
 * pinned host memory (target host). Tile sizes and work differ per CTA and tile, drawn from a
 * seed, and CTAs may start in waves. Thread 0 stamps every tile (xs_trace_*: the work span, then
 * the issue span of its stores) into a fixed-capacity device buffer; afterwards the host checks
 * every byte of the window and every thread's compute result, and writes the trace with
 * xs_trace_write (docs/BYO.md shows the loop around it: calibrate, stamp, run, compare, plan).
 *
 * With -g the window is an NCCL symmetric window instead (byo_nccl.cuh): every rank of the
 * launch (torchrun, mpirun, srun; one rank without a launcher) stores its tiles into the next
 * rank's window through NCCL's LSA pointer (one rank: into its own), each CTA signals the
 * destination once its last tile is stored, a bounded barrier follows, and every rank checks
 * every byte its window received. Each rank writes its own trace.
 *
 *   byo [--shape lognormal|staggered|bimodal] [--seed N] [--out trace.csv] [--ctas N]
 *       [--capacity N] [--pace-gbps G] [--device N] [-g] [--dry-run]
 *
 * Exit status: 0 when every byte and every compute result verified and the trace kept every
 * record; 1 otherwise (a failed check, an overflowed trace buffer, a CUDA or NCCL error, a
 * timeout); 2 on bad usage. It includes only public headers: xstage_device.cuh (device),
 * xstage_trace.h (the host writer), and for -g NCCL's (nccl.h, nccl_device.h).
 */
#include <cuda_runtime.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xstage.h"
#include "xstage_device.cuh"
#include "xstage_pattern.h"
#if __has_include("xstage_trace.h")
#include "xstage_trace.h"
#else
#include "trace_fallback.h" /* FALLBACK until xstage_trace.h is installed: see that file */
#endif
#if !defined(BYO_NO_NCCL) && __has_include(<nccl_device.h>) /* -DBYO_NO_NCCL: without -g */
#define BYO_HAVE_NCCL 1
#include "byo_nccl.cuh"
#else
#define BYO_HAVE_NCCL 0 /* built without NCCL 2.28's headers: -g says so */
#endif

#define BYO_THREADS 128

/* A CUDA call that must succeed: else one line naming it, and exit 1. */
#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "byo: error: %s: %s (%s:%d)\n", #call, cudaGetErrorString(e_),       \
                    __FILE__, __LINE__);                                                           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* One tile of one CTA: where its bytes go in the window, how many, and its compute length. */
typedef struct {
    unsigned long long off; /* bytes from the window's start; a multiple of 16 */
    unsigned int bytes;     /* a multiple of 16 */
    unsigned int iters;     /* multiply-add steps of the compute loop */
} byo_tile;

/* The compute loop: a dependent integer multiply-add chain (one step ~ one IMAD latency). The
 * host runs the same function to check every thread's result. */
static __host__ __device__ uint32_t byo_work(uint32_t x, unsigned int iters)
{
    for (unsigned int k = 0; k < iters; k++)
        x = x * 1664525u + 1013904223u;
    return x;
}

/* One CTA per SM. CTA c runs tiles first[c] .. first[c+1]-1 in order, after a start delay of
 * delay_ns[c]. link (NULL: unpaced) is the public link pacer's word: each tile reserves its bytes
 * at pace_ns_per_byte and waits while the backlog reserved before it exceeds slack_ns. The
 * payload is the pattern of pseed. done (NULL on the host path) is the destination's counter:
 * after its last tile each CTA adds one, ordered after every store of the CTA. */
__global__ void byo_kernel(char *win, const byo_tile *tiles, const int *first,
                           const unsigned long long *delay_ns, uint32_t seed, uint32_t pseed,
                           uint32_t *sink, xs_trace_buf tb, unsigned long long *link,
                           double pace_ns_per_byte, unsigned long long slack_ns,
                           uint64_t *done, xs_devstatus *st)
{
    const int cta = blockIdx.x, tid = threadIdx.x;
    xs_trace_cta tc = xs_trace_cta_begin();
    if (tid == 0 && delay_ns[cta])
        xs_spin_until(xs_globaltimer() + delay_ns[cta]); /* staggered start */
    __syncthreads();
    uint32_t x = seed ^ (uint32_t)(cta * BYO_THREADS + tid);
    for (int i = first[cta]; i < first[cta + 1]; i++) {
        const byo_tile t = tiles[i];
        if (tid == 0)
            xs_trace_work_start(&tc);
        x = byo_work(x, t.iters);
        __syncthreads(); /* the tile is finished: every thread's part computed */
        if (tid == 0) {
            xs_trace_work_end(&tc);
            if (link)
                xs_link_pace(link, xs_link_need_ns((double)t.bytes, pace_ns_per_byte), slack_ns,
                             2000000000ull, st, (unsigned int)i);
            xs_trace_issue_start(&tc);
        }
        __syncthreads();
        xs_burst_pattern(win + t.off, t.bytes / 16, pseed, t.off / 16);
        __syncthreads(); /* every thread's stores of the tile issued */
        if (tid == 0)
            xs_trace_issue_end(tb, &tc, (int64_t)t.bytes);
    }
    sink[cta * BYO_THREADS + tid] = x;
    /* the CTA's stores, then its signal: the fence after the barrier makes thread 0's add a
     * release that is cumulative over every thread's stores */
    __syncthreads();
    if (done && tid == 0) {
        __threadfence_system();
        atomicAdd_system((unsigned long long *)done, 1ull);
    }
}

/* ---- the shapes (host) --------------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(void) { return ((rng_next() >> 11) + 0.5) / 9007199254740992.0; }

/* log-normal with the given median and sigma (of the log) */
static double rng_lognormal(double median, double sigma)
{
    const double g = sqrt(-2.0 * log(rng_unit())) * cos(6.283185307179586 * rng_unit());
    return median * exp(sigma * g);
}

/* log-uniform in [lo, hi] */
static double rng_logu(double lo, double hi) { return lo * exp(log(hi / lo) * rng_unit()); }

static unsigned int clamp_bytes(double b, double lo, double hi)
{
    b = b < lo ? lo : b > hi ? hi : b;
    return (unsigned int)(((unsigned long long)b + 15) / 16 * 16);
}

static unsigned int clamp_iters(double n, double lo, double hi)
{
    return (unsigned int)(n < lo ? lo : n > hi ? hi : n);
}

typedef struct {
    int ctas, ntiles;
    byo_tile *tiles;               /* [ntiles], CTA by CTA */
    int *first;                    /* [ctas + 1] */
    unsigned long long *delay_ns;  /* [ctas] */
    unsigned long long total;      /* bytes */
} byo_plan;

/* Appends one CTA's tile to the plan (storage sized by the caller). */
static void plan_tile(byo_plan *p, unsigned int bytes, unsigned int iters)
{
    byo_tile *t = &p->tiles[p->ntiles++];
    t->off = p->total;
    t->bytes = bytes;
    t->iters = iters;
    p->total += bytes;
}

/* The shapes, all unlike calibrate's and validate's uniform bursts:
 * - lognormal: every CTA from the start, 12 tiles each, log-normal sizes (median 48 KiB,
 *   sigma 0.9, 4 KiB..1 MiB) and log-normal work (median 1500 steps): contended throughout.
 * - staggered: CTAs start in eight waves 100 us apart; 24 short bursts each (8..32 KiB,
 *   log-uniform) with 800..3000 steps of work between them.
 * - bimodal: one CTA in eleven is heavy (6 tiles of 256 KiB..1 MiB, little work), the others
 *   light (10 tiles of 4..16 KiB, 3000 +- 50% steps). */
static int plan_make(byo_plan *p, const char *shape, int ctas)
{
    const int max_tiles = 24;
    p->ctas = ctas;
    p->ntiles = 0;
    p->total = 0;
    p->tiles = (byo_tile *)calloc((size_t)ctas * max_tiles, sizeof *p->tiles);
    p->first = (int *)calloc((size_t)ctas + 1, sizeof *p->first);
    p->delay_ns = (unsigned long long *)calloc((size_t)ctas, sizeof *p->delay_ns);
    if (!p->tiles || !p->first || !p->delay_ns) {
        fprintf(stderr, "byo: error: out of host memory planning %d CTAs\n", ctas);
        return 1;
    }
    for (int c = 0; c < ctas; c++) {
        p->first[c] = p->ntiles;
        if (!strcmp(shape, "lognormal")) {
            for (int k = 0; k < 12; k++)
                plan_tile(p, clamp_bytes(rng_lognormal(49152, 0.9), 4096, 1 << 20),
                          clamp_iters(rng_lognormal(1500, 0.6), 50, 20000));
        } else if (!strcmp(shape, "staggered")) {
            p->delay_ns[c] = (unsigned long long)(c % 8) * 100000ull;
            for (int k = 0; k < 24; k++)
                plan_tile(p, clamp_bytes(rng_logu(8192, 32768), 8192, 32768),
                          clamp_iters(rng_logu(800, 3000), 800, 3000));
        } else if (!strcmp(shape, "bimodal")) {
            if (c % 11 == 0)
                for (int k = 0; k < 6; k++)
                    plan_tile(p, clamp_bytes(rng_logu(262144, 1 << 20), 262144, 1 << 20),
                              clamp_iters(rng_logu(100, 400), 100, 400));
            else
                for (int k = 0; k < 10; k++)
                    plan_tile(p, clamp_bytes(rng_logu(4096, 16384), 4096, 16384),
                              clamp_iters(3000 * (0.5 + rng_unit()), 1500, 4500));
        } else {
            fprintf(stderr, "byo: error: unknown shape '%s' (lognormal, staggered, bimodal)\n",
                    shape);
            return 2;
        }
    }
    p->first[ctas] = p->ntiles;
    return 0;
}

/* ---- main ------------------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f, "usage: byo [--shape lognormal|staggered|bimodal] [--seed N] [--out trace.csv]\n"
               "           [--ctas N] [--capacity N] [--pace-gbps G] [--device N] [--dry-run]\n"
               "  --shape      the kernel's schedule (default lognormal)\n"
               "  --seed       tile sizes, work and payload (default 1)\n"
               "  --out        the trace to write (default trace.csv)\n"
               "  --ctas       CTAs, one per SM at most (default: the SM count)\n"
               "  --capacity   trace records the device buffer holds (default: the tiles)\n"
               "  --pace-gbps  pace the stores with the public link pacer at G GB/s (default 0: "
               "unpaced)\n"
               "  --device     the GPU (default 0; with -g under a launcher: the local rank)\n"
               "  -g, --nccl   store to the next rank's NCCL symmetric window (ranks from\n"
               "               torchrun, mpirun or srun; one rank without: its own window)\n"
               "  --dry-run    print the plan's size and exit (no GPU)\n");
}

/* a non-negative integer option, whole string */
static int parse_count(const char *s, const char *what, long long lo, long long hi, long long *v)
{
    char *end = NULL;
    const long long x = strtoll(s, &end, 10);
    if (!*s || *end || x < lo || x > hi) {
        fprintf(stderr, "byo: error: %s '%s': an integer in %lld..%lld\n", what, s, lo, hi);
        return 1;
    }
    *v = x;
    return 0;
}

/* rank r's trace: --out itself for one rank, else "<out without .csv>.rank<r>.csv" */
static void rank_out(const char *out, int rank, int nranks, char *buf, size_t cap)
{
    const size_t n = strlen(out);
    const int csv = n > 4 && !strcmp(out + n - 4, ".csv");
    if (nranks == 1)
        snprintf(buf, cap, "%s", out);
    else
        snprintf(buf, cap, "%.*s.rank%d%s", (int)(csv ? n - 4 : n), out, rank, csv ? ".csv" : "");
}

int main(int argc, char **argv)
{
    const char *shape = "lognormal", *out = "trace.csv";
    long long seed = 1, ctas = 0, capacity = 0, device = -1; /* -1: not given */
    double pace_gbps = 0;
    int dry_run = 0, use_nccl = 0;
    const time_t started = time(NULL);
    static const struct option opts[] = {
        {"shape", required_argument, 0, 's'},    {"seed", required_argument, 0, 'S'},
        {"out", required_argument, 0, 'o'},      {"ctas", required_argument, 0, 'c'},
        {"capacity", required_argument, 0, 'C'}, {"pace-gbps", required_argument, 0, 'p'},
        {"device", required_argument, 0, 'd'},   {"dry-run", no_argument, 0, 'n'},
        {"nccl", no_argument, 0, 'g'},           {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "s:S:o:c:C:p:d:ngh", opts, NULL)) != -1) {
        char *end = NULL;
        switch (o) {
        case 's': shape = optarg; break;
        case 'S': if (parse_count(optarg, "--seed", 0, 0xffffffffll, &seed)) return 2; break;
        case 'o': out = optarg; break;
        case 'c': if (parse_count(optarg, "--ctas", 1, 1 << 16, &ctas)) return 2; break;
        case 'C': if (parse_count(optarg, "--capacity", 0, 1 << 30, &capacity)) return 2; break;
        case 'd': if (parse_count(optarg, "--device", 0, 1024, &device)) return 2; break;
        case 'p':
            pace_gbps = strtod(optarg, &end);
            if (!*optarg || *end || !(pace_gbps >= 0) || pace_gbps > 1e6) {
                fprintf(stderr, "byo: error: --pace-gbps '%s': a rate in GB/s, 0 = unpaced\n",
                        optarg);
                return 2;
            }
            break;
        case 'g': use_nccl = 1; break;
        case 'n': dry_run = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "byo: error: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }

    if (strcmp(shape, "lognormal") && strcmp(shape, "staggered") && strcmp(shape, "bimodal")) {
        fprintf(stderr, "byo: error: unknown shape '%s' (lognormal, staggered, bimodal)\n",
                shape);
        return 2;
    }
    if (dry_run) { /* the plan only, no GPU: --ctas or 132 (an H100/H200) */
        rng_state = (uint64_t)seed * 0x2545f4914f6cdd1dull + 1;
        byo_plan p;
        const int pr = plan_make(&p, shape, ctas ? (int)ctas : 132);
        if (pr)
            return pr;
        unsigned int lo = ~0u, hi = 0;
        unsigned long long work = 0;
        for (int i = 0; i < p.ntiles; i++) {
            lo = p.tiles[i].bytes < lo ? p.tiles[i].bytes : lo;
            hi = p.tiles[i].bytes > hi ? p.tiles[i].bytes : hi;
            work += p.tiles[i].iters;
        }
        printf("# byo plan: %s, %d CTAs, %d tiles, %.3f MB, tiles %u..%u B, %.0f steps/tile\n",
               shape, p.ctas, p.ntiles, p.total / 1e6, lo, hi, (double)work / p.ntiles);
        return 0;
    }

    /* -g: which rank this is and which GPU it drives (the local rank when several are seen) */
    int rank = 0, nranks = 1;
#if BYO_HAVE_NCCL
    byo_ranks ranks;
    static byo_nccl nw;
    if (use_nccl) {
        if (byo_ranks_detect(&ranks)) {
            fprintf(stderr, "byo: error: %s\n", byo_err);
            return 2;
        }
        rank = ranks.rank;
        nranks = ranks.nranks;
        int visible = 0;
        CHECK(cudaGetDeviceCount(&visible));
        if (ranks.local_rank >= 0 && visible > 1 && device < 0) {
            if (ranks.local_rank >= visible) {
                fprintf(stderr, "byo: error: rank %d (local rank %d of %s) but %d GPUs visible\n",
                        rank, ranks.local_rank, ranks.launcher, visible);
                return 2;
            }
            device = ranks.local_rank;
        }
    }
#else
    if (use_nccl) {
        fprintf(stderr, "byo: error: -g: built without NCCL 2.28's headers (nccl_device.h); "
                        "rebuild with NCCL_HOME=DIR holding include/nccl_device.h\n");
        return 2;
    }
#endif
    if (device < 0)
        device = 0;
    CHECK(cudaSetDevice((int)device));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, (int)device));
    if (ctas == 0)
        ctas = prop.multiProcessorCount;
    if (ctas > prop.multiProcessorCount) {
        fprintf(stderr, "byo: error: --ctas %lld: at most one per SM (%d)\n", ctas,
                prop.multiProcessorCount);
        return 2;
    }
    rng_state = (uint64_t)seed * 0x2545f4914f6cdd1dull + 1;
    byo_plan p;
    const int pr = plan_make(&p, shape, (int)ctas);
    if (pr)
        return pr;
    if (capacity == 0)
        capacity = p.ntiles;

    /* the window: mapped pinned host memory, zeroed (the pattern never is); with -g the next
     * rank's NCCL window (zeroed by its owner), this rank's own receiving the previous rank's */
    char *hwin = NULL, *dwin = NULL;
    uint64_t *done = NULL;
    const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    /* rank r's payload pattern; rank 0's is the host path's */
    const uint32_t pseed = (uint32_t)seed ^ (0x9e3779b9u * (uint32_t)rank);
    const uint32_t prev_pseed = (uint32_t)seed ^ (0x9e3779b9u * (uint32_t)prev);
    (void)next, (void)started; /* -g only */
#if BYO_HAVE_NCCL
    if (use_nccl) {
        if (byo_nccl_open(&nw, &ranks, (int)ctas, p.total, started)) {
            fprintf(stderr, "byo: error: -g: %s\n", byo_err);
            return 1;
        }
        dwin = (char *)nw.peer[next];
        done = (uint64_t *)(dwin + nw.flag_off);
    }
#endif
    if (!use_nccl) {
        CHECK(cudaHostAlloc((void **)&hwin, p.total, cudaHostAllocMapped));
        CHECK(cudaHostGetDevicePointer((void **)&dwin, hwin, 0));
        memset(hwin, 0, p.total);
    }
    xs_devstatus *hst = NULL, *dst = NULL;
    CHECK(cudaHostAlloc((void **)&hst, sizeof *hst, cudaHostAllocMapped));
    CHECK(cudaHostGetDevicePointer((void **)&dst, hst, 0));
    memset(hst, 0, sizeof *hst);
    byo_tile *dtiles;
    int *dfirst;
    unsigned long long *ddelay, *dlink = NULL, *dcount;
    uint32_t *dsink;
    xs_trace_record *drecs;
    CHECK(cudaMalloc((void **)&dtiles, (size_t)p.ntiles * sizeof *dtiles));
    CHECK(cudaMalloc((void **)&dfirst, (size_t)(ctas + 1) * sizeof *dfirst));
    CHECK(cudaMalloc((void **)&ddelay, (size_t)ctas * sizeof *ddelay));
    CHECK(cudaMalloc((void **)&dsink, (size_t)ctas * BYO_THREADS * sizeof *dsink));
    CHECK(cudaMalloc((void **)&drecs, (size_t)(capacity ? capacity : 1) * sizeof *drecs));
    CHECK(cudaMalloc((void **)&dcount, sizeof *dcount));
    CHECK(cudaMemcpy(dtiles, p.tiles, (size_t)p.ntiles * sizeof *dtiles, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dfirst, p.first, (size_t)(ctas + 1) * sizeof *dfirst,
                     cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(ddelay, p.delay_ns, (size_t)ctas * sizeof *ddelay, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dcount, 0, sizeof *dcount));
    if (pace_gbps > 0) {
        CHECK(cudaMalloc((void **)&dlink, sizeof *dlink));
        CHECK(cudaMemset(dlink, 0, sizeof *dlink));
    }
    xs_trace_buf tb;
    tb.recs = drecs;
    tb.capacity = (uint32_t)capacity;
    tb.count = dcount;

    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaEventRecord(e0));
    byo_kernel<<<(unsigned)ctas, BYO_THREADS>>>(dwin, dtiles, dfirst, ddelay, (uint32_t)seed,
                                                pseed, dsink, tb, dlink,
                                                pace_gbps > 0 ? 1.0 / pace_gbps : 0.0, 2000,
                                                done, dst);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    CHECK(cudaDeviceSynchronize());
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));

    /* checks: the device status, every byte of the window, every thread's compute result */
    int fail = 0;
    if (hst->code) {
        fprintf(stderr, "byo: error: the kernel failed: code %u, CTA %u, detail %llu\n", hst->code,
                hst->block, hst->detail);
        fail = 1;
    }
    const char *recv = (const char *)hwin; /* the bytes this process checks, in host memory */
#if BYO_HAVE_NCCL
    int missed = 0; /* a rank did not reach the barrier in time */
    if (use_nccl) {
        /* the previous rank's CTAs have all signalled this window, and every rank is here */
        xs_devstatus *hbs = NULL, *dbs = NULL;
        uint64_t **dbar = NULL, *hbar[BYO_MAX_RANKS];
        CHECK(cudaHostAlloc((void **)&hbs, sizeof *hbs, cudaHostAllocMapped));
        CHECK(cudaHostGetDevicePointer((void **)&dbs, hbs, 0));
        memset(hbs, 0, sizeof *hbs);
        for (int q = 0; q < nranks; q++)
            hbar[q] = (uint64_t *)((char *)nw.peer[q] + nw.flag_off) + 1;
        CHECK(cudaMalloc((void **)&dbar, (size_t)nranks * sizeof *dbar));
        CHECK(cudaMemcpy(dbar, hbar, (size_t)nranks * sizeof *dbar, cudaMemcpyHostToDevice));
        uint64_t *own = (uint64_t *)((char *)nw.base + nw.flag_off);
        byo_barrier_kernel<<<1, 1>>>(own, (uint64_t)ctas, dbar, own + 1, nranks, rank,
                                     (uint64_t)(ranks.timeout_s * 1e9), dbs);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        if (hbs->code && hbs->detail == 0) {
            fprintf(stderr, "byo: error: rank %d of %d: rank %d's %lld CTAs did not all signal "
                            "their tiles within %g s (XS_RANK_TIMEOUT)\n", rank, nranks, prev,
                    ctas, ranks.timeout_s);
            fail = missed = 1;
        } else if (hbs->code) {
            fprintf(stderr, "byo: error: rank %d of %d: rank %llu did not reach the barrier "
                            "within %g s (XS_RANK_TIMEOUT)\n", rank, nranks, hbs->detail - 1,
                    ranks.timeout_s);
            fail = missed = 1;
        }
        char *copy = (char *)malloc(p.total ? p.total : 1);
        if (!copy) {
            fprintf(stderr, "byo: error: out of host memory\n");
            return 1;
        }
        CHECK(cudaMemcpy(copy, nw.base, p.total, cudaMemcpyDeviceToHost));
        recv = copy;
    }
#endif
    /* every byte this window received: the sender's pattern (on the host path, this one's) */
    const uint64_t bad = xs_pattern_check((const uint32_t *)recv, p.total / 16,
                                          use_nccl ? prev_pseed : pseed, 0);
    if (bad) {
        fprintf(stderr, "byo: error: %llu of %llu 16-byte units in the window are wrong%s\n",
                (unsigned long long)bad, p.total / 16,
                use_nccl && nranks > 1 ? " (stored by the previous rank)" : "");
        fail = 1;
    }
    uint32_t *sink = (uint32_t *)malloc((size_t)ctas * BYO_THREADS * sizeof *sink);
    if (!sink) {
        fprintf(stderr, "byo: error: out of host memory\n");
        return 1;
    }
    CHECK(cudaMemcpy(sink, dsink, (size_t)ctas * BYO_THREADS * sizeof *sink,
                     cudaMemcpyDeviceToHost));
    long long badwork = 0;
    for (int c = 0; c < ctas; c++)
        for (int t = 0; t < BYO_THREADS; t++) {
            uint32_t x = (uint32_t)seed ^ (uint32_t)(c * BYO_THREADS + t);
            for (int i = p.first[c]; i < p.first[c + 1]; i++)
                x = byo_work(x, p.tiles[i].iters);
            badwork += x != sink[c * BYO_THREADS + t];
        }
    if (badwork) {
        fprintf(stderr, "byo: error: %lld of %lld threads computed a wrong result\n", badwork,
                ctas * BYO_THREADS);
        fail = 1;
    }

    /* the trace: min(count, capacity) records; the rest dropped */
    unsigned long long count = 0;
    CHECK(cudaMemcpy(&count, dcount, sizeof count, cudaMemcpyDeviceToHost));
    const size_t n = count < (unsigned long long)capacity ? (size_t)count : (size_t)capacity;
    const unsigned long long dropped = count - n;
    xs_trace_record *recs = (xs_trace_record *)malloc((n ? n : 1) * sizeof *recs);
    if (!recs) {
        fprintf(stderr, "byo: error: out of host memory\n");
        return 1;
    }
    CHECK(cudaMemcpy(recs, drecs, n * sizeof *recs, cudaMemcpyDeviceToHost));
    if (count != (unsigned long long)p.ntiles) {
        fprintf(stderr, "byo: error: %llu trace records attempted for %d tiles\n", count,
                p.ntiles);
        fail = 1;
    }
    char m_dev[300], m_kernel[64], m_prod[32], m_cap[32], m_seed[32], m_pace[48];
    snprintf(m_dev, sizeof m_dev, "device=%s", prop.name);
    snprintf(m_kernel, sizeof m_kernel, "kernel=byo-%s", shape);
    snprintf(m_prod, sizeof m_prod, "producers=%lld", ctas);
    snprintf(m_cap, sizeof m_cap, "capacity=%lld", capacity);
    snprintf(m_seed, sizeof m_seed, "seed=%lld", seed);
    snprintf(m_pace, sizeof m_pace, "pace_gbps=%g", pace_gbps);
    char m_rank[48], path[1100];
    snprintf(m_rank, sizeof m_rank, "rank=%d of %d", rank, nranks);
    /* one rank's window is its own HBM; more: the next GPU's over NVLink */
    const char *target = !use_nccl ? "target=host" : nranks == 1 ? "target=local" : "target=peer";
    const char *meta[] = {m_dev, target, m_kernel, m_prod, m_cap, "clock=globaltimer",
                          m_seed, m_pace, use_nccl ? m_rank : NULL, NULL};
    rank_out(out, rank, nranks, path, sizeof path);
    if (xs_trace_write(path, recs, n, dropped, meta) != XS_OK) {
        fprintf(stderr, "byo: error: writing %s: %s\n", path, xs_errmsg());
        fail = 1;
    }
    if (dropped) {
        fprintf(stderr, "byo: error: the trace buffer overflowed: %llu of %llu records dropped "
                        "(raise --capacity)\n", dropped, count);
        fail = 1;
    }
    char where[160] = "host memory";
#if BYO_HAVE_NCCL
    if (use_nccl) {
        snprintf(where, sizeof where, "rank %d's NCCL window (rank %d of %d, GPU %lld, NCCL "
                 "%d.%d.%d)", next, rank, nranks, device, bn.version / 10000,
                 bn.version / 100 % 100, bn.version % 100);
        if (byo_nccl_close(&nw, missed)) {
            fprintf(stderr, "byo: error: -g: rank %d of %d: %s\n", rank, nranks, byo_err);
            fail = 1;
        }
    }
#endif
    printf("# byo: %s on %s, %lld CTAs, %d tiles, %.3f MB to %s, seed %lld%s\n", shape,
           prop.name, ctas, p.ntiles, p.total / 1e6, where, seed,
           pace_gbps > 0 ? " (paced)" : "");
    printf("# kernel %.3f ms, %.2f GB/s; trace %s: %zu records, %llu dropped\n", ms,
           p.total / (ms * 1e6), path, n, dropped);
    if (use_nccl)
        printf("# window: %.3f MB from rank %d checked, %llu of %llu 16-byte units wrong\n",
               p.total / 1e6, prev, (unsigned long long)bad, p.total / 16);
    printf("# byo %s\n", fail ? "FAILED" : "OK");
    return fail;
}
