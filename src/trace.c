// SPDX-License-Identifier: Apache-2.0
/*
 * trace.c - the per-CTA tile trace, format v1 (docs/TRACE.md): write, parse, validate, rebase.
 *
 *     # xstage-trace v1
 *     # dropped=0
 *     cta,sm,seq,bytes,issue_start_ns,issue_end_ns,work_start_ns,work_end_ns
 *     0,3,0,65536,1200,2450,400,1190
 *
 * A trace comes from a device buffer that a kernel filled: it may be cut short, overflowed or
 * stamped on a wrong clock. Every check names the file and line, so that the user can see which
 * record is wrong; nothing is repaired silently.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "xstage_outfile.h"
#include "readall.h"
#include "xstage_trace.h"

#define MAX_LINE 4096
static const char version_line[] = "# xstage-trace v1";
static const char header[] =
    "cta,sm,seq,bytes,issue_start_ns,issue_end_ns,work_start_ns,work_end_ns";
#define MAX_SM (1 << 20)

/* ---- write --------------------------------------------------------------------------------- */

/* "key=value": key of [a-z0-9_], no line break anywhere. */
static int meta_ok(const char *m)
{
    const char *eq = strchr(m, '=');
    if (!eq || eq == m)
        return 0;
    for (const char *c = m; c < eq; c++)
        if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '_'))
            return 0;
    return !strpbrk(m, "\r\n");
}

xs_status xs_trace_fwrite(FILE *f, const xs_trace_record *r, size_t n, uint64_t dropped,
                          const char *const *meta)
{
    if (!f || (n && !r))
        return xs_seterr(XS_EINVAL, "trace: no file or no records to write");
    for (const char *const *m = meta; m && *m; m++) {
        if (!meta_ok(*m))
            return xs_seterr(XS_EINVAL, "trace: metadata '%.60s' is not key=value on one line",
                             *m);
        if (!strncmp(*m, "dropped=", 8))
            return xs_seterr(XS_EINVAL, "trace: 'dropped' is an argument, not metadata");
    }
    fprintf(f, "%s\n# dropped=%" PRIu64 "\n", version_line, dropped);
    for (const char *const *m = meta; m && *m; m++)
        fprintf(f, "# %s\n", *m);
    fprintf(f, "%s\n", header);
    for (size_t i = 0; i < n; i++) {
        const xs_trace_record *x = &r[i];
        const int w = (x->flags & XS_TRACE_WORK) != 0;
        fprintf(f, "%d,%d,%d,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "\n",
                (int)x->cta, (int)x->sm, (int)x->seq, x->bytes, x->issue_start_ns,
                x->issue_end_ns, w ? x->work_start_ns : -1, w ? x->work_end_ns : -1);
    }
    return ferror(f) ? xs_seterr(XS_EIO, "trace: write error") : XS_OK;
}

xs_status xs_trace_write(const char *path, const xs_trace_record *r, size_t n, uint64_t dropped,
                         const char *const *meta)
{
    xs_outfile o; /* atomic: a failed write leaves the old file, if any (xstage_outfile.h) */
    if (xs_outfile_open(&o, path) != XS_OK)
        return XS_EIO;
    xs_status st = xs_trace_fwrite(o.f, r, n, dropped, meta);
    if (st != XS_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", xs_errmsg());
        xs_outfile_discard(&o);
        return xs_seterr(st, "%s: %s", path, msg);
    }
    return xs_outfile_commit(&o);
}

/* ---- validate and rebase (file and memory alike) --------------------------------------------- */

typedef struct {
    xs_trace_record r;
    long line;          /* line of the file, or -(index + 1) for records in memory */
} entry;

/* "name:line" or "name: record i" into buf. */
static const char *where(char *buf, size_t n, const char *name, long line)
{
    if (line > 0)
        snprintf(buf, n, "%s:%ld", name, line);
    else
        snprintf(buf, n, "%s: record %ld", name, -line - 1);
    return buf;
}

/* "line N" or "record N": a second place in one message. */
static const char *lref(char *buf, size_t n, long line)
{
    if (line > 0)
        snprintf(buf, n, "line %ld", line);
    else
        snprintf(buf, n, "record %ld", -line - 1);
    return buf;
}

