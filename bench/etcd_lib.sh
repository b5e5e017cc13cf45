# SPDX-License-Identifier: BSD-3-Clause
#
# etcd for the failover test and benchmark (sourced): free loopback ports and
# a one-member etcd started in the caller's TMP, logging to TMP/etcd-NAME.log.

# free_ports N: print a base port with N free consecutive TCP ports after it
free_ports() {
	python3 "$(dirname "${BASH_SOURCE[0]}")/free_ports.py" "$1"
}

# free_udp_ports N: print a base port with N free consecutive UDP (and TCP) ports after it,
# below the kernel's ephemeral range, so that no node bound to port 0 takes one meanwhile
# (sigmad's socket transport binds udp_port .. udp_port + 64)
free_udp_ports() {
	python3 - "$1" <<'PY'
import os, random, socket, sys
n = int(sys.argv[1])
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
rnd = random.Random(os.getpid() * 7919)
for _ in range(500):
    base = rnd.randrange(10000, lo - n)
    socks = []
    try:
        for p in range(base, base + n):
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                s = socket.socket(socket.AF_INET, kind)
                socks.append(s)
                s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(base)
    break
PY
}

# etcd_start NAME CLIENT_PORT PEER_PORT: start a one-member etcd, print its pid
etcd_start() {
	etcd --name "$1" --data-dir "$TMP/etcd-$1.data" \
		--listen-client-urls "http://127.0.0.1:$2" --advertise-client-urls "http://127.0.0.1:$2" \
		--listen-peer-urls "http://127.0.0.1:$3" --initial-advertise-peer-urls "http://127.0.0.1:$3" \
		--initial-cluster "$1=http://127.0.0.1:$3" --initial-cluster-token "sg-$$-$1" \
		>"$TMP/etcd-$1.log" 2>&1 &
	echo $!
}

# etcd_wait URL: wait up to 15 s for etcd to answer
etcd_wait() {
	for _ in $(seq 150); do
		ETCDCTL_API=3 etcdctl --endpoints "$1" --dial-timeout 1s get /ready >/dev/null 2>&1 &&
			return 0
		sleep 0.1
	done
	return 1
}

# etcd_count URL PREFIX: keys under PREFIX
etcd_count() {
	ETCDCTL_API=3 etcdctl --endpoints "$1" get --prefix "$2" --keys-only 2>/dev/null | grep -c .
}

# etcd_test_setup NAME: a test's start (tests/client): skip (exit 77) without
# etcd, a scratch folder TMP (/tmp/sg_NAME.*), PIDS, fails and checks at 0, and
# the EXIT trap of expect_lib.sh's cleanup_pids (the caller sources it)
etcd_test_setup() {
	command -v etcd >/dev/null && command -v etcdctl >/dev/null ||
		{ echo "SKIP: no etcd/etcdctl (Debian packages etcd-server, etcd-client)"; exit 77; }
	TMP=$(mktemp -d "/tmp/sg_$1.XXXXXX")
	PIDS=()
	fails=0
	checks=0
	trap cleanup_pids EXIT
}

# etcd_test_start: after etcd_test_setup, one etcd member "e" on fresh ports,
# waited for; sets P (its client port; P + 2 is free too) and URL, and exits 1
# with its log if it does not start
etcd_test_start() {
	P=$(free_ports 3)
	URL=http://127.0.0.1:$P
	PIDS+=("$(etcd_start e "$P" $((P + 1)))")
	etcd_wait "$URL" || { echo "FAIL: etcd did not start"; cat "$TMP/etcd-e.log"; exit 1; }
}
