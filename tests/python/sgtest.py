# SPDX-License-Identifier: BSD-3-Clause
"""Helpers of the Python tests: the package from the source tree (libraries
from $SIGMA_BUILD_DIR), skipping with a reason (exit 77), and N ranks forked
from one process.

Ranks are forked after ``import torch`` and before any thread starts, so each
rank costs no interpreter start-up and no second import of torch (about 2 s
of CPU each on these machines): the suite stays short on 2 cores.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import sys
import time
import traceback
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RankFailed(AssertionError):
    pass


def _child(rank: int, n: int, port: int, env: dict, fn: Callable, args: tuple, conn: Any) -> None:
    os.environ.update(env)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(n))
    try:
        import torch
        torch.set_num_threads(1)
        conn.send(("ok", fn(rank, n, *args)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(("err", f"rank {rank}: {type(e).__name__}: {e}\n{traceback.format_exc()}"))
    finally:
        conn.close()


def run_ranks(n: int, fn: Callable, *args: Any, timeout: float = 120.0,
              env: dict | None = None, allow_exit: tuple = ()) -> list[Any]:
    """Run ``fn(rank, n, *args)`` in n forked processes with the env://
    variables set; returns their results, in rank order. A rank that raises
    fails the call with its traceback; a rank that runs past ``timeout`` gets
    every rank killed. Ranks in ``allow_exit`` may end without a result."""
    ctx = mp.get_context("fork")
    port = free_port()
    procs = []
    for r in range(n):
        rd, wr = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_child, args=(r, n, port, env or {}, fn, args, wr), daemon=True)
        p.start()
        wr.close()
        procs.append((p, rd))
    results: list[Any] = [None] * n
    errors = []
    deadline = time.monotonic() + timeout
    try:
        for r, (p, rd) in enumerate(procs):
            left = deadline - time.monotonic()
            if left <= 0 or not rd.poll(left):
                errors.append(f"rank {r}: no result within {timeout:g} s (killed)")
                break
            try:
                kind, val = rd.recv()
            except EOFError:
                if r not in allow_exit:
                    errors.append(f"rank {r}: ended without a result")
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
                os.kill(p.pid, signal.SIGKILL)
                p.join()
    if errors:
        raise RankFailed("\n".join(errors))
    return results
