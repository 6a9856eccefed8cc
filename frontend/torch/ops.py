"""The table from core ATen op to emitter.

Each handler takes an :class:`~.importer.OpContext` and the node's arguments (FX nodes
replaced by their values: SSA tensors, ``index`` values for symbolic sizes, import-time
arrays, Python scalars) and returns the node's value. Handlers only translate PyTorch's
conventions (argument order, ``-1`` sizes, negative dims, type promotion, padding as one
number) into calls of the emitters in ``frontend/emit/``, which the ONNX frontend shares:
one convolution, one matmul and one pooling emitter in the project.

Type promotion follows the FX node's metadata: arithmetic happens in the result dtype that
``torch.export`` recorded; comparisons in ``torch.result_type`` of their operands.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch
from mlir import ir
from mlir.dialects import arith, math

from ..emit import (
    contraction,
    conv,
    core,
    elementwise,
    extent_math,
    movement,
    pooling,
    reduction,
    reshapes,
)
from .importer import Handler, OpContext, numpy_dtype

ATEN_OPS: dict[str, Handler] = {}

_INT64 = np.dtype(np.int64)


def aten(*names: str) -> Callable[[Handler], Handler]:
    """Register a handler for the named ATen overloads (``"add.Tensor"`` -> ``aten.add.Tensor``)."""

    def register(handler: Handler) -> Handler:
        for name in names:
            key = name if "." in name and name.split(".")[0] in ("operator", "aten") else f"aten.{name}"
            if key in ATEN_OPS:
                raise KeyError(f"{key} is registered twice")
            ATEN_OPS[key] = handler
        return handler

    return register


# --- small helpers ----------------------------------------------------------------------------

def _rank(value: ir.Value) -> int:
    return core.tensor_type(value).rank


def _dim(dim: int, rank: int) -> int:
    """A PyTorch dim (negative counts from the end) as a position; ``ValueError`` if out of range."""
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise ValueError(f"dim {dim} is out of range for rank {rank}")
    return dim % rank if rank else 0


def _dims(dims: Any, rank: int) -> list[int]:
    """A dim list (``None`` or ``[]``: all dims) as sorted positions."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({_dim(d, rank) for d in dims})


def _meta_dtype(meta: Any) -> Any:
    """A stand-in for ``torch.result_type``: zero-size tensors keep the rank category
    (0-d tensors promote like scalars), Python scalars stay scalars."""
    if isinstance(meta, torch.Tensor):
        return torch.empty([0] * meta.dim(), dtype=meta.dtype)
    return meta


def _promoted(ctx: OpContext, *positions: int) -> np.dtype:
    metas = [_meta_dtype(ctx.arg_meta(p)) for p in positions]
    dtype = torch.result_type(metas[0], metas[1]) if len(metas) == 2 else metas[0].dtype
    return numpy_dtype(dtype)


def _unsigned(dtype: np.dtype) -> bool:
    return dtype.kind == "u"


def _map(ctx: OpContext, operands: Sequence[Any], compute: np.dtype, body: Callable[..., ir.Value],
         result: np.dtype | None = None) -> ir.Value:
    """``body`` over the broadcast operands, all converted to ``compute`` first."""
    result = result if result is not None else ctx.result_dtype()
    values = [ctx.tensor(v, compute) for v in operands]
    return core.elementwise(values, core.element_type(result), body)


def _identity(ctx: OpContext, x: Any, *_: Any, **__: Any) -> Any:
    return x


def _nothing(ctx: OpContext, *_: Any, **__: Any) -> None:
    return None


# --- elementwise --------------------------------------------------------------------------------

def _float_unary(fn: Callable[[ir.Value], ir.Value]) -> Handler:
    def handler(ctx: OpContext, x: Any) -> ir.Value:
        dtype = ctx.result_dtype()
        return _map(ctx, [x], dtype, fn)
    return handler


_UNARY: dict[str, Callable[[ir.Value], ir.Value]] = {
    "exp.default": math.exp,
    "log.default": math.log,
    "tanh.default": math.tanh,
    "sqrt.default": math.sqrt,
    "rsqrt.default": math.rsqrt,
    "sin.default": math.sin,
    "cos.default": math.cos,
    "floor.default": math.floor,
    "ceil.default": math.ceil,
    "round.default": math.roundeven,  # halves to even, like torch.round
    "erf.default": elementwise.erf,
    "log1p.default": elementwise.log1p,
    "expm1.default": elementwise.expm1,
    "sigmoid.default": elementwise.sigmoid,
    "reciprocal.default": elementwise.reciprocal,
    "silu.default": lambda x: arith.mulf(x, elementwise.sigmoid(x)),
    "hardswish.default": elementwise.hard_swish,
    "hardsigmoid.default": lambda x: elementwise.hard_sigmoid(x, 1 / 6, 0.5),
    "softplus.default": elementwise.softplus,
}
for _name, _fn in _UNARY.items():
    aten(_name)(_float_unary(_fn))


