"""Tensor-core contractions (schedule option ``tensor-cores=f16``; targets/cuda/tensor_cores.py,
schedule.py's ``_plan_tensor_core``): which contractions get warp tiles and ``mma.sync``, the
option's refusals, the scheduled program's numbers (replayed on the CPU), ptxas on the
kernels, and the guard that no thread-level contraction is distributed over a warp. The
kernels' numbers on a GPU: benchmarks/cuda_device_check.py where one is lent."""

from __future__ import annotations

import re

import numpy as np
import pytest
from cuda_testing import cpu_replay, ptx_counts

import tilecraft
from tilecraft.errors import GpuScheduleError, TargetError
from tilecraft.pipelines.target import Target
from tilecraft.targets.cuda import cuda_pipeline, find_ptxas
from tilecraft.targets.cuda import tensor_cores
from tilecraft.targets.cuda.lowering import kernel_resources
from tilecraft.targets.cuda.schedule import config_from_options

MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
ASYNC_COPY = "cp.async.cg.shared.global"   # 16-byte pieces, past L1


def matmul(m: int, n: int, k: int, dtype: str = "f16", *, transpose_b: bool = False,
           batch: int = 0) -> str:
    """C[(b,) m, n] (f32) = A[(b,) m, k] @ B[(b,) k, n] (or B[n, k] with ``transpose_b``)."""
    lead = f"{batch}x" if batch else ""
    op = "linalg.batch_matmul" if batch else ("linalg.matmul_transpose_b" if transpose_b else "linalg.matmul")
    b_shape = f"{lead}{n}x{k}" if transpose_b else f"{lead}{k}x{n}"
    if transpose_b:
        op = "linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, " \
             "affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]"
    return f"""
func.func @matmul(%a: tensor<{lead}{m}x{k}x{dtype}>, %b: tensor<{b_shape}x{dtype}>) -> tensor<{lead}{m}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<{lead}{m}x{n}xf32>
  %c = linalg.fill ins(%zero : f32) outs(%empty : tensor<{lead}{m}x{n}xf32>) -> tensor<{lead}{m}x{n}xf32>
  %r = {op} ins(%a, %b : tensor<{lead}{m}x{k}x{dtype}>, tensor<{b_shape}x{dtype}>)
                     outs(%c : tensor<{lead}{m}x{n}xf32>) -> tensor<{lead}{m}x{n}xf32>
  return %r : tensor<{lead}{m}x{n}xf32>
}}
"""


def _compile(source: str, options: str = "tensor-cores=f16", arch: str = "sm_90"):
    target = f"cuda -arch={arch}"
    return tilecraft.compile(source, target=target,
                             pipeline=cuda_pipeline(target, schedule_options=options))


def _reference(a, b, transpose_b=False):
    b = np.swapaxes(b, -1, -2) if transpose_b else b
    return a.astype(np.float32) @ b.astype(np.float32)


