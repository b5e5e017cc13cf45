# SPDX-License-Identifier: BSD-3-Clause
"""sigma.torch against independent references, with ranks forked from this
process (sgtest.run_ranks) and summation nodes started here:

- DDP with Sigma's hook trains the example's CNN to the parameters DDP on gloo
  reaches: bitwise with 2 ranks (a + b is one rounding whatever the order, and
  both divide by 2 exactly first), within a bound derived from fp32 summation
  order with 4 ranks; ranks skewed by injected sleeps (before backward, and in
  the hook, so buckets start at different moments on different ranks, several
  in flight); DDP's bucket rebuild after the first step;
- DistributedOptimizer (gradients pushed from their accumulation hooks) to the
  same parameters; broadcast_parameters to rank 0's;
- push_pull in fp32, fp16, bf16 and int32 against the rank-order sum of every
  rank's tensor (all-gathered over gloo): deterministic mode bitwise for every
  dtype (16-bit summed in fp32 and rounded once), two deterministic trainings
  under opposite skews bitwise equal;
- async mode: the nodes' store ends as the initial parameters plus every
  rank's pushed deltas;
- a rank stopped (SIGSTOP) in the middle of its backward for longer than the
  node-silent bound does not fail the step, whose gradients are gloo's;
- a killed node makes the step raise SigmaNodeSilentError within the
  node-silent bound, a dead rank SigmaRanksMissingError within ranks_wait,
  with Sigma's message; bad configuration fails init() on every rank, and bad
  arguments raise clear errors;
- init(auth=True): 2 ranks on a job with auth = mac, each with its own keys,
  every sum exact; the job's descriptor, another rank's, a job without auth
  and bad SIGMA_AUTH/auth= values refused with their reasons.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import threading
import time
import unittest
import unittest.mock

import sgtest

torch = sgtest.need_torch()
import torch.distributed as dist  # noqa: E402

import sigma  # noqa: E402
import sigma.torch as sgt  # noqa: E402
from sigma.localnodes import start_local_nodes  # noqa: E402

EXAMPLE = os.environ.get("SIGMA_EXAMPLE") or os.path.join(sgtest.HERE, "..", "..", "examples",
                                                          "pytorch", "train.py")
spec = importlib.util.spec_from_file_location("sigma_example_train", EXAMPLE)
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)

STEPS, BATCH, LR = 5, 16, 0.05
U = 2.0 ** -24  # fp32 unit roundoff


def params(model) -> list:
    return [p.detach().clone() for p in model.parameters()]


def max_diff(a, b) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def gather(t):
    """Every rank's t, over gloo (as bytes: gloo takes neither bf16 nor int16)."""
    bits = t.view(torch.uint8)
    out = [torch.empty_like(bits) for _ in range(dist.get_world_size())]
    dist.all_gather(out, bits)
    return [o.view(t.dtype) for o in out]


def rank_order_sum(ts):
    acc = ts[0].float()
    for t in ts[1:]:
        acc = acc + t.float()
    return acc.to(ts[0].dtype)


class SkewHook:
    """Sigma's DDP hook after a sleep that depends on rank, step and bucket, so
    that ranks start each bucket at different moments; records the largest
    local gradient (for the summation-order bound)."""

    def __init__(self, rank: int, n: int, reverse: bool = False) -> None:
        self.rank, self.n, self.step, self.reverse = rank, n, 0, reverse
        self.gmax = 0.0
        self.buckets = set()

    def __call__(self, state, bucket):
        r = self.n - 1 - self.rank if self.reverse else self.rank
        time.sleep(0.004 * ((r * 3 + self.step + bucket.index()) % 4))
        self.gmax = max(self.gmax, bucket.buffer().abs().max().item())
        self.buckets.add((bucket.index(), bucket.buffer().numel()))
        return sgt.ddp_comm_hook(state, bucket)


def train_sigma(rank, n, hook, seed_skew=0):
    model = ex.make_model()
    net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)
    net.register_comm_hook(sgt.HookState(name=f"run{seed_skew}"), hook.__call__)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=0.9)
    images, labels = ex.make_data(STEPS * BATCH * n, 1)
    for step in range(STEPS):
        hook.step = step
        lo = (step * n + rank) * BATCH
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(images[lo:lo + BATCH]),
                                          labels[lo:lo + BATCH]).backward()
        opt.step()
    return model


def gloo_reference(rank, n):
    m = ex.make_model()
    ex.train(m, "gloo", STEPS, BATCH, LR, rank, n)
    return params(m)


def order_bound(n, steps, gmax):
    """How far two trainings whose gradient sums differ only in fp32 summation
    order may drift apart: each averaged gradient element is N - 1 fp32
    additions in some order on each side, which differ by at most
    2(N-1) u sum|g_i| / N <= 2(N-1) u gmax. SGD with momentum 0.9 moves a
    parameter by at most lr/(1-0.9) per unit of gradient, over `steps` steps;
    x4 for what a difference does to later gradients over a few small steps."""
    return 4 * steps * (LR / (1 - 0.9)) * 2 * (n - 1) * U * gmax


