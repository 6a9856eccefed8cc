// tilecraft-bf16-weights (precision="bf16"): large f32 constants read by contractions become
// bf16 constants widened by arith.extf where they are read; with kernels=1 a plain matmul with a
// zero-filled accumulator becomes a call of a bf16 dot-product kernel (weights packed at
// compile time), whose dot products tilecraft-bf16-dot-products makes vdpbf16ps.
// RUN: tilecraft-opt %s --tilecraft-bf16-weights | FileCheck %s --check-prefix=WIDE
// RUN: tilecraft-opt %s --tilecraft-bf16-weights="kernels=1 num-threads=2" | FileCheck %s --check-prefix=KERNEL
// RUN: tilecraft-opt %s --tilecraft-bf16-weights="kernels=1" --tilecraft-bf16-dot-products | FileCheck %s --check-prefix=DOTS
// RUN: not tilecraft-opt %s --tilecraft-bf16-weights="kernels=2" 2>&1 | FileCheck %s --check-prefix=BAD

// WIDE-LABEL: func.func @dense
// WIDE: %[[W:.*]] = arith.constant dense_resource<{{.*}}> : tensor<8x16xbf16>
// WIDE: %[[F:.*]] = linalg.generic {{.*}} ins(%[[W]] : tensor<8x16xbf16>)
// WIDE: arith.extf %{{.*}} : bf16 to f32
// WIDE: linalg.matmul ins(%arg0, %[[F]] : tensor<4x8xf32>, tensor<8x16xf32>)
// WIDE-NOT: tensor<8x16xf32> = arith.constant

// KERNEL-LABEL: func.func @dense
// KERNEL: %[[P:.*]] = arith.constant dense_resource<{{.*}}> : tensor<1x4x32xbf16>
// KERNEL: call @tilecraft_bf16_matmul_4x16x8_t2(%arg0, %[[P]]) {{.*}}: (tensor<4x8xf32>, tensor<1x4x32xbf16>) -> tensor<4x16xf32>
// KERNEL-NOT: linalg.matmul
// KERNEL-LABEL: func.func private @tilecraft_bf16_matmul_4x16x8_t2
// KERNEL: scf.forall
// KERNEL: arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// KERNEL: vector.contract {{.*}} : vector<16x2xf32>, vector<16x2xf32> into vector<16xf32>
// KERNEL: tensor.parallel_insert_slice

// DOTS-LABEL: func.func private @tilecraft_bf16_matmul_4x16x8_t1
// DOTS-NOT: vector.contract
// DOTS: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%{{.*}}) : (vector<16xf32>, vector<32xbf16>, vector<32xbf16>) -> vector<16xf32>

// BAD: kernels must be 0 or 1
func.func @dense(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense_resource<weights> : tensor<8x16xf32>
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

{-#
  dialect_resources: {
    builtin: {
      weights: "0x04000000000080C200007CC2000078C2000074C2000070C200006CC2000068C2000064C2000060C200005CC2000058C2000054C2000050C200004CC2000048C2000044C2000040C200003CC2000038C2000034C2000030C200002CC2000028C2000024C2000020C200001CC2000018C2000014C2000010C200000CC2000008C2000004C2000000C20000F8C10000F0C10000E8C10000E0C10000D8C10000D0C10000C8C10000C0C10000B8C10000B0C10000A8C10000A0C1000098C1000090C1000088C1000080C1000070C1000060C1000050C1000040C1000030C1000020C1000010C1000000C10000E0C00000C0C00000A0C0000080C0000040C0000000C0000080BF000000000000803F0000004000004040000080400000A0400000C0400000E0400000004100001041000020410000304100004041000050410000604100007041000080410000884100009041000098410000A0410000A8410000B0410000B8410000C0410000C8410000D0410000D8410000E0410000E8410000F0410000F84100000042000004420000084200000C4200001042000014420000184200001C4200002042000024420000284200002C4200003042000034420000384200003C4200004042000044420000484200004C4200005042000054420000584200005C4200006042000064420000684200006C4200007042000074420000784200007C42"
    }
  }
#-}
