# The generated kernels' structure, pinned before their builders change: the register tile
# (rows x 16-lane accumulator vectors) over all of k, the masked last group of k, the
# (row block, column tile) tasks of scf.forall, and for attention the online softmax over
# blocks of keys. Each kernel is canonicalized first, so the checks see its ops, not how
# the builder named values. Lanes: the dot-product kernels hold 16 32-bit lanes (the
# 512-bit vpdpbusd / vdpbf16ps accumulators); attention's lane count comes from its caller.
# RUN: %PYTHON %s | FileCheck %s

from mlir import ir
from mlir.passmanager import PassManager

from tilecraft.pipelines.tensor import attention_kernel, bf16_matmul, int8_matmul
from tilecraft.pipelines.tensor.attention_kernel import AttentionShape
from tilecraft.pipelines.tensor.int8_matmul import Window


def show(label: str, source: "str | None" = None, build=None, *arguments) -> None:
    """Print the kernel (its MLIR ``source``, or the module ``build(*arguments)`` makes)
    after canonicalize and cse."""
    print("\nTEST:", label)
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(source) if source is not None else build(*arguments)
        PassManager.parse("builtin.module(canonicalize,cse)").run(module.operation)
        print(module)


# 30 x 64 by k = 5 on 2 threads: 3 row blocks of 12 (two tiles of 6 rows x 4 vectors = 24
# accumulators), 2 whole pairs of k in the loop, the fifth k alone (masked read of A).
# CHECK-LABEL: TEST: bf16
# CHECK: func.func private @tilecraft_bf16_matmul_30x64x5_t2(%[[A:.*]]: tensor<30x5xf32>, %[[W:.*]]: tensor<1x3x128xbf16>) -> tensor<30x64xf32>
# CHECK: scf.forall (%{{.*}}) in (3) shared_outs
# CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c6 iter_args
# CHECK: %{{.*}}:24 = scf.for %{{.*}} = %c0 to %c2 step %c1 iter_args
# CHECK-COUNT-4: vector.transfer_read %[[W]]{{.*}} {in_bounds = [true]} : tensor<1x3x128xbf16>, vector<32xbf16>
# CHECK: vector.transfer_read %[[A]]{{.*}} {in_bounds = [true]} : tensor<30x5xf32>, vector<2xf32>
# CHECK-NEXT: arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
# CHECK: vector.broadcast %{{.*}} : i32 to vector<16xi32>
# CHECK-COUNT-4: vector.contract {{.*}} : vector<16x2xf32>, vector<16x2xf32> into vector<16xf32>
# CHECK: scf.yield {{.*}} : vector<16xf32>
# CHECK: vector.transfer_read %[[A]][%{{.*}}, %c4], %{{.*}} : tensor<30x5xf32>, vector<2xf32>
# CHECK-COUNT-24: vector.transfer_write {{.*}} : vector<16xf32>, tensor<?x64xf32>
# CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c1 iter_args
# CHECK: %{{.*}}:4 = scf.for
# CHECK: tensor.parallel_insert_slice
# CHECK: return
show("bf16", None, bf16_matmul.kernel_module, 30, 64, 5, 2)

# A 3x3 convolution of a padded 1x6x6x8 NHWC input (16 output pixels, 32 filters) as an
# implicit GEMM: k = 72 runs as 9 taps x 4 pairs of channels, A's pair read from the 4-D
# input at each row's pixel moved by the tap (no im2col), W' as for a matmul.
# CHECK-LABEL: TEST: bf16 convolution
# CHECK: func.func private @tilecraft_bf16_matmul_16x32x72_t1_conv1x6x6x8_k3x3_s1x1_d1x1(%[[A:.*]]: tensor<1x6x6x8xf32>, %[[W:.*]]: tensor<1x36x64xbf16>) -> tensor<16x32xf32>
# CHECK: %{{.*}}:24 = scf.for %{{.*}} = %c0 to %c9 step %c1 iter_args
# CHECK: %{{.*}}:24 = scf.for %{{.*}} = %c0 to %c4 step %c1 iter_args
# CHECK-COUNT-2: vector.transfer_read %[[W]]{{.*}} {in_bounds = [true]} : tensor<1x36x64xbf16>, vector<32xbf16>
# CHECK: vector.transfer_read %[[A]][%c0, %{{.*}}, %{{.*}}, %{{.*}}], %{{.*}} {in_bounds = [true]} : tensor<1x6x6x8xf32>, vector<2xf32>
# CHECK-NEXT: arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
# CHECK-COUNT-2: vector.contract {{.*}} : vector<16x2xf32>, vector<16x2xf32> into vector<16xf32>
# CHECK-COUNT-24: vector.transfer_write {{.*}} : vector<16xf32>, tensor<16x32xf32>
# CHECK: return
show("bf16 convolution", None, bf16_matmul.kernel_module, 16, 32, 72, 1,
     Window((1, 6, 6, 8), (3, 3), (1, 1), (1, 1), 4, 4))

