# SPDX-License-Identifier: BSD-3-Clause
"""Local aggregation (python/sigma/local.py over libsigma's sigma_local.h)
against references computed here:

- L = 2 and L = 3 ranks on one machine, one node: push_pull of every dtype,
  sizes below L, odd and over several chunks, in place, averaged, several in
  flight and each name several steps in a row under skew, bitwise the
  local-rank-order sum of every rank's tensor (16-bit summed in fp32 and
  rounded once); the job's N is 1 (machines); the node's own counters
  ("pushes summed" and rounds, in its log when it stops) show one push per
  machine per chunk of each local rank's share, not L;
- a local rank SIGKILLed in the middle of a step: the others raise a clear
  SigmaError naming the machine and the local rank within 1 s, and no
  segment is left in /dev/shm; a local rank stopped (SIGSTOP): the others
  raise within ranks_wait; of 2 machines x 2, machine 1's local rank 1
  killed: machine 0's ranks raise within 3 s (its machine's failure, posted
  in the store), not after ranks_wait (10 s);
- mismatched LOCAL_WORLD_SIZE across ranks: a clear error at init() on every
  rank;
- a stale segment (its maker dead) is removed by the next init() on the
  machine;
- 2 machines x 2 local ranks emulated on this host (RANK, LOCAL_RANK and
  LOCAL_WORLD_SIZE per "machine"): DDP with Sigma's hook and
  DistributedOptimizer train to gloo's parameters over all 4 ranks, bitwise
  where the sums are exact (integer gradients), within the fp32 order bound
  on the example's CNN; two deterministic trainings under opposite skews are
  bitwise equal.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import time
import unittest
import zlib

import sgtest

torch = sgtest.need_torch()
import torch.distributed as dist  # noqa: E402

import sigma  # noqa: E402
import sigma.local  # noqa: E402
import sigma.torch as sgt  # noqa: E402
from sigma.localnodes import start_local_nodes  # noqa: E402

EXAMPLE = os.path.join(sgtest.HERE, "..", "..", "examples", "pytorch", "train.py")
spec = importlib.util.spec_from_file_location("sigma_example_train", EXAMPLE)
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)

ON = {"SIGMA_LOCAL_AGGREGATION": "1"}
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.int8, torch.uint8)
SIZES = (1, 2, 5, 1001, 30011)
STEPS = 3


def segments() -> list[str]:
    pre = f"sigma-local-{os.getuid()}-"
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(pre))


def value(name: str, rank: int, step: int, dt: torch.dtype, n: int) -> torch.Tensor:
    """Rank @rank's tensor @name at @step: distinct per rank, step and name."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{name}/{rank}/{step}".encode()))
    if dt.is_floating_point:
        return (torch.randn(n, generator=g, dtype=torch.float64) *
                torch.logspace(-3, 3, n, dtype=torch.float64)).to(dt)
    # no sum of 3 overflows (the node's integer overflow is not what this tests)
    lo, hi = {torch.uint8: (0, 80), torch.int8: (-40, 40)}.get(dt, (-2 ** 28, 2 ** 28))
    return torch.randint(lo, hi, (n,), generator=g, dtype=torch.int64).to(dt)


def local_sum(ts: list) -> torch.Tensor:
    """The local-rank-order sum (16-bit: in fp32, rounded once)."""
    wide = ts[0].dtype in (torch.float16, torch.bfloat16)
    acc = ts[0].float() if wide else ts[0].clone()
    for t in ts[1:]:
        acc += t.float() if wide else t
    return acc.to(ts[0].dtype)


