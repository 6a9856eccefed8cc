# The exact GELU's f32 erf after the vector stage: the tail above |x| = 1.5 is a polynomial
# in |x| - 2.75 evaluated with FMAs, so a vector of GELU holds no exp and no division (the
# former tail's exp(-x^2) Q(1/|x|) cost about half of a GELU; ir/elementwise.py _ErfTable).
# Both branches are computed and the lane picks one by |x| < 1.5; the result is copysign'ed.
# RUN: %PYTHON %s | FileCheck %s
# RUN: %PYTHON %s | FileCheck %s --check-prefix=OPS

from mlir import ir
from mlir.dialects import func

import tilecraft
from tilecraft.ir import core, elementwise

with ir.Context(), ir.Location.unknown():
    module = ir.Module.create()
    f32 = ir.F32Type.get()
    tensor = ir.RankedTensorType.get([1024], f32)
    with ir.InsertionPoint(module.body):
        main = func.FuncOp("main", ir.FunctionType.get([tensor], [tensor]))
        with ir.InsertionPoint(main.add_entry_block()):
            func.ReturnOp([core.elementwise([main.arguments[0]], f32, elementwise.gelu)])
    source = str(module)

print(tilecraft.compile(source).ir("vector"))
# No exp and no division anywhere in the function (the former tail had both):
# CHECK-LABEL: func.func @main
# CHECK-NOT: {{math.exp|arith.divf}}
# CHECK: return

# The tail's FMAs, the branch choice by |x| < 1.5 and the sign:
# OPS-LABEL: func.func @main
# OPS: math.absf %{{.*}} : vector<{{[0-9]+}}xf32>
# OPS: math.fma %{{.*}} : vector<{{[0-9]+}}xf32>
# OPS: arith.cmpf olt
# OPS: arith.select
# OPS: math.copysign
