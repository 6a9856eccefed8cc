"""Dilated convolutions without the padding's zeros: ``tilecraft-split-padded-taps``.

A "same" dilated convolution pads its input by ``dilation * (k // 2)`` on each side. On the
small maps where dilation is used (DeepLab's ASPP head: rates 6, 12 and 18 on a 32 x 32 map
at output stride 8), much of that padding is read: a 3x3 tap at dilation 18 reads zeros for
18 of the 32 output rows, and over the whole map 61 % of the convolution's multiply-adds
multiply zeros (23 % at rate 6, 44 % at rate 12). linalg's convolution computes them all;
onnxruntime's NCHWc kernels skip them. The profile of ``benchmarks/public_suite.py``'s
``deeplab_aspp`` showed its dilated convolutions running at the same GFLOPS as the
undilated ones (docs/performance.md, "Dilated convolutions"): the cost is the zeros, not
how the taps are indexed.

Which taps of a window read the input and which read padding depends only on the output
position, separably per spatial dim: output row ``o`` reads input row ``o * s + t * d -
low`` through tap ``t``, inside the input for a contiguous range of taps. The output rows
fall into runs with the same range (``tap_regions``; three for a 3x3 "same" window: the top
rows without the first row of taps, the middle with all, the bottom without the last). The
pass splits the convolution into one per run of output rows, each reading the rows of the
input its taps reach and the filter's rows of those taps: the same sum without the terms
that are zero. Each part keeps the whole output row, so it has the unsplit convolution's
register tiles and runs at its rate; its input is padded in its columns only.

Where at least :data:`MIN_COLUMN_SAVED_FRACTION` of the column taps read padding too (rate
18 on 32 columns: 37 %), the columns are split the same way (rows x columns parts, no
padding at all). Below that, narrow column runs cost more than they save: at rate 4 on 32 x
32 (4-column runs) the split convolution ran 1.36x slower than the whole one. A column run
whose width has no 4-8 pixel register tile is cut in two that have (``tile_friendly_runs``).

Each part writes its slice of the original accumulator (``tensor.extract_slice`` /
``tensor.insert_slice`` on one destination, so bufferization computes every part in place;
a zero accumulator is filled per part, so the fill joins the part's register tiles); an
output run that no tap reaches keeps the accumulator's value, as the convolution would. A
part's filter (its taps) is a constant of its own, so that its kernel reads it block-major
like an unsplit convolution's (``_FilterParts``).

Which convolutions: NHWC ``linalg.conv_2d_nhwc_hwcf`` and ``linalg.depthwise_conv_2d_nhwc_hwc``
(what ``tilecraft-convert-layout`` makes of ONNX and PyTorch convolutions) with static shapes,
a dilation above 1, an input zero-padded by ``tensor.pad`` in its spatial dims only, where
at least :data:`MIN_SAVED_FRACTION` of the multiply-adds read padding and the split makes at
most :data:`MAX_PARTS` convolutions. Undilated convolutions are left alone (their kernels'
IR is unchanged): one row of padding per side is a few percent of their work. Runs after
``tilecraft-fold-constants``: batch norms fold into the whole convolution first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
from mlir import ir
from mlir.dialects import linalg, tensor

from ...ir import core, movement
from ...ir.conv import narrow_pixel_tiles
from ...ir.resources import literal_array
from ..ir_queries import defined_functions, defining_op, int_list_attribute, is_zero_fill, ops_where
from ..passes import register_pass

PASS = "tilecraft-split-padded-taps"

# The fewest multiply-adds (a fraction of the convolution's) that must read padding for the
# split to pay: each part is one more kernel, its epilogue (bias, ReLU) no longer fuses into
# the convolution's register tiles, and a part of a few rows has little work. Dilation 4 on
# 32 x 32 (8 % by rows) ran 0.90x; dilation 2 (4 %) was level and stays whole
# (docs/performance.md, "Dilated convolutions").
MIN_SAVED_FRACTION = 0.05
# The columns are split too only where at least this fraction of their output x tap pairs
# read padding: a column run is a narrower row of register tiles, and runs of 4-6 columns
# (dilation 4 or 6 on 32 x 32) made the whole convolution slower than unsplit, while runs of
# whole rows compute at the unsplit one's rate (docs/performance.md, "Dilated convolutions").
MIN_COLUMN_SAVED_FRACTION = 0.3
# The most convolutions one may become: 3 x 3 for a 3x3 "same" window, 3 x 4 where the
# frontend widened the output row to a width that tiles well (ir/conv.py).
MAX_PARTS = 16

_BUILDERS: dict[str, Callable[..., ir.Value]] = {
    "linalg.conv_2d_nhwc_hwcf": linalg.conv_2d_nhwc_hwcf,
    "linalg.depthwise_conv_2d_nhwc_hwc": linalg.depthwise_conv_2d_nhwc_hwc,
}

# (first output, end output, first tap, last tap) of a run of outputs reading the same taps;
# first tap > last tap: no tap reaches the input.
Region = tuple[int, int, int, int]


def tap_regions(outputs: int, extent: int, low: int, kernel: int, stride: int, dilation: int) -> list[Region]:
    """Runs of consecutive outputs of one spatial dim whose window reads the input (not the
    padding) through the same taps: output ``o`` reads input ``o * stride + t * dilation -
    low`` through tap ``t``, inside ``[0, extent)`` for a contiguous range of taps."""
    regions: list[Region] = []
    for o in range(outputs):
        start = o * stride - low
        first = max(0, -(start // dilation) if start < 0 else 0)
        last = min(kernel - 1, (extent - 1 - start) // dilation)
        if regions and regions[-1][2:] == (first, last):
            regions[-1] = (regions[-1][0], o + 1, first, last)
        else:
            regions.append((o, o + 1, first, last))
    return regions


def tile_friendly_runs(regions: list[Region]) -> list[Region]:
    """``regions`` of the output row with each run whose width has no 4-8 pixel register
    tile (``narrow_pixel_tiles``: 29 columns between two 2-column borders at dilation 2)
    cut in two runs that have one (25 + 4). The schedule's register tile must divide the
    row: with the 29-column run on 1-pixel tiles, dilation 2 on 33 x 33 ran 1.9x slower
    split than whole."""
    runs: list[Region] = []
    for begin, end, first, last in regions:
        width = end - begin
        cut = next((a for a in range(width - 4, 3, -1)
                    if not narrow_pixel_tiles(a) and not narrow_pixel_tiles(width - a)), None) \
            if narrow_pixel_tiles(width) else None
        if cut is None:
            runs.append((begin, end, first, last))
        else:
            runs += [(begin, begin + cut, first, last), (begin + cut, end, first, last)]
    return runs


def reads_of_input(regions: list[Region]) -> int:
    """Output x tap pairs of one dim that read the input."""
    return sum((end - begin) * max(0, last - first + 1) for begin, end, first, last in regions)


def _padded_input(op: ir.Operation) -> tuple[ir.Value, list[int], list[int]] | None:
    """The unpadded input and the low and high padding of its two spatial dims, when the
    convolution's input is a static zero ``tensor.pad`` in the spatial dims only."""
    pad = defining_op(op.operands[0])
    if pad is None or pad.name != "tensor.pad":
        return None
    low = list(pad.attributes["static_low"])
    high = list(pad.attributes["static_high"])
    if (len(low) != 4 or min(low + high) < 0 or low[0] or low[3] or high[0] or high[3]
            or len(pad.operands) != 1):
        return None
    block = pad.regions[0].blocks[0]
    yielded = defining_op(list(block.operations)[-1].operands[0])
    if yielded is None or yielded.name != "arith.constant":
        return None
    value = yielded.attributes["value"]
    if not (isinstance(value, ir.FloatAttr) and ir.FloatAttr(value).value == 0.0
            or isinstance(value, ir.IntegerAttr) and ir.IntegerAttr(value).value == 0):
        return None
    return pad.operands[0], low[1:3], high[1:3]


