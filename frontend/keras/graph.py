"""The ONNX graph a Keras model is translated into, built node by node with ``onnx.helper``.

Why ONNX: the ONNX frontend already imports every op a Keras layer needs (convolutions,
pooling, normalizations, attention's matmuls), checks types and folds constants; a Keras
layer is a handful of ONNX nodes, and the compiled model is one any ONNX tool can read too
(``tilecraft.load(model).save("model.onnx")``). tf2onnx does the same for TensorFlow.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Gelu is in the default domain from opset 20; the ONNX frontend reads up to the installed
# onnx package's newest opset, and onnxruntime (the anchor of `tilecraft bench`) runs 21.
OPSET = 21


class OnnxGraph:
    """Nodes, weights and value names of the graph being built.

    Value names are made unique here (``prefix``, ``prefix_1``, ...), so translators name
    their values after the Keras layer and never collide.
    """

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._used: set[str] = set()

    def fresh(self, prefix: str) -> str:
        """A value name not used yet, ``prefix`` when free."""
        name, index = prefix, 0
        while name in self._used:
            index += 1
            name = f"{prefix}_{index}"
        self._used.add(name)
        return name

    def constant(self, prefix: str, value: Any, dtype: Any = np.float32) -> str:
        """A weight (an initializer) holding ``value`` as ``dtype``."""
        name = self.fresh(prefix)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(np.asarray(value, dtype=dtype)), name))
        return name

    def ints(self, prefix: str, values: Sequence[int]) -> str:
        """An int64 vector (shapes, axes, pads, repeats)."""
        return self.constant(prefix, list(values), np.int64)

    def node(self, op_type: str, inputs: Sequence[str], prefix: str, outputs: int = 1, **attributes: Any
             ) -> str:
        """Append an ``op_type`` node; its (first) output's name. ``""`` in ``inputs``: an
        omitted optional input."""
        names = [self.fresh(prefix if i == 0 else f"{prefix}_out{i}") for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=names[0], **attributes))
        return names[0]

    def add_input(self, name: str, elem_type: int, shape: Sequence[int | None]) -> str:
        """A graph input; a ``None`` dim becomes a named dynamic dim (``batch`` for the first)."""
        name = self.fresh(name)
        dims = [d if d is not None else ("batch" if axis == 0 else f"{name}_d{axis}") for axis, d in enumerate(shape)]
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, dims))
        return name

    def add_output(self, value: str, name: str, elem_type: int, shape: Sequence[int | None]) -> None:
        """Expose ``value`` as the graph output ``name`` (an Identity renames it)."""
        name = self.fresh(name)
        self.nodes.append(helper.make_node("Identity", [value], [name], name=self.fresh(f"{name}/Identity")))
        dims = [d if d is not None else ("batch" if axis == 0 else f"{name}_d{axis}") for axis, d in enumerate(shape)]
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, dims))

    def model(self, graph_name: str) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, graph_name, self.inputs, self.outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="tilecraft.frontend.keras")
        model.ir_version = 10
        return model


# Keras dtype names -> ONNX element types (inputs only: weights are converted to float32).
ELEMENT_TYPES = {
    "float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "float64": TensorProto.DOUBLE,
    "int32": TensorProto.INT32, "int64": TensorProto.INT64, "int8": TensorProto.INT8,
    "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL,
}
