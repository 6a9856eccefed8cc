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

import builtins
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

    def __neg__(self) -> "IndexExpr":
        return IndexBinary("*", self, IndexConst(-1))

    # Comparisons make boolean expressions (TVM's ``i >= 2``), for if_then_else guards.
    def _compare(self, op: str, other: object) -> "IndexCompare":
        return IndexCompare(op, self, as_index(other), np.dtype(np.bool_))

    def __lt__(self, other): return self._compare("lt", other)
    def __le__(self, other): return self._compare("le", other)
    def __gt__(self, other): return self._compare("gt", other)
    def __ge__(self, other): return self._compare("ge", other)

    def __eq__(self, other):  # type: ignore[override]
        if isinstance(other, (IndexExpr, int, np.integer)) and not isinstance(other, bool):
            return self._compare("eq", other)
        return NotImplemented

    def __ne__(self, other):  # type: ignore[override]
        if isinstance(other, (IndexExpr, int, np.integer)) and not isinstance(other, bool):
            return self._compare("ne", other)
        return NotImplemented

    __hash__ = object.__hash__

    def astype(self, dtype: object) -> "Expr":
        """The index as a value of ``dtype`` (TVM's ``i.astype("float32")``)."""
        return Cast(IndexValue(self, np.dtype(np.int64)), as_dtype(dtype))

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

    __eq__ = IndexExpr.__eq__  # an expression; as a truth value, identity (see IndexCompare)
    __ne__ = IndexExpr.__ne__


def as_index(value: object) -> IndexExpr:
    if isinstance(value, IndexExpr):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return IndexConst(int(value))
    raise ScheduleError(
        f"tensor indices must be affine expressions of axes and integers, got {value!r} "
        f"({type(value).__name__})"
    )


def as_tensor_index(value: object) -> "IndexExpr | Expr":
    """A tensor subscript: an affine index, or an integer-valued expression (a *data-dependent*
    index such as ``A[idx[i]]``, TVM's gather; it is read with ``tensor.extract``)."""
    if isinstance(value, Expr):
        if value.dtype is None or value.dtype.kind not in "iu":
            raise ScheduleError(
                f"a tensor index computed from values must have an integer dtype, got {value!r} "
                f"of dtype {value.dtype}; convert it with .astype('int64')")
        return value
    return as_index(value)


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

    def __eq__(self, other):  # type: ignore[override]
        return self._compare("eq", other)

    def __ne__(self, other):  # type: ignore[override]
        return self._compare("ne", other)

    __hash__ = object.__hash__  # expressions are nodes: identity, whatever == builds

    def __and__(self, other): return logical_and(self, other)
    def __rand__(self, other): return logical_and(other, self)
    def __or__(self, other): return logical_or(self, other)
    def __ror__(self, other): return logical_or(other, self)
    def __invert__(self): return logical_not(self)

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
    """``tensor[indices]``. An affine, in-bounds load becomes an operand of the generic (an
    indexing map); a *gathered* load (a data-dependent index, or an index that can leave the
    tensor under an :func:`if_then_else` guard) is read with ``tensor.extract`` at a clamped
    index inside the body: the guard decides whether the value is used."""

    tensor: "object"  # compute.Tensor
    indices: "tuple[IndexExpr | Expr, ...]"
    dtype: np.dtype | None = None
    out_of_bounds: str = ""  # why an affine index may leave the tensor ("" when it cannot)

    @property
    def data_dependent(self) -> bool:
        return builtins.any(isinstance(i, Expr) for i in self.indices)

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
    op: str  # lt le gt ge eq ne
    lhs: Expr
    rhs: Expr
    dtype: np.dtype | None = None


