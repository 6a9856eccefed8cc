"""Checked builds (``tilecraft.compile(..., checked=True)``, ``--checked``): MLIR's run-time
verification of every memref access, reported as a typed error instead of an abort.

Upstream ``generate-runtime-verification`` puts a ``cf.assert`` before each op that
implements ``RuntimeVerifiableOpInterface`` (``memref.load``/``store``: indices in bounds;
``subview``, ``reinterpret_cast``, ``cast``, ``expand_shape``: the view inside its source and
the static sizes and strides it claims; ``assume_alignment``: the alignment), with a message
naming the op and its location. Lowered as is, a failed ``cf.assert`` calls ``abort()``: the
process dies (and with it a server's run, a notebook, a test runner).

Upstream checks no vector op, and the schedule vectorizes nearly every access: a
``vector.transfer_read`` marked ``in_bounds`` is the vectorizer's claim that the whole vector
lies inside the buffer. ``tilecraft-verify-vector-accesses`` therefore adds the same kind of
``cf.assert`` before each ``vector.transfer_read``/``transfer_write`` (every dim a vector dim
claims in bounds: ``0 <= index`` and ``index + extent <= dim``; dims the transfer masks are
safe by construction), ``vector.load``/``store`` (the trailing dims the vector covers) and
``vector.maskedload``/``maskedstore`` (the dims the mask does not cover). Gathers and
scatters (``vector.gather``: per-lane indices) are not checked.

``tilecraft-route-runtime-verification`` (after ``convert-scf-to-cf``, so every assert is in
a plain block of a function) turns each ``cf.assert`` into a branch: on failure it calls the
same report function as the hand-written run-time checks (runtime/checks.py,
``tilecraft_check_failed``) with a check id whose kind is ``verify`` and whose message names
the failed condition, the op and its location, then returns from the function at once
(empty results from the entry; a parallel task ends), so the faulty access never happens.
The caller raises :class:`~tilecraft.errors.RuntimeVerificationError` after the call, in
the JIT and in packages alike. In a coroutine of the async runtime (none holds memref
accesses today, the parallel bodies are plain functions) the failure is reported and the
code goes on.

Cost: buffers the failing call allocated before the failure are not freed (the error path
only); the checks themselves cost what docs/robustness.md measures.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith, cf, func
from mlir.dialects import memref as memref_dialect

from ...runtime.checks import REPORT_SYMBOL, TABLE_ATTRIBUTE, decode_table, encode_table
from ..ir_queries import defined_functions, ops_where
from ..passes import register_pass
from ..tensor.runtime_checks import _declare, _i64, _move_to_block, empty_results

GENERATE_VERIFICATION = "generate-runtime-verification"
VERIFY_VECTOR_ACCESSES = "tilecraft-verify-vector-accesses"
ROUTE_VERIFICATION = "tilecraft-route-runtime-verification"
VERIFY_KIND = "verify"
# How upstream's (and this module's) verification asserts begin; other cf.asserts (the async
# runtime's "Awaited async operand is in error state") keep their meaning.
VERIFICATION_PREFIX = "ERROR: Runtime op verification failed"
_TRANSFERS = ("vector.transfer_read", "vector.transfer_write")
_CONTIGUOUS = ("vector.load", "vector.store", "vector.maskedload", "vector.maskedstore")


def verification_message(text: str) -> str:
    """``cf.assert``'s message (``ERROR: Runtime op verification failed\\n<op>\\n^ <what>\\n
    Location: <loc>``) as one line for the error, braces escaped for the check table's
    ``str.format``."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    op = lines[1] if len(lines) > 1 else ""
    what = next((line[1:].strip() for line in lines if line.startswith("^")), "a check failed")
    where = next((line.removeprefix("Location:").strip() for line in lines if line.startswith("Location:")), "")
    message = f"run-time verification failed: {what} in `{op[:300]}`" + (f" at {where[:200]}" if where else "")
    return message.replace("{", "{{").replace("}", "}}")


def _constant_index(value: ir.Value) -> int | None:
    owner = value.owner if isinstance(value, ir.OpResult) else None
    op = getattr(owner, "operation", owner)
    if op is not None and op.name == "arith.constant":
        return ir.IntegerAttr(op.attributes["value"]).value
    return None


def _extents(op: ir.Operation, rank: int) -> list[int | None] | None:
    """Per memref dim of a vector access, how many elements from its index the access
    touches (1 for a dim no vector dim covers), None for a dim it may leave (masked); None
    for an access this pass does not understand."""
    view = op.opview
    if op.name in _TRANSFERS:
        vector_type = ir.VectorType(op.results[0].type if op.name == "vector.transfer_read"
                                    else view.valueToStore.type)
        in_bounds = [ir.BoolAttr(a).value for a in ir.ArrayAttr(view.in_bounds)]
        extents: list[int | None] = [1] * rank
        for position, expression in enumerate(ir.AffineMapAttr(view.permutation_map).value.results):
            if isinstance(expression, ir.AffineDimExpr):
                dim = ir.AffineDimExpr(expression).position
                extents[dim] = vector_type.shape[position] if in_bounds[position] else None
            elif not isinstance(expression, ir.AffineConstantExpr):
                return None
        return extents
    value = op.results[0] if op.name in ("vector.load", "vector.maskedload") else view.valueToStore
    shape = ir.VectorType(value.type).shape
    if len(shape) > rank:
        return None
    extents = [1] * (rank - len(shape)) + list(shape)
    if op.name in ("vector.maskedload", "vector.maskedstore"):
        extents[-1] = None  # masked lanes are not accessed: the base index may be the last one in
    return extents


