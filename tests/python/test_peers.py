# SPDX-License-Identifier: BSD-3-Clause
"""sigma.torch under BytePS's and Horovod's names, against independent
references computed here over gloo (every rank's tensor all-gathered, the
sum taken in the same fp32 operations, so with 2 ranks bitwise):

- allreduce and its forms with op=Average/Sum, prescale_factor and
  postscale_factor; grouped_allreduce; Compression.fp16 and .bf16 (the node
  sums in fp32 and rounds once); push_pull's BytePS keywords and in-place
  names; broadcast and broadcast_object from rank 1; barrier;
- DistributedOptimizer with gradient_predivide_factor, synchronize() and
  skip_synchronize() around gradient clipping, op=Sum with a synchronize()
  before step() (the gradients are summed once, not twice),
  backward_passes_per_step and fp16 compression; sigma.torch.parallel.
  DistributedDataParallel (BatchNorm buffers, no_sync) against torch's DDP
  on gloo; every parameter equal on both ranks;
- what Sigma cannot do raises NotImplementedError naming the alternative,
  and every bad argument a SigmaConfigError naming the function called.
"""

from __future__ import annotations

import os
import unittest

import sgtest

torch = sgtest.need_torch()
import torch.distributed as dist  # noqa: E402

import sigma  # noqa: E402
import sigma.torch as sgt  # noqa: E402
from sigma.localnodes import start_local_nodes  # noqa: E402


def _raises(fn, exc, needle):
    try:
        fn()
    except exc as e:
        assert needle in str(e), f"{needle!r} not in {e!r}"
        return
    raise AssertionError(f"no {exc.__name__} ({needle})")


def gather(t):
    """Every rank's t, over gloo (as bytes: gloo takes no bf16)."""
    bits = t.contiguous().view(torch.uint8)
    out = [torch.empty_like(bits) for _ in range(dist.get_world_size())]
    dist.all_gather(out, bits)
    return [o.view(t.dtype).view(t.shape) for o in out]


def same(a, b, what):
    assert a.dtype == b.dtype and torch.equal(a, b), \
        f"{what}: max |diff| {(a.double() - b.double()).abs().max().item()}"


