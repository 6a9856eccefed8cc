"""BERT-base's kernels and one encoder layer: tilecraft vs numpy (OpenBLAS) and onnxruntime.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bert.py
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bert.py --clock cpu

Each case is an ONNX model (seq 128, hidden 768, 12 heads, ffn 3072): the projections as
MatMul with constant weights, the fused QKV projection as ``Gemm(transB=1)`` (PyTorch's
``nn.Linear`` export), attention's two batch matmuls, Q·K^T as ``MatMul`` after a
``Transpose`` (a transposed operand that is not a constant), Softmax, LayerNormalization,
and the whole layer (``tests/graph/graph_models.py``). Calls of tilecraft and the anchors
alternate in rounds; each figure is the best round's median, and the ratio is the anchor's
time over tilecraft's (> 1: tilecraft is faster). No thresholds: figures are quoted in notes.

``--clock wall`` (default): wall-clock time, both engines on all cores. ``--clock cpu``:
process CPU time with the anchors on one thread, so the ratio compares the work each engine
does per core and stays meaningful on a machine other jobs share (OpenBLAS and onnxruntime
threads spin while waiting, which a CPU clock would charge to them). tilecraft's threads
block while idle, so its CPU time is its compute time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "graph"))  # graph_models: the test models

SEQ, HIDDEN, HEADS, FFN = 128, 768, 12, 3072
HEAD_DIM = HIDDEN // HEADS


@dataclass
class Case:
    name: str
    model: "onnx.ModelProto"
    feeds: dict[str, "np.ndarray"]
    flops: int
    numpy: Callable[[], object] | None = None


def _single(op: str, inputs: dict, output: tuple[int, ...], inits: dict | None = None,
            **attrs) -> "onnx.ModelProto":
    from onnx import TensorProto, helper, numpy_helper

    inits = inits or {}
    node = helper.make_node(op, [*inputs, *inits], ["y"], **attrs)
    graph = helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, output)],
        [numpy_helper.from_array(a, n) for n, a in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _transposed_matmul(a, b) -> "onnx.ModelProto":
    """``MatMul(a, Transpose(b))`` on [heads, seq, d] inputs: attention's Q·K^T."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Transpose", ["b"], ["bt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["a", "bt"], ["y"])]
    graph = helper.make_graph(
        nodes, "qk",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, b.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (a.shape[0], a.shape[1], b.shape[1]))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def cases(selected: set[str] | None) -> list[Case]:
    import numpy as np

    import graph_models

    rng = np.random.default_rng(0)
    r = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    out: list[Case] = []
    x = r(SEQ, HIDDEN)
    for n, k in ((HIDDEN, HIDDEN), (3 * HIDDEN, HIDDEN), (FFN, HIDDEN), (HIDDEN, FFN)):
        a, w = (x if k == HIDDEN else r(SEQ, k)), r(k, n)
        out.append(Case(f"matmul {SEQ}x{k} @ {k}x{n}", _single("MatMul", {"a": a}, (SEQ, n), {"w": w}),
                        {"a": a}, 2 * SEQ * n * k, lambda a=a, w=w: a @ w))
    w_t = r(3 * HIDDEN, HIDDEN)
    out.append(Case(f"gemm transB {SEQ}x{HIDDEN} @ ({3 * HIDDEN}x{HIDDEN})^T",
                    _single("Gemm", {"a": x}, (SEQ, 3 * HIDDEN), {"w": w_t}, transB=1),
                    {"a": x}, 2 * SEQ * 3 * HIDDEN * HIDDEN, lambda: x @ w_t.T))
    q, kt = r(HEADS, SEQ, HEAD_DIM), r(HEADS, HEAD_DIM, SEQ)
    out.append(Case(f"batch matmul {HEADS}x{SEQ}x{HEAD_DIM} @ {HEADS}x{HEAD_DIM}x{SEQ}",
                    _single("MatMul", {"a": q, "b": kt}, (HEADS, SEQ, SEQ)), {"a": q, "b": kt},
                    2 * HEADS * SEQ * SEQ * HEAD_DIM, lambda: q @ kt))
    p, v = r(HEADS, SEQ, SEQ), r(HEADS, SEQ, HEAD_DIM)
    out.append(Case(f"batch matmul {HEADS}x{SEQ}x{SEQ} @ {HEADS}x{SEQ}x{HEAD_DIM}",
                    _single("MatMul", {"a": p, "b": v}, (HEADS, SEQ, HEAD_DIM)), {"a": p, "b": v},
                    2 * HEADS * SEQ * SEQ * HEAD_DIM, lambda: p @ v))
    k_ = r(HEADS, SEQ, HEAD_DIM)
    out.append(Case(f"Q.K^T (MatMul after Transpose) {HEADS}x{SEQ}x{HEAD_DIM}",
                    _transposed_matmul(q, k_), {"a": q, "b": k_}, 2 * HEADS * SEQ * SEQ * HEAD_DIM,
                    lambda: q @ k_.transpose(0, 2, 1)))
    out.append(Case(f"softmax {HEADS}x{SEQ}x{SEQ}", _single("Softmax", {"x": p}, p.shape, axis=-1),
                    {"x": p}, 0))
    gamma, beta = r(HIDDEN), r(HIDDEN)
    out.append(Case(f"layer norm {SEQ}x{HIDDEN}",
                    _single("LayerNormalization", {"x": x}, x.shape, {"g": gamma, "b": beta}, axis=-1),
                    {"x": x}, 0))
    layer = graph_models.bert_layer(seq=SEQ, hidden=HIDDEN, heads=HEADS, ffn=FFN)
    layer_flops = 2 * SEQ * HIDDEN * (4 * HIDDEN + 2 * FFN) + 4 * HEADS * SEQ * SEQ * HEAD_DIM
    out.append(Case("BERT-base encoder layer", layer, {"x": x}, layer_flops))
    return [c for c in out if selected is None or any(s in c.name for s in selected)]


