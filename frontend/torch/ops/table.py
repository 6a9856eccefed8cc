"""The table from core ATen op to emitter, its registration decorator, and the small helpers
every handler module shares.

Each handler takes an :class:`~..importer.OpContext` and the node's arguments (FX nodes
replaced by their values: SSA tensors, ``index`` values for symbolic sizes, import-time
arrays, Python scalars) and returns the node's value. Handlers only translate PyTorch's
conventions (argument order, ``-1`` sizes, negative dims, type promotion, padding as one
number) into calls of the emitters in ``ir/``, which the ONNX frontend shares:
one convolution, one matmul and one pooling emitter in the project.

Type promotion follows the FX node's metadata: arithmetic happens in the result dtype that
``torch.export`` recorded; comparisons in ``torch.result_type`` of their operands.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch
from mlir import ir

from ....ir import (
    core,
)
from ..importer import Handler, OpContext, numpy_dtype
from ....errors import InternalError, OperandError

ATEN_OPS: dict[str, Handler] = {}

INT64 = np.dtype(np.int64)


def aten(*names: str) -> Callable[[Handler], Handler]:
    """Register a handler for the named ATen overloads (``"add.Tensor"`` -> ``aten.add.Tensor``)."""

    def register(handler: Handler) -> Handler:
        for name in names:
            key = name if "." in name and name.split(".")[0] in ("operator", "aten", "prims") else f"aten.{name}"
            if key in ATEN_OPS:
                raise InternalError(f"{key} is registered twice")
            ATEN_OPS[key] = handler
        return handler

    return register



def rank(value: ir.Value) -> int:
    return core.tensor_type(value).rank


def dim(dim: int, rank: int) -> int:
    """A PyTorch dim (negative counts from the end) as a position; ``ValueError`` if out of range."""
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise OperandError(f"dim {dim} is out of range for rank {rank}")
    return dim % rank if rank else 0


def dims(dims: Any, rank: int) -> list[int]:
    """A dim list (``None`` or ``[]``: all dims) as sorted positions."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    # a 0-d tensor accepts dim 0 and -1 and has nothing to reduce or squeeze
    positions = {dim(d, rank) for d in dims}
    return sorted(positions) if rank else []


def meta_dtype(meta: Any) -> Any:
    """A stand-in for ``torch.result_type``: zero-size tensors keep the rank category
    (0-d tensors promote like scalars), Python scalars stay scalars."""
    if isinstance(meta, torch.Tensor):
        return torch.empty([0] * meta.dim(), dtype=meta.dtype)
    return meta


def promoted(ctx: OpContext, *positions: int) -> np.dtype:
    metas = [meta_dtype(ctx.arg_meta(p)) for p in positions]
    dtype = torch.result_type(metas[0], metas[1]) if len(metas) == 2 else metas[0].dtype
    return numpy_dtype(dtype)


def unsigned(dtype: np.dtype) -> bool:
    return dtype.kind == "u"


def map_(ctx: OpContext, operands: Sequence[Any], compute: np.dtype, body: Callable[..., ir.Value],
         result: np.dtype | None = None) -> ir.Value:
    """``body`` over the broadcast operands, all converted to ``compute`` first."""
    result = result if result is not None else ctx.result_dtype()
    values = [ctx.tensor(v, compute) for v in operands]
    return core.elementwise(values, core.element_type(result), body)


def identity(ctx: OpContext, x: Any, *_: Any, **__: Any) -> Any:
    return x


def nothing(ctx: OpContext, *_: Any, **__: Any) -> None:
    return None
