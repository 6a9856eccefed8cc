"""DFT as one matrix product along the signal axis.

Every DFT variant ONNX defines (forward or inverse, full or one-sided, any ``dft_length``,
real or complex input) is linear over the reals in the input's real representation along
the axis: ``N x C_in`` numbers in, ``K x C_out`` out. So the transform is a constant
``[N * C_in, K * C_out]`` matrix, built at import time by applying ONNX's reference
transform to each basis vector (bit-compatible definitions, no separate case analysis), and
the op is transpose -> reshape -> MatMul -> reshape -> transpose: a contraction the default
schedule tiles and vectorizes. An axis given at run time (opset 20) chooses among the
transforms of every valid axis.
"""

from __future__ import annotations

import numpy as np
from mlir.dialects import arith, tensor
from onnx.reference.ops import op_dft

from ....ir import contraction, core, extent_math, reshapes
from ..node import HandlerError, NodeContext, Output
from ..registry import onnx_op
from .sequence import _choose


def _matrix(n: int, c_in: int, length: int, inverse: bool, onesided: bool, dtype: np.dtype) -> np.ndarray:
    rows = []
    for j in range(n * c_in):
        basis = np.zeros(n * c_in)
        basis[j] = 1.0
        x = basis.reshape(n, c_in)
        if inverse:
            y = op_dft._cifft(x, length, axis=0, onesided=onesided)
        else:
            y = op_dft._cfft(x, length, axis=0, onesided=onesided, normalize=False)
        rows.append(np.asarray(y, dtype=np.float64).reshape(-1))
    return np.stack(rows).astype(dtype)


def _along(x: ir.Value, axis: int, length: int | None, inverse: bool, onesided: bool, dtype: np.dtype) -> ir.Value:
    shape = core.static_shape(x)
    rank = len(shape)
    n, c_in = shape[axis], shape[-1]
    if n is None or c_in is None:
        raise HandlerError("DFT needs static extents along the signal axis and the last axis")
    if length is None:
        length = 2 * (n - 1) if inverse and onesided else n
    matrix = _matrix(n, c_in, length, inverse, onesided, dtype)
    c_out = 1 if inverse and onesided else 2
    k = matrix.shape[1] // c_out
    perm = [d for d in range(rank - 1) if d != axis] + [axis, rank - 1]
    moved = core.transpose(x, perm)
    rest = core.sizes(moved)[:-2]
    flat = reshapes.reshape(moved, [*rest, n * c_in])
    product = contraction.matmul(flat, core.constant(matrix, name="dft_matrix"))
    y = reshapes.reshape(product, [*rest, k, c_out])
    return core.transpose(y, list(np.argsort(perm)))


@onnx_op("DFT", since=17)
def dft(ctx: NodeContext) -> list[Output]:
    x = ctx.value(0)
    dtype = np.dtype(ctx.dtype(0))
    if dtype.kind != "f":
        raise HandlerError(f"DFT on {dtype} is not supported (float types only)")
    rank = core.tensor_type(x).rank
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    length = None
    if ctx.has_input(1):
        known = ctx.require_const(1, "dft_length")
        length = int(known.reshape(-1)[0])
    if ctx.opset < 20:
        axis = int(ctx.attr("axis", 1))
        return [_along(x, axis % rank, length, inverse, onesided, dtype)]
    if not ctx.has_input(2):
        return [_along(x, rank - 2, length, inverse, onesided, dtype)]
    known = ctx.const(2)
    if known is not None:
        return [_along(x, int(known.reshape(-1)[0]) % rank, length, inverse, onesided, dtype)]
    # A runtime axis: every signal axis (0 .. rank-2) is a candidate.
    candidates = []
    for a in range(rank - 1):
        if core.static_shape(x)[a] == 1 and inverse and onesided and length is None:
            continue  # no inverse one-sided transform of length 2 * (1 - 1) = 0: not a valid axis
        candidates.append((a, _along(x, a, length, inverse, onesided, dtype)))
    value = ctx.value(2)
    scalar = extent_math.scalar_to_index(tensor.extract(value, [core.index(0)] * core.tensor_type(value).rank))
    negative = arith.cmpi(arith.CmpIPredicate.slt, scalar, core.index(0))
    position = arith.select(negative, arith.addi(scalar, core.index(rank)), scalar)
    *others, (_, last) = candidates
    return [_choose(position, others, last)]
