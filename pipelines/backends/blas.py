"""The built-in offload backend ``blas``: f32 matmuls, batch matmuls (either operand
transposed through the op's indexing maps) and 1x1 stride-1 NHWC convolutions become calls of
OpenBLAS's ``cblas_sgemm``, from the pinned ``scipy-openblas32`` wheel.

The calls go through a small C shim (blas_shim.c) that reads MLIR memref descriptors; it is
built at first use with the system C compiler, linked against the wheel's library, and
cached by content under ``$TILECRAFT_CACHE`` (default ``~/.cache/tilecraft``). An op is
offloaded only with static shapes and at least :attr:`BlasBackend.min_macs`
multiply-accumulates (below that the call costs more than a compiled kernel). A non-zero
accumulator (a bias that the importer put into the matmul's init) stays a compiled
elementwise add after the call, and fuses with the epilogue.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ...errors import BackendError
from ...runtime.extern import ExternFunction, register_c
from ...runtime.native import build_shared_library
from ..extern import emit_call
from ..offload import Backend, is_zero_fill, register_backend

SHIM_SOURCE = Path(__file__).with_name("blas_shim.c")
SHIM_NAME = "libtilecraft_blas.so"
# scipy-openblas builds prefix every symbol (so that they never clash with another BLAS in
# the process): cblas_sgemm is scipy_cblas_sgemm.
SYMBOLS = {"SGEMM": "scipy_cblas_sgemm", "SET_THREADS": "scipy_openblas_set_num_threads"}
MATMUL, BATCH_MATMUL = "tilecraft_blas_matmul", "tilecraft_blas_batch_matmul"

_MATMUL_MAPS = {  # str(indexing map) of A, B -> (trans_a, trans_b); C is always (d0, d1)
    ("(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)"): (0, 0),
    ("(d0, d1, d2) -> (d2, d0)", "(d0, d1, d2) -> (d2, d1)"): (1, 0),
    ("(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d1, d2)"): (0, 1),
    ("(d0, d1, d2) -> (d2, d0)", "(d0, d1, d2) -> (d1, d2)"): (1, 1),
}
_BATCH_MAPS = {
    ("(d0, d1, d2, d3) -> (d0, d1, d3)", "(d0, d1, d2, d3) -> (d0, d3, d2)"): (0, 0),
    ("(d0, d1, d2, d3) -> (d0, d3, d1)", "(d0, d1, d2, d3) -> (d0, d3, d2)"): (1, 0),
    ("(d0, d1, d2, d3) -> (d0, d1, d3)", "(d0, d1, d2, d3) -> (d0, d2, d3)"): (0, 1),
    ("(d0, d1, d2, d3) -> (d0, d3, d1)", "(d0, d1, d2, d3) -> (d0, d2, d3)"): (1, 1),
}


def openblas_library() -> Path:
    """The scipy-openblas32 wheel's shared library."""
    try:
        import scipy_openblas32
    except ImportError:
        raise BackendError("the blas backend needs the scipy-openblas32 wheel: "
                           "pip install 'tilecraft[blas]' (or scipy-openblas32)") from None
    path = Path(scipy_openblas32.get_lib_dir()) / f"lib{scipy_openblas32.get_library()}.so"
    if not path.is_file():
        raise BackendError(f"scipy-openblas32 is installed but {path} is missing")
    return path


@cache
def shim_library() -> Path:
    """Build (once per content) and return the shim linked against OpenBLAS."""
    blas = openblas_library()
    return build_shared_library(
        SHIM_NAME, [SHIM_SOURCE],
        [*(f"-D{k}={v}" for k, v in SYMBOLS.items()), f"-Wl,-soname,{SHIM_NAME}", str(blas),
         f"-Wl,-rpath,{blas.parent}"],
        what="the blas backend's C shim", error=BackendError)


def _static_f32(value: ir.Value) -> bool:
    if not isinstance(value.type, ir.RankedTensorType):
        return False
    shaped = ir.RankedTensorType(value.type)
    return shaped.has_static_shape and str(shaped.element_type) == "f32"


