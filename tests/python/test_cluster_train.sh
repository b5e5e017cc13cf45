#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/cluster_train.py on a 2 + 1 cluster (two GPU machines, one CPU machine,
# links shaped to 1 Gbit/s): 3 steps of a small model with DDP over gloo, DDP
# through Sigma (k = 1), DistributedOptimizer and a PS; every Sigma
# configuration's parameters must equal gloo's (bitwise for DDP at 2 ranks),
# and in the deterministic check, bitwise the rank-order reference's.
# Then: a parameter moved on purpose (SIGMA_TRAIN_PERTURB), in the timed run or
# in the check alone, must fail the run;
# SIGINT mid-run fails it; a bad model, an impossible k and a missing torch
# each exit 2 with a clear error before anything is made. After each, no
# namespace or process of the run is left. Skips (77) without root, torch or
# network namespaces.
# Usage: test_cluster_train.sh SRCDIR
set -u
SRC=$1
DRIVER=$SRC/bench/cluster_train.py
PY=/usr/bin/python3
P=sgtt$$
TMP=$(mktemp -d /tmp/sg_train.XXXXXX)
fails=0
cleanup() {  # what a failed run may have left: each prefix's namespaces and processes
	local p
	for p in "$P" "${P}b" "${P}c" "${P}d"; do
		"$SRC/bench/cluster_net.sh" down "$p"
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, tc)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "no ip(8) or tc(8) (iproute2)"
"$PY" -c 'import torch' 2>/dev/null || skip "no torch (python3-torch)"
if ! err=$(ip netns add "$P-probe" 2>&1); then
	skip "cannot create a network namespace: $err"
fi
ip netns del "$P-probe"

# left PREFIX LABEL: no namespace of the run, no process in one
left() {
	if ip netns list | awk '{print $1}' | grep -q "^$1-"; then
		fail "$2: namespaces left: $(ip netns list | grep "^$1-" | xargs)"
	fi
	# pgrep without the sanitizer build's preloaded runtimes: with them it hangs
	if env -u LD_PRELOAD pgrep -f "cluster_train.py --rank-main" >/dev/null 2>&1 ||
		env -u LD_PRELOAD pgrep -f "sigma-train-.*/[gc][0-9]*.sock" >/dev/null 2>&1; then
		fail "$2: processes left: $(env -u LD_PRELOAD pgrep -af 'rank-main|sigma-train-' |
			head -3)"
	fi
}

BASE=(--model tiny --n 2 --k 1 --ks 1 --steps 3 --warmup 1 --runs 1 --link 1gbit --timeout 90)
echo "== gloo, sigma k=1, opt, ps: parameters against gloo's"
rc=0
"$PY" "$DRIVER" "${BASE[@]}" --prefix "$P" --json "$TMP/t.json" >"$TMP/out" 2>&1 || rc=$?
sed 's/^/  | /' "$TMP/out" | grep -v '^  | *[{}"]' | head -20
if [ "$rc" -ne 0 ]; then
	fail "the run exited $rc"
else
	"$PY" - "$TMP/t.json" <<'PY' || fail "the JSON"
import json, sys
r = json.load(open(sys.argv[1]))
bad = []
want = {"sigma1": True, "ps1": True, "opt1": False}
for t, bitwise in want.items():
    p = r["configs"].get(t, {}).get("params")
    if (not p or not p["equal_to_gloo"] or p["bitwise"] != bitwise
            or p.get("deterministic_bitwise") is not True):
        bad.append(f"{t}: {p}")
    if r["configs"].get(t, {}).get("samples_per_s", 0) <= 0:
        bad.append(f"{t}: no samples/s")
for t in ("gloo", "compute"):
    if r["configs"][t]["step_s"] <= 0:
        bad.append(f"{t}: no step time")
if not r["params_ok"] or r["grad_bytes"] != 4 * (96 * 2048 + 2048 + 2048 * 32 + 32):
    bad.append(f"params_ok {r['params_ok']}, grad_bytes {r['grad_bytes']}")
print("\n".join(bad) if bad else "every configuration's parameters equal gloo's")
sys.exit(1 if bad else 0)
PY
fi
left "$P" "the run"

