"""The GPU schedule: every linalg op onto CUDA blocks and threads, as transform scripts.

Same machinery as the CPU schedule (``schedule/plan.py``): ops are tagged with
``tilecraft.op_id``, each gets a plan (:class:`GpuOpSchedule`, plain data), each plan is
rendered by a script writer (:class:`GpuScriptWriter`, a ``ScriptWriter`` with GPU steps) as
``transform.named_sequence @schedule_op_<tag>``, and the ``@cleanup`` sequence hoists
loop-invariant vector transfers. What differs is what the tiles mean:

- *block tiles* (``tile_using_forall`` with ``#gpu.block<x|y|z>``): one CUDA block per tile;
- *thread tiles* (``tile_using_forall`` with ``#gpu.thread<x|y|z>``): one thread per tile,
  the innermost tile a vector of 4 f32 where the loop allows (``ld.global.v4.f32``);
- *register tiles* (``tile_using_for``) inside a thread: reduction loops whose vectorized
  accumulators ``@cleanup`` keeps in registers;
- *shared-memory staging* (contractions): each ``k_step`` slice of the operand tiles is
  copied into workgroup memory (``pad`` + ``bufferize_to_allocation`` in
  ``#gpu.address_space<workgroup>``) by all threads of the block, then read by them; the
  barriers come from ``map_nested_forall_to_threads`` (one after every thread loop);
- *warp tiles* (``tile_using_forall`` with ``#gpu.warp<linear_dim_*>``, the
  ``tensor-cores=f16|tf32`` option): a contraction's block tile split over warps, each warp's tile one
  ``vector.contract`` unrolled to the 16x8x16 shape of ``mma.sync``, which
  ``tensor_cores.py`` turns into ``nvgpu.mma.sync`` after mapping;
- *block-per-row reductions* (softmax, layer norm, ``reduce_*``): one block per output
  element, its threads each reduce a chunk (``tile_reduction_using_forall``) into a
  partials buffer in workgroup memory that one thread combines; with ``warp-reduce=1`` the
  threads combine their partials with warp shuffles instead (``warp_reduce.py``).

After bufferization, :func:`gpu_map_pass` (``tilecraft-gpu-map``) turns each block loop into
a ``gpu.launch`` (``map_forall_to_blocks``) and its thread loops into thread ids
(``map_nested_forall_to_threads``), with the block size its thread loops need.
An op the schedule cannot map raises :class:`~tilecraft.errors.GpuScheduleError`: on a GPU
there is no scalar fallback, since host code cannot touch device memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping

from mlir import ir, passmanager
from mlir.dialects.transform import interpreter

from ...ir.maps import indexing_maps
from ...errors import GpuScheduleError
from ...pipelines.ir_queries import is_strided_copy, ops_where
from ...pipelines.loop_nest import LoopNest, analyze_loop_nests, structured_ops
from ...pipelines.passes import positive_int_option, register_pass
from ...pipelines.scratch import scratch_copy
from ...pipelines.tensor.static_slices import extract_static, insert_static
from ...schedule.apply import apply_if_valid, find_sequence, init_fill, remove_tags
from ...schedule.matmul_plan import plans_as_contraction
from ...schedule.op_schedule import DECOMPOSABLE, TAG, largest_divisor
from ...schedule.script import ScriptWriter, named_sequence, render_script
from .async_copies import STAGES
from .split_reduction import SplitReduction, render_split_reduction, split_reduction_plan
from .tensor_cores import TENSOR_CORE_LAUNCH, contractions_to_mma_sync
from .warp_reduce import WARP_COMBINE, combine_with_warp_shuffles

WORKGROUP = "#gpu.address_space<workgroup>"
_AXES = ("x", "y", "z")
# CUDA's limit on blockDim.z (x and y allow 1024).
_MAX_BLOCK_Z = 64


@dataclass(frozen=True)
class GpuConfig:
    """The GPU schedule's knobs (the tuner's space varies them; see ``space.py``).

    Attributes:
      max_threads: threads per block the plans may use.
      vector: f32 lanes per thread along the innermost loop (4: 128-bit loads).
      block_m, block_n: output tile of a contraction per block.
      thread_m, thread_n: output tile of a contraction per thread (its register accumulators).
      k_step: reduction slice staged into shared memory per step.
      shared: stage contraction operand tiles in shared memory (off: threads read global).
      unroll: reduction steps per vectorized body (outer products unrolled per step).
      row_threads: threads cooperating on one row of a block-per-row reduction.
      warp_reduce: combine a block-per-row reduction's partials with warp shuffles
        (``gpu.all_reduce``, see ``warp_reduce.py``) instead of one thread reading them all.
        Off by default until a GPU has checked its numbers (the order of the additions
        changes, so results differ from the serial combination in the last bits).
      tensor_cores: ``"f16"``: contractions of f16 inputs accumulating in f32 run on tensor
        cores (``mma.sync.m16n8k16``, sm_80 and later); ``"tf32"``: f32 ones do, as TF32
        (``m16n8k8``; only when asked: the inputs lose mantissa bits); ``""``: none
        (``bf16`` is refused with the reason). Off by default until a GPU has checked it.
      arch: the CUDA architecture compiled for (``"sm_90"``); the tensor-core option
        refuses one below sm_80. ``""``: not checked (the pass run on its own).
      mma_block_m, mma_block_n, mma_k_step: a tensor-core contraction's block tile and
        staged K slice (its own defaults: a tensor-core kernel wants far larger tiles than
        the FMA schedule's, see docs/cuda.md's tensor-core section).
      warp_m, warp_n: a tensor-core contraction's output tile per warp (its ``mma.sync``
        accumulators live in the warp's registers: 64 x 64 is 128 f32 per lane).
      fill_blocks: blocks an FMA contraction's tiles are halved toward (down to 32 x 32)
        when its default tiles give fewer: 264 is two per multiprocessor of an H100/H200
        (132); BERT-base's 128-token projections had 24 blocks of 64 x 64.
      mma_stages: shared buffers a tensor-core contraction's staged K slices rotate through:
        2 copies the next slice with ``cp.async`` while the warps compute on this one
        (``async_copies.py``), 1 copies and computes in turn.
      split_below: a convolution or matrix-vector product whose parallel plan would launch
        fewer threads than this splits its reduction over the threads of a block
        (``split_reduction.py``); 0, the default, never. 135168 (4 x 132 SMs x 256 threads)
        made full-size ResNet-50 3.4x slower on an H200 (docs/cuda.md, Split reductions):
        off until a faster form of the split is measured.
    """

    max_threads: int = 256
    vector: int = 4
    block_m: int = 64
    block_n: int = 64
    thread_m: int = 4
    thread_n: int = 4
    k_step: int = 16
    shared: bool = True
    unroll: int = 4
    row_threads: int = 128
    fill_blocks: int = 264
    warp_reduce: bool = False
    tensor_cores: str = ""
    arch: str = ""
    mma_block_m: int = 128
    mma_block_n: int = 128
    mma_k_step: int = 32
    warp_m: int = 64
    warp_n: int = 32
    mma_stages: int = 2
    split_below: int = 0


# Tensor-core input types (the ``tensor-cores`` option) -> the MLIR element type of the
# inputs they take (accumulating in f32) and the mma.sync shape (m, n, k) for it: f16 as is,
# tf32 (f32 inputs rounded to 10-bit mantissas by the tensor cores: only when asked).
TENSOR_CORE_TYPES = {"f16": ("f16", (16, 8, 16)), "tf32": ("f32", (16, 8, 8))}
# Types the option names but the conversion cannot take yet, and why.
_TENSOR_CORES_NOT_BUILT = {
    "bf16": "upstream's vector-to-nvgpu conversion has no bf16 ldmatrix/mma.sync fragments",
}
WARP_SIZE = 32
# Bytes one thread moves per access of a tensor-core operand copy (ld.global.v4 /
# st.shared.v4: 8 f16 or 4 f32).
_COPY_BYTES = 16
# Static shared memory a block may declare (larger needs the dynamic kind, opted into at
# launch); every architecture from sm_80 on.
_STATIC_SHARED_BYTES = 48 * 1024


@dataclass(frozen=True)
class Promotion:
    """One operand tile staged in shared memory, and how the block's threads copy it."""

    operand: int
    copy_tiles: tuple[int, ...]
    copy_mapping: tuple[str, ...]


