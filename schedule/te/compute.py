"""Operator definition: TVM's ``te.placeholder`` / ``te.compute`` emitting ``linalg.generic``.

    A = placeholder((M, K), name="A")
    B = placeholder((K, N), name="B")
    k = reduce_axis(K, name="k")
    C = compute((M, N), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
    module = create_func([A, B, C])          # func.func @main(%A, %B) -> C

Each compute becomes one ``linalg.generic``: its spatial axes are ``parallel`` iterators,
its reduction axes ``reduction`` iterators (after the spatial ones, as in
``linalg.matmul``); every distinct ``T[index...]`` is one input whose ``indexing_map`` is
the affine index. A reduction's output starts from a ``linalg.fill`` with the combiner's
identity (the *init* block, named ``C.init``). Ops carry ``tilecraft.block = "C"`` so
:class:`~tilecraft.schedule.te.Schedule` finds them by name.

Extents may be :func:`~tilecraft.schedule.te.var` s: their dims are ``?`` in the function's
types, each var's value is read with ``tensor.dim`` from the first argument it sizes, and the
arguments carry ``tilecraft.symbols`` (the var per dim) so that every call checks that the
dims sharing a var agree (pipelines/dim_relations.py). Indexing is then checked symbolically:
an index must stay in bounds for every value of the vars.
"""

from __future__ import annotations

import inspect
import itertools
import math as _math
import re
from fractions import Fraction
from typing import Callable, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, func, linalg, math, tensor

from ...ir import core
from ...ir import elementwise as scalar_math
from ...runtime.signature import SYMBOLS_ATTRIBUTE
from .errors import ScheduleError
from .expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    ExtentValue,
    IndexBinary,
    IndexCompare,
    IndexConst,
    IndexExpr,
    IndexValue,
    IterVar,
    Load,
    Logical,
    Reduce,
    ReducerArgument,
    Select,
    Unary,
    as_dtype,
    as_expr,
    as_tensor_index,
    expr_children,
    identity_value,
    sum,
)
from .symbolic import Var

BLOCK_ATTR = "tilecraft.block"
DIMS_ATTR = "tilecraft.dims"
NAME_ATTR = "tilecraft.name"  # argument names, as runtime/signature.py reads them

_tensor_ids = itertools.count()


def _valid_extent(extent: object) -> bool:
    return isinstance(extent, Var) or (
        isinstance(extent, (int, np.integer)) and not isinstance(extent, bool) and extent >= 1)


def _as_extent(extent: "int | Var") -> "int | Var":
    return extent if isinstance(extent, Var) else int(extent)


class Tensor:
    """A placeholder (function argument) or the result of :func:`compute`."""

    def __init__(self, shape: "Sequence[int | Var]", dtype: np.dtype, name: str,
                 op: "ComputeOp | None") -> None:
        self.shape = tuple(_as_extent(s) for s in shape)
        self.dtype = dtype
        self.name = name
        self.op = op
        self.uid = next(_tensor_ids)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_placeholder(self) -> bool:
        return self.op is None

    def __getitem__(self, indices: object) -> Load:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise ScheduleError(
                f"{self.name} has rank {self.ndim}, indexed with {len(indices)} indices"
            )
        index_exprs = tuple(as_tensor_index(i) for i in indices)
        for index in index_exprs:
            if isinstance(index, IndexExpr):
                _check_affine(index)
        load = Load(self, index_exprs, self.dtype)
        if not load.data_dependent and not _is_symbolic(load):
            # symbolic bounds are proved by compute(), knowing its axes; an index that may leave
            # the tensor is legal only under an if_then_else guard, which compute() checks
            for position, (index, extent) in enumerate(zip(index_exprs, self.shape)):
                low, high = _index_range(index)
                if low < 0 or high >= extent:
                    load.out_of_bounds = (
                        f"{load!r}: index {position} ranges over [{low}, {high}] but dimension "
                        f"{position} of {self.name} has extent {extent}")
                    break
        return load

    # Arithmetic on whole tensors broadcasts as numpy does (TVM's topi.add ... through + - * /).
    def __add__(self, other): return broadcast_binary("add", self, other)
    def __radd__(self, other): return broadcast_binary("add", other, self)
    def __sub__(self, other): return broadcast_binary("sub", self, other)
    def __rsub__(self, other): return broadcast_binary("sub", other, self)
    def __mul__(self, other): return broadcast_binary("mul", self, other)
    def __rmul__(self, other): return broadcast_binary("mul", other, self)
    def __truediv__(self, other): return broadcast_binary("div", self, other)
    def __rtruediv__(self, other): return broadcast_binary("div", other, self)

    def __neg__(self) -> "Tensor":
        return compute(self.shape, lambda *i: -self[i], name=f"{self.name}_neg")

    def astype(self, dtype: object) -> "Tensor":
        """The tensor converted elementwise to ``dtype`` (``topi.cast``)."""
        return compute(self.shape, lambda *i: self[i].astype(dtype), name=f"{self.name}_cast")

    @property
    def flops(self) -> "int | None":
        """Arithmetic operations of computing this tensor and the computes it reads (2 per
        multiply-add, as the tuner counts); None where an extent is symbolic."""
        return graph_flops([self])

    def __repr__(self) -> str:
        kind = "placeholder" if self.is_placeholder else "compute"
        return f"Tensor({self.name!r}, {kind}, shape={self.shape}, dtype={self.dtype})"


