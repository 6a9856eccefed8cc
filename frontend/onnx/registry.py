"""The table from ONNX operator (type, opset range) to the function that emits it.

    @onnx_op("Relu")
    def relu(ctx: NodeContext) -> list[Output]: ...

    @onnx_op("Softmax", until=12)     # opsets 1-12: coerced to 2-D
    @onnx_op("Softmax", since=13)     # opset 13+: one axis

A handler receives a :class:`~tilecraft.frontend.onnx.node.NodeContext` and returns one
entry per node output: an ``ir.Value``, a numpy array (a value known at import time, which
later nodes can fold), or ``None`` for an optional output that is not produced. The
handler modules (``ops/``) are imported by the package (``__init__.py``), never from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

OpFunction = Callable[..., Sequence[object]]


@dataclass(frozen=True)
class OpHandler:
    op_type: str
    since: int
    until: int | None
    emit: OpFunction

    def covers(self, opset: int) -> bool:
        return self.since <= opset and (self.until is None or opset <= self.until)


_HANDLERS: dict[str, list[OpHandler]] = {}


def onnx_op(op_type: str, *, since: int = 1, until: int | None = None) -> Callable[[OpFunction], OpFunction]:
    """Register the decorated function for ``op_type`` in opsets ``since``..``until``."""

    def decorate(emit: OpFunction) -> OpFunction:
        handlers = _HANDLERS.setdefault(op_type, [])
        for other in handlers:
            overlap_low = max(other.since, since)
            overlap_high = min(x for x in (other.until, until, 10**6) if x is not None)
            if overlap_low <= overlap_high:
                raise RuntimeError(f"two handlers for {op_type} in opset {overlap_low}")
        handlers.append(OpHandler(op_type, since, until, emit))
        return emit

    return decorate


def lookup(op_type: str, opset: int) -> OpHandler | None:
    """The handler for ``op_type`` in ``opset``, or ``None``."""
    return next((h for h in _HANDLERS.get(op_type, []) if h.covers(opset)), None)


def supported_op_types() -> list[str]:
    return sorted(_HANDLERS)
