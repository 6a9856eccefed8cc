"""Discrete Fourier transforms as dense contractions with a constant twiddle matrix.

Why a contraction and not an FFT: for the sizes models transform at inference (STFT frames
of a few hundred samples, OpInfo's small samples) an ``O(n^2)`` product with a constant is
exact enough, needs no new kernel and runs on the matmul kernels (each transformed dim is
one 2-d matmul, see ``_contract``). The price is the constant (``4 n^2`` floats for a complex
transform), so one transformed dim is limited to :data:`MAX_DFT_SIZE` points (a typed
error above). An n-d transform is successive 1-d ones, one contraction per dim.

Complex values are pairs (``complex_pairs.py``): a trailing dim of 2. The twiddle factors
are computed in float64 with the angle reduced exactly (``k * n mod N``), then rounded to
the transform's element type. The three kinds follow ATen's ``_fft_r2c``, ``_fft_c2c`` and
``_fft_c2r`` (and ONNX's DFT): real to complex (one-sided: ``n // 2 + 1`` bins), complex to
complex, and Hermitian complex to real (bins ``1 .. n/2`` counted twice, the imaginary
parts of bin 0 and bin ``n/2`` ignored, as pocketfft does).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from mlir import ir

from ..errors import OperandError, OperandTypeError
from . import contraction, core
from .extent_math import product
from .movement import slice_axis
from .reshapes import reshape

# Points per transformed dim: the complex twiddle constant is 4 * n^2 elements (64 MiB of
# float32 at 2048).
MAX_DFT_SIZE = 2048

# ATen's normalization codes (fft_norm_mode): none, 1/sqrt(n), 1/n.
NORM_NONE, NORM_BY_ROOT_N, NORM_BY_N = 0, 1, 2


def scale(normalization: int, size: int) -> float:
    """The factor ATen's ``normalization`` code applies for a transform of ``size`` points."""
    if normalization == NORM_NONE:
        return 1.0
    if normalization == NORM_BY_ROOT_N:
        return 1.0 / math.sqrt(size)
    if normalization == NORM_BY_N:
        return 1.0 / size
    raise OperandError(f"unknown FFT normalization code {normalization} (0: none, 1: 1/sqrt(n), 2: 1/n)")


def _angles(rows: int, columns: int, period: int) -> np.ndarray:
    """``2 pi (r * c mod period) / period`` for every row r and column c, in float64."""
    products = np.outer(np.arange(rows, dtype=np.int64), np.arange(columns, dtype=np.int64)) % period
    return 2.0 * np.pi * products / period


def _check_size(size: int | None, what: str) -> int:
    if size is None:
        raise OperandError(f"{what} must have a static size (the twiddle matrix is a constant)")
    if size < 1:
        raise OperandError(f"{what} has {size} points; a transform needs at least 1")
    if size > MAX_DFT_SIZE:
        raise OperandError(f"{what} has {size} points; the DFT is a dense O(n^2) contraction, "
                         f"limited to {MAX_DFT_SIZE} points per dim")
    return size


def _contract(x: ir.Value, axis: int, matrix: np.ndarray, complex_in: bool, complex_out: bool) -> ir.Value:
    """``out[..., k, (c)] = sum_{n, (c')} x[..., n, (c')] * matrix[n, (c'), k, (c)]`` along
    logical dim ``axis`` (pair dims in parentheses, present for complex operands).

    Emitted as one 2-d matmul, ``[rows, n (x 2)] @ [n (x 2), k (x 2)]``, after moving ``axis``
    next to the pair dim: the pairs are row-major, so the pair dims merge into the
    contracted and the result dims with reshapes alone, and the matmul gets the register-tile
    kernels every matmul gets. (A ``linalg.generic`` with the size-2 pair dim innermost
    vectorized poorly: about 10x slower on a [64, 512] rfft.)
    """
    element = core.tensor_type(x).element_type
    logical = core.tensor_type(x).rank - int(complex_in)
    pair_in = [logical] if complex_in else []
    moved = core.transpose(x, [d for d in range(logical) if d != axis] + [axis] + pair_in)
    rest = core.sizes(moved)[: logical - 1]
    operator = matrix.reshape(matrix.shape[0] * (2 if complex_in else 1), -1)
    flat = reshape(moved, [product(rest), operator.shape[0]])
    constant = core.constant(operator.astype(_numpy_dtype(element)), name="twiddles")
    bins = operator.shape[1] // (2 if complex_out else 1)
    result = reshape(contraction.matmul(flat, constant), [*rest, bins] + ([2] if complex_out else []))
    # result dims: the other logical dims, then axis, then the pair dim: move axis back
    order = [d for d in range(logical) if d != axis] + [axis] + ([logical] if complex_out else [])
    return core.transpose(result, [order.index(d) for d in range(len(order))])


