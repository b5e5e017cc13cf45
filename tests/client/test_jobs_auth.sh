#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The job service with auth = mac end to end (docs/security.md): two sigma-udpd
# nodes (one over authenticated TCP), `sigmactl job create --auth --rank-dir`
# makes the job on both and writes each rank's own descriptor (mode 0600, its
# keys only); job_workers opens each rank from its own and every sum is checked.
# Then what must not work does not: the job's descriptor opens no session, a
# rank opened with another rank's keys or with none gets no sum for anyone and
# its pushes are counted by the nodes (auth_bad, auth_mismatch), no key is in
# any output, and bad arguments get clear errors with nothing left behind.
# Usage: test_jobs_auth.sh path/to/sigma-udpd path/to/sigmactl path/to/job_workers
set -u
UDPD=$1
CTL=$2
WORKERS=$3
TMP=$(mktemp -d /tmp/sg_jobs_auth.XXXXXX)
PIDS=()
fails=0
checks=0
trap cleanup_pids EXIT
# shellcheck source=../dataplane/expect_lib.sh
. "$(dirname "$0")/../dataplane/expect_lib.sh"

make_secret "$TMP/secret"
"$UDPD" --port 0 --name auth-a --unix "$TMP/a.sock" >"$TMP/a.log" 2>&1 &
PIDS+=($!)
"$UDPD" --port 0 --name auth-b --unix "$TMP/b.sock" --listen 127.0.0.1:0 \
	--secret-file "$TMP/secret" >"$TMP/b.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
	[ "$(cat "$TMP"/?.log | grep -c 'sigma-udpd: node')" = 2 ] && break
	sleep 0.05
done
BT=$(sed -n 's/^sigma-udpd: node.* tcp port \([0-9]*\)$/\1/p' "$TMP/b.log")
if [ -z "$BT" ]; then
	echo "FAIL: the nodes did not start"; cat "$TMP"/?.log
	exit 1
fi
N=(-k "$TMP/secret" --node "unix:$TMP/a.sock" --node "127.0.0.1:$BT")
TENSORS=300000,1000

# create JOBNAME: a 3-rank job with auth; its descriptor in $TMP/JOBNAME, ranks' in $TMP/JOBNAME.d
create() {
	mkdir -m 700 "$TMP/$1.d"
	"$CTL" "${N[@]}" job create --auth --rank-dir "$TMP/$1.d" --workers 3 \
		--tensor w:300000 --tensor b:1000 >"$TMP/$1" 2>"$TMP/$1.err"
}
if ! create j1; then
	fail "job create --auth: $(cat "$TMP/j1.err")"
	exit 1
fi
DESC=$(cat "$TMP/j1")
grep -q 'with auth = mac' "$TMP/j1.err" && ok || fail "stderr: $(cat "$TMP/j1.err")"
case "$DESC" in
*";auth=mac;key_id="*) ok ;;
*) fail "the job's descriptor says auth=mac: $DESC" ;;
esac
case "$DESC" in
*keys=*) fail "the job's descriptor holds keys: $DESC" ;;
*) ok ;;
esac
for r in 0 1 2; do
	f=$TMP/j1.d/rank-$r.desc
	[ "$(stat -c %a "$f" 2>/dev/null)" = 600 ] && ok || fail "$f: mode $(stat -c %a "$f")"
	grep -q "^${DESC};rank=$r;keys=[0-9a-f]\{128\}\$" "$f" && ok || fail "$f: $(cat "$f")"
done
[ ! -e "$TMP/j1.d/rank-3.desc" ] && ok || fail "a 4th descriptor for 3 ranks"
# each rank's keys are its own
k0=$(sed 's/.*keys=//' "$TMP/j1.d/rank-0.desc")
k1=$(sed 's/.*keys=//' "$TMP/j1.d/rank-1.desc")
[ "$k0" != "$k1" ] && ok || fail "ranks 0 and 1 have the same keys"

# the ranks sum exactly, each from its own descriptor
expect sums 0 '0 wrong' -- "$WORKERS" "$DESC" 6 "$TENSORS" --rank-dir "$TMP/j1.d"
# the job's descriptor opens no session; nor does another rank's
expect job-desc 1 "holds no rank's keys" -- "$WORKERS" "$DESC" 1 "$TENSORS"
expect other-desc 1 "holds rank 0's keys, not rank 1's" -- "$WORKERS" \
	"$(cat "$TMP/j1.d/rank-0.desc")" 1 "$TENSORS"

