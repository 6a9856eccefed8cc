"""Windowed computes as one contraction per window tap (for the auto-scheduler's spaces).

A TE compute that reads ``x[n, y*s + ry*d, ...]`` (a convolution or stencil the
``linalg-specialize-generic-ops`` pass cannot name: grouped, in the user's own layout, with
an odd body) becomes a ``linalg.generic`` whose indexing maps are not projected
permutations. The default schedule leaves such ops as scalar loops and the tuner has no
task for them: linalg's vectorizer takes projected maps only. Fixing each window
reduction loop (``ry``, ``rx``) to one tap removes it from the maps: the tap reads a
strided slice of the input (``x[n, y*s + t*d]``, a view, no copy) and a slice of every
operand the window loop indexes plainly (the filter's ``w[t, ...]``), so the tap is a
generic with projected maps, a contraction or an elementwise op the spaces of every kernel
class (schedule/space.py, schedule/sketch.py) cover. The taps accumulate into the
original output one after the other, which is the original loop nest with the window
loops outermost (any reduction order is one linalg allows).

This is the rewrite ``ir/conv.py`` applies to a model's grouped convolutions (there,
specialized to the NCHW layout), derived here from the iterator types and the indexing
maps alone.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import tensor

from ...ir.maps import indexing_maps, indexing_maps_attribute

# Taps a window may split into: a 7x7 window makes 49 ops; a larger window is left alone
# rather than unrolled into hundreds of ops.
MAX_TAPS = 64


@dataclass(frozen=True)
class Window:
    """Operand axis ``axis`` reads ``outer * stride + window * dilation``."""

    axis: int
    outer: int
    stride: int
    window: int
    dilation: int


def _dim_times(expr: ir.AffineExpr) -> tuple[int, int] | None:
    """``d_i * c`` or ``d_i`` as (i, c); ``None`` for anything else."""
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position, 1
    if isinstance(expr, ir.AffineMulExpr):
        mul = expr
        for dim, factor in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
            if isinstance(dim, ir.AffineDimExpr) and isinstance(factor, ir.AffineConstantExpr):
                value = factor.value
                if value > 0:
                    return dim.position, value
    return None


def _windows(op: ir.Operation, reductions: set[int]) -> list[list[Window | int]] | None:
    """Per operand, per axis: the loop a plain ``d_i`` reads, or the window it reads;
    ``None`` when an index is neither, or a window is not ``parallel + reduction``."""
    layout = []
    for affine_map in indexing_maps(op):
        axes: list[Window | int] = []
        for axis, expr in enumerate(affine_map.results):
            if isinstance(expr, ir.AffineDimExpr):
                axes.append(expr.position)
                continue
            if not isinstance(expr, ir.AffineAddExpr):
                return None
            add = expr
            terms = [_dim_times(add.lhs), _dim_times(add.rhs)]
            if None in terms:
                return None
            (a, ca), (b, cb) = terms
            if (a in reductions) == (b in reductions):
                return None
            (outer, stride), (window, dilation) = ((a, ca), (b, cb)) if b in reductions else ((b, cb), (a, ca))
            axes.append(Window(axis, outer, stride, window, dilation))
        layout.append(axes)
    return layout


def window_layout(op: ir.Operation) -> tuple[list[list[Window | int]], list[int]] | None:
    """The operand layout and the window loops of ``op``, when it is a static
    ``linalg.generic`` whose only non-projected indices are windows over reduction loops
    that no output reads."""
    if op.name != "linalg.generic" or len(op.regions[0].blocks) != 1:
        return None
    block = op.regions[0].blocks[0]
    if any(inner.operation.name == "linalg.index" or len(inner.operation.regions) for inner in block.operations):
        return None  # the body reads loop indices: removing loops would change them
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    reductions = {i for i, kind in enumerate(iterators) if "reduction" in kind}
    layout = _windows(op, reductions)
    if layout is None:
        return None
    windows = sorted({axis.window for axes in layout for axis in axes if isinstance(axis, Window)})
    if not windows:
        return None
    outputs = len(op.results)
    if any(isinstance(axis, Window) or axis in windows for axes in layout[-outputs:] for axis in axes):
        return None
    operand_types = [ir.RankedTensorType(v.type) for v in op.operands if isinstance(v.type, ir.RankedTensorType)]
    if len(operand_types) != len(layout) or not all(t.has_static_shape for t in operand_types):
        return None
    return layout, windows


def _loop_extents(op: ir.Operation, layout: list[list[Window | int]]) -> dict[int, int]:
    """Each loop's extent, from the operand axes that read it plainly."""
    extents: dict[int, int] = {}
    for value, axes in zip(op.operands, layout):
        shape = ir.RankedTensorType(value.type).shape
        for axis, dim in enumerate(axes):
            if isinstance(dim, int):
                extents.setdefault(dim, shape[axis])
    return extents


