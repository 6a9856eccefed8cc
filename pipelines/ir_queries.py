"""Small queries over MLIR IR that the passes share: functions with bodies, ops matching a
predicate, the op defining a value, reshape ops.

Why a module of its own: each pass had grown its own copy of these (a walk collecting ops
by name, a list of function bodies); one place keeps their details — OpView vs Operation,
walk order — the same everywhere.
"""

from __future__ import annotations

from typing import Callable

from mlir import ir
from mlir.dialects import linalg, tensor

# Reshapes move no data: they bufferize to views.
RESHAPE_OPS = frozenset({"tensor.expand_shape", "tensor.collapse_shape"})


# The names of the kernel functions the schedule outlines (schedule/repeated_kernels.py) and,
# with ``keep-kernels``, leaves for the entry to call.
KERNEL_FUNCTION_PREFIX = "__tilecraft_kernel_"

# The argument attribute of a kernel function (schedule/repeated_kernels.py) whose every call
# passes a weight (a constant tensor): passes that treat constants specially read it.
WEIGHT_ARGUMENT = "tilecraft.weight"


def defined_functions(module: ir.Operation) -> list[ir.Operation]:
    """The ``func.func`` ops of ``module``'s body that have a body (not declarations)."""
    return [op.operation for op in module.regions[0].blocks[0].operations
            if op.operation.name == "func.func" and op.operation.regions[0].blocks]


def ops_where(root: ir.Operation, predicate: Callable[[ir.Operation], bool], *,
              post_order: bool = False) -> list[ir.Operation]:
    """Every op under ``root`` (``root`` included) for which ``predicate`` holds, in pre-order,
    or post-order (inner ops first) when ``post_order``."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if predicate(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.POST_ORDER if post_order else ir.WalkOrder.PRE_ORDER)
    return found


def replace_each(root: ir.Operation, predicate: Callable[[ir.Operation], bool],
                 build: Callable[[ir.Operation], ir.Value]) -> None:
    """Replace every single-result op under ``root`` for which ``predicate`` holds by the
    value ``build(op)`` emits at the op's place (insertion point and location), then erase
    it: the shape of the expanding passes (vector_math.py, vector_contract.py)."""
    for op in ops_where(root, predicate):
        with ir.InsertionPoint(op), op.location:
            value = build(op)
        op.results[0].replace_all_uses_with(value)
        op.erase()


def identity_layout(memref_type: ir.MemRefType) -> bool:
    """The memref is contiguous in row-major order (no strides, no offset)."""
    layout = memref_type.layout
    return (isinstance(layout, ir.AffineMapAttr)
            and layout.value == ir.AffineMap.get_identity(memref_type.rank))


def is_strided_copy(op: ir.Operation) -> bool:
    """A ``memref.copy`` between ranked memrefs that are not both contiguous: no single
    ``memcpy`` (or ``gpu.memcpy``) does it."""
    if op.name != "memref.copy":
        return False
    source, target = op.operands
    if not all(isinstance(v.type, ir.MemRefType) for v in (source, target)):
        return False  # unranked: no loop nest to write
    return not all(identity_layout(ir.MemRefType(v.type)) for v in (source, target))


def users(value: ir.Value) -> list[ir.Operation]:
    """The ops that use ``value``, once per use (as ``ir.Operation``, not OpView)."""
    owners = [use.owner for use in value.uses]
    return [owner.operation if hasattr(owner, "operation") else owner for owner in owners]


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op whose result ``value`` is; ``None`` for a block argument."""
    if not isinstance(value, ir.OpResult):
        return None
    owner = value.owner
    return owner.operation if hasattr(owner, "operation") else owner


def splat_float(value: ir.Value) -> float | None:
    """The value of a float ``arith.constant`` that ``value`` is (a scalar or a splat
    vector/tensor), else ``None``. Why here: the vector passes that fold by a constant
    (vector_math.py's reciprocal of a divisor, integer_round_trips.py's clamp bounds) each
    read it the same way."""
    constant = defining_op(value)
    if constant is None or constant.name != "arith.constant":
        return None
    attr = constant.attributes["value"]
    if isinstance(attr, ir.DenseElementsAttr):
        if not ir.DenseElementsAttr(attr).is_splat:
            return None
        attr = ir.DenseElementsAttr(attr).get_splat_value()
    return ir.FloatAttr(attr).value if isinstance(attr, ir.FloatAttr) else None


