#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_grid.sh - the declared grids of issue 33 (item 4; include/xstage_grid.h) on one H200:
# builds the tool (make -j tool; a no-op when it is up to date), then
#   bench tp --grid declared [--rows TP_ROWS]  op x model x m x peers, 81 rows
#                                               -> $OUT/tp_grid_<A>_<B>.csv
#   bench up --grid declared [--rows UP_ROWS]  seq x heads x causal x peers, 60 rows
#                                               -> $OUT/up_grid_<A>_<B>.csv
#   bench ep --grid declared [--rows EP_ROWS]  model x routing x tokens x peers, 192 rows
#                                               -> $OUT/ep_grid_<A>_<B>.csv
# with the bench defaults (-n 5 timed rounds after -w 1, every run verified). Every declared
# point of the slice is a row: its columns grid_row and status say ok, skipped: <why> (cannot
# run here: a shape the kernel refuses, more memory than is free, out of device memory),
# failed: <error>, or not run: --max-time spent (rerun those rows with --rows). Everything is
# logged to $OUT/grid.log. EP checks each row's footprint first (xs_grid_ep_bytes: device
# memory against cudaMemGetInfo, pinned and pageable host memory against MemAvailable).
#
# One device call runs at most 10 minutes: split the grids over calls with GRID and the row
# slices. Expected times from the shapes (xs_grid_tp_est_s / xs_grid_up_est_s: the bench's runs
# per row at the slower of compute and link, the CPU's checks, a setup fitted to the runs of
# bench/results/overlap/; tests/test_grid.c prints them): TP all 81 rows ~195 s (rows 0:27
# gemm_rs ~46 s, 27:54 ag_gemm ~56 s, 54:81 mlp ~91 s; the worst rows, llama3-405b m=16384,
# 9-21 s each); UP all 60 rows ~66 s (rows 48:60, seq 65536, ~41 s of it; worst row ~6 s).
# The estimates are fitted on mid-size rows only: allow twice as much. Each bench stops starting
# rows after its --max-time (TP_MAX_TIME, UP_MAX_TIME, default 400 s) and is killed 90 s later;
# the build step (make -j tool, a no-op when up to date) is bounded by BUILD_LIMIT (480 s), so a
# call on a fresh machine should run the build with the short grid (GRID=up) only.
#
# EP (xs_grid_ep_est_s: 100 runs a row at compute + twice the remote bytes at R, 47 checks of
# every combine byte on the GPU at 20 GB/s (xs_moe_verify reads every row where it landed, the
# host windows over PCIe; 20 GB/s is an estimate, not yet measured), the host-side model; fitted
# to the 48 points of bench/results/ep/sweep.csv, whose checks ran on the CPU and which predate
# the overlapped variant and its verified pilots, so this is the least certain estimate): all
# 192 rows ~462 s, of it the runs ~237 s, the host-side model and set-up ~114 s, the checks
# ~111 s. Per model (24 rows: balanced then zipf, each T = 256, 1024, 4096, 16384 x peers 2, 4,
# 8; the T = 16384 rows are three quarters of each):
#   rows   0:24  deepseek-v2-lite    ~29 s     rows  96:120 qwen1.5-moe-a2.7b   ~20 s
#   rows  24:48  deepseek-v3        ~141 s     rows 120:144 qwen2-57b-a14b      ~75 s
#   rows  48:72  mixtral-8x7b        ~47 s     rows 144:168 qwen3-30b-a3b       ~36 s
#   rows  72:96  olmoe-1b-7b         ~37 s     rows 168:192 qwen3-235b-a22b     ~77 s
# worst row deepseek-v3 T=16384 N=8 ~19 s. EP stops starting rows after EP_MAX_TIME (default
# 360 s) and is killed 180 s later. On a fresh machine run the build alone first (GRID=none), so
# that an EP call's 360 + 180 s fit the call's 10 minutes.
#
# usage: OUT=dir [GRID=both|all|tp|up|ep|none] [TP_ROWS=A:B] [UP_ROWS=A:B] [EP_ROWS=A:B]
#        [GRID_ARGS="-n 5 -w 1"] scripts/gpu_grid.sh [BUILD_DIR]  (BUILD_DIR defaults to build;
#                                            both: tp and up; all: tp, up and ep)
#        [GRIDS="tp up ep"] scripts/gpu_grid.sh check DIR...
#                                           (CPU) every declared row of each grid in GRIDS
#                                           exactly once over the tp_grid_*.csv /
#                                           up_grid_*.csv / ep_grid_*.csv files in DIRs
# Split for the lead (one device call each):
#   OUT=$OUT GRID=up scripts/gpu_grid.sh                        build + UP (60 rows)
#   OUT=$OUT GRID=tp TP_ROWS=0:54 scripts/gpu_grid.sh           gemm_rs + ag_gemm (54 rows)
#   OUT=$OUT GRID=tp TP_ROWS=54:81 scripts/gpu_grid.sh          mlp (27 rows)
#   EP, two calls of <= 260 s estimated each (GRID=ep EP_ROWS=A:B), ~100 s of EP_MAX_TIME left
#   for the estimate's error (the whole grid, ~462 s, would pass the 360 s):
#     0:96 (~254 s)   96:192 (~208 s)
#   e.g. OUT=$OUT GRID=ep EP_ROWS=0:96 scripts/gpu_grid.sh
#   scripts/gpu_grid.sh check DIR1 DIR2 ...                     (here, on the fetched files)
# Rows a call could not start say "not run: --max-time spent": rerun them with their --rows.
set -u

