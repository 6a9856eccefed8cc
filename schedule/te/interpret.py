"""Apply a rendered script to the payload with MLIR's transform interpreter."""

from __future__ import annotations

from mlir import ir
from mlir.dialects.transform import interpreter

from ...pipelines.scratch import scratch_copy
from .errors import ScheduleError


def apply_script(payload: ir.Module, script: str, step: str) -> tuple[ir.Module, ir.Operation]:
    """Run ``script`` on a copy of ``payload``; returns ``(container, transformed copy)``.

    ``payload`` itself is never modified. The copy lives in ``container`` (see
    ``pipelines/scratch.py``: a detached clone rewritten by the interpreter is freed twice).
    """
    context = payload.context
    try:
        transform_module = ir.Module.parse(script, context=context)
    except ir.MLIRError as error:  # a renderer bug, not a user error
        raise ScheduleError(f"{step}: the generated transform script does not parse: {error}") from None
    main = None
    for op in transform_module.body.operations:
        if ir.StringAttr(op.attributes["sym_name"]).value == "__transform_main":
            main = op
    container, copy = scratch_copy(payload.operation)
    with context:
        try:
            interpreter.apply_named_sequence(copy, main, transform_module.operation)
        except ValueError as error:
            raise ScheduleError(
                f"{step}: the transform interpreter rejected the schedule; nothing was changed.\n"
                f"{error}"
            ) from None
        try:
            copy.verify()
        except ir.MLIRError as error:
            raise ScheduleError(f"{step}: the scheduled IR does not verify: {error}") from None
    return container, copy
