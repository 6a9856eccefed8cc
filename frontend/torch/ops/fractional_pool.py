"""``fractional_max_pool2d``/``3d`` given their ``random_samples``: the pooling, compiled.

``F.fractional_max_pool2d`` draws one sample in [0, 1) per plane and spatial dim
(``torch.rand``: a random op, frontend/torch/ops/random.py) and hands them to the ATen op,
which is deterministic given them: along a dim of input extent ``n``, output extent ``m`` and
window ``k``, window ``i`` starts at ``int((i + u) * alpha) - int(u * alpha)`` with
``alpha = (n - k) / (m - 1)`` (the last one at ``n - k``), computed in the input's float type
as PyTorch's kernel does, so the windows are eager's bit for bit. The maximum of each
window and its position in the plane (row-major, PyTorch's ``indices``) come from one
``linalg.generic`` reading the input through ``tensor.extract`` (the windows' starts are
data, not an affine function of the output position). Samples per plane: 2-d ``(W, H)``,
3-d ``(T, H, W)``, as the kernels read them.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ....errors import OperandError
from ....ir import core, movement, reduction
from ....ir.contraction import generic_op
from ..importer import OpContext
from . import table

_I64 = np.dtype(np.int64)


def _window_starts(samples: ir.Value, slot: int, extent: int, out: int, kernel: int) -> ir.Value:
    """(N, C, out) i64: where each window starts along one dim, from sample ``slot`` of
    each plane, in the samples' float type (PyTorch's ``generate_intervals``)."""
    element = core.tensor_type(samples).element_type
    leading = core.sizes(samples)[:2]
    i64 = core.element_type(_I64)
    last = extent - kernel
    float_type = {16: np.float16, 32: np.float32, 64: np.float64}[element.width]
    alpha = float(float_type(extent - kernel) / float_type(max(out - 1, 1)))

    def body(positions: list[ir.Value], _: list[ir.Value]) -> ir.Value:
        n, c, i = positions
        if out == 1:
            return core.scalar_constant(last, i64)
        sample = tensor.extract(samples, [n, c, core.index(slot)])
        step = core.scalar_constant(alpha, element)
        index = arith.sitofp(element, arith.index_cast(i64, i))
        start = arith.subi(arith.fptosi(i64, arith.mulf(arith.addf(index, sample), step)),
                           arith.fptosi(i64, arith.mulf(sample, step)))
        is_last = arith.cmpi(arith.CmpIPredicate.eq, i, core.index(out - 1))
        return arith.select(is_last, core.scalar_constant(last, i64), start)

    return movement.indexed_generic([*leading, out], i64, body)


def fractional_max_pool(x: ir.Value, kernel: Sequence[int], output: Sequence[int], samples: ir.Value,
                        slots: Sequence[int]) -> tuple[ir.Value, ir.Value]:
    """The maxima and their in-plane positions (i64) of ``x`` (N, C, *spatial) over the
    windows of ``kernel`` that ``samples`` (N, C, spatial) place; ``slots[a]``: which
    sample of a plane places spatial dim ``a``."""
    spatial = len(kernel)
    extents = core.static_shape(x)[2:]
    if None in extents:
        raise OperandError("fractional max pooling needs static spatial extents")
    for axis, (extent, out, k) in enumerate(zip(extents, output, kernel)):
        if out + k - 1 > extent:
            raise OperandError(f"fractional max pooling: output size {out} with window {k} does not fit "
                               f"input size {extent} (dim {axis + 2})")
    element = core.tensor_type(x).element_type
    i64 = core.element_type(_I64)
    starts = [_window_starts(samples, slots[a], extents[a], output[a], kernel[a]) for a in range(spatial)]
    leading = core.sizes(x)[:2]
    inits = [core.filled([*leading, *output], float("-inf"), element),
             core.filled([*leading, *output], -1, i64)]
    loops = 2 + 2 * spatial
    dim = ir.AffineDimExpr.get
    out_map = ir.AffineMap.get(loops, 0, [dim(d) for d in range(2 + spatial)])
    maps = [ir.AffineMap.get(loops, 0, [dim(0), dim(1), dim(2 + a)]) for a in range(spatial)]
    maps += [ir.AffineMap.get(loops, 0, [dim(2 + spatial + a) for a in range(spatial)]), out_map, out_map]
    plane_strides = [int(np.prod(extents[a + 1:])) for a in range(spatial)]

    def body(*scalars: ir.Value) -> list[ir.Value]:
        window_starts, best, best_index = scalars[:spatial], scalars[-2], scalars[-1]
        index = lambda loop: linalg.IndexOp(loop).result  # noqa: E731
        position = [arith.addi(arith.index_cast(ir.IndexType.get(), window_starts[a]), index(2 + spatial + a))
                    for a in range(spatial)]
        value = tensor.extract(x, [index(0), index(1), *position])
        flat = core.index(0)
        for a in range(spatial):
            flat = arith.addi(flat, arith.muli(position[a], core.index(plane_strides[a])))
        # PyTorch's rule: a greater value or a NaN replaces the maximum (the first of equal
        # values stays; a later NaN replaces an earlier one)
        take = arith.ori(arith.cmpf(arith.CmpFPredicate.OGT, value, best),
                         arith.cmpf(arith.CmpFPredicate.UNO, value, value))
        first = arith.cmpi(arith.CmpIPredicate.slt, best_index, core.scalar_constant(0, i64))
        take = arith.ori(take, first)
        return [arith.select(take, value, best), arith.select(take, arith.index_cast(i64, flat), best_index)]

    window = core.empty(list(kernel), element)
    values, indices = generic_op([*starts, window], inits, maps, 2 + spatial, spatial, body)
    return values, indices


@table.aten("fractional_max_pool2d.default", "fractional_max_pool3d.default")
def fractional_max_pool_op(ctx: OpContext, x: Any, kernel_size: Any, output_size: Any,
                           random_samples: Any) -> tuple[ir.Value, ir.Value]:
    spatial = 2 if ctx.node.target._opname == "fractional_max_pool2d" else 3
    dtype = ctx.result_dtype(0)
    if dtype.kind != "f":
        raise OperandError(f"fractional max pooling of {dtype} (floating-point inputs only, as eager)")
    x = ctx.tensor(x, dtype)
    samples = ctx.tensor(random_samples, dtype)
    rank = table.rank(x)
    if rank not in (spatial + 1, spatial + 2) or table.rank(samples) != 3:
        raise OperandError(f"fractional_max_pool{spatial}d of a rank-{rank} input with rank-{table.rank(samples)} "
                           "samples")
    added = rank == spatial + 1
    if added:
        x = reduction.expand_dims(x, [0])
    kernel = [int(k) for k in (kernel_size if isinstance(kernel_size, (list, tuple)) else [kernel_size] * spatial)]
    output = [int(o) for o in (output_size if isinstance(output_size, (list, tuple)) else [output_size] * spatial)]
    slots = (1, 0) if spatial == 2 else (0, 1, 2)  # the samples of a plane: (W, H) or (T, H, W)
    values, indices = fractional_max_pool(x, kernel, output, samples, slots)
    if added:
        values, indices = reduction.drop_unit_dims(values, [0]), reduction.drop_unit_dims(indices, [0])
    return values, indices
