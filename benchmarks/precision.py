"""f32 vs bf16 vs int8 (issue #49): tilecraft's three builds of one float model beside
onnxruntime's f32 and its int8 model, times and errors from one run.

    .venv/bin/python benchmarks/precision.py [--models resnet50,bert] [--rounds 5]
        [--bert-layers 2] [--calibration 4] [--threads 1] [--agreement 1000]
    .venv/bin/python benchmarks/precision.py --layers all [--rounds 15] [--threads 1]
    .venv/bin/python benchmarks/precision.py --models bert --profile 20 [--threads 1]

Models: ResNet-50 (public_suite.py's, seeded random weights and BatchNorm statistics
calibrated on random batches, so that its top-1 moves with the input: ``resnet50_case``;
batch 1) and end_to_end.py's BERT-base-shaped encoder (``--bert-layers`` post-norm layers,
128 tokens). Nothing is downloaded.

Builds, all from the same float ONNX model:
  tilecraft f32     ``tilecraft.compile(model)``
  tilecraft bf16    ``precision="bf16"`` (``vdpbf16ps`` kernels on AVX512-BF16 CPUs, elsewhere
                    bf16 weights widened to f32 before f32 kernels)
  tilecraft int8    ``precision="int8"``: ResNet-50 calibrated on ``--calibration`` random
                    images (static QDQ), the encoder without calibration (dynamic MatMuls)
  onnxruntime f32   the float model
  onnxruntime int8  the model onnxruntime's own ``quantize_static`` / ``quantize_dynamic``
                    made from the same float model and calibration data (``tilecraft.quantize``
                    is that call, so it is the very QDQ model tilecraft compiled)

Errors: tilecraft's accuracy report for each reduced build (relative to the output's largest
f32 magnitude, on the calibration inputs or seeded random ones), and the same figures for
onnxruntime's int8 model against onnxruntime's f32 run. ``--agreement N`` adds the report of
each reduced build, OpenVINO's reduced build and onnxruntime's int8 model against tilecraft
f32 on N further seeded random inputs, and how many classes f32's top-1 takes over them (the
issue's top-1 agreement over 1,000 inputs for ResNet-50: minutes of calls, so an option).
Times: CPU milliseconds per call,
``--threads`` threads each (TILECRAFT_NUM_THREADS, intra_op_num_threads), medians over
alternating rounds (runtime/timing.py: drift of a shared machine hits every runner alike).

``--layers``: single layers (a convolution or a matmul by constant weights, with a bias
and ReLU or bias after it) as f32 and as bf16 builds and OpenVINO's default precision where
it is installed, CPU time per call alternating, for the bf16 kernels' own speed (``all`` or
a comma-separated list of ``LAYERS``' names).

``--profile N``: instead of the timings, the bf16 build's per-kernel profile beside
OpenVINO's per-node one (``PERF_COUNT``), over N calls (``profile``).

Read the figures for what the host has (the first line printed says): without AVX512-BF16
and VNNI (this script's first runs, on an AVX2 EPYC) int8 runs widened i32 matmuls and bf16
pays the widening of its weights without a bf16 dot product to gain from; the issue's speed
goals need a CPU with both (docs/performance.md has runs of each kind).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def resnet50_case():
    """ResNet-50 whose top-1 moves with its input: public_suite.py's torch ResNet-50 (seeded
    random weights) with BatchNorm statistics calibrated on a few training-mode batches
    (``public_suite.calibrate_batch_norm``), exported as the suite exports. Why not
    end_to_end.py's light zoo graph: its random weights and unit BatchNorm statistics gave every
    input the same class by a wide margin, so top-1 agreement measured nothing there."""
    import onnx
    import torch

    import end_to_end
    import public_suite

    torch.manual_seed(0)
    module, inputs = public_suite.resnet50()
    module = public_suite.calibrate_batch_norm(module, inputs)
    model = end_to_end._name_nodes(onnx.load_from_string(public_suite.export_onnx(module, inputs)))
    feeds = {f"input{i}": x.numpy() for i, x in enumerate(inputs)}
    return end_to_end.Case("resnet50", model, feeds)


def _session(model, threads: int):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _ort_runner(session):
    def run(**feeds):
        outputs = session.run(None, feeds)
        return tuple(outputs) if len(outputs) > 1 else outputs[0]
    return run


def _openvino_runners(model, threads: int) -> dict:
    """OpenVINO's CPU plugin on the float model, the issue's peer for reduced precision: in its
    default inference precision (bf16 on a CPU with AVX512-BF16) and in f32; {} where the
    ``openvino`` package is not installed (``pip install -e '.[peers]'``)."""
    try:
        import openvino
    except ImportError:
        print("  openvino is not installed (pip install -e '.[peers]'): its rows are left out")
        return {}
    import tempfile

    core = openvino.Core()
    default = core.get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()  # "bf16" on AVX512-BF16
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as stream:
            stream.write(model.SerializeToString())
        read = core.read_model(path)
        runners = {}
        for label, hint in ((f"openvino {default}", {}), ("openvino f32", {"INFERENCE_PRECISION_HINT": "f32"})):
            compiled = core.compile_model(read, "CPU", {"INFERENCE_NUM_THREADS": threads, **hint})
            request = compiled.create_infer_request()

            def run(request=request, **feeds):
                outputs = list(request.infer(feeds).values())
                return tuple(outputs) if len(outputs) > 1 else outputs[0]
            runners[label] = run
    return runners


def _random_inputs(case, count: int, seed: int) -> list[dict[str, np.ndarray]]:
    """``count`` inputs like ``case.feeds``: float ones standard normal, the others as given."""
    rng = np.random.default_rng(seed)
    return [{name: rng.standard_normal(array.shape).astype(array.dtype) if array.dtype.kind == "f"
             else array for name, array in case.feeds.items()} for _ in range(count)]


def _calibration(case, count: int) -> list[dict[str, np.ndarray]]:
    return [case.feeds, *_random_inputs(case, count - 1, 7)]


def _print_top1_spread(module, inputs: list[dict[str, np.ndarray]], names: list[str]) -> None:
    """How many distinct classes f32's top-1 takes over ``inputs``, per classifier output, and
    the median margin of the top-1 score over the second (relative to the largest score
    magnitude): a top-1 agreement is only a measurement where the top-1 moves with the input
    (a model with random weights may give every input the same class, by a wide margin, so
    that any build agrees), and it is stricter the smaller the margins are."""
    outputs = [module(**sample) for sample in inputs]
    outputs = [list(o) if isinstance(o, (tuple, list)) else [o] for o in outputs]
    for index, name in enumerate(names):
        rows = [np.asarray(o[index]) for o in outputs]
        if rows[0].ndim != 2 or rows[0].shape[1] < 2:
            continue
        scores = np.concatenate(rows)
        classes = set(np.argmax(scores, axis=1).tolist())
        top2 = np.sort(scores, axis=1)[:, -2:]
        margin = float(np.median(top2[:, 1] - top2[:, 0]) / np.abs(scores).max())
        note = ": every input the same class, so top-1 agreement says nothing here" if len(classes) == 1 else ""
        print(f"  {name}: f32's top-1 took {len(classes)} distinct class(es) over {len(inputs)} inputs, "
              f"median top-1 margin {margin:.3g} of the largest score{note}")


def benchmark(case, rounds: int, calibration: int, threads: int, agreement: int = 0) -> None:
    import tilecraft
    from tilecraft.compiler.precision import accuracy_report
    from tilecraft.runtime import timing

    static = case.name.startswith("resnet")
    samples = _calibration(case, calibration) if static else None
    builds = {}
    for label, overrides in (("tilecraft f32", {}), ("tilecraft bf16", {"precision": "bf16", "calibration": samples}),
                             ("tilecraft int8", {"precision": "int8", "calibration": samples})):
        start = time.perf_counter()
        builds[label] = tilecraft.compile(case.model, **{k: v for k, v in overrides.items() if v is not None})
        print(f"{case.name}: {label} compiled in {time.perf_counter() - start:.1f} s", flush=True)
    int8_model = tilecraft.quantize(case.model, samples)
    ort_f32, ort_int8 = _ort_runner(_session(case.model, threads)), _ort_runner(_session(int8_model, threads))
    report_inputs = samples or [case.feeds]
    ort_report = accuracy_report("int8", ort_f32, ort_int8, report_inputs, "calibration" if samples else "benchmark",
                                 [output.name for output in case.model.graph.output])
    print(f"\n{case.name} ({'static int8, calibrated' if static else 'dynamic int8'}):")
    for label in ("tilecraft bf16", "tilecraft int8"):
        print(f"  {label}: {builds[label].accuracy}")
    print(f"  onnxruntime int8 vs onnxruntime f32: {ort_report}")
    openvino = _openvino_runners(case.model, threads)
    for label, run in openvino.items():
        report = accuracy_report(label.split()[1] if label.split()[1] in ("bf16", "f32") else "f32", ort_f32, run,
                                 report_inputs,
                                 "calibration" if samples else "benchmark",
                                 [output.name for output in case.model.graph.output])
        print(f"  {label} vs onnxruntime f32: {report}")
    if agreement:
        inputs = _random_inputs(case, agreement, 11)  # a seed of their own: not the calibration inputs
        names = [output.name for output in case.model.graph.output]
        # The peers' reduced builds on the same inputs against the same reference: on a model
        # with random weights the figure is the model's sensitivity as much as the build's.
        peers = {label: run for label, run in openvino.items() if "f32" not in label}
        peers["onnxruntime int8"] = ort_int8
        for label, run in [*((label, builds[label]) for label in ("tilecraft bf16", "tilecraft int8")),
                           *peers.items()]:
            precision = "int8" if "int8" in label else "bf16"
            report = accuracy_report(precision, builds["tilecraft f32"], run, inputs, "random", names)
            print(f"  {label} vs tilecraft f32 on {agreement} random inputs: {report}", flush=True)
        _print_top1_spread(builds["tilecraft f32"], inputs, names)
    feeds = case.feeds
    runners = {label: (lambda module=module: module(**feeds)) for label, module in builds.items()}
    runners["onnxruntime f32"] = lambda: ort_f32(**feeds)
    runners["onnxruntime int8"] = lambda: ort_int8(**feeds)
    runners.update({label: (lambda run=run: run(**feeds)) for label, run in openvino.items()})
    medians = timing.alternating(runners, rounds, clock=time.process_time)
    print(f"  CPU ms per call, {threads} thread(s) each, median of {rounds} alternating rounds "
          f"(load average {os.getloadavg()[0]:.1f}; a shared machine):")
    for label, seconds in medians.items():
        print(f"    {label:<17} {seconds * 1e3:9.2f}")
    f32 = medians["tilecraft f32"]
    print(f"  tilecraft f32 / bf16: {f32 / medians['tilecraft bf16']:.2f}x (goal >= 1.5 on AVX512-BF16); "
          f"f32 / int8: {f32 / medians['tilecraft int8']:.2f}x (goal >= 2.5 with VNNI); "
          f"tilecraft int8 / onnxruntime int8: {medians['tilecraft int8'] / medians['onnxruntime int8']:.2f}x "
          f"(goal <= 1.0)", flush=True)
    reduced = next((label for label in openvino if "f32" not in label), None)
    if reduced:
        print(f"  tilecraft bf16 / {reduced}: {medians['tilecraft bf16'] / medians[reduced]:.2f}x (goal <= 1.0); "
              f"{reduced} / onnxruntime f32: {medians[reduced] / medians['onnxruntime f32']:.2f}x", flush=True)


def _conv_layer(channels: int, filters: int, size: int, kernel: int, stride: int):
    """``relu(conv(x) + b)``, NCHW, "same" padding: (model, input, flops)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((filters, channels, kernel, kernel)) * 0.1).astype(np.float32)
    b = rng.standard_normal(filters).astype(np.float32)
    out = (size + 2 * (kernel // 2) - kernel) // stride + 1
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["h"], strides=[stride] * 2, pads=[kernel // 2] * 4),
         helper.make_node("Relu", ["h"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, filters, out, out])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, rng.standard_normal((1, channels, size, size)).astype(np.float32), \
        2 * channels * filters * kernel * kernel * out * out


def _dense_layer(m: int, k: int, n: int):
    """``x @ w + b``: (model, input, flops)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n)) * 0.1).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])], "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, rng.standard_normal((m, k)).astype(np.float32), 2 * m * k * n


# ResNet-50's RGB stem (3 channels: the bf16 kernel reads it by kernel rows), its 3x3
# convolutions (one per stage, and a strided one), a bottleneck's 1x1 expansion, BERT-base's
# projections on 128 tokens.
LAYERS = {
    "conv7x7_s2_3to64_224": lambda: _conv_layer(3, 64, 224, 7, 2),
    "conv3x3_64_56": lambda: _conv_layer(64, 64, 56, 3, 1),
    "conv3x3_128_28": lambda: _conv_layer(128, 128, 28, 3, 1),
    "conv3x3_256_14": lambda: _conv_layer(256, 256, 14, 3, 1),
    "conv3x3_512_7": lambda: _conv_layer(512, 512, 7, 3, 1),
    "conv3x3_s2_128_56": lambda: _conv_layer(128, 128, 56, 3, 2),
    "conv1x1_64to256_56": lambda: _conv_layer(64, 256, 56, 1, 1),
    "conv1x1_256to64_56": lambda: _conv_layer(256, 64, 56, 1, 1),
    "conv1x1_s2_1024to2048_14": lambda: _conv_layer(1024, 2048, 14, 1, 2),
    "conv1x1_2048to512_7": lambda: _conv_layer(2048, 512, 7, 1, 1),
    "matmul_128x768x768": lambda: _dense_layer(128, 768, 768),
    "matmul_128x768x3072": lambda: _dense_layer(128, 768, 3072),
    "matmul_128x3072x768": lambda: _dense_layer(128, 3072, 768),
}


def layers(names: list[str], rounds: int, threads: int = 1) -> None:
    """Each layer as tilecraft f32, as ``precision="bf16"``'s pipeline and, where OpenVINO is
    installed, as OpenVINO in its default precision (bf16 on AVX512-BF16), alternating: a
    layer's own gap to OpenVINO, which its per-layer counters do not give on a loaded machine
    (they are wall-clock times)."""
    import tilecraft
    from tilecraft.pipelines.target import Target
    from tilecraft.pipelines.tensor.bf16_weights import with_bf16_weights
    from tilecraft.runtime import timing

    target = Target.parse("llvm")
    print(f"CPU ms per call, median of {rounds} alternating rounds (load average {os.getloadavg()[0]:.1f}):")
    for name in names:
        model, x, flops = LAYERS[name]()
        f32 = tilecraft.compile(model)
        bf16 = tilecraft.compile(model, pipeline=with_bf16_weights(tilecraft.cpu_pipeline(target, opt_level=3), target))
        expected = f32(x)
        error = float(np.abs(bf16(x) - expected).max() / np.abs(expected).max())
        runners = {"f32": lambda: f32(x), "bf16": lambda: bf16(x)}
        peers = {label: run for label, run in _openvino_runners(model, threads).items() if "f32" not in label}
        input_name = model.graph.input[0].name
        runners.update({label: (lambda run=run: run(**{input_name: x})) for label, run in peers.items()})
        medians = timing.alternating(runners, rounds, clock=time.process_time)
        line = (f"  {name:<20} f32 {medians['f32'] * 1e3:7.3f} ({flops / medians['f32'] / 1e9:5.0f} GFLOPS)  "
                f"bf16 {medians['bf16'] * 1e3:7.3f} ({flops / medians['bf16'] / 1e9:5.0f} GFLOPS)  "
                f"f32 / bf16 {medians['f32'] / medians['bf16']:.2f}x  max relative error {error:.1e}")
        for label in peers:
            line += f"  {label} {medians[label] * 1e3:7.3f} (bf16 / it {medians['bf16'] / medians[label]:.2f}x)"
        print(line, flush=True)


def profile(case, calls: int, threads: int = 1, top: int = 15) -> None:
    """Where the bf16 build's time goes beside OpenVINO's default precision: tilecraft's
    per-kernel profile (a package built with ``profile=True``, each kernel timed on the calling
    thread's CPU clock when ``threads`` is 1, else on the wall clock) and OpenVINO's
    ``PERF_COUNT`` per (node type, implementation), its wall time per node (its ``cpu_time``
    read 5x the call's CPU time on one thread here: not used); both summed over
    ``calls`` calls after 3 untimed ones and printed per call, the ``top`` largest. Why:
    precision.py's totals say how far apart the two are, not which ops make the difference
    (docs/performance.md, "Attention in bf16", has a run)."""
    import tempfile
    from collections import defaultdict

    import tilecraft
    from tilecraft.runtime import package

    feeds = case.feeds
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.tar")
        tilecraft.compile(case.model, precision="bf16", package_path=path, profile=True)
        loaded = package.load(path)
        if threads == 1:
            loaded.use_profile_clock("thread_cpu")
        kernels: dict[str, float] = defaultdict(float)
        for call in range(calls + 3):
            _, times = loaded.profile(**feeds)
            for kernel in times if call >= 3 else ():
                kernels[kernel.name] += kernel.seconds
    total = sum(kernels.values())
    print(f"\n{case.name}: tilecraft bf16, {total / calls * 1e3:.3f} ms per call in kernels "
          f"({'thread CPU' if threads == 1 else 'wall'} time, {calls} calls):")
    for name, seconds in sorted(kernels.items(), key=lambda item: -item[1])[:top]:
        print(f"  {seconds / calls * 1e3:8.3f} ms  {seconds / total:6.1%}  {name}")
    try:
        import openvino
    except ImportError:
        print("  openvino is not installed (pip install -e '.[peers]'): its profile is left out")
        return
    core = openvino.Core()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as stream:
            stream.write(case.model.SerializeToString())
        compiled = core.compile_model(core.read_model(path), "CPU",
                                      {"INFERENCE_NUM_THREADS": threads, "PERF_COUNT": "YES"})
    request = compiled.create_infer_request()
    nodes: dict[tuple[str, str], float] = defaultdict(float)
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for call in range(calls + 3):
        request.infer(feeds)
        for info in request.get_profiling_info() if call >= 3 else ():
            nodes[(info.node_type, info.exec_type)] += info.real_time.total_seconds()
            counts[(info.node_type, info.exec_type)] += 1
    total = sum(nodes.values())
    print(f"{case.name}: OpenVINO default precision, {total / calls * 1e3:.3f} ms per call in nodes "
          f"(PERF_COUNT's wall time, {calls} calls):")
    for (node_type, exec_type), seconds in sorted(nodes.items(), key=lambda item: -item[1])[:top]:
        print(f"  {seconds / calls * 1e3:8.3f} ms  {seconds / total:6.1%}  {node_type} x{counts[(node_type, exec_type)] // calls}"
              f" ({exec_type})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,bert")
    parser.add_argument("--bert-layers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calibration", type=int, default=4, help="calibration images for static int8")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--agreement", type=int, default=0,
                        help="also compare the reduced builds with f32 on this many random inputs (0: no)")
    parser.add_argument("--layers", default="", help=f"time single layers instead: 'all' or some of {sorted(LAYERS)}")
    parser.add_argument("--profile", type=int, default=0,
                        help="instead of timing, profile the bf16 build per kernel and OpenVINO per node over "
                             "this many calls")
    args = parser.parse_args(argv)
    os.environ["TILECRAFT_NUM_THREADS"] = str(args.threads)  # read when the target is parsed, later
    if args.layers:
        names = list(LAYERS) if args.layers == "all" else args.layers.split(",")
        unknown = sorted(set(names) - set(LAYERS))
        if unknown:
            parser.error(f"unknown layers {unknown}; layers: {sorted(LAYERS)}")
        layers(names, args.rounds, args.threads)
        return 0
    import end_to_end

    from tilecraft.runtime.host import host_cpu_flags

    flags = host_cpu_flags()
    print(f"host: avx512f={'avx512f' in flags} avx512_vnni={'avx512_vnni' in flags} "
          f"avx512_bf16={'avx512_bf16' in flags}")
    cases = {"resnet50": resnet50_case, "bert": lambda: end_to_end.bert(args.bert_layers)}
    for name in args.models.split(","):
        if name not in cases:
            parser.error(f"unknown model {name!r}; models: {sorted(cases)}")
        if args.profile:
            profile(cases[name](), args.profile, args.threads)
        else:
            benchmark(cases[name](), args.rounds, args.calibration, args.threads, args.agreement)
    return 0


if __name__ == "__main__":
    sys.exit(main())