def _k_loop(ptx: str) -> str:
    """The PTX of the kernel's K loop: from its label to the branch back to it."""
    loops = [body for label, body in re.findall(r"(\$L__BB\d+_\d+):\n(.*?)\n\s*@%p\d+ bra\s+\1;",
                                                ptx, re.DOTALL) if "mma.sync" in body]
    assert len(loops) == 1, loops
    return loops[0]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_an_f16_matmul_runs_on_tensor_cores(arch):
    module = _compile(matmul(256, 192, 128), arch=arch)
    ptx = module.ptx()
    # 128 x 64 block tiles (192 columns: 64, for a power of two of warps), 2 x 2 warps of
    # 64 x 32 (lanes on x, warps on y); per K slice of 32 and warp 4 x 4 x 2 mma.sync, fed by
    # 8 ldmatrix.x4 (A) and 8 ldmatrix.x2.trans (B, K-major).
    assert ".maxntid 32, 4, 1" in ptx
    loop = _k_loop(ptx)
    assert loop.count(MMA) == ptx.count(MMA) == 32
    assert loop.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 8
    assert loop.count("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16") == 8
    # The accumulators stay in registers across the K loop: no global access in it but the
    # copies of the next K slice, 16 bytes each with cp.async into the other of two shared
    # buffers (A 2 x 128 x 32, B 2 x 32 x 64 f16, rows padded by 16 bytes: 80 and 144).
    assert "ld.global" not in loop and "st.global" not in loop
    assert loop.count(ASYNC_COPY) == 6 and ptx.count(ASYNC_COPY) == 12
    assert loop.count("cp.async.commit_group") == 1 and "cp.async.wait_group \t1;" in loop
    assert ptx_counts(loop)["bar.sync"] == 2
    assert ".shared .align 16 .b8 __wg_matmul_kernel_0[20480];" in ptx   # 2 x 128 x 40 x 2 B
    assert ".shared .align 16 .b8 __wg_matmul_kernel_1[9216];" in ptx    # 2 x 32 x 72 x 2 B
    assert "fma.rn.f32" not in ptx


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_the_default_4096_kernel():
    """The issue's 4096^3 f16 GEMM with the default tensor-core tiles: 128 x 128 blocks of
    8 warps, 64 x 32 each (64 f32 accumulators a lane), K slices of 32 double-buffered. What
    the K loop does per step and warp: 32 mma.sync, 8 + 8 ldmatrix, 4 cp.async of 16 bytes a
    thread, one commit, one wait, two barriers, nothing else touching global memory; ptxas
    keeps it in at most 128 registers (two blocks of 256 threads an SM) without spilling."""
    module = _compile(matmul(4096, 4096, 4096))
    ptx = module.ptx()
    assert ".maxntid 32, 8, 1" in ptx
    loop = _k_loop(ptx)
    counts = ptx_counts(loop)
    assert loop.count(MMA) == 32 and counts["bar.sync"] == 2
    assert loop.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 8
    assert loop.count(ASYNC_COPY) == 4 and "ld.global" not in loop and "st.global" not in loop
    assert "ld.shared" not in loop and "st.shared" not in loop and "local" not in ptx
    for used in kernel_resources(ptx, "sm_90").values():
        assert not used.spills and used.stack_bytes == 0, used
        assert used.registers <= 128, used
        assert used.shared_bytes == 2 * (128 * 40 + 32 * 136) * 2, used


def test_one_stage_copies_through_registers_16_bytes_at_a_time():
    """mma-stages=1: the K slices are copied with 16-byte loads and stores by all the block's
    threads (8 f16 each), then computed on, with no cp.async."""
    ptx = _compile(matmul(256, 192, 128), options="tensor-cores=f16 mma-stages=1").ptx()
    loop = _k_loop(ptx)
    assert "cp.async" not in ptx
    assert loop.count("ld.global.v4.b32") == loop.count("st.shared.v4.b32") == 6
    assert "ld.global.v2" not in loop and "st.global" not in loop
    assert loop.count(MMA) == 32


@pytest.mark.parametrize("source, shapes, transpose_b", [
    (matmul(256, 192, 128), ((256, 128), (128, 192)), False),
    (matmul(64, 64, 64, transpose_b=True), ((64, 64), (64, 64)), True),
    (matmul(32, 48, 32, batch=3), ((3, 32, 32), (3, 32, 48)), False),
])
def test_the_scheduled_program_computes_the_product(source, shapes, transpose_b):
    """The warp tiles, the staging and the 16 x 8 x 16 unrolled contractions, compiled for the
    CPU (the lane distribution of mma.sync is upstream's; a GPU checks it)."""
    module = _compile(source)
    assert "nvgpu.mma.sync" in module.ir("map")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in shapes)
    np.testing.assert_allclose(cpu_replay(module, source)(a, b), _reference(a, b, transpose_b),
                               rtol=1e-4, atol=1e-3)


def test_a_k_major_b_is_read_without_transposing():
    ptx = _compile(matmul(64, 64, 64, transpose_b=True)).ptx()
    assert MMA in ptx
    assert "ldmatrix.sync.aligned.m8n8.x2.shared.b16" in ptx and ".trans" not in ptx


@pytest.mark.parametrize("source, why", [
    (matmul(256, 192, 128, "f32"), "f32 inputs (tf32 only when asked)"),
    (matmul(40, 64, 64), "M not a multiple of 16"),
    (matmul(64, 64, 40), "K not a multiple of 16"),
])
def test_other_contractions_keep_the_fma_schedule(source, why):
    module = _compile(source)
    ptx = module.ptx()
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx, why
    assert "fma.rn.f32" in ptx or "mul.rn.f32" in ptx, why   # the FMA units


