#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Elastic jobs (docs/cluster.md, "Elastic jobs") against a real etcd started
# here, sigma-udpd nodes registered under leases, an open deterministic job of
# 3 ranks (elastic_workers, every sum checked bit for bit in rank order):
# 1. join: 2 nodes, a third registers mid-job: one proposal, every rank
#    confirms, every tensor switches at one round, only partitions that move to
#    the newcomer move, and the newcomer sums them;
# 2. rejoin: a node SIGKILLed mid-job (failover), restarted: back in the job,
#    its partitions back to it (the placement before the kill);
# 3. racing proposals: every rank proposes the same join: one wins, the others
#    lose the transaction, one epoch;
# 4. a rank that never confirms (a plain session): the proposal is aborted
#    within the bound, naming the rank, and the job goes on on its node set;
# 5. drain and undrain with sigmactl: the node leaves every job at an agreed
#    round and comes back, no operation failed;
# 0. first: a job of tensors recorded in etcd (3 nodes): n2 drained (its keys move
#    to n1 and n3, which stay: job_keys_add from the proposer), n4 joins (made with
#    the tensors over the new set), then n3 is SIGKILLed: failover from the record
#    rewritten at each switch; every sum exact, the record naming the current nodes,
#    and job_keys_add for an unknown job or a key not of the job refused and counted.
# Skipped without etcd.
# Usage: test_elastic.sh sigma-udpd sigmactl elastic_workers
set -u
UDPD=$1
CTL=$2
W=$3
. "$(dirname "$0")/../dataplane/expect_lib.sh"
. "$(dirname "$0")/../../bench/etcd_lib.sh"
etcd_test_setup elastic

etcd_test_start
CL=el$$
TENSORS=300000,1000,77777

# node SFX NAME: start sigma-udpd NAME in cluster $CL$SFX; its pid in NPID[NAME]
declare -A NPID
node() {
	"$UDPD" --port 0 --name "$2" --unix "$TMP/$2$1.sock" --etcd "$URL" --cluster "$CL$1" \
		--ttl "${TTL:-2}" >>"$TMP/$2$1.log" 2>&1 &
	PIDS+=($!)
	NPID[$2]=$!
}
# wait_nodes SFX COUNT
wait_nodes() {
	for _ in $(seq 100); do
		[ "$(etcd_count "$URL" "/sigma/$CL$1/nodes/")" = "$2" ] && return 0
		sleep 0.1
	done
	fail "$2 nodes of $CL$1 did not register"
	return 1
}
# job SFX NODES...: an open deterministic job of 3 ranks on the nodes, in DESC
job() {
	local sfx=$1 args=()
	shift
	for n in "$@"; do args+=(--node "unix:$TMP/$n$sfx.sock"); done
	"$CTL" "${args[@]}" job create --workers 3 --open --mode deterministic \
		--partition-bytes 65536 --slots 65536 >"$TMP/job$sfx" 2>&1
	DESC=$(grep "^sigma-job=" "$TMP/job$sfx")
	[ -n "$DESC" ] || { fail "job create"; cat "$TMP/job$sfx"; }
}
# moved_only_to NODE: every partition that moved (place lines) moved to NODE
moved_only_to() {
	awk -v n="$1" '/^place / && $4 != $5 && $5 != n {bad++} /^place / && $4 != $5 {mv++}
		END {print mv + 0, bad + 0}' "$TMP/out"
}
# begin SFX "NODES" ROUNDS [WORKER-ARGS...]: the nodes, their job, and the workers in the
# background (pid in WP, output in TMP/out), a round every 60 ms or so
begin() {
	local sfx=$1 names=$2 rounds=$3 n
	shift 3
	for n in $names; do node "$sfx" "$n"; done
	wait_nodes "$sfx" "$(wc -w <<<"$names")"
	# shellcheck disable=SC2086 # the names are words
	job "$sfx" $names
	"$W" "$DESC" "$URL" "$CL$sfx" "$rounds" "$TENSORS" --sleep-ms 60 "$@" >"$TMP/out" 2>&1 &
	WP=$!
	PIDS+=("$WP")
}
# finished WHAT: the workers ended well, every sum exact
finished() {
	wait "$WP"
	local rc=$?
	[ $rc = 0 ] && ok || { fail "$1: workers exit $rc"; tail -20 "$TMP/out"; }
	grep -q ', wrong: 0, failed ops: 0' "$TMP/out" && ok || fail "$1: $(tail -1 "$TMP/out")"
}

# 0. a job of tensors, recorded in etcd, through a drain, a join and a failover
for n in n1 n2 n3; do node f "$n"; done
wait_nodes f 3
"$CTL" --etcd "$URL" --cluster "${CL}f" --node "unix:$TMP/n1f.sock" --node "unix:$TMP/n2f.sock" \
	--node "unix:$TMP/n3f.sock" job create --workers 3 --tensor a:300000 --tensor b:1000 \
	--tensor c:77777 --mode deterministic --partition-bytes 65536 >"$TMP/jobf" 2>&1
