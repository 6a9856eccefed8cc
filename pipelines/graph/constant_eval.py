"""Constant ops evaluated with numpy: the common folds of ``tilecraft-fold-constants`` without a JIT.

Why: the constant folder (constant_folding.py) JIT-compiled every folded subgraph, and for
ResNet-50 building and compiling those functions was most of the graph stage
(docs/performance.md, "Compile time (issue 43)"). Nearly all of what it folds is a short
list of ops whose exact result numpy computes as well: weight transposes and reshapes, and
per-channel elementwise arithmetic (BatchNormalization's ``(x - mean) / sqrt(var + eps) *
gamma + beta`` folded into the filter, the filter scaled by it). Those are evaluated here;
a value that needs anything else (a reduction, a ``tensor.pad``, an op outside the list, a
fast-math flag) is left to the JIT, as before.

Why the results are bit-identical to the JIT's: each op is one IEEE operation per element,
in the element type (numpy float32 arithmetic rounds every ``+ - * /`` and ``sqrt``
correctly, as the scalar code the JIT runs at -O0 does, with no FMA contraction since the
ops carry no fast-math flags), in the same order as the op's body; no op here reorders or
reassociates. Transposes and reshapes move bits only.
"""

from __future__ import annotations

from typing import Callable, Collection, Mapping

import numpy as np
from mlir import ir

from ...ir.maps import indexing_maps
from ...ir.resources import NUMPY_TYPES, constant_array, is_resource_constant

# Element types evaluated here: floats, where numpy's arithmetic is the IEEE operation.
_FLOAT_TYPES = {"f32": np.float32, "f64": np.float64}

_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply, "arith.divf": np.divide,
}
_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {"arith.negf": np.negative, "math.sqrt": np.sqrt}
_RESHAPES = frozenset({"tensor.expand_shape", "tensor.collapse_shape", "tensor.cast"})


class Unsupported(Exception):
    """An op (or an operand) this evaluator does not handle: its value is left to the JIT.
    Internal to this module: never escapes :func:`evaluate_constants`."""


def _tensor_dtype(value: ir.Value) -> type:
    tensor_type = ir.RankedTensorType(value.type)
    dtype = _FLOAT_TYPES.get(str(tensor_type.element_type))
    if dtype is None or not tensor_type.has_static_shape:
        raise Unsupported(str(value.type))
    return dtype


def _no_fast_math(op: ir.Operation) -> None:
    if "fastmath" in op.attributes and str(op.attributes["fastmath"]) != "#arith.fastmath<none>":
        raise Unsupported(f"{op.name} with {op.attributes['fastmath']}")


def _input_on_loops(array: np.ndarray, affine_map: ir.AffineMap, n_loops: int) -> np.ndarray:
    """``array`` as a view of rank ``n_loops`` that broadcasts over the loop space: operand
    dim ``i`` indexed by ``d_j`` lands on axis ``j``; an operand dim indexed by a constant
    is taken at that index; loops the operand does not read are axes of size 1."""
    positions: list[int] = []
    index: list[object] = []
    for expr in affine_map.results:
        if isinstance(expr, ir.AffineDimExpr):
            positions.append(expr.position)
            index.append(slice(None))
        elif isinstance(expr, ir.AffineConstantExpr):
            index.append(expr.value)
        else:
            raise Unsupported(f"indexing map {affine_map}")
    if len(set(positions)) != len(positions):
        raise Unsupported(f"indexing map {affine_map}: a diagonal")
    view = array[tuple(index)]
    order = sorted(range(len(positions)), key=positions.__getitem__)
    view = np.transpose(view, order)
    shape = [1] * n_loops
    for axis, position in enumerate(sorted(positions)):
        shape[position] = view.shape[axis]
    return view.reshape(shape)


def _float_scalar(constant: ir.Operation) -> np.ndarray:
    """The value of a scalar float ``arith.constant``, as a 0-d array of its type."""
    attr = constant.attributes["value"]
    dtype = _FLOAT_TYPES.get(str(constant.results[0].type))
    if not isinstance(attr, ir.FloatAttr) or dtype is None:
        raise Unsupported(f"constant {attr}")
    return np.array(ir.FloatAttr(attr).value, dtype=dtype)


def _captured_scalar(value: ir.Value) -> np.ndarray:
    """A value a body reads from outside it: a scalar float constant (BatchNormalization's
    epsilon), or :class:`Unsupported`."""
    owner = value.owner if isinstance(value, ir.OpResult) else None
    owner = getattr(owner, "operation", owner)
    if owner is None or owner.name != "arith.constant":
        raise Unsupported("a body reading a value from outside that is not a constant")
    return _float_scalar(owner)


