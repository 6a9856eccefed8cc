"""Layout transformation: ``tilecraft-convert-layout`` and ``tilecraft-lower-layout-converts``.

The frontends emit channels-first (NCHW) convolutions, as ONNX and PyTorch store them. The
default CPU schedule runs channels-last much faster: measured with
``benchmarks/conv_layout.py`` (docs/graph-dialect.md has the table), NHWC beat NCHW on
every ResNet-50 conv shape and most of all on a depthwise conv (whose NCHW form has no
decomposition and runs as scalar loops); TVM's NCHW{c} as a ``linalg.generic`` (no named
op, so no 2-D -> 1-D decomposition) was slower than both. So the target
layout is NHWC, the only one the option accepts.

``tilecraft-convert-layout`` walks each function's top-level ops once, in order:

- *anchors*: a static-shaped ``linalg.conv_2d_nchw_fchw`` becomes ``conv_2d_nhwc_hwcf``,
  ``depthwise_conv_2d_nchw_chw`` becomes ``depthwise_conv_2d_nhwc_hwc``,
  ``pooling_nchw_max/sum`` become ``pooling_nhwc_max/sum``. The filter gets a
  ``linalg.transpose`` (FCHW -> HWCF, CHW -> HWC) that ``tilecraft-fold-constants``
  evaluates at compile time when the filter is a constant (run this pass before it). The
  input goes through ``graph.layout_convert`` NCHW -> NHWC, the result through NHWC -> NCHW.
- *transposes*: a ``linalg.transpose`` NCHW -> NHWC or back is a conversion written out (the
  int8 convolutions of ``conv.integer_conv2d`` wrap their NHWC matmul in two; a model may
  hold its own): it becomes a ``graph.layout_convert``, so it propagates and cancels as below.
- *propagation*: an op reading a value converted NHWC -> NCHW is rewritten to read the NHWC
  value itself and to produce NHWC: a ``linalg.generic`` (elementwise or reduction: each
  operand's indexing map gets its results permuted, broadcast operands such as a
  per-channel bias ``(d1, 0, 0)`` keep theirs, and the loops are renumbered so the output
  map stays the identity), a ``tensor.pad`` with a constant value (pad amounts permuted),
  a ``tensor.concat`` (its dim permuted: a U-Net's skip connection joins the channels),
  a static ``tensor.extract_slice`` (offsets, sizes and strides permuted: a convolution
  computed on a wider row, cut back), a channel shuffle (a reshape splitting the channels,
  a transpose of the split dims, a reshape merging them: one transpose of the channels'
  factors in NHWC), and the anchors above. A ``tensor.pad`` feeding a converted anchor is moved to NHWC too
  (backwards), so the conversion lands on the function argument.
- *cancellation*: a conversion of a conversion back (NHWC -> NCHW -> NHWC) is the value
  itself, so conversions stay only where a value enters or leaves the NHWC region: the
  function's arguments and results, and ops that do not propagate (reshapes other than
  the ones below, grouped ``conv_2d_ngchw_gfchw`` of dynamic shape: left NCHW, matmuls, ...).
- *1-D convolutions*: the frontends give a Conv1d as a 2-D convolution over a unit row
  between reshapes (NCW -> NC1W -> NCW, ir/conv.py). The conversions at those reshapes
  become NCW <-> NWC ones (``unit_height_conversions``), and a second, rank-3 walk
  propagates and cancels them as above through the ops between convolutions (GELU, group
  norms, pads, the model's own final transpose to NWC).

``tilecraft-lower-layout-converts`` turns each remaining ``graph.layout_convert`` into a
``linalg.transpose``, or into a reshape when only unit dims move (ResNet's Flatten of the
pooled ``1x2048x1x1``: NHWC ``1x1x1x2048`` holds the same bytes), so the schedule stage sees
only linalg and tensor ops.

Left out, on purpose: grouped convolutions of dynamic shape (no NHWC named op the
schedule decomposes: ``conv_2d_ngchw_gfchw`` stays NCHW; static ones arrive in NHWC already,
one ``conv_2d_nhwc_hwcf`` per group between transposes this pass cancels, ir/conv.py), 3-D
convolutions, dynamic shapes (left alone), generics whose body reads ``linalg.index``
(renumbering loops would change what it reads).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from mlir import ir
from mlir.dialects import linalg, tensor

from ...ir.maps import indexing_maps, set_indexing_maps
from ...dialects import graph
from ...errors import GraphError, PipelineError
from ...ir import core, reshapes
from ..ir_queries import defined_functions, fresh_init, reassociation_groups
from ..passes import register_pass

SOURCE_LAYOUT = "NCHW"
# Layouts the pass converts to (see the module docstring for why only NHWC).
LAYOUTS = ("NHWC",)
DEFAULT_LAYOUT = "NHWC"

# NCHW anchor -> (its NHWC builder, permutation of the filter: result dim i = filter dim p[i]).
_CONVS = {
    "linalg.conv_2d_nchw_fchw": (linalg.conv_2d_nhwc_hwcf, (2, 3, 1, 0)),
    "linalg.depthwise_conv_2d_nchw_chw": (linalg.depthwise_conv_2d_nhwc_hwc, (1, 2, 0)),
}
_POOLS = {
    "linalg.pooling_nchw_max": linalg.pooling_nhwc_max,
    "linalg.pooling_nchw_sum": linalg.pooling_nhwc_sum,
}


def parse_layout(text: str) -> str:
    """The ``layout`` option's value, checked; :class:`PipelineError` names the valid ones."""
    if text not in LAYOUTS:
        raise PipelineError(
            f"tilecraft-convert-layout: unknown layout {text!r} (supported: {', '.join(LAYOUTS)}; "
            f"NCHW{{c}} has no named linalg op the schedule decomposes, see "
            f"benchmarks/conv_layout.py)")
    return text