# u8 x s8, k = 13: 3 whole groups of 4 in the loop, the last k masked; accumulators start
# at the start values (one per padded column).
# CHECK-LABEL: TEST: int8
# CHECK: func.func private @tilecraft_int8_matmul_30x64x13_u8_t2(%[[A:.*]]: tensor<30x13xi8>, %[[B:.*]]: tensor<1x4x256xi8>, %[[S:.*]]: tensor<64xi32>) -> tensor<30x64xi32>
# CHECK: scf.forall (%{{.*}}) in (3) shared_outs
# CHECK-COUNT-4: vector.transfer_read %[[S]]{{.*}} : tensor<64xi32>, vector<16xi32>
# CHECK: scf.for %{{.*}} step %c6 iter_args
# CHECK: %{{.*}}:24 = scf.for %{{.*}} = %c0 to %c3 step %c1 iter_args
# CHECK: vector.transfer_read %[[B]]{{.*}} : tensor<1x4x256xi8>, vector<64xi8>
# CHECK-NEXT: vector.shape_cast %{{.*}} : vector<64xi8> to vector<16x4xi8>
# CHECK-NEXT: arith.extsi %{{.*}} : vector<16x4xi8> to vector<16x4xi32>
# CHECK: vector.transfer_read %[[A]]{{.*}} {in_bounds = [true]} : tensor<30x13xi8>, vector<4xi8>
# CHECK: arith.extui %{{.*}} : vector<16x4xi8> to vector<16x4xi32>
# CHECK-COUNT-4: vector.contract {{.*}} : vector<16x4xi32>, vector<16x4xi32> into vector<16xi32>
# CHECK: scf.yield {{.*}} : vector<16xi32>
# CHECK: vector.transfer_read %[[A]][%{{.*}}, %c12], %{{.*}} : tensor<30x13xi8>, vector<4xi8>
# CHECK-COUNT-24: vector.transfer_write {{.*}} : vector<16xi32>, tensor<?x64xi32>
# CHECK: tensor.parallel_insert_slice
show("int8", None, int8_matmul.kernel_module, 30, 64, 13, True, 2)

# 2 heads x 8 queries x 40 keys (blocks of 48: 3 vectors of scores per row, 8 keys masked
# to -inf), D = Dv = 16: one output vector per row, 4 rows per register tile.
# CHECK-LABEL: TEST: attention
# CHECK: func.func @attention(%[[Q:.*]]: tensor<2x8x16xf32>, %[[KT:.*]]: tensor<2x16x48xf32>, %[[V:.*]]: tensor<2x48x16xf32>) -> tensor<2x8x16xf32>
# CHECK-DAG: arith.constant dense<0xFF800000> : vector<16xf32>
# CHECK: scf.forall (%{{.*}}) in (2) shared_outs
# CHECK: scf.for
# CHECK: vector.transfer_read %[[KT]]{{.*}} : tensor<2x16x48xf32>, vector<16xf32>
# CHECK: vector.fma {{.*}} : vector<16xf32>
# The row max: compare and select, then a butterfly of shuffles (no vector.reduction).
# CHECK: arith.cmpf ogt, %{{.*}}, %{{.*}} : vector<16xf32>
# CHECK: vector.shuffle %{{.*}}, %{{.*}} [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7] : vector<16xf32>, vector<16xf32>
# CHECK: math.exp %{{.*}} : vector<16xf32>
# CHECK-NOT: vector.reduction
# CHECK: vector.transfer_read %[[V]]{{.*}} : tensor<2x48x16xf32>, vector<16xf32>
# CHECK: arith.divf
# CHECK: vector.transfer_write {{.*}} : vector<16xf32>, tensor<8x16xf32>
# CHECK: tensor.parallel_insert_slice
show("attention", None, attention_kernel.kernel_module, "attention", AttentionShape(2, 8, 40, 16, 16, (2, 8, 40)), [], 1)