def _generic(op: ir.Operation, operands: list[np.ndarray | None]) -> np.ndarray:
    """An all-parallel ``linalg.generic`` with one result whose body is arithmetic from
    :data:`_BINARY`/:data:`_UNARY` and float constants, not reading its output."""
    if len(op.results) != 1 or any("parallel" not in str(it) for it in op.attributes["iterator_types"]):
        raise Unsupported("a generic that is not elementwise")
    dtype = _tensor_dtype(op.results[0])
    maps = indexing_maps(op)
    n_inputs = len(op.operands) - 1
    out_map = maps[-1]
    if not out_map.is_permutation:
        raise Unsupported(f"output map {out_map}")
    n_loops = out_map.n_dims
    result_shape = ir.RankedTensorType(op.results[0].type).shape
    extents = [0] * n_loops
    for axis, expr in enumerate(out_map.results):
        extents[ir.AffineDimExpr(expr).position] = result_shape[axis]
    block = op.regions[0].blocks[0]
    if list(block.arguments[n_inputs].uses):
        raise Unsupported("a generic reading its output")
    scalars: dict[ir.Value, np.ndarray] = {}
    for i in range(n_inputs):
        array = operands[i]
        if array is None or array.dtype != dtype:
            raise Unsupported("an operand of another type")
        scalars[block.arguments[i]] = _input_on_loops(array, maps[i], n_loops)
    for inner in block.operations:
        inner = inner.operation
        if inner.name == "linalg.yield":
            value = scalars.get(inner.operands[0])
            if value is None:
                raise Unsupported("a yield of a value from outside the body")
            value = np.broadcast_to(value, extents)
            # Loop d_j is the output's axis where out_map places it.
            order = [ir.AffineDimExpr(expr).position for expr in out_map.results]
            return np.ascontiguousarray(np.transpose(value, order))
        if inner.name == "arith.constant":
            scalars[inner.results[0]] = _float_scalar(inner)
            continue
        _no_fast_math(inner)
        arguments = [scalars[v] if v in scalars else _captured_scalar(v) for v in inner.operands]
        if any(a.dtype != dtype for a in arguments) or str(inner.results[0].type) != str(ir.RankedTensorType(op.results[0].type).element_type):
            raise Unsupported("mixed element types in the body")
        with np.errstate(all="ignore"):  # inf and NaN are values here, as in the JIT'ed code
            if inner.name in _BINARY and len(arguments) == 2:
                scalars[inner.results[0]] = _BINARY[inner.name](*arguments).astype(dtype, copy=False)
            elif inner.name in _UNARY and len(arguments) == 1:
                scalars[inner.results[0]] = _UNARY[inner.name](arguments[0]).astype(dtype, copy=False)
            else:
                raise Unsupported(inner.name)
    raise Unsupported("a body without a yield")


def _evaluate_op(op: ir.Operation, operands: list[np.ndarray | None]) -> np.ndarray | None:
    """The value of ``op``'s one result; ``None`` for ``tensor.empty`` (no values: only an
    output that the evaluated consumers never read)."""
    if op.name == "tensor.empty":
        return None
    if any(a is None for a in operands):
        raise Unsupported(f"{op.name} reads a tensor.empty")
    if op.name == "arith.constant":
        if str(ir.RankedTensorType(op.results[0].type).element_type) not in NUMPY_TYPES:
            raise Unsupported(str(op.results[0].type))
        return constant_array(op)
    if op.name in _RESHAPES:
        shape = ir.RankedTensorType(op.results[0].type)
        if not shape.has_static_shape:
            raise Unsupported("a dynamic reshape")
        return operands[0].reshape(shape.shape)
    if op.name == "linalg.transpose":
        permutation = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        return np.ascontiguousarray(np.transpose(operands[0], permutation))
    if op.name == "linalg.generic":
        return _generic(op, operands)
    raise Unsupported(op.name)


def _value_operands(op: ir.Operation) -> list[ir.Value]:
    """The operands whose values ``op`` reads: a transpose or generic's init is its output
    buffer, read only when its body reads the output (which :func:`_generic` refuses)."""
    operands = list(op.operands)
    if op.name in ("linalg.transpose", "linalg.generic"):
        return operands[:-1]
    return operands


def evaluate_constants(ops: list[ir.Operation], weights: Mapping[ir.Value, np.ndarray],
                       wanted: Collection[ir.Value]) -> dict[ir.Value, np.ndarray]:
    """The values of ``wanted`` that numpy computes exactly, from ``ops`` (the constant ops,
    in program order; ``weights``: the ``dense_resource`` constants' arrays by result). A
    value that needs an op outside the supported set gets no entry: the caller evaluates it
    with the JIT. Intermediate values are dropped once their last reader has run (ResNet-50
    computes about 900 of them, most the size of a filter)."""
    wanted = set(wanted)
    readers: dict[ir.Value, int] = {}
    for op in ops:
        for value in _value_operands(op):
            readers[value] = readers.get(value, 0) + 1
    values: dict[ir.Value, np.ndarray | None] = {}
    for op in ops:
        if len(op.results) != 1 or not isinstance(op.results[0].type, ir.RankedTensorType):
            continue  # a scalar constant: read by the bodies that use it, not a tensor value
        result = op.results[0]
        if is_resource_constant(op):
            if result in weights:
                values[result] = weights[result]
            continue
        operands = _value_operands(op)
        if any(v not in values for v in operands):
            continue  # a producer numpy did not evaluate
        try:
            values[result] = _evaluate_op(op, [values[v] for v in operands])
        except Unsupported:
            continue
        for value in operands:
            readers[value] -= 1
            if readers[value] == 0 and value not in wanted:
                del values[value]
    return {value: array for value, array in values.items() if array is not None and value in wanted}
