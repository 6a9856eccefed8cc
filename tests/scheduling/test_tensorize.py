"""tensorize: a tile computed by a registered C intrinsic (numerics against numpy, the update
semantics under a split reduction), and every illegal tensorize named by its error."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft.scheduling as tc
from schedule_refusals import raises

# c[0, j] += sum_k a[0, k] * b[k, j] on a 1x16x16 tile; strided descriptors (MLIR's C interface).
GEMV = r"""
#include <stdint.h>
typedef struct { float *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } M2;
void gemv_update(M2 *a, M2 *b, M2 *c) {
  for (int64_t j = 0; j < 16; ++j) {
    float acc = c->aligned[c->offset + j * c->strides[1]];
    for (int64_t k = 0; k < 16; ++k)
      acc += a->aligned[a->offset + k * a->strides[1]] * b->aligned[b->offset + k * b->strides[0] + j * b->strides[1]];
    c->aligned[c->offset + j * c->strides[1]] = acc;
  }
}
"""


def matmul(M=32, N=32, K=32, dtype="float32", transposed=False, reduce=tc.sum):
    A = tc.placeholder((M, K), name="A", dtype=dtype)
    B = tc.placeholder((N, K) if transposed else (K, N), name="B", dtype=dtype)
    k = tc.reduce_axis(K, "k")
    if transposed:
        return tc.compute((M, N), lambda i, j: reduce(A[i, k] * B[j, k], axis=k), name="C")
    return tc.compute((M, N), lambda i, j: reduce(A[i, k] * B[k, j], axis=k), name="C")


@pytest.fixture(scope="module")
def gemv():
    intrinsic = tc.register_intrinsic("gemv_update", matmul(1, 16, 16), tc.compile_c(GEMV, name="gemv_update"))
    yield intrinsic
    tc.unregister_intrinsic("gemv_update")


def tiled(M=32, N=32, K=32, **kwargs):
    """C's loops as i, j_0, k_0, j_1, k_1: a 1x16x16 tile inside k_0."""
    sch = tc.Schedule(matmul(M, N, K, **kwargs))
    C = sch.get_block("C")
    i, j, k = sch.get_loops(C)
    jo, ji = sch.split(j, factor=16)
    ko, ki = sch.split(k, factor=16)
    sch.reorder(i, jo, ko, ji, ki)
    return sch, C, i, jo, ko, ji, ki


def test_tensorized_matmul_matches_numpy(gemv, arrays, check):
    """The reduction split outside the tile: each call accumulates into C's tile (update);
    the init stays a fill, here placed by decompose_reduction; the outer loop is parallel."""
    sch, C, i, jo, ko, ji, ki = tiled()
    sch.decompose_reduction(C, ko)
    sch.tensorize(ji, "gemv_update")
    sch.parallel(i)
    check(sch.script, 'CHECK: transform.annotate %{{.+}} "tilecraft.tensorize" = ')
    check(sch.ir(), "CHECK: linalg.fill\nCHECK: linalg.generic\nCHECK-SAME: tilecraft.tensorize = \"gemv_update\"")
    x, y = arrays(32, 32), arrays(32, 32)
    np.testing.assert_allclose(tc.build(sch)(x, y), x @ y, rtol=1e-5, atol=1e-5)


def test_the_pass_calls_the_extern_on_subviews(gemv, check):
    from mlir import ir

    from tilecraft.pipelines.pipeline import Pipeline

    sch, C, i, jo, ko, ji, ki = tiled()
    sch.tensorize(ji, gemv)
    pipeline = tc.scheduled_pipeline("llvm")
    names = pipeline.stage_names
    upto = Pipeline(tuple(pipeline.stage(n) for n in names[: names.index("bufferize") + 1]))
    context = ir.Context()
    module = ir.Module.parse(sch.module_text(), context)
    with context, ir.Location.unknown():
        upto.run(module)
    check(str(module), "\n".join([
        'CHECK: module attributes {tilecraft.externs = ["gemv_update"]}',
        "CHECK: func.func private @gemv_update({{.+}}) attributes {llvm.emit_c_interface}",
        "CHECK: memref.subview %arg1[%{{.+}}, %{{.+}}] [16, 16] [1, 1]",
        "CHECK: func.call @gemv_update(",
        "CHECK-NOT: linalg.generic",
    ]))


