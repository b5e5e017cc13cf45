#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# An elastic job with auth = mac (docs/cluster.md, "Elastic jobs with auth")
# against a real etcd started here and sigma-udpd nodes registered under
# leases: `sigmactl job create --auth --rank-dir D --token-file T` makes an open
# deterministic job of 3 ranks on n1 and n2, each rank opens from its own
# descriptor (its keys), rank 0 (the proposer) also holds the job's token.
# Mid-job n3 registers: rank 0 makes the job there with the token (n3 derives
# the same job key), every rank switches, and every sum stays exact (bit for
# bit, elastic_workers), the pushes to n3 signed and checked. Before every round
# rank 0 also sends forged pushes (the job's id, wire token and key id, a MAC
# under a random key) to n1 and n2: each node counts them as auth_bad. Then
# what must not work does not: a proposer without the token is refused at open
# naming job_token, and --token-file without --auth is a usage error.
# Skipped without etcd.
# Usage: test_elastic_auth.sh sigma-udpd sigmactl elastic_workers
set -u
UDPD=$1
CTL=$2
W=$3
. "$(dirname "$0")/../dataplane/expect_lib.sh"
. "$(dirname "$0")/../../bench/etcd_lib.sh"
etcd_test_setup elastic_auth

etcd_test_start
CL=ea$$
TENSORS=300000,1000

declare -A NPID
node() {
	"$UDPD" --port 0 --name "$1" --unix "$TMP/$1.sock" --etcd "$URL" --cluster "$CL" \
		--ttl 2 >>"$TMP/$1.log" 2>&1 &
	PIDS+=($!)
	NPID[$1]=$!
}
wait_nodes() {
	for _ in $(seq 100); do
		[ "$(etcd_count "$URL" "/sigma/$CL/nodes/")" = "$1" ] && return 0
		sleep 0.1
	done
	fail "$1 nodes did not register"
	return 1
}

node n1
node n2
wait_nodes 2 || exit 1
mkdir -m 700 "$TMP/d"
"$CTL" --node "unix:$TMP/n1.sock" --node "unix:$TMP/n2.sock" job create --workers 3 --open \
	--mode deterministic --partition-bytes 65536 --slots 65536 --auth --rank-dir "$TMP/d" \
	--token-file "$TMP/tok" >"$TMP/job" 2>"$TMP/job.err"
DESC=$(grep "^sigma-job=" "$TMP/job")
[ -n "$DESC" ] && ok || { fail "job create: $(cat "$TMP/job.err")"; exit 1; }
grep -q 'auth=mac;key_id=' <<<"$DESC" && ok || fail "the descriptor has no auth: $DESC"
[ "$(stat -c %a "$TMP/tok")" = 600 ] && ok || fail "token file mode $(stat -c %a "$TMP/tok")"
grep -qxE '[0-9a-f]{64}' "$TMP/tok" && ok || fail "the token file holds no token"
WIRE=$(sed -n 's/.*;token=\([0-9a-f]*\);.*/\1/p' <<<"$DESC")
[ "$(cut -c1-16 "$TMP/tok")" = "$WIRE" ] && ok || fail "the token's wire part is not the job's"
if grep -q "$(cut -c17-64 "$TMP/tok")" "$TMP/job" "$TMP/job.err" "$TMP"/d/*; then
	fail "the token's secret part is printed or in a rank's descriptor"
else ok; fi

# a proposer without the token: refused at open, naming job_token
"$W" "$DESC" "$URL" "$CL" 3 "$TENSORS" --rank-dir "$TMP/d" >"$TMP/notok" 2>&1 &&
	fail "a proposer without the token opened"
grep -q 'job_token' "$TMP/notok" && ok || fail "no job_token named: $(head -3 "$TMP/notok")"
"$CTL" --node "unix:$TMP/n1.sock" job create --workers 3 --open --token-file "$TMP/tok2" \
	>/dev/null 2>"$TMP/usage"; rc=$?
[ $rc = 2 ] && grep -q 'token-file is for --auth' "$TMP/usage" && [ ! -e "$TMP/tok2" ] && ok ||
	fail "--token-file without --auth: exit $rc: $(cat "$TMP/usage")"

# the job, n3 joining mid-job, forged pushes before every round
"$W" "$DESC" "$URL" "$CL" 80 "$TENSORS" --sleep-ms 60 --rank-dir "$TMP/d" \
	--token-file "$TMP/tok" --forge 2 >"$TMP/out" 2>&1 &
WP=$!
PIDS+=("$WP")
sleep 3
node n3
wait "$WP"; rc=$?
[ $rc = 0 ] && ok || { fail "workers exit $rc"; tail -20 "$TMP/out"; }
grep -q ', wrong: 0, failed ops: 0' "$TMP/out" && ok || fail "sums: $(tail -1 "$TMP/out")"
grep -q 'proposed epoch 1: join n3' "$TMP/out" && ok || fail "no proposal of n3"
[ "$(grep -c '^rank [0-9]: epoch 1, 3 nodes' "$TMP/out")" = 3 ] && ok ||
	fail "not every rank on 3 nodes: $(grep '^rank' "$TMP/out")"
MV=$(awk '/^place / && $4 != $5 && $5 == "n3" {mv++} END {print mv + 0}' "$TMP/out")
[ "$MV" -gt 0 ] && ok || fail "no partition moved to n3"
"$CTL" -s "unix:$TMP/n3.sock" --json jobs >"$TMP/n3jobs" 2>&1
grep -q '"keys"' "$TMP/n3jobs" && ok || fail "n3 has no job: $(cat "$TMP/n3jobs")"
FORGED=$(sed -n 's/^forged: \([0-9]*\)$/\1/p' "$TMP/out")
for n in n1 n2 n3; do kill -TERM "${NPID[$n]}" 2>/dev/null; wait "${NPID[$n]}" 2>/dev/null; done
bad=$(sed -n 's/^sigma-udpd: dropped \([0-9]*\) (auth_bad)$/\1/p' "$TMP/n1.log" "$TMP/n2.log" |
	awk '{s += $1} END {print s + 0}')
[ -n "$FORGED" ] && [ "$FORGED" -gt 0 ] && [ "$bad" = "$FORGED" ] && ok ||
	fail "forged ${FORGED:-none}, auth_bad at n1 and n2: $bad ($(grep -h dropped "$TMP"/n?.log))"
if grep -q "$(cut -c17-64 "$TMP/tok")" "$TMP"/n?.log "$TMP/out"; then
	fail "the token's secret part is in a log"
else ok; fi
echo "elastic with auth: $MV partitions moved to n3; forged $FORGED, auth_bad $bad;" \
	"$(grep -m1 'epoch 1 committed' "$TMP/out")"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
