"""CNN workloads under the default schedule (no tuning) against onnxruntime and numpy,
measured in the same run, calls alternating so that load drift hits both alike.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/cnn.py
    ... benchmarks/cnn.py --models mobilenetv2 --kernels none

Models (``--models``): a MobileNetV2-style network (tests/graph/graph_models.py, random
weights, 224x224), ResNet-50 (the onnx wheel's light zoo model, random weights) and a
pooling pair (max pool, global average): latency of tilecraft and onnxruntime and their
ratio, and a check of the output against onnxruntime.

Kernels (``--kernels``): single convolutions as they run inside those models after the
layout pass (NHWC, zero pad in the group, filters constant): GFLOPS, against numpy's
1024^3 f32 GEMM GFLOPS (OpenBLAS, both cores) timed in the same rounds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import tilecraft
from tilecraft.runtime.timing import measure

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "graph"))

import graph_models  # noqa: E402
from graph_passes import resnet50  # noqa: E402


def mobilenetv2():
    model = graph_models.mobilenet_v2(size=224)
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    return model, {"x": x}


def pooling():
    """ResNet's stem pooling then a global average: MaxPool 3x3 stride 2 (pad 1) on
    1x64x112x112, GlobalAveragePool (NCHW in the model, NHWC inside tilecraft)."""
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["p"], ["y"])]
    graph = helper.make_graph(
        nodes, "pooling", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 112, 112])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 1, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.random.default_rng(1).standard_normal((1, 64, 112, 112)).astype(np.float32)
    return model, {"x": x}


MODELS = {"mobilenetv2": mobilenetv2, "resnet50": resnet50, "pooling": pooling}

# (name, input HxW, input channels, output channels or None for depthwise, kernel, stride).
KERNELS = {
    "res3x3-56": (56, 64, 64, 3, 1),
    "res3x3-28": (28, 128, 128, 3, 1),
    "res3x3-14": (14, 256, 256, 3, 1),
    "res3x3-7": (7, 512, 512, 3, 1),
    "res1x1-56": (56, 64, 256, 1, 1),
    "pw1x1-112": (112, 32, 16, 1, 1),
    "pw1x1-56": (56, 24, 144, 1, 1),
    "pw1x1-14": (14, 576, 96, 1, 1),
    "dw3x3-112": (112, 96, None, 3, 2),
    "dw3x3-56": (56, 144, None, 3, 1),
    "dw3x3-14": (14, 576, None, 3, 1),
}


def conv_source(size: int, cin: int, cout: int | None, k: int, stride: int,
                weights: np.ndarray) -> str:
    """One NHWC conv (depthwise when ``cout`` is None) with its zero pad, filters a constant."""
    pad = k // 2
    out = (size + 2 * pad - k) // stride + 1
    padded = size + 2 * pad
    channels = cin if cout is None else cout
    hex_weights = "0x" + weights.astype("<f4").tobytes().hex().upper()
    if cout is None:
        w_type = f"tensor<{k}x{k}x{cin}xf32>"
        op = "linalg.depthwise_conv_2d_nhwc_hwc"
    else:
        w_type = f"tensor<{k}x{k}x{cin}x{cout}xf32>"
        op = "linalg.conv_2d_nhwc_hwcf"
    return f"""
