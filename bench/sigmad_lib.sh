# SPDX-License-Identifier: BSD-3-Clause
#
# Shell helpers for scripts that run a sigmad beside libsigma workers
# (bench/sigmad_netns.sh, tests/client/test_client_memif.sh). Source it.

# sigmad_base_ini IP: the [net], [layout], [resources] and [live] sections of a
# one-lcore sigmad at IP:9300 with a 1500-byte MTU; append [job N] sections.
sigmad_base_ini() {
	printf '[net]\nip = %s\nudp_port = 9300\nmtu = 1500\n' "$1"
	printf '[layout]\nrtc = (0,0,1)\n[resources]\nmbufs = 16384\npool_bufs = 4096\n'
	printf '[live]\nidle = sleep\nidle_sleep_us = 50\n'
}

# sigmad_wait OUT PID: wait up to 10 s for sigmad (output in OUT) to run.
sigmad_wait() {
	for _ in $(seq 100); do
		grep -q 'sigmad: running' "$1" && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	grep -q 'sigmad: running' "$1"
}

# sigmad_stop PID OUT: SIGTERM, wait, print sigmad's final statistics;
# returns sigmad's exit status.
sigmad_stop() {
	local rc=0
	kill -TERM "$1"
	wait "$1" || rc=$?
	sed -n '/final statistics/,$p' "$2" | sed 's/^/  | /'
	return $rc
}
