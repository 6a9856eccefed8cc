"""Small builders of linalg-on-tensors MLIR text, and numpy references for them.

Every builder returns the text of a module with one public function ``@main``. Shapes are
tuples; ``None`` is a dynamic dimension (``?``).
"""

from __future__ import annotations

import numpy as np

NEG_INF = {"f16": "0xFC00", "f32": "0xFF800000", "f64": "0xFFF0000000000000"}
NP_DTYPE = {
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "i1": np.bool_,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
}


def tensor(shape, element="f32") -> str:
    dims = "".join(("?" if d is None else str(d)) + "x" for d in shape)
    return f"tensor<{dims}{element}>"


def identity_map(rank: int) -> str:
    dims = ", ".join(f"d{i}" for i in range(rank))
    return f"affine_map<({dims}) -> ({dims})>"


def parallel(rank: int) -> str:
    return ", ".join(['"parallel"'] * rank)


def filled(name: str, shape, value: str, element="f32") -> str:
    """Lines making ``%<name>``: a static-shape tensor filled with ``value``."""
    t = tensor(shape, element)
    return (
        f"  %{name}_init = arith.constant {value} : {element}\n"
        f"  %{name}_empty = tensor.empty() : {t}\n"
        f"  %{name} = linalg.fill ins(%{name}_init : {element}) outs(%{name}_empty : {t}) -> {t}\n"
    )


# --- contractions -------------------------------------------------------------------------

def matmul(m, n, k, element="f32") -> str:
    a, b, c = tensor((m, k), element), tensor((k, n), element), tensor((m, n), element)
    return (
        f"func.func @main(%a: {a}, %b: {b}) -> {c} {{\n"
        + filled("acc", (m, n), "0.0", element)
        + f"  %r = linalg.matmul ins(%a, %b : {a}, {b}) outs(%acc : {c}) -> {c}\n"
        f"  return %r : {c}\n}}\n"
    )


def dynamic_matmul() -> str:
    a = b = c = tensor((None, None))
    return (
        f"func.func @main(%a: {a}, %b: {b}) -> {c} {{\n"
        "  %c0 = arith.constant 0 : index\n  %c1 = arith.constant 1 : index\n"
        f"  %m = tensor.dim %a, %c0 : {a}\n  %n = tensor.dim %b, %c1 : {b}\n"
        "  %zero = arith.constant 0.0 : f32\n"
        f"  %empty = tensor.empty(%m, %n) : {c}\n"
        f"  %acc = linalg.fill ins(%zero : f32) outs(%empty : {c}) -> {c}\n"
        f"  %r = linalg.matmul ins(%a, %b : {a}, {b}) outs(%acc : {c}) -> {c}\n"
        f"  return %r : {c}\n}}\n"
    )


def batch_matmul(batch, m, n, k) -> str:
    a, b, c = tensor((batch, m, k)), tensor((batch, k, n)), tensor((batch, m, n))
    return (
        f"func.func @main(%a: {a}, %b: {b}) -> {c} {{\n"
        + filled("acc", (batch, m, n), "0.0")
        + f"  %r = linalg.batch_matmul ins(%a, %b : {a}, {b}) outs(%acc : {c}) -> {c}\n"
        f"  return %r : {c}\n}}\n"
    )


def matmul_bias_relu(m, n, k) -> str:
    a, b, bias, c = tensor((m, k)), tensor((k, n)), tensor((n,)), tensor((m, n))
    return (
        f"func.func @main(%a: {a}, %b: {b}, %bias: {bias}) -> {c} {{\n"
        + filled("acc", (m, n), "0.0")
        + f"  %mm = linalg.matmul ins(%a, %b : {a}, {b}) outs(%acc : {c}) -> {c}\n"
        f"  %empty = tensor.empty() : {c}\n"
        "  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,"
        " affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],"
        f" iterator_types = [{parallel(2)}]}}\n"
        f"      ins(%mm, %bias : {c}, {bias}) outs(%empty : {c}) {{\n"
        "  ^bb0(%x: f32, %y: f32, %out: f32):\n"
        "    %zero = arith.constant 0.0 : f32\n"
        "    %s = arith.addf %x, %y : f32\n"
        "    %relu = arith.maximumf %s, %zero : f32\n"
        "    linalg.yield %relu : f32\n"
        f"  }} -> {c}\n"
        f"  return %r : {c}\n}}\n"
    )


