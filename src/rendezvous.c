// SPDX-License-Identifier: Apache-2.0
/*
 * rendezvous.c - ranks started by someone else's launcher (torchrun, mpirun, srun): which rank
 * this process is, and the bounded exchange that carries the NCCL unique id from rank 0 to the
 * others, over a TCP store or a shared file (xstage_launch.h, docs/MULTIGPU.md "Launchers").
 *
 * CPU-only C11 plus POSIX sockets. Every wait has a deadline (XS_RANK_TIMEOUT); the exchange is
 * also a barrier, so a rank that never joins fails every other rank in one line within it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "xstage_launch.h"

#define STORE_MAGIC "XSID1"

static void nap_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* A whole decimal integer in [lo, hi]; 0 on success. */
static int whole(const char *s, long lo, long hi, long *out)
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

xs_status xs_rank_timeout(double *seconds)
{
    const char *s = getenv("XS_RANK_TIMEOUT");
    *seconds = XS_RANK_TIMEOUT_DEFAULT_S;
    if (!s)
        return XS_OK;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || v > 86400)
        return xs_seterr(XS_EINVAL, "XS_RANK_TIMEOUT='%s' is not a number of seconds in (0, "
                         "86400]", s);
    *seconds = v;
    return XS_OK;
}

/* ---- which launcher ------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *rank, *size, *local; /* variable names; local may be NULL */
    const char *local2;              /* a second name for the local rank, or NULL */
    const char *needs;               /* a variable that must also be set, or NULL */
} launcher_vars;

static const launcher_vars launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", NULL, NULL},
    {"mpirun (Open MPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", NULL, NULL},
    {"mpirun (PMI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_LOCAL_RANK", NULL},
    /* an sbatch script itself has SLURM_PROCID too; only a task of srun has a step */
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL, "SLURM_STEP_ID"},
};

xs_status xs_launcher_detect(xs_launcher_env *e)
{
    memset(e, 0, sizeof *e);
    e->local_rank = -1;
    e->nranks = 1;
    const launcher_vars *L = NULL;
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0] && !L; i++)
        if (getenv(launchers[i].rank) && getenv(launchers[i].size) &&
            (!launchers[i].needs || getenv(launchers[i].needs)))
            L = &launchers[i];
    if (!L)
        return XS_OK;
    const char *sr = getenv(L->rank), *sn = getenv(L->size);
    const char *sl = L->local ? getenv(L->local) : NULL;
    if (!sl && L->local2)
        sl = getenv(L->local2);
    long n, r, l = -1;
    if (whole(sn, 1, XS_LAUNCH_MAX_RANKS, &n))
        return xs_seterr(XS_EINVAL, "%s='%s' (%s): not an integer in [1, %d]", L->size, sn,
                         L->name, XS_LAUNCH_MAX_RANKS);
    if (whole(sr, 0, n - 1, &r))
        return xs_seterr(XS_EINVAL, "%s='%s' (%s): not an integer in [0, %ld]", L->rank, sr,
                         L->name, n - 1);
    if (sl && whole(sl, 0, XS_LAUNCH_MAX_RANKS - 1, &l))
        return xs_seterr(XS_EINVAL, "local rank '%s' (%s): not an integer in [0, %d]", sl,
                         L->name, XS_LAUNCH_MAX_RANKS - 1);
    e->name = L->name;
    e->rank = (int)r;
    e->nranks = (int)n;
    e->local_rank = (int)l;

    /* the id's way: XS_ID_FILE when set, else the TCP store at MASTER_ADDR */
    const char *f = getenv("XS_ID_FILE");
    if (f && *f) {
        if (strlen(f) >= sizeof e->id_file - 16)
            return xs_seterr(XS_EINVAL, "XS_ID_FILE: path longer than %zu bytes",
                             sizeof e->id_file - 16);
        snprintf(e->id_file, sizeof e->id_file, "%s", f);
    }
    const char *addr = getenv("MASTER_ADDR"), *sp = getenv("XS_STORE_PORT");
    const char *mp = getenv("MASTER_PORT");
    long port = 0;
    if (sp) {
        if (whole(sp, 1, 65535, &port))
            return xs_seterr(XS_EINVAL, "XS_STORE_PORT='%s': not a port in [1, 65535]", sp);
    } else if (mp) {
        if (whole(mp, 1, 65535, &port))
            return xs_seterr(XS_EINVAL, "MASTER_PORT='%s': not a port in [1, 65535]", mp);
        /* torchrun's agent keeps its own store on MASTER_PORT: take the next port */
        if (L == &launchers[0]) {
            if (port == 65535)
                return xs_seterr(XS_EINVAL, "MASTER_PORT=65535 under torchrun: xstage's store "
                                 "needs MASTER_PORT + 1; set XS_STORE_PORT");
            port++;
        }
    }
    if (addr && *addr && port) {
        if (strlen(addr) >= sizeof e->addr)
            return xs_seterr(XS_EINVAL, "MASTER_ADDR: longer than %zu bytes", sizeof e->addr - 1);
        snprintf(e->addr, sizeof e->addr, "%s", addr);
        e->port = (int)port;
    }
    /* one id per run, when the launcher gives one: keeps two runs on one file or port apart */
    const char *job = getenv("XS_RUN_ID");
    char slurm[64] = "";
    if (!job)
        job = getenv("TORCHELASTIC_RUN_ID");
    if (!job && getenv("SLURM_JOB_ID")) {
        snprintf(slurm, sizeof slurm, "%.30s.%.30s", getenv("SLURM_JOB_ID"),
                 getenv("SLURM_STEP_ID") ? getenv("SLURM_STEP_ID") : "");
        job = slurm;
    }
    if (!job)
        job = getenv("PMIX_NAMESPACE");
    if (!job)
        job = getenv("OMPI_MCA_ess_base_jobid");
    snprintf(e->run_id, sizeof e->run_id, "%s", job ? job : "");
    for (char *c = e->run_id; *c; c++)
        if (*c <= ' ' || *c > '~')
            *c = '_'; /* one token in the protocol's lines */
    return XS_OK;
}

