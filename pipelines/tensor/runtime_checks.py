"""Run-time checks in the generated code: what the compiler cannot prove, the code checks.

Two passes (design and cost: docs/robustness.md, "Run-time checks"):

``tilecraft-insert-runtime-checks`` (tensor IR, end of the simplify stage) adds a marker call
``func.call @tilecraft_runtime_check(%ok, %value, %bound)`` before every op of a function's
entry block whose dynamic sizes must agree for its loops to stay inside its buffers: the
operand dims a structured linalg op indexes with one loop (matmul inner dims, elementwise
operands, broadcasts), the element counts of a ``tensor.expand_shape`` (a Reshape), the
offsets and sizes of ``tensor.extract_slice``/``insert_slice``, the extents a
``tensor.concat`` does not concatenate along, the static dims a ``tensor.cast`` asserts.
The emitters already added index-range and extent checks for gathers and scatters
(ir/checks.py). With ``enabled=0`` it removes every marker instead
(``CompileOptions(runtime_checks=False)``). ``resolve-ranked-shaped-type-result-dims`` and
``canonicalize`` then express the sizes through the arguments' dims, so most checks fold
away (static shapes) or depend on arguments only.

``tilecraft-lower-runtime-checks`` (buffers, start of the llvm stage) numbers the markers
(the module attribute ``tilecraft.runtime_checks`` keeps their kinds and messages, which
the JIT and the package runtime read), adds a size check before every ``memref.alloc`` of a
dynamic size in a function's top-level blocks, moves the shape checks that depend on the
arguments only to the function's start, and lowers each marker: an index check becomes
``scf.if %failed { call @tilecraft_check_failed(id, value, bound) }`` and computation goes
on (the gather clamps its reads, so it stays inside the buffer); a shape or allocation check
splits the block: on failure it reports, frees the buffers allocated so far that would have
been freed or returned later, and returns empty results. Never ``cf.assert``: that aborts
the process.
"""

from __future__ import annotations

import re
from typing import Mapping

from mlir import ir, passmanager
from mlir.dialects import arith, cf, func, memref, scf, tensor

from ...ir.maps import has_indexing_maps, indexing_maps
from ...ir.checks import emit_check
from ...runtime.checks import (
    CHECK_FUNCTION,
    KIND_ATTRIBUTE,
    MESSAGE_ATTRIBUTE,
    REPORT_SYMBOL,
    TABLE_ATTRIBUTE,
    encode_table,
)
from ...runtime.limits import Limits, memory_budget
from ..ir_queries import defined_functions, defining_op, ops_where
from ..loop_nest import is_structured
from ..passes import positive_int_option, register_pass
from ..scratch import scratch_copy

# Set on the module by the insert pass when checks are on; the lowering adds allocation
# checks only then (a pipeline without the insert pass, like the constant folder's, has none).
ENABLED_ATTRIBUTE = "tilecraft.runtime_checks_enabled"
INSERT_CHECKS = "tilecraft-insert-runtime-checks"
LOWER_CHECKS = "tilecraft-lower-runtime-checks"

_NODE_LOCATION = re.compile(r'loc\("([^"(]*)\(([^")]*)\)"')


def _i1() -> ir.Type:
    return ir.IntegerType.get_signless(1)


def _i64() -> ir.Type:
    return ir.IntegerType.get_signless(64)


def _index(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def _is_call_to(op: ir.Operation, name: str) -> bool:
    return op.name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value == name


def _declare(module: ir.Operation, name: str, inputs: list[ir.Type]) -> None:
    body = module.regions[0].blocks[0]
    for op in body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.operation.attributes["sym_name"]).value == name:
            return
    with ir.InsertionPoint.at_block_begin(body), ir.Location.unknown():
        func.FuncOp(name, (inputs, []), visibility="private")


def _erase_declaration(module: ir.Operation, name: str) -> None:
    for op in list(module.regions[0].blocks[0].operations):
        op = op.operation
        if op.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name:
            op.erase()


def node_label(location: ir.Location, fallback: str) -> str:
    """``Gather node 'g'`` for an op imported from ONNX node ``g`` (or an FX node), else
    ``fallback`` (the op's name)."""
    match = _NODE_LOCATION.search(str(location))
    if match is None:
        return fallback
    node, op_type = match.groups()
    return f"{op_type} node {node!r}" if node else op_type


