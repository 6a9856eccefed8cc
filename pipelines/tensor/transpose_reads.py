"""Transposes read through by their elementwise consumer: ``tilecraft-transposes-as-reads``.

Why: a ``linalg.transpose`` that only an elementwise op reads was a copy of its own. Swin's
window reverse (``[nh, nw, ws, ws, C] -> [nh, ws, nw, ws, C]``) before the residual add ran
as a transpose kernel writing the whole map and an add kernel reading it back: the two are
injective and elementwise ops with no anchor, and the schedule makes one loop nest only of
groups with an anchor (schedule/group.py), so the group ran op by op. Upstream's
``linalg-fuse-elementwise-ops`` (the simplify stage) fuses ``linalg.generic`` producers into
their consumers but not the named ``linalg.transpose``.

Here such a transpose becomes the equivalent ``linalg.generic`` (its input read through the
inverse permutation), which the elementwise fusion right after folds into the consumer: the
consumer reads the transpose's input at permuted indices and the copy is gone.

Only where that read stays a vector read: the permutation keeps the innermost dim in place
(the consumer's vectors run along it, contiguous in the input too; a transpose that moves
the innermost dim keeps its own plan, square tiles transposed in registers:
vector/transpose_shuffles.py), the transpose has one user, an all-parallel ``linalg.generic`` reading it
through a permutation map, directly or through reshapes of one user each (so the fusion
happens; a transpose left as a generic would lose its plan). Static shapes only.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import linalg

from ..ir_queries import RESHAPE_OPS, at_function_level, ops_where, users
from ..passes import register_pass

TRANSPOSES_AS_READS = "tilecraft-transposes-as-reads"


def _elementwise_reader(op: ir.Operation, value: ir.Value) -> bool:
    """Whether ``op`` is an all-parallel ``linalg.generic`` reading ``value`` as an input
    through a permutation map."""
    if op.name != "linalg.generic":
        return False
    iterators = [str(it) for it in ir.ArrayAttr(op.attributes["iterator_types"])]
    if not all("parallel" in it for it in iterators):
        return False
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    inputs = len(op.operands) - len(op.results)
    for index, operand in enumerate(list(op.operands)[:inputs]):
        if operand == value and not maps[index].is_permutation:
            return False
    return value in list(op.operands)[:inputs]


def _read_by_one_elementwise_op(value: ir.Value) -> bool:
    """Whether ``value``'s one reader is an elementwise op (``_elementwise_reader``), directly
    or through reshapes that each have one reader (``x + y.reshape(b, n, c)``: the fusion
    moves such reshapes out of the way, reshape propagation by expansion)."""
    while True:
        readers = users(value)
        if len(readers) != 1:
            return False
        if readers[0].name not in RESHAPE_OPS:
            return _elementwise_reader(readers[0], value)
        value = readers[0].results[0]


def transpose_as_read(transpose: ir.Operation) -> bool:
    """Replace one qualifying ``linalg.transpose`` (module docstring) by the equivalent
    ``linalg.generic``; False, changing nothing, when it does not qualify."""
    if transpose.name != "linalg.transpose" or not at_function_level(transpose):
        return False
    permutation = list(ir.DenseI64ArrayAttr(transpose.attributes["permutation"]))
    source, init = transpose.operands[0], transpose.operands[1]
    if not permutation or permutation[-1] != len(permutation) - 1 or permutation == sorted(permutation):
        return False
    if not ir.RankedTensorType(source.type).has_static_shape:
        return False
    if not _read_by_one_elementwise_op(transpose.results[0]):
        return False
    rank = len(permutation)
    # linalg.transpose: result dim k is input dim permutation[k]; over the result's loops the
    # input is read at (d_inverse[0], ..., d_inverse[rank - 1]).
    inverse = [0] * rank
    for k, p in enumerate(permutation):
        inverse[p] = k
    maps = [ir.AffineMap.get_permutation(inverse), ir.AffineMap.get_identity(rank)]
    with ir.InsertionPoint(transpose), transpose.location:
        generic = linalg.GenericOp(
            [init.type], [source], [init],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
            ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank))
        element = ir.RankedTensorType(source.type).element_type
        block = generic.regions[0].blocks.append(element, element)
        with ir.InsertionPoint(block):
            linalg.YieldOp([block.arguments[0]])
    if "tilecraft.group" in transpose.attributes:  # tagged IR (tilecraft-opt runs on any)
        generic.operation.attributes["tilecraft.group"] = transpose.attributes["tilecraft.group"]
    transpose.results[0].replace_all_uses_with(generic.results[0])
    transpose.erase()
    return True


@register_pass(TRANSPOSES_AS_READS,
               "transposes that keep the innermost dim, read by one elementwise op, as generics "
               "the elementwise fusion folds into that op")
def transposes_as_reads_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for transpose in ops_where(module, lambda op: op.name == "linalg.transpose"):
        transpose_as_read(transpose)
