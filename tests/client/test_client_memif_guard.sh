#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# sigmad's memif guard (dataplane/pipeline/sg_dp_memif.c) against the clients that
# crashed sigmad through DPDK 22.11's memif PMD (issue 17, failures 6 and 7):
#  1. 8 memif ports (bench/sigmad_memif.sh). While sigmad is stopped (SIGSTOP),
#     8 clients connect and close; then sigmad goes on (SIGCONT). Without the
#     guard the PMD failed to send them HELLO and EAL's interrupt thread
#     panicked ("Error adding fd N epoll_ctl, Bad file descriptor"). Then
#     clients that send garbage, a short message, an INIT and nothing more
#     (ids 0, 7 and 99), or nothing; then sigma-bench run with 8 DPDK worker
#     processes (the memif clients of ids 0-7) and two sizes, so that each
#     worker leaves and comes back once. Every sum is checked. Before the workers,
#     malformed and unwarranted requests for the wake-up channel (memif_clients.py
#     wake-bad), each refused with its errno; then every worker must get its channel.
#  2. 2 memif ports and the busy idle policy: 2 workers run 15 sizes, each
#     leaving and coming back 15 times while the lcores poll. Without the guard
#     the PMD unmapped the rings under an lcore inside rte_eth_tx_burst():
#     SIGSEGV (5 of 5 runs before the fix).
#  3. The script stopped by SIGTERM while its command runs: no sigmad is left.
# sigmad must exit cleanly after each part (a sanitizer report fails it too).
# Skips (77) where EAL cannot start.
# Usage: test_client_memif_guard.sh SIGMAD SIGMAD_MEMIF_SH SIGMA_BENCH MEMIF_CLIENTS_PY
set -u
SIGMAD=$1
MEMIF=$2
BENCH=$3
CLIENTS=$4
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0

# part LABEL NPORTS SIZES SCRIPT: sigma-bench's jobs for N = NPORTS workers and
# SIZES, sigmad with NPORTS memif ports, then SCRIPT (sh -c; $1 the clients
# script, $2 sigma-bench, $3 SIZES, $4 a JSON file) against it.
part() {
	local label=$1 n=$2 sizes=$3 script=$4 rc
	echo "== $label"
	"$BENCH" run --workers "$n" --sizes "$sizes" --iters 1 --print-sigmad-config \
		>"$TMP/jobs.ini" || return 1
	rm -f "$TMP/b.json"
	timeout 170 "$MEMIF" "$SIGMAD" "$TMP/jobs.ini" "$n" sh -c "$script" sh "$CLIENTS" \
		"$BENCH" "$sizes" "$TMP/b.json" >"$TMP/out" 2>&1
	rc=$?
	cat "$TMP/out"
	[ "$rc" = 77 ] && exit 77
	[ "$rc" = 0 ] || { echo "FAIL: $label: exit $rc"; return 1; }
	grep -q '"ok":false' "$TMP/b.json" && { echo "FAIL: $label: a sum was wrong"; return 1; }
	grep -q '"transport":"dpdk"' "$TMP/b.json" || { echo "FAIL: $label: no DPDK run"; return 1; }
	return 0
}

# shellcheck disable=SC2016  # expanded by the inner shell
part "8 memif ports: clients that leave before sigmad accepts them, or misbehave" 8 64K,256K '
	kill -STOP "$SIGMA_SIGMAD_PID" || exit 1
	python3 "$1" "$SIGMA_MEMIF" burst:8
	rc=$?
	kill -CONT "$SIGMA_SIGMAD_PID"
	[ $rc = 0 ] || exit $rc
	sleep 1
	python3 "$1" "$SIGMA_MEMIF" garbage short init-close:0 init-close:7 init-close:99 silent \
		wake-bad || exit $?
	echo "8 DPDK workers, 2 sizes:"
	timeout 120 "$2" run --workers 8 --sizes "$3" --iters 1 --quiet --attach "$SIGMA_NODE" \
		--memif "$SIGMA_MEMIF" --json "$4" || exit $?
	# each worker (a process per size) got its wake-up channel despite the bad ones
	n=$(grep -c "wake-up channel open" "$(dirname "$SIGMA_MEMIF")/sigmad.out")
	echo "wake-up channels opened: $n"
	[ "$n" -ge 16 ] || { echo "FAIL: $n wake-up channels, expected 16 (8 workers, 2 sizes)"; exit 1; }
' || fails=1

# shellcheck disable=SC2016
SIGMA_SIGMAD_OPTS="--idle busy" part "2 memif ports, busy lcores: workers leave and return 15 times" \
	2 64K,128K,256K,512K,1M,64K,128K,256K,512K,1M,64K,128K,256K,512K,1M '
	timeout 120 "$2" run --workers 2 --sizes "$3" --iters 1 --quiet --attach "$SIGMA_NODE" \
		--memif "$SIGMA_MEMIF" --json "$4"
' || fails=1

# 3. The script itself stopped (as timeout(1) stops it) while its command runs:
# its clean-up must not leave sigmad behind (it killed only sigmad's timeout
# wrapper, and a sigmad ran on at 20% of a CPU, under every later benchmark).
echo "== the script stopped while its command runs"
"$BENCH" run --workers 1 --sizes 64K --iters 1 --print-sigmad-config >"$TMP/jobs.ini"
# shellcheck disable=SC2016  # expanded by the inner shell
"$MEMIF" "$SIGMAD" "$TMP/jobs.ini" 1 sh -c 'echo $$ >"$2"; echo "$SIGMA_SIGMAD_PID" >"$1"; exec sleep 60' \
	sh "$TMP/spid" "$TMP/cpid" >"$TMP/out" 2>&1 &
mpid=$!
for _ in $(seq 100); do [ -s "$TMP/spid" ] && break; sleep 0.1; done
spid=$(cat "$TMP/spid" 2>/dev/null)
kill -TERM "$mpid"
wait "$mpid"
for _ in $(seq 50); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
if [ -z "$spid" ]; then
	echo "FAIL: sigmad did not start"; cat "$TMP/out"; fails=1
elif kill -0 "$spid" 2>/dev/null; then
	echo "FAIL: sigmad (pid $spid) still runs after its script was stopped"
	kill -KILL "$spid"; fails=1
fi
kill -KILL "$(cat "$TMP/cpid" 2>/dev/null)" 2>/dev/null

echo "client_memif_guard: $([ $fails = 0 ] && echo passed || echo failed)"
exit $fails
