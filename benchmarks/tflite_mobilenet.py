"""A MobileNetV2 TFLite model (float and full int8) compiled by tilecraft, timed against
LiteRT's interpreter on the same inputs.

    .venv/bin/python benchmarks/tflite_mobilenet.py
    .venv/bin/python benchmarks/tflite_mobilenet.py --resolution 160 --alpha 0.5 --repeat 15

The model is ``keras.applications.MobileNetV2`` with random weights (``weights=None``:
nothing is downloaded), converted by ``tf.lite.TFLiteConverter`` as float and as full int8
(logits: no softmax; batch-norm statistics set from random images;
calibrated on random images, float inputs and outputs through QUANTIZE/DEQUANTIZE). Each
``.tflite`` is compiled by ``tilecraft.compile`` and run beside LiteRT's interpreter
(``ai_edge_litert``, its default XNNPACK delegate, ``num_threads`` = tilecraft's thread
count, 2 by default) with calls alternating in blocks, a pause before each runtime's turn
(``runtime.timing.alternating``: the medians of one run, so only the ratio carries on a
shared machine), then again on the process's CPU time (both runtimes' threads, spinning
included: steadier when other jobs take the cores). Outputs are compared first: float must be within 1e-3 of the largest
logit (else the exit status is 1); for int8, whose rounding differences from TFLite's
fixed-point kernels compound over 53 layers, the table gives the largest difference in
output quantization steps and the share of logits within one step. Prints one table.
No thresholds: the figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TILECRAFT_NUM_THREADS", "2")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import tilecraft  # noqa: E402
import mlir.ir  # noqa: E402,F401  (MLIR's libraries before TensorFlow's: the other order crashes)
from tilecraft.frontend.tflite.flatbuffer import read_model  # noqa: E402
from tilecraft.runtime import timing  # noqa: E402


def convert(folder: Path, resolution: int, alpha: float, int8: bool) -> Path:
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(input_shape=(resolution, resolution, 3), alpha=alpha, weights=None,
                                             classifier_activation=None)
    # Batch-norm statistics of one batch of random images (momentum 0: the batch's own), so
    # activations keep their scale through the 53 layers as a trained model's do; with the
    # initial statistics (mean 0, variance 1) they vanish (logits near 1e-11, all-zero int8).
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = 0.0
    model(np.random.default_rng(3).standard_normal((4, resolution, resolution, 3)).astype(np.float32), training=True)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        rng = np.random.default_rng(1)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: (
            [rng.standard_normal((1, resolution, resolution, 3)).astype(np.float32)] for _ in range(16))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    path = folder / f"mobilenetv2_{resolution}_{alpha}_{'int8' if int8 else 'float'}.tflite"
    path.write_bytes(converter.convert())
    return path


def output_step(path: Path) -> float:
    """The quantization step of the int8 tensor the final DEQUANTIZE reads (0 if none)."""
    graph = read_model(path.read_bytes(), str(path))
    for op in graph.operators:
        if op.name == "DEQUANTIZE" and op.outputs[0] in graph.outputs:
            quantization = graph.tensors[op.inputs[0]].quantization
            return float(quantization.scale.reshape(-1)[0]) if quantization is not None else 0.0
    return 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=11, help="alternating rounds (medians over them)")
    parser.add_argument("--pause", type=float, default=0.05, help="seconds of sleep before each runtime's turn")
    parser.add_argument("--variants", default="float,int8")
    args = parser.parse_args(argv)
    from ai_edge_litert.interpreter import Interpreter

    threads = int(os.environ["TILECRAFT_NUM_THREADS"])
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for variant in args.variants.split(","):
            path = convert(Path(folder), args.resolution, args.alpha, variant == "int8")
            start = time.perf_counter()
            compiled = tilecraft.compile(str(path))
            compile_s = time.perf_counter() - start
            interpreter = Interpreter(model_path=str(path), num_threads=threads)
            interpreter.allocate_tensors()
            (source,), (sink,) = interpreter.get_input_details(), interpreter.get_output_details()
            image = np.random.default_rng(2).standard_normal(source["shape"]).astype(np.float32)

            def litert() -> np.ndarray:
                interpreter.set_tensor(source["index"], image)
                interpreter.invoke()
                return interpreter.get_tensor(sink["index"])

            expected, got = litert().copy(), compiled(image)
            difference = np.abs(got.astype(np.float64) - expected)
            error = float(difference.max())
            step = output_step(path) if variant == "int8" else 0.0
            steps = f"{error / step:.0f} / {100 * np.mean(difference <= step * 1.001):.1f}%" if step else "-"
            ok = bool(step) or error <= 1e-3 * float(np.abs(expected).max())
            runners = {"tilecraft": lambda: compiled(image), "litert": litert}
            medians = timing.alternating(runners, args.repeat, pause_s=args.pause)
            cpu = timing.alternating(runners, args.repeat, pause_s=args.pause, clock=time.process_time)
            rows.append((variant, path.stat().st_size, compile_s, medians["tilecraft"], medians["litert"],
                         cpu["tilecraft"] / cpu["litert"],
                         float(np.abs(expected).max()), error, steps, ok))
    print(f"MobileNetV2 {args.resolution}x{args.resolution} alpha {args.alpha}, batch 1, {threads} threads "
          f"(LiteRT: XNNPACK delegate), medians of {args.repeat} alternating rounds")
    print(f"{'model':<7} {'file KB':>8} {'compile s':>10} {'tilecraft ms':>13} {'LiteRT ms':>10} {'ratio':>6} "
          f"{'CPU-time ratio':>14} "
          f"{'max |LiteRT|':>12} {'max |diff|':>11} {'int8 steps: max / within 1':>27} ok")
    for variant, size, compile_s, ours, theirs, cpu_ratio, magnitude, error, steps, ok in rows:
        print(f"{variant:<7} {size / 1024:>8.0f} {compile_s:>10.1f} {ours * 1e3:>13.2f} {theirs * 1e3:>10.2f} "
              f"{ours / theirs:>6.2f} {cpu_ratio:>14.2f} {magnitude:>12.2e} {error:>11.2e} {steps:>27} {'yes' if ok else 'NO'}")
    return 0 if all(row[-1] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
