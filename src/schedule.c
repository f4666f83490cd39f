// SPDX-License-Identifier: Apache-2.0
/*
 * schedule.c - burst-gap schedules: CSV parse and write (docs/MODEL.md).
 *
 *     # comment lines and blank lines anywhere
 *     producers,bytes_per_producer,gap_ns
 *     132,16384,0
 *
 * Every error names the file and line: a schedule is usually written by hand.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"
#include "csv.h"
#include "readall.h"
#include "xstage_outfile.h"

#define MAX_LINE 4096
#define MAX_COLUMNS 64 /* in a schedule's header */
static const char header[] = "producers,bytes_per_producer,gap_ns";

void xs_schedule_free(xs_schedule *s)
{
    free(s->rows);
    s->rows = NULL;
    s->nrows = s->cap = 0;
}

xs_status xs_schedule_append(xs_schedule *s, int producers, int64_t bytes, double gap_ns)
{
    if (producers < 1 || producers > XS_MAX_PRODUCERS)
        return xs_seterr(XS_ERANGE, "producers = %d outside 1..%d", producers, XS_MAX_PRODUCERS);
    if (bytes < 1 || bytes > XS_MAX_BYTES_PER_PRODUCER)
        return xs_seterr(XS_ERANGE, "bytes_per_producer = %" PRId64 " outside 1..2^40", bytes);
    if (!(gap_ns >= 0) || gap_ns > XS_MAX_GAP_NS)
        return xs_seterr(XS_ERANGE, "gap_ns = %g outside 0..1e12", gap_ns);
    if (s->nrows >= XS_MAX_ROWS)
        return xs_seterr(XS_ERANGE, "more than %d rows", XS_MAX_ROWS);
    if (s->nrows == s->cap) {
        int nc = s->cap ? s->cap * 2 : 16;
        xs_row *nr = realloc(s->rows, (size_t)nc * sizeof *nr);
        if (!nr)
            return xs_seterr(XS_ENOMEM, "out of memory for %d schedule rows", nc);
        s->rows = nr;
        s->cap = nc;
    }
    s->rows[s->nrows++] = (xs_row){producers, bytes, gap_ns};
    return XS_OK;
}

static char *trim(char *a)
{
    while (isspace((unsigned char)*a))
        a++;
    char *e = a + strlen(a);
    while (e > a && isspace((unsigned char)e[-1]))
        *--e = 0;
    return a;
}

/* Integer with an optional K/M/G suffix (powers of 1024); 0 on success. */
static int parse_int(const char *t, int64_t max, int64_t *out, const char **why)
{
    if (!*t) { *why = "is empty"; return -1; }
    if (*t == '-') { *why = "is negative"; return -1; }
    if (!isdigit((unsigned char)*t)) { *why = "is not a number"; return -1; }
    errno = 0;
    char *end;
    unsigned long long v = strtoull(t, &end, 10);
    if (errno == ERANGE) { *why = "overflows"; return -1; }
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
    if (*end) { *why = (*end == '.' || *end == 'e' || *end == 'E') ? "is not an integer"
                                                                     : "is not a number";
                return -1; }
    if (v > (unsigned long long)max / mul) { *why = "is too large"; return -1; }
    *out = (int64_t)(v * mul);
    return 0;
}

static int parse_gap(const char *t, double *out, const char **why)
{
    if (!*t) { *why = "is empty"; return -1; }
    errno = 0;
    char *end;
    double v = strtod(t, &end);
    if (end == t || *end) { *why = "is not a number"; return -1; }
    if (errno == ERANGE || !isfinite(v)) { *why = "overflows"; return -1; }
    if (v < 0) { *why = "is negative"; return -1; }
    if (v > XS_MAX_GAP_NS) { *why = "is too large (over 1e12 ns)"; return -1; }
    *out = v;
    return 0;
}

