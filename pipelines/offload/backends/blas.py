"""The built-in offload backend ``blas``: f32 matmuls, batch matmuls (either operand
transposed through the op's indexing maps) and 1x1 stride-1 NHWC convolutions become calls of
OpenBLAS's ``cblas_sgemm``, from the pinned ``scipy-openblas32`` wheel.

The calls go through a small C shim (blas_shim.c) that reads MLIR memref descriptors; it is
built at first use with the system C compiler, linked against the wheel's library, and
cached by content under ``$TILECRAFT_CACHE_DIR`` (default ``~/.cache/tilecraft``). An op is
offloaded only with static shapes and at least :attr:`BlasBackend.min_macs`
multiply-accumulates (below that the call costs more than a compiled kernel). A non-zero
accumulator (a bias that the importer put into the matmul's init) stays a compiled
elementwise add after the call, and fuses with the epilogue.

Epilogues (a composite region, offload.py's ``Region``): after a matmul or 1x1 convolution
that starts from zero, the backend takes a per-column bias add (``x + b[n]``, the bias
broadcast along every other dim) and then a clamp (ReLU ``max(x, 0)``, ReLU6, Clip with
constant bounds), in that order, each optional. The shim applies them to each block of
columns right after its GEMM, while the block is in cache, instead of a compiled kernel
reading the whole output again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ....ir.maps import indexing_map_texts, indexing_maps, operand_map
from ....errors import BackendError, ToolchainError
from ....runtime import libraries
from ....runtime.extern import ExternFunction, register_c
from ....runtime.native import build_shared_library
from ...tensor.extern import emit_call
from ...ir_queries import defining_op, int_list_attribute, is_zero_fill
from .. import Backend, Region, register_backend

SHIM_SOURCE = Path(__file__).with_name("blas_shim.c")
SHIM_NAME = "libtilecraft_blas.so"
# scipy-openblas builds prefix every symbol (so that they never clash with another BLAS in
# the process): cblas_sgemm is scipy_cblas_sgemm.
SYMBOLS = {"SGEMM": "scipy_cblas_sgemm", "SET_THREADS": "scipy_openblas_set_num_threads"}
MATMUL, BATCH_MATMUL = "tilecraft_blas_matmul", "tilecraft_blas_batch_matmul"
# C = clamp(A @ B + bias[n], low, high): a matmul with its epilogue.
MATMUL_EPILOGUE = "tilecraft_blas_matmul_epilogue"

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
    """The scipy-openblas32 wheel's shared library (a missing wheel: this backend's error)."""
    try:
        return libraries.openblas_library("the blas backend")
    except ToolchainError as error:
        raise BackendError(str(error)) from None


@cache
def shim_library() -> Path:
    """Build (once per content) and return the shim linked against OpenBLAS."""
    blas = openblas_library()
    return build_shared_library(
        SHIM_NAME, [SHIM_SOURCE],
        # -O3: the epilogue loops vectorize (at -O2 GCC's cheap cost model leaves them scalar).
        ["-O3", *(f"-D{k}={v}" for k, v in SYMBOLS.items()), f"-Wl,-soname,{SHIM_NAME}", str(blas),
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
    maps = indexing_map_texts(op)
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


@dataclass(frozen=True)
class _Gemm:
    """An op as one row-major GEMM: ``a`` and ``b`` as 2-D tensors (views emitted before the
    op), whether BLAS reads each transposed, the 2-D result type, and how to view that
    result as the op's."""

    a: ir.Value
    b: ir.Value
    trans_a: int
    trans_b: int
    flat: ir.RankedTensorType
    unflatten: Callable[[ir.Value], ir.Value]


@dataclass(frozen=True)
class _Epilogue:
    """``clamp(x + bias[n], low, high)``; ``bias`` None: no add; unbounded sides are inf."""

    bias: "ir.Value | None" = None
    low: float = -math.inf
    high: float = math.inf


