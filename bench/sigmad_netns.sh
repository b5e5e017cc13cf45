#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Run a command against a real sigmad on a machine without a NIC: sigmad on
# net_af_packet in one network namespace, the command (kernel-UDP workers,
# MPI) in a peer namespace, joined by a veth pair. sigmad is at 10.79.0.1:9300
# (also in $SIGMA_NODE), its telemetry socket in $SIGMA_TELEMETRY (sigma-bench
# reads busy% per lcore from it); its jobs are the [job N] sections of JOBS_INI. The
# MTU is 1500: sigmad's af_packet port takes at most 1518-byte frames, so use
# --chunk 1424. When sigmad stops, its per-lcore table (busy%) is printed.
# Traffic stays inside the two namespaces made here. Needs root.
#
# Exit: the command's status; 1 if sigmad failed or did not exit cleanly;
# 77 if namespaces or veth cannot be made here.
#
# Usage: bench/sigmad_netns.sh SIGMAD JOBS_INI COMMAND [ARGS...]
# e.g.
#   build/bench/sigma-bench run --chunk 1424 --print-sigmad-config >/tmp/jobs.ini
#   bench/sigmad_netns.sh build/dataplane/sigmad /tmp/jobs.ini \
#       build/bench/sigma-bench run --chunk 1424 --attach 10.79.0.1:9300
set -u
. "$(dirname "$0")/sigmad_lib.sh"
SIGMAD=$1
JOBS=$2
shift 2
NSA=sgnA$$
NSB=sgnB$$
VA=snA$$
VB=snB$$
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
ip -n "$NSA" link set "$VA" up
ip -n "$NSB" link set lo up
ip -n "$NSB" addr add 10.79.0.2/24 dev "$VB"
ip -n "$NSB" link set "$VB" up
# af_packet never completes a checksum that the peer's kernel left to offload.
CSUM=()
if ! { command -v ethtool >/dev/null && ip netns exec "$NSB" ethtool -K "$VB" tx off >/dev/null 2>&1; }; then
	CSUM=(--no-udp-checksum)
fi
{
	sigmad_base_ini 10.79.0.1
	cat "$JOBS"
} >"$TMP/sigmad.ini"
ip netns exec "$NSA" timeout 900 "$SIGMAD" --no-huge --no-shconf --no-pci -m 512 \
	--file-prefix=sg_netns_$$ '--lcores=(0-1)@(0-1)' --log-level=lib.eal:error \
	--vdev=net_af_packet0,iface="$VA" -- --config "$TMP/sigmad.ini" "${CSUM[@]}" \
	>"$TMP/sigmad.out" 2>&1 &
SPID=$!
if ! sigmad_wait "$TMP/sigmad.out" "$SPID"; then
	echo "FAIL: sigmad did not start"
	cat "$TMP/sigmad.out"
	exit 1
fi
rc=0
SIGMA_NODE=10.79.0.1:9300 SIGMA_TELEMETRY=/var/run/dpdk/sg_netns_$$/dpdk_telemetry.v2 \
	ip netns exec "$NSB" "$@" || rc=$?
echo "sigmad (net_af_packet on a veth):"
src=0
sigmad_stop "$SPID" "$TMP/sigmad.out" || src=$?
SPID=
if [ "$src" != 0 ]; then
	echo "FAIL: sigmad exit $src"
	[ "$rc" = 0 ] && rc=1
fi
exit $rc
