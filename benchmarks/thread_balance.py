"""Thread balance of parallel loops (issue #43): how finely each parallel loop is split, and
how much a reproducible disturbance of one core slows tilecraft against onnxruntime.

    # the facts: tasks per parallel loop and the blocks the runtime makes of them
    .venv/bin/python benchmarks/thread_balance.py facts --models regnet,shufflenet --threads 2
    # a suite model as ONNX, then packages of it from two trees (see package_ab.py)
    .venv/bin/python benchmarks/thread_balance.py export mobilenet_v2 -o /tmp/m.onnx
    TILECRAFT_NUM_THREADS=2 .venv/bin/tilecraft compile /tmp/m.onnx -o /tmp/new.tar
    # quiet and disturbed, every runtime in one process, blocks alternating
    .venv/bin/python benchmarks/thread_balance.py disturb /tmp/m.onnx old=/tmp/old.tar new=/tmp/new.tar \\
        --cpu 1 --spin-ms 2 --sleep-ms 2 --rounds 9
    # undisturbed: median, fastest and 10th-percentile call, CPU per call (the second core's cost)
    .venv/bin/python benchmarks/thread_balance.py calls /tmp/m.onnx old=/tmp/old.tar new=/tmp/new.tar
    # packages compiled with --profile: per-kernel minima, alternating, summed per name prefix
    .venv/bin/python benchmarks/thread_balance.py kernels /tmp/m.onnx old=/tmp/old-prof.tar new=/tmp/new-prof.tar
    # conv_chain: 12 small 1x1 convolutions, mostly the cost of their parallel loops
    .venv/bin/python benchmarks/thread_balance.py export conv_chain -o /tmp/chain.onnx

Why: the same build of a suite model moved by up to 2x between two quiet runs while
onnxruntime's figures stayed put (docs/performance.md, "After round 19's merges"). A
parallel loop's tasks are the planner's thread tiles (schedule/op_schedule.py);
the flat parallel-for (pipelines/buffer/parallel_for.py, runtime/async_runtime.c) runs one
block per task, up to 16 per thread, taken from counters by whichever thread is free. So the
blocks are dispatched dynamically, but a loop of 4 blocks on 2 threads hands a thread that
stalls (another process, an interrupt) a quarter of the loop, which the other thread cannot
take over.

``facts`` compiles each model and reads every ``scf.forall`` of the IR after bufferization
(the task grid the schedule made) and prints, per loop, its tasks, its blocks, the share of
threads x rounds the equal blocks keep busy, and the largest share of the loop one stalled
thread can hold (one block). ``calls`` times the packages and onnxruntime undisturbed, every call (``call_figures``).
``disturb`` starts a child process pinned to one core
(``--cpu``) that spins ``--spin-ms`` and sleeps ``--sleep-ms`` in turn; it is stopped
(SIGSTOP) during quiet blocks and continued (SIGCONT) during disturbed ones, so every runtime
is timed both ways in the same process, blocks alternating (runtime/timing.py's
``alternating``, a pause before each block for onnxruntime's spinning pool). Each package's
output is checked against onnxruntime first. No thresholds: figures go into
docs/performance.md ("Thread balance").
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- the facts: tasks and blocks of each parallel loop ------------------------------------


def parallel_for_blocks(tasks: int, threads: int) -> int:
    """The blocks the runtime's flat parallel-for (runtime/async_runtime.c,
    ``tilecraftParallelFor``) makes of a loop of ``tasks`` iterations: one per task up to
    ``BLOCKS_PER_THREAD`` (16) per thread, else that many blocks of ``ceil(tasks / (16 x
    threads))`` tasks."""
    if tasks <= 0:
        return 0
    most = 16 * threads
    grain = 1 if tasks <= most else -(-tasks // most)
    return -(-tasks // grain)


def busy_share(blocks: int, threads: int) -> float:
    """Threads x rounds that ``blocks`` equal blocks keep busy (1.0: every round full)."""
    rounds = -(-blocks // threads)
    return blocks / (rounds * threads)


_FORALL = re.compile(r"scf\.forall\s*\(([^)]*)\)\s*(?:in\s*\(([^)]*)\)|=\s*\(([^)]*)\)\s*to\s*\(([^)]*)\)\s*step\s*\(([^)]*)\))")


def _ints(text: str) -> list[int] | None:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        return None  # a dynamic bound (an SSA value)


def forall_tasks(ir_text: str) -> list[int | None]:
    """The iteration count of every ``scf.forall`` in ``ir_text`` (``None``: dynamic bounds)."""
    counts: list[int | None] = []
    for match in _FORALL.finditer(ir_text):
        if match.group(2) is not None:
            extents = _ints(match.group(2))
        else:
            lower, upper, step = (_ints(match.group(i)) for i in (3, 4, 5))
            extents = (None if lower is None or upper is None or step is None
                       else [max(0, -(-(u - lb) // s)) for lb, u, s in zip(lower, upper, step)])
        counts.append(None if extents is None else math.prod(extents))
    return counts


@dataclass(frozen=True)
class LoopFacts:
    tasks: int
    blocks: int
    busy: float
    stalled_share: float  # the share of the loop one stalled thread can hold: one block


def loop_facts(ir_text: str, threads: int) -> list[LoopFacts]:
    facts = []
    for tasks in forall_tasks(ir_text):
        if tasks is None or tasks < 1:
            continue
        blocks = parallel_for_blocks(tasks, threads)
        facts.append(LoopFacts(tasks, blocks, busy_share(blocks, threads), 1.0 / blocks))
    return facts


def _onnx_model(name: str) -> tuple[Any, list[Any]]:
    """Suite model ``name`` as an ONNX ModelProto, and its inputs as arrays."""
    import onnx

    sys.path.insert(0, HERE)
    import public_suite  # noqa: E402

    module, inputs = public_suite.build(name)
    return onnx.load_from_string(public_suite.export_onnx(module, inputs)), [x.numpy() for x in inputs]


def facts_main(args: argparse.Namespace) -> None:
    os.environ["TILECRAFT_NUM_THREADS"] = str(args.threads)
    import tilecraft
    from tilecraft.runtime import parallel_runtime

    for name in args.models.split(","):
        proto, arrays = _onnx_model(name)
        compiled = tilecraft.compile(proto, target=tilecraft.Target(num_threads=args.threads),
                                     keep_ir=True, verbose=False)
        facts = loop_facts(compiled.ir("bufferize"), args.threads)
        if not facts:
            print(f"{name}: no parallel loops")
            continue
        by_blocks = Counter(f.blocks for f in facts)
        few = sum(1 for f in facts if f.blocks < 4 * args.threads)
        print(f"{name}: {len(facts)} parallel loops on {args.threads} threads; "
              f"{few} with fewer than {4 * args.threads} blocks; "
              f"mean busy share {sum(f.busy for f in facts) / len(facts):.3f}; "
              f"mean share a stalled thread holds {sum(f.stalled_share for f in facts) / len(facts):.3f}")
        print("  blocks: loops  " + "  ".join(f"{b}:{n}" for b, n in sorted(by_blocks.items())))
        if args.verbose:
            print("  tasks -> blocks: " + " ".join(f"{f.tasks}->{f.blocks}" for f in facts))
        # The runtime's counts over a few calls: blocks per call, and the share the pool's
        # worker ran (the rest ran on the calling thread, which computes each loop's first
        # block and runs queued blocks while it waits).
        compiled(*arrays)
        before, tasks_before = parallel_runtime.loop_counts(), parallel_runtime.task_counts()
        for _ in range(args.calls):
            compiled(*arrays)
        counts = parallel_runtime.loop_counts() - before
        sleeps = (parallel_runtime.task_counts() - tasks_before).worker_sleeps
        blocks = counts.by_callers + counts.by_workers
        predicted = sum(f.blocks for f in facts) * args.calls
        print(f"  run: {counts.published / args.calls:.0f} loops published and {counts.serial / args.calls:.0f} "
              f"run serially per call; {blocks / args.calls:.0f} blocks per call published (from the IR: "
              f"{predicted / args.calls:.0f}); the workers ran {counts.by_workers / max(blocks, 1):.1%} of them "
              f"and joined {counts.joined / max(counts.published, 1):.1%} of the loops; "
              f"the worker slept {sleeps / args.calls:.1f} times per call")


# ---- the disturbance ----------------------------------------------------------------------

_SPINNER = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
spin, rest = float(sys.argv[2]) / 1e3, float(sys.argv[3]) / 1e3
while True:
    end = time.perf_counter() + spin
    while time.perf_counter() < end:
        pass
    if rest > 0:
        time.sleep(rest)
"""


