"""The status mix of sampled schedule-space points over many op classes and odd shapes.

    .venv/bin/python benchmarks/space_status_sweep.py                       # single ops + models
    .venv/bin/python benchmarks/space_status_sweep.py --points 6 --models odd_extents,resnext
    .venv/bin/python benchmarks/space_status_sweep.py --cases conv_groups_5,maxpool_3x3_s2_ceil --models ''
    .venv/bin/python benchmarks/space_status_sweep.py --list

Why: the tuner applies only ``ok`` records, so a bad point costs a trial, not a wrong answer;
but a ``wrong`` or ``crash`` point is a compiler bug on a legal schedule (which a default
schedule may hit on another shape), and a ``build_error`` point is a trial wasted exactly on
the unseen shapes where tuning matters. Nobody sees the mix in an ordinary tuning run: the
tuner samples few points of each task and reports only the best.

What runs: every tunable task of each source (single-op ONNX models with odd extents built
here: prime channels, 1-pixel maps, strides 2/3, dilations 2/3, groups 3/5/32, depthwise
5x5/7x7, batched small matmuls, GEMV, reductions, pools with ceil mode, transposes,
broadcasting elementwise ops; user TE computes; and the public suite's models, exported as
benchmarks/thread_balance.py exports them), in each space a run can search (``hand``; and
``generated``, where it differs from the hand space: the sketches of schedule/sketch.py for
kinds other than matmul and conv2d). Per task and space, ``--points`` distinct valid points
other than the default are drawn at random (seeded), and each is measured exactly as
``tilecraft.tune`` measures a candidate: the default first (its output is the reference),
then each point through tuning/session.py's :class:`MeasureSession` with a
:class:`LocalRunner` worker, its record committed to ``--records`` (status and error). The
timing is cut to one short measurement (statuses are the point, not speed).

A point that times out is measured once more (the runner has restarted its worker): on a
shared machine a process at ``nice 19`` may be stopped for a minute while others measure,
and a one-off timeout there said nothing of the point (the same point then built and ran in
a second). Only a second timeout counts.

The table: one row per op class (task kind and space), then one per task with a failure;
the first error line of each failing class follows. No thresholds: figures go to
docs/performance.md.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
STATUSES = ("ok", "build_error", "wrong", "run_error", "crash", "timeout")
# Public-suite models swept by default: one of each family that brings classes the single
# ops below do not (odd extents, grouped convs, squeeze-excite and 5x5 depthwise, windowed
# attention).
DEFAULT_MODELS = ("odd_extents", "resnext", "mobilenet_v3", "swin")


# --- single-op models --------------------------------------------------------------------

def _onnx(nodes: list[Any], inputs: dict[str, tuple[int, ...]], weights: dict[str, tuple[int, ...]],
          seed: int = 0) -> Any:
    """A graph of ``nodes`` with float inputs and random float weights; the output ``y``'s
    type is inferred (onnx shape inference), so a case states only what it is about."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    initializers = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
                    for name, shape in weights.items()]
    graph = helper.make_graph(
        nodes, "case", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    model.graph.output[0].CopyFrom(inferred.graph.output[0])
    return model


def conv(c: int, f: int, side: int, k: int, *, stride: int = 1, dilation: int = 1, groups: int = 1,
         pad: int | None = None) -> Callable[[], Any]:
    """Conv (NCHW, one image, ``same``-style padding unless ``pad`` says) + bias + Relu."""
    from onnx import helper

    pad = (k - 1) * dilation // 2 if pad is None else pad

    def build() -> Any:
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], strides=[stride] * 2,
                                  dilations=[dilation] * 2, pads=[pad] * 4, group=groups),
                 helper.make_node("Relu", ["c"], ["y"])]
        return _onnx(nodes, {"x": (1, c, side, side)}, {"w": (f, c // groups, k, k), "b": (f,)})
    return build


def matmul(a: tuple[int, ...], b: tuple[int, ...], *, constant_b: bool = False) -> Callable[[], Any]:
    """MatMul of two inputs, or of an input by constant weights (``constant_b``)."""
    from onnx import helper

    def build() -> Any:
        node = helper.make_node("MatMul", ["a", "b"], ["y"])
        if constant_b:
            return _onnx([node], {"a": a}, {"b": b})
        return _onnx([node], {"a": a, "b": b}, {})
    return build


def one_op(op: str, shapes: dict[str, tuple[int, ...]], **attributes: Any) -> Callable[[], Any]:
    """One ONNX op ``op`` over inputs of ``shapes`` (in order), attributes as given."""
    from onnx import helper

    def build() -> Any:
        return _onnx([helper.make_node(op, list(shapes), ["y"], **attributes)], shapes, {})
    return build


def broadcast_gate() -> Any:
    """x * sigmoid(s) + b: a per-channel gate (squeeze-excite's tail) and a bias, broadcast."""
    from onnx import helper

    nodes = [helper.make_node("Sigmoid", ["s"], ["g"]), helper.make_node("Mul", ["x", "g"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["y"])]
    return _onnx(nodes, {"x": (1, 37, 13, 13), "s": (1, 37, 1, 1)}, {"b": (1, 1, 13, 1)})


def _layer_norm(shape: tuple[int, ...]) -> Any:
    """LayerNormalization over the last axis (a reduction, then a broadcast elementwise)."""
    from onnx import helper

    return _onnx([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
                 {"x": shape}, {"g": shape[-1:], "b": shape[-1:]})


def te_case(func: str, args: tuple[int, ...]) -> Callable[[], Any]:
    """A user's TE compute, registered as tests/tuning/test_tuning_op_classes.py registers it."""
    def build() -> Any:
        from tilecraft import auto_scheduler

        _register_te_workloads()
        return auto_scheduler.SearchTask(func=func, args=args).compute_dag
    return build


def _register_te_workloads() -> None:
    from tilecraft import auto_scheduler
    from tilecraft.schedule import te

    @auto_scheduler.register_workload("sweep_grouped_conv", override=True)
    def grouped_conv(n, h, w, g, c, f, k, dilation, stride=1):
        span = (k - 1) * dilation
        x = te.placeholder((n, (h - 1) * stride + span + 1, (w - 1) * stride + span + 1, g, c), name="x",
                           dtype="float32")
        wt = te.placeholder((k, k, g, c, f), name="w", dtype="float32")
        rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(k, "ry"), te.reduce_axis(k, "rx")
        return [x, wt, te.compute(
            (n, h, w, g, f),
            lambda b, y, xx, gg, ff: te.sum(x[b, y * stride + ry * dilation, xx * stride + rx * dilation, gg, rc]
                                            * wt[ry, rx, gg, rc, ff], axis=[ry, rx, rc]), name="grouped_conv")]

    @auto_scheduler.register_workload("sweep_matmul_bias", override=True)
    def matmul_bias(m, k, n):
        a = te.placeholder((m, k), name="a", dtype="float32")
        b = te.placeholder((k, n), name="b", dtype="float32")
        bias = te.placeholder((n,), name="bias", dtype="float32")
        r = te.reduce_axis(k, "r")
        mm = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="mm")
        return [a, b, bias, te.compute((m, n), lambda i, j: mm[i, j] + bias[j], name="out")]

    @auto_scheduler.register_workload("sweep_row_max", override=True)
    def row_max(m, n):
        x = te.placeholder((m, n), name="x", dtype="float32")
        r = te.reduce_axis(n, "r")
        return [x, te.compute((m,), lambda i: te.max(x[i, r], axis=r), name="row_max")]


# name: builder of the model (an onnx.ModelProto or MLIR text).
CASES: dict[str, Callable[[], Any]] = {
    "conv_prime_37_71": conv(37, 71, 13, 3),
    "conv_1x1_prime": conv(37, 71, 13, 1),
    "conv_1x1_one_pixel": conv(64, 37, 1, 1),
    "conv_3x3_one_pixel": conv(32, 48, 1, 3),
    "conv_stride2_odd": conv(24, 40, 15, 3, stride=2),
    "conv_stride3": conv(16, 24, 17, 3, stride=3, pad=0),
    "conv_dilation2": conv(8, 16, 16, 3, dilation=2),
    "conv_dilation3": conv(12, 20, 19, 3, dilation=3),
    "conv_groups_3": conv(15, 21, 13, 3, groups=3),
    "conv_groups_5": conv(20, 35, 11, 3, groups=5),
    "conv_groups_32": conv(64, 64, 9, 3, groups=32),
    "depthwise_5x5": conv(37, 37, 14, 5, groups=37),
    "depthwise_7x7": conv(24, 24, 13, 7, groups=24),
    "depthwise_3x3_stride2": conv(32, 32, 15, 3, stride=2, groups=32),
    "batch_matmul_49x32x49": matmul((4, 49, 32), (4, 32, 49)),
    "batch_matmul_197_tokens": matmul((3, 197, 64), (3, 64, 197)),
    "matmul_shared_b_4x49x32x64": matmul((4, 49, 32), (32, 64)),
    "linear_3x49x96x71": matmul((3, 49, 96), (96, 71), constant_b=True),
    "gemv_256x71": matmul((1, 256), (256, 71), constant_b=True),
    "matmul_37x53x71": matmul((37, 53), (53, 71), constant_b=True),
    "gemm_transposed_b": one_op("Gemm", {"a": (37, 96), "b": (128, 96)}, transB=1),
    "layernorm_49x71": lambda: _layer_norm((3, 49, 71)),
    "reduce_mean_rows": one_op("ReduceMean", {"x": (37, 101)}, axes=[1], keepdims=0),
    "reduce_max_columns": one_op("ReduceMax", {"x": (71, 37)}, axes=[0], keepdims=1),
    "softmax_197": one_op("Softmax", {"x": (3, 197, 197)}, axis=-1),
    "maxpool_3x3_s2_ceil": one_op("MaxPool", {"x": (1, 16, 15, 15)}, kernel_shape=[3, 3], strides=[2, 2],
                                  ceil_mode=1),
    "avgpool_3x3_s2_ceil": one_op("AveragePool", {"x": (1, 19, 14, 14)}, kernel_shape=[3, 3], strides=[2, 2],
                                  ceil_mode=1, count_include_pad=0),
    "global_avgpool_7": one_op("GlobalAveragePool", {"x": (1, 37, 7, 7)}),
    "transpose_nchw_nhwc": one_op("Transpose", {"x": (1, 37, 13, 13)}, perm=[0, 2, 3, 1]),
    "transpose_2d_71x53": one_op("Transpose", {"x": (71, 53)}, perm=[1, 0]),
    "add_broadcast_3d": one_op("Add", {"a": (37, 1, 13), "b": (1, 71, 1)}),
    "gate_broadcast": broadcast_gate,
    "te_grouped_conv_dilated": te_case("sweep_grouped_conv", (1, 11, 11, 3, 5, 7, 3, 2)),
    "te_grouped_conv_stride2": te_case("sweep_grouped_conv", (1, 7, 7, 4, 8, 8, 3, 1, 2)),
    "te_matmul_bias": te_case("sweep_matmul_bias", (37, 24, 53)),
    "te_row_max": te_case("sweep_row_max", (61, 97)),
}


def suite_model(name: str) -> Any:
    """Public-suite model ``name`` as ONNX, exported as benchmarks/thread_balance.py does."""
    sys.path.insert(0, HERE)
    import thread_balance  # noqa: E402  (benchmarks/thread_balance.py)

    return thread_balance._onnx_model(name)[0]


# --- the sweep ---------------------------------------------------------------------------

@dataclass
class Row:
    """The statuses of one task's sampled points in one space."""

    source: str
    task: str
    kind: str
    space: str
    counts: collections.Counter
    errors: dict[str, str]  # status -> the first error line seen
    default_status: str = "ok"


def sample_points(space: Any, count: int, rng: random.Random) -> list[dict[str, int]]:
    """Up to ``count`` distinct valid points other than the default, drawn as the random
    tuner draws them (``SearchSpace.random``)."""
    default, points, seen = space.default(), [], set()
    for _ in range(count * 20):
        if len(points) == count:
            break
        config = space.random(rng)
        key = tuple(sorted(config.items()))
        if config == default or key in seen or not space.is_valid(config):
            continue
        seen.add(key)
        points.append(config)
    return points


def spaces_for(task: Any, names: list[str], target: Any) -> list[tuple[str, Any]]:
    """The spaces of ``task`` a run can search, by name, without duplicates (``generated``
    is the hand space for matmul and conv2d, the sketch space for the other kinds)."""
    from tilecraft.tuning.space_generators import GeneratedSpaceGenerator, space_generator_for

    chosen = []
    for name in names:
        same = "hand" if task.kind in GeneratedSpaceGenerator.HAND_KINDS else "sketch"
        if name == "generated" and same in names:
            continue
        chosen.append((name, space_generator_for(target, name).generate(task)))
    return chosen


def first_line(error: str) -> str:
    lines = [line for line in error.splitlines() if line.strip()]
    return lines[0][:200] if lines else ""


def sweep_task(source: str, task: Any, spaces: list[tuple[str, Any]], points: int, seed: int,
               session: Any, database: Any) -> list[Row]:
    from tilecraft.tuning.session import TaskState

    rows = []
    for space_name, space in spaces:
        state = TaskState(task, space, "random", seed)
        row = Row(source, task.name, task.kind, space_name, collections.Counter(), {})
        session.measure_default([state], [database])
        if state.reference is None:
            row.default_status = "failed"
            rows.append(row)
            continue
        for config in sample_points(space, points, random.Random(f"{seed}:{task.key}:{space_name}")):
            result = session.measure(state, config, "sweep", [database])
            if result.status == "timeout":  # once more, in a fresh worker (see the module docstring)
                result = session.measure(state, config, "sweep", [database])
            row.counts[result.status] += 1
            if result.status != "ok" and result.status not in row.errors:
                row.errors[result.status] = f"{first_line(result.error)}  [{config}]"
        rows.append(row)
        print(f"  {source:<26} {task.name[:48]:<48} {space_name:<9} "
              + " ".join(f"{s}={row.counts[s]}" for s in STATUSES if row.counts[s]), file=sys.stderr, flush=True)
    return rows


def print_table(rows: list[Row]) -> None:
    header = f"{'class':<28} {'tasks':>5} {'points':>6} " + " ".join(f"{s:>11}" for s in STATUSES)
    print(header)
    print("-" * len(header))
    classes: dict[tuple[str, str], list[Row]] = collections.defaultdict(list)
    for row in rows:
        classes[(row.kind, row.space)].append(row)
    total = collections.Counter()
    for (kind, space), members in sorted(classes.items()):
        counts = sum((r.counts for r in members), collections.Counter())
        total += counts
        print(f"{kind + ' / ' + space:<28} {len(members):>5} {sum(counts.values()):>6} "
              + " ".join(f"{counts[s]:>11}" for s in STATUSES))
    print(f"{'all':<28} {len(rows):>5} {sum(total.values()):>6} " + " ".join(f"{total[s]:>11}" for s in STATUSES))
    failing = [r for r in rows if any(r.counts[s] for s in STATUSES[1:]) or r.default_status != "ok"]
    if failing:
        print("\nTasks with failing points (source / task / space: statuses):")
        for row in failing:
            counts = " ".join(f"{s}={row.counts[s]}" for s in STATUSES if row.counts[s])
            default = "" if row.default_status == "ok" else " (default schedule failed: not swept)"
            print(f"  {row.source} / {row.task} / {row.space}: {counts}{default}")
        print("\nFirst error of each failing class:")
        seen: set[tuple[str, str, str]] = set()
        for row in failing:
            for status, error in row.errors.items():
                if (row.kind, row.space, status) not in seen:
                    seen.add((row.kind, row.space, status))
                    print(f"  {row.kind} / {row.space} / {status}: {error}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=4, help="points sampled per task and space (default 4)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", default=",".join(CASES), help="single-op cases (comma-separated; '' for none)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="public-suite models (benchmarks/public_suite.py --list; '' for none)")
    parser.add_argument("--tasks-per-model", type=int, default=6,
                        help="a suite model's tasks swept: the heaviest of each kind first, then by weight")
    parser.add_argument("--spaces", default="hand,generated", help="spaces: hand, generated, sketch")
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--threads", type=int, default=None, help="the target's thread count (default: its own)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per candidate")
    parser.add_argument("--records", default=None, help="records file (default: a temporary one)")
    parser.add_argument("--list", action="store_true", help="list the single-op cases and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(CASES))
        return

    from tilecraft.pipelines.target import Target
    from tilecraft.schedule.records import canonical_target
    from tilecraft.tuning import extract_tasks
    from tilecraft.tuning.database import JsonLinesDatabase
    from tilecraft.tuning.measure import LocalRunner, RunnerOptions
    from tilecraft.tuning.session import MeasureSession

    target = Target.parse(args.target)
    if args.threads is not None:
        target = replace(target, num_threads=args.threads)
    spaces = [s for s in args.spaces.split(",") if s]
    sources: list[tuple[str, Callable[[], Any], int | None]] = [
        (name, CASES[name], None) for name in args.cases.split(",") if name]
    sources += [(name, (lambda n=name: suite_model(n)), args.tasks_per_model) for name in args.models.split(",") if name]
    records = args.records or os.path.join(tempfile.mkdtemp(prefix="status-sweep-"), "records.jsonl")
    # One short measurement per candidate: the statuses are the point, not the speed.
    options = RunnerOptions(timeout=args.timeout, number=1, repeat=1, min_repeat_ms=0.0, flush_cache=0)
    rows: list[Row] = []
    swept: set[str] = set()
    start = time.perf_counter()
    with LocalRunner(options) as runner, JsonLinesDatabase(records) as database:
        session = MeasureSession(runner, canonical_target(target), target.num_threads)
        for name, build, limit in sources:
            try:
                tasks = extract_tasks(build(), target)
            except Exception as error:  # noqa: BLE001 - a source that fails to load is reported, not fatal
                print(f"{name}: no tasks ({type(error).__name__}: {first_line(str(error))})", file=sys.stderr)
                continue
            if limit is not None:
                by_kind: dict[str, Any] = {}
                for task in tasks:  # heaviest first
                    by_kind.setdefault(task.kind, task)
                tasks = (list(by_kind.values()) + [t for t in tasks if t not in by_kind.values()])[:limit]
            for task in tasks:
                if task.key in swept:  # a layout transpose many cases share: once
                    continue
                swept.add(task.key)
                rows += sweep_task(name, task, spaces_for(task, spaces, target), args.points, args.seed,
                                   session, database)
    print(f"\n{sum(sum(r.counts.values()) for r in rows)} points of {len(rows)} task spaces in "
          f"{time.perf_counter() - start:.0f} s; load average {os.getloadavg()[0]:.2f}; records: {records}\n")
    print_table(rows)


if __name__ == "__main__":
    main()
