"""``Schedule.bind``: loops onto CUDA blocks and threads, built for ``cuda`` (PTX, and a cubin
where ptxas is installed) without a GPU; the tensor program a bound schedule makes is checked
on the CPU (its foralls run as loops). Running the kernels needs a GPU (marked ``gpu``)."""

import shutil

import numpy as np
import pytest

import tilecraft.scheduling as tc
from schedule_refusals import raises
from tilecraft.pipelines.jit.compiled_module import compile_ir
from tilecraft.pipelines.target import Target
from tilecraft.runtime.libraries import cuda_driver_available
from tilecraft.schedule.te.builder import scheduled_pipeline


def vector_add(n=1024):
    A, B = tc.placeholder((n,), name="A"), tc.placeholder((n,), name="B")
    return tc.compute((n,), lambda i: A[i] + B[i], name="C")


def matmul(M=64, N=64, K=32):
    A, B = tc.placeholder((M, K), name="A"), tc.placeholder((K, N), name="B")
    k = tc.reduce_axis(K, "k")
    return tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")


def bound_vector_add(n=1024, threads=64):
    sch = tc.Schedule(vector_add(n))
    (i,) = sch.get_loops(sch.get_block("C"))
    bx, tx = sch.split(i, factor=threads)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def bound_matmul():
    """TVM's GPU matmul shape of schedule: 16x16 output tiles per block, one element per
    thread, the reduction serial in each thread, the init in the thread loops."""
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    i, j, k = sch.get_loops(C)
    by, ty = sch.split(i, factor=16)
    bx, tx = sch.split(j, factor=16)
    sch.reorder(by, bx, ty, tx, k)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.decompose_reduction(C, k)
    return sch


def on_cpu(sch):
    """The scheduled tensor program on the CPU: the bound foralls run as loops (one thread)."""
    target = Target(num_threads=1)
    return compile_ir(sch.module_bytecode(), scheduled_pipeline(target), target, entry=sch.func_name)


def test_bind_maps_split_loops_to_blocks_and_threads(check):
    sch = bound_vector_add()
    check(sch.script, """
CHECK: sch.bind(l2, "blockIdx.x")
CHECK: sch.bind(l3, "threadIdx.x")
CHECK: transform.structured.tile_using_forall {{.*}} tile_sizes [64] (mapping = [#gpu.block<x>])
CHECK: transform.structured.tile_using_forall {{.*}} tile_sizes [1] (mapping = [#gpu.thread<x>])
""")
    check(sch.ir(), """
CHECK: scf.forall (%{{.*}}) in (16)
CHECK: scf.forall (%{{.*}}) in (64)
CHECK: linalg.generic
CHECK: {mapping = [#gpu.thread<x>]}
CHECK: {mapping = [#gpu.block<x>]}
""")
    assert "bound to threadIdx.x" in repr(sch.get_loops(sch.get_block("C"))[1])
    a, b = np.arange(1024, dtype=np.float32), np.ones(1024, np.float32)
    np.testing.assert_array_equal(on_cpu(sch)(a, b), a + b)


def test_adjacent_bound_loops_form_one_forall(check):
    sch = bound_matmul()
    check(sch.script, """
CHECK: tile_sizes [16, 16, 0] (mapping = [#gpu.block<y>, #gpu.block<x>])
CHECK: tile_sizes [1, 1, 0] (mapping = [#gpu.thread<y>, #gpu.thread<x>])
""")
    rng = np.random.default_rng(0)
    a, b = rng.random((64, 32), dtype=np.float32), rng.random((32, 64), dtype=np.float32)
    np.testing.assert_allclose(on_cpu(sch)(a, b), a @ b, rtol=1e-5)


@pytest.mark.parametrize("make, kernels", [(bound_vector_add, 1), (bound_matmul, 1)])
def test_build_for_cuda_makes_ptx(make, kernels, tmp_path):
    module = tc.build(make(), target="cuda -arch=sm_80")
    ptx = module.ptx()
    assert ".target sm_80" in ptx and ptx.count(".entry") == kernels
    assert "%ctaid.x" in ptx and "%tid.x" in ptx
    if shutil.which("ptxas"):
        assert all(cubin[:4] == b"\x7fELF" for cubin in module.cubin().values())


def test_matmul_threads_and_block_size():
    ptx = tc.build(bound_matmul(), target="cuda").ptx()
    assert "%ctaid.y" in ptx and "%tid.y" in ptx
    assert "fma.rn.f32" in ptx or "mul.rn.f32" in ptx


