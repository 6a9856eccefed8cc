"""Build and run candidates in a separate worker process, like TVM's LocalRunner.

Why a process: a candidate schedule can abort the process inside MLIR (an assertion), hang
in the transform interpreter or the JIT'd code, or compute garbage. The worker is started
with the ``spawn`` context (MLIR's JIT is not fork-safe once used); the parent waits at most
``timeout`` seconds per candidate, kills and restarts a worker that hangs, and notices one
that died. Every outcome comes back as a :class:`MeasureResult` — data, not an exception —
so one bad candidate cannot stop a batch.

A candidate is compiled as ``tilecraft.compile(payload, tuning_records=...)`` would
compile it (a one-record file in the worker's scratch folder; the model's weights are
constants again, of fixed random values, and its result written into the slice of a larger
tensor where the model writes it so, ``MeasureInput.placement``: :func:`candidate_source`; a
bf16 or int8 kernel's task through its build's pipeline, kernel_tasks.py), run on fixed
random inputs, compared with the default schedule's output (the task's first measurement
saves it; of a placed result, its slice: :func:`result_region`), then
timed with :func:`tilecraft.runtime.timing.measure` (``number``, ``repeat``,
``min_repeat_ms``, on the clock ``RunnerOptions.clock`` names; with ``flush_cache``, as many
bytes as the model touches in one run are read and then the task's producer run (the kernel
that writes its input in the model, ``MeasureInput.producers``) or the inputs read again
before each call, which leaves the weights as cold and the inputs as warm as the model
leaves them: :func:`cache_eviction`, :func:`producer_feed`).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from ..runtime import kernel_timers
from ..runtime.timing import default_clock, get_clock, measure
from .roles import MeasureInput, MeasureResult, Runner
from ..errors import OptionError, TuningError

if TYPE_CHECKING:
    from ..pipelines.target import Target
    from ..schedule.task import Task

# A test-only hook: ``hook(config)`` runs in the worker before the candidate is built.
CandidateHook = Callable[[dict], None]


@dataclass(frozen=True)
class RunnerOptions:
    """Measurement settings (TVM's LocalRunner names).

    Attributes:
      timeout: seconds allowed per candidate, build included.
      number: runs per measurement (raised until one lasts ``min_repeat_ms``).
      repeat: measurements per candidate; the record keeps each one's seconds per run.
      min_repeat_ms: minimum duration of one measurement.
      flush_cache: before each call, read that many bytes of a buffer of the worker's
        (``True``: twice the last-level cache, every level evicted; ``False`` or 0: nothing),
        then read the inputs again (with ``kernel_time``, the flush is not timed; without
        it, before each repeat). Why: inside a model, a kernel's weights were last read one
        model run ago, after everything else the run touched, while its inputs were just
        written by the kernel before it; run again and again alone, it finds its weights in
        cache and looks faster than it is in the model. Reading the model's footprint
        gives the weights the same reuse distance: cold where the run outgrows the
        caches (ResNet-50; MobileNetV2, whose weights alone fit, docs/tuning.md), warm
        where it does not. ``None`` (the default): :func:`tilecraft.tune` passes
        :func:`cache_eviction` of the model's tasks; a runner used directly takes ``None``
        as no flush.
      startup_timeout: seconds a fresh worker may take to import MLIR and report ready.
      kernel_time: time the candidate's kernels with the profiler's timers (the profiling
        variant, pipelines/profiling.py) instead of the whole call from Python. Why (the
        default): a profile of the model measures its kernels the same way, while the
        Python entry's per-call cost (argument checks, output allocation; tens of
        microseconds) swamped small kernels and made the tuner's time disagree with the
        kernel's time in the model. ``False``: time per call, entry included.
      clock: ``"wall"`` or ``"thread_cpu"`` (runtime/timing.py): what a measurement reads,
        the kernel timers included. ``"thread_cpu"``, the measuring thread's CPU time, is
        steady on a machine shared with other jobs but counts only that thread's work: right
        for one-thread builds (a target of ``num_threads=1``), wrong for parallel ones.
        ``None`` (the default): :func:`tilecraft.tune` picks by the target's thread count
        (``runtime.timing.default_clock``); a runner used directly takes ``None`` as wall.
    """

    timeout: float = 30.0
    number: int = 1
    repeat: int = 3
    min_repeat_ms: float = 50.0
    flush_cache: bool | int | None = None
    startup_timeout: float = 120.0
    kernel_time: bool = True
    clock: str | None = None
    hook: CandidateHook | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.clock is not None:
            get_clock(self.clock)  # OptionError naming the clocks, before any worker starts
        eviction_bytes(self.flush_cache)  # OptionError for a count that is no count


def measurement_clock(requested: str | None, target: "Target") -> str:
    """The clock of every measurement of a run (candidates, validation, the end-to-end
    comparison): ``requested``, else the one that fits ``target``'s thread count
    (runtime/timing.py: the measuring thread's CPU time for one thread, else wall time).
    Thread CPU time for a parallel build is refused: it misses the other threads' work."""
    if requested is None:
        return default_clock(target.num_threads)
    get_clock(requested)
    if requested == "thread_cpu" and target.num_threads > 1:
        raise TuningError(f"clock='thread_cpu' counts the measuring thread only, and this target runs "
                          f"{target.num_threads} threads: use clock='wall', or a target of num_threads=1")
    return requested


def random_inputs(signature: Any, seed: int = 0) -> list[np.ndarray]:
    """Fixed inputs for a task: the same in every worker, so outputs compare."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in signature.arguments:
        shape = tuple(spec.shape or ())
        dtype = np.dtype(spec.dtype)
        if dtype == np.bool_:
            arrays.append(rng.random(shape) < 0.5)
        elif dtype.kind in "iu":
            arrays.append(rng.integers(0, 8, size=shape).astype(dtype))
        else:
            arrays.append((rng.random(shape) * 2 - 1).astype(dtype))
    return arrays


def outputs_match(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Equal up to float reassociation (tiling changes the order of a reduction)."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False
    if expected.dtype.kind != "f":
        return bool(np.array_equal(actual, expected))
    scale = float(np.max(np.abs(expected))) if expected.size else 1.0
    return bool(np.allclose(actual, expected, rtol=1e-3, atol=1e-4 * max(scale, 1.0), equal_nan=True))


def candidate_records(job: MeasureInput, scratch: Path) -> Path | None:
    """The one-record file that makes the pipeline apply ``job``'s config (``None``: the
    default schedule needs none), written in ``scratch``."""
    from ..schedule.records import Record

    if job.config is None:
        return None
    records = scratch / f"candidate-{os.getpid()}-{id(job)}.jsonl"
    candidate = Record(task=job.task, config=job.config, status="ok", costs=[1.0],
                       gflops=0.0, target=job.target)
    records.write_text(candidate.to_json() + "\n")
    return records


@contextlib.contextmanager
def schedule_failures_raise() -> Iterator[None]:
    """A candidate script the interpreter rejects must fail the build, not fall back to
    scalar loops as the default schedule does (with a warning); so must a candidate whose
    record the compiler refuses (a knob value its space does not hold), which would build
    the default schedule and be timed under the candidate's name."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="tilecraft-schedule", category=RuntimeWarning)
        warnings.filterwarnings("error", message="tuning record for .* ignored", category=RuntimeWarning)
        yield


