# SPDX-License-Identifier: BSD-3-Clause
#
# Checks shared by the dataplane's shell tests (sourced). The caller sets
# TMP (a scratch folder) and counts with the variables checks and fails.

ok() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*"; }
# wait_for FILE PATTERN [PID]: wait up to 10 s until FILE has a line matching PATTERN,
# or PID (if given) is gone; returns whether FILE has it
wait_for() {
	for _ in $(seq 100); do
		grep -q -- "$2" "$1" && return 0
		[ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null && break
		sleep 0.1
	done
	grep -q -- "$2" "$1"
}
# sighup PID LOG: SIGHUP, then wait up to 5 s for sigmad's verdict on it in LOG
sighup() {
	local n
	n=$(grep -c 'SIGHUP: \(done\|config rejected\)' "$2")
	kill -HUP "$1"
	for _ in $(seq 50); do
		[ "$(grep -c 'SIGHUP: \(done\|config rejected\)' "$2")" -gt "$n" ] && return 0
		sleep 0.1
	done
	return 1
}
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
# make_secret FILE: a fresh 32-byte control secret (64 hex digits), mode 0600 as nodes want it
make_secret() {
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$1"
	chmod 600 "$1"
}
# The exit trap of a test with background processes: kill every pid in PIDS and
# remove TMP (`PIDS=(); trap cleanup_pids EXIT`).
cleanup_pids() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
