// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_trace.h - per-CTA tile traces of a user's kernel (format v1, docs/TRACE.md): write them
 * from the host, load and validate them, turn them into per-producer programs for the event
 * model, predict them, compare prediction with measurement, and draw both as a timeline.
 *
 * A trace holds one record per (CTA, tile): the bytes the tile stored, its issue window and,
 * optionally, its compute span, all in ns on one clock (%globaltimer). The device side stamps
 * the same records (include/xstage_device.cuh); xs_trace_write puts them in a file.
 */
#ifndef XSTAGE_TRACE_H
#define XSTAGE_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "xstage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One tile of one CTA, 56 bytes without padding; the device header defines the same layout
 * under the same guard, so that a .cu file may include both. */
#ifndef XS_TRACE_RECORD_DEFINED
#define XS_TRACE_RECORD_DEFINED
typedef struct xs_trace_record {
    int32_t cta, sm, seq;   /* CTA (blockIdx), its SM (%smid), the tile's order in its CTA */
    int32_t flags;          /* XS_TRACE_WORK: the work span is recorded */
    int64_t bytes;          /* bytes the tile stored */
    int64_t issue_start_ns, issue_end_ns; /* first store issued .. last store issued (ns) */
    int64_t work_start_ns, work_end_ns;   /* the tile's compute (ns); -1 when not recorded */
} xs_trace_record;
#endif
#define XS_TRACE_WORK 1
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(xs_trace_record) == 56, "xs_trace_record: 56 bytes, no padding");
#endif

#define XS_TRACE_VERSION 1
#define XS_TRACE_MAX_CTAS XS_MAX_PRODUCERS   /* cta < this */
#define XS_TRACE_MAX_TILES 1000000           /* tiles per CTA */
#define XS_TRACE_MAX_SPAN_NS INT64_C(1000000000000) /* 1000 s from the earliest time */

/* ---- the file ------------------------------------------------------------------------------ */

/* Write a v1 trace: the version line, '# dropped=N', one '# key=value' line per meta entry
 * (NULL-terminated array of "key=value" strings without line breaks; may be NULL; "dropped" is
 * not one of them), the header and one line per record in the given order. A record without
 * XS_TRACE_WORK is written with both work times -1. The records are not validated: a trace
 * with dropped > 0 is written as measured and refused by the loader. */
xs_status xs_trace_write(const char *path, const xs_trace_record *r, size_t n, uint64_t dropped,
                         const char *const *meta);
xs_status xs_trace_fwrite(FILE *f, const xs_trace_record *r, size_t n, uint64_t dropped,
                          const char *const *meta);

/* A loaded trace: records sorted by (cta, seq), every time rebased to the earliest issue or
 * work time of the file (work times stay -1 where not recorded). */
typedef struct {
    xs_trace_record *recs; /* [n] */
    size_t n;
    int ncta;              /* 1 + the largest cta; a CTA may have no records */
    size_t *first;         /* [ncta + 1]: CTA c's records are recs[first[c] .. first[c + 1]) */
    int64_t origin_ns;     /* the earliest time of the input, subtracted from every time */
    int64_t end_ns;        /* the latest issue end, after the rebase: the measured total */
    size_t nwork;          /* records with a work span */
    uint64_t capacity;     /* metadata 'capacity' (records); 0 when absent */
    int producers;         /* metadata 'producers' (CTAs launched); 0 when absent */
    char device[128];      /* metadata, "" when absent */
    char target[16];       /* host, local, virtual or peer; "" when absent */
    char kernel[128];
} xs_trace;

/* Parse, validate and rebase a v1 trace (docs/TRACE.md). Every violation fails with a one-line
 * message naming the input and the line: a missing or other version line, a missing or positive
 * 'dropped', a wrong header, a malformed, negative or too large field, a reversed issue or work
 * span, a CTA on two SMs, a repeated or missing seq, issue windows of one CTA that overlap, a
 * time more than XS_TRACE_MAX_SPAN_NS after the earliest. On success *out owns its arrays
 * (xs_trace_free); on failure it is empty. */
xs_status xs_trace_load(const char *path, xs_trace *out);
xs_status xs_trace_parse(const char *text, size_t len, const char *name, xs_trace *out);
/* The same checks on records in memory (a recorder's own): errors name "record i" of name. */
xs_status xs_trace_build(const xs_trace_record *r, size_t n, const char *name, xs_trace *out);
void xs_trace_free(xs_trace *t);
int64_t xs_trace_bytes(const xs_trace *t); /* sum over records */

/* Records from a result's per-(row, producer) windows (a simulation's record_windows, or
 * replay's measurement): producer p's rows, in order, are its tiles (seq counts the rows it
 * takes part in), each storing the row's bytes_per_producer, times rounded to ns; its SM is
 * sm[p] for p < nsm, else p. Rows whose window is NaN are left out. *out is malloc'd. */
