# SPDX-License-Identifier: BSD-3-Clause
"""sgtest.popen()/run() beside forked ranks: a process started by a thread
ends for that thread when it ends, not when the ranks that were forked
meanwhile end (the py_elastic hang of 2026-12-02)."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import threading
import time
import unittest

import sgtest

RANK_LIFE = 3.0


def _live(seconds: float) -> None:
    time.sleep(seconds)


def fork_ranks(n: int) -> list:
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_live, args=(RANK_LIFE,), daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    return procs


def end(procs: list) -> None:
    for p in procs:
        p.kill()
        p.join()


class ForkSafety(unittest.TestCase):
    def test_stdin_pipe_not_held_by_a_rank(self) -> None:
        """cat sees EOF when this process closes its stdin, though a rank forked
        after it started is alive (before: the rank held the write end)."""
        cat = sgtest.popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        ranks = fork_ranks(1)
        try:
            t0 = time.monotonic()
            cat.stdin.write(b"abc")
            cat.stdin.close()
            out = cat.stdout.read()
            took = time.monotonic() - t0
            cat.wait(5)
        finally:
            end(ranks)
        self.assertEqual(out, b"abc")
        self.assertLess(took, RANK_LIFE / 2, f"cat's EOF came after {took:.2f} s")

    def test_run_beside_forking(self) -> None:
        """A thread's run() calls while ranks are forked in a loop: none waits for
        a rank's life (before: a fork inside Popen() took the stdout pipe's or
        the exec-error pipe's write end)."""
        stop = threading.Event()
        worst = [0.0]
        errors: list = []

        def runner() -> None:
            try:
                while not stop.is_set():
                    t0 = time.monotonic()
                    r = sgtest.run(["echo", "x"], capture_output=True, timeout=30)
                    worst[0] = max(worst[0], time.monotonic() - t0)
                    if r.stdout != b"x\n":
                        errors.append(r.stdout)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        th = threading.Thread(target=runner)
        th.start()
        ranks = []
        try:
            for _ in range(40):
                ranks += fork_ranks(1)
                time.sleep(0.01)
        finally:
            stop.set()
            th.join(60)
            end(ranks)
        self.assertEqual(errors, [])
        self.assertLess(worst[0], RANK_LIFE / 2, f"a run() took {worst[0]:.2f} s")


if __name__ == "__main__":
    unittest.main()
