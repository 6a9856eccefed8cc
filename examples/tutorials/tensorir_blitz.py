"""TVM's "Blitz Course to TensorIR": schedule a function that already exists as IR.

    python examples/tutorials/tensorir_blitz.py [--size 128] [--repeat 20]

TVM writes ``mm_relu`` in TVMScript and schedules its blocks; here the same function is MLIR
text (a ``linalg.matmul`` and a ``linalg.generic`` ReLU). ``tilecraft.block`` names the ops
``Y`` and ``C`` as in the tutorial (untagged ops would be ``matmul`` and ``generic``). The
steps are the tutorial's: get_block, get_loops, split, reorder, reverse_compute_at,
decompose_reduction; the loops are printed after the last step, then the scheduled and the
unscheduled function are built, checked against numpy and timed.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tilecraft.runtime.timing import measure
from tilecraft.scheduling import Schedule, build

MM_RELU = """
func.func @mm_relu(%A: tensor<{n}x{n}xf32> {{tilecraft.name = "A"}},
                   %B: tensor<{n}x{n}xf32> {{tilecraft.name = "B"}}) -> tensor<{n}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<{n}x{n}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>
  %Y = linalg.matmul {{tilecraft.block = "Y"}}
         ins(%A, %B : tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>)
         outs(%init : tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>
  %C = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"], tilecraft.block = "C"}}
         ins(%Y : tensor<{n}x{n}xf32>) outs(%empty : tensor<{n}x{n}xf32>) {{
  ^bb0(%y: f32, %out: f32):
    %relu = arith.maximumf %y, %zero : f32
    linalg.yield %relu : f32
  }} -> tensor<{n}x{n}xf32>
  return %C : tensor<{n}x{n}xf32>
}}
"""


def schedule(text: str) -> Schedule:
    """The tutorial's transformation, step for step."""
    sch = Schedule(text)
    print("blocks:", [b.name for b in sch.get_blocks()])     # ['Y.init', 'Y', 'C']
    block_Y = sch.get_block("Y")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    block_C = sch.get_block("C")
    sch.reverse_compute_at(block_C, j0)                       # C's tile right after Y's
    sch.decompose_reduction(block_Y, k)                       # Y's init inside j0, before k
    return sch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=128, help="the matrices' size (default 128)")
    parser.add_argument("--repeat", type=int, default=20, help="timed repeats")
    args = parser.parse_args(argv)
    if args.size <= 0 or args.size % 4:
        parser.error("--size must be a positive multiple of 4 (the split factor)")
    text = MM_RELU.format(n=args.size)

    sch = schedule(text)
    sch.trace()
    sch.show()

    rng = np.random.default_rng(0)
    a = rng.random((args.size, args.size), dtype=np.float32)
    b = rng.random((args.size, args.size), dtype=np.float32)
    expected = np.maximum(a @ b, 0)
    scheduled, plain = build(sch), build(Schedule(text))
    ok = all(np.allclose(f(a, b), expected, rtol=1e-4, atol=1e-4) for f in (scheduled, plain))
    print(f"mm_relu: {'OK' if ok else 'MISMATCH'} (n = {args.size})")
    t_plain = measure(lambda: plain(a, b), repeat=args.repeat, min_repeat_ms=20).min
    t_sched = measure(lambda: scheduled(a, b), repeat=args.repeat, min_repeat_ms=20).min
    print(f"Time cost of mm_relu before transformation: {t_plain * 1e3:.3f} ms")
    print(f"Time cost of mm_relu after transformation:  {t_sched * 1e3:.3f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
