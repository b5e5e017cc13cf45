#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Build the dataplane libFuzzer target with clang and run it for a bounded
# time. Exit 77 (skipped) when clang or libFuzzer is missing.
#
# usage: run_fuzz.sh CLANG SRCDIR OUTDIR LIBSUM SECONDS GENDIR
# (GENDIR: the build's common/, which holds the generated sg_version.h)
set -eu
clang=$1 src=$2 out=$3 libsum=$4 secs=$5

if ! command -v "$clang" >/dev/null 2>&1; then
	echo "SKIP: clang not found (apt-get install clang libclang-rt-14-dev)"
	exit 77
fi
mkdir -p "$out/fuzz_corpus"
probe=$out/fuzz_probe.c
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' >"$probe"
if ! "$clang" -fsanitize=fuzzer "$probe" -o "$out/fuzz_probe" >/dev/null 2>&1; then
	echo "SKIP: $clang cannot link libFuzzer (apt-get install libclang-rt-14-dev)"
	exit 77
fi
# shellcheck disable=SC2046
"$clang" -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-I"$src/dataplane/engine" -I"$src/summation" -I"$src/common" -I"$6" \
	$(pkg-config --cflags libdpdk) \
	"$src/tests/dataplane/fuzz_dp.c" "$src/dataplane/engine/sg_dp_proto.c" \
	"$src/dataplane/engine/sg_dp_engine.c" "$src/common/sg_types.c" "$src/common/sg_auth.c" \
	"$libsum" $(pkg-config --libs libdpdk) $(pkg-config --libs libsodium) -lnuma -lm \
	-o "$out/fuzz_dp"
# A fixed seed keeps runs comparable; the corpus grows across runs. The
# inputs in fuzz_seeds/ (each once a failure) run first, in every run.
exec "$out/fuzz_dp" -seed=1 -max_total_time="$secs" -runs=2000000 -max_len=4096 \
	-print_final_stats=1 "$out/fuzz_corpus" "$src/tests/dataplane/fuzz_seeds"
