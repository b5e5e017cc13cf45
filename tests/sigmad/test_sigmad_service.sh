#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# sigmad as a systemd service would run it (docs/deploy.md, "systemd"), on its
# kernel socket transport (no port, no hugepages), without systemd:
#  - readiness: sd_notify.py plays systemd's side of Type=notify. READY=1
#    comes once, and at that moment the control server answers and every one
#    of the 3 lcores (io + 2 reducers) has polled; SIGHUP gives RELOADING=1
#    then READY=1, SIGTERM STOPPING=1 and exit 0. A control server that
#    cannot start: exit 1 and no READY=1.
#  - the journal's levels: with JOURNAL_STREAM naming its stderr, every line
#    sigmad writes there carries a syslog level ("<6>", "<5>", "<4>", "<3>"),
#    and `sigmactl log-level` changes which lines come; without it, no prefix.
#    This sigmad's control server is on TCP only: readiness asks it there.
# Usage: test_sigmad_service.sh SIGMAD SIGMACTL SD_NOTIFY_PY
set -u
SIGMAD=$1
CTL=$2
NOTIFY=$3
TMP=$(mktemp -d /tmp/sg_svc.XXXXXX)
PIDS=()
fails=0
checks=0
cleanup() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$TMP" /var/run/dpdk/sg_svc_$$_* /tmp/dpdk/sg_svc_$$_* 2>/dev/null
}
trap cleanup EXIT
# shellcheck source=../dataplane/expect_lib.sh
. "$(dirname "$0")/../dataplane/expect_lib.sh"

EAL=(--no-huge --no-shconf --no-pci -m 512 --log-level=lib.eal:error '--lcores=(0-3)@(0-1)')
# sigmad binds udp_port .. udp_port + 64: a range of this process's own
PORT=$((30000 + ($$ % 300) * 100))
ini() { # ini CONTROL_KEYS...: the socket transport, and [control] with these lines
	cat <<INI
[net]
ip = 127.0.0.1
udp_port = $PORT
[live]
idle = sleep
[transport]
type = socket
[control]
INI
	printf '%s\n' "$@"
}
has() { # has FILE NEEDLE WHAT
	grep -qF -- "$2" "$1" && ok || { fail "$3: no '$2'"; sed 's/^/  | /' "$1" | tail -30; }
}

echo "== readiness: READY=1 once the lcores poll and the control server answers"
ini "unix = $TMP/ctl.sock" >"$TMP/s.ini"
timeout 90 python3 "$NOTIFY" "$TMP" "$TMP/ctl.sock" -- "$SIGMAD" "${EAL[@]}" \
	--file-prefix=sg_svc_$$_1 -- --config "$TMP/s.ini" --io '(0,0,1)' --reduce 2-3 \
	>"$TMP/r1" 2>&1
has "$TMP/r1" 'at-ready: version ok' readiness
has "$TMP/r1" 'at-ready: 3 of 3 lcores polled' readiness
has "$TMP/r1" 'notify: STATUS=summing on 3 lcore(s), control server up' readiness
has "$TMP/r1" 'notify: RELOADING=1' reload
has "$TMP/r1" 'notify: MONOTONIC_USEC=' reload
has "$TMP/r1" 'notify: STOPPING=1' stop
has "$TMP/r1" 'exit: 0' stop
# sigmad says it is ready before it tells systemd, and READY=1 came twice (start, reload)
[ "$(grep -c '^notify: READY=1$' "$TMP/r1")" = 2 ] && ok || fail "READY=1 should come twice"
awk '/^sigmad: ready: 3 lcore\(s\) polling, the control server answers/ {r = NR}
	/^notify: READY=1$/ {if (!r || NR < r) bad = 1; exit} END {exit bad || !r}' "$TMP/r1" &&
	ok || { fail "READY=1 before sigmad was ready"; sed 's/^/  | /' "$TMP/r1"; }

echo "== a control server that cannot start: no READY=1"
ini "unix = $TMP/no/such/folder/ctl.sock" >"$TMP/bad.ini"
timeout 90 python3 "$NOTIFY" "$TMP" "$TMP/no/such/folder/ctl.sock" -- "$SIGMAD" "${EAL[@]}" \
	--file-prefix=sg_svc_$$_2 -- --config "$TMP/bad.ini" >"$TMP/r2" 2>&1
