"""A channel split of a channel shuffle shuffles only the channels it keeps, and a
convolution reading it reads the unshuffled channels: ``tilecraft-slice-channel-shuffles``.

Why: a ShuffleNet V2 unit concatenates its pass-through half ``x1`` and its branch's output
``b``, shuffles the channels in ``g`` groups (a reshape splitting the channels ``C`` into
``(g, C / g)``, a transpose of the two, a reshape merging them: one ``linalg.transpose`` in
NHWC after the layout pass, pipelines/graph/layout.py) and splits the result in halves
again: the first half is the next unit's pass-through, concatenated once more, the second
the next branch's input. So the whole shuffled tensor was written by the transpose, and its
first half then copied into the next concat (pipelines/tensor/concat_destinations.py puts a
part's *producer* in its slice of the concat, and a slice of the transpose's result has no
producer of its own): each unit moved its channels one and a half times, besides the
branch's own output.

Here, where every reader of a shuffle is such a split, each split becomes a shuffle of the
channels it keeps: with the shuffled channels ``c' = j * g + i`` (``i < g``, ``j < C / g``),
the slice ``[a, a + n)`` with ``a`` and ``n`` multiples of ``g`` is ``j`` in
``[a / g, (a + n) / g)`` for every ``i``: the transpose of the source's slice
``(g, [a / g, (a + n) / g))``. The pass-through half is then a transpose of its own, which
the concat puts straight into its slice of the next unit's concatenation, and the branch's
half one into a buffer of its own for the 1x1 convolution that reads it: every channel is
moved once per unit (the reshaped part: concat_destinations.py). Measured in
docs/performance.md, "Round 28: ShuffleNet": the half-shuffles cost a little more than the
whole one did, the copies they remove much more.

A convolution reading the whole shuffle (ShuffleNet's last unit feeds its final 1x1
convolution) reads the source instead, with its constant filter's input channels put in the
source's order (the inverse shuffle of the filter, which the constant folder evaluates):
``sum_c' S[c'] W[c'] = sum_c src[c] W[pos(c)]``, so that transpose is gone too.

General over the shuffle's form: any rank, the channels (any one dim) split into any number
of factors and permuted any way, any group count (odd ones too), any number of splits,
aligned to the product of the factors that end up inside the first transposed one. Left
alone: a shuffle that anything besides such slices and convolutions reads (the downsampling
unit's input, read whole by a depthwise convolution: the whole transpose is needed there
anyway), slices across those factors, and dynamic shapes.
"""

from __future__ import annotations

import math
from typing import Mapping

from mlir import ir

from ...ir import core, reshapes
from ..ir_queries import defining_op, ops_where, reassociation_groups
from ..passes import register_pass
from ..tensor.static_slices import extract_static
from .constant_folding import ConstantAnalysis

SLICE_CHANNEL_SHUFFLES = "tilecraft-slice-channel-shuffles"


def _static_shape(value: ir.Value) -> list[int] | None:
    if not isinstance(value.type, ir.RankedTensorType):
        return None
    shaped = ir.RankedTensorType(value.type)
    return list(shaped.shape) if shaped.has_static_shape else None