def _numpy_dtype(element: ir.Type) -> np.dtype:
    if element == ir.F32Type.get():
        return np.dtype(np.float32)
    if element == ir.F64Type.get():
        return np.dtype(np.float64)
    raise OperandTypeError(f"a DFT computes in f32 or f64, not {element}")


def _fit(x: ir.Value, axis: int, size: int) -> ir.Value:
    """``x`` trimmed or zero-padded to ``size`` along ``axis``."""
    extent = core.static_shape(x)[axis]
    if extent is None:
        raise OperandError(f"dim {axis} must have a static size for a DFT")
    if extent >= size:
        return slice_axis(x, axis, 0, size)
    high = [0] * core.tensor_type(x).rank
    high[axis] = size - extent
    return core.pad_constant(x, [0] * len(high), high, 0.0)


def real_to_complex(x: ir.Value, dims: Sequence[int], normalization: int, onesided: bool) -> ir.Value:
    """ATen's ``_fft_r2c``: the forward DFT of real ``x`` over ``dims`` as pairs; the last of
    ``dims`` keeps ``n // 2 + 1`` bins when ``onesided``."""
    dims = list(dims)
    last = dims[-1]
    size = _check_size(core.static_shape(x)[last], f"transformed dim {last}")
    bins = size // 2 + 1 if onesided else size
    angles = _angles(size, bins, size)
    factor = scale(normalization, size)
    matrix = np.stack([np.cos(angles), -np.sin(angles)], axis=-1) * factor  # [n, k, 2]
    pairs = _contract(x, last, matrix, complex_in=False, complex_out=True)
    return complex_to_complex(pairs, dims[:-1], normalization, forward=True) if len(dims) > 1 else pairs


def complex_to_complex(pairs: ir.Value, dims: Sequence[int], normalization: int, forward: bool) -> ir.Value:
    """ATen's ``_fft_c2c``: the DFT (``forward``: ``e^{-i...}``, else ``e^{+i...}``) over ``dims``."""
    sign = -1.0 if forward else 1.0
    for axis in dims:
        size = _check_size(core.static_shape(pairs)[axis], f"transformed dim {axis}")
        angles = _angles(size, size, size)
        cos, sin = np.cos(angles), sign * np.sin(angles)
        matrix = np.empty((size, 2, size, 2))  # [n, c_in, k, c_out]
        matrix[:, 0, :, 0], matrix[:, 1, :, 0] = cos, -sin
        matrix[:, 0, :, 1], matrix[:, 1, :, 1] = sin, cos
        pairs = _contract(pairs, axis, matrix * scale(normalization, size), complex_in=True, complex_out=True)
    return pairs


def complex_to_real(pairs: ir.Value, dims: Sequence[int], normalization: int, last_dim_size: int) -> ir.Value:
    """ATen's ``_fft_c2r``: the inverse DFT over ``dims`` of a Hermitian (one-sided) spectrum;
    the last of ``dims`` becomes ``last_dim_size`` real points from its ``n // 2 + 1`` bins."""
    dims = list(dims)
    pairs = complex_to_complex(pairs, dims[:-1], normalization, forward=False)
    last = dims[-1]
    size = _check_size(last_dim_size, f"output dim {last}")
    bins = size // 2 + 1
    pairs = _fit(pairs, last, bins)
    angles = _angles(bins, size, size)  # [k, n]
    weights = np.full(bins, 2.0)
    weights[0] = 1.0
    if size % 2 == 0:
        weights[-1] = 1.0
    weights *= scale(normalization, size)
    matrix = np.stack([np.cos(angles), -np.sin(angles)], axis=1) * weights[:, None, None]  # [k, 2, n]
    return _contract(pairs, last, matrix, complex_in=True, complex_out=False)
