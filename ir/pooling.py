"""Shared pooling emitters (used by the ONNX and PyTorch frontends).

Channels-first input (N, C, *spatial). :func:`pool` covers max, sum and average pooling with
explicit padding, strides, dilations and ceil mode, always through the named
``linalg.pooling_ncw_*`` / ``linalg.pooling_nchw_*`` ops with a ``tensor.empty`` window
operand, because the default CPU schedule decomposes and vectorizes those (a generic
sliding-window op stays scalar). 3-D pools are two 2-D pools (box windows are separable);
unsigned max pools flip the sign bit around a signed one. :func:`global_pool` reduces every
spatial dim.

Average pooling is a sum pool divided by the number of elements each window counts: all of
them with ``count_include_pad`` (except the part of a ceil-mode window past the padding,
as PyTorch and onnxruntime do), else only the input elements. The counts are a constant
computed with numpy at import time.
"""

from __future__ import annotations

from functools import reduce
from typing import Callable, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg

from . import core
from .contraction import accumulator_type, collapse, expand, generic_op, round_to
from .conv import check_window_args, window_exprs, window_output_extent, window_span
from ..errors import OperandError

POOL_KINDS = ("max", "sum", "avg")

_NAMED: dict[tuple[int, str], Callable[..., ir.Value]] = {
    (1, "max"): linalg.pooling_ncw_max, (1, "sum"): linalg.pooling_ncw_sum,
    (2, "max"): linalg.pooling_nchw_max, (2, "sum"): linalg.pooling_nchw_sum,
}

_NUMPY_FLOATS = {16: np.float16, 32: np.float32, 64: np.float64}


def lowest_value(element: ir.Type, *, unsigned: bool = False) -> float | int:
    """The identity of ``max`` for ``element``: -inf, or the smallest integer."""
    if core.is_float(element):
        return float("-inf")
    if unsigned or element.width == 1:
        return 0
    return -(1 << (element.width - 1))


def max_scalar(a: ir.Value, b: ir.Value, *, unsigned: bool = False) -> ir.Value:
    """``max(a, b)``: NaN-propagating for floats (as numpy), signed or unsigned for ints."""
    if core.is_float(a.type):
        return arith.maximumf(a, b)
    return arith.maxui(a, b) if unsigned else arith.maxsi(a, b)


def _window_counts(
    extent: int, low: int, high: int, kernel: int, stride: int, dilation: int, out: int,
    include_pad: bool,
) -> np.ndarray:
    """Per output position along one dim, how many window taps the average divides by."""
    taps = (np.arange(out) * stride - low)[:, None] + np.arange(kernel) * dilation
    first, last = (-low, extent + high) if include_pad else (0, extent)
    return ((taps >= first) & (taps < last)).sum(axis=1)


def _window_divisors(
    extents: Sequence, kernel: Sequence[int], strides: Sequence[int], padding_low: Sequence[int],
    padding_high: Sequence[int], dilations: Sequence[int], out: Sequence, count_include_pad: bool,
    accumulator: ir.Type,
) -> float | ir.Value:
    """What each average divides by: one number when every window counts the same, else a
    tensor over the output positions (a numpy constant when the extents are static; with
    dynamic extents, a sum pool of ones padded with zeros, computed at run time)."""
    if all(isinstance(e, int) for e in [*extents, *out]):
        per_dim = [
            _window_counts(e, lo, hi, k, s, d, o, count_include_pad)
            for e, lo, hi, k, s, d, o in zip(extents, padding_low, padding_high, kernel,
                                             strides, dilations, out)
        ]
        counts = reduce(np.multiply.outer, per_dim)
        if (counts == counts.flat[0]).all():
            return float(counts.flat[0])
        return core.constant(counts.astype(_NUMPY_FLOATS[accumulator.width]), name="pool_counts")
    if count_include_pad or not (any(padding_low) or any(padding_high)):
        return float(np.prod(kernel))  # floor mode: every window lies inside the padding
    ones = core.filled([1, 1, *extents], 1, accumulator)
    padded = core.pad_constant(ones, [0, 0, *padding_low], [0, 0, *padding_high], 0)
    return _named_pool(padded, "sum", kernel, strides, dilations, out, 0, accumulator)


