"""Schedule each distinct op or fusion group once, however often the model repeats it.

Why: a network repeats its blocks (ResNet-50's 16 bottlenecks, BERT's and ViT's 12 layers),
so most of its ops and fusion groups are copies of a few, with other weights. The transform
interpreter rescheduled every copy: ResNet-50's 65 sequences held 22 distinct ones, and the
schedule stage took a third of its compile (docs/performance.md, "Compile time").

How, all at the function level and undone before the pass ends:

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

A plan whose ops cannot be outlined (not all in one function body, or a value of theirs used
between them by an op outside the plan) stays in place and is scheduled as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import func

from ..pipelines.ir_queries import defining_op, ops_where
from .op_schedule import TAG, GroupSchedule, OpSchedule

OUTLINED_PREFIX = "__tilecraft_kernel_"
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


def _outline(outline: _Outline, name: str, module_body: ir.Block) -> tuple[ir.Operation, ir.Operation]:
    """Move ``outline``'s ops into a new private function ``name``; a call replaces them.
    Returns (the function, the call)."""
    last = outline.ops[-1]
    cloned = [value for value in outline.arguments if _cloned_inside(defining_op(value))]
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
    local: dict[ir.Value, ir.Value] = dict(zip(passed, body.arguments))
    for value in cloned:
        copy = defining_op(value).clone(ip=ir.InsertionPoint.at_block_begin(body))
        local[value] = copy.results[0]
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
                     sequence_text: dict[str, str]) -> list[OpSchedule | GroupSchedule]:
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
        function, call = _outline(outline, name, module_body)
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


def inline_outlined(module: ir.Operation) -> None:
    """Replace every call of an outlined function by a copy of its (scheduled) body and
    erase the functions."""
    module_body = module.regions[0].blocks[0]
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                 for op in module_body.operations
                 if op.operation.name == "func.func"
                 and ir.StringAttr(op.attributes["sym_name"]).value.startswith(OUTLINED_PREFIX)}
    if not functions:
        return
    calls = ops_where(module, lambda op: op.name == "func.call"
                      and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in functions)
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
