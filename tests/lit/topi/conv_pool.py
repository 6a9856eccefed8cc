# TOPI stages as linalg: conv2d's padding is a guarded gather (linalg.index, the bounds
# compared, a clamped tensor.extract, a select), the convolution one generic reading the
# padded tensor through strided maps; max pooling's window axes range over a window operand
# (an unread tensor.empty of the window's shape).
# RUN: %PYTHON %s | FileCheck %s

import tilecraft.scheduling as te
from tilecraft import topi

x = te.placeholder((1, 2, 6, 6), name="x")
w = te.placeholder((4, 2, 3, 3), name="w")
y = topi.nn.conv2d(x, w, strides=2, padding=1, dilation=1)
p = topi.nn.pool2d(y, kernel=2, stride=1, dilation=1, padding=(0, 0, 0, 0), pool_type="max")
print(te.create_func([x, w, p]))

# CHECK-DAG: #[[CONV_IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, d2 * 2 + d5, d3 * 2 + d6)>
# CHECK-DAG: #[[WINDOW:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>
# CHECK: func.func @main(%[[X:.*]]: tensor<1x2x6x6xf32> {tilecraft.name = "x"}, %{{.*}}: tensor<4x2x3x3xf32> {tilecraft.name = "w"}) -> tensor<1x4x2x2xf32>
# CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<1x2x8x8xf32>) attrs = {tilecraft.block = "pad_temp"
# CHECK: linalg.index 2
# CHECK: arith.cmpi sge
# CHECK: arith.andi
# CHECK: arith.maxsi
# CHECK: tensor.extract %[[X]]
# CHECK: arith.select
# CHECK: linalg.fill {tilecraft.block = "conv2d_nchw.init"}
# CHECK: linalg.generic {indexing_maps = [#[[CONV_IN]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
# CHECK-SAME: tilecraft.block = "conv2d_nchw"
# CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<2x2xf32>
# CHECK: linalg.fill {tilecraft.block = "pool_max.init"} ins(%cst{{.*}} : f32)
# CHECK: linalg.generic {indexing_maps = [#{{[a-z0-9]+}}, #[[WINDOW]], #{{[a-z0-9]+}}]
# CHECK-SAME: ins(%{{.*}}, %[[EMPTY]] : tensor<1x4x3x3xf32>, tensor<2x2xf32>) {{.*}}tilecraft.block = "pool_max"
# CHECK: arith.maximumf