func.func @conv(%x: tensor<1x{size}x{size}x{cin}xf32>) -> tensor<1x{out}x{out}x{channels}xf32> {{
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<"{hex_weights}"> : {w_type}
  %padded = tensor.pad %x low[0, {pad}, {pad}, 0] high[0, {pad}, {pad}, 0] {{
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  }} : tensor<1x{size}x{size}x{cin}xf32> to tensor<1x{padded}x{padded}x{cin}xf32>
  %empty = tensor.empty() : tensor<1x{out}x{out}x{channels}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x{out}x{out}x{channels}xf32>) -> tensor<1x{out}x{out}x{channels}xf32>
  %y = {op} {{dilations = dense<1> : tensor<2xi64>, strides = dense<{stride}> : tensor<2xi64>}}
       ins(%padded, %w : tensor<1x{padded}x{padded}x{cin}xf32>, {w_type})
       outs(%init : tensor<1x{out}x{out}x{channels}xf32>) -> tensor<1x{out}x{out}x{channels}xf32>
  return %y : tensor<1x{out}x{out}x{channels}xf32>
}}
"""


def reference_conv(x: np.ndarray, w: np.ndarray, stride: int, depthwise: bool) -> np.ndarray:
    k = w.shape[0]
    pad = k // 2
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    out = (x.shape[1] + 2 * pad - k) // stride + 1
    y = 0.0
    for i in range(k):
        for j in range(k):
            window = xp[:, i:i + stride * out:stride, j:j + stride * out:stride, :]
            y = y + (window * w[i, j] if depthwise else window @ w[i, j])
    return y


def interleaved(functions: dict[str, object], rounds: int) -> dict[str, float]:
    """Median seconds per call of each function, measured round-robin."""
    samples: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(rounds):
        for name, fn in functions.items():
            samples[name].append(measure(fn, repeat=1, min_repeat_ms=200).per_call[0])
    return {name: float(np.median(values)) for name, values in samples.items()}


def _matches(got: np.ndarray, reference: np.ndarray) -> bool:
    scale = float(np.abs(reference).max()) if reference.size else 0.0
    return got.shape == reference.shape and np.allclose(got, reference, rtol=1e-3, atol=1e-3 * scale)


def run_model(name: str, rounds: int) -> str:
    model, feeds = MODELS[name]()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    reference = session.run(None, feeds)
    start = time.perf_counter()
    compiled = tilecraft.compile(model, opt_level=3, keep_ir=False)
    compile_s = time.perf_counter() - start
    inputs = list(feeds.values())
    got = compiled(*inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    ok = all(_matches(g, r) for g, r in zip(got, reference))
    times = interleaved({"tilecraft": lambda: compiled(*inputs),
                         "onnxruntime": lambda: session.run(None, feeds)}, rounds)
    ms, ort_ms = times["tilecraft"] * 1e3, times["onnxruntime"] * 1e3
    return (f"{name:<12} tilecraft {ms:8.2f} ms  onnxruntime {ort_ms:8.2f} ms  ratio x{ms / ort_ms:5.2f}  "
            f"(compile {compile_s:5.1f} s, loop nests {compiled.kernel_count}, "
            f"{'ok' if ok else 'MISMATCH'})")


def run_kernels(names: list[str], rounds: int) -> list[str]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    lines = []
    for name in names:
        size, cin, cout, k, stride = KERNELS[name]
        depthwise = cout is None
        w = rng.standard_normal((k, k, cin) if depthwise else (k, k, cin, cout)).astype(np.float32)
        x = rng.standard_normal((1, size, size, cin)).astype(np.float32)
        compiled = tilecraft.compile(conv_source(size, cin, cout, k, stride, w), opt_level=3,
                                     keep_ir=False)
        expected = reference_conv(x, w, stride, depthwise)
        ok = _matches(compiled(x), expected)
        out = expected.shape[1]
        flops = 2 * out * out * k * k * cin * (1 if depthwise else cout)
        times = interleaved({"conv": lambda: compiled(x), "gemm": lambda: a @ b}, rounds)
        conv_gflops = flops / times["conv"] / 1e9
        gemm_gflops = 2 * 1024 ** 3 / times["gemm"] / 1e9
        lines.append(f"{name:<10} {conv_gflops:8.1f} GFLOPS  numpy GEMM {gemm_gflops:7.1f} GFLOPS  "
                     f"ratio {conv_gflops / gemm_gflops:5.2f}  ({times['conv'] * 1e3:7.3f} ms, "
                     f"{'ok' if ok else 'MISMATCH'})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help=f"subset of {list(MODELS)} or none")
    parser.add_argument("--kernels", default=",".join(KERNELS), help=f"subset of {list(KERNELS)} or none")
    parser.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (median)")
    args = parser.parse_args(argv)
    slowed = [v for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ]
    if slowed:
        print(f"warning: {', '.join(slowed)} set: numpy runs slower than it can")
    print(f"threads: {tilecraft.Target.parse('llvm').num_threads}")
    for name in filter(None, args.models.replace("none", "").split(",")):
        print(run_model(name, args.rounds), flush=True)
    for line in run_kernels(list(filter(None, args.kernels.replace("none", "").split(","))), args.rounds):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
