"""Constant folding over linalg on tensors: ``tilecraft-fold-constants``.

Two steps, in this order:

1. *Affine epilogues into weights.* A convolution or matmul with a constant filter and a
   zero-initialized accumulator, followed by a chain of single-use elementwise ops that are
   affine in its result with per-output-channel constants (``x * a + b``: inference-mode
   BatchNormalization as the ONNX importer emits it, or Mul/Add by per-channel constants),
   becomes ``conv(x, W * s) + t`` where ``s`` and ``t`` are the chain evaluated at ``x = 1``
   and ``x = 0`` (``s = f(1) - f(0)``). The rewrite only *builds* IR for ``s``, ``t`` and
   ``W * s``; step 2 evaluates it.
2. *Constant subgraphs evaluated.* Every op whose operands are all constants (per-channel
   BatchNormalization arithmetic, ``W * s``, transposes and reshapes of weights) is
   computed at compile time and replaced by one constant per value the rest of the graph
   reads.

Why evaluate with tilecraft's own JIT instead of a numpy interpreter of linalg: the JIT
gives every linalg op its exact semantics for free. The constant ops are cloned into a
function whose arguments are the ``dense_resource`` weights (the arrays they were made
from, ir/resources.py; else read back from the printed resource section: MLIR 22's
``DenseResourceElementsAttr`` has no buffer accessor in Python), compiled without a schedule (scalar loops: this runs once) in a context of its
own, and called with the weights as numpy arrays.
"""

from __future__ import annotations

import io
from typing import Mapping

import numpy as np
from mlir import ir
from mlir.dialects import arith, func

from ...ir.maps import indexing_maps
from ...dialects import graph
from ...ir import core, reshapes
from ...ir.resources import NUMPY_TYPES, is_resource_constant, resource_arrays
from ..jit.entry import entry_signature
from ..ir_queries import defined_functions, is_zero_fill, remap_operands
from ..jit.engine import JitFunction
from ..loop_nest import is_structured
from ..passes import register_pass
from ..pipeline import Pipeline
from ..stages import input_stage, lowering_stages, simplify_stage
from .constant_eval import evaluate_constants
from ..target import Target

# Ops whose result is a pure function of their operands, evaluable at compile time.
_FOLDABLE = frozenset({
    "tensor.empty", "tensor.expand_shape", "tensor.collapse_shape", "tensor.pad",
    "tensor.extract_slice", "tensor.insert_slice", "tensor.concat", "tensor.cast",
})
# Leaves not worth folding: they make a constant larger than what they read.
_NOT_LEAVES = frozenset({"tensor.empty", "linalg.fill", "linalg.broadcast"})
# Anchor op -> (filter operand's output-channel dim, result's channel dim).
_CHANNEL_DIMS = {
    "linalg.conv_2d_nchw_fchw": (0, 1),
    "linalg.depthwise_conv_2d_nchw_chw": (0, 1),
    # After tilecraft-convert-layout (which runs first at opt_level 3).
    "linalg.conv_2d_nhwc_hwcf": (3, 3),
    "linalg.depthwise_conv_2d_nhwc_hwc": (2, 3),
    "linalg.conv_1d_ncw_fcw": (0, 1),
    "linalg.matmul": (1, 1),
}
_AFFINE_OPS = frozenset({"arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.negf"})


class ConstantAnalysis:
    """Which values of a function are compile-time constants (memoized by defining op)."""

    def __init__(self) -> None:
        self._known: dict[ir.Operation, bool] = {}

    def op_is_constant(self, op: ir.Operation) -> bool:
        """Iterative (an explicit stack, not recursion over operands): a chain of thousands
        of ops, as in a quantized ResNet's QDQ pairs, would exceed Python's recursion limit."""
        stack, visiting = [op], set()
        while stack:
            current = stack[-1]
            if current in self._known:
                stack.pop()
                continue
            if current.name == "arith.constant" or not (current.name in _FOLDABLE or is_structured(current)):
                self._known[current] = current.name == "arith.constant"
                stack.pop()
                continue
            owners = [graph._op(v.owner) if isinstance(v, ir.OpResult) else None
                      for v in graph._walk_values([current])[1]]
            pending = [o for o in owners if o is not None and o not in self._known and o not in visiting]
            if pending and current not in visiting:
                visiting.add(current)
                stack.extend(pending)
                continue
            self._known[current] = all(o is not None and self._known.get(o, False) for o in owners) and all(
                isinstance(r.type, ir.RankedTensorType) and ir.RankedTensorType(r.type).has_static_shape
                for r in current.results
            )
            stack.pop()
        return self._known[op]

    def value_is_constant(self, value: ir.Value) -> bool:
        owner = graph._op(value.owner) if isinstance(value, ir.OpResult) else None
        return owner is not None and self.op_is_constant(owner)


