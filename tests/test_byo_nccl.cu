// SPDX-License-Identifier: Apache-2.0
/*
 * test_byo_nccl.cu - the host side of examples/byo's -g (byo_nccl.cuh) without a GPU: which rank
 * the launcher's variables make, the NCCL id's file exchange between forked ranks (a mismatched
 * plan, a missing rank 0, a stale file), and the one-line error when NCCL cannot be loaded.
 * Built by nvcc (the header holds kernels) but launches none.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <utime.h>

#include "xstage_device.cuh"
#include "../examples/byo/byo_nccl.cuh"
#include "xt.h"

static const char *const launcher_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "SLURM_PROCID",
    "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_ID", "XS_RANK_TIMEOUT", "BYO_ID_FILE",
    "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "SLURM_JOB_ID",
    "MASTER_PORT", NULL};

static void clear_env(void)
{
    for (int i = 0; launcher_vars[i]; i++)
        unsetenv(launcher_vars[i]);
}

static void test_ranks(void)
{
    byo_ranks r;
    clear_env();
    XT_CHECK(byo_ranks_detect(&r) == 0 && r.nranks == 1 && r.rank == 0 && !r.launcher &&
                 r.timeout_s == 120, "no launcher: one rank, %d of %d", r.rank, r.nranks);
    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_RANK", "2", 1);
    XT_CHECK(byo_ranks_detect(&r) == 0 && r.rank == 2 && r.nranks == 4 && r.local_rank == 2 &&
                 !strcmp(r.launcher, "torchrun"), "torchrun: %d of %d", r.rank, r.nranks);
    setenv("RANK", "4", 1);
    XT_CHECK(byo_ranks_detect(&r) == 1 && strstr(byo_err, "RANK='4'"), "rank >= size: %s",
             byo_err);
    setenv("WORLD_SIZE", "x", 1);
    XT_CHECK(byo_ranks_detect(&r) == 1 && strstr(byo_err, "WORLD_SIZE"), "bad size: %s",
             byo_err);
    clear_env();
    /* an sbatch script has SLURM_PROCID but no step: not a rank */
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_NTASKS", "2", 1);
    XT_CHECK(byo_ranks_detect(&r) == 0 && r.nranks == 1, "srun without a step: %d ranks",
             r.nranks);
    setenv("SLURM_STEP_ID", "0", 1);
    XT_CHECK(byo_ranks_detect(&r) == 0 && r.nranks == 2 && r.rank == 1 && r.local_rank == -1,
             "srun: %d of %d, local %d", r.rank, r.nranks, r.local_rank);
    clear_env();
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    setenv("XS_RANK_TIMEOUT", "2.5", 1);
    XT_CHECK(byo_ranks_detect(&r) == 0 && r.nranks == 3 && r.timeout_s == 2.5,
             "mpirun: %d ranks, %g s", r.nranks, r.timeout_s);
    setenv("XS_RANK_TIMEOUT", "0", 1);
    XT_CHECK(byo_ranks_detect(&r) == 1 && strstr(byo_err, "XS_RANK_TIMEOUT"), "timeout 0: %s",
             byo_err);
    clear_env();
}

static void test_id_path(void)
{
    char p[512];
    clear_env();
    setenv("TORCHELASTIC_RUN_ID", "a/b c", 1);
    setenv("MASTER_PORT", "29500", 1);
    XT_CHECK(byo_id_path(p, sizeof p) == 0 && !strcmp(p, "/tmp/byo-nccl-id.a_b_c"),
             "run id, sanitised: %s", p);
    setenv("BYO_ID_FILE", "/x/y.id", 1);
    XT_CHECK(byo_id_path(p, sizeof p) == 0 && !strcmp(p, "/x/y.id"), "BYO_ID_FILE wins: %s", p);
    clear_env();
}

static void fill_id(ncclUniqueId *id, int salt)
{
    for (size_t i = 0; i < sizeof *id; i++)
        ((unsigned char *)id)[i] = (unsigned char)(i * 7 + salt);
}

