// SPDX-License-Identifier: Apache-2.0
/*
 * test_launch.c - the launcher on the CPU: rank environment parsing (good and bad values), hex,
 * starting N helper programs (all succeed; one fails and the others are stopped within the bound;
 * one leaves early with status 0 and the ranks waiting on it end through their bounded waits;
 * a child that ignores SIGTERM is killed; a hung run times out; a signal death), argument and
 * environment passthrough (this binary re-executes itself as the ranks), and the
 * xs_launch_or_run_with decision with fake hooks; the variables of torchrun, mpirun and srun, and
 * the NCCL id's exchange between forked processes over TCP and over a shared file, including a
 * rank that never joins (every other rank fails within the bound, in one line); the run-time
 * library search order.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../tests/xt.h"
#include "libpath.h"
#include "xstage_launch.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void clear_launch_env(void)
{
    unsetenv("XS_RANK");
    unsetenv("XS_NRANKS");
    unsetenv("XS_NCCL_ID");
    unsetenv("XS_DEVICE");
}

static unsigned char fake_id[XS_NCCL_ID_BYTES];

static void fill_fake_id(void)
{
    for (int i = 0; i < XS_NCCL_ID_BYTES; i++)
        fake_id[i] = (unsigned char)(i * 37 + 11);
}

/* ---- child mode: this binary started by the launcher ---------------------------------------- */

/* Exit 0 when the environment and arguments are what the parent passed; a distinct code per
 * mismatch so that a failure names what went wrong. */
static int child_main(int argc, char **argv)
{
    int rank, n, have;
    unsigned char id[XS_NCCL_ID_BYTES];
    if (xs_rank_env(&rank, &n, id, &have) != XS_OK) {
        fprintf(stderr, "child: %s\n", xs_errmsg());
        return 10;
    }
    if (xs_rank_device(-1) != rank)
        return 11;
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "--args")) {
        /* argv passthrough: argument with spaces, an empty one, one with '=' */
        if (argc != 5 || strcmp(argv[2], "two words") || strcmp(argv[3], "") ||
            strcmp(argv[4], "--x=1"))
            return 12;
        if (n != 3 || !have || memcmp(id, fake_id, sizeof id))
            return 13;
        return 0;
    }
    if (!strcmp(mode, "--coll-id")) {
        /* a variable the parent set before launching (the benches' collective id) is inherited */
        unsigned char cid[XS_NCCL_ID_BYTES];
        int chave = 0;
        if (xs_rank_env_id(XS_NCCL_COLL_ID_VAR, cid, &chave) != XS_OK || !chave)
            return 15;
        for (int i = 0; i < XS_NCCL_ID_BYTES; i++)
            if (cid[i] != (unsigned char)(fake_id[i] ^ 0x5a))
                return 16;
        return 0;
    }
    /* started through xs_launch_or_run_with(argv = NULL): our own command line, the fake id */
    if (n != 2 || !have || memcmp(id, fake_id, sizeof id))
        return 14;
    return 0;
}

/* ---- parent tests ------------------------------------------------------------------------ */

static void test_hex(void)
{
    unsigned char b[4] = {0x00, 0x7f, 0xa5, 0xff}, c[4];
    char h[9];
    xs_hex_encode(b, 4, h);
    XT_CHECK(!strcmp(h, "007fa5ff"), "hex %s", h);
    XT_CHECK(xs_hex_decode(h, c, 4) == XS_OK && !memcmp(b, c, 4), "roundtrip");
    XT_CHECK(xs_hex_decode("007FA5FF", c, 4) == XS_OK && !memcmp(b, c, 4), "upper case");
    XT_CHECK(xs_hex_decode("007fa5f", c, 4) == XS_EINVAL, "short");
    XT_CHECK(xs_hex_decode("007fa5fg", c, 4) == XS_EINVAL, "non-hex");
}