def cpu_timer(fn: Callable[[], object], repeat: int, min_ms: float) -> float:
    """Median process CPU seconds per call over ``repeat`` measurements of >= ``min_ms``."""
    fn()
    samples = []
    for _ in range(repeat):
        calls, start = 0, time.process_time()
        while (elapsed := time.process_time() - start) * 1e3 < min_ms or calls == 0:
            fn()
            calls += 1
        samples.append(elapsed / calls)
    return sorted(samples)[len(samples) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (best kept)")
    parser.add_argument("--cases", default=None, help="comma-separated substrings of case names")
    args = parser.parse_args(argv)
    if args.clock == "cpu":
        # Before numpy and onnxruntime start their thread pools.
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    import numpy as np
    import onnxruntime as ort

    import tilecraft
    from tilecraft.runtime.timing import measure

    if args.clock == "wall":
        timer = lambda fn: measure(fn, repeat=5, min_repeat_ms=100).median  # noqa: E731
    else:
        timer = lambda fn: cpu_timer(fn, repeat=5, min_ms=100)  # noqa: E731
    options = ort.SessionOptions()
    if args.clock == "cpu":
        options.intra_op_num_threads = 1
    slowed = [v for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ]
    if slowed:
        print(f"warning: {', '.join(slowed)} set: numpy runs slower than it can")
    print(f"clock {args.clock}; tilecraft threads {tilecraft.Target.parse('llvm').num_threads}; "
          f"anchors on {'1 thread' if args.clock == 'cpu' else 'all cores'}")
    print(f"{'case':<48} {'tilecraft':>16} {'numpy':>16} {'onnxruntime':>16}  ratio np / ort  check")
    for case in cases(set(args.cases.split(",")) if args.cases else None):
        module = tilecraft.compile(case.model, opt_level=3, keep_ir=False)
        session = ort.InferenceSession(case.model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        inputs = list(case.feeds.values())
        reference = session.run(None, case.feeds)[0]
        got = module(*inputs)
        scale = float(np.abs(reference).max())
        ok = np.allclose(got, reference, rtol=1e-3, atol=1e-3 * scale)
        runs = {"tilecraft": lambda: module(*inputs),
                "onnxruntime": lambda: session.run(None, case.feeds)}
        if case.numpy is not None:
            runs["numpy"] = case.numpy
        best = {name: float("inf") for name in runs}
        for _ in range(args.rounds):
            for name, fn in runs.items():
                best[name] = min(best[name], timer(fn))

        def cell(name: str) -> str:
            if name not in best:
                return f"{'-':>16}"
            seconds = best[name]
            if case.flops:
                return f"{case.flops / seconds / 1e9:9.1f} GFLOPS"
            return f"{seconds * 1e6:13.0f} us"

        ratios = " / ".join(f"{best[n] / best['tilecraft']:.2f}" if n in best else "-"
                            for n in ("numpy", "onnxruntime"))
        print(f"{case.name:<48} {cell('tilecraft')} {cell('numpy')} {cell('onnxruntime')}  "
              f"{ratios:>14}  {'ok' if ok else 'MISMATCH'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
