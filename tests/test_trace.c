// SPDX-License-Identifier: Apache-2.0
/*
 * test_trace.c - the trace format v1 (src/trace.c), its conversion to programs and prediction
 * (src/trace_model.c) and the Chrome timeline (src/timeline.c): write/load round trips on random
 * traces, every class of bad trace, the programs of a hand-written trace, the conversion's
 * fidelity (a trace the event model recorded is predicted back on the same profile) and its
 * causality (a measured stall does not move the prediction), the comparison's figures, and the
 * timeline's JSON (jansson) on the recorded tests/data/trace_sim132.csv. Run from the repository
 * root; the first argument is the seed.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xstage.h"
#include "xstage_trace.h"
#include "xt.h"
#include "xt_rand.h"

#define RECORDED "tests/data/trace_sim132.csv"

static char tmpdir[64];

static const char *tmp(const char *name)
{
    static char path[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", tmpdir, name);
    return path[k];
}

/* A random valid trace: K CTAs of 0..T tiles, times on a large clock, work spans on some. */
static xs_trace_record *random_records(int K, int T, size_t *n)
{
    xs_trace_record *r = calloc((size_t)K * T + 1, sizeof *r);
    *n = 0;
    const int64_t clock0 = INT64_C(1700000000000000000) + (int64_t)(xt_rng() % 1000000);
    for (int c = 0; c < K; c++) {
        const int tiles = (int)(xt_rng() % (uint64_t)(T + 1));
        int64_t t = clock0 + (int64_t)(xt_rng() % 5000);
        for (int j = 0; j < tiles; j++) {
            xs_trace_record x = {.cta = c, .sm = (c * 5) % 1000, .seq = j};
            x.bytes = xt_rng() % 8 == 0 ? 0 : (int64_t)(xt_rng() % 1000000);
            if (xt_rng() % 2) {
                x.flags = XS_TRACE_WORK;
                x.work_start_ns = t;
                x.work_end_ns = t + (int64_t)(xt_rng() % 3000);
                t = x.work_end_ns + (int64_t)(xt_rng() % 50);
            } else {
                x.work_start_ns = x.work_end_ns = -1;
                t += (int64_t)(xt_rng() % 3000);
            }
            x.issue_start_ns = t;
            x.issue_end_ns = t + (int64_t)(xt_rng() % 20000);
            t = x.issue_end_ns;
            r[(*n)++] = x;
        }
    }
    /* any order in the file: shuffle */
    for (size_t i = *n; i > 1; i--) {
        size_t j = xt_rng() % i;
        xs_trace_record s = r[i - 1];
        r[i - 1] = r[j];
        r[j] = s;
    }
    return r;
}

static const xs_trace_record *find(const xs_trace_record *r, size_t n, int cta, int seq)
{
    for (size_t i = 0; i < n; i++)
        if (r[i].cta == cta && r[i].seq == seq)
            return &r[i];
    return NULL;
}

