"""``topi.nn.softmax`` / ``log_softmax`` along an axis, in TVM's stages: the maximum, the
exponentials of the shifted input, their sum, the normalized output (so no exponential
overflows for large inputs)."""

from __future__ import annotations

from ...schedule import te
from ..utils import check_tensor, compute_nd, normalize_axis


def _stages(x: te.Tensor, axis: int, op: str):
    check_tensor(x, op, "x")
    axis = normalize_axis(axis, x.ndim, op)
    outer = [e for d, e in enumerate(x.shape) if d != axis]
    k1, k2 = te.reduce_axis(x.shape[axis], "k1"), te.reduce_axis(x.shape[axis], "k2")

    def at(indices, value):
        index = list(indices)
        index.insert(axis, value)
        return tuple(index)

    def drop(indices):
        return tuple(i for d, i in enumerate(indices) if d != axis)

    if not outer:  # a 1-D input: the reductions give shape (1,)
        outer = [1]

        def drop(indices):  # noqa: F811
            return (0,)

        def at(indices, value):  # noqa: F811
            return (value,)

    max_elem = compute_nd(outer, lambda i: te.max(x[at(i, k1)], axis=k1), f"T_{op}_maxelem")
    exp_sum = compute_nd(outer, lambda i: te.sum(te.exp(x[at(i, k2)] - max_elem[i]), axis=k2), f"T_{op}_expsum")
    return axis, max_elem, exp_sum, drop


def softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``."""
    axis, max_elem, exp_sum, drop = _stages(x, axis, "softmax")
    return compute_nd(x.shape, lambda i: te.exp(x[i] - max_elem[drop(i)]) / exp_sum[drop(i)], "T_softmax_norm")


def log_softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``."""
    axis, max_elem, exp_sum, drop = _stages(x, axis, "log_softmax")
    return compute_nd(x.shape, lambda i: x[i] - max_elem[drop(i)] - te.log(exp_sum[drop(i)]), "T_log_softmax")
