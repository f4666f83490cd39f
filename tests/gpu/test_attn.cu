// SPDX-License-Identifier: Apache-2.0
/*
 * test_attn.cu - the attention forward kernel (cuda/up/up_kernel.cuh) against a CPU fp64 reference
 * on small shapes: causal and non-causal, odd sequence lengths (masked tails), one tile per CTA,
 * persistent and tiny grids (many tiles per CTA, so the cross-tile prefetch is exercised); the
 * fused output through virtual peers (HBM + pinned host windows) with both tile orders and every
 * kind of split (none, one slice, fewer and more slices than the next tile has iterations), every
 * byte checked at its destination and every CTA's signal counted; the courier kernel (2 and 4
 * couriers, both orders, paced and unpaced, a persistent and a 2-CTA compute grid, the real-peer
 * head layout) bitwise equal at every destination to the plain fused run, with every CTA's signal,
 * every stamp, and a courier timeout that is reported and ends the kernel; the KV-split kernel
 * (parts of 1-5 key blocks, three grids, local and windows output) with whole tiles bitwise equal
 * to the local output and tiles in parts within tolerance of it and of the reference, and a
 * deadlocked list whose wait times out and is reported; the tile orders as permutations (host);
 * the helpers the benchmark relies on (fp32 reference rows, fill, compare); and bad input. Needs a
 * GPU; the last line is "N passed, N failed" (a failing CUDA call ends the binary through
 * XS_CHECK_CU with one line).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "up/up_kernel.cuh"
#include "../xt.h"
#include "../xt_rand.h"
#include "xstage_cuda.h"
#include "xstage_win.h"

#define ATOL 2e-3 /* the benchmark's bf16 tolerance: |out - ref| <= ATOL + RTOL |ref| */
#define RTOL 2e-2

typedef struct {
    int seq, heads;
    size_t nel;
    __nv_bfloat16 *hq, *hk, *hv; /* host inputs */
    double *ref;                 /* [causal][seq, heads, 128] fp64 reference */
    void *q, *k, *v, *o;         /* device */
} shape;

static void cpu_reference(const shape *s, int causal, double *out)
{
    const int H = s->heads, D = XS_ATTN_D;
    const double scale = 1.0 / sqrt((double)D);
    double *p = (double *)malloc((size_t)s->seq * sizeof(double));
    for (int h = 0; h < H; h++)
        for (int i = 0; i < s->seq; i++) {
            int nk = causal ? i + 1 : s->seq;
            double mx = -INFINITY, l = 0;
            for (int j = 0; j < nk; j++) {
                double d = 0;
                for (int x = 0; x < D; x++)
                    d += (double)__bfloat162float(s->hq[((size_t)i * H + h) * D + x]) *
                         (double)__bfloat162float(s->hk[((size_t)j * H + h) * D + x]);
                p[j] = d * scale;
                mx = fmax(mx, p[j]);
            }
            for (int j = 0; j < nk; j++)
                l += (p[j] = exp(p[j] - mx));
            for (int x = 0; x < D; x++) {
                double acc = 0;
                for (int j = 0; j < nk; j++)
                    acc += p[j] * (double)__bfloat162float(s->hv[((size_t)j * H + h) * D + x]);
                out[((size_t)i * H + h) * D + x] = acc / l;
            }
        }
    free(p);
}

static void shape_init(shape *s, int seq, int heads)
{
    memset(s, 0, sizeof *s);
    s->seq = seq, s->heads = heads;
    s->nel = (size_t)seq * heads * XS_ATTN_D;
    s->hq = (__nv_bfloat16 *)malloc(s->nel * 2);
    s->hk = (__nv_bfloat16 *)malloc(s->nel * 2);
    s->hv = (__nv_bfloat16 *)malloc(s->nel * 2);
    s->ref = (double *)malloc(2 * s->nel * sizeof(double));
    if (!s->hq || !s->hk || !s->hv || !s->ref) {
        XT_CHECK(0, "out of host memory");
        exit(xt_done());
    }
    for (size_t i = 0; i < s->nel; i++) {
        s->hq[i] = __float2bfloat16((float)(4 * xt_urand() - 2));
        s->hk[i] = __float2bfloat16((float)(4 * xt_urand() - 2));
        s->hv[i] = __float2bfloat16((float)(2 * xt_urand() - 1));
    }
    cpu_reference(s, 0, s->ref);
    cpu_reference(s, 1, s->ref + s->nel);
    XS_CHECK_CU(cudaMalloc(&s->q, s->nel * 2));
    XS_CHECK_CU(cudaMalloc(&s->k, s->nel * 2));
    XS_CHECK_CU(cudaMalloc(&s->v, s->nel * 2));
    XS_CHECK_CU(cudaMalloc(&s->o, s->nel * 2));
    XS_CHECK_CU(cudaMemcpy(s->q, s->hq, s->nel * 2, cudaMemcpyHostToDevice));
    XS_CHECK_CU(cudaMemcpy(s->k, s->hk, s->nel * 2, cudaMemcpyHostToDevice));
    XS_CHECK_CU(cudaMemcpy(s->v, s->hv, s->nel * 2, cudaMemcpyHostToDevice));
}

static void shape_free(shape *s)
{
    free(s->hq); free(s->hk); free(s->hv); free(s->ref);
    cudaFree(s->q); cudaFree(s->k); cudaFree(s->v); cudaFree(s->o);
}

static xs_attn_args base_args(const shape *s, int causal)
{
    xs_attn_args a;
    memset(&a, 0, sizeof a);
    a.q = s->q, a.k = s->k, a.v = s->v, a.o = s->o;
    a.seq = s->seq, a.heads = s->heads, a.causal = causal;
    a.out = XS_ATTN_OUT_LOCAL;
    return a;
}

/* Worst |got - ref| / (ATOL + RTOL |ref|) over all elements; NaN counts as infinite. */
static double worst_ratio(const __nv_bfloat16 *got, const double *ref, size_t n, double *max_abs)
{
    double w = 0;
    *max_abs = 0;
    for (size_t i = 0; i < n; i++) {
        double g = (double)__bfloat162float(got[i]);
        double e = fabs(g - ref[i]);
        if (isnan(e))
            return *max_abs = INFINITY;
        *max_abs = fmax(*max_abs, e);
        w = fmax(w, e / (ATOL + RTOL * fabs(ref[i])));
    }
    return w;
}

/* Local output for one grid; returns the output (host, caller frees). */
static __nv_bfloat16 *run_local(const shape *s, int causal, int grid, uint64_t *cta_ns,
                                uint64_t *tile_ns)
{
    xs_attn_args a = base_args(s, causal);
    a.cta_ns = cta_ns, a.tile_ns = tile_ns;
    XS_CHECK(xs_attn_fill_word(s->o, s->nel * 2, 0xffffffffu, 0)); /* NaN: unwritten rows fail */
    XS_CHECK(xs_attn_fwd(&a, NULL, grid, 0));
    XS_CHECK_CU(cudaDeviceSynchronize());
    __nv_bfloat16 *h = (__nv_bfloat16 *)malloc(s->nel * 2);
    XS_CHECK_CU(cudaMemcpy(h, s->o, s->nel * 2, cudaMemcpyDeviceToHost));
    return h;
}