# A marker call (declares the marker function when the module lacks it).
_marker = emit_check


# ---- insertion (tensor IR) --------------------------------------------------------------

def _dim(value: ir.Value, axis: int) -> ir.Value:
    shape = ir.RankedTensorType(value.type)
    if not shape.is_dynamic_dim(axis):
        return _index(shape.shape[axis])
    return tensor.dim(value, _index(axis))


def _is_dynamic(value: ir.Value, axis: int) -> bool:
    return ir.RankedTensorType(value.type).is_dynamic_dim(axis)


def _check_structured(op: ir.Operation, maps: list[ir.AffineMap]) -> None:
    """Operand dims indexed by one loop must be equal (only pairs with a dynamic side)."""
    uses: dict[int, list[tuple[int, int]]] = {}
    for index, (operand, affine_map) in enumerate(zip(op.operands, maps)):
        if not isinstance(operand.type, ir.RankedTensorType):
            continue
        for axis, expr in enumerate(affine_map.results):
            if isinstance(expr, ir.AffineDimExpr):
                uses.setdefault(expr.position, []).append((index, axis))
    operands = list(op.operands)
    for loop, members in sorted(uses.items()):
        static = [m for m in members if not _is_dynamic(operands[m[0]], m[1])]
        reference = static[0] if static else members[0]
        for member in members:
            if member == reference or (member in static and reference in static):
                continue
            size = _dim(operands[member[0]], member[1])
            expected = _dim(operands[reference[0]], reference[1])
            _marker(arith.cmpi(arith.CmpIPredicate.eq, size, expected), size, expected, "shape",
                    f"operand {member[0]} has size {{value}} along axis {member[1]} where operand "
                    f"{reference[0]} has {{bound}} (loop {loop})")


def _check_expand(op: ir.Operation) -> None:
    """Each source dim equals the product of the result dims it expands into."""
    source, result = op.operands[0], op.results[0]
    groups = [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)] for g in ir.ArrayAttr(op.attributes["reassociation"])]
    for axis, group in enumerate(groups):
        if not _is_dynamic(source, axis) and not any(_is_dynamic(result, d) for d in group):
            continue
        product = _index(1)
        for d in group:
            product = arith.muli(product, _dim(result, d))
        size = _dim(source, axis)
        _marker(arith.cmpi(arith.CmpIPredicate.eq, size, product), size, product, "shape",
                f"a dimension of {{value}} elements is reshaped into {{bound}} elements (axis {axis})")


def _check_reshape(op: ir.Operation) -> None:
    """``tensor.reshape``: the element counts of the source and of the shape operand agree."""
    source, shape = op.operands[0], op.operands[1]
    result = ir.RankedTensorType(op.results[0].type)
    if not isinstance(source.type, ir.RankedTensorType):
        return
    total = _index(1)
    for axis in range(ir.RankedTensorType(source.type).rank):
        total = arith.muli(total, _dim(source, axis))
    product = _index(1)
    for axis in range(result.rank):
        extent = tensor.extract(shape, [_index(axis)])
        if not isinstance(extent.type, ir.IndexType):
            extent = arith.index_cast(ir.IndexType.get(), extent)
        product = arith.muli(product, extent)
    _marker(arith.cmpi(arith.CmpIPredicate.eq, total, product), total, product, "shape",
            "a tensor of {value} elements is reshaped into a shape of {bound} elements")


def _mixed(op: ir.Operation, name: str, dynamic: list[ir.Value]) -> list[ir.Value]:
    values = []
    for v in ir.DenseI64ArrayAttr(op.attributes[name]):
        values.append(dynamic.pop(0) if v == ir.ShapedType.get_dynamic_size() or v < -(1 << 62) else _index(v))
    return values


