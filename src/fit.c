/*
 * fit.c - calibration: fit a profile to measured samples (docs/MODEL.md, docs/METRICS.md).
 *
 *   issue     unconstrained bursts (few producers, any B)   T = o + B/r      -> r, o
 *   drain     periodic zero-gap bursts, several K/B splits   slope of end_ns  -> R
 *   capacity  isolated bursts above the knee, per K          Q(K) = V - R(T - o) -> Q, q
 *   drift     free-running trains above the headroom         event model vs measured -> chunk
 *
 * Each step uses only its own experiment, so a number is never tuned to hide another's error;
 * the validation suite (xstage validate) uses schedules none of these saw.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"

static const char sample_header[] =
    "experiment,producers,bytes_per_producer,gap_ns,rows,rep,row,issue_med_ns,issue_max_ns,end_ns";

xs_status xs_samples_add(xs_samples *s, const xs_sample_row *r)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 256;
        xs_sample_row *nv = realloc(s->v, nc * sizeof *nv);
        if (!nv)
            return xs_seterr(XS_ENOMEM, "out of memory for %zu samples", nc);
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = *r;
    return XS_OK;
}

void xs_samples_free(xs_samples *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

xs_status xs_samples_save(const xs_samples *s, const char *path, const char *comment)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return xs_seterr(XS_EIO, "%s: cannot write samples: %s", path, strerror(errno));
    if (comment && *comment) {
        const char *c = comment;
        while (*c) {
            const char *e = strchr(c, '\n');
            size_t n = e ? (size_t)(e - c) : strlen(c);
            fprintf(f, "# %.*s\n", (int)n, c);
            c += n + (e ? 1 : 0);
        }
    }
    fprintf(f, "%s\n", sample_header);
    for (size_t i = 0; i < s->n; i++) {
        const xs_sample_row *r = &s->v[i];
        fprintf(f, "%s,%d,%lld,%.6g,%d,%d,%d,%.1f,%.1f,%.1f\n", r->experiment, r->producers,
                (long long)r->bytes_per_producer, r->gap_ns, r->rows, r->rep, r->row,
                r->issue_med_ns, r->issue_max_ns, r->end_ns);
    }
    if (fclose(f) != 0)
        return xs_seterr(XS_EIO, "%s: write error", path);
    return XS_OK;
}

xs_status xs_samples_load(const char *path, xs_samples *s)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "r");
    if (!f)
        return xs_seterr(XS_EIO, "%s: cannot open samples: %s", path, strerror(errno));
    char line[1024];
    int lineno = 0, header = 0;
    xs_status st = XS_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r'))
            line[--l] = 0;
        if (!l || line[0] == '#')
            continue;
        if (!header) {
            if (strcmp(line, sample_header)) {
                st = xs_seterr(XS_EPARSE, "%s:%d: expected the header '%s'", path, lineno,
                               sample_header);
                break;
            }
            header = 1;
            continue;
        }
        xs_sample_row r;
        memset(&r, 0, sizeof r);
        long long b;
        int used = 0;
        int n = sscanf(line, "%15[^,],%d,%lld,%lf,%d,%d,%d,%lf,%lf,%lf%n", r.experiment,
                       &r.producers, &b, &r.gap_ns, &r.rows, &r.rep, &r.row, &r.issue_med_ns,
                       &r.issue_max_ns, &r.end_ns, &used);
        if (n != 10 || line[used] != 0 || r.producers < 1 || b < 1 || r.rows < 1 || r.row < 0 ||
            r.row >= r.rows || !isfinite(r.issue_max_ns) || !isfinite(r.end_ns)) {
            st = xs_seterr(XS_EPARSE, "%s:%d: malformed sample row", path, lineno);
            break;
        }
        r.bytes_per_producer = b;
        st = xs_samples_add(s, &r);
        if (st != XS_OK)
            break;
    }
    fclose(f);
    if (st == XS_OK && !header)
        st = xs_seterr(XS_EPARSE, "%s: no samples", path);
    if (st != XS_OK)
        xs_samples_free(s);
    return st;
}

static int is(const xs_sample_row *r, const char *e) { return !strcmp(r->experiment, e); }

/* issue: least squares of issue_med = o + B/r over the unconstrained bursts */
static xs_status fit_issue(const xs_samples *s, xs_profile *p, xs_fit_report *rep)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int n = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!is(&s->v[i], "issue"))
            continue;
        double x = (double)s->v[i].bytes_per_producer, y = s->v[i].issue_med_ns;
        sx += x; sy += y; sxx += x * x; sxy += x * y;
        n++;
    }
    rep->n_issue = n;
    if (n < 3)
        return xs_seterr(XS_EINVAL, "calibration: %d 'issue' samples; at least 3 needed", n);
    double det = n * sxx - sx * sx;
    if (!(det > 0))
        return xs_seterr(XS_EINVAL, "calibration: 'issue' samples need two or more sizes");
    double slope = (n * sxy - sx * sy) / det, icpt = (sy - slope * sx) / n;
    if (!(slope > 0))
        return xs_seterr(XS_ERANGE, "calibration: issue time does not grow with the burst size "
                         "(slope %g ns/byte)", slope);
    p->issue_bytes_per_ns = 1 / slope;
    p->issue_overhead_ns = icpt > 0 ? icpt : 0;
    double *res = malloc((size_t)n * sizeof *res);
    if (!res)
        return xs_seterr(XS_ENOMEM, "out of memory");
    int k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!is(&s->v[i], "issue"))
            continue;
        double pred = p->issue_overhead_ns + s->v[i].bytes_per_producer / p->issue_bytes_per_ns;
        res[k++] = fabs(pred - s->v[i].issue_med_ns) / s->v[i].issue_med_ns;
    }
    rep->issue_resid_med = xs_median(res, (size_t)k);
    rep->issue_resid_max = xs_max(res, (size_t)k);
    free(res);
    return XS_OK;
}

