"""Where buffers live once loops are on the GPU: device memory for the host code's buffers,
workgroup (shared) memory and registers for the kernels' own.

``tilecraft-gpu-host-memory`` rewrites the host side of each function after
``tilecraft-gpu-map`` made its ``gpu.launch`` ops:

- memref arguments (the caller's numpy arrays, host memory) are copied into fresh device
  buffers (``gpu.alloc`` + ``gpu.memcpy``) that the kernels use instead;
- ``memref.get_global`` (weights) is copied to the device the same way;
- host allocations (``memref.alloc``, intermediate tensors) become ``gpu.alloc`` and their
  ``memref.dealloc`` becomes ``gpu.dealloc``; ``memref.copy`` between them ``gpu.memcpy``;
- each returned buffer is copied into its *destination* and its device buffer is freed. A
  public function takes one destination per memref result as a trailing argument (the
  output-argument calling convention, :data:`OUTPUT_ARGUMENTS`): a buffer the caller owns,
  in device or host memory (``cuMemcpyAsync`` infers the direction), which the function
  also returns; or a null descriptor, and then the result is copied into a fresh host
  ``memref.alloc`` (the runtime hands it to numpy, which frees it with ``free()``), as
  before. Private functions keep the host return (their callers are host code).

Inside each ``gpu.launch``, ``memref.alloc`` in ``#gpu.address_space<workgroup>`` (shared
memory staged by the schedule) becomes a workgroup attribution of the launch, and other
allocations (per-thread temporaries) become ``memref.alloca`` (registers / local memory).
Host code that would still read or write a buffer raises :class:`GpuScheduleError`: the
pointer is a device pointer there. The one exception is the bookkeeping of MLIR's
ownership-based deallocation (a loop that yields a fresh buffer each iteration, such as an
LSTM's time loop, bufferizes with ``allow-return-allocs-from-loops``): small host arrays of
pointers and ownership flags, filled with ``memref.store``, read by a private helper function
that has no kernel. Such a buffer, which no kernel, copy or return ever reaches, stays in host
memory (:func:`_host_only_allocations`), and so does the helper.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from ...errors import GpuScheduleError
from ...pipelines.ir_queries import identity_layout, ops_where
from ...pipelines.passes import register_pass

# A public function's attribute: how many trailing arguments are its results' destinations
# (runtime/memref.py CallFrame(output_arguments=True) passes them; the C API likewise).
OUTPUT_ARGUMENTS = "tilecraft.output_arguments"

# Host-side ops that only compute addresses or sizes: safe on device pointers.
VIEW_OPS = frozenset(
    {
        "memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.cast",
        "memref.reinterpret_cast", "memref.view", "memref.reshape", "memref.transpose",
    }
)
_METADATA_OPS = VIEW_OPS | frozenset(
    {
        "memref.dim", "memref.rank", "memref.extract_strided_metadata",
        "memref.extract_aligned_pointer_as_index", "memref.assume_alignment",
    }
)
# Host-side ops that dereference a buffer: must not see a device buffer.
_TOUCHING_PREFIXES = ("linalg.", "vector.transfer", "vector.load", "vector.store")
_TOUCHING_OPS = frozenset({"memref.load", "memref.store", "memref.copy", "memref.atomic_rmw"})


def _is_memref(value: ir.Value) -> bool:
    return isinstance(value.type, ir.MemRefType)


def _inside_launch(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.name == "gpu.launch":
            return True
        if parent.name in ("func.func", "builtin.module"):
            return False
        parent = parent.parent
    return False


def _root(value: ir.Value) -> ir.Value:
    """The allocation a view was taken of (through subview / reshape / cast)."""
    while not isinstance(value.owner, ir.Block):
        owner = value.owner if isinstance(value.owner, ir.Operation) else value.owner.operation
        if owner.name not in VIEW_OPS:
            break
        value = owner.operands[0]
    return value


def _dynamic_sizes(value: ir.Value) -> list[ir.Value]:
    memref_type = ir.MemRefType(value.type)
    return [memref.DimOp(value, _index(i)).result
            for i, size in enumerate(memref_type.shape) if size == ir.ShapedType.get_dynamic_size()]


def _index(i: int) -> ir.Value:
    from mlir.dialects import arith

    return arith.ConstantOp(ir.IndexType.get(), i).result


def _device_copy_of(value: ir.Value) -> ir.Value:
    """A ``gpu.alloc`` of ``value``'s shape filled from it (at the current insertion point)."""
    memref_type = ir.MemRefType(value.type)
    if not identity_layout(memref_type):
        raise GpuScheduleError(f"cannot copy a strided buffer {memref_type} to the device")
    device = gpu.AllocOp(memref_type, None, [], _dynamic_sizes(value), []).result
    gpu.MemcpyOp(None, [], device, value)
    return device


