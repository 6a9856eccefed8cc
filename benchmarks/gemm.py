"""f32 GEMM through the default pipeline vs numpy (OpenBLAS), measured in the same run.

    make bench            # or: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/gemm.py

Prints GFLOPS for each size and the ratio tilecraft / numpy. No thresholds: the figures are
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
from tilecraft.runtime.timing import measure

GEMM = """
func.func @gemm(%a: tensor<{n}x{n}xf32>, %b: tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<{n}x{n}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>
  %c = linalg.matmul ins(%a, %b : tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>)
                     outs(%init : tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>
  return %c : tensor<{n}x{n}xf32>
}}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="256,512,1024,2048", help="comma-separated N for NxNxN")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    slowed = [v for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ]
    if slowed:
        print(f"warning: {', '.join(slowed)} set: numpy runs slower than it can (use make bench)")
    threads = tilecraft.Target.parse("llvm").num_threads
    print(f"f32 GEMM, target llvm (host, {tilecraft.Target.parse('llvm').vector_bits}-bit vectors), "
          f"{threads} thread(s); numpy {np.__version__}")
    print(f"{'N':>6} {'compile s':>10} {'tilecraft GFLOPS':>17} {'numpy GFLOPS':>13} {'ratio':>7}  check")
    rng = np.random.default_rng(0)
    for n in (int(s) for s in args.sizes.split(",")):
        start = time.perf_counter()
        module = tilecraft.compile(GEMM.format(n=n), keep_ir=False)
        compile_seconds = time.perf_counter() - start
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        ok = np.allclose(module(a, b), a @ b, rtol=1e-3, atol=1e-3 * np.sqrt(n))
        ours = measure(lambda: module(a, b), repeat=args.repeat, min_repeat_ms=100)
        reference = measure(lambda: a @ b, repeat=args.repeat, min_repeat_ms=100)
        flops = 2.0 * n**3
        ours_gflops, ref_gflops = flops / ours.median / 1e9, flops / reference.median / 1e9
        print(f"{n:>6} {compile_seconds:>10.2f} {ours_gflops:>17.1f} {ref_gflops:>13.1f} "
              f"{ours_gflops / ref_gflops:>7.2f}  {'ok' if ok else 'MISMATCH'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
