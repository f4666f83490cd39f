// SPDX-License-Identifier: Apache-2.0
/*
 * bench_report.c - one table description (include/xstage_bench.h) written three ways: the human
 * fixed-width table with a units row and the spread next to each timing, CSV and JSON with the
 * same columns and values; and the report around them (header notes, summary, verdict).
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage_bench.h"
#include "xstage_results.h"
#include "xstage_launch.h"

/* ---- columns ---------------------------------------------------------------------------------- */

static const char *const stat_suffix[4] = {"", "_spread", "_min", "_max"};

xs_status xs_bench_table_init(xs_bench_table *t, const xs_bench_col *cols, int n)
{
    t->n = 0;
    for (int i = 0; i < n; i++) {
        const xs_bench_col *c = &cols[i];
        if (!c->name || !*c->name || strlen(c->name) > 50)
            return xs_seterr(XS_EINVAL, "bench: column %d: name missing or over 50 characters",
                             i);
        for (const char *p = c->name; *p; p++)
            if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_'))
                return xs_seterr(XS_EINVAL, "bench: column '%s': names are [a-z0-9_]", c->name);
        if (!c->fmt && c->kind != XS_COL_STAT && c->kind != XS_COL_BOOL)
            return xs_seterr(XS_EINVAL, "bench: column '%s': no format", c->name);
        const int parts = c->kind == XS_COL_STAT ? 4 : 1;
        for (int p = 0; p < parts; p++) {
            if (t->n >= XS_BENCH_MAX_COLS)
                return xs_seterr(XS_EINVAL, "bench: more than %d columns", XS_BENCH_MAX_COLS);
            struct xs_bench_leaf *l = &t->leaf[t->n];
            snprintf(l->name, sizeof l->name, "%s%s", c->name, parts > 1 ? stat_suffix[p] : "");
            for (int k = 0; k < t->n; k++)
                if (!strcmp(t->leaf[k].name, l->name))
                    return xs_seterr(XS_EINVAL, "bench: column '%s' twice", l->name);
            l->col = c;
            l->part = p;
            const char *unit = p == 1 ? "%" : c->unit ? c->unit : "";
            int w = c->width > 0 ? c->width : c->kind == XS_COL_STR || c->kind == XS_COL_CHARS
                                                 ? 4 : 6;
            /* the spread's heading in the table is "sprd", right after its timing */
            const int head = p == 1 ? 4 : (int)strlen(l->name);
            if (p == 1)
                w = 5;
            if (head > w)
                w = head;
            if ((int)strlen(unit) > w)
                w = (int)strlen(unit);
            l->width = w;
            t->n++;
        }
    }
    return XS_OK;
}

double xs_bench_ns_as_us(const void *row, int off)
{
    double v;
    memcpy(&v, (const char *)row + off, sizeof v);
    return v / 1e3;
}

void xs_bench_row_blank(const xs_bench_table *t, void *row)
{
    const double nan = NAN;
    const xs_bench_col *last = NULL;
    for (int i = 0; i < t->n; i++) {
        const xs_bench_col *c = t->leaf[i].col;
        if (c == last) /* the other leaves of one XS_COL_STAT */
            continue;
        last = c;
        if (c->kind == XS_COL_DOUBLE && !c->get)
            memcpy((char *)row + c->off, &nan, sizeof nan);
        else if (c->kind == XS_COL_STAT) {
            const xs_bench_stat s = {NAN, NAN, NAN, NAN, NAN, 0};
            memcpy((char *)row + c->off, &s, sizeof s);
        }
    }
}

