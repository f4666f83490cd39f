// SPDX-License-Identifier: Apache-2.0
/*
 * ovfit.c - fits the overlap model's per-call constants (include/xstage_overlap.h: the compute
 * call cost, the copy call cost, the GEMM weight-read rate) on recorded pilot lines of bench tp
 * and bench up, on a split disjoint from the rows that judge them.
 *
 *   zcat bench/results/overlap/fit_pilots.log.gz | build/lab/ovfit [-v]
 *
 * Reads a gpu_auto.sh log from stdin: bench tp's rows with their "overlapped pilots, us:
 * C=1 t1, C=2 t2, ...; GEMMs alone (cuBLAS) g" lines, bench up's "# overlapped seq S heads H
 * causal Z peers P (...): C=1 t1 ..." lines with the row's fa_us after them, the profile's R.
 * Fit half: TP llama3-8b rows and UP seq <= 8192 rows; judge half: the others (TP llama3-70b,
 * UP seq 16384). Every pilot (one chunk count of one row) is one point; the score is the mean
 * |log(pred/meas)|. Grid: call 0-20 us and copy call 0-20 us in 250 ns steps, weight rate in
 * {none, 2000..6000 B/ns by 250}. Prints the fitted values and, for the defaults before the
 * fit (3000 ns, 2000 ns, no weight floor), the fitted values and the header's defaults, the
 * error on each half and the regret of the model's chunk choice (measured time at the model's
 * C over the best measured pilot). Bad input: one line and exit 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage_overlap.h"
#include "xstage_tp.h"

enum { MAXROWS = 256, MAXC = 8 };

typedef struct {
    int up;             /* 0: TP row, 1: UP row */
    int fit;            /* 1: in the fit half */
    char what[96];      /* the row's label */
    xs_tp_info in;      /* TP */
    int peers;
    double compute_ns;  /* TP: cuBLAS alone; UP: fa_us */
    int seq, heads, causal; /* UP */
    double out_bytes;   /* UP: the whole output, bytes */
    int nc, c[MAXC];    /* the pilots: chunk count and measured median, ns */
    double t[MAXC];
} row;

static row rows[MAXROWS];
static int nrows;
static double R = 0;
static int sms = 0;

static int fail(const char *msg, int line)
{
    fprintf(stderr, "xstage: error: ovfit: line %d: %s\n", line, msg);
    exit(1);
}

static int model_index(const char *name)
{
    for (int i = 0; i < XS_TP_NMODELS; i++)
        if (!strcmp(xs_tp_model_at(i)->name, name))
            return i;
    return -1;
}

/* "C=1 564.4, C=2 532.5" or "C=1 2296.3 C=2 2067.0" up to ';' into r's pilots. */
static void parse_pilots(const char *p, row *r, int line)
{
    r->nc = 0;
    while ((p = strstr(p, "C=")) != NULL) {
        const char *semi = strchr(p, ';');
        int c;
        double t;
        if (sscanf(p, "C=%d %lf", &c, &t) != 2 || r->nc >= MAXC)
            fail("cannot read a pilot (C=<n> <us>)", line);
        r->c[r->nc] = c, r->t[r->nc++] = t * 1e3;
        p += 2;
        if (semi && strstr(p, "C=") > semi)
            break;
    }
    if (r->nc == 0)
        fail("no pilots on an overlapped line", line);
}

