"""The default (untuned) CPU schedule, expressed as transform-dialect scripts.

For every structured linalg op the planner picks, from the op's loop nest and the target:

1. a *thread* level: ``tile_using_forall`` over outer parallel loops, so the work splits
   into tasks for all cores (the ``scf.forall`` later becomes an async parallel loop);
   a ``linalg.fill`` that initializes the op's output is fused into each task;
2. a *register* level: ``tile_using_for`` so the innermost tile fits in vector registers
   (e.g. 8 x 32 f32 accumulators for a matmul on AVX-512), then the reduction loops;
3. ``decompose`` for 2-D convolutions and pooling (to their 1-D forms, which vectorize);
4. ``vectorize`` of the innermost tile.

The plan (:class:`OpSchedule`, or :class:`GroupSchedule` for a fusion group, group.py) is
data: script.py renders it as one ``transform.named_sequence`` per op, and apply.py's
``tilecraft-schedule`` pass applies it with MLIR's transform interpreter. The tuner's spaces
(space.py) produce the same plan objects, so a tuned schedule renders and applies alike.

The op classes have planners of their own: contractions in matmul_plan.py, convolutions
and pooling in conv_plan.py; this module holds the generic (elementwise and reduction)
planner and the dispatch.
"""

from __future__ import annotations

from dataclasses import replace

from ..pipelines.loop_nest import LoopNest
from ..pipelines.target import CacheHierarchy
from .conv_plan import plan_convolution
from .matmul_plan import column_blocks, plan_contraction, plans_as_contraction
from .op_schedule import DECOMPOSABLE, OpSchedule, thread_chunk, vector_registers, vector_tile

# Below this many loop iterations an op is not worth splitting across threads.
_MIN_PARALLEL_WORK = 1 << 15
# The same for convolutions, whose iterations are multiply-adds on vectors held in
# registers: a parallel loop costs an async dispatch and a wait on the other threads,
# which on a loaded machine exceeds a few microseconds of such work. At 1 << 15 the digits
# CNN's second conv (73k multiply-adds) was split and the model ran far behind onnxruntime,
# level with it on one thread (docs/performance.md). Other ops keep the lower
# threshold: a fusion group needs its anchor's thread level (schedule/group.py), and a
# BERT layer's softmax and layer norms (65k and 32k iterations at hidden 256) or
# ResNet-50's global pooling (100k) would fall apart into one loop nest per op.
_MIN_PARALLEL_CONV_WORK = 1 << 17
# Elementwise register tile: at most this many vectors per innermost tile.
_ELEMENTWISE_VECTORS = 4


def _work(nest: LoopNest) -> int:
    total = 1
    for extent in nest.ranges:
        total *= max(extent, 1)
    return total


def generic_vector_dim(nest: LoopNest) -> int:
    """The loop whose tile a generic op's vectors span: the innermost loop, unless that is a
    reduction while the contiguous (last) dim of the largest input is indexed by a parallel
    loop. Then that loop: a reduction over the rows of an NHWC image (global average pooling)
    vectorized along its reduced, strided columns ran at a tiny fraction of peak; along channels
    its vector accumulators stay in registers across the reduced loops."""
    innermost = len(nest.ranges) - 1
    inputs = [dims for dims in nest.operand_dims[:nest.num_inputs] if dims]
    if nest.parallel[innermost] or not inputs:
        return innermost
    contiguous = max(inputs, key=len)[-1]
    return contiguous if contiguous is not None and nest.parallel[contiguous] else innermost


def transposed_read_dim(nest: LoopNest, vector_dim: int) -> int | None:
    """The parallel loop that indexes the contiguous (last) dim of an input of an all-parallel
    op, where that is not the loop its vectors span (``vector_dim``): a transpose, or an
    elementwise op reading one operand transposed. Such an op gets a square register tile, a
    vector along each of the two loops, so that the input is read as whole vectors and
    transposed in registers. Why: tiled along the output's dim alone, each vector of the
    output gathered its elements one by one from a different row of the input, a column walk
    through it: a [3199, 256] -> [256, 3199] transpose (an audio encoder's output back to
    NCW) ran at 4.6x onnxruntime's time, ViT-sized [197, 768] at 2.4x
    (docs/performance.md, "Transposes")."""
    if nest.reduction_dims or not nest.parallel[vector_dim]:
        return None
    for dims in nest.operand_dims[:nest.num_inputs]:
        inner = dims[-1] if dims else None
        if inner is not None and inner != vector_dim and nest.parallel[inner] and nest.ranges[inner] > 1:
            return inner
    return None


def generic_thread_dim(nest: LoopNest, peeled_loops: tuple[int, ...] = ()) -> int | None:
    """The loop a generic op's tasks split: its outermost parallel loop of more than one
    iteration that is not peeled. Why not a peeled one: tasks of whole register tiles keep
    their shapes static, and a peeled loop's last task would hold the partial tile."""
    return next((d for d in nest.parallel_dims if nest.ranges[d] > 1 and d not in peeled_loops), None)


