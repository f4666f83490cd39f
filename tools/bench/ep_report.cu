/*
 * ep_report.cu - the output of `xstage bench ep` (tools/bench/ep.cu): one CSV row and one table
 * row per point, and the closing summary of a sweep (ratios, how close auto came to the bound,
 * the candidates' counts). docs/EP.md defines every column.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ep_bench.h"
#include "xstage.h"

/* ---- rows -------------------------------------------------------------------------------- */

const char *const ep_csv_header =
    "config,routing,tokens,peers,unfused_us,wave_us,interleaved_us,auto_us,bound_us,verified,"
    "local_us,local_interleaved_us,compute_us,drain_us,cublas_gemm_us,gemm_eff,criterion_met,"
    "auto_schedule,auto_lead,lead,pred_wave_us,pred_interleaved_us,wave_over_interleaved,"
    "wave_over_auto,unfused_p10,unfused_p90,wave_p10,wave_p90,interleaved_p10,interleaved_p90,"
    "auto_p10,auto_p90,stall_tiles,stall_meas_med_us,stall_pred_med_us,stall_abs_err_med_us,"
    "stall_abs_err_p90_us,stall_abs_err_interleaved_us,stall_abs_err_auto_us,local_span_us,"
    "local_issue_bytes_per_ns,rows,remote_mb,max_row_rel_err,criterion_reshaped,auto_paced,"
    "pred_paced_us,pred_auto_us,auto_gate_med_us,stall_meas_med_interleaved_us,"
    "stall_pred_med_interleaved_us,mma_stall_tiles,mma_stall_meas_med_us,"
    "mma_stall_pred_med_us,mma_stall_abs_err_med_us,mma_stall_abs_err_p90_us,"
    "mma_stall_abs_err_interleaved_us,mma_stall_abs_err_auto_us,mma_stall_meas_med_interleaved_us,"
    "mma_stall_pred_med_interleaved_us,blocked_pred_wave_us,blocked_pred_interleaved_us,"
    "block_bytes,block_speed,pace_bytes,point_s,model_s,fill_us,drain_bound,couriers,"
    "courier_pace,courier_schedule,courier_us,courier_p10,courier_p90,pred_courier_us,"
    "auto_couriers,wave_over_courier,wave_bulk_us,wave_bulk_p10,wave_bulk_p90,interleaved_bulk_us,"
    "interleaved_bulk_p10,interleaved_bulk_p90,auto_bulk_us,auto_bulk_p10,auto_bulk_p90,"
    "wave_bulk_over_interleaved_bulk,wave_over_auto_bulk,auto_over_auto_bulk,"
    "mma_stall_meas_med_auto_us,mma_stall_meas_med_wave_bulk_us,"
    "mma_stall_meas_med_interleaved_bulk_us,mma_stall_meas_med_auto_bulk_us,adaptive_us,"
    "adaptive_p10,adaptive_p90,pred_adaptive_us,adaptive_ahead_us,wave_over_adaptive,"
    "auto_over_adaptive,mma_stall_meas_med_adaptive_us,auto_defer_us,auto_defer_p10,"
    "auto_defer_p90,wave_over_auto_defer,auto_over_auto_defer,mma_stall_meas_med_auto_defer_us,"
    "auto_defer_gate_med_us,defer_kernel,auto_defer_deferred_frac,pred_spill_us,auto_spill,"
    "auto_lead_end,pred_paced_plain_us,auto_fixed_us,auto_fixed_p10,auto_fixed_p90,"
    "auto_over_auto_fixed,auto_fixed_lead,auto_fixed_lead_end,pred_auto_fixed_us\n";