@dataclass(frozen=True)
class SplitPlan:
    """How ``split_convolution`` splits one convolution: the unpadded input, the low padding
    of its spatial dims, the runs of output rows and of output columns (``tap_regions``);
    ``columns`` is ``None`` where the columns stay whole, read from the input padded in its
    columns only."""

    source: ir.Value
    low: tuple[int, int]
    high_columns: int
    rows: list[Region]
    columns: list[Region] | None


def _saved(regions: list[Region], outputs: int, kernel: int) -> float:
    """The fraction of one dim's output x tap pairs that read padding."""
    return 1 - reads_of_input(regions) / (outputs * kernel)


def split_plan(op: ir.Operation) -> SplitPlan | None:
    """How the pass splits ``op`` (module docstring); ``None`` where it leaves it alone."""
    if op.name not in _BUILDERS or len(op.operands) != 3 or len(op.results) != 1:
        return None
    if not all(isinstance(v.type, ir.RankedTensorType) and ir.RankedTensorType(v.type).has_static_shape
               for v in op.operands):
        return None
    dilations = int_list_attribute(op, "dilations", [1, 1])
    strides = int_list_attribute(op, "strides", [1, 1])
    if max(dilations) == 1:
        return None
    padded = _padded_input(op)
    if padded is None:
        return None
    source, low, high = padded
    extents = ir.RankedTensorType(source.type).shape[1:3]
    kernel = ir.RankedTensorType(op.operands[1].type).shape[:2]
    outputs = ir.RankedTensorType(op.operands[2].type).shape[1:3]
    if 0 in outputs or 0 in kernel:
        return None
    rows, columns = (tap_regions(outputs[i], extents[i], low[i], kernel[i], strides[i], dilations[i])
                     for i in range(2))
    row_saving, column_saving = _saved(rows, outputs[0], kernel[0]), _saved(columns, outputs[1], kernel[1])
    columns = tile_friendly_runs(columns)
    if column_saving < MIN_COLUMN_SAVED_FRACTION or len(rows) * len(columns) > MAX_PARTS:
        columns, column_saving = None, 0.0  # whole rows
    saved = 1 - (1 - row_saving) * (1 - column_saving)
    if saved < MIN_SAVED_FRACTION or len(rows) > MAX_PARTS:
        return None
    return SplitPlan(source, (low[0], low[1]), high[1], rows, columns)


