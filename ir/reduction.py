"""Reductions and what is built from them: mean, arg-max, softmax, normalizations, top-k, scans.

Everything here is framework-neutral (tensor values in, tensor values out) so the ONNX and
PyTorch frontends share one lowering per concept. The central emitter is :func:`reduce`: a
``linalg.generic`` whose iteration space lists the kept dims first and the reduced dims
last, because the default CPU schedule vectorizes the innermost loop, and whose init is a
``linalg.fill`` of the combiner's identity (which the schedule fuses into each task).

Axes are non-negative and sorted here; frontends normalize their own conventions.

Why one module past 700 lines: every emitter here is built on :func:`reduce` and the scalar
combiners beside it (identity, combine, the NaN-aware comparisons), which the selections and
scans at the end share with the statistics; split, those helpers would be imported across
modules by their private names.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, math, scf, tensor

from . import core, movement, reshapes
from ..errors import OperandError

Body = Callable[..., ir.Value]

# The combiners :func:`reduce` knows; each is associative and has an identity.
KINDS = ("sum", "prod", "max", "min")

_PARALLEL = "#linalg.iterator_type<parallel>"
_REDUCTION = "#linalg.iterator_type<reduction>"


# --- scalar helpers (used inside linalg bodies) ------------------------------------------

def is_bool(element: ir.Type) -> bool:
    """i1, the element type of ONNX/PyTorch bool tensors."""
    return isinstance(element, ir.IntegerType) and element.width == 1


def identity(kind: str, element: ir.Type, *, unsigned: bool = False) -> ir.Value:
    """The neutral element of ``kind`` on ``element``: 0, 1, -inf/+inf or the int extremes.

    Why the extremes rather than the first element: an identity init lets the reduction
    start from a ``linalg.fill``, and an empty reduction (a zero extent) yields it, as
    numpy and ONNX define (ReduceMax of nothing is -inf, or the type's minimum for ints).
    """
    if kind == "sum":
        return core.scalar_constant(0, element)
    if kind == "prod":
        return core.scalar_constant(1, element)
    if kind not in ("max", "min"):
        raise OperandError(f"unknown reduction kind {kind!r}; expected one of {KINDS}")
    if core.is_float(element):
        return core.scalar_constant(-np.inf if kind == "max" else np.inf, element)
    if is_bool(element):  # i1 is treated as unsigned: max = or, min = and
        return core.scalar_constant(kind == "min", element)
    if unsigned:
        return arith.constant(element, 0 if kind == "max" else -1)  # -1: all bits set
    width = element.width
    return arith.constant(element, -(1 << (width - 1)) if kind == "max" else (1 << (width - 1)) - 1)


def combine(kind: str, acc: ir.Value, value: ir.Value, *, unsigned: bool = False) -> ir.Value:
    """``acc <kind> value``; float max/min propagate NaN like numpy's maximum/minimum."""
    is_float = core.is_float(acc.type)
    unsigned = unsigned or is_bool(acc.type)
    if kind == "sum":
        return arith.addf(acc, value) if is_float else arith.addi(acc, value)
    if kind == "prod":
        return arith.mulf(acc, value) if is_float else arith.muli(acc, value)
    if kind == "max":
        return arith.maximumf(acc, value) if is_float else (arith.maxui if unsigned else arith.maxsi)(acc, value)
    if kind == "min":
        return arith.minimumf(acc, value) if is_float else (arith.minui if unsigned else arith.minsi)(acc, value)
    raise OperandError(f"unknown reduction kind {kind!r}; expected one of {KINDS}")


def divide(a: ir.Value, b: ir.Value, *, unsigned: bool = False) -> ir.Value:
    """Scalar ``a / b``: float division, or integer division truncating toward zero."""
    if core.is_float(a.type):
        return arith.divf(a, b)
    return arith.divui(a, b) if unsigned else arith.divsi(a, b)


def _is_nan(value: ir.Value) -> ir.Value:
    return arith.cmpf(arith.CmpFPredicate.UNO, value, value)


def _greater(a: ir.Value, b: ir.Value, *, unsigned: bool = False) -> ir.Value:
    """``a > b`` where a NaN counts as larger than any number (numpy's sort order)."""
    if not core.is_float(a.type):
        return arith.cmpi(arith.CmpIPredicate.ugt if unsigned else arith.CmpIPredicate.sgt, a, b)
    ordered = arith.cmpf(arith.CmpFPredicate.OGT, a, b)
    nan_first = arith.andi(_is_nan(a), arith.cmpf(arith.CmpFPredicate.ORD, b, b))
    return arith.ori(ordered, nan_first)


def _same(a: ir.Value, b: ir.Value) -> ir.Value:
    """``a == b`` where NaN equals NaN (a tie in numpy's sort order)."""
    if not core.is_float(a.type):
        return arith.cmpi(arith.CmpIPredicate.eq, a, b)
    return arith.ori(arith.cmpf(arith.CmpFPredicate.OEQ, a, b), arith.andi(_is_nan(a), _is_nan(b)))


def _loop_index(dim: int) -> ir.Value:
    return linalg.IndexOp(dim).result


def _as_index(extent: int | ir.Value) -> ir.Value:
    return core.index(extent) if isinstance(extent, int) else extent


def _index_to(value: ir.Value, element: ir.Type) -> ir.Value:
    return arith.index_cast(element, value)


def accumulator_type(element: ir.Type) -> ir.Type:
    """Element type to accumulate ``element`` in: f32 for f16 (its 11-bit mantissa loses
    whole addends after ~2048 terms) and bf16 (8 bits: after ~256), the type itself
    otherwise."""
    return ir.F32Type.get() if isinstance(element, (ir.F16Type, ir.BF16Type)) else element


# --- shapes ------------------------------------------------------------------------------

def normalize_axes(axes: Sequence[int], rank: int) -> list[int]:
    """Sorted non-negative axes; negative ones count from the end. ``ValueError`` when out
    of range or repeated."""
    result = []
    for axis in axes:
        axis = int(axis)
        if not -rank <= axis < rank:
            raise OperandError(f"axis {axis} is out of range for rank {rank}")
        result.append(axis % rank)
    if len(set(result)) != len(result):
        raise OperandError(f"axes {list(axes)} repeat an axis")
    return sorted(result)


def count(extents: Sequence[int | ir.Value], element: ir.Type) -> ir.Value:
    """The product of ``extents`` (static or ``index`` values) as an ``element`` scalar."""
    static = int(np.prod([e for e in extents if isinstance(e, int)], dtype=np.int64))
    total: ir.Value | None = None
    for extent in extents:
        if not isinstance(extent, int):
            total = extent if total is None else arith.muli(total, extent)
    if total is None:
        return core.scalar_constant(static, element)
    if static != 1:
        total = arith.muli(total, core.index(static))
    as_int = _index_to(total, ir.IntegerType.get_signless(64))
    return core.convert_scalar(as_int, element) if element != as_int.type else as_int


def _unit_dim_groups(rank: int, unit: Sequence[int]) -> ir.ArrayAttr:
    """Reassociation between a rank-``rank`` shape and the same without its unit dims at
    ``unit``: each unit dim joins the group of the next other dim (or the last group)."""
    groups: list[list[int]] = []
    pending: list[int] = []
    for dim in range(rank):
        if dim in unit:
            pending.append(dim)
        else:
            groups.append(pending + [dim])
            pending = []
    if pending and groups:
        groups[-1].extend(pending)
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])