static void test_round_trip(void)
{
    for (int rep = 0; rep < 20; rep++) {
        size_t n;
        xs_trace_record *r = random_records(1 + (int)(xt_rng() % 40), 1 + (int)(xt_rng() % 30), &n);
        if (n == 0) { /* at least one record */
            r[0] = (xs_trace_record){.cta = 0, .issue_start_ns = 5, .issue_end_ns = 9};
            n = 1;
        }
        const char *meta[] = {"capacity=100000", "producers=40", "device=NVIDIA H200",
                              "target=host", "kernel=my_kernel<128>", "clock=globaltimer",
                              "future_key=ignored", NULL};
        XT_CHECK(xs_trace_write(tmp("rt.csv"), r, n, 0, meta) == XS_OK, "write: %s", xs_errmsg());
        xs_trace t;
        xs_status st = xs_trace_load(tmp("rt.csv"), &t);
        XT_CHECK(st == XS_OK, "load: %s", xs_errmsg());
        if (st != XS_OK) {
            free(r);
            return;
        }
        XT_CHECK(t.n == n, "%zu records, wrote %zu", t.n, n);
        int64_t origin = INT64_MAX, end = 0, maxcta = 0;
        size_t nwork = 0;
        for (size_t i = 0; i < n; i++) {
            if (r[i].issue_start_ns < origin) origin = r[i].issue_start_ns;
            if ((r[i].flags & XS_TRACE_WORK) && r[i].work_start_ns < origin)
                origin = r[i].work_start_ns;
            if (r[i].cta > maxcta) maxcta = r[i].cta;
            nwork += (r[i].flags & XS_TRACE_WORK) != 0;
        }
        for (size_t i = 0; i < n; i++)
            if (r[i].issue_end_ns - origin > end) end = r[i].issue_end_ns - origin;
        XT_CHECK(t.origin_ns == origin, "origin %lld, expected %lld", (long long)t.origin_ns,
                 (long long)origin);
        XT_CHECK(t.end_ns == end, "end %lld, expected %lld", (long long)t.end_ns, (long long)end);
        XT_CHECK(t.ncta == maxcta + 1, "ncta %d", t.ncta);
        XT_CHECK(t.nwork == nwork, "nwork %zu, expected %zu", t.nwork, nwork);
        XT_CHECK(t.capacity == 100000 && t.producers == 40, "capacity %llu producers %d",
                 (unsigned long long)t.capacity, t.producers);
        XT_CHECK(!strcmp(t.device, "NVIDIA H200") && !strcmp(t.target, "host") &&
                     !strcmp(t.kernel, "my_kernel<128>"),
                 "metadata '%s' '%s' '%s'", t.device, t.target, t.kernel);
        int bad = 0;
        for (size_t i = 0; i < t.n; i++) {
            const xs_trace_record *a = &t.recs[i], *b = find(r, n, a->cta, a->seq);
            const int w = (a->flags & XS_TRACE_WORK) != 0;
            if (!b || a->sm != b->sm || a->bytes != b->bytes || w != ((b->flags & 1) != 0) ||
                a->issue_start_ns != b->issue_start_ns - origin ||
                a->issue_end_ns != b->issue_end_ns - origin ||
                (w ? a->work_start_ns != b->work_start_ns - origin ||
                         a->work_end_ns != b->work_end_ns - origin
                   : a->work_start_ns != -1 || a->work_end_ns != -1))
                bad++;
            if (i && (t.recs[i - 1].cta > a->cta ||
                      (t.recs[i - 1].cta == a->cta && t.recs[i - 1].seq + 1 != a->seq)))
                bad++;
        }
        XT_CHECK(bad == 0, "%d records differ after the round trip or are out of order", bad);
        for (int c = 0; c < t.ncta; c++)
            for (size_t i = t.first[c]; i < t.first[c + 1]; i++)
                if (t.recs[i].cta != c)
                    bad++;
        XT_CHECK(bad == 0 && t.first[t.ncta] == t.n, "first[] does not index the CTAs");
        /* the same records in memory give the same trace */
        xs_trace u;
        XT_CHECK(xs_trace_build(r, n, "mem", &u) == XS_OK, "build: %s", xs_errmsg());
        XT_CHECK(u.n == t.n && !memcmp(u.recs, t.recs, t.n * sizeof *t.recs) &&
                     u.origin_ns == t.origin_ns,
                 "build differs from load");
        xs_trace_free(&u);
        xs_trace_free(&t);
        free(r);
    }
}

/* A trace text: the version line and '# dropped=0' unless the body replaces them. */
static xs_status parse_text(const char *text, xs_trace *t)
{
    return xs_trace_parse(text, strlen(text), "bad.csv", t);
}

#define V1 "# xstage-trace v1\n"
#define HDR "cta,sm,seq,bytes,issue_start_ns,issue_end_ns,work_start_ns,work_end_ns\n"

static void expect_bad(const char *text, const char *where, const char *what)
{
    xs_trace t;
    xs_status st = parse_text(text, &t);
    const char *m = xs_errmsg();
    XT_CHECK(st != XS_OK, "accepted: %s", text);
    XT_CHECK(t.recs == NULL && t.n == 0, "a failed load keeps records");
    XT_CHECK(!strncmp(m, where, strlen(where)) && strstr(m, what) && !strchr(m, '\n'),
             "message '%s' lacks '%s' ... '%s'", m, where, what);
    if (st == XS_OK)
        xs_trace_free(&t);
}

