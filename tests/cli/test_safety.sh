#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Output safety of the xstage tool (docs/ROBUSTNESS.md): no input is ever overwritten (same path,
# ./ path, symbolic link, hard link), a failed write leaves the old file and no partial one, no
# user string reaches gnuplot's command language, every write is checked (/dev/full), profiles
# have physical bounds, every error is one line, and sizes are refused up front in the user's
# numbers. A fake gnuplot (a shell script on PATH) stands in for the real one, so that the plot
# path is tested without it. Usage: test_safety.sh BUILD_DIR
build=${1:-build}
X="$(cd "$(dirname "$build/xstage")" && pwd)/xstage"
T=$(mktemp -d /tmp/xs-safety-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# expect_err DESC PATTERN CMD...: non-zero exit, no crash, exactly one stderr line matching
# PATTERN, and no control character (ESC) on it
expect_err() {
    d=$1; pat=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    n=$(wc -l <"$T/err")
    if [ "$rc" -eq 0 ]; then bad "$d: exit 0"; return; fi
    if [ "$rc" -gt 125 ]; then bad "$d: crashed (exit $rc): $(head -c 300 "$T/err")"; return; fi
    if [ "$n" -ne 1 ]; then bad "$d: $n stderr lines: $(head -c 400 "$T/err")"; return; fi
    if LC_ALL=C grep -q "$(printf '[\001-\010\013-\037\177]')" "$T/err"; then
        bad "$d: control character in '$(cat -v "$T/err")'"; return
    fi
    if grep -q -- "$pat" "$T/err"; then ok; else bad "$d: '$(cat "$T/err")' lacks '$pat'"; fi
}
expect_ok() {
    d=$1; shift
    if "$@" >"$T/out" 2>"$T/err"; then ok; else bad "$d: exit $? ($(head -c 300 "$T/err"))"; fi
}
# same FILE COPY DESC: FILE is byte-identical to COPY
same() { if cmp -s "$1" "$2"; then ok; else bad "$3: $1 changed"; fi; }
# no_temp DIR DESC: no temporary file of the atomic writer left in DIR
no_temp() {
    if ls -A "$1" | grep -q 'xs-'; then bad "$2: temporary file left: $(ls -A "$1")"; else ok; fi
}

W="$T/w"
mkdir "$W"
cp examples/ep_wave.csv "$W/v.csv"
cp "$W/v.csv" "$T/v.orig"
"$X" profile show >/dev/null 2>&1 # warm
printf '{"path": "host", "issue_bytes_per_ns": 41, "issue_overhead_ns": 100, "drain_bytes_per_ns": 52.5, "capacity_bytes": 65536, "capacity_bytes_per_producer": 0, "chunk_bytes": 2048}\n' >"$W/p.json"
cp "$W/p.json" "$T/p.orig"
cd "$W" || exit 1

# --- an output is never one of the inputs ----------------------------------------------------
expect_err "plan --out = --schedule" "same file" "$X" plan -s v.csv --out v.csv
same v.csv "$T/v.orig" "plan --out = --schedule"
expect_err "plan --out ./ path" "same file" "$X" plan -s v.csv --out ./v.csv
same v.csv "$T/v.orig" "plan --out ./v.csv"
expect_err "plan --out absolute path" "same file" "$X" plan -s v.csv --out "$W/v.csv"
ln -s v.csv link.csv
expect_err "plan --out symlink to the schedule" "same file" "$X" plan -s v.csv --out link.csv
same v.csv "$T/v.orig" "plan --out symlink"
ln v.csv hard.csv
expect_err "plan --out hard link of the schedule" "same file" "$X" plan -s hard.csv --out v.csv
same v.csv "$T/v.orig" "plan --out hard link"
expect_err "predict --plot = --schedule" "same file" "$X" predict -s v.csv --plot v.csv
same v.csv "$T/v.orig" "predict --plot = --schedule"
expect_err "plan --out = --profile" "same file" "$X" plan -s v.csv --profile p.json --out p.json
same p.json "$T/p.orig" "plan --out = --profile"
expect_err "predict --plot = --profile (symlink)" "same file" \
    "$X" predict -s v.csv --profile p.json --plot "$(ln -s p.json pl.json && echo pl.json)"
same p.json "$T/p.orig" "predict --plot = --profile"

# --- atomic writes -----------------------------------------------------------------------------
expect_ok "plan --out a new file" "$X" plan -s v.csv --out planned.csv
expect_ok "the plan loads" "$X" predict -s planned.csv
no_temp . "plan --out"
# a symbolic link as the output: its target gets the plan, the link stays a link
echo "# old target" >target.csv
ln -s target.csv outlink.csv
expect_ok "plan --out a symbolic link" "$X" plan -s v.csv --out outlink.csv
[ -L outlink.csv ] && cmp -s target.csv planned.csv && ok || bad "plan --out a symbolic link: link replaced or target not written"
# a plan much larger than the file size limit: the write fails, the old file stays whole
{
    echo producers,bytes_per_producer,gap_ns
    i=0
    while [ $i -lt 400 ]; do echo "64,262144,1000.123456789"; i=$((i + 1)); done
} >big.csv
echo "# the old plan" >old.csv
cp old.csv "$T/old.orig"
expect_err "plan --out past ulimit -f" "old.csv" sh -c "ulimit -f 16; exec \"$X\" plan -s big.csv --out old.csv"
same old.csv "$T/old.orig" "plan --out past ulimit -f"
no_temp . "plan --out past ulimit -f"
expect_err "plan --out new file past ulimit -f" "new.csv" sh -c "ulimit -f 16; exec \"$X\" plan -s big.csv --out new.csv"
[ ! -e new.csv ] && ok || bad "a failed write left new.csv ($(wc -c <new.csv) bytes)"
no_temp . "plan --out new file past ulimit -f"

# --- every write is checked: /dev/full ----------------------------------------------------------
if [ -w /dev/full ]; then
    expect_err "predict > /dev/full" "standard output" sh -c "exec \"$X\" predict -s v.csv >/dev/full"
    expect_err "predict --csv - > /dev/full" "standard output" sh -c "exec \"$X\" predict -s v.csv --csv - >/dev/full"
    expect_err "criterion > /dev/full" "standard output" sh -c "exec \"$X\" criterion -k 8 -b 64K --gap 1us >/dev/full"
    expect_err "plan > /dev/full" "standard output" sh -c "exec \"$X\" plan -s v.csv >/dev/full"
    expect_err "profile show > /dev/full" "standard output" sh -c "exec \"$X\" profile show >/dev/full"
    expect_err "predict --help > /dev/full" "standard output" sh -c "exec \"$X\" predict --help >/dev/full"
    expect_err "plan --out /dev/full" "/dev/full" "$X" plan -s v.csv --out /dev/full
fi

# --- the plot: a fake gnuplot records the script it was given and writes a PNG ---------------
mkdir "$T/bin"
cat >"$T/bin/gnuplot" <<EOF
#!/bin/sh
# fake gnuplot: keep the script and where it ran, then act as \$FAKE_GNUPLOT says
cp "\$1" "$T/seen.gp"
(cd "\$(dirname "\$1")" && pwd) >"$T/gpdir"
out=\$(sed -n "s/^set output '\\(.*\\)'\$/\\1/p" "\$1" | head -n 1)
case "\${FAKE_GNUPLOT:-ok}" in
ok) { printf '\\211PNG\\r\\n\\032\\n'; head -c 200 /dev/zero; } >"\$out" ;;
empty) : >"\$out" ;;
fail) echo "line 1: some gnuplot complaint"; echo "second line" >&2; exit 1 ;;
slow) exec sleep 10 ;;
esac
exit 0
EOF
chmod +x "$T/bin/gnuplot"
P="$T/bin:$PATH"