def static_f32_tensors(values) -> bool:
    """Whether every value is a ranked tensor of static shape and f32 elements: the operands
    the graph rewrites that build their own loop structure (weight panels, Winograd) take."""
    for value in values:
        if not isinstance(value.type, ir.RankedTensorType):
            return False
        shaped = ir.RankedTensorType(value.type)
        if not shaped.has_static_shape or str(shaped.element_type) != "f32":
            return False
    return True


def int_list_attribute(op: ir.Operation, name: str, default: list[int]) -> list[int]:
    """The integers of ``op``'s dense integer attribute ``name`` (a convolution's
    ``strides`` or ``dilations``), or ``default`` when the op leaves it out (linalg's named
    convolutions then use 1 for every dim)."""
    if name not in op.attributes:
        return list(default)
    return [int(v) for v in ir.DenseIntElementsAttr(op.attributes[name])]


def is_zero_fill(value: ir.Value) -> bool:
    """True when ``value`` is ``linalg.fill`` of a constant zero (0.0 or integer 0): the
    accumulator of a matmul or convolution that computes a plain product, which a kernel
    or backend call that overwrites its output may ignore (any other init must be added)."""
    fill = defining_op(value)
    if fill is None or fill.name != "linalg.fill":
        return False
    constant = defining_op(fill.operands[0])
    if constant is None or constant.name != "arith.constant":
        return False
    attr = constant.attributes["value"]
    if isinstance(attr, ir.FloatAttr):
        return ir.FloatAttr(attr).value == 0.0
    return isinstance(attr, ir.IntegerAttr) and ir.IntegerAttr(attr).value == 0


def linear_form(expr: ir.AffineExpr) -> dict[int, int] | None:
    """``{dim: coefficient, -1: constant}`` for a linear expression, else None."""
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position: 1}
    if isinstance(expr, ir.AffineConstantExpr):
        return {-1: expr.value}
    if isinstance(expr, ir.AffineAddExpr):
        a, b = linear_form(expr.lhs), linear_form(expr.rhs)
        if a is None or b is None:
            return None
        return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}
    if isinstance(expr, ir.AffineMulExpr):
        a, b = linear_form(expr.lhs), linear_form(expr.rhs)
        if a is None or b is None:
            return None
        if set(b) == {-1}:
            return {k: v * b[-1] for k, v in a.items()}
        if set(a) == {-1}:
            return {k: v * a[-1] for k, v in b.items()}
    return None


def fresh_init(init: ir.Value, shape: list[int]) -> ir.Value | None:
    """A destination of static ``shape`` standing for ``init`` with no data to move: a new
    ``tensor.empty``, or a ``linalg.fill`` of one, where ``init`` is one (built at the
    insertion point); ``None`` for any other init, whose values the caller must carry over.
    The graph rewrites that reshape an op (a layout change, padded extents) share it."""
    owner = defining_op(init)
    element = ir.RankedTensorType(init.type).element_type
    if owner is not None and owner.name == "tensor.empty":
        return tensor.EmptyOp(shape, element).result
    if owner is not None and owner.name == "linalg.fill":
        source = defining_op(owner.operands[1])
        if source is not None and source.name == "tensor.empty":
            return linalg.fill(owner.operands[0], outs=[tensor.EmptyOp(shape, element).result])
    return None


def at_function_level(op: ir.Operation) -> bool:
    """Whether ``op`` sits directly in a ``func.func`` body (outside every loop and region):
    where a destination-passing rewrite of a pad or concat may place a fresh tensor."""
    parent = op.parent
    return parent is not None and getattr(parent, "operation", parent).name == "func.func"


def remap_operands(root: ir.Operation, mapping: dict[ir.Value, ir.Value]) -> None:
    """Replace, in ``root`` and every op nested in it, each operand found in ``mapping`` by its
    image: a cloned region rewired to new values (outlined bodies, cloned producers)."""
    def visit(op: ir.Operation) -> ir.WalkResult:
        for index, operand in enumerate(op.operands):
            if operand in mapping:
                op.operands[index] = mapping[operand]
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)


def reassociation_groups(reshape: ir.Operation) -> list[list[int]]:
    """A ``tensor.expand_shape``'s or ``tensor.collapse_shape``'s reassociation: per dim of
    the collapsed side, the dims of the expanded side it spans."""
    return [[int(ir.IntegerAttr(i).value) for i in ir.ArrayAttr(group)]
            for group in ir.ArrayAttr(reshape.attributes["reassociation"])]
