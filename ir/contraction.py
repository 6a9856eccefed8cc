"""Shared contraction emitters (used by the ONNX and PyTorch frontends).

One lowering per concept: :func:`matmul` (``numpy.matmul`` semantics), :func:`gemm`
(``alpha * op(A) @ op(B) + beta * C``: ONNX Gemm, PyTorch addmm/linear) and :func:`einsum`.
Products go to the *named* ops ``linalg.matmul`` / ``linalg.batch_matmul`` because the
default CPU schedule recognizes them (tiles, vectorizes and hoists their accumulators);
einsum builds one ``linalg.generic`` whose maps make it a contraction the schedule also
recognizes when it is one.

Half-precision products accumulate in f32 (see :func:`accumulator_type`) and are rounded
once at the end, as onnxruntime and PyTorch do on CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from . import core, reshapes
from ..errors import OperandError

Extent = "int | ir.Value"

_PARALLEL = "#linalg.iterator_type<parallel>"
_REDUCTION = "#linalg.iterator_type<reduction>"


# --- element types -------------------------------------------------------------------------


def accumulator_type(element: ir.Type) -> ir.Type:
    """The type sums of ``element`` products are accumulated in.

    Why: an f16 sum of a few hundred products already loses most of its digits, so f16
    (and bf16) accumulate in f32; every other type accumulates in itself (integers wrap
    around exactly as numpy's do).
    """
    if core.is_float(element) and element.width < 32:
        return ir.F32Type.get()
    return element


def round_to(value: ir.Value, element: ir.Type) -> ir.Value:
    """``value`` converted elementwise to ``element`` (no op when it already is)."""
    if core.tensor_type(value).element_type == element:
        return value
    return core.elementwise([value], element, lambda v: core.convert_scalar(v, element))


def generic_op(
    inputs: Sequence[ir.Value], inits: "ir.Value | Sequence[ir.Value]", maps: Sequence[ir.AffineMap],
    n_parallel: int, n_reduction: int, body: Callable[..., "ir.Value | Sequence[ir.Value]"],
) -> "ir.Value | list[ir.Value]":
    """A ``linalg.generic`` with parallel loops first; ``body(*in_scalars, *out_scalars)``
    returns the new output scalars. One init gives one result, a list gives a list."""
    single = isinstance(inits, ir.Value)
    inits = [inits] if single else list(inits)
    iterators = [_PARALLEL] * n_parallel + [_REDUCTION] * n_reduction
    op = linalg.GenericOp(
        [i.type for i in inits], list(inputs), inits,
        ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
        ir.ArrayAttr.get([ir.Attribute.parse(it) for it in iterators]),
    )
    block = op.regions[0].blocks.append(
        *[core.tensor_type(v).element_type for v in [*inputs, *inits]]
    )
    with ir.InsertionPoint(block):
        yielded = body(*block.arguments)
        linalg.YieldOp([yielded] if single else list(yielded))
    return op.results[0] if single else list(op.results)


# --- reshapes that keep the data in place --------------------------------------------------


def _product(extents: Sequence[Extent]) -> Extent:
    if all(isinstance(e, int) for e in extents):
        total = 1
        for e in extents:
            total *= e
        return total
    total: ir.Value | None = None
    for e in extents:
        value = core.index(e) if isinstance(e, int) else e
        total = value if total is None else arith.muli(total, value)
    return total


def collapse(value: ir.Value, groups: Sequence[Sequence[int]]) -> ir.Value:
    """``tensor.collapse_shape``: each group of consecutive dims becomes one dim."""
    if all(len(g) == 1 for g in groups):
        return value
    shape = core.static_shape(value)
    dims = []
    for group in groups:
        extents = [shape[d] for d in group]
        dims.append(
            ir.ShapedType.get_dynamic_size() if None in extents else _product(extents)
        )
    result = ir.RankedTensorType.get(dims, core.tensor_type(value).element_type)
    return tensor.collapse_shape(result, value, [list(g) for g in groups])


def expand(value: ir.Value, groups: Sequence[Sequence[int]], extents: Sequence[Extent]) -> ir.Value:
    """``tensor.expand_shape``: dim ``i`` of ``value`` becomes the dims ``groups[i]``,
    whose extents (ints or index values) are ``extents`` (no op when no group splits; a
    group with two dynamic extents is a ``tensor.reshape``: see ``reshapes.expand``)."""
    if all(len(g) == 1 for g in groups):
        return value
    return reshapes.expand(value, groups, extents)


def broadcast_to(value: ir.Value, extents: Sequence[Extent]) -> ir.Value:
    """``value`` materialized at ``extents`` under numpy broadcasting (no op if it is)."""
    shape = core.static_shape(value)
    if len(shape) == len(extents) and all(
        isinstance(e, int) and s == e for s, e in zip(shape, extents)
    ):
        return value
    element = core.tensor_type(value).element_type
    return core.elementwise([value], element, lambda v: v, extents=extents)


# --- matmul ----------------------------------------------------------------------------------


def _matmul_2d(a: ir.Value, b: ir.Value, accumulator: ir.Type) -> ir.Value:
    """``linalg.matmul`` of (M, K) by (K, N) into a zero-filled accumulator."""
    m, n = core.sizes(a)[0], core.sizes(b)[1]
    init = core.filled([m, n], 0, accumulator)
    return linalg.matmul(a, b, outs=[init])


def _batch_extents(a: ir.Value, b: ir.Value) -> list[Extent]:
    """numpy broadcast of the batch dims (all but the last two) of ``a`` and ``b``: a
    static extent other than 1 wins, then a dynamic one (assumed to match), then 1."""
    operands = [(core.static_shape(v)[:-2], core.sizes(v)[:-2]) for v in (a, b)]
    rank = max(len(static) for static, _ in operands)
    extents: list[Extent] = []
    for axis in range(rank):
        candidates = [
            (static[pos], sizes[pos])
            for static, sizes in operands
            if (pos := axis - (rank - len(static))) >= 0
        ]
        non_one = {s for s, _ in candidates if s is not None and s != 1}
        if len(non_one) > 1:
            shapes = [core.static_shape(v) for v in (a, b)]
            raise OperandError(f"matmul operands {shapes[0]} and {shapes[1]} do not broadcast")
        unknown = [size for s, size in candidates if s is None]
        extents.append(non_one.pop() if non_one else (unknown[0] if unknown else 1))
    return extents


def _batched(a: ir.Value, b: ir.Value, accumulator: ir.Type) -> ir.Value:
    """Product of (..., M, K) by (..., K, N), both of rank >= 2, in ``accumulator``."""
    a_rank, b_rank = core.tensor_type(a).rank, core.tensor_type(b).rank
    (m, k), n = core.sizes(a)[-2:], core.sizes(b)[-1]
    if b_rank == 2:
        # Why: (..., M, K) @ (K, N) is one big matmul of all rows: no batch loop, and the
        # weight is read once per tile instead of once per batch entry.
        rows = collapse(a, [list(range(a_rank - 1)), [a_rank - 1]])
        product = _matmul_2d(rows, b, accumulator)
        leading = core.sizes(a)[:-1]
        return expand(product, [list(range(a_rank - 1)), [a_rank - 1]], [*leading, n])
    batch = _batch_extents(a, b)
    a = broadcast_to(a, [*batch, m, k])
    b = broadcast_to(b, [*batch, core.sizes(b)[-2], n])
    depth = len(batch)
    groups = [list(range(depth)), [depth], [depth + 1]]
    a3, b3 = collapse(a, groups), collapse(b, groups)
    init = core.filled([core.sizes(a3)[0], m, n], 0, accumulator)
    product = linalg.batch_matmul(a3, b3, outs=[init])
    return expand(product, groups, [*batch, m, n])


def matmul(a: ir.Value, b: ir.Value, *, accumulator: ir.Type | None = None) -> ir.Value:
    """``numpy.matmul(a, b)``: 1-D operands, broadcast batch dims, dynamic extents.

    The result has ``a``'s element type; ``accumulator`` (default
    :func:`accumulator_type`) is the type the sums are formed in.
    """
    element = core.tensor_type(a).element_type
    accumulator = accumulator or accumulator_type(element)
    a_vector, b_vector = core.tensor_type(a).rank == 1, core.tensor_type(b).rank == 1
    if a_vector:
        a = expand(a, [[0, 1]], [1, core.sizes(a)[0]])
    if b_vector:
        b = expand(b, [[0, 1]], [core.sizes(b)[0], 1])
    product = _batched(a, b, accumulator)
    rank = core.tensor_type(product).rank
    if a_vector or b_vector:
        # Drop the unit dims the 1-D operands were given: merge them into a neighbour.
        keep = rank - int(a_vector) - int(b_vector)
        if keep == 0:
            product = tensor.collapse_shape(
                ir.RankedTensorType.get([], core.tensor_type(product).element_type), product, []
            )
        else:
            groups = [[d] for d in range(rank - 2)]
            tail = [rank - 2, rank - 1]
            if a_vector and b_vector:
                groups[-1] += tail
            else:
                groups.append(tail)
            product = collapse(product, groups)
    return round_to(product, element)


def integer_matmul(a: ir.Value, b: ir.Value, *, a_unsigned: bool, b_unsigned: bool) -> ir.Value:
    """``a @ b`` of 8-bit integer operands, the products and sums in i32; ``a`` is
    (..., M, K), ``b`` is (K, N).

    Why a ``linalg.generic`` of the raw 8-bit operands (each widened inside the body, with
    its own signedness) rather than a matmul of i32 copies: the widening stays visible to
    the pipeline, which can then run the product as u8 x s8 dot products
    (pipelines/graph/int8_matmul.py), and the operands are read at a quarter of the bytes.
    """
    i32 = ir.IntegerType.get_signless(32)
    a_rank = core.tensor_type(a).rank
    rows = collapse(a, [list(range(a_rank - 1)), [a_rank - 1]])
    m, n = core.sizes(rows)[0], core.sizes(b)[1]
    dims = [ir.AffineDimExpr.get(i) for i in range(3)]  # m, n, k
    maps = [ir.AffineMap.get(3, 0, [dims[0], dims[2]]), ir.AffineMap.get(3, 0, [dims[2], dims[1]]),
            ir.AffineMap.get(3, 0, [dims[0], dims[1]])]

    def body(x: ir.Value, w: ir.Value, acc: ir.Value) -> ir.Value:
        wide_x = core.convert_scalar(x, i32, unsigned=a_unsigned)
        wide_w = core.convert_scalar(w, i32, unsigned=b_unsigned)
        return arith.addi(acc, arith.muli(wide_x, wide_w))

    product = generic_op([rows, b], core.filled([m, n], 0, i32), maps, 2, 1, body)
    return expand(product, [list(range(a_rank - 1)), [a_rank - 1]], [*core.sizes(a)[:-1], n])


# --- gemm ------------------------------------------------------------------------------------


def _scale_scalar(factor: float, element: ir.Type) -> ir.Value:
    if not core.is_float(element) and float(factor) != int(factor):
        raise OperandError(f"a non-integral scale {factor} on integer type {element}")
    return core.scalar_constant(factor, element)


def gemm(
    a: ir.Value,
    b: ir.Value,
    c: ir.Value | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: bool = False,
    trans_b: bool = False,
) -> ir.Value:
    """``alpha * op(a) @ op(b) + beta * c`` on 2-D ``a``/``b`` (``op`` transposes when asked);
    ``c`` broadcasts to (M, N). Scale, bias and rounding happen in one elementwise pass.

    Frontends with a constant ``b`` should transpose it at import time instead of passing
    ``trans_b``: the product then reads it row by row.
    """
    element = core.tensor_type(a).element_type
    accumulator = accumulator_type(element)
    if trans_a:
        a = core.transpose(a, [1, 0])
    if trans_b:
        b = core.transpose(b, [1, 0])
    product = _matmul_2d(a, b, accumulator)
    use_c = c is not None and beta != 0
    if alpha == 1 and not use_c:
        return round_to(product, element)
    alpha_value = _scale_scalar(alpha, accumulator) if alpha != 1 else None
    beta_value = _scale_scalar(beta, accumulator) if use_c and beta != 1 else None
    add = arith.addf if core.is_float(accumulator) else arith.addi
    mul = arith.mulf if core.is_float(accumulator) else arith.muli

    def epilogue(p: ir.Value, *bias: ir.Value) -> ir.Value:
        total = p if alpha_value is None else mul(p, alpha_value)
        if bias:
            term = core.convert_scalar(bias[0], accumulator)
            total = add(total, term if beta_value is None else mul(term, beta_value))
        return core.convert_scalar(total, element)

    inputs = [product, c] if use_c else [product]
    return core.elementwise(inputs, element, epilogue, extents=core.sizes(product))


# --- einsum ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EinsumSpec:
    """A parsed einsum equation: one label per operand dim and per result dim."""

    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]


def _split_labels(term: str, rank: int, ellipsis_rank: int, where: str) -> list[str]:
    """The labels of one term; ``...`` becomes the last ``rank - letters`` ellipsis labels."""
    if "..." not in term:
        if "." in term:
            raise OperandError(f"einsum: malformed ellipsis in {where} {term!r}")
        labels = list(term)
    else:
        head, tail = term.split("...", 1)
        if "." in head or "." in tail:
            raise OperandError(f"einsum: more than one ellipsis in {where} {term!r}")
        covered = rank - len(head) - len(tail)
        if covered < 0:
            raise OperandError(f"einsum: {where} {term!r} has more labels than its rank {rank}")
        labels = [*head, *[f"...{i}" for i in range(ellipsis_rank - covered, ellipsis_rank)], *tail]
    for label in labels:
        if not label.startswith("...") and not label.isalpha():
            raise OperandError(f"einsum: invalid label {label!r} in {where} {term!r}")
    if len(labels) != rank:
        raise OperandError(f"einsum: {where} {term!r} has {len(labels)} labels for rank {rank}")
    return labels


def parse_einsum(equation: str, ranks: Sequence[int]) -> EinsumSpec:
    """Parse ``equation`` for operands of ``ranks`` (numpy rules, implicit output included)."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise OperandError(f"einsum {equation!r} names {len(terms)} operands, got {len(ranks)}")
    ellipsis_rank = max(
        (r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t), default=0
    )
    inputs = [_split_labels(t, r, ellipsis_rank, "operand") for t, r in zip(terms, ranks)]
    ellipsis = [f"...{i}" for i in range(ellipsis_rank)]
    if arrow:
        output = _split_labels(rhs, len(rhs.replace("...", "")) + ellipsis_rank, ellipsis_rank, "output")
    else:
        counts: dict[str, int] = {}
        for labels in inputs:
            for label in labels:
                counts[label] = counts.get(label, 0) + 1
        output = ellipsis + sorted(l for l, n in counts.items() if n == 1 and not l.startswith("..."))
    if len(set(output)) != len(output):
        raise OperandError(f"einsum {equation!r}: a label repeats in the output")
    known = {label for labels in inputs for label in labels}
    missing = [l for l in output if l not in known and not l.startswith("...")]
    if missing:
        raise OperandError(f"einsum {equation!r}: output labels {missing} appear in no operand")
    return EinsumSpec(tuple(tuple(l) for l in inputs), tuple(output))