def _replace_uses_except(value: ir.Value, new: ir.Value, keep: ir.Operation) -> None:
    for use in list(value.uses):
        if use.owner != keep:
            use.owner.operands[use.operand_number] = new


def _host_side_ops(func: ir.Operation) -> list[ir.Operation]:
    """Ops of ``func`` outside any ``gpu.launch`` (pre-order)."""
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "gpu.launch":
            return ir.WalkResult.SKIP
        if op != func:
            ops.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return ops


# Host ops through which a host-only buffer may flow: its views and metadata, scalar loads
# and stores, its dealloc, and calls of kernel-free helper functions (the deallocation's).
_HOST_ONLY_USES = _METADATA_OPS | frozenset({"memref.load", "memref.store", "memref.dealloc", "func.call"})


def _host_only_allocations(host_ops: list[ir.Operation], helpers: set[str]) -> set[ir.Value]:
    """The results of host ``memref.alloc``/``alloca`` ops that no kernel, copy, loop or return
    reaches: every use, through views, is a scalar load or store, a dealloc, or an operand of a
    call of one of ``helpers`` (functions without a kernel)."""

    def host_only(value: ir.Value) -> bool:
        for use in value.uses:
            owner = use.owner if isinstance(use.owner, ir.Operation) else use.owner.operation
            if owner.name not in _HOST_ONLY_USES or _inside_launch(owner):
                return False
            if owner.name == "func.call" and ir.FlatSymbolRefAttr(owner.attributes["callee"]).value not in helpers:
                return False
            if owner.name in VIEW_OPS and not all(host_only(r) for r in owner.results if _is_memref(r)):
                return False
        return True

    return {op.results[0] for op in host_ops
            if op.name in ("memref.alloc", "memref.alloca") and host_only(op.results[0])}


