"""``tilecraft-fuse-attention``: scaled dot-product attention as one kernel that never stores
the scores (flash-attention's tiling over the keys, on a CPU's vector registers).

The frontends emit attention as the ops of its definition (ONNX's MatMul / Softmax / MatMul
of an exported transformer, ONNX's ``Attention`` function, PyTorch's
``scaled_dot_product_attention`` decomposition)::

    S = batch_matmul(Q, K^T)                     [B, M, N], B = batch x heads
    X = f(S, extras...)                          elementwise chain: scale, masks (optional)
    E = exp(X - rowmax(X));  P = E * (1 / rowsum(E))
    O = batch_matmul(P, V)                       [B, M, Dv]

Run op by op, S, X, E and P are each B x M x N floats written and read back: for BERT-base
(12 x 128 x 128) 786 KB each, four round trips through L2 per layer for a computation whose
inputs are 3 x 393 KB. This pass replaces the whole pattern by a call of a generated kernel
(one per site; identical ones are merged before LLVM) that keeps S in registers, in vectors
of the target's f32 lanes: attention_kernel.py builds it and describes its loops. A row
that stays fully masked ends 0 / 0 = NaN, as the unfused softmax does, unless the graph
zeroes such rows after the softmax (``RowZeroing``: ONNX's Attention, PyTorch's
decomposition); the kernel then writes 0 there.

The result differs from the unfused one by rounding only (the sums are formed in another
order). Why a generated kernel rather than a transform-dialect schedule of the five ops:
the online softmax rescales the accumulators by a factor computed inside the loop over
keys, which no tiling or fusion of the original ops expresses (MLIR has no
``linalg.softmax`` decomposition into an online form).

Key blocks a constant mask rules out are skipped. When the chain's last op adds a literal
constant mask of [M, N] (broadcast over the batch), or selects -inf by a literal bool one,
the pass reads, per query row, the range of keys the mask leaves finite (``key_ranges``).
Each register tile then loops only over the key blocks that meet its rows' ranges. A
causal mask does about half the work; a NaN or +inf score at a masked key no longer turns
its row into NaN there.

A chain that regroups the batch dims between its ops is not followed, whatever the reshape:
Swin's window attention (a bias per head over [windows, heads, M, N], then, reshaped to
[batch, windows, heads, M, N], the shifted windows' mask per window) stays unfused. Why:
fused through those reshapes (a path this matcher had), the whole Swin-T-style model ran
level with its unfused form (1.01x with 16-lane vectors, 0.99x with 8, one thread), and the
unfused window attention is level with onnxruntime's (docs/performance.md, "Swin's window
attention stays unfused").
A bias or mask is an extra like any other: read from its tensor at each call, a constant or
not.

Q and V are read in place through the transposes (and batch merges) that made them from
a projection's [seq, heads, d] result (``OperandView``): those copies are not made (a
padded V is still copied). K^T is read as it is, contiguous along the keys, except by a
bf16 kernel, which packs it anyway: it reads K in place too where D is a multiple of 32,
the keys need no padding and d is the source's innermost dim (``k_view_applies``: BERT's
[seq, heads, 64]), and transposes 16 x 16 blocks of bf16 pairs in registers.

With the option ``bf16`` (``precision="bf16"`` on 16-lane targets: ``with_bf16_products``,
which bf16_weights.with_bf16_weights applies) the kernel's two products are bf16 dot
products, its softmax f32 (attention_kernel.py's docstring); its name ends in ``_bf16``.

The kernel, its tile choices (``AttentionShape``) and its operands' descriptions (``Extra``,
``OperandView``) are attention_kernel.py's; this module matches and rewrites.

Matched only where the shapes are static, Q, K, V and the scores f32 (a chain operand may
be of any type; bools are passed as bytes), Dv is at most MAX_VALUE_DEPTH (64: BERT, GPT-2,
ViT; wider heads run as fast unfused, see there), and the intermediate values have no other
users. Anything else keeps the unfused ops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, NamedTuple

import numpy as np
from mlir import ir
from mlir.dialects import arith, func
from mlir.passmanager import PassManager

from ...ir.maps import has_indexing_maps, indexing_map_texts, operand_map
from ...errors import PipelineError
from ...ir import core
from ...ir.resources import literal_array
from ..ir_queries import defined_functions, defining_op, is_zero_fill, ops_where, users
from ..passes import bool_option, positive_int_option, register_pass
from .attention_kernel import (BF16_LANES, KEY_BLOCKS, LANES, MAX_VALUE_DEPTH, AttentionShape, Extra, OperandView,
                               bf16_products_apply, k_view_applies, kernel_module)
from .vector_bodies import clonable_body, clone_body, declared_function, is_all_parallel, is_identity

FUSE_ATTENTION_PASS = "tilecraft-fuse-attention"
KERNEL_PREFIX = "tilecraft_attention"
BF16_SUFFIX = "_bf16"  # what a kernel with bf16 products adds to its name
_MAX_CHAIN = 8     # elementwise ops between the scores and the softmax


@dataclass
class AttentionSite:
    """The ops of one matched attention: the two batch matmuls and the chain between them."""

    scores: ir.Operation                       # batch_matmul(Q, K^T)
    chain: list["ChainStep"]                   # the elementwise generics from S to X
    context: ir.Operation                      # batch_matmul(P, V)
    dead: list[ir.Operation]                   # every op the kernel replaces, last first
    shape: AttentionShape
    zeroing: "RowZeroing | None" = None        # rows whose output is set to 0


# ---- matching ------------------------------------------------------------------------------

def _single_user(value: ir.Value) -> ir.Operation | None:
    found = users(value)
    return found[0] if len(found) == 1 else None


def _map_results(generic: ir.Operation, index: int) -> list[str]:
    value = operand_map(generic, index)
    return [str(e) for e in value.results]


def _body(generic: ir.Operation) -> list[ir.Operation]:
    """The body's ops, the yield last."""
    return [op.operation for op in generic.regions[0].blocks[0].operations]