def _divide(summed: ir.Value, divisors: float | ir.Value, element: ir.Type) -> ir.Value:
    """``summed / divisors`` (broadcast), rounded to ``element``."""
    accumulator = core.tensor_type(summed).element_type
    if isinstance(divisors, float):
        scalar = core.scalar_constant(divisors, accumulator)
        return core.elementwise(
            [summed], element, lambda v: core.convert_scalar(arith.divf(v, scalar), element)
        )
    return core.elementwise(
        [summed, divisors], element,
        lambda v, c: core.convert_scalar(arith.divf(v, c), element),
        extents=core.sizes(summed),
    )


def _named_pool(
    padded: ir.Value, kind: str, kernel: Sequence[int], strides: Sequence[int],
    dilations: Sequence[int], out: Sequence, fill: float | int, accumulator: ir.Type,
) -> ir.Value:
    """``linalg.pooling_ncw_*`` / ``pooling_nchw_*`` (``kind`` max or sum) of an already
    padded input. A 3-D window is separable (a max or sum over a box is one over its rows
    of planes), so 3-D pools are an (H, W) pool then a (D, 1) pool, both 2-D named ops."""
    spatial = len(kernel)
    extents = core.sizes(padded)
    element = core.tensor_type(padded).element_type
    if spatial < 3:
        init = core.filled([*extents[:2], *out], fill, accumulator)
        window = core.empty(list(kernel), element)
        return _NAMED[(spatial, kind)](
            padded, window, outs=[init], strides=list(strides), dilations=list(dilations)
        )
    n, c, d = extents[:3]
    planes = collapse(padded, [[0], [1, 2], [3], [4]])
    rows = _named_pool(planes, kind, kernel[1:], strides[1:], dilations[1:],
                       out[1:], fill, accumulator)
    rows = expand(rows, [[0], [1, 2], [3], [4]], [n, c, d, *out[1:]])
    if kernel[0] == 1 and strides[0] == 1:
        return rows  # a window one plane deep (a video net's (1, k, k) pool): nothing to pool over depth
    columns = collapse(rows, [[0], [1], [2], [3, 4]])
    flat = core.sizes(columns)[3]
    depth = _named_pool(columns, kind, [kernel[0], 1], [strides[0], 1], [dilations[0], 1],
                        [out[0], flat], fill, accumulator)
    return expand(depth, [[0], [1], [2], [3, 4]], [n, c, *out])


def _flip_sign_bit(x: ir.Value) -> ir.Value:
    """``x ^ 0b10...0``: maps unsigned order onto signed order (and back), so the signed
    named max pool serves unsigned integers too."""
    element = core.tensor_type(x).element_type
    bit = core.scalar_constant(lowest_value(element), element)
    return core.elementwise([x], element, lambda v: arith.xori(v, bit))


def _window_geometry(
    extents: Sequence, kernel: Sequence[int], strides: Sequence[int], padding_low: Sequence[int],
    padding_high: Sequence[int], dilations: Sequence[int], ceil_mode: bool,
) -> tuple[list, list[int]]:
    """Output extents, and the high padding the input actually needs: only as far as the
    last window reaches (ceil mode may need more than asked, floor mode less)."""
    out = [
        window_output_extent(e, lo, hi, k, s, d, ceil_mode=ceil_mode)
        for e, lo, hi, k, s, d in zip(extents, padding_low, padding_high, kernel, strides, dilations)
    ]
    high = [
        max(0, (o - 1) * s + window_span(k, d) - e - lo) if isinstance(e, int) else hi
        for e, o, lo, hi, k, s, d in zip(extents, out, padding_low, padding_high, kernel, strides, dilations)
    ]
    return out, high


