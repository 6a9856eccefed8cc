"""GridSample: each output element samples the input at a position a grid gives, in
normalized coordinates, with nearest, linear or cubic interpolation over any number of
spatial dims (ONNX GridSample 16/20/22, PyTorch's ``grid_sample``); and AffineGrid, the
grid an affine map makes (a spatial transformer's pair).

One ``linalg.generic`` over the output ``[N, C, *grid spatial dims]``: its body reads the
grid's coordinates, maps them to input positions, and reads (``tensor.extract``) the
neighbours the interpolation weighs. Every read index is clamped into the input, so a
coordinate far outside (or NaN) never reads out of bounds; what an outside neighbour
contributes is the padding mode's business (zero, the border's value, or the reflected
position's).

The arithmetic follows ONNX's reference: coordinates are denormalized and rounded in the
grid's float type, borders and reflection in f64, interpolation weights and the weighted sum
in f64, converted once at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from mlir import ir
from mlir.dialects import arith, tensor
from mlir.dialects import math as mmath

from . import core
from .checks import check_extent
from .extent_math import to_float
from .movement import indexed_generic
from ..errors import OperandError

GRID_SAMPLE_MODES = ("nearest", "linear", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
_CUBIC_A = -0.75  # Keys' parameter, as ONNX and PyTorch fix it


@dataclass(frozen=True)
class GridSampleMethod:
    """The interpolation ``mode``, what a neighbour outside the input reads
    (``padding_mode``), and whether -1 and 1 are the centres of the corner elements
    (``align_corners``) or their outer edges."""

    mode: str = "linear"
    padding_mode: str = "zeros"
    align_corners: bool = False

    def __post_init__(self) -> None:
        for name, value, allowed in (("mode", self.mode, GRID_SAMPLE_MODES),
                                     ("padding_mode", self.padding_mode, PADDING_MODES)):
            if value not in allowed:
                raise OperandError(f"unsupported GridSample {name} {value!r}; expected one of {allowed}")


def _f64(value: float) -> ir.Value:
    return core.scalar_constant(value, ir.F64Type.get())


def _borders(length: ir.Value, align_corners: bool) -> tuple[ir.Value, ir.Value]:
    """(lowest, highest) position inside the input along one dim, in f64: element centres
    0 and n-1 when corners are aligned, else the edges -0.5 and n-0.5."""
    if align_corners:
        return _f64(0.0), arith.subf(length, _f64(1.0))
    return _f64(-0.5), arith.subf(length, _f64(0.5))


def _reflect(x: ir.Value, low: ir.Value, high: ir.Value) -> ir.Value:
    """``x`` (f64) reflected by the near border until it lies in [low, high], as ONNX's
    reference does; an empty range (one element, aligned corners) gives ``low``."""
    span = arith.subf(high, low)
    below = arith.cmpf(arith.CmpFPredicate.OLT, x, low)
    above = arith.cmpf(arith.CmpFPredicate.OGT, x, high)
    distance = arith.select(below, arith.subf(low, x), arith.subf(x, high))
    has_span = arith.cmpf(arith.CmpFPredicate.OGT, span, _f64(0.0))
    turns = mmath.trunc(arith.divf(distance, arith.select(has_span, span, _f64(1.0))))
    rest = arith.subf(distance, arith.mulf(turns, span))
    i64 = ir.IntegerType.get_signless(64)
    # Into [0, 2^62] before the integer cast (maxnumf: a NaN becomes 0), which would
    # otherwise be poison for a NaN or absurd coordinate.
    bounded = arith.minnumf(arith.maxnumf(turns, _f64(0.0)), _f64(2.0**62))
    parity = arith.andi(arith.fptosi(i64, bounded), core.scalar_constant(1, i64))
    even = arith.cmpi(arith.CmpIPredicate.eq, parity, core.scalar_constant(0, i64))
    from_low, from_high = arith.addf(low, rest), arith.subf(high, rest)
    reflected = arith.select(below, arith.select(even, from_low, from_high),
                             arith.select(even, from_high, from_low))
    reflected = arith.select(has_span, reflected, low)
    return arith.select(arith.ori(below, above), reflected, x)


def _cubic_weights(t: ir.Value) -> list[ir.Value]:
    """Keys' weights of the neighbours at -1, 0, 1, 2 for a fraction ``t`` in [0, 1)."""
    a = _f64(_CUBIC_A)

    def far(d: ir.Value) -> ir.Value:  # 1 <= d < 2: ((a d - 5a) d + 8a) d - 4a
        inner = arith.subf(arith.mulf(a, d), arith.mulf(_f64(5.0), a))
        return arith.subf(arith.mulf(arith.addf(arith.mulf(inner, d), arith.mulf(_f64(8.0), a)), d),
                          arith.mulf(_f64(4.0), a))

    def near(d: ir.Value) -> ir.Value:  # d < 1: ((a + 2) d - (a + 3)) d d + 1
        inner = arith.subf(arith.mulf(arith.addf(a, _f64(2.0)), d), arith.addf(a, _f64(3.0)))
        return arith.addf(arith.mulf(arith.mulf(inner, d), d), _f64(1.0))

    one_minus = arith.subf(_f64(1.0), t)
    return [far(arith.addf(t, _f64(1.0))), near(t), near(one_minus), far(arith.addf(one_minus, _f64(1.0)))]