def _check_slice(op: ir.Operation, whole: ir.Value, first_dynamic: int) -> None:
    """Every offset and the last index a slice touches lie inside ``whole``."""
    rank = ir.RankedTensorType(whole.type).rank
    dynamic = list(op.operands)[first_dynamic:]
    offsets = _mixed(op, "static_offsets", dynamic)
    sizes = _mixed(op, "static_sizes", dynamic)
    strides = _mixed(op, "static_strides", dynamic)
    if not any(_is_dynamic(whole, a) for a in range(rank)) and not (list(op.operands)[first_dynamic:]):
        return
    for axis in range(min(rank, len(offsets))):
        n = _dim(whole, axis)
        last = arith.addi(offsets[axis], arith.muli(arith.subi(sizes[axis], _index(1)), strides[axis]))
        empty = arith.cmpi(arith.CmpIPredicate.eq, sizes[axis], _index(0))
        inside = [arith.cmpi(arith.CmpIPredicate.sge, offsets[axis], _index(0)),
                  arith.cmpi(arith.CmpIPredicate.slt, offsets[axis], n),
                  arith.cmpi(arith.CmpIPredicate.sge, last, _index(0)),
                  arith.cmpi(arith.CmpIPredicate.slt, last, n)]
        ok = inside[0]
        for condition in inside[1:]:
            ok = arith.andi(ok, condition)
        ok = arith.ori(empty, ok)
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.sge, sizes[axis], _index(0)))
        bad = arith.select(arith.cmpi(arith.CmpIPredicate.slt, offsets[axis], _index(0)), offsets[axis], last)
        _marker(ok, bad, n, "shape", f"a slice reaches index {{value}} of axis {axis}, of size {{bound}}")


def _check_concat(op: ir.Operation) -> None:
    """``tensor.concat``: every operand has the result's extent along the other axes (the
    copies write each operand's extents into the result's)."""
    axis = ir.IntegerAttr(op.attributes["dim"]).value
    operands = list(op.operands)
    for index, operand in enumerate(operands[1:], start=1):
        for d in range(ir.RankedTensorType(operand.type).rank):
            if d == axis or (not _is_dynamic(operand, d) and not _is_dynamic(operands[0], d)):
                continue
            size, expected = _dim(operand, d), _dim(operands[0], d)
            _marker(arith.cmpi(arith.CmpIPredicate.eq, size, expected), size, expected, "shape",
                    f"operand {index} has size {{value}} along axis {d} where operand 0 has {{bound}}")


def _check_cast(op: ir.Operation) -> None:
    source, result = op.operands[0], op.results[0]
    if not isinstance(source.type, ir.RankedTensorType) or not isinstance(result.type, ir.RankedTensorType):
        return
    for axis in range(ir.RankedTensorType(result.type).rank):
        if _is_dynamic(source, axis) and not _is_dynamic(result, axis):
            size, expected = _dim(source, axis), _dim(result, axis)
            _marker(arith.cmpi(arith.CmpIPredicate.eq, size, expected), size, expected, "shape",
                    f"size {{value}} along axis {axis} where the model needs {{bound}}")


def _indexing_maps(module: ir.Operation) -> dict[tuple[int, int], list[ir.AffineMap]]:
    """(function number, structured op number in its entry block) -> indexing maps of
    structured ops, read from a generalized copy (named ops carry no maps).

    Why numbered among the structured ops only: generalizing may add other ops (the count of
    all ops then differs), and a position among all ops matched maps to the wrong op (an
    expand_shape given a matmul's maps aborted in MLIR's isDynamicDim)."""
    _container, twin = scratch_copy(module)
    passmanager.PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(twin)
    maps = {}
    for f, function in enumerate(defined_functions(twin)):
        structured = [op.operation for op in function.regions[0].blocks[0].operations if is_structured(op.operation)]
        for k, op in enumerate(structured):
            if has_indexing_maps(op):
                maps[(f, k)] = indexing_maps(op)
    return maps


def _maps_fit(op: ir.Operation, maps: list[ir.AffineMap]) -> bool:
    """Each ranked operand has a map with one result per dim (else the maps are another op's)."""
    if len(maps) != len(op.operands):
        return False
    return all(len(m.results) == ir.RankedTensorType(o.type).rank
               for o, m in zip(op.operands, maps) if isinstance(o.type, ir.RankedTensorType))


def _has_dynamic_tensor(op: ir.Operation) -> bool:
    return any(isinstance(v.type, ir.RankedTensorType) and not ir.RankedTensorType(v.type).has_static_shape
               for v in [*op.operands, *op.results])


@register_pass(INSERT_CHECKS, "Run-time checks of dynamic sizes before the ops that rely on them "
               "(enabled=0: remove every run-time check)", options={"enabled": "1 (default) or 0"})
