"""One loader: whatever a user hands to tilecraft, as an MLIR module in our context.

Accepted sources (the same for ``tilecraft.compile``, ``tilecraft.load``, ``tilecraft.tune``
and the CLI): a path to a model file of any format in ``frontend/formats.py`` (``.onnx``,
``.pt2``, TorchScript ``.pt``, Keras ``.keras``/``.h5``, ``.tflite``, ``.mlir``/``.mlirbc``;
the format checked against the content, or named with ``model_format``), an
``onnx.ModelProto``, a ``torch.export.ExportedProgram``, a TorchScript module, a
``keras.Model``, MLIR text or bytecode, an ``mlir.ir.Module`` (copied, never mutated), or a
:class:`Model` (its shape overrides apply).

:func:`resolve_source` first turns the formats translated into others into those: Keras
into ONNX (``frontend/keras``), TorchScript into a ``torch.export`` program
(``frontend/torchscript.py``), TFLite into ONNX (``frontend/tflite``). ONNX then goes
through ``frontend/onnx``, PyTorch programs through ``frontend/torch``. Every framework is
an optional dependency, imported only for its sources.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from mlir import ir

from ..errors import ArgumentTypeError, CompileError, ModelFormatError, ModelImportError, ResourceLimitError
from ..runtime.limits import Limits, check_nesting, check_tensor
from .formats import FORMATS, SUFFIXES, detect_format, supported_formats

MODEL_SUFFIXES = SUFFIXES
# What the importers below read directly; resolve_source turns the other formats into these.
NATIVE_SUFFIXES = (".onnx", ".mlir", ".mlirbc", ".pt2")


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output as the model declares it (``None``: a dynamic dimension)."""

    name: str
    dtype: str
    shape: tuple[int | None, ...] | None


@dataclass
class Model:
    """A model loaded by :func:`tilecraft.load`, ready for :func:`tilecraft.compile`.

    Attributes:
      source: an ``onnx.ModelProto``, MLIR text, or MLIR bytecode (a PyTorch program).
      shape_dict: input shapes overriding the model's (ONNX), passed on to compile.
      name: where it came from (file name).
      torch_program: for a PyTorch program, the ``torch.export.ExportedProgram`` it holds
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
        """Write the model (with the shape overrides applied, for ONNX) to ``path``.

        The suffix must say what is written (``.onnx``, ``.mlir`` text, ``.mlirbc``
        bytecode): a file that :func:`tilecraft.load` could not read back is refused.
        """
        path = Path(path)
        kind = ".mlir" if isinstance(self.source, str) else ".mlirbc" if isinstance(self.source, bytes) else ".onnx"
        if path.suffix != kind:
            raise ModelImportError(
                f"{path}: this model is saved as '*{kind}' (the suffix tells load() how to read it back)")
        if kind == ".mlir":
            path.write_text(self.source)
        elif kind == ".mlirbc":
            path.write_bytes(self.source)
        else:
            import onnx

            from .onnx.model import override_input_shapes

            onnx.save(override_input_shapes(self.source, self.shape_dict), str(path))
        return path


def _format_shape(shape: Sequence[int | None] | None) -> str:
    if shape is None:
        return "scalar"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def is_onnx_proto(source: Any) -> bool:
    return type(source).__name__ == "ModelProto" and type(source).__module__.startswith("onnx")


def is_onnx_source(source: Any) -> bool:
    """An ``onnx.ModelProto`` or a path to an ``.onnx`` file."""
    path = source_path(source)
    return is_onnx_proto(source) or (path is not None and path.suffix == ".onnx")


def is_exported_program(source: Any) -> bool:
    return type(source).__name__ == "ExportedProgram" and type(source).__module__.startswith("torch")


def source_path(source: Any) -> Path | None:
    """``source`` as a file path, when it names one (a string ending in a model suffix)."""
    if isinstance(source, Path):
        return source
    if isinstance(source, str) and "\n" not in source and source.strip().endswith(MODEL_SUFFIXES):
        return Path(source.strip())
    return None


def existing_file(path: Path) -> Path:
    if not path.is_file():
        raise ModelImportError(f"{path}: no such file")
    if path.suffix not in NATIVE_SUFFIXES:
        raise ModelFormatError(f"{path}: unknown model file type; formats:\n{supported_formats()}")
    return path


@dataclass
class Resolved:
    """A source after :func:`resolve_source`: of a kind the importers read directly."""

    source: Any
    shape_dict: dict[str, list[int | None]] | None
    torch_program: Any = None  # the ExportedProgram a TorchScript module became
    name: str | None = None  # the file it came from


def _require(module: str, model_format: str) -> None:
    """A :class:`ModelFormatError` naming the extra when ``module`` is not installed."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        extra = FORMATS[model_format].extra
        raise ModelFormatError(f"reading {model_format} models needs the {module!r} package: "
                               f"pip install 'tilecraft[{extra}]'")


