"""The JIT's LLVM optimization level: its compile time against the run time of its code.

    .venv/bin/python benchmarks/jit_levels.py                       # ResNet-50, -O3 vs -O2
    .venv/bin/python benchmarks/jit_levels.py --model bert --levels 3,2,1 --repeat 21

The model is compiled once (through the llvm stage); its lowered module is then JIT-compiled
at each level in this process (``ExecutionEngine`` creation and lookup: CPU and wall
seconds), every build's outputs are compared with the first's, and the builds are timed with
their calls alternating (runtime/timing.py), in CPU time (all threads of the process, steadier
on a loaded machine) and wall time. Why: pipelines/jit/engine.py runs LLVM at ``min(opt_level, 2)``
because -O3 cost 4.5x the CPU of -O2 on ResNet-50 for run times within the noise of a shared
machine (docs/performance.md, round 16); this is the check to rerun on a quiet one.
"""

from __future__ import annotations

import argparse
import ctypes
import io
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet50", choices=("resnet50", "bert", "mobilenetv2"))
    parser.add_argument("--levels", default="3,2")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)

    import numpy as np
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine

    import end_to_end
    import tilecraft
    from tilecraft.pipelines.jit.engine import RUNTIME_LIBRARIES, JitFunction
    from tilecraft.runtime import parallel_runtime, timing
    from tilecraft.runtime.checks import REPORT_SYMBOL, report_address
    from tilecraft.runtime.libraries import runtime_library
    from tilecraft.runtime.memref import CallFrame

    case = {"resnet50": end_to_end.resnet50, "bert": lambda: end_to_end.bert(2),
            "mobilenetv2": end_to_end.mobilenetv2}[args.model]()
    os.environ["TILECRAFT_CODEGEN_WORKERS"] = "0"  # every function's body in llvm_module (parallel_codegen.py)
    compiled = tilecraft.compile(case.model, keep_ir=False, cache=False, specialize_shapes=0, verbose=False)
    buffer = io.BytesIO()
    compiled.llvm_module.operation.write_bytecode(buffer)
    lowered = buffer.getvalue()
    weights, signature = compiled.bound_weights, compiled.signature
    check_table = compiled._function.check_table
    feeds = list(case.feeds.values())
    parallel_runtime.load()
    print(f"{args.model}: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    builds = {}
    for level in (int(text) for text in args.levels.split(",")):
        module = ir.Module.parse(lowered, context=ir.Context())
        wall, cpu = time.perf_counter(), time.process_time()
        engine = ExecutionEngine(module, opt_level=level,
                                 shared_libs=[runtime_library(name) for name in RUNTIME_LIBRARIES])
        if check_table:
            engine.raw_register_runtime(REPORT_SYMBOL, ctypes.c_void_p(report_address()))
        for symbol, array in weights:
            engine.raw_register_runtime(symbol, ctypes.c_void_p(array.ctypes.data))
        engine.initialize()
        build = JitFunction.__new__(JitFunction)  # the engine made above, called as compile's are
        build.signature, build.module, build._engine, build.check_table = signature, module, engine, check_table
        build._entry, build._frame, build.weights = engine.lookup(signature.name), CallFrame(signature), weights
        print(f"-O{level}: JIT {time.process_time() - cpu:.2f} CPU-s, {time.perf_counter() - wall:.2f} s wall",
              flush=True)
        builds[f"-O{level}"] = build
    outputs = {name: build((*feeds,), {}) for name, build in builds.items()}
    first = next(iter(outputs.values()))
    for name, output in outputs.items():
        got = output if isinstance(output, tuple) else (output,)
        want = first if isinstance(first, tuple) else (first,)
        print(f"{name}: largest difference from the first build {max(float(np.max(np.abs(a - b))) for a, b in zip(got, want)):.3g}")
    runners = {name: (lambda build=build: build((*feeds,), {})) for name, build in builds.items()}
    for clock in (time.process_time, time.perf_counter):
        medians = timing.alternating(runners, args.repeat, 0.2, clock=clock, pause_s=0.05)
        print(f"{'CPU' if clock is time.process_time else 'wall'} ms per call: "
              + ", ".join(f"{name} {seconds * 1e3:.2f}" for name, seconds in medians.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