static int by_cta_seq(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->r.cta != y->r.cta)
        return x->r.cta < y->r.cta ? -1 : 1;
    if (x->r.seq != y->r.seq)
        return x->r.seq < y->r.seq ? -1 : 1;
    return (x->line > 0 ? x->line : -x->line) < (y->line > 0 ? y->line : -y->line) ? -1 : 1;
}

/* Checks of one record alone; 0 or the failing status (message set). */
static xs_status check_record(const entry *e, const char *name)
{
    char w[300];
    const xs_trace_record *r = &e->r;
    if (r->cta < 0 || r->cta >= XS_TRACE_MAX_CTAS)
        return xs_seterr(XS_EPARSE, "%s: cta %d outside 0..%d", where(w, sizeof w, name, e->line),
                         (int)r->cta, XS_TRACE_MAX_CTAS - 1);
    if (r->sm < 0 || r->sm >= MAX_SM)
        return xs_seterr(XS_EPARSE, "%s: sm %d outside 0..%d", where(w, sizeof w, name, e->line),
                         (int)r->sm, MAX_SM - 1);
    if (r->seq < 0 || r->seq >= XS_TRACE_MAX_TILES)
        return xs_seterr(XS_EPARSE, "%s: seq %d outside 0..%d", where(w, sizeof w, name, e->line),
                         (int)r->seq, XS_TRACE_MAX_TILES - 1);
    if (r->bytes < 0 || r->bytes > XS_MAX_BYTES_PER_PRODUCER)
        return xs_seterr(XS_EPARSE, "%s: bytes %" PRId64 " outside 0..2^40",
                         where(w, sizeof w, name, e->line), r->bytes);
    if (r->issue_start_ns < 0 || r->issue_end_ns < 0)
        return xs_seterr(XS_EPARSE, "%s: negative issue time (%" PRId64 ", %" PRId64 " ns)",
                         where(w, sizeof w, name, e->line), r->issue_start_ns, r->issue_end_ns);
    if (r->issue_end_ns < r->issue_start_ns)
        return xs_seterr(XS_EPARSE, "%s: reversed issue span: issue_end_ns %" PRId64 " before "
                         "issue_start_ns %" PRId64, where(w, sizeof w, name, e->line),
                         r->issue_end_ns, r->issue_start_ns);
    if (r->flags & XS_TRACE_WORK) {
        if (r->work_start_ns < 0 || r->work_end_ns < 0)
            return xs_seterr(XS_EPARSE, "%s: negative work time (%" PRId64 ", %" PRId64 " ns; "
                             "both -1 when not recorded)", where(w, sizeof w, name, e->line),
                             r->work_start_ns, r->work_end_ns);
        if (r->work_end_ns < r->work_start_ns)
            return xs_seterr(XS_EPARSE, "%s: reversed work span: work_end_ns %" PRId64 " before "
                             "work_start_ns %" PRId64, where(w, sizeof w, name, e->line),
                             r->work_end_ns, r->work_start_ns);
    }
    return XS_OK;
}

typedef struct {
    uint64_t capacity;
    int producers;
    char device[128], target[16], kernel[128];
} meta_vals;

