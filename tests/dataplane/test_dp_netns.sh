#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# sigmad on net_af_packet inside a network namespace that this test creates,
# with workers on ordinary kernel UDP sockets in a peer namespace, joined by a
# veth pair. The kernel resolves sigmad's address by ARP and verifies the UDP
# checksums sigmad computes. Traffic goes only to the addresses assigned
# here, inside these namespaces. Skips (77) where namespaces are not allowed.
# Usage: test_dp_netns.sh path/to/sigmad path/to/dp_kernel_workers.py
set -u
SIGMAD=$1
WORKERS_PY=$2
NSA=sgdpA$$
NSB=sgdpB$$
VA=sgA$$
VB=sgB$$
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
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
if ! ip netns add "$NSA" 2>"$TMP/err"; then
	echo "SKIP: cannot create a network namespace: $(cat "$TMP/err")"
	exit 77
fi
ip netns add "$NSB" || exit 1
ip link add "$VA" type veth peer name "$VB" || { echo "SKIP: no veth"; exit 77; }
ip link set "$VA" netns "$NSA"
ip link set "$VB" netns "$NSB"
ip -n "$NSA" link set "$VA" up
ip -n "$NSB" link set lo up
ip -n "$NSB" addr add 10.77.0.2/24 dev "$VB"
ip -n "$NSB" link set "$VB" up
# The peer's kernel would leave UDP checksums to an offload that af_packet
# never completes; without ethtool sigmad neither sends nor checks them.
CSUM=()
if command -v ethtool >/dev/null && ip netns exec "$NSB" ethtool -K "$VB" tx off >/dev/null 2>&1; then
	echo "UDP checksums: computed by sigmad, verified by the peer kernel"
else
	CSUM=(--no-udp-checksum)
	echo "UDP checksums: off (no ethtool to turn the veth's TX offload off)"
fi

cat >"$TMP/sigmad.ini" <<'EOF'
[net]
ip = 10.77.0.1
udp_port = 9300
mtu = 1500
[layout]
rtc = (0,0,1)
[resources]
mbufs = 2048
pool_bufs = 256
[live]
idle = sleep
idle_sleep_us = 200
[job 1]
workers = 3
token = 0x1234
keys = 2
partition_bytes = 5696
EOF
ip netns exec "$NSA" timeout 120 "$SIGMAD" --no-huge --no-shconf --no-pci -m 256 \
	--file-prefix=sg_dp_netns_$$ '--lcores=(0-1)@0' --log-level=lib.eal:error \
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
# 3 workers, 2 keys of 5696 bytes = 4 chunks of 1424 bytes each, 3 rounds
ip netns exec "$NSB" timeout 90 python3 "$WORKERS_PY" 10.77.0.1 9300 10.77.0.2 3 2 5696 1424 3 0x1234
wrc=$?
kill -TERM "$SPID"
wait "$SPID"
src=$?
SPID=
sed 's/^/  | /' "$TMP/sigmad.out" | grep -v '^  | sigma.dataplane: job' | tail -25
fails=0
[ "$wrc" = 0 ] || { echo "FAIL: kernel workers exit $wrc"; fails=1; }
[ "$src" = 0 ] || { echo "FAIL: sigmad exit $src"; fails=1; }
grep -q 'final statistics' "$TMP/sigmad.out" || { echo "FAIL: no final statistics"; fails=1; }
if grep -q 'drop udp_csum' "$TMP/sigmad.out"; then
	echo "FAIL: sigmad dropped kernel datagrams for their UDP checksum"
	fails=1
fi
echo "dp_netns: $([ $fails = 0 ] && echo passed || echo failed)"
exit $fails
