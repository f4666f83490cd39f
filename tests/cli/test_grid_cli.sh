#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Command-line tests of the declared grids (issue 33 item 4): `bench tp|up|ep --grid declared
# --rows A:B` refuse what would change the grid's points with one line and a non-zero exit
# (parsing happens before any GPU is touched; a CPU-only build checks only its own message), and
# `scripts/gpu_grid.sh check` finds every declared row once over sliced CSVs, or names the
# missing and repeated ones. Usage: test_grid_cli.sh BUILD_DIR
build=${1:-build}
X="$build/xstage"
T=$(mktemp -d /tmp/xs-grid-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# expect_err DESC PATTERN CMD...: non-zero exit, exactly one stderr line, matching PATTERN
expect_err() {
    d=$1; pat=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    n=$(wc -l <"$T/err")
    if [ "$rc" -eq 0 ]; then bad "$d: exit 0"; return; fi
    if [ "$rc" -gt 125 ]; then bad "$d: crashed (exit $rc)"; return; fi
    if [ "$n" -ne 1 ]; then bad "$d: $n stderr lines: $(cat "$T/err")"; return; fi
    if grep -q -- "$pat" "$T/err"; then ok; else bad "$d: '$(cat "$T/err")' lacks '$pat'"; fi
}

# ---- options ------------------------------------------------------------------------------------
if [ ! -x "$X" ]; then
    bad "no $X"
elif "$X" bench tp --help 2>&1 | grep -q 'built without nvcc'; then
    expect_err "bench tp without CUDA" "built without nvcc" "$X" bench tp --grid declared
else
    for w in tp up; do
        "$X" bench $w --help | grep -q -- '--grid WORD' && ok || bad "bench $w --help lacks --grid"
        "$X" bench $w --help | grep -q -- '--rows A:B' && ok || bad "bench $w --help lacks --rows"
        expect_err "$w --grid word" "--grid 'all': expected declared or default" \
            "$X" bench $w --grid all
        expect_err "$w --rows alone" "bench $w: --rows needs --grid declared" \
            "$X" bench $w --rows 0:3
        expect_err "$w --rows beyond" "82 is beyond" "$X" bench $w --grid declared --rows 0:82
        expect_err "$w --rows empty" "empty range" "$X" bench $w --grid declared --rows 5:3
        expect_err "$w --rows word" "expected A:B" "$X" bench $w --grid declared --rows a:b
        expect_err "$w --grid --quick" "--quick cannot be combined" \
            "$X" bench $w --grid declared --quick
        expect_err "$w --grid --peers" "--peers cannot be combined" \
            "$X" bench $w --grid declared --peers 2
        expect_err "$w --grid -g 2" "-g N > 1 cannot be combined" \
            "$X" bench $w --grid declared -g 2
    done
    expect_err "tp --grid --op" "--op cannot be combined" "$X" bench tp --grid declared --op mlp
    expect_err "tp --grid --model" "--model cannot be combined" \
        "$X" bench tp --grid declared --model llama3-8b
    expect_err "tp --grid --m" "--m cannot be combined" "$X" bench tp --grid declared --m 1024
    expect_err "tp --grid --n/--k" "--n/--k cannot be combined" \
        "$X" bench tp --grid declared --n 4096 --k 4096
    expect_err "up --grid --seq" "--seq cannot be combined" "$X" bench up --grid declared --seq 4K
    expect_err "up --grid --heads" "--heads cannot be combined" \
        "$X" bench up --grid declared --heads 8
    expect_err "up --grid --causal" "--causal cannot be combined" \
        "$X" bench up --grid declared --causal 1
    expect_err "up --rows 60" "the grid's rows are 0..59" "$X" bench up --grid declared --rows 60
    # ep: 192 rows; -g in any form (its ranks are the peers)
    "$X" bench ep --help | grep -q -- '--grid WORD' && ok || bad "bench ep --help lacks --grid"
    "$X" bench ep --help | grep -q -- '--rows A:B' && ok || bad "bench ep --help lacks --rows"
    expect_err "ep --grid word" "--grid 'all': expected declared or default" \
        "$X" bench ep --grid all
    expect_err "ep --rows alone" "bench ep: --rows needs --grid declared" "$X" bench ep --rows 0:3
    expect_err "ep --rows beyond" "193 is beyond" "$X" bench ep --grid declared --rows 0:193
    expect_err "ep --rows 192" "the grid's rows are 0..191" "$X" bench ep --grid declared --rows 192
    expect_err "ep --rows empty" "empty range" "$X" bench ep --grid declared --rows 31:31
    expect_err "ep --rows word" "expected A:B" "$X" bench ep --grid declared --rows x:
    for o in "--config olmoe-1b-7b" "--tokens 256" "--peers 2" "--routing zipf" "--long" \
        "--quick" "-g 1" "-g 2"; do
        # shellcheck disable=SC2086
        expect_err "ep --grid $o" "--grid declared fixes the points; ${o%% *} cannot be combined" \
            "$X" bench ep --grid declared $o
    done
fi

# ---- gpu_grid.sh check --------------------------------------------------------------------------
G=scripts/gpu_grid.sh
if ! command -v python3 >/dev/null 2>&1; then
    echo "test_grid_cli: no python3, gpu_grid.sh check not tested"
else
    # slices of the TP grid with quoted fields (a status with commas), the UP grid in one file
    mk() { # mk FILE FIRST LAST STATUS
        {
            echo "# device: none (test)"
            echo "# units: ,,"
            echo "op,grid_row,status"
            i=$2
            while [ "$i" -lt "$3" ]; do echo "mlp,$i,$4"; i=$((i + 1)); done
        } >"$1"
    }
    mkdir -p "$T/a" "$T/b"
    mk "$T/a/tp_grid_0_40.csv" 0 40 ok
    mk "$T/a/tp_grid_40_81.csv" 40 81 '"skipped: needs 180.0 GiB > 139.0 GiB free, estimate"'
    mk "$T/a/up_grid_0_60.csv" 0 60 ok
    mk "$T/a/ep_grid_0_31.csv" 0 31 ok
    mk "$T/a/ep_grid_31_192.csv" 31 192 '"failed: moe: kernel timed out, status 3"'
    if bash "$G" check "$T/a" >"$T/out" 2>&1; then ok; else bad "check of a complete set: $(cat "$T/out")"; fi
    grep -q '^tp: 81 rows of 81 in 2 file(s); ok=40 skipped=41$' "$T/out" && ok ||
        bad "check counts statuses: $(cat "$T/out")"
    grep -q '^ep: 192 rows of 192 in 2 file(s); failed=161 ok=31$' "$T/out" && ok ||
        bad "check counts ep rows: $(cat "$T/out")"
    # GRIDS picks the grids; without ep files the full check is incomplete
    mkdir -p "$T/tu"
    cp "$T/a/tp_grid_"*.csv "$T/a/up_grid_0_60.csv" "$T/tu/"
    if GRIDS="tp up" bash "$G" check "$T/tu" >"$T/out" 2>&1; then ok; else bad "GRIDS=tp up: $(cat "$T/out")"; fi
    if bash "$G" check "$T/tu" >"$T/out" 2>&1; then bad "check without ep files: exit 0"; else ok; fi
    grep -q '^ep: no ep_grid_\*.csv$' "$T/out" && ok || bad "no ep files: $(cat "$T/out")"
    if GRIDS=xx bash "$G" check "$T/tu" >"$T/out" 2>&1; then bad "GRIDS=xx: exit 0"; else ok; fi
    mk "$T/b/tp_grid_0_40.csv" 0 40 ok
    mk "$T/b/tp_grid_41_81.csv" 39 81 ok
    mk "$T/b/up_grid_0_59.csv" 0 59 ok
    mk "$T/b/ep_grid_0_192.csv" 0 191 ok
    if bash "$G" check "$T/b" >"$T/out" 2>&1; then bad "check of an incomplete set: exit 0"; else ok; fi
    grep -q '^tp: rows given more than once: 39$' "$T/out" && ok || bad "repeated rows: $(cat "$T/out")"
    grep -q '^up: missing rows: 59$' "$T/out" && ok || bad "missing rows: $(cat "$T/out")"
    grep -q '^ep: missing rows: 191$' "$T/out" && ok || bad "missing ep rows: $(cat "$T/out")"
    grep -q 'INCOMPLETE' "$T/out" && ok || bad "verdict: $(cat "$T/out")"
    if bash "$G" check "$T/none" >"$T/out" 2>&1; then bad "check of no files: exit 0"; else ok; fi
    # rows a slice did not start, then rerun: complete; not rerun: incomplete, named
    mkdir -p "$T/c"
    mk "$T/c/tp_grid_0_81.csv" 0 81 ok
    mk "$T/c/up_grid_0_60.csv" 0 50 ok
    mk "$T/c/up_grid_0_60b.csv" 50 60 '"not run: --max-time spent"'
    mk "$T/c/ep_grid_0_192.csv" 0 192 '"skipped: needs 150.0 GiB of device memory > 139.0 GiB free"'
    if bash "$G" check "$T/c" >"$T/out" 2>&1; then bad "check with rows not run: exit 0"; else ok; fi
    grep -q '^up: not run (--max-time), rerun with --rows: 50 51 52 53 54 55 56 57 58 59$' "$T/out" &&
        ok || bad "rows not run: $(cat "$T/out")"
    mk "$T/c/up_grid_50_60.csv" 50 60 ok
    if bash "$G" check "$T/c" >"$T/out" 2>&1; then ok; else bad "check after a rerun: $(cat "$T/out")"; fi
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
