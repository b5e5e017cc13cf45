#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A synthetic training benchmark written against BytePS's PyTorch API: the
only line that names Sigma is the import. Under bpslaunch's variables:

    DMLC_NUM_WORKER=1 DMLC_WORKER_ID=0 BYTEPS_LOCAL_SIZE=2 BYTEPS_LOCAL_RANK=$r \\
    DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=29500 SIGMA_NODES=... \\
        python3 examples/byteps/benchmark.py            # for r in 0 1
    sigmarun -np 2 examples/byteps/benchmark.py --ddp   # or Sigma's launcher

Each rank trains a small CNN on one fixed random batch of its own, through
DistributedOptimizer (or, with --ddp, sigma.torch.parallel's
DistributedDataParallel), and prints images per second. ``--save F`` writes
this rank's parameters after the broadcast and at the end (F.init, F.final;
``{rank}`` in F is the rank).
"""

import argparse
import timeit

import torch
import torch.nn as nn
import torch.nn.functional as F

import sigma.torch as bps  # was: import byteps.torch as bps

parser = argparse.ArgumentParser(description="synthetic benchmark, BytePS style")
parser.add_argument("--fp16-pushpull", action="store_true", help="fp16 on the wire")
parser.add_argument("--ddp", action="store_true", help="DistributedDataParallel, not "
                    "DistributedOptimizer")
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--image", type=int, default=16, help="image side")
parser.add_argument("--num-warmup-batches", type=int, default=2)
parser.add_argument("--num-batches-per-iter", type=int, default=3)
parser.add_argument("--num-iters", type=int, default=3)
parser.add_argument("--save", help="write this rank's parameters to SAVE.init and SAVE.final "
                    "('{rank}' in SAVE: the rank)")


class SmallCNN(nn.Module):
    def __init__(self, image: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * (image // 4) ** 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def synthetic_batch(rank: int, batch: int, image: int) -> tuple:
    g = torch.Generator().manual_seed(1234 + rank)
    return (torch.randn(batch, 3, image, image, generator=g),
            torch.randint(0, 10, (batch,), generator=g))


def main() -> None:
    args = parser.parse_args()
    bps.init()
    torch.set_num_threads(1)
    model = SmallCNN(args.image)  # its own random start on each rank: the broadcast fixes it
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * bps.size(), momentum=0.9)
    if args.ddp:
        from sigma.torch.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[bps.local_rank()])
    else:
        compression = bps.Compression.fp16 if args.fp16_pushpull else bps.Compression.none
        optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                             compression=compression)
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    bps.broadcast_optimizer_state(optimizer, root_rank=0)
    if args.save:
        torch.save(model.state_dict(), args.save.format(rank=bps.rank()) + ".init")
    data, target = synthetic_batch(bps.rank(), args.batch_size, args.image)

    def benchmark_step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()

    def log(s: str) -> None:
        if bps.rank() == 0:
            print(s, flush=True)

    log(f"Running warmup... ({bps.size()} ranks)")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    log("Running benchmark...")
    rates = []
    for x in range(args.num_iters):
        t = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        rates.append(args.batch_size * args.num_batches_per_iter / t)
        log(f"Iter #{x}: {rates[-1]:.1f} img/sec per rank")
    mean = sum(rates) / len(rates)
    log(f"Img/sec per rank: {mean:.1f}; total on {bps.size()} ranks: {bps.size() * mean:.1f}")
    if args.save:
        torch.save(model.state_dict(), args.save.format(rank=bps.rank()) + ".final")
    bps.shutdown()


if __name__ == "__main__":
    main()
