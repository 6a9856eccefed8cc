"""The expression language of :func:`tilecraft.schedule.te.compute`: index and scalar expressions.

An operator is written the way TVM's ``te.compute`` writes it::

    k = reduce_axis(K, name="k")
    C = compute((M, N), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")

``i``, ``j`` and ``k`` are :class:`IterVar` s. Inside ``A[...]`` they form *index*
expressions, which must be affine (``i + k``, ``2 * i``, ``i // 4``, ``i % 4``): they become
the operand's ``indexing_map`` in the ``linalg.generic``. Everything else is a *scalar*
expression (:class:`Expr`), which becomes the generic's body.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import ScheduleError
from .symbolic import Var

# --- index expressions ------------------------------------------------------------------


class IndexExpr:
    """An affine expression of iteration variables, used to index a tensor."""

    def __add__(self, other: "IndexExpr | int") -> "IndexExpr":
        return IndexBinary("+", self, as_index(other))

    __radd__ = __add__

    def __sub__(self, other: "IndexExpr | int") -> "IndexExpr":
        return IndexBinary("+", self, IndexBinary("*", as_index(other), IndexConst(-1)))

    def __rsub__(self, other: int) -> "IndexExpr":
        return as_index(other) - self

    def __mul__(self, other: "IndexExpr | int") -> "IndexExpr":
        return IndexBinary("*", self, as_index(other))

    __rmul__ = __mul__

    def __floordiv__(self, other: int) -> "IndexExpr":
        return IndexBinary("floordiv", self, as_index(other))

    def __mod__(self, other: int) -> "IndexExpr":
        return IndexBinary("mod", self, as_index(other))

    def variables(self) -> list["IterVar"]:
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class IndexConst(IndexExpr):
    value: int

    def variables(self) -> list["IterVar"]:
        return []

    def __repr__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, eq=False)
class IndexBinary(IndexExpr):
    op: str  # "+", "*", "floordiv", "mod"
    lhs: IndexExpr
    rhs: IndexExpr

    def variables(self) -> list["IterVar"]:
        return self.lhs.variables() + self.rhs.variables()

    def __repr__(self) -> str:
        symbol = {"floordiv": "//", "mod": "%"}.get(self.op, self.op)
        return f"({self.lhs!r} {symbol} {self.rhs!r})"


_iter_ids = itertools.count()


class IterVar(IndexExpr):
    """An iteration variable: a spatial axis of a compute, or a reduction axis.

    Create reduction axes with :func:`reduce_axis`; spatial axes are the parameters of the
    lambda given to :func:`compute`.
    """

    def __init__(self, extent: "int | Var", name: str, kind: str) -> None:
        if isinstance(extent, Var):
            self.extent: int | Var = extent
        elif not isinstance(extent, (int, np.integer)) or isinstance(extent, bool) or extent < 1:
            raise ScheduleError(
                f"axis {name!r}: extent must be a positive integer or a var, got {extent!r}")
        else:
            self.extent = int(extent)
        self.name = name
        self.kind = kind  # "spatial" or "reduce"
        self.uid = next(_iter_ids)

    def variables(self) -> list["IterVar"]:
        return [self]

    def __repr__(self) -> str:
        return self.name

    def __hash__(self) -> int:
        return hash(self.uid)

    def __eq__(self, other: object) -> bool:  # identity: `i == j` is not an index comparison
        return self is other


def as_index(value: object) -> IndexExpr:
    if isinstance(value, IndexExpr):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return IndexConst(int(value))
    raise ScheduleError(
        f"tensor indices must be affine expressions of axes and integers, got {value!r} "
        f"({type(value).__name__})"
    )


def reduce_axis(extent: "int | Var | tuple[int, int | Var]", name: str = "k") -> IterVar:
    """A reduction axis over ``range(extent)``; TVM's ``te.reduce_axis((0, K), "k")`` also works.
    ``extent`` may be a :func:`var` (the axis then runs over a dimension given at call time)."""
    if isinstance(extent, tuple):
        if len(extent) != 2 or extent[0] != 0:
            raise ScheduleError(f"reduce_axis takes an extent or a (0, extent) range, got {extent!r}")
        extent = extent[1]
    return IterVar(extent, name, "reduce")


# --- scalar expressions -----------------------------------------------------------------

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def as_dtype(value: object) -> np.dtype:
    try:
        return np.dtype(value)
    except TypeError:
        raise ScheduleError(f"not a dtype: {value!r}") from None


class Expr:
    """A scalar expression evaluated at one point of the iteration space."""

    dtype: np.dtype | None  # None: a Python constant, typed by the expression it meets

    def _binary(self, op: str, other: object, reverse: bool = False) -> "Expr":
        other = as_expr(other)
        lhs, rhs = (other, self) if reverse else (self, other)
        return Binary(op, lhs, rhs, unify_dtypes(lhs, rhs, op))

    def __add__(self, other): return self._binary("add", other)
    def __radd__(self, other): return self._binary("add", other, True)
    def __sub__(self, other): return self._binary("sub", other)
    def __rsub__(self, other): return self._binary("sub", other, True)
    def __mul__(self, other): return self._binary("mul", other)
    def __rmul__(self, other): return self._binary("mul", other, True)
    def __truediv__(self, other): return self._binary("div", other)
    def __rtruediv__(self, other): return self._binary("div", other, True)

    def __neg__(self) -> "Expr":
        return Unary("neg", self, self.dtype)

    def _compare(self, op: str, other: object) -> "Expr":
        other = as_expr(other)
        unify_dtypes(self, other, op)
        return Compare(op, self, other, np.dtype(np.bool_))

    def __lt__(self, other): return self._compare("lt", other)
    def __le__(self, other): return self._compare("le", other)
    def __gt__(self, other): return self._compare("gt", other)
    def __ge__(self, other): return self._compare("ge", other)

    def astype(self, dtype: object) -> "Expr":
        return Cast(self, as_dtype(dtype))

    def __bool__(self) -> bool:
        raise ScheduleError(
            "a tensor expression has no truth value; use tilecraft.schedule.te.if_then_else"
        )


@dataclass(eq=False)
class Const(Expr):
    value: float | int | bool
    dtype: np.dtype | None = None

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(eq=False)
class Load(Expr):
    tensor: "object"  # compute.Tensor
    indices: tuple[IndexExpr, ...]
    dtype: np.dtype | None = None

    def __repr__(self) -> str:
        return f"{self.tensor.name}[{', '.join(map(repr, self.indices))}]"


@dataclass(eq=False)
class Binary(Expr):
    op: str  # add sub mul div max min
    lhs: Expr
    rhs: Expr
    dtype: np.dtype | None = None


@dataclass(eq=False)
class Compare(Expr):
    op: str  # lt le gt ge
    lhs: Expr
    rhs: Expr
    dtype: np.dtype | None = None


@dataclass(eq=False)
class Unary(Expr):
    op: str  # neg exp log sqrt tanh abs sigmoid
    operand: Expr
    dtype: np.dtype | None = None


@dataclass(eq=False)
class Cast(Expr):
    operand: Expr
    dtype: np.dtype | None = None


@dataclass(eq=False)
class Select(Expr):
    condition: Expr
    true_value: Expr
    false_value: Expr
    dtype: np.dtype | None = None


@dataclass(eq=False)
class Reduce(Expr):
    """``combiner`` (sum, max, min, prod) of ``body`` over ``axes``; only at a compute's top."""

    combiner: str
    body: Expr
    axes: tuple[IterVar, ...]
    dtype: np.dtype | None = None


