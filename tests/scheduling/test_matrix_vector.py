"""Matrix-vector products (issue #43: classifier heads, recurrent steps, M = 1 projections):
schedule/matmul_plan.py's ``plan_matrix_vector`` and the block-major weight it leads to
(pipelines/tensor/blocked_constants.py, a peeled last tile reading a prefix of the last
block). Planner choices on AVX2 and AVX-512 and one or two threads; odd and prime N and K
against numpy (B an argument: the row-major form) and ONNX Gemms with constant, plain and
transposed B against onnxruntime (the block-major form), on pinned targets, with any
schedule failure (a fallback to scalar loops) an error."""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from mlir import ir

import mlir_text as mt
import tilecraft
from pinned_targets import AVX2, AVX512, needs_avx512_host
from tilecraft.schedule.apply import plan_module

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import gemv as gemv_benchmark  # noqa: E402


def _plan(text: str, vector_bits: int, threads: int = 1):
    with ir.Context():
        module = ir.Module.parse(text)
        plans = plan_module(module.operation, vector_bits=vector_bits, num_threads=threads)
    return next(p for p in plans if p.reduction_tiles)


def _compile(source, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed sequence falls back with a warning
        return tilecraft.compile(source, cache=False, **options)


@pytest.mark.parametrize("vector_bits", [256, 512])
def test_one_thread_walks_all_of_k_per_tile(vector_bits):
    """MobileNetV2's classifier: tiles of 32 columns (two AVX-512 vectors, four AVX2 ones)
    and a peeled 8, no K block and no column blocks (the GotoBLAS plan made blocks of 250,
    each peeling 26 columns)."""
    plan = _plan(mt.matmul(1, 1000, 1280), vector_bits)
    assert plan.register_tiles == (1, 32, 0) and plan.reduction_tiles == (0, 0, 1)
    assert plan.peeled_loops == (1,)
    assert plan.thread_tiles is None and plan.cache_tiles is None


def test_tasks_off_the_tile_grid_block_k():
    """Two threads, tasks of 500 columns (no multiple of 32 divides 1000): tiles start off
    the grid, the weight stays row-major, and K blocks of 8 rows make the tiles read them
    contiguously."""
    plan = _plan(mt.matmul(1, 1000, 1280), 512, 2)
    assert plan.thread_tiles == (1, 500, 0) and plan.cache_tiles == (0, 0, 8)
    assert plan.register_tiles == (1, 32, 0) and plan.peeled_loops == (1,)


def test_tasks_of_whole_tiles_keep_k_whole():
    plan = _plan(mt.matmul(1, 4096, 1024), 512, 2)
    assert plan.thread_tiles == (1, 2048, 0) and plan.cache_tiles is None
    assert plan.register_tiles == (1, 32, 0) and not plan.peeled_loops


@pytest.mark.parametrize("m, rows", [(2, 2), (64, 8)])
def test_more_rows_keep_the_gotoblas_plan(m, rows):
    plan = _plan(mt.matmul(m, 1000, 1280), 512, 1)
    assert plan.register_tiles[:2] == (rows, 32) and plan.cache_tiles  # column blocks


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("n, k", [
    (1000, 1280),   # the classifier: 31 x 32 + 8
    (1001, 37),     # 7 x 11 x 13 columns, a prime K
    (37, 1009),     # 32 + 5; a prime K
    (1013, 1009),   # both prime: one task on two threads, 31 x 32 + 21
    (48, 40),       # two tasks of 24 on two threads: tiles of 12 (a tile of 16 would peel
                    # inside tasks but not over N when the thread level is dropped)
    (10, 7),        # within one vector
])
def test_odd_shapes_match_numpy(monkeypatch, rand, threads, n, k):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    a, b = rand((1, k)), rand((k, n))
    np.testing.assert_allclose(_compile(mt.matmul(1, n, k))(a, b), a @ b, rtol=1e-4, atol=1e-4)


def _gemm(k: int, n: int, trans_b: bool):
    """benchmarks/gemv.py's one-node Gemm, checked."""
    onnx = pytest.importorskip("onnx")
    model = gemv_benchmark.gemm_model(k, n, trans_b)
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("target", [AVX2, pytest.param(AVX512, marks=needs_avx512_host)])
@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("k, n, trans_b", [(1280, 1000, False), (1280, 1000, True), (37, 1001, True),
                                           (1009, 37, False), (256, 512, False)])
def test_constant_weights_match_onnxruntime(monkeypatch, target, threads, k, n, trans_b):
    """ONNX Gemm with bias, constant B as stored (k, n) and transposed (n, k): the weight is
    read block-major where the tiles sit on the grid, row-major otherwise."""
    ort = pytest.importorskip("onnxruntime")
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model = _gemm(k, n, trans_b)
    x = np.random.default_rng(7).standard_normal((1, k), dtype=np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    got = _compile(model, target=target)(x)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)


def test_the_classifier_weight_is_stored_block_major_by_tile(monkeypatch, check):
    """One thread: 1000 columns as 32 blocks of 32 (the last zero-padded), each tile reading
    its block down all 1280 rows and the peeled 8 columns the first 8 of block 31."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    compiled = _compile(_gemm(1280, 1000, True), target=AVX512, keep_ir=True)
    check(compiled.ir("bufferize"), """
CHECK: vector.transfer_read {{.*}} : memref<32x1280x32xf32>, vector<1x32xf32>
CHECK: vector.transfer_read %{{.*}}[%c31, %{{.*}}, %c0]{{.*}} : memref<32x1280x32xf32>, vector<1x8xf32>
CHECK-NOT: memref<1280x1000xf32>, vector
""")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n, k", [(1000, 1280), (1001, 37), (4096, 1024)])
def test_the_tuning_space_holds_the_plan(threads, n, k):
    """The matmul space of a matrix-vector task (schedule/space.py): its default point is
    valid and renders this plan, peeled columns and the row-major K block included."""
    from tilecraft.pipelines.target import Target
    from tilecraft.schedule.plan import plan_default_schedule
    from tilecraft.schedule.space import task_nest
    from tilecraft.tuning import extract_tasks, space_for

    target = Target(mcpu="znver4", num_threads=threads)
    (task,) = extract_tasks(mt.matmul(1, n, k), target)
    space = space_for(task, target)
    default = space.default()
    assert space.is_valid(default)
    expected = plan_default_schedule(task_nest(task), 3, vector_bits=512, num_threads=threads,
                                     caches=target.caches)
    assert space.plan(space.validate(default), 3) == expected
    assert expected.register_tiles[:2] == (1, 32)
