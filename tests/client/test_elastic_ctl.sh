#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# sigmactl as the proposer of an elastic job (docs/cluster.md, "Drain and
# undrain", --propose): a job of tensors recorded in etcd (3 nodes, 3 ranks of
# elastic_workers, deterministic, every sum checked bit for bit in rank order)
# whose ranks never propose (--propose-none). `sigmactl drain n2 --propose`
# proposes the drain itself, giving n1 and n3 the keys that move to them first
# (without them, their next round fails with ERROR MISMATCH), and rewrites the
# job record once committed; `undrain n2 --propose` proposes n2 back (it kept the
# job). Every sum exact, no operation failed, no rank proposed anything. The
# keys each switch leaves on a node (control.keys_add.spare) are those that
# moved away from it: all of n2's once drained, then those n1 and n3 took;
# and keys added with job_keys_add for a switch that never comes.
# Lease TTL 5 s: nothing here waits for one, and a sanitizer build on a loaded
# VM stalled rounds for 2.5 s, near a TTL of 2 s (every node then seen lost).
# Skipped without etcd.
# Usage: test_elastic_ctl.sh sigma-udpd sigmactl elastic_workers
set -u
UDPD=$1
CTL=$2
W=$3
. "$(dirname "$0")/../dataplane/expect_lib.sh"
. "$(dirname "$0")/../../bench/etcd_lib.sh"
etcd_test_setup elastic-ctl

etcd_test_start
CL=elc$$

for n in n1 n2 n3; do
	"$UDPD" --port 0 --name "$n" --unix "$TMP/$n.sock" --etcd "$URL" --cluster "$CL" \
		--ttl 5 >>"$TMP/$n.log" 2>&1 &
	PIDS+=($!)
done
for _ in $(seq 100); do
	[ "$(etcd_count "$URL" "/sigma/$CL/nodes/")" = 3 ] && break
	sleep 0.1
done
[ "$(etcd_count "$URL" "/sigma/$CL/nodes/")" = 3 ] && ok || fail "the nodes did not register"
"$CTL" --etcd "$URL" --cluster "$CL" --node "unix:$TMP/n1.sock" --node "unix:$TMP/n2.sock" \
	--node "unix:$TMP/n3.sock" job create --workers 3 --tensor a:300000 --tensor b:1000 \
	--tensor c:77777 --mode deterministic --partition-bytes 65536 >"$TMP/job" 2>&1
DESC=$(grep "^sigma-job=" "$TMP/job")
JID=$(sed -n 's/^sigma-job=1;id=\([0-9]*\);.*/\1/p' <<<"$DESC")
[ -n "$DESC" ] && [ -n "$JID" ] && ok || fail "job create: $(cat "$TMP/job")"
# record_nodes: the node names of the job's record in etcd, sorted, comma-separated
record_nodes() {
	ETCDCTL_API=3 etcdctl --endpoints "$URL" get --print-value-only "/sigma/$CL/jobs/$JID" |
		grep -o '"name":"[^"]*"' | cut -d'"' -f4 | sort | paste -sd, -
}
# spare NODE: its control.keys_add.spare, the keys it holds that the record does not place
# there
spare() {
	"$CTL" -s "unix:$TMP/$1.sock" --json stats 2>/dev/null | python3 -c 'import json, sys
print(json.load(sys.stdin)["control"]["keys_add"]["spare"])'
}
# spare_is NODE WANT WHAT: NODE's spare keys become WANT within 5 s
spare_is() {
	local got
	for _ in $(seq 50); do got=$(spare "$1"); [ "$got" = "$2" ] && break; sleep 0.1; done
	[ "$got" = "$2" ] && ok || fail "$3: $1 holds $got spare key(s), not $2"
	echo "$3: $1: $got spare key(s)"
}
"$W" "$DESC" "$URL" "$CL" 260 300000,1000,77777 --sleep-ms 60 --propose-none >"$TMP/out" 2>&1 &
WP=$!
PIDS+=("$WP")
sleep 2

