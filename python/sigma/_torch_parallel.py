# SPDX-License-Identifier: BSD-3-Clause
"""sigma.torch.parallel: BytePS's ``DistributedDataParallel`` spelling.

    from sigma.torch.parallel import DistributedDataParallel as DDP
    model = DDP(model)                 # device_ids=[local_rank()] accepted, CPU

BytePS-like semantics, not a wrapper of torch's DDP (which needs a
torch.distributed process group): at construction every rank takes rank 0's
parameters and buffers; each gradient is pushed through Sigma as soon as
backward has accumulated it, and backward returns once every gradient is
the average over the ranks (a callback at the end of backward waits for
them, pushing the gradient of a parameter backward did not reach, zeros if
it has none, since every rank must push every tensor). With
``broadcast_buffers`` (the default), each forward first gives every rank
rank 0's buffers (BatchNorm's running statistics). ``no_sync()`` accumulates
gradients locally; the first backward after it pushes the sums.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import torch

from . import torch as _t
from ._torch_ops import Compression
from .errors import SigmaConfigError

__all__ = ["DistributedDataParallel"]

_count = 0


class DistributedDataParallel(torch.nn.Module):
    """``module`` trained data-parallel, its gradients averaged through Sigma.

    Args:
        module: the model (on the CPU).
        device_ids: BytePS's; at most one entry, unused (Sigma pushes host memory).
        broadcast_buffers: give every rank rank 0's buffers before each forward.
        compression: what goes on the wire (Compression.none, .fp16, .bf16).
        name: prefix of the tensors' names (default: ``ddp<k>`` for the k-th
            model made in this process, the same on every rank).
    """

    def __init__(self, module: torch.nn.Module, device_ids: Optional[list] = None,
                 broadcast_buffers: bool = True, compression: Any = Compression.none,
                 name: Optional[str] = None) -> None:
        global _count
        super().__init__()
        what = "parallel.DistributedDataParallel"
        if not isinstance(module, torch.nn.Module):
            raise SigmaConfigError(f"sigma: {what}: want a torch.nn.Module, got "
                                   f"{type(module).__name__}")
        if device_ids is not None and (not isinstance(device_ids, (list, tuple)) or
                                       len(device_ids) > 1):
            raise SigmaConfigError(f"sigma: {what}: device_ids={device_ids!r}: want None or one "
                                   "device (BytePS's form)")
        c = _t._c()
        if c.job.mode == "async":
            raise SigmaConfigError(f"sigma: {what}: the job is async, where a node keeps a "
                                   "running sum of everything pushed: use DistributedOptimizer "
                                   "(it pushes parameter deltas) or a sync job")
        _count += 1
        self.module = module
        self.broadcast_buffers = _t._flag(broadcast_buffers, what, "broadcast_buffers")
        self._prefix = _t._name(name, what) or f"ddp{_count}"
        self._sync = True
        self._queued = False
        named = [(f"{self._prefix}.grad.{n}", p) for n, p in module.named_parameters()
                 if p.requires_grad]
        self._named = named
        self._grads = _t._GradPush(c, named, what, True, compression, 1.0, False)
        state = module.state_dict()
        if state:
            _t.broadcast_parameters(state, root_rank=0, name=f"{self._prefix}.init")
        self._accs = []
        for n, p in named:
            acc = p.expand_as(p).grad_fn.next_functions[0][0]  # p's AccumulateGrad
            acc.register_hook(self._make_hook(n, p))
            self._accs.append(acc)

    def _make_hook(self, name: str, p: torch.nn.Parameter) -> Any:
        def hook(*_: Any) -> None:
            if not self._sync:
                return
            self._grads.push(name, p)
            if not self._queued:
                self._queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
        return hook

    def _end_backward(self) -> None:
        self._queued = False
        self.synchronize()

    def synchronize(self) -> None:
        """Push the gradients backward did not reach and wait for all of them."""
        for n, p in self._named:
            if id(p) not in self._grads.handles:
                self._grads.push(n, p)
        self._grads.wait()

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Within it, backward accumulates gradients locally and pushes nothing;
        the first backward after it pushes the accumulated ones."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if self.broadcast_buffers:
            bufs = [(n, b) for n, b in self.module.named_buffers()]
            if bufs:
                with torch.no_grad():
                    _t.broadcast_parameters(bufs, root_rank=0, name=f"{self._prefix}.buffers")
        return self.module(*inputs, **kwargs)