/* A leaf's value: a number (*d, *is_int) or a string (returned, or NULL for a number). */
static const char *leaf_value(const struct xs_bench_leaf *l, const void *row, double *d,
                              int *is_int)
{
    const xs_bench_col *c = l->col;
    const char *base = (const char *)row;
    *d = NAN;
    *is_int = 0;
    switch (c->kind) {
    case XS_COL_STR:
        if (c->gets)
            return c->gets(row, c->arg);
        return *(const char *const *)(const void *)(base + c->off);
    case XS_COL_CHARS:
        return base + c->off;
    case XS_COL_INT:
    case XS_COL_BOOL:
        *is_int = 1;
        *d = c->get ? c->get(row, c->arg) : (double)*(const int *)(const void *)(base + c->off);
        return NULL;
    case XS_COL_STAT: {
        xs_bench_stat s;
        memcpy(&s, base + c->off, sizeof s);
        *d = l->part == 0 ? s.med : l->part == 1 ? xs_bench_spread_pct(&s)
             : l->part == 2 ? s.min : s.max;
        return NULL;
    }
    default:
        *d = c->get ? c->get(row, c->arg) : *(const double *)(const void *)(base + c->off);
        return NULL;
    }
}

/* A leaf formatted into buf: mode 0 table, 1 CSV, 2 JSON. */
static void leaf_format(const struct xs_bench_leaf *l, const void *row, int mode, char *buf,
                        size_t n)
{
    double d;
    int is_int;
    const char *s = leaf_value(l, row, &d, &is_int);
    const xs_bench_col *c = l->col;
    if (s || c->kind == XS_COL_STR || c->kind == XS_COL_CHARS) {
        snprintf(buf, n, c->fmt && strstr(c->fmt, "%s") ? c->fmt : "%s", s ? s : "-");
        return;
    }
    if (c->kind == XS_COL_BOOL) {
        snprintf(buf, n, "%s", d != 0 ? (mode ? "true" : "yes") : (mode ? "false" : "NO"));
        return;
    }
    if (isnan(d) || isinf(d)) {
        snprintf(buf, n, "%s", mode == 2 ? "null" : isnan(d) ? "nan" : d > 0 ? "inf" : "-inf");
        return;
    }
    if (is_int)
        snprintf(buf, n, c->fmt, (int)d);
    else
        snprintf(buf, n, c->kind == XS_COL_STAT && (l->part == 1 || !c->fmt) ? "%.1f" : c->fmt, d);
}

static int leaf_shown(const struct xs_bench_leaf *l, int all)
{
    return all || (!(l->col->flags & XS_COL_FILE) && l->part < 2);
}

static int leaf_left(const struct xs_bench_leaf *l)
{
    return l->col->kind == XS_COL_STR || l->col->kind == XS_COL_CHARS;
}

void xs_bench_table_head(FILE *f, const xs_bench_table *t, int all)
{
    for (int line = 0; line < 2; line++) {
        int first = 1;
        for (int i = 0; i < t->n; i++) {
            const struct xs_bench_leaf *l = &t->leaf[i];
            if (!leaf_shown(l, all))
                continue;
            const char *unit = l->part == 1 ? "%" : l->col->unit ? l->col->unit : "";
            const char *txt = line ? unit : l->part == 1 ? "sprd" : l->name;
            fprintf(f, "%s%*s", first ? "" : " ", leaf_left(l) ? -l->width : l->width, txt);
            first = 0;
        }
        fputc('\n', f);
    }
}

void xs_bench_table_row(FILE *f, const xs_bench_table *t, const void *row, int all)
{
    char buf[256];
    int first = 1;
    for (int i = 0; i < t->n; i++) {
        const struct xs_bench_leaf *l = &t->leaf[i];
        if (!leaf_shown(l, all))
            continue;
        leaf_format(l, row, 0, buf, sizeof buf);
        fprintf(f, "%s%*s", first ? "" : " ", leaf_left(l) ? -l->width : l->width, buf);
        first = 0;
    }
    fputc('\n', f);
}

