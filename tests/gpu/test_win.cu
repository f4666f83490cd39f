// SPDX-License-Identifier: Apache-2.0
/*
 * test_win.cu - GPU plumbing and windows on one GPU: discovery and report header, NCCL loading
 * and its version check (error paths included), the four window targets (table, reset, verify
 * catching poison and a flipped byte), the all-pairs exchange on 8 virtual peers and on a
 * one-rank NCCL communicator with every byte verified, out-of-memory and bad-option errors,
 * cuBLAS against a CPU reference, and through the launcher: two ranks on one GPU must fail
 * cleanly (NCCL refuses a duplicate GPU) and, where 2+ GPUs exist, a real 2-rank exchange.
 *
 * Usage: test_win [--quick]. The last line is "N passed, N failed". This binary re-executes
 * itself as launcher ranks (XS_RANK set: child mode); XS_TEST_SKIP_LAUNCH=1 skips those runs
 * (under compute-sanitizer, which would follow NCCL into every child).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../xt.h"
#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_device.cuh"
#include "xstage_exchange.h"
#include "xstage_launch.h"
#include "xstage_pattern.h"
#include "xstage_win.h"

static int one_line(const char *s) { return s && *s && !strchr(s, '\n'); }

/* Fill [dst, dst + 16 n16) with the pattern, split over the grid. */
__global__ void fill_kernel(char *dst, uint64_t n16, uint32_t seed, uint64_t first16)
{
    uint64_t per = (n16 + gridDim.x - 1) / gridDim.x;
    uint64_t c0 = (uint64_t)blockIdx.x * per;
    if (c0 >= n16)
        return;
    uint64_t c1 = c0 + per < n16 ? c0 + per : n16;
    xs_burst_pattern(dst + 16 * c0, c1 - c0, seed, first16 + c0);
}

/* ---- discovery and report ------------------------------------------------------------------ */

static void test_gpu(xs_gpu_info *gi, int argc, char **argv)
{
    XT_CHECK(gi->sm_count > 0 && gi->name[0], "device %s, %d SMs", gi->name, gi->sm_count);
    XT_CHECK(gi->l2_bytes > 0 && gi->mem_bytes > 0 && gi->smem_optin > 0, "sizes");
    XT_CHECK(gi->driver_version >= 12000 && gi->runtime_version >= 12000, "versions %d %d",
             gi->driver_version, gi->runtime_version);
    xs_gpu_info bad;
    xs_status s = xs_gpu_open(999, &bad);
    XT_CHECK(s == XS_ECUDA && strstr(xs_errmsg(), "GPU 999 does not exist") &&
                 one_line(xs_errmsg()),
             "bad ordinal: %s", xs_errmsg());
    XT_CHECK(xs_gpu_open(gi->device, gi) == XS_OK, "reopen: %s", xs_errmsg());

    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    xs_gpu_report_header(m, gi, argc, argv);
    fclose(m);
    int lines = 0, hashed = 1;
    for (char *p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
        lines++;
        hashed &= *p == '#';
    }
    XT_CHECK(lines >= 4 && hashed && strstr(buf, "SMs") && strstr(buf, "# command: "),
             "header:\n%s", buf);
    printf("%s", buf);
    free(buf);
    buf = NULL;
    m = open_memstream(&buf, &len);
    fputc('{', m);
    xs_gpu_json_fields(m, gi, argc, argv);
    fputc('}', m);
    fclose(m);
    XT_CHECK(strstr(buf, "\"sm_count\": ") && strstr(buf, "\"command\": \"") &&
                 buf[strlen(buf) - 2] != ',',
             "json: %s", buf);
    free(buf);
}

/* ---- NCCL loading -------------------------------------------------------------------------- */

