// SPDX-License-Identifier: Apache-2.0
/*
 * tp_sm90.cuh - the TP task kernel on the Hopper tile engine (cuda/gemm_sm90.cuh): the same task
 * lists, windows, flags, waits and failure reporting as tp_kernel in tp_kernel.cuh (included
 * from there, after the mma.sync kernel, whose device helpers it shares), with the GEMM tiles on wgmma + TMA.
 * docs/TP.md "Engines" explains what differs; xs_tp_set_engine chooses it.
 *
 * Roles (384 threads, one CTA per SM, 213 KB of shared memory):
 *   producer, warp 0 of warpgroup 2: walks the CTA's task list (tasks b, b + grid, ...) and, for
 *     each TILE, waits (bounded, the 32 lanes polling in parallel, as tp_tile_wait_warp does in
 *     the mma kernel) for the tile's inputs - the all-gather chunks its 128 A rows span, or the
 *     GEMM 1 tiles of its row block (mlp) - then acquires, fences the async proxy (TMA reads data
 *     other agents wrote through the generic proxy) and issues the tile's k-tiles by TMA into the
 *     ring. It runs ahead of the consumers by up to STAGES k-tiles; warps 2 and 3 of
 *     warpgroup 2 leave after setmaxnreg.
 *   consumers, warpgroups 0 and 1 (256 threads): walk the same list; TILE: wgmma main loop, the
 *     engine's epilogue straight to each row's destination (local output, SwiGLU h, or the owner's
 *     slot in the owner's window through the window table, row- or tile-major as the context's
 *     slot layout: tp_slot_tile_at), then the tile's signal; PUSH: the chunks to the peer, then
 *     their flags; REDUCE: wait for the P source flags, sum.
 *   signal warp, warp 1 of warpgroup 2: raises the flags the consumers queue (tp90_sq), one
 *     __threadfence_system + st.release.sys per batch, so that no consumer waits in the fence.
 * Signals: after the payload, a 256-thread barrier, then consumer thread 0 queues the flag for
 * the signal warp, which raises it at once (xs_tp_run_opts.eager_flags: thread 0 raises it
 * itself). Unlike the mma kernel's lazy queue (raised at the CTA's next release point), nothing
 * here holds a flag back: the signal warp waits for nothing but its fences, so the deadlock
 * argument of tp_kernel.cuh holds as if every flag were raised right after its payload. The stream bits
 * of an order (DEFER, SPREAD) are not executed: xs_tp_run refuses such orders for this engine.
 *
 * Deadlock freedom: the producer waits only for tasks earlier in the list than the tile it is
 * about to load; the consumers of the same CTA never need the producer for tasks before that
 * tile (every earlier tile's k-tiles are already issued), so they finish them, and the argument
 * of tp_kernel.cuh (the earliest unfinished task waits only on finished ones) carries over.
 *
 * Couriers (tp90k_cfg, a second instantiation, so that the default tp90_cfg kernel carries no
 * courier code): the last k.ncour CTAs branch off before the engine's init and
 * run tp90_courier; the first k.ncomp CTAs run the list (built for k.ncomp CTAs) as above, but
 * a remote owner's tile goes to the HBM outbox and raises a gpu-scope ready flag instead of the
 * owner's signal. docs/TP.md "Couriers (sm90)".
 *
 * Failure: every dependency wait is bounded by a.timeout_ns (xs_devfail records the first
 * failure; the other CTAs see it and stop). A producer that gives up at tile task j writes
 * s_abort_at = j, then completes the tile's k-tiles' "full" barriers without data, so the
 * consumers' main loop of task j returns; every consumer then reads s_abort_at (written before
 * those arrivals, so all 256 see it) and stops - uniformly, which the named barriers need.
 * Consumers that give up (a reduction's wait) raise s_abort_c; the producer checks it in every
 * ring wait and stops. Before it leaves, the producer waits until its last STAGES issued k-tiles
 * have landed: no TMA may write into the shared memory of an exited CTA. Ring waits that can only
 * expire through a protocol bug trap (as gemm_sm90.cuh's do) after timeout + 10 s.
 */
#ifndef XSTAGE_TP_SM90_CUH
#define XSTAGE_TP_SM90_CUH

#include "gemm_sm90.cuh"

/* The engine's 128 x 256 x 64 tiles, 4 stages, 2 consumer warpgroups; the producer keeps 56
 * registers instead of 40 (its bounded waits over the chunk flags spilled at 40; the consumers
 * need about 160 of their 224). The pool is unchanged: 56 * 128 + 224 * 256 = 168 * 384. */
struct tp90_cfg : xs_gemm90_cfg<4> {
    static constexpr int PRODUCER_REGS = 56, CONSUMER_REGS = 224;
    static constexpr bool COURIERS = false; /* the last CTAs of the grid are couriers */
};
typedef tp90_cfg TP90C;
/* The same kernel with courier CTAs (xs_tp_set_couriers; docs/TP.md "Couriers (sm90)"): a
 * separate instantiation, so that the default kernel's code stays what it was. */
struct tp90k_cfg : tp90_cfg {
    static constexpr bool COURIERS = true;
};
typedef tp90k_cfg TP90K;
static_assert(TP90C::BM == XS_TP_BM && TP90C::BN == XS_TP_BN, "xstage_tp.h tile sizes");
static_assert(TP90C::BK == XS_TP_SPLIT_BK, "xstage_tp.h split depth");
static_assert(TP90C::PRODUCER_REGS * 128 + TP90C::CONSUMER_REGS * 256 <= 168 * 384,
              "setmaxnreg pool of a 384-thread CTA at 168 registers");

/* The tensor maps of the run's GEMMs (A and B of GEMM 0 and 1; GEMM 1's zeros when there is
 * none). Encoded per launch on the host: GEMM 0's A is the gathered buffer in the window of the
 * table the run uses (fused or local control). */
typedef struct {
    CUtensorMap a[2], b[2];
} tp90_maps;

/* What the courier instantiation needs besides tp_args (a fourth kernel parameter, so that
 * tp_args and the mma kernel's parameters do not change; unused by the default kernel). */
