"""Schedule each distinct op or fusion group once, however often the model repeats it.

Why: a network repeats its blocks (ResNet-50's 16 bottlenecks, BERT's and ViT's 12 layers),
so most of its ops and fusion groups are copies of a few, with other weights. The transform
interpreter rescheduled every copy: ResNet-50's 65 sequences held 22 distinct ones, and the
schedule stage took a third of its compile (docs/performance.md, "Compile time").

How, all at the function level (undone before the pass ends unless ``keep-kernels``):

1. **Outline** the ops of each plan (an op, its fused init fill, a fusion group's producers
   and the reshapes between them) into a private ``func.func``: the values they read from
   outside become arguments, the values used after them results, and a ``func.call`` takes
   their place. Weights (tensor constants that are not splats) become arguments, so two
   blocks' copies are the same function; scalar, vector and splat constants are cloned
   inside, so that the schedule sees them as it did in place. A ``tensor.empty`` stays
   outside: cloned, two plans' copies of one (a Fire module's two expands) became equal after
   inlining and CSE merged them, so both wrote one buffer and the concat copied it.
2. **Merge** the functions whose text is the same (the op tags renumbered by order) and
   whose sequences are the same: their calls go to the first, the rest are erased, and only
   the first's sequence is applied.
3. **Inline** every call after the sequences ran: a copy of the scheduled body replaces each
   call, so later stages see the IR they saw before, each copy reading its own weights.
   With ``keep-kernels`` (``CompileOptions.kernel_calls``, the default) the kernels called
   more than once stay functions instead, so bufferization, the lowering to LLVM and LLVM's
   code generator handle each once (call_destinations.py, blocked_constants.py and
   entry_loops.py in pipelines/ know them); their scratch empties (a fused producer's init)
   are then made inside the body, as an argument a forall thread's tile of one was copied.

A plan whose ops cannot be outlined (not all in one function body, or a value of theirs used
between them by an op outside the plan) stays in place and is scheduled as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import func

from ..pipelines.ir_queries import KERNEL_FUNCTION_PREFIX, RESHAPE_OPS, WEIGHT_ARGUMENT, defining_op, ops_where
from .op_schedule import TAG, GroupSchedule, OpSchedule

OUTLINED_PREFIX = KERNEL_FUNCTION_PREFIX
_TAG_NUMBER = re.compile(re.escape(TAG) + r"\"? = (\d+)")
_GROUP_NUMBER = re.compile(r"tilecraft\.group = (\d+)")


def plan_tags(plan: OpSchedule | GroupSchedule) -> list[int]:
    """The tags of the ops ``plan``'s sequence transforms (its fallback's are among them)."""
    ops = [plan.root, *plan.producers] if isinstance(plan, GroupSchedule) else [plan]
    tags: list[int] = []
    for op_plan in ops:
        tags.append(op_plan.tag)
        if op_plan.fused_init_tag is not None:
            tags.append(op_plan.fused_init_tag)
    return tags


def _cloned_inside(op: ir.Operation | None) -> bool:
    """Ops an outlined body gets its own copy of instead of an argument: scalar, vector and
    splat constants (what the schedule must see as it is)."""
    if op is None or len(op.results) != 1 or op.name != "arith.constant":
        return False
    value = op.attributes["value"]
    if not isinstance(op.results[0].type, ir.RankedTensorType):
        return True
    return isinstance(value, ir.DenseElementsAttr) and value.is_splat


def _inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    while op is not None:
        if op == ancestor:
            return True
        op = op.parent
        op = getattr(op, "operation", op)
    return False


@dataclass
class _Outline:
    """The ops of one plan in one function body, with what crosses their boundary."""

    ops: list[ir.Operation]  # in block order
    arguments: list[ir.Value] = field(default_factory=list)
    results: list[ir.Value] = field(default_factory=list)


def _closure(tagged: list[ir.Operation]) -> _Outline | None:
    """``tagged`` plus the untagged ops between them (reshapes from one to another), if all
    sit in one function body and nothing outside them reads their values before the last."""
    block_owner = tagged[0].parent
    block_owner = getattr(block_owner, "operation", block_owner)
    if block_owner is None or block_owner.name != "func.func":
        return None
    if any(getattr(op.parent, "operation", op.parent) != block_owner for op in tagged):
        return None
    block = block_owner.regions[0].blocks[0]
    position = {op.operation: i for i, op in enumerate(block.operations)}
    members = {op: position[op] for op in tagged}
    # Untagged ops reading a member and read only by members (a reshape between two fused
    # ops) join, until none does.
    grown = True
    while grown:
        grown = False
        for op in list(members):
            for result in op.results:
                for use in result.uses:
                    user = use.owner
                    user = getattr(user, "operation", user)
                    if user in members or user not in position or TAG in user.attributes:
                        continue
                    readers = [getattr(u.owner, "operation", u.owner)
                               for r in user.results for u in r.uses]
                    if readers and all(reader in members for reader in readers):
                        members[user] = position[user]
                        grown = True
    ordered = sorted(members, key=members.get)
    last = members[ordered[-1]]
    outline = _Outline(ordered)
    seen: set[ir.Value] = set()
    for op in ordered:
        for result in op.results:
            outside = [getattr(u.owner, "operation", u.owner) for u in result.uses]
            outside = [user for user in outside if not any(_inside(user, m) for m in ordered)]
            if not outside:
                continue
            if any(position.get(user, -1) <= last for user in outside):
                return None
            outline.results.append(result)

    def collect(op: ir.Operation) -> ir.WalkResult:
        for operand in op.operands:
            owner = defining_op(operand)
            if owner is not None and any(_inside(owner, m) for m in ordered):
                continue
            if isinstance(operand.owner, ir.Block) and any(
                    _inside(getattr(operand.owner.owner, "operation", operand.owner.owner), m)
                    for m in ordered):
                continue
            if operand not in seen:
                seen.add(operand)
                outline.arguments.append(operand)
        return ir.WalkResult.ADVANCE

    for op in ordered:
        op.walk(collect, ir.WalkOrder.PRE_ORDER)
    return outline


def _feeds_result(user: ir.Operation, operand_number: int, outline: _Outline) -> bool:
    """Whether the value ``user`` writes through its operand ``operand_number`` (a
    destination) reaches one of ``outline``'s results: a linalg op's init, followed through
    reshapes and the linalg ops that take it as their init (those that only read it end the
    chain). Any other op counts as reaching one."""
    if not _destination_passing(user):
        return True
    first = len(user.operands) - len(user.results)  # the inits, one per result, come last
    if operand_number < first:
        return True
    return _written_into_result(user.results[operand_number - first], outline)


def _written_into_result(value: ir.Value, outline: _Outline) -> bool:
    if value in outline.results:
        return True
    for use in value.uses:
        reader = getattr(use.owner, "operation", use.owner)
        if reader.name in RESHAPE_OPS:
            if _written_into_result(reader.results[0], outline):
                return True
            continue
        if not _destination_passing(reader):
            return True
        if use.operand_number >= len(reader.operands) - len(reader.results) \
                and _feeds_result(reader, use.operand_number, outline):
            return True
    return False


def _destination_passing(op: ir.Operation) -> bool:
    """A linalg op on tensors: its operands are its inputs, then one init per result."""
    return op.name.startswith("linalg.") and len(op.results) > 0 and len(op.regions) == 1


def _scratch_uses(value: ir.Value, outline: _Outline) -> list[tuple[ir.Operation, int]]:
    """The uses of ``value``, a static ``tensor.empty``, as the destination of an
    intermediate only (one no result of ``outline`` is written into): the body gets its own
    empty for those. Why: as an argument, a kernel's scratch tile was a slice of a buffer
    shared across the ``scf.forall`` threads, and bufferization copied it per thread."""
    op = defining_op(value)
    if op is None or op.name != "tensor.empty" or not ir.RankedTensorType(value.type).has_static_shape:
        return []
    members = set(outline.ops)
    uses = [(getattr(use.owner, "operation", use.owner), use.operand_number) for use in value.uses]
    return [(user, number) for user, number in uses
            if user in members and not _feeds_result(user, number, outline)]


def _outline(outline: _Outline, name: str, module_body: ir.Block,
             local_scratch: bool = False) -> tuple[ir.Operation, ir.Operation]:
    """Move ``outline``'s ops into a new private function ``name``; a call replaces them.
    With ``local_scratch`` (the kernel stays a function), an empty that only intermediates
    are written into is made inside the body. Returns (the function, the call)."""
    last = outline.ops[-1]
    cloned = [value for value in outline.arguments if _cloned_inside(defining_op(value))]
    scratch = {value: uses for value in outline.arguments
               if local_scratch and (uses := _scratch_uses(value, outline))}
    members = set(outline.ops)
    cloned += [value for value, uses in scratch.items()
               if len(uses) == sum(1 for use in value.uses
                                   if getattr(use.owner, "operation", use.owner) in members)]
    passed = [value for value in outline.arguments if value not in cloned]
    with last.location:
        function_type = ir.FunctionType.get([v.type for v in passed], [v.type for v in outline.results])
        with ir.InsertionPoint(module_body):
            function = func.FuncOp(name, function_type, visibility="private")
        body = function.add_entry_block()
        with ir.InsertionPoint(body):
            terminator = func.ReturnOp(list(outline.results))
        with ir.InsertionPoint(last):
            call = func.CallOp([v.type for v in outline.results], ir.FlatSymbolRefAttr.get(name),
                               passed)
    call.move_after(last)
    function = function.operation
    for result, replacement in zip(outline.results, call.results):
        for use in list(result.uses):
            user = getattr(use.owner, "operation", use.owner)
            if user != terminator.operation:
                user.operands[use.operand_number] = replacement
    for op in outline.ops:
        op.move_before(terminator)
    weights = [isinstance(v.type, ir.RankedTensorType) and (op := defining_op(v)) is not None
               and op.name == "arith.constant" for v in passed]
    if any(weights):
        # Later passes that treat weights specially (blocked_constants.py, prefetch_blocks.py)
        # recognise these arguments by this mark.
        function.attributes["arg_attrs"] = ir.ArrayAttr.get(
            [ir.DictAttr.get({WEIGHT_ARGUMENT: ir.UnitAttr.get()} if weight else {}) for weight in weights])
    local: dict[ir.Value, ir.Value] = dict(zip(passed, body.arguments))
    for value in cloned:
        copy = defining_op(value).clone(ip=ir.InsertionPoint.at_block_begin(body))
        local[value] = copy.results[0]
    for value, uses in scratch.items():
        if value in local:
            continue
        copy = defining_op(value).clone(ip=ir.InsertionPoint.at_block_begin(body))
        for user, number in uses:
            user.operands[number] = copy.results[0]
    for value, replacement in local.items():
        for use in list(value.uses):
            user = getattr(use.owner, "operation", use.owner)
            if _inside(user, function):
                user.operands[use.operand_number] = replacement
    return function, call.operation


def _normalized(text: str, tags: list[int]) -> str:
    """``text`` with the plan's op tags numbered by their order in ``tags`` and the fusion
    group ids by first appearance: two copies of a block print the same."""
    index = {tag: i for i, tag in enumerate(tags)}
    text = _TAG_NUMBER.sub(lambda m: f"op_id = #{index.get(int(m.group(1)), m.group(1))}", text)
    groups: dict[str, int] = {}
    return _GROUP_NUMBER.sub(lambda m: f"group = #{groups.setdefault(m.group(1), len(groups))}", text)


def outline_repeated(module: ir.Operation, plans: list[OpSchedule | GroupSchedule],
                     sequence_text: dict[str, str], *,
                     keep_kernels: bool = False) -> list[OpSchedule | GroupSchedule]:
    """Outline each plan's ops and merge identical copies; returns the plans whose sequences
    must run (one per distinct copy, and every plan that stayed in place). Undo with
    :func:`inline_outlined` after the sequences ran."""
    tagged: dict[int, ir.Operation] = {}
    for op in ops_where(module, lambda op: TAG in op.attributes):
        tagged[ir.IntegerAttr(op.attributes[TAG]).value] = op
    module_body = module.regions[0].blocks[0]
    kept: list[OpSchedule | GroupSchedule] = []
    first_of: dict[str, str] = {}
    for number, plan in enumerate(plans):
        tags = plan_tags(plan)
        ops = [tagged.get(tag) for tag in tags]
        outline = _closure(ops) if all(op is not None for op in ops) else None
        if outline is None or not outline.results:
            kept.append(plan)
            continue
        name = f"{OUTLINED_PREFIX}{number}"
        function, call = _outline(outline, name, module_body, local_scratch=keep_kernels)
        # The whole function (its arguments too: a region prints without its entry block's
        # header), under one name.
        body_text = str(function).replace(f"@{name}(", "@kernel(", 1)
        key = _normalized(body_text + sequence_text[plan.sequence_name], tags)
        original = first_of.setdefault(key, name)
        if original == name:
            kept.append(plan)
            continue
        call.attributes["callee"] = ir.FlatSymbolRefAttr.get(original)
        function.erase()
    return kept


def inline_outlined(module: ir.Operation, *, keep_repeated: bool = False) -> None:
    """Replace every call of an outlined function by a copy of its (scheduled) body and
    erase the functions. ``keep_repeated``: the functions called more than once stay (the
    ``keep-kernels`` build); a kernel the model runs once gains nothing from being a
    function, and LLVM's inlining of it back cost DenseNet's JIT 0.8 CPU s."""
    module_body = module.regions[0].blocks[0]
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                 for op in module_body.operations
                 if op.operation.name == "func.func"
                 and ir.StringAttr(op.attributes["sym_name"]).value.startswith(OUTLINED_PREFIX)}
    if not functions:
        return
    calls = ops_where(module, lambda op: op.name == "func.call"
                      and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in functions)
    if keep_repeated:
        count: dict[str, int] = {}
        for call in calls:
            callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            count[callee] = count.get(callee, 0) + 1
        functions = {name: function for name, function in functions.items() if count.get(name, 0) < 2}
        calls = [call for call in calls if ir.FlatSymbolRefAttr(call.attributes["callee"]).value in functions]
    for call in calls:
        function = functions[ir.FlatSymbolRefAttr(call.attributes["callee"]).value]
        copy = function.clone(ip=ir.InsertionPoint(module_body))
        body = copy.regions[0].blocks[0]
        for argument, value in zip(body.arguments, call.operands):
            argument.replace_all_uses_with(value)
        operations = list(body.operations)
        terminator = operations[-1]
        for op in operations[:-1]:
            op.operation.move_before(call)
        for result, value in zip(call.results, terminator.operands):
            result.replace_all_uses_with(value)
        call.erase()
        copy.erase()
    for function in functions.values():
        function.erase()
