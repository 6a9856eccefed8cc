"""BLAS offload (``offload=["blas"]``) against the compiled default and onnxruntime, on a
BERT-shaped encoder layer and an f32 GEMM, measured in the same run with alternating calls.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/offload.py

Each round calls every contender once (after warm-up), in turn, so a noisy neighbour slows
them alike; the medians over the rounds are printed in ms, with each one's ratio to
onnxruntime (above 1: slower). numpy (its own OpenBLAS) anchors the GEMM. Outputs are checked
against onnxruntime first. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, where set, also reach the
scipy-openblas library the blas backend loads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import tilecraft

sys.path.insert(0, str(Path(tilecraft.__file__).resolve().parent / "tests" / "graph"))
import graph_models  # noqa: E402


def gemm_model(size: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    weights = numpy_helper.from_array(rng.standard_normal((size, size)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "gemm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [size, size])], [weights])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def alternate(contenders: dict[str, Callable[[], object]], rounds: int, warmup: int = 3) -> dict[str, float]:
    """Median seconds per call of each contender, calling them in turn each round."""
    for call in contenders.values():
        for _ in range(warmup):
            call()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, call in contenders.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def run(name: str, model: onnx.ModelProto, x: np.ndarray, rounds: int, threads: int,
        anchors: dict[str, Callable[[], object]]) -> None:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    (expected,) = session.run(None, {input_name: x})
    compiled = tilecraft.compile(model, keep_ir=False)
    offloaded = tilecraft.compile(model, keep_ir=False, offload=["blas"])
    for label, module in (("compiled", compiled), ("offload blas", offloaded)):
        error = float(np.max(np.abs(module(x) - expected)))
        if error > 1e-3 * max(1.0, float(np.max(np.abs(expected)))):
            raise SystemExit(f"{name} {label}: max |error| {error} against onnxruntime")
    contenders = {"tilecraft": lambda: compiled(x), "tilecraft --offload blas": lambda: offloaded(x),
                  "onnxruntime": lambda: session.run(None, {input_name: x}), **anchors}
    medians = alternate(contenders, rounds)
    print(f"\n{name}: median ms over {rounds} alternating rounds")
    for label, seconds in medians.items():
        print(f"  {label:>26} {seconds * 1e3:9.2f} ms   x{seconds / medians['onnxruntime']:.2f} onnxruntime")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--ffn", type=int, default=3072)
    parser.add_argument("--gemm", type=int, default=1024, help="N of the NxNxN GEMM")
    args = parser.parse_args(argv)
    slowed = [v for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ]
    if slowed:
        print(f"warning: {', '.join(slowed)} set: numpy and the blas backend's OpenBLAS may run slower")
    threads = tilecraft.Target.parse("llvm").num_threads
    print(f"target llvm, {threads} thread(s); onnxruntime {ort.__version__}, numpy {np.__version__}")
    rng = np.random.default_rng(0)
    encoder = graph_models.bert_layer(seq=args.seq, hidden=args.hidden, heads=args.heads, ffn=args.ffn)
    x = rng.standard_normal((args.seq, args.hidden)).astype(np.float32)
    run(f"BERT encoder layer (seq {args.seq}, hidden {args.hidden}, {args.heads} heads, ffn {args.ffn})",
        encoder, x, args.rounds, threads, {})
    n = args.gemm
    model = gemm_model(n)
    a = rng.standard_normal((n, n)).astype(np.float32)
    w = numpy_helper.to_array(model.graph.initializer[0])
    run(f"GEMM {n}x{n}x{n}", model, a, args.rounds, threads, {"numpy": lambda: a @ w})
    return 0


if __name__ == "__main__":
    sys.exit(main())
