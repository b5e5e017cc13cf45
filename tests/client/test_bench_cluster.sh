#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# sigma-bench cluster on a 2 + 1 cluster: two GPU machines and one CPU machine,
# network namespaces whose links tbf shapes to 100 Mbit/s both ways. One run
# of MPI_Allreduce, Sigma with k = 1 and a PS on the CPU machine, each sum of
# every element checked by the bench against the closed-form reference (it
# fails otherwise). Then:
# - no configuration may beat its shaped links: each time is at least 0.95 x
#   the time the links allow for the bytes it moved, less the 10 ms a tbf
#   bucket may lend (load only makes runs slower);
# - the same cluster interrupted by SIGINT mid-run, and one whose nodes cannot
#   start (--udpd /bin/false): both must fail and leave nothing behind;
# - after each: no namespace of the run, no process that carries its prefix,
#   nothing new in this namespace's interfaces;
# - bad options exit 2 before making anything;
# - --local-ranks 2: two ranks per GPU machine summing locally first; each
#   machine's link carries one copy of M per iteration each way (the veths'
#   counters against M), not two, and the nodes summed 2 M per iteration;
#   one of its workers SIGKILLed mid-step fails the run (exit 1, "worker N
#   died") and leaves nothing;
# - --node sigmad: the same 2 + 1 cluster with a sigmad over AF_XDP on every
#   machine (Sigma k = 1 and the PS), sums checked, no time below what the
#   shaped links allow (AF_XDP's frames skip eth0's qdisc: the switch shapes
#   the uplinks too), nothing left (no EAL folder either); and sigmads that
#   cannot start. Skipped with its reason where AF_XDP sockets are refused.
# - --worker af_xdp: the 2 + 1 cluster of sigma-udpds with every worker over
#   libsigma's DPDK transport on net_af_xdp (its own EAL, sigmad's XDP
#   program steering only its port and address; its own node over kernel
#   UDP), Sigma k = 1 and the PS over two runs, sums checked, no time below
#   what the shaped links allow, no XDP program left on eth0 after any
#   configuration (the bench checks it), nothing left at the end (no EAL
#   folder either); then a worker SIGKILLed mid-step, whose XDP program
#   stays on eth0: the run fails naming it, and the next configuration's
#   worker removes the program at its start (the PS there sums right).
#   Skipped with its reason where AF_XDP sockets are refused.
# Skips (77) where network namespaces, veth pairs or tbf cannot be made.
# Usage: test_bench_cluster.sh path/to/sigma-bench path/to/sigma-udpd path/to/sigmad
set -u
BENCH=$1
UDPD=$2
SIGMAD=$3
P=sgt$$
TMP=$(mktemp -d)
fails=0
cleanup() {
	local ns
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$P"); do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
step() {
	echo "[$(date +%T)] $*"
}
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

command -v ip >/dev/null && command -v tc >/dev/null || { echo "SKIP: no ip(8) or tc(8)"; exit 77; }
if ! err=$(ip netns add "$P-probe" 2>&1); then
	echo "SKIP: cannot create a network namespace: $err"
	exit 77
fi
ip netns del "$P-probe"
command -v mpicc >/dev/null && command -v mpirun >/dev/null || { echo "SKIP: no OpenMPI"; exit 77; }

# left PREFIX LABEL: nothing of run PREFIX may be left
left() {
	local f pid pat
	if ip netns list | awk '{print $1}' | grep -q "^$1-"; then
		fail "$2: namespaces left: $(ip netns list | grep "^$1-" | xargs)"
	fi
	# one grep over every process (a slow loop on a busy machine); the
	# pattern's brackets keep grep from finding its own command line
	pat="[${1:0:1}]${1:1}"
	for f in $(grep -l -a -e "$pat" /proc/[0-9]*/cmdline 2>/dev/null) \
		$(grep -l -a -z -x -e "SIGMA_CLUSTER_PREFIX=$pat" /proc/[0-9]*/environ 2>/dev/null); do
		pid=${f#/proc/}
		pid=${pid%%/*}
		[ "$pid" = $$ ] && continue
		fail "$2: process left: $pid $({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null)"
	done
	ip -o link show | awk -F': ' '{print $2}' | sort >"$TMP/links.after"
	if ! cmp -s "$TMP/links.before" "$TMP/links.after"; then
		# other tests may add interfaces meanwhile: only ours count
		if comm -13 "$TMP/links.before" "$TMP/links.after" | grep -q -e "$1" -e '^br0' -e '^eth0'; then
			fail "$2: interfaces left: $(comm -13 "$TMP/links.before" "$TMP/links.after" | xargs)"
		fi
	fi
	if ls -d /tmp/sigma-cluster-"$1"-* >/dev/null 2>&1; then
		fail "$2: folders left: $(ls -d /tmp/sigma-cluster-"$1"-*)"
	fi
}
ip -o link show | awk -F': ' '{print $2}' | sort >"$TMP/links.before"

# pushing LOG PID: wait until run PID (its output in LOG) has its Sigma workers
# pushing, or has ended
pushing() {
	for _ in $(seq 600); do
		grep -q 'run 1/1: sigma' "$1" && break
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	sleep 1
}

# bad options: exit 2 before anything is made
step "bad options"
for opt in "--n 0" "--n 17" "--k x" "--ks 1,,2" "--link fast" "--link 0" "--size 3" \
	"--chunk 9000" "--mtu 1500 --chunk 8920" "--prefix Bad-Name" "--iters 0" "extra" \
	"--nice +5" "--link +100mbit" "--link 0x10gbit" "--node sigmad --mtu 9000" \
	"--node xdp" "--node udpd," "--local-ranks 0" "--local-ranks 9" \
	"--local-ranks 2 --size 4" "--worker tcp" "--worker af_xdp --node sigmad" \
	"--worker af_xdp --local-ranks 2" "--worker af_xdp --mtu 9000"; do
	# shellcheck disable=SC2086 # the options are meant to split
	out=$(timeout 20 "$BENCH" cluster $opt 2>&1)
	rc=$?
	[ "$rc" = 2 ] || fail "cluster $opt: exit $rc, want 2: $out"
done

# the 2 + 1 cluster
step "a 2 + 1 cluster"
timeout 300 "$BENCH" cluster --n 2 --k 1 --ks 1 --size 1M --link 100mbit --iters 2 \
	--prefix "$P" --udpd "$UDPD" --json "$TMP/out.json" --quiet >"$TMP/out" 2>&1
rc=$?
cat "$TMP/out"
if [ "$rc" = 77 ]; then
	echo "SKIP: the cluster cannot be made here (above)"
	exit 77
fi
[ "$rc" = 0 ] || fail "sigma-bench cluster: exit $rc"
check_json() { # FILE WANT: the configurations, their sums, the shaped links, the models
	python3 - "$1" "$2" <<'EOF' || fail "the JSON (above)"
import json, sys
d = json.load(open(sys.argv[1]))
want = {(w.split(":")[0], int(w.split(":")[1]), w.split(":")[2]) for w in sys.argv[2].split()}
got = {(c["config"], c["k"], c["node"]) for c in d["configs"]}
bad = 0
if got != want:
    print("configs", got, "want", want); bad = 1
for c in d["configs"]:
    if not c["ok"] or c["time_s"] <= 0 or any(t <= 0 for t in c["runs_s"]):
        print("failed:", c); bad = 1
    # the links are shaped: nobody moves its bytes faster than they allow; a
    # tbf bucket holds 10 ms at the rate, so a link may get ahead by that much
    least = (c["model_s"] if c["config"] == "mpi" else c["bound_s"]) - 0.010
    if c["time_s"] < 0.95 * least:
        print("faster than the shaped links allow:", c); bad = 1
# 1 MiB at 100 Mbit/s: with n = 2 every placement's model is M/B = 83.9 ms (PS at k=1: 2 M/B)
m = {c["config"]: c["model_s"] for c in d["configs"]}
if abs(m["sigma"] - 0.0838861) > 1e-4 or abs(m["ps"] - 0.1677722) > 1e-4:
    print("model times", m); bad = 1
sys.exit(bad)
EOF
}
if [ -s "$TMP/out.json" ]; then
	check_json "$TMP/out.json" "mpi:-1:- sigma:1:sigma-udpd ps:1:sigma-udpd"
else
	fail "no JSON"
fi
step "checking what is left"
left "$P" "after a run"

# two ranks per GPU machine: they sum locally, so each machine's link carries
# one copy of M per iteration each way, as the model counts machines (at n = 2,
# M + (n-2)s = M whatever the placement). Counted by the kernel on the bridge's
# side of each veth, and by the nodes (the payload they summed: 2 machines x M
# per iteration), against M worked out here; L copies would be twice that.
step "a 2 + 1 cluster of 2 ranks per GPU machine"
P6=${P}l
timeout 300 "$BENCH" cluster --n 2 --local-ranks 2 --k 1 --ks 1 --size 1M --link 100mbit \
	--iters 3 --no-mpi --no-ps --prefix "$P6" --udpd "$UDPD" --json "$TMP/local.json" \
	--quiet >"$TMP/local" 2>&1
rc=$?
cat "$TMP/local"
[ "$rc" = 0 ] || fail "sigma-bench cluster --local-ranks 2: exit $rc"
if [ -s "$TMP/local.json" ]; then
	python3 - "$TMP/local.json" <<'EOF' || fail "--local-ranks 2: the JSON (above)"
import json, sys
d = json.load(open(sys.argv[1]))
M = 1 << 20
bad = 0
if d["local_ranks"] != 2 or [c["config"] for c in d["configs"]] != ["sigma"]:
    print("local_ranks, configs:", d["local_ranks"], d["configs"]); bad = 1
for c in d["configs"]:
    if not c["ok"] or c["time_s"] < 0.95 * (c["bound_s"] - 0.010):
        print("failed, or faster than the links allow:", c); bad = 1
    # the nodes' own count (job_list's bytes_pushed over the sub-jobs): every
    # machine's M once per iteration, exactly; 4 ranks pushing would be 4 M
    if c["node_pushed_bytes_per_iter"] != 2 * M:
        print("the nodes summed", c["node_pushed_bytes_per_iter"], "bytes per iteration, "
              "want", 2 * M); bad = 1
    gpu = [m for m in c["machines"] if m["name"].startswith("g")]
    if len(gpu) != 2:
        print("machines:", c["machines"]); bad = 1
    for m in gpu:
        # one copy and its headers (90 bytes a chunk of 8920), give or take the
        # 5 ms the bench samples the counters at: 2 copies would be 2 M
        for way in ("up_bytes_per_iter", "down_bytes_per_iter"):
            if not 0.9 * M <= m[way] <= 1.15 * M:
                print(f"{m['name']} {way}: {m[way]} bytes, want one copy of {M}"); bad = 1
        busier = max(m["up_bytes_per_iter"], m["down_bytes_per_iter"])
        if m["model_bytes_per_iter"] != M or abs(m["ratio_model"] - busier / M) > 1e-3:
            print("model:", m); bad = 1
sys.exit(bad)
EOF
else
	fail "--local-ranks 2: no JSON"
fi
left "$P6" "after --local-ranks 2"

# a local rank SIGKILLed mid-step: the run fails naming the dead worker (its
# machine's other rank waits at the local barrier, the parent ends them all)
# and leaves nothing behind
step "a local rank killed mid-step"
P7=${P}k
"$BENCH" cluster --n 2 --local-ranks 2 --k 1 --ks 1 --size 64M --link 100mbit --iters 5 \
	--no-mpi --no-ps --prefix "$P7" --udpd "$UDPD" >"$TMP/kill" 2>&1 &
bpid=$!
pushing "$TMP/kill" "$bpid"
# the workers are forks of sigma-bench; the nodes are sigma-udpds
victim=""
for c in $(pgrep -P "$bpid"); do
	[ "$(cat "/proc/$c/comm" 2>/dev/null)" = "$(cat "/proc/$bpid/comm")" ] && victim=$c
done
if [ -z "$victim" ]; then
	fail "no worker of the --local-ranks run to kill: $(cat "$TMP/kill")"
else
	kill -KILL "$victim"
fi
wait "$bpid"
rc=$?
[ "$rc" = 1 ] && grep -q 'worker [0-9]* died' "$TMP/kill" ||
	{ cat "$TMP/kill"; fail "a local rank killed: exit $rc, want 1 and 'worker N died'"; }
left "$P7" "after a local rank was killed"

# SIGINT mid-run: a larger model, interrupted once the workers push
step "SIGINT mid-run"
P2=${P}i
"$BENCH" cluster --n 2 --k 1 --ks 1 --size 64M --link 100mbit --iters 5 --no-mpi \
	--prefix "$P2" --udpd "$UDPD" >"$TMP/int" 2>&1 &
bpid=$!
pushing "$TMP/int" "$bpid"
kill -INT "$bpid"
wait "$bpid"
rc=$?
[ "$rc" = 1 ] && grep -q 'interrupted' "$TMP/int" || { cat "$TMP/int"; fail "SIGINT: exit $rc, want 1 and 'interrupted'"; }
left "$P2" "after SIGINT"

# nodes that cannot start: a clear failure, nothing left
step "nodes that cannot start"
P3=${P}f
timeout 120 "$BENCH" cluster --n 2 --k 1 --ks 1 --size 1M --no-mpi --prefix "$P3" \
	--udpd /bin/false >"$TMP/fail" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q 'did not start' "$TMP/fail" || { cat "$TMP/fail"; fail "bad node: exit $rc, want 1 and 'did not start'"; }
left "$P3" "after a failure"

# sigmad over AF_XDP on every machine
step "a 2 + 1 cluster of sigmads over AF_XDP"
P4=${P}x
if ! why=$(python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>&1); then
	echo "skipped: this kernel refuses AF_XDP sockets: ${why##*$'\n'}"
else
	# two runs: the sigmads start again for the second
	timeout 300 "$BENCH" cluster --n 2 --k 1 --ks 1 --size 1M --link 100mbit --iters 2 \
		--runs 2 --no-mpi --node sigmad --sigmad "$SIGMAD" --prefix "$P4" --json "$TMP/sd.json" \
		--quiet >"$TMP/sd" 2>&1
	rc=$?
	cat "$TMP/sd"
	if grep -q 'this kernel has no ifb' "$TMP/sd"; then
		echo "skipped --node sigmad's checks: no ifb to shape the uplinks with"
	else
		[ "$rc" = 0 ] || fail "sigma-bench cluster --node sigmad: exit $rc"
		grep -q 'MTU 3000' "$TMP/sd" || fail "--node sigmad: not at MTU 3000"
		if [ -s "$TMP/sd.json" ]; then
			check_json "$TMP/sd.json" "sigma:1:sigmad ps:1:sigmad"
		else
			fail "--node sigmad: no JSON"
		fi
	fi
	left "$P4" "after --node sigmad"
	ls -d /var/run/dpdk/"$P4"-* >/dev/null 2>&1 &&
		fail "--node sigmad: EAL folders left: $(ls -d /var/run/dpdk/"$P4"-*)"
	P5=${P}y
	timeout 120 "$BENCH" cluster --n 2 --k 1 --ks 1 --size 1M --no-mpi --node sigmad \
		--prefix "$P5" --sigmad /bin/false >"$TMP/sdfail" 2>&1
	rc=$?
	[ "$rc" = 1 ] && grep -q -e 'did not start' -e 'has no ifb' "$TMP/sdfail" ||
		{ cat "$TMP/sdfail"; fail "bad sigmad: exit $rc, want 1 and 'did not start'"; }
	left "$P5" "after sigmads that cannot start"
fi

# workers over net_af_xdp beside sigma-udpd nodes
step "a 2 + 1 cluster with workers over AF_XDP"
if ! why=$(python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>&1); then
	echo "skipped: this kernel refuses AF_XDP sockets: ${why##*$'\n'}"
else
	P8=${P}w
	timeout 300 "$BENCH" cluster --n 2 --k 1 --ks 1 --size 1M --link 100mbit --iters 2 \
		--runs 2 --no-mpi --worker af_xdp --udpd "$UDPD" --prefix "$P8" \
		--json "$TMP/wx.json" --quiet >"$TMP/wx" 2>&1
	rc=$?
	cat "$TMP/wx"
	if grep -q 'this kernel has no ifb' "$TMP/wx"; then
		echo "skipped --worker af_xdp's checks: no ifb to shape the uplinks with"
	else
		[ "$rc" = 0 ] || fail "sigma-bench cluster --worker af_xdp: exit $rc"
		grep -q 'workers: libsigma.s DPDK transport on net_af_xdp' "$TMP/wx" ||
			fail "--worker af_xdp: the table does not say so"
		if [ -s "$TMP/wx.json" ]; then
			check_json "$TMP/wx.json" "sigma:1:sigma-udpd ps:1:sigma-udpd"
			grep -q '"worker":"af_xdp"' "$TMP/wx.json" || fail "--worker af_xdp: JSON"
		else
			fail "--worker af_xdp: no JSON"
		fi
	fi
	left "$P8" "after --worker af_xdp"
	ls -d /var/run/dpdk/"$P8"-* >/dev/null 2>&1 &&
		fail "--worker af_xdp: EAL folders left: $(ls -d /var/run/dpdk/"$P8"-*)"

	# a worker SIGKILLed mid-step leaves its XDP program on eth0; the next
	# configuration's worker on that machine removes it as it starts
	step "a worker over AF_XDP killed mid-step"
	P9=${P}v
	"$BENCH" cluster --n 2 --k 1 --ks 1 --size 16M --link 100mbit --iters 3 --no-mpi \
		--worker af_xdp --udpd "$UDPD" --prefix "$P9" --json "$TMP/wk.json" \
		>"$TMP/wk" 2>&1 &
	bpid=$!
	pushing "$TMP/wk" "$bpid"
	for _ in $(seq 100); do
		ip -n "$P9-g0" link show dev eth0 2>/dev/null | grep -q 'prog/xdp' && break
		sleep 0.1
	done
	victim=""
	for c in $(ip netns pids "$P9-g0" 2>/dev/null); do
		[ "$(cat "/proc/$c/comm" 2>/dev/null)" = "$(cat "/proc/$bpid/comm")" ] && victim=$c
	done
	if [ -z "$victim" ] || ! ip -n "$P9-g0" link show dev eth0 | grep -q 'prog/xdp'; then
		fail "no worker over AF_XDP with its XDP program on $P9-g0 to kill: $(cat "$TMP/wk")"
		kill "$bpid" 2>/dev/null
	else
		kill -KILL "$victim"
	fi
	wait "$bpid"
	rc=$?
	[ "$rc" = 1 ] && grep -q 'worker [0-9]* died' "$TMP/wk" ||
		{ cat "$TMP/wk"; fail "a worker over AF_XDP killed: exit $rc, want 1, 'worker N died'"; }
	python3 - "$TMP/wk.json" <<'EOF' || { cat "$TMP/wk"; fail "after the kill: the PS (above)"; }
import json, sys
c = {x["config"]: x for x in json.load(open(sys.argv[1]))["configs"]}
sys.exit(0 if not c["sigma"]["ok"] and c["ps"]["ok"] else 1)
EOF
	left "$P9" "after a worker over AF_XDP was killed"
	ls -d /var/run/dpdk/"$P9"-* >/dev/null 2>&1 &&
		fail "killed worker over AF_XDP: EAL folders left: $(ls -d /var/run/dpdk/"$P9"-*)"
fi

step "done"
echo "bench_cluster: $([ $fails = 0 ] && echo passed || echo "$fails failed")"
[ $fails = 0 ]
