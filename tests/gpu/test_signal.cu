// SPDX-License-Identifier: Apache-2.0
/*
 * test_signal.cu - the signal primitive and its bounds on one GPU.
 *
 *   - payload then flag (xs_signal_cta, release at system scope) from one CTA, acquired by another
 *     CTA (xs_wait_geq) that then checks every byte: into HBM and into pinned host memory;
 *   - the same towards the CPU: the host polls the flag with an acquire load while the kernel runs,
 *     then checks the payload;
 *   - a signal that never comes: xs_win_wait_flag returns XS_ETIMEOUT with one line within its
 *     bound (measured), on HBM, host and virtual-peer windows; an exchange whose sources never
 *     send times out naming the window and the source (virtual and one-rank NCCL peers);
 *   - the window stays usable after a timeout (a later exchange verifies clean).
 * The last line is "N passed, N failed".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../xt.h"
#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_device.cuh"
#include "xstage_exchange.h"
#include "xstage_pattern.h"
#include "xstage_win.h"

static int one_line(const char *s) { return s && *s && !strchr(s, '\n'); }

/* CTA 1 stores n16 units and signals; CTA 0 waits for the flag, then all its threads check the
 * payload (ld.global.cv) and count mismatches. out[0] = bad units, out[1] = 1 on timeout. */
__global__ void __launch_bounds__(XS_PRODUCER_THREADS)
    pair_kernel(char *dst, uint64_t *flag, uint64_t n16, uint32_t seed, uint64_t value,
                uint64_t timeout_ns, unsigned long long *out)
{
    if (blockIdx.x == 1) {
        xs_burst_pattern(dst, n16, seed, 0);
        xs_signal_cta(flag, value);
        return;
    }
    __shared__ int timed_out;
    if (threadIdx.x == 0)
        timed_out = xs_wait_geq(flag, value, timeout_ns) != XS_WAIT_OK;
    __syncthreads(); /* the acquire by thread 0 is ordered before every thread's loads */
    if (timed_out) {
        if (threadIdx.x == 0)
            out[1] = 1;
        return;
    }
    const uint32_t b0 = xs_pattern_base(seed, 0), b1 = xs_pattern_base(seed, 1);
    const uint32_t b2 = xs_pattern_base(seed, 2), b3 = xs_pattern_base(seed, 3);
    unsigned long long bad = 0;
    for (uint64_t i = threadIdx.x; i < n16; i += blockDim.x) {
        uint4 v = __ldcv((const uint4 *)dst + i);
        uint32_t lin = (uint32_t)i * XS_PATTERN_STEP;
        bad += (v.x != b0 + lin) | (v.y != b1 + lin) | (v.z != b2 + lin) | (v.w != b3 + lin);
    }
    if (bad)
        atomicAdd(&out[0], bad);
}

/* One CTA stores and signals a flag in host memory, after spinning a while so that the CPU is
 * already polling when the flag arrives. */
__global__ void __launch_bounds__(XS_PRODUCER_THREADS)
    to_host_kernel(char *dst, uint64_t *flag, uint64_t n16, uint32_t seed, uint64_t value)
{
    xs_spin_cycles(2000000); /* about 1 ms */
    xs_burst_pattern(dst, n16, seed, 0);
    xs_signal_cta(flag, value);
}

static xs_winset *open_win(xs_target t, size_t bytes, int nflags, int vpeers)
{
    xs_win_opts o;
    memset(&o, 0, sizeof o);
    o.target = t;
    o.bytes = bytes;
    o.nflags = nflags;
    o.virtual_peers = vpeers;
    o.device = 0;
    xs_winset *w = NULL;
    if (xs_win_open(&o, &w) != XS_OK) {
        XT_CHECK(0, "open %s: %s", xs_target_name(t), xs_errmsg());
        return NULL;
    }
    return w;
}

