/*
 * replay.cu - run a burst-gap schedule on the GPU and measure it (include/xstage_replay.h).
 *
 * One kernel serves replay, calibration and validation: every microbenchmark is a schedule.
 * Producer p = CTA p (128 threads, one per SM). Destination of producer p: rank p % N of the
 * window table, slot p / N of the row's region there, so the same kernel runs against one host
 * window, local HBM, N virtual peers or NCCL peers. Timing: each SM reads clock64 around its
 * issue; a tick-edge anchor at start and end places those cycles on the %globaltimer time base,
 * so windows of different SMs are comparable to within one timer read.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_device.cuh"
#include "xstage_exchange.h"
#include "xstage_launch.h"
#include "xstage_peermap.h"
#include "xstage_replay.h"
#include "xstage_win.h"

/* One schedule row as the kernel sees it. */
typedef struct {
    int k;                       /* producers in the row */
    unsigned int seed;           /* pattern seed of the row (rank mixed in on the device) */
    unsigned long long n16;      /* 16-byte units per producer */
    unsigned long long stride16; /* units between producers' regions: n16 rounded up to 128 B,
                                  * so that no two SMs write parts of one 128-byte line */
    unsigned long long gap_cyc;  /* useful work after the row, in SM cycles */
    unsigned long long off16;    /* start of the row's region in every window, 16-byte units */
} xs_drow;

typedef struct {
    unsigned long long c_start, c_end; /* clock64 around this producer's issue in one row */
} xs_stamp;

typedef struct {
    unsigned long long g0, c0, g1, c1; /* tick-edge anchors at start and end */
    unsigned long long c_go;           /* clock64 when the common start instant was reached */
    unsigned long long smid;           /* the SM the producer ran on (%smid) */
} xs_anchor;

/* Flags of every window: [0, XS_REPLAY_UFLAGS) for the visibility probe, then one agreement slot
 * per rank (peer runs, agree_max). */
#define XS_REPLAY_UFLAGS 8

struct xs_replayer {
    xs_replay_opts o;
    xs_gpu_info gpu;
    xs_winset *win;
    xs_wintab tab;   /* what the kernels store through: with N > 1 peer ranks, every window's
                      * region of this source (data[d] + me x region, bytes = region) */
    xs_wintab own;   /* the windows as opened (own window, flags, barrier flags) */
    int multi;       /* peer target, N > 1 processes: per-source regions, lockstep runs */
    int me, n;       /* this rank, ranks */
    xs_peermap pm;    /* where producer p stores, and where a destination finds a source's
                       * producers (xstage_peermap.h) */
    unsigned long long region16; /* units of one source's region (N > 1 peers) */
    unsigned long long nrun;     /* peer runs: run counter, the same on every rank */
    unsigned long long rot16;    /* where the last run started in the window (xs_pm_rotate) */
    unsigned long long rot_need16; /* and its footprint; 0 before the first run */
    size_t smem;                 /* dynamic shared memory that forces one CTA per SM */
    double ghz;                  /* SM clock from the probe (cycles per ns) */
    xs_devstatus *dstat;         /* mapped host memory */
    unsigned long long *dscratch; /* [0] common start instant, [1] grid barrier counter */
    xs_drow *drows;
    size_t drows_cap;
    xs_stamp *dstamps;
    size_t dstamps_cap;
    xs_anchor *danchors;
    int *last_smid;              /* [SMs] the SM of each producer in the last run */
    int *sms, nsms;              /* producer p runs on SM sms[p] (xs_replayer_set_sms); 0: CTA p */
    int *dsm_map;                /* [SMs] the producer of each SM, -1 for none */
    int last_grid;               /* producers of the last run */
    cudaEvent_t ev0, ev1;
    cudaStream_t stream;
};


__global__ void __launch_bounds__(XS_PRODUCER_THREADS, 1)
    replay_kernel(xs_wintab tab, const xs_drow *rows, int nrows, xs_stamp *stamps,
                  xs_anchor *anchors, int sync, unsigned long long *scratch,
                  unsigned long long lead_ns, unsigned long long timeout_ns, xs_devstatus *st,
                  int dbase, int ndest, unsigned int salt, unsigned long long xepoch,
                  const int *sm_map, int grid)
{
    extern __shared__ unsigned char occupancy_only[]; /* forces one CTA per SM; unused */
    (void)occupancy_only;
    /* Producers on chosen SMs (xs_replayer_set_sms): one CTA per SM on every SM, and the CTA on
     * SM s is producer sm_map[s]; the others leave at once. Otherwise producer p is CTA p. A CTA
     * that reaches a producer's SM after that producer (an SM short: another context holds one)
     * finds the producer claimed and leaves too; the host then sees the producer elsewhere or
     * missing and fails the run. */
    __shared__ int s_abort, s_dup;
    int p = blockIdx.x;
    if (sm_map) {
        unsigned int sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        p = sm_map[sm];
        if (p < 0 || p >= grid)
            return; /* no producer here, or one the schedule does not use */
        if (threadIdx.x == 0)
            s_dup = atomicCAS(&anchors[p].smid, 0ull, ~0ull) != 0ull;
        __syncthreads();
        if (s_dup)
            return;
    }
    const int n = tab.nranks;
    xs_anchor a = {0, 0, 0, 0, 0, 0};
    /* Row descriptors are loaded ahead: the first before the common start, each next one before
     * the previous row's gap, so that a row's timing holds the stage and the store loop, not a
     * global-memory read of our own bookkeeping (zero-gap rows still wait for theirs). */
    xs_drow row = rows[0];
    if (threadIdx.x == 0) {
        s_abort = 0;
        xs_time_anchor(&a.g0, &a.c0, 1u << 16);
        unsigned long long go;
        if (!xepoch) {
            /* the first producer to arrive fixes the common start instant */
            unsigned long long mine = a.g0 + lead_ns;
            unsigned long long old = atomicCAS(&scratch[0], 0ull, mine);
            go = old ? old : mine;
        } else if (p == 0) {
            /* N > 1 peer ranks: producer 0 meets every rank's producer 0 on the barrier flags
             * (epoch xepoch; every rank's verification of the previous run is done before its
             * kernel starts), then fixes this rank's start instant; the ranks leave within the
             * flags' round trip of each other, and no store lands in a window still verified */
            for (int d = 0; d < n; d++)
                xs_st_release_sys(tab.flags[d] + tab.nflags + tab.rank, xepoch);
            for (int s = 0; s < n && !s_abort; s++) {
                unsigned long long now = xs_globaltimer(), end = a.g0 + timeout_ns;
                if (xs_wait_geq(tab.flags[tab.rank] + tab.nflags + s, xepoch,
                                end > now ? end - now : 0) != XS_WAIT_OK) {
                    xs_devfail(st, XS_DEVERR_TIMEOUT, 2000000ull + s);
                    s_abort = 1;
                }
            }
            go = xs_globaltimer() + lead_ns;
            if (s_abort)
                go = 1; /* wakes the other producers, which then see the failure */
            atomicExch(&scratch[0], go);
        } else {
            while ((go = xs_ld_acquire_gpu((const uint64_t *)&scratch[0])) == 0) {
                if (xs_globaltimer() > a.g0 + timeout_ns) {
                    xs_devfail(st, XS_DEVERR_TIMEOUT, 0);
                    s_abort = 1;
                    go = 1;
                    break;
                }
            }
            if (go == 1)
                s_abort = 1;
        }
        while (!s_abort && xs_globaltimer() < go) {
            if (xs_globaltimer() > a.g0 + timeout_ns) {
                xs_devfail(st, XS_DEVERR_TIMEOUT, 0);
                s_abort = 1;
                break;
            }
        }
        a.c_go = xs_clock();
    }
    __syncthreads();
    if (s_abort)
        return;
    /* xs_pm_dest and xs_pm_slot of xstage_peermap.h, written out: the kernel as run on the GPU
     * (run 7), byte for byte; tests/test_peermap.c checks the map and its inverse */
    const int d = (dbase + p % ndest) % n;
    const unsigned long long slot = (unsigned long long)(p / ndest);
    for (int r = 0; r < nrows; r++) {
        if (p < row.k) {
            __syncthreads();
            unsigned long long cs = xs_clock();
            unsigned long long first = row.off16 + slot * row.stride16;
            xs_burst_pattern(tab.data[d] + 16 * first, row.n16,
                             row.seed ^ (d * 0x85ebca6bu) ^ salt, first);
            __syncthreads();
            if (threadIdx.x == 0) {
                xs_stamp s = {cs, xs_clock()};
                stamps[(size_t)r * grid + p] = s;
            }
        }
        const xs_drow next = rows[r + 1 < nrows ? r + 1 : r];
        if (row.gap_cyc)
            xs_spin_cycles(row.gap_cyc);
        if (sync) {
            __syncthreads();
            if (threadIdx.x == 0) {
                __threadfence();
                atomicAdd(&scratch[1], 1ull);
                unsigned long long want = (unsigned long long)(r + 1) * grid;
                unsigned long long t0 = xs_globaltimer();
                while (xs_ld_acquire_gpu((const uint64_t *)&scratch[1]) < want) {
                    if (xs_globaltimer() - t0 > timeout_ns) {
                        xs_devfail(st, XS_DEVERR_TIMEOUT, 1000000ull + r);
                        s_abort = 1;
                        break;
                    }
                }
            }
            __syncthreads();
            if (s_abort)
                return;
        }
        row = next;
    }
    if (threadIdx.x == 0) {
        xs_time_anchor(&a.g1, &a.c1, 1u << 16);
        unsigned int sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        a.smid = sm;
        anchors[p] = a;
    }
}

/* SM clock probe: spin on clock64 between two tick-edge anchors ~2 ms apart. */
__global__ void clock_probe_kernel(unsigned long long *out)
{
    unsigned long long g0, c0, g1, c1;
    xs_time_anchor(&g0, &c0, 1u << 16);
    while (xs_globaltimer() - g0 < 2000000ull) {
    }
    xs_time_anchor(&g1, &c1, 1u << 16);
    out[0] = g1 - g0;
    out[1] = c1 - c0;
}

