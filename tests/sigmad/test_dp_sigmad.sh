#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# sigmad as a process: --help, bad options, bad config, bad layouts (each with
# its documented message), [net] steer (flow refused, auto falls back: net_null
# without rte_flow, net_tap whose rules the kernel refuses, the demo), the
# lifecycle on a net_null port (SIGHUP reload,
# telemetry, SIGTERM drain, final statistics, clean exit: ASan's leak check
# runs at exit in the sanitizer build), busy-polling lcores that oversubscribe
# their CPUs, [control] refused at start and on SIGHUP, and the demo (sigma-demo:
# sigmad's options, its pipeline, the in-process generator sigmad does not link).
# Usage: test_dp_sigmad.sh path/to/sigmad path/to/sigma-demo
set -u
SIGMAD=$1
DEMO=$2
TMP=$(mktemp -d)
PIDS=()
fails=0
checks=0
trap cleanup_pids EXIT

# shellcheck source=../dataplane/expect_lib.sh
. "$(dirname "$0")/../dataplane/expect_lib.sh"
# shellcheck source=../../bench/sigmad_lib.sh
. "$(dirname "$0")/../../bench/sigmad_lib.sh"

EAL=(--no-huge --no-shconf --no-pci -m 256 --log-level=lib.eal:error)
pfx() { echo "--file-prefix=sg_dp_sigmad_$$_$1"; }

expect help 0 'Layout examples' -- "$SIGMAD" --help
expect help-sep 0 '--rtc LIST' -- "$SIGMAD" "${EAL[@]}" -- --help
expect print-config 0 '[layout]' -- "$SIGMAD" --print-config
expect bad-option 2 'unknown or incomplete option "--bogus"' -- "$SIGMAD" -- --bogus
expect bad-ip 2 'expected a dotted IPv4 address' -- "$SIGMAD" -- --ip 1.2.3
expect demo-queue-too-high 1 'RX queue 40: at most 32 queues per port' -- "$DEMO" --io "(0,40,1)" --reduce 2
expect demo-not-sigmad 2 "--demo is sigma-demo's" -- "$SIGMAD" --demo
expect bad-layout-syntax 2 'expected (port,queue,lcore)' -- "$SIGMAD" -- --io '(0,0)'
expect missing-config 2 'No such file' -- "$SIGMAD" -- --config "$TMP/none.ini"
printf '[net]\nmtu = 99999\n' >"$TMP/bad.ini"
expect bad-config 2 '[net] mtu = "99999"' -- "$SIGMAD" -- --config "$TMP/bad.ini"
printf '[net]\nip 10.0.0.1\n' >"$TMP/bad2.ini"
expect bad-config-line 2 'line 2' -- "$SIGMAD" -- --config "$TMP/bad2.ini"

# bad layouts are refused at start-up with the fix named
expect two-roles 1 'two roles' -- "$SIGMAD" "${EAL[@]}" "$(pfx a)" '--lcores=(0-2)@0' --vdev=net_null0 \
	-- --io '(0,0,1)' --reduce 1
expect no-lcore 1 'not enabled by EAL' -- "$SIGMAD" "${EAL[@]}" "$(pfx b)" '--lcores=(0-1)@0' \
	--vdev=net_null0 -- --rtc '(0,0,5)'
expect no-port 1 'port 0 does not exist' -- "$SIGMAD" "${EAL[@]}" "$(pfx c)" '--lcores=(0-1)@0' \
	-- --rtc '(0,0,1)'
printf '[job 1]\nworkers = 2\ndtype = fp64\npartition_bytes = 100\n' >"$TMP/part.ini"
expect partial-element 1 'partition_bytes 100 is not a multiple of the fp64 element size' -- \
	"$SIGMAD" "${EAL[@]}" "$(pfx d)" '--lcores=(0-1)@0' --vdev=net_null0 \
	-- --config "$TMP/part.ini" --rtc '(0,0,1)'

# reducer steering (docs/sigmad.md "Steering"): no PMD here has rte_flow queue rules.
# steer = flow refuses to start and names the port, the PMD, the reason and the fix;
# a bad value is refused like any option.
expect steer-flow 1 'port 0 (net_null): steer = flow, but the port cannot steer: the PMD has no rte_flow support' -- \
	"$SIGMAD" "${EAL[@]}" "$(pfx e)" '--lcores=(0-2)@0' --vdev=net_null0 \
	-- --steer flow --io '(0,0,1)' --reduce 2