class ComputeOp:
    """What :func:`compute` recorded: its axes and the body expression."""

    def __init__(self, axes: list[IterVar], body: Expr) -> None:
        self.axes = axes
        self.body = body
        self.reduce_axes: list[IterVar] = list(body.axes) if isinstance(body, Reduce) else []

    def inputs(self) -> list[Tensor]:
        found: dict[int, Tensor] = {}
        for load in _loads(self.body):
            found.setdefault(load.tensor.uid, load.tensor)
        return list(found.values())


def placeholder(shape: "Sequence[int | Var]", dtype: object = "float32",
                name: str = "placeholder") -> Tensor:
    """An input tensor (a function argument), as ``te.placeholder``; a :func:`var` in ``shape``
    makes that dimension dynamic (``?``)."""
    shape = tuple(shape)
    if not all(_valid_extent(s) for s in shape):
        raise ScheduleError(f"placeholder {name!r}: shape must be positive integers or vars, got {shape}")
    return Tensor(shape, as_dtype(dtype), name, None)


def _axis_names(fcompute: Callable, rank: int) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if len(params) == rank and all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        return [p.name for p in params]
    return [f"i{d}" for d in range(rank)]


def compute(shape: "Sequence[int | Var]", fcompute: Callable[..., object], name: str = "compute",
            dtype: object = None) -> Tensor:
    """``te.compute``: a tensor of ``shape`` whose element at ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    The body may be a :func:`sum` / :func:`max` / :func:`min` / :func:`prod` reduction at its top
    (as in TVM). ``dtype`` defaults to the body's.
    """
    shape = tuple(shape)
    if not shape or not all(_valid_extent(s) for s in shape):
        raise ScheduleError(f"compute {name!r}: shape must be positive integers or vars, got {shape}")
    axes = [IterVar(extent, axis_name, "spatial") for extent, axis_name in zip(shape, _axis_names(fcompute, len(shape)))]
    body = as_expr(fcompute(*axes))
    _check_body(body, axes, name)
    out_dtype = as_dtype(dtype) if dtype is not None else (body.dtype or np.dtype(np.float32))
    if body.dtype is not None and body.dtype != out_dtype:
        raise ScheduleError(
            f"compute {name!r}: the body has dtype {body.dtype} but dtype={out_dtype} was asked; "
            "convert the body with .astype(...)"
        )
    return Tensor(shape, out_dtype, name, ComputeOp(axes, body))


def _check_body(body: Expr, axes: list[IterVar], name: str) -> None:
    reduce_axes = list(body.axes) if isinstance(body, Reduce) else []
    if len(set(reduce_axes)) != len(reduce_axes):
        raise ScheduleError(f"compute {name!r}: a reduction axis is listed twice")
    for node in _walk(body.body if isinstance(body, Reduce) else body):
        if isinstance(node, Reduce):
            raise ScheduleError(
                f"compute {name!r}: a reduction (sum/max/...) may only be the whole body of a "
                "compute; compute the inner reduction as its own tensor"
            )
    known = set(axes) | set(reduce_axes)
    used = _index_variables(body)
    for var in used:
        if var not in known:
            where = next((repr(load) for load in _loads(body) if any(
                isinstance(i, IndexExpr) and var in i.variables() for i in load.indices)), "the body")
            hint = " (pass it as axis= of the reduction)" if var.kind == "reduce" else ""
            raise ScheduleError(
                f"compute {name!r}: {where} uses axis {var.name!r}, which is not an axis "
                f"of this compute{hint}"
            )
    for var in reduce_axes:
        if var not in used:
            raise ScheduleError(f"compute {name!r}: reduction axis {var.name!r} indexes no tensor")
    # An access happens only when every axis is non-empty: the vars sizing them are >= 1.
    nonempty = {axis.extent for axis in known if isinstance(axis.extent, Var)}
    for load, guarded in _guarded_loads(body):
        if not load.data_dependent and _is_symbolic(load):
            load.out_of_bounds = _symbolic_bounds_problem(load, nonempty)
        if load.out_of_bounds and not guarded:
            raise ScheduleError(
                f"compute {name!r}: {load.out_of_bounds}; an index that may leave the tensor (padding) "
                "must be guarded: "
                "if_then_else(<index in range>, load, <pad value>)")


def _walk(expr: Expr):
    yield expr
    for child in _children(expr):
        yield from _walk(child)


def _children(expr: Expr) -> list[Expr]:
    return expr_children(expr)


def _guarded_loads(expr: Expr, guarded: bool = False):
    """``(load, guarded)`` for every load: guarded when it lies in a branch of a select."""
    if isinstance(expr, Load):
        yield expr, guarded
    if isinstance(expr, Select):
        yield from _guarded_loads(expr.condition, guarded)
        yield from _guarded_loads(expr.true_value, True)
        yield from _guarded_loads(expr.false_value, True)
        return
    for child in expr_children(expr):
        yield from _guarded_loads(child, guarded)


def _index_variables(expr: Expr) -> set[IterVar]:
    """Axes ``expr`` mentions anywhere: in tensor indices, guards, or as values."""
    found: set[IterVar] = set()
    for node in _walk(expr):
        if isinstance(node, Load):
            for index in node.indices:
                if isinstance(index, IndexExpr):
                    found.update(index.variables())
        elif isinstance(node, IndexCompare):
            found.update(node.lhs.variables() + node.rhs.variables())
        elif isinstance(node, IndexValue):
            found.update(node.index.variables())
    return found


