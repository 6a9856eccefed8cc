"""A loop's carried tensors are updated in their own buffers: ``tilecraft-loop-carried-in-place``.

Why: a recurrent model's time loop (LSTM, GRU, RNN, Scan: frontend/onnx/ops/recurrent.py)
carries its state as ``scf.for`` iter_args and yields the state it computed from them, in a
fresh tensor each step. One-shot bufferization then finds the yielded buffer "not equivalent
to the iter_arg" and refuses, unless told ``allow-return-allocs-from-loops``, which frees the
loop's buffers through ownership flags at run time. The CPU and CUDA pipelines do that. The C
target cannot: its buffers live at fixed offsets of one planned workspace
(pipelines/buffer/workspace.py), with no allocation at run time.

Here each yielded tensor that is not the iter_arg itself is first written into the
iter_arg's destination (``bufferization.materialize_in_destination``): the step computes
into a buffer of its own, then copies the new state over the old one, whose reads are all
done by then. The yield becomes equivalent to the iter_arg, the loop allocates nothing that
outlives a step, and the cost is one copy of the state per step (a hidden state: a few
hundred bytes).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import bufferization

from ..ir_queries import ops_where
from ..passes import register_pass

LOOP_CARRIED_IN_PLACE = "tilecraft-loop-carried-in-place"


def _carry_in_place(loop: ir.Operation) -> None:
    body = loop.regions[0].blocks[0]
    yield_op = body.operations[len(body.operations) - 1]
    carried = list(body.arguments)[1:]  # the induction variable comes first
    with ir.InsertionPoint(yield_op), yield_op.location:
        for index, (value, argument) in enumerate(zip(list(yield_op.operands), carried)):
            if not isinstance(value.type, ir.RankedTensorType) or value == argument:
                continue
            yield_op.operands[index] = bufferization.materialize_in_destination(
                value.type, value, argument)


@register_pass(
    LOOP_CARRIED_IN_PLACE,
    "Each tensor an scf.for yields is first written into its iter_arg's destination, so that "
    "bufferization keeps the carried state in one buffer (no allocation per step)",
)
def loop_carried_in_place_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for loop in ops_where(module, lambda op: op.name == "scf.for"):
        _carry_in_place(loop)
