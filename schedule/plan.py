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
"""

from __future__ import annotations

import math

from dataclasses import dataclass, replace

from ..pipelines.loop_nest import LoopNest
from ..pipelines.target import CacheHierarchy

TAG = "tilecraft.op_id"

# Named ops `transform.structured.decompose` turns into 1-D forms the vectorizer handles.
DECOMPOSABLE = frozenset(
    {
        "linalg.conv_2d_nchw_fchw", "linalg.conv_2d_nhwc_hwcf", "linalg.depthwise_conv_2d_nhwc_hwc",
        "linalg.pooling_nchw_max", "linalg.pooling_nchw_sum", "linalg.pooling_nhwc_max",
        "linalg.pooling_nhwc_sum", "linalg.pooling_nhwc_min",
    }
)
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
# Matmul task columns (of the output) per thread, at most; the B block they make takes at
# most 1/_MATMUL_PANEL_L2_FRACTION of L2 (below).
_MATMUL_TASK_COLS = 256
# Matmul register tile: rows x (vector lanes * _MATMUL_REGISTER_VECTORS) accumulators, at
# most (``matmul_register_rows``). Rows need not divide M: the last tile is peeled
# (``matmul_rows_tile``).
_MATMUL_REGISTER_ROWS, _MATMUL_REGISTER_VECTORS = 8, 2
# Weight panels per register tile, at most (matmuls on panels: panel_register_tile). Three
# 16-lane panels make 8 x 3 = 24 accumulators: per k step 8 broadcasts and 3 loads feed 24
# FMAs instead of 10 feeding 16. BERT's projections and a C model of the loop ran faster
# than with 8 x 32 (docs/performance.md, round 14). Four would need 32
# accumulators: a spill.
_MATMUL_REGISTER_PANELS = 3
# Matmul K cache block: the A sliver (register rows x block) that the N register loop reuses
# takes at most this fraction of L1d; the rest holds B's rows streaming through and C's
# accumulator lines. A block below half its limit (K with no fitting divisor) is not used.
_MATMUL_SLIVER_L1_FRACTION = 4
# The B block (K block x task columns) that the M register loop rereads: half of L2.
_MATMUL_PANEL_L2_FRACTION = 2
# The A block (task rows x K block) the task's column panels reread: a quarter of L2. Task
# rows are as many as that holds (_plan_contraction).
_MATMUL_ROWS_L2_FRACTION = 4
# Bytes of one L1d way (sets x line: 4 KB for x86's 32K 8-way and 48K 12-way caches). Rows
# of A whose stride is a multiple of it map to the same sets: a sliver of them evicts itself.
_L1_WAY_BYTES = 4096
# Elementwise register tile: at most this many vectors per innermost tile.
_ELEMENTWISE_VECTORS = 4
# Output-channel vectors in the register tile of a convolution with output channels, at
# most: 2 for every such convolution, 4 for a filter-heavy 1x1 (filter_heavy), as far as the
# register file holds them (conv_register_tile).
_CONV_VECTORS, _HEAVY_CONV_VECTORS = 2, 4
# Output pixels (along the row) in a convolution's register tile, at most.
_CONV_REGISTER_PIXELS = 8
# Input channels per step of a convolution's reduction, at most. 4, not 8: once the tuner
# measured kernels with their weights cold, as a model whose weights outgrow the last-level
# cache runs them (docs/tuning.md, "What is timed"), its validated bests on ResNet-50 took a
# step of 4 (or 1) in most conv tasks; whole ResNet-50 then ran faster than with step 8,
# MobileNetV2 unchanged (docs/performance.md).
_CONV_INPUT_STEP = 4


def vector_registers(vector_bits: int) -> int:
    """Vector registers the register tiles may fill: 32 with AVX-512 (zmm0-31), else 16 (the
    x86 AVX2/SSE file; AArch64's 32 NEON registers are counted as 16, which only makes its
    tiles smaller than they could be)."""
    return 32 if vector_bits >= 512 else 16


def conv_register_tile(width: int, out_channels: int, in_channels: int | None, lanes: int,
                       registers: int, heavy_pointwise: bool) -> tuple[int, int, int | None]:
    """(pixels, output channels, input-channel step) of a convolution's register tile.

    The tile's FMAs each take a filter vector and a broadcast input pixel: per input channel
    it loads ``vectors`` filter vectors and broadcasts ``pixels`` inputs for ``pixels x
    vectors`` FMAs. With one vector (7 pixels x 16 channels) that is 8 loads per 7 FMAs: the
    two load ports, not the two FMA units, set the pace (the hot loop checked in assembly:
    64 loads per 56 FMAs), and 7 accumulators do not cover 2 units x 4 cycles of FMA latency.
    Two vectors halve the loads per FMA and hold 14-16 accumulators. The tile must fit the
    register file with the filter vectors of one reduction step (LLVM loads a step's filter
    vectors ahead of its FMAs) and the broadcast: a 7 x 4-vector tile (28 accumulators) spilled
    159 times per hot loop; the input-channel step shrinks first, then the vectors.
    """
    pixels = largest_divisor(width, _CONV_REGISTER_PIXELS)
    step = largest_divisor(in_channels, _CONV_INPUT_STEP) if in_channels else None
    # Powers of two: 3-vector (48-channel) tiles of MobileNetV2's 576-channel 1x1 layers ran
    # slower than 1-vector ones (docs/performance.md, MobileNetV2).
    for vectors in (4, 2, 1):
        if vectors > (_HEAVY_CONV_VECTORS if heavy_pointwise else _CONV_VECTORS):
            continue
        if out_channels % (vectors * lanes) or pixels * vectors + vectors + 1 > registers:
            continue
        if step is not None:
            while step > 1 and pixels * vectors + step * vectors + 1 > registers:
                step = largest_divisor(in_channels, step - 1)
        return pixels, vectors * lanes, step
    # No whole vector of channels: narrower vectors (24 channels: 8-lane ones, not 12-lane
    # ones, whose odd width LLVM lowers to masked or split operations).
    part = min(lanes, out_channels & -out_channels)
    return pixels, vector_tile(out_channels, part, lanes // part), step


@dataclass(frozen=True)
class OpSchedule:
    """The knobs of one op's schedule; ``None`` skips a level, 0 leaves a loop untiled."""

    tag: int
    thread_tiles: tuple[int, ...] | None = None
    fused_init_tag: int | None = None
    init_register_tiles: tuple[int, ...] | None = None
    register_tiles: tuple[int, ...] | None = None
    reduction_tiles: tuple[int, ...] | None = None
    decompose: bool = False
    vectorize: bool = False
    # Levels the tuner's spaces use (tilecraft.tuning); the default plans leave them unset,
    # so the default scripts are unchanged. Order in the script: thread, cache, outer
    # register, packing, register, reduction.
    cache_tiles: tuple[int, ...] | None = None
    cache_interchange: tuple[int, ...] | None = None
    outer_register_tiles: tuple[int, ...] | None = None
    register_interchange: tuple[int, ...] | None = None
    # (operand index, operand rank) of operands whose tile is copied into a fresh contiguous
    # buffer (array packing) once per outer-register tile, before the register level reads
    # it many times.
    packed_operands: tuple[tuple[int, int], ...] = ()
    # Loops whose register tile (outer register level if it tiles them, else the register
    # level) need not divide the loop's extent within its task: the main loop runs whole
    # tiles, and the last, partial tile is peeled off as a separate (static, smaller) tile
    # that is vectorized too (script.py, ``peel_partial_tiles``). Why: a tile that must divide
    # its loop left 128 rows with 4-row matmul tiles on AVX2, where 6 fit the register file.
    peeled_loops: tuple[int, ...] = ()

    @property
    def sequence_name(self) -> str:
        return f"schedule_op_{self.tag}"