static void test_env(void)
{
    int rank = -1, n = -1, have = -1;
    unsigned char id[XS_NCCL_ID_BYTES];
    char hex[2 * XS_NCCL_ID_BYTES + 1];
    fill_fake_id();
    xs_hex_encode(fake_id, XS_NCCL_ID_BYTES, hex);

    clear_launch_env();
    XT_CHECK(xs_rank_env(&rank, &n, id, &have) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(rank == 0 && n == 1 && have == 0, "no launcher: rank %d of %d, id %d", rank, n, have);
    XT_CHECK(xs_rank_device(3) == 3, "no XS_DEVICE: requested device");

    setenv("XS_RANK", "2", 1);
    setenv("XS_NRANKS", "4", 1);
    setenv("XS_NCCL_ID", hex, 1);
    setenv("XS_DEVICE", "2", 1);
    XT_CHECK(xs_rank_env(&rank, &n, id, &have) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(rank == 2 && n == 4 && have == 1 && !memcmp(id, fake_id, sizeof id), "parsed");
    XT_CHECK(xs_rank_device(0) == 2, "XS_DEVICE wins");
    XT_CHECK(xs_launch_needed(4) == 0, "a launched rank does not launch");

    struct {
        const char *var, *val, *expect;
    } bad[] = {
        {"XS_RANK", "abc", "XS_RANK='abc'"},
        {"XS_RANK", "4", "XS_RANK='4' is not an integer in [0, 3]"},
        {"XS_RANK", "-1", "XS_RANK='-1'"},
        {"XS_RANK", "1x", "XS_RANK='1x'"},
        {"XS_RANK", "", "XS_RANK=''"},
        {"XS_NRANKS", "0", "XS_NRANKS='0'"},
        {"XS_NRANKS", "65", "XS_NRANKS='65'"},
        {"XS_NRANKS", "two", "XS_NRANKS='two'"},
        {"XS_NCCL_ID", "abcd", "XS_NCCL_ID is not 256 hex digits (length 4)"},
        {"XS_DEVICE", "-2", "XS_DEVICE='-2'"},
        {"XS_DEVICE", "gpu0", "XS_DEVICE='gpu0'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("XS_RANK", "2", 1);
        setenv("XS_NRANKS", "4", 1);
        setenv("XS_NCCL_ID", hex, 1);
        setenv("XS_DEVICE", "2", 1);
        setenv(bad[i].var, bad[i].val, 1);
        xs_status s = xs_rank_env(&rank, &n, id, &have);
        XT_CHECK(s == XS_EINVAL, "%s=%s accepted", bad[i].var, bad[i].val);
        XT_CHECK(strstr(xs_errmsg(), bad[i].expect) != NULL, "message '%s' lacks '%s'",
                 xs_errmsg(), bad[i].expect);
        XT_CHECK(strchr(xs_errmsg(), '\n') == NULL, "one line");
    }
    /* a non-hex id of the right length */
    char badhex[2 * XS_NCCL_ID_BYTES + 1];
    memcpy(badhex, hex, sizeof badhex);
    badhex[17] = 'z';
    setenv("XS_DEVICE", "2", 1);
    setenv("XS_NCCL_ID", badhex, 1);
    setenv("XS_RANK", "0", 1);
    XT_CHECK(xs_rank_env(&rank, &n, id, &have) == XS_EINVAL, "non-hex id accepted");
    /* several ranks need the id; one rank does not */
    unsetenv("XS_NCCL_ID");
    XT_CHECK(xs_rank_env(&rank, &n, id, &have) == XS_EINVAL &&
                 strstr(xs_errmsg(), "XS_NCCL_ID is not set"),
             "missing id: %s", xs_errmsg());
    setenv("XS_NRANKS", "1", 1);
    XT_CHECK(xs_rank_env(&rank, &n, id, &have) == XS_OK && n == 1 && have == 0, "one rank");
    /* XS_RANK without XS_NRANKS */
    unsetenv("XS_NRANKS");
    XT_CHECK(xs_rank_env(&rank, &n, id, &have) == XS_EINVAL &&
                 strstr(xs_errmsg(), "XS_NRANKS is not"),
             "rank without size: %s", xs_errmsg());
    clear_launch_env();
}

static void test_launch_sh(void)
{
    int ec = -1;
    xs_launch_opts o;
    memset(&o, 0, sizeof o);
    o.exe = "/bin/sh";
    o.timeout_s = 20;
    o.grace_s = 1;

    /* all succeed; each sees its rank, the size, its device and the id */
    char *ok[] = {"sh", "-c",
                  "test \"$XS_NRANKS\" = 4 && test \"$XS_DEVICE\" = \"$XS_RANK\" && "
                  "test \"$XS_RANK\" -ge 0 && test \"$XS_RANK\" -lt 4 && "
                  "test \"$XS_NCCL_ID\" = 00ff",
                  NULL};
    xs_status s = xs_launch(4, ok, "00ff", &o, &ec);
    XT_CHECK(s == XS_OK && ec == 0, "all ranks: %s (exit %d)", xs_errmsg(), ec);

    /* the parent's own launch variables do not leak into the children */
    setenv("XS_RANK", "7", 1);
    char *noleak[] = {"sh", "-c", "test \"$XS_RANK\" -lt 2 && test -z \"$XS_NCCL_ID\"", NULL};
    s = xs_launch(2, noleak, NULL, &o, &ec);
    XT_CHECK(s == XS_OK && ec == 0, "env replaced: %s", xs_errmsg());
    clear_launch_env();

    /* rank 2 fails; the others (sleeping) are stopped well within the bound */
    char *one_fails[] = {"sh", "-c", "if [ \"$XS_RANK\" = 2 ]; then exit 3; fi; exec sleep 30",
                         NULL};
    double t0 = now_s();
    s = xs_launch(4, one_fails, NULL, &o, &ec);
    double dt = now_s() - t0;
    XT_CHECK(s == XS_EIO && ec == 3, "one fails: status %d exit %d", s, ec);
    XT_CHECK(!strcmp(xs_errmsg(), "rank 2 exited with status 3; stopped ranks 0,1,3"),
             "message: %s", xs_errmsg());
    XT_CHECK(dt < 5, "stopped in %.2f s", dt);

    /* a rank that leaves mid-run with status 0 is no failure by itself: the ranks that wait on
     * it end through their own bounded waits (rank 1: a 0.3 s bound, its one error line), and
     * that error stops the rest (ranks 2 and 3, still within a longer bound) at once */
    char *leaves[] = {"sh", "-c",
                      "case $XS_RANK in 0) exit 0 ;; 1) sleep 0.3; exit 4 ;; esac; exec sleep 30",
                      NULL};
    t0 = now_s();
    s = xs_launch(4, leaves, NULL, &o, &ec);
    dt = now_s() - t0;
    XT_CHECK(s == XS_EIO && ec == 4, "rank leaves: status %d exit %d", s, ec);
    XT_CHECK(!strcmp(xs_errmsg(), "rank 1 exited with status 4; stopped ranks 2,3"),
             "message: %s", xs_errmsg());
    XT_CHECK(strchr(xs_errmsg(), '\n') == NULL, "one line");
    XT_CHECK(dt >= 0.3 && dt < 5, "ended in %.2f s", dt);

    /* a rank that ignores SIGTERM is killed after the grace period */
    char *stubborn[] = {"sh", "-c",
                        "if [ \"$XS_RANK\" = 0 ]; then sleep 0.2; exit 5; fi; "
                        "trap '' TERM; exec sleep 30",
                        NULL};
    t0 = now_s();
    s = xs_launch(3, stubborn, NULL, &o, &ec);
    dt = now_s() - t0;
    XT_CHECK(s == XS_EIO && ec == 5, "stubborn: status %d exit %d", s, ec);
    XT_CHECK(strstr(xs_errmsg(), "rank 0 exited with status 5; stopped ranks 1,2") &&
                 strstr(xs_errmsg(), "killed after the grace period"),
             "message: %s", xs_errmsg());
    XT_CHECK(dt > 1.0 && dt < 5, "killed after grace in %.2f s", dt);

    /* a hung run times out */
    o.timeout_s = 1;
    char *hung[] = {"sh", "-c", "exec sleep 30", NULL};
    t0 = now_s();
    s = xs_launch(2, hung, NULL, &o, &ec);
    dt = now_s() - t0;
    XT_CHECK(s == XS_ETIMEOUT && ec == 124, "timeout: status %d exit %d", s, ec);
    XT_CHECK(!strcmp(xs_errmsg(), "ranks did not finish within 1 s; stopped ranks 0,1"),
             "message: %s", xs_errmsg());
    XT_CHECK(dt >= 1.0 && dt < 4, "timed out in %.2f s", dt);
    o.timeout_s = 20;

    /* death by a signal */
    char *crash[] = {"sh", "-c", "if [ \"$XS_RANK\" = 1 ]; then kill -SEGV $$; fi; exit 0", NULL};
    s = xs_launch(2, crash, NULL, &o, &ec);
    XT_CHECK(s == XS_EIO && ec == 128 + SIGSEGV, "signal: status %d exit %d", s, ec);
    XT_CHECK(strstr(xs_errmsg(), "rank 1 was killed by signal 11") != NULL, "message: %s",
             xs_errmsg());

    /* a program that cannot be executed */
    o.exe = "/nonexistent/xstage";
    s = xs_launch(2, hung, NULL, &o, &ec);
    XT_CHECK(s == XS_EIO && ec == 127, "exec failure: status %d exit %d", s, ec);
    XT_CHECK(strstr(xs_errmsg(), "exited with status 127") != NULL, "message: %s", xs_errmsg());
    o.exe = "/bin/sh";

    /* bad arguments */
    XT_CHECK(xs_launch(0, ok, NULL, &o, &ec) == XS_EINVAL, "0 ranks");
    XT_CHECK(xs_launch(65, ok, NULL, &o, &ec) == XS_EINVAL, "65 ranks");
    char *empty[] = {NULL};
    XT_CHECK(xs_launch(2, empty, NULL, &o, &ec) == XS_EINVAL, "empty argv");
}

static void test_self_args(const char *self)
{
    /* this binary as the ranks (exe NULL: /proc/self/exe), arguments passed through */
    int ec = -1;
    xs_launch_opts o;
    memset(&o, 0, sizeof o);
    o.timeout_s = 20;
    char *args[] = {(char *)self, "--args", "two words", "", "--x=1", NULL};
    char hex[2 * XS_NCCL_ID_BYTES + 1];
    xs_hex_encode(fake_id, XS_NCCL_ID_BYTES, hex);
    xs_status s = xs_launch(3, args, hex, &o, &ec);
    XT_CHECK(s == XS_OK && ec == 0, "argv passthrough: %s (exit %d)", xs_errmsg(), ec);
}

static xs_status hook_one_gpu(int *n)
{
    *n = 1;
    return XS_OK;
}
static xs_status hook_two_gpus(int *n)
{
    *n = 2;
    return XS_OK;
}
static xs_status hook_id(unsigned char id[XS_NCCL_ID_BYTES])
{
    memcpy(id, fake_id, XS_NCCL_ID_BYTES);
    return XS_OK;
}
static xs_status hook_no_nccl(unsigned char id[XS_NCCL_ID_BYTES])
{
    (void)id;
    return xs_seterr(XS_ENCCL, "NCCL not found (test hook)");
}

static void test_launch_or_run(void)
{
    int ec = -1;
    xs_launch_hooks one = {hook_one_gpu, hook_id}, two = {hook_two_gpus, hook_id};
    xs_launch_hooks nonccl = {hook_two_gpus, hook_no_nccl};
    clear_launch_env();
    XT_CHECK(xs_launch_or_run_with(1, 0, NULL, &one, NULL, &ec) == 0, "one GPU: work here");
    XT_CHECK(xs_launch_or_run_with(0, 0, NULL, &one, NULL, &ec) == -1 &&
                 strstr(xs_errmsg(), "-g/--gpus 0"),
             "0 GPUs: %s", xs_errmsg());
    XT_CHECK(xs_launch_or_run_with(2, 0, NULL, &one, NULL, &ec) == -1 &&
                 !strcmp(xs_errmsg(), "-g/--gpus 2 asks for 2 GPUs (one process per GPU); 1 is "
                                      "visible"),
             "too few GPUs: %s", xs_errmsg());
    XT_CHECK(xs_launch_or_run_with(2, 0, NULL, &nonccl, NULL, &ec) == -1 &&
                 strstr(xs_errmsg(), "NCCL not found"),
             "no NCCL: %s", xs_errmsg());

    /* a launched rank does the work; a size mismatch is an error */
    setenv("XS_RANK", "1", 1);
    setenv("XS_NRANKS", "2", 1);
    char hex[2 * XS_NCCL_ID_BYTES + 1];
    xs_hex_encode(fake_id, XS_NCCL_ID_BYTES, hex);
    setenv("XS_NCCL_ID", hex, 1);
    XT_CHECK(xs_launch_or_run_with(2, 0, NULL, &two, NULL, &ec) == 0, "rank: work here");
    XT_CHECK(xs_launch_or_run_with(4, 0, NULL, &two, NULL, &ec) == -1 &&
                 strstr(xs_errmsg(), "launched as rank 1 of 2 but -g/--gpus says 4"),
             "mismatch: %s", xs_errmsg());
    setenv("XS_RANK", "9", 1);
    XT_CHECK(xs_launch_or_run_with(2, 0, NULL, &two, NULL, &ec) == -1, "bad rank env");
    clear_launch_env();

    /* the real thing: argv = NULL re-runs this binary's own command line as 2 ranks */
    xs_launch_opts o;
    memset(&o, 0, sizeof o);
    o.timeout_s = 20;
    int l = xs_launch_or_run_with(2, 0, NULL, &two, &o, &ec);
    XT_CHECK(l == 1 && ec == 0, "self launch: %d exit %d (%s)", l, ec, xs_errmsg());
}

static void test_gpus_check(void)
{
    xs_gpus_conflict c[2] = {{"--peers", 0, "with -g the ranks are the peers"},
                             {"--device", 0, "rank r uses GPU r"}};
    XT_CHECK(xs_gpus_check("bench ep", 0, 0, c, 2) == XS_OK, "no -g: nothing to check");
    XT_CHECK(xs_gpus_check("bench ep", 1, 1, c, 2) == XS_OK, "-g 1");
    XT_CHECK(xs_gpus_check("bench ep", 1, 8, c, 2) == XS_OK, "-g 8");
    XT_CHECK(xs_gpus_check("bench ep", 1, 0, c, 2) == XS_EINVAL &&
                 !strcmp(xs_errmsg(), "bench ep: -g/--gpus 0: between 1 and 64 GPUs are supported"),
             "-g 0: %s", xs_errmsg());
    XT_CHECK(xs_gpus_check("bench ep", 1, 65, c, 2) == XS_EINVAL, "-g 65");
    c[1].set = 1;
    XT_CHECK(xs_gpus_check("bench up", 1, 2, c, 2) == XS_EINVAL &&
                 !strcmp(xs_errmsg(), "bench up: -g/--gpus 2 cannot be combined with --device "
                                      "(rank r uses GPU r)"),
             "conflict: %s", xs_errmsg());
    c[0].set = 1;
    XT_CHECK(xs_gpus_check("bench ep", 1, 2, c, 2) == XS_EINVAL &&
                 strstr(xs_errmsg(), "with --peers (with -g the ranks are the peers)") &&
                 strchr(xs_errmsg(), '\n') == NULL,
             "first conflict named, one line: %s", xs_errmsg());
}

static void test_coll_id(const char *self)
{
    unsigned char id[XS_NCCL_ID_BYTES], x[XS_NCCL_ID_BYTES];
    int have = -1;
    unsetenv(XS_NCCL_COLL_ID_VAR);
    XT_CHECK(xs_rank_env_id(XS_NCCL_COLL_ID_VAR, id, &have) == XS_OK && have == 0, "unset");
    setenv(XS_NCCL_COLL_ID_VAR, "12zz", 1);
    XT_CHECK(xs_rank_env_id(XS_NCCL_COLL_ID_VAR, id, &have) == XS_EINVAL &&
                 strstr(xs_errmsg(), "XS_NCCL_COLL_ID is not 256 hex digits (length 4)"),
             "malformed: %s", xs_errmsg());
    for (int i = 0; i < XS_NCCL_ID_BYTES; i++)
        x[i] = (unsigned char)(fake_id[i] ^ 0x5a);
    char hex[2 * XS_NCCL_ID_BYTES + 1];
    xs_hex_encode(x, XS_NCCL_ID_BYTES, hex);
    setenv(XS_NCCL_COLL_ID_VAR, hex, 1);
    XT_CHECK(xs_rank_env_id(XS_NCCL_COLL_ID_VAR, id, &have) == XS_OK && have == 1 &&
                 !memcmp(id, x, sizeof id),
             "parsed");
    /* set in the parent before launching (as xs_bench_launch does): every rank inherits it */
    int ec = -1;
    xs_launch_opts o;
    memset(&o, 0, sizeof o);
    o.timeout_s = 20;
    o.quiet_stdout = 1;
    char *args[] = {(char *)self, "--coll-id", NULL};
    xs_hex_encode(fake_id, XS_NCCL_ID_BYTES, hex);
    xs_status s = xs_launch(3, args, hex, &o, &ec);
    XT_CHECK(s == XS_OK && ec == 0, "collective id inherited: %s (exit %d)", xs_errmsg(), ec);
    unsetenv(XS_NCCL_COLL_ID_VAR);
}

/* Only rank 0 (or a process that was not launched) writes a -g run's files. */
static void test_rank_primary(void)
{
    unsetenv("XS_RANK");
    XT_CHECK(xs_rank_primary(), "a process that was not launched writes its files");
    setenv("XS_RANK", "0", 1);
    XT_CHECK(xs_rank_primary(), "rank 0 writes the files");
    setenv("XS_RANK", "3", 1);
    XT_CHECK(!xs_rank_primary(), "rank 3 does not write the files");
    unsetenv("XS_RANK");
}

/* ---- other launchers (src/rendezvous.c) ----------------------------------------------------- */

static const char *const launcher_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
    "PMI_SIZE", "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_LOCALID", "SLURM_STEP_ID", "SLURM_JOB_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
    "XS_ID_FILE", "XS_STORE_PORT", "XS_RUN_ID", "XS_RANK_TIMEOUT", XS_NCCL_COLL_ID_VAR};

static void clear_launchers(void)
{
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
        unsetenv(launcher_vars[i]);
    clear_launch_env();
}

static void test_detect(void)
{
    xs_launcher_env e;
    clear_launchers();
    XT_CHECK(xs_launcher_detect(&e) == XS_OK && e.name == NULL && e.rank == 0 && e.nranks == 1,
             "no launcher: %s", e.name ? e.name : "none");

    /* torchrun: the store takes MASTER_PORT + 1 (its agent holds MASTER_PORT) */
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("MASTER_ADDR", "node7", 1);
    setenv("MASTER_PORT", "29500", 1);
    setenv("TORCHELASTIC_RUN_ID", "job 42", 1);
    XT_CHECK(xs_launcher_detect(&e) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(e.name && !strcmp(e.name, "torchrun") && e.rank == 3 && e.nranks == 4 &&
                 e.local_rank == 1 && !strcmp(e.addr, "node7") && e.port == 29501 &&
                 !strcmp(e.run_id, "job_42") && e.id_file[0] == 0,
             "torchrun: %s %d of %d local %d %s:%d run '%s'", e.name ? e.name : "-", e.rank,
             e.nranks, e.local_rank, e.addr, e.port, e.run_id);
    setenv("XS_STORE_PORT", "4000", 1);
    setenv("XS_ID_FILE", "/shared/id", 1);
    XT_CHECK(xs_launcher_detect(&e) == XS_OK && e.port == 4000 && !strcmp(e.id_file, "/shared/id"),
             "XS_STORE_PORT %d, XS_ID_FILE '%s'", e.port, e.id_file);
    clear_launchers();

    /* Open MPI; without MASTER_* there is no store address */
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    setenv("OMPI_MCA_ess_base_jobid", "1234", 1);
    XT_CHECK(xs_launcher_detect(&e) == XS_OK && e.name && !strcmp(e.name, "mpirun (Open MPI)") &&
                 e.rank == 0 && e.nranks == 2 && e.local_rank == 0 && e.port == 0 &&
                 !strcmp(e.run_id, "1234"),
             "ompi: %s %d of %d port %d", e.name ? e.name : "-", e.rank, e.nranks, e.port);
    setenv("MASTER_ADDR", "10.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    XT_CHECK(xs_launcher_detect(&e) == XS_OK && e.port == 29500 && !strcmp(e.addr, "10.0.0.1"),
             "ompi store at MASTER_PORT itself: %d", e.port);
    clear_launchers();

    /* PMI (MPICH, Intel MPI) */
    setenv("PMI_RANK", "5", 1);
    setenv("PMI_SIZE", "8", 1);
    setenv("MPI_LOCALRANKID", "1", 1);
    XT_CHECK(xs_launcher_detect(&e) == XS_OK && e.name && !strcmp(e.name, "mpirun (PMI)") &&
                 e.rank == 5 && e.nranks == 8 && e.local_rank == 1,
             "pmi: %s %d of %d local %d", e.name ? e.name : "-", e.rank, e.nranks, e.local_rank);
    clear_launchers();

    /* srun: a task of a step; an sbatch script (no step) is no launcher */
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_NTASKS", "2", 1);
    setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_JOB_ID", "77", 1);
    XT_CHECK(xs_launcher_detect(&e) == XS_OK && e.name == NULL, "sbatch taken for srun");
    setenv("SLURM_STEP_ID", "3", 1);
    XT_CHECK(xs_launcher_detect(&e) == XS_OK && e.name && !strcmp(e.name, "srun") &&
                 e.rank == 1 && e.nranks == 2 && e.local_rank == 1 && !strcmp(e.run_id, "77.3"),
             "srun: %s %d of %d run '%s'", e.name ? e.name : "-", e.rank, e.nranks, e.run_id);
    /* torchrun's variables win over the scheduler's around it */
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    XT_CHECK(xs_launcher_detect(&e) == XS_OK && e.name && !strcmp(e.name, "torchrun"),
             "precedence: %s", e.name ? e.name : "-");
    clear_launchers();

    struct {
        const char *vars[6];
        const char *expect;
    } bad[] = {
        {{"RANK", "2", "WORLD_SIZE", "2"}, "RANK='2' (torchrun): not an integer in [0, 1]"},
        {{"RANK", "x", "WORLD_SIZE", "2"}, "RANK='x'"},
        {{"RANK", "0", "WORLD_SIZE", "0"}, "WORLD_SIZE='0'"},
        {{"RANK", "0", "WORLD_SIZE", "65"}, "WORLD_SIZE='65'"},
        {{"RANK", "0", "WORLD_SIZE", "2", "LOCAL_RANK", "-1"}, "local rank '-1' (torchrun)"},
        {{"RANK", "0", "WORLD_SIZE", "2", "MASTER_PORT", "70000"}, "MASTER_PORT='70000'"},
        {{"RANK", "0", "WORLD_SIZE", "2", "XS_STORE_PORT", "p"}, "XS_STORE_PORT='p'"},
        {{"OMPI_COMM_WORLD_RANK", "1x", "OMPI_COMM_WORLD_SIZE", "2"},
         "OMPI_COMM_WORLD_RANK='1x' (mpirun (Open MPI))"},
        {{"SLURM_PROCID", "0", "SLURM_NTASKS", "two", "SLURM_STEP_ID", "0"},
         "SLURM_NTASKS='two' (srun)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clear_launchers();
        for (int k = 0; k < 6 && bad[i].vars[k]; k += 2)
            setenv(bad[i].vars[k], bad[i].vars[k + 1], 1);
        xs_status st = xs_launcher_detect(&e);
        XT_CHECK(st == XS_EINVAL && strstr(xs_errmsg(), bad[i].expect) &&
                     !strchr(xs_errmsg(), '\n'),
                 "bad %zu: status %d '%s' lacks '%s'", i, st, xs_errmsg(), bad[i].expect);
    }
    clear_launchers();

    double t;
    XT_CHECK(xs_rank_timeout(&t) == XS_OK && t == XS_RANK_TIMEOUT_DEFAULT_S && t < 900,
             "default bound %g s", t);
    setenv("XS_RANK_TIMEOUT", "2.5", 1);
    XT_CHECK(xs_rank_timeout(&t) == XS_OK && t == 2.5, "XS_RANK_TIMEOUT 2.5: %g", t);
    const char *tbad[] = {"0", "-1", "abc", "1e9", "", "nan"};
    for (size_t i = 0; i < sizeof tbad / sizeof tbad[0]; i++) {
        setenv("XS_RANK_TIMEOUT", tbad[i], 1);
        XT_CHECK(xs_rank_timeout(&t) == XS_EINVAL && strstr(xs_errmsg(), "XS_RANK_TIMEOUT"),
                 "XS_RANK_TIMEOUT='%s' accepted", tbad[i]);
    }
    unsetenv("XS_RANK_TIMEOUT");
}

/* A TCP port that was free a moment ago. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

/* One rank of an exchange in a child process: exit 0 when it got `want`; 3 when it failed with
 * a one-line message containing `fail_with`; other codes for anything else. way: 't' TCP, 'f'
 * file (target = port or path). */
static pid_t exchange_child(char way, int port, const char *path, int rank, int nranks,
                            double timeout_s, const char *want, const char *fail_with)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    char blob[1024] = "";
    size_t len = 0;
    xs_status st = way == 't'
                       ? xs_store_exchange_tcp("127.0.0.1", port, rank, nranks, "run1", blob,
                                               sizeof blob, &len, timeout_s)
                       : xs_store_exchange_file(path, rank, nranks, "run1", blob, sizeof blob,
                                                &len, timeout_s);
    if (st == XS_OK)
        _exit(want && !strcmp(blob, want) && len == strlen(want) ? 0 : 4);
    if (fail_with && strstr(xs_errmsg(), fail_with) && !strchr(xs_errmsg(), '\n'))
        _exit(3);
    fprintf(stderr, "child rank %d: %s\n", rank, xs_errmsg());
    _exit(5);
}

static int child_status(pid_t pid)
{
    int ws = 0;
    if (waitpid(pid, &ws, 0) != pid)
        return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

static void test_exchange(char way)
{
    const char *wname = way == 't' ? "tcp" : "file";
    char dir[] = "/tmp/xs-idx-XXXXXX", path[256];
    XT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/id", dir);
    const char *id = "XS_NCCL_ID=00ff\nXS_NCCL_COLL_ID=abcd\n";

    /* four ranks, rank 0 last to arrive: everyone gets the id */
    int port = free_port();
    pid_t kids[3];
    for (int r = 1; r < 4; r++)
        kids[r - 1] = exchange_child(way, port, path, r, 4, 10, id, NULL);
    usleep(200000);
    char blob[1024];
    snprintf(blob, sizeof blob, "%s", id);
    size_t len = 0;
    xs_status st = way == 't' ? xs_store_exchange_tcp("127.0.0.1", port, 0, 4, "run1", blob,
                                                      sizeof blob, &len, 10)
                              : xs_store_exchange_file(path, 0, 4, "run1", blob, sizeof blob,
                                                       &len, 10);
    XT_CHECK(st == XS_OK && len == strlen(id), "%s rank 0: %s", wname, xs_errmsg());
    for (int r = 1; r < 4; r++) {
        int cs = child_status(kids[r - 1]);
        XT_CHECK(cs == 0, "%s rank %d: status %d", wname, r, cs);
    }
    if (way == 'f') {
        char left[300];
        snprintf(left, sizeof left, "%s.ok", path);
        XT_CHECK(access(path, F_OK) != 0 && access(left, F_OK) != 0, "id files left behind");
    }

    /* rank 2 of 3 never joins: rank 0 and rank 1 both fail within the bound, one line each,
     * naming rank 2 */
    port = free_port();
    double t0 = now_s();
    pid_t k1 = exchange_child(way, port, path, 1, 3, 1.0, id, "rank 2 of 3 did not join within 1 s");
    snprintf(blob, sizeof blob, "%s", id);
    st = way == 't' ? xs_store_exchange_tcp("127.0.0.1", port, 0, 3, "run1", blob, sizeof blob,
                                            &len, 1.0)
                    : xs_store_exchange_file(path, 0, 3, "run1", blob, sizeof blob, &len, 1.0);
    double dt0 = now_s() - t0;
    XT_CHECK(st == XS_ETIMEOUT && strstr(xs_errmsg(), "rank 2 of 3 did not join within 1 s") &&
                 !strchr(xs_errmsg(), '\n'),
             "%s missing rank, rank 0: %d '%s'", wname, st, xs_errmsg());
    int cs = child_status(k1);
    double dt1 = now_s() - t0;
    XT_CHECK(cs == 3, "%s missing rank, rank 1: status %d", wname, cs);
    XT_CHECK(dt0 >= 1.0 && dt0 < 3 && dt1 < 4, "%s missing rank: rank 0 after %.2f s, rank 1 "
             "after %.2f s", wname, dt0, dt1);

    /* rank 0 never comes: the others give up at the bound */
    port = free_port();
    t0 = now_s();
    k1 = exchange_child(way, port, path, 1, 2, 1.0, id, way == 't' ? "no id store" : "no id");
    cs = child_status(k1);
    dt1 = now_s() - t0;
    XT_CHECK(cs == 3 && dt1 >= 1.0 && dt1 < 3, "%s no rank 0: status %d after %.2f s", wname, cs,
             dt1);

    /* another run on the same port or path does not mix in: its rank is refused (TCP) or its
     * files ignored (file), and ours still completes */
    port = free_port();
    pid_t other = fork();
    if (other == 0) {
        char b[256] = "";
        size_t l = 0;
        xs_status s2 = way == 't' ? xs_store_exchange_tcp("127.0.0.1", port, 1, 2, "run2", b,
                                                          sizeof b, &l, 1.0)
                                  : xs_store_exchange_file(path, 1, 2, "run2", b, sizeof b, &l,
                                                           1.0);
        _exit(s2 == XS_OK ? 0 : 3);
    }
    k1 = exchange_child(way, port, path, 1, 2, 5, id, NULL);
    snprintf(blob, sizeof blob, "%s", id);
    st = way == 't' ? xs_store_exchange_tcp("127.0.0.1", port, 0, 2, "run1", blob, sizeof blob,
                                            &len, 5)
                    : xs_store_exchange_file(path, 0, 2, "run1", blob, sizeof blob, &len, 5);
    XT_CHECK(st == XS_OK, "%s two runs, rank 0: %s", wname, xs_errmsg());
    XT_CHECK(child_status(k1) == 0, "%s two runs: our rank 1 did not get the id", wname);
    XT_CHECK(child_status(other) == 3, "%s two runs: the other run's rank was served", wname);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    XT_CHECK(system(cmd) == 0, "cleanup");
}

static xs_status two_gpus(int *n)
{
    *n = 2;
    return XS_OK;
}
static xs_status fake_make_id(unsigned char id[XS_NCCL_ID_BYTES])
{
    memcpy(id, fake_id, XS_NCCL_ID_BYTES);
    char hex[2 * XS_NCCL_ID_BYTES + 1];
    unsigned char cid[XS_NCCL_ID_BYTES];
    for (int i = 0; i < XS_NCCL_ID_BYTES; i++)
        cid[i] = (unsigned char)(fake_id[i] ^ 0x5a);
    xs_hex_encode(cid, XS_NCCL_ID_BYTES, hex);
    setenv(XS_NCCL_COLL_ID_VAR, hex, 1); /* as the benches' hook does */
    return XS_OK;
}

/* torchrun's variables through xs_launch_or_run_with: two processes become ranks 0 and 1 with
 * the same id, their devices are their local ranks, nothing is forked; a wrong -g is refused */
static void test_torchrun_join(const char *file)
{
    clear_launchers();
    int port = free_port();
    xs_launch_hooks h = {two_gpus, fake_make_id};
    pid_t kids[2];
    for (int r = 0; r < 2; r++) {
        kids[r] = fork();
        if (kids[r] != 0)
            continue;
        char v[16];
        snprintf(v, sizeof v, "%d", r);
        setenv("RANK", v, 1);
        setenv("LOCAL_RANK", v, 1);
        setenv("WORLD_SIZE", "2", 1);
        setenv("MASTER_ADDR", "localhost", 1);
        snprintf(v, sizeof v, "%d", port - 1);
        setenv("MASTER_PORT", v, 1);
        if (file)
            setenv("XS_ID_FILE", file, 1);
        setenv("XS_RANK_TIMEOUT", "10", 1);
        int ec = -1;
        int l = xs_launch_or_run_with(2, 0, NULL, &h, NULL, &ec);
        if (l != 0) {
            fprintf(stderr, "rank %d: %d %s\n", r, l, xs_errmsg());
            _exit(6);
        }
        int rank, n, have, chave = 0;
        unsigned char id[XS_NCCL_ID_BYTES], cid[XS_NCCL_ID_BYTES];
        if (xs_rank_env(&rank, &n, id, &have) != XS_OK || rank != r || n != 2 || !have ||
            memcmp(id, fake_id, sizeof id))
            _exit(7);
        if (xs_rank_device(-1) != r || xs_rank_primary() != (r == 0))
            _exit(8);
        if (xs_rank_env_id(XS_NCCL_COLL_ID_VAR, cid, &chave) != XS_OK || !chave ||
            cid[0] != (unsigned char)(fake_id[0] ^ 0x5a))
            _exit(9);
        _exit(0);
    }
    for (int r = 0; r < 2; r++) {
        int cs = child_status(kids[r]);
        XT_CHECK(cs == 0, "torchrun join (%s) rank %d: status %d", file ? "file" : "tcp", r, cs);
    }
    /* under a launcher of two ranks, nothing is forked */
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    XT_CHECK(!xs_launch_needed(2), "xs_launch_needed under torchrun");
    setenv("WORLD_SIZE", "1", 1);
    XT_CHECK(xs_launch_needed(2), "xs_launch_needed with a world of one");
    /* -g must say the launcher's size */
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "localhost", 1);
    setenv("MASTER_PORT", "29500", 1);
    int ec = 0;
    XT_CHECK(xs_launch_or_run_with(1, 0, NULL, &h, NULL, &ec) == -1 &&
                 strstr(xs_errmsg(), "started by torchrun as rank 0 of 2: pass -g/--gpus 2"),
             "no -g under torchrun: %s", xs_errmsg());
    /* no way to share the id */
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    XT_CHECK(xs_launch_or_run_with(2, 0, NULL, &h, NULL, &ec) == -1 &&
                 strstr(xs_errmsg(), "MASTER_ADDR") && strstr(xs_errmsg(), "XS_ID_FILE"),
             "no store: %s", xs_errmsg());
    /* one rank of one: the launcher is ignored and -g N forks as before (checked by the hooks'
     * GPU count here: 2 visible, -g 3 refused before anything starts) */
    setenv("WORLD_SIZE", "1", 1);
    XT_CHECK(xs_launch_or_run_with(3, 0, NULL, &h, NULL, &ec) == -1 &&
                 strstr(xs_errmsg(), "-g/--gpus 3 asks for 3 GPUs"),
             "world of one: %s", xs_errmsg());
    clear_launchers();
}

/* ---- run-time library search (src/libpath.h) ------------------------------------------------ */

static void touch_path(const char *root, const char *rel)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (char *c = p + strlen(root) + 1; *c; c++)
        if (*c == '/') {
            *c = 0;
            mkdir(p, 0755);
            *c = '/';
        }
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
}

static void test_libpath(void)
{
    char root[] = "/tmp/xs-libpath-XXXXXX";
    XT_CHECK(mkdtemp(root) != NULL, "mkdtemp");
    touch_path(root, "venv/lib/python3.99/site-packages/nvidia/nccl/lib/libnccl.so.2");
    touch_path(root, "conda/lib/python3.98/site-packages/nvidia/cu13/lib/libnccl.so.2");
    touch_path(root, "sp/nvidia/nccl/lib/libnccl.so.2");
    char venv[256], conda[256], a[1024], b[1024], c[1024];
    snprintf(venv, sizeof venv, "%s/venv", root);
    snprintf(conda, sizeof conda, "%s/conda", root);
    snprintf(a, sizeof a, "%s/lib/python3.99/site-packages/nvidia/nccl/lib/libnccl.so.2", venv);
    snprintf(b, sizeof b, "%s/lib/python3.98/site-packages/nvidia/cu13/lib/libnccl.so.2", conda);
    snprintf(c, sizeof c, "%s/sp/nvidia/nccl/lib/libnccl.so.2", root);
    static const char *const tails[] = {"nvidia/nccl/lib/libnccl.so.2",
                                        "nvidia/cu13/lib/libnccl.so.2",
                                        "nvidia/*/lib/libnccl.so.2"};
    static const char *const names[] = {"libnccl.so.2"};
    static char out[16][XS_LIBPATH_MAX];

    /* a fake interpreter whose sys.path is one directory: run in a child, since the answer is
     * asked once per process */
    char py[1024];
    snprintf(py, sizeof py, "%s/py", root);
    FILE *f = fopen(py, "w");
    if (f) {
        fprintf(f, "#!/bin/sh\necho %s/sp\necho relative/ignored\n", root);
        fclose(f);
        chmod(py, 0755);
    }
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("VIRTUAL_ENV");
        unsetenv("CONDA_PREFIX");
        setenv("XS_PYTHON", py, 1);
        setenv("CUDA_HOME", "/cuda-x", 1);
        int n = xs_lib_candidates(tails, 3, names, 1, out, 16);
        _exit(n == 3 && !strcmp(out[0], c) && !strcmp(out[1], "libnccl.so.2") &&
                      !strcmp(out[2], "/cuda-x/lib64/libnccl.so.2") ? 0 : 1);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    XT_CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "python3 sys.path is searched (status %d)",
             ws);

    /* venv first, then conda, then the loader, then the toolkit; no interpreter asked */
    setenv("VIRTUAL_ENV", venv, 1);
    setenv("CONDA_PREFIX", conda, 1);
    setenv("XS_PYTHON", "0", 1);
    setenv("CUDA_HOME", "/cuda-x", 1);
    int n = xs_lib_candidates(tails, 3, names, 1, out, 16);
    XT_CHECK(n == 4, "%d candidates", n);
    XT_CHECK(n >= 1 && !strcmp(out[0], a), "venv first: %s", out[0]);
    XT_CHECK(n >= 2 && !strcmp(out[1], b), "conda second: %s", out[1]);
    XT_CHECK(n >= 3 && !strcmp(out[2], "libnccl.so.2"), "the loader third: %s", out[2]);
    XT_CHECK(n >= 4 && !strcmp(out[3], "/cuda-x/lib64/libnccl.so.2"), "toolkit: %s", out[3]);
    for (int i = 0; i < n; i++)
        XT_CHECK(strstr(out[i], "/opt/") == NULL, "site-specific path %s", out[i]);
    /* nothing active: the loader and the toolkit only */
    unsetenv("VIRTUAL_ENV");
    unsetenv("CONDA_PREFIX");
    unsetenv("CUDA_HOME");
    n = xs_lib_candidates(tails, 3, names, 1, out, 16);
    XT_CHECK(n == 2 && !strcmp(out[0], "libnccl.so.2") &&
                 !strcmp(out[1], "/usr/local/cuda/lib64/libnccl.so.2"),
             "%d candidates, first %s", n, n ? out[0] : "");
    unsetenv("XS_PYTHON");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    XT_CHECK(system(cmd) == 0, "cleanup");
}

int main(int argc, char **argv)
{
    fill_fake_id();
    if (getenv("XS_RANK"))
        return child_main(argc, argv);
    test_hex();
    test_env();
    test_launch_sh();
    test_self_args(argv[0]);
    test_launch_or_run();
    test_gpus_check();
    test_coll_id(argv[0]);
    test_rank_primary();
    test_libpath();
    test_detect();
    test_exchange('t');
    test_exchange('f');
    test_torchrun_join(NULL);
    {
        char dir[] = "/tmp/xs-join-XXXXXX", path[256];
        XT_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
        snprintf(path, sizeof path, "%s/id", dir);
        test_torchrun_join(path);
        rmdir(dir);
    }
    return xt_done();
}
