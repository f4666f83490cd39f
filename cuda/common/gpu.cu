// SPDX-License-Identifier: Apache-2.0
/*
 * gpu.cu - GPU discovery, the report header (text and JSON), and cuBLAS loaded at run time.
 *
 * The tool links the CUDA runtime statically and must start (and run its CPU subcommands) on a
 * machine with no driver: nothing here touches CUDA before a function is called, and cuBLAS is
 * found with dlopen only when a benchmark asks for it.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "libpath.h"
#include "nvtx_launch.h"
#include "xstage_bench.h" /* xs_json_string */
#include "xstage_cli.h"
#include "xstage_cuda.h"
#include "xstage_exchange.h"
#include "xstage_launch.h"

/* ---- discovery ---------------------------------------------------------------------------- */

extern "C" xs_status xs_gpu_count(int *n)
{
    *n = 0;
    cudaError_t e = cudaGetDeviceCount(n);
    if (e != cudaSuccess) {
        *n = 0;
        return xs_seterr(XS_ECUDA, "no CUDA GPU: cudaGetDeviceCount: %s", cudaGetErrorString(e));
    }
    return XS_OK;
}

extern "C" xs_status xs_gpu_open(int device, xs_gpu_info *info)
{
    memset(info, 0, sizeof *info);
    int n = 0;
    XS_TRY(xs_gpu_count(&n));
    if (n == 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        return xs_seterr(XS_ECUDA, "no CUDA GPU: no device is visible%s%s%s", vis ? " (CUDA_"
                         "VISIBLE_DEVICES='" : "", vis ? vis : "", vis ? "')" : "");
    }
    device = xs_rank_device(device); /* a launched rank uses the GPU the launcher gave it */
    if (device < 0 || device >= n)
        return xs_seterr(XS_ECUDA, "GPU %d does not exist: %d GPU%s visible (ordinals 0..%d)",
                         device, n, n == 1 ? " is" : "s are", n - 1);
    XS_CU(cudaSetDevice(device));
    cudaDeviceProp p;
    XS_CU(cudaGetDeviceProperties(&p, device));
    info->device = device;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->sm_count = p.multiProcessorCount;
    XS_CU(cudaDeviceGetAttribute(&info->sm_clock_khz, cudaDevAttrClockRate, device));
    XS_CU(cudaDeviceGetAttribute(&info->mem_clock_khz, cudaDevAttrMemoryClockRate, device));
    info->l2_bytes = (size_t)p.l2CacheSize;
    info->mem_bytes = p.totalGlobalMem;
    info->smem_per_sm = p.sharedMemPerMultiprocessor;
    info->smem_optin = p.sharedMemPerBlockOptin;
    XS_CU(cudaDriverGetVersion(&info->driver_version));
    XS_CU(cudaRuntimeGetVersion(&info->runtime_version));
    info->nccl_version = xs_nccl_loaded_version();
    if (cudaDeviceGetPCIBusId(info->pci_bus, (int)sizeof info->pci_bus, device) != cudaSuccess)
        snprintf(info->pci_bus, sizeof info->pci_bus, "?");
    return XS_OK;
}

/* ---- report header ------------------------------------------------------------------------ */

/* The kernel module's version ("580.95.05") from /proc, or "" when it cannot be read. */
static void driver_release(char *out, size_t cap)
{
    out[0] = 0;
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f)
        return;
    char line[512];
    if (fgets(line, sizeof line, f)) {
        /* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu ..." or
         * "... Open Kernel Module for x86_64  580.159.04  Release Build ...": the first token
         * after "Kernel Module" that starts with a digit */
        const char *k = strstr(line, "Kernel Module");
        if (k) {
            k += strlen("Kernel Module");
            while (*k && !(k[0] >= '0' && k[0] <= '9' && (k[-1] == ' ' || k[-1] == '\t')))
                k++;
            size_t n = 0;
            while (k[n] && k[n] != ' ' && k[n] != '\n' && n + 1 < cap)
                n++;
            memcpy(out, k, n);
            out[n] = 0;
        }
    }
    fclose(f);
}