typedef struct {
    int ncomp;                 /* compute CTAs, 0 .. ncomp - 1: tasks b, b + ncomp, ... */
    int ncour;                 /* courier CTAs, ncomp .. ncomp + ncour - 1 (the grid's last) */
    const int *walk;           /* [nwalk] the pushes (< 0, XS_TP_WALK_PUSH), then the list
                                  positions of the remote reduce-scatter tiles in increasing
                                  order (xs_tp_order_walk); courier c takes entries c,
                                  c + ncour, ... */
    int nwalk;
    char *outbox;              /* [P - 1][slot_bytes] this rank's partials of the other owners'
                                  rows, owner (me + 1 + j) % P in slot j, tile-major (one
                                  contiguous block per tile, xs_tp_slot_tile) */
    unsigned long long slot_bytes;
    uint64_t *ready;           /* [P - 1][t_own] outbox tile (j, t) written: the launch's epoch
                                  (one array per window table, so a stale value is always
                                  smaller) */
    float pace_bytes_per_ns;   /* each courier's share of the pace (xs_tp_set_courier_pace);
                                  0 = unpaced. Stores from a few SMs above R backlog the
                                  stage and slow every SM's loads to 0.07-0.63; paced at
                                  0.74-1.0 of the link they cost no SM anything (the store
                                  probe of docs/TP.md "Couriers (sm90)") */
    float *split;              /* [TP_SPLIT_SLOTS][TP_SPLIT_BYTES / 4] split parts' fp32
                                  accumulators (TP_T_SPLIT; docs/TP.md "Split first steps") */
    uint64_t *split_ready;     /* [TP_SPLIT_SLOTS] a part is in its slot: the launch's epoch */
} tp90_cour;

/* tp_reduce's thread geometry for the 256 consumer threads (threadIdx.x 0..255). */
struct tp90_red {
    static constexpr int BM = XS_TP_BM, BN = XS_TP_BN, THREADS = 256;
};

/* Named barrier ids, each with one fixed set of participants: 0 __syncthreads (all 384, once,
 * in xs_gemm90_init); 1, 2 the engine's epilogue (128 each, one consumer warpgroup); 3 the 256
 * consumers, the aligned bar.sync: every instance is reached by all its participants at the
 * same instruction (the consumers' control flow is uniform). */
#define TP90_BAR 3 /* named barrier of the 256 consumer threads */

XS_DEV void tp90_consumer_bar(void) { asm volatile("bar.sync 3, 256;\n" ::: "memory"); }

