#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""push_pull of one tensor with local aggregation: sigma.torch's path through
libsigma's sigma_local.h (after) against the Python implementation it
replaced (before), in the same run.

    /usr/bin/python3 bench/local_push_pull.py [--mb 64] [--local-ranks 2] [--reps 7]
        [--before REV] [--json out.json]

L ranks (forked here, one torch thread each) on this machine, one local
summation node: each rank push_pulls an fp32 tensor of --mb MB (the sum of
every rank's) --reps times after two warm-ups, with the C path and with the
Python one, in turns (python, c, python, c...) so that drift hits both. A
time is the slowest rank's wall time of one synchronous push_pull (init and
the first registration not counted); the medians over all timed reps of each
path, and after / before.

"before" is python/sigma/local.py as it was before the Python data path
went (the parent of the commit that removed ``class Segment`` from it, or
--before REV), read with ``git show`` and run as ``sigma._local_before``
against today's sigma.session. Every sum is checked against the reference
(L (L + 1) / 2 times the rank-1 values).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
if not os.environ.get("SIGMA_BUILD_DIR") and os.path.isdir(os.path.join(SRC, "build")):
    os.environ["SIGMA_BUILD_DIR"] = os.path.join(SRC, "build")

import torch  # noqa: E402

import sigma  # noqa: E402
import sigma.local  # noqa: E402
import sigma.torch as sgt  # noqa: E402
from sigma.launch import run_forked  # noqa: E402
from sigma.localnodes import start_local_nodes  # noqa: E402

WARMUP = 2


def before_rev() -> str:
    """The last commit whose python/sigma/local.py had the Python data path."""
    out = subprocess.run(["git", "-C", SRC, "log", "-1", "--format=%H", "-S", "class Segment",
                          "--", "python/sigma/local.py"], check=True, capture_output=True,
                         text=True).stdout.strip()
    if not out:
        raise SystemExit("local_push_pull: no commit removed the Python data path: give --before")
    return out + "^"


def load_before(rev: str, folder: str) -> object:
    """python/sigma/local.py at @rev, as the module sigma._local_before."""
    text = subprocess.run(["git", "-C", SRC, "show", f"{rev}:python/sigma/local.py"],
                          check=True, capture_output=True, text=True).stdout
    path = os.path.join(folder, "_local_before.py")
    with open(path, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location("sigma._local_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sigma._local_before"] = mod
    spec.loader.exec_module(mod)
    return mod


def rank_main(rank: int, n: int, targets: list, nelem: int, reps: int, before: object) -> dict:
    torch.set_num_threads(1)
    c_session = sigma.local.LocalSession

    def python_session(p, jobs, store, prefix, timeout, meet=None, **kw):
        if meet is not None:
            meet()
        return before.LocalSession(p, jobs, store, prefix, timeout, **kw)

    x = torch.arange(nelem, dtype=torch.float32) % 1024 * (rank + 1)
    want = torch.arange(nelem, dtype=torch.float32) % 1024 * (n * (n + 1) // 2)
    times: dict[str, list[float]] = {"python": [], "c": []}
    for rep in range(reps):
        for impl in ("python", "c"):
            sigma.local.LocalSession = python_session if impl == "python" else c_session
            try:
                sgt.init(targets)
            finally:
                sigma.local.LocalSession = c_session
            want_cls = before.LocalSession if impl == "python" else c_session
            assert type(sgt.session()) is want_cls, type(sgt.session())
            y = torch.empty_like(x)
            for k in range(WARMUP + 1):
                y.copy_(x)
                t0 = time.perf_counter()
                sgt.synchronize(sgt.push_pull_async_(y, average=False, name="grad"))
                took = time.perf_counter() - t0
                if k == WARMUP:
                    times[impl].append(took)
            assert torch.equal(y, want), f"{impl}: wrong sum"
            sgt.shutdown()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=64, help="tensor size in MB (fp32) [64]")
    ap.add_argument("--local-ranks", type=int, default=2, help="L, ranks on this machine [2]")
    ap.add_argument("--reps", type=int, default=7, help="timed push_pulls per path [7]")
    ap.add_argument("--before", help="the revision of the Python path [the parent of the "
                    "commit that removed it]")
    ap.add_argument("--json", help="write the JSON here too")
    a = ap.parse_args()
    if a.reps < 5 or a.local_ranks < 2 or a.mb < 1:
        ap.error("want --reps >= 5, --local-ranks >= 2, --mb >= 1")
    rev = a.before or before_rev()
    nelem = a.mb * (1 << 20) // 4
    with tempfile.TemporaryDirectory() as tmp:
        before = load_before(rev, tmp)
        with start_local_nodes(1) as nodes:
            res = run_forked(a.local_ranks, rank_main, nodes.targets, nelem, a.reps, before,
                             timeout=600, env={"SIGMA_LOCAL_AGGREGATION": "1"})
    out = {"bench": "local_push_pull", "local_ranks": a.local_ranks, "bytes": nelem * 4,
           "dtype": "fp32", "reps": a.reps, "cpu": cpu_name(), "cores": os.cpu_count(),
           "before_rev": subprocess.run(["git", "-C", SRC, "rev-parse", "--short", rev],
                                        capture_output=True, text=True).stdout.strip()}
    for impl, key in (("python", "before"), ("c", "after")):
        # each rep's time: its slowest rank's
        per = [max(r[impl][i] for r in res) for i in range(a.reps)]
        med = statistics.median(per)
        out[key] = {"path": "python/sigma/local.py" if impl == "python" else "sigma_local.h",
                    "median_s": med, "times_s": per, "gbytes_per_s": nelem * 4 / med / 1e9}
    out["after_over_before"] = out["after"]["median_s"] / out["before"]["median_s"]
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    return 0


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