def layout_permutation(src: str, dst: str) -> list[int]:
    """``p`` with dim ``i`` of ``dst`` = dim ``p[i]`` of ``src`` (both plain layouts over the
    same letters: ``NCHW`` -> ``NHWC`` gives ``[0, 2, 3, 1]``)."""
    if sorted(src) != sorted(dst) or not src.isalpha() or not src.isupper() or len(set(src)) != len(src):
        raise GraphError(f"no permutation from layout {src!r} to {dst!r} (blocked layouts are "
                         "not supported)")
    return [src.index(letter) for letter in dst]


def _owner(value: ir.Value) -> ir.Operation | None:
    return graph._op(value.owner) if isinstance(value, ir.OpResult) else None


def _ranked(value: ir.Value) -> ir.RankedTensorType | None:
    return ir.RankedTensorType(value.type) if isinstance(value.type, ir.RankedTensorType) else None


def _static(values: Sequence[ir.Value]) -> bool:
    return all((t := _ranked(v)) is not None and t.has_static_shape for v in values)


def _convert_layouts(op: ir.Operation) -> tuple[str, str]:
    return graph.layout_name(op.attributes["src_layout"]), graph.layout_name(op.attributes["dst_layout"])


def _permuted_type(value: ir.Value, permutation: Sequence[int]) -> ir.RankedTensorType:
    shaped = _ranked(value)
    return ir.RankedTensorType.get([shaped.shape[p] for p in permutation], shaped.element_type)


def _int_list(attr: ir.Attribute) -> list[int]:
    return [int(v) for v in ir.DenseIntElementsAttr(attr)]


def _constant_pad(op: ir.Operation) -> bool:
    """A static ``tensor.pad`` whose body yields one value defined outside of it."""
    if op.name != "tensor.pad" or len(op.operands) != 1 or not _static([op.operands[0]]):
        return False
    body = op.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    return (len(ops) == 1 and ops[0].name == "tensor.yield"
            and not any(ops[0].operands[0] == arg for arg in body.arguments))


