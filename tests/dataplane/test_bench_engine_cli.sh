#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# "sigma-bench engine" fed bad options: each must exit 2 with a message naming it
# before measuring anything. $1 is the sigma-bench binary.
bench=$1
fails=0

for case in "0|--help" "2|--runs" "2|--runs abc" "2|--runs 4" "2|--runs 102" "2|--runs 7x" "2|--runs +7" \
	"2|--json" "2|--frobnicate" "2|quick" "2|--fanout --runs 4" "2|--fanout=yes"; do
	want=${case%%|*}
	# shellcheck disable=SC2086 # the options are meant to split
	out=$(timeout 20 "$bench" engine ${case#*|} 2>&1)
	rc=$?
	if [ "$rc" -ne "$want" ] || ! printf '%s' "$out" | grep -q 'sigma-bench engine'; then
		echo "FAIL: sigma-bench engine ${case#*|}: exit $rc, want $want; output: $out"
		fails=$((fails + 1))
	fi
done
# a short fan-out run: the bench itself fails unless the engine took every push
json=$(mktemp)
if ! timeout 60 "$bench" engine --quick --fanout --json "$json" >/dev/null 2>&1 ||
	! grep -q '"fanout": true' "$json"; then
	echo "FAIL: sigma-bench engine --quick --fanout"
	fails=$((fails + 1))
fi
rm -f "$json"
"$bench" help | grep -q '^  engine ' || { echo "FAIL: help does not list engine"; fails=$((fails + 1)); }
echo "test_bench_engine_cli: $fails failed"
[ "$fails" -eq 0 ]
