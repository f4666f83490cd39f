/*
 * tp_sm90.cuh - the TP task kernel on the Hopper tile engine (cuda/gemm_sm90.cuh): the same task
 * lists, windows, flags, waits and failure reporting as tp_kernel in tp.cu (included from there,
 * after the mma.sync kernel, whose device helpers it shares), with the GEMM tiles on wgmma + TMA.
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
 * argument of tp.cu holds as if every flag were raised right after its payload. The stream bits
 * of an order (DEFER, SPREAD) are not executed: xs_tp_run refuses such orders for this engine.
 *
 * Deadlock freedom: the producer waits only for tasks earlier in the list than the tile it is
 * about to load; the consumers of the same CTA never need the producer for tasks before that
 * tile (every earlier tile's k-tiles are already issued), so they finish them, and the argument
 * of tp.cu (the earliest unfinished task waits only on finished ones) carries over.
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
};
typedef tp90_cfg TP90C;
static_assert(TP90C::BM == XS_TP_BM && TP90C::BN == XS_TP_BN, "tp.h tile sizes");
static_assert(TP90C::PRODUCER_REGS * 128 + TP90C::CONSUMER_REGS * 256 <= 168 * 384,
              "setmaxnreg pool of a 384-thread CTA at 168 registers");

/* The tensor maps of the run's GEMMs (A and B of GEMM 0 and 1; GEMM 1's zeros when there is
 * none). Encoded per launch on the host: GEMM 0's A is the gathered buffer in the window of the
 * table the run uses (fused or local control). */
typedef struct {
    CUtensorMap a[2], b[2];
} tp90_maps;

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
 * does not count them as synchronisation and reported every hand-over as a hazard (H200 run 6,
 * bench/results/h200-2026-11-29-r6/sanitize_sm90_call4.log); it leaves atomics out. */
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

