// SPDX-License-Identifier: Apache-2.0
/*
 * timeline.c - a trace and its prediction as Chrome trace-event JSON (docs/TRACE.md,
 * "Timeline"), which Perfetto (ui.perfetto.dev) and chrome://tracing open: process 1 holds the
 * measured issue windows, process 2 the predicted ones, one thread per CTA in each, so that the
 * two tracks of a CTA lie one above the other.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "xstage_bench.h"
#include "xstage_outfile.h"
#include "xstage_trace.h"

enum { PID_MEASURED = 1, PID_PREDICTED = 2 };

static void meta_event(FILE *f, const char *what, int pid, int tid, const char *key,
                       const char *name, long sort)
{
    fprintf(f, ",\n{\"name\": \"%s\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {",
            what, pid, tid);
    if (name) {
        fprintf(f, "\"%s\": ", key);
        xs_json_string(f, name);
    } else {
        fprintf(f, "\"%s\": %ld", key, sort);
    }
    fputs("}}", f);
}

/* One complete event; t0 and t1 in ns, written in us with ns resolution. stall < -1e300: none. */
static void span(FILE *f, const char *what, const char *cat, int pid, const xs_trace_record *r,
                 double t0, double t1, double stall)
{
    fprintf(f, ",\n{\"name\": \"%s %d\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, "
               "\"dur\": %.3f, \"pid\": %d, \"tid\": %d, \"args\": {\"bytes\": %" PRId64
               ", \"seq\": %d",
            what, (int)r->seq, cat, t0 / 1e3, (t1 - t0) / 1e3, pid, (int)r->cta, r->bytes,
            (int)r->seq);
    if (stall > -1e300)
        fprintf(f, ", \"stall_ns\": %.1f", stall);
    fputs("}}", f);
}

xs_status xs_timeline_write(const char *path, const xs_trace *t, const double *pred_start_ns,
                            const double *pred_end_ns, const xs_profile *p, const char *title)
{
    const int pred = pred_start_ns && pred_end_ns;
    xs_outfile o; /* atomic: a failed write leaves the old file, if any (xstage_outfile.h) */
    if (xs_outfile_open(&o, path) != XS_OK)
        return XS_EIO;
    FILE *f = o.f;
    fputs("{\"displayTimeUnit\": \"ns\", \"otherData\": {\"title\": ", f);
    xs_json_string(f, title ? title : "xstage trace");
    fprintf(f, ", \"ctas\": %d, \"tiles\": %zu, \"origin_ns\": %" PRId64 "},\n"
               "\"traceEvents\": [\n", t->ncta, t->n, t->origin_ns);
    /* the first event, so that every later one starts with ",\n" */
    fputs("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, "
          "\"args\": {\"name\": \"measured\"}}", f);
    meta_event(f, "process_sort_index", PID_MEASURED, 0, "sort_index", NULL, 1);
    if (pred) {
        meta_event(f, "process_name", PID_PREDICTED, 0, "name", "predicted", 0);
        meta_event(f, "process_sort_index", PID_PREDICTED, 0, "sort_index", NULL, 2);
    }
    for (int c = 0; c < t->ncta; c++) {
        if (t->first[c] == t->first[c + 1])
            continue;
        char name[64];
        snprintf(name, sizeof name, "CTA %d (SM %d)", c, (int)t->recs[t->first[c]].sm);
        for (int pid = PID_MEASURED; pid <= (pred ? PID_PREDICTED : PID_MEASURED); pid++) {
            meta_event(f, "thread_name", pid, c, "name", name, 0);
            meta_event(f, "thread_sort_index", pid, c, "sort_index", NULL, c);
        }
    }
    for (int c = 0; c < t->ncta; c++)
        for (size_t i = t->first[c]; i < t->first[c + 1]; i++) {
            const xs_trace_record *r = &t->recs[i];
            const double t0 = p ? xs_trace_unstalled_ns(p, r->bytes) : 0;
            const double a = (double)r->issue_start_ns, b = (double)r->issue_end_ns;
            /* a work span is drawn where it nests between two issue windows of its CTA (a
             * serial CTA); one that overlaps an issue window would not nest on the thread */
            const double prev_end = i > t->first[c] ? (double)t->recs[i - 1].issue_end_ns : -1;
            if ((r->flags & XS_TRACE_WORK) && (double)r->work_start_ns >= prev_end &&
                r->work_end_ns <= r->issue_start_ns)
                span(f, "work", "work", PID_MEASURED, r, (double)r->work_start_ns,
                     (double)r->work_end_ns, -1e308);
            span(f, "tile", "issue", PID_MEASURED, r, a, b,
                 p && r->bytes > 0 ? b - a - t0 : -1e308);
            if (pred && isfinite(pred_start_ns[i]) && isfinite(pred_end_ns[i]))
                span(f, "tile", "issue", PID_PREDICTED, r, pred_start_ns[i], pred_end_ns[i],
                     p && r->bytes > 0 ? pred_end_ns[i] - pred_start_ns[i] - t0 : -1e308);
        }
    fputs("\n]}\n", f);
    return xs_outfile_commit(&o);
}
