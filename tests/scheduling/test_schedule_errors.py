"""Every illegal schedule step raises ScheduleError with a clear message, before anything runs:
the schedule (its script and its loops) is unchanged afterwards."""

import numpy as np
import pytest

import tilecraft.scheduling as tc
from schedule_refusals import raises


def matmul(M=64, N=64, K=64):
    A = tc.placeholder((M, K), name="A")
    B = tc.placeholder((K, N), name="B")
    k = tc.reduce_axis(K, "k")
    return tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")


def chain(consumers=1, returned=False):
    X, W = tc.placeholder((64, 64), name="X"), tc.placeholder((64, 64), name="W")
    R = tc.compute((64, 64), lambda i, j: tc.maximum(X[i, j], 0.0), name="R")
    k = tc.reduce_axis(64, "k")
    C = tc.compute((64, 64), lambda i, j: tc.sum(R[i, k] * W[k, j], axis=k), name="C")
    D = tc.compute((64, 64), lambda i, j: C[i, j] * 2.0, name="D")
    outputs = [D]
    if consumers > 1:
        outputs.append(tc.compute((64, 64), lambda i, j: R[i, j] + 1.0, name="E"))
    if returned:
        outputs.append(R)
    return [X, W, *outputs]


@pytest.fixture
def mm():
    sch = tc.Schedule(matmul())
    C = sch.get_block("C")
    return sch, C, *sch.get_loops(C)


# -- loops --------------------------------------------------------------------------------

def test_vectorize_a_loop_with_a_dependence(mm):
    sch, C, i, j, k = mm
    raises(sch, "loop 'k' carries a dependence: it iterates the reduction dim 'k'", lambda: sch.vectorize(k))


def test_vectorize_a_loop_that_is_not_innermost(mm):
    sch, C, i, j, k = mm
    raises(sch, r"'j' is not the innermost loop of 'C' \(inside it: k\)", lambda: sch.vectorize(j))


def test_split_a_consumed_handle(mm):
    sch, C, i, j, k = mm
    sch.split(i, factor=8)
    raises(sch, r"loop 'i' no longer exists: it was consumed by sch.split\(l1, factor=8\) "
                r"\(it became i_0, i_1\)", lambda: sch.split(i, factor=2))


def test_split_factor_that_does_not_divide(mm):
    sch, C, i, j, k = mm
    raises(sch, "do not divide the extent 64 of loop 'i'.*pad=True", lambda: sch.split(i, factor=10))
    raises(sch, "cover 60 iterations, fewer than its extent 64", lambda: sch.split(i, factors=[6, 10]))
    raises(sch, "cover 66 iterations but loop 'i' has 64; pass pad=True", lambda: sch.split(i, factors=[11, 6]))
    raises(sch, "exactly one of factor=, nparts= or factors=", lambda: sch.split(i, factor=8, nparts=8))
    raises(sch, "at most one factor may be None", lambda: sch.split(i, factors=[None, None]))


def test_reorder_against_the_split_order(mm):
    sch, C, i, j, k = mm
    io, ii = sch.split(i, factor=8)
    raises(sch, "'i_0' steps over 'i' by 8, so it must stay outside 'i_1'", lambda: sch.reorder(ii, io))
    raises(sch, "a loop is listed twice", lambda: sch.reorder(j, j))


def test_reorder_moving_the_vectorized_loop(mm):
    sch, C, i, j, k = mm
    sch.reorder(i, k, j)
    sch.vectorize(j)
    raises(sch, "vectorized loop 'j' must stay innermost", lambda: sch.reorder(j, k))


def test_fuse_loops_that_are_not_adjacent(mm):
    sch, C, i, j, k = mm
    raises(sch, "not adjacent and outermost-first", lambda: sch.fuse(i, k))
    raises(sch, "not adjacent and outermost-first", lambda: sch.fuse(j, i))
    raises(sch, "at least two loops", lambda: sch.fuse(i))


def test_fuse_or_split_an_annotated_loop(mm):
    sch, C, i, j, k = mm
    sch.parallel(i)
    raises(sch, "loop 'i' is parallel; fuse before annotating", lambda: sch.fuse(i, j))
    raises(sch, "loop 'i' is parallel; split before annotating it", lambda: sch.split(i, factor=2))
    raises(sch, "loop 'i' is already parallel", lambda: sch.vectorize(i))


def test_parallel_reduction_loop(mm):
    sch, C, i, j, k = mm
    raises(sch, "parallel: loop 'k' iterates the reduction dim 'k'.*would race", lambda: sch.parallel(k))


def test_unroll_partial_or_huge_loops():
    A = tc.placeholder((100, 4096), name="A")
    sch = tc.Schedule(tc.compute((100, 4096), lambda i, j: A[i, j] * 2.0, name="C"))
    i, j = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, factor=8, pad=True)
    raises(sch, "partial last tile.*cannot be fully unrolled", lambda: sch.unroll(ii))
    raises(sch, "4096 iterations; unroll at most 1024", lambda: sch.unroll(j))


