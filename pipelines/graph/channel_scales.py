"""``tilecraft-scale-filters-by-channel``: a convolution whose input is its producer scaled
per input channel, ``conv(x * s[c], W)``, reads ``x`` and a scaled filter instead:
``conv(x, W * s[c])``.

Why: a squeeze-and-excitation block (EfficientNet's MBConv, MobileNetV3's bneck) ends in
``x * gate[c]`` followed by the block's projection 1x1 convolution. The scale is an
elementwise op whose only consumer is a convolution, so fusion (``fusion.py``) leaves it a
kernel of its own (an elementwise producer would be recomputed per output tile of the
convolution): it reads and writes the whole expanded activation, ``C x H x W`` (EfficientNet's
144 x 56 x 56: 1.8 MB each way), for ``C x H x W`` multiplies. The convolution is linear in
each input channel, so the scale moves to the filter, ``W'[kh, kw, c, f] = W[kh, kw, c, f] *
s[c]``: ``KH x KW x C x F`` multiplies on a filter of a few kilobytes where the image is large
(144 x 24 at 56 x 56), and one pass over the activation less. Zero padding stays zero either
way (``0 * s = 0``), so padded convolutions and strides are covered too.

Rewritten only where the scaled filter is no larger than the scaled activation (``KH x KW x
F <= H x W``, per image: EfficientNet's late 7 x 7 blocks, 1152 x 320 filters on 1152 x 49
pixels, keep the activation's scale), for ``linalg.conv_2d_nhwc_hwcf`` (the layout pass's
NHWC form; grouped and depthwise convolutions have one filter per group, left alone) with
static shapes, its input the scale or a zero ``tensor.pad`` of it, one image (a per-image gate would need a filter per image), and a scale that
is a two-input ``linalg.generic`` of one ``arith.mulf`` whose one operand is read whole and
the other per channel only (map results ``d3`` or the constant 0, ``d0`` standing for the one
image), with the convolution its only user. Runs after the constant folder: batch norms and
constant per-channel scales are already folded into the filter, and the filter padded to
whole vectors of output channels (``padded_extents.py``) stays padded (its zero filters
scale to zero).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith, linalg

from ...ir import core
from ...ir.maps import indexing_maps, indexing_maps_attribute
from ..ir_queries import defined_functions, defining_op, ops_where, splat_float
from ..passes import register_pass
from .constant_folding import single_user

SCALE_FILTERS_BY_CHANNEL = "tilecraft-scale-filters-by-channel"

# Loops of the scale generic over the NHWC activation: (n, h, w, c).
_BATCH, _CHANNEL = 0, 3
# Loops of the scaled filter's generic over the HWCF filter: (kh, kw, c, f).
_FILTER_CHANNEL, _FILTER_RANK = 2, 4


def _static(value: ir.Value) -> bool:
    return isinstance(value.type, ir.RankedTensorType) and ir.RankedTensorType(value.type).has_static_shape


def _channel_exprs(affine_map: ir.AffineMap) -> list[int | None] | None:
    """For a scale operand read through ``affine_map`` over (n, h, w, c): per operand dim,
    ``_CHANNEL`` where it reads the channel and ``None`` where it is the constant 0 or the
    (single) image; ``None`` if the map reads anything else or not the channel once."""
    exprs: list[int | None] = []
    for expr in affine_map.results:
        if isinstance(expr, ir.AffineConstantExpr) and expr.value == 0:
            exprs.append(None)
        elif isinstance(expr, ir.AffineDimExpr) and expr.position in (_BATCH, _CHANNEL):
            exprs.append(_CHANNEL if expr.position == _CHANNEL else None)
        else:
            return None
    return exprs if exprs.count(_CHANNEL) == 1 else None


def _zero_pad(op: ir.Operation) -> bool:
    """Whether ``op`` is a ``tensor.pad`` of static amounts with the constant 0."""
    if op.name != "tensor.pad" or len(op.operands) != 1:
        return False
    return splat_float(list(op.regions[0].blocks[0].operations)[-1].operands[0]) == 0.0


def channel_scale(conv: ir.Operation) -> tuple[ir.Operation, ir.Value, ir.Value, list[int | None]] | None:
    """``(scale op, x, s, s's dims)`` when ``conv``'s input is ``x * s[c]``, or its zero
    padding, that may move to its filter (module docstring); ``None`` otherwise."""
    if conv.name != "linalg.conv_2d_nhwc_hwcf" or not all(_static(v) for v in (*conv.operands, *conv.results)):
        return None
    image, filters = conv.operands[0], conv.operands[1]
    consumer = conv
    pad = defining_op(image)
    if pad is not None and _zero_pad(pad):
        # conv(pad(x * s, 0)) = conv(pad(x, 0) * s): the padding stays zero.
        user = single_user(image)
        if user is None or user != conv:
            return None
        image, consumer = pad.operands[0], pad
    scale = defining_op(image)
    user = single_user(image)
    if scale is None or scale.name != "linalg.generic" or len(scale.operands) != 3 or user is None or user != consumer:
        return None
    batch, height, width, _channels = ir.RankedTensorType(image.type).shape
    kh, kw, _c, out_channels = ir.RankedTensorType(filters.type).shape
    if batch != 1 or kh * kw * out_channels > height * width:
        return None
    if any("parallel" not in str(t) for t in ir.ArrayAttr(scale.attributes["iterator_types"])):
        return None
    body = list(scale.regions[0].blocks[0].operations)
    if len(body) != 2 or body[0].name != "arith.mulf" or body[1].name != "linalg.yield":
        return None
    arguments = list(scale.regions[0].blocks[0].arguments)
    if set(body[0].operands) != set(arguments[:2]) or len(set(body[0].operands)) != 2:
        return None
    if body[1].operands[0] != body[0].result:
        return None
    maps = indexing_maps(scale)
    identity = ir.AffineMap.get_identity(4)
    for whole, part in ((0, 1), (1, 0)):
        x, s = scale.operands[whole], scale.operands[part]
        if maps[whole] != identity or maps[2] != identity or x.type != image.type:
            continue
        exprs = _channel_exprs(maps[part])
        if exprs is not None and _static(s):
            return scale, x, s, exprs
    return None


def scale_filter(conv: ir.Operation, scale: ir.Operation, x: ir.Value, s: ir.Value,
                 exprs: list[int | None]) -> None:
    """Rewrite ``conv(x * s[c], W)`` as ``conv(x, W * s[c])`` and drop the scale."""
    filters = conv.operands[1]
    filter_type = ir.RankedTensorType(filters.type)
    with ir.InsertionPoint(conv), conv.location:
        s_map = ir.AffineMap.get(_FILTER_RANK, 0, [
            ir.AffineDimExpr.get(_FILTER_CHANNEL) if e == _CHANNEL else ir.AffineConstantExpr.get(0) for e in exprs])
        init = core.empty(filter_type.shape, filter_type.element_type)
        scaled = linalg.GenericOp(
            [filter_type], [filters, s], [init],
            indexing_maps_attribute([ir.AffineMap.get_identity(_FILTER_RANK), s_map,
                                     ir.AffineMap.get_identity(_FILTER_RANK)]),
            ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * _FILTER_RANK))
        element = filter_type.element_type
        block = scaled.regions[0].blocks.append(element, ir.RankedTensorType(s.type).element_type, element)
        with ir.InsertionPoint(block):
            linalg.YieldOp([arith.MulFOp(block.arguments[0], block.arguments[1]).result])
    consumer = single_user(scale.results[0])
    consumer.operands[0] = x  # the convolution, or the pad before it
    conv.operands[1] = scaled.result
    scale.erase()


@register_pass(
    SCALE_FILTERS_BY_CHANNEL,
    "a convolution whose input is scaled per input channel (a squeeze-excite gate) scales "
    "its filter instead, where the filter is the smaller: one pass over the activation less",
)
def scale_filters_by_channel_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for function in defined_functions(module):
        for conv in ops_where(function, lambda op: op.name == "linalg.conv_2d_nhwc_hwcf"):
            found = channel_scale(conv)
            if found is not None:
                scale_filter(conv, *found)
