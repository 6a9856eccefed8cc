"""RoiAlign: each region of interest pooled to a fixed grid of bins, each bin the average
(or max) of bilinear samples on a regular grid inside it (ONNX RoiAlign 10/16, as in
Mask R-CNN and torchvision's ``roi_align``).

One ``linalg.generic`` over ``[regions, C, out_h, out_w]``. Its body computes the region's
bins from ``rois`` and loops (``scf.for``) over the bin's samples: their number is a
constant (``sampling_ratio``) or, adaptive, ``ceil(bin size)`` per dim, known only at run
time. The arithmetic follows ONNX's reference: a sample outside ``[-1, extent]`` contributes
zero; inside, its position is clamped into the input and weighs its four neighbours.

Bounded work for any ``rois``: the sample loops run only over the samples whose position
can lie within ``[-1, extent]`` (a range computed from the sample spacing, widened by one
on each side and tested sample by sample as the reference does), so a region of 1e30
pixels costs what the image's extent allows, not 1e30 iterations; the skipped samples add
zero to the average (whose divisor still counts them) and a 0 candidate to the max. Every
read is clamped into the input; batch indices outside it are a run-time error.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, scf, tensor
from mlir.dialects import math as mmath

from . import core
from .checks import check_extent, check_value_range
from .extent_math import as_index, sub
from .extent_math import to_float
from .movement import indexed_generic
from ..errors import OperandError

ROI_ALIGN_MODES = ("avg", "max")
# Samples per bin and dim beyond which the count is clamped before its integer conversion
# (a float past the integer range converts to poison).
_MAX_GRID = float(1 << 30)


@dataclass(frozen=True)
class RoiAlignMethod:
    """``half_pixel``: region corners shift by -0.5 (ONNX 16's default); else the legacy
    ``output_half_pixel`` (regions at least 1x1). ``sampling_ratio`` 0: adaptive."""

    output_height: int = 1
    output_width: int = 1
    sampling_ratio: int = 0
    spatial_scale: float = 1.0
    mode: str = "avg"
    half_pixel: bool = True

    def __post_init__(self) -> None:
        if self.mode not in ROI_ALIGN_MODES:
            raise OperandError(f"unsupported RoiAlign mode {self.mode!r}; expected one of {ROI_ALIGN_MODES}")
        if self.output_height < 1 or self.output_width < 1 or self.sampling_ratio < 0:
            raise OperandError(f"RoiAlign needs output sizes >= 1 and a sampling ratio >= 0; got "
                             f"{self.output_height}x{self.output_width}, {self.sampling_ratio}")


def _to_index(value: ir.Value) -> ir.Value:
    """A float already clamped into the integer range, truncated to an ``index``."""
    return arith.index_cast(ir.IndexType.get(), arith.fptosi(ir.IntegerType.get_signless(64), value))


@dataclass
class _Axis:
    """One dim of a region: its bins and their sample grid."""

    start: ir.Value      # the region's first coordinate
    bin_size: ir.Value
    grid: ir.Value       # samples per bin (index, >= 0)
    grid_float: ir.Value


def _axis(low: ir.Value, high: ir.Value, bins: int, method: RoiAlignMethod, f: ir.Type) -> _Axis:
    c = lambda v: core.scalar_constant(v, f)  # noqa: E731
    offset = c(0.5 if method.half_pixel else 0.0)
    scale = c(method.spatial_scale)
    start = arith.subf(arith.mulf(low, scale), offset)
    size = arith.subf(arith.subf(arith.mulf(high, scale), offset), start)
    if not method.half_pixel:
        size = arith.maximumf(size, c(1.0))
    bin_size = arith.divf(size, c(float(bins)))
    if method.sampling_ratio > 0:
        grid_float = c(float(method.sampling_ratio))
    else:  # ceil(size / bins), NaN and negatives as 0 samples, absurd sizes clamped
        grid_float = arith.minnumf(arith.maxnumf(mmath.ceil(arith.divf(size, c(float(bins)))), c(0.0)), c(_MAX_GRID))
    return _Axis(start, bin_size, _to_index(grid_float), grid_float)


def _sample_range(axis: _Axis, bin_index: ir.Value, extent: ir.Value, f: ir.Type) -> tuple[ir.Value, ir.Value]:
    """[first, last) of the sample indices of bin ``bin_index`` whose coordinate may lie in
    [-1, extent]: the exact range widened by one sample each side, within [0, grid)."""
    c = lambda v: core.scalar_constant(v, f)  # noqa: E731
    origin = arith.addf(axis.start, arith.mulf(to_float(bin_index, f), axis.bin_size))
    spacing = arith.divf(axis.bin_size, arith.maxnumf(axis.grid_float, c(1.0)))
    # sample i sits at origin + (i + 0.5) * spacing; solve for -1 and extent.
    low = arith.subf(arith.divf(arith.subf(c(-1.0), origin), spacing), c(1.5))
    high = arith.addf(arith.divf(arith.subf(extent, origin), spacing), c(0.5))
    first, last = arith.minimumf(low, high), arith.maximumf(low, high)  # a negative spacing swaps them
    clamp = lambda v: arith.minnumf(arith.maxnumf(v, c(0.0)), axis.grid_float)  # noqa: E731  NaN -> 0
    return _to_index(mmath.floor(clamp(first))), _to_index(mmath.ceil(clamp(arith.addf(last, c(1.0)))))


def roi_align(x: ir.Value, rois: ir.Value, batch_indices: ir.Value, method: RoiAlignMethod) -> ir.Value:
    """``x`` ``[N, C, H, W]`` pooled over ``rois`` ``[R, 4]`` (x1, y1, x2, y2 in input
    coordinates before ``spatial_scale``) of images ``batch_indices`` ``[R]`` into
    ``[R, C, output_height, output_width]``."""
    dims = core.sizes(x)
    element = core.tensor_type(x).element_type
    if len(dims) != 4 or not core.is_float(element):
        raise OperandError(f"RoiAlign pools a float [N, C, H, W] input; got rank {len(dims)}, {element}")
    regions = core.sizes(rois)[0]
    check_extent(core.sizes(rois)[1], 4, "RoiAlign: rois has {value} columns, not {bound}")
    check_extent(core.sizes(batch_indices)[0], regions, "RoiAlign: {value} batch indices for {bound} rois")
    check_value_range(batch_indices, 0, sub(dims[0], 1), "RoiAlign: batch index {value} outside [0, {bound}]")
    f = ir.F64Type.get() if isinstance(element, ir.F64Type) else ir.F32Type.get()
    c = lambda v: core.scalar_constant(v, f)  # noqa: E731
    i64 = ir.IntegerType.get_signless(64)
    height, width = to_float(dims[2], f), to_float(dims[3], f)
    last_row, last_column = arith.subf(height, c(1.0)), arith.subf(width, c(1.0))

    def corner(region: ir.Value, k: int) -> ir.Value:
        return core.convert_scalar(tensor.extract(rois, [region, core.index(k)]), f)

    def sample(image: ir.Value, channel: ir.Value, y: ir.Value, x_: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(weighted sum of the four neighbours, their largest weighted value) at (y, x)
        inside [-1, extent]."""
        terms = []
        positions = []
        for coordinate, last in ((y, last_row), (x_, last_column)):
            coordinate = arith.maxnumf(coordinate, c(0.0))
            low = mmath.floor(coordinate)
            at_end = arith.cmpf(arith.CmpFPredicate.OGE, low, last)
            low = arith.select(at_end, last, low)
            coordinate = arith.select(at_end, last, coordinate)
            high = arith.select(at_end, last, arith.addf(low, c(1.0)))
            fraction = arith.subf(coordinate, low)
            positions.append((_to_index(low), _to_index(high), fraction))
        (y_low, y_high, ly), (x_low, x_high, lx) = positions
        hy, hx = arith.subf(c(1.0), ly), arith.subf(c(1.0), lx)
        for row, column, weight in ((y_low, x_low, arith.mulf(hy, hx)), (y_low, x_high, arith.mulf(hy, lx)),
                                    (y_high, x_low, arith.mulf(ly, hx)), (y_high, x_high, arith.mulf(ly, lx))):
            value = core.convert_scalar(tensor.extract(x, [image, channel, row, column]), f)
            terms.append(arith.mulf(weight, value))
        total = arith.addf(arith.addf(arith.addf(terms[0], terms[1]), terms[2]), terms[3])
        largest = arith.maximumf(arith.maximumf(arith.maximumf(terms[0], terms[1]), terms[2]), terms[3])
        return total, largest

    def body(positions: list[ir.Value], _: list[ir.Value]) -> ir.Value:
        region, channel, bin_y, bin_x = positions
        image = arith.index_cast(ir.IndexType.get(), tensor.extract(batch_indices, [region]))
        image = arith.minsi(arith.maxsi(image, core.index(0)), as_index(sub(dims[0], 1)))
        along_y = _axis(corner(region, 1), corner(region, 3), method.output_height, method, f)
        along_x = _axis(corner(region, 0), corner(region, 2), method.output_width, method, f)
        y_first, y_last = _sample_range(along_y, bin_y, height, f)
        x_first, x_last = _sample_range(along_x, bin_x, width, f)
        one = core.index(1)
        start = [c(0.0), c(float("-inf")), core.scalar_constant(0, i64)]  # sum, max, samples taken
        rows = scf.ForOp(y_first, arith.maxsi(y_first, y_last), one, start)
        with ir.InsertionPoint(rows.body):
            iy = rows.induction_variable
            y = arith.addf(arith.addf(along_y.start, arith.mulf(to_float(bin_y, f), along_y.bin_size)),
                           arith.divf(arith.mulf(arith.addf(to_float(iy, f), c(0.5)), along_y.bin_size),
                                      along_y.grid_float))
            columns = scf.ForOp(x_first, arith.maxsi(x_first, x_last), one, list(rows.inner_iter_args))
            with ir.InsertionPoint(columns.body):
                ix = columns.induction_variable
                x_ = arith.addf(arith.addf(along_x.start, arith.mulf(to_float(bin_x, f), along_x.bin_size)),
                                arith.divf(arith.mulf(arith.addf(to_float(ix, f), c(0.5)), along_x.bin_size),
                                           along_x.grid_float))
                total, largest, taken = columns.inner_iter_args
                inside = arith.andi(
                    arith.andi(arith.cmpf(arith.CmpFPredicate.OGE, y, c(-1.0)), arith.cmpf(arith.CmpFPredicate.OLE, y, height)),
                    arith.andi(arith.cmpf(arith.CmpFPredicate.OGE, x_, c(-1.0)), arith.cmpf(arith.CmpFPredicate.OLE, x_, width)))
                branch = scf.IfOp(inside, [f, f, i64], has_else=True)
                with ir.InsertionPoint(branch.then_block):
                    value, peak = sample(image, channel, y, x_)
                    scf.YieldOp([arith.addf(total, value), arith.maximumf(largest, peak),
                                 arith.addi(taken, core.scalar_constant(1, i64))])
                with ir.InsertionPoint(branch.else_block):
                    scf.YieldOp([total, largest, taken])
                scf.YieldOp(list(branch.results))
            scf.YieldOp(list(columns.results))
        total, largest, taken = rows.results
        grid_y = arith.index_cast(i64, along_y.grid)
        grid_x = arith.index_cast(i64, along_x.grid)
        count = arith.muli(grid_y, grid_x)
        if method.mode == "avg":
            divisor = arith.sitofp(f, arith.maxsi(count, core.scalar_constant(1, i64)))
            result = arith.divf(total, divisor)
        else:  # samples outside (not taken) are 0 candidates; no sample at all gives 0
            skipped = arith.cmpi(arith.CmpIPredicate.slt, taken, count)
            result = arith.select(skipped, arith.maximumf(largest, c(0.0)), largest)
            none = arith.cmpi(arith.CmpIPredicate.eq, taken, core.scalar_constant(0, i64))
            result = arith.select(none, c(0.0), result)
        return core.convert_scalar(result, element)

    return indexed_generic([regions, dims[1], method.output_height, method.output_width], element, body)