class LayoutRewriter:
    """One function's rewrite from ``source`` into ``layout`` (module docstring); values
    ``source`` -> ``layout`` are cached, so one value gets one conversion whatever the number
    of its users. ``source`` is NCHW, whose convolutions and pooling are the anchors, or NCW
    (1-D convolutions' operands, :func:`unit_height_conversions`), where conversions only
    propagate and cancel."""

    def __init__(self, layout: str, source: str = SOURCE_LAYOUT) -> None:
        self.layout = layout
        self.source = source
        self.rank = len(source)
        self.anchors = source == SOURCE_LAYOUT
        self.to_layout = layout_permutation(source, layout)
        self._converted: dict[ir.Value, ir.Value] = {}
        self.rewritten = 0

    # --- conversions ------------------------------------------------------------------------

    def converted_from(self, value: ir.Value) -> ir.Value | None:
        """The ``layout`` value ``value`` was converted from, if it was."""
        owner = _owner(value)
        if owner is not None and owner.name == graph.LAYOUT_CONVERT \
                and _convert_layouts(owner) == (self.layout, self.source):
            return owner.operands[0]
        return None

    def in_layout(self, value: ir.Value, before: ir.Operation) -> ir.Value:
        """``value`` (``source``) in ``layout``: the value it was converted from, a pad moved
        to ``layout`` when ``before`` is its only user, or a new ``graph.layout_convert``."""
        source = self.converted_from(value)
        if source is not None:
            return source
        if value in self._converted:
            return self._converted[value]
        owner = _owner(value)
        if owner is not None and _constant_pad(owner) and len(list(value.uses)) == 1:
            result = self._pad(owner, self.in_layout(owner.operands[0], owner))
        else:
            with before.location:
                result = graph.layout_convert(value, self.source, self.layout,
                                              _permuted_type(value, self.to_layout),
                                              ip=ir.InsertionPoint(before))
        self._converted[value] = result
        return result

    def init_in_layout(self, init: ir.Value, before: ir.Operation) -> ir.Value:
        """An accumulator in ``layout``: a new ``tensor.empty`` or ``linalg.fill`` of one
        when ``init`` is one (no data to move), else a conversion."""
        with before.location, ir.InsertionPoint(before):
            fresh = fresh_init(init, list(_permuted_type(init, self.to_layout).shape))
        return fresh if fresh is not None else self.in_layout(init, before)

    # --- rewrites ---------------------------------------------------------------------------

    def _pad(self, op: ir.Operation, source: ir.Value) -> ir.Value:
        """``op`` (a constant ``tensor.pad`` of NCHW) applied to ``source`` in ``layout``."""
        clone = op.clone(ip=ir.InsertionPoint(op))
        clone.operands[0] = source
        for name in ("static_low", "static_high"):
            amounts = list(ir.DenseI64ArrayAttr(op.attributes[name]))
            clone.attributes[name] = ir.DenseI64ArrayAttr.get([amounts[p] for p in self.to_layout])
        clone.results[0].set_type(_permuted_type(op.results[0], self.to_layout))
        return clone.results[0]

    def _replace(self, op: ir.Operation, new: ir.Value) -> None:
        convert = graph.layout_convert(new, self.layout, self.source, op.results[0].type,
                                       loc=op.location, ip=ir.InsertionPoint(op))
        op.results[0].replace_all_uses_with(convert)
        op.erase()
        self.rewritten += 1

    def rewrite_conv(self, op: ir.Operation) -> None:
        builder, filter_permutation = _CONVS[op.name]
        x, w, init = op.operands
        x = self.in_layout(x, op)
        init = self.init_in_layout(init, op)
        with op.location, ir.InsertionPoint(op):
            w = core.transpose(w, filter_permutation)
            new = builder(x, w, outs=[init], strides=_int_list(op.attributes["strides"]),
                          dilations=_int_list(op.attributes["dilations"]))
        self._replace(op, new)

    def rewrite_pool(self, op: ir.Operation) -> None:
        x, window, init = op.operands
        x = self.in_layout(x, op)
        init = self.init_in_layout(init, op)
        with op.location, ir.InsertionPoint(op):
            new = _POOLS[op.name](x, window, outs=[init], strides=_int_list(op.attributes["strides"]),
                                  dilations=_int_list(op.attributes["dilations"]))
        self._replace(op, new)

    def rewrite_pad(self, op: ir.Operation) -> None:
        self._replace(op, self._pad(op, self.converted_from(op.operands[0])))

    def transpose_kind(self, op: ir.Operation) -> str | None:
        """``"to"`` / ``"from"`` when ``op`` is a static ``linalg.transpose`` from ``source``
        to ``layout`` / back: a layout conversion written as a transpose (the int8
        convolutions, conv.integer_conv2d; a model's own NCHW <-> NHWC Transpose nodes)."""
        if op.name != "linalg.transpose" or not _static([op.operands[0]]) \
                or _ranked(op.operands[0]).rank != self.rank:
            return None
        permutation = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        if permutation == self.to_layout:
            return "to"
        if permutation == layout_permutation(self.layout, self.source):
            return "from"
        return None

    def rewrite_concat(self, op: ir.Operation) -> None:
        """A rank-4 concat that reads a converted value runs in ``layout`` (its dim
        permuted; the other parts converted): a U-Net's skip connection, concatenated along
        the channels, stayed NCHW and cost a transpose of both parts and of the result."""
        parts = [self.in_layout(value, op) for value in op.operands]
        dim = self.to_layout.index(int(ir.IntegerAttr(op.attributes["dim"]).value))
        with op.location, ir.InsertionPoint(op):
            new = tensor.concat(_permuted_type(op.results[0], self.to_layout), dim, parts)
        self._replace(op, new)

    def rewrite_slice(self, op: ir.Operation) -> None:
        """A static rank-4 ``extract_slice`` of a converted value slices it in ``layout``
        (offsets, sizes and strides permuted): a channel split between branches (ShuffleNet)
        or a crop of a feature map is cut without leaving NHWC."""
        clone = op.clone(ip=ir.InsertionPoint(op))
        clone.operands[0] = self.converted_from(op.operands[0])
        for name in ("static_offsets", "static_sizes", "static_strides"):
            values = list(ir.DenseI64ArrayAttr(op.attributes[name]))
            clone.attributes[name] = ir.DenseI64ArrayAttr.get([values[p] for p in self.to_layout])
        clone.results[0].set_type(_permuted_type(op.results[0], self.to_layout))
        self._replace(op, clone.results[0])

    def channel_shuffle(self, op: ir.Operation) -> tuple[ir.Operation, ir.Operation, list[int]] | None:
        """``(expand, transpose, permutation)`` when ``op``, a ``collapse_shape`` back to rank
        4, ends a channel shuffle of a converted value: an ``expand_shape`` splitting the
        channels only (N, C, H, W) -> (N, g1, .., gk, H, W), a ``linalg.transpose`` permuting
        those split dims only, and this collapse merging them back (ShuffleNet's
        reshape-transpose-reshape); ``permutation`` is the transpose's among the split dims."""
        if op.name != "tensor.collapse_shape" or not _static([op.operands[0], op.results[0]]) \
                or _ranked(op.results[0]).rank != 4:
            return None
        transpose = _owner(op.operands[0])
        if transpose is None or transpose.name != "linalg.transpose" or len(list(op.operands[0].uses)) != 1:
            return None
        expand = _owner(transpose.operands[0])
        if expand is None or expand.name != "tensor.expand_shape" or len(list(transpose.operands[0].uses)) != 1 \
                or self.converted_from(expand.operands[0]) is None:
            return None
        rank = _ranked(expand.results[0]).rank
        split = list(range(1, rank - 2))
        channel_groups = [[0], split, [rank - 2], [rank - 1]]
        if reassociation_groups(expand) != channel_groups or reassociation_groups(op) != channel_groups:
            return None
        permutation = list(ir.DenseI64ArrayAttr(transpose.attributes["permutation"]))
        if permutation[:1] + permutation[-2:] != [0, rank - 2, rank - 1] or sorted(permutation[1:-2]) != split:
            return None
        return expand, transpose, [p - 1 for p in permutation[1:-2]]

    def rewrite_channel_shuffle(self, op: ir.Operation, expand: ir.Operation, transpose: ir.Operation,
                                permutation: Sequence[int]) -> None:
        """The channel shuffle ending at ``op`` (:meth:`channel_shuffle`) done in ``layout``:
        the NHWC channels split, permuted and merged, one transpose of the innermost dims
        instead of the NHWC -> NCHW conversion, the shuffle's 5-D transpose and the
        conversion back (three copies of the tensor: ShuffleNet moved each block's output
        three times)."""
        source = self.converted_from(expand.operands[0])
        n, height, width, channels = _ranked(source).shape
        factors = list(_ranked(expand.results[0]).shape)[1:-2]
        k = len(factors)
        with op.location, ir.InsertionPoint(op):
            split = reshapes.expand(source, [[0], [1], [2], list(range(3, 3 + k))], [n, height, width, *factors])
            moved = core.transpose(split, [0, 1, 2, *[3 + p for p in permutation]])
            new = reshapes.collapse(moved, [[0], [1], [2], list(range(3, 3 + k))])
        self._replace(op, new)
        transpose.erase()
        expand.erase()

    def rewrite_transpose(self, op: ir.Operation, kind: str) -> None:
        """A transpose to ``layout`` reads the value in ``layout`` (cancelling a conversion
        back); one from ``layout`` becomes a conversion the ops after it propagate."""
        if kind == "to":
            op.results[0].replace_all_uses_with(self.in_layout(op.operands[0], op))
            op.erase()
            self.rewritten += 1
        else:
            self._replace(op, op.operands[0])

    def rewrite_generic(self, op: ir.Operation) -> None:
        """Operands converted from ``layout`` are read directly (map results permuted); other
        full-rank operands are converted; a full-rank output is produced in ``layout``, its
        loops renumbered so its map stays the identity it was."""
        maps = indexing_maps(op)
        iterators = list(op.attributes["iterator_types"])
        n_inputs = len(op.operands) - 1
        operands = list(op.operands)
        new_maps = list(maps)
        for i in range(n_inputs):
            value, affine_map = operands[i], maps[i]
            shaped = _ranked(value)
            per_channel = _per_channel_vector(value, affine_map, op)
            if per_channel is not None:
                operands[i], new_maps[i] = per_channel
                continue
            if shaped is None or shaped.rank != self.rank:
                continue
            source = self.converted_from(value)
            if source is None and not affine_map.is_permutation:
                continue  # a broadcast operand (bias 1xCx1x1): the same element per channel
            operands[i] = source if source is not None else self.in_layout(value, op)
            new_maps[i] = self._permute_results(affine_map)
        out = operands[n_inputs]
        body = op.regions[0].blocks[0]
        out_changed = _ranked(out) is not None and _ranked(out).rank == self.rank
        if out_changed:
            reads_out = len(list(body.arguments[n_inputs].uses)) > 0
            if reads_out:
                operands[n_inputs] = self.init_in_layout(out, op)
            else:
                shape = _permuted_type(out, self.to_layout)
                with op.location, ir.InsertionPoint(op):
                    operands[n_inputs] = core.empty(shape.shape, shape.element_type)
            new_maps[n_inputs] = self._permute_results(maps[n_inputs])
        new_maps, iterators = _renumber_loops(new_maps, iterators)
        clone = op.clone(ip=ir.InsertionPoint(op))
        for i, value in enumerate(operands):
            clone.operands[i] = value
        set_indexing_maps(clone, new_maps)
        clone.attributes["iterator_types"] = ir.ArrayAttr.get(iterators)
        if out_changed:
            clone.results[0].set_type(operands[n_inputs].type)
            self._replace(op, clone.results[0])
        else:
            op.results[0].replace_all_uses_with(clone.results[0])
            op.erase()
            self.rewritten += 1

    def _permute_results(self, affine_map: ir.AffineMap) -> ir.AffineMap:
        results = list(affine_map.results)
        return ir.AffineMap.get(affine_map.n_dims, affine_map.n_symbols,
                                [results[p] for p in self.to_layout])

    # --- the walk ---------------------------------------------------------------------------

    def _reads_converted(self, op: ir.Operation, positions: Sequence[int]) -> bool:
        return any(self.converted_from(op.operands[i]) is not None for i in positions)

    def visit(self, op: ir.Operation) -> None:
        name = op.name
        rank = self.rank
        if self.anchors and name in _CONVS and _static(list(op.operands) + list(op.results)) \
                and len(op.operands) == 3:
            self.rewrite_conv(op)
        elif self.anchors and name in _POOLS and _static(list(op.operands) + list(op.results)):
            self.rewrite_pool(op)
        elif (kind := self.transpose_kind(op)) is not None:
            self.rewrite_transpose(op, kind)
        elif name == "tensor.pad" and _constant_pad(op) and _ranked(op.operands[0]).rank == rank \
                and self._reads_converted(op, [0]):
            self.rewrite_pad(op)
        elif name == "tensor.concat" and _static(list(op.operands) + list(op.results)) \
                and _ranked(op.results[0]).rank == rank and self._reads_converted(op, range(len(op.operands))):
            self.rewrite_concat(op)
        elif name == "tensor.extract_slice" and len(op.operands) == 1 \
                and _static([op.operands[0], op.results[0]]) and _ranked(op.operands[0]).rank == rank \
                and _ranked(op.results[0]).rank == rank and self._reads_converted(op, [0]):
            self.rewrite_slice(op)
        elif name == "linalg.generic" and _plain_generic(op) \
                and self._reads_converted(op, range(len(op.operands) - 1)):
            self.rewrite_generic(op)
        elif self.anchors and (shuffle := self.channel_shuffle(op)) is not None:
            self.rewrite_channel_shuffle(op, *shuffle)

    def run(self, function: ir.Operation) -> int:
        block = function.regions[0].blocks[0]
        for op in [o.operation for o in block.operations]:
            with op.location:  # what the rewrite of ``op`` builds points back at it
                self.visit(op)
        cancel_conversions(function)
        return self.rewritten


