"""Fused attention (issue #22): BERT-base-shaped attention through tilecraft's fused kernel
(pipelines/tensor/fused_attention.py), beside tilecraft without it, onnxruntime and PyTorch's
``scaled_dot_product_attention``.

    .venv/bin/python benchmarks/attention.py [--repeat 15] [--heads 12] [--seq 128]

Cases (ONNX models as transformers export them, 4-D [batch, heads, seq, 64]):

* ``padding mask``: ``MatMul(Q, Transpose(K)) * 1/8 + mask`` with an additive key-padding
  mask of shape [batch, 1, 1, seq] (an input), ``Softmax``, ``MatMul(P, V)``;
* ``causal``: the same with a constant [seq, seq] mask of -inf above the diagonal;
* ``bert layer``: end_to_end.py's BERT-base encoder layer (projections, attention, FFN).

``--lanes 16,8,0`` instead: one attention layer built with the fused kernel's vectors of each
width (0: the unfused ops) in this process (the pass option ``lanes``; 8 gives AVX2's tile,
``AttentionShape.tile_rows``), beside onnxruntime, one thread, process CPU time per call in
alternating blocks; ``--mask none`` is a ViT's attention (scale and softmax only):

    .venv/bin/python benchmarks/attention.py --lanes 16,8 --seq 197 --mask none
    .venv/bin/python benchmarks/attention.py --lanes 16,8 --seq 49 --batch 64 --heads 3 --head-dim 32 --mask none
    .venv/bin/python benchmarks/attention.py --lanes 16,8 --seq 128 --mask causal

``--target "llvm -mcpu=znver3"`` builds for an AVX2 CPU (16 vector registers) on an AVX-512
host; ``--threads 2`` runs both engines on two threads (wall time of blocks after a pause).

``--mask swin``: Swin-T's window attention (stage 1: 64 windows of 7 x 7 tokens, 3 heads of
32; ``--batch`` windows, ``--heads``, ``--head-dim`` as given), the scores plus a relative
position bias per head ([heads, 49, 49], a constant), regrouped to [1, windows, heads, 49, 49]
to add the shifted windows' mask ([windows, 1, 49, 49], -100 between regions) and back;
the matcher does not follow that chain through the reshapes, so every width runs the
unfused ops (fused_attention.py's docstring says why):

    .venv/bin/python benchmarks/attention.py --lanes 8,0 --mask swin --batch 64 --heads 3 --head-dim 32 --seq 49

``--save m.onnx`` writes the model; ``--package old=old.tar`` (repeatable) adds a package
compiled from it by another tree (``TILECRAFT_NUM_THREADS=1 PYTHONPATH=/tmp/old tilecraft
compile m.onnx -o old.tar``) to the alternating blocks: a before/after in one process.

Printed per case: the largest difference from onnxruntime, milliseconds per call (calls
alternate, end_to_end.alternating, this machine's threads for every engine) and the ratios
(> 1: tilecraft's fused build is faster). No thresholds: figures are quoted in notes.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import end_to_end  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft import CompileOptions  # noqa: E402
from tilecraft.pipelines.cpu import cpu_pipeline  # noqa: E402
from tilecraft.pipelines.tensor.fused_attention import FUSE_ATTENTION_PASS  # noqa: E402

HEAD_DIM = 64


def attention_model(batch: int, heads: int, seq: int, causal: bool, head_dim: int = HEAD_DIM,
                    masked: bool = True) -> onnx.ModelProto:
    """Q, K, V [batch, heads, seq, head_dim] -> attention output, with a padding-mask input
    or a constant causal mask (or, ``masked=False``, none)."""
    shape = [batch, heads, seq, head_dim]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("q", "k", "v")]
    inits = [numpy_helper.from_array(np.array(1.0 / np.sqrt(head_dim), np.float32), "scale")]
    if causal:
        mask = np.triu(np.full((seq, seq), -np.inf, np.float32), 1)
        inits.append(numpy_helper.from_array(mask, "mask"))
    elif masked:
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [batch, 1, 1, seq]))
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Mul", ["s", "scale"], ["ss" if causal or masked else "sm"]),
        *([helper.make_node("Add", ["ss", "mask"], ["sm"])] if causal or masked else []),
        helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def swin_window_model(windows: int, heads: int, tokens: int, head_dim: int) -> onnx.ModelProto:
    """Swin's window attention as PyTorch exports it: Q, K, V [windows, heads, tokens,
    head_dim]; ``Q K^T * scale + bias`` ([heads, tokens, tokens]), reshaped to [1, windows,
    heads, tokens, tokens] to add the shift mask ([windows, 1, tokens, tokens]: -100 where
    two tokens come from different regions of the rolled map), reshaped back, softmax, @ V."""
    rng = np.random.default_rng(1)
    shape = [windows, heads, tokens, head_dim]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("q", "k", "v")]
    regions = rng.integers(0, 3, size=(windows, tokens))
    mask = np.where(regions[:, :, None] != regions[:, None, :], -100.0, 0.0).astype(np.float32)[:, None]
    inits = [numpy_helper.from_array(np.array(1.0 / np.sqrt(head_dim), np.float32), "scale"),
             numpy_helper.from_array((rng.standard_normal((heads, tokens, tokens)) * 0.02).astype(np.float32), "bias"),
             numpy_helper.from_array(mask, "mask"),
             numpy_helper.from_array(np.array([-1, windows, heads, tokens, tokens], np.int64), "windowed"),
             numpy_helper.from_array(np.array([-1, heads, tokens, tokens], np.int64), "flat")]
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Mul", ["s", "scale"], ["ss"]),
        helper.make_node("Add", ["ss", "bias"], ["sb"]),
        helper.make_node("Reshape", ["sb", "windowed"], ["s5"]),
        helper.make_node("Add", ["s5", "mask"], ["m5"]),
        helper.make_node("Reshape", ["m5", "flat"], ["sm"]),
        helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "swin_window_attention", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def feeds_for(model: onnx.ModelProto, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.name == "mask":  # the last quarter of the keys is padding
            mask = np.zeros(shape, np.float32)
            mask[..., seq - seq // 4:] = -10000.0
            feeds[value.name] = mask
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def unfused(model: onnx.ModelProto, target: str = "llvm") -> "tilecraft.CompiledModule":
    """tilecraft's build without the fused attention kernel (the same pipeline otherwise)."""
    pipeline = cpu_pipeline(target, opt_level=3)
    simplify = pipeline.stage("simplify")
    pipeline = pipeline.replace("simplify", [p for p in simplify.passes if not p.startswith(FUSE_ATTENTION_PASS)])
    return tilecraft.compile(model, CompileOptions(target=target, pipeline=pipeline, cache=False))


