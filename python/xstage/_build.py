# SPDX-License-Identifier: Apache-2.0
"""
_build.py - the cffi (API mode) description of the C core that the package binds.

setup.py hands `ffibuilder` to cffi, which compiles every src/*.c of the repository together with
the generated glue into one extension, xstage._core (no CUDA; jansson linked dynamically, as a
PIC build of it is what the system provides). The declarations below are the subset of
include/xstage.h the package uses; structs end in `...;` where the package reads only some
fields, so that the C compiler, not this file, decides their layout.
"""
import glob
import os

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)  # python/, where setup.py is: setuptools wants paths from it
REPO = os.path.dirname(PKG_ROOT)


def from_setup(path):
    """path relative to setup.py's folder (setuptools refuses absolute source paths)."""
    return os.path.relpath(path, PKG_ROOT)

CDEF = r"""
typedef enum {
    XS_OK = 0, XS_EINVAL, XS_EIO, XS_EPARSE, XS_ENOMEM, XS_ERANGE, XS_ECUDA, XS_ENCCL,
    XS_ETIMEOUT, XS_EVERIFY, XS_EUNSUPPORTED, XS_EINTR
} xs_status;

const char *xs_errmsg(void);
const char *xs_status_name(xs_status s);

typedef struct {
    double issue_bytes_per_ns;
    double issue_overhead_ns;
    double drain_bytes_per_ns;
    double capacity_bytes;
    double capacity_bytes_per_producer;
    double chunk_bytes;
    double queue_bytes_per_producer;
    double reserve_bytes_per_producer;
    double arbitration_skew;
    double barrier_ns;
    double start_ns;
    double reserve_release;
    double row_start_ns;
    double reserve_shared_fraction;
    double buffer_bytes_per_producer;
    double drain_under_load_bytes_per_ns;
    double overflow_capacity_loss;
    double overflow_loss_ns;
    double issue_tail_ns;
    char device[128];
    char path[16];
    char date[32];
    char command[512];
    char notes[512];
    int provisional;
    ...;
} xs_profile;

void xs_profile_default(xs_profile *p);
xs_status xs_profile_load(const char *path, xs_profile *p);
xs_status xs_profile_parse(const char *text, size_t len, const char *name, xs_profile *p);
xs_status xs_profile_save(const xs_profile *p, const char *path);
xs_status xs_profile_set(xs_profile *p, const char *assignment);
xs_status xs_profile_check(const xs_profile *p, const char *name);
extern const char *const xs_profile_fields[];

typedef struct {
    int producers;
    int64_t bytes_per_producer;
    double gap_ns;
} xs_row;

typedef struct {
    xs_row *rows;
    int nrows;
    int cap;
} xs_schedule;

#define XS_MAX_PRODUCERS ...
#define XS_MAX_ROWS ...
static const double XS_MAX_GAP_NS;

xs_status xs_schedule_load(const char *path, xs_schedule *s);
xs_status xs_schedule_parse(const char *text, size_t len, const char *name, xs_schedule *s);
xs_status xs_schedule_append(xs_schedule *s, int producers, int64_t bytes, double gap_ns);
xs_status xs_schedule_save(const xs_schedule *s, const char *path, const char *comment);
void xs_schedule_free(xs_schedule *s);
int xs_schedule_max_producers(const xs_schedule *s);
double xs_schedule_bytes(const xs_schedule *s);
double xs_schedule_gap_ns(const xs_schedule *s);

typedef struct {
    int producers;
    double bytes_per_producer;
    double volume_bytes;
    double gap_ns;
    double capacity_bytes;
    double t_iss0_ns;
    double v_over_r_ns;
    double t_period_ns;
    double t_iss_ns;
    double delta_t_iss_ns;
    double g_star_ns;
    double q_peak0_bytes;
    double t_iss_iso_ns;
    double t_iss_last_ns;
    double injection_bytes_per_ns;
    int rate_ok;
    int capacity_ok;
    int no_backpressure;
    double t_iss_steady_ns;
    double t_period_steady_ns;
    ...;
} xs_bg;

double xs_capacity(const xs_profile *p, int producers);
void xs_bg_eval(const xs_profile *p, int producers, double bytes_per_producer, double gap_ns,
                xs_bg *out);

typedef struct {
    double issue_med_ns;
    double issue_max_ns;
    double end_ns;
} xs_rowres;

typedef struct {
    double t_ns;
    double backlog_bytes;
} xs_sample;

typedef struct {
    int nrows;
    int nproducers;
    xs_rowres *rows;
    double *win_start;
    double *win_end;
    xs_sample *backlog;
    size_t nbacklog;
    double peak_backlog_bytes;
    double makespan_ns;
    ...;
} xs_result;

typedef struct {
    int producer, row;
    int64_t bytes;
    double t_queue_ns;
    double t_buffer_ns;
    double t_stage_ns;
    double t_drained_ns;
} xs_chunk_trace;

typedef struct {
    int sync;
    int record_windows;
    int record_backlog;
    size_t max_samples;
    void (*trace)(void *ctx, const xs_chunk_trace *c);
    void *trace_ctx;
    ...;
} xs_sim_opts;

typedef struct {
    int producers;
    const int64_t *bytes;
    const double *gap_ns;
    ...;
} xs_programs;

xs_status xs_simulate_programs(const xs_profile *p, const xs_schedule *s, const xs_programs *pg,
                               const xs_sim_opts *o, xs_result *out);
void xs_result_free(xs_result *r);

typedef struct {
    double move_cost;
    double headroom;
    int max_split;
    int allow_move;
    ...;
} xs_plan_opts;

typedef struct {
    int reshaped;
    int criterion_ok;
    double original_ns;
    double planned_ns;
    double bound_ns;
    xs_schedule planned;
    char how[256];
    ...;
} xs_plan;

void xs_plan_opts_default(xs_plan_opts *o);
xs_status xs_plan_schedule(const xs_profile *p, const xs_schedule *s, const xs_plan_opts *o,
                           xs_plan *out);
void xs_plan_free(xs_plan *pl);

/* ---- traces (include/xstage_trace.h) ---- */
typedef struct xs_trace_record {
    int32_t cta, sm, seq;
    int32_t flags;
    int64_t bytes;
    int64_t issue_start_ns, issue_end_ns;
    int64_t work_start_ns, work_end_ns;
} xs_trace_record;

typedef struct {
    xs_trace_record *recs;
    size_t n;
    int ncta;
    size_t *first;
    int64_t origin_ns;
    int64_t end_ns;
    size_t nwork;
    uint64_t capacity;
    int producers;
    char device[128];
    char target[16];
    char kernel[128];
    ...;
} xs_trace;

xs_status xs_trace_write(const char *path, const xs_trace_record *r, size_t n, uint64_t dropped,
                         const char *const *meta);
xs_status xs_trace_load(const char *path, xs_trace *out);
xs_status xs_trace_parse(const char *text, size_t len, const char *name, xs_trace *out);
xs_status xs_trace_build(const xs_trace_record *r, size_t n, const char *name, xs_trace *out);
void xs_trace_free(xs_trace *t);
int64_t xs_trace_bytes(const xs_trace *t);

typedef struct {
    xs_schedule sched;
    int64_t *bytes;
    double *gap_ns;
    xs_programs pg;
    ...;
} xs_trace_progs;

xs_status xs_trace_programs(const xs_trace *t, xs_trace_progs *out);
void xs_trace_programs_free(xs_trace_progs *pr);
double xs_trace_unstalled_ns(const xs_profile *p, int64_t bytes);

typedef struct {
    double start_ns, end_ns;
    double zero_start_ns, zero_end_ns;
} xs_trace_pred;

typedef struct {
    xs_trace_pred *tiles;
    double end_ns;
    double zero_end_ns;
    double peak_backlog_bytes;
    ...;
} xs_trace_prediction;

xs_status xs_trace_predict(const xs_profile *p, const xs_trace *t, xs_trace_prediction *out);
void xs_trace_prediction_free(xs_trace_prediction *pr);

typedef struct {
    size_t ntiles;
    double total_ns;
    double total_err_pct, zero_total_err_pct;
    double issue_err_med_pct, issue_err_p90_pct;
    double zero_issue_err_med_pct, zero_issue_err_p90_pct;
    double stall_err_med_ns, stall_err_p90_ns;
    double zero_stall_err_med_ns, zero_stall_err_p90_ns;
    size_t nstalled;
    double stalled_err_med_ns, zero_stalled_err_med_ns;
    double stalled_ratio;
    ...;
} xs_trace_summary;

xs_status xs_trace_compare(const xs_profile *p, const xs_trace *t, const xs_trace_prediction *pr,
                           xs_trace_summary *out);
xs_status xs_timeline_write(const char *path, const xs_trace *t, const double *pred_start_ns,
                            const double *pred_end_ns, const xs_profile *p, const char *title);

/* glue (defined below, in SOURCE) */
xs_status xs_py_schedule_fill(xs_schedule *s, size_t n, const int64_t *producers,
                              const int64_t *bytes, const double *gap_ns, size_t *bad_row);
xs_status xs_py_simulate_chunks(const xs_profile *p, const xs_schedule *s,
                                const xs_programs *pg, xs_sim_opts *o, xs_result *out,
                                xs_chunk_trace **chunks, size_t *nchunks);
void xs_py_free(void *ptr);
"""

