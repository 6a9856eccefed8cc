"""``tilecraft-parallel-for``: each ``scf.parallel`` becomes one call of the runtime's flat
parallel-for (runtime/async_runtime.c, ``tilecraftParallelFor``) on an outlined body.

Why: ``async-parallel-for`` turned every parallel loop into a tree of ``async.execute``
regions: a coroutine frame, a token and a group entry per block, queued and awaited through
the async runtime, with a malloc per task. The suite's models of 1-5 ms run about 30
parallel loops per call, so what a loop costs to dispatch, balance and join was a large part
of the second core's time (issue #43, docs/performance.md "The flat parallel-for"). Here a
loop is one runtime call that publishes one job; the calling thread and the pool's workers
take its blocks from counters, and the caller joins when every block is done. Nothing is
allocated per block or per loop.

What the pass does, for a one-dimensional ``scf.parallel`` without reductions (the
collapse pass, parallel_loops.py, runs first and makes multi-dimensional loops of constant
bounds one-dimensional):

- the body moves into a new private ``func.func @parallel_compute_fn_<n>(%ctx: !llvm.ptr,
  %begin: index, %end: index)``, inside an ``scf.for`` over iterations ``[begin, end)``;
- the values the body uses from outside (memrefs, indices, integers, floats, 1-D vectors)
  are stored into one stack struct at the call site (an ``llvm.alloca`` in the enclosing
  function's entry block) and loaded back at the function's start; a memref travels as its
  LLVM descriptor through ``builtin.unrealized_conversion_cast``, which
  ``reconcile-unrealized-casts`` removes once ``convert-to-llvm`` has lowered both sides;
  constants are recreated inside instead of captured (weights, ``memref.get_global``, are
  captured: an outlined kernel that names no global may be compiled in another process);
- the loop becomes ``func.call @tilecraftParallelFor(%fn, %ctx, %iterations)`` with
  ``%fn = func.constant @parallel_compute_fn_<n>`` (a pointer once lowered).

Loops are taken outermost first, so a nested loop lands in its parent's outlined function
and its context struct is that function's own (one per block, never shared between
threads); the runtime runs a nested loop on the thread that reaches it.

Loops this pass leaves (reductions, more than one dimension, a captured value of another
type: an unranked memref, a memref in another memory space, an n-D vector) keep the
``async-parallel-for`` lowering after it (pipelines/stages.py), which is tested for them.

The functions keep async-parallel-for's ``parallel_compute_fn`` name: the kernel profile,
the merge of identical functions and the entry's rolled loops (vector/entry_loops.py) treat
them as the outlined parallel kernels they are.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith, builtin, func, llvm, scf

from ..ir_queries import ops_where
from ..passes import register_pass

PARALLEL_FOR = "tilecraft-parallel-for"
# The runtime entry (runtime/async_runtime.c): void(void (*fn)(void *, i64, i64), void *, i64).
RUNTIME_FUNCTION = "tilecraftParallelFor"
BODY_PREFIX = "parallel_compute_fn"

# Ops without operands that are cheaper to recreate in the body than to capture. Not
# ``memref.get_global``: a weight travels in the context struct, so the outlined kernel
# names no global and the JIT may compile it in another process (jit/function_split.py).
_REMATERIALIZED = frozenset({"arith.constant", "ub.poison", "llvm.mlir.constant"})


def _descriptor_type(memref_type: ir.MemRefType) -> ir.Type:
    """The LLVM struct ``convert-to-llvm`` makes of a ranked memref (allocated and aligned
    pointers, offset, sizes, strides)."""
    ptr = llvm.PointerType.get()
    i64 = ir.IntegerType.get_signless(64)
    fields = [ptr, ptr, i64]
    if memref_type.rank:
        array = ir.Type.parse(f"!llvm.array<{memref_type.rank} x i64>")
        fields += [array, array]
    return llvm.StructType.get_literal(fields, loc=ir.Location.unknown())


def _stored_type(value_type: ir.Type) -> ir.Type | None:
    """The type a captured value has in the context struct, or None if not supported."""
    if isinstance(value_type, ir.IndexType):
        return ir.IntegerType.get_signless(64)
    if isinstance(value_type, (ir.IntegerType, ir.FloatType)):
        return value_type
    if isinstance(value_type, ir.VectorType):
        vector = ir.VectorType(value_type)
        return value_type if vector.rank == 1 and not vector.scalable else None
    if isinstance(value_type, ir.MemRefType):
        memref_type = ir.MemRefType(value_type)
        return _descriptor_type(memref_type) if memref_type.memory_space is None else None
    return None


def _inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    """Whether ``op`` is ``ancestor`` or nested in it."""
    while True:
        if op == ancestor:
            return True
        parent = op.parent
        if parent is None:
            return False
        op = parent.operation


def _defining_op(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    return owner.operation if isinstance(owner, (ir.Operation, ir.OpView)) else None


def _outside_values(loop: ir.Operation) -> list[ir.Value]:
    """Values used in ``loop``'s body and defined outside it, in first-use order."""
    seen: list[ir.Value] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op == loop:
            return ir.WalkResult.ADVANCE
        for value in op.operands:
            owner = value.owner
            where = owner.owner if isinstance(owner, ir.Block) else owner
            if not _inside(where.operation, loop) and value not in seen:
                seen.append(value)
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    return seen


