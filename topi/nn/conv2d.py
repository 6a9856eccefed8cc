"""2-D convolutions (TVM's ``topi.nn.conv2d``, ``conv2d_nchw``, ``conv2d_nhwc``,
``group_conv2d_nchw``, ``conv2d_transpose_nchw``) as a pad stage and one reduction.

The output element sums ``pad[n, g*Cg + rc, y*stride + ry*dilation, ...] * w[f, rc, ry, rx]``:
the reduction axes index the filter directly, so the loop ranges come from it, and the
padded input is a separate compute (``pad_temp``) that a schedule may inline or compute at.
"""

from __future__ import annotations

from typing import Sequence

from ...schedule import te
from ...schedule.te import ScheduleError
from ...schedule.te.expr import Expr
from ..utils import check_tensor, pad_tuple, pair, static
from .pad import pad


def _output_extent(size: int, pad_total: int, kernel: int, stride: int, dilation: int, op: str) -> int:
    span = (kernel - 1) * dilation + 1
    out = (size + pad_total - span) // stride + 1
    if out < 1:
        raise ScheduleError(f"{op}: the (dilated) kernel of {span} does not fit an input of {size} "
                            f"padded by {pad_total}")
    return out


def _check(data: te.Tensor, kernel: te.Tensor, op: str) -> None:
    check_tensor(data, op, "data")
    check_tensor(kernel, op, "kernel")
    if data.ndim != 4 or kernel.ndim != 4:
        raise ScheduleError(f"{op}: data and kernel must be 4-D, got {data.shape} and {kernel.shape}")
    if data.dtype != kernel.dtype:
        raise ScheduleError(f"{op}: data is {data.dtype} but the kernel is {kernel.dtype}")


def _accumulate(a: Expr, b: Expr, out_dtype) -> Expr:
    """``a * b``, in ``out_dtype`` when one is asked (TVM's ``out_dtype``)."""
    if out_dtype is None or str(out_dtype) == str(a.dtype):
        return a * b
    return a.astype(out_dtype) * b.astype(out_dtype)


