"""The nine light ONNX zoo models: tilecraft vs onnxruntime, measured in the same run.

    .venv/bin/python benchmarks/onnx_models.py
    .venv/bin/python benchmarks/onnx_models.py --models resnet50,squeezenet --repeat 10

The models are those of ``onnx/backend/test/data/light`` (shipped in the onnx wheel): real
architectures whose weights were replaced by ``ConstantOfShape`` fills of 0.02 to keep the
files small. A constant network is a poor benchmark (and a poor check: every channel
computes the same thing), so each ConstantOfShape whose shape is an initializer is
replaced by an initializer of seeded random values of that shape:

- rank >= 2 (conv / gemm weights): normal, std sqrt(2 / fan_in) (He), so activations
  stay in range through deep ReLU stacks;
- rank <= 1 (biases, batch-norm scale/mean/variance): uniform in [0.5, 1.5], positive so a
  batch-norm variance stays valid.

With random weights the deeper residual nets (resnet50, shufflenet) reach logits of 1e5 and
more, so their final Softmax saturates to one-hot and comparing it alone would check
nothing: the input of each output Softmax (the logits) becomes an extra graph output, for
both runtimes, and is compared too.

Inputs are seeded uniform [0, 1). For each model: compile time (tilecraft.compile; for
onnxruntime, creating the InferenceSession), median latency (tilecraft.runtime.timing.measure),
the ratio tilecraft / onnxruntime (below 1: tilecraft is faster), and a correctness check of
tilecraft's outputs against onnxruntime's: rtol 1e-3, with an atol of 1e-3 times the output's
largest magnitude. A purely elementwise rtol fails on logits that cancel to near zero, which
a float32 sum in another order moves by far more than 1e-3 of themselves (onnxruntime with
graph optimizations off differs from itself with them on by up to 3.5e-3 of an element on
inception_v2). The printed error is the largest difference over the output's largest
magnitude. A model that fails to import or compile prints its error line and the run goes
on. No thresholds: the figures are quoted in notes and compared across changes.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import numpy as np
import onnx
from onnx import helper, numpy_helper

import tilecraft
from tilecraft.runtime.timing import measure

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
RTOL = 1e-3


def available_models() -> list[str]:
    return sorted(os.path.basename(p)[len("light_"):-len(".onnx")]
                  for p in glob.glob(os.path.join(LIGHT_DIR, "light_*.onnx")))


def random_weight(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """See the module docstring for why these two distributions."""
    if len(shape) >= 2:
        fan_in = int(np.prod(shape[1:])) or 1
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(dtype)
    return rng.uniform(0.5, 1.5, size=shape).astype(dtype)


def randomize_weights(model: onnx.ModelProto, seed: int = 0) -> tuple[onnx.ModelProto, int]:
    """A copy of ``model`` where every ConstantOfShape with a constant shape became an
    initializer of random values; returns the copy and how many nodes were replaced."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    rng = np.random.default_rng(seed)
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    kept_nodes, new_weights = [], []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in initializers:
            shape = tuple(int(d) for d in numpy_helper.to_array(initializers[node.input[0]]))
            value = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "value"), None)
            dtype = numpy_helper.to_array(value).dtype if value is not None else np.dtype(np.float32)
            new_weights.append(numpy_helper.from_array(random_weight(shape, dtype, rng), node.output[0]))
        else:
            kept_nodes.append(node)
    del graph.node[:]
    graph.node.extend(kept_nodes)
    graph.initializer.extend(new_weights)
    _drop_unused_initializers(graph)
    if model.ir_version < 4:  # before IR 4, every initializer must also be a graph input
        graph.input.extend(
            helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in new_weights
        )
    return model, len(new_weights)


def _drop_unused_initializers(graph: onnx.GraphProto) -> None:
    """Remove the shape initializers (and their graph inputs) nothing reads any more."""
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    unused = {t.name for t in graph.initializer if t.name not in used}
    kept = [t for t in graph.initializer if t.name not in unused]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    inputs = [v for v in graph.input if v.name not in unused]
    del graph.input[:]
    graph.input.extend(inputs)


