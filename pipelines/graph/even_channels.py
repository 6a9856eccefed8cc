"""A convolution of an odd number of input channels made even by a zero channel.

Why: the bf16 dot-product kernels (tensor/bf16_matmul.py, ``vdpbf16ps``) multiply pairs of
input channels, so a windowed convolution whose input has an odd channel count cannot take
them and stayed an f32 convolution on widened bf16 weights: a network's first layer on RGB
images (3 channels; ResNet-50's 7x7 stem is ~3 % of its multiply-adds, and ran 4-5 % of its
bf16 time in f32). One more input
channel of zeros, in the image and in the filter, leaves every sum as it was (each product
it adds is 0 * 0) and lets the convolution take the kernel: 4/3 of the multiply-adds at twice
the rate of f32's.

The zero channel costs little where the convolution's input is already a zero ``tensor.pad``
(its spatial padding, as the importer writes a padded convolution): that pad grows by one
channel, the same copy as before. Elsewhere a new pad copies the input once.

Used by ``tilecraft-bf16-weights`` (tensor/bf16_weights.py) with kernels on, for the
convolutions it is about to hand to a kernel: not a pass of its own, because in an f32 build
the extra channel is only extra work. Since round 24 only for convolutions dilated along the
width: the others (the RGB stem among them) are read by kernel rows with no channel added
(tensor/bf16_matmul.py's ``RowSpan``: fewer multiply-adds, no copy). The widening itself is tensor/zero_channels.py's, which
the int8 window kernel uses too (channels to a multiple of 4).
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import linalg

from ...ir import core
from ..ir_queries import defining_op
from ..tensor.zero_channels import widened_channels

CONVOLUTION = "linalg.conv_2d_nhwc_hwcf"


def odd_channels(op: ir.Operation) -> bool:
    """An NHWC/HWCF convolution with a window (not 1x1 stride-1: that one is a matmul of its
    pixels, and takes the kernel with any channels) whose static input has an odd number of
    channels, 3 or more. One channel stays as it is: a zero partner would double its
    multiply-adds, which the bf16 rate only pays back."""
    if op.name != CONVOLUTION or len(op.operands) != 3:
        return False
    image, filter_ = (ir.RankedTensorType(v.type) for v in op.operands[:2])
    if not (image.has_static_shape and filter_.has_static_shape):
        return False
    channels = image.shape[3]
    strides = [1, 1]
    if "strides" in op.attributes:
        strides = [int(v) for v in ir.DenseIntElementsAttr(op.attributes["strides"])]
    pointwise = filter_.shape[:2] == [1, 1] and strides == [1, 1]
    return not pointwise and channels % 2 == 1 and channels >= 3


def with_zero_channel(op: ir.Operation, weights: np.ndarray) -> tuple[ir.Operation, np.ndarray]:
    """A convolution like ``op`` (``odd_channels``) on one more input channel, of zeros in its
    input and in its filter ``weights`` (HWCF, ``op``'s filter values), inserted before ``op``
    and computing the same result; returns it and its filter's values. ``op`` itself is left
    in place: the caller replaces it (or erases the new one)."""
    with ir.InsertionPoint(op), op.location:
        image = widened_channels(op.operands[0], 2)
        padded = np.pad(weights, [(0, 0), (0, 0), (0, 1), (0, 0)])
        attributes = {name: [int(v) for v in ir.DenseIntElementsAttr(op.attributes[name])]
                      for name in ("strides", "dilations") if name in op.attributes}
        result = linalg.conv_2d_nhwc_hwcf(image, core.constant(padded, name="even_filter"),
                                          outs=[op.operands[2]], **attributes)
    return defining_op(result), padded
