# SPDX-License-Identifier: BSD-3-Clause
"""Summation nodes on this machine, for the launcher, the demo and the tests.

:func:`start_local_nodes` is the one place that starts them. A node is
``sigma-udpd`` (the aggregation engine behind a kernel UDP socket, with the
control server), reached by kernel-socket workers on 127.0.0.1; each node gets
a control socket (``unix:``) and a shared-memory socket (``--shm``) in a
private folder. Every node is stopped (and its folder removed) on ``stop()``,
on leaving the ``with`` block, and at exit. A ``with`` block left by an
exception first writes the end of each node's log to stderr (its counters,
drops by reason, printed as it stops): the folder goes, and with it what the
nodes saw of the failure.

Local ranks use the nodes' shared memory by default: :func:`start_local_nodes`
adds their sockets to ``SIGMA_SHM`` in this process's environment (and
``stop()`` takes them out again), which ranks started from here inherit and
:class:`sigma.Session` reads. ``SIGMA_LOCAL_TRANSPORT=udp`` goes back to
kernel UDP (docs/python.md).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Optional

# Lines of each node's log written to stderr when a with block fails.
LOG_TAIL_LINES = 40
# The node program the launcher and the tests start (a one-line switch).
DEFAULT_KIND = "udpd"
# Environment: the shared-memory sockets of local nodes (';' between them),
# and the switch back to kernel UDP for local ranks.
SHM_ENV = "SIGMA_SHM"
TRANSPORT_ENV = "SIGMA_LOCAL_TRANSPORT"


def local_transport() -> str:
    """``shm`` (the default) or ``udp``: SIGMA_LOCAL_TRANSPORT, checked."""
    t = os.environ.get(TRANSPORT_ENV, "") or "shm"
    if t not in ("shm", "udp"):
        raise ValueError(f"sigma: {TRANSPORT_ENV}={t!r}: 'shm' (the default) or 'udp'")
    return t


def shm_paths() -> list[str]:
    """The shared-memory sockets local ranks use: SIGMA_SHM's, none with
    SIGMA_LOCAL_TRANSPORT=udp."""
    if local_transport() == "udp":
        return []
    return [p for p in os.environ.get(SHM_ENV, "").split(";") if p]


def _env_paths(add: list[str], remove: list[str]) -> None:
    """Add and remove sockets in this process's SIGMA_SHM."""
    have = [p for p in os.environ.get(SHM_ENV, "").split(";") if p and p not in remove]
    have += [p for p in add if p not in have]
    if have:
        os.environ[SHM_ENV] = ";".join(have)
    else:
        os.environ.pop(SHM_ENV, None)
# Accumulator buffers of a local node (sigma-udpd's default is 4096): a job
# may have half of them in flight, and DDP's 25 MB buckets from two ranks
# held more, so that the node refused pushes (NACK) and the ranks resent
# them: ~700 a ResNet-50 step at N = 2, none with 8192 (docs/python.md).
# About 73 MB per node.
POOL_BUFS = 8192


def find_program(name: str, env: str, build_sub: str) -> str:
    """A Sigma program: $env, else the build tree ($SIGMA_BUILD_DIR), else
    next to the installed package (meson's bindir), else PATH."""
    tried = []
    cands = []
    if os.environ.get(env):
        cands.append(os.environ[env])
    if os.environ.get("SIGMA_BUILD_DIR"):
        cands.append(os.path.join(os.environ["SIGMA_BUILD_DIR"], build_sub, name))
    try:
        from . import _config
        cands.append(os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   _config.BINDIR_FROM_PACKAGE, name)))
    except (ImportError, AttributeError):
        pass
    for c in cands:
        if os.access(c, os.X_OK):
            return c
        tried.append(c)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(f"sigma: cannot find {name} (tried {', '.join(tried) or 'nothing'} "
                            f"and PATH): set {env} or SIGMA_BUILD_DIR, or install Sigma")