def _arguments(generic: ir.Operation) -> list[ir.Value]:
    return list(generic.regions[0].blocks[0].arguments)


def _is_f32(value: ir.Value) -> bool:
    return (isinstance(value.type, ir.RankedTensorType) and ir.RankedTensorType(value.type).has_static_shape
            and str(ir.RankedTensorType(value.type).element_type) == "f32")


def _constant_value(value: ir.Value) -> float | None:
    op = defining_op(value)
    if op is None or op.name != "arith.constant" or not isinstance(op.attributes["value"], ir.FloatAttr):
        return None
    return ir.FloatAttr(op.attributes["value"]).value


def _reduction_over_keys(value: ir.Value, rank: int) -> tuple[ir.Operation, ir.Operation, str] | None:
    """(expand_shape, reduction, its combining op's name) when ``value`` is ``expand_shape``
    (a trailing unit dim) of a ``linalg.generic`` that reduces its one input over the last
    dim by one op of its two block arguments, each used once; else ``None``."""
    expand = defining_op(value)
    if expand is None or expand.name != "tensor.expand_shape" or _single_user(value) is None:
        return None
    reduction = defining_op(expand.operands[0])
    if (reduction is None or reduction.name != "linalg.generic" or len(reduction.operands) != 2
            or len(users(reduction.results[0])) != 1):
        return None
    iterators = [str(i) for i in ir.ArrayAttr(reduction.attributes["iterator_types"])]
    if iterators != ['#linalg.iterator_type<parallel>'] * (rank - 1) + ['#linalg.iterator_type<reduction>']:
        return None
    if _map_results(reduction, 0) != [f"d{i}" for i in range(rank)] \
            or _map_results(reduction, 1) != [f"d{i}" for i in range(rank - 1)]:
        return None
    body = _body(reduction)
    if len(body) != 2 or sorted(map(str, body[0].operands)) != sorted(map(str, _arguments(reduction))) \
            or len(body[0].operands) != 2 or body[1].operands[0] != body[0].results[0]:
        return None
    return expand, reduction, body[0].name


def _row_reduction(value: ir.Value, combine: str, start: float, rank: int) -> ir.Value | None:
    """The reduced operand when ``value`` is a reduction over the keys
    (``_reduction_over_keys``) by ``combine`` from a fill of ``start``; else ``None``."""
    found = _reduction_over_keys(value, rank)
    if found is None or found[2] != combine:
        return None
    reduction = found[1]
    fill = defining_op(reduction.operands[1])
    if fill is None or fill.name != "linalg.fill" or _constant_value(fill.operands[0]) != start:
        return None
    return reduction.operands[0]


def _row_broadcast(generic: ir.Operation, index: int, rank: int) -> bool:
    return _map_results(generic, index) == [f"d{i}" for i in range(rank - 1)] + ["0"]


def _elementwise_with_row_value(op: ir.Operation | None, rank: int) -> bool:
    """An all-parallel generic of (a full tensor, one value per row broadcast over the
    keys): softmax's exp and normalization steps."""
    return (op is not None and is_all_parallel(op) and len(op.operands) == 3
            and _map_results(op, 0) == [f"d{i}" for i in range(rank)] and _row_broadcast(op, 1, rank))


