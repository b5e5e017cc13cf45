#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# libsigma against the real sigmad: bench/sigmad_netns.sh puts sigmad on
# net_af_packet in one test-made network namespace and runs client_workers
# (3 libsigma workers over kernel UDP) in a peer namespace; every sum is
# checked. Jumbo frames: a 9000-byte MTU on the veth and 8920-byte chunks. Skips (77) where namespaces or veth are not allowed.
# Usage: test_client_sigmad.sh path/to/sigmad path/to/client_workers path/to/sigmad_netns.sh
set -u
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# tensor 0 = 6 partitions of 40 chunks of 8920 bytes, 4 rounds
cat >"$TMP/jobs.ini" <<'INI'
[job 5]
workers = 3
token = 0x77
keys = 6
partition_bytes = 356800
chunk_bytes = 8920
INI
SIGMA_MTU=9000 "$3" "$1" "$TMP/jobs.ini" "$2" 10.79.0.1 9300 3 6 356800 8920 4 0x77 5
rc=$?
echo "client_sigmad: exit $rc"
exit $rc