class LocalNode:
    """One running node: its process, control target and dataplane port."""

    def __init__(self, proc: subprocess.Popen, name: str, target: str, log: str,
                 shm: str = "") -> None:
        self.proc, self.name, self.target, self.log = proc, name, target, log
        self.shm = shm  # its shared-memory socket (sigma-udpd --shm)

    def kill(self) -> None:
        """SIGKILL the node at once (a node that dies)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, grace: float = 5.0) -> int:
        """SIGTERM, then SIGKILL after ``grace`` s; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class LocalNodes:
    """Nodes started by :func:`start_local_nodes` (a context manager)."""

    def __init__(self, nodes: list[LocalNode], folder: str) -> None:
        self.nodes = nodes
        self.folder = folder
        atexit.register(self.stop)

    @property
    def targets(self) -> list[str]:
        """Their control targets, for init(nodes=...) or SIGMA_NODES."""
        return [n.target for n in self.nodes]

    def env(self) -> str:
        """The value of SIGMA_NODES that names them."""
        return ";".join(self.targets)

    @property
    def shm_paths(self) -> list[str]:
        """Their shared-memory sockets."""
        return [n.shm for n in self.nodes]

    def shm_env(self) -> str:
        """The value of SIGMA_SHM that names their shared memory."""
        return ";".join(self.shm_paths)

    def stop(self, show_logs: bool = False) -> None:
        """Stop every node and remove the folder (idempotent). With
        ``show_logs``, the last LOG_TAIL_LINES lines of each node's log (what
        it printed as it stopped included) go to stderr first."""
        _env_paths([], self.shm_paths)
        for n in self.nodes:
            n.stop()
        if show_logs:
            for n in self.nodes:
                _show_log(n)
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "LocalNodes":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.stop(show_logs=exc_type is not None)


def _show_log(n: LocalNode) -> None:
    """The end of node ``n``'s log on stderr, each line named by the node."""
    try:
        with open(n.log, errors="replace") as f:
            lines = f.read().splitlines()[-LOG_TAIL_LINES:]
    except OSError as e:
        lines = [f"(no log: {e})"]
    status = n.proc.returncode
    print(f"sigma: node {n.name} (exit status {status}), the end of its log:", file=sys.stderr)
    for line in lines:
        print(f"  {n.name}| {line}", file=sys.stderr)


def _die_with_parent() -> None:
    """In the node's child: SIGTERM when the process that started it dies.

    atexit does not run when the parent is killed or crashes, and a node left
    behind would keep its port and folder.
    """
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _wait_line(proc: subprocess.Popen, log: str, pattern: str, timeout: float) -> bool:
    """Wait until the node's log has a line matching ``pattern`` (its start-up
    line), the node exits, or ``timeout`` s pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with open(log, errors="replace") as f:
            if re.search(pattern, f.read()):
                return True
        time.sleep(0.02)
    return False


def start_local_nodes(count: int = 1, kind: Optional[str] = None, *,
                      extra_args: Optional[list[str]] = None,
                      timeout: float = 10.0) -> LocalNodes:
    """Start ``count`` summation nodes on 127.0.0.1, each with a Unix control
    socket, a shared-memory socket (added to SIGMA_SHM) and POOL_BUFS
    accumulator buffers (``extra_args`` come after, and win); returns once
    every one answers (or raises, leaving none behind)."""
    kind = kind or os.environ.get("SIGMA_NODE_KIND") or DEFAULT_KIND
    if kind != "udpd":
        raise ValueError(f"sigma: node kind {kind!r}: this build starts 'udpd' nodes")
    prog = find_program("sigma-udpd", "SIGMA_UDPD", "udpd")
    folder = tempfile.mkdtemp(prefix=f"sigma-nodes-{os.getpid()}-")
    nodes: list[LocalNode] = []
    started = LocalNodes(nodes, folder)
    try:
        for i in range(count):
            name = f"local{i}"
            sock = os.path.join(folder, f"{name}.sock")
            shm = os.path.join(folder, f"{name}.shm")
            log = os.path.join(folder, f"{name}.log")
            with open(log, "w") as out:
                proc = subprocess.Popen([prog, "--addr", "127.0.0.1", "--port", "0", "--name",
                                         name, "--unix", sock, "--shm", shm, "--pool-bufs",
                                         str(POOL_BUFS)] + (extra_args or []),
                                        stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True,
                                        preexec_fn=_die_with_parent)
            nodes.append(LocalNode(proc, name, f"unix:{sock}", log, shm))
            if not _wait_line(proc, log, r"sigma-udpd: node .*\n", timeout):
                with open(log, errors="replace") as f:
                    out_text = f.read().strip()
                raise RuntimeError(f"sigma: node {name} ({prog}) did not start within "
                                   f"{timeout:g} s: {out_text or 'no output'}")
    except BaseException:
        started.stop()
        raise
    _env_paths(started.shm_paths, [])
    return started
