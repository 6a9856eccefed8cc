"""``_upsample_bilinear2d_aa`` (``interpolate(mode="bilinear", antialias=True)``): separable,
so the output is ``A @ x @ B^T`` per image, ``A [H_out, H_in]`` and ``B [W_out, W_in]`` the
interpolation weights along each dim. They depend only on the sizes, scales and
``align_corners``: PyTorch computes them at import time (its own kernel applied, in float64,
to an identity: one axis at a time, the other 2 -> 2 with weight exactly 1), so the
compiled code is two contractions with constant matrices and matches eager's antialias
filter by construction."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from mlir import ir

from ....errors import OperandError
from ....ir import contraction, core
from ..importer import OpContext
from . import table


def _weights(size_in: int, size_out: int, align_corners: bool, scale: float | None, along_height: bool) -> np.ndarray:
    """``[size_out, size_in]``: eager's antialiased bilinear weights along one dim."""
    basis = torch.eye(size_in, dtype=torch.float64)
    # channel c holds the unit impulse at row (column) c, repeated over 2 columns (rows) that
    # map 2 -> 2 with weight 1 on themselves. Not 1 -> 1: eager's kernel with an extent of 1
    # in the other dim mixes the impulses (every output of a 10 -> 3 pass gets 0.0508).
    if along_height:
        image = basis.reshape(1, size_in, size_in, 1).expand(1, size_in, size_in, 2).contiguous()
        out = torch.ops.aten._upsample_bilinear2d_aa.default(image, [size_out, 2], align_corners, scale, None)
        return out[0, :, :, 0].T.contiguous().numpy()
    image = basis.reshape(1, size_in, 1, size_in).expand(1, size_in, 2, size_in).contiguous()
    out = torch.ops.aten._upsample_bilinear2d_aa.default(image, [2, size_out], align_corners, None, scale)
    return out[0, :, 0, :].T.contiguous().numpy()


@table.aten("_upsample_bilinear2d_aa.default")
def upsample_bilinear2d_aa(ctx: OpContext, x: Any, output_size: Sequence[int], align_corners: bool,
                           scales_h: float | None = None, scales_w: float | None = None) -> ir.Value:
    dtype = ctx.result_dtype()
    if dtype.kind != "f":
        raise OperandError(f"antialiased bilinear interpolation of a {dtype} tensor (floating point only)")
    x = ctx.tensor(x, dtype)
    shape = core.static_shape(x)
    if len(shape) != 4 or None in shape[2:]:
        raise OperandError("antialiased bilinear interpolation needs an NCHW tensor with static H and W")
    if not all(isinstance(s, int) and s > 0 for s in output_size):
        raise OperandError(f"antialiased bilinear interpolation to {list(output_size)!r}: static positive sizes")
    rows = _weights(shape[2], output_size[0], align_corners, scales_h, along_height=True).astype(dtype)
    columns = _weights(shape[3], output_size[1], align_corners, scales_w, along_height=False).astype(dtype)
    return contraction.einsum("nchw,jw,ih->ncij", [x, ctx.tensor(columns), ctx.tensor(rows)])
