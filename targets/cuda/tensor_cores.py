"""Warp-level contractions onto tensor cores: ``vector.contract`` -> ``nvgpu.mma.sync``.

With the ``tensor-cores=f16`` schedule option, a contraction of f16 inputs into f32 (with
``tensor-cores=tf32``, of f32 inputs) is planned with warp tiles (``schedule.py``,
``_plan_tensor_core``): the block's operand tiles are staged in shared memory K slice by K
slice, and each warp's output tile becomes ``vector.contract`` ops of the ``mma.sync`` shape
(16x8x16 for f16, 16x8x8 for tf32), executed by the warp as a whole.
After the loops are mapped (``tilecraft-gpu-map``), :func:`contractions_to_mma_sync` runs
upstream's ``convert-vector-to-gpu{use-nvgpu=true}``, which distributes each such contraction
over the warp's lanes: ``nvgpu.ldmatrix`` of the A and B fragments from shared memory (B
transposed where it is stored K-major), per-lane loads and stores of the f32 accumulator
fragment, and ``nvgpu.mma.sync``; ``convert-nvgpu-to-nvvm`` (the ``kernel`` stage) makes
those ``ldmatrix.sync.aligned`` and ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``
(``m16n8k8...tf32.tf32.f32``, the f32 ``mma.sync`` marked ``tf32Enabled`` here).

Why in isolation: the pass converts every contraction it can in a function, and a
thread-level contraction (the FMA schedule's register tiles, one per thread) distributed over
lanes as if a warp ran it would compute a wrong answer; worse, the pass aborts the process
(an assertion) on some thread-level kernels, with no contraction converted (an f32 matmul's
4 x 4 register tiles beside an f16 one: "vector types must have positive constant sizes").
So each launch carrying :data:`TENSOR_CORE_LAUNCH` (set by the mapping for launches with
warp loops) is cloned alone into a scratch function, the values it uses from outside as the
function's arguments; the pass runs there, and the converted launch replaces the original.
Afterwards every warp-distributed op (``nvgpu.*``, ``gpu.lane_id``) must be in a converted
launch and no ``vector.contract`` may be left in one: anything else is a
:class:`~tilecraft.errors.GpuScheduleError`, not a silently wrong kernel.
"""

from __future__ import annotations

from mlir import ir, passmanager

from ...errors import GpuScheduleError
from ...pipelines.ir_queries import ops_where, remap_operands
from .async_copies import STAGES, pipeline_staging_copies

# Discardable attribute on a gpu.launch whose warp loops hold tensor-core contractions.
TENSOR_CORE_LAUNCH = "tilecraft.tensor_cores"

# Before the conversion: subviews folded into their buffers' indices (so a warp's read of
# its C fragment and its write of it name the same buffer and the same index values),
# loop-invariant index arithmetic out of the K loop.
_NORMALIZE = ("builtin.module(func.func(loop-invariant-code-motion, fold-memref-alias-ops, "
              "canonicalize, cse, loop-invariant-code-motion))")
_CONVERT = ("builtin.module(func.func(convert-vector-to-gpu{use-nvgpu=true}), "
            "canonicalize)")
_TIDY = "builtin.module(canonicalize, cse)"


def _computes_mma(op: ir.Operation) -> bool:
    """Whether ``op`` is a loop with ``mma.sync`` directly in its body (the K loop)."""
    return op.name == "scf.for" and any(
        inner.name == "nvgpu.mma.sync" for inner in op.regions[0].blocks[0].operations)


