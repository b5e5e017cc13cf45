#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# libsigma against the real sigmad: bench/sigmad_netns.sh puts sigmad on
# net_af_packet in one test-made network namespace and runs client_workers
# (3 libsigma workers over kernel UDP) in a peer namespace; every sum is
# checked. Skips (77) where namespaces or veth are not allowed.
# Usage: test_client_sigmad.sh path/to/sigmad path/to/client_workers path/to/sigmad_netns.sh
set -u
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# tensor 0 = 6 partitions of 40 chunks of 1424 bytes, 4 rounds
cat >"$TMP/jobs.ini" <<'INI'
[job 5]
workers = 3
token = 0x77
keys = 6
partition_bytes = 56960
chunk_bytes = 1424
INI
"$3" "$1" "$TMP/jobs.ini" "$2" 10.79.0.1 9300 3 6 56960 1424 4 0x77 5
rc=$?
echo "client_sigmad: exit $rc"
exit $rc
