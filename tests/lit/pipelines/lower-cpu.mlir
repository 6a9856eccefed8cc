// The whole CPU pipeline, as one named pipeline, ends in the LLVM dialect with 512-bit
// vector arithmetic (whole zmm registers: 16 or 2 x 16 f32) and the parallel runtime's flat
// parallel-for (one call per loop, the call's begin and end marked; no async tasks).
// RUN: tilecraft-opt %s --tilecraft-lower-cpu="num-threads=2" | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-lower-cpu="num-threads=1" | FileCheck %s --check-prefix=SERIAL
// RUN: tilecraft-opt %s --tilecraft-lower-cpu="cpu=skylake-avx512 features=+avx512f num-threads=1" | FileCheck %s --check-prefix=TARGET

// CHECK-LABEL: llvm.func @matmul_bias_relu(
// CHECK: llvm.call @tilecraftParallelCallBegin()
// CHECK: llvm.call @tilecraftParallelFor(
// CHECK: llvm.call @tilecraftParallelCallEnd()
// CHECK: llvm.func @_mlir_ciface_matmul_bias_relu
// CHECK: llvm.func @parallel_compute_fn
// CHECK: llvm.intr.fmuladd({{.*}}) : (vector<{{16|32}}xf32>
// CHECK-NOT: llvm.call @mlirAsyncRuntime
// Nothing above the LLVM dialect survives.
// RUN: tilecraft-opt %s --tilecraft-lower-cpu | FileCheck %s --check-prefix=LOWERED
// LOWERED-NOT: {{(linalg|tensor|memref|vector|scf|affine|bufferization|async)\.[a-z]}}

// SERIAL-LABEL: llvm.func @matmul_bias_relu
// SERIAL-NOT: mlirAsyncRuntime

// TARGET: llvm.func @matmul_bias_relu({{.*}}) {{.*}}target_cpu = "skylake-avx512"
// TARGET-SAME: target_features = #llvm.target_features<["+avx512f"]>

func.func @matmul_bias_relu(%a: tensor<128x64xf32>, %b: tensor<64x128xf32>, %bias: tensor<128xf32>) -> tensor<128x128xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<128x128xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<128x128xf32>) -> tensor<128x128xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<128x64xf32>, tensor<64x128xf32>) outs(%init : tensor<128x128xf32>) -> tensor<128x128xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<128x128xf32>, tensor<128xf32>) outs(%empty : tensor<128x128xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %s = arith.addf %x, %y : f32
    %m = arith.maximumf %s, %zero : f32
    linalg.yield %m : f32
  } -> tensor<128x128xf32>
  return %r : tensor<128x128xf32>
}