static void test_nccl_version(void)
{
    const char *saved = getenv("XS_NCCL_LIB");
    char keep[1024] = "";
    if (saved)
        snprintf(keep, sizeof keep, "%s", saved);
    int v = -1;

    setenv("XS_NCCL_LIB", "/nonexistent/libnccl.so.2", 1);
    xs_status s = xs_nccl_version(&v);
    XT_CHECK(s == XS_ENCCL && strstr(xs_errmsg(), "/nonexistent/libnccl.so.2") &&
                 one_line(xs_errmsg()),
             "missing library: %s", xs_errmsg());
    printf("ok missing NCCL: %s\n", xs_errmsg());

    const char *sys = "/usr/lib/x86_64-linux-gnu/libnccl.so.2";
    if (access(sys, R_OK) == 0) {
        setenv("XS_NCCL_LIB", sys, 1);
        s = xs_nccl_version(&v);
        if (s == XS_ENCCL) {
            XT_CHECK(strstr(xs_errmsg(), "too old") && strstr(xs_errmsg(), "2.28.7") &&
                         strstr(xs_errmsg(), sys) && one_line(xs_errmsg()),
                     "old NCCL: %s", xs_errmsg());
            printf("ok old NCCL: %s\n", xs_errmsg());
        } else {
            printf("note: %s is NCCL %d (new enough): the too-old path was not exercised\n", sys,
                   v);
        }
    } else {
        printf("note: no %s: the too-old path was not exercised\n", sys);
    }

    if (keep[0])
        setenv("XS_NCCL_LIB", keep, 1);
    else
        unsetenv("XS_NCCL_LIB");
    s = xs_nccl_version(&v);
    XT_CHECK(s == XS_OK && v >= 22807, "NCCL: %s (version %d)", xs_errmsg(), v);
    if (s == XS_OK)
        printf("ok NCCL %d.%d.%d from %s\n", v / 10000, v / 100 % 100, v % 100,
               xs_nccl_lib_path());
}

/* ---- single windows -------------------------------------------------------------------------- */

static void open_opts(xs_win_opts *o, xs_target t, size_t bytes, int nflags, int vpeers, int dev)
{
    memset(o, 0, sizeof *o);
    o->target = t;
    o->bytes = bytes;
    o->nflags = nflags;
    o->virtual_peers = vpeers;
    o->device = dev;
}

/* Reset poisons, a filled window verifies clean, one flipped byte is one bad unit. */
static void test_single(xs_target t, size_t bytes, int dev)
{
    const char *name = xs_target_name(t);
    xs_win_opts o;
    open_opts(&o, t, bytes, 4, 1, dev);
    xs_winset *w = NULL;
    xs_status s = xs_win_open(&o, &w);
    XT_CHECK(s == XS_OK, "%s open: %s", name, xs_errmsg());
    if (s != XS_OK)
        return;
    const xs_wintab *tab = xs_win_table(w);
    XT_CHECK(xs_win_target(w) == t && tab->nranks == 1 && tab->rank == 0 && tab->bytes == bytes &&
                 tab->nflags == 4,
             "%s table", name);
    XT_CHECK(((uintptr_t)tab->data[0] & 15) == 0 && ((uintptr_t)tab->flags[0] & 127) == 0 &&
                 (char *)tab->flags[0] >= tab->data[0] + bytes,
             "%s layout", name);
    XT_CHECK(tab->host_mem[0] == (t == XS_TARGET_HOST), "%s host_mem", name);
    const uint64_t n16 = bytes / 16;
    uint64_t bad = 0;
    XT_CHECK(xs_win_reset(w, 0x5A) == XS_OK, "%s reset: %s", name, xs_errmsg());
    XT_CHECK(xs_win_verify(w, 0, 0, n16, 7, 0, &bad) == XS_OK && bad == n16,
             "%s poison: %llu of %llu bad", name, (unsigned long long)bad,
             (unsigned long long)n16);
    fill_kernel<<<64, 128>>>(tab->data[0], n16, 7, 0);
    XT_CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s fill", name);
    XT_CHECK(xs_win_verify(w, 0, 0, n16, 7, 0, &bad) == XS_OK && bad == 0, "%s filled: %llu bad",
             name, (unsigned long long)bad);
    /* a sub-range with its own index base, and the wrong seed */
    XT_CHECK(xs_win_verify(w, 0, 100, 1000, 7, 100, &bad) == XS_OK && bad == 0, "%s sub-range",
             name);
    XT_CHECK(xs_win_verify(w, 0, 100, 1000, 8, 100, &bad) == XS_OK && bad == 1000,
             "%s wrong seed: %llu", name, (unsigned long long)bad);
    XT_CHECK(xs_win_verify(w, 0, 100, 1000, 7, 101, &bad) == XS_OK && bad == 1000,
             "%s shifted index: %llu", name, (unsigned long long)bad);
    /* one byte flipped in the middle */
    unsigned char x = 0;
    char *mid = tab->data[0] + 16 * (n16 / 2) + 5;
    cudaMemcpy(&x, mid, 1, cudaMemcpyDefault);
    x ^= 0x40;
    cudaMemcpy(mid, &x, 1, cudaMemcpyDefault);
    XT_CHECK(xs_win_verify(w, 0, 0, n16, 7, 0, &bad) == XS_OK && bad == 1, "%s flip: %llu bad",
             name, (unsigned long long)bad);
    /* out of range, other ranks */
    XT_CHECK(xs_win_verify(w, 0, n16 - 1, 2, 7, 0, &bad) == XS_ERANGE && one_line(xs_errmsg()),
             "%s range: %s", name, xs_errmsg());
    XT_CHECK(xs_win_verify(w, 1, 0, 1, 7, 0, &bad) == XS_EINVAL, "%s rank 1", name);
    /* flags were zeroed by reset */
    uint64_t f[4] = {1, 1, 1, 1};
    cudaMemcpy(f, tab->flags[0], sizeof f, cudaMemcpyDefault);
    XT_CHECK(!f[0] && !f[1] && !f[2] && !f[3], "%s flags zero", name);
    XT_CHECK(xs_win_barrier(w, 100) == XS_OK, "%s barrier no-op", name);
    xs_win_close(w);
}

