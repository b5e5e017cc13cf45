#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""MNIST-like training written against Horovod's PyTorch API: the only line
that names Sigma is the import. The images are synthetic (these machines
are offline): 28x28, class k a bright stroke at a place of its own under
noise, so the model has something to learn.

    SIGMA_NODES=... mpirun -np 2 python3 examples/horovod/mnist.py --epochs 1
    sigmarun -np 2 examples/horovod/mnist.py                  # or Sigma's launcher

Each rank reads its shard (DistributedSampler), the gradients are averaged
through DistributedOptimizer (``--gradient-predivide-factor``,
``--fp16-allreduce``, ``--batches-per-allreduce`` as Horovod's), the epoch
to start from is agreed with broadcast_object, and the test loss and
accuracy are averaged with allreduce. ``--save F`` writes this rank's final
parameters to F.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data
import torch.utils.data.distributed

import sigma.torch as hvd  # was: import horovod.torch as hvd

parser = argparse.ArgumentParser(description="MNIST-like training, Horovod style")
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--test-batch-size", type=int, default=64)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--samples", type=int, default=256, help="training images in all")
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--momentum", type=float, default=0.5)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--fp16-allreduce", action="store_true", help="fp16 on the wire")
parser.add_argument("--use-adasum", action="store_true")
parser.add_argument("--gradient-predivide-factor", type=float, default=1.0)
parser.add_argument("--batches-per-allreduce", type=int, default=1)
parser.add_argument("--save", help="write this rank's final parameters there ('{rank}': the "
                    "rank)")


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=5)
        self.conv2 = nn.Conv2d(4, 8, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(128, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = F.relu(self.fc1(x.flatten(1)))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic_mnist(samples: int, seed: int) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (samples,), generator=g)
    images = torch.rand(samples, 1, 28, 28, generator=g) * 0.3
    for k in range(10):
        row = 3 + (k // 5) * 12
        col = 2 + (k % 5) * 5
        images[labels == k, 0, row:row + 10, col:col + 3] += 0.7
    return torch.utils.data.TensorDataset(images, labels)


def main() -> None:
    args = parser.parse_args()
    hvd.init()
    torch.manual_seed(args.seed + hvd.rank())  # dropout differs by rank, as it would
    torch.set_num_threads(1)
    train_dataset = synthetic_mnist(args.samples, args.seed)
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_dataset, num_replicas=hvd.size(), rank=hvd.rank())
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size,
                                               sampler=train_sampler)
    test_dataset = synthetic_mnist(args.samples // 2, args.seed + 1)
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        test_dataset, num_replicas=hvd.size(), rank=hvd.rank())
    test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=args.test_batch_size,
                                              sampler=test_sampler)
    model = Net()
    lr_scaler = hvd.local_size() if args.use_adasum else hvd.size()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * lr_scaler,
                                momentum=args.momentum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression,
                                         backward_passes_per_step=args.batches_per_allreduce,
                                         op=hvd.Adasum if args.use_adasum else hvd.Average,
                                         gradient_predivide_factor=args.gradient_predivide_factor)
    resume_from_epoch = hvd.broadcast_object(1, root_rank=0, name="resume_from_epoch")

    def train(epoch: int) -> None:
        model.train()
        train_sampler.set_epoch(epoch)
        batches = list(train_loader)
        k = args.batches_per_allreduce
        for i in range(0, len(batches) - k + 1, k):
            optimizer.zero_grad()
            for data, target in batches[i:i + k]:
                loss = F.nll_loss(model(data), target) / k
                loss.backward()
            optimizer.step()
            if i % 4 == 0 and hvd.rank() == 0:
                print(f"Train Epoch: {epoch} [{i * args.batch_size}/{len(train_sampler)}]"
                      f"\tLoss: {loss.item():.6f}", flush=True)

    def metric_average(val: torch.Tensor, name: str) -> float:
        return hvd.allreduce(val.detach().clone(), name=name).item()

    def test() -> None:
        model.eval()
        test_loss = torch.zeros(())
        correct = torch.zeros(())
        with torch.no_grad():
            for data, target in test_loader:
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum")
                correct += (output.argmax(1) == target).sum()
        test_loss /= len(test_sampler)
        accuracy = correct / len(test_sampler)
        loss_avg = metric_average(test_loss, "avg_loss")
        acc_avg = metric_average(accuracy, "avg_accuracy")
        if hvd.rank() == 0:
            print(f"Test set: Average loss: {loss_avg:.4f}, Accuracy: {100 * acc_avg:.1f}%",
                  flush=True)

    for epoch in range(resume_from_epoch, args.epochs + 1):
        train(epoch)
        test()
    if args.save:
        torch.save(model.state_dict(), args.save.format(rank=hvd.rank()))
    hvd.shutdown()


if __name__ == "__main__":
    main()