@aten("relu.default")
def relu(ctx: OpContext, x: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    return _map(ctx, [x], dtype, lambda v: elementwise.maximum(v, elementwise.like(0, v),
                                                               unsigned=_unsigned(dtype)))


@aten("neg.default")
def neg(ctx: OpContext, x: Any) -> ir.Value:
    return _map(ctx, [x], ctx.result_dtype(), elementwise.negate)


@aten("abs.default")
def abs_(ctx: OpContext, x: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    return _map(ctx, [x], dtype, lambda v: elementwise.absolute(v, unsigned=_unsigned(dtype)))


@aten("sign.default")
def sign(ctx: OpContext, x: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    return _map(ctx, [x], dtype, lambda v: elementwise.sign(v, unsigned=_unsigned(dtype)))


@aten("gelu.default")
def gelu(ctx: OpContext, x: Any, approximate: str = "none") -> ir.Value:
    return _map(ctx, [x], ctx.result_dtype(), lambda v: elementwise.gelu(v, approximate))


@aten("leaky_relu.default")
def leaky_relu(ctx: OpContext, x: Any, negative_slope: float = 0.01) -> ir.Value:
    return _map(ctx, [x], ctx.result_dtype(), lambda v: elementwise.leaky_relu(v, negative_slope))


@aten("elu.default")
def elu(ctx: OpContext, x: Any, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> ir.Value:
    if scale != 1.0 or input_scale != 1.0:
        raise NotImplementedError("elu with scale or input_scale other than 1 (selu/celu)")
    return _map(ctx, [x], ctx.result_dtype(), lambda v: elementwise.elu(v, alpha))


@aten("clamp.default", "hardtanh.default", "clamp_min.default", "clamp_max.default")
def clamp(ctx: OpContext, x: Any, low: Any = None, high: Any = None) -> ir.Value:
    name = ctx.node.target._opname
    if name == "clamp_max":
        low, high = None, low
    dtype = ctx.result_dtype()
    if name == "hardtanh":
        low = -1.0 if low is None else low
        high = 1.0 if high is None else high
    unsigned = _unsigned(dtype)

    def body(v: ir.Value) -> ir.Value:
        if low is not None:
            v = elementwise.maximum(v, elementwise.like(low, v), unsigned=unsigned)
        if high is not None:
            v = elementwise.minimum(v, elementwise.like(high, v), unsigned=unsigned)
        return v

    return _map(ctx, [x], dtype, body)


@aten("logical_not.default")
def logical_not(ctx: OpContext, x: Any) -> ir.Value:
    return _map(ctx, [x], np.dtype(np.bool_), elementwise.logical_not)


@aten("add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "rsub.Scalar", "rsub.Tensor")
def add_sub(ctx: OpContext, a: Any, b: Any, alpha: Any = 1) -> ir.Value:
    name = ctx.node.target._opname
    dtype = ctx.result_dtype()
    if name == "rsub":
        a, b = b, a
    subtract = name in ("sub", "rsub")

    def body(x: ir.Value, y: ir.Value) -> ir.Value:
        if alpha != 1:
            y = elementwise.multiply(y, elementwise.like(alpha, y))
        return elementwise.subtract(x, y) if subtract else elementwise.add(x, y)

    return _map(ctx, [a, b], dtype, body)


@aten("mul.Tensor", "mul.Scalar")
def mul(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    if dtype == np.bool_:
        return _map(ctx, [a, b], dtype, arith.andi)
    return _map(ctx, [a, b], dtype, elementwise.multiply)


@aten("div.Tensor", "div.Scalar", "div.Tensor_mode", "div.Scalar_mode")
def div(ctx: OpContext, a: Any, b: Any, *, rounding_mode: str | None = None) -> ir.Value:
    dtype = ctx.result_dtype()
    unsigned = _unsigned(dtype)
    if rounding_mode is None or dtype.kind == "f":
        def body(x: ir.Value, y: ir.Value) -> ir.Value:
            q = elementwise.divide(x, y, unsigned=unsigned)
            if rounding_mode == "floor":
                return math.floor(q)
            if rounding_mode == "trunc":
                return math.trunc(q)
            return q
        return _map(ctx, [a, b], dtype, body)
    if rounding_mode == "trunc":
        return _map(ctx, [a, b], dtype, lambda x, y: elementwise.divide(x, y, unsigned=unsigned))
    # Integer floor division: truncating quotient, minus one where the signs differ and
    # the division is inexact (numpy's floor_divide).
    def floor_body(x: ir.Value, y: ir.Value) -> ir.Value:
        q = elementwise.divide(x, y, unsigned=unsigned)
        if unsigned:
            return q
        r = elementwise.remainder(x, y, floored=False)
        inexact = arith.cmpi(arith.CmpIPredicate.ne, r, elementwise.like(0, r))
        signs_differ = arith.cmpi(arith.CmpIPredicate.slt, arith.xori(r, y), elementwise.like(0, r))
        fix = arith.andi(inexact, signs_differ)
        return arith.select(fix, arith.subi(q, elementwise.like(1, q)), q)
    return _map(ctx, [a, b], dtype, floor_body)


@aten("remainder.Tensor", "remainder.Scalar", "fmod.Tensor", "fmod.Scalar")
def remainder(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    floored = ctx.node.target._opname == "remainder"
    return _map(ctx, [a, b], dtype,
                lambda x, y: elementwise.remainder(x, y, floored=floored, unsigned=_unsigned(dtype)))


@aten("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar")
def pow_(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    if isinstance(b, (int, float)) and float(b) == 2.0 and dtype.kind == "f":
        return _map(ctx, [a], dtype, lambda x: arith.mulf(x, x))
    if isinstance(b, (int, float)) and float(b) == 0.5 and dtype.kind == "f":
        return _map(ctx, [a], dtype, math.sqrt)
    return _map(ctx, [a, b], dtype, lambda x, y: elementwise.power(x, y))


@aten("maximum.default", "minimum.default")
def extremum(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    fn = elementwise.maximum if ctx.node.target._opname == "maximum" else elementwise.minimum
    return _map(ctx, [a, b], dtype, lambda x, y: fn(x, y, unsigned=_unsigned(dtype)))


_COMPARISONS = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def _compare(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    compute = _promoted(ctx, 0, 1)
    predicate = _COMPARISONS[ctx.node.target._opname]
    return _map(ctx, [a, b], compute,
                lambda x, y: elementwise.compare(predicate, x, y, unsigned=_unsigned(compute)))


for _name in _COMPARISONS:
    aten(f"{_name}.Tensor", f"{_name}.Scalar")(_compare)


_LOGICAL = {"logical_and": arith.andi, "logical_or": arith.ori, "logical_xor": arith.xori,
            "bitwise_and": arith.andi, "bitwise_or": arith.ori, "bitwise_xor": arith.xori}


def _logical(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    name = ctx.node.target._opname
    dtype = np.dtype(np.bool_) if name.startswith("logical") else ctx.result_dtype()
    if dtype.kind == "f":
        raise TypeError(f"{name} of floating-point tensors")
    return _map(ctx, [a, b], dtype, _LOGICAL[name])


for _name in _LOGICAL:
    aten(f"{_name}.default" if _name.startswith("logical") else f"{_name}.Tensor")(_logical)


@aten("where.self", "where.ScalarSelf", "where.ScalarOther", "where.Scalar")
def where(ctx: OpContext, condition: Any, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    c = ctx.tensor(condition, np.dtype(np.bool_))
    values = [ctx.tensor(v, dtype) for v in (a, b)]
    return core.elementwise([c, *values], core.element_type(dtype), arith.select)


@aten("masked_fill.Scalar", "masked_fill.Tensor")
def masked_fill(ctx: OpContext, x: Any, mask: Any, value: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    operands = [ctx.tensor(mask, np.dtype(np.bool_)), ctx.tensor(value, dtype), ctx.tensor(x, dtype)]
    return core.elementwise(operands, core.element_type(dtype), arith.select)


@aten("_to_copy.default", "to.dtype", "_to_copy.dtype")
def to_copy(ctx: OpContext, x: Any, *_: Any, **__: Any) -> ir.Value:
    return ctx.tensor(x, ctx.result_dtype())


for _name in ("clone.default", "alias.default", "detach.default", "lift_fresh_copy.default",
              "contiguous.default", "dropout.default"):
    aten(_name)(_identity)

for _name in ("_assert_tensor_metadata.default", "_assert_scalar.default",
              "sym_constrain_range_for_size.default", "sym_constrain_range.default"):
    aten(_name)(_nothing)


# --- contractions, convolution, pooling --------------------------------------------------------

@aten("mm.default", "bmm.default", "matmul.default")
def matmul(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    return contraction.matmul(ctx.tensor(a, dtype), ctx.tensor(b, dtype))


@aten("addmm.default")
def addmm(ctx: OpContext, bias: Any, a: Any, b: Any, *, beta: float = 1, alpha: float = 1) -> ir.Value:
    dtype = ctx.result_dtype()
    return contraction.gemm(ctx.tensor(a, dtype), ctx.tensor(b, dtype), ctx.tensor(bias, dtype),
                            alpha=float(alpha), beta=float(beta))


@aten("baddbmm.default")
def baddbmm(ctx: OpContext, bias: Any, a: Any, b: Any, *, beta: float = 1, alpha: float = 1) -> ir.Value:
    dtype = ctx.result_dtype()
    product = contraction.matmul(ctx.tensor(a, dtype), ctx.tensor(b, dtype))

    def body(p: ir.Value, c: ir.Value) -> ir.Value:
        return elementwise.add(elementwise.multiply(p, elementwise.like(alpha, p)),
                               elementwise.multiply(c, elementwise.like(beta, c)))

    return core.elementwise([product, ctx.tensor(bias, dtype)], core.element_type(dtype), body)


def _per_dim(value: Any, count: int, name: str) -> list[int]:
    values = [value] if isinstance(value, int) else list(value)
    if len(values) == 1:
        values *= count
    if len(values) != count or not all(isinstance(v, int) for v in values):
        raise ValueError(f"{name} {value!r} needs {count} static entries")
    return values


@aten("convolution.default")
def convolution(ctx: OpContext, x: Any, w: Any, bias: Any, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
                groups: int) -> ir.Value:
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    spatial = _rank(x) - 2
    windows = {
        "strides": _per_dim(stride, spatial, "stride"),
        "padding_low": _per_dim(padding, spatial, "padding"),
        "padding_high": _per_dim(padding, spatial, "padding"),
        "dilations": _per_dim(dilation, spatial, "dilation"),
        "groups": groups,
    }
    b = None if bias is None else ctx.tensor(bias, dtype)
    if transposed:
        filters = w.astype(dtype) if isinstance(w, np.ndarray) else ctx.tensor(w, dtype)
        return conv.conv_transpose(x, filters, b, output_padding=_per_dim(output_padding, spatial, "output_padding"),
                                   **windows)
    return conv.conv(x, ctx.tensor(w, dtype), b, **windows)


def _pool_windows(kernel: Any, stride: Any, padding: Any, dilation: Any, spatial: int) -> dict:
    kernel = _per_dim(kernel, spatial, "kernel_size")
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else stride
    return {
        "kernel": kernel,
        "strides": _per_dim(stride, spatial, "stride"),
        "padding_low": _per_dim(padding, spatial, "padding"),
        "padding_high": _per_dim(padding, spatial, "padding"),
        "dilations": _per_dim(dilation, spatial, "dilation"),
    }


@aten("max_pool2d_with_indices.default", "max_pool1d_with_indices.default",
      "max_pool2d.default", "max_pool1d.default")
def max_pool(ctx: OpContext, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
             dilation: Any = 1, ceil_mode: bool = False) -> Any:
    with_indices = ctx.node.target._opname.endswith("_with_indices")
    if with_indices and any(u.args[1] != 0 for u in ctx.node.users):
        raise NotImplementedError("max pooling indices (only the pooled values are supported)")
    x = ctx.tensor(x)
    windows = _pool_windows(kernel_size, stride, padding, dilation, _rank(x) - 2)
    dtype = ctx.result_dtype(0 if with_indices else None)
    pooled = pooling.pool(x, "max", windows.pop("kernel"), ceil_mode=ceil_mode,
                          unsigned=_unsigned(dtype), **windows)
    return (pooled, None) if with_indices else pooled


@aten("avg_pool2d.default", "avg_pool1d.default")
def avg_pool(ctx: OpContext, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
             ceil_mode: bool = False, count_include_pad: bool = True,
             divisor_override: int | None = None) -> ir.Value:
    x = ctx.tensor(x)
    windows = _pool_windows(kernel_size, stride, padding, 1, _rank(x) - 2)
    kernel = windows.pop("kernel")
    if divisor_override is None:
        return pooling.pool(x, "avg", kernel, ceil_mode=ceil_mode,
                            count_include_pad=count_include_pad, **windows)
    summed = pooling.pool(x, "sum", kernel, ceil_mode=ceil_mode, **windows)
    return core.elementwise([summed], core.tensor_type(summed).element_type,
                            lambda v: arith.divf(v, elementwise.like(divisor_override, v)))


@aten("_adaptive_avg_pool2d.default", "adaptive_avg_pool2d.default", "_adaptive_avg_pool1d.default",
      "adaptive_avg_pool1d.default")
def adaptive_avg_pool(ctx: OpContext, x: Any, output_size: Sequence[int]) -> ir.Value:
    x = ctx.tensor(x)
    spatial = _rank(x) - 2
    out = _per_dim(output_size, spatial, "output_size")
    extents = core.static_shape(x)[2:]
    if all(o == 1 for o in out):
        return pooling.global_pool(x, "avg")
    if None in extents or any(e % o for e, o in zip(extents, out)):
        raise NotImplementedError(
            f"adaptive average pooling of spatial extents {extents} to {out}: only output sizes "
            "that divide static input sizes are supported")
    kernel = [e // o for e, o in zip(extents, out)]
    return pooling.pool(x, "avg", kernel, strides=kernel, padding_low=[0] * spatial,
                        padding_high=[0] * spatial, dilations=[1] * spatial)


# --- reductions and normalizations ------------------------------------------------------------

@aten("sum.dim_IntList", "sum.default")
def sum_(ctx: OpContext, x: Any, dims: Any = None, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    result = ctx.result_dtype()
    x = ctx.tensor(x, result)
    if result == np.bool_:
        raise NotImplementedError("a sum in bool")
    return reduction.reduce(x, _dims(dims, _rank(x)), "sum", keepdims=keepdim, unsigned=_unsigned(result))


@aten("prod.dim_int", "prod.default")
def prod(ctx: OpContext, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    result = ctx.result_dtype()
    x = ctx.tensor(x, result)
    return reduction.reduce(x, _dims(dim, _rank(x)), "prod", keepdims=keepdim, unsigned=_unsigned(result))


@aten("mean.dim", "mean.default")
def mean(ctx: OpContext, x: Any, dims: Any = None, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    x = ctx.tensor(x, ctx.result_dtype())
    return reduction.mean(x, _dims(dims, _rank(x)), keepdims=keepdim)


@aten("amax.default", "amin.default", "max.default", "min.default")
def amax(ctx: OpContext, x: Any, dims: Any = None, keepdim: bool = False) -> ir.Value:
    x = ctx.tensor(x)
    kind = "max" if ctx.node.target._opname in ("amax", "max") else "min"
    return reduction.reduce(x, _dims(dims, _rank(x)), kind, keepdims=keepdim,
                            unsigned=_unsigned(ctx.result_dtype()))


@aten("max.dim", "min.dim")
def max_dim(ctx: OpContext, x: Any, dim: int, keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    x = ctx.tensor(x)
    kind = ctx.node.target._opname
    axes = [_dim(dim, _rank(x))]
    unsigned = _unsigned(ctx.result_dtype(0))
    values = reduction.reduce(x, axes, kind, keepdims=keepdim, unsigned=unsigned)
    return values, reduction.arg_reduce(x, axes, kind, keepdims=keepdim, unsigned=unsigned)


@aten("argmax.default", "argmin.default")
def argmax(ctx: OpContext, x: Any, dim: int | None = None, keepdim: bool = False) -> ir.Value:
    x = ctx.tensor(x)
    kind = "max" if ctx.node.target._opname == "argmax" else "min"
    if dim is None:
        flat = reshapes.reshape(x, [extent_math.product(core.sizes(x))])
        result = reduction.arg_reduce(flat, [0], kind)
        return reshapes.reshape(result, [1] * _rank(x)) if keepdim else result
    return reduction.arg_reduce(x, [_dim(dim, _rank(x))], kind, keepdims=keepdim)


@aten("any.dim", "any.dims", "any.default", "all.dim", "all.dims", "all.default")
def any_(ctx: OpContext, x: Any, dims: Any = None, keepdim: bool = False) -> ir.Value:
    x = ctx.tensor(x, np.dtype(np.bool_))
    kind = "max" if ctx.node.target._opname == "any" else "min"
    return reduction.reduce(x, _dims(dims, _rank(x)), kind, keepdims=keepdim, unsigned=True)


def _variance(ctx: OpContext, x: Any, dims: Any, correction: float, keepdim: bool) -> ir.Value:
    """Sum of squared deviations from the mean over ``dims``, divided by ``N - correction``."""
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    axes = _dims(dims, _rank(x))
    element = core.element_type(dtype)
    centre = reduction.mean(x, axes, keepdims=True)
    squares = reduction.reduce(x, axes, "sum", keepdims=keepdim, extra=[centre],
                               body=lambda v, m: arith.mulf(arith.subf(v, m), arith.subf(v, m)))
    extents = core.sizes(x)
    count = reduction.count([extents[a] for a in axes], element)
    denominator = arith.subf(count, core.scalar_constant(float(correction), element))
    return core.elementwise([squares], element, lambda s: arith.divf(s, denominator))


@aten("var.correction")
def var_correction(ctx: OpContext, x: Any, dims: Any = None, *, correction: float | None = None,
                   keepdim: bool = False) -> ir.Value:
    return _variance(ctx, x, dims, 1 if correction is None else correction, keepdim)


@aten("var.dim")
def var_dim(ctx: OpContext, x: Any, dims: Any = None, unbiased: bool = True, keepdim: bool = False) -> ir.Value:
    return _variance(ctx, x, dims, 1 if unbiased else 0, keepdim)


@aten("_softmax.default", "_log_softmax.default", "softmax.int", "log_softmax.int")
def softmax(ctx: OpContext, x: Any, dim: int, half_to_float: Any = False) -> ir.Value:
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    return reduction.softmax(x, [_dim(dim, _rank(x))], log="log_softmax" in ctx.node.target._opname)


@aten("native_layer_norm.default")
def layer_norm(ctx: OpContext, x: Any, normalized_shape: Sequence[int], weight: Any, bias: Any,
               eps: float) -> tuple[ir.Value, ir.Value, ir.Value]:
    dtype = ctx.result_dtype(0)
    x = ctx.tensor(x, dtype)
    rank = _rank(x)
    axes = list(range(rank - len(normalized_shape), rank))
    scale = None if weight is None else ctx.tensor(weight, dtype)
    shift = None if bias is None else ctx.tensor(bias, dtype)
    return reduction.normalize(x, axes, eps, scale=scale, bias=shift)


@aten("_native_batch_norm_legit_no_training.default")
def batch_norm(ctx: OpContext, x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any,
               momentum: float, eps: float) -> tuple[ir.Value, None, None]:
    dtype = ctx.result_dtype(0)
    x = ctx.tensor(x, dtype)
    channels = core.static_shape(x)[1]
    if channels is None:
        raise ValueError("batch norm needs a static channel dim")
    ones, zeros = np.ones([channels], dtype), np.zeros([channels], dtype)
    params = [ctx.tensor(ones if weight is None else weight, dtype),
              ctx.tensor(zeros if bias is None else bias, dtype),
              ctx.tensor(running_mean, dtype), ctx.tensor(running_var, dtype)]
    rank = _rank(x)
    params = [reduction.channel_view(p, rank) for p in params]
    if any(u.args[1] != 0 for u in ctx.node.users):
        raise NotImplementedError("batch norm statistics outputs (inference returns only the result)")
    return reduction.batch_norm_inference(x, *params, eps), None, None


@aten("native_group_norm.default")
def group_norm(ctx: OpContext, x: Any, weight: Any, bias: Any, n: Any, c: int, hw: Any, groups: int,
               eps: float) -> tuple[ir.Value, ir.Value, ir.Value]:
    dtype = ctx.result_dtype(0)
    x = ctx.tensor(x, dtype)
    extents = core.sizes(x)
    grouped = reshapes.reshape(x, [extents[0], groups, extent_math.product([c // groups, *extents[2:]])])
    y, mean_, rstd = reduction.normalize(grouped, [2], eps)
    y = reshapes.reshape(y, extents)
    rank = len(extents)
    if weight is not None or bias is not None:
        w = reduction.channel_view(ctx.tensor(np.ones([c], dtype) if weight is None else weight, dtype), rank)
        b = reduction.channel_view(ctx.tensor(np.zeros([c], dtype) if bias is None else bias, dtype), rank)
        y = core.elementwise([y, w, b], core.element_type(dtype),
                             lambda v, s, t: elementwise.add(elementwise.multiply(v, s), t))
    return y, reduction.drop_unit_dims(mean_, [2]), reduction.drop_unit_dims(rstd, [2])


@aten("cumsum.default", "cumprod.default")
def cumsum(ctx: OpContext, x: Any, dim: int, *, dtype: Any = None) -> ir.Value:
    x = ctx.tensor(x, ctx.result_dtype())
    kind = "sum" if ctx.node.target._opname == "cumsum" else "prod"
    return reduction.cumulative(x, _dim(dim, _rank(x)), kind)


@aten("linalg_vector_norm.default")
def vector_norm(ctx: OpContext, x: Any, ord: float = 2, dim: Any = None, keepdim: bool = False, *,
                dtype: Any = None) -> ir.Value:
    if ord != 2:
        raise NotImplementedError(f"vector norm of order {ord} (only 2)")
    result = ctx.result_dtype()
    x = ctx.tensor(x, result)
    squares = reduction.reduce(x, _dims(dim, _rank(x)), "sum", keepdims=keepdim,
                               body=lambda v: arith.mulf(v, v))
    return core.elementwise([squares], core.element_type(result), math.sqrt)


# --- shapes and data movement -----------------------------------------------------------------

def _extents(x: ir.Value, requested: Sequence[Any]) -> list[Any]:
    """A PyTorch size list (ints, symbolic sizes as index values, one ``-1``) as extents."""
    requested = [extent_math.scalar_to_index(e) if isinstance(e, ir.Value) and not isinstance(e.type, ir.IndexType)
                 else e for e in requested]
    if sum(1 for e in requested if isinstance(e, int) and e == -1) > 1:
        raise ValueError(f"size {requested} has more than one -1")
    known = [e for e in requested if not (isinstance(e, int) and e == -1)]
    if len(known) == len(requested):
        return list(requested)
    missing = extent_math.infer_extent(core.sizes(x), known)
    return [missing if isinstance(e, int) and e == -1 else e for e in requested]


@aten("view.default", "_unsafe_view.default", "reshape.default")
def view(ctx: OpContext, x: Any, size: Sequence[Any]) -> ir.Value:
    x = ctx.tensor(x)
    return reshapes.reshape(x, _extents(x, size))


def _transpose(x: ir.Value, permutation: Sequence[int]) -> ir.Value:
    """``core.transpose``, composed with a ``linalg.transpose`` that produced ``x``: the
    decompositions of attention permute heads back and forth, and two copies where one (or
    none, for inverse permutations) does would each cost a pass over the tensor."""
    owner = x.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "linalg.transpose":
        inner = list(ir.DenseI64ArrayAttr(owner.attributes["permutation"]))
        return core.transpose(owner.operands[0], [inner[p] for p in permutation])
    return core.transpose(x, permutation)


@aten("permute.default")
def permute(ctx: OpContext, x: Any, dims: Sequence[int]) -> ir.Value:
    x = ctx.tensor(x)
    return _transpose(x, [_dim(d, _rank(x)) for d in dims])


@aten("t.default", "transpose.int")
def transpose(ctx: OpContext, x: Any, dim0: int = 0, dim1: int = 1) -> ir.Value:
    x = ctx.tensor(x)
    rank = _rank(x)
    if rank < 2:
        return x
    order = list(range(rank))
    a, b = _dim(dim0, rank), _dim(dim1, rank)
    order[a], order[b] = order[b], order[a]
    return _transpose(x, order)


@aten("expand.default")
def expand(ctx: OpContext, x: Any, size: Sequence[Any], *, implicit: bool = False) -> ir.Value:
    x = ctx.tensor(x)
    current = core.sizes(x)
    offset = len(size) - len(current)
    extents = [current[i - offset] if isinstance(e, int) and e == -1 else e for i, e in enumerate(size)]
    if all(isinstance(e, int) for e in extents) and core.static_shape(x) == extents:
        return x
    return movement.broadcast_to(x, _extents(x, extents))


@aten("unsqueeze.default")
def unsqueeze(ctx: OpContext, x: Any, dim: int) -> ir.Value:
    x = ctx.tensor(x)
    return reduction.expand_dims(x, [_dim(dim, _rank(x) + 1)])


@aten("squeeze.dims", "squeeze.dim", "squeeze.default")
def squeeze(ctx: OpContext, x: Any, dims: Any = None) -> ir.Value:
    x = ctx.tensor(x)
    candidates = _dims(dims, _rank(x))
    extents = core.static_shape(x)
    unit = [d for d in candidates if extents[d] == 1]
    if any(extents[d] is None for d in candidates):
        raise ValueError("squeeze of a dynamic dim (it may or may not be 1)")
    return reduction.drop_unit_dims(x, unit)


@aten("cat.default")
def cat(ctx: OpContext, tensors: Sequence[Any], dim: int = 0) -> ir.Value:
    dtype = ctx.result_dtype()
    values = [ctx.tensor(t, dtype) for t in tensors]
    # torch.cat skips 1-D empty tensors whatever the other ranks are (legacy behaviour)
    values = [v for v in values if not (_rank(v) == 1 and core.static_shape(v) == [0])] or values[:1]
    rank = _rank(values[0])
    return movement.concat(values, _dim(dim, rank))


def _clamped(index: Any, extent: Any) -> Any:
    """A slice bound as torch reads it: negative counts from the end, then clamped to [0, extent]."""
    if isinstance(index, int) and isinstance(extent, int):
        if index < 0:
            index += extent
        return min(max(index, 0), extent)
    if isinstance(index, int) and index >= 0 and index >= 2**62:
        return extent
    return extent_math.clamp(extent_math.normalize_index(index, extent), 0, extent)


@aten("slice.Tensor")
def slice_(ctx: OpContext, x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> ir.Value:
    x = ctx.tensor(x)
    axis = _dim(dim, _rank(x))
    extent = core.sizes(x)[axis]
    start = _clamped(0 if start is None else start, extent)
    end = _clamped(extent if end is None else end, extent)
    if not isinstance(step, int) or step < 1:
        raise ValueError(f"slice step {step!r} (only positive static steps)")
    length = extent_math.maximum(extent_math.ceildiv(extent_math.sub(end, start), step), 0)
    if isinstance(start, int) and start == 0 and step == 1 and extent_math.same_extent(length, extent):
        return x
    return movement.slice_axis(x, axis, start, length, step)


@aten("split_with_sizes.default", "split.Tensor")
def split(ctx: OpContext, x: Any, sizes: Any, dim: int = 0) -> list[ir.Value]:
    x = ctx.tensor(x)
    axis = _dim(dim, _rank(x))
    lengths = [m.shape[axis] for m in ctx.meta]
    if not all(isinstance(n, int) for n in lengths):
        raise ValueError("split into symbolic sizes")
    pieces, offset = [], 0
    for length in lengths:
        pieces.append(movement.slice_axis(x, axis, offset, length))
        offset += length
    return pieces


@aten("unbind.int")
def unbind(ctx: OpContext, x: Any, dim: int = 0) -> list[ir.Value]:
    x = ctx.tensor(x)
    axis = _dim(dim, _rank(x))
    extent = core.static_shape(x)[axis]
    if extent is None:
        raise ValueError("unbind along a dynamic dim")
    return [movement.select(x, axis, i) for i in range(extent)]


@aten("select.int")
def select(ctx: OpContext, x: Any, dim: int, index: Any) -> ir.Value:
    x = ctx.tensor(x)
    axis = _dim(dim, _rank(x))
    return movement.select(x, axis, extent_math.normalize_index(index, core.sizes(x)[axis]))


@aten("index_select.default")
def index_select(ctx: OpContext, x: Any, dim: int, index: Any) -> ir.Value:
    x = ctx.tensor(x)
    return movement.gather(x, ctx.tensor(index, _INT64), _dim(dim, _rank(x)))


@aten("gather.default")
def gather(ctx: OpContext, x: Any, dim: int, index: Any, *, sparse_grad: bool = False) -> ir.Value:
    x = ctx.tensor(x)
    return movement.gather_elements(x, ctx.tensor(index, _INT64), _dim(dim, _rank(x)))


@aten("embedding.default")
def embedding(ctx: OpContext, weight: Any, indices: Any, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> ir.Value:
    return movement.gather(ctx.tensor(weight), ctx.tensor(indices, _INT64), 0)


@aten("index.Tensor")
def index(ctx: OpContext, x: Any, indices: Sequence[Any]) -> ir.Value:
    """Advanced indexing with adjacent index tensors (``x[:, i]``, ``x[i, j]``); the result
    dims of the indices replace the indexed dims in place, as PyTorch does for adjacent ones."""
    x = ctx.tensor(x)
    rank = _rank(x)
    positions = [p for p, i in enumerate(indices) if i is not None]
    if positions != list(range(positions[0], positions[-1] + 1)):
        raise NotImplementedError("index with non-adjacent index tensors")
    tensors = []
    for p in positions:
        t = ctx.tensor(indices[p])
        if core.tensor_type(t).element_type == ir.IntegerType.get_signless(1):
            raise NotImplementedError("boolean mask indexing (its result size depends on the data)")
        tensors.append(ctx.tensor(indices[p], _INT64))
    first = positions[0]
    if len(tensors) == 1:
        return movement.gather(x, tensors[0], first)
    extents = core.broadcast_extents(tensors)
    stacked = movement.concat([reduction.expand_dims(movement.broadcast_to(t, extents), [len(extents)])
                            for t in tensors], len(extents))
    order = positions + [d for d in range(rank) if d not in positions]
    gathered = movement.gather_nd(core.transpose(x, order), stacked)
    # gathered: index dims, then the dims not indexed; move the index dims to `first`
    index_rank = len(extents)
    rest = rank - len(positions)
    result_order = (list(range(index_rank, index_rank + first)) + list(range(index_rank))
                    + list(range(index_rank + first, index_rank + rest)))
    return core.transpose(gathered, result_order)


@aten("constant_pad_nd.default")
def constant_pad(ctx: OpContext, x: Any, pad: Sequence[int], value: float = 0) -> ir.Value:
    x = ctx.tensor(x)
    rank = _rank(x)
    low, high = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        low[rank - 1 - i], high[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return movement.pad(x, low, high, "constant", value)


@aten("flip.default")
def flip(ctx: OpContext, x: Any, dims: Sequence[int]) -> ir.Value:
    x = ctx.tensor(x)
    return movement.reverse(x, [_dim(d, _rank(x)) for d in dims])


@aten("repeat.default")
def repeat(ctx: OpContext, x: Any, repeats: Sequence[int]) -> ir.Value:
    x = ctx.tensor(x)
    extra = len(repeats) - _rank(x)
    if extra < 0:
        raise ValueError(f"repeat {list(repeats)} has fewer entries than the rank {_rank(x)}")
    x = reduction.expand_dims(x, list(range(extra)))
    return movement.tile(x, list(repeats))


@aten("tril.default", "triu.default")
def triangle(ctx: OpContext, x: Any, diagonal: int = 0) -> ir.Value:
    return movement.triangular(ctx.tensor(x), ctx.node.target._opname == "triu", diagonal)


# --- creation ---------------------------------------------------------------------------------

def _size_list(size: Sequence[Any]) -> list[Any]:
    return [extent_math.scalar_to_index(e) if isinstance(e, ir.Value) and not isinstance(e.type, ir.IndexType)
            else e for e in size]


@aten("full.default", "zeros.default", "ones.default", "empty.memory_format", "new_full.default",
      "new_zeros.default", "new_ones.default", "new_empty.default")
def full(ctx: OpContext, *args: Any, **_: Any) -> ir.Value:
    name = ctx.node.target._opname
    if name.startswith("new_"):
        args = args[1:]
        name = name[4:]
    size = args[0]
    fill = {"zeros": 0, "ones": 1, "empty": 0}.get(name, args[1] if len(args) > 1 else 0)
    return core.filled(_size_list(size), fill, ctx.result_element())


@aten("full_like.default", "zeros_like.default", "ones_like.default", "empty_like.default")
def full_like(ctx: OpContext, x: Any, fill: Any = 0, **_: Any) -> ir.Value:
    name = ctx.node.target._opname
    fill = {"zeros_like": 0, "ones_like": 1, "empty_like": 0}.get(name, fill)
    return core.filled(core.sizes(ctx.tensor(x)), fill, ctx.result_element())


@aten("scalar_tensor.default")
def scalar_tensor(ctx: OpContext, value: Any, **_: Any) -> ir.Value:
    return core.filled([], value, ctx.result_element())


@aten("arange.start_step", "arange.default", "arange.start")
def arange(ctx: OpContext, *args: Any, **_: Any) -> ir.Value:
    start, end, step = {1: (0, args[0] if args else None, 1), 2: (*args, 1), 3: args}[len(args)]
    dtype = ctx.result_dtype()
    count = ctx.meta.shape[0]
    if not isinstance(count, int):
        if not all(isinstance(v, int) for v in (start, step)) or step != 1:
            raise NotImplementedError("arange with a symbolic length needs integer start and step 1")
        count = extent_math.sub(extent_math.scalar_to_index(end) if not isinstance(end.type, ir.IndexType) else end, start)
    element = core.element_type(dtype)
    return movement.arange(core.scalar_constant(start, element), core.scalar_constant(step, element), count)


# --- symbolic sizes ---------------------------------------------------------------------------

@aten("sym_size.int")
def sym_size(ctx: OpContext, x: Any, dim: int) -> Any:
    x = ctx.tensor(x)
    return core.sizes(x)[_dim(dim, _rank(x))]


_SIZE_ARITHMETIC = {"operator.mul": extent_math.mul, "operator.add": extent_math.add, "operator.sub": extent_math.sub,
                    "operator.floordiv": extent_math.floordiv}

for _name, _fn in _SIZE_ARITHMETIC.items():
    aten(_name)(lambda ctx, a, b, _fn=_fn: _fn(a, b))

aten("operator.getitem")(lambda ctx, container, position: container[position])
