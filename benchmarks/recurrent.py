"""Recurrent ops against onnxruntime: a small speech-style model (issue #22); with
``--torch``, the public suite's LSTM through ``tilecraft.torch.compile`` against eager (issue #43).

    .venv/bin/python benchmarks/recurrent.py [--frames 40] [--batch 2] [--rounds 60]
    .venv/bin/python benchmarks/recurrent.py --torch [--threads 1] [--rounds 15]

The model: ``frames`` x ``batch`` x 13 MFCC features -> bidirectional LSTM(32) -> GRU(24) ->
MatMul(10) -> Softmax, random weights, built here in ONNX. tilecraft lowers LSTM/GRU to one
input projection over all time steps and a loop over time of the recurrent matmul and gates
(frontend/onnx/ops/recurrent.py). Printed: outputs checked against onnxruntime, then the
median over alternating rounds of wall time (both runtimes with their default threads) and of
CPU time with one thread each (TILECRAFT_NUM_THREADS=1 is set here; onnxruntime gets
intra_op_num_threads=1), and the ratios tilecraft / onnxruntime.

``--torch``: benchmarks/held_out.py's two-layer LSTM (batch 1, 50 frames, hidden 256), which
``aten.lstm`` imports whole (frontend/torch/ops/recurrent.py): the compile's wall and CPU
seconds, then eager and the compiled module timed in one process, calls alternating
(runtime/timing.py's ``alternating``), with ``--threads`` threads each: CPU time of the
calling thread at one thread, wall time at more.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

import tilecraft

GATES = {"LSTM": 4, "GRU": 3}


def speech_model(frames: int, batch: int, mfcc: int = 13, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)

    def weights(op: str, dirs: int, hidden: int, inputs: int, prefix: str) -> list[onnx.TensorProto]:
        g = GATES[op]
        arrays = {"W": rng.standard_normal((dirs, g * hidden, inputs)) * 0.4,
                  "R": rng.standard_normal((dirs, g * hidden, hidden)) * 0.4,
                  "B": rng.standard_normal((dirs, 2 * g * hidden)) * 0.1}
        return [numpy_helper.from_array(a.astype(np.float32), f"{prefix}_{n}") for n, a in arrays.items()]

    initializers = [*weights("LSTM", 2, 32, mfcc, "lstm"), *weights("GRU", 1, 24, 64, "gru"),
                    numpy_helper.from_array((rng.standard_normal((24, 10)) * 0.2).astype(np.float32), "fc"),
                    numpy_helper.from_array(np.array([frames, batch, 64], np.int64), "merge")]
    nodes = [
        helper.make_node("LSTM", ["x", "lstm_W", "lstm_R", "lstm_B"], ["y1"], hidden_size=32,
                         direction="bidirectional"),
        helper.make_node("Transpose", ["y1"], ["y1t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["y1t", "merge"], ["y1m"]),
        helper.make_node("GRU", ["y1m", "gru_W", "gru_R", "gru_B"], ["y2", "h2"], hidden_size=24),
        helper.make_node("MatMul", ["y2", "fc"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "speech", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [frames, batch, mfcc])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [frames, 1, batch, 10])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 8
    return model


def torch_lstm(threads: int, rounds: int) -> None:
    """The suite LSTM through the torch route against eager (see the module docstring)."""
    import resource
    import sys
    import warnings
    from pathlib import Path

    import torch

    from tilecraft.runtime.timing import CLOCKS, alternating

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from held_out import lstm  # noqa: E402  (the suite's model)

    warnings.filterwarnings("ignore", message="The tensor attributes")  # nn.RNNBase's own, while tracing
    torch.set_num_threads(threads)
    module, inputs = lstm()
    module.eval()
    usage = lambda: sum(getattr(resource.getrusage(resource.RUSAGE_SELF), f) for f in ("ru_utime", "ru_stime"))  # noqa: E731
    wall, cpu = time.perf_counter(), usage()
    compiled = tilecraft.torch.compile(module, inputs, keep_ir=False, verbose=False)
    wall, cpu = time.perf_counter() - wall, usage() - cpu
    with torch.no_grad():
        np.testing.assert_allclose(compiled(*inputs).numpy(), module(*inputs).numpy(), rtol=1e-4, atol=1e-5)
        clock = CLOCKS["thread_cpu" if threads == 1 else "wall"]
        times = alternating({"eager": lambda: module(*inputs), "tilecraft.torch": lambda: compiled(*inputs)},
                            rounds, clock=clock)
    print(f"suite LSTM (2 layers x 256, 50 frames, batch 1) through tilecraft.torch.compile, {threads} thread(s), "
          f"outputs match eager; load average {os.getloadavg()[0]:.1f}")
    print(f"  compile: {wall:.1f} s wall, {cpu:.1f} s CPU")
    print(f"  {'thread CPU' if threads == 1 else 'wall'} per call: eager {times['eager'] * 1e3:.3f} ms, "
          f"tilecraft.torch {times['tilecraft.torch'] * 1e3:.3f} ms, "
          f"ratio {times['tilecraft.torch'] / times['eager']:.2f}")


def main() -> None:
    # Here, not at import: tests import this module for its model builder, and the
    # setting would leak into every later test of their process. Read when the
    # target is parsed and when the runtime starts its threads, both later.
    os.environ.setdefault("TILECRAFT_NUM_THREADS", "1")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--torch", action="store_true", help="the suite LSTM through tilecraft.torch against eager")
    parser.add_argument("--threads", type=int, default=1, help="threads of each runtime (--torch)")
    args = parser.parse_args()
    if args.torch:
        os.environ["TILECRAFT_NUM_THREADS"] = str(args.threads)
        torch_lstm(args.threads, args.rounds)
        return
    model = speech_model(args.frames, args.batch)
    x = np.random.default_rng(1).standard_normal((args.frames, args.batch, 13)).astype(np.float32)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    compiled = tilecraft.compile(model)
    np.testing.assert_allclose(compiled(x), session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    for _ in range(5):
        compiled(x)
        session.run(None, {"x": x})
    wall: dict[str, list[float]] = {"tilecraft": [], "onnxruntime": []}
    cpu: dict[str, list[float]] = {"tilecraft": [], "onnxruntime": []}
    runners = {"tilecraft": lambda: compiled(x), "onnxruntime": lambda: session.run(None, {"x": x})}
    for _ in range(args.rounds):
        for name, run in runners.items():
            w, c = time.perf_counter(), time.process_time()
            run()
            cpu[name].append(time.process_time() - c)
            wall[name].append(time.perf_counter() - w)
    print(f"speech model (LSTM bidirectional 32 + GRU 24), {args.frames} frames x batch {args.batch}, "
          f"one thread each, outputs match onnxruntime; load average {os.getloadavg()[0]:.1f}")
    for label, data in (("wall", wall), ("CPU", cpu)):
        ours, theirs = statistics.median(data["tilecraft"]), statistics.median(data["onnxruntime"])
        print(f"  {label:>4}: tilecraft {ours * 1e6:8.0f} us, onnxruntime {theirs * 1e6:8.0f} us, "
              f"ratio {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
