#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Everything the GPU issue's closing note needs, from a machine that has a
# GPU but neither DPDK nor the build's other libraries (a lent device machine
# is bare and offline), in two steps:
#
#   gpu/gpu-device-check.sh pack     here: build, then copy the two programs
#                                    and the shared libraries they load
#                                    (glibc aside) into build/gpu-carry/
#                                    (ignored by git, like all of build/)
#   gpu/gpu-device-check.sh run      there, from the repository root with
#                                    build/gpu-carry/ carried: test_gpu_cuda
#                                    (kernel correctness per dtype, plans,
#                                    staging), sigma-bench gpu (bandwidths
#                                    against bounds of the same run), then
#                                    compute-sanitizer memcheck over the test
#                                    if it is installed. Results go to
#                                    ${OUT:-build/gpu-carry/out}/gpu-result.json
#                                    (one JSON object per line) and logs.
#
# docs/gpu.md gives the device call.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${SIGMA_BUILD_DIR:-$ROOT/build}
CARRY=$BUILD/gpu-carry

pack() {
	ninja -C "$BUILD" tests/gpu/test_gpu_cuda bench/sigma-bench >/dev/null || exit 1
	rm -rf "$CARRY"
	mkdir -p "$CARRY/lib" || exit 1
	cp "$BUILD/tests/gpu/test_gpu_cuda" "$BUILD/bench/sigma-bench" "$CARRY/" || exit 1
	# The loader, libc and its parts come from the GPU machine (a newer glibc).
	ldd "$CARRY/test_gpu_cuda" "$CARRY/sigma-bench" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
		sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
		while read -r lib; do cp -L "$lib" "$CARRY/lib/" || exit 1; done || exit 1
	echo "packed $(du -sh "$CARRY" | cut -f1) into $CARRY"
}

run() {
	out=${OUT:-$CARRY/out}
	mkdir -p "$out"
	[ -x "$CARRY/test_gpu_cuda" ] || { echo "no $CARRY: run '$0 pack' first" >&2; exit 2; }
	export LD_LIBRARY_PATH="$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	result=$out/gpu-result.json
	: >"$result"
	nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max \
		--format=csv >"$out/nvidia-smi.csv" 2>&1
	"$CARRY/test_gpu_cuda" "$ROOT/gpu/topologies" >"$out/test_gpu_cuda.log" 2>&1
	trc=$?
	grep '^{"gpu_cuda_result"' "$out/test_gpu_cuda.log" >>"$result"
	echo "test_gpu_cuda: exit $trc (0 passed, 1 failed, 77 skipped)"
	tail -n 25 "$out/test_gpu_cuda.log"
	"$CARRY/sigma-bench" gpu --runs 7 >"$out/bench.json" 2>"$out/bench.log"
	brc=$?
	cat "$out/bench.json" >>"$result"
	echo "sigma-bench gpu: exit $brc"
	cat "$out/bench.log"
	if command -v compute-sanitizer >/dev/null 2>&1; then
		timeout 300 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
			"$CARRY/test_gpu_cuda" "$ROOT/gpu/topologies" >"$out/memcheck.log" 2>&1
		mrc=$?
		echo "compute-sanitizer memcheck: exit $mrc (0 clean, 9 errors, 124 timeout)"
		grep -E '^========= (ERROR SUMMARY|Invalid|Program hit)' "$out/memcheck.log" |
			head -n 20
		printf '{"memcheck_exit":%d}\n' "$mrc" >>"$result"
	fi
	echo "results: $result"
	cat "$result"
	[ "$trc" -eq 0 ] && [ "$brc" -eq 0 ]
}

case ${1:-} in
pack) pack ;;
run) run ;;
*)
	echo "usage: $0 pack|run" >&2
	exit 2
	;;
esac