expect_ok "predict --plot (fake gnuplot)" env PATH="$P" "$X" predict -s v.csv --plot out.png
[ "$(head -c 4 out.png | tail -c 3)" = PNG ] && ok || bad "--plot wrote no PNG"
no_temp . "predict --plot"
# injection through the plot path: the path never reaches gnuplot's script
rm -f "$T/seen.gp"
env PATH="$P" "$X" predict -s v.csv --plot "x.png'; system 'touch F'; set output 'y.png" \
    >/dev/null 2>&1
if [ -f "$T/seen.gp" ] && ! grep -q "system" "$T/seen.gp"; then ok; else
    bad "plot path injection: gnuplot's script holds the user's text: $(grep system "$T/seen.gp")"; fi
[ ! -e F ] && ok || bad "plot path injection ran a command"
# ... and through the schedule's name (it is in the title)
sn="s'\"; system \"touch G\"; q='.csv"
cp v.csv "$sn"
rm -f "$T/seen.gp"
env PATH="$P" "$X" predict -s "$sn" --plot t.png >/dev/null 2>&1
if [ -f "$T/seen.gp" ] && ! grep -q "system \"touch" "$T/seen.gp"; then ok; else
    bad "schedule name injection: gnuplot's script holds the user's text: $(grep system "$T/seen.gp")"; fi
if command -v gnuplot >/dev/null 2>&1; then # the real one, where installed
    "$X" predict -s "$sn" --plot "r.png'; system 'touch H'; set output 'z.png" >/dev/null 2>&1
    [ ! -e H ] && ok || bad "real gnuplot ran an injected command"
