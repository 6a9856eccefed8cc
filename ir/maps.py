"""Reading and writing a structured op's indexing maps: the one place that knows how they
are stored (an ``ArrayAttr`` of ``AffineMapAttr`` under ``indexing_maps``).

Why a helper for three lines: passes read maps at dozens of sites, each spelling the
unwrapping a little differently (``attr.value``, ``AffineMapAttr(m).value``, the text of
each map), and some named ops (fills, convolutions) have no attribute to read; here that
is said once.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir

ATTRIBUTE = "indexing_maps"


def has_indexing_maps(op: ir.Operation) -> bool:
    """Whether ``op`` carries indexing maps as an attribute (generics, contractions and, in
    MLIR 22, ``linalg.matmul``; not fills or convolutions, whose maps are implied)."""
    return ATTRIBUTE in op.attributes


def indexing_maps(op: ir.Operation) -> list[ir.AffineMap]:
    """``op``'s indexing maps, one per operand (inputs then inits)."""
    return [ir.AffineMapAttr(attr).value for attr in ir.ArrayAttr(op.attributes[ATTRIBUTE])]


def operand_map(op: ir.Operation, index: int) -> ir.AffineMap:
    """The indexing map of ``op``'s operand ``index`` (negative counts from the last).
    Through a list: ``ArrayAttr.__getitem__`` asserts (aborting the process) on an index
    out of range, negative ones included; a list raises ``IndexError``."""
    return ir.AffineMapAttr(list(ir.ArrayAttr(op.attributes[ATTRIBUTE]))[index]).value


def indexing_map_texts(op: ir.Operation) -> list[str]:
    """``op``'s indexing maps as text (``(d0, d1, d2) -> (d0, d2)``), to compare with a
    known form such as a plain matmul's."""
    return [str(m) for m in indexing_maps(op)]


def set_indexing_maps(op: ir.Operation, maps: Sequence[ir.AffineMap]) -> None:
    """Give ``op`` the indexing maps ``maps``."""
    op.attributes[ATTRIBUTE] = indexing_maps_attribute(maps)


def indexing_maps_attribute(maps: Sequence[ir.AffineMap]) -> ir.ArrayAttr:
    """The attribute that holds ``maps`` (for building an op with them)."""
    return ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])


def result_dims(affine_map: ir.AffineMap) -> list[int] | None:
    """The dim of each result of ``affine_map`` when every result is a plain dim (a
    projected permutation or a broadcast), else ``None``."""
    dims = []
    for expr in affine_map.results:
        if not isinstance(expr, ir.AffineDimExpr):
            return None
        dims.append(expr.position)
    return dims
