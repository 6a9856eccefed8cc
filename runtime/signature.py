"""The entry function's signature as numpy sees it, and the checks every call goes through.

Why a separate layer: the native code trusts the descriptors it receives; a shape or dtype
mismatch there reads or writes out of bounds. Every argument is therefore checked here,
against the types the MLIR function declares, before any native call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import ml_dtypes
import numpy as np

from ..errors import ArgumentTypeError, ArgumentValueError, EntryPointError
from .limits import check_allocation, element_count, memory_budget

if TYPE_CHECKING:
    from mlir import ir

# This module is imported without the MLIR bindings by deployed packages
# (runtime/package.py), which rebuild a signature from their manifest; the compiler reads
# signatures from IR in pipelines/jit/entry.py.

NAME_ATTRIBUTE = "tilecraft.name"
# Per argument dim, the symbol (a name) that sizes it: dims sharing a symbol must agree at
# every call; "" for a dim with no symbol, an integer for a dim that must have that size.
# Written by the TE API (``te.var``) and by Schedule; read by pipelines/dim_relations.py.
SYMBOLS_ATTRIBUTE = "tilecraft.symbols"
# Overrides the numpy dtype of a signless integer argument/result (``"uint8"`` for ``i8``).
DTYPE_ATTRIBUTE = "tilecraft.dtype"


def numpy_dtype(element_type: "ir.Type") -> np.dtype:
    """The numpy dtype of an MLIR element type; :class:`EntryPointError` if there is none."""
    text = str(element_type)
    dtypes = {
        "f16": np.float16, "f32": np.float32, "f64": np.float64,
        "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
        "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64,
        "si8": np.int8, "si16": np.int16, "si32": np.int32, "si64": np.int64,
        "index": np.int64,
        # Types numpy lacks, as ml_dtypes dtypes: the native code reads and writes the same
        # bytes. (int4, int2 and float4 are i8 in IR, named by tilecraft.dtype.)
        "bf16": ml_dtypes.bfloat16,
        "f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
        "f8E5M2": ml_dtypes.float8_e5m2, "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
        "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,
        # complex<f32> memref elements are two f32 side by side, numpy's complex64 layout
        # (complex values cross the boundary as such; frontend/emit/complex_pairs.py).
        "complex<f32>": np.complex64, "complex<f64>": np.complex128,
    }
    if text not in dtypes:
        raise EntryPointError(
            f"element type {text} has no numpy equivalent; supported: {', '.join(dtypes)}"
        )
    return np.dtype(dtypes[text])


@dataclass(frozen=True)
class DimGroup:
    """Argument dimensions ``(argument index, axis)`` that must all have one extent,
    ``size`` when the IR fixes it statically somewhere (see pipelines/dim_relations.py)."""

    members: tuple[tuple[int, int], ...]
    size: int | None = None


@dataclass(frozen=True)
class TensorSpec:
    """One argument or result: name, dtype, shape (``None`` for a dynamic dimension).

    ``shape is None`` marks a scalar (a plain ``f32``/``i64`` argument, not a tensor).
    """

    name: str
    dtype: np.dtype
    shape: tuple[int | None, ...] | None
    element_type: str = ""

    @property
    def is_scalar(self) -> bool:
        return self.shape is None

    @property
    def mlir_style(self) -> str:
        element = self.element_type or str(self.dtype)
        if self.shape is None:
            return element
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"tensor<{dims + 'x' if dims else ''}{element}>"

    @property
    def is_string(self) -> bool:
        """A tensor of strings (an ONNX STRING tensor; host code reads it, never native code)."""
        return self.dtype.kind == "O"

    def check(self, value: Any) -> np.ndarray:
        """Return ``value`` as a C-contiguous array of this spec, or raise naming the problem."""
        if self.is_string:
            return self._check_strings(value)
        # The common case first, decided by the same checks as below: an aligned, C-ordered
        # array of the right dtype and (static) shape. Anything else takes the full path,
        # which names the problem. (A shape with a dynamic dim never equals value.shape.)
        if (type(value) is np.ndarray and value.shape == self.shape and value.dtype == self.dtype
                and value.flags.c_contiguous and value.flags.aligned):
            return value
        if self.is_scalar:
            return self._check_scalar(value)
        if isinstance(value, np.generic) and self.shape == ():
            value = np.asarray(value)  # a numpy scalar is a fine 0-d tensor (dtype still checked)
        if not isinstance(value, np.ndarray):
            raise ArgumentTypeError(
                f"argument {self.name!r}: expected a numpy array {self.mlir_style}, "
                f"got {type(value).__name__}"
            )
        if value.dtype != self.dtype:
            raise ArgumentTypeError(
                f"argument {self.name!r}: expected dtype {self.dtype} ({self.mlir_style}), "
                f"got {value.dtype}"
            )
        self._check_shape(value)
        if value.flags.c_contiguous and value.flags.aligned:
            return value
        # A C-ordered, aligned copy (compiled loads assume elements at their natural
        # alignment; np.frombuffer at an odd offset gives unaligned views). Not
        # np.ascontiguousarray: it turns a 0-d array into a 1-d one, so a tensor<f32>
        # argument was described with a rank-1 descriptor and bound to a hidden copy.
        # The copy's size first: a zero-stride view of 2^31 rows is a few bytes until copied.
        check_allocation(f"argument {self.name!r}: a C-contiguous copy of shape {value.shape} ({value.dtype})",
                         value.size * value.dtype.itemsize)
        return np.array(value, order="C")

    def _check_shape(self, value: np.ndarray) -> None:
        assert self.shape is not None
        if value.ndim != len(self.shape):
            raise ArgumentValueError(
                f"argument {self.name!r}: expected rank {len(self.shape)} ({self.mlir_style}), "
                f"got shape {value.shape}"
            )
        for axis, (expected, given) in enumerate(zip(self.shape, value.shape)):
            if expected is not None and expected != given:
                raise ArgumentValueError(
                    f"argument {self.name!r}: expected shape {self.mlir_style}, got {value.shape} "
                    f"(dimension {axis} is {given}, must be {expected})"
                )

    def _check_strings(self, value: Any) -> np.ndarray:
        """A string tensor: a numpy array of ``str`` (dtype ``U``, or ``object`` holding only
        ``str``), returned as an object array, the form ONNX's reference ops take."""
        if isinstance(value, np.ndarray) and value.dtype.kind == "U":
            value = value.astype(object)
        if not isinstance(value, np.ndarray) or value.dtype.kind != "O":
            described = f"dtype {value.dtype}" if isinstance(value, np.ndarray) else type(value).__name__
            raise ArgumentTypeError(
                f"argument {self.name!r}: expected a numpy array of str ({self.mlir_style}), got {described}")
        self._check_shape(value)
        for item in value.flat:
            if not isinstance(item, str):
                raise ArgumentTypeError(
                    f"argument {self.name!r}: expected str elements ({self.mlir_style}), found a "
                    f"{type(item).__name__}")
        return value

    def _check_scalar(self, value: Any) -> np.ndarray:
        if isinstance(value, (np.generic, np.ndarray)):
            array = np.asarray(value)
            if array.ndim != 0:
                raise ArgumentValueError(
                    f"argument {self.name!r}: expected a scalar {self.dtype}, got shape {array.shape}"
                )
            if array.dtype != self.dtype:
                raise ArgumentTypeError(
                    f"argument {self.name!r}: expected a scalar {self.dtype}, got {array.dtype}"
                )
            return array
        python_kinds = {"f": (bool, int, float), "i": (bool, int), "u": (bool, int), "b": (bool,)}
        if not isinstance(value, python_kinds[self.dtype.kind]):
            raise ArgumentTypeError(
                f"argument {self.name!r}: expected a scalar {self.dtype}, got {type(value).__name__}"
            )
        try:
            return np.asarray(value, dtype=self.dtype)
        except OverflowError:
            raise ArgumentValueError(
                f"argument {self.name!r}: {value} does not fit in {self.dtype}"
            ) from None


