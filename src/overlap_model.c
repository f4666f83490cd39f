// SPDX-License-Identifier: Apache-2.0
/*
 * overlap_model.c - the model of the overlapped unfused baselines (include/xstage_overlap.h): a
 * two-stream pipeline (compute in order, copies in order), and the TP, UP and EP pieces it is
 * fed.
 */
#include <math.h>
#include <stdio.h>
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
    t.weight_bytes_per_ns = XS_OV_WEIGHT_BYTES_PER_NS;
    return t;
}

/* One GEMM call's compute: its share of the work, at least its weight read. */
static double gemm_ns(double work, const xs_tp_info *in, int g, const xs_ov_terms *t)
{
    if (!(t->weight_bytes_per_ns > 0))
        return work;
    const double w = (double)in->gn[g] * in->gk[g] * 2 / t->weight_bytes_per_ns;
    return work > w ? work : w;
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
    /* a piece's compute: GEMM 1 (or the only GEMM) and, for mlp's remote rows, GEMM 2 */
    const double g0 = gemm_ns(piece_work * f1, in, 0, t);
    const double g1 = mlp ? gemm_ns(piece_work * (1 - f1), in, 1, t) : 0;
    if (ag) { /* own shard first (no wait), then the others as their pieces arrive */
        for (int i = 0; i < C; i++) {
            pc[n].compute_ns = mlp ? g0 + 2 * t->call_ns : g0 + t->call_ns;
            pc[n].in_ns = pc[n].out_ns = 0;
            n++;
        }
        for (int j = 1; j < P; j++)
            for (int i = 0; i < C; i++) {
                pc[n].compute_ns = g0 + g1 + calls * t->call_ns;
                /* the k-th remote piece waits for the k-th push (the pushes go to the peers in
                 * ring order, C pieces each; piece i of shard s arrives with piece i of the
                 * push to s's mirror rank) */
                pc[n].in_ns = in_ns;
                pc[n].out_ns = rs ? out_ns : 0;
                n++;
            }
        if (mlp) { /* own GEMM 2 rows last, no copy */
            pc[n].compute_ns = gemm_ns(work * (1 - f1) / P, in, 1, t) + t->call_ns;
            pc[n].in_ns = pc[n].out_ns = 0;
            n++;
        }
    } else { /* gemm_rs: the other owners' pieces first, own rows last */
        for (int j = 1; j <= P; j++)
            for (int i = 0; i < C; i++) {
                pc[n].compute_ns = g0 + t->call_ns;
                pc[n].in_ns = 0;
                pc[n].out_ns = j < P ? out_ns : 0;
                n++;
            }
    }
    *ns = xs_ov_pipeline_ns(pc, n, 0);
    return XS_OK;
}

xs_status xs_ov_up_predict(double fa_ns, int heads, int tiles_per_head, int sms, int peers,
                           int causal, double out_bytes, const xs_ov_terms *t, int chunks,
                           double *ns)
{
    const int C = chunks;
    if (C < 1 || heads < 1 || heads % C || tiles_per_head < 1 || sms < 1 || peers < 1 ||
        !(fa_ns > 0) || !(out_bytes >= 0) || !(t->copy_bytes_per_ns > 0) || C > OV_MAX_PIECES)
        return xs_seterr(XS_EINVAL, "overlap model: %d head chunks of %d heads, %d tiles per "
                         "head, %d SMs, %d peers, fa %.4g ns (chunks must divide the heads; "
                         "everything positive)", C, heads, tiles_per_head, sms, peers, fa_ns);
    const double tiles = (double)tiles_per_head * heads, tc = tiles / C;
    const double waves = ceil(tiles / sms), wc = ceil(tc / sms);
    const double longest = (causal ? 2 : 1) * fa_ns / waves;
    const double share = fa_ns * wc / waves;
    const double g = (share > longest ? share : longest) + t->call_ns;
    const double x = out_bytes / C / t->copy_bytes_per_ns + (peers - 1) * t->copy_call_ns;
    *ns = xs_ov_uniform_ns(C, g, peers > 1 ? x : 0);
    return XS_OK;
}

