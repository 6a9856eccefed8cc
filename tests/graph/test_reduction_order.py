"""Reductions over an NHWC image run their loops in the image's order
(pipelines/graph/reduction_order.py, ``tilecraft-contiguous-reduction-loops``): global
pools with the activation before them fused in (EfficientNet's SiLU, MobileNetV3's
hardswish), a mean over H and W kept as [N, C, 1, 1], squeeze-excite blocks. Numerics
against onnxruntime on one and two threads, at channel counts no vector divides and prime
image sides; the vectors of the compiled pools end in channels, not in a unit dim."""

from __future__ import annotations

import re
import warnings

import numpy as np
import onnxruntime as ort
import pytest
from mlir import ir
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.pipelines.graph.reduction_order import loop_order


def _model(nodes, weights, channels, size, out_shape):
    graph = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _conv(rng, name, out_channels, in_channels, source, target, nodes, weights):
    """A 1x1 convolution with bias, so the activation after it fuses as in a real model."""
    scale = 1.0 / np.sqrt(in_channels)
    weights += [numpy_helper.from_array((rng.standard_normal((out_channels, in_channels, 1, 1)) * scale)
                                        .astype(np.float32), f"{name}_w"),
                numpy_helper.from_array((rng.standard_normal(out_channels) * 0.1).astype(np.float32), f"{name}_b")]
    nodes.append(helper.make_node("Conv", [source, f"{name}_w", f"{name}_b"], [target]))


def silu_pool(channels: int, size: int):
    """EfficientNet's head: 1x1 conv, SiLU (x * sigmoid(x)), global average pool."""
    rng = np.random.default_rng(channels)
    nodes, weights = [], []
    _conv(rng, "head", channels, 8, "x", "c", nodes, weights)
    nodes += [helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["a"]),
              helper.make_node("GlobalAveragePool", ["a"], ["y"])]
    return _model(nodes, weights, 8, size, [1, channels, 1, 1])


def hardswish_mean(channels: int, size: int):
    """MobileNetV3's head: 1x1 conv, HardSwish, a mean over H and W with keepdims."""
    rng = np.random.default_rng(channels + 1)
    nodes, weights = [], []
    _conv(rng, "head", channels, 8, "x", "c", nodes, weights)
    weights.append(numpy_helper.from_array(np.array([2, 3], np.int64), "axes"))
    nodes += [helper.make_node("HardSwish", ["c"], ["h"]),
              helper.make_node("ReduceMean", ["h", "axes"], ["y"], keepdims=1)]
    return _model(nodes, weights, 8, size, [1, channels, 1, 1])


def squeeze_excite(channels: int, size: int):
    """A squeeze-excite block on a SiLU'd image: pool, 1x1 reduce + ReLU, 1x1 expand +
    sigmoid, the gate multiplied into the image."""
    rng = np.random.default_rng(channels + 2)
    nodes, weights = [], []
    _conv(rng, "pre", channels, 8, "x", "c", nodes, weights)
    nodes += [helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["a"]),
              helper.make_node("GlobalAveragePool", ["a"], ["p"])]
    _conv(rng, "fc1", 4, channels, "p", "f1", nodes, weights)
    nodes.append(helper.make_node("Relu", ["f1"], ["r"]))
    _conv(rng, "fc2", channels, 4, "r", "f2", nodes, weights)
    nodes += [helper.make_node("Sigmoid", ["f2"], ["g"]), helper.make_node("Mul", ["a", "g"], ["y"])]
    return _model(nodes, weights, 8, size, [1, channels, size, size])


CASES = [
    (silu_pool, 1280, 7), (silu_pool, 37, 13), (silu_pool, 19, 11),
    (hardswish_mean, 960, 7), (hardswish_mean, 53, 5),
    (squeeze_excite, 96, 13), (squeeze_excite, 43, 7),
]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("build,channels,size", CASES,
                         ids=[f"{build.__name__}-{c}x{s}" for build, c, s in CASES])
def test_pools_against_onnxruntime(build, channels, size, threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model = build(channels, size)
    x = np.random.default_rng(size).standard_normal((1, 8, size, size)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed op sequence falls back to scalar loops with a warning
        compiled = tilecraft.compile(model, cache=False, keep_ir=True)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-5)


def test_pool_vectors_end_in_channels(monkeypatch):
    """The compiled SiLU + pool computes its exp on vectors that end in channels, not in a
    unit dim (``vector<1x64x1x1xf32>``, which LLVM runs one lane at a time)."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    compiled = tilecraft.compile(silu_pool(1280, 7), cache=False, keep_ir=True)
    shapes = re.findall(r"math\.exp .* : vector<([0-9x]+)xf32>", compiled.ir("schedule"))
    assert shapes, "no vector exp in the scheduled SiLU"
    assert all(int(shape.split("x")[-1]) > 1 for shape in shapes), shapes


def test_loop_order_only_for_permuted_reductions():
    """The rule's table: permuted reductions reorder, the rest stay."""
    source = """
    func.func @f(%x: tensor<1x7x7x16xf32>, %y: tensor<13x37xf32>, %i: tensor<1x16xf32>, %j: tensor<13xf32>, %t: tensor<37x13xf32>)
        -> (tensor<1x16xf32>, tensor<13xf32>, tensor<37x13xf32>) {
      %pool = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, h, w, c)>, affine_map<(n, c, h, w) -> (n, c)>],
                              iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
          ins(%x : tensor<1x7x7x16xf32>) outs(%i : tensor<1x16xf32>) {
      ^bb0(%v: f32, %a: f32):
        %s = arith.addf %v, %a : f32
        linalg.yield %s : f32
      } -> tensor<1x16xf32>
      %rows = linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
                              iterator_types = ["parallel", "reduction"]}
          ins(%y : tensor<13x37xf32>) outs(%j : tensor<13xf32>) {
      ^bb0(%v: f32, %a: f32):
        %s = arith.addf %v, %a : f32
        linalg.yield %s : f32
      } -> tensor<13xf32>
      %tr = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i, j)>],
                            iterator_types = ["parallel", "parallel"]}
          ins(%y : tensor<13x37xf32>) outs(%t : tensor<37x13xf32>) {
      ^bb0(%v: f32, %o: f32):
        linalg.yield %v : f32
      } -> tensor<37x13xf32>
      return %pool, %rows, %tr : tensor<1x16xf32>, tensor<13xf32>, tensor<37x13xf32>
    }
    """
    with ir.Context():
        module = ir.Module.parse(source)
        generics = [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations
                    if op.operation.name == "linalg.generic"]
        assert [loop_order(op) for op in generics] == [[0, 2, 3, 1], None, None]


def test_zero_dimensional_generics_are_left_alone():
    """A 0-d generic (DynamicQuantizeLinear's scale and zero point) has no loop to reorder;
    it raised an IndexError on its empty iterator list."""
    source = """
    func.func @f(%x: tensor<f32>, %o: tensor<f32>) -> tensor<f32> {
      %r = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
          ins(%x : tensor<f32>) outs(%o : tensor<f32>) {
      ^bb0(%v: f32, %a: f32):
        %s = arith.mulf %v, %v : f32
        linalg.yield %s : f32
      } -> tensor<f32>
      return %r : tensor<f32>
    }
    """
    with ir.Context():
        module = ir.Module.parse(source)
        (generic,) = [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations
                      if op.operation.name == "linalg.generic"]
        assert loop_order(generic) is None
