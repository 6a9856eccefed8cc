"""``hash_tensor`` (mode 0: XOR of the elements' 64-bit patterns; ir/hashing.py), a uint64
result: ``i64`` in the IR, named ``uint64`` at the boundary (importer.py's dtype attribute)."""

from __future__ import annotations

from typing import Any

import torch
from mlir import ir

from ....errors import OperandError
from ....ir import hashing, reduction
from ..importer import OpContext
from . import table


@table.aten("hash_tensor.default")
def hash_tensor(ctx: OpContext, x: Any, dim: Any = (), keepdim: bool = False, mode: int = 0) -> ir.Value:
    if mode != 0:
        raise OperandError(f"hash_tensor mode {mode} (only 0, the XOR of the bits)")
    source = ctx.arg_meta(0).dtype
    x = ctx.tensor(x)
    rank = table.rank(x)
    if rank == 0:
        x, rank = reduction.expand_dims(x, [0]), 1
        axes = [0]
    else:
        axes = sorted(set(table.dims(dim, rank))) if dim not in ((), [], None) else list(range(rank))
    hashed = hashing.xor_bits(x, axes, unsigned=source == torch.bool or not (source.is_signed or source.is_floating_point))
    if keepdim and len(ctx.meta.shape) == rank:  # not for a 0-d input, whose result is 0-d
        hashed = reduction.expand_dims(hashed, axes)
    return hashed
