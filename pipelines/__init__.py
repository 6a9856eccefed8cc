"""Lowering pipelines: from linalg on tensors to the LLVM dialect, as editable data.

The top of this package is the pass infrastructure (passes.py, pipeline.py), the CPU
pipeline (cpu.py, stages.py), the target model the pipelines read (target.py,
target_registry.py) and the IR queries passes share; beneath it the transforms by IR level
(graph/, tensor/, buffer/, vector/), offload backends (offload/) and calling compiled code
(jit/). docs/architecture.md says why each sits where it does.
"""

from .cpu import cpu_pipeline
from .pipeline import Pipeline, Stage, run_pass_elements, split_pipeline_elements
from .target import Target

__all__ = ["Pipeline", "Stage", "Target", "cpu_pipeline", "run_pass_elements", "split_pipeline_elements"]
