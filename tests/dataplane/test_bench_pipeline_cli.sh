#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# sigma-bench pipeline: bad options are refused with usage (exit 2), --help
# works, and one short ring run completes with every sum right ("ok":true);
# with --auth each ring scenario runs again with auth = mac beside its
# baseline, for an exact number of rounds, every RESULT summed right and
# signed by the node's key for its rank (else "ok":false). Each scenario
# reports the chunk payload it ran with: the largest that fits the 9000-byte
# MTU after IPv4, UDP and Sigma's headers, less the MAC trailer with auth.
# Usage: test_bench_pipeline_cli.sh path/to/sigma-bench
set -u
B=$1
fails=0
for bad in "--runs 0" "--runs abc" "--runs 99" "--seconds 0" "--seconds -3" "--seconds x" \
	"--workers 0" "--workers 65" "--workers -1" "--bogus" "--runs" "--idle nap" \
	"--runs 7x" "--workers 4k" "--seconds 1s"; do
	# shellcheck disable=SC2086
	"$B" pipeline $bad >/dev/null 2>&1
	rc=$?
	[ "$rc" = 2 ] || { echo "FAIL: 'pipeline $bad' exit $rc, expected 2"; fails=$((fails + 1)); }
done
"$B" pipeline --help | grep -q 'usage: sigma-bench pipeline' || { echo "FAIL: --help"; fails=$((fails + 1)); }
out=$("$B" pipeline --runs 1 --seconds 0.2 --ring-only 2>&1)
echo "$out" | tail -3
echo "$out" | grep -q '"ok":true' || { echo "FAIL: short run not ok"; fails=$((fails + 1)); }
echo "$out" | grep -q '"transport":"ring"' || { echo "FAIL: no ring scenario in JSON"; fails=$((fails + 1)); }
# the cross-core bound is measured (a producer thread ran), and each scenario is set against it
echo "$out" | grep -Eq '"xcore_gbps":[1-9][0-9]*\.' || { echo "FAIL: no cross-core bound"; fails=$((fails + 1)); }
echo "$out" | grep -Eq '"ratio_xcore":0*[0-9]\.[0-9]*[1-9]' || { echo "FAIL: no ratio_xcore"; fails=$((fails + 1)); }
out=$("$B" pipeline --runs 1 --rounds 3 --seconds 60 --ring-only --auth 2>&1)
echo "$out" | tail -1 | cut -c1-300
echo "$out" | grep -q '"ok":true' || { echo "FAIL: --auth run not ok"; fails=$((fails + 1)); }
n=$(echo "$out" | grep -o '"auth":true,"gbps"' | wc -l)
[ "$n" = 3 ] || { echo "FAIL: $n ring scenarios with auth, want 3"; fails=$((fails + 1)); }
n=$(echo "$out" | grep -Eo '"plain_gbps":[0-9.]+,"ratio_plain":[0-9.]+' | wc -l)
[ "$n" = 3 ] || { echo "FAIL: $n baselines beside auth, want 3"; fails=$((fails + 1)); }
# chunk bytes from the wire format (docs/protocol.md), not from sigma-bench:
# 9000 - 20 (IPv4) - 8 (UDP) - 48 (header) [- 32 (MAC trailer)], down to a multiple of 8
OUT=$out python3 - <<'PY' || { echo "FAIL: chunk_bytes"; fails=$((fails + 1)); }
import json
import os

doc = next(json.loads(line) for line in os.environ["OUT"].splitlines()
           if line.startswith('{"bench":"pipeline"'))
bad = []
plain = (9000 - 20 - 8 - 48) // 8 * 8
for s in doc["scenarios"]:
    want = (9000 - 20 - 8 - 48 - (32 if s["auth"] else 0)) // 8 * 8
    if s.get("chunk_bytes") != want:
        bad.append(f"{s['name']} auth {s['auth']}: chunk_bytes {s.get('chunk_bytes')}, "
                   f"want {want}")
if doc["chunk_bytes"] != plain:
    bad.append(f"top-level chunk_bytes {doc['chunk_bytes']}, want the plain runs' {plain}")
print("\n".join(bad) if bad else "chunk_bytes right for every scenario")
raise SystemExit(1 if bad else 0)
PY
echo "bench_pipeline_cli: $fails failed"
[ "$fails" = 0 ]
