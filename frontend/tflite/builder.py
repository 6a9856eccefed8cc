"""The ONNX graph a TFLite model becomes, and what an operator converter sees of it.

Why ONNX: the ONNX frontend already imports every op TFLite models use, its QDQ rewrite
(``frontend/onnx/qdq.py``) puts ``DequantizeLinear -> Conv/Gemm`` pairs on the int8 VNNI
kernels, and the layout pass cancels NHWC/NCHW transposes; a TFLite op written as ONNX nodes
inherits all three, with nothing new below the frontend.

Quantized tensors are carried as their 8-bit values. A converter asks for an input with
:meth:`OpContext.value`, which is the real-number value (a ``DequantizeLinear`` of the 8-bit
tensor, made once per tensor and layout), and hands its real-number result to
:meth:`OpContext.set_output`, which quantizes it when the TFLite output tensor is quantized.
So each quantized TFLite op becomes the QDQ pattern ``DQ -> float op -> Q``: the same
real-number function, rounded once at the output, as TFLite's fixed-point kernels compute it
(within one quantization step). Pure data movement on tensors whose quantization does not
change (reshape, transpose, slices, pads) moves the 8-bit values themselves
(:meth:`OpContext.raw`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .flatbuffer import Graph, Operator, Quantization, Tensor

ONNX_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.uint16): TensorProto.UINT16, np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.uint32): TensorProto.UINT32, np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint64): TensorProto.UINT64, np.dtype(np.bool_): TensorProto.BOOL,
}

# NHWC <-> NCHW: TFLite images are channels-last, ONNX Conv/pooling channels-first.
TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)


class ConversionError(Exception):
    """An operator the converter cannot express (its options, inputs or types); the caller
    names the operator and its index."""


def quantized_8bit(tensor: Tensor) -> bool:
    return tensor.quantization is not None and np.dtype(tensor.dtype) in (np.dtype(np.int8), np.dtype(np.uint8))


def dequantize_array(tensor: Tensor) -> np.ndarray:
    """A constant's real-number value (``scale * (q - zero_point)``, per channel along the
    quantized axis) as float32; float16 weights widened."""
    data = tensor.data
    assert data is not None
    q = tensor.quantization
    if q is None or np.dtype(tensor.dtype).kind == "f":
        return data.astype(np.float32)
    shape = [1] * data.ndim
    if not q.per_tensor:
        shape[q.axis] = -1
    return ((data.astype(np.float64) - q.zero_point.reshape(shape)) * q.scale.astype(np.float64).reshape(shape)
            ).astype(np.float32)


class OnnxGraph:
    """Nodes and initializers under construction, with fresh value names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0
        self._constants: dict[tuple[bytes, str, tuple[int, ...]], str] = {}

    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}/{self._count}"

    def node(self, op_type: str, inputs: Sequence[str], hint: str, outputs: int = 1, **attributes: Any) -> Any:
        """Append one node; its output name (a list of names when ``outputs > 1``)."""
        names = [self.fresh(f"{hint}/{op_type}") for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=names[0], **attributes))
        return names if outputs > 1 else names[0]

    def constant(self, array: np.ndarray, hint: str) -> str:
        """An initializer holding ``array`` (one per distinct small value: scales, shapes)."""
        array = np.ascontiguousarray(array)
        key = (array.tobytes(), array.dtype.str, array.shape) if array.size <= 64 else None
        if key is not None and key in self._constants:
            return self._constants[key]
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(array, name))
        if key is not None:
            self._constants[key] = name
        return name

    def quantization_parameters(self, q: Quantization, dtype: Any, hint: str) -> tuple[str, str]:
        """(scale, zero point) initializers of a per-tensor quantization."""
        return (self.constant(q.scale.reshape(()).astype(np.float32), f"{hint}/scale"),
                self.constant(q.zero_point.reshape(()).astype(dtype), f"{hint}/zero_point"))


