# The forms ir/conv.py gives convolutions that the named NHWC convolutions tile
# badly: a grouped one as a loop over its groups of one NHWC convolution each, a 1x1 one
# whose output row has no 4-8 pixel register tile and whose filters have no two-vector tile
# (or whose rows are 1-3 pixels) as one matmul of pixels.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tilecraft.frontend.onnx import import_model


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


def conv_model(x_shape, w_shape, **attributes):
    w = numpy_helper.from_array(np.ones(w_shape, np.float32), "w")
    out = [x_shape[0], w_shape[0], None, None]
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], **attributes)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# 32 channels in 2 groups of 16, 3x3, stride 2, 64x64 padded to 66x66: the input once in
# NHWC, the filter packed once as (G, KH, KW, Cg, Fg), and parallel bands of output rows (4
# of the 32: their 9 input rows of 66 x 32 floats fit _BAND_INPUT_BYTES), in each a loop over
# the groups: the group's channel slice of the band's input rows convolved by its filter into its
# slice of the NHWC result (in place).
# CHECK-LABEL: TEST: grouped_per_group
# CHECK: linalg.transpose {{.*}} permutation = [0, 2, 3, 1]
# CHECK: tensor.expand_shape {{.*}} into tensor<2x16x16x3x3xf32>
# CHECK: linalg.transpose {{.*}} permutation = [0, 3, 4, 2, 1]
# CHECK: scf.forall (%{{.*}}) in (8) shared_outs(%[[SHARED:.*]] = %{{.*}}) -> (tensor<1x32x32x32xf32>)
# CHECK: %[[BAND:.*]] = tensor.extract_slice %[[SHARED]][0, %{{.*}}, 0, 0] [1, 4, 32, 32]
# CHECK: %[[BANDY:.*]] = scf.for %[[G:.*]] = %{{.*}} to %c2{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[BAND]]) -> (tensor<1x4x32x32xf32>)
# CHECK: tensor.extract_slice {{.*}}[0, %{{.*}}, 0, %{{.*}}] [1, 9, 66, 16] [1, 1, 1, 1] : tensor<1x66x66x32xf32> to tensor<1x9x66x16xf32>
# CHECK: tensor.extract_slice {{.*}}[%[[G]], 0, 0, 0, 0] [1, 3, 3, 16, 16] {{.*}} to tensor<3x3x16x16xf32>
# CHECK: %[[OUT:.*]] = tensor.extract_slice %[[ACC]][0, 0, 0, %{{.*}}] [1, 4, 32, 16]
# CHECK: %[[ZERO:.*]] = linalg.fill {{.*}} outs(%[[OUT]] : tensor<1x4x32x16xf32>)
# CHECK: %[[Y:.*]] = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} {{.*}} outs(%[[ZERO]] : tensor<1x4x32x16xf32>)
# CHECK: tensor.insert_slice %[[Y]] into %[[ACC]][0, 0, 0, %{{.*}}] [1, 4, 32, 16]
# CHECK: tensor.parallel_insert_slice %[[BANDY]] into %[[SHARED]][0, %{{.*}}, 0, 0] [1, 4, 32, 32]
# CHECK: linalg.transpose {{.*}} permutation = [0, 3, 1, 2]
# CHECK-NOT: conv_2d_ngchw_gfchw
@run
def grouped_per_group():
    print(import_model(conv_model([1, 32, 64, 64], [32, 16, 3, 3], group=2, strides=[2, 2], pads=[1, 1, 1, 1])))


# 4 channels per group, dilation 2: the same loop (the named op takes the dilation).
# CHECK-LABEL: TEST: few_channels_per_group
# CHECK: scf.for
# CHECK: linalg.conv_2d_nhwc_hwcf {dilations = dense<2> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} {{.*}} -> tensor<1x8x8x4xf32>
# CHECK-NOT: conv_2d_ngchw_gfchw
@run
def few_channels_per_group():
    print(import_model(conv_model([1, 16, 8, 8], [16, 4, 3, 3], group=4, pads=[2, 2, 2, 2], dilations=[2, 2])))


