"""The payload a :class:`~tilecraft.schedule.te.Schedule` works on: one function's linalg ops.

Every structured op of the scheduled function becomes a *block*, named by its
``tilecraft.block`` attribute (set by :func:`~tilecraft.schedule.te.compute`), else after its
op (``matmul``, ``generic``, ``generic_1``...); a ``linalg.fill`` that only initializes a
reduction's output is ``<reduction>.init``. The names are written back as
``tilecraft.block`` attributes: transform scripts find the ops with
``transform.structured.match attributes{tilecraft.block = "C"}``.

Named ops (``linalg.matmul``) keep no indexing maps in the IR, so the analysis reads them
from a generalized scratch copy, as ``pipelines/loop_nest.py`` does.

A dynamic loop range is a :class:`~.symbolic.SymExtent` when it can be traced to an argument
dim that ``tilecraft.symbols`` names (through ``tensor.dim``, ``tensor.empty`` and the
outputs of structured ops); else it stays :data:`DYNAMIC`, which the primitives refuse.
:func:`name_dynamic_dims` gives the dynamic argument dims of a function written without
``te.var`` their symbols, from the relations of its unscheduled ops.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from mlir import ir, passmanager

from ...ir.maps import has_indexing_maps, indexing_maps, operand_map
from ...frontend.loader import load_module
from ...pipelines.dim_relations import argument_symbols, equal_argument_dims
from ...pipelines.ir_queries import linear_form
from ...pipelines.loop_nest import structured_ops
from ...pipelines.scratch import scratch_copy
from ...runtime.signature import SYMBOLS_ATTRIBUTE
from .compute import BLOCK_ATTR, DIMS_ATTR, NAME_ATTR, Tensor, create_func
from .errors import ScheduleError
from .symbolic import SymExtent

DYNAMIC = -1


@dataclass(frozen=True)
class IndexResult:
    """One result of an indexing map: a loop dim, a constant, or another affine expression."""

    kind: str  # "dim", "const", "expr"
    value: int = 0  # the dim position or the constant
    dims: tuple[int, ...] = ()  # loop dims an "expr" mentions
    coefficients: tuple[int, ...] | None = None  # for a sum of c*d (+ const): per dim in `dims`
    text: str = ""


@dataclass
class OpInfo:
    """What the scheduler needs to know about one structured op of the payload."""

    index: int
    op_name: str
    tag: str
    dim_names: list[str]
    ranges: "list[int | SymExtent]"  # DYNAMIC where no symbol sizes the loop
    parallel: list[bool]
    maps: list[list[IndexResult]]  # per operand (inputs, then outputs)
    n_inputs: int
    element_types: list[str]  # per operand, e.g. "f32"
    producers: list[int | None] = field(default_factory=list)  # per operand: producing op index
    arg_positions: list[int | None] = field(default_factory=list)  # per operand: func argument
    consumers: list[tuple[int, int]] = field(default_factory=list)  # (op index, operand index)
    returned: bool = False  # its result is returned by the function
    body: tuple[str, ...] = ()  # the generalized op's body, as body_signature gives it

    @property
    def output_map(self) -> list[IndexResult]:
        return self.maps[-1]

    @property
    def is_fill(self) -> bool:
        return self.op_name == "linalg.fill"


def _index_result(expr: ir.AffineExpr) -> IndexResult:
    if isinstance(expr, ir.AffineDimExpr):
        return IndexResult("dim", expr.position)
    if isinstance(expr, ir.AffineConstantExpr):
        return IndexResult("const", expr.value)
    coefficients = linear_form(expr)
    if coefficients is not None:
        dims = tuple(sorted(d for d in coefficients if d >= 0))
        return IndexResult("expr", coefficients.get(-1, 0), dims,
                           tuple(coefficients[d] for d in dims), str(expr))
    return IndexResult("expr", 0, (), None, str(expr))


def _owner(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if hasattr(owner, "operation") else owner


def _element_type(value_type: ir.Type) -> str:
    if isinstance(value_type, ir.ShapedType):
        return str(ir.ShapedType(value_type).element_type)
    return str(value_type)


def load_payload(source: Any, context: ir.Context, func_name: str | None) -> tuple[ir.Module, str]:
    """A module in ``context`` holding the function to schedule, and that function's name."""
    if isinstance(source, Tensor) or (
        isinstance(source, (list, tuple)) and source and all(isinstance(t, Tensor) for t in source)
    ):
        return create_func(source, name=func_name or "main", context=context), func_name or "main"
    if isinstance(source, ir.OpView):
        source = source.operation
    if isinstance(source, ir.Operation):
        if source.name == "func.func":
            func_name = func_name or ir.StringAttr(source.attributes["sym_name"]).value
            parent = source.parent
            if parent is None:
                raise ScheduleError("the func.func given to Schedule is not inside a module")
            source = parent
        buffer = io.BytesIO()
        source.write_bytecode(buffer)
        source = buffer.getvalue()
    module = load_module(source, context)
    functions = [
        op.operation for op in module.body.operations
        if op.operation.name == "func.func" and len(op.operation.regions[0].blocks)
    ]
    names = [ir.StringAttr(f.attributes["sym_name"]).value for f in functions]
    if func_name is None:
        if len(functions) != 1:
            raise ScheduleError(f"the module has functions {names}; choose one with func_name=")
        func_name = names[0]
    elif func_name not in names:
        raise ScheduleError(f"no function @{func_name}; functions: {names}")
    return module, func_name


