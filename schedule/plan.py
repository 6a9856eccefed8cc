"""The default (untuned) CPU schedule, expressed as transform-dialect scripts.

For every structured linalg op the planner picks, from the op's loop nest and the target:

1. a *thread* level: ``tile_using_forall`` over outer parallel loops, so the work splits
   into tasks for all cores (the ``scf.forall`` later becomes an async parallel loop);
   a ``linalg.fill`` that initializes the op's output is fused into each task;
2. a *register* level: ``tile_using_for`` so the innermost tile fits in vector registers
   (e.g. 8 x 32 f32 accumulators for a matmul on AVX-512), then the reduction loops;
3. ``decompose`` for 2-D convolutions and pooling (to their 1-D forms, which vectorize);
4. ``vectorize`` of the innermost tile.

The plan is rendered as one ``transform.named_sequence`` per op (``@schedule_op_<tag>``),
which the ``tilecraft-schedule`` pass applies with MLIR's transform interpreter. A sequence
that fails for an op is dropped for that op alone (the op then lowers to scalar loops) and a
warning names it. Finally ``@cleanup`` hoists loop-invariant vector transfers, e.g. the
matmul accumulators out of the reduction loop. The tuner (``tilecraft.tuning``) searches the
same knobs.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from mlir import ir
from mlir.dialects.transform import interpreter

from ..pipelines.loop_nest import LoopNest, analyze_loop_nests
from ..pipelines.passes import bool_option, positive_int_option, register_pass
from ..pipelines.scratch import restore, scratch_copy
from ..pipelines.target import CacheHierarchy

TAG = "tilecraft.op_id"

# Named ops `transform.structured.decompose` turns into 1-D forms the vectorizer handles.
_DECOMPOSABLE = frozenset(
    {
        "linalg.conv_2d_nchw_fchw", "linalg.conv_2d_nhwc_hwcf", "linalg.depthwise_conv_2d_nhwc_hwc",
        "linalg.pooling_nchw_max", "linalg.pooling_nchw_sum", "linalg.pooling_nhwc_max",
        "linalg.pooling_nhwc_sum", "linalg.pooling_nhwc_min",
    }
)
# Below this many loop iterations an op is not worth splitting across threads.
_MIN_PARALLEL_WORK = 1 << 15
# Matmul task tile (rows x columns of the output) per thread: fits L2 with its operands.
_MATMUL_TASK_ROWS, _MATMUL_TASK_COLS = 64, 256
# Matmul register tile: rows x (vector lanes * _MATMUL_REGISTER_VECTORS) accumulators.
_MATMUL_REGISTER_ROWS, _MATMUL_REGISTER_VECTORS = 8, 2
# Matmul K cache block: the A sliver (register rows x block) that the N register loop reuses
# takes at most this fraction of L1d; the rest holds B's rows streaming through and C's
# accumulator lines. A block below half its limit (K with no fitting divisor) is not used.
_MATMUL_SLIVER_L1_FRACTION = 4
# The B block (K block x task columns) that the M register loop rereads: half of L2.
_MATMUL_PANEL_L2_FRACTION = 2
# Bytes of one L1d way (sets x line: 4 KB for x86's 32K 8-way and 48K 12-way caches). Rows
# of A whose stride is a multiple of it map to the same sets: a sliver of them evicts itself.
_L1_WAY_BYTES = 4096
# Elementwise register tile: at most this many vectors per innermost tile.
_ELEMENTWISE_VECTORS = 4


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
                      caches: CacheHierarchy) -> OpSchedule:
    """GotoBLAS's blocking, sized from the caches (docs/tuning.md, "The default schedule").

    Thread tasks of C, a K cache block whose A sliver stays in L1d while the N register loop
    reuses it (the sliver packed contiguously: both measured 1.3-2.2x faster on 1024-2048
    GEMMs than the unblocked plan), task columns whose B block stays in L2 while the M
    register loop rereads it, and register tiles of accumulators.
    """
    batch, m_dims, n_dims, k_dims = nest.contraction
    n_loops = len(nest.ranges)
    register = [0] * n_loops
    reduction = [0] * n_loops
    for d in nest.parallel_dims:
        register[d] = 1
    m, n, k = m_dims[-1], n_dims[-1], k_dims[-1]
    register[m] = largest_divisor(nest.ranges[m], _MATMUL_REGISTER_ROWS)
    # Whole vectors, narrower ones where N has no multiple of the lanes: N = 1000 with 16
    # lanes gets 8 columns (one 256-bit vector), not 25 (odd-width vectors ran 10x slower).
    part = min(lanes, nest.ranges[n] & -nest.ranges[n])
    register[n] = vector_tile(nest.ranges[n], part, _MATMUL_REGISTER_VECTORS * lanes // part)
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
    # once per row block (measured +5-15% on BERT's 12x128 batch matmuls).
    rows = nest.ranges[m] if batch_tasks >= 2 * threads else _MATMUL_TASK_ROWS
    thread[m] = largest_divisor(nest.ranges[m], rows, multiple_of=register[m])
    panel_cols = caches.l2 // (_MATMUL_PANEL_L2_FRACTION * sliver_k * element_bytes)
    cols = max(min(_MATMUL_TASK_COLS, panel_cols), register[n])
    thread[n] = largest_divisor(nest.ranges[n], cols, multiple_of=register[n])
    cache = None
    if blocked:
        cache = [0] * n_loops
        cache[k] = block_k
    # Packing A: the M register loop moves outside, one sliver is copied per M step and read
    # by every N register tile of the task. Only for A laid out (batch, M, K), the space's
    # pack_a, and only where the sliver fits the L1d share and is reused, and where A's rows
    # alias in L1d (K = 1024, 2048, 3072 f32): other slivers stay cached unpacked, and the
    # copy cost 3-10% (K = 64, 128, 768).
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
                      reduction_tiles=tuple(reduction), vectorize=True)


def conv_channel_dim(nest: LoopNest) -> int | None:
    """The channel loop of a depthwise convolution or a pooling op, when it indexes the
    output's contiguous (last) dim as in NHWC; ``None`` otherwise and for convolutions with
    output channels. (linalg counts a pooling op's channels as a batch dim.)"""
    batch, _image, out_channel, _filter, _in_channel, depth = nest.convolution
    last = nest.output_dims[-1] if nest.output_dims else None
    if out_channel or last is None or (last not in depth and last not in batch):
        return None
    return last


def _plan_convolution(nest: LoopNest, tag: int, lanes: int, threads: int) -> OpSchedule:
    batch, image, out_channel, filter_loop, in_channel, depth = nest.convolution
    channel = conv_channel_dim(nest)
    batch = tuple(d for d in batch if d != channel)
    n_loops = len(nest.ranges)
    register = [0] * n_loops
    reduction = [0] * n_loops
    for d in nest.parallel_dims:
        register[d] = 1
    if out_channel:
        register[out_channel[-1]] = largest_divisor(nest.ranges[out_channel[-1]], lanes)
    elif channel is not None:
        # Depthwise/pooling in NHWC: every output pixel of the register tile reuses the
        # filter vector, so the tile is one vector of the contiguous channels by several
        # pixels, accumulated in registers over the (kh, kw) window. Tiled by 1 (pooling:
        # also split into one task per channel) the channel loop ran scalar (1-5 GFLOPS).
        # As for matmul columns, whole vectors, narrower ones where the channels have no
        # multiple of the lanes (24 channels: 8-lane vectors, not 12-lane ones).
        part = min(lanes, nest.ranges[channel] & -nest.ranges[channel])
        register[channel] = vector_tile(nest.ranges[channel], part, lanes // part)
    if image:
        register[image[-1]] = largest_divisor(nest.ranges[image[-1]], 8)
    for d in nest.reduction_dims:
        reduction[d] = 1
    if in_channel:
        reduction[in_channel[-1]] = largest_divisor(nest.ranges[in_channel[-1]], 8)
    thread = [0] * n_loops
    for d in batch:
        thread[d] = 1
    images = 1
    for d in batch:
        images *= nest.ranges[d]
    rows = balanced_chunk(nest.ranges[image[0]], threads) if image else None
    if images % threads == 0:
        pass  # one task per image already keeps every thread busy
    elif rows is not None:
        # Tasks split the output image by rows: each reads its band of the input plus a
        # halo, so a fusion group can pad the input per task (schedule/group.py); tasks
        # split by output channels would each read, and pad, the whole input.
        thread[image[0]] = rows
    elif out_channel or channel is not None:
        # Rows that do not split evenly (7x7 layers, global pooling): split the channels.
        d = out_channel[-1] if out_channel else channel
        thread[d] = thread_chunk(nest.ranges[d], register[d], threads)
    elif image:
        d = image[0]
        thread[d] = thread_chunk(nest.ranges[d], register[d], threads)
    return OpSchedule(tag, thread_tiles=tuple(thread), register_tiles=tuple(register),
                      reduction_tiles=tuple(reduction), decompose=True, vectorize=True)


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
    vectorized along its reduced, strided columns ran at well under 1 GFLOPS; along channels
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
    if not nest.projected and nest.op_name not in _DECOMPOSABLE:
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
    if nest.contraction and nest.projected and nest.contraction[1] and nest.contraction[2]:
        plan = _plan_contraction(nest, tag, lanes, num_threads, caches)
    elif nest.convolution and nest.op_name in _DECOMPOSABLE:
        plan = _plan_convolution(nest, tag, lanes, num_threads)
    else:
        plan = _plan_generic(nest, tag, lanes, num_threads)
    if num_threads == 1 or _work(nest) < _MIN_PARALLEL_WORK or not plan.thread_tiles:
        plan = OpSchedule(**{**plan.__dict__, "thread_tiles": None})
    return plan


class _ScriptWriter:
    """Accumulates transform-dialect lines with fresh SSA names."""

    ANY = "!transform.any_op"

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._counter = 0

    def fresh(self, prefix: str) -> str:
        self._counter += 1
        return f"%{prefix}{self._counter}"

    def match_tag(self, tag: int) -> str:
        handle = self.fresh("op")
        self.lines.append(
            f'{handle} = transform.structured.match attributes{{"{TAG}" = {tag} : i64}} in %root'
            f" : ({self.ANY}) -> {self.ANY}"
        )
        return handle

    def tile_forall(self, handle: str, sizes: tuple[int, ...]) -> tuple[str, str]:
        tiled, forall = self.fresh("tiled"), self.fresh("forall")
        self.lines.append(
            f"{tiled}, {forall} = transform.structured.tile_using_forall {handle} tile_sizes "
            f"{list(sizes)} : ({self.ANY}) -> ({self.ANY}, {self.ANY})"
        )
        return tiled, forall

    def tile_for(self, handle: str, sizes: tuple[int, ...],
                 interchange: tuple[int, ...] | None = None) -> str:
        """``interchange``: the loops' order, outermost first (only tiled loops matter)."""
        n_loops = sum(1 for s in sizes if s)
        tiled = self.fresh("tiled")
        loops = self.fresh("loops")
        results = ", ".join([self.ANY] * (n_loops + 1))
        loops_decl = f", {loops}:{n_loops}" if n_loops > 1 else (f", {loops}" if n_loops else "")
        order = (f" interchange = {list(interchange)}"
                 if interchange and list(interchange) != sorted(interchange) else "")
        self.lines.append(
            f"{tiled}{loops_decl} = transform.structured.tile_using_for {handle} tile_sizes "
            f"{list(sizes)}{order} : ({self.ANY}) -> ({results})"
        )
        return tiled

    def pack_operands(self, handle: str, operands: tuple[tuple[int, int], ...], n_loops: int) -> str:
        """Copy the tiles of ``operands`` ((index, rank) pairs) into fresh contiguous buffers.

        ``pad`` with ``nofold`` and zero amounts materializes the tile; it is then given its
        own allocation filled by a ``linalg.copy``, vectorized row by row. Why not leave the
        pad to bufferization: it became a ``memref.copy`` (an element-wise library call),
        and a vectorized pad folded away into a read of the original, unpacked operand.
        """
        padded, pad, copy = self.fresh("packed"), self.fresh("pad"), self.fresh("copy")
        flags = [0] * (max(i for i, _ in operands) + 1)
        for index, _rank in operands:
            flags[index] = 1
        self.lines.append(
            f"{padded}, {pad}, {copy} = transform.structured.pad {handle} {{padding_dimensions = "
            f"{list(range(n_loops))}, nofold_flags = {flags}}} : ({self.ANY}) -> "
            f"({self.ANY}, {self.ANY}, {self.ANY})"
        )
        producers = []
        for index, _rank in operands:
            producers.append(self.fresh("pads"))
            self.lines.append(f"{producers[-1]} = transform.get_producer_of_operand "
                              f"{padded}[{index}] : ({self.ANY}) -> {self.ANY}")
        pads = producers[0]
        if len(producers) > 1:
            pads = self.fresh("pads")
            self.lines.append(f"{pads} = transform.merge_handles {', '.join(producers)} : {self.ANY}")
        buffer, new_ops = self.fresh("buffer"), self.fresh("alloc")
        self.lines.append(f'{buffer}, {new_ops} = transform.structured.bufferize_to_allocation {pads} '
                          f'{{memcpy_op = "linalg.copy"}} : {self.ANY}')
        # The copies are found in the loop around the packed op (``match`` takes one op, and
        # ``new_ops`` holds the allocation too).
        loop, copies = self.fresh("loop"), self.fresh("copies")
        self.lines.append(f'{loop} = transform.get_parent_op {padded} {{op_name = "scf.for"}}'
                          f" : ({self.ANY}) -> {self.ANY}")
        self.lines.append(f'{copies} = transform.structured.match ops{{["linalg.copy"]}} in {loop}'
                          f" : ({self.ANY}) -> {self.ANY}")
        rank = operands[0][1]
        rows = self.tile_for(copies, tuple([1] * (rank - 1) + [0]))
        self.vectorize(rows)
        return padded

    def fuse_into(self, producer: str, container: str) -> tuple[str, str]:
        """Fuse ``producer`` into ``container``; returns (fused op, container's new handle)."""
        fused, new_container = self.fresh("fused"), self.fresh("forall")
        self.lines.append(
            f"{fused}, {new_container} = transform.structured.fuse_into_containing_op {producer} "
            f"into {container} : ({self.ANY}, {self.ANY}) -> ({self.ANY}, {self.ANY})"
        )
        return fused, new_container

    def decompose(self, handle: str) -> str:
        result = self.fresh("decomposed")
        self.lines.append(
            f"{result} = transform.structured.decompose {handle} : ({self.ANY}) -> {self.ANY}"
        )
        return result

    def vectorize(self, handle: str, *, nd_extract: bool = False) -> None:
        """``nd_extract``: also vectorize gathers (``tensor.extract`` in a body)."""
        options = " {vectorize_nd_extract}" if nd_extract else ""
        self.lines.append(f"transform.structured.vectorize {handle}{options} : {self.ANY}")


def render_op_sequence(plan: "OpSchedule | GroupSchedule") -> str:
    """The ``transform.named_sequence @schedule_op_<tag>`` applying ``plan`` (or
    ``@schedule_group_<root tag>`` for a group)."""
    if isinstance(plan, GroupSchedule):
        return render_group_sequence(plan)
    w = _ScriptWriter()
    op = w.match_tag(plan.tag)
    if plan.thread_tiles:
        op, forall = w.tile_forall(op, plan.thread_tiles)
        if plan.fused_init_tag is not None:
            init, forall = w.fuse_into(w.match_tag(plan.fused_init_tag), forall)
            if plan.init_register_tiles and any(plan.init_register_tiles):
                init = w.tile_for(init, plan.init_register_tiles)
            w.vectorize(init)
    render_inner_levels(w, op, plan)
    return named_sequence(plan.sequence_name, w)


def render_group_sequence(group: GroupSchedule) -> str:
    """Tile the root with ``scf.forall``, fuse the producers into it (consumers first, so
    each producer's slice is already used inside), then each op's inner levels."""
    w = _ScriptWriter()
    root, forall = w.tile_forall(w.match_tag(group.root.tag), group.root.thread_tiles or ())
    fused = []
    for producer in group.producers:
        if group.bubble_up_slices:
            # fuse_into_containing_op fuses a producer through the slice its consumer takes;
            # a slice of expand_shape(producer) becomes expand_shape(slice of producer).
            # Canonicalization folds the index arithmetic this leaves (a linearize_index of
            # [row, 0]), so equal slices stay equal for CSE below.
            w.lines.append(f"transform.apply_patterns to {forall} {{\n"
                           "      transform.apply_patterns.tensor.bubble_up_extract_slice\n"
                           "      transform.apply_patterns.canonicalization\n"
                           f"    }} : {w.ANY}")
        handle, forall = w.fuse_into(w.match_tag(producer.tag), forall)
        fused.append((handle, producer))
    # A producer read by two ops of the group is fused once per read (softmax's row max
    # feeds the sum and the normalization); both copies compute the same slice, so CSE
    # keeps one.
    w.lines.append(f"transform.apply_cse to {forall} : {w.ANY}")
    for handle, producer in fused:
        # After CSE a producer fused twice is one op the handle lists twice.
        unique = w.fresh("unique")
        w.lines.append(f"{unique} = transform.merge_handles deduplicate {handle} : {w.ANY}")
        render_inner_levels(w, unique, producer)
    render_inner_levels(w, root, group.root)
    return named_sequence(group.sequence_name, w)


def named_sequence(name: str, w: "_ScriptWriter") -> str:
    """``w``'s lines as ``transform.named_sequence @<name>`` over ``%root``."""
    body = "\n".join(f"    {line}" for line in w.lines)
    return (
        f"  transform.named_sequence @{name}(%root: !transform.any_op "
        "{transform.readonly}) {\n" + body + "\n    transform.yield\n  }"
    )


def render_inner_levels(w: "_ScriptWriter", op: str, plan: OpSchedule) -> None:
    """The levels of ``plan`` inside its thread tile: cache, outer register, packing,
    register, reduction tiles, decomposition and vectorization of the op ``op`` names."""
    if plan.cache_tiles and any(plan.cache_tiles):
        op = w.tile_for(op, plan.cache_tiles, plan.cache_interchange)
    if plan.outer_register_tiles and any(plan.outer_register_tiles):
        op = w.tile_for(op, plan.outer_register_tiles)
    if plan.packed_operands:
        n_loops = len(plan.register_tiles or plan.reduction_tiles or plan.cache_tiles or ())
        op = w.pack_operands(op, plan.packed_operands, n_loops)
    if plan.register_tiles:
        op = w.tile_for(op, plan.register_tiles, plan.register_interchange)
    if plan.reduction_tiles:
        op = w.tile_for(op, plan.reduction_tiles)
    if plan.decompose:
        op = w.decompose(op)
    if plan.vectorize:
        # Not vectorize_nd_extract: with it, a gather-style Pad (reflect, cropping) vectorized
        # to wrong values (tests/frontend/onnx/test_shape.py::test_negative_pads_crop); such
        # ops fail to vectorize without it and keep correct scalar loops, with a warning.
        w.vectorize(op)


CLEANUP_SEQUENCE = """  transform.named_sequence @cleanup(%root: !transform.any_op {transform.readonly}) {
    %funcs = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    %loops = transform.structured.match ops{["scf.for"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_licm to %loops : !transform.any_op
    transform.foreach %loops : !transform.any_op {
    ^bb0(%loop: !transform.any_op):
      transform.loop.hoist_loop_invariant_subsets %loop : !transform.any_op
    }
    transform.yield
  }"""


def render_script(plans: list[OpSchedule],
                  render_op: Callable[[OpSchedule], str] | None = None) -> str:
    """A complete transform module: one sequence per op, ``@cleanup``, and an entry point.

    ``tilecraft-opt payload.mlir --transform-interpreter`` (with this module appended to
    the payload file) replays the schedule with no Python in the loop. ``render_op``
    renders one plan (default :func:`render_op_sequence`; the CUDA schedule passes its own).
    """
    sequences = [(render_op or render_op_sequence)(plan) for plan in plans]
    includes = [
        f"    transform.include @{plan.sequence_name} failures(propagate) (%root)"
        " : (!transform.any_op) -> ()"
        for plan in plans
    ] + ["    transform.include @cleanup failures(propagate) (%root) : (!transform.any_op) -> ()"]
    main = (
        "  transform.named_sequence @__transform_main(%root: !transform.any_op "
        "{transform.readonly}) {\n" + "\n".join(includes) + "\n    transform.yield\n  }"
    )
    return (
        "module attributes {transform.with_named_sequence} {\n"
        + "\n".join([*sequences, CLEANUP_SEQUENCE, main])
        + "\n}\n"
    )


def _init_fill(op: ir.Operation) -> ir.Operation | None:
    """The single-use ``linalg.fill`` producing ``op``'s (only) output, if there is one."""
    if len(op.results) != 1:
        return None
    init = op.operands[len(op.operands) - 1]
    producer = init.owner
    if not isinstance(producer, ir.Operation):
        producer = getattr(producer, "operation", None)
    if producer is None or not isinstance(producer, ir.Operation) or producer.name != "linalg.fill":
        return None
    if len(list(producer.results[0].uses)) != 1:
        return None
    return producer


# ``planner(op, nest, tag, unit)`` returns a plan for one op, or ``None`` for the default
# plan; ``unit`` is the fusion unit (schedule/group.py) the op anchors, if any.
OpPlanner = Callable[[ir.Operation, LoopNest, int, Any], "OpSchedule | None"]


def plan_module(module: ir.Operation, *, vector_bits: int, num_threads: int,
                planner: OpPlanner | None = None,
                fuse_groups: bool = False,
                caches: CacheHierarchy = CacheHierarchy()) -> list["OpSchedule | GroupSchedule"]:
    """Tag every structured op of ``module`` with ``tilecraft.op_id`` and plan its schedule.

    ``planner`` overrides the plan of the ops it answers for (the tuner's records); the init
    fill of an overridden op is fused the same way as for a default plan. ``fuse_groups``:
    the ops of each fusion group (the graph stage's partition, recomputed on this IR) become
    one loop nest, a :class:`GroupSchedule` (``schedule/group.py``).
    """
    units = []
    if fuse_groups:
        # Imported here: schedule/group.py plans with this module's per-op planner.
        from .group import (
            find_fusion_units,
            plan_groups,
            prepare_groups,
            tag_fused_data_ops,
        )

        prepare_groups(module)
    analyzed = analyze_loop_nests(module)
    if fuse_groups:
        units = find_fusion_units(module, dict(analyzed))
    tags: dict[ir.Operation, int] = {}
    for tag, (op, _) in enumerate(analyzed):
        op.attributes[TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), tag)
        tags[op] = tag
    if units:
        tag_fused_data_ops(units, tags, TAG)
    # Built after tagging: an ir.Operation's hash changes with its attributes.
    unit_of_anchor = {unit.anchor: unit for unit in units}
    nests = {tags[op]: nest for op, nest in analyzed}
    plans: dict[int, OpSchedule] = {}
    fused: set[int] = set()
    for op, nest in analyzed:
        tag = tags[op]
        plan = planner(op, nest, tag, unit_of_anchor.get(op)) if planner is not None else None
        if plan is None:
            plan = plan_default_schedule(nest, tag, vector_bits=vector_bits, num_threads=num_threads,
                                         caches=caches)
        fill = _init_fill(op)
        if plan.thread_tiles and plan.vectorize and fill is not None and fill in tags:
            fill_tag = tags[fill]
            # Why task extents: the fused fill runs per task, on the slice of the output
            # that one thread tile covers; register tiles planned for the whole output
            # (64 for a 128-row reduction split in 32-row tasks) left partial, dynamic
            # tiles that failed to vectorize, and the op fell back to scalar loops.
            fill_nest = nests[fill_tag]
            task_extents = tuple(
                extent if d is None else (plan.thread_tiles[d] or nest.ranges[d])
                for d, extent in zip(nest.output_dims, fill_nest.ranges)
            )
            fill_plan = plan_default_schedule(
                replace(fill_nest, ranges=task_extents), fill_tag,
                vector_bits=vector_bits, num_threads=1,
            )
            plan = OpSchedule(**{**plan.__dict__, "fused_init_tag": fill_tag,
                                 "init_register_tiles": fill_plan.register_tiles})
            fused.add(fill_tag)
        plans[tag] = plan
    op_plans = [plan for tag, plan in sorted(plans.items()) if tag not in fused]
    if not fuse_groups:
        return op_plans
    groups = plan_groups(units, analyzed, tags, plans, {p.tag for p in op_plans},
                         vector_bits=vector_bits, caches=caches)
    grouped = {tag for group in groups for tag in (group.tag, *(p.tag for p in group.producers))}
    merged: list[OpSchedule | GroupSchedule] = [*groups, *(p for p in op_plans if p.tag not in grouped)]
    return sorted(merged, key=lambda plan: plan.tag)


def _remove_tags(module: ir.Operation) -> None:
    def visit(op: ir.Operation) -> ir.WalkResult:
        if TAG in op.attributes:
            del op.attributes[TAG]
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)


