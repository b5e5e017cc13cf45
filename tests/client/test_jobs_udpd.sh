#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The job service end to end, on this machine: three sigma-udpd nodes (kernel
# UDP, with the control server; one over authenticated TCP, one a GPU machine
# that takes chunks of at most 1424 bytes and never polls), jobs made across them with the real
# sigmactl (--node ...), opened by job_workers from the printed descriptor, and
# every sum checked there. Then what must fail, fails with the reason: a
# program restarted against a job that ran on, a tensor of another size, a
# refusal half-way (the job destroyed again where it was made), a wrong secret,
# a node given twice, an unreachable node. Open jobs: made without tensors, pushed with
# tensors of six dtypes registered afterwards, each node making the keys placed on it;
# a key's dtype kept, a job without room for a key telling what to raise, bad uses.
# Usage: test_jobs_udpd.sh path/to/sigma-udpd path/to/sigmactl path/to/job_workers
set -u
UDPD=$1
CTL=$2
WORKERS=$3
TMP=$(mktemp -d /tmp/sg_jobs_udpd.XXXXXX)
PIDS=()
fails=0
checks=0
trap cleanup_pids EXIT
# shellcheck source=../dataplane/expect_lib.sh
. "$(dirname "$0")/../dataplane/expect_lib.sh"

make_secret "$TMP/secret"
echo "not-the-secret-at-all" >"$TMP/wrong"
chmod 600 "$TMP/wrong"
start() { # start NAME LOG ARGS...
	local log=$2
	shift 2
	"$UDPD" --port 0 "$@" >"$log" 2>&1 &
	PIDS+=($!)
}
start a "$TMP/a.log" --name cpu-a --unix "$TMP/a.sock"
start b "$TMP/b.log" --name cpu-b --gbps 40 --unix "$TMP/b.sock" --listen 127.0.0.1:0 \
	--secret-file "$TMP/secret"
start c "$TMP/c.log" --name cpu-c --max-chunk 1424 --spin-us 0 --unix "$TMP/c.sock"
for _ in $(seq 100); do
	[ "$(cat "$TMP"/?.log | grep -c 'sigma-udpd: node')" = 3 ] && break
	sleep 0.05
done
if [ "$(cat "$TMP"/?.log | grep -c 'sigma-udpd: node')" != 3 ]; then
	echo "FAIL: the nodes did not start"; cat "$TMP"/?.log
	exit 1
fi
BT=$(sed -n 's/^sigma-udpd: node.* tcp port \([0-9]*\)$/\1/p' "$TMP/b.log")
for v in -1 1000001 x; do
	expect "spin-us-$v" 2 "bad value '$v' for --spin-us" -- "$UDPD" --unix "$TMP/x.sock" \
		--spin-us "$v"
done
# numbers that strtod() took (a node then ran on); the integer options refuse them now
for v in +5 5.0 1e2 0x10 ' 5'; do
	EXPECT_TIMEOUT=10 expect "spin-us-$v" 2 "bad value '$v' for --spin-us" -- "$UDPD" \
		--unix "$TMP/x.sock" --spin-us "$v"
done
EXPECT_TIMEOUT=10 expect "port-hex" 2 "bad value '0x10' for --port" -- "$UDPD" \
	--unix "$TMP/x.sock" --port 0x10
EXPECT_TIMEOUT=10 expect "gbps-sign" 2 "bad value '+40' for --gbps" -- "$UDPD" \
	--unix "$TMP/x.sock" --gbps +40
EXPECT_TIMEOUT=10 expect "listen-port" 2 "--listen wants HOST:PORT" -- "$UDPD" \
	--unix "$TMP/x.sock" --listen 127.0.0.1:7070.5 --secret-file "$TMP/secret"
A=unix:$TMP/a.sock
B=127.0.0.1:$BT
C=unix:$TMP/c.sock
K=(-k "$TMP/secret")
TENSORS=300000,1000,77777

# A job of 3 tensors across a (unix) and b (TCP): 19 + 1 + 5 partitions of 64 KiB.
expect create 0 'created on 2 node(s)' -- "$CTL" "${K[@]}" --node "$A" --node "$B" job create \
	--workers 3 --tensor w:300000 --tensor b:1000 --tensor e:77777 --partition-bytes 65536
