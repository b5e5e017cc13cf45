#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# sigmad on net_af_xdp with its own XDP program (docs/sigmad.md, "AF_XDP"), in
# a test-made network namespace, with workers on kernel UDP sockets in a peer
# namespace (bench/sigmad_netns.sh with SIGMA_PMD=af_xdp makes both and the
# veth). Checks:
# 1. 3 workers, 2 keys, 3 rounds: every element of every RESULT is checked by
#    the workers against their own sum; the kernel still answers ping for
#    sigmad's address (the program passes what is not Sigma's); no XDP program
#    is left on the veth once sigmad stops (sigmad_netns.sh fails otherwise).
# 2. Garbage (zero bytes, wrong tokens, an unknown job) beside live workers:
#    sigmad counts it (engine drops magic, token, job).
# 3. A sigmad SIGKILLed leaves its program on the veth; the next sigmad
#    removes it, says so, sums, and leaves nothing behind either.
# 4. Refusals, each naming its fix: [net] mtu 9000 (larger than an AF_XDP
#    frame), a 64 KiB memlock limit without CAP_IPC_LOCK, no CAP_NET_RAW (the
#    AF_XDP socket), and another XDP program already on the interface (left
#    there).
# 5. One lcore, two net_af_xdp ports ([layout] extra_rx): the veth and the
#    namespace's lo, as on a machine of the emulated cluster whose own worker
#    reaches its node over loopback: a job's workers on both, every element
#    checked, nothing left on either interface.
# Skips (77) when not root, without namespaces, without AF_XDP sockets, or in
# a build without sigmad's XDP program.
# Usage: test_dp_afxdp.sh SIGMAD SIGMA_XDP_O WORKERS_PY SIGMAD_NETNS_SH FLOOD_PY OTHER_XDP_O
set -u
SIGMAD=$1
PROG=$2
WORKERS_PY=$3
NETNS=$4
FLOOD_PY=$5
OTHER=$6
TMP=$(mktemp -d)
NS=sgxr$$
trap 'ip netns del "$NS" 2>/dev/null; rm -rf "$TMP"' EXIT
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (namespaces, XDP)"; exit 77; }
[ "$PROG" != none ] && [ -r "$PROG" ] ||
	{ echo "SKIP: sigmad was built without its XDP program (needs clang and libbpf-dev)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
if ! why=$(python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>&1); then
	echo "SKIP: this kernel refuses AF_XDP sockets: ${why##*$'\n'}"
	exit 77
fi
. "$(dirname "$NETNS")/sigmad_lib.sh"
export SIGMA_PMD=af_xdp SIGMA_XDP_PROG=$PROG

fails=0
fail() { echo "FAIL: $*"; fails=1; }
run() { # label, then the sigmad_netns.sh command line
	local label=$1 rc
	shift
	timeout 200 "$NETNS" "$SIGMAD" "$TMP/jobs.ini" "$@" >"$TMP/out" 2>&1
	rc=$?
	cat "$TMP/out"
	if [ "$rc" = 77 ]; then
		echo "SKIP: $label: AF_XDP could not start here"
		exit 77
	fi
	[ "$rc" = 0 ] || fail "$label: exit $rc"
	grep -q 'engine:.* [1-9][0-9]* rounds completed' "$TMP/out" ||
		fail "$label: sigmad completed no round"
	grep -q 'drop udp_csum' "$TMP/out" && fail "$label: UDP checksum drops"
	grep -q 'XDP program [0-9]* steers UDP 9300' "$TMP/out" ||
		fail "$label: sigmad did not configure its XDP program"
}

printf '[job 1]\nworkers = 3\ntoken = 0x1234\nkeys = 2\npartition_bytes = 5696\nchunk_bytes = 1424\n' \
	>"$TMP/jobs.ini"
# a datagram to a port that is not Sigma's must reach the kernel, which answers
# ICMP port unreachable (a connected socket's recv then fails with ECONNREFUSED)
KERNEL_PY='
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.connect(("10.79.0.1", 9299))
s.send(b"not sigma")
try:
    s.recv(64)
except ConnectionRefusedError:
    print("kernel answered port unreachable for UDP 9299")
    sys.exit(0)
except OSError as e:
    print("no ICMP from the kernel for UDP 9299:", e)
sys.exit(1)'
# /metrics over TCP (through the program to the kernel, to sigmad's agent) and
# DPDK telemetry's /sigma/ports, as on every port
OBSERVE_PY='
import json, os, socket, sys
c = socket.create_connection(("10.79.0.1", 9390), timeout=5)
c.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
body = b""
while True:
    b = c.recv(65536)
    if not b:
        break
    body += b
rounds = [l for l in body.decode().splitlines()
          if l.startswith("sigma_job_rounds_completed_total{sigma_job=\"1\"}")]
print("metrics:", rounds)
t = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
t.connect(os.environ["SIGMA_TELEMETRY"])
t.recv(16384)
t.send(b"/sigma/ports")
ports = json.loads(t.recv(65536))["/sigma/ports"]
print("telemetry /sigma/ports:", json.dumps(ports)[:300])
ok = rounds and float(rounds[0].split()[-1]) >= 6 and ports["port_0"]["ipackets"] >= 72
sys.exit(0 if ok else 1)'
printf '[control]\nmetrics = 10.79.0.1:9390\n' >>"$TMP/jobs.ini"
run "3 workers" timeout 90 sh -c 'python3 -c "$2" || exit 1
	python3 "$1" 10.79.0.1 9300 10.79.0.2 3 2 5696 1424 3 0x1234 || exit 1
	python3 -c "$3" || { echo "no /metrics or telemetry from sigmad on af_xdp"; exit 1; }' \
	sh "$WORKERS_PY" "$KERNEL_PY" "$OBSERVE_PY"
grep -q 'kernel answered port unreachable' "$TMP/out" || fail "other traffic did not reach the kernel"

printf '[job 1]\nworkers = 4\ntoken = 0x1234\nkeys = 2\npartition_bytes = 2848\nchunk_bytes = 1424\n' \
	>"$TMP/jobs.ini"
run "garbage beside 4 workers" timeout 150 sh -c '
	python3 "$1" 10.79.0.1 9300 10.79.0.2 4 2 2848 1424 50 0x1234 & live=$!
	python3 "$2" 10.79.0.1 9300 10.79.0.2 1500 20000 1 0x1234 || exit 1
	wait $live || { echo "live workers failed during the garbage"; exit 1; }' \
	sh "$WORKERS_PY" "$FLOOD_PY"
got=$(sed -n 's/^ *| *engine drop \(magic\|token\|job\) *\([0-9]*\)$/\2/p' "$TMP/out" |
	awk '{ n += $1 } END { print n + 0 }')
[ "$got" -ge 1400 ] || fail "sigmad counted $got of the 1500 garbage datagrams (magic, token, job)"

printf '[job 1]\nworkers = 2\ntoken = 0x1234\nkeys = 1\npartition_bytes = 2848\nchunk_bytes = 1424\n' \
	>"$TMP/jobs.ini"
SIGMA_AFXDP_STALE=1 run "after SIGKILL" timeout 90 \
	python3 "$WORKERS_PY" 10.79.0.1 9300 10.79.0.2 2 1 2848 1424 2 0x1234
grep -q '^after SIGKILL: prog/xdp id' "$TMP/out" ||
	fail "after SIGKILL: no stale XDP program to clean (the test proves nothing)"
grep -q 'removed the XDP program (id [0-9]*) that pid [0-9]*, now gone, left' "$TMP/out" ||
	fail "the next sigmad did not remove the stale XDP program"
# refusals: sigmad alone on a veth end in a namespace of its own
ip netns add "$NS" && ip -n "$NS" link add sxA type veth peer name sxB &&
	ip -n "$NS" link set sxA up && ip -n "$NS" link set sxB up || fail "namespace for refusals"
refuse() { # expected message, then sigmad options
	local want=$1 rc
	shift
	ip netns exec "$NS" timeout 30 "$SIGMAD" --no-huge --no-shconf --no-pci -m 256 \
		--file-prefix=sgxr$$ --lcores='(0-1)@(0-1)' --log-level=lib.eal:error \
		--vdev=net_af_xdp0,iface=sxA,start_queue=0,queue_count=1 -- --duration 1 "$@" \
		>"$TMP/ref" 2>&1
	rc=$?
	grep 'error' "$TMP/ref"
	[ "$rc" = 1 ] || fail "refusal ($want): exit $rc, not 1"
	grep -q "$want" "$TMP/ref" || { cat "$TMP/ref"; fail "refusal: no '$want'"; }
	rm -rf "/var/run/dpdk/sgxr$$"
}
ip -n "$NS" link set sxA mtu 9000
refuse 'mtu = 9000 does not fit an AF_XDP frame.*lower \[net\] mtu' --mtu 9000
ip -n "$NS" link set sxA mtu 1500
# the memory lock: a 64 KiB limit without CAP_IPC_LOCK cannot hold the UMEM;
# without CAP_NET_RAW the kernel refuses the AF_XDP socket
if command -v capsh >/dev/null && command -v prlimit >/dev/null; then
	SIGMAD_REAL=$SIGMAD
	for how in "--memlock=65536:65536 cap_ipc_lock" "--nofile=4096 cap_net_raw"; do
		set -- $how
		SIGMAD=$TMP/wrapped-$2.sh
		printf '#!/bin/sh\nexec prlimit %s capsh --drop=%s -- -c '"'"'exec "$0" "$@"'"'"' %s "$@"\n' \
			"$1" "$2" "$SIGMAD_REAL" >"$SIGMAD"
		chmod +x "$SIGMAD"
		if [ "$2" = cap_ipc_lock ]; then
			refuse 'memlock limit is 64 KiB; raise it (ulimit -l unlimited' --mtu 1500
		else
			refuse 'refuses an AF_XDP socket (Operation not permitted): run sigmad as root, or give it CAP_NET_RAW' --mtu 1500
		fi
	done
	SIGMAD=$SIGMAD_REAL
else
	echo "no capsh or prlimit: the memlock and capability refusals are not checked"
fi
if ip -n "$NS" link set dev sxA xdpgeneric obj "$OTHER" sec xdp; then
	refuse 'XDP program [0-9]* (other_prog) is already attached there.*sxA xdpgeneric off' --mtu 1500
	ip -n "$NS" -d link show dev sxA | grep -q 'prog/xdp.*other_prog' ||
		fail "sigmad removed an XDP program that was not its own"
	ip -n "$NS" link set dev sxA xdpgeneric off
else
	fail "cannot attach $OTHER for the refusal case"
fi
# two ports, one lcore: 2 ranks over lo (from sigmad's own namespace), 2 over the veth
NS2=sgxs$$
trap 'ip netns del "$NS" 2>/dev/null; ip netns del "$NS2" 2>/dev/null; rm -rf "$TMP"' EXIT
ip netns add "$NS2" && ip -n "$NS" link set lo up && ip -n "$NS" link set sxB netns "$NS2" &&
	ip -n "$NS" addr add 10.79.1.1/24 dev sxA && ip -n "$NS2" addr add 10.79.1.2/24 dev sxB &&
	ip -n "$NS2" link set sxB up || fail "namespaces for two ports"
# what sigmad sends on lo has a local source address: the kernel takes it only so
ip netns exec "$NS" sysctl -qw net.ipv4.conf.lo.accept_local=1
printf '[net]\nip = 10.79.1.1\nmtu = 1500\nudp_checksum = no\n[layout]\nrtc = (0,0,1)\nextra_rx = (1,0,1)\n[resources]\nmbufs = 4096\npool_bufs = 1024\n[live]\nidle = sleep\n[job 1]\nworkers = 4\ntoken = 0x1234\nkeys = 2\npartition_bytes = 5696\nchunk_bytes = 1424\n' \
	>"$TMP/two.ini"
ip netns exec "$NS" timeout 60 "$SIGMAD" --no-huge --no-shconf --no-pci -m 256 \
	--file-prefix=sgxr$$ --lcores='(0-1)@(0-1)' --log-level=lib.eal:error \
	--vdev=net_af_xdp0,iface=sxA,start_queue=0,queue_count=1 \
	--vdev=net_af_xdp1,iface=lo,start_queue=0,queue_count=1 -- --config "$TMP/two.ini" \
	>"$TMP/two.out" 2>&1 &
SPID=$!
for _ in $(seq 100); do grep -q 'sigmad: running' "$TMP/two.out" && break; sleep 0.1; done
SIGMA_RANKS=0:2 ip netns exec "$NS" timeout 60 python3 "$WORKERS_PY" 10.79.1.1 9300 10.79.1.1 \
	4 2 5696 1424 3 0x1234 & LPID=$!
SIGMA_RANKS=2:2 ip netns exec "$NS2" timeout 60 python3 "$WORKERS_PY" 10.79.1.1 9300 \
	10.79.1.2 4 2 5696 1424 3 0x1234 || fail "two ports: the veth's workers"
wait "$LPID" || fail "two ports: the workers on lo"
kill -TERM "$(child_pid "$SPID")" 2>/dev/null
wait "$SPID" || fail "two ports: sigmad exit $?"
grep -E 'rtc|engine:|XDP|error' "$TMP/two.out"
grep -q 'engine: 96 pushes, 24 rounds completed' "$TMP/two.out" ||
	fail "two ports: sigmad did not sum every push of both ports"
for dev in "$NS sxA" "$NS lo"; do
	set -- $dev
	ip -n "$1" -d link show dev "$2" | grep -q 'prog/xdp' && fail "XDP program left on $2"
done
rm -rf "/var/run/dpdk/sgxr$$"
echo "dp_afxdp: $([ $fails = 0 ] && echo passed || echo failed)"
exit $fails
