"""ONNX reductions and normalizations: Reduce*, ArgMax/ArgMin, TopK, CumSum, Softmax,
LogSoftmax, Hardmax, BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization, LRN, MeanVarianceNormalization, LpNormalization.

The handlers only translate ONNX conventions (axes as attribute or input, negative axes,
opset-dependent defaults, 2-D coercion) into calls to the shared emitters of
``ir/reduction.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from mlir import ir
from mlir.dialects import arith, math, tensor

from ....ir import core, reshapes
from ....ir import reduction as emit
from ....ir.determinant import determinant
from ..node import HandlerError, NodeContext
from ....errors import ModelImportError, OperandError
from ..registry import onnx_op


def _rank(ctx: NodeContext, index: int = 0) -> int:
    return core.tensor_type(ctx.value(index)).rank


def _axes(axes: object, rank: int) -> list[int]:
    """ONNX axes (attribute list or array, negative from the end) as sorted non-negative."""
    try:
        return emit.normalize_axes([int(a) for a in np.asarray(axes).reshape(-1)], rank)
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error


def _axis(ctx: NodeContext, default: int, rank: int) -> int:
    return _axes([ctx.attr("axis", default)], rank)[0]


def _require_float(ctx: NodeContext, what: str) -> ir.Type:
    element = ctx.element_type(0)
    if not core.is_float(element):
        raise HandlerError(f"{what} needs a floating-point input, got {element}")
    return element


# --- Reduce* ---------------------------------------------------------------------------

# The opset from which each Reduce* op takes its axes as an input instead of an attribute.
_AXES_INPUT_SINCE = {"ReduceSum": 13}
_AXES_INPUT_DEFAULT = 18


def _reduce_axes(ctx: NodeContext, rank: int) -> list[int] | ir.Value:
    """The reduced axes: from the ``axes`` input (newer opsets) or attribute; absent or
    empty means all axes, or none with ``noop_with_empty_axes``. An ``axes`` input known
    only at run time is returned as its SSA tensor (its length must be static)."""
    if ctx.opset >= _AXES_INPUT_SINCE.get(ctx.op_type, _AXES_INPUT_DEFAULT):
        axes = ctx.inputs[1] if ctx.has_input(1) else None
    else:
        axes = ctx.attr("axes", None)
    if isinstance(axes, ir.Value):
        length = core.static_shape(axes)
        if len(length) != 1:
            raise HandlerError(f"the axes input must be 1-D, got {axes.type}")
        if length[0] != 0:
            return axes
        axes = None
    if axes is None or np.asarray(axes).size == 0:
        return [] if ctx.attr("noop_with_empty_axes", 0) else list(range(rank))
    return _axes(axes, rank)


ScalarMap = Callable[[ir.Value, bool], ir.Value]  # (scalar, unsigned) -> scalar


@dataclass(frozen=True)
class _Reduction:
    """A Reduce* op as combiner + per-element map + finishing map of the total."""

    kind: str  # a combiner of emit.reduce, or "logsumexp"
    before: ScalarMap | None = None  # applied to each element
    after: ScalarMap | None = None  # applied to each total
    mean: bool = False
    float_only: bool = False
    widen: bool = True  # accumulate f16 in f32 (sums and products; not max/min)


def _abs(v: ir.Value, unsigned: bool) -> ir.Value:
    if core.is_float(v.type):
        return math.absf(v)
    return v if unsigned else math.absi(v)


def _square(v: ir.Value, _unsigned: bool) -> ir.Value:
    return arith.mulf(v, v) if core.is_float(v.type) else arith.muli(v, v)


def _sqrt(v: ir.Value, unsigned: bool) -> ir.Value:
    """sqrt; for integers through f64, truncated back like the reference's astype."""
    if core.is_float(v.type):
        return math.sqrt(v)
    root = math.sqrt(core.convert_scalar(v, ir.F64Type.get(), unsigned=unsigned))
    return arith.fptoui(v.type, root) if unsigned else arith.fptosi(v.type, root)


def _log(v: ir.Value, _unsigned: bool) -> ir.Value:
    return math.log(v)