# ---- 4 ranks, skewed by seconds: several buckets in flight, none fails ------

DEEP_STEPS, DEEP_PARAMS, DEEP_ELEMS, DEEP_SLEEP = 3, 8, 100000, 0.15


class Coefs(torch.nn.Module):
    """DEEP_PARAMS parameters of DEEP_ELEMS elements (400 KB: a DDP bucket of
    bucket_cap_mb 0.3 each, but for DDP's first bucket, of up to 1 MB);
    forward is the sum of p_i * c_i, so that backward makes p_i's gradient c_i,
    which the test chose: small integers, whose sums are exact in fp32."""

    def __init__(self) -> None:
        super().__init__()
        self.ps = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(DEEP_ELEMS))
                                         for _ in range(DEEP_PARAMS))

    def forward(self, cs: list) -> torch.Tensor:
        return sum((p * c).sum() for p, c in zip(self.ps, cs))


def coefs(rank: int, step: int) -> list:
    i = torch.arange(DEEP_ELEMS, dtype=torch.float32)
    return [(i * (k + 1) + rank * 31 + step * 7) % 256 - 128 for k in range(DEEP_PARAMS)]


class DeepSkewHook:
    """Sigma's DDP hook after DEEP_SLEEP x rank s before every bucket: within a
    step rank r falls DEEP_SLEEP r s further behind with each bucket, so rank 3
    hands its last of 6 buckets to Sigma 2.7 s after rank 0 did, while rank 0
    has all of them in flight: longer than the node's slot timeout (1 s,
    WORKER_LOST) and than the node-silent bound (2.2 s)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.buckets: set = set()

    def __call__(self, state, bucket):
        time.sleep(DEEP_SLEEP * self.rank)
        self.buckets.add(bucket.index())
        return sgt.ddp_comm_hook(state, bucket)


def deep_skew(rank, n, targets):
    dist.init_process_group("gloo")
    sgt.init(targets)
    model = Coefs()
    net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.3)
    hook = DeepSkewHook(rank)
    net.register_comm_hook(sgt.HookState(name="deep"), hook.__call__)
    took = 0.0
    for step in range(DEEP_STEPS):
        every = [coefs(r, step) for r in range(n)]
        model.zero_grad()
        dist.barrier()
        t0 = time.monotonic()
        net(every[rank]).sum().backward()
        took += time.monotonic() - t0
        # every rank's c_i, divided by N first as DDP does, summed: exact
        want = [sum(c[k] / n for c in every) for k in range(DEEP_PARAMS)]
        for k, p in enumerate(model.ps):
            assert torch.equal(p.grad, want[k]), \
                f"step {step} param {k}: {(p.grad - want[k]).abs().max().item()} off"
    st = sgt.session().stats()
    out = {"buckets": len(hook.buckets), "lag_s": DEEP_SLEEP * (n - 1) * len(hook.buckets),
           "took_s": took, "silent_bound": sgt.session().silent_bound, "waits": st.waits,
           "ops_failed": st.ops_failed}
    # the skew is real: rank 3 lags by more than the short bound by its last bucket
    assert out["buckets"] >= 6 and out["lag_s"] > out["silent_bound"], out
    assert st.ops_failed == 0, out
    sgt.shutdown()
    dist.destroy_process_group()
    return out


# ---- 4 ranks: equivalence, dtypes, determinism, async, arguments ---------

def four_ranks(rank, n, targets):
    dist.init_process_group("gloo")
    out = {}
    sgt.init(targets)
    assert sgt.size() == n and sgt.rank() == rank and sgt.job().workers == n

    ref = gloo_reference(rank, n)
    hook = SkewHook(rank, n)
    got = params(train_sigma(rank, n, hook))
    gmax = torch.tensor(hook.gmax)
    dist.all_reduce(gmax, op=dist.ReduceOp.MAX)
    bound = order_bound(n, STEPS, gmax.item())
    out["ddp_diff"], out["ddp_bound"] = max_diff(got, ref), bound
    assert out["ddp_diff"] <= bound, f"DDP sigma vs gloo: {out['ddp_diff']} > {bound}"
    out["buckets"] = sorted(hook.buckets)
    assert len({i for i, _ in hook.buckets}) > 1, "want several buckets in flight"

    m = ex.make_model()
    ex.train(m, "optimizer", STEPS, BATCH, LR, rank, n)
    out["opt_diff"] = max_diff(params(m), ref)
    assert out["opt_diff"] <= bound, f"DistributedOptimizer vs gloo: {out['opt_diff']}"

    # broadcast_parameters: rank 0's values everywhere, bitwise
    torch.manual_seed(100 + rank)
    m = ex.SmallCNN()
    sgt.broadcast_parameters(m.state_dict(), root_rank=0, name="bc")
    for p in m.parameters():
        assert all(torch.equal(g, p.detach()) for g in gather(p.detach())), "broadcast"
    _bad_arguments(rank)
    sgt.shutdown()

    # deterministic: push_pull bitwise the rank-order sum, for each dtype; two
    # trainings under opposite skews bitwise equal
    # this part checks sums, not bounds: 25 resends (4.3 s), as before WAITING. In the
    # sanitizer build at load 20, 1 run in 4 had a live node leave one chunk of rank 3
    # unanswered for 10 resends (2.2 s) while ranks 1-3 waited for rank 0 here: the
    # waiting ranks' polling kept the nodes off the CPU (fixed; docs/performance.md)
    sgt.init(targets, mode="deterministic", max_retries=25)
    g = torch.Generator().manual_seed(rank)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        x = (torch.randn(70001, generator=g) * torch.logspace(-3, 3, 70001)).to(dt)
        want = rank_order_sum(gather(x))
        y = sgt.push_pull(x, average=False, name=f"x.{dt}")
        assert torch.equal(y, want), f"{dt}: {(y.float() - want.float()).abs().max()}"
        h = sgt.push_pull_async_(x, average=True, name=f"x.{dt}")
        assert sgt.synchronize(h) is x and torch.equal(x, want / n), f"{dt}: in place, averaged"
    xi = torch.randint(-2 ** 30, 2 ** 30, (1000,), dtype=torch.int32, generator=g)
    assert torch.equal(sgt.push_pull(xi, average=False, name="xi"), sum(gather(xi))), "int32"
    a = params(train_sigma(rank, n, SkewHook(rank, n), 1))
    b = params(train_sigma(rank, n, SkewHook(rank, n, reverse=True), 2))
    out["determ_equal"] = all(torch.equal(x, y) for x, y in zip(a, b))
    assert out["determ_equal"], f"deterministic runs differ by {max_diff(a, b)}"
    sgt.shutdown()

    # async: the store ends as the start plus every pushed delta
    sgt.init(targets, mode="async")
    try:
        sgt.ddp_comm_hook(None, None)
        raise AssertionError("the DDP hook took an async job")
    except sigma.SigmaConfigError as e:
        assert "async" in str(e)
    m = ex.make_model()
    start = params(m)
    pushed = {n_: torch.zeros_like(p, dtype=torch.float64) for n_, p in m.named_parameters()}
    opt = sgt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=LR),
                                   m.named_parameters(), name="as")
    images, labels = ex.make_data(STEPS * BATCH * n, 3)
    for step in range(STEPS):
        lo = (step * n + rank) * BATCH
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(images[lo:lo + BATCH]), labels[lo:lo + BATCH]
                                          ).backward()
        time.sleep(0.003 * ((rank + step) % 3))
        with torch.no_grad():  # the delta the step will push: -lr * grad (plain SGD)
            for n_, p in m.named_parameters():
                pushed[n_] -= LR * p.grad.double()
        opt.step()
    dist.barrier()
    worst = 0.0
    for (n_, p), p0 in zip(m.named_parameters(), start):
        total = pushed[n_].clone()
        dist.all_reduce(total)
        store = sgt.push_pull(torch.zeros_like(p), average=False, name=f"as.{n_}")
        diff = (store.double() - (p0.double() + total)).abs().max().item()
        worst = max(worst, diff / (1e-6 + p0.abs().max().item() + total.abs().max().item()))
    out["async_rel_err"] = worst
    assert worst < 1e-5, f"async store off by {worst} (relative)"
    sgt.shutdown()
    dist.destroy_process_group()
    return out


def _raises(fn, exc, needle):
    try:
        fn()
    except exc as e:
        assert needle in str(e), f"{needle!r} not in {e}"
        return
    raise AssertionError(f"no {exc.__name__} ({needle})")


def _bad_arguments(rank):
    E = sigma.SigmaConfigError
    t = torch.ones(4, 3)
    _raises(lambda: sgt.push_pull([1.0, 2.0]), E, "want a torch.Tensor")
    _raises(lambda: sgt.push_pull(t.t()), E, "not contiguous")
    _raises(lambda: sgt.push_pull(torch.ones(3, device="meta")), E, "on meta")
    _raises(lambda: sgt.push_pull(torch.ones(3, dtype=torch.complex64)), E, "not summed")
    _raises(lambda: sgt.push_pull(torch.ones(3, dtype=torch.bool)), E, "not summed")
    _raises(lambda: sgt.push_pull(torch.ones(0)), E, "empty")
    _raises(lambda: sgt.push_pull(torch.ones(3).to_sparse()), E, "dense")
    _raises(lambda: sgt.push_pull(torch.ones(3, dtype=torch.int64)), E, "average=True")
    _raises(lambda: sgt.push_pull(t, name=""), E, "non-empty str")
    sgt.push_pull(t, name="shape")
    _raises(lambda: sgt.push_pull(torch.ones(5), name="shape"), E, "was first pushed as 12")
    _raises(lambda: sgt.synchronize("h"), E, "want a handle")
    _raises(lambda: sgt.init(), E, "already initialised")
    _raises(lambda: sgt.DistributedOptimizer("sgd"), E, "wraps a torch.optim.Optimizer")
    m = ex.SmallCNN()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    _raises(lambda: sgt.DistributedOptimizer(opt, backward_passes_per_step=0), E, ">= 1")
    _raises(lambda: sgt.broadcast_parameters(m.state_dict(), root_rank=9), E, "root_rank 9")
    _raises(lambda: sgt.ddp_comm_hook(object(), None), E, "HookState")


class StopHook:
    """Sigma's DDP hook; once armed, rank 1 stops itself (SIGSTOP, its progress
    thread too) before handing its second bucket to Sigma, with the first one
    in flight."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.armed = False
        self.stopped = False

    def __call__(self, state, bucket):
        if self.rank == 1 and self.armed and bucket.index() == 1:
            self.armed = False
            self.stopped = True
            os.kill(os.getpid(), signal.SIGSTOP)
        return sgt.ddp_comm_hook(state, bucket)