/* Plain zero-copy store kernel: a grid of many CTAs, each storing its slice with the pattern. */
__global__ void store_bw_kernel(char *dst, unsigned long long n16, unsigned int seed)
{
    unsigned long long per = (n16 + gridDim.x - 1) / gridDim.x;
    unsigned long long first = per * blockIdx.x;
    if (first >= n16)
        return;
    unsigned long long cnt = first + per > n16 ? n16 - first : per;
    xs_burst_pattern(dst + 16 * first, cnt, seed, first);
}

/* One load pass of the probes: thread t (0..127) of a CTA reads, increments and writes back its
 * share of 1024 16-byte units (16 KiB) of the CTA's slice [base, base + per) of buf, the pass-th
 * window of it (wrapping). */
static __device__ __forceinline__ void rmw_pass(uint4 *buf, unsigned long long base,
                                                unsigned long long per, unsigned long long pass,
                                                int t)
{
    const unsigned long long off = (pass * 1024ull) % (per > 1024 ? per - 1024 : 1);
#pragma unroll 4
    for (int i = t; i < 1024; i += 128) {
        uint4 v = buf[base + off + i];
        v.x += 1u;
        buf[base + off + i] = v;
    }
}

/* Drain under load: every CTA's first 128 threads store their share of the window (the pattern,
 * 16-byte stores) while its other 128 threads keep the SM's memory path busy until the stores
 * are done - read-modify-write passes over their slice of `buf` (load 1: a slice of a buffer far
 * larger than L2, so HBM; load 2: a slice of 24 MiB, L2-resident) - or stay idle (load 0). A
 * fused kernel's remote stores share their SMs with its compute the same way; the plain store
 * kernel's rate (R) is measured with nothing else running. */
__global__ void __launch_bounds__(256, 1)
    store_load_kernel(char *dst, unsigned long long n16, unsigned int seed, uint4 *buf,
                      unsigned long long buf_n16, int load, unsigned long long timeout_ns,
                      xs_devstatus *st)
{
    __shared__ int s_done;
    if (threadIdx.x == 0)
        s_done = 0;
    __syncthreads();
    if (threadIdx.x < 128) {
        const unsigned long long per = (n16 + gridDim.x - 1) / gridDim.x;
        const unsigned long long first = per * blockIdx.x;
        const unsigned long long cnt = first >= n16 ? 0 : first + per > n16 ? n16 - first : per;
#pragma unroll 4
        for (unsigned long long i = threadIdx.x; i < cnt; i += 128) {
            const unsigned long long g = first + i;
            xs_st16(dst + 16 * g, xs_pattern_word(seed, g, 0), xs_pattern_word(seed, g, 1),
                    xs_pattern_word(seed, g, 2), xs_pattern_word(seed, g, 3));
        }
        asm volatile("bar.sync 1, 128;" ::: "memory");
        if (threadIdx.x == 0)
            atomicExch(&s_done, 1);
        return;
    }
    if (load == 0 || buf_n16 == 0)
        return;
    const unsigned long long per = buf_n16 / gridDim.x, base = per * blockIdx.x;
    const unsigned long long t0 = xs_globaltimer();
    const int t = (int)threadIdx.x - 128;
#pragma unroll 1
    for (unsigned long long pass = 0; atomicOr(&s_done, 0) == 0; pass++) {
        /* 16 KiB per check of the flag: the kernel ends a few us after the stores */
        rmw_pass(buf, base, per, pass, t);
        if (xs_globaltimer() - t0 > timeout_ns) {
            xs_devfail(st, XS_DEVERR_TIMEOUT, 2);
            return;
        }
    }
}

/* Work under stores (xs_replay_work_probe). Per CTA out[5 * c ...]: load work units, load side's
 * first and last %globaltimer, store side's first and last. A load unit is one 16 KiB
 * read-modify-write pass (hbm, l2) or 128 threads x 256 iterations x 8 FMAs (fma). The load side
 * stops on its own clock (duration_ns), never on a flag in memory: a global load issued by an SM
 * whose stores are held back waits behind them (probe run 1: a poll of a "stores done" counter
 * made even the FMA loop look 17x slower), which is what the hbm and l2 loads measure, and what
 * the fma loop must not. */
typedef struct {
    unsigned long long bytes16;   /* units each storing CTA stores */
    unsigned long long row_shift; /* log2 units per row; 63: the CTA's share is one row */
    unsigned long long rows;      /* rows per storing CTA */
    unsigned long long pace_ns;   /* ns per 512 units (8 KiB) per CTA; 0 = unpaced */
    unsigned long long buf_n16;   /* load buffer */
    unsigned long long duration_ns, timeout_ns;
    int store_ctas, interleave, load, bulk;
    unsigned int seed;
} xs_probe_dev;

#define XS_PROBE_FMA_ITERS 256

/* The window unit of unit u of storing CTA c: row j = u >> row_shift of this CTA; the rows of the
 * CTAs of one group of `interleave` alternate, the last group may be smaller. Together every
 * stored unit is in [0, store_ctas x bytes16). */
static __device__ __forceinline__ unsigned long long probe_unit(const xs_probe_dev &a, int c,
                                                                unsigned long long u)
{
    if (a.row_shift >= 63)
        return (unsigned long long)c * a.bytes16 + u;
    const int grp = c / a.interleave, lane = c % a.interleave;
    const int members = min(a.interleave, a.store_ctas - grp * a.interleave);
    const unsigned long long gbase = (unsigned long long)grp * a.interleave * a.rows;
    const unsigned long long j = u >> a.row_shift;
    return ((gbase + (j * members + lane)) << a.row_shift) | (u & ((1ull << a.row_shift) - 1));
}

__global__ void __launch_bounds__(256, 1)
    work_probe_kernel(char *dst, xs_probe_dev a, uint4 *buf, unsigned long long *done,
                      unsigned long long *out, xs_devstatus *st)
{
    __shared__ int s_stop, s_late;
    extern __shared__ __align__(128) uint4 probe_smem[]; /* bulk: two 8 KiB steps */
    const int c = blockIdx.x, t = threadIdx.x;
    if (t == 0)
        s_stop = 0;
    __syncthreads();
    if (t < 128) {
        if (c >= a.store_ctas)
            return;
        const unsigned long long t0 = xs_globaltimer();
        uint32_t b[4];
        for (int w = 0; w < 4; w++)
            b[w] = xs_pattern_base(a.seed, (uint32_t)w);
        bool late = false;
#pragma unroll 1
        for (unsigned long long blk = 0; blk * 512 < a.bytes16 && !late; blk++) {
            /* bulk: thread 0 paces for the CTA, and step blk is written into buffer blk & 1
             * once the copies of step blk - 2 (thread 0 issued and committed them) have read
             * it; the verdict on the pace is the CTA's, so that every thread meets the same
             * barriers */
            uint4 *sbuf = probe_smem + (blk & 1) * 512;
            if (a.pace_ns && (!a.bulk || t == 0)) {
                const unsigned long long due = t0 + blk * a.pace_ns;
                while (xs_globaltimer() < due) {
                    if (xs_globaltimer() - t0 > a.timeout_ns) {
                        xs_devfail(st, XS_DEVERR_TIMEOUT, 3);
                        late = true;
                        break;
                    }
                }
            }
            if (a.bulk) {
                if (t == 0) {
                    if (blk >= 2)
                        xs_bulk_wait_read<1>();
                    s_late = late;
                }
                asm volatile("bar.sync 1, 128;" ::: "memory");
                if ((late = s_late))
                    break;
            }
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const unsigned long long u = blk * 512 + q * 128 + t;
                if (u >= a.bytes16)
                    break;
                const unsigned long long unit = probe_unit(a, c, u);
                const uint32_t lin = (uint32_t)unit * XS_PATTERN_STEP;
                const uint32_t hi = (uint32_t)(unit >> 32) * 0x85ebca6bu;
                const uint4 v = make_uint4((b[0] + lin) ^ hi, (b[1] + lin) ^ hi,
                                           (b[2] + lin) ^ hi, (b[3] + lin) ^ hi);
                if (a.bulk)
                    sbuf[q * 128 + t] = v;
                else
                    xs_st16v(dst + 16 * unit, v);
            }
            if (a.bulk) {
                xs_bulk_fence_smem();
                asm volatile("bar.sync 1, 128;" ::: "memory");
                if (t == 0) {
                    /* one copy per contiguous run of the step: a row, or the whole step */
                    const unsigned long long u0 = blk * 512;
                    const unsigned long long n = a.bytes16 - u0 < 512 ? a.bytes16 - u0 : 512;
                    const unsigned long long run =
                        a.row_shift >= 63 || (1ull << a.row_shift) >= n ? n : 1ull << a.row_shift;
                    for (unsigned long long k = 0; k < n; k += run)
                        xs_bulk_s2g(dst + 16 * probe_unit(a, c, u0 + k),
                                    sbuf + k, (uint32_t)(16 * run));
                    xs_bulk_commit();
                }
            }
        }
        if (a.bulk && t == 0)
            xs_bulk_wait_done(); /* the span ends when the last copy's writes are complete */
        asm volatile("bar.sync 1, 128;" ::: "memory");
        if (t == 0) {
            out[5 * c + 3] = t0;
            out[5 * c + 4] = xs_globaltimer();
            atomicAdd(done, 1ull);
        }
        return;
    }
    const int lt = t - 128;
    const unsigned long long l0 = xs_globaltimer();
    unsigned long long units = 0;
    if (a.load != XS_PROBE_LOAD_NONE) {
        const unsigned long long per = a.buf_n16 / gridDim.x, base = per * c;
        float f[8];
        for (int i = 0; i < 8; i++)
            f[i] = 1.0f + 1e-7f * (float)(lt + i);
#pragma unroll 1
        for (;; units++) {
            if (a.load == XS_PROBE_LOAD_FMA) {
#pragma unroll 4
                for (int i = 0; i < XS_PROBE_FMA_ITERS; i++)
#pragma unroll
                    for (int k = 0; k < 8; k++)
                        f[k] = fmaf(f[k], 0.9999999f, 1e-7f);
            } else {
                rmw_pass(buf, base, per, units, lt);
            }
            if (lt == 0)
                s_stop = xs_globaltimer() - l0 >= a.duration_ns;
            asm volatile("bar.sync 2, 128;" ::: "memory");
            const int stop = *(volatile int *)&s_stop;
            asm volatile("bar.sync 2, 128;" ::: "memory");
            if (stop)
                break;
        }
        if (f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7] == 0.0f)
            units += 1ull << 40; /* keeps the FMA chains alive; never true */
    }
    if (lt == 0) {
        out[5 * c + 0] = units + (a.load == XS_PROBE_LOAD_NONE ? 0 : 1);
        out[5 * c + 1] = l0;
        out[5 * c + 2] = xs_globaltimer();
    }
}

