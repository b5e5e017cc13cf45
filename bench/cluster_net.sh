#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The network of `sigma-bench cluster` (docs/emulated-cluster.md): "machines" made of
# network namespaces, each with one veth into a bridge, each link shaped to a
# rate in both directions.
#
#   cluster_net.sh up PREFIX N K MBIT MTU   make it (undoing a half-made one on failure)
#   cluster_net.sh down PREFIX              kill what runs in it, delete it (idempotent)
#   cluster_net.sh left PREFIX              print what is left of it; exit 1 if anything
#   cluster_net.sh uplink PREFIX on MBIT MTU | off
#                                           shape every machine's uplink in the switch too
#
# Namespaces: PREFIX-sw holds the bridge br0 and one veth per machine (gI for
# GPU machine I, cJ for CPU machine J); PREFIX-gI and PREFIX-cJ each hold the
# other end, eth0, with 10.77.0.(1+I)/24 or 10.77.0.(101+J)/24. Nothing is made
# in the namespace this script runs in, so `down` is deleting the namespaces:
# their interfaces, bridge and qdiscs go with them.
#
# lo takes datagrams with a local source address (accept_local): a sigmad on
# lo over AF_XDP answers its machine's worker with such datagrams.
# Shaping: a tbf qdisc on the egress of both ends of each veth. eth0's shapes
# what the machine sends, the bridge side's what it receives; no ingress
# shaping (no ifb) is needed. The queue (limit) is large, so that bursts of
# pushes are delayed rather than dropped, as a switch with deep buffers would.
#
# Exit: 0; 1 on failure (the reason on stderr); 2 usage; 77 when a network
# namespace, a veth or a tbf qdisc cannot be made here (nothing is left).
set -u

usage() {
	echo "usage: $0 up PREFIX N K MBIT MTU | down PREFIX | left PREFIX |" \
		"uplink PREFIX on MBIT MTU | uplink PREFIX off" >&2
	exit 2
}

# the namespaces of PREFIX that exist now
spaces() {
	ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$1-(sw|g[0-9]+|c[0-9]+)$"
}

# the EAL runtime folders of the run's sigmads (--file-prefix PREFIX-gI): a
# sigmad killed before its clean-up leaves its own
eal_dirs() {
	local d
	for d in /var/run/dpdk/"$1"-g[0-9]* /var/run/dpdk/"$1"-c[0-9]*; do
		[ -d "$d" ] && echo "$d"
	done
}