static void test_bad(void)
{
    expect_bad("", "bad.csv:", "empty");
    expect_bad("# xstage-trace v2\n# dropped=0\n" HDR "0,0,0,1,1,2,-1,-1\n", "bad.csv:1:",
               "unsupported trace version 'v2'");
    expect_bad("cta,sm\n", "bad.csv:1:", "not an xstage trace");
    expect_bad(V1, "bad.csv:1:", "no header");
    expect_bad(V1 "# dropped=0\n", "bad.csv:2:", "no header");
    expect_bad(V1 HDR "0,0,0,1,1,2,-1,-1\n", "bad.csv:2:", "dropped");
    expect_bad(V1 "# dropped=12\n" HDR "0,0,0,1,1,2,-1,-1\n", "bad.csv:2:",
               "trace overflowed: 12 records dropped; raise the capacity");
    expect_bad(V1 "# dropped=0\n# dropped=0\n" HDR, "bad.csv:3:", "twice");
    expect_bad(V1 "# dropped=0\n" HDR, "bad.csv:3:", "no records");
    /* truncated: a cut last line, a missing field */
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,1,2,-1,-1\n0,0,1,1,3,4,-1", "bad.csv:5:",
               "too few fields");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,1,2,-1,-1\n0,0,1,1,3,4,-1,-1", "bad.csv:5:",
               "no line break");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,1,2,-1,-1,7\n", "bad.csv:4:", "too many fields");
    expect_bad(V1 "# dropped=0\n" "cta,sm,seq,bytes\n", "bad.csv:3:", "expected the header");
    /* negative, reversed, malformed, huge */
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,-5,2,-1,-1\n", "bad.csv:4:",
               "issue_start_ns -5 is negative");
    expect_bad(V1 "# dropped=0\n" HDR "-1,0,0,1,1,2,-1,-1\n", "bad.csv:4:", "cta -1 is negative");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,-8,1,2,-1,-1\n", "bad.csv:4:", "bytes -8");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,10,9,-1,-1\n", "bad.csv:4:",
               "reversed issue span");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,10,19,8,3\n", "bad.csv:4:", "reversed work span");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,10,19,-1,3\n", "bad.csv:4:", "half recorded");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,10,19,-2,3\n", "bad.csv:4:", "negative");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1.5,10,19,-1,-1\n", "bad.csv:4:",
               "bytes '1.5' is not an integer");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,x,10,19,-1,-1\n", "bad.csv:4:", "not an integer");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,10,99999999999999999999,-1,-1\n", "bad.csv:4:",
               "out of range");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,10,19,-1,-1\n1,0,0,1,1,2000000000000000,-1,-1\n",
               "bad.csv:5:", "at most 1000 s");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,2000000000000,10,19,-1,-1\n", "bad.csv:4:",
               "outside 0..2^40");
    expect_bad(V1 "# dropped=0\n" HDR "70000,0,0,1,10,19,-1,-1\n", "bad.csv:4:", "cta 70000");
    /* across records: seq, overlap, SM */
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,1,2,-1,-1\n0,0,2,1,3,4,-1,-1\n", "bad.csv:5:",
               "not contiguous");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,1,1,1,2,-1,-1\n", "bad.csv:4:", "starts at seq 1");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,1,2,-1,-1\n0,0,0,1,3,4,-1,-1\n", "bad.csv:5:",
               "seq 0 again (first at line 4)");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,1,1,5,9,-1,-1\n0,0,0,1,1,6,-1,-1\n", "bad.csv:4:",
               "overlapping issue spans");
    expect_bad(V1 "# dropped=0\n" HDR "0,0,0,1,1,2,-1,-1\n0,3,1,1,3,4,-1,-1\n", "bad.csv:5:",
               "on SM 3");
    /* metadata */
    expect_bad(V1 "# dropped=0\n# target=nvlink\n" HDR "0,0,0,1,1,2,-1,-1\n", "bad.csv:3:",
               "target 'nvlink'");
    expect_bad(V1 "# dropped=0\n# clock=clock64\n" HDR "0,0,0,1,1,2,-1,-1\n", "bad.csv:3:",
               "clock 'clock64'");
    expect_bad(V1 "# dropped=0\n# producers=2\n" HDR "2,0,0,1,1,2,-1,-1\n", "bad.csv:5:",
               "producers=2");
    expect_bad(V1 "# dropped=0\n# capacity=1\n" HDR "0,0,0,1,1,2,-1,-1\n1,0,0,1,1,2,-1,-1\n",
               "bad.csv:", "capacity=1");
    expect_bad(V1 "# dropped=-1\n" HDR "0,0,0,1,1,2,-1,-1\n", "bad.csv:2:", "negative");
    /* good: comments, blank lines, CRLF, unknown keys, records in any order */
    xs_trace t;
    xs_status st = parse_text(V1 "# dropped=0\r\n# a comment\n\n# zz_new=1\n" HDR
                              "1,4,0,10,100,110,-1,-1\r\n0,2,1,5,50,60,45,49\n"
                              "0,2,0,5,20,40,-1,-1\n",
                              &t);
    XT_CHECK(st == XS_OK, "good trace refused: %s", xs_errmsg());
    if (st == XS_OK) {
        XT_CHECK(t.n == 3 && t.ncta == 2 && t.origin_ns == 20 && t.end_ns == 90 && t.nwork == 1,
                 "n %zu ncta %d origin %lld end %lld", t.n, t.ncta, (long long)t.origin_ns,
                 (long long)t.end_ns);
        XT_CHECK(t.recs[1].work_start_ns == 25 && t.recs[0].work_start_ns == -1,
                 "work rebased: %lld", (long long)t.recs[1].work_start_ns);
        xs_trace_free(&t);
    }
    /* the writer refuses what a reader could not read back */
    xs_trace_record r = {.issue_start_ns = 1, .issue_end_ns = 2};
    const char *m1[] = {"two\nlines=1", NULL}, *m2[] = {"dropped=3", NULL},
               *m3[] = {"Key=1", NULL};
    XT_CHECK(xs_trace_write(tmp("w.csv"), &r, 1, 0, m1) == XS_EINVAL, "newline in metadata");
    XT_CHECK(xs_trace_write(tmp("w.csv"), &r, 1, 0, m2) == XS_EINVAL, "dropped as metadata");
    XT_CHECK(xs_trace_write(tmp("w.csv"), &r, 1, 0, m3) == XS_EINVAL, "upper-case key");
    XT_CHECK(xs_trace_write("/nonexistent/dir/w.csv", &r, 1, 0, NULL) == XS_EIO, "bad path");
    /* an overflowed buffer is written as measured and refused on load */
    XT_CHECK(xs_trace_write(tmp("w.csv"), &r, 1, 7, NULL) == XS_OK, "write dropped=7");
    XT_CHECK(xs_trace_load(tmp("w.csv"), &t) == XS_EPARSE &&
                 strstr(xs_errmsg(), "7 records dropped"),
             "dropped=7 loads: %s", xs_errmsg());
}

