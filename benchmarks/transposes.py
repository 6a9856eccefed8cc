"""Layout transposes (issue #43): the default against the former transpose tiles and lowering,
and onnxruntime, one thread, process CPU time, builds alternating in blocks in one process.

    .venv/bin/python benchmarks/transposes.py
    .venv/bin/python benchmarks/transposes.py --cases "1x64x56x56:0231,1x12x64x197:0132"
    .venv/bin/python benchmarks/transposes.py --cases "" --models wav2vec_frontend,vit_b16

Builds (each checked against numpy's transpose, or a model against onnxruntime, first):

- ``former``: the state before round 22: the earlier transpose tiles (the largest
  power-of-two divisor up to a vector where it is at least 4, else a divisor, no peeling),
  MLIR's own lowering of ``vector.transpose`` (the vector stage without
  ``tilecraft-transpose-shuffles``) and no 1-D layout conversions (pipelines/graph/layout.py
  ``unit_height_conversions`` returning 0);
- ``elementwise`` (lone transposes): today's tiles, MLIR's lowering;
- ``no_1d_layout`` (models): today's tiles and shuffles, no 1-D layout conversions;
- ``default``: everything as it is.

Also printed: the per-call cost of a 4 x 4 transpose in each runtime, the fixed cost of a
call (argument checks, the result's allocation) that a lone small op carries and a model
pays once. No thresholds: the figures go into docs/performance.md ("Transposes").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

os.environ.setdefault("TILECRAFT_NUM_THREADS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.pipelines.cpu import cpu_pipeline  # noqa: E402
from tilecraft.pipelines.graph import layout  # noqa: E402
from tilecraft.pipelines.target import Target  # noqa: E402
from tilecraft.pipelines.vector.transpose_shuffles import TRANSPOSE_SHUFFLES  # noqa: E402
from tilecraft.schedule import plan  # noqa: E402
from tilecraft.schedule.op_schedule import vector_tile  # noqa: E402
from rule_builds import one_thread_session  # noqa: E402

DEFAULT_CASES = ("768x3072:10,197x768:10,768x197:10,1x56x56x64:0312,1x64x56x56:0231,1x3x224x224:0231,"
                 "1x12x64x197:0132,1x256x3199:021,1x3199x256:021")


def _former_tiles(nest, vector_dim, transposed, lanes):
    def side(extent: int) -> int:
        power = min(extent & -extent, lanes)
        return power if power >= 4 else vector_tile(extent, lanes, 1)
    return side(nest.ranges[vector_dim]), side(nest.ranges[transposed])


def _no_unit_height(function, layout_name) -> int:
    """The layout pass before 1-D convolutions' conversions propagated."""
    return 0


def transpose_model(shape: list[int], perm: list[int]):
    from onnx import TensorProto, helper

    out = [shape[p] for p in perm]
    graph = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=perm)], "t",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _elementwise_pipeline():
    pipeline = cpu_pipeline(Target.parse("llvm"), opt_level=3)
    return pipeline.replace("vector", [p for p in pipeline.stage("vector").passes if p != TRANSPOSE_SHUFFLES])


def builds(model, *, layout_variants: bool = False) -> dict:
    """``{label: compiled module}``; each variant's rules are patched in for its build only.
    ``layout_variants``: also a build without the 1-D layout conversions (models)."""
    default_tiles, default_unit_height = plan._transpose_tiles, layout.unit_height_conversions
    variants = {"former": (_former_tiles, _no_unit_height, _elementwise_pipeline())}
    if layout_variants:
        variants["no_1d_layout"] = (default_tiles, _no_unit_height, None)
    else:
        variants["elementwise"] = (default_tiles, default_unit_height, _elementwise_pipeline())
    variants["default"] = (default_tiles, default_unit_height, None)
    result = {}
    for label, (tiles, unit_height, pipeline) in variants.items():
        plan._transpose_tiles, layout.unit_height_conversions = tiles, unit_height
        try:
            result[label] = tilecraft.compile(model, cache=False, pipeline=pipeline)
        finally:
            plan._transpose_tiles, layout.unit_height_conversions = default_tiles, default_unit_height
    return result


def _cpu_us(fn, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e6


def suite_model(name: str):
    """A public_suite model (benchmarks/public_suite.py, held-out ones too) as ONNX and its
    inputs by name."""
    import onnx
    import public_suite

    module, inputs = public_suite.build(name)
    model = onnx.load_from_string(public_suite.export_onnx(module, inputs))
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    return model, {n: x.numpy() for n, x in zip(names, inputs)}


def run_model(name: str, blocks: int) -> str:
    model, feeds = suite_model(name)
    session = one_thread_session(model)
    expected = session.run(None, feeds)[0]
    calls = {}
    for label, module in builds(model, layout_variants=True).items():
        got = module(**feeds)
        got = got[0] if isinstance(got, (list, tuple)) else got
        scale = float(np.abs(expected).max()) or 1.0
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3 * scale, err_msg=label)
        calls[label] = lambda m=module: m(**feeds)
    calls["onnxruntime"] = lambda: session.run(None, feeds)
    return f"{name}: " + _timed(calls, 3, blocks)


def run(shape: list[int], perm: list[int], blocks: int) -> str:
    model = transpose_model(shape, perm)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    session = one_thread_session(model)
    calls = {}
    for label, module in builds(model).items():
        np.testing.assert_array_equal(module(x), np.transpose(x, perm), err_msg=label)
        calls[label] = lambda m=module: m(x)
    calls["onnxruntime"] = lambda: session.run(None, {"x": x})
    return f"{shape} perm {perm}: " + _timed(calls, max(3, int(2e6 // x.size)), blocks)


def _timed(calls: dict, repeat: int, blocks: int) -> str:
    """Each call ``repeat`` times per block, the labels alternating block by block; medians
    and the spread of the per-block ratios to onnxruntime."""
    times: dict[str, list[float]] = {label: [] for label in calls}
    for _ in range(blocks):
        for label, fn in calls.items():
            times[label].append(_cpu_us(fn, repeat))
    ort = np.array(times["onnxruntime"])
    cells = []
    for label, t in times.items():
        ratio = np.array(t) / ort
        cells.append(f"{label} {np.median(t):.1f} us ({np.median(ratio):.2f}x, {ratio.min():.2f}-{ratio.max():.2f})")
    return "; ".join(cells)


def call_cost(blocks: int) -> str:
    model = transpose_model([4, 4], [1, 0])
    x = np.ones((4, 4), np.float32)
    module, session = tilecraft.compile(model, cache=False), one_thread_session(model)
    tc, ort = [], []
    for _ in range(blocks):
        tc.append(_cpu_us(lambda: module(x), 2000))
        ort.append(_cpu_us(lambda: session.run(None, {"x": x}), 2000))
    return f"per-call cost (a 4 x 4 transpose): tilecraft {np.median(tc):.1f} us, onnxruntime {np.median(ort):.1f} us"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=DEFAULT_CASES,
                        help="SHAPE:PERM, comma-separated (1x64x56x56:0231; digits of the permutation)")
    parser.add_argument("--models", default="", help="public_suite models, comma-separated (3 calls per block)")
    parser.add_argument("--blocks", type=int, default=9)
    args = parser.parse_args(argv)
    print(call_cost(args.blocks), flush=True)
    for case in [c for c in args.cases.split(",") if c]:
        shape_text, perm_text = case.split(":")
        print(run([int(s) for s in shape_text.split("x")], [int(p) for p in perm_text], args.blocks), flush=True)
    for name in [m for m in args.models.split(",") if m]:
        print(run_model(name, args.blocks), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
