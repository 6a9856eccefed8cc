"""What the scheduler needs to know about a linalg op: its loop ranges and iterator kinds.

Named ops such as ``linalg.matmul`` do not carry their indexing maps in the IR, so the
analysis generalizes a clone of the module once (``linalg-generalize-named-ops`` rewrites
each op 1:1, in order) and reads the maps from the ``linalg.generic`` twins.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir, passmanager
from mlir.dialects import linalg

from ..ir.maps import indexing_maps
from .ir_queries import ops_where
from .scratch import scratch_copy
from ..errors import InternalError

DYNAMIC = -1
# Set by the offload pass on an op a backend schedules itself (pipelines/offload/).
BACKEND_SCHEDULE_ATTR = "tilecraft.backend_schedule"

# linalg ops that are not structured (no loop nest of their own) or that the scheduler skips.
_NOT_STRUCTURED = frozenset(
    {"linalg.yield", "linalg.index", "linalg.pack", "linalg.unpack", "linalg.softmax"}
)


@dataclass(frozen=True)
class LoopNest:
    """The iteration space of one structured op.

    Attributes:
      op_name: the op's name before generalization (``linalg.matmul``).
      ranges: extent of each loop, :data:`DYNAMIC` where unknown at compile time.
      parallel: per loop, True for a parallel iterator and False for a reduction.
      element_bits: bit width of the first result's element type.
      projected: every operand is indexed by a projected permutation (no ``d0 + d4``).
      contraction: loop dims as (batch, m, n, k) when the op is a contraction.
      convolution: loop dims as (batch, output_image, output_channel, filter_loop,
        input_channel, depth) when the op is a convolution or pooling.
      output_dims: for each dimension of the last operand (the output), the loop indexing
        it, ``None`` where the index is not a single loop.
      num_inputs: how many input operands the op reads.
      operand_dims: for each operand (inputs, then outputs), what ``output_dims`` is for the
        output: per dimension of the operand, the loop indexing it or ``None``.
    """

    op_name: str
    ranges: tuple[int, ...]
    parallel: tuple[bool, ...]
    element_bits: int
    projected: bool
    contraction: tuple[tuple[int, ...], ...] | None = None
    convolution: tuple[tuple[int, ...], ...] | None = None
    output_dims: tuple[int | None, ...] = ()
    num_inputs: int = 1
    operand_dims: tuple[tuple[int | None, ...], ...] = ()

    @property
    def static(self) -> bool:
        return DYNAMIC not in self.ranges

    @property
    def parallel_dims(self) -> list[int]:
        return [d for d, p in enumerate(self.parallel) if p]

    @property
    def reduction_dims(self) -> list[int]:
        return [d for d, p in enumerate(self.parallel) if not p]


def is_structured(op: ir.Operation) -> bool:
    return op.name.startswith("linalg.") and op.name not in _NOT_STRUCTURED


def structured_ops(root: ir.Operation) -> list[ir.Operation]:
    """Every structured linalg op under ``root``, in pre-order."""
    return ops_where(root, is_structured)


def element_bits(value_type: ir.Type) -> int:
    """Bits of one element of ``value_type`` (a shaped type or an element type); 64 for index."""
    element = ir.ShapedType(value_type).element_type if isinstance(value_type, ir.ShapedType) else value_type
    if isinstance(element, ir.IntegerType):
        return ir.IntegerType(element).width
    if isinstance(element, ir.FloatType):
        return ir.FloatType(element).width
    return 64  # index


def _loop_nest(original: ir.Operation, generic: ir.Operation) -> LoopNest:
    maps = indexing_maps(generic)
    n_loops = maps[0].n_dims
    ranges = [DYNAMIC] * n_loops
    projected = True
    for operand, affine_map in zip(generic.operands, maps):
        shape = ir.ShapedType(operand.type).shape if isinstance(operand.type, ir.ShapedType) else []
        for position, expr in enumerate(affine_map.results):
            if isinstance(expr, ir.AffineDimExpr):
                if ranges[expr.position] == DYNAMIC and shape[position] != ir.ShapedType.get_dynamic_size():
                    ranges[expr.position] = shape[position]
            elif not isinstance(expr, ir.AffineConstantExpr):
                projected = False
    iterators = [str(attr) for attr in generic.attributes["iterator_types"]]
    contraction = convolution = None
    if linalg.isa_contraction_op(original):
        dims = linalg.infer_contraction_dimensions(original)
        contraction = tuple(tuple(d) for d in (dims.batch, dims.m, dims.n, dims.k))
    if linalg.isa_convolution_op(original):
        dims = linalg.infer_convolution_dimensions(original)
        convolution = tuple(
            tuple(d)
            for d in (
                dims.batch, dims.output_image, dims.output_channel,
                dims.filter_loop, dims.input_channel, dims.depth,
            )
        )
    operand_dims = tuple(
        tuple(expr.position if isinstance(expr, ir.AffineDimExpr) else None
              for expr in affine_map.results)
        for affine_map in maps
    )
    output_dims = operand_dims[-1]
    result_type = original.results[0].type if len(original.results) else original.operands[-1].type
    return LoopNest(
        op_name=original.name,
        ranges=tuple(ranges),
        parallel=tuple("parallel" in it for it in iterators),
        element_bits=element_bits(result_type),
        projected=projected,
        contraction=contraction,
        convolution=convolution,
        output_dims=output_dims,
        num_inputs=len(generic.operands) - max(len(generic.results), 1),
        operand_dims=operand_dims,
    )


def analyze_loop_nests(module: ir.Operation) -> list[tuple[ir.Operation, LoopNest]]:
    """Pair every structured op of the ``builtin.module`` op with its :class:`LoopNest`.

    Ops an offload backend schedules itself (``tilecraft.backend_schedule``) are left out:
    they are no fusion group's member, no default plan's and no tuning task's."""
    ops = structured_ops(module)
    _container, twin = scratch_copy(module)
    with module.context:
        passmanager.PassManager.parse(
            "builtin.module(func.func(linalg-generalize-named-ops))"
        ).run(twin)
    generics = structured_ops(twin)
    if len(generics) != len(ops):
        raise InternalError(
            f"generalization changed the number of linalg ops ({len(ops)} -> {len(generics)})"
        )
    return [(op, _loop_nest(op, generic)) for op, generic in zip(ops, generics)
            if BACKEND_SCHEDULE_ATTR not in op.attributes]