/* The programs of a hand-written trace, and its prediction where nothing pushes back. */
static void test_programs(void)
{
    xs_trace t;
    /* CTA 0: tiles at 100..200, 260..300 (0 bytes), 350..400; CTA 2: one tile at 30..90;
     * CTA 1 has none */
    const char *text = V1 "# dropped=0\n" HDR "0,1,0,4096,100,200,-1,-1\n"
                          "0,1,1,0,260,300,-1,-1\n0,1,2,8192,350,400,300,340\n"
                          "2,9,0,1024,30,90,-1,-1\n";
    xs_status st = parse_text(text, &t);
    XT_CHECK(st == XS_OK, "parse: %s", xs_errmsg());
    if (st != XS_OK)
        return;
    xs_trace_progs pg;
    st = xs_trace_programs(&t, &pg);
    XT_CHECK(st == XS_OK, "programs: %s", xs_errmsg());
    if (st != XS_OK) {
        xs_trace_free(&t);
        return;
    }
    XT_CHECK(pg.sched.nrows == 4 && pg.pg.producers == 3, "rows %d producers %d",
             pg.sched.nrows, pg.pg.producers);
    /* origin 30: CTA 0 starts at 70, CTA 2 at 0 */
    const int64_t eb[4][3] = {{0, 0, 0}, {4096, 0, 1024}, {0, 0, 0}, {8192, 0, 0}};
    /* after tile 0: 260 - 200 = 60; after the empty tile: its 40 ns and 50 to the next */
    const double eg[4][3] = {{70, 0, 0}, {60, 0, 0}, {90, 0, 0}, {0, 0, 0}};
    int bad = 0;
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++)
            if (pg.bytes[r * 3 + c] != eb[r][c] || pg.gap_ns[r * 3 + c] != eg[r][c]) {
                bad++;
                fprintf(stderr, "row %d cta %d: %lld bytes, gap %g\n", r, c,
                        (long long)pg.bytes[r * 3 + c], pg.gap_ns[r * 3 + c]);
            }
    XT_CHECK(bad == 0, "%d program entries differ", bad);
    xs_trace_programs_free(&pg);
    /* no backpressure: each tile in T_iss0 after the previous end plus the gap */
    xs_profile p;
    xs_profile_default(&p);
    p.capacity_bytes = 1e12;
    p.drain_bytes_per_ns = 1e6;
    p.start_ns = 500;      /* ignored: the trace measured the prologue */
    p.row_start_ns = 300;  /* ignored: the gaps hold the set-up */
    xs_trace_prediction pr;
    st = xs_trace_predict(&p, &t, &pr);
    XT_CHECK(st == XS_OK, "predict: %s", xs_errmsg());
    if (st == XS_OK) {
        const double t0 = xs_trace_unstalled_ns(&p, 4096), t2 = xs_trace_unstalled_ns(&p, 8192),
                     tc = xs_trace_unstalled_ns(&p, 1024);
        XT_NEAR(pr.tiles[0].start_ns, 70, 1e-9);
        XT_NEAR(pr.tiles[0].end_ns, 70 + t0, 1e-6);
        XT_NEAR(pr.tiles[1].start_ns, 70 + t0 + 60, 1e-6); /* the empty tile: at its ready time */
        XT_NEAR(pr.tiles[1].end_ns, pr.tiles[1].start_ns + 40, 1e-12); /* as measured */
        XT_NEAR(pr.tiles[2].start_ns, 70 + t0 + 60 + 90, 1e-6);
        XT_NEAR(pr.tiles[2].end_ns, 70 + t0 + 150 + t2, 1e-6);
        XT_CHECK(fabs(pr.tiles[3].start_ns) < 1e-9, "CTA 2 starts at %g", pr.tiles[3].start_ns);
        XT_NEAR(pr.tiles[3].end_ns, tc, 1e-6);
        for (size_t i = 0; i < t.n; i++) /* nothing stalls: the zero predictor agrees */
            XT_CHECK(fabs(pr.tiles[i].zero_start_ns - pr.tiles[i].start_ns) < 1e-6 &&
                         fabs(pr.tiles[i].zero_end_ns - pr.tiles[i].end_ns) < 1e-6,
                     "tile %zu: zero %g..%g, model %g..%g", i, pr.tiles[i].zero_start_ns,
                     pr.tiles[i].zero_end_ns, pr.tiles[i].start_ns, pr.tiles[i].end_ns);
        XT_NEAR(pr.end_ns, 70 + t0 + 150 + t2, 1e-6);
        xs_trace_prediction_free(&pr);
    }
    xs_trace_free(&t);
}