def _label_extents(
    inputs: Sequence[Sequence[str]], operands: Sequence[ir.Value], output: Sequence[str]
) -> dict[str, Extent]:
    """Each label's extent: a static non-1 extent wins (size-1 dims broadcast), then a
    dynamic one, then 1."""
    found: dict[str, Extent] = {}
    for labels, operand in zip(inputs, operands):
        for position, (label, static) in enumerate(zip(labels, core.static_shape(operand))):
            current = found.get(label)
            if static is not None and static != 1:
                if isinstance(current, int) and current not in (1, static):
                    raise OperandError(f"einsum: label {label!r} has extents {current} and {static}")
                found[label] = static
            elif static is None and (current is None or current == 1):
                found[label] = tensor.dim(operand, core.index(position))
            elif current is None:
                found[label] = 1
    for label in output:
        found.setdefault(label, 1)
    return found


def _contract(
    operands: Sequence[ir.Value], inputs: Sequence[Sequence[str]], output: Sequence[str],
    extents: dict[str, Extent], accumulator: ir.Type,
) -> ir.Value:
    """One ``linalg.generic``: sum over the labels not in ``output`` of the operands'
    product, in ``accumulator``. Loops are the output labels (parallel) then the summed
    ones (reduction); an operand is read through the map of its labels, so a repeated
    label reads a diagonal and a size-1 dim broadcasts."""
    summed = list(dict.fromkeys(l for labels in inputs for l in labels if l not in output))
    loops = [*output, *summed]
    position = {label: d for d, label in enumerate(loops)}

    def operand_map(labels: Sequence[str], operand: ir.Value) -> ir.AffineMap:
        exprs = []
        for label, static in zip(labels, core.static_shape(operand)):
            broadcast = static == 1 and extents[label] != 1
            exprs.append(
                ir.AffineConstantExpr.get(0) if broadcast else ir.AffineDimExpr.get(position[label])
            )
        return ir.AffineMap.get(len(loops), 0, exprs)

    maps = [operand_map(l, o) for l, o in zip(inputs, operands)]
    maps.append(ir.AffineMap.get(len(loops), 0, [ir.AffineDimExpr.get(d) for d in range(len(output))]))
    out_extents = [extents[l] for l in output]
    init = core.filled(out_extents, 0, accumulator) if summed else core.empty(out_extents, accumulator)
    mul = arith.mulf if core.is_float(accumulator) else arith.muli
    add = arith.addf if core.is_float(accumulator) else arith.addi

    def body(*scalars: ir.Value) -> ir.Value:
        values = [core.convert_scalar(v, accumulator) for v in scalars[:-1]]
        product = values[0]
        for value in values[1:]:
            product = mul(product, value)
        return add(scalars[-1], product) if summed else product

    return generic_op(operands, init, maps, len(output), len(summed), body)


