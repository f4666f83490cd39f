// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_outfile.h - every file xstage writes: atomically, and never over one of its inputs.
 *
 * A regular file is written to a temporary file in the same directory (".NAME.xs-XXXXXX"),
 * flushed, synced and closed with every step checked, then renamed over NAME. A failure at any
 * step removes the temporary file and leaves NAME as it was (absent, or its old contents): no
 * truncated file is ever left where a reader would take it for a whole one. A symbolic link is
 * followed (its target is replaced, the link stays); a path that exists and is not a regular
 * file (/dev/null, /dev/full, a pipe) is written in place, with the same checks. The name "-"
 * is the standard output (flushed and checked at commit, never closed).
 *
 * Before a command starts, xs_files_distinct compares every output with every input and with
 * the other outputs by device and inode (so ./a, a symbolic link to a and a hard link of a are
 * all a), and refuses a collision in one line.
 */
#ifndef XSTAGE_OUTFILE_H
#define XSTAGE_OUTFILE_H

#include <stdio.h>
#include "xstage.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    FILE *f;         /* write here between open and commit */
    char path[4096]; /* the file that gets the contents (a symbolic link's target) */
    char tmp[4096];  /* the temporary file; "" when writing in place */
} xs_outfile;

/* Open path for writing as above. On success o->f is a fresh, empty stream; on failure nothing
 * is created and the message names path. */
xs_status xs_outfile_open(xs_outfile *o, const char *path);
/* Flush, check the stream's error flag, sync, close and rename into place. On any failure the
 * temporary file is removed, the old file is untouched and the message names the path and the
 * system's reason (e.g. "No space left on device", "File too large"). o->f is closed either way.
 * Safe on a zeroed or already finished xs_outfile (returns XS_OK). */
xs_status xs_outfile_commit(xs_outfile *o);
/* The standard output carries a --csv - or --json - from now on: what the command prints to
 * stdout (its human report) goes to /dev/null, and "-" writes to the real standard output.
 * Call once options are parsed, in the process that writes the files (a rank, not a launcher).
 * Safe to call twice. */
xs_status xs_outfile_claim_stdout(void);
/* Give up: close and remove the temporary file; the old file stays. Safe to call twice. */
void xs_outfile_discard(xs_outfile *o);
/* The whole file in one call: n bytes of data to path, through open and commit. */
xs_status xs_outfile_write(const char *path, const void *data, size_t n);

/* One file named on the command line: the option that named it (for messages) and the path
 * (NULL: not given, skipped). */
typedef struct {
    const char *opt;
    const char *path;
} xs_file_arg;

/* XS_EINVAL with "--out v.csv is the same file as --schedule ./v.csv; refusing to overwrite an
 * input" when an output is the same file as an input, or two outputs are the same file (also
 * when neither exists yet: same directory, same name). Files that do not exist are otherwise
 * skipped (the command reports them), and so are outputs that are not regular files (devices,
 * pipes: /dev/null may be named twice). */
xs_status xs_files_distinct(const xs_file_arg *out, int nout, const xs_file_arg *in, int nin);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_OUTFILE_H */