# A 1-D convolution's operands as the 2-D ones the frontends give it: NCW with a unit H
# inserted before W (ir/conv.py), i.e. [N, C, W] <-> [N, C, 1, W].
_UNIT_HEIGHT = [[0], [1], [2, 3]]


def unit_height_conversions(function: ir.Operation, layout: str) -> int:
    """Rewrite the 2-D conversions around 1-D convolutions as 1-D ones (NCW <-> the layout
    without H), so that the rank-3 ops between convolutions propagate and cancel them:
    ``collapse(convert(x, layout -> NCHW))`` dropping a unit H becomes ``convert(collapse(x),
    NWC -> NCW)``, and ``convert(expand(y), NCHW -> layout)`` inserting one becomes
    ``expand(convert(y, NCW -> NWC))``. Returns how many were rewritten.

    Why: a Conv1d is imported as a 2-D convolution between reshapes, which the 2-D
    propagation stops at, so a wav2vec feature encoder transposed every convolution's output
    to NCW for its GELU and back to NWC for the next convolution (two copies of each
    activation)."""
    flat = layout.replace("H", "")
    source_1d = SOURCE_LAYOUT.replace("H", "")
    height = layout.index("H")
    # The layout's H merged with the dim after it (W in NHWC), the others kept.
    merge = [[d] for d in range(height)] + [[height, height + 1]] + [[d] for d in range(height + 2, len(layout))]
    block = function.regions[0].blocks[0]
    rewritten = 0
    for op in [o.operation for o in block.operations]:
        if op.name == "tensor.collapse_shape" and reassociation_groups(op) == _UNIT_HEIGHT:
            convert = _owner(op.operands[0])
            shape = _ranked(op.operands[0]).shape
            if convert is None or convert.name != graph.LAYOUT_CONVERT or shape[2] != 1 \
                    or _convert_layouts(convert) != (layout, SOURCE_LAYOUT) or not _static([op.operands[0]]):
                continue
            x = convert.operands[0]
            with op.location, ir.InsertionPoint(op):
                collapsed = reshapes.collapse(x, merge)
                new = graph.layout_convert(collapsed, flat, source_1d, op.results[0].type)
            op.results[0].replace_all_uses_with(new)
            op.erase()
            rewritten += 1
        elif op.name == graph.LAYOUT_CONVERT and _convert_layouts(op) == (SOURCE_LAYOUT, layout):
            expand = _owner(op.operands[0])
            if expand is None or expand.name != "tensor.expand_shape" or reassociation_groups(expand) != _UNIT_HEIGHT \
                    or not _static([op.operands[0]]) or _ranked(op.operands[0]).shape[2] != 1:
                continue
            y = expand.operands[0]
            permutation = layout_permutation(source_1d, flat)
            with op.location, ir.InsertionPoint(op):
                converted = graph.layout_convert(y, source_1d, flat, _permuted_type(y, permutation))
                new = reshapes.expand(converted, merge, list(_ranked(op.results[0]).shape))
            op.results[0].replace_all_uses_with(new)
            op.erase()
            rewritten += 1
    return rewritten