xs_status xs_schedule_parse(const char *text, size_t len, const char *name, xs_schedule *s)
{
    memset(s, 0, sizeof *s);
    if (len == 0)
        return xs_seterr(XS_EPARSE, "%s: empty schedule (expected the header '%s')", name, header);
    if (memchr(text, 0, len))
        return xs_seterr(XS_EPARSE, "%s: binary data (NUL byte) in a schedule", name);
    char line[MAX_LINE + 2];
    int lineno = 0, have_header = 0, ncols = 0, col[3];
    static const char *const columns[3] = {"producers", "bytes_per_producer", "gap_ns"};
    double total = 0;
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
        lineno++;
        if (ll > MAX_LINE) {
            xs_schedule_free(s);
            return xs_seterr(XS_EPARSE, "%s:%d: line longer than %d characters", name, lineno,
                             MAX_LINE);
        }
        memcpy(line, text + pos, ll);
        line[ll] = 0;
        pos += ll + (nl ? 1 : 0);
        char *l = trim(line);
        if (!*l || *l == '#')
            continue;
        if (!have_header) {
            /* the header: the three columns by name, in any order, among any others */
            char *hf[MAX_COLUMNS];
            int nh = xs_csv_split(l, hf, MAX_COLUMNS);
            char where[300];
            snprintf(where, sizeof where, "%s:%d", name, lineno);
            if (nh > MAX_COLUMNS)
                return xs_seterr(XS_EPARSE, "%s: more than %d columns in the header", where,
                                 MAX_COLUMNS);
            XS_TRY(xs_csv_columns(hf, nh, columns, 3, col, where));
            ncols = nh;
            have_header = 1;
            continue;
        }
        char *all[MAX_COLUMNS];
        int nf = xs_csv_split(l, all, MAX_COLUMNS);
        if (nf != ncols) {
            xs_schedule_free(s);
            return xs_seterr(XS_EPARSE, "%s:%d: %s fields; the header has %d columns (%s)", name,
                             lineno, nf < ncols ? "too few" : "too many", ncols, header);
        }
        char *field[3] = {all[col[0]], all[col[1]], all[col[2]]};
        const char *why;
        int64_t k, b;
        double g;
        if (parse_int(field[0], XS_MAX_PRODUCERS, &k, &why)) {
            xs_schedule_free(s);
            if (!strcmp(why, "is too large"))
                return xs_seterr(XS_EPARSE, "%s:%d: producers '%s' is too large (at most %d)",
                                 name, lineno, field[0], XS_MAX_PRODUCERS);
            return xs_seterr(XS_EPARSE, "%s:%d: producers '%s' %s", name, lineno, field[0],
                             why);
        }
        if (k == 0) {
            xs_schedule_free(s);
            return xs_seterr(XS_EPARSE, "%s:%d: zero producers; a row needs at least one", name,
                             lineno);
        }
        if (parse_int(field[1], XS_MAX_BYTES_PER_PRODUCER, &b, &why)) {
            xs_schedule_free(s);
            return xs_seterr(XS_EPARSE, "%s:%d: bytes_per_producer '%s' %s%s", name, lineno,
                             field[1], why,
                             strcmp(why, "is too large") ? "" : " (at most 2^40)");
        }
        if (b == 0) {
            xs_schedule_free(s);
            return xs_seterr(XS_EPARSE, "%s:%d: bytes_per_producer is zero; a burst stores at "
                             "least one byte", name, lineno);
        }
        if (parse_gap(field[2], &g, &why)) {
            xs_schedule_free(s);
            return xs_seterr(XS_EPARSE, "%s:%d: gap_ns '%s' %s", name, lineno, field[2],
                             why);
        }
        total += (double)k * (double)b;
        if (total > 4e18) {
            xs_schedule_free(s);
            return xs_seterr(XS_EPARSE, "%s:%d: total bytes of the schedule overflow", name,
                             lineno);
        }
        xs_status st = xs_schedule_append(s, (int)k, b, g);
        if (st != XS_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", xs_errmsg());
            xs_schedule_free(s);
            return xs_seterr(st, "%s:%d: %s", name, lineno, msg);
        }
    }
    if (!have_header)
        return xs_seterr(XS_EPARSE, "%s: empty schedule (only comments or blank lines; expected "
                         "the header '%s')", name, header);
    if (s->nrows == 0)
        return xs_seterr(XS_EPARSE, "%s:%d: no rows after the header", name, lineno);
    return XS_OK;
}