@dataclass(eq=False)
class IndexCompare(Expr):
    """A comparison of index expressions (``i >= 2``, ``i % 2 == 0``): a padding guard."""

    op: str  # lt le gt ge eq ne
    lhs: IndexExpr
    rhs: IndexExpr
    dtype: np.dtype | None = None

    def __repr__(self) -> str:
        symbol = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}[self.op]
        return f"({self.lhs!r} {symbol} {self.rhs!r})"

    def __bool__(self) -> bool:
        """As TVM's ``EqualOp``: ``i == j`` tested by Python (``in``, ``list.index``) is
        identity, so axes stay usable as keys and list members."""
        if self.op in ("eq", "ne"):
            return (self.lhs is self.rhs) == (self.op == "eq")
        return Expr.__bool__(self)


@dataclass(eq=False)
class IndexValue(Expr):
    """An index expression used as a value (an ``int64``), e.g. ``i.astype("float32")``."""

    index: IndexExpr
    dtype: np.dtype | None = None


@dataclass(eq=False)
class ExtentValue(Expr):
    """A :func:`var` used as a value (an ``int64``): its size at call time, e.g. ``1 / n``."""

    var: Var
    dtype: np.dtype | None = None


@dataclass(eq=False)
class Logical(Expr):
    op: str  # and or not
    operands: tuple[Expr, ...]
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
class ReducerArgument(Expr):
    """The accumulator (``position`` 0) or the new value (1) inside a :func:`comm_reducer`'s
    combiner, as the generic's body sees them."""

    position: int
    dtype: np.dtype | None = None


@dataclass(eq=False)
class Reduce(Expr):
    """``combiner`` (sum, max, min, prod, or a :class:`CommReducer`'s name) of ``body`` over
    ``axes``; only at a compute's top."""

    combiner: str
    body: Expr
    axes: tuple[IterVar, ...]
    dtype: np.dtype | None = None
    reducer: "CommReducer | None" = None  # a user-defined reducer (comm_reducer)


def as_expr(value: object) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, IndexExpr):
        return IndexValue(value, np.dtype(np.int64))
    if isinstance(value, Var):
        return ExtentValue(value, np.dtype(np.int64))
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


def _boolean(value: object, what: str) -> Expr:
    value = as_expr(value)
    if value.dtype != np.dtype(np.bool_):
        raise ScheduleError(f"{what}: expected a boolean (a comparison), got {value!r} of dtype {value.dtype}")
    return value


def if_then_else(condition: Expr, true_value: object, false_value: object) -> Expr:
    """``condition ? true_value : false_value`` (TVM's ``te.if_then_else``). A load in a branch
    may index outside its tensor (padding): it is read at a clamped index, and the condition
    must make sure its value is not used there."""
    condition = _boolean(condition, "if_then_else: the condition")
    a, b = as_expr(true_value), as_expr(false_value)
    return Select(condition, a, b, unify_dtypes(a, b, "if_then_else"))


select = if_then_else  # TVM's tir.Select


def logical_and(*conditions: object) -> Expr:
    return Logical("and", tuple(_boolean(c, "logical_and") for c in conditions), np.dtype(np.bool_))


def logical_or(*conditions: object) -> Expr:
    return Logical("or", tuple(_boolean(c, "logical_or") for c in conditions), np.dtype(np.bool_))


def logical_not(condition: object) -> Expr:
    return Logical("not", (_boolean(condition, "logical_not"),), np.dtype(np.bool_))


def all(*conditions: object) -> Expr:  # noqa: A001
    """TVM's ``tir.all``: every condition holds."""
    if not conditions:
        raise ScheduleError("all: give at least one condition")
    return conditions[0] if len(conditions) == 1 and isinstance(conditions[0], Expr) else logical_and(*conditions)


def any(*conditions: object) -> Expr:  # noqa: A001
    """TVM's ``tir.any``: some condition holds."""
    if not conditions:
        raise ScheduleError("any: give at least one condition")
    return conditions[0] if len(conditions) == 1 and isinstance(conditions[0], Expr) else logical_or(*conditions)


