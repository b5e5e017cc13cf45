#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Every program's --version, the libraries' sonames and the Python package tell
# the versions the top meson.build states (passed here by meson): the release,
# the wire protocol, the control API and the soname.
# Usage: test_versions.sh RELEASE PROTO API SOVERSION LIBSIGMA LIBSIGMA_CONTROL PYSRC PROGRAM...
set -u
RELEASE=$1 PROTO=$2 API=$3 SOV=$4 LIBSIGMA=$5 LIBCTL=$6 PYSRC=$7
shift 7
fails=0
checks=0
ok() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*"; }

want2="wire protocol $PROTO, control API $API, libsigma.so.$SOV"
for prog in "$@"; do
	name=$(basename "$prog")
	out=$("$prog" --version 2>&1)
	rc=$?
	first=$(printf '%s\n' "$out" | sed -n 1p)
	second=$(printf '%s\n' "$out" | sed -n 2p)
	if [ "$rc" = 0 ] && [ "$first" = "$name (Sigma) $RELEASE" ] && [ "$second" = "$want2" ]; then
		ok
	else
		fail "$name --version: exit $rc:"; printf '%s\n' "$out" | sed 's/^/  | /'
	fi
done
for lib in "$LIBSIGMA" "$LIBCTL"; do
	base=$(basename "$lib")
	so=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	[ "$so" = "${base%%.so*}.so.$SOV" ] && ok || fail "$base: soname $so, want ${base%%.so*}.so.$SOV"
done
# the Debian packages' version (debian/changelog; a native package: no revision)
deb=$(sed -n '1s/^sigma (\([^)]*\)).*/\1/p' "$(dirname "$PYSRC")/debian/changelog")
[ "$deb" = "$RELEASE" ] && ok || fail "debian/changelog: version '$deb', want '$RELEASE'"
# the Python package from the tree, with this build's libsigma
if [ -x /usr/bin/python3 ] && [ -z "${SIGMA_NO_PYTHON:-}" ]; then
	got=$(SIGMA_LIBSIGMA=$LIBSIGMA PYTHONPATH=$PYSRC PYTHONDONTWRITEBYTECODE=1 \
		/usr/bin/python3 -c 'import sigma; print(sigma.__version__, sigma.library_version())' 2>&1)
	[ "$got" = "$RELEASE $RELEASE" ] && ok || fail "python: '$got', want '$RELEASE $RELEASE'"
fi
echo "versions: $checks checks, $fails failed"
[ "$fails" = 0 ]
