"""The C target (``target="c"``): portable C99 through MLIR's EmitC dialect, with every
intermediate buffer planned into one workspace (workspace.py), packed as sources
(package.py), cross-built and measured with zig cc (cross.py), behind its plugin
(plugin.py). See docs/c-target.md."""

from ...pipelines.target_registry import register_target
from .lowering import LIBM_FUNCTIONS, c_pipeline
from .plugin import CTarget

register_target(CTarget())

__all__ = ["LIBM_FUNCTIONS", "c_pipeline"]
