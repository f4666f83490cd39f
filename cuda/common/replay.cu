// SPDX-License-Identifier: Apache-2.0
/*
 * replay.cu - run a burst-gap schedule on the GPU and measure it (include/xstage_replay.h).
 *
 * One kernel serves replay, calibration and validation: every microbenchmark is a schedule.
 * Producer p = CTA p (128 threads, one per SM). Destination of producer p: rank p % N of the
 * window table, slot p / N of the row's region there, so the same kernel runs against one host
 * window, local HBM, N virtual peers or NCCL peers. Timing: each SM reads clock64 around its
 * issue; a tick-edge anchor at start and end places those cycles on the %globaltimer time base,
 * so windows of different SMs are comparable to within one timer read. The probes (store rate,
 * drain under load, work under stores, visibility, SM groups) are in replay_probe.cu.
 */
#include "nvtx_launch.h"
#include "replay_impl.h"



__global__ void __launch_bounds__(XS_PRODUCER_THREADS, 1)
    replay_kernel(xs_wintab tab, const xs_drow *rows, int nrows, xs_stamp *stamps,
                  xs_anchor *anchors, int sync, unsigned long long *scratch,
                  unsigned long long lead_ns, unsigned long long timeout_ns, xs_devstatus *st,
                  int dbase, int ndest, unsigned int salt, unsigned long long xepoch,
                  const int *sm_map, int grid, const xs_dprog *prog)
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
    /* with per-producer programs, this producer's own bytes and work, loaded ahead alike */
    xs_dprog cell = {0, 0};
    if (prog && p < grid)
        cell = prog[p];
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
    /* xs_pm_dest and xs_pm_slot of xstage_peermap.h, written out: the kernel as run on the GPU,
     * byte for byte; tests/test_peermap.c checks the map and its inverse */
    const int d = (dbase + p % ndest) % n;
    const unsigned long long slot = (unsigned long long)(p / ndest);
    for (int r = 0; r < nrows; r++) {
        const unsigned long long n16 = prog ? cell.n16 : row.n16;
        if (p < row.k && n16) {
            __syncthreads();
            unsigned long long cs = xs_clock();
            unsigned long long first = row.off16 + slot * row.stride16;
            xs_burst_pattern(tab.data[d] + 16 * first, n16,
                             row.seed ^ (d * 0x85ebca6bu) ^ salt, first);
            __syncthreads();
            if (threadIdx.x == 0) {
                xs_stamp s = {cs, xs_clock()};
                stamps[(size_t)r * grid + p] = s;
            }
        }
        const xs_drow next = rows[r + 1 < nrows ? r + 1 : r];
        const unsigned long long gap_cyc = prog ? cell.gap_cyc : row.gap_cyc;
        if (prog)
            cell = prog[(size_t)(r + 1 < nrows ? r + 1 : r) * grid + p];
        if (gap_cyc)
            xs_spin_cycles(gap_cyc);
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



xs_status xs_replay_devstatus(xs_replayer *rp, const char *what)
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

/* The replayer's device state: kernel attributes, the status and scratch buffers, the stream
 * and events, and the SM clock (cycles per ns). The caller closes rp on failure. */
static xs_status open_device(xs_replayer *rp)
{
    XS_CU(cudaFuncSetAttribute(replay_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)rp->smem));
    XS_CU(xs_replay_probe_setup(rp->smem));
    XS_CU(cudaHostAlloc((void **)&rp->dstat, sizeof(xs_devstatus), cudaHostAllocMapped));
    memset(rp->dstat, 0, sizeof *rp->dstat);
    XS_CU(cudaMalloc((void **)&rp->dscratch, 4 * sizeof(unsigned long long)));
    XS_CU(cudaMalloc((void **)&rp->danchors, (size_t)rp->gpu.sm_count * sizeof(xs_anchor)));
    if (!(rp->last_smid = (int *)calloc((size_t)rp->gpu.sm_count, sizeof(int))))
        return xs_seterr(XS_ENOMEM, "out of host memory");
    XS_CU(cudaStreamCreateWithFlags(&rp->stream, cudaStreamNonBlocking));
    XS_CU(cudaEventCreate(&rp->ev0));
    XS_CU(cudaEventCreate(&rp->ev1));
    /* SM clock, for converting gaps to cycles */
    unsigned long long *dprobe, hprobe[2];
    XS_CU(cudaMalloc((void **)&dprobe, sizeof hprobe));
    XS_NVTX_LAUNCH("clock_probe_kernel", clock_probe_kernel<<<1, 1, 0, rp->stream>>>(dprobe));
    XS_CU(cudaGetLastError());
    XS_CU(cudaMemcpyAsync(hprobe, dprobe, sizeof hprobe, cudaMemcpyDeviceToHost, rp->stream));
    XS_CU(cudaStreamSynchronize(rp->stream));
    cudaFree(dprobe);
    rp->ghz = hprobe[0] ? (double)hprobe[1] / (double)hprobe[0] : 0;
    if (!(rp->ghz > 0.1 && rp->ghz < 10))
        return xs_seterr(XS_ECUDA, "SM clock probe gave %.3f GHz; %%globaltimer not usable",
                         rp->ghz);
    return XS_OK;
}

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
    st = open_device(rp);
    if (st != XS_OK) {
        xs_replayer_close(rp);
        return st;
    }
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
    cudaFree(rp->dprog);
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

