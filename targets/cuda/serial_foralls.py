"""``tilecraft-gpu-serial-foralls``: an ``scf.forall`` the GPU schedule did not map runs as
sequential host loops around the kernels inside it.

Why: the frontend builds some parallel loops itself, before any schedule: a grouped
convolution of many channels is a ``scf.forall`` over bands of output rows, each a loop over
the groups (ir/conv.py, ``_grouped_per_group``: the bands keep the input rows all groups read
in a CPU's L2). On the GPU each group's convolution inside gets its own grid (the schedule's
block and thread foralls), so the band loop is host code that launches them; left a forall,
``map_forall_to_blocks`` found no unique top-level forall and the model did not compile (the
onnx light zoo's AlexNet and ShuffleNet, 2026-11-30). After bufferization such a forall has no
results, so it is a plain loop nest: ``scf.for`` over each of its dims, the body moved in.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir
from mlir.dialects import arith, scf

from ...errors import GpuScheduleError

from ...pipelines.ir_queries import ops_where
from ...pipelines.passes import register_pass

SERIAL_FORALLS = "tilecraft-gpu-serial-foralls"


def _bounds(static: ir.Attribute, dynamic: list[ir.Value]) -> list[ir.Value]:
    """One index value per dim: the constant where the forall's static list holds one, else
    its next dynamic operand."""
    values, remaining = [], iter(dynamic)
    for value in ir.DenseI64ArrayAttr(static):
        values.append(next(remaining) if value == ir.ShapedType.get_dynamic_size()
                      else arith.ConstantOp(ir.IndexType.get(), value).result)
    return values


def _serial(forall: ir.Operation) -> None:
    """Replace the result-less, unmapped ``forall`` by a nest of ``scf.for``."""
    loop = forall.opview
    if len(forall.results):
        raise GpuScheduleError(f"scf.forall at {forall.location} still has tensor results after "
                               "bufferization; it cannot become host loops")
    with ir.InsertionPoint(forall), forall.location:
        lower = _bounds(loop.staticLowerBound, list(loop.dynamicLowerBound))
        upper = _bounds(loop.staticUpperBound, list(loop.dynamicUpperBound))
        step = _bounds(loop.staticStep, list(loop.dynamicStep))
        inductions = []
        point = ir.InsertionPoint(forall)
        for lo, hi, st in zip(lower, upper, step):
            with point:
                nested = scf.ForOp(lo, hi, st)
            with ir.InsertionPoint(nested.body):
                scf.YieldOp([])
            inductions.append(nested.induction_variable)
            point = ir.InsertionPoint.at_block_terminator(nested.body)
    body = forall.regions[0].blocks[0]
    for old, new in zip(body.arguments, inductions):
        old.replace_all_uses_with(new)
    innermost_yield = inductions[-1].owner.operations[len(inductions[-1].owner.operations) - 1]
    for op in list(body.operations):
        if op.name == "scf.forall.in_parallel":
            continue
        op.move_before(innermost_yield)
    forall.erase()


@register_pass(
    SERIAL_FORALLS,
    "An scf.forall without a GPU mapping (a frontend's parallel bands around mapped kernels) "
    "becomes sequential host loops",
)
def serial_foralls_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    # Outermost first: an unmapped forall nested in another is moved with its parent's body.
    for forall in ops_where(module, lambda op: op.name == "scf.forall" and "mapping" not in op.attributes):
        _serial(forall)