/* n ranks forked, each sharing through path; rank k plans ctas[k]. Returns how many ranks other
 * than 0 got rank 0's id; *errs counts ranks whose exchange failed. */
static int exchange(const char *path, int n, const int *ctas, double timeout_s, int *errs)
{
    pid_t pid[8];
    const time_t t0 = time(NULL);
    for (int k = 0; k < n; k++) {
        if ((pid[k] = fork()) == 0) {
            byo_ranks r;
            memset(&r, 0, sizeof r);
            r.rank = k;
            r.nranks = n;
            r.timeout_s = timeout_s;
            ncclUniqueId id, want;
            memset(&id, 0, sizeof id);
            fill_id(&want, 3);
            if (k == 0)
                id = want;
            if (byo_id_share(&r, path, &id, ctas[k], 1000, t0))
                _exit(2);
            _exit(memcmp(&id, &want, sizeof id) ? 1 : 0);
        }
    }
    int got = 0;
    *errs = 0;
    for (int k = 0; k < n; k++) {
        int st = 0;
        waitpid(pid[k], &st, 0);
        const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 3;
        got += k > 0 && code == 0;
        *errs += code == 2;
    }
    return got;
}

static void test_exchange(void)
{
    char path[128];
    snprintf(path, sizeof path, "/tmp/byo-test-id.%ld", (long)getpid());
    const int same[3] = {132, 132, 132}, other[3] = {132, 132, 100};
    int errs = 0;
    unlink(path);
    XT_CHECK(exchange(path, 3, same, 10, &errs) == 2 && errs == 0, "3 ranks: errors %d", errs);
    unlink(path);
    XT_CHECK(exchange(path, 3, other, 10, &errs) == 1 && errs == 1,
             "a rank planning other CTAs fails, errors %d", errs);
    unlink(path);

    /* rank 1 alone: no id within the bound, one line */
    byo_ranks r;
    memset(&r, 0, sizeof r);
    r.rank = 1;
    r.nranks = 2;
    r.timeout_s = 0.3;
    ncclUniqueId id;
    const double t = byo_now_s();
    XT_CHECK(byo_id_share(&r, path, &id, 132, 1000, time(NULL)) == 1 &&
                 strstr(byo_err, "no NCCL id from rank 0") && !strchr(byo_err, '\n'),
             "missing rank 0: %s", byo_err);
    XT_CHECK(byo_now_s() - t < 2, "bounded: %.2f s", byo_now_s() - t);

    /* a valid file of a run ten minutes old is not this run's */
    FILE *f = fopen(path, "w");
    fprintf(f, "byo-nccl-id1 2 132 1000 ");
    for (int i = 0; i < 128; i++)
        fprintf(f, "07");
    fprintf(f, "\n");
    fclose(f);
    struct utimbuf old = {time(NULL) - 600, time(NULL) - 600};
    utime(path, &old);
    XT_CHECK(byo_id_share(&r, path, &id, 132, 1000, time(NULL)) == 1, "a stale id is ignored");
    /* the same file, fresh: taken */
    utime(path, NULL);
    XT_CHECK(byo_id_share(&r, path, &id, 132, 1000, time(NULL)) == 0 &&
                 ((unsigned char *)&id)[5] == 7, "a fresh id is read: %s", byo_err);
    unlink(path);
}

static void test_load(void)
{
    setenv("XS_NCCL_LIB", "/nonexistent/libnccl.so.2", 1);
    XT_CHECK(byo_nccl_load() == 1 && strstr(byo_err, "NCCL cannot be loaded") &&
                 !strchr(byo_err, '\n'), "missing NCCL: %s", byo_err);
    unsetenv("XS_NCCL_LIB");
}

int main(void)
{
    test_ranks();
    test_id_path();
    test_exchange();
    test_load();
    return xt_done();
}
