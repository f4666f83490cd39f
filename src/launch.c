// SPDX-License-Identifier: Apache-2.0
/*
 * launch.c - the fork/exec launcher: one process per GPU, bounded, no rank left behind.
 *
 * CPU-only (no CUDA, no NCCL): the GPU count and the NCCL unique id come in through hooks
 * (cuda/common/nccl.cu supplies them in xs_launch_or_run). Children are started with execve and an
 * environment built before fork, because the parent may already run NCCL's bootstrap thread and
 * only async-signal-safe calls are allowed between fork and exec in a threaded process.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "xstage_launch.h"

extern char **environ;

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

int xs_launch_needed(int ngpus)
{
    if (ngpus <= 1 || getenv("XS_RANK"))
        return 0;
    xs_launcher_env e; /* torchrun, mpirun or srun started the ranks already */
    return !(xs_launcher_detect(&e) == XS_OK && e.name && e.nranks > 1);
}

/* ---- hex -------------------------------------------------------------------------------- */

void xs_hex_encode(const unsigned char *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

xs_status xs_hex_decode(const char *hex, unsigned char *b, size_t n)
{
    size_t len = strlen(hex);
    if (len != 2 * n)
        return xs_seterr(XS_EINVAL, "expected %zu hex digits, got %zu", 2 * n, len);
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return xs_seterr(XS_EINVAL, "'%c%c' at position %zu is not hex", hex[2 * i],
                             hex[2 * i + 1], 2 * i);
        if (b)
            b[i] = (unsigned char)(hi * 16 + lo);
    }
    return XS_OK;
}

/* ---- environment of a launched rank ------------------------------------------------------ */

/* Parse a whole decimal integer in [lo, hi]; 0 on success. */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s)
        return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

xs_status xs_rank_env(int *rank, int *nranks, unsigned char *id, int *have_id)
{
    const char *sr = getenv("XS_RANK"), *sn = getenv("XS_NRANKS"), *si = getenv("XS_NCCL_ID");
    const char *sd = getenv("XS_DEVICE");
    *rank = 0;
    *nranks = 1;
    *have_id = 0;
    if (!sr)
        return XS_OK;
    long n = 0, r = 0, d = 0;
    if (!sn)
        return xs_seterr(XS_EINVAL, "XS_RANK=%s is set but XS_NRANKS is not (start ranks with "
                         "-g/--gpus N)", sr);
    if (parse_int(sn, 1, XS_LAUNCH_MAX_RANKS, &n))
        return xs_seterr(XS_EINVAL, "XS_NRANKS='%s' is not an integer in [1, %d]", sn,
                         XS_LAUNCH_MAX_RANKS);
    if (parse_int(sr, 0, n - 1, &r))
        return xs_seterr(XS_EINVAL, "XS_RANK='%s' is not an integer in [0, %ld] (XS_NRANKS=%ld)",
                         sr, n - 1, n);
    if (sd && parse_int(sd, 0, 1023, &d))
        return xs_seterr(XS_EINVAL, "XS_DEVICE='%s' is not a CUDA device ordinal", sd);
    if (si) {
        if (xs_hex_decode(si, id, XS_NCCL_ID_BYTES) != XS_OK)
            return xs_seterr(XS_EINVAL, "XS_NCCL_ID is not %d hex digits (length %zu)",
                             2 * XS_NCCL_ID_BYTES, strlen(si));
        *have_id = 1;
    } else if (n > 1) {
        return xs_seterr(XS_EINVAL, "XS_NCCL_ID is not set (XS_NRANKS=%ld needs the NCCL unique "
                         "id from the launcher)", n);
    }
    *rank = (int)r;
    *nranks = (int)n;
    return XS_OK;
}

int xs_rank_device(int requested)
{
    long d;
    const char *s = getenv("XS_DEVICE");
    if (s && parse_int(s, 0, 1023, &d) == 0)
        return (int)d;
    return requested;
}

/* ---- the launcher -------------------------------------------------------------------------- */

static int is_launch_var(const char *e)
{
    static const char *names[] = {"XS_RANK=", "XS_NRANKS=", "XS_NCCL_ID=", "XS_DEVICE="};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(e, names[i], strlen(names[i])))
            return 1;
    return 0;
}

