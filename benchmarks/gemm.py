"""f32 GEMM through the default pipeline vs numpy (OpenBLAS), measured in the same run.

    make bench            # or: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/gemm.py

Prints GFLOPS for each size and the ratio tilecraft / numpy, calls alternating (median of
``--repeat`` rounds). No thresholds: the figures are
quoted in notes and compared across changes. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE slow
OpenBLAS down on these machines; `make bench` unsets them for this command only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import tilecraft
from tilecraft.runtime.timing import alternating

GEMM = """
func.func @gemm(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<{m}x{n}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %c = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
                     outs(%init : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %c : tensor<{m}x{n}xf32>
}}
"""


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"1024"`` -> (1024, 1024, 1024); ``"128x256x1024"`` -> (M, N, K) = (128, 256, 1024)."""
    dims = [int(d) for d in text.split("x")]
    if len(dims) == 1:
        return dims[0], dims[0], dims[0]
    if len(dims) != 3:
        raise SystemExit(f"--sizes: expected N or MxNxK, got {text!r}")
    return dims[0], dims[1], dims[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="256,512,1024,2048",
                        help="comma-separated N (NxNxN) or MxNxK (C = A[M,K] B[K,N])")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    slowed = [v for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ]
    if slowed:
        print(f"warning: {', '.join(slowed)} set: numpy runs slower than it can (use make bench)")
    threads = tilecraft.Target.parse("llvm").num_threads
    print(f"f32 GEMM, target llvm (host, {tilecraft.Target.parse('llvm').vector_bits}-bit vectors), "
          f"{threads} thread(s); numpy {np.__version__}")
    print(f"{'MxNxK':>14} {'compile s':>10} {'tilecraft GFLOPS':>17} {'numpy GFLOPS':>13} {'ratio':>7}  check")
    rng = np.random.default_rng(0)
    for m, n, k in (parse_shape(s) for s in args.sizes.split(",")):
        start = time.perf_counter()
        module = tilecraft.compile(GEMM.format(m=m, n=n, k=k), keep_ir=False)
        compile_seconds = time.perf_counter() - start
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        ok = np.allclose(module(a, b), a @ b, rtol=1e-3, atol=1e-3 * np.sqrt(k))
        # Calls alternating, with a pause before each turn: OpenBLAS's threads spin ~0.1 s
        # after a call returns, and tilecraft timed right after numpy lost half its speed.
        medians = alternating({"tilecraft": lambda: module(a, b), "numpy": lambda: a @ b},
                              args.repeat, min_sample_s=0.1, pause_s=0.25)
        flops = 2.0 * m * n * k
        ours_gflops, ref_gflops = flops / medians["tilecraft"] / 1e9, flops / medians["numpy"] / 1e9
        print(f"{f'{m}x{n}x{k}':>14} {compile_seconds:>10.2f} {ours_gflops:>17.1f} {ref_gflops:>13.1f} "
              f"{ours_gflops / ref_gflops:>7.2f}  {'ok' if ok else 'MISMATCH'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