def expand_dims(value: ir.Value, positions: Sequence[int]) -> ir.Value:
    """Insert unit dims so that they sit at ``positions`` of the result (numpy's
    ``expand_dims``), as a ``tensor.expand_shape`` view: no data moves."""
    if not positions:
        return value
    rank = core.tensor_type(value).rank + len(positions)
    source_extents = iter(core.sizes(value))
    extents = [1 if dim in positions else next(source_extents) for dim in range(rank)]
    dynamic = ir.ShapedType.get_dynamic_size()
    static = [e if isinstance(e, int) else dynamic for e in extents]
    result_type = core.shape_type(extents, core.tensor_type(value).element_type)
    return tensor.expand_shape(result_type, value, _unit_dim_groups(rank, positions),
                               [e for e in extents if not isinstance(e, int)], static)


def drop_unit_dims(value: ir.Value, positions: Sequence[int]) -> ir.Value:
    """Inverse of :func:`expand_dims`: remove the unit dims at ``positions``
    (``tensor.collapse_shape``, a view)."""
    if not positions:
        return value
    rank = core.tensor_type(value).rank
    extents = [e for d, e in enumerate(core.sizes(value)) if d not in positions]
    result_type = core.shape_type(extents, core.tensor_type(value).element_type)
    return tensor.collapse_shape(result_type, value, _unit_dim_groups(rank, positions))


def channel_view(param: ir.Value, rank: int) -> ir.Value:
    """A per-channel ``[C]`` parameter as ``[C, 1, ..., 1]``, so that numpy broadcasting
    lines it up with dim 1 of a rank-``rank`` ``[N, C, ...]`` tensor; parameters of other
    ranks (non-spatial batch norm's ``[C, D1, ...]``) already line up and are kept."""
    param_rank = core.tensor_type(param).rank
    if param_rank != 1 or rank <= 2:
        return param
    return expand_dims(param, list(range(1, rank - 1)))


# --- the reduction generic ---------------------------------------------------------------

def _affine_maps(maps: Sequence[ir.AffineMap]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])


def _iterators(kinds: Sequence[str]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.Attribute.parse(k) for k in kinds])


def _generic(
    inputs: Sequence[ir.Value],
    maps: Sequence[ir.AffineMap],
    init: ir.Value,
    iterators: Sequence[str],
    body: Callable[..., ir.Value],
) -> ir.Value:
    """One-output ``linalg.generic``; ``body(*input_scalars, acc)`` returns the new output."""
    op = linalg.GenericOp(
        [init.type], list(inputs), [init], _affine_maps(maps), _iterators(iterators)
    )
    element = core.tensor_type(init).element_type
    block = op.regions[0].blocks.append(*[core.tensor_type(v).element_type for v in inputs], element)
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(*block.arguments)])
    return op.result


def _operand_map(
    value: ir.Value, extents: Sequence[int | ir.Value], loop_of: Sequence[int], n_loops: int
) -> ir.AffineMap:
    """numpy-broadcast access of ``value`` against ``extents``; tensor axis ``a`` is loop
    ``loop_of[a]``; unit dims broadcast against larger ones read index 0."""
    shape = core.static_shape(value)
    offset = len(extents) - len(shape)
    if offset < 0:
        raise OperandError(f"operand of shape {shape} has more dims than the reduced tensor ({len(extents)})")
    exprs = []
    for pos, extent in enumerate(shape):
        out = extents[offset + pos]
        broadcast = extent == 1 and not (isinstance(out, int) and out == 1)
        exprs.append(ir.AffineConstantExpr.get(0) if broadcast else ir.AffineDimExpr.get(loop_of[offset + pos]))
    return ir.AffineMap.get(n_loops, 0, exprs)