def _continue_after(pid: int, pause: float, out: dict) -> None:
    """Once process @pid is stopped, let it be for @pause s, then SIGCONT it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                break
        time.sleep(0.005)
    out["stopped_at"] = time.monotonic()
    time.sleep(pause)
    os.kill(pid, signal.SIGCONT)


def paused_step(rank, n):
    """A DDP step through Sigma while rank 1 is stopped for longer than the
    node-silent bound: it completes, with gloo's averaged gradients."""
    pids = [None] * n
    dist.all_gather_object(pids, os.getpid())
    pause = sgt.session().silent_bound + 1.5
    model = ex.make_model()
    x = torch.randn(BATCH, 1, ex.IMAGE, ex.IMAGE, generator=torch.Generator().manual_seed(rank))
    model(x).sum().backward()
    want = [p.grad.detach().clone() / n for p in model.parameters()]
    for g in want:  # the reference: gloo's sum of every rank's gradient, halved first
        dist.all_reduce(g)
    model.zero_grad()
    net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)
    hook = StopHook(rank)
    net.register_comm_hook(sgt.HookState(name="paused"), hook.__call__)
    net(x).sum().backward()  # DDP's first step: it rebuilds its buckets (several) after it
    model.zero_grad()
    hook.armed = True
    waited: dict = {}
    if rank == 0:
        threading.Thread(target=_continue_after, args=(pids[1], pause, waited),
                         daemon=True).start()
    dist.barrier()
    t0 = time.monotonic()
    net(x).sum().backward()
    took = time.monotonic() - t0
    got = [p.grad for p in model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(got, want)), \
        f"paused step: gradients differ from gloo's by {max_diff(got, want)}"
    if rank == 0:
        # rank 0's step really waited for the stopped rank, longer than the short bound
        assert "stopped_at" in waited and took >= pause, (took, pause)
    else:
        assert hook.stopped, "rank 1 never reached its second bucket"
    return {"paused_s": took, "pause_s": pause, "silent_bound": sgt.session().silent_bound,
            "waits": sgt.session().stats().waits}