@dataclass(frozen=True)
class GroupSchedule:
    """A fusion group scheduled as one loop nest (planned by ``schedule/group.py``).

    ``root`` is the group's last op: its ``thread_tiles`` tile the whole group with one
    ``scf.forall``. ``producers`` are the group's other ops, consumers first, each fused into
    that ``scf.forall`` and then given its own inner levels (its plan's ``thread_tiles`` are
    unset). ``fallback`` holds the ops' own plans, applied if the group's sequence fails.
    """

    root: OpSchedule
    producers: tuple[OpSchedule, ...]
    fallback: tuple[OpSchedule, ...] = ()
    # Reshapes sit between fused ops: move each slice above its reshape before fusing.
    bubble_up_slices: bool = False
    # The anchor has no thread level (too little work to split, or a one-thread target):
    # the root's tiles (``sequential_tiles``) still make one loop nest of the group, and
    # its ``scf.forall`` becomes ``scf.for`` loops (no async dispatch per tile).
    sequential: bool = False
    # A convolution anchor's register tile carried onto the root's loops (conv_kernels.py):
    # the epilogue ops and the conv are fused into that tile's loop, so the epilogue runs on
    # the accumulators. ``None``: each op keeps its own inner loop nest in the task.
    accumulator_tiles: tuple[int, ...] | None = None
    accumulator_interchange: tuple[int, ...] | None = None
    anchor_tag: int | None = None

    @property
    def tag(self) -> int:
        return self.root.tag

    @property
    def sequence_name(self) -> str:
        return f"schedule_group_{self.root.tag}"