# --- convolutions and pooling -------------------------------------------------------------

def _pad(name: str, source: str, shape, low, high) -> tuple[str, tuple]:
    """Zero-pad ``%source`` (the last two dims by ``low``/``high``) into ``%name``."""
    rank = len(shape)
    padded = tuple(s + lo + hi for s, lo, hi in zip(shape, low, high))
    args = ", ".join(f"%i{d}: index" for d in range(rank))
    text = (
        f"  %{name}_zero = arith.constant 0.0 : f32\n"
        f"  %{name} = tensor.pad %{source} low{list(low)} high{list(high)} {{\n"
        f"  ^bb0({args}):\n    tensor.yield %{name}_zero : f32\n"
        f"  }} : {tensor(shape)} to {tensor(padded)}\n"
    )
    return text, padded


def _window_attrs(stride: int, dilation: int) -> str:
    return f"{{dilations = dense<{dilation}> : tensor<2xi64>, strides = dense<{stride}> : tensor<2xi64>}}"


def conv_out(size: int, window: int, stride: int, dilation: int) -> int:
    return (size - dilation * (window - 1) - 1) // stride + 1


def conv_nchw(n, c, h, w, f, kh, kw, *, stride=1, dilation=1, pad=0) -> str:
    x, filt = (n, c, h, w), (f, c, kh, kw)
    pad_text, padded = _pad("xp", "x", x, (0, 0, pad, pad), (0, 0, pad, pad))
    out = (n, f, conv_out(padded[2], kh, stride, dilation), conv_out(padded[3], kw, stride, dilation))
    return (
        f"func.func @main(%x: {tensor(x)}, %w: {tensor(filt)}) -> {tensor(out)} {{\n"
        + pad_text
        + filled("acc", out, "0.0")
        + f"  %r = linalg.conv_2d_nchw_fchw {_window_attrs(stride, dilation)}\n"
        f"      ins(%xp, %w : {tensor(padded)}, {tensor(filt)}) outs(%acc : {tensor(out)}) -> {tensor(out)}\n"
        f"  return %r : {tensor(out)}\n}}\n"
    )


def conv_nhwc(n, h, w, c, kh, kw, f, *, stride=1, dilation=1) -> str:
    x, filt = (n, h, w, c), (kh, kw, c, f)
    out = (n, conv_out(h, kh, stride, dilation), conv_out(w, kw, stride, dilation), f)
    return (
        f"func.func @main(%x: {tensor(x)}, %w: {tensor(filt)}) -> {tensor(out)} {{\n"
        + filled("acc", out, "0.0")
        + f"  %r = linalg.conv_2d_nhwc_hwcf {_window_attrs(stride, dilation)}\n"
        f"      ins(%x, %w : {tensor(x)}, {tensor(filt)}) outs(%acc : {tensor(out)}) -> {tensor(out)}\n"
        f"  return %r : {tensor(out)}\n}}\n"
    )


def depthwise_nhwc(n, h, w, c, kh, kw, *, stride=1, dilation=1) -> str:
    x, filt = (n, h, w, c), (kh, kw, c)
    out = (n, conv_out(h, kh, stride, dilation), conv_out(w, kw, stride, dilation), c)
    return (
        f"func.func @main(%x: {tensor(x)}, %w: {tensor(filt)}) -> {tensor(out)} {{\n"
        + filled("acc", out, "0.0")
        + f"  %r = linalg.depthwise_conv_2d_nhwc_hwc {_window_attrs(stride, dilation)}\n"
        f"      ins(%x, %w : {tensor(x)}, {tensor(filt)}) outs(%acc : {tensor(out)}) -> {tensor(out)}\n"
        f"  return %r : {tensor(out)}\n}}\n"
    )