grep -qF '(set [net] steer = auto, or off, or --steer auto)' "$TMP/out" && ok || \
	fail "steer-flow: the fix is not named"
expect steer-bad 2 '[net] steer = "maybe": expected auto, flow or off' -- "$SIGMAD" -- --steer maybe
printf '[net]\nsteer = 1\n' >"$TMP/steer.ini"
expect steer-bad-file 2 '[net] steer = "1": expected auto, flow or off' -- \
	"$SIGMAD" -- --config "$TMP/steer.ini"
# auto falls back to the ring hand-off, saying why, and every sum of the demo (two
# reducers on a 2-queue ring port, every element checked) stays right
expect steer-auto-demo 0 'sigmad demo: OK' -- "$DEMO" --duration 1 --demo-workers 3 \
	--steer auto --rtc '(0,0,1),(0,1,2)'
grep -qF 'port 0 (net_ring): no reducer steering, rte_ring hand-off instead: it has 2 RX queue(s) at most; steering needs 4' \
	"$TMP/out" && ok || { fail "steer-auto-demo: no fallback line"; tail -20 "$TMP/out"; }

# net_tap has rte_flow, but its rules need the kernel's multiq qdisc and TC flower:
# where they are missing, auto tries the rules for real (RX queues for the reducers,
# validate, create), gives them up with the PMD's reason and restarts the port with
# the layout's queues; flow refuses. Where they work, both steer. In a test-made
# network namespace; skipped where namespaces are not allowed.
NS=sg_dp_steer_$$
if ip netns add "$NS" 2>/dev/null; then
	for mode in auto flow; do
		ip netns exec "$NS" timeout 30 "$SIGMAD" "${EAL[@]}" "$(pfx "tap$mode")" '--lcores=(0-2)@0' \
			--vdev=net_tap0,iface=sgtap0 -- --rtc '(0,0,1),(0,1,2)' --mtu 1500 --duration 0.5 \
			--steer "$mode" >"$TMP/tap.out" 2>&1
		rc=$?
		if grep -qF 'port 0 (net_tap): 4 RX queue(s), 2 TX queue(s), checksums offloaded, steering by rte_flow' \
			"$TMP/tap.out"; then
			[ "$rc" = 0 ] && ok || fail "tap $mode: steering, but exit $rc"
		elif [ "$mode" = auto ]; then
			[ "$rc" = 0 ] && grep -qE 'port 0 \(net_tap\): no reducer steering, rte_ring hand-off instead: rte_flow_(validate|create) of reducer 0' \
				"$TMP/tap.out" && grep -qF 'port 0 (net_tap): 2 RX queue(s), 2 TX queue(s)' \
				"$TMP/tap.out" && ok || { fail "tap auto: exit $rc, no fallback"; tail -20 "$TMP/tap.out"; }
		else
			[ "$rc" = 1 ] && grep -qE 'port 0 \(net_tap\): steer = flow, but the port cannot steer: rte_flow_(validate|create) of reducer 0.*set \[net\] steer = auto' \
				"$TMP/tap.out" && ok || { fail "tap flow: exit $rc, no error"; tail -20 "$TMP/tap.out"; }
		fi
	done
	ip netns del "$NS"
else
	echo "note: no network namespace; net_tap steering not checked"
fi

# busy-polling lcores that cannot each have a CPU (docs/sigmad.md, checks): one
# warning naming the lcores, the CPUs, the measured effect and the fixes; none when
# they fit, when they sleep, or when only one polls. Pinned with --lcores, so the
# outcome does not depend on how many CPUs the machine has (CPU 1 where it needs two).
OVER='busy-polling lcores cannot each have a CPU'
oversub() { # NAME WANT(0|1) EAL-lcores sigmad-options...
	local name=$1 want=$2 lc=$3 n rc
	shift 3
	timeout 30 "$SIGMAD" "${EAL[@]}" "$(pfx "$name")" "$lc" --vdev=net_null0 -- \
		--duration 0.3 "$@" >"$TMP/over.out" 2>&1
	rc=$?
	n=$(grep -cF "$OVER" "$TMP/over.out")
	if [ "$rc" != 0 ] || [ "$n" != "$want" ]; then
		fail "oversub $name: exit $rc, $n warning(s), expected $want"
		sed 's/^/  | /' "$TMP/over.out" | tail -10
	else
		ok
	fi
}
oversub over-shared 1 '--lcores=(0-2)@0' --io '(0,0,1)' --reduce 2
for needle in 'lcore 1 (io) on CPUs 0, lcore 2 (reducer) on CPUs 0' '1 CPU(s) (0) for 2 pollers' \
	'9 Gbps, with idle = sleep 30 Gbps' 'use --idle sleep' 'fewer lcores' 'EAL --lcores'; do
	grep -qF -- "$needle" "$TMP/over.out" && ok || fail "oversub: warning lacks '$needle'"