# ---- check: every row of each grid once, over the slices (CPU; python3's csv reads the quoted
# fields) -----------------------------------------------------------------------------------------
if [ "${1:-}" = check ]; then
    shift
    [ $# -gt 0 ] || { echo "usage: scripts/gpu_grid.sh check DIR..." >&2; exit 2; }
    GRIDS=${GRIDS:-tp up ep} python3 - "$@" <<'PY'
import csv, glob, os, sys
rc = 0
sizes = {"tp": 81, "up": 60, "ep": 192}
names = os.environ["GRIDS"].replace(",", " ").split()
for name in names:
    if name not in sizes:
        print(f"GRIDS: unknown grid {name} (tp, up, ep)")
        sys.exit(2)
for name, want in ((n, sizes[n]) for n in names):
    files = sorted(f for d in sys.argv[1:] for f in glob.glob(os.path.join(d, name + "_grid_*.csv")))
    if not files:
        print(f"{name}: no {name}_grid_*.csv")
        rc = 1
        continue
    # a row counts once it has a status other than "not run" (a later slice reran it)
    seen, late, status = {}, set(), {}
    for f in files:
        head = None
        for rec in csv.reader(l for l in open(f) if not l.startswith("#")):
            if head is None:
                head = rec
                continue
            row = dict(zip(head, rec))
            r = int(row["grid_row"])
            word = row["status"].split(":")[0]
            if word == "not run":
                late.add(r)
                continue
            seen[r] = seen.get(r, 0) + 1
            status[word] = status.get(word, 0) + 1
    notrun = sorted(r for r in late if r not in seen)
    missing = [r for r in range(want) if r not in seen and r not in late]
    twice = [r for r, n in sorted(seen.items()) if n > 1]
    print(f"{name}: {len(seen)} rows of {want} in {len(files)} file(s);",
          " ".join(f"{k}={v}" for k, v in sorted(status.items())))
    if notrun:
        print(f"{name}: not run (--max-time), rerun with --rows:", " ".join(map(str, notrun)))
    if missing:
        print(f"{name}: missing rows:", " ".join(map(str, missing)))
    if twice:
        print(f"{name}: rows given more than once:", " ".join(map(str, twice)))
    rc |= bool(notrun or missing or twice)
print("gpu_grid check: every declared row present once" if not rc else "gpu_grid check: INCOMPLETE")
sys.exit(rc)
PY
    exit $?
fi

XS_VENV=${XS_VENV:-/opt/torch/.venv}
if [ -z "${VIRTUAL_ENV:-}" ] && [ -d "$XS_VENV" ]; then
    export VIRTUAL_ENV="$XS_VENV" PATH="$XS_VENV/bin:$PATH"
fi

B=${1:-${BUILD:-build}}
OUT=${OUT:-out}
GRID=${GRID:-both}
TP_ROWS=${TP_ROWS:-0:81}
UP_ROWS=${UP_ROWS:-0:60}
EP_ROWS=${EP_ROWS:-0:192}
TP_MAX_TIME=${TP_MAX_TIME:-400}
UP_MAX_TIME=${UP_MAX_TIME:-400}
EP_MAX_TIME=${EP_MAX_TIME:-360}
BUILD_LIMIT=${BUILD_LIMIT:-480}
read -r -a EXTRA <<<"${GRID_ARGS:-}"
mkdir -p "$OUT"
LOG="$OUT/grid.log"
: >>"$LOG"

. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"

case "$GRID" in both|all|tp|up|ep|none) ;;
    *) echo "GRID=$GRID: expected both, all, tp, up, ep or none" >&2; exit 2 ;; esac
