# examples/tutorials/schedule_primitives.py (TVM's schedule primitive gallery): the loops each
# primitive makes, and every entry built and checked against numpy (bind: its PTX).
# RUN: %PYTHON %S/../../../examples/tutorials/schedule_primitives.py | FileCheck %s

# CHECK-LABEL: == split_factor
# CHECK: scf.for %{{.*}} = %c0 to %c1024 step %c8
# CHECK-NEXT: linalg.generic  // block B
# CHECK: numerics vs numpy: OK

# CHECK-LABEL: == split_nparts
# CHECK: scf.for %{{.*}} = %c0 to %c1024 step %c256
# CHECK: numerics vs numpy: OK

# CHECK-LABEL: == tile
# CHECK: scf.for %{{.*}} = %c0 to %c40 step %c10
# CHECK-NEXT: scf.for %{{.*}} = %c0 to %c30 step %c5
# CHECK-NEXT: linalg.generic  // block B
# CHECK: numerics vs numpy: OK

# CHECK-LABEL: == fuse
# CHECK: l7 = sch.fuse(l5, l6)
# CHECK: scf.for %{{.*}} = %c0 to %c50 step %c1
# CHECK: numerics vs numpy: OK

# CHECK-LABEL: == reorder
# CHECK: scf.for %{{.*}} = %c0 to %c30 step %c5
# CHECK-NEXT: scf.for %{{.*}} = %c0 to %c40 step %c10
# CHECK: numerics vs numpy: OK

# CHECK-LABEL: == bind
# CHECK: scf.forall (%{{.*}}) in (16)
# CHECK-NEXT: scf.forall (%{{.*}}) in (64)
# CHECK: %ctaid.x, threadIdx.x -> %tid.x: OK

# CHECK-LABEL: == compute_at
# CHECK: scf.for %{{.*}} = %c0 to %c40 step %c1
# CHECK-NEXT: linalg.generic  // block B
# CHECK: linalg.generic  // block C
# CHECK: numerics vs numpy: OK

# CHECK-LABEL: == compute_inline
# CHECK-NOT: block B
# CHECK: numerics vs numpy: OK

# CHECK-LABEL: == compute_root
# CHECK: sch.compute_root(b3)
# CHECK-NEXT: {{^  }}linalg.generic  // block B
# CHECK: {{^  }}linalg.generic  // block C
# CHECK: numerics vs numpy: OK