xs_status xs_schedule_load(const char *path, xs_schedule *s)
{
    memset(s, 0, sizeof *s);
    char *buf;
    size_t len;
    XS_TRY(xs_read_all(path, "schedule", &buf, &len));
    xs_status st = xs_schedule_parse(buf, len, strcmp(path, "-") ? path : "stdin", s);
    free(buf);
    return st;
}

void xs_write_comment(FILE *f, const char *comment)
{
    /* every line of the comment becomes a '#' line */
    const char *c = comment ? comment : "";
    while (*c) {
        const char *e = strchr(c, '\n');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        fprintf(f, "# %.*s\n", (int)n, c);
        c += n + (e ? 1 : 0);
    }
}

xs_status xs_schedule_write(const xs_schedule *s, FILE *f, const char *comment)
{
    xs_write_comment(f, comment);
    fprintf(f, "%s\n", header);
    for (int i = 0; i < s->nrows; i++) {
        /* the gap in the fewest digits (15 to 17) that read back as the same double, so that a
         * written schedule (a plan's gap/n) loads exactly as it was predicted */
        char gap[32];
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(gap, sizeof gap, "%.*g", digits, s->rows[i].gap_ns);
            if (strtod(gap, NULL) == s->rows[i].gap_ns)
                break;
        }
        fprintf(f, "%d,%" PRId64 ",%s\n", s->rows[i].producers, s->rows[i].bytes_per_producer,
                gap);
    }
    return ferror(f) ? xs_seterr(XS_EIO, "write error") : XS_OK;
}

xs_status xs_schedule_save(const xs_schedule *s, const char *path, const char *comment)
{
    xs_outfile o; /* atomic: a failed write leaves the old file (xstage_outfile.h) */
    XS_TRY(xs_outfile_open(&o, path));
    xs_status st = xs_schedule_write(s, o.f, comment);
    if (st != XS_OK) {
        xs_outfile_discard(&o);
        return xs_seterr(st, "%s: write error", path);
    }
    return xs_outfile_commit(&o);
}

xs_status xs_schedule_check_size(const xs_schedule *s, const char *name)
{
    const int64_t np = xs_schedule_max_producers(s), cells = (int64_t)s->nrows * np;
    if (cells > XS_MAX_SIM_CELLS)
        return xs_seterr(XS_ERANGE, "%s: %d rows x %" PRId64 " producers (its widest row) = %"
                         PRId64 " cells; the simulator takes at most %" PRId64 " rows x "
                         "producers (docs/MODEL.md, Sizes)", name, s->nrows, np, cells,
                         (int64_t)XS_MAX_SIM_CELLS);
    return XS_OK;
}

int xs_schedule_max_producers(const xs_schedule *s)
{
    int m = 0;
    for (int i = 0; i < s->nrows; i++)
        if (s->rows[i].producers > m)
            m = s->rows[i].producers;
    return m;
}

double xs_schedule_bytes(const xs_schedule *s)
{
    double b = 0;
    for (int i = 0; i < s->nrows; i++)
        b += (double)s->rows[i].producers * (double)s->rows[i].bytes_per_producer;
    return b;
}

double xs_schedule_gap_ns(const xs_schedule *s)
{
    double g = 0;
    for (int i = 0; i < s->nrows; i++)
        g += s->rows[i].gap_ns;
    return g;
}
