# SPDX-License-Identifier: BSD-3-Clause
"""Straggler attribution end to end: sigma-udpd and 4 ranks (sessions in
threads), rank 3 sleeping 20 ms before each push. Within 2 s of the first
push, `sigmactl jobs --ranks` and the node's /metrics must name rank 3 as the
straggler, with its lateness (the moving average) within 20 % of 20 ms, and
the node's log must name it once as late. Every round's sum is checked
against the sum the test computes."""

from __future__ import annotations

import array
import json
import os
import re
import subprocess
import threading
import time
import unittest
import urllib.request

import sgtest
import sigma
from sigma.lateness import job_lateness
from sigma.localnodes import start_local_nodes

N, SLOW, DELAY, ELEMS = 4, 3, 0.020, 1000


def sigmactl() -> str:
    path = os.path.join(os.environ.get("SIGMA_BUILD_DIR", ""), "control", "sigmactl")
    if not os.access(path, os.X_OK):
        sgtest.skip(f"no sigmactl at {path} (set SIGMA_BUILD_DIR)")
    return path


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample @name{labels} (the labels given must match)."""
    for line in text.splitlines():
        m = re.match(r"([a-z_]+)\{([^}]*)\} (\S+)$", line)
        if m is None or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None


class SlowRanks:
    """N sessions of @job in threads, summing round after round until stop(); rank
    SLOW sleeps DELAY before each push. Every round's sum is checked; errors holds
    what went wrong (a failing rank stops every rank: halt), rounds each rank's
    rounds done."""

    def __init__(self, job: "sigma.Job") -> None:
        self.sess = [sigma.Session(job, r, ranks_wait=30.0) for r in range(N)]
        self.halt = threading.Event()
        self.errors: list[BaseException] = []
        self.rounds = [0] * N
        # stop() picks a round every rank reaches: a rank that stopped a round early
        # would leave the others waiting for its push
        self.lock = threading.Lock()
        self.until: int | None = None
        self.threads = [threading.Thread(target=self._rank, args=(r,)) for r in range(N)]
        for t in self.threads:
            t.start()

    def _rank(self, r: int) -> None:
        try:
            k = 0
            while not self.halt.is_set():
                with self.lock:
                    self.rounds[r] = k
                    if self.until is not None and k >= self.until:
                        break
                buf = array.array("f", [float(r + 1 + k % 7)] * ELEMS)
                if r == SLOW:
                    time.sleep(DELAY)
                self.sess[r].push_pull(buf, name="t").wait(30)
                want = float(sum(q + 1 + k % 7 for q in range(N)))
                if buf[0] != want or buf[-1] != want:
                    raise AssertionError(f"rank {r} round {k}: {buf[0]}, want {want}")
                k += 1
        except BaseException as e:  # noqa: BLE001
            self.errors.append(e)
            self.halt.set()

    def stop(self) -> None:
        with self.lock:
            if self.until is None:
                self.until = max(self.rounds) + 1
        for t in self.threads:
            t.join(60)
        for s in self.sess:
            s.close()


class Straggler(unittest.TestCase):
    def test_slow_rank_named(self):
        ctl = sigmactl()
        nodes = start_local_nodes(1, extra_args=["--metrics", "127.0.0.1:0",
                                                 "--late-warn-ms", "10"])
        self.addCleanup(nodes.stop)
        node = nodes.nodes[0]
        with open(node.log) as f:
            port = int(re.search(r"metrics port (\d+)", f.read()).group(1))
        job = sigma.create_job(nodes.targets, N, tensors=[("t", ELEMS)])
        self.addCleanup(sigma.destroy_job, nodes.targets, job.id)
        t0 = time.monotonic()
        ranks = SlowRanks(job)
        errors = ranks.errors
        got_ctl = got_prom = got_py = None
        try:
            while (time.monotonic() - t0 < 2.0 and not errors
                   and not (got_ctl and got_prom and got_py)):
                time.sleep(0.1)
                if got_py is None:  # what sigma.torch.stats() reports
                    lt = job_lateness(nodes.targets, job.id)
                    if (lt.straggler == SLOW
                            and abs(lt.ranks[SLOW].avg_ms - DELAY * 1e3) < 0.2 * DELAY * 1e3):
                        got_py = (time.monotonic() - t0, lt)
                if got_ctl is None:
                    out = subprocess.run([ctl, "-s", node.target, "--json", "jobs", "--ranks"],
                                         capture_output=True, text=True, timeout=10)
                    self.assertEqual(out.returncode, 0, out.stderr)
                    (r,) = json.loads(out.stdout)
                    st = r["straggler"]
                    if st and st["rank"] == SLOW and abs(st["avg_us"] / 1e3 - 20) < 4:
                        got_ctl = (time.monotonic() - t0, r)
                if got_prom is None:
                    text = metrics(port)
                    lab = {"sigma_job": str(job.id)}
                    avg = metric(text, "sigma_job_rank_lateness_avg_seconds", rank=str(SLOW),
                                 **lab)
                    if (metric(text, "sigma_job_straggler_rank", **lab) == SLOW and avg
                            and abs(avg - DELAY) < 0.2 * DELAY):
                        got_prom = (time.monotonic() - t0, text)
        finally:
            ranks.stop()
        self.assertEqual(errors, [])
        self.assertIsNotNone(got_ctl, "sigmactl jobs --ranks did not name rank 3 within 2 s")
        self.assertIsNotNone(got_prom, "/metrics did not name rank 3 within 2 s")
        self.assertIsNotNone(got_py, "sigma.lateness did not name rank 3 within 2 s")
        lt = got_py[1]
        self.assertEqual((lt.nodes, lt.errors, [x.rank for x in lt.ranks]),
                         (1, [], list(range(N))))
        self.assertRegex(lt.summary(), rf"^job {job.id}: rank {SLOW} is \d+\.\d ms late on "
                         r"\d+% of \d+ rounds$")
        self.assertGreater(lt.ranks[SLOW].last_share, 0.8)
        print(f"sigmactl named rank {SLOW} after {got_ctl[0]:.2f} s, /metrics after "
              f"{got_prom[0]:.2f} s; {min(ranks.rounds)} rounds")
        r = got_ctl[1]
        self.assertEqual([x["rank"] for x in r["ranks"]], list(range(N)))
        for x in r["ranks"]:
            if x["rank"] != SLOW:
                self.assertLess(x["avg_us"], 0.5 * DELAY * 1e6, x)
                self.assertLess(x["last_share"], 0.5, x)
        slow = r["ranks"][SLOW]
        self.assertGreater(slow["last_share"], 0.8, slow)
        # the mean counts every push, the first round's too (the ranks start apart)
        self.assertGreater(slow["mean_us"] / 1e3, 16, slow)
        self.assertTrue(16384 <= slow["p50_us"] < 32768, slow)
        # the histogram: cumulative, ending in +Inf = count; rank 3's median in [16, 32) ms
        text = got_prom[1]
        lab = {"sigma_job": str(job.id), "rank": str(SLOW)}
        les = [float(m) for m in re.findall(
            rf'sigma_job_push_lateness_seconds_bucket{{sigma_job="{job.id}",rank="{SLOW}",'
            r'le="([0-9.e+-]+)"}', text)]
        self.assertEqual(len(les), 23)
        cum = [metric(text, "sigma_job_push_lateness_seconds_bucket", le=f"{le:.9g}", **lab)
               for le in les]
        self.assertEqual(cum, sorted(cum))
        count = metric(text, "sigma_job_push_lateness_seconds_count", **lab)
        self.assertEqual(metric(text, "sigma_job_push_lateness_seconds_bucket", le="+Inf",
                                **lab), count)
        below16 = metric(text, "sigma_job_push_lateness_seconds_bucket", le="0.016384", **lab)
        below32 = metric(text, "sigma_job_push_lateness_seconds_bucket", le="0.032768", **lab)
        self.assertLess(below16, count / 2)
        self.assertGreater(below32, count / 2)
        # the plain table names it first (the slowest first)
        out = subprocess.run([ctl, "-s", node.target, "jobs", "--ranks", str(job.id)],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout, rf"straggler: rank {SLOW}, last in \d+% of rounds")
        table = out.stdout.splitlines()
        head = next(i for i, ln in enumerate(table) if ln.split()[:1] == ["RANK"])
        self.assertEqual(table[head + 1].split()[0], str(SLOW), out.stdout)
        # the node's log: rank 3 named as late, once; no other rank
        with open(node.log) as f:
            log = f.read()
        self.assertEqual(len(re.findall(rf"job {job.id}: rank {SLOW} is late", log)), 1, log)
        self.assertIsNone(re.search(rf"job {job.id}: rank [012] is late", log), log)

    def test_bad_requests(self):
        ctl = sigmactl()
        nodes = start_local_nodes(1)
        self.addCleanup(nodes.stop)
        target = nodes.targets[0]
        out = subprocess.run([ctl, "-s", target, "jobs", "--ranks", "77"],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 1)
        self.assertIn("no such job: 77", out.stderr)
        out = subprocess.run([ctl, "-s", target, "jobs", "--ranks", "x"],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 2)
        self.assertIn("at most one job id", out.stderr)
        out = subprocess.run([ctl, "-s", target, "call", "job_lateness", '{"id": 1, "x": 2}'],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 1, out.stderr)
        # a job no round of which completed: no straggler, every rank at 0
        job = sigma.create_job(nodes.targets, 2, tensors=[("t", 10)])
        self.addCleanup(sigma.destroy_job, nodes.targets, job.id)
        out = subprocess.run([ctl, "-s", target, "--json", "jobs", "--ranks"],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        (r,) = json.loads(out.stdout)
        self.assertEqual((r["workers"], r["rounds"], r["straggler"]), (2, 0, None))
        self.assertEqual([x["pushes"] for x in r["ranks"]], [0, 0])
        lt = job_lateness(nodes.targets, job.id)
        self.assertEqual((lt.nodes, lt.rounds, lt.straggler, lt.errors), (1, 0, None, []))
        self.assertEqual(lt.summary(), f"job {job.id}: no round completed yet")
        # a node that does not hold the job, and one that is not there: listed, left out
        lt = job_lateness(nodes.targets + ["unix:/nonexistent/sigma.sock"], 77)
        self.assertEqual((lt.nodes, lt.straggler, len(lt.errors)), (0, None, 2), lt.errors)
        self.assertIn("no such job", lt.errors[0])
        self.assertIn("/nonexistent/sigma.sock", lt.errors[1])

    def test_torch_stats(self):
        """sigma.torch.stats() in 4 processes: rank 0 sees rank 3 named within 2 s."""
        sgtest.need_torch()
        with start_local_nodes(1) as nodes:
            res = sgtest.run_ranks(N, torch_ranks, nodes.targets, timeout=120)
        named = res[0]
        self.assertIsNotNone(named, "sigma.torch.stats() did not name rank 3")
        self.assertLess(named[0], 2.0, named)
        self.assertRegex(named[1], rf"rank {SLOW} is \d+\.\d ms late on \d+% of")
        self.assertGreater(named[2], 0)  # the session's counters came with it
        print(f"sigma.torch.stats() named rank {SLOW} after {named[0]:.2f} s: {named[1]}")


TORCH_ROUNDS = 100


def torch_ranks(rank: int, n: int, targets: list) -> tuple | None:
    """One rank of test_torch_stats: TORCH_ROUNDS checked sums, rank SLOW DELAY
    late; rank 0 asks sigma.torch.stats() after each round until it names SLOW.
    Returns (seconds since the first round, summary, ops done) or None."""
    import torch
    import torch.distributed as dist
    import sigma.torch as sgt
    dist.init_process_group("gloo")
    sgt.init(targets)
    t0, named = time.monotonic(), None
    for k in range(TORCH_ROUNDS):
        if rank == SLOW:
            time.sleep(DELAY)
        y = sgt.push_pull(torch.full((ELEMS,), float(rank + 1 + k % 7)), average=False,
                          name="t")
        want = float(sum(q + 1 + k % 7 for q in range(n)))
        assert bool(torch.all(y == want)), f"rank {rank} round {k}: {y[0]}, want {want}"
        if k == 0:
            t0 = time.monotonic()
        if rank == 0 and named is None and k >= 2:
            st = sgt.stats()
            lt = st["lateness"]
            if (lt["straggler"] == SLOW
                    and abs(lt["ranks"][SLOW]["avg_ms"] - DELAY * 1e3) < 0.2 * DELAY * 1e3):
                named = (time.monotonic() - t0, lt["summary"], st["session"]["ops_done"])
    sgt.shutdown()
    dist.destroy_process_group()
    return named


if __name__ == "__main__":
    unittest.main(verbosity=2)
