#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The Debian packages (docs/deploy.md, "The Debian packages"), as an operator
# gets them: dpkg-buildpackage -b from a copy of the tree outside the source
# folder, lintian with no error (its warnings are printed), then the packages
# installed with dpkg into a fresh container-like root: an overlay whose lower
# layer is this machine's / (so the dependencies are there), in a private mount
# namespace, entered with chroot. There, from the installed files only: sigmad
# --version and --print-config (against the example config), the other
# programs' versions, the Python package imported and loading both libraries,
# a program built with pkg-config against libsigma-dev, the man pages, and
# systemd-analyze verify on the unit. Nothing on the host changes: the overlay
# and its mounts go with the namespace, and the test checks the host has no
# sigmad package or file afterwards.
# Usage: test_deb.sh SRCDIR VERSION
set -u
SRC=$1
VERSION=$2
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (an overlay in a private mount namespace, dpkg -i in a chroot)"
for t in dpkg-buildpackage dpkg-checkbuilddeps dh lintian unshare chroot; do
	command -v "$t" >/dev/null ||
		skip "no $t (apt-get install dpkg-dev debhelper dh-python lintian; ./sigma deps)"
done
if dpkg -s sigmad >/dev/null 2>&1 || [ -e /usr/sbin/sigmad ]; then
	skip "this machine has a sigmad package or /usr/sbin/sigmad installed already"
