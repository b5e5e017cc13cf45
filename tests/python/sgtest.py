# SPDX-License-Identifier: BSD-3-Clause
"""Helpers of the Python tests: the package from the source tree (libraries
from $SIGMA_BUILD_DIR), skipping with a reason (exit 77), and N ranks forked
from one process.

Ranks are forked after ``import torch`` and before any thread starts, so each
rank costs no interpreter start-up and no second import of torch (about 2 s
of CPU each on these machines): the suite stays short on 2 cores.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("SIGMA_PY_SRC") or os.path.normpath(os.path.join(HERE, "..", "..", "python"))
if SRC not in sys.path:
    sys.path.insert(0, SRC)

SKIP = 77


def skip(reason: str) -> None:
    """Skip the whole test (meson's exit status 77), saying why."""
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def need_torch() -> Any:
    """import torch, or skip: the Python tests run on Debian's /usr/bin/python3."""
    try:
        import torch
    except ImportError as e:
        skip(f"no torch in {sys.executable} ({e}): apt-get install python3-torch, and run the "
             "tests with /usr/bin/python3")
    return torch


def _die_with_parent() -> None:
    import ctypes
    import signal
    ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def free_ports(n: int) -> int:
    """A base port with n free consecutive TCP ports on 127.0.0.1 (bench/free_ports.py)."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
    try:
        from free_ports import free_ports as probe
    finally:
        sys.path.pop(0)
    return probe(n)


class Etcd:
    """A one-member etcd of this test on free loopback ports, in @folder; it dies
    with the test (PR_SET_PDEATHSIG) and on stop(). Skips (77) without etcd."""

    def __init__(self, folder: str) -> None:
        import shutil
        import subprocess
        import time
        if shutil.which("etcd") is None:
            skip("no etcd (Debian package etcd-server)")
        from sigma.etcd import read_nodes
        from sigma.errors import SigmaError
        base = free_ports(2)
        self.url = f"http://127.0.0.1:{base}"
        peer = f"http://127.0.0.1:{base + 1}"
        self.log = os.path.join(folder, "etcd.log")
        # etcd is not ours: the sanitizer build's preloaded runtimes stay out of it
        env = {k: v for k, v in os.environ.items()
               if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                ["etcd", "--name", "e", "--data-dir", os.path.join(folder, "etcd.data"),
                 "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", f"e={peer}", "--initial-cluster-token",
                 f"sg-py-{os.getpid()}"], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 20
        while True:
            try:
                read_nodes(self.url, "probe")
                return
            except SigmaError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"etcd did not start: {open(self.log).read()[-2000:]}")
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except Exception:
                self.proc.kill()
                self.proc.wait()


def wait_registered(url: str, cluster: str, count: int, timeout: float = 15.0) -> None:
    """Wait until ``count`` summation nodes of ``cluster`` are registered in etcd."""
    import time
    from sigma.etcd import read_nodes
    deadline = time.monotonic() + timeout
    while len(read_nodes(url, cluster)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{count} node(s) did not register in etcd within "
                                 f"{timeout:g} s")
        time.sleep(0.1)


def run_ranks(n: int, fn: Callable, *args: Any, timeout: float = 120.0,
              env: dict | None = None, allow_exit: tuple = ()) -> list[Any]:
    """sigma.launch.run_forked with one thread of torch per rank (2 cores).
    run_forked puts every rank on one machine (LOCAL_WORLD_SIZE = n): the
    ranks push directly (SIGMA_LOCAL_AGGREGATION=0) unless @env says 1
    (test_local.py)."""
    from sigma.launch import run_forked
    return run_forked(n, _one_thread, fn, *args, timeout=timeout,
                      env=dict({"SIGMA_LOCAL_AGGREGATION": "0"}, **(env or {})),
                      allow_exit=allow_exit)


def _one_thread(rank: int, n: int, fn: Callable, *args: Any) -> Any:
    import torch
    torch.set_num_threads(1)
    return fn(rank, n, *args)


def procs_mentioning(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (to check none is left)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if text.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found