def test_mm_relu_in_one_kernel():
    """The ReLU computed in each thread after its matmul element (reverse_compute_at at the
    threadIdx loop), the init before the k loop: one kernel, right numerics."""
    A, B = tc.placeholder((64, 32), name="A"), tc.placeholder((32, 64), name="B")
    k = tc.reduce_axis(32, "k")
    Y = tc.compute((64, 64), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = tc.compute((64, 64), lambda i, j: tc.maximum(Y[i, j], 0.0), name="C")
    sch = tc.Schedule([A, B, C])
    block = sch.get_block("Y")
    i, j, kk = sch.get_loops(block)
    by, ty = sch.split(i, factor=16)
    bx, tx = sch.split(j, factor=16)
    sch.reorder(by, bx, ty, tx, kk)
    for loop, axis in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        sch.bind(loop, axis)
    sch.reverse_compute_at(sch.get_block("C"), tx)
    sch.decompose_reduction(block, kk)
    rng = np.random.default_rng(0)
    a, b = rng.random((64, 32), dtype=np.float32) - 0.5, rng.random((32, 64), dtype=np.float32)
    np.testing.assert_allclose(on_cpu(sch)(a, b), np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)
    assert tc.build(sch, target="cuda").ptx().count(".entry") == 1


# -- errors -------------------------------------------------------------------------------

def test_bind_a_reduction_axis():
    sch = tc.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    raises(sch, "bind: loop 'k' iterates the reduction dim 'k' of block 'C'",
           lambda: sch.bind(k, "threadIdx.x"))


def test_bind_one_axis_twice():
    sch = tc.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "threadIdx.x")
    raises(sch, r"threadIdx.x is already bound to loop 'i' of block 'C'",
           lambda: sch.bind(j, "threadIdx.x"))
    raises(sch, r"loop 'i' is already bound to threadIdx.x", lambda: sch.bind(i, "threadIdx.y"))
    raises(sch, r"loop 'i' is already bound to threadIdx.x", lambda: sch.parallel(i))


@pytest.mark.parametrize("axis", ["blockIdx.w", "threadIdx", "vthread", "warp.x", 0])
def test_bind_an_unknown_axis(axis):
    sch = tc.Schedule(vector_add())
    (i,) = sch.get_loops(sch.get_block("C"))
    raises(sch, "bind: unknown thread axis .*; use one of blockIdx.x, blockIdx.y",
           lambda: sch.bind(i, axis))


def test_bind_a_fused_loop():
    sch = tc.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    fused = sch.fuse(i, j)
    raises(sch, "bind: loop 'i_j_fused' is a fused loop", lambda: sch.bind(fused, "blockIdx.x"))


def test_cuda_build_needs_bound_blocks():
    with pytest.raises(tc.ScheduleError, match="block 'C' has no loop bound to blockIdx"):
        tc.build(tc.Schedule(vector_add()), target="cuda")
    sch = tc.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    with pytest.raises(tc.ScheduleError, match="block 'C.init' has no loop bound to blockIdx.*"
                                               "decompose_reduction"):
        tc.build(sch, target="cuda")


def test_cuda_build_refuses_host_loops_and_misordered_axes():
    sch = tc.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.bind(j, "blockIdx.x")
    sch.decompose_reduction(sch.get_block("C"), k)
    with pytest.raises(tc.ScheduleError, match=r"loops \['i'\] of 'C' are outside its blockIdx loops"):
        tc.build(sch, target="cuda")
    sch = tc.Schedule(vector_add())
    (i,) = sch.get_loops(sch.get_block("C"))
    tx, bx = sch.split(i, factor=64)
    sch.bind(tx, "threadIdx.x")
    sch.bind(bx, "blockIdx.x")
    with pytest.raises(tc.ScheduleError, match="threadIdx loop 'i_0' of 'C' is outside its blockIdx"):
        tc.build(sch, target="cuda")
    sch = bound_vector_add(4096, threads=2048)
    with pytest.raises(tc.ScheduleError, match="2048 threads per CUDA block; at most 1024"):
        tc.build(sch, target="cuda")


def test_cuda_build_refuses_a_read_cache():
    """A cache_read copy is a buffer of its own, global memory on the GPU: a "shared" cache
    would silently not be one, so the CUDA build refuses it (the CPU build takes it)."""
    sch = bound_vector_add()
    cache = sch.cache_read("A", "shared", sch.get_block("C"))
    with pytest.raises(tc.ScheduleError, match="'A.shared' is a cache_read stage.*not supported"):
        tc.build(sch, target="cuda")
    assert cache.name == "A.shared"


def test_cpu_build_refuses_bound_loops():
    with pytest.raises(tc.ScheduleError, match=r"bound to GPU axes .*build with target='cuda'"):
        tc.build(bound_vector_add())


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_driver_available(), reason="needs a CUDA driver and GPU (libcuda.so.1)")
def test_bound_kernels_run_on_a_gpu():
    a, b = np.arange(1024, dtype=np.float32), np.ones(1024, np.float32)
    np.testing.assert_array_equal(tc.build(bound_vector_add(), target="cuda")(a, b), a + b)
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 32), dtype=np.float32), rng.random((32, 64), dtype=np.float32)
    np.testing.assert_allclose(tc.build(bound_matmul(), target="cuda")(x, y), x @ y, rtol=1e-5)


def tutorial(name):
    import importlib.util
    from pathlib import Path

    import tilecraft

    path = Path(tilecraft.__file__).resolve().parent / "examples" / "tutorials" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_vector_add_gpu_tutorial_compiles(capsys):
    assert tutorial("vector_add_gpu").main(["--n", "1024", "--ptx-lines", "12"]) == 0
    out = capsys.readouterr().out
    assert ".entry main_kernel" in out
    assert ("compiled only, not run" in out) != ("vector add on the GPU: OK" in out)


def test_matmul_gpu_tutorial_compiles(capsys):
    assert tutorial("matmul_gpu").main(["--size", "64"]) == 0
    out = capsys.readouterr().out
    assert "1 kernel" in out and "scheduled program on the CPU: OK" in out
    assert ("compiled only, not run" in out) != ("matmul on the GPU: OK" in out)
