#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Run a command against a real sigmad on a machine without a NIC: sigmad on
# net_af_packet in one network namespace, the command (kernel-UDP workers,
# MPI) in a peer namespace, joined by a veth pair. sigmad is at 10.79.0.1:9300
# (also in $SIGMA_NODE), the command's address is 10.79.0.2, sigmad's
# telemetry socket is in $SIGMA_TELEMETRY (sigma-bench reads busy% per lcore
# from it); its jobs are the [job N] sections of JOBS_INI. When sigmad stops,
# its final per-lcore table (busy%) and drops are printed.
#
# MTU: $SIGMA_MTU, 1500 by default (use --chunk 1424). With SIGMA_MTU=9000 the
# veth carries jumbo frames and af_packet's ring frames are 16 KiB
# (framesz=16384), so 8920-byte chunks work.
# UDP checksums: sigmad computes them and the peer kernel verifies them when
# ethtool can turn the veth's TX offload off (af_packet never completes an
# offloaded checksum); otherwise sigmad runs with --no-udp-checksum.
# Traffic stays inside the two namespaces made here. Needs root.
# SIGMA_PMD=af_xdp runs sigmad on net_af_xdp instead (docs/sigmad.md,
# "AF_XDP"): the veth end gets sigmad's address, so that the kernel answers
# ARP and ping through sigmad's XDP program, and after sigmad stops no XDP
# program may be left on it (else exit 1). SIGMA_AFXDP_STALE=1 first starts a
# sigmad and SIGKILLs it, so that the real one starts over its stale program.
# Optional: SIGMA_VDEV_ARGS is appended to the af_packet vdev's arguments (e.g.
# ",qpairs=3": one queue pair per lcore), SIGMA_LCORES replaces EAL's --lcores
# ((0-1)@(0-1)), and SIGMA_SIGMAD_OPTS adds sigmad options (e.g. a layout:
# "--io (0,0,1) --reduce 2-3").
#
# Exit: the command's status; 1 if sigmad failed or did not exit cleanly;
# 77 if namespaces or veth cannot be made here.
#
# Usage: [SIGMA_MTU=9000] bench/sigmad_netns.sh SIGMAD JOBS_INI COMMAND [ARGS...]
# e.g.
#   build/bench/sigma-bench run --chunk 1424 --print-sigmad-config >/tmp/jobs.ini
#   bench/sigmad_netns.sh build/sigmad/sigmad /tmp/jobs.ini \
#       build/bench/sigma-bench run --chunk 1424 --attach 10.79.0.1:9300
set -u
. "$(dirname "$0")/sigmad_lib.sh"
SIGMAD=$1
JOBS=$2
shift 2
MTU=${SIGMA_MTU:-1500}
PMD=${SIGMA_PMD:-af_packet}
NSA=sgnA$$
NSB=sgnB$$
VA=snA$$
VB=snB$$
TMP=$(mktemp -d)
SPID=
cleanup() {
	[ -n "$SPID" ] && sigmad_kill "$SPID"
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
ip -n "$NSA" link set "$VA" mtu "$MTU" up || exit 1
ip -n "$NSB" link set lo up
ip -n "$NSB" addr add 10.79.0.2/24 dev "$VB"
ip -n "$NSB" link set "$VB" mtu "$MTU" up || exit 1
CSUM=()
if command -v ethtool >/dev/null && ip netns exec "$NSB" ethtool -K "$VB" tx off >/dev/null 2>&1; then
	echo "UDP checksums: computed by sigmad, verified by the peer kernel"
else
	CSUM=(--no-udp-checksum)
	echo "UDP checksums: off (no ethtool to turn the veth's TX offload off)"
fi
# af_packet copies whole ring frames: jumbo frames need 16 KiB ones.
RING=
[ "$MTU" -gt 1500 ] && RING=,framesz=16384,blocksz=16384,framecnt=512
VDEV=net_af_packet0,iface=$VA$RING${SIGMA_VDEV_ARGS:-}
if [ "$PMD" = af_xdp ]; then
	VDEV=net_af_xdp0,iface=$VA,start_queue=0,queue_count=1${SIGMA_VDEV_ARGS:-}
	ip -n "$NSA" addr add 10.79.0.1/24 dev "$VA" || exit 1
fi
xdp_on() { ip -n "$NSA" -d link show dev "$VA" | grep -o 'prog/xdp id [0-9]*'; }
{
	sigmad_base_ini 10.79.0.1 "$MTU"
	cat "$JOBS"
} >"$TMP/sigmad.ini"
: >"$TMP/sigmad.out"
read -ra OPTS <<<"${SIGMA_SIGMAD_OPTS:-}"
start_sigmad() {
	ip netns exec "$NSA" timeout 900 "$SIGMAD" --no-huge --no-shconf --no-pci -m 512 \
		--file-prefix=sg_netns_$$ "--lcores=${SIGMA_LCORES:-(0-1)@(0-1)}" \
		--log-level=lib.eal:error "--vdev=$VDEV" \
		-- --config "$TMP/sigmad.ini" "${CSUM[@]}" "${OPTS[@]}" >"$TMP/sigmad.out" 2>&1 &
	SPID=$!
}
if [ "$PMD" = af_xdp ] && [ "${SIGMA_AFXDP_STALE:-0}" = 1 ]; then
	start_sigmad
	sigmad_started "$TMP/sigmad.out" "$SPID" || exit $?
	KPID=$(child_pid "$SPID")
	sigmad_kill "$SPID"
	wait "$SPID" 2>/dev/null
	SPID=
	# the killed sigmad takes a moment to exit (until then it is alive)
	for _ in $(seq 100); do
		st=$(cat "/proc/$KPID/stat" 2>/dev/null) || break
		st=${st##*) }
		case $st in Z* | X*) break ;; esac
		sleep 0.05
	done
	rm -rf "/var/run/dpdk/sg_netns_$$"
	echo "after SIGKILL: $(xdp_on || echo 'no XDP program') on $VA"
fi
start_sigmad
sigmad_started "$TMP/sigmad.out" "$SPID" || exit $?
[ "$PMD" = af_xdp ] && echo "sigmad running: $(xdp_on || echo 'no XDP program') on $VA"
rc=0
SIGMA_NODE=10.79.0.1:9300 SIGMA_TELEMETRY=/var/run/dpdk/sg_netns_$$/dpdk_telemetry.v2 \
	ip netns exec "$NSB" "$@" || rc=$?
sigmad_finish "sigmad (net_$PMD on a veth, MTU $MTU):" "$SPID" "$TMP/sigmad.out" "$rc"
rc=$?
SPID=
grep -E 'XDP|xdp' "$TMP/sigmad.out" | sed 's/^/  | /'
if [ "$PMD" = af_xdp ] && left=$(xdp_on); then
	echo "FAIL: sigmad stopped and left $left on $VA"
	[ "$rc" = 0 ] && rc=1
fi
exit $rc
