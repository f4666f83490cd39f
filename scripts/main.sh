#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The main job. Without a GPU: the model on the embedded profile (criterion, prediction with and
# without producer drift, a plan for the expert-wave example). With a GPU and a CUDA build: first a
# quick calibration of the host path, then the same on the calibrated profile, and the original
# and planned schedules replayed on the GPU.
set -eu
build=${1:-build}
X="$build/xstage"
prof=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
    ! "$X" calibrate --help 2>&1 | grep -q 'built without nvcc'; then
    echo "== GPU found: quick calibration of the host (PCIe) path"
    "$X" calibrate --target host --quick --out "$build/profile_host.json"
    prof="--profile $build/profile_host.json"
else
    echo "== no GPU (or no CUDA build): the embedded H200 profile"
fi
echo
echo "== criterion for one expert wave: 132 producers x 32 KiB, 100 us of work between waves"
"$X" criterion --producers 132 --bytes 32K --gap 100us $prof
echo
echo "== drift: the same bursts, free-running and synchronised"
"$X" predict --schedule examples/drift.csv $prof
"$X" predict --schedule examples/drift.csv --sync $prof | tail -n 2
echo
echo "== plan for the expert-wave schedule"
"$X" plan --schedule examples/ep_wave.csv --out "$build/ep_wave.plan.csv" $prof
if [ -n "$prof" ]; then
    echo
    echo "== replay on the GPU: original, then planned"
    "$X" replay --schedule examples/ep_wave.csv --target host $prof
    "$X" replay --schedule "$build/ep_wave.plan.csv" --target host $prof
fi
