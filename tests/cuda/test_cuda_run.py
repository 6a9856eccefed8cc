"""CUDA execution: numerics on a real GPU against numpy and the CPU backend.

Every test here is marked ``gpu`` and skipped where no CUDA driver and GPU are present
(``libcuda.so.1`` not loadable, or no device). Run on a CUDA machine with
``pytest -m gpu tests/cuda``.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_testing import (
    DEMO_CNN, conv_model, matmul_mlir, requires_gpu, softmax_model, softmax_reference, vector_add,
)

import tilecraft
from tilecraft.targets.cuda import cuda_pipeline

pytestmark = [pytest.mark.gpu, requires_gpu]


def test_vector_add_runs(rand):
    module = tilecraft.compile(vector_add(1 << 20), target="cuda")
    a, b = rand((1 << 20,)), rand((1 << 20,))
    np.testing.assert_array_equal(module(a, b), a + b)
    # Called again, by name: the arguments are copied in afresh, the result is a new array.
    np.testing.assert_array_equal(module(A=b, B=a), a + b)


@pytest.mark.parametrize("options", ["", "shared=0", "k-step=32 unroll=8", "block-m=32 block-n=32"])
def test_matmul_runs(options, rand):
    pipeline = cuda_pipeline("cuda", schedule_options=options)
    module = tilecraft.compile(matmul_mlir(256, 192, 128), target="cuda", pipeline=pipeline)
    a, b = rand((256, 128)), rand((128, 192))
    np.testing.assert_allclose(module(a, b), a @ b, rtol=1e-5, atol=1e-4)


def test_softmax_runs(rand):
    module = tilecraft.compile(softmax_model(64, 1000), target="cuda")
    x = rand((64, 1000)) * 10
    np.testing.assert_allclose(module(x), softmax_reference(x), rtol=1e-5, atol=1e-6)


def test_conv2d_runs(rng, rand):
    model = conv_model(rng)
    x = rand((1, 8, 32, 32))
    expected = tilecraft.compile(model, target="llvm")(x)
    np.testing.assert_allclose(tilecraft.compile(model, target="cuda")(x), expected,
                               rtol=1e-5, atol=1e-5)


def test_demo_cnn_runs(rand):
    shapes = {"input": [1, 1, 16, 16]}
    x = rand((1, 1, 16, 16))
    expected = tilecraft.compile(str(DEMO_CNN), target="llvm", shape_dict=shapes)(x)
    module = tilecraft.compile(str(DEMO_CNN), target="cuda", shape_dict=shapes)
    np.testing.assert_allclose(module(x), expected, rtol=1e-4, atol=1e-5)


def test_demo_cnn_package_runs(rand, tmp_path):
    """A CUDA package (model.so with runtime/cuda_runtime.c) on the GPU: the CPU model's
    numbers, on every call (weights uploaded at the first, kept), and after close."""
    from tilecraft.runtime import package

    shapes = {"input": [1, 1, 16, 16]}
    x = rand((1, 1, 16, 16))
    expected = tilecraft.compile(str(DEMO_CNN), target="llvm", shape_dict=shapes)(x)
    tilecraft.compile(str(DEMO_CNN), target="cuda", shape_dict=shapes, package_path=tmp_path / "m.tar")
    with package.load(tmp_path / "m.tar") as model:
        for _ in range(3):
            np.testing.assert_allclose(model(x), expected, rtol=1e-4, atol=1e-5)
        model.close()  # the weights go; the next call uploads them again
        np.testing.assert_allclose(model(x), expected, rtol=1e-4, atol=1e-5)
