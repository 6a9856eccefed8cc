"""Combine parallel matmuls that share their input: ``tilecraft-combine-parallel-matmul``.

TVM's CombineParallelDense on linalg: ``linalg.matmul(x, W_i)`` for i = 1..n, with the same
``x``, constant weights of the same K and zero-initialized accumulators (the Q, K and V
projections of an attention layer), become one ``linalg.matmul(x, concat(W_1..W_n))`` whose
result is sliced back (``tensor.extract_slice``). When every one of them is followed by a
bias add with a per-column constant (its only user), the bias adds are combined the same
way, so the slices come after the bias. The concatenated weights are constants: the
constant folder (which runs next) evaluates them at compile time.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ...ir.maps import has_indexing_maps, indexing_maps
from ...dialects import graph
from ...ir import core, reshapes
from ..ir_queries import defined_functions, is_zero_fill
from ..passes import register_pass
from .constant_folding import (
    ConstantAnalysis,
    affine_link,
    is_bias_add,
    single_user,
)

_MATMUL_MAPS = "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>]"


def _plain_matmul(op: ir.Operation, constants: ConstantAnalysis) -> bool:
    if op.name != "linalg.matmul" or len(op.results) != 1:
        return False
    if has_indexing_maps(op) and str(op.attributes["indexing_maps"]) != _MATMUL_MAPS:
        return False
    types = [v.type for v in op.operands] + [op.results[0].type]
    return (all(isinstance(t, ir.RankedTensorType) and ir.RankedTensorType(t).has_static_shape for t in types)
            and constants.value_is_constant(op.operands[1]) and is_zero_fill(op.operands[2]))


def _constant_cone(value: ir.Value, constants: ConstantAnalysis, found: set[ir.Operation]) -> None:
    owner = graph._op(value.owner) if isinstance(value, ir.OpResult) else None
    if owner is None or owner in found:
        return
    found.add(owner)
    for captured in graph._walk_values([owner])[1]:
        _constant_cone(captured, constants, found)


def _bias_of(matmul: ir.Operation, constants: ConstantAnalysis) -> tuple[ir.Operation, ir.Value] | None:
    """The single-user ``x + b[n]`` following ``matmul``, and ``b`` as a ``[N]`` tensor."""
    user = single_user(matmul.results[0])
    if user is None:
        return None
    position = affine_link(user, matmul.results[0], 1, constants)
    if position is None or not is_bias_add(user, position) or len(user.operands) != 3:
        return None
    bias = user.operands[1 - position]
    maps = indexing_maps(user)
    if not any(isinstance(e, ir.AffineDimExpr) and e.position == 1 for e in maps[1 - position].results):
        return None
    return user, bias


def combine_function(function: ir.Operation, constants: ConstantAnalysis) -> int:
    """Combine each set of parallel matmuls in ``function``; returns how many sets."""
    block = function.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    order = {op: i for i, op in enumerate(ops)}
    sets: dict[tuple, list[ir.Operation]] = {}
    for op in ops:
        if _plain_matmul(op, constants):
            weight = ir.RankedTensorType(op.operands[1].type)
            key = (op.operands[0], weight.shape[0], str(weight.element_type), str(op.results[0].type.element_type))
            sets.setdefault(key, []).append(op)
    combined = 0
    for matmuls in sets.values():
        if len(matmuls) < 2:
            continue
        biases = [_bias_of(m, constants) for m in matmuls]
        with_bias = all(b is not None for b in biases)
        first = matmuls[0]
        cone: set[ir.Operation] = set()
        for m in matmuls:
            _constant_cone(m.operands[1], constants, cone)
            if with_bias:
                _constant_cone(biases[matmuls.index(m)][1], constants, cone)
        for op in sorted(cone, key=lambda o: order.get(o, -1)):
            if order.get(op, -1) > order[first]:
                op.move_before(first)
        widths = [ir.RankedTensorType(m.results[0].type).shape[1] for m in matmuls]
        rows = ir.RankedTensorType(first.results[0].type).shape[0]
        total = sum(widths)
        element = ir.RankedTensorType(first.results[0].type).element_type
        with ir.InsertionPoint(first), first.location:
            k = ir.RankedTensorType(first.operands[1].type).shape[0]
            weight = tensor.concat(ir.RankedTensorType.get([k, total], element), 1,
                                   [m.operands[1] for m in matmuls])
            zero = arith.constant(element, 0.0 if isinstance(element, ir.FloatType) else 0)
            init = linalg.fill(zero, outs=[core.empty([rows, total], element)])
            product = linalg.matmul(first.operands[0], weight, outs=[init])
            if with_bias:
                bias_columns = tensor.concat(
                    ir.RankedTensorType.get([total], element), 0,
                    [reshapes.reshape(b, [w]) for (_, b), w in zip(biases, widths)])
                product = core.elementwise([product, bias_columns], element,
                                           lambda y, b: arith.addf(y, b), extents=[rows, total])
            offset = 0
            slices = []
            for w in widths:
                slices.append(tensor.extract_slice(
                    ir.RankedTensorType.get([rows, w], element), product, [], [], [],
                    [0, offset], [rows, w], [1, 1]))
                offset += w
        for index, (m, piece) in enumerate(zip(matmuls, slices)):
            old = biases[index][0] if with_bias else m
            old.results[0].replace_all_uses_with(piece)
            if with_bias:
                old.erase()
            m.erase()
        combined += 1
    return combined


@register_pass(
    "tilecraft-combine-parallel-matmul",
    "Combine matmuls that share their input and have constant weights (Q/K/V) into one "
    "matmul over concatenated weights, sliced back",
)
def combine_parallel_matmul_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: three [M,K]x[K,N] matmuls read the activation three times and each fills a
    thread pool for a small N; one [M,K]x[K,3N] matmul reads it once with 3x the work per
    task."""
    for function in defined_functions(module):
        combine_function(function, ConstantAnalysis())