# ---- 2 ranks: bad configuration, bitwise DDP, a paused rank, a killed node -------------

def two_ranks(rank, n, targets, node_pid, tmp):
    dist.init_process_group("gloo")
    E = sigma.SigmaConfigError
    # bad configuration: refused on every rank, rank 0's reason handed on
    for kw, needle in ((dict(nodes=[]), "no summation nodes"),
                       (dict(nodes=[f"unix:{tmp}/none.sock"]), "start the node"),
                       (dict(nodes=["127.0.0.1:1"]), "needs the nodes' shared secret"),
                       (dict(nodes=targets, mode="fast"), "mode 'fast'")):
        t0 = time.monotonic()
        _raises(lambda: sgt.init(**kw, timeout=60), E, needle)
        assert time.monotonic() - t0 < 30 and not sgt.is_initialized()
        dist.barrier()
    # a rank that cannot open its session fails the others' init() at once (not
    # after the timeout), and the job rank 0 made is destroyed again
    real_session = sgt.Session
    if rank == 1:
        def refuse(*_a, **_k):
            raise sigma.SigmaConfigError("sigma: cannot open rank 1's session (the test's)")
        sgt.Session = refuse
    t0 = time.monotonic()
    try:
        _raises(lambda: sgt.init(targets, timeout=60), E,
                "cannot open rank 1's session" if rank == 1 else
                "rank 1: sigma: cannot open rank 1's session")
    finally:
        sgt.Session = real_session
    # well inside the 60 s a rank would wait without word of the failure
    assert time.monotonic() - t0 < 30 and not sgt.is_initialized()
    if rank == 0:
        assert json.loads(sigma.job.control_call(targets[0], "job_list")) == [], "job left"
    dist.barrier()
    sgt.init(targets)
    ref = gloo_reference(rank, n)
    got = params(train_sigma(rank, n, SkewHook(rank, n)))
    out = {"ddp2_diff": max_diff(got, ref)}
    assert out["ddp2_diff"] == 0.0, f"2 ranks: not bitwise gloo's ({out['ddp2_diff']})"
    out.update(paused_step(rank, n))

    model = ex.make_model()
    net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)
    handed: list = []  # when backward handed each bucket to Sigma

    def timed_hook(state, bucket):
        handed.append(time.monotonic())
        return sgt.ddp_comm_hook(state, bucket)
    net.register_comm_hook(None, timed_hook)
    x = torch.randn(BATCH, 1, ex.IMAGE, ex.IMAGE)
    for _ in range(2):
        net(x).sum().backward()
    dist.barrier()
    if rank == 0:
        os.kill(node_pid, signal.SIGKILL)
    dist.barrier()
    handed.clear()
    try:
        net(x).sum().backward()
        raise AssertionError("the step went on without its node")
    except RuntimeError as e:
        # from the first bucket handed to Sigma (not the step's own compute before it)
        out["kill_s"] = time.monotonic() - handed[0]
        out["kill_msg"] = str(e).splitlines()[0]
    # the node-silent bound, plus the progress thread's and the hook's wakeups
    bound = sgt.session().silent_bound + 0.4
    assert out["kill_s"] < bound, f"took {out['kill_s']:.2f} s, bound {bound:.2f} s"
    for want in ("SigmaNodeSilentError", "no RESULT after", "node local0", "key 0x", "round ",
                 "node silent"):
        assert want in out["kill_msg"], f"{want!r} not in {out['kill_msg']}"
    # the session is closed after the failure: a push_pull fails at once, and so does the
    # next DDP step (untimed: DDP may wait for the other rank, still in its failing step)
    t1 = time.monotonic()
    _raises(lambda: sgt.push_pull(torch.ones(3), name="after"), sigma.SigmaError,
            "session is closed")
    assert time.monotonic() - t1 < 0.5, time.monotonic() - t1
    _raises(lambda: net(x).sum().backward(), RuntimeError, "session is closed")
    try:
        sgt.shutdown(timeout=5)
    except sigma.SigmaError as e:  # rank 0 cannot destroy the job on a dead node
        assert rank == 0 and "cannot destroy" in str(e), e
    return out