fi
TMP=$(mktemp -d /tmp/sg_deb.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0
checks=0
ok() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*"; }
t0=$(date +%s)

# A copy of the tree (what git tracks, or everything but build folders)
COPY=$TMP/sigma-$VERSION
mkdir -p "$COPY"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$SRC" && git ls-files -co --exclude-standard -z | xargs -0 cp -p --parents -t "$COPY")
else
	tar -C "$SRC" --exclude='./build*' --exclude='./obj-*' -cf - . | tar -C "$COPY" -xf -
fi
if ! (cd "$COPY" && dpkg-checkbuilddeps) >"$TMP/deps" 2>&1; then
	skip "build dependencies missing: $(cat "$TMP/deps") (./sigma deps)"
fi

echo "== dpkg-buildpackage -b"
if (cd "$COPY" && dpkg-buildpackage -b -us -uc) >"$TMP/build.log" 2>&1; then
	ok
else
	fail "dpkg-buildpackage"; tail -40 "$TMP/build.log"
	echo "deb: $checks checks, $fails failed"
	exit 1
fi
t1=$(date +%s)
DEBS=()
for p in sigmad libsigma0 libsigma-control0 libsigma-dev; do
	DEBS+=("$TMP/${p}_${VERSION}_amd64.deb")
done
DEBS+=("$TMP/python3-sigma_${VERSION}_all.deb")
for d in "${DEBS[@]}"; do [ -f "$d" ] && ok || fail "not built: $(basename "$d")"; done
# dependencies declared: shlibs, misc, python3
dpkg-deb -f "$TMP/sigmad_${VERSION}_amd64.deb" Depends | grep -q 'librte-eal23' && ok ||
	fail "sigmad: no shlibs dependencies"
dpkg-deb -f "$TMP/python3-sigma_${VERSION}_all.deb" Depends | grep -q 'python3' && ok ||
	fail "python3-sigma: no python3 dependency"

echo "== lintian"
lintian --fail-on error --display-info "$TMP"/sigma_"${VERSION}"_amd64.changes >"$TMP/lintian" 2>&1
rc=$?
grep -v 'running with root privileges' "$TMP/lintian" | sed 's/^/  lintian: /'
[ "$rc" = 0 ] && ! grep -q '^E: ' "$TMP/lintian" && ok || fail "lintian found errors (exit $rc)"
t2=$(date +%s)

echo "== dpkg -i into an overlay root"
ROOT=$TMP/root
mkdir -p "$TMP/upper" "$TMP/work" "$ROOT" "$TMP/debs"
cp "${DEBS[@]}" "$TMP/debs/"
cat >"$TMP/inside.sh" <<'IN'
# runs in the chroot: install, then check from the installed files only
set -u
V=$1
echo 'man-db man-db/auto-update boolean false' | debconf-set-selections
dpkg -i /debs/*.deb >/debs/dpkg.log 2>&1 || { echo "FAIL: dpkg -i"; cat /debs/dpkg.log; exit 1; }
for p in sigmad libsigma0 libsigma-control0 libsigma-dev python3-sigma; do
	echo "status $p $(dpkg-query -W -f='${db:Status-Status}' "$p")"
done
echo "owner $(dpkg -S /usr/sbin/sigmad)"
echo "sigmad-version $(/usr/sbin/sigmad --version | head -1)"
/usr/sbin/sigmad --print-config >/debs/conf && cmp -s /debs/conf /etc/sigma/sigmad.conf.example &&
	echo "print-config is the example"
for p in sigmactl sigma-udpd sigma-plan sigma-bench; do
	echo "version $p $(/usr/bin/$p --version | head -1)"
done
env -i PATH=/usr/sbin:/usr/bin /usr/bin/python3 -c '
import sigma, sigma._lib as L
L.libsigma(); L.libcontrol()
print("python", sigma.__version__, sigma.library_version())'
cat >/debs/v.c <<'C'
#include <stdio.h>
#include <string.h>
#include <sigma.h>
int main(void)
{
	printf("pkg-config program: libsigma %s, headers %s\n", sigma_version(), SG_VERSION_STRING);
	return strcmp(sigma_version(), SG_VERSION_STRING) != 0;
}
C
# shellcheck disable=SC2046
cc /debs/v.c -o /debs/v $(pkg-config --cflags --libs sigma) && /debs/v
echo "pc $(pkg-config --modversion sigma) $(pkg-config --modversion sigma-control)"
for m in sigmad sigmactl sigma-udpd sigma-plan sigma-bench; do echo "man $(man -w "$m")"; done
if command -v systemd-analyze >/dev/null; then
	systemd-analyze verify /lib/systemd/system/sigmad@.service >/debs/verify 2>&1
	echo "verify exit $? output $(wc -l </debs/verify) lines"
	cat /debs/verify
fi
IN
# The namespace's mounts (overlay, /dev, /proc, tmpfs) vanish when it exits.
unshare -m bash -c '
	set -e
	mount --make-rprivate /
	mount -t overlay overlay -o "lowerdir=/,upperdir=$1/upper,workdir=$1/work" "$1/root"
	mount --rbind /dev "$1/root/dev"
	mount -t proc proc "$1/root/proc"
	mount -t tmpfs tmpfs "$1/root/run"
	mount -t tmpfs tmpfs "$1/root/tmp"
	mkdir "$1/root/debs"
	mount --bind "$1/debs" "$1/root/debs"
	cp "$1/inside.sh" "$1/debs/"
	chroot "$1/root" /bin/bash /debs/inside.sh "$2"
' sh "$TMP" "$VERSION" >"$TMP/inside.out" 2>&1
sed 's/^/  root: /' "$TMP/inside.out"
has() { grep -qxF -- "$1" "$TMP/inside.out" && ok || fail "in the installed root: no '$1'"; }
for p in sigmad libsigma0 libsigma-control0 libsigma-dev python3-sigma; do has "status $p installed"; done
has "owner sigmad: /usr/sbin/sigmad"
has "sigmad-version sigmad (Sigma) $VERSION"
has "print-config is the example"
for p in sigmactl sigma-udpd sigma-plan sigma-bench; do has "version $p $p (Sigma) $VERSION"; done
has "python $VERSION $VERSION"
has "pkg-config program: libsigma $VERSION, headers $VERSION"
has "pc $VERSION $VERSION"
has "man /usr/share/man/man8/sigmad.8.gz"
for m in sigmactl sigma-udpd sigma-plan sigma-bench; do has "man /usr/share/man/man1/$m.1.gz"; done
if command -v systemd-analyze >/dev/null; then
	has "verify exit 0 output 0 lines"
else
	echo "deb: no systemd-analyze (package systemd): the installed unit is not verified"
fi
# the host is as it was
! dpkg -s sigmad >/dev/null 2>&1 && [ ! -e /usr/sbin/sigmad ] && ! mountpoint -q "$ROOT" && ok ||
	fail "the host changed: a sigmad package, /usr/sbin/sigmad or the overlay is left"
t3=$(date +%s)
echo "deb: build $((t1 - t0)) s, lintian $((t2 - t1)) s, install and checks $((t3 - t2)) s (load $(cut -d' ' -f1 /proc/loadavg))"
echo "deb: $checks checks, $fails failed"
[ "$fails" = 0 ]
