#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# sigma-bench compare --sweep, its mechanics on tiny sizes: every peer (MPI
# over TCP, MPI over shared memory, Gloo) measured in every run beside Sigma,
# medians of the runs, a ratio per peer and size that is the peer's median
# over Sigma's, every sum verified (Sigma's by the workers, the peers' by their
# programs), and the plot. Then a Gloo stand-in that reports a wrong sum: the
# sweep must say so (ok false, no ratio) and exit 1. Last, --shm --colocate
# with its kernel-UDP baseline in the same runs: a node per worker, sums
# verified on both paths, the baseline's ratio its median over Sigma's; and
# --colocate's refusals.
# Usage: test_compare_sweep.sh SIGMA_BENCH
set -eu
bench=$1
tmp=$(mktemp -d /tmp/sg_sweep_$$_XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if ! command -v mpirun >/dev/null; then
	echo "SKIP: no mpirun (openmpi-bin)"
	exit 77
fi
rc=0
"$bench" compare --sweep --workers 2 --sizes 4K,8K --iters 1 --runs 3 --nodes 1 --quiet \
	--json "$tmp/c.json" --plot "$tmp/c.svg" >"$tmp/out.txt" 2>"$tmp/err.txt" || rc=$?
if [ "$rc" -ne 0 ] && grep -q "needs the Gloo baseline" "$tmp/err.txt"; then
	cat "$tmp/err.txt"
	echo "SKIP: sigma-bench built without the Gloo baseline (g++, libgloo-dev)"
	exit 77
fi
cat "$tmp/out.txt"
[ "$rc" -eq 0 ] || { cat "$tmp/err.txt"; echo "FAIL: compare --sweep exited $rc"; exit 1; }

python3 - "$tmp/c.json" 4096,8192 3 <<'PY'
import json, statistics, sys

doc = json.load(open(sys.argv[1]))
sizes = [int(x) for x in sys.argv[2].split(",")]
runs = int(sys.argv[3])
peers = ["mpi_tcp", "mpi_vader", "gloo"]
bad = []
if doc["peers"] != peers:
    bad.append(f"peers {doc['peers']}, want {peers}")
if doc["runs"] != runs:
    bad.append(f"runs {doc['runs']}")
if [r["bytes"] for r in doc["results"]] != sizes or any(r["n"] != 2 for r in doc["results"]):
    bad.append("results are not N=2 at " + ",".join(map(str, sizes)))
for r in doc["results"]:
    at = f"{r['bytes']} B"
    if not r["sigma_ok"]:
        bad.append(f"{at}: sigma's sums not verified right")
    sig = r["sigma_runs_s"]
    if len(sig) != runs or abs(statistics.median(sig) - r["sigma_time_s"]) > 1e-9:
        bad.append(f"{at}: sigma_time_s {r['sigma_time_s']} is not the median of {sig}")
    for p in peers:
        x = r["peers"].get(p)
        if x is None:
            bad.append(f"{at}: no {p}")
            continue
        if not x["ok"]:
            bad.append(f"{at}: {p}'s sums not verified right")
        if len(x["runs_s"]) != runs or min(x["runs_s"]) <= 0:
            bad.append(f"{at}: {p} runs {x['runs_s']}")
            continue
        if abs(statistics.median(x["runs_s"]) - x["time_s"]) > 1e-9:
            bad.append(f"{at}: {p} time {x['time_s']} is not the median of {x['runs_s']}")
        want = x["time_s"] / r["sigma_time_s"]
        if abs(x["ratio"] - want) > 1e-4 * max(1.0, want):
            bad.append(f"{at}: {p} ratio {x['ratio']}, want {want:.4f}")
    if r["peers"]["mpi_tcp"]["time_s"] != r["mpi_time_s"]:
        bad.append(f"{at}: mpi_time_s is not mpi_tcp's")
print("\n".join(bad) if bad else "sweep JSON: every peer, median and ratio right")
sys.exit(1 if bad else 0)
PY
for label in "MPI TCP N=2" "MPI vader N=2" "Gloo TCP N=2"; do
	grep -q "$label" "$tmp/c.svg" || { echo "FAIL: the plot has no line '$label'"; exit 1; }
done
# the size axis in the table's units, not gnuplot's 4.096x10^3
for label in 4K 8K; do
	grep -q ">$label<" "$tmp/c.svg" || { echo "FAIL: the plot's size axis has no '$label'"; exit 1; }
done

# A Gloo that sums wrong: flagged, no ratio, exit status 1.
cat >"$tmp/gloo" <<'SH'
#!/bin/sh
n=$1; shift 2
for s in "$@"; do echo "allreduce $s 0.001 0"; done
SH
chmod +x "$tmp/gloo"
rc=0
SIGMA_GLOO_ALLREDUCE="$tmp/gloo" "$bench" compare --sweep --workers 2 --sizes 4K --iters 1 \
	--nodes 1 --quiet --json "$tmp/w.json" >"$tmp/out.txt" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat "$tmp/out.txt"; echo "FAIL: a wrong Gloo sum exited $rc, want 1"; exit 1; }
