// A recurrent step computes its new state into a fresh tensor: the yield writes it into the
// iter_arg's destination first, so one-shot bufferization keeps one state buffer (no
// allocs-from-loops) and copies the new state over the old one after the step's reads.
// RUN: tilecraft-opt %s --tilecraft-loop-carried-in-place | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-loop-carried-in-place --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --canonicalize | FileCheck %s --check-prefix=BUF

// CHECK-LABEL: func.func @step
// CHECK: scf.for {{.*}} iter_args(%[[H:.*]] = %{{.*}}, %[[KEEP:.*]] = %{{.*}})
// CHECK: %[[NEW:.*]] = linalg.generic
// CHECK: %[[M:.*]] = bufferization.materialize_in_destination %[[NEW]] in %[[H]]
// CHECK: scf.yield %[[M]], %[[KEEP]]

// BUF-LABEL: func.func @step
// BUF-SAME: (%[[X:.*]]: memref<4xf32>, %[[H:.*]]: memref<4xf32>,
// BUF: scf.for
// BUF-NEXT: %[[A:.*]] = memref.alloc
// BUF-NEXT: linalg.generic {{.*}} ins(%[[X]], %[[H]] : {{.*}}) outs(%[[A]] : {{.*}})
// BUF: memref.copy %[[A]], %[[H]]
// BUF-NEXT: }
// BUF-NEXT: return %[[H]]
func.func @step(%x: tensor<4xf32>, %h0: tensor<4xf32>, %k: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %r:2 = scf.for %i = %c0 to %c5 step %c1 iter_args(%h = %h0, %keep = %k) -> (tensor<4xf32>, tensor<4xf32>) {
    %e = tensor.empty() : tensor<4xf32>
    %n = linalg.generic {indexing_maps = [affine_map<(d) -> (d)>, affine_map<(d) -> (3 - d)>, affine_map<(d) -> (d)>],
        iterator_types = ["parallel"]} ins(%x, %h : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
      ^bb0(%a: f32, %b: f32, %o: f32):
        %s = arith.addf %a, %b : f32
        linalg.yield %s : f32
    } -> tensor<4xf32>
    scf.yield %n, %keep : tensor<4xf32>, tensor<4xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}
