# SPDX-License-Identifier: BSD-3-Clause
"""sigma.torch.init(etcd=...) runs an elastic job (docs/cluster.md, "Elastic
jobs"), with a real etcd started here and sigma-udpd nodes registered in it:

- rank 0 records the job in etcd (``sigmactl --etcd ... jobs`` lists it);
- three ranks push_pull several tensors each step, every element checked
  against the exact sum, while a third node registers mid-job (it joins at a
  round every rank agrees on) and then ``sigmactl --etcd ... drain`` takes
  one of the first two out (it returns once no rank uses it): every rank ends
  in epoch 2 (join, then drain), no operation failed, and the nodes the job
  uses are the two it should;
- a join and a drain that are both decided while the ranks push nothing give
  every tensor the same switch round: each goes from epoch 0 straight to
  epoch 2, and the session of epoch 1, never opened, is closed with the rest
  (a rank once crashed there, reading the counters of a session it never
  had).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
import unittest

import sgtest

torch = sgtest.need_torch()
import torch.distributed as dist  # noqa: E402

import json  # noqa: E402

import sigma.torch as sgt  # noqa: E402
from sigma.etcd import read_nodes  # noqa: E402
from sigma.launch import RankFailed  # noqa: E402
from sigma.localnodes import find_program, start_local_nodes  # noqa: E402
from test_etcd import SIZES, check_sums, value  # noqa: E402

MAX_STEPS, AFTER = 600, 10


def ctl_out(args: list, timeout: float) -> str:
    """sigmactl's output and errors (sgtest.run: no rank forked meanwhile holds its pipes)."""
    return sgtest.run(args, timeout=timeout, capture_output=True, text=True,
                      stderr=subprocess.STDOUT).stdout


def elastic_ranks(rank, n, url, cluster):
    dist.init_process_group("gloo")
    sgt.init(etcd=url, cluster=cluster, partition_bytes=65536)
    out = {"job": sgt.job().id}
    if rank == 0:
        ctl = find_program("sigmactl", "SIGMA_SIGMACTL", "app/sigmactl")
        out["jobs"] = subprocess.run([ctl, "--etcd", url, "--cluster", cluster, "jobs"],
                                     capture_output=True, text=True, timeout=10).stdout
    last = None
    for step in range(MAX_STEPS):
        ins = [value(rank, step, t, s) for t, s in enumerate(SIZES)]
        hs = [sgt.push_pull_async_(x, average=False, name=f"t{t}") for t, x in enumerate(ins)]
        for h in hs:
            sgt.synchronize(h)
        check_sums(ins, n, step)
        # rank 0 says when to stop (every rank the same steps): AFTER steps into epoch 2
        if rank == 0 and last is None and sgt.session().elastic_status()["epoch"] >= 2:
            last = step + AFTER
        go = torch.tensor([0 if last is not None and step >= last else 1])
        dist.broadcast(go, 0)
        if not go.item():
            break
        time.sleep(0.05)
    out["steps"] = step + 1
    out["elastic"] = sgt.session().elastic_status()
    out["ops_failed"] = sgt.session().stats().ops_failed
    sgt.shutdown()
    dist.destroy_process_group()
    return out


PAUSE_AT = 3


def paused_ranks(rank, n, url, cluster, flags):
    """Push PAUSE_AT steps, stop (rank 0 writes flags/paused, waits for flags/go),
    push 10 more: every sum checked."""
    dist.init_process_group("gloo")
    sgt.init(etcd=url, cluster=cluster, partition_bytes=65536)
    for step in range(PAUSE_AT + 10):
        if step == PAUSE_AT:
            if rank == 0:
                open(os.path.join(flags, "paused"), "w").close()
                # past the orchestrator's waits (200 + 60 + 60 s): it says go first
                deadline = time.monotonic() + 400
                while not os.path.exists(os.path.join(flags, "go")):
                    assert time.monotonic() < deadline, "the test never said go"
                    time.sleep(0.05)
            dist.barrier()
        ins = [value(rank, step, t, s) for t, s in enumerate(SIZES)]
        hs = [sgt.push_pull_async_(x, average=False, name=f"t{t}") for t, x in enumerate(ins)]
        for h in hs:
            sgt.synchronize(h)
        check_sums(ins, n, step)
    out = {"elastic": sgt.session().elastic_status(),
           "ops_failed": sgt.session().stats().ops_failed}
    sgt.shutdown()
    dist.destroy_process_group()
    return out


