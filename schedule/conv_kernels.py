"""Register-blocked micro-kernels of non-depthwise convolutions (NHWC input, HWCF filter).

The default schedule (``plan.py``) tiles a convolution down to a *register tile*: ``pixels``
output columns of one row by ``channel_vectors`` vectors of output channels. After
``decompose`` (to ``conv_1d_nwc_wcf``) and ``vectorize`` the tile is one ``vector.contract``
per input-channel step, which LLVM lowers to the outer-product form: per input channel, one
broadcast of each input pixel and one load of each filter vector, then ``pixels x
channel_vectors`` FMAs into accumulators. ``@cleanup`` (script.py) hoists the accumulators'
read and write out of the (kh, kw, input channel) reduction loops, so they stay in vector
registers over the whole reduction and are stored once.

What this module decides is the tile's shape, from the register file:

- accumulators + filter vectors + one broadcast must fit the vector registers (32 zmm on
  AVX-512): ``pixels * vectors + vectors + 1 <= registers``. The tile the filter-heavy plan
  used before (4 channel vectors by 7 pixels: 28 + 4 + 1 = 33) spilled: ``llc -mcpu=znver5``
  emitted 159 spills and reloads and 25 register moves per hot loop of a 7x7 1x1 layer
  (ResNet-50's 1x1 layers of the 14x14 and 7x7 stages ran at 28-53 GFLOPS in the model
  where the others ran near 100);
- as many accumulators as fit, at least 8 where the image allows (an FMA's latency times
  the FMA ports: fewer leave the FMA units waiting on their own results): two vectors by up
  to 14 pixels (28 accumulators) where the output channels are a multiple of two vectors;
- the input-channel step (the contraction's unrolled length) at 4 when the tile has more
  than 16 accumulators: LLVM schedules all of a step's filter loads first, and 2 x 14 with
  a step of 8 spilled 12 times per loop where a step of 4 spills none.

``tests/lit/schedule/conv-micro-kernel.mlir`` checks the vector shapes and loop structure;
docs/performance.md has the assembly check (no spill in the hot loop) and the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

# The widest pixel run of one register tile: 2 x 14 accumulators leave 3 of 32 registers.
MAX_PIXELS = 14
# Channel vectors tried, most first: more vectors share each input broadcast, fewer leave
# room for more pixels (each sharing the filter vectors).
_CHANNEL_VECTORS = (2, 1)
# Above this many accumulators the input-channel step drops from 8 to 4 (see above).
_WIDE_TILE_ACCUMULATORS = 16


def vector_registers(vector_bits: int) -> int:
    """Vector registers of the target's widest vectors: 32 with AVX-512 (zmm0-31), 16 with
    AVX2 / SSE and the 128-bit NEON subset this planner assumes otherwise."""
    return 32 if vector_bits >= 512 else 16


@dataclass(frozen=True)
class ConvMicroKernel:
    """The register tile of one convolution: ``pixels`` output columns by ``channels``
    output channels (``channels // lanes`` vectors), reduced ``ic_step`` input channels at a
    time."""

    pixels: int
    channels: int
    ic_step: int
    lanes: int

    @property
    def accumulators(self) -> int:
        return self.pixels * max(self.channels // self.lanes, 1)

    @property
    def registers(self) -> int:
        """Vector registers live in the hot loop: accumulators, filter vectors, a broadcast."""
        return self.accumulators + max(self.channels // self.lanes, 1) + 1


def _largest_divisor(n: int, limit: int) -> int:
    for candidate in range(min(n, limit), 0, -1):
        if n % candidate == 0:
            return candidate
    return 1


def conv_micro_kernel(out_width: int, out_channels: int, in_channels: int, *, lanes: int,
                      vector_bits: int) -> ConvMicroKernel | None:
    """The register tile for a convolution with these output width / channel extents, or
    ``None`` when the output channels are not a whole number of vectors (the caller keeps
    its generic tile: narrower vectors, as for MobileNetV2's small channel counts)."""
    if lanes <= 1 or out_channels % lanes:
        return None
    registers = vector_registers(vector_bits)
    best: ConvMicroKernel | None = None
    for vectors in _CHANNEL_VECTORS:
        if out_channels % (vectors * lanes):
            continue
        room = (registers - 1 - vectors) // vectors  # pixels whose accumulators still fit
        pixels = _largest_divisor(out_width, min(room, MAX_PIXELS))
        candidate = ConvMicroKernel(pixels, vectors * lanes, 0, lanes)
        if best is None or candidate.accumulators > best.accumulators:
            best = candidate
    assert best is not None  # vectors = 1 always divides
    step_limit = 4 if best.accumulators > _WIDE_TILE_ACCUMULATORS else 8
    return ConvMicroKernel(best.pixels, best.channels, _largest_divisor(in_channels, step_limit),
                           lanes)


# ---- epilogues on the accumulator tile ------------------------------------------------------
#
# A fusion group "conv -> bias / folded batch norm -> residual add -> ReLU" (schedule/group.py)
# is one scf.forall per task, but inside a task each op had its own loop nest: the conv wrote
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
                                anchor_tag: int, render_levels) -> None:
    """Tile ``root`` (inside its task) by ``tiles``, fuse the group's producers (``fused``:
    (handle, plan) pairs, consumers first) into the innermost loop, then give each its inner
    levels (``render_levels(w, handle, plan)``). Fused pads stay in the task: padding per
    register tile would redo it for every tile of a row. ``w`` is script.py's ScriptWriter."""
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
    w.lines.append(f'{task} = transform.get_parent_op {tiled} {{op_name = "scf.forall"}}'
                   f" : ({w.ANY}) -> {w.ANY}")
    inner = []
    for handle, plan in fused:
        if plan.vectorize or plan.tag == anchor_tag or plan.decompose:
            moved, loop = w.fuse_into(handle, loop)
            inner.append((moved, plan))
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


def _reduction_only(plan):
    """The anchor's levels inside its register tile: reduction tiles, decompose, vectorize."""
    from dataclasses import replace
    return replace(plan, thread_tiles=None, cache_tiles=None, outer_register_tiles=None,
                   packed_operands=(), register_tiles=None, register_interchange=None)
