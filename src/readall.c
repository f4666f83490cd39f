// SPDX-License-Identifier: Apache-2.0
/*
 * readall.c - read a whole input file into memory (readall.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "readall.h"

xs_status xs_read_all(const char *path, const char *what, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    const int in = !strcmp(path, "-");
    FILE *f = in ? stdin : fopen(path, "rb");
    const char *name = in ? "stdin" : path;
    if (!f)
        return xs_seterr(XS_EIO, "%s: cannot open %s: %s", name, what, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    xs_status st = XS_OK;
    if (!b) {
        st = xs_seterr(XS_ENOMEM, "%s: out of memory", name);
        goto out;
    }
    for (;;) {
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (k == 0)
            break;
        if (n == cap) {
            if (cap >= ((size_t)1 << 30)) {
                st = xs_seterr(XS_ERANGE, "%s: %s larger than 1 GiB", name, what);
                goto out;
            }
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                st = xs_seterr(XS_ENOMEM, "%s: out of memory", name);
                goto out;
            }
            b = nb;
            cap *= 2;
        }
    }
    if (ferror(f))
        st = xs_seterr(XS_EIO, "%s: read error: %s", name, strerror(errno));
out:
    if (!in)
        fclose(f);
    if (st != XS_OK) {
        free(b);
        return st;
    }
    *buf = b;
    *len = n;
    return XS_OK;
}