class Elastic(unittest.TestCase):
    def test_two_epochs_while_paused(self):
        tmp = tempfile.TemporaryDirectory(prefix=f"sigma-elastic-{os.getpid()}-")
        etcd = sgtest.Etcd(tmp.name)
        cluster = f"ep{os.getpid()}"
        args = ["--etcd", etcd.url, "--cluster", cluster, "--ttl", "4"]
        ctl = find_program("sigmactl", "SIGMA_SIGMACTL", "app/sigmactl")
        late, drain, seen, stage = [], [], {}, []
        ranks_done = threading.Event()

        t0 = time.monotonic()

        def jobs() -> list:
            # a loaded machine may keep sigmactl past its timeout: ask again
            try:
                return json.loads(ctl_out([ctl, "--json", "--etcd", etcd.url, "--cluster",
                                           cluster, "elastic"], 20))
            except (ValueError, subprocess.TimeoutExpired):
                return []

        def until(what: str, ok, wait: float = 60) -> bool:
            deadline = time.monotonic() + wait
            stage.append((what, round(time.monotonic() - t0, 1)))
            while time.monotonic() < deadline:
                j = jobs()
                if ok(j, os.path.exists(os.path.join(tmp.name, "paused"))):
                    return True
                time.sleep(0.1)
            seen[what] = (jobs(), os.listdir(tmp.name))
            return False

        def orchestrate():
            # both changes decided while rank 0 holds every rank before a step
            if not until("pause", lambda j, p: p and len(j) == 1, 200):
                return
            late.append(start_local_nodes(1, extra_args=args + ["--name", "late0"]))
            if not until("join", lambda j, p: j[0]["epoch"] == 1 and not j[0]["pending"]):
                return
            out = tempfile.TemporaryFile(mode="w+")
            drain.append((subprocess.Popen([ctl, "--etcd", etcd.url, "--cluster", cluster,
                                            "drain", "local0", "--timeout", "60"],
                                           stdout=out, stderr=subprocess.STDOUT), out))
            until("drain", lambda j, p: j[0]["epoch"] == 2 and not j[0]["pending"])

        def orchestrate_and_stay():
            try:
                orchestrate()
            finally:
                open(os.path.join(tmp.name, "go"), "w").close()
            ranks_done.wait(600)

        try:
            with start_local_nodes(2, extra_args=args):
                deadline = time.monotonic() + 15
                while len(read_nodes(etcd.url, cluster)) < 2:
                    self.assertLess(time.monotonic(), deadline, "the nodes did not register")
                    time.sleep(0.1)
                th = threading.Thread(target=orchestrate_and_stay)
                th.start()
                try:
                    res = sgtest.run_ranks(3, paused_ranks, etcd.url, cluster, tmp.name,
                                           timeout=500)
                except RankFailed as e:
                    ranks_done.set()
                    th.join()
                    self.fail(f"{e}\nthe orchestrator: {seen} at {stage}")
                finally:
                    ranks_done.set()
                    th.join()
                    for p, f in drain:
                        p.wait(timeout=70)
                        f.seek(0)
                        out = f.read()
                        f.close()
                        self.assertEqual(p.returncode, 0, out)
                        self.assertIn("node local0 drained", out)
        finally:
            for x in late:
                x.stop()
            etcd.stop()
            tmp.cleanup()
        self.assertEqual(seen, {}, "the job did not take the changes")
        self.assertEqual(len(drain), 1)
        for r, o in enumerate(res):
            el = o["elastic"]
            self.assertEqual((el["epoch"], el["nodes"], o["ops_failed"]), (2, 2, 0), o)
            print(f"rank {r}: epoch 2 reached from epoch 0 in one switch "
                  f"({el['switches']} tensor switches); every sum exact")

    def test_join_then_drain(self):
        tmp = tempfile.TemporaryDirectory(prefix=f"sigma-elastic-{os.getpid()}-")
        etcd = sgtest.Etcd(tmp.name)
        cluster = f"el{os.getpid()}"
        args = ["--etcd", etcd.url, "--cluster", cluster, "--ttl", "4"]
        late, drain, seen = [], {}, {}
        # the node started here dies with the thread that started it (PR_SET_PDEATHSIG):
        # that thread lives until the ranks are done
        ranks_done = threading.Event()
        ctl = find_program("sigmactl", "SIGMA_SIGMACTL", "app/sigmactl")

        def elastic() -> str:
            try:
                return ctl_out([ctl, "--etcd", etcd.url, "--cluster", cluster, "elastic"], 20)
            except subprocess.TimeoutExpired:
                return ""

        def until(what: str, ok, wait: float = 60) -> bool:
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if ok(elastic()):
                    return True
                time.sleep(0.1)
            seen[what] = elastic()
            return False

        def orchestrate():
            # the job runs: a node registers; once it is in, drain local0
            # the ranks' start (torch, under ASan on a loaded machine) may be slow
            if not until("job", lambda t: len(t.splitlines()) > 1, 200):
                return
            late.append(start_local_nodes(1, extra_args=args + ["--name", "late0"]))
            if not until("join", lambda t: "late0" in t):
                return
            t0 = time.monotonic()
            p = sgtest.run([ctl, "--etcd", etcd.url, "--cluster", cluster, "drain", "local0",
                            "--timeout", "30"], capture_output=True, text=True,
                           stderr=subprocess.STDOUT, timeout=40)
            drain.update(rc=p.returncode, out=p.stdout, s=time.monotonic() - t0)

        def orchestrate_and_stay():
            orchestrate()
            ranks_done.wait(600)

        try:
            with start_local_nodes(2, extra_args=args):
                deadline = time.monotonic() + 15
                while len(read_nodes(etcd.url, cluster)) < 2:
                    self.assertLess(time.monotonic(), deadline, "the nodes did not register")
                    time.sleep(0.1)
                th = threading.Thread(target=orchestrate_and_stay)
                th.start()
                try:
                    res = sgtest.run_ranks(3, elastic_ranks, etcd.url, cluster, timeout=240)
                finally:
                    ranks_done.set()
                    th.join()
        finally:
            for x in late:
                x.stop()
            etcd.stop()
            tmp.cleanup()
        self.assertEqual(seen, {}, "the job did not take the changes")
        self.assertIn(str(res[0]["job"]), res[0]["jobs"], "the job is not recorded in etcd")
        self.assertEqual(drain.get("rc"), 0, drain)
        self.assertIn("node local0 drained", drain["out"])
        self.assertIn("nodes local1,late0", drain["out"])
        for r, o in enumerate(res):
            el = o["elastic"]
            self.assertEqual((el["epoch"], el["nodes"], o["ops_failed"]), (2, 2, 0), o)
            print(f"rank {r}: epoch {el['epoch']} ({el['nodes']} nodes), {el['switches']} "
                  f"tensor switches, {el['waits']} waits, {el['confirms']} confirms; every "
                  f"sum of {o['steps']} steps exact")
        print(f"drain: sigmactl returned after {drain['s']:.2f} s")


if __name__ == "__main__":
    unittest.main(verbosity=2)