def _is_keras_model(source: Any) -> bool:
    return any(c.__name__ == "Model" and c.__module__.startswith("keras.") for c in type(source).__mro__)


def _is_script_module(source: Any) -> bool:
    return any(c.__name__ == "ScriptModule" and c.__module__.startswith("torch.jit") for c in type(source).__mro__)


def resolve_source(
    source: Any,
    shape_dict: Mapping[str, Sequence[int | None]] | None = None,
    model_format: str | None = None,
) -> Resolved:
    """``source`` as a kind the importers read (ONNX, a torch.export program, MLIR), the
    translated formats translated. ``model_format`` names a file's format when the suffix
    does not (one of ``frontend/formats.FORMATS``); the content must agree either way.

    ``shape_dict``: for a TorchScript module, the shape of each of ``forward``'s inputs
    (consumed here: the program is traced at those shapes); for Keras, ONNX input overrides
    keyed by the Keras input layers' names (passed on)."""
    shape = {k: list(v) for k, v in shape_dict.items()} if shape_dict else None
    if model_format is not None and model_format not in FORMATS:
        raise ModelFormatError(f"unknown model format {model_format!r}; formats:\n{supported_formats()}")
    path = source_path(source)
    if path is None and model_format is not None and isinstance(source, str) and "\n" not in source \
            and Path(source).is_file():
        path = Path(source)
    if path is None:
        return _resolve_object(source, shape, model_format)
    found = detect_format(path, model_format)
    if found == "keras":
        _require("keras", found)
        from .keras import import_keras

        return Resolved(import_keras(path), shape, name=path.name)
    if found == "torchscript":
        _require("torch", found)
        from .torchscript import example_inputs_from_shapes, read_torchscript, torchscript_program

        module = read_torchscript(path)
        program = torchscript_program(module, example_inputs_from_shapes(module, shape))
        return Resolved(program, None, program, path.name)
    if found == "tflite":
        return Resolved(_tflite_as_onnx(path, shape), None, name=path.name)
    native = {"onnx": (".onnx",), "torch": (".pt2",), "mlir": (".mlir", ".mlirbc")}[found]
    if path.suffix in native:
        return Resolved(path, shape, name=path.name)
    if found == "onnx":  # a declared ONNX file under another suffix
        _require("onnx", found)
        from .onnx.model import load_model

        return Resolved(load_model(path), shape, name=path.name)
    if found == "torch":
        return Resolved(read_exported_program(path), shape, name=path.name)
    data = path.read_bytes()
    return Resolved(data if data.startswith(b"ML\xefR") else _read_text(path), shape, name=path.name)


def _resolve_object(source: Any, shape: dict[str, list[int | None]] | None, model_format: str | None) -> Resolved:
    if _is_keras_model(source):
        _check_declared(model_format, "keras", source)
        from .keras import import_keras

        return Resolved(import_keras(source), shape)
    if _is_script_module(source):
        _check_declared(model_format, "torchscript", source)
        from .torchscript import example_inputs_from_shapes, torchscript_program

        program = torchscript_program(source, example_inputs_from_shapes(source, shape))
        return Resolved(program, None, program)
    if model_format == "tflite" and isinstance(source, (bytes, bytearray)):
        return Resolved(_tflite_as_onnx(bytes(source), shape), None)
    return Resolved(source, shape)