def find_function(module: ir.Module, name: str) -> ir.Operation:
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op
    raise ScheduleError(f"no function @{name}")


class _Index:
    """Position of an op in a list, by MLIR identity (Python wrappers of one op may hash apart)."""

    def __init__(self, ops: list[ir.Operation]) -> None:
        self.ops = ops

    def get(self, op: ir.Operation | None) -> int | None:
        if op is None:
            return None
        op = op.operation
        for i, candidate in enumerate(self.ops):
            if candidate == op:
                return i
        return None

    def __contains__(self, op: object) -> bool:
        return self.get(op) is not None

    def __getitem__(self, op: ir.Operation) -> int:
        return self.get(op)


def _base_name(op: ir.Operation) -> str:
    if BLOCK_ATTR in op.attributes:
        return ir.StringAttr(op.attributes[BLOCK_ATTR]).value
    return op.name.split(".", 1)[1]


def analyze_function(module: ir.Module, function: ir.Operation) -> list[OpInfo]:
    """Name and tag every structured op of ``function``; return their :class:`OpInfo` s."""
    ops = [op.operation for op in structured_ops(function)]
    index_of = _Index(ops)
    # Names: explicit tags first, then op names; a fill initializing one op is "<op>.init".
    names: list[str | None] = [None] * len(ops)
    for i, op in enumerate(ops):
        if BLOCK_ATTR in op.attributes:
            names[i] = _base_name(op)
    init_of: dict[int, int] = {}
    for i, op in enumerate(ops):
        if op.name != "linalg.fill" or len(op.results) != 1:
            continue
        uses = list(op.results[0].uses)
        if len(uses) != 1:
            continue
        user = uses[0].owner
        user = user.operation if hasattr(user, "operation") else user
        if user in index_of and uses[0].operand_number >= _n_inputs(user):
            init_of[i] = index_of[user]
    for i, op in enumerate(ops):
        if names[i] is None and i not in init_of:
            names[i] = _base_name(op)
    for i, owner in init_of.items():
        if names[i] is None:
            names[i] = f"{names[owner]}.init"
    unique: list[str] = []
    for name in names:
        candidate, suffix = name, 1
        while candidate in unique:
            candidate, suffix = f"{name}_{suffix}", suffix + 1
        unique.append(candidate)
    for op, name in zip(ops, unique):
        op.attributes[BLOCK_ATTR] = ir.StringAttr.get(name, context=module.context)

    # Def-use relations first: running a pass manager below invalidates the Python op objects.
    arguments = list(function.regions[0].blocks[0].arguments)
    returned = set()
    for op in function.regions[0].blocks[0].operations:
        if op.operation.name == "func.return":
            for value in op.operation.operands:
                owner = _owner(value)
                if owner in index_of:
                    returned.add(index_of[owner])
    relations = []
    for op in ops:
        producers, positions = [], []
        for operand in op.operands:
            owner = _owner(operand)
            producers.append(index_of.get(owner) if owner is not None else None)
            position = None
            if owner is None:
                for a, argument in enumerate(arguments):
                    if argument == operand:
                        position = a
            positions.append(position)
        relations.append((op.name, _n_inputs(op), [_element_type(v.type) for v in op.operands],
                          producers, positions,
                          [ir.StringAttr(a).value for a in op.attributes[DIMS_ATTR]]
                          if DIMS_ATTR in op.attributes else None))

    # Indexing maps and iterator kinds from generalized twins.
    _container, twin = scratch_copy(module.operation)
    with module.context:
        passmanager.PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(twin)
    twin_function = None
    for candidate in twin.regions[0].blocks[0].operations:
        if candidate.operation.name == "func.func" and ir.StringAttr(
            candidate.operation.attributes["sym_name"]
        ).value == ir.StringAttr(function.attributes["sym_name"]).value:
            twin_function = candidate.operation
    generics = structured_ops(twin_function)
    if len(generics) != len(ops):
        raise ScheduleError("generalizing the named ops changed the number of linalg ops")

    symbols = dict(zip(twin_function.regions[0].blocks[0].arguments, argument_symbols(twin_function)))
    infos: list[OpInfo] = []
    for i, generic in enumerate(generics):
        op_name, n_inputs, element_types, producers, positions, dims_attr = relations[i]
        maps = [list(map(_index_result, m.results)) for m in indexing_maps(generic)]
        n_dims = operand_map(generic, 0).n_dims
        ranges = [DYNAMIC] * n_dims
        for operand, results in zip(generic.operands, maps):
            shape = ir.ShapedType(operand.type).shape if isinstance(operand.type, ir.ShapedType) else []
            for position, result in enumerate(results):
                if result.kind == "dim" and ranges[result.value] == DYNAMIC:
                    if shape[position] != ir.ShapedType.get_dynamic_size():
                        ranges[result.value] = shape[position]
        for operand, results in zip(generic.operands, maps):
            for position, result in enumerate(results):
                if result.kind == "dim" and ranges[result.value] == DYNAMIC:
                    symbol = _symbol_of(operand, position, symbols)
                    if symbol is not None:
                        ranges[result.value] = symbol
        iterators = [str(attr) for attr in generic.attributes["iterator_types"]]
        dim_names = dims_attr if dims_attr and len(dims_attr) == n_dims else _default_dim_names(iterators)
        infos.append(OpInfo(
            index=i, op_name=op_name, tag=unique[i], dim_names=dim_names, ranges=ranges,
            parallel=["parallel" in it for it in iterators], maps=maps, n_inputs=n_inputs,
            element_types=element_types, producers=producers, arg_positions=positions,
            returned=i in returned, body=body_signature(generic.operation),
        ))
    for info in infos:
        for operand_index, producer in enumerate(info.producers):
            if producer is not None:
                infos[producer].consumers.append((info.index, operand_index))
    return infos


