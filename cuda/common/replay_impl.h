// SPDX-License-Identifier: Apache-2.0
/*
 * replay_impl.h - the replayer's state and the helpers its two halves share (internal to
 * cuda/common: replay.cu runs schedules, replay_probe.cu runs the probes; include/xstage_replay.h
 * is the public API).
 */
#ifndef XSTAGE_REPLAY_IMPL_H
#define XSTAGE_REPLAY_IMPL_H

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

/* One producer's part of one row when the schedule comes with per-producer programs
 * (xs_replay_run_programs): its own bytes (0: no store in the row) and work. */
typedef struct {
    unsigned long long n16;     /* 16-byte units this producer stores in the row; 0: none */
    unsigned long long gap_cyc; /* its work after the row, in SM cycles */
} xs_dprog;

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
    xs_dprog *dprog;             /* [rows x producers] per-producer programs (0 when unused) */
    size_t dprog_cap;
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

/* The device's failure report of the last kernel as a status naming `what` (and cleared). */
xs_status xs_replay_devstatus(xs_replayer *rp, const char *what);
/* The pattern salt of source rank src (N > 1 peer ranks; 0 otherwise). */
unsigned int xs_replay_src_salt(const xs_replayer *rp, int src);
/* N > 1 peer ranks, after a destination check: agree on failure and on the largest *v. */
xs_status xs_replay_agree_after_check(xs_replayer *rp, xs_status st, double *v, const char *what);
/* Let the work probe's kernel take the replayer's dynamic shared memory (one CTA per SM). */
cudaError_t xs_replay_probe_setup(size_t smem);

#endif /* XSTAGE_REPLAY_IMPL_H */
