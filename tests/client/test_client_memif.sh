#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# libsigma's DPDK transport against the real sigmad over net_memif: sigmad is
# the memif server (started first), client_workers the memif client with one
# worker (one session per port): ARP resolves sigmad's MAC, then 6 partitions
# of 20 chunks go through 4 rounds, every sum checked. Nothing leaves the
# machine (shared memory). Skips (77) where EAL cannot start.
# Usage: test_client_memif.sh path/to/sigmad path/to/client_workers
set -u
. "$(dirname "$0")/../../bench/sigmad_lib.sh"
SIGMAD=$1
WORKERS=$2
TMP=$(mktemp -d)
SOCK=$TMP/memif.sock
SPID=
cleanup() {
	[ -n "$SPID" ] && kill -KILL "$SPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

sigmad_base_ini 10.81.0.1 >"$TMP/sigmad.ini"
cat >>"$TMP/sigmad.ini" <<'INI'
[job 9]
workers = 1
token = 0x99
keys = 6
partition_bytes = 28480
chunk_bytes = 1424
INI
timeout 120 "$SIGMAD" --no-huge --no-shconf --no-pci -m 256 --file-prefix=sg_cl_memif_s$$ \
	'--lcores=(0-1)@(0-1)' --log-level=lib.eal:error \
	--vdev=net_memif0,role=server,id=0,socket="$SOCK",socket-abstract=no \
	-- --config "$TMP/sigmad.ini" >"$TMP/sigmad.out" 2>&1 &
SPID=$!
if ! sigmad_wait "$TMP/sigmad.out" "$SPID"; then
	if grep -q 'EAL' "$TMP/sigmad.out"; then
		echo "SKIP: sigmad's EAL cannot start here"; cat "$TMP/sigmad.out"; exit 77
	fi
	echo "FAIL: sigmad did not start"; cat "$TMP/sigmad.out"; exit 1
fi
SIGMA_LOCAL_IP=10.81.0.2 \
SIGMA_EAL="--no-huge --no-shconf --no-pci -m 256 --file-prefix=sg_cl_memif_c$$ --lcores=0@(0-1) --log-level=lib.eal:error --vdev=net_memif0,role=client,id=0,socket=$SOCK,socket-abstract=no" \
	timeout 90 "$WORKERS" 10.81.0.1 9300 1 6 28480 1424 4 0x99 9
wrc=$?
src=0
sigmad_stop "$SPID" "$TMP/sigmad.out" || src=$?
SPID=
fails=0
[ "$wrc" = 0 ] || { echo "FAIL: client_workers exit $wrc"; fails=1; }
[ "$src" = 0 ] || { echo "FAIL: sigmad exit $src"; fails=1; }
[ "$wrc" = 77 ] && exit 77
echo "client_memif: $([ $fails = 0 ] && echo passed || echo failed)"
exit $fails
