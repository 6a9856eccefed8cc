"""Which models compile for CUDA: the onnx wheel's light model zoo (and any ONNX files given),
each compiled for an sm_XX target, kernels assembled by ptxas where it is installed.

    .venv/bin/python benchmarks/cuda_coverage.py                       # light zoo, sm_90
    .venv/bin/python benchmarks/cuda_coverage.py --arch sm_80 squeezenet densenet
    .venv/bin/python benchmarks/cuda_coverage.py --files model.onnx

Why: issue #47's floor is that every model the CPU path compiles also compiles for the GPU
with no host fallback. Without a GPU this is the check that can run here: the compile
reaches PTX and ptxas accepts every kernel (a GPU run checks the numbers: docs/cuda.md).
Prints one line per model (ok with seconds and kernel count, or the error) and a summary.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import onnx

import tilecraft
from tilecraft.errors import TilecraftError
from tilecraft.targets.cuda import find_ptxas

LIGHT_ZOO = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help="substrings selecting light-zoo models (default: all)")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--files", nargs="*", default=[], help="ONNX files to compile as well")
    args = parser.parse_args(argv)
    paths = [p for p in sorted(glob.glob(os.path.join(LIGHT_ZOO, "*.onnx")))
             if not args.models or any(m in os.path.basename(p) for m in args.models)] + args.files
    print(f"CUDA coverage for {args.arch}; ptxas: {find_ptxas() or 'not installed (PTX only)'}")
    failed = 0
    for path in paths:
        started = time.perf_counter()
        try:
            module = tilecraft.compile(path, target=f"cuda -arch={args.arch}", keep_ir=False)
            kernels = module.ptx().count(".entry")
            print(f"{os.path.basename(path):<32} ok      {time.perf_counter() - started:7.1f} s  "
                  f"{kernels} kernels", flush=True)
        except TilecraftError as error:
            failed += 1
            first = str(error).splitlines()[0][:200]
            print(f"{os.path.basename(path):<32} FAILED  {type(error).__name__}: {first}", flush=True)
    print(f"{len(paths) - failed} of {len(paths)} compiled for {args.arch}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
