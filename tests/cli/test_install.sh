#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `make install` as a user meets it: install into a temporary PREFIX (and once through DESTDIR),
# then build examples/c/predict.c with pkg-config alone, against the shared library
# (LD_LIBRARY_PATH) and against the static one, and check that it prints exactly the rows of the
# installed `xstage predict` in CSV on every examples/ schedule. Also: the soname, the version
# (`--version`, `-V`, pkg-config, the header), every public C header compiling on its own in
# strict C11 without _GNU_SOURCE, and uninstall. Usage: test_install.sh BUILD_DIR
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
case "$build" in /*) ;; *) build="$(pwd)/$build" ;; esac
cd "$root" || exit 1
T=$(mktemp -d /tmp/xs-install-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit $?
}

# A sanitizer build's objects need the sanitizer runtime in every program that links them: the
# installed libraries are tested on the plain build (make test), not here.
if nm "$build/libxstage.a" 2>/dev/null | grep -q '__asan_init'; then
    echo "skip: $build is a sanitizer build"
    finish
fi
if ! command -v pkg-config >/dev/null 2>&1; then
    bad "pkg-config is not installed (apt-get install pkg-config)"
    finish
fi
# Do not let make build the CUDA side here when the build under test has none.
nocuda=""
[ -e "$build/libxstage_cuda.a" ] || nocuda="NOCUDA=1"

P="$T/prefix"
# shellcheck disable=SC2086
if make -s install BUILD="$build" PREFIX="$P" $nocuda >"$T/make.log" 2>&1; then
    ok "make install PREFIX=$P"
else
    bad "make install failed: $(tail -n 5 "$T/make.log")"
    finish
fi
for f in bin/xstage include/xstage.h include/xstage_device.cuh lib/libxstage.a \
         lib/libxstage.so lib/pkgconfig/xstage.pc; do
    if [ -e "$P/$f" ]; then ok "installed $f"; else bad "$f is not installed"; fi
done

# version: the tool, pkg-config and the header say the same
hv=$(sed -n 's/^#define XSTAGE_VERSION_STRING "\(.*\)"/\1/p' include/xstage.h)
[ -n "$hv" ] || bad "XSTAGE_VERSION_STRING not found in include/xstage.h"
for flag in --version -V; do
    v=$("$P/bin/xstage" $flag 2>&1)
    if [ "$v" = "xstage $hv" ]; then ok "xstage $flag"; else bad "xstage $flag printed '$v'"; fi
done
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
pv=$(pkg-config --modversion xstage 2>&1)
if [ "$pv" = "$hv" ]; then ok "pkg-config --modversion"; else bad "pkg-config says '$pv', header $hv"; fi

# the shared library: real file, soname = libxstage.so.MAJOR, both links
major=${hv%%.*}
real=$(readlink -f "$P/lib/libxstage.so")
if [ "$(basename "$real")" = "libxstage.so.$hv" ]; then ok "libxstage.so -> libxstage.so.$hv";
else bad "libxstage.so resolves to $real"; fi
if [ -L "$P/lib/libxstage.so.$major" ]; then ok "libxstage.so.$major link"; else bad "no libxstage.so.$major"; fi
so=$(objdump -p "$real" 2>/dev/null | awk '$1 == "SONAME" {print $2}')
if [ "$so" = "libxstage.so.$major" ]; then ok "soname $so"; else bad "soname '$so'"; fi

# every public C header on its own, strict C11, no _GNU_SOURCE (the core needs it only inside)
cflags=$(pkg-config --cflags xstage)
for h in "$P"/include/*.h; do
    printf '#include <%s>\nint main(void) { return 0; }\n' "$(basename "$h")" >"$T/h.c"
    # shellcheck disable=SC2086
    if cc -std=c11 -pedantic -Wall -Wextra -Werror $cflags -c "$T/h.c" -o "$T/h.o" 2>"$T/h.err"
    then ok "header $(basename "$h")"; else bad "$(basename "$h"): $(head -n 3 "$T/h.err")"; fi
done

# the README's example with pkg-config alone: shared, then static
# shellcheck disable=SC2046
if cc examples/c/predict.c $(pkg-config --cflags --libs xstage) -o "$T/predict_so" 2>"$T/cc.err"
then ok "cc predict.c \$(pkg-config --cflags --libs xstage)"
else bad "example (shared): $(head -n 5 "$T/cc.err")"; fi
# static: the archive by name, then what pkg-config --static adds for it (Libs.private)
libs=$(pkg-config --static --libs xstage | sed 's/-lxstage/-l:libxstage.a/')
# shellcheck disable=SC2086
if cc examples/c/predict.c $cflags $libs -o "$T/predict_a" 2>"$T/cc.err"
then ok "cc predict.c (static libxstage.a, pkg-config --static)"
else bad "example (static): $(head -n 5 "$T/cc.err")"; fi
if [ -x "$T/predict_so" ] && objdump -p "$T/predict_so" | grep -q 'NEEDED.*libxstage\.so\.'"$major"
then ok "shared example needs libxstage.so.$major"; else bad "shared example does not need libxstage.so.$major"; fi
if [ -x "$T/predict_a" ] && ! objdump -p "$T/predict_a" | grep -q 'NEEDED.*libxstage'
then ok "static example needs no libxstage.so"; else bad "static example is not static in xstage"; fi

# the README's copy of the example builds the same way
awk '/^```c$/ {f = 1; next} /^```$/ {f = 0} f' README.md >"$T/readme.c"
# shellcheck disable=SC2046
if [ -s "$T/readme.c" ] && cc "$T/readme.c" $(pkg-config --cflags --libs xstage) -o "$T/predict_readme" 2>"$T/cc.err"
then ok "README's C example builds with pkg-config alone"
else bad "README's C example: $(head -n 5 "$T/cc.err")"; fi

# predict's CSV: `--csv` is a flag today; when it takes FILE, `-` is stdout
if "$P/bin/xstage" predict --help 2>&1 | grep -q -- '--csv FILE'; then csv="--csv -"; else csv="--csv"; fi
n=0
for s in examples/*.csv; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    if ! "$P/bin/xstage" predict --schedule "$s" $csv >"$T/want" 2>"$T/err"; then
        bad "xstage predict $s: $(head -n 1 "$T/err")"
        continue
    fi
    [ -s "$T/want" ] || bad "xstage predict $s $csv printed nothing"
    if [ -x "$T/predict_so" ] && LD_LIBRARY_PATH="$P/lib" "$T/predict_so" "$s" >"$T/got" 2>"$T/err" &&
        cmp -s "$T/want" "$T/got"; then ok "shared example = xstage predict $csv on $s"
    else bad "shared example differs on $s: $(diff "$T/want" "$T/got" 2>&1 | head -n 4) $(head -n 1 "$T/err")"; fi
    if [ -x "$T/predict_a" ] && "$T/predict_a" "$s" >"$T/got" 2>"$T/err" && cmp -s "$T/want" "$T/got"
    then ok "static example = xstage predict $csv on $s"
    else bad "static example differs on $s: $(diff "$T/want" "$T/got" 2>&1 | head -n 4)"; fi
    if [ -x "$T/predict_readme" ] && LD_LIBRARY_PATH="$P/lib" "$T/predict_readme" "$s" >"$T/got" 2>"$T/err" &&
        cmp -s "$T/want" "$T/got"; then ok "README example = xstage predict $csv on $s"
    else bad "README example differs on $s: $(diff "$T/want" "$T/got" 2>&1 | head -n 4)"; fi
done
[ "$n" -gt 0 ] || bad "no examples/*.csv schedule"

# DESTDIR stages the files; xstage.pc names PREFIX, where they will live
# shellcheck disable=SC2086
if make -s install BUILD="$build" DESTDIR="$T/stage" PREFIX=/opt/xstage $nocuda >"$T/make.log" 2>&1 &&
    [ -e "$T/stage/opt/xstage/lib/libxstage.so.$hv" ] &&
    grep -q '^prefix=/opt/xstage$' "$T/stage/opt/xstage/lib/pkgconfig/xstage.pc"
then ok "make install DESTDIR=... PREFIX=/opt/xstage"
else bad "DESTDIR install: $(tail -n 3 "$T/make.log")"; fi

# uninstall leaves none of the files behind
# shellcheck disable=SC2086
make -s uninstall BUILD="$build" PREFIX="$P" $nocuda >"$T/make.log" 2>&1
left=$(find "$P" -type f -o -type l | head -n 3)
if [ -z "$left" ]; then ok "make uninstall"; else bad "make uninstall left $left"; fi
finish
