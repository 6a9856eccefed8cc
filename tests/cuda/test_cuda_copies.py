"""Strided copies that bufferization leaves on the host become GPU copy kernels
(targets/cuda/schedule.py ``strided_copies_to_kernels``): a concat's branches written into their
slices (DenseNet), a pad's interior written out of place."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from cuda_testing import check_ptxas, f32, onnx_model
from mlir import ir, passmanager
from mlir.execution_engine import ExecutionEngine
from mlir.runtime import get_ranked_memref_descriptor
from onnx import TensorProto, helper

import tilecraft
from tilecraft.targets.cuda.schedule import COPY_THREADS, strided_copies_to_kernels

COPY = """
func.func @interior(%a: memref<{n}x{c}x{h}x{w}xf32>, %b: memref<{n}x{c}x{H}x{W}xf32>) attributes {{llvm.emit_c_interface}} {{
  %s = memref.subview %b[0, 0, 2, 3] [{n}, {c}, {h}, {w}] [1, 1, 1, 1] : memref<{n}x{c}x{H}x{W}xf32> to memref<{n}x{c}x{h}x{w}xf32, strided<[{s0}, {s1}, {W}, 1], offset: {offset}>>
  memref.copy %a, %s : memref<{n}x{c}x{h}x{w}xf32> to memref<{n}x{c}x{h}x{w}xf32, strided<[{s0}, {s1}, {W}, 1], offset: {offset}>>
  return
}}
"""
# Replays the copy kernel's loops on the CPU: grid and thread loops as plain loops.
CPU_LOWERING = ("builtin.module(scf-forall-to-for, convert-scf-to-cf, expand-strided-metadata, "
                "finalize-memref-to-llvm, convert-arith-to-llvm, convert-cf-to-llvm, "
                "convert-func-to-llvm, reconcile-unrealized-casts)")


@pytest.mark.parametrize("n, c, h, w", [(2, 3, 5, 7), (4, 8, 9, 10)])  # one block; 12 with a tail
def test_a_strided_copy_becomes_grid_loops_that_copy_every_element(n, c, h, w):
    H, W = h + 4, w + 5
    source = COPY.format(n=n, c=c, h=h, w=w, H=H, W=W, s0=c * H * W, s1=H * W, offset=2 * W + 3)
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(source)
        strided_copies_to_kernels(module.operation)
        text = str(module)
        assert "memref.copy" not in text
        assert "#gpu.block<x>" in text and "#gpu.thread<x>" in text
        assert f"in ({min(COPY_THREADS, n * c * h * w)})" in text
        passmanager.PassManager.parse(CPU_LOWERING).run(module.operation)
        engine = ExecutionEngine(module, opt_level=0)
    a = np.random.default_rng(0).random((n, c, h, w), dtype=np.float32)
    b = np.zeros((n, c, H, W), np.float32)
    engine.invoke("interior", *[ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(x))) for x in (a, b)])
    expected = np.zeros_like(b)
    expected[:, :, 2:2 + h, 3:3 + w] = a
    np.testing.assert_array_equal(b, expected)


def test_dense_connectivity_compiles_without_host_copies(rng, tmp_path):
    """DenseNet's concat of a layer's input with its output, twice: the concat results are
    written slice by slice, and the slices of an input that is itself a concat stay copies."""
    def weights(name, shape):
        values = (rng.random(shape) - 0.5).astype(np.float32)
        return helper.make_tensor(name, TensorProto.FLOAT, values.shape, values.ravel())

    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Concat", ["x", "r1"], ["a"], axis=1),
             helper.make_node("Conv", ["a", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Concat", ["a", "r2"], ["y"], axis=1)]
    model = onnx_model(nodes, [f32("x", [1, 8, 16, 16])], [f32("y", [1, 16, 16, 16])],
                       [weights("w1", (4, 8, 3, 3)), weights("w2", (4, 12, 3, 3))])
    module = tilecraft.compile(model, target="cuda -arch=sm_90")
    assert "memref.copy" not in module.ir("host")
    check_ptxas(module, "sm_90", tmp_path)