# rank 1 with rank 0's keys: its pushes fail the MAC, so no rank gets a sum
create j2 || fail "job create j2: $(cat "$TMP/j2.err")"
expect forged 0 'failed as expected' -- "$WORKERS" "$(cat "$TMP/j2")" 1 \
	3000,100 --rank-dir "$TMP/j2.d" --forge 1:0 --expect-fail 'no RESULT'
# rank 1 without keys: the nodes answer ERROR MISMATCH, and it says so at once
create j3 || fail "job create j3: $(cat "$TMP/j3.err")"
expect no-key 0 'failed as expected' -- "$WORKERS" "$(cat "$TMP/j3")" 1 \
	3000,100 --rank-dir "$TMP/j3.d" --forge 1:none --expect-fail 'auth = mac'

# bad arguments: clear errors, exit 2, no job made
J0=$("$CTL" -s "unix:$TMP/a.sock" --json jobs | grep -o '"id"' | wc -l)
expect no-dir 2 '--auth needs --node' -- "$CTL" "${N[@]}" job create --auth --workers 2 \
	--tensor w:10
expect dir-no-auth 2 '--rank-dir is for --auth' -- "$CTL" "${N[@]}" job create \
	--rank-dir "$TMP" --workers 2 --tensor w:10
expect one-node 2 '--auth needs --node' -- "$CTL" -s "unix:$TMP/a.sock" job create --auth \
	--rank-dir "$TMP" --workers 2 --tensor w:10
expect big-chunk 1 'its largest less the MAC' -- "$CTL" "${N[@]}" job create --auth \
	--rank-dir "$TMP" --workers 2 --tensor w:10000 --chunk-bytes 8920
expect no-such-dir 1 'the job is destroyed again' -- "$CTL" "${N[@]}" job create --auth \
	--rank-dir "$TMP/none" --workers 2 --tensor w:10
# a rank's file already there is not overwritten; the ones written are removed again
mkdir -m 700 "$TMP/busy" && touch "$TMP/busy/rank-1.desc"
expect busy-dir 1 'rank-1.desc (File exists)' -- "$CTL" "${N[@]}" job create --auth \
	--rank-dir "$TMP/busy" --workers 2 --tensor w:10
[ ! -e "$TMP/busy/rank-0.desc" ] && [ ! -s "$TMP/busy/rank-1.desc" ] && ok ||
	fail "busy-dir: $(ls -l "$TMP/busy")"
J1=$("$CTL" -s "unix:$TMP/a.sock" --json jobs | grep -o '"id"' | wc -l)
[ "$J0" = "$J1" ] && ok || fail "jobs left behind: $J0 before, $J1 after"

# the nodes counted what they refused; no rank's key is in any output
for p in "${PIDS[@]}"; do kill -TERM "$p"; done
for p in "${PIDS[@]}"; do wait "$p"; done
PIDS=()
bad=$(sed -n 's/^sigma-udpd: dropped \([0-9]*\) (auth_bad)$/\1/p' "$TMP"/?.log |
	awk '{s += $1} END {print s + 0}')
mm=$(sed -n 's/^sigma-udpd: dropped \([0-9]*\) (auth_mismatch)$/\1/p' "$TMP"/?.log |
	awk '{s += $1} END {print s + 0}')
[ "$bad" -gt 0 ] && ok || fail "no auth_bad drops: $(grep dropped "$TMP"/?.log)"
[ "$mm" -gt 0 ] && ok || fail "no auth_mismatch drops: $(grep dropped "$TMP"/?.log)"
for r in 0 1 2; do
	k=$(sed 's/.*keys=//' "$TMP/j1.d/rank-$r.desc")
	for half in "${k:0:64}" "${k:64:64}"; do
		! grep -rqF "$half" "$TMP"/*.log "$TMP"/*.err "$TMP/out" && ok ||
			fail "rank $r's key in an output"
	done
done
echo "jobs_auth: $checks checks, $fails failed (auth_bad $bad, auth_mismatch $mm)"
[ "$fails" = 0 ]