say "# gpu_grid.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) build=$B out=$OUT grid=$GRID tp_rows=$TP_ROWS up_rows=$UP_ROWS ep_rows=$EP_ROWS"
say "# git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

step build "$BUILD_LIMIT" make -j"$(nproc)" BUILD="$B" tool
X=$(xstage_with tp "$B")
if [ -z "$X" ]; then
    say "FAIL: $B/xstage lacks the CUDA bench subcommands"
    exit 1
fi

slice_name() { local a=${1%%:*} b=${1##*:}; echo "${a:-0}_${b:-end}"; }

if [ "$GRID" = both ] || [ "$GRID" = all ] || [ "$GRID" = tp ]; then
    pick_profile "${PROFILE:-}" tp
    say "$PROFILE_LINE"
    step bench_tp_grid $((TP_MAX_TIME + 90)) "$X" bench tp --grid declared --rows "$TP_ROWS" \
        --max-time "$TP_MAX_TIME" ${PROFILE_ARGS[@]+"${PROFILE_ARGS[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"} --csv "$OUT/tp_grid_$(slice_name "$TP_ROWS").csv"
fi
if [ "$GRID" = both ] || [ "$GRID" = all ] || [ "$GRID" = up ]; then
    pick_profile "${PROFILE:-}" up
    say "$PROFILE_LINE"
    step bench_up_grid $((UP_MAX_TIME + 90)) "$X" bench up --grid declared --rows "$UP_ROWS" \
        --max-time "$UP_MAX_TIME" ${PROFILE_ARGS[@]+"${PROFILE_ARGS[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"} --csv "$OUT/up_grid_$(slice_name "$UP_ROWS").csv"
fi
if [ "$GRID" = all ] || [ "$GRID" = ep ]; then
    pick_profile "${PROFILE:-}" ep
    say "$PROFILE_LINE"
    step bench_ep_grid $((EP_MAX_TIME + 180)) "$X" bench ep --grid declared --rows "$EP_ROWS" \
        --max-time "$EP_MAX_TIME" ${PROFILE_ARGS[@]+"${PROFILE_ARGS[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"} --csv "$OUT/ep_grid_$(slice_name "$EP_ROWS").csv"
fi
case "$X" in "${TMPDIR:-/tmp}"/xstage-tp.*) rm -f "$X" ;; esac

echo
grep -E '^# (declared grid|bench (tp|up|ep) (OK|FAILED)|wall time|--max-time|[0-9]+ of [0-9]+ points cannot)' "$LOG" | tail -n 12
grep -E '^xstage: error' "$LOG" | tail -n 10
printf '%s\n' "${results[@]}"
[ "$fails" -eq 0 ] && echo "gpu_grid: ALL PASS" || echo "gpu_grid: SOME STEPS FAILED"
[ "$fails" -eq 0 ]