def split_op(op: ir.Operation) -> bool:
    """Replace ``op`` by its taps (module docstring); ``False`` when it does not qualify."""
    found = window_layout(op)
    if found is None:
        return False
    layout, windows = found
    extents = _loop_extents(op, layout)
    outers = {a.outer for axes in layout for a in axes if isinstance(a, Window)}
    if any(d not in extents for d in (*windows, *outers)):
        return False  # a loop no operand reads plainly: its extent is not known here
    taps = 1
    for w in windows:
        taps *= extents[w]
    if taps > MAX_TAPS:
        return False
    n_loops = indexing_maps(op)[0].n_dims
    kept = [d for d in range(n_loops) if d not in windows]
    renumber = {d: i for i, d in enumerate(kept)}
    iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
    outputs = len(op.results)
    inputs = len(layout) - outputs
    with ir.InsertionPoint(op), op.location:
        new_maps = []
        for axes in layout:
            new_maps.append(ir.AffineMap.get(len(kept), 0, [
                ir.AffineDimExpr.get(renumber[a.outer if isinstance(a, Window) else a])
                for a in axes if not (isinstance(a, int) and a in windows)]))
        maps_attribute = indexing_maps_attribute(new_maps)
        iterators_attribute = ir.ArrayAttr.get([iterators[d] for d in kept])
        # TE's names of the loops (``tilecraft.dims``), where present, lose the window's.
        names = list(ir.ArrayAttr(op.attributes["tilecraft.dims"])) if "tilecraft.dims" in op.attributes else None
        names_attribute = (ir.ArrayAttr.get([names[d] for d in kept])
                           if names is not None and len(names) == n_loops else None)
        accumulators = list(op.operands[inputs:])
        for tap in itertools.product(*(range(extents[w]) for w in windows)):
            position = dict(zip(windows, tap))
            operands = []
            for value, axes in zip(list(op.operands[:inputs]), layout[:inputs]):
                if not any(isinstance(a, Window) or a in windows for a in axes):
                    operands.append(value)
                    continue
                source = ir.RankedTensorType(value.type)
                offsets, sizes, strides, shape = [], [], [], []
                for axis, a in enumerate(axes):
                    if isinstance(a, Window):
                        offsets.append(position[a.window] * a.dilation)
                        sizes.append(extents[a.outer])
                        strides.append(a.stride)
                        shape.append(extents[a.outer])
                    elif a in windows:
                        offsets.append(position[a])
                        sizes.append(1)
                        strides.append(1)  # a unit axis, dropped from the slice's type
                    else:
                        offsets.append(0)
                        sizes.append(source.shape[axis])
                        strides.append(1)
                        shape.append(source.shape[axis])
                sliced = ir.RankedTensorType.get(shape, source.element_type)
                operands.append(tensor.extract_slice(sliced, value, [], [], [], offsets, sizes, strides))
            twin = op.clone()
            for i, value in enumerate(operands + accumulators):
                twin.operands[i] = value
            twin.attributes["indexing_maps"] = maps_attribute
            twin.attributes["iterator_types"] = iterators_attribute
            if names_attribute is not None:
                twin.attributes["tilecraft.dims"] = names_attribute
            elif names is not None:
                del twin.attributes["tilecraft.dims"]
            accumulators = list(twin.results)
    for old, new in zip(op.results, accumulators):
        old.replace_all_uses_with(new)
    op.erase()
    return True


def split_window_taps(module: ir.Module) -> int:
    """Split every qualifying windowed ``linalg.generic`` of ``module`` into its taps, in
    place; returns how many ops were split."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.generic" and window_layout(op) is not None:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return sum(split_op(op) for op in found)
