// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_replay.h - run a burst-gap schedule on the GPU with the producers of docs/MODEL.md
 * and measure the same columns the model predicts.
 *
 * Producer p is one CTA of 128 threads, one per SM (forced by a large dynamic shared-memory
 * request). Row r: producers 0..K_r-1 store B_r bytes with 16-byte coalesced stores into their own
 * region of the window, then every producer spins G_r ns of "useful work". All producers start at
 * a common %globaltimer instant; issue windows are measured with clock64 on each SM and placed on
 * the common time base through a tick-edge anchor. Every byte is verified at the destination
 * after each run.
 */
#ifndef XSTAGE_REPLAY_H
#define XSTAGE_REPLAY_H

#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_win.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Producers leave the common start on a %globaltimer edge; on the H200 some runs have one
 * producer leave one 256 ns step late, which is a harness artifact, not the X-Stage (on the H200 a
 * sub-us burst took ~900 ns in exactly those runs, ~670 ns in the others). replay, validate and
 * calibrate rerun such runs by default (--max-skew). */
#define XS_REPLAY_MAX_SKEW_NS 128.0

typedef struct xs_replayer xs_replayer; /* owns windows and device buffers; reusable */

typedef struct {
    xs_target target;       /* host, local, virtual or peer */
    int virtual_peers;      /* with XS_TARGET_VIRTUAL */
    size_t window_bytes;    /* payload bytes of each destination window */
    int device;             /* CUDA device */
    double timeout_s;       /* bound on one run (device-side waits and host wait) */
    xs_dest_state dest;     /* host windows after each run's verification (xstage_win.h) */
    double max_skew_ns;     /* > 0: rerun (up to 8 attempts) a run whose producers' start skew
                               exceeds this; 0: keep every run. The commands default to
                               XS_REPLAY_MAX_SKEW_NS */
    int one_dest;           /* peer target, N > 1 ranks: every producer stores to the next rank
                               (one destination) instead of the other ranks in turn (all-to-all) */
    int fixed_offsets;      /* 1: every run stores at the start of the window; 0 (default):
                               each run starts where the previous run's footprint ended (4 KiB
                               aligned), wrapping at the window's end (docs/MODEL.md:
                               rotate destination offsets), when the window holds two
                               footprints (xs_pm_rotate, xstage_peermap.h) */
    int cold_window;        /* 1: the first runs find pinned host windows as allocated; 0
                               (default): xs_replayer_open first runs the replay kernel once
                               over the whole of each (verified, not recorded), as later runs
                               find them once rotating offsets have wrapped */
} xs_replay_opts;

typedef struct {
    double kernel_ms;        /* event time of the replay kernel */
    double sm_ghz;           /* SM clock measured during the run (clock64 / globaltimer) */
    double start_skew_ns;    /* spread of the producers' actual start around the common instant */
    double bytes;            /* bytes stored (and verified) */
    uint64_t bad16;          /* 16-byte units wrong or missing at the destination */
    int restarts;            /* runs discarded for their start skew (opts.max_skew_ns) */
    double offset_bytes;     /* where the run started in each destination window (rotation) */
} xs_replay_stats;

/* Open windows and buffers. Fails with one line when there is no GPU, the window cannot be
 * allocated, or the target is unavailable. */
xs_status xs_replayer_open(const xs_replay_opts *o, xs_replayer **out);
void xs_replayer_close(xs_replayer *rp);
const xs_gpu_info *xs_replayer_gpu(const xs_replayer *rp);
int xs_replayer_max_producers(const xs_replayer *rp); /* SM count */
/* The SM (%smid) each producer of the last xs_replay_run ran on: out[p] for p < the returned
 * count (min(n, the run's producers)); 0 before any run. */
int xs_replayer_last_smids(const xs_replayer *rp, int *out, int n);
/* Run producer p of every later run on SM sms[p], p < n (distinct SMs of this GPU; one rank
 * only): the kernel then puts one CTA on every SM and the others leave at once. n = 0: producer
 * p is CTA p again, wherever the block scheduler puts it. A run whose producer did not run on
 * its SM (another kernel holding SMs) fails. */
xs_status xs_replayer_set_sms(xs_replayer *rp, const int *sms, int n);
/* --sms: "spread" (*spread = 1, count 0: the list needs the GPU's SM count) or SM numbers and
 * ranges a-b, comma-separated, in producer order. Returns the count, or -1 with the error set.
 * The commands call it to refuse a bad list before they touch the GPU. */
int xs_replay_sms_parse(const char *s, int *out, int cap, int *spread);
/* Whether an --sms argument parses (the list itself is not kept): XS_OK, or XS_EINVAL with the
 * error set. */
xs_status xs_replay_sms_check(const char *s);
/* xs_replayer_set_sms from an --sms argument. "spread": every SM once, the even SMs ascending,
 * then the odd ones. On Hopper TPC t holds SMs 2t and 2t + 1, and consecutive TPCs sit in
 * different GPCs, so the first K producers take one SM each of K TPCs, round-robin over the GPCs
 * and both halves of the chip (docs/MODEL.md). */
xs_status xs_replayer_use_sms(xs_replayer *rp, const char *spec);
/* The GPC of every SM as far as thread-block clusters show it (SMs that ran CTAs of one cluster
 * share a GPC): group[sm] in 0..*ngroups-1, numbered by their lowest SM; n >= the SM count. */
xs_status xs_replayer_sm_groups(xs_replayer *rp, int *group, int n, int *ngroups);
/* Check that a schedule can run: producers <= SMs, bytes multiple of 16, fits the window. */
xs_status xs_replay_check(const xs_replayer *rp, const xs_schedule *s);
/* Run once. Fills *res like xs_simulate does (rows, windows), plus stats. Verifies every byte;
 * a mismatch is XS_EVERIFY (with stats->bad16 set). seed rotates the pattern (never 0 data). */