def reduce(
    x: ir.Value,
    axes: Sequence[int],
    kind: str,
    *,
    keepdims: bool = False,
    unsigned: bool = False,
    body: Body | None = None,
    extra: Sequence[ir.Value] = (),
    result_element: ir.Type | None = None,
) -> ir.Value:
    """Reduce ``x`` over ``axes`` with combiner ``kind`` (sum, prod, max, min).

    ``body(x_scalar, *extra_scalars)`` maps each element before it is combined (``abs``
    for an L1 norm, ``exp(x - max)`` for softmax); ``extra`` operands broadcast against
    ``x`` numpy-style (typically keepdims-shaped results of earlier reductions).
    ``result_element`` is the accumulator type (default: that of ``x``). Empty ``axes``
    reduce nothing: the result is ``body`` applied elementwise.

    Loop order: kept axes (in order), then reduced axes (in order) innermost; a body may
    read the position along reduced axis ``j`` with ``linalg.index(rank - len(axes) + j)``.
    """
    extents = core.sizes(x)
    rank = len(extents)
    axes = list(axes)
    kept = [a for a in range(rank) if a not in axes]
    loop_of = [0] * rank
    for loop, axis in enumerate(kept + axes):
        loop_of[axis] = loop
    element = result_element or core.tensor_type(x).element_type
    init = linalg.fill(identity(kind, element, unsigned=unsigned),
                       outs=[core.empty([extents[a] for a in kept], element)])
    operands = [x, *extra]
    maps = [_operand_map(v, extents, loop_of, rank) for v in operands]
    maps.append(ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) for d in range(len(kept))]))
    iterators = [_PARALLEL] * len(kept) + [_REDUCTION] * len(axes)

    def combine_body(*args: ir.Value) -> ir.Value:
        *scalars, acc = args
        value = body(*scalars) if body is not None else scalars[0]
        return combine(kind, acc, value, unsigned=unsigned)

    result = _generic(operands, maps, init, iterators, combine_body)
    return expand_dims(result, axes) if keepdims else result


def _linear_index(loops: Sequence[int], extents: Sequence[int | ir.Value]) -> ir.Value:
    """Inside a linalg body: the row-major position among the loops ``loops`` (of the
    given extents), as ``index``; with one loop, the position along it."""
    linear = _loop_index(loops[0])
    for loop, extent in zip(loops[1:], extents[1:]):
        linear = arith.addi(arith.muli(linear, _as_index(extent)), _loop_index(loop))
    return linear


# --- statistics built on reduce ----------------------------------------------------------

def _with_scalar(value: ir.Value, factor: ir.Value, op: Callable[..., ir.Value]) -> ir.Value:
    """``op(element, factor)`` on every element of ``value`` (``factor`` a scalar value)."""
    return core.elementwise([value], core.tensor_type(value).element_type, lambda v: op(v, factor))


def mean(x: ir.Value, axes: Sequence[int], *, keepdims: bool = False, unsigned: bool = False,
         result_element: ir.Type | None = None) -> ir.Value:
    """Arithmetic mean over ``axes`` (integer means truncate toward zero, like numpy's
    ``mean(dtype=int)``); dynamic extents are counted at run time."""
    element = result_element or core.tensor_type(x).element_type
    source = core.tensor_type(x).element_type
    convert = (lambda v: core.convert_scalar(v, element, unsigned=unsigned)) if element != source else None
    total = reduce(x, axes, "sum", keepdims=keepdims, unsigned=unsigned, body=convert, result_element=element)
    n = count([core.sizes(x)[a] for a in axes], element)
    return _with_scalar(total, n, lambda v, c: divide(v, c, unsigned=unsigned))


def log_sum_exp(x: ir.Value, axes: Sequence[int], *, keepdims: bool = False) -> ir.Value:
    """``log(sum(exp(x)))`` over ``axes``, shifted by the largest finite element so exp
    cannot overflow; with no finite element the shift is 0 (so all -inf gives -inf and
    a +inf gives +inf, where an infinite shift would give NaN)."""
    element = core.tensor_type(x).element_type
    acc = accumulator_type(element)
    neg_inf = core.scalar_constant(-np.inf, element)
    pos_inf = core.scalar_constant(np.inf, element)

    def finite_or_neg_inf(v: ir.Value) -> ir.Value:
        infinite = arith.cmpf(arith.CmpFPredicate.OEQ, math.absf(v), pos_inf)
        return arith.select(infinite, neg_inf, v)

    peak = reduce(x, axes, "max", keepdims=True, body=finite_or_neg_inf)
    zero = core.scalar_constant(0, element)
    shift = core.elementwise(
        [peak], acc,
        lambda m: core.convert_scalar(arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, m, neg_inf), zero, m), acc),
    )
    total = reduce(
        x, axes, "sum", keepdims=True, extra=[shift], result_element=acc,
        body=lambda v, s: math.exp(arith.subf(core.convert_scalar(v, acc), s)),
    )
    result = core.elementwise([total, shift], element,
                              lambda t, s: core.convert_scalar(arith.addf(math.log(t), s), element))
    return result if keepdims else drop_unit_dims(result, axes)


def arg_reduce(
    x: ir.Value, axes: Sequence[int], kind: str, *, keepdims: bool = False,
    select_last: bool = False, unsigned: bool = False,
) -> ir.Value:
    """int64 position of the max (``kind="max"``) or min over ``axes`` (row-major among
    them); ties go to the first position, or the last with ``select_last``; a NaN wins,
    like numpy's argmax.

    Two plain reductions, both vectorizable: the extreme value, then the min (or max) of
    the positions holding it.
    """
    best = reduce(x, axes, kind, keepdims=True, unsigned=unsigned)
    extents = core.sizes(x)
    axis_extents = [extents[a] for a in axes]
    reduced_loops = range(len(extents) - len(axes), len(extents))  # reduce() puts them last
    i64 = ir.IntegerType.get_signless(64)
    sentinel = arith.constant(i64, -1 if select_last else np.iinfo(np.int64).max)
    is_float = core.is_float(core.tensor_type(x).element_type)

    def position_if_best(v: ir.Value, b: ir.Value) -> ir.Value:
        if is_float:  # a NaN in x is the extreme (max/min propagate NaN), and only NaNs match it
            matches = arith.ori(arith.cmpf(arith.CmpFPredicate.OEQ, v, b), _is_nan(v))
        else:
            matches = arith.cmpi(arith.CmpIPredicate.eq, v, b)
        return arith.select(matches, _index_to(_linear_index(reduced_loops, axis_extents), i64), sentinel)

    return reduce(x, axes, "max" if select_last else "min", keepdims=keepdims,
                  body=position_if_best, extra=[best], result_element=i64)


