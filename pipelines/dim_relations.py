"""Which dynamic dimensions of the entry arguments must agree, read from the IR.

Why: a ``tensor<?x?xf32>`` argument accepts any shape on its own, but ``linalg.matmul`` of
two of them needs ``a.shape[1] == b.shape[0]``; with a mismatch the compiled loops take
their bounds from one operand and read the other out of bounds (garbage, or a segfault).
Checking each argument alone cannot catch that, so the loops' dimensions are traced back
to the arguments here, once at compile time, and :meth:`EntrySignature.bind` checks them
on every call.

The trace is a union-find over ``(value, axis)`` pairs: every tensor operand and result of
a structured linalg op that is indexed by the same loop is one class, as are a
``tensor.empty``'s size and the ``tensor.dim`` it came from, and the two sides of a
``tensor.cast``, for the ops of the function's entry block (they run on every call). Ops it
does not know (slices, pads, reshapes) add nothing, so it never rejects a call the compiled
code would handle; relations through them are checked by the compiled code itself
(runtime_checks.py).

Argument dims named by one symbol (the ``tilecraft.symbols`` argument attribute, written by
the TE API's ``var`` and by ``Schedule``) are one class too: once a schedule has tiled the
linalg ops into loops, the entry block no longer shows which dims they relate, and the
symbols keep that knowledge (an integer symbol fixes the dim's size).
"""

from __future__ import annotations

from mlir import ir, passmanager

from ..ir.maps import has_indexing_maps, indexing_maps
from ..runtime.signature import SYMBOLS_ATTRIBUTE, DimGroup
from .loop_nest import is_structured
from .scratch import scratch_copy


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict = {}

    def find(self, node):
        self.parent.setdefault(node, node)
        while self.parent[node] != node:
            self.parent[node] = self.parent[self.parent[node]]
            node = self.parent[node]
        return node

    def union(self, a, b) -> None:
        self.parent[self.find(a)] = self.find(b)


def _ranked(value: ir.Value) -> ir.RankedTensorType | None:
    return ir.RankedTensorType(value.type) if isinstance(value.type, ir.RankedTensorType) else None


def _constant_index(value: ir.Value) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.OpView):
        owner = owner.operation
    if isinstance(owner, ir.Operation) and owner.name == "arith.constant":
        return ir.IntegerAttr(owner.attributes["value"]).value
    return None


def _relate(op: ir.Operation, classes: _UnionFind, dim_of: dict) -> None:
    """Add the equalities ``op`` implies to ``classes``."""
    if is_structured(op) and has_indexing_maps(op):
        maps = indexing_maps(op)
        for operand, affine_map in zip(op.operands, maps):
            if _ranked(operand) is None:
                continue
            for axis, expr in enumerate(affine_map.results):
                if isinstance(expr, ir.AffineDimExpr):
                    classes.union((operand, axis), ("loop", op, expr.position))
        outputs = list(op.operands)[len(op.operands) - len(op.results):]
        for result, init in zip(op.results, outputs):
            for axis in range(_ranked(result).rank if _ranked(result) else 0):
                classes.union((result, axis), (init, axis))
    elif op.name == "tensor.dim":
        axis = _constant_index(op.operands[1])
        if axis is not None and _ranked(op.operands[0]) is not None:
            dim_of[op.results[0]] = (op.operands[0], axis)
    elif op.name == "tensor.empty":
        result = op.results[0]
        sizes = iter(op.operands)
        for axis in range(_ranked(result).rank):
            if ir.RankedTensorType(result.type).is_dynamic_dim(axis):
                source = dim_of.get(next(sizes))
                if source is not None:
                    classes.union((result, axis), source)
    elif op.name == "tensor.cast":
        source, result = op.operands[0], op.results[0]
        if _ranked(source) and _ranked(result):
            for axis in range(_ranked(result).rank):
                classes.union((source, axis), (result, axis))


