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


PREPARE = """
import os, sys
import onnx
sys.path.insert(0, sys.argv[1])
from onnx_models import LIGHT_DIR, randomize_weights
model, count = randomize_weights(onnx.load(os.path.join(LIGHT_DIR, f"light_{sys.argv[2]}.onnx")))
onnx.save(model, sys.argv[3])
print(count, sum(t.ByteSize() for t in model.graph.initializer) / 2**20)
"""


def _run(*args: str) -> str:
    return subprocess.run([sys.executable, "-c", *args], capture_output=True, text=True, check=True).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet50", help="light zoo model name (default resnet50)")
    args = parser.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    # Every step runs in its own process: a peak RSS is inherited across fork, so the parent
    # must never hold the model itself.
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"{args.model}.onnx")
        count, weights_mb = _run(PREPARE, here, args.model, path).split()
        weights_mb = float(weights_mb)
        base_mb = float(_run("import resource, tilecraft.frontend.onnx; "
                             "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"))
        seconds, peak_mb = map(float, _run(MEASURE, path).split())
    print(f"{args.model}: {count} weight tensors, {weights_mb:.1f} MB of weights")
    print(f"import: {seconds:.2f} s, peak RSS {peak_mb:.0f} MB "
          f"({peak_mb - base_mb:.0f} MB above the {base_mb:.0f} MB of a bare import; "
          f"{(peak_mb - base_mb) / weights_mb:.1f}x the weights)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
