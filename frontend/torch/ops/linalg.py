"""Linear-algebra ATen ops (``torch.linalg.*`` and the older ``torch.*`` spellings) through
LAPACK calls (ir/lapack.py), float32 and float64, batched over leading dims.

What ``torch.export`` leaves of the family after decomposition is a small set of
factorizations, each one LAPACK routine: ``linalg_lu_factor_ex`` (getrf), ``_linalg_solve_ex``
and ``linalg_lu_solve`` (getrf + getrs), ``linalg_inv_ex`` (getrs on the identity),
``_linalg_det``/``_linalg_slogdet`` (from the LU), ``linalg_cholesky_ex`` (potrf),
``linalg_qr`` (geqrf + orgqr), ``_linalg_eigh`` (syevd), ``_linalg_svd`` (gesdd),
``linalg_solve_triangular`` (trsm). The rest (``pinv``, ``matrix_rank``, ``cond``, ``svdvals``,
``tensorinv``, ``tensorsolve``, ``cholesky_solve``...) decompose into these.

Errors: eager ``torch.linalg.solve``/``inv``/``cholesky`` raise ``LinAlgError`` on a singular
(or not positive-definite) input; the exported program says so with an
``_linalg_check_errors`` node on the routine's ``info``, which becomes a run-time check:
the compiled call raises :class:`~tilecraft.errors.LinAlgError` naming the op. The ``*_ex``
variants return ``info`` instead, as in eager.
"""

from __future__ import annotations

import math
from typing import Any

from mlir import ir

from ....errors import OperandError, OperandTypeError
from ....ir import core, lapack, movement, reshapes
from ..importer import OpContext
from . import table

# api name of _linalg_check_errors -> what a positive info means there.
_FAILURES = {
    "linalg.cholesky": "the input is not positive-definite (the leading minor of order {value} is not)",
    "linalg.cholesky_ex": "the input is not positive-definite (the leading minor of order {value} is not)",
    "linalg.inv": "the input matrix is singular (diagonal element {value} of U is zero)",
    "linalg.solve": "the input matrix is singular (diagonal element {value} of U is zero), the solve "
                    "could not be completed",
    "linalg.eigh": "the algorithm failed to converge ({value} off-diagonal elements did not)",
    "linalg.svd": "the algorithm failed to converge (info {value})",
}


def _matrix(ctx: OpContext, value: Any) -> ir.Value:
    x = ctx.tensor(value)
    element = str(core.tensor_type(x).element_type)
    if element not in lapack.ELEMENTS:
        raise OperandTypeError(f"linear-algebra ops take float32 or float64 tensors, not {element}")
    return x


def _square(x: ir.Value, what: str) -> None:
    shape = core.static_shape(x)
    if len(shape) < 2:
        raise OperandError(f"{what}: the input must have at least 2 dimensions, got {len(shape)}")
    if shape[-1] != shape[-2]:
        raise OperandError(f"{what}: A must be batches of square matrices, but they are "
                         f"{shape[-2]} by {shape[-1]} matrices")


def _i32() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def _lu(a: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, list[int]]:
    """(LU, pivots, info) of ``a`` as batches, and its leading dims."""
    batched, leading = lapack.as_batch(a)
    b, m, n = core.static_shape(batched)
    element = core.tensor_type(a).element_type
    lu, pivots, info = lapack.call("getrf", [batched], [
        lapack.batch_type(b, [m, n], element), lapack.batch_type(b, [min(m, n)], _i32()),
        lapack.batch_type(b, [], _i32())])
    return lu, pivots, info, leading


def _restore(leading: list[int], *values: ir.Value) -> tuple[ir.Value, ...]:
    return tuple(lapack.from_batch(v, leading) for v in values)


@table.aten("linalg_lu_factor_ex.default")
def lu_factor_ex(ctx: OpContext, a: Any, pivot: bool = True, check_errors: bool = False) -> tuple[ir.Value, ...]:
    if not pivot:
        raise OperandError("LU without pivoting (pivot=False) is not supported on CPU, as in eager")
    lu, pivots, info, leading = _lu(_matrix(ctx, a))
    return _restore(leading, lu, pivots, info)


@table.aten("_linalg_det.default")
def det(ctx: OpContext, a: Any) -> tuple[ir.Value, ...]:
    x = _matrix(ctx, a)
    _square(x, "linalg.det")
    lu, pivots, _, leading = _lu(x)
    b, n = core.static_shape(lu)[:2]
    element = core.tensor_type(x).element_type
    value, _, _ = lapack.call("lu_det", [lu, pivots], [lapack.batch_type(b, [], element)] * 3)
    return _restore(leading, value, lu, pivots)