def _sequence(transform_module: ir.Module, name: str) -> ir.Operation:
    for op in transform_module.body.operations:
        if ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op
    raise KeyError(name)


def _apply_if_valid(module: ir.Operation, transform_module: ir.Module, name: str) -> str | None:
    """Apply sequence ``name`` to ``module``; if it fails, restore ``module`` as it was and
    return the error. ``None`` on success.

    Why a checkpoint rather than a trial run: the sequence is applied once. A trial on a
    scratch copy followed by the real application ran the transform interpreter twice per
    op or group (ResNet-50: 128 applications, 4.7 of its 5.1 s of schedule), while copying
    the module costs about 2 ms. A failed sequence can leave its op half transformed
    (tiled but not vectorized), hence the restore."""
    sequence = _sequence(transform_module, name)
    _container, checkpoint = scratch_copy(module)
    try:
        interpreter.apply_named_sequence(module, sequence, transform_module.operation)
    except ValueError as error:
        restore(module, checkpoint)
        return str(error) or "failed"
    return None


def _apply_or_warn(module: ir.Operation, transform_module: ir.Module, name: str) -> bool:
    """Apply sequence ``name``; if it fails on a trial copy, leave ``module`` untouched."""
    error = _apply_if_valid(module, transform_module, name)
    if error is not None:
        warnings.warn(
            f"tilecraft-schedule: {name} failed, the op keeps scalar loops: {error}",
            RuntimeWarning, stacklevel=2,
        )
        return False
    return True


