// SPDX-License-Identifier: Apache-2.0
/*
 * results.c - a command's table as --csv FILE and --json FILE (xstage_results.h).
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage_bench.h"
#include "xstage_cli.h"
#include "xstage_results.h"

/* 1 when one of the files is the standard output: the human report stays silent. */
int xs_results_quiet(const xs_results *t)
{
    return (t->csv_path && !strcmp(t->csv_path, "-")) ||
           (t->json_path && !strcmp(t->json_path, "-"));
}

/* Open both (atomic files, xstage_outfile.h); 0, or the exit status after the error line. */
int xs_results_open(xs_results *t, const char *cmd)
{
    if (t->csv_path && xs_outfile_open(&t->csv, t->csv_path) != XS_OK)
        return xs_cli_failf("%s: --csv %s", cmd, xs_errmsg());
    if (t->json_path && xs_outfile_open(&t->json, t->json_path) != XS_OK) {
        xs_outfile_discard(&t->csv);
        return xs_cli_failf("%s: --json %s", cmd, xs_errmsg());
    }
    return 0;
}

/* Each line of text as a JSON string of an array, after "key": [. */
static void json_lines(FILE *f, const char *key, const char *text)
{
    fprintf(f, ",\n\"%s\": [", key);
    int n = 0;
    while (text && *text) {
        const char *nl = strchr(text, '\n');
        size_t len = nl ? (size_t)(nl - text) : strlen(text);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1),
                 text);
        fputs(n++ ? ",\n" : "\n", f);
        xs_json_string(f, line);
        text += len + (nl != NULL);
    }
    fputs("]", f);
}

/* The JSON's head: format, the command line, the header lines (notes) and the columns
 * (name, unit); then the rows array is open. */
void xs_results_head(xs_results *t, const char *notes, const char *const *name,
                          const char *const *unit, int ncol)
{
    FILE *f = t->json.f;
    if (!f)
        return;
    int argc;
    char **argv = xs_cli_command(&argc);
    char cmd[4096] = "xstage";
    size_t n = strlen(cmd);
    for (int i = 1; i < argc && n < sizeof cmd; i++)
        n += (size_t)snprintf(cmd + n, sizeof cmd - n, " %s", argv[i]);
    fprintf(f, "{\"format\": %d, \"command\": ", XS_RESULTS_FORMAT);
    xs_json_string(f, cmd);
    json_lines(f, "notes", notes);
    fputs(",\n\"columns\": [", f);
    for (int i = 0; i < ncol; i++) {
        fprintf(f, "%s\n{\"name\": ", i ? "," : "");
        xs_json_string(f, name[i]);
        fputs(", \"unit\": ", f);
        xs_json_string(f, unit[i]);
        fputc('}', f);
    }
    fputs("\n],\n\"rows\": [", f);
}

/* One JSON row: ncol values, each a number when it reads whole as a finite one, else a
 * string. */
void xs_results_row(xs_results *t, const char *const *name, const char *const *val, int ncol)
{
    FILE *f = t->json.f;
    if (!f)
        return;
    fputs(t->rows++ ? ",\n{" : "\n{", f);
    for (int i = 0; i < ncol; i++) {
        char *end;
        double v = strtod(val[i], &end);
        xs_json_string(f, name[i]);
        fputs(": ", f);
        if (*val[i] && !*end && isfinite(v) && !isspace((unsigned char)*val[i]))
            fputs(val[i], f);
        else
            xs_json_string(f, val[i]);
        if (i + 1 < ncol)
            fputs(", ", f);
    }
    fputc('}', f);
}

/* Close the JSON (summary: the lines after the table) and commit both files; 0 or 1 after the
 * error line. */
int xs_results_close(xs_results *t, const char *summary)
{
    if (t->json.f) {
        fputs("\n]", t->json.f);
        json_lines(t->json.f, "summary", summary);
        fputs("}\n", t->json.f);
    }
    int rc = 0;
    if (xs_outfile_commit(&t->csv) != XS_OK)
        rc = xs_cli_fail();
    if (!rc && xs_outfile_commit(&t->json) != XS_OK)
        rc = xs_cli_fail();
    xs_outfile_discard(&t->json);
    return rc;
}

/* s as a CSV field: quoted when it holds a comma, a quote or a line break. */
void xs_csv_field(FILE *f, const char *s)
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

