#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""commands.py over this tree: it finds the programs the suite is known to run
(each named below with a script that runs it), and every name it lists is a
program this machine has (./sigma test installs both package lists first), so
that a word it takes for a command by mistake fails here, and so does a
program the lists lack."""

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
    print(f"commands: {len(where)} programs listed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
