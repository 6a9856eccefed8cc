"""Keras 3 models (in memory, ``.keras`` archives, ``.h5`` files) as ONNX models.

    proto = import_keras("mnist.keras")      # an onnx.ModelProto, NHWC as the model has it

The functional graph of the model (a ``Sequential`` is a functional graph inside) is walked
in order; each layer call becomes ONNX nodes (``layers.py``) and the ONNX frontend compiles
the result like any ONNX model: shape overrides, dynamic batch specialization, packages
whose outputs carry the Keras output layers' names. See docs/frontends.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import ModelImportError
from .graph import ELEMENT_TYPES, OnnxGraph
from .layers import LAYERS, Call

__all__ = ["LAYERS", "import_keras", "is_keras_model", "read_keras"]


def is_keras_model(source: Any) -> bool:
    """A ``keras.Model`` (checked by class, so keras is imported only when it is one)."""
    return any(cls.__name__ == "Model" and cls.__module__.startswith("keras.") for cls in type(source).__mro__)


def read_keras(path: Path) -> Any:
    """The model saved in ``path`` (``.keras`` archive or ``.h5``), without its training state."""
    import keras

    if path.suffix.lower() in (".h5", ".hdf5"):
        _check_h5_has_model(path)
    try:
        return keras.saving.load_model(str(path), compile=False)
    except Exception as error:  # keras raises ValueError, TypeError, OSError, KeyError...
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelImportError(f"{path}: Keras could not load the model: {first}") from None


def _check_h5_has_model(path: Path) -> None:
    import h5py

    try:
        with h5py.File(path, "r") as file:
            has_model = "model_config" in file.attrs
    except OSError as error:
        raise ModelImportError(f"{path} is not a readable HDF5 file: {error}") from None
    if not has_model:
        raise ModelImportError(
            f"{path} holds weights only (model.save_weights), no model: save the whole model with "
            "model.save('model.keras') or model.save('model.h5'), or build the model in Python, "
            "load_weights() and pass the keras.Model")


def import_keras(source: Any) -> Any:
    """An ``onnx.ModelProto`` computing what the Keras model computes at inference.

    ``source``: a ``keras.Model`` or a path to a ``.keras``/``.h5`` file. Raises
    :class:`ModelImportError` naming every layer it cannot translate (class and layer name).
    """
    model = read_keras(Path(source)) if isinstance(source, (str, Path)) else source
    if not is_keras_model(model):
        raise ModelImportError(f"expected a keras.Model, got {type(model).__name__}")
    functional = _functional(model)
    _check_supported(functional)
    graph = OnnxGraph()
    values: dict[int, str] = {}
    for tensor in functional.inputs:
        values[id(tensor)] = graph.add_input(_producer_name(tensor), _element_type(tensor), tuple(tensor.shape))
    outputs = _translate(functional, graph, values)
    for tensor, value in zip(functional.outputs, outputs):
        graph.add_output(value, _producer_name(tensor), _element_type(tensor), tuple(tensor.shape))
    return graph.model(model.name)


def _functional(model: Any) -> Any:
    """The functional graph of ``model``: itself, or the one a built ``Sequential`` holds."""
    if type(model).__name__ == "Sequential":
        functional = getattr(model, "_functional", None)
        if functional is None:
            raise ModelImportError(
                f"the Sequential model {model.name!r} has no input shape yet: start it with "
                "keras.Input(shape=...) or call it once on data")
        return functional
    if not hasattr(model, "_nodes_by_depth") or not getattr(model, "inputs", None):
        raise ModelImportError(
            f"the model {model.name!r} ({type(model).__name__}) is a subclassed keras.Model: its call() "
            "is Python code with no layer graph to translate; build it with the functional API or Sequential")
    return model


def _producer_name(tensor: Any) -> str:
    history = getattr(tensor, "_keras_history", None)
    return history.operation.name if history is not None else tensor.name


def _element_type(tensor: Any) -> int:
    dtype = str(tensor.dtype)
    if dtype not in ELEMENT_TYPES:
        raise ModelImportError(f"input {tensor.name!r} has dtype {dtype}, which is not supported")
    return ELEMENT_TYPES[dtype]


def _translate(functional: Any, graph: OnnxGraph, values: dict[int, str]) -> list[str]:
    """Translate the layer calls of ``functional`` whose inputs are in ``values`` (KerasTensor
    id -> ONNX value); the values of its outputs. Nested models are translated inline."""
    for depth in sorted(functional._nodes_by_depth, reverse=True):
        for node in functional._nodes_by_depth[depth]:
            operation = node.operation
            if type(operation).__name__ == "InputLayer":
                continue
            tensors = list(node.input_tensors)
            missing = [t.name for t in tensors if id(t) not in values]
            if missing:
                raise ModelImportError(f"layer {operation.name!r}: inputs {missing} are computed by no layer before it")
            inputs = [values[id(t)] for t in tensors]
            if is_keras_model(operation):
                inner = _functional(operation)
                inner_values = {id(t): v for t, v in zip(inner.inputs, inputs)}
                results = _translate(inner, graph, inner_values)
            else:
                results = _translate_layer(graph, operation, node, tensors, inputs)
            outputs = list(node.outputs)
            if len(results) != len(outputs):
                raise ModelImportError(f"layer {operation.name!r} has {len(outputs)} outputs, "
                                       f"{len(results)} were translated")
            for tensor, value in zip(outputs, results):
                values[id(tensor)] = value
    return [values[id(t)] for t in functional.outputs]


def _unsupported(operation: Any) -> str | None:
    """Why ``operation`` cannot be translated, ``None`` when it can."""
    kind = type(operation).__name__
    module = type(operation).__module__
    if kind in LAYERS and module.startswith("keras.src.layers."):
        compute = getattr(getattr(operation, "dtype_policy", None), "compute_dtype", "float32")
        return None if compute == "float32" else f"compute dtype {compute} is not supported (float32 is)"
    where = "a keras.ops call" if module.startswith("keras.src.ops.") else kind
    return f"{where} is not supported; supported layers: {', '.join(sorted(LAYERS))}"


def _check_supported(functional: Any) -> None:
    """One :class:`ModelImportError` listing every layer that cannot be translated (nested
    models included), so a user sees them all at once."""
    problems: list[tuple[str, str, str]] = []

    def visit(graph: Any) -> None:
        for depth in sorted(graph._nodes_by_depth, reverse=True):  # inputs first: model order
            for node in graph._nodes_by_depth[depth]:
                operation = node.operation
                if type(operation).__name__ == "InputLayer":
                    continue
                if is_keras_model(operation):
                    visit(_functional(operation))
                    continue
                why = _unsupported(operation)
                if why is not None:
                    problems.append((operation.name, type(operation).__name__, why))

    visit(functional)
    if problems:
        listed = "; ".join(f"{name!r} ({kind})" for name, kind, _ in problems)
        raise ModelImportError(f"Keras layer(s) {listed}: {problems[0][2]}", problems=problems)


def _translate_layer(graph: OnnxGraph, operation: Any, node: Any, tensors: list[Any], inputs: list[str]) -> list[str]:
    why = _unsupported(operation)  # _check_supported raised for these first
    if why is not None:
        kind = type(operation).__name__
        raise ModelImportError(f"Keras layer {operation.name!r} ({kind}): {why}",
                               problems=[(operation.name, kind, why)])
    shapes = [tuple(t.shape) for t in tensors]
    return LAYERS[type(operation).__name__](Call(graph, operation, inputs, shapes, node.arguments, tensors))