def _attribute_ints(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def channel_shuffle(collapse: ir.Operation) -> tuple[ir.Operation, ir.Operation, int] | None:
    """``(expand, transpose, dim)`` when ``collapse`` ends a channel shuffle of dim ``dim``:
    a ``tensor.collapse_shape`` of a ``linalg.transpose`` (read by nothing else) of a
    ``tensor.expand_shape`` that splits ``dim`` only, the transpose permuting the split
    factors only and the collapse merging them back; all of static shape."""
    if collapse.name != "tensor.collapse_shape":
        return None
    transpose = defining_op(collapse.operands[0])
    if transpose is None or transpose.name != "linalg.transpose" or len(list(collapse.operands[0].uses)) != 1:
        return None
    expand = defining_op(transpose.operands[0])
    if expand is None or expand.name != "tensor.expand_shape":
        return None
    if any(_static_shape(v) is None for v in (expand.operands[0], expand.results[0], collapse.results[0])):
        return None
    groups = reassociation_groups(expand)
    if reassociation_groups(collapse) != groups:
        return None
    split = [d for d, group in enumerate(groups) if len(group) > 1]
    if len(split) != 1:
        return None
    dim = split[0]
    factors = groups[dim]
    permutation = _attribute_ints(transpose, "permutation")
    if any(permutation[d] != d for d in range(len(permutation)) if d not in factors) \
            or sorted(permutation[d] for d in factors) != factors:
        return None
    return expand, transpose, dim


def _aligned_channel_slice(op: ir.Operation, shape: list[int], dim: int, inner: int) -> tuple[int, int] | None:
    """(offset, size) along ``dim`` of ``op``, a ``tensor.extract_slice`` of a tensor of
    ``shape`` whole along every other dim with unit strides, when both are multiples of
    ``inner``; else None."""
    if op.name != "tensor.extract_slice" or len(op.operands) != 1:
        return None
    offsets, sizes = _attribute_ints(op, "static_offsets"), _attribute_ints(op, "static_sizes")
    strides = _attribute_ints(op, "static_strides")
    if any(ir.ShapedType.is_dynamic_size(v) for v in (*offsets, *sizes, *strides)) or any(s != 1 for s in strides):
        return None
    if _static_shape(op.results[0]) != sizes:
        return None  # rank-reducing
    if any((offsets[d], sizes[d]) != (0, shape[d]) for d in range(len(shape)) if d != dim):
        return None
    if offsets[dim] % inner or sizes[dim] % inner:
        return None
    return offsets[dim], sizes[dim]


def _filter_read_shuffled(op: ir.Operation, shuffled: ir.Value, dim: int, constants: ConstantAnalysis) -> bool:
    """Whether ``op`` is an NHWC convolution reading ``shuffled`` (channels ``dim`` = 3) as
    its input, not as its filter, with a compile-time constant filter."""
    return (op.name == "linalg.conv_2d_nhwc_hwcf" and dim == 3 and len(op.operands) == 3
            and op.operands[0] == shuffled and op.operands[1] != shuffled
            and _static_shape(op.operands[1]) is not None and constants.value_is_constant(op.operands[1]))


def _unshuffled_filter(conv: ir.Operation, shuffled_factors: list[int], permutation: list[int]) -> None:
    """Make ``conv`` read the shuffle's source: its filter's input channels (HWCF dim 2) put
    in the source's order, the inverse of the shuffle: ``W'[.., c, ..] = W[.., c', ..]``
    where source channel ``c`` lands at ``c'``. Built as the filter's expand, transpose and
    collapse, which the constant folder evaluates at compile time."""
    weights = conv.operands[1]
    kh, kw, channels, filters = _static_shape(weights)
    k = len(shuffled_factors)
    inverse = [permutation.index(d) for d in range(k)]
    with ir.InsertionPoint(conv), conv.location:
        split = reshapes.expand(weights, [[0], [1], list(range(2, 2 + k)), [2 + k]],
                                [kh, kw, *shuffled_factors, filters])
        moved = core.transpose(split, [0, 1, *[2 + p for p in inverse], 2 + k])
        conv.operands[1] = reshapes.collapse(moved, [[0], [1], list(range(2, 2 + k)), [2 + k]])


def slice_channel_shuffle(collapse: ir.Operation, constants: ConstantAnalysis | None = None) -> bool:
    """Rewrite the channel shuffle ending at ``collapse`` (see the module docstring); False,
    with nothing changed, when it is no shuffle or something besides aligned slices and
    constant-filter convolutions reads it."""
    found = channel_shuffle(collapse)
    if found is None:
        return False
    constants = constants if constants is not None else ConstantAnalysis()
    expand, transpose, dim = found
    shuffled = collapse.results[0]
    shape = _static_shape(shuffled)
    expanded = _static_shape(expand.results[0])
    permutation = _attribute_ints(transpose, "permutation")
    factors = reassociation_groups(expand)[dim]
    # The shuffled channels are the transposed factors' linear index: a slice aligned to the
    # product of all but the first is a slice of the first, source factor ``outer``.
    outer = permutation[factors[0]]
    inner = math.prod(expanded[permutation[d]] for d in factors[1:])
    users = [getattr(use.owner, "operation", use.owner) for use in shuffled.uses]
    convolutions = [user for user in users if _filter_read_shuffled(user, shuffled, dim, constants)]
    spans = {user: _aligned_channel_slice(user, shape, dim, inner) for user in users if user not in convolutions}
    if not users or any(span is None for span in spans.values()):
        return False
    source = expand.operands[0]
    for conv in convolutions:
        # Factor positions among the split ones, in the source's order and the shuffle's.
        local = [permutation[d] - factors[0] for d in factors]
        _unshuffled_filter(conv, [expanded[permutation[d]] for d in factors], local)
        conv.operands[0] = source
    for user, (offset, size) in spans.items():
        with ir.InsertionPoint(user), user.location:
            offsets = [offset // inner if d == outer else 0 for d in range(len(expanded))]
            sizes = [size // inner if d == outer else extent for d, extent in enumerate(expanded)]
            kept = extract_static(expand.results[0], offsets, sizes)
            moved = core.transpose(kept, permutation)
            new = reshapes.collapse(moved, reassociation_groups(collapse))
        user.results[0].replace_all_uses_with(new)
        user.erase()
    collapse.erase()
    transpose.erase()
    if not list(expand.results[0].uses):
        expand.erase()
    return True


@register_pass(
    SLICE_CHANNEL_SHUFFLES,
    "A channel shuffle (expand_shape, transpose of the split channels, collapse_shape) read only "
    "by channel slices aligned to its groups and constant-filter NHWC convolutions becomes one "
    "shuffle per slice of the channels it keeps; the convolutions read its source, their filters' "
    "input channels permuted",
)
def slice_channel_shuffles_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    constants = ConstantAnalysis()
    for collapse in ops_where(module, lambda op: op.name == "tensor.collapse_shape"):
        slice_channel_shuffle(collapse, constants)
