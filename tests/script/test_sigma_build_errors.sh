#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# ./sigma's build step reports a failure: the compiler's (or meson's) own words
# and "sigma: error: the build in DIR failed", with exit 1. The script runs on a
# copy of ./sigma beside a tiny project that fails on purpose, once at the
# compile and once at meson's setup. (CI once got only exit 1 and no text.)
# Usage: test_sigma_build_errors.sh SIGMA_SCRIPT
set -u
SIGMA=$1
tmp=$(mktemp -d /tmp/sigma-script.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { fails=$((fails + 1)); echo "FAIL: $*"; }

# project KIND: a copy of ./sigma beside a meson project broken at KIND
project() {
	local dir=$tmp/$1
	mkdir -p "$dir"
	cp "$SIGMA" "$dir/sigma"
	case $1 in
	compile)
		printf "project('broken', 'c')\nexecutable('x', 'x.c')\n" >"$dir/meson.build"
		printf '#error sigma-test-broken-compile\nint main(void) { return 0; }\n' >"$dir/x.c"
		;;
	setup)
		printf "project('broken', 'c')\nerror('sigma-test-broken-setup')\n" >"$dir/meson.build"
		;;
	esac
	echo "$dir"
}

for kind in compile setup; do
	dir=$(project "$kind")
	out=$(SIGMA_BUILD_DIR="$dir/build" "$dir/sigma" build </dev/null 2>&1)
	rc=$?
	before=$fails
	if [ "$rc" != 1 ]; then
		fail "$kind: exit $rc, want 1"
	fi
	if ! grep -q "sigma-test-broken-$kind" <<<"$out"; then
		fail "$kind: the build's own error is not shown"
	fi
	if ! grep -qF "sigma: error: the build in $dir/build failed" <<<"$out"; then
		fail "$kind: no 'sigma: error: the build in ... failed' line"
	fi
	[ "$fails" = "$before" ] || printf '%s\n' "$out" | sed 's/^/  | /'
done
[ "$fails" = 0 ] && echo "ok: both failures reported"
exit $((fails > 0))