DESC=$(grep "^sigma-job=" "$TMP/jobf")
JID=$(sed -n 's/^sigma-job=1;id=\([0-9]*\);.*/\1/p' <<<"$DESC")
[ -n "$DESC" ] && [ -n "$JID" ] && ok || fail "fixed: job create: $(cat "$TMP/jobf")"
# record_nodes: the node names of the job's record in etcd, sorted, comma-separated
record_nodes() {
	ETCDCTL_API=3 etcdctl --endpoints "$URL" get --print-value-only "/sigma/${CL}f/jobs/$JID" |
		grep -o '"name":"[^"]*"' | cut -d'"' -f4 | sort | paste -sd, -
}
[ "$(record_nodes)" = n1,n2,n3 ] && ok || fail "fixed: record names $(record_nodes)"
"$W" "$DESC" "$URL" "${CL}f" 260 "$TENSORS" --sleep-ms 60 >"$TMP/out" 2>&1 &
WP=$!
PIDS+=("$WP")
sleep 2
"$CTL" --etcd "$URL" --cluster "${CL}f" drain n2 --timeout 30 >"$TMP/drain" 2>&1; rc=$?
[ $rc = 0 ] && ok || fail "fixed: drain: exit $rc: $(cat "$TMP/drain")"
# the record follows the switch (rank 0 rewrites it once the epoch is committed)
for _ in $(seq 50); do [ "$(record_nodes)" = n1,n3 ] && break; sleep 0.1; done
[ "$(record_nodes)" = n1,n3 ] && ok || fail "fixed: after the drain the record names $(record_nodes)"
node f n4
for _ in $(seq 100); do grep -q 'epoch 2 committed' "$TMP/out" && break; sleep 0.1; done
for _ in $(seq 50); do [ "$(record_nodes)" = n1,n3,n4 ] && break; sleep 0.1; done
[ "$(record_nodes)" = n1,n3,n4 ] && ok || fail "fixed: after the join the record names $(record_nodes)"
sleep 1
kill -KILL "${NPID[n3]}"
finished fixed
grep -q 'proposed epoch 1: drain n2' "$TMP/out" && ok || fail "fixed: no drain proposal"
grep -q 'proposed epoch 2: join n4' "$TMP/out" && ok || fail "fixed: no join proposal"
[ "$(grep -c '^rank [0-9]: epoch 2, 3 nodes' "$TMP/out")" = 3 ] && ok ||
	fail "fixed: $(grep '^rank' "$TMP/out")"
grep -q 'node n[13]: [0-9]* key(s) of its [0-9]* in the proposed node set added there' \
	"$TMP/out" && ok || fail "fixed: no keys added to a node that stays"
grep -q 'its record in etcd (lease [0-9a-f]*) no longer names this node' "$TMP/n2f.log" && ok ||
	fail "fixed: n2 does not say the record left it out: $(grep -h 'job ' "$TMP/n2f.log" | tail -3)"
grep -q 'node(s) n3 lost .*now summed here' "$TMP/n1f.log" "$TMP/n4f.log" && ok ||
	fail "fixed: no survivor took n3's keys from the record: $(grep -h 'job ' "$TMP"/n[14]f.log | tail -5)"
grep -h 'job_keys_add\|rewritten\|now summed here' "$TMP/out" "$TMP"/n[134]f.log | cut -c1-200 |
	sed 's/^/fixed: /' | head -8
# bad input: an unknown job, a key of another tensor count, a key given twice: refused,
# counted, nothing added (the job's sums above stay exact: checked by the workers)
if "$CTL" -s "unix:$TMP/n1f.sock" call job_keys_add '{"id": 99999, "keys": [1]}' \
	>"$TMP/bad1" 2>&1; then fail "fixed: an unknown job took keys"; else ok; fi
grep -q 'no such job: 99999' "$TMP/bad1" && ok || fail "fixed: unknown job: $(cat "$TMP/bad1")"
if "$CTL" -s "unix:$TMP/n1f.sock" call job_keys_add "{\"id\": $JID, \"keys\": [196608]}" \
	>"$TMP/bad2" 2>&1; then fail "fixed: a key of tensor 3 was taken"; else ok; fi
grep -q 'is not a key of job' "$TMP/bad2" && ok || fail "fixed: foreign key: $(cat "$TMP/bad2")"
# partition 1 of tensor b (1000 elements: one partition)
if "$CTL" -s "unix:$TMP/n1f.sock" call job_keys_add "{\"id\": $JID, \"keys\": [65537]}" \
	>"$TMP/bad3" 2>&1; then fail "fixed: a partition tensor b lacks was taken"; else ok; fi
