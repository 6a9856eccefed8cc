"""Registers and spills per kernel from ``ptxas -v`` (targets/cuda/lowering.py
``kernel_resources``): the GPU-free check that a schedule's tiles fit the register file."""

from __future__ import annotations

import pytest
from cuda_testing import DEMO_CNN, matmul_mlir

import tilecraft
from tilecraft.errors import ToolchainError
from tilecraft.targets.cuda import find_ptxas
from tilecraft.targets.cuda.lowering import kernel_resources

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_kernel_of_a_matmul_and_the_digits_cnn_is_counted(arch):
    for source, shapes in ((matmul_mlir(256, 192, 128), None), (str(DEMO_CNN), {"input": [1, 1, 16, 16]})):
        module = tilecraft.compile(source, target=f"cuda -arch={arch}", shape_dict=shapes, keep_ir=False)
        for ptx in module.ptx_modules().values():
            entries = [line.split()[-1].rstrip("(") for line in ptx.splitlines()
                       if line.startswith(".visible .entry") or line.startswith(".entry")]
            counted = kernel_resources(ptx, arch)
            assert sorted(counted) == sorted(entries)
            for name, used in counted.items():
                assert 0 < used.registers <= 255, (name, used)
                # The default tiles were sized to stay in registers: no kernel spills.
                assert not used.spills, (name, used)


def test_the_matmul_tile_stages_its_operands_in_shared_memory():
    module = tilecraft.compile(matmul_mlir(256, 192, 128), target="cuda -arch=sm_90", keep_ir=False)
    counted = [used for ptx in module.ptx_modules().values()
               for used in kernel_resources(ptx, "sm_90").values()]
    assert any(used.shared_bytes > 0 for used in counted), counted


def test_ptx_that_ptxas_rejects_is_a_toolchain_error():
    with pytest.raises(ToolchainError, match="ptxas -arch=sm_90 failed"):
        kernel_resources(".version 8.0\n.target sm_90\n.entry broken( {\n", "sm_90")


def test_a_missing_ptxas_is_a_toolchain_error(monkeypatch):
    monkeypatch.setenv("TILECRAFT_PTXAS", "/nonexistent/ptxas")
    with pytest.raises(ToolchainError, match="ptxas not found"):
        kernel_resources(".version 8.0\n.target sm_90\n", "sm_90")


def test_a_causal_attention_mask_lowers_to_byte_buffers():
    """The GPT-2 block's causal mask is an i1 buffer: MLIR's store lowering asserts on sub-byte
    element types (the process aborted), so the CUDA pipeline stores bools as bytes, as the
    CPU pipeline does (tilecraft-widen-bool-memory)."""
    import sys
    from pathlib import Path

    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
    from zoo import ZOO

    build, inputs = ZOO["gpt2_block"]
    module = tilecraft.compile(torch.export.export(build(), inputs()), target="cuda -arch=sm_90", keep_ir=False)
    counted = [used for ptx in module.ptx_modules().values() for used in kernel_resources(ptx, "sm_90").values()]
    assert len(counted) == module.ptx().count(".entry") > 0


PROJECTION_INTO_HEADS = """
#x = affine_map<(m, n, h, k) -> (m, k)>
#w = affine_map<(m, n, h, k) -> (k, n, h)>
#y = affine_map<(m, n, h, k) -> (m, n, h)>
func.func @main(%x: tensor<128x768xf32>, %w: tensor<768x12x64xf32>) -> tensor<128x12x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<128x12x64xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<128x12x64xf32>) -> tensor<128x12x64xf32>
  %r = linalg.generic {indexing_maps = [#x, #w, #y],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<128x768xf32>, tensor<768x12x64xf32>) outs(%acc : tensor<128x12x64xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<128x12x64xf32>
  return %r : tensor<128x12x64xf32>
}
"""


def test_a_projection_into_heads_stages_within_static_shared_memory():
    """BERT-base's attention projection as the importer leaves it (x[128, 768] into
    [12 heads, 64]): the second n dim is not tiled, so a 16-deep K slice of the weight is
    16 x 12 x 64 floats, 52 KiB with the activation's slice, over the 48 KiB a block may
    declare (ptxas refused the model). The planner halves the slice until it fits."""
    import numpy as np
    from cuda_testing import cpu_replay

    module = tilecraft.compile(PROJECTION_INTO_HEADS, target="cuda -arch=sm_90", keep_ir=False)
    counted = [used for ptx in module.ptx_modules().values() for used in kernel_resources(ptx, "sm_90").values()]
    assert counted and all(0 < used.shared_bytes <= 48 * 1024 for used in counted), counted
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((128, 768), dtype=np.float32), rng.standard_normal((768, 12, 64), dtype=np.float32)
    np.testing.assert_allclose(cpu_replay(module, PROJECTION_INTO_HEADS)(x, w), np.einsum("mk,knh->mnh", x, w),
                               rtol=1e-4, atol=1e-3)


POOL_OVER_TWO_LOOPS = """
#x = affine_map<(n, c, h, w) -> (n, c, h, w)>
#y = affine_map<(n, c, h, w) -> (n, c)>
func.func @main(%x: tensor<1x32x112x112xf32>) -> tensor<1x32xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x32xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x32xf32>) -> tensor<1x32xf32>
  %r = linalg.generic {indexing_maps = [#x, #y],
                       iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%x : tensor<1x32x112x112xf32>) outs(%acc : tensor<1x32xf32>) {
  ^bb0(%a: f32, %c: f32):
    %s = arith.addf %c, %a : f32
    linalg.yield %s : f32
  } -> tensor<1x32xf32>
  return %r : tensor<1x32xf32>
}
"""


@pytest.mark.parametrize("height, width", [(112, 112), (1, 128)])
def test_a_sum_over_two_reduction_loops_compiles(height, width):
    """A global average pool over h and w as one generic (EfficientNet's first squeeze-and-
    excitation at 112x112; a unit second reduction loop, as in Llama's grouped-query attention
    scores): the block-per-row plan splits only the innermost reduction loop, and upstream's
    tile_reduction_using_forall aborted the process on the second one. Such an op keeps the
    thread-per-output plan; the sums are right."""
    import numpy as np
    from cuda_testing import cpu_replay

    source = POOL_OVER_TWO_LOOPS.replace("112x112", f"{height}x{width}")
    module = tilecraft.compile(source, target="cuda -arch=sm_90", keep_ir=False)
    assert all(not used.spills for ptx in module.ptx_modules().values()
               for used in kernel_resources(ptx, "sm_90").values())
    x = np.random.default_rng(0).standard_normal((1, 32, height, width), dtype=np.float32)
    np.testing.assert_allclose(cpu_replay(module, source)(x), x.sum(axis=(2, 3)), rtol=1e-4, atol=1e-3)