/* ---- TCP store -------------------------------------------------------------------------------- */

/* Send or receive exactly n bytes before the deadline; 0 on success, -1 on EOF, error or time. */
static int io_all(int fd, void *buf, size_t n, int sending, double deadline)
{
    unsigned char *p = (unsigned char *)buf;
    while (n > 0) {
        double left = deadline - xs_now_s();
        if (left <= 0)
            return -1;
        struct pollfd pf = {fd, (short)(sending ? POLLOUT : POLLIN), 0};
        int pr = poll(&pf, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
        if (pr < 0 && errno != EINTR)
            return -1;
        if (pr <= 0)
            continue;
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The hello a rank sends: magic, rank, nranks, run id; fixed size. */
typedef struct {
    char magic[8];
    uint32_t rank, nranks;
    char run_id[112];
} hello_msg;

/* Rank 0's answer: 'K' and the blob, or 'F' and a message; fixed header then len bytes. */
typedef struct {
    char kind;
    char pad[3];
    uint32_t len;
} reply_hdr;

static void rank_set(char *out, size_t cap, const unsigned char *have, int n)
{
    size_t len = 0;
    out[0] = 0;
    for (int r = 1; r < n && len + 12 < cap; r++)
        if (!have[r])
            len += (size_t)snprintf(out + len, cap - len, len ? ",%d" : "%d", r);
}

static xs_status serve(int port, int nranks, const char *run_id, const char *blob, size_t len,
                       double timeout_s)
{
    int ls = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int v6 = ls >= 0;
    if (ls < 0)
        ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0)
        return xs_seterr(XS_EIO, "id store: socket: %s", strerror(errno));
    int one = 1, zero = 0;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (v6) {
        setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        struct sockaddr_in6 a;
        memset(&a, 0, sizeof a);
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_any;
        a.sin6_port = htons((uint16_t)port);
        rc = bind(ls, (struct sockaddr *)&a, sizeof a);
    } else {
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        a.sin_port = htons((uint16_t)port);
        rc = bind(ls, (struct sockaddr *)&a, sizeof a);
    }
    if (rc != 0 || listen(ls, XS_LAUNCH_MAX_RANKS) != 0) {
        int e = errno;
        close(ls);
        return xs_seterr(XS_EIO, "id store: rank 0 cannot listen on port %d: %s", port,
                         strerror(e));
    }
    int fds[XS_LAUNCH_MAX_RANKS];
    unsigned char have[XS_LAUNCH_MAX_RANKS] = {0};
    for (int r = 0; r < nranks; r++)
        fds[r] = -1;
    int joined = 1;
    const double deadline = xs_now_s() + timeout_s;
    while (joined < nranks) {
        double left = deadline - xs_now_s();
        if (left <= 0)
            break;
        struct pollfd pf = {ls, POLLIN, 0};
        int pr = poll(&pf, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
        if (pr <= 0)
            continue;
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        hello_msg h;
        /* a peer gets a few seconds to say who it is; a stranger is dropped */
        double hd = xs_now_s() + 5 < deadline ? xs_now_s() + 5 : deadline;
        if (io_all(c, &h, sizeof h, 0, hd) != 0 || memcmp(h.magic, STORE_MAGIC, 6) ||
            h.run_id[sizeof h.run_id - 1] != 0) {
            close(c);
            continue;
        }
        const char *why = NULL;
        char msg[256];
        if (h.nranks != (uint32_t)nranks)
            why = "a different number of ranks";
        else if (strcmp(h.run_id, run_id))
            why = "a different run id";
        else if (h.rank == 0 || h.rank >= (uint32_t)nranks || have[h.rank])
            why = "a rank already taken";
        if (why) {
            /* another run on this port, or a doubled rank: tell it and go on waiting */
            snprintf(msg, sizeof msg, "rank 0 refused rank %u of %u (%s)", h.rank, h.nranks,
                     why);
            reply_hdr rh = {'F', {0}, (uint32_t)strlen(msg)};
            if (io_all(c, &rh, sizeof rh, 1, hd) == 0)
                io_all(c, msg, rh.len, 1, hd);
            close(c);
            continue;
        }
        have[h.rank] = 1;
        fds[h.rank] = c;
        joined++;
    }
    close(ls);
    xs_status st = XS_OK;
    reply_hdr rh;
    const char *payload;
    char msg[512];
    if (joined == nranks) {
        rh.kind = 'K';
        rh.len = (uint32_t)len;
        payload = blob;
    } else {
        char missing[256];
        rank_set(missing, sizeof missing, have, nranks);
        st = xs_seterr(XS_ETIMEOUT, "rank %s of %d did not join within %g s (XS_RANK_TIMEOUT; "
                       "id store on port %d)", missing, nranks, timeout_s, port);
        snprintf(msg, sizeof msg, "%s", xs_errmsg());
        rh.kind = 'F';
        rh.len = (uint32_t)strlen(msg);
        payload = msg;
    }
    memset(rh.pad, 0, sizeof rh.pad);
    const double send_by = xs_now_s() + 10;
    for (int r = 1; r < nranks; r++) {
        if (fds[r] < 0)
            continue;
        if ((io_all(fds[r], &rh, sizeof rh, 1, send_by) != 0 ||
             io_all(fds[r], (void *)payload, rh.len, 1, send_by) != 0) && st == XS_OK)
            st = xs_seterr(XS_EIO, "id store: rank %d left before it got the id", r);
        close(fds[r]);
    }
    return st;
}

static xs_status fetch(const char *addr, int port, int rank, int nranks, const char *run_id,
                       char *blob, size_t cap, size_t *len, double timeout_s)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    const double deadline = xs_now_s() + timeout_s;
    /* rank 0 reports a missing rank at its own deadline: wait a little longer for its word */
    const double reply_by = deadline + 10;
    int fd = -1;
    char last[200] = "no answer";
    while (fd < 0 && xs_now_s() < deadline) {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int g = getaddrinfo(addr, service, &hints, &res);
        if (g != 0) {
            snprintf(last, sizeof last, "%s", gai_strerror(g));
            nap_ms(200);
            continue;
        }
        for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
            int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
            if (s < 0)
                continue;
            if (connect(s, ai->ai_addr, ai->ai_addrlen) == 0) {
                fd = s;
            } else {
                snprintf(last, sizeof last, "%s", strerror(errno));
                close(s);
            }
        }
        freeaddrinfo(res);
        if (fd < 0)
            nap_ms(100); /* rank 0 may not listen yet */
    }
    if (fd < 0)
        return xs_seterr(XS_ETIMEOUT, "rank %d of %d: no id store at %s:%d within %g s "
                         "(XS_RANK_TIMEOUT; rank 0 did not start or cannot be reached: %s)",
                         rank, nranks, addr, port, timeout_s, last);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    hello_msg h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, STORE_MAGIC, 6);
    h.rank = (uint32_t)rank;
    h.nranks = (uint32_t)nranks;
    snprintf(h.run_id, sizeof h.run_id, "%s", run_id);
    reply_hdr rh;
    if (io_all(fd, &h, sizeof h, 1, deadline) != 0 ||
        io_all(fd, &rh, sizeof rh, 0, reply_by) != 0) {
        close(fd);
        return xs_seterr(XS_ETIMEOUT, "rank %d of %d: no id from rank 0 at %s:%d within %g s "
                         "(XS_RANK_TIMEOUT)", rank, nranks, addr, port, timeout_s);
    }
    char msg[512];
    if (rh.kind == 'F') {
        size_t m = rh.len < sizeof msg - 1 ? rh.len : sizeof msg - 1;
        if (io_all(fd, msg, m, 0, reply_by) != 0)
            m = 0;
        msg[m] = 0;
        close(fd);
        return xs_seterr(XS_ETIMEOUT, "rank %d of %d: %s", rank, nranks,
                         m ? msg : "rank 0 gave up");
    }
    if (rh.kind != 'K' || rh.len >= cap || io_all(fd, blob, rh.len, 0, reply_by) != 0) {
        close(fd);
        return xs_seterr(XS_EIO, "rank %d of %d: malformed answer from the id store at %s:%d",
                         rank, nranks, addr, port);
    }
    blob[rh.len] = 0;
    *len = rh.len;
    close(fd);
    return XS_OK;
}

