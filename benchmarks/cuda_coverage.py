"""Which models compile for CUDA: the onnx wheel's light model zoo (and any ONNX files given),
each compiled for an sm_XX target, kernels assembled by ptxas where it is installed.

    .venv/bin/python benchmarks/cuda_coverage.py                       # light zoo, sm_90
    .venv/bin/python benchmarks/cuda_coverage.py --arch sm_80 squeezenet densenet
    .venv/bin/python benchmarks/cuda_coverage.py --files model.onnx
    .venv/bin/python benchmarks/cuda_coverage.py --public            # benchmarks/public_suite.py's 23
    .venv/bin/python benchmarks/cuda_coverage.py --public swin,gpt2 --full
    .venv/bin/python benchmarks/cuda_coverage.py --package              # and write each one's package
    .venv/bin/python benchmarks/cuda_coverage.py --schedule-options "warp-reduce=1"

Why: issue #47's floor is that every model the CPU path compiles also compiles for the GPU
with no host fallback. Without a GPU this is the check that can run here: the compile
reaches PTX and ptxas accepts every kernel (a GPU run checks the numbers: docs/cuda.md).
Prints one line per model (ok with seconds, kernel count, how many kernels use warp shuffles,
the most registers a kernel uses and how many kernels spill, from ``ptxas -v``; or the error)
and a summary.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time

import onnx

import tilecraft
from tilecraft.errors import TilecraftError
from tilecraft.targets.cuda import cuda_pipeline, find_ptxas
from tilecraft.targets.cuda.lowering import kernel_resources

LIGHT_ZOO = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help="substrings selecting light-zoo models (default: all)")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--files", nargs="*", default=[], help="ONNX files to compile as well")
    parser.add_argument("--public", nargs="?", const="all", metavar="NAMES",
                        help="benchmarks/public_suite.py's architectures instead of the light zoo "
                             "(comma-separated names; default all), exported to ONNX as users do")
    parser.add_argument("--full", action="store_true",
                        help="with --public: the full-size models (default: their tiny variants, "
                             "same op classes, smaller extents)")
    parser.add_argument("--package", action="store_true",
                        help="also write each model's CUDA package (model.so linked with tilecraft's CUDA "
                             "runtime) and print its size")
    parser.add_argument("--schedule-options", default="", metavar="OPTIONS",
                        help='tilecraft-gpu-schedule options, e.g. "warp-reduce=1" (docs/cuda.md, '
                             "Knobs and the tuner)")
    args = parser.parse_args(argv)
    if args.public:
        with tempfile.TemporaryDirectory() as scratch:
            paths = _export_public(args.public, args.full, scratch) + args.files
            return _compile_all(paths, args.arch, args.package, args.schedule_options)
    paths = [p for p in sorted(glob.glob(os.path.join(LIGHT_ZOO, "*.onnx")))
             if not args.models or any(m in os.path.basename(p) for m in args.models)] + args.files
    return _compile_all(paths, args.arch, args.package, args.schedule_options)


def _export_public(names: str, full: bool, folder: str) -> list[str]:
    """Each public-suite architecture as ONNX in ``folder``, exported in a child process (the
    suite's torch export, seeded weights, calibrated BatchNorm)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import public_suite

    chosen = list(public_suite.ARCHITECTURES) if names == "all" else names.split(",")
    paths = []
    for name in chosen:
        if name not in public_suite.ARCHITECTURES:
            raise SystemExit(f"unknown architecture {name!r}; choose from {', '.join(public_suite.ARCHITECTURES)}")
        module, inputs = public_suite.build(name, tiny=not full)
        path = os.path.join(folder, f"{name}.onnx")
        with open(path, "wb") as stream:
            stream.write(public_suite.export_onnx(module, inputs))
        paths.append(path)
    return paths


def _kernels(ptx: str, instruction: str) -> int:
    """How many kernels of one PTX module use ``instruction`` (entries split the text)."""
    return sum(instruction in body for body in ptx.split(".entry")[1:])


def _resources(module, arch: str) -> str:
    """Registers and spills over the model's kernels, from ``ptxas -v`` (empty without ptxas)."""
    if find_ptxas() is None:
        return ""
    used = [r for ptx in module.ptx_modules().values() for r in kernel_resources(ptx, arch).values()]
    spilling = sum(r.spills for r in used)
    return f", registers <= {max(r.registers for r in used)}, {spilling} spilling"


def _arena(module) -> str:
    """The activation arena's size against the buffers it holds (tilecraft-gpu-plan-arena), and
    the device allocations left in the host code (each runs every call: loops' buffers)."""
    from mlir import ir

    planned = total = left = 0
    body = module.llvm_module.operation.regions[0].blocks[0]
    for op in body.operations:
        op = op.operation
        if op.name != "llvm.func" or not op.regions[0].blocks:
            continue
        if "tilecraft.device_arena_bytes" in op.attributes:
            planned += ir.IntegerAttr(op.attributes["tilecraft.device_arena_bytes"]).value
            total += ir.IntegerAttr(op.attributes["tilecraft.device_buffer_bytes"]).value

        def count(inner):
            nonlocal left
            if inner.name == "llvm.call" and "callee" in inner.attributes and \
                    ir.FlatSymbolRefAttr(inner.attributes["callee"]).value == "mgpuMemAlloc":
                left += 1
            return ir.WalkResult.ADVANCE

        op.walk(count)
    return f", arena {planned / 1024:.0f} KiB for {total / 1024:.0f} KiB of buffers, {left} allocation site(s) left"


def _compile_all(paths: list[str], arch: str, package: bool = False,
                 schedule_options: str = "") -> int:
    target = f"cuda -arch={arch}"
    print(f"CUDA coverage for {arch}"
          f"{f' (schedule: {schedule_options})' if schedule_options else ''}; "
          f"ptxas: {find_ptxas() or 'not installed (PTX only)'}")
    failed = 0
    for path in paths:
        started = time.perf_counter()
        try:
            with tempfile.TemporaryDirectory() as scratch:
                package_path = os.path.join(scratch, "model.tar") if package else None
                module = tilecraft.compile(path, target=target, keep_ir=False,
                                           package_path=package_path,
                                           pipeline=cuda_pipeline(target, schedule_options=schedule_options))
                size = f", package {os.path.getsize(package_path) / 2**20:.2f} MiB" if package else ""
            seconds = time.perf_counter() - started
            kernels = module.ptx().count(".entry")
            shuffling = sum(_kernels(ptx, "shfl.sync") for ptx in module.ptx_modules().values())
            print(f"{os.path.basename(path):<32} ok      {seconds:7.1f} s  {kernels} kernels "
                  f"({shuffling} with warp shuffles)"
                  f"{_resources(module, arch)}{_arena(module)}{size}", flush=True)
        except TilecraftError as error:
            failed += 1
            first = str(error).splitlines()[0][:200]
            print(f"{os.path.basename(path):<32} FAILED  {type(error).__name__}: {first}", flush=True)
    print(f"{len(paths) - failed} of {len(paths)} compiled for {arch}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
