"""Import-time evaluation of nodes whose inputs are all known (shape arithmetic, weights).

Shape -> Gather -> Concat -> Reshape chains and ConstantOfShape weight fills are computed
here with ONNX's own reference implementation, so they never reach the compiled code.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from ...runtime.limits import Limits, element_count

# Ops whose result is not a function of their inputs, or that have side effects.
_NEVER_FOLD = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
     "Bernoulli", "Dropout", "If", "Loop", "Scan",
     # Sequences and optionals are import-time objects of ops/sequence.py, never arrays.
     "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
     "SequenceLength", "SplitToSequence", "ConcatFromSequence", "Optional",
     "OptionalHasElement", "OptionalGetElement"}
)
# Fold only when the inputs are small: folding a large computation would bloat the model.
_MAX_INPUT_ELEMENTS = 1 << 20
# Ops whose output can be far larger than their inputs: a folded result above this size is
# dropped and the op is emitted instead (a fill or broadcast at run time, not a huge blob).
_EXPANDING = frozenset({"ConstantOfShape", "Expand", "Tile", "Range", "Resize", "Upsample"})
_MAX_EXPANDED_ELEMENTS = 1 << 16


def can_fold(node: onnx.NodeProto, inputs: list[object],
             output_shapes: Sequence[Sequence[int | None] | None] = ()) -> bool:
    """True when ``node`` may be evaluated now: deterministic, constant inputs, and outputs
    that fit ``TILECRAFT_MAX_FOLD`` (runtime/limits.py) as far as shape inference (or, for the
    expanding ops, their inputs) tell. Why check before evaluating: a ``ConstantOfShape`` of
    2^40 elements, or a MatMul of two long vectors, would otherwise allocate terabytes here."""
    present = [value for value in inputs if value is not None]
    if not (
        node.domain in ("", "ai.onnx")
        and node.op_type not in _NEVER_FOLD
        and all(isinstance(value, np.ndarray) for value in present)
        and sum(value.size for value in present) <= _MAX_INPUT_ELEMENTS
    ):
        return False
    largest = Limits.current().max_fold_bytes // 8  # elements, at the widest element type
    predicted = _predicted_elements(node, inputs)
    if predicted is not None and predicted > largest:
        return False
    return all(
        shape is None or any(d is None for d in shape) or element_count(shape) <= largest
        for shape in output_shapes
    )


def _predicted_elements(node: onnx.NodeProto, inputs: list) -> int | None:
    """Output elements of an expanding op from its constant inputs, where they say it
    (shape inference may not have: a shape computed by earlier folding)."""
    try:
        if node.op_type == "ConstantOfShape" and inputs and inputs[0] is not None:
            return element_count(np.maximum(inputs[0].astype(object), 0))
        if node.op_type == "Expand" and len(inputs) > 1 and inputs[1] is not None:
            shape = np.broadcast_shapes(inputs[0].shape, tuple(int(max(d, 0)) for d in inputs[1]))
            return element_count(shape)
        if node.op_type == "Tile" and len(inputs) > 1 and inputs[1] is not None:
            return inputs[0].size * element_count(np.maximum(inputs[1].astype(object), 0))
        if node.op_type == "Range" and len(inputs) == 3:
            start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in inputs)
            return int(max(np.ceil((limit - start) / delta), 0)) if delta else None
        if node.op_type in ("Resize", "Upsample") and len(inputs) > 1:
            sizes = inputs[3] if len(inputs) > 3 and inputs[3] is not None and inputs[3].size else None
            if sizes is not None:
                return element_count(np.maximum(sizes.astype(object), 0))
            scales = next((v for v in inputs[1:3] if v is not None and v.size), None)
            if scales is not None:
                return element_count(int(d * max(float(f), 0)) for d, f in zip(inputs[0].shape, scales))
    except (ValueError, TypeError, OverflowError, IndexError):
        return None  # malformed: the reference evaluator or the handler reports it
    return None


def fold(
    node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int
) -> list[np.ndarray | None] | None:
    """Evaluate ``node`` on constant ``inputs`` (one entry per node output, None where the
    output name is empty); ``None`` if the reference implementation cannot.

    Identity passes its array on (the reference copies it): the importer materializes one
    constant per array (importer.py's ``materialize``), and exporters name a weight shared
    by several layers through Identity nodes."""
    if node.op_type == "Identity" and len(inputs) == 1 and len(node.output) == 1:
        return [inputs[0]]
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
