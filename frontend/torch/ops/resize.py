"""``aten.resize`` (``Tensor.resize_``, ``resize_as_``): the same elements in row-major order
under a new shape. Kept: as many elements or fewer (the first ones, as eager's storage
keeps them); more is refused, since eager's extra elements are uninitialized memory. The
program writes the result into the caller's tensor, which compiler/torch_module.py resizes
first, as eager does."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from mlir import ir

from ....errors import OperandError
from ....ir import core, movement, reshapes
from ..importer import OpContext
from . import table


@table.aten("resize.default")
def resize(ctx: OpContext, x: Any, size: Sequence[int], *, memory_format: Any = None) -> ir.Value:
    x = ctx.tensor(x)
    shape = core.static_shape(x)
    if None in shape or not all(isinstance(s, int) and s >= 0 for s in size):
        raise OperandError("resize of or to a shape with dynamic dims")
    have, want = int(np.prod(shape)), int(np.prod(list(size)))
    if want > have:
        raise OperandError(f"resize from {list(shape)} to {list(size)} grows the tensor: eager's "
                           "new elements are uninitialized memory")
    flat = reshapes.reshape(x, [have])
    return reshapes.reshape(movement.slice_axis(flat, 0, 0, want), list(size))