grep -q 'is not a key of job' "$TMP/bad3" && ok || fail "fixed: no such partition: $(cat "$TMP/bad3")"
if "$CTL" -s "unix:$TMP/n1f.sock" call job_keys_add "{\"id\": $JID, \"keys\": [0, 0]}" \
	>"$TMP/bad4" 2>&1; then fail "fixed: a key given twice was taken"; else ok; fi
grep -q 'given twice' "$TMP/bad4" && ok || fail "fixed: twice: $(cat "$TMP/bad4")"
"$CTL" -s "unix:$TMP/n1f.sock" --json stats >"$TMP/st1" 2>&1
KA=$(python3 -c 'import json, sys; k = json.load(open(sys.argv[1]))["control"]["keys_add"]
print(k["requests"], k["added"], k["refused"])' "$TMP/st1")
read -r KREQ KADD KREF <<<"$KA"
[ "$KREF" = 4 ] && [ "${KREQ:-0}" -ge 2 ] && ok || fail "fixed: n1's keys_add counters: $KA"
echo "fixed: n1 keys_add requests, keys added, refused: $KA"
for p in "${NPID[@]}"; do kill "$p" 2>/dev/null; done

# 1. join
begin j "n1 n2" 80
sleep 3
node j n3
finished join
grep -q 'proposed epoch 1: join n3' "$TMP/out" && ok || fail "join: no proposal of n3"
[ "$(grep -c 'epoch 1 committed' "$TMP/out")" = 3 ] && ok || fail "join: not every rank committed"
[ "$(grep -c '^rank [0-9]: epoch 1, 3 nodes' "$TMP/out")" = 3 ] && ok ||
	fail "join: $(grep '^rank' "$TMP/out")"
# one switch round per tensor, the same on every rank
[ "$(grep 'epoch 1 committed' "$TMP/out" | sed 's/.*first round//' | sort -u | wc -l)" = 1 ] && ok ||
	fail "join: ranks disagree on the switch rounds: $(grep 'committed' "$TMP/out")"
read -r MV BAD <<<"$(moved_only_to n3)"
[ "$MV" -gt 0 ] && [ "$BAD" = 0 ] && ok || fail "join: $MV moved, $BAD not to n3"
"$CTL" -s "unix:$TMP/n3j.sock" --json jobs >"$TMP/n3jobs" 2>&1
grep -q '"keys"' "$TMP/n3jobs" && ok || fail "join: n3 has no job: $(cat "$TMP/n3jobs")"
echo "join: $MV partitions moved to n3; $(grep -m1 'epoch 1 committed' "$TMP/out")"
for p in "${NPID[@]}"; do kill "$p" 2>/dev/null; done

# 2. rejoin: n2 killed at about 2 s, restarted at about 4 s
begin r "n1 n2 n3" 140
sleep 2
kill -KILL "${NPID[n2]}"
sleep 3
T_RESTART=$(($(date +%s%N) / 1000000))
node r n2
finished rejoin
grep -q 'proposed epoch 1: join n2' "$TMP/out" && ok || fail "rejoin: no proposal of n2"
read -r MV BAD <<<"$(moved_only_to none)"
[ "$MV" = 0 ] && ok || fail "rejoin: $MV partitions are not back where they were"
grep -q 'node n2 .* lost' "$TMP/out" && ok || fail "rejoin: n2 was not lost first"
T_BACK=$(grep -m1 'epoch 1 committed' "$TMP/out" | sed -n 's/.*at unix ms \([0-9]*\).*/\1/p')
echo "rejoin: n2 back in the job's node set $((T_BACK - T_RESTART)) ms after its restart (TTL 2000 ms)"
[ -n "$T_BACK" ] && [ $((T_BACK - T_RESTART)) -lt 4000 ] && ok ||
	fail "rejoin: not back within 2 TTLs of its restart"
for p in "${NPID[@]}"; do kill "$p" 2>/dev/null; done

# 3. racing proposals: every rank proposes
begin x "n1 n2" 80 --propose-all
sleep 3
node x n3
finished race
[ "$(grep -c 'proposed epoch 1' "$TMP/out")" = 1 ] && ok ||
	fail "race: $(grep -c 'proposed epoch 1' "$TMP/out") proposals of epoch 1 won"
[ "$(grep -c '^rank [0-9]: epoch 1, 3 nodes' "$TMP/out")" = 3 ] && ok || fail "race: split"
for p in "${NPID[@]}"; do kill "$p" 2>/dev/null; done

# 4. rank 2 never confirms: aborted within confirm_ms (2 s) + a poll, naming it
begin a "n1 n2" 80 --plain-rank 2 --confirm-ms 2000
sleep 2
node a n3
finished no-confirm
grep -q 'proposal 1 aborted: rank(s) 2 did not confirm within 2000 ms' "$TMP/out" && ok ||
	fail "no-confirm: $(grep -m2 -E 'abort|proposed' "$TMP/out")"
grep -q 'epoch 1 committed' "$TMP/out" && fail "no-confirm: a switch without rank 2" || ok
for p in "${NPID[@]}"; do kill "$p" 2>/dev/null; done

# 5. drain n2 with sigmactl, stop it, restart it, undrain it: back, nothing failed
begin d "n1 n2 n3" 150
sleep 2
T0=$(date +%s%N)
"$CTL" --etcd "$URL" --cluster "${CL}d" drain n2 --timeout 30 >"$TMP/drain" 2>&1; rc=$?
T1=$(date +%s%N)
[ $rc = 0 ] && grep -q 'node n2 drained (it may stop now): 1 elastic job' "$TMP/drain" && ok ||
	fail "drain: exit $rc: $(cat "$TMP/drain")"
grep -Eq '^job [0-9]+: epoch 1, nodes n1,n3$' "$TMP/drain" && ok || fail "drain: $(cat "$TMP/drain")"
echo "drain: sigmactl returned after $(((T1 - T0) / 1000000)) ms"
"$CTL" --etcd "$URL" --cluster "${CL}d" elastic >"$TMP/el" 2>&1
grep -Eq '^[0-9]+ +3 +1 +no +yes +n1,n3$' "$TMP/el" && ok || fail "elastic: $(cat "$TMP/el")"
kill -TERM "${NPID[n2]}"
sleep 1
node d n2
"$CTL" --etcd "$URL" --cluster "${CL}d" undrain n2 --timeout 30 >"$TMP/undrain" 2>&1; rc=$?
[ $rc = 0 ] && grep -q 'node n2 undrained' "$TMP/undrain" && ok ||
	fail "undrain: exit $rc: $(cat "$TMP/undrain")"
finished drain
grep -q 'proposed epoch 1: drain n2' "$TMP/out" && ok || fail "drain: no proposal"
grep -q 'proposed epoch 2: join n2' "$TMP/out" && ok || fail "undrain: no proposal"
read -r MV BAD <<<"$(moved_only_to none)"
[ "$MV" = 0 ] && ok || fail "undrain: $MV partitions are not back where they were"
grep 'round ms' "$TMP/out" | sed 's/^/drain: /'
for p in "${NPID[@]}"; do kill "$p" 2>/dev/null; done

# 6. etcd down during a switch (SIGSTOP as soon as the proposal is there): with
# etcd back within wait_ms the switch waits and goes on; with etcd away past it
# the ranks at their limit fail naming why. Never a split, never a wrong sum.
EPID=${PIDS[0]}
# pause_at_proposal SFX SECONDS
pause_at_proposal() {
	for _ in $(seq 300); do
		[ "$(etcd_count "$URL" "/sigma/$CL$1/elastic/" | grep -c .)" -gt 0 ] &&
			ETCDCTL_API=3 etcdctl --endpoints "$URL" get --prefix "/sigma/$CL$1/elastic/" \
				--keys-only 2>/dev/null | grep -q /proposal/ && break
		sleep 0.01
	done
	kill -STOP "$EPID"
	sleep "$2"
	kill -CONT "$EPID"
}
for c in back:2:60000 away:4:1000; do
	IFS=: read -r name secs wait <<<"$c"
	TTL=15
	begin "$name" "n1 n2" 100 --wait-ms "$wait" --ranks-wait-ms 5000
	sleep 1
	node "$name" n3
	pause_at_proposal "$name" "$secs"
	wait "$WP"; rc=$?
	TTL=2
	grep -q ', wrong: 0,' "$TMP/out" && ok || fail "etcd $name: $(tail -1 "$TMP/out")"
	E=$(grep -c '^rank [0-9]: epoch 1,' "$TMP/out")
	if [ $rc = 0 ]; then
		# a job that went on: every rank on one node set
		[ "$E" = 0 ] || [ "$E" = 3 ] && ok || fail "etcd $name: split: $(grep '^rank' "$TMP/out")"
	elif [ "$name" = away ] && grep -q 'not decided within 1000 ms' "$TMP/out"; then
		ok # failed loudly: the ranks that could not tell, naming why
	else
		fail "etcd $name: exit $rc: $(grep -m3 -E 'round|decided' "$TMP/out")"
	fi
	echo "etcd $name ${secs} s: exit $rc, $E rank(s) in epoch 1; $(grep -m1 -E 'not decided' "$TMP/out" | cut -c1-160)"
	for p in "${NPID[@]}"; do kill "$p" 2>/dev/null; done
done

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
