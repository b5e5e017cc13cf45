# SPDX-License-Identifier: BSD-3-Clause
#
# Checks shared by the dataplane's shell tests (sourced). The caller sets
# TMP (a scratch folder) and counts with the variables checks and fails.

ok() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*"; }
# expect NAME WANT_RC NEEDLE -- command...: exit status and a line of output,
# within EXPECT_TIMEOUT seconds (60)
expect() {
	local name=$1 want=$2 needle=$3 rc
	shift 4
	timeout "${EXPECT_TIMEOUT:-60}" "$@" >"$TMP/out" 2>&1
	rc=$?
	if [ "$rc" != "$want" ]; then
		fail "$name: exit $rc, expected $want"; sed 's/^/  | /' "$TMP/out" | tail -20
	elif ! grep -qF -- "$needle" "$TMP/out"; then
		fail "$name: output lacks '$needle'"; sed 's/^/  | /' "$TMP/out" | tail -20
	else
		ok
	fi
}
# The exit trap of a test with background processes: kill every pid in PIDS and
# remove TMP (`PIDS=(); trap cleanup_pids EXIT`).
cleanup_pids() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