def _move_host_buffers_to_device(func: ir.Operation, helpers: set[str]) -> None:
    body = func.regions[0].blocks[0]
    host_ops = _host_side_ops(func)
    host_roots = _host_only_allocations(host_ops, helpers)
    for op in host_ops:
        scalar_access = op.name in ("memref.load", "memref.store")
        if scalar_access and all(_root(v) in host_roots for v in op.operands if _is_memref(v)):
            continue
        if (op.name in _TOUCHING_OPS and op.name != "memref.copy") or op.name.startswith(_TOUCHING_PREFIXES):
            raise GpuScheduleError(
                f"{op.name} at {op.location} stays on the host but reads or writes a buffer "
                "that lives on the GPU: the GPU schedule did not map it"
            )
    device_roots: set[ir.Value] = set()
    copies_to_free: list[ir.Value] = []
    first = body.operations[0]  # a function body ends in func.return: never empty
    # Arguments: host arrays -> device copies at entry.
    for argument in body.arguments:
        if not _is_memref(argument) or not list(argument.uses):
            continue
        with ir.InsertionPoint(first), func.location:
            device = _device_copy_of(argument)
        copy_op = device.owner  # the gpu.alloc; the memcpy follows it
        _replace_uses_except(argument, device, _memcpy_after(copy_op))
        device_roots.add(device)
        copies_to_free.append(device)
    for op in host_ops:
        if op.name == "memref.get_global":
            result = op.results[0]
            with ir.InsertionPoint(_next_op(op)), op.location:
                device = _device_copy_of(result)
            _replace_uses_except(result, device, _memcpy_after(device.owner))
            device_roots.add(device)
            copies_to_free.append(device)
        elif op.name in ("memref.alloc", "memref.alloca") and op.results[0] not in host_roots:
            memref_type = ir.MemRefType(op.results[0].type)
            with ir.InsertionPoint(op), op.location:
                device = gpu.AllocOp(memref_type, None, [], list(op.operands), []).result
            op.results[0].replace_all_uses_with(device)
            op.erase()
            device_roots.add(device)
    destinations = None if _is_private(func) else _add_output_arguments(func)
    for op in _host_side_ops(func):
        if op.name == "memref.dealloc":
            root = _root(op.operands[0])
            defining = _defining_op(root)
            if defining is not None and defining.name == "memref.extract_strided_metadata":
                root = _root(defining.operands[0])  # the base buffer of a view: what it views
            if root in host_roots:
                continue
            if root not in device_roots and not _loop_carried(root):
                raise GpuScheduleError(f"memref.dealloc at {op.location} frees a buffer of unknown "
                                       "provenance on the host")
            with ir.InsertionPoint(op), op.location:
                gpu.DeallocOp(None, [], op.operands[0])
            op.erase()
        elif op.name == "memref.copy":
            with ir.InsertionPoint(op), op.location:
                for operand in op.operands:
                    if not identity_layout(ir.MemRefType(operand.type)):
                        raise GpuScheduleError(f"memref.copy of a strided buffer at {op.location} "
                                               "stays on the host")
                gpu.MemcpyOp(None, [], op.operands[1], op.operands[0])
            op.erase()
        elif op.name == "func.return":
            _return_to_host(op, device_roots, copies_to_free, destinations)


def _next_op(op: ir.Operation) -> ir.Operation:
    block_ops = [o.operation for o in op.block.operations]
    return block_ops[block_ops.index(op) + 1]


def _memcpy_after(alloc: ir.Operation) -> ir.Operation:
    alloc = alloc if isinstance(alloc, ir.Operation) else alloc.operation
    return _next_op(alloc).operation


def _add_output_arguments(func: ir.Operation) -> list[ir.Value]:
    """Append one argument per memref result of ``func``: its destination (module docstring).

    Why an argument and not a returned allocation: a caller who keeps data on the GPU (a
    device array, a PyTorch CUDA tensor) wants the result in device memory it owns, with no
    trip through the host; the IREE and TVM runtimes pass output storage the same way."""
    function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    body = func.regions[0].blocks[0]
    destinations = [body.add_argument(result, func.location)
                    for result in function_type.results if isinstance(result, ir.MemRefType)]
    inputs = [*function_type.inputs, *(destination.type for destination in destinations)]
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, function_type.results))
    if "arg_attrs" in func.attributes:
        attributes = list(ir.ArrayAttr(func.attributes["arg_attrs"]))
        attributes += [ir.DictAttr.get({})] * len(destinations)
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(attributes)
    func.attributes[OUTPUT_ARGUMENTS] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(destinations))
    return destinations


def _destination(value: ir.Value, given: ir.Value | None) -> ir.Value:
    """Where result ``value`` is copied: ``given`` (the caller's buffer) unless its pointer is
    null, else a fresh 64-byte aligned host allocation (without ``given``: always)."""
    memref_type = ir.MemRefType(value.type)
    alignment = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)
    if given is None:
        return memref.AllocOp(memref_type, _dynamic_sizes(value), [], alignment=alignment).result
    pointer = memref.ExtractAlignedPointerAsIndexOp(given).result
    null = arith.CmpIOp(arith.CmpIPredicate.eq, pointer, _index(0)).result
    choice = scf.IfOp(null, [given.type], has_else=True)
    with ir.InsertionPoint(choice.then_block):
        host = memref.AllocOp(ir.MemRefType(given.type), _dynamic_sizes(given), [], alignment=alignment).result
        scf.YieldOp([host])
    with ir.InsertionPoint(choice.else_block):
        scf.YieldOp([given])
    return choice.results[0]