def _softmax_input(p: ir.Value, rank: int) -> tuple[ir.Value, list[ir.Operation]] | None:
    """``X`` when ``p`` is softmax(X) over the last dim as reduction.softmax emits it:
    ``e = exp(X - rowmax(X))`` and ``e * (1 / rowsum(e))`` (or ``e / rowsum(e)``); with the
    ops to erase. X's users are the caller's to check (the max, the exp and perhaps the
    test for fully masked rows)."""
    normalize = defining_op(p)
    if not _elementwise_with_row_value(normalize, rank):
        return None
    e_arg, s_arg, _ = _arguments(normalize)
    body = _body(normalize)
    reciprocal = (len(body) == 3 and body[0].name == "arith.divf" and _constant_value(body[0].operands[0]) == 1.0
                  and body[0].operands[1] == s_arg and body[1].name == "arith.mulf"
                  and set(body[1].operands) == {e_arg, body[0].results[0]})
    divide = len(body) == 2 and body[0].name == "arith.divf" and list(body[0].operands) == [e_arg, s_arg]
    if not (reciprocal or divide) or body[-1].operands[0] != body[-2].results[0]:
        return None
    e, sums = normalize.operands[0], normalize.operands[1]
    if _row_reduction(sums, "arith.addf", 0.0, rank) != e or len(users(e)) != 2:
        return None
    exponential = defining_op(e)
    if not _elementwise_with_row_value(exponential, rank):
        return None
    x_arg, m_arg, _ = _arguments(exponential)
    body = _body(exponential)
    if (len(body) != 3 or body[0].name != "arith.subf" or list(body[0].operands) != [x_arg, m_arg]
            or body[1].name != "math.exp" or body[1].operands[0] != body[0].results[0]
            or body[2].operands[0] != body[1].results[0]):
        return None
    x, peaks = exponential.operands[0], exponential.operands[1]
    if _row_reduction(peaks, "arith.maximumf", float("-inf"), rank) != x:
        return None
    dead = [normalize, defining_op(sums), defining_op(defining_op(sums).operands[0]), exponential,
            defining_op(peaks), defining_op(defining_op(peaks).operands[0])]
    return x, dead


def _batch_view(value: ir.Value, rank: int, op_name: str) -> tuple[ir.Value, ir.Operation | None]:
    """``value`` seen with its batch dims merged (rank 3): through the reshape ``op_name``
    whose reassociation is [[batch dims], [M], [N]], or as it is at rank 3."""
    if rank == 3:
        return value, None
    reshape = defining_op(value) if op_name == "tensor.expand_shape" else _single_user(value)
    if reshape is None or reshape.name != op_name:
        return value, None
    groups = [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)] for g in ir.ArrayAttr(reshape.attributes["reassociation"])]
    if groups != [list(range(rank - 2)), [rank - 2], [rank - 1]]:
        return value, None
    return (reshape.operands[0] if op_name == "tensor.expand_shape" else reshape.results[0]), reshape


# linalg.batch_matmul's own maps (b, m, n, k): an op carrying others reads a transposed operand.
_BATCH_MATMUL_MAPS = ["(d0, d1, d2, d3) -> (d0, d1, d3)", "(d0, d1, d2, d3) -> (d0, d3, d2)",
                      "(d0, d1, d2, d3) -> (d0, d1, d2)"]


def _plain_batch_matmul(op: ir.Operation | None) -> bool:
    """A ``linalg.batch_matmul`` of static f32 operands, with its default maps, into zeros."""
    if op is None or op.name != "linalg.batch_matmul":
        return False
    if has_indexing_maps(op) and indexing_map_texts(op) != _BATCH_MATMUL_MAPS:
        return False
    return is_zero_fill(op.operands[2]) and all(_is_f32(v) for v in op.operands)


def _extra(generic: ir.Operation, index: int, rank: int) -> Extra | None:
    """The chain's extra operand ``index`` of ``generic`` read over the chain's domain (of
    ``rank`` dims), or ``None`` when the kernel cannot read it as vectors."""
    value = generic.operands[index]
    if not isinstance(value.type, ir.RankedTensorType) or not ir.RankedTensorType(value.type).has_static_shape:
        return None
    tensor_type = ir.RankedTensorType(value.type)
    element = tensor_type.element_type
    if str(element) == "i1":  # passed as bytes (see Extra)
        tensor_type = ir.RankedTensorType.get(tensor_type.shape, ir.IntegerType.get_signless(8))
    indexing_map = operand_map(generic, index)
    results = [str(e) for e in indexing_map.results]
    key = f"d{rank - 1}"
    along_keys = bool(results) and results[-1] == key
    if any(key in r for r in (results[:-1] if along_keys else results)):
        return None  # the key dim elsewhere than innermost: not a vector read
    return Extra(tensor_type, element, indexing_map, along_keys)


class ChainStep(NamedTuple):
    """One elementwise generic of the score chain and the position of the running value
    among its inputs."""

    generic: ir.Operation
    position: int


