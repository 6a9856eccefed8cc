"""Shared convolution emitters (used by the ONNX and PyTorch frontends).

Layout is channels-first, as both frameworks store it: input (N, C, *spatial), filter
(F, C / groups, *kernel), result (N, F, *out). Padding is explicit (``padding_low`` /
``padding_high`` per spatial dim); each frontend turns its own conventions (ONNX auto_pad,
PyTorch ``padding="same"``) into those numbers.

The emitters pick the *named* linalg op for the case (``linalg.conv_2d_nchw_fchw``,
``linalg.depthwise_conv_2d_nchw_chw``, their 1-D and 3-D forms) because the default CPU
schedule decomposes and vectorizes named convolutions. A grouped 2-D convolution of static
shape is a loop over its groups of one ``linalg.conv_2d_nhwc_hwcf`` each (the named op the
schedule vectorizes; there is none for groups); of dynamic shape it is
``linalg.conv_2d_ngchw_gfchw`` (scalar loops). A 3-D convolution of static shape, grouped
or not, is a sum over its depth taps of 2-D ones (``_conv_3d_as_2d``); of dynamic shape,
grouped, it has no named op and is a ``linalg.generic``.
The input is padded once with ``tensor.pad`` and the accumulator is a ``linalg.fill``
(which the schedule fuses into each task); bias and rounding are one elementwise op.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, scf, tensor

from . import core, extent_math
from .checks import check_extent
from .contraction import accumulator_type, collapse, expand, generic_op, integer_matmul, round_to
from .movement import slice_axis
from ..errors import OperandError

Extent = "int | ir.Value"

# Named ops by number of spatial dims.
_CONV: dict[int, Callable[..., ir.Value]] = {
    1: linalg.conv_1d_ncw_fcw, 2: linalg.conv_2d_nchw_fchw, 3: linalg.conv_3d_ncdhw_fcdhw,
}
_DEPTHWISE: dict[int, Callable[..., ir.Value]] = {
    1: linalg.depthwise_conv_1d_ncw_cw, 2: linalg.depthwise_conv_2d_nchw_chw,
    3: linalg.depthwise_conv_3d_ncdhw_cdhw,
}


# --- sliding-window arithmetic (shared with pooling) ----------------------------------------


def _index_add(extent: Extent, offset: int) -> Extent:
    if isinstance(extent, int):
        return extent + offset
    return extent if offset == 0 else arith.addi(extent, core.index(offset))


def _index_mul(extent: Extent, factor: int) -> Extent:
    if isinstance(extent, int):
        return extent * factor
    return extent if factor == 1 else arith.muli(extent, core.index(factor))


def _index_floordiv(extent: Extent, divisor: int) -> Extent:
    if isinstance(extent, int):
        return extent // divisor
    return extent if divisor == 1 else arith.floordivsi(extent, core.index(divisor))


def window_span(kernel: int, dilation: int) -> int:
    """Input elements one (dilated) window spans."""
    return dilation * (kernel - 1) + 1


def window_output_extent(
    extent: Extent, low: int, high: int, kernel: int, stride: int, dilation: int,
    *, ceil_mode: bool = False,
) -> Extent:
    """Number of windows along one dim of an ``extent``-long input padded by low/high.

    ``ceil_mode`` (static extents only) counts a last partial window, but (as ONNX,
    PyTorch and onnxruntime do) never one that would start in the high padding.
    ``ValueError`` when a static input is smaller than one window.
    """
    reach = _index_add(extent, low + high - window_span(kernel, dilation))
    if isinstance(reach, int) and reach < 0:
        raise OperandError(
            f"a window of {kernel} (dilation {dilation}) does not fit in {extent} + {low} + {high}"
        )
    if not ceil_mode:
        return _index_add(_index_floordiv(reach, stride), 1)
    if not isinstance(extent, int):
        raise OperandError("ceil_mode needs static spatial extents")
    count = -(-reach // stride) + 1
    if (count - 1) * stride >= extent + low:
        count -= 1
    return count


def window_exprs(
    out_loops: Sequence[int], window_loops: Sequence[int],
    strides: Sequence[int], dilations: Sequence[int],
) -> list[ir.AffineExpr]:
    """``o * stride + k * dilation`` per spatial dim, over the given loop positions."""
    return [
        ir.AffineExpr.get_add(
            ir.AffineExpr.get_mul(ir.AffineDimExpr.get(o), ir.AffineConstantExpr.get(s)),
            ir.AffineExpr.get_mul(ir.AffineDimExpr.get(k), ir.AffineConstantExpr.get(d)),
        )
        for o, k, s, d in zip(out_loops, window_loops, strides, dilations)
    ]


def check_window_args(name: str, spatial: int, **lists: Sequence[int]) -> None:
    """``ValueError`` unless every list has one entry per spatial dim."""
    for arg, values in lists.items():
        if len(values) != spatial:
            raise OperandError(f"{name}: {arg} has {len(values)} entries for {spatial} spatial dims")


# --- convolution -----------------------------------------------------------------------------


def _with_static_channels(x: ir.Value, channels: int) -> ir.Value:
    """``x`` with its channel extent made static (the filter fixes it), via ``tensor.cast``."""
    shape = core.static_shape(x)
    if shape[1] is not None:
        if shape[1] != channels:
            raise OperandError(f"input has {shape[1]} channels, the filter expects {channels}")
        return x
    dims = [ir.ShapedType.get_dynamic_size() if d is None else d for d in shape]
    dims[1] = channels
    return tensor.cast(ir.RankedTensorType.get(dims, core.tensor_type(x).element_type), x)


def _add_bias(result: ir.Value, bias: ir.Value | None, element: ir.Type) -> ir.Value:
    """``result + bias[f]`` on the channel dim, rounded to ``element``, in one pass."""
    if bias is None:
        return round_to(result, element)
    rank = core.tensor_type(result).rank
    channels = core.sizes(bias)[0]
    column = expand(bias, [list(range(rank - 1))], [channels] + [1] * (rank - 2))
    accumulator = core.tensor_type(result).element_type
    add = arith.addf if core.is_float(accumulator) else arith.addi
    return core.elementwise(
        [result, column], element,
        lambda r, b: core.convert_scalar(add(r, core.convert_scalar(b, accumulator)), element),
        extents=core.sizes(result),
    )


def _multiply_accumulate(accumulator: ir.Type) -> Callable[[ir.Value, ir.Value, ir.Value], ir.Value]:
    """The body of a contraction summing ``a * b`` into ``accumulator``-typed elements."""
    mul = arith.mulf if core.is_float(accumulator) else arith.muli
    add = arith.addf if core.is_float(accumulator) else arith.addi

    def body(a: ir.Value, b: ir.Value, acc: ir.Value) -> ir.Value:
        return add(acc, mul(core.convert_scalar(a, accumulator), core.convert_scalar(b, accumulator)))

    return body


def _grouped_generic(
    x: ir.Value, w: ir.Value, init: ir.Value, strides: Sequence[int], dilations: Sequence[int]
) -> ir.Value:
    """Grouped convolution of x (N, G, Cg, *in) by w (G, Fg, Cg, *k) into (N, G, Fg, *out),
    for the ranks with no named grouped op. Loops: n, g, f, *out | c, *k."""
    spatial = core.tensor_type(x).rank - 3
    loops = 4 + 2 * spatial
    out_loops = list(range(3, 3 + spatial))
    c_loop = 3 + spatial
    k_loops = list(range(c_loop + 1, loops))
    dim = ir.AffineDimExpr.get
    x_map = ir.AffineMap.get(
        loops, 0, [dim(0), dim(1), dim(c_loop), *window_exprs(out_loops, k_loops, strides, dilations)]
    )
    w_map = ir.AffineMap.get(loops, 0, [dim(1), dim(2), dim(c_loop), *[dim(k) for k in k_loops]])
    out_map = ir.AffineMap.get(loops, 0, [dim(0), dim(1), dim(2), *[dim(o) for o in out_loops]])
    accumulator = core.tensor_type(init).element_type
    body = _multiply_accumulate(accumulator)
    return generic_op([x, w], init, [x_map, w_map, out_map], 3 + spatial, 1 + spatial, body)


def _grouped_per_group(x: ir.Value, w: ir.Value, groups: int, strides: Sequence[int],
                       dilations: Sequence[int], accumulator: ir.Type) -> ir.Value:
    """A grouped 2-D convolution of the padded, static x (N, C, H, W) by w (F, C/g, KH, KW)
    into its NCHW accumulator, as bands of output rows (in parallel), in each a loop over the
    groups of one NHWC convolution each:

        forall bands b:  for g in groups:
            y[:, b, :, g*Fg:(g+1)*Fg] = conv_2d_nhwc_hwcf(x[:, rows(b), :, g*Cg:(g+1)*Cg], w'[g])

    Each group's convolution is the named op every plain NHWC convolution is, so the
    default schedule gives it the same kernel (conv_plan.py): a register tile of output
    pixels by vectors of the group's filters, holding its accumulators across all taps and
    input channels of the group (decomposed to 1-D convolutions and vectorized). The group's
    input and output are channel slices of the NHWC tensors (views, no copy); the filter is
    packed once as (G, KH, KW, Cg, Fg), so a group's filter is contiguous (folded at compile
    time for a constant filter). Strides and dilations are the named op's own. The bands
    (``_row_band``) keep the input rows all groups read in cache, and are the parallel tasks.
    Why: ``linalg.conv_2d_ngchw_gfchw`` has no decomposition and its schedule left it loops;
    one batched contraction per filter tap (round 16) read and wrote the whole accumulator
    once per tap (docs/performance.md, "Grouped convolutions (issue #43, wt-grouped)")."""
    merged = _groups_per_vector(groups, *core.static_shape(w)[:2])
    if merged > 1:
        w, groups = _block_diagonal(w, groups, merged), groups // merged
    element = core.tensor_type(x).element_type
    w_element = core.tensor_type(w).element_type
    filters, group_channels, kh, kw = core.static_shape(w)
    per_group = filters // groups
    n, _, height, width = core.static_shape(x)
    out_h = window_output_extent(height, 0, 0, kh, strides[0], dilations[0])
    out_w = window_output_extent(width, 0, 0, kw, strides[1], dilations[1])
    pixels = core.transpose(x, [0, 2, 3, 1])  # N, H, W, C
    grouped_w = expand(w, [[0, 1], [2], [3], [4]], [groups, per_group, group_channels, kh, kw])
    packed = core.transpose(grouped_w, [0, 3, 4, 2, 1])  # G, KH, KW, Cg, Fg
    dynamic = ir.ShapedType.get_dynamic_size()
    band = _row_band(out_h, n * width * groups * group_channels * _element_bytes(element), strides[0],
                     (kh - 1) * dilations[0] + 1)
    band_rows = (band - 1) * strides[0] + (kh - 1) * dilations[0] + 1
    input_type = ir.RankedTensorType.get([n, band_rows, width, group_channels], element)
    filter_type = ir.RankedTensorType.get([kh, kw, group_channels, per_group], w_element)
    out_type = ir.RankedTensorType.get([n, band, out_w, per_group], accumulator)
    band_type = ir.RankedTensorType.get([n, band, out_w, filters], accumulator)
    result = core.empty([n, out_h, out_w, filters], accumulator)
    bands = scf.ForallOp([0], [out_h // band], [1], [result])
    with ir.InsertionPoint(bands.body):
        out_row = arith.muli(bands.induction_variables[0], core.index(band))
        in_row = arith.muli(out_row, core.index(strides[0]))
        band_slice = [[out_row], [], [], [0, dynamic, 0, 0], [n, band, out_w, filters], [1, 1, 1, 1]]
        band_out = tensor.extract_slice(band_type, bands.inner_iter_args[0], *band_slice)
        loop = scf.ForOp(core.index(0), core.index(groups), core.index(1), [band_out])
        with ir.InsertionPoint(loop.body):
            g = loop.induction_variable
            channel = arith.muli(g, core.index(group_channels))
            group_x = tensor.extract_slice(input_type, pixels, [in_row, channel], [], [], [0, dynamic, 0, dynamic],
                                           [n, band_rows, width, group_channels], [1, 1, 1, 1])
            group_w = tensor.extract_slice(filter_type, packed, [g], [], [], [dynamic, 0, 0, 0, 0],
                                           [1, kh, kw, group_channels, per_group], [1] * 5)
            # The group's slice of the band's result, zeroed and accumulated in place (no copy).
            filter_offset = arith.muli(g, core.index(per_group))
            group_out = [[filter_offset], [], [], [0, 0, 0, dynamic], [n, band, out_w, per_group], [1, 1, 1, 1]]
            init = linalg.fill(core.scalar_constant(0, accumulator),
                               outs=[tensor.extract_slice(out_type, loop.inner_iter_args[0], *group_out)])
            group_y = linalg.conv_2d_nhwc_hwcf(group_x, group_w, outs=[init],
                                               strides=list(strides), dilations=list(dilations))
            scf.YieldOp([tensor.insert_slice(group_y, loop.inner_iter_args[0], *group_out)])
        in_parallel = scf.InParallelOp()
        with ir.InsertionPoint(in_parallel.block):
            tensor.parallel_insert_slice(loop.results[0], bands.inner_iter_args[0], *band_slice)
    return core.transpose(bands.results[0], [0, 3, 1, 2])


# Filters of a merged group (``_groups_per_vector``): one AVX2 vector of f32.
_VECTOR_FILTERS = 8
# Groups with at most this many filters are merged. Why not 4: merging pairs of 4-filter
# groups made ResNeXt's 4-per-group layer 4-6 % slower and the whole resnext as slow as
# before the fused epilogues (twice the multiply-adds did not pay for the wider vectors);
# 2-filter groups ran 8-14 % faster merged by 4 (docs/performance.md, "Grouped
# convolutions with fused epilogues").
_MERGED_AT_MOST = 2


def _groups_per_vector(groups: int, filters: int, group_channels: int) -> int:
    """How many neighbouring groups to compute as one (``_block_diagonal``): enough that the
    merged group's filters fill ``_VECTOR_FILTERS``, if that divides the groups; else 1.
    Why: the group convolution's register tile is vectors of its filters, so 2 filters per
    group used a quarter of each vector."""
    per_group = filters // groups
    if per_group > _MERGED_AT_MOST or _VECTOR_FILTERS % per_group or group_channels > _MERGED_AT_MOST:
        return 1
    merged = _VECTOR_FILTERS // per_group
    return merged if groups % merged == 0 else 1


def _block_diagonal(w: ir.Value, groups: int, merged: int) -> ir.Value:
    """The filter (F, Cg, KH, KW) of ``groups`` groups as that of ``groups / merged`` groups
    of ``merged`` times the channels and filters: each merged group's filter is block
    diagonal, zero where a filter would read another original group's channels (built
    with slices: the constant folder evaluates it for a constant filter). Computes
    ``merged`` times the multiply-adds, on whole vectors."""
    filters, group_channels, kh, kw = core.static_shape(w)
    per_group = filters // groups
    outer = groups // merged
    element = core.tensor_type(w).element_type
    blocks = expand(w, [[0, 1, 2], [3], [4], [5]], [outer, merged, per_group, group_channels, kh, kw])
    result = core.filled([outer, merged, per_group, merged * group_channels, kh, kw], 0, element)
    block_type = ir.RankedTensorType.get([outer, 1, per_group, group_channels, kh, kw], element)
    sizes = [outer, 1, per_group, group_channels, kh, kw]
    for j in range(merged):
        block = tensor.extract_slice(block_type, blocks, [], [], [], [0, j, 0, 0, 0, 0], sizes, [1] * 6)
        result = tensor.insert_slice(block, result, [], [], [], [0, j, 0, j * group_channels, 0, 0], sizes, [1] * 6)
    return collapse(result, [[0, 1, 2], [3], [4], [5]])


# Bytes of input rows a band of grouped-convolution output rows reads, at most
# (``_row_band``): all the band's groups read the same input lines, so they stay in L2.
_BAND_INPUT_BYTES = 1 << 17


def _element_bytes(element: ir.Type) -> int:
    return max(getattr(element, "width", 32) // 8, 1)


def _row_band(out_rows: int, row_bytes: int, stride: int, window: int) -> int:
    """Output rows per band of a grouped convolution (``_grouped_per_group``): the most that
    divide ``out_rows`` and whose input rows (``row_bytes`` each) fit ``_BAND_INPUT_BYTES``.
    Why bands, groups inside: a group reads only its few channels of each input pixel (16
    bytes of a 64-byte line with 4 channels per group), so with the groups outermost every
    group streamed the whole image through the caches again: 4 channels per group at 56x56
    ran 2.4x slower than with the rows outermost (docs/performance.md, "Grouped
    convolutions")."""
    for band in range(out_rows, 0, -1):
        if out_rows % band == 0 and ((band - 1) * stride + window) * row_bytes <= _BAND_INPUT_BYTES:
            return band
    return 1


# Output pixels along a row that a convolution's register tile takes, at most (the
# planner's, schedule/plan.py); a row with no divisor from half of it up gets narrow tiles.
_REGISTER_PIXELS = 8


def narrow_pixel_tiles(width: int) -> bool:
    """Whether an output row of ``width`` pixels has no register tile of 4 to 8 pixels (13,
    11, 26: SqueezeNet's 13x13 classifier took 1-pixel tiles)."""
    return max(d for d in range(1, _REGISTER_PIXELS + 1) if width % d == 0) < _REGISTER_PIXELS // 2


# Output channels of a convolution register tile of two AVX2 vectors (one AVX-512 one): a 1x1
# convolution whose filters are a multiple of it gets whole-vector tiles as a convolution.
_PAIRED_VECTOR_CHANNELS = 16


def pointwise_as_matmul(width: int, filters: int) -> bool:
    """Whether a static, stride-1, unpadded 1x1 convolution with output rows of ``width``
    pixels and ``filters`` output channels is computed as a matmul of its pixels
    (``_pointwise_as_matmul``) rather than as a convolution.

    A matmul where the convolution's register tile would be narrow in both directions: rows
    with no 4-8 pixel tile (``narrow_pixel_tiles``) and filters with no two-vector tile (1000
    classes: the convolution took 8 x 1-vector tiles and ran 1.2x the matmul's time), or rows
    of 1-3 pixels (squeeze-excite's convolutions on the pooled image: matrix-vector products).
    Otherwise a convolution: its pixel tiles peel a partial last tile (schedule/conv_plan.py
    ``register_row_tile``), so a 13- or 27-pixel row takes 5 x 2-vector tiles, as fast as
    the matmul (one layer at a time, docs/performance.md "SqueezeNet and EfficientNet
    kernels"), and its result needs no reshape: a concat's part (SqueezeNet's 1x1 expand) or
    a pad's source (its 1x1 squeeze) is computed in place (pipelines/tensor/
    concat_destinations.py, pad_destinations.py) with the bias and ReLU on its accumulators;
    as a reshaped matmul each was a strided copy (1.7 MB per SqueezeNet call) and a separate
    pass over the result."""
    if not narrow_pixel_tiles(width):
        return False
    if width < _REGISTER_PIXELS // 2:
        return True
    return filters % _PAIRED_VECTOR_CHANNELS != 0 and pointwise_padded_filters(width, filters) == filters


# Zero filters a 1x1 convolution may gain (``pointwise_padded_filters``), at most, as a
# fraction of its filters.
_MAX_PADDED_FILTERS_FRACTION = 0.125


def pointwise_padded_filters(width: int, filters: int) -> int:
    """The filters a 1x1 convolution on rows of ``width`` pixels computes: ``filters`` rounded
    up to whole two-vector tiles (``_PAIRED_VECTOR_CHANNELS``) where its rows have no 4-8
    pixel tile and that adds at most an eighth of the work, else ``filters``; the zero
    filters' channels are sliced off the result. Why: SqueezeNet's classifier (512 -> 1000
    channels over 13x13 pixels) as a matmul of the pixels took 8-pixel x 1-vector tiles
    (1000 is an odd number of 8-lane vectors, and the row's reshape folds into the matmul
    as 13 x 13 rows): as a convolution of 1008 filters it takes 5 x 2-vector tiles with the
    row's last tile peeled and ran in 0.85x the matmul's time (one layer, one thread,
    docs/performance.md "SqueezeNet and EfficientNet kernels")."""
    if not narrow_pixel_tiles(width) or width < _REGISTER_PIXELS // 2:
        return filters
    padded = -(-filters // _PAIRED_VECTOR_CHANNELS) * _PAIRED_VECTOR_CHANNELS
    return padded if padded - filters <= _MAX_PADDED_FILTERS_FRACTION * filters else filters


def _pointwise_as_matmul(x: ir.Value, w: ir.Value, accumulator: ir.Type) -> ir.Value:
    """A 1x1, stride-1, unpadded convolution of a static x (N, C, H, W) by w (F, C, 1, 1) as
    one matmul of the NHWC pixels (N*H*W, C) by the filter (C, F) (transposed once; the
    constant folder does it at compile time), its NCHW accumulator back between transposes
    the layout pass cancels. Why: its rows are then one extent, N*H*W, which the graph stage
    pads to whole register tiles (pipelines/graph/padded_extents.py) where no tile size
    divides it; as a convolution, the register tile must divide the output row, and 13
    pixels (a prime) took 1-pixel tiles: a 512 -> 1000 classifier over 13x13 ran at 5x
    onnxruntime's time (docs/performance.md, round 16)."""
    n, channels, height, width = core.static_shape(x)
    filters = core.static_shape(w)[0]
    pixels = collapse(core.transpose(x, [0, 2, 3, 1]), [[0, 1, 2], [3]])
    matrix = core.transpose(collapse(w, [[0], [1, 2, 3]]), [1, 0])
    init = core.filled([n * height * width, filters], 0, accumulator)
    product = linalg.matmul(pixels, matrix, outs=[init])
    image = expand(product, [[0, 1, 2], [3]], [n, height, width, filters])
    return core.transpose(image, [0, 3, 1, 2])


# The most filter taps (KH * KW) a single-channel convolution may have to be computed as a
# matmul of its windows (``_single_channel_as_matmul``): its window matrix holds that many
# values per output pixel.
_SINGLE_CHANNEL_MAX_TAPS = 64


def single_channel_as_matmul(channels: int, kernel: Sequence[int], groups: int) -> bool:
    """Whether a convolution of a one-channel input (raw audio, a grayscale image) is computed
    as a matmul of its windows (``_single_channel_as_matmul``) rather than as a convolution:
    ungrouped, at most ``_SINGLE_CHANNEL_MAX_TAPS`` taps. Why: the NHWC convolution's
    register tile does one input channel per step, and with one channel its input reads are
    single strided values: a wav2vec 2.0 encoder's first layer (1 -> 256 channels, kernel 10,
    stride 5, 16,000 samples) ran at 9 GFLOPS, 14x onnxruntime's time (docs/performance.md,
    "Held-out architectures")."""
    return channels == 1 and groups == 1 and math.prod(kernel) <= _SINGLE_CHANNEL_MAX_TAPS


def _single_channel_as_matmul(x: ir.Value, w: ir.Value, out_spatial: Sequence[int], strides: Sequence[int],
                              dilations: Sequence[int], accumulator: ir.Type) -> ir.Value:
    """A convolution of a padded, static, one-channel x (N, 1, H, W) by w (F, 1, KH, KW) as
    the matmul of its windows (N*OH*OW, KH*KW) by the filter (KH*KW, F) (transposed once; the
    constant folder does it at compile time), the NHWC product back to NCHW between
    transposes the layout pass cancels against the next convolution's. The window matrix
    is KH*KW values per output pixel (40 KB per 1,000 pixels at 10 taps), written once."""
    n, _, _, _ = core.static_shape(x)
    filters, _, kh, kw = core.static_shape(w)
    out_h, out_w = out_spatial
    d = [ir.AffineDimExpr.get(i) for i in range(5)]  # n, oh, ow, kh, kw
    window = ir.AffineMap.get(5, 0, [d[0], ir.AffineConstantExpr.get(0),
                                     d[1] * strides[0] + d[3] * dilations[0],
                                     d[2] * strides[1] + d[4] * dilations[1]])
    element = core.tensor_type(x).element_type
    patches = generic_op([x], core.empty([n, out_h, out_w, kh, kw], element),
                         [window, ir.AffineMap.get_identity(5)], 5, 0, lambda v, _: v)
    rows = collapse(patches, [[0, 1, 2], [3, 4]])
    matrix = core.transpose(collapse(w, [[0], [1, 2, 3]]), [1, 0])
    init = core.filled([n * out_h * out_w, filters], 0, accumulator)
    product = linalg.matmul(rows, matrix, outs=[init])
    image = expand(product, [[0, 1, 2], [3]], [n, out_h, out_w, filters])
    return core.transpose(image, [0, 3, 1, 2])


def _conv_1d_as_2d(x: ir.Value, w: ir.Value, bias: ir.Value | None, *, strides: Sequence[int],
                   padding_low: Sequence[int], padding_high: Sequence[int], dilations: Sequence[int],
                   groups: int) -> ir.Value:
    """A 1-D convolution as a 2-D one over a unit row: (N, C, W) viewed as (N, C, 1, W), the
    filter as (F, C/g, 1, k), the result viewed back (reshapes, no copies). Why: the layout
    pass, the planner's register tiles and the depthwise schedules are 2-D; linalg's 1-D
    named ops kept scalar loops, and a keyword-spotting Conv1d stack ran far behind
    onnxruntime (docs/performance.md, round 15)."""
    rows = [[0], [1], [2, 3]]
    x2 = expand(x, rows, [*core.sizes(x)[:2], 1, core.sizes(x)[2]])
    w2 = expand(w, rows, [*core.static_shape(w)[:2], 1, core.static_shape(w)[2]])
    y2 = conv(x2, w2, bias, strides=[1, *strides], padding_low=[0, *padding_low],
              padding_high=[0, *padding_high], dilations=[1, *dilations], groups=groups)
    return collapse(y2, rows)


def _conv_3d_as_2d(x: ir.Value, w: ir.Value, bias: ir.Value | None, *, strides: Sequence[int],
                   padding_low: Sequence[int], padding_high: Sequence[int],
                   dilations: Sequence[int], groups: int) -> ir.Value:
    """A 3-D convolution as a sum over the filter's depth taps of 2-D ones, each over the
    frames it reads stacked as images: with x in NDHWC (one transpose), tap t reads frames
    t * dilation + stride * d, a slice whose (N * D_out) images feed a 2-D convolution that
    accumulates into the previous tap's result. The 2-D convolutions sit between NCHW <->
    NHWC transposes that the layout pass cancels, so they run in NHWC with the 2-D
    schedules. Why: linalg's 3-D convolutions have no decomposition to vectorize and ran as
    scalar loops (a C3D-style net far behind onnxruntime, docs/performance.md, round 15).

    Grouped and depthwise filters take the same taps: each tap is the 2-D convolution
    :func:`_unbiased_conv` emits for its groups (one NHWC convolution per group, or the
    depthwise named op), and the taps' results are added (the fusion pass makes each add
    the next tap's epilogue). Why: they had no named op and ran as one scalar
    ``linalg.generic``, 13-18x onnxruntime's time for a video net's depthwise 3x3x3 or
    grouped 1x3x3 (docs/performance.md, "Grouped and depthwise 3-D convolutions")."""
    element = core.tensor_type(x).element_type
    accumulator = accumulator_type(element)
    filters, group_channels, depth_taps, *kernel = core.static_shape(w)
    x = core.pad_constant(x, [0, 0, *padding_low], [0, 0, *padding_high], 0)
    n, channels, depth, height, width = core.static_shape(x)
    out_depth = window_output_extent(depth, 0, 0, depth_taps, strides[0], dilations[0])
    out_height = window_output_extent(height, 0, 0, kernel[0], strides[1], dilations[1])
    out_width = window_output_extent(width, 0, 0, kernel[1], strides[2], dilations[2])
    frames = core.transpose(x, [0, 2, 3, 4, 1])  # N, D, H, W, C
    frame_type = ir.RankedTensorType.get([n, out_depth, height, width, channels], element)
    windows = {"strides": list(strides[1:]), "dilations": list(dilations[1:])}
    result = core.filled([n * out_depth, filters, out_height, out_width], 0, accumulator) if groups == 1 else None
    for tap in range(depth_taps):
        taps = tensor.extract_slice(frame_type, frames, [], [], [], [0, tap * dilations[0], 0, 0, 0],
                                    [n, out_depth, height, width, channels], [1, strides[0], 1, 1, 1])
        images = core.transpose(collapse(taps, [[0, 1], [2], [3], [4]]), [0, 3, 1, 2])  # NCHW view
        w_tap = tensor.extract_slice(ir.RankedTensorType.get([filters, group_channels, *kernel], element), w, [], [],
                                     [], [0, 0, tap, 0, 0], [filters, group_channels, 1, *kernel], [1, 1, 1, 1, 1])
        if groups == 1:
            result = _CONV[2](images, w_tap, outs=[result], **windows)
            continue
        tap_result = _unbiased_conv(images, w_tap, padding_low=[0, 0], padding_high=[0, 0], groups=groups,
                                    **windows)
        result = tap_result if result is None else _sum(result, tap_result)
    nhwc = core.transpose(result, [0, 2, 3, 1])
    volume = expand(nhwc, [[0, 1], [2], [3], [4]], [n, out_depth, out_height, out_width, filters])
    return _add_bias(core.transpose(volume, [0, 4, 1, 2, 3]), bias, element)


def conv(
    x: ir.Value,
    w: ir.Value,
    bias: ir.Value | None = None,
    *,
    strides: Sequence[int],
    padding_low: Sequence[int],
    padding_high: Sequence[int],
    dilations: Sequence[int],
    groups: int = 1,
) -> ir.Value:
    """N-D convolution (1 to 3 spatial dims) of x (N, C, *in) by w (F, C/groups, *k),
    plus ``bias`` (F,) when given. The filter's shape must be static."""
    spatial = core.tensor_type(x).rank - 2
    if spatial not in _CONV:
        raise OperandError(f"conv: {spatial} spatial dims (1 to 3 are supported)")
    check_window_args("conv", spatial, strides=strides, padding_low=padding_low,
                      padding_high=padding_high, dilations=dilations)
    w_shape = core.static_shape(w)
    if None in w_shape or len(w_shape) != spatial + 2:
        raise OperandError(f"conv: the filter needs a static shape of rank {spatial + 2}, got {w_shape}")
    filters, group_channels, *kernel = w_shape
    if groups < 1 or filters % groups:
        raise OperandError(f"conv: {filters} filters do not split into {groups} groups")
    if spatial == 1:
        return _conv_1d_as_2d(x, w, bias, strides=strides, padding_low=padding_low,
                              padding_high=padding_high, dilations=dilations, groups=groups)
    if spatial == 3 and None not in core.static_shape(x):
        return _conv_3d_as_2d(x, w, bias, strides=strides, padding_low=padding_low,
                              padding_high=padding_high, dilations=dilations, groups=groups)
    element = core.tensor_type(x).element_type
    return _add_bias(_unbiased_conv(x, w, strides=strides, padding_low=padding_low, padding_high=padding_high,
                                    dilations=dilations, groups=groups), bias, element)


def _sum(a: ir.Value, b: ir.Value) -> ir.Value:
    """``a + b`` elementwise, in their (accumulator) element type."""
    element = core.tensor_type(a).element_type
    add = arith.addf if core.is_float(element) else arith.addi
    return core.elementwise([a, b], element, add, extents=core.sizes(a))


def _unbiased_conv(x: ir.Value, w: ir.Value, *, strides: Sequence[int], padding_low: Sequence[int],
                   padding_high: Sequence[int], dilations: Sequence[int], groups: int) -> ir.Value:
    """The convolution of :func:`conv` without its bias, in the accumulator type: the op the
    case calls for (a matmul for pointwise filters, a named op, one NHWC convolution per
    group, or a generic where linalg has no named op)."""
    spatial = core.tensor_type(x).rank - 2
    filters, group_channels, *kernel = core.static_shape(w)
    element = core.tensor_type(x).element_type
    accumulator = accumulator_type(element)
    x = _with_static_channels(x, group_channels * groups)
    named = groups == 1 or (group_channels == 1 and filters == groups)
    # Grouped 2-D convolutions of static shape: one NHWC convolution per group.
    per_group_convs = spatial == 2 and not named and None not in core.static_shape(x)
    x = core.pad_constant(x, [0, 0, *padding_low], [0, 0, *padding_high], 0)
    extents = core.sizes(x)
    out_spatial = [
        window_output_extent(extents[2 + i], 0, 0, kernel[i], strides[i], dilations[i])
        for i in range(spatial)
    ]
    windows = {"strides": list(strides), "dilations": list(dilations)}
    if (groups == 1 and spatial == 2 and kernel == [1, 1] and list(strides) == [1, 1]
            and None not in core.static_shape(x) and pointwise_as_matmul(out_spatial[1], filters)):
        result = _pointwise_as_matmul(x, w, accumulator)
    elif (spatial == 2 and None not in core.static_shape(x) and kernel != [1, 1]
          and single_channel_as_matmul(group_channels * groups, kernel, groups)):
        result = _single_channel_as_matmul(x, w, out_spatial, strides, dilations, accumulator)
    elif (groups == 1 and spatial == 2 and kernel == [1, 1] and isinstance(out_spatial[1], int)
          and pointwise_padded_filters(out_spatial[1], filters) != filters):
        padded = pointwise_padded_filters(out_spatial[1], filters)
        init = core.filled([extents[0], padded, *out_spatial], 0, accumulator)
        w_padded = core.pad_constant(w, [0, 0, 0, 0], [padded - filters, 0, 0, 0], 0)
        result = slice_axis(_CONV[2](x, w_padded, outs=[init], **windows), 1, 0, filters)
    elif groups == 1:
        init = core.filled([extents[0], filters, *out_spatial], 0, accumulator)
        result = _CONV[spatial](x, w, outs=[init], **windows)
    elif group_channels == 1 and filters == groups:
        init = core.filled([extents[0], filters, *out_spatial], 0, accumulator)
        taps = collapse(w, [[0, 1], *[[d] for d in range(2, spatial + 2)]])
        result = _DEPTHWISE[spatial](x, taps, outs=[init], **windows)
    elif per_group_convs:
        result = _grouped_per_group(x, w, groups, strides, dilations, accumulator)
    else:
        per_group = filters // groups
        x_groups = [[0], [1, 2], *[[d] for d in range(3, spatial + 3)]]
        xg = expand(x, x_groups, [extents[0], groups, group_channels, *extents[2:]])
        wg = expand(w, [[0, 1], *[[d] for d in range(2, spatial + 3)]],
                    [groups, per_group, group_channels, *kernel])
        init = core.filled([extents[0], groups, per_group, *out_spatial], 0, accumulator)
        if spatial == 2:
            grouped = linalg.conv_2d_ngchw_gfchw(xg, wg, outs=[init], **windows)
        else:
            grouped = _grouped_generic(xg, wg, init, strides, dilations)
        result = collapse(grouped, x_groups)
    return result


# --- 8-bit integer convolution -------------------------------------------------------------


def integer_conv2d(
    x: ir.Value,
    w: np.ndarray,
    *,
    x_zero: int,
    x_unsigned: bool,
    strides: Sequence[int],
    padding_low: Sequence[int],
    padding_high: Sequence[int],
    dilations: Sequence[int],
    bias: np.ndarray | None = None,
) -> ir.Value:
    """``sum (x - x_zero) * w + bias`` in i32: a 2-D convolution of an 8-bit NCHW ``x`` by a
    constant int8 filter ``w`` (F, C, KH, KW) without zero point, ``bias`` (F,) int32.

    Why not the named convolution of widened operands: it is computed as a matmul of the raw
    8-bit values (``contraction.integer_matmul``), which the pipeline runs on u8 x s8
    dot-product kernels (pipelines/tensor/int8_matmul.py). ``x`` goes to NHWC, is padded with its
    zero point (so padding contributes nothing once the zero point is taken off), and its
    windows are laid out as rows (im2col: (N*OH*OW, KH*KW*C); a 1x1 stride-1 convolution
    needs no copy). The zero point comes off afterwards as ``x_zero * sum(w[f])``, with the
    bias. The two transposes (NCHW -> NHWC in, back out) are layout conversions that
    ``tilecraft-convert-layout`` propagates and cancels between consecutive convolutions, as
    it does for float ones.
    """
    i8, i32 = ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(32)
    filters, channels, kh, kw = w.shape
    check_window_args("conv", 2, strides=strides, padding_low=padding_low,
                      padding_high=padding_high, dilations=dilations)
    x = _with_static_channels(x, channels)
    nhwc = core.transpose(x, [0, 2, 3, 1])
    fill = int(np.array(x_zero).astype(np.uint8 if x_unsigned else np.int8).view(np.int8))
    nhwc = core.pad_constant(nhwc, [0, *padding_low, 0], [0, *padding_high, 0], fill)
    batch, height, width, _ = core.sizes(nhwc)
    out_h = window_output_extent(height, 0, 0, kh, strides[0], dilations[0])
    out_w = window_output_extent(width, 0, 0, kw, strides[1], dilations[1])
    if (kh, kw) == (1, 1) and list(strides) == [1, 1]:
        rows = collapse(nhwc, [[0, 1, 2], [3]])
    else:
        d = [ir.AffineDimExpr.get(i) for i in range(6)]  # n, oh, ow, kh, kw, c
        window = ir.AffineMap.get(6, 0, [d[0], d[1] * strides[0] + d[3] * dilations[0],
                                         d[2] * strides[1] + d[4] * dilations[1], d[5]])
        patches = generic_op([nhwc], core.empty([batch, out_h, out_w, kh, kw, channels], i8),
                             [window, ir.AffineMap.get_identity(6)], 6, 0, lambda v, _: v)
        rows = collapse(patches, [[0, 1, 2], [3, 4, 5]])
    matrix = core.constant(np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(kh * kw * channels, filters)),
                           name="conv_weights")
    product = expand(integer_matmul(rows, matrix, a_unsigned=x_unsigned, b_unsigned=False),
                     [[0, 1, 2], [3]], [batch, out_h, out_w, filters])
    offset = int(x_zero) * w.astype(np.int64).sum(axis=(1, 2, 3))
    if bias is not None:
        offset = offset - bias.astype(np.int64)
    offsets = core.constant(offset.astype(np.int32), name="conv_offsets")
    corrected = core.elementwise([product, offsets], i32, arith.subi)
    return core.transpose(corrected, [0, 3, 1, 2])


# --- col2im ------------------------------------------------------------------------------------


def col2im(x: ir.Value, image: Sequence[Extent], block: Sequence[Extent], *, strides: Sequence[int],
           dilations: Sequence[int], pads: Sequence[int]) -> ir.Value:
    """ONNX Col2Im: the sliding blocks of ``x`` ``(N, C * prod(block), L)`` summed back into
    an image ``(N, C, *image)``, the adjoint of im2col. ``image`` and ``block`` may be known
    only at run time; ``pads`` is ``[begin..., end...]``.

    As a gather, not a scatter: one ``linalg.generic`` over ``(n, c, *image, tap)`` with the
    tap a reduction, reading for each output position and block offset the column whose
    window covers it: ``p = y + pad_begin - offset * dilation`` must be a non-negative
    multiple of the stride below the block count. Every read index is clamped; the extents
    it relies on (C * prod(block) rows, L blocks) are run-time checks."""
    rank = len(image)
    if not (len(block) == rank == len(strides) == len(dilations) and len(pads) == 2 * rank):
        raise OperandError(f"Col2Im: image_shape, block_shape, strides, dilations and pads disagree on the "
                         f"spatial rank ({rank}, {len(block)}, {len(strides)}, {len(dilations)}, {len(pads)} // 2)")
    if min((*strides, *dilations), default=1) < 1 or min(pads, default=0) < 0:
        raise OperandError(f"Col2Im: strides and dilations must be >= 1 and pads >= 0; got {strides}, "
                         f"{dilations}, {pads}")
    batch, rows, length = core.sizes(x)
    for extent in block:
        check_extent(1, extent, "Col2Im: a block dim of {bound}", at_most=True)
    taps = extent_math.product(block)
    channels = extent_math.floordiv(rows, taps)
    check_extent(extent_math.mul(channels, taps), rows, "Col2Im: the input's {bound} rows are not a multiple "
                 "of the block size")
    counts = []
    for d in range(rank):
        span = extent_math.add(extent_math.mul(dilations[d], extent_math.sub(block[d], 1)), 1)
        room = extent_math.sub(extent_math.add(image[d], pads[d] + pads[rank + d]), span)
        count = extent_math.add(extent_math.floordiv(room, strides[d]), 1)
        check_extent(1, count, "Col2Im: {bound} sliding blocks along a dim", at_most=True)
        counts.append(count)
    check_extent(extent_math.product(counts), length, "Col2Im: the input holds {bound} blocks, the shapes "
                 "make {value}")
    element = core.tensor_type(x).element_type
    out_extents = [batch, channels, *image]
    init = core.filled(out_extents, 0, element)
    loops = len(out_extents) + 1
    dims = [ir.AffineDimExpr.get(i) for i in range(loops)]
    # linalg infers each loop's extent from an operand: an empty tensor of one element per
    # tap gives the reduction's (nothing reads it).
    tap_extent = core.empty([taps], element)

    def body(_: ir.Value, accumulated: ir.Value) -> ir.Value:
        at = [linalg.IndexOp(d).result for d in range(loops)]
        image_at, tap = at[2:-1], at[-1]
        offsets, rest = [None] * rank, tap
        for d in reversed(range(rank)):  # the tap's block offset, the last dim fastest
            extent = extent_math.as_index(block[d])
            offsets[d], rest = arith.remui(rest, extent), arith.divui(rest, extent)
        valid, column = None, core.index(0)
        for d in range(rank):
            p = arith.subi(arith.addi(image_at[d], core.index(pads[d])),
                           arith.muli(offsets[d], core.index(dilations[d])))
            nonnegative = arith.maxsi(p, core.index(0))
            step = core.index(strides[d])
            q = arith.divui(nonnegative, step)
            count = extent_math.as_index(counts[d])
            ok = arith.andi(arith.andi(arith.cmpi(arith.CmpIPredicate.sge, p, core.index(0)),
                                       arith.cmpi(arith.CmpIPredicate.eq, arith.remui(nonnegative, step), core.index(0))),
                            arith.cmpi(arith.CmpIPredicate.ult, q, count))
            valid = ok if valid is None else arith.andi(valid, ok)
            clamped = arith.minui(q, arith.subi(count, core.index(1)))
            column = arith.addi(arith.muli(column, count), clamped)
        row = arith.addi(arith.muli(at[1], extent_math.as_index(taps)), tap)
        sample = tensor.extract(x, [at[0], row, column])
        zero = core.scalar_constant(0, element)
        add = arith.addf if core.is_float(element) else arith.addi
        return add(accumulated, arith.select(valid, sample, zero))

    return generic_op([tap_extent], init, [ir.AffineMap.get(loops, 0, [dims[-1]]), ir.AffineMap.get(loops, 0, dims[:-1])],
                      loops - 1, 1, body)


# --- transposed convolution ------------------------------------------------------------------


def _transposed_filter_array(w: np.ndarray, groups: int) -> np.ndarray:
    """(C, F/g, *k) -> (F, C/g, *k), spatially flipped: the filter of the equivalent conv."""
    channels, per_group, *kernel = w.shape
    group_channels = channels // groups
    grouped = w.reshape(groups, group_channels, per_group, *kernel).swapaxes(1, 2)
    flipped = grouped[(slice(None),) * 3 + (slice(None, None, -1),) * len(kernel)]
    return np.ascontiguousarray(flipped.reshape(groups * per_group, group_channels, *kernel))


def _transposed_filter(w: ir.Value, groups: int) -> ir.Value:
    """:func:`_transposed_filter_array` as IR, for a filter computed at run time.

    A ``tensor.generate`` gathering ``w[g*Cg + c, f, k-1-t]``: an indexing map with
    ``k - 1 - t`` would make linalg tiling assert (negative coefficient), and a gather in a
    ``linalg.generic`` does not vectorize; the filter is small, a plain loop nest is right.
    """
    channels, per_group, *kernel = core.static_shape(w)
    group_channels = channels // groups
    element = core.tensor_type(w).element_type
    rank = 2 + len(kernel)
    result_type = ir.RankedTensorType.get([groups * per_group, group_channels, *kernel], element)
    op = tensor.GenerateOp(result_type, [])
    block = op.regions[0].blocks.append(*[ir.IndexType.get()] * rank)
    with ir.InsertionPoint(block):
        out_channel, c, *taps = block.arguments
        g = arith.divui(out_channel, core.index(per_group))
        f = arith.remui(out_channel, core.index(per_group))
        channel = arith.addi(arith.muli(g, core.index(group_channels)), c)
        flipped = [arith.subi(core.index(k - 1), t) for k, t in zip(kernel, taps)]
        tensor.YieldOp(tensor.extract(w, [channel, f, *flipped]))
    return op.result


def _dilate_and_pad(x: ir.Value, strides: Sequence[int], low: Sequence[int], high: Sequence[int]) -> ir.Value:
    """``x`` with ``stride - 1`` zeros between neighbours and ``low``/``high`` zeros around
    each spatial dim (negative amounts crop)."""
    extents = core.sizes(x)
    spatial = len(strides)
    dilated = [_index_add(_index_mul(extents[2 + i], strides[i]), 1 - strides[i]) for i in range(spatial)]
    grown = [_index_add(dilated[i], max(low[i], 0) + max(high[i], 0)) for i in range(spatial)]
    element = core.tensor_type(x).element_type
    zeros = core.filled([*extents[:2], *grown], 0, element)
    dynamic = ir.ShapedType.get_dynamic_size()
    inserted = tensor.insert_slice(
        x, zeros, [], [e for e in extents if not isinstance(e, int)], [],
        [0, 0, *[max(l, 0) for l in low]],
        [e if isinstance(e, int) else dynamic for e in extents],
        [1, 1, *strides],
    )
    if all(l >= 0 for l in low) and all(h >= 0 for h in high):
        return inserted
    kept = [*extents[:2], *[_index_add(grown[i], min(low[i], 0) + min(high[i], 0)) for i in range(spatial)]]
    result_type = core.shape_type(kept, element)
    return tensor.extract_slice(
        result_type, inserted, [], [e for e in kept if not isinstance(e, int)], [],
        [0, 0, *[max(-l, 0) for l in low]],
        [e if isinstance(e, int) else dynamic for e in kept],
        [1] * len(kept),
    )


def _tiles_from_pixels(x: ir.Value, w: np.ndarray) -> ir.Value:
    """A transposed convolution whose kernel equals its stride (a U-Net's 2x2 stride-2
    upsampling), unpadded: each input pixel makes its own k x k block of output pixels,

        y[n, h*kh + a, w*kw + b, f] = sum_c x[n, h, w, c] * W[c, f, a, b],

    one contraction written into a (N, H, kh, W, kw, F) tensor that is the NHWC output
    (a collapse, no copy), between NCHW <-> NHWC transposes that the layout pass cancels
    against its conversions. The general lowering (zeros between input pixels, then a
    convolution) multiplies kh * kw times as many zeros as products."""
    spatial = len(w.shape) - 2
    channels, filters, *kernel = w.shape
    element = core.tensor_type(x).element_type
    accumulator = accumulator_type(element)
    x = _with_static_channels(x, channels)
    pixels = core.transpose(x, [0, *range(2, spatial + 2), 1])          # N, *in, C
    extents = core.sizes(pixels)
    taps = core.constant(np.ascontiguousarray(np.moveaxis(w, 1, -1)), name="conv_transpose_taps")  # C, *k, F
    # Loops: n, then (in_i, k_i) per spatial dim, f | c.
    loops = 3 + 2 * spatial
    dim = ir.AffineDimExpr.get
    inputs_at = [dim(1 + 2 * i) for i in range(spatial)]
    taps_at = [dim(2 + 2 * i) for i in range(spatial)]
    f, c = dim(loops - 2), dim(loops - 1)
    maps = [ir.AffineMap.get(loops, 0, [dim(0), *inputs_at, c]),
            ir.AffineMap.get(loops, 0, [c, *taps_at, f]),
            ir.AffineMap.get(loops, 0, [dim(d) for d in range(loops - 1)])]
    out_extents = [extents[0]]
    for i in range(spatial):
        out_extents += [extents[1 + i], kernel[i]]
    init = core.filled([*out_extents, filters], 0, accumulator)
    body = _multiply_accumulate(accumulator)
    blocks = generic_op([pixels, taps], init, maps, loops - 1, 1, body)
    image = collapse(blocks, [[0], *[[1 + 2 * i, 2 + 2 * i] for i in range(spatial)], [loops - 2]])
    return core.transpose(image, [0, spatial + 1, *range(1, spatial + 1)])


def _overlapping_tiles_apply(strides: Sequence[int], dilations: Sequence[int], groups: int,
                            x_shape: Sequence[int | None], w: "ir.Value | np.ndarray") -> bool:
    """Whether :func:`_overlapping_tiles` lowers this transposed convolution: a 2-D one of
    static shape and constant filter, ungrouped, undilated, every stride at least 2 (at
    stride 1 the direct convolution wastes nothing and reads less)."""
    return (isinstance(w, np.ndarray) and w.ndim == 4 and groups == 1 and None not in x_shape
            and all(d == 1 for d in dilations) and min(strides) >= 2)


def _overlapping_tiles(x: ir.Value, w: np.ndarray, strides: Sequence[int], padding_low: Sequence[int],
                       padding_high: Sequence[int], output_padding: Sequence[int]) -> ir.Value:
    """A strided transposed convolution as GEMM + overlap-add (col2im, as onnxruntime does):
    each input pixel's block of contributions, one matmul of the NHWC pixels (N*H*W, C) by
    the taps (C, kh * kw * F), framed by one pad (m - 1 empty blocks around the pixels, the
    taps zero-padded to m * stride, m = ceil(k / stride)), then every output pixel sums the
    m x m blocks that cover it, one windowed sum:

        y[n, hh, r, ww, u, f] = sum_{q, t} blocks[n, hh - q, ww - t, q * s + r, t * s + u, f]

    (output row ``hh * s + r``), cropped by the padding. Why: the general lowering inserts
    s - 1 zeros between input pixels and convolves, so at stride 2 three of every four
    multiply-adds read a zero; a VAE decoder's 4x4 stride-2 upsamplings ran 1.7-3.4x
    onnxruntime's time (docs/performance.md, round 30's second probe)."""
    channels, filters, *kernel = w.shape
    mh, mw = (-(-k // s) for k, s in zip(kernel, strides))
    sh, sw = strides
    kh, kw = kernel
    element = core.tensor_type(x).element_type
    accumulator = accumulator_type(element)
    x = _with_static_channels(x, channels)
    n, _, height, width = core.static_shape(x)
    pixels = collapse(core.transpose(x, [0, 2, 3, 1]), [[0, 1, 2], [3]])   # N*H*W, C
    taps = core.constant(np.ascontiguousarray(np.moveaxis(w, 1, -1)).reshape(channels, kh * kw * filters),
                         name="conv_transpose_taps")                       # C, kh * kw * F
    init = core.filled([n * height * width, kh * kw * filters], 0, accumulator)
    product = linalg.matmul(pixels, taps, outs=[init])
    blocks = expand(product, [[0, 1, 2], [3, 4, 5]], [n, height, width, kh, kw, filters])
    # One copy frames the blocks for the windowed sum: m - 1 empty blocks around the pixels,
    # and the taps past the kernel (to m * stride) zero.
    framed = core.pad_constant(blocks, [0, mh - 1, mw - 1, 0, 0, 0],
                               [0, mh - 1, mw - 1, mh * sh - kh, mw * sw - kw, 0], 0)
    framed = expand(framed, [[0], [1], [2], [3, 4], [5, 6], [7]],
                    [n, height + 2 * (mh - 1), width + 2 * (mw - 1), mh, sh, mw, sw, filters])
    rows, columns = height + mh - 1, width + mw - 1
    # Loops: n, hh, r, ww, u, f | q, t.
    dim = ir.AffineDimExpr.get
    q, t = dim(6), dim(7)
    read = ir.AffineMap.get(8, 0, [dim(0), dim(1) + (mh - 1) - q, dim(3) + (mw - 1) - t, q, dim(2), t, dim(4), dim(5)])
    write = ir.AffineMap.get(8, 0, [dim(d) for d in range(6)])
    add = arith.addf if core.is_float(accumulator) else arith.addi
    init = core.filled([n, rows, sh, columns, sw, filters], 0, accumulator)
    summed = generic_op([framed], init, [read, write], 6, 2, lambda v, acc: add(acc, v))
    image = collapse(summed, [[0], [1, 2], [3, 4], [5]])                   # N, rows*sh, columns*sw, F
    full = [rows * sh, columns * sw]
    wanted = [strides[i] * ((height, width)[i] - 1) + kernel[i] + output_padding[i] - padding_low[i] - padding_high[i]
              for i in range(2)]
    short = [max(0, padding_low[i] + wanted[i] - full[i]) for i in range(2)]
    image = core.pad_constant(image, [0, 0, 0, 0], [0, *short, 0], 0)  # output_padding past the last block
    cropped = tensor.extract_slice(ir.RankedTensorType.get([n, *wanted, filters], accumulator), image, [], [], [],
                                   [0, padding_low[0], padding_low[1], 0], [n, *wanted, filters], [1, 1, 1, 1])
    return core.transpose(cropped, [0, 3, 1, 2])


def conv_transpose(
    x: ir.Value,
    w: "ir.Value | np.ndarray",
    bias: ir.Value | None = None,
    *,
    strides: Sequence[int],
    padding_low: Sequence[int],
    padding_high: Sequence[int],
    output_padding: Sequence[int],
    dilations: Sequence[int],
    groups: int = 1,
) -> ir.Value:
    """Transposed convolution of x (N, C, *in) by w (C, F/groups, *k), plus ``bias`` (F,).

    Output extent per dim: ``stride*(in-1) + output_padding + dilation*(k-1) + 1 - low - high``.
    Lowered as the equivalent direct convolution: zeros inserted between input elements,
    padded by ``dilation*(k-1) - pad``, convolved with the channel-swapped, flipped filter.
    A filter known at import time (numpy) is rearranged once by numpy.
    """
    spatial = core.tensor_type(x).rank - 2
    check_window_args("conv_transpose", spatial, strides=strides, padding_low=padding_low,
                      padding_high=padding_high, output_padding=output_padding, dilations=dilations)
    kernel = list(w.shape[2:]) if isinstance(w, np.ndarray) else core.static_shape(w)[2:]
    if None in kernel:
        raise OperandError("conv_transpose: the filter needs a static shape")
    if (w.shape[0] if isinstance(w, np.ndarray) else core.static_shape(w)[0]) % groups:
        raise OperandError(f"conv_transpose: the filter's channels do not split into {groups} groups")
    if (isinstance(w, np.ndarray) and groups == 1 and list(kernel) == list(strides)
            and not any(padding_low) and not any(padding_high) and not any(output_padding)
            and all(d == 1 for d in dilations)):
        return _add_bias(_tiles_from_pixels(x, w), bias, core.tensor_type(x).element_type)
    if _overlapping_tiles_apply(strides, dilations, groups, core.static_shape(x), w):
        return _add_bias(_overlapping_tiles(x, w, strides, padding_low, padding_high, output_padding), bias,
                         core.tensor_type(x).element_type)
    if isinstance(w, np.ndarray):
        filt = core.constant(_transposed_filter_array(w, groups), name="conv_transpose_filter")
    else:
        filt = _transposed_filter(w, groups)
    span = [dilations[i] * (kernel[i] - 1) for i in range(spatial)]
    low = [span[i] - padding_low[i] for i in range(spatial)]
    high = [span[i] - padding_high[i] + output_padding[i] for i in range(spatial)]
    upsampled = _dilate_and_pad(x, strides, low, high)
    return conv(
        upsampled, filt, bias, strides=[1] * spatial, padding_low=[0] * spatial,
        padding_high=[0] * spatial, dilations=dilations, groups=groups,
    )
