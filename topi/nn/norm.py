"""``topi.nn.layer_norm`` and ``topi.nn.batch_norm`` (inference).

layer_norm computes the mean, then the variance from it (two passes, as numerically
stable as PyTorch's), then the normalized output; the counts may be symbolic."""

from __future__ import annotations

from typing import Sequence

from ...schedule import te
from ...schedule.te import ScheduleError
from ...schedule.te.symbolic import Var
from ..utils import check_tensor, compute_nd, normalize_axes, normalize_axis


def _same(x, y) -> bool:
    return x is y or (not isinstance(x, Var) and not isinstance(y, Var) and x == y)


def layer_norm(data: te.Tensor, gamma: te.Tensor, beta: te.Tensor, axis: Sequence[int],
               epsilon: float = 1e-5) -> te.Tensor:
    """Normalize ``data`` over ``axis`` (a list of axes, as TVM's), then ``* gamma + beta``;
    ``gamma`` and ``beta`` have the shape of ``data`` on ``axis``."""
    op = "layer_norm"
    check_tensor(data, op)
    axes = normalize_axes(axis, data.ndim, op)
    reduced_shape = [data.shape[d] for d in axes]
    for name, t in (("gamma", gamma), ("beta", beta)):
        check_tensor(t, op, name)
        if t.ndim != len(axes) or not all(_same(x, y) for x, y in zip(t.shape, reduced_shape)):
            raise ScheduleError(f"{op}: {name} has shape {t.shape}, expected {tuple(reduced_shape)}")
    kept = [d for d in range(data.ndim) if d not in axes]
    outer = [data.shape[d] for d in kept] or [1]
    count = te.const(1, "int64")
    for d in axes:
        count = count * data.shape[d]
    n = te.cast(count, data.dtype)

    def full(outer_index, reduce_index):
        index, o, r = [], iter(outer_index), iter(reduce_index)
        for d in range(data.ndim):
            index.append(next(r) if d in axes else next(o))
        return tuple(index)

    def outer_of(indices):
        return tuple(indices[d] for d in kept) if kept else (0,)

    k1 = [te.reduce_axis(data.shape[d], f"k{d}") for d in axes]
    mean = compute_nd(outer, lambda i: te.sum(data[full(i, k1)], axis=k1), "T_layer_norm_sum")
    k2 = [te.reduce_axis(data.shape[d], f"v{d}") for d in axes]

    def square_deviation(i):
        deviation = data[full(i, k2)] - mean[i] / n
        return te.sum(deviation * deviation, axis=k2)

    variance = compute_nd(outer, square_deviation, "T_layer_norm_var")

    def body(indices):
        o = outer_of(indices)
        r = tuple(indices[d] for d in axes)
        normalized = (data[indices] - mean[o] / n) / te.sqrt(variance[o] / n + te.const(epsilon, data.dtype))
        return normalized * gamma[r] + beta[r]

    return compute_nd(data.shape, body, "T_layer_norm")


def batch_norm(data: te.Tensor, gamma: te.Tensor, beta: te.Tensor, moving_mean: te.Tensor,
               moving_var: te.Tensor, axis: "int | None" = None, epsilon: float = 1e-5,
               center: bool = True, scale: bool = True, training: bool = False,
               momentum: float = 0.1) -> "list[te.Tensor]":
    """TVM's ``topi.nn.batch_norm`` for inference: ``[out, moving_mean, moving_var]`` where
    ``out = (data - moving_mean) / sqrt(moving_var + epsilon) * gamma + beta`` along ``axis``
    (default 1); the statistics are returned unchanged, as TVM does outside training."""
    op = "batch_norm"
    check_tensor(data, op)
    if training:
        raise ScheduleError(f"{op}: training=True (batch statistics) is not supported; compute the "
                            "statistics with topi.mean over the batch axes, or use training=False")
    axis = normalize_axis(1 if axis is None else axis, data.ndim, op)
    for name, t in (("gamma", gamma), ("beta", beta), ("moving_mean", moving_mean), ("moving_var", moving_var)):
        check_tensor(t, op, name)
        if t.ndim != 1 or not _same(t.shape[0], data.shape[axis]):
            raise ScheduleError(f"{op}: {name} has shape {t.shape}, expected ({data.shape[axis]},)")

    def body(indices):
        c = indices[axis]
        out = (data[indices] - moving_mean[c]) / te.sqrt(moving_var[c] + te.const(epsilon, data.dtype))
        if scale:
            out = out * gamma[c]
        if center:
            out = out + beta[c]
        return out

    return [compute_nd(data.shape, body, "T_batch_norm"), moving_mean, moving_var]
