"""Operator definition and schedule primitives: TVM's TE/TensorIR workflow on MLIR.

    from tilecraft.schedule.te import placeholder, reduce_axis, compute, sum, Schedule, build

    A = placeholder((M, K), name="A"); B = placeholder((K, N), name="B")   # M = var("M"): symbolic
    k = reduce_axis(K, name="k")
    C = compute((M, N), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = Schedule(C)
    i, j, k = sch.get_loops(sch.get_block("C"))
    ...                                   # split, reorder, vectorize, parallel, ...
    sch.tensorize(loop, "gemv")           # a registered intrinsic (register_intrinsic)
    sch.trace(); sch.show()               # the transform script; the loops it makes
    f = build(sch, target="llvm")         # callable with numpy arrays

Each primitive emits transform-dialect ops (see docs/scheduling.md).
"""

from .builder import build, scheduled_pipeline
from .compute import Tensor, compute, create_func, einsum, placeholder
from .errors import ScheduleError
from .expr import (
    IterVar,
    abs,
    exp,
    if_then_else,
    log,
    max,
    maximum,
    min,
    minimum,
    prod,
    reduce_axis,
    sigmoid,
    sqrt,
    sum,
    tanh,
)
from .intrinsics import (
    TensorIntrin,
    compile_c,
    lookup_intrinsic,
    register_intrinsic,
    registered_intrinsics,
    unregister_intrinsic,
)
from .schedule import Schedule
from .state import BlockRV, LoopRV
from .symbolic import SymExtent, Var, var

__all__ = [
    "BlockRV", "IterVar", "LoopRV", "Schedule", "ScheduleError", "SymExtent", "Tensor", "TensorIntrin",
    "Var", "abs", "build", "compile_c", "compute", "create_func", "einsum", "exp", "if_then_else",
    "log", "lookup_intrinsic", "max", "maximum", "min", "minimum", "placeholder", "prod",
    "reduce_axis", "register_intrinsic", "registered_intrinsics", "scheduled_pipeline", "sigmoid",
    "sqrt", "sum", "tanh", "unregister_intrinsic", "var",
]