def torch_runner(feeds: dict[str, np.ndarray], causal: bool):
    import torch
    from torch.nn.functional import scaled_dot_product_attention

    q, k, v = (torch.from_numpy(feeds[n]) for n in ("q", "k", "v"))
    mask = None if causal else torch.from_numpy(feeds["mask"])

    def run() -> object:
        with torch.no_grad():
            return scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    return run


def compare(label: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray], repeat: int,
            extra: dict | None = None) -> None:
    fused, plain = tilecraft.compile(model), unfused(model)
    kernels = fused.ir("simplify").count("call @tilecraft_attention") if hasattr(fused, "ir") else "?"
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)[0]
    first = lambda r: r[0] if isinstance(r, (tuple, list)) else r  # noqa: E731
    error = max(float(np.abs(first(m(**feeds)) - expected).max()) for m in (fused, plain))
    print(f"{label}: fused kernels {kernels}; max |tilecraft - onnxruntime| {error:.2e}")
    runners = {"tilecraft fused": lambda: fused(**feeds), "tilecraft unfused": lambda: plain(**feeds),
               "onnxruntime": lambda: session.run(None, feeds), **(extra or {})}
    times = end_to_end.alternating(runners, repeat, pause_s=end_to_end.RUNNER_PAUSE_S)
    for name, seconds in times.items():
        print(f"    {name:<18} {seconds * 1e3:8.3f} ms")
    base = times["tilecraft fused"]
    print("  " + "; ".join(f"{name} / fused: {seconds / base:.2f}x" for name, seconds in times.items()
                           if name != "tilecraft fused"))


def with_lanes(model: onnx.ModelProto, lanes: int, target: str = "llvm") -> "tilecraft.CompiledModule":
    """tilecraft's build for ``target`` with the fused kernel's vectors ``lanes`` f32 wide."""
    pipeline = cpu_pipeline(target, opt_level=3)
    simplify = pipeline.stage("simplify")
    passes = [f"{FUSE_ATTENTION_PASS}{{num-threads=1 lanes={lanes}}}" if p.startswith(FUSE_ATTENTION_PASS) else p
              for p in simplify.passes]
    return tilecraft.compile(model, CompileOptions(target=target, pipeline=pipeline.replace("simplify", passes),
                                                   cache=False))


