#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The tree configures and links in the environment CI gives: no CUDA_HOME,
# LIBRARY_PATH or other variables of a developer's shell, and the PATH of a
# plain root shell with the toolkit's bin folder after it (as ./sigma sets it),
# so that nvcc is found first as /usr/local/bin/nvcc where a wrapper is there.
# It builds sigma-bench, which the C compiler links with CUDA's runtime when
# nvcc is found, and sigmad. (CI once failed: -lcudart had no -L.)
# Usage: test_clean_env_build.sh SOURCE_ROOT
set -u
SRC=$1
tmp=$(mktemp -d /tmp/sigma-cleanenv.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
[ -d /usr/local/cuda/bin ] && path=$path:/usr/local/cuda/bin
run() { env -i HOME="$tmp" PATH="$path" LANG=C.UTF-8 "$@" >>"$tmp/log" 2>&1; }
if ! run meson setup "$tmp/build" "$SRC"; then
	tail -30 "$tmp/log"
	echo "FAIL: meson setup in a clean environment"
	exit 1
fi
grep -E '^ *CUDA' "$tmp/log" | head -1
if ! run ninja -C "$tmp/build" bench/sigma-bench sigmad/sigmad; then
	grep -B2 -A8 '^FAILED' "$tmp/log" | cut -c1-300 | head -40
	echo "FAIL: the build in a clean environment"
	exit 1
fi
echo "ok: configured and linked in a clean environment"