_REDUCTIONS = {
    "ReduceSum": _Reduction("sum"),
    "ReduceMean": _Reduction("sum", mean=True),
    "ReduceProd": _Reduction("prod"),
    "ReduceMax": _Reduction("max", widen=False),
    "ReduceMin": _Reduction("min", widen=False),
    "ReduceL1": _Reduction("sum", before=_abs),
    "ReduceL2": _Reduction("sum", before=_square, after=_sqrt),
    "ReduceSumSquare": _Reduction("sum", before=_square),
    "ReduceLogSum": _Reduction("sum", after=_log, float_only=True),
    "ReduceLogSumExp": _Reduction("logsumexp", float_only=True, widen=False),
}


def _finish(total: ir.Value, element: ir.Type, spec: _Reduction, n: ir.Value | None, unsigned: bool) -> ir.Value:
    """Divide by the count (means), apply ``spec.after`` and convert back to ``element``."""
    if n is None and spec.after is None and core.tensor_type(total).element_type == element:
        return total

    def body(v: ir.Value) -> ir.Value:
        if n is not None:
            v = emit.divide(v, n, unsigned=unsigned)
        if spec.after is not None:
            v = spec.after(v, unsigned)
        return core.convert_scalar(v, element)

    return core.elementwise([total], element, body)


