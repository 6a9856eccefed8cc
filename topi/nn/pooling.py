"""``topi.nn.pool2d`` (max / avg, padding, dilation, ceil mode) and ``topi.nn.global_pool``.

A window reduction reads ``pad[.., y*stride + ry*dilation, ..]``: the window axes appear only
inside compound indices, so the generic gets a window operand for their ranges (see
``te.compute``). Average pooling divides by the count of window points that are inside the
counted region (the padded input with ``count_include_pad``, else the input), as PyTorch does,
also in ceil mode where the last window may overhang the padding.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...schedule import te
from ...schedule.te import ScheduleError
from ..utils import check_tensor, pair, static
from .pad import pad

_LAYOUTS = {"NCHW": (2, 3), "NHWC": (1, 2)}


def _lowest(dtype: np.dtype) -> float:
    return -float("inf") if dtype.kind == "f" else int(np.iinfo(dtype).min)


def _spatial_axes(op: str, data: te.Tensor, pool_type: str, layout: str) -> tuple[int, int]:
    """The height and width positions of a 4-D ``data`` in ``layout``, after checking the
    arguments both pooling operators take."""
    check_tensor(data, op)
    if pool_type not in ("max", "avg"):
        raise ScheduleError(f"{op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if layout not in _LAYOUTS or data.ndim != 4:
        raise ScheduleError(f"{op}: layout must be NCHW or NHWC with a 4-D input, got {layout!r} and {data.shape}")
    return _LAYOUTS[layout]


def pool2d(data: te.Tensor, kernel, stride, dilation, padding: Sequence[int], pool_type: str,
           ceil_mode: bool = False, layout: str = "NCHW", count_include_pad: bool = True) -> te.Tensor:
    """TVM's ``topi.nn.pool2d``; ``padding`` is ``(top, left, bottom, right)``."""
    op = "pool2d"
    hx, wx = _spatial_axes(op, data, pool_type, layout)
    kh, kw = pair(kernel, op, "kernel")
    sh, sw = pair(stride, op, "stride")
    dh, dw = pair(dilation, op, "dilation")
    if len(padding) != 4 or any(int(p) < 0 for p in padding):
        raise ScheduleError(f"{op}: padding must be 4 non-negative ints (top, left, bottom, right), got {padding!r}")
    top, left, bottom, right = (int(p) for p in padding)
    h, w = static(data.shape[hx], op, "the height"), static(data.shape[wx], op, "the width")
    span_h, span_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1

    def out_extent(size, before, after, span, s):
        total = size + before + after - span
        if total < 0:
            raise ScheduleError(f"{op}: the window of {span} does not fit an input of {size} padded by {before + after}")
        out = (-(-total // s) if ceil_mode else total // s) + 1
        if ceil_mode and (out - 1) * s >= size + before:  # the last window must start inside
            out -= 1
        return out

    oh, ow = out_extent(h, top, bottom, span_h, sh), out_extent(w, left, right, span_w, sw)
    # ceil mode: the last windows may reach past the bottom/right padding; pad them too
    extra_h = max(0, (oh - 1) * sh + span_h - (h + top + bottom))
    extra_w = max(0, (ow - 1) * sw + span_w - (w + left + right))
    before = [0] * 4
    after = [0] * 4
    before[hx], before[wx], after[hx], after[wx] = top, left, bottom + extra_h, right + extra_w
    value = _lowest(data.dtype) if pool_type == "max" else 0.0
    padded = pad(data, before, after, pad_value=value, name="pad_temp") if any(before + after) else data
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    shape = list(data.shape)
    shape[hx], shape[wx] = oh, ow

    def window(indices):
        index = list(indices)
        index[hx] = indices[hx] * sh + ry * dh
        index[wx] = indices[wx] * sw + rx * dw
        return padded[tuple(index)]

    def fcompute(reducer, name):
        def body(*indices):
            return reducer(window(indices), axis=[ry, rx])
        body.__signature__ = _axes_signature(layout)  # type: ignore[attr-defined]
        return te.compute(shape, body, name=name)

    if pool_type == "max":
        return fcompute(te.max, "pool_max")
    total = fcompute(te.sum, "pool_sum")
    if count_include_pad and not extra_h and not extra_w:
        scale = 1.0 / (kh * kw)
        return _map(total, layout, lambda v, y, x: v * te.const(scale, data.dtype), "pool_avg")
    # points counted: inside the padded input (count_include_pad) or the input itself
    low_h, high_h = (0, h + top + bottom) if count_include_pad else (top, top + h)
    low_w, high_w = (0, w + left + right) if count_include_pad else (left, left + w)
    cy, cx = te.reduce_axis(kh, "cy"), te.reduce_axis(kw, "cx")

    def count(y, x):
        py, px = y * sh + cy * dh, x * sw + cx * dw
        inside = te.all(py >= low_h, py < high_h, px >= low_w, px < high_w)
        return te.sum(te.if_then_else(inside, te.const(1.0, data.dtype), te.const(0.0, data.dtype)), axis=[cy, cx])

    divisor = te.compute((oh, ow), count, name="pool_count")
    return _map(total, layout, lambda v, y, x: v / divisor[y, x], "pool_avg")


def _axes_signature(layout: str):
    from ..utils import signature
    return signature(["n", "c", "y", "x"] if layout == "NCHW" else ["n", "y", "x", "c"])


def _map(t: te.Tensor, layout: str, fn, name: str) -> te.Tensor:
    hx, wx = _LAYOUTS[layout]

    def body(*indices):
        return fn(t[indices], indices[hx], indices[wx])

    body.__signature__ = _axes_signature(layout)  # type: ignore[attr-defined]
    return te.compute(t.shape, body, name=name)


def global_pool(data: te.Tensor, pool_type: str, layout: str = "NCHW") -> te.Tensor:
    """TVM's ``topi.nn.global_pool``: max or average over the whole H x W, keeping them as 1."""
    op = "global_pool"
    hx, wx = _spatial_axes(op, data, pool_type, layout)
    ry, rx = te.reduce_axis(data.shape[hx], "ry"), te.reduce_axis(data.shape[wx], "rx")
    shape = list(data.shape)
    shape[hx] = shape[wx] = 1

    def body(*indices):
        index = list(indices)
        index[hx], index[wx] = ry, rx
        return (te.max if pool_type == "max" else te.sum)(data[tuple(index)], axis=[ry, rx])

    body.__signature__ = _axes_signature(layout)  # type: ignore[attr-defined]
    pooled = te.compute(shape, body, name="adaptive_pool_max" if pool_type == "max" else "adaptive_pool_sum")
    if pool_type == "max":
        return pooled
    count = te.const(1, "int64") * data.shape[hx] * data.shape[wx]
    return _map(pooled, layout, lambda v, y, x: v / te.cast(count, data.dtype), "adaptive_pool_avg")
