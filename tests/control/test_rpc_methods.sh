#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Every program that serves the control API serves the methods docs/control.md
# lists ("Methods"), and no other: rpc_get_methods of the real sigmad and of
# sigma-udpd against the table. Methods register themselves next to their code
# (control/sg_ctl_rpc.h), and the linker leaves out an object file of a static
# library that nothing else in the program uses: this is the check that none
# was left out.
# Usage: test_rpc_methods.sh SIGMACTL SIGMA_UDPD SIGMAD CONTROL_MD
set -u
CTL=$1
UDPD=$2
SIGMAD=$3
DOC=$4
TMP=$(mktemp -d /tmp/sg_rpcm.XXXXXX)
PIDS=()
fails=0
checks=0
# sigmad is killed, so its EAL runtime folder is removed here
trap 'cleanup_pids; rm -rf /var/run/dpdk/sg_rpcm_$$ "${XDG_RUNTIME_DIR:-/tmp}"/dpdk/sg_rpcm_$$' EXIT
# shellcheck source=../dataplane/expect_lib.sh
. "$(dirname "$0")/../dataplane/expect_lib.sh"

# the documented names, in the order rpc_get_methods gives them: auth, then by name
sed -n '/^## Methods$/,/^## /p' "$DOC" | sed -n 's/^| `\([a-z_0-9]*\)` |.*/\1/p' >"$TMP/doc.all"
{ echo auth; grep -vx auth "$TMP/doc.all" | LC_ALL=C sort; } >"$TMP/doc"
[ "$(wc -l <"$TMP/doc")" -ge 20 ] && grep -qx auth "$TMP/doc.all" && ok ||
	{ fail "docs/control.md: the method table was not found"; cat "$TMP/doc"; }

# methods SOCKET NAME: what the node at SOCKET lists equals the documented list
methods() {
	expect "$2-call" 0 '"rpc_get_methods"' -- "$CTL" -s "unix:$1" call rpc_get_methods
	grep -o '"[a-z_0-9]*"' "$TMP/out" | tr -d '"' >"$TMP/$2"
	if diff -u "$TMP/doc" "$TMP/$2" >"$TMP/$2.diff"; then
		ok
	else
		fail "$2 serves other methods than docs/control.md lists (- doc, + $2):"
		sed 's/^/  | /' "$TMP/$2.diff"
	fi
}

"$UDPD" --port 0 --name rpcm-node --unix "$TMP/u.sock" >"$TMP/udpd.log" 2>&1 &
PIDS+=($!)
if wait_for "$TMP/udpd.log" 'sigma-udpd: node' "${PIDS[-1]}"; then
	methods "$TMP/u.sock" sigma-udpd
else
	fail "sigma-udpd did not start"; sed 's/^/  | /' "$TMP/udpd.log"
fi

cat >"$TMP/s.ini" <<INI
[layout]
rtc = (0,0,1)
[control]
unix = $TMP/d.sock
INI
"$SIGMAD" --no-huge --no-shconf --no-pci -m 256 --log-level=lib.eal:error '--lcores=(0-1)@(0-1)' \
	--vdev=net_null0 --file-prefix=sg_rpcm_$$ -- --config "$TMP/s.ini" >"$TMP/sigmad.log" 2>&1 &
PIDS+=($!)
if wait_for "$TMP/sigmad.log" 'control plane:' "${PIDS[-1]}" && [ -S "$TMP/d.sock" ]; then
	methods "$TMP/d.sock" sigmad
else
	fail "sigmad did not start its control server"; sed 's/^/  | /' "$TMP/sigmad.log"
fi

echo "rpc_methods: $checks checks, $fails failed"
[ "$fails" = 0 ]
