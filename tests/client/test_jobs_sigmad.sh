#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# One job across a real sigmad and a sigma-udpd node, made by the real sigmactl
# and pushed by libsigma: sigmad runs on net_af_packet in a test-made network
# namespace (bench/sigmad_netns.sh, MTU 1500), its control server on a Unix
# socket; the sigma-udpd node and the workers run in the peer namespace. The
# descriptor carries sigmad's dataplane address and the chunk size both take
# (1424: sigmad's MTU), both nodes sum some of the 3 tensors' partitions, every
# sum is checked, a restarted program is told its first_round by sigmad, and
# the job is destroyed on both. sigmad has two reducers. Then an open job of
# dtype any across both nodes: tensors of four dtypes registered after it
# exists, the keys made by their first pushes (on both of sigmad's reducers),
# every key moved live to the other reducer and made there by its next push,
# every sum checked before and after. Skips (77) where namespaces are not allowed.
# Usage: test_jobs_sigmad.sh SIGMAD SIGMA-UDPD SIGMACTL JOB_WORKERS SIGMAD_NETNS_SH
set -u
if [ "${1:-}" = --inner ]; then
	# in the peer namespace: $2 sigma-udpd, $3 sigmactl, $4 job_workers, $5 folder
	UDPD=$2 CTL=$3 WORKERS=$4 TMP=$5
	fails=0
	checks=0
	# shellcheck source=../dataplane/expect_lib.sh
	. "$(dirname "$0")/../dataplane/expect_lib.sh"
	"$UDPD" --addr 10.79.0.2 --port 9400 --name udpd-b --unix "$TMP/b.sock" >"$TMP/b.log" 2>&1 &
	UPID=$!
	for _ in $(seq 100); do
		grep -q 'sigma-udpd: node' "$TMP/b.log" && break
		sleep 0.05
	done
	S=unix:$TMP/sgd.sock
	B=unix:$TMP/b.sock
	TENSORS=200000,1000,50000
	expect create 0 'created on 2 node(s)' -- "$CTL" --node "$S" --node "$B" job create \
		--workers 3 --tensor w:200000 --tensor b:1000 --tensor e:50000 --partition-bytes 32768
	D=$(grep '^sigma-job=' "$TMP/out")
	ID=$(echo "$D" | sed -n 's/.*;id=\([0-9]*\);.*/\1/p')
	case "$D" in
	*\;chunk_bytes=1424\;node=sgd,10.79.0.1,9300,cpu,*\;node=udpd-b,10.79.0.2,9400,cpu,*) ok ;;
	*) fail "descriptor: $D" ;;
	esac
	expect push 0 '0 wrong' -- "$WORKERS" "$D" 3 "$TENSORS"
	for n in "$S" "$B"; do
		r=$("$CTL" -s "$n" --json jobs | tr -d ' \n' | grep -o "{\"id\":$ID,[^}]*}")
		case "$r" in
		*'"keys":0,'* | *'"rounds_completed":0,'*) fail "$n did not sum: $r" ;;
		*'"chunk_bytes":1424,'*'"nodes":2,'*) ok ;;
		*) fail "job $ID on $n: $r" ;;
		esac
	done
	expect restart 0 'failed as expected' -- "$WORKERS" "$D" 1 "$TENSORS" \
		--expect-fail 'first_round = 3'
	expect restart-right 0 '0 wrong' -- "$WORKERS" "$D" 1 "$TENSORS" --first-round 3
	expect destroy 0 'destroyed on 2 node(s)' -- "$CTL" --node "$S" --node "$B" job destroy "$ID"
	if "$CTL" -s "$S" --json jobs | grep -q "\"id\": $ID,"; then
		fail "job $ID still on sigmad"
	else
		ok
	fi
	# An open job: no tensors at creation; 7 + 1 + 4 + 1 partitions of 32 KiB
	expect open-create 0 'created on 2 node(s)' -- "$CTL" --node "$S" --node "$B" job create \
		--workers 3 --open --dtype any --slots 2000 --partition-bytes 32768
	D=$(grep '^sigma-job=' "$TMP/out")
	ID=$(echo "$D" | sed -n 's/.*;id=\([0-9]*\);.*/\1/p')
	case "$D" in
	*\;dtype=any\;*\;chunk_bytes=1424\;node=sgd,*) ok ;;
	*) fail "open descriptor: $D" ;;
	esac
	OPEN=50000:fp32,3000:bf16,60000:fp16,2000:int32
	job_on() { # job_on TARGET: the job's job_list entry, one line
		"$CTL" -s "$1" --json jobs | tr -d ' \n' | grep -o "{\"id\":$ID,[^}]*}"
	}
	field() { echo "$1" | sed -n "s/.*\"$2\":\\([0-9]*\\).*/\\1/p"; }
	expect open-push 0 '0 wrong' -- "$WORKERS" "$D" 3 "$OPEN"
	r=$(job_on "$S")
	ks=$(field "$r" keys)
	kb=$(field "$(job_on "$B")" keys)
	# sigmad's two reducers each hold the job, with 2000 slots each
	case "$r" in
	*'"open":true,'*'"slots_budget":4000,"slots":2000'*) ok ;;
	*) fail "open job on sigmad: $r" ;;
	esac
	if [ -n "$ks" ] && [ -n "$kb" ] && [ "$ks" -gt 0 ] && [ "$kb" -gt 0 ] &&
		[ $((ks + kb)) = 13 ]; then
		ok
	else
		fail "open job's keys: sigmad '$ks', sigma-udpd '$kb' (want both > 0, 13 in all)"
	fi
	# every bucket to the other reducer, live: each key is made there by its next push
	expect move 0 'true' -- "$CTL" -s "$S" --json layout set keymap=1,0
	expect open-moved 0 '0 wrong' -- "$WORKERS" "$D" 3 "$OPEN" --first-round 3
	for _ in $(seq 50); do
		"$CTL" -s "$S" --json layout | tr -d ' \n' | grep -q '"keymap":\[1,0,1,0,' && break
		sleep 0.1
	done
	"$CTL" -s "$S" --json layout | tr -d ' \n' | grep -q '"keymap":\[1,0,1,0,' && ok ||
		fail "the move did not commit: $("$CTL" -s "$S" layout)"
	expect open-after 0 '0 wrong' -- "$WORKERS" "$D" 2 "$OPEN" --first-round 6
	k2=$(field "$(job_on "$S")" keys)
	[ "$k2" = $((2 * ks)) ] && ok || fail "keys on sigmad after the move: $k2 (want $((2 * ks)))"
	expect open-destroy 0 'destroyed on 2 node(s)' -- "$CTL" --node "$S" --node "$B" job \
		destroy "$ID"
	kill -TERM "$UPID"
	wait "$UPID" || fail "sigma-udpd exit $?"
	echo "jobs_sigmad: $checks checks, $fails failed"
	[ "$fails" = 0 ]
	exit
fi
SIGMAD=$1
UDPD=$2
CTL=$3
WORKERS=$4
NETNS=$5
TMP=$(mktemp -d /tmp/sg_jobs_sigmad.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
printf '[control]\nunix = %s/sgd.sock\nname = sgd\n' "$TMP" >"$TMP/jobs.ini"
# two reducers: an open job is on both, and its keys move between them
SIGMA_VDEV_ARGS=,qpairs=3 SIGMA_LCORES='(0-3)@(0-1)' \
	SIGMA_SIGMAD_OPTS='--io (0,0,1) --reduce 2-3' \
	"$NETNS" "$SIGMAD" "$TMP/jobs.ini" "$0" --inner "$UDPD" "$CTL" "$WORKERS" "$TMP"
rc=$?
echo "jobs_sigmad: exit $rc"
exit $rc