# Ops whose operands may be swapped: their signature lists the operands sorted, so
# ``out + a * b`` (linalg.matmul generalized) and ``a * b + out`` (a compute) match.
_COMMUTATIVE = frozenset({
    "arith.addf", "arith.mulf", "arith.addi", "arith.muli", "arith.maximumf", "arith.minimumf",
    "arith.maxnumf", "arith.minnumf", "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui",
    "arith.andi", "arith.ori", "arith.xori",
})


def _external(value: ir.Value) -> str:
    """A value the body captures: a constant by its value, anything else as unknown."""
    owner = _owner(value)
    if owner is not None and owner.name == "arith.constant":
        return str(owner.attributes["value"])
    return "external"


def body_signature(op: ir.Operation) -> tuple[str, ...]:
    """The computation in a structured op's body, independent of SSA names: one entry per
    op, ``name(operands) {attributes}``, operands as ``a<i>`` (the i-th block argument: the
    inputs' elements, then the output's) or ``r<j>`` (the j-th op's result).

    Why not the printed region: value names and numbering depend on the surrounding
    function; ``tensorize`` compares a block's body with an intrinsic definition's."""
    block = op.regions[0].blocks[0]
    names: dict[ir.Value, str] = {}
    for index, argument in enumerate(block.arguments):
        names[argument] = f"a{index}"
    entries = []
    for position, inner in enumerate(block.operations):
        inner = inner.operation
        operands = [names.get(v) or _external(v) for v in inner.operands]
        if inner.name in _COMMUTATIVE:
            operands.sort()
        attributes = sorted(f"{name}={inner.attributes[name]}" for name in inner.attributes)
        types = ",".join(str(r.type) for r in inner.results)
        entries.append(f"{inner.name}({', '.join(operands)}) {{{', '.join(attributes)}}} : {types}")
        for index, result in enumerate(inner.results):
            names[result] = f"r{position}" if len(inner.results) == 1 else f"r{position}.{index}"
    return tuple(entries)