static void test_errors(int dev)
{
    xs_win_opts o;
    xs_winset *w = NULL;
    open_opts(&o, XS_TARGET_LOCAL, 0, 1, 1, dev);
    XT_CHECK(xs_win_open(&o, &w) == XS_EINVAL && one_line(xs_errmsg()), "0 bytes");
    open_opts(&o, XS_TARGET_LOCAL, 24, 1, 1, dev);
    XT_CHECK(xs_win_open(&o, &w) == XS_EINVAL, "24 bytes");
    open_opts(&o, XS_TARGET_LOCAL, 4096, 0, 1, dev);
    XT_CHECK(xs_win_open(&o, &w) == XS_EINVAL, "0 flags");
    open_opts(&o, XS_TARGET_VIRTUAL, 4096, 1, 0, dev);
    XT_CHECK(xs_win_open(&o, &w) == XS_EINVAL, "0 virtual peers");
    open_opts(&o, XS_TARGET_VIRTUAL, 4096, 1, 65, dev);
    XT_CHECK(xs_win_open(&o, &w) == XS_EINVAL && strstr(xs_errmsg(), "--virtual-peers 65"),
             "65 virtual peers: %s", xs_errmsg());
    open_opts(&o, XS_TARGET_LOCAL, 4096, 1, 1, 999);
    XT_CHECK(xs_win_open(&o, &w) == XS_ECUDA && strstr(xs_errmsg(), "GPU 999"), "device 999: %s",
             xs_errmsg());
    xs_target t;
    XT_CHECK(xs_target_parse("virtual", &t) == XS_OK && t == XS_TARGET_VIRTUAL, "parse");
    XT_CHECK(xs_target_parse("nvlink", &t) == XS_EINVAL && strstr(xs_errmsg(), "'nvlink'"),
             "parse bad: %s", xs_errmsg());

    /* out of memory: one line saying how much was asked, and the GPU still usable after */
    open_opts(&o, XS_TARGET_LOCAL, (size_t)1 << 50, 1, 1, dev);
    xs_status s = xs_win_open(&o, &w);
    XT_CHECK(s == XS_ECUDA && strstr(xs_errmsg(), "out of device memory") &&
                 strstr(xs_errmsg(), "MiB") && one_line(xs_errmsg()),
             "device OOM: %s", xs_errmsg());
    printf("ok device OOM: %s\n", xs_errmsg());
    open_opts(&o, XS_TARGET_HOST, (size_t)1 << 46, 1, 1, dev);
    s = xs_win_open(&o, &w);
    XT_CHECK(s == XS_ECUDA && strstr(xs_errmsg(), "out of pinned host memory") &&
                 one_line(xs_errmsg()),
             "pinned OOM: %s", xs_errmsg());
    printf("ok pinned OOM: %s\n", xs_errmsg());
    open_opts(&o, XS_TARGET_LOCAL, 4096, 1, 1, dev);
    s = xs_win_open(&o, &w);
    XT_CHECK(s == XS_OK, "usable after OOM: %s", xs_errmsg());
    if (s == XS_OK)
        xs_win_close(w);
}