xs_status xs_store_exchange_tcp(const char *addr, int port, int rank, int nranks,
                                const char *run_id, char *blob, size_t cap, size_t *len,
                                double timeout_s)
{
    if (nranks < 1 || nranks > XS_LAUNCH_MAX_RANKS || rank < 0 || rank >= nranks)
        return xs_seterr(XS_EINVAL, "id store: rank %d of %d", rank, nranks);
    if (!run_id)
        run_id = "";
    if (strlen(run_id) >= sizeof(((hello_msg *)0)->run_id))
        return xs_seterr(XS_EINVAL, "id store: run id longer than %zu bytes",
                         sizeof(((hello_msg *)0)->run_id) - 1);
    if (rank == 0) {
        *len = strlen(blob);
        return nranks == 1 ? XS_OK : serve(port, nranks, run_id, blob, *len, timeout_s);
    }
    return fetch(addr, port, rank, nranks, run_id, blob, cap, len, timeout_s);
}

/* ---- shared file ------------------------------------------------------------------------------ */

/* Write path atomically (temporary file in the same directory, then rename). */
static xs_status write_atomic(const char *path, const char *text)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return xs_seterr(XS_EIO, "XS_ID_FILE: cannot write %s: %s", tmp, strerror(errno));
    int bad = fputs(text, f) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return xs_seterr(XS_EIO, "XS_ID_FILE: cannot write %s: %s", path, strerror(e));
    }
    return XS_OK;
}