class _Geometry:
    """What both layouts derive alike from the operands and the attributes: extents, strides,
    dilations, the padded input, the reduction axes and the group's channel index."""

    def __init__(self, op: str, Input: te.Tensor, Filter: te.Tensor, layout: str, stride, padding,
                 dilation, groups: int) -> None:
        _check(Input, Filter, op)
        channels_last = layout == "NHWC"
        n, h, w, c = Input.shape if channels_last else (Input.shape[0], *Input.shape[2:], Input.shape[1])
        dims = [static(e, op, f"filter axis {d}") for d, e in enumerate(Filter.shape)]
        kh, kw, cg, k = dims if channels_last else (dims[2], dims[3], dims[1], dims[0])
        h, w, c = static(h, op, "the height"), static(w, op, "the width"), static(c, op, "the channels")
        self.sh, self.sw = pair(stride, op, "stride")
        self.dh, self.dw = pair(dilation, op, "dilation")
        if groups < 1 or c % groups or k % groups or cg != c // groups:
            raise ScheduleError(f"{op}: {c} input channels, {k} filters of {cg} channels do not make "
                                f"{groups} groups")
        top, left, bottom, right = pad_tuple(padding, ((kh - 1) * self.dh + 1, (kw - 1) * self.dw + 1), op)
        self.n, self.k = n, k
        self.oh = _output_extent(h, top + bottom, kh, self.sh, self.dh, op)
        self.ow = _output_extent(w, left + right, kw, self.sw, self.dw, op)
        before, after = ((0, top, left, 0), (0, bottom, right, 0)) if channels_last else \
            ((0, 0, top, left), (0, 0, bottom, right))
        self.data = pad(Input, before, after, name="pad_temp") if top + left + bottom + right else Input
        self.rc, self.ry, self.rx = te.reduce_axis(cg, "rc"), te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
        self.cg, self.kg, self.groups = cg, k // groups, groups

    def channel(self, ff):
        """The input channel a filter ``ff`` reads at reduction step ``rc``: its group's."""
        return self.rc if self.groups == 1 else (ff // self.kg) * self.cg + self.rc


def conv2d_nchw(Input: te.Tensor, Filter: te.Tensor, stride, padding, dilation, out_dtype=None,
                groups: int = 1) -> te.Tensor:
    """NCHW convolution; ``Filter`` is ``(out_channel, in_channel // groups, kh, kw)``."""
    g = _Geometry("conv2d_nchw", Input, Filter, "NCHW", stride, padding, dilation, groups)
    rc, ry, rx = g.rc, g.ry, g.rx
    return te.compute(
        (g.n, g.k, g.oh, g.ow),
        lambda nn, ff, yy, xx: te.sum(_accumulate(
            g.data[nn, g.channel(ff), yy * g.sh + ry * g.dh, xx * g.sw + rx * g.dw], Filter[ff, rc, ry, rx],
            out_dtype), axis=[rc, ry, rx]),
        name="conv2d_nchw")


def conv2d_nhwc(Input: te.Tensor, Filter: te.Tensor, stride, padding, dilation, out_dtype=None,
                groups: int = 1) -> te.Tensor:
    """NHWC convolution; ``Filter`` is HWIO ``(kh, kw, in_channel // groups, out_channel)``."""
    g = _Geometry("conv2d_nhwc", Input, Filter, "NHWC", stride, padding, dilation, groups)
    rc, ry, rx = g.rc, g.ry, g.rx
    return te.compute(
        (g.n, g.oh, g.ow, g.k),
        lambda nn, yy, xx, ff: te.sum(_accumulate(
            g.data[nn, yy * g.sh + ry * g.dh, xx * g.sw + rx * g.dw, g.channel(ff)], Filter[ry, rx, rc, ff],
            out_dtype), axis=[rc, ry, rx]),
        name="conv2d_nhwc")


def conv2d(input: te.Tensor, filter: te.Tensor, strides, padding, dilation,  # noqa: A002
           data_layout: str = "NCHW", kernel_layout: str = "", out_dtype=None, *, groups: int = 1) -> te.Tensor:
    """TVM's ``topi.nn.conv2d``: NCHW (kernel OIHW) or NHWC (kernel HWIO), with ``groups=``."""
    if data_layout == "NCHW" and kernel_layout in ("", "OIHW"):
        return conv2d_nchw(input, filter, strides, padding, dilation, out_dtype, groups=groups)
    if data_layout == "NHWC" and kernel_layout in ("", "HWIO"):
        return conv2d_nhwc(input, filter, strides, padding, dilation, out_dtype, groups=groups)
    raise ScheduleError(f"conv2d: layouts data={data_layout!r} kernel={kernel_layout!r} are not supported; "
                        "use NCHW with OIHW, or NHWC with HWIO (transpose the operands with topi.transpose)")


def group_conv2d_nchw(Input: te.Tensor, Filter: te.Tensor, stride, padding, dilation, groups: int,
                      out_dtype=None) -> te.Tensor:
    """TVM's ``topi.nn.group_conv2d_nchw``."""
    return conv2d_nchw(Input, Filter, stride, padding, dilation, out_dtype, groups=groups)


def conv2d_transpose_nchw(Input: te.Tensor, Filter: te.Tensor, strides, padding, out_dtype=None,
                          output_padding: Sequence[int] = (0, 0)) -> te.Tensor:
    """TVM's ``topi.nn.conv2d_transpose_nchw``; ``Filter`` is ``(in_channel, out_channel, kh, kw)``.

    As in TVM: the input dilated by the strides and padded by ``kernel - 1 - padding`` (one
    guarded compute, ``data_pad``), then a stride-1 convolution with the flipped kernel."""
    op = "conv2d_transpose_nchw"
    _check(Input, Filter, op)
    n, c, h, w = Input.shape
    c2, k, kh, kw = (static(e, op, f"filter axis {d}") for d, e in enumerate(Filter.shape))
    h, w, c = static(h, op, "the height"), static(w, op, "the width"), static(c, op, "the channels")
    if c2 != c:
        raise ScheduleError(f"{op}: the filter has {c2} input channels, the data {c}")
    sh, sw = pair(strides, op, "strides")
    top, left, bottom, right = pad_tuple(padding, (kh, kw), op)
    oph, opw = (int(p) for p in output_padding)
    if not (0 <= oph < sh and 0 <= opw < sw):
        raise ScheduleError(f"{op}: output_padding {tuple(output_padding)} must be smaller than the strides")
    bt, bl = kh - 1 - top, kw - 1 - left
    bb, br = kh - 1 - bottom + oph, kw - 1 - right + opw
    if min(bt, bl, bb, br) < 0:
        raise ScheduleError(f"{op}: padding {padding!r} is larger than the kernel minus one")
    dilated_h, dilated_w = (h - 1) * sh + 1, (w - 1) * sw + 1
    ph, pw = dilated_h + bt + bb, dilated_w + bl + br

    def data_pad(nn, cc, yy, xx):
        y, x = yy - bt, xx - bl
        inside = te.all(yy >= bt, yy < bt + dilated_h, xx >= bl, xx < bl + dilated_w,
                        y % sh == 0, x % sw == 0)
        return te.if_then_else(inside, Input[nn, cc, y // sh, x // sw], te.const(0, Input.dtype))

    padded = te.compute((n, c, ph, pw), data_pad, name="data_pad")
    oh, ow = ph - kh + 1, pw - kw + 1
    dc, dy, dx = te.reduce_axis(c, "dc"), te.reduce_axis(kh, "dh"), te.reduce_axis(kw, "dw")
    return te.compute(
        (n, k, oh, ow),
        lambda b, f, y, x: te.sum(_accumulate(
            padded[b, dc, y + dy, x + dx], Filter[dc, f, kh - 1 - dy, kw - 1 - dx], out_dtype),
            axis=[dc, dy, dx]),
        name="conv2d_transpose_nchw")


conv2d_transpose = conv2d_transpose_nchw
