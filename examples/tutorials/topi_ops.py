"""TVM's "Introduction to TOPI": operators from the library instead of hand-written computes.

    python examples/tutorials/topi_ops.py [--size 32] [--repeat 5]

The tutorial's steps with ``tilecraft.topi``: a reduction written by hand and with
``topi.sum``; broadcasting with ``topi.add`` and ``+`` on tensors; then a small network
(conv2d, relu, max pool, global average pool, dense, softmax), every stage a TE compute, built
with the default schedule, checked against numpy and timed. Last, the convolution is
scheduled like any compute (its padding stage computed per output-channel block, the block
loop parallel) and timed against the default in alternating calls. Each operator's ``flops``
(what the tuner counts) gives the GFLOPS.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tilecraft import topi
from tilecraft.runtime.timing import alternating
from tilecraft.scheduling import Schedule, build, compute, placeholder, reduce_axis, sum as te_sum


def check(name: str, actual: np.ndarray, expected: np.ndarray, tolerance: float = 1e-4) -> None:
    error = float(np.max(np.abs(actual - expected)) / max(float(np.max(np.abs(expected))), 1e-30))
    status = "OK" if error <= tolerance else f"MISMATCH (relative error {error:.2e})"
    print(f"{name}: {status}")
    if error > tolerance:
        raise SystemExit(1)


def reductions(rng: np.random.Generator) -> None:
    """The tutorial's first step: the same row sum by hand (te) and from TOPI."""
    n, m = 64, 48
    A = placeholder((n, m), name="A")
    k = reduce_axis(m, "k")
    by_hand = compute((n,), lambda i: te_sum(A[i, k], axis=k), name="B")
    from_topi = topi.sum(A, axis=1)
    a = rng.random((n, m), dtype=np.float32)
    check("sum by hand", build(Schedule([A, by_hand]))(a), a.sum(axis=1))
    check("topi.sum(A, axis=1)", build(Schedule([A, from_topi]))(a), a.sum(axis=1))
    check("topi.max(A, axis=0, keepdims=True)", build(Schedule([A, topi.max(A, axis=0, keepdims=True)]))(a),
          a.max(axis=0, keepdims=True))


def broadcasting(rng: np.random.Generator) -> None:
    """``topi.add`` and ``A + B`` broadcast as numpy does."""
    A = placeholder((4, 1, 8), name="A")
    B = placeholder((5, 8), name="B")
    a, b = rng.random((4, 1, 8), dtype=np.float32), rng.random((5, 8), dtype=np.float32)
    check("topi.add (4,1,8) + (5,8)", build(Schedule([A, B, topi.add(A, B)]))(a, b), a + b)
    check("A * B - A / 2", build(Schedule([A, B, A * B - A / 2.0]))(a, b), a * b - a / 2)


def reference_network(x, w, fc):
    """The network in numpy: conv (3x3, pad 1), relu, 2x2 max pool, global mean, dense, softmax."""
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = sliding_window_view(padded, (3, 3), axis=(2, 3))       # n c h w kh kw
    conv = np.einsum("nchwyx,fcyx->nfhw", windows, w)
    relu = np.maximum(conv, 0)
    n, f, h, width = relu.shape
    pooled = relu.reshape(n, f, h // 2, 2, width // 2, 2).max(axis=(3, 5))
    features = pooled.mean(axis=(2, 3))
    logits = features @ fc.T
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return conv, e / e.sum(axis=1, keepdims=True)


def network(size: int, repeat: int, rng: np.random.Generator) -> None:
    channels, filters, classes = 8, 16, 10
    X = placeholder((1, channels, size, size), name="x")
    W = placeholder((filters, channels, 3, 3), name="w")
    FC = placeholder((classes, filters), name="fc")
    conv = topi.nn.conv2d(X, W, strides=1, padding=1, dilation=1)
    y = topi.nn.relu(conv)
    y = topi.nn.pool2d(y, kernel=2, stride=2, dilation=1, padding=(0, 0, 0, 0), pool_type="max")
    y = topi.nn.global_pool(y, "avg")
    y = topi.reshape(y, (1, filters))
    probabilities = topi.nn.softmax(topi.nn.dense(y, FC), axis=-1)

    x = rng.random((1, channels, size, size), dtype=np.float32)
    w = rng.random((filters, channels, 3, 3), dtype=np.float32) - 0.5
    fc = rng.random((classes, filters), dtype=np.float32) - 0.5
    expected_conv, expected = reference_network(x, w, fc)

    sch = Schedule([X, W, FC, probabilities])
    print("stages:", [b.name for b in sch.get_blocks()])
    model = build(sch)
    check("conv2d-relu-pool-dense-softmax", model(x, w, fc), expected)

    # The convolution alone: the default loop nest, then a schedule of its stages.
    default = build(Schedule([X, W, conv]))
    sch = Schedule([X, W, conv])
    block = sch.get_block("conv2d_nchw")
    n, f, yy, xx, rc, ry, rx = sch.get_loops(block)
    fo, fi = sch.split(f, factor=4)
    sch.reorder(n, fo, yy, rc, ry, rx, fi, xx)
    sch.parallel(fo)
    sch.compute_at(sch.get_block("pad_temp"), fo)
    print("\n".join(sch.trace.calls))                         # the primitive calls, as TVM's trace
    scheduled = build(sch)
    check("conv2d scheduled", scheduled(x, w), expected_conv)
    check("conv2d default", default(x, w), expected_conv)

    medians = alternating({"default": lambda: default(x, w), "scheduled": lambda: scheduled(x, w),
                           "network": lambda: model(x, w, fc)}, repeat=repeat)
    print(f"\n{'operator':<28}{'time (ms)':>11}{'GFLOPS':>9}")
    for name, seconds, flops in (("conv2d (default schedule)", medians["default"], conv.flops),
                                 ("conv2d (scheduled)", medians["scheduled"], conv.flops),
                                 ("whole network (default)", medians["network"], probabilities.flops)):
        print(f"{name:<28}{seconds * 1e3:>11.3f}{flops / seconds / 1e9:>9.2f}")
    print(f"scheduled conv2d vs default: {medians['default'] / medians['scheduled']:.2f}x "
          "(calls alternating; ratios hold on a shared machine, absolute times do not)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=32, help="the image's height and width (even; default 32)")
    parser.add_argument("--repeat", type=int, default=5, help="alternating timing rounds (median)")
    args = parser.parse_args(argv)
    if args.size < 4 or args.size % 2:
        parser.error("--size must be an even number >= 4")
    rng = np.random.default_rng(0)
    reductions(rng)
    broadcasting(rng)
    network(args.size, args.repeat, rng)
    return 0


if __name__ == "__main__":
    sys.exit(main())