void ep_csv_row(FILE *f, const ep_row *r)
{
    const ep_time *t = r->t;
    fprintf(f, "%s,%s,%d,%d,%.1f,%.1f,%.1f,%.1f,%.1f,%s,%.1f,%.1f,%.1f,%.1f,%.1f,%.3f,%d,%s,%d,"
               "%d,%.1f,%.1f,%.4f,%.4f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%d,%.3f,%.3f,%.3f,"
               "%.3f,%.3f,%.3f,%.3f,%.1f,%d,%.2f,%.3g,%d,%d,%.1f,%.1f,%.3f,%.3f,%.3f,%d,%.3f,%.3f,"
               "%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.1f,%.1f,%.0f,%.3f,%.0f,%.3f,%.3f,%.1f,%d,%d,%.3f,"
               "%s,%.1f,%.1f,%.1f,%.1f,%d,%.4f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.4f,"
               "%.4f,%.4f,%.3f,%.3f,%.3f,%.3f,%.1f,%.1f,%.1f,%.1f,%.1f,%.4f,%.4f,%.3f,%.1f,%.1f,"
               "%.1f,%.4f,%.4f,%.3f,%.3f,%s,%.3f,%.1f,%d,%d,%.1f,%.1f,%.1f,%.1f,%.4f,%d,%d,%.1f\n",
            r->config, r->routing, r->tokens, r->peers, t[EP_UNFUSED].med, t[EP_WAVE].med,
            t[EP_INTER].med, t[EP_AUTO].med, r->bound_us, r->verified ? "true" : "false",
            r->local.med, r->local_inter.med, r->compute_us, r->drain_us, r->cublas_gemm_us,
            r->gemm_eff, r->criterion_ok, r->auto_choice, r->auto_lead, r->lead, r->pred_wave_us,
            r->pred_inter_us, t[EP_WAVE].med / t[EP_INTER].med, t[EP_WAVE].med / t[EP_AUTO].med,
            t[EP_UNFUSED].p10, t[EP_UNFUSED].p90, t[EP_WAVE].p10, t[EP_WAVE].p90,
            t[EP_INTER].p10, t[EP_INTER].p90, t[EP_AUTO].p10, t[EP_AUTO].p90,
            r->stall_wave.tiles, r->stall_wave.meas_stall_med_ns / 1e3,
            r->stall_wave.pred_stall_med_ns / 1e3, r->stall_wave.abs_err_med_ns / 1e3,
            r->stall_wave.abs_err_p90_ns / 1e3, r->stall_inter.abs_err_med_ns / 1e3,
            r->stall_auto.abs_err_med_ns / 1e3, r->local_span_us, r->local_issue, r->rows,
            r->remote_mb, r->max_rel_err, r->reshape_ok, r->auto_paced, r->pred_paced_us,
            r->pred_auto_us, r->auto_gate_us, r->stall_inter.meas_stall_med_ns / 1e3,
            r->stall_inter.pred_stall_med_ns / 1e3, r->stall_wave.mma_tiles,
            r->stall_wave.mma_meas_med_ns / 1e3, r->stall_wave.mma_pred_med_ns / 1e3,
            r->stall_wave.mma_abs_err_med_ns / 1e3, r->stall_wave.mma_abs_err_p90_ns / 1e3,
            r->stall_inter.mma_abs_err_med_ns / 1e3, r->stall_auto.mma_abs_err_med_ns / 1e3,
            r->stall_inter.mma_meas_med_ns / 1e3, r->stall_inter.mma_pred_med_ns / 1e3,
            r->stall_wave.blocked_ns / 1e3, r->stall_inter.blocked_ns / 1e3, r->block_bytes,
            r->block_speed, r->pace_bytes, r->point_s, r->model_s, r->fill_us, r->drain_bound,
            r->couriers, r->courier_pace, r->courier_sched, t[EP_COURIER].med,
            t[EP_COURIER].p10, t[EP_COURIER].p90, r->pred_courier_us, r->auto_couriers,
            t[EP_WAVE].med / t[EP_COURIER].med, t[EP_WAVE_BULK].med, t[EP_WAVE_BULK].p10,
            t[EP_WAVE_BULK].p90, t[EP_INTER_BULK].med, t[EP_INTER_BULK].p10, t[EP_INTER_BULK].p90,
            t[EP_AUTO_BULK].med, t[EP_AUTO_BULK].p10, t[EP_AUTO_BULK].p90,
            t[EP_WAVE_BULK].med / t[EP_INTER_BULK].med, t[EP_WAVE].med / t[EP_AUTO_BULK].med,
            t[EP_AUTO].med / t[EP_AUTO_BULK].med, r->stall_auto.mma_meas_med_ns / 1e3,
            r->stall_bulk[0].mma_meas_med_ns / 1e3, r->stall_bulk[1].mma_meas_med_ns / 1e3,
            r->stall_bulk[2].mma_meas_med_ns / 1e3, t[EP_ADAPT].med, t[EP_ADAPT].p10,
            t[EP_ADAPT].p90, r->pred_adaptive_us, r->adaptive_ahead_us,
            t[EP_WAVE].med / t[EP_ADAPT].med, t[EP_AUTO].med / t[EP_ADAPT].med,
            r->stall_adapt.mma_meas_med_ns / 1e3, t[EP_AUTO_DEFER].med, t[EP_AUTO_DEFER].p10,
            t[EP_AUTO_DEFER].p90, t[EP_WAVE].med / t[EP_AUTO_DEFER].med,
            t[EP_AUTO].med / t[EP_AUTO_DEFER].med, r->stall_defer.mma_meas_med_ns / 1e3,
            r->defer_gate_us, r->defer_kernel, r->defer_frac, r->pred_spill_us, r->auto_spill,
            r->auto_lead_end, r->pred_paced_plain_us, t[EP_AUTO_FIXED].med, t[EP_AUTO_FIXED].p10,
            t[EP_AUTO_FIXED].p90, t[EP_AUTO].med / t[EP_AUTO_FIXED].med, r->fixed_lead,
            r->fixed_lead_end, r->pred_fixed_us);
    fflush(f);
}

