"""ONNX frontend: ``import_model(path_or_proto, shape_dict=None)`` -> MLIR module."""

from .importer import import_model
from .registry import supported_op_types

__all__ = ["import_model", "supported_op_types"]
