// SPDX-License-Identifier: Apache-2.0
/*
 * csv.c - CSV headers matched by column name (csv.h).
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "csv.h"

static char *trim(char *a)
{
    while (isspace((unsigned char)*a))
        a++;
    char *e = a + strlen(a);
    while (e > a && isspace((unsigned char)e[-1]))
        *--e = 0;
    return a;
}

int xs_csv_split(char *line, char **field, int max)
{
    int nf = 0;
    char *start = line;
    for (char *c = line;; c++) {
        if (*c != ',' && *c)
            continue;
        int end = !*c;
        *c = 0;
        if (nf == max)
            return max + 1;
        field[nf++] = trim(start);
        if (end)
            return nf;
        start = c + 1;
    }
}

xs_status xs_csv_columns(char *const *field, int nf, const char *const *want, int nwant,
                         int *col, const char *where)
{
    char missing[512] = "", expected[512] = "";
    size_t nm = 0, ne = 0;
    for (int i = 0; i < nwant; i++) {
        col[i] = -1;
        for (int j = 0; j < nf; j++) {
            if (strcmp(field[j], want[i]))
                continue;
            if (col[i] >= 0)
                return xs_seterr(XS_EPARSE, "%s: column '%s' appears twice in the header", where,
                                 want[i]);
            col[i] = j;
        }
        ne += (size_t)snprintf(expected + ne, ne < sizeof expected ? sizeof expected - ne : 0,
                               "%s%s", i ? "," : "", want[i]);
        if (col[i] < 0)
            nm += (size_t)snprintf(missing + nm, nm < sizeof missing ? sizeof missing - nm : 0,
                                   "%s%s", nm ? ", " : "", want[i]);
    }
    if (nm)
        return xs_seterr(XS_EPARSE, "%s: expected the header '%s' (any order, extra columns "
                         "allowed); missing: %s", where, expected, missing);
    return XS_OK;
}
