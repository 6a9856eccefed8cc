"""8-bit models from float ones: ``tilecraft.quantize`` and the calibration data it reads.

A QDQ model (QuantizeLinear/DequantizeLinear around each float MatMul, Gemm and Conv) is
what onnxruntime's own tool writes, what other runtimes read, and what tilecraft's int8 path
already compiles onto 8-bit kernels (frontend/onnx/qdq.py rewrites the QDQ pairs into integer
products, pipelines/tensor/int8_matmul.py runs them). So quantization here is onnxruntime's
``quantize_static`` (calibrated activation scales, symmetric int8 weights per output
channel) or ``quantize_dynamic`` (activation scales computed at run time by
``DynamicQuantizeLinear``, as transformers need): reusing the tool users already trust means
the model tilecraft compiles is the model they could run anywhere, not a private format.

Calibration data is read and checked here once, for both precisions: a list of
``{input name: array}`` dicts, or an ``.npz`` file whose arrays are named by input and hold
one sample (the input's rank) or a stack of samples along a new first axis.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from ..errors import CalibrationError, ModelImportError, QuantizationError

# onnxruntime's calibration session refuses models of a newer IR version than it reads;
# quantization needs nothing past IR 10 (onnx 1.16), so newer models are written as IR 10.
_QUANTIZER_IR_VERSION = 10
# DequantizeLinear takes a per-channel axis from opset 13.
_PER_CHANNEL_OPSET = 13
# Ops quantized without calibration: the activations of matmuls get a scale per call; a
# convolution model should be calibrated (its activation ranges are what int8 loses).
DYNAMIC_OP_TYPES = ("MatMul", "Gemm")


@dataclass(frozen=True)
class InputSpec:
    """One model input as calibration data must match it: ``None`` dims take any extent."""

    name: str
    shape: tuple[int | None, ...]
    dtype: np.dtype


Sample = dict[str, np.ndarray]


def read_calibration(calibration: Any, inputs: Sequence[InputSpec]) -> list[Sample]:
    """``calibration`` (a list of input dicts, or a path to an ``.npz``) as checked samples.

    Every sample names every input exactly once, with the input's element type and a shape
    the input takes; anything else raises :class:`CalibrationError` naming the sample and
    the input, because a quantizer fed the wrong data calibrates silently wrong scales.
    """
    if isinstance(calibration, (str, os.PathLike)):
        samples = _npz_samples(Path(calibration), inputs)
    elif isinstance(calibration, Mapping):
        raise CalibrationError("calibration must be a list of input dicts (or an .npz path), got one dict: "
                               "wrap it in a list")
    elif isinstance(calibration, Sequence) and not isinstance(calibration, (bytes, bytearray)):
        samples = list(calibration)
    else:
        raise CalibrationError(f"calibration must be a list of {{input name: array}} dicts or a path to an "
                               f".npz file, got {type(calibration).__name__}")
    if not samples:
        raise CalibrationError("calibration holds no samples: give at least one {input name: array} dict")
    return [_checked_sample(index, sample, inputs) for index, sample in enumerate(samples)]


def _npz_samples(path: Path, inputs: Sequence[InputSpec]) -> list[Any]:
    """An ``.npz`` file's arrays as samples: one per array, or one per row of stacked arrays."""
    if not path.is_file():
        raise CalibrationError(f"calibration file {str(path)!r}: no such file")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError) as error:
        raise CalibrationError(f"calibration file {str(path)!r} is not a readable .npz archive: {error}") from error
    ranks = {spec.name: len(spec.shape) for spec in inputs}
    stacked = {name for name, array in arrays.items() if name in ranks and array.ndim == ranks[name] + 1}
    if not stacked:
        return [arrays]
    if stacked != set(arrays):
        raise CalibrationError(
            f"calibration file {str(path)!r}: inputs {sorted(stacked)} hold stacks of samples and "
            f"{sorted(set(arrays) - stacked)} single samples; stack all of them along a new first axis, or none")
    counts = {name: len(array) for name, array in arrays.items()}
    if len(set(counts.values())) != 1:
        raise CalibrationError(f"calibration file {str(path)!r}: the stacks hold different sample counts {counts}")
    count = next(iter(counts.values()))
    return [{name: array[index] for name, array in arrays.items()} for index in range(count)]


def _checked_sample(index: int, sample: Any, inputs: Sequence[InputSpec]) -> Sample:
    if not isinstance(sample, Mapping):
        raise CalibrationError(f"calibration sample {index} must be a dict of input name -> array, "
                               f"got {type(sample).__name__}")
    expected = {spec.name for spec in inputs}
    unknown = sorted(set(map(str, sample)) - expected)
    missing = sorted(expected - set(map(str, sample)))
    if unknown or missing:
        raise CalibrationError(f"calibration sample {index}: unknown input(s) {unknown}, missing input(s) "
                               f"{missing}; the model's inputs are {sorted(expected)}")
    checked: Sample = {}
    for spec in inputs:
        array = sample[spec.name]
        if not isinstance(array, np.ndarray):
            raise CalibrationError(f"calibration sample {index}, input {spec.name!r}: expected a numpy array, "
                                   f"got {type(array).__name__}")
        if array.dtype != spec.dtype:
            raise CalibrationError(f"calibration sample {index}, input {spec.name!r}: expected element type "
                                   f"{spec.dtype}, got {array.dtype}")
        if array.ndim != len(spec.shape) or any(d is not None and d != n for d, n in zip(spec.shape, array.shape)):
            wanted = "x".join("?" if d is None else str(d) for d in spec.shape) or "scalar"
            raise CalibrationError(f"calibration sample {index}, input {spec.name!r}: expected shape {wanted}, "
                                   f"got {'x'.join(map(str, array.shape)) or 'scalar'}")
        checked[spec.name] = np.ascontiguousarray(array)
    return checked