def _score_chain(x: ir.Value, rank: int) -> tuple[ir.Value, list[ChainStep], list[ir.Operation]] | None:
    """(S, the elementwise generics from S to ``x`` in order, the chain's ops from ``x`` back
    to S) when ``x`` is S through at most _MAX_CHAIN such generics over the same domain, S
    being the (reshaped) result of a plain batch matmul; else ``None``. A reshape between
    them ends the match (see the module docstring: Swin's regrouped window chains)."""
    def walk(value: ir.Value, depth: int) -> tuple[ir.Value, list[ChainStep], list[ir.Operation]] | None:
        source, reshape = _batch_view(value, rank, "tensor.expand_shape")
        # value's own users are the caller's to count (X's: the max, the exp, ...).
        if _plain_batch_matmul(defining_op(source)) and (reshape is None or len(users(source)) == 1):
            return value, [], []
        op = defining_op(value)
        if depth == _MAX_CHAIN or op is None:
            return None
        if not is_all_parallel(op) or not clonable_body(op) or not is_identity(operand_map(op, -1)):
            return None
        inputs = list(op.operands)[:-1]
        for position, operand in enumerate(inputs):
            if _map_results(op, position) != [f"d{i}" for i in range(rank)] or not _is_f32(operand):
                continue
            if len(users(operand)) != 1 or inputs.count(operand) != 1:
                continue
            if any(_extra(op, i, rank) is None for i in range(len(inputs)) if i != position):
                continue
            found = walk(operand, depth + 1)
            if found is not None:
                return found[0], [*found[1], ChainStep(op, position)], [op, *found[2]]
        return None

    return walk(x, 0)


@dataclass
class RowZeroing:
    """Output rows set to 0: the softmax's result went through ``select(c, 0, P)`` with ``c``
    one value per query row (how ONNX's Attention and PyTorch's decomposition of
    ``scaled_dot_product_attention`` turn the NaN of a fully masked row into 0).

    ``kind``: ``masked`` when ``c`` is "every key of the row is -inf" computed from X (the
    kernel knows it: the row's running max is still -inf; ``dead`` are the ops computing
    it), ``tensor`` when ``c`` is read from ``condition`` (independent of X)."""

    generic: ir.Operation
    kind: str
    condition: ir.Value | None = None
    condition_map: ir.AffineMap | None = None
    dead: tuple[ir.Operation, ...] = ()


def _splat_value(value: ir.Value) -> float | int | bool | None:
    """The element of a splat constant tensor (or of a ``linalg.fill`` with a constant)."""
    op = defining_op(value)
    if op is not None and op.name == "linalg.fill":
        return _scalar_constant(op.operands[0])
    if op is None or op.name != "arith.constant" or not isinstance(op.attributes["value"], ir.DenseElementsAttr):
        return None
    attr = ir.DenseElementsAttr(op.attributes["value"])
    if not attr.is_splat:
        return None
    element = attr.get_splat_value()
    if isinstance(element, ir.FloatAttr):
        return ir.FloatAttr(element).value
    if isinstance(element, ir.IntegerAttr):
        return ir.IntegerAttr(element).value
    if isinstance(element, ir.BoolAttr):
        return ir.BoolAttr(element).value
    return None


def _integer_constant(value: ir.Value) -> int | None:
    """The value of a scalar integer (or i1: 0 / 1) ``arith.constant``."""
    op = defining_op(value)
    if op is None or op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    if isinstance(attr, ir.BoolAttr):
        return int(ir.BoolAttr(attr).value)
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


def _scalar_constant(value: ir.Value) -> float | int | None:
    """The value of a scalar float or integer ``arith.constant``."""
    number = _constant_value(value)
    return number if number is not None else _integer_constant(value)


def _scalar_operand(generic: ir.Operation, value: ir.Value) -> float | int | None:
    """The constant a body operand ``value`` stands for: a captured scalar constant, or a
    block argument whose input is a splat constant."""
    arguments = _arguments(generic)
    if value in arguments:
        return _splat_value(generic.operands[arguments.index(value)])
    return _scalar_constant(value)


def _negation(value: ir.Value) -> tuple[ir.Value, ir.Operation] | None:
    """(x, op) when ``value`` is ``xori(x, true)`` of an i1 tensor, elementwise."""
    op = defining_op(value)
    if op is None or not is_all_parallel(op) or len(op.operands) != 2 or len(users(value)) != 1:
        return None
    body = _body(op)
    if len(body) != 2 or body[0].name != "arith.xori" or body[1].operands[0] != body[0].results[0]:
        return None
    argument = _arguments(op)[0]
    others = [v for v in body[0].operands if v != argument]
    if len(others) != 1 or _integer_constant(others[0]) not in (1, -1):  # i1 true
        return None
    return op.operands[0], op


