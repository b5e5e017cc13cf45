#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Run a command against a real sigmad on its kernel socket transport
# ([transport] type = socket): no NIC, no namespace, no vdev, and workers on
# plain kernel UDP sockets (sigma-bench run/compare --attach, client_workers).
# sigmad listens on 127.0.0.1 at a port of this script's own (udp_port and
# the 64 steering ports after it), with NLCORES run-to-completion lcores
# (lcores 1..NLCORES), or the layout options in $SIGMA_LAYOUT (e.g.
# "--io (0,0,1) --reduce 2-3"). Its idle policy is $SIGMA_IDLE (default
# sleep: an idle lcore blocks in epoll, so a baseline measured beside it runs
# on free cores); $SIGMA_SOCKET_INI is appended to its config (e.g.
# $'[socket]\ngso = no'). The command gets $SIGMA_NODE (ip:port) and
# $SIGMA_TELEMETRY (sigmad's telemetry socket, for busy% per lcore). MTU 9000:
# 8920-byte chunks. When sigmad stops, its final per-lcore table and drops
# are printed.
#
# Exit: the command's status; 1 if sigmad failed or did not exit cleanly;
# 77 if sigmad's EAL cannot start here.
#
# Usage: bench/sigmad_socket.sh SIGMAD JOBS_INI NLCORES COMMAND [ARGS...]
# e.g.
#   build/bench/sigma-bench compare --print-sigmad-config >/tmp/jobs.ini
#   bench/sigmad_socket.sh build/sigmad/sigmad /tmp/jobs.ini 1 sh -c \
#       'build/bench/sigma-bench compare --attach $SIGMA_NODE --threads-baseline --runs 3'
set -u
. "$(dirname "$0")/sigmad_lib.sh"
SIGMAD=$1
JOBS=$2
NLCORES=$3
shift 3
sigmad_count sigmad_socket.sh NLCORES "$NLCORES"
TMP=$(mktemp -d)
SPID=
cleanup() {
	[ -n "$SPID" ] && kill -KILL "$SPID" 2>/dev/null
	rm -rf "$TMP" "${RUNDIR:-/nonexistent}"
}
trap cleanup EXIT

LAYOUT=
for ((i = 1; i <= NLCORES; i++)); do
	LAYOUT="$LAYOUT${LAYOUT:+,}(0,$((i - 1)),$i)"
done
# a layout of its own may name lcores up to 8: EAL enables them all (idle ones cost nothing)
[ -n "${SIGMA_LAYOUT:-}" ] && NLCORES=8
ncpu=$(nproc)
for try in 1 2 3; do
	PORT=$((30000 + ($$ % 300) * 100 + try))
	{
		sigmad_base_ini 127.0.0.1 9000 "$LAYOUT" | sed -e "s/^udp_port = .*/udp_port = $PORT/" \
			-e "s/^idle = .*/idle = ${SIGMA_IDLE:-sleep}/"
		printf '[transport]\ntype = socket\n'
		printf '%s\n' "${SIGMA_SOCKET_INI:-}"
		cat "$JOBS"
	} >"$TMP/sigmad.ini"
	PREFIX=sg_socket_$$_$try
	if [ "$(id -u)" = 0 ]; then
		RUNDIR=/var/run/dpdk/$PREFIX
	else
		RUNDIR=${XDG_RUNTIME_DIR:-/tmp}/dpdk/$PREFIX
	fi
	: >"$TMP/sigmad.out"
	# shellcheck disable=SC2086  # $SIGMA_LAYOUT is a list of options
	timeout 1800 "$SIGMAD" --no-huge --no-shconf --no-pci -m 1024 --file-prefix=$PREFIX \
		"--lcores=(0-$NLCORES)@(0-$((ncpu - 1)))" --log-level=lib.eal:error \
		-- --config "$TMP/sigmad.ini" ${SIGMA_LAYOUT:-} >"$TMP/sigmad.out" 2>&1 &
	SPID=$!
	sigmad_started "$TMP/sigmad.out" "$SPID" && break
	rc=$?
	wait "$SPID"
	SPID=
	grep -q 'is in use' "$TMP/sigmad.out" || exit $rc
done
[ -n "$SPID" ] || exit 1
rc=0
SIGMA_NODE=127.0.0.1:$PORT SIGMA_TELEMETRY=$RUNDIR/dpdk_telemetry.v2 "$@" || rc=$?
sigmad_finish "sigmad (kernel sockets, ${SIGMA_LAYOUT:-$NLCORES rtc lcore(s)}):" "$SPID" \
	"$TMP/sigmad.out" "$rc"
rc=$?
SPID=
exit $rc
