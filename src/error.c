// SPDX-License-Identifier: Apache-2.0
/*
 * error.c - status names and the one-line error message of the last failing call.
 *
 * Thread-local, so that calibration threads and the launcher can fail independently.
 */
#include <stdarg.h>
#include <stdio.h>

#include "xstage.h"

static _Thread_local char errmsg[1024];
static _Thread_local char errwhere[256];

const char *xs_errmsg(void) { return errmsg[0] ? errmsg : "no error"; }

const char *xs_errwhere(void) { return errwhere; }

void xs_errwhere_set(const char *file, int line)
{
    if (!errwhere[0])
        snprintf(errwhere, sizeof errwhere, "%s:%d", file, line);
}

xs_status xs_seterr(xs_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, sizeof errmsg, fmt, ap);
    va_end(ap);
    /* one line: fold any newline or other control character a caller passed through (file
     * content, library messages); a vertical tab or an escape sequence from a hand-written file
     * would break the line on a terminal just as well */
    for (char *c = errmsg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    errwhere[0] = 0;
    return s;
}

const char *xs_status_name(xs_status s)
{
    switch (s) {
    case XS_OK: return "ok";
    case XS_EINVAL: return "invalid argument";
    case XS_EIO: return "i/o error";
    case XS_EPARSE: return "parse error";
    case XS_ENOMEM: return "out of memory";
    case XS_ERANGE: return "out of range";
    case XS_ECUDA: return "cuda error";
    case XS_ENCCL: return "nccl error";
    case XS_ETIMEOUT: return "timeout";
    case XS_EVERIFY: return "verification failed";
    case XS_EUNSUPPORTED: return "unsupported";
    case XS_EINTR: return "interrupted";
    }
    return "unknown status";
}
