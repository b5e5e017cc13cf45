# SPDX-License-Identifier: BSD-3-Clause
"""Run N ranks of a training script on this machine.

    python3 -m sigma.launch -n 4 train.py --epochs 1
    python3 -m sigma.launch -n 4 --local-nodes 1 train.py      # with a node of its own
    python3 -m sigma.launch -n 2 --nodes 'unix:/run/sigma/a.sock;10.1.0.5:7070' \\
        --secret-file ctl.secret train.py

Each rank is ``sys.executable script args`` with the ``env://`` variables
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE),
so ``torch.distributed.init_process_group("gloo")`` and ``sigma.torch.init()``
work unchanged; SIGMA_NODES, SIGMA_SECRET_FILE, SIGMA_ETCD and SIGMA_CLUSTER
(``--etcd``, ``--cluster``: nodes and membership from etcd) are passed on. With
``--make-job`` the launcher makes the job itself and hands every rank
SIGMA_JOB, SIGMA_RANK and SIGMA_WORKERS, for scripts without torch.distributed. Debian's
``torchrun`` (PyTorch 1.13 under Python 3.11) stops at start; with a newer
PyTorch, ``torchrun --nproc-per-node 4 train.py`` sets the same variables.

Each line a rank prints is prefixed with ``[rank]``. When a rank fails, the
others get ``--grace`` seconds to end by themselves (a step that waits for
the failed rank ends only after sigma.torch's ranks_wait), then SIGINT, then
SIGKILL 3 s later. Ctrl-C (SIGINT) or SIGTERM
stops every rank and node the same way. The exit status is the first failing
rank's (128 + signal for a signal), 0 when all succeed.
"""

from __future__ import annotations

import argparse
import faulthandler
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
import traceback
from typing import Any, Callable, Iterator, Optional

from .errors import SigmaError
from .job import create_job, destroy_job
from .localnodes import DEFAULT_KIND, start_local_nodes


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for MASTER_PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RankFailed(RuntimeError):
    """A rank of :func:`run_forked` raised, died or ran out of time."""


_STACKS_SIGNAL = signal.SIGUSR2


