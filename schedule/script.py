"""Plans rendered as transform-dialect scripts: one ``transform.named_sequence`` per op
(``@schedule_op_<tag>``) or fusion group (``@schedule_group_<tag>``), each finding its op by
the ``tilecraft.op_id`` tag, and ``@cleanup``, which hoists loop-invariant vector transfers
(the matmul accumulators out of the reduction loop). The TE-style API (te/render.py) and the
GPU schedule (cuda.py) write with the same :class:`ScriptWriter`.
"""

from __future__ import annotations

from typing import Callable

from .conv_kernels import render_accumulator_epilogue
from .op_schedule import TAG, GroupSchedule, OpSchedule


class ScriptWriter:
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
        return self.tile_for_loops(handle, sizes, interchange)[0]

    def tile_for_loops(self, handle: str, sizes: tuple[int, ...],
                       interchange: tuple[int, ...] | None = None) -> tuple[str, dict[int, str]]:
        """``tile_for``; also returns the handle of each loop it creates, by the op's loop
        (dim) it tiles."""
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
        nesting = [d for d in (interchange or range(len(sizes))) if d < len(sizes) and sizes[d]]
        nesting += [d for d in range(len(sizes)) if sizes[d] and d not in nesting]
        handles = {d: (f"{loops}#{i}" if n_loops > 1 else loops) for i, d in enumerate(nesting)}
        return tiled, handles

    def tile_for_outer(self, handle: str, sizes: tuple[int, ...]) -> tuple[str, str]:
        """``tile_using_for``; returns (tiled op, outermost loop): the container that a
        sequential group's producers are fused into."""
        n_loops = sum(1 for s in sizes if s)
        tiled, loops = self.fresh("tiled"), self.fresh("loops")
        results = ", ".join([self.ANY] * (n_loops + 1))
        loops_decl = f"{loops}:{n_loops}" if n_loops > 1 else loops
        self.lines.append(f"{tiled}, {loops_decl} = transform.structured.tile_using_for {handle} "
                          f"tile_sizes {list(sizes)} : ({self.ANY}) -> ({results})")
        return tiled, f"{loops}#0" if n_loops > 1 else loops

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

    def peel_partial_tiles(self, loops: list[str], tag: int) -> str:
        """Peel the last, partial iteration off each of ``loops`` (scf.for handles, innermost
        first) and return a handle to every copy of the op tagged ``tag`` in the loops'
        parent: the op in the main loops, on whole tiles, and in the remainders.

        ``transform.loop.peel`` rewrites the tile sizes (``affine.min``) of both parts to
        constants when the bounds are static; canonicalization then gives the tiled ops
        static shapes, which the vectorizer needs (the remainder becomes a smaller static
        tile: vector code too, not scalar). Ops are found again by tag because peeling
        clones the loop body. The outermost loop's parent is the region both parts live in;
        patterns apply to its body only, so its own handle stays valid.
        """
        outermost = loops[-1]
        parent = self.fresh("parent")
        self.lines.append(f"{parent} = transform.get_parent_op {outermost} : ({self.ANY}) -> {self.ANY}")
        for loop in loops:
            cast, main, rest = self.fresh("for"), self.fresh("main"), self.fresh("rest")
            self.lines.append(f'{cast} = transform.cast {loop} : {self.ANY} to !transform.op<"scf.for">')
            self.lines.append(f'{main}, {rest} = transform.loop.peel {cast} : (!transform.op<"scf.for">)'
                              f" -> ({self.ANY}, {self.ANY})")
        self.lines.append(f"transform.apply_patterns to {parent} {{\n"
                          "      transform.apply_patterns.canonicalization\n"
                          f"    }} : {self.ANY}")
        ops = self.fresh("op")
        self.lines.append(f'{ops} = transform.structured.match attributes{{"{TAG}" = {tag} : i64}} '
                          f"in {parent} : ({self.ANY}) -> {self.ANY}")
        return ops

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
    w = ScriptWriter()
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
    w = ScriptWriter()
    if group.sequential:
        # scf.for, not scf.forall: a forall with shared outputs cannot be turned into loops
        # before bufferization (transform.loop.forall_to_for), and as a parallel loop each
        # tile would be an async task. Producers fuse into an scf.for alike.
        root, forall = w.tile_for_outer(w.match_tag(group.root.tag), group.root.thread_tiles or ())
    else:
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
    unique_handles = []
    for handle, producer in fused:
        # After CSE a producer fused twice is one op the handle lists twice.
        unique = w.fresh("unique")
        w.lines.append(f"{unique} = transform.merge_handles deduplicate {handle} : {w.ANY}")
        unique_handles.append((unique, producer))
    if group.accumulator_tiles:
        render_accumulator_epilogue(w, root, unique_handles, group.root.vectorize,
                                    group.accumulator_tiles, group.accumulator_interchange,
                                    group.anchor_tag, render_inner_levels,
                                    "scf.for" if group.sequential else "scf.forall",
                                    root_tag=group.root.tag)
        return named_sequence(group.sequence_name, w)
    for unique, producer in unique_handles:
        render_inner_levels(w, unique, producer)
    render_inner_levels(w, root, group.root)
    return named_sequence(group.sequence_name, w)


def named_sequence(name: str, w: "ScriptWriter") -> str:
    """``w``'s lines as ``transform.named_sequence @<name>`` over ``%root``."""
    body = "\n".join(f"    {line}" for line in w.lines)
    return (
        f"  transform.named_sequence @{name}(%root: !transform.any_op "
        "{transform.readonly}) {\n" + body + "\n    transform.yield\n  }"
    )


def render_inner_levels(w: "ScriptWriter", op: str, plan: OpSchedule) -> None:
    """The levels of ``plan`` inside its thread tile: cache, outer register, packing,
    register, reduction tiles, decomposition and vectorization of the op ``op`` names."""
    if plan.cache_tiles and any(plan.cache_tiles):
        op = w.tile_for(op, plan.cache_tiles, plan.cache_interchange)
    # The loops of the peeled dims (``plan.peeled_loops``), outermost first.
    partial: list[str] = []
    if plan.outer_register_tiles and any(plan.outer_register_tiles):
        op, loops = w.tile_for_loops(op, plan.outer_register_tiles)
        partial += [loops[d] for d in loops if d in plan.peeled_loops]
    if plan.packed_operands:
        n_loops = len(plan.register_tiles or plan.reduction_tiles or plan.cache_tiles or ())
        op = w.pack_operands(op, plan.packed_operands, n_loops)
    if plan.register_tiles:
        op, loops = w.tile_for_loops(op, plan.register_tiles, plan.register_interchange)
        partial += [loops[d] for d in loops if d in plan.peeled_loops]
    if plan.reduction_tiles:
        op = w.tile_for(op, plan.reduction_tiles)
    if partial:
        op = w.peel_partial_tiles(partial[::-1], plan.tag)
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
