// SPDX-License-Identifier: Apache-2.0
/*
 * replay_probe.cu - the replayer's probes (include/xstage_replay.h): the plain store rate and the
 * drain under load, work under stores, the visibility round trip, and the SM groups; each kernel
 * next to the host code that launches it. The replayer itself is in replay.cu.
 */
#include "nvtx_launch.h"
#include "replay_impl.h"


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
 * whose stores are held back waits behind them (on the H200 a poll of a "stores done" counter
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
     * race with the slower threads still reading the previous repetition's value (a racecheck
     * report); it only ever goes from 0 to 1, and 1 ends the kernel. */
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

cudaError_t xs_replay_probe_setup(size_t smem)
{
    return cudaFuncSetAttribute(work_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)smem);
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
            XS_NVTX_LAUNCH(
                "store_bw_kernel",
                store_bw_kernel<<<4 * rp->gpu.sm_count, 256, 0, rp->stream>>>(
                    rp->tab.data[dst], bytes / 16, seed ^ xs_replay_src_salt(rp, rp->me)));
        else
            XS_NVTX_LAUNCH("store_load_kernel",
                           store_load_kernel<<<rp->gpu.sm_count, 256, 0, rp->stream>>>(
                               rp->tab.data[dst], bytes / 16, seed ^ xs_replay_src_salt(rp, rp->me),
                               buf, buf_bytes / 16, load,
                               (unsigned long long)(rp->o.timeout_s * 1e9), rp->dstat));
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
                st = xs_replay_devstatus(rp, "drain-under-load kernel");
        }
        if (st != XS_OK)
            break;
        float ms = 0;
        cudaEventElapsedTime(&ms, rp->ev0, rp->ev1);
        uint64_t bad = 0;
        if (rp->multi && (st = xs_win_barrier(rp->win, bar_ms)) != XS_OK)
            break;
        st = xs_win_verify(rp->win, rp->multi ? rp->me : 0, vbase, bytes / 16,
                           seed ^ xs_replay_src_salt(rp, from), 0, &bad);
        if (st == XS_OK && bad)
            st = xs_seterr(XS_EVERIFY, "%s: %llu of %zu 16-byte units wrong", what,
                           (unsigned long long)bad, bytes / 16);
        if (i >= 0)
            g[i] = (double)bytes / (ms * 1e6); /* warm-up run (i = -1) not kept */
    }
    if (rp->multi && (st == XS_OK || st == XS_EVERIFY)) {
        double none = 0; /* every rank learns whether any rank's last check failed */
        st = xs_replay_agree_after_check(rp, st, &none, what);
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
        cudaError_t le;
        XS_NVTX_LAUNCH("sm_group_kernel", le = cudaLaunchKernelEx(&cfg, sm_group_kernel, d));
        if (le != cudaSuccess ||
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
        XS_NVTX_LAUNCH("work_probe_kernel", work_probe_kernel<<<sms, 256, rp->smem, rp->stream>>>(
                                                rp->tab.data[0], a, buf, dev, dev + 1, rp->dstat));
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) {
            st = xs_seterr(XS_ECUDA, "work_probe_kernel: %s", cudaGetErrorString(e));
            break;
        }
        cudaEventRecord(rp->ev1, rp->stream);
        st = xs_event_wait(rp->ev1, rp->o.timeout_s + 5, "probe kernel");
        if (st == XS_OK)
            st = xs_replay_devstatus(rp, "probe kernel");
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
    XS_NVTX_LAUNCH("visibility_kernel",
                   visibility_kernel<<<1, XS_PRODUCER_THREADS, 0, rp->stream>>>(
                       rp->tab.data[0], bytes / 16, rp->tab.flags[0], rp->tab.flags[0] + 1, reps,
                       seed, drtt, (unsigned long long)(rp->o.timeout_s * 1e9), rp->dstat));
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
        st = xs_replay_devstatus(rp, "visibility kernel");
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