grep -q FAILED "$tmp/out.txt" || { cat "$tmp/out.txt"; echo "FAIL: no FAILED in the table"; exit 1; }
python3 - "$tmp/w.json" <<'PY'
import json, sys

g = json.load(open(sys.argv[1]))["results"][0]["peers"]["gloo"]
if g["ok"] or g["ratio"] != -1:
    sys.exit(f"FAIL: a wrong Gloo sum reads {g}")
print("a wrong Gloo sum: ok false, no ratio")
PY

"$bench" compare --shm --colocate --threads-baseline --workers 2,3 --sizes 4K,64K --iters 1 \
	--runs 2 --nodes 1 --quiet --json "$tmp/co.json" >"$tmp/out.txt" 2>"$tmp/err.txt" || {
	cat "$tmp/out.txt" "$tmp/err.txt"; echo "FAIL: compare --shm --colocate"; exit 1; }
cat "$tmp/out.txt"
python3 - "$tmp/co.json" <<'PY'
import json, statistics, sys

doc = json.load(open(sys.argv[1]))
bad = []
if not doc["sigma_transport"].startswith("colocated") or not doc["threads_baseline"]:
    bad.append(f"transport {doc['sigma_transport']}, baseline {doc['threads_baseline']}")
if [(r["n"], r["bytes"]) for r in doc["results"]] != [(2, 4096), (2, 65536), (3, 4096),
                                                      (3, 65536)]:
    bad.append("results are not N=2,3 at 4K,64K")
for r in doc["results"]:
    at = f"N={r['n']} {r['bytes']} B"
    if not r["sigma_ok"] or not r["threads_ok"]:
        bad.append(f"{at}: sums not verified right (colocated {r['sigma_ok']}, "
                   f"UDP {r['threads_ok']})")
    # one node thread per worker, not --nodes 1
    if len(r["node_busy"]) != r["n"]:
        bad.append(f"{at}: {len(r['node_busy'])} node threads")
    th = r["threads_runs_s"]
    if len(th) != 2 or abs(statistics.median(th) - r["threads_time_s"]) > 1e-9:
        bad.append(f"{at}: threads_time_s {r['threads_time_s']} is not the median of {th}")
    want = r["threads_time_s"] / r["sigma_time_s"]
    if abs(r["speedup_vs_threads"] - want) > 1e-4 * max(1.0, want):
        bad.append(f"{at}: speedup_vs_threads {r['speedup_vs_threads']}, want {want:.4f}")
print("\n".join(bad) if bad else "colocated JSON: both paths verified, a node per worker")
sys.exit(1 if bad else 0)
PY
for bad in "--colocate" "--colocate --shm --attach 127.0.0.1:9" "--colocate --shm --workers 9"; do
	# shellcheck disable=SC2086
	if "$bench" compare $bad --quiet >"$tmp/out.txt" 2>&1; then
		echo "FAIL: compare $bad was accepted"
		exit 1
	fi
done
echo PASS
