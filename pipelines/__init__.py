"""Lowering pipelines: from linalg on tensors to the LLVM dialect, as editable data."""

from .cpu import cpu_pipeline
from .pipeline import Pipeline, Stage, run_pass_elements, split_pipeline_elements
from .target import Target

__all__ = ["Pipeline", "Stage", "Target", "cpu_pipeline", "run_pass_elements", "split_pipeline_elements"]
