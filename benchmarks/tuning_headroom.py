"""Where the headroom is (issue #44): each suite model's heavy tasks, as a fraction of the
machine's float32 FMA peak, at the default schedules.

    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/tuning_headroom.py --models mobilenet_v2,squeezenet
    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/tuning_headroom.py --json build/headroom.json

Per model of benchmarks/public_suite.py (built and exported as the suite does): its tasks
(``tilecraft.extract_tasks``), the model compiled with the default schedules in its profiling
variant and profiled ``--runs`` times (tuning/in_model.py's ``profile_kernels``: at one
thread on the measuring thread's CPU time, so neighbours on a shared machine do not lower
the figures), each task's time per occurrence joined from the profile (``model_times``, the
join ``tune``'s confirmation uses). A task is **heavy** when its occurrences take at least 5 %
of the model's kernel time (the task scheduler's ``HEAVY_SHARE``). Printed per heavy task: its
kind, share, GFLOPS and fraction of the FMA peak at the target's thread count
(runtime/peak.py); kinds the peak does not bound (pooling, elementwise, reductions: memory
bound) print ``-``; tasks whose kernel the profile cannot tell apart from another task's (the
taps of a windowed op, schedule/sketch.py, are one loop nest in the model) are marked ``*``:
their time, share, GFLOPS and fraction are that kernel's (all its tasks' FLOPs). Then the models with a heavy float32 contraction below ``--below`` of the
peak: the ones where tuning may find what the defaults miss (docs/tuning.md, "Headroom first").
No thresholds: the table goes into docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import public_suite  # noqa: E402  (the suite's models)

import tilecraft  # noqa: E402
from tilecraft.runtime.peak import fma_peak_gflops  # noqa: E402
from tilecraft.tuning.in_model import model_times, profile_kernels  # noqa: E402
from tilecraft.tuning.session import CONTRACTION_KINDS  # noqa: E402
from tilecraft.tuning.task_scheduler import HEAVY_SHARE  # noqa: E402


def headroom_rows(name: str, runs: int, peak: float | None) -> list[dict[str, Any]]:
    """One row per task of suite model ``name`` (heaviest first): kind, count, seconds per
    occurrence in the model, share of the model's kernel time, GFLOPS, fraction of ``peak``."""
    import onnx

    model = onnx.load_from_string(public_suite.export_onnx(*public_suite.build(name)))
    options = tilecraft.CompileOptions()
    tasks = tilecraft.extract_tasks(model)
    kernels = profile_kernels(model, options, None, runs)
    total = sum(kernels.values())
    times = model_times(tasks, kernels)
    # Tasks that name one kernel (the taps of a windowed op, schedule/sketch.py; transposes
    # fused into one loop nest) each get that kernel's whole time from the join: their GFLOPS
    # and shares are the kernel's, not theirs, and are marked so.
    # Their fraction of the peak is the kernel's: all its tasks' FLOPs over its time.
    anchors = [{names[0] for names in task.kernels if names} for task in tasks]
    kernel_flops: dict[str, float] = {}
    for task in tasks:
        for names in task.kernels:
            if names:
                kernel_flops[names[0]] = kernel_flops.get(names[0], 0.0) + task.flops
    rows = []
    for index, task in enumerate(tasks):
        seconds = times[task.key]
        if seconds is None:
            continue
        shared = any(anchors[index] & other for j, other in enumerate(anchors) if j != index)
        gflops = task.flops / seconds / 1e9 if seconds > 0 else 0.0
        bounded = peak is not None and task.kind in CONTRACTION_KINDS and task.element_type == "f32"
        if shared:
            timed = [a for a in anchors[index] if kernels.get(a)]
            gflops = (sum(kernel_flops[a] for a in timed) / sum(kernels[a] for a in timed) / 1e9
                      if timed else 0.0)
        rows.append({"model": name, "task": task.name, "kind": task.kind, "count": task.count,
                     "ms": seconds * 1e3, "share": seconds * task.count / total if total else 0.0,
                     "gflops": gflops, "peak_fraction": gflops / peak if bounded else None,
                     "shared_kernel": shared})
    return sorted(rows, key=lambda r: -r["share"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(public_suite.ARCHITECTURES),
                        help="comma-separated suite models (default: all)")
    parser.add_argument("--runs", type=int, default=7, help="profiled runs per model (median per kernel)")
    parser.add_argument("--below", type=float, default=0.6, help="the fraction of peak that marks headroom")
    parser.add_argument("--json", help="write every row here too")
    args = parser.parse_args(argv)
    threads = tilecraft.CompileOptions().target.num_threads
    peak = fma_peak_gflops(threads)
    print(f"headroom at the default schedules, {threads} thread(s), FMA peak "
          f"{peak if peak is None else f'{peak:.0f}'} GFLOPS; load average {os.getloadavg()[0]:.1f}")
    every: list[dict[str, Any]] = []
    flagged: dict[str, list[dict[str, Any]]] = {}
    for name in [m for m in args.models.split(",") if m]:
        start = time.process_time()
        try:
            rows = headroom_rows(name, args.runs, peak)
        except Exception as error:  # noqa: BLE001 - one model's failure is a line of the table
            print(f"\n== {name}: failed: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
            continue
        every += rows
        heavy = [r for r in rows if r["share"] >= HEAVY_SHARE]
        print(f"\n== {name}: {len(rows)} tasks, {len(heavy)} heavy ({time.process_time() - start:.0f} CPU s)")
        print(f"  {'task':<52} {'kind':<17} {'n':>3} {'ms':>8} {'share':>6} {'GFLOPS':>7} {'peak':>5}")
        for row in heavy:
            fraction = "-" if row["peak_fraction"] is None else f"{row['peak_fraction']:.0%}"
            fraction += "*" if row["shared_kernel"] else ""
            print(f"  {row['task'][:52]:<52} {row['kind']:<17} {row['count']:>3} {row['ms']:8.3f} "
                  f"{row['share']:6.1%} {row['gflops']:7.1f} {fraction:>5}")
        low = [r for r in heavy if r["peak_fraction"] is not None and r["peak_fraction"] < args.below]
        if low:
            flagged[name] = low
    print(f"\nmodels with a heavy float32 contraction below {args.below:.0%} of the peak:")
    for name, low in flagged.items():
        cells = ", ".join(f"{r['task']} ({r['kind']}, {r['share']:.0%} of the time, {r['peak_fraction']:.0%})"
                          for r in low)
        print(f"  {name}: {cells}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"threads": threads, "peak_gflops": peak, "rows": every}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
