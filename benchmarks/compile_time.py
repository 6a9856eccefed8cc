"""Compile time of the light ONNX zoo (issue #16): seconds per step and peak memory per model.

    .venv/bin/python benchmarks/compile_time.py
    .venv/bin/python benchmarks/compile_time.py --models resnet50,densenet121 --rounds 3
    .venv/bin/python benchmarks/compile_time.py --save-outputs /tmp/before   # then, after a change:
    .venv/bin/python benchmarks/compile_time.py --compare-outputs /tmp/before  # bit-identical?
    .venv/bin/python benchmarks/compile_time.py --models resnet50 --suite inception,regnet --ab-workers --rounds 3

Each compile runs in a fresh Python process (cold: no MLIR context, JIT or import cache
carried over, and the process's peak RSS belongs to that one model). The models are the
nine of ``onnx/backend/test/data/light`` with seeded random weights
(benchmarks/onnx_models.py's ``randomize_weights``; preparing them is not timed), compiled
untuned at the default opt_level with ``keep_ir=False``.

Columns: ``total`` is the wall-clock time of ``tilecraft.compile``; the steps are
``CompiledModule.compile_seconds`` (import = ONNX to MLIR, one column per pipeline stage,
jit = the ExecutionEngine); ``cpu`` is the CPU time of the compile (all threads of the process and its
child processes: the codegen workers, the linker; above ``total`` when work ran in parallel); ``RSS MB`` is the child's peak resident set
(``ru_maxrss``) and ``+MB`` that peak above the RSS just before the compile. ``jitCPU``
is the compiling process's own CPU s in the JIT step. With the
parallel code generation (pipelines/jit/parallel_codegen.py): ``wkMB`` the largest worker's
peak RSS, ``wk`` the workers, ``wkCPU`` the busiest worker's CPU s, ``preW`` the compiling
process's CPU s from starting them to waiting for them, ``wait`` the wall s it waited,
``link`` the wall s of linking and loading the parts. With
``--rounds N`` each model is compiled N times (alternating models) and the medians are
printed. No thresholds: the figures go into docs/performance.md.

``--suite NAMES`` adds public-suite models (benchmarks/public_suite.py's builders, exported
to ONNX once before any timing). ``--ab-workers`` compiles each model both with the parallel
code generation off (``TILECRAFT_CODEGEN_WORKERS=0``, row ``serial``) and on (the default,
row ``parallel``), in fresh processes, the order alternating round by round, and checks the
parallel build's outputs bit for bit against the serial one's of the same round.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

WORKERS_ENV = "TILECRAFT_CODEGEN_WORKERS"  # pipelines/jit/parallel_codegen.py's switch
STEPS = ("import", "input", "graph", "simplify", "schedule", "bufferize", "loops", "vector", "llvm", "jit")


def _compile_one(name: str, save: str | None, compare: str | None) -> dict:
    """``name``: a light-zoo model, or the path of an exported ``.onnx`` (taken as is)."""
    """Compile ``name`` in this process; the measurements (and the output check) as a dict."""
    import numpy as np
    import onnx

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import onnx_models
    import tilecraft

    if name.endswith(".onnx"):
        model = onnx.load(name)
        name = os.path.basename(name)[:-5]
    else:
        original = onnx.load(os.path.join(onnx_models.LIGHT_DIR, f"light_{name}.onnx"))
        model, _ = onnx_models.randomize_weights(original)
        model = onnx_models.expose_logits(model)
    feeds = onnx_models.random_inputs(model)
    rss_before = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    def children_cpu() -> float:  # the codegen workers and the linker, once waited for
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    from tilecraft.pipelines.jit.compiled_module import CompiledModule

    jit_cpu = [0.0]
    original_jit = CompiledModule._jit

    def timed_jit(self, *arguments):  # this process's CPU in the JIT step (the workers' apart)
        started = time.process_time()
        try:
            return original_jit(self, *arguments)
        finally:
            jit_cpu[0] += time.process_time() - started

    CompiledModule._jit = timed_jit
    cpu, cpu_children = time.process_time(), children_cpu()
    start = time.perf_counter()
    compiled = tilecraft.compile(model, keep_ir=False, cache=False)  # cold: the figures are the compile's
    total = time.perf_counter() - start
    cpu = time.process_time() - cpu + children_cpu() - cpu_children
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    parts = getattr(getattr(compiled, "_function", None), "codegen_parts", None)
    result = {"model": name, "total": total, "cpu": cpu, "steps": dict(compiled.compile_seconds or {}),
              "rss_peak_mb": peak / 2**20, "rss_added_mb": (peak - rss_before) / 2**20,
              "jit_cpu": jit_cpu[0], "worker_rss_peak_mb": max(parts.worker_peak_rss_mb) if parts else 0.0,
              "workers": len(parts.parts) if parts else 0,
              "worker_cpu_max": max(parts.worker_cpu_s) if parts else 0.0,
              "cpu_before_wait": parts.cpu_before_wait_s if parts else 0.0,
              "waited": parts.waited_s if parts else 0.0, "link": parts.link_wall_s if parts else 0.0}
    if save or compare:
        outputs = compiled(*feeds.values())
        outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
        path = os.path.join(save or compare, f"{name}.npz")
        if save:
            os.makedirs(save, exist_ok=True)
            np.savez(path, *outputs)
        else:
            with np.load(path) as saved:
                reference = [saved[f"arr_{i}"] for i in range(len(saved.files))]
            same = len(reference) == len(outputs) and all(
                r.shape == o.shape and r.dtype == o.dtype and r.tobytes() == o.tobytes()
                for r, o in zip(reference, outputs))
            result["identical"] = same
    return result


def _run_child(name: str, args: argparse.Namespace, environment: dict[str, str] | None = None,
               save: str | None = None, compare: str | None = None) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", name]
    save = save or args.save_outputs
    compare = compare or args.compare_outputs
    if save:
        command += ["--save-outputs", save]
    if compare:
        command += ["--compare-outputs", compare]
    completed = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(environment or {})})
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if completed.returncode != 0 or not lines:
        tail = (completed.stderr or completed.stdout).strip().splitlines()
        return {"model": name, "error": tail[-1] if tail else f"exit code {completed.returncode}"}
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=None, help="comma-separated subset of the light zoo (default: all nine)")
    parser.add_argument("--rounds", type=int, default=1, help="compiles per model, alternating (medians printed)")
    parser.add_argument("--save-outputs", default=None, help="folder: write each model's outputs (.npz)")
    parser.add_argument("--compare-outputs", default=None, help="folder of saved outputs: check bit-identity")
    parser.add_argument("--suite", default="", help="comma-separated public-suite models to add (exported to ONNX first)")
    parser.add_argument("--ab-workers", action="store_true",
                        help="each model with the parallel code generation off and on, alternating")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_compile_one(args.child, args.save_outputs, args.compare_outputs)))
        return 0

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import onnx_models

    names = onnx_models.available_models()
    selected = names if args.models is None else [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in selected if m not in names]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {names}")
    sources = {name: name for name in selected}
    suite = [m.strip() for m in args.suite.split(",") if m.strip()]
    scratch = tempfile.mkdtemp(prefix="compile-time-")
    if suite:
        import public_suite

        for name in suite:
            module, inputs = public_suite.build(name)
            path = os.path.join(scratch, f"{name}.onnx")
            with open(path, "wb") as stream:
                stream.write(public_suite.export_onnx(module, inputs))
            sources[name] = path
    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}; {os.cpu_count()} cores; "
          f"median of {args.rounds} cold compile(s) per model, each in a fresh process", flush=True)
    variants = [("serial", {WORKERS_ENV: "0"}), ("parallel", {})] if args.ab_workers else [("", {})]
    runs: dict[str, list[dict]] = {}
    for round_index in range(args.rounds):
        for name, source in sources.items():
            order = variants if round_index % 2 == 0 else variants[::-1]
            outputs = os.path.join(scratch, f"{name}-round{round_index}")
            for position, (variant, environment) in enumerate(order):
                compare_to = {}
                if args.ab_workers:
                    compare_to = {"save": outputs} if position == 0 else {"compare": outputs}
                label = f"{name} {variant}".strip()
                runs.setdefault(label, []).append(_run_child(source, args, environment, **compare_to))
    selected = list(runs)
    header = f"{'model':<20} {'total':>7} {'cpu':>7} " + " ".join(f"{s:>9}" for s in STEPS) + \
             f" {'RSS MB':>7} {'+MB':>6} {'jitCPU':>6} {'wkMB':>5} {'wk':>3} {'wkCPU':>6} {'preW':>5} {'wait':>5} {'link':>5}"
    print(header)
    for name in selected:
        good = [r for r in runs[name] if "error" not in r]
        if not good:
            print(f"{name:<20} error: {runs[name][-1]['error']}")
            continue

        def median(key: str, step: bool = False) -> float:
            return statistics.median(r["steps"].get(key, 0.0) if step else r[key] for r in good)

        line = f"{name:<20} {median('total'):>7.2f} {median('cpu'):>7.2f} " + \
               " ".join(f"{median(s, step=True):>9.2f}" for s in STEPS) + \
               f" {median('rss_peak_mb'):>7.0f} {median('rss_added_mb'):>6.0f}" + \
               f" {median('jit_cpu'):>6.2f} {median('worker_rss_peak_mb'):>5.0f} {median('workers'):>3.0f} {median('worker_cpu_max'):>6.2f}" + \
               f" {median('cpu_before_wait'):>5.2f} {median('waited'):>5.2f} {median('link'):>5.2f}"
        if any("identical" in r for r in good):
            line += "  identical" if all(r["identical"] for r in good if "identical" in r) else "  OUTPUTS DIFFER"
        print(line, flush=True)
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
