"""Exact numpy references for quantized ONNX ops: integer accumulation, float64 rescaling,
round half to even and saturation, as the ONNX and com.microsoft definitions state.

Why not onnxruntime alone: its u8 x s8 kernels on x86 hosts without VNNI saturate their
16-bit pair sums (documented), so on such hosts it is no reference for int8 results;
these are, on every host."""

from __future__ import annotations

import numpy as np


def requantize(accumulator: np.ndarray, multiplier: np.ndarray, zero: np.ndarray,
               dtype: np.dtype) -> np.ndarray:
    """round(accumulator * multiplier) + zero, saturated to ``dtype`` (QuantizeLinear's rule)."""
    info = np.iinfo(dtype)
    scaled = np.rint(accumulator.astype(np.float64) * np.asarray(multiplier, np.float64))
    return np.clip(scaled + np.asarray(zero, np.int64), info.min, info.max).astype(dtype)


def qlinear_conv(x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias=None, pads=(0, 0, 0, 0)):
    """QLinearConv (NCHW, stride 1, no groups): the int32 sum of (x - xz)(w - wz) + bias,
    rescaled per output channel by xs * ws / ys."""
    xq = np.pad(x.astype(np.int64) - int(x_zero), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    wz = np.asarray(w_zero, np.int64).reshape(-1, 1, 1, 1) if np.ndim(w_zero) else int(w_zero)
    wq = w.astype(np.int64) - wz
    n, _, h, width = xq.shape
    cout, _, kh, kw = wq.shape
    out = np.zeros((n, cout, h - kh + 1, width - kw + 1), np.int64)
    for i in range(kh):
        for j in range(kw):
            window = xq[:, :, i:i + out.shape[2], j:j + out.shape[3]]
            out += np.einsum("nchw,oc->nohw", window, wq[:, :, i, j])
    if bias is not None:
        out += bias.astype(np.int64).reshape(1, -1, 1, 1)
    multiplier = (np.float64(x_scale) * np.asarray(w_scale, np.float64) / np.float64(y_scale))
    return requantize(out, np.reshape(multiplier, (1, -1, 1, 1)) if np.ndim(multiplier) else multiplier,
                      y_zero, np.asarray(y_zero).dtype)


def qgemm(a, a_scale, a_zero, b, b_scale, b_zero, c=None, y_scale=None, y_zero=None,
          trans_b: bool = False, alpha: float = 1.0):
    """com.microsoft QGemm: alpha * A' @ B' + C', with A' = (A - az) * as, B' = (B - bz) * bs and
    the int32 bias C at scale alpha * as * bs (its definition), so the result is
    alpha * as * bs * ((A - az) @ (B - bz) + C); quantized with y_scale/y_zero when given,
    else float32."""
    bq = (b.T if trans_b else b).astype(np.int64) - np.asarray(b_zero, np.int64)
    accumulator = (a.astype(np.int64) - int(a_zero)) @ bq
    if c is not None:
        accumulator = accumulator + c.astype(np.int64)
    scale = np.float64(alpha) * np.float64(a_scale) * np.asarray(b_scale, np.float64)
    if y_scale is None:
        return (accumulator * scale).astype(np.float32)
    return requantize(accumulator, scale / np.float64(y_scale), y_zero, np.asarray(y_zero).dtype)


def steps_apart(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Quantization steps between two integer arrays of one shape and dtype."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    return np.abs(got.astype(np.int64) - want.astype(np.int64))