# ---- 3 ranks: one dies ----------------------------------------------------

def dead_rank(rank, n, targets):
    dist.init_process_group("gloo")
    sgt.init(targets, ranks_wait=3.0)
    m = ex.make_model()
    opt = sgt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=LR),
                                   m.named_parameters())
    x = torch.randn(BATCH, 1, ex.IMAGE, ex.IMAGE)
    for _ in range(2):
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
    dist.barrier()
    if rank == 2:
        os._exit(0)
    try:
        opt.zero_grad()
        loss = m(x).sum()
        t0 = time.monotonic()  # backward pushes each gradient as it is made
        loss.backward()
        opt.step()
        raise AssertionError("the step went on without rank 2")
    except sigma.SigmaRanksMissingError as e:
        took, msg = time.monotonic() - t0, str(e)
        assert e.missing_ranks == [2], e.missing_ranks
    # ranks_wait from the first send, at the next resend (rto_max), plus the wakeups
    assert 3.0 <= took < 3.0 + 0.2 + 0.4, took
    assert "missing" in msg and "0x4" in msg, msg
    sgt.shutdown(timeout=1)
    return {"dead_rank_s": took, "dead_rank_msg": msg[:200]}


# ---- SIGMA_JOB alone, without torch.distributed -----------------------------

def env_only(rank, n, desc):
    os.environ["SIGMA_JOB"] = desc
    sgt.init()
    assert not dist.is_initialized() and sgt.size() == n and sgt.rank() == rank
    y = sgt.push_pull(torch.full((5000,), float(rank + 1)), average=False, name="e")
    assert torch.all(y == n * (n + 1) / 2), y
    sgt.shutdown()  # leaves the job to its maker
    _raises(lambda: sgt.init(mode="async"), sigma.SigmaConfigError, "is sync, not async")
    return True


