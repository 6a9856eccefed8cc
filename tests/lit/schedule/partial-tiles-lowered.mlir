// A peeled matmul row tile through the whole CPU pipeline to the LLVM dialect, for an AVX2
// CPU (16 vector registers) and an AVX-512 one (32; compiled, not run): 100 rows are 16
// tiles of 6 rows and a 4-row remainder on AVX2, 12 tiles of 8 rows and a 4-row remainder
// on AVX-512. Both parts are vector FMAs (one per row of the tile per k step), none scalar.
// RUN: tilecraft-opt %s --tilecraft-lower-cpu="cpu=haswell num-threads=1" | FileCheck %s --check-prefix=AVX2
// RUN: tilecraft-opt %s --tilecraft-lower-cpu="cpu=sapphirerapids num-threads=1" | FileCheck %s --check-prefix=AVX512

// AVX2-LABEL: llvm.func @rows_100
// AVX2-COUNT-6: llvm.intr.fmuladd({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// AVX2-NOT: llvm.intr.fmuladd({{.*}}) : (f32, f32, f32)
// AVX2-COUNT-4: llvm.intr.fmuladd({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// AVX2-NOT: llvm.intr.fmuladd
// AVX512-LABEL: llvm.func @rows_100
// AVX512-COUNT-8: llvm.intr.fmuladd({{.*}}) : (vector<32xf32>, vector<32xf32>, vector<32xf32>) -> vector<32xf32>
// AVX512-NOT: llvm.intr.fmuladd({{.*}}) : (f32, f32, f32)
// AVX512-COUNT-4: llvm.intr.fmuladd({{.*}}) : (vector<32xf32>, vector<32xf32>, vector<32xf32>) -> vector<32xf32>
// AVX512-NOT: llvm.intr.fmuladd
func.func @rows_100(%a: tensor<100x64xf32>, %b: tensor<64x64xf32>) -> tensor<100x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<100x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<100x64xf32>) -> tensor<100x64xf32>
  %c = linalg.matmul ins(%a, %b : tensor<100x64xf32>, tensor<64x64xf32>) outs(%init : tensor<100x64xf32>) -> tensor<100x64xf32>
  return %c : tensor<100x64xf32>
}
