"""fast_math=True against the default: the same PyTorch models compiled both ways, timed in
alternating rounds in one process (runtime/timing.py's ``alternating``), with the outputs'
largest difference.

    .venv/bin/python benchmarks/fast_math.py [--repeat 15] [--clock process|wall]

The models: a GELU-heavy MLP (1024 tokens: Linear 64 -> 1024, GELU, Linear 1024 -> 64; the
GELU's 2^20 elements against 268 MFLOP of matmuls), with the exact and the tanh GELU, and
GELU, tanh and sigmoid alone on 2^20 elements. (BERT-base's feed-forward block, 128x768 ->
3072, spends under 2 % of its time in its GELU: no difference shows there.) Only ratios from one run carry: docs/performance.md ("Fast math") records one.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import tilecraft.torch
from tilecraft.runtime.timing import alternating


class FeedForward(torch.nn.Module):
    def __init__(self, approximate: str) -> None:
        super().__init__()
        self.up, self.down = torch.nn.Linear(64, 1024), torch.nn.Linear(1024, 64)
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x), approximate=self.approximate))


class Elementwise(torch.nn.Module):
    def __init__(self, function) -> None:
        super().__init__()
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x)


def models() -> dict[str, tuple[torch.nn.Module, torch.Tensor]]:
    torch.manual_seed(0)
    tokens, vector = torch.randn(1024, 64), torch.randn(1 << 20) * 4
    return {
        "MLP 64-1024-64, exact GELU": (FeedForward("none"), tokens),
        "MLP 64-1024-64, tanh GELU": (FeedForward("tanh"), tokens),
        "GELU (2^20)": (Elementwise(torch.nn.functional.gelu), vector),
        "tanh (2^20)": (Elementwise(torch.tanh), vector),
        "sigmoid (2^20)": (Elementwise(torch.sigmoid), vector),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--clock", choices=("process", "wall"), default="process",
                        help="process: CPU time of the process's threads (steadier on a shared "
                             "machine, runtime/timing.py); wall: perf_counter")
    args = parser.parse_args()
    print(f"medians of {args.repeat} alternating rounds, {args.clock} time per call")
    print(f"{'model':34s} {'default':>10s} {'fast_math':>10s} {'speedup':>8s} {'max |diff|':>10s}")
    for name, (model, x) in models().items():
        model = model.eval()
        compiled = {fast: tilecraft.torch.compile(model, (x,), fast_math=fast) for fast in (False, True)}
        clock = time.process_time if args.clock == "process" else time.perf_counter
        medians = alternating({str(fast): (lambda m=m: m(x)) for fast, m in compiled.items()},
                              repeat=args.repeat, clock=clock)
        difference = np.abs(compiled[True](x).numpy() - compiled[False](x).numpy()).max()
        print(f"{name:34s} {medians['False'] * 1e3:8.3f}ms {medians['True'] * 1e3:8.3f}ms "
              f"{medians['False'] / medians['True']:7.2f}x {difference:10.2e}", flush=True)


if __name__ == "__main__":
    main()