xs_status xs_trace_from_windows(const xs_schedule *s, const xs_result *r, const int *sm, int nsm,
                                xs_trace_record **out, size_t *n);

/* ---- per-producer programs ----------------------------------------------------------------- */

/* The programs a trace implies (docs/TRACE.md, "Conversion"): producer c is CTA c; row 0 stores
 * nothing and works until the CTA's first issue start; row j + 1 is tile j: its bytes, then the
 * CTA's measured time between the end of tile j's issue and the start of tile j + 1's (0 after
 * its last tile). A CTA with fewer tiles ends with (0, 0) rows. */
typedef struct {
    xs_schedule sched;     /* 1 + the most tiles of a CTA rows, each naming every CTA */
    int64_t *bytes;        /* [sched.nrows * ncta] */
    double *gap_ns;        /* [sched.nrows * ncta] */
    xs_programs pg;        /* views on bytes and gap_ns */
} xs_trace_progs;

xs_status xs_trace_programs(const xs_trace *t, xs_trace_progs *out);
void xs_trace_programs_free(xs_trace_progs *pr);

/* The issue time of a tile of `bytes` that nothing pushes back: T_iss0 = o + [B - b]+/r
 * (docs/MODEL.md); 0 for 0 bytes. A tile's stall is its issue time minus this. */
double xs_trace_unstalled_ns(const xs_profile *p, int64_t bytes);

/* Per record of the trace (same order as t->recs), ns on the trace's clock. */
typedef struct {
    double start_ns, end_ns;           /* the model's issue window (a tile of 0 bytes: its
                                        * measured length, the CTA's own time) */
    double zero_start_ns, zero_end_ns; /* the zero-stall predictor's (every tile in T_iss0) */
} xs_trace_pred;

typedef struct {
    xs_trace_pred *tiles;   /* [t->n] */
    double end_ns;          /* the model's total: the latest predicted issue end */
    double zero_end_ns;     /* the zero-stall predictor's total */
    double peak_backlog_bytes;
} xs_trace_prediction;

/* Predict the trace's programs on profile p (its start_ns and row_start_ns are set to 0: the
 * trace's first starts and gaps hold the kernel's prologue and set-up), free-running. *out owns
 * tiles (xs_trace_prediction_free). */
xs_status xs_trace_predict(const xs_profile *p, const xs_trace *t, xs_trace_prediction *out);
void xs_trace_prediction_free(xs_trace_prediction *pr);

/* ---- measured against predicted (docs/TRACE.md, "Comparison") ------------------------------- */

#define XS_TRACE_STALLED_NS 500.0 /* a tile "stalls" when its measured stall exceeds this */

typedef struct {
    size_t ntiles;               /* tiles compared: bytes > 0 and a measured issue time > 0 */
    double total_ns;             /* measured total (the latest issue end) */
    double total_err_pct, zero_total_err_pct;          /* (pred - meas) / meas, signed */
    double issue_err_med_pct, issue_err_p90_pct;       /* |pred - meas| / meas of issue time */
    double zero_issue_err_med_pct, zero_issue_err_p90_pct;
    double stall_err_med_ns, stall_err_p90_ns;         /* |pred stall - meas stall| */
    double zero_stall_err_med_ns, zero_stall_err_p90_ns; /* |meas stall| */
    size_t nstalled;             /* tiles with a measured stall > XS_TRACE_STALLED_NS */
    double stalled_err_med_ns, zero_stalled_err_med_ns; /* the same two on those tiles */
    double stalled_ratio;        /* stalled_err_med_ns / zero_stalled_err_med_ns (NaN: none) */
    size_t nctas;                /* CTAs with records */
    double cta_err_med_pct, cta_err_p90_pct; /* over CTAs, |pred - meas| / meas of the CTA's
                                              * last issue end */
    double zero_cta_err_med_pct, zero_cta_err_p90_pct;
} xs_trace_summary;

xs_status xs_trace_compare(const xs_profile *p, const xs_trace *t, const xs_trace_prediction *pr,
                           xs_trace_summary *out);

/* ---- timeline (Chrome trace-event JSON, opens in Perfetto) ---------------------------------- */

/* Write t's issue windows (and work spans where they fall between two issue windows) as pid 1
 * "measured" and, when pred_start_ns / pred_end_ns ([t->n], ns on the trace's clock) are given,
 * the predicted windows as pid 2 "predicted"; one tid per CTA. Complete ("X") events with ts and
 * dur in us and args {bytes, seq, stall_ns}; stall needs p (NULL: no stall_ns). */
xs_status xs_timeline_write(const char *path, const xs_trace *t, const double *pred_start_ns,
                            const double *pred_end_ns, const xs_profile *p, const char *title);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_TRACE_H */
