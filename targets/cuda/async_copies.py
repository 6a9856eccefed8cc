"""Double-buffered ``cp.async`` staging of a tensor-core kernel's K loop.

Without it, each K step of a tensor-core contraction copies its A and B tiles into shared
memory through registers (``ld.global`` then ``st.shared``), waits at a barrier until every
thread's copy landed, and only then runs its ``mma.sync``: the tensor cores idle for a
global-memory round trip every step, and only other blocks on the SM can fill that time.
:func:`pipeline_staging_copies` rewrites the loop so step ``k`` computes on one shared
buffer while the copies of step ``k + 1`` are in flight into the other:

    prologue:  cp.async tile 0 -> buffer 0; commit
    step k:    cp.async tile k+1 -> buffer (k+1) % 2; commit   (the last step re-copies its
               own tile into the idle buffer: no branch, nothing reads it)
               cp.async.wait_group 1      (tile k, this thread's part, has landed)
               barrier                    (every thread's part has)
               ldmatrix / mma.sync on buffer k % 2
               barrier                    (before step k + 1 overwrites buffer k % 2)
    after:     cp.async.wait_group 0

``nvgpu.device_async_copy`` (``cp.async.cg`` for 16-byte pieces: past L1, which the tile is
read from once) needs no registers, so the copies cost the warps only their issue. The two
buffers are one shared allocation of twice the rows; step ``k`` reads rows offset by
``(k % 2) * rows``, which keeps each tile 2-D for ``ldmatrix`` (and the padding of
``tensor_cores.pad_shared_rows``).

It runs on the scratch function ``tensor_cores`` converts a launch in, after the warp's
accumulators were hoisted and before the vector-to-nvgpu conversion, on a loop the schedule
marked (:data:`STAGES`, the ``mma-stages`` option). A loop of another shape than the
schedule makes is left as it is (the function returns 0): the plain staging stays correct.
"""

from __future__ import annotations

from mlir import ir

# Discardable attribute the schedule puts on a tensor-core contraction's K loop: how many
# shared buffers its staging copies rotate through (2: double buffering; 1: none).
STAGES = "tilecraft.mma_stages"

_PURE_PREFIXES = ("arith.", "affine.apply", "index.")


def _index(value: int) -> ir.Value:
    from mlir.dialects import arith
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _workgroup(value: ir.Value) -> bool:
    return (isinstance(value.type, ir.MemRefType)
            and "workgroup" in str(ir.MemRefType(value.type).memory_space))


def _identity_layout(memref_type: ir.MemRefType) -> bool:
    return memref_type.layout == ir.AffineMapAttr.get(ir.AffineMap.get_identity(memref_type.rank))


