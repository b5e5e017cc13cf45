#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Run a command against a real sigmad over net_memif (shared memory, no NIC,
# no namespaces): sigmad gets NPORTS memif server ports on one socket, with
# ids 0..NPORTS-1, and one run-to-completion lcore per port; worker r of the
# command connects as the memif client with id r (sigma-bench run/compare
# --memif SOCK; client_workers with SIGMA_EAL). sigmad is at 10.80.0.1:9300
# ($SIGMA_NODE), the socket is $SIGMA_MEMIF, sigmad's lcore count
# $SIGMA_MEMIF_QUEUES (a memif client must poll one RX queue per sigmad lcore:
# each lcore answers on its own TX queue), sigmad's telemetry socket
# $SIGMA_TELEMETRY, its process id $SIGMA_SIGMAD_PID. MTU 9000: 8920-byte chunks. Every memif buffer holds a
# whole jumbo frame (bsize=9216, on both sides: give the clients the same):
# frames chained over several 2 KiB buffers came back corrupted or replayed
# under load with DPDK 22.11's memif, so each frame takes one buffer. Every lcore of sigmad takes
# the sleep idle policy, so that sigmad, workers and MPI can share few cores.
# When sigmad stops, its final per-lcore table (busy%) and drops are printed.
# SIGMA_SIGMAD_OPTS adds sigmad options (e.g. "--idle busy").
#
# Exit: the command's status; 1 if sigmad failed or did not exit cleanly;
# 77 if sigmad's EAL cannot start here.
#
# Usage: bench/sigmad_memif.sh SIGMAD JOBS_INI NPORTS COMMAND [ARGS...]
# e.g.
#   build/bench/sigma-bench compare --print-sigmad-config >/tmp/jobs.ini
#   bench/sigmad_memif.sh build/sigmad/sigmad /tmp/jobs.ini 4 \
#       build/bench/sigma-bench compare --attach 10.80.0.1:9300 --memif /tmp/.../memif.sock
# ($SIGMA_MEMIF is set for the command: wrap it in sh -c to use it.)
set -u
. "$(dirname "$0")/sigmad_lib.sh"
SIGMAD=$1
JOBS=$2
NPORTS=$3
shift 3
sigmad_count sigmad_memif.sh NPORTS "$NPORTS"
TMP=$(mktemp -d)
SOCK=$TMP/memif.sock
SPID=
PREFIX=sg_memif_$$
# EAL leaves its runtime directory (the telemetry socket's) behind: removed at the end
if [ "$(id -u)" = 0 ]; then
	RUNDIR=/var/run/dpdk/$PREFIX
else
	RUNDIR=${XDG_RUNTIME_DIR:-/tmp}/dpdk/$PREFIX
fi
cleanup() {
	[ -n "$SPID" ] && sigmad_kill "$SPID"
	rm -rf "$TMP" "$RUNDIR"
}
trap cleanup EXIT

VDEVS=()
LAYOUT=
for ((i = 0; i < NPORTS; i++)); do
	VDEVS+=("--vdev=net_memif$i,role=server,id=$i,socket=$SOCK,socket-abstract=no,bsize=9216")
	LAYOUT="$LAYOUT${LAYOUT:+,}($i,0,$((i + 1)))"
done
{
	sigmad_base_ini 10.80.0.1 9000 "$LAYOUT"
	cat "$JOBS"
} >"$TMP/sigmad.ini"
ncpu=$(nproc)
read -ra OPTS <<<"${SIGMA_SIGMAD_OPTS:-}"
: >"$TMP/sigmad.out"
timeout 1800 "$SIGMAD" --no-huge --no-shconf --no-pci -m 1024 --file-prefix=$PREFIX \
	"--lcores=(0-$NPORTS)@(0-$((ncpu - 1)))" --log-level=lib.eal:error "${VDEVS[@]}" \
	-- --config "$TMP/sigmad.ini" --no-udp-checksum "${OPTS[@]}" >"$TMP/sigmad.out" 2>&1 &
SPID=$!
sigmad_started "$TMP/sigmad.out" "$SPID" || exit $?
rc=0
# sigmad itself (timeout's child), for commands that signal it
SIGMA_SIGMAD_PID=$(child_pid "$SPID")
SIGMA_NODE=10.80.0.1:9300 SIGMA_MEMIF=$SOCK SIGMA_MEMIF_QUEUES=$NPORTS SIGMA_SIGMAD_PID=$SIGMA_SIGMAD_PID \
	SIGMA_TELEMETRY=$RUNDIR/dpdk_telemetry.v2 "$@" || rc=$?
sigmad_finish "sigmad (net_memif, $NPORTS port(s)):" "$SPID" "$TMP/sigmad.out" "$rc"
rc=$?
SPID=
exit $rc
