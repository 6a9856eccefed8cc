"""Static slices of ranked tensors, built in one call: the slab of a shape along one
dimension, and ``tensor.extract_slice`` / ``tensor.insert_slice`` with static offsets, sizes
and unit strides.

Why a module: the destination passes (pad_destinations.py: border slabs and the source
inserted at the low amounts; concat_destinations.py: each part inserted at its offset) and the
CUDA pad lowering (targets/cuda/schedule.py) each spelled the same builder call with empty
dynamic operand lists and strides of ones; here it is said once.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir
from mlir.dialects import tensor


def slab(shape: Sequence[int], dim: int, start: int, size: int) -> tuple[list[int], list[int]]:
    """(offsets, sizes) of the slab ``[start, start + size)`` along ``dim`` of ``shape``, whole
    along every other dimension."""
    offsets = [start if d == dim else 0 for d in range(len(shape))]
    sizes = [size if d == dim else extent for d, extent in enumerate(shape)]
    return offsets, sizes


def extract_static(source: ir.Value, offsets: Sequence[int], sizes: Sequence[int]) -> ir.Value:
    """``tensor.extract_slice`` of ``source`` at static ``offsets`` and ``sizes``, unit strides."""
    element = ir.RankedTensorType(source.type).element_type
    result_type = ir.RankedTensorType.get(list(sizes), element)
    return tensor.ExtractSliceOp(result_type, source, [], [], [], list(offsets), list(sizes),
                                 [1] * len(sizes)).result


def insert_static(source: ir.Value, dest: ir.Value, offsets: Sequence[int]) -> ir.Value:
    """``tensor.insert_slice`` of all of ``source`` (a static shape) into ``dest`` at static
    ``offsets``, unit strides."""
    sizes = list(ir.RankedTensorType(source.type).shape)
    return tensor.InsertSliceOp(source, dest, [], [], [], list(offsets), sizes, [1] * len(sizes)).result
