#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# expect_exit.sh CODE REGEX PROGRAM [ARGS...]
# Runs PROGRAM and passes only if it exits with exactly CODE and its output
# (stdout and stderr together) matches the extended REGEX. Unlike meson's
# should_fail, a crash, a hang killed by the timeout, or the wrong error does
# not count as a pass.
code=$1
regex=$2
shift 2
out=$("$@" 2>&1)
rc=$?
if [ "$rc" -ne "$code" ]; then
	printf 'FAIL: %s exited %d, expected %d\n%s\n' "$*" "$rc" "$code" "$out"
	exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
	printf 'FAIL: output of %s does not match /%s/:\n%s\n' "$*" "$regex" "$out"
	exit 1
fi
printf 'ok: exit %d, output matches /%s/\n' "$rc" "$regex"
exit 0
