# SPDX-License-Identifier: BSD-3-Clause
#
# Shell helpers for scripts that run a sigmad beside workers
# (bench/sigmad_netns.sh, bench/sigmad_memif.sh, and the tests that use them).
# Source it.

# sigmad_base_ini IP [MTU] [LAYOUT]: the [net], [layout], [resources] and [live]
# sections of a sigmad at IP:9300 (MTU 1500 unless given; layout rtc = (0,0,1)
# unless given); append [job N] sections. Jumbo MTUs get fewer, larger mbufs.
sigmad_base_ini() {
	local mtu=${2:-1500} mbufs=16384
	[ "$mtu" -gt 1500 ] && mbufs=8192
	printf '[net]\nip = %s\nudp_port = 9300\nmtu = %s\n' "$1" "$mtu"
	printf '[layout]\nrtc = %s\n' "${3:-(0,0,1)}"
	printf '[resources]\nmbufs = %s\npool_bufs = 4096\n' "$mbufs"
	printf '[live]\nidle = sleep\nidle_sleep_us = 50\n'
}

# child_pid PID: the process id of a child of PID (read from /proc), or nothing.
child_pid() {
	local f st ppid
	for f in /proc/[0-9]*/stat; do
		st=$(cat "$f" 2>/dev/null) || continue
		# after the command name (which may hold spaces): state, then the parent
		read -r _ ppid _ <<<"${st##*) }"
		if [ "$ppid" = "$1" ]; then
			f=${f#/proc/}
			echo "${f%/stat}"
			return 0
		fi
	done
}

# sigmad_kill PID: SIGKILL the timeout(1) wrapper PID and the sigmad it runs; the
# wrapper does not pass a SIGKILL on, so killing it alone left sigmad running.
sigmad_kill() {
	local c
	c=$(child_pid "$1")
	kill -KILL "$1" $c 2>/dev/null
}

# sigmad_count SCRIPT WHAT VALUE: VALUE must be 1..8 (ports, lcores), else exit 2
sigmad_count() {
	if ! [ "$3" -ge 1 ] 2>/dev/null || [ "$3" -gt 8 ]; then
		echo "$1: $2 must be 1..8" >&2
		exit 2
	fi
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

# sigmad_stop PID OUT: SIGTERM, wait, print sigmad's final statistics, or its
# whole output when it failed (a sanitizer report is then not lost);
# returns sigmad's exit status.
sigmad_stop() {
	local rc=0
	kill -TERM "$1"
	wait "$1" || rc=$?
	if [ "$rc" = 0 ]; then
		sed -n '/final statistics/,$p' "$2" | sed 's/^/  | /'
	else
		sed 's/^/  | /' "$2"
	fi
	return $rc
}

# sigmad_started OUT PID: wait for sigmad; if it does not run, print why and
# return 77 (its EAL cannot start here) or 1.
sigmad_started() {
	sigmad_wait "$1" "$2" && return 0
	if grep -q 'EAL' "$1"; then
		echo "SKIP: sigmad's EAL cannot start here"
		cat "$1"
		return 77
	fi
	echo "FAIL: sigmad did not start"
	cat "$1"
	return 1
}

# sigmad_finish LABEL PID OUT RC: stop sigmad and print its final table under
# LABEL; returns RC (the command's status), or 1 if sigmad did not exit cleanly.
sigmad_finish() {
	local src=0 rc=$4
	echo "$1"
	sigmad_stop "$2" "$3" || src=$?
	if [ "$src" != 0 ]; then
		echo "FAIL: sigmad exit $src"
		[ "$rc" = 0 ] && rc=1
	fi
	return "$rc"
}