def apply_schedule(module: ir.Operation, plans: list["OpSchedule | GroupSchedule"]) -> str:
    """Apply ``plans`` (op by op or group by group, then ``@cleanup``) to tagged ``module``;
    returns the script. A group whose sequence fails falls back to its ops' own plans."""
    script = render_script(plans)
    with module.context:
        transform_module = ir.Module.parse(script)
    for plan in plans:
        if isinstance(plan, GroupSchedule) and plan.fallback:
            # No warning: the fallback is the per-op schedule, correct but one loop nest
            # per op (CompiledModule.kernel_count shows it).
            if _apply_if_valid(module, transform_module, plan.sequence_name) is not None:
                apply_schedule_ops(module, list(plan.fallback))
            continue
        _apply_or_warn(module, transform_module, plan.sequence_name)
    _apply_or_warn(module, transform_module, "cleanup")
    _remove_tags(module)
    return script


def apply_schedule_ops(module: ir.Operation, plans: list[OpSchedule]) -> None:
    """Apply per-op ``plans`` (no ``@cleanup``): a failed group's fallback."""
    with module.context:
        transform_module = ir.Module.parse(render_script(plans))
    for plan in plans:
        _apply_or_warn(module, transform_module, plan.sequence_name)


@register_pass(
    "tilecraft-schedule",
    "Tile, parallelize and vectorize every linalg op with the default CPU schedule",
    options={
        "vector-bits": "vector register width to plan for (default 512)",
        "num-threads": "threads to split parallel loops for (default 1)",
        "tuning-records": "JSON-lines tuning records: ops with a record get its best schedule",
        "cpu": "with tuning-records: the target CPU the records were tuned for (default host)",
        "features": "with tuning-records: the target's -mattr features (default none)",
        "fuse-groups": "1: each fusion group (TVM FuseOps rules) becomes one loop nest "
                       "(default 0: one loop nest per op)",
        "l1d": "L1 data cache per core, e.g. 48K (default 32K)",
        "l2": "L2 cache per core (default 256K)",
        "l3": "shared L3 cache (default 8M)",
    },
)
def default_schedule_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    planner = None
    if options.get("tuning-records"):
        # Imported here: tilecraft.tuning builds on this module (its spaces render through
        # _ScriptWriter), so a module-level import would be circular.
        from .record_plan import RecordPlanner

        planner = RecordPlanner.from_pass_options(options)
    plans = plan_module(
        module,
        vector_bits=positive_int_option("vector-bits", options.get("vector-bits", "512")),
        num_threads=positive_int_option("num-threads", options.get("num-threads", "1")),
        planner=planner,
        fuse_groups=bool_option("fuse-groups", options.get("fuse-groups", "0")),
        caches=CacheHierarchy().with_sizes(options, what="option of tilecraft-schedule"),
    )
    apply_schedule(module, plans)
