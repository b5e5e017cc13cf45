#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# libsigma as a user gets it: `meson install` into a DESTDIR, then two small
# programs built outside the tree with nothing but pkg-config: one creates a
# job on a sigma-udpd node through the job service of libsigma-control, the
# other (linked to libsigma.so, and once more to libsigma.a) opens the job from
# the descriptor, push_pulls a tensor from 3 ranks and checks every element of
# the sum. Also checked: the sonames carry the major version, the shared
# libraries export their public API and nothing else, the worker program needs
# neither jansson nor libsodium, and the installed headers include only each
# other. The Python package is checked as installed too: on the interpreter's
# path, loading both libraries and finding sigma-udpd from where meson put
# them, with no environment pointing there, summing through a node.
# The appliance's layout too (docs/deploy.md): sigmad in sbin, the other
# programs in bin, a man page of each (MAN=yes, made by help2man), the example
# config in etc/sigma (what the installed sigmad prints), every doc, and what
# sigma-bench compare and cluster run from share/sigma, and sigmad's systemd
# unit (UNIT=yes): what it runs and reads, and `systemd-analyze verify`.
# Usage: test_install.sh BUILD_DIR CC SANITIZERS MAN(yes|no) UNIT(yes|no)
set -u
BUILD=$1
CC=$2
SAN=$3
MAN=${4:-no}
UNIT=${5:-no}
TMP=$(mktemp -d /tmp/sg_install.XXXXXX)
DEST=$TMP/dest
PIDS=()
fails=0
checks=0
trap cleanup_pids EXIT
# shellcheck source=../dataplane/expect_lib.sh
. "$(dirname "$0")/../dataplane/expect_lib.sh"

if ! meson install -C "$BUILD" --destdir "$DEST" --no-rebuild --quiet >"$TMP/install.log" 2>&1; then
	echo "FAIL: meson install"; cat "$TMP/install.log"
	exit 1
fi
PC=$(find "$DEST" -name sigma.pc | head -1)
LIBDIR=$(dirname "$(dirname "$PC")")
BIN=$(dirname "$(find "$DEST" -name sigmactl -type f | head -1)")
export PKG_CONFIG_PATH=$(dirname "$PC")
export PKG_CONFIG_SYSROOT_DIR=$DEST
export LD_LIBRARY_PATH=$LIBDIR
SANFLAGS=()
[ "$SAN" != none ] && [ -n "$SAN" ] && SANFLAGS=(-fsanitize="$SAN" -fno-omit-frame-pointer)

# The appliance's layout (prefix /usr/local).
P=$DEST/usr/local
for f in sbin/sigmad bin/sigmactl bin/sigma-udpd bin/sigma-plan bin/sigma-bench; do
	[ -x "$P/$f" ] && ok || fail "not installed: $f"
done
[ ! -e "$P/bin/sigmad" ] && ok || fail "sigmad is in bin, not (only) sbin"
if [ "$MAN" = yes ]; then
	for f in man8/sigmad.8 man1/sigmactl.1 man1/sigma-udpd.1 man1/sigma-plan.1 \
		man1/sigma-bench.1; do
		grep -q '^\.TH ' "$P/share/man/$f" 2>/dev/null && ok || fail "no man page $f"
	done
fi
if ASAN_OPTIONS=detect_leaks=0 "$P/sbin/sigmad" --print-config >"$TMP/conf" &&
	cmp -s "$TMP/conf" "$P/etc/sigma/sigmad.conf.example"; then
	ok
else
	fail "etc/sigma/sigmad.conf.example is not what sigmad --print-config prints"