def _per_channel_vector(value: ir.Value, affine_map: ir.AffineMap, op: ir.Operation
                        ) -> tuple[ir.Value, ir.AffineMap] | None:
    """A broadcast operand with one non-unit dim (a per-channel scale or bias ``[C, 1, 1]``)
    as a 1-D ``[C]`` view read through that dim's loop; ``None`` for any other operand.

    Why: in NHWC the channel loop is the innermost, vectorized one; read through its rank-3
    map, such an operand became a ``vector<Cx1x1>`` read plus a transpose per vector, which
    fully unrolled into thousands of shuffles (the QDQ ResNet-50's epilogues took 53 s of
    canonicalization) and slow code."""
    shaped = _ranked(value)
    if shaped is None or shaped.rank < 2 or not shaped.has_static_shape:
        return None
    results = list(affine_map.results)
    varying = [k for k, r in enumerate(results) if str(r) != "0"]
    if len(varying) != 1 or any(shaped.shape[k] != 1 for k in range(shaped.rank) if k != varying[0]):
        return None
    with op.location, ir.InsertionPoint(op):
        flat = reshapes.collapse(value, [list(range(shaped.rank))])
    return flat, ir.AffineMap.get(affine_map.n_dims, affine_map.n_symbols, [results[varying[0]]])


