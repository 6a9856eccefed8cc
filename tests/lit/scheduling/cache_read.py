# cache_read stages an input into a copy the reader reads (transform.structured.pad with a
# nofold flag on that operand, rewritten in destination-passing style: a linalg.copy into a
# new tensor); compute_at makes it the tile one loop iteration reads.
# RUN: %PYTHON %s | FileCheck %s

import tilecraft.scheduling as tc

A = tc.placeholder((64, 64), name="A")
B = tc.placeholder((64, 64), name="B")
k = tc.reduce_axis(64, "k")
C = tc.compute((64, 64), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")

sch = tc.Schedule(C)
blk = sch.get_block("C")
AL = sch.cache_read("A", "local", [blk])
print("--- at the root")
sch.trace()
sch.show()
i, j, k = sch.get_loops(blk)
io, jo, ii, ji = sch.tile(i, j, 16, 16)
ko, ki = sch.split(k, factor=8)
sch.reorder(io, jo, ko, ii, ki, ji)
sch.compute_at(AL, ko)
print("--- at ko")
sch.trace()
sch.show()

# CHECK-LABEL: --- at the root
# CHECK: // b1 = sch.cache_read("A", "local", [b0])
# CHECK: %[[P:[^ ,]+]], %{{.*}}, %{{.*}} = transform.structured.pad %{{.*}} {padding_values = [0.0 : f32, 0.0 : f32, 0.0 : f32], padding_dimensions = [0, 1, 2], nofold_flags = [1, 0, 0], copy_back_op = "none"}
# CHECK: %[[PAD:.*]] = transform.get_producer_of_operand %[[P]][0]
# CHECK: %[[COPY:.*]] = transform.structured.rewrite_in_destination_passing_style %[[PAD]]
# CHECK: transform.param.constant "A.local"
# CHECK: transform.annotate %[[COPY]] "tilecraft.block"
# CHECK: func.func @main
# CHECK: %[[BUF:.*]] = bufferization.alloc_tensor() : tensor<64x64xf32>
# CHECK: %[[AL:.*]] = linalg.copy {tilecraft.block = "A.local"} ins(%arg0 : tensor<64x64xf32>) outs(%[[BUF]] : tensor<64x64xf32>)
# CHECK: linalg.generic {{.*}} ins(%[[AL]], %arg1 : tensor<64x64xf32>, tensor<64x64xf32>)

# CHECK-LABEL: --- at ko
# CHECK: // sch.compute_at(b1, l9)
# CHECK: %[[T:[^ ,]+]], %{{.*}}, %{{.*}}, %{{.*}} = transform.structured.tile_using_for %{{.*}} tile_sizes [16, 16, 8]
# CHECK: transform.structured.pad %[[T]] {{.*}} nofold_flags = [1, 0, 0]
# CHECK: func.func @main
# CHECK: scf.for {{.*}} step %c16
# CHECK: scf.for {{.*}} step %c16
# CHECK: scf.for {{.*}} step %c8
# CHECK: %[[SLICE:.*]] = tensor.extract_slice %arg0[{{.*}}] [16, 8] [1, 1]
# CHECK: bufferization.alloc_tensor() : tensor<16x8xf32>
# CHECK: linalg.copy {tilecraft.block = "A.local"} ins(%[[SLICE]] : tensor<16x8xf32>)