def candidate_source(job: MeasureInput) -> Any:
    """What a candidate compiles: the payload with the model's weights as constants again
    (schedule/task.py's ``measured_module``: the pipeline pads and blocks constant filters,
    so the candidate runs the loop nest the model runs), its result written into the slice
    of a larger tensor where the model writes it so (``job.placement``: the graph stage
    chooses a convolution's filter padding by it, and the stores are the model's)."""
    from mlir import ir

    from ..schedule.task import measured_module
    from .kernel_tasks import is_kernel_task, kernel_measured_module

    if is_kernel_task(job.task):
        return kernel_measured_module(job.payload, ir.Context())
    return measured_module(job.payload, ir.Context(), placement=job.placement)


def job_target(job: MeasureInput) -> "Target":
    """The target ``job`` is built for: its target string, with the thread count the tuned
    :class:`Target` had (``job.threads``). Why not the string alone: it carries no thread
    count, so a worker parsing it took its own default (``TILECRAFT_NUM_THREADS``, else
    every core) and built a one-thread tuning run's candidates as parallel loops."""
    from ..pipelines.target import Target

    target = Target.parse(job.target)
    return target if job.threads is None else replace(target, num_threads=job.threads)


def build_candidate(job: MeasureInput, scratch: Path, kernel_time: bool = False) -> Any:
    """The candidate's module, built as a tuning worker builds it (``scratch`` holds its
    one-record file); ``kernel_time``: the profiling variant, timed by kernel timers."""
    from ..pipelines.jit.compiled_module import compile_ir
    from ..pipelines.cpu import cpu_pipeline
    from ..pipelines.profiling import profiling_pipeline
    from ..schedule.record_plan import with_records
    from .kernel_tasks import is_kernel_task, payload_pipeline

    if job.scheduled is not None:
        from ..schedule.te.builder import scheduled_pipeline

        target = job_target(job)
        pipeline = scheduled_pipeline(target)
        if kernel_time:
            pipeline = profiling_pipeline(pipeline)
        return compile_ir(job.payload, pipeline, target, entry=job.scheduled)
    records = candidate_records(job, scratch)
    with schedule_failures_raise():
        target = job_target(job)
        if is_kernel_task(job.task):  # a bf16 or int8 build's kernel (kernel_tasks.py)
            pipeline = payload_pipeline(job.task["kind"], target)
        else:
            pipeline = cpu_pipeline(target, opt_level=3)  # what tilecraft.compile runs by default
        if records is not None:
            pipeline = with_records(pipeline, records, target)
        if kernel_time:
            pipeline = profiling_pipeline(pipeline)
        return compile_ir(candidate_source(job), pipeline, target)


