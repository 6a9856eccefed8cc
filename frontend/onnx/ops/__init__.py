"""ONNX operator handlers, one module per family; importing them fills the registry."""

from . import (  # noqa: F401
    control_flow,
    elementwise,
    generators,
    ml,
    nn,
    quantization,
    recurrent,
    reduction,
    resizing,
    scatter,
    sequence,
    shape,
    spectral,
)
