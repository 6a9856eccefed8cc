"""Scratch copies of a module, for analyses and trial runs that must not touch the original."""

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
