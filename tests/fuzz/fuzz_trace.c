/*
 * fuzz_trace.c - libFuzzer target: xs_trace_parse on arbitrary bytes.
 *
 * A trace that parses holds what docs/TRACE.md promises: records sorted by (cta, seq), seq
 * contiguous from 0 in every CTA, one SM per CTA, issue windows in order and not overlapping,
 * every time rebased into 0..XS_TRACE_MAX_SPAN_NS, work times -1 exactly where not recorded, and
 * first[] indexing the CTAs. It survives xs_trace_fwrite and a second parse unchanged. A small
 * one is converted to programs and predicted on the embedded profile: the windows are finite,
 * ordered and causal (no tile starts before its CTA's previous one ended), and the comparison's
 * figures are defined. One that does not parse leaves a one-line message naming the input.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "xstage.h"
#include "xstage_trace.h"

static void check_trace(const xs_trace *t)
{
    FUZZ_CHECK(t->n >= 1 && t->recs && t->first && t->ncta >= 1, "n %zu ncta %d", t->n, t->ncta);
    FUZZ_CHECK(t->first[0] == 0 && t->first[t->ncta] == t->n, "first[] ends %zu %zu",
               t->first[0], t->first[t->ncta]);
    int64_t lo = INT64_MAX, end = 0;
    size_t nwork = 0;
    for (int c = 0; c < t->ncta; c++) {
        FUZZ_CHECK(t->first[c] <= t->first[c + 1], "first[%d] decreases", c);
        for (size_t i = t->first[c]; i < t->first[c + 1]; i++) {
            const xs_trace_record *r = &t->recs[i];
            FUZZ_CHECK(r->cta == c && r->seq == (int)(i - t->first[c]), "record %zu: cta %d seq %d",
                       i, r->cta, r->seq);
            FUZZ_CHECK(r->sm == t->recs[t->first[c]].sm && r->sm >= 0, "CTA %d on two SMs", c);
            FUZZ_CHECK(r->bytes >= 0 && r->bytes <= XS_MAX_BYTES_PER_PRODUCER, "bytes %lld",
                       (long long)r->bytes);
            FUZZ_CHECK(r->issue_start_ns >= 0 && r->issue_start_ns <= r->issue_end_ns &&
                           r->issue_end_ns <= XS_TRACE_MAX_SPAN_NS,
                       "issue %lld..%lld", (long long)r->issue_start_ns,
                       (long long)r->issue_end_ns);
            if (i > t->first[c])
                FUZZ_CHECK(r->issue_start_ns >= t->recs[i - 1].issue_end_ns, "overlap at %zu", i);
            if (r->flags & XS_TRACE_WORK) {
                FUZZ_CHECK(r->work_start_ns >= 0 && r->work_start_ns <= r->work_end_ns &&
                               r->work_end_ns <= XS_TRACE_MAX_SPAN_NS,
                           "work %lld..%lld", (long long)r->work_start_ns,
                           (long long)r->work_end_ns);
                if (r->work_start_ns < lo)
                    lo = r->work_start_ns;
                nwork++;
            } else {
                FUZZ_CHECK(r->work_start_ns == -1 && r->work_end_ns == -1, "work not -1");
            }
            if (r->issue_start_ns < lo)
                lo = r->issue_start_ns;
            if (r->issue_end_ns > end)
                end = r->issue_end_ns;
        }
    }
    FUZZ_CHECK(lo == 0, "earliest time %lld after the rebase", (long long)lo);
    FUZZ_CHECK(end == t->end_ns && nwork == t->nwork, "end %lld/%lld, work %zu/%zu",
               (long long)end, (long long)t->end_ns, nwork, t->nwork);
}

/* Predict and compare a trace small enough to take well under a millisecond. */
static void model(const xs_trace *t)
{
    xs_profile p;
    xs_profile_default(&p);
    double chunks = 0, tiles = 0;
    for (size_t i = 0; i < t->n; i++)
        chunks += ceil((double)t->recs[i].bytes / p.chunk_bytes);
    for (int c = 0; c < t->ncta; c++)
        if ((double)(t->first[c + 1] - t->first[c]) > tiles)
            tiles = (double)(t->first[c + 1] - t->first[c]);
    if (chunks > 2000 || (tiles + 1) * t->ncta > 4000)
        return;
    xs_trace_prediction pr;
    xs_status st = xs_trace_predict(&p, t, &pr);
    FUZZ_CHECK(st == XS_OK, "predict: %s", xs_errmsg());
    for (int c = 0; c < t->ncta; c++)
        for (size_t i = t->first[c]; i < t->first[c + 1]; i++) {
            const xs_trace_pred *o = &pr.tiles[i];
            FUZZ_CHECK(isfinite(o->start_ns) && o->start_ns >= 0 && o->end_ns >= o->start_ns &&
                           o->end_ns <= pr.end_ns,
                       "tile %zu: %g..%g, end %g", i, o->start_ns, o->end_ns, pr.end_ns);
            FUZZ_CHECK(o->zero_end_ns >= o->zero_start_ns && o->zero_end_ns <= pr.zero_end_ns,
                       "zero tile %zu: %g..%g", i, o->zero_start_ns, o->zero_end_ns);
            /* a CTA's tiles: in order, the first at its measured start */
            if (i > t->first[c])
                FUZZ_CHECK(o->start_ns >= pr.tiles[i - 1].end_ns - 1e-6 * fmax(1, o->start_ns),
                           "tile %zu starts at %g before %g", i, o->start_ns,
                           pr.tiles[i - 1].end_ns);
            else
                FUZZ_CHECK(fabs(o->start_ns - (double)t->recs[i].issue_start_ns) <=
                               1e-9 * fmax(1, o->start_ns),
                           "CTA %d starts at %g, measured %lld", c, o->start_ns,
                           (long long)t->recs[i].issue_start_ns);
        }
    xs_trace_summary s;
    FUZZ_CHECK(xs_trace_compare(&p, t, &pr, &s) == XS_OK, "compare");
    FUZZ_CHECK(s.ntiles <= t->n && s.nstalled <= s.ntiles, "%zu tiles, %zu stalled", s.ntiles,
               s.nstalled);
    if (s.ntiles)
        FUZZ_CHECK(s.issue_err_med_pct >= 0 && s.issue_err_p90_pct >= s.issue_err_med_pct - 1e-9,
                   "issue error med %g p90 %g", s.issue_err_med_pct, s.issue_err_p90_pct);
    xs_trace_prediction_free(&pr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    xs_trace t;
    xs_status st = xs_trace_parse((const char *)data, size, "fuzz.csv", &t);
    if (st != XS_OK) {
        fuzz_check_error(st, "fuzz.csv");
        FUZZ_CHECK(t.recs == NULL && t.n == 0 && t.first == NULL, "a failed parse keeps %zu "
                   "records", t.n);
        return 0;
    }
    check_trace(&t);

    /* write to memory and parse again: the same records (already rebased: origin 0) */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    FUZZ_CHECK(f != NULL, "open_memstream");
    const char *meta[] = {"kernel=fuzz", "clock=globaltimer", NULL};
    st = xs_trace_fwrite(f, t.recs, t.n, 0, meta);
    FUZZ_CHECK(st == XS_OK, "write: %s", xs_errmsg());
    fclose(f);
    xs_trace u;
    st = xs_trace_parse(text, len, "written.csv", &u);
    FUZZ_CHECK(st == XS_OK, "written trace does not parse: %s", xs_errmsg());
    FUZZ_CHECK(u.n == t.n && u.ncta == t.ncta && u.origin_ns == 0 && u.end_ns == t.end_ns &&
                   !memcmp(u.recs, t.recs, t.n * sizeof *t.recs),
               "round trip changed the trace (%zu -> %zu records)", t.n, u.n);
    xs_trace_free(&u);
    free(text);
    model(&t);
    xs_trace_free(&t);
    return 0;
}