def compare_lanes(model: onnx.ModelProto, feeds: dict[str, np.ndarray], lanes: list[int], blocks: int,
                  calls: int, packages: dict[str, str] | None = None, target: str = "llvm",
                  threads: int = 1) -> None:
    """Builds of one attention at each vector width, one thread, alternating blocks of
    ``calls`` calls with onnxruntime's (and with ``packages``, label: a package another
    tree compiled from the same model); process CPU time on one thread, wall time after a
    pause per block on more. ``threads``: tilecraft's and onnxruntime's intra-op threads
    (the kernels are built for them: TILECRAFT_NUM_THREADS)."""
    import time

    from tilecraft.runtime.package import load_module

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)[0]
    runners = {}
    for width in lanes:
        module = with_lanes(model, width, target) if width else unfused(model, target)
        assert ("call @tilecraft_attention" in module.ir("simplify")) == bool(width), "fused or not as asked"
        got = module(**feeds)
        got = got[0] if isinstance(got, (tuple, list)) else got
        print(f"  {f'lanes {width}' if width else 'unfused'}: max |tilecraft - onnxruntime| "
              f"{float(np.abs(got - expected).max()):.2e}")
        runners[f"lanes {width}" if width else "unfused"] = lambda m=module: m(**feeds)
    for label, path in (packages or {}).items():
        module = load_module(path)
        got = module(**feeds)
        got = got[0] if isinstance(got, (tuple, list)) else got
        print(f"  {label}: max |tilecraft - onnxruntime| {float(np.abs(got - expected).max()):.2e}")
        runners[label] = lambda m=module: m(**feeds)
    runners["onnxruntime"] = lambda: session.run(None, feeds)
    times: dict[str, list[float]] = {label: [] for label in runners}
    # One thread: process CPU time. More: wall time, with a pause before each block (onnxruntime's
    # pool spins after a run and would be timed against the next engine's block).
    clock = time.process_time if threads == 1 else time.perf_counter
    for _ in range(blocks):
        for label, fn in runners.items():
            if threads > 1:
                time.sleep(end_to_end.RUNNER_PAUSE_S)
            start = clock()
            for _ in range(calls):
                fn()
            times[label].append((clock() - start) / calls * 1e3)
    base = float(np.median(times["onnxruntime"]))
    for label, samples in times.items():
        median = float(np.median(samples))
        print(f"    {label:<12} median {median:8.3f} ms (min {min(samples):8.3f}), {median / base:.2f}x onnxruntime")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--no-layer", action="store_true", help="skip the whole BERT layer")
    parser.add_argument("--lanes", default="", help="vector widths to A/B (e.g. 16,8; 0: unfused), one thread")
    parser.add_argument("--mask", choices=("padding", "causal", "none", "swin"), default="padding",
                        help="with --lanes")
    parser.add_argument("--batch", type=int, default=1, help="with --lanes")
    parser.add_argument("--head-dim", type=int, default=HEAD_DIM, help="with --lanes")
    parser.add_argument("--calls", type=int, default=5, help="calls per timed block, with --lanes")
    parser.add_argument("--target", default="llvm",
                        help='with --lanes: the target to build for, e.g. "llvm -mcpu=znver3" for AVX2\'s '
                             '16 vector registers on an AVX-512 host (default: this CPU)')
    parser.add_argument("--threads", type=int, default=1, help="with --lanes: threads of both engines")
    parser.add_argument("--save", help="with --lanes: write the model (ONNX) here")
    parser.add_argument("--package", action="append", default=[], metavar="LABEL=PACKAGE",
                        help="with --lanes: a package compiled from the saved model by another tree")
    args = parser.parse_args()
    if args.lanes:
        os.environ["TILECRAFT_NUM_THREADS"] = str(args.threads)
        if args.mask == "swin":
            model = swin_window_model(args.batch, args.heads, args.seq, args.head_dim)
        else:
            model = attention_model(args.batch, args.heads, args.seq, args.mask == "causal", args.head_dim,
                                    args.mask != "none")
        if args.save:
            onnx.save(model, args.save)
        print(f"attention {args.batch} x {args.heads} heads x {args.seq} x {args.head_dim}, mask {args.mask}")
        packages = dict(item.partition("=")[::2] for item in args.package)
        compare_lanes(model, feeds_for(model, args.seq, np.random.default_rng(0)),
                      [int(w) for w in args.lanes.split(",") if w != ""], args.repeat, args.calls, packages,
                      args.target, args.threads)
        return
    rng = np.random.default_rng(0)
    for causal in (False, True):
        model = attention_model(1, args.heads, args.seq, causal)
        feeds = feeds_for(model, args.seq, rng)
        compare(f"attention {args.heads} heads x {args.seq} x {HEAD_DIM}, {'causal' if causal else 'padding mask'}",
                model, feeds, args.repeat, {"torch sdpa": torch_runner(feeds, causal)})
    if not args.no_layer:
        case = end_to_end.bert(1)
        compare("bert layer (128 tokens, hidden 768)", case.model, case.feeds, args.repeat)


if __name__ == "__main__":
    main()
