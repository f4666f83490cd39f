// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_results.h - a command's table as --csv FILE and --json FILE, besides the human report.
 *
 * The one output convention of the tool (docs/CLI.md): --csv FILE and --json FILE, "-" for the
 * standard output, and then the human report stays silent. The CSV holds the table's columns
 * (its first line names them); the JSON document is
 *
 *   {"format": 1, "command": "xstage ...", "notes": ["# ...", ...],
 *    "columns": [{"name": "...", "unit": "..."}, ...], "rows": [{"name": value, ...}, ...],
 *    "summary": ["...", ...]}
 *
 * notes are the report's '#' header lines (device, versions, profile, inputs), summary the lines
 * after the table. Files are atomic (xstage_outfile.h).
 */
#ifndef XSTAGE_RESULTS_H
#define XSTAGE_RESULTS_H

#include <stdio.h>
#include "xstage.h"
#include "xstage_outfile.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XS_RESULTS_FORMAT 1 /* "format" of the JSON; raised when a field changes meaning */

/* Set csv_path / json_path (NULL: not asked for) while parsing, then open. */
typedef struct {
    const char *csv_path, *json_path; /* NULL: not asked for; "-": the standard output */
    xs_outfile csv, json;             /* csv.f / json.f: NULL when not asked for */
    int rows;                         /* rows written to the JSON */
} xs_results;

/* 1 when one of the two is "-": the caller prints no human report. */
int xs_results_quiet(const xs_results *t);
/* Open both; 0, or the exit status after the one error line ("cmd: --csv PATH: ..."). */
int xs_results_open(xs_results *t, const char *cmd);
/* The JSON's head: format, the command line (xs_cli_command), notes (text, one string per
 * line), the ncol columns (name, unit); the rows array is then open. No-op without --json. */
void xs_results_head(xs_results *t, const char *notes, const char *const *name,
                     const char *const *unit, int ncol);
/* One JSON row: each value as a number when it reads whole as a finite one, else a string. */
void xs_results_row(xs_results *t, const char *const *name, const char *const *val, int ncol);
/* Close the JSON (summary: the lines after the table) and commit both files; 0, or 1 after the
 * error line. */
int xs_results_close(xs_results *t, const char *summary);
/* s as a CSV field: quoted when it holds a comma, a quote or a line break. */
void xs_csv_field(FILE *f, const char *s);
/* The rows of a simulation or a replay (xs_result_print's columns) to the CSV (exactly what
 * xs_result_print writes) and the JSON (head included, with notes). */
void xs_results_sim(xs_results *t, const char *notes, const xs_result *r, const xs_schedule *s);
/* The JSON document of a CSV text that a command wrote (validate's, probe's): the '#' lines
 * before the column names are the notes, the '#' lines after the rows the summary, each row an
 * object keyed by the column names (units ""). To f, which stays open. */
xs_status xs_results_json_from_csv(FILE *f, const char *csv);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_RESULTS_H */
