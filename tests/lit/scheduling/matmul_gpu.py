# examples/tutorials/matmul_gpu.py: i/j split by 16, bound to blockIdx.y/x and threadIdx.y/x in
# one forall each, the init decomposed into the thread loops; one kernel (PTX + cubin); the
# scheduled program checked on the CPU; no GPU here, so the kernel is compiled only.
# REQUIRES: ptxas
# RUN: %PYTHON %S/../../../examples/tutorials/matmul_gpu.py --size 64 --ptx-lines 10 | FileCheck %s

# CHECK: sch.bind(l4, "blockIdx.y")
# CHECK: sch.bind(l7, "threadIdx.x")
# CHECK: b8 = sch.decompose_reduction(b0, l3)
# CHECK: scf.forall (%{{.*}}, %{{.*}}) in (4, 4)
# CHECK: scf.forall (%{{.*}}, %{{.*}}) in (16, 16)
# CHECK: linalg.fill
# CHECK: scf.for
# CHECK: {mapping = [#gpu.thread<y>, #gpu.thread<x>]}
# CHECK: {mapping = [#gpu.block<y>, #gpu.block<x>]}
# CHECK: .target sm_80
# CHECK: 1 kernel; cubin: yes)
# CHECK: scheduled program on the CPU: OK
# CHECK: {{no GPU \(CUDA driver\) here: the kernel was compiled only, not run|matmul on the GPU: OK}}