def _strip_negation(value: ir.Value, ops: list[ir.Operation]) -> tuple[ir.Value, bool]:
    """(x, True) when ``value`` is ``xori(x, true)`` (its op appended to ``ops``), else
    (``value``, False)."""
    found = _negation(value)
    if found is None:
        return value, False
    ops.append(found[1])
    return found[0], True


def _all_keys_masked(condition: ir.Value, x: ir.Value, rank: int) -> list[ir.Operation] | None:
    """The ops computing ``condition`` when it is "every key of the row is -inf" of ``x``,
    kept as ``expand_shape`` of a reduction over the keys: ``all(x == -inf)`` or
    ``not(any(not(x == -inf)))`` and the like; else ``None``."""
    ops: list[ir.Operation] = []
    condition, negated_after = _strip_negation(condition, ops)
    found = _reduction_over_keys(condition, rank)
    if found is None:
        return None
    expand, reduction, combine = found
    start = _splat_value(reduction.operands[1])
    if combine in ("arith.maxui", "arith.ori") and start in (0, False):
        reduce_any = True
    elif combine in ("arith.minui", "arith.andi") and start in (1, -1, True):
        reduce_any = False
    else:
        return None
    ops += [expand, reduction]
    tested, negated_before = _strip_negation(reduction.operands[0], ops)
    compare = defining_op(tested)
    if compare is None or not is_all_parallel(compare) or len(users(tested)) != 1:
        return None
    body = _body(compare)
    if len(body) != 2 or body[0].name != "arith.cmpf":
        return None
    inputs = list(compare.operands)[:-1]
    arguments = _arguments(compare)
    if x not in inputs or _map_results(compare, inputs.index(x)) != [f"d{i}" for i in range(rank)]:
        return None
    x_argument = arguments[inputs.index(x)]
    others = [v for v in body[0].operands if v != x_argument]
    if len(others) != 1 or x_argument not in body[0].operands or _scalar_operand(compare, others[0]) != float("-inf"):
        return None
    predicate = ir.IntegerAttr(body[0].attributes["predicate"]).value
    equal = {1: True, 6: False, 13: False}.get(predicate)  # oeq; one; une
    if equal is None:
        return None
    ops.append(compare)
    # all(x == -inf) <=> not(any(x != -inf))
    is_equal = equal != negated_before
    if (is_equal and not reduce_any and not negated_after) or (not is_equal and reduce_any and negated_after):
        return ops
    return None


def _row_zeroing(p: ir.Value, rank: int) -> tuple[ir.Value, RowZeroing | None] | None:
    """(the softmax's result, the zeroing of rows) when ``p`` is ``select(c, 0, P)`` with ``c``
    per row; (``p``, ``None``) when ``p`` is not such a select; ``None`` when it is one this
    pass cannot take. ``kind`` stays unset (``""``) for a ``c`` that X's match decides."""
    op = defining_op(p)
    if op is None or not is_all_parallel(op) or len(op.operands) != 4:
        return p, None
    body = _body(op)
    arguments = _arguments(op)
    if len(body) != 2 or body[0].name != "arith.select" or body[1].operands[0] != body[0].results[0] \
            or not all(v in arguments for v in body[0].operands):
        return p, None
    c, zero, kept = (arguments.index(v) for v in body[0].operands)
    if len({c, zero, kept}) != 3 or _map_results(op, kept) != [f"d{i}" for i in range(rank)]:
        return None
    if _splat_value(op.operands[zero]) not in (0, 0.0) or len(users(op.operands[kept])) != 1:
        return None
    if any(f"d{rank - 1}" in r for r in _map_results(op, c)):
        return None  # c varies along the keys: not a row's
    condition = op.operands[c]
    if _splat_value(condition) in (0, False):
        return op.operands[kept], RowZeroing(op, "none")
    return op.operands[kept], RowZeroing(op, "", condition, operand_map(op, c))