def _loop_bounds(loop: ir.Operation) -> tuple[ir.Value, ir.Value, ir.Value] | None:
    """(lower bound, upper bound, step) of a 1-D ``scf.parallel`` without reductions."""
    sizes = ir.DenseI32ArrayAttr(loop.attributes["operandSegmentSizes"])
    if list(sizes) != [1, 1, 1, 0]:
        return None
    lower, upper, step = loop.operands
    return lower, upper, step


def can_outline(loop: ir.Operation) -> bool:
    """Whether ``loop`` takes the flat parallel-for: 1-D, no reductions, every captured
    value of a type the context struct carries."""
    if _loop_bounds(loop) is None:
        return False
    for value in _outside_values(loop):
        op = _defining_op(value)
        if op is not None and op.name in _REMATERIALIZED and not op.operands and not op.regions:
            continue
        if _stored_type(value.type) is None:
            return False
    return True


def _enclosing_function(op: ir.Operation) -> ir.Operation:
    while op.name != "func.func":
        op = op.parent.operation
    return op


def _declare_runtime(module: ir.Operation, body_type: ir.FunctionType) -> None:
    symbols = ir.SymbolTable(module)
    if RUNTIME_FUNCTION in symbols:
        return
    with ir.InsertionPoint(module.regions[0].blocks[0]), ir.Location.unknown():
        func.FuncOp(RUNTIME_FUNCTION, ir.FunctionType.get(
            [body_type, llvm.PointerType.get(), ir.IndexType.get()], []), visibility="private")


def _iterations(lower: ir.Value, upper: ir.Value, step: ir.Value) -> ir.Value:
    """``max(0, ceildiv(upper - lower, step))`` at the insertion point."""
    index = ir.IndexType.get()
    zero = arith.constant(index, 0)
    span = arith.subi(upper, lower)
    count = arith.ceildivsi(span, step)
    return arith.maxsi(count, zero)


def outline(loop: ir.Operation, name: str) -> ir.Operation:
    """Replace ``loop`` (``can_outline``) by a call of the runtime on a new function
    ``name`` that runs iterations ``[begin, end)`` of its body; returns that function."""
    lower, upper, step = _loop_bounds(loop)
    parent = _enclosing_function(loop)
    module = parent.parent.operation
    index, ptr = ir.IndexType.get(), llvm.PointerType.get()
    i64 = ir.IntegerType.get_signless(64)
    body_type = ir.FunctionType.get([ptr, index, index], [])
    _declare_runtime(module, body_type)

    captured, recreated = [], []
    for value in _outside_values(loop):
        op = _defining_op(value)
        if op is not None and op.name in _REMATERIALIZED and not op.operands and not op.regions:
            recreated.append((value, op))
        else:
            captured.append(value)
    # The loop's own bounds are needed inside: begin/end are iteration numbers.
    for value in (lower, step):
        op = _defining_op(value)
        if op is not None and op.name == "arith.constant":
            if all(v != value for v, _ in recreated):
                recreated.append((value, op))
        elif value not in captured:
            captured.append(value)
    stored = [_stored_type(v.type) for v in captured]
    context_type = llvm.StructType.get_literal(stored or [i64], loc=loop.location)

    # The outlined function, after the enclosing one.
    location = loop.location
    with ir.InsertionPoint.after(parent), location:
        function = func.FuncOp(name, body_type, visibility="private")
    entry = function.add_entry_block()
    context, begin, end = entry.arguments
    with ir.InsertionPoint(entry), location:
        inside: list[tuple[ir.Value, ir.Value]] = []  # (outside value, its copy in the body)
        for position, (value, stored_type) in enumerate(zip(captured, stored)):
            address = llvm.GEPOp(ptr, context, [], [0, position], context_type, 0).result
            loaded = llvm.LoadOp(stored_type, address).result
            if stored_type != value.type:
                loaded = builtin.UnrealizedConversionCastOp([value.type], [loaded]).result
            inside.append((value, loaded))
        for value, op in recreated:
            clone = op.clone()
            inside.append((value, clone.results[list(op.results).index(value)]))

        def local(value: ir.Value) -> ir.Value:
            return next(new for old, new in inside if old == value)

        one = arith.constant(index, 1)
        iterations = scf.ForOp(begin, end, one)
        with ir.InsertionPoint(iterations.body):
            iv = arith.addi(local(lower), arith.muli(iterations.induction_variable, local(step)))
            terminator = scf.YieldOp([])
        func.ReturnOp([])

    # Move the body (all but its scf.reduce terminator) into the scf.for.
    old_body = loop.regions[0].blocks[0]
    old_body.arguments[0].replace_all_uses_with(iv)
    for op in list(old_body.operations)[:-1]:
        op.operation.move_before(terminator)
    for old, new in inside:
        for use in list(old.uses):
            if _inside(use.owner.operation, function.operation):
                use.owner.operation.operands[use.operand_number] = new

    # The call site: the context struct on the enclosing function's stack, filled, then one call.
    first = parent.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(first), location:
        slot = llvm.AllocaOp(ptr, arith.constant(i64, 1), context_type).result
    with ir.InsertionPoint(loop), location:
        for position, (value, stored_type) in enumerate(zip(captured, stored)):
            if isinstance(value.type, ir.IndexType):
                value = arith.index_cast(i64, value)
            elif stored_type != value.type:
                value = builtin.UnrealizedConversionCastOp([stored_type], [value]).result
            llvm.StoreOp(value, llvm.GEPOp(ptr, slot, [], [0, position], context_type, 0).result)
        body = func.ConstantOp(body_type, ir.FlatSymbolRefAttr.get(name)).result
        func.CallOp([], RUNTIME_FUNCTION, [body, slot, _iterations(lower, upper, step)])
    loop.erase()
    return function.operation


