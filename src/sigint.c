// SPDX-License-Identifier: Apache-2.0
/*
 * sigint.c - the interrupt flag of long GPU commands (include/xstage_sigint.h).
 *
 * The handler does the one async-signal-safe thing: store the signal number in a volatile
 * sig_atomic_t. SA_RESETHAND makes the first signal the only one handled: a second Ctrl-C takes
 * the default action and ends the process at once (a stuck driver call stays interruptible).
 * SA_RESTART keeps the rest of the program's system calls (reads, waits) as they were. A
 * signal that was ignored when the process started (a background job of a non-interactive
 * shell ignores SIGINT) is left ignored, as shells and Python do.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage_sigint.h"

static volatile sig_atomic_t caught; /* the signal number, 0 until one arrives */
static int installed;

static void on_signal(int sig) { caught = sig; }

static void handle(int sig)
{
    struct sigaction sa;
    /* a signal ignored by whoever started us (a background job of a script) stays ignored */
    if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigaction(sig, &sa, NULL);
}

void xs_sigint_install(void)
{
    if (installed)
        return;
    installed = 1;
    handle(SIGINT);
    /* a launched rank is stopped by its launcher with SIGTERM when another rank failed: there
     * it must end at once, not at the next check (a peer may be gone for good) */
    if (!getenv("XS_RANK"))
        handle(SIGTERM);
}

int xs_interrupted(void) { return (int)caught; }

const char *xs_interrupt_name(void)
{
    switch (caught) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    }
    return "a signal";
}

xs_status xs_interrupt_err(const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return xs_seterr(XS_EINTR, "interrupted by %s after %s", xs_interrupt_name(), what);
}

void xs_sigint_clear(void) { caught = 0; }