def test_tensorize_the_cache_write_stage(gemv, arrays, check):
    """The compute stage of cache_write, computed at a loop of C, tensorized inside it."""
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    local = sch.cache_write(C, "local")
    i, j = sch.get_loops(C)
    jo, ji = sch.split(j, factor=16)
    sch.compute_at(local, jo)
    li, lj, lk = sch.get_loops(local)
    lko, lki = sch.split(lk, factor=16)
    sch.reorder(lko, li, lj, lki)
    sch.tensorize(li, "gemv_update")
    check(sch.ir(), 'CHECK: linalg.generic\nCHECK-SAME: tilecraft.block = "C.local"\nCHECK-SAME: tilecraft.tensorize')
    x, y = arrays(32, 32), arrays(32, 32)
    np.testing.assert_allclose(tc.build(sch)(x, y), x @ y, rtol=1e-5, atol=1e-5)


def test_unknown_intrinsic(gemv):
    sch, C, i, jo, ko, ji, ki = tiled()
    raises(sch, r"tensorize: unknown intrinsic 'gemm' \(registered: .*gemv_update", lambda: sch.tensorize(ji, "gemm"))


def test_tile_shape_differs(gemv):
    sch, C, i, jo, ko, ji, ki = tiled()
    raises(sch, r"the tile of 'C' inside 'j_0' is \[1, 16, 32\] \(i=1, j=16, k=32\), but intrinsic "
           r"'gemv_update' computes \[1, 16, 16\]", lambda: sch.tensorize(ko, "gemv_update"))


def test_computation_differs(gemv):
    sch = tiled(reduce=tc.max)[0]
    ji = sch.get_loops(sch.get_block("C"))[3]
    raises(sch, "does not compute what intrinsic 'gemv_update' does: the block's body computes "
           "arith.mulf, arith.maximumf, the intrinsic's arith.mulf, arith.addf",
           lambda: sch.tensorize(ji, "gemv_update"))


def test_transposed_operand(gemv):
    sch = tiled(transposed=True)[0]
    ji = sch.get_loops(sch.get_block("C"))[3]
    raises(sch, r"input 1 is indexed \[j, k\] by the block but \[k, j\] by the intrinsic",
           lambda: sch.tensorize(ji, "gemv_update"))


def test_element_types_differ(gemv):
    sch = tiled(dtype="float64")[0]
    ji = sch.get_loops(sch.get_block("C"))[3]
    raises(sch, r"block 'C' has element types \(f64, f64, f64\) but intrinsic 'gemv_update' takes "
           r"\(f32, f32, f32\)", lambda: sch.tensorize(ji, "gemv_update"))


def test_the_tile_is_no_longer_schedulable(gemv):
    sch, C, i, jo, ko, ji, ki = tiled()
    sch.tensorize(ji, "gemv_update")
    raises(sch, r"split: loop 'k_1' no longer exists: it was consumed by sch.tensorize\(.+\) \(its "
           "iterations are the intrinsic 'gemv_update'\\)", lambda: sch.split(ki, factor=4))
    raises(sch, "vectorize: the tile of block 'C' from loop 'j_1' inward is tensorized",
           lambda: sch.vectorize(ko))


def test_annotated_loop_inside_the_tile(gemv):
    sch, C, i, jo, ko, ji, ki = tiled()
    sch.unroll(ki)
    raises(sch, "loop 'k_1' at or inside 'j_1' is unrolled", lambda: sch.tensorize(ji, "gemv_update"))


def test_cuda_build_is_refused(gemv):
    sch, C, i, jo, ko, ji, ki = tiled()
    sch.tensorize(ji, "gemv_update")
    with pytest.raises(tc.ScheduleError, match="build for cuda: blocks \\['C'\\] are tensorized"):
        tc.build(sch, target="cuda")


@pytest.mark.slow
def test_tensorize_example_runs():
    example = Path(__file__).resolve().parents[2] / "examples" / "tutorials" / "tensorize.py"
    result = subprocess.run([sys.executable, str(example), "--size", "64", "--repeat", "1"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "gemv tensorize: OK" in result.stdout and "matmul 64^3: OK" in result.stdout
    assert 'sch.tensorize(l5, "matmul_8x32_update")' in result.stdout