@dataclass(frozen=True)
class EntrySignature:
    """Name, arguments and results of the function a :class:`CompiledModule` calls."""

    name: str
    arguments: tuple[TensorSpec, ...]
    results: tuple[TensorSpec, ...]
    # Argument dimensions that must agree at run time (``a.shape[1] == b.shape[0]`` for a
    # dynamic matmul); see pipelines/dim_relations.py.
    equal_dims: tuple[DimGroup, ...] = ()

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[np.ndarray]:
        """Match positional and keyword arguments to the signature and check each one."""
        expected = len(self.arguments)
        if not kwargs and len(args) == expected:  # all positional: nothing to match by name
            arrays = [spec.check(value) for spec, value in zip(self.arguments, args)]
            self._check_equal_dims(arrays)
            self.check_output_memory()
            return arrays
        if len(args) > expected:
            raise ArgumentValueError(
                f"@{self.name} takes {expected} argument(s) ({self._listing()}), got {len(args)}"
            )
        bound: dict[str, Any] = {spec.name: value for spec, value in zip(self.arguments, args)}
        for key, value in kwargs.items():
            if key not in {spec.name for spec in self.arguments}:
                raise ArgumentTypeError(
                    f"@{self.name} has no argument {key!r}; arguments: {self._listing()}"
                )
            if key in bound:
                raise ArgumentTypeError(f"@{self.name}: argument {key!r} given twice")
            bound[key] = value
        missing = [spec.name for spec in self.arguments if spec.name not in bound]
        if missing:
            raise ArgumentValueError(
                f"@{self.name} is missing argument(s) {missing}; arguments: {self._listing()}"
            )
        arrays = [spec.check(bound[spec.name]) for spec in self.arguments]
        self._check_equal_dims(arrays)
        self.check_output_memory()
        return arrays

    def check_output_memory(self) -> None:
        """:class:`ResourceLimitError` when the outputs of static shape the call will allocate
        exceed the memory budget (runtime/limits.py), each named; outputs of dynamic shape
        are checked by the generated code's allocation checks."""
        if self._static_output_bytes[0] == 0:
            return
        budget = memory_budget()
        total, sizes = self._static_output_bytes
        if total <= budget:
            return
        for spec, nbytes in sizes:
            check_allocation(f"output {spec.name!r} ({spec.mlir_style})", nbytes, budget)
        check_allocation(f"the {len(sizes)} outputs of @{self.name} together", total, budget)

    @functools.cached_property
    def _static_output_bytes(self) -> tuple[int, list[tuple[TensorSpec, int]]]:
        sizes = [(spec, element_count(spec.shape) * spec.dtype.itemsize) for spec in self.results
                 if spec.shape is not None and None not in spec.shape and not spec.is_string]
        return sum(n for _, n in sizes), sizes

    def _check_equal_dims(self, arrays: Sequence[np.ndarray]) -> None:
        for group in self.equal_dims:
            first_arg, first_axis = group.members[0]
            expected = group.size if group.size is not None else arrays[first_arg].shape[first_axis]
            for arg, axis in group.members:
                given = arrays[arg].shape[axis]
                if given == expected:
                    continue
                spec = self.arguments[arg]
                if group.size is not None:
                    reason = f"the function needs {expected} there"
                else:
                    reason = (
                        f"it must equal dimension {first_axis} of argument "
                        f"{self.arguments[first_arg].name!r} ({expected})"
                    )
                raise ArgumentValueError(
                    f"argument {spec.name!r}: expected shape {spec.mlir_style}, got "
                    f"{arrays[arg].shape} (dimension {axis} is {given}; {reason})"
                )

    def _listing(self) -> str:
        return ", ".join(f"{spec.name}: {spec.mlir_style}" for spec in self.arguments)

    def __str__(self) -> str:
        results = ", ".join(spec.mlir_style for spec in self.results)
        return f"@{self.name}({self._listing()}) -> ({results})"