/* Visibility round trip: payload, flag up (release.sys); wait for the host's answer (acquire). */
__global__ void visibility_kernel(char *payload, unsigned long long n16, uint64_t *flag_up,
                                  uint64_t *flag_back, int reps, unsigned int seed,
                                  unsigned long long *rtt, unsigned long long timeout_ns,
                                  xs_devstatus *st)
{
    /* s_abort is set once, before the loop: resetting it at the top of each repetition would
     * race with the slower threads still reading the previous repetition's value (racecheck,
     * run 5); it only ever goes from 0 to 1, and 1 ends the kernel. */
    __shared__ int s_abort;
    if (threadIdx.x == 0)
        s_abort = 0;
    for (int i = 0; i < reps; i++) {
        unsigned long long t0 = 0;
        if (threadIdx.x == 0)
            t0 = xs_globaltimer();
        __syncthreads();
        xs_burst_pattern(payload, n16, seed + (unsigned)i, 0);
        xs_signal_cta(flag_up, (uint64_t)i + 1);
        if (threadIdx.x == 0) {
            if (xs_wait_geq(flag_back, (uint64_t)i + 1, timeout_ns) != XS_WAIT_OK) {
                xs_devfail(st, XS_DEVERR_TIMEOUT, (unsigned long long)i);
                s_abort = 1;
            } else {
                rtt[i] = xs_globaltimer() - t0;
            }
        }
        __syncthreads();
        if (s_abort)
            return;
    }
}



static xs_status check_devstatus(xs_replayer *rp, const char *what)
{
    volatile xs_devstatus *v = rp->dstat;
    xs_devstatus s;
    s.code = v->code;
    s.block = v->block;
    s.detail = v->detail;
    if (s.code == 0)
        return XS_OK;
    memset(rp->dstat, 0, sizeof *rp->dstat);
    if (s.code == XS_DEVERR_TIMEOUT) {
        if (s.detail >= 2000000ull)
            return xs_seterr(XS_ETIMEOUT, "%s: rank %llu did not reach the common start within "
                             "%.1f s (peer run: every rank starts each run together)", what,
                             s.detail - 2000000ull, rp->o.timeout_s);
        if (s.detail >= 1000000ull)
            return xs_seterr(XS_ETIMEOUT, "%s: grid barrier after row %llu timed out on producer "
                             "%u (%.1f s bound)", what, s.detail - 1000000ull, s.block,
                             rp->o.timeout_s);
        return xs_seterr(XS_ETIMEOUT, "%s: wait timed out on CTA %u (detail %llu, %.1f s bound)",
                         what, s.block, s.detail, rp->o.timeout_s);
    }
    return xs_seterr(XS_ECUDA, "%s: device reported failure %u on CTA %u", what, s.code,
                     s.block);
}

static xs_status agree_max(xs_replayer *rp, double *v);

static xs_status sweep_window(xs_replayer *rp);

xs_status xs_replayer_open(const xs_replay_opts *o, xs_replayer **out)
{
    *out = NULL;
    xs_replayer *rp = (xs_replayer *)calloc(1, sizeof *rp);
    if (!rp)
        return xs_seterr(XS_ENOMEM, "out of host memory");
    rp->o = *o;
    if (!(rp->o.timeout_s > 0))
        rp->o.timeout_s = 30;
    xs_status st = xs_gpu_open(o->device, &rp->gpu);
    if (st != XS_OK) {
        free(rp);
        return st;
    }
    xs_win_opts wo;
    memset(&wo, 0, sizeof wo);
    wo.target = o->target;
    wo.virtual_peers = o->virtual_peers;
    wo.bytes = o->window_bytes;
    if (o->target == XS_TARGET_PEER) {
        /* N > 1 ranks: one region of window_bytes per source in every window, so that a
         * schedule fits the same window size on any rank count */
        int rank = 0, nr = 1, have = 0;
        unsigned char id[XS_NCCL_ID_BYTES];
        st = xs_rank_env(&rank, &nr, id, &have);
        if (st != XS_OK) {
            free(rp);
            return st;
        }
        if (nr > 1)
            wo.bytes = o->window_bytes * (size_t)nr;
    }
    wo.nflags = XS_REPLAY_UFLAGS + XS_MAX_RANKS;
    wo.device = o->device;
    st = xs_win_open(&wo, &rp->win);
    if (st != XS_OK) {
        free(rp);
        return st;
    }
    rp->own = rp->tab = *xs_win_table(rp->win);
    rp->n = rp->own.nranks;
    rp->me = rp->own.rank;
    rp->multi = o->target == XS_TARGET_PEER && rp->n > 1;
    rp->pm = xs_peermap_make(rp->n, rp->me, rp->multi, o->one_dest);
    if (rp->multi) {
        /* every window holds one region per source; this rank stores into region `me` of the
         * other ranks' windows (docs/MULTIGPU.md, calibrate/replay/validate -g N) */
        rp->region16 = (unsigned long long)(rp->own.bytes / 16 / (size_t)rp->n) & ~7ull;
        for (int d = 0; d < rp->n; d++)
            rp->tab.data[d] = rp->own.data[d] + 16 * rp->region16 * (unsigned long long)rp->me;
        rp->tab.bytes = (size_t)(16 * rp->region16);
    }
    /* more than half an SM's shared memory: the scheduler can place only one CTA per SM */
    rp->smem = rp->gpu.smem_per_sm / 2 + 1024;
    if (rp->smem > rp->gpu.smem_optin)
        rp->smem = rp->gpu.smem_optin;
#define OPEN_CU(call)                                                                         \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            xs_seterr(XS_ECUDA, "%s: %s", #call, cudaGetErrorString(e_));                     \
            xs_replayer_close(rp);                                                            \
            return XS_ECUDA;                                                                  \
        }                                                                                     \
    } while (0)
    OPEN_CU(cudaFuncSetAttribute(replay_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)rp->smem));
    OPEN_CU(cudaFuncSetAttribute(work_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)rp->smem));
    OPEN_CU(cudaHostAlloc((void **)&rp->dstat, sizeof(xs_devstatus), cudaHostAllocMapped));
    memset(rp->dstat, 0, sizeof *rp->dstat);
    OPEN_CU(cudaMalloc((void **)&rp->dscratch, 4 * sizeof(unsigned long long)));
    OPEN_CU(cudaMalloc((void **)&rp->danchors, (size_t)rp->gpu.sm_count * sizeof(xs_anchor)));
    if (!(rp->last_smid = (int *)calloc((size_t)rp->gpu.sm_count, sizeof(int)))) {
        xs_replayer_close(rp);
        return xs_seterr(XS_ENOMEM, "out of host memory");
    }
    OPEN_CU(cudaStreamCreateWithFlags(&rp->stream, cudaStreamNonBlocking));
    OPEN_CU(cudaEventCreate(&rp->ev0));
    OPEN_CU(cudaEventCreate(&rp->ev1));
    /* SM clock, for converting gaps to cycles */
    unsigned long long *dprobe, hprobe[2];
    OPEN_CU(cudaMalloc((void **)&dprobe, sizeof hprobe));
    clock_probe_kernel<<<1, 1, 0, rp->stream>>>(dprobe);
    OPEN_CU(cudaGetLastError());
    OPEN_CU(cudaMemcpyAsync(hprobe, dprobe, sizeof hprobe, cudaMemcpyDeviceToHost, rp->stream));
    OPEN_CU(cudaStreamSynchronize(rp->stream));
    cudaFree(dprobe);
    rp->ghz = hprobe[0] ? (double)hprobe[1] / (double)hprobe[0] : 0;
    if (!(rp->ghz > 0.1 && rp->ghz < 10)) {
        xs_replayer_close(rp);
        return xs_seterr(XS_ECUDA, "SM clock probe gave %.3f GHz; %%globaltimer not usable",
                         rp->ghz);
    }
#undef OPEN_CU
    st = sweep_window(rp);
    if (st != XS_OK) {
        xs_replayer_close(rp);
        return st;
    }
    if (rp->multi) {
        /* N > 1 peer ranks run the same schedules, sized by the SM count (calibrate's K, the
         * validate suite): every rank must have the same */
        const int sm = rp->gpu.sm_count;
        double hi = sm, lo = 1e6 - sm;
        xs_status a = agree_max(rp, &hi);
        if (a == XS_OK)
            a = agree_max(rp, &lo);
        if (a == XS_OK && ((int)hi != sm || (int)(1e6 - lo) != sm))
            a = xs_seterr(XS_EINVAL, "the ranks' GPUs differ: %d to %d SMs (every rank runs the "
                          "same schedules; use GPUs of one kind, whole, not MIG slices)",
                          (int)(1e6 - lo), (int)hi);
        if (a != XS_OK) {
            xs_win_mark_failed(rp->win);
            xs_replayer_close(rp);
            return a;
        }
    }
    *out = rp;
    return XS_OK;
}

void xs_replayer_close(xs_replayer *rp)
{
    if (!rp)
        return;
    if (rp->stream)
        cudaStreamSynchronize(rp->stream);
    cudaFree(rp->drows);
    cudaFree(rp->dstamps);
    cudaFree(rp->danchors);
    cudaFree(rp->dsm_map);
    free(rp->sms);
    free(rp->last_smid);
    cudaFree(rp->dscratch);
    if (rp->dstat)
        cudaFreeHost(rp->dstat);
    if (rp->ev0) cudaEventDestroy(rp->ev0);
    if (rp->ev1) cudaEventDestroy(rp->ev1);
    if (rp->stream) cudaStreamDestroy(rp->stream);
    if (rp->win)
        xs_win_close(rp->win);
    free(rp);
}

