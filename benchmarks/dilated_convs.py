"""Dilated convolutions with and without ``tilecraft-split-padded-taps`` (the taps that read
only padding skipped: pipelines/graph/dilated_convs.py), beside onnxruntime, in one process.

    .venv/bin/python benchmarks/dilated_convs.py                        # 3x3 convs, d 2-18, 33x33
    .venv/bin/python benchmarks/dilated_convs.py --dilations 6,18 --sizes 32,65 --channels 256
    .venv/bin/python benchmarks/dilated_convs.py --deeplab              # public_suite's deeplab_aspp

Each case is compiled twice by ``tilecraft.compile``: with the default pipeline (``split``)
and with the same pipeline less the pass (``whole``). The three runtimes are timed in
alternating rounds (runtime/timing.py's ``alternating``, a pause before each runner's turn),
by CPU time (``time.process_time``: steadier than wall time on a shared machine), on
``--threads`` threads each (default 1). Every output is checked against onnxruntime first.
Times are medians in ms; the ratios are what carries on a loaded machine. No thresholds: the
figures go into docs/performance.md ("Dilated convolutions").
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _conv_model(dilation: int, size: int, channels: int):
    """A "same" 3x3 Conv with bias, NCHW, ``channels`` -> ``channels``, seeded weights."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(dilation * 1000 + size)
    w = (rng.standard_normal((channels, channels, 3, 3)) / np.sqrt(9 * channels)).astype(np.float32)
    b = rng.standard_normal(channels).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[dilation] * 4,
                            dilations=[dilation, dilation])
    graph = helper.make_graph(
        [node], "dilated", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, size, size])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": rng.standard_normal((1, channels, size, size)).astype(np.float32)}


def _deeplab():
    """public_suite's deeplab_aspp as users export it (TorchScript exporter, opset 17)."""
    import onnx

    sys.path.insert(0, HERE)
    import public_suite

    module, inputs = public_suite.deeplab_aspp()
    model = onnx.load_from_string(public_suite.export_onnx(module.eval(), inputs))
    return model, {"input0": inputs[0].numpy()}


def run(name: str, model, feeds: dict, repeat: int, threads: int) -> str:
    import numpy as np
    import onnxruntime as ort

    import tilecraft
    from tilecraft.pipelines import cpu_pipeline
    from tilecraft.pipelines.graph.dilated_convs import PASS
    from tilecraft.runtime.timing import alternating

    default = cpu_pipeline("llvm", opt_level=3)
    whole_pipeline = default.replace("graph", [p for p in default.stage("graph").passes if p != PASS])
    split = tilecraft.compile(model, cache=False, verbose=False)
    whole = tilecraft.compile(model, pipeline=whole_pipeline, cache=False, verbose=False)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)[0]
    for compiled in (split, whole):
        got = compiled(**feeds)
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3 * float(np.abs(expected).max()))
    times = alternating({"split": lambda: split(**feeds), "whole": lambda: whole(**feeds),
                         "ort": lambda: session.run(None, feeds)},
                        repeat, min_sample_s=0.05, clock=time.process_time, pause_s=0.02)
    ms = {k: v * 1e3 for k, v in times.items()}
    return (f"{name:28s} {ms['split']:9.2f} {ms['whole']:9.2f} {ms['ort']:9.2f} "
            f"{ms['split'] / ms['whole']:11.2f} {ms['split'] / ms['ort']:9.2f} {ms['whole'] / ms['ort']:9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dilations", default="2,6,12,18")
    parser.add_argument("--sizes", default="33", help="square map sizes, comma-separated")
    parser.add_argument("--channels", type=int, default=256)
    parser.add_argument("--deeplab", action="store_true", help="time public_suite's deeplab_aspp instead")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    # Before tilecraft is imported: the target's thread count comes from the environment.
    os.environ["TILECRAFT_NUM_THREADS"] = str(args.threads)
    print(f"{'case':28s} {'split ms':>9s} {'whole ms':>9s} {'ort ms':>9s} {'split/whole':>11s} "
          f"{'split/ort':>9s} {'whole/ort':>9s}")
    if args.deeplab:
        print(run("deeplab_aspp", *_deeplab(), args.repeat, args.threads), flush=True)
        return
    for size in map(int, args.sizes.split(",")):
        for dilation in map(int, args.dilations.split(",")):
            name = f"3x3 d={dilation} {size}x{size} {args.channels}ch"
            print(run(name, *_conv_model(dilation, size, args.channels), args.repeat, args.threads), flush=True)


if __name__ == "__main__":
    main()
