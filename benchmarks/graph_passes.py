"""Graph passes on vs off: end-to-end latency of ResNet-50 and a BERT-style encoder layer,
beside onnxruntime, measured in the same run.

    .venv/bin/python benchmarks/graph_passes.py
    .venv/bin/python benchmarks/graph_passes.py --models bert --repeat 10
    .venv/bin/python benchmarks/graph_passes.py --models resnet50 --without-layout

For each model: tilecraft with the graph passes off and on (opt_level 3 both times, so the
JIT's LLVM level is the same; "off" runs ``cpu_pipeline(opt_level=0)``), on but with one
loop nest per op (the schedule without ``fuse-groups``), onnxruntime (all graph
optimizations, its default), the time ratio to onnxruntime, the fusion groups
(``CompiledModule.group_count``) and the loop nests the schedule leaves
(``CompiledModule.kernel_count``), and a check of each output
against onnxruntime (rtol 1e-3, atol 1e-3 of the output's largest magnitude, as in
benchmarks/onnx_models.py). ResNet-50 is the ONNX zoo's light model with seeded random
weights (benchmarks/onnx_models.py explains why); its logits are compared too. ``--without-layout``
adds a column: the graph stage without ``tilecraft-convert-layout`` and
``tilecraft-lower-layout-converts`` (convolutions left NCHW), to see what the layout pass buys.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

import tilecraft
from tilecraft.runtime.timing import measure

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "graph"))  # graph_models: the test models

import graph_models  # noqa: E402
import onnx_models  # noqa: E402


def resnet50() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    original = onnx.load(os.path.join(onnx_models.LIGHT_DIR, "light_resnet50.onnx"))
    model, _ = onnx_models.randomize_weights(original)
    model = onnx_models.expose_logits(model)
    return model, onnx_models.random_inputs(model)


def bert() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    model = graph_models.bert_layer(seq=128, hidden=256, heads=4, ffn=1024)
    x = np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32)
    return model, {"x": x}


MODELS = {"resnet50": resnet50, "bert": bert}


def _matches(got: np.ndarray, reference: np.ndarray) -> bool:
    scale = float(np.abs(reference).max()) if reference.size else 0.0
    return got.shape == reference.shape and np.allclose(got, reference, rtol=1e-3, atol=1e-3 * scale)


def _variants(without_layout: bool) -> list[tuple[str, "tilecraft.Pipeline | None"]]:
    # Graph passes off and on at the same LLVM level: opt_level also sets the JIT's LLVM
    # optimization level, so "off" is opt_level 3 with the graph-less pipeline.
    full = tilecraft.cpu_pipeline("llvm", opt_level=3)
    per_op = [e.replace(" fuse-groups=1", "") for e in full.stage("schedule").passes]
    variants = [("graph off", tilecraft.cpu_pipeline("llvm", opt_level=0)),
                # The graph stage, but each op its own loop nest (no group lowering).
                ("graph on, loop nest per op", full.replace("schedule", per_op)),
                ("graph on", None)]
    if without_layout:
        kept = [e for e in full.stage("graph").passes if "layout" not in e]
        variants.append(("graph on, NCHW", full.replace("graph", kept)))
    return variants


def run(name: str, repeat: int, without_layout: bool = False) -> str:
    model, feeds = MODELS[name]()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    reference = session.run(None, feeds)
    ort_ms = measure(lambda: session.run(None, feeds), repeat=repeat, min_repeat_ms=200).median * 1e3
    cells = []
    for label, pipeline in _variants(without_layout):
        start = time.perf_counter()
        compiled = tilecraft.compile(model, opt_level=3, pipeline=pipeline, keep_ir=False)
        compile_s = time.perf_counter() - start
        inputs = list(feeds.values())
        got = compiled(*inputs)
        got = list(got) if isinstance(got, tuple) else [got]
        ok = all(_matches(g, r) for g, r in zip(got, reference))
        ms = measure(lambda: compiled(*inputs), repeat=repeat, min_repeat_ms=200).median * 1e3
        groups = "-" if compiled.group_count is None else str(compiled.group_count)
        cells.append(f"  {label:<27} {ms:8.2f} ms  x{ms / ort_ms:5.2f}  (compile {compile_s:5.1f} s, "
                     f"groups {groups:>3}, loop nests {compiled.kernel_count:>3}, "
                     f"{'ok' if ok else 'MISMATCH'})")
    return "\n".join([f"{name}: onnxruntime {ort_ms:8.2f} ms", *cells])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {list(MODELS)}")
    parser.add_argument("--repeat", type=int, default=5, help="timed repeats (median reported)")
    parser.add_argument("--without-layout", action="store_true",
                        help="also time the graph stage without the layout passes")
    args = parser.parse_args(argv)
    print(f"threads: {tilecraft.Target.parse('llvm').num_threads}")
    for name in args.models.split(","):
        print(run(name.strip(), args.repeat, args.without_layout), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