def is_gathered(load: Load) -> bool:
    """A load read with ``tensor.extract`` in the body rather than as an operand (see Load).

    Also a load that indexes a dimension by a bare axis of a smaller extent (``A[i, j]`` with
    ``j`` over 1 of A's 6 columns): linalg requires an operand dim indexed by a bare loop dim
    to have exactly that loop's extent."""
    return load.data_dependent or bool(load.out_of_bounds)


def _partial_dims(load: Load, results: "list[ir.AffineExpr]", axes: list[IterVar]) -> bool:
    """Whether an affine result is a bare loop dim whose extent differs from the tensor's
    (``A[i, j + 0]`` simplifies to ``d1``): linalg requires such a dim to match exactly."""
    for result, extent in zip(results, load.tensor.shape):
        if isinstance(result, ir.AffineDimExpr):
            axis_extent = axes[result.position].extent
            if not (axis_extent is extent or (not isinstance(extent, Var) and axis_extent == extent)):
                return True
    return False


def _loads(expr: Expr) -> list[Load]:
    return [node for node in _walk(expr) if isinstance(node, Load)]


def _check_affine(index: IndexExpr) -> None:
    if isinstance(index, IndexBinary):
        _check_affine(index.lhs)
        _check_affine(index.rhs)
        if index.op == "*" and index.lhs.variables() and index.rhs.variables():
            raise ScheduleError(f"index {index!r} is not affine: one side of * must be a constant")
        if index.op in ("floordiv", "mod") and index.rhs.variables():
            raise ScheduleError(f"index {index!r} is not affine: // and % need a constant divisor")


def _is_symbolic(load: Load) -> bool:
    return any(isinstance(e, Var) for e in load.tensor.shape) or any(
        isinstance(v.extent, Var) for index in load.indices for v in index.variables())


# A linear form over vars: {Var: coefficient, None: constant}.
_Linear = dict


def _linear_add(a: _Linear, b: _Linear) -> _Linear:
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}


def _linear_scale(a: _Linear, c: Fraction) -> _Linear:
    return {k: v * c for k, v in a.items()}


def _constant_of(a: _Linear) -> Fraction | None:
    return a.get(None, Fraction(0)) if all(v == 0 for k, v in a.items() if k is not None) else None


def _linear_range(index: IndexExpr) -> tuple[_Linear, _Linear] | None:
    """Bounds ``(low, high)`` of ``index`` as linear forms of the vars (axes range over
    ``[0, extent)``), or None where tilecraft has no linear bound."""
    if isinstance(index, IterVar):
        e = index.extent
        return {}, ({e: Fraction(1), None: Fraction(-1)} if isinstance(e, Var) else {None: Fraction(e - 1)})
    if isinstance(index, IndexConst):
        return {None: Fraction(index.value)}, {None: Fraction(index.value)}
    assert isinstance(index, IndexBinary)
    lhs, rhs = _linear_range(index.lhs), _linear_range(index.rhs)
    if lhs is None or rhs is None:
        return None
    if index.op == "+":
        return _linear_add(lhs[0], rhs[0]), _linear_add(lhs[1], rhs[1])
    if index.op == "*":
        for (lo, hi), other in ((rhs, lhs), (lhs, rhs)):
            c = _constant_of(lo)
            if c is not None and c == _constant_of(hi):
                a, b = _linear_scale(other[0], c), _linear_scale(other[1], c)
                return (a, b) if c >= 0 else (b, a)
        return None
    d = _constant_of(rhs[0])
    if d is None or d <= 0 or d != _constant_of(rhs[1]) or d.denominator != 1:
        return None
    if index.op == "floordiv":  # floor(x / d) lies in [(x - d + 1) / d, x / d]; exact for constants
        low, high = _constant_of(lhs[0]), _constant_of(lhs[1])
        return ({None: Fraction(_math.floor(low / d))} if low is not None
                else _linear_scale(_linear_add(lhs[0], {None: 1 - d}), 1 / d),
                {None: Fraction(_math.floor(high / d))} if high is not None else _linear_scale(lhs[1], 1 / d))
    return {None: Fraction(0)}, {None: d - 1}


def _proved_nonnegative(form: _Linear, nonempty: set[Var]) -> bool:
    """``form >= 0`` for all vars >= 0 (>= 1 for those in ``nonempty``)."""
    if any(v < 0 for k, v in form.items() if k is not None):
        return False
    lowest = form.get(None, 0)
    for k, v in form.items():
        if k is not None and k in nonempty:
            lowest += v
    return lowest >= 0


def _linear_text(form: _Linear) -> str:
    terms = [f"{'' if v == 1 else f'{v}*'}{k.name}" for k, v in form.items() if k is not None and v]
    constant = form.get(None, 0)
    if constant or not terms:
        terms.append(str(constant))
    return " + ".join(terms).replace("+ -", "- ")