class Converter:
    """The whole model's conversion state: which ONNX value holds each TFLite tensor."""

    def __init__(self, model: Graph) -> None:
        self.model = model
        self.onnx = OnnxGraph()
        self.values: dict[int, str] = {}  # tensor index -> ONNX value holding it (8-bit if quantized)
        self._dequantized: dict[tuple[int, tuple[int, ...] | None, tuple[int, ...] | None], str] = {}

    def tensor(self, index: int) -> Tensor:
        return self.model.tensors[index]

    def raw_value(self, index: int) -> str:
        """The ONNX value of tensor ``index`` as TFLite stores it (8-bit for quantized)."""
        if index in self.values:
            return self.values[index]
        tensor = self.tensor(index)
        if tensor.data is None:
            raise ConversionError(f"tensor {index} ({tensor.name!r}) is read before any operator writes it")
        data = tensor.data
        if np.dtype(data.dtype) == np.float16:
            data = data.astype(np.float32)  # fp16 weights: the DEQUANTIZE that reads them is a widening
        self.values[index] = self.onnx.constant(np.asarray(data), f"const{index}")
        return self.values[index]

    def real_value(self, index: int, perm: Sequence[int] | None, shape: Sequence[int] | None) -> str:
        """Tensor ``index``'s real-number value, transposed by ``perm`` and/or reshaped to
        ``shape`` (on the 8-bit values, before dequantizing: the QDQ pattern the int8
        kernels match is DequantizeLinear directly in front of the matmul or conv)."""
        key = (index, tuple(perm) if perm is not None else None, tuple(shape) if shape is not None else None)
        if key in self._dequantized:
            return self._dequantized[key]
        tensor = self.tensor(index)
        hint = f"t{index}"
        if tensor.data is not None and (tensor.quantization is not None or np.dtype(tensor.dtype).kind == "f"):
            data = dequantize_array(tensor) if tensor.quantization is not None else tensor.data.astype(np.float32)
            if perm is not None:
                data = np.transpose(data, perm)
            if shape is not None:
                data = data.reshape(shape)
            name = self.onnx.constant(data, f"const{index}")
        else:
            name = self.raw_value(index)
            if perm is not None:
                name = self.onnx.node("Transpose", [name], hint, perm=list(perm))
            if shape is not None:
                name = self.onnx.node("Reshape", [name, self.onnx.constant(np.array(shape, np.int64), "shape")], hint)
            if quantized_8bit(tensor):
                q = tensor.quantization
                if not q.per_tensor:
                    raise ConversionError(f"tensor {index} ({tensor.name!r}) is an activation quantized per channel")
                scale, zero = self.onnx.quantization_parameters(q, tensor.dtype, hint)
                name = self.onnx.node("DequantizeLinear", [name, scale, zero], hint)
        self._dequantized[key] = name
        return name

    def weight(self, index: int, perm: Sequence[int], flip: Sequence[int] = ()) -> str:
        """A constant filter or weight matrix transposed by ``perm`` (then reversed along the
        axes ``flip``): an 8-bit one stays 8-bit behind a DequantizeLinear (per channel along
        its quantized axis, moved by ``perm``), which qdq.py turns into an integer conv or
        matmul."""
        tensor = self.tensor(index)
        if tensor.data is None:
            if flip:
                raise ConversionError(f"tensor {index} ({tensor.name!r}) must be a constant filter")
            return self.real_value(index, perm, None)
        if not quantized_8bit(tensor):
            data = np.transpose(dequantize_array(tensor), perm)
            return self.onnx.constant(np.flip(data, tuple(flip)) if flip else data, f"weight{index}")
        q = tensor.quantization
        data = np.transpose(tensor.data, perm)
        data = np.ascontiguousarray(np.flip(data, tuple(flip)) if flip else data)
        name = self.onnx.constant(data, f"weight{index}")
        hint = f"weight{index}"
        if q.per_tensor:
            scale, zero = self.onnx.quantization_parameters(q, tensor.dtype, hint)
            return self.onnx.node("DequantizeLinear", [name, scale, zero], hint)
        axis = list(perm).index(q.axis)
        scale = self.onnx.constant(q.scale.astype(np.float32), f"{hint}/scale")
        zero = self.onnx.constant(q.zero_point.astype(tensor.dtype), f"{hint}/zero_point")
        return self.onnx.node("DequantizeLinear", [name, scale, zero], hint, axis=axis)