const xs_gpu_info *xs_replayer_gpu(const xs_replayer *rp) { return &rp->gpu; }

int xs_replayer_max_producers(const xs_replayer *rp) { return rp->gpu.sm_count; }

/* A producer's region in 16-byte units: its bytes rounded up to whole 128-byte lines. */
static unsigned long long slot16(int64_t bytes)
{
    unsigned long long n16 = (unsigned long long)(bytes / 16);
    return (n16 + 7) & ~7ull;
}

/* 16-byte units each destination window needs for the schedule. */
static unsigned long long window_need16(const xs_schedule *s, const xs_peermap *pm)
{
    unsigned long long need = 0;
    for (int r = 0; r < s->nrows; r++) {
        unsigned long long slots = (unsigned long long)xs_pm_slots_max(pm, s->rows[r].producers);
        need += slots * slot16(s->rows[r].bytes_per_producer);
    }
    return need;
}

xs_status xs_replay_check(const xs_replayer *rp, const xs_schedule *s)
{
    int kmax = xs_schedule_max_producers(s);
    if (kmax > rp->gpu.sm_count)
        return xs_seterr(XS_ERANGE, "the schedule needs %d producers; %s has %d SMs (one producer "
                         "per SM)", kmax, rp->gpu.name, rp->gpu.sm_count);
    if (rp->nsms && kmax > rp->nsms)
        return xs_seterr(XS_ERANGE, "the schedule needs %d producers; %d SMs were chosen for them",
                         kmax, rp->nsms);
    for (int r = 0; r < s->nrows; r++)
        if (s->rows[r].bytes_per_producer % 16)
            return xs_seterr(XS_EINVAL, "row %d: bytes_per_producer %lld is not a multiple of 16 "
                             "(producers store 16-byte units)", r,
                             (long long)s->rows[r].bytes_per_producer);
    unsigned long long need = 16 * window_need16(s, &rp->pm);
    if (need > rp->tab.bytes)
        return xs_seterr(XS_ERANGE, "the schedule stores %.4g MB per destination window%s; the "
                         "window holds %.4g MB (raise --window)", need / 1e6,
                         rp->multi ? " and source" : "", rp->tab.bytes / 1e6);
    if ((double)s->nrows * kmax > (double)(1 << 24))
        return xs_seterr(XS_ERANGE, "%d rows x %d producers: too many issue windows to record "
                         "(at most 2^24)", s->nrows, kmax);
    double work_s = xs_schedule_gap_ns(s) * 1e-9 + xs_schedule_bytes(s) / 1e9; /* >= 1 GB/s */
    if (work_s > rp->o.timeout_s)
        return xs_seterr(XS_ERANGE, "the schedule would run about %.0f s, over the %.0f s bound "
                         "(--timeout)", work_s, rp->o.timeout_s);
    return XS_OK;
}

/* The pattern salt of source rank `src` (N > 1 peer ranks; 0 otherwise): a region written by the
 * wrong source fails its check. */
static unsigned int src_salt(const xs_replayer *rp, int src)
{
    return rp->multi ? (unsigned)(src + 1) * 0x27d4eb2fu : 0u;
}

/* Verify every row's regions at every destination this process owns, destination-side: every
 * producer's bytes (the padding to whole lines between them is never written and not checked).
 * One process: every window. N > 1 peer ranks: this rank's own window, every other source's
 * region of it (the sources' stores are complete: the caller passed a barrier). */
static xs_status verify_all(xs_replayer *rp, const xs_schedule *s, const unsigned int *seeds,
                            const unsigned long long *off16, uint64_t *bad_total)
{
    const int n = rp->n;
    *bad_total = 0;
    for (int r = 0; r < s->nrows; r++) {
        const int k = s->rows[r].producers;
        unsigned long long n16 = (unsigned long long)(s->rows[r].bytes_per_producer / 16);
        unsigned long long st16 = slot16(s->rows[r].bytes_per_producer);
        for (int i = 0; i < n; i++) {
            /* (destination d, source src): the producers p = j, j + D, ... of src land here */
            const int d = rp->multi ? rp->me : i, src = rp->multi ? i : rp->me;
            const int j = xs_pm_first(&rp->pm, src, d);
            unsigned long long slots = (unsigned long long)xs_pm_slots(&rp->pm, k, j);
            if (slots == 0)
                continue; /* no producer of src stores here (or src is this window's rank) */
            unsigned int seed = seeds[r] ^ ((unsigned)d * 0x85ebca6bu) ^ src_salt(rp, src);
            unsigned long long base = rp->multi ? (unsigned long long)src * rp->region16 : 0;
            uint64_t bad = 0;
            if (st16 == n16) {
                XS_TRY(xs_win_verify(rp->win, d, base + off16[r], slots * n16, seed, off16[r],
                                     &bad));
                *bad_total += bad;
                XS_TRY(xs_win_host_state(rp->win, d, base + off16[r], slots * n16, rp->o.dest));
                continue;
            }
            for (unsigned long long q = 0; q < slots; q++) {
                unsigned long long first = off16[r] + q * st16;
                XS_TRY(xs_win_verify(rp->win, d, base + first, n16, seed, first, &bad));
                *bad_total += bad;
                XS_TRY(xs_win_host_state(rp->win, d, base + first, n16, rp->o.dest));
            }
        }
    }
    return XS_OK;
}

static xs_status replay_once(xs_replayer *rp, const xs_schedule *s, int sync, uint32_t seed,
                             xs_result *res, xs_replay_stats *stats)
{
    memset(res, 0, sizeof *res);
    memset(stats, 0, sizeof *stats);
    XS_TRY(xs_replay_check(rp, s));
    const int grid = xs_schedule_max_producers(s);
    /* N > 1 peer ranks: every rank must know every source's patterns, and callers seed from the
     * clock: the seed is the run counter, which the lockstep keeps equal on every rank */
    if (rp->multi)
        seed = 0x5eed7u + 0x9e3779b9u * (uint32_t)rp->nrun;
    const unsigned long long xepoch = rp->multi ? xs_win_next_barrier_epoch(rp->win) : 0;
    rp->nrun++;
    xs_drow *h = (xs_drow *)calloc((size_t)s->nrows, sizeof *h);
    unsigned int *seeds = (unsigned int *)calloc((size_t)s->nrows, sizeof *seeds);
    unsigned long long *off16 =
        (unsigned long long *)calloc((size_t)s->nrows, sizeof *off16);
    size_t nst = (size_t)s->nrows * grid;
    xs_stamp *hs = (xs_stamp *)malloc(nst * sizeof *hs);
    xs_anchor *ha = (xs_anchor *)malloc((size_t)grid * sizeof *ha);
    xs_status st = XS_OK;
    if (!h || !seeds || !off16 || !hs || !ha) {
        st = xs_seterr(XS_ENOMEM, "out of host memory for %d rows", s->nrows);
        goto out;
    }
    {
        /* rotate destination offsets: this run starts where the last one's footprint ended */
        const unsigned long long need16 = window_need16(s, &rp->pm);
        const unsigned long long base16 =
            rp->o.fixed_offsets ? 0 : xs_pm_rotate(rp->rot16, rp->rot_need16, need16,
                                                   (unsigned long long)(rp->tab.bytes / 16));
        rp->rot16 = base16;
        rp->rot_need16 = need16;
        stats->offset_bytes = 16.0 * (double)base16;
        unsigned long long off = base16;
        for (int r = 0; r < s->nrows; r++) {
            const xs_row *rw = &s->rows[r];
            h[r].k = rw->producers;
            h[r].n16 = (unsigned long long)(rw->bytes_per_producer / 16);
            h[r].stride16 = slot16(rw->bytes_per_producer);
            h[r].gap_cyc = (unsigned long long)llround(rw->gap_ns * rp->ghz);
            h[r].off16 = off;
            h[r].seed = xs_mix32(seed * 0x9e3779b9u + (unsigned)r) | 1u;
            seeds[r] = h[r].seed;
            off16[r] = off;
            off += (unsigned long long)xs_pm_slots_max(&rp->pm, rw->producers) * h[r].stride16;
        }
    }
#define RUN_CU(call)                                                                          \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            st = xs_seterr(XS_ECUDA, "%s: %s", #call, cudaGetErrorString(e_));                \
            goto out;                                                                         \
        }                                                                                     \
    } while (0)
    if ((size_t)s->nrows > rp->drows_cap) {
        cudaFree(rp->drows);
        rp->drows = NULL;
        RUN_CU(cudaMalloc((void **)&rp->drows, (size_t)s->nrows * sizeof(xs_drow)));
        rp->drows_cap = (size_t)s->nrows;
    }
    if (nst > rp->dstamps_cap) {
        cudaFree(rp->dstamps);
        rp->dstamps = NULL;
        RUN_CU(cudaMalloc((void **)&rp->dstamps, nst * sizeof(xs_stamp)));
        rp->dstamps_cap = nst;
    }
    RUN_CU(cudaMemcpyAsync(rp->drows, h, (size_t)s->nrows * sizeof *h, cudaMemcpyHostToDevice,
                           rp->stream));
    RUN_CU(cudaMemsetAsync(rp->dscratch, 0, 4 * sizeof(unsigned long long), rp->stream));
    RUN_CU(cudaMemsetAsync(rp->dstamps, 0, nst * sizeof(xs_stamp), rp->stream));
    RUN_CU(cudaMemsetAsync(rp->danchors, 0, (size_t)grid * sizeof(xs_anchor), rp->stream));
    RUN_CU(cudaEventRecord(rp->ev0, rp->stream));
    replay_kernel<<<rp->nsms ? rp->gpu.sm_count : grid, XS_PRODUCER_THREADS, rp->smem,
                    rp->stream>>>(
        rp->tab, rp->drows, s->nrows, rp->dstamps, rp->danchors, sync, rp->dscratch,
        10000ull /* common start 10 us after the first producer arrives */,
        (unsigned long long)(rp->o.timeout_s * 1e9), rp->dstat, rp->pm.dbase, rp->pm.ndest,
        src_salt(rp, rp->me), xepoch, rp->nsms ? rp->dsm_map : NULL, grid);
    RUN_CU(cudaGetLastError());
    RUN_CU(cudaEventRecord(rp->ev1, rp->stream));
    st = xs_event_wait(rp->ev1, rp->o.timeout_s + 5, "replay kernel");
    if (st != XS_OK)
        goto out;
    st = check_devstatus(rp, "replay kernel");
    if (st != XS_OK)
        goto out;
    {
        float ms = 0;
        RUN_CU(cudaEventElapsedTime(&ms, rp->ev0, rp->ev1));
        stats->kernel_ms = ms;
    }
    RUN_CU(cudaMemcpy(hs, rp->dstamps, nst * sizeof *hs, cudaMemcpyDeviceToHost));
    RUN_CU(cudaMemcpy(ha, rp->danchors, (size_t)grid * sizeof *ha, cudaMemcpyDeviceToHost));