/* A contended random kernel simulated on profile p, recorded as a trace (rounded to ns). */
static xs_trace_record *simulate_kernel(const xs_profile *p, int K, int T, size_t *n)
{
    const int nrows = T + 1;
    int64_t *b = calloc((size_t)nrows * K, sizeof *b);
    double *g = calloc((size_t)nrows * K, sizeof *g);
    xs_schedule s = {0};
    for (int r = 0; r < nrows; r++)
        xs_schedule_append(&s, K, 1, 0);
    for (int c = 0; c < K; c++) {
        g[c] = xt_urand() * 3000;
        for (int j = 0; j < T; j++) {
            b[(size_t)(j + 1) * K + c] = xt_rng() % 6 == 0 ? 0 : 16 + (int64_t)(xt_rng() % 200000);
            g[(size_t)(j + 1) * K + c] = xt_urand() * 20000;
        }
    }
    xs_programs pg = {.producers = K, .bytes = b, .gap_ns = g};
    xs_sim_opts so = {.record_windows = 1};
    xs_result res;
    xs_trace_record *rec = calloc((size_t)K * T, sizeof *rec);
    *n = 0;
    if (xs_simulate_programs(p, &s, &pg, &so, &res) == XS_OK) {
        for (int c = 0; c < K; c++) {
            double t = p->start_ns + g[c]; /* the CTA's clock, for tiles that store nothing */
            for (int j = 0; j < T; j++) {
                const size_t at = (size_t)(j + 1) * K + c;
                double a = t + p->row_start_ns, e = a;
                if (b[at] > 0) {
                    a = res.win_start[at];
                    e = res.win_end[at];
                }
                rec[(*n)++] = (xs_trace_record){.cta = c, .sm = c, .seq = j, .bytes = b[at],
                                                .issue_start_ns = 1000000 + llround(a),
                                                .issue_end_ns = 1000000 + llround(e),
                                                .work_start_ns = -1, .work_end_ns = -1};
                t = e + g[at];
            }
        }
        xs_result_free(&res);
    }
    xs_schedule_free(&s);
    free(b);
    free(g);
    return rec;
}

/* The model predicts a trace it recorded itself back (to rounding): the conversion keeps every
 * CTA's start, bytes and own time. Not an accuracy claim: the same model on both sides. */
static void test_fidelity(void)
{
    xs_profile p;
    xs_profile_default(&p);
    p.start_ns = 400;
    p.row_start_ns = 150;
    p.queue_bytes_per_producer = 5632;
    p.chunk_bytes = 4096;
    p.capacity_bytes = 800000;
    for (int rep = 0; rep < 3; rep++) {
        const int K = 16 + (int)(xt_rng() % 120), T = 2 + (int)(xt_rng() % 8);
        size_t n;
        xs_trace_record *r = simulate_kernel(&p, K, T, &n);
        xs_trace t;
        xs_status st = xs_trace_build(r, n, "sim", &t);
        XT_CHECK(st == XS_OK, "build: %s", xs_errmsg());
        xs_trace_prediction pr;
        if (st == XS_OK && (st = xs_trace_predict(&p, &t, &pr)) == XS_OK) {
            xs_trace_summary s;
            XT_CHECK(xs_trace_compare(&p, &t, &pr, &s) == XS_OK, "compare");
            XT_CHECK(fabs(s.total_err_pct) < 0.3, "K %d T %d: total error %.3f %%", K, T,
                     s.total_err_pct);
            /* the trace's ns rounding moves some contended acceptances past each other (gaps
             * moved by +-0.5 ns alone move the median tile by up to ~100 ns on some kernels):
             * the stall errors are bounded against the zero predictor's, not absolutely */
            XT_CHECK(s.issue_err_med_pct < 0.5 &&
                         s.stall_err_med_ns < 0.02 * s.zero_stall_err_med_ns,
                     "K %d T %d: issue error median %.3f %%, stall error median %.1f ns (zero "
                     "predictor %.1f ns)", K, T, s.issue_err_med_pct, s.stall_err_med_ns,
                     s.zero_stall_err_med_ns);
            XT_CHECK(s.nstalled > 0 && s.zero_stalled_err_med_ns > XS_TRACE_STALLED_NS,
                     "contended kernel: %zu stalled tiles", s.nstalled);
            /* the zero-stall predictor: every tile in T_iss0 */
            int bad = 0;
            for (size_t i = 0; i < t.n; i++)
                if (fabs(pr.tiles[i].zero_end_ns - pr.tiles[i].zero_start_ns -
                         xs_trace_unstalled_ns(&p, t.recs[i].bytes)) > 1e-6)
                    bad++;
            XT_CHECK(bad == 0, "%d zero-stall tiles not in T_iss0", bad);
            xs_trace_prediction_free(&pr);
        } else {
            XT_CHECK(0, "predict: %s", xs_errmsg());
        }
        if (st == XS_OK)
            xs_trace_free(&t);
        free(r);
    }
}

