#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# sigmactl layout suggest against a real sigmad. Its port is net_null, which
# delivers packets as fast as they are asked for, so whatever lcore receives is
# 100% busy and the rest idle: with io + 2 reducers the receiver is the
# bottleneck (one more RX queue and io lcore); with one rtc lcore, that lcore
# (another rtc lcore on the next queue). Each advice is checked word for word,
# and that sigmad's layout did not change. A sigma-udpd has no lcores: a clear
# error. Usage: test_layout_suggest.sh path/to/sigmad path/to/sigmactl path/to/sigma-udpd
set -u
SIGMAD=$1
SIGMACTL=$2
UDPD=$3
TMP=$(mktemp -d /tmp/sg_laysug.XXXXXX)
PID=
checks=0
fails=0
cleanup() {
	[ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
	[ -n "$PID" ] && wait "$PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
ok() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*"; }
has() {  # LABEL NEEDLE FILE
	if grep -qF -- "$2" "$3"; then ok; else fail "$1: no '$2' in:"; sed 's/^/  | /' "$3"; fi
}

# start NAME LCORES LAYOUT...: sigmad with [layout] lines LAYOUT, its control socket ready
start() {
	local name=$1 lcores=$2
	shift 2
	printf '%s\n' '[layout]' "$@" '[live]' 'idle = sleep' '[control]' \
		"unix = $TMP/$name.sock" >"$TMP/$name.ini"
	"$SIGMAD" --no-huge --no-shconf --no-pci -m 256 --log-level=lib.eal:error \
		"--lcores=$lcores" --vdev=net_null0 --file-prefix="sg_laysug_$$_$name" -- \
		--config "$TMP/$name.ini" >"$TMP/$name.log" 2>&1 &
	PID=$!
	for _ in $(seq 100); do
		grep -q 'sigmad: ready' "$TMP/$name.log" && return 0
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.1
	done
	fail "$name: sigmad did not start"; sed 's/^/  | /' "$TMP/$name.log"
	return 1
}
stop() {
	kill -TERM "$PID" 2>/dev/null
	wait "$PID" 2>/dev/null
	PID=
}

if start io '(0-3)@(0-1)' 'io = (0,0,1)' 'reduce = 2-3'; then
	S=(-s "unix:$TMP/io.sock")
	"$SIGMACTL" "${S[@]}" --json layout >"$TMP/before" 2>&1
	"$SIGMACTL" "${S[@]}" layout suggest --interval 1 >"$TMP/out" 2>&1
	rc=$?
	[ "$rc" = 0 ] && ok || fail "io: exit $rc"
	has io 'bottleneck: lcore 1 (io), 100% busy' "$TMP/out"
	has io 'receive on one more RX queue and lcore 4' "$TMP/out"
	has io '  --io "(0,0,1),(0,1,4)" --reduce 2,3' "$TMP/out"
	"$SIGMACTL" "${S[@]}" --json layout suggest --interval 0.5 >"$TMP/json" 2>&1
	has io-json '"advice": "add_rx"' "$TMP/json"
	has io-json '"bottleneck": 1' "$TMP/json"
	"$SIGMACTL" "${S[@]}" --json layout >"$TMP/after" 2>&1
	cmp -s "$TMP/before" "$TMP/after" && ok || fail "io: layout suggest changed the layout"
	stop
fi
if start rtc '(0-1)@(0-1)' 'rtc = (0,0,1)'; then
	"$SIGMACTL" -s "unix:$TMP/rtc.sock" layout suggest --interval 1 >"$TMP/out" 2>&1
	rc=$?
	[ "$rc" = 0 ] && ok || fail "rtc: exit $rc"
	has rtc 'bottleneck: lcore 1 (rtc), 100% busy' "$TMP/out"
	has rtc 'it is the only reducer: add an rtc lcore 2' "$TMP/out"
	has rtc '  --rtc "(0,0,1),(0,1,2)"' "$TMP/out"
	stop
fi

# sigma-udpd: one thread, no lcores
"$UDPD" --addr 127.0.0.1 --port 0 --unix "$TMP/u.sock" --name u >"$TMP/u.log" 2>&1 &
PID=$!
for _ in $(seq 100); do [ -S "$TMP/u.sock" ] && break; sleep 0.1; done
"$SIGMACTL" -s "unix:$TMP/u.sock" layout suggest --interval 0.1 >"$TMP/out" 2>&1
rc=$?
[ "$rc" = 1 ] && ok || fail "udpd: exit $rc, expected 1"
has udpd "has no lcores to lay out" "$TMP/out"
stop

echo "layout_suggest: $checks checks, $fails failed"
[ "$fails" = 0 ]
