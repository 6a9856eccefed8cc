"""Extern functions: code outside the compiled module that the module calls by name.

``tilecraft.extern.register_c`` names a C function in a shared library,
``tilecraft.extern.register_python`` a Python callable on numpy arrays. Both are called in
destination-passing style: the inputs, then preallocated outputs the function fills. In IR
an extern is a ``func.call`` to a declared ``func.func private @name`` (with
``llvm.emit_c_interface``: the callee receives pointers to memref descriptors, so one C
function serves every shape of its operands; pipelines/tensor/extern.py rewrites calls on tensors
into that form).

Why this module is in runtime/ (numpy and ctypes only): the registry is read by the JIT, by
the package writer and by a package loaded without MLIR; the C side of an extern never
needs MLIR.
"""

from __future__ import annotations

import ctypes
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import ExternError, ExternLibraryError, ExternSignatureError

# MLIR element type -> (numpy dtype, ctypes scalar, C type)
ELEMENT_TYPES: dict[str, tuple[np.dtype, type, str]] = {
    "f32": (np.dtype(np.float32), ctypes.c_float, "float"),
    "f64": (np.dtype(np.float64), ctypes.c_double, "double"),
    "i8": (np.dtype(np.int8), ctypes.c_int8, "int8_t"),
    "i32": (np.dtype(np.int32), ctypes.c_int32, "int32_t"),
    "i64": (np.dtype(np.int64), ctypes.c_int64, "int64_t"),
    # half precision and 16-bit integers (random ops on float16 tensors); f16 in memrefs
    # only (ctypes has no half type to take a scalar one by value: ArgSpec.parse refuses it)
    "f16": (np.dtype(np.float16), ctypes.c_uint16, "_Float16"),
    "i16": (np.dtype(np.int16), ctypes.c_int16, "int16_t"),
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
# A dotted name (TVM's global functions: "env.linear"): C identifiers joined by dots.
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
# The prefix of the symbol a dotted name is called by (symbol_name); reserved.
DOTTED_PREFIX = "_tcx_"
_MEMREF = re.compile(r"memref<((?:(?:\d+|\?)x)*)(\w+)>$")
# The prefix MLIR's C interface gives the wrapper of a function declared with
# llvm.emit_c_interface: a call of @name is a call of _mlir_ciface_name.
C_INTERFACE_PREFIX = "_mlir_ciface_"


@dataclass(frozen=True)
class ArgSpec:
    """One parameter of an extern: a memref (``shape`` given, ``None`` for a dynamic dim) or
    a scalar (``shape`` is ``None``), of element type ``element`` (``"f32"``, ``"i32"``...)."""

    element: str
    shape: tuple[int | None, ...] | None

    @classmethod
    def parse(cls, text: "str | ArgSpec") -> "ArgSpec":
        """``"memref<?x784xf32>"`` or a scalar element type ``"i32"``."""
        if isinstance(text, ArgSpec):
            return text
        text = text.strip()
        match = _MEMREF.match(text)
        if match:
            dims = tuple(None if d == "?" else int(d) for d in match.group(1).split("x") if d)
            element = match.group(2)
        else:
            dims, element = None, text
        if element not in ELEMENT_TYPES:
            raise ExternSignatureError(
                f"extern parameter {text!r}: expected 'memref<AxBx...xT>' or a scalar type, "
                f"T one of {sorted(ELEMENT_TYPES)}")
        if dims is None and element == "f16":
            raise ExternSignatureError(f"extern parameter {text!r}: a scalar f16 is not supported "
                                       "(pass it as memref<1xf16>)")
        return cls(element, dims)

    @property
    def is_scalar(self) -> bool:
        return self.shape is None

    @property
    def dtype(self) -> np.dtype:
        return ELEMENT_TYPES[self.element][0]

    def accepts(self, element: str, shape: "tuple[int | None, ...] | None") -> bool:
        """True when an operand of ``element`` and ``shape`` (``None``: scalar) may be passed."""
        if element != self.element or (shape is None) != self.is_scalar:
            return False
        if shape is None:
            return True
        return len(shape) == len(self.shape) and all(
            want is None or want == have for want, have in zip(self.shape, shape))

    def __str__(self) -> str:
        if self.shape is None:
            return self.element
        return "memref<" + "".join(("?" if d is None else str(d)) + "x" for d in self.shape) + self.element + ">"


@dataclass(frozen=True)
class ExternFunction:
    """A registered extern: ``inputs`` then ``outputs`` (destination-passing style), and
    either a C ``symbol`` in ``library`` or a Python ``function``.

    ``dependencies`` are shared libraries ``library`` needs that the dynamic loader may not
    find by itself (absolute paths); they are loaded first, process-wide, and a package
    names them instead of carrying them.
    """

    name: str
    inputs: tuple[ArgSpec, ...]
    outputs: tuple[ArgSpec, ...]
    library: Path | None = None
    symbol: str | None = None
    function: Callable[..., None] | None = None
    dependencies: tuple[str, ...] = ()

    @property
    def symbol_name(self) -> str:
        """The symbol the compiled code calls this extern by (``_mlir_ciface_`` + it): the
        name itself when it is a C identifier, else :func:`symbol_name` of the dotted name."""
        return symbol_name(self.name)

    @property
    def is_python(self) -> bool:
        return self.function is not None

    @property
    def parameters(self) -> tuple[ArgSpec, ...]:
        return self.inputs + self.outputs

    def load(self) -> "tuple[int, object]":
        """The address the JIT binds ``_mlir_ciface_<name>`` to, and what must stay alive
        while compiled code may call it (the library, or the ctypes callback)."""
        if self.function is not None:
            callback = _python_callback(self)
            return ctypes.cast(callback, ctypes.c_void_p).value, callback
        library = load_library(self)
        return ctypes.cast(getattr(library, self.symbol), ctypes.c_void_p).value, library

    def c_stub(self) -> str:
        """C source defining ``_mlir_ciface_<name>`` as a call of ``symbol``: how a package's
        shared library reaches a C extern whose symbol has another name."""
        params = [ELEMENT_TYPES[p.element][2] if p.is_scalar else "void *" for p in self.parameters]
        formals = ", ".join(f"{t} a{i}" for i, t in enumerate(params)) or "void"
        actuals = ", ".join(f"a{i}" for i in range(len(params)))
        return (f"extern void {self.symbol}({', '.join(params) or 'void'});\n"
                f"__attribute__((visibility(\"hidden\"))) void {C_INTERFACE_PREFIX}{self.symbol_name}({formals}) "
                f"{{ {self.symbol}({actuals}); }}\n")


_REGISTRY: dict[str, ExternFunction] = {}


def symbol_name(name: str) -> str:
    """The C identifier a registered extern name is called by in IR and machine code.

    A C identifier stays as it is; a dotted name (``env.linear``) becomes
    ``_tcx_`` + each part prefixed by its length (``_tcx_3env6linear``, as C++ mangles
    nested names). Why a mangling and not ``env_linear``: it is one to one, so two dotted
    names never share a symbol, and :func:`lookup` finds the name again from the symbol a
    module records.
    """
    if _NAME.match(name):
        return name
    return DOTTED_PREFIX + "".join(f"{len(part)}{part}" for part in name.split("."))


def _dotted_name(symbol: str) -> str | None:
    """The dotted name :func:`symbol_name` made ``symbol`` from, or None."""
    if not symbol.startswith(DOTTED_PREFIX):
        return None
    parts, rest = [], symbol[len(DOTTED_PREFIX):]
    while rest:
        digits = re.match(r"[0-9]+", rest)
        if digits is None:
            return None
        length = int(digits.group())
        parts.append(rest[digits.end():digits.end() + length])
        rest = rest[digits.end() + length:]
    return ".".join(parts)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not (_NAME.match(name) or _DOTTED_NAME.match(name)):
        raise ExternSignatureError(f"extern name {name!r} must be a C identifier or C identifiers "
                                   "joined by dots (env.linear)")
    if name.startswith(DOTTED_PREFIX):
        raise ExternSignatureError(f"extern name {name!r}: the prefix {DOTTED_PREFIX!r} is reserved "
                                   "for the symbols of dotted names")


def _specs(specs: Sequence["str | ArgSpec"], what: str, name: str) -> tuple[ArgSpec, ...]:
    if isinstance(specs, str):
        raise ExternSignatureError(f"extern {name!r}: {what} must be a list of types, got one string")
    parsed = tuple(ArgSpec.parse(s) for s in specs)
    scalars = [str(spec) for spec in parsed if spec.is_scalar]
    if what == "outputs" and scalars:
        # Destination-passing style: the caller allocates each output and the callee fills
        # it; a scalar passed by value has nowhere to be written.
        raise ExternSignatureError(f"extern {name!r}: outputs must be memrefs the caller allocates, "
                                   f"got {', '.join(scalars)} (return a scalar as memref<1x...>)")
    return parsed


def load_library(extern: ExternFunction) -> ctypes.CDLL:
    """Load ``extern``'s dependencies and library (process-wide) and check its symbol."""
    try:
        for dependency in extern.dependencies:
            ctypes.CDLL(dependency, mode=ctypes.RTLD_GLOBAL)
        library = ctypes.CDLL(str(extern.library), mode=ctypes.RTLD_GLOBAL)
    except OSError as error:
        raise ExternLibraryError(f"extern {extern.name!r}: cannot load {extern.library} ({error})") from None
    if not hasattr(library, extern.symbol):
        raise ExternLibraryError(f"extern {extern.name!r}: {extern.library} has no symbol {extern.symbol!r}")
    return library


def register_c(
    name: str,
    library: "str | Path",
    symbol: str | None = None,
    *,
    inputs: Sequence["str | ArgSpec"],
    outputs: Sequence["str | ArgSpec"] = (),
    dependencies: Sequence[str] = (),
) -> ExternFunction:
    """Register the C function ``symbol`` (default: ``name``) of the shared library
    ``library`` as the extern ``name``. ``name`` may be dotted (``env.linear``, as TVM's
    global functions are named); ``symbol`` is then required.

    The function takes one pointer to a memref descriptor per memref parameter (MLIR's C
    interface: ``{T *allocated, T *aligned; int64_t offset, sizes[rank], strides[rank]}``)
    and scalars by value, inputs first, and returns nothing. The library is loaded and the
    symbol looked up now, so a wrong path fails here (:class:`ExternLibraryError`).
    """
    _check_name(name)
    if symbol is None and not _NAME.match(name):
        raise ExternSignatureError(f"extern {name!r}: a dotted name is no C symbol; name the library's "
                                   "function with symbol=")
    extern = ExternFunction(name, _specs(inputs, "inputs", name), _specs(outputs, "outputs", name),
                            library=Path(library).resolve(), symbol=symbol or name,
                            dependencies=tuple(str(d) for d in dependencies))
    _check_name(extern.symbol)
    if not extern.library.is_file():
        raise ExternLibraryError(f"extern {name!r}: no shared library at {library}")
    load_library(extern)
    _REGISTRY[name] = extern
    return extern


def register_python(
    name: str,
    function: Callable[..., None],
    *,
    inputs: Sequence["str | ArgSpec"],
    outputs: Sequence["str | ArgSpec"] = (),
) -> ExternFunction:
    """Register ``function(*inputs, *outputs)`` as the extern ``name``: memref parameters
    arrive as numpy arrays viewing the compiled code's buffers (write the results into the
    output arrays, e.g. ``np.matmul(x, w, out=y)``), scalars as Python numbers. Such a module
    runs in this process only: a package that calls it is refused at compile time."""
    _check_name(name)
    if not callable(function):
        raise ExternSignatureError(f"extern {name!r}: {function!r} is not callable")
    extern = ExternFunction(name, _specs(inputs, "inputs", name), _specs(outputs, "outputs", name),
                            function=function)
    _REGISTRY[name] = extern
    return extern


def unregister(name: str) -> None:
    """Forget the extern ``name`` (modules already compiled keep what they bound)."""
    _REGISTRY.pop(name, None)


def registered() -> dict[str, ExternFunction]:
    """The registered externs by name."""
    return dict(_REGISTRY)


def lookup(name: str) -> ExternFunction:
    """The extern ``name`` (or the one whose :attr:`~ExternFunction.symbol_name` is
    ``name``), or :class:`ExternError` listing the registered ones."""
    try:
        return _REGISTRY[_dotted_name(name) or name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise ExternError(f"no extern function named {name!r} is registered (registered: {known}); "
                          "register it with tilecraft.extern.register_c or register_python") from None


def _view(address: int, spec: ArgSpec) -> np.ndarray:
    """A numpy array viewing the buffer a memref descriptor at ``address`` describes."""
    rank = len(spec.shape)
    # The descriptor's words: allocated, aligned, offset, sizes[rank], strides[rank].
    words = (ctypes.c_int64 * (3 + 2 * rank)).from_address(address)
    aligned, offset = words[1], words[2]
    shape = tuple(words[3 : 3 + rank])
    strides = tuple(words[3 + rank : 3 + 2 * rank])
    itemsize = spec.dtype.itemsize
    if not aligned or 0 in shape:
        return np.empty(shape, spec.dtype)
    span = 1 + sum((size - 1) * stride for size, stride in zip(shape, strides))
    block = (ctypes.c_char * (span * itemsize)).from_address(aligned + offset * itemsize)
    base = np.frombuffer(block, dtype=spec.dtype, count=span)
    return np.lib.stride_tricks.as_strided(base, shape, tuple(s * itemsize for s in strides))


# An exception raised by a Python extern cannot unwind through the compiled code's C frames:
# the callback keeps the first one of this thread's call here, and the caller of the
# compiled entry raises it when the entry returns (raise_pending_error).
_pending = threading.local()


def raise_pending_error() -> None:
    """Raise (as :class:`ExternError`) the exception a Python extern raised during the
    compiled call that just returned on this thread, if any."""
    error = getattr(_pending, "error", None)
    if error is not None:
        _pending.error = None
        name, exception = error
        raise ExternError(f"the Python extern {name!r} raised {type(exception).__name__}: {exception} "
                          "(the outputs of the call are not valid)") from exception


def _python_callback(extern: ExternFunction) -> object:
    ctypes_params = [ELEMENT_TYPES[p.element][1] if p.is_scalar else ctypes.c_void_p for p in extern.parameters]
    specs = extern.parameters

    def call(*raw: object) -> None:
        if getattr(_pending, "error", None) is not None:
            return  # an earlier extern of this call failed: its outputs are garbage already
        try:
            arrays = [value if spec.is_scalar else _view(value, spec) for value, spec in zip(raw, specs)]
            extern.function(*arrays)
        except Exception as exception:  # noqa: BLE001  (re-raised by raise_pending_error)
            _pending.error = (extern.name, exception)

    return ctypes.CFUNCTYPE(None, *ctypes_params)(call)