/* The producer warp (all 32 lanes; lane 0 holds the ring). */
template <class C>
XS_DEV void tp90_produce(const tp_args &a, const xs_wintab &tab, const tp90_maps &maps,
                         char *smem, tp_pend *pend0, volatile int *abort_c, volatile int *abort_at)
{
    const bool lane0 = (threadIdx.x & 31) == 0;
    xs_gemm90_ring<C> ring = xs_gemm90_ring_at<C>(smem);
    unsigned int issued = 0; /* k-tiles issued (lane 0) */
    if (lane0) {
        xs_tma_prefetch_desc(&maps.a[0]);
        xs_tma_prefetch_desc(&maps.b[0]);
    }
#pragma unroll 1
    for (int i = blockIdx.x; i < a.ntasks; i += gridDim.x) {
        const int4 w0 = __ldg((const int4 *)(a.tasks + i));
        if (!(w0.x & TP_T_TILE))
            continue;
        const int g = w0.y, tm = w0.z, tn = w0.w;
        const int KT = (a.g[g].k + C::BK - 1) / C::BK;
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
                xs_tma_load_2d(ring.a_tile(s), ma, kt * C::BK, tm * C::BM, ring.full(s));
                xs_tma_load_2d(ring.b_tile(s), mb, kt * C::BK, tn * C::BN, ring.full(s));
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

/* Consumer thread 0, after the barrier that follows the payload of `flag`: raise it (eager) or
 * queue it for the signal warp. */
XS_DEV void tp90_raise(const tp_args &a, tp90_sq *q, uint64_t *flag, uint64_t *shadow)
{
    if (a.eager_flags) {
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
        __threadfence_system(); /* once for the batch [tail, h) */
        for (; tail != h; tail++) {
            xs_st_release_sys(tp90_sq_get(&q->flag[tail % TP90_SQ]), a.epoch);
            uint64_t *sh = tp90_sq_get(&q->shadow[tail % TP90_SQ]);
            if (sh) /* timing only (the data it stands for was placed before the launch) */
                *(volatile uint64_t *)sh = a.epoch;
        }
        tp90_st_release_cta(&q->tail, tail);
    }
}

/* Where output row r of tile (m0, n0) of GEMM g goes (NULL: outside the problem): the owner's
 * reduce-scatter slot in its window through the table (rs; the slot layout's pitch), else the
 * local output (SwiGLU: half the columns). */
template <class C>
XS_DEV char *tp90_row_dst(const tp_args &a, const xs_wintab &tab, const xs_gemm_problem &p,
                          int m0, int n0, int tn, int r, bool rs, bool sw, int owner)
{
    if (r >= p.m)
        return NULL;
    if (rs) {
        long long pitch; /* the slot layout's (tp_slot_tile_at) */
        char *d = tp_slot_tile_at(a, tab, owner, (m0 - owner * a.rs_rows) / C::BM, tn, &pitch);
        return d + (size_t)(r - m0) * pitch;
    }
    return (char *)(a.out0 + (size_t)r * (size_t)a.ldo0 + (sw ? n0 / 2 : n0));
}

/* One tile's epilogue and signal (the 256 consumer threads, after the main loop). */
template <class C>
XS_DEV void tp90_tile_out(const tp_args &a, const xs_wintab &tab, char *smem, tp90_sq *q,
                          int wg, const float (&acc)[C::ACC], int g, int tm, int tn)
{
    const xs_gemm_problem &p = a.g[g];
    const int tid = threadIdx.x; /* 0..255 */
    const int m0 = tm * C::BM, n0 = tn * C::BN, wm0 = m0 + wg * C::WG_M;
    const bool rs = g == a.rs_gemm;
    const bool sw = g == 0 && a.swiglu0;
    const int owner = rs ? m0 / a.rs_rows : 0; /* rs_rows is a multiple of BM */
    char **dst = xs_gemm90_dst_rows<C>(smem) + wg * C::WG_M;
    const int wt = tid & 127;
    if (wt < C::WG_M)
        dst[wt] = tp90_row_dst<C>(a, tab, p, m0, n0, tn, wm0 + wt, rs, sw, owner);
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
            if (!skip)
                tp90_raise(a, q, tab.flags[owner] + a.rs_flag0 + (size_t)a.me * a.t_own + t_loc,
                           NULL);
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

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
    tp90_kernel(const __grid_constant__ tp_args a, const __grid_constant__ xs_wintab tab,
                const __grid_constant__ tp90_maps maps)
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
    /* ends with __syncthreads; no CTA-wide barrier after it */
    xs_gemm90_init<C>(smem, false);

    if (wg == C::PRODUCER_WG) {
        xs_setmaxnreg_dec<C::PRODUCER_REGS>();
        if (tid < C::PRODUCER_WG * 128 + 32)
            tp90_produce<C>(a, tab, maps, smem, &s_pend0, &s_abort_c, &s_abort_at);
        else if (tid < C::PRODUCER_WG * 128 + 64)
            tp90_signal(a, &s_sq);
        return;
    }

    xs_setmaxnreg_inc<C::CONSUMER_REGS>();
    xs_gemm90_ring<C> ring = xs_gemm90_ring_at<C>(smem);
    float acc[C::ACC];
    bool aborted = false;
#pragma unroll 1
    for (int i = blockIdx.x; i < a.ntasks; i += gridDim.x) {
        int4 w0, w1;
        tp_task_read(a, i, &w0, &w1);
        const int kind = w0.x;
        if (tid == 0)
            s_lsum += tp_task_hash4(i, w0, w1);
        if (kind & TP_T_TILE) {
            const int g = w0.y;
            if (a.g[g].k > 0)
                tp90_wait_first<C>(a, ring);
            xs_gemm90_mainloop<C>(a.g[g].k, wg, ring, acc);
            if (*(volatile int *)&s_abort_at <= i) {
                aborted = true;
                break;
            }
            tp90_tile_out<C>(a, tab, smem, &s_sq, wg, acc, g, w0.z, w0.w);
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
        /* no more entries: the signal warp raises what is queued and leaves (its fence is the
         * CTA's last release; the end stamp below is sender-visible, before it) */
        tp90_st_release_cta(&s_sq.done, 1u);
        const unsigned long long t_end = xs_globaltimer();
        if (a.cta_ns) {
            a.cta_ns[2 * blockIdx.x] = t_start;
            a.cta_ns[2 * blockIdx.x + 1] = t_end;
        }
        if (a.list_sum && !aborted)
            atomicAdd(a.list_sum, s_lsum);
    }
}

#endif /* XSTAGE_TP_SM90_CUH */