def argument_symbols(func: ir.Operation) -> list[list]:
    """Per argument of ``func``, its ``tilecraft.symbols`` entries: a name (``""`` for no
    symbol) or an integer (a fixed size) per dim; ``[]`` for an argument without the
    attribute. The one reader of that attribute (the TE schedule reads it through here)."""
    result: list[list] = [[] for _ in func.regions[0].blocks[0].arguments]
    if "arg_attrs" not in func.attributes:
        return result
    for index, attrs in enumerate(func.attributes["arg_attrs"]):
        attrs = ir.DictAttr(attrs)
        if SYMBOLS_ATTRIBUTE in attrs:
            result[index] = [ir.IntegerAttr(s).value if isinstance(s, ir.IntegerAttr) else ir.StringAttr(s).value
                             for s in ir.ArrayAttr(attrs[SYMBOLS_ATTRIBUTE])]
    return result


def _relate_symbols(func: ir.Operation, arguments: list, classes: _UnionFind) -> dict:
    """Union the argument dims ``tilecraft.symbols`` names alike; returns the dims an integer
    symbol fixes, ``{(argument, axis): size}``."""
    fixed: dict = {}
    for argument, symbols in zip(arguments, argument_symbols(func)):
        if _ranked(argument) is None:
            continue
        for axis, symbol in enumerate(symbols):
            if isinstance(symbol, int):
                classes.find((argument, axis))
                fixed[(argument, axis)] = symbol
            elif symbol:
                classes.union((argument, axis), ("symbol", symbol))
    return fixed


def equal_argument_dims(func: ir.Operation) -> tuple[DimGroup, ...]:
    """The groups of ``func``'s argument dimensions that must agree (dynamic ones only)."""
    function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    dynamic = any(
        isinstance(t, ir.RankedTensorType) and not ir.RankedTensorType(t).has_static_shape
        for t in function_type.inputs
    )
    if not dynamic or not len(func.regions[0].blocks):
        return ()
    # Named ops (linalg.matmul) carry no indexing maps: read them from generalized twins.
    _container, twin_module = scratch_copy(func.parent)
    with func.context:
        passmanager.PassManager.parse(
            "builtin.module(func.func(linalg-generalize-named-ops))"
        ).run(twin_module)
    name = ir.StringAttr(func.attributes["sym_name"]).value
    twin = next(
        op.operation for op in twin_module.regions[0].blocks[0].operations
        if "sym_name" in op.operation.attributes
        and ir.StringAttr(op.operation.attributes["sym_name"]).value == name
    )
    classes, dim_of = _UnionFind(), {}
    # Only the entry block: its ops run on every call, whereas an op under scf.if or in a
    # later block may never run for the shapes given, so its needs are no requirement.
    for op in twin.regions[0].blocks[0].operations:
        _relate(op.operation, classes, dim_of)

    arguments = list(twin.regions[0].blocks[0].arguments)
    members: dict = {}
    sizes: dict = {}
    fixed = _relate_symbols(twin, arguments, classes)
    for node in list(classes.parent):
        if node[0] in ("loop", "symbol"):
            continue
        value, axis = node
        root = classes.find(node)
        tensor = _ranked(value)
        if not tensor.is_dynamic_dim(axis):
            sizes[root] = tensor.shape[axis]
        if node in fixed:
            sizes[root] = fixed[node]
        if isinstance(value, ir.BlockArgument) and value in arguments:
            members.setdefault(root, set()).add((arguments.index(value), axis))
    groups = []
    for root, dims in members.items():
        dims = sorted(dims)
        dynamic_dims = [
            (arg, axis) for arg, axis in dims
            if ir.RankedTensorType(function_type.inputs[arg]).is_dynamic_dim(axis)
        ]
        # Only groups with a dynamic member need a check; static ones the type checks.
        if dynamic_dims and (len(dims) > 1 or root in sizes):
            groups.append(DimGroup(tuple(dims), sizes.get(root)))
    return tuple(sorted(groups, key=lambda g: g.members))