def _forked(rank: int, n: int, env: dict, fn: Callable, args: tuple, conn: Any) -> None:
    os.environ.update(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n),
                      LOCAL_WORLD_SIZE=str(n))
    # a rank that runs out of time prints where each of its threads is
    faulthandler.register(_STACKS_SIGNAL, all_threads=True)
    try:
        conn.send(("ok", fn(rank, n, *args)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(("err", f"rank {rank}: {type(e).__name__}: {e}\n{traceback.format_exc()}"))
    finally:
        conn.close()


def _dump_stacks(procs: list) -> None:
    """Ask each of @procs for its Python stacks (faulthandler, on stderr), so
    that a hang names where it hangs before the rank is killed."""
    for p in procs:
        try:
            os.kill(p.pid, _STACKS_SIGNAL)
        except OSError:
            pass
    time.sleep(0.5)


def run_forked(n: int, fn: Callable, *args: Any, timeout: float = 600.0,
               env: Optional[dict] = None, allow_exit: tuple = ()) -> list:
    """Run ``fn(rank, n, *args)`` in ``n`` processes forked from this one, with
    the env:// variables set (MASTER_ADDR 127.0.0.1, a free MASTER_PORT,
    RANK, WORLD_SIZE, LOCAL_RANK); returns their results in rank order.

    Forking after ``import torch`` costs no interpreter start and no second
    import (torch.multiprocessing.spawn pays both); fork before this process
    starts threads or uses torch's thread pools. A rank that raises fails the
    call (RankFailed, with its traceback); when one does, or ``timeout`` s
    pass, every rank still running is killed. Ranks in ``allow_exit`` may end
    without a result (None)."""
    ctx = mp.get_context("fork")
    base = dict(env or {}, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    procs = []
    for r in range(n):
        rd, wr = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_forked, args=(r, n, base, fn, args, wr), daemon=True)
        p.start()
        wr.close()
        procs.append((p, rd))
    results: list = [None] * n
    errors = []
    deadline = time.monotonic() + timeout
    pending = {rd: r for r, (_, rd) in enumerate(procs)}
    try:
        # whichever rank ends first: one that fails stops the rest at once (the
        # others may be waiting for it in a collective with a long timeout)
        while pending and not errors:
            left = deadline - time.monotonic()
            ready = mp_connection.wait(list(pending), max(0.0, left)) if left > 0 else []
            if not ready:
                late = sorted(pending.values())
                errors.append(f"ranks {late}: no result within {timeout:g} s (killed; "
                              "their threads' stacks are on stderr)")
                _dump_stacks([procs[r][0] for r in late])
                break
            for rd in ready:
                r = pending.pop(rd)
                p = procs[r][0]
                try:
                    kind, val = rd.recv()
                except EOFError:
                    if r not in allow_exit:
                        p.join(5)
                        errors.append(f"rank {r}: ended without a result (exit status "
                                      f"{p.exitcode})")
                    continue
                if kind == "ok":
                    results[r] = val
                else:
                    errors.append(val)
    finally:
        for p, _ in procs:
            if p.is_alive():
                p.join(2.0 if not errors else 0.1)
            if p.is_alive():
                p.kill()
                p.join()
    if errors:
        raise RankFailed("\n".join(errors))
    return results


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m sigma.launch",
                                description="Run N ranks of a training script on this machine "
                                            "(env:// variables for torch.distributed).")
    p.add_argument("-n", "--nproc", type=int, required=True, help="ranks to start (1..64)")
    p.add_argument("--nodes", help="summation nodes' control targets, ';' between them "
                                   "(becomes SIGMA_NODES)")
    p.add_argument("--secret-file", help="shared secret for TCP targets (SIGMA_SECRET_FILE)")
    p.add_argument("--etcd", help="etcd's client URLs: the nodes and the membership come from "
                                  "there instead of --nodes (SIGMA_ETCD)")
    p.add_argument("--cluster", help="the nodes' cluster in etcd [default] (SIGMA_CLUSTER)")
    p.add_argument("--local-nodes", type=int, default=0, metavar="K",
                   help="start K summation nodes here for the run, and stop them after")
    p.add_argument("--node-kind", default=None, help=f"program of --local-nodes [{DEFAULT_KIND}]")
    p.add_argument("--mode", choices=["sync", "async", "deterministic"],
                   help="the job's mode (SIGMA_MODE)")
    p.add_argument("--auth", action="store_true",
                   help="authenticated datagrams (auth = mac): sets SIGMA_AUTH=mac; with "
                   "--make-job each rank's SIGMA_JOB is its own descriptor, with its keys")
    p.add_argument("--make-job", action="store_true",
                   help="make an open job on the nodes first and give it to the ranks in "
                        "SIGMA_JOB, SIGMA_RANK and SIGMA_WORKERS (for scripts without "
                        "torch.distributed); destroy it at the end")
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=0, help="[a free port]")
    p.add_argument("--grace", type=float, default=5.0,
                   help="seconds the other ranks get to end after one fails [5]")
    p.add_argument("--no-prefix", action="store_true", help="do not prefix output with [rank]")
    p.add_argument("-m", dest="module", action="store_true",
                   help="run the script argument as a module (python -m)")
    p.add_argument("script", help="the training script (or module with -m)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    return p


class _Ranks:
    def __init__(self, procs: list[subprocess.Popen], prefix: bool) -> None:
        self.procs = procs
        self.prefix = prefix
        self.sel = selectors.DefaultSelector()
        self.partial: dict[int, bytes] = {}
        for r, p in enumerate(procs):
            if p.stdout is not None:
                self.sel.register(p.stdout, selectors.EVENT_READ, r)

    def pump(self, timeout: float) -> None:
        """Copy what the ranks printed, with [rank] in front of each line."""
        if not self.sel.get_map():
            time.sleep(timeout)
            return
        for key, _ in self.sel.select(timeout):
            r = key.data
            data = os.read(key.fileobj.fileno(), 65536)
            if not data:
                self.sel.unregister(key.fileobj)
                rest = self.partial.pop(r, b"")
                if rest:
                    self._emit(r, rest + b"\n")
                continue
            buf = self.partial.get(r, b"") + data
            *lines, self.partial[r] = buf.split(b"\n")
            for line in lines:
                self._emit(r, line + b"\n")

    def _emit(self, r: int, line: bytes) -> None:
        out = sys.stdout.buffer
        out.write(f"[{r}] ".encode() + line if self.prefix else line)
        out.flush()

    def supervise(self, grace: float, who: str, where: Optional[list[str]] = None) -> int:
        """Copy the ranks' output until every rank ended; when one fails, give
        the others ``grace`` s to end by themselves, then stop them. Returns
        the exit status: the first failing rank's (128 + N for a signal)."""
        status = 0
        failed_at = None
        while [p.poll() for p in self.procs].count(None):  # poll() each: it sets returncode
            self.pump(0.1)
            if failed_at is None:
                bad = [(r, p.returncode) for r, p in enumerate(self.procs)
                       if p.returncode not in (None, 0)]
                if bad:
                    failed_at = time.monotonic()
                    status = _status(bad[0][1])
                    on = f" ({where[bad[0][0]]})" if where else ""
                    print(f"{who}: rank {bad[0][0]}{on} exited with status {bad[0][1]}; "
                          f"stopping the others within {grace:g} s", file=sys.stderr,
                          flush=True)
            elif time.monotonic() - failed_at > grace:
                break
        self.stop(3.0)
        if status == 0:
            status = next((_status(p.returncode) for p in self.procs if p.returncode), 0)
        return status

    def signal_all(self, sig: int) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass

    def stop(self, grace: float) -> None:
        """SIGINT (Python unwinds: finally blocks and atexit, so sigma.torch
        shuts down), then SIGKILL whatever is left after ``grace`` s."""
        self.signal_all(signal.SIGINT)
        deadline = time.monotonic() + grace
        while any(p.poll() is None for p in self.procs) and time.monotonic() < deadline:
            self.pump(0.05)
        self.signal_all(signal.SIGKILL)
        for p in self.procs:
            p.wait()
        while self.sel.get_map():
            self.pump(0.05)


class _Stop(Exception):
    def __init__(self, sig: int) -> None:
        super().__init__(sig)
        self.sig = sig


def _on_signal(sig: int, _frame: object) -> None:
    raise _Stop(sig)


def run(argv: Optional[list[str]] = None) -> int:
    """The launcher; returns the exit status."""
    a = _parser().parse_args(argv)
    if not 1 <= a.nproc <= 64:
        print("sigma.launch: -n must be 1..64", file=sys.stderr)
        return 2
    if a.local_nodes and a.nodes:
        print("sigma.launch: give --nodes or --local-nodes, not both", file=sys.stderr)
        return 2
    if a.make_job and not (a.local_nodes or a.nodes or os.environ.get("SIGMA_NODES")):
        print("sigma.launch: --make-job needs nodes (--nodes, --local-nodes or SIGMA_NODES)",
              file=sys.stderr)
        return 2
    env = dict(os.environ)
    env.update(MASTER_ADDR=a.master_addr, MASTER_PORT=str(a.master_port or free_port()),
               WORLD_SIZE=str(a.nproc), LOCAL_WORLD_SIZE=str(a.nproc), PYTHONUNBUFFERED="1")
    for k in ("SIGMA_JOB", "SIGMA_RANK", "SIGMA_WORKERS"):
        env.pop(k, None)
    env.update(node_env(a))
    if a.auth:
        env["SIGMA_AUTH"] = "mac"
    made = []
    ranks: list = []  # --auth --make-job: each rank's own descriptor

    def make_job(env: dict) -> None:
        job = create_job(env.get("SIGMA_NODES", ""), a.nproc, mode=a.mode or "sync",
                         secret_file=env.get("SIGMA_SECRET_FILE"), auth=a.auth)
        made.append((env.get("SIGMA_NODES", ""), job.id, env.get("SIGMA_SECRET_FILE")))
        ranks[:] = job.ranks
        env.update(SIGMA_JOB=job.descriptor, SIGMA_WORKERS=str(a.nproc))
        print(f"sigma.launch: job {job.id} made on {len(job.nodes)} node(s)", flush=True)

    def spawn(env: dict) -> Iterator[subprocess.Popen]:
        if a.make_job:
            make_job(env)
        cmd = [sys.executable] + (["-m"] if a.module else []) + [a.script] + a.args
        for r in range(a.nproc):
            e = dict(env, RANK=str(r), LOCAL_RANK=str(r))
            if a.make_job:
                e["SIGMA_RANK"] = str(r)
            if ranks:  # only its own keys, in its own environment (mode 0400 in /proc)
                e["SIGMA_JOB"] = ranks[r]
            yield popen_rank(cmd, e)

    def destroy() -> None:
        for nodes, job_id, secret_file in made:
            destroy_job(nodes, job_id, secret_file=secret_file)
    return run_job("sigma.launch", env, spawn, local_nodes=a.local_nodes,
                   node_kind=a.node_kind, grace=a.grace, prefix=not a.no_prefix,
                   cleanup=destroy)


def node_env(a: argparse.Namespace) -> dict:
    """SIGMA_NODES, SIGMA_SECRET_FILE, SIGMA_MODE, SIGMA_ETCD and SIGMA_CLUSTER
    from a launcher's options (those given)."""
    env = {}
    for opt, var in (("nodes", "SIGMA_NODES"), ("secret_file", "SIGMA_SECRET_FILE"),
                     ("mode", "SIGMA_MODE"), ("etcd", "SIGMA_ETCD"),
                     ("cluster", "SIGMA_CLUSTER")):
        v = getattr(a, opt, None)
        if v:
            env[var] = os.path.abspath(v) if opt == "secret_file" else v
    return env


def popen_rank(cmd: list[str], env: dict) -> subprocess.Popen:
    """One rank: its own session (signalled as a group), output piped to us."""
    return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)