def _is_parallel_elementwise(op: ir.Operation, x: ir.Value) -> "int | None":
    """The input position of ``x`` when ``op`` is an all-parallel ``linalg.generic`` reading
    ``x`` and writing one result of its type through identity maps; else None."""
    if op.name != "linalg.generic" or len(op.results) != 1 or op.results[0].type != x.type:
        return None
    iterators = [str(i) for i in ir.ArrayAttr(op.attributes["iterator_types"])]
    if any("parallel" not in i for i in iterators):
        return None
    maps = indexing_maps(op)
    inputs = len(op.operands) - 1
    positions = [i for i in range(inputs) if op.operands[i] == x]
    if len(positions) != 1:
        return None
    identity = ir.AffineMap.get_identity(len(iterators))
    if maps[positions[0]] != identity or maps[-1] != identity:
        return None
    return positions[0]


def _column_vector(op: ir.Operation, position: int) -> "ir.Value | None":
    """Input ``position`` of ``op`` when it is a static f32 tensor read as ``b[n]`` of the
    last loop (every other result of its map the constant 0), with as many elements."""
    value = op.operands[position]
    if not _static_f32(value):
        return None
    affine_map = operand_map(op, position)
    last = affine_map.n_dims - 1
    dims = [e for e in affine_map.results if isinstance(e, ir.AffineDimExpr)]
    rest = [e for e in affine_map.results if not isinstance(e, ir.AffineDimExpr)]
    if (len(dims) != 1 or ir.AffineDimExpr(dims[0]).position != last
            or not all(isinstance(e, ir.AffineConstantExpr) and ir.AffineConstantExpr(e).value == 0
                       for e in rest)):
        return None
    columns = ir.RankedTensorType(op.results[0].type).shape[-1]
    return value if math.prod(ir.RankedTensorType(value.type).shape) == columns else None


def _float_constant(value: ir.Value) -> "float | None":
    constant = defining_op(value)
    if constant is None or constant.name != "arith.constant":
        return None
    attr = constant.attributes["value"]
    return ir.FloatAttr(attr).value if isinstance(attr, ir.FloatAttr) else None


def _epilogue_step(op: ir.Operation, x: ir.Value) -> "_Epilogue | None":
    """What ``op`` does to ``x`` as one epilogue step: a bias add (only ``bias`` set) or a
    clamp (only the bounds set); None for anything else."""
    position = _is_parallel_elementwise(op, x)
    if position is None:
        return None
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    value = block.arguments[position]
    inputs = len(op.operands) - 1
    if inputs == 2 and len(body) == 2 and body[0].name == "arith.addf":
        other = 1 - position
        if set(body[0].operands) != {value, block.arguments[other]} or body[1].operands[0] != body[0].results[0]:
            return None
        bias = _column_vector(op, other)
        return None if bias is None else _Epilogue(bias=bias)
    if inputs != 1:
        return None
    step = _Epilogue()
    for inner in body[:-1]:  # maximumf / minimumf of the running value and a constant
        if inner.name not in ("arith.maximumf", "arith.minimumf") or len(inner.operands) != 2:
            return None
        operands = list(inner.operands)
        if value not in operands:
            return None
        bound = _float_constant(operands[1 - operands.index(value)])
        if bound is None or math.isnan(bound):
            return None
        if inner.name == "arith.maximumf":
            step = _Epilogue(low=max(step.low, bound), high=max(step.high, bound))
        else:
            step = _Epilogue(low=min(step.low, bound), high=min(step.high, bound))
        value = inner.results[0]
    if len(body) < 2 or body[-1].operands[0] != value:
        return None
    return step


def _epilogue_of(region_ops: "tuple[ir.Operation, ...]", x: ir.Value) -> "_Epilogue | None":
    """The epilogue ``region_ops`` apply to ``x`` in turn: at most one bias add, then clamps;
    None when they are anything else."""
    epilogue = _Epilogue()
    for op in region_ops:
        step = _epilogue_step(op, x)
        if step is None:
            return None
        if step.bias is not None:
            if epilogue.bias is not None or (epilogue.low, epilogue.high) != (-math.inf, math.inf):
                return None  # a second bias, or a bias after the clamp
            epilogue = _Epilogue(bias=step.bias)
        else:  # a clamp after a clamp (ReLU then Clip) is one clamp
            low = min(max(epilogue.low, step.low), step.high)
            high = min(max(epilogue.high, step.low), step.high)
            epilogue = _Epilogue(epilogue.bias, low, high)
        x = op.results[0]
    return epilogue


