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
from .compute import Tensor, broadcast_binary, compute, create_func, einsum, graph_flops, placeholder
from .errors import ScheduleError
from .expr import (
    CommReducer,
    IterVar,
    abs,
    all,
    any,
    cast,
    ceil,
    comm_reducer,
    const,
    equal,
    erf,
    exp,
    floor,
    if_then_else,
    log,
    logical_and,
    logical_not,
    logical_or,
    max,
    maximum,
    min,
    minimum,
    not_equal,
    prod,
    reduce_axis,
    select,
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
    "BlockRV", "CommReducer", "IterVar", "LoopRV", "Schedule", "ScheduleError", "SymExtent", "Tensor",
    "TensorIntrin", "Var", "abs", "all", "any", "broadcast_binary", "build", "cast", "ceil", "comm_reducer",
    "compile_c", "compute", "const", "create_func", "einsum", "equal", "erf", "exp", "floor", "graph_flops",
    "if_then_else", "log", "logical_and", "logical_not", "logical_or", "lookup_intrinsic", "max", "maximum",
    "min", "minimum", "not_equal", "placeholder", "prod", "reduce_axis", "register_intrinsic",
    "registered_intrinsics", "scheduled_pipeline", "select", "sigmoid", "sqrt", "sum", "tanh",
    "unregister_intrinsic", "var",
]