fi
for f in "$(dirname "$0")"/../../docs/*.md; do
	[ -f "$P/share/doc/sigma/$(basename "$f")" ] && ok || fail "doc not installed: $f"
done
for f in bench/mpi_allreduce.c bench/cluster_net.sh bench/cluster_rsh.sh; do
	[ -f "$P/share/sigma/$f" ] && ok || fail "not installed: share/sigma/$f"
done
if [ "$UNIT" = yes ]; then
	U=$P/lib/systemd/system/sigmad@.service
	for want in 'Type=notify' \
		'ExecStart=/usr/local/sbin/sigmad $SIGMAD_EAL -- --config /usr/local/etc/sigma/%i.conf' \
		'ExecReload=/bin/kill -HUP $MAINPID' 'LimitMEMLOCK=infinity' 'Restart=on-failure' \
		'EnvironmentFile=-/usr/local/etc/sigma/%i.env' 'RuntimeDirectory=sigma'; do
		grep -qxF -- "$want" "$U" 2>/dev/null && ok || fail "sigmad@.service lacks '$want'"
	done
	if command -v systemd-analyze >/dev/null; then
		# verify checks that ExecStart's program exists and that man finds the
		# Documentation= page: point both at the DESTDIR
		mkdir -p "$TMP/unit"
		sed "s|=/usr/local/sbin/sigmad |=$P/sbin/sigmad |" "$U" >"$TMP/unit/sigmad@.service"
		if (cd "$TMP/unit" && MANPATH=$P/share/man systemd-analyze verify ./sigmad@.service) \
			>"$TMP/verify" 2>&1 && ! grep -q . "$TMP/verify"; then
			ok
		else
			fail "systemd-analyze verify sigmad@.service:"; sed 's/^/  | /' "$TMP/verify"
		fi
	else
		echo "install: no systemd-analyze (package systemd): the unit is not verified"
	fi
fi

# What is installed, and how it is named.
for f in libsigma.so.0 libsigma.so libsigma.a libsigma-control.so.0 libsigma-control.so \
	pkgconfig/sigma.pc pkgconfig/sigma-control.pc; do
	[ -e "$LIBDIR/$f" ] && ok || fail "not installed: $f"
done
for f in sigma.h sigma_local.h sg_types.h sg_version.h sg_ctl_client.h; do
	[ -e "$DEST/usr/local/include/sigma/$f" ] && ok || fail "header not installed: $f"
done
for lib in sigma sigma-control; do
	readelf -d "$LIBDIR/lib$lib.so" | grep -q "SONAME.*\[lib$lib.so.0\]" && ok ||
		fail "lib$lib.so: soname is not lib$lib.so.0"
done
# the installed headers include the C library and each other, nothing of the tree
if grep -h '#include "' "$DEST"/usr/local/include/sigma/*.h | grep -v '"sg_types.h"\|"sg_version.h"\|"sigma.h"'; then
	fail "an installed header includes a header that is not installed"
else
	ok
fi
# exported: exactly the public API (the version scripts' lists)
exports() {
	nm -D --defined-only "$1" | awk '$2 == "T" || $2 == "D" || $2 == "B" {sub(/@.*/, "", $3); print $3}' | sort
}
wanted() {
	sed -n 's/^[[:space:]]*\([a-z_][a-z_0-9]*\);$/\1/p' "$1" | sort
}
SRC=$(dirname "$0")/../..
for pair in "libsigma.so.0 client/libsigma.map" "libsigma-control.so.0 control/libsigma-control.map"; do
	set -- $pair
	if diff <(exports "$LIBDIR/$1") <(wanted "$SRC/$2") >"$TMP/diff"; then
		ok
	else
		fail "$1 exports other symbols than its map:"; cat "$TMP/diff"
	fi
done
# pkg-config says nothing of jansson or libsodium for a worker
case "$(pkg-config --cflags --libs sigma)" in
*jansson* | *sodium* | *dpdk*) fail "pkg-config sigma: $(pkg-config --cflags --libs sigma)" ;;
*) ok ;;
esac

cat >"$TMP/create.c" <<'C'
/* Create a job of one tensor on the nodes given, print its descriptor. */
#include <stdio.h>
#include <stdlib.h>
#include <sg_ctl_client.h>