def run_job(who: str, env: dict, spawn: Callable[[dict], Iterator[subprocess.Popen]], *,
            local_nodes: int = 0, node_kind: Optional[str] = None, grace: float = 5.0,
            prefix: bool = True, where: Optional[list[str]] = None,
            cleanup: Optional[Callable[[], None]] = None) -> int:
    """A launcher's run: start ``local_nodes`` summation nodes here (their
    SIGMA_NODES and SIGMA_SHM into ``env``), start the ranks ``spawn(env)``
    yields, copy their output, and when one fails stop the others within
    ``grace`` s (``_Ranks.supervise``); Ctrl-C or SIGTERM stops every rank.
    At the end ``cleanup()`` runs, then the nodes stop. Returns the exit
    status; errors are printed after ``who:``."""
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    nodes = None
    procs: list[subprocess.Popen] = []
    ranks: Optional[_Ranks] = None
    status = 0
    try:
        if local_nodes:
            nodes = start_local_nodes(local_nodes, node_kind)
            env["SIGMA_NODES"] = nodes.env()
            # the ranks reach them through shared memory (unless SIGMA_LOCAL_TRANSPORT=udp)
            env["SIGMA_SHM"] = os.environ.get("SIGMA_SHM", "")
            print(f"{who}: {local_nodes} local node(s): {nodes.env()}", flush=True)
        for p in spawn(env):
            procs.append(p)
        ranks = _Ranks(procs, prefix)
        status = ranks.supervise(grace, who, where)
    except _Stop as s:
        print(f"{who}: {signal.Signals(s.sig).name}: stopping every rank",
              file=sys.stderr, flush=True)
        for sig, h in old.items():  # a second Ctrl-C during the stop is not lost work
            signal.signal(sig, signal.SIG_IGN)
        status = 128 + s.sig
    except (SigmaError, OSError) as e:
        print(f"{who}: {e}", file=sys.stderr, flush=True)
        status = 1
    finally:
        if any(p.poll() is None for p in procs):
            (ranks or _Ranks(procs, prefix)).stop(3.0)
        if cleanup is not None:
            try:
                cleanup()
            except SigmaError as e:
                print(f"{who}: {e}", file=sys.stderr, flush=True)
        if nodes is not None:
            nodes.stop()
        for sig, h in old.items():
            signal.signal(sig, h)
    return status


def _status(rc: int) -> int:
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(run())
