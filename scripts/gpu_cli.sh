#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_cli.sh - the CLI convention (docs/CLI.md) on the GPU commands, from an already built tree,
# on one GPU, in about a minute:
#   1. replay --csv - : the CSV alone on stdout = the --csv FILE of the same run's columns;
#      replay --json FILE: format 1, notes with the device line, the CSV's columns, one row per
#      schedule row
#   2. replay --schedule - reads the schedule from stdin
#   3. probe --only ref --json - : a JSON document alone on stdout, the probe's columns
# Writes cli.log and the files to $OUT; the PASS/FAIL table comes last.
# Usage: OUT=dir [BUILD=build] scripts/gpu_cli.sh
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-./out-cli}
X="$BUILD/xstage"
mkdir -p "$OUT"
LOG="$OUT/cli.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
S=examples/ep_wave.csv
nrows=$(($(grep -v '^#' "$S" | grep -c .) - 1))
pass() { results+=("PASS  $1"); }
failed() { results+=("FAIL  $1"); fails=$((fails + 1)); }
json() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"; }

step "replay --csv - --json FILE" 60 sh -c "'$X' replay --schedule $S --csv - --json '$OUT/replay.json' >'$OUT/replay_stdout.csv'"
if head -n 1 "$OUT/replay_stdout.csv" | grep -qx 'row,producers,bytes_per_producer,gap_ns,issue_med_ns,issue_max_ns,end_ns' &&
    [ "$(wc -l <"$OUT/replay_stdout.csv")" -eq $((nrows + 1)) ]; then
    pass "replay --csv -: the CSV alone on stdout ($nrows rows)"; else
    failed "replay --csv -: $(head -c 200 "$OUT/replay_stdout.csv")"; fi
if json "$OUT/replay.json" "j['format'] == 1 and any(n.startswith('#') for n in j['notes']) and len(j['rows']) == $nrows and ','.join(c['name'] for c in j['columns']) == open('$OUT/replay_stdout.csv').readline().strip() and any('replay OK' in s for s in j['summary'])"; then
    pass "replay --json: format 1, notes, columns, rows, summary"; else
    failed "replay --json: $(head -c 300 "$OUT/replay.json")"; fi
step "replay --schedule -" 60 sh -c "'$X' replay --schedule - --csv '$OUT/replay_stdin.csv' <$S"
[ "$(wc -l <"$OUT/replay_stdin.csv" 2>/dev/null || echo 0)" -eq $((nrows + 1)) ] &&
    pass "replay --schedule -: $nrows rows" || failed "replay --schedule -: no rows"
step "probe --only ref --json -" 120 sh -c "'$X' probe --only ref --json - >'$OUT/probe.json'"
if json "$OUT/probe.json" "j['format'] == 1 and j['columns'][0]['name'] == 'case' and len(j['rows']) >= 2 and any(n.startswith('#') for n in j['notes'])"; then
    pass "probe --json -: a JSON document alone on stdout"; else
    failed "probe --json -: $(head -c 300 "$OUT/probe.json")"; fi
printf '%s\n' "${results[@]}" | tee -a "$LOG"
echo "gpu_cli: $fails failed" | tee -a "$LOG"
[ "$fails" -eq 0 ]