@table.aten("_linalg_slogdet.default")
def slogdet(ctx: OpContext, a: Any) -> tuple[ir.Value, ...]:
    x = _matrix(ctx, a)
    _square(x, "linalg.slogdet")
    lu, pivots, _, leading = _lu(x)
    b = core.static_shape(lu)[0]
    element = core.tensor_type(x).element_type
    _, sign, logabs = lapack.call("lu_det", [lu, pivots], [lapack.batch_type(b, [], element)] * 3)
    return _restore(leading, sign, logabs, lu, pivots)


def _lu_solve(lu: ir.Value, pivots: ir.Value, rhs: ir.Value, transpose: bool) -> ir.Value:
    """X of A X = B (A^T X = B when ``transpose``) from A's batched LU; ``rhs`` batched alike."""
    return lapack.call("getrs", [lu, pivots, rhs, int(transpose)], [rhs.type])[0]


def _broadcast_batches(a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``a`` and ``b`` (matrices, batch dims first) with their batch dims broadcast."""
    shape_a, shape_b = core.static_shape(a), core.static_shape(b)
    batch_a, batch_b = shape_a[:-2], shape_b[:-2]
    rank = max(len(batch_a), len(batch_b))
    batch_a, batch_b = [1] * (rank - len(batch_a)) + batch_a, [1] * (rank - len(batch_b)) + batch_b
    batch = []
    for x, y in zip(batch_a, batch_b):
        if x != y and 1 not in (x, y):
            raise OperandError(f"the batch dimensions {shape_a[:-2]} and {shape_b[:-2]} do not broadcast")
        batch.append(max(x, y))
    if [*batch, *shape_a[-2:]] != shape_a:
        a = movement.broadcast_to(a, [*batch, *shape_a[-2:]])
    if [*batch, *shape_b[-2:]] != shape_b:
        b = movement.broadcast_to(b, [*batch, *shape_b[-2:]])
    return a, b


def _vector_rhs(a_shape: list, b_shape: list) -> bool:
    """torch's rule: B is a (batch of) vector(s) when it is 1-d, or has one dim less than A
    and A's shape without its last dim."""
    return len(b_shape) == 1 or (len(b_shape) == len(a_shape) - 1 and b_shape == a_shape[:-1])


def _solve(a: ir.Value, b: ir.Value, left: bool, lu_of: "tuple[ir.Value, ir.Value] | None" = None,
           adjoint: bool = False) -> tuple[ir.Value, ir.Value, ir.Value, "ir.Value | None", list[int]]:
    """(X, LU, pivots, info, batch dims) of A X = B (X A = B unless ``left``), broadcasting
    batch dims, B a vector or a matrix as torch decides; ``adjoint``: A^T in place of A.
    With ``lu_of`` (LU and pivots of A, batched like A), no factorization happens and info
    is None."""
    vector = _vector_rhs(core.static_shape(a), core.static_shape(b))
    if vector:
        b = reshapes.reshape(b, [*core.static_shape(b), 1])
    if not left:  # X A = B  <=>  A^T X^T = B^T
        b = _transpose_last(b)
    if lu_of is not None:
        lu_full, pivots_full = lu_of
        a_b, b_b = _broadcast_batches(lu_full, b)
        shape = core.static_shape(a_b)
        pivots_full = movement.broadcast_to(pivots_full, [*shape[:-2], shape[-1]]) \
            if core.static_shape(pivots_full)[:-1] != shape[:-2] else pivots_full
        lu, leading = lapack.as_batch(a_b)
        pivots = reshapes.reshape(pivots_full, [core.static_shape(lu)[0], shape[-1]])
        info = None
    else:
        a_b, b_b = _broadcast_batches(a, b)
        lu, pivots, info, leading = _lu(a_b)
    rhs, _ = lapack.as_batch(b_b)
    # X A = B is A^T X^T = B^T, and X A^T = B is A X^T = B^T
    x = lapack.from_batch(_lu_solve(lu, pivots, rhs, transpose=adjoint if left else not adjoint), leading)
    if not left:
        x = _transpose_last(x)
    if vector:
        x = reshapes.reshape(x, core.static_shape(x)[:-1])
    return x, lu, pivots, info, leading


@table.aten("_linalg_solve_ex.default")
def solve_ex(ctx: OpContext, a: Any, b: Any, left: bool = True, check_errors: bool = False) -> tuple[ir.Value, ...]:
    x_a, x_b = _matrix(ctx, a), _matrix(ctx, b)
    _square(x_a, "linalg.solve")
    x, lu, pivots, info, leading = _solve(x_a, x_b, left)
    return (x, *_restore(leading, lu, pivots, info))


@table.aten("linalg_lu_solve.default")
def lu_solve(ctx: OpContext, lu: Any, pivots: Any, b: Any, left: bool = True, adjoint: bool = False) -> ir.Value:
    x_lu, x_b = _matrix(ctx, lu), _matrix(ctx, b)
    _square(x_lu, "linalg.lu_solve")
    x, *_ = _solve(x_lu, x_b, left, lu_of=(x_lu, ctx.tensor(pivots)), adjoint=adjoint)
    return x


@table.aten("linalg_inv_ex.default")
def inv_ex(ctx: OpContext, a: Any, check_errors: bool = False) -> tuple[ir.Value, ir.Value]:
    x = _matrix(ctx, a)
    _square(x, "linalg.inv")
    lu, pivots, info, leading = _lu(x)
    b, n = core.static_shape(lu)[:2]
    element = core.tensor_type(x).element_type
    identity = movement.broadcast_to(movement.eye([n, n], element), [b, n, n])
    inverse = _lu_solve(lu, pivots, identity, transpose=False)
    return _restore(leading, inverse, info)


@table.aten("_linalg_check_errors.default")
def linalg_check_errors(ctx: OpContext, info: Any, api_name: str, *, is_matrix: bool) -> None:
    failure = _FAILURES.get(api_name.removeprefix("torch."), "LAPACK reported info {value}")
    lapack.check_info(ctx.tensor(info), f"{api_name}: {failure}")
    return None


@table.aten("linalg_cholesky_ex.default")
def cholesky_ex(ctx: OpContext, a: Any, upper: bool = False, check_errors: bool = False) -> tuple[ir.Value, ir.Value]:
    x = _matrix(ctx, a)
    _square(x, "linalg.cholesky")
    batched, leading = lapack.as_batch(x)
    b, n, _ = core.static_shape(batched)
    factor, info = lapack.call("potrf", [batched, int(upper)], [
        batched.type, lapack.batch_type(b, [], _i32())])
    return _restore(leading, factor, info)


@table.aten("linalg_qr.default")
def qr(ctx: OpContext, a: Any, mode: str = "reduced") -> tuple[ir.Value, ir.Value]:
    x = _matrix(ctx, a)
    if mode not in ("reduced", "complete", "r"):
        raise OperandError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' "
                         "(default), 'r', or 'complete'")
    batched, leading = lapack.as_batch(x)
    b, m, n = core.static_shape(batched)
    k = min(m, n)
    element = core.tensor_type(x).element_type
    q_cols = {"reduced": k, "complete": m, "r": 0}[mode]
    r_rows = m if mode == "complete" else k
    q, r = lapack.call("qr", [batched], [lapack.batch_type(b, [m if q_cols else 0, q_cols], element),
                                         lapack.batch_type(b, [r_rows, n], element)])
    if mode == "r":  # eager returns an empty Q of shape (0,)
        return reshapes.reshape(q, [0]), lapack.from_batch(r, leading)
    return _restore(leading, q, r)


