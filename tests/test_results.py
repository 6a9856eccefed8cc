"""Results own their memory: they outlive the module, never alias each other or an input,
and calling a kernel many times does not leak."""

import gc
import resource

import numpy as np
import pytest

import mlir_text as mt
import tilecraft

TWICE = """
func.func @twice(%a: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = tensor.empty() : tensor<16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%a : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<16xf32>
  return %r, %r : tensor<16xf32>, tensor<16xf32>
}
"""

ARGUMENT_AND_RESULT = """
func.func @pass_through(%a: tensor<3x5xf32>, %s: tensor<f32>) -> (tensor<3x5xf32>, tensor<f32>, tensor<3x5xf32>) {
  %e = tensor.empty() : tensor<3x5xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<3x5xf32>) outs(%e : tensor<3x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.addf %in, %in : f32
    linalg.yield %d : f32
  } -> tensor<3x5xf32>
  return %a, %s, %r : tensor<3x5xf32>, tensor<f32>, tensor<3x5xf32>
}
"""


def test_results_outlive_the_module(rand):
    module = tilecraft.compile(mt.matmul(16, 24, 8))
    a, b = rand((16, 8)), rand((8, 24))
    results = [module(a, b) for _ in range(3)]
    del module
    gc.collect()
    junk = [np.full((16, 24), 7.0, np.float32) for _ in range(50)]  # reuse freed memory
    for result in results:
        np.testing.assert_allclose(result, a @ b, rtol=1e-5)
    del junk


def test_views_of_a_result_keep_it_alive(rand):
    module = tilecraft.compile(mt.matmul(16, 24, 8))
    a, b = rand((16, 8)), rand((8, 24))
    column = module(a, b)[:, 3]
    gc.collect()
    np.testing.assert_allclose(column, (a @ b)[:, 3], rtol=1e-5)


def test_same_value_returned_twice_gives_independent_arrays(rand):
    module = tilecraft.compile(TWICE)
    a = rand((16,))
    first, second = module(a)
    np.testing.assert_array_equal(first, -a)
    np.testing.assert_array_equal(second, -a)
    assert not np.shares_memory(first, second)
    first[:] = 0
    np.testing.assert_array_equal(second, -a)
    del first
    gc.collect()
    np.testing.assert_array_equal(second, -a)


@pytest.mark.parametrize("with_deallocation", [True, False])
def test_results_aliasing_arguments_are_copied(rand, with_deallocation):
    """Returned arguments come back as copies. Without the deallocation pipeline (a custom
    pipeline) the compiled code returns the caller's own buffers, 0-d ones included: the
    runtime must copy them, never adopt (and later free) memory numpy owns."""
    pipeline = tilecraft.cpu_pipeline()
    if not with_deallocation:
        bufferize = pipeline.stage("bufferize").passes
        pipeline = pipeline.replace(
            "bufferize", [p for p in bufferize if p != "buffer-deallocation-pipeline"]
        )
    module = tilecraft.compile(ARGUMENT_AND_RESULT, pipeline=pipeline)
    a, s = rand((3, 5)), np.array(1.25, np.float32)
    for _ in range(3):
        same, scalar, doubled = module(a, s)
        np.testing.assert_array_equal(same, a)
        assert scalar.shape == () and scalar == 1.25
        np.testing.assert_allclose(doubled, 2 * a)
        assert not np.shares_memory(same, a) and not np.shares_memory(scalar, s)
        del same, scalar, doubled
        gc.collect()
    assert s == 1.25 and np.isfinite(a).all()


def test_empty_results(rand):
    module = tilecraft.compile(mt.dynamic_matmul())
    result = module(rand((0, 4)), rand((4, 3)))
    assert result.shape == (0, 3) and result.dtype == np.float32


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def test_many_calls_do_not_leak(rand):
    module = tilecraft.compile(mt.elementwise((64,), 2, ["%s = arith.addf %in0, %in1 : f32", "linalg.yield %s : f32"]))
    a, b = rand((64,)), rand((64,))
    for _ in range(500):  # warm up allocator pools and ctypes caches
        module(a, b)
    gc.collect()
    before = _rss_bytes()
    for _ in range(10_000):
        result = module(a, b)
    del result
    gc.collect()
    growth = _rss_bytes() - before
    assert growth < 20 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB over 10,000 calls"


def test_many_calls_with_large_results_do_not_leak(rand):
    """Freed results must go back to the allocator: 1 MiB each, 300 calls."""
    text = mt.elementwise((512, 512), 1, ["%n = arith.negf %in0 : f32", "linalg.yield %n : f32"])
    module = tilecraft.compile(text)
    x = rand((512, 512))
    module(x)
    gc.collect()
    before = _rss_bytes()
    for _ in range(300):
        module(x)
    gc.collect()
    growth = _rss_bytes() - before
    assert growth < 20 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB over 300 calls"
