# SPDX-License-Identifier: BSD-3-Clause
"""The project's scripts in BytePS's and Horovod's style (examples/byteps,
examples/horovod: the import is the only line naming Sigma), each run as
2 processes launched only by a launcher's variables, with no MASTER_ADDR and
no torch.distributed in the script:

- bpslaunch's (DMLC_*, BYTEPS_LOCAL_*; the ranks meet at DMLC_PS_ROOT_URI:
  DMLC_PS_ROOT_PORT): byteps/benchmark.py with DistributedOptimizer and with
  --ddp (sigma.torch.parallel.DistributedDataParallel), one machine of two
  workers; byteps/train_mnist.py on two machines of one worker each;
- mpirun's (OMPI_COMM_WORLD_*, PMIX_NAMESPACE; the ranks meet through a
  FileStore): horovod/synthetic_benchmark.py as mpirun would set them, and
  horovod/mnist.py (gradient_predivide_factor 2, two batches per
  allreduce, broadcast_object) under a real mpirun when there is one.

Each script saves its final parameters; they must be equal on both ranks and
bitwise equal to a gloo all-reduce reference of the same training computed
here (same model, data, seeds and fp32 operations), and no process and no
store file may be left.
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import sgtest

torch = sgtest.need_torch()
import torch.distributed as dist  # noqa: E402

from sigma.launch import free_port  # noqa: E402
from sigma.localnodes import start_local_nodes  # noqa: E402

EXAMPLES = os.path.normpath(os.path.join(sgtest.HERE, "..", "..", "examples"))
STRIP = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
         "SIGMA_RANK", "SIGMA_WORKERS", "SIGMA_JOB", "DMLC_NUM_WORKER", "DMLC_WORKER_ID",
         "BYTEPS_LOCAL_RANK", "BYTEPS_LOCAL_SIZE", "OMPI_COMM_WORLD_RANK",
         "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
         "PMI_RANK", "PMI_SIZE", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK",
         "HOROVOD_LOCAL_SIZE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "PMIX_NAMESPACE",
         "OMPI_MCA_ess_base_jobid")
N = 2


def script(rel: str) -> str:
    return os.path.join(EXAMPLES, rel)


def module(rel: str):
    """The script as a module (its main() is not run): its model and data."""
    spec = importlib.util.spec_from_file_location("peer_" + rel.replace("/", "_")[:-3],
                                                  script(rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bpslaunch_env(rank: int, machines: int, port: int, n: int = N) -> dict:
    """What bpslaunch sets for worker `rank` of n, on `machines` machines."""
    per = n // machines
    return dict(DMLC_ROLE="worker", DMLC_NUM_WORKER=str(machines),
                DMLC_WORKER_ID=str(rank // per), DMLC_NUM_SERVER="1",
                DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(port),
                BYTEPS_LOCAL_RANK=str(rank % per), BYTEPS_LOCAL_SIZE=str(per))


def mpirun_env(rank: int, job: str, n: int = N) -> dict:
    """What Open MPI's mpirun sets for rank `rank` of n on one machine."""
    return dict(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE=str(n),
                OMPI_COMM_WORLD_LOCAL_RANK=str(rank), OMPI_COMM_WORLD_LOCAL_SIZE=str(n),
                PMIX_NAMESPACE=job, OMPI_MCA_ess_base_jobid=job)