def _symbolic_bounds_problem(load: Load, nonempty: set[Var]) -> str:
    """Why a symbolic load may leave its tensor ("" when its bounds are proved)."""
    tensor_ = load.tensor
    for position, (index, extent) in enumerate(zip(load.indices, tensor_.shape)):
        bounds = _linear_range(index)
        upper = ({extent: Fraction(1), None: Fraction(-1)} if isinstance(extent, Var)
                 else {None: Fraction(extent - 1)})
        if bounds is None or not _proved_nonnegative(bounds[0], nonempty) or not _proved_nonnegative(
                _linear_add(upper, _linear_scale(bounds[1], Fraction(-1))), nonempty):
            span = (f"[{_linear_text(bounds[0])}, {_linear_text(bounds[1])}]" if bounds is not None
                    else "a range tilecraft cannot bound")
            return (f"{load!r}: index {position} ranges over {span}, which cannot be "
                    f"proved inside dimension {position} of {tensor_.name} (extent {extent}) for every "
                    "value of the vars")
    return ""


def _index_range(index: IndexExpr) -> tuple[int, int]:
    """Interval of values ``index`` takes (axes range over ``[0, extent)``)."""
    if isinstance(index, IterVar):
        return 0, index.extent - 1
    if isinstance(index, IndexConst):
        return index.value, index.value
    assert isinstance(index, IndexBinary)
    a_lo, a_hi = _index_range(index.lhs)
    b_lo, b_hi = _index_range(index.rhs)
    if index.op == "+":
        return a_lo + b_lo, a_hi + b_hi
    if index.op == "*":
        products = [a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi]
        return min(products), max(products)
    if not isinstance(index.rhs, IndexConst) or index.rhs.value <= 0:
        raise ScheduleError(f"{index!r}: // and % need a positive integer constant divisor")
    d = index.rhs.value
    if index.op == "floordiv":
        return a_lo // d, a_hi // d
    return (0, d - 1) if a_hi - a_lo + 1 >= d or a_lo // d != a_hi // d else (a_lo % d, a_hi % d)


_LETTERS = re.compile(r"^[a-zA-Z]*$")


def einsum(spec: str, *tensors: Tensor, name: str = "einsum") -> Tensor:
    """``numpy.einsum``-style spec: ``einsum("ik,kj->ij", A, B)`` is ``A @ B`` as one compute.

    Letters on the right are the spatial axes (in that order); the others are summed.
    """
    if "->" not in spec:
        raise ScheduleError(f"einsum {spec!r}: write the output explicitly, e.g. 'ik,kj->ij'")
    lhs, out = (s.strip() for s in spec.split("->"))
    subscripts = [s.strip() for s in lhs.split(",")]
    if len(subscripts) != len(tensors):
        raise ScheduleError(f"einsum {spec!r}: {len(subscripts)} operands in the spec, {len(tensors)} given")
    extents: dict[str, int] = {}
    for letters, t in zip(subscripts, tensors):
        if not _LETTERS.match(letters) or len(letters) != t.ndim:
            raise ScheduleError(f"einsum {spec!r}: {letters!r} does not match {t.name} of rank {t.ndim}")
        for letter, extent in zip(letters, t.shape):
            if extents.setdefault(letter, extent) != extent:
                raise ScheduleError(
                    f"einsum {spec!r}: {letter!r} has extent {extents[letter]} and {extent}"
                )
    if not _LETTERS.match(out) or len(set(out)) != len(out) or not out:
        raise ScheduleError(f"einsum {spec!r}: bad output subscripts {out!r}")
    missing = [letter for letter in out if letter not in extents]
    if missing:
        raise ScheduleError(f"einsum {spec!r}: output letters {missing} index no operand")
    reduced = [letter for letter in dict.fromkeys("".join(subscripts)) if letter not in out]
    raxes = {letter: IterVar(extents[letter], letter, "reduce") for letter in reduced}

    def body(*axes: IterVar) -> Expr:
        env = dict(zip(out, axes)) | raxes
        product = None
        for letters, t in zip(subscripts, tensors):
            load = t[tuple(env[letter] for letter in letters)]
            product = load if product is None else product * load
        return sum(product, axis=list(raxes.values())) if raxes else product

    body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(letter, inspect.Parameter.POSITIONAL_ONLY) for letter in out]
    )
    return compute(tuple(extents[letter] for letter in out), body, name=name)


def broadcast_shape(a: "Sequence[int | Var]", b: "Sequence[int | Var]", what: str) -> "tuple[int | Var, ...]":
    """numpy's broadcast of two shapes (aligned at the right; a 1 stretches), with vars: a var
    broadcasts with itself or with 1 only."""
    rank = len(a) if len(a) > len(b) else len(b)
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    shape = []
    for axis, (x, y) in enumerate(zip(a, b)):
        if x is y or (not isinstance(x, Var) and not isinstance(y, Var) and x == y) or y == 1:
            shape.append(x)
        elif x == 1:
            shape.append(y)
        else:
            raise ScheduleError(f"{what}: shapes {tuple(a)} and {tuple(b)} do not broadcast "
                                f"(axis {axis}: {x} and {y})")
    return tuple(shape)


def broadcast_load(t: Tensor, axes: "Sequence[IterVar]") -> Load:
    """``t`` read at the output position ``axes`` of a broadcast (size-1 dims read at 0)."""
    offset = len(axes) - t.ndim
    return t[tuple(0 if not isinstance(e, Var) and e == 1 else axes[offset + d] for d, e in enumerate(t.shape))]