def _top_level_owner(value: ir.Value, body: ir.Block) -> ir.Operation | None:
    """The op of ``body`` (at its top level) defining ``value``, or None."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation if not isinstance(owner, ir.Operation) else owner
    return op if op.block == body else None


def _copy_pairs(body: ir.Block, ready: int) -> list[tuple[ir.Operation, ir.Operation]] | None:
    """The staging copies of the loop body before its op ``ready`` (the barrier after them):
    ``vector.transfer_write`` into a shared buffer allocated in the body of a
    ``vector.transfer_read`` from global memory. None if anything else before ``ready``
    touches memory or is not index arithmetic."""
    ops = [o.operation for o in body.operations]
    pairs = []
    for op in ops[:ready]:
        if op.name == "vector.transfer_write":
            value, dest = op.operands[0], op.operands[1]
            read = _top_level_owner(value, body)
            alloc = _top_level_owner(dest, body)
            if (read is None or read.name != "vector.transfer_read" or alloc is None
                    or alloc.name != "memref.alloc" or not _workgroup(dest)
                    or _workgroup(read.operands[0]) or len(list(value.uses)) != 1
                    or not _copyable(read, op)):
                return None
            pairs.append((read, op))
        elif op.name not in ("vector.transfer_read", "memref.alloc") and not (
                op.name.startswith(_PURE_PREFIXES) or op.name in ("gpu.thread_id", "gpu.block_id")):
            return None
    return pairs or None


def _copyable(read: ir.Operation, write: ir.Operation) -> bool:
    """Whether the pair is rows of 4, 8 or 16 bytes between identity-layout buffers, whole
    (in bounds, minor-identity maps), rows 16-byte aligned in the global buffer."""
    vector = ir.VectorType(read.results[0].type)
    source, dest = ir.MemRefType(read.operands[0].type), ir.MemRefType(write.operands[1].type)
    element_bytes = vector.element_type.width // 8
    row_bytes = vector.shape[-1] * element_bytes
    if row_bytes not in (4, 8, 16) or any(d != 1 for d in vector.shape[:-2]):
        return False     # rows of one 2-D tile (a batch matmul's tiles have a unit batch)
    if not (_identity_layout(source) and _identity_layout(dest) and source.has_static_shape
            and dest.has_static_shape and dest.rank >= 2):
        return False
    if (source.shape[-1] * element_bytes) % 16:
        return False
    for op, rank in ((read, source.rank), (write, dest.rank)):
        minor = ir.AffineMap.get_minor_identity(rank, vector.rank)
        if op.attributes["permutation_map"] != ir.AffineMapAttr.get(minor):
            return False
        if "in_bounds" in op.attributes and not all(
                ir.BoolAttr(b).value for b in ir.ArrayAttr(op.attributes["in_bounds"])):
            return False
    return True


# Reads of a shared tile by the compute: the buffer, then one index per dimension.
_INDEXED_READS = {"vector.transfer_read": 1, "nvgpu.ldmatrix": 0, "vector.load": 0,
                  "memref.load": 0}   # operands after the indices (a transfer's padding)


def _indexed_read(op: ir.Operation, operand_number: int) -> bool:
    if op.name not in _INDEXED_READS or operand_number != 0:
        return False
    rank = ir.MemRefType(op.operands[0].type).rank
    return len(op.operands) == 1 + rank + _INDEXED_READS[op.name]   # no mask


def _backward_slice(roots: list[ir.Value], body: ir.Block) -> set[ir.Operation]:
    """Ops at the top level of ``body`` that ``roots`` are computed from."""
    found: set[ir.Operation] = set()
    work = list(roots)
    while work:
        op = _top_level_owner(work.pop(), body)
        if op is not None and op not in found:
            found.add(op)
            work.extend(op.operands)
    return found


def _emit_copies(pairs: list[tuple[ir.Operation, ir.Operation]], slice_ops: set[ir.Operation],
                 body_ops: list[ir.Operation], mapping: dict[ir.Value, ir.Value],
                 buffers: dict[ir.Value, ir.Value], stage_rows: dict[ir.Value, ir.Value]) -> ir.Value:
    """Clone the index arithmetic of ``pairs`` (``mapping``: the induction variable's new
    value), issue a ``device_async_copy`` per row into ``buffers`` (the doubled buffer of
    each old one) at the row offset ``stage_rows`` gives it, and commit them as one group;
    returns the group's token."""
    from mlir.dialects import arith, nvgpu

    local = dict(mapping)
    for op in body_ops:
        if op in slice_ops:
            clone = op.clone()
            for i, operand in enumerate(clone.operands):
                if operand in local:
                    clone.operands[i] = local[operand]
            local.update(zip(op.results, clone.results))
    tokens = []
    for read, write in pairs:
        vector = ir.VectorType(read.results[0].type)
        rows = vector.shape[-2] if vector.rank >= 2 else 1
        columns = vector.shape[-1]
        source = read.operands[0]
        source_indices = [local.get(v, v) for v in list(read.operands)[1:-1]]
        dest_indices = [local.get(v, v) for v in list(write.operands)[2:]]
        dest_indices[-2] = arith.AddIOp(dest_indices[-2], stage_rows[write.operands[1]]).result
        bypass = columns * vector.element_type.width // 8 == 16
        for row in range(rows):
            src = list(source_indices)
            dst = list(dest_indices)
            if row:
                src[-2] = arith.AddIOp(src[-2], _index(row)).result
                dst[-2] = arith.AddIOp(dst[-2], _index(row)).result
            copy = nvgpu.DeviceAsyncCopyOp(buffers[write.operands[1]], dst, source, src,
                                           ir.IntegerAttr.get(ir.IndexType.get(), columns),
                                           bypassL1=ir.UnitAttr.get() if bypass else None)
            tokens.append(copy.result)
    return nvgpu.DeviceAsyncCreateGroupOp(tokens).result


