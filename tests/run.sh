#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Run every CPU test binary and the command-line tests; sum their "N passed, N failed" lines.
# Usage: tests/run.sh BUILD_DIR. The last line printed is the total; exits non-zero on failure.
build=${1:-build}
total_pass=0
total_fail=0
for t in "$build"/tests/test_* tests/cli/*.sh; do
    [ -e "$t" ] || continue
    case "$t" in *.sh) cmd="sh $t $build" ;; *) [ -x "$t" ] || continue; cmd="$t" ;; esac
    out=$($cmd 2>&1)
    rc=$?
    last=$(printf '%s\n' "$out" | tail -n 1)
    p=$(printf '%s\n' "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
    f=$(printf '%s\n' "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
    if [ -z "$p" ]; then
        # a crash or a runner that did not finish counts as one failure
        p=0; f=1
        printf '%s\n' "$out" | tail -n 20
    elif [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
        printf '%s\n' "$out" | grep -v '^ok ' | tail -n 40
        [ "$f" -eq 0 ] && f=1
    fi
    printf '%-40s %s\n' "$(basename "$t")" "$last"
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
done
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
