"""Where a cold compile's CPU time goes, below the stage level (issue #43): the schedule
stage per transform application, and the JIT per LLVM function.

    PYTHONPATH=<checkout parent> python benchmarks/compile_profile.py resnet50
    PYTHONPATH=<checkout parent> python benchmarks/compile_profile.py densenet121 --codegen-top 8

One light-zoo model (benchmarks/onnx_models.py, seeded random weights) is compiled once,
cold, in this process, ``cache=False, keep_ir=False``, with three probes (CPU clock,
``time.process_time``):

- **schedule**: every transform-interpreter application of ``tilecraft-schedule``
  (schedule/apply.py's ``apply_if_valid``): its count, the CPU seconds of the checkpoint
  (``scratch_copy``), of the interpreter and of a restore, and the operations in the module
  when it ran (an application's cost grows with the module when its patterns walk the
  whole function);
- **LLVM module**: each defined ``llvm.func``'s operation count, and how many bodies are
  distinct (what ``tilecraft-merge-identical-functions`` left: should be one each);
- **codegen per function** (``--codegen-top N``): the N largest functions each JIT-compiled
  alone (the module with every other function a declaration, undefined symbols bound to a
  dummy address, nothing run), CPU seconds of ``ExecutionEngine`` creation (LLVM's
  optimizer) and of the first ``lookup`` (code generation), against the whole module's.

Prints a report; no thresholds (figures go into docs/performance.md).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import ctypes
import os
import pstats
import sys
import time

import numpy as np  # noqa: F401  (onnx_models needs it loaded first)


def _cpu() -> float:
    return time.process_time()


class ScheduleProbe:
    """Wraps schedule/apply.py's checkpoint, interpreter call and restore with CPU timers."""

    def __init__(self) -> None:
        from mlir.dialects.transform import interpreter
        from tilecraft.schedule import apply

        self.calls: list[tuple[str, int, float, float, float]] = []  # name, ops, copy, apply, restore
        self._apply, self._interpreter = apply, interpreter
        self._original = (apply.scratch_copy, interpreter.apply_named_sequence, apply.restore)
        self._passes = (apply.plan_module, apply.apply_schedule)
        self.planning = self.applying = self.counting = 0.0
        plan_module, apply_schedule = self._passes

        apply.plan_module = self._adding_cpu_to("planning", plan_module)
        apply.apply_schedule = self._adding_cpu_to("applying", apply_schedule)
        self._copy = self._run = self._restore = 0.0
        self._sequence_ops = 0
        scratch_copy, apply_named_sequence, restore = self._original

        def timed_copy(module):
            started = _cpu()
            result = scratch_copy(module)
            self._copy = _cpu() - started
            counting = _cpu()
            self._sequence_ops = _count_ops(result[1])
            self.counting += _cpu() - counting
            return result

        def timed_apply(payload, sequence, transform_module):
            started = _cpu()
            try:
                return apply_named_sequence(payload, sequence, transform_module)
            finally:
                self._run = _cpu() - started
                name = sequence.attributes["sym_name"]
                self.calls.append((str(name).strip('"'), self._sequence_ops, self._copy, self._run, 0.0))
                self._copy = 0.0

        def timed_restore(module, checkpoint):
            started = _cpu()
            restore(module, checkpoint)
            name, ops, copy, run, _ = self.calls[-1]
            self.calls[-1] = (name, ops, copy, run, _cpu() - started)

        apply.scratch_copy, interpreter.apply_named_sequence, apply.restore = timed_copy, timed_apply, timed_restore

    def _adding_cpu_to(self, attribute: str, function):
        """``function``, adding the CPU seconds of each call to ``self.<attribute>``."""
        def timed(*args, **kwargs):
            started = _cpu()
            try:
                return function(*args, **kwargs)
            finally:
                setattr(self, attribute, getattr(self, attribute) + _cpu() - started)
        return timed

    def close(self) -> None:
        self._apply.scratch_copy, self._interpreter.apply_named_sequence, self._apply.restore = self._original
        self._apply.plan_module, self._apply.apply_schedule = self._passes

    def report(self) -> None:
        if not self.calls:
            print("schedule: no transform applications seen")
            return
        copy = sum(c[2] for c in self.calls)
        run = sum(c[3] for c in self.calls)
        restored = [c for c in self.calls if c[4] > 0]
        print(f"schedule: planning {self.planning:.2f} CPU s, applying the plans {self.applying:.2f} CPU s "
              f"(of which this probe's op counts {self.counting:.2f} s)")
        print(f"  {len(self.calls)} transform applications; checkpoint copies {copy:.2f} CPU s, "
              f"interpreter {run:.2f} CPU s, {len(restored)} restores {sum(c[4] for c in restored):.2f} CPU s")
        ops = [c[1] for c in self.calls]
        print(f"  module size at each application: {min(ops)}-{max(ops)} ops (median {sorted(ops)[len(ops) // 2]})")
        thirds = np.array_split(np.array([c[3] for c in self.calls]), 3)
        print("  interpreter CPU s by thirds of the applications (in order): "
              + ", ".join(f"{part.sum():.2f}" for part in thirds if len(part)))
        print("  slowest applications (sequence, module ops, interpreter CPU s):")
        for name, ops_count, _, seconds, _ in sorted(self.calls, key=lambda c: -c[3])[:8]:
            print(f"    {name:<28} {ops_count:>7} {seconds:7.3f}")


