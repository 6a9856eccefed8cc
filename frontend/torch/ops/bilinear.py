"""``_trilinear`` (what ``nn.functional.bilinear`` becomes): three operands, each with unit
dims inserted at its ``expand`` positions, multiplied with broadcasting and summed over
``sumdim``, as one reduction whose body multiplies the three elements (nothing of the
broadcast product is materialized beyond the first operand's broadcast)."""

from __future__ import annotations

from typing import Any, Sequence

from ....errors import OperandError
from ....ir import core, elementwise, movement, reduction
from ..importer import OpContext
from . import table


@table.aten("_trilinear.default")
def trilinear(ctx: OpContext, i1: Any, i2: Any, i3: Any, expand1: Sequence[int], expand2: Sequence[int],
              expand3: Sequence[int], sumdim: Sequence[int], unroll_dim: int = 1) -> Any:
    dtype = ctx.result_dtype()
    operands = []
    for value, expand in ((i1, expand1), (i2, expand2), (i3, expand3)):
        tensor = ctx.tensor(value, dtype)
        rank = table.rank(tensor) + len(expand)
        operands.append(reduction.expand_dims(tensor, sorted(table.dim(d, rank) for d in expand)))
    ranks = {table.rank(v) for v in operands}
    if len(ranks) != 1:
        raise OperandError(f"_trilinear: the expanded operands have ranks {sorted(ranks)}, expected one rank")
    rank = ranks.pop()
    extents = core.broadcast_extents(operands)
    first = movement.broadcast_to(operands[0], extents)
    axes = sorted({table.dim(d, rank) for d in sumdim})
    return reduction.reduce(first, axes, "sum", extra=operands[1:],
                            body=lambda a, b, c: elementwise.multiply(elementwise.multiply(a, b), c))