/* Order this thread's generic-proxy global accesses before later async-proxy (TMA) accesses. */
XS_DEV void tp90_fence_proxy_global(void)
{
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

/* The signal queue: flags whose payload is stored, raised by the signal warp (warp 1 of the
 * producer warpgroup) so that no consumer waits in the system-scope fence (on the PCIe path the
 * fence waits until the CTA's earlier stores have left the GPU: about Q/R = 13 us under a
 * sustained stream, docs/TP.md "Lazy signals"). Consumer thread 0 appends after the barrier that
 * follows the payload (st.release.cta of the head); the signal warp's lane 0 takes every entry
 * there (ld.acquire.cta), fences once for the batch (__threadfence_system), raises them
 * (st.release.sys; the release is cumulative over the payload, which the CTA barrier and the
 * acquire ordered before it) and frees the slots (st.release.cta of the tail). The signal warp
 * waits for nothing but fences, so a queued flag is always raised soon: a CTA whose producer
 * waits for one of its own queued flags (a push's chunk) cannot deadlock.
 * xs_tp_run_opts.eager_flags: consumer thread 0 raises each flag itself (fence included). */
#define TP90_SQ 16
typedef struct {
    uint64_t *flag[TP90_SQ];
    uint64_t *shadow[TP90_SQ]; /* raised right after its flag (tp_args.ag_shadow), or NULL */
    unsigned int head;         /* entries appended (consumer thread 0) */
    unsigned int tail;         /* entries raised (signal warp) */
    unsigned int done;         /* 1: the consumers have appended their last entry */
} tp90_sq;

/* The queues' shared words are accessed only through atomics: acquire reads and release writes
 * of head, tail and done, relaxed exchanges of the entries (ordered by head's release and
 * acquire). Plain ld.acquire / st.release would order the same, but compute-sanitizer racecheck
 * does not count them as synchronisation and reported every hand-over as a hazard on the
 * H200 (bench/results/tp/); it leaves atomics out. */
XS_DEV unsigned int tp90_ld_acquire_cta(const unsigned int *p)
{
    unsigned int v;
    asm volatile("atom.acquire.cta.shared.or.b32 %0, [%1], 0;"
                 : "=r"(v)
                 : "r"(xs_smem_u32(p))
                 : "memory");
    return v;
}

XS_DEV unsigned int tp90_st_release_cta(unsigned int *p, unsigned int v) /* returns the old value */
{
    unsigned int old;
    asm volatile("atom.release.cta.shared.exch.b32 %0, [%1], %2;"
                 : "=r"(old)
                 : "r"(xs_smem_u32(p)), "r"(v)
                 : "memory");
    return old;
}

/* A queue entry (a flag address), written by the queue's one writer before it releases head and
 * read by the signal warp after it acquired head. */
XS_DEV unsigned long long tp90_sq_put(uint64_t **slot, uint64_t *v) /* returns the old entry */
{
    unsigned long long old;
    asm volatile("atom.relaxed.cta.shared.exch.b64 %0, [%1], %2;"
                 : "=l"(old)
                 : "r"(xs_smem_u32(slot)), "l"((unsigned long long)v)
                 : "memory");
    return old;
}

XS_DEV uint64_t *tp90_sq_get(uint64_t *const *slot)
{
    unsigned long long v;
    asm volatile("atom.relaxed.cta.shared.or.b64 %0, [%1], 0;"
                 : "=l"(v)
                 : "r"(xs_smem_u32(slot))
                 : "memory");
    return (uint64_t *)v;
}

/* Courier runs: a queued flag with bit 0 set is an outbox ready flag (tp90_cour.ready), raised
 * at gpu scope - its readers, the courier CTAs, are on this GPU - and needing no system-scope
 * fence. Flags are 8-byte aligned, so bit 0 is free; only the courier instantiation sets it. */
XS_DEV uint64_t *tp90_gpu_tag(uint64_t *f) { return (uint64_t *)((uintptr_t)f | 1u); }
XS_DEV bool tp90_is_gpu(const uint64_t *f) { return ((uintptr_t)f & 1u) != 0; }
XS_DEV uint64_t *tp90_untag(uint64_t *f) { return (uint64_t *)((uintptr_t)f & ~(uintptr_t)1u); }


/* Protocol-bug bound of a ring wait: the longest legitimate wait is the other role's dependency
 * wait (a.timeout_ns) plus a tile. */
XS_DEV unsigned long long tp90_ring_bound(const tp_args &a) { return a.timeout_ns + 10000000000ull; }

/* Producer (lane 0): wait until ring stage `ring.stage` is free. false: the consumers stopped
 * (s_abort_c) - do not issue. */
template <class C>
XS_DEV bool tp90_wait_empty(const tp_args &a, const xs_gemm90_ring<C> &ring,
                            const volatile int *abort_c)
{
    const uint32_t bar = ring.empty(ring.stage), parity = ring.phase ^ 1u;
    if (xs_mbar_try_wait(bar, parity))
        return true;
    const unsigned long long t0 = xs_globaltimer();
#pragma unroll 1
    for (unsigned int spin = 1;; spin++) {
        if (xs_mbar_try_wait(bar, parity))
            return true;
        if ((spin & 255u) == 0) {
            if (*abort_c)
                return false;
            if (xs_globaltimer() - t0 > tp90_ring_bound(a))
                __trap();
        }
    }
}

/* A split part's k-tiles (TP_T_SPLIT, w1 = part, first slot, -, parts): [kb, kb + *KT) of the
 * tile's *KT, part p of S taking [p KT / S, (p + 1) KT / S). */
XS_DEV void tp90_split_range(int4 w1, int *kb, int *KT)
{
    const int KT0 = *KT, p = w1.x, S = w1.w;
    *kb = p * KT0 / S;
    *KT = (p + 1) * KT0 / S - *kb;
}

/* The distance between a compute CTA's tasks: the grid, or with couriers the compute CTAs. */
template <class C>
XS_DEV unsigned int tp90_stride(const tp90_cour &k)
{
    return C::COURIERS ? (unsigned int)k.ncomp : gridDim.x;
}

/* The producer warp (all 32 lanes; lane 0 holds the ring). */
template <class C>
XS_DEV void tp90_produce(const tp_args &a, const xs_wintab &tab, const tp90_maps &maps,
                         const tp90_cour &k, char *smem, tp_pend *pend0, volatile int *abort_c,
                         volatile int *abort_at)
{
    const bool lane0 = (threadIdx.x & 31) == 0;
    xs_gemm90_ring<C> ring = xs_gemm90_ring_at<C>(smem);
    unsigned int issued = 0; /* k-tiles issued (lane 0) */
    if (lane0) {
        xs_tma_prefetch_desc(&maps.a[0]);
        xs_tma_prefetch_desc(&maps.b[0]);
    }
#pragma unroll 1
    for (int i = blockIdx.x; i < a.ntasks; i += tp90_stride<C>(k)) {
        const int4 w0 = __ldg((const int4 *)(a.tasks + i));
        if (!(w0.x & TP_T_TILE))
            continue;
        const int g = w0.y, tm = w0.z, tn = w0.w;
        /* k-tiles [kb, kb + KT): the whole tile, or a split part's share (courier kernel) */
        int kb = 0, KT = (a.g[g].k + C::BK - 1) / C::BK;
        if (C::COURIERS && (w0.x & TP_T_SPLIT))
            tp90_split_range(__ldg((const int4 *)(a.tasks + i) + 1), &kb, &KT);
        /* the tile's inputs: 0 there, 1 timed out (recorded), 2 another CTA failed; pend0 is
         * empty (this kernel queues no flags), so the wait raises nothing */
        const int w = tp_tile_wait_warp(a, tab, pend0, g, tm, i); /* same in every lane */
        if (w) {
            if (lane0) {
                /* let the consumers' main loop of this task return, then stop: they read
                 * abort_at after it (written before the arrivals, which release it) */
                *abort_at = i;
#pragma unroll 1
                for (int kt = 0; kt < KT; kt++) {
                    if (!tp90_wait_empty<C>(a, ring, abort_c))
                        break;
                    xs_mbar_arrive(ring.full(ring.stage));
                    ring.advance();
                    issued++;
                }
            }
            break;
        }
        /* every lane's acquire (chunk flags, row-block count) precedes lane 0's TMA: warp
         * barrier (memory ordering among its lanes), then the proxy fence - the rows were
         * written through the generic proxy by peers, the host, or this GPU's GEMM 1 tiles */
        __syncwarp();
        if (lane0) {
            tp90_fence_proxy_global();
            const CUtensorMap *ma = &maps.a[0] + g, *mb = &maps.b[0] + g;
            bool stop = false;
#pragma unroll 1
            for (int kt = 0; kt < KT; kt++) {
                if (!tp90_wait_empty<C>(a, ring, abort_c)) {
                    stop = true;
                    break;
                }
                const int s = ring.stage;
                xs_mbar_arrive_tx(ring.full(s), (uint32_t)C::STAGE_BYTES);
                xs_tma_load_2d(ring.a_tile(s), ma, (kb + kt) * C::BK, tm * C::BM, ring.full(s));
                xs_tma_load_2d(ring.b_tile(s), mb, (kb + kt) * C::BK, tn * C::BN, ring.full(s));
                ring.advance();
                issued++;
            }
            if (stop)
                *abort_at = i; /* the consumers have stopped already; keeps the rule simple */
        }
        if (__shfl_sync(0xffffffffu, (int)(*abort_at != INT_MAX), 0))
            break;
    }
    /* the last STAGES issued k-tiles have landed (the earlier ones were consumed before their
     * stage was refilled): no async write into this CTA's shared memory outlives it */
    if (lane0) {
        const unsigned int first = issued > (unsigned)C::STAGES ? issued - C::STAGES : 0u;
#pragma unroll 1
        for (unsigned int q = first; q < issued; q++)
            xs_mbar_wait(ring.full((int)(q % C::STAGES)), (q / C::STAGES) & 1u);
    }
}

/* Consumers: wait, bounded, until the first k-tile of the next tile has landed. The main loop's
 * own waits trap after 10 s; this one covers the producer's dependency wait (a.timeout_ns, up to
 * 120 s under the sanitizer) before it. */
template <class C>
XS_DEV void tp90_wait_first(const tp_args &a, const xs_gemm90_ring<C> &ring)
{
    const uint32_t bar = ring.full(ring.stage);
    if (xs_mbar_try_wait(bar, ring.phase))
        return;
    const unsigned long long t0 = xs_globaltimer();
#pragma unroll 1
    for (unsigned int spin = 1;; spin++) {
        if (xs_mbar_try_wait(bar, ring.phase))
            return;
        if ((spin & 255u) == 0 && xs_globaltimer() - t0 > tp90_ring_bound(a))
            __trap();
    }
}

/* Consumer thread 0 (or a courier's copy thread 0), after the barrier that follows the payload
 * of `flag`: raise it (eager) or queue it for the signal warp. TAGS (courier instantiation): a
 * flag tagged by tp90_gpu_tag is raised at gpu scope. */
template <bool TAGS = false>
XS_DEV void tp90_raise(const tp_args &a, tp90_sq *q, uint64_t *flag, uint64_t *shadow)
{
    if (a.eager_flags) {
        if (TAGS && tp90_is_gpu(flag)) {
            /* release at gpu scope: cumulative over the payload the barrier ordered before it */
            xs_st_release_gpu(tp90_untag(flag), a.epoch);
            return;
        }
        __threadfence_system();
        xs_st_release_sys(flag, a.epoch);
        if (shadow) /* timing only (the data it stands for was placed before the launch) */
            *(volatile uint64_t *)shadow = a.epoch;
        return;
    }
    const unsigned int h = q->head; /* written by this thread only */
    if (h - tp90_ld_acquire_cta(&q->tail) >= TP90_SQ) {
        /* full: the signal warp frees slots after its fence, which always completes */
        const unsigned long long t0 = xs_globaltimer();
        while (h - tp90_ld_acquire_cta(&q->tail) >= TP90_SQ) {
            if (xs_globaltimer() - t0 > tp90_ring_bound(a))
                __trap();
            __nanosleep(64);
        }
    }
    tp90_sq_put(&q->flag[h % TP90_SQ], flag);
    tp90_sq_put(&q->shadow[h % TP90_SQ], shadow);
    tp90_st_release_cta(&q->head, h + 1);
}

/* The signal warp (lane 0 works): raise queued flags until the consumers are done and the queue
 * is empty. Its idle wait lasts as long as the consumers run, which every bounded wait of theirs
 * ends; the bound below is the host's backstop for the whole kernel. */
template <bool TAGS = false>
XS_DEV void tp90_signal(const tp_args &a, tp90_sq *q)
{
    if ((threadIdx.x & 31) != 0)
        return;
    unsigned int tail = 0;
    const unsigned long long t0 = xs_globaltimer();
    const unsigned long long bound = 4 * a.timeout_ns + 60000000000ull;
#pragma unroll 1
    for (;;) {
        /* done first (acquire): an entry appended before done was released is then seen by the
         * head read after it */
        const unsigned int done = tp90_ld_acquire_cta(&q->done);
        const unsigned int h = tp90_ld_acquire_cta(&q->head);
        if (h == tail) {
            if (done)
                return;
            if (xs_globaltimer() - t0 > bound)
                __trap();
            __nanosleep(128);
            continue;
        }
        if (TAGS) {
            /* the system-scope fence only when the batch holds a flag read outside this GPU */
            bool sys = false;
            for (unsigned int u = tail; u != h; u++)
                sys |= !tp90_is_gpu(tp90_sq_get(&q->flag[u % TP90_SQ]));
            if (sys)
                __threadfence_system();
        } else {
            __threadfence_system(); /* once for the batch [tail, h) */
        }
        for (; tail != h; tail++) {
            uint64_t *f = tp90_sq_get(&q->flag[tail % TP90_SQ]);
            if (TAGS && tp90_is_gpu(f))
                xs_st_release_gpu(tp90_untag(f), a.epoch);
            else
                xs_st_release_sys(f, a.epoch);
            uint64_t *sh = tp90_sq_get(&q->shadow[tail % TP90_SQ]);
            if (sh) /* timing only (the data it stands for was placed before the launch) */
                *(volatile uint64_t *)sh = a.epoch;
        }
        tp90_st_release_cta(&q->tail, tail);
    }
}

/* The outbox block of remote tile (owner, tr, tn) (courier runs): its first byte; *pitch =
 * bytes between its rows (the tile's width: tile-major, one contiguous block). */
XS_DEV char *tp90_outbox_at(const tp_args &a, const tp90_cour &k, int owner, int tr, int tn,
                            long long *pitch)
{
    int pe;
    const size_t e = xs_tp_slot_tile(XS_TP_LAYOUT_TILE, a.rs_n, tr, tn, &pe);
    *pitch = (long long)pe * 2;
    const int j = (owner - a.me - 1 + a.P) % a.P; /* owner != me */
    return k.outbox + (size_t)j * k.slot_bytes + e * 2;
}

/* Where output row r of tile (m0, n0) of GEMM g goes (NULL: outside the problem): the owner's
 * reduce-scatter slot in its window through the table (rs; the slot layout's pitch), or with
 * couriers (cour: a remote owner's tile) the tile's block in the outbox, else the local output
 * (SwiGLU: half the columns). */
template <class C>
XS_DEV char *tp90_row_dst(const tp_args &a, const xs_wintab &tab, const tp90_cour &k,
                          const xs_gemm_problem &p, int m0, int n0, int tn, int r, bool rs,
                          bool sw, int owner, bool cour)
{
    if (r >= p.m)
        return NULL;
    if (C::COURIERS && cour) {
        long long pitch;
        char *d = tp90_outbox_at(a, k, owner, (m0 - owner * a.rs_rows) / C::BM, tn, &pitch);
        return d + (size_t)(r - m0) * pitch;
    }
    if (rs) {
        long long pitch; /* the slot layout's (tp_slot_tile_at) */
        char *d = tp_slot_tile_at(a, tab, owner, (m0 - owner * a.rs_rows) / C::BM, tn, &pitch);
        return d + (size_t)(r - m0) * pitch;
    }
    return (char *)(a.out0 + (size_t)r * (size_t)a.ldo0 + (sw ? n0 / 2 : n0));
}

/* One tile's epilogue and signal (the 256 consumer threads, after the main loop). */
template <class C>
XS_DEV void tp90_tile_out(const tp_args &a, const xs_wintab &tab, const tp90_cour &k, char *smem,
                          tp90_sq *q, int wg, const float (&acc)[C::ACC], int g, int tm, int tn)
{
    const xs_gemm_problem &p = a.g[g];
    const int tid = threadIdx.x; /* 0..255 */
    const int m0 = tm * C::BM, n0 = tn * C::BN, wm0 = m0 + wg * C::WG_M;
    const bool rs = g == a.rs_gemm;
    const bool sw = g == 0 && a.swiglu0;
    const int owner = rs ? m0 / a.rs_rows : 0; /* rs_rows is a multiple of BM */
    /* courier runs: a remote owner's tile goes to the outbox, a courier carries it */
    const bool cour = C::COURIERS && rs && owner != a.me;
    char **dst = xs_gemm90_dst_rows<C>(smem) + wg * C::WG_M;
    const int wt = tid & 127;
    if (wt < C::WG_M)
        dst[wt] = tp90_row_dst<C>(a, tab, k, p, m0, n0, tn, wm0 + wt, rs, sw, owner, cour);
    const int nvalid = p.n - n0 < C::BN ? p.n - n0 : C::BN;
    if (sw)
        xs_gemm90_epilogue<C, true>(smem, wg, acc, dst, NULL, p.m - wm0, nvalid / 2);
    else
        xs_gemm90_epilogue<C, false>(smem, wg, acc, dst, NULL, p.m - wm0, nvalid);
    if (rs) {
        /* both warpgroups' stores precede the release of the per-tile signal */
        tp90_consumer_bar();
        if (tid == 0) {
            const int t_loc = ((m0 - owner * a.rs_rows) / C::BM) * a.rs_tiles_n + tn;
            const bool skip = a.fault == XS_TP_FAULT_RS_SIGNAL && owner == a.me && t_loc == 0;
            if (C::COURIERS && cour) /* the outbox tile is there: the couriers' ready flag */
                tp90_raise<C::COURIERS>(
                    a, q,
                    tp90_gpu_tag(k.ready + (size_t)((owner - a.me - 1 + a.P) % a.P) * a.t_own +
                                 t_loc),
                    NULL);
            else if (!skip)
                tp90_raise<C::COURIERS>(
                    a, q, tab.flags[owner] + a.rs_flag0 + (size_t)a.me * a.t_own + t_loc, NULL);
        }
    } else if (g == 0 && a.rb_count) {
        /* h rows are read by GEMM 2 tiles through TMA (async proxy) in other CTAs */
        tp90_fence_proxy_global();
        tp90_consumer_bar();
        if (tid == 0 && !(a.fault == XS_TP_FAULT_H_COUNT && tm == 0 && tn == 0))
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(a.rb_count + tm)
                         : "memory");
    }
}

