"""TVM's "Use Tensorize to Leverage Hardware Intrinsics": a tile computed by a C micro-kernel.

    python examples/tutorials/tensorize.py [--size 512] [--repeat 10]

Part 1 follows the tutorial: ``C[i, j] = sum_k A[i, k] * B[j, k]`` (B transposed), a GEMV
intrinsic (``c[0, j] += sum_k a[0, k] * b[j, k]``, 16 outputs, the whole reduction) written in
C and compiled at run time, and a schedule whose inner tile (``yi`` and ``k``) is that GEMV:
``split``, ``reorder``, ``tensorize``. Its *definition* is a TE compute of the tile's shape,
as TVM's ``te.decl_tensor_intrin`` takes one; ``tensorize`` checks the block computes the same
thing on a tile of that shape.

Part 2 is what a micro-kernel is for: ``C += A B`` on 8x32 tiles of C, the reduction split into
panels of 64 outside the tile (so the kernel *updates* C's tile, reading it: TVM's ``update``;
the init stays a ``linalg.fill``, placed by ``decompose_reduction``). The kernel keeps the 8x32
accumulators in registers (plain C, vectorized by ``-O3 -march=native``); the same schedule
without ``tensorize`` leaves the tile to tilecraft's scalar loops.

The C functions receive MLIR memref descriptors of the operands' *slices*: strided views
into the whole matrices, so they index with ``strides`` (and the micro-kernel falls back to a
plain loop when the rows are not contiguous).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import tilecraft.scheduling as tc
from tilecraft.runtime.timing import measure

DESCRIPTOR = r"""
#include <stdint.h>
/* MLIR's C interface: a rank-2 memref descriptor. */
typedef struct { float *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } M2;
"""

GEMV = DESCRIPTOR + r"""
/* c[0, j] += sum_k a[0, k] * b[j, k] */
void gemv_update(M2 *a, M2 *b, M2 *c) {
  const float *A = a->aligned + a->offset, *B = b->aligned + b->offset;
  float *C = c->aligned + c->offset;
  for (int64_t j = 0; j < c->sizes[1]; ++j) {
    float acc = C[j * c->strides[1]];
    for (int64_t k = 0; k < a->sizes[1]; ++k)
      acc += A[k * a->strides[1]] * B[j * b->strides[0] + k * b->strides[1]];
    C[j * c->strides[1]] = acc;
  }
}
"""

MICRO_KERNEL = DESCRIPTOR + r"""
#define MR 8
#define NR 32
/* c (MR x NR) += a (MR x K) b (K x NR), the accumulators in registers */
void matmul_8x32_update(M2 *a, M2 *b, M2 *c) {
  const int64_t K = a->sizes[1];
  const float *A = a->aligned + a->offset, *B = b->aligned + b->offset;
  float *C = c->aligned + c->offset;
  const int64_t as0 = a->strides[0], as1 = a->strides[1], bs0 = b->strides[0], cs0 = c->strides[0];
  if (b->strides[1] != 1 || c->strides[1] != 1) {  /* not row-contiguous: a plain loop */
    for (int64_t i = 0; i < MR; ++i)
      for (int64_t j = 0; j < NR; ++j)
        for (int64_t k = 0; k < K; ++k)
          C[i * cs0 + j * c->strides[1]] += A[i * as0 + k * as1] * B[k * bs0 + j * b->strides[1]];
    return;
  }
  float acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = C[i * cs0 + j];
  for (int64_t k = 0; k < K; ++k) {
    const float *row = B + k * bs0;
    for (int i = 0; i < MR; ++i) {
      const float aik = A[i * as0 + k * as1];
      for (int j = 0; j < NR; ++j) acc[i][j] += aik * row[j];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) C[i * cs0 + j] = acc[i][j];
}
"""

FACTOR, MR, NR, KC = 16, 8, 32, 64


def gemv_intrinsic(L: int) -> tc.TensorIntrin:
    """The tutorial's ``intrin_gemv(16, L)``: its definition is a 1x16xL tile of C."""
    a = tc.placeholder((1, L), name="a")
    b = tc.placeholder((FACTOR, L), name="b")
    k = tc.reduce_axis(L, name="k")
    c = tc.compute((1, FACTOR), lambda i, j: tc.sum(a[i, k] * b[j, k], axis=k), name="c")
    return tc.register_intrinsic("gemv_update", c, tc.compile_c(GEMV, name="gemv_update"))


def micro_kernel_intrinsic() -> tc.TensorIntrin:
    a = tc.placeholder((MR, KC), name="a")
    b = tc.placeholder((KC, NR), name="b")
    k = tc.reduce_axis(KC, name="k")
    c = tc.compute((MR, NR), lambda i, j: tc.sum(a[i, k] * b[k, j], axis=k), name="c")
    library = tc.compile_c(MICRO_KERNEL, name="matmul_8x32", flags=("-O3", "-march=native"))
    return tc.register_intrinsic("matmul_8x32_update", c, library)


def part1(n: int, repeat: int, rng: np.random.Generator) -> bool:
    N, M, L = n, n, 64
    A = tc.placeholder((N, L), name="A")
    B = tc.placeholder((M, L), name="B")
    k = tc.reduce_axis(L, name="k")
    C = tc.compute((N, M), lambda i, j: tc.sum(A[i, k] * B[j, k], axis=k), name="C")
    gemv_intrinsic(L)

    sch = tc.Schedule(C)
    block = sch.get_block("C")
    x, y, z = sch.get_loops(block)
    yo, yi = sch.split(y, factor=FACTOR)
    sch.reorder(x, yo, yi, z)
    sch.tensorize(yi, "gemv_update")
    sch.trace()
    sch.show()

    f = tc.build(sch)
    a = rng.random((N, L), dtype=np.float32)
    b = rng.random((M, L), dtype=np.float32)
    ok = np.allclose(f(a, b), a @ b.T, rtol=1e-4, atol=1e-4)
    seconds = measure(lambda: f(a, b), repeat=repeat, min_repeat_ms=20).min
    print(f"gemv tensorize: {'OK' if ok else 'MISMATCH'} ({N}x{M}x{L}), {seconds * 1e3:.3f} ms")
    return ok


def matmul_schedule(n: int, tensorize: bool) -> tc.Schedule:
    A = tc.placeholder((n, n), name="A")
    B = tc.placeholder((n, n), name="B")
    k = tc.reduce_axis(n, name="k")
    sch = tc.Schedule(tc.compute((n, n), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C"))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, factor=MR)
    jo, ji = sch.split(j, factor=NR)
    ko, ki = sch.split(k, factor=KC)
    sch.reorder(io, jo, ko, ii, ji, ki)
    sch.decompose_reduction(block, ko)        # C's tile zeroed once, before the k panels
    if tensorize:
        sch.tensorize(ii, "matmul_8x32_update")
    return sch


def part2(n: int, repeat: int, rng: np.random.Generator) -> bool:
    micro_kernel_intrinsic()
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    expected = a @ b
    tensorized = matmul_schedule(n, tensorize=True)
    print("\n".join(tensorized.history[-2:]))
    ok, times = True, {}
    for name, sch in (("same loops, no tensorize", matmul_schedule(n, tensorize=False)),
                      ("tensorized (8x32 micro-kernel)", tensorized)):
        f = tc.build(sch)
        ok &= bool(np.allclose(f(a, b), expected, rtol=1e-3, atol=1e-3))
        times[name] = measure(lambda: f(a, b), repeat=repeat, min_repeat_ms=20).min
    numpy_time = measure(lambda: a @ b, repeat=repeat, min_repeat_ms=20).min
    flops = 2 * n ** 3
    print(f"matmul {n}^3: {'OK' if ok else 'MISMATCH'}")
    for name, seconds in [*times.items(), ("numpy (OpenBLAS)", numpy_time)]:
        print(f"  {name:32s} {seconds * 1e3:9.3f} ms  {flops / seconds / 1e9:7.1f} GFLOPS")
    first, second = times.values()
    print(f"  speedup of tensorize: {first / second:.1f}x")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512, help="matrix size (a multiple of 64)")
    parser.add_argument("--repeat", type=int, default=10, help="timed repeats")
    args = parser.parse_args(argv)
    if args.size <= 0 or args.size % 64:
        parser.error("--size must be a positive multiple of 64 (the tiles: 16, 8x32, k by 64)")
    rng = np.random.default_rng(0)
    ok = part1(args.size, args.repeat, rng)
    ok &= part2(args.size, args.repeat, rng)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
