"""Store ``i1`` (bool) buffers one byte per element, as ``i8``.

Why this pass exists: MLIR 22's memref-to-LLVM conversion refuses sub-byte element types (a
``memref.load`` or ``memref.store`` of ``i1`` aborts the process on an assertion), and a
vector transfer of ``vector<Nxi1>`` lowers to an LLVM load/store of N *packed bits*. Numpy's
bool arrays, like C's ``bool``, hold one byte (0 or 1) per element. So after bufferization,
every ``memref<...xi1>`` becomes ``memref<...xi8>``: loads and vector reads of it are followed
by ``arith.trunci`` to ``i1``, stores and vector writes are preceded by ``arith.extui``, and
bool constants become byte constants. Arithmetic on ``i1`` values (masks, ``arith.select``)
is untouched; only memory changes. An op that touches a bool buffer in a way this pass does
not know raises, rather than silently reading packed bits.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from mlir import ir
from mlir.dialects import arith

from ..passes import register_pass
from ...errors import CompileError

WIDEN_BOOL_MEMORY = "tilecraft-widen-bool-memory"

# Ops that only move, view, allocate or pass buffers along: their element type is whatever
# their operands' and results' types say, so retyping those values is all they need.
_TYPE_AGNOSTIC = frozenset(
    {
        "memref.alloc", "memref.alloca", "memref.dealloc", "memref.subview", "memref.cast",
        "memref.reinterpret_cast", "memref.collapse_shape", "memref.expand_shape",
        "memref.extract_strided_metadata", "memref.extract_aligned_pointer_as_index",
        "memref.copy", "memref.get_global", "memref.dim", "memref.rank", "memref.transpose",
        "memref.reshape", "memref.view", "memref.realloc", "memref.assume_alignment",
        "memref.memory_space_cast", "memref.prefetch", "bufferization.dealloc",
        "gpu.alloc", "gpu.dealloc", "gpu.memcpy", "gpu.launch", "gpu.terminator",
        "func.return", "func.call", "func.call_indirect", "arith.select",
        "scf.for", "scf.if", "scf.while", "scf.parallel", "scf.forall", "scf.yield",
        "scf.condition", "scf.execute_region", "scf.in_parallel", "scf.reduce",
        "scf.reduce.return", "memref.alloca_scope", "memref.alloca_scope.return",
        "cf.br", "cf.cond_br",
    }
)


def _i1() -> ir.Type:
    return ir.IntegerType.get_signless(1)


def _i8() -> ir.Type:
    return ir.IntegerType.get_signless(8)


def _widened(value_type: ir.Type) -> ir.Type | None:
    """The i8 twin of an ``i1`` memref type, else ``None``."""
    if isinstance(value_type, ir.MemRefType):
        memref = ir.MemRefType(value_type)
        if memref.element_type == _i1():
            # loc: building a strided layout's type checks it and wants a place to report.
            return ir.MemRefType.get(memref.shape, _i8(), memref.layout, memref.memory_space,
                                     loc=ir.Location.unknown())
    elif isinstance(value_type, ir.UnrankedMemRefType):
        memref = ir.UnrankedMemRefType(value_type)
        if memref.element_type == _i1():
            return ir.UnrankedMemRefType.get(_i8(), memref.memory_space)
    return None


def _as_bytes(value_type: ir.Type) -> ir.Type:
    if isinstance(value_type, ir.VectorType):
        vector = ir.VectorType(value_type)
        return ir.VectorType.get(vector.shape, _i8(), scalable=vector.scalable_dims)
    return _i8()


def _retype_values(op: ir.Operation) -> None:
    """Widen ``op``'s i1-memref results and block arguments."""
    values = list(op.results)
    for region in op.regions:
        for block in region.blocks:
            values.extend(block.arguments)
    for value in values:
        widened = _widened(value.type)
        if widened is not None:
            value.set_type(widened)