static void iso_date(char *out, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int plain_arg(const char *a)
{
    if (!*a)
        return 0;
    for (; *a; a++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+-@%", *a))
            return 0;
    return 1;
}

/* The command line as a shell would need it typed (quoted where needed). The tool records its
 * whole command line at start (xs_cli_set_command): a subcommand's argv starts at its own name,
 * so that one is preferred when it is there. */
static void print_command(FILE *f, int argc, char **argv)
{
    int gargc = 0;
    char **gargv = xs_cli_command(&gargc);
    if (gargv && gargc > 0) {
        argc = gargc;
        argv = gargv;
    }
    for (int i = 0; i < argc && argv && argv[i]; i++) {
        if (i)
            fputc(' ', f);
        if (plain_arg(argv[i])) {
            fputs(argv[i], f);
            continue;
        }
        fputc('\'', f);
        for (const char *c = argv[i]; *c; c++) {
            if (*c == '\'')
                fputs("'\\''", f);
            else
                fputc(*c, f);
        }
        fputc('\'', f);
    }
}

static int nccl_version_now(const xs_gpu_info *info)
{
    int v = xs_nccl_loaded_version();
    return v ? v : info->nccl_version;
}

extern "C" void xs_gpu_report_header(FILE *f, const xs_gpu_info *info, int argc, char **argv)
{
    char drv[64], date[40], host[128] = "?";
    driver_release(drv, sizeof drv);
    iso_date(date, sizeof date);
    gethostname(host, sizeof host - 1);
    fprintf(f, "# device %d: %s (PCI %s), %d SMs, SM clock %d MHz, memory clock %d MHz\n",
            info->device, info->name, info->pci_bus, info->sm_count, info->sm_clock_khz / 1000,
            info->mem_clock_khz / 1000);
    fprintf(f, "# L2 %.1f MiB, memory %.1f GiB, shared memory %zu KiB per SM (%zu KiB per block "
            "opt-in)\n", info->l2_bytes / 1048576.0, info->mem_bytes / 1073741824.0,
            info->smem_per_sm / 1024, info->smem_optin / 1024);
    fprintf(f, "# driver %s%sCUDA %d.%d, CUDA runtime %d.%d", drv, drv[0] ? " for " : "",
            info->driver_version / 1000, info->driver_version % 1000 / 10,
            info->runtime_version / 1000, info->runtime_version % 1000 / 10);
    int nv = nccl_version_now(info);
    if (nv)
        fprintf(f, ", NCCL %d.%d.%d (%s)", nv / 10000, nv / 100 % 100, nv % 100,
                xs_nccl_lib_path());
    else
        fprintf(f, ", NCCL not loaded");
    fprintf(f, "\n# host %s, date %s\n# command: ", host, date);
    print_command(f, argc, argv);
    fputc('\n', f);
}

extern "C" void xs_gpu_json_fields(FILE *f, const xs_gpu_info *info, int argc, char **argv)
{
    char drv[64], date[40], host[128] = "?";
    driver_release(drv, sizeof drv);
    iso_date(date, sizeof date);
    gethostname(host, sizeof host - 1);
    fputs("\"device\": ", f);
    xs_json_string(f, info->name);
    fprintf(f, ", \"device_ordinal\": %d, \"pci_bus\": ", info->device);
    xs_json_string(f, info->pci_bus);
    fprintf(f, ", \"sm_count\": %d, \"sm_clock_mhz\": %d, \"mem_clock_mhz\": %d, "
            "\"l2_bytes\": %zu, \"mem_bytes\": %zu, \"smem_per_sm\": %zu, \"smem_optin\": %zu, "
            "\"driver_version\": %d, \"driver_release\": ", info->sm_count,
            info->sm_clock_khz / 1000, info->mem_clock_khz / 1000, info->l2_bytes,
            info->mem_bytes, info->smem_per_sm, info->smem_optin, info->driver_version);
    xs_json_string(f, drv);
    fprintf(f, ", \"runtime_version\": %d, \"nccl_version\": %d, \"host\": ",
            info->runtime_version, nccl_version_now(info));
    xs_json_string(f, host);
    fputs(", \"date\": ", f);
    xs_json_string(f, date);
    /* the command as one string, quoted the way the text header prints it */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (m) {
        print_command(m, argc, argv);
        fclose(m);
    }
    fputs(", \"command\": ", f);
    xs_json_string(f, buf ? buf : "");
    free(buf);
}

/* ---- cuBLAS, loaded at run time ------------------------------------------------------------ */

typedef cublasStatus_t (*fn_create)(cublasHandle_t *);
typedef cublasStatus_t (*fn_destroy)(cublasHandle_t);
typedef cublasStatus_t (*fn_set_stream)(cublasHandle_t, cudaStream_t);
typedef const char *(*fn_status_string)(cublasStatus_t);
typedef cublasStatus_t (*fn_gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                     int, int, const void *, const void *, cudaDataType, int,
                                     const void *, cudaDataType, int, const void *, void *,
                                     cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
typedef cublasStatus_t (*fn_gemm_sb)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                     int, int, const void *, const void *, cudaDataType, int,
                                     long long, const void *, cudaDataType, int, long long,
                                     const void *, void *, cudaDataType, int, long long, int,
                                     cublasComputeType_t, cublasGemmAlgo_t);

typedef cublasStatus_t (*fn_gemm_grouped)(cublasHandle_t, const cublasOperation_t *,
                                          const cublasOperation_t *, const int *, const int *,
                                          const int *, const void *, const void *const *,
                                          cudaDataType_t, const int *, const void *const *,
                                          cudaDataType_t, const int *, const void *,
                                          void *const *, cudaDataType_t, const int *, int,
                                          const int *, cublasComputeType_t);

static struct {
    void *lib;
    char path[XS_LIBPATH_MAX];
    fn_gemm_grouped gemm_grouped; /* cuBLAS 12.5+; NULL: older (optional) */
    fn_create create;
    fn_destroy destroy;
    fn_set_stream set_stream;
    fn_status_string status_string;
    fn_gemm_ex gemm;
    fn_gemm_sb gemm_sb;
} cub;

struct xs_cublas {
    cublasHandle_t h;
    int simt; /* XS_CUBLAS_SIMT: the plain reference kernel below instead of cuBLAS */
};

/* XS_CUBLAS_SIMT=1 replaces cuBLAS by a plain SIMT kernel (one thread per output, fp32
 * accumulation in k order). It exists for compute-sanitizer racecheck: cuBLAS's Hopper kernels
 * (nvjet_sm90_*: TMA and mbarrier pipelines) either draw thousands of hazard reports that are not
 * ours or, excluded by name, end in "failed to handle a hardware exception", so under
 * racecheck the tests and benches compute their references and baselines with this kernel. Its
 * results agree with cuBLAS within the bf16 tolerances every caller uses; its speed means
 * nothing. */
xs_status xs_event_wait(cudaEvent_t ev, double timeout_s, const char *what)
{
    const double t0 = xs_now_s();
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess)
            return XS_OK;
        if (e != cudaErrorNotReady)
            return xs_seterr(XS_ECUDA, "%s: %s", what, cudaGetErrorString(e));
        if (xs_now_s() - t0 > timeout_s)
            return xs_seterr(XS_ETIMEOUT, "%s did not finish within %.0f s", what, timeout_s);
        usleep(20);
    }
}