/* ---- exchange ------------------------------------------------------------------------------- */

static void run_exchange(xs_winset *w, const char *name, size_t bpp, int rounds, int ctas)
{
    const xs_wintab *tab = xs_win_table(w);
    static uint64_t epoch_base = 0; /* flags only grow within one winset; see open order */
    for (int k = 1; k <= rounds; k++) {
        xs_exchange_opts eo;
        memset(&eo, 0, sizeof eo);
        eo.bytes_per_pair = bpp;
        eo.seed = 0x1234u * (uint32_t)k + 17u;
        eo.epoch = epoch_base + (uint64_t)k;
        eo.timeout_ns = 5000000000ull;
        eo.ctas = ctas;
        xs_exchange_result r;
        xs_status s = xs_exchange(w, &eo, &r);
        int own = xs_win_target(w) == XS_TARGET_PEER ? 1 : tab->nranks;
        XT_CHECK(s == XS_OK && r.bad16 == 0 &&
                     r.checked16 == (uint64_t)own * tab->nranks * (bpp / 16),
                 "%s round %d: %s (bad %llu of %llu)", name, k, xs_errmsg(),
                 (unsigned long long)r.bad16, (unsigned long long)r.checked16);
        XT_CHECK(r.ms > 0, "%s round %d time %.3f ms", name, k, r.ms);
        if (s == XS_OK)
            printf("ok %s round %d: %d source%s x %d destinations x %zu KiB, %.3f ms, "
                   "%llu units verified\n", name, k, r.sources, r.sources == 1 ? "" : "s",
                   r.destinations, bpp / 1024, r.ms, (unsigned long long)r.checked16);
    }
    epoch_base += (uint64_t)rounds;
}

static void test_virtual(int dev, int quick)
{
    const int n = 8;
    const size_t bpp = quick ? (size_t)64 << 10 : (size_t)1 << 20;
    xs_win_opts o;
    open_opts(&o, XS_TARGET_VIRTUAL, n * bpp, n, n, dev);
    xs_winset *w = NULL;
    xs_status s = xs_win_open(&o, &w);
    XT_CHECK(s == XS_OK, "virtual open: %s", xs_errmsg());
    if (s != XS_OK)
        return;
    const xs_wintab *tab = xs_win_table(w);
    XT_CHECK(tab->nranks == n && tab->rank == 0 && tab->host_mem[0] == 0, "virtual table");
    int distinct = 1, hosts = 1;
    for (int r = 0; r < n; r++) {
        hosts &= r == 0 || tab->host_mem[r] == 1;
        for (int q = 0; q < r; q++)
            distinct &= tab->data[q] != tab->data[r];
    }
    XT_CHECK(distinct && hosts, "virtual windows distinct, 1..7 in host memory");
    XT_CHECK(xs_exchange_max_bytes(w) == bpp, "max bytes %zu", xs_exchange_max_bytes(w));
    run_exchange(w, "virtual-8", bpp, 3, 0);
    run_exchange(w, "virtual-8 one CTA", bpp / 4, 1, 1);
    /* the check at the destination sees a flipped byte in a host window */
    uint64_t bad = 0, n16 = bpp / 4 / 16;
    char *p = tab->data[3] + 5 * (bpp / 4) + 100; /* slot of source 5 in rank 3's window */
    unsigned char x = 0;
    cudaMemcpy(&x, p, 1, cudaMemcpyDefault);
    x ^= 1;
    cudaMemcpy(p, &x, 1, cudaMemcpyDefault);
    /* the last round used seed 0x1234 + 17 (k = 1) */
    s = xs_win_verify(w, 3, 5 * n16, n16, (0x1234u + 17u) ^ 5u, 5 * n16, &bad);
    XT_CHECK(s == XS_OK && bad == 1, "flip in host window: %llu bad", (unsigned long long)bad);
    /* bad exchange options */
    xs_exchange_opts eo;
    xs_exchange_result r;
    memset(&eo, 0, sizeof eo);
    eo.bytes_per_pair = bpp + 16;
    eo.epoch = 100;
    XT_CHECK(xs_exchange(w, &eo, &r) == XS_ERANGE, "too big: %s", xs_errmsg());
    eo.bytes_per_pair = 24;
    XT_CHECK(xs_exchange(w, &eo, &r) == XS_EINVAL, "not 16-byte units");
    eo.bytes_per_pair = 1024;
    eo.epoch = 0;
    XT_CHECK(xs_exchange(w, &eo, &r) == XS_EINVAL, "epoch 0");
    xs_win_close(w);
}