def auth_ranks(rank, n, targets, plain_desc):
    """auth=True: rank 0 makes the job with auth = mac, each rank opens it with
    its own keys (from the store), and every element of every sum is exact.
    What cannot have auth says so."""
    dist.init_process_group("gloo")
    sgt.init(targets, auth=True)
    # the job as every rank knows it holds no key; this rank's session has its own
    assert sgt.job().auth and sgt.job().rank is None and "keys=" not in sgt.job().descriptor
    job = sgt.session().job
    assert job.auth and job.rank == rank and "keys=" in job.descriptor, job
    for step in range(3):
        for i, size in enumerate((5000, 70001)):
            x = torch.arange(size, dtype=torch.float32) % 97 + rank * 10 + step
            want = sum(torch.arange(size, dtype=torch.float32) % 97 + r * 10 + step
                       for r in range(n))
            y = sgt.push_pull(x, average=False, name=f"a{i}")
            assert torch.equal(y, want), f"step {step} tensor {i}: off by " \
                f"{(y - want).abs().max().item()}"
    # the job's own descriptor (no keys) opens no session
    base = sigma.Job.parse(job.descriptor.split(";rank=")[0])
    assert base.auth and base.rank is None
    _raises(lambda: sigma.Session(base, rank), sigma.SigmaConfigError, "holds no rank's keys")
    dist.barrier()
    sgt.shutdown()
    # auth that cannot be had: a job given without auth, or another rank's descriptor
    os.environ["SIGMA_JOB"] = plain_desc
    _raises(lambda: sgt.init(auth=True), sigma.SigmaConfigError, "has no auth")
    os.environ["SIGMA_JOB"] = job.descriptor.replace(f";rank={rank};", f";rank={1 - rank};")
    _raises(lambda: sgt.init(), sigma.SigmaConfigError, f"holds rank {1 - rank}'s keys")
    del os.environ["SIGMA_JOB"]
    os.environ["SIGMA_AUTH"] = "yes"
    _raises(lambda: sgt.init(targets), sigma.SigmaConfigError, "SIGMA_AUTH='yes'")
    del os.environ["SIGMA_AUTH"]
    _raises(lambda: sgt.init(targets, auth="mac"), sigma.SigmaConfigError, "want True or False")
    dist.destroy_process_group()
    return True


# ---- names matched by name, whatever the order; launcher variables ---------

def name_values(name: str, rank: int) -> torch.Tensor:
    """Rank @rank's tensor of @name: distinct per name and rank, exact in fp64."""
    k = sum(map(ord, name))
    return torch.arange(3000, dtype=torch.float64) * (k % 97 + 1) + 1e6 * rank + k


def names_by_name(rank, n, targets):
    """Ranks push the same names in opposite orders (equal sizes, so only the
    id can be wrong): every element is the sum of that name's tensors. A name
    of another size on one rank fails there at registration, naming both."""
    dist.init_process_group("gloo")
    sgt.init(targets, ranks_wait=3.0)
    names = ["a", "b", "c", "d", "e", "f"]
    if rank == 1:
        names.reverse()
    hs = [(nm, sgt.push_pull_async(name_values(nm, rank), average=False, name=nm))
          for nm in names]
    for nm, h in hs:
        got = sgt.synchronize(h, timeout=30)
        want = sum(name_values(nm, r) for r in range(n))
        assert torch.equal(got, want), \
            f"'{nm}': off by {(got - want).abs().max().item()} (ids by order of first use?)"
    # the size of one name differs: the rank that registers it second is told at once
    if rank == 0:
        sgt.session().tensor_id("m", 10, "fp32")
    dist.barrier()
    if rank == 1:
        t0 = time.monotonic()
        _raises(lambda: sgt.push_pull(torch.ones(12), name="m"), sigma.SigmaConfigError,
                "tensor 'm' is 12 fp32 elements on rank 1, but rank 0 first pushed it as 10 "
                "fp32")
        assert time.monotonic() - t0 < 2, time.monotonic() - t0
    dist.barrier()
    sgt.shutdown()
    # a job of declared tensors: each name gets its own declared id, whatever the order
    sgt.init(targets, tensors=[("da", 100), ("db", 200)], dtype="fp64")
    hs = [(nm, sgt.push_pull_async(name_values(nm, rank)[:100 if nm == "da" else 200],
                                   average=False, name=nm))
          for nm in (["da", "db"] if rank == 0 else ["db", "da"])]
    for nm, h in hs:
        got = sgt.synchronize(h, timeout=30)
        assert torch.equal(got, sum(name_values(nm, r)[:got.numel()] for r in range(n))), nm
    sgt.shutdown()
    # the same with rank 0's push in flight, and the default ranks_wait (60 s): rank 1
    # fails at registration, and rank 0 is told its reason within a few seconds
    sgt.init(targets)
    if rank == 0:
        h = sgt.push_pull_async(torch.ones(10), name="m")
    dist.barrier()
    t0 = time.monotonic()
    want = "tensor 'm' is 12 fp32 elements on rank 1, but rank 0 first pushed it as 10 fp32"
    try:
        if rank == 0:
            sgt.synchronize(h, timeout=15)
        else:
            sgt.push_pull(torch.ones(12), name="m")
        raise AssertionError(f"rank {rank}: no error for 'm'")
    except sigma.SigmaError as e:
        took, msg, config = time.monotonic() - t0, str(e), isinstance(e, sigma.SigmaConfigError)
    assert want in msg and (rank == 0 or config), msg
    assert took < 3, f"rank {rank} was told after {took:.1f} s"
    sgt.shutdown(timeout=5)
    dist.destroy_process_group()
    return {"told_s": took, "msg": msg}


LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SIGMA_RANK",
               "SIGMA_WORKERS", "SIGMA_JOB", "DMLC_NUM_WORKER", "DMLC_WORKER_ID",
               "BYTEPS_LOCAL_RANK", "BYTEPS_LOCAL_SIZE", "OMPI_COMM_WORLD_RANK",
               "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
               "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "HOROVOD_RANK",
               "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE")


