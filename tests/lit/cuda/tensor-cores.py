# Tensor-core matmuls (schedule option tensor-cores=f16): f16 inputs, f32 accumulators. The
# block tile is split over warps, each warp's tile unrolled to 16x8x16 contractions (schedule
# stage), which convert-vector-to-gpu makes ldmatrix + mma.sync per warp (map stage), and
# NVVM mma.sync.aligned.m16n8k16 in PTX, which ptxas assembles.
# REQUIRES: ptxas
# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t sm_80 | FileCheck %s
# RUN: ptxas -arch=sm_80 %t/matmul.ptx -o %t/matmul.cubin
# RUN: %PYTHON %s %t/90 sm_90 | FileCheck %s
# RUN: ptxas -arch=sm_90 %t/90/matmul.ptx -o %t/90/matmul.cubin

import sys
from pathlib import Path

import tilecraft
from tilecraft.targets.cuda import cuda_pipeline

OUT, ARCH = Path(sys.argv[1]), sys.argv[2]
TARGET = f"cuda -arch={ARCH}"
OUT.mkdir(parents=True, exist_ok=True)

MATMUL = """
func.func @matmul(%a: tensor<256x128xf16>, %b: tensor<128x192xf16>) -> tensor<256x192xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<256x192xf32>
  %c = linalg.fill ins(%zero : f32) outs(%empty : tensor<256x192xf32>) -> tensor<256x192xf32>
  %r = linalg.matmul ins(%a, %b : tensor<256x128xf16>, tensor<128x192xf16>)
                     outs(%c : tensor<256x192xf32>) -> tensor<256x192xf32>
  return %r : tensor<256x192xf32>
}
"""

module = tilecraft.compile(MATMUL, target=TARGET,
                           pipeline=cuda_pipeline(TARGET, schedule_options="tensor-cores=f16"))

# 128x64 block tiles (2 x 3 blocks: 192 columns, 64 for a power of two of warps); K slices
# of 32 staged in shared memory, copied by all 128 threads 8 f16 at a time (linear thread
# ids); 2 x 2 warps of 64x32, each 4 x 4 x 2 contractions of the mma.sync shape per slice.
# CHECK-LABEL: TEST: schedule
# CHECK: scf.forall ({{.*}}) in (2, 3)
# CHECK: scf.for
# CHECK: scf.forall ({{.*}}) in (32, 4)
# CHECK: vector.transfer_read {{.*}} vector<4x8xf16>
# CHECK: } {mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
# CHECK: bufferization.to_tensor {{.*}} memref<128x32xf16, #gpu.address_space<workgroup>>
# CHECK: scf.forall ({{.*}}) in (16, 8)
# CHECK: bufferization.to_tensor {{.*}} memref<32x64xf16, #gpu.address_space<workgroup>>
# CHECK: scf.forall ({{.*}}) in (2, 2)
# CHECK-COUNT-32: vector.contract {{.*}} : vector<16x16xf16>, vector<16x8xf16> into vector<16x8xf32>
# CHECK: } {mapping = [#gpu.warp<linear_dim_1>, #gpu.warp<linear_dim_0>]}
# CHECK: } {mapping = [#gpu.block<y>, #gpu.block<x>]}
print("TEST: schedule")
print(module.ir("schedule"))

# After mapping: 128 threads (32 lanes x 4 warps). The shared tiles are double buffers
# (twice the rows) with rows padded by 8 f16 against bank conflicts; the accumulator
# fragments are read before the K loop and carried through it (iter_args); the first slice
# is copied before the loop, and each step copies the next one with cp.async
# (device_async_copy, committed as one group), waits for its own, and computes: A fragments
# by ldmatrix.x4, B by ldmatrix.x2.trans (B is K-major), 32 mma.sync.
# CHECK-LABEL: TEST: map
# CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c32{{.*}}, %{{.*}} = %c4{{.*}}, %{{.*}} = %c1{{.*}}) workgroup(%[[A:.*]] : memref<256x40xf16, #gpu.address_space<workgroup>>, %[[B:.*]] : memref<64x72xf16, #gpu.address_space<workgroup>>)
# CHECK: gpu.lane_id
# CHECK-COUNT-4: nvgpu.device_async_copy {{.*}}, %[[A]][{{.*}}], 8 {bypassL1}
# CHECK-COUNT-2: nvgpu.device_async_copy {{.*}}, %[[B]][{{.*}}], 8 {bypassL1}
# CHECK: nvgpu.device_async_create_group
# CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<2x2xf32>
# CHECK-COUNT-4: nvgpu.device_async_copy {{.*}}, %[[A]][{{.*}}], 8 {bypassL1}
# CHECK-COUNT-2: nvgpu.device_async_copy {{.*}}, %[[B]][{{.*}}], 8 {bypassL1}
# CHECK: nvgpu.device_async_create_group
# CHECK: nvgpu.device_async_wait {{.*}} {numGroups = 1 : i32}
# CHECK: gpu.barrier
# CHECK: nvgpu.ldmatrix %[[A]]{{.*}} {numTiles = 4 : i32, transpose = false} : memref<256x40xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
# CHECK: nvgpu.ldmatrix %[[B]]{{.*}} {numTiles = 2 : i32, transpose = true} : memref<64x72xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
# CHECK: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
# CHECK: gpu.barrier
# CHECK-NEXT: scf.yield
# CHECK: nvgpu.device_async_wait {{.*}} {numGroups = 0 : i32}
# CHECK-NOT: vector.contract
print("TEST: map")
print(module.ir("map"))

# CHECK-LABEL: TEST: ptx
# CHECK: .maxntid 32, 4, 1
# CHECK: .shared .align 16 .b8 {{.*}}[20480];
# CHECK: .shared .align 16 .b8 {{.*}}[9216];
# CHECK: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16;
# CHECK: cp.async.commit_group;
# CHECK: cp.async.wait_group 1;
# CHECK: bar.sync 0;
# CHECK: ldmatrix.sync.aligned.m8n8.x4.shared.b16
# CHECK: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
# CHECK: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
# CHECK: cp.async.wait_group 0;
# CHECK-NOT: fma.rn.f32
print("TEST: ptx")
modules = module.ptx_modules()
(OUT / "matmul.ptx").write_text(next(p for p in modules.values() if "mma.sync" in p))
print("\n".join(modules.values()))
