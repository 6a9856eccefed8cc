"""Render a schedule (``state.py``) as one transform-dialect script.

The script is a ``transform.named_sequence @__transform_main`` in two phases:

1. *structure*, walking each block's loops outside-in: ``tile_using_for`` (a serial loop;
   a fused loop is tiled on its dims with ``interchange`` and later coalesced),
   ``tile_using_forall`` (a parallel loop; with a ``#gpu.block``/``#gpu.thread`` mapping, a
   bound one), ``fuse_into_containing_op`` (``compute_at``,
   ``reverse_compute_at``, ``compute_inline``), ``structured.pad`` with a copy back
   (``cache_write``), ``structured.pad`` of one input, ``nofold`` (``cache_read``),
   ``tile_reduction_using_for/forall`` (``rfactor``), ``structured.fuse`` / fusing the fill into a forall
   (``decompose_reduction``), ``structured.pack`` + ``pack_transpose`` + ``lower_pack``
   (``transform_layout``);
2. *finishing*, innermost first so no handle is used after an enclosing loop was rewritten:
   ``structured.vectorize``, ``loop.coalesce`` (``fuse``), ``loop.unroll``.

It ends with hoisting loop-invariant subsets (slices and vector transfers of the tiles a
reduction loop updates: accumulators in registers across it), then ``@cleanup`` of the
default schedule (vector patterns, LICM, hoisting again). Ops are found through their ``tilecraft.block``
attribute, so ``tilecraft-opt payload.mlir --transform-interpreter`` replays a script written
after the payload.
"""

from __future__ import annotations

from ..op_schedule import DECOMPOSABLE
from ..script import CLEANUP_SEQUENCE, ScriptWriter
from ...pipelines.tensor.tensorize import TENSORIZE_ATTR
from .compute import BLOCK_ATTR
from .state import PARALLEL, SERIAL, UNROLLED, VECTORIZED, BlockRV, LoopRV, State
from .symbolic import is_symbolic

ANY = ScriptWriter.ANY
_PACK = '!transform.op<"linalg.pack">'
_UNPACK = '!transform.op<"linalg.unpack">'


def _padding_value(element_type: str) -> str:
    if element_type.startswith(("f", "bf")):
        return f"0.0 : {element_type}"
    return f"0 : {element_type}"


