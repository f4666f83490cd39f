// SPDX-License-Identifier: Apache-2.0
/*
 * tp/tp_ctx.h - the TP GPU context (struct xs_tp), private to tp_runtime.cu and tp_check.cu:
 * the embedded host plan (include/xstage_tp.h), the windows, inputs, device task lists, the
 * last run, references and expectations. cuda/tp/tp.h is the public side.
 */
#ifndef XSTAGE_TP_CTX_H
#define XSTAGE_TP_CTX_H

#include "tp/tp_kernel.cuh"

typedef enum { TP_RUN_NONE = 0, TP_RUN_FUSED, TP_RUN_LOCAL, TP_RUN_UNFUSED } tp_run_kind;

struct xs_tp {
    xs_tp_plan pl;                 /* shape, info, grid, rank, couriers, slot layout, task lists */
    int device;
    uint32_t seed;
    size_t l2_bytes;
    xs_wintab vt;                  /* the caller's table (virtual peers or peers) */
    xs_wintab lt;                  /* local control: P windows in this GPU's memory */
    char *lmem;                    /* payload of lt, P * lstride bytes */
    uint64_t *lflags;              /* flags of lt, P * nflags */
    size_t lstride;
    void *host[XS_MAX_RANKS];      /* CPU view of vt's host windows (payload) */
    uint64_t *host_flags[XS_MAX_RANKS];
    xs_bf16 *a_rs;                 /* gemm_rs A [m, k/P] */
    xs_bf16 *w[2];                 /* weights */
    xs_bf16 *out0;                 /* GEMM 0 local output [m, out_n[0]] (ag_gemm, mlp) */
    xs_bf16 *y;                    /* [rs_rows, rs_n] */
    unsigned int *rb_count;        /* [tiles_m] */
    xs_devstatus *status;
    unsigned long long *task_ns, *cta_ns;
    size_t task_cap;
    unsigned long long *d_bad, *d_nonfinite;
    double *d_err;                 /* [2 * max rows] */
    size_t err_rows;
    void *flush;
    size_t flush_bytes;
    cudaEvent_t ev0, ev1;
    cudaStream_t vstream;          /* internal work (fills, checks) */
    int virt;                      /* every other rank's window is this process's host memory */
    char *scratch;                 /* [grid][TP_SCRATCH_BYTES] staged remote tiles */
    uint64_t *ag_shadow;           /* [P][ag_chunks] device shadow of this rank's push flags */
    unsigned long long *d_list_sum; /* the kernel's sum of task hashes */
    /* task lists */
    tp_task *d_tasks[XS_TP_SLOTS]; /* device copies of the plan's lists */
    int d_cap[XS_TP_SLOTS];
    unsigned long long epoch_v, epoch_l;
    /* the last run */
    tp_run_kind last;
    int last_slot, last_failed;
    unsigned long long last_epoch;
    /* references (device, fp32) */
    int have_ref;
    float *ref_part;               /* [m, rs_n] */
    float *ref_y;                  /* [rs_rows, rs_n] */
    float *ref_out0;               /* ag_gemm out [m, n/P]; mlp h [m, I/P] (fp32 of the ref h) */
    float *ref_tmp;                /* mlp GEMM1 output [m, 2I/P] */
    xs_bf16 *ref_h;                /* mlp reference h, bf16 */
    /* expectations: the first local run's bytes, checked against the reference */
    int have_exp;
    xs_bf16 *exp_part;             /* device [m, rs_n]: what this rank sends, every owner */
    xs_bf16 *exp_y, *exp_out0;
    xs_bf16 *exp_part_h;           /* host copy of exp_part */
    xs_bf16 *exp_shard_h;          /* host copy of this rank's shard */
    /* unfused */
    xs_bf16 *u_c0, *u_h, *u_c, *u_y;
    xs_bf16 *u_part_h;             /* host snapshot of u_c */
    /* overlapped (xs_tp_run_overlapped): the copy stream and one event per chunk and phase */
    cudaStream_t ov_side;
    cudaEvent_t *ov_ev;
    int ov_nev;
    xs_tp_coll coll;               /* real peers: the collectives (xs_tp_set_coll) */
    int have_coll;
    xs_bf16 *exp_recv;             /* real peers: [P][rs_rows][rs_n] what each source sends here */
    xs_tp_engine engine;           /* the fused kernel's tile engine (xs_tp_set_engine) */
    /* couriers (xs_tp_set_couriers; docs/TP.md "Couriers (sm90)") */
    int *d_walk[XS_TP_SLOTS];      /* device copies, uploaded with the list */
    int d_walk_cap[XS_TP_SLOTS];
    char *outbox;                  /* [P - 1][slot_bytes] remote tiles staged for the couriers */
    uint64_t *ready;               /* [2][P - 1][t_own] outbox ready flags: fused, local table */
    float *split;                  /* [TP_SPLIT_SLOTS(grid)][TP_SPLIT_BYTES] split parts */
    uint64_t *split_ready;         /* [2][TP_SPLIT_SLOTS(grid)] their flags: fused, local table */
    xs_bf16 *split_tmp;            /* [rs_rows, rs_n] verification of split tiles (row-major) */
    int *d_split_tiles;            /* [t_own] own-tile indices of split tiles (verification) */
};

/* Blocks of `threads` for n items, 1..4096 (the helper kernels loop). */
static inline int tp_blocks(size_t n, int threads)
{
    size_t b = (n + threads - 1) / threads;
    if (b > 4096)
        b = 4096;
    return b < 1 ? 1 : (int)b;
}

/* The compute CTAs of a slot's order: those it was built for. */
static inline int tp_compute_grid(const xs_tp *t, int slot)
{
    return t->pl.grid - t->pl.scour[slot];
}

/* Copy nslots slots [rs_rows, rs_n] from layout sl at src to layout dl at dst, on the context's
 * internal stream (tp_runtime.cu). */
xs_status tp_slot_copy(xs_tp *t, void *dst, xs_tp_layout dl, const void *src, xs_tp_layout sl,
                       int nslots);

#endif /* XSTAGE_TP_CTX_H */