class OpContext:
    """What one operator's converter sees: its tensors, options and the graph to write to."""

    def __init__(self, converter: Converter, op: Operator) -> None:
        self.converter = converter
        self.op = op
        self.graph = converter.onnx
        self.hint = f"op{op.index}_{op.name.lower()}"

    @property
    def options(self) -> Any:
        if self.op.options is None:
            raise ConversionError("its builtin options are missing")
        return self.op.options

    def has_input(self, i: int) -> bool:
        return i < len(self.op.inputs) and self.op.inputs[i] >= 0

    def input_tensor(self, i: int) -> Tensor:
        if not self.has_input(i):
            raise ConversionError(f"input {i} is missing")
        return self.converter.tensor(self.op.inputs[i])

    def output_tensor(self, k: int = 0) -> Tensor:
        return self.converter.tensor(self.op.outputs[k])

    def shape(self, i: int) -> tuple[int, ...]:
        return self.input_tensor(i).shape

    def constant(self, i: int) -> np.ndarray:
        """Input ``i``'s value, which the op needs at conversion time (axes, sizes, shapes)."""
        tensor = self.input_tensor(i)
        if tensor.data is None:
            raise ConversionError(f"input {i} ({tensor.name!r}) must be a constant")
        return tensor.data

    def value(self, i: int, perm: Sequence[int] | None = None, shape: Sequence[int] | None = None) -> str:
        """Input ``i``'s real-number value (dequantized), optionally transposed/reshaped."""
        self.input_tensor(i)
        return self.converter.real_value(self.op.inputs[i], perm, shape)

    def weight(self, i: int, perm: Sequence[int], flip: Sequence[int] = ()) -> str:
        self.input_tensor(i)
        return self.converter.weight(self.op.inputs[i], perm, flip)

    def bias(self, i: int) -> str | None:
        """An optional bias as a float constant (an int32 one dequantized by its scale)."""
        if not self.has_input(i):
            return None
        return self.value(i)

    def stored(self, i: int) -> tuple[str, str, Callable[[str], str]]:
        """Input ``i`` as stored (8-bit if quantized), the constant that is a real 0 in it
        (the zero point), and the function from a rearrangement of it to its real value: for
        ops that move and pad the stored values before a convolution reads them, so that the
        DequantizeLinear stays right in front of the convolution (the QDQ pattern)."""
        tensor = self.input_tensor(i)
        name = self.converter.raw_value(self.op.inputs[i])
        if not quantized_8bit(tensor):
            return name, self.const(0.0, tensor.dtype), lambda moved: moved
        q = tensor.quantization
        if not q.per_tensor:
            raise ConversionError(f"input {i} ({tensor.name!r}) is an activation quantized per channel")
        scale, zero = self.graph.quantization_parameters(q, tensor.dtype, self.hint)
        return name, zero, lambda moved: self.node("DequantizeLinear", [moved, scale, zero])

    def raw(self, i: int) -> str | None:
        """Input ``i`` as stored, when moving its values is the whole op: it and every output
        have the same quantization (or none). ``None``: go through real values instead."""
        tensor = self.input_tensor(i)
        for k in range(len(self.op.outputs)):
            out = self.output_tensor(k)
            if not _same_quantization(tensor, out):
                return None
        return self.converter.raw_value(self.op.inputs[i])

    def node(self, op_type: str, inputs: Sequence[str], outputs: int = 1, **attributes: Any) -> Any:
        return self.graph.node(op_type, inputs, self.hint, outputs, **attributes)

    def const(self, array: Any, dtype: Any = np.int64) -> str:
        return self.graph.constant(np.asarray(array, dtype), f"{self.hint}/c")

    def set_output(self, k: int, name: str, *, raw: bool = False) -> None:
        """Tensor ``outputs[k]`` is ``name``: a real-number value, quantized here when the
        tensor is quantized, or (``raw``) already in the tensor's own representation."""
        tensor = self.output_tensor(k)
        if not raw and quantized_8bit(tensor):
            q = tensor.quantization
            if not q.per_tensor:
                raise ConversionError(f"output {k} ({tensor.name!r}) is quantized per channel")
            scale, zero = self.graph.quantization_parameters(q, tensor.dtype, self.hint)
            name = self.node("QuantizeLinear", [name, scale, zero])
        elif not raw and np.dtype(tensor.dtype) != np.float32 and np.dtype(tensor.dtype).kind == "f":
            name = self.node("Cast", [name], to=ONNX_TYPES[np.dtype(tensor.dtype)])
        self.converter.values[self.op.outputs[k]] = name


def _same_quantization(a: Tensor, b: Tensor) -> bool:
    if a.type != b.type:
        return False
    if a.quantization is None or b.quantization is None:
        return a.quantization is None and b.quantization is None
    return (np.array_equal(a.quantization.scale, b.quantization.scale)
            and np.array_equal(a.quantization.zero_point, b.quantization.zero_point))