/* Bytes of producer p in row r: its program's (pg), or the row's. */
static int64_t cell_bytes(const xs_schedule *s, const xs_programs *pg, int r, int p)
{
    return pg ? pg->bytes[(size_t)r * pg->producers + p] : s->rows[r].bytes_per_producer;
}

/* The largest burst of row r (the stride of its producers' regions). */
static int64_t row_bytes_max(const xs_schedule *s, const xs_programs *pg, int r)
{
    if (!pg)
        return s->rows[r].bytes_per_producer;
    int64_t m = 0;
    for (int p = 0; p < s->rows[r].producers; p++)
        if (cell_bytes(s, pg, r, p) > m)
            m = cell_bytes(s, pg, r, p);
    return m;
}

/* 16-byte units each destination window needs for the schedule. */
static unsigned long long window_need16(const xs_schedule *s, const xs_programs *pg,
                                        const xs_peermap *pm)
{
    unsigned long long need = 0;
    for (int r = 0; r < s->nrows; r++) {
        unsigned long long slots = (unsigned long long)xs_pm_slots_max(pm, s->rows[r].producers);
        need += slots * slot16(row_bytes_max(s, pg, r));
    }
    return need;
}

static xs_status check_programs(const xs_replayer *rp, const xs_schedule *s,
                                const xs_programs *pg);

xs_status xs_replay_check(const xs_replayer *rp, const xs_schedule *s)
{
    return check_programs(rp, s, NULL);
}