D1=$(grep "^sigma-job=" "$TMP/out")
ID1=$(echo "$D1" | sed -n 's/.*;id=\([0-9]*\);.*/\1/p')
case "$D1" in
sigma-job=1\;id=*\;workers=3\;token=*\;dtype=fp32\;mode=sync\;partition_bytes=65536\;chunk_bytes=8920\;node=cpu-a,127.0.0.1,*,cpu,10,*\;node=cpu-b,127.0.0.1,*,cpu,40,*) ok ;;
*) fail "descriptor: $D1" ;;
esac
ka=$("$CTL" -s "$A" --json jobs | sed -n 's/.*"keys": \([0-9]*\).*/\1/p')
kb=$("$CTL" "${K[@]}" -s "$B" --json jobs | sed -n 's/.*"keys": \([0-9]*\).*/\1/p')
if [ -n "$ka" ] && [ -n "$kb" ] && [ "$ka" -gt 0 ] && [ "$kb" -gt 0 ] && [ $((ka + kb)) = 25 ]; then
	ok
else
	fail "partitions per node: a '$ka', b '$kb' (want both > 0, 25 in all)"
fi
expect push 0 '0 wrong' -- "$WORKERS" "$D1" 3 "$TENSORS"
# the same program again from round 0: told where the job is
expect restart 0 'failed as expected' -- "$WORKERS" "$D1" 1 "$TENSORS" \
	--expect-fail 'open the session with first_round = 3'
expect restart-right 0 '0 wrong' -- "$WORKERS" "$D1" 2 "$TENSORS" --first-round 3
# a tensor of another size: named, not timed out
expect size 0 'failed as expected' -- "$WORKERS" "$D1" 1 300000,1000,70000 --first-round 5 \
	--expect-fail 'is not the job'

# Three nodes, one of which takes 1424-byte chunks: the job uses them, every node sums.
expect create3 0 'created on 3 node(s)' -- "$CTL" "${K[@]}" --node "$A" --node "$B" \
	--node "$C" job create --workers 2 --tensor w:300000 --tensor b:1000 --tensor e:77777 \
	--partition-bytes 65536 --mode deterministic
D2=$(grep "^sigma-job=" "$TMP/out")
ID2=$(echo "$D2" | sed -n 's/.*;id=\([0-9]*\);.*/\1/p')
case "$D2" in
*\;mode=deterministic\;*chunk_bytes=1424\;*node=cpu-c,127.0.0.1,*,cpu,10,*) ok ;;
*) fail "descriptor of 3 nodes: $D2" ;;
esac
[ "$ID2" -gt "$ID1" ] && ok || fail "ids $ID1 then $ID2"
expect push3 0 '0 wrong' -- "$WORKERS" "$D2" 2 "$TENSORS"
for n in "$A" "$B" "$C"; do
	r=$("$CTL" "${K[@]}" -s "$n" --json jobs | tr -d ' \n' | grep -o "{\"id\":$ID2,[^}]*}")
	case "$r" in
	*'"mode":"deterministic"'*'"chunk_bytes":1424'*'"keys":0,'*) fail "$n holds no key: $r" ;;
	*'"mode":"deterministic"'*'"chunk_bytes":1424'*'"rounds_completed":0,'*) fail "$n: $r" ;;
	*'"mode":"deterministic"'*'"chunk_bytes":1424'*) ok ;;
	*) fail "job $ID2 on $n: $r" ;;
	esac
done
# explicit weights: all on a
expect weights 0 'created' -- "$CTL" "${K[@]}" --node "$A,weight=1" --node "$B,weight=0" \
	job create --workers 2 --tensor w:100000
D3=$(grep "^sigma-job=" "$TMP/out")
ID3=$(echo "$D3" | sed -n 's/.*;id=\([0-9]*\);.*/\1/p')
expect weights-b 0 '"keys": 0' -- "$CTL" "${K[@]}" -s "$B" --json jobs
expect push-weights 0 '0 wrong' -- "$WORKERS" "$D3" 2 100000

