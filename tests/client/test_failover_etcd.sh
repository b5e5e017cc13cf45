#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# A job that rides through the loss of a summation node, with membership in a
# real etcd started here: three sigma-udpd nodes register under a lease, an
# open deterministic job is made across them with sigmactl, and four workers
# (failover_workers, each with its own etcd watch) push through them while
# one node gets SIGKILL mid-round: every sum before and after is bit for bit
# the one computed in rank order, the job finishes, and the log names the node
# and the keys moved. Then the same with 5% loss on every node; etcd
# unreachable at the start and killed mid-run (the sums go on on the nodes
# known); garbage records (ignored, counted, logged); every node lost (a clear
# error within the lease TTL and the failover wait). Skipped without etcd.
# Last, sigmad ([transport] type = socket) with [cluster] registers beside two
# sigma-udpd nodes and is killed mid-job the same way.
# Usage: test_failover_etcd.sh sigma-udpd sigmactl failover_workers sigmad
set -u
UDPD=$1
CTL=$2
WORKERS=$3
SIGMAD=$4
command -v etcd >/dev/null && command -v etcdctl >/dev/null ||
	{ echo "SKIP: no etcd/etcdctl (Debian packages etcd-server, etcd-client)"; exit 77; }
TMP=$(mktemp -d /tmp/sg_failover.XXXXXX)
PIDS=()
fails=0
checks=0
trap cleanup_pids EXIT
. "$(dirname "$0")/../dataplane/expect_lib.sh"
. "$(dirname "$0")/../../bench/etcd_lib.sh"
export ETCDCTL_API=3
# note NAME: the summary lines of the last run, for the log
note() { grep -E 'kill to|failed as expected|elements checked|moved to the survivors' "$TMP/out" |
	sort -u | cut -c1-300 | sed "s/^/$1: /"; }

P=$(free_ports 3)
URL=http://127.0.0.1:$P
EPID=$(etcd_start e "$P" $((P + 1)))
PIDS+=("$EPID")
etcd_wait "$URL" || { echo "FAIL: etcd did not start"; cat "$TMP/etcd-e.log"; exit 1; }
CL=c$$
TENSORS=300000,1000,77777

# start_nodes SUFFIX [ARGS...]: three nodes n1..n3 registered in cluster $CL$SUFFIX
start_nodes() {
	local sfx=$1 i
	shift
	NODE_PIDS=()
	for i in 1 2 3; do
		"$UDPD" --port 0 --name "n$i" --unix "$TMP/n$i$sfx.sock" --etcd "$URL" \
			--cluster "$CL$sfx" --ttl 5 "$@" >"$TMP/n$i$sfx.log" 2>&1 &
		PIDS+=($!)
		NODE_PIDS+=($!)
	done
	for _ in $(seq 100); do
		[ "$(etcd_count "$URL" "/sigma/$CL$sfx/nodes/")" = 3 ] && return 0
		sleep 0.1
	done
	fail "nodes of $CL$sfx did not register"; cat "$TMP"/n?"$sfx".log
	return 1
}
# make_job SUFFIX: an open deterministic job of 4 workers across the nodes, in DESC
make_job() {
	"$CTL" --node "unix:$TMP/n1$1.sock" --node "unix:$TMP/n2$1.sock" \
		--node "unix:$TMP/n3$1.sock" job create --workers 4 --open --mode deterministic \
		--partition-bytes 65536 --slots 65536 >"$TMP/job$1" 2>&1
	DESC=$(grep "^sigma-job=" "$TMP/job$1")
	[ -n "$DESC" ] || { fail "job create"; cat "$TMP/job$1"; }
}

# 1. a node killed mid-round: exact sums, the job finishes, the node and keys named
start_nodes a
expect listed 0 'n2' -- "$CTL" --etcd "$URL" --cluster "${CL}a" nodes
grep -q 'n1' "$TMP/out" && grep -q 'n3' "$TMP/out" && ok || fail "sigmactl nodes: $(cat "$TMP/out")"
make_job a
# two rounds make every key; n2's count is what must move, and nothing else
expect warm 0 ' 0 wrong' -- "$WORKERS" "$DESC" "$URL" "${CL}a" 2 "$TENSORS"
note warm
K2=$("$CTL" -s "unix:$TMP/n2a.sock" --json jobs | sed -n 's/.*"keys": \([0-9]*\).*/\1/p')
expect kill 0 ' 0 wrong' -- "$WORKERS" "$DESC" "$URL" "${CL}a" 30 "$TENSORS" \
	--kill "${NODE_PIDS[1]}@10" --first-round 2
