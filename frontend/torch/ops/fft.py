"""The FFT family (ATen's ``_fft_r2c``, ``_fft_c2c``, ``_fft_c2r``) and the ops on complex
tensors around it: construction (``complex``, ``polar``, ``view_as_complex``, casts),
the parts (``view_as_real``, ``abs``, ``_conj``) and the data movement an FFT's
decomposition wraps around it (slices, pads, permutes, reshapes).

Every handler here is registered under ``importer.COMPLEX_PREFIX``: it sees complex tensors
as pairs (a trailing dim of 2, ir/complex_pairs.py), and dims are counted
without that trailing dim, as PyTorch counts them. An op on complex tensors missing here
is refused by name (``complex:aten.mul.Tensor``), never run by a real handler on pairs.
The transforms themselves are ir/dft.py.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from mlir import ir

from ....errors import OperandError
from ....ir import complex_pairs, core, dft
from ..importer import COMPLEX_PREFIX, Handler, OpContext, numpy_dtype
from . import shape, table


def complex_aten(*names: str):
    """Register a handler for the named ATen overloads when they touch complex tensors."""

    def register(handler: Handler) -> Handler:
        for name in names:
            key = f"{COMPLEX_PREFIX}aten.{name}"
            if key in table.ATEN_OPS:
                raise InternalError(f"{key} is registered twice")
            table.ATEN_OPS[key] = handler
        return handler

    return register


def _logical_rank(pairs: ir.Value) -> int:
    return table.rank(pairs) - 1


def _dims(dims: Sequence[int], rank: int) -> list[int]:
    """Transformed dims as positions, in the given order (an FFT's order matters for c2r)."""
    positions = [table.dim(d, rank) for d in dims]
    if len(set(positions)) != len(positions):
        raise OperandError(f"dims {list(dims)} repeat a dim")
    return positions


def _pairs(ctx: OpContext, x: Any, position: int) -> ir.Value:
    """Argument ``position`` as pairs of the result's part dtype (a real operand: imaginary 0)."""
    meta = ctx.arg_meta(position)
    if isinstance(meta, torch.Tensor) and meta.dtype.is_complex:
        return ctx.tensor(x, ctx.result_dtype())
    real_part = ctx.tensor(x, ctx.result_dtype())
    zeros = core.filled(core.sizes(real_part), 0.0, core.tensor_type(real_part).element_type)
    return complex_pairs.stack(real_part, zeros)


# --- the transforms ------------------------------------------------------------------------


@complex_aten("_fft_r2c.default")
def fft_r2c(ctx: OpContext, x: Any, dim: Sequence[int], normalization: int, onesided: bool) -> ir.Value:
    x = ctx.tensor(x, ctx.result_dtype())
    return dft.real_to_complex(x, _dims(dim, table.rank(x)), normalization, onesided)


@complex_aten("_fft_c2c.default")
def fft_c2c(ctx: OpContext, x: Any, dim: Sequence[int], normalization: int, forward: bool) -> ir.Value:
    pairs = ctx.tensor(x, ctx.result_dtype())
    return dft.complex_to_complex(pairs, _dims(dim, _logical_rank(pairs)), normalization, forward)


@complex_aten("_fft_c2r.default")
def fft_c2r(ctx: OpContext, x: Any, dim: Sequence[int], normalization: int, last_dim_size: int) -> ir.Value:
    pairs = ctx.tensor(x, ctx.result_dtype())
    if not isinstance(last_dim_size, int):
        raise OperandError("the output size of an inverse real FFT must be static")
    return dft.complex_to_real(pairs, _dims(dim, _logical_rank(pairs)), normalization, last_dim_size)


# --- making complex tensors and taking them apart -------------------------------------------


@complex_aten("complex.default")
def complex_(ctx: OpContext, real_part: Any, imaginary_part: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    real_part, imaginary_part = ctx.tensor(real_part, dtype), ctx.tensor(imaginary_part, dtype)
    extents = core.broadcast_extents([real_part, imaginary_part])
    element = core.element_type(dtype)
    return complex_pairs.stack(core.elementwise([real_part], element, lambda v: v, extents=extents),
                               core.elementwise([imaginary_part], element, lambda v: v, extents=extents))


@complex_aten("polar.default")
def polar(ctx: OpContext, radius: Any, angle: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    return complex_pairs.polar(ctx.tensor(radius, dtype), ctx.tensor(angle, dtype))


@complex_aten("view_as_complex.default", "view_as_real.default", "clone.default", "alias.default",
              "lift_fresh_copy.default", "resolve_conj.default")
def same_pairs(ctx: OpContext, x: Any, *_: Any, **__: Any) -> ir.Value:
    """Ops whose result, as pairs, is their input: ``view_as_complex`` reads a trailing dim
    of 2 as pairs and ``view_as_real`` shows them."""
    return ctx.tensor(x)


@complex_aten("_to_copy.default")
def to_copy(ctx: OpContext, x: Any, **kwargs: Any) -> ir.Value:
    result = ctx.meta.dtype
    if result.is_complex:
        return _pairs(ctx, x, 0)
    # complex to real keeps the real part, as torch does (with a warning)
    return complex_pairs.real(ctx.tensor(x, numpy_dtype(result)))


@complex_aten("_conj.default", "_conj_physical.default", "conj_physical.default")
def conjugate(ctx: OpContext, x: Any) -> ir.Value:
    return complex_pairs.conjugate(ctx.tensor(x))


@complex_aten("abs.default")
def absolute(ctx: OpContext, x: Any) -> ir.Value:
    return complex_pairs.magnitude(ctx.tensor(x))


@complex_aten("real.default")
def real(ctx: OpContext, x: Any) -> ir.Value:
    return complex_pairs.real(ctx.tensor(x))


@complex_aten("imag.default")
def imaginary(ctx: OpContext, x: Any) -> ir.Value:
    return complex_pairs.imaginary(ctx.tensor(x))


# --- arithmetic --------------------------------------------------------------------------------


@complex_aten("add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "rsub.Tensor", "rsub.Scalar")
def add_sub(ctx: OpContext, a: Any, b: Any, alpha: Any = 1) -> ir.Value:
    if not isinstance(alpha, (int, float)):
        raise OperandError(f"alpha {alpha!r} on complex tensors (only a real Python number)")
    name = ctx.node.target._opname
    a, b = _pairs(ctx, a, 0), _pairs(ctx, b, 1)
    if name == "rsub":
        a, b = b, a
    return complex_pairs.add(a, b, -float(alpha) if name in ("sub", "rsub") else float(alpha))


@complex_aten("mul.Tensor", "mul.Scalar")
def multiply(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    return complex_pairs.multiply(_pairs(ctx, a, 0), _pairs(ctx, b, 1))


@complex_aten("div.Tensor", "div.Scalar")
def divide(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    return complex_pairs.divide(_pairs(ctx, a, 0), _pairs(ctx, b, 1))


# --- data movement: the real handlers on pairs, dims counted without the pair dim ------------


@complex_aten("slice.Tensor")
def slice_(ctx: OpContext, x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> ir.Value:
    pairs = ctx.tensor(x)
    return shape.slice_(ctx, pairs, table.dim(dim, _logical_rank(pairs)), start, end, step)


@complex_aten("select.int")
def select(ctx: OpContext, x: Any, dim: int, index: Any) -> ir.Value:
    pairs = ctx.tensor(x)
    return shape.select(ctx, pairs, table.dim(dim, _logical_rank(pairs)), index)


@complex_aten("constant_pad_nd.default")
def constant_pad(ctx: OpContext, x: Any, pad: Sequence[int], value: float = 0) -> ir.Value:
    if value != 0:
        raise OperandError(f"padding a complex tensor with {value!r} (only 0 is supported)")
    return shape.constant_pad(ctx, ctx.tensor(x), [0, 0, *pad], 0.0)


@complex_aten("permute.default")
def permute(ctx: OpContext, x: Any, dims: Sequence[int]) -> ir.Value:
    pairs = ctx.tensor(x)
    rank = _logical_rank(pairs)
    return shape.permute(ctx, pairs, [*(table.dim(d, rank) for d in dims), rank])


@complex_aten("transpose.int")
def transpose(ctx: OpContext, x: Any, dim0: int = 0, dim1: int = 1) -> ir.Value:
    pairs = ctx.tensor(x)
    rank = _logical_rank(pairs)
    return shape.transpose(ctx, pairs, table.dim(dim0, rank), table.dim(dim1, rank)) if rank >= 2 else pairs


@complex_aten("unsqueeze.default")
def unsqueeze(ctx: OpContext, x: Any, dim: int) -> ir.Value:
    pairs = ctx.tensor(x)
    return shape.unsqueeze(ctx, pairs, table.dim(dim, _logical_rank(pairs) + 1))


@complex_aten("squeeze.dims", "squeeze.dim", "squeeze.default")
def squeeze(ctx: OpContext, x: Any, dims: Any = None) -> ir.Value:
    pairs = ctx.tensor(x)
    rank = _logical_rank(pairs)
    if dims is None:
        dims = list(range(rank))
    elif isinstance(dims, int):
        dims = [dims]
    if not dims:
        return pairs
    return shape.squeeze(ctx, pairs, table.dims(dims, rank))


@complex_aten("view.default", "_unsafe_view.default", "reshape.default")
def view(ctx: OpContext, x: Any, size: Sequence[Any]) -> ir.Value:
    return shape.view(ctx, ctx.tensor(x), [*size, 2])


@complex_aten("flip.default")
def flip(ctx: OpContext, x: Any, dims: Sequence[int]) -> ir.Value:
    pairs = ctx.tensor(x)
    return shape.flip(ctx, pairs, [table.dim(d, _logical_rank(pairs)) for d in dims])
