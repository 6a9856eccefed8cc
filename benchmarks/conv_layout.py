"""Convolution data layout, measured: NCHW vs NHWC vs NCHW{c} through the default schedule,
beside PyTorch and onnxruntime, in the same run.

    .venv/bin/python benchmarks/conv_layout.py
    .venv/bin/python benchmarks/conv_layout.py --cases 3x3-64 --repeat 10 --block 16

Why: ``tilecraft-convert-layout`` (pipelines/graph/layout.py) rewrites NCHW convolutions
into one layout; which one is decided by these numbers (quoted in docs/graph-dialect.md).
Each case is one convolution (input already padded, weights as arguments, zero-filled
accumulator) compiled with ``tilecraft.compile(opt_level=3)`` and the graph-less pipeline
(so no graph pass rewrites the layout under the benchmark):

- ``NCHW``: ``linalg.conv_2d_nchw_fchw`` / ``linalg.depthwise_conv_2d_nchw_chw``, what the
  ONNX frontend emits;
- ``NHWC``: ``linalg.conv_2d_nhwc_hwcf`` / ``linalg.depthwise_conv_2d_nhwc_hwc``;
- ``NCHW{c}c`` (TVM's NCHWc, block ``--block``): a ``linalg.generic`` (no named op exists),
  which the default schedule tiles as a generic op (no 2-D -> 1-D decomposition).

Times are medians in ms; ``x ort`` is tilecraft / onnxruntime (lower is better; < 1 means
faster than onnxruntime). No thresholds: the figures are quoted in notes.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

import tilecraft
from tilecraft.runtime.timing import measure


@dataclass(frozen=True)
class Case:
    """One convolution: ``c`` input channels, ``f`` filters, ``size``x``size`` image
    (before padding), ``k``x``k`` window, ``stride``; ``depthwise`` means groups == c == f."""

    name: str
    c: int
    f: int
    size: int
    k: int
    stride: int = 1
    depthwise: bool = False

    @property
    def pad(self) -> int:
        return self.k // 2

    @property
    def padded(self) -> int:
        return self.size + 2 * self.pad

    @property
    def out(self) -> int:
        return (self.padded - self.k) // self.stride + 1

    @property
    def flops(self) -> int:
        reduction = self.k * self.k * (1 if self.depthwise else self.c)
        return 2 * self.f * self.out * self.out * reduction


CASES = {
    case.name: case for case in (
        Case("3x3-64", 64, 64, 56, 3),                     # ResNet-50 stage 1 3x3
        Case("1x1-256-64", 256, 64, 56, 1),                # ResNet-50 stage 1 reduce
        Case("3x3-s2", 128, 128, 56, 3, stride=2),         # ResNet-50 stage 2 first 3x3
        Case("1x1-2048", 512, 2048, 7, 1),                 # ResNet-50 stage 4 expand
        Case("dw3x3-144", 144, 144, 56, 3, depthwise=True),  # MobileNet-v2 depthwise
    )
}


def _tensor(shape: list[int]) -> str:
    return "tensor<" + "x".join(map(str, shape)) + "xf32>"


def _function(args: list[list[int]], out: list[int], body: str) -> str:
    """``func @conv(%x, %w) -> out`` with a zero-filled accumulator ``%init`` and ``body``."""
    return f"""
