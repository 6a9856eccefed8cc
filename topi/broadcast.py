"""Elementwise operators with numpy broadcasting (TVM's ``topi.add``, ``topi.where``...) and
elementwise math (``topi.exp``...).

The arithmetic itself lives in :func:`tilecraft.schedule.te.broadcast_binary`, which also
serves ``A + B`` on tensors: one broadcasting rule for both spellings.
"""

from __future__ import annotations

from ..schedule import te
from ..schedule.te.compute import broadcast_load, broadcast_shape
from .utils import check_tensor, compute_nd


def add(lhs, rhs) -> te.Tensor:
    """``lhs + rhs`` with broadcasting; either may be a number."""
    return te.broadcast_binary("add", lhs, rhs)


def subtract(lhs, rhs) -> te.Tensor:
    return te.broadcast_binary("sub", lhs, rhs)


def multiply(lhs, rhs) -> te.Tensor:
    return te.broadcast_binary("mul", lhs, rhs)


def divide(lhs, rhs) -> te.Tensor:
    return te.broadcast_binary("div", lhs, rhs)


def maximum(lhs, rhs) -> te.Tensor:
    return te.broadcast_binary("max", lhs, rhs)


def minimum(lhs, rhs) -> te.Tensor:
    return te.broadcast_binary("min", lhs, rhs)


def where(condition: te.Tensor, x, y) -> te.Tensor:
    """``x`` where ``condition`` is non-zero, else ``y`` (all three broadcast; ``x``/``y`` may
    be numbers)."""
    check_tensor(condition, "where", "condition")
    shapes = [t.shape for t in (condition, x, y) if isinstance(t, te.Tensor)]
    shape = ()
    for s in shapes:
        shape = broadcast_shape(shape, s, "where")

    def body(indices):
        c = broadcast_load(condition, indices)
        if str(c.dtype) != "bool":
            c = c != 0
        a = broadcast_load(x, indices) if isinstance(x, te.Tensor) else x
        b = broadcast_load(y, indices) if isinstance(y, te.Tensor) else y
        return te.if_then_else(c, a, b)

    return compute_nd(shape, body, "T_where")


def _elementwise(fn, name: str):
    def op(x: te.Tensor) -> te.Tensor:
        check_tensor(x, name, "x")
        return compute_nd(x.shape, lambda i: fn(x[i]), f"T_{name}")

    op.__name__ = name
    op.__doc__ = f"Elementwise {name} (TVM's ``topi.{name}``)."
    return op


exp = _elementwise(te.exp, "exp")
log = _elementwise(te.log, "log")
sqrt = _elementwise(te.sqrt, "sqrt")
tanh = _elementwise(te.tanh, "tanh")
sigmoid = _elementwise(te.sigmoid, "sigmoid")
erf = _elementwise(te.erf, "erf")
abs = _elementwise(te.abs, "abs")  # noqa: A001


def negative(x: te.Tensor) -> te.Tensor:
    check_tensor(x, "negative", "x")
    return compute_nd(x.shape, lambda i: -x[i], "T_negative")


def cast(x: te.Tensor, dtype: object) -> te.Tensor:
    """``x`` converted elementwise to ``dtype``."""
    check_tensor(x, "cast", "x")
    return compute_nd(x.shape, lambda i: x[i].astype(dtype), "T_cast")
