# SPDX-License-Identifier: BSD-3-Clause
"""Horovod's names in sigma.torch (allreduce and its forms, broadcast,
barrier, what Horovod's build reports), and the operations Sigma cannot do,
which raise NotImplementedError naming what to use instead. sigma.torch
imports everything here; docs/python.md, "Coming from Horovod", is the table.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from . import torch as _t
from ._torch_ops import Compression
from .errors import SigmaConfigError, SigmaError

__all__ = [
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "grouped_allreduce",
    "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_",
    "broadcast", "broadcast_", "broadcast_async", "broadcast_async_", "barrier",
    "cross_rank", "cross_size", "is_homogeneous", "mpi_threads_supported", "mpi_enabled",
    "mpi_built", "gloo_enabled", "gloo_built", "nccl_built", "ddl_built", "ccl_built",
    "cuda_built", "rocm_built", "allgather", "allgather_async", "grouped_allgather",
    "grouped_allgather_async", "allgather_object", "alltoall", "alltoall_async",
    "reducescatter", "reducescatter_async", "grouped_reducescatter",
    "grouped_reducescatter_async", "sparse_allreduce_async", "join", "start_timeline",
    "stop_timeline", "add_process_set", "remove_process_set", "ProcessSet", "SyncBatchNorm",
    "suspend", "resume", "HorovodInternalError",
]

HorovodInternalError = SigmaError


def _one(what: str, tensor: torch.Tensor, inplace: bool, average: Any, name: Any, op: Any,
         prescale_factor: Any, postscale_factor: Any, process_set: Any,
         compression: Any = None) -> _t.PushPullHandle:
    _t.check_process_set(what, process_set)
    return _t._reduce(what, tensor, inplace=inplace, average=_t._average_of(what, average, op),
                      name=name, compression=compression, prescale=prescale_factor,
                      postscale=postscale_factor)


def allreduce_async(tensor: torch.Tensor, average: Optional[bool] = None,
                    name: Optional[str] = None, op: Any = None, prescale_factor: float = 1.0,
                    postscale_factor: float = 1.0, process_set: Any = None
                    ) -> _t.PushPullHandle:
    """Start averaging (op=Average, the default) or summing (op=Sum)
    ``tensor`` over the ranks into a new tensor: ``postscale * sum(prescale *
    tensor)``, divided by N for Average. ``synchronize(handle)`` gives it."""
    return _one("allreduce_async", tensor, False, average, name, op, prescale_factor,
                postscale_factor, process_set)


def allreduce_async_(tensor: torch.Tensor, average: Optional[bool] = None,
                     name: Optional[str] = None, op: Any = None, prescale_factor: float = 1.0,
                     postscale_factor: float = 1.0, process_set: Any = None
                     ) -> _t.PushPullHandle:
    """As allreduce_async, in place."""
    return _one("allreduce_async_", tensor, True, average, name, op, prescale_factor,
                postscale_factor, process_set)


def allreduce(tensor: torch.Tensor, average: Optional[bool] = None, name: Optional[str] = None,
              compression: Any = Compression.none, op: Any = None,
              prescale_factor: float = 1.0, postscale_factor: float = 1.0,
              process_set: Any = None) -> torch.Tensor:
    """The average (op=Average) or sum (op=Sum) of ``tensor`` over the ranks,
    a new tensor; ``compression`` sets what goes on the wire. Not
    differentiable (Horovod's is): call it outside autograd."""
    return _t.synchronize(_one("allreduce", tensor, False, average, name, op, prescale_factor,
                               postscale_factor, process_set, compression))


def allreduce_(tensor: torch.Tensor, average: Optional[bool] = None, name: Optional[str] = None,
               op: Any = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
               process_set: Any = None) -> torch.Tensor:
    """As allreduce, in place; returns the tensor."""
    return _t.synchronize(_one("allreduce_", tensor, True, average, name, op, prescale_factor,
                               postscale_factor, process_set))


def _group(what: str, tensors: Sequence[torch.Tensor], inplace: bool, average: Any, name: Any,
           op: Any, prescale_factor: Any, postscale_factor: Any, process_set: Any,
           compression: Any = None) -> _t.GroupHandle:
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise SigmaConfigError(f"sigma: {what}: want a non-empty list of tensors, got "
                               f"{type(tensors).__name__}")
    _t.check_process_set(what, process_set)
    avg = _t._average_of(what, average, op)
    name = _t._name(name, what)
    for t in tensors:  # every one checked before any is pushed
        _t._dtype(t, what)
    return _t.GroupHandle([
        _t._reduce(what, t, inplace=inplace, average=avg,
                   name=None if name is None else f"{name}.{i}", compression=compression,
                   prescale=prescale_factor, postscale=postscale_factor)
        for i, t in enumerate(tensors)])


def grouped_allreduce_async(tensors: Sequence[torch.Tensor], average: Optional[bool] = None,
                            name: Optional[str] = None, op: Any = None,
                            prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                            process_set: Any = None) -> _t.GroupHandle:
    """allreduce_async of each tensor (all in flight at once); synchronize()
    of the handle gives the list of results. A name keys tensor i as name.i."""
    return _group("grouped_allreduce_async", tensors, False, average, name, op,
                  prescale_factor, postscale_factor, process_set)


def grouped_allreduce_async_(tensors: Sequence[torch.Tensor], average: Optional[bool] = None,
                             name: Optional[str] = None, op: Any = None,
                             prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                             process_set: Any = None) -> _t.GroupHandle:
    """As grouped_allreduce_async, in place."""
    return _group("grouped_allreduce_async_", tensors, True, average, name, op,
                  prescale_factor, postscale_factor, process_set)


def grouped_allreduce(tensors: Sequence[torch.Tensor], average: Optional[bool] = None,
                      name: Optional[str] = None, compression: Any = Compression.none,
                      op: Any = None, prescale_factor: float = 1.0,
                      postscale_factor: float = 1.0, process_set: Any = None
                      ) -> list[torch.Tensor]:
    """allreduce of each tensor, all in flight at once; the list of results."""
    return _t.synchronize(_group("grouped_allreduce", tensors, False, average, name, op,
                                 prescale_factor, postscale_factor, process_set, compression))


def grouped_allreduce_(tensors: Sequence[torch.Tensor], average: Optional[bool] = None,
                       name: Optional[str] = None, op: Any = None,
                       prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                       process_set: Any = None) -> list[torch.Tensor]:
    """As grouped_allreduce, in place."""
    return _t.synchronize(_group("grouped_allreduce_", tensors, True, average, name, op,
                                 prescale_factor, postscale_factor, process_set))


def _bcast(what: str, tensor: torch.Tensor, root_rank: Any, name: Any, process_set: Any,
           inplace: bool) -> _t.PushPullHandle:
    c = _t._c()
    _t.check_process_set(what, process_set)
    _t._root(what, root_rank, c)
    dt = _t._dtype(tensor, what)
    name = _t._name(name, what)
    if c.job.mode == "async":
        raise SigmaConfigError(f"sigma: {what}: the job is async (the node keeps a running "
                               "store, so zeros do not broadcast): use broadcast_parameters "
                               "with torch.distributed")
    out = tensor if inplace else tensor.clone()
    release = None
    if name is None:
        name, release = _t._unnamed(c, dt, tensor.numel(), "broadcast")
    return _t.PushPullHandle(_t._bcast_submit(c, what, out, root_rank, name), out, None,
                             release)


def broadcast_async(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
                    process_set: Any = None) -> _t.PushPullHandle:
    """Start giving every rank ``root_rank``'s ``tensor``, in a new tensor."""
    return _bcast("broadcast_async", tensor, root_rank, name, process_set, False)


def broadcast_async_(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
                     process_set: Any = None) -> _t.PushPullHandle:
    """As broadcast_async, in place (the other ranks' tensor is zero meanwhile)."""
    return _bcast("broadcast_async_", tensor, root_rank, name, process_set, True)


def broadcast(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
              process_set: Any = None) -> torch.Tensor:
    """``root_rank``'s ``tensor``, on every rank (a new tensor)."""
    return _t.synchronize(_bcast("broadcast", tensor, root_rank, name, process_set, False))


def broadcast_(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
               process_set: Any = None) -> torch.Tensor:
    """``root_rank``'s ``tensor``, on every rank, in place; returns it."""
    return _t.synchronize(_bcast("broadcast_", tensor, root_rank, name, process_set, True))


def barrier(process_set: Any = None) -> None:
    """Wait until every rank called barrier() (a one-element sum)."""
    _t.check_process_set("barrier", process_set)
    n = _t.synchronize(_t._reduce("barrier", torch.ones(1, dtype=torch.int32), inplace=True,
                                  average=False, name="sigma.barrier"))
    if int(n.item()) != _t.size():
        raise SigmaError(f"sigma: barrier: {int(n.item())} of {_t.size()} ranks counted")


def cross_size() -> int:
    """The number of machines: size() / local_size() (every machine runs
    local_size() ranks)."""
    return _t.size() // _t.local_size() if is_homogeneous() else _t.size()


def cross_rank() -> int:
    """This machine's index: rank() // local_size() (ranks numbered machine
    by machine, as the launchers do)."""
    return _t.rank() // _t.local_size() if is_homogeneous() else _t.rank()


def is_homogeneous() -> bool:
    """Whether every machine can run local_size() ranks (size() is a multiple of it)."""
    return _t.size() % _t.local_size() == 0


def mpi_threads_supported() -> bool:
    """False: Sigma does not use MPI."""
    return False


def mpi_enabled() -> bool:
    """False: Sigma does not use MPI (mpirun may still launch the ranks)."""
    return False


def mpi_built() -> bool:
    """False: Sigma does not use MPI."""
    return False


def gloo_enabled() -> bool:
    """False: Sigma sums through its nodes, not gloo."""
    return False


def gloo_built() -> bool:
    """False: Sigma sums through its nodes, not gloo."""
    return False


def nccl_built() -> int:
    """0: no NCCL (Sigma sums host memory)."""
    return 0


def ddl_built() -> bool:
    """False."""
    return False


def ccl_built() -> bool:
    """False."""
    return False


def cuda_built() -> bool:
    """False: Sigma pushes host memory (move tensors with .cpu())."""
    return False


def rocm_built() -> bool:
    """False."""
    return False


def _cannot(what: str, instead: str) -> NotImplementedError:
    return NotImplementedError(f"sigma: {what} is not in Sigma: {instead}")


_GATHER = ("Sigma's nodes sum tensors of one size on every rank: for small objects, "
           "broadcast_object from each rank; else torch.distributed's all_gather "
           "(init_process_group('gloo'))")
_ALLTOALL = ("Sigma's nodes only sum: use torch.distributed's all_to_all on a process group "
             "of its own")
_SCATTER = ("Sigma's nodes give every rank the whole sum: allreduce the whole tensor and keep "
            "this rank's slice, or use torch.distributed's reduce_scatter")


def allgather(tensor: torch.Tensor, name: Optional[str] = None, process_set: Any = None) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternatives."""
    raise _cannot("allgather", _GATHER)


def allgather_async(tensor: torch.Tensor, name: Optional[str] = None,
                    process_set: Any = None) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternatives."""
    raise _cannot("allgather_async", _GATHER)


def grouped_allgather(tensors: Any, name: Optional[str] = None, process_set: Any = None) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternatives."""
    raise _cannot("grouped_allgather", _GATHER)


def grouped_allgather_async(tensors: Any, name: Optional[str] = None,
                            process_set: Any = None) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternatives."""
    raise _cannot("grouped_allgather_async", _GATHER)


def allgather_object(obj: Any, name: Optional[str] = None, process_set: Any = None) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternatives."""
    raise _cannot("allgather_object", "call broadcast_object(obj, root_rank=r) for each rank r")


def alltoall(tensor: torch.Tensor, splits: Any = None, name: Optional[str] = None,
             process_set: Any = None) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternative."""
    raise _cannot("alltoall", _ALLTOALL)


def alltoall_async(tensor: torch.Tensor, splits: Any = None, name: Optional[str] = None,
                   process_set: Any = None) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternative."""
    raise _cannot("alltoall_async", _ALLTOALL)


def reducescatter(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternatives."""
    raise _cannot("reducescatter", _SCATTER)


def reducescatter_async(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternatives."""
    raise _cannot("reducescatter_async", _SCATTER)


def grouped_reducescatter(tensors: Any, *args: Any, **kwargs: Any) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternatives."""
    raise _cannot("grouped_reducescatter", _SCATTER)


def grouped_reducescatter_async(tensors: Any, *args: Any, **kwargs: Any) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternatives."""
    raise _cannot("grouped_reducescatter_async", _SCATTER)


def sparse_allreduce_async(tensor: torch.Tensor, name: Optional[str] = None, op: Any = None,
                           process_set: Any = None) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternative."""
    raise _cannot("sparse_allreduce_async", "allreduce tensor.to_dense() (DistributedOptimizer: "
                  "sparse_as_dense=True)")


def join(device: int = -1) -> int:
    """Not in Sigma: raises NotImplementedError naming the alternative."""
    raise _cannot("join", "every rank must push every tensor each step: give every rank the "
                  "same number of batches (DistributedSampler(..., drop_last=True))")


def start_timeline(file_path: str, mark_cycles: bool = False) -> None:
    """Not in Sigma: raises NotImplementedError naming the alternative."""
    raise _cannot("start_timeline", "sigma.torch.session().profile() and .stats() give where "
                  "the time went")


def stop_timeline() -> None:
    """Not in Sigma: raises NotImplementedError naming the alternative."""
    raise _cannot("stop_timeline", "sigma.torch.session().profile() and .stats()")


class ProcessSet:
    """Not in Sigma: constructing one raises NotImplementedError."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise _cannot("ProcessSet", "a Sigma job is every rank: run one job per set of ranks")


def add_process_set(*args: Any, **kwargs: Any) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternative."""
    raise _cannot("add_process_set", "a Sigma job is every rank: run one job per set of ranks")


def remove_process_set(*args: Any, **kwargs: Any) -> Any:
    """Not in Sigma: raises NotImplementedError naming the alternative."""
    raise _cannot("remove_process_set", "a Sigma job is every rank")


class SyncBatchNorm(torch.nn.Module):
    """Not in Sigma: constructing one raises NotImplementedError."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise _cannot("SyncBatchNorm", "use torch.nn.BatchNorm (statistics per rank, as DDP "
                      "without SyncBatchNorm)")


def suspend() -> None:
    """Not in Sigma (BytePS's elastic suspend): raises NotImplementedError."""
    raise _cannot("suspend", "shutdown(), then init() again with the new ranks")


def resume(num_workers: int = 0, num_servers: int = 0, global_rank: int = -1,
           context: Any = None) -> None:
    """Not in Sigma (BytePS's elastic resume): raises NotImplementedError."""
    raise _cannot("resume", "init() again with the new ranks (a new job)")
