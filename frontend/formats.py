"""Which model format a file holds, from its suffix and its first bytes.

Why both: a suffix is what users and tvmc's ``--model-format`` reason with, but ``.pt``,
``.h5`` or a renamed file can lie, and a file handed to the wrong reader fails with that
reader's confusing error (or, for a TorchScript archive given to ``torch.export.load``, a
pickle error). The content decides when it is recognizable (magic bytes, a zip archive's
member names); the suffix or the declared format must agree with it.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelFormatError


@dataclass(frozen=True)
class ModelFormat:
    """A model format: its name (``--model-format``), suffixes and the extra that reads it."""

    name: str
    suffixes: tuple[str, ...]
    extra: str | None
    description: str


FORMATS: dict[str, ModelFormat] = {f.name: f for f in (
    ModelFormat("onnx", (".onnx",), "onnx", "ONNX model"),
    ModelFormat("torch", (".pt2",), "torch", "torch.export program (torch.export.save)"),
    ModelFormat("torchscript", (".pt", ".pth", ".torchscript"), "torch",
                "TorchScript archive (torch.jit.save of a traced or scripted module)"),
    ModelFormat("keras", (".keras", ".h5", ".hdf5"), "keras", "Keras model (model.save)"),
    ModelFormat("tflite", (".tflite",), "tflite", "TensorFlow Lite flatbuffer"),
    ModelFormat("mlir", (".mlir", ".mlirbc"), None, "MLIR text or bytecode"),
)}

SUFFIXES: tuple[str, ...] = tuple(s for f in FORMATS.values() for s in f.suffixes)

_HDF5 = b"\x89HDF\r\n\x1a\n"
_MLIR_BYTECODE = b"ML\xefR"
_ZIP = b"PK\x03\x04"


def supported_formats() -> str:
    """One line per format for error messages: name, suffixes, the extra to install."""
    lines = []
    for f in FORMATS.values():
        extra = f" (pip install 'tilecraft[{f.extra}]')" if f.extra else ""
        lines.append(f"  {f.name}: {f.description}, {', '.join(f.suffixes)}{extra}")
    return "\n".join(lines)


def format_of_suffix(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return next((f.name for f in FORMATS.values() if suffix in f.suffixes), None)


def format_of_content(path: Path) -> str | None:
    """The format ``path``'s bytes show, ``None`` when they show none (an ONNX protobuf has
    no magic number; MLIR text is text). Raises :class:`ModelFormatError` for a zip archive
    that cannot be read (truncated) or that holds no model."""
    with path.open("rb") as file:
        head = file.read(16)
    if head.startswith(_MLIR_BYTECODE):
        return "mlir"
    if head.startswith(_HDF5):
        return "keras"
    if len(head) >= 8 and head[4:8] == b"TFL3":
        return "tflite"
    if head.startswith(_ZIP):
        return _zip_format(path)
    return None


def _zip_format(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise ModelFormatError(f"{path} is a damaged or truncated zip archive ({error}); saved Keras "
                               "(.keras), TorchScript (.pt) and torch.export (.pt2) models are zip "
                               "archives") from None
    tails = {name.split("/", 1)[-1] for name in names}
    if "config.json" in names and any(n.endswith(".weights.h5") or n == "metadata.json" for n in names):
        return "keras"
    if "archive_format" in tails or any(t.startswith("serialized_exported_program") or
                                        t.startswith("models/") and t.endswith(".json") for t in tails):
        return "torch"
    if "constants.pkl" in tails or any(t.startswith("code/") for t in tails):
        return "torchscript"
    if "data.pkl" in tails:
        raise ModelFormatError(
            f"{path} was written by torch.save (a state dict or a pickled nn.Module): it holds "
            "weights, not a program. Save a program with torch.jit.save(torch.jit.trace(model, x)) "
            "or torch.export.save(torch.export.export(model, (x,)))")
    raise ModelFormatError(f"{path} is a zip archive of no model format tilecraft reads; formats:\n"
                           + supported_formats())


def detect_format(path: Path, declared: str | None = None) -> str:
    """The format of the model file ``path``: the declared one (``--model-format``), or the
    suffix's, checked against the content; the content's alone for an unknown suffix."""
    if declared is not None and declared not in FORMATS:
        raise ModelFormatError(f"unknown model format {declared!r}; formats:\n{supported_formats()}")
    if not path.is_file():
        raise ModelFormatError(f"{path}: no such file")
    claimed = declared or format_of_suffix(path)
    content = format_of_content(path)
    if claimed is None and content is None:
        raise ModelFormatError(
            f"{path}: unknown model format (suffix {path.suffix or '(none)'!r}, content not recognized); "
            f"name it with model_format= (CLI: --model-format); formats:\n{supported_formats()}")
    if claimed is not None and content is not None and claimed != content:
        said = f"model_format={declared!r}" if declared else f"its suffix {path.suffix!r} says {claimed}"
        raise ModelFormatError(
            f"{path}: {said}, but its content is a {FORMATS[content].description}; rename the file "
            f"or pass model_format={content!r} (CLI: --model-format {content})")
    return claimed or content  # type: ignore[return-value]
