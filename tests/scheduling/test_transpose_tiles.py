"""Transposes get a square register tile (schedule/plan.py ``transposed_read_dim``): the
input is read as whole vectors along its contiguous dim and transposed in registers, where
a tile along the output's dim alone gathered each vector's elements from as many rows."""

import numpy as np
import onnxruntime as ort
import pytest
from mlir import ir
from onnx import TensorProto, helper

import mlir_text as mt
import tilecraft
from tilecraft.schedule.apply import plan_module


def _transpose_model(shape, perm):
    out = [shape[p] for p in perm]
    graph = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=perm)], "t",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _transpose_text(rows: int, columns: int) -> str:
    src, dst = mt.tensor((rows, columns)), mt.tensor((columns, rows))
    return (f"func.func @main(%x: {src}) -> {dst} {{\n"
            f"  %e = tensor.empty() : {dst}\n"
            f"  %t = linalg.transpose ins(%x : {src}) outs(%e : {dst}) permutation = [1, 0]\n"
            f"  return %t : {dst}\n}}\n")


def _plans(text: str, vector_bits: int):
    with ir.Context():
        module = ir.Module.parse(text)
        return plan_module(module.operation, vector_bits=vector_bits, num_threads=1)


@pytest.mark.parametrize("vector_bits, rows, columns, tiles", [
    (512, 768, 3072, (16, 16)),   # a square 16 x 16 tile on AVX-512
    (256, 768, 3072, (8, 8)),
    (512, 56, 64, (16, 8)),       # 56 output columns: 8 wide (a power of two), not 14
    (512, 256, 3199, (7, 16)),    # 3199 = 7 x 457: a divisor where no power of two fits
])
def test_a_transpose_tiles_both_loops(vector_bits, rows, columns, tiles):
    """Loops (d0, d1) of the output [columns, rows]: d1 spans the output's vectors, d0 reads
    the input's contiguous dim."""
    (plan,) = _plans(_transpose_text(rows, columns), vector_bits)
    assert plan.register_tiles == tiles


def test_an_elementwise_op_without_transposed_reads_keeps_its_vector_tile():
    plan = _plans(mt.matmul_bias_relu(64, 64, 64), 512)[-1]
    assert plan.register_tiles[0] == 1  # one row, vectors along the contiguous columns


@pytest.mark.parametrize("shape, perm", [
    ([1, 3199, 256], [0, 2, 1]), ([1, 56, 56, 64], [0, 3, 1, 2]), ([1, 64, 56, 56], [0, 2, 3, 1]),
    ([197, 768], [1, 0]), ([1, 12, 64, 197], [0, 1, 3, 2]), ([3, 5, 7], [2, 0, 1]),
])
def test_transposes_match_onnxruntime(monkeypatch, shape, perm):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model = _transpose_model(shape, perm)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(tilecraft.compile(model, cache=False)(x), want)