def split_convolution(op: ir.Operation, plan: SplitPlan) -> None:
    """Replace ``op`` by one convolution per pair of output runs (module docstring)."""
    _x, w, init = op.operands
    dilations = int_list_attribute(op, "dilations", [1, 1])
    strides = int_list_attribute(op, "strides", [1, 1])
    kernel_h, kernel_w, *filter_rest = ir.RankedTensorType(w.type).shape
    out_shape = ir.RankedTensorType(init.type).shape
    element = ir.RankedTensorType(init.type).element_type
    builder = _BUILDERS[op.name]
    with ir.InsertionPoint(op), op.location:
        source, low, columns = plan.source, list(plan.low), plan.columns
        if columns is None:
            # Whole rows of output: the input padded in its columns only (the rows are split
            # so that no part reads a padded row).
            source = core.pad_constant(source, [0, 0, low[1], 0], [0, 0, plan.high_columns, 0], 0)
            low[1] = 0
            columns = [(0, out_shape[2], 0, kernel_w - 1)]
        batch, _h, _w, channels = ir.RankedTensorType(source.type).shape
        filters = _FilterParts(w)
        # A zero accumulator is filled per part, inside the part's register tiles; any other
        # is carried through (a part that no tap reaches keeps it).
        zero = is_zero_fill(init)
        result = tensor.empty(out_shape, element) if zero else init
        for rows in plan.rows:
            for cols in columns:
                offsets = [0, rows[0], cols[0], 0]
                sizes = [out_shape[0], rows[1] - rows[0], cols[1] - cols[0], out_shape[3]]
                part = movement.extract_slice(result, offsets, sizes)
                if zero:
                    part = linalg.fill(defining_op(init).operands[0], outs=[part])
                if rows[2] <= rows[3] and cols[2] <= cols[3]:
                    taps = [rows[3] - rows[2] + 1, cols[3] - cols[2] + 1]
                    runs = (rows, cols)
                    first_input = [r[0] * s + r[2] * d - lo for r, s, d, lo in zip(runs, strides, dilations, low)]
                    reach = [(r[1] - r[0] - 1) * s + (t - 1) * d + 1
                             for r, s, d, t in zip(runs, strides, dilations, taps)]
                    x_part = movement.extract_slice(source, [0, *first_input, 0], [batch, *reach, channels])
                    w_part = filters.part(rows[2], cols[2], taps)
                    part = builder(x_part, w_part, outs=[part], strides=strides, dilations=dilations)
                elif not zero:
                    continue  # no tap reaches the input: the accumulator as it is
                result = tensor.insert_slice(part, result, [], [], [], offsets, sizes, [1, 1, 1, 1])
    # The padded copy, the whole zero fill, and the filter when every part has its own.
    dead = [defining_op(op.operands[0]), defining_op(init), defining_op(w)]
    op.results[0].replace_all_uses_with(result)
    op.erase()
    for producer in dead:
        _erase_if_unused(producer)