/* Sort, check across records, rebase, and fill *out. Takes e (n entries, owned) in every case. */
static xs_status build(entry *e, size_t n, const char *name, const meta_vals *mv, long hline,
                       xs_trace *out)
{
    char w[300], w2[300];
    xs_status st = XS_OK;
    if (n == 0) {
        st = hline > 0 ? xs_seterr(XS_EPARSE, "%s:%ld: no records after the header", name, hline)
                       : xs_seterr(XS_EINVAL, "%s: no records", name);
        goto fail;
    }
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        if ((st = check_record(&e[i], name)) != XS_OK)
            goto fail;
        total += (double)e[i].r.bytes;
        if (total > 4e18) {
            st = xs_seterr(XS_EPARSE, "%s: total bytes of the trace overflow",
                           where(w, sizeof w, name, e[i].line));
            goto fail;
        }
    }
    if (mv && mv->capacity > 0 && n > mv->capacity) {
        st = xs_seterr(XS_EPARSE, "%s: %zu records but capacity=%" PRIu64 " (a buffer holds at "
                       "most its capacity)", name, n, mv->capacity);
        goto fail;
    }
    qsort(e, n, sizeof *e, by_cta_seq);
    int64_t origin = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        const xs_trace_record *r = &e[i].r;
        if (mv && mv->producers > 0 && r->cta >= mv->producers) {
            st = xs_seterr(XS_EPARSE, "%s: cta %d but producers=%d",
                           where(w, sizeof w, name, e[i].line), (int)r->cta, mv->producers);
            goto fail;
        }
        const int first_of_cta = i == 0 || e[i - 1].r.cta != r->cta;
        if (first_of_cta && r->seq != 0) {
            st = xs_seterr(XS_EPARSE, "%s: CTA %d starts at seq %d; seq counts 0,1,2,... in each "
                           "CTA (a record is missing)", where(w, sizeof w, name, e[i].line),
                           (int)r->cta, (int)r->seq);
            goto fail;
        }
        if (!first_of_cta) {
            const entry *p = &e[i - 1];
            if (r->seq == p->r.seq) {
                st = xs_seterr(XS_EPARSE, "%s: CTA %d seq %d again (first at %s)",
                               where(w, sizeof w, name, e[i].line), (int)r->cta, (int)r->seq,
                               lref(w2, sizeof w2, p->line));
                goto fail;
            }
            if (r->seq != p->r.seq + 1) {
                st = xs_seterr(XS_EPARSE, "%s: CTA %d seq %d follows seq %d: seq is not "
                               "contiguous (a record is missing)",
                               where(w, sizeof w, name, e[i].line), (int)r->cta, (int)r->seq,
                               (int)p->r.seq);
                goto fail;
            }
            if (r->sm != p->r.sm) {
                st = xs_seterr(XS_EPARSE, "%s: CTA %d on SM %d, but on SM %d at seq %d",
                               where(w, sizeof w, name, e[i].line), (int)r->cta, (int)r->sm,
                               (int)p->r.sm, (int)p->r.seq);
                goto fail;
            }
            if (r->issue_start_ns < p->r.issue_end_ns) {
                st = xs_seterr(XS_EPARSE, "%s: CTA %d seq %d issue starts at %" PRId64 " ns, "
                               "before seq %d ended at %" PRId64 " ns (overlapping issue spans)",
                               where(w, sizeof w, name, e[i].line), (int)r->cta, (int)r->seq,
                               r->issue_start_ns, (int)p->r.seq, p->r.issue_end_ns);
                goto fail;
            }
        }
        if (r->issue_start_ns < origin)
            origin = r->issue_start_ns;
        if ((r->flags & XS_TRACE_WORK) && r->work_start_ns < origin)
            origin = r->work_start_ns;
    }
    /* rebase; every time must lie within XS_TRACE_MAX_SPAN_NS of the earliest */
    int64_t end = 0;
    size_t nwork = 0;
    for (size_t i = 0; i < n; i++) {
        xs_trace_record *r = &e[i].r;
        const int wk = (r->flags & XS_TRACE_WORK) != 0;
        const int64_t late = wk && r->work_end_ns > r->issue_end_ns ? r->work_end_ns
                                                                      : r->issue_end_ns;
        if (late - origin > XS_TRACE_MAX_SPAN_NS) {
            st = xs_seterr(XS_EPARSE, "%s: time %" PRId64 " ns is %.4g s after the trace's "
                           "earliest (%" PRId64 " ns); at most 1000 s (a wrong clock or a "
                           "corrupt value?)", where(w, sizeof w, name, e[i].line), late,
                           (double)(late - origin) * 1e-9, origin);
            goto fail;
        }
        r->issue_start_ns -= origin;
        r->issue_end_ns -= origin;
        if (wk) {
            r->work_start_ns -= origin;
            r->work_end_ns -= origin;
            nwork++;
        } else {
            r->work_start_ns = r->work_end_ns = -1;
        }
        if (r->issue_end_ns > end)
            end = r->issue_end_ns;
    }
    const int ncta = e[n - 1].r.cta + 1;
    out->recs = malloc(n * sizeof *out->recs);
    out->first = calloc((size_t)ncta + 1, sizeof *out->first);
    if (!out->recs || !out->first) {
        xs_trace_free(out);
        st = xs_seterr(XS_ENOMEM, "%s: out of memory for %zu records", name, n);
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        out->recs[i] = e[i].r;
        out->first[e[i].r.cta + 1] = i + 1;
    }
    for (int c = 1; c <= ncta; c++) /* CTAs without records: an empty range */
        if (out->first[c] < out->first[c - 1])
            out->first[c] = out->first[c - 1];
    out->n = n;
    out->ncta = ncta;
    out->origin_ns = origin;
    out->end_ns = end;
    out->nwork = nwork;
    if (mv) {
        out->capacity = mv->capacity;
        out->producers = mv->producers;
        memcpy(out->device, mv->device, sizeof out->device);
        memcpy(out->target, mv->target, sizeof out->target);
        memcpy(out->kernel, mv->kernel, sizeof out->kernel);
    }
    free(e);
    return XS_OK;
