// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_launch.h - one process per GPU: the fork/exec launcher behind `-g/--gpus N`.
 *
 * The parent makes the NCCL unique id, then starts N copies of this program (/proc/self/exe, same
 * command line) with XS_RANK, XS_NRANKS, XS_NCCL_ID (256 hex digits) and XS_DEVICE (= rank) in
 * their environment, and waits. When one rank fails, the others get SIGTERM and, after a grace
 * period, SIGKILL; an overall timeout stops them all; children also die with the parent
 * (PR_SET_PDEATHSIG), so no rank outlives a failed run. No MPI.
 *
 * A launched child sees XS_RANK and does the work itself (xs_launch_needed is false there);
 * xs_gpu_open and xs_win_open take the child's GPU from XS_DEVICE.
 *
 * src/launch.c is CPU-only C11 (testable without a GPU). xs_launch_or_run, the one call a GPU
 * subcommand makes, lives in the CUDA library (cuda/common/nccl.cu) because it needs the GPU count
 * and the NCCL id; it is xs_launch_or_run_with plus those two hooks.
 */
#ifndef XSTAGE_LAUNCH_H
#define XSTAGE_LAUNCH_H

#include <stddef.h>
#include "xstage.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XS_LAUNCH_MAX_RANKS 64 /* = XS_MAX_RANKS of xstage_win.h */
#define XS_NCCL_ID_BYTES 128   /* sizeof(ncclUniqueId) */

typedef struct {
    const char *exe;  /* program to run; NULL: /proc/self/exe (this very binary) */
    int timeout_s;    /* bound on the whole run, s; <= 0: none */
    int grace_s;      /* after a failure: SIGTERM, then SIGKILL after this many s; <= 0: 10 */
    int quiet_stdout; /* 1: ranks > 0 write stdout to /dev/null (stderr always passes) */
} xs_launch_opts;

/* True in a process that should start the ranks: ngpus > 1, XS_RANK is not set and no other
 * launcher (torchrun, mpirun, srun) started several ranks. */
int xs_launch_needed(int ngpus);

/* Start nranks copies of o->exe with argument vector argv (argv[0] included, NULL-terminated),
 * each with XS_RANK=r, XS_NRANKS=nranks, XS_DEVICE=r and, when nccl_id_hex is not NULL,
 * XS_NCCL_ID=nccl_id_hex; wait for all. XS_OK when every rank exits 0. Otherwise *exit_code is
 * the first failure's status (128 + signal for a signal, 124 for the timeout) and the one-line
 * message says who, e.g. "rank 2 exited with status 3; stopped ranks 0,1,3" (XS_EIO) or
 * "ranks did not finish within 60 s; stopped ranks 0,1" (XS_ETIMEOUT). Returns only after every
 * child has been reaped. o may be NULL (defaults). */
xs_status xs_launch(int nranks, char *const argv[], const char *nccl_id_hex,
                    const xs_launch_opts *o, int *exit_code);

/* This process's place in a launched run. Without XS_RANK: rank 0 of 1, *have_id = 0. With it:
 * XS_RANK, XS_NRANKS and XS_NCCL_ID validated (XS_EINVAL with one line naming the variable and
 * its bad value), id decoded into id[XS_NCCL_ID_BYTES], *have_id = 1. id may be NULL. */
xs_status xs_rank_env(int *rank, int *nranks, unsigned char *id, int *have_id);

/* The CUDA device this process should use: XS_DEVICE when it is set to a valid ordinal (a
 * launched rank), otherwise `requested`. */
int xs_rank_device(int requested);

/* True unless this process is a launched rank other than 0: the one that writes the result
 * files of a -g run (--out, --samples, --csv ...), so that N ranks never write one path at
 * once. The launcher's default options also send the stdout of ranks > 0 to /dev/null. */
int xs_rank_primary(void);

/* Hex (lowercase, 2 digits per byte, NUL-terminated: out holds 2n+1 bytes) and back. */
void xs_hex_encode(const unsigned char *b, size_t n, char *out);
xs_status xs_hex_decode(const char *hex, unsigned char *b, size_t n); /* exactly 2n digits */

/* The whole decision for a subcommand that accepts -g/--gpus N:
 *   returns  1 when this process was the launcher: the ranks ran, *exit_code is the run's status
 *              (on failure xs_errmsg() has the one-line reason);
 *   returns  0 when this process should do the work (ngpus <= 1, or it is a launched rank, or
 *              torchrun/mpirun/srun started it as one rank of several: xs_launcher_join done);
 *   returns -1 on an error before anything started (bad N, too few GPUs, no NCCL; xs_errmsg()).
 * argv: the full argument vector for the children, argv[0] first; NULL: this process's own
 * command line, read from /proc/self/cmdline (what a subcommand handed argv+1 should pass).
 * Hooks: count_gpus (visible GPUs; NULL skips the check) and make_id (the NCCL unique id; NULL
 * starts the ranks without XS_NCCL_ID). o may be NULL (defaults; timeout XS_LAUNCH_TIMEOUT or
 * 900 s; stdout of ranks > 0 to /dev/null). */