_BROADCAST_NAMES = {"add": "T_add", "sub": "T_subtract", "mul": "T_multiply", "div": "T_divide",
                    "max": "T_maximum", "min": "T_minimum"}


def broadcast_binary(op: str, a: object, b: object, name: str | None = None) -> Tensor:
    """``a <op> b`` elementwise with numpy broadcasting; either side may be a Python number
    (TVM's ``topi.add`` and the tensors' ``+ - * /``)."""
    name = name or _BROADCAST_NAMES[op]
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise ScheduleError(f"{name}: at least one operand must be a Tensor")
    for operand in (a, b):
        if not isinstance(operand, (Tensor, bool, int, float, np.integer, np.floating, Expr)):
            raise ScheduleError(f"{name}: cannot combine a tensor with {operand!r} ({type(operand).__name__})")
    shape = broadcast_shape(a.shape if isinstance(a, Tensor) else (),
                            b.shape if isinstance(b, Tensor) else (), name)

    def side(operand: object, axes: tuple) -> Expr:
        return broadcast_load(operand, axes) if isinstance(operand, Tensor) else as_expr(operand)

    def body(*axes: IterVar) -> Expr:
        return side(a, axes)._binary(op, side(b, axes))

    body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(f"ax{d}", inspect.Parameter.POSITIONAL_ONLY) for d in range(len(shape))])
    return compute(shape, body, name=name)


def _arithmetic_ops(expr: Expr) -> int:
    return len([node for node in _walk(expr)
                if isinstance(node, (Binary, Unary, Select, Compare, Logical)) or (
                    isinstance(node, Cast) and node.operand.dtype != node.dtype)])


def graph_flops(outputs: "Sequence[Tensor]") -> "int | None":
    """Arithmetic operations of computing ``outputs`` and every compute they read: per compute,
    its iteration points (spatial x reduction) times the operations of its body, plus one
    per point for a reduction's combine (so a multiply-add counts 2, as the tuner counts).
    None where an extent is symbolic (the count depends on the call)."""
    total = 0
    for t in _topological(list(outputs)):
        points = 1
        for axis in t.op.axes + t.op.reduce_axes:
            if isinstance(axis.extent, Var):
                return None
            points *= axis.extent
        body = t.op.body
        ops = _arithmetic_ops(body.body) + 1 if isinstance(body, Reduce) else _arithmetic_ops(body)
        total += points * ops
    return total


# --- emission -----------------------------------------------------------------------------

# The DSL's arithmetic is signed (arith.divsi, cmpi slt...), so unsigned dtypes stay out.
_SUPPORTED_DTYPES = frozenset(
    np.dtype(t) for t in (np.float16, np.float32, np.float64, np.bool_, np.int8, np.int16, np.int32, np.int64)
)


def element_type(dtype: np.dtype) -> ir.Type:
    if dtype not in _SUPPORTED_DTYPES:
        raise ScheduleError(f"dtype {dtype} is not supported (float16/32/64, int8/16/32/64, bool)")
    return core.element_type(dtype)


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f"


def _constant(value: float | int | bool, dtype: np.dtype) -> ir.Value:
    t = element_type(dtype)
    if _is_float(dtype):
        return arith.constant(t, float(value))
    return arith.constant(t, int(value))


def _identity(combiner: str, dtype: np.dtype) -> float | int:
    return identity_value(combiner, dtype)


def _affine(index: IndexExpr, positions: dict[IterVar, int]) -> ir.AffineExpr:
    if isinstance(index, IterVar):
        return ir.AffineDimExpr.get(positions[index])
    if isinstance(index, IndexConst):
        return ir.AffineConstantExpr.get(index.value)
    lhs, rhs = _affine(index.lhs, positions), _affine(index.rhs, positions)
    if index.op == "+":
        return lhs + rhs
    if index.op == "*":
        if not isinstance(index.lhs, IndexConst) and not isinstance(index.rhs, IndexConst):
            raise ScheduleError(f"{index!r} is not affine: one side of * must be a constant")
        return lhs * rhs
    if index.op == "floordiv":
        return ir.AffineFloorDivExpr.get(lhs, rhs)
    return ir.AffineModExpr.get(lhs, rhs)


