"""Targets as plugins: one folder per target kind (``cpu/`` for ``llvm``, ``cuda/``, ``c/``),
each holding its lowering pipeline, runtime glue and artifact writer behind one
:class:`~tilecraft.pipelines.target_registry.TargetPlugin`, found by name through the target
registry (pipelines/target_registry.py). Adding a target: one folder here and one line in
``BUILTIN_TARGETS`` (docs/architecture.md, "Adding a target")."""

from ..pipelines.target_registry import TargetPlugin, register_target, target_names, target_plugin

__all__ = ["TargetPlugin", "register_target", "target_names", "target_plugin"]
