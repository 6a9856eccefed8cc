"""Transformers at odd token counts (issue #43): builds of one model with the planner's rules
timed beside onnxruntime. Process CPU time per call, builds
alternating in blocks, one thread unless ``--threads``.

    .venv/bin/python benchmarks/odd_tokens.py --models vit_b16 --blocks 7
    .venv/bin/python benchmarks/odd_tokens.py --mlp 197 --blocks 9     # the ViT's MLP block alone

The planner's rules for odd extents (schedule/matmul_plan.py: a K cache block over several K
loops, ``reduction_block``; whole-vector column tiles with the last partial one peeled,
``peels_columns``; partial row tiles peeled, not padded) are the defaults; the former rules
they replaced are gone, their measured comparison is in docs/performance.md.

Contractions alone (``--gemms``, comma-separated ``MxNxK`` or ``BxMxNxK`` for a batched
matmul, C = A[(B,) M, K] B[(B,) K, N]) beside numpy, GFLOPS from the median of the blocks:

    .venv/bin/python benchmarks/odd_tokens.py --gemms 255x255x255,333x517x251,12x197x197x64

Models: public_suite.py's architectures by name (built and exported to ONNX here, as the
suite does), or ``--mlp TOKENS`` for a sequence-first ([tokens, 1, 768]) MLP block: Linear
768 -> 3072, erf GELU, Linear 3072 -> 768, bias and residual. Outputs are checked against
onnxruntime's. No thresholds: figures are quoted in docs/performance.md ("Transformers at odd
token counts").
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "scheduling"))


def _cpu_ms(fn, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e3


def _build(model_bytes: bytes):
    import onnx

    import tilecraft
    from tilecraft import CompileOptions

    return tilecraft.compile(onnx.load_from_string(model_bytes), CompileOptions(cache=False))


def _gemm_text(dims: list[int]) -> str:
    """An f32 (batched) matmul function, C = A B, of ``[M, N, K]`` or ``[B, M, N, K]``."""
    *batch, m, n, k = dims
    op = "linalg.batch_matmul" if batch else "linalg.matmul"
    a, b, c = (f"tensor<{'x'.join(map(str, [*batch, *shape]))}xf32>" for shape in ((m, k), (k, n), (m, n)))
    return (f"func.func @main(%a: {a}, %b: {b}) -> {c} {{\n"
            f"  %zero = arith.constant 0.0 : f32\n  %empty = tensor.empty() : {c}\n"
            f"  %init = linalg.fill ins(%zero : f32) outs(%empty : {c}) -> {c}\n"
            f"  %r = {op} ins(%a, %b : {a}, {b}) outs(%init : {c}) -> {c}\n"
            f"  return %r : {c}\n}}\n")


def compare_gemm(shape: str, blocks: int, calls: int) -> None:
    """One contraction's default build, alternating with numpy."""
    import warnings

    import tilecraft
    from tilecraft import CompileOptions

    dims = [int(d) for d in shape.split("x")]
    *batch, m, n, k = dims
    rng = np.random.default_rng(0)
    a = rng.standard_normal((*batch, m, k)).astype(np.float32)
    b = rng.standard_normal((*batch, k, n)).astype(np.float32)
    want = a @ b
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a schedule falling back to scalar loops
        module = tilecraft.compile(_gemm_text(dims), CompileOptions(cache=False))
    np.testing.assert_allclose(module(a, b), want, rtol=1e-3, atol=1e-3 * np.sqrt(k))
    runners = {"tilecraft": lambda: module(a, b)}
    runners["numpy"] = lambda: a @ b
    times: dict[str, list[float]] = {label: [] for label in runners}
    for _ in range(blocks):
        for label, fn in runners.items():
            times[label].append(_cpu_ms(fn, calls))
    flops = 2.0 * np.prod(batch or [1]) * m * n * k
    for label, samples in times.items():
        median = float(np.median(samples))
        print(f"  gemm {shape} {label:>8}: median {median:8.3f} ms (min {min(samples):8.3f}), "
              f"{flops / median / 1e6:7.1f} GFLOPS", flush=True)


def compare(name: str, model_bytes: bytes, feeds: dict, blocks: int, calls: int, threads: int) -> None:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)[0]
    scale = float(np.abs(want).max()) or 1.0
    module = _build(model_bytes)
    got = module(**feeds)
    got = got[0] if isinstance(got, (list, tuple)) else got
    error = float(np.abs(np.asarray(got) - want).max()) / scale
    print(f"{name}: max |diff| / max |onnxruntime| = {error:.1e}", flush=True)
    runners = {"tilecraft": lambda: module(**feeds)}
    runners["onnxruntime"] = lambda: session.run(None, feeds)
    times: dict[str, list[float]] = {label: [] for label in runners}
    for _ in range(blocks):
        for label, fn in runners.items():
            times[label].append(_cpu_ms(fn, calls))
    base = np.median(times["onnxruntime"])
    for label, samples in times.items():
        print(f"  {name} {label:>14}: median {np.median(samples):8.2f} ms (min {min(samples):8.2f}), "
              f"{np.median(samples) / base:.2f}x onnxruntime", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="", help="public_suite.py architectures, comma-separated")
    parser.add_argument("--mlp", default="", help="token counts of the sequence-first MLP block")
    parser.add_argument("--gemms", default="", help="contractions MxNxK or BxMxNxK, comma-separated")
    parser.add_argument("--blocks", type=int, default=7)
    parser.add_argument("--calls", type=int, default=1, help="calls per timed block")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ["TILECRAFT_NUM_THREADS"] = str(args.threads)
    for shape in [g for g in args.gemms.split(",") if g]:
        compare_gemm(shape, args.blocks, max(args.calls, 3))
    rng = np.random.default_rng(0)
    for tokens in [int(t) for t in args.mlp.split(",") if t]:
        from test_odd_tokens import mlp_block

        model = mlp_block(tokens, 768, seq_first=True)
        feeds = {"x": rng.standard_normal((tokens, 1, 768)).astype(np.float32)}
        compare(f"mlp[{tokens},1,768]", model.SerializeToString(), feeds, args.blocks,
                max(args.calls, 3), args.threads)
    for name in [m for m in args.models.split(",") if m]:
        import public_suite

        module, inputs = public_suite.build(name)  # seeded, BatchNorm calibrated, as the suite builds it
        model_bytes = public_suite.export_onnx(module, inputs)
        feeds = {f"input{i}": x.numpy() for i, x in enumerate(inputs)}
        compare(name, model_bytes, feeds, args.blocks, args.calls, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