def as_expr(value: object) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, IterVar):
        raise ScheduleError(
            f"axis {value.name!r} used as a value; axes may only index tensors in this DSL"
        )
    if isinstance(value, (bool, np.bool_)):
        return Const(bool(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        return Const(value.item() if isinstance(value, np.generic) else value)
    raise ScheduleError(f"cannot use {value!r} ({type(value).__name__}) in a tensor expression")


def unify_dtypes(lhs: Expr, rhs: Expr, op: str) -> np.dtype | None:
    """The common dtype of two operands; Python constants adopt the other side's dtype."""
    if lhs.dtype is None and rhs.dtype is None:
        return None
    if lhs.dtype is None or rhs.dtype is None:
        return lhs.dtype or rhs.dtype
    if lhs.dtype != rhs.dtype:
        raise ScheduleError(
            f"{op}: operands have different dtypes {lhs.dtype} and {rhs.dtype}; "
            "convert one with .astype(...)"
        )
    return lhs.dtype


def _unary(op: str, x: object, float_only: bool = True) -> Expr:
    x = as_expr(x)
    if float_only and x.dtype is not None and x.dtype not in FLOAT_DTYPES:
        raise ScheduleError(f"{op} needs a floating-point operand, got {x.dtype}")
    return Unary(op, x, x.dtype)


def exp(x: object) -> Expr: return _unary("exp", x)
def log(x: object) -> Expr: return _unary("log", x)
def sqrt(x: object) -> Expr: return _unary("sqrt", x)
def tanh(x: object) -> Expr: return _unary("tanh", x)
def sigmoid(x: object) -> Expr: return _unary("sigmoid", x)
def abs(x: object) -> Expr: return _unary("abs", x, float_only=False)  # noqa: A001


def maximum(a: object, b: object) -> Expr:
    """Elementwise maximum of two scalars (``te.max`` of two values)."""
    return as_expr(a)._binary("max", b)


def minimum(a: object, b: object) -> Expr:
    return as_expr(a)._binary("min", b)


def if_then_else(condition: Expr, true_value: object, false_value: object) -> Expr:
    condition = as_expr(condition)
    if condition.dtype != np.dtype(np.bool_):
        raise ScheduleError("if_then_else: the condition must be a comparison")
    a, b = as_expr(true_value), as_expr(false_value)
    return Select(condition, a, b, unify_dtypes(a, b, "if_then_else"))


def _reduce(combiner: str, body: object, axis: "IterVar | Sequence[IterVar]") -> Reduce:
    body = as_expr(body)
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    if not axes:
        raise ScheduleError(f"{combiner}: give at least one reduction axis")
    for a in axes:
        if not isinstance(a, IterVar) or a.kind != "reduce":
            raise ScheduleError(
                f"{combiner}: axis {a!r} is not a reduction axis; create it with reduce_axis(extent)"
            )
    return Reduce(combiner, body, axes, body.dtype)


def sum(body: object, axis: "IterVar | Sequence[IterVar]") -> Reduce:  # noqa: A001
    """``te.sum``: the sum of ``body`` over reduction ``axis`` (one axis or several)."""
    return _reduce("sum", body, axis)


def max(body: object, axis: "IterVar | Sequence[IterVar]") -> Reduce:  # noqa: A001
    """``te.max`` as a reduction: the maximum of ``body`` over ``axis``."""
    return _reduce("max", body, axis)


def min(body: object, axis: "IterVar | Sequence[IterVar]") -> Reduce:  # noqa: A001
    return _reduce("min", body, axis)


def prod(body: object, axis: "IterVar | Sequence[IterVar]") -> Reduce:
    return _reduce("prod", body, axis)
