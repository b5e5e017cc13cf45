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
# the job is destroyed on both. Skips (77) where namespaces are not allowed.
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
"$NETNS" "$SIGMAD" "$TMP/jobs.ini" "$0" --inner "$UDPD" "$CTL" "$WORKERS" "$TMP"
rc=$?
echo "jobs_sigmad: exit $rc"
exit $rc
