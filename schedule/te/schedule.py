"""``Schedule``: TVM's schedule primitives over an MLIR function, as transform-dialect scripts.

    sch = Schedule(module)                      # or a compute Tensor, MLIR text, a func op
    C = sch.get_block("C")
    i, j, k = sch.get_loops(C)
    io, ii = sch.split(i, factor=32)
    sch.vectorize(...); sch.trace(); sch.show()

Every primitive checks its arguments first and raises :class:`ScheduleError` on an illegal
step (nothing changes then). A legal step is recorded, the whole transform script is
re-rendered from the schedule (``render.py``) and applied to a copy of the original function
with MLIR's transform interpreter, so :meth:`Schedule.show` prints the loops after each step
and :meth:`Schedule.trace` the script that makes them. Handles (``BlockRV``/``LoopRV``)
stay valid until a primitive consumes them (``split``/``fuse`` consume their loops;
``compute_at`` and friends rebuild the moved block's loops); a consumed handle raises an
error naming the step that consumed it.

Why one module past 700 lines: it is one class, whose methods are TVM's primitives over one
recorded state (``state.py``); each primitive is a check, a record and a re-render, and
spreading them over mixins would hide the state they all rewrite.
"""

from __future__ import annotations

import copy
import inspect
import io
from pathlib import Path
from typing import Any, Callable, Sequence

from mlir import ir

from ...pipelines.dim_relations import argument_symbols
from .errors import ScheduleError
from .expr import IndexBinary, IndexConst, IterVar
from .interpret import apply_script
from .intrinsics import TensorIntrin, lookup_intrinsic
from .payload import (
    IndexResult,
    OpInfo,
    analyze_function,
    argument_names,
    find_function,
    load_payload,
    name_dynamic_dims,
)
from .render import gathers, render
from .state import (
    PARALLEL,
    SERIAL,
    UNROLLED,
    VECTORIZED,
    Attach,
    BlockRV,
    Dim,
    Layout,
    LoopRV,
    Part,
    RFactor,
    State,
    Tensorized,
    chain_check,
    check_block,
    check_loop,
    operand_extents,
    producer_region,
    tile_extents,
)
from .symbolic import ceildiv, is_symbolic

MAX_UNROLL = 1024
GPU_AXES = tuple(f"{kind}.{axis}" for kind in ("blockIdx", "threadIdx") for axis in "xyz")


# --- building the initial state ---------------------------------------------------------


def _blocks_from_ops(infos: list[OpInfo]) -> list[BlockRV]:
    blocks: list[BlockRV] = []
    for info in infos:
        dims = [Dim(name, extent, not parallel)
                for name, extent, parallel in zip(info.dim_names, info.ranges, info.parallel)]
        block = BlockRV(info.tag, "op", dims, info.maps, info.n_inputs, info.element_types, info)
        block.returned = info.returned
        blocks.append(block)
    for info, block in zip(infos, blocks):
        block.producers = [blocks[p] if p is not None else None for p in info.producers]
        block.consumers = [(blocks[c], x) for c, x in info.consumers]
    for block in blocks:
        if block.op.is_fill and len(block.consumers) == 1 and not block.returned:
            owner, operand = block.consumers[0]
            if operand >= owner.n_inputs and owner.is_reduction:
                block.kind = "init"
                block.init_of = owner
                owner.init_block = block
    return blocks


def _symbol_sources(function: ir.Operation, names: list[str]) -> list[str]:
    """``n = A.shape[0]`` per symbol of the arguments (``tilecraft.symbols``), first source."""
    seen: dict[str, str] = {}
    for name, symbols in zip(names, argument_symbols(function)):
        for axis, symbol in enumerate(symbols):
            if isinstance(symbol, str) and symbol:
                seen.setdefault(symbol, f"{name}.shape[{axis}]")
    return [f"{symbol} = {source}" for symbol, source in seen.items()]


def _uses_outside(block: BlockRV, consumer: BlockRV) -> list[str]:
    """Who else reads ``block``'s result besides ``consumer``."""
    others = [c.name for c, _ in block.consumers if c is not consumer]
    if block.returned:
        others.append("the function's return")
    return others


# --- validation helpers -----------------------------------------------------------------


def _traced(block: BlockRV, what: str) -> None:
    """Refuse dims whose dynamic extent no argument dim sizes (no symbol to name it by)."""
    dynamic = [d.name for d in block.dims if not is_symbolic(d.extent) and d.extent < 0]
    if dynamic:
        raise ScheduleError(
            f"{what}: block {block.name!r} has dynamic extents ({', '.join(dynamic)}) that no "
            "argument's dimension sizes; the schedule API needs static extents or extents of the "
            "function's arguments (te.var)"
        )


def _static(block: BlockRV, what: str) -> None:
    """Refuse symbolic extents: for primitives whose regions or tiles need constant sizes."""
    _traced(block, what)
    symbolic = [f"{d.name} ({d.extent!r})" for d in block.dims if is_symbolic(d.extent)]
    if symbolic:
        raise ScheduleError(
            f"{what}: block {block.name!r} has symbolic extents {', '.join(symbolic)}; dynamic shapes "
            f"are not supported for {what} (split, tile, reorder, fuse, parallel and vectorize are)"
        )


def _not_tensorized(block: BlockRV, what: str) -> None:
    if block.tensorized is not None:
        t = block.tensorized
        raise ScheduleError(
            f"{what}: the tile of block {block.name!r} from loop {t.loop.name!r} inward is tensorized "
            f"(intrinsic {t.intrinsic!r}); call {what} before tensorize")


def _attach_index(block: BlockRV, skip: BlockRV | None = None) -> tuple[int, BlockRV | None]:
    index, who = -1, None
    for i, loop in enumerate(block.loops):
        attached = [b for b in loop.attached if b is not skip]
        if attached:
            index, who = i, attached[-1]
    return index, who


def _not_frozen(loops: Sequence[LoopRV], what: str, allow: BlockRV | None = None) -> None:
    """Refuse a step on ``loops`` at or outside a loop where a block (other than ``allow``)
    is computed: the script fuses that block into those loops as they were."""
    for loop in loops:
        block = loop.block
        index, who = _attach_index(block, skip=allow)
        if block.loops.index(loop) <= index:
            raise ScheduleError(
                f"{what}: loop {loop.name!r} is at or outside loop {block.loops[index].name!r}, where "
                f"block {who.name!r} is computed ({who.attach.mode}); the loops there are fixed — "
                f"transform them before that step"
            )


