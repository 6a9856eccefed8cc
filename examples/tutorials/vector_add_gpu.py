"""TVM's vector add on the GPU: split, bind to blockIdx.x / threadIdx.x, build for cuda.

    python examples/tutorials/vector_add_gpu.py [--n 1048576] [--threads 64] [--arch sm_80]

The schedule is TVM's (``tutorial/tensor_expr_get_started``, "Targeting Vector Addition for
GPUs"): C's loop is split by ``--threads``, the outer loop bound to ``blockIdx.x``, the inner
one to ``threadIdx.x``. ``bind`` makes both loops ``scf.forall`` with ``#gpu.block<x>`` /
``#gpu.thread<x>`` mappings; ``build(sch, target="cuda")`` turns them into one kernel
(``gpu.launch``), lowers it to PTX with LLVM's NVPTX backend and, where ptxas is installed,
assembles a cubin. The script prints the trace, the loops, the head of the PTX, then runs the
kernel and checks it against numpy when a GPU (CUDA driver) is present; without one it only
compiles, and says so.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tilecraft.runtime.libraries import cuda_driver_available
from tilecraft.scheduling import Schedule, build, compute, placeholder


def schedule(n: int, threads: int) -> Schedule:
    A = placeholder((n,), name="A")
    B = placeholder((n,), name="B")
    C = compute((n,), lambda i: A[i] + B[i], name="C")
    sch = Schedule(C)
    (i,) = sch.get_loops(sch.get_block("C"))
    bx, tx = sch.split(i, factor=threads)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 20, help="vector length (default 2**20)")
    parser.add_argument("--threads", type=int, default=64, help="threads per block (default 64)")
    parser.add_argument("--arch", default="sm_80", help="CUDA architecture (default sm_80)")
    parser.add_argument("--ptx-lines", type=int, default=20, help="PTX lines to print")
    args = parser.parse_args(argv)

    sch = schedule(args.n, args.threads)
    sch.trace()
    sch.show()
    module = build(sch, target=f"cuda -arch={args.arch}")
    ptx = module.ptx()
    print("\n".join(ptx.splitlines()[: args.ptx_lines]))
    print(f"... ({len(ptx.splitlines())} PTX lines; cubin: "
          f"{'yes' if module.cubin() else 'no (ptxas not found)'})")

    if not cuda_driver_available():
        print("no GPU (CUDA driver) here: compiled only, not run")
        return 0
    rng = np.random.default_rng(0)
    a = rng.random(args.n, dtype=np.float32)
    b = rng.random(args.n, dtype=np.float32)
    ok = np.array_equal(module(a, b), a + b)
    print(f"vector add on the GPU: {'OK' if ok else 'MISMATCH'} (n = {args.n})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
