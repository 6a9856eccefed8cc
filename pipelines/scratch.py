"""Scratch copies of a module, for analyses that must not touch the original, and
checkpoints to restore it from."""

from __future__ import annotations

from mlir import ir


def scratch_copy(module: ir.Operation) -> tuple[ir.Module, ir.Operation]:
    """Clone ``module`` into a fresh container module; returns ``(container, copy)``.

    Why a container: a detached clone that the transform interpreter rewrote is freed twice
    when Python collects it (seen with MLIR 22's bindings). Nested in an ``ir.Module``, the
    copy is owned and destroyed by that module. Keep ``container`` alive while using ``copy``.
    """
    container = ir.Module.create(ir.Location.unknown(module.context))
    copy = module.clone(ip=ir.InsertionPoint(container.body))
    return container, copy


def restore(module: ir.Operation, checkpoint: ir.Operation) -> None:
    """Make ``module``'s body a copy of ``checkpoint``'s (a :func:`scratch_copy` of it taken
    earlier): the module operation itself stays, so handles to it remain valid, while
    handles to the ops it held do not."""
    body = module.regions[0].blocks[0]
    for op in list(body.operations):
        op.erase()
    insertion_point = ir.InsertionPoint(body)
    for op in checkpoint.regions[0].blocks[0].operations:
        op.clone(ip=insertion_point)