fi
# gnuplot's failures: one line, non-zero exit, gnuplot's own lines not forwarded
expect_err "gnuplot fails" "gnuplot failed" env PATH="$P" FAKE_GNUPLOT=fail "$X" predict -s v.csv --plot f.png
[ ! -e f.png ] && ok || bad "a failed plot left f.png"
expect_err "gnuplot writes an empty PNG" "no usable PNG" env PATH="$P" FAKE_GNUPLOT=empty "$X" predict -s v.csv --plot e.png
[ ! -e e.png ] && ok || bad "an empty plot left e.png"
if [ -w /dev/full ]; then
    expect_err "predict --plot /dev/full" "/dev/full" env PATH="$P" "$X" predict -s v.csv --plot /dev/full
fi
# an interrupted plot leaves no temporary directory (SIGTERM: a background job ignores SIGINT)
rm -f "$T/gpdir"
env PATH="$P" FAKE_GNUPLOT=slow "$X" predict -s v.csv --plot slow.png >/dev/null 2>"$T/err" &
pid=$!
i=0
while [ ! -s "$T/gpdir" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill -TERM $pid
wait $pid
rc=$?
d=$(cat "$T/gpdir" 2>/dev/null)
if [ -z "$d" ]; then bad "interrupted plot: gnuplot never started"
elif [ -e "$d" ]; then bad "interrupted plot left $d"; rm -rf "$d"
else ok; fi
[ "$rc" -ne 0 ] && [ "$(wc -l <"$T/err")" -le 1 ] && ok || bad "interrupted plot: exit $rc, $(cat "$T/err")"
[ ! -e slow.png ] && ok || bad "an interrupted plot left slow.png"

# --- profile bounds ----------------------------------------------------------------------------
expect_err "queue of 1e15 bytes" "queue_bytes_per_producer" "$X" predict -s v.csv --set queue_bytes_per_producer=1e15
expect_err "queue of 1e15 bytes (plan)" "queue_bytes_per_producer" "$X" plan -s v.csv --set queue_bytes_per_producer=1e15
expect_err "drain rate 3e-308" "drain_bytes_per_ns" "$X" predict -s v.csv --set drain_bytes_per_ns=3e-308
expect_err "issue rate 3e-308" "issue_bytes_per_ns" "$X" predict -s v.csv --set issue_bytes_per_ns=3e-308
expect_err "drain rate 3e-308 (criterion)" "drain_bytes_per_ns" "$X" criterion -k 8 -b 4K --gap 0 --set drain_bytes_per_ns=3e-308
expect_err "profile check: drain rate 3e-308" "drain_bytes_per_ns" "$X" profile show --set drain_bytes_per_ns=3e-308
sed 's/"drain_bytes_per_ns": 52.5/"drain_bytes_per_ns": 3e-308/' p.json >tiny.json
expect_err "profile file: drain rate 3e-308" "drain_bytes_per_ns" "$X" profile check tiny.json

# --- one line per error, control characters folded ---------------------------------------------
nl=$(printf 'a\nb')
esc=$(printf 'x\033[31mred')
expect_err "newline in a stray argument" "unexpected argument" "$X" predict -s v.csv "$nl"
expect_err "ESC in a stray argument" "unexpected argument" "$X" predict -s v.csv "$esc"
expect_err "newline in an unknown option" "unknown" "$X" predict "--$nl"
expect_err "ESC in an unknown option" "unknown" "$X" plan "--$esc"
expect_err "unknown short option" "option -q" "$X" criterion -q
expect_err "missing option value" "needs a value" "$X" predict -s
expect_err "newline in a command name" "unknown command" "$X" "$nl"
expect_err "ESC in a profile action" "unknown action" "$X" profile "$esc"
expect_err "newline in a schedule name" "cannot open" "$X" predict -s "$nl"
expect_err "ESC in --set" "unknown profile field" "$X" predict -s v.csv --set "$esc=1"

# --- sizes: refused up front, in the user's own numbers ----------------------------------------
{
    echo producers,bytes_per_producer,gap_ns
    i=0
    while [ $i -lt 1025 ]; do echo "65536,16,0"; i=$((i + 1)); done
} >wide.csv
expect_err "predict --plot over the windows' size" "1025 rows x 65536 producers" "$X" predict \
    -s wide.csv --plot wide.png
{
    echo producers,bytes_per_producer,gap_ns
    i=0
    while [ $i -lt 2500 ]; do echo "132,1G,0"; i=$((i + 1)); done
} >deep.csv
expect_err "plan that would split past the row limit" "splitting the bursts of 2500 rows" \
    "$X" plan -s deep.csv --max-split 4096

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
