"""Each schedule primitive on a small op: the loops it makes (FileCheck on ``sch.ir()``), the
transform ops it emits (FileCheck on the script), and the numbers (against numpy)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mlir import ir

import tilecraft.scheduling as tc
from te_programs import chain, check_chain, check_matmul, matmul

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_split_reorder_vectorize(check, arrays):
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    i, j, k = sch.get_loops(C)
    io, ii = sch.split(i, factor=16)
    jo, ji = sch.split(j, nparts=2)
    ko, ki = sch.split(k, factors=[None, 4])
    sch.reorder(io, jo, ko, ii, ki, ji)
    sch.vectorize(ji)
    assert [l.extent for l in sch.get_loops(C)] == [4, 2, 16, 16, 4, 32]
    check(sch.script, """
CHECK: %[[C:[^ ,]+]] = transform.structured.match attributes{tilecraft.block = "C"}
CHECK: %[[T:[^ ,]+]], {{.*}} = transform.structured.tile_using_for %[[C]] tile_sizes [16, 32, 4]
CHECK: %[[T2:[^ ,]+]], {{.*}} = transform.structured.tile_using_for %[[T]] tile_sizes [1, 0, 1] interchange = [0, 2, 1]
CHECK: transform.structured.vectorize %[[T2]]
""")
    check(sch.ir(), """
CHECK: scf.for %{{.*}} = %c0 to %c64 step %c16
CHECK: scf.for %{{.*}} = %c0 to %c64 step %c32
CHECK: scf.for %{{.*}} = %c0 to %c64 step %c4
CHECK: scf.for %{{.*}} = %c0 to %c16 step %c1
CHECK: vector.contract {{.*}} : vector<1x1xf32>, vector<1x32xf32> into vector<1x32xf32>
CHECK-NOT: linalg.generic
""")
    check_matmul(sch, arrays)


def test_tile_and_parallel_fused_loop(check, arrays):
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    i, j, k = sch.get_loops(C)
    io, jo, ii, ji = sch.tile(i, j, 16, 32)
    assert [l.name for l in sch.get_loops(C)] == ["i_0", "j_0", "i_1", "j_1", "k"]
    fused = sch.fuse(io, jo)
    sch.parallel(fused)
    check(sch.ir(), """
CHECK: scf.forall (%{{.*}}, %{{.*}}) in (4, 2) shared_outs
CHECK: linalg.generic {{.*}} ins({{.*}} : tensor<16x64xf32>, tensor<64x32xf32>) outs({{.*}} : tensor<16x32xf32>)
""")
    check_matmul(sch, arrays)


def test_fuse_serial_loops_coalesces(check, arrays):
    sch = tc.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    fused = sch.fuse(i, j)
    assert fused.extent == 64 * 64
    check(sch.script, "CHECK: transform.loop.coalesce")
    check(sch.ir(), """
CHECK: scf.for %[[IV:.*]] = %c0 to %c4096 step %c1
CHECK: affine.delinearize_index %[[IV]] into (64, 64)
CHECK-NOT: scf.for
""")
    check_matmul(sch, arrays)


def test_unroll(check, arrays):
    sch = tc.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    ko, ki = sch.split(k, factor=4)
    sch.reorder(i, ko, ki, j)
    sch.vectorize(j)
    sch.unroll(ki)
    check(sch.script, "CHECK: transform.loop.unroll %{{.*}} {factor = 4}")
    check(sch.ir(), """
CHECK: scf.for %{{.*}} = %c0 to %c64 step %c4
CHECK-NOT: scf.for
CHECK-COUNT-4: vector.contract
""")
    check_matmul(sch, arrays)


def test_compute_at(check, arrays):
    sch = tc.Schedule(chain())
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, jo, ii, ji = sch.tile(i, j, 16, 16)
    R = sch.get_block("R")
    sch.compute_at(R, io)
    ri, rj = sch.get_loops(R)
    assert (ri.extent, rj.extent) == (16, 64)
    sch.vectorize(rj)
    check(sch.script, "CHECK: transform.structured.fuse_into_containing_op")
    check(sch.ir(), """
