"""Where the headroom is (issue #44): each suite model's heavy tasks, as a fraction of the
machine's float32 FMA peak and of their roofline bound, at the default schedules.

    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/tuning_headroom.py --models mobilenet_v2,squeezenet
    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/tuning_headroom.py --json build/headroom.json

Per model of benchmarks/public_suite.py (built and exported as the suite does): its tasks
(``tilecraft.extract_tasks``), the model compiled with the default schedules in its profiling
variant and profiled ``--runs`` times (tuning/in_model.py's ``profile_kernels``: at one
thread on the measuring thread's CPU time, so neighbours on a shared machine do not lower
the figures), each task's time per occurrence joined from the profile (``model_times``, the
join ``tune``'s confirmation uses: per execution, an occurrence inside the loops around a
grouped convolution's per-group kernels counting each of its runs, ``Task.runs``). A task is
**heavy** when its executions take at least 5 % of the model's kernel time (the task
scheduler's ``HEAVY_SHARE``). Printed per heavy task: its kind, executions per call, share,
GFLOPS, arithmetic intensity (flops per byte of its arguments and result), fraction of the
FMA peak at the target's thread count (kinds the peak does not bound, pooling, elementwise,
reductions, print ``-``), and fraction of its **roofline bound** ``min(peak, bandwidth x
intensity)``, the bandwidth the one of the level its bytes fit in (L2, L3, memory; all from
runtime/peak.py, measured once per machine and cached), with the level when it is not the
peak; tasks whose kernel the profile cannot tell apart from another task's (the
taps of a windowed op, schedule/sketch.py, are one loop nest in the model) are marked ``*``:
their time, share, GFLOPS and fractions are that kernel's (all its tasks' FLOPs and bytes).
Then the models with a heavy float32 contraction below ``--below`` of the FMA peak (issue
#44 goal 2's trigger: the models 20 minutes of tuning must speed up 1.2x; docs/tuning.md,
"Headroom on the public suite"), and those with a heavy float32 task below ``--below`` of its
roofline bound: the ones where tuning may find what the defaults miss (docs/tuning.md,
"Headroom first"); a task far below the FMA peak but near its bandwidth bound is
memory-bound, not headroom.
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
from tilecraft.runtime.peak import Roofline, roofline  # noqa: E402
from tilecraft.tuning.in_model import model_times, profile_kernels  # noqa: E402
from tilecraft.tuning.session import CONTRACTION_KINDS  # noqa: E402
from tilecraft.tuning.task_scheduler import HEAVY_SHARE  # noqa: E402


def headroom_rows(name: str, runs: int, roof: Roofline | None) -> list[dict[str, Any]]:
    """One row per task of suite model ``name`` (heaviest first): kind, count, executions,
    seconds per execution in the model, share of the model's kernel time, GFLOPS, arithmetic
    intensity, fraction of the FMA peak and of the roofline bound (``roof``)."""
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
    kernel_bytes: dict[str, float] = {}
    for task in tasks:
        for names, executions in zip(task.kernels, task.occurrence_runs):
            if names:
                kernel_flops[names[0]] = kernel_flops.get(names[0], 0.0) + task.flops * executions
                kernel_bytes[names[0]] = kernel_bytes.get(names[0], 0.0) + task.moved_bytes * executions
    peak = roof.peak_gflops if roof is not None else None
    rows = []
    for index, task in enumerate(tasks):
        seconds = times[task.key]
        if seconds is None:
            continue
        shared = any(anchors[index] & other for j, other in enumerate(anchors) if j != index)
        gflops = task.flops / seconds / 1e9 if seconds > 0 else 0.0
        flops, moved = float(task.flops), float(task.moved_bytes)
        bounded = peak is not None and task.kind in CONTRACTION_KINDS and task.element_type == "f32"
        share = seconds * task.executions / total if total else 0.0
        if shared:
            timed = [a for a in anchors[index] if kernels.get(a)]
            gflops = (sum(kernel_flops[a] for a in timed) / sum(kernels[a] for a in timed) / 1e9
                      if timed else 0.0)
            flops, moved = sum(kernel_flops[a] for a in timed), sum(kernel_bytes[a] for a in timed)
            # The kernel's share, once: each of its tasks' time x executions counted the
            # kernel's whole time per execution of every task (shares above 100 % in all).
            share = sum(kernels[a] for a in timed) / total if total else 0.0
        bound = level = None
        if roof is not None and task.element_type == "f32" and flops > 0 and moved > 0:
            bound = roof.attainable(flops, moved)
            level = roof.level_for(moved)[0] if bound < roof.peak_gflops else "peak"
        rows.append({"model": name, "task": task.name, "kind": task.kind, "count": task.count,
                     "executions": task.executions, "ms": seconds * 1e3,
                     "share": share,
                     "gflops": gflops, "intensity": flops / moved if moved else None,
                     "peak_fraction": gflops / peak if bounded else None,
                     "bound_gflops": bound, "bound_level": level,
                     "bound_fraction": gflops / bound if bound else None,
                     "shared_kernel": shared, "kernel": ",".join(sorted(anchors[index]))})
    return sorted(rows, key=lambda r: -r["share"])


# The fraction of its roofline bound a well-scheduled kernel reaches: the defaults' best
# contractions run at 85-90 % of the FMA peak (docs/performance.md), not at 100 %.
REACHABLE = 0.85


def model_ceiling(rows: list[dict[str, Any]]) -> float | None:
    """How much faster the model's kernels would run if every task with a known bound ran at
    :data:`REACHABLE` of it (a task already faster keeps its time; one without a bound too):
    the most that schedules of the tasks can give the model, by this roofline. Tasks of a
    shared kernel count once, with the kernel's fraction."""
    total = after = 0.0
    seen: set[str] = set()
    for row in rows:
        if row["shared_kernel"]:
            if row["kernel"] in seen:
                continue
            seen.add(row["kernel"])
        total += row["share"]
        fraction = row["bound_fraction"]
        after += row["share"] * (min(1.0, fraction / REACHABLE) if fraction else 1.0)
    # Shares are of the model's whole kernel time: kernels that are no task keep theirs.
    rest = max(1.0 - total, 0.0)
    return 1.0 / (rest + after) if rest + after > 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(public_suite.ARCHITECTURES),
                        help="comma-separated suite models (default: all)")
    parser.add_argument("--runs", type=int, default=7, help="profiled runs per model (median per kernel)")
    parser.add_argument("--below", type=float, default=0.6,
                        help="the fraction of a task's roofline bound that marks headroom")
    parser.add_argument("--json", help="write every row here too")
    args = parser.parse_args(argv)
    target = tilecraft.CompileOptions().target
    threads = target.num_threads
    roof = roofline(threads, target.caches.l2, target.caches.l3)
    print(f"headroom at the default schedules, {threads} thread(s); load average {os.getloadavg()[0]:.1f}")
    if roof is not None:
        print(f"roofline: FMA peak {roof.peak_gflops:.0f} GFLOPS; bandwidth (read + written) "
              + ", ".join(f"{level} {gbs:.0f} GB/s" + ("" if capacity == float("inf") else f" (<= {capacity / 2**20:g} MiB)")
                          for level, capacity, gbs in roof.levels))
    every: list[dict[str, Any]] = []
    flagged: dict[str, list[dict[str, Any]]] = {}
    qualifying: dict[str, list[dict[str, Any]]] = {}
    for name in [m for m in args.models.split(",") if m]:
        start = time.process_time()
        try:
            rows = headroom_rows(name, args.runs, roof)
        except Exception as error:  # noqa: BLE001 - one model's failure is a line of the table
            print(f"\n== {name}: failed: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
            continue
        every += rows
        heavy = [r for r in rows if r["share"] >= HEAVY_SHARE]
        print(f"\n== {name}: {len(rows)} tasks, {len(heavy)} heavy ({time.process_time() - start:.0f} CPU s)")
        print(f"  {'task':<52} {'kind':<17} {'runs':>4} {'ms':>8} {'share':>6} {'GFLOPS':>7} {'F/B':>5} "
              f"{'peak':>5} {'bound':>6} {'of it':>6}")
        for row in heavy:
            mark = "*" if row["shared_kernel"] else ""
            fraction = "-" if row["peak_fraction"] is None else f"{row['peak_fraction']:.0%}{mark}"
            of_bound = "-" if row["bound_fraction"] is None else f"{row['bound_fraction']:.0%}{mark}"
            bound = "-" if row["bound_gflops"] is None else f"{row['bound_gflops']:.0f}"
            if row["bound_level"] not in (None, "peak"):
                bound += row["bound_level"][0]  # L(2, 3) or m(emory): the bandwidth that bounds it
            intensity = "-" if row["intensity"] is None else f"{row['intensity']:.1f}"
            print(f"  {row['task'][:52]:<52} {row['kind']:<17} {row['executions']:>4} {row['ms']:8.3f} "
                  f"{row['share']:6.1%} {row['gflops']:7.1f} {intensity:>5} {fraction:>5} {bound:>6} {of_bound:>6}")
        ceiling = model_ceiling(rows)
        if ceiling is not None:
            print(f"  ceiling: every task at {REACHABLE:.0%} of its roofline bound or as it is, whichever is "
                  f"faster, would run the model {ceiling:.2f}x faster")
        low = [r for r in heavy if r["bound_fraction"] is not None and r["bound_fraction"] < args.below]
        if low:
            flagged[name] = low
        below_peak = [r for r in heavy if r["peak_fraction"] is not None and r["peak_fraction"] < args.below]
        if below_peak:
            qualifying[name] = below_peak
    # Issue #44's goal (2) names its models by the FMA peak: a heavy float32 contraction below
    # 60 % of it. The roofline list below drops those that are at their bandwidth bound.
    print(f"\nmodels with a heavy float32 contraction below {args.below:.0%} of the FMA peak "
          "(issue #44 goal 2's models):")
    for name, low in qualifying.items():
        cells = ", ".join(f"{r['task']} ({r['share']:.0%} of the time, {r['peak_fraction']:.0%}"
                          f"{'*' if r['shared_kernel'] else ''})" for r in low)
        print(f"  {name}: {cells}")
    print(f"\nmodels with a heavy float32 task below {args.below:.0%} of its roofline bound:")
    for name, low in flagged.items():
        cells = ", ".join(f"{r['task']} ({r['kind']}, {r['share']:.0%} of the time, {r['bound_fraction']:.0%} "
                          f"of {r['bound_gflops']:.0f} GFLOPS)" for r in low)
        print(f"  {name}: {cells}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"threads": threads, "peak_gflops": roof.peak_gflops if roof else None,
                                                "levels": [list(level[::2]) for level in roof.levels] if roof else None,
                                                "rows": every}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