/* Chunks [c, c + n) of this rank's shard to rank r's gathered buffer, then their flags (the 256
 * consumer threads). */
XS_DEV void tp90_push(const tp_args &a, const xs_wintab &tab, tp90_sq *q, int r, int c, int n)
{
    const int tid = threadIdx.x;
    tp_push_copy<256>(a, tab, r, c, n, tid);
    tp90_consumer_bar(); /* every thread's stores precede the flags */
    if (tid == 0)
        for (int k = 0; k < n; k++) {
            uint64_t *flag = tab.flags[r] + (size_t)a.me * a.ag_chunks + c + k;
            if (flag != a.skip_flag) /* test hook: never raised */
                tp90_raise(a, q, flag, tp_push_shadow(a, r, c + k));
        }
}

/* ---- courier CTAs (tp90k_cfg; docs/TP.md "Couriers (sm90)") -------------------------------- */

/* A courier CTA: warps 0-10 copy (TP90_CW threads, named barrier TP90_CBAR - a courier runs no
 * engine code, so barrier ids 1-3 are free in it), warp 11 is its signal warp (tp90_signal: the
 * owner's flags are raised at system scope, and the fence that waits for the copied bytes to
 * leave the GPU is that warp's, not the copy threads'). A round is TP90_CU 16-byte units per
 * copy thread (4 x 352 x 16 B = 22 KB per CTA, a third of a tile); the next round's loads are
 * in flight while a round is stored (tp90_ccopy), so up to two rounds (44 KB) per courier. */
