"""Where a SiLU epilogue's time goes, and the sigmoid lowerings A/B: EfficientNet's heaviest
task alone (a 1x1 convolution, 16 -> 96 channels at 112x112, bias, then the activation), one
thread, thread-CPU time, variants alternating in blocks in one process.

    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/sigmoid_epilogue.py [--rounds 9] [--asm DIR]

The model takes and returns NHWC tensors (a permute on each side, which the layout pass
folds away), so the timed code is the convolution with its epilogue. Variants (each compiles
the same PyTorch model; ``torch.export`` writes SiLU as ``sigmoid`` and ``mul``, and the
sigmoid's entry of the ATen table is swapped for the variant's):

- ``relu``: ``max(x, 0)``, the floor (MobileNetV2's layer: ReLU6 is as cheap).
- ``silu``: the default build (``elementwise.sigmoid``: ``1 / (1 + exp(-x))``, a ``vdivps``).
- ``silu-no-rows``: the same without tilecraft-elementwise-by-rows
  (pipelines/vector/row_chains.py): the epilogue reaches LLVM op by op, as before round 29.
- ``silu-estimate``: the reciprocal-estimate sigmoid tried and dropped (:func:`estimate_sigmoid`).
- ``exp-only`` and ``div-only``: ``x * exp(-|x|)`` and ``x / (1 + |x|)``, not sigmoids:
  what the exp alone and the division alone cost on top of ReLU's epilogue.

Prints, per variant, the median of the round medians (ms per call), the spread of the round
medians (min-max) and the ratio to ``silu-no-rows`` taken round by round (median, min-max),
plus the largest difference of each real SiLU against numpy's. ``--asm DIR`` writes each
variant's object file (``CompiledModule.dump_object_file``) for ``objdump -d``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Callable

import numpy as np
import torch
from mlir import ir
from mlir.dialects import arith, math

import tilecraft.torch
from tilecraft.compiler.compile import _pipeline
from tilecraft.compiler.options import CompileOptions
from tilecraft.pipelines.pipeline import Pipeline
from tilecraft.pipelines.vector.row_chains import ELEMENTWISE_BY_ROWS
from tilecraft.frontend.torch.ops import elementwise as torch_elementwise
from tilecraft.frontend.torch.ops.table import ATEN_OPS
from tilecraft.ir import elementwise

ScalarFn = Callable[[ir.Value], ir.Value]


def estimate_sigmoid(x: ir.Value) -> ir.Value:
    """Tried and dropped in round 29: ``1 / (1 + e)`` for x >= 0, ``e / (1 + e)`` below, with
    ``e = exp(-|x|)``: the divisor lies in [1, 2], so the division may carry
    ``fastmath<arcp,ninf,contract>`` and LLVM makes it ``vrcp14ps`` and one Newton-Raphson
    step (two FMAs) instead of ``vdivps``."""
    one = elementwise.like(1, x)
    e = math.exp(arith.negf(math.absf(x)))
    r = arith.divf(one, arith.addf(one, e), fastmath=ir.Attribute.parse("#arith.fastmath<arcp,ninf,contract>"))
    return arith.select(elementwise.compare("lt", x, elementwise.like(0, x)), arith.mulf(e, r), r)


def _exp_only(x: ir.Value) -> ir.Value:
    return math.exp(arith.negf(math.absf(x)))


def _division_only(x: ir.Value) -> ir.Value:
    one = elementwise.like(1, x)
    return arith.divf(one, arith.addf(one, math.absf(x)))


class Conv1x1(torch.nn.Module):
    def __init__(self, activation: torch.nn.Module) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 96, 1)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.conv(x.permute(0, 3, 1, 2))).permute(0, 2, 3, 1)


# name -> (torch activation, the sigmoid the SiLU lowers with (None: the tree's own),
# whether the pipeline runs tilecraft-elementwise-by-rows)
VARIANTS: dict[str, tuple[type[torch.nn.Module], ScalarFn | None, bool]] = {
    "relu": (torch.nn.ReLU, None, True),
    "silu": (torch.nn.SiLU, None, True),
    "silu-no-rows": (torch.nn.SiLU, None, False),
    "silu-estimate": (torch.nn.SiLU, estimate_sigmoid, True),
    "exp-only": (torch.nn.SiLU, _exp_only, True),
    "div-only": (torch.nn.SiLU, _division_only, True),
}


def pipeline(rows: bool) -> Pipeline:
    """The default pipeline, without tilecraft-elementwise-by-rows unless ``rows``."""
    default = _pipeline(CompileOptions(cache=False))
    if rows:
        return default
    return default.replace("vector", [p for p in default.stage("vector").passes if p != ELEMENTWISE_BY_ROWS])


def compile_variant(name: str, x: torch.Tensor) -> tuple[Callable[[torch.Tensor], torch.Tensor], torch.nn.Module]:
    """The variant compiled (no compile cache), and its PyTorch model."""
    activation, sigmoid, rows = VARIANTS[name]
    torch.manual_seed(0)
    model = Conv1x1(activation()).eval()
    own = ATEN_OPS["aten.sigmoid.default"]
    if sigmoid is not None:
        ATEN_OPS["aten.sigmoid.default"] = torch_elementwise._float_unary(sigmoid)
    try:
        # No compile cache: its key digests the source files, not the swapped handler.
        return tilecraft.torch.compile(model, (x,), cache=False, pipeline=pipeline(rows)), model
    finally:
        ATEN_OPS["aten.sigmoid.default"] = own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--block-s", type=float, default=0.2, help="seconds of calls per block")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--asm", help="folder for each variant's object file")
    args = parser.parse_args()
    if os.environ.get("TILECRAFT_NUM_THREADS") != "1":
        parser.error("run with TILECRAFT_NUM_THREADS=1 (the thread-CPU clock counts one thread)")
    torch.manual_seed(1)
    x = torch.randn(1, 112, 112, 16) * 2
    names = args.variants.split(",")
    compiled = {}
    for name in names:
        compiled[name], model = compile_variant(name, x)
        if not name.endswith("-only"):
            with torch.no_grad():
                expected = model(x).double().numpy()
            got = compiled[name](x).numpy()
            print(f"{name}: max |diff| against PyTorch {np.abs(got - expected).max():.2e}")
        if args.asm:
            os.makedirs(args.asm, exist_ok=True)
            compiled[name].compiled.dump_object_file(os.path.join(args.asm, f"{name}.o"))
    counts = {}
    for name, fn in compiled.items():
        fn(x)
        start = time.thread_time()
        fn(x)
        counts[name] = max(1, int(args.block_s / max(time.thread_time() - start, 1e-6)))
    rounds: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(args.rounds):
        for name, fn in compiled.items():
            fn(x)
            start = time.thread_time()
            for _ in range(counts[name]):
                fn(x)
            rounds[name].append((time.thread_time() - start) / counts[name])
    print(f"load average {os.getloadavg()}; {args.rounds} rounds, thread-CPU ms per call")
    anchor = rounds.get("silu-no-rows")
    for name in names:
        values = rounds[name]
        line = (f"{name:14s} {statistics.median(values) * 1e3:7.3f} ms "
                f"(rounds {min(values) * 1e3:.3f}-{max(values) * 1e3:.3f})")
        if anchor is not None:
            ratios = [a / v for a, v in zip(anchor, values)]
            line += (f"  no-rows/this {statistics.median(ratios):.3f}x "
                     f"({min(ratios):.3f}-{max(ratios):.3f})")
        print(line, flush=True)


if __name__ == "__main__":
    main()