class ScriptWriter(ScriptWriter):
    """The default schedule's writer (fresh SSA names, line list) plus the ops primitives need."""

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def comment(self, text: str) -> None:
        self.lines.append(f"// {text}")

    def match_block(self, tag: str, container: str = "%root") -> str:
        handle = self.fresh("b")
        self.emit(f'{handle} = transform.structured.match attributes{{{BLOCK_ATTR} = "{tag}"}} '
                  f"in {container} : ({ANY}) -> {ANY}")
        return handle

    def tile_loops(self, handle: str, sizes: list[int], interchange: list[int] | None,
                   fuse: bool = False) -> tuple[str, list[str]]:
        n_loops = sum(1 for s in sizes if s)
        tiled = self.fresh("t")
        loops = [self.fresh("loop") for _ in range(n_loops)]
        op = "fuse" if fuse else "tile_using_for"
        order = ""
        if interchange and interchange != sorted(interchange):
            order = f" interchange {interchange}" if fuse else f" interchange = {interchange}"
        results = ", ".join([ANY] * (n_loops + 1))
        self.emit(f"{', '.join([tiled, *loops])} = transform.structured.{op} {handle} tile_sizes "
                  f"{sizes}{order} : ({ANY}) -> ({results})")
        return tiled, loops

    def tile_parallel(self, handle: str, sizes: list[int]) -> tuple[str, str]:
        return self.tile_forall(handle, tuple(sizes))

    def tile_bound(self, handle: str, sizes: list[int], loops: list[LoopRV],
                   dims: list[list[int]]) -> tuple[str, str]:
        """``bind``: ``tile_using_forall`` whose loops map to ``#gpu.block<x>`` /
        ``#gpu.thread<x>``; the forall's dims (and so the mapping) follow the op's dim order."""
        axes = sorted((loop_dims[0], loop.thread_axis) for loop, loop_dims in zip(loops, dims))
        mapping = ", ".join(f"#gpu.{'block' if axis.startswith('blockIdx') else 'thread'}"
                            f"<{axis[-1]}>" for _, axis in axes)
        tiled, forall = self.fresh("tiled"), self.fresh("forall")
        self.emit(f"{tiled}, {forall} = transform.structured.tile_using_forall {handle} tile_sizes "
                  f"{sizes} (mapping = [{mapping}]) : ({ANY}) -> ({ANY}, {ANY})")
        return tiled, forall

    def fuse_into_loop(self, producer: str, loop: str) -> tuple[str, str]:
        fused, new_loop = self.fresh("fused"), self.fresh("loop")
        self.emit(f"{fused}, {new_loop} = transform.structured.fuse_into_containing_op {producer} "
                  f"into {loop} : ({ANY}, {ANY}) -> ({ANY}, {ANY})")
        return fused, new_loop

    def pad_output(self, handle: str, element_types: list[str], n_dims: int) -> tuple[str, str]:
        padded, pad, copy = self.fresh("padded"), self.fresh("pad"), self.fresh("copy")
        values = ", ".join(_padding_value(t) for t in element_types)
        nofold = [0] * (len(element_types) - 1) + [1]
        self.emit(f"{padded}, {pad}, {copy} = transform.structured.pad {handle} {{padding_values = "
                  f"[{values}], padding_dimensions = {list(range(n_dims))}, nofold_flags = {nofold}, "
                  f'copy_back_op = "linalg.copy"}} : ({ANY}) -> ({ANY}, {ANY}, {ANY})')
        return padded, copy

    def pad_input(self, handle: str, element_types: list[str], n_dims: int, operand: int) -> str:
        """``cache_read``: a ``tensor.pad nofold`` copy of input ``operand`` (others unpadded)."""
        padded, pad, copy = self.fresh("padded"), self.fresh("pad"), self.fresh("copy")
        values = ", ".join(_padding_value(t) for t in element_types)
        nofold = [int(x == operand) for x in range(len(element_types))]
        self.emit(f"{padded}, {pad}, {copy} = transform.structured.pad {handle} {{padding_values = "
                  f"[{values}], padding_dimensions = {list(range(n_dims))}, nofold_flags = {nofold}, "
                  f'copy_back_op = "none"}} : ({ANY}) -> ({ANY}, {ANY}, {ANY})')
        return padded

    def to_destination_style(self, pad: str) -> str:
        """A ``tensor.pad`` without padding becomes ``alloc_tensor`` + ``linalg.copy``."""
        copy = self.fresh("copy")
        self.emit(f"{copy} = transform.structured.rewrite_in_destination_passing_style {pad} : "
                  f"({ANY}) -> {ANY}")
        return copy

    def tile_reduction(self, handle: str, sizes: list[int], parallel: bool) -> tuple[str, str, str]:
        """``rfactor``: split reduction; returns (fill of the partials, partial op, combining op)."""
        fill, split, combine, loop = (self.fresh(p) for p in ("fill", "rf", "combine", "loop"))
        op, by = ("tile_reduction_using_forall", "num_threads") if parallel else (
            "tile_reduction_using_for", "tile_sizes")
        self.emit(f"{fill}, {split}, {combine}, {loop} = transform.structured.{op} {handle} by "
                  f"{by} = {sizes} : ({ANY}) -> ({ANY}, {ANY}, {ANY}, {ANY})")
        return fill, split, combine

    def annotate(self, handle: str, tag: str, attribute: str = BLOCK_ATTR) -> None:
        param = self.fresh("name")
        self.emit(f'{param} = transform.param.constant "{tag}" -> !transform.any_param')
        self.emit(f'transform.annotate {handle} "{attribute}" = {param} : {ANY}, !transform.any_param')

    def pack(self, handle: str, sizes: list[int]) -> str:
        packed = self.fresh("packed")
        self.emit(f"{packed} = transform.structured.pack {handle} packed_sizes = {sizes} : "
                  f"({ANY}) -> ({ANY})")
        return packed

    def producer_of_operand(self, handle: str, operand: int) -> str:
        producer = self.fresh("producer")
        self.emit(f"{producer} = transform.get_producer_of_operand {handle}[{operand}] : "
                  f"({ANY}) -> {ANY}")
        return producer

    def consumers_of_result(self, handle: str, result: int = 0) -> str:
        consumers = self.fresh("consumer")
        self.emit(f"{consumers} = transform.get_consumers_of_result {handle}[{result}] : "
                  f"({ANY}) -> {ANY}")
        return consumers

    def pack_transpose(self, pack: str, compute: str, outer: list[int], inner: list[int]) -> tuple[str, str]:
        new_compute, new_pack, _unpack = self.fresh("packed"), self.fresh("pack"), self.fresh("unpack")
        perms = (f" outer_perm = {outer}" if outer else "") + (f" inner_perm = {inner}" if inner else "")
        self.emit(f"{new_compute}, {new_pack}, {_unpack} = transform.structured.pack_transpose {pack} "
                  f"with_compute_op({compute}){perms} : ({ANY}, {ANY}) -> ({ANY}, {ANY}, {ANY})")
        return new_compute, new_pack

    def lower_pack(self, pack: str) -> str:
        cast, pad, expand, transpose = (self.fresh(p) for p in ("pack", "pad", "expand", "transpose"))
        self.emit(f"{cast} = transform.cast {pack} : {ANY} to {_PACK}")
        self.emit(f"{pad}, {expand}, {transpose} = transform.structured.lower_pack {cast} : ({_PACK}) -> "
                  '(!transform.op<"tensor.pad">, !transform.op<"tensor.expand_shape">, '
                  '!transform.op<"linalg.transpose">)')
        result = self.fresh("transpose")
        self.emit(f'{result} = transform.cast {transpose} : !transform.op<"linalg.transpose"> to {ANY}')
        return result

    def lower_unpack(self, unpack: str) -> str:
        """Lower a reshape-only ``linalg.unpack``; returns the ``linalg.copy`` it leaves."""
        cast = self.fresh("unpack")
        names = [self.fresh(p) for p in ("empty", "transpose", "collapse", "slice")]
        self.emit(f"{cast} = transform.cast {unpack} : {ANY} to {_UNPACK}")
        self.emit(f"{', '.join(names)} = transform.structured.lower_unpack {cast} : ({_UNPACK}) -> "
                  '(!transform.op<"tensor.empty">, !transform.op<"linalg.transpose">, '
                  '!transform.op<"tensor.collapse_shape">, !transform.op<"tensor.extract_slice">)')
        slice_any = self.fresh("slice")
        self.emit(f'{slice_any} = transform.cast {names[3]} : !transform.op<"tensor.extract_slice"> to {ANY}')
        return self.consumers_of_result(slice_any)

    def vectorize_sized(self, handle: str, sizes: list[int] | None) -> None:
        if sizes:
            self.emit(f"transform.structured.vectorize {handle} vector_sizes {sizes} : {ANY}")
        else:
            self.vectorize(handle)

    def coalesce(self, loop: str) -> str:
        fused = self.fresh("fused_loop")
        self.emit(f"{fused} = transform.loop.coalesce {loop} : ({ANY}) -> ({ANY})")
        return fused

    def unroll(self, loop: str, factor: int) -> None:
        self.emit(f"transform.loop.unroll {loop} {{factor = {factor}}} : {ANY}")


