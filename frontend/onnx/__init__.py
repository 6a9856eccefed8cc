"""ONNX frontend: ``import_model(path_or_proto, shape_dict=None)`` -> MLIR module.

The op handlers (``ops/``) register themselves in ``registry.py`` when imported; importing
them here, once, fills the table before anything looks an op up (the registry itself imports
no handler module, so the two do not import each other).
"""

from . import ops  # noqa: F401  (fills the registry)
from .importer import import_model
from .registry import supported_op_types

__all__ = ["import_model", "supported_op_types"]