def values(rank, n=1000, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return (torch.randn(n, generator=g) * 3).to(dtype)


def ops(rank, n, targets):
    """The collective operations against gloo-gathered references."""
    dist.init_process_group("gloo")
    sgt.init(targets)
    x = values(rank)
    xs = gather(x)
    s = xs[0] + xs[1]
    same(sgt.allreduce(x, name="a"), s / 2, "allreduce (Average)")
    same(sgt.allreduce(x, name="a", op=sgt.Sum), s, "allreduce op=Sum")
    same(sgt.allreduce(x, average=False), s, "allreduce average=False")
    got = sgt.allreduce(x, name="a", prescale_factor=0.25, postscale_factor=3.0)
    same(got, (xs[0] * 0.25 + xs[1] * 0.25) * (3.0 / 2), "allreduce pre/postscale")
    same(x, values(rank), "allreduce left its input")
    y = x.clone()
    assert sgt.allreduce_(y, name="a", op=sgt.Sum) is y
    same(y, s, "allreduce_")
    y = x.clone()
    h = sgt.allreduce_async_(y, name="a", op=sgt.Average)
    assert sgt.synchronize(h) is y and sgt.poll(h)
    same(y, s / 2, "allreduce_async_")
    same(sgt.synchronize(sgt.allreduce_async(x, name="a")), s / 2, "allreduce_async")
    w = torch.nn.Parameter(x.clone())  # a leaf that requires grad, summed in place
    assert sgt.allreduce_(w, name="a", postscale_factor=3.0) is w
    same(w.detach(), s * (3.0 / 2), "allreduce_ of a parameter")
    # compressions: what goes on the wire is summed in fp32 by the node, rounded once
    for comp, dt in ((sgt.Compression.fp16, torch.float16), (sgt.Compression.bf16,
                                                              torch.bfloat16)):
        w = [t.to(dt).float() for t in xs]
        same(sgt.allreduce(x, name=f"c{dt}", compression=comp),
             (w[0] + w[1]).to(dt).float() / 2, f"allreduce compression {dt}")
        same(sgt.push_pull(x, average=False, name=f"p{dt}", version=1, priority=-3,
                           compression=comp), (w[0] + w[1]).to(dt).float(),
             f"push_pull compression {dt}")
    ints = torch.arange(10, dtype=torch.int32) * (rank + 1)
    same(sgt.allreduce(ints, op=sgt.Sum, name="i"), torch.arange(10, dtype=torch.int32) * 3,
         "int32 Sum")
    same(sgt.allreduce(ints, op=sgt.Sum, name="i", compression=sgt.Compression.fp16),
         torch.arange(10, dtype=torch.int32) * 3, "fp16 compression leaves ints")
    # grouped
    ts = [values(rank, 10 + i, seed=i) for i in range(3)]
    refs = [sum(gather(t)) for t in ts]
    for got, ref in zip(sgt.grouped_allreduce(ts, name="g", op=sgt.Sum), refs):
        same(got, ref, "grouped_allreduce")
    cp = [t.clone() for t in ts]
    h = sgt.grouped_allreduce_async_(cp, name="g")
    outs = sgt.synchronize(h)
    assert all(o is c for o, c in zip(outs, cp)) and sgt.poll(h)
    for got, ref in zip(cp, refs):
        same(got, ref / 2, "grouped_allreduce_async_")
    for got, ref in zip(sgt.grouped_allreduce_([t.clone() for t in ts]), refs):
        same(got, ref / 2, "grouped_allreduce_")
    # BytePS's names
    y = x.clone()
    assert sgt.push_pull_inplace(y, name="a", average=False) is y
    same(y, s, "push_pull_inplace")
    y = x.clone()
    same(sgt.synchronize(sgt.push_pull_async_inplace(y, name="a", version=2, priority=1)),
         s / 2, "push_pull_async_inplace")
    sgt.declare("Gradient.fc1.weight")
    # broadcasts from rank 1
    b = values(rank, 50, seed=7)
    root = gather(b)[1]
    same(sgt.broadcast(b, root_rank=1, name="b"), root, "broadcast")
    same(b, values(rank, 50, seed=7), "broadcast left its input")
    assert sgt.broadcast_(b, 1) is b
    same(b, root, "broadcast_")
    b = values(rank, 50, seed=7)
    same(sgt.synchronize(sgt.broadcast_async(b, 1, name="b")), root, "broadcast_async")
    obj = sgt.broadcast_object({"epoch": 3 + rank, "lr": [0.1 * rank]}, root_rank=1)
    assert obj == {"epoch": 4, "lr": [0.1]}, obj
    assert sgt.broadcast_object("again", 0) == "again"
    sgt.barrier()
    assert (sgt.cross_rank(), sgt.cross_size(), sgt.is_homogeneous()) == (0, 1, True)
    # what Sigma cannot do
    N = NotImplementedError
    _raises(lambda: sgt.allgather(x), N, "allgather is not in Sigma")
    _raises(lambda: sgt.alltoall(x), N, "all_to_all")
    _raises(lambda: sgt.allreduce(x, op=sgt.Adasum), N, "op=sigma.torch.Average")
    _raises(lambda: sgt.allreduce(x, op=sgt.Max), N, "op=Max")
    _raises(lambda: sgt.join(), N, "same number of batches")
    sgt.barrier()  # nothing above pushed anything
    sgt.shutdown()
    dist.destroy_process_group()
    return True


class Net(torch.nn.Module):
    """Tiny: a linear layer, BatchNorm (buffers), a linear layer, and one
    parameter backward never reaches."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.bn = torch.nn.BatchNorm1d(16)
        self.fc2 = torch.nn.Linear(16, 4)
        self.unused = torch.nn.Parameter(torch.zeros(3))

    def forward(self, x):
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 + step * 10 + rank)
    return torch.randn(6, 8, generator=g), torch.randint(0, 4, (6,), generator=g)


def loss_of(model, rank, step):
    x, y = batch(rank, step)
    return torch.nn.functional.cross_entropy(model(x), y)


STEPS = 4


def reference(rank, kind):
    """The same training over gloo: gradients all-reduced by hand in the same
    fp32 operations as Sigma's, or torch's own DDP."""
    torch.manual_seed(0)
    m = Net()
    if kind == "ddp":
        net = torch.nn.parallel.DistributedDataParallel(m, find_unused_parameters=True)
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        for step in range(STEPS):
            opt.zero_grad()
            if step == 1:
                with net.no_sync():
                    loss_of(net, rank, 100 + step).backward()
            loss_of(net, rank, step).backward()
            opt.step()
        return m
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    passes = 2 if kind == "passes" else 1
    for step in range(STEPS):
        opt.zero_grad()
        for k in range(passes):
            loss_of(m, rank, step * passes + k).backward()
        for p in m.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            g = p.grad
            if kind == "predivide":  # pre 1/2, post 2/N = 1
                g.mul_(0.5)
                dist.all_reduce(g)
            elif kind in ("sum", "passes"):
                dist.all_reduce(g)
            elif kind == "fp16":
                w = g.half().float()
                dist.all_reduce(w)
                g.copy_(w.half().float()).mul_(0.5)
        if kind == "predivide":
            torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
    return m


def sigma_train(rank, kind):
    torch.manual_seed(0)
    m = Net()
    if kind == "ddp":
        torch.manual_seed(rank)  # another start on each rank: DDP gives rank 0's to all
        m = Net()
        net = sgt.parallel.DistributedDataParallel(m, device_ids=[sgt.local_rank()])
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        for step in range(STEPS):
            opt.zero_grad()
            if step == 1:
                with net.no_sync():
                    loss_of(net, rank, 100 + step).backward()
            loss_of(net, rank, step).backward()
            opt.step()
        return m
    base = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    kw = dict(predivide=dict(gradient_predivide_factor=2.0), sum=dict(op=sgt.Sum),
              passes=dict(op=sgt.Sum, backward_passes_per_step=2),
              fp16=dict(compression=sgt.Compression.fp16))[kind]
    opt = sgt.DistributedOptimizer(base, named_parameters=m.named_parameters(), name=kind, **kw)
    passes = kw.get("backward_passes_per_step", 1)
    for step in range(STEPS):
        opt.zero_grad()
        for k in range(passes):
            loss_of(m, rank, step * passes + k).backward()
        if kind == "predivide":
            opt.synchronize()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            with opt.skip_synchronize():
                opt.step()
        elif kind == "sum":
            opt.synchronize()  # and step() without skip_synchronize(): summed once
            opt.step()
        else:
            opt.step()
    return m


def training(rank, n, targets):
    dist.init_process_group("gloo")
    sgt.init(targets)
    out = {}
    for kind in ("predivide", "sum", "passes", "fp16", "ddp"):
        sm, rm = sigma_train(rank, kind), reference(rank, kind)
        got = {k: v.detach() for k, v in sm.state_dict().items()}
        ref = {k: v.detach() for k, v in rm.state_dict().items()}
        for k, a in got.items():
            same(a, ref[k], f"{kind}: {k} against gloo")
        # parameters equal on every rank (buffers are each rank's since its last forward)
        for k, a in sm.named_parameters():
            others = gather(a.detach())
            same(others[0], others[1], f"{kind}: {k} on both ranks")
        out[kind] = max((a.double() - ref[k].double()).abs().max().item()
                        for k, a in got.items())
    sgt.shutdown()
    dist.destroy_process_group()
    return out


def bad_arguments(rank, n, targets):
    E = sigma.SigmaConfigError
    N = NotImplementedError
    sgt.init(targets)
    t = torch.ones(4)
    # the message names the function called, not the one it calls
    _raises(lambda: sgt.push_pull([1.0, 2.0]), E, "sigma: push_pull: want a torch.Tensor")
    _raises(lambda: sgt.push_pull_([1.0]), E, "sigma: push_pull_: want a torch.Tensor")
    _raises(lambda: sgt.push_pull_inplace(t.expand(2, 4).t()), E,
            "sigma: push_pull_inplace: the tensor is not contiguous")
    _raises(lambda: sgt.push_pull(t, average=1), E, "push_pull: average=1: want True or False")
    _raises(lambda: sgt.push_pull(t, version="1"), E, "push_pull: version='1': want an int")
    _raises(lambda: sgt.push_pull_async_inplace(t, priority=0.5), E,
            "push_pull_async_inplace: priority=0.5")
    _raises(lambda: sgt.push_pull(t, compression="fp16"), E, "push_pull: compression='fp16'")
    _raises(lambda: sgt.allreduce("x"), E, "sigma: allreduce: want a torch.Tensor")
    _raises(lambda: sgt.allreduce_async_(t, average=True, op=sgt.Sum), E,
            "allreduce_async_: give op= or average=, not both")
    _raises(lambda: sgt.allreduce(t, op="sum"), E, "allreduce: op='sum': want")
    _raises(lambda: sgt.allreduce(t, prescale_factor="2"), E,
            "allreduce: prescale_factor='2': want a finite number")
    _raises(lambda: sgt.allreduce_(t, postscale_factor=float("nan")), E,
            "allreduce_: postscale_factor=nan")
    _raises(lambda: sgt.allreduce(torch.ones(3, dtype=torch.int32)), E,
            "allreduce: average=True (op=Average) needs a floating-point tensor")
    _raises(lambda: sgt.allreduce(torch.ones(3, dtype=torch.int32), op=sgt.Sum,
                                  prescale_factor=2), E, "allreduce: prescale_factor and")
    _raises(lambda: sgt.allreduce(t, name=""), E, "allreduce: name must be a non-empty str")
    _raises(lambda: sgt.allreduce(t, process_set=object()), N, "allreduce: process sets")
    _raises(lambda: sgt.grouped_allreduce([]), E, "grouped_allreduce: want a non-empty list")
    _raises(lambda: sgt.grouped_allreduce_async(t), E, "grouped_allreduce_async: want a")
    _raises(lambda: sgt.grouped_allreduce([t, "x"]), E, "grouped_allreduce: want a torch.Tensor")
    _raises(lambda: sgt.broadcast(t, root_rank=1), E, "broadcast: root_rank 1: want 0..0")
    _raises(lambda: sgt.broadcast_async_(t, root_rank=True), E, "broadcast_async_: root_rank")
    _raises(lambda: sgt.broadcast_object(1, root_rank=-1), E, "broadcast_object: root_rank -1")
    _raises(lambda: sgt.declare(3), E, "declare: name must be")
    _raises(lambda: sgt.synchronize("h"), E, "synchronize: want a handle")
    _raises(lambda: sgt.poll(None), E, "poll: want a handle")
    m = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    D = sgt.DistributedOptimizer
    _raises(lambda: D(opt, op=sgt.Adasum), N, "DistributedOptimizer: op=Adasum")
    _raises(lambda: D(opt, op=sgt.Sum, gradient_predivide_factor=2.0), E,
            "gradient_predivide_factor=2.0 needs op=Average")
    _raises(lambda: D(opt, gradient_predivide_factor=0), E, "gradient_predivide_factor=0")
    _raises(lambda: D(opt, compression=object()), E, "DistributedOptimizer: compression=")
    _raises(lambda: D(opt, num_groups=-1), E, "num_groups=-1")
    _raises(lambda: D(opt, groups="x"), E, "groups='x'")
    _raises(lambda: D(opt, backward_passes_per_step=True), E, "backward_passes_per_step")
    _raises(lambda: D(opt, named_parameters=[("w", 1)]), E, "(name, tensor) pairs")
    _raises(lambda: D(opt, sparse_as_dense=None), E, "sparse_as_dense=None")
    _raises(lambda: D(opt, process_set=object()), N, "DistributedOptimizer: process sets")
    o = D(torch.optim.SGD(m.parameters(), lr=0.1), name="bpp")
    _raises(lambda: o.set_backward_passes_per_step(0), E, "set_backward_passes_per_step: want")
    o.set_backward_passes_per_step(2)
    assert o._passes == 2
    P = sgt.parallel.DistributedDataParallel
    _raises(lambda: P("m"), E, "parallel.DistributedDataParallel: want a torch.nn.Module")
    _raises(lambda: P(m, device_ids=[0, 1]), E, "device_ids=[0, 1]")
    _raises(lambda: sgt.SyncBatchNorm(4), N, "SyncBatchNorm is not in Sigma")
    _raises(lambda: sgt.allgather_object(1), N, "broadcast_object")
    _raises(lambda: sgt.reducescatter(t), N, "reducescatter is not in Sigma")
    assert not sgt.mpi_enabled() and not sgt.nccl_built() and not sgt.cuda_built()
    # nothing refused was half done: the session still sums
    assert torch.equal(sgt.allreduce(t, name="after"), t)
    sgt.shutdown()
    return True


def max_retries_env(rank, n, targets):
    """SIGMA_MAX_RETRIES, for scripts that cannot pass init(max_retries=)."""
    os.environ["SIGMA_MAX_RETRIES"] = "x"
    _raises(lambda: sgt.init(targets), sigma.SigmaConfigError, "SIGMA_MAX_RETRIES='x'")
    os.environ["SIGMA_MAX_RETRIES"] = "30"
    sgt.init(targets)
    assert sgt.session().silent_bound > sigma.silent_bound_s(max_retries=29), \
        sgt.session().silent_bound
    sgt.shutdown()
    return True


class Peers(unittest.TestCase):
    def test_ops(self):
        with start_local_nodes(1) as nodes:
            sgtest.run_ranks(2, ops, nodes.targets, timeout=90)

    def test_training(self):
        with start_local_nodes(1) as nodes:
            res = sgtest.run_ranks(2, training, nodes.targets, timeout=120)
        print(f"max |diff| to gloo per training: {res[0]}")

    def test_bad_arguments(self):
        with start_local_nodes(1) as nodes:
            sgtest.run_ranks(1, bad_arguments, nodes.targets, timeout=60)
            sgtest.run_ranks(1, max_retries_env, nodes.targets, timeout=60)


if __name__ == "__main__":
    unittest.main(verbosity=2)
