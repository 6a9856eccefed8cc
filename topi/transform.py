"""Layout operators (TVM's ``topi.reshape``, ``transpose``, ``concatenate``, ``split``,
``take``): computes that only move elements, written as index arithmetic so that a schedule
can fuse them into their consumers."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..schedule import te
from ..schedule.te import ScheduleError
from ..schedule.te.symbolic import Var
from .utils import check_tensor, compute_nd, normalize_axis, product, static


def reshape(a: te.Tensor, newshape: "Sequence[int | Var]") -> te.Tensor:
    """``a`` with shape ``newshape`` (one entry may be -1), elements in row-major order.

    Each output index is flattened and unflattened with ``//`` and ``%`` (affine maps), which
    needs static extents; leading symbolic dims kept as they are (``(n, 3, 4)`` into
    ``(n, 12)``, the same var first in both shapes) pass through, as a flatten of a dynamic
    batch does."""
    check_tensor(a, "reshape", "a")
    newshape = list(newshape)
    kept = 0
    while (kept < min(a.ndim, len(newshape)) and isinstance(a.shape[kept], Var)
           and newshape[kept] is a.shape[kept]):
        kept += 1
    source_tail, target = list(a.shape[kept:]), newshape[kept:]
    size = product(source_tail)
    if size is None or any(isinstance(e, Var) for e in target):
        raise ScheduleError(f"reshape: {a.name} {a.shape} into {tuple(newshape)}: symbolic extents may only "
                            "be leading dims kept as they are (the same var first in both shapes); the "
                            "dims reshaped must be static")
    target = [int(e) for e in target]
    if target.count(-1) > 1 or any(e == 0 or e < -1 for e in target):
        raise ScheduleError(f"reshape: bad shape {newshape} (positive extents, at most one -1)")
    if -1 in target:
        known = product([e for e in target if e != -1]) or 1
        if size % known:
            raise ScheduleError(f"reshape: cannot reshape {a.shape} ({size} elements) into {newshape}")
        target[target.index(-1)] = size // known
    if product(target) != size:
        raise ScheduleError(f"reshape: cannot reshape {a.shape} ({size} elements) into {tuple(newshape)}")
    in_strides = [int(np.prod(source_tail[d + 1:], dtype=np.int64)) for d in range(len(source_tail))]
    out_strides = [int(np.prod(target[d + 1:], dtype=np.int64)) for d in range(len(target))]

    def body(indices):
        flat = 0
        for index, stride, extent in zip(indices[kept:], out_strides, target):
            if extent != 1:
                flat = index * stride + flat
        source = list(indices[:kept])
        for d, (stride, extent) in enumerate(zip(in_strides, source_tail)):
            if extent == 1:
                source.append(0)
            elif d == 0:
                source.append(flat // stride)
            else:
                source.append((flat // stride) % extent if stride > 1 else flat % extent)
        return a[tuple(source)]

    return compute_nd(list(a.shape[:kept]) + target, body, "T_reshape")


def transpose(a: te.Tensor, axes: "Sequence[int] | None" = None) -> te.Tensor:
    """``a`` with its axes permuted (reversed when ``axes`` is None), as ``numpy.transpose``."""
    check_tensor(a, "transpose", "a")
    axes = list(range(a.ndim))[::-1] if axes is None else [normalize_axis(x, a.ndim, "transpose") for x in axes]
    if sorted(axes) != list(range(a.ndim)):
        raise ScheduleError(f"transpose: axes {axes} are not a permutation of range({a.ndim})")

    def body(indices):
        source = [None] * a.ndim
        for out_axis, in_axis in enumerate(axes):
            source[in_axis] = indices[out_axis]
        return a[tuple(source)]

    return compute_nd([a.shape[x] for x in axes], body, "T_transpose")


def _same_extent(x: "int | Var", y: "int | Var") -> bool:
    return x is y or (not isinstance(x, Var) and not isinstance(y, Var) and x == y)


def concatenate(a_tuple: Sequence[te.Tensor], axis: int = 0) -> te.Tensor:
    """The tensors joined along ``axis`` (static there; other extents must agree).

    Element ``i`` reads input ``t`` at ``i - offset[t]`` under the guard ``i < end[t]``: the
    inputs' reads are guarded loads (see ``te.if_then_else``)."""
    tensors = [check_tensor(t, "concatenate", "each input") for t in a_tuple]
    if not tensors:
        raise ScheduleError("concatenate: give at least one tensor")
    first = tensors[0]
    axis = normalize_axis(axis, first.ndim, "concatenate")
    for t in tensors[1:]:
        if t.ndim != first.ndim or t.dtype != first.dtype or not all(
                _same_extent(x, y) for d, (x, y) in enumerate(zip(t.shape, first.shape)) if d != axis):
            raise ScheduleError(f"concatenate: {t.name} {t.shape} {t.dtype} does not match {first.name} "
                                f"{first.shape} {first.dtype} outside axis {axis}")
    sizes = [static(t.shape[axis], "concatenate", f"axis {axis} of {t.name}") for t in tensors]
    offsets = list(np.cumsum([0] + sizes[:-1]))
    shape = list(first.shape)
    shape[axis] = int(sum(sizes))

    def body(indices):
        i = indices[axis]
        value = None
        for t, offset, size in reversed(list(zip(tensors, offsets, sizes))):
            load = t[tuple(i - int(offset) if d == axis else x for d, x in enumerate(indices))]
            value = load if value is None else te.if_then_else(i < int(offset) + size, load, value)
        return value

    return compute_nd(shape, body, "T_concat")


