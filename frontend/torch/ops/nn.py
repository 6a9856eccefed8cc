"""Contractions, convolution and pooling ATen ops."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith

from ...emit import (
    contraction,
    conv,
    core,
    elementwise,
    pooling,
)
from ..importer import OpContext
from . import table


@table.aten("mm.default", "bmm.default", "matmul.default")
def matmul(ctx: OpContext, a: Any, b: Any) -> ir.Value:
    dtype = ctx.result_dtype()
    return contraction.matmul(ctx.tensor(a, dtype), ctx.tensor(b, dtype))


@table.aten("addmm.default")
def addmm(ctx: OpContext, bias: Any, a: Any, b: Any, *, beta: float = 1, alpha: float = 1) -> ir.Value:
    dtype = ctx.result_dtype()
    return contraction.gemm(ctx.tensor(a, dtype), ctx.tensor(b, dtype), ctx.tensor(bias, dtype),
                            alpha=float(alpha), beta=float(beta))


@table.aten("baddbmm.default")
def baddbmm(ctx: OpContext, bias: Any, a: Any, b: Any, *, beta: float = 1, alpha: float = 1) -> ir.Value:
    dtype = ctx.result_dtype()
    product = contraction.matmul(ctx.tensor(a, dtype), ctx.tensor(b, dtype))

    def body(p: ir.Value, c: ir.Value) -> ir.Value:
        return elementwise.add(elementwise.multiply(p, elementwise.like(alpha, p)),
                               elementwise.multiply(c, elementwise.like(beta, c)))

    return core.elementwise([product, ctx.tensor(bias, dtype)], core.element_type(dtype), body)


def _per_dim(value: Any, count: int, name: str) -> list[int]:
    values = [value] if isinstance(value, int) else list(value)
    if len(values) == 1:
        values *= count
    if len(values) != count or not all(isinstance(v, int) for v in values):
        raise ValueError(f"{name} {value!r} needs {count} static entries")
    return values


@table.aten("convolution.default")
def convolution(ctx: OpContext, x: Any, w: Any, bias: Any, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
                groups: int) -> ir.Value:
    dtype = ctx.result_dtype()
    x = ctx.tensor(x, dtype)
    spatial = table.rank(x) - 2
    windows = {
        "strides": _per_dim(stride, spatial, "stride"),
        "padding_low": _per_dim(padding, spatial, "padding"),
        "padding_high": _per_dim(padding, spatial, "padding"),
        "dilations": _per_dim(dilation, spatial, "dilation"),
        "groups": groups,
    }
    b = None if bias is None else ctx.tensor(bias, dtype)
    if transposed:
        filters = w.astype(dtype) if isinstance(w, np.ndarray) else ctx.tensor(w, dtype)
        return conv.conv_transpose(x, filters, b, output_padding=_per_dim(output_padding, spatial, "output_padding"),
                                   **windows)
    return conv.conv(x, ctx.tensor(w, dtype), b, **windows)


def _pool_windows(kernel: Any, stride: Any, padding: Any, dilation: Any, spatial: int) -> dict:
    kernel = _per_dim(kernel, spatial, "kernel_size")
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else stride
    return {
        "kernel": kernel,
        "strides": _per_dim(stride, spatial, "stride"),
        "padding_low": _per_dim(padding, spatial, "padding"),
        "padding_high": _per_dim(padding, spatial, "padding"),
        "dilations": _per_dim(dilation, spatial, "dilation"),
    }


@table.aten("max_pool2d_with_indices.default", "max_pool1d_with_indices.default",
      "max_pool2d.default", "max_pool1d.default")
def max_pool(ctx: OpContext, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
             dilation: Any = 1, ceil_mode: bool = False) -> Any:
    with_indices = ctx.node.target._opname.endswith("_with_indices")
    if with_indices and any(u.args[1] != 0 for u in ctx.node.users):
        raise NotImplementedError("max pooling indices (only the pooled values are supported)")
    x = ctx.tensor(x)
    windows = _pool_windows(kernel_size, stride, padding, dilation, table.rank(x) - 2)
    dtype = ctx.result_dtype(0 if with_indices else None)
    pooled = pooling.pool(x, "max", windows.pop("kernel"), ceil_mode=ceil_mode,
                          unsigned=table.unsigned(dtype), **windows)
    return (pooled, None) if with_indices else pooled


@table.aten("avg_pool2d.default", "avg_pool1d.default")
def avg_pool(ctx: OpContext, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
             ceil_mode: bool = False, count_include_pad: bool = True,
             divisor_override: int | None = None) -> ir.Value:
    x = ctx.tensor(x)
    windows = _pool_windows(kernel_size, stride, padding, 1, table.rank(x) - 2)
    kernel = windows.pop("kernel")
    if divisor_override is None:
        return pooling.pool(x, "avg", kernel, ceil_mode=ceil_mode,
                            count_include_pad=count_include_pad, **windows)
    summed = pooling.pool(x, "sum", kernel, ceil_mode=ceil_mode, **windows)
    return core.elementwise([summed], core.tensor_type(summed).element_type,
                            lambda v: arith.divf(v, elementwise.like(divisor_override, v)))


@table.aten("_adaptive_avg_pool2d.default", "adaptive_avg_pool2d.default", "_adaptive_avg_pool1d.default",
      "adaptive_avg_pool1d.default")
def adaptive_avg_pool(ctx: OpContext, x: Any, output_size: Sequence[int]) -> ir.Value:
    x = ctx.tensor(x)
    spatial = table.rank(x) - 2
    out = _per_dim(output_size, spatial, "output_size")
    extents = core.static_shape(x)[2:]
    if all(o == 1 for o in out):
        return pooling.global_pool(x, "avg")
    if None in extents or any(e % o for e, o in zip(extents, out)):
        raise NotImplementedError(
            f"adaptive average pooling of spatial extents {extents} to {out}: only output sizes "
            "that divide static input sizes are supported")
    kernel = [e // o for e, o in zip(extents, out)]
    return pooling.pool(x, "avg", kernel, strides=kernel, padding_low=[0] * spatial,
                        padding_high=[0] * spatial, dilations=[1] * spatial)
