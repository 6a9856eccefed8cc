"""The PyTorch model zoo: tilecraft.torch.compile vs PyTorch eager, measured in the same run.

    .venv/bin/python benchmarks/torch_models.py
    .venv/bin/python benchmarks/torch_models.py --models mlc_cnn,resnet18 --repeat 10

The models are those of tests/models/zoo.py (random seeded weights, randomized batch-norm
statistics). Both sides use the same number of threads: ``--threads`` (default: all cores)
sets ``torch.set_num_threads`` and ``TILECRAFT_NUM_THREADS``. For each model: compile time
(export + import + pipeline + JIT), median latency of each side
(tilecraft.runtime.timing.measure, one warm-up call first), the ratio tilecraft / eager
(below 1: tilecraft is faster), and the largest difference from eager. Eager runs under
``torch.no_grad()``. No thresholds: figures are quoted in notes and compared across changes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "models"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlc_cnn,resnet18,resnet50,mobilenet_v2,bert_encoder,gpt2_block")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    os.environ["TILECRAFT_NUM_THREADS"] = str(args.threads)  # read when the target is parsed

    import torch

    import tilecraft
    from tilecraft.runtime.timing import measure
    from zoo import ZOO  # tests/models/zoo.py

    torch.set_num_threads(args.threads)
    print(f"PyTorch {torch.__version__} eager vs tilecraft (target llvm), {args.threads} thread(s) each, "
          f"median of {args.repeat}")
    print(f"{'model':<14} {'compile s':>10} {'tilecraft ms':>13} {'eager ms':>9} {'ratio':>7} {'max |diff|':>11}")
    for name in args.models.split(","):
        build, inputs = ZOO[name]
        model, example = build(), inputs()
        try:
            start = time.perf_counter()
            compiled = tilecraft.torch.compile(model, example, keep_ir=False, cache=False)
            compile_seconds = time.perf_counter() - start
        except tilecraft.TilecraftError as error:
            print(f"{name:<14} failed: {str(error).splitlines()[0]}")
            continue
        with torch.no_grad():
            ours = measure(lambda: compiled(*example), repeat=args.repeat, min_repeat_ms=100)
            eager = measure(lambda: model(*example), repeat=args.repeat, min_repeat_ms=100)
            got = torch.utils._pytree.tree_leaves(compiled(*example))
            want = torch.utils._pytree.tree_leaves(model(*example))
        diff = max(float((a - b).abs().max()) for a, b in zip(got, want))
        print(f"{name:<14} {compile_seconds:>10.1f} {ours.median * 1e3:>13.2f} {eager.median * 1e3:>9.2f} "
              f"{ours.median / eager.median:>7.2f} {diff:>11.2e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