void ep_table_header(void)
{
    printf("%-18s %-8s %5s %2s %9s %9s %11s %9s %9s %9s %8s %6s %6s %-17s %4s %7s %7s %6s "
           "%3s\n", "config", "routing", "T", "N", "unfused", "wave", "interleaved", "auto",
           "courier", "bound", "local", "w/int", "w/auto", "auto", "crit", "stallE", "mmaE",
           "gemm", "ok");
    printf("%-18s %-8s %5s %2s %9s %9s %11s %9s %9s %9s %8s %6s %6s %-17s %4s %7s %7s %6s "
           "%3s\n", "", "", "", "", "(us)", "(us)", "(us)", "(us)", "(us)", "(us)", "(us)", "(x)",
           "(x)", "(choice)", "", "(us)", "(us)", "(eff)", "");
}

void ep_table_row(const ep_row *r)
{
    char choice[40];
    if (!strcmp(r->auto_choice, "interleaved"))
        snprintf(choice, sizeof choice, "inter D=%d%s", r->auto_lead, r->auto_paced ? " p" : "");
    else
        snprintf(choice, sizeof choice, "%s", r->auto_choice);
    if (r->auto_couriers > 0) {
        const size_t k = strlen(choice);
        snprintf(choice + k, sizeof choice - k, " c%d", r->auto_couriers);
    }
    printf("%-18s %-8s %5d %2d %9.1f %9.1f %11.1f %9.1f %9.1f %9.1f %8.1f %6.3f %6.3f %-17s %4s "
           "%7.2f %7.2f %6.2f %3s\n",
           r->config, r->routing, r->tokens, r->peers, r->t[EP_UNFUSED].med, r->t[EP_WAVE].med,
           r->t[EP_INTER].med, r->t[EP_AUTO].med, r->t[EP_COURIER].med, r->bound_us, r->local.med,
           r->t[EP_WAVE].med / r->t[EP_INTER].med, r->t[EP_WAVE].med / r->t[EP_AUTO].med, choice,
           r->criterion_ok ? "met" : r->reshape_ok ? "resh" : "no",
           r->stall_wave.abs_err_med_ns / 1e3, r->stall_wave.mma_abs_err_med_ns / 1e3,
           r->gemm_eff, r->verified ? "yes" : "NO");
    fflush(stdout);
}

static void ep_summary_ratio(const char *name, const double *x, int n)
{
    if (n <= 0) {
        printf("# %-22s no rows\n", name);
        return;
    }
    printf("# %-22s geomean %.3f  median %.3f  max %.3f  min %.3f  (%d rows)\n", name,
           xs_geomean(x, (size_t)n), xs_median(x, (size_t)n), xs_max(x, (size_t)n),
           xs_min(x, (size_t)n), n);
}

/* Column v over bound_us on the rows where the criterion holds as is or reshaped, into q (n of
 * them), and how many are within 10 %, in all and on the rows where only reshaping meets it */
typedef struct {
    int n, near, n_resh, near_resh;
} ep_near;

static ep_near ep_near_bound(const ep_row *rows, int n, int v, double *q)
{
    ep_near nb = {0, 0, 0, 0};
    for (int i = 0; i < n; i++) {
        const ep_row *r = &rows[i];
        const double x = r->t[v].med / r->bound_us;
        if (!(r->criterion_ok || r->reshape_ok) || !isfinite(x))
            continue;
        q[nb.n++] = x;
        nb.near += x <= 1.10;
        if (!r->criterion_ok) {
            nb.n_resh++;
            nb.near_resh += x <= 1.10;
        }
    }
    return nb;
}