has "$TMP/r2" 'exit: 1' "control failure"
! grep -q 'READY=1' "$TMP/r2" && ok || { fail "READY=1 from a sigmad that failed"; cat "$TMP/r2"; }

echo "== the journal's levels; readiness over TCP"
: >"$TMP/err"
JS=$(stat -c '%d:%i' "$TMP/err")
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TMP/secret"
chmod 600 "$TMP/secret"
ini "listen = 127.0.0.1:0" "secret_file = $TMP/secret" >"$TMP/tcp.ini"
JOURNAL_STREAM=$JS "$SIGMAD" "${EAL[@]}" --file-prefix=sg_svc_$$_3 -- --config "$TMP/tcp.ini" \
	>"$TMP/out3" 2>>"$TMP/err" &
PIDS+=($!)
SPID=$!
wait_for "$TMP/out3" 'sigmad: ready' "$SPID" && ok ||
	{ fail "sigmad did not start"; cat "$TMP/out3" "$TMP/err"; }
has "$TMP/out3" 'sigmad: ready: 1 lcore(s) polling, the control server answers' "TCP readiness"
TPORT=$(sed -n 's/.*control plane: tcp port \([0-9]*\),.*/\1/p' "$TMP/out3")
C=("$CTL" -s "127.0.0.1:$TPORT" -k "$TMP/secret")
echo wrong-secret-of-16-bytes-or-more >"$TMP/bad"
# info: the control server's start; warning: a client that fails authentication
has "$TMP/err" '<6>sigma.control: control server up' "info line"
"$CTL" -s "127.0.0.1:$TPORT" -k "$TMP/bad" jobs >/dev/null 2>&1
wait_for "$TMP/err" '<4>sigma.control: TCP client failed authentication' && ok ||
	fail "warning line"
expect level-warning 0 'set to warning' -- "${C[@]}" log-level warning
expect create-quiet 0 'job 2 created' -- "${C[@]}" job create --workers 1 --tensor a:10
"$CTL" -s "127.0.0.1:$TPORT" -k "$TMP/bad" jobs >/dev/null 2>&1
wait_for "$TMP/err" '<4>sigma.control: TCP client failed authentication' &&
	[ "$(grep -c 'TCP client failed authentication' "$TMP/err")" = 2 ] && ok ||
	fail "warning line at level warning"
grep -q 'job 2 created by the control plane' "$TMP/err" && fail "an info line at level warning" ||
	ok
expect level-info 0 'set to info' -- "${C[@]}" log-level info
expect create-loud 0 'job 3 created' -- "${C[@]}" job create --workers 1 --tensor a:10
wait_for "$TMP/err" '<6>sigmad: job 3 created by the control plane' && ok ||
	{ fail "info line after log-level info"; cat "$TMP/err"; }
expect drain 0 'draining' -- "${C[@]}" drain
wait_for "$TMP/err" '<5>sigmad: draining' && ok || fail "notice line"
# every line on the journal's stream has a level
if grep -v '^<[0-7]>' "$TMP/err" | grep -q .; then
	fail "lines without a level:"; grep -v '^<[0-7]>' "$TMP/err" | head
else
	ok
fi
kill -TERM "$SPID"
wait "$SPID" && ok || fail "sigmad exit $?"
PIDS=()
# an error, with and without the journal
: >"$TMP/err"
JOURNAL_STREAM=$(stat -c '%d:%i' "$TMP/err") "$SIGMAD" --config "$TMP/none.ini" 2>>"$TMP/err"
grep -q '^<3>sigmad: error: ' "$TMP/err" && ok || { fail "error line level"; cat "$TMP/err"; }
JOURNAL_STREAM=1:1 "$SIGMAD" --config "$TMP/none.ini" 2>"$TMP/err"
grep -q '^sigmad: error: ' "$TMP/err" && ok || { fail "a prefix without the journal"; cat "$TMP/err"; }
echo "sigmad_service: $checks checks, $fails failed"
[ "$fails" = 0 ]
