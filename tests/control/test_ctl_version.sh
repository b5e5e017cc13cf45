#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The control API's version check (docs/control.md, "Versions"): sigmactl's
# `version` against a real node (sigma-udpd) agrees; the job service refuses a
# node of another control API or wire protocol version, or one without the
# `version` method (older), naming both sides' versions, before it calls
# anything else there (a fake node, tests/control/fake_node.py, logs what it
# was asked).
# Usage: test_ctl_version.sh SIGMACTL SIGMA_UDPD FAKE_NODE_PY RELEASE
set -u
CTL=$1
UDPD=$2
FAKE=$3
RELEASE=$4
TMP=$(mktemp -d /tmp/sg_ctlver.XXXXXX)
PIDS=()
fails=0
checks=0
trap cleanup_pids EXIT
# shellcheck source=../dataplane/expect_lib.sh
. "$(dirname "$0")/../dataplane/expect_lib.sh"

# a real node: versions agree
"$UDPD" --port 0 --name ver-node --unix "$TMP/n.sock" >"$TMP/node.log" 2>&1 &
PIDS+=($!)
wait_for "$TMP/node.log" 'sigma-udpd: node' || fail "sigma-udpd did not start"
expect version-real 0 "sigmactl  $RELEASE" -- "$CTL" -s "unix:$TMP/n.sock" version
grep -Eq "^node +$RELEASE +1 +1\$" "$TMP/out" && ok || { fail "node row"; cat "$TMP/out"; }
expect version-json 0 '"compatible": true' -- "$CTL" -s "unix:$TMP/n.sock" --json version
expect job-real 0 'sigma-job=1;' -- "$CTL" --node "unix:$TMP/n.sock" job create --workers 1 \
	--tensor a:10

# fake nodes: another API, another protocol, no version method
fake() { # fake NAME API PROTOCOL: start one, wait for its socket
	python3 "$FAKE" "$TMP/$1.sock" "$TMP/$1.log" "$2" "$3" &
	PIDS+=($!)
	for _ in $(seq 100); do [ -S "$TMP/$1.sock" ] && return 0; sleep 0.05; done
	fail "fake node $1 did not start"
}
fake api2 2 1
fake proto2 1 2
fake old none 1
expect job-api2 1 "speaks control API 2 and wire protocol 1, this client (release $RELEASE) API 1 and protocol 1" \
	-- "$CTL" --node "unix:$TMP/api2.sock" job create --workers 1 --tensor a:10
grep -q "node 0 (unix:$TMP/api2.sock): the node (release 9.9.9)" "$TMP/out" && ok ||
	{ fail "the node is not named"; cat "$TMP/out"; }
expect job-proto2 1 "speaks control API 1 and wire protocol 2, this client (release $RELEASE) API 1 and protocol 1" \
	-- "$CTL" --node "unix:$TMP/proto2.sock" job create --workers 1 --tensor a:10
expect job-old 1 "has no 'version' method: it is older than this client (release $RELEASE, control API 1, wire protocol 1): upgrade the node" \
	-- "$CTL" --node "unix:$TMP/old.sock" job create --workers 1 --tensor a:10
# a mix: the good node first, then one of another API; nothing is made on either
expect job-mixed 1 "speaks control API 2" -- "$CTL" --node "unix:$TMP/n.sock" \
	--node "unix:$TMP/api2.sock" job create --workers 2 --tensor a:10
expect jobs-after 0 "" -- "$CTL" -s "unix:$TMP/n.sock" --json jobs
[ "$(grep -c '"id"' "$TMP/out")" = 1 ] && ok || { fail "the mixed job was made"; cat "$TMP/out"; }
# the fakes were asked for their version and nothing else
for f in api2 proto2 old; do
	[ "$(sort -u "$TMP/$f.log")" = version ] && ok ||
		{ fail "$f was asked more than its version:"; cat "$TMP/$f.log"; }
done
expect version-api2 1 "the node (release 9.9.9) speaks control API 2" -- \
	"$CTL" -s "unix:$TMP/api2.sock" version
grep -Eq '^node +9\.9\.9 +2 +1$' "$TMP/out" && ok || { fail "api2 row"; cat "$TMP/out"; }
expect version-old 1 "has no 'version' method" -- "$CTL" -s "unix:$TMP/old.sock" version
expect sigmactl-V 0 "sigmactl (Sigma) $RELEASE" -- "$CTL" -V
echo "ctl_version: $checks checks, $fails failed"
[ "$fails" = 0 ]
