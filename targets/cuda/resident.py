"""Weights uploaded to the device once, not on every call: ``tilecraft-gpu-resident-weights``.

``tilecraft-gpu-host-memory`` (memory.py) gives each weight (``memref.get_global``) a device
buffer filled by a ``gpu.memcpy`` and freed at the return, so every call copied every weight
across the bus. After ``gpu-to-llvm`` that is, on the host::

    %d = llvm.call @mgpuMemAlloc(%bytes, %stream, %false)
    llvm.call @mgpuMemcpy(%d, <address of a constant global>, %bytes, %stream)
    ... kernels read %d ...
    llvm.call @mgpuMemFree(%d, %stream)

This pass rewrites each such triple into one call of the runtime (runtime/cuda_runtime.c)::

    %d = llvm.call @tilecraft_cuda_resident(@__tilecraft_resident_N, <address>, %bytes, %stream)

where ``@__tilecraft_resident_N`` is a private i64 slot of the module, 0 until the first
call uploads the weight and stores its device pointer there. The runtime frees them all in
``tilecraft_cuda_release`` (a package's ``close``). The pass also emits
``__tilecraft_cuda_release_module()``, which frees this module's slots only (its weights and
its functions' activation arenas, arena.py): a JIT module's ``close``, where every module of
the process shares one runtime.

Why on the LLVM dialect, after ``gpu-to-llvm``: before it, a device pointer held in a module
slot has no memref-level spelling (no op turns an integer back into a memref), while here a
pointer is a pointer. The match is exact, not a heuristic: a copy whose source is a constant
global is a weight upload (memory.py makes no other), and its destination is a fresh device
allocation nothing else writes. A copy that does not match stays a per-call copy (correct,
only slower).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import llvm

from ...pipelines.passes import register_pass
from .arena import ARENA_SLOT_PREFIX, declare_llvm_function

RESIDENT_WEIGHTS = "tilecraft-gpu-resident-weights"
RESIDENT_FUNCTION = "tilecraft_cuda_resident"
SLOT_PREFIX = "__tilecraft_resident_"
RELEASE_SLOT_FUNCTION = "tilecraft_cuda_release_slot"
# Emitted into each module that holds device memory across calls (see _module_release).
MODULE_RELEASE_FUNCTION = "__tilecraft_cuda_release_module"
# Calls that write into a buffer: a weight's device copy must have none but its upload.
_WRITERS = frozenset({"mgpuMemcpy", "mgpuMemset32", "mgpuMemset16"})


def _callee(op: ir.Operation) -> str | None:
    if op.name != "llvm.call" or "callee" not in op.attributes:
        return None
    return ir.FlatSymbolRefAttr(op.attributes["callee"]).value


def _defining(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner if isinstance(owner, ir.Operation) else owner.operation


def _constant_global_address(value: ir.Value, constants: set[str]) -> bool:
    """Whether ``value`` is the address of a constant global (through zero-offset GEPs)."""
    op = _defining(value)
    while op is not None and op.name == "llvm.getelementptr" and len(op.operands) == 1:
        indices = ir.DenseI32ArrayAttr(op.attributes["rawConstantIndices"])
        if any(index != 0 for index in indices):
            return False
        op = _defining(op.operands[0])
    return op is not None and op.name == "llvm.mlir.addressof" and \
        ir.FlatSymbolRefAttr(op.attributes["global_name"]).value in constants


Upload = tuple[ir.Operation, ir.Operation, list[ir.Operation]]  # (alloc, memcpy, frees)


def _weight_uploads(func: ir.Operation, constants: set[str]) -> list[Upload]:
    """(alloc, memcpy, frees) of each weight upload in ``func``."""
    found = []
    copies: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if _callee(op) == "mgpuMemcpy":
            copies.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    for copy in copies:
        destination, source = copy.operands[0], copy.operands[1]
        alloc = _defining(destination)
        if alloc is None or _callee(alloc) != "mgpuMemAlloc" or alloc.block != copy.block:
            continue
        if not _constant_global_address(source, constants):
            continue
        frees, other_writes = [], False
        for use in destination.uses:
            user = use.owner if isinstance(use.owner, ir.Operation) else use.owner.operation
            callee = _callee(user)
            if callee == "mgpuMemFree":
                frees.append(user)
            elif callee in _WRITERS and user != copy and use.operand_number == 0:
                other_writes = True
        if not other_writes:
            found.append((alloc, copy, frees))
    return found


@register_pass(RESIDENT_WEIGHTS, "Upload each weight to the device once (a module slot the CUDA runtime fills) "
               "instead of copying it on every call")
def resident_weights_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    body = module.regions[0].blocks[0]
    constants = {ir.StringAttr(op.attributes["sym_name"]).value for op in body.operations
                 if op.operation.name == "llvm.mlir.global" and "constant" in op.operation.attributes}
    functions = [op.operation for op in body.operations
                 if op.operation.name == "llvm.func" and op.operation.regions[0].blocks]
    uploads = [upload for func in functions for upload in _weight_uploads(func, constants)]
    ptr = llvm.PointerType.get()
    i64 = ir.IntegerType.get_signless(64)
    first = body.operations[0]
    if uploads:
        declare_llvm_function(body, RESIDENT_FUNCTION, "!llvm.func<ptr (ptr, ptr, i64, ptr)>")
    for index, (alloc, copy, frees) in enumerate(uploads):
        slot = f"{SLOT_PREFIX}{index}"
        with ir.InsertionPoint(first), copy.location:
            llvm.GlobalOp(i64, slot, ir.Attribute.parse("#llvm.linkage<internal>"),
                          value=ir.IntegerAttr.get(i64, 0), alignment=8)
        with ir.InsertionPoint(copy), copy.location:
            address = llvm.AddressOfOp(ptr, slot).result
            device = llvm.CallOp(ptr, [address, copy.operands[1], copy.operands[2], copy.operands[3]], [], [],
                                 callee=ir.FlatSymbolRefAttr.get(RESIDENT_FUNCTION)).result
        for free in frees:
            free.erase()
        copy.erase()
        alloc.results[0].replace_all_uses_with(device)
        alloc.erase()
    _module_release(body)


def _module_release(body: ir.Block) -> None:
    """``__tilecraft_cuda_release_module()``: free this module's device weights and arenas.

    Why per module: the JIT's modules share one CUDA runtime (runtime/libraries.py), so its
    ``tilecraft_cuda_release`` would free every module's; a JIT module's ``close`` calls this
    function instead, which releases its own slots (``tilecraft_cuda_release_slot``)."""
    slots = [ir.StringAttr(op.operation.attributes["sym_name"]).value for op in body.operations
             if op.operation.name == "llvm.mlir.global"
             and ir.StringAttr(op.operation.attributes["sym_name"]).value.startswith((SLOT_PREFIX, ARENA_SLOT_PREFIX))]
    if not slots:
        return
    declare_llvm_function(body, RELEASE_SLOT_FUNCTION, "!llvm.func<i64 (ptr)>")
    ptr = llvm.PointerType.get()
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint(body), ir.Location.unknown():
        function = llvm.LLVMFuncOp(MODULE_RELEASE_FUNCTION, ir.TypeAttr.get(ir.Type.parse("!llvm.func<void ()>")))
        entry = function.body.blocks.append()
        with ir.InsertionPoint(entry):
            for slot in slots:
                address = llvm.AddressOfOp(ptr, slot).result
                llvm.CallOp(i64, [address], [], [], callee=ir.FlatSymbolRefAttr.get(RELEASE_SLOT_FUNCTION))
            llvm.ReturnOp()