def base_env(nodes, n: int = N) -> dict:
    """The ranks' environment. With more than 2 ranks, gloo's all-reduce sums in
    another order than Sigma's arrival order, so the ranks run a deterministic
    job, pushing directly (rank order, ((x0 + x1) + x2) + x3), and the
    reference sums in that order (average_grads(ordered=True)): bitwise again."""
    env = {k: v for k, v in os.environ.items() if k not in STRIP}
    env.update(PYTHONPATH=sgtest.SRC, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if nodes is not None:  # else the nodes come from etcd
        env.update(SIGMA_NODES=nodes.env())
    if n > 2:
        env.update(SIGMA_MODE="deterministic", SIGMA_LOCAL_AGGREGATION="0")
    return env


def run_ranks(argv: list, envs: list, timeout: float = 150) -> list[str]:
    """One process per env; every one must exit 0. A failure kills the rest."""
    procs = [subprocess.Popen(argv, env=e, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
             for e in envs]
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in procs):
            if any(p.returncode not in (None, 0) for p in procs) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        outs = [p.communicate()[0] for p in procs]
    for r, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {r} exited {p.returncode}:\n" + \
            "\n".join(f"--- rank {k}:\n{o[-3000:]}" for k, o in enumerate(outs))
    return outs


def strip(state: dict) -> dict:
    return {k[len("module."):] if k.startswith("module.") else k: v for k, v in state.items()}


def rank_order_sum(t) -> None:
    """t summed over every rank in rank order, ((t0 + t1) + t2) + ..., as a
    deterministic Sigma job sums (gloo's all-reduce sums in its own order)."""
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t)
    acc = parts[0].clone()
    for q in parts[1:]:
        acc += q
    t.copy_(acc)


def rank_order_hook(_, bucket):
    """A DDP comm hook: the bucket's average, summed in rank order (base_env)."""
    t = bucket.buffer()
    rank_order_sum(t)
    t.div_(dist.get_world_size())
    fut = torch.futures.Future()
    fut.set_result(t)
    return fut


def average_grads(model, n: int, pre: float = 1.0, post: float = None) -> None:
    """Sigma's DistributedOptimizer's sum, over gloo: post * sum(pre * g)."""
    post = 1.0 / n if post is None else post
    for p in model.parameters():
        if pre != 1:
            p.grad.mul_(pre)
        if n > 2:
            rank_order_sum(p.grad)
        else:
            dist.all_reduce(p.grad)
        if post != 1:
            p.grad.mul_(post)


def as_bytes(model) -> bytes:
    """The state, as bytes (tensors through the result pipe would be passed as
    shared memory, which goes with the process)."""
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getvalue()


def states(results: list) -> list:
    return [torch.load(io.BytesIO(b)) for b in results]


# ---- the references: each script's training over gloo ----------------------

def ref_benchmark(rank, n, rel, init, steps, ddp):
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    mod = module(rel)
    if rel.startswith("byteps"):
        model = mod.SmallCNN(16)
        data, target = mod.synthetic_batch(rank, 8, 16)
        opt = torch.optim.SGD(model.parameters(), lr=0.01 * n, momentum=0.9)
    else:
        model = mod.make_model(64)
        data, target = mod.synthetic_batch(rank, 16, 64)
        opt = torch.optim.SGD(model.parameters(), lr=0.01 * n)
    model.load_state_dict(strip(torch.load(init)))
    net = torch.nn.parallel.DistributedDataParallel(model) if ddp else model
    if ddp and n > 2:
        net.register_comm_hook(None, rank_order_hook)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(data), target).backward()
        if not ddp:
            average_grads(model, n)
        opt.step()
    out = as_bytes(model)
    sgtest.leave_gloo(net)
    return out


def ref_mnist(rank, n, rel, seed, epochs, k, predivide):
    dist.init_process_group("gloo")
    mod = module(rel)
    hvd = rel.startswith("horovod")
    torch.manual_seed(seed + rank if hvd else seed)
    torch.set_num_threads(1)
    train_set = mod.synthetic_mnist(256, seed)
    sampler = torch.utils.data.distributed.DistributedSampler(train_set, num_replicas=n,
                                                              rank=rank)
    loader = torch.utils.data.DataLoader(train_set, batch_size=16, sampler=sampler)
    test_set = mod.synthetic_mnist(128, seed + 1)
    test_loader = torch.utils.data.DataLoader(
        test_set, batch_size=64, sampler=torch.utils.data.distributed.DistributedSampler(
            test_set, num_replicas=n, rank=rank))
    model = mod.Net()
    for t in model.state_dict().values():
        dist.broadcast(t, 0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01 * n, momentum=0.5)
    F = torch.nn.functional
    for epoch in range(1, epochs + 1):
        model.train()
        sampler.set_epoch(epoch)
        batches = list(loader) if hvd else loader
        if not hvd:
            for data, target in batches:
                opt.zero_grad()
                F.nll_loss(model(data), target).backward()
                average_grads(model, n)
                opt.step()
        else:
            for i in range(0, len(batches) - k + 1, k):
                opt.zero_grad()
                for data, target in batches[i:i + k]:
                    (F.nll_loss(model(data), target) / k).backward()
                average_grads(model, n, 1 / predivide, predivide / n)
                opt.step()
        model.eval()
        with torch.no_grad():
            for data, _ in test_loader:  # as the script does (the loader draws a seed)
                model(data)
    dist.destroy_process_group()
    return as_bytes(model)


