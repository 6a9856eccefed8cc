"""A function's intermediates in one device arena: ``tilecraft-gpu-plan-arena``.

``tilecraft-gpu-host-memory`` (memory.py) gives every intermediate buffer, every input's
device copy and every output's device buffer its own ``gpu.alloc`` / ``gpu.dealloc``: a call
of a ResNet made dozens of ``cuMemAlloc`` / ``cuMemFree`` pairs, and ``cuMemFree`` waits for
the device. This pass plans those buffers as the C target plans its workspace, with the same
planner (pipelines/buffer/workspace.py: lifetimes in the function's top-level op order, greedy by
size, buffers whose lifetimes do not overlap share bytes), and rewrites each into a
``memref.view`` of one arena at its planned offset. The arena comes from the CUDA runtime
(runtime/cuda_runtime.c)::

    %p = llvm.call @tilecraft_cuda_arena_acquire(@__tilecraft_arena_N, %bytes)
    ... views of %p at planned offsets; kernels and copies as before ...
    llvm.call @tilecraft_cuda_arena_release(@__tilecraft_arena_N, %p)     // before the return

The first call allocates the arena and keeps it in the module's slot; later calls reuse it, so
from the second call on a call allocates no device memory. ``gpu-async-region`` (host stage)
waits for the call's streams before the release, a host call, so the next call cannot
overwrite buffers a kernel still reads. A call that finds the arena in use (another thread)
gets a private one (runtime/cuda_runtime.c). Package ``close`` and a JIT module's ``close``
free the arena with the weights.

Which buffers: a ``gpu.alloc`` at the function's top level, statically shaped with the
identity layout and byte-sized elements, whose every use (through views) is inside a kernel,
a ``gpu.memcpy`` / ``gpu.memset`` or its own ``gpu.dealloc``. Anything else keeps its own
allocation: a weight's device copy (resident.py keeps it across calls instead), a buffer a
loop yields, one passed to a helper function or returned. Offsets are multiples of 256 bytes,
the alignment ``cuMemAlloc`` gives and ``tilecraft-gpu-vector-alignment`` (vectors.py)
assumes of a buffer's base.

Why on the gpu dialect, before the ``host`` stage: the uses are memref values in structured
control flow here, so the whitelist above is exact; after ``gpu-to-llvm`` a buffer is a
pointer stored into kernel-argument arrays and descriptors.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from mlir import ir
from mlir.dialects import arith, llvm, memref

from ...pipelines.ir_queries import identity_layout
from ...pipelines.passes import register_pass
from ...pipelines.buffer import workspace
from .memory import VIEW_OPS

PLAN_ARENA = "tilecraft-gpu-plan-arena"
ACQUIRE_FUNCTION = "tilecraft_cuda_arena_acquire"
RELEASE_FUNCTION = "tilecraft_cuda_arena_release"
ARENA_SLOT_PREFIX = "__tilecraft_arena_"
ARENA_BYTES_ATTR = "tilecraft.device_arena_bytes"  # on the function: the planned arena size
ARENA_TOTAL_ATTR = "tilecraft.device_buffer_bytes"  # on the function: the buffers' sum
ALIGNMENT = 256  # bytes: what cuMemAlloc returns, so every planned buffer keeps its alignment
_INNER_USES = frozenset({"gpu.memcpy", "gpu.memset", "gpu.dealloc"})


def _owner(use: ir.OpOperand) -> ir.Operation:
    owner = use.owner
    return owner if isinstance(owner, ir.Operation) else owner.operation


def _top_level(op: ir.Operation, func: ir.Operation) -> ir.Operation:
    while op.parent is not None and op.parent != func:
        op = op.parent
    return op


def _inside_launch(op: ir.Operation, func: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None and parent != func:
        if parent.name == "gpu.launch":
            return True
        parent = parent.parent
    return False


def _element_bytes(element: ir.Type) -> int | None:
    if isinstance(element, (ir.IntegerType, ir.FloatType)) and element.width % 8 == 0:
        return element.width // 8
    return None


def _buffer_bytes(memref_type: ir.MemRefType) -> int | None:
    """Bytes of a buffer the arena can hold, None where it cannot (dynamic, strided, i1)."""
    element = _element_bytes(memref_type.element_type)
    if element is None or not memref_type.has_static_shape or not identity_layout(memref_type) \
            or memref_type.memory_space is not None:
        return None
    return int(np.prod(memref_type.shape, dtype=np.int64)) * element


def _uses(value: ir.Value, func: ir.Operation, alloc: ir.Operation) -> list[ir.Operation] | None:
    """The top-level ops that read or write ``value`` (through views), or None when a use is
    not one the arena can take (see the module doc). Its ``gpu.dealloc`` is not counted: the
    ownership-based deallocation puts every dealloc at the function's end, while the buffer is
    dead after its last reader (the call's work is one stream, in order)."""
    found: list[ir.Operation] = []
    for use in value.uses:
        owner = _owner(use)
        if _inside_launch(owner, func):
            found.append(_top_level(owner, func))
        elif owner.name in VIEW_OPS and owner.operands[0] == value:
            inner = _uses(owner.results[0], func, alloc)
            if inner is None:
                return None
            found += inner
        elif owner.name in _INNER_USES:
            if owner.name == "gpu.dealloc" and (owner.parent != func or value != alloc.results[0]):
                return None
            if owner.name == "gpu.memcpy" and owner.operands[0] == value and _copies_a_weight(owner):
                return None
            if owner.name != "gpu.dealloc":  # the arena frees nothing: not a use
                found.append(_top_level(owner, func))
        else:
            return None
    return found


def _copies_a_weight(copy: ir.Operation) -> bool:
    """Whether ``copy`` fills a weight's device copy (resident.py keeps those across calls)."""
    source = copy.operands[1].owner
    if isinstance(source, ir.Block):
        return False
    source = source if isinstance(source, ir.Operation) else source.operation
    return source.name == "memref.get_global"


def _candidates(func: ir.Operation) -> list[tuple[ir.Operation, int, int, int]]:
    """(alloc, bytes, first position, last position) of the buffers the arena takes."""
    block = func.regions[0].blocks[0]
    position = {op.operation: i for i, op in enumerate(block.operations)}
    found = []
    for op in block.operations:
        op = op.operation
        if op.name != "gpu.alloc" or len(op.operands) != 0 or len(op.results) != 1:
            continue  # async or dynamically sized
        size = _buffer_bytes(ir.MemRefType(op.results[0].type))
        if size is None or size == 0:
            continue
        users = _uses(op.results[0], func, op)
        if users is None:
            continue
        start = position[op]
        found.append((op, size, start, max([position[user] for user in users], default=start)))
    return found


def _function_arena(func: ir.Operation, index: int, module_body: ir.Block) -> bool:
    """Plan ``func``'s buffers into one arena; False when there is none to plan."""
    if len(func.regions[0].blocks) != 1:
        return False
    candidates = _candidates(func)
    if not candidates:
        return False
    buffers = [workspace.Buffer(f"b{i}", size, start, end) for i, (_, size, start, end) in enumerate(candidates)]
    plan = workspace.plan(buffers, ALIGNMENT)
    workspace.check(buffers, plan, ALIGNMENT)
    block = func.regions[0].blocks[0]
    ptr = llvm.PointerType.get()
    i64 = ir.IntegerType.get_signless(64)
    slot_name = f"{ARENA_SLOT_PREFIX}{index}"
    slot_type = ir.Type.parse("!llvm.array<2 x i64>")  # {arena address, in use}
    with ir.InsertionPoint(module_body.operations[0]), func.location:
        llvm.GlobalOp(slot_type, slot_name, ir.Attribute.parse("#llvm.linkage<internal>"),
                      value=ir.Attribute.parse("dense<0> : tensor<2xi64>"), alignment=16)
    arena_type = ir.MemRefType.get([plan.size], ir.IntegerType.get_signless(8), loc=func.location)
    descriptor_type = ir.Type.parse("!llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>")
    with ir.InsertionPoint(block.operations[0]), func.location:
        slot = llvm.AddressOfOp(ptr, slot_name).result
        size = llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, plan.size)).result
        base = llvm.CallOp(ptr, [slot, size], [], [], callee=ir.FlatSymbolRefAttr.get(ACQUIRE_FUNCTION)).result
        # The runtime's pointer as a memref<N x i8>: a descriptor the LLVM lowering takes as is
        # (the cast meets its inverse in reconcile-unrealized-casts).
        zero = llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, 0)).result
        one = llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, 1)).result
        descriptor = llvm.UndefOp(descriptor_type).result
        for position, value in (([0], base), ([1], base), ([2], zero), ([3, 0], size), ([4, 0], one)):
            descriptor = llvm.InsertValueOp(descriptor, value, position).result
        arena = ir.Operation.create("builtin.unrealized_conversion_cast", results=[arena_type],
                                    operands=[descriptor]).results[0]
    for buffer, (alloc, _, _, _) in zip(buffers, candidates):
        result = alloc.results[0]
        for use in list(result.uses):
            owner = _owner(use)
            if owner.name == "gpu.dealloc":
                owner.erase()
        with ir.InsertionPoint(alloc), alloc.location:
            offset = arith.ConstantOp(ir.IndexType.get(), plan.offsets[buffer.name]).result
            view = memref.ViewOp(result.type, arena, offset, []).result
        result.replace_all_uses_with(view)
        alloc.erase()
    terminator = block.operations[len(block.operations) - 1].operation
    with ir.InsertionPoint(terminator), terminator.location:
        llvm.CallOp(None, [slot, base], [], [], callee=ir.FlatSymbolRefAttr.get(RELEASE_FUNCTION))
    func.attributes[ARENA_BYTES_ATTR] = ir.IntegerAttr.get(i64, plan.size)
    func.attributes[ARENA_TOTAL_ATTR] = ir.IntegerAttr.get(i64, plan.total)
    return True


