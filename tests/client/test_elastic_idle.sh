#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# An elastic job (docs/cluster.md, "Elastic jobs") with a tensor that is not
# pushed for a long while: a drain in that while completes in bounded time
# (well under its timeout, and long before the tensor is pushed again), no
# rank keeps a session of the drained node (stopped at once, no rank sees it
# lost), and the idle tensor's later pushes, in the new node set, give sums
# exact bit for bit (elastic_workers checks every element in rank order). Both
# when the tensor is idle at the confirmations and when it stops between its
# confirmation and its switch round.
# Skipped without etcd.
# Usage: test_elastic_idle.sh sigma-udpd sigmactl elastic_workers
set -u
UDPD=$1
CTL=$2
W=$3
. "$(dirname "$0")/../dataplane/expect_lib.sh"
. "$(dirname "$0")/../../bench/etcd_lib.sh"
etcd_test_setup elastic-idle

etcd_test_start
CL=eli$$

declare -A NPID
# drained SFX IDLE_FROM DRAIN_AT EPOCH: 3 nodes and their job in cluster $CL$SFX; tensor 1
# pushed in rounds 0..IDLE_FROM-1 and 330..359 only; n2 drained once DRAIN_AT rounds are
# done: it must end in epoch EPOCH on n1,n3, n2 released, every sum exact
drained() {
	local sfx=$1 from=$2 at=$3 epoch=$4 cl=$CL$1 n rc IDLE_TO=330 T0 T1 AT
	for n in n1 n2 n3; do
		"$UDPD" --port 0 --name "$n" --unix "$TMP/$n$sfx.sock" --etcd "$URL" \
			--cluster "$cl" --ttl 2 >>"$TMP/$n$sfx.log" 2>&1 &
		PIDS+=($!)
		NPID[$n]=$!
	done
	for _ in $(seq 100); do
		[ "$(etcd_count "$URL" "/sigma/$cl/nodes/")" = 3 ] && break
		sleep 0.1
	done
	[ "$(etcd_count "$URL" "/sigma/$cl/nodes/")" = 3 ] && ok ||
		fail "$sfx: the nodes did not register"
	"$CTL" --node "unix:$TMP/n1$sfx.sock" --node "unix:$TMP/n2$sfx.sock" \
		--node "unix:$TMP/n3$sfx.sock" job create --workers 3 --open --mode deterministic \
		--partition-bytes 65536 --slots 65536 >"$TMP/job$sfx" 2>&1
	DESC=$(grep "^sigma-job=" "$TMP/job$sfx")
	[ -n "$DESC" ] && ok || { fail "$sfx: job create: $(cat "$TMP/job$sfx")"; return; }
	"$W" "$DESC" "$URL" "$cl" 360 77777,1000 --sleep-ms 60 --idle "1:$from:$IDLE_TO" \
		--rounds-log "$TMP/rounds$sfx" >"$TMP/out$sfx" 2>&1 &
	WP=$!
	PIDS+=("$WP")
	for _ in $(seq 600); do
		[ "$(cat "$TMP/rounds$sfx" 2>/dev/null | wc -l)" -ge "$at" ] && break
		sleep 0.05
	done
	T0=$(date +%s%N)
	"$CTL" --etcd "$URL" --cluster "$cl" drain n2 --timeout 15 >"$TMP/drain$sfx" 2>&1; rc=$?
	T1=$(date +%s%N)
	AT=$(wc -l <"$TMP/rounds$sfx")
	grep -q 'node n2 drained (it may stop now): 1 elastic job' "$TMP/drain$sfx" && [ $rc = 0 ] &&
		ok || fail "$sfx: drain: exit $rc after $(((T1 - T0) / 1000000)) ms:" \
			"$(cat "$TMP/drain$sfx")"
	grep -Eq "^job [0-9]+: epoch $epoch, nodes n1,n3\$" "$TMP/drain$sfx" && ok ||
		fail "$sfx: drain: $(cat "$TMP/drain$sfx")"
	echo "$sfx: sigmactl drain returned after $(((T1 - T0) / 1000000)) ms, at round $AT" \
		"(tensor 1 idle from round $from until round $IDLE_TO)"
	[ "$AT" -lt "$IDLE_TO" ] && ok ||
		fail "$sfx: drain returned only once tensor 1 was pushed again"
	"$CTL" --etcd "$URL" --cluster "$cl" elastic >"$TMP/el$sfx" 2>&1
	grep -Eq "^[0-9]+ +3 +$epoch +no +yes +n1,n3\$" "$TMP/el$sfx" && ok ||
		fail "$sfx: elastic: $(cat "$TMP/el$sfx")"
	# n2 released: stopped now (its record leaves etcd); a session still on it would lose it
	kill -TERM "${NPID[n2]}"
	wait "$WP"; rc=$?
	[ $rc = 0 ] && ok || { fail "$sfx: workers exit $rc"; tail -20 "$TMP/out$sfx"; }
	grep -q ', wrong: 0, failed ops: 0' "$TMP/out$sfx" && ok ||
		fail "$sfx: $(grep 'elements checked' "$TMP/out$sfx")"
	grep -q 'node n2 .* lost' "$TMP/out$sfx" &&
		fail "$sfx: a session still used n2: $(grep -m1 'node n2' "$TMP/out$sfx")" || ok
	[ "$(grep -c "^rank [0-9]: epoch $epoch, 2 nodes, 1 sessions" "$TMP/out$sfx")" = 3 ] && ok ||
		fail "$sfx: $(grep '^rank' "$TMP/out$sfx")"
	grep -E 'proposed|epoch [0-9] committed' "$TMP/out$sfx" | grep -E 'proposed|rank 0' |
		sed "s/^/$sfx: /"
	for n in "${NPID[@]}"; do kill "$n" 2>/dev/null; done
}

# 1. tensor 1 idle for 30 rounds (more than idle_ms, 1 s) when n2 drains: every rank
# confirms it idle, it switches at its next round
drained a 5 35 1
# 2. tensor 1 pushed until just after the confirmations, then idle below its switch
# round: rank 0 proposes the node set again once it is idle, and it switches there
drained b 40 38 2

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
