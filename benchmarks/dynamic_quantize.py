"""DynamicQuantizeLinear as one op against its ONNX function body (issue #49, dynamic int8).

    .venv/bin/python benchmarks/dynamic_quantize.py [--rounds 15] [--threads 1] [--bert-layers 2]

tilecraft imports ``DynamicQuantizeLinear`` with a handler of its own (one pass for the
minimum and maximum, one 0-d op for the scale and zero point, one pass for the uint8 values;
frontend/onnx/ops/quantization.py). Before it, the op came in through its ONNX function body
(ReduceMin, ReduceMax, a dozen 0-d ops, QuantizeLinear). This script builds both forms of
the same models: each model as it is, and a copy with every DynamicQuantizeLinear node
replaced by the nodes of its function body (the expansion the importer used,
frontend/onnx/functions.py), so the two are compiled by the same tilecraft.

Models: the op alone on BERT-base's activations (128 x 768 and 128 x 3072), and end_to_end.py's
BERT-base-shaped encoder (``--bert-layers`` layers, 128 tokens) quantized the way
``precision="int8"`` does without calibration (``tilecraft.quantize``: onnxruntime's
``quantize_dynamic``, int8 weights per output channel), beside onnxruntime on that model.

Printed per model: whether the two forms' outputs are identical; the kernels' time per call
(the profiling variant's per-kernel times, ``Package.profile``: each kernel's median over
``--rounds`` rounds, summed; it leaves out the entry's allocations and the Python call, which
weigh on a lone small op); and the CPU time of whole calls, medians over ``--rounds``
alternating rounds (runtime/timing.py's ``alternating`` with ``time.process_time``),
``--threads`` threads each.
Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def dynamic_quantize_model(shape: list[int]) -> onnx.ModelProto:
    """One DynamicQuantizeLinear node on a float input of ``shape``."""
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "y_scale", "y_zero_point"], name="dql")
    graph = helper.make_graph(
        [node], "dynamic_quantize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, shape),
         helper.make_tensor_value_info("y_scale", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("y_zero_point", TensorProto.UINT8, [])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def function_body_form(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each DynamicQuantizeLinear node replaced by its function body's nodes."""
    from tilecraft.frontend.onnx import functions

    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    expanded = onnx.ModelProto()
    expanded.CopyFrom(model)
    nodes = []
    for position, node in enumerate(model.graph.node):
        if node.op_type != "DynamicQuantizeLinear":
            nodes.append(node)
            continue
        body = functions.function_body(node, opset, {})
        nodes.extend(functions.expand(node, node.name or f"dql{position}", body, opset))
    del expanded.graph.node[:]
    expanded.graph.node.extend(nodes)
    return expanded


def _kernel_seconds(package, feeds: dict[str, np.ndarray]) -> list[float]:
    """Seconds of each kernel in one profiled call."""
    _, times = package.profile(**feeds)
    return [t.seconds for t in times]


def _sum_of_medians(samples: list[list[float]]) -> float:
    """The kernels' per-call time: each kernel's median over the rounds, summed (a sum per call
    would take in every preemption of a shared machine)."""
    return sum(statistics.median(column) for column in zip(*samples))


def compare(label: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray], rounds: int, threads: int,
            folder: str) -> None:
    import onnxruntime

    import tilecraft
    from tilecraft.runtime.package import load
    from tilecraft.runtime.timing import alternating

    forms = {"op": model, "function body": function_body_form(model)}
    modules, packages = {}, {}
    for name, form in forms.items():
        path = os.path.join(folder, f"{label}-{name.replace(' ', '_')}.tar")
        modules[name] = tilecraft.compile(form, package_path=path, profile=True)
        packages[name] = load(path)
    outputs = {name: module(**feeds) for name, module in modules.items()}
    outputs = {name: out if isinstance(out, tuple) else (out,) for name, out in outputs.items()}
    same = all(np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
               for a, b in zip(outputs["op"], outputs["function body"]))
    print(f"{label}: outputs of the two forms identical: {same}")

    kernel = {name: [] for name in packages}
    for _ in range(rounds):
        for name, package in packages.items():
            kernel[name].append(_kernel_seconds(package, feeds))
    runners = {name: (lambda m=module: m(**feeds)) for name, module in modules.items()}
    if any(n.op_type == "MatMulInteger" for n in model.graph.node):
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
        runners["onnxruntime"] = lambda: session.run(None, feeds)
    calls = [alternating(runners, 1, min_sample_s=0.05, clock=time.process_time, pause_s=0.05)
             for _ in range(rounds)]
    for name in runners:
        line = f"    {name:<14} call {statistics.median(c[name] for c in calls) * 1e3:8.3f} ms CPU"
        if name in kernel:
            line += f"   kernels {_sum_of_medians(kernel[name]) * 1e3:8.3f} ms"
        print(line)
    call_ratio = [c["op"] / c["function body"] for c in calls]
    kernel_ratio = _sum_of_medians(kernel["op"]) / _sum_of_medians(kernel["function body"])
    print(f"  op / function body: kernels {kernel_ratio:.3f}, "
          f"call {statistics.median(call_ratio):.3f} [{min(call_ratio):.3f}, {max(call_ratio):.3f}]")
    if "onnxruntime" in runners:
        ratio = [c["op"] / c["onnxruntime"] for c in calls]
        print(f"  tilecraft (op) / onnxruntime: {statistics.median(ratio):.3f} [{min(ratio):.3f}, {max(ratio):.3f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bert-layers", type=int, default=2)
    args = parser.parse_args()
    os.environ["TILECRAFT_NUM_THREADS"] = str(args.threads)  # read by every compile and call after this

    import end_to_end

    import tilecraft

    rng = np.random.default_rng(0)
    print(f"{args.threads} thread(s), medians of {args.rounds} alternating rounds "
          f"(load average {os.getloadavg()[0]:.1f})")
    with tempfile.TemporaryDirectory(prefix="tilecraft-dql-") as folder:
        for shape in ([128, 768], [128, 3072]):
            x = rng.standard_normal(shape).astype(np.float32)
            compare("x".join(map(str, shape)), dynamic_quantize_model(shape), {"x": x}, args.rounds,
                    args.threads, folder)
        case = end_to_end.bert(args.bert_layers)
        compare(f"bert_{args.bert_layers}l_int8", tilecraft.quantize(case.model), case.feeds, args.rounds,
                args.threads, folder)


if __name__ == "__main__":
    main()