static int cublas_simt_requested(void)
{
    const char *e = getenv("XS_CUBLAS_SIMT");
    return e && *e && strcmp(e, "0") != 0;
}

__global__ void simt_gemm_kernel(int m, int n, int k, const __nv_bfloat16 *a, long long sa,
                                 const __nv_bfloat16 *b, long long sb, int b_trans, void *c,
                                 long long sc, int c_f32)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= m || j >= n)
        return;
    const __nv_bfloat16 *ai = a + sa * blockIdx.z + (size_t)i * k;
    const __nv_bfloat16 *bz = b + sb * blockIdx.z;
    float acc = 0.0f;
    for (int p = 0; p < k; p++) {
        float bv = __bfloat162float(b_trans ? bz[(size_t)j * k + p] : bz[(size_t)p * n + j]);
        acc += __bfloat162float(ai[p]) * bv;
    }
    size_t o = sc * blockIdx.z + (size_t)i * n + j;
    if (c_f32)
        ((float *)c)[o] = acc;
    else
        ((__nv_bfloat16 *)c)[o] = __float2bfloat16(acc);
}

static xs_status simt_gemm(void *stream, int m, int n, int k, const void *a, long long sa,
                           const void *b, long long sb, int b_trans, void *c, long long sc,
                           int c_f32, int batch)
{
    if (batch > 65535 || (m + 15) / 16 > 65535)
        return xs_seterr(XS_EINVAL, "XS_CUBLAS_SIMT GEMM m=%d batch=%d: too large for the "
                         "reference kernel's grid", m, batch);
    dim3 blk(16, 16), grd((unsigned)((n + 15) / 16), (unsigned)((m + 15) / 16), (unsigned)batch);
    XS_NVTX_LAUNCH("simt_gemm_kernel", simt_gemm_kernel<<<grd, blk, 0, (cudaStream_t)stream>>>(
                                           m, n, k, (const __nv_bfloat16 *)a, sa,
                                           (const __nv_bfloat16 *)b, sb, b_trans, c, sc, c_f32));
    XS_CU(cudaGetLastError());
    return XS_OK;
}

