"""The data of a schedule plan and the tile arithmetic every planner shares.

:class:`OpSchedule` (one op) and :class:`GroupSchedule` (a fusion group) are what the
planners (plan.py, matmul_plan.py, conv_plan.py, group.py) and the tuner's spaces
(space.py, sketch.py) produce and what script.py renders: one data type, so a tuned
schedule renders and applies as the default does. Kept apart from the planners so that
each planner imports the data without importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass


TAG = "tilecraft.op_id"

# Named ops `transform.structured.decompose` turns into 1-D forms the vectorizer handles.
DECOMPOSABLE = frozenset(
    {
        "linalg.conv_2d_nchw_fchw", "linalg.conv_2d_nhwc_hwcf", "linalg.depthwise_conv_2d_nhwc_hwc",
        "linalg.pooling_nchw_max", "linalg.pooling_nchw_sum", "linalg.pooling_nhwc_max",
        "linalg.pooling_nhwc_sum", "linalg.pooling_nhwc_min",
    }
)


def vector_registers(vector_bits: int) -> int:
    """Vector registers the register tiles may fill: 32 with AVX-512 (zmm0-31), else 16 (the
    x86 AVX2/SSE file; AArch64's 32 NEON registers are counted as 16, which only makes its
    tiles smaller than they could be)."""
    return 32 if vector_bits >= 512 else 16


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


# Tasks per thread that a parallel loop is split into where its extent allows. Why 4 and
# not 2: the runtime's flat parallel-for runs one block per task (up to 16 per thread) and
# hands blocks to whichever thread is free (runtime/async_runtime.c), but a thread that
# stalls (another process on its core, an interrupt, a frequency dip) keeps the block it
# holds. With 2 tasks per thread one stall held up a quarter of the loop, and the
# suite's two-thread figures moved by up to 2x between quiet runs; with 4, an eighth
# (benchmarks/thread_balance.py, docs/performance.md "Thread balance").
TASKS_PER_THREAD = 4

# At most this many tasks per thread. Set when async-parallel-for merged more than 8 tasks
# per worker into unequal blocks and each task was an async dispatch; the flat parallel-for
# takes up to 16 per thread as blocks of one task from a counter, so finer splits would now
# cost little, but raising either constant changes every model's thread tiles and the
# round-23 machine was too loaded to measure it (docs/performance.md, "The flat parallel-for").
MAX_TASKS_PER_THREAD = 8


def thread_chunk(extent: int, register_tile: int, num_threads: int) -> int:
    """Tile size splitting ``extent`` into about ``TASKS_PER_THREAD * num_threads`` equal
    tasks of whole register tiles (the fewest at least that many, else one per tile)."""
    units = extent // register_tile
    if units < 1:
        return extent
    target_tasks = min(units, TASKS_PER_THREAD * num_threads)
    for tasks in range(target_tasks, units + 1):
        if units % tasks == 0:
            return units // tasks * register_tile
    return extent


def balanced_chunk(extent: int, threads: int) -> int | None:
    """Tile size splitting ``extent`` into equal tasks, every thread as many: the fewest
    tasks that are at least ``TASKS_PER_THREAD`` per thread, else the most there are (at
    most ``MAX_TASKS_PER_THREAD`` per thread); ``None`` when no multiple of ``threads``
    divides it. Why not just 2 per thread: 14 rows on 2 threads were 2 tasks of 7, and a
    thread that stalled held up half the layer (``TASKS_PER_THREAD``)."""
    if threads < 2:
        return None
    counts = [tasks for tasks in range(threads, min(extent, MAX_TASKS_PER_THREAD * threads) + 1, threads)
              if extent % tasks == 0]
    if not counts:
        return None
    enough = [tasks for tasks in counts if tasks >= TASKS_PER_THREAD * threads]
    return extent // (min(enough) if enough else max(counts))


def busy_share(tasks: int, threads: int) -> float:
    """The share of ``threads`` x rounds that ``tasks`` equal tasks keep busy: 1.0 when the
    tasks fill every round, 0.75 for 3 tasks on 2 threads (the second round half idle)."""
    rounds = -(-tasks // threads)
    return tasks / (rounds * threads)


def busiest_chunk(extent: int, threads: int) -> int | None:
    """The divisor of ``extent`` whose equal tasks keep ``threads`` busiest (``busy_share``),
    among equals the fewest tasks that reach ``TASKS_PER_THREAD`` per thread (else the
    most), at most ``MAX_TASKS_PER_THREAD`` per thread; ``None`` when ``extent`` has fewer
    units than threads. Why: 55 or 13 rows split neither in 2 nor in 4 (``balanced_chunk``),
    yet 11 tasks of 5 rows or 13 of 1 leave a thread idle for at most one task's time."""
    candidates = [extent // tasks for tasks in range(threads, min(extent, MAX_TASKS_PER_THREAD * threads) + 1)
                  if extent % tasks == 0]
    if threads < 2 or not candidates:
        return None
    target = TASKS_PER_THREAD * threads
    return max(candidates, key=lambda chunk: (busy_share(extent // chunk, threads),
                                              min(extent // chunk, target), chunk))
