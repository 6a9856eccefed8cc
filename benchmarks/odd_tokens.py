"""Transformers at odd token counts (issue #43): builds of one model with the planner's rules
switched in this process, timed beside onnxruntime. Process CPU time per call, builds
alternating in blocks, one thread unless ``--threads``.

    .venv/bin/python benchmarks/odd_tokens.py --models vit_b16 --blocks 7
    .venv/bin/python benchmarks/odd_tokens.py --mlp 197 --blocks 9     # the ViT's MLP block alone

Variants (``--variants``, comma-separated ``K:ROWS[:COLS[:LANES]]``):
  K     ``split``: a K cache block over several K loops (schedule/matmul_plan.py
        ``reduction_block``, the default); ``former``: none (``SPLIT_K_BLOCKS = False``);
  ROWS  ``pad``: the graph stage pads rows with no register tile of at least half the cap
        (pipelines/graph/padded_extents.py ``PAD_ROWS``, the former default); ``nopad``:
        never, every partial tile peeled (the default);
  COLS  ``peel``: whole-vector column tiles, the last partial one peeled, where no multiple
        of the lanes divides N (schedule/matmul_plan.py ``PEEL_COLUMNS``, the default);
        ``former``: N's widest power-of-two part (one lane for an odd N);
  LANES the fused attention kernel's f32 lanes (default: the target's
        ``attention_lanes``, 8 on AVX2; 16 was the former choice there).

Contractions alone (``--gemms``, comma-separated ``MxNxK`` or ``BxMxNxK`` for a batched
matmul, C = A[(B,) M, K] B[(B,) K, N]): the default plan with whole-vector column tiles and
the last partial one peeled (``peel``, schedule/matmul_plan.py ``peels_columns``, the
default) against the former rule (``former``: N's widest power-of-two part, one lane for an
odd N), beside numpy, GFLOPS from the median of the blocks:

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


def _build(model_bytes: bytes, variant: str):
    import onnx

    import tilecraft
    from tilecraft import CompileOptions
    from tilecraft.pipelines.graph import padded_extents
    from tilecraft.schedule import matmul_plan

    from tilecraft.pipelines.target import Target

    k_rule, rows_rule, *rest = variant.split(":")
    saved = matmul_plan.SPLIT_K_BLOCKS, padded_extents.PAD_ROWS, matmul_plan.PEEL_COLUMNS, Target.attention_lanes
    matmul_plan.SPLIT_K_BLOCKS = k_rule == "split"
    padded_extents.PAD_ROWS = rows_rule == "pad"
    matmul_plan.PEEL_COLUMNS = rest[:1] != ["former"]
    if len(rest) > 1:  # this process's builds only; restored below
        Target.attention_lanes = property(lambda self, lanes=int(rest[1]): lanes)
    try:
        return tilecraft.compile(onnx.load_from_string(model_bytes), CompileOptions(cache=False))
    finally:
        (matmul_plan.SPLIT_K_BLOCKS, padded_extents.PAD_ROWS, matmul_plan.PEEL_COLUMNS,
         Target.attention_lanes) = saved


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


def compare_gemm(shape: str, variants: list[str], blocks: int, calls: int) -> None:
    """Builds of one contraction under the column rules, alternating with numpy."""
    import warnings

    import tilecraft
    from tilecraft import CompileOptions
    from tilecraft.schedule import matmul_plan

    dims = [int(d) for d in shape.split("x")]
    *batch, m, n, k = dims
    rng = np.random.default_rng(0)
    a = rng.standard_normal((*batch, m, k)).astype(np.float32)
    b = rng.standard_normal((*batch, k, n)).astype(np.float32)
    want = a @ b
    runners = {}
    for variant in variants:
        saved = matmul_plan.PEEL_COLUMNS
        matmul_plan.PEEL_COLUMNS = variant == "peel"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a schedule falling back to scalar loops
                module = tilecraft.compile(_gemm_text(dims), CompileOptions(cache=False))
        finally:
            matmul_plan.PEEL_COLUMNS = saved
        np.testing.assert_allclose(module(a, b), want, rtol=1e-3, atol=1e-3 * np.sqrt(k))
        runners[variant] = lambda mod=module: mod(a, b)
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


def compare(name: str, model_bytes: bytes, feeds: dict, variants: list[str], blocks: int, calls: int,
            threads: int) -> None:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)[0]
    scale = float(np.abs(want).max()) or 1.0
    runners = {}
    for variant in variants:
        module = _build(model_bytes, variant)
        got = module(**feeds)
        got = got[0] if isinstance(got, (list, tuple)) else got
        error = float(np.abs(np.asarray(got) - want).max()) / scale
        print(f"{name} {variant}: max |diff| / max |onnxruntime| = {error:.1e}", flush=True)
        runners[variant] = lambda m=module: m(**feeds)
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
    parser.add_argument("--gemm-variants", default="former,peel", help="column rules for --gemms")
    parser.add_argument("--variants", default="former:pad,split:pad,split:nopad")
    parser.add_argument("--blocks", type=int, default=7)
    parser.add_argument("--calls", type=int, default=1, help="calls per timed block")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ["TILECRAFT_NUM_THREADS"] = str(args.threads)
    variants = [v for v in args.variants.split(",") if v]
    for shape in [g for g in args.gemms.split(",") if g]:
        compare_gemm(shape, [v for v in args.gemm_variants.split(",") if v], args.blocks, max(args.calls, 3))
    rng = np.random.default_rng(0)
    for tokens in [int(t) for t in args.mlp.split(",") if t]:
        from test_odd_tokens import mlp_block

        model = mlp_block(tokens, 768, seq_first=True)
        feeds = {"x": rng.standard_normal((tokens, 1, 768)).astype(np.float32)}
        compare(f"mlp[{tokens},1,768]", model.SerializeToString(), feeds, variants, args.blocks,
                max(args.calls, 3), args.threads)
    for name in [m for m in args.models.split(",") if m]:
        import public_suite

        module, inputs = public_suite.ARCHITECTURES[name].build(False)
        module.eval()
        model_bytes = public_suite.export_onnx(module, inputs)
        feeds = {f"input{i}": x.numpy() for i, x in enumerate(inputs)}
        compare(name, model_bytes, feeds, variants, args.blocks, args.calls, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