def largest_divisor(n: int, limit: int, multiple_of: int = 1) -> int:
    """The largest divisor of ``n`` that is ``<= limit`` and a multiple of ``multiple_of``.

    Falls back to ``multiple_of`` constraints being dropped, then to 1: a tile that divides
    its loop keeps every tile the same static shape, which vectorization needs.
    """
    for step in (multiple_of, 1):
        for candidate in range(min(n, limit), 0, -1):
            if n % candidate == 0 and candidate % step == 0:
                return candidate
    return 1


def vector_tile(extent: int, lanes: int, max_vectors: int) -> int:
    """Innermost tile: whole vectors where the extent allows, at most ``max_vectors`` of them."""
    return largest_divisor(extent, lanes * max_vectors, multiple_of=lanes if extent >= lanes else 1)


def accumulator_row(extent: int, part: int, max_vectors: int, lanes: int) -> int:
    """A matmul register tile's width: :func:`vector_tile`'s choice when it fits one
    ``lanes``-wide register, else a power-of-two count of ``part``-wide vectors dividing
    ``extent`` (at most ``max_vectors``).

    Why powers of two: LLVM's lowering of a contraction whose accumulator rows are three
    vectors wide (N = 72 with 8-lane parts: 24 columns) came out as scalar code: an 80x64x72
    matmul ran scalar; 8 columns at a time it runs vectorized (benchmarks/recurrent.py's
    GRU input projection). A row within one register (N = 10: 10 columns) lowers well."""
    width = vector_tile(extent, part, max_vectors)
    if width <= lanes or extent % part:
        return width
    vectors = 1 << (max(max_vectors, 1).bit_length() - 1)
    while vectors > 1 and extent % (part * vectors):
        vectors //= 2
    return part * vectors


def panel_register_tile(panels: int, panel_vectors: int, rows: int, registers: int) -> int:
    """Weight panels in a matmul's register tile: the most, up to ``_MATMUL_REGISTER_PANELS``,
    that divide ``panels`` and whose accumulators (``rows`` x panels x ``panel_vectors``), one
    k step's panel vectors and a broadcast fit the register file."""
    for count in range(_MATMUL_REGISTER_PANELS, 1, -1):
        vectors = count * panel_vectors
        if panels % count == 0 and rows * vectors + vectors + 1 <= registers:
            return count
    return 1


def wide_rows(nest: LoopNest, m_dims: tuple[int, ...]) -> tuple[int, ...]:
    """A contraction's row loops less those of extent 1 (all of them if none is wider). Why:
    the register tile takes its rows from the innermost row loop, and a unit one there
    (``nn.MultiheadAttention``'s sequence-first [197, 1, 768], whose reshapes the simplify
    stage folds into the matmul as rows (216, 1)) gave 1-row tiles and hid the weight
    panels: the ViT's MLP matmuls ran far behind onnxruntime (round 17)."""
    wide = tuple(d for d in m_dims if nest.ranges[d] > 1)
    return wide or tuple(m_dims[-1:])


