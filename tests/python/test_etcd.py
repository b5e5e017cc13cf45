# SPDX-License-Identifier: BSD-3-Clause
"""sigma.torch on an etcd-managed cluster, with a real etcd started here (on
probed-free loopback ports) and three sigma-udpd nodes registered in it under
a 4 s lease, renewed every 1.3 s, so a renewal may come 2.7 s late (under a
2 s lease, 1.3 s, both surviving nodes lost theirs in one CI run of the
sanitizer build on a slow machine):

- init(etcd=, cluster=) with no node list: rank 0 makes the job on the nodes
  read from etcd (checked against the nodes this test started);
- three ranks push_pull several tensors each step, every element checked
  against the exact sum; one node is SIGKILLed in the middle of a step: its
  lease expires, every rank loses it and moves its keys to the survivors, and
  every sum, of that step and of the later ones, stays exact;
- refusals at init(): etcd unreachable, a cluster without nodes, a bad
  cluster name, tensors= (failover needs an open job), cluster= alone.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
import unittest

import sgtest

torch = sgtest.need_torch()
import torch.distributed as dist  # noqa: E402

import sigma  # noqa: E402
import sigma.torch as sgt  # noqa: E402
from sigma.etcd import read_nodes  # noqa: E402
from sigma.localnodes import start_local_nodes  # noqa: E402

STEPS, KILL_AT = 10, 3
SIZES = [60000, 1000, 70001, 5, 40000, 123457, 3000, 65536]


def value(rank: int, step: int, t: int, n: int) -> torch.Tensor:
    """Rank's tensor t of step: small integers, so that fp32 sums are exact."""
    i = torch.arange(n, dtype=torch.float32)
    return (i * (t + 1) + rank * 1000 + step * 7) % 4096


def check_sums(ins: list, n: int, step: int) -> None:
    """Each tensor of the step is the exact sum of the n ranks' (test_elastic.py too)."""
    for t, (x, s) in enumerate(zip(ins, SIZES)):
        want = sum(value(r, step, t, s) for r in range(n))
        assert torch.equal(x, want), f"step {step} tensor {t}: " \
            f"{(x - want).abs().max().item()} off"


def etcd_ranks(rank, n, url, cluster, victim_pid):
    dist.init_process_group("gloo")
    sgt.init(etcd=url, cluster=cluster, partition_bytes=65536)  # no nodes=, no SIGMA_NODES
    out = {"job_nodes": sorted(x.name for x in sgt.job().nodes)}
    for step in range(STEPS):
        ins = [value(rank, step, t, s) for t, s in enumerate(SIZES)]
        dist.barrier()
        hs = [sgt.push_pull_async_(x, average=False, name=f"t{t}") for t, x in enumerate(ins)]
        if step == KILL_AT and rank == 0:  # mid-step: every rank has pushes in flight
            os.kill(victim_pid, signal.SIGKILL)
            out["killed_at"] = time.monotonic()
        for h in hs:
            sgt.synchronize(h)
        check_sums(ins, n, step)
        if step == KILL_AT and rank == 0:
            out["kill_to_end_of_step_s"] = time.monotonic() - out["killed_at"]
    st = sgt.session().stats()
    out.update(nodes_lost=st.nodes_lost, keys_moved=st.keys_moved,
               membership_changes=st.membership_changes, ops_failed=st.ops_failed)
    assert st.nodes_lost == 1 and st.keys_moved > 0 and st.ops_failed == 0, out
    sgt.shutdown()  # rank 0 destroys the job on the two nodes left
    dist.destroy_process_group()
    return out


class Etcd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix=f"sigma-etcd-{os.getpid()}-")
        cls.etcd = sgtest.Etcd(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.etcd.stop()
        cls.tmp.cleanup()

    def test_failover_from_python(self):
        cluster = f"py{os.getpid()}"
        with start_local_nodes(3, extra_args=["--etcd", self.etcd.url, "--cluster", cluster,
                                              "--ttl", "4"]) as nodes:
            sgtest.wait_registered(self.etcd.url, cluster, 3)
            found = read_nodes(self.etcd.url, cluster)
            self.assertEqual([(x.name, x.control) for x in found],
                             [(x.name, x.target) for x in nodes.nodes])
            victim = nodes.nodes[1]
            res = sgtest.run_ranks(3, etcd_ranks, self.etcd.url, cluster, victim.proc.pid,
                                   timeout=150)
            self.assertIsNotNone(victim.proc.poll(), "the victim still runs")
            left = [x.name for x in read_nodes(self.etcd.url, cluster)]
            self.assertEqual(left, ["local0", "local2"])
        self.assertEqual(res[0]["job_nodes"], ["local0", "local1", "local2"])
        for r, o in enumerate(res):
            print(f"rank {r}: lost {o['nodes_lost']} node, moved {o['keys_moved']} keys, "
                  f"{o['membership_changes']} membership changes; every sum of {STEPS} steps "
                  f"exact" + (f"; the step of the kill took {o['kill_to_end_of_step_s']:.2f} "
                              "s after it (lease TTL 4 s)" if r == 0 else ""))

    def test_refusals(self):
        for kw, needle in (
                (dict(etcd="http://127.0.0.1:1"), "cannot read the nodes of cluster 'default'"),
                (dict(etcd=self.etcd.url, cluster="nobody"), "no summation node is registered"),
                (dict(etcd=self.etcd.url, cluster="a/b"), "cluster 'a/b'"),
                (dict(etcd="ftp://x"), "not a list of http://host:port"),
                (dict(etcd=self.etcd.url, tensors=[("x", 10)]), "needs an open job"),
                (dict(etcd=self.etcd.url, mode="async"), "needs an open job"),
                (dict(cluster="c1"), "cluster= without etcd=")):
            with self.subTest(kw=kw):
                t0 = time.monotonic()
                with self.assertRaises(sigma.SigmaConfigError) as cm:
                    sgt.init(rank=0, size=1, **kw)
                self.assertIn(needle, str(cm.exception))
                self.assertLess(time.monotonic() - t0, 5.0)
                self.assertFalse(sgt.is_initialized())


if __name__ == "__main__":
    unittest.main(verbosity=2)
