# A Gather with run-time indices checks them once, before its loop: a min and a max
# reduction over the index tensor, one comparison, one marker call; the gather loop (here
# the parallel body) keeps its clamped read and calls nothing. Lowered, the marker is an
# scf.if that reports, never a cf.assert.
# RUN: %PYTHON %s | FileCheck %s

from mlir import ir
from onnx import TensorProto, helper

import tilecraft
from tilecraft.pipelines.pipeline import run_pass_elements

graph = helper.make_graph(
    [helper.make_node("Gather", ["data", "idx"], ["y"], name="g")], "m",
    [helper.make_tensor_value_info("data", TensorProto.FLOAT, [5, 3]),
     helper.make_tensor_value_info("idx", TensorProto.INT64, ["n"])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])
compiled = tilecraft.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                             target=tilecraft.Target(num_threads=2))

# CHECK-LABEL: func.func @main
# CHECK: scf.for
# CHECK: arith.minsi
# CHECK: scf.for
# CHECK: arith.maxsi
# CHECK: %[[OK:.*]] = arith.xori
# CHECK: call @tilecraft_runtime_check(%[[OK]], {{.*}}) {tilecraft.check_kind = "index", tilecraft.check_message = "index {value} out of range for axis 0 of size {bound}"}
# CHECK: call @tilecraftParallelFor(
# CHECK-LABEL: func.func private @parallel_compute_fn
# CHECK-NOT: call
# CHECK: arith.minsi
# CHECK: memref.load %{{[0-9]+}}[{{.*}}] : memref<5x3xf32>
# CHECK: return
print(compiled.ir("vector"))

# CHECK-LABEL: LOWERED
# CHECK: func.func @main
# CHECK: scf.if %{{.*}} {
# CHECK-NEXT: arith.constant 0 : i64
# CHECK-NEXT: func.call @tilecraft_check_failed
# CHECK-NOT: cf.assert %{{.*}}, "{{.*}}range
print("LOWERED")
with ir.Context():
    module = ir.Module.parse(compiled.ir("vector"))
    run_pass_elements(module, ["tilecraft-lower-runtime-checks"])
    print(module)
