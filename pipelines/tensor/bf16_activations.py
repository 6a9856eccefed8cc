"""bf16 activations between bf16 kernels: ``tilecraft-bf16-activations``.

Why: a bf16 kernel (bf16_matmul.py) rounds each pair of its f32 A operand to bf16 before
broadcasting it, so an activation that only bf16 kernels read carries 16 bits nobody uses:
the producing kernel writes 4 bytes per value and the consumer reads 4 back (ResNet-50's
activations between convolutions: every one of them; OpenVINO keeps them in bf16). Storing
them as bf16 halves those bytes, and the consumer broadcasts each pair as it is.

Where it applies: the result of a bf16 kernel's elementwise epilogue (the ``linalg.generic``
that ``tilecraft-bf16-epilogues`` then moves onto the kernel's accumulators: bias,
activation, residual) when every reader of it takes bf16 without a change of numerics:

  - a bf16 kernel's A operand, directly, through the ``tensor.collapse_shape`` of a 1x1
    convolution's pixels, or through the static ``tensor.pad`` (by a constant) of the next
    convolution's window: each pair is rounded to bf16 once either way, so those values are
    unchanged (round to nearest even, as the kernel's own rounding);
  - an input other than the accumulator of another bf16 kernel's epilogue (a residual add),
    read as bf16 and widened to f32 there. This one rounds a value the f32 path added
    exactly: the one change of numerics (docs/precision.md has its size).

Anything else (a pool, a transpose, a norm, the function's result) keeps the whole
activation in f32. The epilogue's body ends with an ``arith.truncf`` to bf16 and its result
is a bf16 tensor; the pads and reshapes between take the bf16 type; the kernels that read
it are the bf16-input variants (``bf16_matmul.read_bf16_input``). Runs after elementwise
fusion and right before ``tilecraft-bf16-epilogues``, which builds the kernels with the bf16
store (the epilogue's result type) and the bf16 residual reads (its operand types).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith, tensor

from ...errors import PipelineError
from ...ir.maps import indexing_maps
from ..ir_queries import defined_functions, defining_op, ops_where, users
from ..passes import register_pass
from .bf16_matmul import KERNEL_ATTRIBUTE, read_bf16_input
from .int8_matmul import elementwise_consumer
from .vector_bodies import is_identity

BF16_ACTIVATIONS_PASS = "tilecraft-bf16-activations"


def _is_kernel_call(op: ir.Operation) -> bool:
    return op.name == "func.call" and KERNEL_ATTRIBUTE in op.attributes


def _operation(owner) -> ir.Operation:
    return getattr(owner, "operation", owner)


def _padding_constant(pad: ir.Operation) -> ir.Operation | None:
    """The ``arith.constant`` (a float) a ``tensor.pad`` pads with, when it is one defined outside it."""
    yielded = list(pad.regions[0].blocks[0].operations)[-1].operands[0]
    constant = defining_op(yielded)
    if constant is None or constant.name != "arith.constant" or not isinstance(constant.attributes["value"],
                                                                               ir.FloatAttr):
        return None
    return constant


def _only_kernel_inputs(value: ir.Value) -> bool:
    """Every use of ``value`` is a bf16 kernel call's A operand (and there is one)."""
    uses = list(value.uses)
    return bool(uses) and all(_is_kernel_call(_operation(u.owner)) and u.operand_number == 0 for u in uses)


def _bf16_readers(value: ir.Value, epilogues: list[tuple[ir.Operation, int]]) -> list[tuple[ir.Operation, int]] | None:
    """(op, operand number) of each use of ``value`` when every one can read it as bf16
    (module docstring); ``None`` when one cannot, or there is none. ``epilogues``: (generic,
    accumulator position) of each bf16 kernel's elementwise consumer."""
    readers = []
    for use in value.uses:
        op, position = _operation(use.owner), use.operand_number
        if _is_kernel_call(op) and position == 0:
            pass
        elif op.name == "tensor.collapse_shape":
            if not _only_kernel_inputs(op.results[0]):
                return None
        elif op.name == "tensor.pad":
            if (len(op.operands) != 1 or not ir.RankedTensorType(op.results[0].type).has_static_shape
                    or _padding_constant(op) is None or not _only_kernel_inputs(op.results[0])):
                return None
        elif op.name == "linalg.generic":
            accumulator = next((a for g, a in epilogues if g == op), None)
            inputs = len(op.operands) - 1
            if accumulator is None or position in (accumulator, inputs) or not is_identity(
                    indexing_maps(op)[position]):
                return None
        else:
            return None
        readers.append((op, position))
    return readers or None


