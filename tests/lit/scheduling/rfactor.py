# rfactor: the split reduction of upstream's transform dialect. rfactor(ki) keeps ki.extent
# partial sums over a serial loop (tile_reduction_using_for); rfactor(ko) computes ko.extent
# partial sums in parallel (tile_reduction_using_forall); the block then reduces them.
# RUN: %PYTHON %s | FileCheck %s

import tilecraft.scheduling as tc


def row_sum():
    A = tc.placeholder((32, 256), name="A")
    k = tc.reduce_axis(256, "k")
    return tc.compute((32,), lambda i: tc.sum(A[i, k], axis=k), name="S")


for which in ("ki", "ko"):
    sch = tc.Schedule(row_sum())
    blk = sch.get_block("S")
    i, k = sch.get_loops(blk)
    ko, ki = sch.split(k, factor=16)
    rf = sch.rfactor(ki if which == "ki" else ko)
    print(f"--- rfactor({which})", rf)
    sch.trace()
    sch.show()

# CHECK-LABEL: --- rfactor(ki) BlockRV('S.rf')
# CHECK: // b5 = sch.rfactor(l4)
# CHECK: %[[INIT:[^ ,]+]], %[[RF:[^ ,]+]], %[[COMB:[^ ,]+]], %{{.*}} = transform.structured.tile_reduction_using_for %{{.*}} by tile_sizes = [0, 16]
# CHECK: "S.rf.init"
# CHECK: "S.rf"
# CHECK: transform.annotate %[[COMB]] "tilecraft.block"
# CHECK: func.func @main
# CHECK: linalg.fill {tilecraft.block = "S.rf.init"} {{.*}} -> tensor<32x16xf32>
# CHECK: scf.for %{{.*}} = %c0 to %c256 step %c16
# CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]{{.*}} outs(%{{.*}} : tensor<32x16xf32>) attrs = {tilecraft.block = "S.rf"}
# CHECK: linalg.reduce ins(%{{.*}} : tensor<32x16xf32>) outs(%{{.*}} : tensor<32xf32>) dimensions = [1] {tilecraft.block = "S"}

# CHECK-LABEL: --- rfactor(ko) BlockRV('S.rf')
# CHECK: transform.structured.tile_reduction_using_forall %{{.*}} by num_threads = [0, 16]
# CHECK: func.func @main
# CHECK: scf.forall (%{{.*}}) in (16) shared_outs(%{{.*}} = %{{.*}}) -> (tensor<32x16xf32>)
# CHECK: tensor.extract_slice %arg0[0, %{{.*}}] [32, 16] [1, 1]
# CHECK: tilecraft.block = "S.rf"
# CHECK: tensor.parallel_insert_slice
# CHECK: linalg.reduce ins(%{{.*}} : tensor<32x16xf32>) outs(%{{.*}} : tensor<32xf32>) dimensions = [1] {tilecraft.block = "S"}
