# A saved schedule (payload + script) replays with tilecraft-opt, without Python.
# RUN: %PYTHON %s %t.mlir | FileCheck %s
# RUN: tilecraft-opt %t.mlir --transform-interpreter | FileCheck %s --check-prefix=REPLAY

import sys

import tilecraft.scheduling as tc

X = tc.placeholder((4096,), name="X")
Y = tc.compute((4096,), lambda i: tc.exp(X[i]) * 2.0, name="Y")
sch = tc.Schedule(Y)
(i,) = sch.get_loops(sch.get_block("Y"))
outer, inner = sch.split(i, nparts=4)
sch.parallel(outer)
body, lanes = sch.split(inner, factor=16)
sch.vectorize(lanes)
sch.save(sys.argv[1])
sch.show()

# CHECK: scf.forall (%{{.*}}) in (4)
# CHECK: scf.for %{{.*}} = %c0 to %c1024 step %c16
# CHECK: math.exp {{.*}} : vector<16xf32>

# REPLAY: scf.forall (%{{.*}}) in (4)
# REPLAY: scf.for %{{.*}} = %c0 to %c1024 step %c16
# REPLAY: math.exp {{.*}} : vector<16xf32>
# REPLAY: module attributes {transform.with_named_sequence}