def _check_declared(model_format: str | None, actual: str, source: Any) -> None:
    if model_format is not None and model_format != actual:
        raise ModelFormatError(f"model_format={model_format!r}, but the source is a {type(source).__name__} "
                               f"({FORMATS[actual].description})")


def _tflite_as_onnx(source: "Path | bytes", shape: dict[str, list[int | None]] | None) -> Any:
    """The TFLite model as the in-memory ONNX model the TFLite frontend translates it into
    (frontend/tflite), or a :class:`ModelFormatError` where its parser package is missing."""
    if shape:
        raise ModelImportError("shape_dict does not apply to TFLite models: their shapes are fixed by the converter")
    _require("tflite", "tflite")
    from .tflite import tflite_to_onnx

    return tflite_to_onnx(source)


# The custom form of linalg.generic: its parser casts every iterator_types entry to a string
# attribute unchecked, so ``[#linalg.iterator_type<reduction>]`` there aborts the process.
_CUSTOM_GENERIC_ITERATORS = re.compile(r'(?<!")linalg\.generic\s*\{[^}]*?iterator_types\s*=\s*\[([^\]]*)\]')
_STRING_ENTRY = re.compile(r'\s*"[^"]*"\s*')


def check_mlir_text(source: "str | bytes") -> None:
    """What MLIR's parser would abort or overflow its stack on, as typed errors: nesting
    deeper than ``TILECRAFT_MAX_NESTING`` (:class:`ResourceLimitError`) and attributes of the
    wrong kind where the parser casts without checking (:class:`ModelImportError`)."""
    check_nesting(source)
    if not isinstance(source, str):
        return
    for match in _CUSTOM_GENERIC_ITERATORS.finditer(source):
        entries = match.group(1).split(",") if match.group(1).strip() else []
        bad = [e.strip() for e in entries if not _STRING_ENTRY.fullmatch(e)]
        if bad:
            line = source.count("\n", 0, match.start()) + 1
            raise ModelImportError(
                f"line {line}: linalg.generic iterator_types entries must be strings such as "
                f'"parallel" in the custom form, got {bad[0]!r}'
            )


def parse_mlir(source: "str | bytes", context: ir.Context) -> ir.Module:
    """Parse MLIR text or bytecode after :func:`check_mlir_text`."""
    check_mlir_text(source)
    if isinstance(source, str) and not source.isascii():
        try:
            source.encode("utf-8")
        except UnicodeEncodeError:
            raise ModelImportError("the MLIR text is not valid UTF-8") from None
    try:
        return ir.Module.parse(source, context=context)
    except ir.MLIRError as error:
        raise CompileError(f"could not parse the input module: {error}", stage="input") from None