static void test_peer_one_rank(int dev, int quick)
{
    const size_t bpp = quick ? (size_t)1 << 20 : (size_t)16 << 20;
    xs_win_opts o;
    open_opts(&o, XS_TARGET_PEER, bpp, 4, 1, dev);
    xs_winset *w = NULL;
    xs_status s = xs_win_open(&o, &w);
    XT_CHECK(s == XS_OK, "peer open (one rank): %s", xs_errmsg());
    if (s != XS_OK) {
        printf("FAIL peer open: %s\n", xs_errmsg());
        return;
    }
    const xs_wintab *tab = xs_win_table(w);
    XT_CHECK(tab->nranks == 1 && tab->rank == 0 && tab->host_mem[0] == 0 &&
                 ((uintptr_t)tab->data[0] & 4095) == 0,
             "peer table: %d ranks, data %p", tab->nranks, (void *)tab->data[0]);
    XT_CHECK(xs_win_reset(w, 0x3C) == XS_OK, "peer reset: %s", xs_errmsg());
    uint64_t bad = 0;
    XT_CHECK(xs_win_verify(w, 0, 0, bpp / 16, 1, 0, &bad) == XS_OK && bad == bpp / 16,
             "peer poison: %llu", (unsigned long long)bad);
    run_exchange(w, "peer-1", bpp, 3, 0);
    XT_CHECK(xs_win_barrier(w, 1000) == XS_OK, "peer barrier (one rank): %s", xs_errmsg());
    xs_win_close(w);
}

/* ---- launcher: several processes ---------------------------------------------------------- */

/* Child: open a peer window set and exchange; the parent judges by the exit status. */
static int child_main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "--dup")) {
        unsetenv("XS_DEVICE"); /* both ranks on GPU 0: NCCL must refuse, not hang */
    }
    xs_win_opts o;
    open_opts(&o, XS_TARGET_PEER, (size_t)4 << 20, XS_MAX_RANKS, 1, 0);
    xs_winset *w = NULL;
    if (xs_win_open(&o, &w) != XS_OK) {
        fprintf(stderr, "xstage: error: rank %s: %s\n", getenv("XS_RANK"), xs_errmsg());
        return 3;
    }
    const xs_wintab *tab = xs_win_table(w);
    size_t bpp = xs_exchange_max_bytes(w);
    for (int k = 1; k <= 3; k++) {
        xs_exchange_opts eo;
        memset(&eo, 0, sizeof eo);
        eo.bytes_per_pair = bpp;
        eo.seed = 99u + (uint32_t)k;
        eo.epoch = (uint64_t)k;
        eo.timeout_ns = 10000000000ull;
        xs_exchange_result r;
        if (xs_exchange(w, &eo, &r) != XS_OK) {
            fprintf(stderr, "xstage: error: rank %d: %s\n", tab->rank, xs_errmsg());
            xs_win_close(w);
            return 4;
        }
        fprintf(stderr, "rank %d of %d: round %d, %zu bytes per pair, %.3f ms, %llu units "
                "verified\n", tab->rank, tab->nranks, k, bpp, r.ms,
                (unsigned long long)r.checked16);
    }
    xs_status s = xs_win_barrier(w, 10000);
    xs_win_close(w);
    return s == XS_OK ? 0 : 5;
}