def hardmax(x: ir.Value, axes: Sequence[int]) -> ir.Value:
    """1 at the first maximum over ``axes`` (row-major among them), 0 elsewhere."""
    winner = arg_reduce(x, axes, "max", keepdims=True)
    extents = core.sizes(x)  # an elementwise op's loops are x's dims, in order
    element = core.tensor_type(x).element_type
    one, zero = core.scalar_constant(1, element), core.scalar_constant(0, element)
    i64 = ir.IntegerType.get_signless(64)

    def one_hot(_v: ir.Value, w: ir.Value) -> ir.Value:
        here = _index_to(_linear_index(axes, [extents[a] for a in axes]), i64)
        return arith.select(arith.cmpi(arith.CmpIPredicate.eq, here, w), one, zero)

    return core.elementwise([x, winner], element, one_hot, extents=extents)


def softmax(x: ir.Value, axes: Sequence[int], *, log: bool = False) -> ir.Value:
    """Softmax (or log-softmax) over ``axes`` jointly, computed as ``exp(x - max)`` so no
    exponent overflows: a max pass, a sum-of-exp pass, and one elementwise pass (f16 is
    accumulated in f32).

    Softmax computes ``e = exp(x - max)`` once, as its own op that the sum and the last pass
    both read, and multiplies by ``1 / sum`` (loop-invariant along the row, hoisted out of
    the vectorized loop), as onnxruntime does. Why: the vector exp is ~35 instructions per
    16 lanes; computed in both passes (and a divide per element), BERT's 12x128x128
    attention softmax ran well behind onnxruntime per core (docs/performance.md). The fusion
    barrier keeps
    ``e`` from being fused (recomputed) into its two consumers."""
    element = core.tensor_type(x).element_type
    acc = accumulator_type(element)
    peak = reduce(x, axes, "max", keepdims=True)

    def shifted(v: ir.Value, m: ir.Value) -> ir.Value:
        return arith.subf(core.convert_scalar(v, acc), core.convert_scalar(m, acc))

    if log:
        total = reduce(x, axes, "sum", keepdims=True, extra=[peak], result_element=acc,
                       body=lambda v, m: math.exp(shifted(v, m)))
        return core.elementwise(
            [x, peak, total], element,
            lambda v, m, s: core.convert_scalar(arith.subf(shifted(v, m), math.log(s)), element),
            extents=core.sizes(x),
        )
    exps = core.elementwise([x, peak], acc, lambda v, m: math.exp(shifted(v, m)), extents=core.sizes(x))
    total = reduce(exps, axes, "sum", keepdims=True)
    return core.elementwise(
        [exps, total], element,
        lambda e, s: core.convert_scalar(arith.mulf(e, arith.divf(core.scalar_constant(1, acc), s)), element),
        extents=core.sizes(x),
    )


def _reciprocal_sqrt(value: ir.Value, epsilon: float) -> ir.Value:
    eps = core.scalar_constant(epsilon, value.type)
    return arith.divf(core.scalar_constant(1, value.type), math.sqrt(arith.addf(value, eps)))


