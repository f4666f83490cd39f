// SPDX-License-Identifier: Apache-2.0
/*
 * readall.h - read a whole input file (schedules, traces) into memory, with the core's one-line
 * errors. Internal to the core.
 */
#ifndef XS_READALL_H
#define XS_READALL_H

#include <stddef.h>

#include "xstage.h"

/* Read all of path ("-": the standard input, named "stdin" in messages) into *buf (malloc'd, not
 * NUL-terminated; the caller frees it) of *len bytes. what names the file's kind in the errors
 * ("schedule", "trace"); a file above 1 GiB is refused. On failure *buf is NULL. */
xs_status xs_read_all(const char *path, const char *what, char **buf, size_t *len);

#endif
