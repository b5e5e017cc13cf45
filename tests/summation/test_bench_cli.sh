#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# sigma-bench's command line fed garbage: each bad use must exit 2 with a
# message, never crash, hang or start measuring. $1 is the sigma-bench binary.
bench=$1
fails=0

expect() { # expect RC ARGS...: run sigma-bench ARGS, want exit status RC
	want=$1
	shift
	out=$(timeout 20 "$bench" "$@" 2>&1)
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		echo "FAIL: sigma-bench $*: exit $rc, want $want; output: $out"
		fails=$((fails + 1))
	fi
}

expect 0 help
expect 0 sum --help
expect 2
expect 2 no-such-command
expect 2 sum --runs
expect 2 sum --runs abc
expect 2 sum --runs 4
expect 2 sum --runs 102
expect 2 sum --runs 7x
expect 2 sum --runs +7 # strtol() took a sign and spaces: it measured 7 runs
expect 2 sum --runs ' 7'
expect 2 sum --json
expect 2 sum --frobnicate
expect 2 sum ''
"$bench" help | grep -q '^  sum ' || { echo "FAIL: help does not list sum"; fails=$((fails + 1)); }
echo "test_bench_cli: $fails failed"
[ "$fails" -eq 0 ]