def _plain_generic(op: ir.Operation) -> bool:
    """One tensor result, static shapes, no ``linalg.index`` (loops may be renumbered)."""
    if len(op.results) != 1 or not _static(list(op.operands) + list(op.results)):
        return False
    found: list[bool] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        if inner.name == "linalg.index":
            found.append(True)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    for inner in op.regions[0].blocks[0].operations:
        inner.operation.walk(visit)
    return not found


def _renumber_loops(maps: list[ir.AffineMap], iterators: list[ir.Attribute]
                    ) -> tuple[list[ir.AffineMap], list[ir.Attribute]]:
    """Renumber loop dims so the output map's dims come first, in its order (the output is
    then written contiguously by the innermost loop); other loops follow in their order."""
    n = maps[-1].n_dims
    order: list[int] = []
    for expr in maps[-1].results:
        if isinstance(expr, ir.AffineDimExpr) and expr.position not in order:
            order.append(expr.position)
    order += [d for d in range(n) if d not in order]
    if order == list(range(n)):
        return maps, iterators
    new_position = {old: new for new, old in enumerate(order)}
    substitution = ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(new_position[d]) for d in range(n)])
    renumbered = [ir.AffineMap.get(n, m.n_symbols, [e.compose(substitution) for e in m.results])
                  for m in maps]
    new_iterators = [iterators[old] for old in order]
    return renumbered, new_iterators


