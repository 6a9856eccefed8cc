"""Det: the determinant of each square matrix in the last two dims, by LU factorization
with partial pivoting (what numpy and LAPACK's getrf do), in f64.

Elimination is sequential (each step's pivot depends on the previous steps' updates), so
it is ``scf.for`` loops threading a work copy of the matrices through ``tensor.insert``
(``scatter.loop_nest``'s form), which bufferization turns into updates in place. A zero
pivot column leaves the determinant 0 and skips its division; an empty matrix's
determinant is 1.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, math, scf, tensor

from . import core
from .checks import check_extent
from .extent_math import as_index
from .scatter import loop_nest
from ..errors import OperandError


def _for(lower: ir.Value, upper: ir.Value, carried: list[ir.Value], body) -> list[ir.Value]:
    """``scf.for i in [lower, upper)`` threading ``carried`` through ``body(i, carried)``."""
    loop = scf.ForOp(lower, upper, core.index(1), carried)
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(body(loop.induction_variable, list(loop.inner_iter_args)))
    return list(loop.results)


def determinant(x: ir.Value) -> ir.Value:
    """``det(x[..., :, :])``: ``x`` ``[*batch, M, M]`` of floats to ``[*batch]``."""
    dims = core.sizes(x)
    element = core.tensor_type(x).element_type
    if len(dims) < 2 or not core.is_float(element):
        raise OperandError(f"Det takes float matrices [..., M, M]; got rank {len(dims)}, {element}")
    check_extent(dims[-1], dims[-2], "Det: matrices of {bound} rows and {value} columns are not square")
    f64 = ir.F64Type.get()
    batch, size = dims[:-2], as_index(dims[-1])
    work = core.elementwise([x], f64, lambda v: core.convert_scalar(v, f64))
    result = core.empty(batch, f64)
    zero, one = core.scalar_constant(0.0, f64), core.scalar_constant(1.0, f64)

    def factor(at: list[ir.Value], carried: list[ir.Value]) -> list[ir.Value]:
        matrix, out = carried

        def get(m: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
            return tensor.extract(m, [*at, i, j])

        def step(k: ir.Value, state: list[ir.Value]) -> list[ir.Value]:
            m, det = state
            # The pivot: the largest magnitude in column k at or below the diagonal.
            def better(i: ir.Value, best: list[ir.Value]) -> list[ir.Value]:
                row, magnitude = best
                value = math.absf(get(m, i, k))
                larger = arith.cmpf(arith.CmpFPredicate.OGT, value, magnitude)
                return [arith.select(larger, i, row), arith.select(larger, value, magnitude)]

            (pivot_row, _) = _for(k, size, [k, core.scalar_constant(-1.0, f64)], better)

            def swap(j: ir.Value, state: list[ir.Value]) -> list[ir.Value]:
                (current,) = state
                upper, lower = get(current, k, j), get(current, pivot_row, j)
                current = tensor.insert(lower, current, [*at, k, j])
                return [tensor.insert(upper, current, [*at, pivot_row, j])]

            (m,) = _for(core.index(0), size, [m], swap)
            swapped = arith.cmpi(arith.CmpIPredicate.ne, pivot_row, k)
            pivot = get(m, k, k)
            det = arith.mulf(arith.select(swapped, arith.negf(det), det), pivot)
            nonzero = arith.cmpf(arith.CmpFPredicate.ONE, pivot, zero)
            below = arith.addi(k, core.index(1))

            def eliminate(i: ir.Value, state: list[ir.Value]) -> list[ir.Value]:
                (current,) = state
                factor_ = arith.select(nonzero, arith.divf(get(current, i, k), pivot), zero)

                def update(j: ir.Value, inner: list[ir.Value]) -> list[ir.Value]:
                    (rows,) = inner
                    value = arith.subf(get(rows, i, j), arith.mulf(factor_, get(rows, k, j)))
                    return [tensor.insert(value, rows, [*at, i, j])]

                return _for(below, size, [current], update)

            (m,) = _for(below, size, [m], eliminate)
            return [m, det]

        matrix, det = _for(core.index(0), size, [matrix, one], step)
        return [matrix, tensor.insert(det, out, at)]

    _, determinants = loop_nest(batch, [work, result], factor)
    return core.elementwise([determinants], element, lambda v: core.convert_scalar(v, element))