# A refusal half-way: id 500 is taken on b only; a made the job and destroys it again.
expect take-500 0 'job 500 created' -- "$CTL" -s unix:"$TMP/b.sock" job create --workers 2 \
	--tensor x:10 --id 500
expect refused 1 'job id 500 is in use' -- "$CTL" "${K[@]}" --node "$A" --node "$B" job \
	create --workers 2 --tensor w:1000 --id 500
grep -qF 'destroyed again on the 1 node(s)' "$TMP/out" && ok || fail "no rollback message"
if "$CTL" -s "$A" --json jobs | grep -q '"id": 500,'; then fail "job 500 left on a"; else ok; fi
# Bad uses, each with its reason.
expect wrong-secret 1 'refused the authentication' -- "$CTL" -k "$TMP/wrong" --node "$A" \
	--node "$B" job create --workers 2 --tensor w:10
expect twice 1 'same node' -- "$CTL" --node "$A" --node "unix:$TMP/a.sock" job create \
	--workers 2 --tensor w:10
expect unreachable 1 'node 1 (unix:/nonexistent/x.sock)' -- "$CTL" --node "$A" \
	--node unix:/nonexistent/x.sock job create --workers 2 --tensor w:10
expect bad-node 2 'unknown key' -- "$CTL" --node "$A,colour=red" job create --workers 2 \
	--tensor w:10
expect chunk-too-big 1 'takes at most 1424' -- "$CTL" --node "$A" --node "$C" job create \
	--workers 2 --tensor w:100000 --chunk-bytes 8920
expect node-elsewhere 2 'for job create and job destroy' -- "$CTL" --node "$A" jobs

# Open jobs: made with no tensor; the workers register theirs afterwards, in several
# dtypes (dtype any), and each node makes the keys placed on it at their first push.
expect open-create 0 'created on 2 node(s)' -- "$CTL" "${K[@]}" --node "$A" --node "$B" job \
	create --workers 3 --open --dtype any --slots 4096 --partition-bytes 65536
D4=$(grep "^sigma-job=" "$TMP/out")
ID4=$(echo "$D4" | sed -n 's/.*;id=\([0-9]*\);.*/\1/p')
case "$D4" in
*\;workers=3\;*\;dtype=any\;mode=sync\;partition_bytes=65536\;chunk_bytes=8920\;*) ok ;;
*) fail "open descriptor: $D4" ;;
esac
r=$("$CTL" -s "$A" --json jobs | tr -d ' \n' | grep -o "{\"id\":$ID4,[^}]*}")
case "$r" in
*'"keys":0,'*'"open":true'*'"slots_used":0,"slots_budget":4096,"slots":4096'*) ok ;;
*) fail "open job before any push: $r" ;;
esac
# 19 + 1 + 3 + 1 + 1 + 3 partitions of 64 KiB
OPEN_TENSORS=300000:fp32,1000:fp16,77777:bf16,5000:int32,333:int8,20000:fp64
expect open-push 0 '0 wrong' -- "$WORKERS" "$D4" 3 "$OPEN_TENSORS"
ka=$("$CTL" -s "$A" --json jobs | tr -d ' \n' | grep -o "{\"id\":$ID4,[^}]*}" |
	sed -n 's/.*"keys":\([0-9]*\),.*/\1/p')
kb=$("$CTL" "${K[@]}" -s "$B" --json jobs | tr -d ' \n' | grep -o "{\"id\":$ID4,[^}]*}" |
	sed -n 's/.*"keys":\([0-9]*\),.*/\1/p')
if [ -n "$ka" ] && [ -n "$kb" ] && [ "$ka" -gt 0 ] && [ "$kb" -gt 0 ] && [ $((ka + kb)) = 28 ]; then
	ok
else
	fail "open job's keys per node: a '$ka', b '$kb' (want both > 0, 28 in all)"
fi
expect open-table 0 'open' -- "$CTL" -s "$A" jobs
grep -Eq "^ *$ID4 +3 any +sync +65536 +open +$ka +[0-9]+/4096 " "$TMP/out" && ok ||
	fail "sigmactl jobs: $(grep -E "^ *$ID4 " "$TMP/out")"
