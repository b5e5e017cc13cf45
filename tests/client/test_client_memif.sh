#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# libsigma's DPDK transport against the real sigmad over net_memif, several
# workers at once: bench/sigmad_memif.sh gives sigmad 3 memif server ports
# (ids 0-2, one lcore each); client_workers opens the 3 memif clients and one
# session per port. ARP resolves sigmad's MAC on each port, then 6 partitions
# of 20 jumbo chunks (8920 bytes) go through 4 rounds, every sum checked.
# Then sigma-bench run forks 2 worker processes, each its own EAL and memif
# client, against the same sigmad: the path of sigma-bench compare --memif.
# The workers run again with steer_reducers = 3 (sigmad's reducers), 2 and 5 (keys
# sent to reducers that do not own them, or above the last reducer's port): the
# sums must not change.
# Nothing leaves the machine (shared memory), and sigmad_memif.sh must remove
# sigmad's EAL runtime directory when it ends. Skips (77) where EAL cannot start.
# Usage: test_client_memif.sh SIGMAD CLIENT_WORKERS SIGMAD_MEMIF_SH SIGMA_BENCH
set -u
SIGMAD=$1
WORKERS=$2
MEMIF=$3
BENCH=$4
TMP=$(mktemp -d)
# the workers' EAL runtime folders (client_workers ends with rte_eal_cleanup(),
# which leaves them; their prefixes end with this script's pid, SG_TEST_PID
# below); sigmad removes its own
trap 'rm -rf "$TMP" /var/run/dpdk/sg_cl_memif_*$$ "${XDG_RUNTIME_DIR:-/tmp}"/dpdk/sg_cl_memif_*$$' EXIT

cat >"$TMP/jobs.ini" <<'INI'
[job 9]
workers = 3
token = 0x99
keys = 6
partition_bytes = 178400
chunk_bytes = 8920
INI
# The bench's 2-worker sweep: its [job N] sections come from sigma-bench itself.
BOPTS=(--workers 2 --sizes 64K,4M --iters 2 --partition 2M --quiet)
"$BENCH" run "${BOPTS[@]}" --print-sigmad-config >>"$TMP/jobs.ini" || exit 1
# shellcheck disable=SC2016  # expanded by the inner shell, where sigmad_memif.sh sets them
SG_TEST_PID=$$ timeout 150 "$MEMIF" "$SIGMAD" "$TMP/jobs.ini" 3 sh -c '
	workers=$1 bench=$2 json=$3 rundir=$4
	shift 4
	# sigmad'"'"'s EAL runtime directory, which sigmad_memif.sh must remove when it ends
	echo "${SIGMA_TELEMETRY%/*}" >"$rundir"
	vdevs=""
	for i in 0 1 2; do
		vdevs="$vdevs --vdev=net_memif$i,role=client,id=$i,socket=$SIGMA_MEMIF,socket-abstract=no,bsize=9216"
	done
	SIGMA_LOCAL_IP=10.80.0.2 SIGMA_EAL="--no-huge --no-shconf --no-pci -m 512 --file-prefix=sg_cl_memif_c$SG_TEST_PID --lcores=0@(0-1) --log-level=lib.eal:error $vdevs" \
		timeout 60 "$workers" 10.80.0.1 9300 3 6 178400 8920 4 0x99 9 || exit $?
	# reducer steering: pushes to 9300 + 1 + reducer, sigmad having 3 reducers;
	# then with R = 2 and R = 5, so that many keys reach a reducer that does not
	# own them, or a port above the last reducer port (the job continues: rounds
	# 4-7, 8-11, then 12-15)
	first=4
	for steer in 3 2 5; do
		echo "steer_reducers = $steer:"
		SIGMA_FIRST_ROUND=$first SIGMA_STEER_REDUCERS=$steer SIGMA_LOCAL_IP=10.80.0.2 SIGMA_EAL="--no-huge --no-shconf --no-pci -m 512 --file-prefix=sg_cl_memif_s${steer}_$SG_TEST_PID --lcores=0@(0-1) --log-level=lib.eal:error $vdevs" \
			timeout 60 "$workers" 10.80.0.1 9300 3 6 178400 8920 4 0x99 9 || exit $?
		first=$((first + 4))
	done
	echo "sigma-bench run over memif, 2 worker processes:"
	timeout 60 "$bench" run "$@" --attach "$SIGMA_NODE" --memif "$SIGMA_MEMIF" --json "$json"
' sh "$WORKERS" "$BENCH" "$TMP/bench.json" "$TMP/rundir" "${BOPTS[@]}" >"$TMP/out" 2>&1
rc=$?
cat "$TMP/out"
[ "$rc" = 77 ] && exit 77
fails=0
[ "$rc" = 0 ] || { echo "FAIL: exit $rc"; fails=1; }
grep -q '"ok":false' "$TMP/bench.json" 2>/dev/null && { echo "FAIL: a bench point failed"; fails=1; }
grep -q '"transport":"dpdk"' "$TMP/bench.json" 2>/dev/null || { echo "FAIL: the bench did not use DPDK"; fails=1; }
rundir=$(cat "$TMP/rundir" 2>/dev/null)
if [ -z "$rundir" ]; then
	echo "FAIL: sigmad_memif.sh gave no SIGMA_TELEMETRY"; fails=1
elif [ -e "$rundir" ]; then
	echo "FAIL: sigmad_memif.sh left sigmad's EAL runtime directory $rundir"; fails=1
	rm -rf "$rundir"
fi
echo "client_memif: $([ $fails = 0 ] && echo passed || echo failed)"
exit $fails