def byteps_env(rank, n, targets):
    """Only BytePS's variables (one machine of n workers) and MASTER_ADDR/PORT:
    the ranks find each other with no init_process_group, and sum."""
    for k in LAUNCH_VARS:
        os.environ.pop(k, None)
    os.environ.update(DMLC_NUM_WORKER="1", DMLC_WORKER_ID="0", BYTEPS_LOCAL_RANK=str(rank),
                      BYTEPS_LOCAL_SIZE=str(n))
    sgt.init(targets)
    assert not dist.is_initialized()
    got = (sgt.rank(), sgt.size(), sgt.local_rank(), sgt.local_size())
    assert got == (rank, n, rank, n), got
    y = sgt.push_pull(name_values("x", rank), average=False, name="x")
    assert torch.equal(y, sum(name_values("x", r) for r in range(n))), "BytePS variables"
    sgt.shutdown()
    return True


def one_rank_optimizer_state(rank, n, targets):
    """broadcast_optimizer_state with one rank and no torch.distributed: a
    no-op that keeps the state."""
    for k in LAUNCH_VARS:
        os.environ.pop(k, None)
    sgt.init(targets)
    m = ex.make_model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    m(torch.ones(2, 1, ex.IMAGE, ex.IMAGE)).sum().backward()
    opt.step()
    before = [opt.state[p]["momentum_buffer"].clone() for p in m.parameters()]
    sgt.broadcast_optimizer_state(opt, root_rank=0)
    assert all(torch.equal(a, opt.state[p]["momentum_buffer"])
               for a, p in zip(before, m.parameters())), "state changed"
    sgt.shutdown()
    return True


