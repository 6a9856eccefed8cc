"""Convolution layers as a model runs them: chains of identical Conv + ReLU layers, tilecraft
beside onnxruntime and beside a variant of its pipeline (without the next-block prefetch,
or with Winograd convolutions), in alternating rounds.

    .venv/bin/python benchmarks/conv_chain.py
    .venv/bin/python benchmarks/conv_chain.py --cases 7x7-512,14x14-256 --layers 4 --repeat 30
    .venv/bin/python benchmarks/conv_chain.py --variant winograd

Why chains: a benchmark of one convolution calls it with its filter still in L2 from the
previous call (ResNet-50's 14x14 layer: 2.4 MB over two cores' 2 MB each), so it times the
kernel on cached weights. In a model nothing is cached from the previous call: every layer
streams its filter from memory. ``--layers`` copies of the layer, each with its own
weights (4 x 2.4 MB at 14x14, 4 x 9.4 MB at 7x7), make that so here too. A narrow 1x1 stem
before them reads the NCHW input (see ``chain``); the output's layout conversion is paid
once per chain, alike for both runtimes.

onnxruntime runs with its pool threads not spinning
(``session.intra_op.allow_spinning = 0``): spinning on after a call, they took a core from
the runner after them (docs/performance.md, round 11: tilecraft's 2-thread convolutions
then ran at 1-thread speed). The variant (``--variant``) is the same model compiled by an
edited default pipeline: ``prefetch-off`` less ``tilecraft-prefetch-next-blocks``
(pipelines/buffer/prefetch_blocks.py), ``winograd`` with ``tilecraft-winograd-conv{tile=4 min-tiles=1}``
appended to its graph stage (pipelines/graph/winograd.py).

Times are medians per chain in ms; ``x ort`` is the time / onnxruntime's (below 1: faster
than onnxruntime). No thresholds: the figures are quoted in notes and docs/performance.md.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.pipelines import Pipeline, cpu_pipeline
from tilecraft.pipelines.graph.winograd import winograd_elements
from tilecraft.pipelines.buffer.prefetch_blocks import PREFETCH_NEXT_BLOCKS
from tilecraft.runtime.timing import alternating


@dataclass(frozen=True)
class Case:
    """A ``size``x``size`` image of ``channels`` channels through a ``kernel``x``kernel``
    convolution to as many channels (padded to keep the size)."""

    size: int
    channels: int
    kernel: int = 3

    @property
    def name(self) -> str:
        suffix = "" if self.kernel == 3 else f"-k{self.kernel}"
        return f"{self.size}x{self.size}-{self.channels}{suffix}"

    def gflop(self, layers: int) -> float:
        return 2 * self.size**2 * self.channels**2 * self.kernel**2 * layers / 1e9


# ResNet-50's 3x3 layers at each stage (stages 1-4), and a 1x1 layer of stage 4's width.
CASES = {case.name: case for case in (Case(56, 64), Case(28, 128), Case(14, 256), Case(7, 512),
                                      Case(7, 1024, kernel=1))}


# Input channels of the stem, a 1x1 convolution to ``case.channels`` before the chain.
STEM_CHANNELS = 16


def chain(case: Case, layers: int, seed: int = 0) -> onnx.ModelProto:
    """A stem, then ``layers`` Conv + ReLU of ``case``, each with its own weights.

    Why the stem: the first convolution of a model reads the NCHW input through the layout
    conversion fused into it (strided reads; ResNet-50's 3-channel stem). Measured on a
    7x7x1024 1x1 chain, that layer took 2.5 ms where the others took 0.62: the chain's
    layers would not be the layers of a model's middle. A narrow 1x1 layer takes that role
    here, at a small cost to both runtimes."""
    rng = np.random.default_rng(seed)
    scale = np.float32(1 / np.sqrt(case.channels * case.kernel**2))
    stem = rng.standard_normal((case.channels, STEM_CHANNELS, 1, 1), dtype=np.float32) * np.float32(0.25)
    nodes = [helper.make_node("Conv", ["x", "stem"], ["s"])]
    weights, previous = [numpy_helper.from_array(stem, "stem")], "s"
    for i in range(layers):
        filters = rng.standard_normal((case.channels, case.channels, case.kernel, case.kernel),
                                      dtype=np.float32) * scale
        bias = rng.standard_normal(case.channels, dtype=np.float32) * np.float32(0.1)
        weights += [numpy_helper.from_array(filters, f"w{i}"), numpy_helper.from_array(bias, f"b{i}")]
        nodes += [helper.make_node("Conv", [previous, f"w{i}", f"b{i}"], [f"c{i}"],
                                   kernel_shape=[case.kernel] * 2, pads=[case.kernel // 2] * 4),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        previous = f"r{i}"
    shape = [1, case.channels, case.size, case.size]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape(case))],
                              [helper.make_tensor_value_info(previous, TensorProto.FLOAT, shape)], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def input_shape(case: Case) -> list[int]:
    return [1, STEM_CHANNELS, case.size, case.size]


def without_prefetch() -> Pipeline:
    """The default pipeline (``tilecraft.compile``'s opt_level 3, the host) less
    ``tilecraft-prefetch-next-blocks``: an edited :class:`Pipeline`, as a user would write."""
    pipeline = cpu_pipeline("llvm", opt_level=3)
    loops = pipeline.stage("loops")
    return pipeline.replace("loops", [p for p in loops.passes if p != PREFETCH_NEXT_BLOCKS])


def with_winograd() -> Pipeline:
    """The default pipeline with every 3x3 stride-1 convolution in Winograd form (F(4x4,
    3x3)), the rewrite appended to the graph stage after its constant folding. Every one:
    ``min_tiles=1`` and a 1 GiB bound on the transformed input, so the layers the pass's
    default gate leaves alone are timed too."""
    pipeline = cpu_pipeline("llvm", opt_level=3)
    everything = winograd_elements(4, min_tiles=1, max_transformed_kib=1 << 20)
    return pipeline.replace("graph", [*pipeline.stage("graph").passes, *everything])


VARIANTS = {"prefetch-off": without_prefetch, "winograd": with_winograd}


def run(case: Case, layers: int, repeat: int, variant: str = "prefetch-off") -> str:
    model = chain(case, layers)
    x = np.random.default_rng(1).standard_normal(input_shape(case), dtype=np.float32)
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    compiled = tilecraft.compile(model)
    varied = tilecraft.compile(model, pipeline=VARIANTS[variant]())
    expected = session.run(None, {"x": x})[0]
    for module in (compiled, varied):
        np.testing.assert_allclose(module(x=x), expected, rtol=1e-3, atol=1e-3)
    times = alternating({"ort": lambda: session.run(None, {"x": x}), "tilecraft": lambda: compiled(x=x),
                         "variant": lambda: varied(x=x)}, repeat, min_sample_s=0.03, pause_s=0.02)
    gflop = case.gflop(layers)
    return (f"{case.name:12s} {times['ort'] * 1e3:8.3f} {times['tilecraft'] * 1e3:10.3f} "
            f"{times['variant'] * 1e3:13.3f} {times['tilecraft'] / times['ort']:9.2f} "
            f"{times['variant'] / times['ort']:10.2f} {times['variant'] / times['tilecraft']:9.2f} "
            f"{gflop / times['tilecraft']:8.0f} {gflop / times['ort']:6.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--layers", type=int, default=4, help="layers per chain (default 4)")
    parser.add_argument("--repeat", type=int, default=20, help="alternating rounds (default 20)")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="prefetch-off",
                        help="the pipeline variant timed beside the default (default prefetch-off)")
    args = parser.parse_args(argv)
    names = [name for name in args.cases.split(",") if name]
    unknown = [name for name in names if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    if args.layers < 1 or args.repeat < 1:
        parser.error("--layers and --repeat must be >= 1")
    print(f"{args.layers} chained Conv+ReLU layers per case; medians of {args.repeat} alternating rounds, ms per chain")
    print(f"{'case':12s} {'ort':>8s} {'tilecraft':>10s} {args.variant:>13s} {'tc x ort':>9s} "
          f"{'var x ort':>10s} {'var / tc':>9s} {'tc GF/s':>8s} {'ort GF/s':>6s}")
    for name in names:
        print(run(CASES[name], args.layers, args.repeat, args.variant), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
