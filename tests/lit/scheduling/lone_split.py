# What the user sees after each primitive is what the script does: a lone split, its loops
# still in the op's dim order, is a real loop in the script and in show() at once.
# RUN: %PYTHON %s | FileCheck %s

import tilecraft.scheduling as tc

A = tc.placeholder((64, 64), name="A")
B = tc.placeholder((64, 64), name="B")
k = tc.reduce_axis(64, "k")
C = tc.compute((64, 64), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")

sch = tc.Schedule(C)
i, j, k = sch.get_loops(sch.get_block("C"))
io, ii = sch.split(i, factor=16)
print("--- after split")
sch.trace()
sch.show()
ko, ki = sch.split(k, factor=4)
print("--- after the second split")
sch.trace()
sch.show()

# CHECK-LABEL: --- after split
# CHECK: // l4, l5 = sch.split(l1, factor=16)
# CHECK: transform.structured.tile_using_for %{{.*}} tile_sizes [16, 0, 0]
# CHECK: func.func @main
# CHECK: scf.for %{{.*}} = %c0 to %c64 step %c16
# CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<16x64xf32>)
# CHECK-NOT: scf.for
# CHECK-LABEL: --- after the second split
# CHECK: // l6, l7 = sch.split(l3, factor=4)
# CHECK: transform.structured.tile_using_for %{{.*}} tile_sizes [16, 0, 0]
# CHECK: transform.structured.tile_using_for %{{.*}} tile_sizes [1, 1, 4]
# CHECK: func.func @main
# CHECK: scf.for %{{.*}} = %c0 to %c64 step %c16
# CHECK: scf.for %{{.*}} = %c0 to %c16 step %c1
# CHECK: scf.for %{{.*}} = %c0 to %c64 step %c1
# CHECK: scf.for %{{.*}} = %c0 to %c64 step %c4
# CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<1x1xf32>)
