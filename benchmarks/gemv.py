"""Matrix-vector products (one-node ONNX Gemms, batch 1) against onnxruntime, one thread,
process CPU time, blocks of calls alternating (runtime/timing.py's ``alternating``).

    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/gemv.py --shapes 1280x1000,2048x1000
    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/gemv.py --trans-b --target "llvm -mcpu=znver3"

Each shape is ``KxN``: x[1, K] @ W[K, N] + bias, W a constant (``--trans-b``: stored [N, K],
as PyTorch's Linear exports it). The classifier heads of batch-1 CNNs are such Gemms
(MobileNetV2's 1280 -> 1000, ResNet's 2048 -> 1000); schedule/matmul_plan.py's
``plan_matrix_vector`` plans them. Outputs are checked against onnxruntime first. A call's
fixed cost (the runtime's entry, about 5 us here against onnxruntime's 4) is in every
figure: small shapes show it. No thresholds: the figures go into docs/performance.md.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import tilecraft
from tilecraft.runtime.timing import alternating


def gemm_model(k: int, n: int, trans_b: bool):
    """A one-node Gemm ``x[1, k] @ W + b`` with constant W ([k, n], or [n, k] transposed)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(k * 7919 + n)
    weight = rng.standard_normal((n, k) if trans_b else (k, n), dtype=np.float32) * 0.05
    bias = rng.standard_normal(n, dtype=np.float32)
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=int(trans_b))
    graph = helper.make_graph(
        [node], "gemv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def main(argv: list[str] | None = None) -> int:
    import onnxruntime

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="1280x1000,2048x1000,512x1000,768x768",
                        help="comma-separated KxN")
    parser.add_argument("--trans-b", action="store_true", help="W stored [N, K] (Gemm transB=1)")
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args(argv)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    print(f"{'KxN':>12} {'tilecraft ms':>13} {'onnxruntime ms':>15} {'ratio':>6}  check")
    for shape in args.shapes.split(","):
        k, n = (int(d) for d in shape.split("x"))
        model = gemm_model(k, n, args.trans_b)
        session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
        compiled = tilecraft.compile(model, target=args.target, cache=False, keep_ir=False)
        x = np.random.default_rng(1).standard_normal((1, k), dtype=np.float32)
        expected = session.run(None, {"x": x})[0]
        ok = np.allclose(compiled(x), expected, rtol=1e-4, atol=1e-3)
        medians = alternating({"tilecraft": lambda: compiled(x), "onnxruntime": lambda: session.run(None, {"x": x})},
                              args.rounds, min_sample_s=0.05, clock=time.process_time)
        ours, theirs = medians["tilecraft"], medians["onnxruntime"]
        print(f"{shape:>12} {ours * 1e3:>13.4f} {theirs * 1e3:>15.4f} {ours / theirs:>6.2f}  "
              f"{'ok' if ok else 'MISMATCH'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