class _BodyEmitter:
    """Emits a scalar expression inside a ``linalg.generic`` body.

    Operand loads are block arguments; gathered loads (see :class:`~.expr.Load`) are
    ``tensor.extract`` s of the tensor captured from the function at a clamped index, so a
    guarded out-of-range index reads a valid element whose value the guard discards."""

    def __init__(self, operand_values: dict[int, ir.Value], positions: "dict[IterVar, int]",
                 tensors: "dict[int, ir.Value]", var_sizes: "dict[Var, ir.Value]",
                 reducer_arguments: "tuple[ir.Value, ...]" = ()) -> None:
        self.operand_values = operand_values  # id(Load) -> block argument
        self.positions = positions
        self.tensors = tensors  # Tensor uid -> the function-level value
        self.var_sizes = var_sizes
        self.reducer_arguments = reducer_arguments
        self._indices: dict[int, ir.Value] = {}

    def index(self, expr: IndexExpr) -> ir.Value:
        """An index expression as an ``index`` value (``linalg.index`` of its loop dims)."""
        if isinstance(expr, IterVar):
            d = self.positions[expr]
            if d not in self._indices:
                self._indices[d] = linalg.IndexOp(d).result
            return self._indices[d]
        if isinstance(expr, IndexConst):
            return arith.constant(ir.IndexType.get(), expr.value)
        lhs, rhs = self.index(expr.lhs), self.index(expr.rhs)
        if expr.op == "+":
            return arith.addi(lhs, rhs)
        if expr.op == "*":
            return arith.muli(lhs, rhs)
        if expr.op == "floordiv":
            return arith.floordivsi(lhs, rhs)
        remainder = arith.remsi(lhs, rhs)  # affine mod is never negative
        negative = arith.cmpi(arith.CmpIPredicate.slt, remainder, arith.constant(ir.IndexType.get(), 0))
        return arith.select(negative, arith.addi(remainder, rhs), remainder)

    def gather(self, load: Load) -> ir.Value:
        source = self.tensors[load.tensor.uid]
        index_type = ir.IndexType.get()
        zero = arith.constant(index_type, 0)
        one = arith.constant(index_type, 1)
        indices = []
        for axis, (index, extent) in enumerate(zip(load.indices, load.tensor.shape)):
            if isinstance(index, IndexExpr):
                value = self.index(index)
            else:
                value = arith.index_cast(index_type, self.emit(index, index.dtype))
            last = (arith.subi(tensor.dim(source, arith.constant(index_type, axis)), one)
                    if isinstance(extent, Var) else arith.constant(index_type, extent - 1))
            indices.append(arith.maxsi(zero, arith.minsi(value, last)))
        return tensor.extract(source, indices)

    def emit(self, expr: Expr, dtype: np.dtype) -> ir.Value:
        if isinstance(expr, Const):
            return _constant(expr.value, expr.dtype or dtype)
        if isinstance(expr, Load):
            if id(expr) in self.operand_values:
                return self.operand_values[id(expr)]
            return self.gather(expr)
        if isinstance(expr, ReducerArgument):
            return self.reducer_arguments[expr.position]
        if isinstance(expr, IndexValue):
            return arith.index_cast(element_type(expr.dtype), self.index(expr.index))
        if isinstance(expr, ExtentValue):
            return arith.index_cast(element_type(expr.dtype), self.var_sizes[expr.var])
        if isinstance(expr, IndexCompare):
            return _compare(expr.op, self.index(expr.lhs), self.index(expr.rhs), np.dtype(np.int64))
        if isinstance(expr, Logical):
            values = [self.emit(o, np.dtype(np.bool_)) for o in expr.operands]
            if expr.op == "not":
                return arith.xori(values[0], arith.constant(ir.IntegerType.get_signless(1), 1))
            combine = arith.andi if expr.op == "and" else arith.ori
            result = values[0]
            for value in values[1:]:
                result = combine(result, value)
            return result
        if isinstance(expr, Cast):
            source = expr.operand.dtype or expr.dtype
            return _convert(self.emit(expr.operand, source), source, expr.dtype)
        if isinstance(expr, Binary):
            t = expr.dtype or dtype
            return _binary(expr.op, self.emit(expr.lhs, t), self.emit(expr.rhs, t), t)
        if isinstance(expr, Compare):
            t = expr.lhs.dtype or expr.rhs.dtype or np.dtype(np.float32)
            return _compare(expr.op, self.emit(expr.lhs, t), self.emit(expr.rhs, t), t)
        if isinstance(expr, Unary):
            t = expr.dtype or dtype
            return _unary_op(expr.op, self.emit(expr.operand, t), t)
        if isinstance(expr, Select):
            t = expr.dtype or dtype
            return arith.select(
                self.emit(expr.condition, np.dtype(np.bool_)),
                self.emit(expr.true_value, t),
                self.emit(expr.false_value, t),
            )
        raise ScheduleError(f"cannot emit {expr!r}")


def _binary(op: str, a: ir.Value, b: ir.Value, dtype: np.dtype) -> ir.Value:
    if _is_float(dtype):
        fn = {"add": arith.addf, "sub": arith.subf, "mul": arith.mulf, "div": arith.divf,
              "max": arith.maximumf, "min": arith.minimumf}[op]
    else:
        fn = {"add": arith.addi, "sub": arith.subi, "mul": arith.muli, "div": arith.divsi,
              "max": arith.maxsi, "min": arith.minsi}[op]
    return fn(a, b)


def _compare(op: str, a: ir.Value, b: ir.Value, dtype: np.dtype) -> ir.Value:
    if _is_float(dtype):
        predicate = {"lt": arith.CmpFPredicate.OLT, "le": arith.CmpFPredicate.OLE,
                     "gt": arith.CmpFPredicate.OGT, "ge": arith.CmpFPredicate.OGE,
                     "eq": arith.CmpFPredicate.OEQ, "ne": arith.CmpFPredicate.UNE}[op]
        return arith.cmpf(predicate, a, b)
    predicate = {"lt": arith.CmpIPredicate.slt, "le": arith.CmpIPredicate.sle,
                 "gt": arith.CmpIPredicate.sgt, "ge": arith.CmpIPredicate.sge,
                 "eq": arith.CmpIPredicate.eq, "ne": arith.CmpIPredicate.ne}[op]
    return arith.cmpi(predicate, a, b)


