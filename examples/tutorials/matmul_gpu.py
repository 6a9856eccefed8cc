"""A matmul on the GPU with TE-style `bind`: one output tile per block, one element per thread.

    python examples/tutorials/matmul_gpu.py [--size 256] [--tile 16] [--arch sm_80]

The schedule is the first step of TVM's GPU GEMM tutorials: C's ``i`` and ``j`` loops are
split by ``--tile``, the outer parts bound to ``blockIdx.y`` / ``blockIdx.x``, the inner parts
to ``threadIdx.y`` / ``threadIdx.x``, the reduction ``k`` stays a serial loop in each thread,
and ``decompose_reduction`` puts the zero-fill of C inside the thread loops (C's init is its
own block, so it would otherwise run on the host). ``build(sch, target="cuda")`` makes one
kernel. The scheduled program is checked against numpy on the CPU (its foralls run as loops);
the kernel itself runs only where a GPU is present — otherwise the script compiles and says
so. Shared-memory staging (TVM's ``cache_read(..., "shared")``) is not available to user
schedules; the default CUDA schedule (docs/cuda.md) does it.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import tilecraft
from tilecraft.pipelines.target import Target
from tilecraft.runtime.libraries import cuda_driver_available
from tilecraft.scheduling import (
    Schedule, build, compute, placeholder, reduce_axis, scheduled_pipeline, sum,
)


def schedule(n: int, tile: int) -> Schedule:
    A = placeholder((n, n), name="A")
    B = placeholder((n, n), name="B")
    k = reduce_axis(n, "k")
    C = compute((n, n), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = Schedule(C)
    block = sch.get_block("C")
    i, j, kk = sch.get_loops(block)
    by, ty = sch.split(i, factor=tile)
    bx, tx = sch.split(j, factor=tile)
    sch.reorder(by, bx, ty, tx, kk)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.decompose_reduction(block, kk)
    return sch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="M = N = K (default 256)")
    parser.add_argument("--tile", type=int, default=16, help="threads per block per axis (default 16)")
    parser.add_argument("--arch", default="sm_80", help="CUDA architecture (default sm_80)")
    parser.add_argument("--ptx-lines", type=int, default=16, help="PTX lines to print")
    args = parser.parse_args(argv)
    n = args.size

    sch = schedule(n, args.tile)
    print("\n".join(sch.history))
    sch.show()
    module = build(sch, target=f"cuda -arch={args.arch}")
    ptx = module.ptx()
    print("\n".join(ptx.splitlines()[: args.ptx_lines]))
    print(f"... ({len(ptx.splitlines())} PTX lines, {ptx.count('.entry')} kernel; cubin: "
          f"{'yes' if module.cubin() else 'no (ptxas not found)'})")

    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    expected = a @ b
    # The same scheduled program on the CPU, one worker thread: the foralls run as loops.
    cpu_target = Target(num_threads=1)
    on_cpu = tilecraft.compile(sch.module_bytecode(), target=cpu_target,
                               pipeline=scheduled_pipeline(cpu_target))
    ok = np.allclose(on_cpu(a, b), expected, rtol=1e-4, atol=1e-4)
    print(f"scheduled program on the CPU: {'OK' if ok else 'MISMATCH'}")
    if not cuda_driver_available():
        print("no GPU (CUDA driver) here: the kernel was compiled only, not run")
        return 0 if ok else 1
    on_gpu = np.allclose(module(a, b), expected, rtol=1e-4, atol=1e-4)
    print(f"matmul on the GPU: {'OK' if on_gpu else 'MISMATCH'} (n = {n})")
    return 0 if ok and on_gpu else 1


if __name__ == "__main__":
    sys.exit(main())