/* Causality: lengthening one measured issue window (a stall) and shifting the CTA's later tiles
 * by as much changes no prediction: the programs carry the CTA's own time, not absolute times. */
static void test_causal(void)
{
    xs_profile p;
    xs_profile_default(&p);
    size_t n;
    xs_trace_record *r = simulate_kernel(&p, 40, 6, &n);
    xs_trace a, b;
    XT_CHECK(xs_trace_build(r, n, "a", &a) == XS_OK, "build a: %s", xs_errmsg());
    /* CTA 3's first tile after its first that stores bytes stalls 50 us longer; its later
     * tiles come that much later (a tile that stores nothing cannot stall: its window is the
     * CTA's own time) */
    const int64_t d = 50000;
    int js = -1;
    for (size_t i = 0; i < n; i++)
        if (r[i].cta == 3 && r[i].seq >= 1 && r[i].bytes > 0 && (js < 0 || r[i].seq < js))
            js = r[i].seq;
    XT_CHECK(js > 0, "CTA 3 stores after its first tile");
    for (size_t i = 0; i < n; i++)
        if (r[i].cta == 3 && r[i].seq >= js) {
            if (r[i].seq > js)
                r[i].issue_start_ns += d;
            r[i].issue_end_ns += d;
        }
    XT_CHECK(xs_trace_build(r, n, "b", &b) == XS_OK, "build b: %s", xs_errmsg());
    xs_trace_prediction pa, pb;
    XT_CHECK(xs_trace_predict(&p, &a, &pa) == XS_OK, "predict a");
    XT_CHECK(xs_trace_predict(&p, &b, &pb) == XS_OK, "predict b");
    int same = a.n == b.n;
    for (size_t i = 0; same && i < a.n; i++)
        same = pa.tiles[i].start_ns == pb.tiles[i].start_ns &&
               pa.tiles[i].end_ns == pb.tiles[i].end_ns;
    XT_CHECK(same, "a measured stall moved the prediction");
    xs_trace_summary sa, sb;
    xs_trace_compare(&p, &a, &pa, &sa);
    xs_trace_compare(&p, &b, &pb, &sb);
    XT_CHECK(sb.total_ns >= sa.total_ns, "measured totals %g %g", sa.total_ns, sb.total_ns);
    xs_trace_prediction_free(&pa);
    xs_trace_prediction_free(&pb);
    xs_trace_free(&a);
    xs_trace_free(&b);
    free(r);
}

/* A schedule's windows as a trace (replay --windows): every producer's rows become its tiles,
 * and the trace's programs predict the schedule's own windows back. */
static void test_from_windows(void)
{
    xs_profile p;
    xs_profile_default(&p);
    xs_schedule s = {0};
    xs_schedule_append(&s, 8, 65536, 3000);
    xs_schedule_append(&s, 5, 16384, 0);    /* producers 5..7 take no part */
    xs_schedule_append(&s, 8, 200000, 500);
    xs_sim_opts so = {.record_windows = 1};
    xs_result r;
    XT_CHECK(xs_simulate(&p, &s, &so, &r) == XS_OK, "simulate: %s", xs_errmsg());
    const int sm[3] = {40, 41, 42};
    xs_trace_record *rec;
    size_t n;
    XT_CHECK(xs_trace_from_windows(&s, &r, sm, 3, &rec, &n) == XS_OK, "from windows: %s",
             xs_errmsg());
    XT_CHECK(n == 8 + 5 + 8, "%zu records", n);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const xs_trace_record *x = &rec[i];
        const int row = x->cta < 5 ? x->seq : (x->seq == 0 ? 0 : 2);
        if (x->sm != (x->cta < 3 ? 40 + x->cta : x->cta) ||
            x->bytes != s.rows[row].bytes_per_producer ||
            x->issue_start_ns != llround(r.win_start[(size_t)row * 8 + (size_t)x->cta]))
            bad++;
    }
    XT_CHECK(bad == 0, "%d records differ from the windows", bad);
    xs_trace t;
    XT_CHECK(xs_trace_build(rec, n, "windows", &t) == XS_OK, "build: %s", xs_errmsg());
    xs_trace_prediction pr;
    XT_CHECK(xs_trace_predict(&p, &t, &pr) == XS_OK, "predict: %s", xs_errmsg());
    double worst = 0;
    for (size_t i = 0; i < t.n; i++) {
        const double a = pr.tiles[i].end_ns - pr.tiles[i].start_ns;
        const double b = (double)(t.recs[i].issue_end_ns - t.recs[i].issue_start_ns);
        if (fabs(a - b) > worst)
            worst = fabs(a - b);
    }
    XT_CHECK(worst < 5, "a window predicted back %.1f ns off", worst);
    xs_trace_prediction_free(&pr);
    xs_trace_free(&t);
    free(rec);
    xs_result_free(&r);
    xs_schedule_free(&s);
}

