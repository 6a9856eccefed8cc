"""Grouped convolution layers (ResNeXt, RegNet) against onnxruntime, one thread, CPU time.

    # this tree's kernels, as packages, then timed beside onnxruntime:
    .venv/bin/python benchmarks/grouped_convs.py --build /tmp/gc/new
    .venv/bin/python benchmarks/grouped_convs.py --time /tmp/gc/new
    # an A/B: build the parent commit's packages with that tree first on PYTHONPATH, then
    .venv/bin/python benchmarks/grouped_convs.py --time /tmp/gc/old /tmp/gc/new

Each layer is an ONNX ``Conv`` (grouped, 3x3, padding 1) followed by ``BatchNormalization``
and ``Relu``, as the blocks of both families have it, on one NCHW image. ``--layers`` also
takes the public suite's whole ``regnet`` and ``resnext`` (benchmarks/public_suite.py's
builders and exporter), so that two trees' builds of a model run in one process. ``--build`` compiles
every layer with ``tilecraft.compile(package_path=...)`` (one thread: TILECRAFT_NUM_THREADS=1)
and checks it against onnxruntime; ``--time`` loads the packages of one or more builds (numpy
and ctypes only, so two trees' kernels run in one process) and times them with onnxruntime
in alternating blocks by process CPU time (runtime/timing.py's ``alternating``): only ratios
from one run carry, the more so on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

# Seconds of sleep before each runner's turn (onnxruntime's pool threads spin after a run).
_PAUSE_S = 0.02
# name: (channels, channels per group, input side, stride)
LAYERS = {
    "resnext_4pg_56": (128, 4, 56, 1),       # ResNeXt-50 32x4d, stage 1
    "resnext_8pg_56s2": (256, 8, 56, 2),     # stage 2's first block (stride 2)
    "resnext_16pg_14": (512, 16, 14, 1),     # stage 3
    "resnext_32pg_7": (1024, 32, 7, 1),      # stage 4
    "regnet_8pg_28": (104, 8, 28, 1),        # RegNet: 8 per group
    "regnet_16pg_14": (256, 16, 14, 1),
    "regnet_16pg_56": (224, 16, 56, 1),
    "regnet_24pg_28": (192, 24, 28, 1),
    "two_pg_28": (64, 2, 28, 1),
    "sixtyfour_pg_14": (256, 64, 14, 1),
}


def layer_model(channels: int, per_group: int, side: int, stride: int, seed: int = 0):
    """Conv (groups of ``per_group``) -> BatchNormalization -> Relu as an ONNX model."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    weights = {
        "w": (rng.standard_normal((channels, per_group, 3, 3)) / np.sqrt(9 * per_group)).astype(np.float32),
        "scale": rng.uniform(0.5, 1.5, channels).astype(np.float32),
        "shift": rng.uniform(-0.2, 0.2, channels).astype(np.float32),
        "mean": rng.uniform(-0.1, 0.1, channels).astype(np.float32),
        "var": rng.uniform(0.5, 1.5, channels).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["conv"], group=channels // per_group, kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[stride, stride]),
        helper.make_node("BatchNormalization", ["conv", "scale", "shift", "mean", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["y"]),
    ]
    out_side = (side - 1) // stride + 1
    graph = helper.make_graph(
        nodes, "grouped_layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, side, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, out_side, out_side])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


# Whole models of the public suite (benchmarks/public_suite.py) timed like the layers.
SUITE_MODELS = ("regnet", "resnext")


def _suite():
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import public_suite

    return public_suite


def _model_bytes(name: str) -> bytes:
    if name in SUITE_MODELS:
        suite = _suite()
        return suite.export_onnx(*suite.build(name))
    return layer_model(*LAYERS[name]).SerializeToString()


def _input_name(name: str) -> str:
    return "input0" if name in SUITE_MODELS else "x"


def _input(name: str) -> np.ndarray:
    if name in SUITE_MODELS:
        return np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    channels, _, side, _ = LAYERS[name]
    return np.random.default_rng(1).standard_normal((1, channels, side, side)).astype(np.float32)


def _session(name: str, model: bytes | None = None):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(model or _model_bytes(name), options, providers=["CPUExecutionProvider"])


def build(folder: str, names: list[str]) -> None:
    import tilecraft

    os.makedirs(folder, exist_ok=True)
    for name in names:
        started = time.perf_counter()
        import onnx

        model = _model_bytes(name)
        compiled = tilecraft.compile(onnx.load_from_string(model), package_path=os.path.join(folder, f"{name}.tar"))
        x = _input(name)
        expected = _session(name, model).run(None, {_input_name(name): x})[0]
        np.testing.assert_allclose(compiled(x), expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())
        print(f"{name}: built and checked in {time.perf_counter() - started:.1f} s", flush=True)


def time_builds(folders: list[str], names: list[str], repeat: int) -> None:
    import tilecraft.runtime
    from tilecraft.runtime.timing import alternating

    labels = [os.path.basename(os.path.normpath(f)) for f in folders]
    print(f"{'layer':18s} " + " ".join(f"{label + ' ms':>10s}" for label in labels) + "  onnxruntime ms  "
          + " ".join(f"{label + '/ort':>9s}" for label in labels), flush=True)
    for name in names:
        x = _input(name)
        session = _session(name)
        feed = {_input_name(name): x}
        runners = {"onnxruntime": lambda: session.run(None, feed)}
        for label, folder in zip(labels, folders):
            package = tilecraft.runtime.load(os.path.join(folder, f"{name}.tar"))
            runners[label] = (lambda p: lambda: p(x))(package)
        seconds = alternating(runners, repeat, clock=time.process_time, pause_s=_PAUSE_S)
        ort = seconds["onnxruntime"]
        print(f"{name:18s} " + " ".join(f"{seconds[label] * 1e3:10.3f}" for label in labels)
              + f"  {ort * 1e3:14.3f}  " + " ".join(f"{seconds[label] / ort:9.2f}" for label in labels), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", metavar="FOLDER", help="compile every layer into FOLDER as packages")
    parser.add_argument("--time", metavar="FOLDER", nargs="+", help="time the packages of these builds")
    parser.add_argument("--layers", default=",".join(LAYERS),
                        help="comma-separated layer names, or the suite's " + ", ".join(SUITE_MODELS))
    parser.add_argument("--repeat", type=int, default=9, help="alternating rounds")
    args = parser.parse_args()
    os.environ["TILECRAFT_NUM_THREADS"] = "1"
    names = args.layers.split(",")
    if args.build:
        build(args.build, names)
    if args.time:
        time_builds(args.time, names, args.repeat)


if __name__ == "__main__":
    main()