@dataclass
class _Tap:
    index: ir.Value       # clamped into the input
    inside: ir.Value | None  # i1, zeros padding: the unclamped position was inside
    weight: ir.Value | None  # f64; None for nearest


def _neighbour(position: ir.Value, extent: int | ir.Value, low: ir.Value, high: ir.Value,
               padding_mode: str) -> tuple[ir.Value, ir.Value | None]:
    """(index clamped into [0, extent), inside-flag for zeros padding) of the integral f64
    ``position`` along one dim."""
    i64 = ir.IntegerType.get_signless(64)
    if padding_mode == "reflection":
        position = mmath.trunc(_reflect(position, low, high))
    last = arith.subf(to_float(extent, ir.F64Type.get()), _f64(1.0))
    # maxnumf / minnumf: a NaN position reads element 0 rather than a poison index.
    clamped = arith.minnumf(arith.maxnumf(position, _f64(0.0)), last)
    index = arith.index_cast(ir.IndexType.get(), arith.fptosi(i64, clamped))
    if padding_mode != "zeros":
        return index, None
    inside = arith.andi(arith.cmpf(arith.CmpFPredicate.OGE, position, _f64(0.0)),
                        arith.cmpf(arith.CmpFPredicate.OLE, position, last))
    return index, inside


def _axis_taps(coordinate: ir.Value, extent: int | ir.Value, method: GridSampleMethod) -> list[_Tap]:
    """The neighbours one normalized grid coordinate reads along one spatial dim."""
    grid_type = coordinate.type
    one, two = core.scalar_constant(1.0, grid_type), core.scalar_constant(2.0, grid_type)
    length = to_float(extent, grid_type)
    shifted = arith.addf(coordinate, one)
    if method.align_corners:  # (g + 1) / 2 * (n - 1)
        x = arith.mulf(arith.divf(shifted, two), arith.subf(length, one))
    else:  # ((g + 1) * n - 1) / 2
        x = arith.divf(arith.subf(arith.mulf(shifted, length), one), two)
    if method.mode == "nearest":
        x = mmath.roundeven(x)
    x = core.convert_scalar(x, ir.F64Type.get())
    low, high = _borders(to_float(extent, ir.F64Type.get()), method.align_corners)
    outside = arith.ori(arith.cmpf(arith.CmpFPredicate.OLT, x, low), arith.cmpf(arith.CmpFPredicate.OGT, x, high))
    if method.padding_mode == "border":
        last = arith.subf(to_float(extent, ir.F64Type.get()), _f64(1.0))
        x = arith.select(outside, arith.minimumf(arith.maximumf(x, _f64(0.0)), last), x)
    elif method.padding_mode == "reflection":
        x = _reflect(x, low, high)
    if method.mode == "nearest":
        index, inside = _neighbour(x, extent, low, high, method.padding_mode)
        return [_Tap(index, inside, None)]
    base = mmath.floor(x)
    t = arith.subf(x, base)
    if method.mode == "linear":
        weights, first = [arith.subf(_f64(1.0), t), t], 0
    else:
        weights, first = _cubic_weights(t), -1
    taps = []
    for k, weight in enumerate(weights):
        position = arith.addf(base, _f64(float(first + k)))
        index, inside = _neighbour(position, extent, low, high, method.padding_mode)
        taps.append(_Tap(index, inside, weight))
    return taps


def grid_sample(x: ir.Value, grid: ir.Value, method: GridSampleMethod) -> ir.Value:
    """``x`` ``[N, C, D1..Dr]`` sampled at ``grid`` ``[N, O1..Or, r]`` (the last dim holds
    the coordinates of the spatial dims in reverse order: x for the last, y, then z) into
    ``[N, C, O1..Or]``, of ``x``'s float element type."""
    dims, grid_dims = core.sizes(x), core.sizes(grid)
    rank = len(dims) - 2
    element = core.tensor_type(x).element_type
    if rank < 1 or len(grid_dims) != rank + 2:
        raise OperandError(f"GridSample needs X of rank >= 3 and a grid of the same rank; got ranks "
                         f"{len(dims)} and {len(grid_dims)}")
    if not core.is_float(element) or not core.is_float(core.tensor_type(grid).element_type):
        raise OperandError(f"GridSample samples float tensors with a float grid; got {element} and "
                         f"{core.tensor_type(grid).element_type}")
    check_extent(grid_dims[0], dims[0], "GridSample: the grid has {value} images, X has {bound}")
    check_extent(grid_dims[-1], rank, "GridSample: the grid's last dim holds {value} coordinates, "
                 "X has {bound} spatial dims")
    for extent in dims[2:]:  # a clamped index into an empty dim would still be outside
        check_extent(1, extent, "GridSample: X has an empty spatial dim ({bound} elements)", at_most=True)
    f64 = ir.F64Type.get()

    def body(positions: list[ir.Value], _: list[ir.Value]) -> ir.Value:
        image, channel, out = positions[0], positions[1], positions[2:]
        per_dim = []
        for d in range(rank):
            coordinate = tensor.extract(grid, [image, *out, core.index(rank - 1 - d)])
            per_dim.append(_axis_taps(coordinate, dims[2 + d], method))
        total = None
        for taps in product(*per_dim):
            sample = tensor.extract(x, [image, channel, *(t.index for t in taps)])
            if method.mode == "nearest":
                value = sample
                zero = core.scalar_constant(0.0, element)
            else:
                value = core.convert_scalar(sample, f64)
                zero = _f64(0.0)
                for t in taps:
                    value = arith.mulf(t.weight, value) if value is not None else t.weight
            for t in taps:
                if t.inside is not None:
                    value = arith.select(t.inside, value, zero)
            total = value if total is None else arith.addf(total, value)
        return core.convert_scalar(total, element)

    return indexed_generic([dims[0], dims[1], *grid_dims[1:-1]], element, body)


