"""ONNX operator handlers, one module per family; importing them fills the registry."""

from . import (  # noqa: F401
    elementwise,
    nn,
    quantization,
    reduction,
    shape,
)