def insert_runtime_checks_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why at the end of simplify: the ops are those the schedule will tile (fusion done), and
    still on tensors, where each op's sizes are its operands' dims."""
    markers = ops_where(module, lambda op: _is_call_to(op, CHECK_FUNCTION))
    if options.get("enabled", "1") in ("0", "false"):
        for call in markers:
            call.erase()
        _erase_declaration(module, CHECK_FUNCTION)
        return
    module.attributes[ENABLED_ATTRIBUTE] = ir.UnitAttr.get()
    functions = defined_functions(module)
    if not any(_has_dynamic_tensor(op) for f in functions for op in ops_where(f, lambda o: True)):
        return
    maps = _indexing_maps(module)
    for f, function in enumerate(functions):
        k = -1
        for op in list(function.regions[0].blocks[0].operations):
            op = op.operation
            structured = is_structured(op)
            k += structured
            if not _has_dynamic_tensor(op):
                continue
            with ir.InsertionPoint(op), op.location:
                if structured and (f, k) in maps:
                    if _maps_fit(op, maps[(f, k)]):
                        _check_structured(op, maps[(f, k)])
                elif op.name == "tensor.extract_slice":
                    _check_slice(op, op.operands[0], 1)
                elif op.name == "tensor.insert_slice":
                    _check_slice(op, op.operands[1], 2)
                elif op.name == "tensor.cast":
                    _check_cast(op)
                elif op.name == "tensor.reshape":
                    _check_reshape(op)
                elif op.name == "tensor.concat":
                    _check_concat(op)
            if op.name == "tensor.expand_shape":  # after it: its result's dims are its sizes
                with ir.InsertionPoint.after(op), op.location:
                    _check_expand(op)


# ---- lowering (buffers) -----------------------------------------------------------------

_HOISTABLE = re.compile(r"(arith\.|affine\.apply|affine\.min|affine\.max|memref\.dim$|tensor\.dim$)")


def _backward_slice(call: ir.Operation, block: ir.Block) -> list[ir.Operation] | None:
    """The ops of ``block`` that ``call``'s operands are computed from, if all are pure index
    arithmetic on constants and the function's arguments (so they may move to its start)."""
    seen: dict = {}
    stack = list(call.operands)
    while stack:
        value = stack.pop()
        op = defining_op(value)
        if op is None:
            if value.owner != block:
                return None
            continue
        if op in seen.values():
            continue
        if not _HOISTABLE.match(op.name) or op.block != block or len(op.regions):
            return None
        seen[len(seen)] = op
        stack.extend(op.operands)
    return list(seen.values())


def _hoist(function: ir.Operation, markers: list[ir.Operation]) -> None:
    """Move the shape checks that depend on the arguments only, with the index arithmetic
    they read, to the function's start: they then run before anything is allocated or
    computed, and a failure returns at once."""
    entry = function.regions[0].blocks[0]
    placed = 0  # ops at the start already hoisted: later checks go after them, in order
    for call in markers:
        if ir.StringAttr(call.attributes[KIND_ATTRIBUTE]).value == "index" or call.block != entry:
            continue
        hoisted = _backward_slice(call, entry)
        if hoisted is None:
            continue
        order = [op.operation for op in entry.operations]
        done = order[:placed]  # already at the start, before the anchor
        moving = [op for op in sorted(hoisted, key=order.index) if op not in done] + [call]
        anchor = next(op for op in order[placed:] if op not in moving)
        for op in moving:
            op.move_before(anchor)
        placed = [op.operation for op in entry.operations].index(anchor)


