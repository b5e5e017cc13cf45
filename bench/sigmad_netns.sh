#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Run "sigma-bench run" or "sigma-bench compare" against a real sigmad on a
# machine without a NIC: sigmad on net_af_packet in one network namespace, the
# workers (kernel UDP) and MPI in a peer namespace, joined by a veth pair
# (1500-byte MTU: sigmad's af_packet port takes at most 1518-byte frames).
# sigmad's jobs come from "sigma-bench ... --print-sigmad-config"; its
# per-lcore table (busy%) is printed when it stops. Needs root.
# Usage: bench/sigmad_netns.sh BUILD_DIR run|compare [sigma-bench options]
set -eu
BUILD=$(cd "$1" && pwd)
CMD=$2
shift 2
NSA=sgbA$$
NSB=sgbB$$
VA=sbA$$
VB=sbB$$
TMP=$(mktemp -d)
SPID=
cleanup() {
	[ -n "$SPID" ] && kill -KILL "$SPID" 2>/dev/null
	ip netns del "$NSA" 2>/dev/null || true
	ip netns del "$NSB" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

ip netns add "$NSA"
ip netns add "$NSB"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$NSA"
ip link set "$VB" netns "$NSB"
ip -n "$NSA" link set "$VA" up
ip -n "$NSB" link set lo up
ip -n "$NSB" addr add 10.79.0.2/24 dev "$VB"
ip -n "$NSB" link set "$VB" up
CSUM=()
if ! { command -v ethtool >/dev/null && ip netns exec "$NSB" ethtool -K "$VB" tx off >/dev/null 2>&1; }; then
	CSUM=(--no-udp-checksum)
fi
{
	printf '[net]\nip = 10.79.0.1\nudp_port = 9300\nmtu = 1500\n'
	printf '[layout]\nrtc = (0,0,1)\n[resources]\nmbufs = 16384\npool_bufs = 4096\n'
	"$BUILD/bench/sigma-bench" "$CMD" --chunk 1424 --print-sigmad-config "$@"
} >"$TMP/sigmad.ini"
ip netns exec "$NSA" "$BUILD/dataplane/sigmad" --no-huge --no-shconf --no-pci -m 512 \
	--file-prefix=sg_bench_$$ '--lcores=(0-1)@(0-1)' --log-level=lib.eal:error \
	--vdev=net_af_packet0,iface="$VA" -- --config "$TMP/sigmad.ini" "${CSUM[@]}" \
	>"$TMP/sigmad.out" 2>&1 &
SPID=$!
for _ in $(seq 100); do
	grep -q 'sigmad: running' "$TMP/sigmad.out" && break
	kill -0 "$SPID" 2>/dev/null || break
	sleep 0.1
done
grep -q 'sigmad: running' "$TMP/sigmad.out" || { cat "$TMP/sigmad.out"; exit 1; }
rc=0
ip netns exec "$NSB" "$BUILD/bench/sigma-bench" "$CMD" --attach 10.79.0.1:9300 --chunk 1424 \
	"$@" || rc=$?
kill -TERM "$SPID"
wait "$SPID" || true
SPID=
echo "sigmad (net_af_packet on veth):"
sed -n '/final statistics/,$p' "$TMP/sigmad.out" | sed 's/^/  /'
exit $rc