def _truncate_result(op: ir.Operation, result: ir.Value) -> None:
    """Make ``result`` (a read of a byte buffer) bytes, and give its users ``trunci`` of it."""
    bool_type = result.type
    result.set_type(_as_bytes(bool_type))
    with ir.InsertionPoint.after(op), op.location:
        truncated = arith.TruncIOp(bool_type, result)
    result.replace_all_uses_except(truncated.result, truncated.operation)


def _extend_operand(op: ir.Operation, value: ir.Value) -> None:
    """Give ``op`` ``extui`` of ``value`` (a bool written to a byte buffer) instead."""
    with ir.InsertionPoint(op), op.location:
        extended = arith.ExtUIOp(_as_bytes(value.type), value)
    op.replace_uses_of_with(value, extended.result)


def _fix_access(op: ir.Operation) -> None:
    """Convert between bool values and the byte buffer ``op`` reads or writes."""
    name = op.name
    if name in ("memref.load", "vector.load", "vector.transfer_read"):
        if name == "vector.transfer_read":  # the padding scalar has the element type
            for operand in list(op.operands)[1:]:
                if operand.type == _i1():
                    _extend_operand(op, operand)
        _truncate_result(op, op.results[0])
    elif name in ("memref.store", "vector.store", "vector.transfer_write"):
        _extend_operand(op, op.operands[0])
    else:
        raise CompileError(
            f"{WIDEN_BOOL_MEMORY}: {name} on a bool (i1) buffer is not supported: {op}"
        )


def _widen_global(op: ir.Operation) -> None:
    memref_type = ir.TypeAttr(op.attributes["type"]).value
    widened = _widened(memref_type)
    if widened is None:
        return
    op.attributes["type"] = ir.TypeAttr.get(widened)
    if "initial_value" not in op.attributes:
        return
    initial = op.attributes["initial_value"]
    if not isinstance(initial, ir.DenseIntElementsAttr):
        return  # uninitialized (a unit attribute)
    shape = ir.MemRefType(widened).shape
    tensor_type = ir.RankedTensorType.get(shape, _i8())
    dense = ir.DenseIntElementsAttr(initial)
    if dense.is_splat:
        bit = int(ir.IntegerAttr(dense.get_splat_value()).value) & 1
        op.attributes["initial_value"] = ir.DenseElementsAttr.get_splat(
            tensor_type, ir.IntegerAttr.get(_i8(), bit)
        )
    else:
        values = np.array([int(bool(dense[i])) for i in range(len(dense))], dtype=np.int8)
        op.attributes["initial_value"] = ir.DenseElementsAttr.get(
            values.reshape(shape), type=_i8(), context=op.context
        )


def _retype_function(op: ir.Operation) -> None:
    function_type = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
    body = op.regions[0].blocks
    inputs = (
        [arg.type for arg in body[0].arguments]
        if len(body)
        else [_widened(t) or t for t in function_type.inputs]
    )
    results = [_widened(t) or t for t in function_type.results]
    op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def widen_bool_memory(module: ir.Operation) -> None:
    """Rewrite every ``i1`` buffer of ``module`` (a ``builtin.module``) as an ``i8`` buffer."""
    ops: list[ir.Operation] = []
    module.walk(lambda op: ops.append(op) or ir.WalkResult.ADVANCE, ir.WalkOrder.PRE_ORDER)
    accesses = [
        op for op in ops
        if op.name not in _TYPE_AGNOSTIC and any(_widened(v.type) for v in op.operands)
    ]
    # Types first, so every access below sees byte buffers whatever the visiting order.
    for op in ops:
        _retype_values(op)
    for op in ops:
        if op.name == "memref.global":
            _widen_global(op)
        elif op.name == "func.func":
            _retype_function(op)
    for op in accesses:
        _fix_access(op)


@register_pass(
    WIDEN_BOOL_MEMORY,
    "Store i1 (bool) buffers as i8, one byte per element (numpy's bool layout)",
)
def widen_bool_memory_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    widen_bool_memory(module)
