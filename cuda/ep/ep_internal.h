// SPDX-License-Identifier: Apache-2.0
/*
 * ep_internal.h - what cuda/ep/ep_runtime.cu, cuda/ep/ep_check.cu and the device code share: the
 * GPU context's layout, the trace record's words, and the helpers the references take from the
 * runtime (allocation, the window check, the unfused path's workspaces and GEMMs). Internal to
 * cuda/ep/ (not installed).
 */
#ifndef XSTAGE_EP_INTERNAL_H
#define XSTAGE_EP_INTERNAL_H

#include "ep.h"
#include "gemm.cuh"
#include "xstage_overlap.h"

#define XS_MOE_TRACE_WORDS 10 /* u64 per task: 5 clocks, cta/smid, bytes, pacer wait (ns),
                               * order ticket (xs_moe_tile.seq), deferred (1) */
#define XS_MOE_COPY_WORDS 6  /* u64 per courier copy: 3 clocks (wait, ready, end), cta/smid,
                              * bytes, pacer wait (ns) */
#define XS_MOE_COURIER_UNITS 8 /* 16-byte units per courier thread per chunk: a chunk is 32 KB
                                * (256 threads), loaded before it is stored, so one courier keeps
                                * more than R/C in flight even when its loads miss L2 (~1 us) */

#define XS_MOE_OV_CACHE 6 /* overlapped pipelines (chunk counts) kept uploaded at once */

/* One chunk count's overlapped pipeline on the device (cuda/ep/ep_overlap.cu): its plan and the
 * per-row arrays in its row order. */
typedef struct {
    xs_moe_ovplan *plan; /* NULL: empty entry */
    int *d_token, *d_rank;  /* [rows] */
    float *d_weight;        /* [rows] */
    long long *d_off;       /* [rows] */
    /* the grouped GEMMs (xs_cublas_gemm_bf16_grouped): per piece its experts with rows, in
     * order, grp_first[i] .. grp_first[i + 1] - 1 of them; their row counts and the operand
     * pointers of both layers (device: a1, b1, c1, a2, b2, c2, ngrp each) */
    int ngrp;
    int *grp_first;         /* [C + 1] host */
    int *grp_m;             /* [ngrp] host */
    void **d_ptr;           /* [6 * ngrp] device */
} xs_moe_ov;

static_assert(sizeof(xs_moe_task) == sizeof(int2), "xs_moe_task is the kernel's int2");
static_assert(sizeof(xs_moe_rb) == sizeof(int4), "xs_moe_rb is the kernel's int4");

struct xs_moe_weights {
    xs_moe_config cfg;
    xs_bf16 *w1; /* [E, 2I, H] */
    xs_bf16 *w2; /* [E, H, I] */
};

/* A task list on the device: a slot's host list belongs to the host problem (pb->slots), the
 * run-option subset's (xs_moe.sub) to the GPU context. */
typedef struct {
    xs_moe_task *host; /* [n] */
    int2 *dev;         /* [n] the same tasks (the same layout) */
    int n;
    xs_moe_plan plan;
} xs_moe_tasklist;

struct xs_moe {
    const xs_moe_weights *w;
    xs_moe_problem *pb;   /* routing, row blocks, task lists (host; owned) */
    /* device */
    xs_bf16 *x, *h;
    int *d_row_token, *d_row_rank;
    float *d_row_weight;
    long long *d_row_off;
    int4 *d_rb;
    unsigned int *d_queue;
    unsigned long long *d_done1;
    xs_devstatus *d_status;
    unsigned long long *d_pace; /* the pacer's reserved-until time (ns, %globaltimer) */
    char **d_rank_base;
    unsigned char *d_rank_host;
    unsigned long long *d_trace, *d_anchors;
    int trace_cap;
    xs_moe_tasklist slots[XS_MOE_SLOTS];
    xs_moe_tasklist sub;  /* the Linear-1 or Linear-2 tasks of a plan (run option only) */
    /* couriers (allocated at the first courier run) */
    char *d_cstage;       /* [rows, H] bf16: remote rows staged by the Linear-2 epilogues */
    unsigned long long *d_ready; /* [nrb * l2_per_rb] 1 = the Linear-2 tile's rows are staged */
    int2 *d_clist, *h_clist;     /* [n2] the Linear-2 tiles (rb, nb) in task-list order */
    /* the couriers' row plan (xs_moe_courier_rows, per run: it holds the table's pointers):
     * per row block its remote rows (rows of host windows) in row order and their
     * destinations, BM each, and their count */
    int *d_crow, *h_crow;        /* [nrb][BM] global row index */
    char **d_cdst, **h_cdst;     /* [nrb][BM] the row's slot in its window (column 0) */
    int *d_ccnt, *h_ccnt;        /* [nrb] */
    unsigned long long *d_ctrace, *h_ctrace; /* [n2][XS_MOE_COPY_WORDS] */
    xs_moe_copy *copies;  /* the last run's copies (decoded) */
    int ncopies;
    void *d_kargs;        /* the fused kernel's arguments (device memory, see the kernel) */
    cudaEvent_t ev[6];
    /* last run's trace */
    unsigned long long *h_trace, *h_anchors;
    xs_moe_tile *tiles;
    int ntiles;
    /* local control windows */
    char *local_win;
    /* unfused / reference workspaces (lazily) */
    xs_bf16 *xs_sorted, *y1, *y2, *stage;
    float *y1f, *y2f, *reff;
    float *ref;   /* host [rows, H] */
    float *d_ref; /* device [rows, H]: the same rows, what xs_moe_verify reads */
    int have_ref;
    void *d_vpart; /* xs_moe_verify's per-block partial results ([4 * grid]) */
    xs_bf16 *ref_h; /* device [rows, I]: the reference's h (bf16), for xs_moe_verify_h */
    int have_ref_h;
    /* the overlapped pipeline (cuda/ep/ep_overlap.cu): its side stream, one event per piece
     * and one for the end, and the chunk counts uploaded (round robin) */
    cudaStream_t ov_side;
    cudaEvent_t ov_ev[XS_MOE_OV_MAX_CHUNKS + 1];
    int ov_nev;
    xs_moe_ov ov[XS_MOE_OV_CACHE];
    int ov_next;
    /* L2 flush scratch */
    void *flush;
    size_t flush_bytes;
    int flush_count;
};

/* cudaMalloc with a one-line error naming the buffer and its size */
xs_status xs_moe_dalloc(void **p, size_t bytes, const char *what);
/* XS_EINVAL unless tab has the problem's N windows of at least window_bytes each */
xs_status xs_moe_check_table(const xs_moe *m, const xs_wintab *tab);
/* The unfused path's workspaces (reference = 1: the fp32 ones), allocated once. */
xs_status xs_moe_ensure_unfused(xs_moe *m, int reference);
/* The cuBLAS GEMMs of one layer (1 or 2), one call per expert with rows, outputs in fp32 (f32)
 * or bf16, on stream s. */
xs_status xs_moe_gemms(xs_moe *m, xs_cublas *cb, cudaStream_t s, int layer, int f32);

/* Free the overlapped pipeline's state (xs_moe_destroy). */
void xs_moe_ov_free(xs_moe *m);

#endif /* XSTAGE_EP_INTERNAL_H */