def chunks(nbytes: int, job: sigma.Job) -> int:
    """Chunks of a tensor of @nbytes: per partition, ceil(bytes / chunk_bytes)."""
    out, left = 0, nbytes
    while left > 0:
        part = min(left, job.partition_bytes)
        out += -(-part // job.chunk_bytes)
        left -= part
    return out


def sums(rank, n, targets):
    sgt.init(targets, mode="deterministic")
    c = sgt._ctx
    assert sgt.local_size() == n and sgt.local_rank() == rank and sgt.size() == n
    assert sgt.job().workers == 1 and len(c.jobs) == n, (sgt.job().workers, len(c.jobs))
    assert isinstance(sgt.session(), sigma.local.LocalSession)
    assert segments() == [], f"segment still linked after init: {segments()}"
    pushes = 0
    for step in range(STEPS):
        handles = []
        for dt in DTYPES:
            for k in SIZES:
                name = f"t.{dt}.{k}"
                x = value(name, rank, step, dt, k)
                time.sleep(0.002 * ((rank + step) % n))  # local ranks out of step
                if (k + step) % 2:
                    handles.append((name, x, sgt.push_pull_async_(x, average=False, name=name)))
                else:
                    handles.append((name, x, sgt.push_pull_async(x, average=False, name=name)))
                lo, hi = rank * k // n, (rank + 1) * k // n
                pushes += chunks((hi - lo) * x.element_size(), sgt.job()) if hi > lo else 0
        for name, x, h in handles:
            y = sgt.synchronize(h)
            dt, k = x.dtype, x.numel()
            want = local_sum([value(name, r, step, dt, k) for r in range(n)])
            assert torch.equal(y, want), f"{name} step {step}: {(y.double() - want.double())}"
    # averaged, and one unnamed
    x = torch.full((777,), float(rank + 1))
    y = sgt.push_pull(x)
    assert torch.equal(y, torch.full((777,), (n + 1) / 2)), y[:4]
    pushes += chunks((((rank + 1) * 777 // n) - rank * 777 // n) * 4, sgt.job())
    stats = sgt.session().stats()
    assert stats.ops_failed == 0
    job = sgt.job()
    sgt.shutdown()
    return {"pushes": pushes, "chunk_bytes": job.chunk_bytes,
            "direct": sum(chunks(k * torch.tensor([], dtype=dt).element_size(), job)
                          for dt in DTYPES for k in SIZES) * STEPS + chunks(777 * 4, job)}


def node_counters(log: str) -> tuple[int, int]:
    with open(log) as f:
        m = re.search(r"(\d+) pushes summed, (\d+) rounds", f.read())
    assert m, f"no counters in the node's log {log}"
    return int(m.group(1)), int(m.group(2))


# ---- failures --------------------------------------------------------------

def killed(rank, n, targets, victim, how):
    sgt.init(targets, ranks_wait=2.0)
    x = torch.ones(20000)
    for _ in range(2):
        assert torch.equal(sgt.push_pull(x, average=False, name="x"), x * n)
    if rank == victim:
        if how == "kill":
            sgt.push_pull_async(x, average=False, name="x")  # mid-step: pushed, then gone
            time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        time.sleep(0.1 * rank)
        sgt.push_pull(x, average=False, name="x")
        raise AssertionError("the step went on without a local rank")
    except sigma.SigmaError as e:
        took, msg, err = time.monotonic() - t0, str(e), e
    assert f"local rank {victim}" in msg and "machine 0" in msg, msg
    if how == "stop":
        pid = int(re.search(r"pid (\d+)", msg).group(1))
        os.kill(pid, signal.SIGKILL)  # the stopped rank, found from the message
        assert isinstance(err, sigma.SigmaTimeoutError) and "within 2 s" in msg, msg
    else:
        assert "died" in msg, msg
    sgt.shutdown(timeout=1)
    return {"took": took, "msg": msg}


def late_peer(rank, n, targets):
    """Local rank 0 waits 1 s for local rank 1; the CPU its local thread spent meanwhile."""
    sgt.init(targets)
    x = torch.ones(1000)
    assert torch.equal(sgt.push_pull(x, average=False, name="x"), x * n)
    sess = sgt.session()
    cpu0, t0 = sess.profile()["cpu_s"], time.monotonic()
    if rank == 1:
        time.sleep(1.0)
    assert torch.equal(sgt.push_pull(x, average=False, name="x"), x * n)
    wall = time.monotonic() - t0
    cpu = sess.profile()["cpu_s"] - cpu0
    sgt.shutdown()
    return {"wall": wall, "cpu": cpu}


def killed_far(rank, n, targets):
    os.environ.update(LOCAL_RANK=str(rank % 2), LOCAL_WORLD_SIZE="2")
    sgt.init(targets, ranks_wait=10.0)
    x = torch.ones(20000)
    for _ in range(2):
        assert torch.equal(sgt.push_pull(x, average=False, name="x"), x * n)
    if rank == 3:  # before its third step: the others' shares wait for it at the node
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.monotonic()
    try:
        sgt.push_pull(x, average=False, name="x")
        raise AssertionError("the step went on without a local rank")
    except sigma.SigmaError as e:
        took, msg = time.monotonic() - t0, str(e)
    assert "local rank 1" in msg and "machine 1" in msg and "died" in msg, msg
    sgt.shutdown(timeout=1)
    return {"took": took, "msg": msg}


def one_step(rank, n, targets):
    sgt.init(targets)
    assert isinstance(sgt.session(), sigma.local.LocalSession)
    y = sgt.push_pull(torch.ones(10), average=False, name="one")
    sgt.shutdown()
    return float(y[0])


def mismatched(rank, n, targets):
    if rank == 1:
        os.environ.update(LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    try:
        sgt.init(targets, timeout=20)
        raise AssertionError("init took mismatched LOCAL_WORLD_SIZE")
    except sigma.SigmaConfigError as e:
        msg = str(e)
    assert "LOCAL_WORLD_SIZE" in msg and "sigma.torch.init" in msg, msg
    return _linger(rank, msg)


def _linger(rank, msg):
    """Rank 0 hosts the store (a TCPStore, MASTER_PORT): it stays a moment, so
    that the others read the reason there rather than lose the store."""
    if rank == 0:
        time.sleep(2.0)
    return msg


def bad_layout(rank, n, targets):
    os.environ.update(LOCAL_RANK=str(1 - rank), LOCAL_WORLD_SIZE="2")  # rank 0 says local 1
    try:
        sgt.init(targets, timeout=20)
        raise AssertionError("init took a rank numbering local aggregation cannot use")
    except sigma.SigmaConfigError as e:
        msg = str(e)
    assert "sigma.torch.init" in msg and "local rank" in msg, msg
    return _linger(rank, msg)


# ---- 2 machines x 2 local ranks vs gloo over 4 ---------------------------

LR, BATCH, TSTEPS = 0.05, 16, 4
ELEMS = 50000


class Coefs(torch.nn.Module):
    """Parameters whose gradients are the coefficients the test picks (small
    integers): every sum is exact, so Sigma's parameters must be gloo's bitwise."""

    def __init__(self) -> None:
        super().__init__()
        self.ps = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(ELEMS + k))
                                         for k in range(4))

    def forward(self, cs: list) -> torch.Tensor:
        return sum((p * c).sum() for p, c in zip(self.ps, cs))


def coefs(rank: int, step: int) -> list:
    return [(torch.arange(ELEMS + k, dtype=torch.float32) * (k + 1) + rank * 31 + step * 7)
            % 256 - 128 for k in range(4)]


def train_coefs(rank, comm):
    model = Coefs()
    sgd = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    if comm == "optimizer":
        net, opt = model, sgt.DistributedOptimizer(sgd, model.named_parameters(), name="co")
    else:
        net, opt = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.1), sgd
        if comm == "sigma":
            net.register_comm_hook(sgt.HookState(name="co"), sgt.ddp_comm_hook)
    for step in range(TSTEPS):
        opt.zero_grad()
        net(coefs(rank, step)).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def train_cnn(rank, n, gmax):
    """ex.train(..., "sigma") with a hook that records the largest local gradient."""
    model = ex.make_model()
    net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)

    def hook(state, bucket):
        gmax[0] = max(gmax[0], bucket.buffer().abs().max().item())
        return sgt.ddp_comm_hook(state, bucket)
    net.register_comm_hook(sgt.HookState(name="cnn"), hook)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=0.9)
    images, labels = ex.make_data(TSTEPS * BATCH * n, 1)
    for step in range(TSTEPS):
        lo = (step * n + rank) * BATCH
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(images[lo:lo + BATCH]),
                                          labels[lo:lo + BATCH]).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def two_machines(rank, n, targets):
    m, j = rank // 2, rank % 2
    os.environ.update(LOCAL_RANK=str(j), LOCAL_WORLD_SIZE="2")
    dist.init_process_group("gloo")
    sgt.init(targets)
    assert (sgt.local_rank(), sgt.local_size(), sgt.job().workers) == (j, 2, 2)
    assert sgt.session().plan.machine == m and len(sgt._ctx.jobs) == 2
    ref = train_coefs(rank, "gloo")
    for comm in ("sigma", "optimizer"):
        got = train_coefs(rank, comm)
        assert all(torch.equal(a, b) for a, b in zip(got, ref)), f"{comm} vs gloo: not bitwise"
    # the example's CNN: within how far fp32 summation order can move 4 ranks' training
    # (test_torch.order_bound)
    mg = ex.make_model()
    ex.train(mg, "gloo", TSTEPS, BATCH, LR, rank, n)
    gmax = [0.0]
    got = train_cnn(rank, n, gmax)
    g = torch.tensor(gmax[0])
    dist.all_reduce(g, op=dist.ReduceOp.MAX)
    bound = 4 * TSTEPS * (LR / (1 - 0.9)) * 2 * (n - 1) * 2.0 ** -24 * g.item()
    diff = max((a - b).abs().max().item() for a, b in zip(got, mg.parameters()))
    assert diff <= bound, f"CNN: Sigma vs gloo {diff} > {bound}"
    sgt.shutdown()
    # deterministic: two trainings under opposite skews, bitwise equal
    sgt.init(targets, mode="deterministic")
    runs = []
    for rev in (False, True):
        mm = ex.make_model()
        r = n - 1 - rank if rev else rank

        def skew(step, r=r):
            time.sleep(0.003 * ((r + step) % 4))
        ex.train(mm, "sigma", TSTEPS, BATCH, LR, rank, n, skew=skew)
        runs.append([p.detach().clone() for p in mm.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*runs)), "deterministic runs differ"
    sgt.shutdown()
    dist.destroy_process_group()
    return {"cnn_diff": diff, "cnn_bound": bound}


