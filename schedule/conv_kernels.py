"""Epilogues of convolutions applied to the accumulator tile (the conv's register tile).

The default plan (``conv_plan.py`` ``plan_convolution``, ``conv_register_tile``) tiles a
non-depthwise NHWC convolution down to a register tile (output pixels x two vectors of output
channels where the register file holds them); ``decompose`` and
``vectorize`` turn it into outer-product FMAs with one operand broadcast, and ``@cleanup``
(script.py) keeps the accumulators in vector registers over kh x kw x input channels.
This module makes the ops after the conv in its fusion group (bias, folded batch norm,
residual add, ReLU) run on those accumulators before their one store: see below.

A 14-pixel x 2-vector tile (28 accumulators) measured slower on the whole ResNet-50
(docs/performance.md, "Convolution micro-kernels"); the 7-8 pixel x 2-vector tile of
``conv_register_tile`` (14-16 accumulators, no spill) measured faster than one vector
(docs/performance.md, "Round 3").
"""

from __future__ import annotations

from .op_schedule import TAG


# ---- epilogues on the accumulator tile ------------------------------------------------------
#
# A fusion group "conv -> bias / folded batch norm -> residual add -> ReLU" (schedule/group.py)
# is one scf.forall per task (a sequential group: one scf.for band of rows), but inside a
# task each op had its own loop nest: the conv wrote
# its whole task tile to a scratch tensor, the epilogue ops read it back. Here the group's
# root is tiled once more, by the conv's register tile (the same loop order), and the
# epilogue ops, the conv and its zero fill are fused into that innermost loop: each register
# tile is computed (the reduction loops inside), then biased, added and rectified while still
# in vector registers, and stored once. After vectorization the tile's intermediate tensors
# are transfer_write / transfer_read pairs on the same slice, which fold away.


def epilogue_register_tiles(anchor_tiles: tuple[int, ...], anchor_output_dims: tuple[int | None, ...],
                            anchor_interchange: tuple[int, ...] | None,
                            root_output_dims: tuple[int | None, ...], root_loops: int
                            ) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """The root's register tiles (and loop order) carrying the anchor's register tile: output
    dim by output dim, the anchor's tile of the loop indexing it. ``None`` when an output dim
    is not a plain loop on either side."""
    if len(anchor_output_dims) != len(root_output_dims):
        return None
    tiles = [0] * root_loops
    anchor_to_root: dict[int, int] = {}
    for a, r in zip(anchor_output_dims, root_output_dims):
        if a is None or r is None:
            return None
        tiles[r] = anchor_tiles[a]
        anchor_to_root[a] = r
    if any(t == 0 for t in tiles):
        return None
    order = None
    if anchor_interchange:
        order = tuple(anchor_to_root[a] for a in anchor_interchange if a in anchor_to_root)
        if sorted(order) != list(range(root_loops)):
            return None
    return tuple(tiles), order


def render_accumulator_epilogue(w, root: str, fused: list, root_vectorize: bool,
                                tiles: tuple[int, ...], interchange: tuple[int, ...] | None,
                                anchor_tag: int, render_levels, task_loop: str = "scf.forall",
                                root_tag: int | None = None) -> None:
    """Tile ``root`` (inside its task) by ``tiles``, fuse the group's producers (``fused``:
    (handle, plan) pairs, consumers first) into the innermost loop, then give each its inner
    levels (``render_levels(w, handle, plan)``). ``task_loop``: the op name of the group's
    task loop (``scf.for`` for a sequential group's band). ``w`` is script.py's ScriptWriter.
    ``root_tag``: the root's tag, needed to find it again where the anchor's pixel tile does
    not divide its row and the tile loop is peeled (``_peel_pixel_loop``)."""
    n_loops = sum(1 for t in tiles if t)
    tiled, loops = w.fresh("tiled"), w.fresh("loops")
    results = ", ".join([w.ANY] * (n_loops + 1))
    order = (f" interchange = {list(interchange)}"
             if interchange and list(interchange) != sorted(interchange) else "")
    w.lines.append(f"{tiled}, {loops}:{n_loops} = transform.structured.tile_using_for {root} "
                   f"tile_sizes {list(tiles)}{order} : ({w.ANY}) -> ({results})")
    loop = f"{loops}#{n_loops - 1}"
    # The task's loop, taken before vectorization consumes the handles inside it.
    task = w.fresh("task")
    if task_loop == "scf.forall":
        w.lines.append(f'{task} = transform.get_parent_op {tiled} {{op_name = "scf.forall"}}'
                       f" : ({w.ANY}) -> {w.ANY}")
    else:  # the band loop: the register-tile loops just made are scf.for too
        w.lines.append(f"{task} = transform.get_parent_op {tiled} {{nth_parent = {n_loops + 1}}}"
                       f" : ({w.ANY}) -> {w.ANY}")
    inner = []
    for handle, plan in fused:
        if plan.vectorize or plan.tag == anchor_tag or plan.decompose:
            moved, loop = w.fuse_into(handle, loop)
            inner.append((moved, plan))
    peel = _peeled_position(fused, anchor_tag)
    if peel is not None and root_tag is not None:
        inner, tiled = _peel_pixel_loop(w, inner, anchor_tag, root_tag, n_loops - peel)
    for handle, plan in inner:
        if plan.tag == anchor_tag:
            render_levels(w, handle, _reduction_only(plan))
        else:
            w.vectorize(handle)
    if root_vectorize:
        w.vectorize(tiled)
    # The conv's vectors drop the image-row dim its decomposition removed (vector<1x14x32>
    # where the epilogue has vector<1x1x14x32>). First @cleanup's folds and hoisting, here on
    # the task alone, so the accumulators are loop-carried vectors; then the leading unit
    # dims cast away, so that each transfer_read of a transfer_write on the tile (the zero
    # fill read as the first accumulators, the accumulators read by the epilogue) has the
    # written vector's shape and folds to it: no store and reload of the tile.
    w.lines.append(f"transform.apply_patterns to {task} {{\n"
                   "      transform.apply_patterns.vector.reduction_to_contract\n"
                   "      transform.apply_patterns.vector.transfer_permutation_patterns\n"
                   "      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers\n"
                   "      transform.apply_patterns.canonicalization\n"
                   f"    }} : {w.ANY}")
    task_loops = w.fresh("taskloops")
    w.lines.append(f'{task_loops} = transform.structured.match ops{{["scf.for"]}} in {task}'
                   f" : ({w.ANY}) -> {w.ANY}")
    w.lines.append(f"transform.apply_licm to {task_loops} : {w.ANY}")
    w.lines.append(f"transform.foreach {task_loops} : {w.ANY} {{\n"
                   f"    ^bb0(%loop: {w.ANY}):\n"
                   f"      transform.loop.hoist_loop_invariant_subsets %loop : {w.ANY}\n"
                   "    }")
    w.lines.append(f"transform.apply_patterns to {task} {{\n"
                   "      transform.apply_patterns.vector.cast_away_vector_leading_one_dim\n"
                   "      transform.apply_patterns.canonicalization\n"
                   f"    }} : {w.ANY}")