CHECK: scf.for %[[I:.*]] = %c0 to %c64 step %c16
CHECK: scf.for {{.*}} = %c0 to %c16 step %c1
CHECK: arith.maximumf {{.*}} : vector<1x64xf32>
CHECK: scf.for {{.*}} = %c0 to %c64 step %c16
CHECK: tilecraft.block = "C"
""")
    check_chain(sch, arrays)


def test_reverse_compute_at(check, arrays):
    sch = tc.Schedule(chain())
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, jo, ii, ji = sch.tile(i, j, 16, 16)
    D = sch.get_block("D")
    sch.reverse_compute_at(D, jo)
    di, dj = sch.get_loops(D)
    sch.vectorize(dj)
    check(sch.ir(), """
CHECK: scf.for {{.*}} step %c16
CHECK: scf.for {{.*}} step %c16
CHECK: linalg.generic {{.*}} outs({{.*}} : tensor<16x16xf32>) attrs = {tilecraft.block = "C"
CHECK: scf.for
CHECK: arith.mulf {{.*}} : vector<1x16xf32>
CHECK-NOT: tilecraft.block = "D"
""")
    check_chain(sch, arrays)


def test_compute_inline(check, arrays):
    sch = tc.Schedule(chain())
    sch.compute_inline(sch.get_block("R"))
    with pytest.raises(tc.ScheduleError, match="inlined into C"):
        sch.get_loops(sch._state.blocks[0])
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(i, k, j)
    sch.vectorize(j)
    check(sch.ir(), """
CHECK-NOT: tilecraft.block = "R"
CHECK: scf.for
CHECK: scf.for
CHECK: arith.maximumf {{.*}} : vector<1x1xf32>
CHECK: vector.contract
""")
    check_chain(sch, arrays)


def test_cache_write_at_a_tile(check, arrays):
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    CC = sch.cache_write(C, "local")
    assert CC.name == "C.local"
    i, j = sch.get_loops(C)
    io, jo, ii, ji = sch.tile(i, j, 32, 32)
    sch.compute_at(CC, jo)
    ic, jc, kc = sch.get_loops(CC)
    assert [l.extent for l in (ic, jc, kc)] == [32, 32, 64]
    ko, ki = sch.split(kc, factor=4)
    sch.reorder(ko, ic, ki, jc)
    sch.vectorize(jc)
    check(sch.script, """
CHECK: transform.structured.pad {{.*}} nofold_flags = [0, 0, 1], copy_back_op = "linalg.copy"
""")
    check(sch.ir(), """
CHECK: scf.for {{.*}} step %c32
CHECK: scf.for {{.*}} step %c32
CHECK: %[[CACHE:.*]] = tensor.pad {{.*}} nofold
CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[CACHE]])
CHECK: linalg.copy {tilecraft.block = "C"} ins(%{{.*}} : tensor<32x32xf32>)
""")
    check_matmul(sch, arrays)


@pytest.mark.parametrize("outer_parallel", [False, True])
def test_decompose_reduction(check, arrays, outer_parallel):
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    i, j, k = sch.get_loops(C)
    io, jo, ii, ji = sch.tile(i, j, 32, 32)
    ko, ki = sch.split(k, factor=4)
    sch.reorder(io, jo, ko, ii, ki, ji)
    if outer_parallel:
        sch.parallel(io)
    init = sch.decompose_reduction(C, ko)
    assert init.name == "C.init"
    assert [l.extent for l in sch.get_loops(init)] == [32, 32]
    sch.vectorize(sch.get_loops(init)[-1])
    check(sch.ir(), ("CHECK: scf.forall" if outer_parallel else "CHECK: scf.for") + """
CHECK: scf.for {{.*}} step %c32
CHECK: vector.transfer_write %cst{{.*}} : vector<1x32xf32>
CHECK: scf.for {{.*}} step %c4
""")
    check_matmul(sch, arrays)


def test_transform_layout_packs_an_operand(check, arrays):
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    packed = sch.transform_layout(C, "B", lambda k, n: (n // 16, k, n % 16), name="packedB")
    m, no, k, ni = sch.get_loops(C)
    assert [l.extent for l in (m, no, k, ni)] == [64, 4, 64, 16]
    sch.vectorize(ni)
    bn, kk, ln = sch.get_loops(packed)
    sch.parallel(bn)
    sch.vectorize(ln)
    check(sch.script, """