def outline_parallel_loops(module: ir.Operation) -> int:
    """Outline every parallel loop the flat parallel-for can take; returns how many."""
    taken, left = [], []
    for loop in ops_where(module, lambda op: op.name == "scf.parallel"):  # pre-order
        # A loop inside one that async-parallel-for will take stays with it: its context
        # struct would sit outside that loop's blocks, shared between their threads.
        with loop.location:
            takes = can_outline(loop)
        if takes and not any(_inside(loop, outer) for outer in left):
            taken.append(loop)
        else:
            left.append(loop)
    names = {ir.StringAttr(op.attributes["sym_name"]).value
             for op in (o.operation for o in module.regions[0].blocks[0].operations)
             if "sym_name" in op.attributes}
    counter = 0
    for loop in taken:  # outer first: a nested loop is outlined from its parent's new function
        while f"{BODY_PREFIX}_{counter}" in names:
            counter += 1
        names.add(f"{BODY_PREFIX}_{counter}")
        with loop.location:
            outline(loop, f"{BODY_PREFIX}_{counter}")
    return len(taken)


@register_pass(
    PARALLEL_FOR,
    "Each one-dimensional scf.parallel without reductions as one tilecraftParallelFor call "
    "on its outlined body (runtime/async_runtime.c)",
)
def parallel_for_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    outline_parallel_loops(module)


MARK_PARALLEL_CALLS = "tilecraft-mark-parallel-calls"
CALL_BEGIN = "tilecraftParallelCallBegin"
CALL_END = "tilecraftParallelCallEnd"


def mark_parallel_calls(module: ir.Operation) -> int:
    """Call the runtime's call begin at the start of each public function and its call end
    before each of its returns, in a module that calls the flat parallel-for; returns how
    many functions were marked."""
    functions = [op.operation for op in module.regions[0].blocks[0].operations]
    if not any(op.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == RUNTIME_FUNCTION
               for op in functions):
        return 0
    entries = [op for op in functions
               if op.name == "func.func" and op.regions[0].blocks
               and ("sym_visibility" not in op.attributes
                    or ir.StringAttr(op.attributes["sym_visibility"]).value == "public")]
    if not entries:
        return 0
    with ir.InsertionPoint(module.regions[0].blocks[0]), ir.Location.unknown():
        for name in (CALL_BEGIN, CALL_END):
            func.FuncOp(name, ir.FunctionType.get([], []), visibility="private")
    for entry in entries:
        with ir.InsertionPoint.at_block_begin(entry.regions[0].blocks[0]), entry.location:
            func.CallOp([], CALL_BEGIN, [])
        for ret in ops_where(entry, lambda op: op.name == "func.return"):
            with ir.InsertionPoint(ret), ret.location:
                func.CallOp([], CALL_END, [])
    return len(entries)


@register_pass(
    MARK_PARALLEL_CALLS,
    "Mark the begin and end of each call of a public function for the parallel runtime (its "
    "workers spin between the loops of a call, sleep after it)",
)
def mark_parallel_calls_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why a pass of its own, late in the pipeline: the run-time checks' lowering and the
    verification routing add early returns (failed checks), and each must end the call."""
    mark_parallel_calls(module)