def _interchange(order: list[int], n_dims: int) -> list[int]:
    return order + [d for d in range(n_dims) if d not in order]


def _implicit_ok(block: BlockRV, suffix: list[LoopRV]) -> bool:
    """Can ``suffix`` stay inside the op (its loops in the op's dim order, one loop per dim)?

    A dim split over two loops of the suffix cannot: left inside the op, ``split``'s loops
    would be the op's single loop again, so a lone ``split`` (its loops still in dim order)
    would change neither the script nor ``show()`` until a later primitive moved them. The
    outer part becomes a real ``scf.for``, as TVM prints the split loops at once."""
    seen: list[int] = []
    loops_of: dict[int, int] = {}
    for loop in suffix:
        for part in loop.parts:
            loops_of[part.dim] = loops_of.get(part.dim, 0) + 1
            if loops_of[part.dim] > 1:
                return False
    for loop in suffix:
        for part in loop.parts:
            if part.extent == 1:
                continue
            if seen and seen[-1] == part.dim:
                continue
            if part.dim in seen:
                return False
            seen.append(part.dim)
    return seen == sorted(seen)


def materialized_count(block: BlockRV, loops: "list[LoopRV] | None" = None) -> int:
    """How many of ``block``'s loops (outermost first; or of ``loops``, a prefix of them)
    become real loops; the rest stay in the op."""
    loops = block.loops if loops is None else loops
    must = -1
    vectorized = [i for i, loop in enumerate(loops) if loop.kind == VECTORIZED]
    for i, loop in enumerate(loops):
        if loop.kind in (PARALLEL, UNROLLED) or loop.attached or (
            len(loop.parts) > 1 and loop.kind != VECTORIZED
        ):
            must = i
    if vectorized:
        must = max(must, vectorized[0] - 1)
    if block.inlined:
        must = max(must, len(loops) - 1 - len(vectorized))
    while must + 1 < len(loops) and not _implicit_ok(block, loops[must + 1:]):
        must += 1
    return must + 1


