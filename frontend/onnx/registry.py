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
from ...errors import InternalError

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
# The default domain's two spellings; ops of other domains (ai.onnx.ml) are keyed
# "domain:OpType" and versioned by that domain's opset.
DEFAULT_DOMAINS = ("", "ai.onnx")


def _key(op_type: str, domain: str) -> str:
    return op_type if domain in DEFAULT_DOMAINS else f"{domain}:{op_type}"


def onnx_op(op_type: str, *, domain: str = "", since: int = 1,
            until: int | None = None) -> Callable[[OpFunction], OpFunction]:
    """Register the decorated function for ``op_type`` of ``domain`` in that domain's
    opsets ``since``..``until``."""

    def decorate(emit: OpFunction) -> OpFunction:
        handlers = _HANDLERS.setdefault(_key(op_type, domain), [])
        for other in handlers:
            overlap_low = max(other.since, since)
            overlap_high = min(x for x in (other.until, until, 10**6) if x is not None)
            if overlap_low <= overlap_high:
                raise InternalError(f"two handlers for {op_type} in opset {overlap_low}")
        handlers.append(OpHandler(op_type, since, until, emit))
        return emit

    return decorate


def lookup(op_type: str, opset: int, domain: str = "") -> OpHandler | None:
    """The handler for ``op_type`` of ``domain`` in that domain's ``opset``, or ``None``."""
    return next((h for h in _HANDLERS.get(_key(op_type, domain), []) if h.covers(opset)), None)


def supported_op_types() -> list[str]:
    """Default-domain op types, then the others as ``domain:OpType``."""
    return sorted(_HANDLERS, key=lambda key: (":" in key, key))