fail:
    free(e);
    return st;
}

xs_status xs_trace_build(const xs_trace_record *r, size_t n, const char *name, xs_trace *out)
{
    memset(out, 0, sizeof *out);
    if (n && !r)
        return xs_seterr(XS_EINVAL, "%s: no records", name);
    entry *e = malloc((n ? n : 1) * sizeof *e);
    if (!e)
        return xs_seterr(XS_ENOMEM, "%s: out of memory for %zu records", name, n);
    for (size_t i = 0; i < n; i++) {
        e[i].r = r[i];
        e[i].line = -(long)i - 1;
    }
    return build(e, n, name, NULL, 0, out);
}

/* ---- parse --------------------------------------------------------------------------------- */

static char *trim(char *a)
{
    while (isspace((unsigned char)*a))
        a++;
    char *e = a + strlen(a);
    while (e > a && isspace((unsigned char)e[-1]))
        *--e = 0;
    return a;
}

/* A decimal int64 with an optional leading '-'; 0 on success, else *why says what is wrong. */
static int parse_i64(const char *t, int64_t *out, const char **why)
{
    const char *d = *t == '-' ? t + 1 : t;
    if (!*t) { *why = "is empty"; return -1; }
    if (!isdigit((unsigned char)*d)) { *why = "is not an integer"; return -1; }
    errno = 0;
    char *end;
    long long v = strtoll(t, &end, 10);
    if (*end) { *why = "is not an integer"; return -1; }
    if (errno == ERANGE) { *why = "is out of range (over 64 bits)"; return -1; }
    *out = v;
    return 0;
}

static const char *const field_names[8] = {"cta", "sm", "seq", "bytes", "issue_start_ns",
                                           "issue_end_ns", "work_start_ns", "work_end_ns"};

/* One record line (modified in place) into *r; 0 or the failing status. */
static xs_status parse_record(char *l, const char *name, long lineno, xs_trace_record *r)
{
    char *field[9];
    int nf = 0;
    field[nf++] = l;
    for (char *c = l; *c; c++)
        if (*c == ',') {
            *c = 0;
            if (nf == 9)
                break;
            field[nf++] = c + 1;
        }
    if (nf != 8)
        return xs_seterr(XS_EPARSE, "%s:%ld: %s fields (%d); a record is %s (a truncated file?)",
                         name, lineno, nf < 8 ? "too few" : "too many", nf > 8 ? 9 : nf, header);
    int64_t v[8];
    for (int i = 0; i < 8; i++) {
        const char *why;
        char *t = trim(field[i]);
        if (parse_i64(t, &v[i], &why))
            return xs_seterr(XS_EPARSE, "%s:%ld: %s '%.40s' %s", name, lineno, field_names[i], t,
                             why);
        if (v[i] < 0 && !(i >= 6 && v[i] == -1))
            return xs_seterr(XS_EPARSE, "%s:%ld: %s %" PRId64 " is negative%s", name, lineno,
                             field_names[i], v[i], i >= 6 ? " (-1: not recorded)" : "");
        if (i < 3 && v[i] > INT32_MAX)
            return xs_seterr(XS_EPARSE, "%s:%ld: %s %" PRId64 " is too large", name, lineno,
                             field_names[i], v[i]);
    }
    if ((v[6] == -1) != (v[7] == -1))
        return xs_seterr(XS_EPARSE, "%s:%ld: work span half recorded (%" PRId64 ", %" PRId64
                         "); both -1 when not recorded", name, lineno, v[6], v[7]);
    *r = (xs_trace_record){.cta = (int32_t)v[0], .sm = (int32_t)v[1], .seq = (int32_t)v[2],
                           .flags = v[6] >= 0 ? XS_TRACE_WORK : 0, .bytes = v[3],
                           .issue_start_ns = v[4], .issue_end_ns = v[5], .work_start_ns = v[6],
                           .work_end_ns = v[7]};
    return XS_OK;
}