@table.aten("_linalg_eigh.default")
def eigh(ctx: OpContext, a: Any, uplo: str = "L", compute_v: bool = True) -> tuple[ir.Value, ir.Value]:
    x = _matrix(ctx, a)
    _square(x, "linalg.eigh")
    if uplo not in ("L", "U"):
        raise OperandError(f"Expected UPLO argument to be 'L' or 'U', but got {uplo}")
    batched, leading = lapack.as_batch(x)
    b, n, _ = core.static_shape(batched)
    element = core.tensor_type(x).element_type
    vectors_shape = [n, n] if compute_v else [0, 0]
    values, vectors, _ = lapack.call("syevd", [batched, int(uplo == "U"), int(compute_v)], [
        lapack.batch_type(b, [n], element), lapack.batch_type(b, vectors_shape, element),
        lapack.batch_type(b, [], _i32())])
    values = lapack.from_batch(values, leading)
    vectors = lapack.from_batch(vectors, leading) if compute_v else reshapes.reshape(vectors, [0])
    return values, vectors


@table.aten("_linalg_svd.default")
def svd(ctx: OpContext, a: Any, full_matrices: bool = False, compute_uv: bool = True,
        driver: Any = None) -> tuple[ir.Value, ir.Value, ir.Value]:
    x = _matrix(ctx, a)
    batched, leading = lapack.as_batch(x)
    b, m, n = core.static_shape(batched)
    k = min(m, n)
    element = core.tensor_type(x).element_type
    if compute_uv:
        u_shape, vh_shape = ([m, m], [n, n]) if full_matrices else ([m, k], [k, n])
    else:
        u_shape, vh_shape = [0, 0], [0, 0]
    values, u, vh, _ = lapack.call("gesdd", [batched], [
        lapack.batch_type(b, [k], element), lapack.batch_type(b, u_shape, element),
        lapack.batch_type(b, vh_shape, element), lapack.batch_type(b, [], _i32())])
    values = lapack.from_batch(values, leading)
    if not compute_uv:
        empty = reshapes.reshape(u, [0])
        return empty, values, reshapes.reshape(vh, [0])
    return lapack.from_batch(u, leading), values, lapack.from_batch(vh, leading)


