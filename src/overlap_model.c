/*
 * overlap_model.c - the model of the overlapped unfused baselines (include/xstage_overlap.h): a
 * two-stream pipeline (compute in order, copies in order), and the TP and UP pieces it is fed.
 */
#include <math.h>
#include <string.h>

#include "xstage_overlap.h"

double xs_ov_pipeline_ns(const xs_ov_piece *p, int n, double tail_ns)
{
    if (n <= 0)
        return 0;
    /* the in transfers first, in piece order: piece i's arrives at arrive */
    double copy = 0, comp = 0;
    double arrive[1024];
    const int na = n < 1024 ? n : 1024;
    for (int i = 0; i < n; i++) {
        if (p[i].in_ns > 0)
            copy += p[i].in_ns;
        if (i < na)
            arrive[i] = p[i].in_ns > 0 ? copy : 0;
    }
    for (int i = 0; i < n; i++) {
        const double a = i < na ? arrive[i] : copy;
        comp = (comp > a ? comp : a) + p[i].compute_ns;
        if (p[i].out_ns > 0)
            copy = (copy > comp ? copy : comp) + p[i].out_ns;
    }
    return (comp > copy ? comp : copy) + tail_ns;
}

double xs_ov_uniform_ns(int n, double g, double x)
{
    if (n <= 0)
        return 0;
    return g + (n - 1) * (g > x ? g : x) + x;
}

xs_ov_terms xs_ov_terms_default(double r)
{
    xs_ov_terms t;
    t.copy_bytes_per_ns = r;
    t.copy_call_ns = XS_OV_COPY_CALL_NS;
    t.call_ns = XS_OV_CALL_NS;
    return t;
}

enum { OV_MAX_PIECES = 1024 };

xs_status xs_ov_tp_predict(const xs_tp_info *in, int peers, double compute_ns,
                           const xs_ov_terms *t, int chunks, double *ns)
{
    const int P = peers, C = chunks;
    if (C < 1 || P < 1 || P * C > OV_MAX_PIECES || !(compute_ns > 0) ||
        !(t->copy_bytes_per_ns > 0))
        return xs_seterr(XS_EINVAL, "overlap model: %d chunks, %d peers, compute %.4g ns, copy "
                         "rate %.4g B/ns (chunks 1..%d per peer, compute and rate > 0)", C, P,
                         compute_ns, t->copy_bytes_per_ns, OV_MAX_PIECES / (P > 0 ? P : 1));
    const int mlp = in->ngemm > 1, ag = in->ag, rs = in->rs_gemm >= 0;
    const int calls = mlp ? 3 : 1;
    /* the measured compute is P pieces of `calls` calls each */
    double work = compute_ns - (double)P * calls * t->call_ns;
    if (work < 0.1 * compute_ns)
        work = 0.1 * compute_ns;
    /* mlp: GEMM 1's share of the work by flops (its own GEMM 2 runs last) */
    double f1 = 1.0;
    if (mlp) {
        const double a = (double)in->gn[0] * in->gk[0], b = (double)in->gn[1] * in->gk[1];
        f1 = a / (a + b);
    }
    const double piece_work = work / ((double)P * C); /* one piece of one rank block */
    const double rows = (double)in->rs_rows / C;
    const double in_ns = (double)in->ag_k * 2 * rows / t->copy_bytes_per_ns + t->copy_call_ns;
    const double out_ns = (double)in->rs_n * 2 * rows / t->copy_bytes_per_ns + t->copy_call_ns;
    xs_ov_piece pc[OV_MAX_PIECES + 1];
    int n = 0;
    if (ag) { /* own shard first (no wait), then the others as their pieces arrive */
        for (int i = 0; i < C; i++) {
            pc[n].compute_ns = mlp ? piece_work * f1 + 2 * t->call_ns : piece_work + t->call_ns;
            pc[n].in_ns = pc[n].out_ns = 0;
            n++;
        }
        for (int j = 1; j < P; j++)
            for (int i = 0; i < C; i++) {
                pc[n].compute_ns = piece_work + calls * t->call_ns;
                /* the k-th remote piece waits for the k-th push (the pushes go to the peers in
                 * ring order, C pieces each; piece i of shard s arrives with piece i of the
                 * push to s's mirror rank) */
                pc[n].in_ns = in_ns;
                pc[n].out_ns = rs ? out_ns : 0;
                n++;
            }
        if (mlp) { /* own GEMM 2 rows last, no copy */
            pc[n].compute_ns = work * (1 - f1) / P + t->call_ns;
            pc[n].in_ns = pc[n].out_ns = 0;
            n++;
        }
    } else { /* gemm_rs: the other owners' pieces first, own rows last */
        for (int j = 1; j <= P; j++)
            for (int i = 0; i < C; i++) {
                pc[n].compute_ns = piece_work + t->call_ns;
                pc[n].in_ns = 0;
                pc[n].out_ns = j < P ? out_ns : 0;
                n++;
            }
    }
    *ns = xs_ov_pipeline_ns(pc, n, 0);
    return XS_OK;
}

xs_status xs_ov_up_predict(double fa_ns, int heads, int tiles_per_head, int sms, int peers,
                           double out_bytes, const xs_ov_terms *t, int chunks, double *ns)
{
    const int C = chunks;
    if (C < 1 || heads < 1 || heads % C || tiles_per_head < 1 || sms < 1 || peers < 1 ||
        !(fa_ns > 0) || !(out_bytes >= 0) || !(t->copy_bytes_per_ns > 0) || C > OV_MAX_PIECES)
        return xs_seterr(XS_EINVAL, "overlap model: %d head chunks of %d heads, %d tiles per "
                         "head, %d SMs, %d peers, fa %.4g ns (chunks must divide the heads; "
                         "everything positive)", C, heads, tiles_per_head, sms, peers, fa_ns);
    const double tiles = (double)tiles_per_head * heads, tc = tiles / C;
    const double waves = ceil(tiles / sms), wc = ceil(tc / sms);
    const double g = fa_ns * wc / waves + t->call_ns;
    const double x = out_bytes / C / t->copy_bytes_per_ns + (peers - 1) * t->copy_call_ns;
    *ns = xs_ov_uniform_ns(C, g, peers > 1 ? x : 0);
    return XS_OK;
}