def match_attention(context: ir.Operation, lanes: int = LANES) -> AttentionSite | None:
    """The attention whose second batch matmul is ``context`` (its kernel's vectors of
    ``lanes`` f32), or ``None``."""
    if not _plain_batch_matmul(context):
        return None
    p3, v3 = context.operands[0], context.operands[1]
    if len(users(p3)) != 1:
        return None
    collapse = defining_op(p3)
    if collapse is not None and collapse.name == "tensor.collapse_shape":
        p = collapse.operands[0]
        rank = ir.RankedTensorType(p.type).rank
        if _batch_view(p, rank, "tensor.collapse_shape") != (p3, collapse) or len(users(p)) != 1:
            return None
    else:
        p, rank, collapse = p3, 3, None
    zeroing_match = _row_zeroing(p, rank)
    if zeroing_match is None:
        return None
    p, zeroing = zeroing_match
    softmax = _softmax_input(p, rank)
    if softmax is None:
        return None
    x, softmax_ops = softmax
    x_users = 2
    if zeroing is not None and zeroing.kind == "":
        masked = _all_keys_masked(zeroing.condition, x, rank)
        if masked is not None:
            zeroing = RowZeroing(zeroing.generic, "masked", dead=tuple(masked))
            x_users = 3
        elif ir.RankedTensorType(zeroing.condition.type).has_static_shape:
            zeroing = RowZeroing(zeroing.generic, "tensor", zeroing.condition, zeroing.condition_map)
        else:
            return None
    if len(users(x)) != x_users:
        return None
    chain = _score_chain(x, rank)
    if chain is None:
        return None
    s, steps, chain_ops = chain
    s3, expand = _batch_view(s, rank, "tensor.expand_shape")
    scores = defining_op(s3)
    q3, kt3 = scores.operands[0], scores.operands[1]
    b, m, d = ir.RankedTensorType(q3.type).shape
    n = ir.RankedTensorType(kt3.type).shape[2]
    dv = ir.RankedTensorType(v3.type).shape[2]
    if dv > MAX_VALUE_DEPTH:
        return None
    domain = tuple(ir.RankedTensorType(s.type).shape)
    dead = [context, *([collapse] if collapse else []), *([zeroing.generic] if zeroing else []), *softmax_ops,
            *(zeroing.dead if zeroing else ()), *chain_ops,
            *([expand] if expand else []), scores]
    if zeroing is not None and zeroing.kind == "none":
        zeroing = None
    return AttentionSite(scores, steps, context, dead, AttentionShape(b, m, n, d, dv, domain, lanes), zeroing)


def operand_view(value: ir.Value) -> OperandView:
    """``value``'s view through single-use ``linalg.transpose`` ops and batch-merging
    ``tensor.collapse_shape`` ops (the identity view when there are none)."""
    indices = [ir.AffineDimExpr.get(i) for i in range(3)]
    while True:
        op = defining_op(value)
        if op is None or len(users(value)) != 1:
            break
        if op.name == "linalg.transpose":
            permutation = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
            source_indices = list(indices)
            for position, dim in enumerate(permutation):  # result dim i is input dim perm[i]
                source_indices[dim] = indices[position]
            indices, value = source_indices, op.operands[0]
        elif op.name == "tensor.collapse_shape":
            groups = [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)]
                      for g in ir.ArrayAttr(op.attributes["reassociation"])]
            source_shape = ir.RankedTensorType(op.operands[0].type).shape
            if any(len(group) != 1 for group in groups[1:]) or not ir.RankedTensorType(op.operands[0].type).has_static_shape:
                break  # only leading (batch) dims merged
            merged = []
            for k, dim in enumerate(groups[0]):
                stride = 1
                for later in groups[0][k + 1:]:
                    stride *= source_shape[later]
                merged.append(ir.AffineExpr.get_mod(ir.AffineExpr.get_floor_div(indices[0], stride), source_shape[dim]))
            indices, value = merged + indices[1:], op.operands[0]
        else:
            break
    return OperandView(value, ir.AffineMap.get(3, 0, indices))


def _row_key_mask(generic: ir.Operation, value: ir.Value, rank: int, shape: "AttentionShape") -> np.ndarray | None:
    """``value`` (an input of ``generic``) as an M x N array, when it is a literal constant
    read at (row, key) and broadcast over the batch dims."""
    results = _map_results(generic, list(generic.operands).index(value))
    array = literal_array(value)
    if array is None or results[-2:] != [f"d{rank - 2}", f"d{rank - 1}"]:
        return None
    if any(extent != 1 for extent in array.shape[:-2]):
        return None  # one mask per batch entry
    if array.size != shape.rows * shape.keys or array.shape[-2:] != (shape.rows, shape.keys):
        return None
    return array.reshape(shape.rows, shape.keys)