done
oversub over-sleep 0 '--lcores=(0-2)@0' --io '(0,0,1)' --reduce 2 --idle sleep
oversub over-one-polls 0 '--lcores=(0-2)@0' --io '(0,0,1)' --reduce 2 --sleep-lcores 2
if [ "$(nproc)" -ge 2 ]; then
	oversub over-three-on-two 1 '--lcores=(0-3)@(0-1)' --io '(0,0,1)' --reduce 2-3
	grep -qF '2 CPU(s) (0-1) for 3 pollers' "$TMP/over.out" && ok ||
		fail "oversub: three on two CPUs not counted"
	oversub fits 0 '--lcores=0@0,1@0,2@1' --io '(0,0,1)' --reduce 2
	oversub fits-shared-sets 0 '--lcores=0@0,1@(0-1),2@(0-1)' --io '(0,0,1)' --reduce 2
	oversub fits-after-moving 0 '--lcores=0@0,1@(0-1),2@0' --io '(0,0,1)' --reduce 2
else
	echo "note: one CPU; the fitting layouts over two CPUs are not checked"
fi
# --demo's generator polls on the main lcore, so it counts too
expect over-demo 0 'sigmad demo: OK' -- "$DEMO" "${EAL[@]}" "$(pfx overdemo)" '--lcores=(0-1)@0' \
	-- --duration 0.5 --demo-workers 2 --rtc '(0,0,1)'
grep -qF 'lcore 0 (main (demo generator)) on CPUs 0' "$TMP/out" && ok ||
	fail "over-demo: the generator's lcore is not counted"

# [control] is parsed with the config: a bad one stops sigmad before EAL starts
printf '[control]\nunix = off\nmax_conns = many\n' >"$TMP/ctl-bad.ini"
expect control-bad 2 '[control] max_conns = many: want a positive integer' -- \
	"$SIGMAD" -- --config "$TMP/ctl-bad.ini"

# lifecycle on a net_null port: it receives junk frames at full speed, which
# sigmad must count as drops, never crash on
# small_ini IDLE: one rtc lcore, small pools (net_null fills them at once)
small_ini() {
	printf '[layout]\nrtc = (0,0,1)\n[resources]\nmbufs = 2048\npool_bufs = 64\n'
	printf '[live]\nidle = %s\n' "$1"
}
small_ini busy >"$TMP/live.ini"
PREFIX=sg_dp_sigmad_$$_live
timeout 60 "$SIGMAD" "${EAL[@]}" --file-prefix=$PREFIX '--lcores=(0-1)@0' --vdev=net_null0,size=64 \
	-- --config "$TMP/live.ini" --steer auto >"$TMP/live.out" 2>&1 &
SPID=$!
PIDS+=("$SPID")
if sigmad_wait "$TMP/live.out" "$SPID"; then
	ok
	sock=/var/run/dpdk/$PREFIX/dpdk_telemetry.v2
	if [ -S "$sock" ] && command -v python3 >/dev/null; then
		tel=$(python3 - "$sock" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.recv(4096)
out = {}
for cmd in ("/sigma/lcores", "/sigma/ports", "/sigma/jobs", "/sigma/drops", "/sigma/cluster"):
    s.send(cmd.encode())
    out.update(json.loads(s.recv(65536).decode()))
print(json.dumps(out))
PY
)
		if echo "$tel" | python3 -c '
