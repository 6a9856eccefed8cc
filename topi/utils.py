"""Argument handling shared by the TOPI operators: axes, padding tuples, shape products.

Kept apart from the operators so that every operator normalizes its arguments the same way
(and names the operator in the error when an argument is wrong).
"""

from __future__ import annotations

import inspect
from typing import Sequence

import numpy as np

from ..schedule.te import ScheduleError, Tensor
from ..schedule.te.symbolic import Var

def check_tensor(value: object, op: str, what: str = "data") -> Tensor:
    if not isinstance(value, Tensor):
        raise ScheduleError(f"{op}: {what} must be a Tensor (placeholder or compute), "
                            f"got {type(value).__name__}")
    return value


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    """A possibly negative axis as an index in ``range(ndim)``."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool) or not -ndim <= axis < ndim:
        raise ScheduleError(f"{op}: axis {axis!r} is out of range for a tensor of rank {ndim}")
    return int(axis) % ndim


def normalize_axes(axis: "int | Sequence[int] | None", ndim: int, op: str) -> list[int]:
    """``None`` (all axes), an int or a sequence of ints, as sorted distinct axes."""
    if axis is None:
        return list(range(ndim))
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    result = sorted({normalize_axis(a, ndim, op) for a in axes})
    if len(result) != len(axes):
        raise ScheduleError(f"{op}: axis {axis!r} lists an axis twice")
    return result


def pair(value: "int | Sequence[int]", op: str, what: str) -> tuple[int, int]:
    """An int or a pair of positive ints (strides, dilations, kernel sizes)."""
    values = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(values) != 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1
                                   for v in values):
        raise ScheduleError(f"{op}: {what} must be a positive int or a pair of them, got {value!r}")
    return int(values[0]), int(values[1])


def pad_tuple(padding: "int | str | Sequence[int]", kernel: tuple[int, int], op: str) -> tuple[int, int, int, int]:
    """TVM's ``get_pad_tuple``: ``(top, left, bottom, right)`` from an int, ``(h, w)``,
    ``(top, left, bottom, right)``, or ``"VALID"`` / ``"SAME"`` (given the dilated kernel)."""
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return 0, 0, 0, 0
        if padding.upper() == "SAME":
            total_h, total_w = kernel[0] - 1, kernel[1] - 1
            return total_h - total_h // 2, total_w - total_w // 2, total_h // 2, total_w // 2
        raise ScheduleError(f"{op}: padding must be 'SAME', 'VALID' or ints, got {padding!r}")
    values = (padding,) if isinstance(padding, (int, np.integer)) else tuple(padding)
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ScheduleError(f"{op}: padding must be non-negative ints, got {padding!r}")
    values = tuple(int(v) for v in values)
    if len(values) == 1:
        return values * 4
    if len(values) == 2:
        return values[0], values[1], values[0], values[1]
    if len(values) == 4:
        return values
    raise ScheduleError(f"{op}: padding takes 1, 2 or 4 ints (top, left, bottom, right), got {padding!r}")


def static(extent: "int | Var", op: str, what: str) -> int:
    if isinstance(extent, Var):
        raise ScheduleError(f"{op}: {what} is the symbolic extent {extent.name!r}; this operator needs "
                            "it static (give the placeholder a number there)")
    return extent


def product(extents: "Sequence[int | Var]") -> "int | None":
    """The product of static extents; None when one is symbolic."""
    total = 1
    for e in extents:
        if isinstance(e, Var):
            return None
        total *= e
    return total


def signature(names: Sequence[str]):
    """An ``inspect.Signature`` of positional parameters, so a compute's axes get readable
    names (``ax0``...) when its lambda takes ``*indices``."""
    return inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])


def compute_nd(shape: "Sequence[int | Var]", body, name: str, axis_prefix: str = "ax") -> Tensor:
    """``compute`` of a body taking the index tuple (for operators of any rank)."""
    from ..schedule.te import compute

    def fcompute(*indices):
        return body(indices)

    fcompute.__signature__ = signature([f"{axis_prefix}{d}" for d in range(len(shape))])  # type: ignore[attr-defined]
    return compute(tuple(shape), fcompute, name=name)
