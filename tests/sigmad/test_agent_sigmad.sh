#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The real sigmad with its control server, driven by the real sigmactl over
# the Unix socket and over authenticated TCP: info, jobs, job create/destroy,
# lcores, layout, idle policy, a refused live change, SIGHUP with a changed
# [control] (live keys applied, a server key reported, garbage rejected), drain. Then
# [transport] type = verbs on a machine without an RDMA device (or a build
# without verbs) must stop sigmad with a message that names the problem.
# Usage: test_agent_sigmad.sh path/to/sigmad path/to/sigmactl
set -u
SIGMAD=$1
SIGMACTL=$2
TMP=$(mktemp -d /tmp/sg_agent_sh.XXXXXX)
PID=
fails=0
checks=0
cleanup() {
	[ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

# shellcheck source=../dataplane/expect_lib.sh
. "$(dirname "$0")/../dataplane/expect_lib.sh"

EAL=(--no-huge --no-shconf --no-pci -m 256 --log-level=lib.eal:error '--lcores=(0-1)@(0-1)'
	--vdev=net_null0)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TMP/secret"
chmod 600 "$TMP/secret"
cat >"$TMP/s.ini" <<INI
[layout]
rtc = (0,0,1)
[live]
idle = sleep
[job 1]
workers = 2
mode = deterministic
keys = 4
partition_bytes = 40000
[control]
unix = $TMP/ctl.sock
listen = 127.0.0.1:0
secret_file = $TMP/secret
name = shnode
INI
"$SIGMAD" "${EAL[@]}" --file-prefix=sg_agent_sh_$$ -- --config "$TMP/s.ini" >"$TMP/log" 2>&1 &
PID=$!
if ! wait_for "$TMP/log" 'control plane:' "$PID" || ! [ -S "$TMP/ctl.sock" ]; then
	fail "sigmad did not start its control server"; sed 's/^/  | /' "$TMP/log"
	echo "agent_sigmad: $checks checks, $fails failed"
	exit 1
fi
TCP=$(sed -n 's/^sigmad: control plane:.*tcp port \([0-9]*\).*/\1/p' "$TMP/log" | head -1)
U=(-s "unix:$TMP/ctl.sock")
T=(-s "127.0.0.1:$TCP" -k "$TMP/secret")
expect info 0 'shnode' -- "$SIGMACTL" "${U[@]}" --json info
expect info-tcp 0 'shnode' -- "$SIGMACTL" "${T[@]}" --json info
expect jobs 0 '"id": 1' -- "$SIGMACTL" "${U[@]}" --json jobs
# modes as configured and as created (a deterministic job was listed as "sync")
expect jobs-mode 0 ' deterministic ' -- "$SIGMACTL" "${U[@]}" jobs
expect job-create-determ 0 '"id": 2' -- "$SIGMACTL" "${U[@]}" --json job create --workers 2 \
	--mode deterministic --tensor w:1000
expect jobs-mode-2 0 '"mode": "deterministic"' -- "$SIGMACTL" "${U[@]}" --json jobs
expect job-destroy-determ 0 '' -- "$SIGMACTL" "${U[@]}" job destroy 2
expect job-create 0 '"id": 3' -- "$SIGMACTL" "${T[@]}" --json job create --workers 3 \
	--tensor w:100000
expect jobs-2 0 '"id": 3' -- "$SIGMACTL" "${U[@]}" --json jobs
expect job-destroy 0 '' -- "$SIGMACTL" "${U[@]}" job destroy 3
expect job-destroy-again 1 'error' -- "$SIGMACTL" "${U[@]}" job destroy 3
expect lcores 0 '"role": "rtc"' -- "$SIGMACTL" "${U[@]}" --json lcores
expect layout 0 '"idle": "sleep"' -- "$SIGMACTL" "${U[@]}" --json layout
expect idle-set 0 '' -- "$SIGMACTL" "${U[@]}" layout set idle=1:poll
expect idle-now 0 '"idle": "poll"' -- "$SIGMACTL" "${U[@]}" --json layout
expect bad-lcore 1 'not in' -- "$SIGMACTL" "${U[@]}" layout set idle=9:poll
expect log-level 0 '' -- "$SIGMACTL" "${U[@]}" log-level debug
expect wrong-secret 1 'error' -- "$SIGMACTL" -s "127.0.0.1:$TCP" -k "$TMP/s.ini" info
# SIGHUP: name and heartbeat_ms apply live, a server key needs a restart, garbage changes nothing
hup() { sighup "$PID" "$TMP/log"; }
sed -i -e 's/^name = shnode$/name = shnode2/' -e 's/^listen = 127.0.0.1:0$/listen = 127.0.0.1:1/' \
	"$TMP/s.ini"
echo 'heartbeat_ms = 500' >>"$TMP/s.ini"
hup
for needle in '[control] name now shnode2' '[control] heartbeat_ms now 500' \
	'[control] listen, unix, secret_file, metrics or limits changed: needs a restart' \
	'done; 1 change needs a restart'; do
	grep -qF -- "$needle" "$TMP/log" && ok || fail "SIGHUP: no '$needle'"
done
expect info-renamed 0 'shnode2' -- "$SIGMACTL" "${U[@]}" --json info
sed -i 's/^heartbeat_ms = 500$/heartbeat_ms = soon/' "$TMP/s.ini"
hup
grep -qF 'SIGHUP: config rejected, nothing changed' "$TMP/log" && ok ||
	fail "SIGHUP: a bad [control] heartbeat_ms was not rejected"
expect info-kept 0 'shnode2' -- "$SIGMACTL" "${U[@]}" --json info
expect drain 0 '' -- "$SIGMACTL" "${U[@]}" drain
expect refused-after-drain 1 'draining' -- "$SIGMACTL" "${U[@]}" job create --workers 2 \
	--tensor w:10
kill -TERM "$PID"
if timeout 20 tail --pid="$PID" -f /dev/null; then
	wait "$PID"
	rc=$?
	[ "$rc" = 0 ] && ok || { fail "sigmad exit $rc after SIGTERM"; tail -20 "$TMP/log"; }
else
	fail "sigmad did not stop"
fi
PID=

# The verbs switch: no device here, or no verbs in the build; either way a clear error.
printf '[transport]\ntype = verbs\n[verbs]\nmode = ud\n' >"$TMP/v.ini"
timeout 30 "$SIGMAD" "${EAL[@]}" --file-prefix=sg_agent_shv_$$ -- --config "$TMP/v.ini" \
	>"$TMP/out" 2>&1
rc=$?
if grep -qF 'no RDMA device (ibv_get_device_list found none)' "$TMP/out" && [ "$rc" = 1 ]; then
	ok
elif grep -qF 'built without verbs' "$TMP/out" && [ "$rc" = 2 ]; then
	ok
elif [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	echo "note: an RDMA device is present; the no-device message is not checked"
	ok
else
	fail "type = verbs: exit $rc"; sed 's/^/  | /' "$TMP/out"
fi
printf '[verbs]\nrecv_depth = lots\n' >"$TMP/v2.ini"
expect bad-verbs-key 2 'recv_depth' -- "$SIGMAD" -- --config "$TMP/v2.ini"

echo "agent_sigmad: $checks checks, $fails failed"
[ "$fails" = 0 ]
