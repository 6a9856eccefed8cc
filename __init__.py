"""tilecraft: a machine-learning compiler on upstream MLIR.

    import numpy as np, tilecraft
    module = tilecraft.compile(open("model.mlir").read(), target="llvm")
    y = module(x, w)          # numpy in, numpy out; arguments checked first
    print(module.ir("schedule"))

See docs/architecture.md for how a model travels from file to machine code.
"""

from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    CompileError,
    EntryPointError,
    PipelineError,
    TargetError,
    TilecraftError,
)
from .pipelines.compiler import compile
from .pipelines.cpu import cpu_pipeline
from .pipelines.pipeline import Pipeline, Stage
from .pipelines.target import Target
from .runtime.compiled_module import CompiledModule

__version__ = "0.1.0"

__all__ = [
    "ArgumentTypeError", "ArgumentValueError", "CompileError", "CompiledModule", "EntryPointError",
    "Pipeline", "PipelineError", "Stage", "Target", "TargetError", "TilecraftError",
    "compile", "cpu_pipeline",
]