#undef RUN_CU
    for (int p = 0; p < grid && rp->nsms; p++)
        if (ha[p].g1 == 0 || (int)ha[p].smid != rp->sms[p]) {
            st = xs_seterr(XS_ECUDA, "producer %d did not run on SM %d (%s): another kernel on "
                           "the GPU?", p, rp->sms[p], ha[p].g1 ? "it ran elsewhere" : "it never "
                           "ran");
            goto out;
        }
    for (int p = 0; p < grid && rp->last_smid; p++)
        rp->last_smid[p] = (int)ha[p].smid;
    rp->last_grid = rp->last_smid ? grid : 0;
    {
        /* cycles -> ns on the common base: per producer, its own anchors and the median clock */
        double *f = (double *)malloc((size_t)grid * sizeof *f);
        double *go = (double *)malloc((size_t)grid * sizeof *go);
        if (!f || !go) {
            free(f);
            free(go);
            st = xs_seterr(XS_ENOMEM, "out of host memory");
            goto out;
        }
        for (int p = 0; p < grid; p++) {
            double dg = (double)(ha[p].g1 - ha[p].g0), dc = (double)(ha[p].c1 - ha[p].c0);
            f[p] = dg > 20000 ? dc / dg : rp->ghz;
        }
        double ghz = xs_median(f, (size_t)grid);
        stats->sm_ghz = ghz;
        /* the common start instant: every producer spun until the same %globaltimer value */
        double t_go = INFINITY;
        for (int p = 0; p < grid; p++) {
            go[p] = (double)ha[p].g0 + (double)(ha[p].c_go - ha[p].c0) / ghz;
            if (go[p] < t_go)
                t_go = go[p];
        }
        stats->start_skew_ns = xs_max(go, (size_t)grid) - t_go;
        st = xs_result_alloc(res, s->nrows, grid, 1);
        if (st != XS_OK) {
            free(f);
            free(go);
            goto out;
        }
        for (int r = 0; r < s->nrows; r++)
            for (int p = 0; p < s->rows[r].producers; p++) {
                const xs_stamp *x = &hs[(size_t)r * grid + p];
                double base = (double)ha[p].g0 - t_go;
                res->win_start[(size_t)r * grid + p] =
                    base + (double)(x->c_start - ha[p].c0) / ghz;
                res->win_end[(size_t)r * grid + p] = base + (double)(x->c_end - ha[p].c0) / ghz;
            }
        double mk = 0;
        for (int p = 0; p < grid; p++) {
            double e = (double)ha[p].g0 - t_go + (double)(ha[p].c1 - ha[p].c0) / ghz;
            if (e > mk)
                mk = e;
        }
        res->makespan_ns = mk;
        xs_result_rows_from_windows(res, s);
        free(f);
        free(go);
    }
    stats->bytes = xs_schedule_bytes(s);
    /* N > 1 peer ranks: every source's stores are in this window before it is read */
    if (rp->multi && (st = xs_win_barrier(rp->win, (int)(rp->o.timeout_s * 1000) + 5000)) != XS_OK)
        goto out;
    st = verify_all(rp, s, seeds, off16, &stats->bad16);
    if (st == XS_OK && stats->bad16)
        st = xs_seterr(XS_EVERIFY, "%llu of %.0f 16-byte units wrong or missing at the "
                       "destination", (unsigned long long)stats->bad16, stats->bytes / 16);
out:
    if (st != XS_OK)
        xs_result_free(res);
    free(h);
    free(seeds);
    free(off16);
    free(hs);
    free(ha);
    return st;
}

/* Agreement slot of rank r: user flag XS_REPLAY_UFLAGS + r of every window. A value at or above
 * XS_REPLAY_AGREE_FAIL means "this rank failed". */
#define XS_REPLAY_AGREE_FAIL 1e18
__global__ void agree_put_kernel(xs_wintab tab, unsigned long long v)
{
    const int d = (int)threadIdx.x;
    if (d < tab.nranks)
        xs_st_release_sys(tab.flags[d] + XS_REPLAY_UFLAGS + tab.rank, v);
}

/* N > 1 peer ranks: *v becomes the maximum of every rank's *v (non-negative, whole ns), so that
 * a decision taken from it is the same on every rank. Each rank writes its value into its slot
 * of every window, a barrier, then each reads its own window's slots. A rank writes its next
 * value only after its next run's start barrier, which every rank passes only after reading
 * these: no value is overwritten before it is read. One process: nothing to do. */
static xs_status agree_max(xs_replayer *rp, double *v)
{
    if (!rp->multi)
        return XS_OK;
    const unsigned long long mine = (unsigned long long)ceil(*v > 0 ? *v : 0);
    agree_put_kernel<<<1, 64, 0, rp->stream>>>(rp->own, mine);
    XS_CU_LAUNCH();
    XS_CU(cudaStreamSynchronize(rp->stream));
    XS_TRY(xs_win_barrier(rp->win, (int)(rp->o.timeout_s * 1000) + 5000));
    unsigned long long got[XS_MAX_RANKS];
    XS_CU(cudaMemcpy(got, rp->own.flags[rp->me] + XS_REPLAY_UFLAGS,
                     (size_t)rp->n * sizeof got[0], cudaMemcpyDeviceToHost));
    unsigned long long m = 0;
    for (int r = 0; r < rp->n; r++)
        m = got[r] > m ? got[r] : m;
    *v = (double)m;
    return XS_OK;
}

/* N > 1 peer ranks, after a run that reached its destination check (st: XS_OK or XS_EVERIFY):
 * every rank learns whether any rank's check failed, so that rank 0 never reports a run another
 * rank rejected, and, when all passed, *v becomes the largest of the ranks' *v. Returns st when
 * this rank failed, else an error naming `what` when another one did, else XS_OK. */
static xs_status agree_after_check(xs_replayer *rp, xs_status st, double *v, const char *what)
{
    double x = st == XS_OK ? *v : XS_REPLAY_AGREE_FAIL;
    xs_status a = agree_max(rp, &x);
    if (st != XS_OK)
        return st;
    if (a == XS_OK && x >= XS_REPLAY_AGREE_FAIL)
        a = xs_seterr(XS_EVERIFY, "%s: another rank's destination check failed (its error names "
                      "the units)", what);
    if (a == XS_OK)
        *v = x;
    return a;
}

/* One pass of the replay kernel over the whole of every host window, verified and not recorded,
 * before the first run (xs_replay_opts.cold_window = 0). Run 16: with rotating offsets the runs
 * over pages that no replay run had stored to yet were slower, until the offsets wrapped (96 x
 * 19040 B: 1.2-1.4 us, then 0.8 us, in every window size and state); a pass of a plain kernel
 * over the window, with or without the CPU reading it after, did not change that. */
static xs_status sweep_window(xs_replayer *rp)
{
    int host = 0;
    for (int d = 0; d < rp->n; d++)
        host |= rp->own.host_mem[d];
    if (rp->o.cold_window || !host || rp->multi)
        return XS_OK;
    const int k = rp->gpu.sm_count;
    const unsigned long long slots = (unsigned long long)xs_pm_slots_max(&rp->pm, k);
    const unsigned long long per16 = slots ? (rp->tab.bytes / 16 / slots) & ~7ull : 0;
    if (per16 == 0)
        return XS_OK;
    xs_row row = {k, (int64_t)(per16 * 16), 0.0};
    xs_schedule s = {&row, 1, 1};
    xs_result res;
    xs_replay_stats stats;
    /* no run before it: it starts at the window's start, rotating or not */
    xs_status st = replay_once(rp, &s, 0, 0x5eed5u, &res, &stats);
    rp->rot16 = rp->rot_need16 = 0; /* and so does the first recorded run */
    if (st == XS_OK) {
        xs_result_free(&res);
        return XS_OK;
    }
    char why[512];
    snprintf(why, sizeof why, "%s", xs_errmsg());
    return xs_seterr(st, "the window's first pass (--cold-window skips it): %s", why);
}

/* A run whose producers did not leave the common start together (start skew above
 * o.max_skew_ns) is not the schedule the model is given: it is run again, up to 8 times in all;
 * the last attempt is kept whatever its skew. Every attempt is verified. */
xs_status xs_replay_run(xs_replayer *rp, const xs_schedule *s, int sync, uint32_t seed,
                        xs_result *res, xs_replay_stats *stats)
{
    int again = 0;
    for (int attempt = 0;; attempt++) {
        xs_status st = replay_once(rp, s, sync, seed + 0x51ed27u * (uint32_t)attempt, res, stats);
        stats->restarts = again;
        double skew = stats->start_skew_ns;
        if (rp->multi && (st == XS_OK || st == XS_EVERIFY)) {
            /* after every run: all ranks pass or fail it together, and the largest start skew
             * decides (all rerun or none) */
            xs_status a = agree_after_check(rp, st, &skew, "replay kernel");
            if (a != XS_OK) {
                if (st == XS_OK)
                    xs_result_free(res);
                xs_win_mark_failed(rp->win);
                return a;
            }
        } else if (st != XS_OK) {
            if (rp->multi)
                xs_win_mark_failed(rp->win);
            return st;
        }
        if (rp->o.max_skew_ns <= 0 || attempt == 7 || skew <= rp->o.max_skew_ns)
            return XS_OK;
        xs_result_free(res);
        again++;
    }
}

