#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Failover benchmark: the time from a summation node's SIGKILL to the end of
# the first round completed after the workers lost it (on the survivors), over several kills (a fresh etcd cluster record,
# three sigma-udpd nodes and an open deterministic job for each), against the
# lease TTL; and the cost of the membership watch and the failover copy on a
# worker: the time of the same rounds with a membership source and without
# (--static), median of the runs. Prints one JSON object.
# Usage: bench/failover.sh BUILD_DIR [KILLS [TTL_S]]
set -u
B=$1
KILLS=${2:-5}
TTL=${3:-5}
UDPD=$B/client/sigma-udpd
CTL=$B/control/sigmactl
W=$B/bench/failover_workers
TMP=$(mktemp -d /tmp/sg_fobench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
. "$(dirname "$0")/etcd_lib.sh"
P=$(free_ports 2)
URL=http://127.0.0.1:$P
PIDS+=("$(etcd_start b "$P" $((P + 1)))")
etcd_wait "$URL" || { echo '{"error": "etcd did not start"}'; exit 1; }
TENSORS=300000,1000,77777
median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "null"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# run I: nodes and a job in cluster bI; sets NODES and DESC
setup() {
	NODES=()
	for n in 1 2 3; do
		"$UDPD" --port 0 --name "n$n" --unix "$TMP/n$n-$1.sock" --etcd "$URL" --cluster "b$1" \
			--ttl "$TTL" >"$TMP/n$n-$1.log" 2>&1 &
		PIDS+=($!)
		NODES+=($!)
	done
	for _ in $(seq 100); do
		[ "$(etcd_count "$URL" "/sigma/b$1/nodes/")" = 3 ] && break
		sleep 0.1
	done
	DESC=$("$CTL" --node "unix:$TMP/n1-$1.sock" --node "unix:$TMP/n2-$1.sock" \
		--node "unix:$TMP/n3-$1.sock" job create --workers 4 --open --mode deterministic \
		--partition-bytes 65536 --slots 65536 | grep '^sigma-job=')
}
: >"$TMP/kill"
: >"$TMP/with"
: >"$TMP/without"
for i in $(seq "$KILLS"); do
	setup "$i"
	# the watch's cost: the same 10 rounds with membership, then without (--static)
	s0=$(date +%s%N)
	"$W" "$DESC" "$URL" "b$i" 10 "$TENSORS" >"$TMP/w.out" 2>&1 || { cat "$TMP/w.out" >&2; }
	s1=$(date +%s%N)
	"$W" "$DESC" "$URL" "b$i" 10 "$TENSORS" --static --first-round 10 >"$TMP/s.out" 2>&1 ||
		cat "$TMP/s.out" >&2
	s2=$(date +%s%N)
	echo $(((s1 - s0) / 1000000)) >>"$TMP/with"
	echo $(((s2 - s1) / 1000000)) >>"$TMP/without"
	# a kill in the third of 8 rounds
	"$W" "$DESC" "$URL" "b$i" 8 "$TENSORS" --first-round 20 --kill "${NODES[$((i % 3))]}@2" \
		--json >"$TMP/k.out" 2>&1 || { cat "$TMP/k.out" >&2; }
	sed -n 's/.*"kill_to_failover_round_ms": \([0-9.]*\).*/\1/p' "$TMP/k.out" >>"$TMP/kill"
	for p in "${NODES[@]}"; do kill -KILL "$p" 2>/dev/null; done
done
MK=$(median <"$TMP/kill")
MW=$(median <"$TMP/with")
MS=$(median <"$TMP/without")
CPU=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
printf '{"bench": "failover", "cpu": "%s", "kills": %d, "ttl_s": %d, "kill_to_failover_round_ms": [%s], ' \
	"$CPU" "$KILLS" "$TTL" "$(paste -sd, "$TMP/kill")"
printf '"median_kill_to_failover_round_ms": %s, "ratio_to_ttl": %s, ' "$MK" \
	"$(awk -v a="$MK" -v t="$TTL" 'BEGIN {printf "%.3f", a / (t * 1000)}')"
printf '"rounds10_with_membership_ms": %s, "rounds10_static_ms": %s, "watch_and_copy_ratio": %s}\n' \
	"$MW" "$MS" "$(awk -v a="$MW" -v b="$MS" 'BEGIN {printf "%.3f", a / b}')"
