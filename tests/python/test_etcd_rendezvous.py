# SPDX-License-Identifier: BSD-3-Clause
"""Ranks that meet through etcd alone (docs/python.md, "The store"): a real etcd
started here, two sigma-udpd nodes registered in it, and ranks that have only a
launcher's variables (BytePS's DMLC_* for 2 ranks, mpirun's OMPI_COMM_WORLD_*
for 3) and SIGMA_ETCD / SIGMA_CLUSTER / SIGMA_RUN_ID: no MASTER_ADDR/PORT, no
torch.distributed. They must make and join one job through etcd's keys:

- every sum exact (small integers in fp32), with the names pushed in another
  order on every rank, each step; also with the 3 ranks' local aggregation;
- broadcast_parameters, broadcast_object (root 0 and the last rank) and
  broadcast_optimizer_state give every rank the root's values, compared with
  what the root had before;
- init() again in the same processes meets again, under rank 0's new lease;
- rank 0 revokes its lease at shutdown: nothing of the run is left in etcd;
- refusals, each at once: etcd given but no rank known (never a 1-rank job),
  etcd unreachable for rank 0 and for the others, no rank 0 within the
  timeout, a second rank 0 of a live run of the same name.
"""

from __future__ import annotations

import os
import tempfile
import time
import unittest
from unittest import mock

import sgtest

torch = sgtest.need_torch()
import torch.distributed as dist  # noqa: E402

import sigma  # noqa: E402
import sigma.torch as sgt  # noqa: E402
from sigma.etcd import EtcdStore, read_keys  # noqa: E402
from sigma.localnodes import start_local_nodes  # noqa: E402

STEPS = 6
SIZES = [5000, 3, 70001, 1000]
# what run_forked sets for env://, and every launcher's: a rank here has only its own
_LAUNCH_VARS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                "LOCAL_WORLD_SIZE", "SIGMA_RANK", "SIGMA_WORKERS", "SIGMA_NODES", "SIGMA_JOB",
                "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "HOROVOD_RANK",
                "HOROVOD_SIZE", "DMLC_WORKER_ID", "DMLC_NUM_WORKER", "BYTEPS_LOCAL_RANK",
                "BYTEPS_LOCAL_SIZE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "SIGMA_ETCD",
                "SIGMA_CLUSTER", "SIGMA_RUN_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                "TORCHELASTIC_RUN_ID")


def value(rank: int, step: int, t: int, n: int) -> torch.Tensor:
    i = torch.arange(n, dtype=torch.float32)
    return (i * (t + 3) + rank * 1000 + step * 11) % 4096


def launcher_env(style: str, rank: int, n: int) -> dict:
    if style == "byteps":  # n machines of one worker each
        return {"DMLC_WORKER_ID": str(rank), "DMLC_NUM_WORKER": str(n),
                "BYTEPS_LOCAL_RANK": "0", "BYTEPS_LOCAL_SIZE": "1"}
    return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(n),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_SIZE": str(n)}


def etcd_ranks(rank, n, style, url, cluster, run):
    for k in _LAUNCH_VARS:
        os.environ.pop(k, None)
    os.environ.update(launcher_env(style, rank, n), SIGMA_ETCD=url, SIGMA_CLUSTER=cluster,
                      SIGMA_RUN_ID=run)
    sgt.init(partition_bytes=65536)
    assert not dist.is_initialized()
    out = {"size": sgt.size(), "rank": sgt.rank(),
           "store": type(sgt._c().store.store).__name__,
           "session": type(sgt.session()).__name__,
           "job_nodes": sorted(x.name for x in sgt.job().nodes)}
    for step in range(STEPS):
        order = list(range(len(SIZES)))
        order = order[rank % len(order):] + order[:rank % len(order)]  # another on each rank
        ins = {t: value(rank, step, t, SIZES[t]) for t in order}
        hs = {t: sgt.push_pull_async_(ins[t], average=False, name=f"t{t}") for t in order}
        for t in order:
            sgt.synchronize(hs[t])
            want = sum(value(r, step, t, SIZES[t]) for r in range(n))
            assert torch.equal(ins[t], want), \
                f"rank {rank} step {step} t{t}: {(ins[t] - want).abs().max().item()} off"
    torch.manual_seed(100 + rank)  # every rank starts from other parameters
    model = torch.nn.Linear(7, 3)
    out["params_before"] = {k: v.tolist() for k, v in model.state_dict().items()}
    sgt.broadcast_parameters(model.state_dict(), root_rank=0)
    out["params_after"] = {k: v.tolist() for k, v in model.state_dict().items()}
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.full((2, 7), float(rank + 1))).sum().backward()
    opt.step()  # a state of its own on each rank
    out["opt_before"] = opt.state_dict()["state"][0]["exp_avg"].tolist()
    sgt.broadcast_optimizer_state(opt, root_rank=0)
    out["opt_after"] = opt.state_dict()["state"][0]["exp_avg"].tolist()
    out["obj0"] = sgt.broadcast_object({"epoch": 7, "from": rank}, root_rank=0)
    out["obj_last"] = sgt.broadcast_object(["last", rank], root_rank=n - 1)
    sgt.shutdown()
    # init() again in the same processes: a new rendezvous (rank 0's new lease), not
    # the one just closed
    sgt.init(partition_bytes=65536)
    x = value(rank, 99, 0, 4000)
    sgt.push_pull_(x, average=False, name="again")
    assert torch.equal(x, sum(value(r, 99, 0, 4000) for r in range(n))), f"rank {rank}"
    out["again"] = sgt.rank()
    sgt.shutdown()
    return out


