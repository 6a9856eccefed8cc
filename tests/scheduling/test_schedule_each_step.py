"""What the user sees after each primitive is what the script does: every primitive, applied
as the one new step, changes both the transform script (``sch.trace``) and the scheduled IR
(``sch.show()``) at once, with the transform op that makes it; numbers stay numpy's.

Why: a lone ``split`` (its loops still in the op's dim order) once stayed inside the op, so
neither the script nor ``show()`` changed until a later primitive moved the loops."""

import numpy as np
import pytest

import tilecraft.scheduling as tc
from te_programs import chain, check_chain, check_matmul, matmul


def _loops(sch, name="C"):
    return sch.get_loops(sch.get_block(name))


def _tiled(sch):
    i, j, k = _loops(sch)
    return sch.tile(i, j, 16, 16)


def _split_k(sch):
    i, j, k = _loops(sch)
    ko, ki = sch.split(k, factor=4)
    return ki


def _split_k_outer(sch):
    i, j, k = _loops(sch)
    ko, ki = sch.split(k, nparts=4)
    return ko


# (id, payload, setup -> handles, the one step, FileCheck lines on the script, on the IR)
STEPS = [
    ("split", matmul, lambda s: _loops(s)[0], lambda s, i: s.split(i, factor=16),
     "CHECK: tile_using_for %{{.*}} tile_sizes [16, 0, 0]", "CHECK: scf.for {{.*}} step %c16"),
    ("split_reduction", matmul, lambda s: _loops(s)[2], lambda s, k: s.split(k, factor=4),
     "CHECK: tile_sizes [1, 1, 4]", "CHECK: scf.for {{.*}} step %c4"),
    ("split_nparts", matmul, lambda s: _loops(s)[1], lambda s, j: s.split(j, nparts=4),
     "CHECK: tile_sizes [1, 16, 0]", "CHECK: scf.for {{.*}} step %c16"),
    ("split_pad", matmul, lambda s: _loops(s)[0], lambda s, i: s.split(i, factor=24, pad=True),
     "CHECK: tile_sizes [24, 0, 0]", "CHECK: affine.min"),
    ("tile", matmul, lambda s: _loops(s), lambda s, l: s.tile(l[0], l[1], 16, 32),
     "CHECK: tile_sizes [16, 32, 0]", "CHECK: scf.for {{.*}} step %c16\nCHECK: scf.for {{.*}} step %c32"),
    ("reorder", matmul, lambda s: _loops(s), lambda s, l: s.reorder(l[1], l[0]),
     "CHECK: tile_sizes [0, 1, 0]", "CHECK: scf.for {{.*}} to %c64 step %c1"),
    ("fuse", matmul, lambda s: _loops(s), lambda s, l: s.fuse(l[0], l[1]),
     "CHECK: transform.loop.coalesce", "CHECK: scf.for {{.*}} to %c4096"),
    ("parallel", matmul, lambda s: _loops(s)[0], lambda s, i: s.parallel(i),
     "CHECK: tile_using_forall", "CHECK: scf.forall"),
    ("vectorize", chain, lambda s: _loops(s, "D")[1], lambda s, j: s.vectorize(j),
     "CHECK: transform.structured.vectorize", "CHECK: vector<1x64xf32>"),
    ("unroll", matmul, _split_k, lambda s, ki: s.unroll(ki),
     "CHECK: transform.loop.unroll", "CHECK-COUNT-4: arith.mulf"),
    ("compute_at", chain, lambda s: _tiled(s)[0], lambda s, io: s.compute_at(s.get_block("R"), io),
     "CHECK: fuse_into_containing_op", "CHECK: scf.for\nCHECK: arith.maximumf\nCHECK: tilecraft.block = \"C\""),
    ("reverse_compute_at", chain, lambda s: _tiled(s)[1],
     lambda s, jo: s.reverse_compute_at(s.get_block("D"), jo),
     "CHECK: fuse_into_containing_op", "CHECK: tilecraft.block = \"C\"\nCHECK: arith.mulf"),
    ("compute_inline", chain, lambda s: None, lambda s, _: s.compute_inline(s.get_block("R")),
     "CHECK: fuse_into_containing_op", "CHECK-NOT: tilecraft.block = \"R\""),
    ("cache_write", matmul, lambda s: None, lambda s, _: s.cache_write(s.get_block("C"), "local"),
     "CHECK: transform.structured.pad", "CHECK: linalg.copy"),
    ("cache_read", matmul, lambda s: None, lambda s, _: s.cache_read("A", "local", [s.get_block("C")]),
     "CHECK: transform.structured.pad {{.*}} nofold_flags = [1, 0, 0], copy_back_op = \"none\"\n"
     "CHECK: rewrite_in_destination_passing_style",
     "CHECK: linalg.copy {tilecraft.block = \"A.local\"} ins(%arg0 : tensor<64x64xf32>)"),
    ("rfactor", matmul, _split_k, lambda s, ki: s.rfactor(ki),
     "CHECK: tile_reduction_using_for {{.*}} by tile_sizes = [0, 0, 4]",
     "CHECK: tensor<64x64x4xf32>\nCHECK: scf.for\nCHECK: tilecraft.block = \"C.rf\"\n"
     "CHECK: linalg.reduce {{.*}} dimensions = [2] {{.*}}tilecraft.block = \"C\""),
    ("rfactor_parallel", matmul, _split_k_outer, lambda s, ko: s.rfactor(ko),
     "CHECK: tile_reduction_using_forall {{.*}} by num_threads = [0, 0, 4]",
     "CHECK: scf.forall (%{{.*}}) in (4)\nCHECK: tilecraft.block = \"C.rf\"\nCHECK: linalg.reduce"),
    ("decompose_reduction", matmul, _tiled, lambda s, l: s.decompose_reduction(s.get_block("C"), l[2]),
     "CHECK: tilecraft.block = \"C.init\"", "CHECK: scf.for\nCHECK: scf.for\nCHECK: linalg.fill"),
    ("compute_root", chain, lambda s: s.compute_at(s.get_block("R"), _tiled(s)[0]),
     lambda s, _: s.compute_root(s.get_block("R")),
     "CHECK-NOT: fuse_into_containing_op", "CHECK: arith.maximumf\nCHECK: scf.for\nCHECK: tilecraft.block = \"C\""),
    ("transform_layout", matmul, lambda s: None,
     lambda s, _: s.transform_layout(s.get_block("C"), "B", lambda k, n: (n // 16, k, n % 16)),
     "CHECK: transform.structured.pack", "CHECK: tensor<4x64x16xf32>"),
]


@pytest.mark.parametrize("name,payload,setup,step,script_checks,ir_checks", STEPS,
                         ids=[s[0] for s in STEPS])
def test_each_primitive_shows_at_once(check, arrays, name, payload, setup, step, script_checks,
                                      ir_checks):
    sch = tc.Schedule(payload())
    handles = setup(sch)
    before_script, before_ir = str(sch.trace), sch.ir()
    step(sch, handles)
    assert str(sch.trace) != before_script, f"{name} did not change the script"
    assert sch.ir() != before_ir, f"{name} did not change what show() prints"
    assert sch.history[-1].split("= ")[-1].startswith(f"sch.{name.split('_')[0]}") or name in (
        "split_reduction", "split_nparts", "split_pad", "rfactor_parallel", "compute_at", "reverse_compute_at",
        "compute_inline", "compute_root", "cache_write", "decompose_reduction", "transform_layout")
    check(sch.script, script_checks)
    check(sch.ir(), ir_checks)
    (check_chain if payload is chain else check_matmul)(sch, arrays)


def test_a_lone_split_renders_the_split_loop():
    sch = tc.Schedule(matmul())
    i, j, k = _loops(sch)
    io, ii = sch.split(i, factor=16)
    assert "tile_using_for" in sch.script
    assert sch.ir().count("scf.for") == 1
    a = np.ones((64, 64), np.float32)
    np.testing.assert_allclose(tc.build(sch)(a, a), a @ a)