def pool(
    x: ir.Value,
    kind: str,
    kernel: Sequence[int],
    *,
    strides: Sequence[int],
    padding_low: Sequence[int],
    padding_high: Sequence[int],
    dilations: Sequence[int],
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    unsigned: bool = False,
) -> ir.Value:
    """Max, sum or average (``kind``) pooling of x (N, C, *spatial) with a ``kernel`` window.

    ``unsigned`` says integer elements are unsigned (max pooling compares them so).
    Padding never wins a max; ``count_include_pad`` only affects ``"avg"``.
    """
    if kind not in POOL_KINDS:
        raise OperandError(f"pool: kind {kind!r} is not one of {POOL_KINDS}")
    spatial = core.tensor_type(x).rank - 2
    check_window_args("pool", spatial, kernel=kernel, strides=strides, padding_low=padding_low,
                      padding_high=padding_high, dilations=dilations)
    element = core.tensor_type(x).element_type
    if kind == "avg" and not core.is_float(element):
        raise OperandError(f"average pooling of integer type {element}")
    extents = core.sizes(x)[2:]
    out, high = _window_geometry(extents, kernel, strides, padding_low, padding_high, dilations, ceil_mode)
    flip = unsigned and kind == "max" and not core.is_float(element)
    if flip:
        x = _flip_sign_bit(x)
    fill = lowest_value(element) if kind == "max" else 0
    padded = core.pad_constant(x, [0, 0, *padding_low], [0, 0, *high], fill)
    accumulator = element if kind == "max" else accumulator_type(element)
    pooled = _named_pool(padded, "max" if kind == "max" else "sum", kernel, strides,
                         dilations, out, fill, accumulator)
    if flip:
        return _flip_sign_bit(pooled)
    if kind != "avg":
        return round_to(pooled, element)
    divisors = _window_divisors(extents, kernel, strides, padding_low, padding_high, dilations, out,
                                count_include_pad, accumulator)
    return _divide(pooled, divisors, element)


def global_pool(x: ir.Value, kind: str, *, unsigned: bool = False) -> ir.Value:
    """Max or average (``kind``) over all spatial dims of x (N, C, *spatial) -> (N, C, 1, ...)."""
    if kind not in ("max", "avg"):
        raise OperandError(f"global_pool: kind {kind!r} is not 'max' or 'avg'")
    rank = core.tensor_type(x).rank
    element = core.tensor_type(x).element_type
    if kind == "avg" and not core.is_float(element):
        raise OperandError(f"average pooling of integer type {element}")
    accumulator = element if kind == "max" else accumulator_type(element)
    fill = lowest_value(element, unsigned=unsigned) if kind == "max" else 0
    extents = core.sizes(x)
    init = core.filled(extents[:2], fill, accumulator)
    dim = ir.AffineDimExpr.get

    def body(value: ir.Value, acc: ir.Value) -> ir.Value:
        value = core.convert_scalar(value, accumulator)
        if kind == "max":
            return max_scalar(acc, value, unsigned=unsigned)
        return arith.addf(acc, value)

    reduced = generic_op(
        [x], init, [ir.AffineMap.get_identity(rank), ir.AffineMap.get(rank, 0, [dim(0), dim(1)])],
        2, rank - 2, body,
    )
    if kind == "avg":
        count = _spatial_count(extents[2:], accumulator)
        reduced = core.elementwise(
            [reduced], element, lambda v: core.convert_scalar(arith.divf(v, count), element)
        )
    else:
        reduced = round_to(reduced, element)
    return expand(reduced, [[0], list(range(1, rank))], [*extents[:2], *[1] * (rank - 2)])


def _spatial_count(extents: Sequence, element: ir.Type) -> ir.Value:
    """The number of spatial elements as a scalar of float type ``element``."""
    static = [e for e in extents if isinstance(e, int)]
    total = core.scalar_constant(float(np.prod(static)) if static else 1.0, element)
    for e in extents:
        if not isinstance(e, int):
            as_int = arith.index_cast(ir.IntegerType.get_signless(64), e)
            total = arith.mulf(total, arith.sitofp(element, as_int))
    return total


