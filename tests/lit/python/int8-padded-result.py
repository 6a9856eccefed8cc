# An int8 (VNNI) convolution kernel that writes into the padded input of the next 3x3
# convolution (pipelines/tensor/kernel_destinations.py's PaddedResult, which the bf16 kernels
# share): it takes the padded tensor as its last argument and returns it; each task's tile is
# the slice [1, image rows, OW, columns] of the interior, each row r of a register tile stored
# at (r / OW, r % OW) of it, and the tile goes back to the same place. Canonicalized first, so
# the checks see the ops, not how the builder named values.
# RUN: %PYTHON %s | FileCheck %s

from mlir import ir
from mlir.passmanager import PassManager

from tilecraft.pipelines.tensor import int8_matmul
from tilecraft.pipelines.tensor.int8_matmul import Window
from tilecraft.pipelines.tensor.kernel_destinations import PaddedResult


def show(label: str, build, *arguments, **options) -> None:
    print("\nTEST:", label)
    with ir.Context(), ir.Location.unknown():
        module = build(*arguments, **options)
        PassManager.parse("builtin.module(canonicalize,cse)").run(module.operation)
        print(module)


# A 3x3 convolution of a 1x6x6x4 padded input (16 output pixels, 4x4) into 16 channels, on one
# thread: one task of all four output rows (its scf.forall folds away), register tiles of six
# rows, the last four rows one at a time.
# CHECK-LABEL: TEST: int8 into
# CHECK: func.func private @tilecraft_int8_matmul_16x16x36_u8_t1_conv1x6x6x4_k3x3_s1x1_d1x1_into1x6x6x16_at0x1x1x0(
# CHECK-SAME: %[[A:[^:]*]]: tensor<1x6x6x4xi8>, %{{[^:]*}}: tensor<1x9x64xi8>, %{{[^:]*}}: tensor<16xi32>, %[[DEST:[^:]*]]: tensor<1x6x6x16xi32>) -> tensor<1x6x6x16xi32>
# CHECK-NOT: tensor.empty
# CHECK: %[[TILE:.*]] = tensor.extract_slice %[[DEST]][0, 1, 1, 0] [1, 4, 4, 16] [1, 1, 1, 1] : tensor<1x6x6x16xi32> to tensor<1x4x4x16xi32>
# CHECK: vector.contract
# The first register tile (12 rows) folds to straight-line stores: its rows r at (r / 4, r % 4).
# CHECK: %[[W0:.*]] = vector.transfer_write %{{.*}}, %[[TILE]][%c0, %c0, %c0, %c0] {in_bounds = [true]} : vector<16xi32>, tensor<1x4x4x16xi32>
# CHECK-NEXT: vector.transfer_write %{{.*}}, %[[W0]][%c0, %c0, %c1, %c0]
# CHECK-NEXT: vector.transfer_write %{{.*}}[%c0, %c0, %c2, %c0]
# CHECK-NEXT: vector.transfer_write %{{.*}}[%c0, %c0, %c3, %c0]
# CHECK-NEXT: vector.transfer_write %{{.*}}[%c0, %c1, %c0, %c0]
# The last four rows one at a time, each at its (row / 4, row % 4).
# CHECK: scf.for %{{.*}} = %c12 to %c16 step %c1
# CHECK: vector.transfer_write %{{.*}}[%c0, %{{.*}}, %{{.*}}, %c0] {in_bounds = [true]} : vector<16xi32>, tensor<1x4x4x16xi32>
# CHECK: %[[BACK:.*]] = tensor.insert_slice %{{.*}} into %[[DEST]][0, 1, 1, 0] [1, 4, 4, 16] [1, 1, 1, 1] : tensor<1x4x4x16xi32> into tensor<1x6x6x16xi32>
# CHECK: return %[[BACK]] : tensor<1x6x6x16xi32>
window = Window((1, 6, 6, 4), (3, 3), (1, 1), (1, 1), 4, 4)
show("int8 into", int8_matmul.kernel_module, window.rows, 16, window.depth, True, 1, None, None, window,
     into=PaddedResult((1, 6, 6, 16), (0, 1, 1, 0), (1, 4, 4)))
