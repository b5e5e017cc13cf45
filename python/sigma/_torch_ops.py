# SPDX-License-Identifier: BSD-3-Clause
"""sigma.torch's compressions and reduce operations, under BytePS's and
Horovod's names (``sigma.torch.Compression.fp16``, ``sigma.torch.Average``).

A compressor is a class whose ``compress(tensor)`` returns ``(wire tensor,
context)`` before the push and whose ``decompress(wire tensor, context)``
returns the result after it, as the peers' are: a script's own compressor
works too. The nodes sum what is on the wire, in its dtype: fp16 and bf16 are
summed in fp32 by the node and rounded to fp16/bf16 once (docs/summation.md).
"""

from __future__ import annotations

import enum
from typing import Any, Optional

import torch


class Compressor:
    """The identity: the tensor goes on the wire as it is."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        return tensor, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        return tensor


class NoneCompressor(Compressor):
    """No compression (``Compression.none``)."""


class _CastCompressor(Compressor):
    """A floating-point tensor of another dtype goes on the wire as ``wire``,
    and comes back in its own dtype; other tensors go as they are."""

    wire = torch.float16

    @classmethod
    def compress(cls, tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        if tensor.dtype.is_floating_point and tensor.dtype != cls.wire:
            return tensor.to(cls.wire), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Optional[torch.dtype]) -> torch.Tensor:
        return tensor if ctx is None else tensor.to(ctx)


class FP16Compressor(_CastCompressor):
    """fp16 on the wire (half the bytes of fp32), summed in fp32 by the node."""

    wire = torch.float16


class BF16Compressor(_CastCompressor):
    """bf16 on the wire: fp32's range (no overflow where fp16 would), 8 bits
    of mantissa; summed in fp32 by the node."""

    wire = torch.bfloat16


class Compression:
    """The compressions: ``none``, ``fp16`` (BytePS's and Horovod's) and ``bf16``."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor


class ReduceOp(enum.IntEnum):
    """Horovod's reduce operations. Sigma's nodes sum: Average and Sum are
    done, the others raise NotImplementedError."""

    Average = 0
    Sum = 1
    Adasum = 2
    Min = 3
    Max = 4
    Product = 5


Average = ReduceOp.Average
Sum = ReduceOp.Sum
Adasum = ReduceOp.Adasum
Min = ReduceOp.Min
Max = ReduceOp.Max
Product = ReduceOp.Product


def is_compressor(obj: Any) -> bool:
    """Whether ``obj`` has the compressor's two methods."""
    return callable(getattr(obj, "compress", None)) and callable(getattr(obj, "decompress",
                                                                        None))