def test_loops_of_another_block_and_bad_handles(mm):
    sch, C, i, j, k = mm
    raises(sch, "expected a loop", lambda: sch.vectorize("j"))
    raises(sch, "no block named 'D'; blocks: \\['C.init', 'C'\\]", lambda: sch.get_block("D"))


# -- blocks -------------------------------------------------------------------------------

def test_compute_at_errors():
    sch = tc.Schedule(chain())
    R, C, D = (sch.get_block(n) for n in "RCD")
    i, j, k = sch.get_loops(C)
    raises(sch, "'C.init' initializes 'C'; place it with decompose_reduction",
           lambda: sch.compute_at(sch.get_block("C.init"), i))
    raises(sch, "block 'D' does not produce an input of 'C'", lambda: sch.compute_at(D, i))
    raises(sch, "cannot be computed at its own loop", lambda: sch.compute_at(C, i))
    sch.reorder(i, k, j)
    sch.vectorize(j)
    raises(sch, "loop 'j' is vectorized", lambda: sch.compute_at(R, j))
    sch.compute_at(R, i)
    raises(sch, "'i' is at or outside loop 'i', where block 'R' is computed \\(compute_at\\)",
           lambda: sch.split(i, factor=2))
    raises(sch, "block 'R' is already computed at 'i'", lambda: sch.compute_at(R, k))


def test_compute_at_producer_with_other_uses_in_a_serial_loop():
    sch = tc.Schedule(chain(consumers=2))
    i, j, k = sch.get_loops(sch.get_block("C"))
    raises(sch, "'R' is also used by E; tilecraft moves a producer into its consumer's loops only",
           lambda: sch.compute_at(sch.get_block("R"), i))


def test_reverse_compute_at_inside_a_reduction():
    sch = tc.Schedule(chain())
    C, D = sch.get_block("C"), sch.get_block("D")
    i, j, k = sch.get_loops(C)
    sch.reorder(k, i, j)
    raises(sch, "loop 'k' iterates a reduction of 'C'", lambda: sch.reverse_compute_at(D, i))
    fresh = tc.Schedule(chain())
    C, D = fresh.get_block("C"), fresh.get_block("D")
    raises(fresh, "block 'C' does not read the result of 'D'",
           lambda: fresh.reverse_compute_at(C, fresh.get_loops(D)[0]))


def test_compute_inline_errors():
    sch = tc.Schedule(chain(returned=True))
    raises(sch, "'R' is an output of the function", lambda: sch.compute_inline(sch.get_block("R")))
    raises(sch, "'C' is a reduction", lambda: sch.compute_inline(sch.get_block("C")))
    sch = tc.Schedule(chain(consumers=2))
    raises(sch, "'R' has 2 consumers", lambda: sch.compute_inline(sch.get_block("R")))
    sch = tc.Schedule(chain())
    R = sch.get_block("R")
    (i, j) = sch.get_loops(R)
    sch.compute_inline(R)
    raises(sch, "block 'R' was inlined into C by sch.compute_inline", lambda: sch.get_loops(R))
    raises(sch, "block 'R' was inlined", lambda: sch.vectorize(j))
    raises(sch, "no block named 'R'", lambda: sch.get_block("R"))


def test_cache_write_errors(mm):
    sch, C, i, j, k = mm
    sch.split(i, factor=8)
    raises(sch, "block 'C' already has scheduled loops", lambda: sch.cache_write(C))
    fresh = tc.Schedule(matmul())
    CC = fresh.cache_write(fresh.get_block("C"))
    ci, cj = fresh.get_loops(fresh.get_block("C"))
    init_loop = fresh.get_loops(fresh.get_block("C.init"))[0]
    raises(fresh, "the cache 'C.local' can only be computed at a loop of 'C'",
           lambda: fresh.compute_at(CC, init_loop))
    raises(fresh, "'C.init' is a init block, not an op", lambda: fresh.cache_write(fresh.get_block("C.init")))
    other = tc.Schedule(matmul())
    raises(other, "scope must be a name", lambda: other.cache_write(other.get_block("C"), "a b"))


def test_decompose_reduction_errors(mm):
    sch, C, i, j, k = mm
    sch.reorder(k, i, j)
    raises(sch, "loop 'k' outside 'i' iterates a reduction dim", lambda: sch.decompose_reduction(C, i))
    init = sch.get_block("C.init")
    raises(sch, "block 'C.init' is not a reduction", lambda: sch.decompose_reduction(init, sch.get_loops(init)[0]))
    raises(sch, "loop 'i' is not a loop of 'C.init'", lambda: sch.decompose_reduction(init, i))
    chained = tc.Schedule(chain())
    C2 = chained.get_block("C")
    ci, cj, ck = chained.get_loops(C2)
    raises(chained, "made with transform.structured.fuse, which would also fuse the producers \\['R'\\]",
           lambda: chained.decompose_reduction(C2, ck))


