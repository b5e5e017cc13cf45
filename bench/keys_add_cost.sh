#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# How long a node's control thread is busy with job_keys_add (docs/control.md,
# "job_keys_add in detail"): it answers no other request meanwhile. For each of
# REPS runs, a fresh job of one tensor of 2*KEYS partitions of 1 KiB over two
# sigma-udpd nodes; job_keys_add on n1 with keys 0..KEYS-1 (those n1 lacks are
# new there). Reports the node's own time for the call (stats
# control.keys_add.busy_us, per call and per key added), and, as the baseline
# of the same run, the wall time of the call from sigmactl against that of a
# job_list call. Medians; one JSON object with the CPU and the load.
# Usage: bench/keys_add_cost.sh BUILD_DIR [REPS [KEYS]]   (KEYS 1..4096, default 4096)
set -u
B=$1
REPS=${2:-5}
KEYS=${3:-4096}
UDPD=$B/udpd/sigma-udpd
CTL=$B/app/sigmactl/sigmactl
TMP=$(mktemp -d /tmp/sg_kabench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "null"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
LOAD0=$(cut -d' ' -f1 /proc/loadavg)
for n in n1 n2; do
	"$UDPD" --port 0 --name "$n" --unix "$TMP/$n.sock" >"$TMP/$n.log" 2>&1 &
	PIDS+=($!)
done
for _ in $(seq 100); do [ -S "$TMP/n1.sock" ] && [ -S "$TMP/n2.sock" ] && break; sleep 0.05; done
busy() { "$CTL" -s "unix:$TMP/n1.sock" --json stats | python3 -c 'import json, sys
print(json.load(sys.stdin)["control"]["keys_add"]["busy_us"])'; }
KL=$(seq -s, 0 $((KEYS - 1)))
for _ in $(seq "$REPS"); do
	"$CTL" --node "unix:$TMP/n1.sock" --node "unix:$TMP/n2.sock" job create --workers 1 \
		--tensor "a:$((2 * KEYS * 256))" --partition-bytes 1024 >"$TMP/job" 2>&1 ||
		{ echo "{\"error\": \"job create: $(head -1 "$TMP/job")\"}"; exit 1; }
	JID=$(sed -n 's/^sigma-job=1;id=\([0-9]*\);.*/\1/p' "$TMP/job")
	B0=$(busy)
	T0=$(date +%s%N)
	"$CTL" -s "unix:$TMP/n1.sock" --json call job_keys_add "{\"id\": $JID, \"keys\": [$KL]}" \
		>"$TMP/ka" 2>&1 || { echo "{\"error\": \"job_keys_add: $(head -c 200 "$TMP/ka")\"}"; exit 1; }
	T1=$(date +%s%N)
	"$CTL" -s "unix:$TMP/n1.sock" --json call job_list >/dev/null 2>&1
	T2=$(date +%s%N)
	B1=$(busy)
	ADDED=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["added"])' "$TMP/ka")
	echo "$((B1 - B0)) $ADDED $(((T1 - T0) / 1000)) $(((T2 - T1) / 1000))" >>"$TMP/runs"
done
US=$(cut -d' ' -f1 "$TMP/runs" | median)
ADD=$(cut -d' ' -f2 "$TMP/runs" | median)
PER=$(awk '$2 > 0 {print $1 / $2}' "$TMP/runs" | median)
WKA=$(cut -d' ' -f3 "$TMP/runs" | median)
WJL=$(cut -d' ' -f4 "$TMP/runs" | median)
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
printf '{"keys_sent": %s, "keys_added": %s, "reps": %s, "node_busy_us": %s, "node_us_per_key_added": %s, "call_wall_us": %s, "baseline_job_list_wall_us": %s, "cpu": "%s", "load": [%s, %s]}\n' \
	"$KEYS" "$ADD" "$REPS" "$US" "$PER" "$WKA" "$WJL" "$CPU" "$LOAD0" "$(cut -d' ' -f1 /proc/loadavg)"
