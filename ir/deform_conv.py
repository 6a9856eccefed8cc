"""DeformConv: a convolution whose every filter tap reads the input at its regular position
plus a learned offset (bilinear, zero outside), scaled by an optional mask (ONNX DeformConv
19, torchvision's ``deform_conv2d``; deformable ConvNets v1/v2).

Two ops, as the im2col form of a convolution: a gather (``linalg.generic`` with
``tensor.extract``) samples the columns ``[N, C, kH, kW, oH, oW]`` (each times its mask),
then a contraction with the filter per group sums them, plus the bias. Every read is
clamped into its tensor; the offsets and mask must have the shapes the filter and output
imply (run-time checks where they are dynamic).
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir
from mlir.dialects import arith, tensor

from . import core
from .checks import check_extent
from .contraction import collapse, expand, generic_op
from .conv import window_output_extent
from .grid_sample import bilinear_sample
from .movement import indexed_generic
from ..errors import OperandError


def deform_conv2d(x: ir.Value, w: ir.Value, offset: ir.Value, bias: ir.Value | None, mask: ir.Value | None, *,
                  strides: Sequence[int], pads: Sequence[int], dilations: Sequence[int], groups: int,
                  offset_groups: int) -> ir.Value:
    """``x`` [N, C, H, W] by ``w`` [F, C / groups, kH, kW] sampled at ``offset``
    [N, offset_groups * 2 * kH * kW, oH, oW] (per tap: dy, dx), times ``mask``
    [N, offset_groups * kH * kW, oH, oW]; ``pads`` [top, left, bottom, right]."""
    n, channels, height, width = core.sizes(x)
    element = core.tensor_type(x).element_type
    filters, group_channels, kh, kw = core.static_shape(w)
    if None in (filters, group_channels, kh, kw) or not core.is_float(element):
        raise OperandError("DeformConv needs a float input and a filter of static shape")
    if groups < 1 or offset_groups < 1 or filters % groups or min(*strides, *dilations) < 1:
        raise OperandError(f"DeformConv: {filters} filters, group {groups}, offset_group {offset_groups}, strides "
                         f"{list(strides)}, dilations {list(dilations)} do not fit together")
    check_extent(channels, group_channels * groups, "DeformConv: X has {value} channels, the filter expects {bound}")
    if isinstance(channels, int) and channels % offset_groups:
        raise OperandError(f"DeformConv: {channels} channels do not split into {offset_groups} offset groups")
    _, offset_channels, out_h, out_w = core.sizes(offset)
    taps = kh * kw
    check_extent(offset_channels, offset_groups * 2 * taps, "DeformConv: offset has {value} channels, {bound} expected")
    check_extent(core.sizes(offset)[0], n, "DeformConv: offset has {value} images, X has {bound}")
    # The output extents come from offset's shape; ONNX ties them to the input's.
    expected_h = window_output_extent(height, pads[0], pads[2], kh, strides[0], dilations[0])
    expected_w = window_output_extent(width, pads[1], pads[3], kw, strides[1], dilations[1])
    check_extent(out_h, expected_h, "DeformConv: offset rows {value}, the convolution makes {bound}")
    check_extent(out_w, expected_w, "DeformConv: offset columns {value}, the convolution makes {bound}")
    if mask is not None:
        check_extent(core.sizes(mask)[1], offset_groups * taps, "DeformConv: mask has {value} channels, {bound} expected")
        for a, b in zip(core.sizes(mask)[2:], (out_h, out_w)):
            check_extent(a, b, "DeformConv: mask extent {value}, output {bound}")
    f64 = ir.F64Type.get()
    per_offset_group = channels // offset_groups if isinstance(channels, int) else None

    def column(positions: list[ir.Value], _: list[ir.Value]) -> ir.Value:
        image, channel, ky, kx, oy, ox = positions
        group = (arith.divui(channel, core.index(per_offset_group)) if per_offset_group
                 else arith.divui(channel, arith.divui(core.sizes(x)[1], core.index(offset_groups))))
        tap = arith.addi(arith.muli(ky, core.index(kw)), kx)
        slot = arith.addi(arith.muli(group, core.index(taps)), tap)
        dy = tensor.extract(offset, [image, arith.muli(slot, core.index(2)), oy, ox])
        dx = tensor.extract(offset, [image, arith.addi(arith.muli(slot, core.index(2)), core.index(1)), oy, ox])
        position = []
        for out, k, stride, dilation, pad, delta in ((oy, ky, strides[0], dilations[0], pads[0], dy),
                                                     (ox, kx, strides[1], dilations[1], pads[1], dx)):
            regular = arith.addi(arith.muli(out, core.index(stride)), arith.muli(k, core.index(dilation)))
            base = arith.sitofp(f64, arith.index_cast(ir.IntegerType.get_signless(64), regular))
            position.append(arith.addf(arith.subf(base, core.scalar_constant(float(pad), f64)),
                                       core.convert_scalar(delta, f64)))
        value = bilinear_sample(x, [image, channel], position)
        if mask is not None:
            value = arith.mulf(value, core.convert_scalar(tensor.extract(mask, [image, slot, oy, ox]), f64))
        return core.convert_scalar(value, element)

    columns = indexed_generic([n, channels, kh, kw, out_h, out_w], element, column)
    # Per group: out[n, g, f, y, x] = sum_{c, i, j} w[g, f, c, i, j] * columns[n, g, c, i, j, y, x]
    grouped = expand(columns, [[0], [1, 2], [3], [4], [5], [6]], [n, groups, group_channels, kh, kw, out_h, out_w])
    weights = expand(w, [[0, 1], [2], [3], [4]], [groups, filters // groups, group_channels, kh, kw])
    d = [ir.AffineDimExpr.get(i) for i in range(8)]  # n, g, f, y, x | c, i, j
    init = core.filled([n, groups, filters // groups, out_h, out_w], 0.0, element)
    summed = generic_op(
        [grouped, weights], init,
        [ir.AffineMap.get(8, 0, [d[0], d[1], d[5], d[6], d[7], d[3], d[4]]),
         ir.AffineMap.get(8, 0, [d[1], d[2], d[5], d[6], d[7]]),
         ir.AffineMap.get(8, 0, [d[0], d[1], d[2], d[3], d[4]])],
        5, 3, lambda c, k, acc: arith.addf(acc, arith.mulf(c, k)))
    result = collapse(summed, [[0], [1, 2], [3], [4]])
    if bias is not None:
        result = core.elementwise([result, expand(bias, [[0, 1, 2]], [filters, 1, 1])], element, arith.addf)
    return result