CHECK: transform.structured.pack {{.*}} packed_sizes = [0, 16, 0]
CHECK: transform.structured.pack_transpose {{.*}} outer_perm = [1, 0]
CHECK: transform.structured.lower_pack
""")
    check(sch.ir(), """
CHECK: scf.forall (%{{.*}}) in (4) {{.*}} -> (tensor<4x64x16xf32>)
CHECK: vector.contract {{.*}}iterator_types = ["parallel", "parallel", "reduction", "parallel"]
CHECK: tensor.collapse_shape
CHECK: linalg.copy ins(%collapsed
""")
    check_matmul(sch, arrays)


def test_split_with_padding_masks_the_last_tile(check):
    A, B = tc.placeholder((1000,), name="A"), tc.placeholder((1000,), name="B")
    sch = tc.Schedule(tc.compute((1000,), lambda i: A[i] + B[i], name="C"))
    (i,) = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, factor=64, pad=True)
    assert io.extent == 16
    sch.vectorize(ii)
    check(sch.ir(), """
CHECK: affine.min
CHECK: vector.create_mask
CHECK: arith.addf {{.*}} : vector<64xf32>
""")
    a, b = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
    np.testing.assert_array_equal(tc.build(sch)(a, b), a + b)


def test_named_ops_from_a_frontend_module(check):
    sch = tc.Schedule(EXAMPLES / "matmul_bias_relu.mlir")
    assert [b.name for b in sch.get_blocks()] == ["matmul.init", "matmul", "generic"]
    mm = sch.get_block("linalg.matmul")
    i, j, k = sch.get_loops(mm)
    assert [l.name for l in (i, j, k)] == ["i0", "i1", "k0"]
    io, jo, ii, ji = sch.tile(i, j, 64, 64)
    sch.parallel(io)
    sch.reorder(io, jo, k, ii, ji)
    sch.vectorize(ji)
    g = sch.get_block("generic")
    sch.reverse_compute_at(g, jo)
    sch.vectorize(sch.get_loops(g)[-1])
    check(sch.ir(), """
CHECK: scf.forall
CHECK: scf.for
CHECK: vector.contract {{.*}} into vector<1x64xf32>
CHECK: arith.maximumf {{.*}} : vector<1x64xf32>
""")
    rng = np.random.default_rng(0)
    x, w, b = (rng.random(s, dtype=np.float32) - 0.5 for s in ((512, 512), (512, 512), (512,)))
    np.testing.assert_allclose(tc.build(sch)(x=x, w=w, b=b), np.maximum(x @ w + b, 0), rtol=1e-4, atol=1e-4)


def test_handles_stay_valid_and_the_trace_records_calls():
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    i, j, k = sch.get_loops(C)
    ko, ki = sch.split(k, factor=8)
    sch.parallel(i)          # i and j were not touched by the split: still valid
    sch.reorder(i, ko, j, ki)
    assert sch.get_loops(C) == [i, ko, j, ki]
    assert sch.history == [
        'b0 = sch.get_block("C")',
        "l1, l2, l3 = sch.get_loops(b0)",
        "l4, l5 = sch.split(l3, factor=8)",
        "sch.parallel(l1)",
        "sch.reorder(l1, l4, l2, l5)",
        "l1, l4, l2, l5 = sch.get_loops(b0)",
    ]
    assert sch.script.startswith("// tilecraft schedule of @main\n// b0 = sch.get_block(\"C\")")
    assert "transform.named_sequence @__transform_main" in sch.script


def test_save_replays_with_tilecraft_opt(tmp_path):
    sch = tc.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, jo, ii, ji = sch.tile(i, j, 32, 32)
    sch.reorder(io, jo, k, ii, ji)
    sch.parallel(io)
    sch.vectorize(ji)
    path = sch.save(tmp_path / "step.mlir")
    opt = Path(sys.executable).with_name("tilecraft-opt")
    replay = subprocess.run([str(opt), str(path), "--transform-interpreter"], capture_output=True, text=True)
    assert replay.returncode == 0, replay.stderr
    with ir.Context():
        module = ir.Module.parse(replay.stdout)
        functions = [op for op in module.body.operations if op.operation.name == "func.func"]
        assert str(functions[0]) == sch.ir()


def test_vector_add_example_runs():
    result = subprocess.run([sys.executable, str(EXAMPLES / "vector_add_schedule.py"), "--n", "4096"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "vector add: OK" in result.stdout
    assert "vector_add.tar, loaded: <Package" in result.stdout and ": OK" in result.stdout.split("loaded:")[1]


def test_schedule_accepts_modules_funcs_and_text():
    module = tc.create_func(matmul(8, 8, 8), name="gemm")
    text = str(module)
    function = module.body.operations[0]
    for source in (module, function, text):
        sch = tc.Schedule(source)
        assert sch.func_name == "gemm"
        assert [l.name for l in sch.get_loops(sch.get_block("C"))] == ["i", "j", "k"]
        sch.split(sch.get_loops(sch.get_block("C"))[0], factor=2)
    assert str(module) == text  # the source is never modified


def test_named_convolution_is_decomposed_and_vectorized(check):
    text = """
    func.func @conv(%x: tensor<1x10x10x4xf32>, %w: tensor<3x3x4x16xf32>) -> tensor<1x8x8x16xf32> {
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<1x8x8x16xf32>
      %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32>
      %y = linalg.conv_2d_nhwc_hwcf ins(%x, %w : tensor<1x10x10x4xf32>, tensor<3x3x4x16xf32>)
             outs(%init : tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32>
      return %y : tensor<1x8x8x16xf32>
    }"""
    sch = tc.Schedule(text)
    conv = sch.get_block("linalg.conv_2d_nhwc_hwcf")
    n, oh, ow, f, kh, kw, ci = sch.get_loops(conv)
    sch.parallel(oh)
    sch.reorder(n, oh, kh, kw, ci, ow, f)
    sch.vectorize(f)
    check(sch.script, "CHECK: transform.structured.decompose\nCHECK-NEXT: transform.structured.vectorize")
    check(sch.ir(), "CHECK: scf.forall\nCHECK: vector.contract {{.*}} into vector<1x1x16xf32>")
    rng = np.random.default_rng(0)
    x, w = rng.random((1, 10, 10, 4), dtype=np.float32), rng.random((3, 3, 4, 16), dtype=np.float32)
    expected = sum(np.einsum("nhwc,cf->nhwf", x[:, a:a + 8, b:b + 8, :], w[a, b]) for a in range(3) for b in range(3))
    np.testing.assert_allclose(tc.build(sch)(x, w), expected, rtol=1e-4, atol=1e-4)


MM_RELU = """
func.func @mm_relu(%A: tensor<32x32xf32>, %B: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<32x32xf32>) -> tensor<32x32xf32>
  %y = linalg.matmul ins(%A, %B : tensor<32x32xf32>, tensor<32x32xf32>)
                     outs(%init : tensor<32x32xf32>) -> tensor<32x32xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<32x32xf32>) outs(%e : tensor<32x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  return %c : tensor<32x32xf32>
}
"""


@pytest.mark.parametrize("reverse_at, order", [("j0", "i j0 k j1"), ("i", "i j0 k j1"), ("j0", "i j0 j1 k")])
def test_decompose_reduction_after_reverse_compute_at(check, arrays, reverse_at, order):
    """TensorIR blitz order: the init joins the consumer's loops, right before the k loop."""
    sch = tc.Schedule(MM_RELU)
    assert [b.name for b in sch.get_blocks()] == ["matmul.init", "matmul", "generic"]
    Y = sch.get_block("matmul")
    i, j, k = sch.get_loops(Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    loops = dict(i=i, j0=j0, j1=j1, k=k)
    sch.reorder(*(loops[name] for name in order.split()))
    sch.reverse_compute_at(sch.get_block("generic"), loops[reverse_at])
    init = sch.decompose_reduction(Y, k)
    assert init.name == "matmul.init"
    check(sch.ir(), """
CHECK: scf.for
CHECK: scf.for
CHECK: linalg.fill {tilecraft.block = "matmul.init"}
CHECK: linalg.matmul
CHECK: linalg.generic
""")
    a, b = arrays(32, 32), arrays(32, 32)
    np.testing.assert_allclose(tc.build(sch)(a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_tensorir_blitz_example_runs():
    result = subprocess.run([sys.executable, str(EXAMPLES / "tutorials" / "tensorir_blitz.py"),
                             "--size", "32", "--repeat", "2"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "mm_relu: OK" in result.stdout
    assert "b7 = sch.decompose_reduction(b0, l3)" in result.stdout


@pytest.mark.slow
def test_gemm_tutorial_runs():
    """examples/matmul_schedule.py end to end at 64^3: every step built, checked against numpy
    (the script exits 1 on a mismatch) and timed."""
    result = subprocess.run([sys.executable, str(EXAMPLES / "matmul_schedule.py"), "--size", "64",
                             "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    table = result.stdout[result.stdout.index("vs numpy"):]
    for step in ("default", "write cache", "parallelization", "register blocking", "numpy (OpenBLAS)"):
        assert step in table


def _chain_tiled():
    sch = tc.Schedule(chain())
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, jo, ii, ji = sch.tile(i, j, 16, 16)
    return sch, io, jo


@pytest.mark.parametrize("mover", ["compute_at", "reverse_compute_at"])
def test_compute_root_undoes_a_move(arrays, mover):
    """compute_root puts the block back at the root: the same script body as never moving it,
    loops rebuilt over the whole extents (and schedulable again)."""
    sch, io, jo = _chain_tiled()
    block = sch.get_block("R" if mover == "compute_at" else "D")
    getattr(sch, mover)(block, jo)
    moved_loops = sch.get_loops(block)
    assert [l.extent for l in moved_loops] == ([16, 16] if mover == "reverse_compute_at" else [16, 64])
    sch.compute_root(block)
    assert sch.history[-1] == f"sch.compute_root({sch._name(block)})"
    assert [l.extent for l in sch.get_loops(block)] == [64, 64]
    assert "no longer exists" in str(pytest.raises(tc.ScheduleError, sch.split, moved_loops[0], factor=2).value)
    body = lambda s: s.script[s.script.index("module"):]  # noqa: E731 (the header lists the calls)
    assert body(sch) == body(_chain_tiled()[0])
    x, w = arrays(64, 64), arrays(64, 64)
    sch.compute_at(sch.get_block("R"), io)  # movable again
    np.testing.assert_allclose(tc.build(sch)(x, w), np.maximum(x, 0) @ w * 2 + 1, rtol=1e-4, atol=1e-4)


def test_compute_root_of_a_cache_and_an_init(arrays):
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    CC = sch.cache_write(C, "local")
    m, n = sch.get_loops(C)
    mo, no, mi, ni = sch.tile(m, n, 16, 16)
    sch.compute_at(CC, no)
    sch.compute_root(CC)
    a, b = arrays(64, 64), arrays(64, 64)
    np.testing.assert_allclose(tc.build(sch)(a, b), a @ b, rtol=1e-4, atol=1e-4)
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    i, j, k = sch.get_loops(C)
    io, jo, ii, ji = sch.tile(i, j, 16, 16)
    init = sch.decompose_reduction(C, sch.get_loops(C)[2])
    assert sch.ir().index("linalg.fill") > sch.ir().index("scf.for")
    sch.compute_root(init)
    assert sch.ir().index("linalg.fill") < sch.ir().index("scf.for")
    np.testing.assert_allclose(tc.build(sch)(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_cache_read_at_a_tile(check, arrays):
    """TE's cache_read + compute_at: the reduction tile of A is copied into a local buffer
    inside the ko loop, and the matmul reads the copy."""
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    AL = sch.cache_read("A", "local", [C])
    assert AL.name == "A.local"
    i, j, k = sch.get_loops(C)
    io, jo, ii, ji = sch.tile(i, j, 16, 16)
    ko, ki = sch.split(k, factor=8)
    sch.reorder(io, jo, ko, ii, ki, ji)
    sch.compute_at(AL, ko)
    assert [d.extent for d in AL.dims] == [16, 8]
    sch.vectorize(ji)
    check(sch.ir(), """
CHECK: scf.for {{.*}} step %c8
CHECK: %[[BUF:.*]] = bufferization.alloc_tensor() : tensor<16x8xf32>
CHECK: %[[COPY:.*]] = linalg.copy {tilecraft.block = "A.local"} ins(%{{.*}} : tensor<16x8xf32>) outs(%[[BUF]]
CHECK: vector.transfer_read %[[COPY]]
""")
    a, b = arrays(64, 64), arrays(64, 64)
    np.testing.assert_allclose(tc.build(sch)(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_cache_read_of_an_intermediate_and_an_argument(arrays):
    """Two caches of one reader, one of a block's result, placed in a parallel loop."""
    X, W = tc.placeholder((64, 64), name="X"), tc.placeholder((64, 64), name="W")
    R = tc.compute((64, 64), lambda i, j: tc.maximum(X[i, j], 0.0), name="R")
    k = tc.reduce_axis(64, "k")
    C = tc.compute((64, 64), lambda i, j: tc.sum(R[i, k] * W[k, j], axis=k), name="C")
    sch = tc.Schedule([X, W, C])
    c = sch.get_block("C")
    WL = sch.cache_read(W, "shared", [c])
    RL = sch.cache_read(sch.get_block("R"), "local", [c])
    i, j, kk = sch.get_loops(c)
    io, ii = sch.split(i, factor=16)
    sch.parallel(io)
    sch.compute_at(WL, io)
    sch.compute_at(RL, io)
    assert [d.extent for d in RL.dims] == [16, 64] and [d.extent for d in WL.dims] == [64, 64]
    x, w = arrays(64, 64), arrays(64, 64)
    np.testing.assert_allclose(tc.build(sch)(x, w), np.maximum(x, 0) @ w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("which", ["ko", "ki"])
def test_rfactor_of_a_row_max(check, arrays, which):
    """TE's rfactor: partial maxima over k's outer part in parallel (ko) or k's inner part
    in a serial loop (ki), then the final max of the partials."""
    A = tc.placeholder((32, 256), name="A")
    k = tc.reduce_axis(256, "k")
    M = tc.compute((32,), lambda i: tc.max(A[i, k], axis=k), name="M")
    sch = tc.Schedule(M)
    blk = sch.get_block("M")
    i, kk = sch.get_loops(blk)
    io, ii = sch.split(i, factor=8)
    ko, ki = sch.split(kk, nparts=4)
    if which == "ki":
        sch.parallel(io)  # TVM's idiom: parallel rows, a serial partial-sum loop inside
    rf = sch.rfactor(ko if which == "ko" else ki)
    assert rf.name == "M.rf" and [d.extent for d in rf.dims] == [32, 4 if which == "ko" else 64]
    check(sch.ir(), ("CHECK: scf.forall (%{{.*}}) in (4)" if which == "ko" else
                     "CHECK: scf.forall (%{{.*}}) in (4)\nCHECK: scf.for %{{.*}} = %c0 to %c256 step %c64") + """
CHECK: tilecraft.block = "M.rf"
CHECK: linalg.reduce {{.*}} dimensions = [1] {tilecraft.block = "M"}
CHECK: arith.maximumf
""")
    a = arrays(32, 256)
    np.testing.assert_allclose(tc.build(sch)(a), a.max(axis=1), rtol=1e-6)


def test_cache_read_after_tiling_and_back_to_the_root(check, arrays):
    """cache_read of a block's result after the reader was tiled; compute_root moves the copy
    back to the whole tensor."""
    sch = tc.Schedule(chain())
    C = sch.get_block("C")
    i, j, k = sch.get_loops(C)
    io, jo, ii, ji = sch.tile(i, j, 16, 16)
    RL = sch.cache_read(sch.get_block("R"), "local", [C])
    sch.compute_at(RL, jo)
    check(sch.ir(), """
CHECK: scf.for
CHECK: scf.for
CHECK: linalg.copy {tilecraft.block = "R.local"} ins(%{{.*}} : tensor<16x64xf32>)
""")
    check_chain(sch, arrays)
    sch.compute_root(RL)
    assert [d.extent for d in RL.dims] == [64, 64]
    check(sch.ir(), """
CHECK: linalg.copy {tilecraft.block = "R.local"} ins(%{{.*}} : tensor<64x64xf32>)
CHECK: scf.for
""")
    check_chain(sch, arrays)