def declare_llvm_function(body: ir.Block, name: str, spelling: str) -> None:
    """Declare the external ``llvm.func`` ``name`` of type ``spelling`` at the top of the
    module ``body`` (once; resident.py declares its runtime functions through it too)."""
    if any(op.operation.name == "llvm.func" and ir.StringAttr(op.operation.attributes["sym_name"]).value == name
           for op in body.operations):
        return
    with ir.InsertionPoint(body.operations[0]), ir.Location.unknown():
        # The Python bindings have no builder for !llvm.func types: parsed from its spelling.
        llvm.LLVMFuncOp(name, ir.TypeAttr.get(ir.Type.parse(spelling)))


@register_pass(PLAN_ARENA, "Plan each function's device buffers into one device arena (liveness-based reuse, "
               "the C target's planner), allocated by the first call and reused by the next")
def plan_arena_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    body = module.regions[0].blocks[0]
    functions = [op.operation for op in body.operations
                 if op.operation.name == "func.func" and op.operation.regions[0].blocks]
    planned = 0
    for func in functions:
        if _function_arena(func, planned, body):
            planned += 1
    if planned:
        declare_llvm_function(body, ACQUIRE_FUNCTION, "!llvm.func<ptr (ptr, i64)>")
        declare_llvm_function(body, RELEASE_FUNCTION, "!llvm.func<void (ptr, ptr)>")