def _store_bf16(generic: ir.Operation) -> None:
    """The epilogue ``generic`` yields its value rounded to bf16 into a bf16 tensor. (Its
    body does not read its output: ``elementwise_consumer`` takes no such body.)"""
    bf16 = ir.BF16Type.get()
    result_type = ir.RankedTensorType(generic.results[0].type)
    block = generic.regions[0].blocks[0]
    with ir.InsertionPoint(generic), generic.location:
        generic.operands[len(generic.operands) - 1] = tensor.empty(result_type.shape, bf16)
    block.arguments[-1].set_type(bf16)
    yield_op = list(block.operations)[-1]
    with ir.InsertionPoint(yield_op), generic.location:
        yield_op.operands[0] = arith.truncf(bf16, yield_op.operands[0])
    generic.results[0].set_type(ir.RankedTensorType.get(result_type.shape, bf16))


def _widen_input(generic: ir.Operation, position: int) -> None:
    """The generic's input ``position``, now a bf16 tensor, widened to f32 in its body."""
    argument = generic.regions[0].blocks[0].arguments[position]
    argument.set_type(ir.BF16Type.get())
    with ir.InsertionPoint.at_block_begin(generic.regions[0].blocks[0]), generic.location:
        widened = arith.extf(ir.F32Type.get(), argument)
    argument.replace_all_uses_except(widened, widened.owner.operation)


def _retype(value: ir.Value) -> None:
    """``value`` (a pad's or reshape's result) becomes the bf16 tensor of its shape."""
    value.set_type(ir.RankedTensorType.get(ir.RankedTensorType(value.type).shape, ir.BF16Type.get()))


def _read_as_bf16(module: ir.Operation, readers: list[tuple[ir.Operation, int]]) -> None:
    """Each reader (``_bf16_readers``) of a value that has just become bf16 takes it so."""
    for op, position in readers:
        if _is_kernel_call(op):
            read_bf16_input(module, op)
        elif op.name == "linalg.generic":
            _widen_input(op, position)
        else:
            if op.name == "tensor.pad":
                # Beside the f32 constant, not at the pad: the epilogue pass clones the pad
                # before the epilogue (kernel_destinations.border_of).
                padding = _padding_constant(op)
                with ir.InsertionPoint(padding), op.location:
                    bf16 = ir.BF16Type.get()
                    value = ir.FloatAttr(padding.attributes["value"]).value
                    value = arith.constant(bf16, ir.FloatAttr.get(bf16, value))
                list(op.regions[0].blocks[0].operations)[-1].operands[0] = value
            _retype(op.results[0])
            for call in users(op.results[0]):
                read_bf16_input(module, call)


def store_bf16_activations(module: ir.Operation, function: ir.Operation) -> int:
    """Store as bf16 each bf16 kernel epilogue's result in ``function`` that only bf16
    kernels read (module docstring); how many."""
    calls = ops_where(function, _is_kernel_call)
    epilogues = []
    for call in calls:
        consumer = elementwise_consumer(call)
        # Two kernels' products may meet in one generic (a projection shortcut's residual
        # add): it is the first one's epilogue; the second's product, an f32 operand of it.
        if consumer is not None and not any(g == consumer[0] for g, _ in epilogues):
            epilogues.append((_operation(consumer[0]), consumer[2]))
    stored = 0
    for generic, _ in epilogues:
        readers = _bf16_readers(generic.results[0], epilogues)
        if readers is None:
            continue
        with generic.location:  # (types are built with a location)
            _store_bf16(generic)
            _read_as_bf16(module, readers)
        stored += 1
    return stored


@register_pass(
    BF16_ACTIVATIONS_PASS,
    "A bf16 kernel epilogue's result that only bf16 kernels read (their A operand, through a "
    "pad or reshape, or a residual add in their epilogue) is stored as bf16",
)
def bf16_activations_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """See the module docstring; runs before ``tilecraft-bf16-epilogues``."""
    if options:
        raise PipelineError(f"{BF16_ACTIVATIONS_PASS} takes no options, got {sorted(options)}")
    for function in defined_functions(module):
        store_bf16_activations(module, function)
