#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Install the Debian packages the build needs, where they are missing: a C compiler and make,
# jansson (JSON, linked statically), gnuplot (plots; optional at run time). nvcc comes from the
# CUDA toolkit (not a Debian package); without it the build skips the CUDA side.
set -eu
need=""
command -v cc >/dev/null 2>&1 || need="$need build-essential"
command -v make >/dev/null 2>&1 || need="$need make"
[ -f /usr/include/jansson.h ] || need="$need libjansson-dev"
command -v gnuplot >/dev/null 2>&1 || need="$need gnuplot-nox"
[ -z "$need" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "xstage: error: missing packages ($need ) and no apt-get to install them" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo=sudo; else
        echo "xstage: error: missing packages ($need ); run as root or install them" >&2
        exit 1
    fi
fi
echo "installing:$need"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