static void test_local(const shape *s, int sm_count)
{
    int tiles = xs_attn_tiles(s->seq, s->heads);
    int grids[3] = {tiles, tiles < sm_count ? tiles : sm_count, tiles < 2 ? 1 : 2};
    uint64_t *d_cta, *d_tile;
    XS_CHECK_CU(cudaMalloc((void **)&d_cta, (size_t)tiles * 3 * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMalloc((void **)&d_tile, (size_t)tiles * sizeof(uint64_t)));
    for (int causal = 0; causal <= 1; causal++) {
        __nv_bfloat16 *first = NULL;
        for (int gi = 0; gi < 3; gi++) {
            XS_CHECK_CU(cudaMemset(d_tile, 0, (size_t)tiles * sizeof(uint64_t)));
            __nv_bfloat16 *h = run_local(s, causal, grids[gi], d_cta, d_tile);
            double max_abs, w = worst_ratio(h, s->ref + causal * s->nel, s->nel, &max_abs);
            XT_CHECK(w <= 1.0, "seq %d heads %d causal %d grid %d: max |err| %.3g = %.2fx the "
                     "tolerance", s->seq, s->heads, causal, grids[gi], max_abs, w);
            if (!first) {
                first = h;
            } else {
                XT_CHECK(!memcmp(first, h, s->nel * 2), "seq %d heads %d causal %d: grid %d "
                         "differs bitwise from grid %d", s->seq, s->heads, causal, grids[gi],
                         grids[0]);
                free(h);
            }
            /* stamps: every CTA started before it ended, every tile was stamped */
            uint64_t *cta = (uint64_t *)malloc((size_t)grids[gi] * 3 * sizeof(uint64_t));
            uint64_t *tl = (uint64_t *)malloc((size_t)tiles * sizeof(uint64_t));
            XS_CHECK_CU(cudaMemcpy(cta, d_cta, (size_t)grids[gi] * 3 * sizeof(uint64_t),
                           cudaMemcpyDeviceToHost));
            XS_CHECK_CU(cudaMemcpy(tl, d_tile, (size_t)tiles * sizeof(uint64_t),
                           cudaMemcpyDeviceToHost));
            int bad = 0;
            for (int b = 0; b < grids[gi]; b++)
                bad += !(cta[3 * b] > 0 && cta[3 * b + 1] >= cta[3 * b]);
            for (int t = 0; t < tiles; t++)
                bad += tl[t] == 0;
            XT_CHECK(bad == 0, "seq %d grid %d: %d CTA or tile stamps missing or reversed",
                     s->seq, grids[gi], bad);
            free(cta);
            free(tl);
        }
        free(first);
    }
    cudaFree(d_cta);
    cudaFree(d_tile);
}

/* P virtual peers' windows of the given bytes and flags; NULL (one failed check) when they
 * cannot be opened. */
static xs_winset *open_virtual(int P, size_t bytes, int nflags)
{
    xs_win_opts wo;
    memset(&wo, 0, sizeof wo);
    wo.target = XS_TARGET_VIRTUAL;
    wo.virtual_peers = P;
    wo.bytes = bytes;
    wo.nflags = nflags;
    xs_winset *ws = NULL;
    xs_status st = xs_win_open(&wo, &ws);
    XT_CHECK(st == XS_OK, "xs_win_open virtual %d: %s", P, xs_errmsg());
    return st == XS_OK ? ws : NULL;
}

/* How many of the grid x ranks CTA signals of a run (value signal) are missing (d_bad: one
 * device counter). */
static unsigned long long missing_signals(const xs_wintab *tab, int grid, uint64_t signal,
                                          unsigned long long *d_bad)
{
    unsigned long long bad_flags = 0;
    XS_CHECK_CU(cudaMemset(d_bad, 0, sizeof *d_bad));
    XS_CHECK(xs_attn_flags_check(tab, grid, signal, d_bad, 0));
    XS_CHECK_CU(cudaMemcpy(&bad_flags, d_bad, sizeof bad_flags, cudaMemcpyDeviceToHost));
    return bad_flags;
}

/* Fused output to P virtual peers: every byte at every destination equals the local output;
 * every CTA signalled every rank. */
static void test_fused(const shape *s, int P, int sm_count)
{
    static uint64_t epoch;
    int rpr = s->seq / P;
    int tiles = xs_attn_tiles(s->seq, s->heads);
    size_t shard = (size_t)rpr * s->heads * XS_ATTN_ROW_BYTES;
    xs_winset *ws = open_virtual(P, shard, tiles); /* one per CTA of the largest grid */
    if (!ws)
        return;
    const xs_wintab *tab = xs_win_table(ws);
    XT_CHECK(tab->nranks == P, "window table has %d ranks, asked for %d", tab->nranks, P);
    uint64_t *d_cta;
    unsigned long long *d_bad;
    XS_CHECK_CU(cudaMalloc((void **)&d_bad, sizeof *d_bad));
    XS_CHECK_CU(cudaMalloc((void **)&d_cta, (size_t)tiles * 3 * sizeof(uint64_t)));
    char *want = (char *)malloc(shard), *got = (char *)malloc(shard);
    /* splits: none, one slice, fewer and more slices than a tile has iterations */
    const int splits[] = {0, 1, 3, 16, 64, XS_ATTN_MAX_SPLIT};
    const int ns = (int)(sizeof splits / sizeof splits[0]);
    for (int causal = 0; causal <= 1; causal++) {
        __nv_bfloat16 *local = run_local(s, causal, tiles, NULL, NULL);
        const int grids[2] = {tiles < sm_count ? tiles : sm_count, tiles < 2 ? 1 : 2};
        /* snake: both grids, every split; early: the 2-CTA grid (where a CTA holds several
         * tiles, some remote, so the order differs), splits 0, 3, 16 and 256 */
        for (int ci = 0; ci < 2 * ns + 4; ci++) {
            const int order = ci < 2 * ns ? XS_ATTN_ORDER_SNAKE : XS_ATTN_ORDER_EARLY;
            const int gi = ci < 2 * ns ? ci / ns : 1;
            static const int early_si[4] = {0, 2, 3, 5}; /* splits 0, 3, 16, 256 */
            const int si = ci < 2 * ns ? ci % ns : early_si[ci - 2 * ns];
            xs_attn_args a = base_args(s, causal);
            a.out = XS_ATTN_OUT_WINDOWS;
            a.rows_per_rank = rpr;
            a.split = splits[si];
            a.order = order;
            a.signal = ++epoch; /* new per run: a stale flag never matches */
            a.cta_ns = d_cta;
            for (int r = 0; r < P; r++)
                XS_CHECK(xs_attn_fill_word(tab->data[r], shard, 0xffffffffu, 0));
            XS_CHECK(xs_attn_fwd(&a, tab, grids[gi], 0));
            XS_CHECK_CU(cudaDeviceSynchronize());
            const unsigned long long bad_flags = missing_signals(tab, grids[gi], a.signal, d_bad);
            int bad_units = 0;
            for (int r = 0; r < P; r++) {
                XS_CHECK_CU(cudaMemcpy(got, tab->data[r], shard, cudaMemcpyDefault));
                memcpy(want, (const char *)local + (size_t)r * shard, shard);
                for (size_t u = 0; u < shard / 16; u++)
                    bad_units += memcmp(got + 16 * u, want + 16 * u, 16) != 0;
            }
            XT_CHECK(bad_units == 0, "fused seq %d heads %d causal %d P %d grid %d order %d "
                     "split %d: %d 16-byte units differ at their destinations", s->seq,
                     s->heads, causal, P, grids[gi], order, splits[si], bad_units);
            XT_CHECK(bad_flags == 0, "fused seq %d P %d grid %d order %d split %d: %llu of "
                     "%d x %d CTA signals missing", s->seq, P, grids[gi], order, splits[si],
                     bad_flags, P, grids[gi]);
        }
        free(local);
    }
    free(want);
    free(got);
    cudaFree(d_bad);
    cudaFree(d_cta);
    xs_win_close(ws);
}

/* Couriers (docs/UP.md "Couriers"): for C = 2 and 4, both orders, unpaced and paced, on the
 * persistent compute grid (min(tiles, SMs - C)) and a 2-CTA one (several tiles per CTA, remote
 * and local), the destinations equal the plain fused run's bitwise (snake, split 0, which
 * test_fused checks against the local output), every CTA of the grid - couriers included -
 * signalled every rank, every CTA stamped its start and end and every tile its end. With
 * head_offset, as the second rank of a group sending 2*heads per destination row (real peers'
 * layout): this rank's half of every row equals the local output, the other half untouched. */
static void test_couriers(const shape *s, int P, int sm_count, int head_offset)
{
    static uint64_t epoch = 1u << 20; /* apart from test_fused's values */
    const int rpr = s->seq / P, H = s->heads, tiles = xs_attn_tiles(s->seq, H);
    const int dh = head_offset ? 2 * H : H;
    const size_t row = (size_t)dh * XS_ATTN_ROW_BYTES, shard = (size_t)rpr * row;
    /* flags for the largest grid: tiles compute CTAs + 4 couriers */
    xs_winset *ws = open_virtual(P, shard, tiles + 4);
    if (!ws)
        return;
    const xs_wintab *tab = xs_win_table(ws);
    uint64_t *d_cta, *d_tile, *d_sync;
    unsigned long long *d_bad;
    void *stage;
    xs_devstatus *d_st;
    XS_CHECK_CU(cudaMalloc((void **)&d_bad, sizeof *d_bad));
    XS_CHECK_CU(cudaMalloc((void **)&d_cta, (size_t)(tiles + 4) * 3 * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMalloc((void **)&d_tile, (size_t)tiles * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMalloc((void **)&d_sync, (size_t)(2 * tiles + 4) * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMemset(d_sync, 0, (size_t)(2 * tiles + 4) * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMalloc(&stage, s->nel * 2));
    XS_CHECK_CU(cudaMalloc((void **)&d_st, sizeof *d_st));
    XS_CHECK_CU(cudaMemset(d_st, 0, sizeof *d_st));
    char *want = (char *)malloc((size_t)P * shard), *got = (char *)malloc(shard);
    uint64_t *cta = (uint64_t *)malloc((size_t)(tiles + 4) * 3 * sizeof(uint64_t));
    uint64_t *tl = (uint64_t *)malloc((size_t)tiles * sizeof(uint64_t));
    for (int causal = 0; causal <= 1; causal++) {
        __nv_bfloat16 *local = run_local(s, causal, tiles, NULL, NULL);
        xs_attn_args base = base_args(s, causal);
        base.out = XS_ATTN_OUT_WINDOWS;
        base.rows_per_rank = rpr;
        base.dst_heads = head_offset ? dh : 0;
        base.dst_head0 = head_offset ? H : 0;
        /* the reference: the plain fused run (snake, split 0, persistent grid) */
        for (int r = 0; r < P; r++)
            XS_CHECK(xs_attn_fill_word(tab->data[r], shard, 0xffffffffu, 0));
        {
            xs_attn_args a = base;
            a.signal = ++epoch;
            XS_CHECK(xs_attn_fwd(&a, tab, tiles < sm_count ? tiles : sm_count, 0));
            XS_CHECK_CU(cudaDeviceSynchronize());
            for (int r = 0; r < P; r++)
                XS_CHECK_CU(cudaMemcpy(want + (size_t)r * shard, tab->data[r], shard,
                               cudaMemcpyDefault));
        }
        /* and it equals the local output (this rank's half of each row with head_offset) */
        size_t ref_bad = 0;
        const size_t half = (size_t)H * XS_ATTN_ROW_BYTES;
        for (int p = 0; p < P; p++)
            for (int i = 0; i < rpr && p * rpr + i < s->seq; i++)
                ref_bad += memcmp(want + (size_t)p * shard + i * row + (head_offset ? half : 0),
                                  (const char *)local + (size_t)(p * rpr + i) * half, half) != 0;
        XT_CHECK(ref_bad == 0, "couriers' reference (plain fused) seq %d P %d causal %d: %zu "
                 "rows differ from the local output", s->seq, P, causal, ref_bad);
        for (int ci = 0; ci < 16; ci++) {
            const int C = ci & 1 ? 4 : 2;
            const int order = ci & 2 ? XS_ATTN_ORDER_EARLY : XS_ATTN_ORDER_SNAKE;
            const float pace = ci & 4 ? 8.0f * C : 0.f; /* 8 B/ns per courier, or unpaced */
            int ncomp = ci & 8 ? 2 : sm_count - C;
            if (ncomp > tiles)
                ncomp = tiles;
            const int grid = ncomp + C;
            xs_attn_args a = base;
            a.couriers = C;
            a.order = order;
            a.pace_bytes_per_ns = pace;
            a.o = stage;
            a.sync = d_sync;
            a.signal = ++epoch;
            a.cta_ns = d_cta;
            a.tile_ns = d_tile;
            a.status = d_st;
            XS_CHECK_CU(cudaMemset(d_tile, 0, (size_t)tiles * sizeof(uint64_t)));
            XS_CHECK_CU(cudaMemset(d_cta, 0, (size_t)grid * 3 * sizeof(uint64_t)));
            for (int r = 0; r < P; r++)
                XS_CHECK(xs_attn_fill_word(tab->data[r], shard, 0xffffffffu, 0));
            XS_CHECK(xs_attn_fwd(&a, tab, grid, 0));
            XS_CHECK_CU(cudaDeviceSynchronize());
            xs_devstatus hs;
            XS_CHECK_CU(cudaMemcpy(&hs, d_st, sizeof hs, cudaMemcpyDeviceToHost));
            const unsigned long long bad_flags = missing_signals(tab, grid, a.signal, d_bad);
            int bad_units = 0;
            for (int r = 0; r < P; r++) {
                XS_CHECK_CU(cudaMemcpy(got, tab->data[r], shard, cudaMemcpyDefault));
                for (size_t u = 0; u < shard / 16; u++)
                    bad_units += memcmp(got + 16 * u, want + (size_t)r * shard + 16 * u, 16) != 0;
            }
            XS_CHECK_CU(cudaMemcpy(cta, d_cta, (size_t)grid * 3 * sizeof(uint64_t),
                           cudaMemcpyDeviceToHost));
            XS_CHECK_CU(cudaMemcpy(tl, d_tile, (size_t)tiles * sizeof(uint64_t), cudaMemcpyDeviceToHost));
            int bad_stamps = 0;
            for (int b = 0; b < grid; b++)
                bad_stamps += !(cta[3 * b] > 0 && cta[3 * b + 1] >= cta[3 * b]);
            for (int t = 0; t < tiles; t++)
                bad_stamps += tl[t] == 0;
            XT_CHECK(hs.code == 0, "couriers seq %d P %d causal %d C %d order %d pace %g grid "
                     "%d: device failure %u in CTA %u (detail %llu)", s->seq, P, causal, C,
                     order, (double)pace, grid, hs.code, hs.block, hs.detail);
            XT_CHECK(bad_units == 0, "couriers seq %d heads %d causal %d P %d%s C %d order %d "
                     "pace %g grid %d: %d 16-byte units differ from the plain fused run",
                     s->seq, H, causal, P, head_offset ? " (head offset)" : "", C, order,
                     (double)pace, grid, bad_units);
            XT_CHECK(bad_flags == 0, "couriers seq %d P %d C %d order %d grid %d: %llu of %d x "
                     "%d CTA signals missing", s->seq, P, C, order, grid, bad_flags, P, grid);
            XT_CHECK(bad_stamps == 0, "couriers seq %d C %d grid %d: %d CTA or tile stamps "
                     "missing or reversed", s->seq, C, grid, bad_stamps);
            if (hs.code) {
                XS_CHECK_CU(cudaMemset(d_st, 0, sizeof *d_st));
                break;
            }
        }
        free(local);
    }
    free(want); free(got); free(cta); free(tl);
    cudaFree(d_bad); cudaFree(d_cta); cudaFree(d_tile); cudaFree(d_sync); cudaFree(stage);
    cudaFree(d_st);
    xs_win_close(ws);
}

/* A courier whose wait times out (timeout 1 ns, while the one compute CTA needs tens of us per
 * tile): the failure is recorded (XS_DEVERR_TIMEOUT, in a courier CTA, naming a remote tile),
 * the kernel ends (every other courier stops on the recorded failure), and the signals are not
 * raised. Afterwards the same buffers run clean with the default timeout. */
static void test_courier_timeout(void)
{
    const int seq = 4096, H = 2, P = 2, C = 2, rpr = seq / P, tiles = xs_attn_tiles(seq, H);
    const int remote = xs_attn_remote_tiles(seq, H, rpr);
    const size_t nel = (size_t)seq * H * XS_ATTN_D, shard = (size_t)rpr * H * XS_ATTN_ROW_BYTES;
    void *q, *k, *v, *o;
    uint64_t *d_sync;
    unsigned long long *d_bad;
    xs_devstatus *d_st;
    XS_CHECK_CU(cudaMalloc(&q, nel * 2));
    XS_CHECK_CU(cudaMalloc(&k, nel * 2));
    XS_CHECK_CU(cudaMalloc(&v, nel * 2));
    XS_CHECK_CU(cudaMalloc(&o, nel * 2));
    XS_CHECK_CU(cudaMalloc((void **)&d_sync, (size_t)(tiles + 3) * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMemset(d_sync, 0, (size_t)(tiles + 3) * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMalloc((void **)&d_bad, sizeof *d_bad));
    XS_CHECK_CU(cudaMalloc((void **)&d_st, sizeof *d_st));
    XS_CHECK_CU(cudaMemset(d_st, 0, sizeof *d_st));
    XS_CHECK(xs_attn_fill_random(q, nel, 11, -2.f, 2.f, 0));
    XS_CHECK(xs_attn_fill_random(k, nel, 12, -2.f, 2.f, 0));
    XS_CHECK(xs_attn_fill_random(v, nel, 13, -1.f, 1.f, 0));
    xs_winset *ws = open_virtual(P, shard, 1 + C);
    if (!ws)
        return;
    const xs_wintab *tab = xs_win_table(ws);
    xs_attn_args a;
    memset(&a, 0, sizeof a);
    a.q = q, a.k = k, a.v = v, a.o = o;
    a.seq = seq, a.heads = H, a.causal = 0;
    a.out = XS_ATTN_OUT_WINDOWS;
    a.rows_per_rank = rpr;
    a.couriers = C;
    a.sync = d_sync;
    a.status = d_st;
    for (int pass = 0; pass < 2; pass++) {
        a.signal = 0x7000 + pass;
        a.timeout_ns = pass == 0 ? 1 : 0; /* 1 ns, then the default */
        for (int r = 0; r < P; r++)
            XS_CHECK(xs_attn_fill_word(tab->data[r], shard, 0xffffffffu, 0));
        XS_CHECK(xs_attn_fwd(&a, tab, 1 + C, 0));
        XS_CHECK_CU(cudaDeviceSynchronize()); /* returns: no CTA is left waiting */
        xs_devstatus hs;
        XS_CHECK_CU(cudaMemcpy(&hs, d_st, sizeof hs, cudaMemcpyDeviceToHost));
        const unsigned long long bad_flags = missing_signals(tab, 1 + C, a.signal, d_bad);
        if (pass == 0) {
            XT_CHECK(hs.code == XS_DEVERR_TIMEOUT && hs.block >= 1 && hs.detail < (unsigned)remote,
                     "courier timeout: status code %u in CTA %u (detail %llu), expected a "
                     "timeout (%u) in a courier (CTA >= 1) on a remote tile (< %d)", hs.code,
                     hs.block, hs.detail, XS_DEVERR_TIMEOUT, remote);
            XT_CHECK(bad_flags == (unsigned long long)P * (1 + C), "courier timeout: %llu of %d "
                     "signals missing, expected none raised", bad_flags, P * (1 + C));
            XS_CHECK_CU(cudaMemset(d_st, 0, sizeof *d_st));
        } else {
            XT_CHECK(hs.code == 0 && bad_flags == 0, "after a timeout, a clean run: status %u, "
                     "%llu signals missing", hs.code, bad_flags);
        }
    }
    xs_win_close(ws);
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o);
    cudaFree(d_sync); cudaFree(d_bad); cudaFree(d_st);
}

/* KV split (docs/UP.md "KV split"): lists of 1, 2, 3 and 5 key blocks per part on the
 * persistent grid, a 2-CTA and a 1-CTA grid, a tile's stores whole or in 3 or 16 slices over the
 * next task: at every destination a tile that ran whole equals
 * the local output bitwise, a tile that ran in parts is within the benchmark's tolerance of the
 * local output (UP's 1e-3 + |ref|/64) and of the fp64 reference; every CTA signalled every
 * rank, no device failure, every tile stamped. Once with local output too. */
static void test_kv(const shape *s, int P, int sm_count, int tiny)
{
    static uint64_t epoch = 2u << 20; /* apart from the other tests' values */
    const int rpr = s->seq / P, H = s->heads, tiles = xs_attn_tiles(s->seq, H);
    const int remote = xs_attn_remote_tiles(s->seq, H, rpr);
    const size_t shard = (size_t)rpr * H * XS_ATTN_ROW_BYTES, nsh = shard / 2;
    xs_winset *ws = open_virtual(P, shard, tiles);
    if (!ws)
        return;
    const xs_wintab *tab = xs_win_table(ws);
    const int cap = xs_attn_kv_max_tasks(s->seq, H);
    int *off = (int *)malloc((size_t)(tiles + 1) * sizeof(int)), *d_off;
    xs_attn_kvtask *tk = (xs_attn_kvtask *)malloc((size_t)cap * sizeof *tk);
    int4 *d_tk;
    float *d_part;
    uint64_t *d_flag, *d_tile;
    unsigned long long *d_bad;
    xs_devstatus *d_st;
    const int max_slots = tiles * XS_ATTN_KV_MAX_PARTS;
    XS_CHECK_CU(cudaMalloc((void **)&d_off, (size_t)(tiles + 1) * sizeof(int)));
    XS_CHECK_CU(cudaMalloc((void **)&d_tk, (size_t)cap * sizeof(int4)));
    XS_CHECK_CU(cudaMalloc((void **)&d_part, (size_t)max_slots * XS_ATTN_KV_SLOT_BYTES));
    XS_CHECK_CU(cudaMalloc((void **)&d_flag, (size_t)max_slots * XS_ATTN_WARPS * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMemset(d_flag, 0, (size_t)max_slots * XS_ATTN_WARPS * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMalloc((void **)&d_tile, (size_t)tiles * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMalloc((void **)&d_bad, sizeof *d_bad));
    XS_CHECK_CU(cudaMalloc((void **)&d_st, sizeof *d_st));
    XS_CHECK_CU(cudaMemset(d_st, 0, sizeof *d_st));
    __nv_bfloat16 *got = (__nv_bfloat16 *)malloc(s->nel * 2);
    uint64_t *tl = (uint64_t *)malloc((size_t)tiles * sizeof(uint64_t));
    unsigned char *split = (unsigned char *)malloc((size_t)tiles);
    const int kbs[] = {1, 2, 3, 5};
    for (int causal = 0; causal <= 1; causal++) {
        __nv_bfloat16 *local = run_local(s, causal, tiles, NULL, NULL);
        const double *ref = s->ref + (size_t)causal * s->nel;
        const int nqb = (s->seq + XS_ATTN_BM - 1) / XS_ATTN_BM;
        /* --tiny (racecheck): cases 0, 4, 8, 12 - parts of 1 key block on each grid, the
         * stores whole, in 3 and in 16 slices, and local output */
        for (int ci = 0; ci < 13; ci += tiny ? 4 : 1) {
            const int kb = kbs[ci % 4], gsel = ci / 4; /* ci 12: local output, kb 2 */
            const int grid = gsel == 0 || gsel == 3 ? (tiles < sm_count ? tiles : sm_count)
                             : gsel == 1            ? (tiles < 2 ? 1 : 2)
                                                    : 1;
            const int local_out = ci == 12;
            int nt = 0, ns = 0;
            XS_CHECK(xs_attn_kv_build(s->seq, H, causal, remote, grid, local_out ? 2 : kb, off, tk,
                                 cap, &nt, &ns));
            XS_CHECK(xs_attn_kv_check(s->seq, H, causal, grid, off, tk, ns));
            memset(split, 0, (size_t)tiles);
            for (int i = 0; i < nt; i++)
                split[tk[i].tile] |= tk[i].part >= 0;
            XS_CHECK_CU(cudaMemcpy(d_off, off, (size_t)(grid + 1) * sizeof(int), cudaMemcpyHostToDevice));
            XS_CHECK_CU(cudaMemcpy(d_tk, tk, (size_t)nt * sizeof(int4), cudaMemcpyHostToDevice));
            xs_attn_args a = base_args(s, causal);
            if (!local_out) {
                a.out = XS_ATTN_OUT_WINDOWS;
                a.rows_per_rank = rpr;
            }
            static const int slices[3] = {0, 3, 16}; /* stores sliced over the next task */
            a.split = slices[ci % 3];
            a.tasks = d_tk, a.task_off = d_off, a.part = d_part, a.part_flag = d_flag;
            a.signal = ++epoch;
            a.tile_ns = d_tile;
            a.status = d_st;
            XS_CHECK_CU(cudaMemset(d_tile, 0, (size_t)tiles * sizeof(uint64_t)));
            if (local_out)
                XS_CHECK(xs_attn_fill_word(s->o, s->nel * 2, 0xffffffffu, 0));
            else
                for (int r = 0; r < P; r++)
                    XS_CHECK(xs_attn_fill_word(tab->data[r], shard, 0xffffffffu, 0));
            XS_CHECK(xs_attn_fwd(&a, local_out ? NULL : tab, grid, 0));
            XS_CHECK_CU(cudaDeviceSynchronize());
            xs_devstatus hs;
            XS_CHECK_CU(cudaMemcpy(&hs, d_st, sizeof hs, cudaMemcpyDeviceToHost));
            /* the output, gathered into [seq, heads, 128] */
            if (local_out)
                XS_CHECK_CU(cudaMemcpy(got, s->o, s->nel * 2, cudaMemcpyDeviceToHost));
            else
                for (int r = 0; r < P; r++)
                    XS_CHECK_CU(cudaMemcpy(got + (size_t)r * nsh, tab->data[r], shard, cudaMemcpyDefault));
            size_t bad_whole = 0, bad_parts = 0, nparts = 0;
            double worst = 0;
            for (size_t i = 0; i < s->nel; i++) {
                const int row = (int)(i / ((size_t)H * XS_ATTN_D)), h = (int)(i / XS_ATTN_D) % H;
                const int t = (nqb - 1 - row / XS_ATTN_BM) * H + h;
                const unsigned short gb = *(const unsigned short *)&got[i];
                const unsigned short lb = *(const unsigned short *)&local[i];
                if (!split[t]) {
                    bad_whole += gb != lb;
                    continue;
                }
                nparts++;
                const double g = __bfloat162float(got[i]), l = __bfloat162float(local[i]);
                bad_parts += !(fabs(g - l) <= 1e-3 + fabs(l) / 64);
                const double e = fabs(g - ref[i]) / (ATOL + RTOL * fabs(ref[i]));
                worst = isnan(e) || e > worst ? (isnan(e) ? INFINITY : e) : worst;
            }
            const unsigned long long bad_flags =
                local_out ? 0 : missing_signals(tab, grid, a.signal, d_bad);
            XS_CHECK_CU(cudaMemcpy(tl, d_tile, (size_t)tiles * sizeof(uint64_t), cudaMemcpyDeviceToHost));
            int bad_stamps = 0;
            for (int t = 0; t < tiles; t++)
                bad_stamps += tl[t] == 0;
            XT_CHECK(hs.code == 0, "KV split seq %d P %d causal %d kb %d split %d grid %d: "
                     "device failure %u in CTA %u (detail %llu)", s->seq, P, causal, kb, a.split,
                     grid, hs.code, hs.block, hs.detail);
            XT_CHECK(bad_whole == 0 && bad_parts == 0 && worst <= 1.0, "KV split seq %d heads %d "
                     "causal %d P %d kb %d split %d grid %d%s: %zu values of whole tiles differ, "
                     "%zu of %zu in parts out of tolerance, worst %.3g of the reference "
                     "tolerance", s->seq, H, causal, P, kb, a.split, grid,
                     local_out ? " (local output)" : "", bad_whole, bad_parts, nparts, worst);
            XT_CHECK(bad_flags == 0 && bad_stamps == 0, "KV split seq %d P %d kb %d grid %d: "
                     "%llu signals missing, %d tiles unstamped", s->seq, P, kb, grid, bad_flags,
                     bad_stamps);
            if (hs.code) {
                XS_CHECK_CU(cudaMemset(d_st, 0, sizeof *d_st));
                break;
            }
        }
        free(local);
    }
    free(off), free(tk), free(got), free(tl), free(split);
    cudaFree(d_off), cudaFree(d_tk), cudaFree(d_part), cudaFree(d_flag), cudaFree(d_tile);
    cudaFree(d_bad), cudaFree(d_st);
    xs_win_close(ws);
}

/* A last part whose wait cannot end (lists the host check calls a deadlock, launched anyway,
 * with a 1 ms bound): the failure is recorded (XS_DEVERR_TIMEOUT, detail 2 << 32 | slot * 8 +
 * warp), the kernel ends, and the next run with good lists on the same buffers is clean. */
static void test_kv_timeout(void)
{
    const int seq = 256, H = 1, grid = 2;
    const size_t nel = (size_t)seq * H * XS_ATTN_D;
    void *q, *k, *v, *o;
    int *d_off;
    int4 *d_tk;
    float *d_part;
    uint64_t *d_flag;
    xs_devstatus *d_st;
    XS_CHECK_CU(cudaMalloc(&q, nel * 2));
    XS_CHECK_CU(cudaMalloc(&k, nel * 2));
    XS_CHECK_CU(cudaMalloc(&v, nel * 2));
    XS_CHECK_CU(cudaMalloc(&o, nel * 2));
    XS_CHECK_CU(cudaMalloc((void **)&d_off, 3 * sizeof(int)));
    XS_CHECK_CU(cudaMalloc((void **)&d_tk, 4 * sizeof(int4)));
    XS_CHECK_CU(cudaMalloc((void **)&d_part, 2 * XS_ATTN_KV_SLOT_BYTES));
    XS_CHECK_CU(cudaMalloc((void **)&d_flag, 2 * XS_ATTN_WARPS * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMemset(d_flag, 0, 2 * XS_ATTN_WARPS * sizeof(uint64_t)));
    XS_CHECK_CU(cudaMalloc((void **)&d_st, sizeof *d_st));
    XS_CHECK_CU(cudaMemset(d_st, 0, sizeof *d_st));
    XS_CHECK(xs_attn_fill_random(q, nel, 21, -2.f, 2.f, 0));
    XS_CHECK(xs_attn_fill_random(k, nel, 22, -2.f, 2.f, 0));
    XS_CHECK(xs_attn_fill_random(v, nel, 23, -1.f, 1.f, 0));
    /* 2 tiles of 4 key blocks, each in 2 parts; deadlocked: each CTA starts with a last part
     * whose other part is queued behind the other CTA's last part */
    const int off[3] = {0, 2, 4};
    const xs_attn_kvtask p00 = xs_attn_kvtask_of(0, 0, 2, XS_ATTN_KV_PART(0, 0, 2));
    const xs_attn_kvtask p01 = xs_attn_kvtask_of(0, 2, 4, XS_ATTN_KV_PART(0, 1, 2));
    const xs_attn_kvtask p10 = xs_attn_kvtask_of(1, 0, 2, XS_ATTN_KV_PART(1, 0, 2));
    const xs_attn_kvtask p11 = xs_attn_kvtask_of(1, 2, 4, XS_ATTN_KV_PART(1, 1, 2));
    const xs_attn_kvtask dead[4] = {p01, p10, p11, p00}, good[4] = {p00, p10, p01, p11};
    XT_CHECK(xs_attn_kv_check(seq, H, 0, grid, off, dead, 2) == XS_EINVAL,
             "the deadlocked lists pass the host check");
    XT_CHECK(xs_attn_kv_check(seq, H, 0, grid, off, good, 2) == XS_OK, "good lists refused: %s",
             xs_errmsg());
    XS_CHECK_CU(cudaMemcpy(d_off, off, sizeof off, cudaMemcpyHostToDevice));
    xs_attn_args a;
    memset(&a, 0, sizeof a);
    a.q = q, a.k = k, a.v = v, a.o = o;
    a.seq = seq, a.heads = H;
    a.out = XS_ATTN_OUT_LOCAL;
    a.tasks = d_tk, a.task_off = d_off, a.part = d_part, a.part_flag = d_flag;
    a.status = d_st;
    for (int pass = 0; pass < 2; pass++) {
        XS_CHECK_CU(cudaMemcpy(d_tk, pass == 0 ? dead : good, 4 * sizeof(int4), cudaMemcpyHostToDevice));
        a.signal = 0x9000 + pass;
        a.timeout_ns = pass == 0 ? 1000000 : 0; /* 1 ms, then the default */
        XS_CHECK(xs_attn_fwd(&a, NULL, grid, 0));
        XS_CHECK_CU(cudaDeviceSynchronize()); /* returns: no CTA is left waiting */
        xs_devstatus hs;
        XS_CHECK_CU(cudaMemcpy(&hs, d_st, sizeof hs, cudaMemcpyDeviceToHost));
        if (pass == 0) {
            XT_CHECK(hs.code == XS_DEVERR_TIMEOUT && (hs.detail >> 32) == 2 &&
                         (hs.detail & 0xffffffffu) < 2 * XS_ATTN_WARPS,
                     "KV split deadlock: status %u in CTA %u (detail %llx), expected a timeout "
                     "(%u) naming a slot's flag", hs.code, hs.block, hs.detail,
                     XS_DEVERR_TIMEOUT);
            XS_CHECK_CU(cudaMemset(d_st, 0, sizeof *d_st));
        } else {
            XT_CHECK(hs.code == 0, "after a KV split timeout, a clean run: status %u", hs.code);
        }
    }
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o), cudaFree(d_off), cudaFree(d_tk);
    cudaFree(d_part), cudaFree(d_flag), cudaFree(d_st);
}

/* As a second rank of a group that sends 2*heads per destination row: this rank's heads land
 * at [heads, 2*heads) of each row, the other half of every row stays untouched. */
static void test_fused_offset(const shape *s, int P)
{
    const int rpr = s->seq / P, H = s->heads, tiles = xs_attn_tiles(s->seq, H);
    const size_t row = (size_t)2 * H * XS_ATTN_ROW_BYTES, shard = (size_t)rpr * row;
    xs_winset *ws = open_virtual(P, shard, tiles);
    if (!ws)
        return;
    const xs_wintab *tab = xs_win_table(ws);
    __nv_bfloat16 *local = run_local(s, 1, tiles, NULL, NULL);
    xs_attn_args a = base_args(s, 1);
    a.out = XS_ATTN_OUT_WINDOWS;
    a.rows_per_rank = rpr;
    a.dst_heads = 2 * H;
    a.dst_head0 = H;
    a.split = 5;
    for (int r = 0; r < P; r++)
        XS_CHECK(xs_attn_fill_word(tab->data[r], shard, 0xffffffffu, 0));
    XS_CHECK(xs_attn_fwd(&a, tab, tiles < 2 ? 1 : 2, 0));
    XS_CHECK_CU(cudaDeviceSynchronize());
    unsigned char *got = (unsigned char *)malloc(shard);
    size_t ours_bad = 0, other_bad = 0, half = (size_t)H * XS_ATTN_ROW_BYTES;
    for (int p = 0; p < P; p++) {
        XS_CHECK_CU(cudaMemcpy(got, tab->data[p], shard, cudaMemcpyDefault));
        for (int i = 0; i < rpr; i++) {
            const unsigned char *want = (const unsigned char *)local + (size_t)(p * rpr + i) * half;
            ours_bad += memcmp(got + i * row + half, want, half) != 0;
            for (size_t b = 0; b < half; b++)
                other_bad += got[i * row + b] != 0xff;
        }
    }
    XT_CHECK(ours_bad == 0, "head offset: %zu rows differ at their destinations", ours_bad);
    XT_CHECK(other_bad == 0, "head offset: %zu bytes of other ranks' heads overwritten",
             other_bad);
    free(got);
    free(local);
    xs_win_close(ws);
}

/* Slice placement (host side of the functions the kernel uses): the kernel's walk - compare j
 * with the next slice's iteration, advance xs_attn_slicewalk (no division) only there - issues,
 * at every iteration of a tile, exactly the units the definition asks for: ceil((j+1)*n/nkb)
 * slices by iteration j (xs_attn_slices_due; slice s at floor(s*nkb/n)), every unit once, all of
 * them by the last iteration, and the walk's next iteration is xs_attn_slice_iter's. */
static void test_slices(void)
{
    int bad = 0, cases = 0;
    for (int n = 1; n <= XS_ATTN_MAX_SPLIT && bad < 5; n += 1 + n / 8)
        for (int nkb = 1; nkb <= 1100 && bad < 5; nkb += 1 + nkb / 5) {
            const int upi = (XS_ATTN_UNITS_PER_WARP + n - 1) / n;
            int pend = 0, due_j = 0;
            xs_attn_slicewalk sw;
            xs_attn_slicewalk_init(&sw, n, nkb);
            for (int j = 0; j < nkb; j++) {
                if (j >= due_j) { /* as in xs_attn_cta */
                    const int slices = xs_attn_slicewalk_due(&sw, j);
                    bad += slices != xs_attn_slices_due(n, nkb, j);
                    int u1 = slices * upi < XS_ATTN_UNITS_PER_WARP ? slices * upi
                                                                   : XS_ATTN_UNITS_PER_WARP;
                    if (u1 > pend)
                        pend = u1;
                    due_j = pend < XS_ATTN_UNITS_PER_WARP ? xs_attn_slicewalk_next(&sw) : INT_MAX;
                    if (due_j < INT_MAX &&
                        (slices >= n || due_j != xs_attn_slice_iter(n, nkb, slices)))
                        bad++; /* the walk disagrees with the definition of the next slice */
                    if (due_j <= j)
                        bad++; /* the walk would stall on one iteration */
                }
                int want = 0; /* the definition: slices s with floor(s*nkb/n) <= j */
                for (int s2 = 0; s2 < n; s2++)
                    want += (long long)s2 * nkb / n <= j;
                want = want * upi < XS_ATTN_UNITS_PER_WARP ? want * upi : XS_ATTN_UNITS_PER_WARP;
                bad += pend != want;
                cases++;
            }
            bad += pend != XS_ATTN_UNITS_PER_WARP;
        }
    XT_CHECK(bad == 0 && cases > 1000, "slice placement: %d violations in %d cases", bad, cases);
}

/* The tile orders (host side of the functions the kernel uses): for every grid, each order is a
 * permutation of the tiles; a CTA computes the snake's tiles; SNAKE walks them in increasing
 * tile index; EARLY walks its tiles below `remote` first, in decreasing index, then the rest in
 * increasing index. */
static void test_orders(void)
{
    int bad = 0, cases = 0;
    for (int tiles = 1; tiles <= 300 && bad == 0; tiles += 1 + tiles / 16)
        for (int grid = 1; grid <= tiles && bad == 0; grid += 1 + grid / 4) {
            const int remotes[4] = {0, tiles / 3, tiles - 1, tiles};
            for (int ri = 0; ri < 4 && bad == 0; ri++) {
                int remote = remotes[ri];
                for (int order = XS_ATTN_ORDER_SNAKE; order <= XS_ATTN_ORDER_EARLY; order++) {
                    unsigned char *seen = (unsigned char *)calloc((size_t)tiles, 1);
                    cases++;
                    for (int b = 0; b < grid; b++) {
                        int n = xs_attn_cta_count(tiles, grid, b), prev = -1, phase = 0;
                        for (int k = 0; k < n; k++) {
                            int t = xs_attn_cta_tile(order, tiles, remote, grid, b, k);
                            if (t < 0 || t >= tiles || seen[t]++) {
                                bad++;
                                break;
                            }
                            int w = t / grid; /* the snake's tile of b in its wave */
                            bad += t != w * grid + ((w & 1) ? grid - 1 - b : b);
                            if (order == XS_ATTN_ORDER_EARLY && t < remote) {
                                bad += phase != 0 || (prev >= 0 && t >= prev);
                            } else {
                                if (order == XS_ATTN_ORDER_EARLY && phase == 0) {
                                    phase = 1; /* the first tile at or past remote */
                                    prev = -1;
                                }
                                bad += prev >= 0 && t <= prev;
                            }
                            prev = t;
                        }
                    }
                    for (int t = 0; t < tiles; t++)
                        bad += !seen[t];
                    if (bad)
                        printf("test_attn: order %d, %d tiles, grid %d, %d remote: not the "
                               "permutation described\n", order, tiles, grid, remote);
                    free(seen);
                }
            }
        }
    XT_CHECK(bad == 0 && cases > 100, "tile orders: %d violations in %d cases", bad, cases);
    /* the remote prefix: rank 0 keeps [0, rpr); a block with a row at or past rpr crosses */
    XT_CHECK(xs_attn_remote_tiles(384, 3, 128) == 6, "remote tiles of 384 rows, 128 per rank: %d",
             xs_attn_remote_tiles(384, 3, 128));
    XT_CHECK(xs_attn_remote_tiles(200, 3, 50) == 6, "remote tiles of 200 rows, 50 per rank: %d",
             xs_attn_remote_tiles(200, 3, 50));
    XT_CHECK(xs_attn_remote_tiles(4096, 8, 512) == 28 * 8, "remote tiles of 4096 rows, 512 per "
             "rank: %d", xs_attn_remote_tiles(4096, 8, 512));
    XT_CHECK(xs_attn_remote_tiles(129, 1, 129) == 0, "remote tiles with one rank: %d",
             xs_attn_remote_tiles(129, 1, 129));
}

/* The benchmark's fp32 reference rows agree with the fp64 CPU reference. */
static void test_ref_rows(const shape *s)
{
    const int n = 6;
    int rows[2 * n] = {0, 0, s->seq - 1, s->heads - 1, s->seq / 2, 0,
                       1, s->heads / 2, s->seq - 2 > 0 ? s->seq - 2 : 0, 0, 3 % s->seq, 0};
    int *d_rows;
    float *d_ref, *d_got;
    XS_CHECK_CU(cudaMalloc((void **)&d_rows, sizeof rows));
    XS_CHECK_CU(cudaMalloc((void **)&d_ref, n * XS_ATTN_D * sizeof(float)));
    XS_CHECK_CU(cudaMalloc((void **)&d_got, n * XS_ATTN_D * sizeof(float)));
    XS_CHECK_CU(cudaMemcpy(d_rows, rows, sizeof rows, cudaMemcpyHostToDevice));
    for (int causal = 0; causal <= 1; causal++) {
        float ref[n * XS_ATTN_D];
        XS_CHECK(xs_attn_ref_rows(s->q, s->k, s->v, s->o, s->seq, s->heads, causal, 0.f, d_rows, n,
                             d_ref, d_got, 0));
        XS_CHECK_CU(cudaMemcpy(ref, d_ref, sizeof ref, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (int i = 0; i < n; i++)
            for (int x = 0; x < XS_ATTN_D; x++) {
                double want = s->ref[causal * s->nel +
                                     ((size_t)rows[2 * i] * s->heads + rows[2 * i + 1]) *
                                         XS_ATTN_D + x];
                worst = fmax(worst, fabs(ref[i * XS_ATTN_D + x] - want) /
                                        (1e-5 + 1e-4 * fabs(want)));
            }
        XT_CHECK(worst <= 1.0, "fp32 reference rows causal %d: %.2fx the 1e-5 + 1e-4|ref| "
                 "tolerance", causal, worst);
    }
    cudaFree(d_rows);
    cudaFree(d_ref);
    cudaFree(d_got);
}

static void test_helpers(void)
{
    const size_t n = 4096;
    __nv_bfloat16 *d, h[n];
    XS_CHECK_CU(cudaMalloc((void **)&d, n * 2));
    XS_CHECK(xs_attn_fill_random(d, n, 7, -2.f, 2.f, 0));
    XS_CHECK_CU(cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost));
    int out = 0, zeros = 0;
    for (size_t i = 0; i < n; i++) {
        float f = __bfloat162float(h[i]);
        out += !(f >= -2.f && f <= 2.f);
        zeros += f == 0.f;
    }
    XT_CHECK(out == 0 && zeros < 16, "random fill: %d values outside [-2, 2], %d zeros", out,
             zeros);
    unsigned long long *bad, hb = 0;
    void *d2;
    XS_CHECK_CU(cudaMalloc((void **)&bad, sizeof *bad));
    XS_CHECK_CU(cudaMalloc(&d2, n * 2));
    XS_CHECK_CU(cudaMemcpy(d2, d, n * 2, cudaMemcpyDeviceToDevice));
    XS_CHECK_CU(cudaMemset((char *)d2 + 160, 0x5a, 1));       /* unit 10 */
    XS_CHECK_CU(cudaMemset((char *)d2 + 16 * 300 + 15, 1, 1)); /* unit 300 */
    XS_CHECK_CU(cudaMemset(bad, 0, sizeof *bad));
    XS_CHECK(xs_attn_compare(d, d2, n * 2, bad, 0));
    XS_CHECK_CU(cudaMemcpy(&hb, bad, sizeof hb, cudaMemcpyDeviceToHost));
    XT_CHECK(hb == 2, "compare counted %llu differing units, expected 2", hb);
    XT_CHECK(xs_attn_compare(d, d2, 24, bad, 0) == XS_EINVAL, "compare of 24 bytes accepted");
    /* non-finite count: the random buffer has none; three NaN/Inf planted */
    const unsigned short planted[3] = {0x7fc0, 0xff80, 0xffff}; /* NaN, -Inf, NaN */
    for (int i = 0; i < 3; i++)
        XS_CHECK_CU(cudaMemcpy((unsigned short *)d + 100 * i + 5, &planted[i], 2,
                       cudaMemcpyHostToDevice));
    XS_CHECK_CU(cudaMemset(bad, 0, sizeof *bad));
    XS_CHECK(xs_attn_count_nonfinite(d, n, bad, 0));
    XS_CHECK_CU(cudaMemcpy(&hb, bad, sizeof hb, cudaMemcpyDeviceToHost));
    XT_CHECK(hb == 3, "non-finite count %llu, expected 3", hb);
    XT_CHECK(xs_attn_fill_word(d, 8, 0, 0) == XS_EINVAL, "fill of 8 bytes accepted");
    cudaFree(d);
    cudaFree(d2);
    cudaFree(bad);
}

static void test_bad_input(const shape *s)
{
    xs_attn_args a = base_args(s, 0);
    int tiles = xs_attn_tiles(s->seq, s->heads);
    XT_CHECK(xs_attn_fwd(&a, NULL, 0, 0) == XS_EINVAL, "grid 0 accepted");
    XT_CHECK(xs_attn_fwd(&a, NULL, tiles + 1, 0) == XS_EINVAL, "grid > tiles accepted");
    a.seq = 0;
    XT_CHECK(xs_attn_fwd(&a, NULL, 1, 0) == XS_EINVAL, "seq 0 accepted");
    a = base_args(s, 0);
    a.heads = 0;
    XT_CHECK(xs_attn_fwd(&a, NULL, 1, 0) == XS_EINVAL, "heads 0 accepted");
    a = base_args(s, 0);
    a.split = XS_ATTN_MAX_SPLIT + 1;
    XT_CHECK(xs_attn_fwd(&a, NULL, 1, 0) == XS_EINVAL, "split %d accepted", a.split);
    a = base_args(s, 0);
    a.order = 2;
    XT_CHECK(xs_attn_fwd(&a, NULL, 1, 0) == XS_EINVAL, "order %d accepted", a.order);
    a = base_args(s, 0);
    a.q = (const char *)s->q + 2;
    XT_CHECK(xs_attn_fwd(&a, NULL, 1, 0) == XS_EINVAL, "misaligned q accepted");
    a = base_args(s, 0);
    a.o = NULL;
    XT_CHECK(xs_attn_fwd(&a, NULL, 1, 0) == XS_EINVAL, "NULL local output accepted");
    a = base_args(s, 0);
    a.out = XS_ATTN_OUT_WINDOWS;
    a.rows_per_rank = s->seq;
    XT_CHECK(xs_attn_fwd(&a, NULL, 1, 0) == XS_EINVAL, "windows without a table accepted");
    xs_wintab tab;
    memset(&tab, 0, sizeof tab);
    tab.nranks = 2;
    tab.bytes = (size_t)s->seq * s->heads * XS_ATTN_ROW_BYTES;
    tab.data[0] = tab.data[1] = (char *)s->o;
    a.rows_per_rank = s->seq / 2 - 1; /* 2 ranks no longer cover the sequence */
    XT_CHECK(xs_attn_fwd(&a, &tab, 1, 0) == XS_EINVAL, "uncovered rows accepted");
    a.rows_per_rank = s->seq;
    tab.bytes = 16;
    XT_CHECK(xs_attn_fwd(&a, &tab, 1, 0) == XS_EINVAL, "too small a window accepted");
    tab.bytes = (size_t)s->seq * s->heads * XS_ATTN_ROW_BYTES;
    a.dst_heads = s->heads;
    a.dst_head0 = 1; /* this rank's heads would run past the destination row */
    XT_CHECK(xs_attn_fwd(&a, &tab, 1, 0) == XS_EINVAL, "heads past the destination accepted");
    a.dst_heads = 0, a.dst_head0 = 0;
    a.signal = 1; /* no flags in the table */
    XT_CHECK(xs_attn_fwd(&a, &tab, 1, 0) == XS_EINVAL, "signal without flags accepted");
    /* couriers: windows, split 0, a signal, a sync buffer, compute CTAs left, a sane pace */
    uint64_t *d_sync;
    XS_CHECK_CU(cudaMalloc((void **)&d_sync, (size_t)(2 * tiles + 8) * sizeof(uint64_t)));
    uint64_t flags[2][8];
    tab.nflags = 8, tab.flags[0] = flags[0], tab.flags[1] = flags[1]; /* validated, not used */
    a.signal = 1, a.couriers = 2, a.sync = d_sync;
    XT_CHECK(xs_attn_validate(&a, &tab, 3) == XS_OK, "a valid courier launch refused: %s",
             xs_errmsg());
    a.couriers = XS_ATTN_MAX_COURIERS + 1;
    XT_CHECK(xs_attn_fwd(&a, &tab, 3, 0) == XS_EINVAL, "%d couriers accepted", a.couriers);
    a.couriers = -1;
    XT_CHECK(xs_attn_fwd(&a, &tab, 3, 0) == XS_EINVAL, "-1 couriers accepted");
    a.couriers = 2;
    XT_CHECK(xs_attn_fwd(&a, &tab, 2, 0) == XS_EINVAL, "couriers leaving no compute CTA accepted");
    XT_CHECK(xs_attn_fwd(&a, &tab, tiles + 3, 0) == XS_EINVAL, "more compute CTAs than tiles "
             "accepted");
    a.split = 4;
    XT_CHECK(xs_attn_fwd(&a, &tab, 3, 0) == XS_EINVAL, "couriers with split 4 accepted");
    a.split = 0, a.signal = 0;
    XT_CHECK(xs_attn_fwd(&a, &tab, 3, 0) == XS_EINVAL, "couriers without a signal accepted");
    a.signal = 1, a.sync = NULL;
    XT_CHECK(xs_attn_fwd(&a, &tab, 3, 0) == XS_EINVAL, "couriers without a sync buffer accepted");
    a.sync = d_sync, a.pace_bytes_per_ns = -1.f;
    XT_CHECK(xs_attn_fwd(&a, &tab, 3, 0) == XS_EINVAL, "negative pace accepted");
    a.pace_bytes_per_ns = 0.001f; /* below XS_ATTN_MIN_PACE per courier */
    XT_CHECK(xs_attn_fwd(&a, &tab, 3, 0) == XS_EINVAL, "pace %g accepted",
             (double)a.pace_bytes_per_ns);
    a.pace_bytes_per_ns = 0.f, a.out = XS_ATTN_OUT_LOCAL;
    XT_CHECK(xs_attn_fwd(&a, NULL, 3, 0) == XS_EINVAL, "couriers with local output accepted");
    /* KV-split lists: split 0, a signal, offsets, partials and their flags (pointers checked
     * only: the lists are the host's, xs_attn_kv_check) */
    a.couriers = 0, a.sync = NULL;
    a.tasks = (const int4 *)d_sync, a.task_off = (const int *)d_sync;
    a.part = (float *)d_sync, a.part_flag = d_sync;
    XT_CHECK(xs_attn_validate(&a, NULL, 2) == XS_OK, "valid KV-split arguments refused: %s",
             xs_errmsg());
    a.split = 2; /* slices ride on the next task's iterations */
    XT_CHECK(xs_attn_validate(&a, NULL, 2) == XS_OK, "KV split with split 2 refused: %s",
             xs_errmsg());
    a.split = 0, a.signal = 0;
    XT_CHECK(xs_attn_fwd(&a, NULL, 2, 0) == XS_EINVAL, "KV split without a signal accepted");
    a.signal = 1, a.part = NULL;
    XT_CHECK(xs_attn_fwd(&a, NULL, 2, 0) == XS_EINVAL, "KV split without partials accepted");
    a.part = (float *)d_sync, a.task_off = NULL;
    XT_CHECK(xs_attn_fwd(&a, NULL, 2, 0) == XS_EINVAL, "KV split without offsets accepted");
    a.task_off = (const int *)d_sync;
    XT_CHECK(xs_attn_fwd(&a, NULL, tiles + 1, 0) == XS_EINVAL, "KV split grid over the tiles "
             "accepted");
    cudaFree(d_sync);
    XT_CHECK(cudaGetLastError() == cudaSuccess, "a rejected launch left a CUDA error");
}

int main(int argc, char **argv)
{
    /* --tiny (after the seed): two shapes, one fused group, for compute-sanitizer's racecheck
     * (tests/gpu/sanitize.sh), which is slow on this shared-memory-heavy kernel */
    int tiny = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--tiny")) {
            fprintf(stderr, "usage: test_attn [seed] [--tiny]\n");
            return 2;
        }
        tiny = 1;
    }
    xt_seed("test_attn", argc > 1 ? argv[1] : NULL);
    xs_gpu_info gi;
    xs_status st = xs_gpu_open(0, &gi);
    XT_CHECK(st == XS_OK, "no GPU: %s", xs_errmsg());
    if (st != XS_OK)
        return xt_done();
    printf("test_attn: %s, %d SMs\n", gi.name, gi.sm_count);
    test_orders();
    test_slices();

    /* (seq, heads): tails of every kind against BLOCK_M = 128 and BLOCK_N = 64 */
    const int shapes[][2] = {{1, 1}, {7, 2}, {64, 1}, {65, 3}, {128, 2}, {129, 1},
                             {200, 3}, {257, 2}, {384, 3}, {1024, 2}};
    const int tiny_shapes[][2] = {{65, 3}, {200, 3}};
    const size_t nshapes = tiny ? 2 : sizeof shapes / sizeof shapes[0];
    shape s;
    for (size_t i = 0; i < nshapes; i++) {
        const int *sh = tiny ? tiny_shapes[i] : shapes[i];
        shape_init(&s, sh[0], sh[1]);
        test_local(&s, gi.sm_count);
        if (s.seq == 384 || s.seq == 1024) {
            test_kv(&s, s.seq == 384 ? 3 : 4, gi.sm_count, tiny);
            if (s.seq == 1024) {
                shape_free(&s);
                continue;
            }
        }
        if (s.seq == 200 || s.seq == 129)
            test_kv(&s, s.seq == 200 ? 4 : 3, gi.sm_count, tiny); /* tiles straddle ranks */
        if (s.seq == 384) {
            test_fused(&s, 3, gi.sm_count);  /* 128 rows per rank: tiles align with ranks */
            test_fused(&s, 1, gi.sm_count);  /* everything local */
            test_couriers(&s, 3, gi.sm_count, 0);
            test_couriers(&s, 1, gi.sm_count, 0); /* no remote tile: couriers only signal */
            test_ref_rows(&s);
            test_bad_input(&s);
        }
        if (s.seq == 200) {
            test_fused(&s, 4, gi.sm_count);  /* 50 rows per rank: tiles straddle ranks */
            test_fused_offset(&s, 2);
            test_couriers(&s, 4, gi.sm_count, 0); /* a courier tile's rows go to 3 ranks */
            test_couriers(&s, 2, gi.sm_count, 1); /* real peers' head layout */
        }
        if (s.seq == 129) {
            test_fused(&s, 3, gi.sm_count);  /* 43 rows per rank, a one-row last tile */
            test_couriers(&s, 3, gi.sm_count, 0);
        }
        shape_free(&s);
    }
    test_helpers();
    if (!tiny) {
        test_courier_timeout();
        test_kv_timeout();
    }
    return xt_done();
}
