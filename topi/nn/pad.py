"""``topi.nn.pad``: a compute whose out-of-range points take ``pad_value``.

The padded read ``data[i - before]`` leaves the tensor at the borders; the guard
``before <= i < before + extent`` makes it a guarded load (``te.if_then_else``)."""

from __future__ import annotations

from typing import Sequence

from ...schedule import te
from ...schedule.te import ScheduleError
from ...schedule.te.symbolic import Var
from ..utils import check_tensor, compute_nd


def pad(data: te.Tensor, pad_before: Sequence[int], pad_after: "Sequence[int] | None" = None,
        pad_value: float = 0.0, name: str = "PadInput") -> te.Tensor:
    """``data`` padded by ``pad_before[d]`` / ``pad_after[d]`` elements on each axis ``d``."""
    check_tensor(data, "pad")
    pad_after = pad_before if pad_after is None else pad_after
    before, after = [int(p) for p in pad_before], [int(p) for p in pad_after]
    if len(before) != data.ndim or len(after) != data.ndim or any(p < 0 for p in before + after):
        raise ScheduleError(f"pad: pad_before/pad_after need {data.ndim} non-negative ints, got "
                            f"{list(pad_before)} and {list(pad_after)}")
    for d, extent in enumerate(data.shape):
        if isinstance(extent, Var) and after[d]:
            raise ScheduleError(f"pad: axis {d} has the symbolic extent {extent.name!r}; only static axes "
                                "can be padded at their end")
    shape = [e if not (before[d] or after[d]) else e + before[d] + after[d] for d, e in enumerate(data.shape)]
    value = te.const(pad_value, data.dtype)

    def body(indices):
        guards = []
        for d, i in enumerate(indices):
            if before[d]:
                guards.append(i >= before[d])
            if after[d]:
                guards.append(i < before[d] + data.shape[d])
        load = data[tuple(i - before[d] if before[d] else i for d, i in enumerate(indices))]
        return te.if_then_else(te.all(*guards), load, value) if guards else load

    return compute_nd(shape, body, name)