static void test_pair(xs_target t, int vpeers, int dest)
{
    const size_t bytes = (size_t)8 << 20;
    xs_winset *w = open_win(t, bytes, 4, vpeers);
    if (!w)
        return;
    const xs_wintab *tab = xs_win_table(w);
    XT_CHECK(xs_win_reset(w, 0xC3) == XS_OK, "reset: %s", xs_errmsg());
    unsigned long long *dout, hout[2] = {9, 9};
    cudaMalloc(&dout, sizeof hout);
    for (uint64_t v = 1; v <= 3; v++) {
        cudaMemset(dout, 0, sizeof hout);
        pair_kernel<<<2, XS_PRODUCER_THREADS>>>(tab->data[dest], tab->flags[dest] + 1, bytes / 16,
                                                 (uint32_t)(40 + v), v, 2000000000ull, dout);
        cudaError_t e = cudaDeviceSynchronize();
        cudaMemcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost);
        XT_CHECK(e == cudaSuccess && hout[0] == 0 && hout[1] == 0,
                 "%s window %d round %llu: %s, %llu bad, timeout %llu", xs_target_name(t), dest,
                 (unsigned long long)v, cudaGetErrorString(e), hout[0], hout[1]);
    }
    /* the destination-side check agrees */
    uint64_t bad = 1;
    XT_CHECK(xs_win_verify(w, dest, 0, bytes / 16, 43, 0, &bad) == XS_OK && bad == 0,
             "%s verify after signal: %llu", xs_target_name(t), (unsigned long long)bad);
    printf("ok signal CTA->CTA into %s window %d (%s memory), 3 rounds x %zu MiB checked\n",
           xs_target_name(t), dest, tab->host_mem[dest] ? "pinned host" : "device", bytes >> 20);
    cudaFree(dout);
    xs_win_close(w);
}

static void test_to_host(void)
{
    const size_t bytes = (size_t)4 << 20;
    xs_winset *w = open_win(XS_TARGET_HOST, bytes, 2, 1);
    if (!w)
        return;
    const xs_wintab *tab = xs_win_table(w);
    xs_win_reset(w, 0x11);
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    /* host addresses of the payload and the flag: the window base's host pointer, plus the
     * flag's offset in the same allocation */
    cudaPointerAttributes pa;
    memset(&pa, 0, sizeof pa);
    cudaPointerGetAttributes(&pa, tab->data[0]);
    const char *hdata = (const char *)pa.hostPointer;
    uint64_t *hflag =
        hdata ? (uint64_t *)(hdata + ((const char *)tab->flags[0] - tab->data[0])) : NULL;
    XT_CHECK(hflag && hdata, "host pointers");
    if (!hflag || !hdata) {
        xs_win_close(w);
        return;
    }
    to_host_kernel<<<1, XS_PRODUCER_THREADS, 0, st>>>(tab->data[0], tab->flags[0], bytes / 16, 77,
                                                      5);
    double t0 = xs_now_s();
    int seen = 0;
    while (xs_now_s() - t0 < 5) {
        if (__atomic_load_n(hflag, __ATOMIC_ACQUIRE) >= 5) {
            seen = 1;
            break;
        }
    }
    /* check before synchronising with the stream: the flag alone must order the payload */
    uint64_t bad = seen ? xs_pattern_check((const uint32_t *)hdata, bytes / 16, 77, 0) : 0;
    cudaError_t e = cudaStreamSynchronize(st);
    XT_CHECK(seen && e == cudaSuccess, "host saw the flag: %d (%s)", seen, cudaGetErrorString(e));
    XT_CHECK(bad == 0, "payload seen by the CPU after the flag: %llu bad units",
             (unsigned long long)bad);
    if (seen && !bad)
        printf("ok signal GPU->CPU: flag acquired while the kernel ran, %zu MiB checked\n",
               bytes >> 20);
    cudaStreamDestroy(st);
    xs_win_close(w);
}