def cancel_conversions(function: ir.Operation) -> int:
    """Fold conversions of conversions (``A -> B -> A`` is the value, ``A -> B -> C`` is
    ``A -> C``) and identity conversions; erase unused ones. Returns how many went."""
    block = function.regions[0].blocks[0]
    removed = 0
    changed = True
    while changed:
        changed = False
        for op in [o.operation for o in block.operations]:
            if op.name != graph.LAYOUT_CONVERT:
                continue
            src, dst = _convert_layouts(op)
            inner = _owner(op.operands[0])
            if src == dst and op.operands[0].type == op.results[0].type:
                op.results[0].replace_all_uses_with(op.operands[0])
            elif inner is not None and inner.name == graph.LAYOUT_CONVERT and _convert_layouts(inner)[1] == src:
                inner_src = _convert_layouts(inner)[0]
                if inner_src == dst and inner.operands[0].type == op.results[0].type:
                    op.results[0].replace_all_uses_with(inner.operands[0])
                else:
                    op.operands[0] = inner.operands[0]
                    op.attributes["src_layout"] = graph.layout_attr(inner_src)
                    changed = True
                    continue
            if not list(op.results[0].uses):
                op.erase()
                removed += 1
                changed = True
    return removed


def lower_conversion(op: ir.Operation) -> ir.Value:
    """One ``graph.layout_convert`` as a reshape (only unit dims move) or a ``linalg.transpose``."""
    src, dst = _convert_layouts(op)
    permutation = layout_permutation(src, dst)
    value = op.operands[0]
    shape = _ranked(value).shape
    with op.location, ir.InsertionPoint(op):
        moved = [p for p in permutation if shape[p] != 1]
        if moved == sorted(moved):
            return reshapes.reshape(value, [shape[p] for p in permutation])
        return core.transpose(value, permutation)


