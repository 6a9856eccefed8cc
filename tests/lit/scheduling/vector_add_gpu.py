# examples/tutorials/vector_add_gpu.py (TVM's vector add on the GPU): split + bind, the mapped
# foralls, one kernel's PTX (sm_80 and sm_90), a cubin from ptxas; no GPU here, so compile-only.
# REQUIRES: ptxas
# RUN: %PYTHON %S/../../../examples/tutorials/vector_add_gpu.py --n 4096 --ptx-lines 12 | FileCheck %s
# RUN: %PYTHON %S/../../../examples/tutorials/vector_add_gpu.py --n 4096 --threads 128 --arch sm_90 --ptx-lines 12 | FileCheck %s --check-prefix=SM90

# CHECK: sch.bind(l2, "blockIdx.x")
# CHECK: sch.bind(l3, "threadIdx.x")
# CHECK: tile_using_forall {{.*}} tile_sizes [64] (mapping = [#gpu.block<x>])
# CHECK: tile_using_forall {{.*}} tile_sizes [1] (mapping = [#gpu.thread<x>])
# CHECK: func.func @main
# CHECK: scf.forall (%{{.*}}) in (64)
# CHECK: scf.forall (%{{.*}}) in (64)
# CHECK: arith.addf
# CHECK: {mapping = [#gpu.thread<x>]}
# CHECK: {mapping = [#gpu.block<x>]}
# CHECK: .target sm_80
# CHECK: .visible .entry main_kernel(
# CHECK: PTX lines; cubin: yes)
# CHECK: {{no GPU \(CUDA driver\) here: compiled only, not run|vector add on the GPU: OK}}

# SM90: tile_sizes [128] (mapping = [#gpu.block<x>])
# SM90: scf.forall (%{{.*}}) in (32)
# SM90: .target sm_90
# SM90: cubin: yes