/* A signal that never comes: XS_ETIMEOUT, one line, within bound + slack. */
static void test_missed(xs_target t, int vpeers, int rank)
{
    xs_winset *w = open_win(t, 1 << 20, 4, vpeers);
    if (!w)
        return;
    const uint64_t bound_ns = 200000000ull;
    double t0 = xs_now_s();
    xs_status s = xs_win_wait_flag(w, rank, 2, 1, bound_ns);
    double dt = xs_now_s() - t0;
    XT_CHECK(s == XS_ETIMEOUT && one_line(xs_errmsg()) && strstr(xs_errmsg(), "flag 2") &&
                 strstr(xs_errmsg(), "200 ms"),
             "%s missed signal: %s", xs_target_name(t), xs_errmsg());
    XT_CHECK(dt >= 0.2 && dt < 0.2 + 1.0, "%s missed signal returned after %.3f s (bound 0.2 s)",
             xs_target_name(t), dt);
    printf("ok missed signal on %s window %d after %.3f s: %s\n", xs_target_name(t), rank, dt,
           xs_errmsg());
    /* a flag that is already there returns at once */
    uint64_t one = 1;
    cudaMemcpy(xs_win_table(w)->flags[rank] + 2, &one, sizeof one, cudaMemcpyDefault);
    t0 = xs_now_s();
    s = xs_win_wait_flag(w, rank, 2, 1, bound_ns);
    dt = xs_now_s() - t0;
    XT_CHECK(s == XS_OK && dt < 0.1, "%s present flag: %s (%.3f s)", xs_target_name(t),
             xs_errmsg(), dt);
    XT_CHECK(xs_win_wait_flag(w, rank, 4, 1, bound_ns) == XS_EINVAL, "flag out of range");
    xs_win_close(w);
}

/* Sources that never send: the exchange times out naming window and source; then a normal
 * exchange on the same windows verifies clean (bigger epoch). */
static void test_exchange_timeout(xs_target t, int vpeers)
{
    const size_t bpp = 64 << 10;
    const int n = t == XS_TARGET_VIRTUAL ? vpeers : 1;
    xs_winset *w = open_win(t, bpp * n, n, vpeers);
    if (!w)
        return;
    xs_exchange_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.bytes_per_pair = bpp;
    eo.seed = 5;
    eo.epoch = 1;
    eo.timeout_ns = 300000000ull;
    eo.skip_send = 1;
    xs_exchange_result r;
    double t0 = xs_now_s();
    xs_status s = xs_exchange(w, &eo, &r);
    double dt = xs_now_s() - t0;
    XT_CHECK(s == XS_ETIMEOUT && one_line(xs_errmsg()) && strstr(xs_errmsg(), "source") &&
                 strstr(xs_errmsg(), "300 ms"),
             "%s exchange without sends: %s", xs_target_name(t), xs_errmsg());
    XT_CHECK(dt < 0.3 + 1.5, "%s timed out after %.3f s (bound 0.3 s)", xs_target_name(t), dt);
    printf("ok exchange without sends on %s (%d ranks) after %.3f s: %s\n", xs_target_name(t), n,
           dt, xs_errmsg());
    eo.skip_send = 0;
    eo.epoch = 2;
    eo.timeout_ns = 5000000000ull;
    s = xs_exchange(w, &eo, &r);
    XT_CHECK(s == XS_OK && r.bad16 == 0, "%s exchange after the timeout: %s", xs_target_name(t),
             xs_errmsg());
    xs_win_close(w);
}

int main(void)
{
    xs_gpu_info gi;
    xs_status s = xs_gpu_open(0, &gi);
    XT_CHECK(s == XS_OK, "GPU: %s", xs_errmsg());
    if (s != XS_OK) {
        printf("xstage: error: %s\n", xs_errmsg());
        return xt_done();
    }
    test_pair(XS_TARGET_LOCAL, 1, 0);
    test_pair(XS_TARGET_VIRTUAL, 4, 2); /* window in pinned host memory */
    test_to_host();
    test_missed(XS_TARGET_LOCAL, 1, 0);
    test_missed(XS_TARGET_HOST, 1, 0);
    test_missed(XS_TARGET_VIRTUAL, 8, 7);
    test_exchange_timeout(XS_TARGET_VIRTUAL, 8);
    test_exchange_timeout(XS_TARGET_PEER, 1);
    return xt_done();
}
