"""Linear algebra through LAPACK: calls of the routines of ``lapack_shim.c`` (LU, Cholesky,
QR, symmetric eigen, SVD, triangular solve) on batches of float32 or float64 matrices, and
the run-time check that turns LAPACK's ``info`` into a typed error.

Why LAPACK and not linalg IR: a pivoted factorization or an iterative eigensolver has data-
dependent control flow that no closed-form kernel expresses, and LAPACK is the well-kept
numerical code PyTorch calls too, so the conventions (pivots, signs of Q's columns, the
order of eigenvalues) are the same. The library is OpenBLAS's, from the pinned
``scipy-openblas32`` wheel that the ``blas`` offload backend links too.

How the calls travel: the shim (``lapack_shim.c``) is built at first use against the wheel's
library (``runtime/native.py``, cached by content) and each routine is registered as a C
extern (``runtime/extern.py``). An emitted call is a ``func.call`` on tensors of a private
declaration; ``tilecraft-lower-externs`` (pipelines/extern.py) rewrites it into a
destination-passing call on memrefs, and a package bundles the shim and names OpenBLAS as a
system library, as for the ``blas`` backend. A declaration's tensor types are static and
a ``func.call`` must match its callee's type, so each signature (routine, element type,
shapes) gets its own extern name, an alias of the routine's C symbol.

Every matrix operand is passed as a 3-d batch (``batch x rows x cols``): :func:`as_batch`
collapses a tensor's leading dims into one and :func:`from_batch` restores them.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import math
from functools import cache
from pathlib import Path
from typing import Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, func, tensor

from ..errors import OperandError, OperandTypeError, TilecraftError
from ..runtime.extern import ExternFunction, register_c, registered
from ..runtime.libraries import openblas_library
from ..runtime.native import build_shared_library
from . import core, reshapes
from .checks import emit_check
from .kernels import declare_in_module
from .reduction import reduce

SHIM_SOURCE = Path(__file__).with_name("lapack_shim.c")
SHIM_NAME = "libtilecraft_lapack.so"
# The routines whose results are unique only up to sign (eigenvectors, singular vectors):
# LAPACK implementations choose differently (OpenBLAS's reference code and MKL disagree on
# most columns from 5x5 up), so these go to the LAPACK that eager PyTorch calls, MKL inside
# libtorch_cpu, when it exports them; see :func:`torch_lapack_library`.
SIGN_AMBIGUOUS = frozenset({"syevd", "gesdd"})
# Bunch-Kaufman's pivots depend on the blocked code's panel width, which differs between
# implementations: the LDL factorization goes to eager's LAPACK too, when there.
EAGER_LAPACK = SIGN_AMBIGUOUS | {"sytrf", "sytrs"}
TORCH_SHIM_NAME = "libtilecraft_lapack_torch.so"
# scipy-openblas builds prefix every symbol (they never clash with another BLAS/LAPACK in
# the process, e.g. PyTorch's MKL): sgetrf_ is scipy_sgetrf_.
SYMBOL_PREFIX = "scipy_"
ELEMENTS = {"f32": "s", "f64": "d"}

_MATRIX, _VECTORS, _INFO = "memref<?x?x?x{t}>", "memref<?x?x{t}>", "memref<?xi32>"
_PIVOTS = "memref<?x?xi32>"
# routine -> (inputs, outputs); {t} is the element type. Scalars are i32 flags.
ROUTINES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "getrf": ((_MATRIX,), (_MATRIX, _PIVOTS, _INFO)),
    "getrs": ((_MATRIX, _PIVOTS, _MATRIX, "i32"), (_MATRIX,)),
    "lu_det": ((_MATRIX, _PIVOTS), ("memref<?x{t}>",) * 3),
    "potrf": ((_MATRIX, "i32"), (_MATRIX, _INFO)),
    "qr": ((_MATRIX,), (_MATRIX, _MATRIX)),
    "syevd": ((_MATRIX, "i32", "i32"), (_VECTORS, _MATRIX, _INFO)),
    "gesdd": ((_MATRIX,), (_VECTORS, _MATRIX, _MATRIX, _INFO)),
    "trsm": ((_MATRIX, _MATRIX, "i32", "i32", "i32"), (_MATRIX,)),
    "lu_unpack": ((_MATRIX, _PIVOTS), (_MATRIX,) * 3),
    "geqrf": ((_MATRIX,), (_MATRIX, _VECTORS)),
    "orgqr": ((_MATRIX, _VECTORS), (_MATRIX,)),
    "ormqr": ((_MATRIX, _VECTORS, _MATRIX, "i32", "i32"), (_MATRIX,)),
    "matrix_exp": ((_MATRIX,), (_MATRIX,)),
    "sytrf": ((_MATRIX,), (_MATRIX, _PIVOTS, _INFO)),
    "sytrs": ((_MATRIX, _PIVOTS, _MATRIX), (_MATRIX,)),
    "pinv": ((_MATRIX, "memref<?x{t}>", "memref<?x{t}>", "i32", "i32", "i32"), (_MATRIX,)),
}


# Named in the error when the scipy-openblas32 wheel is missing.
LAPACK_USER = "linear-algebra ops (LAPACK)"


@cache
def shim_library() -> Path:
    """Build (once per content) and return the shim linked against OpenBLAS."""
    lapack = openblas_library(LAPACK_USER)
    return build_shared_library(
        SHIM_NAME, [SHIM_SOURCE],
        [f"-DLAPACK_PREFIX={SYMBOL_PREFIX}", f"-Wl,-soname,{SHIM_NAME}", str(lapack),
         f"-Wl,-rpath,{lapack.parent}", "-lm"],
        what="the LAPACK shim")


def torch_lapack_library() -> "Path | None":
    """PyTorch's CPU library when it exports the LAPACK routines of :data:`SIGN_AMBIGUOUS`
    (the x86 wheels link MKL into it and export its symbols), else None.

    Why: ``torch.linalg.eigh``/``svd`` return vectors unique only up to sign, and the
    PyTorch door is held to eager's raw outputs; calling the same LAPACK gives the same
    signs. A package of such a model then names libtorch_cpu as a system library.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "lib" / "libtorch_cpu.so"
    if not path.is_file():
        return None
    try:
        library = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None
    return path if all(hasattr(library, f"{p}{r}_") for p in ELEMENTS.values() for r in SIGN_AMBIGUOUS) else None