class Disturbance:
    """A child process pinned to one core that spins and sleeps in turn, stopped until
    :meth:`set` turns it on. Why a stopped process rather than a new one per block: starting
    a Python process costs tens of milliseconds of the very cores being measured."""

    def __init__(self, cpu: int, spin_ms: float, sleep_ms: float) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _SPINNER, str(cpu), str(spin_ms), str(sleep_ms)])
        self.running = True
        self.set(False)

    def set(self, running: bool) -> None:
        if running != self.running:
            os.kill(self.process.pid, signal.SIGCONT if running else signal.SIGSTOP)
            self.running = running

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def disturbed_runners(runners: dict[str, Callable[[], Any]], disturbance: Disturbance) -> dict[str, Callable[[], Any]]:
    """Each runner twice, quiet and disturbed: every call sets the disturbance first (a
    signal only when it changes), so a block runs wholly in one state."""
    both: dict[str, Callable[[], Any]] = {}
    for label, run in runners.items():
        for state in (False, True):
            def call(run: Callable[[], Any] = run, state: bool = state) -> Any:
                disturbance.set(state)
                return run()
            both[f"{label}|{'disturbed' if state else 'quiet'}"] = call
    return both


def random_feeds(model: Any, seed: int = 0) -> "dict[str, Any]":
    """One seeded random value for each input of the ONNX ``model``: floats from a normal
    distribution, integers (token ids, positions) in [0, 100), which every suite model's
    embedding table holds; an unnamed extent (a batch or sequence dimension) is 1."""
    import numpy as np
    from onnx import helper

    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        tensor = value.type.tensor_type
        shape = [d.dim_value or 1 for d in tensor.shape.dim]
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        if np.issubdtype(dtype, np.integer):
            feeds[value.name] = rng.integers(0, 100, shape).astype(dtype)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def package_runners(args: argparse.Namespace) -> dict[str, Callable[[], Any]]:
    """onnxruntime (``args.threads`` threads, where installed) and each ``LABEL=PACKAGE`` of
    ``args.packages`` on one random input; each package's output is checked against
    onnxruntime's (else against the first package's) and its largest difference printed."""
    import numpy as np

    from tilecraft.runtime.package import load_module

    import onnx

    runners: dict[str, Callable[[], Any]] = {}
    reference = None
    feeds = random_feeds(onnx.load(args.model, load_external_data=False))
    try:
        import onnxruntime
    except ImportError:  # a machine with the packages' runtime only: the packages against each other
        print("onnxruntime is not installed: packages compared with the first one")
    else:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = args.threads
        session = onnxruntime.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
        reference = session.run(None, feeds)[0]
        runners["onnxruntime"] = lambda: session.run(None, feeds)
    for label, path in labelled_packages(args.packages):
        module = load_module(path)
        out = module(**feeds)
        out = np.asarray(out[0] if isinstance(out, (list, tuple)) else out)
        if reference is None:
            reference = out
        print(f"{label}: largest difference from the reference {float(np.abs(out - reference).max()):.3g}")
        runners[label] = lambda module=module: module(**feeds)
    return runners


