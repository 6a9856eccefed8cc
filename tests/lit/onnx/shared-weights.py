# A weight several nodes read is one constant, packed once. The exporter writes a weight
# shared by several layers (ALBERT applies one layer's weights 12 times) as one initializer
# and Identity nodes naming it; the importer used to materialize one dense_resource blob per
# reader, and the graph stage then packed each into panels of its own (12 copies of the
# layer in ALBERT's library). Now: one constant at import, one folded panel constant after
# the graph stage, read by all three matmuls.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np
from mlir import ir
from onnx import TensorProto, helper, numpy_helper

from tilecraft.dialects import graph
from tilecraft.frontend.loader import load_module
from tilecraft.frontend.onnx import import_model
from tilecraft.pipelines.graph import graph_pass_elements
from tilecraft.pipelines.pipeline import run_pass_elements


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


def tied_model():
    """x @ w, then @ w again through an Identity alias, then @ w once more (by name)."""
    w = numpy_helper.from_array(np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096, "w")
    nodes = [helper.make_node("Identity", ["w"], ["w_alias"]),
             helper.make_node("MatMul", ["x", "w"], ["h1"]),
             helper.make_node("MatMul", ["h1", "w_alias"], ["h2"]),
             helper.make_node("MatMul", ["h2", "w"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


# CHECK-LABEL: TEST: imported
# CHECK: %[[W:.*]] = arith.constant dense_resource<w> : tensor<64x64xf32>
# CHECK-NOT: dense_resource
# CHECK: linalg.matmul ins(%arg0, %[[W]] :
# CHECK: linalg.matmul ins(%{{.*}}, %[[W]] :
# CHECK: linalg.matmul ins(%{{.*}}, %[[W]] :
@run
def imported():
    print(import_model(tied_model()))


# The graph stage at opt_level 3: the three panel packings are one (cse before the folder),
# evaluated into one constant.
# CHECK-LABEL: TEST: graph_stage
# CHECK: %[[PANELS:.*]] = arith.constant dense_resource<{{.*}}> : tensor<4x64x16xf32>
# CHECK-NOT: dense_resource
# CHECK: linalg.generic {{.*}} ins(%arg0, %[[PANELS]] :
# CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[PANELS]] :
# CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[PANELS]] :
@run
def graph_stage():
    context = ir.Context()
    graph.load(context)
    module = load_module(tied_model(), context)
    with context:
        run_pass_elements(module, graph_pass_elements(3, lanes=16))
    print(module)
