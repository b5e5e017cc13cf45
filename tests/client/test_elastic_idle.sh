#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# An elastic job (docs/cluster.md, "Elastic jobs") with a tensor that is not
# pushed for a long while: a drain in that while completes in bounded time
# (well under its timeout, and long before the tensor is pushed again), no
# rank keeps a session of the drained node (stopped at once, no rank sees it
# lost), and the idle tensor's later pushes, in the new node set, give sums
# exact bit for bit (elastic_workers checks every element in rank order).
# Skipped without etcd.
# Usage: test_elastic_idle.sh sigma-udpd sigmactl elastic_workers
set -u
UDPD=$1
CTL=$2
W=$3
. "$(dirname "$0")/../dataplane/expect_lib.sh"
. "$(dirname "$0")/../../bench/etcd_lib.sh"
etcd_test_setup elastic-idle

P=$(free_ports 3)
URL=http://127.0.0.1:$P
PIDS+=("$(etcd_start e "$P" $((P + 1)))")
etcd_wait "$URL" || { echo "FAIL: etcd did not start"; cat "$TMP/etcd-e.log"; exit 1; }
CL=eli$$

declare -A NPID
for n in n1 n2 n3; do
	"$UDPD" --port 0 --name "$n" --unix "$TMP/$n.sock" --etcd "$URL" --cluster "$CL" \
		--ttl 2 >>"$TMP/$n.log" 2>&1 &
	PIDS+=($!)
	NPID[$n]=$!
done
for _ in $(seq 100); do
	[ "$(etcd_count "$URL" "/sigma/$CL/nodes/")" = 3 ] && break
	sleep 0.1
done
[ "$(etcd_count "$URL" "/sigma/$CL/nodes/")" = 3 ] && ok || fail "the nodes did not register"
"$CTL" --node "unix:$TMP/n1.sock" --node "unix:$TMP/n2.sock" --node "unix:$TMP/n3.sock" \
	job create --workers 3 --open --mode deterministic --partition-bytes 65536 \
	--slots 65536 >"$TMP/job" 2>&1
DESC=$(grep "^sigma-job=" "$TMP/job")
[ -n "$DESC" ] && ok || { fail "job create: $(cat "$TMP/job")"; exit 1; }

# tensor 1 pushed in rounds 0..4 and 330..359 only: idle for 20 s or more
IDLE_TO=330
"$W" "$DESC" "$URL" "$CL" 360 77777,1000 --sleep-ms 60 --idle 1:5:$IDLE_TO \
	--rounds-log "$TMP/rounds" >"$TMP/out" 2>&1 &
WP=$!
PIDS+=("$WP")
# drain once tensor 1 has been idle for 30 rounds (more than idle_ms, 1 s)
for _ in $(seq 600); do
	[ "$(cat "$TMP/rounds" 2>/dev/null | wc -l)" -ge 35 ] && break
	sleep 0.1
done
T0=$(date +%s%N)
"$CTL" --etcd "$URL" --cluster "$CL" drain n2 --timeout 8 >"$TMP/drain" 2>&1; rc=$?
T1=$(date +%s%N)
AT=$(wc -l <"$TMP/rounds")
[ $rc = 0 ] && grep -q 'node n2 drained (it may stop now): 1 elastic job' "$TMP/drain" && ok ||
	fail "drain: exit $rc after $(((T1 - T0) / 1000000)) ms: $(cat "$TMP/drain")"
grep -Eq '^job [0-9]+: epoch 1, nodes n1,n3$' "$TMP/drain" && ok || fail "drain: $(cat "$TMP/drain")"
echo "drain: sigmactl returned after $(((T1 - T0) / 1000000)) ms, at round $AT (tensor 1 idle until round $IDLE_TO)"
[ "$AT" -lt "$IDLE_TO" ] && ok || fail "drain: returned only once tensor 1 was pushed again"
"$CTL" --etcd "$URL" --cluster "$CL" elastic >"$TMP/el" 2>&1
grep -Eq '^[0-9]+ +3 +1 +no +yes +n1,n3$' "$TMP/el" && ok || fail "elastic: $(cat "$TMP/el")"
# n2 released: stopped now (its record leaves etcd); a session still on it would lose it
kill -TERM "${NPID[n2]}"
wait "$WP"; rc=$?
[ $rc = 0 ] && ok || { fail "workers exit $rc"; tail -20 "$TMP/out"; }
grep -q ', wrong: 0, failed ops: 0' "$TMP/out" && ok || fail "$(grep 'elements checked' "$TMP/out")"
grep -q 'node n2 .* lost' "$TMP/out" && fail "a session still used n2: $(grep -m1 'node n2' "$TMP/out")" || ok
[ "$(grep -c '^rank [0-9]: epoch 1, 2 nodes, 1 sessions' "$TMP/out")" = 3 ] && ok ||
	fail "$(grep '^rank' "$TMP/out")"
grep 'epoch 1 committed' "$TMP/out" | head -3
for p in "${NPID[@]}"; do kill "$p" 2>/dev/null; done

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
