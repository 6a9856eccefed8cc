"""Reading an ONNX node's operands: axes, integer lists given as attributes or inputs, scalars,
declared shapes; shared by the op handler modules."""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import tensor

from ....ir import core, extent_math, reshapes
from ....ir.checks import check_extent
from ....ir import (
    resize as resampling,  # the module; `resize` below is the ONNX handler
)
from ..model import TensorInfo
from ..node import HandlerError, NodeContext

Extent = "int | ir.Value"


def axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise HandlerError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def int_list(ctx: NodeContext, attribute: str, index: int, since: int, what: str) -> list[int] | None:
    """An int list given as an attribute before opset ``since`` and as input ``index``
    after; ``None`` when absent. A runtime input raises: it fixes the result's structure."""
    if ctx.opset < since:
        value = ctx.attr(attribute, None)
        return None if value is None else [int(v) for v in value]
    if not ctx.has_input(index):
        return None
    return [int(v) for v in ctx.require_const(index, what).reshape(-1)]


def known_dims(info: TensorInfo | None, rank: int) -> list[int | None]:
    """Static dims shape inference found for an output (``None`` where unknown)."""
    if info is None or info.shape is None or len(info.shape) != rank:
        return [None] * rank
    return list(info.shape)


def settle(extents: list[Extent], info: TensorInfo | None) -> list[Extent]:
    """Replace runtime extents that are opaque arithmetic by the static value ONNX shape
    inference proved (a ``tensor.dim`` stays: it is what lets reshapes become views)."""
    known = known_dims(info, len(extents))
    return [
        k if k is not None and not isinstance(e, int) and extent_math.dim_source(e) is None else e
        for e, k in zip(extents, known)
    ]


def declared_extents(values: list[Extent], declared: list[int | None], message: str) -> list[Extent]:
    """``values`` read from a shape input at run time, each replaced by the extent the
    model declares for it where there is one, and checked against it at run time (so the
    op's result type is static, and a model that breaks its declaration gets an error,
    not a wrong read). ``message`` names ``{value}`` and ``{bound}``."""
    settled = []
    for value, known in zip(values, declared):
        if not isinstance(value, int) and known is not None:
            check_extent(value, known, message)
            value = known
        settled.append(value)
    return settled


def scalar(ctx: NodeContext, index: int) -> ir.Value | int | float:
    """Input ``index`` (a scalar or one-element tensor) as a Python number when known at
    import, else as an SSA scalar read from the tensor."""
    known = ctx.const(index)
    if known is not None:
        if known.size != 1:
            raise HandlerError(f"input {index} must hold one value, not {known.size}")
        return known.reshape(-1)[0].item()
    value = ctx.value(index)
    return tensor.extract(value, [core.index(0)] * core.tensor_type(value).rank)


def axis_info(info: TensorInfo | None, axis: int) -> TensorInfo | None:
    """The declared extent of one axis of an output, as a rank-1 info for :func:`settle`."""
    if info is None or info.shape is None or axis >= len(info.shape):
        return None
    return TensorInfo(info.name, info.dtype, (info.shape[axis],))


def declared_shape(ctx: NodeContext, output: int = 0) -> list[int] | None:
    """The static shape the model (or shape inference) declares for an output, if any."""
    info = ctx.output_infos[output] if output < len(ctx.output_infos) else None
    if info is None or info.shape is None or None in info.shape:
        return None
    return list(info.shape)


def runtime_operand(ctx: NodeContext, index: int, since: int) -> bool:
    """Whether a structure operand (axes, repeats, split) is an input known only at run
    time: then the result's shape must come from the declared output type."""
    return ctx.opset >= since and ctx.has_input(index) and ctx.const(index) is None


def reshape_to_declared(ctx: NodeContext, x: ir.Value, what: str) -> ir.Value:
    """Squeeze/Unsqueeze with runtime axes only insert or drop unit dims, so the data is a
    row-major reshape to the declared result shape."""
    shape = declared_shape(ctx)
    if shape is None:
        raise HandlerError(f"{what} is only known at run time and the output shape is not declared")
    total = extent_math.product(core.sizes(x))
    if isinstance(total, int) and total != math.prod(shape):
        raise HandlerError(f"the declared output shape {shape} does not hold {total} elements")
    return reshapes.reshape(x, shape)


def numbers(ctx: NodeContext, index: int, kind: type) -> list | None:
    """A 1-D input as Python numbers when known at import, else as SSA scalars read from
    the tensor (f64 for reals, index for ints); ``None`` when absent or empty."""
    if not ctx.has_input(index):
        return None
    known = ctx.const(index)
    if known is not None:
        return [kind(v) for v in known.reshape(-1)] or None
    values = ctx.value(index)
    (count,) = core.static_shape(values)
    if count is None:
        raise HandlerError(f"input {index} has a dynamic length")
    if count == 0:
        return None
    read = [tensor.extract(values, [core.index(i)]) for i in range(count)]
    return [resampling.as_f64(v) if kind is float else extent_math.scalar_to_index(v) for v in read]


def is_known(*values: object) -> bool:
    return not any(isinstance(v, ir.Value) for v in values)


def assume_static(value: ir.Value, dims: dict[int, int]) -> ir.Value:
    """``tensor.cast`` dynamic dims the model guarantees (e.g. squeezed dims are 1), so the
    following reshape can be a static collapse."""
    shape = core.static_shape(value)
    if all(shape[d] is not None for d in dims):
        return value
    refined = [dims.get(d, s) if s is None else s for d, s in enumerate(shape)]
    refined = [ir.ShapedType.get_dynamic_size() if s is None else s for s in refined]
    return tensor.cast(ir.RankedTensorType.get(refined, core.tensor_type(value).element_type), value)