down() {
	local ns pids d
	for ns in $(spaces "$1"); do
		# only what runs inside this run's namespaces: those are ours
		pids=$(ip netns pids "$ns" 2>/dev/null)
		[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
	done
	for ns in $(spaces "$1"); do
		ip netns del "$ns" 2>/dev/null
	done
	for d in $(eal_dirs "$1"); do
		rm -rf "$d"
	done
	return 0
}

left() {
	local ns d found=0
	for ns in $(spaces "$1"); do
		echo "left: namespace $ns (processes: $(ip netns pids "$ns" 2>/dev/null | xargs))"
		found=1
	done
	for d in $(eal_dirs "$1"); do
		echo "left: EAL runtime folder $d"
		found=1
	done
	return $found
}

# shape DEV NS MBIT MTU: tbf at MBIT on DEV's egress in NS
shape() {
	# burst: 10 ms at the rate, at least a frame: on a busy machine the
	# qdisc's timer and softirq run late, and a bucket of one frame would lose
	# the time they were late for good; one of 10 ms lets the link catch up, as
	# a wire would, and adds at most 10 ms worth of bytes to any interval.
	# limit: 4 MB of queue (320 ms at 100 Mbit/s, 32 ms at 1 Gbit/s)
	local burst=$(($4 + 1024)) ms=$(($3 * 10000 / 8))
	[ "$ms" -gt "$burst" ] && burst=$ms
	tc -n "$2" qdisc add dev "$1" root tbf rate "$3mbit" burst "$burst" limit 4000000
}

up() {
	local p=$1 n=$2 k=$3 rate=$4 mtu=$5 err i m dev ip
	for v in "$n" "$k" "$rate" "$mtu"; do
		[[ "$v" =~ ^[0-9]+$ ]] || usage
	done
	[ "$n" -ge 1 ] && [ "$n" -le 64 ] && [ "$k" -le 64 ] && [ "$rate" -ge 1 ] &&
		[ "$mtu" -ge 1280 ] && [ "$mtu" -le 9000 ] || usage
	command -v ip >/dev/null && command -v tc >/dev/null ||
		{ echo "cluster_net: needs ip(8) and tc(8) (iproute2)" >&2; exit 77; }
	if [ -n "$(spaces "$p")" ]; then
		echo "cluster_net: namespaces of $p exist already" >&2
		exit 1
	fi
	trap 'down "$p"' EXIT
	if ! err=$(ip netns add "$p-sw" 2>&1); then
		echo "cluster_net: cannot create a network namespace: $err" >&2
		exit 77
	fi
	ip -n "$p-sw" link set lo up &&
		ip -n "$p-sw" link add br0 mtu "$mtu" type bridge &&
		ip -n "$p-sw" link set br0 up || exit 1
	for m in $(seq 0 $((n - 1)) | sed 's/^/g/') $( [ "$k" -gt 0 ] && seq 0 $((k - 1)) | sed 's/^/c/'); do
		i=${m#?}
		if [ "${m%%[0-9]*}" = g ]; then ip=10.77.0.$((1 + i)); else ip=10.77.0.$((101 + i)); fi
		ip netns add "$p-$m" || exit 1
		if ! err=$(ip -n "$p-sw" link add "$m" mtu "$mtu" type veth peer name eth0 \
			netns "$p-$m" mtu "$mtu" 2>&1); then
			echo "cluster_net: cannot create a veth pair: $err" >&2
			exit 77
		fi
		ip -n "$p-sw" link set "$m" master br0 up &&
			ip -n "$p-$m" link set lo up &&
			ip netns exec "$p-$m" sysctl -qw net.ipv4.conf.lo.accept_local=1 &&
			ip -n "$p-$m" addr add "$ip/24" dev eth0 &&
			ip -n "$p-$m" link set eth0 up || exit 1
		for dev in "eth0 $p-$m" "$m $p-sw"; do
			set -- $dev
			if ! err=$(shape "$1" "$2" "$rate" "$mtu" 2>&1); then
				echo "cluster_net: cannot shape $1 with tbf: $err" >&2
				exit 77
			fi
		done
	done
	trap - EXIT
	return 0
}

# uplink P on MBIT MTU: what each machine sends is also shaped where it enters the
# switch (ingress of its bridge port, redirected to an ifb with a tbf at the
# link's rate). An AF_XDP socket's frames leave eth0 without its qdisc (the
# kernel sends them straight to the driver), so a sigmad's replies would
# otherwise go unshaped. What eth0's tbf shaped already passes this one
# without delay. off removes it.
uplink() {
	local p=$1 m err
	for m in $(spaces "$p" | sed -n "s/^$p-//p" | grep -v '^sw$'); do
		if [ "$2" = on ]; then
			if ! err=$(ip -n "$p-sw" link add "i$m" type ifb 2>&1); then
				echo "cluster_net: cannot create an ifb device: $err" >&2
				return 77
			fi
			ip -n "$p-sw" link set "i$m" up &&
				tc -n "$p-sw" qdisc add dev "$m" ingress &&
				tc -n "$p-sw" filter add dev "$m" parent ffff: protocol all u32 \
					match u32 0 0 action mirred egress redirect dev "i$m" &&
				shape "i$m" "$p-sw" "$3" "$4" || return 1
		else
			tc -n "$p-sw" qdisc del dev "$m" ingress 2>/dev/null
			ip -n "$p-sw" link del "i$m" 2>/dev/null
		fi
	done
	return 0
}

[ $# -ge 2 ] || usage
case $1 in
up) [ $# = 6 ] || usage; up "$2" "$3" "$4" "$5" "$6" ;;
down) [ $# = 2 ] || usage; down "$2" ;;
left) [ $# = 2 ] || usage; left "$2" ;;
uplink)
	case $# in
	5) [ "$3" = on ] || usage; uplink "$2" on "$4" "$5" ;;
	3) [ "$3" = off ] || usage; uplink "$2" off ;;
	*) usage ;;
	esac ;;
*) usage ;;
esac
