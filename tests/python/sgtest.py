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
import subprocess
import sys
import threading
import weakref
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


# A rank forked (os.fork, as run_ranks does) while another thread runs a process
# keeps that process's pipe ends: during Popen() the write ends of its stdout and
# exec-error pipes (the thread's read then waits for EOF as long as the rank
# lives), after it the write end of its stdin. popen() and run() take the lock
# that every fork of this process takes, and a forked child closes the pipes of
# every Popen that popen() made.
# reentrant: Popen with preexec_fn runs the fork hooks inside popen()'s hold
_FORK_LOCK = threading.RLock()
_POPENS: "weakref.WeakSet[subprocess.Popen]" = weakref.WeakSet()


def _before_fork() -> None:
    _FORK_LOCK.acquire()


def _after_fork_parent() -> None:
    _FORK_LOCK.release()


def _after_fork_child() -> None:
    global _FORK_LOCK
    _FORK_LOCK = threading.RLock()
    # /dev/null over each pipe end: the pipe is released, and the stale file
    # objects of this copy still close a valid descriptor
    null = os.open(os.devnull, os.O_RDWR)
    for p in list(_POPENS):
        for f in (p.stdin, p.stdout, p.stderr):
            if f is not None and not f.closed:
                try:
                    os.dup2(null, f.fileno())
                except OSError:
                    pass
    os.close(null)
    _POPENS.clear()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_parent,
                    after_in_child=_after_fork_child)


def popen(args: list, **kw: Any) -> subprocess.Popen:
    """subprocess.Popen that is safe beside run_ranks in another thread: no rank
    forked meanwhile or later holds one of its pipes."""
    with _FORK_LOCK:
        p = subprocess.Popen(args, **kw)
        _POPENS.add(p)
    return p


def run(args: list, timeout: float | None = None, check: bool = False,
        capture_output: bool = False, text: bool = False, **kw: Any) \
        -> subprocess.CompletedProcess:
    """subprocess.run through popen() (same arguments, a subset)."""
    if capture_output:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
    with popen(args, text=text, **kw) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise
    if check and p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, args, out, err)
    return subprocess.CompletedProcess(args, p.returncode, out, err)


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


_KEPT: list = []


def leave_gloo(*objs: Any) -> None:
    """End a forked rank's gloo work without tearing it down: a barrier, then
    @objs (a DDP model) and the process group are held until the rank's
    os._exit. PyTorch 1.13 destroys a ProcessGroupGloo with the GIL held when
    DDP's Reducer drops the last reference, and its destructor waits for the
    group's lock, which a gloo worker thread can hold while it frees a finished
    work's tensors, and that takes the GIL: a deadlock, caught in CI with gdb
    (test_peer_scripts' reference, about 1 run in 8)."""
    import torch.distributed as dist
    dist.barrier()
    _KEPT.extend(objs)


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