/* Write a message with write(2) only: usable between fork and exec. */
static void child_say(const char *a, const char *b, const char *c)
{
    const char *parts[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (parts[i] && write(2, parts[i], strlen(parts[i])) < 0)
            return;
}

/* Append "r0,r1,..." of the ranks in mask order to buf. */
static void rank_list(char *buf, size_t cap, const unsigned char *stopped, int n)
{
    size_t len = strlen(buf);
    int first = 1;
    for (int r = 0; r < n && len + 8 < cap; r++) {
        if (!stopped[r])
            continue;
        len += (size_t)snprintf(buf + len, cap - len, first ? "%d" : ",%d", r);
        first = 0;
    }
}

xs_status xs_launch(int nranks, char *const argv[], const char *nccl_id_hex,
                    const xs_launch_opts *o, int *exit_code)
{
    xs_launch_opts dflt;
    memset(&dflt, 0, sizeof dflt);
    if (!o)
        o = &dflt;
    *exit_code = 1;
    if (nranks < 1 || nranks > XS_LAUNCH_MAX_RANKS)
        return xs_seterr(XS_EINVAL, "launch: %d ranks; between 1 and %d are supported", nranks,
                         XS_LAUNCH_MAX_RANKS);
    if (!argv || !argv[0])
        return xs_seterr(XS_EINVAL, "launch: empty argument vector");
    const char *exe = o->exe ? o->exe : "/proc/self/exe";
    const int grace_s = o->grace_s > 0 ? o->grace_s : 10;

    /* environment: ours without the launch variables, plus 4 per rank; built before fork */
    size_t nenv = 0;
    while (environ && environ[nenv])
        nenv++;
    char **envp = (char **)calloc(nenv + 5, sizeof *envp);
    char *vars = (char *)malloc(4 * 64 + 2 * XS_NCCL_ID_BYTES + 16);
    pid_t *pids = (pid_t *)calloc((size_t)nranks, sizeof *pids);
    unsigned char *alive = (unsigned char *)calloc((size_t)nranks, 1);
    unsigned char *stopped = (unsigned char *)calloc((size_t)nranks, 1);
    if (!envp || !vars || !pids || !alive || !stopped) {
        free(envp), free(vars), free(pids), free(alive), free(stopped);
        return xs_seterr(XS_ENOMEM, "launch: out of host memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        if (!is_launch_var(environ[i]))
            envp[k++] = environ[i];
    char *v_rank = vars, *v_nranks = vars + 64, *v_dev = vars + 128, *v_id = vars + 192;
    envp[k++] = v_rank;
    envp[k++] = v_nranks;
    envp[k++] = v_dev;
    if (nccl_id_hex) {
        snprintf(v_id, 2 * XS_NCCL_ID_BYTES + 16 + 64, "XS_NCCL_ID=%s", nccl_id_hex);
        envp[k++] = v_id;
    }
    envp[k] = NULL;
    snprintf(v_nranks, 64, "XS_NRANKS=%d", nranks);

    xs_status st = XS_OK;
    int started = 0;
    const pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < nranks; r++) {
        snprintf(v_rank, 64, "XS_RANK=%d", r);
        snprintf(v_dev, 64, "XS_DEVICE=%d", r);
        pid_t pid = fork();
        if (pid < 0) {
            st = xs_seterr(XS_EIO, "launch: fork for rank %d failed: %s", r, strerror(errno));
            break;
        }
        if (pid == 0) {
            /* die with the launcher, even when it is SIGKILLed */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(126);
            if (o->quiet_stdout && r > 0) {
                int fd = open("/dev/null", O_WRONLY);
                if (fd >= 0)
                    dup2(fd, 1);
            }
            execve(exe, argv, envp);
            child_say("xstage: error: cannot run ", exe, ": exec failed\n");
            _exit(127);
        }
        pids[r] = pid;
        alive[r] = 1;
        started++;
    }

    /* wait; on the first failure stop the others (TERM, then KILL after the grace period) */
    const double t0 = xs_now_s();
    double kill_at = -1;
    int first_fail = -1, fail_status = 0, fail_signal = 0, timed_out = 0, killed = 0;
    int nalive = started;
    if (st != XS_OK && started > 0) {
        /* fork failed midway: stop what was started */
        for (int r = 0; r < nranks; r++)
            if (alive[r]) {
                kill(pids[r], SIGTERM);
                stopped[r] = 1;
            }
        kill_at = xs_now_s() + grace_s;
    }
    while (nalive > 0) {
        int progressed = 0;
        for (int r = 0; r < nranks; r++) {
            if (!alive[r])
                continue;
            int ws = 0;
            pid_t w = waitpid(pids[r], &ws, WNOHANG);
            if (w == 0 || (w < 0 && errno == EINTR))
                continue;
            alive[r] = 0;
            nalive--;
            progressed = 1;
            if (w < 0)
                continue; /* ECHILD: reaped elsewhere (SIGCHLD ignored); status unknown */
            int failed = WIFSIGNALED(ws) || (WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
            if (failed && !stopped[r] && first_fail < 0 && !timed_out && st == XS_OK) {
                first_fail = r;
                fail_status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 0;
                fail_signal = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
                for (int q = 0; q < nranks; q++)
                    if (alive[q]) {
                        kill(pids[q], SIGTERM);
                        stopped[q] = 1;
                    }
                kill_at = xs_now_s() + grace_s;
            }
        }
        if (nalive == 0)
            break;
        double t = xs_now_s();
        if (o->timeout_s > 0 && !timed_out && first_fail < 0 && kill_at < 0 &&
            t - t0 > o->timeout_s) {
            timed_out = 1;
            for (int q = 0; q < nranks; q++)
                if (alive[q]) {
                    kill(pids[q], SIGTERM);
                    stopped[q] = 1;
                }
            kill_at = t + grace_s;
        }
        if (kill_at >= 0 && t > kill_at && !killed) {
            killed = 1;
            for (int q = 0; q < nranks; q++)
                if (alive[q])
                    kill(pids[q], SIGKILL);
        }
        if (killed && t > kill_at + 30) {
            /* a process in uninterruptible sleep (a wedged driver call) outlives SIGKILL for a
             * while; give up on it rather than hang the launcher */
            if (st == XS_OK && first_fail < 0 && !timed_out)
                st = xs_seterr(XS_EIO, "launch: ranks did not exit 30 s after SIGKILL");
            break;
        }
        if (!progressed)
            sleep_ms(5);
    }

    if (st == XS_OK) {
        char msg[768] = "";
        if (first_fail >= 0) {
            if (fail_signal) {
                snprintf(msg, sizeof msg, "rank %d was killed by signal %d (%s)", first_fail,
                         fail_signal, strsignal(fail_signal));
                *exit_code = 128 + fail_signal;
            } else {
                snprintf(msg, sizeof msg, "rank %d exited with status %d", first_fail,
                         fail_status);
                *exit_code = fail_status;
            }
            st = XS_EIO;
        } else if (timed_out) {
            snprintf(msg, sizeof msg, "ranks did not finish within %d s", o->timeout_s);
            *exit_code = 124;
            st = XS_ETIMEOUT;
        } else {
            *exit_code = 0;
        }
        if (st != XS_OK) {
            int any = 0;
            for (int r = 0; r < nranks; r++)
                any |= stopped[r];
            if (any) {
                strncat(msg, "; stopped ranks ", sizeof msg - strlen(msg) - 1);
                rank_list(msg, sizeof msg, stopped, nranks);
            }
            if (killed)
                strncat(msg, " (killed after the grace period)", sizeof msg - strlen(msg) - 1);
            xs_seterr(st, "%s", msg);
        }
    }
    free(envp), free(vars), free(pids), free(alive), free(stopped);
    return st;
}

/* This process's command line as an argv (from /proc/self/cmdline); *buf owns the strings. */
static char **self_argv(char **buf)
{
    *buf = NULL;
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *b = (char *)malloc(cap + 1);
    while (b) {
        size_t got = fread(b + len, 1, cap - len, f);
        len += got;
        if (len < cap)
            break;
        char *nb = (char *)realloc(b, 2 * cap + 1);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (!b || len == 0) {
        free(b);
        return NULL;
    }
    b[len] = 0; /* the last argument already ends with NUL; this guards a truncated file */
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += b[i] == 0;
    if (b[len - 1] != 0)
        n++;
    char **v = (char **)calloc(n + 1, sizeof *v);
    if (!v) {
        free(b);
        return NULL;
    }
    size_t a = 0;
    for (size_t i = 0; i < len && a < n; i += strlen(b + i) + 1)
        v[a++] = b + i;
    *buf = b;
    return v;
}

int xs_launch_or_run_with(int ngpus, int argc, char **argv, const xs_launch_hooks *h,
                          const xs_launch_opts *o, int *exit_code)
{
    *exit_code = 0;
    if (ngpus < 1 || ngpus > XS_LAUNCH_MAX_RANKS) {
        xs_seterr(XS_EINVAL, "-g/--gpus %d: between 1 and %d GPUs are supported", ngpus,
                  XS_LAUNCH_MAX_RANKS);
        return -1;
    }
    if (getenv("XS_RANK")) {
        /* a launched rank: validate what the launcher passed, then do the work */
        int rank, n, have;
        if (xs_rank_env(&rank, &n, NULL, &have) != XS_OK)
            return -1;
        if (ngpus > 1 && n != ngpus) {
            xs_seterr(XS_EINVAL, "launched as rank %d of %d but -g/--gpus says %d", rank, n,
                      ngpus);
            return -1;
        }
        return 0;
    }
    xs_launcher_env le;
    if (xs_launcher_detect(&le) != XS_OK)
        return -1;
    if (le.name && le.nranks > 1) {
        /* torchrun, mpirun or srun started the ranks: this process is one of them */
        if (xs_launcher_join(&le, ngpus, h, o ? o->quiet_stdout : 1) != XS_OK)
            return -1;
        return 0;
    }
    if (ngpus == 1)
        return 0;
    if (h && h->count_gpus) {
        int visible = 0;
        if (h->count_gpus(&visible) != XS_OK)
            return -1;
        if (visible < ngpus) {
            xs_seterr(XS_EINVAL, "-g/--gpus %d asks for %d GPUs (one process per GPU); %d %s "
                      "visible", ngpus, ngpus, visible, visible == 1 ? "is" : "are");
            return -1;
        }
    }
    char hex[2 * XS_NCCL_ID_BYTES + 1];
    const char *id_hex = NULL;
    if (h && h->make_id) {
        unsigned char id[XS_NCCL_ID_BYTES];
        if (h->make_id(id) != XS_OK)
            return -1;
        xs_hex_encode(id, XS_NCCL_ID_BYTES, hex);
        id_hex = hex;
    }
    char *buf = NULL;
    char **args = argv;
    if (!args) {
        args = self_argv(&buf);
        if (!args) {
            xs_seterr(XS_EIO, "launch: cannot read /proc/self/cmdline");
            return -1;
        }
    } else if (argc < 1) {
        xs_seterr(XS_EINVAL, "launch: empty argument vector");
        return -1;
    }
    xs_launch_opts lo;
    if (o) {
        lo = *o;
    } else {
        memset(&lo, 0, sizeof lo);
        lo.quiet_stdout = 1; /* one report: rank 0's (errors of every rank still pass) */
        long t = 0;
        const char *s = getenv("XS_LAUNCH_TIMEOUT");
        lo.timeout_s = (s && parse_int(s, 1, INT_MAX, &t) == 0) ? (int)t : 900;
    }
    xs_launch(ngpus, args, id_hex, &lo, exit_code);
    if (buf) {
        free(args);
        free(buf);
    }
    return 1;
}

/* ---- benches over ranks --------------------------------------------------------------------- */

xs_status xs_rank_env_id(const char *var, unsigned char id[XS_NCCL_ID_BYTES], int *have)
{
    *have = 0;
    const char *s = getenv(var);
    if (!s)
        return XS_OK;
    if (xs_hex_decode(s, id, XS_NCCL_ID_BYTES) != XS_OK)
        return xs_seterr(XS_EINVAL, "%s is not %d hex digits (length %zu)", var,
                         2 * XS_NCCL_ID_BYTES, strlen(s));
    *have = 1;
    return XS_OK;
}

xs_status xs_gpus_check(const char *cmd, int gpus_given, int gpus, const xs_gpus_conflict *c,
                        int n)
{
    if (!gpus_given)
        return XS_OK;
    if (gpus < 1 || gpus > XS_LAUNCH_MAX_RANKS)
        return xs_seterr(XS_EINVAL, "%s: -g/--gpus %d: between 1 and %d GPUs are supported", cmd,
                         gpus, XS_LAUNCH_MAX_RANKS);
    for (int i = 0; i < n; i++)
        if (c[i].set)
            return xs_seterr(XS_EINVAL, "%s: -g/--gpus %d cannot be combined with %s (%s)", cmd,
                             gpus, c[i].name, c[i].why);
    return XS_OK;
}

int xs_rank_primary(void)
{
    const char *r = getenv("XS_RANK");
    return !r || strcmp(r, "0") == 0;
}
