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


def run_ranks(n: int, fn: Callable, *args: Any, timeout: float = 120.0,
              env: dict | None = None, allow_exit: tuple = ()) -> list[Any]:
    """sigma.launch.run_forked with one thread of torch per rank (2 cores)."""
    from sigma.launch import run_forked
    return run_forked(n, _one_thread, fn, *args, timeout=timeout, env=env,
                      allow_exit=allow_exit)


def _one_thread(rank: int, n: int, fn: Callable, *args: Any) -> Any:
    import torch
    torch.set_num_threads(1)
    return fn(rank, n, *args)
