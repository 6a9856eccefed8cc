"""Thread tasks of convolutions and pooling whose rows split neither in 2 nor in 4: bands of
rows that keep every thread busy (schedule/conv_plan.py, ``busiest_chunk``) against the
former channel-only split, on two threads, builds alternating in one process, onnxruntime
(same threads) in the same run.

    .venv/bin/python benchmarks/conv_tasks.py                          # squeezenet
    .venv/bin/python benchmarks/conv_tasks.py --models squeezenet,mobilenet_v2 --threads 2

The "channels" build patches ``conv_plan.busiest_chunk`` to find no band (the former rule:
channels split even where they make one task); "bands" is the default. Wall-clock medians
of blocks (``runtime.timing.alternating``: both threads' work shows in the wall time, not
in one thread's CPU time), outputs checked against onnxruntime first. No thresholds: the
figures go into docs/performance.md ("SqueezeNet and depthwise on AVX2").
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="squeezenet", help="public_suite models, comma-separated")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=15, help="alternating rounds")
    args = parser.parse_args(argv)
    os.environ["TILECRAFT_NUM_THREADS"] = str(args.threads)
    sys.path.insert(0, HERE)
    import numpy as np
    import onnx
    import onnxruntime as ort

    import public_suite
    from rule_builds import builds_under_rules
    from tilecraft.runtime.timing import alternating
    from tilecraft.schedule import conv_plan

    former = conv_plan.busiest_chunk

    def apply(rule) -> None:
        conv_plan.busiest_chunk = rule

    rules = {"channels": lambda extent, threads: None, "bands": former}
    for name in [m for m in args.models.split(",") if m]:
        module, inputs = public_suite.build(name)
        model = onnx.load_from_string(public_suite.export_onnx(module, inputs))
        feeds = [x.numpy() for x in inputs]
        builds = builds_under_rules(model, rules, apply, former)
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        expected = session.run(None, dict(zip(names, feeds)))[0]
        scale = float(np.abs(expected).max()) or 1.0
        for label, compiled in builds.items():
            np.testing.assert_allclose(compiled(*feeds), expected, rtol=1e-3, atol=1e-3 * scale, err_msg=label)
        runners = {label: (lambda m=compiled: m(*feeds)) for label, compiled in builds.items()}
        # The A/B alternates the two builds alone: a build timed right after onnxruntime ran
        # behind its spinning pool threads (channels 0.58x of bands at load 7 when it
        # followed onnxruntime in every round). onnxruntime is timed in a second call.
        medians = alternating(runners, args.repeat, min_sample_s=0.05, pause_s=0.02)
        against = alternating(
            {"onnxruntime": lambda: session.run(None, dict(zip(names, feeds))), "bands": runners["bands"]},
            args.repeat, min_sample_s=0.05, pause_s=0.2)
        cells = "; ".join(f"{label} {seconds * 1e3:.2f} ms" for label, seconds in medians.items())
        print(f"{name} ({args.threads} threads, load {os.getloadavg()[0]:.1f}): {cells}; "
              f"bands/channels {medians['bands'] / medians['channels']:.3f}; second call: bands "
              f"{against['bands'] * 1e3:.2f} ms, onnxruntime {against['onnxruntime'] * 1e3:.2f} ms, "
              f"bands/onnxruntime {against['bands'] / against['onnxruntime']:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
