#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# libsigma's kernel-UDP workers against the real sigmad on its kernel socket
# transport ([transport] type = socket): no port, no namespace, no tap; EAL
# with --no-pci --no-huge --no-shconf -m 512 and no vdev. The jobs are made
# through the control plane (sigmactl job create over the Unix socket), one
# or several tensors (job_create numbers their keys tensor << 16 | partition,
# as libsigma does), and every element of every sum is checked by
# sock_workers against the exact sum. Layouts:
#   rtc x1, busy polling: N = 2, fp32 + fp64 + int32 at once; garbage
#     (short, wrong token, random, not Sigma, too long) to udp_port and two
#     steering ports is counted by reason and never answered; a second sigmad
#     on the same port is refused; SIGHUP names a [socket] change;
#   rtc x2, idle = sleep, no UDP_GRO: N = 3, fp16 + bf16 + int8 + fp32, then the
#     same jobs with steer_reducers = 2 (the node's R) and 5 (above it);
# In both rtc layouts, workers sending UDP_SEGMENT (GSO) batches (sock_probe.py)
# get every sum right, and /sigma/socket shows GRO messages split (rx_gro) only
# where [socket] gro is on, and GSO replies (tx_gso).
#   io + 2 reducers, idle = sleep: N = 4, fp32 + uint8 + int64, with and
#     without steering; a live key move (sigmactl layout set keymap=...) while
#     workers push; then SIGINT while workers push: sigmad drains and exits 0.
# After each run no socket of sigmad's is left. Start-up refusals: a layout
# on port 1, [net] mac, udp_port too high, an address not of this host, bad
# [socket] keys. As root, sigmad also runs once as user nobody (no
# capabilities) and sums.
# sigma-bench compare --threads-baseline --runs 2 attaches to the rtc x1 sigmad:
# every point right through sigmad, the node threads and MPI.
# Usage: test_client_socket.sh SIGMAD SIGMACTL SOCK_WORKERS SOCK_PROBE_PY SIGMA_BENCH
set -u
SIGMAD=$1
SIGMACTL=$2
WORKERS=$3
PROBE=$4
BENCH=$5
# without ss, "no socket of sigmad's is left" would be checked against nothing
command -v ss >/dev/null || { echo "SKIP: no ss (apt-get install iproute2; ./sigma deps)"; exit 77; }
TMP=$(mktemp -d /tmp/sg_sock.XXXXXX)
chmod 755 "$TMP"
PID=
WPID=
run=0
[ -d /tmp/dpdk ] && TMPDPDK_WAS=1 || TMPDPDK_WAS=0
checks=0
fails=0
cleanup() {
	[ -n "$WPID" ] && kill -KILL "$WPID" 2>/dev/null
	[ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$TMP" /var/run/dpdk/sg_sock_$$_* /tmp/dpdk/sg_sock_$$_* 2>/dev/null
	# EAL's runtime folder for users other than root, if the nobody run made it
	[ "$TMPDPDK_WAS" = 0 ] && rmdir /tmp/dpdk 2>/dev/null
}
trap cleanup EXIT

# shellcheck source=../dataplane/expect_lib.sh
. "$(dirname "$0")/../dataplane/expect_lib.sh"

EAL=(--no-huge --no-shconf --no-pci -m 512 --log-level=lib.eal:error '--lcores=(0-3)@(0-1)')
# sigmad binds udp_port .. udp_port + 64: a range of this process's own
BASE=$((20000 + ($$ % 400) * 100))
PORT=$BASE

# ini IDLE: sigmad's config, with the control plane on a Unix socket
ini() {
	cat <<INI
[net]
ip = 127.0.0.1
udp_port = $PORT
mtu = 9000
[layout]
rtc = (0,0,1)
[live]
idle = $1
[transport]
type = socket
[control]
unix = $TMP/ctl.sock
${EXTRA_INI:-}
INI
}

# start IDLE LAYOUT_OPTIONS...: start sigmad; sets PID, U (sigmactl's socket), TEL
start() {
	local idle=$1 try
	shift
	for try in 1 2 3; do
		run=$((run + 1))
		PORT=$((BASE + (run % 2) * 80 + try))
		ini "$idle" >"$TMP/s.ini"
		rm -f "$TMP/ctl.sock"
		"$SIGMAD" "${EAL[@]}" --file-prefix=sg_sock_$$_$run -- --config "$TMP/s.ini" "$@" \
			>"$TMP/log" 2>&1 &
		PID=$!
		if wait_for "$TMP/log" 'control plane:' "$PID" && [ -S "$TMP/ctl.sock" ]; then
			U=(-s "unix:$TMP/ctl.sock")
			if [ "$(id -u)" = 0 ]; then
				TEL=/var/run/dpdk/sg_sock_$$_$run/dpdk_telemetry.v2
			else
				TEL=${XDG_RUNTIME_DIR:-/tmp}/dpdk/sg_sock_$$_$run/dpdk_telemetry.v2
			fi
			return 0
		fi
		wait "$PID" 2>/dev/null
		PID=
		grep -q 'is in use' "$TMP/log" || break # another port only if this one was taken
	done
	fail "sigmad did not start ($*)"
	sed 's/^/  | /' "$TMP/log"
	return 1
}

# ports_left: sigmad's UDP sockets still open (none after it exits)
ports_left() {
	ss -uanH "( sport >= :$PORT and sport <= :$((PORT + 64)) )" 2>/dev/null | wc -l
}

# stop: SIGINT; sigmad drains, prints its final statistics and exits 0
stop() {
	local rc
	kill -INT "$PID"
	if timeout 20 tail --pid="$PID" -f /dev/null; then
		wait "$PID"
		rc=$?
		[ "$rc" = 0 ] && ok || { fail "sigmad exit $rc after SIGINT"; tail -30 "$TMP/log"; }
		grep -q 'final statistics' "$TMP/log" && ok || fail "no final statistics"
	else
		fail "sigmad did not stop after SIGINT"
		kill -KILL "$PID"
		wait "$PID"
	fi
	PID=
	[ "$(ports_left)" = 0 ] && ok || { fail "sockets left on $PORT..$((PORT + 64))"; ss -uanp; }
	sed -n '/final statistics/,$p' "$TMP/log" | sed 's/^/  | /'
}

# mkjob N DTYPE ELEMS[+ELEMS...] PARTITION_BYTES: create a job of one tensor per
# ELEMS (tensor ids 0, 1, ... in that order); prints the worker spec
mkjob() {
	local out id tok chunk e t=()
	for e in ${3//+/ }; do
		t+=(--tensor "t${#t[@]}:$e")
	done
	out=$("$SIGMACTL" "${U[@]}" job create --workers "$1" "${t[@]}" --dtype "$2" \
		--partition-bytes "$4") || { fail "job create $*: $out"; return 1; }
	id=$(sed -n 's/^job \([0-9]*\) created$/\1/p' <<<"$out")
	tok=$(sed -n 's/^token \([0-9a-f]*\)$/\1/p' <<<"$out")
	chunk=$(sed -n 's/^chunk_bytes \([0-9]*\),.*/\1/p' <<<"$out")
	# the wire token: the first 16 hex digits of the job's token (docs/control.md)
	echo "$id:${tok:0:16}:$2:$3:$4:${chunk:-8920}"
}

# workers NAME N ROUNDS SPEC...: run sock_workers (environment passed through), check it
workers() {
	local name=$1
	shift
	if timeout 120 "$WORKERS" 127.0.0.1 "$PORT" "$@" >"$TMP/w.out" 2>&1; then
		ok
		grep '^rounds' "$TMP/w.out" | sed "s/^/  $name: /"
	else
		fail "$name: workers failed"
		sed 's/^/  | /' "$TMP/w.out" | tail -30
	fi
}

tel() { python3 "$PROBE" telemetry "$TEL" "$@"; }

# ---- rtc x1, busy polling ----------------------------------------------------------
echo "== rtc x1, idle = busy"
BOPTS=(--workers 2 --sizes 64K,1M --iters 1 --quiet)
"$BENCH" compare "${BOPTS[@]}" --print-sigmad-config >"$TMP/bench.ini" || fail "bench jobs"
if EXTRA_INI=$(cat "$TMP/bench.ini") start busy --rtc '(0,0,1)'; then
	J1=$(mkjob 2 fp32 300000 262144)
	J2=$(mkjob 2 fp64 50000 262144)
	J3=$(mkjob 2 int32 70001 65536)
	workers rtc1 2 3 "$J1" "$J2" "$J3"
	# garbage to udp_port and two steering ports: counted, never answered
	tel /sigma/drops net_short socket_rx_not_sigma socket_rx_too_long engine_token \
		>"$TMP/d0"
	expect garbage 0 'replies 0' -- python3 "$PROBE" garbage 127.0.0.1 "$PORT" "${J1%%:*}" \
		$((PORT + 1)) $((PORT + 40))
	sleep 0.3
	tel /sigma/drops net_short socket_rx_not_sigma socket_rx_too_long engine_token \
		>"$TMP/d1"
	for want in "net_short 3" "socket_rx_not_sigma 6" "socket_rx_too_long 3" \
		"engine_token 3"; do
		k=${want% *}
		d=$(($(awk -v k="$k" '$1 == k {print $2}' "$TMP/d1") -
			$(awk -v k="$k" '$1 == k {print $2}' "$TMP/d0")))
		[ "$d" = "${want#* }" ] && ok || fail "garbage: $k went up by $d, expected ${want#* }"
	done
	# a worker of another wire protocol version: told so (ERROR VERSION), and counted
	tel /sigma/drops engine_version >"$TMP/d0"
	expect version 0 'version answers: 2 right, 0 wrong' -- python3 "$PROBE" version \
		127.0.0.1 "$PORT" "${J1%%:*}"
	sleep 0.3
	tel /sigma/drops engine_version >"$TMP/d1"
	d=$(($(awk '{print $2}' "$TMP/d1") - $(awk '{print $2}' "$TMP/d0")))
	[ "$d" = 3 ] && ok || fail "version: engine_version went up by $d, expected 3"
	# workers that send UDP_SEGMENT batches: each arrives whole (UDP_GRO), is split
	J4=$(mkjob 3 fp32 196608 262144)
	IFS=: read -r id tok _ <<<"$J4"
	tel /sigma/drops socket_rx_too_long >"$TMP/d0"
	expect gso-workers 0 '0 wrong results' -- python3 "$PROBE" gso 127.0.0.1 "$PORT" "$id" \
		"$tok" 3 196608 262144 8920 2
	# a GRO message taken for one datagram would be too long (and its pushes resent)
	tel /sigma/drops socket_rx_too_long >"$TMP/d1"
	cmp -s "$TMP/d0" "$TMP/d1" && ok || fail "GRO: messages dropped as too long"
	# a live node that waits for ranks says so: each resend of a held push gets WAITING
	J5=$(mkjob 2 fp32 2230 262144)
	IFS=: read -r id tok _ _ _ chunk <<<"$J5"
	tel /sigma/jobs all_jobs.waits_sent >"$TMP/w0"
	expect waiting 0 '4 of 4 resends answered WAITING (missing ranks 0x2)' -- \
		python3 "$PROBE" waiting 127.0.0.1 "$PORT" "$id" "$tok" 2 "$chunk"
	grep -q 'waiting: 0 wrong' "$TMP/out" && ok || fail "waiting: $(tail -3 "$TMP/out")"
	tel /sigma/jobs all_jobs.waits_sent >"$TMP/w1"
	d=$(($(awk '{print $2}' "$TMP/w1") - $(awk '{print $2}' "$TMP/w0")))
	[ "$d" = 4 ] && ok || fail "waits_sent went up by $d, expected 4"
	# a straggler: rank 3 of 4 pushes 20 ms after the others in each of 40 rounds;
	# /sigma/jobs/lateness and sigmactl jobs --ranks name it, 20 ms late +- 20 %
	J6=$(mkjob 4 fp32 2230 262144)
	IFS=: read -r id tok _ _ _ chunk <<<"$J6"
	expect straggler 0 'straggler: 0 wrong' -- python3 "$PROBE" straggler 127.0.0.1 "$PORT" \
		"$id" "$tok" 4 "$chunk" 3 20 40
	tel "/sigma/jobs/lateness,$id" straggler rounds rank_3.last rank_3.mean_ns >"$TMP/late"
	awk '$1 == "straggler" && $2 == 3 {s = 1} $1 == "rounds" {r = $2}
		$1 == "rank_3.last" {l = $2} $1 == "rank_3.mean_ns" {m = $2}
		END {exit !(s && r == 40 && l >= 32 && m > 16e6 && m < 24e6)}' "$TMP/late" && ok ||
		{ fail "/sigma/jobs/lateness,$id does not name rank 3"; cat "$TMP/late"; }
	tel /sigma/jobs/lateness "job_$id.straggler" | grep -qx "job_$id.straggler 3" && ok ||
		fail "/sigma/jobs/lateness: job $id's straggler is not rank 3"
	"$SIGMACTL" "${U[@]}" jobs --ranks "$id" >"$TMP/ranks" 2>&1
	grep -q '^job '"$id"': 4 workers, 40 rounds; straggler: rank 3, last in' "$TMP/ranks" && ok ||
		{ fail "sigmactl jobs --ranks $id"; cat "$TMP/ranks"; }
	tel /sigma/socket >"$TMP/sock.json"
	grep -q '"rx_gro": [1-9]' "$TMP/sock.json" && ok ||
		{ fail "GRO: no message carried several datagrams"; cat "$TMP/sock.json"; }
	grep -q '"tx_gso": [1-9]' "$TMP/sock.json" && ok ||
		{ fail "GSO: no reply message carried several datagrams"; cat "$TMP/sock.json"; }
	grep -q '"sockets": 65' "$TMP/sock.json" && ok ||
		{ fail "/sigma/socket: the rtc lcore should have 65 sockets"; cat "$TMP/sock.json"; }
	# the lcore's own table names its transport drops too
	tel /sigma/lcores lcore_1.socket_rx_not_sigma lcore_1.socket_rx_too_long >"$TMP/l1"
	grep -qx 'lcore_1.socket_rx_not_sigma 6' "$TMP/l1" &&
		grep -qx 'lcore_1.socket_rx_too_long 3' "$TMP/l1" && ok ||
		{ fail "/sigma/lcores lacks the socket drops"; cat "$TMP/l1"; }
	SIGMA_FIRST_ROUND=3 workers rtc1-after-garbage 2 1 "$J1"
	# the benchmark's path: this sigmad, sigma-bench's node threads and MPI, same run
	if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
		if timeout 120 "$BENCH" compare "${BOPTS[@]}" --attach "127.0.0.1:$PORT" --runs 2 \
			--threads-baseline --json "$TMP/bench.json" >"$TMP/bench.out" 2>&1; then
			ok
		else
			fail "sigma-bench compare --threads-baseline"
			sed 's/^/  | /' "$TMP/bench.out" | tail -20
		fi
		for want in '"runs":2' '"threads_baseline":true' '"speedup_vs_threads":'; do
			grep -qF "$want" "$TMP/bench.json" 2>/dev/null && ok ||
				fail "bench JSON lacks $want"
		done
		grep -q '"\(sigma\|threads\)_ok":false' "$TMP/bench.json" &&
			fail "a bench point failed"
		sed -n '/^CPU/,/^ratio/p' "$TMP/bench.out" | sed 's/^/  bench: /'
	else
		echo "note: no mpicc/mpirun; sigma-bench compare not run"
	fi
	# a second sigmad on the same port must not join our SO_REUSEPORT group
	ini busy >"$TMP/s2.ini"
	sed -i "s|^unix = .*|unix = $TMP/ctl2.sock|" "$TMP/s2.ini"
	expect port-in-use 1 "UDP port $PORT of 127.0.0.1 is in use" -- "$SIGMAD" "${EAL[@]}" \
		--file-prefix=sg_sock_$$_dup -- --config "$TMP/s2.ini"
	# SIGHUP: a [socket] key needs a restart, and is named
	printf '[socket]\nrcvbuf = 1048576\n' >>"$TMP/s.ini"
	sighup "$PID" "$TMP/log"
	grep -qF '[socket] rcvbuf changed: needs a restart' "$TMP/log" && ok ||
		{ fail "SIGHUP did not name [socket] rcvbuf"; tail "$TMP/log"; }
	stop
fi

# ---- rtc x2, idle = sleep ----------------------------------------------------------
echo "== rtc x2, idle = sleep, [socket] gro = no"
if EXTRA_INI=$'[socket]\ngro = no' start sleep --rtc '(0,0,1),(0,1,2)'; then
	J1=$(mkjob 3 fp16 100000 65536)
	J2=$(mkjob 3 bf16 50000 65536)
	J3=$(mkjob 3 int8 40000 16384)
	J4=$(mkjob 3 fp32 200000+70000+1000 262144)
	workers rtc2 3 3 "$J1" "$J2" "$J3" "$J4"
	SIGMA_FIRST_ROUND=3 SIGMA_STEER_REDUCERS=2 workers rtc2-steer2 3 3 "$J1" "$J2" "$J3" "$J4"
	SIGMA_FIRST_ROUND=6 SIGMA_STEER_REDUCERS=5 workers rtc2-steer5 3 3 "$J1" "$J2" "$J3" "$J4"
	# without UDP_GRO the kernel splits GSO sends before they reach a socket
	J5=$(mkjob 3 fp32 196608 262144)
	IFS=: read -r id tok _ <<<"$J5"
	expect gso-no-gro 0 '0 wrong results' -- python3 "$PROBE" gso 127.0.0.1 "$PORT" "$id" \
		"$tok" 3 196608 262144 8920 2
	tel /sigma/socket lcore_1.rx_gro lcore_2.rx_gro >"$TMP/g"
	awk '$2 != 0 {bad = 1} END {exit bad}' "$TMP/g" && ok ||
		{ fail "gro = no, yet a message carried several datagrams"; cat "$TMP/g"; }
	tel /sigma/lcores lcore_1.rx_pkts lcore_2.rx_pkts lcore_1.handoff_pkts \
		lcore_2.handoff_pkts >"$TMP/l"
	awk '$2 <= 0 {bad = 1} END {exit bad}' "$TMP/l" && ok ||
		{ fail "rtc x2: both lcores should receive and hand off"; cat "$TMP/l"; }
	stop
fi

# ---- io + 2 reducers, idle = sleep -------------------------------------------------
echo "== io + 2 reducers, idle = sleep"
if start sleep --io '(0,0,1)' --reduce 2-3; then
	J1=$(mkjob 4 fp32 500000+30001 262144)
	J2=$(mkjob 4 uint8 100000 65536)
	J3=$(mkjob 4 int64 30000 65536)
	workers io2 4 2 "$J1" "$J2" "$J3"
	SIGMA_FIRST_ROUND=2 SIGMA_STEER_REDUCERS=2 workers io2-steer2 4 2 "$J1" "$J2" "$J3"
	# a live key move while 4 workers push (every bucket to the other reducer)
	SIGMA_FIRST_ROUND=4 SIGMA_MIN_SECONDS=4 timeout 120 "$WORKERS" 127.0.0.1 "$PORT" 4 1 \
		"$J1" "$J2" "$J3" >"$TMP/w.out" 2>&1 &
	WPID=$!
	sleep 1.5
	expect move 0 '' -- "$SIGMACTL" "${U[@]}" layout set keymap=1,0
	if wait "$WPID"; then
		ok
		grep '^rounds' "$TMP/w.out" | sed 's/^/  io2-move: /'
	else
		fail "workers failed during the key move"
		sed 's/^/  | /' "$TMP/w.out" | tail -30
	fi
	WPID=
	"$SIGMACTL" "${U[@]}" --json layout | tr -d ' \n' | grep -q '"keymap":\[1,0,1,0,' && ok ||
		fail "layout does not show the moved keymap"
	# the jobs go on after the move: rounds continue where the moving run stopped
	k=$(sed -n 's/^rounds \([0-9]*\).*/\1/p' "$TMP/w.out")
	SIGMA_FIRST_ROUND=$((4 + ${k:-0})) workers io2-after-move 4 1 "$J1" "$J2" "$J3"
	# SIGINT while workers push: RX stops, reducers drain, sigmad exits 0
	timeout 60 "$WORKERS" 127.0.0.1 "$PORT" 4 1000 "$J1" >/dev/null 2>&1 &
	WPID=$!
	sleep 1
	stop
	kill -KILL "$WPID" 2>/dev/null
	wait "$WPID" 2>/dev/null
	WPID=
fi

# ---- start-up refusals -------------------------------------------------------------
echo "== refusals"
ini busy >"$TMP/r.ini"
expect port-1 1 'every entry is on port 0' -- "$SIGMAD" "${EAL[@]}" \
	--file-prefix=sg_sock_$$_r1 -- --config "$TMP/r.ini" --rtc '(1,0,1)'
sed -i 's/^\[net\]$/[net]\nmac = 02:00:00:00:00:01/' "$TMP/r.ini"
expect mac 1 'remove [net] mac' -- "$SIGMAD" "${EAL[@]}" --file-prefix=sg_sock_$$_r2 -- \
	--config "$TMP/r.ini"
ini busy >"$TMP/r.ini"
expect udp-port-high 1 'set udp_port to at most 65471' -- "$SIGMAD" "${EAL[@]}" \
	--file-prefix=sg_sock_$$_r3 -- --config "$TMP/r.ini" --udp-port 65500
expect not-our-ip 1 'is not an address of this host' -- "$SIGMAD" "${EAL[@]}" \
	--file-prefix=sg_sock_$$_r4 -- --config "$TMP/r.ini" --ip 192.0.2.1
printf '[socket]\nrcvbuf = 10\n' >>"$TMP/r.ini"
expect rcvbuf 2 '[socket] rcvbuf = "10": expected an integer in [65536, 1073741824]' -- \
	"$SIGMAD" -- --config "$TMP/r.ini"
printf '[transport]\ntype = udp\n' >"$TMP/r.ini"
expect type-udp 2 '[transport] type = "udp": expected dpdk, verbs or socket' -- \
	"$SIGMAD" -- --config "$TMP/r.ini"

# ---- without root ------------------------------------------------------------------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	echo "== as user nobody"
	run=$((run + 1))
	PORT=$((BASE + 50))
	{
		ini sleep | grep -v '^\[control\]\|^unix'
		printf '[job 3]\nworkers = 2\ntoken = 0x33\nkeys = 4\npartition_bytes = 89200\n'
		printf 'chunk_bytes = 8920\n'
	} >"$TMP/nobody.ini"
	chmod 644 "$TMP/nobody.ini"
	setpriv --reuid=65534 --regid=65534 --clear-groups env -u XDG_RUNTIME_DIR "$SIGMAD" \
		"${EAL[@]}" --file-prefix=sg_sock_$$_nobody -- --config "$TMP/nobody.ini" \
		>"$TMP/log" 2>&1 &
	PID=$!
	if wait_for "$TMP/log" 'sigmad: running' "$PID"; then
		ok
		workers nobody 2 2 "3:33:fp32:89200:89200:8920"
		stop
	else
		fail "sigmad as nobody did not start"
		sed 's/^/  | /' "$TMP/log"
		wait "$PID"
		PID=
	fi
fi

echo "client_socket: $checks checks, $fails failed"
[ "$fails" = 0 ]