def normalize(
    x: ir.Value,
    axes: Sequence[int],
    epsilon: float,
    *,
    scale: ir.Value | None = None,
    bias: ir.Value | None = None,
    compute_element: ir.Type | None = None,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """``(x - mean) / sqrt(var + epsilon) * scale + bias`` with mean and (population)
    variance over ``axes``; returns ``(y, mean, inv_std_dev)``, the statistics
    keepdims-shaped in ``compute_element`` (default: f32 for f16, else ``x``'s type).

    Layer, instance, group and mean-variance normalization are all this with different
    axes and parameter views; ``scale`` and ``bias`` broadcast numpy-style against ``x``.
    The variance is two-pass (``mean((x - mean)^2)``), which cannot go negative from
    cancellation as ``E[x^2] - E[x]^2`` can.
    """
    element = core.tensor_type(x).element_type
    ce = compute_element or accumulator_type(element)
    widen = lambda v: core.convert_scalar(v, ce)  # noqa: E731
    n = count([core.sizes(x)[a] for a in axes], ce)
    average = mean(x, axes, keepdims=True, result_element=ce)

    def squared_deviation(v: ir.Value, m: ir.Value) -> ir.Value:
        d = arith.subf(widen(v), m)
        return arith.mulf(d, d)

    spread = reduce(x, axes, "sum", keepdims=True, extra=[average], result_element=ce, body=squared_deviation)
    inv_std = core.elementwise([spread], ce, lambda s: _reciprocal_sqrt(arith.divf(s, n), epsilon))
    params = [p for p in (scale, bias) if p is not None]

    def affine(v: ir.Value, m: ir.Value, r: ir.Value, *sb: ir.Value) -> ir.Value:
        y = arith.mulf(arith.subf(widen(v), m), r)
        y = core.convert_scalar(y, element)
        rest = iter(sb)
        if scale is not None:
            y = arith.mulf(y, core.convert_scalar(next(rest), element))
        if bias is not None:
            y = arith.addf(y, core.convert_scalar(next(rest), element))
        return y

    y = core.elementwise([x, average, inv_std, *params], element, affine, extents=core.sizes(x))
    return y, average, inv_std


def batch_norm_inference(
    x: ir.Value, scale: ir.Value, bias: ir.Value, mean_: ir.Value, var: ir.Value, epsilon: float
) -> ir.Value:
    """``(x - mean) / sqrt(var + eps) * scale + bias`` with given statistics, as
    ``x * a + b``: ``a`` and ``b`` are computed once per channel (a small elementwise op),
    so the big pass is one multiply-add per element. Parameters broadcast against ``x``
    (use :func:`channel_view` for ``[C]`` parameters)."""
    element = core.tensor_type(x).element_type

    def factor(s: ir.Value, v: ir.Value) -> ir.Value:
        return arith.mulf(core.convert_scalar(s, element), _reciprocal_sqrt(core.convert_scalar(v, element), epsilon))

    a = core.elementwise([scale, var], element, factor)
    b = core.elementwise(
        [bias, mean_, a], element,
        lambda bb, m, aa: arith.subf(core.convert_scalar(bb, element), arith.mulf(core.convert_scalar(m, element), aa)),
    )
    return core.elementwise([x, a, b], element, lambda v, aa, bb: arith.addf(arith.mulf(v, aa), bb),
                            extents=core.sizes(x))


def lp_normalize(x: ir.Value, axis: int, p: int) -> ir.Value:
    """``x / ||x||_p`` along ``axis`` for p = 1 or 2; 0 where the norm is 0."""
    if p not in (1, 2):
        raise OperandError(f"p={p} is not supported (1 or 2)")
    element = core.tensor_type(x).element_type
    acc = accumulator_type(element)
    magnitude = (lambda v: math.absf(core.convert_scalar(v, acc))) if p == 1 else (
        lambda v: arith.mulf(core.convert_scalar(v, acc), core.convert_scalar(v, acc)))
    total = reduce(x, [axis], "sum", keepdims=True, body=magnitude, result_element=acc)
    norm = total if p == 1 else core.elementwise([total], acc, math.sqrt)
    zero = core.scalar_constant(0, acc)

    def by_norm(v: ir.Value, n: ir.Value) -> ir.Value:
        is_zero = arith.cmpf(arith.CmpFPredicate.OEQ, n, zero)
        return core.convert_scalar(arith.select(is_zero, zero, arith.divf(core.convert_scalar(v, acc), n)), element)

    return core.elementwise([x, norm], element, by_norm, extents=core.sizes(x))


def local_response_norm(x: ir.Value, size: int, alpha: float, beta: float, bias: float) -> ir.Value:
    """LRN across channels (dim 1 of ``[N, C, ...]``):
    ``x / (bias + alpha / size * sum of x^2 over a window of size channels) ^ beta``, the
    window ``[c - floor((size-1)/2), c + ceil((size-1)/2)]`` clipped to the tensor.

    The window is ``size`` channel-shifted slices of the zero-padded input, all read by
    one elementwise op: no reduction loop over an offset map (``c + k``), which the
    vectorizer does not handle.
    """
    element = core.tensor_type(x).element_type
    acc = accumulator_type(element)
    rank = core.tensor_type(x).rank
    low = (size - 1) // 2
    padded = core.pad_constant(x, [0, low] + [0] * (rank - 2), [0, size - 1 - low] + [0] * (rank - 2), 0)
    channels = core.sizes(x)[1]
    window = [movement.slice_axis(padded, 1, k, channels) for k in range(size)]
    coefficient = core.scalar_constant(alpha / size, acc)
    offset, exponent = core.scalar_constant(bias, acc), core.scalar_constant(beta, acc)

    def normalized(v: ir.Value, *neighbours: ir.Value) -> ir.Value:
        total = core.scalar_constant(0, acc)
        for w in neighbours:
            w = core.convert_scalar(w, acc)
            total = arith.addf(total, arith.mulf(w, w))
        denominator = math.powf(arith.addf(offset, arith.mulf(coefficient, total)), exponent)
        return core.convert_scalar(arith.divf(core.convert_scalar(v, acc), denominator), element)

    return core.elementwise([x, *window], element, normalized, extents=core.sizes(x))


# --- selections and scans (quadratic in the axis length, sort-free) ----------------------

def _leading_identity_map(rank: int) -> ir.AffineMap:
    """Over ``rank + 1`` loops, a rank-``rank`` tensor indexed by the first ``rank``."""
    return ir.AffineMap.get(rank + 1, 0, [ir.AffineDimExpr.get(d) for d in range(rank)])


def _axis_swapped_map(rank: int, axis: int, swap_to: int) -> ir.AffineMap:
    """Identity over ``rank + 1`` loops except that tensor axis ``axis`` reads loop ``swap_to``."""
    exprs = [ir.AffineDimExpr.get(swap_to if d == axis else d) for d in range(rank)]
    return ir.AffineMap.get(rank + 1, 0, exprs)


def cumulative(
    x: ir.Value, axis: int, kind: str = "sum", *, exclusive: bool = False, reverse: bool = False
) -> ir.Value:
    """Running sum or product along ``axis``: ``out[i] = x[j]`` combined for ``j <= i``
    (``j < i`` when ``exclusive``; ``j >= i`` / ``j > i`` when ``reverse``)."""
    if kind not in ("sum", "prod"):
        raise OperandError(f"cumulative {kind!r}: expected 'sum' or 'prod'")
    return _blocked_cumulative(x, axis, kind, exclusive, reverse)


# Scan lengths up to this are one triangular reduction (n^2 along the axis); longer ones are
# scanned in blocks of SCAN_BLOCK (:func:`_blocked_cumulative`).
SCAN_TRIANGLE_AT_MOST = 32
SCAN_BLOCK = 4


def _blocked_cumulative(x: ir.Value, axis: int, kind: str, exclusive: bool, reverse: bool) -> ir.Value:
    """A scan of a long static axis in blocks: the axis (padded with the identity to whole
    blocks) viewed as (blocks, SCAN_BLOCK); each block scanned alone (triangular, O(n * B)),
    each block's total combined, the totals scanned exclusively (recursively, so O(n * B)
    over all levels), and every element combined with its block's prefix. Why: the single
    triangular reduction is O(n^2): a running mean over 2048 steps took 94 ms against
    onnxruntime's 0.06. A short or dynamic axis keeps the single reduction."""
    extent = core.static_shape(x)[axis]
    if extent is None or extent <= SCAN_TRIANGLE_AT_MOST:
        return _cumulative(x, axis, kind, exclusive, reverse)
    element = core.tensor_type(x).element_type
    rank = core.tensor_type(x).rank
    blocks = -(-extent // SCAN_BLOCK)
    identity_value = 0 if kind == "sum" else 1
    padded = core.pad_constant(x, [0] * rank, [blocks * SCAN_BLOCK - extent if d == axis else 0 for d in range(rank)],
                               identity_value)
    sizes = core.sizes(padded)
    groups = [[d] for d in range(axis)] + [[axis, axis + 1]] + [[d + 1] for d in range(axis + 1, rank)]
    blocked = reshapes.expand(padded, groups, [*sizes[:axis], blocks, SCAN_BLOCK, *sizes[axis + 1:]])
    within = _cumulative(blocked, axis + 1, kind, exclusive, reverse)
    totals = reduce(blocked, [axis + 1], kind)                                # ..., blocks, ...
    before = _blocked_cumulative(totals, axis, kind, True, reverse)           # the other blocks' part
    before = reshapes.expand(before, groups, [*sizes[:axis], blocks, 1, *sizes[axis + 1:]])
    combined = core.elementwise([within, before], element, lambda w, b: combine(kind, w, b),
                                extents=core.sizes(within))
    return movement.slice_axis(reshapes.collapse(combined, groups), axis, 0, extent)


def _cumulative(x: ir.Value, axis: int, kind: str, exclusive: bool, reverse: bool) -> ir.Value:
    """

    A triangular reduction (loop ``j`` innermost, masked): O(n^2) along the axis but one
    structured, vectorizable op with static or dynamic extents.
    """
    element = core.tensor_type(x).element_type
    rank = core.tensor_type(x).rank
    extents = core.sizes(x)
    predicate = {
        (False, False): arith.CmpIPredicate.ule, (True, False): arith.CmpIPredicate.ult,
        (False, True): arith.CmpIPredicate.uge, (True, True): arith.CmpIPredicate.ugt,
    }[(exclusive, reverse)]
    identity = 0 if kind == "sum" else 1
    neutral = core.scalar_constant(identity, element)
    maps = [_axis_swapped_map(rank, axis, rank), _leading_identity_map(rank)]
    init = core.filled(extents, identity, element)

    def masked_combine(v: ir.Value, total: ir.Value) -> ir.Value:
        take = arith.cmpi(predicate, _loop_index(rank), _loop_index(axis))
        return combine(kind, total, arith.select(take, v, neutral))

    return _generic([x], maps, init, [_PARALLEL] * rank + [_REDUCTION], masked_combine)


# The largest static k that :func:`top_k` selects slot by slot in unrolled passes; up to a
# quarter of the axis, larger ones select in an ``scf.for`` over the slots (the same passes,
# one IR copy: unrolled, 64 slots took 14 s to compile); beyond, every element is ranked.
SELECTION_PASSES_AT_MOST = 16
SELECTION_LOOP_SHARE = 4


def _before_every_element(extents: Sequence, element: ir.Type, *, largest: bool,
                          unsigned: bool) -> tuple[ir.Value, ir.Value]:
    """A (value, position) that every element comes after in the order, at position -1: the
    type's top (largest first) or bottom, as the min/max reductions' identities, except NaN
    in place of +inf (NaN sorts above it)."""
    i64 = ir.IntegerType.get_signless(64)
    if largest and core.is_float(element):
        start = core.filled(extents, np.nan, element)
    else:
        start = linalg.fill(identity("min" if largest else "max", element, unsigned=unsigned),
                            outs=[core.empty(extents, element)])
    return start, core.filled(extents, -1, i64)


def _next_slot(x: ir.Value, axis: int, previous: ir.Value, previous_at: ir.Value, *, largest: bool,
               unsigned: bool) -> tuple[ir.Value, ir.Value]:
    """The first element along ``axis``, in the sort order, of those after (``previous``,
    ``previous_at``) (keepdims tensors): its value and int64 position. Three vectorizable
    reductions over the axis: the best value among the candidates, the first position
    holding it, and the value at that position (selected, not recomputed: a -0.0 keeps its
    sign). NaN sorts above every number (numpy's order): with ``largest`` the max reduction
    propagates it, so it comes first; otherwise the min reduction sees NaN as +inf and the
    position pass ranks NaN candidates after every number (position + n), so they come last."""
    element = core.tensor_type(x).element_type
    rank = core.tensor_type(x).rank
    is_float = core.is_float(element)
    i1, i64 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(64)
    extent = _index_to(_as_index(core.sizes(x)[axis]), i64)
    kind = "max" if largest else "min"
    last = arith.constant(i64, np.iinfo(np.int64).max)

    def position() -> ir.Value:
        return _index_to(_loop_index(rank - 1), i64)  # reduce() puts the reduced axis last

    def candidate(v: ir.Value, before: ir.Value, before_at: ir.Value) -> ir.Value:
        beyond = _greater(before, v, unsigned=unsigned) if largest else _greater(v, before, unsigned=unsigned)
        later = arith.cmpi(arith.CmpIPredicate.sgt, position(), before_at)
        return arith.ori(beyond, arith.andi(_same(v, before), later))

    def ranked(v: ir.Value) -> ir.Value:
        if largest or not is_float:
            return v
        return arith.select(_is_nan(v), core.scalar_constant(np.inf, element), v)

    neutral = identity(kind, element, unsigned=unsigned)
    best = reduce(x, [axis], kind, keepdims=True, unsigned=unsigned, extra=[previous, previous_at],
                  body=lambda v, before, at: arith.select(candidate(v, before, at), ranked(v), neutral))

    def first_position(v: ir.Value, before: ir.Value, before_at: ir.Value, best_value: ir.Value) -> ir.Value:
        here = arith.andi(candidate(v, before, before_at), _same(ranked(v), best_value))
        if not largest and is_float:  # a NaN only once no number is left
            here = arith.andi(here, arith.xori(_is_nan(v), arith.constant(i1, 1)))
            nan_rank = arith.select(arith.andi(candidate(v, before, before_at), _is_nan(v)),
                                    arith.addi(position(), extent), last)
            return arith.select(here, position(), nan_rank)
        return arith.select(here, position(), last)

    found = reduce(x, [axis], "min", keepdims=True, extra=[previous, previous_at, best], body=first_position,
                   result_element=i64)
    if not largest and is_float:
        found = core.elementwise([found], i64, lambda p: arith.select(
            arith.cmpi(arith.CmpIPredicate.sge, p, extent), arith.subi(p, extent), p))
    value = reduce(x, [axis], "max", keepdims=True, unsigned=unsigned, extra=[found],
                   body=lambda v, at: arith.select(arith.cmpi(arith.CmpIPredicate.eq, position(), at), v,
                                                   identity("max", element, unsigned=unsigned)))
    return value, found


def _top_k_by_passes(x: ir.Value, axis: int, k: int, *, largest: bool,
                     unsigned: bool) -> tuple[ir.Value, ir.Value]:
    """:func:`top_k` for a small static ``k``: slot ``j`` is :func:`_next_slot` after slot
    ``j - 1``, unrolled. Why: ranking every element against every other is O(n^2) along the
    axis; a classifier's top-5 over 1000 classes took 1.8 ms that way, a vocabulary's a second."""
    keep = list(core.sizes(x))
    keep[axis] = 1
    previous, previous_at = _before_every_element(keep, core.tensor_type(x).element_type,
                                                  largest=largest, unsigned=unsigned)
    values, positions = [], []
    for _ in range(k):
        previous, previous_at = _next_slot(x, axis, previous, previous_at, largest=largest, unsigned=unsigned)
        values.append(previous)
        positions.append(previous_at)
    return movement.concat(values, axis), movement.concat(positions, axis)


def _top_k_by_loop(x: ir.Value, axis: int, k: int, *, largest: bool,
                   unsigned: bool) -> tuple[ir.Value, ir.Value]:
    """:func:`top_k` for a larger static ``k``: the same slots in an ``scf.for``, each
    slot's (value, position) inserted at its offset and carried to the next."""
    element = core.tensor_type(x).element_type
    i64 = ir.IntegerType.get_signless(64)
    keep, out = list(core.sizes(x)), list(core.sizes(x))
    keep[axis], out[axis] = 1, k
    first, first_at = _before_every_element(keep, element, largest=largest, unsigned=unsigned)
    loop = scf.ForOp(core.index(0), core.index(k), core.index(1),
                     [core.empty(out, element), core.empty(out, i64), first, first_at])
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    offsets = [dynamic if d == axis else 0 for d in range(len(keep))]
    with ir.InsertionPoint(loop.body):
        values, positions, previous, previous_at = loop.inner_iter_args
        value, found = _next_slot(x, axis, previous, previous_at, largest=largest, unsigned=unsigned)
        at, ones = [loop.induction_variable], [1] * len(keep)
        values = tensor.insert_slice(value, values, at, [], [], offsets, keep, ones)
        positions = tensor.insert_slice(found, positions, at, [], [], offsets, keep, ones)
        scf.YieldOp([values, positions, value, found])
    return loop.results[0], loop.results[1]


def top_k(
    x: ir.Value, axis: int, k: int | ir.Value, *, largest: bool = True, unsigned: bool = False
) -> tuple[ir.Value, ir.Value]:
    """The ``k`` largest (or smallest) elements along ``axis``, sorted, with their int64
    positions; equal values keep their original order (lower index first), and NaN sorts
    above every number, as numpy's sort does.

    Sort-free: the rank of each element (how many elements precede it in the sorted order)
    is a reduction over a second copy of the axis; output slot ``j`` then takes the
    position and the value of rank ``j`` (two more reductions, since a gather by position
    does not vectorize). O(n^2 + k n) along the axis, in structured ops that work for
    dynamic extents too; ``k`` may be an ``index`` value known only at run time. A static
    ``k`` up to :data:`SELECTION_PASSES_AT_MOST` is selected slot by slot instead, O(k n)
    (:func:`_top_k_by_passes`), and one up to a quarter of a static axis likewise in a loop
    (:func:`_top_k_by_loop`).
    """
    if isinstance(k, int) and k <= SELECTION_PASSES_AT_MOST:
        return _top_k_by_passes(x, axis, k, largest=largest, unsigned=unsigned)
    extent = core.static_shape(x)[axis]
    if isinstance(k, int) and extent is not None and k * SELECTION_LOOP_SHARE <= extent:
        return _top_k_by_loop(x, axis, k, largest=largest, unsigned=unsigned)
    element = core.tensor_type(x).element_type
    rank = core.tensor_type(x).rank
    extents = core.sizes(x)
    i64 = ir.IntegerType.get_signless(64)
    identity_map = _leading_identity_map(rank)

    def precedes(other: ir.Value, mine: ir.Value) -> ir.Value:
        """``other`` (at loop ``rank``) comes before ``mine`` (at loop ``axis``)."""
        ahead = _greater(other, mine, unsigned=unsigned) if largest else _greater(mine, other, unsigned=unsigned)
        earlier = arith.cmpi(arith.CmpIPredicate.ult, _loop_index(rank), _loop_index(axis))
        return arith.ori(ahead, arith.andi(_same(other, mine), earlier))

    def count_preceding(mine: ir.Value, other: ir.Value, total: ir.Value) -> ir.Value:
        return arith.addi(total, arith.extui(i64, precedes(other, mine)))

    ranks = _generic(
        [x, x], [identity_map, _axis_swapped_map(rank, axis, rank), identity_map],
        core.filled(extents, 0, i64), [_PARALLEL] * rank + [_REDUCTION], count_preceding,
    )
    out_extents = list(extents)
    out_extents[axis] = k
    by_rank = [_axis_swapped_map(rank, axis, rank), _axis_swapped_map(rank, axis, rank), identity_map]
    iterators = [_PARALLEL] * rank + [_REDUCTION]

    def pick(zero: ir.Value, chosen: Callable[[ir.Value], ir.Value]) -> Body:
        """Sum over positions of ``chosen(value)`` where the rank equals the output slot,
        ``zero`` elsewhere: exactly one term is not ``zero``, so the sum is exact."""
        def body(r: ir.Value, v: ir.Value, total: ir.Value) -> ir.Value:
            slot = _index_to(_loop_index(axis), i64)
            here = arith.cmpi(arith.CmpIPredicate.eq, r, slot)
            return combine("sum", total, arith.select(here, chosen(v), zero))
        return body

    position = lambda _v: _index_to(_loop_index(rank), i64)  # noqa: E731
    indices = _generic([ranks, x], by_rank, core.filled(out_extents, 0, i64), iterators,
                       pick(arith.constant(i64, 0), position))
    # Values are summed the same way rather than gathered by index (a data-dependent
    # tensor.extract does not vectorize); -0.0 is the float zero that leaves every
    # value, -0.0 included, unchanged.
    neutral = -0.0 if core.is_float(element) else 0
    values = _generic([ranks, x], by_rank, core.filled(out_extents, neutral, element), iterators,
                      pick(core.scalar_constant(neutral, element), lambda v: v))
    return values, indices


# --- operands known only at run time -----------------------------------------------------
#
# ONNX may pass reduction axes or a scan axis as a tensor computed at run time. Which dims
# are reduced then decides the result's shape, so no single structured op can express it;
# instead each candidate dim is reduced under an ``scf.if`` on its runtime flag.

def _i1(value: bool) -> ir.Value:
    return arith.constant(ir.IntegerType.get_signless(1), int(value))


def _when(condition: ir.Value, result_type: ir.Type, then: Callable[[], ir.Value],
          otherwise: Callable[[], ir.Value]) -> ir.Value:
    """``scf.if`` yielding one value of ``result_type`` built by ``then`` / ``otherwise``."""
    op = scf.IfOp(condition, [result_type], has_else=True)
    for block, build in ((op.then_block, then), (op.else_block, otherwise)):
        with ir.InsertionPoint(block):
            scf.YieldOp([_cast_to(build(), result_type)])
    return op.results[0]


def _cast_to(value: ir.Value, result_type: ir.Type) -> ir.Value:
    return value if value.type == result_type else tensor.cast(result_type, value)


def axis_flags(axes: ir.Value, rank: int, *, empty_means_all: bool = False) -> list[ir.Value]:
    """Per dim ``d`` of a rank-``rank`` tensor, an i1 telling whether the runtime 1-D
    integer tensor ``axes`` (static or dynamic length) lists ``d`` or ``d - rank``; with
    ``empty_means_all`` an empty ``axes`` flags every dim.

    One small reduction over (dim, listed axis) computes all flags, whatever the length.
    """
    element = core.tensor_type(axes).element_type
    i1 = ir.IntegerType.get_signless(1)
    maps = [ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(1)]), ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(0)])]

    def lists_dim(value: ir.Value, hit: ir.Value) -> ir.Value:
        d = _index_to(_loop_index(0), element)
        from_end = arith.subi(d, arith.constant(element, rank))
        same = arith.ori(arith.cmpi(arith.CmpIPredicate.eq, value, d),
                         arith.cmpi(arith.CmpIPredicate.eq, value, from_end))
        return arith.ori(hit, same)

    listed = _generic([axes], maps, core.filled([rank], False, i1), [_PARALLEL, _REDUCTION], lists_dim)
    flags = [tensor.extract(listed, [core.index(d)]) for d in range(rank)]
    if not empty_means_all:
        return flags
    length = core.sizes(axes)[0]
    if isinstance(length, int):
        return flags if length else [_i1(True)] * rank
    empty = arith.cmpi(arith.CmpIPredicate.eq, length, core.index(0))
    return [arith.ori(flag, empty) for flag in flags]


