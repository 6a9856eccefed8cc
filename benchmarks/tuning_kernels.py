"""Tune the heaviest dot-product kernels of a bf16 or int8 build, then time each tuned kernel
against its default in CPU time, alternating (issue #49: "tuning (spaces know the new kernels)").

    PYTHONPATH=<checkout parent> .venv/bin/python benchmarks/tuning_kernels.py \
        [--models resnet50,bert] [--precision bf16] [--tasks 3] [--minutes 2] [--threads 1] [--rounds 21]

Per model (end_to_end.py's ResNet-50 and BERT-base-shaped encoder, random weights): the
``--tasks`` heaviest kernel tasks (flops x count) of the ``--precision`` build, tuned by
``tilecraft.tune(..., precision=...)`` for ``--minutes`` each (XGBoost tuner, the kernel
alone, as the tuner measures it). Then each task's default and best config are built as the
tuner builds them and timed here in one process, blocks alternating: ``--rounds`` rounds, a
round is one untimed call then calls for at least 20 ms of each, in CPU time
(``time.process_time``). Printed per task: default and tuned CPU ms per call, the median
of the rounds' tuned/default ratios and their quartiles. Read a ratio whose quartiles
straddle 1.0 as "no difference".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _timed(call, n: int) -> float:
    call()  # untimed: whatever ran before leaves caches and threads as it likes
    start = time.process_time()
    for _ in range(n):
        call()
    return (time.process_time() - start) / n


def compare(default, tuned, arguments, rounds: int) -> tuple[float, float, list[float]]:
    """(default s/call, tuned s/call, per-round tuned/default ratios), blocks alternating
    (the order flips every round)."""
    calls = {"default": lambda: default(*arguments), "tuned": lambda: tuned(*arguments)}
    counts = {name: max(1, int(0.02 / max(_timed(call, 1), 1e-7))) for name, call in calls.items()}
    samples: dict[str, list[float]] = {"default": [], "tuned": []}
    for round_ in range(rounds):
        for name in (("default", "tuned") if round_ % 2 == 0 else ("tuned", "default")):
            samples[name].append(_timed(calls[name], counts[name]))
    ratios = [t / d for t, d in zip(samples["tuned"], samples["default"])]
    return statistics.median(samples["default"]), statistics.median(samples["tuned"]), ratios


def run_model(case, precision: str, task_count: int, minutes: float, rounds: int, seed: int) -> None:
    import numpy as np

    import tilecraft
    from tilecraft.compiler.options import CompileOptions
    from tilecraft.schedule.records import best_records, load_records
    from tilecraft.tuning.kernel_tasks import extract_kernel_tasks
    from tilecraft.tuning.measure import build_candidate, random_inputs
    from tilecraft.tuning.roles import MeasureInput

    options = CompileOptions(precision=precision)
    target = options.target
    start = time.perf_counter()
    tasks = extract_kernel_tasks(case.model, options)[:task_count]
    print(f"{case.name} {precision}: {len(tasks)} heaviest kernel task(s) of the build "
          f"({time.perf_counter() - start:.1f} s to extract)", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="tuning_kernels_"))
    records = scratch / "records.jsonl"
    for task in tasks:
        start = time.perf_counter()
        tilecraft.tune(case.model, options, tasks=[task], trials=10_000, time_budget=minutes * 60,
                       tuning_records=str(records), end_to_end=False, progress=False, seed=seed)
        print(f"  tuned {task.name} for {time.perf_counter() - start:.0f} s", flush=True)
    best = best_records(load_records(records, target=target))
    print(f"  CPU ms per call, {target.num_threads} thread(s), median of {rounds} alternating rounds "
          f"(load average {os.getloadavg()[0]:.1f}):")
    print(f"  {'task':<64} {'count':>5} {'default':>9} {'tuned':>9} {'tuned/default':>14} {'quartiles':>13} "
          f"{'trials':>6}  config")
    for task in tasks:
        record = best.get(task.key)
        trials = sum(1 for r in load_records(records, target=target) if r.key == task.key)
        jobs = {name: MeasureInput(task.payload, task.describe(), config, str(target))
                for name, config in (("default", None), ("tuned", record.config if record else None))}
        modules = {name: build_candidate(job, scratch) for name, job in jobs.items()}
        arguments = random_inputs(modules["default"].signature)
        np.testing.assert_array_equal(modules["default"](*arguments), modules["tuned"](*arguments))
        default_s, tuned_s, ratios = compare(modules["default"], modules["tuned"], arguments, rounds)
        quartiles = statistics.quantiles(ratios, n=4)
        config = record.config if record else "-"
        print(f"  {task.name:<64} {task.count:>5} {default_s * 1e3:9.3f} {tuned_s * 1e3:9.3f} "
              f"{statistics.median(ratios):14.3f} {quartiles[0]:6.3f}-{quartiles[2]:.3f} {trials:>6}  {config}",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,bert")
    parser.add_argument("--precision", choices=("bf16", "int8"), default="bf16")
    parser.add_argument("--tasks", type=int, default=3, help="heaviest kernel tasks per model")
    parser.add_argument("--minutes", type=float, default=2.0, help="tuning time per task")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--bert-layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.environ["TILECRAFT_NUM_THREADS"] = str(args.threads)  # read when the target is parsed, later
    import end_to_end

    cases = {"resnet50": end_to_end.resnet50, "bert": lambda: end_to_end.bert(args.bert_layers)}
    for name in args.models.split(","):
        if name not in cases:
            parser.error(f"unknown model {name!r}; models: {sorted(cases)}")
        run_model(cases[name](), args.precision, args.tasks, args.minutes, args.rounds, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