@cache
def torch_shim_library() -> "tuple[Path, Path] | None":
    """(shim, libtorch_cpu): the shim built against PyTorch's LAPACK, or None without it."""
    lapack = torch_lapack_library()
    if lapack is None:
        return None
    try:
        shim = build_shared_library(
            TORCH_SHIM_NAME, [SHIM_SOURCE],
            ["-DLAPACK_PREFIX=", "-DENTRY_PREFIX=tilecraft_torch_lapack_", f"-Wl,-soname,{TORCH_SHIM_NAME}",
             str(lapack), f"-Wl,-rpath,{lapack.parent}", "-lm"],
            what="the LAPACK shim on PyTorch's LAPACK")
    except TilecraftError:
        return None
    return shim, lapack


def _provider(routine: str) -> tuple[Path, Path, str]:
    """(shim, the LAPACK library it calls, its symbol prefix) for ``routine``."""
    if routine in EAGER_LAPACK:
        torch_shim = torch_shim_library()
        if torch_shim is not None:
            return (*torch_shim, "tilecraft_torch_lapack_")
    return shim_library(), openblas_library(LAPACK_USER), "tilecraft_lapack_"


def _signature_specs(routine: str, element: str) -> tuple[list[str], list[str]]:
    inputs, outputs = ROUTINES[routine]
    return [s.format(t=element) for s in inputs], [s.format(t=element) for s in outputs]


def _extern(routine: str, element: str, types: Sequence[ir.Type]) -> ExternFunction:
    """The extern for a call of ``routine`` on ``element`` with these operand and result
    types: an alias of ``tilecraft_lapack_<s|d><routine>`` named after the signature."""
    if element not in ELEMENTS:
        raise OperandTypeError(f"LAPACK routines take float32 or float64 matrices, not {element}")
    shim, library, prefix = _provider(routine)
    symbol = f"{prefix}{ELEMENTS[element]}{routine}"
    digest = hashlib.sha256(" ".join(str(t) for t in types).encode()).hexdigest()[:10]
    name = f"{symbol}_{digest}"
    known = registered().get(name)
    if known is not None:
        return known
    inputs, outputs = _signature_specs(routine, element)
    return register_c(name, shim, symbol, inputs=inputs, outputs=outputs, dependencies=[str(library)])