def _count_ops(op) -> int:
    from mlir import ir

    count = 0

    def visit(_):
        nonlocal count
        count += 1
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return count


def _functions(module):
    """(name, llvm.func) of every defined function of an LLVM-dialect module."""
    from mlir import ir

    found = []
    for op in module.body.operations:
        op = op.operation
        if op.name == "llvm.func" and op.regions[0].blocks:
            found.append((ir.StringAttr(op.attributes["sym_name"]).value, op))
    return found


def _declared_symbols(module) -> list[str]:
    """Functions and globals the module uses but does not define (the JIT binds them)."""
    from mlir import ir

    names = []
    for op in module.body.operations:
        op = op.operation
        if op.name == "llvm.func" and not op.regions[0].blocks:
            names.append(ir.StringAttr(op.attributes["sym_name"]).value)
        elif op.name == "llvm.mlir.global" and not op.regions[0].blocks and "value" not in op.attributes:
            names.append(ir.StringAttr(op.attributes["sym_name"]).value)
    return names


def _alone(module, keep: "set[str]"):
    """A copy of ``module`` in which only the functions ``keep`` have a body (the others
    declared; every function external, so that the parts link)."""
    from mlir import ir

    copy = ir.Module.parse(str(module), module.context)
    for op in list(copy.body.operations):
        op = op.operation
        if op.name != "llvm.func" or not op.regions[0].blocks:
            continue
        if ir.StringAttr(op.attributes["sym_name"]).value in keep:
            op.attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<external>")
            if "sym_visibility" in op.attributes:
                del op.attributes["sym_visibility"]
            continue
        attributes = {op.attributes[i].name: op.attributes[i].attr for i in range(len(op.attributes))}
        attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<external>")
        attributes.pop("sym_visibility", None)
        declaration = ir.Operation.create("llvm.func", attributes=attributes, regions=1,
                                          loc=op.location, ip=ir.InsertionPoint(op))
        assert declaration is not None
        op.erase()
    return copy


def _codegen(module, opt_level: int) -> tuple[float, float]:
    """CPU s of ExecutionEngine creation and of code generation (first lookup) of ``module``."""
    from mlir.execution_engine import ExecutionEngine

    started = _cpu()
    engine = ExecutionEngine(module, opt_level=opt_level)
    created = _cpu() - started
    dummy = ctypes.c_void_p(0x1000)
    for symbol in _declared_symbols(module):
        engine.raw_register_runtime(symbol, dummy)
    started = _cpu()
    engine.initialize()
    for name, _ in _functions(module)[:1]:
        engine.raw_lookup(name)
    return created, _cpu() - started