/* The comparison's figures on a hand-made prediction. */
static void test_compare(void)
{
    xs_profile p;
    xs_profile_default(&p);
    p.queue_bytes_per_producer = 0;
    p.issue_overhead_ns = 100;
    p.issue_bytes_per_ns = 10;
    /* four tiles of 1000 bytes: T_iss0 = 200 ns; measured issue 200, 400, 1200, 2200 */
    xs_trace_record r[4];
    const double meas[4] = {200, 400, 1200, 2200}, pred[4] = {220, 300, 1000, 2600};
    int64_t t = 0;
    for (int i = 0; i < 4; i++) {
        r[i] = (xs_trace_record){.cta = 0, .sm = 0, .seq = i, .bytes = 1000, .issue_start_ns = t,
                                 .issue_end_ns = t + (int64_t)meas[i], .work_start_ns = -1,
                                 .work_end_ns = -1};
        t += (int64_t)meas[i] + 100;
    }
    xs_trace tr;
    XT_CHECK(xs_trace_build(r, 4, "cmp", &tr) == XS_OK, "build: %s", xs_errmsg());
    xs_trace_pred tiles[4];
    for (int i = 0; i < 4; i++)
        tiles[i] = (xs_trace_pred){(double)r[i].issue_start_ns,
                                   (double)r[i].issue_start_ns + pred[i], 0, 0};
    xs_trace_prediction pr = {.tiles = tiles, .end_ns = 5000, .zero_end_ns = 1000};
    xs_trace_summary s;
    XT_CHECK(xs_trace_compare(&p, &tr, &pr, &s) == XS_OK, "compare");
    XT_CHECK(s.ntiles == 4, "%zu tiles", s.ntiles);
    XT_NEAR(s.total_ns, 4300, 1e-12);
    XT_NEAR(s.total_err_pct, 100 * (5000 - 4300) / 4300.0, 1e-9);
    XT_NEAR(s.zero_total_err_pct, 100 * (1000 - 4300) / 4300.0, 1e-9);
    /* issue errors 10 %, 25 %, 16.7 %, 18.2 %: median (16.67 + 18.18) / 2 */
    XT_NEAR(s.issue_err_med_pct, (100 * 200 / 1200.0 + 100 * 400 / 2200.0) / 2, 1e-9);
    /* stall errors 20, 100, 200, 400 ns; zero's 0, 200, 1000, 2000 */
    XT_NEAR(s.stall_err_med_ns, 150, 1e-12);
    XT_NEAR(s.zero_stall_err_med_ns, 600, 1e-12);
    /* stalled (> 500 ns): tiles 2 and 3 */
    XT_CHECK(s.nstalled == 2, "%zu stalled", s.nstalled);
    XT_NEAR(s.stalled_err_med_ns, 300, 1e-12);
    XT_NEAR(s.zero_stalled_err_med_ns, 1500, 1e-12);
    XT_NEAR(s.stalled_ratio, 0.2, 1e-12);
    /* one CTA: its last issue ends at 4300 measured, 2100 + 2600 predicted, 0 by the zero one */
    XT_CHECK(s.nctas == 1, "%zu CTAs", s.nctas);
    XT_NEAR(s.cta_err_med_pct, 100 * 400 / 4300.0, 1e-9);
    XT_NEAR(s.zero_cta_err_med_pct, 100, 1e-9);
    xs_trace_free(&tr);
}

