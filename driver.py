"""The Python twin of the ``tilecraft`` CLI, shaped like TVM's ``tvmc`` driver.

    model = tilecraft.load("resnet50.onnx", shape_dict={"data": [1, 3, 224, 224]})
    print(model.summary())
    tilecraft.compile(model, target="llvm", package_path="resnet50.tar")
    result = tilecraft.run("resnet50.tar", {"data": x}, repeat=10)
    print(result.outputs["output"].argmax(), result.format_times())

``tilecraft.compile`` is the compiler itself (pipelines/compiler.py) and accepts the model
object; ``tilecraft.tune`` is the tuner (tuning/). This module imports neither MLIR nor
onnx at module level: ``tilecraft.run`` on a package works in a process without the MLIR
bindings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .errors import ArgumentValueError, ModelImportError
from .runtime.package import KernelTime, Package, load as load_package
from .runtime.timing import Timing, measure

MODEL_SUFFIXES = (".onnx", ".mlir", ".mlirbc", ".pt2")


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output as the model declares it (``None``: a dynamic dimension)."""

    name: str
    dtype: str
    shape: tuple[int | None, ...] | None


def _format_shape(shape: Sequence[int | None] | None) -> str:
    if shape is None:
        return "scalar"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


@dataclass
class Model:
    """A model loaded by :func:`load`, ready for :func:`tilecraft.compile`.

    Attributes:
      source: an ``onnx.ModelProto``, MLIR text, or MLIR bytecode (a PyTorch program).
      shape_dict: input shapes overriding the model's (ONNX), passed on to compile.
      name: where it came from (file name).
      torch_program: for a ``.pt2`` file, the ``torch.export.ExportedProgram`` it holds
        (the PyTorch anchor of ``tilecraft bench``).
    """

    source: Any
    shape_dict: dict[str, list[int | None]] | None = None
    name: str = "model"
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    operators: dict[str, int] = field(default_factory=dict)
    torch_program: Any = None

    @property
    def output_names(self) -> list[str] | None:
        return [o.name for o in self.outputs] if self.outputs else None

    def summary(self) -> str:
        """Inputs, outputs and the operator histogram (what ``tvmc``'s summary shows)."""
        lines = [f"model: {self.name}", "inputs:"]
        lines += [f"  {t.name}: {t.dtype} {_format_shape(t.shape)}" for t in self.inputs]
        lines.append("outputs:")
        lines += [f"  {t.name}: {t.dtype} {_format_shape(t.shape)}" for t in self.outputs]
        if self.operators:
            lines.append(f"operators ({sum(self.operators.values())} nodes):")
            width = max(len(op) for op in self.operators)
            lines += [f"  {op:<{width}}  {count}" for op, count in sorted(self.operators.items())]
        return "\n".join(lines)

    def save(self, path: "str | os.PathLike[str]") -> Path:
        """Write the model (with the shape overrides applied, for ONNX) to ``path``."""
        path = Path(path)
        if isinstance(self.source, (str, bytes)):
            path.write_text(self.source) if isinstance(self.source, str) else path.write_bytes(self.source)
        else:
            import onnx

            from .frontend.onnx.model import override_input_shapes

            onnx.save(override_input_shapes(self.source, self.shape_dict), str(path))
        return path


def is_onnx_source(source: Any) -> bool:
    """An ``onnx.ModelProto`` or a path to an ``.onnx`` file (what :func:`load` reads as ONNX)."""
    if type(source).__name__ == "ModelProto" and type(source).__module__.startswith("onnx"):
        return True
    return isinstance(source, (str, Path)) and "\n" not in str(source) and str(source).strip().endswith(".onnx")


def _onnx_tensor_info(value: Any, overrides: Mapping[str, Sequence[int | None]]) -> TensorInfo:
    from onnx import helper

    tensor = value.type.tensor_type
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)).name if tensor.elem_type else "?"
    if value.name in overrides:
        shape = tuple(None if d is None else int(d) for d in overrides[value.name])
    elif tensor.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
    else:
        shape = None
    return TensorInfo(value.name, dtype, shape)


