"""One-vector convolution register tiles on odd rows: up to half the register file (the
default, schedule/conv_plan.py ``one_vector_row_tile``) against the former bound of 8
pixels, one thread, process CPU time, builds alternating in blocks in one process,
onnxruntime (one thread) in the same blocks.

    .venv/bin/python benchmarks/one_vector_tiles.py                     # single convolutions
    .venv/bin/python benchmarks/one_vector_tiles.py --convs "" --models odd_extents,mobilenet_v2

A convolution whose filters make an odd number of vectors (80 = 5 x 16, 144 = 9 x 16 on
AVX-512), or fewer than two, has one-vector register tiles only. The "eight" build patches
``conv_plan.one_vector_row_tile`` back to the former rule (``register_row_tile`` with its
8-pixel bound) in this process, no other change. Every build skips the compile cache and is
checked against onnxruntime first. Printed per case: the median CPU ms per call of each build
and onnxruntime, and the median of the per-block ratios default/eight with their range. No
thresholds: the figures go into docs/performance.md ("Odd rows").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TILECRAFT_NUM_THREADS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from tilecraft.schedule import conv_plan  # noqa: E402
from rule_builds import builds_under_rules, checked_calls, one_thread_session  # noqa: E402

DEFAULT = conv_plan.one_vector_row_tile
RULES = {"eight": lambda width, registers: conv_plan.register_row_tile(width, 1, registers), "default": DEFAULT}


def _rules(rule) -> None:
    conv_plan.one_vector_row_tile = rule


def conv_model(size: int, cin: int, cout: int, kernel: int, stride: int, act: str = "relu"):
    """A Conv (padding ``kernel // 2``) with bias and ReLU (``act`` "relu") or SiLU ("silu":
    the epilogue with the most temporaries), NCHW, ``size`` x ``size`` outputs."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(size * 1000 + cin + cout)
    side = (size - 1) * stride + 1
    w = (rng.standard_normal((cout, cin, kernel, kernel)) / np.sqrt(kernel * kernel * cin)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[kernel] * 2, pads=[kernel // 2] * 4,
                              strides=[stride] * 2)]
    if act == "silu":
        nodes += [helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
    else:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    graph = helper.make_graph(nodes, "conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, side, side])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, size, size])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": rng.standard_normal((1, cin, side, side)).astype(np.float32)}


def suite_model(name: str):
    import onnx

    import public_suite

    module, inputs = public_suite.build(name)
    model = onnx.load_from_string(public_suite.export_onnx(module, inputs))
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    return model, {n: x.numpy() for n, x in zip(names, inputs)}


def _cpu_ms(fn, calls: int) -> float:
    fn()  # untimed: whatever ran before leaves caches as it likes
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e3


def alternating_blocks(name: str, calls_of: dict, blocks: int, new: str, old: str) -> str:
    """CPU ms per call of each build in ``blocks`` blocks of about 20 ms, the order reversed
    every other block; the line names each build's median and ``new``/``old``'s per-block
    ratio (median and range)."""
    counts = {label: max(1, int(20 / max(_cpu_ms(fn, 2), 1e-3))) for label, fn in calls_of.items()}
    times: dict[str, list[float]] = {label: [] for label in calls_of}
    for block in range(blocks):
        order = list(calls_of) if block % 2 == 0 else list(reversed(calls_of))
        for label in order:
            times[label].append(_cpu_ms(calls_of[label], counts[label]))
    ratios = [n / o for n, o in zip(times[new], times[old])]
    cells = [f"{label} {statistics.median(t):.4f} ms" for label, t in times.items()]
    return (f"{name}: " + "; ".join(cells)
            + f"; {new}/{old} {statistics.median(ratios):.3f} (blocks {min(ratios):.3f}-{max(ratios):.3f})")


def run(name: str, model, feeds: dict, blocks: int) -> str:
    builds = builds_under_rules(model, RULES, _rules, DEFAULT)
    return alternating_blocks(name, checked_calls(builds, one_thread_session(model), feeds), blocks,
                              "default", "eight")


def run_cases(argv: "list[str] | None", description: str, default_convs: str, run) -> int:
    """The command line both tile A/Bs share: ``--convs`` single convolutions
    (SIZExCINxCOUTxKERNELsSTRIDE[silu]) and ``--models`` suite models, each printed by ``run``."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--convs", default=default_convs,
                        help="single convs SIZExCINxCOUTxKERNELsSTRIDE[silu] (SIZE: output rows and columns; "
                             "silu: SiLU instead of ReLU after the bias)")
    parser.add_argument("--models", default="", help="public_suite models, comma-separated")
    parser.add_argument("--blocks", type=int, default=9)
    args = parser.parse_args(argv)
    for case in [c for c in args.convs.split(",") if c]:
        act = "silu" if case.endswith("silu") else "relu"
        shape, stride = case.removesuffix("silu").split("s")
        size, cin, cout, kernel = map(int, shape.split("x"))
        print(run(f"{kernel}x{kernel} {size}x{size} {cin}->{cout} stride {stride} {act}",
                  *conv_model(size, cin, cout, kernel, int(stride), act), args.blocks), flush=True)
    for name in [m for m in args.models.split(",") if m]:
        print(run(name, *suite_model(name), args.blocks), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cases(argv, __doc__, "25x37x71x3s2,13x71x131x3s2,13x131x131x1s1,25x64x80x1s1,55x64x16x1s1,"
                                    "27x64x48x3s1,55x24x144x1s1silu,27x40x240x1s1silu,14x64x16x3s1", run)


if __name__ == "__main__":
    sys.exit(main())
