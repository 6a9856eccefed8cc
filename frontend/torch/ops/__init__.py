"""The ATen op table (``table.ATEN_OPS``), filled by the handler modules, one per family."""

from . import elementwise, linalg, nn, reduction, scatter, shape, views  # noqa: F401  (their decorators fill the table)
from . import fft  # noqa: F401  (complex tensors and the FFT family)
from .table import ATEN_OPS

__all__ = ["ATEN_OPS"]