/* drain: for each periodic zero-gap run, bytes per ns over its second half (steady state) */
static xs_status fit_drain(const xs_samples *s, xs_profile *p, xs_fit_report *rep)
{
    double split_r[16][64];
    int split_n[16] = {0};
    int64_t split_b[16];
    int nsplit = 0;
    for (size_t i = 0; i < s->n; i++) {
        const xs_sample_row *a = &s->v[i];
        if (!is(a, "drain") || a->row != a->rows - 1 || a->rows < 4)
            continue;
        /* find the same run's middle row */
        int mid = a->rows / 2;
        const xs_sample_row *m = NULL;
        for (size_t j = 0; j < s->n; j++) {
            const xs_sample_row *b = &s->v[j];
            if (is(b, "drain") && b->producers == a->producers &&
                b->bytes_per_producer == a->bytes_per_producer && b->rep == a->rep &&
                b->rows == a->rows && b->row == mid) {
                m = b;
                break;
            }
        }
        if (!m || !(a->end_ns > m->end_ns))
            continue;
        double rr = (double)a->producers * a->bytes_per_producer * (a->row - mid) /
                    (a->end_ns - m->end_ns);
        int k;
        for (k = 0; k < nsplit; k++)
            if (rep->drain_split_k[k] == a->producers && split_b[k] == a->bytes_per_producer)
                break;
        if (k == nsplit) {
            if (nsplit == 16)
                continue;
            rep->drain_split_k[k] = a->producers;
            split_b[k] = a->bytes_per_producer;
            nsplit++;
        }
        if (split_n[k] < 64)
            split_r[k][split_n[k]++] = rr;
    }
    rep->n_splits = nsplit;
    if (nsplit == 0)
        return xs_seterr(XS_EINVAL, "calibration: no complete 'drain' runs (periodic zero-gap "
                         "trains of 4 or more rows)");
    double med[16];
    for (int k = 0; k < nsplit; k++) {
        med[k] = xs_median(split_r[k], (size_t)split_n[k]);
        rep->drain_by_split[k] = med[k];
        rep->n_drain += split_n[k];
    }
    p->drain_bytes_per_ns = xs_median(med, (size_t)nsplit);
    rep->drain_spread = (xs_max(med, (size_t)nsplit) - xs_min(med, (size_t)nsplit)) /
                        p->drain_bytes_per_ns;
    return XS_OK;
}

