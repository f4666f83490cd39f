// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_overlap.h - the model of the overlapped unfused baselines (plain C): a compute stream
 * and a copy stream, each in order, the copy of a piece issued once its compute ended (bench tp
 * and bench up's `overlapped` variant; docs/METRICS.md "Workloads"). src/overlap_model.c
 * implements it. The model predicts from measured compute alone (cuBLAS or the attention kernel
 * with no transfer) and the copy rate; it does not measure anything itself.
 *
 * Units: ns, bytes, bytes/ns.
 */
#ifndef XSTAGE_OVERLAP_H
#define XSTAGE_OVERLAP_H

#include "xstage.h"
#include "xstage_ep.h"
#include "xstage_tp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One piece of a pipeline, in the order the compute stream runs the pieces. */
typedef struct {
    double compute_ns; /* its compute on the compute stream */
    double in_ns;      /* the transfer it waits for (an all-gather piece), 0: none */
    double out_ns;     /* the transfer of its output once it is computed, 0: none */
} xs_ov_piece;

/* The makespan of n pieces: the copy stream runs every in transfer first, in piece order, then
 * each out transfer once its piece's compute has ended and the previous copy is done; the
 * compute stream runs piece i once piece i-1 is done and its in transfer has arrived. Returns
 * max(compute end, copy end) + tail_ns (work after both streams join); 0 for n <= 0. */
double xs_ov_pipeline_ns(const xs_ov_piece *p, int n, double tail_ns);

/* The same for n equal pieces of compute g and out copy x, no in transfers, in closed form:
 * g + (n - 1) max(g, x) + x. */
double xs_ov_uniform_ns(int n, double g, double x);

/* The model's terms. The defaults (xs_ov_terms_default) are fitted by lab/ovfit.c on the
 * pilot lines of bench/results/overlap/fit_pilots.log.gz (each chunk count's measured time): fit
 * on the llama3-8b and seq 8192 rows, judged on the llama3-70b and seq 16384 rows
 * (docs/METRICS.md "Fitted constants"). */
typedef struct {
    double copy_bytes_per_ns; /* copy engine rate over the link (default: the profile's R) */
    double copy_call_ns;      /* fixed cost of one cudaMemcpyAsync */
    double call_ns;           /* fixed cost of one compute call (a launch; a small GEMM's lost
                                 efficiency) */
    double weight_bytes_per_ns; /* TP: a GEMM call reads its whole weight matrix, so a piece
                                   takes at least its weight bytes at this rate (a chunk of few
                                   rows is memory-bound); 0: no such floor */
} xs_ov_terms;

#define XS_OV_COPY_CALL_NS 2000.0   /* fitted (lab/ovfit.c): one copy's setup */
#define XS_OV_CALL_NS 4750.0        /* fitted: one compute call's overhead */
#define XS_OV_WEIGHT_BYTES_PER_NS 3500.0 /* fitted: HBM rate of a GEMM call's weight read */

/* The defaults over a link of drain rate r (bytes/ns). */
xs_ov_terms xs_ov_terms_default(double r);

/* TP (xs_tp_run_overlapped's pipeline): the predicted time of `chunks` pieces per rank block,
 * from compute_ns, the cuBLAS GEMMs alone as one piece per rank block (bench tp's cublas_us),
 * split over the pieces by rows, each piece paying t->call_ns per call (mlp: GEMM 1, SwiGLU,
 * GEMM 2) and each GEMM call taking at least its weight bytes (gn x gk x 2) at
 * t->weight_bytes_per_ns when that is > 0. The owner-side reduction is not modelled. XS_EINVAL
 * (one line) for chunks < 1 or compute_ns <= 0. */
xs_status xs_ov_tp_predict(const xs_tp_info *in, int peers, double compute_ns,
                           const xs_ov_terms *t, int chunks, double *ns);

/* UP (bench up's overlapped variant): C head chunks of heads/C heads each; a chunk's attention
 * takes fa_ns scaled by its waves, ceil(tiles_c / sms) / ceil(tiles / sms) with tiles =
 * tiles_per_head x heads, and at least the longest tile (causal: a query block's tile over
 * every key, twice the mean tile, so 2 fa_ns / ceil(tiles / sms); a chunk of fewer tiles than
 * SMs waits for it), plus t->call_ns; its out transfer is its (peers - 1)/peers share of
 * out_bytes (the bytes that cross the link) at the copy rate plus one call per remote rank.
 * XS_EINVAL (one line) when chunks does not divide heads or an argument is out of range. */
xs_status xs_ov_up_predict(double fa_ns, int heads, int tiles_per_head, int sms, int peers,
                           int causal, double out_bytes, const xs_ov_terms *t, int chunks,
                           double *ns);

/* ---- EP: the overlapped pipeline's pieces (src/ep_overlap.c) and their model ---- */

/* The EP pipeline (bench ep's `overlapped`, xs_moe_run_overlapped) cuts the combine's
 * destination space into C pieces of equal token counts: the tokens in destination order
 * (ranks 1..N-1, then rank 0, whose window is local; within a rank by slot, t / N), so that a
 * piece's rows land in one contiguous byte range of each window it touches and its combine is
 * one cudaMemcpyAsync per such window. The rows are reordered piece-major, then by expert (in
 * expert-sorted order within), so that a piece's GEMMs are one call per expert with rows in it.
 * Expert groups would read each weight once, but a group's rows are scattered over every
 * window's slots (one copy per row); token pieces keep the copies contiguous. */
typedef struct {
    int chunks;       /* C */
    int rows, experts; /* the problem's T * topk and E */
    int *perm;        /* [rows] the expert-sorted row of each pipeline row */
    int *piece_off;   /* [C + 1] first pipeline row of each piece */
    int *grp_off;     /* [C * E] first pipeline row of piece i's rows of expert e (i * E + e) */
    int *grp_rows;    /* [C * E] their count (0: no call) */
    int nseg;         /* copies over all pieces */
    int *seg_off;     /* [C + 1] first copy of each piece */
    int *seg_rank;    /* [nseg] the destination window */
    size_t *seg_start, *seg_bytes; /* [nseg] byte range in that window (and in its staging) */
} xs_moe_ovplan;

#define XS_MOE_OV_MAX_CHUNKS 64

/* The plan of `chunks` pieces (1..XS_MOE_OV_MAX_CHUNKS, at most T) over problem pb; *out is
 * the caller's (xs_moe_ovplan_destroy). XS_EINVAL (one line) on a bad count, XS_ENOMEM. */
xs_status xs_moe_ovplan_create(const xs_moe_problem *pb, int chunks, xs_moe_ovplan **out);
void xs_moe_ovplan_destroy(xs_moe_ovplan *p);

/* One piece of the EP pipeline, as the model sees it. */
typedef struct {
    double rows_frac;     /* its share of the rows (the GEMM work) */
    int groups;           /* its experts with rows */
    int calls;            /* its compute calls: one GEMM per expert with rows, per layer, plus
                             gather, SwiGLU and scale/permute (2 groups + 3; a grouped GEMM per
                             layer: 5) */
    double weight_bytes;  /* weights its GEMMs read (each expert with rows: 3 I H bf16) */
    double remote_bytes;  /* its combine bytes to host windows (the link) */
    double local_bytes;   /* its combine bytes to rank 0's window (device to device) */
    int copies;           /* its cudaMemcpyAsync calls */
} xs_ov_ep_piece;

/* The pieces of plan p over pb (out: p->chunks entries). */
void xs_moe_ovplan_pieces(const xs_moe_ovplan *p, const xs_moe_problem *pb, xs_ov_ep_piece *out);

/* EP: the predicted time of the n pieces from compute_ns, the whole pipeline's compute alone in
 * one piece (xs_moe_run_overlapped with one chunk and no copies; calls1 its calls): the work
 * (compute_ns less calls1 x t->call_ns, at least a tenth of it) split by rows, each piece at
 * least its weight bytes at t->weight_bytes_per_ns (when > 0), plus its calls x t->call_ns; its
 * copies at the copy rate (remote bytes), local bytes at t->weight_bytes_per_ns (an HBM copy;
 * free when 0), plus t->copy_call_ns per copy. XS_EINVAL (one line) on n < 1, compute_ns <= 0
 * or no copy rate. */
xs_status xs_ov_ep_predict(const xs_ov_ep_piece *p, int n, double compute_ns, int calls1,
                           const xs_ov_terms *t, double *ns);

/* ---- auto: the choice among a bench's variants from the model alone ---- */

/* One variant auto may choose: its name and its predicted completion time (the timing rule of
 * docs/METRICS.md: until every byte is at its destination; never a sender-visible time). */
typedef struct {
    const char *name; /* e.g. "overlapped C=2", "shaped f0.95/b0.0/ring" */
    double pred_us;   /* predicted completion time, us; nan or inf: no prediction (skipped) */
} xs_auto_cand;

/* The index of the candidate with the least finite pred_us (the first of equals), and in why
 * (len bytes, truncated) one line without a newline saying why: "NAME (pred X us) over NAME2
 * (pred Y us), the runner-up: the least predicted completion time of K variants" (K the
 * candidates with a prediction; "the only variant with a prediction" when K = 1). -1 and
 * "no variant has a prediction" when none has one. why may be NULL. */
int xs_auto_pick(const xs_auto_cand *c, int n, char *why, size_t len);

/* Issue 33's acceptance figures over a bench's rows (docs/METRICS.md "auto and tuned"). */
typedef struct {
    int rows;           /* rows with finite auto_us and best_other_us */
    int auto_met;       /* of them, auto_us <= 1.05 best_other_us */
    double auto_worst;  /* max auto_us / best_other_us */
    int tuned_rows;     /* rows with finite tuned_us and best_other_us */
    int tuned_met;      /* of them, tuned_us <= 1.02 best_other_us */
    double tuned_worst; /* max tuned_us / best_other_us */
    int band_rows;      /* rows with comm_over_compute in [0.5, 2] and finite overlapped_us,
                           auto_us */
    double band_gm;     /* geomean of overlapped_us / auto_us over them (nan: none) */
    int bound_rows;     /* rows with finite auto_us and bound_us */
    int bound_met;      /* of them, auto_us <= 1.1 bound_us */
} xs_auto_sum;

/* The figures over n rows of the given columns (nan: not measured); any array may repeat. */
void xs_auto_summarize(const double *auto_us, const double *tuned_us,
                       const double *best_other_us, const double *overlapped_us,
                       const double *comm_over_compute, const double *bound_us, int n,
                       xs_auto_sum *s);

/* The four summary lines of s (no "summary: " prefix, no newline), each ending in "met" or
 * "NOT met" against issue 33's targets (auto <= 1.05 best other on every row, tuned <= 1.02
 * on every row, the band's geomean >= 1.10, auto near bound on >= 80 % of rows); a figure with
 * no rows says so and is NOT met. */
void xs_auto_sum_lines(const xs_auto_sum *s, char lines[4][200]);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_OVERLAP_H */
