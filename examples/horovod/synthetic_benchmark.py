#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A synthetic training benchmark written against Horovod's PyTorch API: the
only line that names Sigma is the import. Under mpirun:

    SIGMA_NODES=... mpirun -np 2 python3 examples/horovod/synthetic_benchmark.py
    sigmarun -np 2 examples/horovod/synthetic_benchmark.py      # or Sigma's launcher

Each rank trains a small MLP on one fixed random batch of its own through
DistributedOptimizer and prints samples per second (the mean and a 95%
interval, averaged over the ranks with allreduce). ``--save F`` writes this
rank's parameters after the broadcast and at the end (F.init, F.final;
``{rank}`` in F is the rank).
"""

import argparse
import timeit

import torch
import torch.nn as nn
import torch.nn.functional as F

import sigma.torch as hvd  # was: import horovod.torch as hvd

parser = argparse.ArgumentParser(description="synthetic benchmark, Horovod style")
parser.add_argument("--fp16-allreduce", action="store_true", help="fp16 on the wire")
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--features", type=int, default=64)
parser.add_argument("--num-warmup-batches", type=int, default=2)
parser.add_argument("--num-batches-per-iter", type=int, default=3)
parser.add_argument("--num-iters", type=int, default=3)
parser.add_argument("--use-adasum", action="store_true")
parser.add_argument("--save", help="write this rank's parameters to SAVE.init and SAVE.final "
                    "('{rank}' in SAVE: the rank)")


def make_model(features: int) -> nn.Module:
    return nn.Sequential(nn.Linear(features, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def synthetic_batch(rank: int, batch: int, features: int) -> tuple:
    g = torch.Generator().manual_seed(4321 + rank)
    return (torch.randn(batch, features, generator=g),
            torch.randint(0, 10, (batch,), generator=g))


def main() -> None:
    args = parser.parse_args()
    hvd.init()
    torch.set_num_threads(1)
    model = make_model(args.features)  # its own random start on each rank
    lr_scaler = 1 if args.use_adasum else hvd.size()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * lr_scaler)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression,
                                         op=hvd.Adasum if args.use_adasum else hvd.Average)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    if args.save:
        torch.save(model.state_dict(), args.save.format(rank=hvd.rank()) + ".init")
    data, target = synthetic_batch(hvd.rank(), args.batch_size, args.features)

    def benchmark_step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()

    def log(s: str) -> None:
        if hvd.rank() == 0:
            print(s, flush=True)

    log(f"Batch size: {args.batch_size}; number of ranks: {hvd.size()}")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    rates = []
    for x in range(args.num_iters):
        t = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        rates.append(args.batch_size * args.num_batches_per_iter / t)
        log(f"Iter #{x}: {rates[-1]:.1f} samples/sec per rank")
    r = torch.tensor(rates, dtype=torch.float64)
    mean = hvd.allreduce(r.mean(), name="rate.mean").item()
    conf = 1.96 * hvd.allreduce(r.std() if len(rates) > 1 else torch.zeros((),
                                dtype=torch.float64), name="rate.std").item()
    log(f"Samples/sec per rank: {mean:.1f} +-{conf:.1f}")
    log(f"Total samples/sec on {hvd.size()} ranks: {hvd.size() * mean:.1f} "
        f"+-{hvd.size() * conf:.1f}")
    if args.save:
        torch.save(model.state_dict(), args.save.format(rank=hvd.rank()) + ".final")
    hvd.shutdown()


if __name__ == "__main__":
    main()