def test_transform_layout_errors(mm):
    sch, C, i, j, k = mm
    raises(sch, "reads no buffer 'Z'; its inputs are \\['A', 'B'\\]",
           lambda: sch.transform_layout(C, "Z", lambda k, n: (n // 16, k, n % 16)))
    raises(sch, "10 does not divide the extent 64",
           lambda: sch.transform_layout(C, "B", lambda k, n: (n // 10, k, n % 10)))
    raises(sch, "the v % c \\(inner tile\\) indices must come last",
           lambda: sch.transform_layout(C, "B", lambda k, n: (n % 16, k, n // 16)))
    raises(sch, "tiles nothing", lambda: sch.transform_layout(C, "B", lambda k, n: (n, k)))
    raises(sch, "must be a variable v, v // c or v % c",
           lambda: sch.transform_layout(C, "B", lambda k, n: (n + 1, k)))
    raises(sch, "index map takes 1 arguments but the buffer has rank 2",
           lambda: sch.transform_layout(C, "B", lambda k: (k,)))
    raises(sch, "the output would be re-laid out too",
           lambda: sch.transform_layout(C, "A", lambda m, k: (m // 16, k, m % 16)))
    sch.split(i, factor=8)
    raises(sch, "already has scheduled loops",
           lambda: sch.transform_layout(C, "B", lambda k, n: (n // 16, k, n % 16)))


def test_dynamic_shapes_of_mlir_text_are_symbolic():
    text = """
    func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
      %c0 = arith.constant 0 : index
      %d = tensor.dim %x, %c0 : tensor<?xf32>
      %e = tensor.empty(%d) : tensor<?xf32>
      %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                           iterator_types = ["parallel"]} ins(%x : tensor<?xf32>) outs(%e : tensor<?xf32>) {
      ^bb0(%a: f32, %b: f32):
        %s = arith.addf %a, %a : f32
        linalg.yield %s : f32
      } -> tensor<?xf32>
      return %y : tensor<?xf32>
    }"""
    sch = tc.Schedule(text)
    block = sch.get_block("generic")
    (i,) = sch.get_loops(block)
    assert repr(i.extent) == "arg0_0"  # the argument dim, named by Schedule (tilecraft.symbols)
    raises(sch, "symbolic extents i0 \\(arg0_0\\); dynamic shapes are not supported for cache_write",
           lambda: sch.cache_write(block))
    _, inner = sch.split(i, factor=4)
    sch.vectorize(inner)
    x = np.arange(7, dtype=np.float32)
    np.testing.assert_allclose(tc.build(sch)(x), x + x)


def test_decompose_reduction_outside_a_reverse_compute_at():
    sch = tc.Schedule(chain())
    C, D = sch.get_block("C"), sch.get_block("D")
    i, j, k = sch.get_loops(C)
    sch.reverse_compute_at(D, j)
    raises(sch, "'D' is computed at 'j' \\(reverse_compute_at\\); the init can only be placed inside",
           lambda: sch.decompose_reduction(C, j))


def test_compute_root_errors():
    sch = tc.Schedule(chain())
    R, C, D = sch.get_block("R"), sch.get_block("C"), sch.get_block("D")
    raises(sch, "compute_root: block 'R' is already computed at the root", lambda: sch.compute_root(R))
    raises(sch, "compute_root: expected a block from get_block", lambda: sch.compute_root("R"))
    i, j = sch.get_loops(D)
    io, jo, ii, ji = sch.tile(i, j, 16, 16)
    sch.compute_at(C, jo)
    sch.compute_at(R, sch.get_loops(C)[0])
    raises(sch, "compute_root: \\['R'\\] are computed inside the loops of 'C'; move them to the root first",
           lambda: sch.compute_root(C))
    sch.compute_root(R)
    sch.compute_root(C)
    inlined = tc.Schedule(chain())
    R2 = inlined.get_block("R")
    inlined.compute_inline(R2)
    raises(inlined, "compute_root: block 'R' was inlined into C", lambda: inlined.compute_root(R2))


def test_cache_read_errors(mm):
    sch, C, i, j, k = mm
    raises(sch, r"block 'C' does not read 'X'; its inputs are \['A', 'B'\]",
           lambda: sch.cache_read("X", "local", [C]))
    raises(sch, "give one reader, got 2", lambda: sch.cache_read("A", "local", [C, C]))
    raises(sch, "scope must be a name", lambda: sch.cache_read("A", "sh ared", [C]))
    raises(sch, "'C.init' is a init block, not an op", lambda: sch.cache_read("A", "local", [sch.get_block("C.init")]))
    AL = sch.cache_read("A", "local", [C])
    raises(sch, "'C' already reads 'A' through a cache", lambda: sch.cache_read("A", "local", [C]))
    raises(sch, "the loops of block 'A.local' take no more primitives", lambda: sch.split(sch.get_loops(AL)[0], factor=2))
    raises(sch, "not supported together with cache_read", lambda: sch.cache_write(C))
    init = sch.get_block("C.init")
    raises(sch, "the cache 'A.local' can only be computed at a loop of 'C'",
           lambda: sch.compute_at(AL, sch.get_loops(init)[0]))
    io, ii = sch.split(i, factor=24, pad=True)
    raises(sch, "loops with partial tiles", lambda: sch.compute_at(AL, io))
    chained = tc.Schedule(chain())
    R, Cc = chained.get_block("R"), chained.get_block("C")
    chained.cache_read(R, "local", [Cc])
    raises(chained, "'C' reads 'R' through a cache_read copy", lambda: chained.compute_at(R, chained.get_loops(Cc)[0]))
    raises(chained, "'C' reads 'R' through a cache_read copy; a cached tensor cannot be inlined",
           lambda: chained.compute_inline(R))
    raises(chained, "block 'D' does not read the result of 'R'",
           lambda: chained.cache_read(R, "local", [chained.get_block("D")]))


def test_rfactor_errors(mm):
    sch, C, i, j, k = mm
    raises(sch, "loop 'i' iterates the spatial dim 'i' of 'C', not a reduction", lambda: sch.rfactor(i))
    raises(sch, "split the reduction loop in two and keep both parts innermost", lambda: sch.rfactor(k))
    ko, ki = sch.split(k, factor=8)
    raises(sch, "factor_axis=3 is out of range: the rf tensor has 3 axes", lambda: sch.rfactor(ki, factor_axis=3))
    sch.unroll(ki)
    raises(sch, "loop 'k_1' must be a plain loop", lambda: sch.rfactor(ki))
    other = tc.Schedule(matmul())
    Co = other.get_block("C")
    oi, oj, ok = other.get_loops(Co)
    oko, oki = other.split(ok, factor=8)
    other.reorder(oko, oi, oj, oki)
    raises(other, "split the reduction loop in two", lambda: other.rfactor(oki))
    done = tc.Schedule(matmul())
    Cd = done.get_block("C")
    di, dj, dk = done.get_loops(Cd)
    dko, dki = done.split(dk, factor=8)
    rf = done.rfactor(dki)
    assert rf.name == "C.rf"
    raises(done, "the loops of block 'C' take no more primitives: sch.rfactor", lambda: done.parallel(di))
    raises(done, "takes no more primitives", lambda: done.cache_read("A", "local", [Cd]))
    inl = tc.Schedule(chain())
    Ci = inl.get_block("C")
    ik = inl.get_loops(Ci)[2]
    inl.rfactor(inl.split(ik, factor=8)[1])
    raises(inl, "its consumer 'C' takes no more primitives: sch.rfactor", lambda: inl.compute_inline(inl.get_block("R")))
    nested = tc.Schedule(matmul())
    Cn = nested.get_block("C")
    ni, nj, nk = nested.get_loops(Cn)
    nested.parallel(ni)
    nko, nki = nested.split(nk, factor=8)
    raises(nested, "would become an scf.forall nested in the parallel loop 'i'", lambda: nested.rfactor(nko))
    nested.rfactor(nki)  # a serial partial loop inside the parallel one is fine


def test_storage_align_is_refused(mm):
    sch, C, i, j, k = mm
    raises(sch, "storage_align: not supported: tilecraft schedules linalg on tensors",
           lambda: sch.storage_align(C, 0, 0, 16, 1))


def test_nested_parallel_loops_are_refused(mm):
    """Nested scf.forall loops deadlock MLIR's async runtime (every worker waits for an inner
    group no free worker runs): refused, in the block and across compute_at."""
    sch, C, i, j, k = mm
    sch.parallel(i)
    raises(sch, "loop 'j' and the parallel loop 'i' \\(of 'C'\\) would nest one scf.forall in another",
           lambda: sch.parallel(j))
    chained = tc.Schedule(chain())
    Cc = chained.get_block("C")
    ci, cj, ck = chained.get_loops(Cc)
    R = chained.get_block("R")
    chained.compute_at(R, ci)
    ri = chained.get_loops(R)[1]
    chained.parallel(ri)
    raises(chained, "loop 'i' and the parallel loop 'j' \\(of 'R'\\)", lambda: chained.parallel(ci))
    fused = tc.Schedule(matmul())
    fi, fj, fk = fused.get_loops(fused.get_block("C"))
    fused.parallel(fused.fuse(fi, fj))  # one multi-dimensional forall: fine
