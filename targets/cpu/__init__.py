"""The CPU target (``target="llvm ..."``): its plugin (plugin.py). See pipelines/target.py
for the CPU model and docs/architecture.md for where its pipeline, JIT and packages live."""

from ...pipelines.target_registry import register_target
from .plugin import CpuTarget

register_target(CpuTarget())

__all__ = ["CpuTarget"]
