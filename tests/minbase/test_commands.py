#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""commands.py over this tree: it finds the programs the suite is known to run
(each named below with a script that runs it), and every name it lists is a
program this machine has (./sigma test installs both package lists first), so
that a word it takes for a command by mistake fails here, and so does a
program the lists lack. Also ./sigma deps --list: the build list is part of
the whole and lacks the tests' packages; a bad word for it, or for ./sigma
minbase, is refused with a clear error."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]
KNOWN = {
    "pgrep": "tests/test_reaper.sh", "ss": "tests/client/test_client_socket.sh",
    "/bin/kill": "deploy/sigmad@.service.in", "etcd": "bench/etcd_lib.sh",
    "ethtool": "bench/sigmad_netns.sh", "tc": "bench/cluster_net.sh",
    "mpirun": "tests/client/test_bench_cluster.sh", "lintian": "tests/test_deb.sh",
    "chroot": "tests/test_deb.sh", "gnuplot": "bench/bench_cluster.c",
}


def main() -> int:
    out = subprocess.run([sys.executable, str(SRC / "tests/minbase/commands.py"), str(SRC),
                          "--where"], capture_output=True, text=True, check=True).stdout
    where = dict(line.split("\t") for line in out.splitlines())
    bad = 0
    for name, script in KNOWN.items():
        if name not in where:
            print(f"FAIL: {name} (run by {script}) is not listed")
            bad += 1
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    for name, script in where.items():
        found = os.access(name, os.X_OK) if name.startswith("/") else shutil.which(name, path=path)
        if not found:
            print(f"FAIL: '{name}' (from {script}) is no program on this machine")
            bad += 1
    # the lists ./sigma minbase installs: the build's alone, and every one; bad words refused
    def sigma(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(SRC / "sigma"), *args], capture_output=True, text=True)
    build, every = sigma("deps", "--list", "build"), sigma("deps", "--list", "all")
    b, a = set(build.stdout.split()), set(every.stdout.split())
    if build.returncode or every.returncode or "gcc" not in b or "python3-torch" in b or \
            not b < a or not {"procps", "ethtool", "build-essential"} <= a:
        print(f"FAIL: ./sigma deps --list: build {sorted(b)}, all {sorted(a)}")
        bad += 1
    for args, want in ((("deps", "--list", "bogus"), "deps --list: build or all, not 'bogus'"),
                       (("minbase", "--bogus"), "unknown option --bogus")):
        r = sigma(*args)
        if r.returncode == 0 or want not in r.stderr:
            print(f"FAIL: ./sigma {' '.join(args)}: exit {r.returncode}, {r.stderr.strip()!r}")
            bad += 1
    print(f"commands: {len(where)} programs listed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