def _module_of(block: ir.Block) -> ir.Operation:
    op = block.owner
    while op.name != "builtin.module":
        op = op.parent
    return op


def call(routine: str, operands: Sequence["ir.Value | int"], result_types: Sequence[ir.Type]) -> list[ir.Value]:
    """Call ``routine`` on tensor operands (ints: its i32 flags) with results of
    ``result_types`` (static); the element type is the first operand's."""
    i32 = ir.IntegerType.get_signless(32)
    values = [arith.constant(i32, v) if isinstance(v, int) else v for v in operands]
    element = str(core.tensor_type(values[0]).element_type)
    types = [v.type for v in values] + list(result_types)
    extern = _extern(routine, element, types)
    body = _module_of(ir.InsertionPoint.current.block).regions[0].blocks[0]
    declare_in_module(body, extern.name, [v.type for v in values], result_types)
    return list(func.CallOp(list(result_types), ir.FlatSymbolRefAttr.get(extern.name), values).results)


def numpy_dtype(element: ir.Type) -> "np.dtype":
    """The numpy dtype of a LAPACK element type (f32, f64)."""
    return np.dtype({"f32": np.float32, "f64": np.float64}[str(element)])


def as_batch(value: ir.Value) -> tuple[ir.Value, list[int]]:
    """A static tensor of rank >= 2 as ``batch x rows x cols`` and its leading dims."""
    shape = core.static_shape(value)
    if len(shape) < 2:
        raise OperandError(f"expected a matrix or a batch of matrices, got a tensor of rank {len(shape)}")
    if None in shape:
        raise OperandError("linear-algebra ops need static shapes (a dim is dynamic)")
    leading = list(shape[:-2])
    return reshapes.reshape(value, [math.prod(leading), *shape[-2:]]), leading


def from_batch(value: ir.Value, leading: Sequence[int]) -> ir.Value:
    """A ``batch x ...`` result with its batch dim split into ``leading`` again."""
    shape = core.static_shape(value)
    return reshapes.reshape(value, [*leading, *shape[1:]])


def batch_type(batch: int, dims: Sequence[int], element: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([batch, *dims], element)


def check_info(info: ir.Value, message: str) -> None:
    """A run-time ``linalg`` check that every element of the i32 ``info`` tensor (LAPACK's,
    one per matrix of the batch) is 0; ``message`` names ``{value}`` (the largest info)."""
    if 0 in core.static_shape(info):
        return
    axes = list(range(core.tensor_type(info).rank))
    largest = reduce(info, axes, "max")
    worst = tensor.extract(largest, [])
    i64 = ir.IntegerType.get_signless(64)
    worst64 = arith.extsi(i64, worst)
    zero = arith.constant(i64, 0)
    emit_check(arith.cmpi(arith.CmpIPredicate.eq, worst64, zero), worst64, zero, "linalg", message)


def calls_in(module: "ir.Module | ir.Operation") -> list[tuple[str, str]]:
    """(extern name, location) of every LAPACK call in ``module``: what a target that cannot
    call C externs (the C target, CUDA) names when it refuses the model."""
    found: list[tuple[str, str]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call":
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            if callee.startswith(("tilecraft_lapack_", "tilecraft_torch_lapack_")):
                found.append((callee, str(op.location)))
        return ir.WalkResult.ADVANCE

    getattr(module, "operation", module).walk(visit)
    return found


def refuse_calls(module: "ir.Module | ir.Operation", target: str, error: type[Exception]) -> None:
    """Raise ``error`` naming the ops of ``module`` that call LAPACK, which ``target`` cannot."""
    calls = calls_in(module)
    if calls:
        where = "; ".join(sorted({location for _, location in calls}))
        raise error(f"{target} cannot call LAPACK, which {len(calls)} linear-algebra op(s) of the model "
                    f"need (compile for 'llvm'): {where}")