int main(int argc, char **argv)
{
	struct sg_ctl_jobsvc_node nodes[8] = {{0}};
	struct sg_ctl_tensor t = {.name = "grad", .elems = (uint64_t)atoll(argv[1])};
	struct sg_ctl_job_spec spec = {.workers = 3, .tensors = &t, .n_tensors = 1,
				       .partition_bytes = 65536};
	struct sg_ctl_jobsvc svc = {.nodes = nodes};
	static char desc[16384];
	char err[512];

	for (int i = 2; i < argc && i < 10; i++)
		nodes[svc.n_nodes++].target = argv[i];
	if (sg_ctl_job_service_create(&svc, &spec, desc, sizeof(desc), err, sizeof(err)) < 0) {
		fprintf(stderr, "create: %s\n", err);
		return 1;
	}
	puts(desc);
	return 0;
}
C
cat >"$TMP/push.c" <<'C'
/* 3 ranks of the job in argv[1] push_pull one tensor of argv[2] floats from round argv[3]
 * (default 0); the sum is checked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sigma.h>
#include <sigma_local.h>

int main(int argc, char **argv)
{
	uint64_t n = (uint64_t)atoll(argv[2]), bad = 0;
	int failed = 0;
	struct sigma_conf base = {.first_round = argc > 3 ? (uint32_t)atoi(argv[3]) : 0};
	struct sigma_session *s[3];
	struct sigma_tensor *t[3];
	float *in[3], *out[3];
	char err[512];
	int busy;

	/* sigma_local.h is installed and its functions exported */
	if (sigma_local_open(NULL, NULL, err, sizeof(err)) != NULL || errno != EINVAL) {
		fprintf(stderr, "sigma_local_open(NULL) did not refuse\n");
		return 1;
	}
	sigma_local_close(NULL);
	/* the library that runs is the one whose headers this was compiled with */
	if (strcmp(sigma_version(), SG_VERSION_STRING) != 0 || SG_PROTO_VERSION < 1) {
		fprintf(stderr, "libsigma %s, headers %s\n", sigma_version(), SG_VERSION_STRING);
		return 1;
	}
	for (int r = 0; r < 3; r++) {
		s[r] = sigma_open_job(argv[1], (uint16_t)r, &base, err, sizeof(err));
		if (s[r] == NULL) {
			fprintf(stderr, "open: %s\n", err);
			return 1;
		}
		t[r] = sigma_tensor_register(s[r], "grad", 0, SG_DTYPE_FP32, n, 0);
		in[r] = malloc(n * sizeof(float));
		out[r] = malloc(n * sizeof(float));
		for (uint64_t i = 0; i < n; i++)
			in[r][i] = (float)(r * 100 + i % 1000);
		sigma_push_pull(t[r], in[r], out[r], NULL, NULL);
	}
	do {
		busy = 0;
		for (int r = 0; r < 3; r++) {
			sigma_poll(s[r], 200);
			busy += sigma_test(t[r]) == -EINPROGRESS;
		}
	} while (busy);
	for (int r = 0; r < 3; r++) {
		if (sigma_test(t[r]) != 0) {
			fprintf(stderr, "rank %d: %s\n", r, sigma_last_error(s[r]));
			failed = 1;
		}
		for (uint64_t i = 0; i < n && !failed; i++)
			bad += out[r][i] != (float)(300 + 3 * (i % 1000));
		free(in[r]);
		free(out[r]);
		sigma_close(s[r]);
	}
	if (failed)
		return 1;
	printf("external worker (%s): %llu elements, %llu wrong\n", sg_dtype_name(SG_DTYPE_FP32),
	       (unsigned long long)(3 * n), (unsigned long long)bad);
	return bad != 0;
}
C
build() { # build NAME COMMAND...
	local name=$1
	shift
	if "$@" >"$TMP/cc.log" 2>&1; then ok; else fail "$name: $*"; sed 's/^/  | /' "$TMP/cc.log"; fi
}
# shellcheck disable=SC2046
build create "$CC" "${SANFLAGS[@]}" "$TMP/create.c" -o "$TMP/create" \
	$(pkg-config --cflags --libs sigma-control)
# shellcheck disable=SC2046
build push "$CC" "${SANFLAGS[@]}" "$TMP/push.c" -o "$TMP/push" $(pkg-config --cflags --libs sigma)
# shellcheck disable=SC2046
build push-static "$CC" "${SANFLAGS[@]}" "$TMP/push.c" -o "$TMP/push_static" \
	$(pkg-config --cflags sigma) $(pkg-config --static --libs sigma | sed 's/-lsigma /-l:libsigma.a /')
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' '; }
case "$(needed "$TMP/push")" in
*libsigma.so.0*) case "$(needed "$TMP/push")" in *jansson* | *sodium*) fail "push needs: $(needed "$TMP/push")" ;; *) ok ;; esac ;;
*) fail "push does not load libsigma.so.0: $(needed "$TMP/push")" ;;
esac
case "$(needed "$TMP/push_static")" in
*libsigma*) fail "push_static loads libsigma: $(needed "$TMP/push_static")" ;;
*) ok ;;
esac

# A node (the installed sigma-udpd), a job on it, and the workers.
"$BIN/sigma-udpd" --port 0 --name inst-node --unix "$TMP/n.sock" >"$TMP/node.log" 2>&1 &
NPID=$!
PIDS=("$NPID")
for _ in $(seq 100); do
	grep -q 'sigma-udpd: node' "$TMP/node.log" && break
	sleep 0.05
