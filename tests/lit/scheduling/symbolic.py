# Symbolic shapes: te.var dims are `?` in the signature, the arguments name their symbols,
# and a split of a symbolic loop tiles it with clamped bounds (ceildiv trip count, affine.min).
# RUN: %PYTHON %s | FileCheck %s

import tilecraft.scheduling as te

n = te.var("n")
A = te.placeholder((n, 64), name="A")
B = te.placeholder((n, 64), name="B")
C = te.compute((n, 64), lambda i, j: A[i, j] + B[i, j], name="C")

sch = te.Schedule(C)
i, j = sch.get_loops(sch.get_block("C"))
io, ii = sch.split(i, factor=16)
print(io, ii)
sch.trace()
sch.show()

# CHECK: LoopRV('i_0', extent=ceildiv(n, 16)) LoopRV('i_1', extent=16)
# CHECK: // symbolic extents: n = A.shape[0] (checked at every call)
# CHECK: // l{{[0-9]+}}, l{{[0-9]+}} = sch.split(l{{[0-9]+}}, factor=16)
# CHECK: transform.structured.tile_using_for %{{.*}} tile_sizes [16, 0]
# CHECK: func.func @main(%{{.*}}: tensor<?x64xf32> {tilecraft.name = "A", tilecraft.symbols = ["n", ""]}, %{{.*}}: tensor<?x64xf32> {{.*}}) -> tensor<?x64xf32>
# CHECK: %[[N:.*]] = tensor.dim %{{.*}}, %c0 : tensor<?x64xf32>
# CHECK: tensor.empty(%[[N]]) : tensor<?x64xf32>
# CHECK: scf.for %[[I:.*]] = %c0 to %[[N]] step %c16
# CHECK: affine.min {{.*}}(%[[I]])[%[[N]]]
# CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<?x64xf32>)