def _maps(op: ir.Operation) -> tuple[str, ...] | None:
    """The op's A and B indexing maps as text, or None when it has the default ones."""
    if "indexing_maps" not in op.attributes:
        return None
    maps = [str(ir.AffineMapAttr(m).value) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    return maps[0], maps[1]


def _i32(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(32), value).result


def _reassociation(groups: list[list[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])


def _collapse(value: ir.Value, groups: list[list[int]]) -> ir.Value:
    source = ir.RankedTensorType(value.type)
    shape = [math.prod(source.shape[dim] for dim in group) for group in groups]
    return tensor.CollapseShapeOp(ir.RankedTensorType.get(shape, source.element_type), value,
                                  _reassociation(groups)).result


class BlasBackend(Backend):
    """``offload=["blas"]``: GEMM-shaped linalg ops to ``cblas_sgemm`` (module docstring)."""

    name = "blas"
    patterns = ("linalg.matmul", "linalg.batch_matmul", "linalg.conv_2d_nhwc_hwcf",
                "linalg.conv_2d_nhwc_fhwc")
    # 32^3: below it, the call and the threads' wake-up outweigh the arithmetic.
    min_macs = 32 * 32 * 32
    # Threads per call: None means the target's. The shim splits a call itself (columns of a
    # matmul, batches of a batch matmul) over its own blocking pool, one OpenBLAS thread per
    # part: OpenBLAS's threads hand work over by spinning, which on this loaded 2-core
    # machine made a BERT layer 3-20x slower than one thread (docs/backends.md, "Threads").
    max_threads: "int | None" = None

    def prepare(self) -> None:
        shim, blas = shim_library(), openblas_library()
        specs = {MATMUL: 2, BATCH_MATMUL: 3}
        self.externs: dict[str, ExternFunction] = {}
        for name, rank in specs.items():
            memref = "memref<" + "?x" * rank + "f32>"
            self.externs[name] = register_c(name, shim, inputs=[memref, memref, "i32", "i32", "i32"],
                                            outputs=[memref], dependencies=[str(blas)])

    def lower(self, op: ir.Operation, module: ir.Operation, num_threads: int) -> "list[ir.Value] | None":
        if self.max_threads is not None:
            num_threads = min(num_threads, self.max_threads)
        a, b, init = op.operands[0], op.operands[1], op.operands[2]
        if not all(_static_f32(v) for v in (a, b, init)):
            return None
        out = ir.RankedTensorType(init.type)
        if op.name == "linalg.matmul" or op.name == "linalg.batch_matmul":
            table = _MATMUL_MAPS if op.name == "linalg.matmul" else _BATCH_MAPS
            maps = _maps(op)
            if maps is not None and maps not in table:
                return None
            trans_a, trans_b = (0, 0) if maps is None else table[maps]
            a_type = ir.RankedTensorType(a.type)
            k = a_type.shape[-2] if trans_a else a_type.shape[-1]
            if math.prod(out.shape) * k < self.min_macs:
                return None
            extern = self.externs[MATMUL if op.name == "linalg.matmul" else BATCH_MATMUL]
            result = emit_call(module, extern, [a, b, _i32(trans_a), _i32(trans_b), _i32(num_threads)], [out])[0]
        else:
            result = self._conv_1x1(op, module, a, b, out, num_threads)
            if result is None:
                return None
        if not is_zero_fill(init):
            empty = tensor.EmptyOp(out.shape, out.element_type).result
            result = linalg.add(result, init, outs=[empty])
        return [result]

    def _conv_1x1(self, op: ir.Operation, module: ir.Operation, image: ir.Value, filter_: ir.Value,
                  out: ir.RankedTensorType, num_threads: int) -> "ir.Value | None":
        """A 1x1 stride-1 NHWC convolution is a (N*H*W, C) @ (C, F) matmul on views."""
        filter_shape = ir.RankedTensorType(filter_.type).shape
        hwcf = op.name == "linalg.conv_2d_nhwc_hwcf"
        window = filter_shape[:2] if hwcf else filter_shape[1:3]
        strides = [int(s) for s in ir.DenseIntElementsAttr(op.attributes["strides"])] \
            if "strides" in op.attributes else [1, 1]
        if list(window) != [1, 1] or strides != [1, 1]:
            return None
        n, h, w, f = out.shape
        channels = ir.RankedTensorType(image.type).shape[3]
        if n * h * w * f * channels < self.min_macs or ir.RankedTensorType(image.type).shape[1:3] != [h, w]:
            return None
        matrix = _collapse(image, [[0, 1, 2], [3]])
        weights = _collapse(filter_, [[0, 1, 2], [3]] if hwcf else [[0], [1, 2, 3]])
        flat = ir.RankedTensorType.get([n * h * w, f], out.element_type)
        result = emit_call(module, self.externs[MATMUL],
                           [matrix, weights, _i32(0), _i32(0 if hwcf else 1), _i32(num_threads)], [flat])[0]
        return tensor.ExpandShapeOp(out, result, _reassociation([[0, 1, 2], [3]]), [], [n, h, w, f]).result


register_backend(BlasBackend())
