# The IR the ONNX importer writes for control flow and small types.
# RUN: %PYTHON %s | FileCheck %s

from onnx import TensorProto, helper

from tilecraft.frontend.onnx import import_model


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


def model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    proto.ir_version = 10
    return proto


# A runtime condition: one scf.if whose result joins [2,3] and [4,3] into [?,3].
# CHECK-LABEL: TEST: if_of_different_shapes
# CHECK: %[[C:.*]] = tensor.extract %arg0[] : tensor<i1>
# CHECK: scf.if %[[C]] -> (tensor<?x3xf32>)
# CHECK: tensor.cast {{.*}} : tensor<2x3xf32> to tensor<?x3xf32>
# CHECK: scf.yield
# CHECK: } else {
# CHECK: tensor.concat
# CHECK: tensor.cast {{.*}} : tensor<4x3xf32> to tensor<?x3xf32>
@run
def if_of_different_shapes():
    then = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])])
    other = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["e"], axis=0)], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [4, 3])])
    print(import_model(model(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
    )))


# Scan: one scf.for over the scan axis, the state and the stacked output loop-carried.
# CHECK-LABEL: TEST: scan_is_a_loop
# CHECK: %[[N:.*]] = arith.constant 7 : index
# CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[N]] step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<4xf32>, tensor<7x4xf32>)
# CHECK: tensor.extract_slice %arg1[%[[I]], 0] [1, 4] [1, 1]
# CHECK: tensor.insert_slice {{.*}}[%[[I]], 0] [1, 4] [1, 1]
# CHECK: scf.yield
# CHECK-NOT: scf.for
@run
def scan_is_a_loop():
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["s2"], ["y"])], "body",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("s", "x")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("s2", "y")],
    )
    print(import_model(model(
        [helper.make_node("Scan", ["s0", "xs"], ["sum", "ys"], body=body, num_scan_inputs=1)],
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("xs", TensorProto.FLOAT, [7, 4])],
        [helper.make_tensor_value_info("sum", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, [7, 4])],
    )))


# float8: the element type stays f8E4M3FN; the conversion is integer code through f32, with
# round-to-nearest-even (math.roundeven), no arith.truncf/extf on f8.
# CHECK-LABEL: TEST: cast_to_float8
# CHECK: func.func @main(%arg0: tensor<5xf32> {{.*}}) -> tensor<5xf8E4M3FN>
# CHECK-NOT: arith.truncf
# CHECK: math.roundeven
# CHECK: arith.trunci {{.*}} : i32 to i8
# CHECK: arith.bitcast {{.*}} : i8 to f8E4M3FN
@run
def cast_to_float8():
    print(import_model(model(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [5])],
    )))


# int4 travels as i8 named by tilecraft.dtype; the input is sign-extended from its low bits.
# CHECK-LABEL: TEST: int4_boundary
# CHECK: func.func @main(%arg0: tensor<3xi8> {tilecraft.dtype = "int4", tilecraft.name = "x"}) -> tensor<3xf32>
# CHECK: arith.shli
# CHECK: arith.shrsi
# CHECK: arith.sitofp {{.*}} : i{{[0-9]+}} to f32
@run
def int4_boundary():
    print(import_model(model(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
        [helper.make_tensor_value_info("x", TensorProto.INT4, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )))

