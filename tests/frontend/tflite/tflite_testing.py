"""Real ``.tflite`` files for the tests: Keras models converted by TensorFlow's converter
(float, or full int8 calibrated on numpy data), run by LiteRT's interpreter and by tilecraft
on the same inputs.

Conversions are cached per test session in a temporary folder (keyed by the model's name):
a converter run costs seconds, and several tests read the same model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import mlir.ir  # noqa: F401  (before TensorFlow: MLIR's libraries loaded after TensorFlow's crash the process)
import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def convert(folder: Path, name: str, build: Callable[[], object], *, int8: str | None = None,
            calibration_shape: tuple[int, ...] | None = None) -> Path:
    """``folder/name.tflite`` converted from the Keras model ``build()`` returns.

    int8: None (float), ``"float-io"`` (full int8, float inputs and outputs through
    QUANTIZE/DEQUANTIZE), ``"int8-io"`` or ``"uint8-io"`` (8-bit inputs and outputs as well).
    """
    path = folder / f"{name}{'' if int8 is None else '-' + int8}.tflite"
    if path.exists():
        return path
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = build()
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8 is not None:
        rng = np.random.default_rng(1)
        shapes = [tuple(t.shape) for t in model.inputs]

        def representative():
            for _ in range(32):
                yield [rng.standard_normal(s).astype(np.float32) for s in shapes]

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if int8 in ("int8-io", "uint8-io"):
            converter.inference_input_type = converter.inference_output_type = getattr(tf, int8[:-3])
    path.write_bytes(converter.convert())
    return path


def litert_run(path: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """LiteRT's outputs (in the subgraph's output order) for ``inputs`` (in its input order)."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    for detail, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def model_inputs(path: Path, seed: int = 0) -> list[np.ndarray]:
    """Random inputs of the model's types and shapes (normal floats, int8 anywhere)."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    rng = np.random.default_rng(seed)
    arrays = []
    for detail in interpreter.get_input_details():
        dtype = np.dtype(detail["dtype"])
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(detail["shape"]).astype(dtype))
        else:
            info = np.iinfo(dtype)
            arrays.append(rng.integers(info.min, info.max + 1, size=detail["shape"]).astype(dtype))
    return arrays


def operator_names(path: Path) -> set[str]:
    from tilecraft.frontend.tflite.flatbuffer import read_model

    return {op.name for op in read_model(path.read_bytes(), str(path)).operators}


def output_steps(path: Path) -> list[float]:
    """One quantization step of each model output: its own scale (int8 outputs), or the
    scale of the int8 tensor its final DEQUANTIZE reads (float outputs)."""
    from tilecraft.frontend.tflite.flatbuffer import read_model

    graph = read_model(path.read_bytes(), str(path))
    producer = {t: op for op in graph.operators for t in op.outputs}
    steps = []
    for index in graph.outputs:
        tensor = graph.tensors[index]
        if tensor.quantization is None and index in producer and producer[index].name == "DEQUANTIZE":
            tensor = graph.tensors[producer[index].inputs[0]]
        steps.append(float(tensor.quantization.scale.reshape(-1)[0]) if tensor.quantization is not None else 0.0)
    return steps
