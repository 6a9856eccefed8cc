# DynamicQuantizeLinear as its own op (frontend/onnx/ops/quantization.py): the minimum and
# the maximum in one linalg.generic with two outputs, so the input is read once for both
# (and once more to quantize it), not three times as the op's ONNX function body reads it.
# RUN: %PYTHON %s | FileCheck %s

from onnx import TensorProto, helper

from tilecraft.frontend.onnx import import_model


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


def dql_model(shape):
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zero_point"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, shape),
                               helper.make_tensor_value_info("scale", TensorProto.FLOAT, []),
                               helper.make_tensor_value_info("zero_point", TensorProto.UINT8, [])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


# 128 x 768 (a BERT-base activation): viewed as rows of 64 lanes, min and max of every lane in
# one pass (vertical min/max in vector registers), the 64 lanes reduced after; then the
# scale and zero point in one 0-d op, and one elementwise pass for y (clamped with
# maxnumf/minnumf, so that a NaN gives 0, not an undefined conversion).
# CHECK-LABEL: TEST: two_step
# CHECK: %[[FLAT:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1]] : tensor<128x768xf32> into tensor<98304xf32>
# CHECK: %[[ROWS:.*]] = tensor.expand_shape %[[FLAT]] {{.*}} into tensor<1536x64xf32>
# CHECK: %[[LANES:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[ROWS]] : tensor<1536x64xf32>) outs({{.*}} : tensor<64xf32>, tensor<64xf32>)
# CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %[[LOW:.*]]: f32, %[[HIGH:.*]]: f32):
# CHECK-NEXT: arith.minimumf %[[LOW]], %[[IN]]
# CHECK-NEXT: arith.maximumf %[[HIGH]], %[[IN]]
# CHECK: %[[RANGE:.*]]:2 = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[LANES]]#0, %[[LANES]]#1 : tensor<64xf32>, tensor<64xf32>) outs({{.*}} : tensor<f32>, tensor<f32>)
# CHECK: %[[PARAMS:.*]]:2 = linalg.generic {{.*}} iterator_types = []} ins(%[[RANGE]]#0, %[[RANGE]]#1 : tensor<f32>, tensor<f32>) outs({{.*}} : tensor<f32>, tensor<i8>)
# CHECK: arith.minnumf
# CHECK: arith.maxnumf
# CHECK: math.roundeven
# CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%arg0, %[[PARAMS]]#0, %[[PARAMS]]#1 : tensor<128x768xf32>, tensor<f32>, tensor<i8>) outs({{.*}} : tensor<128x768xi8>)
# CHECK: arith.divf
# CHECK: math.roundeven
# CHECK: arith.maxnumf
# CHECK: arith.minnumf
# CHECK: return %[[Y]], %[[PARAMS]]#0, %[[PARAMS]]#1
# CHECK-NOT: linalg.generic
@run
def two_step():
    print(import_model(dql_model([128, 768])))


# 2 x 3 (not a multiple of 64 values): one generic reduces everything to the two scalars.
# CHECK-LABEL: TEST: one_step
# CHECK-NOT: tensor.expand_shape
# CHECK: %[[RANGE:.*]]:2 = linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%arg0 : tensor<2x3xf32>) outs({{.*}} : tensor<f32>, tensor<f32>)
# CHECK: linalg.generic {{.*}} ins(%[[RANGE]]#0, %[[RANGE]]#1 : tensor<f32>, tensor<f32>)
# CHECK: linalg.generic {{.*}} ins(%arg0, {{.*}} : tensor<2x3xf32>, tensor<f32>, tensor<i8>) outs({{.*}} : tensor<2x3xi8>)
@run
def one_step():
    print(import_model(dql_model([2, 3])))
