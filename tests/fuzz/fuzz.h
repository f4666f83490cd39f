/*
 * fuzz.h - what the libFuzzer targets share: the check that aborts on a broken invariant (so the
 * fuzzer records the input as a crash) and the one-line error contract of xstage.h.
 */
#ifndef XS_FUZZ_H
#define XS_FUZZ_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"

/* A broken invariant: say which and abort; libFuzzer saves the input as crash-<sha1>. */
#define FUZZ_CHECK(cond, ...)                                                                 \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "fuzz: %s:%d: %s: ", __FILE__, __LINE__, #cond);                  \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

/* The library's error contract: a non-empty message on one line, no trailing newline. Any
 * control character (a vertical tab, a form feed, an escape sequence) breaks the line on a
 * terminal just as a newline does, so none may appear. */
static inline int fuzz_one_line(const char *m)
{
    if (!m || !*m)
        return 0;
    for (const unsigned char *c = (const unsigned char *)m; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            return 0;
    return 1;
}

/* A failing call left a one-line message that starts with the input's name. */
static inline void fuzz_check_error(xs_status st, const char *name)
{
    const char *m = xs_errmsg();
    FUZZ_CHECK(st != XS_OK, "status");
    FUZZ_CHECK(fuzz_one_line(m), "message not one line: '%s'", m);
    FUZZ_CHECK(!strncmp(m, name, strlen(name)), "message does not name the input: '%s'", m);
}

#endif