static void read_log(FILE *f)
{
    char ln[8192];
    int line = 0, pending_up = -1, last_tp = -1;
    while (fgets(ln, sizeof ln, f)) {
        line++;
        const char *q;
        if (R == 0 && !strncmp(ln, "# profile:", 10) && (q = strstr(ln, " R ")) != NULL)
            R = atof(q + 3);
        if (sms == 0 && (q = strstr(ln, " SMs,")) != NULL && !strncmp(ln, "# device", 8)) {
            const char *b = q;
            while (b > ln && b[-1] != ' ')
                b--;
            sms = atoi(b);
        }
        char op[32], model[32];
        int m, n, k, P;
        if (ln[0] != '#' && sscanf(ln, "%31s %31s %d %d %d %d", op, model, &m, &n, &k, &P) == 6) {
            xs_tp_op o;
            if (xs_tp_op_parse(op, &o) != XS_OK)
                continue;
            if (nrows >= MAXROWS)
                fail("too many rows", line);
            row *r = &rows[nrows];
            memset(r, 0, sizeof *r);
            xs_tp_shape s = {o, m, n, k, P};
            if (xs_tp_info_of(&s, &r->in) != XS_OK)
                fail("a TP row with a shape the library refuses", line);
            r->peers = P;
            r->fit = model_index(model) == 0; /* llama3-8b */
            snprintf(r->what, sizeof r->what, "tp %s %s m %d P %d", op, model, m, P);
            last_tp = nrows++;
            continue;
        }
        if ((q = strstr(ln, "overlapped pilots, us:")) != NULL) {
            if (last_tp < 0)
                fail("a pilot line before its TP row", line);
            row *r = &rows[last_tp];
            parse_pilots(q, r, line);
            const char *g = strstr(ln, "GEMMs alone (cuBLAS) ");
            if (!g || (r->compute_ns = atof(g + 21) * 1e3) <= 0)
                fail("no GEMMs-alone time on the pilot line", line);
            last_tp = -1;
            continue;
        }
        int S, H, Z;
        if (sscanf(ln, "# overlapped seq %d heads %d causal %d peers %d", &S, &H, &Z, &P) == 4) {
            if (nrows >= MAXROWS)
                fail("too many rows", line);
            row *r = &rows[nrows];
            memset(r, 0, sizeof *r);
            r->up = 1, r->seq = S, r->heads = H, r->peers = P, r->causal = Z;
            r->fit = S <= 8192;
            r->out_bytes = (double)S * H * 128 * 2;
            snprintf(r->what, sizeof r->what, "up seq %d heads %d causal %d P %d", S, H, Z, P);
            parse_pilots(strchr(ln, ':') ? strchr(ln, ':') : ln, r, line);
            pending_up = nrows++;
            continue;
        }
        double cm, fa;
        if (pending_up >= 0 && ln[0] != '#' &&
            sscanf(ln, "%d %d %d %d %lf %lf", &S, &H, &Z, &P, &cm, &fa) == 6) {
            row *r = &rows[pending_up];
            if (S != r->seq || H != r->heads || P != r->peers)
                fail("an UP row that does not match its overlapped line", line);
            r->compute_ns = fa * 1e3;
            pending_up = -1;
        }
    }
    if (!(R > 0) || sms <= 0)
        fail("no profile R or SM count in the log", line);
    for (int i = 0; i < nrows; i++)
        if (rows[i].nc == 0 || !(rows[i].compute_ns > 0))
            fail("a row without its pilots or its compute-alone time", line);
}

static double predict(const row *r, const xs_ov_terms *t, int C)
{
    double ns = NAN;
    const xs_status st =
        r->up ? xs_ov_up_predict(r->compute_ns, r->heads, r->seq / 128, sms, r->peers, r->causal,
                                 r->out_bytes, t, C, &ns)
              : xs_ov_tp_predict(&r->in, r->peers, r->compute_ns, t, C, &ns);
    return st == XS_OK ? ns : NAN;
}

typedef struct {
    int n;
    double mean, med, max; /* |log(pred/meas)| as % error: exp() - 1 */
    double regret_med, regret_max; /* measured at the model's C over the best pilot, - 1 */
} score;

static int cmpd(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* half: 1 fit, 0 judge, -1 all; which: 0 both, 1 TP only, 2 UP only */
static score judge(const xs_ov_terms *t, int half, int which)
{
    static double e[MAXROWS * MAXC], g[MAXROWS];
    score s = {0, 0, 0, 0, 0, 0};
    int ng = 0;
    double sum = 0;
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        if ((half >= 0 && r->fit != half) || (which == 1 && r->up) || (which == 2 && !r->up))
            continue;
        double best = INFINITY, pbest = INFINITY, at = NAN;
        for (int j = 0; j < r->nc; j++) {
            const double p = predict(r, t, r->c[j]);
            const double d = fabs(log(p / r->t[j]));
            e[s.n++] = isfinite(d) ? d : 10;
            sum += e[s.n - 1];
            if (r->t[j] < best)
                best = r->t[j];
            if (p < pbest)
                pbest = p, at = r->t[j];
        }
        g[ng++] = at / best - 1;
    }
    if (!s.n)
        return s;
    s.mean = exp(sum / s.n) - 1;
    qsort(e, (size_t)s.n, sizeof e[0], cmpd);
    s.med = exp(e[s.n / 2]) - 1, s.max = exp(e[s.n - 1]) - 1;
    qsort(g, (size_t)ng, sizeof g[0], cmpd);
    s.regret_med = g[ng / 2], s.regret_max = g[ng - 1];
    return s;
}

