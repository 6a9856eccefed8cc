"""Builders for hand-scheduled loop kernels: the vector, affine and scf pieces that the
generated kernels (pipelines/tensor/bf16_matmul.py, int8_matmul.py, attention_kernel.py)
are made of.

Why builders rather than MLIR text: a kernel written as an f-string names every value by
hand (``%w{v}_{tag}``), repeats each type at every use and only fails when the whole text
is parsed, far from the line that got it wrong; a builder call types its result from its
operands and fails where it is made. The helpers here are the spellings those kernels
repeat (an affine index of loop variables, an in-bounds-or-masked 1-D transfer, a dot
product of lanes by a group of k); the loops themselves are plain ``scf`` builders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import affine, arith, func, scf, tensor, vector

from . import core

AffineBody = Callable[..., "ir.AffineExpr | Sequence[ir.AffineExpr]"]


def affine_map(body: AffineBody, dims: int) -> ir.AffineMap:
    """The map of ``dims`` dims whose results ``body(d0, d1, ...)`` returns (one expression
    or a sequence of them): ``affine_map(lambda d0: d0 * 12, 1)`` is ``(d0) -> (d0 * 12)``."""
    results = body(*(ir.AffineDimExpr.get(i) for i in range(dims)))
    if isinstance(results, ir.AffineExpr):
        results = [results]
    return ir.AffineMap.get(dims, 0, list(results))


def apply(body: AffineBody, *operands: ir.Value) -> ir.Value:
    """``affine.apply`` of ``body`` (see :func:`affine_map`) to index ``operands``."""
    return affine.apply(affine_map(body, len(operands)), list(operands))


def apply_results(indexing_map: ir.AffineMap, operands: Sequence[ir.Value],
                  results: int | None = None) -> list[ir.Value]:
    """One ``affine.apply`` per result of ``indexing_map`` (the first ``results``, sliced as a
    list) at ``operands`` (its dims): the indices an operand read through a map is read at."""
    dims = len(operands)
    return [affine.apply(ir.AffineMap.get(dims, 0, [result]), list(operands))
            for result in list(indexing_map.results)[:results]]


def minimum(body: AffineBody, *operands: ir.Value) -> ir.Value:
    """``affine.min`` of the expressions ``body`` returns, at index ``operands``."""
    return affine.min(affine_map(body, len(operands)), list(operands))


def read(source: ir.Value, indices: Sequence[ir.Value], padding: ir.Value, lanes: int,
         *, in_bounds: bool = True) -> ir.Value:
    """``lanes`` consecutive elements of ``source`` along its innermost dim from ``indices``
    (``vector.transfer_read``); ``in_bounds=False``: elements past the end read as ``padding``."""
    rank = ir.ShapedType(source.type).rank
    element = ir.ShapedType(source.type).element_type
    return vector.transfer_read(ir.VectorType.get([lanes], element), source, list(indices),
                                ir.AffineMap.get_minor_identity(rank, 1), padding,
                                ir.ArrayAttr.get([ir.BoolAttr.get(in_bounds)]))


def write(value: ir.Value, dest: ir.Value, indices: Sequence[ir.Value], *, in_bounds: bool = True) -> ir.Value:
    """``dest`` with the 1-D vector ``value`` stored along its innermost dim from ``indices``
    (``vector.transfer_write`` on a tensor); ``in_bounds=False``: lanes past the end dropped."""
    rank = ir.ShapedType(dest.type).rank
    return vector.transfer_write(dest.type, value, dest, list(indices), ir.AffineMap.get_minor_identity(rank, 1),
                                 ir.ArrayAttr.get([ir.BoolAttr.get(in_bounds)]))


def lane(value: ir.Value, position: int) -> ir.Value:
    """Element ``position`` of the 1-D vector ``value`` as a scalar."""
    return vector.extract(value, [], ir.DenseI64ArrayAttr.get([position]))


def first_element(value: ir.Value) -> ir.Value:
    """Element 0 of the 1-D vector ``value`` as a scalar."""
    return lane(value, 0)


def reduce(kind: vector.CombiningKind, value: ir.Value) -> ir.Value:
    """The lanes of the 1-D vector ``value`` combined by ``kind`` (``CombiningKind.ADD``,
    ``MAXIMUMF``, ...) into one scalar (``vector.reduction``)."""
    return vector.reduction(ir.VectorType(value.type).element_type, kind, value)


def dot_product(lhs: ir.Value, rhs: ir.Value, acc: ir.Value) -> ir.Value:
    """``acc[i] + sum_j lhs[i, j] * rhs[i, j]``: per lane ``i`` of ``acc``, the dot product of
    a group of k (``vector.contract``; what one dot-product instruction computes)."""
    i, j = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
    maps = [ir.AffineMap.get(2, 0, [i, j]), ir.AffineMap.get(2, 0, [i, j]), ir.AffineMap.get(2, 0, [i])]
    iterators = [ir.Attribute.parse(f"#vector.iterator_type<{kind}>") for kind in ("parallel", "reduction")]
    return vector.contract(acc.type, lhs, rhs, acc, ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                           ir.ArrayAttr.get(iterators), kind=ir.Attribute.parse("#vector.kind<add>"))


def private_function(name: str, inputs: Sequence[ir.Type], results: Sequence[ir.Type]) -> func.FuncOp:
    """A private ``func.func`` at the insertion point, its entry block made (arguments typed
    ``inputs``) and empty."""
    function = func.FuncOp(name, (list(inputs), list(results)), visibility="private")
    function.add_entry_block()
    return function


def declare_function(name: str, inputs: Sequence[ir.Type], results: Sequence[ir.Type]) -> func.FuncOp:
    """A private ``func.func`` declaration (no body) at the insertion point: a function the
    caller defines later, or one outside the module."""
    return func.FuncOp(name, (list(inputs), list(results)), visibility="private")


def declare_in_module(module_body: ir.Block, name: str, inputs: Sequence[ir.Type],
                      results: Sequence[ir.Type]) -> None:
    """Declare the external function ``name`` at the start of ``module_body`` unless a
    ``func.func`` of that name is there already: the importers call externs (LAPACK
    routines, PyTorch's random kernels) from any op, and each needs one declaration."""
    declared = any(op.operation.name == "func.func"
                   and ir.StringAttr(op.operation.attributes["sym_name"]).value == name
                   for op in module_body.operations)
    if not declared:
        with ir.InsertionPoint.at_block_begin(module_body), ir.Location.unknown():
            declare_function(name, inputs, results)


class IndexConstants:
    """Index constants of one function, each made once, at the insertion point of the first
    request (the function's top, where a kernel makes the ones it knows it needs)."""

    def __init__(self) -> None:
        self._made: dict[int, ir.Value] = {}

    def __call__(self, value: int) -> ir.Value:
        if value not in self._made:
            self._made[value] = core.index(value)
        return self._made[value]


def for_loop(lower: ir.Value, upper: ir.Value, step: ir.Value, carried: Sequence[ir.Value]) -> scf.ForOp:
    """``scf.for`` from ``lower`` to ``upper`` by ``step`` carrying ``carried``; the caller
    builds its body at ``InsertionPoint(loop.body)`` and ends it with ``scf.YieldOp``."""
    return scf.ForOp(lower, upper, step, list(carried))


def splat(value: float | int, lanes: int, element: ir.Type) -> ir.Value:
    """A constant ``vector<lanes x element>`` of ``value`` in every lane."""
    vector_type = ir.VectorType.get([lanes], element)
    scalar = ir.FloatAttr.get(element, float(value)) if core.is_float(element) else ir.IntegerAttr.get(element, int(value))
    return arith.constant(vector_type, ir.DenseElementsAttr.get_splat(vector_type, scalar))


def zero_vector(lanes: int, element: ir.Type) -> ir.Value:
    """A splat zero ``vector<lanes x element>``."""
    return splat(0, lanes, element)


def insert_in_parallel(tile: ir.Value, dest: ir.Value, offsets: Sequence[ir.Value], sizes: Sequence[ir.Value],
                       static_offsets: Sequence[int], static_sizes: Sequence[int],
                       static_strides: Sequence[int]) -> None:
    """Terminate an ``scf.forall`` body: its task's ``tile`` inserted into the shared
    ``dest`` (``tensor.parallel_insert_slice``; dynamic entries of the static lists are
    ``ir.ShapedType.get_dynamic_size()`` and take the SSA values in order)."""
    in_parallel = scf.InParallelOp()
    with ir.InsertionPoint(in_parallel.block):
        tensor.parallel_insert_slice(tile, dest, list(offsets), list(sizes), [], list(static_offsets),
                                     list(static_sizes), list(static_strides))
