// SPDX-License-Identifier: Apache-2.0
/*
 * trace_fallback.h - FALLBACK ONLY: a local xs_trace_write for as long as the installed headers
 * lack xstage_trace.h (the core's trace writer). byo.cu includes it only when
 * __has_include("xstage_trace.h") fails; delete this file once the core's writer is installed
 * everywhere the example is built. It writes the format of docs/TRACE.md, version 1, with the
 * signature the core declares:
 *   xs_status xs_trace_write(const char *path, const xs_trace_record *r, size_t n,
 *                            uint64_t dropped, const char *const *meta);
 */
#ifndef BYO_TRACE_FALLBACK_H
#define BYO_TRACE_FALLBACK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "xstage.h"
#include "xstage_device.cuh" /* xs_trace_record */

static xs_status xs_trace_write(const char *path, const xs_trace_record *r, size_t n,
                                uint64_t dropped, const char *const *meta)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return xs_seterr(XS_EIO, "%s: %s", path, strerror(errno));
    fprintf(f, "# xstage-trace v1\n# dropped=%llu\n", (unsigned long long)dropped);
    for (size_t i = 0; meta && meta[i]; i++)
        if (strncmp(meta[i], "dropped=", 8) && !strchr(meta[i], '\n'))
            fprintf(f, "# %s\n", meta[i]);
    fprintf(f, "cta,sm,seq,bytes,issue_start_ns,issue_end_ns,work_start_ns,work_end_ns\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%d,%d,%d,%lld,%lld,%lld,%lld,%lld\n", r[i].cta, r[i].sm, r[i].seq,
                (long long)r[i].bytes, (long long)r[i].issue_start_ns,
                (long long)r[i].issue_end_ns, (long long)r[i].work_start_ns,
                (long long)r[i].work_end_ns);
    const int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return xs_seterr(XS_EIO, "%s: write failed", path);
    return XS_OK;
}

#endif /* BYO_TRACE_FALLBACK_H */
