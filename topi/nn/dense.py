"""``topi.nn.dense`` (``x @ w.T`` + bias) and ``topi.nn.batch_matmul``."""

from __future__ import annotations

from ...schedule import te
from ...schedule.te import ScheduleError
from ...schedule.te.symbolic import Var
from ..utils import check_tensor


def _same(x, y) -> bool:
    return x is y or (not isinstance(x, Var) and not isinstance(y, Var) and x == y)


def _product(a, b, out_dtype):
    if out_dtype is None or str(out_dtype) == str(a.dtype):
        return a * b
    return a.astype(out_dtype) * b.astype(out_dtype)


def dense(data: te.Tensor, weight: te.Tensor, bias: "te.Tensor | None" = None, out_dtype=None) -> te.Tensor:
    """``data (batch, in) x weight (out, in)^T`` (+ ``bias (out,)``), TVM's layout for dense."""
    check_tensor(data, "dense", "data")
    check_tensor(weight, "dense", "weight")
    if data.ndim != 2 or weight.ndim != 2 or not _same(data.shape[1], weight.shape[1]):
        raise ScheduleError(f"dense: data {data.shape} and weight {weight.shape} must be (batch, in) and (out, in)")
    batch, in_dim = data.shape
    out_dim = weight.shape[0]
    k = te.reduce_axis(in_dim, "k")
    matmul = te.compute((batch, out_dim), lambda i, j: te.sum(_product(data[i, k], weight[j, k], out_dtype), axis=k),
                        name="T_dense")
    if bias is None:
        return matmul
    check_tensor(bias, "dense", "bias")
    if bias.ndim != 1 or not _same(bias.shape[0], out_dim):
        raise ScheduleError(f"dense: bias {bias.shape} must be ({out_dim},)")
    return te.compute((batch, out_dim), lambda i, j: matmul[i, j] + bias[j].astype(matmul.dtype), name="T_add")


def batch_matmul(tensor_a: te.Tensor, tensor_b: te.Tensor, oshape=None, out_dtype=None,
                 transpose_a: bool = False, transpose_b: bool = True) -> te.Tensor:
    """TVM's ``topi.nn.batch_matmul``: ``a (b, m, k) x b (b, n, k)^T`` by default
    (``transpose_b=True``); a batch of 1 on either side broadcasts."""
    check_tensor(tensor_a, "batch_matmul", "tensor_a")
    check_tensor(tensor_b, "batch_matmul", "tensor_b")
    if tensor_a.ndim != 3 or tensor_b.ndim != 3:
        raise ScheduleError(f"batch_matmul: operands must be 3-D, got {tensor_a.shape} and {tensor_b.shape}")
    if oshape is not None:
        raise ScheduleError("batch_matmul: oshape is not supported; the output shape follows from the operands")
    ba, m, ka = (tensor_a.shape[0], tensor_a.shape[2], tensor_a.shape[1]) if transpose_a else tensor_a.shape
    bb, kb, n = (tensor_b.shape[0], tensor_b.shape[2], tensor_b.shape[1]) if transpose_b else tensor_b.shape
    if not _same(ka, kb):
        raise ScheduleError(f"batch_matmul: reduction extents differ ({ka} and {kb})")
    if not (_same(ba, bb) or ba == 1 or bb == 1):
        raise ScheduleError(f"batch_matmul: batches {ba} and {bb} do not broadcast")
    batch = bb if ba == 1 else ba
    k = te.reduce_axis(ka, "k")

    def body(b, i, j):
        pa = 0 if ba == 1 and not _same(batch, 1) else b
        pb = 0 if bb == 1 and not _same(batch, 1) else b
        a = tensor_a[pa, k, i] if transpose_a else tensor_a[pa, i, k]
        other = tensor_b[pb, j, k] if transpose_b else tensor_b[pb, k, j]
        return te.sum(_product(a, other, out_dtype), axis=k)

    return te.compute((batch, m, n), body, name="T_batch_matmul")