static void ep_near_print(const char *label, const double *q, ep_near nb)
{
    char name[48];
    snprintf(name, sizeof name, "%s/bound (met)", label);
    ep_summary_ratio(name, q, nb.n);
    snprintf(name, sizeof name, "%s near bound", label);
    printf("# %-22s %d of %d rows where the criterion holds as is or reshaped within 10%% of "
           "bound_us; %d of %d where only reshaping meets it\n", name, nb.near, nb.n,
           nb.near_resh, nb.n_resh);
}

/* A column next to wave and auto (courier, adaptive, auto_bulk): wave/label and auto/label over
 * the rows where it ran, where it beat auto, and label/bound. q: scratch of n + 1. Returns the
 * rows where it ran. */
static int ep_summary_column(const ep_row *rows, int n, int v, const char *label, double *q)
{
    char name[48];
    int k = 0, faster = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(rows[i].t[v].med) && isfinite(rows[i].t[EP_WAVE].med))
            q[k++] = rows[i].t[EP_WAVE].med / rows[i].t[v].med;
    if (!k)
        return 0;
    snprintf(name, sizeof name, "wave/%s", label);
    ep_summary_ratio(name, q, k);
    k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(rows[i].t[v].med) && isfinite(rows[i].t[EP_AUTO].med)) {
            q[k++] = rows[i].t[EP_AUTO].med / rows[i].t[v].med;
            faster += rows[i].t[v].med < rows[i].t[EP_AUTO].med;
        }
    snprintf(name, sizeof name, "auto/%s", label);
    ep_summary_ratio(name, q, k);
    snprintf(name, sizeof name, "%s < auto", label);
    printf("# %-22s the %s run faster than auto on %d of %d rows\n", name, label, faster, k);
    ep_near_print(label, q, ep_near_bound(rows, n, v, q));
    return k;
}

/* the adaptive column, and its prediction */
static void ep_summary_adaptive(const ep_row *rows, int n, double *q)
{
    if (!ep_summary_column(rows, n, EP_ADAPT, "adaptive", q))
        return;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const double ta = rows[i].t[EP_ADAPT].med;
        if (isfinite(ta) && ta > 0 && isfinite(rows[i].pred_adaptive_us))
            q[k++] = fabs(rows[i].pred_adaptive_us - ta) / ta;
    }
    if (k)
        printf("# %-22s |pred - meas| / meas median %.1f %%, max %.1f %% (%d rows)\n",
               "adaptive prediction", 100 * xs_median(q, (size_t)k), 100 * xs_max(q, (size_t)k),
               k);
}

/* --bulk: the bulk-copy variants against their 16-byte-store twins of the same rounds */
static void ep_summary_bulk(const ep_row *rows, int n, double *q)
{
    int k = 0, ran = 0;
    for (int i = 0; i < n; i++) {
        const double wb = rows[i].t[EP_WAVE_BULK].med, ib = rows[i].t[EP_INTER_BULK].med;
        if (isfinite(wb) && isfinite(ib) && ib > 0)
            q[k++] = wb / ib;
        ran += isfinite(wb) || isfinite(ib) || isfinite(rows[i].t[EP_AUTO_BULK].med);
    }
    if (!ran)
        return;
    printf("# %-22s the combine rows by TMA bulk copies, the same plans, the same rounds\n",
           "bulk");
    ep_summary_ratio("wave_b/interleaved_b", q, k);
    ep_summary_column(rows, n, EP_AUTO_BULK, "auto_bulk", q);
}

