// SPDX-License-Identifier: Apache-2.0
/*
 * device_header.cu - include/xstage_device.cuh compiles alone (only include/ on the path) and
 * instantiates every primitive a user kernel may call; the Makefile builds it for sm_80 and
 * sm_90a (`make all`). The bulk (TMA) stores only where __CUDA_ARCH__ >= 900. Nothing runs.
 * Where the core's trace header is present, it is included after the device header: both define
 * xs_trace_record under one guard, and a user's .cu includes both.
 */
#include "xstage_device.cuh"
#if __has_include("xstage_trace.h")
#include "xstage_trace.h"
#endif

static_assert(sizeof(xs_trace_record) == 56, "xs_trace_record: 56 bytes");
static_assert(offsetof(xs_trace_record, bytes) == 16, "xs_trace_record: bytes at 16");
static_assert(offsetof(xs_trace_record, work_end_ns) == 48, "xs_trace_record: work_end at 48");

__global__ void device_header_kernel(char *dst, unsigned long long *link, xs_devstatus *st,
                                     xs_trace_buf tb)
{
    xs_trace_cta tc = xs_trace_cta_begin();
    unsigned long long next = 0, due = 0;
    double cdue = 0;
    int stop = 0;
    if (threadIdx.x == 0) {
        xs_trace_work_start(&tc);
        xs_spin_cycles(100);
        xs_trace_work_end(&tc);
        xs_link_pace(link, xs_link_need_ns(4096.0, xs_pace_ns_per_byte(50.0, 0.9)), 2000,
                     1000000, st, 1u);
        xs_courier_pace(&next, 4096.0, 0.02, 1000000, st, 2u, &stop);
        xs_spin_until(xs_bucket_take(&due, 4096.0, 40.0));
        cdue = xs_bucket_credit_wait(cdue, xs_globaltimer(), 100.0) + 10.0;
        xs_trace_issue_start(&tc);
    }
    __syncthreads();
    xs_burst_pattern(dst, 256, 7u, (uint64_t)blockIdx.x * 256);
    xs_st16v(dst + 16 * threadIdx.x, make_uint4(1, 2, 3, (unsigned)cdue));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ uint4 sbuf[128];
    sbuf[threadIdx.x] = make_uint4(threadIdx.x, 0, 0, 0);
    xs_bulk_fence_smem();
    __syncthreads();
    if (threadIdx.x == 0) {
        xs_bulk_s2g(dst, sbuf, sizeof(sbuf));
        xs_bulk_commit();
        xs_bulk_wait_read<0>();
        xs_bulk_wait_done();
    }
#endif
    xs_signal_cta((uint64_t *)link + 1, 1);
    if (threadIdx.x == 0) {
        xs_wait_geq((const uint64_t *)link + 1, 1, 1000);
        xs_trace_issue_end(tb, &tc, 4096);
        xs_trace_put(tb, xs_trace_record{});
    }
}
