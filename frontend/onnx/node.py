"""What an op handler sees of one ONNX node: attributes, inputs, inferred output types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import onnx
from mlir import ir

from ...ir import core
from ...runtime.signature import numpy_dtype
from .model import TensorInfo

_MISSING = object()

# An importer value: an SSA tensor, or an array known at import time.
Output = "ir.Value | np.ndarray | None"


class HandlerError(Exception):
    """Raised by handlers for a node they cannot import (the importer adds node details)."""


@dataclass
class NodeContext:
    """One node being imported.

    Attributes:
      node: the ONNX node.
      opset: the model's default-domain opset.
      inputs: per input, an SSA tensor, an array known at import time, or None (absent).
      input_infos / output_infos: declared or inferred types (None where unknown).
      materialize: turns an array into an SSA constant (dense_resource when large).
    """

    node: onnx.NodeProto
    opset: int
    inputs: list[ir.Value | np.ndarray | None]
    input_infos: list[TensorInfo | None]
    output_infos: list[TensorInfo | None]
    materialize: Callable[[np.ndarray, str], ir.Value]
    # Imports a body graph (If/Loop/Scan) at the current insertion point: (graph, input
    # bindings) -> its outputs.
    subgraph: Callable[[onnx.GraphProto, dict], list] | None = None

    @property
    def op_type(self) -> str:
        return self.node.op_type

    def attr(self, name: str, default: Any = _MISSING) -> Any:
        """An attribute's Python value (ints, floats, strings, lists, numpy for tensors)."""
        for attribute in self.node.attribute:
            if attribute.name == name:
                value = onnx.helper.get_attribute_value(attribute)
                if isinstance(value, bytes):
                    return value.decode()
                if isinstance(value, onnx.TensorProto):
                    return onnx.numpy_helper.to_array(value)
                if isinstance(value, list) and value and isinstance(value[0], bytes):
                    return [v.decode() for v in value]
                return value
        if default is _MISSING:
            raise HandlerError(f"required attribute {name!r} is missing")
        return default

    def has_input(self, index: int) -> bool:
        return index < len(self.inputs) and self.inputs[index] is not None

    def const(self, index: int) -> np.ndarray | None:
        """Input ``index`` if it is known at import time (an initializer or folded value)."""
        value = self.inputs[index] if index < len(self.inputs) else None
        return value if isinstance(value, np.ndarray) else None

    def require_const(self, index: int, what: str) -> np.ndarray:
        value = self.const(index)
        if value is None:
            raise HandlerError(f"input {index} ({what}) must be known at import time")
        return value

    def value(self, index: int) -> ir.Value:
        """Input ``index`` as an SSA tensor (constants are materialized on first use)."""
        value = self.inputs[index] if index < len(self.inputs) else None
        if value is None:
            raise HandlerError(f"input {index} is required")
        if isinstance(value, np.ndarray):
            value = self.materialize(value, self.node.input[index])
            self.inputs[index] = value
        return value

    def values(self) -> list[ir.Value]:
        return [self.value(i) for i in range(len(self.inputs)) if self.inputs[i] is not None]

    def element_type(self, index: int) -> ir.Type:
        value = self.inputs[index]
        if isinstance(value, np.ndarray):
            return core.element_type(value.dtype)
        return core.tensor_type(value).element_type

    def dtype(self, index: int) -> np.dtype:
        """Input ``index``'s numpy dtype: declared or inferred (MLIR's signless ``i8`` may be
        int8, uint8, int4, uint4, int2, uint2 or float4), else read from its element type."""
        value = self.inputs[index]
        if isinstance(value, np.ndarray):
            return value.dtype
        info = self.input_infos[index] if index < len(self.input_infos) else None
        if info is not None:
            return np.dtype(info.dtype)
        return numpy_dtype(core.tensor_type(value).element_type)

    def is_unsigned(self, index: int) -> bool:
        """ONNX uintN: MLIR types are signless, so the handler must know which it was."""
        value = self.inputs[index]
        if isinstance(value, np.ndarray):
            return core.is_unsigned_dtype(value.dtype)
        info = self.input_infos[index] if index < len(self.input_infos) else None
        return info is not None and core.is_unsigned_dtype(info.dtype)