# a key made with one dtype keeps it: another program pushing tensor 1 as fp32 is told
expect open-dtype 0 'failed as expected' -- "$WORKERS" "$D4" 1 300000:fp32,1000:fp32 \
	--first-round 3 --expect-fail 'the node'"'"'s job sums fp16, this tensor is fp32'
# A job of one node, fp32 only, with room for 10 chunks: tensors of 8920-byte chunks
# that need more are told to raise slots; one of fp16 is refused at registration.
expect open-small 0 'created on 1 node(s)' -- "$CTL" "${K[@]}" --node "$B" job create \
	--workers 2 --open --slots 10
D5=$(grep "^sigma-job=" "$TMP/out")
ID5=$(echo "$D5" | sed -n 's/.*;id=\([0-9]*\);.*/\1/p')
expect open-fits 0 '0 wrong' -- "$WORKERS" "$D5" 2 20000,2000
expect open-full 0 'failed as expected' -- "$WORKERS" "$D5" 1 20000,2000,9000 \
	--expect-fail 'sigmactl job create --open --slots S'
grep -q 'ERROR FULL) from node cpu-b (127.0.0.1:' "$TMP/out" && ok ||
	fail "ERROR FULL names the node: $(grep FULL "$TMP/out" | head -1)"
expect open-fp32 1 'tensor 2 (fp16)' -- "$WORKERS" "$D5" 1 20000,2000,10:fp16
# One node through -s: job_create without tensors
expect open-one 0 'created (open: its pushes make its keys)' -- "$CTL" -s "$A" job create \
	--workers 2 --open --slots 100 --dtype any
grep -q 'up to 100 chunk slots per reducer (100 on this node)' "$TMP/out" && ok ||
	fail "open job on one node: $(cat "$TMP/out")"
ID6=$(sed -n 's/^job \([0-9]*\) created.*/\1/p' "$TMP/out")
expect open-one-destroy 0 'true' -- "$CTL" -s "$A" --json job destroy "$ID6"
# Bad uses
expect open-and-tensor 2 'either at least one --tensor' -- "$CTL" --node "$A" job create \
	--workers 2 --open --tensor w:10
expect slots-fixed 2 '--slots is for an --open job' -- "$CTL" --node "$A" job create \
	--workers 2 --tensor w:10 --slots 5
expect any-fixed 2 '--dtype any is for an --open job' -- "$CTL" --node "$A" job create \
	--workers 2 --tensor w:10 --dtype any
expect any-fixed-one 1 'dtype any is for open jobs' -- "$CTL" -s "$A" job create \
	--workers 2 --tensor w:10 --dtype any
expect slots-zero 2 'bad value' -- "$CTL" --node "$A" job create --workers 2 --open --slots 0
expect slots-big 1 'slots must be 1..16777216' -- "$CTL" -s "$A" call job_create \
	'{"workers":2,"slots":16777217}'
expect open-destroy 0 'destroyed on 2 node(s)' -- "$CTL" "${K[@]}" --node "$A" --node "$B" \
	job destroy "$ID4"
expect open-destroy-small 0 'destroyed on 1 node(s)' -- "$CTL" "${K[@]}" --node "$B" \
	job destroy "$ID5"

# Destroyed on every node, once.
expect destroy-1 0 'destroyed on 2 node(s)' -- "$CTL" "${K[@]}" --node "$A" --node "$B" \
	job destroy "$ID1"
expect destroy-2 0 'destroyed on 3 node(s)' -- "$CTL" "${K[@]}" --node "$A" --node "$B" \
	--node "$C" job destroy "$ID2"
expect destroy-again 1 'no such job' -- "$CTL" "${K[@]}" --node "$A" --node "$B" job destroy "$ID1"
expect destroy-3 0 'destroyed on' -- "$CTL" "${K[@]}" --node "$A" --node "$B" job destroy "$ID3"
expect empty-a 0 '[]' -- "$CTL" -s "$A" --json jobs

for p in "${PIDS[@]}"; do kill -TERM "$p"; done
for p in "${PIDS[@]}"; do wait "$p" || fail "a node exited $?"; done
PIDS=()
grep -h 'stopped' "$TMP"/?.log
echo "jobs_udpd: $checks checks, $fails failed"
[ "$fails" = 0 ]
