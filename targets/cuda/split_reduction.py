"""Split reductions: ops whose output points alone cannot fill the GPU share each output's
reduction among the threads of a block.

Why: the parallel plans give one thread per output point (a 4-lane vector at most) and run
the whole reduction in it. A convolution with few output points and a long reduction —
every CNN's last stages (ResNet-50's 7 x 7 x 512 convolutions reduce over 512 x 3 x 3 =
4,608 products) — or a matrix-vector product (a batch-1 classifier: 1,000 outputs, K = 2,048)
then launches a few tens of thousands of threads, each running thousands of dependent
FMAs, on a GPU that holds 270 K threads (an H200). Splitting the reduction over ``T``
threads of a block multiplies the threads by ``T`` and divides each one's serial chain by
``T``; the partial sums meet in a workgroup-memory buffer of ``outputs x T`` floats and a
few threads of the same block add them up (no second kernel, no global partials).

The transform steps (rendered by :func:`render_split_reduction` into the op's sequence):

1. block tiles (``#gpu.block``): a few output points per block — one output row of a
   convolution (its ``ow`` loop whole when short, so its input windows are reused along the
   row inside a thread), a few columns of a contraction;
2. ``tile_reduction_using_forall`` over the split loop (a convolution's input channels, a
   contraction's K) with ``T`` threads (``#gpu.thread<x>``): each thread reduces its chunk of
   the loop for all of the block's points into its slot of the partials buffer, which
   ``bufferize_to_allocation`` puts in workgroup memory;
3. the partials' zero-fill and their combination (a ``linalg.reduce`` over the ``T`` slots)
   spread over the block's threads; ``map_nested_forall_to_threads`` puts the barriers
   between them;
4. inside a thread, the rest of the reduction (``kh``, ``kw``) as register-tiled loops,
   a convolution decomposed to 1-D and vectorized along ``ow`` as in the parallel plan.

Planned only where it pays (:func:`split_reduction_plan`): the parallel plan would launch
fewer than ``GpuConfig.split_below`` threads, every thread of the split keeps at least
``MIN_CHAIN`` reduction steps, and a contraction has at most
``MAX_SPLIT_ROWS`` rows (a matrix-vector product: larger ones keep the shared-memory tiles
of the contraction plan, whose split over K — across blocks — is not built yet).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...pipelines.loop_nest import LoopNest
from ...schedule.op_schedule import largest_divisor

# Split-loop steps per thread the thread count aims at (more threads only while each keeps
# this many).
MIN_CHUNK = 4
# The fewest threads worth a split (one warp), and the most output points a block's thread
# accumulates at once (registers: a vector of this many f32 per reduction step).
MIN_SPLIT_THREADS = 32
MAX_POINTS_PER_THREAD = 16
# The fewest reduction steps (split-loop chunk x the other reduction loops) a thread keeps:
# below, the partials' round trip through shared memory costs more than the split saves.
MIN_CHAIN = 8
# The most rows (M) a contraction may have to be split (a batch-1 Linear has 1; a few more
# are a matrix-vector product per row, the weights read from L2 once per row).
MAX_SPLIT_ROWS = 8
# Partial sums a combining thread loads as one vector (more would take as many registers).
COMBINE_VECTOR = 32


@dataclass(frozen=True)
class SplitReduction:
    """The split part of a plan (the rest — block tiles, their mapping — is the
    ``GpuOpSchedule``'s).

    Attributes:
      dim: the reduction loop split over the block's threads.
      threads: how many threads split it (``#gpu.thread<x>``); also the partials per point.
      combine_tiles: thread tiles of the combination, over the partials' dims (the block's
        output dims, then the ``threads`` slots, left whole).
      combine_mapping: the axes of those tiles.
      fill_tiles: thread tiles of the partials' zero-fill (one slot per thread).
      register_tiles: tiles of the remaining reduction loops inside a thread (1: one step).
      decompose: a convolution, decomposed to its 1-D form before vectorizing.
    """

    dim: int
    threads: int
    combine_tiles: tuple[int, ...]
    combine_mapping: tuple[str, ...]
    fill_tiles: tuple[int, ...]
    register_tiles: tuple[int, ...]
    decompose: bool


@dataclass(frozen=True)
class SplitPlan:
    """What :func:`split_reduction_plan` decides: block tiles, their axes, and the split."""

    block_tiles: tuple[int, ...]
    block_mapping: tuple[str, ...]
    split: SplitReduction


def _points_per_thread(extent: int, vector: int, kind: str) -> int:
    """Output points along the innermost output loop a thread accumulates. A convolution: the
    longest piece of its row up to ``MAX_POINTS_PER_THREAD`` (7, 14, 14 of 56: each input
    row read is shared by the points along it); a contraction: one vector (its weight
    rows are read 128 bits at a time)."""
    if kind == "convolution":
        return largest_divisor(extent, MAX_POINTS_PER_THREAD)
    return vector if extent % vector == 0 else 1


def split_reduction_plan(nest: LoopNest, *, kind: str, max_threads: int, vector: int,
                         split_below: int) -> SplitPlan | None:
    """The split plan of a convolution (``kind="convolution"``: loops as the decomposable
    named convolutions order them, ``n, f, oh, ow, c, kh, kw`` or ``n, oh, ow, f, kh, kw, c``)
    or of a contraction (``kind="contraction"``), or ``None`` where the op has enough output
    points (``split_below`` threads) or no reduction loop long enough to split.
    """
    if nest.element_bits != 32 or not nest.projected and kind != "convolution":
        return None
    n_loops = len(nest.ranges)
    parallel = [d for d in nest.parallel_dims if nest.ranges[d] > 1]
    if not parallel or len(parallel) > 3:   # a grid has three axes
        return None
    if kind == "convolution":
        if not nest.convolution:
            return None
        channels = [d for d in nest.convolution[4] if nest.ranges[d] > 1]
        if len(channels) != 1:   # depthwise and pooling: nothing to split but the window
            return None
        dim = channels[0]
        inner = nest.convolution[1][-1]   # ow: the 1-D form vectorizes along it
    else:
        if not nest.contraction:
            return None
        k_dims = [d for d in nest.contraction[3] if nest.ranges[d] > 1]
        rows = 1
        for d in nest.contraction[1]:
            rows *= nest.ranges[d]
        # Only matrix-vector-like products: with more rows the contraction plan's staged
        # tiles reuse each operand slice across a block, which a split per point gives up.
        if len(k_dims) != 1 or rows > MAX_SPLIT_ROWS:
            return None
        dim = k_dims[0]
        inner = parallel[-1]
    points = 1
    for d in nest.parallel_dims:
        points *= nest.ranges[d]
    # The threads the parallel plans launch: one per point, or per vector along the
    # innermost loop (the contraction plan's 4 x 4 tiles count as 16 points).
    unsplit = points // (16 if kind == "contraction" else
                         vector if nest.ranges[inner] % vector == 0 else 1)
    if unsplit >= split_below:
        return None
    per_thread = _points_per_thread(nest.ranges[inner], vector, kind) if inner in parallel else 1
    blocks = points // per_thread
    # Fewest threads (a multiple of a warp where the loop allows) that fill the GPU, each
    # keeping MIN_CHUNK steps of the split loop and MIN_CHAIN steps in all.
    extent = nest.ranges[dim]
    rest = 1
    for d in nest.reduction_dims:
        rest *= nest.ranges[d] if d != dim else 1
    wanted = min(max_threads, -(-split_below // blocks), extent // MIN_CHUNK,
                 extent * rest // MIN_CHAIN)
    threads = largest_divisor(extent, max(wanted, MIN_SPLIT_THREADS))
    if threads < MIN_SPLIT_THREADS or (extent // threads) * rest < MIN_CHAIN:
        return None
    # One thread's points per block: the inner loop's tile, every other output loop 1;
    # the (at most three) output loops longer than 1 map to the grid, innermost on x.
    block = [0] * n_loops
    for d in parallel:
        block[d] = per_thread if d == inner else 1
    block_mapping = tuple(reversed(("x", "y", "z")[: len(parallel)]))
    # The partials are the block's output tile plus one slot per thread (appended last).
    output_rank = len(nest.output_dims)
    combine_tiles = tuple([0] * output_rank)
    inner_out = nest.output_dims.index(inner) if inner in nest.output_dims else None
    combine_mapping: tuple[str, ...] = ()
    if inner_out is not None and per_thread > 1:
        combine_tiles = tuple(1 if i == inner_out else 0 for i in range(output_rank))
        combine_mapping = ("x",)
    else:
        combine_tiles = (1,) + combine_tiles[1:]
        combine_mapping = ("x",)
    fill_tiles = tuple([0] * output_rank + [1])
    register = tuple(1 if not nest.parallel[d] and d != dim else 0 for d in range(n_loops))
    return SplitPlan(tuple(block), block_mapping,
                     SplitReduction(dim, threads, combine_tiles, combine_mapping, fill_tiles,
                                    register, decompose=kind == "convolution"))


def render_split_reduction(w, handle: str, n_loops: int, split: SplitReduction, *,
                           workgroup: str, vectorize: bool) -> None:
    """Append the split steps (2-4 of the module doc) for the block-tiled op ``handle`` to
    the script writer ``w`` (a ``GpuScriptWriter``)."""
    fill, tiled, combine, forall = (w.fresh("fill"), w.fresh("split"), w.fresh("combine"),
                                    w.fresh("forall"))
    counts = [0] * n_loops
    counts[split.dim] = split.threads
    w.lines.append(
        f"{fill}, {tiled}, {combine}, {forall} = transform.structured."
        f"tile_reduction_using_forall {handle} by num_threads = {counts} "
        f"mapping = [#gpu.thread<x>] : ({w.ANY}) -> ({w.ANY}, {w.ANY}, {w.ANY}, {w.ANY})"
    )
    buffer, new_ops = w.fresh("buffer"), w.fresh("alloc")
    w.lines.append(
        f"{buffer}, {new_ops} = transform.structured.bufferize_to_allocation {fill} "
        f"{{memory_space = {workgroup}, bufferize_destination_only}} : {w.ANY}"
    )
    w.tile_mapped(fill, split.fill_tiles, ("x",), "thread")
    combine, _ = w.tile_mapped(combine, split.combine_tiles, split.combine_mapping, "thread")
    if split.threads > COMBINE_VECTOR:
        combine = w.tile_for(combine, (0,) * (len(split.fill_tiles) - 1) + (COMBINE_VECTOR,))
    if vectorize:
        # Each combining thread reads its point's slots as vectors and keeps the sum in a
        # register (unvectorized, every slot was a load and a store of the output).
        w.vectorize(combine)
    op = tiled
    if any(split.register_tiles):
        op = w.tile_for(op, split.register_tiles)
    if split.decompose:
        op = w.decompose(op)
    if vectorize:
        w.vectorize(op)
