# A task whose result the model pads for the next convolution records where it is written
# (schedule/task.py's Placement), and the module the tuner measures writes it there: into the
# interior of a fresh tensor of the padded shape, returned, as the model's kernel writes the
# pad's interior in place (docs/tuning.md, "Faithful measurement: the kernel's destination").
# RUN: %PYTHON %s | FileCheck %s

from mlir import ir

from tilecraft.schedule.task import measured_module
from tilecraft.tuning import extract_tasks

PADDED_NEXT = """
func.func @net(%x: tensor<1x12x12x8xf32>, %w: tensor<1x1x8x24xf32>, %w2: tensor<3x3x24x16xf32>)
    -> tensor<1x12x12x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x12x12x24xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x12x12x24xf32>) -> tensor<1x12x12x24xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<1x12x12x8xf32>, tensor<1x1x8x24xf32>)
       outs(%init : tensor<1x12x12x24xf32>) -> tensor<1x12x12x24xf32>
  %p = tensor.pad %c low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x12x12x24xf32> to tensor<1x14x14x24xf32>
  %e2 = tensor.empty() : tensor<1x12x12x16xf32>
  %init2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x12x12x16xf32>) -> tensor<1x12x12x16xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%p, %w2 : tensor<1x14x14x24xf32>, tensor<3x3x24x16xf32>)
       outs(%init2 : tensor<1x12x12x16xf32>) -> tensor<1x12x12x16xf32>
  return %y : tensor<1x12x12x16xf32>
}
"""

tasks = extract_tasks(PADDED_NEXT, "llvm -mcpu=znver5")
pointwise = next(t for t in tasks if t.ranges[-1] == 8)
print(pointwise.name, pointwise.placement)
print(measured_module(pointwise.payload, ir.Context(), placement=pointwise.placement))

# CHECK: conv_2d_nhwc_hwcf_1x12x12x24x1x1x8_f32 Placement(shape=(1, 14, 14, 24), offsets=(0, 1, 1, 0), sizes=(1, 12, 12, 24))
# CHECK-LABEL: func.func @task
# CHECK-SAME: -> tensor<1x14x14x24xf32>
# CHECK: %[[CONV:.*]] = linalg.conv_2d_nhwc_hwcf
# CHECK: %[[DEST:.*]] = tensor.empty() : tensor<1x14x14x24xf32>
# CHECK: %[[PLACED:.*]] = tensor.insert_slice %[[CONV]] into %[[DEST]][0, 1, 1, 0] [1, 12, 12, 24] [1, 1, 1, 1]
# CHECK: return %[[PLACED]] : tensor<1x14x14x24xf32>