def _return_to_host(ret: ir.Operation, device_roots: set[ir.Value], copies_to_free: list[ir.Value],
                    destinations: list[ir.Value] | None) -> None:
    freed: list[ir.Value] = []
    given = iter(destinations) if destinations is not None else None
    with ir.InsertionPoint(ret), ret.location:
        for index, value in enumerate(list(ret.operands)):
            if not _is_memref(value):
                continue
            target = _destination(value, next(given) if given is not None else None)
            gpu.MemcpyOp(None, [], target, value)
            ret.operands[index] = target
            root = _root(value)
            if root in device_roots and root not in freed and root not in copies_to_free:
                freed.append(root)
        for device in [*freed, *copies_to_free]:
            gpu.DeallocOp(None, [], device)


def _workgroup_space(memref_type: ir.MemRefType) -> bool:
    space = memref_type.memory_space
    return space is not None and "workgroup" in str(space)


def _launch_buffers(launch: ir.Operation) -> None:
    """Shared-memory allocs -> workgroup attributions of ``launch``; others -> alloca."""
    body = launch.regions[0].blocks[0]
    allocs: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in ("memref.alloc", "memref.dealloc"):
            allocs.append(op)
        return ir.WalkResult.ADVANCE

    launch.walk(visit, ir.WalkOrder.PRE_ORDER)
    count = 0
    if "workgroup_attributions" in launch.attributes:
        count = ir.IntegerAttr(launch.attributes["workgroup_attributions"]).value
    for op in allocs:
        if op.name == "memref.dealloc":
            op.erase()
            continue
        memref_type = ir.MemRefType(op.results[0].type)
        if _workgroup_space(memref_type):
            if not memref_type.has_static_shape:
                raise GpuScheduleError(f"shared memory of dynamic size at {op.location}")
            argument = body.add_argument(memref_type, op.location)
            op.results[0].replace_all_uses_with(argument)
            count += 1
        else:
            with ir.InsertionPoint(op), op.location:
                private = memref.AllocaOp(memref_type, list(op.operands), []).result
            op.results[0].replace_all_uses_with(private)
        op.erase()
    if count:
        launch.attributes["workgroup_attributions"] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), count)


@register_pass(
    "tilecraft-gpu-host-memory",
    "Host buffers to device memory with copies in and out; kernel allocations to shared "
    "memory / registers",
)
def gpu_host_memory_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: the caller's arrays and the weights live in host memory, which a CUDA kernel
    cannot read; results must come back as host ``malloc`` buffers the runtime gives to numpy."""
    launches: list[ir.Operation] = []
    functions: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "gpu.launch":
            launches.append(op)
            return ir.WalkResult.SKIP
        if op.name == "func.func" and op.regions[0].blocks:
            functions.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    for launch in launches:
        _launch_buffers(launch)
    # Private functions without a kernel are host helpers (the ownership-based deallocation's
    # dealloc_helper): they work on host-only buffers and are left as they are.
    helpers = {ir.StringAttr(f.attributes["sym_name"]).value for f in functions
               if _is_private(f) and not _has_launch(f)}
    for func in functions:
        if ir.StringAttr(func.attributes["sym_name"]).value not in helpers:
            _move_host_buffers_to_device(func, helpers)


def _is_private(func: ir.Operation) -> bool:
    return "sym_visibility" in func.attributes and \
        ir.StringAttr(func.attributes["sym_visibility"]).value == "private"


def _has_launch(func: ir.Operation) -> bool:
    return bool(ops_where(func, lambda op: op.name == "gpu.launch"))


def _defining_op(value: ir.Value) -> ir.Operation | None:
    """The op whose result ``value`` is; None for a block argument."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner if isinstance(owner, ir.Operation) else owner.operation


def _loop_carried(value: ir.Value) -> bool:
    """Whether ``value`` is a buffer a loop carries or yields (what the ownership-based
    deallocation frees after a loop that yields fresh buffers): the loop's buffers come from
    allocations made device buffers above, so it is one too."""
    op = _defining_op(value)
    if op is None:
        parent = value.owner.owner
        return parent is not None and parent.name in ("scf.for", "scf.while")
    return op.name in ("scf.for", "scf.while", "scf.if")