echo "== a parameter moved on purpose fails the run"
rc=0
SIGMA_TRAIN_PERTURB=sigma1 "$PY" "$DRIVER" "${BASE[@]}" --configs gloo,sigma --prefix "${P}b" \
	--json "$TMP/p.json" >"$TMP/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "perturbed: exit $rc, expected 1"
grep -q "sigma1 .*WRONG" "$TMP/out" || fail "perturbed: the table does not say WRONG"
grep -q "parameters differ from gloo's" "$TMP/out" || fail "perturbed: no failure line"
left "${P}b" "perturbed"

echo "== a parameter moved in the deterministic check alone fails the run"
rc=0
SIGMA_TRAIN_PERTURB=sigma1-check "$PY" "$DRIVER" "${BASE[@]}" --configs gloo,sigma \
	--check-steps 2 --prefix "${P}e" >"$TMP/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "check perturbed: exit $rc, expected 1"
grep -q "sigma1 .*bitwise, det. WRONG" "$TMP/out" ||
	{ fail "check perturbed: the table does not say det. WRONG"; cat "$TMP/out"; }
left "${P}e" "check perturbed"

echo "== SIGINT mid-run"
"$PY" "$DRIVER" "${BASE[@]}" --steps 5000 --prefix "${P}c" >"$TMP/int" 2>&1 &
pid=$!
for _ in $(seq 300); do  # the cluster is up and the first ranks are training
	grep -q "train: tiny:" "$TMP/int" && break
	sleep 0.1
done
sleep 8
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" = 1 ] || { fail "SIGINT: exit $rc, expected 1"; tail -5 "$TMP/int"; }
grep -q "interrupted" "$TMP/int" || fail "SIGINT: it does not say interrupted"
left "${P}c" "SIGINT"

echo "== bad arguments: a clear error, exit 2, nothing made"
check2() {  # LABEL PATTERN ARGS...: exit 2 and PATTERN on stderr
	local label=$1 pat=$2 rc=0
	shift 2
	"$@" >"$TMP/bad" 2>&1 || rc=$?
	[ "$rc" = 2 ] || fail "$label: exit $rc, expected 2"
	grep -q -- "$pat" "$TMP/bad" || { fail "$label: no '$pat'"; cat "$TMP/bad"; }
}
check2 "bad model" "--model 'nope': one of resnet50, vgg16, bert-base, tiny" \
	"$PY" "$DRIVER" --model nope --prefix "${P}d"
check2 "impossible k" "--ks \[99\]: each k is 0..16" \
	"$PY" "$DRIVER" --model tiny --ks 99 --prefix "${P}d"
check2 "ps without CPU machines" "--k 0: a parameter server" \
	"$PY" "$DRIVER" --model tiny --k 0 --prefix "${P}d"
check2 "bad link rate" "--link 'fast': want a rate" \
	"$PY" "$DRIVER" --model tiny --link fast --prefix "${P}d"
check2 "a batch ResNet-50 cannot train on" "ResNet-50's last BatchNorm would see one value" \
	"$PY" "$DRIVER" --model resnet50 --batch 1 --input 32 --prefix "${P}d"
check2 "no ranks per machine" "--local-ranks 0: 1..8 ranks per GPU machine" \
	"$PY" "$DRIVER" --model tiny --local-ranks 0 --prefix "${P}d"
check2 "a negative window" "--window -1: 0..4096 chunks" \
	"$PY" "$DRIVER" --model tiny --window -1 --prefix "${P}d"
check2 "negative check steps" "--check-steps -1: at least 0" \
	"$PY" "$DRIVER" --model tiny --check-steps -1 --prefix "${P}d"
mkdir -p "$TMP/fake/torch"
echo 'raise ImportError("no torch in this test")' >"$TMP/fake/torch/__init__.py"
check2 "no torch" "tiny needs torch, which does not import here" \
	env PYTHONPATH="$TMP/fake" "$PY" "$DRIVER" --model tiny --prefix "${P}d"
left "${P}d" "bad arguments"

echo "cluster_train: $fails failed"
[ "$fails" = 0 ]