def equal(a: object, b: object) -> Expr:
    """``a == b`` as an expression (the spelled-out form of ``==``, TVM's ``tir.EQ``)."""
    if isinstance(a, IndexExpr) and isinstance(b, (IndexExpr, int, np.integer)):
        return IndexExpr._compare(a, "eq", b)
    return as_expr(a)._compare("eq", b)


def not_equal(a: object, b: object) -> Expr:
    if isinstance(a, IndexExpr) and isinstance(b, (IndexExpr, int, np.integer)):
        return IndexExpr._compare(a, "ne", b)
    return as_expr(a)._compare("ne", b)


def const(value: "float | int | bool", dtype: object = None) -> Expr:
    """TVM's ``tir.const``: a constant of ``dtype`` (default: float32 for floats, int32 for ints)."""
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int32" if isinstance(value, (int, np.integer)) else "float32"
    dtype = as_dtype(dtype)
    if not isinstance(value, (bool, int, float, np.generic)):
        raise ScheduleError(f"const: expected a number, got {value!r}")
    value = value.item() if isinstance(value, np.generic) else value
    return Const(bool(value) if dtype == np.dtype(np.bool_) else int(value) if dtype.kind in "iu" else float(value), dtype)


def cast(value: object, dtype: object) -> Expr:
    """TVM's ``te.cast`` / ``x.astype(dtype)``."""
    return as_expr(value).astype(dtype)


def erf(x: object) -> Expr: return _unary("erf", x)
def floor(x: object) -> Expr: return _unary("floor", x)
def ceil(x: object) -> Expr: return _unary("ceil", x)


def _is_axes(axis: object) -> bool:
    return isinstance(axis, IterVar) or (
        isinstance(axis, (list, tuple)) and len(axis) > 0 and builtins.all(isinstance(a, IterVar) for a in axis))


def _reduce(combiner: str, body: object, axis: "IterVar | Sequence[IterVar]",
            where: object = None, reducer: "CommReducer | None" = None) -> Reduce:
    body = as_expr(body)
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    if not axes:
        raise ScheduleError(f"{combiner}: give at least one reduction axis")
    for a in axes:
        if not isinstance(a, IterVar) or a.kind != "reduce":
            raise ScheduleError(
                f"{combiner}: axis {a!r} is not a reduction axis; create it with reduce_axis(extent)"
            )
    if where is not None:  # TVM's where=: points failing it contribute the identity
        if body.dtype is None:
            raise ScheduleError(f"{combiner}: where= needs a typed body (a tensor load or const(...))")
        identity = reducer.identity(body.dtype) if reducer else Const(identity_value(combiner, body.dtype), body.dtype)
        body = if_then_else(where, body, identity)
    return Reduce(combiner, body, axes, body.dtype, reducer)


def identity_value(combiner: str, dtype: np.dtype) -> "float | int":
    """The identity of a built-in combiner: 0 for sum, 1 for prod, the lowest value for max..."""
    if combiner == "sum":
        return 0
    if combiner == "prod":
        return 1
    if dtype.kind == "f":
        return -float("inf") if combiner == "max" else float("inf")
    if dtype == np.dtype(np.bool_):
        return 0 if combiner == "max" else 1
    info = np.iinfo(dtype)
    return int(info.min) if combiner == "max" else int(info.max)


def sum(body: object, axis: "IterVar | Sequence[IterVar]", where: object = None) -> Reduce:  # noqa: A001
    """``te.sum``: the sum of ``body`` over reduction ``axis`` (one axis or several); ``where``
    keeps only the points where it holds."""
    return _reduce("sum", body, axis, where)


def max(body: object, axis: "object", where: object = None) -> Expr:  # noqa: A001
    """``te.max``: the maximum of ``body`` over reduction ``axis``; as in TVM, ``max(a, b)`` of
    two values (``axis`` not an axis) is their elementwise maximum."""
    if not _is_axes(axis):
        return maximum(body, axis)
    return _reduce("max", body, axis, where)


