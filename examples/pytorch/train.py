#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Train a small CNN with N ranks, its gradients summed by Sigma.

    python3 -m sigma.launch -n 4 --local-nodes 1 examples/pytorch/train.py
    ./sigma train-demo                       # the same, built and cleaned up

Each rank trains DistributedDataParallel on its shard of a generated image
set (10 classes; class k is a bright blob at a place of its own, under noise,
so the model has something to learn) and DDP's gradient buckets go through
Sigma's communication hook: summed by the summation node(s) named in
SIGMA_NODES, created by rank 0 through their control servers.

``--comm gloo`` trains the same run on DDP's own gloo all-reduce, and
``--comm optimizer`` with sigma.torch.DistributedOptimizer instead of DDP;
``--save F`` writes rank 0's final parameters, so runs can be compared.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import sigma.torch as sgt
except ImportError:  # running from a source tree without the package installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    import sigma.torch as sgt

IMAGE = 16
CLASSES = 10


class SmallCNN(nn.Module):
    """Two convolutions and two linear layers: 406,474 parameters (1.6 MB).

    fc1 is declared last: DDP fills its first buckets in reverse declaration
    order and rebuilds them after the first step in the order backward made
    the gradients, so here the rebuilt buckets differ from the first ones (as
    they do in real models), and Sigma gives them keys of their own."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc2 = nn.Linear(768, CLASSES)
        self.fc1 = nn.Linear(32 * (IMAGE // 4) ** 2, 768)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def make_data(samples: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``samples`` images of 1x16x16 and their labels, the same for a seed."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (samples,), generator=g)
    images = torch.randn(samples, 1, IMAGE, IMAGE, generator=g) * 0.5
    ys, xs = torch.meshgrid(torch.arange(IMAGE), torch.arange(IMAGE), indexing="ij")
    for k in range(CLASSES):
        cy, cx = 3 + (k // 5) * 9, 2 + (k % 5) * 3
        blob = torch.exp(-((ys - cy) ** 2 + (xs - cx) ** 2).float() / 4.0)
        images[labels == k, 0] += 2.0 * blob
    return images, labels


def make_model(seed: int = 0) -> nn.Module:
    """The model, initialised the same on every rank."""
    torch.manual_seed(seed)
    return SmallCNN()


def train(model: nn.Module, comm: str, steps: int, batch: int, lr: float, rank: int,
          size: int, data_seed: int = 1, log: bool = False, bucket_mb: float = 0.01,
          skew: Optional[callable] = None) -> list[float]:
    """Train ``steps`` steps; returns rank 0's losses. ``comm`` is sigma (DDP
    with Sigma's hook), gloo (DDP's all-reduce) or optimizer (Sigma's
    DistributedOptimizer). ``skew(step)`` (tests) sleeps before backward."""
    images, labels = make_data(steps * batch * size, data_seed)
    opt: torch.optim.Optimizer
    if comm == "optimizer":
        net = model
        opt = sgt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9),
                                       model.named_parameters())
        sgt.broadcast_parameters(model.state_dict(), root_rank=0)
    else:
        # small buckets, so that several are in flight at once even for this model
        net = DDP(model, bucket_cap_mb=bucket_mb)
        if comm == "sigma":
            net.register_comm_hook(sgt.HookState(name="train"), sgt.ddp_comm_hook)
        elif comm != "gloo":
            raise ValueError(f"--comm {comm}: sigma, gloo or optimizer")
        opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    losses = []
    for step in range(steps):
        lo = (step * size + rank) * batch  # this rank's shard of the step's samples
        x, y = images[lo:lo + batch], labels[lo:lo + batch]
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        if skew is not None:
            skew(step)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if log and rank == 0 and (step % 10 == 0 or step == steps - 1):
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)
    return losses


def accuracy(model: nn.Module, seed: int = 99, samples: int = 1000) -> float:
    """Accuracy on held-out generated images."""
    x, y = make_data(samples, seed)
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--comm", default="sigma", choices=["sigma", "gloo", "optimizer"])
    p.add_argument("--mode", choices=["sync", "deterministic"],
                   help="the Sigma job's mode (default SIGMA_MODE, else sync)")
    p.add_argument("--save", help="write rank 0's final parameters here (torch.save)")
    a = p.parse_args()
    torch.set_num_threads(1)  # N ranks share this machine's cores
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    if a.comm != "gloo":
        sgt.init(mode=a.mode)
        if rank == 0:
            j = sgt.job()
            print(f"sigma: job {j.id} ({j.mode}, {j.workers} workers) on "
                  f"{', '.join(f'{n.name} {n.addr}:{n.port}' for n in j.nodes)}", flush=True)
    model = make_model()
    t0 = time.monotonic()
    losses = train(model, a.comm, a.steps, a.batch, a.lr, rank, size, log=True)
    took = time.monotonic() - t0
    if rank == 0:
        print(f"{a.steps} steps of {size} x {a.batch} samples in {took:.1f} s; loss "
              f"{losses[0]:.3f} -> {losses[-1]:.3f}, held-out accuracy {accuracy(model):.1%}",
              flush=True)
        if a.comm != "gloo":
            st = sgt.session().stats()
            print(f"sigma: {st.ops_done} push_pulls, {st.tx_packets} packets sent, "
                  f"{st.retransmits} retransmits", flush=True)
        if a.save:
            torch.save(model.state_dict(), a.save)
    if a.comm != "gloo":
        sgt.shutdown()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