static void print_terms(const char *name, const xs_ov_terms *t)
{
    printf("%-8s call %6.0f ns, copy call %6.0f ns, weight rate %6.0f B/ns\n", name, t->call_ns,
           t->copy_call_ns, t->weight_bytes_per_ns);
    static const char *const hn[2] = {"judge", "fit"};
    static const char *const wn[3] = {"tp+up", "tp", "up"};
    for (int h = 1; h >= 0; h--)
        for (int w = 0; w < 3; w++) {
            const score s = judge(t, h, w);
            if (s.n)
                printf("  %-5s %-5s %2d pilots: |err| mean %5.1f%%, median %5.1f%%, max %6.1f%%; "
                       "regret of the model's C: median %4.1f%%, max %5.1f%%\n", hn[h], wn[w],
                       s.n, 100 * s.mean, 100 * s.med, 100 * s.max, 100 * s.regret_med,
                       100 * s.regret_max);
        }
}

int main(int argc, char **argv)
{
    const int verbose = argc > 1 && !strcmp(argv[1], "-v");
    if (argc > 1 && !verbose) {
        fprintf(stderr, "xstage: error: ovfit: usage: zcat LOG.gz | ovfit [-v]\n");
        return 1;
    }
    read_log(stdin);
    int nfit = 0;
    for (int i = 0; i < nrows; i++)
        nfit += rows[i].fit;
    printf("# ovfit: %d rows (%d fit: TP llama3-8b, UP seq <= 8192; %d judge), R %.2f B/ns, "
           "%d SMs\n", nrows, nfit, nrows - nfit, R, sms);
    if (nfit == 0 || nfit == nrows) {
        fprintf(stderr, "xstage: error: ovfit: the split leaves a half empty\n");
        return 1;
    }
    xs_ov_terms t = {R, 0, 0, 0}, best = t;
    double bs = INFINITY;
    for (int w = 7; w <= 24; w++) /* 0 (w = 7): no floor; else 2000..6000 by 250 */
        for (int a = 0; a <= 80; a++)
            for (int b = 0; b <= 80; b++) {
                t.weight_bytes_per_ns = w == 7 ? 0 : 250.0 * w;
                t.call_ns = 250.0 * a, t.copy_call_ns = 250.0 * b;
                const score s = judge(&t, 1, 0);
                if (s.mean < bs)
                    bs = s.mean, best = t;
            }
    const xs_ov_terms old = {R, 2000, 3000, 0};
    xs_ov_terms hdr = xs_ov_terms_default(R);
    print_terms("before", &old);
    print_terms("fitted", &best);
    print_terms("header", &hdr);
    /* the fitted structure without the weight floor, for the record */
    xs_ov_terms nofl = best;
    bs = INFINITY;
    nofl.weight_bytes_per_ns = 0;
    for (int a = 0; a <= 80; a++)
        for (int b = 0; b <= 80; b++) {
            t = nofl, t.call_ns = 250.0 * a, t.copy_call_ns = 250.0 * b;
            const score s = judge(&t, 1, 0);
            if (s.mean < bs)
                bs = s.mean, nofl = t;
        }
    print_terms("nofloor", &nofl);
    if (verbose)
        for (int i = 0; i < nrows; i++) {
            const row *r = &rows[i];
            printf("  %s %-40s", r->fit ? "fit  " : "judge", r->what);
            for (int j = 0; j < r->nc; j++)
                printf(" C=%d %.0f/%.0f", r->c[j], r->t[j] / 1e3, predict(r, &best, r->c[j]) / 1e3);
            printf("  (meas/pred us)\n");
        }
    return 0;
}
