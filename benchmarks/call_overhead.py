"""What a model call costs outside its kernels (issue #43): CPU time per call of a package,
the JIT'ed module and onnxruntime (``run`` and ``run_with_iobinding``), one thread each.

    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/call_overhead.py --calls 20000 --rounds 7
    # also mobilenet_v2 (a suite model, exported by benchmarks/thread_balance.py), fewer calls
    TILECRAFT_NUM_THREADS=1 .venv/bin/python benchmarks/call_overhead.py --models add,multi,mobilenet_v2 \\
        --calls 2000 --rounds 5
    # the tilecraft.torch path beside eager on the same two small graphs
    .venv/bin/python benchmarks/call_overhead.py --torch

Models: ``add`` (one Add of two [1, 16] f32 inputs: the kernel costs nothing, so the figure
is the call), ``multi`` (8 inputs, 4 outputs of [1, 16], four Adds: per-argument and
per-result costs), ``mobilenet_v2`` (a real model of one input). Why CPU time
(``time.process_time``) over many calls in blocks, the systems alternating block by block,
median and spread over rounds: the machine is shared, and CPU time per call of a one-thread
call survives another process's load where wall-clock time does not. Every package's
outputs are compared with onnxruntime's first. No thresholds: the figures go into
docs/performance.md ("What a call costs outside its kernels").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE = [1, 16]


def adds_model(inputs: int, outputs: int) -> Any:
    """``y{i} = x{2i} + x{2i+1}``: ``outputs`` Adds of [1, 16] f32 inputs (IR version 8, which
    onnxruntime reads)."""
    from onnx import TensorProto, helper

    ins = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, SHAPE) for i in range(inputs)]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, SHAPE) for i in range(outputs)]
    nodes = [helper.make_node("Add", [f"x{2 * i}", f"x{2 * i + 1}"], [f"y{i}"]) for i in range(outputs)]
    graph = helper.make_graph(nodes, "adds", ins, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def model(name: str) -> Any:
    if name == "add":
        return adds_model(2, 1)
    if name == "multi":
        return adds_model(8, 4)
    import onnx

    sys.path.insert(0, HERE)
    import public_suite  # noqa: PLC0415 - a benchmark module beside this one

    module, inputs = public_suite.build(name)
    return onnx.load_from_string(public_suite.export_onnx(module, inputs))


def cpu_per_call(runners: dict[str, Callable[[], Any]], calls: int, rounds: int) -> dict[str, list[float]]:
    """Microseconds of CPU time per call of each runner, one block of ``calls`` per runner
    and round, the runners alternating."""
    figures: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            start = time.process_time()
            for _ in range(calls):
                run()
            figures[name].append((time.process_time() - start) / calls * 1e6)
    return figures


def onnx_runners(name: str, calls: int, rounds: int) -> dict[str, list[float]]:
    import onnx
    import onnxruntime as ort

    import tilecraft

    proto = model(name)
    with tempfile.TemporaryDirectory(prefix="call-overhead-") as folder:
        path = os.path.join(folder, f"{name}.onnx")
        onnx.save(proto, path)
        package_path = os.path.join(folder, f"{name}.tar")
        jit = tilecraft.compile(tilecraft.load(path), package_path=package_path)
        package = tilecraft.runtime.load(package_path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.random([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
             for i in session.get_inputs()}
    arrays = [feeds[n] for n in package.input_names]
    outputs = [o.name for o in session.get_outputs()]
    expected = session.run(outputs, feeds)
    for system, got in (("package", package(*arrays)), ("jit", jit(*arrays))):
        got = got if isinstance(got, tuple) else (got,)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=f"{name}: {system}")
    binding = session.io_binding()
    for key, value in feeds.items():
        binding.bind_cpu_input(key, value)
    for output in outputs:
        binding.bind_output(output)
    return cpu_per_call({
        "package(*arrays)": lambda: package(*arrays),
        "package(**feeds)": lambda: package(**feeds),
        "CompiledModule(*arrays)": lambda: jit(*arrays),
        "ort run": lambda: session.run(outputs, feeds),
        "ort run_with_iobinding": lambda: session.run_with_iobinding(binding),
    }, calls, rounds)


def torch_runners(name: str, calls: int, rounds: int) -> dict[str, list[float]]:
    import torch

    import tilecraft.torch

    class Adds(torch.nn.Module):
        def forward(self, *xs: torch.Tensor) -> Any:
            sums = tuple(xs[2 * i] + xs[2 * i + 1] for i in range(len(xs) // 2))
            return sums[0] if len(sums) == 1 else sums

    torch.set_num_threads(1)
    inputs = 2 if name == "add" else 8
    xs = tuple(torch.rand(*SHAPE) for _ in range(inputs))
    module = Adds().eval()
    compiled = tilecraft.torch.compile(module, xs)
    arrays = [x.numpy() for x in xs]

    def eager() -> Any:
        with torch.no_grad():
            return module(*xs)

    return cpu_per_call({
        "tilecraft.torch (tensors)": lambda: compiled(*xs),
        "its CompiledModule (arrays)": lambda: compiled.compiled(*arrays),
        "eager": eager,
    }, calls, rounds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="add,multi", help="add, multi, and/or public_suite names")
    parser.add_argument("--calls", type=int, default=20000, help="calls per block")
    parser.add_argument("--rounds", type=int, default=7, help="blocks per runner")
    parser.add_argument("--torch", action="store_true", help="the tilecraft.torch path (add, multi)")
    args = parser.parse_args(argv)
    for name in args.models.split(","):
        figures = torch_runners(name, args.calls, args.rounds) if args.torch else \
            onnx_runners(name, args.calls, args.rounds)
        print(f"{name}: CPU us per call, median [min..max] of {args.rounds} blocks of {args.calls}")
        for runner, values in figures.items():
            print(f"  {runner:28s} {statistics.median(values):9.2f}  [{min(values):.2f}..{max(values):.2f}]")


if __name__ == "__main__":
    main()