def gathers(block: BlockRV) -> bool:
    """Whether the block reads with an indexed ``tensor.extract`` (a guarded or data-dependent
    load, see te.compute): the vectorizer does not turn those into vector loads."""
    body = getattr(block.op, "body", ()) or ()
    return any(entry.startswith("tensor.extract(") and "," in entry.split(")")[0] for entry in body)


def _vectorizable(block: BlockRV) -> bool:
    """Whether ``structured.vectorize`` can take the block: no gathers, and every operand
    indexed by plain loop dims (a convolution window ``d2 + d5`` is not)."""
    return not gathers(block) and all(r.kind in ("dim", "const") for results in block.maps for r in results)


def _partial_dims(block: BlockRV) -> set[int]:
    """Dims whose tiles may be smaller than their stride: split with ``pad=True``, or of a
    symbolic extent (whose tiles have dynamic shapes even when unsplit)."""
    return {p.dim for loop in block.loops for p in loop.parts if p.partial} | {
        d for d, dim in enumerate(block.dims) if is_symbolic(dim.extent)}


class Renderer:
    """Walks the state and writes the script; see the module docstring for the order.

    *Levels*: the loop handles in which a tile of the current op reads slices of its operands
    (the innermost loop of each tiling, or the loop a tile was fused into). A producer is
    fused level by level down to its loop, because ``fuse_into_containing_op`` looks for the
    slices of the producer's result directly inside the containing loop.
    """

    def __init__(self, state: State, header: list[str]) -> None:
        self.state = state
        self.header = header
        self.w = ScriptWriter()
        self.op_handles: dict[int, str] = {}
        self.renamed: dict[str, str] = {}
        # Finishing actions, in pre-order: ("vectorize", op, sizes) | ("coalesce", loop, unroll)
        # | ("unroll", loop, factor). Handles are resolved when the script is written.
        self.finishing: list[tuple] = []

    def resolve(self, handle: str) -> str:
        while handle in self.renamed:
            handle = self.renamed[handle]
        return handle

    # -- the walk --------------------------------------------------------------------------

    def render(self) -> str:
        for block in self.state.blocks:
            if block.op is not None and block.kind in ("op", "init", "copy"):
                self.op_handles[block.uid] = self.w.match_block(block.op.tag)
        for block in self.state.blocks:
            if self._is_root(block):
                self.render_block(block, self.op_handles[block.uid], [])
        for action in reversed(self.finishing):
            kind = action[0]
            if kind == "vectorize":
                handle = self.resolve(action[1])
                if len(action) > 3 and action[3]:
                    # 2-D convolutions and pooling vectorize as their 1-D forms.
                    handle = self.w.decompose(handle)
                self.w.vectorize_sized(handle, action[2])
            elif kind == "coalesce":
                fused = self.w.coalesce(self.resolve(action[1]))
                if action[2] > 1:
                    self.w.unroll(fused, action[2])
            elif kind == "unroll":
                self.w.unroll(self.resolve(action[1]), action[2])
        funcs = self.w.fresh("funcs")
        self.w.emit(f'{funcs} = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}')
        if any(action[0] == "vectorize" and action[2] for action in self.finishing):
            # Masked (partial-tile) vectors: masks on the transfers, before bufferization.
            self.w.emit(f"transform.apply_patterns to {funcs} {{ "
                        f"transform.apply_patterns.vector.lower_masked_transfers }} : {ANY}")
        # Hoist before @cleanup's subset folding: an unrolled block of rows reads and writes
        # one slice of the cache per row; folded first, the first row's read goes to the
        # loop's whole iter_arg and no (extract, insert) pair matches, so the rows' tile
        # stayed in memory across the reduction loop instead of in vector registers.
        loops = self.w.fresh("loops")
        self.w.emit(f'{loops} = transform.structured.match ops{{["scf.for"]}} in %root : ({ANY}) -> {ANY}')
        self.w.emit(f"transform.foreach {loops} : {ANY} {{")
        self.w.emit(f"^bb0(%loop: {ANY}):")
        self.w.emit(f"  transform.loop.hoist_loop_invariant_subsets %loop : {ANY}")
        self.w.emit("}")
        self.w.emit(f"transform.include @cleanup failures(propagate) (%root) : ({ANY}) -> ()")
        self.w.emit(f"transform.apply_cse to {funcs} : {ANY}")
        text = "\n".join(f"    {line}" for line in self.w.lines)
        header = "".join(f"// {line}\n" for line in self.header)
        return (
            f"{header}module attributes {{transform.with_named_sequence}} {{\n"
            f"  transform.named_sequence @__transform_main(%root: {ANY} {{transform.readonly}}) {{\n"
            f"{text}\n    transform.yield\n  }}\n{CLEANUP_SEQUENCE}\n}}\n"
        )

    def _is_root(self, block: BlockRV) -> bool:
        return not (block.removed or block.attach is not None
                    or block.kind in ("cache", "pack", "unpack", "read", "rf"))

    def fuse_chain(self, producer: str, levels: list[str]) -> str:
        """Fuse ``producer`` into each level in turn; returns the innermost fused tile."""
        for i, level in enumerate(levels):
            producer, new_level = self.w.fuse_into_loop(producer, self.resolve(level))
            self.renamed[self.resolve(level)] = new_level
            levels[i] = new_level
        return producer

    def render_block(self, block: BlockRV, handle: str, base: list[str]) -> None:
        w = self.w
        w.comment(f"block {block.name}")
        levels = list(base)
        if block.layout is not None:
            handle = self._render_layout(block, handle)
        n_dims = len(block.dims)
        dim_map = list(range(n_dims))
        op_dims = n_dims
        cache = block.cache
        if cache is not None:
            # Until the cache is made, the copy-out's loops tile the compute op.
            dim_map = [r.value for r in cache.output_map]
            op_dims = len(cache.dims)
            if cache.attach is None:
                handle = self._render_cache(block, handle, levels)
                dim_map, op_dims = list(range(n_dims)), n_dims
        init = block.init_block if (
            block.init_block is not None and block.init_block.attach is not None
            and block.init_block.attach.mode == "init"
        ) else None
        init_handle = self.op_handles.get(init.uid) if init is not None else None
        decompose_until = block.loops.index(init.attach.loop) if init is not None else -1
        consumer, reverse_loop = block.reverse if block.reverse else (None, None)
        reverse_until = block.loops.index(reverse_loop) if reverse_loop is not None else -1
        consumer_handle = self.op_handles.get(consumer.uid) if consumer is not None else None
        consumer_levels: list[str] = []
        if consumer is not None:
            operand = next(i for i, p in enumerate(consumer.producers) if p is block)
            consumer_map = [r.value for r in consumer.maps[operand]]
            out_positions = {r.value: position for position, r in enumerate(block.output_map)}

        rf = block.rfactor
        count = materialized_count(block, block.loops[:-2] if rf is not None else None)
        if block.tensorized is not None:
            count = len(block.loops)  # every loop outside the tile is a real loop
        for read in block.reads:
            if read.attach is None:
                handle = self._render_read(block, read, handle)
        index = 0
        while index < count:
            loop = block.loops[index]
            if loop.extent == 1 and loop.kind != PARALLEL and not loop.attached:
                index += 1
                continue
            if index <= reverse_until:
                group = self._bound_group(block, index, reverse_until + 1) or [loop]
                mapped = [[consumer_map[out_positions[p.dim]] for p in loop.parts]]
                consumer_handle, inner, _outer = self._tile(
                    consumer_handle, group, mapped, len(consumer.dims), fuse=False)
                levels.append(inner)
            else:
                decompose = index <= decompose_until
                if decompose:
                    group = self._bound_group(block, index, decompose_until + 1) or [loop]
                else:
                    group = self._group(block, index, count)
                mapped = [[dim_map[p.dim] for p in l.parts] for l in group]
                handle, inner, outer = self._tile(handle, group, mapped, op_dims,
                                                  fuse=decompose and loop.kind != PARALLEL)
                levels.append(inner)
                if decompose and init_handle is not None:
                    if loop.kind == PARALLEL:
                        init_handle, levels[-1] = w.fuse_into_loop(init_handle, inner)
                        self.renamed[inner] = levels[-1]
                    else:
                        init_handle = w.match_block(init.name, outer)
            index += len(group)
            last = group[-1]
            if block.loops.index(last) == reverse_until:
                consumer_levels = list(levels)
                handle = self.fuse_chain(handle, consumer_levels)
                if init_handle is not None:
                    # decompose_reduction at or inside the reverse loop: the init follows the
                    # producer into the consumer's loops (it feeds only the producer's tile).
                    init_handle = self.fuse_chain(init_handle, consumer_levels)
                levels = [consumer_levels[-1]]
                dim_map = list(range(n_dims))
            for attached in last.attached:
                mode = attached.attach.mode
                if mode == "compute_at":
                    fused = self.fuse_chain(self.op_handles[attached.uid], levels)
                    self.render_block(attached, fused, [levels[-1]])
                elif mode == "cache":
                    handle = self._render_cache(block, handle, levels)
                    dim_map, op_dims = list(range(n_dims)), n_dims
                elif mode == "init":
                    self.render_block(attached, init_handle, [levels[-1]])
                elif mode == "read":
                    handle = self._render_read(block, attached, handle)

        if rf is not None:
            handle = self._render_rfactor(block, handle, dim_map, op_dims)
        if block.tensorized is not None:
            # The tile op, for tilecraft-tensorize to replace after bufferization.
            self.w.annotate(handle, block.tensorized.extern, TENSORIZE_ATTR)

        partial = _partial_dims(block)
        vectorized = bool(block.loops) and block.loops[-1].kind == VECTORIZED and count < len(block.loops)
        if block.inlined:
            if len(levels) == len(base):
                # A one-trip loop to hold the fused producer; canonicalization removes it.
                sizes = [0] * op_dims
                first = block.loops[-1].parts[0].dim
                sizes[dim_map[first]] = self._vector_sizes(block, count)[first]
                handle, loops = w.tile_loops(handle, sizes, None)
                levels.append(loops[0])
            # compute_inline vectorizes the fused pair when both can be (a gather or a
            # convolution window keeps scalar loops: still inlined, recomputed per tile)
            inline_vectors = _vectorizable(block) and all(_vectorizable(p) for p in block.inlined)
            for producer in block.inlined:
                fused = self.fuse_chain(self.op_handles[producer.uid], levels)
                if inline_vectors:
                    self.finishing.append(("vectorize", fused, None))
        if vectorized or (block.inlined and inline_vectors):
            sizes = self._vector_sizes(block, count) if partial else None
            decompose = block.op is not None and block.op.op_name in DECOMPOSABLE and block.kind == "op"
            self.finishing.append(("vectorize", handle, sizes, decompose))
        if block.layout is not None:
            for derived in (block.layout.pack_block, block.layout.unpack_block):
                if derived is not None and derived.attach is None:
                    self.render_block(derived, self.op_handles[derived.uid], [])
        if consumer is not None:
            self.render_block(consumer, consumer_handle, consumer_levels)

    def _vector_sizes(self, block: BlockRV, count: int) -> list[int]:
        sizes = []
        for d, dim in enumerate(block.dims):
            size = dim.extent
            for loop in block.loops[:count]:
                for part in loop.parts:
                    if part.dim == d:
                        size = part.stride
            sizes.append(size)
        return sizes

    @staticmethod
    def _bound_group(block: BlockRV, start: int, stop: int) -> list[LoopRV]:
        """Consecutive loops bound to block axes (or to thread axes) on distinct dims, from
        ``start``: one ``tile_using_forall`` with a mapping makes them (nested block foralls
        could not be mapped onto one grid)."""
        first = block.loops[start]
        if first.thread_axis is None:
            return []
        kind = first.thread_axis.split(".")[0]
        group: list[LoopRV] = []
        dims: set[int] = set()
        for loop in block.loops[start:stop]:
            if (loop.thread_axis or "").split(".")[0] != kind or loop.parts[0].dim in dims:
                break
            group.append(loop)
            dims.add(loop.parts[0].dim)
            if loop.attached:
                break
        return group

    @staticmethod
    def _group(block: BlockRV, start: int, count: int) -> list[LoopRV]:
        """Consecutive plain serial loops on distinct dims: one ``tile_using_for`` makes them;
        consecutive bound loops of one kind: one mapped ``tile_using_forall``."""
        bound = Renderer._bound_group(block, start, count)
        if bound:
            return bound
        group: list[LoopRV] = []
        dims: set[int] = set()
        for loop in block.loops[start:count]:
            if loop.kind not in (SERIAL, UNROLLED) or len(loop.parts) != 1 or loop.parts[0].dim in dims:
                break
            if loop.extent == 1 and group:
                break
            group.append(loop)
            dims.add(loop.parts[0].dim)
            if loop.attached:
                break
        return group or [block.loops[start]]

    def _tile(self, handle: str, loops: list[LoopRV], dims: list[list[int]], n_dims: int,
              fuse: bool) -> tuple[str, str, str]:
        """Materialize ``loops`` (their parts on op ``dims``): several single-part serial
        loops, or one loop (fused: several parts). Returns (tiled op, innermost loop, outer loop)."""
        sizes = [0] * n_dims
        order: list[int] = []
        for loop, loop_dims in zip(loops, dims):
            for part, d in zip(loop.parts, loop_dims):
                sizes[d] = part.stride
                order.append(d)
        if loops[0].thread_axis is not None:
            tiled, forall = self.w.tile_bound(handle, sizes, loops, dims)
            return tiled, forall, forall
        if loops[0].kind == PARALLEL:
            tiled, forall = self.w.tile_parallel(handle, sizes)
            return tiled, forall, forall
        interchange = _interchange(order, n_dims) if len(order) > 1 else None
        tiled, handles = self.w.tile_loops(handle, sizes, interchange, fuse=fuse)
        if len(loops) == 1 and len(handles) > 1:
            # A fused loop: its tile loops are coalesced at the end.
            unroll = loops[0].extent if loops[0].kind == UNROLLED else 0
            self.finishing.append(("coalesce", handles[0], unroll))
        else:
            for loop, loop_handle in zip(loops, handles):
                if loop.kind == UNROLLED and loop.extent > 1:
                    self.finishing.append(("unroll", loop_handle, loop.extent))
        return tiled, handles[-1], handles[0]

    def _render_cache(self, copy_block: BlockRV, handle: str, levels: list[str]) -> str:
        """``cache_write``: pad the op's output with a copy back; the op computes into a new tensor."""
        cache = copy_block.cache
        padded, copy = self.w.pad_output(handle, cache.element_types, len(cache.dims))
        self.w.annotate(copy, copy_block.name)
        self.w.annotate(padded, cache.name)
        self.render_block(cache, padded, levels)
        return copy

    def _render_read(self, block: BlockRV, read: BlockRV, handle: str) -> str:
        """``cache_read``: pad the (tiled) op's operand with ``nofold`` and no padding, then
        rewrite that pad in destination-passing style: a ``linalg.copy`` into a new tensor
        (``bufferization.alloc_tensor``), tagged as the cache."""
        operand = read.read_of[1]
        padded = self.w.pad_input(handle, block.element_types, len(block.dims), operand)
        copy = self.w.to_destination_style(self.w.producer_of_operand(padded, operand))
        self.w.annotate(copy, read.name)
        self.w.annotate(padded, block.name)
        return padded

    def _render_rfactor(self, block: BlockRV, handle: str, dim_map: list[int], op_dims: int) -> str:
        """``rfactor``: the split reduction of the (tiled) op; the combining op keeps the name."""
        rf = block.rfactor
        sizes = [0] * op_dims
        loop = rf.outer if rf.parallel else rf.inner
        sizes[dim_map[rf.dim]] = loop.extent
        fill, split, combine = self.w.tile_reduction(handle, sizes, rf.parallel)
        self.w.annotate(fill, f"{rf.rf_block.name}.init")
        self.w.annotate(split, rf.rf_block.name)
        self.w.annotate(combine, block.name)
        return combine

    def _render_layout(self, block: BlockRV, handle: str) -> str:
        """``transform_layout``: pack the op, transpose the pack, lower packs to data movement."""
        w = self.w
        layout = block.layout
        packed = w.pack(handle, layout.packed_sizes)
        pack = w.producer_of_operand(packed, layout.operand)
        if layout.outer_perm or layout.inner_perm:
            packed, pack = w.pack_transpose(pack, packed, layout.outer_perm, layout.inner_perm)
        transpose = w.lower_pack(pack)
        w.annotate(transpose, layout.pack_block.name)
        self.op_handles[layout.pack_block.uid] = transpose
        for operand in layout.other_packed_inputs:
            w.lower_pack(w.producer_of_operand(packed, operand))
        if layout.unpack_block is not None:
            copy = w.lower_unpack(w.consumers_of_result(packed))
            w.annotate(copy, layout.unpack_block.name)
            self.op_handles[layout.unpack_block.uid] = copy
        w.annotate(packed, block.name)
        return packed


def render(state: State, header: list[str]) -> str:
    return Renderer(state, header).render()