struct xs_launch_hooks {
    xs_status (*count_gpus)(int *n);
    xs_status (*make_id)(unsigned char id[XS_NCCL_ID_BYTES]);
};
typedef struct xs_launch_hooks xs_launch_hooks;
int xs_launch_or_run_with(int ngpus, int argc, char **argv, const xs_launch_hooks *h,
                          const xs_launch_opts *o, int *exit_code);

/* ---- ranks started by other launchers (src/rendezvous.c, docs/MULTIGPU.md "Launchers") -------
 *
 * Under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), mpirun (Open MPI's
 * OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK, or PMI_RANK/PMI_SIZE with MPI_LOCALRANKID) or srun
 * (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, inside a step: SLURM_STEP_ID) with more than one
 * rank, each process is one rank: xs_launch_or_run_with does not fork; rank 0 makes the NCCL id
 * and hands it to the others through a TCP store (rank 0 listens on XS_STORE_PORT, else
 * MASTER_PORT, or MASTER_PORT + 1 under torchrun, whose agent holds MASTER_PORT; the others
 * connect to MASTER_ADDR) or, when XS_ID_FILE is set, through files next to that path on a file
 * system every rank sees. Then XS_RANK, XS_NRANKS, XS_DEVICE (the local rank; 0 when one GPU is
 * visible) and XS_NCCL_ID are set in this process as the fork launcher sets them in its
 * children. The exchange is a barrier bounded by XS_RANK_TIMEOUT: a rank that never joins fails
 * every other rank with one line naming it. */

#define XS_RANK_TIMEOUT_DEFAULT_S 120.0

/* XS_RANK_TIMEOUT (seconds, > 0, at most a day; default XS_RANK_TIMEOUT_DEFAULT_S): the bound on
 * every host-side wait for other ranks (id exchange, NCCL communicator set-up, host
 * collectives). XS_EINVAL with one line when it is set to something else. */
xs_status xs_rank_timeout(double *seconds);

typedef struct {
    const char *name;  /* "torchrun", "mpirun (Open MPI)", "mpirun (PMI)", "srun"; NULL: none */
    int rank, nranks;  /* 0 of 1 without a launcher */
    int local_rank;    /* rank on this host; -1 when the launcher gives none */
    char addr[256];    /* MASTER_ADDR; "" when unset */
    int port;          /* the TCP store's port; 0 when there is no store address */
    char id_file[1024]; /* XS_ID_FILE; "" when unset */
    char run_id[112];  /* one id per run (XS_RUN_ID, TORCHELASTIC_RUN_ID, SLURM_JOB_ID.STEP,
                        * PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid); "" when none */
} xs_launcher_env;

/* Read the launcher's variables (first match: torchrun, Open MPI, PMI, srun). No launcher:
 * XS_OK with name NULL. A launcher with a malformed value: XS_EINVAL, one line naming the
 * variable. */
xs_status xs_launcher_detect(xs_launcher_env *e);

/* The id exchange, also a barrier of all ranks. blob: on rank 0 the NUL-terminated text to
 * share (in), on the others where it arrives (out, cap bytes, NUL-terminated; *len its length).
 * Waits at most timeout_s for the others (rank 0) or for rank 0 (the others, plus up to 10 s for
 * rank 0's verdict). XS_ETIMEOUT with one line naming the missing ranks on every rank that took
 * part; XS_EIO on socket or file errors. run_id keeps two runs on one port or path apart. */
xs_status xs_store_exchange_tcp(const char *addr, int port, int rank, int nranks,
                                const char *run_id, char *blob, size_t cap, size_t *len,
                                double timeout_s);
xs_status xs_store_exchange_file(const char *path, int rank, int nranks, const char *run_id,
                                 char *blob, size_t cap, size_t *len, double timeout_s);

/* Make this process rank e->rank of a launched run (e from xs_launcher_detect with nranks > 1):
 * checks -g/--gpus N = e->nranks, picks the GPU (h->count_gpus), makes the id on rank 0
 * (h->make_id; also XS_NCCL_COLL_ID_VAR when the hook set it), exchanges, and sets XS_RANK,
 * XS_NRANKS, XS_DEVICE, XS_NCCL_ID (and the collective id). quiet_stdout: ranks > 0 send
 * stdout to /dev/null. */
xs_status xs_launcher_join(const xs_launcher_env *e, int ngpus, const xs_launch_hooks *h,
                           int quiet_stdout);

