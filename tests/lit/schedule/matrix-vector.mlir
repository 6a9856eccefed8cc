// A matrix-vector product (one output row: MobileNetV2's classifier, 1280 -> 1000) is planned
// by schedule/matmul_plan.py's plan_matrix_vector, not GotoBLAS's blocking: one-row register
// tiles of 32 columns (two AVX-512 vectors, four AVX2 ones), the last partial tile peeled
// (1000 = 31 x 32 + 8), no column blocks. One task: each tile walks all of K (the weight is then
// stored block-major by tile, block-constant-reads.mlir). Two tasks of 500 columns, whose
// tiles start off the tile grid: K blocks of 8 rows outside the tile loop.
// RUN: tilecraft-opt %s --tilecraft-schedule="vector-bits=512 num-threads=1" | FileCheck %s --check-prefix=ONE
// RUN: tilecraft-opt %s --tilecraft-schedule="vector-bits=256 num-threads=1" | FileCheck %s --check-prefix=AVX2
// RUN: tilecraft-opt %s --tilecraft-schedule="vector-bits=512 num-threads=2" | FileCheck %s --check-prefix=TWO

// ONE-LABEL: func.func @classifier
// ONE-NOT: scf.forall
// ONE: scf.for %{{.*}} = %c0 to %c992 step %c32
// ONE: scf.for %{{.*}} = %c0 to %c1280 step %c1
// ONE: vector.contract {{.*}} : vector<1x1xf32>, vector<1x32xf32> into vector<1x32xf32>
// ONE: scf.for %{{.*}} = %c0 to %c1280 step %c1
// ONE: vector.contract {{.*}} : vector<1x1xf32>, vector<1x8xf32> into vector<1x8xf32>

// AVX2-LABEL: func.func @classifier
// AVX2: scf.for %{{.*}} = %c0 to %c992 step %c32
// AVX2: vector.contract {{.*}} into vector<1x32xf32>
// AVX2: vector.contract {{.*}} into vector<1x8xf32>

// TWO-LABEL: func.func @classifier
// TWO: scf.forall (%{{.*}}) in (2)
// TWO: scf.for %{{.*}} = %c0 to %c1280 step %c8
// TWO-NEXT: scf.for %{{.*}} = %c0 to %c480 step %c32
// TWO: scf.for %{{.*}} = %c0 to %c8 step %c1
// TWO: vector.contract {{.*}} into vector<1x32xf32>
// TWO: vector.contract {{.*}} into vector<1x20xf32>
func.func @classifier(%a: tensor<1x1280xf32>, %b: tensor<1280x1000xf32>) -> tensor<1x1000xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x1000xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x1000xf32>) -> tensor<1x1000xf32>
  %c = linalg.matmul ins(%a, %b : tensor<1x1280xf32>, tensor<1280x1000xf32>) outs(%i : tensor<1x1000xf32>) -> tensor<1x1000xf32>
  return %c : tensor<1x1000xf32>
}
