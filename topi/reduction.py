"""Reductions over chosen axes (TVM's ``topi.sum(data, axis=None, keepdims=False)``, ``max``,
``min``, ``mean``, ``prod``): one compute whose reduction axes are the reduced dims."""

from __future__ import annotations

from typing import Sequence

from ..schedule import te
from .utils import check_tensor, compute_nd, normalize_axes


def _reduce(combiner: str, data: te.Tensor, axis: "int | Sequence[int] | None", keepdims: bool,
            name: str) -> te.Tensor:
    check_tensor(data, name)
    reduced = normalize_axes(axis, data.ndim, name)
    raxes = {d: te.reduce_axis(data.shape[d], f"k{d}") for d in reduced}
    kept = [d for d in range(data.ndim) if d not in raxes]
    shape = [1 if d in raxes else data.shape[d] for d in range(data.ndim)] if keepdims else \
        [data.shape[d] for d in kept]
    reducer = {"sum": te.sum, "max": te.max, "min": te.min, "prod": te.prod}[combiner]

    def body(indices):
        kept_index = {d: indices[d] for d in kept} if keepdims else dict(zip(kept, indices))
        index = tuple(raxes[d] if d in raxes else kept_index[d] for d in range(data.ndim))
        return reducer(data[index], axis=list(raxes.values()))

    if not shape:  # a full reduction without keepdims: TVM gives a rank-0 tensor; here shape (1,)
        shape = [1]
    return compute_nd(shape, body, f"T_{name}")


def sum(data: te.Tensor, axis: "int | Sequence[int] | None" = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    """The sum over ``axis`` (all axes when None; a full reduction gives shape ``(1,)``)."""
    return _reduce("sum", data, axis, keepdims, "sum")


def max(data: te.Tensor, axis: "int | Sequence[int] | None" = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    return _reduce("max", data, axis, keepdims, "max")


def min(data: te.Tensor, axis: "int | Sequence[int] | None" = None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    return _reduce("min", data, axis, keepdims, "min")


def prod(data: te.Tensor, axis: "int | Sequence[int] | None" = None, keepdims: bool = False) -> te.Tensor:
    return _reduce("prod", data, axis, keepdims, "prod")


def mean(data: te.Tensor, axis: "int | Sequence[int] | None" = None, keepdims: bool = False) -> te.Tensor:
    """The mean over ``axis``: the sum, then one division by the count (which may be symbolic)."""
    total = _reduce("sum", data, axis, keepdims, "sum")
    count = te.const(1, "int64")
    for d in normalize_axes(axis, data.ndim, "mean"):
        count = count * data.shape[d]  # a var's size is read at call time
    return compute_nd(total.shape, lambda i: total[i] / te.cast(count, data.dtype), "T_mean")
