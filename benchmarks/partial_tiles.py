"""Matmul register rows: the partial last tile peeled (the default) against the largest
divisor of M with the former 7-row AVX2 cap, one thread, process CPU time, builds
alternating in blocks in one process, onnxruntime (one thread) in the same run.

    .venv/bin/python benchmarks/partial_tiles.py                  # Linear 768 -> 3072, M = 128, 197, 100
    .venv/bin/python benchmarks/partial_tiles.py --layer 128,197  # BERT-base encoder layers

The "divisor" build patches ``schedule.matmul_plan.matmul_rows_tile`` and ``matmul_register_rows``
back to their former rules in this process (no other change); both builds skip the compile
cache. No thresholds: the figures are quoted in docs/performance.md ("Partial register
tiles").
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TILECRAFT_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "graph"))

import numpy as np  # noqa: E402

from tilecraft.schedule import matmul_plan  # noqa: E402
from tilecraft.schedule.op_schedule import largest_divisor  # noqa: E402
from rule_builds import builds_under_rules, one_thread_session  # noqa: E402

PEELED = (matmul_plan.matmul_rows_tile, matmul_plan.matmul_register_rows)
DIVISOR = (lambda rows, cap: largest_divisor(rows, cap),
           lambda columns, lanes, registers: max(1, min(8, (registers - 2) // max(columns // lanes, 1))))


def _rules(rules) -> None:
    matmul_plan.matmul_rows_tile, matmul_plan.matmul_register_rows = rules


def linear(m: int, k: int = 768, n: int = 3072):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), 2 * m * k * n


def layer(seq: int):
    import graph_models

    flops = 2 * seq * 768 * (4 * 768 + 2 * 3072) + 4 * 12 * seq * seq * 64
    return graph_models.bert_layer(seq=seq, hidden=768, heads=12, ffn=3072), flops


def _cpu_ms(fn, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e3


def run(name: str, model, flops: int, rows: int, blocks: int, calls: int) -> str:
    x = np.random.default_rng(1).standard_normal((rows, 768)).astype(np.float32)
    builds = builds_under_rules(model, {"divisor": DIVISOR, "peeled": PEELED}, _rules, PEELED)
    session = one_thread_session(model)
    feed = {session.get_inputs()[0].name: x}
    calls_of = {label: (lambda m=module: m(x)) for label, module in builds.items()}
    calls_of["onnxruntime"] = lambda: session.run(None, feed)
    expected = calls_of["onnxruntime"]()[0]
    for label, module in builds.items():
        got = module(x)
        np.testing.assert_allclose(got[0] if isinstance(got, (list, tuple)) else got, expected, rtol=2e-3, atol=2e-3)
    times: dict[str, list[float]] = {label: [] for label in calls_of}
    for _ in range(blocks):
        for label, fn in calls_of.items():
            times[label].append(_cpu_ms(fn, calls))
    cells = [f"{label} {np.median(t):.2f} ms (min {min(t):.2f}, {flops / np.median(t) / 1e6:.0f} GFLOPS)"
             for label, t in times.items()]
    return f"{name}: " + "; ".join(cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="128,197,100", help="Linear 768 -> 3072 row counts")
    parser.add_argument("--layer", default="", help="BERT-base encoder layer sequence lengths")
    parser.add_argument("--blocks", type=int, default=9)
    parser.add_argument("--calls", type=int, default=5, help="calls per timed block")
    args = parser.parse_args(argv)
    for rows in [int(r) for r in args.rows.split(",") if r]:
        model, flops = linear(rows)
        print(run(f"Linear 768->3072, M={rows}", model, flops, rows, args.blocks, args.calls), flush=True)
    for seq in [int(s) for s in args.layer.split(",") if s]:
        model, flops = layer(seq)
        print(run(f"BERT-base layer, seq {seq}", model, flops, seq, args.blocks, max(args.calls // 2, 1)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