# ---- accumulators in registers across a loop ----------------------------------------------

def _accesses_root(op: ir.Operation, root: ir.Value, skip: tuple[ir.Operation, ...]) -> bool:
    """Whether ``op`` or anything nested in it uses a view of ``root`` (``skip`` excepted)."""
    found = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        if inner in skip:
            return ir.WalkResult.SKIP
        if any(_is_memref(v) and _root(v) == root for v in inner.operands):
            found.append(inner)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return bool(found)


def _defined_outside(value: ir.Value, loop: ir.Operation) -> bool:
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner
    op = op if isinstance(op, ir.Operation) else op.operation
    while op is not None:
        if op == loop:
            return False
        op = op.parent
    return True


def _hoistable_pair(loop: ir.Operation) -> tuple[ir.Operation, ir.Operation] | None:
    """A transfer_read / transfer_write pair of the same slice that only this pair touches."""
    body_ops = [o.operation for o in loop.regions[0].blocks[0].operations]
    for read in body_ops:
        if read.name != "vector.transfer_read":
            continue
        memref_value, indices = read.operands[0], list(read.operands)[1:-1]
        if not all(_defined_outside(v, loop) for v in [memref_value, *indices]):
            continue
        for write in body_ops[body_ops.index(read) + 1:]:
            if (write.name == "vector.transfer_write" and write.operands[1] == memref_value
                    and list(write.operands)[2:] == indices
                    and write.operands[0].type == read.results[0].type
                    and read.attributes["permutation_map"] == write.attributes["permutation_map"]):
                root = _root(memref_value)
                others = [o for o in body_ops if o not in (read, write)]
                if not any(_accesses_root(o, root, (read, write)) for o in others):
                    return read, write
    return None


def _hoist(loop: ir.Operation, read: ir.Operation, write: ir.Operation) -> None:
    """``read`` before ``loop`` and ``write`` after it; the value rides in an iter_arg."""
    from mlir.dialects import scf

    read.move_before(loop)
    lower, upper, step = list(loop.operands)[:3]
    with ir.InsertionPoint(loop), loop.location:
        new_loop = scf.ForOp(lower, upper, step, [read.results[0]])
    carried = write.operands[0]
    with ir.InsertionPoint(new_loop.body), loop.location:
        new_yield = scf.YieldOp([carried])
    old_body = loop.regions[0].blocks[0]
    old_body.arguments[0].replace_all_uses_with(new_loop.induction_variable)
    old_ops = [o.operation for o in old_body.operations]
    for op in old_ops[:-1]:  # all but the old scf.yield
        if op != write:
            op.move_before(new_yield.operation)
    for use in list(read.results[0].uses):
        if use.owner != new_loop.operation:
            use.owner.operands[use.operand_number] = new_loop.inner_iter_args[0]
    write.move_after(new_loop.operation)
    write.operands[0] = new_loop.results[0]
    loop.erase()


def _launch_loops(module: ir.Operation) -> list[ir.Operation]:
    """``scf.for`` ops inside ``gpu.launch`` bodies, innermost first."""
    loops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.for" and _inside_launch(op) and len(op.results) == 0:
            loops.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.POST_ORDER)
    return loops


@register_pass(
    "tilecraft-gpu-hoist-accumulators",
    "Keep a thread's read-modify-write slice in registers across a kernel loop",
)
def hoist_accumulators_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: with shared-memory staging the thread loop of a matmul sits inside the K loop, so
    each K slice read and wrote the thread's accumulator tile in global memory. After
    mapping, the thread's read and write of its own tile are the only accesses to that
    buffer in the K loop (the forall gave every thread a disjoint tile, and no other op
    touches the buffer), so the tile can ride through the loop in registers.
    ``hoist_redundant_vector_transfers`` refuses because the tile's zero-fill, before the
    loop, also uses the same view."""
    for loop in _launch_loops(module):
        pair = _hoistable_pair(loop)
        if pair is not None:
            _hoist(loop, *pair)
