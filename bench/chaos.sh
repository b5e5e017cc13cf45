#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Chaos on local nodes: an elastic job (docs/cluster.md, "Elastic jobs") of
# WORKERS ranks (bench/elastic_workers: deterministic mode, 3 tensors, every
# result checked bit for bit against the rank-order sum) runs for DURATION_S on
# NODES sigma-udpd nodes and a 3-member etcd cluster, while random events, one
# every GAP_MIN..GAP_MAX s (seeded by SEED, each logged), hit it:
#   kill    SIGKILL a node, restart it 1-3 s later (same name, new lease)
#   drain   sigmactl drain a node of the job, then undrain it
#   add     start a new node (at most 5 in all)
#   etcd    stop an etcd member (SIGTERM) for 2-5 s, then start it again
#   tc      link-rate changes need the emulated cluster (docs/emulated-cluster.md):
#           on local nodes each is logged as skipped
# Prints one JSON object: the rounds done, each event with the time from it
# to the end of the first round after it (and their p50, p99, against the
# lease TTL), the job's node count over time (capacity), the wrong sums and
# the failed operations with their reasons, the RSS of the nodes and of the
# workers' process (first and last), and the load.
# Usage: bench/chaos.sh BUILD_DIR [DURATION_S [SEED [NODES [WORKERS [GAP_MIN [GAP_MAX]]]]]]
set -u
B=$1
DURATION=${2:-600}
SEED=${3:-1}
NODES=${4:-3}
WORKERS=${5:-4}
GAP_MIN=${6:-10}
GAP_MAX=${7:-30}
TTL=2
UDPD=$B/udpd/sigma-udpd
CTL=$B/app/sigmactl/sigmactl
W=$B/bench/elastic_workers
TMP=$(mktemp -d /tmp/sg_chaos.XXXXXX)
PIDS=()
declare -A NPID
cleanup() {
	for p in "${PIDS[@]}" "${NPID[@]}" "${EPIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
. "$(dirname "$0")/etcd_lib.sh"
RANDOM=$SEED
now_ms() { echo $(($(date +%s%N) / 1000000)); }
rnd() { echo $((RANDOM % ($2 - $1 + 1) + $1)); } # rnd LO HI
log() { echo "$(now_ms) $*" >>"$TMP/events"; }

# a 3-member etcd cluster
P=$(free_ports 6)
CLUSTER_ARG=""
for m in 0 1 2; do
	CLUSTER_ARG+="${CLUSTER_ARG:+,}m$m=http://127.0.0.1:$((P + 2 * m + 1))"
done
declare -a EPIDS
etcd_member() { # etcd_member M: start member M (again)
	etcd --name "m$1" --data-dir "$TMP/etcd-m$1.data" \
		--listen-client-urls "http://127.0.0.1:$((P + 2 * $1))" \
		--advertise-client-urls "http://127.0.0.1:$((P + 2 * $1))" \
		--listen-peer-urls "http://127.0.0.1:$((P + 2 * $1 + 1))" \
		--initial-advertise-peer-urls "http://127.0.0.1:$((P + 2 * $1 + 1))" \
		--initial-cluster "$CLUSTER_ARG" --initial-cluster-token "sg-chaos-$$" \
		>>"$TMP/etcd-m$1.log" 2>&1 &
	EPIDS[$1]=$!
}
for m in 0 1 2; do etcd_member $m; done
URL=http://127.0.0.1:$P,http://127.0.0.1:$((P + 2)),http://127.0.0.1:$((P + 4))
etcd_wait "http://127.0.0.1:$P" || { echo '{"error": "etcd did not start"}'; exit 1; }
CL=chaos$$

node() { # node NAME: start (or restart) sigma-udpd NAME
	"$UDPD" --port 0 --name "$1" --unix "$TMP/$1.sock" --etcd "$URL" --cluster "$CL" \
		--ttl "$TTL" >>"$TMP/$1.log" 2>&1 &
	NPID[$1]=$!
}
ALL=()
for i in $(seq "$NODES"); do
	node "n$i"
	ALL+=("n$i")
done
for _ in $(seq 100); do
	[ "$(etcd_count "http://127.0.0.1:$P" "/sigma/$CL/nodes/")" = "$NODES" ] && break
	sleep 0.1
done
args=()
for n in "${ALL[@]}"; do args+=(--node "unix:$TMP/$n.sock"); done
DESC=$("$CTL" "${args[@]}" job create --workers "$WORKERS" --open --mode deterministic \
	--partition-bytes 65536 --slots 65536 2>"$TMP/job.err" | grep '^sigma-job=')
[ -n "$DESC" ] || { printf '{"error": "job create: %s"}\n' "$(head -c 300 "$TMP/job.err")"; exit 1; }
LOAD0=$(cut -d' ' -f1 /proc/loadavg)
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

: >"$TMP/events"
: >"$TMP/rounds"
: >"$TMP/capacity"
"$W" "$DESC" "$URL" "$CL" 1000000 300000,1000,77777 --sleep-ms 20 --duration-s "$DURATION" \
	--rounds-log "$TMP/rounds" >"$TMP/w.out" 2>&1 &
WP=$!
PIDS+=("$WP")
sleep 2
RSS_W0=$(rss $WP)
RSS_N0=""
for n in "${ALL[@]}"; do RSS_N0+="${RSS_N0:+,}$n:$(rss "${NPID[$n]}")"; done
T_START=$(now_ms)
# capacity, every second: the nodes of the job's node set that are live in etcd (a
# node lost counts again once a switch has taken it back)
(while kill -0 "$WP" 2>/dev/null; do
	c=$("$CTL" --etcd "$URL" --cluster "$CL" elastic 2>/dev/null | awk 'NR == 2 {print $NF}')
	live=$("$CTL" --etcd "$URL" --cluster "$CL" nodes 2>/dev/null | awk 'NR > 1 {print $1}')
	[ -n "$c" ] && echo "$(now_ms) $(echo "$c" | tr ',' '\n' | grep -cxF "$live")" \
		>>"$TMP/capacity"
	sleep 1
done) &
PIDS+=($!)
next=${#ALL[@]}
while kill -0 "$WP" 2>/dev/null && [ $(($(now_ms) - T_START)) -lt $((DURATION * 1000 - 3000)) ]; do
	sleep "$(rnd "$GAP_MIN" "$GAP_MAX")"
	kill -0 "$WP" 2>/dev/null || break
	# the gap may have run into the last 3 s: an event there may see no round after it
	[ $(($(now_ms) - T_START)) -lt $((DURATION * 1000 - 3000)) ] || break
	case $(rnd 0 4) in
	0)
		n=${ALL[$(rnd 0 $((${#ALL[@]} - 1)))]}
		kill -KILL "${NPID[$n]}" 2>/dev/null
		log kill "$n"
		sleep "$(rnd 1 3)"
		node "$n"
		log restart "$n"
		;;
	1)
		n=${ALL[$(rnd 0 $((${#ALL[@]} - 1)))]}
		log drain "$n"
		"$CTL" --etcd "$URL" --cluster "$CL" drain "$n" --timeout 30 >>"$TMP/drain.log" 2>&1 ||
			log drain_failed "$n"
		log undrain "$n"
		"$CTL" --etcd "$URL" --cluster "$CL" undrain "$n" --timeout 30 >>"$TMP/drain.log" 2>&1 ||
			log undrain_failed "$n"
		;;
	2)
		if [ ${#ALL[@]} -lt 5 ]; then
			next=$((next + 1))
			node "n$next"
			ALL+=("n$next")
			log add "n$next"
		else
			log skip "add: 5 nodes already"
		fi
		;;
	3)
		m=$(rnd 0 2)
		kill -TERM "${EPIDS[$m]}" 2>/dev/null
		wait "${EPIDS[$m]}" 2>/dev/null
		log etcd_stop "m$m"
		sleep "$(rnd 2 5)"
		etcd_member "$m"
		log etcd_start "m$m"
		;;
	4)
		log skip "tc: link rates need the emulated cluster (local nodes here)"
		;;
	esac
done
wait "$WP"
WRC=$?
RSS_N1=""
for n in "${ALL[@]}"; do RSS_N1+="${RSS_N1:+,}$n:$(rss "${NPID[$n]}")"; done
python3 - "$TMP" "$WRC" "$SEED" "$DURATION" "$NODES" "$WORKERS" "$TTL" "$RSS_W0" "$RSS_N0" \
	"$RSS_N1" "$LOAD0" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, sys
tmp, wrc, seed, dur, nodes, workers, ttl, rw0, rn0, rn1, l0, l1 = sys.argv[1:]
rounds = [tuple(map(int, l.split())) for l in open(f"{tmp}/rounds") if l.strip()]
ends = [t for _, t in rounds]
events = []
for line in open(f"{tmp}/events"):
    t, kind, *rest = line.split()
    e = {"t_ms": int(t), "event": kind, "what": " ".join(rest)}
    if kind not in ("skip", "restart", "undrain", "etcd_start"):
        after = [x for x in ends if x > int(t)]
        e["to_first_round_ms"] = after[0] - int(t) if after else None
    events.append(e)
rec = sorted(e["to_first_round_ms"] for e in events if e.get("to_first_round_ms") is not None)
q = lambda p: rec[min(len(rec) - 1, int(p * len(rec)))] if rec else None
out = json.loads([l for l in open(f"{tmp}/w.out") if l.startswith("{")][-1]) \
    if any(l.startswith("{") for l in open(f"{tmp}/w.out")) else {"error": "no summary"}
cap = [[int(a), int(b)] for a, b in (l.split() for l in open(f"{tmp}/capacity") if l.strip())]
t0 = cap[0][0] if cap else 0
print(json.dumps({
    "bench": "chaos", "seed": int(seed), "duration_s": int(dur), "nodes": int(nodes),
    "workers": int(workers), "ttl_s": int(ttl), "workers_exit": int(wrc),
    "rounds": out.get("rounds"), "wrong_sums": out.get("wrong"),
    "elements_checked": out.get("elements_checked"),
    "failed_ops": out.get("failed_ops"), "failures": out.get("failures"),
    "events": events, "recovery_ms_p50": q(0.5), "recovery_ms_p99": q(0.99),
    "recovery_p99_over_ttl": round(q(0.99) / (int(ttl) * 1000), 3) if rec else None,
    "capacity": [[round((a - t0) / 1000, 1), b] for a, b in cap],
    # per node, at the start and the end (a node restarted meanwhile starts afresh)
    "rss_kb": {"workers": [int(rw0), out.get("rss_kb_end")],
               "nodes_start": {k: int(v) for k, v in (x.split(":") for x in rn0.split(",") if x)},
               "nodes_end": {k: int(v) for k, v in (x.split(":") for x in rn1.split(",") if x)}},
    "load": [float(l0), float(l1)]}))
PY
