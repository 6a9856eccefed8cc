"""A task records the kernel that writes what it reads (schedule/task.py's ``Producer``), and a
tuning worker runs that kernel before each timed call, so the candidate reads its input as
the model's kernel does, just written by its producer's threads (tuning/measure.py,
``producer_feed``). Why: read back by the measuring thread instead, a small two-thread 1x1
expansion measured 13-26 % faster in the tuner than in the model (docs/tuning.md, "Faithful
measurement: the producer before the call")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from mlir import ir
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.pipelines.cpu import cpu_pipeline
from tilecraft.pipelines.jit.compiled_module import compile_ir
from tilecraft.pipelines.target import Target
from tilecraft.schedule.records import canonical_target
from tilecraft.schedule.task import Producer, Task, measured_module
from tilecraft.tuning.measure import MeasureInput, RunnerOptions, _run_job, producer_feed, random_inputs

SIDE = 10


def _conv(name: str, source: str, filters: int, channels: int, kernel: int, rng: np.random.Generator,
          residual: str | None = None) -> tuple[list, list]:
    """Conv (+ a residual add) + ReLU, its output named ``name``."""
    w = numpy_helper.from_array((rng.standard_normal((filters, channels, kernel, kernel)) / 8).astype(np.float32),
                                f"{name}_w")
    b = numpy_helper.from_array(rng.standard_normal(filters).astype(np.float32), f"{name}_b")
    nodes = [helper.make_node("Conv", [source, w.name, b.name], [f"{name}_c"], name=f"{name}_conv",
                              pads=[kernel // 2] * 4)]
    last = f"{name}_c"
    if residual is not None:
        nodes.append(helper.make_node("Add", [last, residual], [f"{name}_sum"], name=f"{name}_add"))
        last = f"{name}_sum"
    nodes.append(helper.make_node("Relu", [last], [name], name=f"{name}_relu"))
    return nodes, [w, b]


@pytest.fixture(scope="module")
def chain() -> onnx.ModelProto:
    """a = conv1x1(x); b = conv1x1(a); c = conv1x1(b) + a (a residual: two produced inputs,
    ``b`` written just before); y = conv3x3(c) (its input padded first). Filter counts are
    multiples of 16, so no filter is padded (a padded result is read through a slice, which
    is no reshape: no producer)."""
    rng = np.random.default_rng(0)
    nodes, weights = [], []
    for name, source, filters, channels, kernel, residual in (
            ("a", "x", 16, 8, 1, None), ("b", "a", 32, 16, 1, None), ("c", "b", 16, 32, 1, "a"),
            ("y", "c", 16, 16, 3, None)):
        more_nodes, more_weights = _conv(name, source, filters, channels, kernel, rng, residual)
        nodes += more_nodes
        weights += more_weights
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, SIDE, SIDE])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, SIDE, SIDE])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def tasks(chain: onnx.ModelProto) -> dict[str, Task]:
    """The model's convolution tasks by the ONNX name of their convolution."""
    found = {}
    for task in tilecraft.extract_tasks(chain, "llvm"):
        if not task.op_name.startswith("linalg.conv"):
            continue  # the layout transposes carry the first convolution's name too
        names = {name for names in task.kernels for name in names}
        for conv in ("a_conv", "b_conv", "c_conv", "y_conv"):
            if any(name.startswith(conv) for name in names):
                found[conv] = task
    assert set(found) == {"a_conv", "b_conv", "c_conv", "y_conv"}, {t.name: t.kernels for t in found.values()}
    return found


def test_each_task_names_the_kernel_written_just_before_it(tasks):
    # Its input is the model input's layout transpose: a transpose moves data only, and the
    # stages after the schedule often fold it into the kernel before it, so it is not run.
    assert tasks["a_conv"].producer_cycle == ()
    (b_from,) = tasks["b_conv"].producer_cycle
    assert (b_from.payload, b_from.argument) == (tasks["a_conv"].payload, 0)
    # The residual reads a and b: b is the one written just before (its argument 0); a was
    # written two kernels earlier and is read back into the caches as before.
    (c_from,) = tasks["c_conv"].producer_cycle
    assert (c_from.payload, c_from.argument) == (tasks["b_conv"].payload, 0)
    # A padded input is a pad's result, not a kernel's: no producer (the pad's borders would
    # be left unwritten by the producer's measured module).
    assert tasks["y_conv"].producer_cycle == ()