@dataclass(frozen=True)
class GpuOpSchedule:
    """The plan of one op. Tiles are per loop; 0 leaves a loop untiled at that level.

    ``block_mapping``/``thread_mapping`` name the axis (``"x"``, ``"y"``, ``"z"``) of each
    tiled loop, in loop order. ``k_tiles`` is the block-level reduction loop (the slice staged
    in shared memory when ``promoted``); ``register_tiles`` / ``reduction_tiles`` are loops
    inside a thread. ``row_threads`` > 0 selects the block-per-row reduction: the threads
    split the innermost (reduction) loop instead of parallel ones; ``warp_combine`` marks its
    combination for the warp-shuffle rewrite (``warp_reduce.py``). ``warp_tiles`` (with
    ``warp_mapping``) are the per-warp output tiles of a tensor-core contraction
    (``kind == "tensor_core"``), whose block has ``WARP_SIZE`` x warps threads. ``split``
    splits a reduction loop over the block's threads (``kind == "split_reduction"``,
    ``split_reduction.py``).
    """

    tag: int
    kind: str
    block_tiles: tuple[int, ...]
    block_mapping: tuple[str, ...]
    thread_tiles: tuple[int, ...] = ()
    thread_mapping: tuple[str, ...] = ()
    k_tiles: tuple[int, ...] | None = None
    promoted: tuple[Promotion, ...] = ()
    register_tiles: tuple[int, ...] | None = None
    reduction_tiles: tuple[int, ...] | None = None
    row_threads: int = 0
    warp_combine: bool = False
    warp_tiles: tuple[int, ...] = ()
    warp_mapping: tuple[str, ...] = ()
    mma_shape: tuple[int, ...] = ()
    mma_stages: int = 1
    fused_init_tag: int | None = None
    init_thread_tiles: tuple[int, ...] = ()
    init_thread_mapping: tuple[str, ...] = ()
    decompose: bool = False
    vectorize: bool = True
    split: SplitReduction | None = None

    @property
    def sequence_name(self) -> str:
        return f"schedule_op_{self.tag}"

    @property
    def block_dims(self) -> tuple[int, int, int]:
        """Threads per block along x, y, z: what the thread loops of this plan need."""
        dims = [1, 1, 1]
        if self.row_threads:
            dims[0] = self.row_threads
        if self.split is not None:
            dims[0] = self.split.threads
        if self.warp_tiles:
            # Lanes on x, warps on y (the copies' and the init's thread loops fit in it).
            warps = 1
            for b, t in zip(self.block_tiles, self.warp_tiles):
                warps *= b // t if t else 1
            dims[0], dims[1] = WARP_SIZE, warps
        threads = [b // t for b, t in zip(self.block_tiles, self.thread_tiles) if t]
        for axis, count in zip(self.thread_mapping, threads):
            dims[_AXES.index(axis)] = max(dims[_AXES.index(axis)], count)
        return dims[0], dims[1], dims[2]


def _mapping(axes: tuple[str, ...], kind: str) -> str:
    return "[" + ", ".join(f"#gpu.{kind}<{axis}>" for axis in axes) + "]"


class GpuScriptWriter(ScriptWriter):
    """The CPU script writer plus the GPU steps: mapped foralls, shared-memory staging,
    block-per-row reductions."""

    def tile_mapped(self, handle: str, sizes: tuple[int, ...], axes: tuple[str, ...],
                    kind: str) -> tuple[str, str]:
        """``tile_using_forall`` whose loops map to ``#gpu.<kind><axis>`` (block or thread)."""
        tiled, forall = self.fresh("tiled"), self.fresh("forall")
        self.lines.append(
            f"{tiled}, {forall} = transform.structured.tile_using_forall {handle} tile_sizes "
            f"{list(sizes)} (mapping = {_mapping(axes, kind)}) : ({self.ANY}) -> "
            f"({self.ANY}, {self.ANY})"
        )
        return tiled, forall

    def stage_in_shared_memory(self, handle: str, loop: str, promoted: tuple[Promotion, ...],
                               n_loops: int) -> str:
        """Copy the tiles of ``promoted`` operands into workgroup memory; returns the op.

        ``pad`` with ``nofold`` and zero amounts materializes each operand tile, then
        ``bufferize_to_allocation`` gives it a workgroup-memory buffer filled by a
        ``linalg.copy``; the copies (found in ``loop``, in operand order) are spread over the
        block's threads, vectorized per thread.
        """
        flags = [0] * (max(p.operand for p in promoted) + 1)
        for p in promoted:
            flags[p.operand] = 1
        padded, pad, copy = self.fresh("padded"), self.fresh("pad"), self.fresh("copy")
        self.lines.append(
            f"{padded}, {pad}, {copy} = transform.structured.pad {handle} {{padding_dimensions = "
            f'{list(range(n_loops))}, nofold_flags = {flags}, copy_back_op = "none"}} : '
            f"({self.ANY}) -> ({self.ANY}, {self.ANY}, {self.ANY})"
        )
        for p in promoted:
            producer = self.fresh("pad")
            self.lines.append(f"{producer} = transform.get_producer_of_operand {padded}[{p.operand}]"
                              f" : ({self.ANY}) -> {self.ANY}")
            buffer, new_ops = self.fresh("buffer"), self.fresh("alloc")
            self.lines.append(
                f"{buffer}, {new_ops} = transform.structured.bufferize_to_allocation {producer} "
                f'{{memory_space = {WORKGROUP}, memcpy_op = "linalg.copy"}} : {self.ANY}'
            )
        copies = self.fresh("copies")
        self.lines.append(f'{copies} = transform.structured.match ops{{["linalg.copy"]}} in {loop}'
                          f" : ({self.ANY}) -> {self.ANY}")
        handles = [self.fresh("copy") for _ in promoted]
        if len(handles) == 1:
            self.lines.append(f"{handles[0]} = transform.merge_handles {copies} : {self.ANY}")
        else:
            self.lines.append(f"{', '.join(handles)} = transform.split_handle {copies} : "
                              f"({self.ANY}) -> ({', '.join([self.ANY] * len(handles))})")
        for p, copy_handle in zip(promoted, handles):
            tiled, _ = self.tile_mapped(copy_handle, p.copy_tiles, p.copy_mapping, "thread")
            self.vectorize(tiled)
        return padded

    def tile_reduction_to_threads(self, handle: str, n_loops: int, threads: int) -> tuple[str, str, str]:
        """Split the innermost (reduction) loop over ``threads`` threads of the block.

        Returns (partials fill, per-thread partial reduction, combining op). The partials
        (one per thread) get a workgroup-memory buffer: all threads write it, one reads it.
        """
        fill, split, combine, forall = (self.fresh("fill"), self.fresh("split"),
                                        self.fresh("combine"), self.fresh("forall"))
        counts = [0] * n_loops
        counts[-1] = threads
        self.lines.append(
            f"{fill}, {split}, {combine}, {forall} = transform.structured."
            f"tile_reduction_using_forall {handle} by num_threads = {counts} "
            f"mapping = [#gpu.thread<x>] : ({self.ANY}) -> ({self.ANY}, {self.ANY}, {self.ANY}, "
            f"{self.ANY})"
        )
        buffer, new_ops = self.fresh("buffer"), self.fresh("alloc")
        self.lines.append(
            f"{buffer}, {new_ops} = transform.structured.bufferize_to_allocation {fill} "
            f"{{memory_space = {WORKGROUP}, bufferize_destination_only}} : {self.ANY}"
        )
        return fill, split, combine


def render_gpu_op_sequence(plan: GpuOpSchedule) -> str:
    """The ``transform.named_sequence @schedule_op_<tag>`` applying ``plan``."""
    w = GpuScriptWriter()
    op = w.match_tag(plan.tag)
    n_loops = len(plan.block_tiles)
    op, block = w.tile_mapped(op, plan.block_tiles, plan.block_mapping, "block")
    if plan.fused_init_tag is not None:
        init, block = w.fuse_into(w.match_tag(plan.fused_init_tag), block)
        init, _ = w.tile_mapped(init, plan.init_thread_tiles, plan.init_thread_mapping, "thread")
        w.vectorize(init)
    if plan.split is not None:
        render_split_reduction(w, op, n_loops, plan.split, workgroup=WORKGROUP,
                               vectorize=plan.vectorize)
        return named_sequence(plan.sequence_name, w)
    if plan.row_threads:
        fill, split, combine = w.tile_reduction_to_threads(op, n_loops, plan.row_threads)
        # One partial per thread; the combination (parallel loops only, extent 1 in a block)
        # runs on one thread.
        w.tile_mapped(fill, (*([0] * (n_loops - 1)), 1), ("x",), "thread")
        combine, _ = w.tile_mapped(combine, (1,) + (0,) * (n_loops - 2), ("x",), "thread")
        if plan.warp_combine:
            w.lines.append(f'transform.annotate {combine} "{WARP_COMBINE}" : {w.ANY}')
        if plan.vectorize:
            w.vectorize(split)
        return named_sequence(plan.sequence_name, w)
    if plan.k_tiles is not None and any(plan.k_tiles):
        n_k = sum(1 for t in plan.k_tiles if t)
        k_loops, tiled = w.fresh("kloops"), w.fresh("tiled")
        w.lines.append(f"{tiled}, {k_loops}:{n_k} = transform.structured.tile_using_for {op} "
                       f"tile_sizes {list(plan.k_tiles)} : ({w.ANY}) -> "
                       f"({', '.join([w.ANY] * (n_k + 1))})")
        # The copies land in the innermost k loop; matching in the outermost finds them.
        k_loop = f"{k_loops}#0"
        op = tiled
        if plan.promoted:
            op = w.stage_in_shared_memory(op, k_loop, plan.promoted, n_loops)
        if plan.mma_stages > 1:
            # Read after mapping by tensor_cores.py (async_copies.py double-buffers the loop).
            stages = w.fresh("stages")
            w.lines.append(f"{stages} = transform.param.constant {plan.mma_stages} : i64 -> "
                           f"!transform.param<i64>")
            w.lines.append(f'transform.annotate {k_loop} "{STAGES}" = {stages} : {w.ANY}, '
                           f"!transform.param<i64>")
    if plan.warp_tiles:
        op, warp = w.tile_mapped(op, plan.warp_tiles, plan.warp_mapping, "warp")
        w.vectorize(op)
        # One (M, N, K) contraction per warp tile: the vectorizer's broadcasts and transposes
        # folded into its indexing maps, a batch matmul's unit batch dim dropped, its f16 ->
        # f32 extensions folded into its operands
        # (the mixed-precision form mma.sync takes); then unrolled to the mma.sync shape.
        m, n, k = plan.mma_shape
        w.lines.append(f"transform.apply_patterns to {warp} {{\n"
                       f"  transform.apply_patterns.vector.reduction_to_contract\n"
                       f"  transform.apply_patterns.vector.cast_away_vector_leading_one_dim\n"
                       f"  transform.apply_patterns.vector.fold_arith_extension\n"
                       f"}} : {w.ANY}")
        w.lines.append(f"transform.apply_patterns to {warp} {{\n"
                       f"  transform.apply_patterns.gpu.unroll_vectors_subgroup_mma [{m}, {n}, {k}]\n"
                       f"}} : {w.ANY}")
        return named_sequence(plan.sequence_name, w)
    op, _ = w.tile_mapped(op, plan.thread_tiles, plan.thread_mapping, "thread")
    if plan.register_tiles and any(plan.register_tiles):
        op = w.tile_for(op, plan.register_tiles)
    if plan.reduction_tiles and any(plan.reduction_tiles):
        op = w.tile_for(op, plan.reduction_tiles)
    if plan.decompose:
        op = w.decompose(op)
    if plan.vectorize:
        w.vectorize(op)
    return named_sequence(plan.sequence_name, w)


def render_gpu_script(plans: list[GpuOpSchedule]) -> str:
    """One transform module: a sequence per op, ``@cleanup`` (shared with the CPU
    schedule), and ``@__transform_main`` for ``tilecraft-opt --transform-interpreter``."""
    return render_script(plans, render_gpu_op_sequence)


# ---- planning ---------------------------------------------------------------------------

def _axes_for(dims: list[int]) -> tuple[str, ...]:
    """CUDA axes of ``dims`` (loop order, at most 3): the innermost loop gets x."""
    return tuple(reversed(_AXES[: len(dims)]))


def _spread_threads(extents: list[int], tiles: list[int], budget: int) -> list[int]:
    """Threads per mapped loop (innermost first gets the most), each dividing its tile count."""
    threads = [1] * len(extents)
    for i in reversed(range(len(extents))):
        limit = budget if i != len(extents) - 3 else min(budget, _MAX_BLOCK_Z)
        threads[i] = largest_divisor(extents[i] // tiles[i], limit)
        budget //= threads[i]
    return threads


def _vector_lanes(extent: int, nest: LoopNest, config: GpuConfig) -> int:
    if nest.element_bits != 32 or config.vector <= 1:
        return 1
    return config.vector if extent % config.vector == 0 else 1


def _plan_split(nest: LoopNest, tag: int, config: GpuConfig, *, kind: str) -> GpuOpSchedule | None:
    """A convolution or contraction with too few output points to fill the GPU, its
    reduction split over a block's threads (``split_reduction.py``); ``None`` elsewhere."""
    if not config.split_below:
        return None
    split = split_reduction_plan(nest, kind=kind, max_threads=config.max_threads,
                                 vector=config.vector, split_below=config.split_below)
    if split is None:
        return None
    return GpuOpSchedule(tag, "split_reduction", split.block_tiles, split.block_mapping,
                         split=split.split)


def _plan_parallel(nest: LoopNest, tag: int, config: GpuConfig, *, kind: str) -> GpuOpSchedule:
    """Elementwise ops, pooling, convolutions, small reductions: threads over output points.

    The innermost three parallel loops longer than 1 map to x/y/z (1-D for a vector);
    the innermost thread tile is a vector where the loop is innermost and divisible.
    Remaining parallel loops and all reduction loops run inside each thread. A convolution
    with too few output points splits its reduction instead (:func:`_plan_split`).
    """
    if kind == "convolution":
        split = _plan_split(nest, tag, config, kind=kind)
        if split is not None:
            return split
    n_loops = len(nest.ranges)
    candidates = [d for d in nest.parallel_dims if nest.ranges[d] > 1]
    if not candidates:
        candidates = nest.parallel_dims[-1:]
    if not candidates:
        raise GpuScheduleError(f"{nest.op_name}: no parallel loop to map onto GPU threads")
    mapped = candidates[-3:]
    tiles = [1] * len(mapped)
    if mapped[-1] == n_loops - 1 or kind == "convolution":
        # A convolution's innermost output loop (ow) is not its innermost loop, but the 1-D
        # form `decompose` leaves vectorizes along it: 4 accumulators per thread.
        tiles[-1] = _vector_lanes(nest.ranges[mapped[-1]], nest, config)
    threads = _spread_threads([nest.ranges[d] for d in mapped], tiles, config.max_threads)
    block = [0] * n_loops
    thread = [0] * n_loops
    for d, tile, count in zip(mapped, tiles, threads):
        block[d], thread[d] = tile * count, tile
    register = [1 if p and d not in mapped and nest.ranges[d] > 1 else 0
                for d, p in enumerate(nest.parallel)]
    reduction = [0 if p else 1 for p in nest.parallel]
    axes = _axes_for(mapped)
    return GpuOpSchedule(
        tag, kind, tuple(block), axes, tuple(thread), axes,
        register_tiles=tuple(register) if any(register) else None,
        reduction_tiles=tuple(reduction) if any(reduction) else None,
        decompose=kind == "convolution",
        vectorize=nest.projected or kind == "convolution",
    )


def _copy_distribution(shape: tuple[int, ...], config: GpuConfig, threads_x: int,
                       threads_y: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Thread tiles of a cooperative copy of a ``shape`` tile: rows x vectors, on at most
    the compute's ``threads_x`` x ``threads_y`` threads (a larger copy grid would grow the
    block beyond what the compute uses)."""
    lanes = config.vector if shape[-1] % config.vector == 0 else 1
    columns = largest_divisor(shape[-1] // lanes, threads_x)
    if len(shape) == 1:
        return (shape[0] // columns,), ("x",)
    rows = largest_divisor(shape[-2], threads_y)
    # Leading dims (the batch of a batch matmul) are 1 inside a block tile: left untiled.
    return (shape[-2] // rows, shape[-1] // columns), ("y", "x")


_ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f64": 8, "i64": 8, "i8": 1, "i16": 2}


def _shared_bytes(shapes: list[tuple[int, ...]], element_bytes: int) -> int:
    return sum(math.prod(shape) for shape in shapes) * element_bytes


def _plan_contraction(nest: LoopNest, tag: int, config: GpuConfig,
                      operand_maps: list[ir.AffineMap] | None, element_bytes: int = 4) -> GpuOpSchedule:
    """Matmul-like ops: block tile of C, thread tile of C (register accumulators), K staged
    through shared memory in ``k_step`` slices when ``config.shared`` (``element_bytes``: the
    widest operand element, for the shared-memory budget)."""
    batch, m_dims, n_dims, k_dims = nest.contraction
    n_loops = len(nest.ranges)
    m, n, k = m_dims[-1], n_dims[-1], k_dims[-1]
    tm = largest_divisor(nest.ranges[m], config.thread_m)
    tn = largest_divisor(nest.ranges[n], config.thread_n)
    bm = largest_divisor(nest.ranges[m], config.block_m, multiple_of=tm)
    bn = largest_divisor(nest.ranges[n], config.block_n, multiple_of=tn)
    while (bm // tm) * (bn // tn) > config.max_threads:
        bm = largest_divisor(nest.ranges[m], bm // 2, multiple_of=tm)
    # One more parallel dim on the grid's z: a batch dim, or else a second m or n dim (a
    # projection into [heads, head_dim] whose reshape folded in); the largest, with the
    # others serial inside each thread.
    outer = [d for d in (*batch, *m_dims[:-1], *n_dims[:-1]) if nest.ranges[d] > 1]
    z_dim = max(outer, key=lambda d: nest.ranges[d]) if outer else None
    z_blocks = nest.ranges[z_dim] if z_dim is not None else 1

    def blocks(bm: int, bn: int) -> int:
        return -(-nest.ranges[m] // bm) * -(-nest.ranges[n] // bn) * z_blocks

    # Few blocks leave most multiprocessors idle: halve the larger tile (never below 32 x 32:
    # two warps of 4 x 4 thread tiles) until the grid fills the GPU.
    while blocks(bm, bn) < config.fill_blocks:
        wider = bn >= bm
        smaller = largest_divisor(nest.ranges[n] if wider else nest.ranges[m], (bn if wider else bm) // 2,
                                  multiple_of=tn if wider else tm)
        if smaller < 32 or smaller == (bn if wider else bm):
            break
        bm, bn = (bm, smaller) if wider else (smaller, bn)
    # Smaller thread tiles on top (2 x 2: 256 threads a block) measured no faster on an H200
    # (BERT-base's 128-token layers, 2026-11-30): what those layers lack is a split K.
    block = [0] * n_loops
    thread = [0] * n_loops
    block[m], block[n] = bm, bn
    thread[m], thread[n] = tm, tn
    mapped = [m, n]
    outer_batch = [z_dim] if z_dim is not None else []
    if outer_batch:
        block[z_dim] = 1
        mapped.insert(0, z_dim)
    register = [1 if (p and block[d] == 0 and nest.ranges[d] > 1) else 0
                for d, p in enumerate(nest.parallel)]
    def staged_shapes(kt: int) -> list[tuple[int, ...]]:
        """Each staged operand tile's shape for a ``kt`` slice of K: the block's m/n tiles, the
        slice, and the whole extent of a dim neither tiles (a second m or n dim)."""
        k_tiles = [kt if d == k else (1 if d in k_dims else 0) for d in range(n_loops)]
        return [tuple(block[d] or k_tiles[d] or nest.ranges[d]
                      for d in (ir.AffineDimExpr(e).position for e in affine_map.results))
                for affine_map in (operand_maps or [])[:2]]

    shared = config.shared
    kt = largest_divisor(nest.ranges[k], config.k_step)
    # Halve the slice until the staged tiles fit a block's static shared memory (ptxas refuses
    # more); a contraction with an untiled second m or n dim (an attention projection into
    # [heads, head_dim]) can be over it even at one K step: it reads global memory instead.
    while shared and _shared_bytes(staged_shapes(kt), element_bytes) > _STATIC_SHARED_BYTES:
        if kt == 1:
            shared = False
        kt = largest_divisor(nest.ranges[k], kt // 2) if kt > 1 else kt
    step = largest_divisor(kt if shared else nest.ranges[k], config.unroll)
    reduction = [0] * n_loops
    for d in k_dims:
        reduction[d] = 1
    reduction[k] = step
    k_tiles = None
    promoted: tuple[Promotion, ...] = ()
    if shared:
        k_tiles = tuple(kt if d == k else (1 if d in k_dims else 0) for d in range(n_loops))
        promotions = []
        for operand, shape in enumerate(staged_shapes(kt)):
            tiles, axes = _copy_distribution(shape, config, bn // tn, bm // tm)
            full = (0,) * (len(shape) - len(tiles)) + tiles
            promotions.append(Promotion(operand, full, axes))
        promoted = tuple(promotions)
    return GpuOpSchedule(
        tag, "contraction", tuple(block), ("z", "y", "x") if outer_batch else ("y", "x"),
        tuple(thread), ("y", "x"), k_tiles=k_tiles, promoted=promoted,
        register_tiles=tuple(register) if any(register) else None,
        reduction_tiles=tuple(reduction),
    )


def _tensor_core_operands(nest: LoopNest, operand_maps: list[ir.AffineMap] | None,
                          element_types: tuple[str, ...], config: GpuConfig) -> bool:
    """Whether ``nest`` is a contraction ``mma.sync`` computes as planned: A[.., m, k] and
    B[.., k, n] or B[.., n, k] of the chosen type into an f32 C[.., m, n], one m, n and k
    loop, at most one batch loop longer than 1, and extents that are multiples of the mma
    shape. Any other contraction keeps the FMA schedule."""
    if config.tensor_cores not in TENSOR_CORE_TYPES:
        return False
    want, mma_shape = TENSOR_CORE_TYPES[config.tensor_cores]
    if operand_maps is None or len(operand_maps) != 3 or nest.num_inputs != 2:
        return False
    if tuple(element_types) != (want, want, "f32"):
        return False
    batch, m_dims, n_dims, k_dims = nest.contraction
    if len(m_dims) != 1 or len(n_dims) != 1 or len(k_dims) != 1:
        return False
    if sum(1 for d in batch if nest.ranges[d] > 1) > 1:   # one batch loop, on blocks' z
        return False
    m, n, k = m_dims[0], n_dims[0], k_dims[0]
    if any(nest.ranges[d] % size for d, size in zip((m, n, k), mma_shape)):
        return False
    dims = [[ir.AffineDimExpr(e).position for e in amap.results] for amap in operand_maps]
    return (dims[0][-2:] == [m, k] and dims[1][-2:] in ([k, n], [n, k])
            and dims[2][-2:] == [m, n])


def _tensor_core_copy(shape: tuple[int, ...], element_bytes: int,
                      threads: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Thread tiles of the block's copy of a ``shape`` operand tile into shared memory:
    16 bytes per access (``ld.global.v4``, ``st.shared.v4``) and every thread of the block,
    lanes over linear thread ids (the 32 lanes of a warp cover consecutive 16-byte chunks of
    a row, then the next rows: whole 32-byte sectors of global memory).

    Where the row is not a multiple of 16 bytes, narrower accesses (the copy stays right,
    only slower)."""
    rows, columns = (shape[-2] if len(shape) > 1 else 1), shape[-1]
    lanes = largest_divisor(columns, max(1, _COPY_BYTES // element_bytes))
    column_threads = largest_divisor(columns // lanes, threads)
    row_threads = largest_divisor(rows, threads // column_threads)
    if len(shape) == 1:
        return (columns // column_threads,), ("linear_dim_0",)
    # Leading dims (the batch of a batch matmul) are 1 inside a block tile: left untiled.
    return ((rows // row_threads, columns // column_threads), ("linear_dim_1", "linear_dim_0"))


def _power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _plan_tensor_core(nest: LoopNest, tag: int, config: GpuConfig,
                      operand_maps: list[ir.AffineMap]) -> GpuOpSchedule:
    """A contraction on tensor cores: block tile of C (batch on z), K staged through shared
    memory in slices (``mma_k_step``) copied by all the block's threads 16 bytes at a time,
    the block tile split into warp tiles (``warp_m`` x ``warp_n``), each warp's tile
    ``mma.sync`` steps of 16 x 8 x 16 (16 x 8 x 8 for TF32) whose accumulators stay in the
    warp's registers across the K loop (``tensor_cores.py``)."""
    batch, (m,), (n,), (k,) = nest.contraction
    n_loops = len(nest.ranges)
    input_type, (mma_m, mma_n, mma_k) = TENSOR_CORE_TYPES[config.tensor_cores]
    element_bytes = 2 if input_type == "f16" else 4
    wm = largest_divisor(nest.ranges[m], config.warp_m, multiple_of=mma_m)
    wn = largest_divisor(nest.ranges[n], config.warp_n, multiple_of=mma_n)
    bm = largest_divisor(nest.ranges[m], config.mma_block_m, multiple_of=wm)
    bn = largest_divisor(nest.ranges[n], config.mma_block_n, multiple_of=wn)
    while (bm // wm) * (bn // wn) * WARP_SIZE > config.max_threads and bm > wm:
        bm = largest_divisor(nest.ranges[m], bm // 2, multiple_of=wm)
    while (bm // wm) * (bn // wn) * WARP_SIZE > config.max_threads and bn > wn:
        bn = largest_divisor(nest.ranges[n], bn // 2, multiple_of=wn)
    # A power of two of warps: the operand copies (power-of-two tiles) then give every
    # thread the same share, with no thread left out behind a guard (which would also keep
    # the copies from being double-buffered, async_copies.py).
    while not _power_of_two((bm // wm) * (bn // wn)):
        if bn // wn > 1 and not _power_of_two(bn // wn):
            bn = largest_divisor(nest.ranges[n], bn - wn, multiple_of=wn)
        else:
            bm = largest_divisor(nest.ranges[m], bm - wm, multiple_of=wm)
    warps = (bm // wm) * (bn // wn)
    block = [0] * n_loops
    block[m], block[n] = bm, bn
    warp = [0] * n_loops
    warp[m], warp[n] = wm, wn
    outer_batch = [d for d in batch if nest.ranges[d] > 1]
    mapping = ("y", "x")
    if outer_batch:
        block[outer_batch[-1]] = 1
        mapping = ("z", "y", "x")
    kt = largest_divisor(nest.ranges[k], max(config.mma_k_step, mma_k), multiple_of=mma_k)
    stages = config.mma_stages

    def operand_tiles(kt: int) -> list[tuple[int, ...]]:
        return [tuple(block[ir.AffineDimExpr(e).position] or (kt if ir.AffineDimExpr(e).position == k
                                                              else 1)
                      for e in affine_map.results) for affine_map in operand_maps[:2]]

    # Static shared memory is 48 KiB a block: a smaller K slice, then one buffer, if the
    # tiles (rows padded by 16 bytes, tensor_cores.pad_shared_rows) would not fit.
    def shared_bytes(kt: int, stages: int) -> int:
        return stages * sum(math.prod(t[:-1]) * (t[-1] * element_bytes + 16)
                            for t in operand_tiles(kt))

    while shared_bytes(kt, stages) > _STATIC_SHARED_BYTES and kt > mma_k:
        kt = largest_divisor(nest.ranges[k], kt // 2, multiple_of=mma_k)
    if shared_bytes(kt, stages) > _STATIC_SHARED_BYTES:
        stages = 1
    k_tiles = tuple(kt if d == k else 0 for d in range(n_loops))
    promotions = []
    for operand, shape in enumerate(operand_tiles(kt)):
        tiles, axes = _tensor_core_copy(shape, element_bytes, warps * WARP_SIZE)
        promotions.append(Promotion(operand, (0,) * (len(shape) - len(tiles)) + tiles, axes))
    # The thread tiles only shape the fused init fill (lanes on x, warps on y).
    init_tiles, _ = _copy_distribution((bm, bn), config, WARP_SIZE, warps)
    thread = [0] * n_loops
    thread[m], thread[n] = init_tiles
    return GpuOpSchedule(
        tag, "tensor_core", tuple(block), mapping, tuple(thread), ("y", "x"),
        k_tiles=k_tiles, promoted=tuple(promotions),
        warp_tiles=tuple(warp), warp_mapping=("linear_dim_1", "linear_dim_0"),
        mma_shape=(mma_m, mma_n, mma_k), mma_stages=stages,
    )


def _plan_row_reduction(nest: LoopNest, tag: int, config: GpuConfig) -> GpuOpSchedule | None:
    """One block per output element, its threads splitting the innermost reduction loop."""
    rows = [d for d in nest.parallel_dims if nest.ranges[d] > 1]
    if len(rows) > 3 or nest.parallel[-1] or not nest.projected:
        return None
    # One reduction loop: upstream's tile_reduction_using_forall aborts the process (an
    # assertion) on an op with a second one, even of extent 1 (a global average pool over h
    # and w as one generic; Llama's grouped-query attention scores); such an op keeps the
    # thread-per-output plan.
    if len(nest.reduction_dims) > 1:
        return None
    threads = largest_divisor(nest.ranges[-1], config.row_threads)
    if threads < 32:
        return None
    if not rows:
        return None
    block = tuple(1 if d in rows else 0 for d in range(len(nest.ranges)))
    return GpuOpSchedule(tag, "row_reduction", block, _axes_for(rows), row_threads=threads,
                         warp_combine=config.warp_reduce)


def plan_gpu_op(nest: LoopNest, tag: int, config: GpuConfig = GpuConfig(),
                operand_maps: list[ir.AffineMap] | None = None,
                element_types: tuple[str, ...] = ()) -> GpuOpSchedule:
    """The GPU plan of one op (raises :class:`GpuScheduleError` for what cannot be mapped).

    ``element_types``: the element type of each operand (``"f16"``), which decides whether
    a contraction goes to tensor cores (``config.tensor_cores``)."""
    if not nest.static:
        raise GpuScheduleError(
            f"{nest.op_name}: dynamic shapes are not supported by the CUDA schedule; give static "
            "input shapes (shape_dict=)"
        )
    if not nest.ranges:
        raise GpuScheduleError(f"{nest.op_name}: a 0-d op has no loop to map onto GPU threads")
    if 0 in nest.ranges:
        raise GpuScheduleError(f"{nest.op_name}: zero-size loops have nothing to run on the GPU")
    if plans_as_contraction(nest):
        if config.tensor_cores and _tensor_core_operands(nest, operand_maps, element_types, config):
            return _plan_tensor_core(nest, tag, config, operand_maps)
        split = _plan_split(nest, tag, config, kind="contraction")
        if split is not None:
            return split
        element_bytes = max((_ELEMENT_BYTES.get(t, 4) for t in element_types[:2]), default=4)
        return _plan_contraction(nest, tag, config, operand_maps, element_bytes)
    if nest.convolution and nest.op_name in DECOMPOSABLE:
        return _plan_parallel(nest, tag, config, kind="convolution")
    if nest.reduction_dims and nest.ranges[-1] >= 64:
        plan = _plan_row_reduction(nest, tag, config)
        if plan is not None:
            return plan
    return _plan_parallel(nest, tag, config, kind="elementwise" if not nest.reduction_dims
                          else "reduction")


def _init_plan(plan: GpuOpSchedule, nest: LoopNest) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Thread tiles of ``plan``'s fused init fill, over the op's output dims."""
    tiles, axes = [], []
    mapped = [d for d, t in enumerate(plan.thread_tiles) if t]
    for d in nest.output_dims:
        if d is not None and d in mapped:
            tiles.append(plan.thread_tiles[d])
            axes.append(plan.thread_mapping[mapped.index(d)])
        else:
            tiles.append(0)
    if not axes:
        tiles[0] = 1
        axes = ["x"]
    return tuple(tiles), tuple(axes)


def operand_maps_of(module: ir.Operation) -> list[list[ir.AffineMap]]:
    """Indexing maps of every structured op (named ops through a generalized twin)."""
    _container, twin = scratch_copy(module)
    with module.context:
        passmanager.PassManager.parse(
            "builtin.module(func.func(linalg-generalize-named-ops))").run(twin)
    return [indexing_maps(op) for op in structured_ops(twin)]


def _element_types(op: ir.Operation) -> tuple[str, ...]:
    return tuple(str(ir.ShapedType(v.type).element_type) if isinstance(v.type, ir.ShapedType)
                 else str(v.type) for v in op.operands)


def plan_gpu_module(module: ir.Operation, config: GpuConfig = GpuConfig()) -> list[GpuOpSchedule]:
    """Tag every structured op of ``module`` (``tilecraft.op_id``) and plan it for the GPU."""
    analyzed = analyze_loop_nests(module)
    maps = operand_maps_of(module)
    tags: dict[ir.Operation, int] = {}
    for tag, (op, _) in enumerate(analyzed):
        op.attributes[TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), tag)
        tags[op] = tag
    plans: dict[int, GpuOpSchedule] = {}
    fused: set[int] = set()
    for (op, nest), op_maps in zip(analyzed, maps):
        tag = tags[op]
        try:
            plan = plan_gpu_op(nest, tag, config, op_maps, _element_types(op))
        except GpuScheduleError as error:
            raise GpuScheduleError(f"{error} (at {op.location})") from None
        fill = init_fill(op)
        if fill is not None and fill in tags:
            tiles, axes = _init_plan(plan, nest)
            plan = replace(plan, fused_init_tag=tags[fill], init_thread_tiles=tiles,
                           init_thread_mapping=axes)
            fused.add(tags[fill])
        plans[tag] = plan
    return [plan for tag, plan in sorted(plans.items()) if tag not in fused]


# ---- applying ---------------------------------------------------------------------------

def _pads_to_copies(module: ir.Operation) -> None:
    """Rewrite each ``tensor.pad`` as fill + ``linalg.copy`` into the interior.

    Why: a pad bufferizes to a ``memref.copy`` on the host, which cannot touch device
    memory; as linalg ops both parts get GPU plans, and one-shot bufferization writes the
    copy straight into the padded buffer (extract_slice / insert_slice of the same slice).
    """
    from mlir.dialects import linalg, tensor

    for pad in ops_where(module, lambda op: op.name == "tensor.pad"):
        source = pad.operands[0]
        source_type = ir.RankedTensorType(source.type)
        result_type = ir.RankedTensorType(pad.results[0].type)
        low = [int(v) for v in ir.DenseI64ArrayAttr(pad.attributes["static_low"])]
        if not (source_type.has_static_shape and result_type.has_static_shape) or len(pad.operands) > 1:
            raise GpuScheduleError(
                "tensor.pad: dynamic shapes are not supported by the CUDA schedule; give static "
                f"input shapes (shape_dict=) (at {pad.location})")
        body = pad.regions[0].blocks[0]
        yielded = list(body.operations)[-1].operands[0]
        owner = yielded.owner
        with ir.InsertionPoint(pad), pad.location:
            if isinstance(owner, ir.Block) or (owner.operation.parent is not None
                                               and owner.operation.parent.operation == pad):
                if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
                    raise GpuScheduleError(f"tensor.pad with a non-constant padding value is not "
                                           f"supported on cuda (at {pad.location})")
                value = ir.Operation.create("arith.constant", results=[yielded.type],
                                            attributes={"value": owner.operation.attributes["value"]}).result
            else:
                value = yielded
            empty = tensor.EmptyOp(list(result_type.shape), result_type.element_type).result
            filled = linalg.fill(value, outs=[empty])
            interior = extract_static(filled, low, list(source_type.shape))
            copied = linalg.copy(source, outs=[interior])
            result = insert_static(copied, filled, low)
        pad.results[0].replace_all_uses_with(result)
        pad.erase()


def _op_description(module: ir.Operation, tag: int) -> str:
    found: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if TAG in op.attributes and ir.IntegerAttr(op.attributes[TAG]).value == tag:
            found.append(f"{op.name} at {op.location}")
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found[0] if found else f"op {tag}"


def apply_gpu_schedule(module: ir.Operation, plans: list[GpuOpSchedule]) -> str:
    """Apply ``plans`` to the tagged ``module``; returns the script that was applied.

    A plan the interpreter rejects is retried without vectorization (e.g. gathers); if it
    still fails, :class:`GpuScheduleError` names the op: nothing may stay on the host.
    """
    applied = []
    for plan in plans:
        script = render_gpu_script([plan])
        with module.context:
            transform_module = ir.Module.parse(script)
        # Applied once; a failure restores the module (apply.py's checkpoint) for the retry.
        error = apply_if_valid(module, transform_module, plan.sequence_name)
        if error is not None and plan.vectorize:
            plan = replace(plan, vectorize=False)
            with module.context:
                transform_module = ir.Module.parse(render_gpu_script([plan]))
            error = apply_if_valid(module, transform_module, plan.sequence_name)
        if error is not None:
            raise GpuScheduleError(
                f"the GPU schedule cannot map {_op_description(module, plan.tag)}: {error}")
        applied.append(plan)
    script = render_gpu_script(applied)
    with module.context:
        transform_module = ir.Module.parse(script)
    interpreter.apply_named_sequence(module, find_sequence(transform_module, "cleanup"),
                                     transform_module.operation)
    remove_tags(module)
    return script


_CONFIG_OPTIONS = {
    "max-threads": "threads per block (default 256)",
    "vector": "elements per thread along the innermost loop, one vector access (default 4)",
    "block-m": "contraction rows per block (default 64)",
    "block-n": "contraction columns per block (default 64)",
    "thread-m": "contraction rows per thread (default 4)",
    "thread-n": "contraction columns per thread (default 4)",
    "k-step": "reduction slice staged in shared memory (default 16)",
    "shared": "1: stage contraction operands in shared memory, 0: read global (default 1)",
    "unroll": "reduction steps per vectorized body (default 4)",
    "row-threads": "threads per row of a block-per-row reduction (default 128)",
    "fill-blocks": "blocks an FMA contraction's tiles are halved toward, down to 32 x 32 (default 264)",
    "warp-reduce": "1: combine block-per-row partials with warp shuffles, 0: one thread "
                   "combines them from shared memory (default 0)",
    "tensor-cores": "f16 (f16 inputs) or tf32 (f32 inputs as TF32): contractions accumulating "
                    "in f32 on tensor cores (mma.sync, sm_80 and later); empty: none (default)",
    "arch": "the CUDA architecture (sm_XX) the tensor-core option is checked against",
    "mma-block-m": "tensor-core contraction rows per block (default 128)",
    "mma-block-n": "tensor-core contraction columns per block (default 128)",
    "mma-k-step": "tensor-core reduction slice staged in shared memory (default 32)",
    "warp-m": "tensor-core contraction rows per warp (default 64)",
    "warp-n": "tensor-core contraction columns per warp (default 32)",
    "mma-stages": "tensor-core K slices in flight: 2 double-buffers the shared tiles with "
                  "cp.async, 1 copies then computes (default 2)",
    "split-below": "split the reduction of a convolution or contraction with fewer output "
                   "points than this many threads over a block's threads; 0: never "
                   "(default 0; 135168 fills an H100/H200 but measured slower)",
}


def config_from_options(options: Mapping[str, str]) -> GpuConfig:
    """A :class:`GpuConfig` from ``tilecraft-gpu-schedule`` pass options."""
    values = {}
    for key, field_name in (("max-threads", "max_threads"), ("vector", "vector"), ("block-m", "block_m"),
                            ("block-n", "block_n"), ("thread-m", "thread_m"),
                            ("thread-n", "thread_n"), ("k-step", "k_step"),
                            ("unroll", "unroll"), ("row-threads", "row_threads"),
                            ("fill-blocks", "fill_blocks"),
                            ("mma-block-m", "mma_block_m"), ("mma-block-n", "mma_block_n"),
                            ("mma-k-step", "mma_k_step"), ("warp-m", "warp_m"),
                            ("warp-n", "warp_n"), ("mma-stages", "mma_stages")):
        if key in options:
            values[field_name] = positive_int_option(key, options[key])
    for key, field_name in (("shared", "shared"), ("warp-reduce", "warp_reduce")):
        if key in options:
            if options[key] not in ("0", "1"):
                raise GpuScheduleError(f"option {key} must be 0 or 1, got {options[key]!r}")
            values[field_name] = options[key] == "1"
    if values.get("mma_stages", 1) > 2:
        raise GpuScheduleError(f"option mma-stages must be 1 or 2, got {options['mma-stages']!r}")
    if "split-below" in options:
        value = options["split-below"]
        if not value.isdigit():
            raise GpuScheduleError(f"option split-below must be a count of threads (0: never), "
                                   f"got {value!r}")
        values["split_below"] = int(value)
    if options.get("tensor-cores"):
        values["tensor_cores"] = _tensor_core_option(options["tensor-cores"], options.get("arch", ""))
    if "arch" in options:
        values["arch"] = options["arch"]
    return GpuConfig(**values)


def tensor_core_problem(value: str, arch: str) -> str | None:
    """Why ``tensor-cores=<value>`` cannot be compiled for ``arch`` (``""``: any), or ``None``.
    Shared by the schedule pass's option and the target's ``-tensor-cores=``."""
    if value in _TENSOR_CORES_NOT_BUILT:
        return (f"tensor-cores={value} is not supported yet ({_TENSOR_CORES_NOT_BUILT[value]}); "
                f"choose {' or '.join(TENSOR_CORE_TYPES)}")
    if value not in TENSOR_CORE_TYPES:
        return f"tensor-cores must be one of {', '.join(TENSOR_CORE_TYPES)}, got {value!r}"
    if arch:
        digits = arch.removeprefix("sm_").rstrip("a")
        if not digits.isdigit():
            return f"the arch must be sm_XX, got {arch!r}"
        if int(digits) < 80:
            return (f"tensor-cores={value} needs sm_80 or later (mma.sync with {value} inputs), "
                    f"the target is {arch}")
    return None


def _tensor_core_option(value: str, arch: str) -> str:
    """``value`` of the ``tensor-cores`` option, checked (:func:`tensor_core_problem`)."""
    problem = tensor_core_problem(value, arch)
    if problem is not None:
        raise GpuScheduleError(f"option {problem}")
    return value


@register_pass(
    "tilecraft-gpu-schedule",
    "Tile every linalg op onto CUDA blocks and threads (transform scripts, tensors)",
    options=_CONFIG_OPTIONS,
)
def gpu_schedule_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why on tensors: tiling, fusion of init fills, shared-memory staging and vectorization
    compose there; the loops carry ``#gpu.block``/``#gpu.thread`` mappings that
    ``tilecraft-gpu-map`` turns into ``gpu.launch`` after bufferization."""
    _pads_to_copies(module)
    apply_gpu_schedule(module, plan_gpu_module(module, config_from_options(options)))


# ---- after bufferization: loops onto the grid --------------------------------------------

# Threads per block of a copy kernel (strided copies one-shot bufferization left on the host).
COPY_THREADS = 256


def _inside_forall(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "scf.forall":
            return True
        parent = parent.parent
    return False


def strided_copies_to_kernels(module: ir.Operation) -> None:
    """Each host-side ``memref.copy`` of a strided view (a concat's branch written into its
    slice, a pad's interior that bufferization could not write in place) as block- and
    thread-mapped loops of element loads and stores, which the grid mapping then turns into
    a kernel like any other: host code cannot touch device buffers, and a strided view is
    no single ``gpu.memcpy``. Copies of dynamic shapes stay (the host-memory pass names them).
    """
    from mlir.dialects import arith, memref as memref_dialect, scf

    copies = ops_where(module, lambda op: is_strided_copy(op) and not _inside_forall(op))
    for copy in copies:
        source, target = copy.operands
        shape = list(ir.MemRefType(source.type).shape)
        if any(ir.ShapedType.is_dynamic_size(d) for d in shape):
            continue
        total = 1
        for extent in shape:
            total *= extent
        threads = min(COPY_THREADS, max(total, 1))
        blocks = -(-total // threads)
        index = ir.IndexType.get()

        def constant(value: int) -> ir.Value:
            return arith.ConstantOp(index, value).result

        with ir.InsertionPoint(copy), copy.location:
            grid = scf.ForallOp([0], [blocks], [1],
                                mapping=ir.ArrayAttr.get([ir.Attribute.parse("#gpu.block<x>")]))
            with ir.InsertionPoint(grid.body):
                lanes = scf.ForallOp([0], [threads], [1],
                                     mapping=ir.ArrayAttr.get([ir.Attribute.parse("#gpu.thread<x>")]))
                with ir.InsertionPoint(lanes.body):
                    linear = arith.addi(arith.muli(grid.induction_variables[0], constant(threads)),
                                        lanes.induction_variables[0])
                    inside = arith.cmpi(arith.CmpIPredicate.ult, linear, constant(total))
                    guard = scf.IfOp(inside)
                    with ir.InsertionPoint(guard.then_block):
                        indices: list[ir.Value] = []
                        rest = linear
                        for extent in reversed(shape):
                            indices.insert(0, arith.remui(rest, constant(extent)))
                            rest = arith.divui(rest, constant(extent))
                        value = memref_dialect.load(source, indices)
                        memref_dialect.store(value, target, indices)
                        scf.YieldOp([])
                    scf.InParallelOp()
                scf.InParallelOp()
        copy.erase()

def _forall_block_dims(forall: ir.Operation) -> tuple[int, int, int]:
    """Threads along x/y/z that the thread-mapped loops nested in ``forall`` need."""
    dims = [1, 1, 1]

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.forall" and "mapping" in op.attributes:
            mapping = [str(a) for a in ir.ArrayAttr(op.attributes["mapping"])]
            if mapping and mapping[0].startswith("#gpu.warp"):
                # Warps (linear ids): lanes on x, warps on y (the plan's block_dims).
                warps = 1
                for bound in ir.DenseI64ArrayAttr(op.attributes["staticUpperBound"]):
                    warps *= int(bound)
                dims[0], dims[1] = max(dims[0], WARP_SIZE), max(dims[1], warps)
            if mapping and mapping[0].startswith("#gpu.thread<linear"):
                # Linear thread ids (a tensor-core kernel's operand copies): sized by the plan
                # to the threads its warp loop already needs.
                return ir.WalkResult.ADVANCE
            if mapping and mapping[0].startswith("#gpu.thread"):
                bounds = [int(v) for v in ir.DenseI64ArrayAttr(op.attributes["staticUpperBound"])]
                for attr, bound in zip(mapping, bounds):
                    axis = _AXES.index(attr[len("#gpu.thread<"):-1])
                    dims[axis] = max(dims[axis], bound)
        return ir.WalkResult.ADVANCE

    forall.walk(visit, ir.WalkOrder.PRE_ORDER)
    return dims[0], dims[1], dims[2]


def _has_warp_loops(forall: ir.Operation) -> bool:
    return bool(ops_where(forall, lambda op: op.name == "scf.forall" and "mapping" in op.attributes
                          and str(ir.ArrayAttr(op.attributes["mapping"])).startswith("[#gpu.warp")))


@register_pass(
    "tilecraft-gpu-map",
    "Turn each block-mapped scf.forall into a gpu.launch and its thread loops into thread ids",
)
def gpu_map_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why a Python pass around two transform ops: ``map_nested_forall_to_threads`` needs
    each launch's block size, which only the nested thread loops know; it also inserts a
    ``gpu.barrier`` after every thread loop (shared-memory copies before their readers)."""
    strided_copies_to_kernels(module)
    foralls: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.forall" and "mapping" in op.attributes:
            mapping = [str(a) for a in ir.ArrayAttr(op.attributes["mapping"])]
            if mapping and mapping[0].startswith("#gpu.block"):
                foralls.append(op)
                return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    if not foralls:
        return
    w = GpuScriptWriter()
    for tag, forall in enumerate(foralls):
        forall.attributes[TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), tag)
        dims = _forall_block_dims(forall)
        handle = w.match_tag(tag)
        launch = w.fresh("launch")
        w.lines.append(f"{launch} = transform.gpu.map_forall_to_blocks {handle} generate_gpu_launch"
                       f" : ({w.ANY}) -> {w.ANY}")
        mapped = w.fresh("mapped")
        w.lines.append(f"{mapped} = transform.gpu.map_nested_forall_to_threads {launch} "
                       f"block_dims = {list(dims)} : ({w.ANY}) -> {w.ANY}")
        if _has_warp_loops(forall):
            w.lines.append(f'transform.annotate {mapped} "{TENSOR_CORE_LAUNCH}" : {w.ANY}')
    script = ("module attributes {transform.with_named_sequence} {\n"
              + named_sequence("__transform_main", w) + "\n}\n")
    with module.context:
        transform_module = ir.Module.parse(script)
    main = next(iter(transform_module.body.operations))
    try:
        interpreter.apply_named_sequence(module, main, transform_module.operation)
    except ValueError as error:
        raise GpuScheduleError(f"mapping loops onto the GPU grid failed: {error}") from None
    remove_tags(module)
    combine_with_warp_shuffles(module)
    contractions_to_mma_sync(module)