"$CTL" --etcd "$URL" --cluster "$CL" drain n2 --propose --timeout 30 >"$TMP/drain" 2>&1; rc=$?
[ $rc = 0 ] && grep -q 'node n2 drained (it may stop now): 1 elastic job' "$TMP/drain" && ok ||
	fail "drain --propose: exit $rc: $(cat "$TMP/drain")"
grep -q "^job $JID: proposed epoch 1: drain n2\$" "$TMP/drain" && ok ||
	fail "drain: sigmactl did not propose: $(cat "$TMP/drain")"
grep -Eq "^job $JID: node n[13]: [0-9]+ key\\(s\\) of its [0-9]+ in the proposed node set added" \
	"$TMP/drain" && ok || fail "drain: no keys added to a node that stays: $(cat "$TMP/drain")"
grep -q "^job $JID: record .* rewritten for epoch 1 (2 node(s))" "$TMP/drain" && ok ||
	fail "drain: record not rewritten: $(cat "$TMP/drain")"
[ "$(record_nodes)" = n1,n3 ] && ok || fail "after the drain the record names $(record_nodes)"
sed 's/^/drain: /' "$TMP/drain"
# the keys the nodes that stay took from n2 (sigmactl's job_keys_add, above)
ADD1=$(sed -n "s/^job $JID: node n1: \([0-9]*\) key(s) .*/\1/p" "$TMP/drain")
ADD3=$(sed -n "s/^job $JID: node n3: \([0-9]*\) key(s) .*/\1/p" "$TMP/drain")
# left by the switch: every key of n2's (out of the job's node set), none of n1's or n3's
spare_is n2 "$((ADD1 + ADD3))" drain
spare_is n1 0 drain
spare_is n3 0 drain
sleep 1

"$CTL" --etcd "$URL" --cluster "$CL" undrain n2 --propose --timeout 30 >"$TMP/undrain" 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'node n2 undrained' "$TMP/undrain" && ok ||
	fail "undrain --propose: exit $rc: $(cat "$TMP/undrain")"
grep -q "^job $JID: proposed epoch 2: join n2\$" "$TMP/undrain" && ok ||
	fail "undrain: sigmactl did not propose: $(cat "$TMP/undrain")"
for _ in $(seq 50); do [ "$(record_nodes)" = n1,n2,n3 ] && break; sleep 0.1; done
[ "$(record_nodes)" = n1,n2,n3 ] && ok || fail "after the undrain the record names $(record_nodes)"
sed 's/^/undrain: /' "$TMP/undrain"
# n2's keys back to it: those n1 and n3 took at the drain are spare there now
spare_is n1 "$ADD1" undrain
spare_is n3 "$ADD3" undrain
spare_is n2 0 undrain

wait "$WP"; rc=$?
[ $rc = 0 ] && ok || { fail "workers exit $rc"; tail -20 "$TMP/out"; }
grep -q ', wrong: 0, failed ops: 0' "$TMP/out" && ok || fail "$(grep 'elements checked' "$TMP/out")"
grep -q 'proposed epoch' "$TMP/out" && fail "a rank proposed: $(grep -m1 proposed "$TMP/out")" ||
	ok
[ "$(grep -c '^rank [0-9]: epoch 2, 3 nodes' "$TMP/out")" = 3 ] && ok ||
	fail "$(grep '^rank' "$TMP/out")"
grep -E 'elements checked|round ms' "$TMP/out"
# keys added for a switch that never comes (a proposal aborted after job_keys_add): every
# key of the job given to n1 (a 19, b 1, c 5 partitions of 64 KiB); those new there are
# spare, on top of the 3 the undrain left
ALL=$(python3 -c 'print(",".join(str(k) for k in [*range(19), 65536, *range(131072, 131077)]))')
"$CTL" -s "unix:$TMP/n1.sock" --json call job_keys_add "{\"id\": $JID, \"keys\": [$ALL]}" \
	>"$TMP/all" 2>&1 && ok || fail "job_keys_add of every key: $(cat "$TMP/all")"
NEW=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["added"])' "$TMP/all")
[ "${NEW:-0}" -gt 0 ] && ok || fail "job_keys_add of every key added none: $(cat "$TMP/all")"
spare_is n1 "$((ADD1 + ${NEW:-0}))" aborted

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