def disturb_main(args: argparse.Namespace) -> None:
    sys.path.insert(0, HERE)
    from end_to_end import RUNNER_PAUSE_S, alternating  # noqa: E402

    runners = package_runners(args)
    disturbance = Disturbance(args.cpu, args.spin_ms, args.sleep_ms)
    try:
        medians = alternating(disturbed_runners(runners, disturbance), args.rounds,
                              min_sample_s=args.sample_s, pause_s=RUNNER_PAUSE_S)
    finally:
        disturbance.close()
    first = next(iter(runners))
    base = medians[f"{first}|quiet"]
    print(f"disturbance: core {args.cpu} taken {args.spin_ms} ms of every {args.spin_ms + args.sleep_ms} ms; "
          f"{args.threads} threads; medians of {args.rounds} blocks")
    print(f"{'runtime':<14} {'quiet ms':>9} {'disturbed ms':>13} {'disturbed/quiet':>16} {'quiet/' + first:>18}")
    for label in runners:
        quiet, disturbed = medians[f"{label}|quiet"], medians[f"{label}|disturbed"]
        print(f"{label:<14} {quiet * 1e3:9.2f} {disturbed * 1e3:13.2f} {disturbed / quiet:16.2f} {quiet / base:18.2f}")


@dataclass(frozen=True)
class CallFigures:
    median_ms: float  # median over blocks of the block's mean call
    fastest_ms: float  # the fastest single call of all blocks
    p10_ms: float  # the 10th percentile of single calls
    cpu_ms: float  # median over blocks of the process's CPU time per call (all threads)


