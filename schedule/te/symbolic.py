"""Symbolic extents: TVM's ``te.var`` and the loop extents a schedule derives from it.

    n = var("n")
    A = placeholder((n, 64), name="A")      # func.func @main(%A: tensor<?x64xf32>)

A :class:`Var` is what the operator definition uses (a name, by identity); a
:class:`SymExtent` is what the schedule's loops carry: ``c * ceildiv(n, d) * ...``, closed
under what the primitives do to extents (``split`` divides an extent by a constant factor,
``fuse`` multiplies extents). Extents are ``int | SymExtent`` throughout ``state.py``; only
constant extents compare as numbers.

Why a canonical form and not an expression tree: ``fuse`` merges parts by comparing a
stride with ``stride * extent``, and the printer shows ``ceildiv(n, 16)`` rather than
``ceildiv(ceildiv(n, 4), 4)``; ``ceildiv(ceildiv(n, a), b) == ceildiv(n, a * b)`` for
positive integers, so one divisor per variable is enough.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ScheduleError


class Var:
    """A symbolic extent (TVM's ``te.var``): a dimension fixed only when the function is called.

    Usable wherever an extent is: ``placeholder((n, m))``, ``compute((n, m), ...)``,
    ``reduce_axis(n)``. Every var must size a dimension of some placeholder (the function
    reads its value from that argument's shape); argument dimensions sharing a var must
    agree at every call (checked before the call, as ``ArgumentValueError``).
    """

    def __init__(self, name: str = "n") -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ScheduleError(f"var: the name must be an identifier, got {name!r}")
        self.name = name

    def __repr__(self) -> str:
        return self.name


def var(name: str = "n", dtype: str = "int64") -> Var:
    """TVM's ``te.var``: a symbolic extent named ``name`` (``dtype`` must be an integer type;
    extents are ``index`` in the IR)."""
    if dtype not in ("int32", "int64"):
        raise ScheduleError(f"var {name!r}: dtype must be int32 or int64, got {dtype!r}")
    return Var(name)


@dataclass(frozen=True)
class SymExtent:
    """``coefficient * ceildiv(v1, d1) * ceildiv(v2, d2) ...`` over named variables (>= 0)."""

    coefficient: int
    factors: tuple[tuple[str, int], ...]  # (variable name, divisor), sorted

    @staticmethod
    def of(name: str) -> "SymExtent":
        return SymExtent(1, ((name, 1),))

    def __mul__(self, other: "int | SymExtent") -> "SymExtent":
        if isinstance(other, SymExtent):
            return SymExtent(self.coefficient * other.coefficient,
                             tuple(sorted(self.factors + other.factors)))
        if isinstance(other, int) and not isinstance(other, bool):
            return SymExtent(self.coefficient * other, self.factors)
        return NotImplemented

    __rmul__ = __mul__

    def ceildiv(self, divisor: int) -> "SymExtent":
        """``ceildiv(self, divisor)``, kept in canonical form, or ScheduleError where it has none."""
        if len(self.factors) != 1 or divisor % self.coefficient:
            raise ScheduleError(f"cannot divide the symbolic extent {self!r} by {divisor}: only a "
                                "single variable's extent (or a constant multiple dividing the factor) "
                                "can be split")
        (name, d), = self.factors
        return SymExtent(1, ((name, d * (divisor // self.coefficient)),))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.factors]

    def __repr__(self) -> str:
        terms = [name if d == 1 else f"ceildiv({name}, {d})" for name, d in self.factors]
        if self.coefficient != 1:
            terms.insert(0, str(self.coefficient))
        return " * ".join(terms)


def is_symbolic(extent: object) -> bool:
    return isinstance(extent, SymExtent)


def ceildiv(extent: "int | SymExtent", divisor: int) -> "int | SymExtent":
    if isinstance(extent, SymExtent):
        return extent.ceildiv(divisor)
    return -(-extent // divisor)
