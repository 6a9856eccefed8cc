"""Before/after of one ONNX model in one process: packages built by two (or more) trees,
loaded side by side and timed in alternating blocks beside onnxruntime.

    # build each tree's package (the older tree from `git archive REV` first on PYTHONPATH)
    TILECRAFT_NUM_THREADS=2 PYTHONPATH=/tmp/old .venv/bin/tilecraft compile m.onnx -o old.tar
    TILECRAFT_NUM_THREADS=2 .venv/bin/tilecraft compile m.onnx -o new.tar
    .venv/bin/python benchmarks/package_ab.py m.onnx old=old.tar new=new.tar --threads 2 --rounds 15

Why: on this 2-core machine two runs of the public suite (benchmarks/public_suite.py), one
per tree, differ by up to 2x on the same code (docs/performance.md, "After round 19's
merges"), so a change is only visible when both builds run in one process, call blocks
alternating (runtime/timing.py's ``alternating``, with a pause before each block for
onnxruntime's spinning pool). Every package's output is checked against onnxruntime first.
The input is random (seeded) unless ``--input`` names a ``.npy``. No thresholds: the
figures go into docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import onnxruntime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from end_to_end import RUNNER_PAUSE_S, alternating  # noqa: E402

from tilecraft.runtime.package import load_module  # noqa: E402


def _input(session: onnxruntime.InferenceSession, path: str | None) -> np.ndarray:
    if path:
        return np.load(path)
    shape = [d if isinstance(d, int) else 1 for d in session.get_inputs()[0].shape]
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="the ONNX model the packages were compiled from")
    parser.add_argument("packages", nargs="+", metavar="LABEL=PACKAGE", help="packages to compare")
    parser.add_argument("--input", help="the model's input (.npy); default: seeded random")
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime's threads (the packages' are theirs)")
    parser.add_argument("--rounds", type=int, default=9, help="alternating blocks per runtime")
    args = parser.parse_args(argv)

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    session = onnxruntime.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    x = _input(session, args.input)
    feed = {session.get_inputs()[0].name: x}
    reference = session.run(None, feed)[0]
    runners = {"onnxruntime": lambda: session.run(None, feed)}
    for item in args.packages:
        label, _, path = item.partition("=")
        if not path:
            parser.error(f"expected LABEL=PACKAGE, got {item!r}")
        module = load_module(path)
        out = module(x)
        out = np.asarray(out[0] if isinstance(out, (list, tuple)) else out)
        print(f"{label}: largest difference from onnxruntime {float(np.abs(out - reference).max()):.3g}")
        runners[label] = lambda module=module: module(x)
    medians = alternating(runners, args.rounds, min_sample_s=0.1, pause_s=RUNNER_PAUSE_S)
    base = medians["onnxruntime"]
    first = next(label for label in runners if label != "onnxruntime")
    for label, seconds in medians.items():
        print(f"{label:<14} {seconds * 1e3:9.2f} ms   / onnxruntime {seconds / base:5.2f}"
              f"   / {first} {seconds / medians[first]:6.3f}")


if __name__ == "__main__":
    main()