/* A metadata line's text after '#' (trimmed): a known key's value into *mv. seen: bit per key. */
static xs_status parse_meta(char *l, const char *name, long lineno, meta_vals *mv, int *seen,
                            uint64_t *dropped)
{
    char *eq = strchr(l, '=');
    if (!eq)
        return XS_OK; /* a comment */
    for (char *c = l; c < eq; c++)
        if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '_'))
            return XS_OK; /* not a key: a comment that holds '=' */
    *eq = 0;
    const char *key = l;
    char *val = trim(eq + 1);
    static const char *const known[] = {"dropped", "capacity", "producers", "device", "target",
                                        "kernel", "clock"};
    int k = -1;
    for (int i = 0; i < (int)(sizeof known / sizeof known[0]); i++)
        if (!strcmp(key, known[i]))
            k = i;
    if (k < 0)
        return XS_OK; /* unknown keys are ignored (later versions may add some) */
    if (*seen & (1 << k))
        return xs_seterr(XS_EPARSE, "%s:%ld: '%s' given twice", name, lineno, key);
    *seen |= 1 << k;
    if (k <= 2) {
        int64_t v;
        const char *why;
        if (parse_i64(val, &v, &why))
            return xs_seterr(XS_EPARSE, "%s:%ld: %s '%.40s' %s", name, lineno, key, val, why);
        if (v < 0)
            return xs_seterr(XS_EPARSE, "%s:%ld: %s %" PRId64 " is negative", name, lineno, key,
                             v);
        if (k == 0) {
            if (v > 0)
                return xs_seterr(XS_EPARSE, "%s:%ld: trace overflowed: %" PRId64 " records "
                                 "dropped; raise the capacity", name, lineno, v);
            *dropped = (uint64_t)v;
        } else if (k == 1) {
            mv->capacity = (uint64_t)v;
        } else {
            if (v < 1 || v > XS_TRACE_MAX_CTAS)
                return xs_seterr(XS_EPARSE, "%s:%ld: producers %" PRId64 " outside 1..%d", name,
                                 lineno, v, XS_TRACE_MAX_CTAS);
            mv->producers = (int)v;
        }
        return XS_OK;
    }
    if (k == 3)
        snprintf(mv->device, sizeof mv->device, "%s", val);
    else if (k == 4) {
        if (strcmp(val, "host") && strcmp(val, "local") && strcmp(val, "virtual") &&
            strcmp(val, "peer"))
            return xs_seterr(XS_EPARSE, "%s:%ld: target '%.40s' is not host, local, virtual or "
                             "peer", name, lineno, val);
        snprintf(mv->target, sizeof mv->target, "%s", val);
    } else if (k == 5)
        snprintf(mv->kernel, sizeof mv->kernel, "%s", val);
    else if (strcmp(val, "globaltimer"))
        return xs_seterr(XS_EPARSE, "%s:%ld: clock '%.40s' is not supported (times are ns of "
                         "%%globaltimer, one clock for every SM)", name, lineno, val);
    return XS_OK;
}

