"""Resize: nearest, linear and cubic interpolation, one ``linalg.generic`` per pass over the output.

Shared by the ONNX and PyTorch frontends; split from one shape module by topic."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from mlir import ir
from mlir.dialects import arith, tensor
from mlir.dialects import math as mmath

from . import core
from .contraction import collapse, generic_op
from .extent_math import as_index, sub
from .movement import indexed_generic
from ..errors import OperandError

# --------------------------------------------------------------------------------------
# Resize (nearest / linear / cubic interpolation)
# --------------------------------------------------------------------------------------

COORDINATE_MODES = (
    "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric",
    "tf_crop_and_resize",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
RESIZE_MODES = ("nearest", "linear", "cubic")

@dataclass(frozen=True)
class ResizeMethod:
    """The interpolation, in the vocabulary ONNX and PyTorch's ``interpolate`` share.

    ``coordinate_mode`` maps an output position to an input coordinate; ``nearest_mode``
    rounds it (nearest); linear/cubic weigh 2/4 neighbours, more when ``antialias`` widens
    the kernel of a downsample; ``exclude_outside`` drops neighbours past the edge instead
    of repeating the edge element.
    """

    mode: str = "nearest"
    coordinate_mode: str = "half_pixel"
    nearest_mode: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False

    def __post_init__(self) -> None:
        for value, allowed in ((self.mode, RESIZE_MODES), (self.coordinate_mode, COORDINATE_MODES),
                               (self.nearest_mode, NEAREST_MODES)):
            if value not in allowed:
                raise OperandError(f"unsupported resize option {value!r}; expected one of {allowed}")


@dataclass(frozen=True)
class ResizeAxis:
    """One resized axis: the output extent, the scale (output / input, as given: it may
    differ from the ratio of the integer extents) and, for crop-and-resize, the region of
    interest in normalized input coordinates."""

    size: int | ir.Value
    scale: float | ir.Value
    roi: tuple[float | ir.Value, float | ir.Value] = (0.0, 1.0)
    min_scale: float | None = None  # a lower bound on a runtime scale (sizes the kernel)


def as_f64(x: float | int | ir.Value) -> ir.Value:
    """An f64 scalar for a Python number, an index or integer value, or a float value."""
    f64 = ir.F64Type.get()
    if not isinstance(x, ir.Value):
        return arith.constant(f64, float(x))
    if isinstance(x.type, ir.IndexType):
        x = arith.index_cast(ir.IntegerType.get_signless(64), x)
    if isinstance(x.type, ir.IntegerType):
        return arith.sitofp(f64, x)
    return x if x.type == f64 else arith.extf(f64, x)


def _tap_count(method: ResizeMethod, axis: ResizeAxis) -> int:
    """Neighbours per output position: 2 for nearest (then one is chosen), 2 for linear, 4
    for cubic, and for an antialiased downsample the kernel's footprint at this scale.

    A runtime scale uses the footprint at its lower bound ``min_scale``, the widest
    possible: the taps beyond the actual footprint get weight exactly 0.
    """
    if method.mode == "nearest":
        return 2
    support = 1 if method.mode == "linear" else 2
    if not method.antialias:
        return 2 * support
    scale = axis.scale
    if isinstance(scale, ir.Value):
        if not axis.min_scale:
            raise OperandError("an antialiased resize needs its scale, or a bound on it, at import time")
        scale = axis.min_scale
    start = int(np.floor(-support / min(scale, 1.0)) + 1)
    return 2 - 2 * start


def _axis_coordinate(y: ir.Value, n: ir.Value, out: ir.Value, scale: ir.Value, axis: ResizeAxis,
                     mode: str) -> ir.Value:
    """The input coordinate of output position ``y`` (f64 throughout, operations in the
    order of ONNX's reference so that ties round the same way)."""
    one, half = as_f64(1.0), as_f64(0.5)
    width = arith.mulf(scale, n)  # the output extent as a real number
    is_single = arith.cmpf(arith.CmpFPredicate.OEQ, width, one)
    half_pixel = arith.subf(arith.divf(arith.addf(y, half), scale), half)
    n_minus_1 = arith.subf(n, one)
    if mode == "half_pixel":
        return half_pixel
    if mode == "pytorch_half_pixel":
        return arith.select(is_single, as_f64(-0.5), half_pixel)
    if mode == "asymmetric":
        return arith.divf(y, scale)
    if mode == "align_corners":
        stretched = arith.divf(arith.mulf(y, n_minus_1), arith.subf(width, one))
        return arith.select(is_single, as_f64(0.0), stretched)
    if mode == "half_pixel_symmetric":
        offset = arith.mulf(arith.divf(n, as_f64(2.0)), arith.subf(one, arith.divf(out, width)))
        return arith.subf(arith.addf(offset, arith.divf(arith.addf(y, half), scale)), half)
    low, high = as_f64(axis.roi[0]), as_f64(axis.roi[1])
    span = arith.subf(high, low)
    single = arith.divf(arith.mulf(span, n_minus_1), as_f64(2.0))
    stretched = arith.divf(arith.mulf(arith.mulf(y, span), n_minus_1), arith.subf(width, one))
    return arith.addf(arith.select(is_single, single, stretched), arith.mulf(low, n_minus_1))


def _kernel_weights(method: ResizeMethod, ratio: ir.Value, scale: ir.Value, taps: int) -> list[ir.Value]:
    """The ``taps`` weights of the neighbours of a coordinate ``ratio`` past its floor."""
    one = as_f64(1.0)
    if method.mode == "nearest":
        predicate = {
            "round_prefer_floor": arith.CmpFPredicate.OGT, "round_prefer_ceil": arith.CmpFPredicate.OGE,
        }.get(method.nearest_mode)
        if predicate is not None:
            right = arith.cmpf(predicate, ratio, as_f64(0.5))
        else:
            right = core.scalar_constant(method.nearest_mode == "ceil", ir.IntegerType.get_signless(1))
        exact = arith.cmpf(arith.CmpFPredicate.OEQ, ratio, one)  # an exact coordinate reads itself
        right = arith.ori(right, exact)
        return [arith.select(right, as_f64(0.0), one), arith.select(right, one, as_f64(0.0))]
    a = as_f64(method.cubic_a)
    if not method.antialias:
        if method.mode == "linear":
            return [arith.subf(one, ratio), ratio]
        return [_cubic(arith.addf(ratio, one), a), _cubic(ratio, a),
                _cubic(arith.subf(one, ratio), a), _cubic(arith.subf(as_f64(2.0), ratio), a)]
    shrink = arith.minimumf(scale, one)
    first = -(taps // 2) + 1
    weights = []
    for k in range(taps):
        x = arith.mulf(arith.subf(as_f64(float(first + k)), ratio), shrink)
        if method.mode == "linear":
            w = arith.maximumf(arith.subf(one, mmath.absf(x)), as_f64(0.0))
        else:
            w = _cubic(x, a)
        weights.append(w)
    return _normalized(weights)


def _cubic(x: ir.Value, a: ir.Value) -> ir.Value:
    """Keys' cubic convolution kernel with parameter ``a`` (zero beyond |x| >= 2)."""
    x = mmath.absf(x)
    one, two = as_f64(1.0), as_f64(2.0)
    x2 = arith.mulf(x, x)
    x3 = arith.mulf(x2, x)
    # |x| <= 1: (a + 2)|x|^3 - (a + 3)|x|^2 + 1
    near = arith.addf(arith.subf(arith.mulf(arith.addf(a, two), x3), arith.mulf(arith.addf(a, as_f64(3.0)), x2)), one)
    # 1 < |x| < 2: a|x|^3 - 5a|x|^2 + 8a|x| - 4a
    far = arith.subf(
        arith.addf(arith.subf(arith.mulf(a, x3), arith.mulf(arith.mulf(as_f64(5.0), a), x2)),
                   arith.mulf(arith.mulf(as_f64(8.0), a), x)),
        arith.mulf(as_f64(4.0), a),
    )
    inner = arith.cmpf(arith.CmpFPredicate.OLE, x, one)
    within = arith.cmpf(arith.CmpFPredicate.OLT, x, two)
    return arith.select(inner, near, arith.select(within, far, as_f64(0.0)))


def _normalized(weights: list[ir.Value]) -> list[ir.Value]:
    total = weights[0]
    for w in weights[1:]:
        total = arith.addf(total, w)
    zero = arith.cmpf(arith.CmpFPredicate.OEQ, total, as_f64(0.0))
    total = arith.select(zero, as_f64(1.0), total)
    return [arith.divf(w, total) for w in weights]


@dataclass
class _AxisTaps:
    indices: list[ir.Value]  # index values, clamped into the input
    weights: list[ir.Value] | None  # f64; None for nearest (one tap, weight 1)
    outside: ir.Value | None  # i1: the coordinate fell outside (crop-and-resize)


def _axis_taps(position: ir.Value, n_in: int | ir.Value, axis: ResizeAxis, method: ResizeMethod) -> _AxisTaps:
    """Neighbours and weights for one output position along one axis (built in a body)."""
    taps = _tap_count(method, axis)
    y = as_f64(position)
    n = as_f64(n_in)
    scale = as_f64(axis.scale)
    x = _axis_coordinate(y, n, as_f64(axis.size), scale, axis, method.coordinate_mode)
    floor = mmath.floor(x)
    exact = arith.cmpf(arith.CmpFPredicate.OEQ, x, floor)
    ratio = arith.select(exact, as_f64(1.0), arith.subf(x, floor))
    weights = _kernel_weights(method, ratio, scale, taps)
    # The window of `taps` neighbours nearest to x, ties going to the lower ones.
    pad = -(-taps // 2)
    padded = arith.addf(x, as_f64(float(pad)))
    base = mmath.floor(padded)
    frac = arith.subf(padded, base)
    if taps % 2 == 0:
        tie = arith.cmpf(arith.CmpFPredicate.OEQ, frac, as_f64(0.0))
        low = -(taps // 2)
    else:
        tie = arith.cmpf(arith.CmpFPredicate.OLE, frac, as_f64(0.5))
        low = -((taps - 1) // 2)
    offset = arith.select(tie, core.index(low - pad), core.index(low + 1 - pad))
    start = arith.addi(arith.index_cast(ir.IndexType.get(), arith.fptosi(ir.IntegerType.get_signless(64), base)), offset)
    raw = [arith.addi(start, core.index(k)) for k in range(taps)]
    last = as_index(sub(n_in, 1))
    if method.exclude_outside and weights is not None and method.mode != "nearest":
        inside = [
            arith.andi(arith.cmpi(arith.CmpIPredicate.sge, i, core.index(0)),
                       arith.cmpi(arith.CmpIPredicate.sle, i, last))
            for i in raw
        ]
        weights = _normalized([arith.select(ok, w, as_f64(0.0)) for ok, w in zip(inside, weights)])
    indices = [arith.minsi(arith.maxsi(i, core.index(0)), last) for i in raw]
    outside = None
    if method.coordinate_mode == "tf_crop_and_resize":
        below = arith.cmpf(arith.CmpFPredicate.OLT, x, as_f64(0.0))
        above = arith.cmpf(arith.CmpFPredicate.OGT, x, arith.subf(n, as_f64(1.0)))
        outside = arith.ori(below, above)
    if method.mode == "nearest":
        right = arith.cmpf(arith.CmpFPredicate.OGT, weights[1], as_f64(0.5))
        return _AxisTaps([arith.select(right, indices[1], indices[0])], None, outside)
    return _AxisTaps(indices, weights, outside)


# One fused pass reads the product of every axis' taps per output element; beyond this
# many the resize runs one pass per axis (as ONNX's reference does), each reading few.
_MAX_FUSED_TAPS = 16


def resize(
    value: ir.Value,
    axes: dict[int, ResizeAxis],
    method: ResizeMethod,
    *,
    fill: float = 0.0,
    unsigned: bool = False,
) -> ir.Value:
    """Resize ``value`` along ``axes`` (the others are kept).

    Coordinates, neighbours and weights are computed in f64 in the loop body from the output
    position, so runtime scales work the same as constant ones (constants fold). The
    weighted sum is formed in f64 and converted once at the end; integer results are
    rounded half to even and saturated (``unsigned``: MLIR integers are signless), and a
    crop-and-resize position outside the input is ``fill``.

    Integer results are interpolated one axis at a time, as ONNX's reference does: rounding
    to an integer exposes the order of the sums whenever a value lands on a half.
    """
    if not axes:
        return value
    factors = _whole_factors(value, axes)
    element = core.tensor_type(value).element_type
    if factors is not None and _repeats_elements(method):
        return _repeat_elements(value, factors) if factors else value
    if factors is not None and _blends_neighbours(method, element):
        return _blend_neighbours(value, factors) if factors else value
    taps = math.prod(1 if method.mode == "nearest" else _tap_count(method, a) for a in axes.values())
    element = core.tensor_type(value).element_type
    if taps == 1 or (taps <= _MAX_FUSED_TAPS and core.is_float(element)):
        return _resize_pass(value, axes, method, element, fill, unsigned)
    ordered = list(axes)  # in the order given (ONNX: the order of the axes attribute)
    for k, axis in enumerate(ordered):  # separable: f64 in between, converted at the end
        last = k == len(ordered) - 1
        result = element if last else ir.F64Type.get()
        value = _resize_pass(value, {axis: axes[axis]}, method, result, fill, unsigned)
    return value


def _whole_factors(value: ir.Value, axes: dict[int, ResizeAxis]) -> dict[int, int] | None:
    """Axis -> factor (> 1) where every resized axis has a static extent multiplied by a whole
    scale; ``None`` when one has not (empty: every extent kept)."""
    shape = core.static_shape(value)
    factors = {}
    for d, axis in axes.items():
        if not isinstance(axis.size, int) or isinstance(axis.scale, ir.Value) or not shape[d]:
            return None
        factor = axis.size // shape[d]
        if factor < 1 or axis.size != shape[d] * factor or float(axis.scale) != factor:
            return None
        if factor > 1:
            factors[d] = factor
    return factors


def _repeats_elements(method: ResizeMethod) -> bool:
    """Whether a nearest resize by whole factors picks input ``o // factor`` for output
    ``o``: asymmetric coordinates rounded down (PyTorch's ``interpolate(mode="nearest")``),
    or half-pixel ones rounded to nearest (ONNX's default), whose offsets stay within half a
    pixel, never a tie."""
    return method.mode == "nearest" and (
        (method.coordinate_mode == "asymmetric" and method.nearest_mode == "floor")
        or (method.coordinate_mode in ("half_pixel", "pytorch_half_pixel")
            and method.nearest_mode in ("round_prefer_floor", "round_prefer_ceil")))


# Element types the blend computes in, as the numpy types of its weight vectors. The others
# take the general resize, which sums in f64: an f16 blend came out 1 ulp (5e-4) from
# onnxruntime's.
_BLEND_DTYPES = {"f32": np.float32, "f64": np.float64}


def _blends_neighbours(method: ResizeMethod, element: ir.Type) -> bool:
    """Whether a linear resize by whole factors is a fixed blend of each input element with
    one neighbour per output phase: half-pixel coordinates (PyTorch's ``align_corners=False``,
    ONNX's default), f32 or f64 elements, no antialiasing."""
    return (method.mode == "linear" and method.coordinate_mode in ("half_pixel", "pytorch_half_pixel")
            and not method.antialias and str(element) in _BLEND_DTYPES)


def _repeat_elements(value: ir.Value, factors: dict[int, int]) -> ir.Value:
    """Each element repeated ``factors[d]`` times along axis ``d``: a broadcast into a tensor
    with a (extent, factor) pair of dims per axis, collapsed (no gather, so it vectorizes;
    the general nearest resize computes f64 coordinates and gathers per element, and a
    2x upsampling in a feature pyramid ran as scalar loops), in the order
    :func:`_image_order` gives."""
    rank = core.tensor_type(value).rank
    order = _image_order(rank, factors)
    moved = core.transpose(value, order)
    shape = core.static_shape(moved)
    moved_factors = [factors.get(order[d], 1) for d in range(rank)]
    out_shape, groups, input_dims = [], [], []
    for d in range(rank):
        start = len(out_shape)
        out_shape.append(shape[d])
        input_dims.append(start)
        if moved_factors[d] > 1:
            out_shape.append(moved_factors[d])
        groups.append(list(range(start, len(out_shape))))
    loops = len(out_shape)
    maps = [ir.AffineMap.get(loops, 0, [ir.AffineDimExpr.get(d) for d in input_dims]),
            ir.AffineMap.get_identity(loops)]
    element = core.tensor_type(value).element_type
    repeated = generic_op([moved], core.empty(out_shape, element), maps, loops, 0, lambda x, _: x)
    collapsed = collapse(repeated, groups)
    return core.transpose(collapsed, [order.index(d) for d in range(rank)])


def _image_order(rank: int, factors: dict[int, int]) -> list[int]:
    """The dim order a resize by ``factors`` runs in: NHWC for an NCHW image resized along H
    and W (transposes the layout pass cancels; the channels stay the contiguous, vectorized
    dim), else the value's own."""
    return [0, 2, 3, 1] if rank == 4 and set(factors) <= {2, 3} else list(range(rank))


def _blend_neighbours(value: ir.Value, factors: dict[int, int]) -> ir.Value:
    """A half-pixel linear resize by whole factors, one axis at a time: output ``s i + r``
    sits at input coordinate ``i + f_r`` with ``f_r = (r + 0.5) / s - 0.5`` in (-0.5, 0.5),
    so it blends input ``i`` with ``i - 1`` (``f_r < 0``) or ``i + 1`` by fixed weights per
    phase ``r``. Three shifted views of the input, its edges repeated (as ONNX's reference
    pads), times per-phase weight vectors: elementwise, so it vectorizes. The general
    resize computes f64 coordinates and gathers per element, in scalar loops."""
    rank = core.tensor_type(value).rank
    order = _image_order(rank, factors)
    moved = core.transpose(value, order)
    for d in range(rank):
        if factors.get(order[d], 1) > 1:
            moved = _blend_axis(moved, d, factors[order[d]])
    return core.transpose(moved, [order.index(d) for d in range(rank)])


def _blend_axis(x: ir.Value, axis: int, factor: int) -> ir.Value:
    """:func:`_blend_neighbours` along one axis of ``x`` (static shape)."""
    shape = core.static_shape(x)
    element = core.tensor_type(x).element_type
    n, rank = shape[axis], len(shape)

    def view(start: int, extent: int, source: ir.Value) -> ir.Value:
        offsets, sizes = [0] * rank, list(core.static_shape(source))
        offsets[axis], sizes[axis] = start, extent
        return tensor.extract_slice(ir.RankedTensorType.get(sizes, element), source, [], [], [],
                                    offsets, sizes, [1] * rank)

    padded_shape = list(shape)
    padded_shape[axis] = n + 2
    edges = tensor.concat(ir.RankedTensorType.get(padded_shape, element), axis,
                          [view(0, 1, x), x, view(n - 1, 1, x)])
    shifted = [view(k, n, edges) for k in range(3)]  # input i - 1, i, i + 1
    weights = np.zeros((3, factor))
    for r in range(factor):
        f = (r + 0.5) / factor - 0.5
        weights[:, r] = (-f, 1 + f, 0.0) if f < 0 else (0.0, 1 - f, f)
    dtype = _BLEND_DTYPES[str(element)]
    columns = [core.constant(weights[k].astype(dtype), name="resize_weights") for k in range(3)]
    loops = rank + 1  # the input's dims, with the phase after ``axis``
    dims = [ir.AffineDimExpr.get(d) for d in range(loops)]
    input_map = ir.AffineMap.get(loops, 0, dims[:axis + 1] + dims[axis + 2:])
    phase_map = ir.AffineMap.get(loops, 0, [dims[axis + 1]])
    out_shape = shape[:axis + 1] + [factor] + shape[axis + 1:]

    def body(lo, mid, hi, w_lo, w_mid, w_hi, _):
        return arith.addf(arith.addf(arith.mulf(lo, w_lo), arith.mulf(mid, w_mid)), arith.mulf(hi, w_hi))

    blended = generic_op([*shifted, *columns], core.empty(out_shape, element),
                         [input_map] * 3 + [phase_map] * 3 + [ir.AffineMap.get_identity(loops)], loops, 0, body)
    return collapse(blended, [[d] for d in range(axis)] + [[axis, axis + 1]]
                    + [[d + 1] for d in range(axis + 1, rank)])


def _resize_pass(value: ir.Value, axes: dict[int, ResizeAxis], method: ResizeMethod,
                 result: ir.Type, fill: float, unsigned: bool) -> ir.Value:
    extents = core.sizes(value)
    out = [axes[d].size if d in axes else e for d, e in enumerate(extents)]
    source = core.tensor_type(value).element_type
    f64 = ir.F64Type.get()

    def body(positions, _):
        ordered = sorted(axes)
        per_axis = {d: _axis_taps(positions[d], extents[d], axes[d], method) for d in ordered}
        total = None
        counts = [len(per_axis[d].indices) for d in ordered]
        for combo in np.ndindex(*counts):
            where = list(positions)
            weight = None
            for d, k in zip(ordered, combo):
                where[d] = per_axis[d].indices[k]
                if per_axis[d].weights is not None:
                    w = per_axis[d].weights[k]
                    weight = w if weight is None else arith.mulf(weight, w)
            sample = tensor.extract(value, where)
            if weight is None:  # nearest: a pure gather, exact for every type
                total = sample
                continue
            term = arith.mulf(weight, core.convert_scalar(sample, f64, unsigned=unsigned))
            total = term if total is None else arith.addf(total, term)
        if total.type != result:
            total = _from_f64(total, result, unsigned)
        for d in ordered:
            if per_axis[d].outside is not None:
                total = arith.select(per_axis[d].outside, core.scalar_constant(fill, result), total)
        return total

    if source != result and method.mode == "nearest":
        raise OperandError("a nearest resize keeps the element type")
    return indexed_generic(out, result, body)


def _from_f64(value: ir.Value, element: ir.Type, unsigned: bool) -> ir.Value:
    """An f64 sum back to the element type; integers are rounded half to even and
    saturated to the type's range, as ONNX's reference does."""
    if core.is_float(element):
        return core.convert_scalar(value, element)
    width = element.width
    low, high = (0, 2**width - 1) if unsigned else (-(2 ** (width - 1)), 2 ** (width - 1) - 1)
    rounded = mmath.roundeven(value)
    clamped = arith.minimumf(arith.maximumf(rounded, as_f64(float(low))), as_f64(float(high)))
    return arith.fptoui(element, clamped) if unsigned else arith.fptosi(element, clamped)


