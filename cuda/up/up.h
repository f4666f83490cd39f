// SPDX-License-Identifier: Apache-2.0
/*
 * up.h - the UP attention kernel's CUDA API (cudaStream_t): its launch arguments, validation
 * and launcher (cuda/up/up_runtime.cu), and the references and checks that verify its output
 * (cuda/up/up_check.cu). The kernel is cuda/up/up_kernel.cuh; the host model and planner are
 * include/xstage_up.h (plain C).
 *
 * Layout: Q, K, V and O are [seq, heads, 128] bf16, row-major (batch 1; fold a batch into heads
 * or run one launch per batch element): the rows of sequence shard p of all local heads are
 * one contiguous block of O, exactly what rank p receives from this rank (docs/UP.md).
 */
#ifndef XSTAGE_UP_CUDA_H
#define XSTAGE_UP_CUDA_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "xstage.h"
#include "xstage_device.cuh"
#include "xstage_launch.h"
#include "xstage_up.h"
#include "xstage_win.h"

typedef enum { XS_ATTN_OUT_LOCAL = 0, XS_ATTN_OUT_WINDOWS = 1 } xs_attn_out;

/* Everything a launch needs, by value. Pointers are device-usable. */
typedef struct {
    const void *q, *k, *v;  /* bf16 [seq, heads, 128] */
    void *o;                /* bf16 [seq, heads, 128]; the destination when out = LOCAL; with
                               couriers the staging of the remote tiles' rows (only those
                               rows are written) */
    int seq;                /* sequence length (any >= 1; tails are masked) */
    int heads;              /* heads held by this rank */
    int causal;             /* 1: key j visible to query i only when j <= i */
    float scale;            /* softmax scale; 0 = 1/sqrt(128) */
    int out;                /* xs_attn_out */
    int rows_per_rank;      /* WINDOWS: rank p receives sequence rows [p*rpr, (p+1)*rpr) */
    int dst_heads;          /* WINDOWS: heads per row at the destination, [rpr, dst_heads, 128]
                               from offset 0 of each window; 0 = heads (one source, as with
                               virtual peers); P*heads when P ranks each send their heads */
    int dst_head0;          /* WINDOWS: where this rank's heads start in a destination row
                               (rank * heads for real peers) */
    int split;              /* 0: store a tile right after its final rescale; n in 1..256:
                               n slices spread evenly over the key-block iterations of the
                               CTA's next tile */
    int order;              /* xs_attn_order; EARLY applies to WINDOWS output (LOCAL walks the
                               snake): the tiles with rows outside rank 0's shard first, their
                               waves in reverse */
    uint64_t signal;        /* WINDOWS, nonzero: after its last store CTA b stores this value
                               (release, system scope) to flags[r][b] of every rank r, so the
                               table needs nflags >= grid. Plain stores, no atomics: host
                               memory behind PCIe need not support them. Use a new value per
                               run and stale flags never match. */
    uint64_t *cta_ns;       /* [grid * 3] or NULL: per CTA, %globaltimer at start, when its
                               last store was issued (the sender-visible end, before any fence),
                               and ns warp 0 spent issuing output stores */
    uint64_t *tile_ns;      /* [tiles] or NULL: %globaltimer when warp 0 finished the tile's
                               epilogue (stores issued, or staged when split > 0) */
    uint64_t *tile_work_ns; /* [tiles] or NULL: %globaltimer when warp 0 finished the tile's
                               main loop (and a KV split's merge): its epilogue begins */
    xs_devstatus *status;   /* or NULL: first device-side failure (a row with no rank, a
                               courier's wait that timed out) */
    /* couriers (docs/UP.md "Couriers"); all zero = the kernel above, unchanged */
    int couriers;           /* WINDOWS, split 0, signal != 0: the last `couriers` CTAs of the
                               grid copy the remote tiles from O to their windows; 0: none */
    float pace_bytes_per_ns; /* couriers: their total store rate, bytes/ns (each pace/C);
                               0 = unpaced */
    uint64_t *sync;         /* couriers: device memory [tiles + grid] u64: per-tile ready flags,
                               then per-CTA done flags. Any contents except this run's signal
                               (zeros after allocation); never reset: the signal is new per run */
    uint64_t timeout_ns;    /* couriers and KV split: bound on each wait, ns; 0 =
                               XS_ATTN_TIMEOUT_NS */
    /* KV split (docs/UP.md "KV split"); tasks = NULL: the assignment above, unchanged */
    const int4 *tasks;      /* CTA b's work, in order: tasks[task_off[b] .. task_off[b + 1]),
                               each {tile, first key block, end key block, part}: part -1 a
                               whole tile; else XS_ATTN_KV_PART(slot, p, n), part p of n of the
                               tile's key blocks: p < n - 1 leaves its partial (unnormalised O,
                               row max and sum) in slot + p, p = n - 1 waits for slots slot ..
                               slot + n - 2, merges them and stores the tile (built by
                               xs_attn_kv_build, checked by xs_attn_kv_check; an
                               xs_attn_kvtask array has this layout) */
    const int *task_off;    /* [grid + 1] */
    float *part;            /* [slots x 8 warps x XS_ATTN_KV_FLOATS x 32 lanes] fp32 partials */
    uint64_t *part_flag;    /* [slots x 8]: per slot and warp, the run's signal once its partial
                               is in (any other contents before the run; never reset) */
    uint64_t *task_ns;      /* KV split, or NULL: [tasks x 4] %globaltimer of thread 0 at each
                               task's start, the end of its key blocks, the end of its merge or
                               partial, and its end (list order: tasks[] indices) */
} xs_attn_args;

