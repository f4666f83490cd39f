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

/* The model's terms. Not fitted yet: the defaults (xs_ov_terms_default) are assumptions, to be
 * fitted on the pilot lines of `bench tp` and `bench up` (each chunk count's measured time). */
typedef struct {
    double copy_bytes_per_ns; /* copy engine rate over the link (default: the profile's R) */
    double copy_call_ns;      /* fixed cost of one cudaMemcpyAsync */
    double call_ns;           /* fixed cost of one compute call (a launch; a small GEMM's lost
                                 efficiency) */
} xs_ov_terms;

#define XS_OV_COPY_CALL_NS 2000.0 /* assumption: one copy's setup, not fitted */
#define XS_OV_CALL_NS 3000.0      /* assumption: one compute call's overhead, not fitted */

/* The defaults over a link of drain rate r (bytes/ns). */
xs_ov_terms xs_ov_terms_default(double r);

/* TP (xs_tp_run_overlapped's pipeline): the predicted time of `chunks` pieces per rank block,
 * from compute_ns, the cuBLAS GEMMs alone as one piece per rank block (bench tp's cublas_us),
 * split over the pieces by rows, each piece paying t->call_ns per call (mlp: GEMM 1, SwiGLU,
 * GEMM 2). The owner-side reduction is not modelled. XS_EINVAL (one line) for chunks < 1 or
 * compute_ns <= 0. */
xs_status xs_ov_tp_predict(const xs_tp_info *in, int peers, double compute_ns,
                           const xs_ov_terms *t, int chunks, double *ns);

/* UP (bench up's overlapped variant): C head chunks of heads/C heads each; a chunk's attention
 * takes fa_ns scaled by its waves, ceil(tiles_c / sms) / ceil(tiles / sms) with tiles =
 * tiles_per_head x heads, plus t->call_ns; its out transfer is its (peers - 1)/peers share of
 * out_bytes (the bytes that cross the link) at the copy rate plus one call per remote rank.
 * XS_EINVAL (one line) when chunks does not divide heads or an argument is out of range. */
xs_status xs_ov_up_predict(double fa_ns, int heads, int tiles_per_head, int sms, int peers,
                           double out_bytes, const xs_ov_terms *t, int chunks, double *ns);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_OVERLAP_H */