class EtcdRendezvous(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix=f"sigma-etcdrv-{os.getpid()}-")
        cls.etcd = sgtest.Etcd(cls.tmp.name)
        cls.cluster = f"rv{os.getpid()}"
        cls.nodes = start_local_nodes(2, extra_args=["--etcd", cls.etcd.url, "--cluster",
                                                     cls.cluster, "--ttl", "4"])
        cls.nodes.__enter__()
        sgtest.wait_registered(cls.etcd.url, cls.cluster, 2)

    @classmethod
    def tearDownClass(cls):
        cls.nodes.__exit__(None, None, None)
        cls.etcd.stop()
        cls.tmp.cleanup()

    def left_in_etcd(self, run: str) -> list:
        return read_keys(self.etcd.url, f"/sigma/{self.cluster}/rendezvous/{run}/")

    def run_job(self, style: str, n: int, env: dict = None) -> list:
        run = f"{style}{n}-{len(env or ())}-{os.getpid()}"
        res = sgtest.run_ranks(n, etcd_ranks, style, self.etcd.url, self.cluster, run,
                               timeout=120, env=env)
        for r, o in enumerate(res):
            self.assertEqual((o["rank"], o["size"], o["store"]), (r, n, "EtcdStore"))
            self.assertEqual(o["job_nodes"], ["local0", "local1"])
            for k, v in res[0]["params_before"].items():
                self.assertEqual(o["params_after"][k], v, f"rank {r} {k}")
            self.assertEqual(o["opt_after"], res[0]["opt_before"], f"rank {r}")
            self.assertEqual(o["obj0"], {"epoch": 7, "from": 0})
            self.assertEqual(o["obj_last"], ["last", n - 1])
            self.assertEqual(o["again"], r)
        # the ranks did start apart: otherwise the broadcasts prove nothing
        self.assertNotEqual(res[1]["params_before"]["weight"], res[0]["params_before"]["weight"])
        self.assertNotEqual(res[1]["opt_before"], res[0]["opt_before"])
        self.assertEqual(self.left_in_etcd(run), [])
        print(f"{n} ranks ({style} variables + SIGMA_ETCD): {STEPS} steps of "
              f"{len(SIZES)} tensors exact, broadcasts equal to the root's; nothing left "
              "in etcd")
        return res

    def test_two_ranks_byteps_vars(self):
        self.run_job("byteps", 2)

    def test_three_ranks_mpirun_vars(self):
        self.run_job("mpirun", 3)

    def test_three_ranks_local_aggregation(self):
        # one machine's ranks sum among themselves (sigma.local): its segment and
        # offsets are agreed through the store too (add() by more than 1)
        res = self.run_job("mpirun", 3, env={"SIGMA_LOCAL_AGGREGATION": "1"})
        self.assertEqual({o["session"] for o in res}, {"LocalSession"})

    def refused(self, env: dict, needle: str, bound: float = 5.0, **kw) -> None:
        clean = {k: v for k, v in os.environ.items() if k not in _LAUNCH_VARS}
        with mock.patch.dict(os.environ, dict(clean, **env), clear=True):
            t0 = time.monotonic()
            with self.assertRaises(sigma.SigmaConfigError) as cm:
                sgt.init(**kw)
            took = time.monotonic() - t0
        self.assertIn(needle, str(cm.exception))
        self.assertLess(took, bound, str(cm.exception))
        self.assertFalse(sgt.is_initialized())

    def test_refusals(self):
        here = dict(SIGMA_ETCD=self.etcd.url, SIGMA_CLUSTER=self.cluster)
        with self.subTest("no rank known: never a 1-rank job"):
            self.refused(here, "nothing says this process's rank")
        with self.subTest("etcd unreachable, rank 0 and rank 1"):
            for r in (0, 1):
                self.refused(dict(launcher_env("mpirun", r, 2), SIGMA_ETCD="http://127.0.0.1:1",
                                  SIGMA_RUN_ID="away"), "is etcd running")
        with self.subTest("no rank 0 within the timeout"):
            self.refused(dict(here, **launcher_env("byteps", 1, 2), SIGMA_RUN_ID="alone"),
                         "rank 0's rendezvous", timeout=1.0)
        with self.subTest("two rank 0 of one run"):
            first = EtcdStore(self.etcd.url, self.cluster, "twice", True, 5.0)
            try:
                self.refused(dict(here, **launcher_env("mpirun", 0, 2), SIGMA_RUN_ID="twice"),
                             "already meeting")
            finally:
                first.close()
            self.assertEqual(self.left_in_etcd("twice"), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