def pipeline_staging_copies(loop: ir.Operation) -> int:
    """Double-buffer the staging copies of ``loop`` with ``cp.async`` (module docstring);
    returns how many tiles were (0: the loop did not have the expected shape and is left as
    it was)."""
    from mlir.dialects import arith, memref, nvgpu

    body = loop.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    barriers = [i for i, op in enumerate(ops) if op.name == "gpu.barrier"]
    if len(barriers) < 2:
        return 0
    ready = barriers[0]
    pairs = _copy_pairs(body, ready)
    if pairs is None:
        return 0
    allocs = {}
    for _, write in pairs:
        alloc = write.operands[1].owner
        allocs[write.operands[1]] = alloc.operation if not isinstance(alloc, ir.Operation) else alloc
    writes = {w for _, w in pairs}
    for buffer in allocs:
        for use in buffer.uses:
            user = use.owner.operation
            if user not in writes and not _indexed_read(user, use.operand_number) \
                    and user.name != "memref.dealloc":
                return 0
    induction = body.arguments[0]
    lower, upper, step = list(loop.operands)[:3]
    slice_ops = _backward_slice(
        [v for r, w in pairs for v in [*list(r.operands)[1:-1], *list(w.operands)[2:]]], body)
    if any(op.name in ("vector.transfer_read", "vector.transfer_write", "memref.alloc")
           for op in slice_ops):
        return 0

    with loop.location:
        # Two buffers as one of twice the rows, before the loop.
        buffers: dict[ir.Value, ir.Value] = {}
        rows_of: dict[ir.Value, int] = {}
        with ir.InsertionPoint(loop):
            for buffer in allocs:
                memref_type = ir.MemRefType(buffer.type)
                shape = list(memref_type.shape)
                rows_of[buffer] = shape[-2]
                shape[-2] *= 2
                buffers[buffer] = memref.AllocOp(
                    ir.MemRefType.get(shape, memref_type.element_type,
                                      memory_space=memref_type.memory_space), [], []).result
            zero = _index(0)
            first = _emit_copies(pairs, slice_ops, ops, {induction: lower}, buffers,
                                 {b: zero for b in allocs})
        # Per step: the next tile into the other buffer, then wait for this step's tile.
        with ir.InsertionPoint(ops[0]):
            steps = arith.DivUIOp(arith.SubIOp(induction, lower).result, step).result
            current = arith.RemUIOp(steps, _index(2)).result
            other = arith.SubIOp(_index(1), current).result
            last = arith.SubIOp(upper, step).result
            following = arith.MinUIOp(arith.AddIOp(induction, step).result, last).result
            offsets = {}
            for buffer in allocs:
                rows = _index(rows_of[buffer])
                offsets[buffer] = (arith.MulIOp(current, rows).result,
                                   arith.MulIOp(other, rows).result)
            group = _emit_copies(pairs, slice_ops, ops, {induction: following}, buffers,
                                 {b: offsets[b][1] for b in allocs})
            nvgpu.DeviceAsyncWaitOp(group, numGroups=1)
        # The compute reads this step's buffer.
        for buffer, wide in buffers.items():
            for use in list(buffer.uses):
                user = use.owner.operation
                if not _indexed_read(user, use.operand_number):
                    continue
                rank = ir.MemRefType(buffer.type).rank
                row_operand = 1 + rank - 2     # operands: buffer, indices..., padding
                with ir.InsertionPoint(user):
                    user.operands[row_operand] = arith.AddIOp(
                        user.operands[row_operand], offsets[buffer][0]).result
                user.operands[0] = wide
        for read, write in pairs:
            write.erase()
            read.erase()
        for buffer, alloc in allocs.items():
            for use in list(buffer.uses):
                use.owner.operation.erase()   # deallocations
            alloc.erase()
        block_ops = [o.operation for o in loop.block.operations]
        with ir.InsertionPoint(block_ops[block_ops.index(loop) + 1]):
            nvgpu.DeviceAsyncWaitOp(first, numGroups=0)
    return len(pairs)
