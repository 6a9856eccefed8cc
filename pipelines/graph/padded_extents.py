"""Matmuls whose rows or columns have no good register tile, computed on padded extents:
``tilecraft-pad-matmul-extents``.

The schedule's register tiles must divide the loops they tile (schedule/plan.py,
``largest_divisor``): a tile that divides keeps every tile the same static shape, which
vectorization needs. A ViT's 197 tokens (a prime) therefore got 1-row matmul tiles, three
accumulators where 24 fit, and its projections ran far slower than BERT's 128-token
ones (docs/performance.md); an MLP's 500 or 250 outputs got 4- or 2-lane vectors.

The pass gives such a matmul extents that tile well, as IREE's data tiling pads its packs:
- rows M (``needs_row_padding``, only with :data:`PAD_ROWS`: off by default, the schedule
  peels partial row tiles): A gets zero rows up to a multiple of
  :data:`ROW_MULTIPLE` (a copy of A, M x K, against 2 M K N flops);
- columns N (``needs_column_padding``), only where B is a compile-time constant: B gets
  zero columns up to a multiple of :data:`COLUMN_MULTIPLE`, padded once by the constant
  folder (the next passes); a non-constant B would be copied per call;
- the output channels of an NHWC convolution with a constant filter (``padded_filters``):
  zero filters up to a multiple of 16 or 8, as for a matmul's columns.

The padded rows and columns of a result are garbage nobody reads: the slice back to the
real extent moves down the chain of ops that keep padded lines independent
(``_padded_clone``): elementwise ops and row-wise reductions (a bias, GELU, the residual add,
layer norm) run on the padded extents, so the matmul's epilogue is fused on whole register
tiles, and the slice lands before the first op that would mix padded lines into real ones
(a reduction over them, a contraction over them, a reshape or slice across them). Being
garbage, padded lines need no particular values: an operand that is already padded is
taken as it is, with no fresh copy.

Left alone: dynamic and non-f32 shapes, batch matmuls (attention's, whose small extents the
schedule tiles per head), extents already tiling well, and small ones (padding 10 rows to 16
would compute 60 % more).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from mlir import ir
from mlir.dialects import linalg, tensor

from ...ir.maps import indexing_maps
from ...ir import core
from ..ir_queries import defined_functions, fresh_init, static_f32_tensors
from ..passes import bool_option, positive_int_option, register_pass
from .constant_folding import ConstantAnalysis
from .weight_panels import PANEL_COLUMNS, plain_matmul

# Rows of the matmul register tile (schedule/plan.py reads it as its row count): M is padded
# when its largest divisor up to it is below half of it.
REGISTER_ROWS = 8
# ... to a multiple of two register tiles: a ViT's 197 rows padded to 208 (26 tiles) ran
# its projections faster than padded to 200 (25 tiles; docs/performance.md). A multiple of
# 24, so
# that AVX2's 6-row tiles (schedule/plan.py, ``matmul_register_rows``) divide it as well
# as AVX-512's 8-row ones: 208 rows took 4-row tiles there (216: 27 x 8 or 36 x 6).
ROW_MULTIPLE = 24
# Columns: a multiple of one weight panel (one AVX-512 vector), so that the padded B packs
# into panels (weight_panels.py) and the register tile takes whole vectors.
COLUMN_MULTIPLE = PANEL_COLUMNS
# Padding is skipped where it would add more than this fraction of the work.
MAX_PADDING_FRACTION = 0.125
# Zero filters a convolution on 16 lanes may gain to an even number of vectors
# (``padded_filters``), at most, as a fraction of its filters: one vector in 32 or more
# (512+ filters), where the padded vector is in the noise and no layer pays for the slice.
PAIRED_VECTORS_FRACTION = 1 / 32
# What a result computed on padded filters and copied into its destination (a pad's interior,
# its part of a concat) pays for the copy, per 16-lane vector of a pixel's channels, in FMA
# issue slots (``destination_padding_pays``). Set between the two cases measured or kept:
# ShuffleNet's 232 -> 232 1x1 layers (reduction 232: 29 one-vector 8-lane FMAs per pixel and
# input channel in place against 15 16-lane ones padded) ran 437 -> 266 us padded and copied
# (the whole model 0.91x: docs/tuning.md, "A finding for the model"), and a 144 -> 24
# projection into a pad (3 against 2) stays in place as round 24 chose it.
DESTINATION_COPY_FMAS = 128


def _round_up(extent: int, multiple: int) -> int:
    return -(-extent // multiple) * multiple


def _cheap(extent: int, multiple: int) -> bool:
    return _round_up(extent, multiple) - extent <= MAX_PADDING_FRACTION * extent


# Rows are padded only where this is True. Off by default: the schedule peels a partial
# register tile (schedule/matmul_plan.py), and once the sequence-first ViT's second MLP
# Linear got a K block and column tasks over its panel weights (``reduction_block``,
# ``weight_panel_dims``), its 197 rows ran faster peeled than padded to 216, on one thread
# and two (docs/performance.md, "Transformers at odd token counts"). True restores the
# padding (benchmarks/odd_tokens.py's A/B; the tests of the padded lines' slicing).
PAD_ROWS = False


def needs_row_padding(rows: int) -> bool:
    """Whether ``rows`` has no divisor in [REGISTER_ROWS / 2, REGISTER_ROWS] (a 1-row tile
    for 197 rows, 3 for 33) and padding it adds at most :data:`MAX_PADDING_FRACTION`;
    always False unless :data:`PAD_ROWS`."""
    return PAD_ROWS and row_padding_helps(rows)


def row_padding_helps(rows: int) -> bool:
    """:func:`needs_row_padding` whatever :data:`PAD_ROWS` says."""
    best = max(d for d in range(1, REGISTER_ROWS + 1) if rows % d == 0)
    return best < REGISTER_ROWS // 2 and padded_rows(rows) != rows


def padded_rows(rows: int) -> int:
    """``rows`` rounded up to a multiple of :data:`ROW_MULTIPLE`, or of 16 (two 8-row tiles)
    where that costs more than :data:`MAX_PADDING_FRACTION` and 16 does not (121 -> 128),
    else ``rows``."""
    for multiple in (ROW_MULTIPLE, 16):
        if _cheap(rows, multiple):
            return _round_up(rows, multiple)
    return rows


def needs_column_padding(columns: int) -> bool:
    """Whether ``columns`` is no multiple of 8 (its vectors would be 4, 2 or 1 lanes wide:
    500, 250, 1001), is more than one panel, and padding it adds at most
    :data:`MAX_PADDING_FRACTION`. Multiples of 8 keep 8-lane vectors (1000: 125 of them)."""
    return columns > COLUMN_MULTIPLE and columns % 8 != 0 and _cheap(columns, COLUMN_MULTIPLE)


def padded_filters(filters: int, lanes: int = 8, into_destination: bool = False,
                   reduction: int | None = None) -> int:
    """The output channels an NHWC convolution with ``filters`` constant filters computes
    on a target of ``lanes`` f32 lanes: ``filters`` where it is at most 8; on 16 lanes, the
    next multiple of 16 (multiples of 8 included); else ``filters`` where it is a multiple
    of 8 (whole 8-lane vectors), else the next multiple of 16 (two-vector register tiles)
    or, where that costs more than :data:`MAX_PADDING_FRACTION`, of 8. The convolution's register tile takes whole vectors
    of the channels only (schedule/plan.py, ``conv_register_tile``): 71 filters (a prime)
    took 1-lane tiles, and a 37 -> 71 3x3 layer ran far behind onnxruntime (round 17).

    Why 16 on 16 lanes whatever the padding costs in flops: an 8-lane FMA issues as one
    instruction as a 16-lane one does, so a multiple of 16 never runs more vector FMAs
    than a multiple of 8 (71 filters: 5 vectors of 16 against 9 of 8). Padded to 72, that
    37 -> 71 layer ran on 8-lane vectors at about 60 % of onnxruntime's rate
    (docs/performance.md, "Odd filter counts on 16 lanes"). The same holds for an odd
    multiple of 8: MobileNetV2's and EfficientNet's 24-filter projections at 56 x 56 ran on
    3 8-lane vectors per pixel, on 32 filters 2 16-lane ones, and a chain of two such
    projections with their residual add took 0.73x the CPU time (docs/performance.md,
    "Squeeze-excite and wide odd layers"). Not where the result is padded or
    concatenated next (``into_destination``: a 3x3 convolution's or a pool's input, a
    branch of a concat): sliced back, it is then copied there, where the convolution would
    otherwise write the pad's interior or its part of the concat itself
    (pipelines/tensor/pad_destinations.py, concat_destinations.py); such multiples of 8
    stay as they are unless the convolution's ``reduction`` (input channels x taps) makes
    the 8-lane FMAs cost more than the copy (``destination_padding_pays``: ShuffleNet's
    232 filters, 29 8-lane vectors against 15 16-lane ones, over 232 input channels).

    On 16 lanes, wide layers go on to a multiple of 32 (an even number of vectors) where
    that adds at most :data:`PAIRED_VECTORS_FRACTION` of the filters: the register tile's
    channel vectors must divide the filters (``conv_register_tile``), so an odd count of
    vectors took 1-vector tiles, one broadcast load per FMA (load-bound). SqueezeNet's
    classifier, 512 -> 1000 (1008 after the import's padding: 63 vectors) over 13 x 13, ran
    8 x 1-vector tiles at 1.5x onnxruntime's time; on 1024 filters (+1.6 %) it takes
    several vectors per tile (docs/performance.md, "Squeeze-excite and wide odd layers")."""
    if filters <= 8:
        return filters
    if lanes >= 16:
        in_place = into_destination and not (reduction is not None
                                             and destination_padding_pays(filters, reduction))
        padded = filters if filters % 8 == 0 and in_place else _round_up(filters, 16)
        paired = _round_up(filters, 32)
        return paired if paired - filters <= PAIRED_VECTORS_FRACTION * filters else padded
    if filters % 8 == 0:
        return filters
    for multiple in (16, 8):
        if _cheap(filters, multiple):
            return _round_up(filters, multiple)
    return filters


def destination_padding_pays(filters: int, reduction: int) -> bool:
    """Whether a convolution of ``filters`` output channels (a multiple of 8) over
    ``reduction`` input channels x taps, whose result is written into a destination, runs
    faster on filters padded to 16 lanes and copied there than unpadded and written in place,
    on a 16-lane target: the FMA issue slots padding saves per pixel, ``reduction`` x (8-lane
    vectors - 16-lane vectors), against the copy's, :data:`DESTINATION_COPY_FMAS` per 16-lane
    vector.

    Why a cost and not a rule: an odd multiple of 8 has no 16-lane vector in place, so the
    register tile takes one 8-lane vector (schedule/conv_plan.py, ``conv_register_tile``):
    half the lanes per FMA and a broadcast load per FMA. Over few vectors and a short
    reduction that is less than the copy (a 144 -> 24 projection: 3 FMAs against 2, kept in
    place), over many it is most of the layer (ShuffleNet's 232 -> 232: 29 against 15; its
    eight such kernels ran 1.6x faster padded, copy included)."""
    if filters % 16 == 0:
        return False
    narrow = -(-filters // 8)
    wide = _round_up(filters, 16) // 16
    return reduction * (narrow - wide) > DESTINATION_COPY_FMAS * wide


# Elementwise ops between a convolution and a destination that ``_written_into_destination``
# follows, at most.
_DESTINATION_SEARCH_DEPTH = 4
# Ops whose source operand a producer may write in place (pad_destinations.py,
# concat_destinations.py).
_DESTINATION_OPS = frozenset({"tensor.pad", "tensor.concat", "tensor.insert_slice"})


def _written_into_destination(value: ir.Value, depth: int = _DESTINATION_SEARCH_DEPTH) -> bool:
    """Whether ``value``, or an all-parallel ``linalg.generic`` (bias, ReLU, residual add)
    that reads it, directly or through others, is padded or concatenated (a source of
    ``_DESTINATION_OPS``)."""
    for use in value.uses:
        user = getattr(use.owner, "operation", use.owner)
        if user.name in _DESTINATION_OPS:
            return True
        if (depth > 0 and user.name == "linalg.generic"
                and all("parallel" in str(t) for t in ir.ArrayAttr(user.attributes["iterator_types"]))
                and any(_written_into_destination(result, depth - 1) for result in user.results)):
            return True
    return False


@dataclass(frozen=True)
class Padded:
    """A value computed on padded extents: ``value`` stands for the original value of
    static shape ``shape`` (``value``'s extents are >= it, dim by dim)."""

    value: ir.Value
    shape: tuple[int, ...]

    def padded_dims(self) -> dict[int, int]:
        extents = ir.RankedTensorType(self.value.type).shape
        return {d: extents[d] for d, original in enumerate(self.shape) if extents[d] != original}


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _pad_to(value: ir.Value, shape: list[int]) -> ir.Value:
    """``value`` with zero elements appended up to ``shape`` (at the insertion point)."""
    current = _shape(value)
    return core.pad_constant(value, [0] * len(shape), [s - c for s, c in zip(shape, current)], 0.0)


def _init_at(init: ir.Value, shape: list[int]) -> ir.Value:
    """An init of ``shape`` standing for ``init``: a fresh one where it holds no data, else
    ``init`` padded with zeros."""
    fresh = fresh_init(init, shape)
    return fresh if fresh is not None else _pad_to(init, shape)


def _uses_loop(expr: ir.AffineExpr, loops: "set[int] | dict[int, int]") -> bool:
    """Whether ``expr`` reads any of ``loops`` (a convolution's ``d1 + d4`` reads both)."""
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position in loops
    if isinstance(expr, ir.AffineBinaryExpr):
        return _uses_loop(expr.lhs, loops) or _uses_loop(expr.rhs, loops)
    return False


def _operand_at(value: ir.Value, shape: list[int], padded: dict[ir.Value, Padded]) -> ir.Value:
    """``value`` (or its padded stand-in) with extents ``shape``: the stand-in as it is when
    its extents match, else padded with zeros."""
    stand_in = padded.get(value)
    if stand_in is not None and _shape(stand_in.value) == shape:
        return stand_in.value
    return _pad_to(value, shape)


class _ExtentPadder:
    """One function's rewrite: padded stand-ins for original values, built in program order."""

    def __init__(self, pad_rows: bool, lanes: int, weigh_destination_padding: bool = True) -> None:
        self.pad_rows = pad_rows
        self.lanes = lanes
        # Whether a multiple of 8 filters written into a destination may be padded where that
        # pays (destination_padding_pays): the f32 register tile's cost; bf16 kernels tile
        # their filters themselves and keep writing the destination in place.
        self.weigh_destination_padding = weigh_destination_padding
        self.padded: dict[ir.Value, Padded] = {}
        self.replaced: list[ir.Operation] = []
        self.constants = ConstantAnalysis()

    def visit(self, op: ir.Operation) -> None:
        if len(op.results) != 1 or not isinstance(op.results[0].type, ir.RankedTensorType):
            return
        if plain_matmul(op):
            new = self._padded_matmul(op)
        elif op.name == "linalg.conv_2d_nhwc_hwcf":
            new = self._padded_convolution(op)
        elif any(operand in self.padded for operand in op.operands):
            new = self._padded_clone(op)
        else:
            new = None
        if new is not None:
            self.padded[op.results[0]] = Padded(new, tuple(_shape(op.results[0])))
            self.replaced.append(op)

    def _padded_matmul(self, op: ir.Operation) -> ir.Value | None:
        a, b, init = op.operands
        m, k = _shape(a)
        n = _shape(b)[1]
        a_stand_in = self.padded.get(a)
        if a_stand_in is not None and set(a_stand_in.padded_dims()) != {0}:
            a_stand_in = None  # padded along K: its garbage would be summed in
        rows = padded_rows(m) if self.pad_rows and row_padding_helps(m) else m
        if a_stand_in is not None:
            rows = _shape(a_stand_in.value)[0]
        columns = n
        if needs_column_padding(n) and self.constants.value_is_constant(b):
            columns = _round_up(n, COLUMN_MULTIPLE)
        if (rows, columns) == (m, n):
            return None
        with ir.InsertionPoint(op), op.location:
            a = a_stand_in.value if a_stand_in is not None else _pad_to(a, [rows, k])
            b = _pad_to(b, [k, columns])
            return linalg.matmul(a, b, outs=[_init_at(init, [rows, columns])])

    def _padded_convolution(self, op: ir.Operation) -> ir.Value | None:
        """An NHWC convolution whose constant filter's output channels have no whole vector
        (71, 37, 131: 1-lane register tiles) computed with zero filters appended up to
        :func:`padded_filters`; padded by the constant folder, once."""
        x, w, init = op.operands
        if not static_f32_tensors(op.operands) or x in self.padded:
            return None
        filters = _shape(w)[3]
        kh, kw, channels = _shape(w)[:3]
        padded = padded_filters(filters, self.lanes, into_destination=_written_into_destination(op.results[0]),
                                reduction=kh * kw * channels if self.weigh_destination_padding else None)
        if padded == filters or not self.constants.value_is_constant(w):
            return None
        with ir.InsertionPoint(op), op.location:
            w = _pad_to(w, [*_shape(w)[:3], padded])
            init = _init_at(init, [*_shape(init)[:3], padded])
            clone = op.clone(ip=ir.InsertionPoint(op))
        clone.operands[1] = w
        clone.operands[2] = init
        clone.results[0].set_type(clone.operands[2].type)
        return clone.results[0]

    def _padded_clone(self, op: ir.Operation) -> ir.Value | None:
        if op.name == "linalg.generic":
            return self._padded_generic(op)
        if op.name in ("tensor.expand_shape", "tensor.collapse_shape"):
            return self._padded_reshape(op)
        return None

    def _padded_generic(self, op: ir.Operation) -> ir.Value | None:
        """``op`` on the padded extents of its padded operands, where every padded dim is read
        by a parallel loop that the result keeps, so that padded lines stay apart."""
        maps = indexing_maps(op)
        iterators = [str(ir.Attribute(t)) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
        operands = list(op.operands)
        loop_extents: dict[int, int] = {}
        for operand, affine_map in zip(operands, maps):
            stand_in = self.padded.get(operand)
            if stand_in is None:
                continue
            for dim, extent in stand_in.padded_dims().items():
                expr = affine_map.results[dim]
                if not isinstance(expr, ir.AffineDimExpr):
                    return None
                loop = expr.position
                if "parallel" not in iterators[loop] or loop_extents.get(loop, extent) != extent:
                    return None
                loop_extents[loop] = extent
        output_map = maps[-1]
        kept = {e.position for e in output_map.results if isinstance(e, ir.AffineDimExpr)}
        if not loop_extents or not set(loop_extents) <= kept:
            return None
        if not all(isinstance(v.type, ir.RankedTensorType) and ir.RankedTensorType(v.type).has_static_shape
                   for v in operands):
            return None
        if any(_uses_loop(e, loop_extents) for m in maps for e in m.results
               if not isinstance(e, ir.AffineDimExpr)):
            return None  # a padded loop inside an index expression: its operand's extent is no dim's
        new_operands = []
        with ir.InsertionPoint(op), op.location:
            for index, (operand, affine_map) in enumerate(zip(operands, maps)):
                shape = _shape(operand)
                for position, expr in enumerate(affine_map.results):
                    if isinstance(expr, ir.AffineDimExpr) and expr.position in loop_extents:
                        shape[position] = loop_extents[expr.position]
                if index == len(operands) - 1 and operand not in self.padded:
                    new_operands.append(_init_at(operand, shape))
                else:
                    new_operands.append(_operand_at(operand, shape, self.padded))
            clone = op.clone(ip=ir.InsertionPoint(op))
        for index, value in enumerate(new_operands):
            clone.operands[index] = value
        clone.results[0].set_type(new_operands[-1].type)
        return clone.results[0]

    def _padded_reshape(self, op: ir.Operation) -> ir.Value | None:
        """A reshape whose padded dims each sit in a reassociation group with unit dims only
        (197 rows collapsed with a batch of 1), applied to the padded operand."""
        source = self.padded.get(op.operands[0])
        if source is None:
            return None
        groups = [[int(ir.IntegerAttr(i).value) for i in ir.ArrayAttr(g)]
                  for g in ir.ArrayAttr(op.attributes["reassociation"])]
        expanding = op.name == "tensor.expand_shape"
        small, large = (_shape(op.operands[0]), _shape(op.results[0])) if expanding \
            else (_shape(op.results[0]), _shape(op.operands[0]))
        new_large = list(large)
        new_small = list(small)
        padded_dims = source.padded_dims()
        for small_dim, group in enumerate(groups):
            if expanding:
                extent = padded_dims.get(small_dim)
            else:
                extents = [padded_dims[d] for d in group if d in padded_dims]
                extent = extents[0] if extents else None
                if len(extents) > 1:
                    return None
            if extent is None:
                continue
            wide = [d for d in group if large[d] != 1]
            if len(wide) != 1:
                return None
            new_large[wide[0]] = extent
            new_small[small_dim] = extent
        element = ir.RankedTensorType(op.results[0].type).element_type
        clone = op.clone(ip=ir.InsertionPoint(op))
        clone.operands[0] = source.value
        result_shape = new_large if expanding else new_small
        clone.results[0].set_type(ir.RankedTensorType.get(result_shape, element))
        if expanding:
            clone.attributes["static_output_shape"] = ir.DenseI64ArrayAttr.get(result_shape)
        return clone.results[0]

    def finish(self) -> int:
        """Replace each rewritten op by a slice of its stand-in (read by the ops that were not
        rewritten, if any) and erase it, last first."""
        for op in reversed(self.replaced):
            original = op.results[0]
            stand_in = self.padded[original]
            shape = list(stand_in.shape)
            if not list(original.uses):
                # Read by rewritten ops only: no dead slice (a second user would keep the
                # constant folder from folding a batch norm into a padded convolution).
                op.erase()
                continue
            with ir.InsertionPoint(op), op.location:
                sliced = tensor.extract_slice(original.type, stand_in.value, [], [], [],
                                              [0] * len(shape), shape, [1] * len(shape))
            original.replace_all_uses_with(sliced)
            op.erase()
        return len(self.replaced)


@register_pass(
    "tilecraft-pad-matmul-extents",
    "Matmuls whose rows (or, with constant weights, columns) have no good register tile "
    "computed on padded extents; the slice back moves past elementwise and row-wise ops",
    options={"pad-rows": "pad rows too (default: PAD_ROWS, off: the schedule peels partial row tiles)",
             "lanes": "the target's f32 vector lanes, which choose a convolution's padded filters (default 8)",
             "destination-padding": "pad a multiple of 8 filters written into a pad or concat where "
                                    "destination_padding_pays (default 1; 0 for bf16 kernels, which tile "
                                    "their own filters)"},
)
def pad_matmul_extents_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    pad_rows = bool_option("pad-rows", options["pad-rows"]) if "pad-rows" in options else PAD_ROWS
    lanes = positive_int_option("lanes", options["lanes"]) if "lanes" in options else 8
    weigh = (bool_option("destination-padding", options["destination-padding"])
             if "destination-padding" in options else True)
    for function in defined_functions(module):
        padder = _ExtentPadder(pad_rows, lanes, weigh)
        for block in function.regions[0].blocks:
            for op in list(block.operations):
                padder.visit(op.operation)
        padder.finish()