def profile(name: str, codegen_top: int, python_profile: int = 0, save_llvm: str | None = None,
            parallel_codegen: bool = False) -> None:
    import onnx

    from tilecraft.pipelines.jit.parallel_codegen import WORKERS_ENV

    if not parallel_codegen:  # the per-function analysis below needs every body in the JIT's module
        os.environ[WORKERS_ENV] = "0"

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import onnx_models
    import tilecraft
    from tilecraft.pipelines.jit.engine import jit_llvm_opt_level

    original = onnx.load(os.path.join(onnx_models.LIGHT_DIR, f"light_{name}.onnx"))
    model, _ = onnx_models.randomize_weights(original)
    model = onnx_models.expose_logits(model)
    probe = ScheduleProbe()
    started = _cpu()
    profiler = cProfile.Profile(_cpu) if python_profile else None
    try:
        if profiler is not None:
            profiler.enable()
        compiled = tilecraft.compile(model, keep_ir=False, cache=False)
    finally:
        if profiler is not None:
            profiler.disable()
        probe.close()
    print(f"{name}: compile {(_cpu() - started):.2f} CPU s with the probes; stages (wall s): "
          + ", ".join(f"{k} {v:.2f}" for k, v in (compiled.compile_seconds or {}).items()))
    probe.report()
    parts = getattr(compiled._function, "codegen_parts", None)
    if parts is not None:
        print(f"parallel codegen: {sum(len(p) for p in parts.parts)} functions ({parts.operations} ops) in "
              f"{len(parts.parts)} worker parts; the analysis below sees only the entry's part")
    if profiler is not None:
        print(f"cProfile (CPU clock), the {python_profile} largest by own time:")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(python_profile)

    module = compiled.llvm_module
    if save_llvm:
        with open(save_llvm, "w") as file:
            file.write(str(module))
    functions = _functions(module)
    sizes = sorted(((_count_ops(op), fname) for fname, op in functions), reverse=True)
    bodies = collections.Counter(str(op).replace(f"@{fname}(", "@_(", 1) for fname, op in functions)
    total = sum(size for size, _ in sizes)
    print(f"LLVM module: {len(functions)} defined functions, {len(bodies)} distinct bodies, {total} ops; "
          f"largest: " + ", ".join(f"{fname} {size}" for size, fname in sizes[:6]))
    if codegen_top <= 0:
        return
    opt_level = jit_llvm_opt_level(3)
    with module.context:
        whole = _codegen(ir_copy(module), opt_level)
        print(f"codegen, whole module at -O{opt_level}: engine {whole[0]:.2f} + lookup {whole[1]:.2f} CPU s")
        alone_total = [0.0, 0.0]
        for size, fname in sizes[:codegen_top]:
            created, generated = _codegen(_alone(module, {fname}), opt_level)
            alone_total[0] += created
            alone_total[1] += generated
            print(f"  {fname:<40} {size:>7} ops  engine {created:6.2f}  lookup {generated:6.2f} CPU s")
        rest = _codegen(_alone(module, {fname for _, fname in sizes[codegen_top:]}), opt_level)
        print(f"  the {len(sizes[codegen_top:])} others together: engine {rest[0]:.2f}  lookup {rest[1]:.2f} CPU s")
        share = (sum(alone_total) + sum(rest)) / max(sum(whole), 1e-9)
        print(f"  parts: {sum(alone_total) + sum(rest):.2f} CPU s, {share:.0%} of the whole module's "
              "(each part external, declarations of the others)")


def ir_copy(module):
    from mlir import ir

    return ir.Module.parse(str(module), module.context)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a light-zoo model name (benchmarks/onnx_models.py)")
    parser.add_argument("--codegen-top", type=int, default=6,
                        help="JIT the N largest LLVM functions alone (0: skip)")
    parser.add_argument("--python-profile", type=int, default=0, metavar="N",
                        help="also profile the compile with cProfile; print its N largest entries")
    parser.add_argument("--save-llvm", default=None, metavar="PATH",
                        help="write the LLVM-dialect module the JIT compiles (weights as declarations)")
    parser.add_argument("--parallel-codegen", action="store_true",
                        help="compile with the parallel code generation (default: all in this process, "
                             "so that the LLVM analysis sees every function)")
    args = parser.parse_args(argv)
    profile(args.model, args.codegen_top, args.python_profile, args.save_llvm, args.parallel_codegen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