/* In the CUDA library (cuda/common/nccl.cu): xs_launch_or_run_with with the CUDA GPU count and an
 * NCCL unique id made here (NCCL loaded and version-checked first). Typical use in a subcommand:
 *     int ec, l = xs_launch_or_run(o.gpus, 0, NULL, &ec);
 *     if (l < 0) return xs_cli_fail();
 *     if (l > 0) return ec ? xs_cli_fail() : 0;
 *     ... this process is rank r of n (xs_rank_env); open windows with XS_TARGET_PEER ... */
int xs_launch_or_run(int ngpus, int argc, char **argv, int *exit_code);

/* ---- benches over ranks (docs/MULTIGPU.md) ---------------------------------------------------- */

/* Second NCCL unique id, for the communicator of the unfused baselines' collectives (the first,
 * XS_NCCL_ID, belongs to the peer windows): the bench launcher's parent puts it into its own
 * environment before the ranks start, so every rank inherits it. */
#define XS_NCCL_COLL_ID_VAR "XS_NCCL_COLL_ID"

/* An id from environment variable `var` (XS_NCCL_ID_BYTES bytes as hex). Unset: XS_OK,
 * *have = 0. Set but malformed: XS_EINVAL, one line naming the variable. */
xs_status xs_rank_env_id(const char *var, unsigned char id[XS_NCCL_ID_BYTES], int *have);

/* An option that cannot be combined with -g/--gpus N of a bench: `set` non-zero when the user
 * gave it; `why` ends the message. */
typedef struct {
    const char *name; /* as the user writes it, e.g. "--peers" */
    int set;
    const char *why;  /* e.g. "with -g the ranks are the peers" */
} xs_gpus_conflict;

/* The -g/--gpus checks every bench makes before launching: gpus in [1, XS_LAUNCH_MAX_RANKS]
 * (gpus_given = 0: no -g, always XS_OK) and none of the n conflicts set. XS_EINVAL with one line:
 *   "bench ep: -g/--gpus 2 cannot be combined with --peers (with -g the ranks are the peers)" */
xs_status xs_gpus_check(const char *cmd, int gpus_given, int gpus, const xs_gpus_conflict *c,
                        int n);

/* In the CUDA library (cuda/common/coll.cu, shared by bench ep|tp|up): xs_launch_or_run with the
 * benches' settings: ranks > 0 write stdout to /dev/null (rank 0 prints the report and writes
 * the files; stderr of every rank passes), and the parent also makes the collective id
 * (XS_NCCL_COLL_ID_VAR). Same return values as xs_launch_or_run. */
int xs_bench_launch(int ngpus, int *exit_code);

/* The NCCL communicator of the baselines' collectives (cuda/common/coll.cu). Collective over the
 * ranks of a launched run (rank and size from xs_rank_env, id from XS_NCCL_COLL_ID_VAR); with no
 * launcher a one-rank communicator. Host functions come from the NCCL library the windows loaded
 * (dlsym). Streams are cudaStream_t passed as void *. Every call returns XS_ENCCL with one line
 * naming the NCCL call on failure. */
typedef struct xs_coll xs_coll;
xs_status xs_coll_open(xs_coll **out);
int xs_coll_rank(const xs_coll *c);
int xs_coll_nranks(const xs_coll *c);
/* One NCCL group: send[i] (send_bytes[i] bytes) to rank send_peer[i], recv[j] from recv_peer[j];
 * zero-byte entries are skipped. Enqueued on stream s. */
xs_status xs_coll_sendrecv(xs_coll *c, const void *const *send, const size_t *send_bytes,
                           const int *send_peer, int nsend, void *const *recv,
                           const size_t *recv_bytes, const int *recv_peer, int nrecv, void *s);
/* ncclAlltoAll of `bytes` per rank pair (send and recv: nranks * bytes); on stream s. */
xs_status xs_coll_alltoall(xs_coll *c, const void *send, void *recv, size_t bytes, void *s);
/* ncclReduceScatter / ncclAllGather on bf16 (sum), counts per rank; on stream s. */
xs_status xs_coll_reduce_scatter_bf16(xs_coll *c, const void *send, void *recv, size_t count,
                                      void *s);
xs_status xs_coll_all_gather(xs_coll *c, const void *send, void *recv, size_t bytes, void *s);
/* Host values, element-wise maximum over the ranks (blocking; n <= 64). */
xs_status xs_coll_max(xs_coll *c, double *v, int n);
/* NCCL's ncclAlltoAll of `bytes` per rank pair: median of 10 after 2 warm-ups, events around each
 * call; collective (every rank calls it), rank 0 prints one `# nccl:` line. *peer_gbps (may be
 * NULL): bytes sent to the peers per GPU per second, (N - 1) x bytes / time, GB/s. */
xs_status xs_coll_alltoall_bw(xs_coll *c, size_t bytes, double *peer_gbps);
/* Host barrier over the ranks (an all-reduce of one value; blocking). */
xs_status xs_coll_barrier(xs_coll *c);
/* abort = 1 after an error: ncclCommAbort only. */
void xs_coll_close(xs_coll *c, int abort);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_LAUNCH_H */
