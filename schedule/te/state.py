"""The schedule as data: blocks, their iteration dims, and the loops the primitives made.

A block's loop nest is described the way TVM's TE schedule describes a stage: every loop
is a list of *parts*, each stepping over one iteration dim of the block with a stride
(``split`` turns a part into an outer part with a larger stride and an inner one; ``fuse``
concatenates parts). The transform dialect only creates loops outside-in (tiling puts the new
loop around the op, inside the loops made before), so the script is re-rendered from this
description after every primitive (``render.py``), rather than appended to.

Extents are ints, or :class:`~.symbolic.SymExtent` (``ceildiv(n, 16)``) for dims sized by a
``te.var``; strides stay ints (a symbolic dim is split by constant factors only).

Loops of one dim must nest outer-to-inner in the order split made them: tiling cannot put
the inner part of ``i`` outside its outer part.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .errors import ScheduleError
from .payload import IndexResult, OpInfo
from .symbolic import SymExtent

SERIAL, PARALLEL, VECTORIZED, UNROLLED = "serial", "parallel", "vectorized", "unrolled"

_uids = itertools.count()


@dataclass
class Dim:
    """One iteration dim of a block: a loop of the op before scheduling."""

    name: str
    extent: "int | SymExtent"  # symbolic for a dim sized by te.var (an argument's dim)
    reduction: bool


@dataclass
class Part:
    """A loop's walk over one dim: ``extent`` steps of ``stride`` (in the dim's index space)."""

    dim: int
    stride: int
    extent: "int | SymExtent"  # symbolic for the outer part of a symbolic dim
    partial: bool = False  # the last step may cover less than ``stride`` (pad=True, symbolic)


class LoopRV:
    """A loop of a block, as returned by ``get_loops``/``split``/``fuse`` (TVM's ``LoopRV``).

    Handles stay valid across primitives that do not remove the loop. ``split`` and ``fuse``
    consume their inputs (the loop no longer exists); using a consumed handle raises
    :class:`~tilecraft.schedule.te.ScheduleError` naming the step that consumed it.
    """

    def __init__(self, block: "BlockRV", parts: list[Part], name: str) -> None:
        self.block = block
        self.parts = parts
        self.name = name
        self.kind = SERIAL
        # A GPU axis ("blockIdx.x", "threadIdx.y", ...) set by ``bind``; the loop is then
        # PARALLEL (an ``scf.forall``) whose mapping is ``#gpu.block<x>`` / ``#gpu.thread<y>``.
        self.thread_axis: str | None = None
        self.consumed: str | None = None
        self.attached: list["BlockRV"] = []  # blocks computed at this loop, in call order
        self.uid = next(_uids)

    @property
    def extent(self) -> "int | SymExtent":
        extent = 1
        for part in self.parts:
            extent *= part.extent
        return extent

    @property
    def is_reduction(self) -> bool:
        return any(self.block.dims[p.dim].reduction for p in self.parts)

    def __repr__(self) -> str:
        state = f", consumed by {self.consumed}" if self.consumed else ""
        kind = "" if self.kind == SERIAL else f", {self.kind}"
        if self.thread_axis:
            kind = f", bound to {self.thread_axis}"
        return f"LoopRV({self.name!r}, extent={self.extent}{kind}{state})"


@dataclass
class Attach:
    """Where a block is computed: ``mode`` at ``loop`` of ``host`` (``loop`` None: at the root)."""

    mode: str  # "compute_at", "cache", "init", "reverse"
    host: "BlockRV"
    loop: LoopRV | None
    root_extents: list[int] = field(default_factory=list)  # the dims' extents before (compute_root)


@dataclass
class RFactor:
    """An ``rfactor`` of a block's reduction dim ``dim``, split as ``outer`` x ``inner`` loops.

    ``parallel``: the outer loop became the partial axis (``tile_reduction_using_forall``
    with ``outer.extent`` threads); else the inner one did (``tile_reduction_using_for``
    with tile size ``inner.extent``)."""

    dim: int
    outer: LoopRV
    inner: LoopRV
    parallel: bool
    rf_block: "BlockRV"


@dataclass
class Layout:
    """A ``transform_layout`` of one operand, rendered as ``transform.structured.pack``."""

    operand: int
    packed_sizes: list[int]  # per original dim of the block (0: not packed)
    outer_perm: list[int]
    inner_perm: list[int]
    pack_block: "BlockRV"
    unpack_block: "BlockRV | None"
    other_packed_inputs: list[int]


@dataclass
class Tensorized:
    """A ``tensorize``: the tile inside ``block.loops`` (the loops from ``loop`` inward,
    now in ``inner``) is one call of the extern ``extern`` (the intrinsic ``intrinsic``)."""

    loop: LoopRV
    inner: list[LoopRV]
    intrinsic: str
    extern: str


class BlockRV:
    """A block (one linalg op, or a stage derived by a primitive), as ``get_block`` returns it.

    Kinds: ``op`` (an op of the payload), ``init`` (the fill of a reduction), ``copy`` (the
    copy-out stage ``cache_write`` leaves under the original name), ``cache`` (the compute
    stage ``cache_write`` returns), ``pack`` / ``unpack`` (the data movement
    ``transform_layout`` creates), ``read`` (the staged copy of an input ``cache_read``
    returns), ``rf`` (the partial reduction ``rfactor`` returns).
    """

    def __init__(self, name: str, kind: str, dims: list[Dim], maps: list[list[IndexResult]],
                 n_inputs: int, element_types: list[str], op: OpInfo | None) -> None:
        self.name = name
        self.kind = kind
        self.dims = dims
        self.maps = maps  # per operand, in terms of this block's dims
        self.n_inputs = n_inputs
        self.element_types = element_types
        self.op = op
        self.loops: list[LoopRV] = []
        self.attach: Attach | None = None
        self.init_block: BlockRV | None = None
        self.init_of: BlockRV | None = None
        self.cache: BlockRV | None = None  # for a copy-out block: its compute stage
        self.cache_of: BlockRV | None = None  # for a cache block: its copy-out stage
        self.layout: Layout | None = None
        self.derived_from: BlockRV | None = None  # pack/unpack: the block whose layout made them
        self.inlined_into: list[BlockRV] = []  # compute_inline: consumers it is computed in
        self.inlined: list[BlockRV] = []  # producers inlined into this block
        self.reverse: tuple[BlockRV, LoopRV] | None = None  # consumer computed at our loop
        self.reads: list[BlockRV] = []  # cache_read stages of our inputs (kind "read")
        self.read_of: tuple[BlockRV, int] | None = None  # a "read" stage: (reader, operand)
        self.rfactor: "RFactor | None" = None  # rfactor: the partial-reduction stage made of us
        self.frozen: str | None = None  # why this block's loops take no more primitives
        self.tensorized: Tensorized | None = None  # its inner tile is an intrinsic's call
        self.removed: str | None = None  # compute_inline: the block no longer exists
        self.producers: list[BlockRV | None] = []  # per operand
        self.consumers: list[tuple[BlockRV, int]] = []
        self.returned = False
        self.uid = next(_uids)
        self.reset_loops()

    def reset_loops(self, reason: str | None = None) -> None:
        for loop in self.loops:
            if loop.consumed is None and reason is not None:
                loop.consumed = reason
        self.loops = [LoopRV(self, [Part(d, 1, dim.extent)], dim.name) for d, dim in enumerate(self.dims)]

    @property
    def is_reduction(self) -> bool:
        return any(d.reduction for d in self.dims)

    @property
    def output_map(self) -> list[IndexResult]:
        return self.maps[-1]

    @property
    def pristine(self) -> bool:
        """No primitive has changed this block's loops yet."""
        return all(
            len(loop.parts) == 1 and loop.parts[0].stride == 1 and loop.kind == SERIAL
            and not loop.attached and loop.parts[0].dim == d
            for d, loop in enumerate(self.loops)
        ) and len(self.loops) == len(self.dims)

    def __repr__(self) -> str:
        return f"BlockRV({self.name!r})"


def check_loop(loop: object, what: str) -> LoopRV:
    if not isinstance(loop, LoopRV):
        raise ScheduleError(f"{what}: expected a loop from get_loops/split/fuse, got {loop!r}")
    if loop.consumed:
        raise ScheduleError(
            f"{what}: loop {loop.name!r} no longer exists: it was consumed by {loop.consumed}"
        )
    if loop.block.removed:
        raise ScheduleError(f"{what}: block {loop.block.name!r} was {loop.block.removed}")
    if loop.block.frozen:
        raise ScheduleError(f"{what}: the loops of block {loop.block.name!r} take no more primitives: "
                            f"{loop.block.frozen}")
    if loop not in loop.block.loops:
        raise ScheduleError(f"{what}: loop {loop.name!r} is not a loop of {loop.block.name!r}")
    return loop


def check_block(block: object, what: str) -> BlockRV:
    if not isinstance(block, BlockRV):
        raise ScheduleError(f"{what}: expected a block from get_block, got {block!r}")
    if block.removed:
        raise ScheduleError(f"{what}: block {block.name!r} was {block.removed}")
    return block


def tile_extents(block: BlockRV, upto: LoopRV | None) -> list[int]:
    """Per dim, the extent one iteration of ``upto`` covers (the whole dim for the root)."""
    extents = [dim.extent for dim in block.dims]
    if upto is None:
        return extents
    for loop in block.loops:
        for part in loop.parts:
            extents[part.dim] = part.stride
        if loop is upto:
            return extents
    raise ScheduleError(f"loop {upto.name!r} is not a loop of {block.name!r}")


def operand_extents(results: list[IndexResult], extents: list[int], what: str) -> list[int]:
    """Extents of the slice of an operand read by one tile with ``extents`` per dim."""
    sizes = []
    for result in results:
        if result.kind == "dim":
            sizes.append(extents[result.value])
        elif result.kind == "const":
            sizes.append(1)
        elif result.coefficients is not None and all(c >= 0 for c in result.coefficients):
            sizes.append(1 + sum(c * (extents[d] - 1) for d, c in zip(result.dims, result.coefficients)))
        else:
            raise ScheduleError(
                f"{what}: the operand is indexed by {result.text}; tilecraft cannot compute the "
                "region one tile reads"
            )
    return sizes


def producer_region(producer: BlockRV, slice_sizes: list[int], what: str) -> list[int]:
    """Per dim of ``producer``, the extent needed to produce an output slice of ``slice_sizes``."""
    extents = [dim.extent for dim in producer.dims]
    for position, result in enumerate(producer.output_map):
        if result.kind != "dim":
            raise ScheduleError(
                f"{what}: {producer.name!r} writes its output through {result.text or result.kind}; "
                "only outputs indexed by loop dims can be computed per tile"
            )
        extents[result.value] = slice_sizes[position]
    return extents


def chain_check(block: BlockRV, order: list[LoopRV], what: str) -> None:
    """Loops of one dim must nest in split order (outer part before inner part)."""
    last_stride: dict[int, tuple[int, LoopRV]] = {}
    for loop in order:
        for part in loop.parts:
            previous = last_stride.get(part.dim)
            if previous is not None and previous[0] < part.stride:
                raise ScheduleError(
                    f"{what}: loop {loop.name!r} steps over {block.dims[part.dim].name!r} by "
                    f"{part.stride}, so it must stay outside {previous[1].name!r} (stride "
                    f"{previous[0]}): tiling creates the loops of one dim outside-in (each tile loop "
                    "walks contiguous blocks), so TVM's strided order is not generated; reorder the "
                    "split loops across dims instead, e.g. (i_0, j_0, i_1, j_1)"
                )
            last_stride[part.dim] = (part.stride, loop)


@dataclass
class State:
    """All blocks of the scheduled function, in payload order, plus derived ones."""

    blocks: list[BlockRV] = field(default_factory=list)

    def block(self, name: str) -> BlockRV:
        for block in self.blocks:
            if block.name == name and not block.removed:
                return block
        names = [b.name for b in self.blocks if not b.removed]
        matching = [b for b in self.blocks if b.op is not None and b.op.op_name in (name, f"linalg.{name}")
                    and not b.removed and b.kind in ("op", "init", "copy")]
        if len(matching) == 1:
            return matching[0]
        if len(matching) > 1:
            raise ScheduleError(
                f"several blocks are {name!r} ops: {[b.name for b in matching]}; use one of these names"
            )
        raise ScheduleError(f"no block named {name!r}; blocks: {names}")