def result_region(output: np.ndarray, job: MeasureInput) -> np.ndarray:
    """The part of a candidate's ``output`` its task computes: all of it, or where
    ``job.placement`` puts the result in the larger tensor it returns (the rest of which is
    never written, so it compares as noise)."""
    from .kernel_tasks import is_kernel_task

    if job.placement is None or is_kernel_task(job.task):
        return output
    return output[job.placement.region()]


def _run_job(job: MeasureInput, options: RunnerOptions, scratch: Path) -> MeasureResult:
    start = time.perf_counter()
    if options.hook is not None:
        options.hook(dict(job.config or {}))
    try:
        module = build_candidate(job, scratch, options.kernel_time)
    except Exception as error:  # noqa: BLE001 - every build failure is a result, not a crash
        return MeasureResult("build_error", error=f"{type(error).__name__}: {error}"[:2000],
                             elapsed=time.perf_counter() - start)
    try:
        arguments = random_inputs(module.signature)
        output = result_region(module(*arguments), job)
        if job.reference is not None and not outputs_match(output, np.load(job.reference)):
            return MeasureResult("wrong", error="output differs from the default schedule's",
                                 elapsed=time.perf_counter() - start)
        if job.save_output is not None:
            np.save(job.save_output, output)
        costs = time_calls(lambda: module(*arguments), options, arguments, job.threads,
                           producer_feed(job, arguments))
    except Exception as error:  # noqa: BLE001
        return MeasureResult("run_error", error=f"{type(error).__name__}: {error}"[:2000],
                             elapsed=time.perf_counter() - start)
    return MeasureResult("ok", costs=tuple(costs), elapsed=time.perf_counter() - start)