def _symbol_of(value: ir.Value, axis: int, symbols: dict, depth: int = 0) -> "SymExtent | int | None":
    """The symbol sizing dim ``axis`` of ``value``, traced back to an argument, if any;
    ``symbols`` maps each argument to its ``tilecraft.symbols`` entries."""
    if depth > 64 or not isinstance(value.type, ir.RankedTensorType):
        return None
    owner = _owner(value)
    if owner is None:
        entries = symbols.get(value, [])
        if axis < len(entries) and entries[axis] != "":
            symbol = entries[axis]
            return symbol if isinstance(symbol, int) else SymExtent.of(symbol)
        return None
    if owner.name == "tensor.empty":
        tensor_type = ir.RankedTensorType(value.type)
        if not tensor_type.is_dynamic_dim(axis):
            return None
        position = sum(1 for d in range(axis) if tensor_type.is_dynamic_dim(d))
        size = _owner(owner.operands[position])
        if size is not None and size.name == "tensor.dim":
            index = _owner(size.operands[1])
            if index is not None and index.name == "arith.constant":
                return _symbol_of(size.operands[0], ir.IntegerAttr(index.attributes["value"]).value,
                                  symbols, depth + 1)
        return None
    if has_indexing_maps(owner) or owner.name == "linalg.fill":
        results = list(owner.results)
        for r, result in enumerate(results):
            if result == value:
                init = list(owner.operands)[len(owner.operands) - len(results) + r]
                return _symbol_of(init, axis, symbols, depth + 1)
    return None


def name_dynamic_dims(module: ir.Module, function: ir.Operation, names: list[str]) -> None:
    """Give each dynamic argument dim of ``function`` a ``tilecraft.symbols`` entry (if no
    argument has one yet): dims the unscheduled ops relate share one name
    (``<argument>_<axis>`` of the first), a dim that must equal a static size gets that size.
    After tiling the relations are inside loops, where the run-time checks no longer see them."""
    arguments = list(function.regions[0].blocks[0].arguments)
    if any(argument_symbols(function)) or not any(
            isinstance(a.type, ir.RankedTensorType) and not ir.RankedTensorType(a.type).has_static_shape
            for a in arguments):
        return
    symbols: list[list] = [[""] * ir.RankedTensorType(a.type).rank if isinstance(a.type, ir.RankedTensorType)
                           else [] for a in arguments]
    for group in equal_argument_dims(function):
        first_arg, first_axis = group.members[0]
        symbol = group.size if group.size is not None else f"{names[first_arg]}_{first_axis}"
        for a, axis in group.members:
            symbols[a][axis] = symbol
    for a, argument in enumerate(arguments):
        if isinstance(argument.type, ir.RankedTensorType):
            for axis in range(len(symbols[a])):
                if ir.RankedTensorType(argument.type).is_dynamic_dim(axis) and symbols[a][axis] == "":
                    symbols[a][axis] = f"{names[a]}_{axis}"
    with module.context:
        old = list(function.attributes["arg_attrs"]) if "arg_attrs" in function.attributes else [
            ir.DictAttr.get({}) for _ in arguments]
        new = []
        for attrs, entries in zip(old, symbols):
            attrs = ir.DictAttr(attrs)
            values = {attrs[i].name: attrs[i].attr for i in range(len(attrs))}
            if entries:
                values[SYMBOLS_ATTRIBUTE] = ir.ArrayAttr.get([
                    ir.IntegerAttr.get(ir.IntegerType.get_signless(64), s) if isinstance(s, int)
                    else ir.StringAttr.get(s) for s in entries])
            new.append(ir.DictAttr.get(values))
        function.attributes["arg_attrs"] = ir.ArrayAttr.get(new)


def _n_inputs(op: ir.Operation) -> int:
    # Structured ops list inputs then outputs; the outputs are as many as the results.
    return len(op.operands) - len(op.results)


def _default_dim_names(iterators: list[str]) -> list[str]:
    names, spatial, reduction = [], 0, 0
    for it in iterators:
        if "parallel" in it:
            names.append(f"i{spatial}")
            spatial += 1
        else:
            names.append(f"k{reduction}")
            reduction += 1
    return names


def argument_names(function: ir.Operation) -> list[str]:
    """Argument names as ``tilecraft.name`` gives them (``arg<i>`` where unnamed)."""
    n = len(function.regions[0].blocks[0].arguments)
    names = [f"arg{i}" for i in range(n)]
    if "arg_attrs" in function.attributes:
        for i, attrs in enumerate(function.attributes["arg_attrs"]):
            attrs = ir.DictAttr(attrs)
            if NAME_ATTR in attrs:
                names[i] = ir.StringAttr(attrs[NAME_ATTR]).value
    return names