# The glue: loops that would be slow in Python, kept next to the core's own types.
SOURCE = r"""
#include <stdlib.h>
#include <string.h>
#include "xstage.h"
#include "xstage_trace.h"

/* Append n rows from three columns; on failure *bad_row is the first row the core refused. */
static xs_status xs_py_schedule_fill(xs_schedule *s, size_t n, const int64_t *producers,
                                     const int64_t *bytes, const double *gap_ns, size_t *bad_row)
{
    for (size_t i = 0; i < n; i++) {
        if (producers[i] < 1 || producers[i] > XS_MAX_PRODUCERS) {
            *bad_row = i;
            return xs_seterr(XS_ERANGE, "producers = %lld outside 1..%d",
                             (long long)producers[i], XS_MAX_PRODUCERS);
        }
        xs_status st = xs_schedule_append(s, (int)producers[i], bytes[i], gap_ns[i]);
        if (st != XS_OK) {
            *bad_row = i;
            return st;
        }
    }
    return XS_OK;
}

/* Chunk records collected by the simulation's trace callback, in acceptance order. */
typedef struct {
    xs_chunk_trace *v;
    size_t n, cap;
    int failed;
} chunk_list;

static void collect_chunk(void *ctx, const xs_chunk_trace *c)
{
    chunk_list *l = ctx;
    if (l->failed)
        return;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 1024;
        xs_chunk_trace *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            l->failed = 1;
            return;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = *c;
}

/* xs_simulate_programs that also returns every chunk's way through the model (*chunks: free
 * with xs_py_free). */
static xs_status xs_py_simulate_chunks(const xs_profile *p, const xs_schedule *s,
                                       const xs_programs *pg, xs_sim_opts *o, xs_result *out,
                                       xs_chunk_trace **chunks, size_t *nchunks)
{
    chunk_list l = {0};
    o->trace = collect_chunk;
    o->trace_ctx = &l;
    xs_status st = xs_simulate_programs(p, s, pg, o, out);
    o->trace = NULL;
    o->trace_ctx = NULL;
    if (st == XS_OK && l.failed) {
        xs_result_free(out);
        st = xs_seterr(XS_ENOMEM, "out of memory recording %zu chunk traces", l.n);
    }
    if (st != XS_OK) {
        free(l.v);
        return st;
    }
    *chunks = l.v;
    *nchunks = l.n;
    return XS_OK;
}

static void xs_py_free(void *ptr) { free(ptr); }
"""


def core_sources():
    """The C core's translation units: every src/*.c of the repository (as libxstage.a)."""
    srcs = sorted(glob.glob(os.path.join(REPO, "src", "*.c")))
    if not srcs:
        raise RuntimeError("xstage: no C sources under %s/src: build the package from the "
                           "repository (pip install <repo>/python)" % REPO)
    return [from_setup(p) for p in srcs]


ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "xstage._core",
    SOURCE,
    sources=core_sources(),
    include_dirs=[os.path.join(REPO, "include"), os.path.join(REPO, "src")],
    libraries=["jansson", "m", "dl", "pthread"],  # the Makefile's LDLIBS
    # the flags of the Makefile that change results or meaning: C11, GNU extensions, no FMA
    # contraction (results identical to the tool's), never -ffast-math
    extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-ffp-contract=off", "-fno-fast-math",
                        "-Wno-unused-parameter"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