def reduce_flagged(x: ir.Value, flags: Sequence[ir.Value], step: Callable[[ir.Value, int], ir.Value]) -> ir.Value:
    """Apply ``step(y, d)`` (a keepdims reduction of ``y`` over dim ``d``) for every dim
    whose runtime flag is set, one dim after the other.

    Reducing dim by dim equals the joint reduction for sum, prod, max, min and
    log-sum-exp (each is associative over disjoint index sets). The result keeps the rank;
    every candidate dim becomes dynamic, since only the run decides which are 1.
    """
    y = x
    for d, flag in enumerate(flags):
        t = core.tensor_type(y)
        dims = list(t.shape)
        dims[d] = ir.ShapedType.get_dynamic_size()
        result_type = ir.RankedTensorType.get(dims, t.element_type)
        y = _when(flag, result_type, lambda y=y, d=d: step(y, d), lambda y=y: y)
    return y


def flagged_count(x: ir.Value, flags: Sequence[ir.Value], element: ir.Type) -> ir.Value:
    """How many elements of ``x`` one result element of :func:`reduce_flagged` combines."""
    total = core.index(1)
    for extent, flag in zip(core.sizes(x), flags):
        total = arith.muli(total, arith.select(flag, _as_index(extent), core.index(1)))
    return core.convert_scalar(_index_to(total, ir.IntegerType.get_signless(64)), element)


