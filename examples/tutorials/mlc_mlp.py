"""The MLC course's end-to-end MLP, built with tilecraft's model builder.

    python examples/tutorials/mlc_mlp.py [--repeat 20]

As in the course's "End-to-end model execution" chapter: ``linear -> relu -> linear``
on a 1x784 image, the first linear and the ReLU as TE computes (``emit_te``), the second
linear as the extern ``env.linear``, a numpy function registered from Python and called in
destination-passing style (``call_dps_packed``), the weights as constants. The built module
is checked against PyTorch and timed (``time_evaluator``). The weights are random (seeded):
the point is the flow, not the accuracy.
"""

from __future__ import annotations

import argparse

import numpy as np

import tilecraft
from tilecraft import scheduling as te
from tilecraft.builder import ModelBuilder

BATCH, IN, HIDDEN, OUT = 1, 784, 128, 10


def linear(x: te.Tensor, w: te.Tensor, b: te.Tensor) -> te.Tensor:
    """``x @ w.T + b`` (PyTorch's layout for ``w``) as two computes."""
    k = te.reduce_axis(x.shape[1], name="k")
    product = te.compute((x.shape[0], w.shape[0]), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="matmul")
    return te.compute(product.shape, lambda i, j: product[i, j] + b[j], name="add_bias")


def relu(x: te.Tensor) -> te.Tensor:
    return te.compute(x.shape, lambda i, j: te.maximum(x[i, j], 0.0), name="relu")


def env_linear(x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """The extern: ``out = x @ w.T + b``, written into the buffer the compiled code passes."""
    np.matmul(x, w.T, out=out)
    out += b


def build_mlp(params: list[np.ndarray]) -> ModelBuilder:
    w0, b0, w1, b1 = params
    mb = ModelBuilder()
    x = mb.input("x", (BATCH, IN))
    hidden = mb.emit_te(relu, mb.emit_te(linear, x, mb.const(w0, "w0"), mb.const(b0, "b0")))
    out = mb.call_dps_packed("env.linear", [hidden, mb.const(w1, "w1"), mb.const(b1, "b1")], (BATCH, OUT))
    mb.output(out)
    return mb


def torch_reference(x: np.ndarray, params: list[np.ndarray]) -> np.ndarray:
    import torch

    w0, b0, w1, b1 = (torch.from_numpy(p) for p in params)
    with torch.no_grad():
        hidden = torch.relu(torch.nn.functional.linear(torch.from_numpy(x), w0, b0))
        return torch.nn.functional.linear(hidden, w1, b1).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal(shape) / 10).astype(np.float32)
              for shape in ((HIDDEN, IN), (HIDDEN,), (OUT, HIDDEN), (OUT,))]
    tilecraft.extern.register_python("env.linear", env_linear,
                                     inputs=["memref<?x?xf32>", "memref<?x?xf32>", "memref<?xf32>"],
                                     outputs=["memref<?x?xf32>"])
    builder = build_mlp(params)
    print("the model as built (TE functions inlined, env.linear in destination-passing style):\n")
    print(builder.ir())
    module = builder.build()
    x = rng.random((BATCH, IN), dtype=np.float32)
    out, expected = module(x), torch_reference(x, params)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    print(f"matches PyTorch: max |difference| {np.abs(out - expected).max():.2e}")
    print("argmax:", int(out.argmax()), "(PyTorch:", int(expected.argmax()), ")")
    timing = module.time_evaluator(number=10, repeat=args.repeat)(x)
    print(f"time per call: {timing.summary_ms()}")


if __name__ == "__main__":
    main()