@table.aten("linalg_solve_triangular.default")
def solve_triangular(ctx: OpContext, a: Any, b: Any, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> ir.Value:
    x_a, x_b = _matrix(ctx, a), _matrix(ctx, b)
    _square(x_a, "linalg.solve_triangular")
    x_a, x_b = _broadcast_batches(x_a, x_b)
    a_b, _ = lapack.as_batch(x_a)
    rhs, leading = lapack.as_batch(x_b)
    x = lapack.call("trsm", [a_b, rhs, int(upper), int(left), int(unitriangular)], [rhs.type])[0]
    return lapack.from_batch(x, leading)


def _transpose_last(x: ir.Value) -> ir.Value:
    rank = len(core.static_shape(x))
    return core.transpose(x, [*range(rank - 2), rank - 1, rank - 2])


def _triangular_solve(a: ir.Value, b: ir.Value, upper: bool, left: bool = True, unit: bool = False) -> ir.Value:
    """X of A X = B (X A = B unless ``left``) for triangular A, batch dims broadcast."""
    a, b = _broadcast_batches(a, b)
    a_b, _ = lapack.as_batch(a)
    rhs, leading = lapack.as_batch(b)
    x = lapack.call("trsm", [a_b, rhs, int(upper), int(left), int(unit)], [rhs.type])[0]
    return lapack.from_batch(x, leading)


@table.aten("cholesky.default")
def cholesky(ctx: OpContext, a: Any, upper: bool = False) -> ir.Value:
    factor, info = cholesky_ex(ctx, a, upper)
    lapack.check_info(info, f"torch.cholesky: {_FAILURES['linalg.cholesky']}")
    return factor


@table.aten("cholesky_solve.default")
def cholesky_solve(ctx: OpContext, b: Any, factor: Any, upper: bool = False) -> ir.Value:
    """A X = B for A = L L^T (U^T U when ``upper``): two triangular solves."""
    x_b, x_f = _matrix(ctx, b), _matrix(ctx, factor)
    _square(x_f, "torch.cholesky_solve")
    first = _transpose_last(x_f) if upper else x_f  # lower: L or U^T
    y = _triangular_solve(first, x_b, upper=False)
    return _triangular_solve(_transpose_last(first), y, upper=True)


@table.aten("cholesky_inverse.default")
def cholesky_inverse(ctx: OpContext, factor: Any, upper: bool = False) -> ir.Value:
    x_f = _matrix(ctx, factor)
    _square(x_f, "torch.cholesky_inverse")
    shape = core.static_shape(x_f)
    element = core.tensor_type(x_f).element_type
    identity = movement.broadcast_to(movement.eye(shape[-2:], element), shape)
    return cholesky_solve(ctx, identity, x_f, upper)


@table.aten("triangular_solve.default")
def triangular_solve(ctx: OpContext, b: Any, a: Any, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> tuple[ir.Value, ir.Value]:
    x_b, x_a = _matrix(ctx, b), _matrix(ctx, a)
    _square(x_a, "torch.triangular_solve")
    coefficient = _transpose_last(x_a) if transpose else x_a
    x = _triangular_solve(coefficient, x_b, upper != transpose, unit=unitriangular)
    batch = core.static_shape(x)[:-2]
    a_shape = core.static_shape(x_a)
    clone = x_a if a_shape[:-2] == batch else movement.broadcast_to(x_a, [*batch, *a_shape[-2:]])
    return x, clone


def _lu_unpack(lu: ir.Value, pivots: ir.Value, leading: list[int], unpack_data: bool = True,
               unpack_pivots: bool = True) -> tuple[ir.Value, ir.Value, ir.Value]:
    """P, L, U of batched LU and pivots (torch returns empty tensors for what is not unpacked)."""
    b, m, n = core.static_shape(lu)
    k = min(m, n)
    element = core.tensor_type(lu).element_type
    p, l, u = lapack.call("lu_unpack", [lu, pivots], [
        lapack.batch_type(b, [m, m] if unpack_pivots else [0, 0], element),
        lapack.batch_type(b, [m, k] if unpack_data else [0, 0], element),
        lapack.batch_type(b, [k, n] if unpack_data else [0, 0], element)])
    p = lapack.from_batch(p, leading) if unpack_pivots else reshapes.reshape(p, [0])
    if not unpack_data:
        return p, reshapes.reshape(l, [0]), reshapes.reshape(u, [0])
    return p, lapack.from_batch(l, leading), lapack.from_batch(u, leading)


@table.aten("linalg_lu.default")
def linalg_lu(ctx: OpContext, a: Any, pivot: bool = True) -> tuple[ir.Value, ir.Value, ir.Value]:
    if not pivot:
        raise OperandError("LU without pivoting (pivot=False) is not supported on CPU, as in eager")
    lu, pivots, _, leading = _lu(_matrix(ctx, a))
    return _lu_unpack(lu, pivots, leading)


@table.aten("lu_unpack.default")
def lu_unpack(ctx: OpContext, lu: Any, pivots: Any, unpack_data: bool = True,
              unpack_pivots: bool = True) -> tuple[ir.Value, ir.Value, ir.Value]:
    x_lu = _matrix(ctx, lu)
    batched, leading = lapack.as_batch(x_lu)
    piv = ctx.tensor(pivots)
    if str(core.tensor_type(piv).element_type) != "i32":
        raise OperandTypeError("lu_unpack: the pivots must be int32, as linalg.lu_factor returns them")
    k = min(core.static_shape(batched)[1:])
    if core.static_shape(piv)[-1] != k or core.static_shape(piv)[:-1] != leading:
        raise OperandError(f"lu_unpack: the pivots' shape {core.static_shape(piv)} does not match the LU data's "
                         f"{core.static_shape(x_lu)}")
    piv = reshapes.reshape(piv, [core.static_shape(batched)[0], k])
    return _lu_unpack(batched, piv, leading, unpack_data, unpack_pivots)


@table.aten("geqrf.default")
def geqrf(ctx: OpContext, a: Any) -> tuple[ir.Value, ir.Value]:
    x = _matrix(ctx, a)
    batched, leading = lapack.as_batch(x)
    b, m, n = core.static_shape(batched)
    element = core.tensor_type(x).element_type
    out, tau = lapack.call("geqrf", [batched], [batched.type, lapack.batch_type(b, [min(m, n)], element)])
    return _restore(leading, out, tau)


def _reflectors(ctx: OpContext, a: Any, tau: Any) -> tuple[ir.Value, ir.Value, list[int]]:
    x, t = _matrix(ctx, a), _matrix(ctx, tau) if isinstance(tau, ir.Value) else ctx.tensor(tau)
    batched, leading = lapack.as_batch(x)
    t_shape = core.static_shape(t)
    if t_shape[:-1] != leading:
        raise OperandError(f"the batch dims of tau {t_shape[:-1]} and of the input {leading} differ")
    return batched, reshapes.reshape(t, [core.static_shape(batched)[0], t_shape[-1]]), leading


@table.aten("linalg_householder_product.default")
def householder_product(ctx: OpContext, a: Any, tau: Any) -> ir.Value:
    batched, taus, leading = _reflectors(ctx, a, tau)
    _, m, n = core.static_shape(batched)
    k = core.static_shape(taus)[1]
    if n > m or k > n:
        raise OperandError(f"householder_product: needs input.shape[-2] >= input.shape[-1] >= tau.shape[-1], "
                         f"got {m}, {n}, {k}")
    return lapack.from_batch(lapack.call("orgqr", [batched, taus], [batched.type])[0], leading)


@table.aten("ormqr.default")
def ormqr(ctx: OpContext, a: Any, tau: Any, other: Any, left: bool = True, transpose: bool = False) -> ir.Value:
    batched, taus, leading = _reflectors(ctx, a, tau)
    c = _matrix(ctx, other)
    c_b, c_leading = lapack.as_batch(c)
    if c_leading != leading:
        raise OperandError(f"ormqr: the batch dims of other {c_leading} and of the input {leading} differ")
    nq = core.static_shape(batched)[1]
    if core.static_shape(c_b)[1 if left else 2] != nq:
        raise OperandError(f"ormqr: other's {'rows' if left else 'columns'} must number input.shape[-2] = {nq}")
    out = lapack.call("ormqr", [batched, taus, c_b, int(left), int(transpose)], [c_b.type])[0]
    return lapack.from_batch(out, leading)


@table.aten("linalg_matrix_exp.default")
def matrix_exp(ctx: OpContext, a: Any) -> ir.Value:
    x = _matrix(ctx, a)
    _square(x, "torch.linalg.matrix_exp")
    batched, leading = lapack.as_batch(x)
    return lapack.from_batch(lapack.call("matrix_exp", [batched], [batched.type])[0], leading)


def _per_matrix(ctx: OpContext, tolerance: Any, leading: list[int], element: ir.Type) -> ir.Value:
    """A tolerance (number or tensor broadcasting against the batch dims) as one value per
    matrix of the batch."""
    dtype = lapack.numpy_dtype(element)
    value = ctx.tensor(tolerance, dtype)
    shape = core.static_shape(value)
    if len(shape) > len(leading) or any(s not in (1, d) for s, d in zip(reversed(shape), reversed(leading))):
        raise OperandError(f"the tolerance's shape {shape} does not broadcast to the batch dims {leading}")
    if shape != leading:
        value = movement.broadcast_to(value, leading)
    batch = 1
    for d in leading:
        batch *= d
    return reshapes.reshape(value, [batch])


@table.aten("linalg_pinv.atol_rtol_tensor", "linalg_pinv.atol_rtol_float")
def pinv(ctx: OpContext, a: Any, atol: Any = None, rtol: Any = None, hermitian: bool = False) -> ir.Value:
    x = _matrix(ctx, a)
    if hermitian:
        _square(x, "linalg.pinv")
    batched, leading = lapack.as_batch(x)
    b, m, n = core.static_shape(batched)
    element = core.tensor_type(x).element_type
    tolerances = [_per_matrix(ctx, 0.0 if t is None else t, leading, element) for t in (atol, rtol)]
    out = lapack.call("pinv", [batched, *tolerances, int(hermitian), int(atol is not None), int(rtol is not None)],
                      [lapack.batch_type(b, [n, m], element)])[0]
    return lapack.from_batch(out, leading)


@table.aten("linalg_eig.default")
def eig(ctx: OpContext, a: Any) -> None:
    raise OperandError("linalg.eig/eigvals of a general (non-symmetric) matrix return complex tensors, "
                              "and compiled modules have no complex dtype: use linalg.eigh/eigvalsh for "
                              "symmetric matrices")


@table.aten("linalg_ldl_factor_ex.default")
def ldl_factor_ex(ctx: OpContext, a: Any, *, hermitian: bool = False,
                  check_errors: bool = False) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Real matrices: hermitian or not, the same symmetric factorization (sytrf)."""
    x = _matrix(ctx, a)
    _square(x, "torch.linalg.ldl_factor_ex")
    batched, leading = lapack.as_batch(x)
    b, n, _ = core.static_shape(batched)
    ld, pivots, info = lapack.call("sytrf", [batched], [
        batched.type, lapack.batch_type(b, [n], _i32()), lapack.batch_type(b, [], _i32())])
    return _restore(leading, ld, pivots, info)


@table.aten("linalg_ldl_solve.default")
def ldl_solve(ctx: OpContext, ld: Any, pivots: Any, b: Any, *, hermitian: bool = False) -> ir.Value:
    x_ld, x_b = _matrix(ctx, ld), _matrix(ctx, b)
    _square(x_ld, "torch.linalg.ldl_solve")
    piv = ctx.tensor(pivots)
    ld_shape, b_shape = core.static_shape(x_ld), core.static_shape(x_b)
    if ld_shape[:-2] != b_shape[:-2] and math.prod(ld_shape[:-2]) != 1:
        raise OperandError(f"ldl_solve: the batch dims of LD {ld_shape[:-2]} and B {b_shape[:-2]} differ")
    ld_b, _ = lapack.as_batch(x_ld)
    rhs, leading = lapack.as_batch(x_b)
    piv = reshapes.reshape(piv, [core.static_shape(ld_b)[0], ld_shape[-1]])
    return lapack.from_batch(lapack.call("sytrs", [ld_b, piv, rhs], [rhs.type])[0], leading)