def pooling_nchw(kind, n, c, h, w, window, *, stride=2) -> str:
    """``kind`` is ``"max"`` or ``"sum"``; the window shape is a ``tensor.empty`` input."""
    x = (n, c, h, w)
    out = (n, c, conv_out(h, window, stride, 1), conv_out(w, window, stride, 1))
    init = NEG_INF["f32"] if kind == "max" else "0.0"
    win = tensor((window, window))
    return (
        f"func.func @main(%x: {tensor(x)}) -> {tensor(out)} {{\n"
        f"  %window = tensor.empty() : {win}\n"
        + filled("acc", out, init)
        + f"  %r = linalg.pooling_nchw_{kind} {_window_attrs(stride, 1)}\n"
        f"      ins(%x, %window : {tensor(x)}, {win}) outs(%acc : {tensor(out)}) -> {tensor(out)}\n"
        f"  return %r : {tensor(out)}\n}}\n"
    )


def windows(x: np.ndarray, kh: int, kw: int, stride: int, dilation: int, axes=(2, 3)):
    """Yield ``(i, j, patch)``: the strided input slice each filter tap ``(i, j)`` sees."""
    ha, wa = axes
    oh = conv_out(x.shape[ha], kh, stride, dilation)
    ow = conv_out(x.shape[wa], kw, stride, dilation)
    for i in range(kh):
        for j in range(kw):
            index = [slice(None)] * x.ndim
            index[ha] = slice(i * dilation, i * dilation + stride * (oh - 1) + 1, stride)
            index[wa] = slice(j * dilation, j * dilation + stride * (ow - 1) + 1, stride)
            yield i, j, x[tuple(index)]


def ref_conv_nchw(x, w, stride=1, dilation=1, pad=0):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    return sum(
        np.einsum("nchw,fc->nfhw", patch, w[:, :, i, j])
        for i, j, patch in windows(x, w.shape[2], w.shape[3], stride, dilation)
    )


def ref_conv_nhwc(x, w, stride=1, dilation=1):
    return sum(
        np.einsum("nhwc,cf->nhwf", patch, w[i, j])
        for i, j, patch in windows(x, w.shape[0], w.shape[1], stride, dilation, axes=(1, 2))
    )


def ref_depthwise_nhwc(x, w, stride=1, dilation=1):
    return sum(
        patch * w[i, j]
        for i, j, patch in windows(x, w.shape[0], w.shape[1], stride, dilation, axes=(1, 2))
    )


def ref_pooling_nchw(kind, x, window, stride=2):
    patches = [p for _, _, p in windows(x, window, window, stride, 1)]
    return np.max(patches, axis=0) if kind == "max" else np.sum(patches, axis=0)


# --- elementwise and reductions -----------------------------------------------------------

def generic(inputs, output, maps, iterators, body, *, output_element=None, init=None) -> str:
    """A function applying one ``linalg.generic`` to its arguments.

    ``inputs``: list of (shape, element); ``output``: shape; ``maps``: affine map strings, one
    per input then the output; ``body``: lines using ``%in0..`` and ``%out``, ending in a
    ``linalg.yield``; ``init``: fill value of the output (``None``: ``tensor.empty``).
    """
    element = inputs[0][1]
    out_element = output_element or element
    out = tensor(output, out_element)
    params = ", ".join(f"%arg{i}: {tensor(s, e)}" for i, (s, e) in enumerate(inputs))
    dynamic = [i for i, d in enumerate(output) if d is None]
    sizes = []
    text = f"func.func @main({params}) -> {out} {{\n"
    for d in dynamic:  # dynamic output dims come from the first input
        text += f"  %c{d} = arith.constant {d} : index\n  %dim{d} = tensor.dim %arg0, %c{d} : {tensor(inputs[0][0], element)}\n"
        sizes.append(f"%dim{d}")
    if init is None:
        text += f"  %acc = tensor.empty({', '.join(sizes)}) : {out}\n"
    else:
        text += filled("acc", output, init, out_element)
    ins = ", ".join(f"%arg{i}" for i in range(len(inputs)))
    in_types = ", ".join(tensor(s, e) for s, e in inputs)
    block = ", ".join([f"%in{i}: {e}" for i, (_, e) in enumerate(inputs)] + [f"%out: {out_element}"])
    body_text = "".join(f"    {line}\n" for line in body)
    return (
        text
        + f"  %r = linalg.generic {{indexing_maps = [{', '.join(maps)}],"
        f" iterator_types = [{', '.join(f'{chr(34)}{it}{chr(34)}' for it in iterators)}]}}\n"
        f"      ins({ins} : {in_types}) outs(%acc : {out}) {{\n"
        f"  ^bb0({block}):\n{body_text}  }} -> {out}\n"
        f"  return %r : {out}\n}}\n"
    )