static void test_launch(const char *self, int ngpu)
{
    xs_launch_opts lo;
    memset(&lo, 0, sizeof lo);
    lo.timeout_s = 40;
    lo.grace_s = 5;
    unsigned char id[XS_NCCL_ID_BYTES];
    char hex[2 * XS_NCCL_ID_BYTES + 1];
    int ec = -1;
    /* two ranks on one GPU: a clean failure within the bound, not a hang */
    if (xs_nccl_unique_id(id) == XS_OK) {
        xs_hex_encode(id, XS_NCCL_ID_BYTES, hex);
        char *args[] = {(char *)self, (char *)"--dup", NULL};
        double t0 = xs_now_s();
        xs_status s = xs_launch(2, args, hex, &lo, &ec);
        double dt = xs_now_s() - t0;
        XT_CHECK(s != XS_OK && ec != 0 && dt < 40, "duplicate GPU: %s (exit %d, %.1f s)",
                 xs_errmsg(), ec, dt);
        printf("ok two ranks on one GPU refused in %.1f s: %s\n", dt, xs_errmsg());
    } else {
        XT_CHECK(0, "ncclGetUniqueId: %s", xs_errmsg());
    }
    if (ngpu < 2) {
        printf("note: %d GPU: the multi-GPU exchange runs with 2+ GPUs\n", ngpu);
        return;
    }
    int n = ngpu < 8 ? ngpu : 8;
    if (xs_nccl_unique_id(id) != XS_OK)
        return;
    xs_hex_encode(id, XS_NCCL_ID_BYTES, hex);
    char *args[] = {(char *)self, (char *)"--exchange", NULL};
    xs_status s = xs_launch(n, args, hex, &lo, &ec);
    XT_CHECK(s == XS_OK && ec == 0, "%d-rank exchange: %s (exit %d)", n, xs_errmsg(), ec);
    if (s == XS_OK)
        printf("ok %d-rank peer exchange through the launcher\n", n);
}