def stray(rel: str) -> list[int]:
    """Processes running the script (none may be left)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if script(rel).encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def stores() -> set:
    return {f for f in os.listdir(tempfile.gettempdir()) if f.startswith("sigma-mpirun-")}


BENCH = ["--num-warmup-batches", "1", "--num-batches-per-iter", "2", "--num-iters", "2"]
BENCH_STEPS = 1 + 2 * 2


class PeerScripts(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sg_peers_")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.stores = stores()

    def tearDown(self):
        self.assertEqual(stores() - self.stores, set(), "the FileStore's file is left")

    def check(self, rel, saved, ref, what):
        got = [strip(torch.load(f)) for f in saved]
        n = len(saved)
        for k in ref[0]:
            for r in range(n):
                self.assertTrue(torch.equal(got[r][k], ref[r][k]),
                                f"{what}: rank {r}'s {k} differs from gloo's by "
                                f"{(got[r][k].double() - ref[r][k].double()).abs().max()}")
        for k, v in got[0].items():
            if "running" not in k and "num_batches" not in k:  # buffers are each rank's
                for r in range(1, n):
                    self.assertTrue(torch.equal(v, got[r][k]), f"{what}: {k} differs on "
                                    f"rank {r}")
        self.assertEqual(stray(rel), [], f"{what}: a rank is left")
        print(f"{what}: {len(ref[0])} tensors on {n} ranks bitwise equal to gloo's" +
              (" (rank-order sums: a deterministic job)" if n > 2 else ""))

    def benchmark(self, rel, envs, extra, what):
        save = os.path.join(self.tmp, "bench.{rank}")
        n = len(envs)
        outs = run_ranks([sys.executable, script(rel)] + BENCH + extra + ["--save", save], envs)
        init = [torch.load(save.format(rank=r) + ".init") for r in range(n)]
        for r in range(1, n):
            for k, v in init[0].items():
                self.assertTrue(torch.equal(v, init[r][k]),
                                f"{what}: {k}: rank 0's not broadcast to rank {r}")
        ref = states(sgtest.run_ranks(n, ref_benchmark, rel, save.format(rank=0) + ".init",
                                      BENCH_STEPS, "--ddp" in extra, timeout=90))
        self.check(rel, [save.format(rank=r) + ".final" for r in range(n)], ref, what)
        return outs

    def timed(self, what: str, t0: float) -> None:
        print(f"{what}: {time.monotonic() - t0:.1f} s")

    def test_byteps_benchmark(self):
        with start_local_nodes(1) as nodes:
            for extra in ([], ["--ddp"]):
                port = free_port()
                envs = [dict(base_env(nodes), **bpslaunch_env(r, 1, port)) for r in range(N)]
                how = " ".join(["byteps/benchmark.py"] + extra)
                outs = self.benchmark("byteps/benchmark.py", envs, extra,
                                      f"{how} under bpslaunch's variables (1 machine, 2 "
                                      "workers)")
                self.assertIn("Img/sec per rank", outs[0])

    def test_byteps_mnist(self):
        with start_local_nodes(1) as nodes:
            port = free_port()
            save = os.path.join(self.tmp, "mnist.{rank}")
            envs = [dict(base_env(nodes), **bpslaunch_env(r, 2, port)) for r in range(N)]
            outs = run_ranks([sys.executable, script("byteps/train_mnist.py"), "--save", save],
                             envs)
            self.assertIn("Test set: Average loss", outs[0])
            ref = states(sgtest.run_ranks(N, ref_mnist, "byteps/train_mnist.py", 42, 1, 1, 1.0,
                                          timeout=90))
            self.check("byteps/train_mnist.py", [save.format(rank=r) for r in range(N)], ref,
                       "byteps/train_mnist.py under bpslaunch's variables (2 machines)")

    def test_horovod_benchmark(self):
        with start_local_nodes(1) as nodes:
            job = f"sgtest-{os.getpid()}-bench"
            envs = [dict(base_env(nodes), **mpirun_env(r, job)) for r in range(N)]
            outs = self.benchmark("horovod/synthetic_benchmark.py", envs, [],
                                  "horovod/synthetic_benchmark.py under mpirun's variables")
            self.assertIn("Total samples/sec on 2 ranks", outs[0])

    def test_horovod_mnist(self):
        rel = "horovod/mnist.py"
        args = ["--batches-per-allreduce", "2", "--gradient-predivide-factor", "2"]
        with start_local_nodes(1) as nodes:
            save = os.path.join(self.tmp, "hmnist.{rank}")
            argv = [sys.executable, script(rel)] + args + ["--save", save]
            mpirun = shutil.which("mpirun")
            if mpirun:
                r = subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
                                    str(N)] + argv, env=base_env(nodes), capture_output=True,
                                   text=True, timeout=150, stdin=subprocess.DEVNULL)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                out, how = r.stdout, "a real mpirun"
            else:
                job = f"sgtest-{os.getpid()}-mnist"
                out = run_ranks(argv, [dict(base_env(nodes), **mpirun_env(r, job))
                                       for r in range(N)])[0]
                how = "mpirun's variables (no mpirun here)"
            self.assertIn("Test set: Average loss", out)
            ref = states(sgtest.run_ranks(N, ref_mnist, rel, 42, 1, 2, 2.0, timeout=90))
            self.check(rel, [save.format(rank=r) for r in range(N)], ref,
                       f"{rel} {' '.join(args)} under {how}")

    # ---- 4 ranks: deterministic jobs, against rank-order sums over gloo (base_env)

    def test_byteps_benchmark_4(self):
        t0 = time.monotonic()
        with start_local_nodes(1) as nodes:
            for extra in ([], ["--ddp"]):
                port = free_port()
                envs = [dict(base_env(nodes, 4), **bpslaunch_env(r, 2, port, 4))
                        for r in range(4)]
                how = " ".join(["byteps/benchmark.py"] + extra)
                outs = self.benchmark("byteps/benchmark.py", envs, extra,
                                      f"{how} under bpslaunch's variables (2 machines of 2 "
                                      "workers)")
                self.assertIn("Img/sec per rank", outs[0])
        self.timed("byteps/benchmark.py and --ddp, 4 ranks", t0)

    def test_horovod_benchmark_4(self):
        t0 = time.monotonic()
        with start_local_nodes(1) as nodes:
            job = f"sgtest-{os.getpid()}-bench4"
            envs = [dict(base_env(nodes, 4), **mpirun_env(r, job, 4)) for r in range(4)]
            outs = self.benchmark("horovod/synthetic_benchmark.py", envs, [],
                                  "horovod/synthetic_benchmark.py under mpirun's variables")
            self.assertIn("Total samples/sec on 4 ranks", outs[0])
        self.timed("horovod/synthetic_benchmark.py, 4 ranks", t0)

    def test_byteps_mnist_4(self):
        t0 = time.monotonic()
        rel = "byteps/train_mnist.py"
        with start_local_nodes(1) as nodes:
            port = free_port()
            save = os.path.join(self.tmp, "mnist4.{rank}")
            envs = [dict(base_env(nodes, 4), **bpslaunch_env(r, 4, port, 4)) for r in range(4)]
            outs = run_ranks([sys.executable, script(rel), "--save", save], envs)
            self.assertIn("Test set: Average loss", outs[0])
            ref = states(sgtest.run_ranks(4, ref_mnist, rel, 42, 1, 1, 1.0, timeout=90))
            self.check(rel, [save.format(rank=r) for r in range(4)], ref,
                       f"{rel} under bpslaunch's variables (4 machines)")
        self.timed(f"{rel}, 4 ranks", t0)

    def test_horovod_mnist_4(self):
        t0 = time.monotonic()
        rel = "horovod/mnist.py"
        args = ["--batches-per-allreduce", "2", "--gradient-predivide-factor", "2"]
        with start_local_nodes(1) as nodes:
            save = os.path.join(self.tmp, "hmnist4.{rank}")
            job = f"sgtest-{os.getpid()}-mnist4"
            outs = run_ranks([sys.executable, script(rel)] + args + ["--save", save],
                             [dict(base_env(nodes, 4), **mpirun_env(r, job, 4))
                              for r in range(4)])
            self.assertIn("Test set: Average loss", outs[0])
            ref = states(sgtest.run_ranks(4, ref_mnist, rel, 42, 1, 2, 2.0, timeout=90))
            self.check(rel, [save.format(rank=r) for r in range(4)], ref,
                       f"{rel} {' '.join(args)} under mpirun's variables")
        self.timed(f"{rel}, 4 ranks", t0)

    # ---- through etcd alone: no scheduler address, no mpirun job id, no node list

    def through_etcd(self, envs: list, run: str) -> list:
        """The ranks' environments with etcd instead of a node list and a store
        (a real etcd, and a node registered in it, for this test)."""
        etcd = sgtest.Etcd(self.tmp)
        self.addCleanup(etcd.stop)
        cluster = f"peers{os.getpid()}"
        nodes = start_local_nodes(1, extra_args=["--etcd", etcd.url, "--cluster", cluster])
        self.addCleanup(nodes.__exit__, None, None, None)
        sgtest.wait_registered(etcd.url, cluster, 1)
        out = []
        for e in envs:
            e = {k: v for k, v in e.items() if k not in ("DMLC_PS_ROOT_URI", "PMIX_NAMESPACE",
                                                         "DMLC_PS_ROOT_PORT",
                                                         "OMPI_MCA_ess_base_jobid")}
            out.append(dict(e, SIGMA_ETCD=etcd.url, SIGMA_CLUSTER=cluster, SIGMA_RUN_ID=run))
        return out

    def test_horovod_benchmark_etcd(self):
        envs = self.through_etcd([dict(base_env(None), **mpirun_env(r, "x"))
                                  for r in range(N)], "hvdbench")
        outs = self.benchmark("horovod/synthetic_benchmark.py", envs, [],
                              "horovod/synthetic_benchmark.py under mpirun's variables "
                              "(no job id) and SIGMA_ETCD alone")
        self.assertIn("Total samples/sec on 2 ranks", outs[0])

    def test_byteps_mnist_etcd(self):
        rel = "byteps/train_mnist.py"
        save = os.path.join(self.tmp, "emnist.{rank}")
        envs = self.through_etcd([dict(base_env(None), **bpslaunch_env(r, 2, 1))
                                  for r in range(N)], "bpsmnist")
        outs = run_ranks([sys.executable, script(rel), "--save", save], envs)
        self.assertIn("Test set: Average loss", outs[0])
        ref = states(sgtest.run_ranks(N, ref_mnist, rel, 42, 1, 1, 1.0, timeout=90))
        self.check(rel, [save.format(rank=r) for r in range(N)], ref,
                   f"{rel} under bpslaunch's variables (2 machines, no scheduler address) "
                   "and SIGMA_ETCD alone")


if __name__ == "__main__":
    unittest.main(verbosity=2)