xs_status xs_trace_parse(const char *text, size_t len, const char *name, xs_trace *out)
{
    memset(out, 0, sizeof *out);
    if (len == 0)
        return xs_seterr(XS_EPARSE, "%s: empty file (expected '%s')", name, version_line);
    if (memchr(text, 0, len))
        return xs_seterr(XS_EPARSE, "%s: binary data (NUL byte) in a trace", name);
    meta_vals mv;
    memset(&mv, 0, sizeof mv);
    int seen = 0, have_header = 0;
    uint64_t dropped = 0; /* 0 once read: a positive count fails at its line */
    long lineno = 0, hline = 0;
    size_t n = 0, cap = 0;
    entry *e = NULL;
    char line[MAX_LINE + 2];
    size_t pos = 0;
    xs_status st = XS_OK;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
        lineno++;
        if (ll > MAX_LINE) {
            st = xs_seterr(XS_EPARSE, "%s:%ld: line longer than %d characters", name, lineno,
                           MAX_LINE);
            goto fail;
        }
        memcpy(line, text + pos, ll);
        line[ll] = 0;
        pos += ll + (nl ? 1 : 0);
        char *l = trim(line);
        if (lineno == 1) {
            if (!strcmp(l, version_line))
                continue;
            if (!strncmp(l, "# xstage-trace ", 15))
                st = xs_seterr(XS_EPARSE, "%s:1: unsupported trace version '%.20s' (this xstage "
                               "reads v%d)", name, trim(l + 15), XS_TRACE_VERSION);
            else
                st = xs_seterr(XS_EPARSE, "%s:1: not an xstage trace: expected '%s', found "
                               "'%.40s'", name, version_line, l);
            goto fail;
        }
        if (!*l)
            continue;
        if (*l == '#') {
            if (!have_header &&
                (st = parse_meta(trim(l + 1), name, lineno, &mv, &seen, &dropped)) != XS_OK)
                goto fail;
            continue;
        }
        if (!have_header) {
            if (strcmp(l, header)) {
                st = xs_seterr(XS_EPARSE, "%s:%ld: expected the header '%s', found '%.60s'",
                               name, lineno, header, l);
                goto fail;
            }
            if (!(seen & 1)) {
                st = xs_seterr(XS_EPARSE, "%s:%ld: header before a '# dropped=N' line (required: "
                               "how many records a full buffer lost)", name, lineno);
                goto fail;
            }
            have_header = 1;
            hline = lineno;
            continue;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            entry *ne = realloc(e, nc * sizeof *ne);
            if (!ne) {
                st = xs_seterr(XS_ENOMEM, "%s:%ld: out of memory for %zu records", name, lineno,
                               nc);
                goto fail;
            }
            e = ne;
            cap = nc;
        }
        if ((st = parse_record(l, name, lineno, &e[n].r)) != XS_OK)
            goto fail;
        e[n++].line = lineno;
    }
    if (!have_header) {
        st = xs_seterr(XS_EPARSE, "%s:%ld: no header '%s' (a truncated file?)", name, lineno,
                       header);
        goto fail;
    }
    if (len && text[len - 1] != '\n') {
        /* the last line was cut: a trace written in full ends with a line break */
        st = xs_seterr(XS_EPARSE, "%s:%ld: last line has no line break (a truncated file?)", name,
                       lineno);
        goto fail;
    }
    if (!e && !(e = malloc(sizeof *e))) {
        st = xs_seterr(XS_ENOMEM, "%s: out of memory", name);
        goto fail;
    }
    return build(e, n, name, &mv, hline, out);
fail:
    free(e);
    return st;
}

xs_status xs_trace_load(const char *path, xs_trace *out)
{
    memset(out, 0, sizeof *out);
    char *buf;
    size_t len;
    XS_TRY(xs_read_all(path, "trace", &buf, &len));
    xs_status st = xs_trace_parse(buf, len, strcmp(path, "-") ? path : "stdin", out);
    free(buf);
    return st;
}

void xs_trace_free(xs_trace *t)
{
    free(t->recs);
    free(t->first);
    memset(t, 0, sizeof *t);
}

int64_t xs_trace_bytes(const xs_trace *t)
{
    int64_t b = 0;
    for (size_t i = 0; i < t->n; i++)
        b += t->recs[i].bytes;
    return b;
}