void xs_bench_csv_head(FILE *f, const xs_bench_table *t)
{
    fputs("# units: ", f);
    for (int i = 0; i < t->n; i++) {
        const struct xs_bench_leaf *l = &t->leaf[i];
        fprintf(f, "%s%s", i ? "," : "", l->part == 1 ? "%" : l->col->unit ? l->col->unit : "");
    }
    fputc('\n', f);
    for (int i = 0; i < t->n; i++)
        fprintf(f, "%s%s", i ? "," : "", t->leaf[i].name);
    fputc('\n', f);
}

void xs_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        const unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* s as a CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void xs_bench_csv_row(FILE *f, const xs_bench_table *t, const void *row)
{
    char buf[256];
    for (int i = 0; i < t->n; i++) {
        leaf_format(&t->leaf[i], row, 1, buf, sizeof buf);
        if (i)
            fputc(',', f);
        csv_field(f, buf);
    }
    fputc('\n', f);
}

void xs_bench_json_row(FILE *f, const xs_bench_table *t, const void *row)
{
    char buf[256];
    fputc('{', f);
    for (int i = 0; i < t->n; i++) {
        const struct xs_bench_leaf *l = &t->leaf[i];
        leaf_format(l, row, 2, buf, sizeof buf);
        fprintf(f, "%s\"%s\": ", i ? ", " : "", l->name);
        if (leaf_left(l))
            xs_json_string(f, buf);
        else
            fputs(buf, f);
    }
    fputc('}', f);
}

/* ---- the report ------------------------------------------------------------------------------- */

xs_status xs_bench_report_open(xs_bench_report *r, const char *cmd, const xs_bench_table *t,
                               FILE *out, const char *csv, const char *json)
{
    memset(r, 0, sizeof *r);
    r->t = t;
    r->out = out;
    r->cmd = cmd;
    if (!xs_rank_primary())
        return XS_OK; /* rank 0 writes the files */
    /* "-": the file goes to the standard output and the human report to /dev/null */
    if (((csv && !strcmp(csv, "-")) || (json && !strcmp(json, "-"))) && out == stdout)
        XS_TRY(xs_outfile_claim_stdout());
    /* atomic files (xstage_outfile.h): a run that dies leaves the old file, not half a one */
    char why[600];
    if (csv && xs_outfile_open(&r->csv_file, csv) != XS_OK) {
        snprintf(why, sizeof why, "%s", xs_errmsg());
        return xs_seterr(XS_EIO, "%s: --csv %s", cmd, why);
    }
    r->csv = r->csv_file.f;
    if (json && xs_outfile_open(&r->json_file, json) != XS_OK) {
        snprintf(why, sizeof why, "%s", xs_errmsg());
        xs_outfile_discard(&r->csv_file);
        r->csv = NULL;
        return xs_seterr(XS_EIO, "%s: --json %s", cmd, why);
    }
    r->json = r->json_file.f;
    if (r->json) {
        /* the results format (xstage_results.h), the subcommand and the whole command line */
        fprintf(r->json, "{\"format\": %d, \"command\": \"%s\", \"argv\": [",
                XS_RESULTS_FORMAT, cmd);
        int argc;
        char **argv = xs_cli_command(&argc);
        for (int i = 0; i < argc; i++) {
            fputs(i ? ", " : "", r->json);
            xs_json_string(r->json, argv[i]);
        }
        fputc(']', r->json);
    }
    r->json_items = 1;
    return XS_OK;
}

/* Move the JSON document to phase p (0 keys, 1 notes, 2 rows, 3 summary), closing the array of
 * the phase it leaves and opening the next one's. */
static void json_phase(xs_bench_report *r, int p)
{
    static const char *const key[4] = {"", "notes", "rows", "summary"};
    if (r->phase == p)
        return;
    if (r->json) {
        if (r->phase > 0)
            fputs("\n]", r->json);
        fprintf(r->json, ",\n\"%s\": [", key[p]);
    }
    r->phase = p;
    r->json_items = 0;
}

void xs_bench_report_json_object(xs_bench_report *r, const char *key, const char *fragment)
{
    if (!r->json || r->phase > 0)
        return;
    fprintf(r->json, ",\n\"%s\": {%s}", key, fragment);
}

