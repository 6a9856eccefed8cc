"""Which public-suite architectures the C target compiles and runs right: each model of
benchmarks/public_suite.py (the held-out ones included), exported to ONNX as users export it,
compiled with ``target="c"``, built with the host C compiler and run against onnxruntime.

    .venv/bin/python benchmarks/c_coverage.py                  # every architecture, tiny variants
    .venv/bin/python benchmarks/c_coverage.py lstm,unet --full # some, at full size

Why: the C target (docs/c-target.md) promises portable C99 with one planned workspace and no
``malloc``; what a user deploys without Python is whatever architecture they bring, so this is
its coverage check, as benchmarks/cuda_coverage.py is the CUDA target's. Prints one line per
model (ok with seconds, workspace bytes and the largest relative error against onnxruntime, or
the error) and a summary; exits 1 if any model fails or disagrees (rtol/atol of
public_suite.py's check).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime

import tilecraft
from tilecraft.errors import TilecraftError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import public_suite  # noqa: E402


def check(name: str, full: bool) -> tuple[bool, str]:
    """Whether the C build of ``name`` matches onnxruntime, and the line that says so."""
    module, inputs = public_suite.build(name, tiny=not full)
    model = onnx.load_from_string(public_suite.export_onnx(module, inputs))
    arrays = [x.numpy() for x in inputs]
    compiled = tilecraft.compile(model, target="c")
    got = compiled.run(*arrays)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {i.name: a for i, a in zip(model.graph.input, arrays)})
    checks = [public_suite._matches(g, w) for g, w in zip(got, want)]
    error = max(e for _, e in checks)
    return all(ok for ok, _ in checks), f"workspace {compiled.workspace_size} B, rel err {error:.1e}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="?", default="all", help="comma-separated names (default: all)")
    parser.add_argument("--full", action="store_true", help="full-size models (default: tiny variants)")
    args = parser.parse_args(argv)
    names = list(public_suite.ARCHITECTURES) if args.models == "all" else args.models.split(",")
    unknown = [n for n in names if n not in public_suite.ARCHITECTURES]
    if unknown:
        raise SystemExit(f"unknown architecture(s) {unknown}; choose from {', '.join(public_suite.ARCHITECTURES)}")
    failed = 0
    for name in names:
        started = time.perf_counter()
        try:
            ok, detail = check(name, args.full)
        except TilecraftError as error:
            ok, detail = False, f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
        failed += not ok
        print(f"{name:<22} {'ok' if ok else 'FAILED':<7} {time.perf_counter() - started:6.1f} s  {detail}", flush=True)
    print(f"{len(names) - failed} of {len(names)} built and matched onnxruntime on the C target")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
