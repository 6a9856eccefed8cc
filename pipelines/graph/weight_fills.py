"""Fill weights as constants: ``tilecraft-materialize-weight-fills``.

A convolution or matmul weight that is one value everywhere reaches the kernels as a
``linalg.fill``, not as a constant: ONNX's ``ConstantOfShape`` emits one (the ``light`` zoo
models in ONNX's backend tests carry all their weights that way), ``ir/core.constant`` turns
a large splat initializer into one so that no global holds its elements, and so does the
constant folder with a splat result (a filter transposed to NHWC, packed into panels, or
scaled by a batch norm's constants, all computed from a fill). The fill then fuses into the
kernels as splat vector constants, and the kernels LLVM compiles differ from a real model's
and took several times longer to compile (ONNX's nine light models: 623 CPU s to compile
and run against 142 with this pass; docs/testing.md).

This pass runs in the graph stage right after ``tilecraft-fold-constants`` (from
``opt_level`` 2: graph/__init__.py), when the weights are in the layout the kernels read.
It replaces each static fill of a constant scalar whose result is read as an *input* of a
contraction or convolution (a named one, or a ``linalg.generic`` with a reduction loop and
two inputs, such as the weight panels' contraction), directly or through transposes,
reshapes and casts, by a ``dense_resource`` constant of the same value (``numpy.full``,
registered in ir/resources.py): the JIT binds it by address like any weight, and the
kernels are those of a model with real weights. Only those reads move to the constant: a
use as a destination (an accumulator's zero init) keeps the fill.

The cost is the memory a real weight of that size takes. A model's fills are materialized
while their bytes together stay within ``TILECRAFT_MAX_TOTAL`` (runtime/limits.py, the
budget of what constant folding may compute for one model); the rest stay fills, which
compile and run as before, so a ``ConstantOfShape`` of a terabyte is never allocated here.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from mlir import ir
from mlir.dialects import arith

from ...ir.resources import NUMPY_TYPES, resource_attr
from ...runtime.limits import Limits
from ..ir_queries import defined_functions, defining_op, ops_where
from ..passes import register_pass

MATERIALIZE_WEIGHT_FILLS = "tilecraft-materialize-weight-fills"

# Named linalg ops whose inputs are weights when constant: contractions and convolutions.
_WEIGHT_READERS = (
    "linalg.matmul", "linalg.batch_matmul", "linalg.batch_reduce_matmul", "linalg.matvec",
    "linalg.vecmat", "linalg.batch_matvec", "linalg.batch_vecmat", "linalg.dot",
    "linalg.contract", "linalg.mmt4d", "linalg.batch_mmt4d", "linalg.conv_",
    "linalg.depthwise_conv_",
)
# Ops that only move a weight's elements (operand 0 is the source): the folder evaluates
# them on a constant (the Gemm importer's transposed B, a grouped convolution's reshaped
# filter).
_MOVERS = frozenset({"linalg.transpose", "tensor.expand_shape", "tensor.collapse_shape",
                     "tensor.cast"})
# Fills this small are not worth a blob: they cost the code generator little.
MIN_ELEMENTS = 64


def _owner(use: ir.OpOperand) -> ir.Operation:
    owner = use.owner
    return owner.operation if hasattr(owner, "operation") else owner


def _is_input_operand(op: ir.Operation, index: int) -> bool:
    """Whether operand ``index`` of the destination-style ``op`` is read, not written (its
    inits are the trailing operands, one per tensor result)."""
    return index < len(op.operands) - len(op.results)


def _reads_weights(op: ir.Operation) -> bool:
    """A contraction or convolution: named, or a ``linalg.generic`` with a reduction loop
    and two inputs or more (a plain reduction of a fill gains nothing from a constant)."""
    if op.name == "linalg.generic":
        inputs = len(op.operands) - len(op.results)
        return inputs >= 2 and any("reduction" in str(kind)
                                   for kind in ir.ArrayAttr(op.attributes["iterator_types"]))
    return op.name.startswith(_WEIGHT_READERS)


def _reads_as_weight(value: ir.Value) -> bool:
    """Whether ``value`` reaches an input of a contraction or convolution through movers."""
    pending = [value]
    while pending:
        for use in pending.pop().uses:
            op = _owner(use)
            if _reads_weights(op) and _is_input_operand(op, use.operand_number):
                return True
            if op.name in _MOVERS and use.operand_number == 0:
                pending.append(op.results[0])
    return False


def _fill_value(fill: ir.Operation) -> float | int | None:
    """The scalar ``fill`` writes when it is an ``arith.constant``, else ``None``."""
    constant = defining_op(fill.operands[0])
    if constant is None or constant.name != "arith.constant":
        return None
    attr = constant.attributes["value"]
    if isinstance(attr, ir.FloatAttr):
        return ir.FloatAttr(attr).value
    if isinstance(attr, ir.IntegerAttr):
        return ir.IntegerAttr(attr).value
    return None


def _weight_fill(op: ir.Operation) -> bool:
    """A ``linalg.fill`` of a constant into a static tensor of at least :data:`MIN_ELEMENTS`
    elements of a type ir/resources.py stores, read as a weight."""
    if op.name != "linalg.fill" or len(op.results) != 1:
        return False
    result_type = op.results[0].type
    if not isinstance(result_type, ir.RankedTensorType):
        return False
    shaped = ir.RankedTensorType(result_type)
    if not shaped.has_static_shape or str(shaped.element_type) not in NUMPY_TYPES:
        return False
    if int(np.prod(shaped.shape)) < MIN_ELEMENTS or _fill_value(op) is None:
        return False
    return _reads_as_weight(op.results[0])


def materialize(fill: ir.Operation) -> None:
    """Replace ``fill``'s reads (every use but a destination operand) by a constant."""
    shaped = ir.RankedTensorType(fill.results[0].type)
    array = np.full(shaped.shape, _fill_value(fill), dtype=NUMPY_TYPES[str(shaped.element_type)])
    with ir.InsertionPoint(fill), fill.location:
        constant = arith.constant(shaped, resource_attr(array, "weight_fill", shaped))
    for use in list(fill.results[0].uses):
        op = _owner(use)
        if op.name.startswith("linalg.") and not _is_input_operand(op, use.operand_number):
            continue  # a destination: written, so it stays the fill
        op.operands[use.operand_number] = constant
    if not list(fill.results[0].uses):
        fill.erase()


@register_pass(
    MATERIALIZE_WEIGHT_FILLS,
    "Fills read as contraction or convolution inputs (ConstantOfShape weights, large splat "
    "initializers) become dense_resource constants, as real weights are",
)
def materialize_weight_fills_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    budget = Limits.current().max_total_bytes
    for function in defined_functions(module):
        for fill in ops_where(function, _weight_fill):
            shaped = ir.RankedTensorType(fill.results[0].type)
            nbytes = int(np.prod(shaped.shape)) * np.dtype(NUMPY_TYPES[str(shaped.element_type)]).itemsize
            if nbytes > budget:
                continue  # too large for what is left: it stays a fill (module docstring)
            budget -= nbytes
            materialize(fill)