class Torch(unittest.TestCase):
    def test_four_ranks(self):
        with start_local_nodes(2) as nodes:
            res = sgtest.run_ranks(4, four_ranks, nodes.targets, timeout=240)
        r = res[0]
        print(f"4 ranks: DDP sigma vs gloo max |diff| {r['ddp_diff']:.3g} (bound "
              f"{r['ddp_bound']:.3g}), DistributedOptimizer {r['opt_diff']:.3g}; buckets "
              f"(index, elements) {r['buckets']}; deterministic runs equal: "
              f"{r['determ_equal']}; async store relative error {r['async_rel_err']:.2g}")

    def test_deep_skew(self):
        with start_local_nodes(2) as nodes:
            res = sgtest.run_ranks(4, deep_skew, nodes.targets, timeout=200)
        for r, o in enumerate(res):
            print(f"rank {r}: {o['buckets']} buckets a step, rank 3 behind by up to "
                  f"{o['lag_s']:.1f} s (node-silent bound {o['silent_bound']:.1f} s): "
                  f"{DEEP_STEPS} steps in {o['took_s']:.1f} s, every gradient exact, none "
                  f"failed, {o['waits']} WAITING")

    def test_two_ranks_and_a_killed_node(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp, start_local_nodes(1) as nodes:
            pid = nodes.nodes[0].proc.pid
            res = sgtest.run_ranks(2, two_ranks, nodes.targets, pid, tmp, timeout=180)
        for r, o in enumerate(res):
            print(f"rank {r}: rank 1 stopped {o['pause_s']:.2f} s in backward (node-silent "
                  f"bound {o['silent_bound']:.2f} s): the step took {o['paused_s']:.2f} s, "
                  f"{o['waits']} WAITING")
            print(f"rank {r}: killed node: backward raised after {o['kill_s']:.2f} s: "
                  f"{o['kill_msg'][:200]}")

    def test_dead_rank(self):
        with start_local_nodes(1) as nodes:
            res = sgtest.run_ranks(3, dead_rank, nodes.targets, timeout=120, allow_exit=(2,))
        for r in (0, 1):
            print(f"rank {r}: rank 2 died: step raised after {res[r]['dead_rank_s']:.2f} s: "
                  f"{res[r]['dead_rank_msg']}")

    def test_sigma_job_without_torch_distributed(self):
        with start_local_nodes(1) as nodes:
            job = sigma.create_job(nodes.targets, 2)
            sgtest.run_ranks(2, env_only, job.descriptor, timeout=60)
            sigma.destroy_job(nodes.targets, job.id)  # still there: shutdown left it

    def test_auth_two_ranks(self):
        with start_local_nodes(2) as nodes:
            plain = sigma.create_job(nodes.targets, 2)
            sgtest.run_ranks(2, auth_ranks, nodes.targets, plain.descriptor, timeout=120)
            sigma.destroy_job(nodes.targets, plain.id)
            job = sigma.create_job(nodes.targets, 3, auth=True)
            self.assertEqual(len(job.ranks), 3)
            self.assertTrue(job.auth and job.rank is None and "keys=" not in job.descriptor)
            self.assertEqual([sigma.Job.parse(d).rank for d in job.ranks], [0, 1, 2])
            self.assertIn("keys=", job.ranks[1])
            self.assertNotIn(job.ranks[1], repr(job))  # no key in a repr
            sigma.destroy_job(nodes.targets, job.id)
            with self.assertRaisesRegex(sigma.SigmaConfigError, "want True"):
                sigma.create_job(nodes.targets, 2, auth=1)

    def test_names_in_any_order(self):
        with start_local_nodes(1) as nodes:
            res = sgtest.run_ranks(2, names_by_name, nodes.targets, timeout=90)
        for r, o in enumerate(res):
            print(f"rank {r}: told of rank 1's mismatch after {o['told_s']:.2f} s: "
                  f"{o['msg'][:300]}")

    def test_byteps_variables_alone(self):
        with start_local_nodes(1) as nodes:
            sgtest.run_ranks(2, byteps_env, nodes.targets, timeout=90)

    def test_one_rank_optimizer_state(self):
        with start_local_nodes(1) as nodes:
            sgtest.run_ranks(1, one_rank_optimizer_state, nodes.targets, timeout=60)

    def test_launcher_variables_refused(self):
        # conflicting sources, a size without a rank: a clear error naming the variables
        import contextlib
        import io
        saved = dict(os.environ)
        try:
            for k in LAUNCH_VARS + ("MASTER_ADDR", "MASTER_PORT"):
                os.environ.pop(k, None)
            os.environ["SIGMA_NODES"] = "unix:/nonexistent/sigma.sock"
            for env, want in (
                    (dict(RANK="0", WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="1",
                          OMPI_COMM_WORLD_SIZE="2"),
                     "RANK=0, WORLD_SIZE=2 (torch) and OMPI_COMM_WORLD_RANK=1, "
                     "OMPI_COMM_WORLD_SIZE=2 (mpirun) disagree"),
                    (dict(HOROVOD_SIZE="4", HOROVOD_RANK="1", DMLC_NUM_WORKER="2",
                          DMLC_WORKER_ID="0", BYTEPS_LOCAL_SIZE="1", BYTEPS_LOCAL_RANK="0"),
                     "disagree"),
                    (dict(DMLC_NUM_WORKER="2"), "DMLC_NUM_WORKER=2 but no DMLC_WORKER_ID"),
                    (dict(WORLD_SIZE="2"), "WORLD_SIZE=2 but no RANK"),
                    (dict(OMPI_COMM_WORLD_RANK="1"),
                     "OMPI_COMM_WORLD_RANK=1 but no OMPI_COMM_WORLD_SIZE"),
                    (dict(PMI_SIZE="3", PMI_RANK="1"), "MASTER_ADDR and MASTER_PORT")):
                with unittest.mock.patch.dict(os.environ, env):
                    with self.assertRaises(sigma.SigmaConfigError) as cm:
                        sgt.init()
                    self.assertIn(want, str(cm.exception))
                    self.assertIn("sigma.torch.init", str(cm.exception))
                self.assertFalse(sgt.is_initialized())
            # nothing set at all: a 1-rank job, said once on stderr
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                for _ in range(2):
                    with self.assertRaises(sigma.SigmaConfigError):
                        sgt.init()  # no node there: refused after the rank is known
            self.assertEqual(err.getvalue().count("running as a 1-rank job"), 1,
                             err.getvalue())
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def test_init_without_a_way_to_share(self):
        # no torch.distributed, no store, no SIGMA_JOB, 2 ranks: refused, with the ways
        saved = dict(os.environ)
        try:
            for k in LAUNCH_VARS + ("MASTER_ADDR", "MASTER_PORT"):
                os.environ.pop(k, None)
            os.environ.update(SIGMA_RANK="1", SIGMA_WORKERS="2", SIGMA_NODES="unix:/x")
            with self.assertRaises(sigma.SigmaConfigError) as cm:
                sgt.init()
            for want in ("init_process_group", "store=", "MASTER_ADDR and MASTER_PORT",
                         "mpirun"):
                self.assertIn(want, str(cm.exception))
            for kw, want in ((dict(nodes=123), "want a list of control targets"),
                             (dict(max_retries=-3), "max_retries=-3"),
                             (dict(slots="x"), "slots='x'"), (dict(timeout=0), "timeout=0")):
                with self.assertRaises(sigma.SigmaConfigError) as cm:
                    sgt.init(**kw)
                self.assertIn(want, str(cm.exception))
            os.environ["SIGMA_RANK"] = "2"
            with self.assertRaises(sigma.SigmaConfigError) as cm:
                sgt.init()
            self.assertIn("rank 2: want 0..1", str(cm.exception))
            os.environ["SIGMA_WORKERS"] = "two"
            with self.assertRaises(sigma.SigmaConfigError) as cm:
                sgt.init()
            self.assertIn("SIGMA_WORKERS='two'", str(cm.exception))
            self.assertFalse(sgt.is_initialized())
        finally:
            os.environ.clear()
            os.environ.update(saved)


if __name__ == "__main__":
    unittest.main(verbosity=2)