/* The store rate of one window-sized pass (GB/s; median, min, max of `reps` runs after a
 * warm-up, every byte verified): load < 0, the plain store kernel (4 CTAs per SM, nothing else
 * running); load 0-2, store_load_kernel with that load. */
static xs_status store_rate(xs_replayer *rp, size_t bytes, int load, int reps, double *gbps_med,
                            double *gbps_min, double *gbps_max)
{
    const char *what = load < 0 ? "store bandwidth" : "drain under load";
    if (load > 2)
        return xs_seterr(XS_EINVAL, "drain under load: load %d (0 none, 1 hbm, 2 l2)", load);
    if (bytes > rp->tab.bytes)
        bytes = rp->tab.bytes;
    bytes &= ~(size_t)15;
    if (bytes < 16 || reps < 1)
        return xs_seterr(XS_EINVAL, "%s: nothing to store", what);
    /* hbm: 1 GiB (far above the 60 MiB L2), l2: 24 MiB, both split over the CTAs */
    const size_t buf_bytes = load == 1 ? ((size_t)1 << 30) : load == 2 ? ((size_t)24 << 20) : 0;
    uint4 *buf = NULL;
    if (buf_bytes) {
        cudaError_t e = cudaMalloc((void **)&buf, buf_bytes);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return xs_seterr(XS_ECUDA, "out of device memory: cudaMalloc(%.0f MiB) for the load "
                             "buffer: %s", buf_bytes / 1048576.0, cudaGetErrorString(e));
        }
        cudaMemsetAsync(buf, 0, buf_bytes, rp->stream);
    }
    double *g = (double *)malloc((size_t)reps * sizeof *g);
    xs_status st = g ? XS_OK : xs_seterr(XS_ENOMEM, "out of host memory");
    /* N > 1 peer ranks: rank me stores into its region of rank me + 1's window and verifies
     * what rank me - 1 stored into its own; barriers around each run keep the ranks in step */
    const int dst = rp->multi ? (rp->me + 1) % rp->n : 0;
    const int from = rp->multi ? (rp->me + rp->n - 1) % rp->n : rp->me;
    const unsigned long long vbase = rp->multi ? (unsigned long long)from * rp->region16 : 0;
    const int bar_ms = (int)(rp->o.timeout_s * 1000) + 5000;
    for (int i = -1; i < reps && st == XS_OK; i++) {
        const unsigned int seed =
            xs_mix32((load < 0 ? 0xb5u : 0x10adu) + (unsigned)(i + 7) * 7919u) | 1u;
        if (rp->multi && (st = xs_win_barrier(rp->win, bar_ms)) != XS_OK)
            break;
        cudaEventRecord(rp->ev0, rp->stream);
        if (load < 0)
            store_bw_kernel<<<4 * rp->gpu.sm_count, 256, 0, rp->stream>>>(
                rp->tab.data[dst], bytes / 16, seed ^ src_salt(rp, rp->me));
        else
            store_load_kernel<<<rp->gpu.sm_count, 256, 0, rp->stream>>>(
                rp->tab.data[dst], bytes / 16, seed ^ src_salt(rp, rp->me), buf, buf_bytes / 16,
                load, (unsigned long long)(rp->o.timeout_s * 1e9), rp->dstat);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) {
            st = xs_seterr(XS_ECUDA, "%s: %s", load < 0 ? "store_bw_kernel" : "store_load_kernel",
                           cudaGetErrorString(e));
            break;
        }
        cudaEventRecord(rp->ev1, rp->stream);
        if (load < 0) {
            st = xs_event_wait(rp->ev1, rp->o.timeout_s, "store bandwidth kernel");
        } else {
            st = xs_event_wait(rp->ev1, rp->o.timeout_s + 5, "drain-under-load kernel");
            if (st == XS_OK)
                st = check_devstatus(rp, "drain-under-load kernel");
        }
        if (st != XS_OK)
            break;
        float ms = 0;
        cudaEventElapsedTime(&ms, rp->ev0, rp->ev1);
        uint64_t bad = 0;
        if (rp->multi && (st = xs_win_barrier(rp->win, bar_ms)) != XS_OK)
            break;
        st = xs_win_verify(rp->win, rp->multi ? rp->me : 0, vbase, bytes / 16,
                           seed ^ src_salt(rp, from), 0, &bad);
        if (st == XS_OK && bad)
            st = xs_seterr(XS_EVERIFY, "%s: %llu of %zu 16-byte units wrong", what,
                           (unsigned long long)bad, bytes / 16);
        if (i >= 0)
            g[i] = (double)bytes / (ms * 1e6); /* warm-up run (i = -1) not kept */
    }
    if (rp->multi && (st == XS_OK || st == XS_EVERIFY)) {
        double none = 0; /* every rank learns whether any rank's last check failed */
        st = agree_after_check(rp, st, &none, what);
    }
    if (rp->multi && st != XS_OK)
        xs_win_mark_failed(rp->win);
    if (st == XS_OK) {
        *gbps_med = xs_median(g, (size_t)reps);
        *gbps_min = xs_min(g, (size_t)reps);
        *gbps_max = xs_max(g, (size_t)reps);
    }
    free(g);
    if (buf)
        cudaFree(buf);
    return st;
}

xs_status xs_replay_store_bw_load(xs_replayer *rp, size_t bytes, int load, int reps,
                                  double *gbps_med, double *gbps_min, double *gbps_max)
{
    if (load < 0)
        return xs_seterr(XS_EINVAL, "drain under load: load %d (0 none, 1 hbm, 2 l2)", load);
    return store_rate(rp, bytes, load, reps, gbps_med, gbps_min, gbps_max);
}

xs_status xs_replay_store_bw(xs_replayer *rp, size_t bytes, int reps, double *gbps_med,
                             double *gbps_min, double *gbps_max)
{
    return store_rate(rp, bytes, -1, reps, gbps_med, gbps_min, gbps_max);
}

/* med/lo/hi of field f over n results, NaNs (a column a case does not have) left out */
static void probe_stats(const xs_probe_res *r, int n, size_t f, double *med, double *lo,
                        double *hi)
{
    double v[64];
    size_t m = 0;
    for (int i = 0; i < n && m < 64; i++) {
        double x = *(const double *)((const char *)&r[i] + f);
        if (!isnan(x))
            v[m++] = x;
    }
    *med = xs_median(v, m); /* each NaN when m == 0 */
    *lo = xs_min(v, m);
    *hi = xs_max(v, m);
}

int xs_replay_sms_parse(const char *s, int *out, int cap, int *spread)
{
    int n = 0;
    *spread = 0;
    if (!strcmp(s, "spread")) {
        *spread = 1;
        return 0;
    }
    const char *q = s;
    while (*q) {
        char *e;
        long a = strtol(q, &e, 10), b;
        if (e == q || a < 0 || a > 100000)
            return xs_seterr(XS_EINVAL, "--sms '%s': expected spread, or SM numbers and "
                             "ranges a-b, comma-separated", s), -1;
        b = a;
        if (*e == '-') {
            q = e + 1;
            b = strtol(q, &e, 10);
            if (e == q || b < a || b > 100000)
                return xs_seterr(XS_EINVAL, "--sms '%s': bad range at '%s'", s, q), -1;
        }
        for (long v = a; v <= b; v++) {
            if (n == cap)
                return xs_seterr(XS_ERANGE, "--sms '%s': more than %d SMs", s, cap), -1;
            out[n++] = (int)v;
        }
        if (*e == ',' && e[1])
            e++;
        else if (*e)
            return xs_seterr(XS_EINVAL, "--sms '%s': unexpected '%c'", s, *e), -1;
        q = e;
    }
    if (n == 0)
        return xs_seterr(XS_EINVAL, "--sms: empty list"), -1;
    return n;
}

xs_status xs_replay_sms_check(const char *s)
{
    int list[1024], spread;
    return xs_replay_sms_parse(s, list, 1024, &spread) < 0 ? XS_EINVAL : XS_OK;
}

xs_status xs_replayer_set_sms(xs_replayer *rp, const int *sms, int n)
{
    const int nsm = rp->gpu.sm_count;
    if (n == 0) {
        rp->nsms = 0;
        return XS_OK;
    }
    if (rp->multi)
        return xs_seterr(XS_EINVAL, "chosen SMs: one rank only");
    if (n < 0 || n > nsm)
        return xs_seterr(XS_ERANGE, "chosen SMs: %d listed, the GPU has %d", n, nsm);
    int *map = (int *)malloc((size_t)nsm * sizeof *map);
    int *keep = (int *)malloc((size_t)n * sizeof *keep);
    if (!map || !keep) {
        free(map);
        free(keep);
        return xs_seterr(XS_ENOMEM, "out of host memory");
    }
    for (int i = 0; i < nsm; i++)
        map[i] = -1;
    xs_status st = XS_OK;
    for (int p = 0; p < n && st == XS_OK; p++) {
        if (sms[p] < 0 || sms[p] >= nsm)
            st = xs_seterr(XS_ERANGE, "chosen SMs: SM %d does not exist (0..%d)", sms[p], nsm - 1);
        else if (map[sms[p]] >= 0)
            st = xs_seterr(XS_EINVAL, "chosen SMs: SM %d is listed twice", sms[p]);
        else
            map[sms[p]] = p;
        keep[p] = sms[p];
    }
    if (st == XS_OK && !rp->dsm_map &&
        cudaMalloc((void **)&rp->dsm_map, (size_t)nsm * sizeof(int)) != cudaSuccess)
        st = xs_seterr(XS_ENOMEM, "chosen SMs: %s", cudaGetErrorString(cudaGetLastError()));
    if (st == XS_OK && cudaMemcpy(rp->dsm_map, map, (size_t)nsm * sizeof(int),
                                  cudaMemcpyHostToDevice) != cudaSuccess)
        st = xs_seterr(XS_ECUDA, "chosen SMs: %s", cudaGetErrorString(cudaGetLastError()));
    free(map);
    if (st != XS_OK) {
        free(keep);
        return st;
    }
    free(rp->sms);
    rp->sms = keep;
    rp->nsms = n;
    return XS_OK;
}

