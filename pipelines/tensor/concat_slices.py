"""Slices of a concatenation taken from its parts: ``tilecraft-slice-concat-parts``.

Why: ``torch.roll`` over several dims (Swin's shifted windows, both the shift and its
inverse; any rotation of a feature map) reaches the IR as one roll per dim, each a
``tensor.concat`` of two slices of the previous one (the ONNX exporter's Slice + Concat, and
tilecraft's torch frontend imports ``index_select`` by a rotation the same way:
frontend/torch/ops/shape.py). Each concat is a copy of the whole activation: a roll over
``k`` dims copied it ``k`` times (Swin-T's first stage, 56 x 56 x 96: 2.4 MB per roll, two
rolls per shifted block).

A slice of a concat that takes the concat's whole extent along the concatenated dim is the
concat of the same slice of each part::

    extract_slice(concat_d(a, b), whole along d)  ==  concat_d(extract_slice(a), extract_slice(b))

and a slice of a slice is one slice. Where every user of a concat is such a slice, the slices
are rewritten that way and the concat (and its copy) is gone: a roll over two dims becomes
a concat of concats of four blocks of the source, which tilecraft-concats-as-destinations
(concat_destinations.py, bufferize stage) builds in one buffer, each block one copy into its
place: the activation is copied once per roll, not once per dim.

Left alone (the rewrite would copy more, not less): a concat with any other user (it stays
materialized anyway), a slice that cuts the concatenated dim (a channel split of a concat,
which concat_destinations and call_destinations already read as a view), dynamic shapes,
non-unit strides, rank-reducing slices.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import tensor

from ..ir_queries import defining_op, ops_where, users
from ..passes import register_pass
from .static_slices import extract_static

SLICE_CONCAT_PARTS = "tilecraft-slice-concat-parts"


def _static_slice(op: ir.Operation) -> tuple[list[int], list[int]] | None:
    """(offsets, sizes) of a rank-preserving, unit-stride ``tensor.extract_slice`` with static
    offsets and sizes; ``None`` for any other op or slice."""
    if op.name != "tensor.extract_slice" or len(op.operands) != 1:  # dynamic offsets/sizes are operands
        return None
    source = ir.RankedTensorType(op.operands[0].type)
    result = ir.RankedTensorType(op.results[0].type)
    if source.rank != result.rank or not source.has_static_shape:
        return None
    if any(s != 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_strides"])):
        return None
    return (list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"])),
            list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"])))


def _slice_of(value: ir.Value, offsets: list[int], sizes: list[int]) -> ir.Value:
    """``value[offsets : offsets + sizes]``, taken from the source of ``value`` when ``value`` is
    itself a unit-stride static slice (one slice, not a slice of a slice); ``value`` itself
    when the slice is all of it."""
    if sizes == list(ir.RankedTensorType(value.type).shape) and not any(offsets):
        return value
    producer = defining_op(value)
    inner = _static_slice(producer) if producer is not None else None
    if inner is not None:
        offsets = [o + base for o, base in zip(offsets, inner[0])]
        value = producer.operands[0]
    return extract_static(value, offsets, sizes)


def _whole_along(slice_op: ir.Operation, dim: int, extent: int) -> bool:
    found = _static_slice(slice_op)
    return found is not None and found[0][dim] == 0 and found[1][dim] == extent


def slice_concat_parts(concat: ir.Operation) -> bool:
    """Rewrite every user of ``concat`` (all slices whole along its dim) as a concat of its
    parts' slices; False, changing nothing, when the concat does not qualify (module
    docstring)."""
    if concat.name != "tensor.concat":
        return False
    result_type = ir.RankedTensorType(concat.results[0].type)
    if not result_type.has_static_shape:
        return False
    dim = ir.IntegerAttr(concat.attributes["dim"]).value
    extent = result_type.shape[dim]
    readers = users(concat.results[0])
    if not readers or not all(_whole_along(op, dim, extent) for op in readers):
        return False
    parts = list(concat.operands)
    for reader in readers:
        offsets, sizes = _static_slice(reader)
        with ir.InsertionPoint(reader), reader.location:
            pieces = []
            for part in parts:
                size = ir.RankedTensorType(part.type).shape[dim]
                part_sizes = [size if d == dim else s for d, s in enumerate(sizes)]
                pieces.append(_slice_of(part, offsets, part_sizes))
            joined = tensor.ConcatOp(reader.results[0].type, dim, pieces)
            if "tilecraft.group" in concat.attributes:
                joined.operation.attributes["tilecraft.group"] = concat.attributes["tilecraft.group"]
        reader.results[0].replace_all_uses_with(joined.result)
        reader.erase()
    concat.erase()
    # The parts' own slices, read by the concat only, are dead now: dropped here, so the
    # stage needs no canonicalize after this pass (one there changed models it left alone).
    dead: list[ir.Operation] = []
    for part in parts:
        producer = defining_op(part)
        if (producer is not None and producer.name == "tensor.extract_slice" and not users(part)
                and producer not in dead):  # a part may be given twice (concat(a, a))
            dead.append(producer)
    for producer in dead:
        producer.erase()
    return True


@register_pass(SLICE_CONCAT_PARTS,
               "slices of a concat, whole along its dim, taken from its parts (one copy per "
               "multi-dim roll)")
def slice_concat_parts_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    # Producers first: a roll's first concat is rewritten before the second one is looked
    # at, so a roll over k dims collapses in one sweep.
    for concat in ops_where(module, lambda op: op.name == "tensor.concat"):
        slice_concat_parts(concat)
