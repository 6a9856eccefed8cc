"""Extern calls in IR: a call on tensors of a declared function becomes a call, in
destination-passing style, of a C-interface function on memrefs.

A model calls an extern (runtime/extern.py) as it would any function::

    func.func private @linear(tensor<1x784xf32>, tensor<784x128xf32>) -> tensor<1x128xf32>
    %y = func.call @linear(%x, %w) : (tensor<1x784xf32>, tensor<784x128xf32>) -> tensor<1x128xf32>

``tilecraft-lower-externs`` (in the input stage) checks the call against the registered
signature and rewrites it into buffers the rest of the pipeline bufferizes around::

    %xb = bufferization.to_buffer %x read_only   (and memref.cast to a dynamic strided type)
    %yb = memref.alloc()                          (one per result)
    func.call @linear(%xb, %wb, %yb)              (@linear: private, llvm.emit_c_interface)
    %y = bufferization.to_tensor %yb restrict writable

Why at the tensor level and not after bufferization: the offload partitioner
(pipelines/offload/) emits the same calls before the graph passes tag fusion groups, so
the matmul it replaces is not fused with its epilogue, and no schedule sees it. The
declared parameter types are fully dynamic and strided, so one C function serves every
shape, and the JIT (``extern_symbols``) binds each ``_mlir_ciface_<name>`` by the names
the module records in its ``tilecraft.externs`` attribute.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from mlir import ir
from mlir.dialects import bufferization, func, memref

from ...errors import ExternError, ExternSignatureError
from ...runtime.extern import ArgSpec, ExternFunction, lookup, symbol_name
from ...runtime.checks import CHECK_FUNCTION
from ..ir_queries import ops_where
from ..passes import register_pass

EXTERNS_ATTR = "tilecraft.externs"
C_INTERFACE = "llvm.emit_c_interface"
_ALIGNMENT = 64


def _spec_of(value_type: ir.Type) -> tuple[str, "tuple[int | None, ...] | None"]:
    """(element type, shape or None for a scalar) of an operand or result type."""
    if isinstance(value_type, ir.ShapedType):
        shaped = ir.ShapedType(value_type)
        dims = tuple(None if shaped.is_dynamic_dim(i) else shaped.get_dim_size(i) for i in range(shaped.rank))
        return str(shaped.element_type), dims
    return str(value_type), None


def parameter_type(spec: ArgSpec) -> ir.Type:
    """The declared type of a parameter: a scalar, or a memref of ``spec``'s rank with every
    size, stride and the offset dynamic (what any buffer of that rank casts to)."""
    element = ir.Type.parse(spec.element)
    if spec.is_scalar:
        return element
    rank = len(spec.shape)
    strides = ", ".join(["?"] * rank)
    return ir.Type.parse(f"memref<{'?x' * rank}{spec.element}, strided<[{strides}], offset: ?>>")


def check_call(extern: ExternFunction, operands: Sequence[ir.Type], results: Sequence[ir.Type]) -> None:
    """Raise :class:`ExternSignatureError` unless a call with these operand and result types
    matches ``extern``'s inputs and outputs."""
    where = f"call of extern {extern.name!r}"
    if len(operands) != len(extern.inputs) or len(results) != len(extern.outputs):
        raise ExternSignatureError(
            f"{where}: {len(operands)} operand(s) and {len(results)} result(s), but it is registered "
            f"with {len(extern.inputs)} input(s) and {len(extern.outputs)} output(s)")
    for kind, types, specs in (("operand", operands, extern.inputs), ("result", results, extern.outputs)):
        for index, (value_type, spec) in enumerate(zip(types, specs)):
            element, shape = _spec_of(value_type)
            if not spec.accepts(element, shape):
                raise ExternSignatureError(f"{where}: {kind} {index} is {value_type}, registered as {spec}")
            if kind == "result" and shape is not None and None in shape:
                raise ExternSignatureError(f"{where}: result {index} ({value_type}) must have a static shape "
                                           "(the caller allocates it)")


def declare(module: ir.Operation, extern: ExternFunction) -> None:
    """Declare ``extern`` in ``module`` (once, as its C-identifier ``symbol_name``) and record
    its registered name (perhaps dotted) in ``tilecraft.externs``."""
    body = module.regions[0].blocks[0]
    names = list(recorded_externs(module))
    if extern.name in names:
        return
    function_type = ir.FunctionType.get([parameter_type(p) for p in extern.parameters], [])
    with ir.InsertionPoint.at_block_begin(body):
        declaration = func.FuncOp(extern.symbol_name, function_type, visibility="private")
    declaration.operation.attributes[C_INTERFACE] = ir.UnitAttr.get()
    module.attributes[EXTERNS_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(n) for n in [*names, extern.name]])


