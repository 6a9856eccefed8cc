"""Tuner time against in-model time for the heaviest tasks of models (issue #44, item 5).

    .venv/bin/python benchmarks/tuning_in_model.py --models resnet50,mobilenetv2
    .venv/bin/python benchmarks/tuning_in_model.py --models resnet50 --records build/tuning-e2e/resnet50.xgb.jsonl
    .venv/bin/python benchmarks/tuning_in_model.py --models "" --onnx m.onnx   # any ONNX file
    .venv/bin/python benchmarks/tuning_in_model.py --models mobilenetv2 --processes 3  # medians over processes

Per model (built as benchmarks/end_to_end.py builds them: random weights, nothing
downloaded; or an ONNX file given with ``--onnx``, e.g. a suite model written by
``benchmarks/thread_balance.py export MODEL -o m.onnx``): the ``--top`` heaviest tasks, each
timed exactly as a tuning worker times a candidate (tuning/measure.py: the one-record build,
the kernel timers, the bytes read before each call that ``tilecraft.tune`` would choose for
this model, ``cache_eviction``, the result written into the pad or concat the model writes
it into, ``Task.placement``) and, in the same alternating rounds, as
kernels of the profiled model (``side_by_side_times``, tuning/in_model.py). Without
``--records`` both sides run the default schedules, so the check needs no tuning run; with
it, each task's applied config. Printed: both times, their ratio (model / tuner), and how
many tasks agree within 15 % (the issue's goal: all five of each benchmark model).

No thresholds: a benchmark for notes. Quote the load average it prints: on a shared machine
both columns move with the load, though side by side they move together.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import end_to_end  # noqa: E402  (the model builders)
import onnx  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.tuning.in_model import agreement_table, side_by_side_times  # noqa: E402
from tilecraft.tuning.measure import (cache_eviction, last_level_cache_bytes,  # noqa: E402
                                      model_footprint_bytes)

# The bound: a task's measured time within 15 % of its time inside the model.
TOLERANCE = 0.15


def within(ratio: float | None) -> bool:
    """Whether a model/tuner ratio agrees within :data:`TOLERANCE` either way."""
    return ratio is not None and 1 / (1 + TOLERANCE) <= ratio <= 1 + TOLERANCE


def run_model(name: str, model: object, args: argparse.Namespace) -> list[tuple[str, float | None, float | None, float]]:
    start = time.perf_counter()
    tasks = tilecraft.extract_tasks(model)
    if args.without_producers:  # the inputs read back into the caches instead (the A/B)
        tasks = [dataclasses.replace(task, producers=()) for task in tasks]
    weights = sum(t.weight_bytes * t.executions for t in tasks)
    print(f"\n== {name}: {len(tasks)} tasks; weights {weights / 2**20:.1f} MiB, footprint of a run "
          f"{model_footprint_bytes(tasks) / 2**20:.1f} MiB, last-level cache "
          f"{last_level_cache_bytes() / 2**20:.0f} MiB: {cache_eviction(tasks) / 2**20:.1f} MiB read before "
          f"each call; {args.records or 'default schedules'}", flush=True)
    rows = side_by_side_times(model, tilecraft.CompileOptions(), args.records, tasks,
                              top=args.top, rounds=args.rounds)
    print("\n".join("  " + line for line in agreement_table(rows).splitlines()))
    placed = [row.task.name for row in rows if row.task.placement is not None]
    if placed:  # measured writing into the model's pad or concat (schedule/task.py, Placement)
        print(f"  written where the model writes them (a pad's interior, a concat's part): {', '.join(placed)}")
    agree = sum(within(row.ratio) for row in rows)
    print(f"  within 15 %: {agree}/{len(rows)}; {time.perf_counter() - start:.0f} s; "
          f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}", flush=True)
    return [(row.task.name, row.ratio, row.model_seconds, row.tuner_seconds) for row in rows]


def without_option(argv: list[str], option: str) -> list[str]:
    """``argv`` without ``option`` and its value (``--option V`` or ``--option=V``)."""
    kept, skip = [], False
    for argument in argv:
        if skip:
            skip = False
        elif argument == option:
            skip = True
        elif not argument.startswith(option + "="):
            kept.append(argument)
    return kept


def across_processes(argv: list[str], processes: int) -> int:
    """Runs this script ``processes`` times, each a fresh process, and prints each task's
    median model/tuner ratio over them. Why: a two-thread kernel's time inside the model
    moves from process to process (MobileNetV2's 112x112 expansion: 270-385 us in twelve
    fresh processes profiling one package, docs/tuning.md), so one process's ratio is one
    draw of that spread; the median over processes is the ratio the tuner's choices meet.

    Beside it, the model's own range: its fastest and slowest per-process time of the task
    (each already a median of the rounds) and the tuner's median time. Why: the model does
    not reproduce itself more closely than that range from one process to the next; where
    the range is wider than the 15 % bound, the bound measures the machine as much as the
    tuner."""
    runs_by_model: dict[str, list[list[list]]] = {}
    for index in range(processes):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            print(f"\n#### process {index + 1} of {processes}", flush=True)
            subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--processes", "1",
                            "--ratios-json", out.name], check=True)
            for name, rows in json.load(open(out.name)).items():
                runs_by_model.setdefault(name, []).append(rows)
    print(f"\n#### median model/tuner ratio over {processes} processes; the model's own range "
          "(fastest-slowest process, us) beside the tuner's median")
    agree = total = 0
    for name, runs in runs_by_model.items():
        print(f"== {name}")
        for position, (task, *_) in enumerate(runs[0]):
            rows = [run[position] for run in runs if position < len(run)]
            values = [row[1] for row in rows if row[1] is not None]
            model = [row[2] for row in rows if row[2] is not None]
            tuner = statistics.median(row[3] for row in rows)
            median = statistics.median(values) if values else None
            agree += within(median)
            total += 1
            shown = f"{median:.2f}" if median is not None else "-"
            spread = (f"{min(model) * 1e6:.0f}-{max(model) * 1e6:.0f} ({max(model) / min(model):.2f}x), "
                      f"tuner {tuner * 1e6:.0f}") if model else "-"
            print(f"  {task[:48]:<48} {shown:>6}  ({' '.join(f'{v:.2f}' for v in values)})  model {spread}")
    print(f"within 15 %: {agree}/{total} (medians over {processes} processes)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,mobilenetv2",
                        help=f"comma-separated: {', '.join(end_to_end.CASES)}")
    parser.add_argument("--onnx", action="append", default=[], metavar="PATH",
                        help="an ONNX file to check too (repeatable)")
    parser.add_argument("--records", help="tuning records to apply (default: the default schedules)")
    parser.add_argument("--top", type=int, default=5, help="heaviest tasks per model")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    parser.add_argument("--bert-layers", type=int, default=2)
    parser.add_argument("--without-producers", action="store_true",
                        help="do not run each task's producer before its timed calls (Task.producer_cycle): "
                             "its inputs are read back into the caches instead, as before")
    parser.add_argument("--processes", type=int, default=1,
                        help="run everything in this many fresh processes and print each task's "
                             "median ratio over them (the model's own kernel times move between processes)")
    parser.add_argument("--ratios-json", help=argparse.SUPPRESS)  # one process's ratios, for --processes
    args = parser.parse_args(argv)
    if args.processes > 1:
        return across_processes(without_option(list(sys.argv[1:] if argv is None else argv), "--processes"),
                                args.processes)
    print(f"tuner vs in-model time; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    ratios = {}
    for name in [m for m in args.models.split(",") if m]:
        ratios[name] = run_model(name, end_to_end.CASES[name](args).model, args)
    for path in args.onnx:
        ratios[path] = run_model(path, onnx.load(path), args)
    if args.ratios_json:
        with open(args.ratios_json, "w") as out:
            json.dump(ratios, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
