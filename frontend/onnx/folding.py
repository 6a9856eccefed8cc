"""Import-time evaluation of nodes whose inputs are all known (shape arithmetic, weights).

Shape -> Gather -> Concat -> Reshape chains and ConstantOfShape weight fills are computed
here with ONNX's own reference implementation, so they never reach the compiled code.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

# Ops whose result is not a function of their inputs, or that have side effects.
_NEVER_FOLD = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
     "Bernoulli", "Dropout", "If", "Loop", "Scan"}
)
# Fold only when the inputs are small: folding a large computation would bloat the model.
_MAX_INPUT_ELEMENTS = 1 << 20
# Ops whose output can be far larger than their inputs: a folded result above this size is
# dropped and the op is emitted instead (a fill or broadcast at run time, not a huge blob).
_EXPANDING = frozenset({"ConstantOfShape", "Expand", "Tile", "Range", "Resize", "Upsample"})
_MAX_EXPANDED_ELEMENTS = 1 << 16


def can_fold(node: onnx.NodeProto, inputs: list[object]) -> bool:
    present = [value for value in inputs if value is not None]
    return (
        node.domain in ("", "ai.onnx")
        and node.op_type not in _NEVER_FOLD
        and all(isinstance(value, np.ndarray) for value in present)
        and sum(value.size for value in present) <= _MAX_INPUT_ELEMENTS
    )


def fold(
    node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int
) -> list[np.ndarray | None] | None:
    """Evaluate ``node`` on constant ``inputs`` (one entry per node output, None where the
    output name is empty); ``None`` if the reference implementation cannot."""
    names = [name if value is not None else "" for name, value in zip(node.input, inputs)]
    graph_inputs = [
        onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
        for name, value in zip(names, inputs)
        if name
    ]
    outputs = [onnx.helper.make_empty_tensor_value_info(name) for name in node.output if name]
    single = onnx.helper.make_node(
        node.op_type, names, list(node.output), domain=node.domain, name=node.name
    )
    single.attribute.extend(node.attribute)
    model = onnx.helper.make_model(
        onnx.helper.make_graph([single], "fold", graph_inputs, outputs),
        opset_imports=[onnx.helper.make_opsetid("", opset)],
    )
    try:
        results = ReferenceEvaluator(model).run(
            None, {name: value for name, value in zip(names, inputs) if name}
        )
    except Exception:  # the reference lacks the op or rejects the inputs: emit IR instead
        return None
    arrays = [np.asarray(result) for result in results]
    if node.op_type in _EXPANDING and any(a.size > _MAX_EXPANDED_ELEMENTS for a in arrays):
        return None
    produced = iter(arrays)
    return [next(produced) if name else None for name in node.output]
