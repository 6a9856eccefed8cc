# The TVM workflow: primitives, the trace (a transform script) and the loops it makes.
# RUN: %PYTHON %s | FileCheck %s

import tilecraft.scheduling as tc

A = tc.placeholder((64, 64), name="A")
B = tc.placeholder((64, 64), name="B")
k = tc.reduce_axis(64, "k")
C = tc.compute((64, 64), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")

sch = tc.Schedule(C)
blk = sch.get_block("C")
i, j, k = sch.get_loops(blk)
io, jo, ii, ji = sch.tile(i, j, 32, 32)
ko, ki = sch.split(k, factor=4)
sch.reorder(io, jo, ko, ii, ki, ji)
sch.vectorize(ji)
sch.parallel(io)
sch.unroll(ki)
print(sch.get_loops(blk))
sch.trace()
sch.show()

# CHECK: [LoopRV('i_0', extent=2, parallel), LoopRV('j_0', extent=2), LoopRV('k_0', extent=16), LoopRV('i_1', extent=32), LoopRV('k_1', extent=4, unrolled), LoopRV('j_1', extent=32, vectorized)]

# The header is the trace of primitive calls, TVM style.
# CHECK:      // tilecraft schedule of @main
# CHECK-NEXT: // b0 = sch.get_block("C")
# CHECK-NEXT: // l1, l2, l3 = sch.get_loops(b0)
# CHECK-NEXT: // l4, l5, l6, l7 = sch.tile(l1, l2, 32, 32)
# CHECK-NEXT: // l8, l9 = sch.split(l3, factor=4)
# CHECK-NEXT: // sch.reorder(l4, l5, l8, l6, l9, l7)
# CHECK-NEXT: // sch.vectorize(l7)
# CHECK-NEXT: // sch.parallel(l4)
# CHECK-NEXT: // sch.unroll(l9)

# One named sequence: tiling outside-in, then vectorize and unroll innermost-first.
# CHECK: transform.named_sequence @__transform_main
# CHECK: %[[C:.*]] = transform.structured.match attributes{tilecraft.block = "C"} in %root
# CHECK: %[[T1:[^ ,]+]], %{{.*}} = transform.structured.tile_using_forall %[[C]] tile_sizes [32, 0, 0]
# CHECK: %[[T2:[^ ,]+]], %{{.*}}, %{{.*}}, %{{.*}} = transform.structured.tile_using_for %[[T1]] tile_sizes [1, 32, 4] interchange = [1, 2, 0]
# CHECK: %[[T3:[^ ,]+]], %[[KI:[^ ,]+]] = transform.structured.tile_using_for %[[T2]] tile_sizes [0, 0, 1]
# CHECK: transform.structured.vectorize %[[T3]]
# CHECK: transform.loop.unroll %[[KI]] {factor = 4}
# CHECK: transform.include @cleanup

# The loops: a parallel forall over row blocks, serial j/k blocks, rows, 4 unrolled
# multiply-adds on 32-lane vectors.
# CHECK-LABEL: func.func @main
# CHECK: scf.forall (%{{.*}}) in (2)
# CHECK: scf.for %{{.*}} = %c0 to %c64 step %c32
# CHECK: scf.for %{{.*}} = %c0 to %c64 step %c4
# CHECK: scf.for %{{.*}} = %c0 to %c32 step %c1
# CHECK-COUNT-4: vector.contract {{.*}} : vector<1x1xf32>, vector<1x32xf32> into vector<1x32xf32>
# CHECK-NOT: linalg.generic