def _alloc_check(op: ir.Operation, max_bytes: int) -> None:
    """Before a dynamic ``memref.alloc``: its byte size must be at most ``max_bytes``; the
    product is computed without overflow (each factor is compared with the room left below
    2^63), and a negative size fails too."""
    memref_type = ir.MemRefType(op.results[0].type)
    element_bits = memref_type.element_type.width if hasattr(memref_type.element_type, "width") else 64
    size = max(1, (element_bits + 7) // 8)
    for d in range(memref_type.rank):
        if not memref_type.is_dynamic_dim(d):
            size *= memref_type.shape[d]
    sizes = list(op.operands)[:sum(memref_type.is_dynamic_dim(d) for d in range(memref_type.rank))]
    if not sizes:
        return
    limit = _index(max_bytes)
    largest = _index((1 << 63) - 1)
    bytes_so_far = _index(size)
    valid = arith.constant(_i1(), 1)  # no negative size, no int64 overflow so far
    for extent in sizes:
        nonnegative = arith.cmpi(arith.CmpIPredicate.sge, extent, _index(0))
        divisor = arith.select(arith.cmpi(arith.CmpIPredicate.sgt, extent, _index(0)), extent, _index(1))
        no_overflow = arith.cmpi(arith.CmpIPredicate.sle, bytes_so_far, arith.divsi(largest, divisor))
        valid = arith.andi(valid, arith.andi(nonnegative, no_overflow))
        bytes_so_far = arith.select(valid, arith.muli(bytes_so_far, extent), _index(-1))
    ok = arith.andi(valid, arith.cmpi(arith.CmpIPredicate.sle, bytes_so_far, limit))
    _marker(ok, bytes_so_far, limit, "alloc",
            f"a buffer of {memref_type} needs {{value}} bytes at this call (-1: more than 2^63 or "
            f"a negative size); the limit (TILECRAFT_MAX_TENSOR, TILECRAFT_MEMORY_BUDGET at compile "
            f"time) allows {{bound}}")
    # Below the limit, malloc may still fail (RLIMIT_AS, no overcommit): NULL is reported too.
    with ir.InsertionPoint.after(op):
        pointer = memref.extract_aligned_pointer_as_index(op.results[0])
        ok = arith.ori(arith.cmpi(arith.CmpIPredicate.ne, pointer, _index(0)),
                       arith.cmpi(arith.CmpIPredicate.eq, bytes_so_far, _index(0)))
        _marker(ok, bytes_so_far, limit, "alloc",
                f"a buffer of {memref_type}: allocating {{value}} bytes failed (out of memory)")


def _move_to_block(ops: list[ir.Operation], block: ir.Block) -> None:
    for op in ops:
        op.detach_from_parent()
        ir.InsertionPoint(block).insert(op)


def _fail_block(function: ir.Operation, block: ir.Block, call: ir.Operation, check_id: int,
                freed: list[ir.Value]) -> ir.Block | None:
    """A block that reports check ``check_id``, frees ``freed`` and returns empty results."""
    function_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
    fail = block.create_after()
    with ir.InsertionPoint(fail), call.location:
        func.CallOp([], ir.FlatSymbolRefAttr.get(REPORT_SYMBOL),
                    [arith.constant(_i64(), check_id), call.operands[1], call.operands[2]])
        for buffer in freed:
            memref.dealloc(buffer)
        results = empty_results(function_type)
        if results is None:
            return None
        func.ReturnOp(results)
    return fail


def empty_results(function_type: ir.FunctionType) -> list[ir.Value] | None:
    """Results a function returns after a failed check (at the insertion point): buffers with
    no elements (the caller frees them), zeros; None for a result type it cannot make."""
    results = []
    for result_type in function_type.results:
        if isinstance(result_type, ir.MemRefType):
            shape = ir.MemRefType(result_type)
            zeros = [_index(0) for d in range(shape.rank) if shape.is_dynamic_dim(d)]
            results.append(memref.alloc(result_type, zeros, []))
        elif isinstance(result_type, ir.IntegerType) or isinstance(result_type, ir.IndexType):
            results.append(arith.constant(result_type, 0))
        elif isinstance(result_type, (ir.F32Type, ir.F64Type, ir.F16Type, ir.BF16Type)):
            results.append(arith.constant(result_type, 0.0))
        else:
            return None
    return results


def _preceding_ops(block: ir.Block, call: ir.Operation) -> list[ir.Operation]:
    """The ops that ran before ``call`` on the straight line of blocks ending in ``block``
    (each entered from one predecessor only, as the splits here make them)."""
    ops = []
    for op in block.operations:
        if op.operation == call:
            break
        ops.append(op.operation)
    while True:
        predecessors = list(block.predecessors)
        if len(predecessors) != 1:
            return ops
        block = predecessors[0]
        ops = [op.operation for op in block.operations] + ops


def _live_buffers(before: list[ir.Operation], after: list[ir.Operation]) -> list[ir.Value]:
    """Buffers allocated in ``before`` that ``after`` frees or returns (so they are live at the
    split and owned by this function); a buffer freed in ``before`` is never listed.

    Each user is placed by climbing its parents to an op of either list (sets: a function with
    a dynamic batch has a check per layer and thousands of ops, and scanning the lists per
    user made this pass minutes long)."""
    before_ops, after_ops = set(before), set(after)
    buffers = []
    for op in before:
        if op.name != "memref.alloc":
            continue
        value = op.results[0]
        freed_later = freed_before = False
        for use in value.uses:
            user = use.owner
            user = user.operation if hasattr(user, "operation") else user
            if user.name not in ("memref.dealloc", "func.return"):
                continue
            placed = _enclosing(user, before_ops, after_ops)
            freed_later |= placed is after_ops
            freed_before |= placed is before_ops and user.name == "memref.dealloc"
        if freed_later and not freed_before:
            buffers.append(value)
    return buffers


def _enclosing(op: ir.Operation, *groups: set) -> set | None:
    """The first of ``groups`` holding ``op`` or one of its ancestors (below the module)."""
    while op is not None and op.name != "builtin.module":
        for group in groups:
            if op in group:
                return group
        op = op.parent
    return None


def _split(function: ir.Operation, call: ir.Operation, check_id: int) -> bool:
    """Replace ``call`` by a branch: on, or to a block that reports and returns."""
    block = call.block
    ops = [op.operation for op in block.operations]
    position = ops.index(call)
    before, after = _preceding_ops(block, call), ops[position + 1:]
    fail = _fail_block(function, block, call, check_id, _live_buffers(before, after))
    if fail is None:
        return False
    cont = block.create_after()
    _move_to_block(after, cont)
    with ir.InsertionPoint(block), call.location:
        cf.CondBranchOp(call.operands[0], [], [], cont, fail)
    call.erase()
    return True


def _report_if_failed(call: ir.Operation, check_id: int) -> None:
    with ir.InsertionPoint(call), call.location:
        failed = arith.xori(call.operands[0], arith.constant(_i1(), 1))
        branch = scf.IfOp(failed)
        with ir.InsertionPoint(branch.then_block):
            func.CallOp([], ir.FlatSymbolRefAttr.get(REPORT_SYMBOL),
                        [arith.constant(_i64(), check_id), call.operands[1], call.operands[2]])
            scf.YieldOp([])
    call.erase()


def _is_true(value: ir.Value) -> bool:
    op = defining_op(value)
    return (op is not None and op.name == "arith.constant"
            and ir.IntegerAttr(op.attributes["value"]).value != 0)


@register_pass(LOWER_CHECKS, "Lower run-time check markers to reports and early returns; "
               "check dynamic allocations against max-bytes",
               options={"max-bytes": "the largest run-time allocation (default: TILECRAFT_MAX_TENSOR or "
                                     "TILECRAFT_MEMORY_BUDGET, the smaller)"})
def lower_runtime_checks_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    max_bytes = (positive_int_option("max-bytes", options["max-bytes"]) if "max-bytes" in options
                 else min(Limits.current().max_tensor_bytes, memory_budget()))
    enabled = ENABLED_ATTRIBUTE in module.attributes
    table: list[tuple[str, str]] = []
    for function in defined_functions(module):
        markers = []
        for call in ops_where(function, lambda op: _is_call_to(op, CHECK_FUNCTION)):
            if _is_true(call.operands[0]):  # proven at compile time
                call.erase()
            else:
                markers.append(call)
        _hoist(function, markers)
        if enabled:
            for block in function.regions[0].blocks:
                for op in list(block.operations):
                    op = op.operation
                    if op.name == "memref.alloc":
                        with ir.InsertionPoint(op), op.location:
                            _alloc_check(op, max_bytes)
        for call in ops_where(function, lambda op: _is_call_to(op, CHECK_FUNCTION)):
            kind = ir.StringAttr(call.attributes[KIND_ATTRIBUTE]).value
            message = ir.StringAttr(call.attributes[MESSAGE_ATTRIBUTE]).value
            label = node_label(call.location, "")
            check_id = len(table)
            table.append((kind, f"{label}: {message}" if label else message))
            if kind == "index" or call.parent != function or not _split(function, call, check_id):
                _report_if_failed(call, check_id)
    _erase_declaration(module, CHECK_FUNCTION)
    if table:
        _declare(module, REPORT_SYMBOL, [_i64(), _i64(), _i64()])
        module.attributes[TABLE_ATTRIBUTE] = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in encode_table(table)])