/* The Chrome trace of the recorded trace parses and holds both tracks with every field. */
static void test_timeline(void)
{
    xs_trace t;
    xs_status st = xs_trace_load(RECORDED, &t);
    XT_CHECK(st == XS_OK, "%s (run from the repository root)", xs_errmsg());
    if (st != XS_OK)
        return;
    xs_profile p;
    xs_profile_default(&p);
    xs_trace_prediction pr;
    XT_CHECK(xs_trace_predict(&p, &t, &pr) == XS_OK, "predict: %s", xs_errmsg());
    double *ps = malloc(2 * t.n * sizeof *ps);
    for (size_t i = 0; i < t.n; i++) {
        ps[i] = pr.tiles[i].start_ns;
        ps[t.n + i] = pr.tiles[i].end_ns;
    }
    XT_CHECK(xs_timeline_write(tmp("tl.json"), &t, ps, ps + t.n, &p, "a \"quoted\" title") ==
                 XS_OK, "timeline: %s", xs_errmsg());
    json_error_t je;
    json_t *root = json_load_file(tmp("tl.json"), 0, &je);
    XT_CHECK(root != NULL, "timeline does not parse: line %d: %s", je.line, je.text);
    json_t *ev = root ? json_object_get(root, "traceEvents") : NULL;
    XT_CHECK(json_is_array(ev), "no traceEvents array");
    size_t nissue[3] = {0}, nwork = 0, nbad = 0, ntime = 0;
    int named[3] = {0};
    for (size_t k = 0; ev && k < json_array_size(ev); k++) {
        json_t *e = json_array_get(ev, k);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const json_int_t pid = json_integer_value(json_object_get(e, "pid"));
        if (!ph || pid < 1 || pid > 2) {
            nbad++;
            continue;
        }
        if (!strcmp(ph, "M")) {
            const char *name = json_string_value(json_object_get(e, "name"));
            const char *arg =
                json_string_value(json_object_get(json_object_get(e, "args"), "name"));
            if (name && arg && !strcmp(name, "process_name"))
                named[pid] = !strcmp(arg, pid == 1 ? "measured" : "predicted");
            continue;
        }
        json_t *args = json_object_get(e, "args");
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (strcmp(ph, "X") || !json_is_string(json_object_get(e, "name")) || !cat ||
            !json_is_number(json_object_get(e, "ts")) ||
            !json_is_number(json_object_get(e, "dur")) ||
            !json_is_integer(json_object_get(e, "tid")) ||
            !json_is_integer(json_object_get(args, "bytes")) ||
            !json_is_integer(json_object_get(args, "seq"))) {
            nbad++;
            continue;
        }
        const int cta = (int)json_integer_value(json_object_get(e, "tid"));
        const int seq = (int)json_integer_value(json_object_get(args, "seq"));
        if (cta < 0 || cta >= t.ncta || seq < 0 ||
            (size_t)seq >= t.first[cta + 1] - t.first[cta]) {
            nbad++;
            continue;
        }
        const size_t i = t.first[cta] + (size_t)seq;
        const double ts = json_number_value(json_object_get(e, "ts")) * 1e3;
        const double dur = json_number_value(json_object_get(e, "dur")) * 1e3;
        if (!strcmp(cat, "work")) {
            nwork++;
            continue;
        }
        nissue[pid]++;
        const double a = pid == 1 ? (double)t.recs[i].issue_start_ns : pr.tiles[i].start_ns;
        const double b = pid == 1 ? (double)t.recs[i].issue_end_ns : pr.tiles[i].end_ns;
        if (fabs(ts - a) > 1 || fabs(dur - (b - a)) > 1 ||
            json_integer_value(json_object_get(args, "bytes")) != t.recs[i].bytes)
            ntime++;
    }
    XT_CHECK(nbad == 0, "%zu events without the documented fields", nbad);
    XT_CHECK(nissue[1] == t.n && nissue[2] == t.n, "issue events: %zu measured, %zu predicted, "
             "%zu tiles", nissue[1], nissue[2], t.n);
    XT_CHECK(nwork == t.nwork, "%zu work events, %zu work spans", nwork, t.nwork);
    XT_CHECK(ntime == 0, "%zu events with other times or bytes than the tiles'", ntime);
    XT_CHECK(named[1] && named[2], "process names: measured %d, predicted %d", named[1],
             named[2]);
    const char *title = root ? json_string_value(json_object_get(
                                   json_object_get(root, "otherData"), "title"))
                             : NULL;
    XT_CHECK(title && !strcmp(title, "a \"quoted\" title"), "title '%s'", title ? title : "");
    json_decref(root);
    /* measured only: one track */
    XT_CHECK(xs_timeline_write(tmp("tl1.json"), &t, NULL, NULL, NULL, NULL) == XS_OK,
             "measured only");
    root = json_load_file(tmp("tl1.json"), 0, &je);
    XT_CHECK(root && json_array_size(json_object_get(root, "traceEvents")) > t.n,
             "measured only parses");
    json_decref(root);
    XT_CHECK(xs_timeline_write("/nonexistent/dir/tl.json", &t, ps, ps + t.n, &p, NULL) == XS_EIO,
             "bad timeline path");
    free(ps);
    xs_trace_prediction_free(&pr);
    xs_trace_free(&t);
}

int main(int argc, char **argv)
{
    xt_seed("test_trace", argc > 1 ? argv[1] : NULL);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/xs-trace-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_bad();
    test_programs();
    test_fidelity();
    test_causal();
    test_from_windows();
    test_compare();
    test_timeline();
    const char *names[] = {"rt.csv", "w.csv", "tl.json", "tl1.json"};
    for (int i = 0; i < 4; i++)
        unlink(tmp(names[i]));
    rmdir(tmpdir);
    return xt_done();
}