def drop_flagged_dims(y: ir.Value, flags: Sequence[ir.Value], rank: int) -> ir.Value:
    """Remove the (unit) dims of ``y`` whose runtime flag is set; exactly ``rank`` remain
    (the caller knows how many are flagged). The result extents are computed at run time."""
    extents = [_as_index(e) for e in core.sizes(y)]
    zero = core.index(0)
    kept_before = zero
    result: list[ir.Value] = [zero] * rank
    for extent, flag in zip(extents, flags):
        for position in range(rank):
            lands_here = arith.andi(arith.xori(flag, _i1(True)),
                                    arith.cmpi(arith.CmpIPredicate.eq, kept_before, core.index(position)))
            result[position] = arith.addi(result[position], arith.select(lands_here, extent, zero))
        kept_before = arith.addi(kept_before, arith.select(flag, zero, core.index(1)))
    return reshapes.reshape(y, result)


def select_axis(axis: ir.Value, rank: int, result_type: ir.Type, build: Callable[[int], ir.Value]) -> ir.Value:
    """``build(d)`` for the dim ``d`` that the runtime integer scalar tensor ``axis`` names
    (negative counts from the end), as nested ``scf.if`` s: only the chosen branch runs."""
    shape = core.static_shape(axis)
    if shape not in ([], [1]):
        raise OperandError(f"a runtime axis must be a scalar or a 1-element tensor, got {axis.type}")
    value = tensor.extract(axis, [core.index(0)] * len(shape))

    def pick(d: int) -> ir.Value:
        if d == rank - 1:
            return build(d)
        hit = arith.ori(arith.cmpi(arith.CmpIPredicate.eq, value, arith.constant(value.type, d)),
                        arith.cmpi(arith.CmpIPredicate.eq, value, arith.constant(value.type, d - rank)))
        return _when(hit, result_type, lambda: build(d), lambda: pick(d + 1))

    return pick(0)