#ifdef __cplusplus
extern "C" {
#endif

/* Check sizes, pointers, split and (for WINDOWS) that every row has a rank and fits its
 * window; with couriers, their settings. XS_EINVAL with one line naming the problem. */
xs_status xs_attn_validate(const xs_attn_args *a, const xs_wintab *tab, int grid);
/* Launch the forward kernel on `grid` CTAs (1 <= grid <= tiles; grid = SM count is the
 * persistent kernel, grid = tiles the one-tile-per-CTA kernel). tab may be NULL for LOCAL.
 * With couriers = C: grid - C compute CTAs (1 <= grid - C <= tiles) and C couriers, all of them
 * resident at once (XS_EINVAL when the device cannot hold grid CTAs). Asynchronous; returns
 * launch errors only (a courier's timeout lands in a->status). */
xs_status xs_attn_fwd(const xs_attn_args *a, const xs_wintab *tab, int grid, cudaStream_t s);

/* fp32 reference for n sampled (row, head) pairs: rows[2i] = sequence row, rows[2i+1] = head
 * (device array). ref[i*128 + d] = softmax(q k^T * scale) v in fp32, got[i*128 + d] = the bf16
 * output o at that row and head, widened. A plain two-pass kernel, one CTA per sample. */
xs_status xs_attn_ref_rows(const void *q, const void *k, const void *v, const void *o, int seq,
                           int heads, int causal, float scale, const int *rows, int n, float *ref,
                           float *got, cudaStream_t s);
/* n bf16 values, uniform in [lo, hi), from (seed, index): fresh inputs without a host copy. */
xs_status xs_attn_fill_random(void *p, size_t n, uint32_t seed, float lo, float hi,
                              cudaStream_t s);
/* Fill bytes (a multiple of 16) at a device-usable pointer (device or mapped host) with a
 * repeated 32-bit word; used to poison destinations before a run. */
xs_status xs_attn_fill_word(void *p, size_t bytes, uint32_t word, cudaStream_t s);
/* Add to *bad (device counter) the number of 16-byte units of [a, a+bytes) that differ from
 * [b, b+bytes); either may be mapped host memory. bytes a multiple of 16. */
xs_status xs_attn_compare(const void *a, const void *b, size_t bytes, unsigned long long *bad,
                          cudaStream_t s);
/* KV split's check: window rows [0, rows) of a rank whose first sequence row is row0, [rows,
 * heads, 128] bf16, against the same rows of a reference: bitwise where the row's tile (query
 * block, head) ran whole (split[tile] = 0), within atol + rtol |ref| where it ran in parts.
 * Adds the bf16 values that fail (NaN always fails) to *bad. */
xs_status xs_attn_compare_parts(const void *win, const void *ref, int row0, int rows, int seq,
                                int heads, const unsigned char *split, float atol, float rtol,
                                unsigned long long *bad, cudaStream_t s);
/* Add to *count (device counter) the number of bf16 values among n that are NaN or infinite:
 * after poisoning an output with NaN, 0 proves every element was written, and written finite. */
xs_status xs_attn_count_nonfinite(const void *p, size_t n, unsigned long long *count,
                                  cudaStream_t s);
/* Add to *bad (device counter) the number of flags[r][i], r < nranks, i < n, that differ from
 * value: 0 after a run with signal = value and grid n means every CTA signalled every rank. */
xs_status xs_attn_flags_check(const xs_wintab *tab, int n, uint64_t value,
                              unsigned long long *bad, cudaStream_t s);

/* The KV split's device buffers for one member's lists, grown on demand (never shrunk). */
typedef struct {
    int *off;             /* [grid + 1] task offsets (xs_attn_args.task_off) */
    int4 *tasks;          /* [tasks] (xs_attn_args.tasks) */
    float *part;          /* [slots] partials of XS_ATTN_KV_SLOT_BYTES (xs_attn_args.part) */
    uint64_t *flag;       /* [slots x 8] the partials' flags, zeroed when (re)allocated */
    unsigned char *split; /* [tiles] 1 where the tile runs in parts (xs_attn_compare_parts) */
    size_t off_cap, tasks_cap, slots_cap, split_cap; /* entries allocated */
} xs_attn_kvbuf;
/* Copy lists (xs_up_kv_lists: off [grid + 1], nt tasks, ns slots) into b, growing its buffers;
 * synchronises s. XS_EINVAL / XS_ENOMEM / XS_ECUDA with one line. */
xs_status xs_attn_kvbuf_load(xs_attn_kvbuf *b, int grid, int tiles, const int *off,
                             const xs_attn_kvtask *tasks, int nt, int ns, cudaStream_t s);
void xs_attn_kvbuf_free(xs_attn_kvbuf *b);

/* Real peers (-g N, docs/MULTIGPU.md "bench up -g N"): problem rank r - sequence rows
 * [r*rpr, (r+1)*rpr), r = 0 the shard this rank keeps - goes to GPU (me + r) % N, so that the
 * kernel, its early order and the planner keep "rank 0 is local". Every window of tab holds N
 * payload regions of `region` bytes and N flag slots of `slot` flags, region and slot s for
 * source s. *send: the kernel's table (problem rank r -> GPU (me + r) % N, region and slot me);
 * *own: this window as problem rank r's rows (region and slot of source (me - r) mod N). */
void xs_up_peer_tables(const xs_wintab *tab, size_t region, int slot, xs_wintab *send,
                       xs_wintab *own);
/* The serial all-to-all as one NCCL group of send/recv: problem rank r's shard of o (shard
 * bytes each) to GPU (me + r) % N, and each source's shard for this GPU into its region of own
 * (xs_up_peer_tables), the fused kernel's mapping, so that one check covers both. */
xs_status xs_up_alltoall(xs_coll *coll, const xs_wintab *own, const char *o, size_t shard,
                         cudaStream_t s);

/* Wait (bounded by timeout_ms, polling xs_attn_flags_check) until every flags[r][b] of
 * own, r < sources (<= 64), b < grid, holds value. XS_OK; or XS_ETIMEOUT with *missing the
 * flags still wrong and bit r of *late set for every source slot r with one missing. bad_dev is
 * a device counter; synchronises s. */
xs_status xs_attn_flags_wait(const xs_wintab *own, int sources, int grid, uint64_t value,
                             double timeout_ms, unsigned long long *bad_dev, cudaStream_t s,
                             unsigned long long *missing, uint64_t *late);
/* From a run's cta_ns stamps ([grid * 3], xs_attn_args.cta_ns): the span from the first CTA's
 * start to the last CTA's last store issued, us (NAN without stamps), and the median over CTAs
 * of the time spent issuing output stores, us. */
double xs_attn_span_us(const uint64_t *cta_ns, int grid);
double xs_attn_store_us(const uint64_t *cta_ns, int grid);
/* The output o against the fp32 reference (xs_attn_ref_rows) on nsamples sampled (row, head)
 * pairs: edges, shard (rows_per_rank) and block boundaries, then rows drawn from rng. *worst
 * gets the worst |o - ref| / (atol + rtol |ref|) (<= 1 passes; NaN counts as INFINITY),
 * *max_abs the worst absolute error. Device scratch: rows_dev [2 * nsamples], ref_dev and
 * got_dev [nsamples * 128]. Synchronises s. */
xs_status xs_attn_check_rows(const void *q, const void *k, const void *v, const void *o,
                             int seq, int heads, int causal, int rows_per_rank, int nsamples,
                             uint64_t rng, double atol, double rtol, int *rows_dev,
                             float *ref_dev, float *got_dev, cudaStream_t s, double *worst,
                             double *max_abs);
/* The windows of ranks 0..peers-1 (own->data[r]: rank r's rows [rows_per_rank, heads, 128])
 * against the same rows of o: *bad gets the 16-byte units that differ, or with split ([tiles]
 * device array, 1 where a tile ran in parts: a KV split) the bf16 values outside atol + rtol
 * |o| in split tiles and not bitwise equal elsewhere (xs_attn_compare_parts). bad_dev is a
 * device counter. Synchronises s. */
xs_status xs_attn_verify_windows(const xs_wintab *own, int peers, const void *o, int seq,
                                 int heads, int rows_per_rank, const unsigned char *split,
                                 float atol, float rtol, unsigned long long *bad_dev,
                                 cudaStream_t s, unsigned long long *bad);

#ifdef __cplusplus
}
#endif

#endif /* XSTAGE_UP_CUDA_H */