def recorded_externs(module: ir.Operation) -> tuple[str, ...]:
    """The names of the externs ``module`` calls (its ``tilecraft.externs`` attribute)."""
    if EXTERNS_ATTR not in module.attributes:
        return ()
    return tuple(ir.StringAttr(a).value for a in ir.ArrayAttr(module.attributes[EXTERNS_ATTR]))


def emit_call(module: ir.Operation, extern: ExternFunction, operands: Sequence[ir.Value],
              result_types: Sequence[ir.Type]) -> list[ir.Value]:
    """At the current insertion point, call ``extern`` on tensor (or scalar) ``operands``,
    with fresh buffers for results of ``result_types``; returns the results as tensors."""
    check_call(extern, [v.type for v in operands], result_types)
    declare(module, extern)
    arguments: list[ir.Value] = []
    for value, spec in zip(operands, extern.inputs):
        if spec.is_scalar:
            arguments.append(value)
            continue
        tensor = ir.RankedTensorType(value.type)
        buffer_type = ir.MemRefType.get(tensor.shape, tensor.element_type)
        buffer = bufferization.ToBufferOp(buffer_type, value, read_only=True).result
        arguments.append(memref.CastOp(parameter_type(spec), buffer).result)
    buffers = []
    for result_type, spec in zip(result_types, extern.outputs):
        tensor = ir.RankedTensorType(result_type)
        buffer = memref.AllocOp(ir.MemRefType.get(tensor.shape, tensor.element_type), [], [],
                                alignment=_ALIGNMENT).result
        buffers.append((buffer, tensor))
        arguments.append(memref.CastOp(parameter_type(spec), buffer).result)
    func.CallOp([], ir.FlatSymbolRefAttr.get(extern.symbol_name), arguments)
    return [bufferization.ToTensorOp(tensor, buffer, restrict=True, writable=True).result
            for buffer, tensor in buffers]


def _declarations(module: ir.Operation) -> dict[str, ir.Operation]:
    return {ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
            for op in module.regions[0].blocks[0].operations
            if op.operation.name == "func.func" and not op.operation.regions[0].blocks}


@register_pass(
    "tilecraft-lower-externs",
    "Calls on tensors of declared extern functions -> destination-passing calls on memrefs",
)
def lower_externs_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why a pass: every call is checked against the registry here, at compile time, so an
    unknown name or a wrong signature is a typed error and never a JIT failure."""
    declarations = _declarations(module)
    recorded = {symbol_name(name) for name in recorded_externs(module)}
    calls = ops_where(module, lambda op: op.name == "func.call")
    lowered = set()
    for call in calls:
        name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        if name not in declarations or name in recorded or name == CHECK_FUNCTION:
            continue  # not an extern (CHECK_FUNCTION: a run-time check, runtime_checks.py)
        extern = lookup(name)
        if name not in lowered:  # the tensor-typed declaration gives way to the C interface one
            declarations[name].erase()
            lowered.add(name)
        with ir.InsertionPoint(call), call.location:
            results = emit_call(module, extern, list(call.operands), [r.type for r in call.results])
        for old, new in zip(call.results, results):
            old.replace_all_uses_with(new)
        call.erase()


def extern_functions(module: ir.Module) -> list[ExternFunction]:
    """The registered externs a (lowered) module calls, looked up by name."""
    return [lookup(name) for name in recorded_externs(module.operation)]


def python_calls(module: "ir.Module | ir.Operation") -> list[tuple[str, str]]:
    """(extern name, location) of every call in ``module`` of a registered Python extern
    (``register_python``; the random ops of frontend/torch/ops/random.py among them)."""
    found: list[tuple[str, str]] = []
    for call in ops_where(getattr(module, "operation", module), lambda op: op.name == "func.call"):
        name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        try:
            extern = lookup(name)
        except ExternError:
            continue  # not an extern, or an unknown one (tilecraft-lower-externs names it)
        if extern.is_python:
            found.append((extern.name, str(call.location)))
    return found


def refuse_python_calls(module: "ir.Module | ir.Operation", target: str, error: type[Exception]) -> None:
    """Raise ``error`` naming the ops of ``module`` that call Python, which ``target`` cannot:
    its code runs without this Python process (C sources, a GPU kernel)."""
    calls = python_calls(module)
    if calls:
        where = "; ".join(sorted({location for _, location in calls}))
        raise error(f"{target} cannot call Python, which {len(calls)} op(s) of the model need (Python "
                    "externs; a random op draws from PyTorch's generator through one): compile for "
                    f"'llvm' to run them in this process: {where}")
