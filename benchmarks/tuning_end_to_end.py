"""Tuning that pays off end to end: issue #18's targets, printed side by side in one run.

    .venv/bin/python benchmarks/tuning_end_to_end.py --models digits --minutes 2
    .venv/bin/python benchmarks/tuning_end_to_end.py --models resnet50 --minutes 60 --tuners xgb,random
    .venv/bin/python benchmarks/tuning_end_to_end.py --models bert --minutes 30
    .venv/bin/python benchmarks/tuning_end_to_end.py --warm-start mobilenetv2,digits --minutes 5
    .venv/bin/python benchmarks/tuning_end_to_end.py --models resnet50 --reuse-records
    .venv/bin/python benchmarks/tuning_end_to_end.py --models digits --identical 20
    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/tuning_end_to_end.py --models squeezenet --minutes 20
    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/tuning_end_to_end.py --models suite:regnet --minutes 20

Per model (built as benchmarks/end_to_end.py builds them, or a model of
benchmarks/public_suite.py by its name there, ``suite:NAME`` where both have the name:
random weights, nothing downloaded)
and per tuner in ``--tuners``: ``tilecraft.tune`` with a time budget of ``--minutes`` (and at
most ``--trials`` trials; at least ``--trials-per-task`` per task), records in ``--out``, an
HTML report beside them (the model's estimated time against trials, per-task curves and
table), then the tuned configs confirmed inside the model as ``tune`` does after its search
(``confirm_in_model``: a config slower in the model than the default is not applied). Then, in one set of alternating rounds: the model compiled with the default
schedules, with each tuner's records, and onnxruntime (0.2 s of pause before each: onnxruntime's
pool threads spin on after a call and slowed the build timed next); printed: tuned / default (the
speedup, target >= 1.2x for ResNet-50, >= 1.15x for BERT) and tuned / onnxruntime (target
<= 0.85x for ResNet-50), and xgb against random at the same budget. Then the agreement of
the tuner's time and the in-model kernel time for the heaviest tasks, each task measured as
the tuner measures it and the model profiled in alternating rounds (``side_by_side_times``,
``tuning/in_model.py``; target: within 20 %).

Clock (``--clock``; runtime/timing.py): at one thread (``TILECRAFT_NUM_THREADS=1``) every
measurement, the tuner's included, reads the measuring thread's CPU time, and onnxruntime runs
with one intra-op thread, on the calling thread, so that it is measured alike; with more
threads, wall time (thread CPU time would miss the other threads' work).

``--identical RUNS``: issue #44's honesty check: RUNS tune-and-compare runs whose records
hold only the default schedules (``tune`` sees the tuned build is the default one and times
nothing), and in each run two separate builds of the default model timed in paired rounds on
the clock, as ``tune`` times a tuned build against the default; prints how many runs
printed a speedup (the goal is none).

``--warm-start A,B``: tune A (its cross-task cost model is saved beside its records), then
tune B twice with the same trial budget, from that model and from nothing, and print B's
estimated model time after each quarter of the budget for both (tuning/transfer.py).

No thresholds: the figures are quoted in notes. Budgets of an hour take an hour.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import end_to_end  # noqa: E402  (the model builders and the alternating timer)
import public_suite  # noqa: E402  (the suite's models, by name)

import tilecraft  # noqa: E402
from tilecraft.runtime import significance  # noqa: E402
from tilecraft.runtime.significance import paired_rounds  # noqa: E402
from tilecraft.runtime.timing import CLOCKS, default_clock, get_clock  # noqa: E402
from tilecraft.schedule.records import load_records  # noqa: E402
from tilecraft.tuning.in_model import agreement_table, confirm_in_model, side_by_side_times  # noqa: E402
from tilecraft.tuning.report import end_to_end_curve  # noqa: E402
from tilecraft.tuning.transfer import beside  # noqa: E402


def tune(case: end_to_end.Case, tuner: str, args: argparse.Namespace, records: Path,
         cost_model: Path | None = None, transfer: bool = True, trials: int | None = None) -> tilecraft.tuning.TuningResult:
    records.unlink(missing_ok=True)
    beside(records).unlink(missing_ok=True)
    start = time.perf_counter()
    result = tilecraft.tune(
        case.model, trials=trials or args.trials, trials_per_task=args.trials_per_task,
        time_budget=None if trials else args.minutes * 60, tuning_records=records, tuner=tuner,
        report=records.with_suffix(".html"), end_to_end=False, cost_model=cost_model,
        transfer=transfer, progress=args.progress)
    print(f"  {tuner}: {sum(t.trials for t in result.tasks)} trials over {len(result.tasks)} tasks "
          f"in {time.perf_counter() - start:.0f} s -> {records}")
    return result


SUITE_PREFIX = "suite:"


def load_case(name: str, args: argparse.Namespace) -> end_to_end.Case:
    """A model of benchmarks/end_to_end.py, else one of the public suite by its name there;
    ``suite:NAME`` always names the suite's (end_to_end.py's ``regnet`` and ``squeezenet``
    are other models than the suite's, and a bare name picks end_to_end.py's)."""
    suite_only = name.startswith(SUITE_PREFIX)
    name = name.removeprefix(SUITE_PREFIX)
    if name in end_to_end.CASES and not suite_only:
        return end_to_end.CASES[name](args)
    if name not in public_suite.ARCHITECTURES:
        raise SystemExit(f"unknown model {name!r}: one of {', '.join(end_to_end.CASES)} or a suite model "
                         f"({', '.join(public_suite.ARCHITECTURES)})")
    import onnx

    module, inputs = public_suite.build(name)
    model = onnx.load_from_string(public_suite.export_onnx(module, inputs))
    feeds = {f"input{i}": tensor.numpy() for i, tensor in enumerate(inputs)}
    return end_to_end.Case(name, model, feeds)


def threads() -> int:
    return tilecraft.CompileOptions().target.num_threads


def compare(case: end_to_end.Case, records: dict[str, Path], repeat: int, clock: str) -> dict[str, list[float]]:
    """Seconds per call per paired round on ``clock``: default, each tuner's records,
    onnxruntime (with the builds' thread count)."""
    import onnxruntime

    inputs = list(case.feeds.values())
    modules = {"default": tilecraft.compile(case.model, keep_ir=False)}
    for tuner, path in records.items():
        modules[tuner] = tilecraft.compile(case.model, keep_ir=False, tuning_records=path)
    settings = onnxruntime.SessionOptions()
    settings.intra_op_num_threads = threads()
    session = onnxruntime.InferenceSession(case.model.SerializeToString(), settings,
                                           providers=["CPUExecutionProvider"])
    runners = {name: (lambda m=module: m(*inputs)) for name, module in modules.items()}
    runners["onnxruntime"] = lambda: session.run(None, case.feeds)
    # The pause: onnxruntime's pool threads spin on after a call and took a core from the
    # tilecraft build timed after them (ResNet-50: 77 against 48 ms with onnxruntime's
    # spinning off), which squeezed every ratio of this table towards 1.
    return paired_rounds(runners, repeat, pause_s=end_to_end.RUNNER_PAUSE_S, clock=get_clock(clock))


def run_model(name: str, args: argparse.Namespace) -> None:
    case = load_case(name, args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"\n== {name}: {len(tilecraft.extract_tasks(case.model))} tasks, "
          f"{args.minutes:g} min per tuner, tuners {','.join(args.tuners)}, {threads()} thread(s), "
          f"clock {args.clock}")
    records = {tuner: out / f"{name}.{tuner}.jsonl" for tuner in args.tuners}
    tasks = tilecraft.extract_tasks(case.model)
    for tuner, path in records.items():
        if args.reuse_records and path.is_file():
            print(f"  {tuner}: reusing {path} (--reuse-records); not tuned again")
            continue
        tune(case, tuner, args, path)
        slower = confirm_in_model(case.model, tilecraft.CompileOptions(), path, tasks)
        print(f"  {tuner}: {len(slower)} tuned config(s) slower in the model than the default, not applied")
    samples = compare(case, records, args.repeat, args.clock)
    medians = {label: statistics.median(times) for label, times in samples.items()}
    default, ort = medians["default"], medians["onnxruntime"]
    print(f"  {'':<12} {'ms':>9} {'/default':>9} {'/ort':>7}")
    for label, seconds in medians.items():
        print(f"  {label:<12} {seconds * 1e3:9.3f} {seconds / default:9.3f} {seconds / ort:7.3f}")
    for tuner in args.tuners:
        print(f"  {tuner} vs default: {significance.compare(samples['default'], samples[tuner]).describe()}; "
              f"{medians[tuner] / ort:.2f}x onnxruntime's time")
    if {"xgb", "random"} <= set(args.tuners):
        print(f"  xgb vs random at the same budget: "
              f"{significance.compare(samples['random'], samples['xgb']).describe()}")
    tuner = args.tuners[0]
    rows = side_by_side_times(case.model, tilecraft.CompileOptions(), records[tuner], tasks, top=args.top)
    print(f"  tuner vs in-model kernel time ({tuner}'s records, heaviest {args.top} tasks, "
          "measured in alternating rounds):")
    print("\n".join("    " + line for line in agreement_table(rows).splitlines()))
    within = [r for r in rows if r.ratio is not None and 0.8 <= r.ratio <= 1.25]
    print(f"  within 20 %: {len(within)}/{len(rows)}")


def identical_builds(name: str, runs: int, args: argparse.Namespace) -> None:
    """``runs`` tune-and-compare runs whose records can only hold the default schedules
    (one trial per task): the report must never print a speedup. Each run also times two
    separate builds of the default model (the second one not from the compile cache) in
    ``tune``'s paired rounds on the clock: the measurement itself must not claim one either."""
    from tilecraft.tuning.tune import END_TO_END_ROUNDS

    case = load_case(name, args)
    trials = len(tilecraft.extract_tasks(case.model))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    inputs = list(case.feeds.values())
    first = tilecraft.compile(case.model, keep_ir=False)
    second = tilecraft.compile(case.model, keep_ir=False, cache=False)
    claimed = timed_claims = 0
    for run in range(runs):
        samples = paired_rounds({"default": lambda: first(*inputs), "identical": lambda: second(*inputs)},
                                END_TO_END_ROUNDS, min_sample_s=0.05, clock=get_clock(args.clock))
        timed = significance.compare(samples["default"], samples["identical"])
        timed_claims += timed.significant
        print(f"  run {run + 1}/{runs}: two builds of the default timed on {args.clock}: {timed.describe()}")
        if args.timed_only:
            continue
        records = out / f"{name}.identical.jsonl"
        records.unlink(missing_ok=True)
        result = tilecraft.tune(case.model, trials=trials, tuning_records=records, tuner="random",
                                seed=run, progress=False, transfer=False)
        summary = result.summary()
        claims = [line for line in summary.splitlines()
                  if re.search(r"\d\.\d\dx faster|\d\.\d\dx slower", line)
                  or re.search(r"^\S+\s+[\d.]+\s+[\d.]+\s+\S+\s+[\d.]+x\s", line)]
        claimed += bool(claims)
        print(f"  run {run + 1}/{runs}: {summary.splitlines()[-1]}")
    tuned = "" if args.timed_only else f"{claimed} of {runs} runs printed a speedup (goal 0); "
    print(f"  identical builds ({name}): {tuned}the timed "
          f"pairs of identical builds claimed a difference in {timed_claims} of {runs} (clock {args.clock})")


def warm_start(first: str, second: str, args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    source = end_to_end.CASES[first](args)
    print(f"\n== warm start: {first} then {second}, {args.trials} trials each")
    tune(source, "xgb", args, out / f"{first}.source.jsonl", trials=args.trials)
    model = beside(out / f"{first}.source.jsonl")
    target = end_to_end.CASES[second](args)
    curves = {}
    for label, kwargs in (("warm", {"cost_model": model}), ("cold", {"transfer": False})):
        path = out / f"{second}.{label}.jsonl"
        tune(target, "xgb", args, path, trials=args.trials, **kwargs)
        curves[label] = end_to_end_curve(load_records(path))
    print(f"  {second}'s estimated model time (ms) after n trials of the search:")
    length = min(len(c) for c in curves.values())
    marks = sorted({max(1, length * q // 4) - 1 for q in (1, 2, 3, 4)})
    print("  " + f"{'n':>6}" + "".join(f"{label:>10}" for label in curves))
    for mark in marks:
        print("  " + f"{mark:>6}" + "".join(f"{curves[label][mark] * 1e3:10.4f}" for label in curves))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="digits", help=f"comma-separated: {', '.join(end_to_end.CASES)}")
    parser.add_argument("--tuners", default="xgb", help="comma-separated tuners (xgb,random,...)")
    parser.add_argument("--minutes", type=float, default=2.0, help="time budget per tuner and model")
    parser.add_argument("--trials", type=int, default=100000, help="trial cap (warm start: trials per run)")
    parser.add_argument("--trials-per-task", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=15, help="alternating rounds of the comparison")
    parser.add_argument("--top", type=int, default=5, help="tasks in the agreement table")
    parser.add_argument("--bert-layers", type=int, default=2)
    parser.add_argument("--warm-start", metavar="A,B", help="tune A, then B from A's cost model and cold")
    parser.add_argument("--out", default="build/tuning-e2e", help="records and reports folder")
    parser.add_argument("--reuse-records", action="store_true",
                        help="compare with the records already in --out (tuned and confirmed by an "
                             "earlier run) instead of tuning again")
    parser.add_argument("--progress", action="store_true", help="print the tuner's progress lines")
    parser.add_argument("--timed-only", action="store_true",
                        help="with --identical: only the timed pairs of identical builds, no tuning runs")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default=None,
                        help="what the comparisons read (default: thread_cpu at one thread, else wall)")
    parser.add_argument("--identical", type=int, metavar="RUNS",
                        help="instead of tuning: RUNS tune-and-compare runs of builds identical to "
                             "the default; counts the runs that printed a speedup (goal 0)")
    args = parser.parse_args(argv)
    args.tuners = [t for t in args.tuners.split(",") if t]
    args.clock = args.clock or default_clock(threads())
    if args.clock == "thread_cpu" and threads() > 1:
        parser.error("--clock thread_cpu counts the calling thread only: set TILECRAFT_NUM_THREADS=1")
    print(f"tilecraft tuning end to end; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.identical:
        for name in [m for m in args.models.split(",") if m]:
            identical_builds(name, args.identical, args)
        return 0
    if args.warm_start:
        first, second = args.warm_start.split(",")
        if args.trials >= 100000:
            args.trials = 64
        warm_start(first, second, args)
        return 0
    for name in [m for m in args.models.split(",") if m]:
        run_model(name, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