def key_ranges(site: "AttentionSite") -> np.ndarray | None:
    """Per query row, the [first, end) keys a literal mask leaves finite, as an M x 2 i32
    array; ``None`` unless the chain's last op sets X to -inf where a literal constant (read
    at (row, key), broadcast over the batch dims) says so, whatever the score:
    ``addf(x, mask)`` (-inf entries; short of a +inf or NaN score) or
    ``select(mask, x, -inf)`` / ``select(mask, -inf, x)`` (false / true entries)."""
    if not site.chain:
        return None
    generic, position = site.chain[-1]
    rank = len(site.shape.domain)
    body = _body(generic)
    arguments = _arguments(generic)
    inputs = list(generic.operands)[:-1]
    running = arguments[position]
    if len(body) != 2 or body[1].operands[0] != body[0].results[0]:
        return None
    op = body[0]
    finite = None
    if op.name == "arith.addf" and running in op.operands and len(inputs) == 2:
        other = [v for v in op.operands if v != running]
        if len(other) == 1 and other[0] in arguments:
            mask = _row_key_mask(generic, inputs[arguments.index(other[0])], rank, site.shape)
            if mask is not None and mask.dtype == np.float32:
                finite = mask != -np.inf
    elif op.name == "arith.select" and op.operands[0] in arguments:
        condition, on_true, on_false = op.operands
        mask = _row_key_mask(generic, inputs[arguments.index(condition)], rank, site.shape)
        if mask is not None and mask.dtype == np.bool_:
            if on_true == running and _scalar_operand(generic, on_false) == float("-inf"):
                finite = mask
            elif on_false == running and _scalar_operand(generic, on_true) == float("-inf"):
                finite = ~mask
    if finite is None:
        return None
    keys = site.shape.keys
    first = np.where(finite.any(axis=1), finite.argmax(axis=1), keys)
    end = np.where(finite.any(axis=1), keys - finite[:, ::-1].argmax(axis=1), 0)
    if (first == 0).all() and (end == keys).all():
        return None  # nothing to skip
    return np.stack([first, end], axis=1).astype(np.int32)


# ---- the rewrite ---------------------------------------------------------------------------

def _extras(site: AttentionSite) -> list[tuple[ir.Value, Extra]]:
    rank = len(site.shape.domain)
    found = []
    for generic, position in site.chain:
        inputs = list(generic.operands)[:-1]
        found += [(value, _extra(generic, i, rank)) for i, value in enumerate(inputs) if i != position]
    return found


def _define_scores_function(kernel: ir.Module, name: str, site: AttentionSite) -> None:
    """``name``'s body: the chain's generic bodies, one after the other, on vectors."""
    function = declared_function(kernel, name)
    with site.context.location:
        entry = function.add_entry_block()
    arguments = list(entry.arguments)
    running, extra_arguments = arguments[0], iter(arguments[1:])
    with ir.InsertionPoint(entry), site.context.location:
        for generic, position in site.chain:
            inputs = [running if i == position else next(extra_arguments)
                      for i in range(len(generic.operands) - 1)]
            running = clone_body(generic, inputs, site.shape.lanes)
        func.ReturnOp([running])


def _kernel_name(module: ir.Operation, shape: AttentionShape, bf16: bool) -> str:
    existing = {ir.StringAttr(op.operation.attributes["sym_name"]).value
                for op in module.regions[0].blocks[0].operations if "sym_name" in op.operation.attributes}
    base = (f"{KERNEL_PREFIX}_{shape.batch}x{shape.rows}x{shape.keys}x{shape.depth}x{shape.value_depth}"
            f"{BF16_SUFFIX if bf16 else ''}")
    return next(f"{base}_{i}" for i in range(len(existing) + 1) if f"{base}_{i}" not in existing)


