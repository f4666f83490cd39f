// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_cuda.h - host-side C API of the CUDA side: GPU discovery, the report header, error
 * checks, and cuBLAS loaded at run time.
 *
 * Everything here is callable from C and C++ (.cu) files. The tool links the CUDA runtime
 * statically and loads libcublas and libnccl with dlopen, so the same binary starts, and its CPU
 * subcommands work, on a machine with no GPU, no driver and no CUDA libraries.
 */
#ifndef XSTAGE_CUDA_H
#define XSTAGE_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "xstage.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int device;              /* CUDA ordinal */
    char name[256];          /* e.g. "NVIDIA H200" */
    int sm_count;
    int sm_clock_khz;        /* cudaDevAttrClockRate */
    int mem_clock_khz;
    size_t l2_bytes;
    size_t mem_bytes;
    size_t smem_per_sm;      /* shared memory per SM, bytes */
    size_t smem_optin;       /* max dynamic shared memory per block after opt-in */
    int driver_version;      /* cudaDriverGetVersion, e.g. 13000 */
    int runtime_version;     /* cudaRuntimeGetVersion */
    int nccl_version;        /* 0 until NCCL has been loaded */
    char pci_bus[32];
} xs_gpu_info;

/* Select device `device` and fill *info. Fails (XS_ECUDA) with one line such as
 * "no CUDA GPU: cudaGetDeviceCount: CUDA driver version is insufficient" when there is none. */
xs_status xs_gpu_open(int device, xs_gpu_info *info);
/* Report header: '#' lines with device, SMs, clocks, driver, CUDA, NCCL, date and command. */
void xs_gpu_report_header(FILE *f, const xs_gpu_info *info, int argc, char **argv);
/* The same facts as a JSON object fragment ("device": ..., ...) without braces, for results. */
void xs_gpu_json_fields(FILE *f, const xs_gpu_info *info, int argc, char **argv);

/* cuBLAS, loaded on first use (libcublas.so.13 or .12, XS_CUBLAS_LIB overrides). The handle is
 * opaque to C. */
typedef struct xs_cublas xs_cublas;
xs_status xs_cublas_open(xs_cublas **out);
void xs_cublas_close(xs_cublas *h);
/* Row-major bf16 GEMM with fp32 accumulation: C[m,n] = A[m,k] * B[k,n] (B given as [n,k] when
 * b_trans, i.e. C = A * B^T), C in bf16 (c_f32 = 0) or fp32 (c_f32 = 1). */
xs_status xs_cublas_gemm_bf16(xs_cublas *h, void *stream, int m, int n, int k, const void *a,
                              const void *b, int b_trans, void *c, int c_f32);
/* Strided batched form of the same. */
xs_status xs_cublas_gemm_bf16_batched(xs_cublas *h, void *stream, int m, int n, int k,
                                      const void *a, long long stride_a, const void *b,
                                      long long stride_b, int b_trans, void *c,
                                      long long stride_c, int c_f32, int batch);
/* Grouped form, one call (cublasGemmGroupedBatchedEx): for g < groups, C_g[m[g], n] =
 * A_g[m[g], k] * B_g^T (B_g given as [n, k]), bf16 in and out, fp32 accumulation. a, b, c:
 * device arrays of `groups` device pointers; m: a host array. XS_EUNSUPPORTED (one line) when
 * the loaded cuBLAS lacks the call (before 12.5) or under XS_CUBLAS_SIMT; XS_EINVAL beyond
 * XS_CUBLAS_MAX_GROUPS groups. Not reentrant (its host arrays are static). */
#define XS_CUBLAS_MAX_GROUPS 1024
xs_status xs_cublas_gemm_bf16_grouped(xs_cublas *h, void *stream, int groups, const int *m, int n,
                                      int k, const void *const *a, const void *const *b,
                                      void *const *c);
/* 1 when xs_cublas_gemm_bf16_grouped can run on h. */
int xs_cublas_has_grouped(const xs_cublas *h);

#ifdef __cplusplus
}
#endif

/* ---- checks (C++/CUDA translation units only) ------------------------------------------------ */
#ifdef __CUDACC__
#include <cuda_runtime.h>
#include <stdlib.h>
/* Wait for an event with a bound: a kernel's own waits are bounded, this is the host's backstop
 * (a schedule with huge gaps, a hung library kernel). XS_ETIMEOUT "WHAT did not finish within
 * N s", or XS_ECUDA with the error an event query returned. */
xs_status xs_event_wait(cudaEvent_t ev, double timeout_s, const char *what);
/* Library code: turn a CUDA error into an xs_status with the failing call's text. */
#define XS_CU(call)                                                                           \
    do {                                                                                      \
        cudaError_t xs_cu_e_ = (call);                                                        \
        if (xs_cu_e_ != cudaSuccess) {                                                        \
            xs_errwhere_set(__FILE__, __LINE__);                                              \
            return xs_seterr(XS_ECUDA, "%s: %s", #call, cudaGetErrorString(xs_cu_e_));        \
        }                                                                                     \
    } while (0)
/* After a launch: launch errors and (with sync) execution errors. */
#define XS_CU_LAUNCH() XS_CU(cudaGetLastError())
/* Library code with cleanup: on a CUDA error set st (an xs_status) to XS_ECUDA with the failing
 * call's text and jump to label, where the function releases what it holds. */
#define XS_CU_GOTO(st, label, call)                                                           \
    do {                                                                                      \
        cudaError_t xs_cu_e_ = (call);                                                        \
        if (xs_cu_e_ != cudaSuccess) {                                                        \
            xs_errwhere_set(__FILE__, __LINE__);                                              \
            (st) = xs_seterr(XS_ECUDA, "%s: %s", #call, cudaGetErrorString(xs_cu_e_));        \
            goto label;                                                                       \
        }                                                                                     \
    } while (0)
/* Library steps that run to the end whatever fails (set-up and tear-down in one sequence): keep
 * the first error in st (an xs_status) and carry on; the caller skips work once st != XS_OK. */
#define XS_CU_FIRST(st, call)                                                                 \
    do {                                                                                      \
        cudaError_t xs_cu_e_ = (call);                                                        \
        if (xs_cu_e_ != cudaSuccess && (st) == XS_OK) {                                       \
            xs_errwhere_set(__FILE__, __LINE__);                                              \
            (st) = xs_seterr(XS_ECUDA, "%s: %s", #call, cudaGetErrorString(xs_cu_e_));        \
        }                                                                                     \
    } while (0)
#endif

/* Tools and benchmarks: print the failing call, file and line, and exit non-zero. Works on both
 * xs_status calls and (in .cu files) cudaError_t calls via XS_CHECK_CU. */
#define XS_CHECK(call)                                                                        \
    do {                                                                                      \
        xs_status xs_chk_s_ = (call);                                                         \
        if (xs_chk_s_ != XS_OK) {                                                             \
            fprintf(stderr, "xstage: error: %s (%s failed at %s:%d)\n", xs_errmsg(), #call,    \
                    __FILE__, __LINE__);                                                      \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)
#ifdef __CUDACC__
#define XS_CHECK_CU(call)                                                                     \
    do {                                                                                      \
        cudaError_t xs_chk_e_ = (call);                                                       \
        if (xs_chk_e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "xstage: error: %s: %s (%s:%d)\n", #call,                         \
                    cudaGetErrorString(xs_chk_e_), __FILE__, __LINE__);                       \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)
#endif

#endif /* XSTAGE_CUDA_H */