def expose_logits(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the input of every Softmax that yields a graph output added as an
    output (see the module docstring); its type comes from ONNX shape inference."""
    producers = {output: node for node in model.graph.node for output in node.output}
    logits = [producers[o.name].input[0] for o in model.graph.output
              if o.name in producers and producers[o.name].op_type == "Softmax"]
    if not logits:
        return model
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    model.graph.output.extend(inferred[name] for name in logits if name in inferred)
    return model


def random_inputs(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded uniform [0, 1) for each graph input that is not an initializer (unknown dims 1)."""
    rng = np.random.default_rng(seed)
    weights = {t.name for t in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in weights:
            continue
        tensor_type = value.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in tensor_type.shape.dim)
        dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        feeds[value.name] = rng.random(shape).astype(dtype)
    return feeds


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= 300 else text[:297] + "..."


def _scaled_error(got: np.ndarray, reference: np.ndarray) -> float:
    """max |got - reference| / max |reference| (0 for empty or all-zero outputs)."""
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    return float(np.max(np.abs(got.astype(np.float64) - reference))) / scale if scale else 0.0


def _matches(got: np.ndarray, reference: np.ndarray) -> bool:
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    return got.shape == reference.shape and np.allclose(got, reference, rtol=RTOL, atol=RTOL * scale)


def benchmark(name: str, repeat: int, ort) -> str:
    """One result line for model ``name`` (or its error line)."""
    original = onnx.load(os.path.join(LIGHT_DIR, f"light_{name}.onnx"))
    model, replaced = randomize_weights(original)
    model = expose_logits(model)
    feeds = random_inputs(model)
    inputs = list(feeds.values())

    start = time.perf_counter()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ort_compile = time.perf_counter() - start
    reference = session.run(None, feeds)
    ort_timing = measure(lambda: session.run(None, feeds), repeat=repeat, min_repeat_ms=200)

    start = time.perf_counter()
    try:
        compiled = tilecraft.compile(model, keep_ir=False, cache=False)  # the compile time is reported
    except Exception as error:  # report and go on with the next model
        return f"{name:<14} {'':>9} {ort_compile:>9.2f} {'':>10} {ort_timing.median * 1e3:>10.2f}   -    {_first_line(error)}"
    compile_seconds = time.perf_counter() - start
    try:
        got = compiled(*inputs)
    except Exception as error:
        return (f"{name:<14} {compile_seconds:>9.2f} {ort_compile:>9.2f} {'':>10} "
                f"{ort_timing.median * 1e3:>10.2f}   -    {_first_line(error)}")
    got = list(got) if isinstance(got, tuple) else [got]
    ok = len(got) == len(reference) and all(_matches(g, r) for g, r in zip(got, reference))
    worst = max((_scaled_error(g, r) for g, r in zip(got, reference) if g.shape == r.shape), default=float("nan"))
    ours = measure(lambda: compiled(*inputs), repeat=repeat, min_repeat_ms=200)
    check = "ok" if ok else "MISMATCH"
    return (f"{name:<14} {compile_seconds:>9.2f} {ort_compile:>9.2f} {ours.median * 1e3:>10.2f} "
            f"{ort_timing.median * 1e3:>10.2f} {ours.median / ort_timing.median:>6.2f}  {check} "
            f"(error {worst:.1e} of max, {replaced} weights randomized)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = available_models()
    parser.add_argument("--models", default=",".join(names), help=f"comma-separated subset of: {', '.join(names)}")
    parser.add_argument("--repeat", type=int, default=5, help="timed repeats per model (median reported)")
    args = parser.parse_args(argv)
    selected = [m.strip().removeprefix("light_").removeprefix("test_") for m in args.models.split(",") if m.strip()]
    unknown = [m for m in selected if m not in names]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {names}")
    import onnxruntime as ort

    if "OPENBLAS_CORETYPE" in os.environ:
        print(f"warning: OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} is set; it can slow down "
              "numpy/BLAS code in this process (unset it for figures you quote)")
    threads = tilecraft.Target.parse("llvm").num_threads
    print(f"light ONNX zoo models, random weights; tilecraft target llvm ({threads} thread(s)), "
          f"onnxruntime {ort.__version__} (CPUExecutionProvider), median of {args.repeat}")
    print(f"{'model':<14} {'compile s':>9} {'ort init':>9} {'tc ms':>10} {'ort ms':>10} {'ratio':>6}  check")
    for name in selected:
        print(benchmark(name, args.repeat, ort), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