/* Read a whole small file into buf (NUL-terminated); 0 on success. */
static int read_small(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    int bad = ferror(f) || !feof(f);
    fclose(f);
    buf[n] = 0;
    return bad ? -1 : 0;
}

/* Protocol (every file under the one path P, every line naming the run id J):
 *   rank 0 writes P     = "XSID1 J N <blob>"
 *   rank r reads P (same J and N), then writes P.r = "XSID1 J"
 *   rank 0, once every P.r of this run exists, writes P.ok = "XSID1 J ok"; at its deadline
 *   "XSID1 J fail <message>"; rank r waits for P.ok of this run, then removes P.r; rank 0
 *   removes P and P.ok once every P.r is gone (bounded). Files of another run are ignored. */
xs_status xs_store_exchange_file(const char *path, int rank, int nranks, const char *run_id,
                                 char *blob, size_t cap, size_t *len, double timeout_s)
{
    if (nranks < 1 || nranks > XS_LAUNCH_MAX_RANKS || rank < 0 || rank >= nranks)
        return xs_seterr(XS_EINVAL, "XS_ID_FILE: rank %d of %d", rank, nranks);
    if (!run_id || !*run_id)
        run_id = "-";
    char hdr[160], okp[1100], mine[1100], text[8192];
    snprintf(hdr, sizeof hdr, "%s %.120s", STORE_MAGIC, run_id);
    snprintf(okp, sizeof okp, "%s.ok", path);
    const double deadline = xs_now_s() + timeout_s;
    if (rank == 0) {
        *len = strlen(blob);
        if (nranks == 1)
            return XS_OK;
        if (*len + 200 > sizeof text)
            return xs_seterr(XS_EINVAL, "XS_ID_FILE: %zu bytes to share; at most %zu", *len,
                             sizeof text - 200);
        unlink(okp); /* a previous run's verdict */
        snprintf(text, sizeof text, "%s %d %s", hdr, nranks, blob);
        XS_TRY(write_atomic(path, text));
        unsigned char have[XS_LAUNCH_MAX_RANKS] = {1};
        int joined = 1;
        while (joined < nranks && xs_now_s() < deadline) {
            for (int r = 1; r < nranks; r++) {
                if (have[r])
                    continue;
                snprintf(mine, sizeof mine, "%s.%d", path, r);
                if (read_small(mine, text, sizeof text) == 0 && !strcmp(text, hdr)) {
                    have[r] = 1;
                    joined++;
                }
            }
            if (joined < nranks)
                nap_ms(20);
        }
        xs_status st = XS_OK;
        if (joined == nranks) {
            snprintf(text, sizeof text, "%s ok", hdr);
        } else {
            char missing[256];
            rank_set(missing, sizeof missing, have, nranks);
            st = xs_seterr(XS_ETIMEOUT, "rank %s of %d did not join within %g s "
                           "(XS_RANK_TIMEOUT; XS_ID_FILE=%s)", missing, nranks, timeout_s, path);
            snprintf(text, sizeof text, "%s fail %s", hdr, xs_errmsg());
        }
        xs_status ws = write_atomic(okp, text);
        if (st == XS_OK && ws != XS_OK)
            return ws;
        /* clean up once the others have read the verdict (they remove their P.r) */
        const double tidy_by = xs_now_s() + 10;
        for (int r = 1; r < nranks; r++) {
            snprintf(mine, sizeof mine, "%s.%d", path, r);
            while (have[r] && access(mine, F_OK) == 0 && xs_now_s() < tidy_by)
                nap_ms(20);
        }
        unlink(path);
        unlink(okp);
        return st;
    }
    /* rank r > 0: the id of this run, then the verdict */
    snprintf(mine, sizeof mine, "%s.%d", path, rank);
    char want[200];
    snprintf(want, sizeof want, "%s %d ", hdr, nranks);
    int marked = 0;
    while (xs_now_s() < deadline + 10) {
        if (!marked && xs_now_s() < deadline && read_small(path, text, sizeof text) == 0 &&
            !strncmp(text, want, strlen(want))) {
            size_t n = strlen(text) - strlen(want);
            if (n >= cap)
                return xs_seterr(XS_EIO, "XS_ID_FILE %s: %zu bytes of id; at most %zu", path, n,
                                 cap - 1);
            memcpy(blob, text + strlen(want), n + 1);
            *len = n;
            XS_TRY(write_atomic(mine, hdr));
            marked = 1;
        }
        if (marked && read_small(okp, text, sizeof text) == 0 &&
            !strncmp(text, hdr, strlen(hdr)) && text[strlen(hdr)] == ' ') {
            const char *verdict = text + strlen(hdr) + 1;
            unlink(mine);
            if (!strcmp(verdict, "ok"))
                return XS_OK;
            if (!strncmp(verdict, "fail ", 5))
                return xs_seterr(XS_ETIMEOUT, "rank %d of %d: %s", rank, nranks, verdict + 5);
        }
        if (!marked && xs_now_s() >= deadline)
            break;
        nap_ms(20);
    }
    if (marked)
        unlink(mine);
    return xs_seterr(XS_ETIMEOUT, "rank %d of %d: %s from rank 0 within %g s (XS_RANK_TIMEOUT; "
                     "XS_ID_FILE=%s)", rank, nranks, marked ? "no word" : "no id", timeout_s,
                     path);
}