def _transpose_tile(extent: int, limit: int) -> int:
    """A transposed tile's side along one loop, at most ``limit``. The in-register transpose
    is a butterfly of shuffles on power-of-two sides (pipelines/vector/transpose_shuffles.py
    pads other sides, wasting up to half the shuffles), so the side is, in order of
    preference, where it is at least half of ``min(extent, limit)``:

    1. the largest power of two that divides ``extent`` (56 pixels: 8);
    2. the largest power of two whose last, partial tile is a power of two too, peeled
       (``OpSchedule.peeled_loops``; 28: 8, three tiles and a 4);
    3. the largest power of two from 4 up, its remainder peeled (197 tokens: 16, twelve
       tiles and a 5; 3199 frames: 199 tiles and a 15), where a divisor (197 is prime,
       3199 = 7 x 457) had made 1- or 7-wide tiles, a column walk at 1.5-2.6x
       onnxruntime's time (docs/performance.md, "Transposes as register shuffles");
    4. ``extent`` itself below 4 (an RGB image's 3 channels)."""
    if extent < 4:
        return extent
    cap = min(extent, limit)
    powers = [1 << k for k in range(cap.bit_length() - 1, 1, -1)]  # descending, >= 4
    half = [p for p in powers if 2 * p >= cap]
    for p in half:
        if extent % p == 0:
            return p
    for p in half:
        rest = extent % p
        if rest >= 2 and rest & (rest - 1) == 0:
            return p
    return powers[0]


def _transpose_tiles(nest: LoopNest, vector_dim: int, transposed: int, lanes: int) -> tuple[int, int]:
    """(tile of ``vector_dim``, tile of ``transposed``): each side at most a vector, and
    the tile at most half the register file (``vector_registers``), its input rows and
    shuffled rows live at once: 16 x 16 f32 on AVX-512 and 8 x 8 on AVX2, but 64 x 16
    for int8, whose 64 x 64 would spill."""
    budget = vector_registers(lanes * max(nest.element_bits, 8)) // 2 * lanes
    along = _transpose_tile(nest.ranges[vector_dim], lanes)
    return along, _transpose_tile(nest.ranges[transposed], max(1, min(lanes, budget // along)))


def _plan_generic(nest: LoopNest, tag: int, lanes: int, threads: int) -> OpSchedule:
    n_loops = len(nest.ranges)
    if n_loops == 0:
        return OpSchedule(tag)
    register = [0] * n_loops
    reduction = [0] * n_loops
    vector_dim = generic_vector_dim(nest)
    transposed = transposed_read_dim(nest, vector_dim)
    for d in range(n_loops):
        tiles = register if nest.parallel[d] else reduction
        tiles[d] = vector_tile(nest.ranges[d], lanes, _ELEMENTWISE_VECTORS) if d == vector_dim else 1
    peeled: tuple[int, ...] = ()
    if transposed is not None:
        register[vector_dim], register[transposed] = _transpose_tiles(nest, vector_dim, transposed, lanes)
        peeled = tuple(sorted(d for d in (vector_dim, transposed) if nest.ranges[d] % register[d]))
    thread = None
    outer = generic_thread_dim(nest, peeled)
    if outer is not None:
        thread = [0] * n_loops
        thread[outer] = thread_chunk(nest.ranges[outer], max(register[outer], 1), threads)
    # A product of three or more inputs reduced over several loops vectorizes into a
    # vector.contract with several reduction dims, whose LLVM lowering aborts the process
    # (MLIR 22 assertion in the outer-product lowering): keep such ops scalar.
    crashes_contract_lowering = nest.num_inputs > 2 and len(nest.reduction_dims) > 1
    return OpSchedule(
        tag,
        thread_tiles=tuple(thread) if thread else None,
        register_tiles=tuple(register) if any(register) else None,
        reduction_tiles=tuple(reduction) if any(reduction) else None,
        vectorize=not crashes_contract_lowering,
        peeled_loops=peeled,
    )


def plan_default_schedule(nest: LoopNest, tag: int, *, vector_bits: int, num_threads: int,
                          caches: CacheHierarchy = CacheHierarchy()) -> OpSchedule:
    """Pick the default schedule of one op from its loop nest and the target.

    ``caches``: the target's data caches (``Target.caches``); the default is the
    conservative hierarchy, so a plan never assumes a cache the machine may lack.
    """
    lanes = max(1, vector_bits // max(nest.element_bits, 8))
    if 0 in nest.ranges:
        # Nothing to compute; and tiling a zero-extent loop next to a dynamic one aborts
        # (MLIR 22 assertion "expected as many ivs as non-zero sizes").
        return OpSchedule(tag)
    if not nest.projected and nest.op_name not in DECOMPOSABLE:
        # Index expressions such as `2 - d1` (a flipped window) abort linalg's tiling inside
        # the process (an assertion, not a recoverable error): leave such ops as loops.
        return OpSchedule(tag)
    if not nest.static:
        # Dynamic extents: distribute the outermost parallel loop, leave the rest scalar.
        if not nest.parallel_dims or num_threads == 1:
            return OpSchedule(tag)
        thread = [0] * len(nest.ranges)
        outer = nest.parallel_dims[0]
        extent = nest.ranges[outer]
        thread[outer] = 1 if extent < 0 else max(1, -(-extent // num_threads))
        return OpSchedule(tag, thread_tiles=tuple(thread))
    min_work = _MIN_PARALLEL_WORK
    contraction = plans_as_contraction(nest)
    if contraction:
        plan = plan_contraction(nest, tag, lanes, num_threads, caches, vector_registers(vector_bits))
    elif nest.convolution and nest.op_name in DECOMPOSABLE:
        plan = plan_convolution(nest, tag, lanes, num_threads, vector_registers(vector_bits))
        if not nest.op_name.startswith("linalg.pooling"):
            min_work = _MIN_PARALLEL_CONV_WORK
    else:
        plan = _plan_generic(nest, tag, lanes, num_threads)
    if num_threads == 1 or _work(nest) < min_work or not plan.thread_tiles:
        if contraction and plan.thread_tiles:
            plan = column_blocks(nest, plan)
        plan = replace(plan, thread_tiles=None)
    return plan