#define TP90_CW 352
#define TP90_CBAR 1
#define TP90_CU 4

XS_DEV void tp90_copy_bar(void) { asm volatile("bar.sync 1, 352;\n" ::: "memory"); }

/* One walk entry as a courier sees it: a remote tile (its outbox block, its place in the
 * owner's slot, its ready flag and the owner's per-tile signal) or a push (one chunk of this
 * rank's shard, contiguous, to the same place in the peer's gathered buffer, and its flag). */
typedef struct {
    const char *src;  /* outbox block (contiguous rows of cpr units), or the chunk in this
                         rank's window */
    char *dst;        /* the tile's first element in the owner's slot, or the chunk's place in
                         the peer's window */
    long long pitch;  /* bytes between the tile's rows there (slot layout); push: 0 */
    int cpr, units;   /* 16-byte units per row, in the tile (push: one row of all its units) */
    uint64_t *ready;  /* the outbox ready flag; push: NULL (the chunk is there at the start) */
    uint64_t *flag;   /* the owner's signal of this rank's partial of the tile, or the chunk's
                         flag at the peer; NULL: never raised (XS_TP_FAULT_AG_FLAG's hook) */
    uint64_t *shadow; /* push: its shadow (tp_push_shadow), or NULL */
} tp90_ctile;

/* Walk entry i: a push (i < 0, XS_TP_WALK_PUSH) or list position i of a TILE of the
 * reduce-scatter GEMM with owner != me (xs_tp_order_walk holds no other). Every tile has 128
 * rows (rs_rows is a multiple of 128). */