/* Try one candidate; on failure keep dlerror's text in err. */
static void *try_open(const char *path, char *err, size_t cap)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(err, cap, "%s", e ? e : path);
    }
    return h;
}

static xs_status cublas_load(void)
{
    if (cub.lib)
        return XS_OK;
    char err[512] = "";
    void *h = NULL;
    const char *env = getenv("XS_CUBLAS_LIB");
    if (env && *env) {
        h = try_open(env, err, sizeof err);
        if (!h)
            return xs_seterr(XS_EUNSUPPORTED, "cuBLAS cannot be loaded from XS_CUBLAS_LIB=%s: %s",
                             env, err);
        snprintf(cub.path, sizeof cub.path, "%s", env);
    } else {
        /* src/libpath.h: the active Python environment's pip wheels (nvidia-cublas in the cu13
         * layout, nvidia-cublas-cu12), then the system loader, then the CUDA toolkit */
        static const char *const tails[] = {"nvidia/cu13/lib/libcublas.so.13",
                                            "nvidia/cublas/lib/libcublas.so.1[23]"};
        static const char *const names[] = {"libcublas.so.13", "libcublas.so.12"};
        static char paths[32][XS_LIBPATH_MAX];
        int n = xs_lib_candidates(tails, 2, names, 2, paths, 32);
        for (int i = 0; !h && i < n; i++)
            if ((h = try_open(paths[i], err, sizeof err)))
                snprintf(cub.path, sizeof cub.path, "%s", paths[i]);
        if (!h)
            return xs_seterr(XS_EUNSUPPORTED, "cuBLAS not found (tried %d places: the active "
                             "Python environment's nvidia-cublas wheel, libcublas.so.13 and .12 "
                             "through the system loader and the CUDA toolkit's lib64; set "
                             "XS_CUBLAS_LIB, docs/INSTALL.md): %s", n, err);
    }
    cub.create = (fn_create)dlsym(h, "cublasCreate_v2");
    cub.destroy = (fn_destroy)dlsym(h, "cublasDestroy_v2");
    cub.set_stream = (fn_set_stream)dlsym(h, "cublasSetStream_v2");
    cub.status_string = (fn_status_string)dlsym(h, "cublasGetStatusString");
    cub.gemm = (fn_gemm_ex)dlsym(h, "cublasGemmEx");
    cub.gemm_sb = (fn_gemm_sb)dlsym(h, "cublasGemmStridedBatchedEx");
    cub.gemm_grouped = (fn_gemm_grouped)dlsym(h, "cublasGemmGroupedBatchedEx");
    if (!cub.create || !cub.destroy || !cub.set_stream || !cub.gemm || !cub.gemm_sb) {
        char path[XS_LIBPATH_MAX];
        snprintf(path, sizeof path, "%s", cub.path);
        dlclose(h);
        memset(&cub, 0, sizeof cub);
        return xs_seterr(XS_EUNSUPPORTED, "%s lacks cublasGemmEx/cublasGemmStridedBatchedEx "
                         "(cuBLAS 12 or newer is needed)", path);
    }
    cub.lib = h;
    return XS_OK;
}

