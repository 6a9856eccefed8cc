"""The ATen op table (``table.ATEN_OPS``), filled by the handler modules, one per family."""

from . import bilinear, distance, elementwise, float_bits, linalg, masked, nn, reduction, scatter, selection, shape, views  # noqa: F401  (their decorators fill the table)
from . import fft  # noqa: F401  (complex tensors and the FFT family)
from . import random  # noqa: F401  (random sampling: PyTorch's kernels at call time)
from . import fractional_pool  # noqa: F401  (fractional max pooling given its samples)
from . import incomplete_gamma  # noqa: F401  (igamma, igammac)
from . import histogram  # noqa: F401  (histogram, histogramdd)
from . import embedding_bag  # noqa: F401  (nn.functional.embedding_bag)
from . import antialias, resize  # noqa: F401  (antialiased bilinear upsampling, resize_)
from . import hashing  # noqa: F401  (hash_tensor)
from . import recurrent  # noqa: F401  (lstm, gru, rnn_tanh, rnn_relu: one time loop each)
from .table import ATEN_OPS

__all__ = ["ATEN_OPS"]
