#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run.sh [--full] [--keep] [DIR]: the README's promise on a minimal Debian 12.
# Makes a Debian 12 minbase root with debootstrap (once, kept in DIR/pristine;
# default /var/tmp/sigma-minbase), copies it to DIR/root, puts this tree's HEAD
# into it as a new user's clone would have it, and runs there, as root, in a private
# mount namespace (its /proc, /sys, /dev, /run and /tmp vanish with it):
#   1. ./sigma demo: it must pass with only the build packages installed;
#      reports the packages, megabytes and seconds it took;
#   2. ./sigma deps, then every program that Sigma's scripts, tests and
#      benchmarks run (tests/minbase/commands.py) must be found there: a
#      program missing from the package lists fails here;
#   3. with --full, ./sigma test: the whole suite, both builds, must pass.
# It ends with one JSON line of what each step took, and exits non-zero when a
# step failed. Needs root, debootstrap (installed if missing) and the Debian
# mirror. Run as: ./sigma minbase [--full]   (--full: about 40 minutes here).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
full=0 keep=0 DIR=/var/tmp/sigma-minbase
while [ "$#" -gt 0 ]; do
	case $1 in
	--full) full=1 ;;
	--keep) keep=1 ;;
	-h | --help) sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	*) DIR=$1 ;;
	esac
	shift
done
say() { printf 'minbase: %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || { say "needs root (debootstrap, chroot, mounts)"; exit 2; }
for t in unshare chroot mount; do
	command -v "$t" >/dev/null || { say "no $t (util-linux, mount)"; exit 2; }
done
mkdir -p "$DIR"
ROOTFS=$DIR/root
leftovers() {  # processes whose root is the copy: kill them, so nothing stays
	local p r
	for p in /proc/[0-9]*; do
		r=$(readlink "$p/root" 2>/dev/null) || continue
		[ "$r" = "$ROOTFS" ] && kill -KILL "${p#/proc/}" 2>/dev/null || true
	done
}
cleanup() {
	leftovers
	[ "$keep" = 1 ] || rm -rf --one-file-system "$ROOTFS"
}
trap cleanup EXIT

if [ ! -x "$DIR/pristine/bin/bash" ]; then
	if ! command -v debootstrap >/dev/null; then
		say "installing debootstrap"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
	fi
	say "debootstrap --variant=minbase bookworm $DIR/pristine"
	rm -rf "$DIR/pristine.new"
	debootstrap --variant=minbase bookworm "$DIR/pristine.new" >"$DIR/debootstrap.log" 2>&1 ||
		{ tail -20 "$DIR/debootstrap.log" >&2; say "debootstrap failed ($DIR/debootstrap.log)"; exit 1; }
	mv "$DIR/pristine.new" "$DIR/pristine"
fi
leftovers
rm -rf --one-file-system "$ROOTFS"
cp -a "$DIR/pristine" "$ROOTFS"
cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
# The apt sources as this machine has them (a mirror of its own, say).
if [ -d /etc/apt/sources.list.d ]; then
	cp -a /etc/apt/sources.list.d/. "$ROOTFS/etc/apt/sources.list.d/" 2>/dev/null || true
	[ -n "$(ls "$ROOTFS/etc/apt/sources.list.d")" ] && : >"$ROOTFS/etc/apt/sources.list"
fi
# The tree as a clone of HEAD has it (what is not committed is not checked).
mkdir -p "$ROOTFS/root/sigma"
git -C "$SRC" archive HEAD | tar -C "$ROOTFS/root/sigma" -xf -
say "checking $(git -C "$SRC" log -1 --format='%h %s' HEAD | cut -c1-70)"
[ -z "$(git -C "$SRC" status --porcelain --untracked-files=no)" ] ||
	say "note: uncommitted changes in $SRC are not part of the check"

cat >"$ROOTFS/root/steps.sh" <<'STEPS'
set -u
cd /root/sigma
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
size() { dpkg-query -W -f='${Installed-Size}\n' | awk '{ s += $1; n++ } END { print n, s }'; }
read -r n0 kb0 < <(size)
t0=$(date +%s)
./sigma demo >/root/demo.log 2>&1
echo "step demo rc $? s $(($(date +%s) - t0))"
read -r n1 kb1 < <(size)
echo "step demo_packages n $((n1 - n0)) disk_mb $(((kb1 - kb0) / 1024))"
grep -E '^sigma: installed|sigmad demo|^sigma: built' /root/demo.log | sed 's/^/  demo: /'
t0=$(date +%s)
./sigma deps >/root/deps.log 2>&1
echo "step deps rc $? s $(($(date +%s) - t0))"
sed 's/^/  deps: /' /root/deps.log
miss=0
while read -r c; do
	case $c in
	/*) [ -x "$c" ] && continue ;;
	*) command -v "$c" >/dev/null && continue ;;
	esac
	echo "  missing program: $c"
	miss=$((miss + 1))
done </root/commands
echo "step commands rc $miss n $(grep -c . /root/commands)"
if [ "${FULL:-0}" = 1 ]; then
	t0=$(date +%s)
	./sigma test >/root/test.log 2>&1
	echo "step test rc $? s $(($(date +%s) - t0))"
	tail -1 /root/test.log | sed 's/^/  test: /'
	grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT)' /root/test.log | sed 's/^/  test: /'
fi
STEPS
python3 "$SRC/tests/minbase/commands.py" "$SRC" >"$ROOTFS/root/commands"

say "running in $ROOTFS (demo, deps, programs$([ "$full" = 1 ] && echo ", test"))"
out=$DIR/steps.out
FULL=$full unshare -m bash -c '
	set -e
	mount --make-rprivate /
	# the root a mount point of its own: ip netns exec remounts / (make-rslave)
	mount --bind "$1" "$1"
	mount -t proc proc "$1/proc"
	mount -t sysfs sysfs "$1/sys"
	mount --rbind /dev "$1/dev"
	mount -t tmpfs -o size=8g tmpfs "$1/dev/shm"
	mount -t tmpfs tmpfs "$1/run"
	mount -t tmpfs -o size=8g tmpfs "$1/tmp"
	chroot "$1" /bin/bash /root/steps.sh
' sh "$ROOTFS" 2>&1 | tee "$out" >&2
[ "$keep" = 1 ] && say "kept $ROOTFS (logs in /root of it)"
awk '
	/^step / { for (i = 3; i < NF; i += 2) v[$2 "_" $i] = $(i + 1) }
	END {
		bad = (v["demo_rc"] != 0) + (v["deps_rc"] != 0) + (v["commands_rc"] != 0) + \
		      ("test_rc" in v && v["test_rc"] != 0)
		printf "{\"demo_rc\": %s, \"demo_s\": %s, \"demo_packages\": %s, \"demo_disk_mb\": %s, " \
		       "\"deps_rc\": %s, \"deps_s\": %s, \"missing_programs\": %s, \"programs\": %s", \
		       v["demo_rc"], v["demo_s"], v["demo_packages_n"], \
		       v["demo_packages_disk_mb"], v["deps_rc"], v["deps_s"], v["commands_rc"], v["commands_n"]
		if ("test_rc" in v) printf ", \"test_rc\": %s, \"test_s\": %s", v["test_rc"], v["test_s"]
		printf "}\n"
		exit bad != 0
	}' "$out"