def split(ary: te.Tensor, indices_or_sections: "int | Sequence[int]", axis: int = 0) -> list[te.Tensor]:
    """``numpy.split``: ``ary`` cut along ``axis`` into equal sections or at the given indices."""
    check_tensor(ary, "split", "ary")
    axis = normalize_axis(axis, ary.ndim, "split")
    extent = static(ary.shape[axis], "split", f"axis {axis} of {ary.name}")
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections < 1 or extent % sections:
            raise ScheduleError(f"split: {extent} elements along axis {axis} do not divide into {sections} sections")
        bounds = [extent // sections * s for s in range(sections + 1)]
    else:
        cuts = [int(c) for c in indices_or_sections]
        bounds = [0] + cuts + [extent]
        if any(b <= a for a, b in zip(bounds, bounds[1:])):
            raise ScheduleError(f"split: indices {cuts} must increase strictly inside (0, {extent})")
    outputs = []
    for begin, end in zip(bounds, bounds[1:]):
        shape = list(ary.shape)
        shape[axis] = end - begin

        def body(indices, begin=begin):
            return ary[tuple(x + begin if d == axis else x for d, x in enumerate(indices))]

        outputs.append(compute_nd(shape, body, "T_split"))
    return outputs


def take(a: te.Tensor, indices: te.Tensor, axis: "int | None" = None, batch_dims: int = 0,
         mode: str = "clip") -> te.Tensor:
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened ``a`` when None).

    ``mode="clip"`` (TVM's default) and ``"fast"`` clamp an index into range: the read is a
    ``tensor.extract`` at a clamped index, so no index can read outside ``a``."""
    check_tensor(a, "take", "a")
    check_tensor(indices, "take", "indices")
    if indices.dtype.kind not in "iu":
        raise ScheduleError(f"take: indices must be integers, got {indices.dtype}")
    if mode not in ("clip", "fast"):
        raise ScheduleError(f"take: mode {mode!r} is not supported; use 'clip' (indices clamped into range)")
    if batch_dims != 0:
        raise ScheduleError("take: batch_dims is not supported; take per batch element, or gather with "
                            "te.compute and a data-dependent index")
    if axis is None:
        a = reshape(a, [-1])
        axis = 0
    axis = normalize_axis(axis, a.ndim, "take")
    shape = list(a.shape[:axis]) + list(indices.shape) + list(a.shape[axis + 1:])

    def body(out):
        position = out[axis:axis + indices.ndim]
        index = indices[tuple(position)].astype("int64")
        return a[tuple(out[:axis]) + (index,) + tuple(out[axis + indices.ndim:])]

    return compute_nd(shape, body, "T_take")
