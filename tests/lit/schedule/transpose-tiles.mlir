// Transposes get a register tile with a vector along each of the two loops (schedule/plan.py
// ``transposed_read_dim``), power-of-two sides (``_transpose_tile``): 197 tokens take 16-row
// tiles on AVX-512 (8 on AVX2) with the last, partial tile of 5 peeled, both vectorized as
// whole-vector reads and a vector.transpose (tilecraft-transpose-shuffles lowers it); no
// 1-wide tile (197 is prime) and no scalar loop. On two threads the tasks split the
// 768 columns, which the tiles divide, never the peeled loop.
// RUN: tilecraft-opt %s --tilecraft-schedule="vector-bits=512 num-threads=1" | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-schedule="vector-bits=256 num-threads=2" | FileCheck %s --check-prefix=AVX2

// CHECK-LABEL: func.func @tokens
// CHECK: scf.for %{{.*}} = %c0 to %c192 step %c16
// CHECK: vector.transfer_read {{.*}} : tensor<768x197xf32>, vector<16x16xf32>
// CHECK: vector.transpose %{{.*}}, [1, 0] : vector<16x16xf32> to vector<16x16xf32>
// CHECK: vector.transfer_read %{{.*}}[%{{.*}}, %c192], {{.*}} : tensor<768x197xf32>, vector<16x5xf32>
// CHECK: vector.transpose %{{.*}}, [1, 0] : vector<16x5xf32> to vector<5x16xf32>
// CHECK-NOT: linalg.transpose
// CHECK: return
// AVX2-LABEL: func.func @tokens
// AVX2: scf.forall (%{{.*}}) in (8)
// AVX2: scf.for %{{.*}} = %c0 to %c192 step %c8 {{.*}} -> (tensor<197x96xf32>)
// AVX2: vector.transpose %{{.*}}, [1, 0] : vector<8x8xf32> to vector<8x8xf32>
// AVX2: vector.transpose %{{.*}}, [1, 0] : vector<8x5xf32> to vector<5x8xf32>
// AVX2-NOT: linalg.transpose
// AVX2: return
func.func @tokens(%x: tensor<768x197xf32>) -> tensor<197x768xf32> {
  %e = tensor.empty() : tensor<197x768xf32>
  %t = linalg.transpose ins(%x : tensor<768x197xf32>) outs(%e : tensor<197x768xf32>) permutation = [1, 0]
  return %t : tensor<197x768xf32>
}
