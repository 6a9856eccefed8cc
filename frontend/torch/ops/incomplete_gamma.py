"""``igamma`` / ``igammac`` (``special.gammainc`` / ``gammaincc`` are their aliases): the
regularized incomplete gamma functions, elementwise over the broadcast operands in the
result dtype (ir/incomplete_gamma.py: computed in f64, rounded once)."""

from __future__ import annotations

from typing import Any

import torch
from mlir import ir

from ....errors import OperandTypeError
from ....ir import incomplete_gamma
from ..importer import OpContext
from . import table


def _regularized(ctx: OpContext, a: Any, x: Any, body: Any) -> ir.Value:
    # eager refuses integer tensors ("not implemented for 'Long'") though the export's
    # metadata promotes them to float: refused here too, not computed
    for position in (0, 1):
        meta = ctx.arg_meta(position)
        if isinstance(meta, torch.Tensor) and not meta.dtype.is_floating_point:
            raise OperandTypeError(f"{ctx.node.target} of a {meta.dtype} tensor: floating-point operands only")
    return table.map_(ctx, [a, x], ctx.result_dtype(), body)


@table.aten("igamma.default")
def igamma(ctx: OpContext, a: Any, x: Any) -> ir.Value:
    return _regularized(ctx, a, x, incomplete_gamma.igamma)


@table.aten("igammac.default")
def igammac(ctx: OpContext, a: Any, x: Any) -> ir.Value:
    return _regularized(ctx, a, x, incomplete_gamma.igammac)
