"""``tilecraft-tensorize``: a linalg op a schedule tensorized becomes a call of its intrinsic.

``Schedule.tensorize`` (schedule/te) leaves the tile op annotated in the scheduled IR::

    linalg.matmul {tilecraft.tensorize = "gemv_update"} ins(%a, %b : ...) outs(%c : ...)

After one-shot bufferization its operands are subviews of the whole buffers; this pass
replaces the op by a call in destination-passing style, as pipelines/tensor/extern.py emits for
extern calls on tensors::

    %a_cast = memref.cast %a_view : memref<1x64xf32, strided<[64, 1], offset: ?>>
                                    to memref<?x?xf32, strided<[?, ?], offset: ?>>
    func.call @gemv_update(%a_cast, %b_cast, %c_cast)   (private, llvm.emit_c_interface)

and records the name in the module's ``tilecraft.externs``, so the JIT binds
``_mlir_ciface_gemv_update`` to the registered C function.

Why after bufferization: the intrinsic writes its output tile in place, a memref effect that
the tensor-level IR (where the tile is a value threaded through the loops) cannot express
without copies; bufferization first decides where each tile lives, and the call then writes
exactly there. Why a separate pass and not in the transform script: the script works on
tensors (the schedule renders before any buffer exists).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import func, memref

from ...errors import ExternSignatureError, PipelineError
from ...runtime.extern import ArgSpec, ExternFunction, registered
from .extern import declare, parameter_type
from ..ir_queries import ops_where
from ..passes import register_pass

TENSORIZE_ATTR = "tilecraft.tensorize"
TENSORIZE_PASS = "tilecraft-tensorize"
SEGMENTS_ATTR = "operandSegmentSizes"


def _spec(value_type: ir.Type) -> ArgSpec:
    shaped = ir.ShapedType(value_type)
    return ArgSpec(str(shaped.element_type), tuple(None if shaped.is_dynamic_dim(i) else shaped.get_dim_size(i)
                                                   for i in range(shaped.rank)))


def _signature(op: ir.Operation, name: str) -> ExternFunction:
    """The extern ``name`` as registered (checked against ``op``'s operands), or, when this
    process has not registered it (``tilecraft-opt``), a declaration made from the operands:
    the JIT looks the name up again when it binds the module."""
    if SEGMENTS_ATTR not in op.attributes:
        raise PipelineError(f"tilecraft-tensorize: {op.name} is not a structured op with inputs and outputs")
    n_inputs = ir.DenseI32ArrayAttr(op.attributes[SEGMENTS_ATTR])[0]
    specs = [_spec(value.type) for value in op.operands]
    extern = registered().get(name)
    if extern is None:
        return ExternFunction(name, tuple(specs[:n_inputs]), tuple(specs[n_inputs:]))
    if len(extern.inputs) != n_inputs or len(extern.parameters) != len(specs):
        raise ExternSignatureError(
            f"tilecraft-tensorize: {op.name} has {n_inputs} input(s) and {len(specs) - n_inputs} "
            f"output(s), but the intrinsic's extern {name!r} takes {len(extern.inputs)} and "
            f"{len(extern.outputs)}")
    for index, (spec, declared) in enumerate(zip(specs, extern.parameters)):
        if not declared.accepts(spec.element, spec.shape):
            raise ExternSignatureError(f"tilecraft-tensorize: operand {index} of {op.name} is {spec}, "
                                       f"but extern {name!r} takes {declared}")
    return extern


@register_pass(
    TENSORIZE_PASS,
    "Linalg ops annotated tilecraft.tensorize (on buffers) -> calls of the intrinsic's extern",
)
def tensorize_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for op in ops_where(module, lambda op: TENSORIZE_ATTR in op.attributes):
        name = ir.StringAttr(op.attributes[TENSORIZE_ATTR]).value
        if len(op.results) or not all(isinstance(v.type, ir.MemRefType) for v in op.operands):
            raise PipelineError(
                f"tilecraft-tensorize: the {op.name} tensorized with {name!r} works on tensors; run "
                "the pass after one-shot-bufferize")
        extern = _signature(op, name)
        with module.context, op.location:
            declare(module, extern)
        with module.context, ir.InsertionPoint(op), op.location:
            arguments = [memref.CastOp(parameter_type(spec), value).result
                         for value, spec in zip(op.operands, extern.parameters)]
            func.CallOp([], ir.FlatSymbolRefAttr.get(extern.symbol_name), arguments)
        op.erase()