def fuse_attention(module: ir.Operation, site: AttentionSite, threads: int, bf16: bool = False) -> None:
    """Replace ``site``'s ops by a call of a kernel generated for it; with ``bf16``, one whose
    two products are bf16 dot products where its shape allows (``bf16_products_apply``)."""
    shape = site.shape
    ranges = key_ranges(site)
    # The keys past the whole blocks as one narrower block: with 16-lane vectors, whose register
    # tile does not depend on the block (on AVX2 the block sets how many rows fit), no key ranges.
    if ranges is None and shape.lanes >= LANES:
        shape = replace(shape, key_tail=True)
    extras = _extras(site)
    bf16 = bf16 and bf16_products_apply(shape)
    name = _kernel_name(module, shape, bf16)
    scores_function = f"{name}_scores" if site.chain else None
    zeroing = site.zeroing
    zero_rows: str | Extra | None = None
    if zeroing is not None and zeroing.kind == "masked":
        zero_rows = "masked"
    elif zeroing is not None:  # read as bytes: i1 tensors are bytes in memory, not vectors
        bytes_type = ir.RankedTensorType.get(ir.RankedTensorType(zeroing.condition.type).shape,
                                             ir.IntegerType.get_signless(8))
        zero_rows = Extra(bytes_type, bytes_type.element_type, zeroing.condition_map, False)
    q_view = operand_view(site.scores.operands[0])
    v_view = operand_view(site.context.operands[1])
    if q_view.source == site.scores.operands[0]:
        q_view = None
    # V in place only when its keys need no padding and Dv stays innermost (vector reads).
    if v_view.source == site.context.operands[1] or shape.padded_keys != shape.keys \
            or v_view.indices.results[-1] != ir.AffineDimExpr.get(2):
        v_view = None
    # K^T in place only for a bf16 kernel, which packs it anyway (k_view_applies).
    k_view = operand_view(site.scores.operands[1]) if bf16 else None
    if k_view is not None and (k_view.source == site.scores.operands[1] or not k_view_applies(shape, k_view)):
        k_view = None
    with module.context:
        kernel = kernel_module(name, shape, [e for _, e in extras], threads, scores_function, zero_rows,
                               q_view, v_view, ranges is not None, bf16, k_view)
    if scores_function:
        _define_scores_function(kernel, scores_function, site)
        PassManager.parse("builtin.module(inline, symbol-dce)", module.context).run(kernel.operation)
    with ir.InsertionPoint(module.regions[0].blocks[0]):
        for op in kernel.body.operations:
            clone = op.operation.clone()
            clone.attributes["sym_visibility"] = ir.StringAttr.get("private")
    q = q_view.source if q_view else site.scores.operands[0]
    kt = k_view.source if k_view else site.scores.operands[1]
    v = v_view.source if v_view else site.context.operands[1]
    padding = shape.padded_keys - shape.keys
    with ir.InsertionPoint(site.context), site.context.location:
        if k_view is None:
            kt = core.pad_constant(kt, [0, 0, 0], [0, 0, padding], 0.0)
        if v_view is None:
            v = core.pad_constant(v, [0, 0, 0], [0, padding, 0], 0.0)
        rows = []
        if isinstance(zero_rows, Extra):
            i8 = ir.IntegerType.get_signless(8)
            rows = [core.elementwise([zeroing.condition], i8, lambda c: arith.extui(i8, c))]
        if ranges is not None:
            rows.append(core.constant(ranges, name="attention_key_ranges"))
        i8 = ir.IntegerType.get_signless(8)
        extra_values = [core.elementwise([value], i8, lambda c: arith.extui(i8, c)) if extra.is_bool else value
                        for value, extra in extras]
        call = func.CallOp([site.context.results[0].type], ir.FlatSymbolRefAttr.get(name),
                           [q, kt, v, *extra_values, *rows])
    site.context.results[0].replace_all_uses_with(call.results[0])
    for op in site.dead:
        output = defining_op(op.operands[-1]) if op.name.startswith("linalg.") else None
        op.erase()
        # The zero or -inf fill of a linalg op's output, unless shared.
        if output is not None and output.name == "linalg.fill" and not list(output.results[0].uses):
            output.erase()


@register_pass(
    FUSE_ATTENTION_PASS,
    "batch_matmul(Q, K^T), an elementwise chain (scale, masks), softmax over the keys and "
    "batch_matmul(P, V) become one kernel with an online softmax over blocks of keys",
    options={"num-threads": "threads the kernels' parallel loops are split for (default 1)",
             "lanes": f"f32 lanes of the kernels' vectors, the target's (default {LANES}; a divisor of "
                      f"{', '.join(map(str, KEY_BLOCKS))})",
             "bf16": f"1: Q K^T and p @ V as bf16 dot products, softmax and sums in f32 (precision='bf16'; "
                     f"needs lanes={BF16_LANES}); default 0"},
)
def fuse_attention_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    threads = positive_int_option("num-threads", options.get("num-threads", "1"))
    lanes = positive_int_option("lanes", options.get("lanes", str(LANES)))
    bf16 = bool_option("bf16", options.get("bf16", "0"))
    if bf16 and lanes != BF16_LANES:
        raise PipelineError(f"{FUSE_ATTENTION_PASS}: bf16=1 needs lanes={BF16_LANES} (vdpbf16ps's), got {lanes}")
    blocks = AttentionShape(1, 1, 1, 1, 1, (1, 1, 1), lanes).key_blocks
    if any(block % lanes for block in blocks):
        raise PipelineError(f"{FUSE_ATTENTION_PASS}: lanes={lanes} does not divide the key blocks {blocks}")
    for function in defined_functions(module):
        for op in ops_where(function, lambda o: o.name == "linalg.batch_matmul"):
            site = match_attention(op, lanes)
            if site is not None:
                fuse_attention(module, site, threads, bf16)


def with_bf16_products(element: str) -> str:
    """A pass-pipeline element of this pass with ``bf16=1`` added where its kernels' vectors
    have ``BF16_LANES`` lanes (``precision="bf16"``: bf16_weights.with_bf16_weights); any other
    element as it is."""
    name, _, rest = element.partition("{")
    if name != FUSE_ATTENTION_PASS:
        return element
    options = dict(item.partition("=")[::2] for item in rest.rstrip("}").split())
    if options.get("lanes", str(LANES)) != str(BF16_LANES):
        return element
    options["bf16"] = "1"
    return f"{FUSE_ATTENTION_PASS}{{{' '.join(f'{k}={v}' for k, v in options.items())}}}"
