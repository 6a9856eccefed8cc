"""TVM's "Writing Tunable Templates and Using the Auto-tuner" (the AutoTVM matmul template).

    python examples/tutorials/autotvm_matmul.py [--size 512] [--trials 10] [--records FILE]

1. define a tunable matmul template (two splits, a loop order, a vectorize knob),
2. create a task from it and print its config space,
3. tune it with the XGBoost tuner for a few trials, every measurement recorded,
4. build the best config under ``apply_history_best`` and check it against numpy.

The differences from TVM: the config comes from ``tilecraft.tuning.get_config()`` as in
AutoTVM, loops come from ``s.get_loops(s.get_block("C"))`` (TensorIR's spelling), and a
config is recorded as the index of each knob's candidate (see docs/scheduling.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

import tilecraft
from tilecraft.scheduling import Schedule, compute, placeholder, reduce_axis, sum
from tilecraft.tuning.measure import RunnerOptions


@tilecraft.template("tutorial/matmul")
def matmul(N: int, L: int, M: int, dtype: str):
    A = placeholder((N, L), dtype, name="A")
    B = placeholder((L, M), dtype, name="B")
    k = reduce_axis((0, L), "k")
    C = compute((N, M), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
    s = Schedule(C)
    y, x, kk = s.get_loops(s.get_block("C"))

    cfg = tilecraft.tuning.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2, policy="power2", max_factor=64)
    cfg.define_knob("vec", [0, 1])

    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s.reorder(yo, xo, kk, yi, xi)
    if cfg["vec"].val:
        s.vectorize(xi)
    return s, [A, B, C]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512, help="N = L = M (default 512)")
    parser.add_argument("--trials", type=int, default=10, help="measurements, the default's included")
    parser.add_argument("--tuner", default="xgb", choices=tilecraft.tuning.TUNERS)
    parser.add_argument("--records", type=Path, default=None, help="the records file (JSON lines)")
    args = parser.parse_args(argv)
    n = args.size
    records = args.records or Path(tempfile.mkdtemp(prefix="autotvm_matmul_")) / "matmul.jsonl"

    task = tilecraft.tuning.task("tutorial/matmul", args=(n, n, n, "float32"), target="llvm",
                                 flops=2 * n**3)
    print(task.config_space)

    options = RunnerOptions(repeat=3, min_repeat_ms=20, timeout=120)
    result = tilecraft.tuning.tune_template(task, tuner=args.tuner, trials=args.trials,
                                            records=records, options=options, progress=True)
    print(result)
    print(f"records: {records}")

    with tilecraft.tuning.apply_history_best(records):
        s, _tensors = matmul(n, n, n, "float32")
    print("best schedule:", *s.history[-4:], sep="\n  ")
    module = tilecraft.build(s)
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    error = float(np.max(np.abs(module(a, b) - a @ b)) / np.max(np.abs(a @ b)))
    print(f"relative error vs numpy: {error:.2e}")
    return 0 if error < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
