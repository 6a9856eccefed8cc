"""A small CNN built with tilecraft's model builder, every layer a TE compute (``emit_te``).

    python examples/tutorials/mlc_cnn.py [--repeat 20]

conv 3x3 (1 -> 8 channels) + bias + ReLU, conv 3x3 stride 2 (8 -> 16) + bias + ReLU,
global average pooling, dense (16 -> 10): the MLC course's end-to-end flow with a
convolutional model, on a 1x1x28x28 image. The computes are plain ``te.compute`` lambdas
(no padding: the input shrinks by 2 per 3x3 layer). ``build()`` compiles the model through
the same graph passes as an imported one (the NCHW convolutions become NHWC, bias and ReLU
fuse into them), the result is checked against PyTorch, timed, exported as a ``.so`` and
loaded back.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

import tilecraft
from tilecraft import scheduling as te
from tilecraft.builder import ModelBuilder


def conv2d(x: te.Tensor, w: te.Tensor, b: te.Tensor, stride: int = 1) -> te.Tensor:
    """NCHW convolution without padding, plus the bias, as ``torch.nn.Conv2d`` computes it."""
    batch, channels, height, width = x.shape
    filters, _, kh, kw = w.shape
    out_h, out_w = (height - kh) // stride + 1, (width - kw) // stride + 1
    rc, ry, rx = te.reduce_axis(channels, "rc"), te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    conv = te.compute(
        (batch, filters, out_h, out_w),
        lambda n, f, y, z: te.sum(x[n, rc, y * stride + ry, z * stride + rx] * w[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv")
    return te.compute(conv.shape, lambda n, f, y, z: conv[n, f, y, z] + b[f], name="bias")


def relu(x: te.Tensor) -> te.Tensor:
    return te.compute(x.shape, lambda *i: te.maximum(x[i], 0.0), name="relu")


def global_avg_pool(x: te.Tensor) -> te.Tensor:
    batch, channels, height, width = x.shape
    ry, rx = te.reduce_axis(height, "ry"), te.reduce_axis(width, "rx")
    total = te.compute((batch, channels), lambda n, c: te.sum(x[n, c, ry, rx], axis=[ry, rx]), name="pool_sum")
    return te.compute(total.shape, lambda n, c: total[n, c] * (1.0 / (height * width)), name="pool")


def dense(x: te.Tensor, w: te.Tensor, b: te.Tensor) -> te.Tensor:
    k = te.reduce_axis(x.shape[1], "k")
    product = te.compute((x.shape[0], w.shape[0]), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="dense")
    return te.compute(product.shape, lambda i, j: product[i, j] + b[j], name="dense_bias")


SHAPES = {"conv1.weight": (8, 1, 3, 3), "conv1.bias": (8,), "conv2.weight": (16, 8, 3, 3),
          "conv2.bias": (16,), "fc.weight": (10, 16), "fc.bias": (10,)}


def build_cnn(params: dict[str, np.ndarray]) -> ModelBuilder:
    mb = ModelBuilder()
    x = mb.input("image", (1, 1, 28, 28))
    c = {name: mb.const(array, name.replace(".", "_")) for name, array in params.items()}
    h = mb.emit_te(relu, mb.emit_te(conv2d, x, c["conv1.weight"], c["conv1.bias"]))
    h = mb.emit_te(relu, mb.emit_te(conv2d, h, c["conv2.weight"], c["conv2.bias"], stride=2))
    logits = mb.emit_te(dense, mb.emit_te(global_avg_pool, h), c["fc.weight"], c["fc.bias"])
    mb.output(logits)
    return mb


def torch_reference(image: np.ndarray, params: dict[str, np.ndarray]) -> np.ndarray:
    import torch
    import torch.nn.functional as F

    p = {name: torch.from_numpy(array) for name, array in params.items()}
    with torch.no_grad():
        h = F.relu(F.conv2d(torch.from_numpy(image), p["conv1.weight"], p["conv1.bias"]))
        h = F.relu(F.conv2d(h, p["conv2.weight"], p["conv2.bias"], stride=2))
        return F.linear(h.mean(dim=(2, 3)), p["fc.weight"], p["fc.bias"]).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    params = {name: (rng.standard_normal(shape) / 3).astype(np.float32) for name, shape in SHAPES.items()}
    module = build_cnn(params).build()
    image = rng.random((1, 1, 28, 28), dtype=np.float32)
    out, expected = module(image), torch_reference(image, params)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    print(f"matches PyTorch: max |difference| {np.abs(out - expected).max():.2e}; "
          f"{module.group_count} fusion groups, {module.kernel_count} kernels")
    print(f"time per call: {module.time_evaluator(number=10, repeat=args.repeat)(image).summary_ms()}")
    with tempfile.TemporaryDirectory() as folder:
        path = module.export_library(Path(folder) / "cnn.so")
        loaded = tilecraft.runtime.load_module(path)
        np.testing.assert_allclose(loaded(image), out, rtol=1e-6, atol=1e-7)
        print(f"exported to {path.name} ({path.stat().st_size} bytes), loaded back: same outputs")


if __name__ == "__main__":
    main()