def _reduce(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    element = ctx.element_type(0)
    spec = _REDUCTIONS[ctx.op_type]
    if spec.float_only:
        _require_float(ctx, ctx.op_type)
    if emit.is_bool(element) and spec.kind not in ("max", "min"):
        raise HandlerError(f"{ctx.op_type} on bool is not supported")
    axes = _reduce_axes(ctx, _rank(ctx))
    unsigned = ctx.is_unsigned(0)
    acc = emit.accumulator_type(element) if spec.widen else element
    prepare = None
    if spec.before or acc != element:
        before = spec.before or (lambda v, _unsigned: v)
        prepare = lambda v: before(core.convert_scalar(v, acc, unsigned=unsigned), unsigned)  # noqa: E731
    if isinstance(axes, list):
        return [_reduce_known_axes(ctx, spec, axes, acc, prepare)]
    return [_reduce_runtime_axes(ctx, spec, axes, acc, prepare)]


def _reduce_known_axes(ctx: NodeContext, spec: _Reduction, axes: list[int], acc: ir.Type,
                       prepare: Callable[[ir.Value], ir.Value] | None) -> ir.Value:
    """One joint reduction (two for log-sum-exp) and a finishing elementwise op."""
    x, keepdims, unsigned = ctx.value(0), bool(ctx.attr("keepdims", 1)), ctx.is_unsigned(0)
    if spec.kind == "logsumexp":
        total = emit.log_sum_exp(x, axes, keepdims=keepdims)
    else:
        total = emit.reduce(x, axes, spec.kind, keepdims=keepdims, unsigned=unsigned, body=prepare,
                            result_element=acc)
    n = emit.count([core.sizes(x)[a] for a in axes], acc) if spec.mean else None
    return _finish(total, ctx.element_type(0), spec, n, unsigned)


def _reduce_runtime_axes(ctx: NodeContext, spec: _Reduction, axes: ir.Value, acc: ir.Type,
                         prepare: Callable[[ir.Value], ir.Value] | None) -> ir.Value:
    """Axes known only at run time: each dim is reduced (or not) under its runtime flag,
    one after the other; the result's extents are dynamic."""
    x, keepdims, unsigned = ctx.value(0), bool(ctx.attr("keepdims", 1)), ctx.is_unsigned(0)
    rank = _rank(ctx)
    flags = emit.axis_flags(axes, rank, empty_means_all=not ctx.attr("noop_with_empty_axes", 0))
    prepared = core.elementwise([x], acc, prepare) if prepare else x
    if spec.kind == "logsumexp":
        step = lambda y, d: emit.log_sum_exp(y, [d], keepdims=True)  # noqa: E731
    else:
        step = lambda y, d: emit.reduce(y, [d], spec.kind, keepdims=True, unsigned=unsigned)  # noqa: E731
    total = emit.reduce_flagged(prepared, flags, step)
    n = emit.flagged_count(x, flags, acc) if spec.mean else None
    result = _finish(total, ctx.element_type(0), spec, n, unsigned)
    return result if keepdims else emit.drop_flagged_dims(result, flags, _result_rank(ctx, rank, axes))


def _result_rank(ctx: NodeContext, rank: int, axes: ir.Value) -> int:
    """Rank after dropping runtime axes: known from a static axes length, else from the
    inferred output type."""
    length = core.static_shape(axes)[0]
    if length is not None:
        return rank - length
    info = ctx.output_infos[0] if ctx.output_infos else None
    if info is None or info.shape is None:
        raise HandlerError("keepdims=0 with an axes input of unknown length: the result rank is unknown")
    return len(info.shape)


for _op_type in _REDUCTIONS:
    onnx_op(_op_type)(_reduce)
del _op_type


# --- ArgMax / ArgMin / TopK ------------------------------------------------------------

def _arg_reduce(ctx: NodeContext, kind: str) -> list[ir.Value]:
    x = ctx.value(0)
    if emit.is_bool(ctx.element_type(0)):
        raise HandlerError(f"{ctx.op_type} on bool is not supported")
    axis = _axis(ctx, 0, _rank(ctx))
    return [emit.arg_reduce(
        x, [axis], kind, keepdims=bool(ctx.attr("keepdims", 1)),
        select_last=bool(ctx.attr("select_last_index", 0)), unsigned=ctx.is_unsigned(0),
    )]


@onnx_op("ArgMax")
def arg_max(ctx: NodeContext) -> list[ir.Value]:
    return _arg_reduce(ctx, "max")


@onnx_op("ArgMin")
def arg_min(ctx: NodeContext) -> list[ir.Value]:
    return _arg_reduce(ctx, "min")


def _top_k_count(ctx: NodeContext) -> int | ir.Value:
    """k: an attribute before opset 10, then a 1-element input; a runtime k becomes an
    ``index`` value (the outputs' extent along the axis is then dynamic)."""
    if ctx.opset < 10:
        return int(ctx.attr("k"))
    known = ctx.const(1)
    if known is not None:
        return int(np.asarray(known).reshape(-1)[0])
    k = ctx.value(1)
    position = [core.index(0)] * core.tensor_type(k).rank
    return arith.index_cast(ir.IndexType.get(), tensor.extract(k, position))


@onnx_op("TopK")
def top_k(ctx: NodeContext) -> list[ir.Value]:
    x = ctx.value(0)
    rank = _rank(ctx)
    axis = _axis(ctx, -1, rank)
    k = _top_k_count(ctx)
    extent = core.static_shape(x)[axis]
    if isinstance(k, int) and (k < 0 or (extent is not None and k > extent)):
        raise HandlerError(f"k={k} is outside [0, {extent}] (the extent of axis {axis})")
    values, indices = emit.top_k(x, axis, k, largest=bool(ctx.attr("largest", 1)), unsigned=ctx.is_unsigned(0))
    return [values, indices]


# --- CumSum ----------------------------------------------------------------------------

def _cumulative(ctx: NodeContext, kind: str) -> list[ir.Value]:
    """The axis may be known only at run time: then each candidate axis has its own scan
    and the runtime value picks which one runs."""
    x = ctx.value(0)
    rank = _rank(ctx)
    options = dict(exclusive=bool(ctx.attr("exclusive", 0)), reverse=bool(ctx.attr("reverse", 0)))
    known = ctx.const(1)
    if known is not None:
        return [emit.cumulative(x, _axes(known, rank)[0], kind, **options)]
    return [emit.select_axis(ctx.value(1), rank, x.type, lambda d: emit.cumulative(x, d, kind, **options))]


@onnx_op("CumSum", since=11)
def cum_sum(ctx: NodeContext) -> list[ir.Value]:
    return _cumulative(ctx, "sum")


@onnx_op("CumProd", since=26)
def cum_prod(ctx: NodeContext) -> list[ir.Value]:
    return _cumulative(ctx, "prod")


# --- Softmax / LogSoftmax / Hardmax ----------------------------------------------------

def _softmax_axes(ctx: NodeContext) -> list[int]:
    """Before opset 13 the input is coerced to 2-D at ``axis`` (default 1), so the op runs
    jointly over every axis from ``axis`` on; from 13 on it runs over ``axis`` (default -1)."""
    rank = _rank(ctx)
    if ctx.opset < 13:
        return list(range(_axis(ctx, 1, rank) if rank else 0, rank))
    return [_axis(ctx, -1, rank)]


@onnx_op("Softmax")
def softmax(ctx: NodeContext) -> list[ir.Value]:
    _require_float(ctx, "Softmax")
    return [emit.softmax(ctx.value(0), _softmax_axes(ctx))]


@onnx_op("LogSoftmax")
def log_softmax(ctx: NodeContext) -> list[ir.Value]:
    _require_float(ctx, "LogSoftmax")
    return [emit.softmax(ctx.value(0), _softmax_axes(ctx), log=True)]


@onnx_op("Hardmax")
def hardmax(ctx: NodeContext) -> list[ir.Value]:
    _require_float(ctx, "Hardmax")
    return [emit.hardmax(ctx.value(0), _softmax_axes(ctx))]


# --- normalizations --------------------------------------------------------------------

def _produced_outputs(ctx: NodeContext) -> int:
    return sum(1 for name in ctx.node.output if name)


@onnx_op("BatchNormalization", since=7)
def batch_normalization(ctx: NodeContext) -> list[ir.Value]:
    """Inference mode only: normalizing with the batch's own statistics (training) needs
    running-stat outputs that a compiled inference graph has no use for."""
    _require_float(ctx, "BatchNormalization")
    if ctx.attr("training_mode", 0):
        raise HandlerError("training_mode=1 is not supported (inference only)")
    if _produced_outputs(ctx) > 1:
        raise HandlerError("the mean/var/saved statistics outputs exist only in training mode, "
                           "which is not supported")
    x = ctx.value(0)
    rank = _rank(ctx)
    if ctx.opset < 9 and not ctx.attr("spatial", 1) and rank > 2:
        views = [ctx.value(i) for i in range(1, 5)]  # [C, D1, ...] already lines up with x
    else:
        views = [emit.channel_view(ctx.value(i), rank) for i in range(1, 5)]
    scale, bias, mean, var = views
    return [emit.batch_norm_inference(x, scale, bias, mean, var, float(ctx.attr("epsilon", 1e-5)))]


@onnx_op("InstanceNormalization", since=6)
def instance_normalization(ctx: NodeContext) -> list[ir.Value]:
    _require_float(ctx, "InstanceNormalization")
    x = ctx.value(0)
    rank = _rank(ctx)
    if rank < 3:
        raise HandlerError(f"expects [N, C, D1, ...], got rank {rank}")
    scale, bias = (emit.channel_view(ctx.value(i), rank) for i in (1, 2))
    y, _, _ = emit.normalize(x, list(range(2, rank)), float(ctx.attr("epsilon", 1e-5)), scale=scale, bias=bias)
    return [y]


def _stash_element(ctx: NodeContext) -> ir.Type:
    """The element type ``stash_type`` names (the precision of the statistics)."""
    from ..model import onnx_dtype  # noqa: PLC0415  (keeps model loading out of emit paths)

    stash = int(ctx.attr("stash_type", 1))
    try:
        element = core.element_type(onnx_dtype(stash, "stash_type"))
    except (ModelImportError, ValueError) as error:  # an unknown enum value (protobuf's ValueError) or type
        raise HandlerError(f"stash_type={stash} is not supported") from error
    if not core.is_float(element):
        raise HandlerError(f"stash_type={stash} is not a floating-point type")
    return element


def _output_element(ctx: NodeContext, index: int, default: ir.Type) -> ir.Type:
    info = ctx.output_infos[index] if index < len(ctx.output_infos) else None
    return core.element_type(info.dtype) if info is not None and info.dtype is not None else default


def _cast(value: ir.Value, element: ir.Type) -> ir.Value:
    if core.tensor_type(value).element_type == element:
        return value
    return core.elementwise([value], element, lambda v: core.convert_scalar(v, element))


@onnx_op("LayerNormalization", since=17)
def layer_normalization(ctx: NodeContext) -> list[ir.Value]:
    _require_float(ctx, "LayerNormalization")
    x = ctx.value(0)
    rank = _rank(ctx)
    axis = _axis(ctx, -1, rank)
    stash = _stash_element(ctx)
    bias = ctx.value(2) if ctx.has_input(2) else None
    y, mean, inv_std = emit.normalize(
        x, list(range(axis, rank)), float(ctx.attr("epsilon", 1e-5)),
        scale=ctx.value(1), bias=bias, compute_element=stash,
    )
    outputs: list[ir.Value | None] = [y, None, None]
    for index, statistic in ((1, mean), (2, inv_std)):
        if index < len(ctx.node.output) and ctx.node.output[index]:
            outputs[index] = _cast(statistic, _output_element(ctx, index, stash))
    return outputs


@onnx_op("GroupNormalization", since=21)
def group_normalization(ctx: NodeContext) -> list[ir.Value]:
    """Normalize ``[N, G, C/G * D...]`` (a reshape of x) in ``stash_type`` precision,
    reshape back, then scale and shift per channel. (The opset-18 form, with per-group
    parameters, is deprecated: ONNX's checker rejects it before any handler runs.)"""
    _require_float(ctx, "GroupNormalization")
    x = ctx.value(0)
    rank = _rank(ctx)
    groups = int(ctx.attr("num_groups"))
    shape = core.static_shape(x)
    if rank < 2 or shape[1] is None:
        raise HandlerError("needs [N, C, ...] with a static channel count")
    channels = shape[1]
    if groups <= 0 or channels % groups:
        raise HandlerError(f"num_groups={groups} does not divide the {channels} channels")
    extents = core.sizes(x)
    grouped = reshapes.reshape(x, [extents[0], groups, channels // groups, *extents[2:]])
    y, _, _ = emit.normalize(grouped, list(range(2, rank + 1)), float(ctx.attr("epsilon", 1e-5)),
                             compute_element=_stash_element(ctx))
    y = reshapes.reshape(y, extents)
    scale, bias = (emit.channel_view(ctx.value(i), rank) for i in (1, 2))
    element = ctx.element_type(0)
    return [core.elementwise(
        [y, scale, bias], element,
        lambda v, s, b: arith.addf(arith.mulf(v, core.convert_scalar(s, element)), core.convert_scalar(b, element)),
        extents=extents,
    )]


@onnx_op("MeanVarianceNormalization", since=9)
def mean_variance_normalization(ctx: NodeContext) -> list[ir.Value]:
    """``(x - mean) / sqrt(var)`` over ``axes`` (default N, H, W). ONNX's function body
    adds its 1e-9 after the square root; here it goes under it, which differs only where
    the variance itself is ~1e-9 or smaller."""
    _require_float(ctx, "MeanVarianceNormalization")
    axes = _axes(ctx.attr("axes", [0, 2, 3]), _rank(ctx))
    y, _, _ = emit.normalize(ctx.value(0), axes, 1e-9)
    return [y]


@onnx_op("LpNormalization")
def lp_normalization(ctx: NodeContext) -> list[ir.Value]:
    _require_float(ctx, "LpNormalization")
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        raise HandlerError(f"p={p} is not supported (only 1 and 2 are defined)")
    return [emit.lp_normalize(ctx.value(0), _axis(ctx, -1, _rank(ctx)), p)]


@onnx_op("LRN")
def lrn(ctx: NodeContext) -> list[ir.Value]:
    _require_float(ctx, "LRN")
    size = int(ctx.attr("size"))
    if size <= 0:
        raise HandlerError(f"size={size} must be positive")
    if _rank(ctx) < 3:
        raise HandlerError(f"expects [N, C, D1, ...], got rank {_rank(ctx)}")
    return [emit.local_response_norm(
        ctx.value(0), size, float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75)),
        float(ctx.attr("bias", 1.0)),
    )]


@onnx_op("Det", since=11)
def det(ctx: NodeContext) -> list[ir.Value]:
    try:
        return [determinant(ctx.value(0))]
    except OperandError as error:  # the emitter refused the model's operands
        raise HandlerError(str(error)) from error