def _unary_op(op: str, x: ir.Value, dtype: np.dtype) -> ir.Value:
    if op == "neg":
        return arith.negf(x) if _is_float(dtype) else arith.subi(_constant(0, dtype), x)
    if op == "abs":
        return math.absf(x) if _is_float(dtype) else math.absi(x)
    if op == "sigmoid":
        one = _constant(1.0, dtype)
        return arith.divf(one, arith.addf(one, math.exp(arith.negf(x))))
    # erf: the frontends' polynomial (math.erf has no lowering to LLVM)
    return {"exp": math.exp, "log": math.log, "sqrt": math.sqrt, "tanh": math.tanh, "erf": scalar_math.erf,
            "floor": math.floor, "ceil": math.ceil}[op](x)


def _convert(x: ir.Value, source: np.dtype, target: np.dtype) -> ir.Value:
    if source == target:
        return x
    t = element_type(target)
    if _is_float(source) and _is_float(target):
        return arith.extf(t, x) if target.itemsize > source.itemsize else arith.truncf(t, x)
    if _is_float(target):
        return arith.uitofp(t, x) if source == np.dtype(np.bool_) else arith.sitofp(t, x)
    if target == np.dtype(np.bool_):
        zero = _constant(0, source)
        if _is_float(source):
            return arith.cmpf(arith.CmpFPredicate.UNE, x, zero)
        return arith.cmpi(arith.CmpIPredicate.ne, x, zero)
    if _is_float(source):
        return arith.fptosi(t, x)
    if source == np.dtype(np.bool_):
        return arith.extui(t, x)
    return arith.extsi(t, x) if target.itemsize > source.itemsize else arith.trunci(t, x)


def _emit_compute(tensor_: Tensor, values: dict[int, ir.Value], block_name: str,
                  var_sizes: "dict[Var, ir.Value]") -> ir.Value:
    op = tensor_.op
    assert op is not None
    axes = op.axes + op.reduce_axes
    positions = {axis: d for d, axis in enumerate(axes)}
    n_dims = len(axes)
    body = op.body.body if isinstance(op.body, Reduce) else op.body

    def extent_value(e: "int | Var") -> "int | ir.Value":
        return var_sizes[e] if isinstance(e, Var) else e

    operands: list[ir.Value] = []
    maps: list[ir.AffineMap] = []
    arg_of_load: dict[int, int] = {}
    seen: dict[tuple[int, str], int] = {}
    direct: set[IterVar] = set()
    for load in _loads(body):
        if is_gathered(load):
            continue
        affine_map = ir.AffineMap.get(n_dims, 0, [_affine(i, positions) for i in load.indices])
        results = list(affine_map.results)
        if _partial_dims(load, results, axes):
            continue  # read with tensor.extract by the body emitter
        direct.update(axes[r.position] for r in results if isinstance(r, ir.AffineDimExpr))
        key = (load.tensor.uid, str(affine_map))
        if key not in seen:
            seen[key] = len(operands)
            operands.append(values[load.tensor.uid])
            maps.append(affine_map)
        arg_of_load[id(load)] = seen[key]
    out_type = element_type(tensor_.dtype)
    # linalg infers each loop's range from an operand that an axis indexes directly; reduction
    # axes only inside compound indices (a pooling window) or guards range over a window
    # operand, as linalg's pooling ops do: an empty tensor of the window's shape, never read.
    window = [a for a in op.reduce_axes if a not in direct]
    if window:
        operands.append(tensor.empty([extent_value(a.extent) for a in window], out_type))
        maps.append(ir.AffineMap.get(n_dims, 0, [ir.AffineDimExpr.get(positions[a]) for a in window]))
    maps.append(ir.AffineMap.get(n_dims, 0, [ir.AffineDimExpr.get(d) for d in range(len(op.axes))]))

    init = tensor.empty([extent_value(e) for e in tensor_.shape], out_type)
    if isinstance(op.body, Reduce):
        identity = (op.body.reducer.identity(tensor_.dtype).value if op.body.reducer
                    else _identity(op.body.combiner, tensor_.dtype))
        fill = linalg.fill(_constant(identity, tensor_.dtype), outs=[init])
        fill.owner.attributes[BLOCK_ATTR] = ir.StringAttr.get(f"{block_name}.init")
        init = fill
    iterators = ["parallel"] * len(op.axes) + ["reduction"] * len(op.reduce_axes)
    generic = linalg.GenericOp(
        [init.type], operands, [init],
        ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
        ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>") for it in iterators]),
    )
    generic.attributes[BLOCK_ATTR] = ir.StringAttr.get(block_name)
    generic.attributes[DIMS_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(a.name) for a in axes])
    block = generic.regions[0].blocks.append(
        *[ir.RankedTensorType(v.type).element_type for v in operands], out_type
    )
    with ir.InsertionPoint(block):
        emitter = _BodyEmitter({load_id: block.arguments[i] for load_id, i in arg_of_load.items()},
                               positions, values, var_sizes)
        value = emitter.emit(body, tensor_.dtype)
        if isinstance(op.body, Reduce):
            acc = block.arguments[len(operands)]
            if op.body.reducer is not None:
                combiner = _BodyEmitter({}, positions, values, var_sizes, (acc, value))
                value = combiner.emit(op.body.reducer.combine(tensor_.dtype), tensor_.dtype)
            else:
                combine = {"sum": "add", "prod": "mul", "max": "max", "min": "min"}[op.body.combiner]
                value = _binary(combine, acc, value, tensor_.dtype)
        linalg.YieldOp([value])
    return generic.result


