#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# sigma-bench compare --auth: the cost of auth = mac measured in the same run.
# Every run sweeps Sigma with auth and again without (the baseline), the plain
# sweep first in even runs and last in odd ones; each time is the median of
# the runs' times, auth_vs_plain their ratio, every sum verified on both
# paths. Which sweep had auth is read from the node engines' own log (8888-
# byte chunks with the MAC trailer, 8920 without), not from sigma-bench's
# JSON. Without --auth there is no baseline; --auth with --attach is refused.
# Usage: test_compare_auth.sh SIGMA_BENCH
set -eu
bench=$1
tmp=$(mktemp -d /tmp/sg_cmpauth_$$_XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if ! command -v mpirun >/dev/null; then
	echo "SKIP: no mpirun (openmpi-bin)"
	exit 77
fi
"$bench" compare --auth --workers 2 --sizes 16K,64K --iters 1 --runs 3 --nodes 1 --quiet \
	--json "$tmp/a.json" >"$tmp/out.txt" 2>"$tmp/err.txt" || {
	cat "$tmp/out.txt" "$tmp/err.txt"; echo "FAIL: compare --auth"; exit 1; }
cat "$tmp/out.txt"
grep -q "auth/plain" "$tmp/out.txt" || { echo "FAIL: no auth/plain column"; exit 1; }
# each sweep adds one job per size to its node thread: chunk bytes in sweep order
grep -o 'chunks of [0-9]* bytes' "$tmp/err.txt" | awk '{print $3}' | tr '\n' ' ' >"$tmp/order"
want="8920 8920 8888 8888 8888 8888 8920 8920 8920 8920 8888 8888 "
[ "$(cat "$tmp/order")" = "$want" ] || {
	echo "FAIL: sweeps' chunk bytes in order '$(cat "$tmp/order")', want '$want'"; exit 1; }
python3 - "$tmp/a.json" <<'PY'
import json
import statistics
import sys

doc = json.load(open(sys.argv[1]))
bad = []
if doc["auth"] is not True or doc["runs"] != 3:
    bad.append(f"auth {doc['auth']}, runs {doc['runs']}")
if [r["bytes"] for r in doc["results"]] != [16384, 65536]:
    bad.append("results are not 16K,64K")
for r in doc["results"]:
    at = f"{r['bytes']} B"
    if not r["sigma_ok"] or not r["plain_ok"]:
        bad.append(f"{at}: sums not verified right (auth {r['sigma_ok']}, "
                   f"plain {r['plain_ok']})")
    for key, runs in (("sigma_time_s", "sigma_runs_s"), ("plain_time_s", "plain_runs_s")):
        v = r[runs]
        if len(v) != 3 or min(v) <= 0 or abs(statistics.median(v) - r[key]) > 1e-9:
            bad.append(f"{at}: {key} {r[key]} is not the median of {v}")
    want = r["sigma_time_s"] / r["plain_time_s"]
    if abs(r["auth_vs_plain"] - want) > 1e-4 * max(1.0, want):
        bad.append(f"{at}: auth_vs_plain {r['auth_vs_plain']}, want {want:.4f}")
    if abs(r["plain_algbw_Bps"] - r["bytes"] / r["plain_time_s"]) > 1e-4 * r["plain_algbw_Bps"]:
        bad.append(f"{at}: plain_algbw_Bps {r['plain_algbw_Bps']}")
print("\n".join(bad) if bad else "compare --auth JSON: both sweeps, medians and ratio right")
sys.exit(1 if bad else 0)
PY

"$bench" compare --workers 2 --sizes 4K --iters 1 --nodes 1 --quiet --json "$tmp/p.json" \
	>"$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; echo "FAIL: compare without --auth"; exit 1; }
if grep -q 'plain_time_s\|"auth":true' "$tmp/p.json" || grep -q 'chunks of 8888' "$tmp/out.txt"
then
	echo "FAIL: compare without --auth ran or reported an auth sweep"
	exit 1
fi
if "$bench" compare --auth --attach 127.0.0.1:9 --quiet >"$tmp/out.txt" 2>&1; then
	echo "FAIL: compare --auth --attach was accepted"
	exit 1
fi
echo PASS
