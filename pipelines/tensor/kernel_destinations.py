"""Where a register-tile kernel (int8_matmul.py's VNNI kernels, bf16_matmul.py's
``vdpbf16ps`` kernels) writes its result: the tasks of its ``scf.forall``, their slices of
the destination, and the padded destination of a convolution's result.

A kernel's result is M x N (M the output pixels N*OH*OW of a convolution, or a matmul's rows).
By default the kernel writes a tensor of its own, in tasks of ``task_rows`` rows by one
column tile (``task_tile``). Where that result, its epilogue applied, is only padded for the
next convolution or pool (a ``tensor.pad`` whose interior it is), the kernel writes into
the padded tensor instead (``PaddedResult``): its tasks are then whole output rows of one
image, so each task's slice of the destination is a rectangle ``[1, rows, OW, columns]``.

Why a padded destination: a call returning its own M x N tensor left the entry function a
strided copy into the pad's interior, which no M x N view of the padded tensor can avoid
(its rows are not a slice of it), and ``tilecraft-call-destinations`` (call_destinations.py)
serves only kernels whose destination is already a slice. ResNet-50 paid 17 such copies per
inference in bf16 (10.8 MB) and 17 in int8 (2.7 MB); docs/performance.md.

The int8 and bf16 kernels share this module, so that both write every destination the
same way; the epilogue passes (``tilecraft-int8-epilogues``, ``tilecraft-bf16-epilogues``)
find the pad (``padded_consumer``), build the kernel for its ``PaddedResult`` and give the
call the pad's border (``border_of``) as its last operand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Sequence

from mlir import ir
from mlir.dialects import scf, tensor

from ...errors import PipelineError
from ...ir import kernels
from ..ir_queries import reassociation_groups, users
from .register_tiles import TaskGrid

# The epilogue consumer of a kernel call, as int8_matmul.elementwise_consumer finds it:
# (elementwise generic, the expand_shape of the kernel's rows between them or None, the
# accumulator's input position).
Consumer = tuple[ir.Operation, "ir.Operation | None", int]


@dataclass(frozen=True)
class PaddedResult:
    """Where a convolution kernel writes its result instead of a tensor of its own: the
    interior at ``offsets`` of the constant-padded NHWC tensor of ``shape`` that the next
    convolution or pool reads, its ``pixels`` (N, OH, OW) the kernel's rows and its columns
    the channels from ``offsets[3]``. The kernel takes the padded tensor (its border already
    filled) as its destination and returns it (module docstring)."""

    shape: tuple[int, int, int, int]
    offsets: tuple[int, int, int, int]
    pixels: tuple[int, int, int]

    def suffix(self) -> str:
        """What a kernel writing into this destination adds to its name."""
        return f"_into{'x'.join(map(str, self.shape))}_at{'x'.join(map(str, self.offsets))}"

    def image_rows(self, task_rows: int) -> int:
        """Output rows of one image per task: about the config's ``task_rows`` rows, at least one."""
        _, out_h, out_w = self.pixels
        return max(1, min(out_h, round(task_rows / out_w)))

    def row_blocks(self, task_rows: int) -> int:
        """The tasks along the rows: blocks of ``image_rows`` output rows of each image."""
        return self.pixels[0] * -(-self.pixels[1] // self.image_rows(task_rows))

    def check(self, m: int, n: int, kernel: str) -> None:
        """Raise ``PipelineError`` unless an ``m`` x ``n`` result (rows the pixels) fits in
        the interior: a kernel built otherwise would write out of bounds."""
        if self.pixels[0] * self.pixels[1] * self.pixels[2] != m or any(
                o < 0 or o + e > s for o, e, s in zip(self.offsets, (*self.pixels, n), self.shape)):
            raise PipelineError(f"{kernel}: {m}x{n} result does not fit destination {self}")

    def tile_index(self, row: ir.Value, zero: ir.Value) -> list[ir.Value]:
        """The (image, row, column) of a task's tile ``[1, image rows, OW, columns]`` at
        which its row ``row`` (counted from the task's first) lies: (0, row / OW, row % OW)."""
        out_w = self.pixels[2]
        return [zero, kernels.apply(lambda d0: ir.AffineExpr.get_floor_div(d0, out_w), row),
                kernels.apply(lambda d0: d0 % out_w, row)]


@dataclass(frozen=True)
class TaskTile:
    """One task of a register-tile kernel inside its ``scf.forall`` (row block, column
    tile): its first row ``m0`` and column ``n0``, its ``nrows`` x ``ncols`` (the last ones
    partial), its slice ``tile`` of the destination, ``main``, its rows in whole register
    tiles, and where ``tile`` goes back: the slice's dynamic ``offsets`` and ``sizes`` and
    their places in ``static_offsets`` / ``static_sizes`` (unit strides)."""

    column_tile: ir.Value
    m0: ir.Value
    n0: ir.Value
    nrows: ir.Value
    ncols: ir.Value
    tile: ir.Value
    main: ir.Value
    offsets: tuple[ir.Value, ...]
    sizes: tuple[ir.Value, ...]
    static_offsets: tuple[int, ...]
    static_sizes: tuple[int, ...]


def kernel_forall(grid: TaskGrid, task_rows: int, m: int, n: int, element: ir.Type,
                  into: PaddedResult | None = None, destination: ir.Value | None = None) -> scf.ForallOp:
    """The kernel's ``scf.forall`` over (row blocks, column tiles), built at the insertion
    point: shared output a new M x N tensor of ``element``, or with ``into`` the padded
    ``destination`` (the kernel's last argument), its rows then blocks of image rows."""
    if into is None:
        return scf.ForallOp([0, 0], [grid.row_blocks, grid.tiles], [1, 1], [tensor.empty([m, n], element)])
    return scf.ForallOp([0, 0], [into.row_blocks(task_rows), grid.tiles], [1, 1], [destination])


def task_tile(forall: scf.ForallOp, m: int, n: int, task_rows: int, columns: int, rows: int,
              result_element: ir.Type, into: PaddedResult | None = None) -> TaskTile:
    """The task of ``forall``'s body (at its insertion point): ``task_rows`` rows by
    ``columns`` columns of an M x N result, in register tiles of ``rows`` rows; with
    ``into``, whole output rows of one image of the padded destination."""
    if into is not None:
        return _padded_task(forall, into, task_rows, n, columns, rows)
    rb, t = forall.induction_variables
    out = forall.inner_iter_args[0]
    m0 = kernels.apply(lambda d0: d0 * task_rows, rb)
    n0 = kernels.apply(lambda d0: d0 * columns, t)
    nrows = kernels.minimum(lambda d0: [ir.AffineConstantExpr.get(task_rows), m - d0 * task_rows], rb)
    ncols = kernels.minimum(lambda d0: [ir.AffineConstantExpr.get(columns), n - d0 * columns], t)
    dynamic = ir.ShapedType.get_dynamic_size()
    tile_type = ir.RankedTensorType.get([dynamic, dynamic], result_element)
    tile = tensor.extract_slice(tile_type, out, [m0, n0], [nrows, ncols], [],
                                [dynamic, dynamic], [dynamic, dynamic], [1, 1])
    main = kernels.apply(lambda d0: d0 - d0 % rows, nrows)
    return TaskTile(t, m0, n0, nrows, ncols, tile, main, (m0, n0), (nrows, ncols), (dynamic, dynamic),
                    (dynamic, dynamic))


def _padded_task(forall: scf.ForallOp, into: PaddedResult, task_rows: int, n: int, columns: int,
                 rows: int) -> TaskTile:
    """The task of ``forall``'s body writing into ``into``: (block of image rows, column
    tile), its slice of the padded destination ``[1, rows of the block, OW, columns]``."""
    block, t = forall.induction_variables
    out = forall.inner_iter_args[0]
    _, out_h, out_w = into.pixels
    per_task = into.image_rows(task_rows)
    blocks = -(-out_h // per_task)
    top = kernels.apply(lambda d0: (d0 % blocks) * per_task, block)
    m0 = kernels.apply(lambda d0: ir.AffineExpr.get_floor_div(d0, blocks) * (out_h * out_w)
                       + (d0 % blocks) * (per_task * out_w), block)
    n0 = kernels.apply(lambda d0: d0 * columns, t)
    image_rows = kernels.minimum(lambda d0: [ir.AffineConstantExpr.get(per_task), out_h - (d0 % blocks) * per_task],
                                 block)
    nrows = kernels.apply(lambda d0: d0 * out_w, image_rows)
    ncols = kernels.minimum(lambda d0: [ir.AffineConstantExpr.get(columns), n - d0 * columns], t)
    offsets = (kernels.apply(lambda d0: ir.AffineExpr.get_floor_div(d0, blocks) + into.offsets[0], block),
               kernels.apply(lambda d0: d0 + into.offsets[1], top),
               kernels.apply(lambda d0: d0 + into.offsets[3], n0))
    sizes = (image_rows, ncols)
    dynamic = ir.ShapedType.get_dynamic_size()
    static_offsets = (dynamic, dynamic, into.offsets[2], dynamic)
    static_sizes = (1, dynamic, out_w, dynamic)
    element = ir.RankedTensorType(out.type).element_type
    tile = tensor.extract_slice(ir.RankedTensorType.get(list(static_sizes), element), out, list(offsets),
                                list(sizes), [], list(static_offsets), list(static_sizes), [1, 1, 1, 1])
    main = kernels.apply(lambda d0: d0 - d0 % rows, nrows)
    return TaskTile(t, m0, n0, nrows, ncols, tile, main, offsets, sizes, static_offsets, static_sizes)


def store_register_tile(current: ir.Value, values: Sequence[ir.Value], rows: Sequence[ir.Value],
                        local: Sequence[ir.Value], vectors: int, lanes: int, offsets: Callable[[int], ir.Value],
                        stored: Callable[[ir.Value, int, ir.Value], ir.Value], in_bounds: bool,
                        into: PaddedResult | None = None) -> ir.Value:
    """``current`` (the task's tile) with a register tile's accumulators ``values`` (row
    major) written at its ``local`` rows, each through ``stored(row, vector, value)``; with
    ``into``, the tile is ``[1, image rows, OW, columns]`` (``PaddedResult.tile_index``)."""
    for r in range(len(local)):
        at = [local[r]] if into is None else into.tile_index(local[r], offsets(0))
        for v in range(vectors):
            value = stored(rows[r], v, values[r * vectors + v])
            current = kernels.write(value, current, [*at, offsets(v * lanes)], in_bounds=in_bounds)
    return current


def fill_task(forall: scf.ForallOp, task: TaskTile, rows: int, c: "kernels.IndexConstants",
              row_loop: Callable[[int, ir.Value, ir.Value, ir.Value, ir.Value], ir.Value]) -> None:
    """The task's rows: ``row_loop(mr, lower, upper, step, tile)`` over its whole register
    tiles, then over its last rows one at a time; the tile goes back into the destination."""
    full = row_loop(rows, c(0), task.main, c(rows), task.tile)
    rest = row_loop(1, task.main, task.nrows, c(1), full)
    kernels.insert_in_parallel(rest, forall.inner_iter_args[0], task.offsets, task.sizes, task.static_offsets,
                               task.static_sizes, [1] * len(task.static_offsets))


# ---- the padded destination, in the epilogue passes ---------------------------------------


def padded_consumer(consumer: Consumer) -> ir.Operation | None:
    """The ``tensor.pad`` a kernel's epilogue result goes into, when the kernel can write
    straight into it (``PaddedResult``): the epilogue's NHWC result (the kernel's rows
    expanded into N, OH, OW) has that one use, a static pad by a value from outside it."""
    generic, reshape, _ = consumer
    if reshape is None or reassociation_groups(reshape) != [[0, 1, 2], [3]]:
        return None
    uses = users(generic.results[0])
    if len(uses) != 1 or uses[0].name != "tensor.pad" or len(uses[0].operands) != 1:
        return None
    pad = uses[0]
    body = pad.regions[0].blocks[0]
    yielded = list(body.operations)[-1].operands[0]
    if not ir.RankedTensorType(pad.results[0].type).has_static_shape or (
            isinstance(yielded.owner, ir.Block) or yielded.owner.operation.parent.operation == pad):
        return None
    return pad


def padded_result(pad: ir.Operation) -> PaddedResult:
    """Where ``pad`` (``padded_consumer``) puts its source."""
    source = ir.RankedTensorType(pad.operands[0].type).shape
    return PaddedResult(tuple(ir.RankedTensorType(pad.results[0].type).shape),
                        tuple(ir.DenseI64ArrayAttr(pad.attributes["static_low"])), tuple(source[:3]))


def border_of(pad: ir.Operation, before: ir.Operation) -> ir.Value:
    """``pad`` of an empty tensor, made before ``before``: the padded tensor whose border
    is the pad's value and whose interior the kernel writes (pad_destinations.py then makes
    it border fills alone)."""
    with ir.InsertionPoint(before), pad.location:
        empty = tensor.empty(ir.RankedTensorType(pad.operands[0].type).shape,
                             ir.RankedTensorType(pad.operands[0].type).element_type)
        border = pad.clone(ip=ir.InsertionPoint(before))
    border.operands[0] = empty
    return border.results[0]


def padded_destination(consumer: Consumer) -> tuple[PaddedResult, tuple[ir.Value, ir.Operation]] | None:
    """(where the kernel writes, (the pad's border, the pad)) when the kernel whose epilogue
    is ``consumer`` can write into the pad its result goes into (``padded_consumer``); the
    border is made before the consumer's generic. ``None``: it returns its own M x N tensor."""
    pad = padded_consumer(consumer)
    if pad is None:
        return None
    return padded_result(pad), (border_of(pad, consumer[0]), pad)