XS_DEV tp90_ctile tp90_ctile_of(const tp_args &a, const xs_wintab &tab, const tp90_cour &k, int i)
{
    tp90_ctile c;
    if (i < 0) {
        const int r = XS_TP_WALK_RANK(i, a.ag_chunks), ch = XS_TP_WALK_CHUNK(i, a.ag_chunks);
        const unsigned long long off =
            (unsigned long long)a.me * a.shard_bytes + (unsigned long long)ch * XS_TP_CHUNK;
        c.src = tab.data[a.me] + off;
        c.dst = tab.data[r] + off;
        c.pitch = 0;
        c.units = (int)(tp_push_bytes(a, ch, 1) / 16);
        c.cpr = c.units > 0 ? c.units : 1;
        c.ready = NULL;
        c.flag = tab.flags[r] + (size_t)a.me * a.ag_chunks + ch;
        if (c.flag == a.skip_flag) /* test hook: never raised */
            c.flag = NULL;
        c.shadow = tp_push_shadow(a, r, ch);
        return c;
    }
    const int4 w0 = __ldg((const int4 *)(a.tasks + i));
    const int tm = w0.z, tn = w0.w;
    const int owner = tm * XS_TP_BM / a.rs_rows, tr = tm - owner * (a.rs_rows / XS_TP_BM);
    const int t_loc = tr * a.rs_tiles_n + tn;
    long long sp;
    c.src = tp90_outbox_at(a, k, owner, tr, tn, &sp);
    c.dst = tp_slot_tile_at(a, tab, owner, tr, tn, &c.pitch);
    c.cpr = (int)(sp / 16); /* rs_n is a multiple of 8: whole units */
    c.units = XS_TP_BM * c.cpr;
    c.ready = k.ready + (size_t)((owner - a.me - 1 + a.P) % a.P) * a.t_own + t_loc;
    c.flag = tab.flags[owner] + a.rs_flag0 + (size_t)a.me * a.t_own + t_loc;
    c.shadow = NULL;
    return c;
}

/* The copy threads (tid 0 .. TP90_CW - 1): the tile from the outbox (L2: __ldcg, never a stale
 * L1 line of an earlier launch) to the owner's slot, or a pushed chunk, in rounds of TP90_CU units per thread,
 * software-pipelined over two register sets: the loads of round r + 1 are issued before the
 * stores of round r. On an SM whose remote stores are in flight its own loads wait behind them
 * (3-100x slower, the store probe of docs/TP.md "Couriers (sm90)"), so with loads then stores
 * per round each round's loads sat behind the previous round's stores and a courier moved one
 * round per load latency (4 couriers stayed at 1.18-1.28x bound where 8 reached 1.04-1.14x).
 * Now a round's loads are in flight while the round before is stored, and its stores find their data there. The pace is
 * unchanged: round r's stores leave no earlier than 16 x (its first unit) / pace after t0 (the
 * loads are not paced). The next tile's first loads do not overlap this tile's last stores:
 * they need that tile's ready flag, which thread 0 acquires between tiles (tp90_courier). */
XS_DEV void tp90_cround_load(const uint4 *src, int j, int units, uint4 (&v)[TP90_CU])
{
#pragma unroll
    for (int u = 0; u < TP90_CU; u++) {
        const int x = j + u * TP90_CW;
        v[u] = x < units ? __ldcg(src + x) : make_uint4(0, 0, 0, 0);
    }
}

XS_DEV void tp90_cround_store(const tp90_ctile &c, int j, const uint4 (&v)[TP90_CU])
{
#pragma unroll
    for (int u = 0; u < TP90_CU; u++) {
        const int x = j + u * TP90_CW;
        if (x < c.units) {
            const int row = x / c.cpr, col = x - row * c.cpr;
            xs_st16v(c.dst + (size_t)row * c.pitch + (size_t)col * 16, v[u]);
        }
    }
}

XS_DEV void tp90_ccopy(const tp90_ctile &c, int tid, unsigned long long t0, float pace)
{
    const uint4 *src = (const uint4 *)c.src;
    const int step = TP90_CU * TP90_CW; /* units of one round, all copy threads */
    uint4 v[TP90_CU], nv[TP90_CU];
    tp90_cround_load(src, tid, c.units, v);
#pragma unroll 1
    for (int j = tid; j < c.units; j += step) {
        /* round r + 1's loads first: in flight while round r is stored */
        if (j + step < c.units)
            tp90_cround_load(src, j + step, c.units, nv);
        if (pace > 0.0f) {
            /* paced: round r of TP90_CU x TP90_CW units leaves no earlier than the courier's
             * share of the pace allows (t0: when the tile may start, thread 0's token bucket);
             * due is at most the tile's bytes / pace after t0, so the spin is bounded */
            xs_spin_until(t0 + (unsigned long long)((float)(16 * (j - tid)) / pace));
        }
        tp90_cround_store(c, j, v);
#pragma unroll
        for (int u = 0; u < TP90_CU; u++)
            v[u] = nv[u];
    }
}

/* One thread: wait, bounded by bound_ns, until the gpu-scope flag f holds the launch's epoch
 * (ld.acquire.gpu: the payload another CTA ordered before its release is then visible to this
 * CTA's threads after the barrier that follows). 0: there; 1: timed out (recorded: detail
 * kind, idx, task); 2: another CTA failed first. tp90_cwait: a courier's copy thread 0 and an
 * outbox tile's ready flag (kind 4). */
XS_DEV int tp90_wait_epoch(const tp_args &a, const uint64_t *f, int kind, int idx, int task,
                           unsigned long long bound_ns)
{
    if (xs_ld_acquire_gpu(f) >= a.epoch)
        return 0;
    const unsigned long long t0 = xs_globaltimer();
    while (xs_ld_acquire_gpu(f) < a.epoch) {
        if (tp_failed(a))
            return 2;
        if (xs_globaltimer() - t0 > bound_ns) {
            xs_devfail(a.status, XS_DEVERR_TIMEOUT, TP_DETAIL(kind, idx, task));
            return 1;
        }
        __nanosleep(64);
    }
    return 0;
}

XS_DEV int tp90_cwait(const tp_args &a, const tp90_cour &k, const uint64_t *ready, int task)
{
    /* twice the run's bound: a courier waits for a compute CTA, whose own bounded waits (a
     * split part's flag, a chunk) must expire first, so the recorded failure names the first
     * missing event, not the courier that waits behind it */
    return tp90_wait_epoch(a, ready, 4, (int)(ready - k.ready), task, 2 * a.timeout_ns);
}

/* The end of a split part's main loop (TP_T_SPLIT, courier kernel; the 256 consumer threads;
 * docs/TP.md "Split first steps"). An earlier part stores its fp32 accumulators in its scratch
 * slot - thread-major by float4, so the fragment layout never matters, and __stcg: the last part
 * reads them from L2 -, then, after the consumers' barrier, queues the slot's gpu-scope flag
 * (the signal warp's st.release.gpu, as an outbox tile's). The last part: consumer thread 0
 * waits, bounded, for the other parts' flags (ld.acquire.gpu; detail kind 5), the barrier
 * publishes them, and every thread adds the parts to its accumulators (__ldcg) before the
 * tile's epilogue. Returns 1 when the wait failed (*abort_c is set: the caller stops). Deadlock
 * freedom: xs_tp_order_check puts every earlier part at an earlier list position. */