def _enclosing_launch(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    while parent is not None and parent.name != "gpu.launch":
        parent = parent.parent
    return parent


def _inside(value: ir.Value, launch: ir.Operation) -> bool:
    """Whether ``value`` is defined in ``launch`` (by an op in it, or as a block argument of
    one of its regions)."""
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner
    while op is not None:
        if op.operation == launch.operation:
            return True
        op = op.parent
    return False


def _convert_alone(launch: ir.Operation) -> ir.Operation:
    """``launch`` with its contractions converted to ``mma.sync``, the pass having seen
    nothing else (module docstring); returns the launch that replaced it."""
    from mlir.dialects import func

    if len(launch.results):
        raise GpuScheduleError(f"tensor cores: an asynchronous launch is not expected here "
                               f"(at {launch.location})")
    free: list[ir.Value] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        for operand in op.operands:
            if operand not in free and not _inside(operand, launch):
                free.append(operand)
        return ir.WalkResult.ADVANCE

    launch.walk(collect, ir.WalkOrder.PRE_ORDER)
    with launch.context, launch.location:
        scratch = ir.Module.create()
        with ir.InsertionPoint(scratch.body):
            function = func.FuncOp("tensor_core_launch", ir.FunctionType.get([v.type for v in free], []))
            entry = function.add_entry_block()
        inside: dict[ir.Value, ir.Value] = dict(zip(free, entry.arguments))
        with ir.InsertionPoint(entry):
            # Constants are cloned, not passed: the hoist below compares index arithmetic,
            # which only folds where the constants are visible.
            for value in free:
                owner = value.owner
                if not isinstance(owner, ir.Block) and owner.name == "arith.constant":
                    inside[value] = owner.clone().results[0]
            alone = launch.clone()
            func.ReturnOp([])
        remap_operands(alone, inside)
        try:
            passmanager.PassManager.parse(_NORMALIZE).run(scratch.operation)
            for loop in ops_where(scratch.operation, lambda op: op.name == "scf.for"):
                hoist_accumulator_fragments(loop)
            pad_shared_rows(scratch.operation)
            drop_barriers_between_copies(scratch.operation)
            double_buffer = False
            for loop in ops_where(scratch.operation, lambda op: op.name == "scf.for"
                                  and STAGES in op.attributes):
                double_buffer |= ir.IntegerAttr(loop.attributes[STAGES]).value == 2
                del loop.attributes[STAGES]
            passmanager.PassManager.parse(_CONVERT).run(scratch.operation)
            if double_buffer:
                # After the conversion, which would take the pipeline's index arithmetic in
                # the loop for part of the warp's matrix computation.
                for loop in ops_where(scratch.operation, _computes_mma):
                    pipeline_staging_copies(loop)
                passmanager.PassManager.parse(_TIDY).run(scratch.operation)
        except ir.MLIRError as error:
            raise GpuScheduleError(f"tensor cores: converting warp-level contractions to "
                                   f"mma.sync failed: {error}") from None
        # Back in place: what canonicalization hoisted out of the launch (constants) first.
        mapping = dict(zip(entry.arguments, free))
        converted = None
        for op in entry.operations:
            if op.name == "gpu.launch":
                converted = op
            elif op.name != "func.return":
                with ir.InsertionPoint(launch):
                    hoisted = op.clone()
                remap_operands(hoisted, mapping)
                mapping.update(zip(op.results, hoisted.results))
        with ir.InsertionPoint(launch):
            replacement = converted.clone()
        remap_operands(replacement, mapping)
    launch.erase()
    return replacement


def _root(value: ir.Value) -> ir.Value:
    """The buffer ``value`` is a view of (through subviews and casts)."""
    while not isinstance(value.owner, ir.Block) and value.owner.name in _VIEWS:
        value = value.owner.operands[0]
    return value


_VIEWS = ("memref.subview", "memref.cast", "memref.reinterpret_cast", "memref.expand_shape",
          "memref.collapse_shape", "memref.transpose", "memref.view")


def _invariant(value: ir.Value, loop: ir.Operation) -> bool:
    return not _inside(value, loop)


def _unmasked(transfer: ir.Operation, buffer: int, after: int) -> bool:
    """Whether ``transfer`` has no mask: its operands are the buffer (at ``buffer``), one
    index per dimension and ``after`` more (a read's padding value)."""
    rank = ir.MemRefType(transfer.operands[buffer].type).rank if isinstance(
        transfer.operands[buffer].type, ir.MemRefType) else -1
    return len(transfer.operands) == buffer + 1 + rank + after


def _fragment_pairs(loop: ir.Operation) -> list[tuple[ir.Operation, ir.Operation]] | None:
    """The read/write pairs of accumulator fragments in ``loop``'s body that may ride in
    registers through it, or None.

    A pair is a ``vector.transfer_read`` and a later ``vector.transfer_write`` of one vector
    type at the same loop-invariant buffer and index values. Hoisted only when every access
    of those buffers in the loop (nested ones included) is one of the pairs: the fragments are
    the pieces ``unroll_vectors_subgroup_mma`` cut from one warp's output tile, disjoint by
    construction, and the warp tiles of a block are disjoint (the warp loop partitions the
    block tile), so no other lane or iteration sees them in between.
    """
    body = [op.operation for op in loop.regions[0].blocks[0].operations]
    reads = {}
    pairs = []
    for op in body:
        if op.name == "vector.transfer_read" and _unmasked(op, 0, 1):
            key = (op.operands[0], tuple(list(op.operands)[1:-1]))
            if all(_invariant(v, loop) for v in (key[0], *key[1])) and key not in reads:
                reads[key] = op
        elif op.name == "vector.transfer_write" and _unmasked(op, 1, 0):
            key = (op.operands[1], tuple(list(op.operands)[2:]))
            read = reads.pop(key, None)
            if (read is not None and read.results[0].type == op.operands[0].type
                    and read.attributes["permutation_map"] == op.attributes["permutation_map"]):
                pairs.append((read, op))
    if not pairs:
        return None
    paired = {o for pair in pairs for o in pair}
    roots = {_root(read.operands[0]) for read, _ in pairs}
    if any(len(list(read.results[0].uses)) != 1 for read, _ in pairs):
        return None
    others: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op != loop and op not in paired and any(
                isinstance(v.type, ir.MemRefType) and _root(v) in roots for v in op.operands):
            others.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    loop.walk(visit, ir.WalkOrder.PRE_ORDER)
    return None if others else pairs


def hoist_accumulator_fragments(loop: ir.Operation) -> int:
    """Carry a warp's accumulator fragments through ``loop`` (the staged K loop) in
    registers: each read before the loop, each write after it, the values as iter_args.

    Why: the warp loop sits inside the K loop (the block's threads stage each K slice in
    shared memory first), so unhoisted, every K step loads and stores the warp's whole f32
    output tile in global memory around its ``mma.sync``: with a 64 x 64 block and K steps
    of 16, 32 KB of accumulators went to global memory and back per step against 4 KB of
    operand tiles (issue #47's tensor-core kernel ran at 1-3 % of cuBLAS).
    Returns how many fragments were hoisted (0: the loop is left as it was)."""
    from mlir.dialects import scf

    if len(loop.results):
        return 0
    pairs = _fragment_pairs(loop)
    if not pairs:
        return 0
    for read, _ in pairs:
        read.move_before(loop)
    lower, upper, step = list(loop.operands)[:3]
    with ir.InsertionPoint(loop), loop.location:
        new_loop = scf.ForOp(lower, upper, step, [read.results[0] for read, _ in pairs])
    if STAGES in loop.attributes:   # the schedule's mark for async_copies.py
        new_loop.operation.attributes[STAGES] = loop.attributes[STAGES]
    with ir.InsertionPoint(new_loop.body), loop.location:
        new_yield = scf.YieldOp([write.operands[0] for _, write in pairs])
    old_body = loop.regions[0].blocks[0]
    old_body.arguments[0].replace_all_uses_with(new_loop.induction_variable)
    writes = {write for _, write in pairs}
    for op in [o.operation for o in old_body.operations][:-1]:   # all but the old scf.yield
        if op not in writes:
            op.move_before(new_yield.operation)
    for (read, write), carried, result in zip(pairs, new_loop.inner_iter_args, new_loop.results):
        for use in list(read.results[0].uses):
            if use.owner != new_loop.operation:
                use.owner.operands[use.operand_number] = carried
        write.move_after(new_loop.operation)
        write.operands[0] = result
    loop.erase()
    return len(pairs)


# Ops that may use a shared tile that pad_shared_rows re-shapes: indexed vector accesses
# (in bounds of the unpadded shape, so of the padded one) and the deallocation.
_INDEXED_ACCESSES = ("vector.transfer_read", "vector.transfer_write", "vector.load", "vector.store",
                     "memref.load", "memref.store", "memref.dealloc")
# The shared-memory bank window: 32 banks of 4 bytes; ldmatrix reads 8 rows of 16 bytes.
_BANK_BYTES = 128


def pad_shared_rows(root: ir.Operation) -> int:
    """Give each shared operand tile 16 bytes more per row where its rows are a multiple of
    32 bytes; returns how many were padded.

    Why: ``ldmatrix`` has each of 8 lanes read one 16-byte row piece of an 8 x 8 matrix, and a
    ``st.shared.v4`` quarter-warp writes 8 pieces. With rows 64 bytes apart (a 128 x 32 f16 A
    tile) the 8 pieces fall on two 16-byte bank slots of the 128-byte window: a 4-way
    conflict; 256 bytes apart (a 32 x 128 B tile), all on one: 8-way. A row stride that is an
    odd multiple of 16 bytes puts 8 consecutive rows on 8 different slots. Only tiles whose
    every use is an indexed access are padded (the indices stay in bounds: the tile keeps its
    rows and columns, only the stride grows), after ``fold-memref-alias-ops`` removed the
    subviews."""
    from mlir.dialects import memref

    allocs = ops_where(root, lambda op: op.name == "memref.alloc" and _workgroup_tile(op))
    padded = 0
    for alloc in allocs:
        memref_type = ir.MemRefType(alloc.results[0].type)
        element_bytes = memref_type.element_type.width // 8
        row_bytes = memref_type.shape[-1] * element_bytes
        if row_bytes % 32 or _BANK_BYTES % element_bytes or 16 % element_bytes:
            continue
        uses = list(alloc.results[0].uses)
        if any(use.owner.name not in _INDEXED_ACCESSES for use in uses):
            continue
        if any(use.owner.name in ("vector.transfer_write", "vector.store", "memref.store")
               and use.operand_number == 0 for use in uses):
            continue   # the tile stored as a value somewhere: not an access of it
        shape = [*memref_type.shape[:-1], memref_type.shape[-1] + 16 // element_bytes]
        with ir.InsertionPoint(alloc), alloc.location:
            wider = memref.AllocOp(ir.MemRefType.get(shape, memref_type.element_type,
                                                     memory_space=memref_type.memory_space),
                                   [], [])
        alloc.results[0].replace_all_uses_with(wider.result)
        alloc.erase()
        padded += 1
    return padded


def _in_workgroup_memory(value: ir.Value) -> bool:
    return (isinstance(value.type, ir.MemRefType)
            and "workgroup" in str(ir.MemRefType(value.type).memory_space))


def _fills_shared_memory(ops: list[ir.Operation]) -> set[ir.Value] | None:
    """The workgroup buffers ``ops`` write if all they do with memory is read global memory
    and write workgroup memory (a staging copy), else None."""
    written: set[ir.Value] = set()
    ok = [True]

    def visit(inner: ir.Operation) -> ir.WalkResult:
        name = inner.name
        if name in ("vector.transfer_read", "vector.load", "memref.load"):
            ok[0] = not _in_workgroup_memory(inner.operands[0])
        elif name in ("vector.transfer_write", "vector.store", "memref.store"):
            ok[0] = _in_workgroup_memory(inner.operands[1])
            written.add(_root(inner.operands[1]))
        elif name.startswith(("nvgpu.", "gpu.", "memref.", "func.call")) and name not in _INERT:
            ok[0] = False
        return ir.WalkResult.ADVANCE if ok[0] else ir.WalkResult.INTERRUPT

    for op in ops:
        op.walk(visit, ir.WalkOrder.PRE_ORDER)
        if not ok[0]:
            return None
    return written


# Ops of the gpu and memref dialects that touch no memory (or, memref.alloc, only memory
# that nothing else can see yet).
_INERT = ("gpu.thread_id", "gpu.block_id", "gpu.block_dim", "gpu.grid_dim", "gpu.lane_id",
          "memref.subview", "memref.alloc", "memref.cast")


def drop_barriers_between_copies(root: ir.Operation) -> int:
    """Remove a ``gpu.barrier`` between two staging copies of a K step (A's tile, then B's):
    when neither side reads shared memory nor writes what the other writes, nothing needs
    ordering between them; the barrier after the last copy (before the ``ldmatrix``) and the
    one after the compute (before the next step overwrites the tiles) stay.
    ``gpu-eliminate-barriers`` keeps it, since both copies read global buffers it cannot
    tell apart. Returns how many were removed."""
    removed = 0
    blocks = {id(b.block): b.block for b in ops_where(root, lambda op: op.name == "gpu.barrier")}
    for block in blocks.values():
        ops = [o.operation for o in block.operations]
        cuts = [i for i, op in enumerate(ops) if op.name == "gpu.barrier"]
        bounds = [-1, *cuts, len(ops)]
        for j, cut in enumerate(cuts):
            before = _fills_shared_memory(ops[bounds[j] + 1:cut])
            after = _fills_shared_memory(ops[cut + 1:bounds[j + 2]])
            if before and after and not before & after:
                ops[cut].erase()
                removed += 1
                break   # one per block: the segments changed
    return removed


def _workgroup_tile(alloc: ir.Operation) -> bool:
    memref_type = ir.MemRefType(alloc.results[0].type)
    return (memref_type.memory_space is not None and "workgroup" in str(memref_type.memory_space)
            and memref_type.rank >= 2 and memref_type.has_static_shape
            and memref_type.layout == ir.AffineMapAttr.get(ir.AffineMap.get_identity(memref_type.rank))
            and isinstance(memref_type.element_type, (ir.F16Type, ir.BF16Type, ir.F32Type)))


def contractions_to_mma_sync(module: ir.Operation) -> int:
    """Convert the warp-level contractions of the tensor-core launches in ``module`` to
    ``nvgpu.mma.sync``; returns how many ``mma.sync`` the module then has. A module without
    such a launch is left as it is."""
    launches = ops_where(module, lambda op: op.name == "gpu.launch"
                         and TENSOR_CORE_LAUNCH in op.attributes)
    if not launches:
        return 0
    converted = [_convert_alone(launch) for launch in launches]
    launches = converted
    for op in ops_where(module, lambda op: op.name.startswith("nvgpu.") or op.name == "gpu.lane_id"):
        launch = _enclosing_launch(op)
        if launch is None or TENSOR_CORE_LAUNCH not in launch.attributes:
            raise GpuScheduleError(
                f"tensor cores: {op.name} was created outside a tensor-core kernel (at "
                f"{op.location}); a thread-level contraction must not be distributed over a warp")
    count = 0
    for launch in launches:
        left = ops_where(launch, lambda op: op.name == "vector.contract")
        if left:
            raise GpuScheduleError(
                f"tensor cores: a warp-level contraction was not converted to mma.sync (at "
                f"{left[0].location})")
        for mma in ops_where(launch, lambda op: op.name == "nvgpu.mma.sync"):
            # f32 operands only come from tensor-cores=tf32 (the planner's choice): the tensor
            # cores take them as TF32, which nvgpu asks to be said explicitly.
            if isinstance(ir.VectorType(mma.operands[0].type).element_type, ir.F32Type):
                mma.attributes["tf32Enabled"] = ir.UnitAttr.get()
            count += 1
        del launch.attributes[TENSOR_CORE_LAUNCH]
    return count
