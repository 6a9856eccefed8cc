"""The ATen op table (``table.ATEN_OPS``), filled by the handler modules, one per family."""

from . import bilinear, distance, elementwise, float_bits, linalg, masked, nn, reduction, scatter, selection, shape, views  # noqa: F401  (their decorators fill the table)
from . import fft  # noqa: F401  (complex tensors and the FFT family)
from .table import ATEN_OPS

__all__ = ["ATEN_OPS"]