/* predict's and plan's rows (the columns of xs_result_print) to the CSV and the JSON. */
void xs_results_sim(xs_results *t, const char *notes, const xs_result *r, const xs_schedule *s)
{
    static const char *const name[7] = {"row", "producers", "bytes_per_producer", "gap_ns",
                                        "issue_med_ns", "issue_max_ns", "end_ns"};
    static const char *const unit[7] = {"", "", "bytes", "ns", "ns", "ns", "ns"};
    if (t->csv.f)
        xs_result_print(r, s, 1, t->csv.f);
    xs_results_head(t, notes, name, unit, 7);
    for (int i = 0; t->json.f && i < r->nrows; i++) {
        char v[7][40];
        snprintf(v[0], 40, "%d", i);
        snprintf(v[1], 40, "%d", s->rows[i].producers);
        snprintf(v[2], 40, "%lld", (long long)s->rows[i].bytes_per_producer);
        snprintf(v[3], 40, "%.10g", s->rows[i].gap_ns);
        snprintf(v[4], 40, "%.1f", r->rows[i].issue_med_ns);
        snprintf(v[5], 40, "%.1f", r->rows[i].issue_max_ns);
        snprintf(v[6], 40, "%.1f", r->rows[i].end_ns);
        const char *const val[7] = {v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
        xs_results_row(t, name, val, 7);
    }
}


/* The next CSV field of *p (quoted or not) into out; *p moves past it and its comma. */
static void next_field(const char **p, char *out, size_t n)
{
    const char *c = *p;
    size_t k = 0;
    if (*c == '"') {
        for (c++; *c && *c != '\n'; c++) {
            if (*c == '"' && c[1] == '"')
                c++;
            else if (*c == '"') {
                c++;
                break;
            }
            if (k + 1 < n)
                out[k++] = *c;
        }
    }
    for (; *c && *c != ',' && *c != '\n'; c++)
        if (k + 1 < n)
            out[k++] = *c;
    out[k] = 0;
    *p = *c == ',' ? c + 1 : c;
}

xs_status xs_results_json_from_csv(FILE *f, const char *csv)
{
    enum { MAXCOL = 64 };
    char name[MAXCOL][64];
    const char *nm[MAXCOL], *un[MAXCOL];
    int ncol = 0;
    char *notes = NULL, *summary = NULL;
    size_t nn = 0, sn = 0;
    FILE *nf = open_memstream(&notes, &nn), *sf = open_memstream(&summary, &sn);
    if (!nf || !sf) {
        if (nf) fclose(nf);
        if (sf) fclose(sf);
        free(notes);
        free(summary);
        return xs_seterr(XS_ENOMEM, "out of memory");
    }
    /* the notes and the column names first: the JSON's head comes before its rows */
    const char *c = csv;
    while (*c && *c == '#') {
        const char *e = strchr(c, '\n');
        size_t len = e ? (size_t)(e - c) : strlen(c);
        fprintf(nf, "%.*s\n", (int)len, c);
        c += len + (e != NULL);
    }
    fclose(nf);
    while (*c && *c != '\n' && ncol < MAXCOL) {
        next_field(&c, name[ncol], sizeof name[ncol]);
        nm[ncol] = name[ncol];
        un[ncol] = "";
        ncol++;
    }
    c += *c == '\n';
    xs_results t;
    memset(&t, 0, sizeof t);
    t.json.f = f;
    xs_results_head(&t, notes ? notes : "", nm, un, ncol);
    for (; *c; ) {
        const char *e = strchr(c, '\n');
        size_t len = e ? (size_t)(e - c) : strlen(c);
        if (*c == '#') {
            fprintf(sf, "%.*s\n", (int)len, c);
        } else if (len) {
            char val[MAXCOL][256];
            const char *vp[MAXCOL];
            const char *q = c;
            for (int i = 0; i < ncol; i++) {
                next_field(&q, val[i], sizeof val[i]);
                vp[i] = val[i];
            }
            xs_results_row(&t, nm, vp, ncol);
        }
        c += len + (e != NULL);
    }
    fclose(sf);
    fputs("\n]", f);
    json_lines(f, "summary", summary ? summary : "");
    fputs("}\n", f);
    free(notes);
    free(summary);
    return ferror(f) ? xs_seterr(XS_EIO, "write error") : XS_OK;
}