/* capacity: Q(K) from stalled isolated bursts, then (Q, q) of min(Q, K q) in log space */
static xs_status fit_capacity(const xs_samples *s, xs_profile *p, xs_fit_report *rep)
{
    int ks[32], nk = 0;
    double vmax = 0;
    for (size_t i = 0; i < s->n; i++) {
        const xs_sample_row *a = &s->v[i];
        if (!is(a, "capacity"))
            continue;
        double v = (double)a->producers * a->bytes_per_producer;
        vmax = v > vmax ? v : vmax;
        int k;
        for (k = 0; k < nk; k++)
            if (ks[k] == a->producers)
                break;
        if (k == nk && nk < 32)
            ks[nk++] = a->producers;
    }
    double qk[32];
    int nq = 0;
    double est[512];
    for (int k = 0; k < nk; k++) {
        int ne = 0;
        for (size_t i = 0; i < s->n && ne < 512; i++) {
            const xs_sample_row *a = &s->v[i];
            if (!is(a, "capacity") || a->producers != ks[k])
                continue;
            rep->n_capacity++;
            double t0 = p->issue_overhead_ns + a->bytes_per_producer / p->issue_bytes_per_ns;
            /* clearly stalled: well above the unconstrained time */
            if (a->issue_max_ns < 1.3 * t0 + 500)
                continue;
            est[ne++] = (double)a->producers * a->bytes_per_producer -
                        p->drain_bytes_per_ns * (a->issue_max_ns - p->issue_overhead_ns);
        }
        rep->capacity_k[k] = ks[k];
        rep->capacity_by_k[k] = ne ? xs_median(est, (size_t)ne) : 0;
        if (ne && rep->capacity_by_k[k] > 0) {
            rep->capacity_k[nq] = ks[k];
            rep->capacity_by_k[nq] = rep->capacity_by_k[k];
            qk[nq++] = rep->capacity_by_k[k];
        }
    }
    rep->n_k = nq;
    if (rep->n_capacity == 0)
        return xs_seterr(XS_EINVAL, "calibration: no 'capacity' samples");
    if (nq == 0) {
        /* never stalled (local HBM): the capacity is at least the largest burst tried */
        p->capacity_bytes = vmax;
        p->capacity_bytes_per_producer = 0;
        snprintf(rep->notes + strlen(rep->notes), sizeof rep->notes - strlen(rep->notes),
                 "no isolated burst stalled (up to %.3g bytes): capacity is a lower bound; ",
                 vmax);
        return XS_OK;
    }
    double lo = xs_min(qk, (size_t)nq), hi = xs_max(qk, (size_t)nq);
    double qlo = INFINITY, qhi = 0;
    for (int k = 0; k < nq; k++) {
        double per = qk[k] / rep->capacity_k[k];
        qlo = per < qlo ? per : qlo;
        qhi = per > qhi ? per : qhi;
    }
    double best = INFINITY, bq = hi, bp = 0;
    for (int i = 0; i <= 240; i++) {
        double Q = lo * 0.5 * pow(4 * hi / lo, i / 240.0);
        for (int j = -1; j <= 240; j++) {
            double q = j < 0 ? 0 : qlo * 0.5 * pow(4 * qhi / qlo, j / 240.0);
            double err = 0;
            for (int k = 0; k < nq; k++) {
                double m = q > 0 && rep->capacity_k[k] * q < Q ? rep->capacity_k[k] * q : Q;
                double e = log(m / qk[k]);
                err += e * e;
            }
            if (err < best - 1e-12) {
                best = err;
                bq = Q;
                bp = q;
            }
        }
    }
    p->capacity_bytes = bq;
    p->capacity_bytes_per_producer = bp;
    double res[32];
    for (int k = 0; k < nq; k++) {
        double m = bp > 0 && rep->capacity_k[k] * bp < bq ? rep->capacity_k[k] * bp : bq;
        res[k] = fabs(m - qk[k]) / qk[k];
    }
    rep->capacity_resid_med = xs_median(res, (size_t)nq);
    rep->capacity_resid_max = xs_max(res, (size_t)nq);
    return XS_OK;
}

/* The drift runs as schedules: one per (producers, bytes, gap, rows, rep). */
typedef struct {
    int k, rows, rep;
    int64_t b;
    double g;
    double *meas_max, *meas_end; /* [rows] */
} drift_run;

