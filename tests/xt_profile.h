// SPDX-License-Identifier: Apache-2.0
/*
 * xt_profile.h - the provisional PCIe profile of docs/MODEL.md (the embedded default before the
 * H200 calibration), for tests whose expectations must not move when the embedded default is
 * recalibrated.
 */
#ifndef XT_PROFILE_H
#define XT_PROFILE_H

#include "xstage.h"

static inline xs_profile xt_provisional_profile(void)
{
    xs_profile p;
    xs_profile_default(&p);
    p.issue_bytes_per_ns = 41;
    p.issue_overhead_ns = 100;
    p.drain_bytes_per_ns = 52.5;
    p.capacity_bytes = 2359296;
    p.capacity_bytes_per_producer = 18432;
    p.chunk_bytes = 2048;
    p.queue_bytes_per_producer = 0;
    p.reserve_bytes_per_producer = 0;
    p.arbitration_skew = 0;
    p.barrier_ns = 0;
    return p;
}

#endif
