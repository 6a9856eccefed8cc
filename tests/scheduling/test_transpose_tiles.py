"""Transposes get a square register tile (schedule/plan.py ``transposed_read_dim``): the
input is read as whole vectors along its contiguous dim and transposed in registers, where
a tile along the output's dim alone gathered each vector's elements from as many rows.
The sides are powers of two (an odd extent's last tile peeled), whose transposes become
butterfly shuffles (pipelines/vector/transpose_shuffles.py)."""

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from mlir import ir
from onnx import TensorProto, helper

import mlir_text as mt
import tilecraft
from pinned_targets import AVX2, AVX512, needs_avx512_host
from tilecraft.pipelines.vector.transpose_shuffles import butterfly_masks
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


@pytest.mark.parametrize("vector_bits, rows, columns, tiles, peeled", [
    (512, 768, 3072, (16, 16), ()),   # a square 16 x 16 tile on AVX-512
    (256, 768, 3072, (8, 8), ()),
    (512, 56, 64, (16, 8), ()),       # 56 output columns: 8 wide (a power of two divides), not 14
    (512, 28, 64, (16, 8), (1,)),     # 28 = 3 x 8 + 4: the remainder a power of two too
    (512, 256, 3199, (16, 16), (0,)),  # 3199 = 7 x 457: 199 tiles of 16 and a peeled 15
    (256, 256, 3199, (8, 8), (0,)),
    (512, 197, 768, (16, 16), (1,)),  # ViT's 197 tokens: 12 tiles and a peeled 5
    (512, 768, 3, (3, 16), ()),       # 3 channels: the whole extent
])
def test_a_transpose_tiles_both_loops(vector_bits, rows, columns, tiles, peeled):
    """Loops (d0, d1) of the output [columns, rows]: d1 spans the output's vectors, d0 reads
    the input's contiguous dim. No thread level splits a peeled loop."""
    (plan,) = _plans(_transpose_text(rows, columns), vector_bits)
    assert plan.register_tiles == tiles
    assert plan.peeled_loops == peeled


def test_a_byte_transpose_keeps_to_half_the_register_file():
    """i8 on AVX-512: 64 lanes, but 64 x 64 bytes would be 64 zmm registers; 64 x 16 is 16."""
    src, dst = "tensor<256x256xi8>", "tensor<256x256xi8>"
    text = (f"func.func @main(%x: {src}) -> {dst} {{\n  %e = tensor.empty() : {dst}\n"
            f"  %t = linalg.transpose ins(%x : {src}) outs(%e : {dst}) permutation = [1, 0]\n"
            f"  return %t : {dst}\n}}\n")
    (plan,) = _plans(text, 512)
    assert plan.register_tiles == (16, 64)


@pytest.mark.parametrize("rows", [2, 4, 8, 16, 32, 64])
@pytest.mark.parametrize("lanes", [2, 4, 8, 16, 32, 64])
def test_butterfly_stages_transpose(rows, lanes):
    """The shuffle stages, replayed on numpy rows, give the transpose: every row count and
    lane count a power of two, square or not."""
    x = np.arange(rows * lanes).reshape(rows, lanes)
    vectors = list(x)
    for _kind, entries in butterfly_masks(rows, lanes):
        vectors = [np.concatenate([vectors[a], vectors[b]])[mask] for a, b, mask in entries]
    np.testing.assert_array_equal(np.stack(vectors), x.T)


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


# Permutations of ranks 2-5 with odd extents (5, 7, 197: peeled remainders) and power-of-two
# ones, on each pinned target (AVX2: 8 x 8 tiles, AVX-512: 16 x 16), one and two threads.
PINNED_CASES = [
    ([1, 64, 56, 56], [0, 2, 3, 1]), ([1, 3, 224, 224], [0, 2, 3, 1]), ([1, 12, 64, 197], [0, 1, 3, 2]),
    ([1, 256, 3199], [0, 2, 1]), ([197, 768], [1, 0]), ([7, 28], [1, 0]), ([2, 6, 40, 5, 16], [0, 4, 2, 1, 3]),
    ([1, 28, 28, 64], [0, 3, 1, 2]), ([33, 65], [1, 0]),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("target", [AVX2, pytest.param(AVX512, marks=needs_avx512_host)])
def test_transposes_match_onnxruntime_on_pinned_targets(monkeypatch, target, threads):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", str(threads))
    rng = np.random.default_rng(1)
    for shape, perm in PINNED_CASES:
        model = _transpose_model(shape, perm)
        x = rng.standard_normal(shape).astype(np.float32)
        want = np.transpose(x, perm)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a schedule falling back to scalar loops
            got = tilecraft.compile(model, cache=False, target=target)(x)
        np.testing.assert_array_equal(got, want, err_msg=f"{shape} {perm}")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows, columns", [(197, 768), (768, 197), (256, 3199), (768, 3072)])
def test_the_tuning_space_holds_the_peeled_default(threads, rows, columns):
    """The generic space's default point is the default plan, peeled remainder and all, and
    its plans render: an odd extent's power-of-two tile is one of its knobs' values."""
    from tilecraft.pipelines.target import Target
    from tilecraft.schedule.plan import plan_default_schedule
    from tilecraft.schedule.space import task_nest
    from tilecraft.tuning import extract_tasks, space_for

    target = Target(mcpu=Target.parse(AVX512).mcpu, num_threads=threads)
    (task,) = extract_tasks(_transpose_text(rows, columns), target)
    space = space_for(task, target)
    default = space.validate(space.default())
    assert space.is_valid(default)
    expected = plan_default_schedule(task_nest(task), 3, vector_bits=512, num_threads=threads,
                                     caches=target.caches)
    assert space.plan(default, 3) == expected
