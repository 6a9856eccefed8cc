"""Import cost of a ResNet-50-sized ONNX model: wall time and peak memory vs weight size.

    .venv/bin/python benchmarks/onnx_import.py [--model resnet50]

Takes the light zoo model, gives it real (random) weights as initializers
(benchmarks/onnx_models.py: randomize_weights), saves it, and imports it in a fresh process
with tilecraft.frontend.onnx.import_model, reporting seconds and peak RSS next to the size of
the weights. The goal: seconds, not minutes, and a peak within a small multiple of the
weights (weights travel as dense_resource blobs, never as IR text).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

MEASURE = """
import resource, sys, time
start = time.perf_counter()
from tilecraft.frontend.onnx import import_model
module = import_model(sys.argv[1])
seconds = time.perf_counter() - start
print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet50", help="light zoo model name (default resnet50)")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import onnx
    from onnx_models import LIGHT_DIR, available_models, randomize_weights

    if args.model not in available_models():
        parser.error(f"unknown model {args.model!r}; choose from {', '.join(available_models())}")
    model, count = randomize_weights(onnx.load(os.path.join(LIGHT_DIR, f"light_{args.model}.onnx")))
    weights_mb = sum(t.ByteSize() for t in model.graph.initializer) / 2**20
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"{args.model}.onnx")
        onnx.save(model, path)
        baseline = subprocess.run(
            [sys.executable, "-c", "import resource, tilecraft.frontend.onnx; "
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"],
            capture_output=True, text=True, check=True,
        )
        result = subprocess.run([sys.executable, "-c", MEASURE, path], capture_output=True, text=True, check=True)
    seconds, peak_mb = map(float, result.stdout.split())
    base_mb = float(baseline.stdout)
    print(f"{args.model}: {count} weight tensors, {weights_mb:.1f} MB of weights")
    print(f"import: {seconds:.2f} s, peak RSS {peak_mb:.0f} MB "
          f"({peak_mb - base_mb:.0f} MB above the {base_mb:.0f} MB of a bare import; "
          f"{(peak_mb - base_mb) / weights_mb:.1f}x the weights)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