def onnx_inputs(proto: Any) -> list[InputSpec]:
    """The graph inputs of an ONNX model that are not initializers, as :class:`InputSpec`."""
    from onnx import helper

    weights = {t.name for t in proto.graph.initializer}
    specs = []
    for value in proto.graph.input:
        if value.name in weights:
            continue
        tensor = value.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
        specs.append(InputSpec(value.name, shape, np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))))
    return specs


def onnx_proto(model: Any) -> Any:
    """``model`` (a path, an ``onnx.ModelProto`` or a :func:`tilecraft.load` model of one) as
    a ModelProto; quantization rewrites ONNX graphs only."""
    import onnx

    source = getattr(model, "source", model)  # a tilecraft.load Model holds its proto
    if isinstance(source, onnx.ModelProto):
        return source
    if isinstance(source, (str, os.PathLike)) and Path(source).suffix == ".onnx":
        if not Path(source).is_file():
            raise ModelImportError(f"{str(source)!r}: no such file")
        return onnx.load(str(source))
    raise QuantizationError(
        f"int8 quantization rewrites ONNX models (QDQ format); got {type(source).__name__}. Export the "
        "model to ONNX first (torch.onnx.export, tf2onnx), or use precision='bf16', which takes any source")


def quantize(model: Any, calibration: Any = None, path: "str | os.PathLike[str] | None" = None) -> Any:
    """An int8 QDQ ONNX model from a float one, written to ``path`` when given.

    With ``calibration`` (input dicts or an ``.npz``, see :func:`read_calibration`): static
    quantization, activation scales from the calibration run (min/max), int8 weights
    symmetric per output channel, uint8 activations. Without it: dynamic quantization of
    the MatMul and Gemm nodes (weights int8 per output channel, activation scales computed
    at run time), the scheme transformers use.

    Returns the quantized ``onnx.ModelProto``.
    """
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    proto = onnx_proto(model)
    samples = None if calibration is None else read_calibration(calibration, onnx_inputs(proto))
    proto = _quantizable(proto)
    with tempfile.TemporaryDirectory(prefix="tilecraft-quantize-") as scratch, _advice_silenced():
        float_path, prepared, int8_path = (Path(scratch, name) for name in ("float.onnx", "prepared.onnx", "int8.onnx"))
        onnx.save(proto, float_path, save_as_external_data=proto.ByteSize() > 1 << 30)
        try:
            # onnxruntime's own preparation: shape inference and graph optimization (batch
            # norms folded into the convolutions before their weights are quantized).
            quant_pre_process(str(float_path), str(prepared), skip_symbolic_shape=True)
            if samples is not None:
                quantize_static(prepared, int8_path, _reader(CalibrationDataReader, samples),
                                quant_format=QuantFormat.QDQ, per_channel=True,
                                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            else:
                quantize_dynamic(prepared, int8_path, per_channel=True, weight_type=QuantType.QInt8,
                                 op_types_to_quantize=list(DYNAMIC_OP_TYPES))
        except Exception as error:  # onnxruntime raises its own and builtin types alike
            raise QuantizationError(f"onnxruntime could not quantize the model: {type(error).__name__}: {error}") \
                from error
        quantized = onnx.load(str(int8_path))
    if path is not None:
        onnx.save(quantized, str(path))
    return quantized


def _quantizable(proto: Any) -> Any:
    """A copy of ``proto`` that onnxruntime's tool takes: per-channel DequantizeLinear needs
    opset 13 (older models are converted by onnx's version converter), and its calibration
    session reads IR versions up to ``_QUANTIZER_IR_VERSION``."""
    import onnx
    import onnx.version_converter

    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is not None and opset < _PER_CHANNEL_OPSET:
        try:
            proto = onnx.version_converter.convert_version(proto, _PER_CHANNEL_OPSET)
        except Exception as error:  # the converter raises RuntimeError and its own types
            raise QuantizationError(f"the model's opset {opset} could not be converted to {_PER_CHANNEL_OPSET}, "
                                    f"which per-channel quantization needs: {error}") from error
    proto.ir_version = min(proto.ir_version, _QUANTIZER_IR_VERSION)
    return proto


@contextlib.contextmanager
def _advice_silenced() -> Iterator[None]:
    """onnxruntime's tool logs advice to pre-process the model on the root logger at every
    call; a compile that quantizes on the user's behalf should not print it."""

    def not_advice(record: logging.LogRecord) -> bool:
        return "pre-processing" not in record.getMessage() and "pre-process" not in record.getMessage()

    root = logging.getLogger()
    root.addFilter(not_advice)
    try:
        yield
    finally:
        root.removeFilter(not_advice)


def _reader(base: type, samples: Sequence[Sample]) -> Any:
    """The samples through onnxruntime's ``CalibrationDataReader`` protocol (``base``: that
    class, imported only when quantizing)."""

    class Samples(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self._samples: Iterator[Sample] = iter(samples)

        def get_next(self) -> Sample | None:
            return next(self._samples, None)

    return Samples()
