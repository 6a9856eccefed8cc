"""tilecraft: a machine-learning compiler on upstream MLIR.

    import numpy as np, tilecraft
    module = tilecraft.compile("model.onnx", target="llvm")   # or MLIR text / a Module
    y = module(x)             # numpy in, numpy out; arguments checked first
    print(module.ir("schedule"))

    # TVM-style operator definition and scheduling (docs/scheduling.md)
    A, B = tilecraft.placeholder((M, K), name="A"), tilecraft.placeholder((K, N), name="B")

See docs/architecture.md for how a model travels from file to machine code.
"""

from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    CompileError,
    EntryPointError,
    ModelImportError,
    PipelineError,
    TargetError,
    TilecraftError,
)
from .pipelines.compiler import compile
from .pipelines.cpu import cpu_pipeline
from .pipelines.pipeline import Pipeline, Stage
from .pipelines.target import Target
from .runtime.compiled_module import CompiledModule
from .scheduling import Schedule, ScheduleError, build, compute, placeholder, reduce_axis

# The operator-definition vocabulary as `tc.sum(...)`, `tc.exp(...)` (TVM's `te.sum`); kept
# out of __all__ because `from tilecraft import *` would shadow Python's sum/max/min/abs.
from .scheduling import (  # noqa: F401
    abs, einsum, exp, if_then_else, log, max, maximum, min, minimum, prod, sigmoid, sqrt, sum, tanh,
)

__version__ = "0.1.0"

__all__ = [
    "ArgumentTypeError", "ArgumentValueError", "CompileError", "CompiledModule", "EntryPointError", "ModelImportError",
    "Pipeline", "PipelineError", "Schedule", "ScheduleError", "Stage", "Target", "TargetError",
    "TilecraftError", "build", "compile", "compute", "cpu_pipeline", "placeholder", "reduce_axis",
]
