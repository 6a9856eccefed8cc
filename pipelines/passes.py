"""tilecraft's own passes, written in Python, and the registry that names them.

A tilecraft pass is a function over the ``builtin.module`` operation. Registering it under
a command-line argument (``tilecraft-schedule``) lets it appear in pass-pipeline strings next
to upstream passes, in ``tilecraft-opt`` flags, and in IR dumps ("IR Dump After
tilecraft-schedule"). Options use MLIR's syntax: ``tilecraft-schedule{vector-bits=512}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from mlir import ir

from ..errors import PipelineError

PassFunction = Callable[[ir.Operation, Mapping[str, str]], None]


@dataclass(frozen=True)
class TilecraftPass:
    """A registered Python pass: its argument, a one-line summary and its options."""

    argument: str
    summary: str
    run: PassFunction
    options: Mapping[str, str] = field(default_factory=dict)

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


_REGISTRY: dict[str, TilecraftPass] = {}


def register_pass(
    argument: str, summary: str, options: Mapping[str, str] | None = None
) -> Callable[[PassFunction], PassFunction]:
    """Decorator registering ``fn(module_op, options)`` as the tilecraft pass ``argument``."""

    def decorate(fn: PassFunction) -> PassFunction:
        if argument in _REGISTRY:
            raise PipelineError(f"tilecraft pass {argument!r} registered twice")
        _REGISTRY[argument] = TilecraftPass(argument, summary, fn, dict(options or {}))
        return fn

    return decorate


def registered_passes() -> dict[str, TilecraftPass]:
    """All tilecraft passes by argument (importing the modules that define them first)."""
    from . import cpu, schedule  # noqa: F401  (their decorators fill the registry)

    return dict(_REGISTRY)


def lookup_pass(argument: str) -> TilecraftPass | None:
    """The tilecraft pass registered as ``argument``, or ``None`` for an upstream name."""
    return registered_passes().get(argument)