class _FilterParts:
    """The filter of each part: the taps ``[first_row, first_row + taps[0])`` x
    ``[first_col, first_col + taps[1])`` of the convolution's filter ``w``.

    Why a constant of its own and not a view (``tensor.extract_slice``) of the filter: the
    kernels read their constant filters block-major (pipelines/tensor/blocked_constants.py
    rewrites a constant, or a kernel's weight argument, only where every use is a vector
    read, and a slice is neither). With views, every part of a split convolution and the
    whole filter they slice stayed row-major (3x3x256x256: rows 1 KB apart), and on the Zen 5
    the parts of deeplab_aspp's dilated convolutions ran slower than the unsplit convolution
    they replace (docs/performance.md, "Split dilated convolutions with blocked filters").
    The price is the parts' filters beside the whole one in the package (rows split: 2 x 2/3
    of the filter more). A filter that is not a constant (a PyTorch module's parameter
    passed at run time) is still sliced as a view."""

    def __init__(self, w: ir.Value) -> None:
        self.w = w
        self.array = literal_array(w)
        self.parts: dict[tuple[int, int, int, int], ir.Value] = {}

    def part(self, first_row: int, first_col: int, taps: list[int]) -> ir.Value:
        shape = ir.RankedTensorType(self.w.type).shape
        if [first_row, first_col] == [0, 0] and taps == shape[:2]:
            return self.w
        rest = shape[2:]
        if self.array is None:
            return movement.extract_slice(self.w, [first_row, first_col, *[0] * len(rest)], [*taps, *rest])
        key = (first_row, first_col, *taps)
        if key not in self.parts:
            taps_array = self.array[first_row:first_row + taps[0], first_col:first_col + taps[1]]
            self.parts[key] = core.constant(np.ascontiguousarray(taps_array), name="filter_taps")
        return self.parts[key]


def _erase_if_unused(op: ir.Operation | None) -> None:
    """Erase ``op`` when nothing uses its result, then its producers that this leaves unused
    (a fill's ``tensor.empty``)."""
    if (op is None or op.name not in ("tensor.pad", "linalg.fill", "tensor.empty", "arith.constant")
            or list(op.results[0].uses)):
        return
    producers = [defining_op(operand) for operand in op.operands]
    op.erase()
    for producer in producers:
        _erase_if_unused(producer)


@register_pass(
    PASS,
    "Dilated NHWC convolutions on zero-padded inputs split by output runs that read the same "
    "taps: the taps that read only padding are not computed",
)
def split_padded_taps_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for function in defined_functions(module):
        for op in ops_where(function, lambda candidate: candidate.name in _BUILDERS):
            plan = split_plan(op)
            if plan is not None:
                split_convolution(op, plan)