def test_off_by_default():
    ptx = _compile(matmul(256, 192, 128), options="").ptx()
    assert "mma.sync" not in ptx


def test_the_option_is_checked():
    assert config_from_options({"tensor-cores": "f16", "arch": "sm_80"}).tensor_cores == "f16"
    with pytest.raises(GpuScheduleError, match="must be one of f16, tf32, got 'fp8'"):
        config_from_options({"tensor-cores": "fp8"})
    with pytest.raises(GpuScheduleError, match="tensor-cores=bf16 is not supported yet"):
        config_from_options({"tensor-cores": "bf16"})
    assert config_from_options({"mma-stages": "1", "warp-m": "32"}).mma_stages == 1
    with pytest.raises(GpuScheduleError, match="mma-stages must be 1 or 2, got '3'"):
        config_from_options({"mma-stages": "3"})
    with pytest.raises(GpuScheduleError, match="needs sm_80 or later .* the target is sm_75"):
        _compile(matmul(64, 64, 64), arch="sm_75")


def test_a_contraction_left_unconverted_is_an_error(monkeypatch):
    """The guard: if the conversion leaves a warp's contraction (here: a pass that converts
    nothing), compiling fails instead of running it per lane."""
    monkeypatch.setattr(tensor_cores, "_CONVERT", "builtin.module(canonicalize)")
    with pytest.raises(GpuScheduleError, match="not converted to mma.sync"):
        _compile(matmul(64, 64, 64))


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_accepts_the_kernels_without_spills(arch):
    module = _compile(matmul(256, 192, 128), arch=arch)
    for ptx in module.ptx_modules().values():
        for name, used in kernel_resources(ptx, arch).items():
            assert not used.spills, (name, used)
            assert used.shared_bytes >= 4096, (name, used)


