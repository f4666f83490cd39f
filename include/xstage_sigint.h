// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_sigint.h - stop a long GPU command cleanly on SIGINT (Ctrl-C) or SIGTERM.
 *
 * The handler only sets a flag. The long loops of calibrate, validate, replay and the benches
 * test it between runs or configurations, stop there, release their buffers on the normal
 * cleanup path, mark any partial CSV with a last line "# INTERRUPTED: partial results" (or write
 * no result at all), print one line
 *     xstage: error: interrupted by SIGINT after 3 of 12 configurations; ...
 * and exit non-zero. A kernel in flight is never cut short: every device-side wait is bounded,
 * so the next check comes within that bound. The first signal restores the default action, so
 * a second Ctrl-C ends the process at once.
 */
#ifndef XSTAGE_SIGINT_H
#define XSTAGE_SIGINT_H

#include "xstage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Install the handlers (idempotent): SIGINT always; SIGTERM too, unless this process is a rank
 * started by the launcher (XS_RANK set), where the launcher's SIGTERM must stop it at once. A
 * signal ignored at start (a background job of a script) stays ignored. */
void xs_sigint_install(void);
/* The signal that arrived since xs_sigint_install (SIGINT or SIGTERM), or 0. */
int xs_interrupted(void);
/* "SIGINT" or "SIGTERM" for the signal that arrived ("a signal" before any). */
const char *xs_interrupt_name(void);
/* Leave the one-line message "interrupted by SIGINT after <fmt ...>" and return XS_EINTR, e.g.
 * xs_interrupt_err("%d of %d schedules", i, n). */
xs_status xs_interrupt_err(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Tests: forget a signal that arrived (the handlers stay as they are). */
void xs_sigint_clear(void);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_SIGINT_H */