static const char *cublas_str(cublasStatus_t s)
{
    if (cub.status_string)
        return cub.status_string(s);
    static char buf[32];
    snprintf(buf, sizeof buf, "cuBLAS status %d", (int)s);
    return buf;
}

extern "C" xs_status xs_cublas_open(xs_cublas **out)
{
    *out = NULL;
    if (cublas_simt_requested()) {
        xs_cublas *c = (xs_cublas *)calloc(1, sizeof *c);
        if (!c)
            return xs_seterr(XS_ENOMEM, "out of host memory");
        c->simt = 1;
        *out = c;
        return XS_OK;
    }
    XS_TRY(cublas_load());
    xs_cublas *c = (xs_cublas *)calloc(1, sizeof *c);
    if (!c)
        return xs_seterr(XS_ENOMEM, "out of host memory");
    cublasStatus_t s = cub.create(&c->h);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(c);
        return xs_seterr(XS_ECUDA, "cublasCreate (%s): %s", cub.path, cublas_str(s));
    }
    *out = c;
    return XS_OK;
}

extern "C" void xs_cublas_close(xs_cublas *h)
{
    if (!h)
        return;
    if (h->h && cub.destroy)
        cub.destroy(h->h);
    free(h);
}

/* Row-major C[m,n] = A[m,k] B is column-major C^T[n,m] = B^T A^T: swap the operands and the
 * m/n roles. B row-major [k,n] is column-major [n,k] with ld n (no transpose); B given as [n,k]
 * (b_trans) is column-major [k,n] with ld k, transposed. */
static xs_status gemm_check(int m, int n, int k, const void *a, const void *b, const void *c,
                            int batch)
{
    if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
        return xs_seterr(XS_EINVAL, "GEMM m=%d n=%d k=%d batch=%d: every size must be positive",
                         m, n, k, batch);
    if (!a || !b || !c)
        return xs_seterr(XS_EINVAL, "GEMM m=%d n=%d k=%d: null operand", m, n, k);
    return XS_OK;
}