import json, sys
d = json.load(sys.stdin)
l = d["/sigma/lcores"]["lcore_1"]
assert l["role"] == "rtc" and l["rx_pkts"] > 0, l
assert d["/sigma/drops"]["net_ethertype"] + d["/sigma/drops"]["net_short"] > 0, d["/sigma/drops"]
assert "all_jobs" in d["/sigma/jobs"] and "rounds_completed" in d["/sigma/jobs"]["job_1"], d["/sigma/jobs"]
assert "port_0" in d["/sigma/ports"]
pt = d["/sigma/ports"]["port_0"]
assert pt["steer"] == "ring" and "no rte_flow support" in pt["steer_detail"], pt
assert pt["steer_udp_ports"] == 64, pt  # SG_DP_STEER_PORTS, whatever the layout
# no [control]: no agent, and /sigma/cluster still answers (sigmad registers it)
assert d["/sigma/cluster"] == {"etcd": "none: no [cluster] section"}, d["/sigma/cluster"]
'; then ok; else fail "telemetry: $tel"; fi
	else
		echo "note: telemetry socket $sock not found; telemetry not checked"
	fi
	sed -i 's/^idle = busy$/idle = sleep/' "$TMP/live.ini"
	printf '[net]\nmtu = 1500\n' >>"$TMP/live.ini"
	sighup "$SPID" "$TMP/live.out"
	kill -TERM "$SPID"
	wait "$SPID"
	rc=$?
	[ "$rc" = 0 ] && ok || fail "lifecycle: exit $rc after SIGTERM"
	# a clean exit leaves no EAL runtime folder (one per start: restarts piled them up)
	[ ! -e "/var/run/dpdk/$PREFIX" ] && [ ! -e "${XDG_RUNTIME_DIR:-/tmp}/dpdk/$PREFIX" ] && ok ||
		fail "lifecycle: sigmad left its EAL runtime folder $PREFIX"
	for needle in 'lcore 1 idle policy now sleep' '[net] changed: needs a restart' \
		'1 change needs a restart' 'stopping: RX off, draining' 'final statistics' \
		'drop ethertype' 'port 0 (net_null): no reducer steering, rte_ring hand-off instead: the PMD has no rte_flow support'; do
		grep -qF -- "$needle" "$TMP/live.out" && ok || fail "lifecycle: no '$needle'"
	done
else
	fail "sigmad did not start"
fi
[ "${fails}" -eq 0 ] || sed 's/^/  | /' "$TMP/live.out" | tail -30

# [control] on SIGHUP: the file is read once per reload, old and new parsed
# configs are compared: a bad [control] is refused with its reason and the old one
# kept, a live key applies, a restart-only key is named
small_ini sleep >"$TMP/ctl.ini"
printf '[control]\nunix = %s\nname = before\nmax_conns = 8\n' "$TMP/ctl.sock" >>"$TMP/ctl.ini"
PREFIX=sg_dp_sigmad_$$_ctl
# not under timeout(1), which forwards one SIGHUP and ignores the next; the trap kills it
"$SIGMAD" "${EAL[@]}" --file-prefix=$PREFIX '--lcores=(0-1)@0' --vdev=net_null0,size=64 \
	-- --config "$TMP/ctl.ini" >"$TMP/ctl.out" 2>&1 &
SPID=$!
PIDS+=("$SPID")
wait_for "$TMP/ctl.out" 'control plane:' "$SPID"
if grep -qF "control plane: unix $TMP/ctl.sock" "$TMP/ctl.out"; then
	ok
	sed -i 's/^max_conns = 8$/max_conns = none/' "$TMP/ctl.ini"
	sighup "$SPID" "$TMP/ctl.out"
	grep -qF 'SIGHUP: config rejected, nothing changed: [control] max_conns = none: want a positive integer' \
		"$TMP/ctl.out" && ok || fail "control SIGHUP: a bad [control] was not refused with its reason"
	sed -i -e 's/^max_conns = none$/max_conns = 9/' -e 's/^name = before$/name = after/' "$TMP/ctl.ini"
	sighup "$SPID" "$TMP/ctl.out"
	for needle in '[control] name now after' \
		'needs a restart: max_conns (8 -> 9)' 'done; 1 change needs a restart'; do
		grep -qF -- "$needle" "$TMP/ctl.out" && ok || fail "control SIGHUP: no '$needle'"
	done
	# the server keeps its settings until a restart: the socket is still there
	[ -S "$TMP/ctl.sock" ] && ok || fail "control SIGHUP: the unix socket is gone"
	kill -TERM "$SPID"
	wait "$SPID"
	rc=$?
	[ "$rc" = 0 ] && ok || fail "control lifecycle: exit $rc after SIGTERM"
else
	fail "sigmad did not start its control server"
fi
[ "${fails}" -eq 0 ] || sed 's/^/  | /' "$TMP/ctl.out" | tail -30

expect demo 0 'sigmad demo: OK' -- "$DEMO" --duration 1 --demo-workers 3

echo "dp_sigmad: $checks checks, $fails failed"
[ "$fails" -eq 0 ]
