"""Write what the C and C++ deploy examples read: the digits CNN compiled into a package
with its batch dimension left dynamic, and the held-out split as raw files.

    python examples/deploy/prepare_digits.py OUTDIR

writes ``OUTDIR/digits.tar`` (``tilecraft.compile``'s package), ``OUTDIR/digits_images.f32``
(the images, float32, 1x16x16 each, one after the other) and ``OUTDIR/digits_labels.u8``
(one byte per image). Why raw files: the examples then need no .npz reader, only ``fread``.
This is the only step that needs Python; the examples run without it (docs/deploy.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import tilecraft

EXAMPLES = Path(__file__).resolve().parent.parent
MODEL = EXAMPLES / "digits_cnn.onnx"
TEST_SPLIT = EXAMPLES / "digits_test.npz"


def prepare(directory: "str | Path") -> dict[str, Path]:
    """Write the package and the split into ``directory``; returns their paths by role."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"package": directory / "digits.tar", "images": directory / "digits_images.f32",
             "labels": directory / "digits_labels.u8"}
    model = tilecraft.load(MODEL)  # the batch dimension stays dynamic
    tilecraft.compile(model, target="llvm", package_path=paths["package"], keep_ir=False)
    with np.load(TEST_SPLIT) as split:
        np.ascontiguousarray(split["images"], dtype="<f4").tofile(paths["images"])
        split["labels"].astype(np.uint8).tofile(paths["labels"])
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="where to write digits.tar and the held-out split")
    for role, path in prepare(parser.parse_args().directory).items():
        print(f"{role}: {path}")


if __name__ == "__main__":
    main()