def call_figures(runners: dict[str, Callable[[], Any]], rounds: int, sample_s: float,
                 pause_s: float) -> dict[str, CallFigures]:
    """Blocks of calls, runners alternating block by block (a pause and an untimed call before
    each, for onnxruntime's spinning pool), every call timed. Why the fastest call and the
    10th percentile beside the median: on a machine shared with other jobs the median
    measures how often the runtime's threads got a core; the fastest calls are those that
    ran with both threads on their cores, closest to a quiet machine's figure (the
    medians of two runs a minute apart differed by 2x at load 15, the fastest calls' ratios
    by less; docs/performance.md, "The second core")."""
    import statistics
    import time

    calls: dict[str, list[float]] = {name: [] for name in runners}
    means: dict[str, list[float]] = {name: [] for name in runners}
    cpus: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            time.sleep(pause_s)
            run()
            block: list[float] = []
            cpu, start = time.process_time(), time.perf_counter()
            while time.perf_counter() - start < sample_s:
                began = time.perf_counter()
                run()
                block.append(time.perf_counter() - began)
            cpus[name].append((time.process_time() - cpu) / len(block))
            means[name].append(statistics.fmean(block))
            calls[name].extend(block)
    figures = {}
    for name in runners:
        ordered = sorted(calls[name])
        figures[name] = CallFigures(statistics.median(means[name]) * 1e3, ordered[0] * 1e3,
                                    ordered[len(ordered) // 10] * 1e3, statistics.median(cpus[name]) * 1e3)
    return figures


def calls_main(args: argparse.Namespace) -> None:
    sys.path.insert(0, HERE)
    from end_to_end import RUNNER_PAUSE_S  # noqa: E402

    runners = package_runners(args)
    figures = call_figures(runners, args.rounds, args.sample_s, RUNNER_PAUSE_S)
    first = figures[next(iter(runners))]
    print(f"{args.rounds} blocks of {args.sample_s} s per runtime, alternating; ratios to {next(iter(runners))}")
    print(f"{'runtime':<14} {'median ms':>10} {'fastest ms':>11} {'p10 ms':>8} {'CPU ms/call':>12} "
          f"{'median/':>8} {'fastest/':>9} {'p10/':>6}")
    for label, f in figures.items():
        print(f"{label:<14} {f.median_ms:10.3f} {f.fastest_ms:11.3f} {f.p10_ms:8.3f} {f.cpu_ms:12.3f} "
              f"{f.median_ms / first.median_ms:8.2f} {f.fastest_ms / first.fastest_ms:9.2f} {f.p10_ms / first.p10_ms:6.2f}")


def add_package_arguments(command: argparse.ArgumentParser, threads_help: str) -> None:
    """The model, its ``LABEL=PACKAGE`` packages and onnxruntime's thread count: the
    arguments every command comparing packages beside onnxruntime takes."""
    command.add_argument("model", help="the ONNX model the packages were compiled from")
    command.add_argument("packages", nargs="+", metavar="LABEL=PACKAGE")
    command.add_argument("--threads", type=int, default=2, help=threads_help)


def labelled_packages(items: list[str]) -> list[tuple[str, str]]:
    """``LABEL=PACKAGE`` command-line items as (label, path) pairs; exits naming a malformed one."""
    pairs = []
    for item in items:
        label, _, path = item.partition("=")
        if not path:
            raise SystemExit(f"expected LABEL=PACKAGE, got {item!r}")
        pairs.append((label, path))
    return pairs


def kernel_prefix(name: str, depth: int) -> str:
    """The first ``depth`` components of a kernel's name (``/blocks/blocks.3/mlp/...`` at
    depth 2: ``/blocks/blocks.3``); names with fewer components: ``other``."""
    parts = name.strip("/").split("/")
    return "/" + "/".join(parts[:depth]) if len(parts) > depth else "other"


def kernels_main(args: argparse.Namespace) -> None:
    """Per-kernel minimum wall time of packages compiled with ``--profile``, their calls
    alternating in one process, summed per name prefix. Why sums per prefix and not kernel
    by kernel: a group is named after its root op, and the groups differ between builds (a
    one-thread build leaves a matmul without a thread level out of its epilogue's group), so
    one name can stand for different work in two packages. Why minima: on a loaded machine
    the minimum of many calls of one kernel is the figure least moved by other processes."""
    import numpy as np
    import onnx

    from tilecraft.runtime.package import load

    model = onnx.load(args.model, load_external_data=False)
    feeds = random_feeds(model)
    packages = {}
    for label, path in labelled_packages(args.packages):
        packages[label] = load(path)
    best: dict[str, dict[int, tuple[float, str]]] = {label: {} for label in packages}
    for _ in range(args.rounds):
        for label, package in packages.items():
            _, times = package.profile(**feeds)
            for index, kernel in enumerate(times):
                seconds = min(best[label].get(index, (math.inf, ""))[0], kernel.seconds)
                best[label][index] = seconds, kernel.name
    sums = {label: Counter() for label in packages}
    for label, kernels in best.items():
        for seconds, name in kernels.values():
            sums[label][kernel_prefix(name, args.depth)] += seconds * 1e3
    labels = list(packages)
    print(f"{args.rounds} calls per package, alternating; ms, sum of per-kernel minima; "
          + ", ".join(f"{label}: {len(best[label])} kernels" for label in labels))
    print(f"{'prefix':<32}" + "".join(f"{label:>12}" for label in labels))
    for prefix in sorted(set().union(*sums.values())):
        print(f"{prefix[:32]:<32}" + "".join(f"{sums[label][prefix]:12.3f}" for label in labels))
    print(f"{'total':<32}" + "".join(f"{sum(sums[label].values()):12.3f}" for label in labels))


def conv_chain(layers: int = 12, channels: int = 16, size: int = 32) -> Any:
    """An ONNX model of ``layers`` 1x1 convolutions with ReLUs, ``channels`` x ``size`` x
    ``size``: each a few microseconds of work that the planner splits across threads, so a
    call is mostly the cost of its parallel loops (dispatch, wake-ups, the cores' caches)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, weights, previous = [], [], "x"
    for i in range(layers):
        weights.append(numpy_helper.from_array(
            (rng.standard_normal((channels, channels, 1, 1)) * 0.25).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("Conv", [previous, f"w{i}"], [f"c{i}"]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        previous = f"r{i}"
    shape = [1, channels, size, size]
    graph = helper.make_graph(nodes, "conv_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(previous, TensorProto.FLOAT, shape)], weights)
    # IR version 8: onnxruntime 1.2x reads at most 13, and onnx writes its newest by default.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def export_main(args: argparse.Namespace) -> None:
    model = conv_chain() if args.name == "conv_chain" else _onnx_model(args.name)[0]
    with open(args.output, "wb") as handle:
        handle.write(model.SerializeToString())
    print(f"{args.name} -> {args.output}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    facts = commands.add_parser("facts", help="tasks and blocks of every parallel loop of suite models")
    facts.add_argument("--models", default="regnet,shufflenet,mobilenet_v2")
    facts.add_argument("--threads", type=int, default=2)
    facts.add_argument("--verbose", action="store_true", help="every loop's tasks -> blocks")
    facts.add_argument("--calls", type=int, default=20, help="calls counted by the runtime")
    export = commands.add_parser("export", help="a suite model as ONNX")
    export.add_argument("name", help="a suite model, or conv_chain (12 small 1x1 convolutions: the cost of "
                                     "parallel loops)")
    export.add_argument("-o", "--output", required=True)
    disturb = commands.add_parser("disturb", help="packages and onnxruntime, quiet and disturbed")
    add_package_arguments(disturb, "onnxruntime's threads (the packages' are theirs)")
    disturb.add_argument("--cpu", type=int, default=1, help="the core the disturbance is pinned to")
    disturb.add_argument("--spin-ms", type=float, default=2.0)
    disturb.add_argument("--sleep-ms", type=float, default=2.0)
    disturb.add_argument("--rounds", type=int, default=9, help="alternating blocks per runtime and state")
    disturb.add_argument("--sample-s", type=float, default=0.1, help="seconds per timed block")
    calls = commands.add_parser("calls", help="packages and onnxruntime: median, fastest and 10th-percentile call")
    add_package_arguments(calls, "onnxruntime's threads (the packages' are theirs)")
    calls.add_argument("--rounds", type=int, default=15, help="alternating blocks per runtime")
    calls.add_argument("--sample-s", type=float, default=0.15, help="seconds per timed block")
    kernels = commands.add_parser("kernels", help="packages compiled with --profile: per-kernel minima, "
                                                  "summed per name prefix")
    kernels.add_argument("model", help="the ONNX model the packages were compiled from")
    kernels.add_argument("packages", nargs="+", metavar="LABEL=PACKAGE")
    kernels.add_argument("--rounds", type=int, default=50, help="profiled calls per package, alternating")
    kernels.add_argument("--depth", type=int, default=2, help="name components a sum is kept for")
    args = parser.parse_args(argv)
    {"facts": facts_main, "export": export_main, "disturb": disturb_main, "calls": calls_main,
     "kernels": kernels_main}[args.command](args)


if __name__ == "__main__":
    main()