def _vector_access_check(op: ir.Operation) -> None:
    """A ``cf.assert`` before vector access ``op`` that every index the access touches is
    inside its buffer (see the module docstring), in upstream's message format."""
    view = op.opview
    base = view.base
    if not isinstance(base.type, ir.MemRefType):
        return
    memref_type = ir.MemRefType(base.type)
    indices = list(view.indices)
    extents = _extents(op, memref_type.rank)
    if extents is None or len(indices) != memref_type.rank:
        return
    with ir.InsertionPoint(op), op.location:
        conditions = []
        for dim, (index, extent) in enumerate(zip(indices, extents)):
            if extent is None:
                continue
            constant = _constant_index(index)
            if constant is not None and not memref_type.is_dynamic_dim(dim) \
                    and 0 <= constant and constant + extent <= memref_type.shape[dim]:
                continue  # in bounds at compile time
            size = (arith.constant(ir.IndexType.get(), memref_type.shape[dim]) if not memref_type.is_dynamic_dim(dim)
                    else memref_dialect.dim(base, arith.constant(ir.IndexType.get(), dim)))
            end = arith.addi(index, arith.constant(ir.IndexType.get(), extent))
            conditions.append(arith.cmpi(arith.CmpIPredicate.sge, index, arith.constant(ir.IndexType.get(), 0)))
            conditions.append(arith.cmpi(arith.CmpIPredicate.sle, end, size))
        if not conditions:
            return
        ok = conditions[0]
        for condition in conditions[1:]:
            ok = arith.andi(ok, condition)
        text = str(op).strip().splitlines()[0]
        cf.AssertOp(ok, f"{VERIFICATION_PREFIX}\n{text}\n^ out-of-bounds access "
                        f"(a vector of {extents} elements)\nLocation: {op.location}")


@register_pass(VERIFY_VECTOR_ACCESSES, "cf.assert before vector loads, stores and transfers that "
               "the elements they touch are inside their buffer (what generate-runtime-verification "
               "does for memref ops)")
def verify_vector_accesses_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for function in defined_functions(module):
        for op in ops_where(function, lambda o: o.name in _TRANSFERS or o.name in _CONTIGUOUS):
            _vector_access_check(op)


def _is_coroutine(function: ir.Operation) -> bool:
    return bool(ops_where(function, lambda op: op.name.startswith(("llvm.intr.coro", "async."))))


def _route(function: ir.Operation, assertion: ir.Operation, check_id: int, *, may_return: bool) -> bool:
    """Replace ``assertion`` by a branch to the rest of its block, or to a block that
    reports ``check_id`` and returns (``may_return``) or goes on."""
    block = assertion.block
    ops = [op.operation for op in block.operations]
    after = ops[ops.index(assertion) + 1:]
    cont = block.create_after()
    fail = block.create_after()
    with ir.InsertionPoint(fail), assertion.location:
        zero = arith.constant(_i64(), 0)
        func.CallOp([], ir.FlatSymbolRefAttr.get(REPORT_SYMBOL), [arith.constant(_i64(), check_id), zero, zero])
        function_type = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
        results = empty_results(function_type) if may_return else None
        if results is not None:
            func.ReturnOp(results)
        else:
            cf.BranchOp([], cont)
    _move_to_block(after, cont)
    with ir.InsertionPoint(block), assertion.location:
        cf.CondBranchOp(assertion.operands[0], [], [], cont, fail)
    assertion.erase()
    return True


@register_pass(ROUTE_VERIFICATION, "cf.assert of run-time verification to reports (kind 'verify') "
               "and early returns, instead of abort()")
def route_runtime_verification_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    existing = module.attributes[TABLE_ATTRIBUTE] if TABLE_ATTRIBUTE in module.attributes else None
    table = decode_table([ir.StringAttr(a).value for a in ir.ArrayAttr(existing)]) if existing is not None else []
    routed = False
    for function in defined_functions(module):
        assertions = ops_where(function, lambda op: op.name == "cf.assert" and ir.StringAttr(
            op.attributes["msg"]).value.startswith(VERIFICATION_PREFIX))
        if not assertions:
            continue
        may_return = not _is_coroutine(function)
        for assertion in assertions:
            condition = _constant_index(assertion.operands[0])
            if condition is not None and condition != 0:  # proven at compile time
                assertion.erase()
                continue
            message = verification_message(ir.StringAttr(assertion.attributes["msg"]).value)
            table.append((VERIFY_KIND, message))
            # An assert nested in another op's region goes on after its report (a return
            # there would leave that region, not the function).
            _route(function, assertion, len(table) - 1,
                   may_return=may_return and assertion.parent == function)
            routed = True
    if routed:
        _declare(module, REPORT_SYMBOL, [_i64(), _i64(), _i64()])
        module.attributes[TABLE_ATTRIBUTE] = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in encode_table(table)])
