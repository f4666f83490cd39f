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
 *   byo [--shape lognormal|staggered|bimodal] [--seed N] [--out trace.csv] [--ctas N]
 *       [--capacity N] [--pace-gbps G] [--device N] [--dry-run]
 *
 * Exit status: 0 when every byte and every compute result verified and the trace kept every
 * record; 1 otherwise (a failed check, an overflowed trace buffer, a CUDA error); 2 on bad usage.
 * It includes only public headers: xstage_device.cuh (device), xstage_trace.h (the host writer).
 */
#include <cuda_runtime.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"
#include "xstage_device.cuh"
#include "xstage_pattern.h"
#if __has_include("xstage_trace.h")
#include "xstage_trace.h"
#else
#include "trace_fallback.h" /* FALLBACK until xstage_trace.h is installed: see that file */
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
 * at pace_ns_per_byte and waits while the backlog reserved before it exceeds slack_ns. */
__global__ void byo_kernel(char *win, const byo_tile *tiles, const int *first,
                           const unsigned long long *delay_ns, uint32_t seed, uint32_t *sink,
                           xs_trace_buf tb, unsigned long long *link, double pace_ns_per_byte,
                           unsigned long long slack_ns, xs_devstatus *st)
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
        xs_burst_pattern(win + t.off, t.bytes / 16, seed, t.off / 16);
        __syncthreads(); /* every thread's stores of the tile issued */
        if (tid == 0)
            xs_trace_issue_end(tb, &tc, (int64_t)t.bytes);
    }
    sink[cta * BYO_THREADS + tid] = x;
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
               "  --dry-run    print the plan's size and exit (no GPU)\n"
               "  -g           an NCCL window (not implemented yet)\n");
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

int main(int argc, char **argv)
{
    const char *shape = "lognormal", *out = "trace.csv";
    long long seed = 1, ctas = 0, capacity = 0, device = 0;
    double pace_gbps = 0;
    int dry_run = 0;
    static const struct option opts[] = {
        {"shape", required_argument, 0, 's'},    {"seed", required_argument, 0, 'S'},
        {"out", required_argument, 0, 'o'},      {"ctas", required_argument, 0, 'c'},
        {"capacity", required_argument, 0, 'C'}, {"pace-gbps", required_argument, 0, 'p'},
        {"device", required_argument, 0, 'd'},   {"dry-run", no_argument, 0, 'n'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
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
        case 'g':
            fprintf(stderr, "byo: error: -g (an NCCL window) is not implemented yet; the "
                            "default window is pinned host memory\n");
            return 2;
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

    /* the window: mapped pinned host memory, zeroed (the pattern never is) */
    char *hwin = NULL, *dwin = NULL;
    CHECK(cudaHostAlloc((void **)&hwin, p.total, cudaHostAllocMapped));
    CHECK(cudaHostGetDevicePointer((void **)&dwin, hwin, 0));
    memset(hwin, 0, p.total);
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
                                                dsink, tb, dlink,
                                                pace_gbps > 0 ? 1.0 / pace_gbps : 0.0, 2000,
                                                dst);
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
    const uint64_t bad = xs_pattern_check((const uint32_t *)hwin, p.total / 16, (uint32_t)seed, 0);
    if (bad) {
        fprintf(stderr, "byo: error: %llu of %llu 16-byte units in the window are wrong\n",
                (unsigned long long)bad, p.total / 16);
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
    const char *meta[] = {m_dev, "target=host", m_kernel, m_prod, m_cap, "clock=globaltimer",
                          m_seed, m_pace, NULL};
    if (xs_trace_write(out, recs, n, dropped, meta) != XS_OK) {
        fprintf(stderr, "byo: error: writing %s: %s\n", out, xs_errmsg());
        fail = 1;
    }
    if (dropped) {
        fprintf(stderr, "byo: error: the trace buffer overflowed: %llu of %llu records dropped "
                        "(raise --capacity)\n", dropped, count);
        fail = 1;
    }
    printf("# byo: %s on %s, %lld CTAs, %d tiles, %.3f MB to host memory, seed %lld%s\n", shape,
           prop.name, ctas, p.ntiles, p.total / 1e6, seed,
           pace_gbps > 0 ? " (paced)" : "");
    printf("# kernel %.3f ms, %.2f GB/s; trace %s: %zu records, %llu dropped\n", ms,
           p.total / (ms * 1e6), out, n, dropped);
    printf("# byo %s\n", fail ? "FAILED" : "OK");
    return fail;
}
