"""The C target (``target="c"``): portable C99 through MLIR's EmitC dialect, with every
intermediate buffer planned into one workspace (workspace.py). See docs/c-target.md."""

from .lowering import LIBM_FUNCTIONS, c_pipeline

__all__ = ["LIBM_FUNCTIONS", "c_pipeline"]