@register_pass(
    "tilecraft-convert-layout",
    "Run NCHW convolutions and pooling in NHWC (filters transposed at compile time), "
    "propagate the layout through elementwise ops, pads, concats, pooling and reductions, and cancel "
    "back-to-back conversions",
    options={"layout": f"target layout (default {DEFAULT_LAYOUT}; supported: {', '.join(LAYOUTS)})"},
    prepare=graph.load,
)
def convert_layout_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: the default schedule vectorizes NHWC convolutions along contiguous channels
    (faster than NCHW, benchmarks/conv_layout.py), and converting once at the model's
    boundaries costs two transposes instead of two per convolution."""
    layout = parse_layout(options.get("layout", DEFAULT_LAYOUT))
    for function in defined_functions(module):
        LayoutRewriter(layout).run(function)
        if unit_height_conversions(function, layout):
            LayoutRewriter(layout.replace("H", ""), SOURCE_LAYOUT.replace("H", "")).run(function)


@register_pass(
    "tilecraft-lower-layout-converts",
    "Lower graph.layout_convert to linalg.transpose (or a reshape when only unit dims move)",
    prepare=graph.load,
)
def lower_layout_converts_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: the schedule stage knows linalg and tensor ops only."""
    for function in defined_functions(module):
        block = function.regions[0].blocks[0]
        for op in [o.operation for o in block.operations]:
            if op.name == graph.LAYOUT_CONVERT:
                op.results[0].replace_all_uses_with(lower_conversion(op))
                op.erase()