def einsum(equation: str, operands: Sequence[ir.Value]) -> ir.Value:
    """``numpy.einsum(equation, *operands)``; half precision accumulates in f32.

    One or two operands are one ``linalg.generic`` (a two-operand sum of products is the
    shape the schedule recognizes as a contraction). More are contracted pairwise, left
    to right, each step keeping only the labels still needed: the loop nest never spans
    every label at once (``ij,jk,kl->il`` is two matmuls, not one 4-deep nest).
    """
    spec = parse_einsum(equation, [core.tensor_type(o).rank for o in operands])
    element = core.tensor_type(operands[0]).element_type
    accumulator = accumulator_type(element)
    extents = _label_extents(spec.inputs, operands, spec.output)
    current, labels = operands[0], spec.inputs[0]
    if len(operands) == 1:
        return round_to(_contract([current], [labels], spec.output, extents, accumulator), element)
    for index in range(1, len(operands)):
        last = index == len(operands) - 1
        later = set(spec.output).union(*spec.inputs[index + 1:])
        kept = spec.output if last else [
            l for l in dict.fromkeys([*labels, *spec.inputs[index]]) if l in later
        ]
        current = _contract([current, operands[index]], [labels, spec.inputs[index]], kept,
                            extents, accumulator)
        labels = tuple(kept)
    return round_to(current, element)
