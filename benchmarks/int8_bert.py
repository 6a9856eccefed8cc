"""Dynamically quantized BERT-shaped encoder (issue #22, fast int8): onnxruntime's
``quantize_dynamic`` (MatMulInteger with int8 weights, DynamicQuantizeLinear on the
activations: how transformers are usually quantized for CPUs) through tilecraft, beside
onnxruntime's int8 and both f32 builds.

    .venv/bin/python benchmarks/int8_bert.py [--layers 2] [--repeat 15]

The model: end_to_end.py's BERT-base-shaped encoder (128 tokens, hidden 768, FFN 3072).
tilecraft runs the quantized projections as u8 x s8 dot-product kernels
(pipelines/tensor/int8_matmul.py) on CPUs with AVX-512 VNNI, else as i32 matmuls. Printed: the
largest difference from onnxruntime's int8 output (relative to its largest magnitude),
then milliseconds per call over alternating calls (end_to_end.alternating), all runtimes
with this machine's threads, and the ratios. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime
from onnxruntime.quantization import QuantType, quantize_dynamic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import end_to_end  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.pipelines.target import Target  # noqa: E402


def quantized_bert(layers: int) -> tuple[end_to_end.Case, onnx.ModelProto]:
    """(the f32 case, its dynamically quantized model: int8 weights, per tensor)."""
    case = end_to_end.bert(layers)
    with tempfile.TemporaryDirectory() as folder:
        f32, int8 = (os.path.join(folder, f) for f in ("f32.onnx", "int8.onnx"))
        onnx.save(case.model, f32)
        quantize_dynamic(f32, int8, weight_type=QuantType.QInt8)
        return case, onnx.load(int8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    case, int8 = quantized_bert(args.layers)
    ops = sorted({n.op_type for n in int8.graph.node} & {"MatMulInteger", "DynamicQuantizeLinear"})
    print(f"BERT-shaped encoder, {args.layers} layers, dynamically quantized ({', '.join(ops)}); "
          f"AVX-512 VNNI: {Target.parse('llvm').has_avx512_vnni}")
    sessions = {label: onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
                for label, model in (("ort int8", int8), ("ort f32", case.model))}
    compiled = {"tilecraft int8": tilecraft.compile(int8), "tilecraft f32": tilecraft.compile(case.model)}
    feeds = case.feeds
    expected = sessions["ort int8"].run(None, feeds)[0]
    got = compiled["tilecraft int8"](**feeds)
    got = got[0] if isinstance(got, tuple) else got
    scale = float(np.abs(expected).max())
    print(f"  tilecraft int8 vs onnxruntime int8: max |diff| {float(np.abs(got - expected).max()) / scale:.2e} "
          f"of the output's largest magnitude")
    runners = {label: (lambda m=m: m(**feeds)) for label, m in compiled.items()}
    runners.update({label: (lambda s=s: s.run(None, feeds)) for label, s in sessions.items()})
    times = end_to_end.alternating(runners, args.repeat, pause_s=0.1)
    for label, seconds in times.items():
        print(f"    {label:<15} {seconds * 1e3:8.2f} ms")
    print(f"  tilecraft int8 / onnxruntime int8: {times['tilecraft int8'] / times['ort int8']:.2f}x; "
          f"tilecraft f32 / tilecraft int8: {times['tilecraft f32'] / times['tilecraft int8']:.2f}x; "
          f"onnxruntime f32 / onnxruntime int8: {times['ort f32'] / times['ort int8']:.2f}x")


if __name__ == "__main__":
    main()
