#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Failover benchmark. For each of KILLS runs (a fresh cluster in etcd, three
# sigma-udpd nodes with lease TTL_S, and a deterministic job of three tensors
# across them: open, or of tensors and recorded in etcd with JOB=fixed, whose
# survivors build the lost node's keys from the record):
# - the watch's and the failover copy's cost on the workers: 10 rounds with a
#   membership source against the same 10 rounds with the static node list;
# - the time from a node's SIGKILL to the end of the first round completed on
#   the survivors after the workers lost it, against the lease TTL.
# Then the membership watch alone on a worker: CPU time per watch and second
# while nothing changes, a v3 stream against a 100 ms range poll, and the cost
# of the call libsigma makes at its timer scans (bench/watch_cost.c).
# Medians of the runs; prints one JSON object (with the CPU and the load).
# Usage: bench/failover.sh BUILD_DIR [KILLS [TTL_S [JOB]]]   (JOB: open [default] or fixed)
set -u
B=$1
KILLS=${2:-5}
TTL=${3:-5}
JOB=${4:-open}
UDPD=$B/udpd/sigma-udpd
CTL=$B/app/sigmactl/sigmactl
W=$B/bench/failover_workers
WC=$B/bench/watch_cost
TMP=$(mktemp -d /tmp/sg_fobench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
. "$(dirname "$0")/etcd_lib.sh"
case $JOB in open | fixed) ;; *) echo '{"error": "JOB is open or fixed"}'; exit 2 ;; esac
P=$(free_ports 2)
URL=http://127.0.0.1:$P
PIDS+=("$(etcd_start b "$P" $((P + 1)))")
etcd_wait "$URL" || { echo '{"error": "etcd did not start"}'; exit 1; }
TENSORS=300000,1000,77777
LOAD0=$(cut -d' ' -f1 /proc/loadavg)
median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "null"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# setup I: nodes and a job in cluster bI; sets NODES and DESC
setup() {
	local nodes=() kind=(--open --slots 65536)
	NODES=()
	for n in 1 2 3; do
		"$UDPD" --port 0 --name "n$n" --unix "$TMP/n$n-$1.sock" --etcd "$URL" --cluster "b$1" \
			--ttl "$TTL" >"$TMP/n$n-$1.log" 2>&1 &
		PIDS+=($!)
		NODES+=($!)
		nodes+=(--node "unix:$TMP/n$n-$1.sock")
	done
	for _ in $(seq 100); do
		[ "$(etcd_count "$URL" "/sigma/b$1/nodes/")" = 3 ] && break
		sleep 0.1
	done
	[ "$JOB" = fixed ] && kind=(--tensor a:300000 --tensor b:1000 --tensor c:77777)
	DESC=$("$CTL" --etcd "$URL" --cluster "b$1" "${nodes[@]}" job create --workers 4 \
		--mode deterministic --partition-bytes 65536 "${kind[@]}" | grep '^sigma-job=')
}
: >"$TMP/kill"
: >"$TMP/with"
: >"$TMP/without"
for i in $(seq "$KILLS"); do
	setup "$i"
	# the watch's and the copy's cost: the same 10 rounds with membership, then without
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
# the watch alone: 4 watches for 10 s, stream then poll, 3 times interleaved
"$UDPD" --port 0 --name n1 --unix "$TMP/wc.sock" --etcd "$URL" --cluster wc --ttl "$TTL" \
	>"$TMP/wc.log" 2>&1 &
PIDS+=($!)
: >"$TMP/cs"
: >"$TMP/cp"
: >"$TMP/as"
for _ in 1 2 3; do
	for m in stream poll; do
		"$WC" "$URL" wc "$m" 4 10 100 >"$TMP/wc.out" 2>&1 || cat "$TMP/wc.out" >&2
		sed -n 's/.*"cpu_ms_per_watch_s": \([0-9.]*\).*/\1/p' "$TMP/wc.out" >>"$TMP/c${m:0:1}"
		[ "$m" = stream ] && sed -n 's/.*"alive_ns_per_call": \([0-9.]*\).*/\1/p' \
			"$TMP/wc.out" >>"$TMP/as"
	done
done
CS=$(median <"$TMP/cs")
CP=$(median <"$TMP/cp")
AS=$(median <"$TMP/as")
CPU=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
printf '{"bench": "failover", "cpu": "%s", "load": [%s, %s], "job": "%s", "kills": %d, "ttl_s": %d, ' \
	"$CPU" "$LOAD0" "$(cut -d' ' -f1 /proc/loadavg)" "$JOB" "$KILLS" "$TTL"
printf '"kill_to_failover_round_ms": [%s], "median_kill_to_failover_round_ms": %s, "ratio_to_ttl": %s, ' \
	"$(paste -sd, "$TMP/kill")" "$MK" \
	"$(awk -v a="$MK" -v t="$TTL" 'BEGIN {printf "%.3f", a / (t * 1000)}')"
printf '"rounds10_with_membership_ms": %s, "rounds10_static_ms": %s, "watch_and_copy_ratio": %s, ' \
	"$MW" "$MS" "$(awk -v a="$MW" -v b="$MS" 'BEGIN {printf "%.3f", a / b}')"
printf '"watch_cpu_ms_per_s": {"stream": %s, "poll_100ms": %s, "poll_over_stream": %s}, ' \
	"$CS" "$CP" "$(awk -v a="$CP" -v b="$CS" 'BEGIN {if (b > 0) printf "%.1f", a / b; else print "null"}')"
printf '"alive_ns_per_call": %s}\n' "$AS"