/* ---- the whole step for a subcommand ------------------------------------------------------ */

/* Only these travel from rank 0 (NAME=VALUE lines). */
static int shared_var(const char *line)
{
    return !strncmp(line, "XS_NCCL_ID=", 11) || !strncmp(line, XS_NCCL_COLL_ID_VAR "=",
                                                         strlen(XS_NCCL_COLL_ID_VAR) + 1);
}

xs_status xs_launcher_join(const xs_launcher_env *e, int ngpus, const xs_launch_hooks *h,
                           int quiet_stdout)
{
    if (ngpus != e->nranks)
        return xs_seterr(XS_EINVAL, "started by %s as rank %d of %d: pass -g/--gpus %d (one "
                         "process per rank), not %d", e->name, e->rank, e->nranks, e->nranks,
                         ngpus);
    if (!e->id_file[0] && !e->port)
        return xs_seterr(XS_EINVAL, "started by %s as rank %d of %d, but neither MASTER_ADDR "
                         "and MASTER_PORT (a TCP store on rank 0) nor XS_ID_FILE (a shared "
                         "file) says how the ranks share the NCCL id", e->name, e->rank,
                         e->nranks);
    double timeout_s;
    XS_TRY(xs_rank_timeout(&timeout_s));
    /* the GPU: the launcher's local rank among the visible ones (one visible: that one) */
    int device = e->local_rank >= 0 ? e->local_rank : 0;
    if (h && h->count_gpus) {
        int visible = 0;
        XS_TRY(h->count_gpus(&visible));
        if (visible == 1)
            device = 0;
        else if (device >= visible)
            return xs_seterr(XS_EINVAL, "started by %s as rank %d (local rank %d), but %d GPU%s "
                             "visible", e->name, e->rank, e->local_rank, visible,
                             visible == 1 ? " is" : "s are");
    }
    char blob[2048] = "";
    size_t len = 0;
    if (e->rank == 0) {
        unsigned char id[XS_NCCL_ID_BYTES];
        char hex[2 * XS_NCCL_ID_BYTES + 1];
        if (h && h->make_id) {
            XS_TRY(h->make_id(id));
            xs_hex_encode(id, XS_NCCL_ID_BYTES, hex);
            snprintf(blob, sizeof blob, "XS_NCCL_ID=%s\n", hex);
        }
        const char *cid = getenv(XS_NCCL_COLL_ID_VAR); /* the benches' make_id sets it */
        if (cid && strlen(cid) == 2 * XS_NCCL_ID_BYTES)
            snprintf(blob + strlen(blob), sizeof blob - strlen(blob), "%s=%s\n",
                     XS_NCCL_COLL_ID_VAR, cid);
    }
    if (e->id_file[0])
        XS_TRY(xs_store_exchange_file(e->id_file, e->rank, e->nranks, e->run_id, blob,
                                      sizeof blob, &len, timeout_s));
    else
        XS_TRY(xs_store_exchange_tcp(e->addr, e->port, e->rank, e->nranks, e->run_id, blob,
                                     sizeof blob, &len, timeout_s));
    /* this process is now a rank like the ones -g N starts */
    char v[32];
    snprintf(v, sizeof v, "%d", e->rank);
    setenv("XS_RANK", v, 1);
    snprintf(v, sizeof v, "%d", e->nranks);
    setenv("XS_NRANKS", v, 1);
    snprintf(v, sizeof v, "%d", device);
    setenv("XS_DEVICE", v, 1);
    for (char *line = blob; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        char *eq = strchr(line, '=');
        if (eq && shared_var(line)) {
            *eq = 0;
            setenv(line, eq + 1, 1);
        }
        line = nl ? nl + 1 : NULL;
    }
    if (quiet_stdout && e->rank > 0) {
        /* one report, rank 0's, as with -g N; every rank's errors still reach stderr */
        fflush(stdout);
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            dup2(fd, 1);
            close(fd);
        }
    }
    return XS_OK;
}