xs_status xs_replay_run(xs_replayer *rp, const xs_schedule *s, int sync, uint32_t seed,
                        xs_result *res, xs_replay_stats *stats);
/* xs_replay_run with per-producer programs (xs_programs, include/xstage.h): producer p of row r
 * stores pg->bytes[r * pg->producers + p] bytes (a multiple of 16; 0: no store, its window stays
 * NaN) and then works pg->gap_ns[...] ns; the rows give the producers taking part. The row's
 * producers each get a region of the row's largest burst. One process only (not N > 1 peer
 * ranks). pg NULL: xs_replay_run. */
xs_status xs_replay_run_programs(xs_replayer *rp, const xs_schedule *s, const xs_programs *pg,
                                 int sync, uint32_t seed, xs_result *res, xs_replay_stats *stats);
/* Plain zero-copy store bandwidth: a grid of many CTAs storing `bytes` into the window; GB/s. */
xs_status xs_replay_store_bw(xs_replayer *rp, size_t bytes, int reps, double *gbps_med,
                             double *gbps_min, double *gbps_max);
/* Drain under load (not fitted; calibrate --load-probe): the store kernel's rate (GB/s) when the
 * SMs that store also run other memory traffic - one CTA per SM, 128 threads storing their share
 * of `bytes`, 128 threads doing read-modify-write passes until the stores end: load 0 none, 1 HBM
 * (a 1 GiB buffer), 2 L2 (24 MiB). Every byte verified; median, min, max of `reps` runs after a
 * warm-up. */
xs_status xs_replay_store_bw_load(xs_replayer *rp, size_t bytes, int load, int reps,
                                  double *gbps_med, double *gbps_min, double *gbps_max);
/* Work under stores (xstage probe; not fitted). One CTA of 256 threads per SM. Threads 0-127 of
 * the first store_ctas CTAs store their share of `bytes` into the window (the pattern, 16-byte
 * stores), laid out as rows of row_bytes: the rows of `interleave` consecutive CTAs alternate at
 * the destination (a CTA's rows then lie interleave x row_bytes apart, as one head's rows of an
 * attention output or one tile's rows of a GEMM output do), and together the stored bytes are
 * one contiguous range, verified at the destination. Threads 128-255 of every CTA run `load`
 * for duration_ns on their own clock (choose it shorter than the stores take): the same passes
 * as the drain-under-load probe, or an FMA loop. Each CTA's load side counts its work, so a run
 * gives the load rate of the storing SMs and of the others while the stores drain; with
 * store_ctas = 0 it is the control. Host and local targets, one rank. */
typedef enum {
    XS_PROBE_LOAD_NONE = 0,
    XS_PROBE_LOAD_HBM = 1, /* read-modify-write passes over a 1 GiB buffer */
    XS_PROBE_LOAD_L2 = 2,  /* the same over 24 MiB */
    XS_PROBE_LOAD_FMA = 3  /* eight independent FMA chains per thread, no memory traffic */
} xs_probe_load;

typedef struct {
    int store_ctas;      /* CTAs 0..store_ctas-1 store (<= SMs); 0 = the control */
    size_t bytes;        /* bytes stored by all of them (rounded down to whole rows per CTA) */
    int row_bytes;       /* 0: each CTA's share contiguous; else a power of two, 256..65536 */
    int interleave;      /* CTAs whose rows alternate (1..store_ctas); 1 with row_bytes 0 */
    double pace_gbps;    /* > 0: the storing CTAs together issue at most this rate (each its
                            share, in 8 KiB steps); 0: as fast as they can */
    int load;            /* xs_probe_load */
    double duration_ns;  /* how long the load side runs (with a load) */
    int bulk;            /* 1: the storing threads write each 8 KiB step into shared memory and
                            one thread hands it to the TMA (cp.async.bulk, a copy per row or per
                            contiguous step; two steps in flight); the store span then ends when
                            the last copy's writes are complete. 0: 16-byte stores */
} xs_probe_cfg;

typedef struct {
    double store_gbps;         /* bytes / (last store issued - first store started) */
    double store_span_us;      /* that span */
    double kernel_us;          /* event time of the launch */
    double load_store_sms;     /* load work per SM per us on the storing SMs (load units: MB/s
                                  of read-modify-write traffic for hbm/l2, GFLOP/s for fma) */
    double load_other_sms;     /* the same on the SMs that do not store; NAN if none */
    double bytes;              /* bytes stored and verified */
} xs_probe_res;

/* One warm-up and `reps` runs of cfg; *med gets the per-field medians, *lo and *hi the minima and
 * maxima (NULL allowed). Every stored byte verified (XS_EVERIFY on a mismatch); every device-side
 * wait bounded by the replayer's timeout (XS_ETIMEOUT). XS_EINVAL (one line) for a bad cfg or
 * N > 1 ranks. */
xs_status xs_replay_work_probe(xs_replayer *rp, const xs_probe_cfg *cfg, int reps,
                               xs_probe_res *med, xs_probe_res *lo, xs_probe_res *hi);

/* Visibility: one producer stores `bytes` then raises a flag (release, system scope); the host
 * polls it (acquire) and answers with a second flag that the producer waits for (bounded). Returns
 * the median round trip over reps in ns. Host targets only. */
xs_status xs_replay_visibility(xs_replayer *rp, size_t bytes, int reps, double *rtt_med_ns,
                               double *rtt_p90_ns);

#ifdef __cplusplus
}
#endif
#endif