def _base_coordinate(position: ir.Value, extent: int | ir.Value, align_corners: bool) -> ir.Value:
    """The normalized coordinate (f64) of element ``position`` of ``extent``, as ONNX's
    reference lays out its base grid: ``-1 + k * 2 / (n - 1)`` with aligned corners (-1 for
    a single element), else the element centres ``-1 + step / 2 + k * step``, step 2 / n."""
    f64 = ir.F64Type.get()
    n = to_float(extent, f64)
    k = to_float(position, f64)
    if align_corners:
        step = arith.divf(_f64(2.0), arith.subf(n, _f64(1.0)))
        several = arith.cmpf(arith.CmpFPredicate.OGT, n, _f64(1.0))
        return arith.select(several, arith.addf(_f64(-1.0), arith.mulf(k, step)), _f64(-1.0))
    step = arith.divf(_f64(2.0), n)
    start = arith.addf(_f64(-1.0), arith.divf(step, _f64(2.0)))
    return arith.addf(start, arith.mulf(k, step))


def affine_grid(theta: ir.Value, spatial: list[int | ir.Value], align_corners: bool) -> ir.Value:
    """ONNX AffineGrid: the sampling grid ``[N, *spatial, r]`` that ``theta`` ``[N, r, r + 1]``
    maps the base grid to, the input GridSample takes (r = 2 or 3 spatial dims). Each
    element is ``sum_j theta[n, i, j] * (x, y[, z], 1)[j]``, with x the coordinate along
    the last spatial dim, formed in f64 and converted once."""
    rank = len(spatial)
    dims = core.sizes(theta)
    element = core.tensor_type(theta).element_type
    if rank not in (2, 3) or len(dims) != 3 or not core.is_float(element):
        raise OperandError(f"AffineGrid needs a float theta [N, r, r + 1] and 2 or 3 spatial sizes; got a rank-"
                         f"{len(dims)} {element} theta and {rank} sizes")
    check_extent(dims[1], rank, "AffineGrid: theta has {value} rows for {bound} spatial dims")
    check_extent(dims[2], rank + 1, "AffineGrid: theta has {value} columns, {bound} needed")
    f64 = ir.F64Type.get()

    def body(positions: list[ir.Value], _: list[ir.Value]) -> ir.Value:
        image, row, at = positions[0], positions[-1], positions[1:-1]
        base = [_base_coordinate(at[rank - 1 - j], spatial[rank - 1 - j], align_corners) for j in range(rank)]
        total = core.convert_scalar(tensor.extract(theta, [image, row, core.index(rank)]), f64)
        for j, coordinate in enumerate(base):
            weight = core.convert_scalar(tensor.extract(theta, [image, row, core.index(j)]), f64)
            total = arith.addf(total, arith.mulf(weight, coordinate))
        return core.convert_scalar(total, element)

    return indexed_generic([dims[0], *spatial, rank], element, body)


def bilinear_sample(x: ir.Value, leading: list[ir.Value], position: list[ir.Value]) -> ir.Value:
    """``x[*leading, position]`` interpolated (linear in each dim) at the f64 pixel
    coordinates ``position`` of its trailing dims, neighbours outside ``x`` reading zero:
    GridSample's linear mode with zeros padding, in pixels (DeformConv's sampling). f64."""
    dims = core.sizes(x)[len(leading):]
    f64 = ir.F64Type.get()
    per_dim = []
    for coordinate, extent in zip(position, dims):
        base = mmath.floor(coordinate)
        t = arith.subf(coordinate, base)
        taps = []
        for k, weight in enumerate((arith.subf(_f64(1.0), t), t)):
            index, inside = _neighbour(arith.addf(base, _f64(float(k))), extent, _f64(0.0), _f64(0.0), "zeros")
            taps.append(_Tap(index, inside, weight))
        per_dim.append(taps)
    total = None
    for taps in product(*per_dim):
        value = core.convert_scalar(tensor.extract(x, [*leading, *(t.index for t in taps)]), f64)
        for t in taps:
            value = arith.select(t.inside, arith.mulf(t.weight, value), _f64(0.0))
        total = value if total is None else arith.addf(total, value)
    return total
