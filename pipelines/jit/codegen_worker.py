"""One part of a parallel code generation (parallel_codegen.py), in a process of its own:
read the LLVM-dialect module, keep the part's functions, compile them with MLIR's
ExecutionEngine exactly as the JIT does (same LLVM pipeline and optimization level, the
host's target machine) and write the engine's object code.

    python codegen_worker.py MODULE.mlirbc PART.json OPT_LEVEL OUTPUT.o

``PART.json`` lists the function names of the part. On success the worker prints one JSON
line: its CPU seconds and peak resident set (the JIT reports them: ``CodegenParts``). Why the ExecutionEngine and not
``mlir-translate | opt | llc`` (compiler/package.py's route): the object must hold the code
the serial JIT would have made, and the engine is the JIT. Why a bare script: a worker's
start should cost the MLIR bindings' import only (no tilecraft package, no numpy).

The engine needs an address for every declared symbol before it generates code; the part's
declarations are bound to a dummy one: the object is dumped before it is linked, so no
address reaches the file (the process that loads the parts resolves them).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time

if __package__:  # imported through the package (the wheel check imports every module)
    from .function_split import keep_part, is_defined_function, symbol_name
else:  # run as a script: this folder is sys.path[0], so the split is imported by file, not
    # through the package (whose __init__ would import numpy and the frontend)
    from function_split import keep_part, is_defined_function, symbol_name  # noqa: E402

from mlir import ir  # noqa: E402
from mlir.execution_engine import ExecutionEngine  # noqa: E402

_DUMMY_ADDRESS = 0x1000


def compile_part(module_path: str, names: list[str], opt_level: int, output: str) -> int:
    """Compile the part; the exit status (its failure's message on stderr)."""
    context = ir.Context()
    with open(module_path, "rb") as stream:
        module = ir.Module.parse(stream.read(), context=context)
    keep_part(module, names)
    declared = []
    for op in module.body.operations:
        op = op.operation
        if op.name == "llvm.func" and not is_defined_function(op):
            declared.append(symbol_name(op))
    engine = ExecutionEngine(module, opt_level=opt_level)
    for symbol in declared:
        engine.raw_register_runtime(symbol, ctypes.c_void_p(_DUMMY_ADDRESS))
    engine.initialize()
    if not engine.raw_lookup(names[0]):  # code generation of the whole part happens here
        print(f"the compiled part lacks {names[0]!r}", file=sys.stderr)
        return 1
    partial = output + ".partial"
    engine.dump_to_object_file(partial)
    os.replace(partial, output)
    print(json.dumps({"cpu_s": time.process_time(), "peak_rss_mb": _peak_rss_mb()}))
    return 0


def _peak_rss_mb() -> float:
    """This process's peak resident set since its exec (``VmHWM``; ``ru_maxrss`` would count
    the parent's pages from before the exec)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    module_path, part_path, opt_level, output = argv
    with open(part_path) as stream:
        names = json.load(stream)
    return compile_part(module_path, names, int(opt_level), output)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