def test_the_cycle_follows_the_occurrences_executions():
    first, second = Producer("p1", 0), Producer("p2", 1)
    task = Task(key="k", name="t", kind="conv2d", op_name="linalg.conv_2d_nhwc_hwcf", ranges=(1,),
                parallel=(True,), element_type="f32", flops=1, count=3, payload="",
                runs=(1, 2, 1), producers=(first, second, None))
    # One entry per execution; the one reading no kernel's result reads its arguments back.
    assert task.producer_cycle == (first, second, second, None)
    assert Task(**{**task.__dict__, "producers": (None, None, None)}).producer_cycle == ()
    assert Task(**{**task.__dict__, "producers": ()}).producer_cycle == ()  # not recorded
    many = Task(**{**task.__dict__, "count": 6, "runs": (1, 1, 1, 1, 1, 2),
                   "producers": tuple(Producer(f"p{i}", 0) for i in range(6))})
    kept = [p for p in many.producer_cycle if p is not None]
    assert len(set(kept)) == 4 and Producer("p5", 0) in kept  # the most executed four
    assert many.producer_cycle.count(None) == 2


def test_a_read_back_step_reads_every_argument_and_runs_no_producer(monkeypatch):
    from tilecraft.tuning import measure

    steps = []
    monkeypatch.setattr(measure, "_eviction_reader", lambda nbytes: lambda: steps.append("evict"))

    class Argument(np.ndarray):
        def sum(self, *args, **kwargs):
            steps.append("read")

    arguments = [np.zeros(4, np.float32).view(Argument)]
    feed = measure.ProducerFeed([None, (lambda: np.ones(4, np.float32), [], 0)], arguments)
    flush = measure._cache_flusher(arguments, threads=1, nbytes=8, feed=feed)
    flush()
    assert steps == ["evict", "read"] and feed.index == 0
    steps.clear()
    flush()
    assert steps == ["evict"] and float(arguments[0][0]) == 1.0  # the producer wrote it


def _job(task: Task, producers: tuple[Producer, ...]) -> MeasureInput:
    return MeasureInput(payload=task.payload, task=task.describe(), config=None,
                        target=canonical_target(Target.parse("llvm")), threads=1,
                        placement=task.placement, producers=producers)


def _candidate(task: Task):
    target = Target.parse("llvm")
    return compile_ir(measured_module(task.payload, ir.Context(), placement=task.placement),
                      cpu_pipeline(target, opt_level=3), target)


def test_the_feed_puts_the_producers_result_where_the_candidate_reads_it(tasks):
    consumer = tasks["c_conv"]
    candidate = _candidate(consumer)
    arguments = random_inputs(candidate.signature)
    before = [a.copy() for a in arguments]
    feed = producer_feed(_job(consumer, consumer.producer_cycle), arguments)
    assert feed is not None and feed.index == 0
    feed()
    # The producer's own build, on the feed's inputs, computes what now sits in argument 0.
    producer = _candidate(tasks["b_conv"])
    module, inputs, _ = feed.steps[0]
    np.testing.assert_allclose(arguments[0], producer(*inputs).reshape(before[0].shape), rtol=1e-6)
    assert not np.array_equal(arguments[0], before[0])
    np.testing.assert_array_equal(arguments[1], before[1])  # the other input is untouched


def test_a_producer_that_does_not_fit_is_left_out(tasks):
    consumer = tasks["c_conv"]
    arguments = random_inputs(_candidate(consumer).signature)
    wrong_size = Producer(tasks["a_conv"].payload, 0)  # 16 channels where b's 32 are read
    out_of_range = Producer(tasks["b_conv"].payload, len(arguments))
    assert producer_feed(_job(consumer, (wrong_size, out_of_range)), arguments) is None
    assert producer_feed(_job(consumer, ()), arguments) is None
    assert producer_feed(_job(consumer, (None, None)), arguments) is None
    broken = Producer("module { func.func @task( }", 0)  # a payload that does not parse
    with pytest.warns(RuntimeWarning, match="did not build or run"):
        assert producer_feed(_job(consumer, (broken,)), arguments) is None


def test_a_worker_times_a_candidate_after_its_producer(tasks, tmp_path: Path):
    consumer = tasks["c_conv"]
    options = RunnerOptions(repeat=2, min_repeat_ms=0.0, flush_cache=1 << 20, clock="wall", kernel_time=True)
    result = _run_job(_job(consumer, consumer.producer_cycle), options, tmp_path)
    assert result.ok, result.error
    assert len(result.costs) == 2 and all(cost > 0 for cost in result.costs)
