"""ONNX models with string tensors: the numeric segments compiled, the string nodes on the host.

``frontend/onnx/string_partition.py`` cuts the graph where strings begin and end; this module
compiles each numeric segment with the caller's options (the same pipeline a model without
strings gets) and runs the segments in order. Host segments run through ``onnx.reference``,
onnx's own implementation of each op in numpy (Python's ``re`` for RegexFullMatch, UTF-8
throughout), except where it departs from the specification (frontend/onnx/host_ops.py).
Nothing of a host segment reaches native code: string tensors stay numpy object arrays.

What is not offered: a package or C sources (both hold compiled code only, and a host segment
is Python) and the CUDA target's device arrays across segments (each compiled segment is
called with host arrays, as any CompiledModule is).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import HostOpError, ModelImportError
from ..frontend.onnx.host_ops import HOST_OPS
from ..frontend.onnx.model import onnx_dtype
from ..frontend.onnx.string_partition import Segment, StringPartition
from ..pipelines.jit.compiled_module import CompiledModule
from ..pipelines.target import Target
from ..runtime.signature import EntrySignature, TensorSpec
from ..errors import IRNotKeptError

STRING_DTYPE = np.dtype(object)


def _tensor_spec(value: Any, *, is_input: bool) -> TensorSpec:
    """The spec of an ONNX graph input or output (``value`` a ValueInfoProto). An input must
    have a known rank (arguments are checked against it); an output of unknown rank gets
    ``shape=None``."""
    import onnx

    tensor = value.type.tensor_type
    if tensor.elem_type == onnx.TensorProto.STRING:
        dtype, element = STRING_DTYPE, "string"
    else:
        dtype = onnx_dtype(tensor.elem_type, f"graph value {value.name!r}")
        element = str(dtype)
    shape = (tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
             if tensor.HasField("shape") else None)
    if shape is None and is_input:
        raise ModelImportError(f"graph value {value.name!r} has no known rank; pass shape_dict")
    return TensorSpec(value.name, dtype, shape, element)


class HostSegment:
    """A segment of string nodes, run by onnx's reference evaluator."""

    def __init__(self, segment: Segment) -> None:
        from onnx.reference import ReferenceEvaluator

        self.segment = segment
        try:
            self._evaluator = ReferenceEvaluator(segment.model, new_ops=list(HOST_OPS))
        except Exception as error:  # unknown ops, bad attributes: whatever onnx.reference raises
            raise ModelImportError(
                f"nodes on string tensors ({', '.join(segment.op_types)}) cannot run on the host: "
                f"{str(error).splitlines()[0]}") from error

    def __call__(self, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        feeds = dict(zip(self.segment.inputs, arrays))
        try:
            results = self._evaluator.run(None, feeds)
        except Exception as error:  # the reference ops raise whatever numpy or re raise
            raise HostOpError(
                f"host nodes ({', '.join(self.segment.op_types)}) failed: {type(error).__name__}: "
                f"{str(error).splitlines()[0] if str(error) else ''}") from error
        return tuple(_as_onnx_array(r) for r in results)


def _as_onnx_array(result: Any) -> np.ndarray:
    """A reference op's result as onnxruntime returns it: strings as an object array (some
    reference ops return numpy ``str_`` arrays, ``<U9``)."""
    array = np.asarray(result)
    return array.astype(object) if array.dtype.kind == "U" else array


class PartitionedModule:
    """The result of :func:`tilecraft.compile` for an ONNX model with string tensors.

    Called like :class:`CompiledModule`: numpy arrays positionally or by input name (string
    inputs as arrays of ``str``), every argument checked against :attr:`signature`; returns
    one array or a tuple (string outputs as numpy object arrays, as onnxruntime returns them).
    """

    def __init__(self, partition: StringPartition, compile_segment: Callable[[Segment], CompiledModule],
                 target: Target) -> None:
        self.target = target  # of every compiled segment
        arguments = tuple(_tensor_spec(v, is_input=True) for v in partition.inputs)
        results = tuple(_tensor_spec(v, is_input=False) for v in partition.outputs)
        self.signature = EntrySignature("main", arguments, results)
        self._parts: list[tuple[Segment, Callable[..., Any]]] = [
            (segment, HostSegment(segment) if segment.on_host else compile_segment(segment))
            for segment in partition.segments
        ]
        from onnx import numpy_helper

        self._constants = {name: numpy_helper.to_array(t) for name, t in partition.constant_outputs.items()}
        self.compile_seconds = _summed([m.compile_seconds or {} for m in self.compiled_modules])
        self.kernel_count = sum(m.kernel_count or 0 for m in self.compiled_modules)

    @property
    def compiled_modules(self) -> list[CompiledModule]:
        """The compiled segments, in the order they run."""
        return [part for segment, part in self._parts if not segment.on_host]

    @property
    def segments(self) -> list[tuple[str, list[str]]]:
        """``("host" | "compiled", op types)`` per segment, in the order they run."""
        return [("host" if s.on_host else "compiled", s.op_types) for s, _ in self._parts]

    def ir(self, stage: str = "llvm") -> str:
        """The IR of the compiled segments after ``stage``, each under a ``// segment k``
        header (k counts all segments, host ones included)."""
        texts = [f"// segment {number}: {', '.join(segment.op_types)}\n{part.ir(stage)}"
                 for number, (segment, part) in enumerate(self._parts) if not segment.on_host]
        if not texts:
            raise IRNotKeptError("every node of this model runs on the host (string tensors): there is no IR")
        return "\n".join(texts)

    def __call__(self, *args: Any, **kwargs: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        arrays = self.signature.bind(args, kwargs)
        values: dict[str, np.ndarray] = dict(self._constants)
        values.update((spec.name, array) for spec, array in zip(self.signature.arguments, arrays))
        for segment, run in self._parts:
            outputs = run(*[values[name] for name in segment.inputs])
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            values.update(zip(segment.outputs, outputs))
        results = tuple(values[spec.name] for spec in self.signature.results)
        return results[0] if len(results) == 1 else results

    def __repr__(self) -> str:
        kinds = "+".join(kind for kind, _ in self.segments)
        return f"<PartitionedModule {self.signature} segments={kinds}>"


def _summed(per_module: Sequence[Mapping[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for seconds in per_module:
        for key, value in seconds.items():
            total[key] = total.get(key, 0.0) + value
    return total