xs_status xs_replayer_use_sms(xs_replayer *rp, const char *spec)
{
    int list[1024];
    int spread, n = xs_replay_sms_parse(spec, list, 1024, &spread);
    if (n < 0)
        return XS_EINVAL;
    for (int odd = 0; spread && odd < 2; odd++)
        for (int s = odd; s < rp->gpu.sm_count && n < 1024; s += 2)
            list[n++] = s;
    return xs_replayer_set_sms(rp, list, n);
}

int xs_replayer_last_smids(const xs_replayer *rp, int *out, int n)
{
    int k = rp->last_grid < n ? rp->last_grid : n;
    for (int p = 0; p < k; p++)
        out[p] = rp->last_smid[p];
    return k;
}

/* SM groups: every CTA of a thread-block cluster runs in one GPC, so SMs that hosted CTAs of one
 * cluster share a GPC. Clusters of several sizes (the non-portable 16 included, one CTA per SM
 * by shared memory) are launched as many at once as fit, and the groups are the connected
 * components of "shared a cluster". A size that does not divide a GPC leaves SMs over, which
 * another size covers. */
__global__ void sm_group_kernel(int *smid_of_cta)
{
    extern __shared__ unsigned char occupancy_only[];
    (void)occupancy_only;
    if (threadIdx.x == 0) {
        unsigned int sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        smid_of_cta[blockIdx.x] = (int)sm;
    }
}

static int uf_find(int *up, int x)
{
    while (up[x] != x)
        x = up[x] = up[up[x]];
    return x;
}