#maps
func.func @conv(%x: {_tensor(args[0])}, %w: {_tensor(args[1])}) -> {_tensor(out)} {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : {_tensor(out)}
  %init = linalg.fill ins(%zero : f32) outs(%empty : {_tensor(out)}) -> {_tensor(out)}
  {body}
  return %y : {_tensor(out)}
}}
"""


def _named(case: Case, layout: str) -> tuple[str, list[list[int]]]:
    p, o, c, f, k = case.padded, case.out, case.c, case.f, case.k
    if layout == "NCHW":
        x, out = [1, c, p, p], [1, f, o, o]
        w = [c, k, k] if case.depthwise else [f, c, k, k]
        op = "linalg.depthwise_conv_2d_nchw_chw" if case.depthwise else "linalg.conv_2d_nchw_fchw"
    else:
        x, out = [1, p, p, c], [1, o, o, f]
        w = [k, k, c] if case.depthwise else [k, k, c, f]
        op = "linalg.depthwise_conv_2d_nhwc_hwc" if case.depthwise else "linalg.conv_2d_nhwc_hwcf"
    body = (f"%y = {op} {{dilations = dense<1> : tensor<2xi64>, strides = dense<{case.stride}> : tensor<2xi64>}} "
            f"ins(%x, %w : {_tensor(x)}, {_tensor(w)}) outs(%init : {_tensor(out)}) -> {_tensor(out)}")
    return _function([x, w], out, body).replace("#maps", ""), [x, w]


def _blocked(case: Case, block: int) -> tuple[str, list[list[int]]] | None:
    """NCHW{block}c as a generic: out[n, fo, oh, ow, fi] += x[n, co, s*oh+kh, s*ow+kw, ci]
    * w[fo, co, kh, kw, ci, fi] (TVM's OIHW{i}i{o}o kernel layout)."""
    if case.depthwise or case.c % block or case.f % block:
        return None
    p, o, k, s = case.padded, case.out, case.k, case.stride
    x = [1, case.c // block, p, p, block]
    w = [case.f // block, case.c // block, k, k, block, block]
    out = [1, case.f // block, o, o, block]
    dims = "(n, fo, oh, ow, fi, co, kh, kw, ci)"
    maps = (f"#mx = affine_map<{dims} -> (n, co, oh * {s} + kh, ow * {s} + kw, ci)>\n"
            f"#mw = affine_map<{dims} -> (fo, co, kh, kw, ci, fi)>\n"
            f"#my = affine_map<{dims} -> (n, fo, oh, ow, fi)>")
    iterators = ", ".join(['"parallel"'] * 5 + ['"reduction"'] * 4)
    body = (f"%y = linalg.generic {{indexing_maps = [#mx, #mw, #my], iterator_types = [{iterators}]}} "
            f"ins(%x, %w : {_tensor(x)}, {_tensor(w)}) outs(%init : {_tensor(out)}) {{\n"
            f"  ^bb0(%a: f32, %b: f32, %acc: f32):\n"
            f"    %m = arith.mulf %a, %b : f32\n    %r = arith.addf %acc, %m : f32\n"
            f"    linalg.yield %r : f32\n  }} -> {_tensor(out)}")
    return _function([x, w], out, body).replace("#maps", maps), [x, w]


def _onnx_ms(case: Case, repeat: int) -> float:
    groups = case.c if case.depthwise else 1
    w_shape = [case.f, case.c // groups, case.k, case.k]
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[case.stride] * 2, group=groups)
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, case.c, case.padded, case.padded]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, w_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((1, case.c, case.padded, case.padded), np.float32),
             "w": rng.standard_normal(w_shape, np.float32)}
    return measure(lambda: session.run(None, feeds), repeat=repeat, min_repeat_ms=100).median * 1e3


def _torch_ms(case: Case, repeat: int) -> float:
    groups = case.c if case.depthwise else 1
    x = torch.randn(1, case.c, case.padded, case.padded)
    w = torch.randn(case.f, case.c // groups, case.k, case.k)
    with torch.no_grad():
        return measure(lambda: torch.nn.functional.conv2d(x, w, stride=case.stride, groups=groups),
                       repeat=repeat, min_repeat_ms=100).median * 1e3


def _tilecraft_ms(source: str, shapes: list[list[int]], repeat: int) -> float:
    compiled = tilecraft.compile(source, opt_level=3, pipeline=tilecraft.cpu_pipeline("llvm", opt_level=0),
                                 keep_ir=False)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s, np.float32) for s in shapes]
    return measure(lambda: compiled(*args), repeat=repeat, min_repeat_ms=100).median * 1e3


def run(case: Case, repeat: int, block: int) -> str:
    ort_ms = _onnx_ms(case, repeat)
    torch_ms = _torch_ms(case, repeat)
    variants = {"NCHW": _named(case, "NCHW"), "NHWC": _named(case, "NHWC"),
                f"NCHW{block}c": _blocked(case, block)}
    cells = []
    for label, variant in variants.items():
        if variant is None:
            cells.append(f"{label} n/a")
            continue
        try:
            ms = _tilecraft_ms(*variant, repeat)
        except Exception as error:  # noqa: BLE001  (a variant that fails to compile is a result)
            cells.append(f"{label} failed ({type(error).__name__})")
            continue
        gflops = case.flops / ms / 1e6
        cells.append(f"{label} {ms:8.3f} ms {gflops:5.1f} GF/s x ort {ms / ort_ms:5.2f}")
    return (f"{case.name:<11} ort {ort_ms:7.3f} ms torch {torch_ms:8.3f} ms | " + " | ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {list(CASES)}")
    parser.add_argument("--repeat", type=int, default=5, help="timed repeats (median reported)")
    parser.add_argument("--block", type=int, default=16, help="channel block of the NCHW{c}c variant")
    args = parser.parse_args(argv)
    print(f"threads: {tilecraft.Target.parse('llvm').num_threads}")
    for name in args.cases.split(","):
        print(run(CASES[name.strip()], args.repeat, args.block), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