note kill
cp "$TMP/out" "$TMP/kill.out"
grep -q 'node n2 (127.0.0.1:[0-9]*) lost (no longer in the membership' "$TMP/kill.out" && ok ||
	fail "no log line names n2: $(grep -m3 lost "$TMP/kill.out")"
grep -q "lost (.*): $K2 key(s) moved to the survivors: 0x[0-9a-f]*->n[13]" "$TMP/kill.out" && ok ||
	fail "not n2's $K2 keys moved: $(grep -m1 'moved to' "$TMP/kill.out")"
grep -q '4 nodes lost' "$TMP/kill.out" && ok || fail "every worker loses n2 once"
if grep 'moved to the survivors' "$TMP/kill.out" | grep -q -- '->n2'; then fail "a key moved to n2"
else ok; fi
grep 'kill to the end' "$TMP/kill.out"
kill "${NODE_PIDS[0]}" "${NODE_PIDS[2]}" 2>/dev/null
# the same kill without membership (the static node list): the job stops
start_nodes s
make_job s
expect static 0 'failed as expected' -- "$WORKERS" "$DESC" "$URL" "${CL}s" 12 "$TENSORS" \
	--kill "${NODE_PIDS[1]}@4" --static --expect-fail 'no RESULT after 10 retries from node n2'
note static
kill "${NODE_PIDS[0]}" "${NODE_PIDS[2]}" 2>/dev/null

# 2. the same with 5% loss on every node, both ways
start_nodes b --drop-rx 50 --drop-tx 50
make_job b
expect loss 0 ' 0 wrong' -- "$WORKERS" "$DESC" "$URL" "${CL}b" 20 "$TENSORS" \
	--kill "${NODE_PIDS[0]}@7"
note loss
grep -q 'node n1 (127.0.0.1:[0-9]*) lost' "$TMP/out" && ok || fail "loss: n1 not named lost"
kill "${NODE_PIDS[1]}" "${NODE_PIDS[2]}" 2>/dev/null

# 3. etcd unreachable at the start (an endpoint nobody serves): the sums go on
start_nodes c
make_job c
expect etcd-down 0 ' 0 wrong' -- "$WORKERS" "$DESC" "http://127.0.0.1:$((P + 2))" "${CL}c" 5 \
	"$TENSORS"
note etcd-down
grep -q 'no etcd endpoint answered' "$TMP/out" && ok || fail "no message about etcd"
# garbage among the records: ignored, counted, logged; the job goes on
etcdctl --endpoints "$URL" put "/sigma/${CL}c/nodes/junk" '{not json' >/dev/null
etcdctl --endpoints "$URL" put "/sigma/${CL}c/nodes/tpu" \
	'{"name":"tpu","kind":"tpu","gbps":1,"addr":"127.0.0.1","port":1}' >/dev/null
make_job c
expect garbage 0 ' 0 wrong' -- "$WORKERS" "$DESC" "$URL" "${CL}c" 4 "$TENSORS"
note garbage
grep -q 'ignoring the node record at /sigma/'"${CL}"'c/nodes/tpu (revision [0-9]*): unknown kind' \
	"$TMP/out" && ok || fail "garbage not logged"
grep -q 'garbage [1-9][0-9]* not json, [1-9][0-9]* bad kind' "$TMP/out" && ok ||
	fail "garbage not counted: $(tail -2 "$TMP/out")"
expect garbage-ctl 0 'n3' -- "$CTL" --etcd "$URL" --cluster "${CL}c" nodes
grep -q 'ignored 2 record' "$TMP/out" && ok || fail "sigmactl nodes: $(cat "$TMP/out")"
# etcd killed mid-run: the nodes known go on
make_job c
expect etcd-kill 0 ' 0 wrong' -- "$WORKERS" "$DESC" "$URL" "${CL}c" 12 "$TENSORS" \
	--kill "$EPID@4"