xs_status xs_replayer_sm_groups(xs_replayer *rp, int *group, int n, int *ngroups)
{
    const int sms = rp->gpu.sm_count;
    *ngroups = 0;
    if (n < sms)
        return xs_seterr(XS_EINVAL, "SM groups: room for %d SMs, the GPU has %d", n, sms);
    int *up = (int *)malloc((size_t)sms * sizeof *up), *h = NULL, *d = NULL;
    xs_status st = XS_OK;
    if (!up)
        return xs_seterr(XS_ENOMEM, "out of host memory");
    for (int i = 0; i < sms; i++)
        up[i] = i;
    static const int sizes[] = {16, 9, 8, 6, 5, 3, 2};
    const size_t smem = rp->smem;
    int launched = 0;
    if (cudaMalloc((void **)&d, (size_t)sms * sizeof *d) != cudaSuccess ||
        !(h = (int *)malloc((size_t)sms * sizeof *h))) {
        st = xs_seterr(XS_ENOMEM, "SM groups: out of memory");
        goto out;
    }
    if (cudaFuncSetAttribute(sm_group_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
            cudaSuccess ||
        cudaFuncSetAttribute(sm_group_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem) != cudaSuccess) {
        st = xs_seterr(XS_ECUDA, "SM groups: %s", cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = (unsigned)sizes[z];
        at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
        cfg.blockDim = dim3(32);
        cfg.dynamicSmemBytes = smem;
        cfg.stream = rp->stream;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        int clusters = 0;
        cfg.gridDim = dim3((unsigned)sizes[z]);
        if (cudaOccupancyMaxActiveClusters(&clusters, sm_group_kernel, &cfg) != cudaSuccess ||
            clusters < 1) {
            (void)cudaGetLastError(); /* a size this GPU cannot place: the others cover it */
            continue;
        }
        const int grid = clusters * sizes[z];
        if (grid > sms)
            continue;
        cfg.gridDim = dim3((unsigned)grid);
        if (cudaLaunchKernelEx(&cfg, sm_group_kernel, d) != cudaSuccess ||
            cudaStreamSynchronize(rp->stream) != cudaSuccess ||
            cudaMemcpy(h, d, (size_t)grid * sizeof *h, cudaMemcpyDeviceToHost) != cudaSuccess) {
            st = xs_seterr(XS_ECUDA, "SM groups: clusters of %d: %s", sizes[z],
                           cudaGetErrorString(cudaGetLastError()));
            goto out;
        }
        for (int b = 0; b < grid; b++) {
            if (h[b] < 0 || h[b] >= sms) {
                st = xs_seterr(XS_ECUDA, "SM groups: a CTA reported SM %d of %d", h[b], sms);
                goto out;
            }
            const int first = h[b - b % sizes[z]];
            up[uf_find(up, h[b])] = uf_find(up, first);
        }
        launched++;
    }
    if (!launched) {
        st = xs_seterr(XS_ECUDA, "SM groups: no cluster size could be launched");
        goto out;
    }
    /* number the groups by their lowest SM */
    for (int i = 0; i < sms; i++)
        group[i] = -1;
    for (int i = 0; i < sms; i++) {
        const int root = uf_find(up, i);
        if (group[root] < 0)
            group[root] = (*ngroups)++;
        group[i] = group[root];
    }
out:
    cudaFree(d);
    free(h);
    free(up);
    return st;
}

xs_status xs_replay_work_probe(xs_replayer *rp, const xs_probe_cfg *cfg, int reps,
                               xs_probe_res *med, xs_probe_res *lo, xs_probe_res *hi)
{
    const int sms = rp->gpu.sm_count;
    if (rp->multi)
        return xs_seterr(XS_EINVAL, "probe: one rank only (the window of this process)");
    if (reps < 1 || reps > 64)
        return xs_seterr(XS_EINVAL, "probe: %d repetitions (1..64)", reps);
    if (cfg->store_ctas < 0 || cfg->store_ctas > sms)
        return xs_seterr(XS_EINVAL, "probe: %d storing CTAs on %d SMs", cfg->store_ctas, sms);
    if (cfg->load < XS_PROBE_LOAD_NONE || cfg->load > XS_PROBE_LOAD_FMA)
        return xs_seterr(XS_EINVAL, "probe: load %d (0 none, 1 hbm, 2 l2, 3 fma)", cfg->load);
    if (cfg->store_ctas == 0 && cfg->load == XS_PROBE_LOAD_NONE)
        return xs_seterr(XS_EINVAL, "probe: a control run (no stores) needs a load");
    if (cfg->load != XS_PROBE_LOAD_NONE &&
        !(cfg->duration_ns > 0 && cfg->duration_ns < rp->o.timeout_s * 1e9))
        return xs_seterr(XS_EINVAL, "probe: load duration %.3g ns (0 < duration < the %.0f s "
                         "timeout)", cfg->duration_ns, rp->o.timeout_s);
    const int rb = cfg->row_bytes;
    if (rb && (rb < 256 || rb > 65536 || (rb & (rb - 1))))
        return xs_seterr(XS_EINVAL, "probe: row of %d bytes (0, or a power of two 256..65536)",
                         rb);
    if (cfg->store_ctas && (cfg->interleave < 1 || cfg->interleave > cfg->store_ctas ||
                            (!rb && cfg->interleave != 1)))
        return xs_seterr(XS_EINVAL, "probe: interleave %d with %d storing CTAs and %s rows",
                         cfg->interleave, cfg->store_ctas, rb ? "short" : "whole-share");
    if (cfg->pace_gbps < 0)
        return xs_seterr(XS_EINVAL, "probe: pace %.3g GB/s", cfg->pace_gbps);
    if (cfg->bulk && rp->smem < 16384)
        return xs_seterr(XS_EINVAL, "probe: bulk stores need 16 KiB of shared memory, the "
                         "replayer has %zu bytes", (size_t)rp->smem);
    xs_probe_dev a;
    memset(&a, 0, sizeof a);
    a.store_ctas = cfg->store_ctas;
    a.interleave = cfg->interleave > 0 ? cfg->interleave : 1;
    a.load = cfg->load;
    a.bulk = cfg->bulk != 0;
    a.timeout_ns = (unsigned long long)(rp->o.timeout_s * 1e9);
    a.duration_ns = (unsigned long long)cfg->duration_ns;
    size_t bytes = cfg->bytes > rp->tab.bytes ? rp->tab.bytes : cfg->bytes;
    if (a.store_ctas) {
        const unsigned long long per16 = bytes / 16 / (size_t)a.store_ctas;
        if (rb) {
            a.row_shift = 0;
            while ((16ull << a.row_shift) < (unsigned long long)rb)
                a.row_shift++;
            a.rows = per16 >> a.row_shift;
            a.bytes16 = a.rows << a.row_shift;
        } else {
            a.row_shift = 63;
            a.rows = 1;
            a.bytes16 = per16;
        }
        if (a.bytes16 == 0)
            return xs_seterr(XS_EINVAL, "probe: %zu bytes give no whole row of %d bytes to each "
                             "of %d CTAs", cfg->bytes, rb ? rb : 16, a.store_ctas);
        if (cfg->pace_gbps > 0) /* 8 KiB per step and CTA at its share of the rate */
            a.pace_ns = (unsigned long long)(8192.0 * a.store_ctas / cfg->pace_gbps);
    }
    const unsigned long long n16 = a.bytes16 * (unsigned long long)a.store_ctas;
    const size_t buf_bytes = cfg->load == XS_PROBE_LOAD_HBM  ? ((size_t)1 << 30)
                             : cfg->load == XS_PROBE_LOAD_L2 ? ((size_t)24 << 20)
                                                             : 0;
    uint4 *buf = NULL;
    unsigned long long *dev = NULL; /* [0] stores done, [1..] 5 words per CTA */
    xs_probe_res *runs = (xs_probe_res *)calloc((size_t)reps, sizeof *runs);
    unsigned long long *host = (unsigned long long *)calloc((size_t)sms * 5, sizeof *host);
    xs_status st = runs && host ? XS_OK : xs_seterr(XS_ENOMEM, "out of host memory");
    if (st == XS_OK && buf_bytes) {
        cudaError_t e = cudaMalloc((void **)&buf, buf_bytes);
        if (e != cudaSuccess) {
            cudaGetLastError();
            buf = NULL;
            st = xs_seterr(XS_ECUDA, "out of device memory: cudaMalloc(%.0f MiB) for the load "
                           "buffer: %s", buf_bytes / 1048576.0, cudaGetErrorString(e));
        } else {
            cudaMemsetAsync(buf, 0, buf_bytes, rp->stream);
        }
    }
    a.buf_n16 = buf_bytes / 16;
    if (st == XS_OK) {
        cudaError_t e = cudaMalloc((void **)&dev, (1 + 5 * (size_t)sms) * sizeof *dev);
        if (e != cudaSuccess) {
            cudaGetLastError();
            dev = NULL;
            st = xs_seterr(XS_ECUDA, "out of device memory: probe counters: %s",
                           cudaGetErrorString(e));
        }
    }
    for (int i = -1; i < reps && st == XS_OK; i++) {
        a.seed = xs_mix32(0x9e0bu + (unsigned)(i + 11) * 7919u) | 1u;
        cudaMemsetAsync(dev, 0, (1 + 5 * (size_t)sms) * sizeof *dev, rp->stream);
        cudaEventRecord(rp->ev0, rp->stream);
        work_probe_kernel<<<sms, 256, rp->smem, rp->stream>>>(rp->tab.data[0], a, buf, dev,
                                                               dev + 1, rp->dstat);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) {
            st = xs_seterr(XS_ECUDA, "work_probe_kernel: %s", cudaGetErrorString(e));
            break;
        }
        cudaEventRecord(rp->ev1, rp->stream);
        st = xs_event_wait(rp->ev1, rp->o.timeout_s + 5, "probe kernel");
        if (st == XS_OK)
            st = check_devstatus(rp, "probe kernel");
        unsigned long long ndone = 0;
        if (st == XS_OK && (cudaMemcpy(host, dev + 1, 5 * (size_t)sms * sizeof *host,
                                       cudaMemcpyDeviceToHost) != cudaSuccess ||
                            cudaMemcpy(&ndone, dev, sizeof ndone, cudaMemcpyDeviceToHost) !=
                                cudaSuccess))
            st = xs_seterr(XS_ECUDA, "probe: reading the counters back failed");
        if (st == XS_OK && ndone != (unsigned long long)a.store_ctas)
            st = xs_seterr(XS_EVERIFY, "probe: %llu of %d storing CTAs finished", ndone,
                           a.store_ctas);
        if (st != XS_OK)
            break;
        uint64_t bad = 0;
        if (n16) {
            st = xs_win_verify(rp->win, 0, 0, n16, a.seed, 0, &bad);
            if (st == XS_OK && bad)
                st = xs_seterr(XS_EVERIFY, "probe: %llu of %llu 16-byte units wrong",
                               (unsigned long long)bad, n16);
            if (st != XS_OK)
                break;
        }
        if (i < 0)
            continue; /* warm-up */
        float ms = 0;
        cudaEventElapsedTime(&ms, rp->ev0, rp->ev1);
        xs_probe_res *r = &runs[i];
        r->kernel_us = ms * 1e3;
        r->bytes = 16.0 * (double)n16;
        unsigned long long s0 = ~0ull, s1 = 0;
        double ls = 0, lo_ = 0;
        int ns = 0, no = 0;
        /* per unit: bytes read + written (hbm, l2) or flops (fma) */
        const double unit = cfg->load == XS_PROBE_LOAD_FMA ? 2.0 * 8 * 128 * XS_PROBE_FMA_ITERS
                                                            : 2.0 * 16384;
        for (int c = 0; c < sms; c++) {
            const unsigned long long *h = host + 5 * c;
            if (c < a.store_ctas) {
                s0 = h[3] < s0 ? h[3] : s0;
                s1 = h[4] > s1 ? h[4] : s1;
            }
            if (cfg->load == XS_PROBE_LOAD_NONE || h[2] <= h[1])
                continue;
            const double rate = h[0] * unit / (double)(h[2] - h[1]) * 1e3; /* per us */
            if (c < a.store_ctas || a.store_ctas == 0)
                ls += rate, ns++;
            else
                lo_ += rate, no++;
        }
        r->store_span_us = a.store_ctas ? (s1 - s0) / 1e3 : NAN;
        r->store_gbps = a.store_ctas && s1 > s0 ? r->bytes / (double)(s1 - s0) : NAN;
        /* MB/s or GFLOP/s per SM: work per us / 1e6 x 1e6 */
        r->load_store_sms = ns ? ls / ns / 1e3 : NAN;
        r->load_other_sms = no ? lo_ / no / 1e3 : NAN;
    }
    if (st == XS_OK) {
        static const size_t fo[] = {offsetof(xs_probe_res, store_gbps),
                                    offsetof(xs_probe_res, store_span_us),
                                    offsetof(xs_probe_res, kernel_us),
                                    offsetof(xs_probe_res, load_store_sms),
                                    offsetof(xs_probe_res, load_other_sms),
                                    offsetof(xs_probe_res, bytes)};
        xs_probe_res m, l, h;
        for (size_t k = 0; k < sizeof fo / sizeof fo[0]; k++)
            probe_stats(runs, reps, fo[k], (double *)((char *)&m + fo[k]),
                        (double *)((char *)&l + fo[k]), (double *)((char *)&h + fo[k]));
        *med = m;
        if (lo)
            *lo = l;
        if (hi)
            *hi = h;
    }
    free(runs);
    free(host);
    if (dev)
        cudaFree(dev);
    if (buf)
        cudaFree(buf);
    return st;
}

xs_status xs_replay_visibility(xs_replayer *rp, size_t bytes, int reps, double *rtt_med_ns,
                               double *rtt_p90_ns)
{
    if (!rp->tab.host_mem[0])
        return xs_seterr(XS_EINVAL, "visibility is measured on host windows (--target host)");
    bytes = bytes < 16 ? 16 : bytes & ~(size_t)15;
    if (bytes > rp->tab.bytes || reps < 1 || reps > 100000)
        return xs_seterr(XS_EINVAL, "visibility: %zu bytes x %d reps do not fit", bytes, reps);
    unsigned long long *drtt = NULL;
    if (cudaMalloc((void **)&drtt, (size_t)reps * sizeof *drtt) != cudaSuccess)
        return xs_seterr(XS_ECUDA, "visibility: out of device memory");
    /* host windows are mapped with the same address on host and device (UVA); check it */
    cudaPointerAttributes pa;
    if (cudaPointerGetAttributes(&pa, rp->tab.flags[0]) != cudaSuccess ||
        pa.hostPointer != (void *)rp->tab.flags[0]) {
        cudaGetLastError();
        cudaFree(drtt);
        return xs_seterr(XS_EUNSUPPORTED, "visibility: the host window's device address is not "
                         "its host address (no unified addressing)");
    }
    volatile uint64_t *up = (volatile uint64_t *)rp->tab.flags[0];
    volatile uint64_t *back = up + 1;
    up[0] = 0;
    back[0] = 0;
    unsigned int seed = 0x7157u;
    visibility_kernel<<<1, XS_PRODUCER_THREADS, 0, rp->stream>>>(
        rp->tab.data[0], bytes / 16, rp->tab.flags[0], rp->tab.flags[0] + 1, reps, seed, drtt,
        (unsigned long long)(rp->o.timeout_s * 1e9), rp->dstat);
    cudaError_t e = cudaGetLastError();
    xs_status st = XS_OK;
    uint64_t bad = 0;
    if (e == cudaSuccess)
        e = cudaEventRecord(rp->ev1, rp->stream);
    if (e != cudaSuccess) {
        st = xs_seterr(XS_ECUDA, "visibility_kernel: %s", cudaGetErrorString(e));
        goto out;
    }
    for (int i = 0; i < reps; i++) {
        double t0 = xs_now_s();
        while (__atomic_load_n((uint64_t *)up, __ATOMIC_ACQUIRE) < (uint64_t)i + 1) {
            if (xs_now_s() - t0 > rp->o.timeout_s) {
                st = xs_seterr(XS_ETIMEOUT, "visibility: flag %d never arrived within %.0f s",
                               i + 1, rp->o.timeout_s);
                break;
            }
        }
        if (st != XS_OK)
            break;
        /* the flag was acquired: the payload must be complete */
        bad += xs_pattern_check((const uint32_t *)rp->tab.data[0], bytes / 16, seed + (unsigned)i,
                                0);
        __atomic_store_n((uint64_t *)back, (uint64_t)i + 1, __ATOMIC_RELEASE);
    }
    if (st != XS_OK) {
        /* release the kernel so that it ends (its own wait is bounded as well) */
        __atomic_store_n((uint64_t *)back, (uint64_t)reps + 1, __ATOMIC_RELEASE);
    }
    {
        xs_status s2 = xs_event_wait(rp->ev1, rp->o.timeout_s + 5, "visibility kernel");
        if (st == XS_OK)
            st = s2;
    }
    if (st == XS_OK)
        st = check_devstatus(rp, "visibility kernel");
    if (st == XS_OK && bad)
        st = xs_seterr(XS_EVERIFY, "visibility: %llu 16-byte units wrong after the flag",
                       (unsigned long long)bad);
    if (st == XS_OK) {
        unsigned long long *h = (unsigned long long *)malloc((size_t)reps * sizeof *h);
        double *d = (double *)malloc((size_t)reps * sizeof *d);
        if (!h || !d || cudaMemcpy(h, drtt, (size_t)reps * sizeof *h, cudaMemcpyDeviceToHost) !=
                            cudaSuccess) {
            st = xs_seterr(XS_ECUDA, "visibility: cannot read the round trips");
        } else {
            for (int i = 0; i < reps; i++)
                d[i] = (double)h[i];
            *rtt_med_ns = xs_median(d, (size_t)reps);
            *rtt_p90_ns = xs_quantile(d, (size_t)reps, 0.9);
        }
        free(h);
        free(d);
    }
out:
    cudaFree(drtt);
    return st;
}