def elementwise(shape, n_inputs, body, element="f32", output_element=None) -> str:
    rank = len(shape)
    return generic(
        [(shape, element)] * n_inputs, shape, [identity_map(rank)] * (n_inputs + 1),
        ["parallel"] * rank, body, output_element=output_element,
    )


def reduce_2d(shape, axis, combiner, init, element="f32") -> str:
    """Reduce a 2-D tensor over ``axis`` with ``combiner`` (``arith.addf``...)."""
    out = (shape[0],) if axis == 1 else (shape[1],)
    # Keep the reduced axis as d1 or d0 so the loop order follows memory order.
    out_map = "affine_map<(d0, d1) -> (d0)>" if axis == 1 else "affine_map<(d0, d1) -> (d1)>"
    iterators = ["parallel", "reduction"] if axis == 1 else ["reduction", "parallel"]
    return generic(
        [(shape, element)], out, [identity_map(2), out_map], iterators,
        [f"%r = {combiner} %in0, %out : {element}", f"linalg.yield %r : {element}"], init=init,
    )


def softmax(m, n) -> str:
    """Softmax over the last axis as four linalg.generic ops (max, exp(x - max), sum, div)."""
    x, row = tensor((m, n)), tensor((m,))
    full, rows = "affine_map<(d0, d1) -> (d0, d1)>", "affine_map<(d0, d1) -> (d0)>"

    def op(result, ins, in_types, maps, iterators, out, out_type, body):
        block = ", ".join([f"%v{i}: f32" for i in range(len(ins))] + ["%acc: f32"])
        return (
            f"  {result} = linalg.generic {{indexing_maps = [{', '.join(maps)}],"
            f" iterator_types = [{iterators}]}}\n"
            f"      ins({', '.join(ins)} : {', '.join(in_types)}) outs({out} : {out_type}) {{\n"
            f"  ^bb0({block}):\n" + "".join(f"    {b}\n" for b in body) + f"  }} -> {out_type}\n"
        )

    reduce_iters = '"parallel", "reduction"'
    return (
        f"func.func @main(%x: {x}) -> {x} {{\n"
        + filled("max_init", (m,), NEG_INF["f32"])
        + filled("sum_init", (m,), "0.0")
        + f"  %empty = tensor.empty() : {x}\n"
        + op("%max", ["%x"], [x], [full, rows], reduce_iters, "%max_init", row,
             ["%r = arith.maximumf %v0, %acc : f32", "linalg.yield %r : f32"])
        + op("%exp", ["%x", "%max"], [x, row], [full, rows, full], parallel(2), "%empty", x,
             ["%d = arith.subf %v0, %v1 : f32", "%e = math.exp %d : f32", "linalg.yield %e : f32"])
        + op("%sum", ["%exp"], [x], [full, rows], reduce_iters, "%sum_init", row,
             ["%r = arith.addf %v0, %acc : f32", "linalg.yield %r : f32"])
        + op("%r", ["%exp", "%sum"], [x, row], [full, rows, full], parallel(2), "%empty", x,
             ["%q = arith.divf %v0, %v1 : f32", "linalg.yield %q : f32"])
        + f"  return %r : {x}\n}}\n"
    )


def ref_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