done
expect create 0 'sigma-job=1;' -- "$TMP/create" 100000 "unix:$TMP/n.sock"
DESC=$(grep '^sigma-job=' "$TMP/out")
expect push 0 '300000 elements, 0 wrong' -- "$TMP/push" "$DESC" 100000
expect push-static 0 '300000 elements, 0 wrong' -- "$TMP/push_static" "$DESC" 100000 1
# a third run from round 0 is behind the job: told so by the node, through the installed library
expect push-again 1 'first_round = 2' -- "$TMP/push" "$DESC" 100000

# The Python package as installed: where Debian's python3 looks (for /usr/local:
# lib/python3.X/dist-packages), finding both libraries and sigma-udpd from
# what meson recorded next to it, with nothing in the environment pointing at
# them; a job made through libsigma-control, 3 sessions summing a buffer.
PY=/usr/bin/python3
if [ -x "$PY" ]; then
	PYPKG=$(dirname "$(find "$DEST" -path '*/sigma/_config.py' | head -1)")
	PYDIR=$(dirname "$PYPKG")
	# without the DESTDIR, the folder is on the interpreter's own path
	if "$PY" -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "${PYDIR#"$DEST"}"; then
		ok
	else
		fail "the package went to ${PYDIR#"$DEST"}, not on $PY's sys.path"
	fi
	PYENV=(env -u SIGMA_BUILD_DIR -u SIGMA_LIB_DIR -u LD_LIBRARY_PATH PYTHONPATH="$PYDIR"
		PYTHONDONTWRITEBYTECODE=1)
	if [ "$SAN" != none ] && [ -n "$SAN" ]; then
		# an instrumented libsigma.so needs the sanitizer runtimes loaded first
		PYENV+=(LD_PRELOAD="$("$CC" -print-file-name=libasan.so) $("$CC" -print-file-name=libubsan.so)"
			ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
	fi
	cat >"$TMP/py_push.py" <<'PY'
import array, sys
import sigma, sigma._lib as L
from sigma.localnodes import find_program
dest = sys.argv[2]
for path in (L.libsigma()._name, L.libcontrol()._name, find_program("sigma-udpd", "X", "x")):
    assert path.startswith(dest), f"{path} is not the installed one (under {dest})"
job = sigma.create_job([sys.argv[1]], 3, tensors=[("g", 100000)], partition_bytes=65536)
ss = [sigma.Session(job, r) for r in range(3)]
bufs = [array.array("f", [float(r * 100 + i % 1000) for i in range(100000)]) for r in range(3)]
for h in [s.push_pull(b, name="g") for s, b in zip(ss, bufs)]:
    h.wait(30)
bad = sum(b[i] != 300 + 3 * (i % 1000) for b in bufs for i in range(100000))
for s in ss:
    s.close()
sigma.destroy_job([sys.argv[1]], job.id)
print(f"installed python package: job {job.id}, {3 * 100000} elements, {bad} wrong")
PY
	expect python 0 '300000 elements, 0 wrong' -- "${PYENV[@]}" "$PY" "$TMP/py_push.py" \
		"unix:$TMP/n.sock" "$DEST"
	# sigmarun finds the package installed beside it, with no PYTHONPATH
	expect sigmarun 0 'sigmarun ' -- env -u PYTHONPATH -u SIGMA_BUILD_DIR \
		"$P/bin/sigmarun" --version
	if "$PY" -c 'import torch' 2>/dev/null; then
		# sigma.torch as installed: the installed launcher starts the installed
		# sigma-udpd, rank 0 makes the job, both ranks sum a tensor
		cat >"$TMP/py_torch.py" <<'PY'
import torch, torch.distributed as dist, sigma.torch as sgt
dist.init_process_group("gloo")
sgt.init()
r = sgt.rank()
y = sgt.push_pull(torch.arange(1000, dtype=torch.float32) + r, average=False, name="t")
ok = torch.equal(y, 2 * torch.arange(1000, dtype=torch.float32) + 1)
print(f"installed sigma.torch: rank {r} of {sgt.size()}: sum {'right' if ok else 'WRONG'}")
sgt.shutdown()
assert ok, "the sum is wrong"
PY
		# (two imports of torch: a minute each on a loaded 2-core machine)
		EXPECT_TIMEOUT=180 expect python-torch 0 'rank 1 of 2: sum right' -- "${PYENV[@]}" \
			"$PY" -m sigma.launch -n 2 --local-nodes 1 "$TMP/py_torch.py"
	fi
else
	echo "install: no $PY: the Python package is not checked"
fi
kill -TERM "$NPID"
wait "$NPID" || fail "sigma-udpd exit $?"
PIDS=()
echo "install: $checks checks, $fails failed"
[ "$fails" = 0 ]