def load(
    path_or_module: Any, shape_dict: Mapping[str, Sequence[int | None]] | None = None
) -> Model:
    """Load an ONNX model (path or ``onnx.ModelProto``) or MLIR (path to ``.mlir`` or text).

    ``shape_dict`` fixes input shapes (``None`` keeps a dimension dynamic), as in
    ``tvmc.load(..., shape_dict=...)``; unknown input names raise :class:`ModelImportError`.
    """
    shape_dict = {k: list(v) for k, v in shape_dict.items()} if shape_dict else None
    path = None
    if isinstance(path_or_module, Path) or (
        isinstance(path_or_module, str) and "\n" not in path_or_module
        and path_or_module.strip().endswith(MODEL_SUFFIXES)
    ):
        path = Path(path_or_module)
    if path is not None and path.suffix == ".pt2":
        return _load_exported_program(path, shape_dict)
    if path is not None and path.suffix != ".onnx":
        if not path.is_file():
            raise ModelImportError(f"{path}: no such file")
        if shape_dict:
            raise ModelImportError("shape_dict applies to ONNX models only")
        return _mlir_model(path.read_text() if path.suffix == ".mlir" else path.read_bytes(), path.name)
    if path is None and isinstance(path_or_module, str):
        if shape_dict:
            raise ModelImportError("shape_dict applies to ONNX models only")
        return _mlir_model(path_or_module, "module.mlir")
    from .frontend.onnx.model import infer_shapes, load_model, override_input_shapes

    if path is not None and not path.is_file():
        raise ModelImportError(f"{path}: no such file")
    proto = load_model(path if path is not None else path_or_module)
    weights = {t.name for t in proto.graph.initializer}
    graph_inputs = [v for v in proto.graph.input if v.name not in weights]
    unknown = sorted(set(shape_dict or {}) - {v.name for v in graph_inputs})
    if unknown:
        raise ModelImportError(
            f"shape_dict names {unknown}, which are not inputs of the model; inputs: "
            f"{[v.name for v in graph_inputs]}"
        )
    operators: dict[str, int] = {}
    for node in proto.graph.node:
        operators[node.op_type] = operators.get(node.op_type, 0) + 1
    return Model(
        proto,
        shape_dict,
        path.name if path is not None else (proto.graph.name or "model"),
        [_onnx_tensor_info(v, shape_dict or {}) for v in graph_inputs],
        [_onnx_tensor_info(v, {}) for v in infer_shapes(override_input_shapes(proto, shape_dict)).graph.output],
        operators,
    )


def _load_exported_program(path: Path, shape_dict: Mapping[str, Any] | None) -> Model:
    """A ``torch.export.save``'d program, imported through the PyTorch frontend."""
    if not path.is_file():
        raise ModelImportError(f"{path}: no such file")
    if shape_dict:
        raise ModelImportError("shape_dict applies to ONNX models; a .pt2 program has its shapes")
    import io

    import torch

    from .frontend.torch import import_exported

    try:
        program = torch.export.load(str(path))
    except Exception as error:  # torch raises many kinds for a file that is not a program
        raise ModelImportError(f"{path} is not a torch.export program: {error}") from None
    module = import_exported(program.run_decompositions())
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    model = _mlir_model(buffer.getvalue(), path.name)
    model.torch_program = program
    return model


def _mlir_model(source: "str | bytes", name: str) -> Model:
    """A model of MLIR text or bytecode, its inputs and outputs read from the entry function
    (none listed when the module has several public functions: compile picks with entry=)."""
    from mlir import ir

    from .errors import EntryPointError
    from .frontend.loader import load_module
    from .pipelines.compiler import find_entry
    from .runtime.signature import EntrySignature

    context = ir.Context()
    module = load_module(source, context)
    try:
        with context:
            signature = EntrySignature.from_function(find_entry(module, None))
    except EntryPointError:
        return Model(source, None, name)
    return Model(
        source, None, name,
        [TensorInfo(s.name, s.dtype.name, s.shape) for s in signature.arguments],
        [TensorInfo(s.name, s.dtype.name, s.shape) for s in signature.results],
    )


