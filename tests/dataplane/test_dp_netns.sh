#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# sigmad on net_af_packet in a test-made network namespace, with workers on
# ordinary kernel UDP sockets in a peer namespace (bench/sigmad_netns.sh makes
# both and the veth between them). The kernel resolves sigmad's address by
# ARP and verifies the UDP checksums sigmad computes. Run twice: MTU 1500 with
# 1424-byte chunks, and MTU 9000 with 8920-byte chunks (af_packet with 16 KiB
# ring frames). The MTU 1500 run sends to 9300 and to 9301, the port of
# sigmad's one reducer (steering falls back to the ring hand-off on af_packet).
# A third run: af_packet with 3 queue pairs under a layout that names RX queue 0
# only, with 8 workers whose flows the kernel spreads over the 3 queues. A fourth:
# garbage from 6000 source addresses beside live workers, then 64 new workers.
# Skips (77) where namespaces are not allowed.
# Usage: test_dp_netns.sh path/to/sigmad path/to/dp_kernel_workers.py path/to/sigmad_netns.sh
#        path/to/dp_flood.py
set -u
SIGMAD=$1
WORKERS_PY=$2
NETNS=$3
FLOOD_PY=$4
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }

fails=0
# MTU, chunk: 3 workers, 2 keys of 4 chunks each, 3 rounds
for case in "1500 1424 1" "9000 8920 0"; do
	set -- $case
	part=$(($2 * 4))
	printf '[job 1]\nworkers = 3\ntoken = 0x1234\nkeys = 2\npartition_bytes = %s\nchunk_bytes = %s\n' \
		"$part" "$2" >"$TMP/jobs.ini"
	SIGMA_MTU=$1 timeout 150 "$NETNS" "$SIGMAD" "$TMP/jobs.ini" \
		timeout 90 python3 "$WORKERS_PY" 10.79.0.1 9300 10.79.0.2 3 2 "$part" "$2" 3 0x1234 "$3" \
		>"$TMP/out" 2>&1
	rc=$?
	cat "$TMP/out"
	[ "$rc" = 77 ] && exit 77
	if [ "$rc" != 0 ]; then
		echo "FAIL: MTU $1, chunk $2: exit $rc"
		fails=1
	fi
	if ! grep -q 'engine:.* [1-9][0-9]* rounds completed' "$TMP/out"; then
		echo "FAIL: MTU $1: sigmad completed no round"
		fails=1
	fi
	if grep -q 'drop udp_csum' "$TMP/out"; then
		echo "FAIL: MTU $1: sigmad dropped kernel datagrams for their UDP checksum"
		fails=1
	fi
done
# net_af_packet with 3 queue pairs (one TX queue per lcore: io + 2 reducers): the
# kernel spreads incoming flows over its 3 RX queues, and the layout names queue 0
# only. 8 workers (8 flows): each must get every result, so sigmad must poll all 3.
printf '[job 1]\nworkers = 8\ntoken = 0x1234\nkeys = 2\npartition_bytes = 2848\nchunk_bytes = 1424\n' \
	>"$TMP/jobs.ini"
SIGMA_VDEV_ARGS=,qpairs=3 SIGMA_LCORES='(0-3)@(0-1)' \
	SIGMA_SIGMAD_OPTS='--io (0,0,1) --reduce 2-3' timeout 150 "$NETNS" "$SIGMAD" "$TMP/jobs.ini" \
	timeout 90 python3 "$WORKERS_PY" 10.79.0.1 9300 10.79.0.2 8 2 2848 1424 3 0x1234 \
	>"$TMP/out" 2>&1
rc=$?
cat "$TMP/out"
if [ "$rc" != 0 ]; then
	echo "FAIL: af_packet qpairs=3, io + 2 reducers: exit $rc"
	fails=1
fi
# Garbage from 6000 source addresses (zero bytes, a wrong token, an unknown job)
# while job 1's 4 workers push, then 64 workers of job 2 that sigmad has never
# heard from: every one must be answered (issue 17: the flood used to fill the
# reply-address table and lock every new worker out).
printf '[job 1]\nworkers = 4\ntoken = 0x1234\nkeys = 2\npartition_bytes = 2848\nchunk_bytes = 1424\n[job 2]\nworkers = 64\ntoken = 0x5678\nkeys = 1\npartition_bytes = 1424\nchunk_bytes = 1424\n' \
	>"$TMP/jobs.ini"
timeout 200 "$NETNS" "$SIGMAD" "$TMP/jobs.ini" timeout 150 sh -c '
	python3 "$1" 10.79.0.1 9300 10.79.0.2 4 2 2848 1424 200 0x1234 & live=$!
	python3 "$2" 10.79.0.1 9300 10.79.0.2 6000 20000 1 0x1234 || exit 1
	wait $live || { echo "live workers failed during the flood"; exit 1; }
	SIGMA_JOB=2 SIGMA_PORT_BASE=45000 python3 "$1" 10.79.0.1 9300 10.79.0.2 64 1 1424 1424 2 0x5678' \
	sh "$WORKERS_PY" "$FLOOD_PY" >"$TMP/out" 2>&1
rc=$?
cat "$TMP/out"
if [ "$rc" != 0 ]; then
	echo "FAIL: garbage from 6000 addresses, then 64 new workers: exit $rc"
	fails=1
fi
# the flood reached sigmad (the kernel may drop a little of it): magic, token and job
got=$(sed -n 's/^ *| *engine drop \(magic\|token\|job\) *\([0-9]*\)$/\2/p' "$TMP/out" |
	awk '{ n += $1 } END { print n + 0 }')
if [ "$got" -lt 5000 ]; then
	echo "FAIL: sigmad counted $got of the 6000 garbage datagrams (magic, token, job)"
	fails=1
fi
echo "dp_netns: $([ $fails = 0 ] && echo passed || echo failed)"
exit $fails