def last_level_cache_bytes() -> int:
    """The size of the CPU's largest cache (Linux sysfs), else 32 MiB."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        if text[:-1].isdigit() and text[-1] in units:
            sizes.append(int(text[:-1]) * units[text[-1]])
        elif text.isdigit():
            sizes.append(int(text))
    return max(sizes, default=32 << 20)


def model_footprint_bytes(tasks: "Sequence[Task]") -> int:
    """The bytes one run of the model touches, from its tasks: every occurrence's constants,
    plus half of the activation bytes each occurrence moves (an intermediate is written by
    one kernel and read by the next: counted once). An upper bound on the activations'
    share: it assumes no intermediate reuses another's memory, and the allocator does reuse
    freed blocks. Ops that are no task (copies, unfused elementwise ops) are not counted."""
    return sum((t.weight_bytes + max(t.moved_bytes - t.weight_bytes, 0) // 2) * t.executions for t in tasks)


def cache_eviction(tasks: "Sequence[Task]") -> int:
    """Bytes to read before each timed call of a candidate of this model
    (``RunnerOptions.flush_cache``): the model's footprint (:func:`model_footprint_bytes`),
    capped at twice the last-level cache, beyond which reading more evicts nothing more.

    Why the footprint, not a yes/no on the weights alone: inside the model a kernel's
    weights are read again one run later, after every other byte of the run, so they are
    in cache only where the run fits. A model whose weights fit but whose run, with its
    activations, does not (MobileNetV2) had its heavy convolutions timed back to back,
    warm, and faster than they run in the model (docs/tuning.md, "Faithful measurement:
    the model's footprint"). A model whose run fits reads that much too: it evicts what
    the run would, no more."""
    return min(model_footprint_bytes(tasks), 2 * last_level_cache_bytes())


def eviction_bytes(flush_cache: "bool | int | None") -> int:
    """The bytes ``RunnerOptions.flush_cache`` reads before each call (0: no flush)."""
    if flush_cache is None or flush_cache is False:
        return 0
    if flush_cache is True:
        return 2 * last_level_cache_bytes()
    if not isinstance(flush_cache, int) or flush_cache < 0:
        raise OptionError(f"flush_cache must be a bool or a byte count >= 0, got {flush_cache!r}")
    return flush_cache


@functools.lru_cache(maxsize=1)
def _eviction_buffer() -> np.ndarray:
    """Twice the last-level cache, allocated once per worker process; a flush reads a
    prefix of it. Read, not written: written lines would still be in cache, dirty, and
    their write-backs would share the memory bus with the kernel that evicts them (dirty
    lines measured no different from clean ones inside MobileNetV2, docs/tuning.md).
    Filled, so that its pages are its own (untouched zero pages all map one physical page)."""
    return np.ones(2 * last_level_cache_bytes() // 8, dtype=np.int64)


# The pool waker's tensor: 512 KiB, small beside a last-level cache, large enough for the
# default plan to split it over the threads (the size measured in docs/tuning.md).
_WAKER_SHAPE = (32, 4096)


@functools.lru_cache(maxsize=4)
def _pool_waker(threads: int | None = None) -> Callable[[], None]:
    """A tiny parallel kernel (``x + x``) split for ``threads`` threads (``None``: the
    process's default), compiled once per worker process and thread count.

    Why: in a model the kernel before a candidate's just ended, so the parallel runtime's
    threads are running (they spin a while before they sleep, runtime/async_runtime.c)
    when it starts. After the cache flush (milliseconds of single-threaded reading) they are
    asleep, and the candidate's first parallel loop waited for the scheduler to wake them:
    under load MobileNetV2's heavy 1x1 convolutions then measured 1-34 ms in the tuner
    against 0.3-0.9 ms in the model; with this kernel run between the flush and the call,
    0.82-1.04x of the model's time (docs/tuning.md, "Faithful measurement")."""
    from ..pipelines.cpu import cpu_pipeline
    from ..pipelines.jit.compiled_module import compile_ir
    from ..pipelines.target import Target
    from ..schedule import te

    x = te.placeholder(_WAKER_SHAPE, name="x", dtype="float32")
    doubled = te.compute(_WAKER_SHAPE, lambda i, j: x[i, j] + x[i, j], name="doubled")
    target = Target.parse("llvm")
    if threads is not None:
        target = replace(target, num_threads=threads)
    module = compile_ir(te.create_func([x, doubled], "wake"), cpu_pipeline(target), target)
    argument = np.ones(_WAKER_SHAPE, dtype=np.float32)
    return lambda: module(argument)


def _eviction_reader(nbytes: int) -> Callable[[], int]:
    """Reads the first ``nbytes`` (rounded down to 8) of :func:`_eviction_buffer`, at most
    all of it; the reader returns the sum of what it read (the buffer holds ones: the
    number of 8-byte words read, which tests check)."""
    buffer = _eviction_buffer()
    prefix = buffer[:min(nbytes // buffer.itemsize, buffer.size)]
    return lambda: int(prefix.sum())


@dataclass
class ProducerFeed:
    """Runs a candidate's producers (:class:`~tilecraft.schedule.task.Producer`), one step
    per call in turn, each making its result, reshaped, the candidate's argument it feeds
    (an element of the ``arguments`` list the timed call reads); a ``None`` step runs
    nothing (that call's arguments are read back, as for an execution in the model that
    reads no kernel's result). In turn: a task's time in the model is the mean over its
    executions, and they may read different producers (ShuffleNet's 1x1 convolutions read a
    depthwise convolution's result in one branch, a channel split in the other)."""

    steps: "list[tuple[Any, list[np.ndarray], int] | None]"  # (compiled producer, its inputs, argument fed)
    arguments: "list[np.ndarray]"  # the candidate's arguments
    position: int = 0

    @property
    def index(self) -> int | None:
        """The argument the next step's producer writes; ``None`` for a read-back step."""
        step = self.steps[self.position % len(self.steps)]
        return step[2] if step is not None else None

    def __call__(self) -> None:
        step = self.steps[self.position % len(self.steps)]
        self.position += 1
        if step is None:
            return
        module, inputs, index = step
        shape = self.arguments[index].shape
        self.arguments[index] = None  # type: ignore[call-overload]  # its block freed first
        self.arguments[index] = module(*inputs).reshape(shape)


@functools.lru_cache(maxsize=8)
def _producer_module(payload: str, target: "Target") -> Any:
    """A producer's default build in this worker, once per payload and target (the
    candidate's, :func:`job_target`): no records (the default is what the model runs unless
    that task was tuned too), no kernel timers (its time is not the candidate's)."""
    from mlir import ir

    from ..pipelines.cpu import cpu_pipeline
    from ..pipelines.jit.compiled_module import compile_ir
    from ..schedule.task import measured_module

    return compile_ir(measured_module(payload, ir.Context()), cpu_pipeline(target, opt_level=3), target)


def producer_feed(job: MeasureInput, arguments: "list[np.ndarray]") -> ProducerFeed | None:
    """The feed of ``job.producers`` into ``arguments`` (the candidate's); ``None`` when no
    producer is left. A producer whose result does not fit the argument it names (another
    element count or type), or that fails to build or run (a warning says why: it only sets
    the cache state, so the candidate's measurement goes on), becomes a read-back step."""
    steps: list[tuple[Any, list[np.ndarray], int] | None] = []
    fitting: dict[str, tuple[Any, list[np.ndarray]] | None] = {}
    for producer in job.producers:
        if producer is None:
            steps.append(None)
            continue
        if producer.payload not in fitting:
            try:
                module = _producer_module(producer.payload, job_target(job))
                inputs = random_inputs(module.signature, seed=2)
                sample = module(*inputs)
            except Exception as error:  # noqa: BLE001 - the producer only sets the cache state
                warnings.warn(f"the producer of {job.task.get('name', 'a task')} did not build or run "
                              f"({type(error).__name__}: {error}); its input is read back instead",
                              RuntimeWarning, stacklevel=2)
                fitting[producer.payload] = None
                steps.append(None)
                continue
            fits = (0 <= producer.argument < len(arguments) and isinstance(sample, np.ndarray)
                    and sample.size == arguments[producer.argument].size
                    and sample.dtype == arguments[producer.argument].dtype)
            fitting[producer.payload] = (module, inputs) if fits else None
        built = fitting[producer.payload]
        steps.append((built[0], built[1], producer.argument) if built is not None else None)
    return ProducerFeed(steps, arguments) if any(step is not None for step in steps) else None


def _cache_flusher(arguments: "list[np.ndarray]", threads: int | None = None,
                   nbytes: int | None = None, feed: ProducerFeed | None = None) -> Callable[[], None]:
    """Reads ``nbytes`` (``None``: twice the last-level cache, every level evicted), then
    brings ``arguments`` back in and wakes the parallel runtime's threads
    (:func:`_pool_waker`): a kernel as the model runs it, reading its inputs warm (just
    written), its weights as cold as the model's run leaves them, the pool's threads
    running. A build for one thread (``threads == 1``) runs no parallel loop, so no pool is
    woken.

    With a ``feed``, the next step's producer writes the argument it feeds instead, after
    the others are read, and no pool is woken (the producer's parallel loop just ended, as
    in the model); a read-back step of the feed flushes as without one.

    The call's result block is left as the eviction leaves it. Tried and taken out: writing
    and freeing a block of each result's size first, so that the result landed in cached
    memory; at one thread it made the tuner 12-28 % faster than the model on MobileNetV2's
    placed expansions (20 of 30 within 15 % against 30 of 30 without, docs/tuning.md,
    "Faithful measurement: the producer before the call")."""
    evict = _eviction_reader(2 * last_level_cache_bytes() if nbytes is None else nbytes)
    wake = None if threads == 1 else _pool_waker(threads)

    def flush() -> None:
        evict()
        fed = feed.index if feed is not None else None
        for index, argument in enumerate(arguments):
            if index != fed:
                argument.sum()  # reads it into the caches again
        if feed is not None:
            feed()  # the next step: a producer writes argument ``fed``, or nothing
        if fed is None and wake is not None:
            wake()

    return flush


def time_calls(call: Callable[[], Any], options: RunnerOptions,
               arguments: "list[np.ndarray] | None" = None, threads: int | None = None,
               feed: ProducerFeed | None = None) -> list[float]:
    """Seconds per call for each of ``options.repeat`` measurements: the kernels' time from
    the profiler's timers (``kernel_time``), else the wall time of the whole call. Each
    measurement runs ``number`` calls, doubled until it lasts ``min_repeat_ms``, after a
    warm-up call, as runtime/timing.py's ``measure`` does. ``flush_cache``: its bytes read
    (:func:`eviction_bytes`) and ``arguments`` read again before each call (``kernel_time``:
    untimed), else before each repeat. The clock is ``options.clock``'s (``None``: wall),
    the kernel timers' too; ``threads``: the candidate's thread count
    (:attr:`MeasureInput.threads`), for the flush's pool waker; ``feed``: the candidate's
    producers, run by the flush (:func:`producer_feed`), so ``call`` must read
    ``arguments`` when it runs."""
    evicted = eviction_bytes(options.flush_cache)
    flush = _cache_flusher(arguments or [], threads, evicted, feed) if evicted else None
    clock_name = options.clock or "wall"
    if not options.kernel_time:
        costs = []
        for _ in range(options.repeat):
            if flush is not None:
                flush()
            costs.append(measure(call, number=options.number, repeat=1, min_repeat_ms=options.min_repeat_ms,
                                 clock=get_clock(clock_name)).per_call[0])
        return costs
    kernel_timers.use_clock(clock_name)
    call()
    number, costs = options.number, []
    for _ in range(options.repeat):
        while True:
            kernel_timers.reset()
            start = time.perf_counter()
            for _ in range(number):
                if flush is not None:
                    flush()  # outside every kernel: not in the kernels' time
                call()
            elapsed = time.perf_counter() - start
            if elapsed * 1e3 >= options.min_repeat_ms or number >= 1 << 20:
                break
            number *= 2
        costs.append(kernel_timers.total_seconds() / number)
    return costs


def _worker_main(connection: Any, options: RunnerOptions, scratch: str) -> None:
    """The worker's loop: import MLIR once, then build and run jobs until told to stop."""
    from .. import pipelines  # noqa: F401  (the MLIR import, before saying ready)

    connection.send("ready")
    while True:
        job = connection.recv()
        if job is None:
            return
        try:
            result = _run_job(job, options, Path(scratch))
        except BaseException as error:  # noqa: BLE001 - report even a hook's exception
            result = MeasureResult("run_error", error=traceback.format_exception_only(error)[-1])
        connection.send(result)


SCRATCH_PREFIX = "tilecraft-measure-"


def remove_orphaned_scratch(folder: "str | os.PathLike[str] | None" = None) -> list[Path]:
    """Remove measurement folders whose owner process is gone; returns what was removed.

    Why: a tuning run killed with SIGKILL never runs its cleanup, and its folder (reference
    outputs, built candidates) stays in the temp folder. Each folder's name carries its
    owner's pid (``tilecraft-measure-<pid>-...``); a folder whose pid is alive, or names no
    pid, is left alone (a reused pid only delays the removal to a later run).
    """
    removed = []
    for candidate in Path(folder or tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*-*"):
        pid = candidate.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or not candidate.is_dir() or candidate.is_symlink():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(candidate, ignore_errors=True)
            removed.append(candidate)
        except (PermissionError, OverflowError):  # alive under another user, or not a pid
            continue
    return removed


@contextlib.contextmanager
def _main_not_rerun() -> Iterator[None]:
    """Start spawned workers without re-running the user's ``__main__``.

    Why: ``spawn`` re-imports the parent's main module in the child (as ``__mp_main__``, from
    its ``__spec__`` for ``python -m``, else from its ``__file__``). A script that calls
    ``tilecraft.tune`` at top level, with no ``if __name__ == "__main__"`` guard, then ran
    again in every worker (each starting a tuning run of its own, and multiprocessing's
    bootstrapping error); a script read on standard input (``__file__ == "<stdin>"``) could not
    be re-run at all (``EOFError`` in the parent). The worker needs nothing from ``__main__``
    (its entry point is this module's ``_worker_main``), so both are hidden while the process
    starts."""
    main = sys.modules.get("__main__")
    saved = {name: getattr(main, name) for name in ("__file__", "__spec__") if hasattr(main, name)}
    for name in saved:
        if name == "__spec__":
            main.__spec__ = None
        else:
            delattr(main, name)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(main, name, value)


class LocalRunner(Runner):
    """Measures candidates one at a time in a worker process (restarted after a failure)."""

    # The worker's loop; ``worker(connection, options, scratch)`` in the spawned process.
    worker: Callable[[Any, RunnerOptions, str], None] = staticmethod(_worker_main)

    def __init__(self, options: RunnerOptions | None = None) -> None:
        self.options = options or RunnerOptions()
        self._context = multiprocessing.get_context("spawn")
        remove_orphaned_scratch()
        self._scratch = tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
        self._process: Any = None
        self._connection: Any = None

    @property
    def scratch(self) -> Path:
        """A folder for reference outputs, removed with the runner."""
        return Path(self._scratch.name)

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=self.worker, args=(child, self.options, self._scratch.name), daemon=True)
        with _main_not_rerun():
            process.start()
        child.close()
        if not parent.poll(self.options.startup_timeout):
            process.kill()
            raise TuningError("the measurement worker did not start")
        parent.recv()
        self._process, self._connection = process, parent

    def _stop(self, *, kill: bool) -> None:
        if self._process is None:
            return
        if kill:
            self._process.kill()
        else:
            try:
                self._connection.send(None)
            except OSError:
                pass
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._connection.close()
        self._process = self._connection = None

    def measure(self, job: MeasureInput) -> MeasureResult:
        """Build, check and time one candidate; never raises for a bad candidate."""
        return self._ask(job)

    def _ask(self, job: MeasureInput) -> Any:
        """Send ``job`` to the worker and return its answer, or a crash / timeout result."""
        if self._process is None or not self._process.is_alive():
            self._stop(kill=True)
            self._start()
        start = time.perf_counter()
        try:
            self._connection.send(job)
            ready = self._connection.poll(self.options.timeout)
            if ready:
                return self._connection.recv()
        except (EOFError, OSError):
            # The pipe closed: the worker died. Wait for it, so the exit code is known (an
            # aborting process may still be writing its core or traceback).
            self._process.join(timeout=10)
            code = self._process.exitcode
            self._stop(kill=True)
            return MeasureResult("crash", error=f"the worker died (exit code {code})",
                                 elapsed=time.perf_counter() - start)
        self._stop(kill=True)
        return MeasureResult("timeout", error=f"no result within {self.options.timeout:g} s",
                             elapsed=time.perf_counter() - start)

    def close(self) -> None:
        self._stop(kill=False)
        self._scratch.cleanup()