# 2 channels and filters per group: groups merged by 4 into groups of 8 (ir/conv.py,
# _block_diagonal), so each group's convolution has a whole 8-lane vector of filters.
# CHECK-LABEL: TEST: two_channels_per_group
# CHECK: scf.for %{{.*}} = %c0 to %c2
# CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<3x3x8x8xf32>{{.*}} -> tensor<1x8x8x8xf32>
# CHECK-NOT: conv_2d_ngchw_gfchw
@run
def two_channels_per_group():
    print(import_model(conv_model([1, 16, 8, 8], [16, 2, 3, 3], group=8, pads=[1, 1, 1, 1])))


# A 1x1 conv over 13x13 pixels into 40 filters (padding them to 48 would add a fifth): one
# matmul of the 169 NHWC pixels by the (C, F) filter.
# CHECK-LABEL: TEST: pointwise_odd_row
# CHECK: linalg.transpose {{.*}} permutation = [0, 2, 3, 1]
# CHECK: tensor.collapse_shape {{.*}} into tensor<169x64xf32>
# CHECK: linalg.matmul ins({{.*}} : tensor<169x64xf32>, tensor<64x40xf32>)
# CHECK: tensor.expand_shape {{.*}} into tensor<1x13x13x40xf32>
# CHECK: linalg.transpose {{.*}} permutation = [0, 3, 1, 2]
@run
def pointwise_odd_row():
    print(import_model(conv_model([1, 64, 13, 13], [40, 64, 1, 1])))


# SqueezeNet's classifier shape: 1000 filters over 13x13 pixels are computed as 1008 (whole
# two-vector tiles; zero filters padded onto the constant) by a named convolution, and the
# 1000 channels sliced off its result.
# CHECK-LABEL: TEST: pointwise_padded_filters
# CHECK: tensor.pad {{.*}} low[0, 0, 0, 0] high[8, 0, 0, 0]
# CHECK: tensor<1008x64x1x1xf32>
# CHECK: linalg.conv_2d_nchw_fchw {{.*}} -> tensor<1x1008x13x13xf32>
# CHECK: tensor.extract_slice {{.*}}[0, 0, 0, 0] [1, 1000, 13, 13] [1, 1, 1, 1] : tensor<1x1008x13x13xf32> to tensor<1x1000x13x13xf32>
# CHECK-NOT: linalg.matmul
@run
def pointwise_padded_filters():
    print(import_model(conv_model([1, 64, 13, 13], [1000, 64, 1, 1])))


# At 14x14 (7-pixel tiles) the 1x1 conv stays a named convolution.
# CHECK-LABEL: TEST: pointwise_even_row
# CHECK: linalg.conv_2d_nchw_fchw
# CHECK-NOT: linalg.matmul
@run
def pointwise_even_row():
    print(import_model(conv_model([1, 64, 14, 14], [100, 64, 1, 1])))


# A 1x1 conv over 13x13 pixels into 64 filters (SqueezeNet's squeeze and expand layers): a
# named convolution, whose register tile peels the row's last pixel tile, so that its result
# needs no reshape and a concat or pad it feeds is its destination.
# CHECK-LABEL: TEST: pointwise_odd_row_vector_pairs
# CHECK: linalg.conv_2d_nchw_fchw {{.*}} -> tensor<1x64x13x13xf32>
# CHECK-NOT: linalg.matmul
@run
def pointwise_odd_row_vector_pairs():
    print(import_model(conv_model([1, 48, 13, 13], [64, 48, 1, 1])))


# A 1x1 conv on a pooled 1x1 image (squeeze-excite's): a one-row matmul whatever its filters.
# CHECK-LABEL: TEST: pointwise_single_pixel
# CHECK: linalg.matmul ins({{.*}} : tensor<1x96xf32>, tensor<96x32xf32>)
# CHECK-NOT: linalg.conv_2d
@run
def pointwise_single_pixel():
    print(import_model(conv_model([1, 96, 1, 1], [32, 96, 1, 1])))
