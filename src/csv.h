// SPDX-License-Identifier: Apache-2.0
/*
 * csv.h - the header of a CSV file that people write: columns found by name (any order, extra
 * columns allowed), the missing ones named in the error. Used by the schedule reader.
 */
#ifndef XSTAGE_CSV_H
#define XSTAGE_CSV_H

#include "xstage.h"

/* Split line (modified in place) at its commas into field[] (each trimmed of white space).
 * Returns the number of fields, or max + 1 when there are more than max (field[] then holds
 * the first max). */
int xs_csv_split(char *line, char **field, int max);

/* Find each of the nwant names of want[] among the nf header fields: col[i] gets want[i]'s
 * position. Other fields are allowed (ignored by the caller). XS_EPARSE, prefixed by where
 * ("t.csv:1"), when a name is missing ("expected the header 'a,b,c' (any order, extra
 * columns allowed); missing: b, c") or appears twice. */
xs_status xs_csv_columns(char *const *field, int nf, const char *const *want, int nwant,
                         int *col, const char *where);

#endif
