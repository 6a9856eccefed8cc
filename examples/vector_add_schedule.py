"""TVM's vector-add schedule: split by the core count, parallel outer loop, vectorized inner.

    python examples/vector_add_schedule.py [--n 4194304] [--out DIR]

C[i] = A[i] + B[i] is split into one chunk per core (``parallel``: an ``scf.forall`` run on
the async runtime's threads), each chunk into 16-lane vectors (``vectorize``). Prints the
transform script, the loops it makes, and the time next to the unscheduled loop and numpy;
the script is written so ``tilecraft-opt <file> --transform-interpreter`` reproduces it.

Save and load, as TVM's ``fadd.export_library(path)`` / ``tvm.runtime.load_module(path)``:
``export_library`` writes the built function as a package (a tar with the shared library
and a manifest; a ``.so`` path would get the library alone), which
``tilecraft.runtime.load_module`` loads and runs without MLIR. The timings come from
``time_evaluator``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from tilecraft.pipelines.target import Target
from tilecraft.runtime import load_module
from tilecraft.runtime.timing import time_evaluator
from tilecraft.scheduling import Schedule, build, compute, placeholder

LANES = 16  # one AVX-512 register of float32


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 22, help="vector length (default 2**22)")
    parser.add_argument("--out", type=Path, default=None, help="where to write the script")
    args = parser.parse_args(argv)
    n = args.n
    cores = Target.parse("llvm").num_threads

    A = placeholder((n,), name="A")
    B = placeholder((n,), name="B")
    C = compute((n,), lambda i: A[i] + B[i], name="C")

    baseline = Schedule(C)
    sch = Schedule(C)
    (i,) = sch.get_loops(sch.get_block("C"))
    outer, inner = sch.split(i, nparts=cores, pad=n % cores != 0)
    sch.parallel(outer)
    body, lanes = sch.split(inner, factor=LANES, pad=inner.extent % LANES != 0)
    sch.vectorize(lanes)
    sch.trace()
    sch.show()
    out = args.out or Path(tempfile.mkdtemp(prefix="vector_add_"))
    out.mkdir(parents=True, exist_ok=True)
    script = sch.save(out / "vector_add.mlir")

    rng = np.random.default_rng(0)
    a = rng.random(n, dtype=np.float32)
    b = rng.random(n, dtype=np.float32)
    scheduled, plain = build(sch), build(baseline)
    ok = np.array_equal(scheduled(a, b), a + b) and np.array_equal(plain(a, b), a + b)
    print(f"vector add: {'OK' if ok else 'MISMATCH'} (n = {n}, {cores} cores)")

    # Save the scheduled module as a package, load it back, run it (no MLIR needed to load).
    package = scheduled.export_library(out / "vector_add.tar")
    loaded = load_module(package)
    loaded_ok = np.array_equal(loaded(a, b), a + b)
    ok = ok and loaded_ok
    print(f"saved to {package}, loaded: {loaded}: {'OK' if loaded_ok else 'MISMATCH'}")
    t_plain = plain.time_evaluator(number=1, repeat=5, min_repeat_ms=20)(a, b).min
    t_sched = scheduled.time_evaluator(number=1, repeat=5, min_repeat_ms=20)(a, b).min
    t_numpy = time_evaluator(np.add, number=1, repeat=5, min_repeat_ms=20)(a, b).min
    for title, seconds in (("unscheduled", t_plain), ("scheduled", t_sched), ("numpy", t_numpy)):
        print(f"  {title:<12} {seconds * 1e3:9.3f} ms  {3 * 4 * n / seconds / 1e9:6.1f} GB/s  "
              f"speedup vs unscheduled {t_plain / seconds:5.2f}x")
    print(f"replay: tilecraft-opt {script} --transform-interpreter")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