# --- step 1: affine epilogues into weights --------------------------------------------------


def single_user(value: ir.Value) -> ir.Operation | None:
    uses = list(value.uses)
    return graph._op(uses[0].owner) if len(uses) == 1 else None


def affine_link(op: ir.Operation, x: ir.Value, channel_dim: int, constants: ConstantAnalysis) -> int | None:
    """If ``op`` is an elementwise generic affine in ``x`` with per-channel constant other
    operands, the position of ``x`` among its inputs; else ``None``."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return None
    if any("parallel" not in str(it) for it in op.attributes["iterator_types"]):
        return None
    maps = indexing_maps(op)
    n_inputs = len(op.operands) - 1
    positions = [i for i in range(n_inputs) if op.operands[i] == x]
    if len(positions) != 1 or maps[positions[0]] != ir.AffineMap.get_identity(maps[0].n_dims):
        return None
    if op.results[0].type != x.type or maps[-1] != maps[positions[0]]:
        return None
    for i in range(n_inputs):
        if i == positions[0]:
            continue
        if not constants.value_is_constant(op.operands[i]):
            return None
        for expr in maps[i].results:
            if isinstance(expr, ir.AffineDimExpr) and expr.position != channel_dim:
                return None
            if not isinstance(expr, (ir.AffineDimExpr, ir.AffineConstantExpr)):
                return None
    body = op.regions[0].blocks[0]
    linear = {body.arguments[positions[0]]}
    if len(list(body.arguments[n_inputs].uses)):
        return None  # reads its output: not elementwise
    for inner in body.operations:
        inner = inner.operation
        depends = [v in linear for v in inner.operands]
        if inner.name == "linalg.yield":
            return positions[0] if depends == [True] else None
        if not any(depends):
            continue
        if inner.name not in _AFFINE_OPS:
            return None
        if inner.name == "arith.mulf" and all(depends):
            return None
        if inner.name == "arith.divf" and depends[1]:
            return None
        linear.update(inner.results)
    return None


def is_bias_add(op: ir.Operation, position: int) -> bool:
    """``x + t`` already: folding it again would rebuild the same op forever."""
    body = [o.operation for o in op.regions[0].blocks[0].operations]
    return (len(body) == 2 and body[0].name == "arith.addf"
            and op.regions[0].blocks[0].arguments[position] in list(body[0].operands))


def _channel_view(value: ir.Value, affine_map: ir.AffineMap, channel_dim: int, channels: int) -> ir.Value:
    """A per-channel operand as a ``[C]`` (or ``[1]``) tensor."""
    has_channel = any(isinstance(e, ir.AffineDimExpr) and e.position == channel_dim
                      for e in affine_map.results)
    return reshapes.reshape(value, [channels if has_channel else 1])


def _clone_chain_body(chain: list[tuple[ir.Operation, int]], x: ir.Value,
                      views: list[list[ir.Value | None]]) -> ir.Value:
    """Clone the bodies of ``chain`` at the insertion point, ``x`` for the chained value."""
    current = x
    for (op, position), scalars in zip(chain, views):
        body = op.regions[0].blocks[0]
        mapping: dict[ir.Value, ir.Value] = {}
        for i, arg in enumerate(list(body.arguments)[:-1]):
            mapping[arg] = current if i == position else scalars[i]
        for inner in body.operations:
            inner = inner.operation
            if inner.name == "linalg.yield":
                current = mapping.get(inner.operands[0], inner.operands[0])
                break
            clone = inner.clone()
            for n, value in enumerate(clone.operands):
                if value in mapping:
                    clone.operands[n] = mapping[value]
            mapping.update(zip(inner.results, clone.results))
    return current


def fold_affine_epilogues(function: ir.Operation, constants: ConstantAnalysis) -> int:
    """Step 1 of the module docstring over one function; returns how many were folded."""
    folded = 0
    block = function.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    # Positions of ops this loop erased: their entries in ``ops`` must not be touched again
    # (an erased op's name reads freed memory). Looked up while the op is still alive.
    op_index = {op: i for i, op in enumerate(ops)}
    erased: set[int] = set()
    for anchor_index, anchor in enumerate(ops):
        if anchor_index in erased:
            continue
        dims = _CHANNEL_DIMS.get(anchor.name)
        if dims is None or len(anchor.results) != 1:
            continue
        filter_dim, channel_dim = dims
        weight = anchor.operands[1]
        result_type = ir.RankedTensorType(anchor.results[0].type)
        if (not constants.value_is_constant(weight) or not is_zero_fill(anchor.operands[2])
                or not isinstance(result_type.element_type, ir.FloatType)
                or not result_type.has_static_shape):
            continue
        chain: list[tuple[ir.Operation, int]] = []
        value = anchor.results[0]
        while (user := single_user(value)) is not None:
            position = affine_link(user, value, channel_dim, constants)
            if position is None:
                break
            chain.append((user, position))
            value = user.results[0]
        if not chain or (len(chain) == 1 and is_bias_add(*chain[0])):
            continue
        channels = result_type.shape[channel_dim]
        element = result_type.element_type
        last = chain[-1][0]
        with ir.InsertionPoint(last), last.location:
            flat_inputs: list[ir.Value] = []
            slots: list[list[int | None]] = []
            for op, position in chain:
                maps = indexing_maps(op)
                row: list[int | None] = []
                for i in range(len(op.operands) - 1):
                    if i == position:
                        row.append(None)
                    else:
                        flat_inputs.append(_channel_view(op.operands[i], maps[i], channel_dim, channels))
                        row.append(len(flat_inputs) - 1)
                slots.append(row)

            def at(x_value: float):  # noqa: ANN202  (a body builder for core.elementwise)
                def body(*scalars: ir.Value) -> ir.Value:
                    x = arith.constant(element, x_value)
                    views = [[None if s is None else scalars[s] for s in row] for row in slots]
                    return _clone_chain_body(chain, x, views)
                return body

            shift = core.elementwise(flat_inputs, element, at(0.0), extents=[channels])
            one = core.elementwise(flat_inputs, element, at(1.0), extents=[channels])
            scale = core.elementwise([one, shift], element, lambda a, b: arith.subf(a, b))
            weight_type = ir.RankedTensorType(weight.type)
            column = [1] * weight_type.rank
            column[filter_dim] = channels
            new_weight = core.elementwise([weight, reshapes.reshape(scale, column)], element,
                                          lambda w, s: arith.mulf(w, s),
                                          extents=list(weight_type.shape))
            new_anchor = anchor.clone()
            new_anchor.operands[1] = new_weight
            bias_shape = [1] * result_type.rank
            bias_shape[channel_dim] = channels
            bias = reshapes.reshape(shift, bias_shape[1:] if channel_dim == 1 and result_type.rank > 2
                                else [channels])
            result = core.elementwise([new_anchor.results[0], bias], element,
                                      lambda y, t: arith.addf(y, t), extents=list(result_type.shape))
        last.results[0].replace_all_uses_with(result)
        for op in [op for op, _ in reversed(chain)] + [anchor]:
            if op in op_index:
                erased.add(op_index[op])
            op.erase()
        folded += 1
    return folded


# --- step 2: constant subgraphs evaluated ---------------------------------------------------


def _evaluate(slices: list[tuple[list[ir.Operation], list[ir.Value]]], context: ir.Context,
              weight_arrays: Mapping[ir.Value, np.ndarray]) -> list[np.ndarray]:
    """Clone each slice's ``ops`` into ``@fold_<n>(weights...) -> leaves``, JIT the module
    once, run each function once; the values of every slice's leaves, in order.

    The ``dense_resource`` weights (``weight_arrays``: result -> value) become the
    functions' arguments, passed as numpy arrays: embedded as globals, ResNet-50's 100 MB
    of weights took LLVM over two minutes to JIT. One module and one engine for all slices:
    the lowering pipeline and the engine's creation are paid once, not once per slice.
    """
    functions = []
    with context, ir.Location.unknown():
        scratch = ir.Module.create()
        for index, (ops, leaves) in enumerate(slices):
            weights = [op for op in ops if is_resource_constant(op)]
            functions.append((f"fold_{index}", [weight_arrays[op.results[0]] for op in weights], len(leaves)))
            with ir.InsertionPoint(scratch.body):
                fold = func.FuncOp(functions[-1][0],
                                   ir.FunctionType.get([op.results[0].type for op in weights],
                                                       [v.type for v in leaves]))
            block = fold.add_entry_block()
            mapping: dict[ir.Value, ir.Value] = {
                op.results[0]: arg for op, arg in zip(weights, block.arguments)
            }
            with ir.InsertionPoint(block):
                for op in ops:
                    if op.results and op.results[0] in mapping:
                        continue
                    clone = op.clone()
                    remap_operands(clone, mapping)
                    mapping.update(zip(op.results, clone.results))
                func.ReturnOp([mapping[v] for v in leaves])
        payload = io.BytesIO()
        scratch.operation.write_bytecode(payload)
    # A fresh context: JIT-compiling registers LLVM translations in its context, which MLIR
    # forbids while a pass manager runs there (it asserts).
    fold_context = ir.Context()
    values: list[np.ndarray] = []
    with fold_context, ir.Location.unknown():
        module = ir.Module.parse(payload.getvalue())
        signatures = {ir.StringAttr(op.operation.attributes["sym_name"]).value: entry_signature(op.operation)
                      for op in module.body.operations}
        target = Target.parse("llvm")
        pipeline = Pipeline((input_stage(), simplify_stage(runtime_checks=False), *lowering_stages(target)))
        pipeline.run(module)
        first = None
        for name, arrays, _ in functions:
            jitted = JitFunction(module, signatures[name], opt_level=0) if first is None else first.entry(signatures[name])
            first = first or jitted
            results = jitted(arrays, {})
            values += list(results) if isinstance(results, tuple) else [results]
    return values


def _backward_slice(ops: list[ir.Operation], leaves: list[ir.Value]) -> list[ir.Operation]:
    """The ops of ``ops`` (in their order) that ``leaves`` depend on, through operands of
    the ops or of ops nested in their regions."""
    position = {op: index for index, op in enumerate(ops)}
    wanted: set[ir.Operation] = set()
    stack = [graph._op(value.owner) for value in leaves]

    def push_operands(inner: ir.Operation) -> ir.WalkResult:
        stack.extend(graph._op(value.owner) for value in inner.operands)
        return ir.WalkResult.ADVANCE

    while stack:
        op = stack.pop()
        if op is None or op in wanted or op not in position:
            continue
        wanted.add(op)
        op.walk(push_operands, ir.WalkOrder.PRE_ORDER)
    return sorted(wanted, key=position.__getitem__)


# Values one folding function returns at most. Why: the JIT'ed function returns its results
# as one LLVM struct of memref descriptors, and LLVM's code generation slowed down far more
# than linearly with it: ResNet-50's 106 folded values in one function took 4.6 s to JIT at
# -O0, in slices of this many about 0.5 s in all (docs/performance.md, compile time).
_LEAVES_PER_FUNCTION = 8


def fold_constant_subgraphs(function: ir.Operation, constants: ConstantAnalysis) -> int:
    """Step 2 of the module docstring over one function; returns how many values it folded."""
    block = function.regions[0].blocks[0]
    needed: list[ir.Operation] = []
    leaves: list[ir.Value] = []
    for op in [o.operation for o in block.operations]:
        if not constants.op_is_constant(op):
            continue
        needed.append(op)
        if op.name in _NOT_LEAVES or op.name == "arith.constant":
            continue
        for result in op.results:
            if any(not constants.op_is_constant(graph._op(u.owner)) for u in result.uses):
                leaves.append(result)
    if not leaves:
        return 0
    weights = [op for op in needed if is_resource_constant(op)]
    if any(str(ir.RankedTensorType(op.results[0].type).element_type) not in NUMPY_TYPES
           for op in weights):
        return 0  # a weight of an element type numpy cannot hold (bf16): left as it is
    # Read once for all slices: reading unknown ones prints the whole resource section.
    weight_arrays = dict(zip((op.results[0] for op in weights), resource_arrays(weights))) if weights else {}
    # numpy first (constant_eval.py: transposes, reshapes, elementwise arithmetic, exactly);
    # the JIT for the values that need anything else.
    known = evaluate_constants(needed, weight_arrays, leaves)
    rest = [value for value in leaves if value not in known]
    chunks = [rest[start:start + _LEAVES_PER_FUNCTION] for start in range(0, len(rest), _LEAVES_PER_FUNCTION)]
    jitted = iter(_evaluate([(_backward_slice(needed, chunk), chunk) for chunk in chunks], function.context,
                            weight_arrays) if chunks else [])
    arrays = [np.ascontiguousarray(known[value]) if value in known else next(jitted) for value in leaves]
    for index, (value, array) in enumerate(zip(leaves, arrays)):
        owner = graph._op(value.owner)
        with ir.InsertionPoint(owner), owner.location:
            replacement = core.constant(np.asarray(array), name=f"folded_{index}")
        value.replace_all_uses_with(replacement)
    return len(leaves)


@register_pass(
    "tilecraft-fold-constants",
    "Fold per-channel affine epilogues (BatchNormalization, Mul/Add by constants) into conv "
    "and matmul weights, then evaluate every constant subgraph at compile time",
)
def fold_constants_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: inference-mode BatchNormalization costs a full pass over every conv output, and
    per-channel constant arithmetic and weight transposes would otherwise run on every call;
    folded, a ResNet's conv + BN + ReLU is conv + bias + ReLU, fused into one kernel."""
    for function in defined_functions(module):
        fold_affine_epilogues(function, ConstantAnalysis())
        fold_constant_subgraphs(function, ConstantAnalysis())
