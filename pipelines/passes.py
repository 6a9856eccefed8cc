"""tilecraft's own passes, written in Python, and the registry that names them.

A tilecraft pass is a function over the ``builtin.module`` operation; a tilecraft pipeline
is a named list of pass elements (``tilecraft-lower-cpu``), expanded where it is used. Registering it under
a command-line argument (``tilecraft-schedule``) lets it appear in pass-pipeline strings next
to upstream passes, in ``tilecraft-opt`` flags, and in IR dumps ("IR Dump After
tilecraft-schedule"). Options use MLIR's syntax: ``tilecraft-schedule{vector-bits=512}``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

from mlir import ir

from ..errors import PipelineError
from .target_registry import BUILTIN_TARGETS

PassFunction = Callable[[ir.Operation, Mapping[str, str]], None]


@dataclass(frozen=True)
class TilecraftPass:
    """A registered Python pass: its argument, a one-line summary and its options."""

    argument: str
    summary: str
    run: PassFunction
    options: Mapping[str, str] = field(default_factory=dict)
    # Called with the context before the pass manager runs: loading a dialect (the IRDL
    # graph dialect) from inside a running pass aborts MLIR ("appending to the MLIRContext
    # dialect registry while in a multi-threaded execution context").
    prepare: Callable[[ir.Context], None] | None = None

    def parse_options(self, text: str) -> dict[str, str]:
        """Parse ``"k1=v1 k2=v2"`` and reject options this pass does not declare."""
        values: dict[str, str] = {}
        for item in text.split():
            key, sep, value = item.partition("=")
            if not sep or key not in self.options:
                known = ", ".join(sorted(self.options)) or "none"
                raise PipelineError(
                    f"pass {self.argument!r} has no option {item!r} (options: {known})"
                )
            values[key] = value
        return values


@dataclass(frozen=True)
class TilecraftPipeline:
    """A named pass pipeline: expands, given its options, into pass-pipeline elements."""

    argument: str
    summary: str
    expand: Callable[[Mapping[str, str]], list[str]]
    options: Mapping[str, str] = field(default_factory=dict)

    parse_options = TilecraftPass.parse_options


def positive_int_option(name: str, text: str) -> int:
    """Parse a pass option that must be a positive integer, or raise :class:`PipelineError`."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise PipelineError(f"option {name} must be a positive integer, got {text!r}")
    return value


def bool_option(name: str, text: str) -> bool:
    """Parse a boolean pass option (``1``/``0``, ``true``/``false``), or raise
    :class:`PipelineError`."""
    value = text.strip().lower()
    if value in ("1", "true"):
        return True
    if value in ("0", "false"):
        return False
    raise PipelineError(f"option {name} must be 0 or 1 (or true/false), got {text!r}")


_REGISTRY: dict[str, TilecraftPass] = {}
_PIPELINES: dict[str, TilecraftPipeline] = {}


def register_pass(
    argument: str, summary: str, options: Mapping[str, str] | None = None,
    prepare: Callable[[ir.Context], None] | None = None,
) -> Callable[[PassFunction], PassFunction]:
    """Decorator registering ``fn(module_op, options)`` as the tilecraft pass ``argument``;
    ``prepare(context)``, if given, runs when a pass manager is built with it."""

    def decorate(fn: PassFunction) -> PassFunction:
        if argument in _REGISTRY:
            raise PipelineError(f"tilecraft pass {argument!r} registered twice")
        _REGISTRY[argument] = TilecraftPass(argument, summary, fn, dict(options or {}), prepare)
        return fn

    return decorate


def register_pipeline(
    argument: str, summary: str, options: Mapping[str, str] | None = None
) -> Callable[[Callable[[Mapping[str, str]], list[str]]], Callable[[Mapping[str, str]], list[str]]]:
    """Decorator registering ``expand(options) -> elements`` as the named pipeline ``argument``."""

    def decorate(expand: Callable[[Mapping[str, str]], list[str]]) -> Callable[[Mapping[str, str]], list[str]]:
        if argument in _PIPELINES or argument in _REGISTRY:
            raise PipelineError(f"tilecraft pipeline {argument!r} registered twice")
        _PIPELINES[argument] = TilecraftPipeline(argument, summary, expand, dict(options or {}))
        return expand

    return decorate


# The modules whose decorators define tilecraft's passes and named pipelines, at every layer
# (the schedule passes live above pipelines/). Named here, by string, so that any lookup sees
# every pass whichever entry point the process came through; with the target registry's
# BUILTIN_TARGETS (each target's package registers its lowering passes), the places where
# this package names a module of a higher layer.
DEFINITION_MODULES = (
    "tilecraft.pipelines.cpu",
    "tilecraft.pipelines.profiling",
    "tilecraft.schedule",
)


_definitions_loaded = False


def _load_definitions() -> None:
    """Import the defining modules, once per process. Why once: every pass element of every
    stage is looked up (twice: as a pipeline, then as a pass), about 70 lookups per compile,
    and ``import_module`` of a module already imported still costs its import-lock round
    trip: that was about a sixth of a tiny model's compile."""
    global _definitions_loaded
    if _definitions_loaded:
        return
    for name in (*DEFINITION_MODULES, *BUILTIN_TARGETS.values()):
        importlib.import_module(name)
    _definitions_loaded = True  # only after every import succeeded: a failed one is retried


def registered_passes() -> dict[str, TilecraftPass]:
    """All tilecraft passes by argument."""
    _load_definitions()
    return dict(_REGISTRY)


def registered_pipelines() -> dict[str, TilecraftPipeline]:
    """All named tilecraft pipelines by argument."""
    _load_definitions()
    return dict(_PIPELINES)


def lookup_pass(argument: str) -> TilecraftPass | None:
    """The tilecraft pass registered as ``argument``, or ``None`` for another name."""
    _load_definitions()
    return _REGISTRY.get(argument)


def lookup_pipeline(argument: str) -> TilecraftPipeline | None:
    """The named tilecraft pipeline registered as ``argument``, or ``None``."""
    _load_definitions()
    return _PIPELINES.get(argument)