@dataclass
class RunResult:
    """What :func:`run` returns: outputs by name, and timings when asked for."""

    outputs: dict[str, np.ndarray]
    timing: Timing | None = None
    kernels: list[KernelTime] | None = None

    def save(self, path: "str | os.PathLike[str]") -> None:
        """Write the outputs to an ``.npz`` file, one array per output name."""
        np.savez(path, **self.outputs)

    def format_times(self) -> str:
        """The ``Execution time summary`` table ``tvmc run --print-time`` prints."""
        if self.timing is None:
            return "no timing: run with repeat >= 1 and print_time"
        t = self.timing
        header = f"{'mean (ms)':>12} {'median (ms)':>12} {'max (ms)':>12} {'min (ms)':>12} {'std (ms)':>12}"
        values = " ".join(f"{v * 1e3:12.4f}" for v in (t.mean, t.median, t.max, t.min, t.std))
        return f"Execution time summary:\n{header}\n{values}"

    def format_profile(self) -> str:
        """Per-kernel time of the profiled call, largest first, with its share of the total."""
        if not self.kernels:
            return "no kernel profile"
        total = sum(k.seconds for k in self.kernels) or 1.0
        width = max(len(k.name) for k in self.kernels)
        lines = [f"{'kernel':<{width}} {'time (ms)':>10} {'share':>7}"]
        for kernel in sorted(self.kernels, key=lambda k: k.seconds, reverse=True):
            lines.append(f"{kernel.name:<{width}} {kernel.seconds * 1e3:10.4f} {kernel.seconds / total:7.1%}")
        lines.append(f"{'total (kernels)':<{width}} {total * 1e3:10.4f}")
        return "\n".join(lines)


def random_inputs(package: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for every argument of a :class:`Package` or ``CompiledModule`` (uniform
    [0, 1) floats, small integers), as tvmc does without ``--inputs``; a dynamic dimension
    needs real inputs."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for spec in package.signature.arguments:
        shape = () if spec.shape is None else spec.shape
        if any(d is None for d in shape):
            raise ArgumentValueError(
                f"input {spec.name!r} has a dynamic shape {spec.mlir_style}: pass inputs"
            )
        if spec.dtype.kind == "f":
            inputs[spec.name] = rng.random(shape).astype(spec.dtype)
        elif spec.dtype.kind == "b":
            inputs[spec.name] = rng.random(shape) < 0.5
        else:
            inputs[spec.name] = rng.integers(0, 8, size=shape).astype(spec.dtype)
    return inputs


def load_inputs(path: "str | os.PathLike[str]") -> dict[str, np.ndarray]:
    """Arrays of an ``.npz`` file by name; :class:`ArgumentValueError` when unreadable."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise ArgumentValueError(f"{path}: no such inputs file") from None
    except (OSError, ValueError) as error:
        raise ArgumentValueError(f"{path}: not a readable .npz file ({error})") from None


def run(
    package: "str | os.PathLike[str] | Package",
    inputs: "Mapping[str, np.ndarray] | str | os.PathLike[str] | None" = None,
    *,
    repeat: int = 0,
    number: int = 1,
    profile: bool = False,
) -> RunResult:
    """Run a package once (and time it ``repeat`` times x ``number`` calls when ``repeat``).

    ``inputs``: arrays by input name, an ``.npz`` path, or ``None`` for seeded random inputs.
    ``profile``: also run the package's profiling variant once and report per-kernel time.
    """
    if not isinstance(package, Package):
        package = load_package(package)
    if inputs is None:
        inputs = random_inputs(package)
    elif not isinstance(inputs, Mapping):
        inputs = load_inputs(inputs)
    unknown = sorted(set(inputs) - set(package.input_names))
    if unknown:
        raise ArgumentValueError(
            f"inputs {unknown} are not inputs of the package; inputs: {package.input_names}"
        )
    results = package(**inputs)
    results = results if isinstance(results, tuple) else (results,)
    outputs = dict(zip(package.output_names, results))
    timing = measure(lambda: package(**inputs), number=number, repeat=repeat) if repeat > 0 else None
    kernels = package.profile(**inputs)[1] if profile else None
    return RunResult(outputs, timing, kernels)
