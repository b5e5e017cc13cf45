#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# libsigma against the real sigmad: sigmad on net_af_packet inside a network
# namespace that this test creates, libsigma workers (kernel UDP) in a peer
# namespace, joined by a veth pair. Every sum is checked by client_workers.
# Traffic goes only to the addresses assigned here, inside these namespaces.
# Skips (77) where namespaces or veth are not allowed.
# Usage: test_client_sigmad.sh path/to/sigmad path/to/client_workers
set -u
SIGMAD=$1
WORKERS=$2
MTU=1500
NSA=sgclA$$
NSB=sgclB$$
VA=scA$$
VB=scB$$
TMP=$(mktemp -d)
SPID=
cleanup() {
	[ -n "$SPID" ] && kill -KILL "$SPID" 2>/dev/null
	ip netns del "$NSA" 2>/dev/null
	ip netns del "$NSB" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

command -v ip >/dev/null || { echo "SKIP: no ip(8)"; exit 77; }
if ! ip netns add "$NSA" 2>"$TMP/err"; then
	echo "SKIP: cannot create a network namespace: $(cat "$TMP/err")"
	exit 77
fi
ip netns add "$NSB" || exit 1
ip link add "$VA" type veth peer name "$VB" || { echo "SKIP: no veth"; exit 77; }
ip link set "$VA" netns "$NSA"
ip link set "$VB" netns "$NSB"
ip -n "$NSA" link set "$VA" mtu "$MTU" up
ip -n "$NSB" link set lo up
ip -n "$NSB" addr add 10.78.0.2/24 dev "$VB"
ip -n "$NSB" link set "$VB" mtu "$MTU" up
# af_packet never completes a checksum the peer's kernel left to offload.
CSUM=()
if ! { command -v ethtool >/dev/null && ip netns exec "$NSB" ethtool -K "$VB" tx off >/dev/null 2>&1; }; then
	CSUM=(--no-udp-checksum)
fi
CHUNK=$(( (MTU - 28 - 48) / 8 * 8 ))
PART=$((CHUNK * 40))
cat >"$TMP/sigmad.ini" <<INI
[net]
ip = 10.78.0.1
udp_port = 9300
mtu = $MTU
[layout]
rtc = (0,0,1)
[resources]
mbufs = 4096
pool_bufs = 1024
[live]
idle = sleep
idle_sleep_us = 100
[job 5]
workers = 3
token = 0x77
keys = 6
partition_bytes = $PART
chunk_bytes = $CHUNK
INI
ip netns exec "$NSA" timeout 120 "$SIGMAD" --no-huge --no-shconf --no-pci -m 256 \
	--file-prefix=sg_client_sigmad_$$ '--lcores=(0-1)@0' --log-level=lib.eal:error \
	--vdev=net_af_packet0,iface="$VA" -- --config "$TMP/sigmad.ini" "${CSUM[@]}" \
	>"$TMP/sigmad.out" 2>&1 &
SPID=$!
for _ in $(seq 100); do
	grep -q 'sigmad: running' "$TMP/sigmad.out" && break
	kill -0 "$SPID" 2>/dev/null || break
	sleep 0.1
done
if ! grep -q 'sigmad: running' "$TMP/sigmad.out"; then
	echo "FAIL: sigmad did not start"
	cat "$TMP/sigmad.out"
	exit 1
fi
# 3 workers, tensor 0 = 6 partitions of 40 chunks, 4 rounds.
ip netns exec "$NSB" timeout 90 "$WORKERS" 10.78.0.1 9300 3 6 "$PART" "$CHUNK" 4 0x77 5
wrc=$?
kill -TERM "$SPID"
wait "$SPID"
src=$?
SPID=
sed 's/^/  | /' "$TMP/sigmad.out" | grep -v '^  | sigma.dataplane: job' | tail -12
fails=0
[ "$wrc" = 0 ] || { echo "FAIL: libsigma workers exit $wrc"; fails=1; }
[ "$src" = 0 ] || { echo "FAIL: sigmad exit $src"; fails=1; }
echo "client_sigmad: $([ $fails = 0 ] && echo passed || echo failed)"
exit $fails