xs_status xs_ov_ep_predict(const xs_ov_ep_piece *p, int n, double compute_ns, int calls1,
                           const xs_ov_terms *t, double *ns)
{
    if (n < 1 || n > OV_MAX_PIECES || !(compute_ns > 0) || calls1 < 0 ||
        !(t->copy_bytes_per_ns > 0))
        return xs_seterr(XS_EINVAL, "overlap model: %d EP pieces, compute %.4g ns, copy rate "
                         "%.4g B/ns (pieces 1..%d, compute and rate > 0)", n, compute_ns,
                         t->copy_bytes_per_ns, OV_MAX_PIECES);
    double work = compute_ns - calls1 * t->call_ns;
    if (work < 0.1 * compute_ns)
        work = 0.1 * compute_ns;
    const int hbm = t->weight_bytes_per_ns > 0;
    xs_ov_piece pc[OV_MAX_PIECES];
    for (int i = 0; i < n; i++) {
        double g = work * p[i].rows_frac;
        if (hbm && p[i].weight_bytes / t->weight_bytes_per_ns > g)
            g = p[i].weight_bytes / t->weight_bytes_per_ns;
        pc[i].compute_ns = g + p[i].calls * t->call_ns;
        pc[i].in_ns = 0;
        pc[i].out_ns = p[i].remote_bytes / t->copy_bytes_per_ns +
                       (hbm ? p[i].local_bytes / t->weight_bytes_per_ns : 0) +
                       p[i].copies * t->copy_call_ns;
    }
    *ns = xs_ov_pipeline_ns(pc, n, 0);
    return XS_OK;
}

int xs_auto_pick(const xs_auto_cand *c, int n, char *why, size_t len)
{
    int best = -1, second = -1, k = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(c[i].pred_us))
            continue;
        k++;
        if (best < 0 || c[i].pred_us < c[best].pred_us)
            second = best, best = i;
        else if (second < 0 || c[i].pred_us < c[second].pred_us)
            second = i;
    }
    if (why && len) {
        if (best < 0)
            snprintf(why, len, "no variant has a prediction");
        else if (second < 0)
            snprintf(why, len, "%s (pred %.1f us): the only variant with a prediction",
                     c[best].name, c[best].pred_us);
        else
            snprintf(why, len, "%s (pred %.1f us) over %s (pred %.1f us), the runner-up: the "
                     "least predicted completion time of %d variants", c[best].name,
                     c[best].pred_us, c[second].name, c[second].pred_us, k);
    }
    return best;
}

void xs_auto_summarize(const double *auto_us, const double *tuned_us,
                       const double *best_other_us, const double *overlapped_us,
                       const double *comm_over_compute, const double *bound_us, int n,
                       xs_auto_sum *s)
{
    memset(s, 0, sizeof *s);
    s->auto_worst = s->tuned_worst = s->band_gm = NAN;
    double lg = 0;
    for (int i = 0; i < n; i++) {
        const double a = auto_us[i], t = tuned_us[i], b = best_other_us[i];
        if (isfinite(a) && isfinite(b) && b > 0) {
            s->rows++;
            s->auto_met += a <= 1.05 * b;
            if (!(a / b <= s->auto_worst))
                s->auto_worst = a / b;
        }
        if (isfinite(t) && isfinite(b) && b > 0) {
            s->tuned_rows++;
            s->tuned_met += t <= 1.02 * b;
            if (!(t / b <= s->tuned_worst))
                s->tuned_worst = t / b;
        }
        const double c = comm_over_compute[i], o = overlapped_us[i];
        if (c >= 0.5 && c <= 2 && isfinite(o) && o > 0 && isfinite(a) && a > 0) {
            s->band_rows++;
            lg += log(o / a);
        }
        if (isfinite(a) && isfinite(bound_us[i]) && bound_us[i] > 0) {
            s->bound_rows++;
            s->bound_met += a <= 1.1 * bound_us[i];
        }
    }
    if (s->band_rows)
        s->band_gm = exp(lg / s->band_rows);
}

void xs_auto_sum_lines(const xs_auto_sum *s, char lines[4][200])
{
    snprintf(lines[0], 200, "auto_us <= 1.05 x best_other_us in %d of %d rows (worst %.3f): %s",
             s->auto_met, s->rows, s->auto_worst,
             s->rows && s->auto_met == s->rows ? "met" : "NOT met");
    snprintf(lines[1], 200, "tuned_us <= 1.02 x best_other_us in %d of %d rows (worst %.3f): %s",
             s->tuned_met, s->tuned_rows, s->tuned_worst,
             s->tuned_rows && s->tuned_met == s->tuned_rows ? "met" : "NOT met");
    snprintf(lines[2], 200, "overlapped_us/auto_us geomean %.3f over %d rows with "
             "comm_over_compute in [0.5, 2] (target 1.10): %s", s->band_gm, s->band_rows,
             s->band_rows && s->band_gm >= 1.10 ? "met" : "NOT met");
    snprintf(lines[3], 200, "auto_us within 10%% of bound_us in %d of %d rows (target 80%%): %s",
             s->bound_met, s->bound_rows,
             s->bound_rows && s->bound_met >= 0.8 * s->bound_rows ? "met" : "NOT met");
}
