"""The demo behind `make demo`: compile the bundled dense+relu layer, check it, time it.

Prints the pipeline's stages, whether the result matches numpy, and the time per call next
to numpy's (numpy/OpenBLAS computing the same layer in the same process).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import tilecraft
from tilecraft.runtime.timing import measure

MODEL = Path(__file__).with_name("matmul_bias_relu.mlir")


def main() -> int:
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    module = tilecraft.compile(MODEL.read_text(), target="llvm")
    compile_seconds = time.perf_counter() - start
    print(f"compiled {MODEL.name} for '{module.target}' in {compile_seconds:.2f} s")
    print(f"entry: {module.signature}")
    print(f"stages: {' -> '.join(module.stages)}")

    x = rng.standard_normal((512, 512), dtype=np.float32)
    w = rng.standard_normal((512, 512), dtype=np.float32)
    b = rng.standard_normal(512, dtype=np.float32)
    y = module(x=x, w=w, b=b)
    expected = np.maximum(x @ w + b, 0)
    error = float(np.max(np.abs(y - expected)))
    ok = np.allclose(y, expected, rtol=1e-4, atol=1e-4)
    print(f"result check vs numpy: {'OK' if ok else 'MISMATCH'} (max abs error {error:.2e})")

    ours = measure(lambda: module(x, w, b), repeat=10, min_repeat_ms=50)
    reference = measure(lambda: np.maximum(x @ w + b, 0), repeat=10, min_repeat_ms=50)
    flops = 2 * 512**3
    print(f"tilecraft: {ours.median * 1e3:8.3f} ms  ({flops / ours.median / 1e9:6.1f} GFLOPS)")
    print(f"numpy:     {reference.median * 1e3:8.3f} ms  ({flops / reference.median / 1e9:6.1f} GFLOPS)")
    print(f"speed vs numpy: {reference.median / ours.median:.2f}x")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