class BlasBackend(Backend):
    """``offload=["blas"]``: GEMM-shaped linalg ops to ``cblas_sgemm`` (module docstring)."""

    name = "blas"
    patterns = ("linalg.matmul", "linalg.batch_matmul", "linalg.conv_2d_nhwc_hwcf",
                "linalg.conv_2d_nhwc_fhwc")
    # 32^3: below it, the call and the threads' wake-up outweigh the arithmetic.
    min_macs = 32 * 32 * 32
    # Threads per call: None means the target's. The shim splits a call itself (columns of a
    # matmul, batches of a batch matmul) over its own blocking pool, one OpenBLAS thread per
    # part: OpenBLAS's threads hand work over by spinning, which on a loaded machine made a
    # BERT layer slower than one thread (docs/backends.md, "Threads").
    max_threads: "int | None" = None

    def prepare(self) -> None:
        shim, blas = shim_library(), openblas_library()
        self.externs: dict[str, ExternFunction] = {}
        for name, rank in {MATMUL: 2, BATCH_MATMUL: 3}.items():
            memref = "memref<" + "?x" * rank + "f32>"
            self.externs[name] = register_c(name, shim, inputs=[memref, memref, "i32", "i32", "i32"],
                                            outputs=[memref], dependencies=[str(blas)])
        matrix = "memref<?x?xf32>"
        self.externs[MATMUL_EPILOGUE] = register_c(
            MATMUL_EPILOGUE, shim, inputs=[matrix, matrix, "memref<?xf32>", "i32", "i32", "i32", "f32", "f32"],
            outputs=[matrix], dependencies=[str(blas)])

    def _threads(self, num_threads: int) -> int:
        return num_threads if self.max_threads is None else min(num_threads, self.max_threads)

    def lower(self, op: ir.Operation, module: ir.Operation, num_threads: int) -> "list[ir.Value] | None":
        num_threads = self._threads(num_threads)
        init = op.operands[2]
        if op.name == "linalg.batch_matmul":
            result = self._batch_matmul(op, module, num_threads)
        else:
            gemm = self._as_gemm(op)
            result = None if gemm is None else gemm.unflatten(emit_call(
                module, self.externs[MATMUL],
                [gemm.a, gemm.b, _i32(gemm.trans_a), _i32(gemm.trans_b), _i32(num_threads)], [gemm.flat])[0])
        if result is None:
            return None
        if not is_zero_fill(init):
            out = ir.RankedTensorType(init.type)
            empty = tensor.EmptyOp(out.shape, out.element_type).result
            result = linalg.add(result, init, outs=[empty])
        return [result]

    def takes_epilogue(self, region: Region, consumer: ir.Operation) -> bool:
        anchor = region.anchor
        return (anchor.name != "linalg.batch_matmul" and is_zero_fill(anchor.operands[2])
                and self._gemm_shape(anchor) is not None
                and _epilogue_of((*region.epilogue, consumer), anchor.results[0]) is not None)

    def lower_region(self, region: Region, module: ir.Operation, num_threads: int) -> "list[ir.Value] | None":
        epilogue = _epilogue_of(region.epilogue, region.anchor.results[0])
        if epilogue is None or self._gemm_shape(region.anchor) is None:
            return None
        gemm = self._as_gemm(region.anchor)
        f32 = ir.F32Type.get()
        bias = epilogue.bias
        if bias is None:  # no add: an empty bias tells the shim so
            empty = ir.RankedTensorType.get([0], f32)
            bias = arith.ConstantOp(empty, ir.DenseElementsAttr.get_splat(empty, ir.FloatAttr.get(f32, 0.0))).result
        elif ir.RankedTensorType(bias.type).rank != 1:
            bias = _collapse(bias, [list(range(ir.RankedTensorType(bias.type).rank))])
        result = emit_call(module, self.externs[MATMUL_EPILOGUE],
                           [gemm.a, gemm.b, bias, _i32(gemm.trans_a), _i32(gemm.trans_b),
                            _i32(self._threads(num_threads)), arith.ConstantOp(f32, epilogue.low).result,
                            arith.ConstantOp(f32, epilogue.high).result], [gemm.flat])[0]
        return [gemm.unflatten(result)]

    def _gemm_shape(self, op: ir.Operation) -> "tuple[int, int] | None":
        """(trans_a, trans_b) when ``op`` is a matmul or 1x1 stride-1 convolution this backend
        takes (static f32, enough work); None otherwise."""
        a, b, init = op.operands[0], op.operands[1], op.operands[2]
        if not all(_static_f32(v) for v in (a, b, init)):
            return None
        out = ir.RankedTensorType(init.type)
        if op.name == "linalg.matmul":
            maps = _maps(op)
            if maps is not None and maps not in _MATMUL_MAPS:
                return None
            trans_a, trans_b = (0, 0) if maps is None else _MATMUL_MAPS[maps]
            a_type = ir.RankedTensorType(a.type)
            k = a_type.shape[-2] if trans_a else a_type.shape[-1]
            return (trans_a, trans_b) if math.prod(out.shape) * k >= self.min_macs else None
        if op.name not in ("linalg.conv_2d_nhwc_hwcf", "linalg.conv_2d_nhwc_fhwc"):
            return None
        filter_shape = ir.RankedTensorType(b.type).shape
        hwcf = op.name == "linalg.conv_2d_nhwc_hwcf"
        window = filter_shape[:2] if hwcf else filter_shape[1:3]
        strides = int_list_attribute(op, "strides", [1, 1])
        if list(window) != [1, 1] or strides != [1, 1]:
            return None
        n, h, w, f = out.shape
        channels = ir.RankedTensorType(a.type).shape[3]
        if n * h * w * f * channels < self.min_macs or ir.RankedTensorType(a.type).shape[1:3] != [h, w]:
            return None
        return 0, 0 if hwcf else 1

    def _as_gemm(self, op: ir.Operation) -> "_Gemm | None":
        """``op`` as one GEMM, its operand views emitted at the insertion point; None (and
        nothing emitted) when the backend does not take it."""
        shape = self._gemm_shape(op)
        if shape is None:
            return None
        a, b = op.operands[0], op.operands[1]
        out = ir.RankedTensorType(op.operands[2].type)
        if op.name == "linalg.matmul":
            return _Gemm(a, b, *shape, out, lambda result: result)
        # A 1x1 stride-1 NHWC convolution is a (N*H*W, C) @ (C, F) matmul on views.
        n, h, w, f = out.shape
        hwcf = op.name == "linalg.conv_2d_nhwc_hwcf"
        matrix = _collapse(a, [[0, 1, 2], [3]])
        weights = _collapse(b, [[0, 1, 2], [3]] if hwcf else [[0], [1, 2, 3]])
        flat = ir.RankedTensorType.get([n * h * w, f], out.element_type)
        return _Gemm(matrix, weights, *shape, flat, lambda result: tensor.ExpandShapeOp(
            out, result, _reassociation([[0, 1, 2], [3]]), [], [n, h, w, f]).result)

    def _batch_matmul(self, op: ir.Operation, module: ir.Operation, num_threads: int) -> "ir.Value | None":
        a, b, init = op.operands[0], op.operands[1], op.operands[2]
        if not all(_static_f32(v) for v in (a, b, init)):
            return None
        maps = _maps(op)
        if maps is not None and maps not in _BATCH_MAPS:
            return None
        trans_a, trans_b = (0, 0) if maps is None else _BATCH_MAPS[maps]
        out = ir.RankedTensorType(init.type)
        a_type = ir.RankedTensorType(a.type)
        k = a_type.shape[-2] if trans_a else a_type.shape[-1]
        if math.prod(out.shape) * k < self.min_macs:
            return None
        return emit_call(module, self.externs[BATCH_MATMUL],
                         [a, b, _i32(trans_a), _i32(trans_b), _i32(num_threads)], [out])[0]


register_backend(BlasBackend())