static double drift_error(const xs_profile *p, const drift_run *runs, int nruns)
{
    double err = 0;
    int n = 0;
    for (int i = 0; i < nruns; i++) {
        xs_schedule sc = {0};
        for (int r = 0; r < runs[i].rows; r++)
            if (xs_schedule_append(&sc, runs[i].k, runs[i].b, r + 1 < runs[i].rows ? runs[i].g
                                                                                    : 0) != XS_OK)
                break;
        xs_result res;
        if (xs_simulate(p, &sc, NULL, &res) == XS_OK) {
            for (int r = 0; r < runs[i].rows; r++) {
                if (runs[i].meas_max[r] > 0) {
                    err += fabs(res.rows[r].issue_max_ns - runs[i].meas_max[r]) /
                           runs[i].meas_max[r];
                    n++;
                }
            }
            int last = runs[i].rows - 1;
            if (runs[i].meas_end[last] > 0) {
                err += fabs(res.rows[last].end_ns - runs[i].meas_end[last]) /
                       runs[i].meas_end[last];
                n++;
            }
            xs_result_free(&res);
        } else {
            err += 10;
            n++;
        }
        xs_schedule_free(&sc);
    }
    return n ? err / n : INFINITY;
}

static xs_status fit_chunk(const xs_samples *s, xs_profile *p, xs_fit_report *rep)
{
    drift_run runs[64];
    int nruns = 0;
    for (size_t i = 0; i < s->n; i++) {
        const xs_sample_row *a = &s->v[i];
        if (!is(a, "drift"))
            continue;
        rep->n_drift++;
        int k;
        for (k = 0; k < nruns; k++)
            if (runs[k].k == a->producers && runs[k].b == a->bytes_per_producer &&
                runs[k].g == a->gap_ns && runs[k].rows == a->rows && runs[k].rep == a->rep)
                break;
        if (k == nruns) {
            if (nruns == 64)
                continue;
            runs[k] = (drift_run){a->producers, a->rows, a->rep, a->bytes_per_producer,
                                  a->gap_ns, calloc((size_t)a->rows, sizeof(double)),
                                  calloc((size_t)a->rows, sizeof(double))};
            if (!runs[k].meas_max || !runs[k].meas_end) {
                free(runs[k].meas_max);
                free(runs[k].meas_end);
                for (int j = 0; j < nruns; j++) { free(runs[j].meas_max); free(runs[j].meas_end); }
                return xs_seterr(XS_ENOMEM, "out of memory");
            }
            nruns++;
        }
        runs[k].meas_max[a->row] = a->issue_max_ns;
        runs[k].meas_end[a->row] = a->end_ns;
    }
    xs_status st = XS_OK;
    if (nruns == 0) {
        snprintf(rep->notes + strlen(rep->notes), sizeof rep->notes - strlen(rep->notes),
                 "no drift samples: chunk_bytes kept at %g; ", p->chunk_bytes);
        rep->chunk_err = NAN;
    } else {
        double best = INFINITY, bc = p->chunk_bytes;
        for (double c = 512; c <= 65536; c *= 2) {
            if (c > p->capacity_bytes ||
                (p->capacity_bytes_per_producer > 0 && c > p->capacity_bytes_per_producer))
                break;
            xs_profile q = *p;
            q.chunk_bytes = c;
            double e = drift_error(&q, runs, nruns);
            if (e < best) {
                best = e;
                bc = c;
            }
        }
        p->chunk_bytes = bc;
        rep->chunk_err = best;
    }
    for (int j = 0; j < nruns; j++) {
        free(runs[j].meas_max);
        free(runs[j].meas_end);
    }
    return st;
}

xs_status xs_fit_profile(const xs_samples *s, xs_profile *p, xs_fit_report *rep)
{
    memset(rep, 0, sizeof *rep);
    XS_TRY(fit_issue(s, p, rep));
    XS_TRY(fit_drain(s, p, rep));
    XS_TRY(fit_capacity(s, p, rep));
    XS_TRY(fit_chunk(s, p, rep));
    p->provisional = 0;
    return xs_profile_check(p, "fitted profile");
}
