"""Convolution register tiles: sized from the register file with the last pixel tile peeled
(the default, schedule/conv_plan.py ``conv_register_tile`` / ``register_row_tile``) against
the former rule (the largest pixel count up to 8 that divides the row, then as many vectors
as fit), one thread, process CPU time, builds alternating in blocks in one process,
onnxruntime (one thread) in the same run.

    .venv/bin/python benchmarks/conv_tiles.py                       # single convolutions
    .venv/bin/python benchmarks/conv_tiles.py --convs "" --models deeplab_aspp,mobilenet_v2

The "divisor" build patches ``conv_plan.conv_register_tile`` and ``conv_plan.register_row_tile``
back to the former rule in this process (no other change); the frontend no longer widens
rows that have no 4-8 pixel divisor (the peeled last tile made that unnecessary), so neither
build does. Every build skips the compile cache; every output is checked
against onnxruntime first. No thresholds: the figures go into docs/performance.md
("Convolution register tiles on AVX2").
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TILECRAFT_NUM_THREADS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))

import numpy as np  # noqa: E402

from tilecraft.schedule import conv_plan  # noqa: E402
from tilecraft.schedule.op_schedule import largest_divisor, vector_tile  # noqa: E402
from rule_builds import builds_under_rules, checked_calls, one_thread_session  # noqa: E402


def _divisor_conv_register_tile(width, out_channels, in_channels, lanes, registers, heavy_pointwise):
    """The former ``conv_register_tile``: pixels the largest divisor of the row up to 8."""
    pixels = largest_divisor(width, 8)
    step = largest_divisor(in_channels, 4) if in_channels else None
    for vectors in (4, 2, 1):
        if vectors > (4 if heavy_pointwise else 2):
            continue
        if out_channels % (vectors * lanes) or pixels * vectors + vectors + 1 > registers:
            continue
        if step is not None:
            while step > 1 and pixels * vectors + step * vectors + 1 > registers:
                step = largest_divisor(in_channels, step - 1)
        return pixels, vectors * lanes, step
    part = min(lanes, out_channels & -out_channels)
    return pixels, vector_tile(out_channels, part, lanes // part), step


NEW = (conv_plan.conv_register_tile, conv_plan.register_row_tile)
RULES = {
    "divisor": (_divisor_conv_register_tile, lambda width, vectors, registers, depthwise=False:
                largest_divisor(width, 8)),
    "peeled": NEW,
}


def _rules(rules) -> None:
    conv_plan.conv_register_tile, conv_plan.register_row_tile = rules


def conv_model(size: int, channels: int, depthwise: bool = False):
    """A "same" 3x3 Conv with bias and ReLU, NCHW, ``channels`` -> ``channels``."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(size * 1000 + channels)
    groups = channels if depthwise else 1
    w = (rng.standard_normal((channels, channels // groups, 3, 3)) / np.sqrt(9 * channels / groups)).astype(np.float32)
    b = rng.standard_normal(channels).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4, group=groups),
             helper.make_node("Relu", ["c"], ["y"])]
    shape = [1, channels, size, size]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    flops = 2 * 9 * size * size * channels * (1 if depthwise else channels)
    return model, {"x": rng.standard_normal(shape).astype(np.float32)}, flops


def suite_model(name: str):
    import onnx

    sys.path.insert(0, HERE)
    import public_suite

    module, inputs = public_suite.build(name)
    model = onnx.load_from_string(public_suite.export_onnx(module, inputs))
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    return model, {n: x.numpy() for n, x in zip(names, inputs)}, 0


def _cpu_ms(fn, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e3


def run(name: str, model, feeds: dict, flops: int, labels: list[str], blocks: int, calls: int) -> str:
    builds = builds_under_rules(model, {label: RULES[label] for label in labels}, _rules, NEW)
    calls_of = checked_calls(builds, one_thread_session(model), feeds)
    times: dict[str, list[float]] = {label: [] for label in calls_of}
    for _ in range(blocks):
        for label, fn in calls_of.items():
            times[label].append(_cpu_ms(fn, calls))
    cells = []
    for label, t in times.items():
        rate = f", {flops / np.median(t) / 1e6:.0f} GFLOPS" if flops else ""
        cells.append(f"{label} {np.median(t):.2f} ms (min {min(t):.2f}{rate})")
    ratio = np.median(times["peeled"]) / np.median(times["divisor"]) if "divisor" in times else float("nan")
    return f"{name}: " + "; ".join(cells) + f"; peeled/divisor {ratio:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--convs", default="65x128,33x256,13x256,56x64,32x256,dw65x128",
                        help="single 3x3 convs SIZExCHANNELS (dw: depthwise), comma-separated")
    parser.add_argument("--models", default="", help="public_suite models, comma-separated")
    parser.add_argument("--blocks", type=int, default=9)
    parser.add_argument("--calls", type=int, default=3, help="calls per timed block")
    args = parser.parse_args(argv)
    labels = ["divisor", "peeled"]
    for case in [c for c in args.convs.split(",") if c]:
        depthwise = case.startswith("dw")
        size, channels = map(int, case.removeprefix("dw").split("x"))
        name = f"{'depthwise ' if depthwise else ''}3x3 {size}x{size} {channels}ch"
        print(run(name, *conv_model(size, channels, depthwise), labels, args.blocks, args.calls), flush=True)
    for model_name in [m for m in args.models.split(",") if m]:
        print(run(model_name, *suite_model(model_name), labels, args.blocks, 1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