def matmul_register_rows(columns: int, lanes: int, registers: int) -> int:
    """Rows of a matmul register tile ``columns`` wide, at most: ``_MATMUL_REGISTER_ROWS``
    where the accumulators, a broadcast of A and one k step's vectors of B fit the register
    file (as ``panel_register_tile`` counts them). With AVX2's 16 registers, 8 rows of 16
    columns (two 8-lane vectors) are 16 accumulators alone: they spilled, and a 192 x 768 x
    3072 matmul ran at less than half the rate of 6 rows (docs/performance.md, round 17).
    7 rows (14 accumulators, counting one vector of B) ran 128 x 768 x 3072 at about 0.7x
    the rate of 6 once partial tiles let 7 be chosen (docs/performance.md, "Partial
    register tiles")."""
    vectors = max(columns // lanes, 1)
    return max(1, min(_MATMUL_REGISTER_ROWS, (registers - vectors - 1) // vectors))


def thread_chunk(extent: int, register_tile: int, num_threads: int) -> int:
    """Tile size splitting ``extent`` into about ``2 * num_threads`` equal tasks."""
    units = extent // register_tile
    target_tasks = min(units, 2 * num_threads)
    for tasks in range(target_tasks, units + 1):
        if units % tasks == 0:
            return units // tasks * register_tile
    return extent


def _work(nest: LoopNest) -> int:
    total = 1
    for extent in nest.ranges:
        total *= max(extent, 1)
    return total


def _plan_contraction(nest: LoopNest, tag: int, lanes: int, threads: int,
                      caches: CacheHierarchy, registers: int) -> OpSchedule:
    """GotoBLAS's blocking, sized from the caches (docs/tuning.md, "The default schedule").

    Thread tasks of C, a K cache block whose A sliver stays in L1d while the N register loop
    reuses it (the sliver packed contiguously: both measured faster on 1024-2048 GEMMs
    than the unblocked plan), task columns whose B block stays in L2 while the M
    register loop rereads it, task rows as many as a quarter of L2 holds (so a weight
    matrix streamed from memory is read once per row block, not once per 64 rows), and
    register tiles of accumulators.
    """
    batch, m_dims, n_dims, k_dims = nest.contraction
    m_dims = wide_rows(nest, m_dims)
    n_loops = len(nest.ranges)
    register = [0] * n_loops
    reduction = [0] * n_loops
    for d in nest.parallel_dims:
        register[d] = 1
    m, n, k = m_dims[-1], n_dims[-1], k_dims[-1]
    # Whole vectors, narrower ones where N has no multiple of the lanes: N = 1000 with 16
    # lanes gets 8 columns (one 256-bit vector), not 25 (odd-width vectors ran far slower).
    part = min(lanes, nest.ranges[n] & -nest.ranges[n])
    register[n] = accumulator_row(nest.ranges[n], part, _MATMUL_REGISTER_VECTORS * lanes // part, lanes)
    register[m] = matmul_rows_tile(nest.ranges[m], matmul_register_rows(register[n], lanes, registers))
    peeled = nest.ranges[m] % register[m] != 0
    for d in k_dims:
        reduction[d] = 1
    element_bytes = max(nest.element_bits // 8, 1)
    sliver_limit = caches.l1d // (_MATMUL_SLIVER_L1_FRACTION * register[m] * element_bytes)
    block_k = largest_divisor(nest.ranges[k], max(sliver_limit, 1))
    blocked = len(k_dims) == 1 and nest.ranges[k] > block_k >= sliver_limit // 2
    sliver_k = block_k if blocked else nest.ranges[k]
    thread = [0] * n_loops
    batch_tasks = 1
    for d in batch:
        thread[d] = 1
        batch_tasks *= nest.ranges[d]
    # Batches alone make enough tasks for every thread (attention's 12 heads): keep M whole,
    # so a producer fused into each task (a transposed K) is computed once per batch, not
    # once per row block (measured faster on BERT's 12x128 batch matmuls).
    # Otherwise a task takes as many rows as the L2 share holds: every task rereads its B
    # block (K x task columns) once per row block, and B is a weight matrix streamed from
    # memory (BERT's 9 MB FFN weights): tasks of 64 of its 128 rows read each weight twice
    # and the 2-layer encoder ran slower than with all 128 rows per task
    # (docs/performance.md, round 6).
    rows = nest.ranges[m] if batch_tasks >= 2 * threads else max(
        caches.l2 // (_MATMUL_ROWS_L2_FRACTION * sliver_k * element_bytes), register[m])
    # Tasks are whole multiples of the register tile where M has such a divisor; otherwise any
    # divisor (each task then peels its own partial last tile: task shapes stay static).
    thread[m] = whole_row_tasks(nest.ranges[m], largest_divisor(nest.ranges[m], rows, multiple_of=register[m]),
                                register[m])
    panel_cols = caches.l2 // (_MATMUL_PANEL_L2_FRACTION * sliver_k * element_bytes)
    cols = max(min(_MATMUL_TASK_COLS, panel_cols), register[n])
    thread[n] = largest_divisor(nest.ranges[n], cols, multiple_of=register[n])
    panels = weight_panel_dims(nest)
    # Column blocks, as (loop, register tile): weights packed as panels
    # (pipelines/graph/weight_panels.py) make the columns (panel, column in panel), and a
    # task takes whole panels, as many as its columns.
    col_loop, col_unit = n, register[n]
    if panels is not None:
        outer_n, inner_n = panels
        thread[inner_n] = 0
        register[outer_n] = panel_register_tile(nest.ranges[outer_n], max(register[n] // lanes, 1),
                                                register[m], registers)
        col_loop, col_unit = outer_n, register[outer_n]
        thread[outer_n] = largest_divisor(nest.ranges[outer_n], max(col_unit, cols // nest.ranges[inner_n]),
                                          multiple_of=col_unit)

    def tasks() -> int:
        return batch_tasks * (nest.ranges[m] // thread[m]) * (nest.ranges[col_loop] // thread[col_loop])

    # Too few tasks for the threads: more column tasks (each rereads only its rows of A,
    # not the weights), then more row tasks. A column task is cut into divisors of itself,
    # so task boundaries stay where they were (every 256 columns): a consumer that slices
    # the result (a fused Q/K/V projection split into Q, K and V) still reads whole tasks.
    while tasks() < 2 * threads and thread[col_loop] > col_unit:
        thread[col_loop] = largest_divisor(thread[col_loop], thread[col_loop] // 2, multiple_of=col_unit)
    if tasks() < 2 * threads:
        # thread_chunk's tasks are multiples of its unit, which must divide M.
        unit = register[m] if not peeled else largest_divisor(nest.ranges[m], register[m])
        thread[m] = whole_row_tasks(nest.ranges[m], thread_chunk(nest.ranges[m], unit, threads), register[m])
    cache = None
    if blocked:
        cache = [0] * n_loops
        cache[k] = block_k
    # Packing A: the M register loop moves outside, one sliver is copied per M step and read
    # by every N register tile of the task. Only for A laid out (batch, M, K), the space's
    # pack_a, and only where the sliver fits the L1d share and is reused, and where A's rows
    # alias in L1d (K = 1024, 2048, 3072 f32): other slivers stay cached unpacked, and the
    # copy cost time (K = 64, 128, 768).
    outer = None
    packed: tuple[tuple[int, int], ...] = ()
    rows_alias = nest.ranges[k] * element_bytes % _L1_WAY_BYTES == 0
    if (len(m_dims) == 1 and nest.operand_dims[:1] == ((*batch, m, k),) and rows_alias
            and sliver_k <= sliver_limit and nest.ranges[m] > register[m]
            and thread[n] >= 2 * register[n]):
        outer = [0] * n_loops
        outer[m], register[m] = register[m], 0
        packed = ((0, len(batch) + 2),)
    return OpSchedule(tag, thread_tiles=tuple(thread),
                      cache_tiles=tuple(cache) if cache else None,
                      outer_register_tiles=tuple(outer) if outer else None,
                      packed_operands=packed, register_tiles=tuple(register),
                      reduction_tiles=tuple(reduction), vectorize=True,
                      peeled_loops=(m,) if peeled else ())


def whole_row_tasks(rows: int, task_rows: int, register_rows: int) -> int:
    """``task_rows``, or where that is less than one register tile, the smallest divisor of
    ``rows`` that holds one. Why: tasks must divide M (their shapes stay static), and an M
    with no divisor near the cache-sized task (a prime: a ViT's 197 tokens) otherwise got
    tasks of 1 row, each a 1-row tile: the ViT's MLP matmuls ran 2.5x slower than with the
    rows padded to 216 (docs/performance.md, "Partial register tiles")."""
    if task_rows >= register_rows:
        return task_rows
    return next(d for d in range(register_rows, rows + 1) if rows % d == 0) if rows > register_rows else rows


def matmul_rows_tile(rows: int, cap: int) -> int:
    """A matmul register tile's rows for a loop of ``rows``, at most the register file's
    ``cap`` (``matmul_register_rows``): the largest divisor of ``rows`` where it makes as few
    tiles as ``cap`` rows would (14 rows, cap 8: two 7-row tiles), else ``cap``, with the
    last, partial tile peeled (``OpSchedule.peeled_loops``). Why not always a divisor: 128
    rows took 4-row tiles on AVX2 (32 tiles), where 6 rows fill the register file (21 whole
    tiles and a 2-row remainder): a 768 -> 3072 Linear layer ran 1.2x faster, a BERT-base
    layer 1.19x (docs/performance.md, "Partial register tiles")."""
    divisor = largest_divisor(rows, cap)
    return divisor if rows // divisor == -(-rows // cap) else cap


def plans_as_contraction(nest: LoopNest) -> bool:
    """Whether the schedules plan ``nest`` as a contraction (GotoBLAS blocking, the matmul
    space): a contraction with M and N loops and projected-permutation maps. A
    matrix-vector product (no N) is planned as a generic op."""
    return bool(nest.contraction and nest.projected and nest.contraction[1] and nest.contraction[2])


def column_loop(nest: LoopNest) -> int:
    """The loop a contraction's column blocks tile: whole weight panels where B is stored as
    panels (``weight_panel_dims``), else N."""
    panels = weight_panel_dims(nest)
    return panels[0] if panels is not None else nest.contraction[2][-1]


def weight_panel_dims(nest: LoopNest) -> tuple[int, int] | None:
    """(panel loop, column-in-panel loop) of a contraction whose B is packed as column
    panels ``B'[nb, k, j]`` and whose output is ``C[m, nb, j]`` (weight_panels.py), or None."""
    if not nest.contraction:
        return None
    _batch, m_dims, n_dims, k_dims = nest.contraction
    if len(n_dims) != 2 or len(wide_rows(nest, m_dims)) != 1 or len(k_dims) != 1 or len(nest.operand_dims) < 3:
        return None
    outer_n, inner_n = n_dims
    if nest.operand_dims[1] != (outer_n, k_dims[0], inner_n) or nest.output_dims[-2:] != (outer_n, inner_n):
        return None
    return outer_n, inner_n


def conv_channel_dim(nest: LoopNest) -> int | None:
    """The channel loop of a depthwise convolution or a pooling op, when it indexes the
    output's contiguous (last) dim as in NHWC; ``None`` otherwise and for convolutions with
    output channels. (linalg counts a pooling op's channels as a batch dim.)"""
    batch, _image, out_channel, _filter, _in_channel, depth = nest.convolution
    last = nest.output_dims[-1] if nest.output_dims else None
    if out_channel or last is None or (last not in depth and last not in batch):
        return None
    return last


def _plan_convolution(nest: LoopNest, tag: int, lanes: int, threads: int, registers: int) -> OpSchedule:
    batch, image, out_channel, filter_loop, in_channel, depth = nest.convolution
    channel = conv_channel_dim(nest)
    batch = tuple(d for d in batch if d != channel)
    n_loops = len(nest.ranges)
    register = [0] * n_loops
    reduction = [0] * n_loops
    for d in nest.parallel_dims:
        register[d] = 1
    interchange = None
    input_step = None
    if out_channel:
        oc = out_channel[-1]
        heavy = filter_heavy(nest)
        if image and nest.output_dims and nest.output_dims[-1] == oc:
            # NHWC: the vectors run along the output channels (an NCHW conv, below
            # opt_level 3, keeps one vector's worth of channels).
            pointwise = all(nest.ranges[d] == 1 for d in filter_loop)
            pixels, register[oc], input_step = conv_register_tile(
                nest.ranges[image[-1]], nest.ranges[oc], nest.ranges[in_channel[-1]] if in_channel else None,
                lanes, registers, heavy and pointwise)
            register[image[-1]] = pixels
        else:
            register[oc] = largest_divisor(nest.ranges[oc], lanes)
        if heavy:
            interchange = channels_outer(nest)
    elif channel is not None:
        # Depthwise/pooling in NHWC: every output pixel of the register tile reuses the
        # filter vector, so the tile is one vector of the contiguous channels by several
        # pixels, accumulated in registers over the (kh, kw) window. Tiled by 1 (pooling:
        # also split into one task per channel) the channel loop ran scalar.
        # As for matmul columns, whole vectors, narrower ones where the channels have no
        # multiple of the lanes (24 channels: 8-lane vectors, not 12-lane ones).
        part = min(lanes, nest.ranges[channel] & -nest.ranges[channel])
        register[channel] = vector_tile(nest.ranges[channel], part, lanes // part)
    if image and register[image[-1]] == 1:
        register[image[-1]] = largest_divisor(nest.ranges[image[-1]], _CONV_REGISTER_PIXELS)
    for d in nest.reduction_dims:
        reduction[d] = 1
    if in_channel:
        reduction[in_channel[-1]] = input_step or largest_divisor(nest.ranges[in_channel[-1]], _CONV_INPUT_STEP)
    thread = [0] * n_loops
    for d in batch:
        thread[d] = 1
    images = 1
    for d in batch:
        images *= nest.ranges[d]
    rows = balanced_chunk(nest.ranges[image[0]], threads) if image else None
    if images % threads == 0:
        pass  # one task per image already keeps every thread busy
    elif out_channel and filter_heavy(nest):
        # Tasks split by output channels each read the whole input and their slice of the
        # filter; tasks split by rows each read their band of the input and the whole
        # filter. Where the filter outweighs the image (ResNet-50's 28x28 3x3 layers and
        # everything at 14x14: 2 tasks of 7 rows each streamed up to 2.4 MB of filter),
        # channels. Whole models moved within the noise, ResNet-50's strided 1x1 layers
        # closer to numpy's GEMM rate in its profile (docs/performance.md, round 6).
        d = out_channel[-1]
        thread[d] = thread_chunk(nest.ranges[d], register[d], threads)
    elif rows is not None:
        # Tasks split the output image by rows: each reads its band of the input plus a
        # halo, and the whole filter, which is the lighter of the two here.
        thread[image[0]] = rows
    elif out_channel or channel is not None:
        # Rows that do not split evenly (7x7 layers, global pooling): split the channels.
        d = out_channel[-1] if out_channel else channel
        thread[d] = thread_chunk(nest.ranges[d], register[d], threads)
    elif image:
        d = image[0]
        thread[d] = thread_chunk(nest.ranges[d], register[d], threads)
    return OpSchedule(tag, thread_tiles=tuple(thread), register_tiles=tuple(register),
                      register_interchange=interchange, reduction_tiles=tuple(reduction),
                      decompose=True, vectorize=True)


# Bytes of a convolution's output a sequential group tile holds (``sequential_tiles``): the
# tile's intermediates (the anchor's result before its epilogue) stay in L2.
_SEQUENTIAL_TILE_L2_FRACTION = 4


def sequential_tiles(nest: LoopNest, caches: CacheHierarchy = CacheHierarchy(),
                     register_tiles: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
    """Tiles of a sequential loop that computes a fusion group anchored on this convolution
    or pooling op when it has no thread level (``GroupSchedule.sequential``): one image at a
    time and bands of output rows whose output slice takes at most a quarter of L2, so the
    anchor's result is consumed by its epilogue (batch norm, ReLU6, residual add) while it
    is in cache instead of written whole and read back by one loop nest per op. A
    filter-heavy convolution (``filter_heavy``) gets bands of output channels instead, whole
    multiples of its register tile's (``register_tiles``): a band of rows streamed its whole
    filter once per band (ResNet-50's 7x7 512 -> 2048 layer ran far behind onnxruntime on
    one thread), while in a band of channels the register tiles keep the channels
    outermost (``channels_outer``) and read each filter slice once. ``None`` for other ops
    (a matmul or a reduction keeps one loop nest per op there)."""
    if not nest.convolution or nest.op_name not in DECOMPOSABLE or not nest.static:
        return None
    batch, image, out_channel, *_ = nest.convolution
    channel = conv_channel_dim(nest)
    if not image:
        return None
    tiles = [0] * len(nest.ranges)
    for d in batch:
        if d != channel and nest.ranges[d] > 1:
            tiles[d] = 1
    element_bytes = max(nest.element_bits // 8, 1)
    if out_channel and filter_heavy(nest):
        oc = out_channel[-1]
        image_bytes = element_bytes * math.prod(nest.ranges[d] for d in image)
        width = register_tiles[oc] if register_tiles and register_tiles[oc] else 1
        channels = max(caches.l2 // (_SEQUENTIAL_TILE_L2_FRACTION * image_bytes), width)
        tiles[oc] = largest_divisor(nest.ranges[oc], channels, multiple_of=width)
    else:
        row_bytes = element_bytes
        for d in nest.output_dims:
            if d is not None and d != image[0] and (d not in batch or d == channel):
                row_bytes *= nest.ranges[d]
        rows = max(caches.l2 // (_SEQUENTIAL_TILE_L2_FRACTION * row_bytes), 1)
        tiles[image[0]] = largest_divisor(nest.ranges[image[0]], rows)
    if all(tile in (0, extent) for tile, extent in zip(tiles, nest.ranges)):
        return None  # one band would hold the whole output: it stays in L2 without fusion
    return tuple(tiles)


def filter_heavy(nest: LoopNest) -> bool:
    """Whether a convolution's filter outweighs its output image: more filter taps times
    output channels than output pixels (ResNet's 14x14 and 7x7 layers). Such a layer streamed
    its whole filter (up to 9 MB at 7x7x512) from memory once per output row; with the output channels outermost (``channels_outer``) each filter slice stays
    in cache across all rows. A 1x1 (pointwise) one may take up to 4 channel vectors per
    register tile where the register file holds them (``conv_register_tile``; at 7 pixels it
    does not, and 4 vectors by 8 pixels, 32 accumulators, spilled and ran slower than one)."""
    _batch, image, out_channel, filter_loop, _in_channel, _depth = nest.convolution
    taps, pixels = 1, 1
    for d in (*filter_loop, *out_channel):
        taps *= nest.ranges[d]
    for d in image:
        pixels *= nest.ranges[d]
    return bool(out_channel and image) and taps > pixels


def channels_outer(nest: LoopNest) -> tuple[int, ...]:
    """Loop interchange putting a convolution's output-channel loop before its batch and
    image loops (register tiling level): see ``filter_heavy``."""
    batch, image, out_channel, *_ = nest.convolution
    order = [d for d in range(len(nest.ranges)) if d != out_channel[-1]]
    order.insert(min((*batch, *image)), out_channel[-1])
    return tuple(order)


def balanced_chunk(extent: int, threads: int) -> int | None:
    """Tile size splitting ``extent`` into ``2 * threads`` or ``threads`` equal tasks (every
    thread gets as many), or ``None`` when neither divides it."""
    for tasks in (2 * threads, threads):
        if tasks > 1 and extent % tasks == 0:
            return extent // tasks
    return None


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


def _plan_generic(nest: LoopNest, tag: int, lanes: int, threads: int) -> OpSchedule:
    n_loops = len(nest.ranges)
    if n_loops == 0:
        return OpSchedule(tag)
    register = [0] * n_loops
    reduction = [0] * n_loops
    vector_dim = generic_vector_dim(nest)
    for d in range(n_loops):
        tiles = register if nest.parallel[d] else reduction
        tiles[d] = vector_tile(nest.ranges[d], lanes, _ELEMENTWISE_VECTORS) if d == vector_dim else 1
    thread = None
    outer = next((d for d in nest.parallel_dims if nest.ranges[d] > 1), None)
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
        plan = _plan_contraction(nest, tag, lanes, num_threads, caches, vector_registers(vector_bits))
    elif nest.convolution and nest.op_name in DECOMPOSABLE:
        plan = _plan_convolution(nest, tag, lanes, num_threads, vector_registers(vector_bits))
        if not nest.op_name.startswith("linalg.pooling"):
            min_work = _MIN_PARALLEL_CONV_WORK
    else:
        plan = _plan_generic(nest, tag, lanes, num_threads)
    if num_threads == 1 or _work(nest) < min_work or not plan.thread_tiles:
        if contraction and plan.thread_tiles:
            plan = _column_blocks(nest, plan)
        plan = replace(plan, thread_tiles=None)
    return plan


def _column_blocks(nest: LoopNest, plan: OpSchedule) -> OpSchedule:
    """A contraction without a thread level keeps its tasks' column blocks as a sequential
    cache level, outside the K block (GotoBLAS's jc loop): each B block (K block x task
    columns, sized to half of L2 by ``_plan_contraction``) is then reread from L2 by every
    row tile. Without it, one thread's row tiles each streamed all of B's columns: BERT's
    768 x 3072 FFN weights, 4.7 MB per K block, from L3 once per 8 rows, and the layer ran
    well behind onnxruntime on one thread."""
    column = column_loop(nest)
    block = plan.thread_tiles[column]
    if not block or block >= nest.ranges[column]:
        return plan
    cache = list(plan.cache_tiles or (0,) * len(nest.ranges))
    cache[column] = block
    return replace(plan, cache_tiles=tuple(cache))
