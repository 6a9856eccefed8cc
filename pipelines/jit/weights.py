"""Weights bound to the JIT by address: ``dense_resource`` globals become external symbols.

Why: a lowered model keeps each weight as an ``llvm.mlir.global`` whose value is the
``dense_resource`` blob. Handed to the ExecutionEngine as is, every byte becomes an LLVM
constant that is translated, optimized and emitted into the JIT's memory — most of a
ResNet-50 compile (its 100 MB of weights; docs/performance.md, "Compile time"). The bytes
are already in memory, in the arrays the frontend made the blobs from
(ir/resources.py). So before the engine is created, each such global whose array is
known loses its value and becomes an external declaration, and the engine resolves its
symbol to the array's address (``ExecutionEngine.raw_register_runtime``, as for extern
functions). The code is the same code: the weights are only reached through a symbol the
JIT binds instead of one it emits.

Packages do the same with their own means (compiler/package.py assembles the blobs into the
library's read-only data); a global whose array is unknown stays a constant.
"""

from __future__ import annotations

import numpy as np
from mlir import ir

from ...ir.resources import aligned, resource_array


def bind_resource_globals(module: ir.Module) -> list[tuple[str, np.ndarray]]:
    """Make ``module``'s top-level ``dense_resource`` globals with a known array external
    declarations, in place; returns (symbol, array) for each, the array aligned as its
    global declares. The caller registers the addresses and keeps the arrays alive as long
    as the code that reads them."""
    bound = []
    external = None
    for op in module.body.operations:
        op = op.operation
        if op.name != "llvm.mlir.global" or "value" not in op.attributes:
            continue
        array = resource_array(op.attributes["value"])
        if array is None:
            continue
        alignment = ir.IntegerAttr(op.attributes["alignment"]).value if "alignment" in op.attributes else 1
        array = aligned(array, max(alignment, 1))
        if external is None:
            external = ir.Attribute.parse("#llvm.linkage<external>", context=module.context)
        del op.attributes["value"]
        op.attributes["linkage"] = external
        bound.append((ir.StringAttr(op.attributes["sym_name"]).value, array))
    return bound