static xs_status check_programs(const xs_replayer *rp, const xs_schedule *s,
                                const xs_programs *pg)
{
    int kmax = xs_schedule_max_producers(s);
    if (kmax > rp->gpu.sm_count)
        return xs_seterr(XS_ERANGE, "the schedule needs %d producers; %s has %d SMs (one producer "
                         "per SM)", kmax, rp->gpu.name, rp->gpu.sm_count);
    if (rp->nsms && kmax > rp->nsms)
        return xs_seterr(XS_ERANGE, "the schedule needs %d producers; %d SMs were chosen for them",
                         kmax, rp->nsms);
    if (pg && rp->multi)
        return xs_seterr(XS_EINVAL, "per-producer programs replay on one process only, not on "
                         "%d peer ranks", rp->n);
    if (pg && (pg->producers < kmax || !pg->bytes || !pg->gap_ns))
        return xs_seterr(XS_EINVAL, "programs of %d producers for a schedule of %d",
                         pg ? pg->producers : 0, kmax);
    for (int r = 0; r < s->nrows; r++)
        if (s->rows[r].bytes_per_producer % 16)
            return xs_seterr(XS_EINVAL, "row %d: bytes_per_producer %lld is not a multiple of 16 "
                             "(producers store 16-byte units)", r,
                             (long long)s->rows[r].bytes_per_producer);
    for (int r = 0; pg && r < s->nrows; r++)
        for (int p = 0; p < s->rows[r].producers; p++) {
            const int64_t b = cell_bytes(s, pg, r, p);
            const double g = pg->gap_ns[(size_t)r * pg->producers + p];
            if (b % 16 || b < 0 || !(g >= 0) || g > XS_MAX_GAP_NS)
                return xs_seterr(XS_EINVAL, "row %d, producer %d: %lld bytes, gap %g ns (bytes "
                                 "a multiple of 16: producers store 16-byte units)", r, p,
                                 (long long)b, g);
        }
    unsigned long long need = 16 * window_need16(s, pg, &rp->pm);
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
unsigned int xs_replay_src_salt(const xs_replayer *rp, int src)
{
    return rp->multi ? (unsigned)(src + 1) * 0x27d4eb2fu : 0u;
}

/* Verify every row's regions at every destination this process owns, destination-side: every
 * producer's bytes (the padding to whole lines between them is never written and not checked).
 * One process: every window. N > 1 peer ranks: this rank's own window, every other source's
 * region of it (the sources' stores are complete: the caller passed a barrier). */
static xs_status verify_all(xs_replayer *rp, const xs_schedule *s, const xs_programs *pg,
                            const unsigned int *seeds, const unsigned long long *off16,
                            uint64_t *bad_total)
{
    const int n = rp->n;
    *bad_total = 0;
    for (int r = 0; r < s->nrows; r++) {
        const int k = s->rows[r].producers;
        unsigned long long n16 = (unsigned long long)(row_bytes_max(s, pg, r) / 16);
        unsigned long long st16 = slot16(row_bytes_max(s, pg, r));
        for (int i = 0; i < n; i++) {
            /* (destination d, source src): the producers p = j, j + D, ... of src land here */
            const int d = rp->multi ? rp->me : i, src = rp->multi ? i : rp->me;
            const int j = xs_pm_first(&rp->pm, src, d);
            unsigned long long slots = (unsigned long long)xs_pm_slots(&rp->pm, k, j);
            if (slots == 0)
                continue; /* no producer of src stores here (or src is this window's rank) */
            unsigned int seed =
                seeds[r] ^ ((unsigned)d * 0x85ebca6bu) ^ xs_replay_src_salt(rp, src);
            unsigned long long base = rp->multi ? (unsigned long long)src * rp->region16 : 0;
            uint64_t bad = 0;
            if (st16 == n16 && !pg) {
                XS_TRY(xs_win_verify(rp->win, d, base + off16[r], slots * n16, seed, off16[r],
                                     &bad));
                *bad_total += bad;
                XS_TRY(xs_win_host_state(rp->win, d, base + off16[r], slots * n16, rp->o.dest));
                continue;
            }
            for (unsigned long long q = 0; q < slots; q++) {
                unsigned long long first = off16[r] + q * st16;
                /* programs (one process): slot q of window d holds producer j + q D */
                const unsigned long long m16 =
                    pg ? (unsigned long long)(cell_bytes(s, pg, r, j + (int)q * rp->pm.ndest) / 16)
                       : n16;
                if (m16 == 0)
                    continue;
                XS_TRY(xs_win_verify(rp->win, d, base + first, m16, seed, first, &bad));
                *bad_total += bad;
                XS_TRY(xs_win_host_state(rp->win, d, base + first, m16, rp->o.dest));
            }
        }
    }
    return XS_OK;
}

static xs_status replay_once(xs_replayer *rp, const xs_schedule *s, const xs_programs *pg,
                             int sync, uint32_t seed, xs_result *res, xs_replay_stats *stats)
{
    memset(res, 0, sizeof *res);
    memset(stats, 0, sizeof *stats);
    XS_TRY(check_programs(rp, s, pg));
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
    xs_dprog *hp = pg ? (xs_dprog *)calloc(nst, sizeof *hp) : NULL;
    xs_status st = XS_OK;
    if (!h || !seeds || !off16 || !hs || !ha || (pg && !hp)) {
        st = xs_seterr(XS_ENOMEM, "out of host memory for %d rows", s->nrows);
        goto out;
    }
    {
        /* rotate destination offsets: this run starts where the last one's footprint ended */
        const unsigned long long need16 = window_need16(s, pg, &rp->pm);
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
            h[r].n16 = (unsigned long long)(row_bytes_max(s, pg, r) / 16);
            h[r].stride16 = slot16(row_bytes_max(s, pg, r));
            for (int p = 0; pg && p < grid; p++) {
                const size_t at = (size_t)r * pg->producers + p;
                hp[(size_t)r * grid + p].n16 =
                    p < rw->producers ? (unsigned long long)(pg->bytes[at] / 16) : 0;
                hp[(size_t)r * grid + p].gap_cyc =
                    (unsigned long long)llround(pg->gap_ns[at] * rp->ghz);
            }
            h[r].gap_cyc = (unsigned long long)llround(rw->gap_ns * rp->ghz);
            h[r].off16 = off;
            h[r].seed = xs_mix32(seed * 0x9e3779b9u + (unsigned)r) | 1u;
            seeds[r] = h[r].seed;
            off16[r] = off;
            off += (unsigned long long)xs_pm_slots_max(&rp->pm, rw->producers) * h[r].stride16;
        }
    }
    if ((size_t)s->nrows > rp->drows_cap) {
        cudaFree(rp->drows);
        rp->drows = NULL;
        XS_CU_GOTO(st, out, cudaMalloc((void **)&rp->drows, (size_t)s->nrows * sizeof(xs_drow)));
        rp->drows_cap = (size_t)s->nrows;
    }
    if (nst > rp->dstamps_cap) {
        cudaFree(rp->dstamps);
        rp->dstamps = NULL;
        XS_CU_GOTO(st, out, cudaMalloc((void **)&rp->dstamps, nst * sizeof(xs_stamp)));
        rp->dstamps_cap = nst;
    }
    if (pg && nst > rp->dprog_cap) {
        cudaFree(rp->dprog);
        rp->dprog = NULL;
        XS_CU_GOTO(st, out, cudaMalloc((void **)&rp->dprog, nst * sizeof(xs_dprog)));
        rp->dprog_cap = nst;
    }
    if (pg)
        XS_CU_GOTO(st, out, cudaMemcpyAsync(rp->dprog, hp, nst * sizeof *hp,
                                            cudaMemcpyHostToDevice, rp->stream));
    XS_CU_GOTO(st, out, cudaMemcpyAsync(rp->drows, h, (size_t)s->nrows * sizeof *h,
                                        cudaMemcpyHostToDevice, rp->stream));
    XS_CU_GOTO(st, out,
               cudaMemsetAsync(rp->dscratch, 0, 4 * sizeof(unsigned long long), rp->stream));
    XS_CU_GOTO(st, out, cudaMemsetAsync(rp->dstamps, 0, nst * sizeof(xs_stamp), rp->stream));
    XS_CU_GOTO(st, out,
               cudaMemsetAsync(rp->danchors, 0, (size_t)grid * sizeof(xs_anchor), rp->stream));
    XS_CU_GOTO(st, out, cudaEventRecord(rp->ev0, rp->stream));
    XS_NVTX_LAUNCH("replay_kernel",
                   replay_kernel<<<rp->nsms ? rp->gpu.sm_count : grid, XS_PRODUCER_THREADS,
                                   rp->smem, rp->stream>>>(
                       rp->tab, rp->drows, s->nrows, rp->dstamps, rp->danchors, sync, rp->dscratch,
                       10000ull /* common start 10 us after the first producer arrives */,
                       (unsigned long long)(rp->o.timeout_s * 1e9), rp->dstat, rp->pm.dbase,
                       rp->pm.ndest, xs_replay_src_salt(rp, rp->me), xepoch,
                       rp->nsms ? rp->dsm_map : NULL, grid, pg ? rp->dprog : NULL));
    XS_CU_GOTO(st, out, cudaGetLastError());
    XS_CU_GOTO(st, out, cudaEventRecord(rp->ev1, rp->stream));
    st = xs_event_wait(rp->ev1, rp->o.timeout_s + 5, "replay kernel");
    if (st != XS_OK)
        goto out;
    st = xs_replay_devstatus(rp, "replay kernel");
    if (st != XS_OK)
        goto out;
    {
        float ms = 0;
        XS_CU_GOTO(st, out, cudaEventElapsedTime(&ms, rp->ev0, rp->ev1));
        stats->kernel_ms = ms;
    }
    XS_CU_GOTO(st, out, cudaMemcpy(hs, rp->dstamps, nst * sizeof *hs, cudaMemcpyDeviceToHost));
    XS_CU_GOTO(st, out,
               cudaMemcpy(ha, rp->danchors, (size_t)grid * sizeof *ha, cudaMemcpyDeviceToHost));
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
                if (pg && cell_bytes(s, pg, r, p) == 0)
                    continue; /* no store: no window (NaN) */
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
    if (pg) {
        double b = 0;
        for (int r = 0; r < s->nrows; r++)
            for (int p = 0; p < s->rows[r].producers; p++)
                b += (double)cell_bytes(s, pg, r, p);
        stats->bytes = b;
    } else {
        stats->bytes = xs_schedule_bytes(s);
    }
    /* N > 1 peer ranks: every source's stores are in this window before it is read */
    if (rp->multi && (st = xs_win_barrier(rp->win, (int)(rp->o.timeout_s * 1000) + 5000)) != XS_OK)
        goto out;
    st = verify_all(rp, s, pg, seeds, off16, &stats->bad16);
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
    free(hp);
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
    XS_NVTX_LAUNCH("agree_put_kernel", agree_put_kernel<<<1, 64, 0, rp->stream>>>(rp->own, mine));
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
xs_status xs_replay_agree_after_check(xs_replayer *rp, xs_status st, double *v, const char *what)
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
 * before the first run (xs_replay_opts.cold_window = 0). With rotating offsets the runs
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
    xs_status st = replay_once(rp, &s, NULL, 0, 0x5eed5u, &res, &stats);
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
    return xs_replay_run_programs(rp, s, NULL, sync, seed, res, stats);
}

xs_status xs_replay_run_programs(xs_replayer *rp, const xs_schedule *s, const xs_programs *pg,
                                 int sync, uint32_t seed, xs_result *res, xs_replay_stats *stats)
{
    int again = 0;
    for (int attempt = 0;; attempt++) {
        xs_status st = replay_once(rp, s, pg, sync, seed + 0x51ed27u * (uint32_t)attempt, res,
                                   stats);
        stats->restarts = again;
        double skew = stats->start_skew_ns;
        if (rp->multi && (st == XS_OK || st == XS_EVERIFY)) {
            /* after every run: all ranks pass or fail it together, and the largest start skew
             * decides (all rerun or none) */
            xs_status a = xs_replay_agree_after_check(rp, st, &skew, "replay kernel");
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