def _element_bytes(element_type: ir.Type) -> int:
    if isinstance(element_type, (ir.IntegerType, ir.FloatType)):
        return max(1, (element_type.width + 7) // 8)
    return 8  # index, complex and others: at most a machine word per part


def check_static_sizes(module: ir.Module) -> None:
    """:class:`ResourceLimitError` for a tensor or memref type of static extents whose element
    count overflows int64 or whose size exceeds ``TILECRAFT_MAX_TENSOR`` (runtime/limits.py).

    Why before the pipeline: MLIR computes strides and sizes in int64 and asserts (the
    process aborts) on overflow, and a terabyte allocation would reach ``malloc`` at run time.
    Dynamic extents count as 1: only what the IR states is checked here.
    """
    limits = Limits.current()
    seen: set[str] = set()
    problems: list[ResourceLimitError] = []  # raised after the walk: MLIR wraps callback errors

    def check_type(value_type: ir.Type, where: ir.Operation) -> None:
        if not isinstance(value_type, ir.ShapedType) or str(value_type) in seen:
            return
        shaped = value_type
        if not shaped.has_rank:
            return
        seen.add(str(value_type))
        dynamic = ir.ShapedType.get_dynamic_size()
        shape = [1 if d == dynamic else d for d in shaped.shape]
        check_tensor(f"{value_type} ({where.name} at {where.location})", shape,
                     _element_bytes(shaped.element_type), limits)

    def visit(op: ir.Operation) -> ir.WalkResult:
        try:
            for result in op.results:
                check_type(result.type, op)
            for region in op.regions:
                for block in region.blocks:
                    for argument in block.arguments:
                        check_type(argument.type, op)
        except ResourceLimitError as error:
            problems.append(error)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if problems:
        raise problems[0]


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ModelImportError(f"{path} is not UTF-8 text (byte {error.start}); MLIR bytecode "
                               "goes in a .mlirbc file") from None


def read_exported_program(path: Path) -> Any:
    """The ``torch.export.save``'d program in ``path``, decomposed to core ATen ops."""
    import torch

    try:
        program = torch.export.load(str(path))
    except Exception as error:  # torch raises many kinds for a file that is not a program
        raise ModelImportError(f"{path} is not a torch.export program: {error}") from None
    return program


def exported_program_bytecode(program: Any) -> bytes:
    """The MLIR bytecode of an exported program (imported in a context of its own),
    decomposed as ``tilecraft.torch.compile`` decomposes (frontend/torch/export.py: the ops
    the importer keeps whole, ``linear``, the random and recurrent ops, stay whole)."""
    from .torch import import_exported
    from .torch.export import decompose

    module = import_exported(decompose(program))
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    return buffer.getvalue()


def load_module(
    source: Any,
    context: ir.Context,
    *,
    shape_dict: Mapping[str, Sequence[int | None]] | None = None,
    name: str | None = None,
) -> ir.Module:
    """An MLIR module in ``context`` for ``source`` (see the module docstring), its static
    tensor sizes checked against the limits (:func:`check_static_sizes`). ``name``: what
    error messages call an ONNX model given as a proto (the path it was read from)."""
    module = _load_module(source, context, shape_dict=shape_dict, name=name)
    check_static_sizes(module)
    return module


def _load_module(
    source: Any,
    context: ir.Context,
    *,
    shape_dict: Mapping[str, Sequence[int | None]] | None = None,
    name: str | None = None,
) -> ir.Module:
    if isinstance(source, Model):
        shape_dict = source.shape_dict if shape_dict is None else shape_dict
        source = source.source
    resolved = resolve_source(source, shape_dict)
    source, shape_dict = resolved.source, resolved.shape_dict
    path = source_path(source)
    if path is not None:
        path = existing_file(path)
        if path.suffix == ".pt2":
            source = read_exported_program(path)
        elif path.suffix == ".onnx":
            source = path
        else:
            if shape_dict:
                raise ModelImportError("shape_dict applies to ONNX models only")
            return parse_mlir(path.read_bytes() if path.suffix == ".mlirbc" else _read_text(path), context)
    if is_onnx_proto(source) or isinstance(source, Path):
        from .onnx import import_model  # the onnx package is an optional dependency

        return import_model(source, shape_dict, context=context, name=name)
    if shape_dict:
        raise ModelImportError("shape_dict applies to ONNX models only")
    if is_exported_program(source):
        source = exported_program_bytecode(source)
    if isinstance(source, ir.Module):
        buffer = io.BytesIO()
        source.operation.write_bytecode(buffer)
        source = buffer.getvalue()
    if not isinstance(source, (str, bytes)):
        raise unsupported_source(source)
    return parse_mlir(source, context)


def unsupported_source(source: Any) -> ArgumentTypeError:
    return ArgumentTypeError(
        "expected MLIR text or bytecode, an mlir.ir.Module, an onnx.ModelProto, a "
        "torch.export.ExportedProgram, a TorchScript module, a keras.Model or a path to a model "
        f"file ({', '.join(MODEL_SUFFIXES)}), got {type(source).__name__}"
    )
