"""The demo behind `make demo`: classify handwritten digits with the bundled CNN.

1. ``tilecraft.load`` the bundled ONNX model (examples/digits_cnn.onnx, trained by
   examples/train_digits_cnn.py on scikit-learn's 8x8 digits) with the batch fixed to the
   held-out split's size, and print its summary;
2. ``tilecraft.compile`` it into a deployable package (shared library + manifest);
3. load the package with ``tilecraft.runtime.load`` (numpy + ctypes only) and classify the
   whole held-out split (examples/digits_test.npz);
4. do the same with onnxruntime, print both accuracies (they must be equal: exit code 1
   otherwise) and the latency of one batch in each, measured in this process.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tilecraft
from tilecraft.runtime.timing import measure

HERE = Path(__file__).resolve().parent
MODEL = HERE / "digits_cnn.onnx"
TEST_SPLIT = HERE / "digits_test.npz"


def main() -> int:
    with np.load(TEST_SPLIT) as split:
        images, labels = split["images"], split["labels"]
    model = tilecraft.load(MODEL, shape_dict={"input": list(images.shape)})
    print(model.summary())

    with tempfile.TemporaryDirectory() as scratch:
        package_path = Path(scratch) / "digits_cnn.tar"
        start = time.perf_counter()
        tilecraft.compile(model, target="llvm", package_path=package_path, keep_ir=False)
        print(f"\ncompiled {MODEL.name} into a package ({package_path.stat().st_size / 1024:.0f} KiB) "
              f"in {time.perf_counter() - start:.1f} s")
        package = tilecraft.runtime.load(package_path)
    ours = package(images)

    import onnxruntime

    session = onnxruntime.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    (theirs,) = session.run(None, {"input": images})

    our_accuracy = float(np.mean(ours.argmax(1) == labels))
    their_accuracy = float(np.mean(theirs.argmax(1) == labels))
    disagreements = int(np.sum(ours.argmax(1) != theirs.argmax(1)))
    print(f"held-out split: {len(labels)} images of 10 digits")
    print(f"accuracy  tilecraft: {our_accuracy:.4f}   onnxruntime: {their_accuracy:.4f}   "
          f"(predictions that differ: {disagreements}; "
          f"max logit difference {float(np.max(np.abs(ours - theirs))):.2e})")

    tilecraft_time = measure(lambda: package(images), repeat=10, min_repeat_ms=50)
    ort_time = measure(lambda: session.run(None, {"input": images}), repeat=10, min_repeat_ms=50)
    print(f"latency of one batch of {len(labels)} (median)  tilecraft: {tilecraft_time.median * 1e3:.3f} ms   "
          f"onnxruntime: {ort_time.median * 1e3:.3f} ms")
    print(f"ratio tilecraft / onnxruntime: {tilecraft_time.median / ort_time.median:.2f} "
          "(below 1: tilecraft is faster)")
    if our_accuracy != their_accuracy:
        print("FAIL: the accuracies differ", file=sys.stderr)
        return 1
    print("OK: same accuracy as onnxruntime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
