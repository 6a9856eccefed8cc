"""XGBoost against random search on ten tasks of the op classes the tuner must cover (issue #44).

    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/tuning_curve.py --trials 48 --out bench-curve
    .venv/bin/python benchmarks/tuning_curve.py --trials 32 --only gemv_1x1024x1000,te_row_max_512x1000

The tasks (:data:`TASKS`) are ones whose default schedule is far from what their space
holds, so that a search has something to find: depthwise convolutions (plain, dilated,
strided), a grouped convolution of odd channel counts, a GEMV, a skinny GEMM, the batched
small matmul of a windowed attention, a max pooling, and two user TE computes through the
auto-scheduler API (a transposed-A matmul, a row maximum). The ONNX ones are the heaviest
task of a one-node model (so each goes through the import, layout and fusion passes a
model's op does). Per task, ``compare_tuners`` measures one batch of each
tuner in turn with the same worker (load drift hits both alike), ``--trials`` each, in the
spaces ``--space`` names (default ``generated``: the auto-scheduler's). Printed per task:
the default's GFLOPS, each tuner's best, the trial at which XGBoost first reached random's
best after N trials (the issue's goal: at most N/2), at which it reached 95 % of it, and at
which it reached random's best *config* on its own measurements (``xgb@cfg``: the two tuners'
figures for one config differ by a few per cent on a shared machine). ``--table-only``
prints the table again from the records a run left in ``--out``.
The curves (best so far after each trial) go to ``curve.txt`` and, with matplotlib,
``curve.png`` in ``--out``. No thresholds: a benchmark for notes; quote the load average
printed with it (every figure moves with the load of a shared machine).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft import auto_scheduler
from tilecraft.schedule import te
from tilecraft.schedule.task import Task
from tilecraft.tuning import load_records
from tilecraft.tuning.compare_tuners import compare_tuners
from tilecraft.tuning.measure import RunnerOptions
from tilecraft.tuning.report import best_so_far


def _model(nodes, inputs, output, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "task",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs],
        [helper.make_tensor_value_info(output[0], TensorProto.FLOAT, output[1])],
        initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def matmul(m: int, k: int, n: int, batch: int = 0) -> onnx.ModelProto:
    lead = [batch] if batch else []
    return _model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                  [("a", lead + [m, k]), ("b", lead + [k, n])], ("y", lead + [m, n]))


def conv(channels: int, size: int, filters: int, kernel: int, *, dilation: int = 1,
         group: int = 1, stride: int = 1) -> onnx.ModelProto:
    """A 'same'-padded convolution of a 1 x channels x size x size input (constant filters)."""
    pad = dilation * (kernel - 1) // 2
    weights = np.random.default_rng(0).standard_normal(
        (filters, channels // group, kernel, kernel)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[kernel, kernel],
                            pads=[pad] * 4, dilations=[dilation] * 2, group=group,
                            strides=[stride] * 2)
    out = -(-size // stride)
    return _model([node], [("x", [1, channels, size, size])], ("y", [1, filters, out, out]),
                  [numpy_helper.from_array(weights, "w")])


def max_pool(channels: int, size: int) -> onnx.ModelProto:
    """A 3x3 max pooling of stride 2 (ResNet's stem pooling) of a 1 x channels x size x size input."""
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    return _model([node], [("x", [1, channels, size, size])], ("y", [1, channels, size // 2, size // 2]))


def te_matmul_tn(m: int, k: int, n: int) -> list:
    """A user's TE compute: C = A^T B with A stored K x M (a layout the planner does not see in models)."""
    a = te.placeholder((k, m), name="A", dtype="float32")
    b = te.placeholder((k, n), name="B", dtype="float32")
    r = te.reduce_axis(k, name="k")
    return [a, b, te.compute((m, n), lambda i, j: te.sum(a[r, i] * b[r, j], axis=r), name="c")]


def te_row_max(rows: int, columns: int) -> list:
    """A user's TE compute: the maximum of each row (a max reduction, softmax's first step)."""
    a = te.placeholder((rows, columns), name="A", dtype="float32")
    r = te.reduce_axis(columns, name="k")
    return [a, te.compute((rows,), lambda i: te.max(a[i, r], axis=r), name="m")]


def onnx_task(model: onnx.ModelProto) -> Task:
    """The heaviest task of a one-node model (each goes through the import, layout and
    fusion passes a model's op does)."""
    return max(tilecraft.extract_tasks(model), key=lambda t: t.flops * t.count)


def te_task(workload, *args) -> Task:
    """The heaviest task of a user's TE compute, as the auto-scheduler API makes it."""
    tasks = auto_scheduler.SearchTask(func=workload, args=args, target="llvm").tasks
    return max(tasks, key=lambda t: t.flops * t.count)


# Each task's default runs below about half the FMA peak (some 260 GFLOPS at one thread on
# the Zen 5), and a random-search probe of 16-24 trials per candidate found configs above the
# default on each (barely, on the batched matmul). Why each is in, the probe's figures and
# the candidates left out: docs/tuning.md, "The tuner curve's ten tasks". HELD_OUT: kept out
# of the work on the search, looked at in the final curves only.
TASKS: dict[str, Callable[[], Task]] = {
    "depthwise3x3_64x56": lambda: onnx_task(conv(64, 56, 64, 3, group=64)),
    "depthwise3x3_dilated2_96x28": lambda: onnx_task(conv(96, 28, 96, 3, group=96, dilation=2)),
    "depthwise3x3_stride2_96x56": lambda: onnx_task(conv(96, 56, 96, 3, group=96, stride=2)),
    "conv3x3_grouped3_60x28": lambda: onnx_task(conv(60, 28, 60, 3, group=3)),
    "gemv_1x1024x1000": lambda: onnx_task(matmul(1, 1024, 1000)),
    "gemm_4096x64x10": lambda: onnx_task(matmul(4096, 64, 10)),
    "batch_matmul_16x49x32x49": lambda: onnx_task(matmul(49, 32, 49, batch=16)),
    "te_matmul_tn_200x300x250": lambda: te_task(te_matmul_tn, 200, 300, 250),
    "te_row_max_512x1000": lambda: te_task(te_row_max, 512, 1000),
    "max_pool3x3s2_64x112": lambda: onnx_task(max_pool(64, 112)),
}
HELD_OUT = ("depthwise3x3_stride2_96x56", "batch_matmul_16x49x32x49")


def trials_to_reach(curve: list[float], level: float) -> int | None:
    """1-based trial at which ``curve`` first reaches ``level``; ``None`` if never."""
    return next((i + 1 for i, value in enumerate(curve) if value >= level), None)


def reach_on_own_scale(random_records: list, xgb_records: list) -> int | None:
    """1-based trial at which XGBoost reached random search's best *config* on its own
    measurements: where it measured that config too, the first trial its best so far is at
    least its own measurement of it; else the trial it reached random's measured best.

    Why: the two tuners' measurements of one config differ by a few per cent between them
    (a shared machine; in one run at load 15 every config both measured came out 4-8 %
    slower in XGBoost's records), so a tuner that found random's very config can still
    "never" reach random's figure for it. Config identity is free of that offset."""
    ok = [r for r in random_records if r.ok]
    if not ok:
        return None
    best = max(ok, key=lambda r: r.gflops)
    own = [r.gflops for r in xgb_records if r.ok and r.config == best.config]
    return trials_to_reach(best_so_far(xgb_records), min(own) if own else best.gflops)


def row_from_records(name: str, records: dict, task_name: str, kind: str, trials: int,
                     seconds: float) -> dict:
    """One task's table row from its two records files."""
    loaded = {tuner: load_records(path) for tuner, path in records.items()}
    curves = {tuner: best_so_far(rs) for tuner, rs in loaded.items()}
    failures = {tuner: sum(not r.ok for r in rs) for tuner, rs in loaded.items()}
    level = curves["random"][-1]
    return {"name": name, "task": task_name, "kind": kind, "default": curves["random"][0],
            "random": level, "xgb": curves["xgb"][-1], "n": len(curves["random"]), "trials": trials,
            "reach": trials_to_reach(curves["xgb"], level),
            "reach95": trials_to_reach(curves["xgb"], 0.95 * level),
            "reach_own": reach_on_own_scale(loaded["random"], loaded["xgb"]),
            "failures": failures, "curves": curves, "seconds": seconds}


def run_task(name: str, args: argparse.Namespace, out: Path) -> dict:
    task = TASKS[name]()
    files = {tuner: out / f"{name}-{tuner}.jsonl" for tuner in ("random", args.model_tuner)}
    # The table's "xgb" columns are the model tuner's, whichever loss it trains with.
    records = {"random": files["random"], "xgb": files[args.model_tuner]}
    if args.table_only:
        return row_from_records(name, records, task.name, task.kind, args.trials, 0.0)
    for path in files.values():
        path.unlink(missing_ok=True)
    start = time.perf_counter()
    compare_tuners(task, files, trials=args.trials, timeout=args.timeout, batch_size=args.batch,
                   runner=RunnerOptions(repeat=args.repeat), progress=args.progress, validate_top=0,
                   space=args.space, seed=args.seed)
    row = row_from_records(name, records, task.name, task.kind, args.trials, time.perf_counter() - start)
    level = row["random"]
    print(f"{name}: {task.name} ({task.kind}); default {row['default']:.1f}, random {level:.1f}, "
          f"xgb {row['xgb']:.1f} GFLOPS; xgb reached random's best at trial {row['reach'] or 'never'}"
          f" of {row['n']}; {row['seconds']:.0f} s; load {open('/proc/loadavg').read().split()[:3]}",
          flush=True)
    return row


def table(rows: list[dict]) -> str:
    lines = [f"{'task':28} {'kind':17} {'default':>8} {'random':>8} {'xgb':>8} "
             f"{'xgb@rnd':>8} {'xgb@95%':>8} {'xgb@cfg':>8} {'<=N/2':>6}  failures r/x"]
    for r in rows:
        half = r["n"] // 2
        lines.append(
            f"{r['name']:28} {r['kind']:17} {r['default']:>8.1f} {r['random']:>8.1f} {r['xgb']:>8.1f} "
            f"{str(r['reach'] or '-'):>8} {str(r['reach95'] or '-'):>8} {str(r['reach_own'] or '-'):>8} "
            f"{'yes' if r['reach'] and r['reach'] <= half else 'no':>6}  "
            f"{r['failures']['random']}/{r['failures']['xgb']}"
            f"{'  (held out)' if r['name'] in HELD_OUT else ''}"
            f"{'  (random found nothing above the default)' if r['random'] <= r['default'] else ''}"
            f"{'  (space exhausted: %d valid configs)' % r['n'] if r['n'] < r['trials'] else ''}")
    met = sum(bool(r["reach"] and r["reach"] <= r["n"] // 2) for r in rows)
    own = sum(bool(r["reach_own"] and r["reach_own"] <= r["n"] // 2) for r in rows)
    lines.append(f"xgb reached random's best in at most half the trials on {met} of {len(rows)} tasks, "
                 f"random's best config on its own measurements (xgb@cfg) on {own} "
                 "(GFLOPS: best so far; xgb@rnd: the trial, default measurement = 1)")
    return "\n".join(lines)


def checkpoints(rows: list[dict], step: int = 8) -> str:
    """Both tuners' best GFLOPS after every ``step`` trials (random / xgb), one row per task."""
    longest = max(len(c) for r in rows for c in r["curves"].values())
    marks = list(range(step, longest + 1, step)) or [longest]
    lines = [f"{'best after N trials (random/xgb)':34}" + "".join(f"{n:>14}" for n in marks)]
    for r in rows:
        cells = []
        for n in marks:
            values = [r["curves"][t][min(n, len(r["curves"][t])) - 1] for t in ("random", "xgb")]
            cells.append(f"{values[0]:>6.1f}/{values[1]:<6.1f}"[:13].rjust(14))
        lines.append(f"{r['name']:34}" + "".join(cells))
    return "\n".join(lines)


def curve_text(rows: list[dict]) -> str:
    out = []
    for r in rows:
        for tuner in ("random", "xgb"):
            values = " ".join(f"{v:.1f}" for v in r["curves"][tuner])
            out.append(f"{r['name']} {tuner}: {values}")
    return "\n".join(out)


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    from matplotlib import pyplot

    columns = 5
    figure, axes = pyplot.subplots(-(-len(rows) // columns), columns, figsize=(4 * columns, 6.5),
                                   squeeze=False)
    for ax, r in zip(axes.flat, rows):
        for tuner, curve in r["curves"].items():
            ax.plot(range(1, len(curve) + 1), curve, label=tuner)
        ax.set_title(r["name"], fontsize=8)
        ax.set_xlabel("trials", fontsize=7)
        ax.set_ylabel("best GFLOPS", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    pyplot.close(figure)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=64, help="N: trials per tuner and task")
    parser.add_argument("--space", default="generated", choices=("hand", "generated", "sketch"))
    parser.add_argument("--batch", type=int, default=8, help="candidates per tuner step")
    parser.add_argument("--repeat", type=int, default=RunnerOptions.repeat,
                        help="measurements per candidate; its record's cost is their median")
    parser.add_argument("--model-tuner", default="xgb", choices=("xgb", "xgb_rank"),
                        help="the model-guided tuner set against random search (the table's xgb columns)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per candidate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help="comma-separated task names (default: all ten)")
    parser.add_argument("--progress", action="store_true", help="print each batch")
    parser.add_argument("--out", default="bench-curve", help="folder for records, curve.txt, curve.png")
    parser.add_argument("--table-only", action="store_true",
                        help="no tuning: the table from the records an earlier run left in --out")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(TASKS)
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(TASKS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"N={args.trials} trials per tuner, random against {args.model_tuner}, space {args.space}, "
          f"batches of {args.batch}, {args.repeat} measurements per candidate (their median), "
          f"load average {open('/proc/loadavg').read().split()[:3]}", flush=True)
    rows = [run_task(name, args, out) for name in names]
    text = table(rows) + "\n\n" + checkpoints(rows)
    print("\n" + text)
    (out / "curve.txt").write_text(text + "\n\n" + curve_text(rows) + "\n")
    drawn = plot(rows, out / "curve.png")
    print(f"\ncurves: {out / 'curve.txt'}{', ' + str(out / 'curve.png') if drawn else ''}; "
          f"load average now {open('/proc/loadavg').read().split()[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