def max_pool_with_indices(
    x: ir.Value,
    kernel: Sequence[int],
    *,
    strides: Sequence[int],
    padding_low: Sequence[int],
    padding_high: Sequence[int],
    dilations: Sequence[int],
    ceil_mode: bool = False,
    column_major: bool = False,
    per_plane: bool = False,
    unsigned: bool = False,
) -> tuple[ir.Value, ir.Value]:
    """Max pooling that also returns where each maximum is: an i64 index into the flattened
    input, ``(n * C + c) * prod(spatial) + position`` (ONNX), or only ``position`` with
    ``per_plane`` (PyTorch's return_indices); the position is row-major, or column-major
    (ONNX storage_order=1). The first maximum in window order wins, and padding never does
    (as ONNX's reference, onnxruntime and PyTorch). Needs static spatial extents.

    One ``linalg.generic`` with two results; it tracks an index, so it is not the named
    op and does not vectorize: use :func:`pool` when the indices are not needed.
    """
    spatial = core.tensor_type(x).rank - 2
    check_window_args("max_pool_with_indices", spatial, kernel=kernel, strides=strides,
                      padding_low=padding_low, padding_high=padding_high, dilations=dilations)
    extents = core.static_shape(x)[2:]
    if None in extents:
        raise OperandError("max pooling indices need static spatial extents")
    element = core.tensor_type(x).element_type
    out, high = _window_geometry(extents, kernel, strides, padding_low, padding_high, dilations, ceil_mode)
    fill = lowest_value(element, unsigned=unsigned)
    padded = core.pad_constant(x, [0, 0, *padding_low], [0, 0, *high], fill)
    i64 = ir.IntegerType.get_signless(64)
    leading = core.sizes(x)[:2]
    inits = [core.filled([*leading, *out], fill, element), core.filled([*leading, *out], -1, i64)]
    loops = 2 + 2 * spatial
    out_loops, window_loops = list(range(2, 2 + spatial)), list(range(2 + spatial, loops))
    dim = ir.AffineDimExpr.get
    out_map = ir.AffineMap.get(loops, 0, [dim(d) for d in range(2 + spatial)])
    maps = [
        ir.AffineMap.get(loops, 0, [dim(0), dim(1), *window_exprs(out_loops, window_loops, strides, dilations)]),
        ir.AffineMap.get(loops, 0, [dim(k) for k in window_loops]),
        out_map, out_map,
    ]
    axes = list(range(spatial)) if column_major else list(range(spatial))[::-1]
    flat_strides = {axis: int(np.prod([extents[a] for a in axes[: axes.index(axis)]])) for axis in axes}
    plane = int(np.prod(extents))
    channels = leading[1] if not isinstance(leading[1], int) else core.index(leading[1])

    def body(value: ir.Value, _tap: ir.Value, best: ir.Value, best_index: ir.Value) -> list[ir.Value]:
        index = lambda loop: linalg.IndexOp(loop).result  # noqa: E731
        flat = core.index(0)
        if not per_plane:
            flat = arith.muli(arith.addi(arith.muli(index(0), channels), index(1)), core.index(plane))
        inside = arith.constant(ir.IntegerType.get_signless(1), 1)
        for axis in range(spatial):
            # The tap's position in the unpadded input: o * stride + k * dilation - low.
            position = arith.subi(
                arith.addi(arith.muli(index(out_loops[axis]), core.index(strides[axis])),
                           arith.muli(index(window_loops[axis]), core.index(dilations[axis]))),
                core.index(padding_low[axis]),
            )
            inside = arith.andi(inside, arith.andi(
                arith.cmpi(arith.CmpIPredicate.sge, position, core.index(0)),
                arith.cmpi(arith.CmpIPredicate.slt, position, core.index(extents[axis])),
            ))
            flat = arith.addi(flat, arith.muli(position, core.index(flat_strides[axis])))
        if core.is_float(element):
            greater = arith.cmpf(arith.CmpFPredicate.OGT, value, best)
        else:
            greater = arith.cmpi(arith.CmpIPredicate.ugt if unsigned else arith.CmpIPredicate.sgt, value, best)
        first = arith.cmpi(arith.CmpIPredicate.slt, best_index, core.scalar_constant(0, i64))
        take = arith.andi(inside, arith.ori(first, greater))
        return [arith.select(take, value, best), arith.select(take, arith.index_cast(i64, flat), best_index)]

    window = core.empty(list(kernel), element)
    values, indices = generic_op([padded, window], inits, maps, 2 + spatial, spatial, body)
    return values, indices
