"""The default schedule of contractions (matmuls, batched matmuls, 1x1 convolutions as
matmuls): GotoBLAS's blocking sized from the target's caches, register tiles of
accumulators sized from its register file, weight panels, partial (peeled) last row tiles.

Why a module of its own: the contraction planner is the largest of the default planners
and the one most tuned by measurement; plan.py only dispatches to it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

from ..pipelines.loop_nest import LoopNest
from ..pipelines.target import CacheHierarchy
from .op_schedule import (MAX_TASKS_PER_THREAD, TASKS_PER_THREAD, OpSchedule, largest_divisor, thread_chunk,
                          vector_tile)

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
# rows are as many as that holds (plan_contraction).
_MATMUL_ROWS_L2_FRACTION = 4
# Bytes of one L1d way (sets x line: 4 KB for x86's 32K 8-way and 48K 12-way caches). Rows
# of A whose stride is a multiple of it map to the same sets: a sliver of them evicts itself.
_L1_WAY_BYTES = 4096


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


def plan_contraction(nest: LoopNest, tag: int, lanes: int, threads: int,
                      caches: CacheHierarchy, registers: int) -> OpSchedule:
    """GotoBLAS's blocking, sized from the caches (docs/tuning.md, "The default schedule").

    Thread tasks of C, a K cache block whose A sliver stays in L1d while the N register loop
    reuses it (the sliver packed contiguously: both measured faster on 1024-2048 GEMMs
    than the unblocked plan), task columns whose B block stays in L2 while the M
    register loop rereads it, task rows as many as a quarter of L2 holds (so a weight
    matrix streamed from memory is read once per row block, not once per 64 rows), and
    register tiles of accumulators.
    """
    if is_matrix_vector(nest):
        return plan_matrix_vector(nest, tag, lanes, threads)
    batch, m_dims, n_dims, k_dims = nest.contraction
    m_dims = wide_rows(nest, m_dims)
    n_loops = len(nest.ranges)
    register = [0] * n_loops
    reduction = [0] * n_loops
    for d in nest.parallel_dims:
        register[d] = 1
    m, n, k = m_dims[-1], n_dims[-1], k_dims[-1]
    columns_peeled = peels_columns(nest.ranges[n], lanes)
    if columns_peeled:
        register[n] = peeled_column_tile(nest.ranges[n], lanes)
    else:
        # Whole vectors, narrower ones where N has no multiple of the lanes: N = 1000 with
        # 16 lanes gets 8 columns (one 256-bit vector), not 25 (odd-width vectors ran far
        # slower).
        part = min(lanes, nest.ranges[n] & -nest.ranges[n])
        register[n] = accumulator_row(nest.ranges[n], part, _MATMUL_REGISTER_VECTORS * lanes // part, lanes)
    register[m] = matmul_rows_tile(nest.ranges[m], matmul_register_rows(register[n], lanes, registers))
    peeled = nest.ranges[m] % register[m] != 0
    for d in k_dims:
        reduction[d] = 1
    element_bytes = max(nest.element_bits // 8, 1)
    sliver_limit = caches.l1d // (_MATMUL_SLIVER_L1_FRACTION * register[m] * element_bytes)
    k_block_loop, block_k, sliver_k = reduction_block(nest, k_dims, sliver_limit)
    blocked = block_k is not None
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
    if columns_peeled:
        thread[n] = peeled_column_block(nest.ranges[n], cols, register[n])
    else:
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
    # Rows as several loops (a Linear on windows or on a channels-last image) take their
    # thread tasks from the rows first (split_outer_rows), each task with all the columns:
    # that is the task shape Swin's window projections were measured with on two threads
    # (docs/performance.md, "Contractions with rows as several loops"), from before their
    # weight panels were seen here; column tasks for them are unmeasured. One thread keeps
    # the column block (column_blocks: B's L2 block).
    rows_first = len(m_dims) > 1 and threads > 1
    if rows_first:
        thread[col_loop] = nest.ranges[col_loop]

    outer_rows = m_dims[:-1]

    def tasks() -> int:
        split_rows = math.prod(nest.ranges[d] // thread[d] for d in outer_rows if thread[d])
        return (batch_tasks * split_rows * (nest.ranges[m] // thread[m])
                * (nest.ranges[col_loop] // thread[col_loop]))

    # Too few tasks for the threads: more column tasks (each rereads only its rows of A,
    # not the weights), then more row tasks. A column task is cut into divisors of itself,
    # so task boundaries stay where they were (every 256 columns): a consumer that slices
    # the result (a fused Q/K/V projection split into Q, K and V) still reads whole tasks.
    def narrow_columns() -> None:
        while tasks() < 2 * threads and thread[col_loop] > col_unit:
            narrower = largest_divisor(thread[col_loop], thread[col_loop] // 2, multiple_of=col_unit)
            if narrower < col_unit:  # peeled columns: a task keeps at least one whole tile
                break
            thread[col_loop] = narrower

    # Peeled columns split rows first: each column task peels its own partial tile, and
    # narrow ones ran slower (peeled_column_block).
    if not columns_peeled and not rows_first:
        narrow_columns()
    if tasks() < 2 * threads:
        # thread_chunk's tasks are multiples of its unit, which must divide M.
        unit = register[m] if not peeled else largest_divisor(nest.ranges[m], register[m])
        thread[m] = whole_row_tasks(nest.ranges[m], thread_chunk(nest.ranges[m], unit, threads), register[m])
    if columns_peeled:
        narrow_columns()
    if tasks() < 2 * threads:
        split_outer_rows(nest, outer_rows, thread, tasks, threads)
    if rows_first:
        narrow_columns()
    cache = None
    if blocked:
        cache = [0] * n_loops
        cache[k_block_loop] = block_k
    outer = None
    packed: tuple[tuple[int, int], ...] = ()
    operand = packed_operand(nest, batch, m, n, k,
                             len(m_dims) == 1 and sliver_k <= sliver_limit and not columns_peeled,
                             thread[m], register[m], thread[n], register[n], element_bytes)
    if operand is not None:
        # The packed operand's register loop moves outside the other's: one panel of B
        # (sliver of A) is copied per step and read by every register tile of the task.
        dim = n if operand == 1 else m
        outer = [0] * n_loops
        outer[dim], register[dim] = register[dim], 0
        packed = ((operand, len(batch) + 2),)
    return OpSchedule(tag, thread_tiles=tuple(thread),
                      cache_tiles=tuple(cache) if cache else None,
                      outer_register_tiles=tuple(outer) if outer else None,
                      packed_operands=packed, register_tiles=tuple(register),
                      reduction_tiles=tuple(reduction), vectorize=True,
                      peeled_loops=((m,) if peeled else ()) + ((n,) if columns_peeled else ()))


def packed_operand(nest: LoopNest, batch: tuple[int, ...], m: int, n: int, k: int, fits: bool,
                   task_rows: int, register_rows: int, task_cols: int, register_cols: int,
                   element_bytes: int) -> int | None:
    """The operand a contraction's default plan packs (0: A, 1: B), or None: only where A's
    rows alias in L1d (K x ``element_bytes`` a multiple of one L1d way, ``_L1_WAY_BYTES``:
    K = 1024, 2048, 3072 f32), the plan ``fits`` (one row loop, the K block's A sliver
    within its L1d share, no peeled columns), and the packed copy is reused (two register
    tiles or more across the other dimension). B only where a task has more than one
    column tile (a one-trip copy loop did not bufferize: ``MatmulSpace.is_valid``).

    B, laid out (batch, K, N) row-major, is packed rather than A: the register tile reads
    ``reg_n / lanes`` vectors of B per k step, the streamed operand, down a column block
    whose rows lie N elements apart (4 KB for N = 1024: every row in the same L1d sets
    and a new page), while A gives one broadcast per row from a sliver that stays in
    L1d. Copying each K block x ``reg_n`` panel of B to a contiguous buffer makes that
    stream sequential; the M register loop then rereads the panel from L1d/L2. One
    thread, CPU time: 1024^3 and 2048^3 ran 1.3-1.4x faster than with A's slivers packed
    on AVX-512 (0.95-0.97x numpy's OpenBLAS, was 0.68-0.72x), 2.1x on AVX2's 6 x 16 tiles
    (docs/performance.md, "Packing B instead of A"). Weights stored as panels
    (pipelines/graph/weight_panels.py) are B packed ahead of time: those keep packing A,
    as before (their B is never copied). A not laid out (batch, M, K),
    e.g. transposed, is never packed."""
    if not fits or nest.ranges[k] * element_bytes % _L1_WAY_BYTES:
        return None
    operands = nest.operand_dims
    if (len(operands) >= 2 and operands[1] == (*batch, k, n) and task_rows >= 2 * register_rows
            and task_cols >= 2 * register_cols):
        return 1
    if operands[:1] == ((*batch, m, k),) and nest.ranges[m] > register_rows and task_cols >= 2 * register_cols:
        return 0
    return None


def split_outer_rows(nest: LoopNest, outer_rows: tuple[int, ...], thread: list[int],
                     tasks: Callable[[], int], threads: int) -> None:
    """Split a contraction's outer row loops (its rows as several loops, all but the
    innermost, which the register tile takes) into tasks, outermost first, until there are
    about ``TASKS_PER_THREAD`` per thread, and no further once there are two per thread
    where the next loop's split would pass ``MAX_TASKS_PER_THREAD`` (a prime 7 after 4
    tasks: 28); ``thread`` is updated in place, ``tasks()`` counts the plan's tasks.

    Why: rows that arrive as several loops (Swin's window partition folded into its
    projections: [8, 7, 8, 7] windows x tokens for 3136 rows) were split only along the
    innermost row loop, 7 rows, one register tile: the whole matmul was one task, and the
    qkv and MLP projections took as long on two threads as on one (docs/performance.md,
    "Contractions with rows as several loops"). An outer row loop is split like a batch
    loop: each task keeps whole inner rows, so register tiles and peeling are unchanged."""
    target = TASKS_PER_THREAD * threads
    for d in outer_rows:
        have = tasks()
        if have >= target:
            return
        extent = nest.ranges[d]
        need = -(-target // have)
        count = next((c for c in range(need, extent + 1) if extent % c == 0), extent)
        if have >= 2 * threads and have * count > MAX_TASKS_PER_THREAD * threads:
            return
        thread[d] = extent // count


# Matrix-vector products: rows (after unit loops) up to this many are planned by
# ``plan_matrix_vector``, not GotoBLAS's blocking.
_GEMV_MAX_ROWS = 1
# A matrix-vector register tile's width in bytes of a weight row: 32 f32 columns, two
# AVX-512 vectors or four AVX2 ones. Measured (one thread, 1280 -> 1000, 768 -> 768 and
# 1024 -> 4096): on AVX-512 two vectors beat four and eight; on AVX2 four beat two (1.25x)
# and six (48 columns: LLVM's lowering of three-vector rows, ``accumulator_row``) ran 3x
# slower.
_GEMV_TILE_BYTES = 128
# K block (weight rows) of a matrix-vector product whose weight stays row-major
# (``plan_matrix_vector``): the tile loop inside it reads this many rows side by side,
# each contiguously across the tiles. Blocks of 4, 16, 32 and 64 rows ran slower.
_GEMV_ROW_BLOCK = 8


def is_matrix_vector(nest: LoopNest) -> bool:
    """Whether ``nest`` (an f32 contraction) is a matrix-vector product: one output row
    (every row and batch loop of extent 1, at most ``_GEMV_MAX_ROWS`` rows) and a weight
    ``B[k, n]`` (unit loops aside): the classifier heads of batch-1 CNNs (N = 1000),
    decode projections. A constant B whose N is a multiple of 16 arrives as panels
    (graph/weight_panels.py): those keep the panel plan, as LSTM steps' recurrent weights
    do (read through the gates' reshape, which the block-major pass does not follow: the
    row-major form here walked them 2.6x slower). Other element types keep the GotoBLAS
    plan (not measured)."""
    batch, m_dims, n_dims, k_dims = nest.contraction
    n_dims, k_dims = _wide(nest, n_dims), _wide(nest, k_dims)
    if len(n_dims) != 1 or len(k_dims) != 1 or len(nest.operand_dims) < 2:
        return False
    rows = math.prod(nest.ranges[d] for d in (*batch, *m_dims))
    weight = tuple(d for d in nest.operand_dims[1] if d is None or nest.ranges[d] != 1)
    return rows <= _GEMV_MAX_ROWS and nest.element_bits == 32 and weight == (k_dims[0], n_dims[0])


def _wide(nest: LoopNest, dims: tuple[int, ...]) -> tuple[int, ...]:
    """``dims`` less those of extent 1: an LSTM step's recurrent matmul reaches the schedule
    as ``[1, 256] x [256, 1, 1024]`` (its gates' reshape folded in)."""
    return tuple(d for d in dims if nest.ranges[d] != 1)


def plan_matrix_vector(nest: LoopNest, tag: int, lanes: int, threads: int) -> OpSchedule:
    """A matrix-vector product's schedule: no reuse of the weight to block for (each element
    is read once), so the plan is about how the weight streams and how many FMA chains run.

    Register tiles of one row x ``_GEMV_TILE_BYTES`` of columns, the last partial column
    tile peeled; thread tasks split the columns; no column cache blocks. Two layouts:

    - Every tile starts at a multiple of its width (one task, or tasks of whole tiles):
      the weight's constant reads are then stored block-major by tile
      (pipelines/tensor/blocked_constants.py, the peeled tile reading a prefix of the last
      block), and each tile walks all of K down one contiguous stream: no K block.
    - Otherwise (N = 1000 on two threads: tasks of 500) the weight stays row-major, and a K
      block of ``_GEMV_ROW_BLOCK`` rows makes the tile loop read those rows contiguously,
      each tile's short chain of FMAs overlapping the next tile's.

    Why: the GotoBLAS plan gave MobileNetV2's classifier (1280 -> 1000) column blocks of
    250 (a peeled 26-column vector per block: no block-major copy) and each 32-column tile
    walked 1280 rows 4000 bytes apart; it ran 1.6x onnxruntime's time alone, either layout
    here about 1.1x (docs/performance.md, "Matrix-vector products")."""
    _batch, _m_dims, n_dims, k_dims = nest.contraction
    n, k = _wide(nest, n_dims)[0], _wide(nest, k_dims)[0]
    n_loops = len(nest.ranges)
    register, reduction, thread = [0] * n_loops, [0] * n_loops, [0] * n_loops
    for d in nest.parallel_dims:
        register[d] = thread[d] = 1
    reduction[k] = 1
    columns = nest.ranges[n]
    width = min(max(_GEMV_TILE_BYTES * 8 // nest.element_bits, lanes), columns)
    # Tasks of whole tiles where N has such a divisor for every thread, else any even
    # split of N (each task then peels its own partial tile).
    task = largest_divisor(columns, -(-columns // threads), multiple_of=width)
    if task % width or columns // task < min(threads, columns // width):
        task = largest_divisor(columns, -(-columns // threads))
    width = min(width, task)
    if width > lanes:  # whole vectors; a tile within one register may be any width
        width -= width % lanes
    if task % width and columns % width == 0:
        # The tasks' tiles would be peeled, N's not: plan.py drops the thread level of a
        # small op, and peeling a loop with no partial tile fails. A tile dividing the task.
        width = largest_divisor(task, width, multiple_of=lanes)
    register[n] = width
    thread[n] = task
    aligned = task % width == 0 or task == columns
    cache = None
    if not aligned:
        block = largest_divisor(nest.ranges[k], _GEMV_ROW_BLOCK)
        if block > 1 and block < nest.ranges[k]:
            cache = [0] * n_loops
            cache[k] = block
    return OpSchedule(tag, thread_tiles=tuple(thread), cache_tiles=tuple(cache) if cache else None,
                      register_tiles=tuple(register), reduction_tiles=tuple(reduction), vectorize=True,
                      peeled_loops=(n,) if task % width else ())


def peels_columns(columns: int, lanes: int) -> bool:
    """Whether a contraction's ``columns`` (N) take whole ``lanes``-wide vectors with the
    last, partial column tile peeled: where no multiple of the lanes divides N and N holds
    at least one whole vector. Why: the divisor rule took N's widest power-of-two part, one
    lane for an odd N: 255^3, 333 x 517 x 251 and the ViT's 12-head 197 x 197 scores ran
    as 8 x 1 scalar-column tiles at 10-18 GFLOPS where tuned schedules with peeled vector
    columns reached 100-120, and peeled defaults ran them 4-5x faster (docs/performance.md,
    "Odd-N contractions and AVX2 attention"). Not where the lanes divide N: those plans
    are unchanged."""
    return columns > lanes and columns % lanes != 0


def peeled_column_tile(columns: int, lanes: int) -> int:
    """A peeled register tile's columns: ``_MATMUL_REGISTER_VECTORS`` whole vectors where
    the partial last tile is at most one vector wide, else one vector (its rows then come
    from the register file, ``matmul_register_rows``: 6 x 2 vectors or 8 x 1 on AVX2).
    Why: the partial tile is a vector of its odd width, and one wider than a register ran
    slow: 255 columns as 15 tiles of 16 and a peeled 15 ran about 1.4x the time of 31
    tiles of 8 and a peeled 7, while 197 keys ran faster as 12 x 16 + 5 than as
    24 x 8 + 5 (docs/performance.md, "Odd-N contractions and AVX2 attention")."""
    wide = lanes * _MATMUL_REGISTER_VECTORS
    return wide if columns >= wide and columns % wide <= lanes else lanes


# Peeled column blocks may exceed the B block's L2 share (``plan_contraction``'s task
# columns) up to this factor: each block peels its own partial tile, and 517 columns in
# blocks of 47 (two 16-column tiles and a peeled 15) ran 3.5x slower than all 517 in one
# block (32 tiles and a peeled 5), whose B block (251 x 517 f32, 519 KB) overflows the share.
_PEELED_BLOCK_L2_SLACK = 4


def peeled_column_block(columns: int, limit: int, tile: int) -> int:
    """Columns per task (or column block) of a contraction whose column tiles are peeled:
    the widest divisor of N (task shapes stay static; none is a multiple of the lanes)
    holding at least one whole ``tile``, at most ``_PEELED_BLOCK_L2_SLACK`` x ``limit``
    (the B block's L2 share): 255, 517 and 197 stay whole; a vocabulary of 50257 =
    29 x 1733 takes 29 (16 columns and a peeled 13: a remainder wider than a register,
    which ``peeled_column_tile`` judges from N alone; not measured). Where no divisor in
    that range exists, the smallest one above it (N itself for a prime)."""
    bound = min(columns, max(limit * _PEELED_BLOCK_L2_SLACK, tile))
    fitting = [d for d in range(tile, bound + 1) if columns % d == 0]
    if not fitting:
        return next(d for d in range(tile, columns + 1) if columns % d == 0)
    return fitting[-1]


def reduction_block(nest: LoopNest, k_dims: tuple[int, ...], sliver_limit: int
                    ) -> tuple[int, int | None, int]:
    """The K cache block of a contraction: (the loop it tiles, its tile or ``None`` for no
    block, the K elements one A sliver holds). The block takes at most ``sliver_limit``
    elements of K and is used only above half of it (a K with no fitting divisor keeps K
    whole).

    K may be several loops: a matmul whose A is the weight-panel output of the one before
    (``C[m, nb, j]``, pipelines/graph/weight_panels.py: the ViT's and BERT's second MLP
    Linear reads its 3072 inputs as 192 panels x 16) reduces over (nb, j). The block then
    tiles the outermost K loop by whole multiples of the inner ones' extent. Why: with K
    counted as its innermost 16 only, such a matmul got no K block at all, each 6-row
    register tile streamed all of B (9.4 MB) from memory, and its task rows were sized
    for a 16-element sliver (docs/performance.md, "Transformers at odd token counts")."""
    outer = k_dims[0]
    inner = math.prod(nest.ranges[d] for d in k_dims[1:])
    limit = max(sliver_limit // inner, 1)
    block = largest_divisor(nest.ranges[outer], limit)
    if nest.ranges[outer] > block and block * inner >= sliver_limit // 2:
        return outer, block, block * inner
    return outer, None, nest.ranges[outer] * inner


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
    # Rows may be several loops (a Linear on a channels-last image: ConvNeXt's MLP reads
    # [1, 28, 28, C]); they used to be excluded, and such matmuls were planned one 16-column
    # panel per register tile (7 x 16 accumulators on AVX-512), about 10 % behind
    # onnxruntime's one-thread GEMM (docs/performance.md, "Channels-last MLPs").
    if len(n_dims) != 2 or len(nest.operand_dims) < 3:
        return None
    outer_n, inner_n = n_dims
    # K may be several loops (``reduction_block``): B'[nb, kb, kj, j] when A is itself a
    # panel output. Without them here such a matmul had no column tasks: a prime M (197
    # tokens) then made one task for all threads.
    if nest.operand_dims[1] != (outer_n, *k_dims, inner_n) or nest.output_dims[-2:] != (outer_n, inner_n):
        return None
    return outer_n, inner_n


def column_blocks(nest: LoopNest, plan: OpSchedule) -> OpSchedule:
    """A contraction without a thread level keeps its tasks' column blocks as a sequential
    cache level, outside the K block (GotoBLAS's jc loop): each B block (K block x task
    columns, sized to half of L2 by ``plan_contraction``) is then reread from L2 by every
    row tile. Without it, one thread's row tiles each streamed all of B's columns: BERT's
    768 x 3072 FFN weights, 4.7 MB per K block, from L3 once per 8 rows, and the layer ran
    well behind onnxruntime on one thread."""
    if is_matrix_vector(nest):  # no weight reuse to block for (plan_matrix_vector)
        return plan
    column = column_loop(nest)
    block = plan.thread_tiles[column]
    if not block or block >= nest.ranges[column]:
        return plan
    cache = list(plan.cache_tiles or (0,) * len(nest.ranges))
    cache[column] = block
    return replace(plan, cache_tiles=tuple(cache))