class Local(unittest.TestCase):
    def setUp(self) -> None:
        if not os.path.isdir("/dev/shm"):
            sgtest.skip("no /dev/shm")
        self.before = segments()

    def tearDown(self) -> None:
        self.assertEqual(segments(), self.before, "a shared-memory segment was left behind")

    def _sums(self, n):
        with start_local_nodes(1) as nodes:
            res = sgtest.run_ranks(n, sums, nodes.targets, timeout=150, env=ON)
            nodes.nodes[0].stop()  # it writes its counters to its log as it stops
            pushed, rounds = node_counters(nodes.nodes[0].log)
        want = sum(r["pushes"] for r in res)
        print(f"L = {n}: node summed {pushed} pushes in {rounds} rounds; one per machine per "
              f"chunk: {want}; every rank pushing would be {n * res[0]['direct']}")
        self.assertEqual(pushed, want)
        self.assertEqual(rounds, want)  # N = 1 machine: each push is a round

    def test_two_local_ranks(self):
        self._sums(2)

    def test_three_local_ranks(self):
        self._sums(3)

    def test_killed_local_rank(self):
        with start_local_nodes(1) as nodes:
            res = sgtest.run_ranks(3, killed, nodes.targets, 1, "kill", timeout=60, env=ON,
                                   allow_exit=(1,))
        for r in (0, 2):
            print(f"rank {r}: local rank 1 killed: raised after {res[r]['took']:.2f} s: "
                  f"{res[r]['msg'][:240]}")
            self.assertLess(res[r]["took"], 1.5)  # 0.2 s for rank 2 to start, 0.2 s looks

    def test_stopped_local_rank(self):
        with start_local_nodes(1) as nodes:
            res = sgtest.run_ranks(2, killed, nodes.targets, 1, "stop", timeout=60, env=ON,
                                   allow_exit=(1,))
        print(f"rank 0: local rank 1 stopped: raised after {res[0]['took']:.2f} s: "
              f"{res[0]['msg'][:240]}")
        self.assertLess(res[0]["took"], 2.0 + 1.0)
        self.assertGreaterEqual(res[0]["took"], 2.0 - 0.3)

    def test_killed_on_another_machine(self):
        with start_local_nodes(1) as nodes:
            res = sgtest.run_ranks(4, killed_far, nodes.targets, timeout=60, env=ON,
                                   allow_exit=(3,))
        for r in (0, 1, 2):
            print(f"rank {r}: machine 1's local rank 1 killed: raised after "
                  f"{res[r]['took']:.2f} s: {res[r]['msg'][:240]}")
            self.assertLess(res[r]["took"], 3.0)

    def test_mismatched_local_world_size(self):
        with start_local_nodes(1) as nodes:
            res = sgtest.run_ranks(2, mismatched, nodes.targets, timeout=60, env=ON)
            res += sgtest.run_ranks(2, bad_layout, nodes.targets, timeout=60, env=ON)
        for r, msg in enumerate(res):
            print(f"rank {r % 2}: {msg[:240]}")

    def test_stale_segment_cleaned(self):
        # a segment whose maker died (its pid in the name) goes at the next start
        import subprocess
        p = subprocess.Popen(["true"])
        p.wait()
        name = f"/dev/shm/sigma-local-{os.getuid()}-j1-m0-p{p.pid}"
        open(name, "w").close()
        with start_local_nodes(1) as nodes:
            res = sgtest.run_ranks(2, one_step, nodes.targets, timeout=60, env=ON)
        self.assertEqual(res, [2.0, 2.0])
        self.assertFalse(os.path.exists(name), "the stale segment is still there")

    def test_waiting_local_rank_sleeps(self):
        # a local rank waiting for another sleeps: spinning between the Python loop's
        # 200 us polls kept the nodes off a loaded machine's CPU (node silent)
        with start_local_nodes(1) as nodes:
            res = sgtest.run_ranks(2, late_peer, nodes.targets, timeout=60, env=ON)
        r = res[0]
        print(f"local rank 0 waited {r['wall']:.2f} s for local rank 1: its local thread "
              f"used {r['cpu']:.3f} s of CPU")
        self.assertGreaterEqual(r["wall"], 0.9)
        self.assertLess(r["cpu"], 0.25 * r["wall"])

    def test_two_machines_of_two(self):
        with start_local_nodes(2) as nodes:
            res = sgtest.run_ranks(4, two_machines, nodes.targets, timeout=240, env=ON)
        print(f"2 machines x 2: DDP hook and DistributedOptimizer bitwise gloo's on exact "
              f"sums; CNN max |diff| {max(r['cnn_diff'] for r in res):.3g} (bound "
              f"{res[0]['cnn_bound']:.3g}); deterministic runs bitwise equal")


if __name__ == "__main__":
    unittest.main(verbosity=2)
