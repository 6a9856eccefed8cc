"""TOPI graphs through the whole compiler: ``create_func`` of a topi graph is a module that
``tilecraft.compile`` takes through its graph passes and default schedules, and
``extract_tasks`` finds its kernels with flops, like a model's (what a model builder and the
tuner rely on)."""

import numpy as np
import pytest

import tilecraft
import tilecraft.scheduling as te
from tilecraft import topi


def test_a_topi_network_compiles_like_a_model():
    X = te.placeholder((1, 3, 16, 16), name="X")
    W = te.placeholder((8, 3, 3, 3), name="W")
    I = te.placeholder((3,), name="I", dtype="int64")
    y = topi.nn.relu(topi.nn.conv2d(X, W, 1, 1, 1))
    y = topi.nn.pool2d(y, 3, 2, 1, (1, 1, 1, 1), "avg", ceil_mode=True)
    y = topi.take(topi.nn.softmax(topi.reshape(y, (8, 81)), axis=-1), I, axis=1)
    # Guarded loads (padding, take) are gathers: the default schedule keeps them scalar and
    # says so, as it does for the frontends' gathers (docs/architecture.md).
    with pytest.warns(RuntimeWarning, match="keeps scalar loops"):
        module = tilecraft.compile(str(te.create_func([X, W, I, y])), target="llvm")
    rng = np.random.default_rng(0)
    x, w = rng.random((1, 3, 16, 16), dtype=np.float32), rng.random((8, 3, 3, 3), dtype=np.float32) - 0.5
    idx = np.array([0, 80, 5], dtype=np.int64)
    expected = te.build(te.Schedule([X, W, I, y]))(x, w, idx)
    np.testing.assert_allclose(module(x, w, idx), expected, rtol=1e-5, atol=1e-6)


def test_tasks_of_a_topi_graph_carry_flops():
    X = te.placeholder((32, 64), name="X")
    W = te.placeholder((48, 64), name="W")
    dense = topi.nn.dense(X, W)
    tasks = tilecraft.extract_tasks(str(te.create_func([X, W, dense])))
    assert [t.kind for t in tasks] == ["matmul"]
    assert tasks[0].flops == dense.flops == 2 * 32 * 48 * 64
