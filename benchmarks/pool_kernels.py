"""Pooling kernels against onnxruntime's, one kernel at a time (round 29, wt-pool).

    # a model of the pooling class: each pool reads a convolution's output, as in a network
    .venv/bin/python benchmarks/pool_kernels.py export -o /tmp/pools.onnx
    # packages compiled with --profile (one per thread count and tree), then per-kernel minima
    TILECRAFT_NUM_THREADS=2 .venv/bin/tilecraft compile /tmp/pools.onnx --profile -o /tmp/p2.tar
    .venv/bin/python benchmarks/pool_kernels.py kernels /tmp/pools.onnx new=/tmp/p2.tar --threads 2

``kernels`` profiles each package (``Package.profile``) and an onnxruntime session with its
profiler on (``SessionOptions.enable_profiling``, ``--threads`` intra-op threads), calls
alternating with a pause before each (onnxruntime's pool threads then do not spin into the
package's call), and prints each kernel's minimum beside the onnxruntime node's of the same
name (a tilecraft kernel is named after its group's root: ``/p3/MaxPool(MaxPool)``), the
ratios, and the sum over the kernels whose name holds ``--match`` (default ``Pool``).
``--clock thread_cpu`` times the packages' kernels on the calling thread's CPU clock (right
for one-thread packages on a loaded machine; onnxruntime's profiler stays on wall time).

Why minima of single kernels: the machine is shared, and the minimum over many calls is the
figure least moved by other processes; why the pools' inputs come from convolutions: a
pool's cost at two threads depends on where its input lies (the producing layer's task
split leaves each half in one core's cache), which a pool fed from the function's argument
does not show (docs/performance.md, "Round 29: pooling at two threads").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from thread_balance import add_package_arguments, labelled_packages, random_feeds  # noqa: E402

# (name, op, channels, size, attributes): the pooling class in the suite and in unseen models.
# Each entry is a 1x1 convolution to ``channels`` over a ``size`` x ``size`` map, its ReLU, the
# pool, and a 1x1 convolution back to 16 channels.
POOLS: tuple[tuple[str, str, int, int, dict[str, Any]], ...] = (
    # SqueezeNet 1.1: 3x3/2 max, ceil mode, odd maps.
    ("sq55", "MaxPool", 64, 111, dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("sq27", "MaxPool", 128, 55, dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("sq13", "MaxPool", 256, 27, dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    # Inception: 3x3/1 max with padding (its branches), 3x3/2 max between stages.
    ("inc28", "MaxPool", 192, 28, dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])),
    ("inc14", "MaxPool", 512, 14, dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])),
    ("inc28s2", "MaxPool", 480, 28, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])),
    # ResNet's stem pool, YOLO's SPPF 5x5/1, DenseNet's transition 2x2/2 average, an
    # average 3x3/1 without the padding counted.
    ("stem", "MaxPool", 64, 112, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("sppf", "MaxPool", 256, 20, dict(kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])),
    ("dense", "AveragePool", 128, 56, dict(kernel_shape=[2, 2], strides=[2, 2])),
    ("avg3", "AveragePool", 96, 35, dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                                         count_include_pad=0)),
    ("gap", "GlobalAveragePool", 512, 13, {}),
)


def pools_model() -> Any:
    """An ONNX model (opset 17) with one branch per entry of :data:`POOLS`: the branch's own
    input, a 1x1 convolution + ReLU, the pool, a 1x1 convolution (a global pool: none), an
    output of its own."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, shape_inference

    rng = np.random.default_rng(0)
    nodes, weights, inputs, outputs = [], [], [], []
    for name, op, channels, size, attributes in POOLS:
        source = 16
        inputs.append(helper.make_tensor_value_info(f"{name}_x", TensorProto.FLOAT, [1, source, size, size]))
        weights.append(numpy_helper.from_array(
            (rng.standard_normal((channels, source, 1, 1)) * 0.25).astype(np.float32), f"{name}_w"))
        nodes += [helper.make_node("Conv", [f"{name}_x", f"{name}_w"], [f"{name}_c"], name=f"/{name}/Conv"),
                  helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"], name=f"/{name}/Relu"),
                  helper.make_node(op, [f"{name}_r"], [f"{name}_p"], name=f"/{name}/{op}", **attributes)]
        if op == "GlobalAveragePool":
            nodes.append(helper.make_node("Identity", [f"{name}_p"], [f"{name}_y"], name=f"/{name}/Out"))
        else:
            # A 1x1 convolution reads the pool, so the pool's result stays NHWC as in a
            # network; the transpose of the model's NCHW output is the last conv's.
            weights.append(numpy_helper.from_array(
                (rng.standard_normal((source, channels, 1, 1)) * 0.25).astype(np.float32), f"{name}_v"))
            nodes.append(helper.make_node("Conv", [f"{name}_p", f"{name}_v"], [f"{name}_y"], name=f"/{name}/Out"))
    graph = helper.make_graph(nodes, "pools", inputs, [], weights)
    # IR version 8: onnxruntime 1.2x reads at most 13.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    # The outputs' shapes, which tilecraft requires, from onnx's shape inference.
    shapes = {value.name: value for value in shape_inference.infer_shapes(model).graph.value_info}
    model.graph.output.extend(shapes[f"{name}_y"] for name, *_ in POOLS)
    return model


