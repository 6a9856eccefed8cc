"""int8 ResNet-50 (issue #22): onnxruntime's quantize_static (QDQ by default, or QOperator;
per-channel int8 weights, uint8 activations) through tilecraft, beside onnxruntime's int8 and
tilecraft's own f32 build.

    .venv/bin/python benchmarks/int8_resnet50.py [--rounds 5] [--calibration 2] [--format QOperator]

QOperator models hold QLinearConv and onnxruntime's com.microsoft ops (QLinearAveragePool,
QGemm, QLinearSoftmax), which tilecraft imports as float ops between Dequantize and Quantize
(frontend/onnx/contrib.py).

The model: the onnx wheel's light zoo ResNet-50 with random weights (end_to_end.py's), upgraded
to opset 13 (per-channel DequantizeLinear needs it), prepared by onnxruntime's
``quant_pre_process`` (BatchNormalization folded into the convolutions) and quantized with
``--calibration`` random images. Printed: tilecraft's compile time for the QDQ model, its
largest difference from onnxruntime's int8 output (a softmax; one uint8 step is 1/255), whether
the top classes agree, then the median CPU time per image over alternating rounds with one
thread each (TILECRAFT_NUM_THREADS=1, intra_op_num_threads=1). The f32 build compiles the
prepared float model. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.version_converter
import onnxruntime
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import end_to_end  # noqa: E402

import tilecraft  # noqa: E402


class _RandomImages(CalibrationDataReader):
    def __init__(self, name: str, count: int) -> None:
        rng = np.random.default_rng(1)
        self.items = iter([{name: rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(count)])

    def get_next(self) -> dict | None:
        return next(self.items, None)


def quantized_resnet50(folder: str, calibration: int,
                       quant_format: str = "QDQ") -> tuple[onnx.ModelProto, onnx.ModelProto, str]:
    """(prepared f32 model, its int8 version in ``quant_format`` (QDQ or QOperator), input name)."""
    model = onnx.version_converter.convert_version(end_to_end.resnet50().model, 13)
    raw, prepared, quantized = (os.path.join(folder, f) for f in ("raw.onnx", "f32.onnx", "int8.onnx"))
    onnx.save(model, raw)
    quant_pre_process(raw, prepared, skip_symbolic_shape=True)
    name = model.graph.input[0].name
    quantize_static(prepared, quantized, _RandomImages(name, calibration), quant_format=QuantFormat[quant_format],
                    per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return onnx.load(prepared), onnx.load(quantized), name


def main() -> None:
    # Here, not at import: tests import this module for its model builder, and the
    # setting would leak into every later test of their process. Read when the
    # target is parsed and when the runtime starts its threads, both later.
    os.environ.setdefault("TILECRAFT_NUM_THREADS", "1")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calibration", type=int, default=2, help="random calibration images")
    parser.add_argument("--format", choices=("QDQ", "QOperator"), default="QDQ", help="quantize_static's quant_format")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        f32, int8, name = quantized_resnet50(folder, args.calibration, args.format)
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(int8.SerializeToString(), options, providers=["CPUExecutionProvider"])
    expected = session.run(None, {name: x})[0]
    start = time.process_time()
    compiled = tilecraft.compile(int8)
    print(f"{args.format} ResNet-50: {len(int8.graph.node)} nodes, tilecraft compile {time.process_time() - start:.1f} s CPU")
    got = compiled(x)
    got = got[0] if isinstance(got, tuple) else got  # the softmax (end_to_end also exposes the logits)
    print(f"  vs onnxruntime int8: max |diff| {float(np.abs(got - expected).max()):.4f} (1/255 = 0.0039), "
          f"top class agrees: {int(got.argmax()) == int(expected.argmax())}")
    compiled_f32 = tilecraft.compile(f32)
    runners = {"tilecraft int8": lambda: compiled(x), "onnxruntime int8": lambda: session.run(None, {name: x}),
               "tilecraft f32": lambda: compiled_f32(x)}
    for run in runners.values():
        run()
    cpu: dict[str, list[float]] = {label: [] for label in runners}
    for _ in range(args.rounds):
        for label, run in runners.items():
            start = time.process_time()
            run()
            cpu[label].append(time.process_time() - start)
    medians = {label: statistics.median(times) for label, times in cpu.items()}
    print(f"  CPU ms per image, one thread each, median of {args.rounds} alternating rounds "
          f"(load average {os.getloadavg()[0]:.1f}):")
    for label, value in medians.items():
        print(f"    {label:<17} {value * 1e3:8.1f}")
    print(f"  tilecraft int8 / onnxruntime int8: {medians['tilecraft int8'] / medians['onnxruntime int8']:.2f}x "
          f"(goal <= 1.0); tilecraft f32 / tilecraft int8: "
          f"{medians['tilecraft f32'] / medians['tilecraft int8']:.2f}x (goal >= 1.5)")


if __name__ == "__main__":
    main()
