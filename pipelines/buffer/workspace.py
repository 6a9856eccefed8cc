"""Static memory planning: every intermediate buffer gets an offset in one workspace.

Why: a target whose buffers must not be allocated per call plans them once at compile time.
The C target promises no ``malloc`` (a microcontroller has no heap worth the name): the
caller hands ``tc_model_run`` one block of ``TC_MODEL_WORKSPACE_SIZE`` bytes. The CUDA target
allocates one device arena per function instead of a ``cuMemAlloc`` per buffer and call
(targets/cuda/arena.py). Each buffer lives at a fixed offset in the block; two buffers whose
lifetimes do not overlap may share bytes, so the block is usually much smaller than the sum
of all buffers.

The algorithm is the "greedy by size" planner TFLite Micro and microTVM's USMP use: buffers
are placed largest first, each at the lowest aligned offset where it overlaps no already
placed buffer that is alive at the same time. Lifetimes are closed intervals of positions in
the function's top-level op order (first writer .. last reader), so a buffer is never reused
by an op that still reads it. This module knows nothing of MLIR: the targets' passes that
rewrite the IR (targets/c/lowering.py, targets/cuda/arena.py) measure lifetimes and call
:func:`plan`.
"""

from __future__ import annotations

from dataclasses import dataclass
from ...errors import InternalError

DEFAULT_ALIGNMENT = 16  # bytes: a float4 / 128-bit vector load, and any scalar type


@dataclass(frozen=True)
class Buffer:
    """One buffer to place: ``size`` bytes alive from op ``start`` to op ``end`` (inclusive)."""

    name: str
    size: int
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.size < 0 or self.start > self.end:
            raise InternalError(f"buffer {self.name!r}: size {self.size}, lifetime [{self.start}, {self.end}]")

    def overlaps(self, other: "Buffer") -> bool:
        """True when both are alive at some op."""
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True)
class Plan:
    """Where each buffer lives (``offsets`` by name), the workspace ``size`` that holds them
    all, and ``total``: the bytes a planner without reuse would need (sum of aligned sizes)."""

    offsets: dict[str, int]
    size: int
    total: int


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def plan(buffers: list[Buffer], alignment: int = DEFAULT_ALIGNMENT) -> Plan:
    """Offsets for ``buffers`` in one workspace; live buffers never share a byte."""
    if alignment <= 0 or alignment & (alignment - 1):
        raise InternalError(f"alignment must be a power of two, got {alignment}")
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise InternalError("buffer names must be unique")
    placed: list[tuple[Buffer, int]] = []
    offsets: dict[str, int] = {}
    # Largest first; ties by earlier start so the plan does not depend on input order.
    for buffer in sorted(buffers, key=lambda b: (-b.size, b.start, b.name)):
        size = _align(buffer.size, alignment)
        conflicts = sorted((offset, offset + _align(other.size, alignment))
                           for other, offset in placed if other.overlaps(buffer))
        offset = 0
        for low, high in conflicts:
            if offset + size <= low:
                break
            offset = max(offset, _align(high, alignment))
        placed.append((buffer, offset))
        offsets[buffer.name] = offset
    size = max((offset + _align(b.size, alignment) for b, offset in placed), default=0)
    return Plan(offsets, size, sum(_align(b.size, alignment) for b in buffers))


def check(buffers: list[Buffer], result: Plan, alignment: int = DEFAULT_ALIGNMENT) -> None:
    """Raise ``AssertionError`` if two buffers alive together share bytes, or a buffer is
    misaligned or outside the workspace (the invariant tests and the pass both rely on)."""
    for buffer in buffers:
        offset = result.offsets[buffer.name]
        assert offset % alignment == 0, f"{buffer.name} at {offset} is not {alignment}-aligned"
        assert offset + buffer.size <= result.size, f"{buffer.name} ends outside the workspace"
    for i, a in enumerate(buffers):
        for b in buffers[i + 1:]:
            if a.overlaps(b) and a.size and b.size:
                oa, ob = result.offsets[a.name], result.offsets[b.name]
                assert oa + a.size <= ob or ob + b.size <= oa, f"{a.name} and {b.name} overlap while both alive"