def min(body: object, axis: "object", where: object = None) -> Expr:  # noqa: A001
    """``te.min``: the minimum over ``axis``, or of two values (see :func:`max`)."""
    if not _is_axes(axis):
        return minimum(body, axis)
    return _reduce("min", body, axis, where)


def prod(body: object, axis: "IterVar | Sequence[IterVar]", where: object = None) -> Reduce:
    return _reduce("prod", body, axis, where)


class CommReducer:
    """A user-defined commutative reducer (TVM's ``te.comm_reducer``)::

        mysum = comm_reducer(lambda x, y: x + y, lambda t: const(0, dtype=t), name="mysum")
        B = compute((n,), lambda i: mysum(A[i, k], axis=k))

    ``fcombine(acc, value)`` builds the combining expression from two scalars; ``fidentity(dtype)``
    gives the identity element (a :func:`const` or a number). Called with two values instead of
    an axis, it combines them (as TVM's reducers do)."""

    def __init__(self, fcombine, fidentity, name: str = "reduce") -> None:
        if not callable(fcombine) or not callable(fidentity):
            raise ScheduleError("comm_reducer(fcombine, fidentity): both must be callables")
        if not isinstance(name, str) or not name.isidentifier():
            raise ScheduleError(f"comm_reducer: the name must be an identifier, got {name!r}")
        self.fcombine = fcombine
        self.fidentity = fidentity
        self.name = name

    def identity(self, dtype: np.dtype) -> Const:
        value = self.fidentity(str(dtype))
        if isinstance(value, Const):
            return Const(value.value, dtype)
        if isinstance(value, (bool, int, float, np.generic)):
            return Const(value.item() if isinstance(value, np.generic) else value, dtype)
        raise ScheduleError(f"comm_reducer {self.name!r}: fidentity must return a constant, got {value!r}")

    def combine(self, dtype: np.dtype) -> Expr:
        """The combiner applied to the accumulator and the new value, as one expression."""
        result = as_expr(self.fcombine(ReducerArgument(0, dtype), ReducerArgument(1, dtype)))
        for node in _walk_scalar(result):
            if isinstance(node, (Load, Reduce)):
                raise ScheduleError(f"comm_reducer {self.name!r}: the combiner may only use its two "
                                    "arguments and constants")
        if result.dtype not in (None, dtype):
            raise ScheduleError(f"comm_reducer {self.name!r}: the combiner gives {result.dtype}, "
                                f"the reduced values are {dtype}")
        return result

    def __call__(self, body: object, axis: object, where: object = None) -> Expr:
        if not _is_axes(axis):
            return as_expr(self.fcombine(as_expr(body), as_expr(axis)))
        reduction = _reduce(self.name, body, axis, where, self)
        if reduction.dtype is None:
            raise ScheduleError(f"{self.name}: the reduced expression needs a dtype (a tensor load)")
        self.combine(reduction.dtype)  # check it now, where the user wrote it
        return reduction

    def __repr__(self) -> str:
        return f"comm_reducer({self.name})"


def comm_reducer(fcombine, fidentity, name: str = "reduce") -> CommReducer:
    """TVM's ``te.comm_reducer``: a reducer from a combining function and an identity."""
    return CommReducer(fcombine, fidentity, name)


def _walk_scalar(expr: Expr):
    yield expr
    for child in expr_children(expr):
        yield from _walk_scalar(child)


def expr_children(expr: Expr) -> list[Expr]:
    """The sub-expressions of ``expr`` (a load's data-dependent indices included)."""
    if isinstance(expr, (Binary, Compare)):
        return [expr.lhs, expr.rhs]
    if isinstance(expr, (Unary, Cast)):
        return [expr.operand]
    if isinstance(expr, Select):
        return [expr.condition, expr.true_value, expr.false_value]
    if isinstance(expr, Logical):
        return list(expr.operands)
    if isinstance(expr, Reduce):
        return [expr.body]
    if isinstance(expr, Load):
        return [i for i in expr.indices if isinstance(i, Expr)]
    return []