void ep_summary(const ep_row *rows, int n)
{
    double *a = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *b = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *c = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *d = (double *)malloc(sizeof(double) * (size_t)(3 * n + 1));
    double *dm = (double *)malloc(sizeof(double) * (size_t)(3 * n + 1));
    double *e = (double *)malloc(sizeof(double) * (size_t)(n + 1)); /* scratch of the columns */
    if (!a || !b || !c || !d || !dm || !e) {
        free(a); free(b); free(c); free(d); free(dm); free(e);
        return;
    }
    int na = 0, nb = 0, nc = 0, nd = 0, ndm = 0, below = 0;
    int met = 0, resh = 0, notmet = 0, inter = 0, paced = 0, chose_c = 0, ncour = 0;
    for (int i = 0; i < n; i++) {
        const ep_row *r = &rows[i];
        double wi = r->t[EP_WAVE].med / r->t[EP_INTER].med;
        double wa = r->t[EP_WAVE].med / r->t[EP_AUTO].med;
        if (isfinite(wi) && wi > 0)
            a[na++] = wi;
        if (isfinite(wa) && wa > 0) {
            b[nb++] = wa;
            below += wa < 0.99;
        }
        if (isfinite(r->gemm_eff) && r->gemm_eff > 0)
            c[nc++] = r->gemm_eff;
        const xs_moe_stall *sv[3] = {&r->stall_wave, &r->stall_inter, &r->stall_auto};
        for (int k = 0; k < 3; k++) {
            if (isfinite(sv[k]->abs_err_med_ns))
                d[nd++] = sv[k]->abs_err_med_ns / 1e3;
            if (isfinite(sv[k]->mma_abs_err_med_ns))
                dm[ndm++] = sv[k]->mma_abs_err_med_ns / 1e3;
        }
        inter += !strcmp(r->auto_choice, "interleaved");
        paced += r->auto_paced;
        met += r->criterion_ok;
        resh += !r->criterion_ok && r->reshape_ok;
        notmet += !r->criterion_ok && !r->reshape_ok;
        chose_c += r->auto_couriers > 0;
        ncour += isfinite(r->t[EP_COURIER].med);
    }
    printf("#\n# summary over %d points (criterion met: %d; not met, met reshaped: %d; not met "
           "even reshaped: %d); auto chose interleaved on %d (paced %d)\n", n, met, resh, notmet,
           inter, paced);
    ep_summary_ratio("wave/interleaved", a, na);
    ep_summary_ratio("wave/auto", b, nb);
    printf("# %-22s %d of %d rows below 0.99\n", "wave/auto < 0.99", below, nb);
    ep_near_print("auto", e, ep_near_bound(rows, n, EP_AUTO, e));
    printf("# %-22s auto chose couriers on %d of %d points; the courier column ran on %d\n",
           "couriers", chose_c, n, ncour);
    ep_summary_column(rows, n, EP_COURIER, "courier", e);
    ep_summary_adaptive(rows, n, e);
    {
        int spilled = 0, paced = 0;
        for (int i = 0; i < n; i++) {
            spilled += rows[i].auto_spill;
            paced += rows[i].auto_paced;
        }
        printf("# %-22s auto ran its plan on the spilling kernel on %d of the %d paced rows\n",
               "spilling", spilled, paced);
        int tapered = 0, moved = 0;
        for (int i = 0; i < n; i++) {
            tapered += rows[i].auto_paced && rows[i].auto_lead_end > 0;
            moved += rows[i].auto_paced && isfinite(rows[i].pred_paced_plain_us) &&
                     rows[i].pred_paced_plain_us > rows[i].pred_paced_us;
        }
        printf("# %-22s the paced plan's lead or taper moved on %d of the %d paced rows "
               "(tapered: %d)\n", "lead search", moved, paced, tapered);
        ep_summary_column(rows, n, EP_AUTO_FIXED, "auto_fixed", e);
        if (n && ep_summary_column(rows, n, EP_AUTO_DEFER, "auto_defer", e))
            printf("# %-22s the auto_defer column ran auto's plans on: %s\n", "auto_defer",
                   rows[0].defer_kernel);
    }
    ep_summary_bulk(rows, n, e);
    ep_summary_ratio("cuBLAS GEMMs / local", c, nc);
    double pt = 0, mt = 0, pmax = 0;
    for (int i = 0; i < n; i++) {
        pt += rows[i].point_s;
        mt += rows[i].model_s;
        pmax = rows[i].point_s > pmax ? rows[i].point_s : pmax;
    }
    printf("# %-22s %.1f s over %d points (worst point %.2f s), of it the host-side model %.2f s\n",
           "wall time", pt, n, pmax, mt);
    if (nd)
        printf("# %-22s issue side: median over runs of the per-tile median |pred - meas| = "
               "%.3f us (max %.3f, %d runs)\n", "stall prediction", xs_median(d, (size_t)nd),
               xs_max(d, (size_t)nd), nd);
    if (ndm)
        printf("# %-22s MMA side: median over runs of the per-tile median |pred - meas| = %.3f "
               "us (max %.3f, %d runs)\n", "stall prediction", xs_median(dm, (size_t)ndm),
               xs_max(dm, (size_t)ndm), ndm);
    free(a); free(b); free(c); free(d); free(dm); free(e);
}