extern "C" xs_status xs_cublas_gemm_bf16(xs_cublas *h, void *stream, int m, int n, int k,
                                         const void *a, const void *b, int b_trans, void *c,
                                         int c_f32)
{
    XS_TRY(gemm_check(m, n, k, a, b, c, 1));
    if (h->simt)
        return simt_gemm(stream, m, n, k, a, 0, b, 0, b_trans, c, 0, c_f32, 1);
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t s = cub.set_stream(h->h, (cudaStream_t)stream);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cub.gemm(h->h, b_trans ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b,
                     CUDA_R_16BF, b_trans ? k : n, a, CUDA_R_16BF, k, &beta, c,
                     c_f32 ? CUDA_R_32F : CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return xs_seterr(XS_ECUDA, "cublasGemmEx(m=%d, n=%d, k=%d, bf16 -> %s): %s", m, n, k,
                         c_f32 ? "fp32" : "bf16", cublas_str(s));
    return XS_OK;
}

extern "C" xs_status xs_cublas_gemm_bf16_batched(xs_cublas *h, void *stream, int m, int n, int k,
                                                 const void *a, long long stride_a,
                                                 const void *b, long long stride_b, int b_trans,
                                                 void *c, long long stride_c, int c_f32,
                                                 int batch)
{
    XS_TRY(gemm_check(m, n, k, a, b, c, batch));
    if (h->simt)
        return simt_gemm(stream, m, n, k, a, stride_a, b, stride_b, b_trans, c, stride_c, c_f32,
                         batch);
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t s = cub.set_stream(h->h, (cudaStream_t)stream);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cub.gemm_sb(h->h, b_trans ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                        b, CUDA_R_16BF, b_trans ? k : n, stride_b, a, CUDA_R_16BF, k, stride_a,
                        &beta, c, c_f32 ? CUDA_R_32F : CUDA_R_16BF, n, stride_c, batch,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return xs_seterr(XS_ECUDA, "cublasGemmStridedBatchedEx(m=%d, n=%d, k=%d, batch=%d, bf16 "
                         "-> %s): %s", m, n, k, batch, c_f32 ? "fp32" : "bf16", cublas_str(s));
    return XS_OK;
}

extern "C" int xs_cublas_has_grouped(const xs_cublas *h)
{
    return h && !h->simt && cub.gemm_grouped != NULL;
}

extern "C" xs_status xs_cublas_gemm_bf16_grouped(xs_cublas *h, void *stream, int groups,
                                                 const int *m, int n, int k,
                                                 const void *const *a, const void *const *b,
                                                 void *const *c)
{
    enum { MAXG = XS_CUBLAS_MAX_GROUPS };
    if (!xs_cublas_has_grouped(h))
        return xs_seterr(XS_EUNSUPPORTED, "grouped GEMM: %s", h && h->simt
                         ? "not under XS_CUBLAS_SIMT" : "cublasGemmGroupedBatchedEx missing "
                         "(cuBLAS 12.5 or newer)");
    if (groups < 1 || groups > MAXG || n <= 0 || k <= 0 || !a || !b || !c)
        return xs_seterr(XS_EINVAL, "grouped GEMM: %d groups (1..%d), n=%d k=%d (positive), "
                         "pointer arrays given", groups, MAXG, n, k);
    static cublasOperation_t ta[MAXG], tb[MAXG];
    static int nn[MAXG], kk[MAXG], ones[MAXG];
    static float alpha[MAXG], beta[MAXG];
    for (int g = 0; g < groups; g++) {
        if (m[g] <= 0)
            return xs_seterr(XS_EINVAL, "grouped GEMM: group %d has m=%d", g, m[g]);
        ta[g] = CUBLAS_OP_T, tb[g] = CUBLAS_OP_N;
        nn[g] = n, kk[g] = k, ones[g] = 1, alpha[g] = 1.0f, beta[g] = 0.0f;
    }
    /* row-major C_g = A_g B_g^T is column-major C_g^T = B_g^T' A_g^T: B_g ([n, k] row-major =
     * [k, n] column-major, transposed) first, n and m swapped, every leading dimension k, n */
    cublasStatus_t s = cub.set_stream(h->h, (cudaStream_t)stream);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cub.gemm_grouped(h->h, ta, tb, nn, m, kk, alpha, b, CUDA_R_16BF, kk, a, CUDA_R_16BF,
                             kk, beta, c, CUDA_R_16BF, nn, groups, ones, CUBLAS_COMPUTE_32F);
    if (s != CUBLAS_STATUS_SUCCESS)
        return xs_seterr(XS_ECUDA, "cublasGemmGroupedBatchedEx(%d groups, n=%d, k=%d, bf16): %s",
                         groups, n, k, cublas_str(s));
    return XS_OK;
}
