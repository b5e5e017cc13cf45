#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# test_reaper.sh REAPER: sg-reaper passes a clean test's status through, fails
# a test that leaves a process running (also one that left its process group
# with setsid) and kills it, and on meson's timeout signal kills everything the
# test started within meson's half second, also a child that ignores SIGTERM.
set -u
REAPER=$1
fail=0
tag=$$
# each stray process sleeps a time of its own, so pgrep finds only this test's
mark() { echo "300.$tag$1"; }
bad() {
	echo "FAIL: $*"
	fail=1
}
# Without pgrep every "still running" check below would pass unchecked.
for t in pgrep pkill; do
	command -v "$t" >/dev/null || { echo "SKIP: no $t (apt-get install procps; ./sigma deps)"; exit 77; }
done
# alive M: whether stray M runs; pgrep's own failure (exit 2 or 3) fails the test
alive() {
	local rc=0
	pgrep -f "sleep $(mark "$1")" >/dev/null || rc=$?
	[ "$rc" -le 1 ] || bad "pgrep failed (exit $rc)"
	return "$rc"
}
cleanup() { pkill -KILL -f "sleep 300.$tag" 2>/dev/null || true; }
trap cleanup EXIT

# a clean test: its exit status, and nothing printed by the reaper
out=$("$REAPER" --grace-ms 200 sh -c 'exit 3' 2>&1)
rc=$?
[ "$rc" = 3 ] || bad "clean test: exit $rc, expected 3"
[ -z "$out" ] || bad "clean test: reaper said: $out"
"$REAPER" --grace-ms 200 true || bad "true: exit $?"

# a test that forks a child and waits for it is clean
"$REAPER" --grace-ms 200 sh -c "sleep 0.2 & wait" || bad "a waited-for child: exit $?"

# a stray background process, in the group and out of it (setsid)
for how in plain setsid; do
	m=1
	[ "$how" = setsid ] && m=2
	pre=""
	[ "$how" = setsid ] && pre="setsid"
	out=$("$REAPER" --grace-ms 300 sh -c "$pre sleep $(mark $m) </dev/null >/dev/null 2>&1 & exit 0" 2>&1)
	rc=$?
	[ "$rc" = 1 ] || bad "$how stray: exit $rc, expected 1"
	grep -q 'left behind: pid [0-9]* (sleep)' <<<"$out" || bad "$how stray: not named: $out"
	sleep 0.2
	alive $m && bad "$how stray: still running after the reaper exited"
done

# a failing test keeps its own status when it also left something behind
"$REAPER" --grace-ms 200 sh -c "sleep $(mark 3) </dev/null >/dev/null 2>&1 & exit 5" 2>/dev/null
rc=$?
[ "$rc" = 5 ] || bad "failing stray: exit $rc, expected 5"
sleep 0.2
alive 3 && bad "failing stray: still running"

# meson's timeout: SIGTERM to the reaper (the group gets it too, but a shell
# waiting on a foreground child defers its trap, and this child ignores TERM)
"$REAPER" sh -c "sh -c 'trap \"\" TERM; exec sleep $(mark 4)' & sleep $(mark 5)" &
rp=$!
for _ in $(seq 50); do
	alive 4 && alive 5 && break
	sleep 0.1
done
alive 4 && alive 5 || bad "timeout case: the children did not start"
t0=$(date +%s%N)
kill -TERM "$rp"
wait "$rp"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$rc" = $((128 + 15)) ] || bad "timeout case: exit $rc, expected 143"
[ "$ms" -lt 500 ] || bad "timeout case: took $ms ms, meson kills after 500"
sleep 0.1
alive 4 && bad "timeout case: the child that ignores SIGTERM survived"
alive 5 && bad "timeout case: the foreground child survived"

# bad usage is the reaper's own error, not the test's
"$REAPER" 2>/dev/null
[ "$?" = 125 ] || bad "no program: expected 125"
"$REAPER" --grace-ms x true 2>/dev/null
[ "$?" = 125 ] || bad "bad --grace-ms: expected 125"
"$REAPER" /nonexistent/program 2>/dev/null
[ "$?" = 125 ] || bad "missing program: expected 125"

[ "$fail" = 0 ] && echo "ok: sg-reaper"
exit $fail