note etcd-kill
grep -q 'keeping the 3 node(s) last read' "$TMP/out" && ok || fail "no message on etcd lost"
# the node notices at its next keepalive (every TTL/3), which a slow (sanitizer) run may reach
# only after the workers are done
wait_for "$TMP/n1c.log" 'summing goes on' && ok || fail "node n1 says nothing of etcd lost"
# etcd back on its port: the nodes register again
EPID=$(etcd_start e "$P" $((P + 1)))
PIDS+=("$EPID")
etcd_wait "$URL" || fail "etcd did not restart"
for _ in $(seq 100); do
	[ "$(etcd_count "$URL" "/sigma/${CL}c/nodes/n")" = 3 ] && break
	sleep 0.1
done
[ "$(etcd_count "$URL" "/sigma/${CL}c/nodes/n")" = 3 ] && ok || fail "nodes not registered again"
wait_for "$TMP/n2c.log" 'etcd is back' && ok || fail "n2 does not say etcd is back"

# 4. every node lost: a clear error within the TTL (5 s), a poll and the resends
make_job c
kill -KILL "${NODE_PIDS[@]}"
expect none-left 0 'failed as expected' -- "$WORKERS" "$DESC" "$URL" "${CL}c" 3 "$TENSORS" \
	--expect-fail "no summation node left" --within 15000
note none-left

# 5. sigmad with [cluster] beside two sigma-udpd nodes: registered, then killed mid-job
start_nodes d
kill -KILL "${NODE_PIDS[2]}" # n3: replaced by sigmad's node sd
SDPORT=$(free_ports 1)
cat >"$TMP/sd.ini" <<INI
[net]
ip = 127.0.0.1
udp_port = $SDPORT
mtu = 9000
[layout]
rtc = (0,0,1)
[transport]
type = socket
[control]
name = sd
unix = $TMP/sd.sock
[cluster]
etcd = http://127.0.0.1:$((P + 2)),$URL
cluster = ${CL}d
ttl = 5
INI
"$SIGMAD" --no-huge --no-shconf --no-pci -m 512 --log-level=lib.eal:error \
	'--lcores=(0-3)@(0-1)' --file-prefix="sg_fo_$$" -- --config "$TMP/sd.ini" >"$TMP/sd.log" 2>&1 &
SDPID=$!
PIDS+=("$SDPID")
if wait_for "$TMP/sd.log" 'registered at /sigma/'"${CL}"'d/nodes/sd' "$SDPID"; then ok
else fail "sigmad did not register"; sed 's/^/  | /' "$TMP/sd.log" | tail; fi
expect sd-listed 0 "127.0.0.1:$SDPORT" -- "$CTL" --etcd "$URL" --cluster "${CL}d" nodes
grep -q "^sd .*unix:$TMP/sd.sock" "$TMP/out" && ok || fail "sd's record: $(cat "$TMP/out")"
"$CTL" --node "unix:$TMP/n1d.sock" --node "unix:$TMP/n2d.sock" --node "unix:$TMP/sd.sock" \
	job create --workers 4 --open --mode deterministic --partition-bytes 65536 \
	--slots 65536 >"$TMP/jobd" 2>&1
DESC=$(grep "^sigma-job=" "$TMP/jobd")
[ -n "$DESC" ] && ok || { fail "job create with sigmad"; cat "$TMP/jobd"; }
expect sd-kill 0 ' 0 wrong' -- "$WORKERS" "$DESC" "$URL" "${CL}d" 16 "$TENSORS" \
	--kill "$SDPID@6"
note sd-kill
grep -q 'node sd (127.0.0.1:[0-9]*) lost' "$TMP/out" && ok || fail "sd not named lost"
rm -rf /var/run/dpdk/sg_fo_$$ "${XDG_RUNTIME_DIR:-/tmp}/dpdk/sg_fo_$$" 2>/dev/null

echo "failover_etcd: $checks checks, $fails failed"
[ "$fails" = 0 ]