def _resolve_factors(extent: int, factor: int | None, nparts: int | None,
                     factors: Sequence[int | None] | None, pad: bool, name: str) -> list[int]:
    given = [x is not None for x in (factor, nparts, factors)]
    if sum(given) != 1:
        raise ScheduleError("split: give exactly one of factor=, nparts= or factors=")
    if factor is not None:
        factors = [None, factor]
    elif nparts is not None:
        factors = [nparts, None]
    factors = list(factors)
    if len(factors) < 2:
        raise ScheduleError(f"split: factors={factors} must have at least two entries")
    if sum(1 for f in factors if f is None) > 1:
        raise ScheduleError(f"split: at most one factor may be None, got {factors}")
    for f in factors:
        if f is not None and (not isinstance(f, int) or isinstance(f, bool) or f < 1):
            raise ScheduleError(f"split: factors must be positive integers or None, got {factors}")
    known = 1
    for f in factors:
        if f is not None:
            known *= f
    if is_symbolic(extent):
        # A symbolic extent is split like pad=True: the outer loop runs ceildiv(n, known) times
        # and its last tile is partial (clamped bounds, masked vectors).
        if nparts is not None:
            raise ScheduleError(
                f"split: nparts= on loop {name!r} of symbolic extent {extent!r}: the inner extent "
                f"would be ceildiv({extent!r}, {nparts}), not a constant; split with factor= instead")
        if factors[0] is not None and None in factors:
            raise ScheduleError(
                f"split: loop {name!r} has the symbolic extent {extent!r}; only the outermost factor "
                f"may be None (it becomes ceildiv({extent!r}, ...)), got {factors}")
        if None not in factors:
            raise ScheduleError(
                f"split: the constant factors {factors} cannot cover the symbolic extent {extent!r} of "
                f"loop {name!r}; make the outermost factor None")
        factors[0] = ceildiv(extent, known)
        return factors
    if None in factors:
        missing = -(-extent // known)
        if missing * known != extent and not pad:
            raise ScheduleError(
                f"split: the factors {factors} do not divide the extent {extent} of loop {name!r}; "
                "choose a divisor, or pass pad=True to allow a partial last tile"
            )
        factors[factors.index(None)] = missing
        known *= missing
    if known != extent:
        if known < extent:
            raise ScheduleError(
                f"split: the factors {factors} of loop {name!r} cover {known} iterations, fewer than "
                f"its extent {extent}"
            )
        if not pad:
            raise ScheduleError(
                f"split: the factors {factors} cover {known} iterations but loop {name!r} has "
                f"{extent}; pass pad=True to allow a partial last tile"
            )
    return factors


def _find_operand(block: BlockRV, producer: BlockRV) -> int | None:
    for x, p in enumerate(block.producers):
        if p is producer and x < block.n_inputs:
            return x
    return None


# --- the primitives as state transitions ------------------------------------------------


def _split(state: State, loop: LoopRV, factors: list[int], pad: bool, step: str) -> list[LoopRV]:
    block = loop.block
    part = loop.parts[0]
    partial = part.partial or is_symbolic(part.extent) or (pad and _product(factors) != part.extent)
    new_loops = []
    for j, f in enumerate(factors):
        stride = part.stride * _product(factors[j + 1:])
        new_loops.append(LoopRV(block, [Part(part.dim, stride, f, partial)], f"{loop.name}_{j}"))
    index = block.loops.index(loop)
    block.loops[index:index + 1] = new_loops
    loop.consumed = f"{step} (it became {', '.join(l.name for l in new_loops)})"
    return new_loops


def _split_fused_parts(loop: LoopRV, factors: list[int]) -> tuple[list[Part], list[Part]]:
    """The parts of ``outer, inner = split(fused, ...)``: ``inner`` takes the innermost parts
    whose extents multiply to the inner factor, cutting one part in two where needed (TVM's
    split of a fused loop, e.g. to vectorize it). The inner factor must be a product of the
    innermost extents times a divisor of the next one."""
    if len(factors) != 2:
        raise ScheduleError(f"split: loop {loop.name!r} is fused; split it in two (factor= or nparts=)")
    if any(p.partial or is_symbolic(p.extent) for p in loop.parts):
        raise ScheduleError(f"split: the fused loop {loop.name!r} has a partial or symbolic part; split "
                            "its loops before fusing")
    inner_factor = factors[1]
    if _product(factors) != loop.extent:
        raise ScheduleError(f"split: the factors {factors} do not divide the fused loop {loop.name!r} "
                            f"of extent {loop.extent}; a fused loop cannot be padded")
    suffix = 1
    for k in range(len(loop.parts) - 1, -1, -1):
        part = loop.parts[k]
        if inner_factor % suffix == 0 and part.extent % (inner_factor // suffix) == 0:
            cut = inner_factor // suffix
            outer = list(loop.parts[:k])
            inner = list(loop.parts[k + 1:])
            if cut > 1:
                inner.insert(0, Part(part.dim, part.stride, cut))
            if part.extent // cut > 1 or not outer:
                outer.append(Part(part.dim, part.stride * cut, part.extent // cut))
            if inner and outer:
                return outer, inner
        suffix *= part.extent
    extents = [p.extent for p in loop.parts]
    raise ScheduleError(f"split: the inner factor {inner_factor} does not follow the fused extents "
                        f"{extents} of {loop.name!r} (it must be a product of the innermost ones "
                        "times a divisor of the next)")


def _split_fused(state: State, loop: LoopRV, parts: tuple[list[Part], list[Part]], step: str) -> list[LoopRV]:
    block = loop.block
    new_loops = [LoopRV(block, list(p), f"{loop.name}_{j}") for j, p in enumerate(parts)]
    index = block.loops.index(loop)
    block.loops[index:index + 1] = new_loops
    loop.consumed = f"{step} (it became {', '.join(l.name for l in new_loops)})"
    return new_loops


def _product(values: Sequence[int]) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def _reorder(state: State, loops: list[LoopRV], what: str) -> None:
    block = loops[0].block
    positions = sorted(block.loops.index(l) for l in loops)
    order = list(block.loops)
    for position, loop in zip(positions, loops):
        order[position] = loop
    chain_check(block, order, what)
    vectorized = [l for l in order if l.kind == VECTORIZED]
    if vectorized and order[-1] is not vectorized[0]:
        raise ScheduleError(
            f"{what}: the vectorized loop {vectorized[0].name!r} must stay innermost"
        )
    block.loops = order


def _fuse(state: State, loops: list[LoopRV], step: str) -> LoopRV:
    block = loops[0].block
    parts: list[Part] = []
    for loop in loops:
        for part in loop.parts:
            if parts and parts[-1].dim == part.dim and parts[-1].stride == part.stride * part.extent:
                parts[-1] = Part(part.dim, part.stride, parts[-1].extent * part.extent,
                                 parts[-1].partial or part.partial)
            else:
                parts.append(Part(part.dim, part.stride, part.extent, part.partial))
    dims = [p.dim for p in parts]
    if len(set(dims)) != len(dims):
        raise ScheduleError(
            f"{step}: the fused loops step over {block.dims[dims[0]].name!r} twice, not contiguously; "
            "a tiled op cannot walk one dim in two places of one loop"
        )
    partial_inner = [p for p in parts[1:] if p.partial and p.stride == 1]
    if partial_inner:
        raise ScheduleError(f"{step}: {block.dims[partial_inner[0].dim].name!r}'s partial last tile (pad=True "
                            "or a symbolic extent) would sit inside the fused loop; fuse the outer tile loops "
                            "(TVM's fuse after tile) and keep the partial tiles inner")
    fused = LoopRV(block, parts, "_".join(l.name for l in loops) + "_fused")
    index = block.loops.index(loops[0])
    block.loops[index:index + len(loops)] = [fused]
    for loop in loops:
        loop.consumed = f"{step} (it became {fused.name})"
    return fused


def _annotate(state: State, loop: LoopRV, kind: str) -> None:
    loop.kind = kind


def _attach(state: State, block: BlockRV, loop: LoopRV | None, host: BlockRV, mode: str,
            extents: list[int], step: str) -> None:
    root_extents = [dim.extent for dim in block.dims]
    for dim, extent in zip(block.dims, extents):
        dim.extent = extent
    block.reset_loops(f"{step} (it rebuilt the loops of {block.name!r}; call get_loops again)")
    if loop is not None and any(p.partial for l in host.loops[: host.loops.index(loop) + 1] for p in l.parts):
        for new_loop in block.loops:  # the region of a partial tile is partial too
            for part in new_loop.parts:
                part.partial = True
    block.attach = Attach(mode, host, loop, root_extents)
    if loop is not None:
        loop.attached.append(block)


def _compute_root(state: State, block: BlockRV, step: str) -> None:
    attach = block.attach
    for dim, extent in zip(block.dims, attach.root_extents):
        dim.extent = extent
    block.reset_loops(f"{step} (it rebuilt the loops of {block.name!r}; call get_loops again)")
    if attach.loop is not None:
        attach.loop.attached.remove(block)
    if attach.mode == "reverse":
        attach.host.reverse = None
    block.attach = None


def _compute_at(state: State, block: BlockRV, loop: LoopRV, step: str) -> None:
    host = loop.block
    tile = tile_extents(host, loop)
    if block.kind == "cache":
        extents = producer_region(block, tile, step)
        _attach(state, block, loop, host, "cache", extents, step)
        return
    x = _find_operand(host, block)
    sizes = operand_extents(host.maps[x], tile, step)
    _attach(state, block, loop, host, "compute_at", producer_region(block, sizes, step), step)


def _reverse_compute_at(state: State, block: BlockRV, loop: LoopRV, step: str) -> None:
    host = loop.block
    x = _find_operand(block, host)
    tile = tile_extents(host, loop)
    extents = [dim.extent for dim in block.dims]
    for position, result in enumerate(host.output_map):
        extents[block.maps[x][position].value] = tile[result.value]
    _attach(state, block, loop, host, "reverse", extents, step)
    host.reverse = (block, loop)


def _compute_inline(state: State, block: BlockRV, step: str) -> None:
    consumers = [c for c, _ in block.consumers]
    for consumer in consumers:
        consumer.inlined.append(block)
    block.inlined_into = consumers
    block.removed = f"inlined into {', '.join(c.name for c in consumers)} by {step}"
    for loop in block.loops:
        loop.consumed = f"{step} (block {block.name!r} was inlined)"


def _cache_write(state: State, block: BlockRV, scope: str, step: str) -> BlockRV:
    cache = BlockRV(f"{block.name}.{scope}", "cache", [Dim(d.name, d.extent, d.reduction) for d in block.dims],
                    block.maps, block.n_inputs, block.element_types, block.op)
    cache.producers = list(block.producers)
    cache.consumers = [(block, 0)]
    cache.cache_of = block
    out_type = block.element_types[-1]
    output_dims = [block.dims[r.value] for r in block.output_map]
    block.kind = "copy"
    block.dims = [Dim(d.name, d.extent, False) for d in output_dims]
    identity = [IndexResult("dim", d) for d in range(len(block.dims))]
    block.maps = [identity, identity]
    block.n_inputs = 1
    block.element_types = [out_type, out_type]
    block.producers = [cache, None]
    block.cache = cache
    block.reset_loops(f"{step} (it made {block.name!r} the copy-out stage; call get_loops again)")
    state.blocks.insert(state.blocks.index(block), cache)
    return cache


def _cache_read(state: State, reader: BlockRV, operand: int, name: str, step: str) -> BlockRV:
    results = reader.maps[operand]
    extents = operand_extents(results, [d.extent for d in reader.dims], step)
    dims = [Dim(f"{name}_ax{p}", extent, False) for p, extent in enumerate(extents)]
    identity = [IndexResult("dim", d) for d in range(len(dims))]
    element_type = reader.element_types[operand]
    read = BlockRV(name, "read", dims, [identity, identity], 1, [element_type, element_type], None)
    read.producers = [reader.producers[operand], None]
    read.consumers = [(reader, operand)]
    read.read_of = (reader, operand)
    read.frozen = ("it is a linalg.copy made from transform.structured.pad, whose loops tilecraft does "
                   "not track; place it with compute_at(cache, loop of the reader)")
    reader.reads.append(read)
    state.blocks.insert(state.blocks.index(reader), read)
    return read


def _compute_at_read(state: State, block: BlockRV, loop: LoopRV, step: str) -> None:
    reader, operand = block.read_of
    extents = operand_extents(reader.maps[operand], tile_extents(reader, loop), step)
    _attach(state, block, loop, reader, "read", extents, step)


def _rfactor(state: State, block: BlockRV, loop: LoopRV, step: str) -> BlockRV:
    outer, inner = block.loops[-2], block.loops[-1]
    parallel = loop is outer
    dim = loop.parts[0].dim
    factor = loop.extent
    out_dims = [block.dims[r.value] for r in block.output_map]
    dims = [Dim(d.name, d.extent, False) for d in out_dims]
    dims.append(Dim(f"{block.dims[dim].name}_{'o' if parallel else 'i'}", factor, False))
    identity = [IndexResult("dim", d) for d in range(len(dims))]
    rf = BlockRV(f"{block.name}.rf", "rf", dims, [identity, identity], 1,
                 [block.element_types[-1]] * 2, None)
    rf.consumers = [(block, 0)]
    rf.producers = list(block.producers)
    rf.frozen = (f"it is the partial reduction transform.structured.tile_reduction_using_"
                 f"{'forall' if parallel else 'for'} made whole; schedule the loops of "
                 f"{block.name!r} outside the split reduction before rfactor")
    block.rfactor = RFactor(dim, outer, inner, parallel, rf)
    block.frozen = (f"{step} split it into {rf.name!r} (partial sums over "
                    f"{'parallel ' if parallel else ''}loop {loop.name!r}) and the final reduction")
    state.blocks.insert(state.blocks.index(block), rf)
    return rf


def _decompose_reduction(state: State, block: BlockRV, loop: LoopRV, step: str) -> BlockRV:
    init = block.init_block
    index = block.loops.index(loop)
    if index == 0:
        return init  # the init already runs before the whole nest
    parent = block.loops[index - 1]
    tile = tile_extents(block, parent)
    extents = [tile[r.value] for r in block.output_map]
    _attach(state, init, parent, block, "init", extents, step)
    return init


def _tensorize(state: State, block: BlockRV, loop: LoopRV, intrinsic: str, extern: str, step: str) -> None:
    index = block.loops.index(loop)
    inner = block.loops[index:]
    for consumed in inner:
        consumed.consumed = f"{step} (its iterations are the intrinsic {intrinsic!r})"
    block.loops = block.loops[:index]
    block.tensorized = Tensorized(loop, inner, intrinsic, extern)


def _indices(results: list[IndexResult], names: list[str]) -> str:
    return "[" + ", ".join(names[r.value] if r.kind == "dim" else (r.text or str(r.value))
                           for r in results) + "]"


def _ops_of(body: tuple[str, ...]) -> str:
    return ", ".join(entry.split("(", 1)[0] for entry in body if not entry.startswith("linalg.yield"))


def _match_intrinsic(block: BlockRV, intrinsic: TensorIntrin, tile: list[int], where: str) -> None:
    """Raise unless ``block``'s tile of extents ``tile`` computes what ``intrinsic`` does."""
    definition = intrinsic.op
    names, theirs = [d.name for d in block.dims], definition.dim_names
    what = f"tensorize: block {block.name!r} does not compute what intrinsic {intrinsic.name!r} does"
    if len(block.dims) != len(definition.ranges):
        raise ScheduleError(f"{what}: it has {len(block.dims)} loop dims {names}, the intrinsic "
                            f"{len(definition.ranges)} {theirs}")
    for d, dim in enumerate(block.dims):
        if dim.reduction == definition.parallel[d]:
            kind = "a reduction" if dim.reduction else "a parallel"
            other = "parallel" if definition.parallel[d] else "a reduction"
            raise ScheduleError(f"{what}: dim {dim.name!r} is {kind} dim, the intrinsic's dim "
                                f"{theirs[d]!r} is {other}")
    if block.n_inputs != definition.n_inputs:
        raise ScheduleError(f"{what}: it reads {block.n_inputs} inputs, the intrinsic {definition.n_inputs}")
    for x, (mine, other) in enumerate(zip(block.maps, definition.maps)):
        if mine != other:
            role = "the output" if x >= block.n_inputs else f"input {x}"
            raise ScheduleError(
                f"{what}: {role} is indexed {_indices(mine, names)} by the block but "
                f"{_indices(other, theirs)} by the intrinsic (a transposed or differently indexed operand)")
    if list(block.element_types) != list(definition.element_types):
        raise ScheduleError(
            f"tensorize: block {block.name!r} has element types ({', '.join(block.element_types)}) but "
            f"intrinsic {intrinsic.name!r} takes ({', '.join(definition.element_types)})")
    if block.op.body != definition.body:
        raise ScheduleError(f"{what}: the block's body computes {_ops_of(block.op.body)}, the "
                            f"intrinsic's {_ops_of(definition.body)}")
    if list(tile) != list(definition.ranges):
        mine = ", ".join(f"{n}={e}" for n, e in zip(names, tile))
        other = ", ".join(f"{n}={e}" for n, e in zip(theirs, definition.ranges))
        raise ScheduleError(
            f"tensorize: the tile of {block.name!r} {where} is {tile} ({mine}), but intrinsic "
            f"{intrinsic.name!r} computes {list(definition.ranges)} ({other}); split the loops so that "
            "the loops from the tensorized one inward cover exactly the intrinsic's shape")


def _transform_layout(state: State, block: BlockRV, operand: int, outer: list[int], inner_dims: list[int],
                      packed_sizes: list[int], name: str, step: str) -> BlockRV:
    old_dims = block.dims
    packed = [d for d, size in enumerate(packed_sizes) if size]
    new_index = {d: d for d in range(len(old_dims))}
    inner_index = {d: len(old_dims) + i for i, d in enumerate(packed)}
    dims = [Dim(f"{dim.name}o", dim.extent // packed_sizes[d], dim.reduction) if packed_sizes[d] else
            Dim(dim.name, dim.extent, dim.reduction) for d, dim in enumerate(old_dims)]
    dims += [Dim(f"{old_dims[d].name}i", packed_sizes[d], old_dims[d].reduction) for d in packed]

    def packed_map(results: list[IndexResult]) -> list[IndexResult]:
        mapped = [IndexResult("dim", new_index[r.value]) if r.kind == "dim" else r for r in results]
        used = [r.value for r in results if r.kind == "dim"]
        return mapped + [IndexResult("dim", inner_index[d]) for d in packed if d in used]

    maps = [packed_map(m) for m in block.maps]
    # The transposed operand: outer dims in the requested order, then the requested inner order.
    operand_outer = [IndexResult("dim", new_index[block.maps[operand][r].value]) for r in outer]
    operand_inner = [IndexResult("dim", inner_index[d]) for d in inner_dims]
    maps[operand] = operand_outer + operand_inner
    layout_dims = [dims[r.value] for r in maps[operand]]

    source_type = block.element_types[operand]
    pack_block = BlockRV(name, "pack", [Dim(d.name, d.extent, False) for d in layout_dims],
                         [[IndexResult("expr")] * len(layout_dims),
                          [IndexResult("dim", d) for d in range(len(layout_dims))]],
                         1, [source_type, source_type], None)
    pack_block.producers = [block.producers[operand], None]
    pack_block.consumers = [(block, operand)]
    pack_block.derived_from = block
    old_output = block.output_map
    unpack_block = None
    if any(r.kind == "dim" and packed_sizes[r.value] for r in old_output):
        out_type = block.element_types[-1]
        unpack_dims = [Dim(old_dims[r.value].name, old_dims[r.value].extent, False) for r in old_output]
        identity = [IndexResult("dim", d) for d in range(len(unpack_dims))]
        unpack_block = BlockRV(f"{block.name}.unpack", "unpack", unpack_dims, [identity, identity], 1,
                               [out_type, out_type], None)
        unpack_block.producers = [block, None]
        unpack_block.consumers = list(block.consumers)
        unpack_block.returned = block.returned
        unpack_block.derived_from = block
        for consumer, x in block.consumers:
            consumer.producers[x] = unpack_block
        block.consumers = [(unpack_block, 0)]
        block.returned = False
    other_inputs = [x for x in range(block.n_inputs) if x != operand and any(
        r.kind == "dim" and packed_sizes[r.value] for r in block.maps[x])]
    natural_inner = [d for d in packed if any(r.kind == "dim" and r.value == d for r in block.maps[operand])]
    outer_perm = outer if outer != sorted(outer) else []
    inner_perm = [natural_inner.index(d) for d in inner_dims]
    inner_perm = inner_perm if inner_perm != sorted(inner_perm) else []
    block.layout = Layout(operand, packed_sizes, outer_perm, inner_perm, pack_block, unpack_block, other_inputs)
    block.dims = dims
    block.maps = maps
    block.producers[operand] = pack_block
    block.reset_loops(f"{step} (it rebuilt the loops of {block.name!r} over the packed iteration space; "
                      "call get_loops again)")
    position = state.blocks.index(block)
    state.blocks.insert(position, pack_block)
    if unpack_block is not None:
        state.blocks.insert(position + 2, unpack_block)
    return pack_block


# --- the public object ------------------------------------------------------------------


class Schedule:
    """A schedule over one function: TVM's ``tir.Schedule`` workflow on MLIR.

    Args:
      func_or_module: a compute :class:`~tilecraft.schedule.te.Tensor` (or a list, as
        :func:`~tilecraft.schedule.te.create_func` takes), MLIR text or bytecode, an
        ``mlir.ir.Module``, a ``func.func`` operation, a path to a ``.mlir``/``.onnx`` file.
        The source is copied; it is never modified.
      func_name: the function to schedule when the module has several.
    """

    def __init__(self, func_or_module: Any, *, func_name: str | None = None) -> None:
        self._context = ir.Context()
        module, name = load_payload(func_or_module, self._context, func_name)
        self.func_name = name
        function = find_function(module, name)
        for op in function.regions[0].blocks[0].operations:
            for result in op.operation.results:
                if isinstance(result.type, ir.MemRefType):
                    raise ScheduleError("Schedule works on linalg on tensors; this function uses memrefs")
        self._argument_names = argument_names(function)
        name_dynamic_dims(module, function, self._argument_names)
        self._symbols = _symbol_sources(function, self._argument_names)
        infos = analyze_function(module, function)
        self._payload = module
        self._state = State(_blocks_from_ops(infos))
        self._history: list[str] = []
        self._names: dict[int, str] = {}
        self._counter = 0
        self._script = ""
        self._container: ir.Module | None = None
        self._current: ir.Operation | None = None
        self._commit("", lambda state: None)

    # -- bookkeeping -------------------------------------------------------------------------

    def _name(self, rv: object) -> str:
        if isinstance(rv, (BlockRV, LoopRV)):
            if rv.uid not in self._names:
                self._names[rv.uid] = f"{'b' if isinstance(rv, BlockRV) else 'l'}{self._counter}"
                self._counter += 1
            return self._names[rv.uid]
        if isinstance(rv, (list, tuple)):
            return "[" + ", ".join(self._name(x) for x in rv) + "]"
        return repr(rv)

    def _record(self, call: str, result: object = None) -> None:
        if result is None:
            self._history.append(call)
        elif isinstance(result, (list, tuple)):
            targets = ", ".join(self._name(r) for r in result)
            self._history.append(f"{targets} = {call}" if targets else call)
        else:
            self._history.append(f"{self._name(result)} = {call}")

    def _header(self, extra: list[str] = ()) -> list[str]:
        symbols = ([f"symbolic extents: {', '.join(self._symbols)} (checked at every call)"]
                   if self._symbols else [])
        return [f"tilecraft schedule of @{self.func_name}", *symbols, *self._history, *extra]

    def _commit(self, call: str, mutate: Callable[..., Any], *args: Any) -> Any:
        """Check ``mutate`` on a copy of the state, render and apply; then do it for real."""
        memo: dict[int, Any] = {}
        trial = copy.deepcopy(self._state, memo)
        trial_args = copy.deepcopy(args, memo)
        mutate(trial, *trial_args)
        script = render(trial, self._header([call] if call else []))
        container, current = apply_script(self._payload, script, call or "Schedule")
        result = mutate(self._state, *args)
        self._container, self._current = container, current
        self._script = script
        return result

    def _step(self, call_text: str, mutate: Callable[..., Any], *args: Any) -> Any:
        result = self._commit(call_text, mutate, *args)
        self._record(call_text, result)
        self._script = render(self._state, self._header())
        return result

    # -- inspection ----------------------------------------------------------------------------

    def get_block(self, name: str) -> BlockRV:
        """The block named ``name`` (its ``tilecraft.block`` tag, e.g. the compute's name), or
        the only block of an op kind (``"matmul"``, ``"linalg.matmul"``)."""
        block = self._state.block(name)
        self._record(f'sch.get_block("{name}")', block)
        return block

    def get_blocks(self) -> list[BlockRV]:
        return [b for b in self._state.blocks if not b.removed]

    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        """The loops of ``block``, outermost first (only its own: for a block computed at
        another block's loop, the loops inside that loop)."""
        block = check_block(block, "get_loops")
        loops = list(block.loops)
        self._record(f"sch.get_loops({self._name(block)})", loops)
        return loops

    # -- loop primitives ---------------------------------------------------------------------

    def split(self, loop: LoopRV, factor: int | None = None, *, nparts: int | None = None,
              factors: Sequence[int | None] | None = None, pad: bool = False) -> list[LoopRV]:
        """Split ``loop`` into nested loops: ``factor=`` (inner extent), ``nparts=`` (outer
        extent) or ``factors=[...]`` (outer to inner, one may be None). Consumes ``loop``.

        A factor must divide the extent unless ``pad=True``: then the last iteration covers
        a partial tile (bounds clamped; a vectorized partial tile is masked). A loop of
        symbolic extent (``te.var``) is always split so: ``factor=16`` on ``n`` gives loops of
        ``ceildiv(n, 16)`` and 16 iterations; ``nparts=`` is refused there."""
        loop = check_loop(loop, "split")
        _not_frozen([loop], "split")
        _traced(loop.block, "split")
        if loop.kind != SERIAL:
            raise ScheduleError(f"split: loop {loop.name!r} is {loop.kind}; split before annotating it")
        resolved = _resolve_factors(loop.extent, factor, nparts, factors, pad, loop.name)
        if len(loop.parts) != 1:
            parts = _split_fused_parts(loop, resolved)
            args = f"factor={factor}" if factor is not None else f"nparts={nparts}" if nparts is not None \
                else f"factors={list(factors)}"
            call = f"sch.split({self._name(loop)}, {args})"
            return self._step(call, _split_fused, loop, parts, call)
        args = (f"factor={factor}" if factor is not None else f"nparts={nparts}" if nparts is not None
                else f"factors={list(factors)}") + (", pad=True" if pad else "")
        call = f"sch.split({self._name(loop)}, {args})"
        return self._step(call, _split, loop, resolved, pad, call)

    def tile(self, x: LoopRV, y: LoopRV, x_factor: int, y_factor: int) -> list[LoopRV]:
        """TE's ``tile``: split ``x`` and ``y`` and order them ``xo, yo, xi, yi``."""
        x, y = check_loop(x, "tile"), check_loop(y, "tile")
        if x.block is not y.block:
            raise ScheduleError("tile: both loops must belong to the same block")
        block = x.block
        if block.loops.index(y) != block.loops.index(x) + 1:
            raise ScheduleError(f"tile: {y.name!r} must be the loop directly inside {x.name!r}")
        _not_frozen([x, y], "tile")
        _traced(block, "tile")
        for loop in (x, y):
            if len(loop.parts) != 1 or loop.kind != SERIAL:
                raise ScheduleError(f"tile: loop {loop.name!r} must be a plain (unfused, unannotated) loop")
        # TVM's tile guards a factor that does not divide the extent: a partial last tile
        fx = _resolve_factors(x.extent, x_factor, None, None, True, x.name)
        fy = _resolve_factors(y.extent, y_factor, None, None, True, y.name)
        call = f"sch.tile({self._name(x)}, {self._name(y)}, {x_factor}, {y_factor})"

        def mutate(state: State, x: LoopRV, y: LoopRV) -> list[LoopRV]:
            xo, xi = _split(state, x, fx, True, call)
            yo, yi = _split(state, y, fy, True, call)
            _reorder(state, [xo, yo, xi, yi], "tile")
            return [xo, yo, xi, yi]

        return self._step(call, mutate, x, y)

    def reorder(self, *loops: LoopRV) -> None:
        """Put ``loops`` (of one block) in this order, in the positions they occupy (TE semantics)."""
        if len(loops) == 1 and isinstance(loops[0], (list, tuple)):
            loops = tuple(loops[0])
        loops = [check_loop(l, "reorder") for l in loops]
        if len({l.block.uid for l in loops}) != 1:
            raise ScheduleError("reorder: all loops must belong to the same block")
        if len({l.uid for l in loops}) != len(loops):
            raise ScheduleError("reorder: a loop is listed twice")
        _not_frozen(loops, "reorder")
        call = f"sch.reorder({', '.join(self._name(l) for l in loops)})"
        # Validate before rendering: chain order and the vectorized loop.
        block = loops[0].block
        positions = sorted(block.loops.index(l) for l in loops)
        order = list(block.loops)
        for position, loop in zip(positions, loops):
            order[position] = loop
        chain_check(block, order, "reorder")
        _not_frozen([block.loops[p] for p in positions], "reorder")
        return self._step(call, lambda state, *ls: _reorder(state, list(ls), "reorder"), *loops)

    def fuse(self, *loops: LoopRV) -> LoopRV:
        """Fuse adjacent loops (outermost first) into one (``transform.loop.coalesce``; a
        parallel fused loop is one multi-dimensional ``scf.forall``). Consumes ``loops``."""
        if len(loops) == 1 and isinstance(loops[0], (list, tuple)):
            loops = tuple(loops[0])
        if len(loops) < 2:
            raise ScheduleError("fuse: give at least two loops")
        loops = [check_loop(l, "fuse") for l in loops]
        block = loops[0].block
        if any(l.block is not block for l in loops):
            raise ScheduleError("fuse: all loops must belong to the same block")
        indices = [block.loops.index(l) for l in loops]
        if indices != list(range(indices[0], indices[0] + len(loops))):
            raise ScheduleError(
                f"fuse: loops {[l.name for l in loops]} are not adjacent and outermost-first; "
                f"the loops of {block.name!r} are {[l.name for l in block.loops]}"
            )
        _not_frozen(loops, "fuse")
        for loop in loops:
            if loop.kind != SERIAL:
                raise ScheduleError(f"fuse: loop {loop.name!r} is {loop.kind}; fuse before annotating")
        call = f"sch.fuse({', '.join(self._name(l) for l in loops)})"
        trial = copy.deepcopy(loops)
        _fuse(State(), trial, call)  # validation only
        return self._step(call, lambda state, *ls: _fuse(state, list(ls), call), *loops)

    def parallel(self, loop: LoopRV) -> None:
        """Run ``loop``'s iterations on all cores (``transform.structured.tile_using_forall``)."""
        loop = check_loop(loop, "parallel")
        self._check_annotation(loop, "parallel")
        if loop.is_reduction:
            dims = [loop.block.dims[p.dim].name for p in loop.parts if loop.block.dims[p.dim].reduction]
            raise ScheduleError(
                f"parallel: loop {loop.name!r} iterates the reduction dim {dims[0]!r} of block "
                f"{loop.block.name!r}; its iterations accumulate into the same element, so running "
                "them in parallel would race"
            )
        nested = self._parallel_nesting(loop)
        if nested is not None:
            raise ScheduleError(
                f"parallel: loop {loop.name!r} and the parallel loop {nested.name!r} (of "
                f"{nested.block.name!r}) would nest one scf.forall in another; the CPU runtime (MLIR's "
                "async runtime) deadlocks on nested parallel loops — parallelize one level, or fuse "
                "adjacent loops and parallelize the fused loop")
        call = f"sch.parallel({self._name(loop)})"
        return self._step(call, _annotate, loop, PARALLEL)

    def _parallel_nesting(self, loop: LoopRV) -> LoopRV | None:
        """A parallel loop that would enclose ``loop``, or be enclosed by it, if any."""
        def enclosing(block: BlockRV) -> list[LoopRV]:
            loops: list[LoopRV] = []
            while block.attach is not None and block.attach.loop is not None:
                host, at = block.attach.host, block.attach.loop
                if at not in host.loops:
                    break
                loops += host.loops[: host.loops.index(at) + 1]
                block = host
            return loops

        own = [l for l in loop.block.loops if l is not loop] + enclosing(loop.block)
        for other in own:
            if other.kind == PARALLEL:
                return other
        inside = loop.block.loops[loop.block.loops.index(loop):]
        for block in self._state.blocks:
            if block is loop.block or block.removed:
                continue
            if any(l in inside for l in enclosing(block)):
                for other in block.loops:
                    if other.kind == PARALLEL:
                        return other
        return None

    def vectorize(self, loop: LoopRV) -> None:
        """Vectorize the innermost ``loop`` (``transform.structured.vectorize`` of the op tile)."""
        loop = check_loop(loop, "vectorize")
        _not_tensorized(loop.block, "vectorize")
        self._check_annotation(loop, "vectorize")
        block = loop.block
        if loop.is_reduction:
            dims = [block.dims[p.dim].name for p in loop.parts if block.dims[p.dim].reduction]
            raise ScheduleError(
                f"vectorize: loop {loop.name!r} carries a dependence: it iterates the reduction dim "
                f"{dims[0]!r} of block {block.name!r}, each iteration accumulating into the previous "
                "one's result; vectorize a spatial loop (split and reorder one innermost)"
            )
        if block.loops[-1] is not loop:
            inside = [l.name for l in block.loops[block.loops.index(loop) + 1:]]
            raise ScheduleError(
                f"vectorize: loop {loop.name!r} is not the innermost loop of {block.name!r} "
                f"(inside it: {', '.join(inside)}); reorder it innermost first"
            )
        if loop.attached:
            raise ScheduleError(f"vectorize: block {loop.attached[0].name!r} is computed at {loop.name!r}")
        if is_symbolic(loop.extent):
            raise ScheduleError(
                f"vectorize: loop {loop.name!r} has the symbolic extent {loop.extent!r}; a vector has a "
                f"constant length — split it with a constant factor and vectorize the inner loop "
                f"(the partial last tile is masked)")
        dims = [p.dim for p in loop.parts]
        if dims != sorted(dims) or any(p.stride != 1 for p in loop.parts[1:]):
            raise ScheduleError(f"vectorize: the fused loop {loop.name!r} does not walk its dims in order")
        if gathers(block):
            raise ScheduleError(
                f"vectorize: block {block.name!r} reads with tensor.extract (a guarded load such as "
                "padding, or a data-dependent index), which the vectorizer does not turn into vector "
                "loads; keep it scalar and parallelize it, or compute it at its consumer's loop")
        call = f"sch.vectorize({self._name(loop)})"
        return self._step(call, _annotate, loop, VECTORIZED)

    def unroll(self, loop: LoopRV) -> None:
        """Fully unroll ``loop`` (``transform.loop.unroll`` by its trip count)."""
        loop = check_loop(loop, "unroll")
        self._check_annotation(loop, "unroll")
        if is_symbolic(loop.extent):
            raise ScheduleError(f"unroll: loop {loop.name!r} has the symbolic trip count "
                                f"{loop.extent!r}; only a loop of constant extent can be fully unrolled "
                                "(split it with a constant factor and unroll the inner loop's block "
                                "once its extent is static)")
        if any(p.partial for p in loop.parts):
            raise ScheduleError(f"unroll: loop {loop.name!r} has a partial last tile (pad=True, or a "
                                "split of a symbolic extent); its trip count varies, so it cannot be "
                                "fully unrolled")
        if loop.extent > MAX_UNROLL:
            raise ScheduleError(f"unroll: loop {loop.name!r} has {loop.extent} iterations; unroll "
                                f"at most {MAX_UNROLL} (split it first)")
        call = f"sch.unroll({self._name(loop)})"
        return self._step(call, _annotate, loop, UNROLLED)

    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Run ``loop``'s iterations on a CUDA grid axis (TVM's ``bind``): ``"blockIdx.x"``
        (``.y``, ``.z``) or ``"threadIdx.x"`` (``.y``, ``.z``).

        The loop becomes an ``scf.forall`` mapped to ``#gpu.block<x>`` / ``#gpu.thread<x>``
        (``transform.structured.tile_using_forall ... (mapping = [...])``); adjacent loops bound
        to block axes (or to thread axes) form one multi-dimensional forall. ``build(sch,
        target="cuda")`` then turns the block forall into a ``gpu.launch`` and the thread
        forall into thread ids (``transform.gpu.map_forall_to_blocks``,
        ``map_nested_forall_to_threads``), as the default CUDA schedule does.
        """
        loop = check_loop(loop, "bind")
        _static(loop.block, "bind")
        if not isinstance(thread_axis, str) or thread_axis not in GPU_AXES:
            raise ScheduleError(f"bind: unknown thread axis {thread_axis!r}; use one of "
                                f"{', '.join(GPU_AXES)}")
        block = loop.block
        if loop.thread_axis is not None:
            raise ScheduleError(f"bind: loop {loop.name!r} is already bound to {loop.thread_axis}")
        self._check_annotation(loop, "bind")
        if loop.is_reduction:
            dims = [block.dims[p.dim].name for p in loop.parts if block.dims[p.dim].reduction]
            raise ScheduleError(
                f"bind: loop {loop.name!r} iterates the reduction dim {dims[0]!r} of block "
                f"{block.name!r}; its iterations accumulate into the same element, so running them "
                "on different threads would race (bind a spatial loop; keep the reduction serial)")
        for other in block.loops:
            if other.thread_axis == thread_axis:
                raise ScheduleError(f"bind: {thread_axis} is already bound to loop {other.name!r} of "
                                    f"block {block.name!r}; each axis can be bound once per block")
        if len(loop.parts) != 1:
            raise ScheduleError(f"bind: loop {loop.name!r} is a fused loop; bind unfused loops, one "
                                "axis each (a fused loop would need one axis per dim it walks)")
        if thread_axis.startswith("blockIdx") and block.attach is not None:
            raise ScheduleError(f"bind: block {block.name!r} is computed inside another block's loops; "
                                "only threadIdx axes can be bound there (blockIdx loops are outermost)")
        call = f'sch.bind({self._name(loop)}, "{thread_axis}")'

        def mutate(state: State, loop: LoopRV) -> None:
            loop.kind = PARALLEL
            loop.thread_axis = thread_axis

        return self._step(call, mutate, loop)

    def check_gpu(self) -> None:
        """Refuse what the CUDA build cannot map (``build(sch, target="cuda")`` calls it):
        every block computed at the root needs a ``blockIdx`` loop, outermost, since code
        outside the kernels runs on the host, which cannot touch device memory; ``blockIdx``
        loops and ``threadIdx`` loops must each be adjacent (one forall each), threads inside
        blocks, and at most 1024 threads per block. ``cache_read`` stages are refused: their
        copy is a buffer of its own (global memory on the GPU), not GPU shared memory or
        registers, so a ``"shared"`` cache would silently not be one."""
        for block in self._state.blocks:
            if block.read_of is not None and not block.removed:
                raise ScheduleError(
                    f"build for cuda: {block.name!r} is a cache_read stage; cache_read into GPU "
                    "shared or local memory is not supported (the copy would be a global-memory "
                    "buffer) — drop it for target='cuda' (the default CUDA schedule stages "
                    "contraction operands in shared memory itself, docs/cuda.md)")
        for block in self._state.blocks:
            if block.removed or block.attach is not None:
                continue
            loops = [l for l in block.loops]
            block_loops = [i for i, l in enumerate(loops) if (l.thread_axis or "").startswith("blockIdx")]
            thread_loops = [i for i, l in enumerate(loops) if (l.thread_axis or "").startswith("threadIdx")]
            hint = (f"bind a loop of {block.name!r} to blockIdx.x" +
                    (" (or place it with decompose_reduction inside bound loops)"
                     if block.kind == "init" else ""))
            if not block_loops:
                raise ScheduleError(f"build for cuda: block {block.name!r} has no loop bound to blockIdx; "
                                    f"it would run on the host, which cannot touch device memory — {hint}")
            if thread_loops and thread_loops[0] < block_loops[-1]:
                raise ScheduleError(f"build for cuda: threadIdx loop {loops[thread_loops[0]].name!r} of "
                                    f"{block.name!r} is outside its blockIdx loops")
            outside = [l.name for l in loops[: block_loops[0]] if l.extent > 1]
            if outside:
                raise ScheduleError(f"build for cuda: loops {outside} of {block.name!r} are outside its "
                                    "blockIdx loops and would run on the host; reorder the blockIdx "
                                    "loops outermost")
            for kind, positions in (("blockIdx", block_loops), ("threadIdx", thread_loops)):
                if positions and positions != list(range(positions[0], positions[-1] + 1)):
                    raise ScheduleError(
                        f"build for cuda: the {kind} loops of {block.name!r} "
                        f"{[loops[i].name for i in positions]} are not adjacent; reorder them together "
                        "(they map onto one grid)")
            threads = _product([loops[i].extent for i in thread_loops])
            if threads > 1024:
                raise ScheduleError(f"build for cuda: block {block.name!r} uses {threads} threads per "
                                    "CUDA block; at most 1024 (split the threadIdx loops further)")
        for block in self._state.blocks:
            for loop in block.loops:
                if loop.kind == PARALLEL and loop.thread_axis is None and not block.removed:
                    raise ScheduleError(f"build for cuda: loop {loop.name!r} of {block.name!r} is "
                                        "parallel (a CPU primitive); bind it to a GPU axis instead")

    def tensorized_blocks(self) -> list[BlockRV]:
        """The blocks whose inner tile ``tensorize`` replaced by an intrinsic."""
        return [b for b in self._state.blocks if b.tensorized is not None and not b.removed]

    def bound_loops(self) -> list[LoopRV]:
        """The loops bound to GPU axes (``bind``)."""
        return [l for b in self._state.blocks if not b.removed for l in b.loops if l.thread_axis]

    def _check_annotation(self, loop: LoopRV, what: str) -> None:
        _traced(loop.block, what)
        if loop.thread_axis is not None:
            raise ScheduleError(f"{what}: loop {loop.name!r} is already bound to {loop.thread_axis}")
        if loop.kind != SERIAL:
            raise ScheduleError(f"{what}: loop {loop.name!r} is already {loop.kind}")

    # -- block primitives --------------------------------------------------------------------

    def _movable(self, block: BlockRV, what: str, allow_layout: bool = False) -> None:
        _not_tensorized(block, what)
        if block.attach is not None:
            where = block.attach.loop.name if block.attach.loop else "the root"
            raise ScheduleError(f"{what}: block {block.name!r} is already computed at {where!r}")
        if not block.pristine:
            raise ScheduleError(
                f"{what}: block {block.name!r} already has scheduled loops; move it first (its loops "
                "are rebuilt for the region it computes), then schedule them"
            )
        if (block.layout is not None and not allow_layout) or block.cache is not None or (
                block.reverse is not None or block.inlined):
            raise ScheduleError(f"{what}: block {block.name!r} has a layout, cache, inlined producer or a "
                                "consumer computed in it; move it before those steps")

    def compute_at(self, block: BlockRV, loop: LoopRV) -> None:
        """Compute producer ``block`` inside ``loop`` of its consumer, one tile at a time
        (``transform.structured.fuse_into_containing_op``). Rebuilds ``block``'s loops."""
        block, loop = check_block(block, "compute_at"), check_loop(loop, "compute_at")
        host = loop.block
        _traced(block, "compute_at")
        _traced(host, "compute_at")
        if host is block:
            raise ScheduleError("compute_at: a block cannot be computed at its own loop")
        self._movable(block, "compute_at")
        if loop.kind == VECTORIZED:
            raise ScheduleError(f"compute_at: loop {loop.name!r} is vectorized: it is not a loop of the "
                                "generated code; choose a loop outside it")
        if block.kind == "read":
            reader = block.read_of[0]
            if host is not reader:
                raise ScheduleError(f"compute_at: the cache {block.name!r} can only be computed at a loop "
                                    f"of {reader.name!r}, the block reading it")
            outer = host.loops[: host.loops.index(loop) + 1]
            if any(p.partial for l in outer for p in l.parts):
                raise ScheduleError("compute_at: a cache_read copy is padded to a static tile; loops with "
                                    "partial tiles (pad=True) at or outside the loop are not supported")
            call = f"sch.compute_at({self._name(block)}, {self._name(loop)})"
            return self._step(call, _compute_at_read, block, loop, call)
        if block.kind == "cache":
            if host is not block.cache_of:
                raise ScheduleError(f"compute_at: the cache {block.name!r} can only be computed at a loop "
                                    f"of {block.cache_of.name!r}, the stage it writes")
        else:
            x = _find_operand(host, block)
            if x is None:
                if block is host.init_block:
                    raise ScheduleError(
                        f"compute_at: {block.name!r} initializes {host.name!r}; place it with "
                        f"decompose_reduction({host.name!r}, loop)")
                raise ScheduleError(f"compute_at: block {block.name!r} does not produce an input of "
                                    f"{host.name!r}")
            others = _uses_outside(block, host)
            if others:
                raise ScheduleError(
                    f"compute_at: {block.name!r} is also used by {', '.join(others)}; tilecraft moves "
                    "a producer into its consumer's loops only when that consumer is its only user "
                    "(MLIR 22's fuse_into_containing_op cannot keep the producer alive across a "
                    "serial loop)")
            if host.reverse is not None and host.loops.index(loop) <= host.loops.index(host.reverse[1]):
                raise ScheduleError(f"compute_at: loop {loop.name!r} is shared with "
                                    f"{host.reverse[0].name!r} (reverse_compute_at); choose a loop inside it")
            self._check_decompose_conflict(host, block)
            if any(r.read_of[1] == x for r in host.reads):
                raise ScheduleError(f"compute_at: {host.name!r} reads {block.name!r} through a cache_read "
                                    "copy; compute the producer at the root")
        call = f"sch.compute_at({self._name(block)}, {self._name(loop)})"
        self._step(call, _compute_at, block, loop, call)

    def compute_root(self, block: BlockRV) -> None:
        """Undo ``compute_at`` / ``reverse_compute_at`` / ``compute_at`` of a cache /
        ``decompose_reduction``: ``block`` is computed whole again, before (or, for a
        consumer, after) the nest of the block it was moved into (TE's ``compute_root``).
        Rebuilds ``block``'s loops over its whole extents."""
        block = check_block(block, "compute_root")
        if block.attach is None or (block.attach.loop is None and block.attach.mode != "reverse"):
            raise ScheduleError(f"compute_root: block {block.name!r} is already computed at the root")
        inner = [b.name for l in block.loops for b in l.attached]
        if inner or block.reverse is not None or block.inlined:
            who = inner or ([block.reverse[0].name] if block.reverse else [b.name for b in block.inlined])
            raise ScheduleError(f"compute_root: {who} are computed inside the loops of {block.name!r}; "
                                "move them to the root first")
        host = block.attach.host
        if block.attach.mode == "compute_at" and host.init_block is not None and (
                host.init_block.attach is not None and host.init_block.attach.loop is not None):
            raise ScheduleError(f"compute_root: {host.name!r} has its init placed by decompose_reduction "
                                "after this block was computed in it; compute_root that init first")
        call = f"sch.compute_root({self._name(block)})"
        self._step(call, _compute_root, block, call)

    def _check_decompose_conflict(self, host: BlockRV, producer: BlockRV) -> None:
        init = host.init_block
        if init is not None and init.attach is not None and init.attach.mode == "init" and init.attach.loop:
            raise ScheduleError(
                f"block {host.name!r} has its init placed by decompose_reduction; compute producers "
                "at its loops before decompose_reduction")

    def reverse_compute_at(self, block: BlockRV, loop: LoopRV) -> None:
        """Compute consumer ``block`` inside ``loop`` of its producer, right after each tile
        is produced. Rendered as tiling the consumer like the producer's loops and fusing the
        producer into it. Rebuilds ``block``'s loops."""
        block, loop = check_block(block, "reverse_compute_at"), check_loop(loop, "reverse_compute_at")
        host = loop.block
        _static(block, "reverse_compute_at")
        _static(host, "reverse_compute_at")
        if host is block:
            raise ScheduleError("reverse_compute_at: a block cannot be computed at its own loop")
        self._movable(block, "reverse_compute_at")
        if block.kind != "op" or host.kind != "op":
            raise ScheduleError("reverse_compute_at: both blocks must be ops of the function (not "
                                "cache or layout stages)")
        x = _find_operand(block, host)
        if x is None:
            raise ScheduleError(f"reverse_compute_at: block {block.name!r} does not read the result of "
                                f"{host.name!r}")
        if host.attach is not None or host.reverse is not None or host.cache is not None or host.layout or (
                host.reads or host.frozen):
            raise ScheduleError(f"reverse_compute_at: {host.name!r} must be a root block without a cache, "
                                "layout or other reverse_compute_at")
        outer = host.loops[: host.loops.index(loop) + 1]
        for l in outer:
            if l.attached:
                raise ScheduleError(f"reverse_compute_at: block {l.attached[0].name!r} is computed at "
                                    f"{l.name!r}, outside {loop.name!r}")
            if l.is_reduction:
                raise ScheduleError(
                    f"reverse_compute_at: loop {l.name!r} iterates a reduction of {host.name!r}; a tile of "
                    f"its result is complete only inside the reduction — choose a loop outside it")
            if any(p.partial for p in l.parts):
                raise ScheduleError("reverse_compute_at: loops with partial tiles are not supported")
        positions = {r.value: i for i, r in enumerate(host.output_map) if r.kind == "dim"}
        if len(positions) != len(host.output_map):
            raise ScheduleError(f"reverse_compute_at: {host.name!r} writes its output through a "
                                "non-trivial index")
        for r in block.maps[x]:
            if r.kind != "dim":
                raise ScheduleError(f"reverse_compute_at: {block.name!r} reads {host.name!r} through "
                                    f"{r.text or r.kind}")
        for l in outer:
            for p in l.parts:
                target = block.maps[x][positions[p.dim]].value
                if block.dims[target].reduction:
                    raise ScheduleError(
                        f"reverse_compute_at: loop {l.name!r} would split the reduction dim "
                        f"{block.dims[target].name!r} of {block.name!r}")
        others = _uses_outside(host, block)
        if others:
            raise ScheduleError(
                f"reverse_compute_at: {host.name!r} is also used by {', '.join(others)}; tilecraft "
                "fuses a producer into its consumer's loops only when that consumer is its only user "
                "(MLIR 22's fuse_into_containing_op cannot keep it alive across a serial loop)")
        init = host.init_block
        if init is not None and init.attach is not None and init.attach.loop is not None:
            raise ScheduleError("reverse_compute_at: not supported together with decompose_reduction")
        call = f"sch.reverse_compute_at({self._name(block)}, {self._name(loop)})"
        self._step(call, _reverse_compute_at, block, loop, call)

    def compute_inline(self, block: BlockRV) -> None:
        """Inline the elementwise ``block`` into its consumer: it is recomputed in the
        consumer's innermost loop (fused there, then vectorized with it), and its tensor
        disappears."""
        block = check_block(block, "compute_inline")
        _traced(block, "compute_inline")
        for consumer, _ in block.consumers:
            _traced(consumer, "compute_inline")
        self._movable(block, "compute_inline")
        if block.kind != "op":
            raise ScheduleError(f"compute_inline: {block.name!r} is a {block.kind} block, not an op of the function")
        if block.is_reduction:
            raise ScheduleError(f"compute_inline: {block.name!r} is a reduction; only elementwise "
                                "(injective) blocks can be inlined")
        for results in block.maps:
            if any(r.kind != "dim" for r in results):
                raise ScheduleError(f"compute_inline: {block.name!r} indexes an operand with a "
                                    "non-trivial expression; only elementwise blocks can be inlined")
        if block.returned:
            raise ScheduleError(f"compute_inline: {block.name!r} is an output of the function; "
                                "an output block cannot be inlined")
        if len(block.consumers) != 1:
            raise ScheduleError(
                f"compute_inline: {block.name!r} has {len(block.consumers)} consumers; tilecraft "
                "inlines into exactly one (MLIR 22's fuse_into_containing_op cannot fuse a producer "
                "that stays used elsewhere into a serial loop)")
        consumer, x = block.consumers[0]
        if x >= consumer.n_inputs:
            raise ScheduleError(f"compute_inline: {block.name!r} is the init of {consumer.name!r}")
        if consumer.removed:
            raise ScheduleError(f"compute_inline: its consumer {consumer.name!r} was {consumer.removed}")
        if consumer.frozen:
            raise ScheduleError(f"compute_inline: its consumer {consumer.name!r} takes no more primitives: "
                                f"{consumer.frozen}; inline before rfactor")
        _not_tensorized(consumer, "compute_inline")
        if any(r.read_of[1] == x for r in consumer.reads):
            raise ScheduleError(f"compute_inline: {consumer.name!r} reads {block.name!r} through a "
                                "cache_read copy; a cached tensor cannot be inlined")
        if consumer.reverse is not None or (consumer.init_block and consumer.init_block.attach):
            raise ScheduleError(f"compute_inline: {consumer.name!r} uses reverse_compute_at or "
                                "decompose_reduction; inline first")
        call = f"sch.compute_inline({self._name(block)})"
        self._step(call, _compute_inline, block, call)

    def cache_write(self, block: BlockRV, scope: str = "local") -> BlockRV:
        """TVM's ``cache_write``: ``block`` now computes into a new tensor (the returned
        ``<name>.<scope>`` block), and ``block`` keeps its name as the stage copying it to
        the real output. Place the cache with ``compute_at(cache, loop)`` at a loop of
        ``block``: a tile-sized buffer (``transform.structured.pad`` with a copy back)."""
        block = check_block(block, "cache_write")
        _static(block, "cache_write")
        if block.kind != "op":
            raise ScheduleError(f"cache_write: {block.name!r} is a {block.kind} block, not an op of the function")
        self._movable(block, "cache_write", allow_layout=True)
        if any(r.kind != "dim" for r in block.output_map):
            raise ScheduleError(f"cache_write: {block.name!r} writes through a non-trivial index")
        if block.reverse is not None:
            raise ScheduleError("cache_write: not supported with reverse_compute_at")
        if block.reads:
            raise ScheduleError("cache_write: not supported together with cache_read on the same block "
                                "(both pad the op; call cache_write alone)")
        if not isinstance(scope, str) or not scope.isidentifier():
            raise ScheduleError(f"cache_write: scope must be a name such as 'local', got {scope!r}")
        call = f'sch.cache_write({self._name(block)}, "{scope}")'
        return self._step(call, _cache_write, block, scope, call)

    def cache_read(self, tensor: Any, scope: str, readers: "BlockRV | Sequence[BlockRV]") -> BlockRV:
        """TE's ``cache_read``: ``readers`` reads ``tensor`` (an argument's name, a
        placeholder, or the block producing it) from a copy, the returned ``<name>.<scope>``
        block. At the root the copy is the whole tensor; ``compute_at(cache, loop)`` at a
        loop of the reader makes it the slice one iteration of ``loop`` reads (a tile-sized
        buffer). Rendered as ``transform.structured.pad`` of that operand with
        ``nofold_flags`` (a ``tensor.pad nofold`` without padding), rewritten in
        destination-passing style: ``alloc_tensor`` + a ``linalg.copy`` tagged with the
        cache's name."""
        if isinstance(readers, (list, tuple)):
            if len(readers) != 1:
                raise ScheduleError(
                    f"cache_read: give one reader, got {len(readers)}; tilecraft makes one copy per "
                    "reader (the pad belongs to the reader's op) — call cache_read once per reader")
            readers = readers[0]
        reader = check_block(readers, "cache_read")
        _static(reader, "cache_read")
        if not isinstance(scope, str) or not scope.isidentifier():
            raise ScheduleError(f"cache_read: scope must be a name such as 'local', got {scope!r}")
        if reader.kind != "op":
            raise ScheduleError(f"cache_read: {reader.name!r} is a {reader.kind} block, not an op of the function")
        if reader.frozen:
            raise ScheduleError(f"cache_read: block {reader.name!r} takes no more primitives: {reader.frozen}")
        if reader.attach is not None:
            raise ScheduleError(f"cache_read: {reader.name!r} is computed inside another block's loops; "
                                "cache its inputs before moving it")
        if reader.cache is not None or reader.layout is not None or reader.reverse is not None or reader.inlined:
            raise ScheduleError(f"cache_read: {reader.name!r} has a cache_write, layout, inlined producer or "
                                "a consumer computed in it; tilecraft pads its inputs only before those steps")
        init = reader.init_block
        if init is not None and init.attach is not None and init.attach.loop is not None:
            raise ScheduleError(f"cache_read: {reader.name!r} has its init placed by decompose_reduction; "
                                "call cache_read first")
        _not_tensorized(reader, "cache_read")
        operand, label = self._read_operand(reader, tensor)
        if any(r.read_of[1] == operand for r in reader.reads):
            raise ScheduleError(f"cache_read: {reader.name!r} already reads {label!r} through a cache")
        producer = reader.producers[operand]
        if producer is not None and (producer.attach is not None or producer.inlined_into):
            raise ScheduleError(f"cache_read: {label!r} is computed inside {reader.name!r}; cache a "
                                "tensor computed at the root")
        operand_extents(reader.maps[operand], [d.extent for d in reader.dims], "cache_read")
        name = f"{label}.{scope}"
        if any(b.name == name and not b.removed for b in self._state.blocks):
            raise ScheduleError(f"cache_read: a block named {name!r} exists; choose another scope")
        text = f'"{label}"' if not isinstance(tensor, BlockRV) else self._name(tensor)
        call = f'sch.cache_read({text}, "{scope}", [{self._name(reader)}])'
        return self._step(call, _cache_read, reader, operand, name, call)

    def _read_operand(self, reader: BlockRV, tensor: Any) -> tuple[int, str]:
        names = [self._operand_name(reader, x) for x in range(reader.n_inputs)]
        if isinstance(tensor, BlockRV):
            x = _find_operand(reader, tensor)
            if x is None:
                raise ScheduleError(f"cache_read: block {reader.name!r} does not read the result of "
                                    f"{tensor.name!r}; its inputs are {names}")
            return x, names[x]
        label = getattr(tensor, "name", tensor)
        if not isinstance(label, str) or label not in names:
            raise ScheduleError(f"cache_read: block {reader.name!r} does not read {label!r}; its inputs "
                                f"are {names}")
        if names.count(label) > 1:
            raise ScheduleError(f"cache_read: {reader.name!r} reads {label!r} twice; tilecraft caches "
                                "one operand")
        return names.index(label), label

    def rfactor(self, loop: LoopRV, factor_axis: int | None = None) -> BlockRV:
        """TE's ``rfactor``: split ``loop``'s reduction into partial sums, the returned
        ``<name>.rf`` block, indexed by ``loop``; the block then reduces those partials.

        ``loop`` is one of the two innermost loops ``ko, ki = split(k, ...)`` of a reduction
        dim. ``rfactor(ki)`` is ``transform.structured.tile_reduction_using_for`` (a serial
        loop over ``ko`` accumulates ``ki.extent`` independent partials);
        ``rfactor(ko)`` is ``tile_reduction_using_forall`` (``ko.extent`` parallel partial
        reductions in an ``scf.forall``, TVM's parallel reduction). ``factor_axis`` (TVM's
        default 0) is accepted at any position: it only says where TVM lays out the partial
        axis in the rf buffer, which no later primitive can address here; tilecraft's rf
        tensor keeps upstream's layout (partial axis last) and the results are the same.
        Loops outside ``ko`` are scheduled before ``rfactor``; afterwards the block and its rf
        block take no more loop primitives."""
        loop = check_loop(loop, "rfactor")
        block = loop.block
        _static(block, "rfactor")
        if not loop.is_reduction:
            names = [block.dims[p.dim].name for p in loop.parts]
            raise ScheduleError(f"rfactor: loop {loop.name!r} iterates the spatial dim {names[0]!r} of "
                                f"{block.name!r}, not a reduction; rfactor a part of a reduction loop")
        if block.kind != "op" or block.attach is not None:
            raise ScheduleError(f"rfactor: {block.name!r} must be an op block computed at the root")
        if block.cache is not None or block.layout is not None or block.reverse is not None or (
                block.inlined or block.reads):
            raise ScheduleError(f"rfactor: {block.name!r} has a cache, layout, cache_read, inlined producer or "
                                "consumer computed in it; rfactor it before those steps")
        init = block.init_block
        if init is not None and init.attach is not None:
            raise ScheduleError(f"rfactor: {block.name!r} has its init placed by decompose_reduction")
        _not_tensorized(block, "rfactor")
        loops = block.loops
        inner = loops[-1]
        outer = loops[-2] if len(loops) > 1 else None
        shape_ok = (outer is not None and len(inner.parts) == 1 and len(outer.parts) == 1
                    and inner.parts[0].dim == outer.parts[0].dim and inner.parts[0].stride == 1
                    and outer.parts[0].stride == inner.extent
                    and outer.extent * inner.extent == block.dims[inner.parts[0].dim].extent)
        if not shape_ok or loop not in (outer, inner):
            raise ScheduleError(
                f"rfactor: split the reduction loop in two and keep both parts innermost "
                f"(ko, ki = sch.split(k, factor=f); rfactor(ko or ki)); the loops of {block.name!r} are "
                f"{[l.name for l in loops]}")
        for l in (outer, inner):
            if l.kind != SERIAL or l.attached or any(p.partial for p in l.parts):
                raise ScheduleError(f"rfactor: loop {l.name!r} must be a plain loop (not annotated, "
                                    "padded, or holding computed blocks)")
        for l in loops[:-2]:
            if l.is_reduction:
                raise ScheduleError(f"rfactor: loop {l.name!r} outside {outer.name!r} iterates a reduction; "
                                    "only the split reduction dim may be reduced")
            if any(p.partial for p in l.parts):
                raise ScheduleError("rfactor: loops with partial tiles (pad=True) are not supported")
        parallel_outside = [l.name for l in loops[:-2] if l.kind == PARALLEL]
        if loop is outer and parallel_outside:
            raise ScheduleError(
                f"rfactor: {loop.name!r} would become an scf.forall nested in the parallel loop "
                f"{parallel_outside[0]!r}; the CPU runtime (MLIR's async runtime) deadlocks on nested "
                f"parallel loops — rfactor the inner part {inner.name!r} instead, or leave "
                f"{parallel_outside[0]!r} serial")
        rank = len(block.output_map) + 1
        if factor_axis is not None and (not isinstance(factor_axis, int) or isinstance(factor_axis, bool)
                                        or not -rank <= factor_axis < rank):
            raise ScheduleError(
                f"rfactor: factor_axis={factor_axis!r} is out of range: the rf tensor has {rank} axes "
                f"(the output's and the partial axis); give an int in [{-rank}, {rank})")
        call = f"sch.rfactor({self._name(loop)}" + (f", {factor_axis})" if factor_axis is not None else ")")
        return self._step(call, _rfactor, block, loop, call)

    def storage_align(self, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int) -> None:
        """TE's ``storage_align`` (pad a buffer's row stride to ``k * factor + offset``) is
        not expressible here: tilecraft schedules linalg on tensors, where a tensor has no
        strides; the buffers, and their layout, are chosen later by one-shot bufferization,
        and no transform op sets an allocation's stride (``structured.pad`` grows the
        iteration domain, which changes what the op computes; ``bufferize_to_allocation``
        allocates the exact shape). Always raises :class:`ScheduleError`."""
        raise ScheduleError(
            "storage_align: not supported: tilecraft schedules linalg on tensors, which have no "
            "strides; buffer layouts are chosen by one-shot bufferization after the schedule, and no "
            "upstream transform op pads an allocation's row stride (structured.pad would enlarge the "
            "computed region instead) — see docs/scheduling.md")

    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Compute the init of reduction ``block`` right before ``loop`` (instead of once
        for the whole output before the nest); returns the init block."""
        block, loop = check_block(block, "decompose_reduction"), check_loop(loop, "decompose_reduction")
        if loop.block is not block:
            raise ScheduleError(f"decompose_reduction: loop {loop.name!r} is not a loop of {block.name!r}")
        if not block.is_reduction:
            raise ScheduleError(f"decompose_reduction: block {block.name!r} is not a reduction")
        _static(block, "decompose_reduction")
        init = block.init_block
        if init is None or block.kind != "op":
            raise ScheduleError(
                f"decompose_reduction: block {block.name!r} has no init block of its own (a "
                "linalg.fill used only as its output)")
        if init.attach is not None or not init.pristine:
            raise ScheduleError(f"decompose_reduction: {init.name!r} is already placed or scheduled")
        if block.layout is not None:
            raise ScheduleError("decompose_reduction: not supported after transform_layout (the init is "
                                "packed with the output)")
        if block.reads:
            raise ScheduleError("decompose_reduction: not supported together with cache_read on the same "
                                "block")
        index = block.loops.index(loop)
        if block.reverse is not None and 0 < index <= block.loops.index(block.reverse[1]):
            raise ScheduleError(
                f"decompose_reduction: {block.reverse[0].name!r} is computed at "
                f"{block.reverse[1].name!r} (reverse_compute_at); the init can only be placed inside "
                f"that loop — pass a loop inside {block.reverse[1].name!r}")
        outer = block.loops[:index]
        for l in outer:
            if l.is_reduction:
                raise ScheduleError(
                    f"decompose_reduction: loop {l.name!r} outside {loop.name!r} iterates a reduction "
                    f"dim; the init must run before every reduction loop — pass {l.name!r} or a loop "
                    "outside it")
            if any(p.partial for p in l.parts):
                raise ScheduleError("decompose_reduction: loops with partial tiles are not supported")
        if block.reverse is None:
            _not_frozen(outer[-1:], "decompose_reduction")
        else:  # the reverse consumer fixes the loops, but the init may join it (TVM's blitz order)
            _not_frozen(outer[-1:], "decompose_reduction", allow=block.reverse[0])
        serial = [l for l in outer if l.kind != PARALLEL and l.extent > 1]
        producers = [p.name for x, p in enumerate(block.producers[: block.n_inputs]) if p is not None]
        if serial and producers:
            raise ScheduleError(
                f"decompose_reduction: the serial loops {[l.name for l in serial]} are made with "
                f"transform.structured.fuse, which would also fuse the producers {producers} of "
                f"{block.name!r} into them; compute them at the root first, or make those loops parallel")
        call = f"sch.decompose_reduction({self._name(block)}, {self._name(loop)})"
        return self._step(call, _decompose_reduction, block, loop, call)

    def tensorize(self, loop: LoopRV, intrinsic: "str | TensorIntrin") -> None:
        """Compute the tile made of ``loop`` and the loops inside it with one call of a
        registered intrinsic (TVM's ``s[C].tensorize(yi, intrin)``; see
        :func:`~tilecraft.schedule.te.register_intrinsic`).

        The tile (one iteration of the loops outside ``loop``) must have the intrinsic's
        shape, and the block must compute what the intrinsic's definition does (iterator
        kinds, indexing maps, body, element types). The tiled op is annotated
        ``tilecraft.tensorize = "<extern>"`` in the script; after bufferization the
        ``tilecraft-tensorize`` pass replaces it by ``func.call @<extern>`` on the operands'
        subviews. ``loop`` and the loops inside it are consumed: the tile is no longer
        schedulable (schedule the loops outside it, before or after)."""
        loop = check_loop(loop, "tensorize")
        intrin = lookup_intrinsic(intrinsic)
        block = loop.block
        _static(block, "tensorize")
        if block.kind not in ("op", "cache") or block.op is None:
            raise ScheduleError(f"tensorize: {block.name!r} is a {block.kind} block; only an op of the "
                                "function (or the compute stage cache_write returns) can be tensorized")
        if block.layout is not None or block.inlined:
            raise ScheduleError(f"tensorize: block {block.name!r} has a transform_layout or an inlined "
                                "producer; its op no longer has the operands the intrinsic takes")
        index = block.loops.index(loop)
        inner, outer = block.loops[index:], block.loops[:index]
        for l in inner:
            if l.thread_axis is not None or l.kind != SERIAL:
                how = f"bound to {l.thread_axis}" if l.thread_axis else l.kind
                raise ScheduleError(
                    f"tensorize: loop {l.name!r} at or inside {loop.name!r} is {how}; the tile becomes "
                    "one call of the intrinsic and has no loops left to annotate — tensorize a loop "
                    "inside it")
            if l.attached:
                raise ScheduleError(
                    f"tensorize: block {l.attached[0].name!r} is computed at loop {l.name!r}, inside "
                    f"the tile of {loop.name!r}; the tile becomes one call of the intrinsic")
        if any(p.partial for l in block.loops for p in l.parts):
            raise ScheduleError("tensorize: loops with partial tiles (pad=True): the intrinsic computes "
                                "a fixed shape, and the last tile would be smaller")
        tile = tile_extents(block, outer[-1] if outer else None)
        _match_intrinsic(block, intrin, tile, f"inside {outer[-1].name!r}" if outer else "(the whole block)")
        call = f'sch.tensorize({self._name(loop)}, "{intrin.name}")'
        self._step(call, _tensorize, block, loop, intrin.name, intrin.extern.name, call)

    def transform_layout(self, block: BlockRV, buffer: "int | str", index_map: Callable[..., tuple],
                         name: str | None = None) -> BlockRV:
        """Store input ``buffer`` of ``block`` in a new layout (TVM's array packing), e.g.
        ``lambda k, n: (n // 32, k, n % 32)``: ``transform.structured.pack`` +
        ``pack_transpose``. Returns the packing block (a transpose, schedulable).

        The packed dims of ``block`` become two dims (``no`` and ``ni``), so its loops are
        rebuilt; an output indexed by a packed dim is unpacked by a copy block
        ``<name>.unpack``. Call it before other primitives on ``block``.
        """
        block = check_block(block, "transform_layout")
        _static(block, "transform_layout")
        if block.kind != "op" or block.attach is not None:
            raise ScheduleError("transform_layout: the block must be a root op block")
        self._movable(block, "transform_layout")
        if block.reads:
            raise ScheduleError("transform_layout: not supported together with cache_read on the same block")
        if len(block.output_map) and any(r.kind != "dim" for r in block.output_map):
            raise ScheduleError("transform_layout: the output is written through a non-trivial index")
        operand = self._operand_index(block, buffer)
        results = block.maps[operand]
        if any(r.kind != "dim" for r in results):
            raise ScheduleError(f"transform_layout: operand {buffer!r} is indexed by a non-trivial "
                                "expression; only operands indexed by loop dims can be packed")
        shape = [block.dims[r.value].extent for r in results]
        outer, inner_dims, packed_sizes = self._parse_layout(block, operand, shape, index_map)
        out = block.output_map
        packed_out = [p for p, r in enumerate(out) if packed_sizes[r.value]]
        if len(packed_out) > 1 or (packed_out and packed_out[0] != len(out) - 1):
            raise ScheduleError(
                "transform_layout: MLIR packs every operand indexed by the packed dim, so the output "
                "would be re-laid out too; tilecraft supports that only when the packed dim is the "
                "output's innermost dim (the unpack is then a reshape)")
        pack_name = name or f"{self._operand_name(block, operand)}_packed"
        if any(b.name == pack_name for b in self._state.blocks):
            raise ScheduleError(f"transform_layout: a block named {pack_name!r} exists; pass name=")
        buffer_text = f'"{buffer}"' if isinstance(buffer, str) else str(buffer)
        call = f"sch.transform_layout({self._name(block)}, {buffer_text}, {self._layout_text(shape, index_map)})"
        return self._step(call, _transform_layout, block, operand, outer, inner_dims, packed_sizes,
                          pack_name, call)

    @staticmethod
    def _layout_text(shape: list[int], index_map: Callable[..., tuple]) -> str:
        names = list(inspect.signature(index_map).parameters)
        variables = [IterVar(extent, n, "spatial") for extent, n in zip(shape, names)]
        result = index_map(*variables)
        result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        text = ", ".join(repr(r).removeprefix("(").removesuffix(")") for r in result)
        return f"lambda {', '.join(names)}: ({text})"

    def _operand_name(self, block: BlockRV, operand: int) -> str:
        producer = block.producers[operand]
        if producer is not None:
            return producer.name
        position = block.op.arg_positions[operand] if block.op else None
        return self._argument_names[position] if position is not None else f"operand{operand}"

    def _operand_index(self, block: BlockRV, buffer: "int | str") -> int:
        if isinstance(buffer, int) and not isinstance(buffer, bool):
            if not 0 <= buffer < block.n_inputs:
                raise ScheduleError(f"transform_layout: {block.name!r} has inputs 0..{block.n_inputs - 1}")
            return buffer
        names = [self._operand_name(block, x) for x in range(block.n_inputs)]
        if buffer not in names:
            raise ScheduleError(f"transform_layout: {block.name!r} reads no buffer {buffer!r}; its inputs "
                                f"are {names}")
        return names.index(buffer)

    def _parse_layout(self, block: BlockRV, operand: int, shape: list[int],
                      index_map: Callable[..., tuple]) -> tuple[list[int], list[int], list[int]]:
        try:
            names = list(inspect.signature(index_map).parameters)
        except (TypeError, ValueError):
            names = []
        if len(names) != len(shape):
            raise ScheduleError(f"transform_layout: the index map takes {len(names)} arguments but the "
                                f"buffer has rank {len(shape)}")
        variables = [IterVar(extent, n, "spatial") for extent, n in zip(shape, names)]
        result = index_map(*variables)
        result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        whole: dict[int, int] = {}
        outer_split: dict[int, int] = {}
        inner_split: dict[int, int] = {}
        entries: list[tuple[str, int]] = []
        for expr in result:
            if isinstance(expr, IterVar) and expr in variables:
                position = variables.index(expr)
                whole[position] = 1
                entries.append(("outer", position))
            elif isinstance(expr, IndexBinary) and expr.op in ("floordiv", "mod") and isinstance(
                    expr.lhs, IterVar) and expr.lhs in variables and isinstance(expr.rhs, IndexConst):
                position = variables.index(expr.lhs)
                target = outer_split if expr.op == "floordiv" else inner_split
                if position in target:
                    raise ScheduleError(f"transform_layout: {expr!r} appears twice")
                target[position] = expr.rhs.value
                entries.append(("outer" if expr.op == "floordiv" else "inner", position))
            else:
                raise ScheduleError(
                    f"transform_layout: each index of the new layout must be a variable v, v // c or "
                    f"v % c; got {expr!r}")
        kinds = [k for k, _ in entries]
        if "inner" in kinds and "outer" in kinds[kinds.index("inner"):]:
            raise ScheduleError("transform_layout: the v % c (inner tile) indices must come last")
        for position in range(len(shape)):
            count = (position in whole) + (position in outer_split) + (position in inner_split)
            if position in whole and count > 1 or count == 0:
                raise ScheduleError(f"transform_layout: {names[position]!r} must appear once, or as "
                                    f"{names[position]} // c and {names[position]} % c")
            if (position in outer_split) != (position in inner_split) or (
                    position in outer_split and outer_split[position] != inner_split[position]):
                raise ScheduleError(f"transform_layout: split {names[position]!r} as "
                                    f"{names[position]} // c and {names[position]} % c with the same c")
            c = outer_split.get(position)
            if c is not None and (c < 1 or shape[position] % c):
                raise ScheduleError(f"transform_layout: {c} does not divide the extent {shape[position]} "
                                    f"of {names[position]!r} (padding is not supported for layouts)")
        if not inner_split:
            raise ScheduleError("transform_layout: the layout tiles nothing (no v // c, v % c pair); "
                                "a pure permutation is not a packing")
        results = block.maps[operand]
        packed_sizes = [0] * len(block.dims)
        for position, c in inner_split.items():
            packed_sizes[results[position].value] = c
        outer = [p for k, p in entries if k == "outer"]
        inner_dims = [results[p].value for k, p in entries if k == "inner"]
        return outer, inner_dims, packed_sizes

    # -- output ------------------------------------------------------------------------------

    @property
    def script(self) -> str:
        """The transform module making the current schedule (header: the primitive calls)."""
        return self._script

    @property
    def trace(self) -> "Trace":
        """The transform script: ``sch.trace()`` or ``sch.trace.show()`` print it (TVM's
        ``sch.trace.show()``), ``str(sch.trace)`` is its text."""
        return Trace(self._script, self.history)

    def ir(self) -> str:
        """The scheduled function's IR (the payload after the script)."""
        return str(find_function_in(self._current, self.func_name))

    def show(self) -> None:
        """Print the scheduled function's loops (TVM's ``sch.mod.show()``)."""
        print(self.ir())

    @property
    def mod(self) -> ir.Module:
        """A fresh copy of the scheduled module (with every function of the source)."""
        return ir.Module.parse(str(self._current), context=self._context)

    def module_text(self) -> str:
        """The scheduled module as MLIR text."""
        return str(self._current)

    def module_bytecode(self) -> bytes:
        """The scheduled module as MLIR bytecode (what :func:`build` compiles)."""
        buffer = io.BytesIO()
        self._current.write_bytecode(buffer)
        return buffer.getvalue()

    @property
    def history(self) -> list[str]:
        """The primitive calls so far, TVM-trace style (``l3, l4 = sch.split(l1, factor=32)``)."""
        return list(self._history)

    def save(self, path: "str | Path") -> Path:
        """Write the unscheduled function followed by the script: ``tilecraft-opt <path>
        --transform-interpreter`` reproduces :meth:`show`'s IR without Python."""
        path = Path(path)
        payload = str(self._payload)
        resources = ""
        marker = payload.find("\n{-#")
        if marker != -1:
            payload, resources = payload[:marker], payload[marker:]
        if not len(self._payload.operation.attributes):
            # The functions at top level, as upstream transform tests write them.
            payload = "\n".join(str(op) for op in self._payload.body.operations)
        path.write_text(payload.rstrip() + "\n\n" + self._script + resources)
        return path

    def __repr__(self) -> str:
        return f"<Schedule @{self.func_name}: {len(self._history)} steps>"


class Trace:
    """What :attr:`Schedule.trace` returns: the script, printable, and the primitive calls."""

    def __init__(self, script: str, calls: list[str]) -> None:
        self.script = script
        self.calls = calls

    def show(self) -> None:
        print(self.script, end="")

    __call__ = show

    def __str__(self) -> str:
        return self.script

    def __repr__(self) -> str:
        return f"<Trace: {len(self.calls)} calls>"


def find_function_in(module_op: ir.Operation, name: str) -> ir.Operation:
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op
    raise ScheduleError(f"no function @{name}")