static void note_line(xs_bench_report *r, const char *line, size_t n)
{
    fprintf(r->out, "%.*s\n", (int)n, line);
    if (r->csv && r->phase != 2) /* the CSV's rows stay contiguous */
        fprintf(r->csv, "%.*s\n", (int)n, line);
    if (r->json && r->phase != 2) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf ? n : sizeof buf - 1), line);
        fputs(r->json_items++ ? ",\n" : "\n", r->json);
        xs_json_string(r->json, buf);
    }
}

void xs_bench_report_text(xs_bench_report *r, const char *text)
{
    json_phase(r, r->phase == 0 ? 1 : r->phase);
    while (*text) {
        const char *nl = strchr(text, '\n');
        const size_t n = nl ? (size_t)(nl - text) : strlen(text);
        note_line(r, text, n);
        text += n + (nl != NULL);
    }
}

void xs_bench_report_note(xs_bench_report *r, const char *fmt, ...)
{
    char buf[1024] = "# ";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + 2, sizeof buf - 2, fmt, ap);
    va_end(ap);
    json_phase(r, r->phase == 0 ? 1 : r->phase);
    note_line(r, buf, strlen(buf));
}

void xs_bench_report_begin(xs_bench_report *r)
{
    if (r->json) {
        json_phase(r, 1); /* the notes array exists even when empty */
        fputs("\n],\n\"columns\": [", r->json);
        for (int i = 0; i < r->t->n; i++) {
            const struct xs_bench_leaf *l = &r->t->leaf[i];
            fprintf(r->json, "%s\n{\"name\": \"%s\", \"unit\": ", i ? "," : "", l->name);
            xs_json_string(r->json, l->part == 1 ? "%" : l->col->unit ? l->col->unit : "");
            fputc('}', r->json);
        }
        fputs("\n],\n\"rows\": [", r->json);
    }
    r->phase = 2;
    r->json_items = 0;
    xs_bench_table_head(r->out, r->t, 0);
    if (r->csv)
        xs_bench_csv_head(r->csv, r->t);
}

void xs_bench_report_row(xs_bench_report *r, const void *row)
{
    xs_bench_table_row(r->out, r->t, row, 0);
    fflush(r->out);
    if (r->csv) {
        xs_bench_csv_row(r->csv, r->t, row);
        fflush(r->csv);
    }
    if (r->json) {
        fputs(r->json_items++ ? ",\n" : "\n", r->json);
        xs_bench_json_row(r->json, r->t, row);
    }
    r->rows++;
}

void xs_bench_report_end(xs_bench_report *r)
{
    json_phase(r, 3);
}

int xs_bench_report_close(xs_bench_report *r, int points, int failures, int interrupted)
{
    char line[256];
    if (interrupted) /* exactly this last line: tests/gpu/faults.sh compares it */
        snprintf(line, sizeof line, "# INTERRUPTED: partial results");
    else if (failures)
        snprintf(line, sizeof line, "# %s FAILED: %d point(s) failed or did not verify", r->cmd,
                 failures);
    else
        snprintf(line, sizeof line, "# %s OK: %d points, every run verified", r->cmd, points);
    json_phase(r, 3);
    note_line(r, line, strlen(line));
    fflush(r->out);
    if (r->json)
        fprintf(r->json, "\n],\n\"ok\": %s, \"failures\": %d, \"interrupted\": %s}\n",
                failures || interrupted ? "false" : "true", failures,
                interrupted ? "true" : "false");
    r->csv = r->json = NULL;
    int bad = 0;
    if (xs_outfile_commit(&r->csv_file) != XS_OK)
        bad = xs_cli_fail();
    if (!bad && xs_outfile_commit(&r->json_file) != XS_OK)
        bad = xs_cli_fail();
    xs_outfile_discard(&r->json_file); /* a JSON not committed after a failed CSV */
    return failures || interrupted || bad ? 1 : 0;
}