def export_main(args: argparse.Namespace) -> None:
    with open(args.output, "wb") as handle:
        handle.write(pools_model().SerializeToString())
    print(f"pools -> {args.output}")


def kernel_nodes(name: str, model: Any) -> tuple[str, ...]:
    """The names onnxruntime's profiler may give the node a tilecraft kernel stands for: the
    node's (the kernel's name up to the op in parentheses: ``/2/MaxPool(MaxPool)
    [tensor.pad]`` -> ``/2/MaxPool``), or, where onnxruntime's NCHWc layout rewrote the node,
    its first output's name + ``_nchwc``."""
    node = name.split("(", 1)[0]
    outputs = [n.output[0] for n in model.graph.node if n.name == node]
    return (node, *(f"{output}_nchwc" for output in outputs))


def kernels_main(args: argparse.Namespace) -> None:
    import onnx
    import onnxruntime

    from tilecraft.runtime.package import load

    model = onnx.load(args.model, load_external_data=False)
    feeds = random_feeds(model)
    packages = {}
    for label, path in labelled_packages(args.packages):
        packages[label] = load(path)
        if args.clock != "wall":
            packages[label].use_profile_clock(args.clock)
    best: dict[str, dict[str, float]] = {label: {} for label in packages}
    seconds_of: dict[str, dict[str, list[float]]] = {label: {} for label in packages}
    with tempfile.TemporaryDirectory() as scratch:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(scratch, "ort")
        session = onnxruntime.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
        for _ in range(args.rounds):
            for label, package in packages.items():
                time.sleep(args.pause_s)
                _, times = package.profile(**feeds)
                per_name: dict[str, float] = {}
                for kernel in times:
                    per_name[kernel.name] = per_name.get(kernel.name, 0.0) + kernel.seconds
                for name, seconds in per_name.items():
                    best[label][name] = min(best[label].get(name, math.inf), seconds)
                    seconds_of[label].setdefault(name, []).append(seconds)
            time.sleep(args.pause_s)
            session.run(None, feeds)
        with open(session.end_profiling()) as handle:
            events = json.load(handle)
    ort: dict[str, list[float]] = {}
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            ort.setdefault(event["name"][: -len("_kernel_time")], []).append(event["dur"] * 1e-3)
    labels = list(packages)
    print(f"{args.rounds} calls each, alternating, onnxruntime {args.threads} threads; ms, minimum "
          f"[median] per kernel; packages on the {args.clock} clock")
    print(f"{'kernel':<34}" + "".join(f"{label:>18}" for label in labels) + f"{'onnxruntime':>18}"
          + "".join(f"{label + '/ort':>10}" for label in labels))
    totals = {label: 0.0 for label in [*labels, "onnxruntime"]}
    names = [name for name in best[labels[0]] if args.match in name]
    counted: set[str] = set()
    for name in names:
        found = next((n for n in kernel_nodes(name, model) if n in ort), None)
        # A node's pad is a kernel of its own (``[tensor.pad]``): the node is counted once.
        node = ort[found] if found is not None and found not in counted else None
        if found is not None:
            counted.add(found)
        row = f"{name[:34]:<34}"
        for label in labels:
            values = seconds_of[label].get(name, [math.nan])
            row += f"{min(values) * 1e3:9.4f} [{statistics.median(values) * 1e3:6.4f}]"
            totals[label] += min(values) * 1e3
        if node:
            row += f"{min(node):9.4f} [{statistics.median(node):6.4f}]"
            totals["onnxruntime"] += min(node)
            row += "".join(f"{min(seconds_of[label].get(name, [math.nan])) * 1e3 / min(node):10.2f}"
                           for label in labels)
        print(row)
    matched = {n for name in names for n in kernel_nodes(name, model)}
    for node, values in sorted(ort.items()):
        if node not in matched and min(values) >= args.min_ms and args.match in node:
            print(f"{'(onnxruntime only) ' + node[:15]:<34}" + " " * 18 * len(labels)
                  + f"{min(values):9.4f} [{statistics.median(values):6.4f}]")
    print(f"{'sum of minima':<34}" + "".join(f"{totals[label]:18.4f}" for label in labels)
          + f"{totals['onnxruntime']:18.4f}"
          + "".join(f"{totals[label] / totals['onnxruntime']:10.2f}" for label in labels if totals["onnxruntime"]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="the pooling-class model as ONNX")
    export.add_argument("-o", "--output", required=True)
    kernels = commands.add_parser("kernels", help="per-kernel minima of --profile packages beside onnxruntime's")
    add_package_arguments(kernels, "onnxruntime's intra-op threads")
    kernels.add_argument("--rounds", type=int, default=31, help="profiled calls per runtime, alternating")
    kernels.add_argument("--pause-s", type=float, default=0.02, help="pause before each call")
    kernels.add_argument("--match", default="Pool", help="kernels whose name holds this are listed")
    kernels.add_argument("--min-ms", type=float, default=0.005,
                         help="onnxruntime nodes with no kernel of that name are listed from this time")
    kernels.add_argument("--clock", choices=("wall", "thread_cpu"), default="wall")
    args = parser.parse_args(argv)
    {"export": export_main, "kernels": kernels_main}[args.command](args)


if __name__ == "__main__":
    main()