def _topological(outputs: list[Tensor]) -> list[Tensor]:
    order: list[Tensor] = []
    state: dict[int, str] = {}

    def visit(t: Tensor) -> None:
        if state.get(t.uid) == "done" or t.is_placeholder:
            return
        if state.get(t.uid) == "active":
            raise ScheduleError(f"compute {t.name!r} depends on itself")
        state[t.uid] = "active"
        for dep in t.op.inputs():
            visit(dep)
        state[t.uid] = "done"
        order.append(t)

    for t in outputs:
        visit(t)
    return order


def _unique_names(tensors: list[Tensor]) -> dict[int, str]:
    names: dict[int, str] = {}
    used: set[str] = set()
    for t in tensors:
        name, suffix = t.name, 1
        while name in used:
            name, suffix = f"{t.name}_{suffix}", suffix + 1
        used.add(name)
        names[t.uid] = name
    return names


def _tensor_type(t: Tensor) -> ir.RankedTensorType:
    dynamic = ir.ShapedType.get_dynamic_size()
    return ir.RankedTensorType.get([dynamic if isinstance(e, Var) else e for e in t.shape],
                                   element_type(t.dtype))


def _arg_attributes(t: Tensor) -> dict[str, ir.Attribute]:
    """``tilecraft.name``, and ``tilecraft.symbols`` (the var per dim, "" for a static one)."""
    attributes = {NAME_ATTR: ir.StringAttr.get(t.name)}
    if any(isinstance(e, Var) for e in t.shape):
        attributes[SYMBOLS_ATTRIBUTE] = ir.ArrayAttr.get(
            [ir.StringAttr.get(e.name if isinstance(e, Var) else "") for e in t.shape])
    return attributes


def _var_sources(args: list[Tensor], computes: list[Tensor]) -> "dict[Var, tuple[int, int]]":
    """Per var, the (argument, axis) its value is read from: the first argument it sizes.

    A var that sizes no argument has no value at run time; two vars of one name would make
    ``tilecraft.symbols`` ambiguous."""
    sources: dict[Var, tuple[int, int]] = {}
    by_name: dict[str, Var] = {}
    used: list[Var] = []
    for t in computes:
        used += [e for e in t.shape if isinstance(e, Var)]
        used += [a.extent for a in t.op.axes + t.op.reduce_axes if isinstance(a.extent, Var)]
        used += [node.var for node in _walk(t.op.body) if isinstance(node, ExtentValue)]
    for a, t in enumerate(args):
        for axis, e in enumerate(t.shape):
            if isinstance(e, Var):
                sources.setdefault(e, (a, axis))
                used.append(e)
    for v in used:
        if by_name.setdefault(v.name, v) is not v:
            raise ScheduleError(f"create_func: two different vars are named {v.name!r}; give each "
                                "var its own name (the name is how the function's arguments refer to it)")
    missing = sorted({v.name for v in used if v not in sources})
    if missing:
        raise ScheduleError(
            f"create_func: var(s) {missing} size no placeholder; a var must be a dimension of at "
            "least one input (placeholder), where the function reads its value at call time")
    return sources


def create_func(tensors: "Tensor | Sequence[Tensor]", name: str = "main",
                context: ir.Context | None = None) -> ir.Module:
    """A module with ``func.func @name``: TVM's ``te.create_prim_func([A, B, C])``.

    Placeholders in ``tensors`` are the arguments (in that order) and computes are the
    results. Given only computes, the placeholders they read become the arguments in
    creation order.
    """
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise ScheduleError("create_func takes Tensors (placeholders and computes)")
    outputs = [t for t in tensors if not t.is_placeholder]
    if not outputs:
        raise ScheduleError("create_func: give at least one compute to return")
    ordered = _topological(outputs)
    needed = {d.uid: d for t in ordered for d in t.op.inputs() if d.is_placeholder}
    args = [t for t in tensors if t.is_placeholder]
    if not args:
        args = sorted(needed.values(), key=lambda t: t.uid)
    missing = [t.name for uid, t in needed.items() if uid not in {a.uid for a in args}]
    if missing:
        raise ScheduleError(f"create_func: placeholders {missing} are read but not listed")
    names = _unique_names(ordered)
    var_source = _var_sources(args, ordered)
    context = context or ir.Context()
    with context, ir.Location.unknown():
        module = ir.Module.create()
        arg_types = [_tensor_type(t) for t in args]
        result_types = [_tensor_type(t) for t in outputs]
        with ir.InsertionPoint(module.body):
            function = func.FuncOp(name, ir.FunctionType.get(arg_types, result_types))
            function.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get(_arg_attributes(t)) for t in args])
            entry = function.add_entry_block()
            values = {t.uid: entry.arguments[i] for i, t in enumerate(args)}
            with ir.InsertionPoint(entry):
                var_sizes = {v: tensor.dim(entry.arguments[a], arith.constant(ir.IndexType.get(), axis))
                             for v, (a, axis) in var_source.items()}
                for t in ordered:
                    values[t.uid] = _emit_compute(t, values, names[t.uid], var_sizes)
                func.ReturnOp([values[t.uid] for t in outputs])
        module.operation.verify()
    return module