/* ---- cuBLAS ------------------------------------------------------------------------------- */

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even; inputs here are finite */
    return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_cublas(void)
{
    xs_cublas *h = NULL;
    xs_status s = xs_cublas_open(&h);
    XT_CHECK(s == XS_OK, "cuBLAS: %s", xs_errmsg());
    if (s != XS_OK)
        return;
    const int m = 70, n = 48, k = 40, batch = 3;
    const size_t sa = (size_t)m * k, sb = (size_t)k * n, sc = (size_t)m * n;
    uint16_t *ha = (uint16_t *)malloc(batch * sa * 2), *hb = (uint16_t *)malloc(batch * sb * 2);
    uint16_t *hbt = (uint16_t *)malloc(batch * sb * 2), *hc16 = (uint16_t *)malloc(batch * sc * 2);
    float *ref = (float *)malloc(batch * sc * 4), *hc = (float *)malloc(batch * sc * 4);
    srand(12345);
    /* small multiples of 1/4: exact in bf16, products and sums exact in fp32 */
    for (size_t i = 0; i < batch * sa; i++)
        ha[i] = to_bf16((float)(rand() % 17 - 8) / 4);
    for (int q = 0; q < batch; q++)
        for (int kk = 0; kk < k; kk++)
            for (int j = 0; j < n; j++) {
                uint16_t v = to_bf16((float)(rand() % 17 - 8) / 4);
                hb[q * sb + (size_t)kk * n + j] = v;  /* [k, n] */
                hbt[q * sb + (size_t)j * k + kk] = v; /* [n, k] */
            }
    for (int q = 0; q < batch; q++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                float acc = 0;
                for (int kk = 0; kk < k; kk++)
                    acc += from_bf16(ha[q * sa + (size_t)i * k + kk]) *
                           from_bf16(hb[q * sb + (size_t)kk * n + j]);
                ref[q * sc + (size_t)i * n + j] = acc;
            }
    void *da, *db, *dbt, *dc;
    cudaMalloc(&da, batch * sa * 2);
    cudaMalloc(&db, batch * sb * 2);
    cudaMalloc(&dbt, batch * sb * 2);
    cudaMalloc(&dc, batch * sc * 4);
    cudaMemcpy(da, ha, batch * sa * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(db, hb, batch * sb * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dbt, hbt, batch * sb * 2, cudaMemcpyHostToDevice);
    for (int bt = 0; bt < 2; bt++) {
        /* fp32 out, single */
        cudaMemset(dc, 0xff, batch * sc * 4);
        s = xs_cublas_gemm_bf16(h, NULL, m, n, k, da, bt ? dbt : db, bt, dc, 1);
        cudaMemcpy(hc, dc, sc * 4, cudaMemcpyDeviceToHost);
        int wrong = 0;
        for (size_t i = 0; i < sc; i++)
            wrong += hc[i] != ref[i];
        XT_CHECK(s == XS_OK && wrong == 0, "gemm fp32 b_trans=%d: %s, %d wrong", bt, xs_errmsg(),
                 wrong);
        /* bf16 out */
        s = xs_cublas_gemm_bf16(h, NULL, m, n, k, da, bt ? dbt : db, bt, dc, 0);
        cudaMemcpy(hc16, dc, sc * 2, cudaMemcpyDeviceToHost);
        wrong = 0;
        for (size_t i = 0; i < sc; i++)
            wrong += fabsf(from_bf16(hc16[i]) - ref[i]) > 1e-2f * fabsf(ref[i]) + 1e-6f;
        XT_CHECK(s == XS_OK && wrong == 0, "gemm bf16 b_trans=%d: %s, %d wrong", bt, xs_errmsg(),
                 wrong);
        /* batched, fp32 out */
        cudaMemset(dc, 0xff, batch * sc * 4);
        s = xs_cublas_gemm_bf16_batched(h, NULL, m, n, k, da, (long long)sa, bt ? dbt : db,
                                        (long long)sb, bt, dc, (long long)sc, 1, batch);
        cudaMemcpy(hc, dc, batch * sc * 4, cudaMemcpyDeviceToHost);
        wrong = 0;
        for (size_t i = 0; i < batch * sc; i++)
            wrong += hc[i] != ref[i];
        XT_CHECK(s == XS_OK && wrong == 0, "batched fp32 b_trans=%d: %s, %d wrong", bt,
                 xs_errmsg(), wrong);
    }
    XT_CHECK(xs_cublas_gemm_bf16(h, NULL, 0, n, k, da, db, 0, dc, 1) == XS_EINVAL, "m = 0");
    cudaFree(da), cudaFree(db), cudaFree(dbt), cudaFree(dc);
    free(ha), free(hb), free(hbt), free(hc16), free(ref), free(hc);
    xs_cublas_close(h);
    /* a library that is not there: one line */
    setenv("XS_CUBLAS_LIB", "/nonexistent/libcublas.so", 1);
    xs_cublas *h2 = NULL;
    /* the library is already loaded in this process; the override matters on first use only */
    s = xs_cublas_open(&h2);
    XT_CHECK(s == XS_OK, "cached cuBLAS: %s", xs_errmsg());
    xs_cublas_close(h2);
    unsetenv("XS_CUBLAS_LIB");
}

int main(int argc, char **argv)
{
    if (getenv("XS_RANK"))
        return child_main(argc, argv);
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    xs_gpu_info gi;
    xs_status s = xs_gpu_open(0, &gi);
    XT_CHECK(s == XS_OK, "GPU: %s", xs_errmsg());
    if (s != XS_OK) {
        printf("xstage: error: %s\n", xs_errmsg());
        return xt_done();
    }
    int ngpu = 0;
    xs_gpu_count(&ngpu);
    test_gpu(&gi, argc, argv);
    test_nccl_version();
    test_single(XS_TARGET_LOCAL, (size_t)4 << 20, gi.device);
    test_single(XS_TARGET_HOST, (size_t)4 << 20, gi.device);
    test_single(XS_TARGET_HOST, (size_t)(quick ? 40 : 96) << 20, gi.device); /* threaded check */
    test_errors(gi.device);
    test_virtual(gi.device, quick);
    test_peer_one_rank(gi.device, quick);
    if (!getenv("XS_TEST_SKIP_LAUNCH"))
        test_launch(argv[0], ngpu);
    test_cublas();
    return xt_done();
}
