# A user's grouped convolution in its own layout (NHWGC input, KKGCF filter, NHWGF output,
# written in TE) as the auto-scheduler's window-inside form (schedule/te/window_conv.py): a
# loop over the groups of one linalg.conv_2d_nhwc_hwcf each, on rank-reducing views of the
# user's tensors, accumulating into the group's slice of the result, zero-filled in the loop
# (the compute's fill moved onto the slice). The
# schedule then gives each group's convolution the convolution kernel: a register tile of
# output pixels x the group's 16 filters whose accumulators stay in registers across the 3x3
# taps and the group's channels (the window loops inside the register tile; the taps form
# read and wrote the whole output once per tap).
# RUN: %PYTHON %s | FileCheck %s
# RUN: %PYTHON %s | tilecraft-opt - --tilecraft-mark-groups --tilecraft-schedule="vector-bits=256 num-threads=1 fuse-groups=1" | FileCheck %s --check-prefix=SCHED

from mlir import ir, passmanager

from tilecraft.schedule import te
from tilecraft.schedule.te.window_conv import rewrite_window_convs

# CHECK-LABEL: func.func @main
# CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<1x10x10x4x16xf32>
# CHECK: scf.for %[[G:.*]] = %c0 to %c4 step %c1 iter_args(%[[ACC:.*]] = %[[EMPTY]]) -> (tensor<1x10x10x4x16xf32>)
# CHECK: %[[SLICE:.*]] = tensor.extract_slice %[[ACC]][0, 0, 0, %[[G]], 0] [1, 10, 10, 1, 16] [1, 1, 1, 1, 1] : tensor<1x10x10x4x16xf32> to tensor<1x10x10x16xf32>
# CHECK: %[[OUT:.*]] = linalg.fill {{.*}} outs(%[[SLICE]] : tensor<1x10x10x16xf32>)
# CHECK: %[[X:.*]] = tensor.extract_slice %{{.*}}[0, 0, 0, %[[G]], 0] [1, 12, 12, 1, 8] [1, 1, 1, 1, 1] : tensor<1x12x12x4x8xf32> to tensor<1x12x12x8xf32>
# CHECK: %[[W:.*]] = tensor.extract_slice %{{.*}}[0, 0, %[[G]], 0, 0] [3, 3, 1, 8, 16] [1, 1, 1, 1, 1] : tensor<3x3x4x8x16xf32> to tensor<3x3x8x16xf32>
# CHECK: %[[Y:.*]] = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%[[X]], %[[W]] : {{.*}}) outs(%[[OUT]] : tensor<1x10x10x16xf32>)
# CHECK: %[[NEXT:.*]] = tensor.insert_slice %[[Y]] into %[[ACC]][0, 0, 0, %[[G]], 0] [1, 10, 10, 1, 16]
# CHECK: scf.yield %[[NEXT]]
# CHECK-NOT: linalg.generic

# SCHED-LABEL: func.func @main
# SCHED: scf.for %[[G:.*]] = %c0 to %c4
# SCHED: scf.for {{.*}} to %c10 step %c5
# SCHED: %[[ACC:.*]] = vector.transfer_read {{.*}} vector<1x5x16xf32>
# SCHED: scf.for {{.*}} to %c3 {{.*}} = %[[ACC]]) -> ({{.*}}vector<1x5x16xf32>)
# SCHED: scf.for {{.*}} to %c3 {{.*}} -> ({{.*}}vector<1x5x16xf32>)
# SCHED: scf.for {{.*}} to %c8 step %c1 {{.*}} -> ({{.*}}vector<1x5x16xf32>)
# SCHED: vector.transfer_read %arg0[{{.*}}, %[[G]], {{.*}}]{{.*}}vector<1x5x1xf32>
# SCHED: vector.transfer_read %arg1[{{.*}}, %[[G]], {{.*}}]{{.*}}vector<1x1x16xf32>
# SCHED: vector.contract {{.*}} into vector<1x5x16xf32>
# SCHED: vector.transfer_write {{.*}} vector<1x5x16xf32>
# SCHED-NOT: linalg.conv
# SCHED-NOT: linalg.generic

with ir.Context() as context:
    x = te.placeholder((1, 12, 12, 4, 8), name="x", dtype="float32")
    w = te.placeholder((3, 3, 4, 8, 16), name="w", dtype="float32")
    rc, ry, rx = te.reduce_axis(8, "rc"), te.reduce_axis(3, "ry"), te.reduce_axis(3, "rx")
    y = te.compute((1, 10, 10, 4, 16), lambda n, i, j, g, f: te.sum(
        x[n, i + ry, j + rx, g, rc] * w[ry, rx, g, rc, f], axis=[ry, rx, rc]), name="y")
    module = te.create_func([x, w, y], context=context)
    passmanager.PassManager.parse("builtin.module(func.func(linalg-specialize-generic-ops))").run(module.operation)
    assert rewrite_window_convs(module) == 1
    print(module)