def test_thread_level_kernels_beside_tensor_cores_are_left_alone():
    """An f16 matmul on tensor cores beside an f32 one on the FMA units: the conversion sees
    the tensor-core launch alone (upstream's pass aborted the process on the f32 kernel's
    register tiles when it saw the whole function), and the f32 kernel keeps its FMAs."""
    source = """
func.func @main(%a: tensor<128x64xf16>, %b: tensor<64x64xf16>, %x: tensor<128x64xf32>,
                %y: tensor<64x64xf32>) -> (tensor<128x64xf32>, tensor<128x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<128x64xf32>
  %c1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<128x64xf32>) -> tensor<128x64xf32>
  %r = linalg.matmul ins(%a, %b : tensor<128x64xf16>, tensor<64x64xf16>)
                     outs(%c1 : tensor<128x64xf32>) -> tensor<128x64xf32>
  %e2 = tensor.empty() : tensor<128x64xf32>
  %c2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<128x64xf32>) -> tensor<128x64xf32>
  %s = linalg.matmul ins(%x, %y : tensor<128x64xf32>, tensor<64x64xf32>)
                     outs(%c2 : tensor<128x64xf32>) -> tensor<128x64xf32>
  return %r, %s : tensor<128x64xf32>, tensor<128x64xf32>
}
"""
    module = _compile(source)
    ptx = module.ptx()
    assert ptx.count(MMA) == 32 and ptx.count("fma.rn.f32") >= 64
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((128, 64)).astype(np.float16), rng.standard_normal((64, 64)).astype(np.float16)
    x, y = rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
    r, s = cpu_replay(module, source)(a, b, x, y)
    np.testing.assert_allclose(r, _reference(a, b), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(s, x @ y, rtol=1e-4, atol=1e-3)


def test_tf32_only_when_asked():
    """tensor-cores=tf32: f32 contractions on tensor cores (m16n8k8, the inputs rounded to
    TF32 by the hardware); f16 ones then stay on the FMA units, and without it f32 does."""
    source = matmul(256, 192, 128, "f32")
    module = _compile(source, options="tensor-cores=tf32")
    ptx = module.ptx()
    assert ptx.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 32   # K slices of 16
    assert "tf32Enabled" in module.ir("map")
    assert "mma.sync" not in _compile(matmul(64, 64, 64), options="tensor-cores=tf32").ptx()
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((256, 128)).astype(np.float32), rng.standard_normal((128, 192)).astype(np.float32)
    np.testing.assert_allclose(cpu_replay(module, source)(a, b), a @ b, rtol=1e-4, atol=1e-3)


def test_the_target_option():
    """``cuda -arch=sm_90 -tensor-cores=f16``: the same schedule without a custom pipeline;
    a bad value or an arch without mma.sync is a TargetError when the target is parsed."""
    module = tilecraft.compile(matmul(64, 64, 64), target="cuda -arch=sm_90 -tensor-cores=f16")
    assert MMA in module.ptx()
    assert Target.parse("cuda -tensor-cores=tf32").tensor_cores == "tf32"
    assert str(Target.parse("cuda -arch=sm_90 -tensor-cores=f16")) == "cuda -arch=sm_90 -tensor-cores=f16"
    for spec, message in (("cuda -arch=sm_75 -tensor-cores=f16", "needs sm_80 or later"),
                          ("cuda -tensor-cores=bf16", "bf16 is not supported yet"),
                          ("cuda -tensor-cores=fp8", "must be one of f16, tf32, got 'fp8'"),
                          ("cuda -tensor-cores", "bad target option")):
        with pytest.raises(TargetError, match=message):
            Target.parse(spec)


def test_an_onnx_f16_matmul_gets_tensor_cores():
    """The ONNX frontend accumulates an f16 MatMul in f32 (then rounds to f16): that
    contraction is the tensor cores' form; the rounding stays an elementwise kernel."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT16, [64, 128]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT16, [128, 64])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT16, [64, 64])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    module = tilecraft.compile(model, target="cuda -arch=sm_90 -tensor-cores=f16")
    assert module.ptx().count(MMA) == 32
    assert "mma.sync" not in tilecraft.compile(model, target="cuda -arch=sm_90").ptx()


def test_two_batch_loops_keep_the_fma_schedule():
    """Attention's [batch, heads, m, k] x [batch, heads, k, n]: one batch loop maps to the
    blocks' z, two do not, so it stays on the FMA units instead of failing to compile."""
    a, b, c = "tensor<2x4x32x32xf16>", "tensor<2x4x32x32xf16>", "tensor<2x4x32x32xf32>"
    maps = ("affine_map<(p, q, m, n, k) -> (p, q, m, k)>, affine_map<(p, q, m, n, k) -> (p, q, k, n)>, "
            "affine_map<(p, q, m, n, k) -> (p, q, m, n)>")
    source = f"""
func.func @main(%a: {a}, %b: {b}) -> {c} {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {c}
  %init = linalg.fill ins(%zero : f32) outs(%e : {c}) -> {c}
  %r = linalg.generic {{indexing_maps = [{maps}],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}}
      ins(%a, %b : {a}, {b}) outs(%init : {c}) {{
  ^bb0(%x: f16, %y: f16, %acc: f32):
    %xf = arith.extf %x : f16 to f32
    %yf = arith.extf %y : f16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }} -> {c}
  return %r : {c}
}}
"""
    assert "mma.sync" not in _compile(source).ptx()


# ---- the kernel rewrites on their own (IR in, IR out) -------------------------------------

_FRAGMENT_LOOP = """
func.func @f(%c: memref<64x64xf32>, %other: memref<64x64xf32>, %i: index, %j: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant dense<1.0> : vector<16x8xf32>
  scf.for %k = %c0 to %c8 step %c1 {
    %acc = vector.transfer_read %c[%i, %j], %zero {in_bounds = [true, true]} : memref<64x64xf32>, vector<16x8xf32>
    %sum = arith.addf %acc, %one : vector<16x8xf32>
    vector.transfer_write %sum, %c[%i, %j] {in_bounds = [true, true]} : vector<16x8xf32>, memref<64x64xf32>
    EXTRA
  }
  return
}
"""


def _parse(text: str):
    from mlir import ir
    context = ir.Context()
    return context, ir.Module.parse(text, context)


@pytest.mark.parametrize("extra, hoisted", [
    ("", 1),
    # Another access of the buffer in the loop: the fragment must go through memory.
    ("%x = memref.load %c[%c0, %c0] : memref<64x64xf32>", 0),
    # An access of another buffer does not matter.
    ("%x = memref.load %other[%c0, %c0] : memref<64x64xf32>", 1),
])
def test_accumulator_fragments_ride_in_registers_only_when_alone(extra, hoisted):
    from tilecraft.pipelines.ir_queries import ops_where

    context, module = _parse(_FRAGMENT_LOOP.replace("EXTRA", extra))
    with context:
        loop = ops_where(module.operation, lambda op: op.name == "scf.for")[0]
        assert tensor_cores.hoist_accumulator_fragments(loop) == hoisted
        module.operation.verify()
        text = str(module)
    if hoisted:
        # read before the loop, the value carried, written after it
        assert re.search(r"vector.transfer_read .*\n\s*%\S+ = scf.for .* iter_args", text)
        assert re.search(r"scf.yield .*\n\s*}\n\s*vector.transfer_write", text)
    else:
        assert "iter_args" not in text


@pytest.mark.parametrize("shape, use, padded", [
    ("32x128xf16", "read", "32x136xf16"),    # 256-byte rows: 8-way ldmatrix conflicts
    ("128x32xf16", "read", "128x40xf16"),    # 64-byte rows: 4-way
    ("128x16xf32", "read", "128x20xf32"),
    ("64x8xf16", "read", None),              # 16-byte rows: conflict-free already
    ("32x128xf16", "subview", None),         # a view of it would keep the old strides
])
def test_shared_rows_are_padded_against_bank_conflicts(shape, use, padded):
    element = shape.split("x")[-1]
    tile = f"memref<{shape}, #gpu.address_space<workgroup>>"
    body = (f"%v = vector.transfer_read %t[%c0, %c0], %pad {{in_bounds = [true, true]}} : {tile}, vector<8x8x{element}>"
            if use == "read" else
            f"%v = memref.subview %t[0, 0] [8, 8] [1, 1] : {tile} to memref<8x8x{element}, strided<[{shape.split('x')[1]}, 1]>, #gpu.address_space<workgroup>>")
    context, module = _parse(f"""
func.func @f() {{
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : {element}
  %t = memref.alloc() : {tile}
  {body}
  return
}}""")
    with context:
        assert tensor_cores.pad_shared_rows(module.operation) == (1 if padded else 0)
        module.operation.verify()
    assert f"memref<{padded or shape}, #gpu.address_space<workgroup>>" in str(module)


def test_only_the_barrier_between_two_staging_copies_goes():
    tile = "memref<16x16xf16, #gpu.address_space<workgroup>>"
    copy = ("%{n} = vector.transfer_read %g[%c0, %c0], %pad {{in_bounds = [true, true]}} : memref<64x64xf16>, vector<16x16xf16>\n"
            "  vector.transfer_write %{n}, %{t}[%c0, %c0] {{in_bounds = [true, true]}} : vector<16x16xf16>, " + tile)
    context, module = _parse(f"""
func.func @f(%g: memref<64x64xf16>) {{
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f16
  %a = memref.alloc() : {tile}
  %b = memref.alloc() : {tile}
  {copy.format(n="x", t="a")}
  gpu.barrier
  {copy.format(n="y", t="b")}
  gpu.barrier
  %r = vector.transfer_read %a[%c0, %c0], %pad {{in_bounds = [true, true]}} : {tile}, vector<16x16xf16>
  vector.transfer_write %r, %b[%c0, %c0] {{in_bounds = [true, true]}} : vector<16x16xf16>, {tile}
  gpu.barrier
  {copy.format(n="z", t="b")}
  return
}}""")
    with context:
        # The first barrier only separates two fills of different tiles; the second orders
        # the fills before a read of shared memory, the third that read before a refill.
        assert tensor_cores.drop_barriers_between_copies(module.operation) == 1
        assert tensor_cores.drop_barriers_between_copies(module.operation) == 0
    assert str(module).count("gpu.barrier") == 2


def test_a_guarded_copy_keeps_the_single_buffer():
    """48 x 24 x 48: B's 16 x 24 slice has 48 pieces of 16 bytes for 32 threads, so its copy
    sits behind a thread guard, which the double buffering does not take: the loop keeps
    its plain copies (and barriers) and still computes on tensor cores."""
    source = matmul(48, 24, 48)
    module = _compile(source)
    ptx = module.ptx()
    assert "cp.async" not in ptx
    assert ptx.count(MMA) == 9 and "st.shared" in _k_loop(ptx)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((48, 48)).astype(np.float16), rng.standard_normal((48, 24)).astype(np.float16)
    np.testing.assert_allclose(cpu_replay(module, source)(a, b), _reference(a, b), rtol=1e-4, atol=1e-3)