def _peeled_position(fused: list, anchor_tag: int) -> int | None:
    """Where, among the accumulator tile's loops (outermost first), the loop of the anchor's
    peeled pixel dim (its plan's ``peeled_loops``) runs, or ``None`` when its tiles divide.
    The root's tile loops carry the anchor's output loops in the anchor's order
    (``epilogue_register_tiles``). Should a root's output dims run in another order, the
    loop peeled here divides its extent, ``transform.loop.peel`` fails, and the group falls
    back to its ops' own plans (``GroupSchedule.fallback``): slower, not wrong."""
    plan = next((plan for _handle, plan in fused if plan.tag == anchor_tag), None)
    if plan is None or not plan.peeled_loops or not plan.register_tiles:
        return None
    tiles = plan.register_tiles
    order = [d for d in (plan.register_interchange or range(len(tiles))) if d < len(tiles) and tiles[d]]
    order += [d for d in range(len(tiles)) if tiles[d] and d not in order]
    return order.index(plan.peeled_loops[0]) if plan.peeled_loops[0] in order else None


def _peel_pixel_loop(w, inner: list, anchor_tag: int, root_tag: int, nth_parent: int) -> tuple[list, str]:
    """Peel the partial last pixel tile off the accumulator tile's loop (script.py's
    ``peel_partial_tiles``: the loop over whole tiles and the remainder, both made static):
    each holds a copy of the root, the epilogue ops and the conv, so the remainder's
    epilogue stays on its own accumulators. The ops are matched again by tag in the loop's
    parent (peeling cloned them). Returns the new (handle, plan) pairs of ``inner`` and the
    root's handle."""
    anchor = next(handle for handle, plan in inner if plan.tag == anchor_tag)
    loop, parent = w.fresh("pixels"), w.fresh("parent")
    w.lines.append(f'{loop} = transform.get_parent_op {anchor} {{op_name = "scf.for", nth_parent = {nth_parent}}}'
                   f" : ({w.ANY}) -> {w.ANY}")
    # Taken before the peel: patterns apply to the parent's body, so its handle stays valid.
    w.lines.append(f"{parent} = transform.get_parent_op {loop} : ({w.ANY}) -> {w.ANY}")
    anchors = w.peel_partial_tiles([loop], anchor_tag)

    def match(tag: int) -> str:
        if tag == anchor_tag:
            return anchors
        ops = w.fresh("op")
        w.lines.append(f'{ops} = transform.structured.match attributes{{"{TAG}" = {tag} : i64}} '
                       f"in {parent} : ({w.ANY}) -> {w.ANY}")
        return ops

    return [(match(plan.tag), plan) for _handle, plan in inner], match(root_tag)


def _reduction_only(plan):
    """The anchor's levels inside its register tile: reduction tiles, decompose, vectorize."""
    from dataclasses import replace
    return replace(plan, thread_tiles=None, cache_tiles=None, outer_register_tiles=None,
                   packed_operands=(), register_tiles=None, register_interchange=None)
