// SPDX-License-Identifier: Apache-2.0
/*
 * test_sigint.c - the interrupt flag of long GPU commands (src/sigint.c) on the CPU: SIGINT and
 * SIGTERM set it and the process goes on; the message is one line with the signal's name; a
 * second signal takes the default action (checked in forked children); a launched rank
 * (XS_RANK set) keeps SIGTERM's default action; a SIGINT ignored at start stays ignored; the
 * status has a name.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tests/xt.h"
#include "xstage_sigint.h"

/* Run fn in a child; return its wait status (or -1). */
static int in_child(void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int ws = 0;
    if (waitpid(pid, &ws, 0) != pid)
        return -1;
    return ws;
}

static void twice_int(void)
{
    xs_sigint_install();
    raise(SIGINT);
    if (xs_interrupted() != SIGINT)
        _exit(3);
    raise(SIGINT); /* the default action this time */
    _exit(4);
}

static void rank_term(void)
{
    setenv("XS_RANK", "1", 1);
    xs_sigint_install();
    raise(SIGTERM); /* a launched rank: SIGTERM ends it */
    _exit(5);
}

static void ignored_int(void)
{
    signal(SIGINT, SIG_IGN); /* as a shell starts a background job */
    xs_sigint_install();
    raise(SIGINT);
    _exit(xs_interrupted() == 0 ? 8 : 9);
}

static void plain_term(void)
{
    unsetenv("XS_RANK");
    xs_sigint_install();
    raise(SIGTERM);
    _exit(xs_interrupted() == SIGTERM && !strcmp(xs_interrupt_name(), "SIGTERM") ? 6 : 7);
}

int main(void)
{
    XT_CHECK(xs_interrupted() == 0, "no signal before install");
    XT_CHECK(!strcmp(xs_interrupt_name(), "a signal"), "name before any: %s", xs_interrupt_name());

    /* children first, while nothing is installed here: each installs on its own terms */
    int ws = in_child(twice_int);
    XT_CHECK(ws != -1 && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGINT,
             "second SIGINT ends the process (status %#x)", ws);
    ws = in_child(rank_term);
    XT_CHECK(ws != -1 && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGTERM,
             "a launched rank ends on SIGTERM (status %#x)", ws);
    ws = in_child(ignored_int);
    XT_CHECK(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 8,
             "an ignored SIGINT stays ignored (status %#x)", ws);
    ws = in_child(plain_term);
    XT_CHECK(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 6,
             "SIGTERM sets the flag outside the launcher (status %#x)", ws);

    unsetenv("XS_RANK");
    xs_sigint_install();
    xs_sigint_install(); /* idempotent */
    XT_CHECK(xs_interrupted() == 0, "no signal yet");
    raise(SIGINT);
    XT_CHECK(xs_interrupted() == SIGINT, "SIGINT sets the flag: %d", xs_interrupted());
    XT_CHECK(!strcmp(xs_interrupt_name(), "SIGINT"), "name %s", xs_interrupt_name());

    xs_status s = xs_interrupt_err("%d of %d configurations; partial CSV marked", 3, 12);
    XT_CHECK(s == XS_EINTR, "status %d", (int)s);
    XT_CHECK(!strcmp(xs_errmsg(), "interrupted by SIGINT after 3 of 12 configurations; partial "
                                  "CSV marked"),
             "message '%s'", xs_errmsg());
    XT_CHECK(!strcmp(xs_status_name(XS_EINTR), "interrupted"), "status name %s",
             xs_status_name(XS_EINTR));
    static char long_what[2000];
    memset(long_what, 'x', sizeof long_what - 1);
    xs_interrupt_err("%s\n%s", long_what, "second line");
    XT_CHECK(strchr(xs_errmsg(), '\n') == NULL &&
                 !strncmp(xs_errmsg(), "interrupted by SIGINT after xxx", 31),
             "one line, truncated: %.60s", xs_errmsg());

    xs_sigint_clear();
    XT_CHECK(xs_interrupted() == 0, "cleared");
    return xt_done();
}