template <class C>
XS_DEV int tp90_split_part(const tp_args &a, const tp90_cour &k, tp90_sq *q,
                           float (&acc)[C::ACC], int4 w1, int task, int *abort_c)
{
    static_assert(C::ACC * 256 * 4 == TP_SPLIT_BYTES, "one part: 256 threads' accumulators");
    const int tid = threadIdx.x, part = w1.x, slot0 = w1.y, S = w1.w;
    if (part < S - 1) {
        float4 *d = (float4 *)(k.split + (size_t)(slot0 + part) * (TP_SPLIT_BYTES / 4));
#pragma unroll
        for (int j = 0; j < C::ACC / 4; j++)
            __stcg(d + j * 256 + tid,
                   make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
        tp90_consumer_bar(); /* every thread's part precedes the flag */
        if (tid == 0 && !(a.fault == XS_TP_FAULT_SPLIT && slot0 + part == 0))
            tp90_raise<true>(a, q, tp90_gpu_tag(k.split_ready + slot0 + part), NULL);
        return 0;
    }
    if (tid == 0)
        for (int p = 0; p < S - 1; p++)
            if (tp90_wait_epoch(a, k.split_ready + slot0 + p, 5, slot0 + p, task, a.timeout_ns)) {
                *(volatile int *)abort_c = 1;
                break;
            }
    tp90_consumer_bar();
    if (*(volatile int *)abort_c)
        return 1;
    const float4 *src = (const float4 *)(k.split + (size_t)slot0 * (TP_SPLIT_BYTES / 4)) + tid;
#pragma unroll
    for (int j = 0; j < C::ACC / 4; j++) {
        float4 v = __ldcg(src + j * 256);
#pragma unroll 1
        for (int p = 1; p < S - 1; p++) {
            const float4 u = __ldcg(src + p * (TP_SPLIT_BYTES / 16) + j * 256);
            v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
        }
        acc[4 * j] += v.x;
        acc[4 * j + 1] += v.y;
        acc[4 * j + 2] += v.z;
        acc[4 * j + 3] += v.w;
    }
    return 0;
}

/* Thread 0 of a CTA (compute or courier) at its end: no more entries, so the signal warp raises
 * what is queued and leaves (its fence is the CTA's last release; the end stamp below is
 * sender-visible, before it); then the CTA's start and end stamps. (The list hash stays with the
 * callers: passing the compute CTA's abort flag in here changed its code.) */
XS_DEV void tp90_cta_done(const tp_args &a, tp90_sq *q, unsigned long long t_start)
{
    tp90_st_release_cta(&q->done, 1u);
    const unsigned long long t_end = xs_globaltimer();
    if (a.cta_ns) {
        a.cta_ns[2 * blockIdx.x] = t_start;
        a.cta_ns[2 * blockIdx.x + 1] = t_end;
    }
}

/* A courier CTA (blockIdx.x >= k.ncomp): walk entries c, c + ncour, ... of k.walk (c = blockIdx.x
 * - ncomp), round robin over the couriers: first the pushes (in the order the GEMM 0 tiles need
 * them), then the remote tiles in the order the compute CTAs produce them. Per entry: copy
 * thread 0 queues the previous entry's signal (after the barrier that follows its payload: the
 * lazy-free rule of tp90_raise), waits for a tile's ready flag (a push waits for nothing), and
 * all copy threads copy it. Deadlock freedom (docs/TP.md "Couriers (sm90)"): pushes wait for
 * nothing and precede every tile in every courier's walk, so all of them complete whatever the
 * compute CTAs do, and the chunk waits of the compute CTAs are then waits for finished events.
 * Beyond them, a courier waits only for a compute task at the list position of its entry, and
 * for its own earlier entries (smaller positions); a compute task waits only for tasks at
 * earlier positions (xs_tp_order_check; across ranks the rotation argument, tests/test_tp_plan)
 * - a reduction's wait for another rank's signal of a tile at an earlier position, which that
 * rank's courier raises after the tile. Ordering events by (pushes first, then position,
 * compute before courier), every wait is for an earlier event, so the earliest unfinished one
 * can always run (every CTA resident). Failure: the wait stops within one bound (timeout, or
 * another CTA's recorded failure). */
template <class C>
XS_DEV void tp90_courier(const tp_args &a, const xs_wintab &tab, const tp90_cour &k, tp90_sq *q,
                         unsigned long long t_start)
{
    __shared__ int s_cw[2]; /* copy thread 0's wait result, by iteration parity */
    const int tid = threadIdx.x;
    if (tid >= TP90_CW) {
        if (tid < TP90_CW + 32)
            tp90_signal<true>(a, q);
        return;
    }
    __shared__ unsigned long long s_t0[2]; /* when the tile may start (pacing), by parity */
    unsigned long long lsum = 0; /* thread 0: hash of the walk entries and tasks read */
    uint64_t *prev = NULL;       /* thread 0: signal of the entry copied last, not yet queued */
    uint64_t *prev_sh = NULL;    /* and its shadow (a push's, virtual peers) */
    unsigned long long due = 0;  /* thread 0: the pace's token bucket (next byte's earliest time) */
    bool aborted = false;
    int par = 0;
#pragma unroll 1
    for (int e = (int)blockIdx.x - k.ncomp;; e += k.ncour) {
        /* every copy thread's stores of the previous tile precede its signal, and s_cw[par] is
         * no longer read (last read two barriers ago) */
        tp90_copy_bar();
        if (tid == 0) {
            if (prev)
                tp90_raise<true>(a, q, prev, prev_sh);
            prev = prev_sh = NULL;
            int w = 3; /* 3: the walk is done */
            if (e < k.nwalk) {
                int4 w0, w1;
                const int i = k.walk[e];
                if (i < 0) { /* a push: the words of its task (tp_walk_pushes hashes the same) */
                    w0 = make_int4(TP_T_PUSH, 0, 0, 0);
                    w1 = make_int4(XS_TP_WALK_RANK(i, a.ag_chunks),
                                   XS_TP_WALK_CHUNK(i, a.ag_chunks), 0, 0);
                } else {
                    tp_task_read(a, i, &w0, &w1);
                }
                lsum += tp_courier_hash4(e, i, w0, w1);
                const tp90_ctile c0 = tp90_ctile_of(a, tab, k, i);
                w = c0.ready ? tp90_cwait(a, k, c0.ready, i) : 0;
                if (w == 0 && k.pace_bytes_per_ns > 0.0f) {
                    /* a tile that was ready late does not bank the time it waited */
                    s_t0[par] = xs_bucket_start(due);
                    due = s_t0[par] +
                          (unsigned long long)((float)(16 * c0.units) / k.pace_bytes_per_ns);
                }
            }
            s_cw[par] = w;
        }
        tp90_copy_bar();
        const int w = s_cw[par];
        const unsigned long long t0 = s_t0[par];
        par ^= 1;
        if (w) {
            aborted = w != 3;
            break;
        }
        const tp90_ctile c = tp90_ctile_of(a, tab, k, __ldg(k.walk + e));
        tp90_ccopy(c, tid, t0, k.pace_bytes_per_ns);
        if (tid == 0) {
            prev = c.flag;
            prev_sh = c.shadow;
        }
    }
    if (tid == 0) {
        tp90_cta_done(a, q, t_start);
        if (a.list_sum && !aborted)
            atomicAdd(a.list_sum, lsum);
    }
}

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
    tp90_kernel(const __grid_constant__ tp_args a, const __grid_constant__ xs_wintab tab,
                const __grid_constant__ tp90_maps maps, const __grid_constant__ tp90_cour k)
{
    extern __shared__ __align__(1024) char tp90_raw[];
    __shared__ int s_abort_c;  /* consumers stopped (written by consumer thread 0) */
    __shared__ int s_abort_at; /* the tile task at which the producer stopped, or INT_MAX */
    /* always empty (this kernel raises every flag at once); one per role, since a wait resets
     * its list */
    __shared__ tp_pend s_pend0, s_pend1;
    __shared__ tp90_sq s_sq;
    /* thread 0: hash of the tasks read (in shared memory: a register pair live across the main
     * loop spilled) */
    __shared__ unsigned long long s_lsum;
    char *smem = xs_gemm90_smem(tp90_raw);
    const int tid = threadIdx.x, wg = tid >> 7;
    const unsigned long long t_start = xs_globaltimer();
    if (tid == 0) {
        s_abort_c = 0;
        s_abort_at = INT_MAX;
        s_pend0.n = s_pend1.n = 0;
        s_pend0.urgent = s_pend1.urgent = 0;
        s_pend0.skip = s_pend1.skip = NULL;
        s_sq.head = s_sq.tail = 0;
        s_lsum = 0;
        s_sq.done = 0;
    }
    if (C::COURIERS && (int)blockIdx.x >= k.ncomp) {
        /* a courier: no ring, no mbarriers, no setmaxnreg - the whole CTA leaves the engine's
         * code here, before its init (whose barriers are the CTA's own) */
        __syncthreads(); /* the shared words above */
        tp90_courier<C>(a, tab, k, &s_sq, t_start);
        return;
    }
    /* ends with __syncthreads; no CTA-wide barrier after it */
    xs_gemm90_init<C>(smem, false);

    if (wg == C::PRODUCER_WG) {
        xs_setmaxnreg_dec<C::PRODUCER_REGS>();
        if (tid < C::PRODUCER_WG * 128 + 32)
            tp90_produce<C>(a, tab, maps, k, smem, &s_pend0, &s_abort_c, &s_abort_at);
        else if (tid < C::PRODUCER_WG * 128 + 64)
            tp90_signal<C::COURIERS>(a, &s_sq);
        return;
    }

    xs_setmaxnreg_inc<C::CONSUMER_REGS>();
    xs_gemm90_ring<C> ring = xs_gemm90_ring_at<C>(smem);
    float acc[C::ACC];
    bool aborted = false;
#pragma unroll 1
    for (int i = blockIdx.x; i < a.ntasks; i += tp90_stride<C>(k)) {
        int4 w0, w1;
        tp_task_read(a, i, &w0, &w1);
        const int kind = w0.x;
        if (tid == 0)
            s_lsum += tp_task_hash4(i, w0, w1);
        if (kind & TP_T_TILE) {
            const int g = w0.y;
            /* a split part (courier kernel) runs its share of the k-tiles */
            const bool split = C::COURIERS && (kind & TP_T_SPLIT);
            int kb = 0, KT = (a.g[g].k + C::BK - 1) / C::BK;
            if (split)
                tp90_split_range(w1, &kb, &KT);
            if (a.g[g].k > 0)
                tp90_wait_first<C>(a, ring);
            xs_gemm90_mainloop<C>(split ? KT * C::BK : a.g[g].k, wg, ring, acc);
            if (*(volatile int *)&s_abort_at <= i) {
                aborted = true;
                break;
            }
            if (split && tp90_split_part<C>(a, k, &s_sq, acc, w1, i, &s_abort_c)) {
                aborted = true;
                break;
            }
            if (!split || w1.x == w1.w - 1) /* an earlier part has no epilogue */
                tp90_tile_out<C>(a, tab, k, smem, &s_sq, wg, acc, g, w0.z, w0.w);
        }
        if (kind & TP_T_PUSH)
            tp90_push(a, tab, &s_sq, w1.x, w1.y, w1.w > 1 ? w1.w : 1);
        if (kind & TP_T_REDUCE) {
            if (tid == 0 && tp_reduce_wait(a, tab, &s_pend1, w1.z, i))
                *(volatile int *)&s_abort_c = 1;
            tp90_consumer_bar();
            if (*(volatile int *)&s_abort_c) {
                aborted = true;
                break;
            }
            tp_reduce<tp90_red>(a, tab, w1.z);
        }
        if (tid == 0 && a.task_ns)
            a.task_ns[i] = xs_globaltimer();
        /* s_abort_c and the staging are read after this barrier and written before the next */
        tp90_consumer_bar();
    }
    if (aborted && tid == 0)
        *(volatile int *)&s_abort_c = 1; /* the producer stops issuing */
    if (tid == 0) {
        tp90_cta_done(a, &s_sq, t_start);
        if (a.list_sum && !aborted)
            atomicAdd(a.list_sum, s_lsum);
    }
}

#endif /* XSTAGE_TP_SM90_CUH */
