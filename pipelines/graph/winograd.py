"""Winograd convolution: ``tilecraft-winograd-conv``.

A 3x3 convolution with stride 1 computes each ``m x m`` tile of its output from an
``(m+2) x (m+2)`` tile of its input. Winograd's minimal filtering algorithm F(m x m, 3 x 3)
(Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016) does that with
``(m+2)^2`` multiplications per input and output channel pair instead of ``9 m^2``: 2.25x
fewer for m = 2, 4x fewer for m = 4. For every tile::

    U = G g G^T          filter transform, (m+2) x (m+2) per (c, f): constant, folded once
    V = B^T d B          input transform, (m+2) x (m+2) per (tile, c)
    M[ab] = V[ab] @ U[ab]    one matmul per transform point ab: (tiles x C) @ (C x F)
    Y = A^T M A          output transform, m x m per (tile, f)

The pass rewrites a ``linalg.conv_2d_nhwc_hwcf`` (what ``tilecraft-convert-layout`` makes
of ONNX and PyTorch convolutions) with a constant f32 3x3 filter, unit strides and
dilations and static shapes into linalg on tensors:

- the filter transform as a contraction with ``G`` on the constant filter, which
  ``tilecraft-fold-constants`` evaluates at compile time (run it after this pass);
- the input, zero-padded at the high end to whole tiles, transformed rows first, then
  columns (``2 (m+2)^3`` multiply-adds per tile and channel instead of ``(m+2)^4``), into
  ``V[ab, tile, c]``. Each step is an elementwise ``linalg.generic`` summing ``m+2``
  views of its operand times per-row coefficients (``_combination``), vectorized along the
  channels;
- ``M = V @ U`` as a batched matmul over the ``(m+2)^2`` transform points, which the
  default schedule plans as any batched contraction (schedule/plan.py);
- the output transform, rows then columns the same way, accumulated into the convolution's
  own init (zero or a folded bias), so the epilogue that followed the convolution still
  reads the same value.

Which convolutions: those with at least ``min-tiles`` output tiles over the batch and a
transformed input of at most ``max-transformed-kib`` (``DEFAULT_MIN_TILES`` and
``DEFAULT_MAX_TRANSFORMED_KIB``, the roofline reasoning beside them). Measured with
``benchmarks/conv_chain.py --variant winograd`` (4 chained layers, each with its own
filter, so filters stream from memory as in a model; figures in docs/performance.md,
round 13), F(4x4) gains over the direct convolution where the image has many tiles, breaks
even around 16 and loses at 4; at batch 8 every layer lost (the transformed input outgrew
the caches). ResNet-50 with the default gate gains a little at batch 1 and is unchanged at
batch 8. F(2x2) was slower than the direct convolution at every layer.

Why no default pipeline runs it: the gain is small on the reference machine, and its
rounding differs from the direct convolution's: the transforms multiply by up to 8 and
divide by 24 (relative error about 1e-5 in f32 for m = 4, against 1e-6), which a model
checked against another runtime at tight tolerances would notice. Choosing per layer by
measurement (a tuner's knob, as in oneDNN's and TVM's auto-scheduler's algorithm choice)
is not built.

Left alone: other kernel sizes and strides, grouped and depthwise convolutions, non-f32 or
dynamic shapes, non-constant filters.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from mlir import ir
from mlir.dialects import arith

from ...errors import PipelineError
from ...ir import contraction, core, movement
from ..ir_queries import defined_functions, int_list_attribute, ops_where, static_f32_tensors
from ..passes import positive_int_option, register_pass
from .constant_folding import ConstantAnalysis

# Output tile sizes the pass knows transforms for (Lavin's F(2x2, 3x3) and F(4x4, 3x3)).
TILE_SIZES = (2, 4)
DEFAULT_TILE = 4

# Which convolutions the rewrite takes, from the roofline of its matmuls and transforms.
# The fewest output tiles over the batch: the matmuls read the transformed filter,
# (m+2)^2 / 9 times the filter's bytes, from memory in a model (every layer's weights are
# cold), and do 2 flops per tile per 4 bytes of it, an arithmetic intensity of tiles / 2
# flop per byte, which must clear the machine balance (peak FLOPS / memory bandwidth) with
# a margin, since the matmuls run below peak. Measured with 4 chained layers each
# (docs/performance.md round 13): 196 and 49 tiles gained, 16 broke even, 4 lost, and
# ResNet-50's 7x7 layers at batch 8 (32 tiles) lost.
DEFAULT_MIN_TILES = 48
# The largest transformed input, in KiB: each transform step writes its result whole and
# the next reads it back, so the transformed input and the products (each (m+2)^2 / m^2 =
# 2.25x the image for m = 4) must stay in cache. At batch 8 (14.5 MB at 56x56, 7.2 MB at
# 28x28) every layer of ResNet-50 ran slower than the direct convolution; at batch 1
# (1.8 MB, 0.9 MB) faster (docs/performance.md, round 13).
DEFAULT_MAX_TRANSFORMED_KIB = 4096

# (B^T, G, A^T) for F(m x m, 3 x 3), interpolation points 0, +-1 (m = 2) and 0, +-1, +-2 (m = 4).
_TRANSFORMS: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {
    2: (
        np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64),
        np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64),
        np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64),
    ),
    4: (
        np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                  [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64),
        np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float64),
        np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                  [0, 1, -1, 8, -8, 1]], np.float64),
    ),
}


def transforms(tile: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(B^T, G, A^T)`` of F(tile x tile, 3 x 3) in float64; :class:`PipelineError` for a
    tile size the pass has no transforms for."""
    if tile not in _TRANSFORMS:
        raise PipelineError(f"tilecraft-winograd-conv: no transforms for tile {tile!r} "
                            f"(supported: {', '.join(map(str, TILE_SIZES))})")
    return _TRANSFORMS[tile]


def winograd_candidate(op: ir.Operation) -> bool:
    """A ``linalg.conv_2d_nhwc_hwcf`` the rewrite takes, the filter's constness aside:
    static f32 shapes, a 3x3 filter, unit strides and dilations."""
    if op.name != "linalg.conv_2d_nhwc_hwcf" or len(op.operands) != 3 or not static_f32_tensors(op.operands):
        return False
    kh, kw = ir.RankedTensorType(op.operands[1].type).shape[:2]
    return ((kh, kw) == (3, 3) and int_list_attribute(op, "strides", [1, 1]) == [1, 1]
            and int_list_attribute(op, "dilations", [1, 1]) == [1, 1])


def _map(n_dims: int, results: list) -> ir.AffineMap:
    return ir.AffineMap.get(n_dims, 0, results)


def _multiply_add(x: ir.Value, w: ir.Value, acc: ir.Value) -> ir.Value:
    return arith.addf(acc, arith.mulf(x, w))


def _zeros(shape: list[int]) -> ir.Value:
    return core.filled(shape, 0.0, ir.F32Type.get())


def _filter_transform(weights: ir.Value, g: np.ndarray) -> ir.Value:
    """``U[a, b, c, f] = sum_ij G[a, i] w[i, j, c, f] G[b, j]``, as ``[a*b, c, f]``: a
    contraction on constants, evaluated once by the folder (its speed does not matter)."""
    alpha = g.shape[0]
    _kh, _kw, channels, filters = core.static_shape(weights)
    g_const = core.constant(g.astype(np.float32), name="winograd_g")
    d = [ir.AffineDimExpr.get(i) for i in range(5)]
    # Rows: R[a, j, c, f] = sum_i G[a, i] w[i, j, c, f]   (loops a, j, c, f | i)
    rows = contraction.generic_op(
        [g_const, weights], _zeros([alpha, 3, channels, filters]),
        [_map(5, [d[0], d[4]]), _map(5, [d[4], d[1], d[2], d[3]]), _map(5, [d[0], d[1], d[2], d[3]])],
        4, 1, _multiply_add)
    # Columns: U[a, b, c, f] = sum_j R[a, j, c, f] G[b, j]   (loops a, b, c, f | j)
    full = contraction.generic_op(
        [rows, g_const], _zeros([alpha, alpha, channels, filters]),
        [_map(5, [d[0], d[4], d[2], d[3]]), _map(5, [d[1], d[4]]), _map(5, [d[0], d[1], d[2], d[3]])],
        4, 1, _multiply_add)
    return contraction.collapse(full, [[0, 1], [2], [3]])


def _combination(terms: list[tuple[ir.Value, list]], matrix: np.ndarray, coefficient_dim: int,
                 shape: list[int], init: ir.Value | None = None,
                 result_loops: list[int] | None = None) -> ir.Value:
    """``out[l] = init[l] + sum_t matrix[l[coefficient_dim], t] * term_t[map_t(l)]``: an
    elementwise ``linalg.generic`` over loops of extents ``shape``; the result's dim ``i``
    is loop ``result_loops[i]`` (default: the loops in order).

    Why not a contraction with the constant matrix: the transforms' reductions are 4 or 6
    long, and as contractions each step reads a column of the matrix as a gather and a
    vector of the operand, ran at a small fraction of peak. Here every operand is read through a
    projected map (the schedule vectorizes it along the channels, the last dim) and the
    coefficients are per-row constants, broadcast like a per-channel bias.
    ``terms``: (tensor, index expressions over the loops) per column of ``matrix``."""
    rank = len(shape)
    loops = [ir.AffineDimExpr.get(i) for i in range(rank)]
    order = list(range(rank)) if result_loops is None else list(result_loops)
    result_map = _map(rank, [loops[i] for i in order])
    inputs, maps = [], []
    for tensor_value, exprs in terms:
        inputs.append(tensor_value)
        maps.append(_map(rank, exprs))
    for column in range(matrix.shape[1]):
        inputs.append(core.constant(np.ascontiguousarray(matrix[:, column]).astype(np.float32),
                                    name="winograd_coefficients"))
        maps.append(_map(rank, [loops[coefficient_dim]]))
    count = len(terms)
    if init is not None:
        inputs.append(init)
        maps.append(result_map)

    def body(*scalars: ir.Value) -> ir.Value:
        values, coefficients = scalars[:count], scalars[count:2 * count]
        total = scalars[2 * count] if init is not None else None
        for value, coefficient in zip(values, coefficients):
            product = arith.mulf(value, coefficient)
            total = product if total is None else arith.addf(total, product)
        return total

    return contraction.generic_op(inputs, core.empty([shape[i] for i in order], ir.F32Type.get()),
                                  [*maps, result_map], rank, 0, lambda *scalars: body(*scalars[:-1]))


def _tiles_view(value: ir.Value, dim: int, tile: int, tiles: int, offset: int) -> ir.Value:
    """``value``'s dim ``dim`` from ``offset`` on, ``tiles * tile`` long, split into
    ``(tiles, tile)``: row ``t * tile + i + offset`` is ``[t, i]`` (no data moves)."""
    shape = core.static_shape(value)
    offsets = [0] * len(shape)
    offsets[dim] = offset
    sizes = list(shape)
    sizes[dim] = tiles * tile
    sliced = movement.extract_slice(value, offsets, sizes)
    groups = [[d] if d < dim else [d + 1] for d in range(len(shape))]
    groups[dim] = [dim, dim + 1]
    return contraction.expand(sliced, groups, [*shape[:dim], tiles, tile, *shape[dim + 1:]])


def _row(value: ir.Value, dim: int, row: int) -> ir.Value:
    """``value[..., row:row+1, ...]`` along ``dim``: the operand of one coefficient. Read with
    index 0 along ``dim``, its map stays a projected permutation (the vectorizer takes
    constant 0 in an indexing map, no other constant)."""
    shape = core.static_shape(value)
    offsets = [0] * len(shape)
    offsets[dim] = row
    return movement.extract_slice(value, offsets, [*shape[:dim], 1, *shape[dim + 1:]])


def _overlapping_terms(value: ir.Value, dim: int, tile: int, tiles: int, alpha: int,
                       index: list) -> list[tuple[ir.Value, list]]:
    """The ``alpha`` operands ``value[..., t * tile + i, ...]`` (i < alpha) of a transform:
    rows ``i < tile`` from the tiles view at offset 0, the overlap (``i >= tile``) from the
    view one tile further (tiles overlap by 2: no reshape makes them, two views do).
    ``index``: the operands' index expressions (their tile-row dim read at 0)."""
    main = _tiles_view(value, dim, tile, tiles, 0)
    halo = _tiles_view(value, dim, tile, tiles, tile)
    return [(_row(main if i < tile else halo, dim + 1, i % tile), index)
            for i in range(alpha)]


def _input_transform(padded: ir.Value, bt: np.ndarray, tile: int, tiles_h: int, tiles_w: int) -> ir.Value:
    """``V[a, b, n, th, tw, c] = sum_ij B^T[a, i] x[n, m th + i, m tw + j, c] B^T[b, j]``,
    as ``[a*b, n*th*tw, c]``; ``padded`` holds ``(tiles + 1) * m`` rows and columns.

    The columns step's loops run tile-major (the transform point inside the tile) while it
    writes V transform-point-major, the matmul's layout: with its loops in V's order it swept
    every tile once per (a, b), reading the rows step's result 6 times over, and with V
    tile-major the matmul read its rows 9 KB apart (measured slower at 56x56)."""
    alpha = bt.shape[0]
    batch, _h, width, channels = core.static_shape(padded)
    zero = ir.AffineConstantExpr.get(0)
    # Rows: T[n, th, a, w, c] = sum_i B^T[a, i] x[n, m th + i, w, c]   (loops n, th, a, w, c)
    n, th, a, w, c = (ir.AffineDimExpr.get(i) for i in range(5))
    rows = _combination(
        _overlapping_terms(padded, 1, tile, tiles_h, alpha, [n, th, zero, w, c]),
        bt, 2, [batch, tiles_h, alpha, width, channels])
    # Columns: V[a, b, n, th, tw, c] = sum_j B^T[b, j] T[n, th, a, m tw + j, c]
    # (loops n, th, tw, a, b, c)
    n, th, tw, a, b, c = (ir.AffineDimExpr.get(i) for i in range(6))
    full = _combination(
        _overlapping_terms(rows, 3, tile, tiles_w, alpha, [n, th, a, tw, zero, c]),
        bt, 4, [batch, tiles_h, tiles_w, alpha, alpha, channels], result_loops=[3, 4, 0, 1, 2, 5])
    return contraction.collapse(full, [[0, 1], [2, 3, 4], [5]])


def _output_transform(products: ir.Value, at: np.ndarray, init: ir.Value,
                      batch: int, tiles_h: int, tiles_w: int) -> ir.Value:
    """``Y[n, th, p, tw, q, f] = init + sum_ab A^T[p, a] M[a, b, n, th, tw, f] A^T[q, b]``
    from ``M`` as ``[a*b, n*th*tw, f]``; ``init`` is ``[n, th, p, tw, q, f]``. The rows
    step runs tile-major and writes Z tile-major, so M and Z are each read once."""
    tile, alpha = at.shape
    filters = core.static_shape(products)[-1]
    m6 = contraction.expand(products, [[0, 1], [2, 3, 4], [5]],
                            [alpha, alpha, batch, tiles_h, tiles_w, filters])
    zero = ir.AffineConstantExpr.get(0)
    # Rows: Z[n, th, tw, p, b, f] = sum_a A^T[p, a] M[a, b, n, th, tw, f]
    n, th, tw, p, b, f = (ir.AffineDimExpr.get(i) for i in range(6))
    rows = _combination([(_row(m6, 0, i), [zero, b, n, th, tw, f]) for i in range(alpha)],
                        at, 3, [batch, tiles_h, tiles_w, tile, alpha, filters])
    # Columns: Y[n, th, p, tw, q, f] = init + sum_b A^T[q, b] Z[n, th, tw, p, b, f]
    n, th, p, tw, q, f = (ir.AffineDimExpr.get(i) for i in range(6))
    return _combination([(_row(rows, 4, i), [n, th, tw, p, zero, f]) for i in range(alpha)],
                        at, 4, [batch, tiles_h, tile, tiles_w, tile, filters], init=init)


def rewrite_conv(op: ir.Operation, tile: int) -> None:
    """Replace ``op`` (a :func:`winograd_candidate` with a constant filter) by its Winograd
    form with output tiles of ``tile x tile``."""
    bt, g, at = transforms(tile)
    x, weights, init = op.operands
    batch, height, width, channels = ir.RankedTensorType(x.type).shape
    _n, out_h, out_w, filters = ir.RankedTensorType(init.type).shape
    tiles_h, tiles_w = -(-out_h // tile), -(-out_w // tile)
    alpha = tile + 2
    with ir.InsertionPoint(op), op.location:
        u = _filter_transform(weights, g)
        # The rows and columns the convolution reads: linalg lets the input be larger than
        # the output needs (the rest is never read), which would make the pad below negative.
        x = movement.extract_slice(x, [0, 0, 0, 0], [batch, out_h + 2, out_w + 2, channels])
        height, width = out_h + 2, out_w + 2
        # Whole tiles: the input needs (tiles * m + 2) rows and columns, and the overlap's
        # view one tile further (tiles + 1) * m; the extra zeros' outputs are cut off below.
        padded = core.pad_constant(x, [0, 0, 0, 0],
                                   [0, (tiles_h + 1) * tile - height, (tiles_w + 1) * tile - width, 0], 0.0)
        v = _input_transform(padded, bt, tile, tiles_h, tiles_w)
        # M[ab, t, f] = sum_c V[ab, t, c] U[ab, c, f]: one matmul per transform point ab
        # (the batch dim), tiles as its rows.   (loops ab, t, f | c)
        ab, t, f, c = (ir.AffineDimExpr.get(i) for i in range(4))
        products = contraction.generic_op(
            [v, u], _zeros([alpha * alpha, batch * tiles_h * tiles_w, filters]),
            [_map(4, [ab, t, c]), _map(4, [ab, c, f]), _map(4, [ab, t, f])],
            3, 1, _multiply_add)
        whole_h, whole_w = tiles_h * tile, tiles_w * tile
        tiled_init = core.pad_constant(init, [0, 0, 0, 0], [0, whole_h - out_h, whole_w - out_w, 0], 0.0)
        tiled_init = contraction.expand(tiled_init, [[0], [1, 2], [3, 4], [5]],
                                        [batch, tiles_h, tile, tiles_w, tile, filters])
        y = _output_transform(products, at, tiled_init, batch, tiles_h, tiles_w)
        y = contraction.collapse(y, [[0], [1, 2], [3, 4], [5]])
        y = movement.extract_slice(y, [0, 0, 0, 0], [batch, out_h, out_w, filters])
    op.results[0].replace_all_uses_with(y)
    op.erase()


def _parse_tile(text: str) -> int:
    try:
        tile = int(text)
    except ValueError:
        tile = 0
    transforms(tile)
    return tile


@register_pass(
    "tilecraft-winograd-conv",
    "3x3 stride-1 convolutions with constant filters as Winograd F(m x m, 3 x 3): filter "
    "transform folded by tilecraft-fold-constants (run it after), batched matmuls per "
    "transform point",
    options={"tile": "output tile m (2 or 4, default 4)",
             "min-tiles": f"rewrite only convolutions with at least this many output tiles over "
                          f"the batch (default {DEFAULT_MIN_TILES}; 1: no lower bound)",
             "max-transformed-kib": "rewrite only convolutions whose transformed input takes at "
                                    f"most this many KiB (default {DEFAULT_MAX_TRANSFORMED_KIB})"},
)
def winograd_conv_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    tile = _parse_tile(options.get("tile", str(DEFAULT_TILE)))
    min_tiles = positive_int_option("min-tiles", options.get("min-tiles", str(DEFAULT_MIN_TILES)))
    max_kib = positive_int_option("max-transformed-kib",
                                  options.get("max-transformed-kib", str(DEFAULT_MAX_TRANSFORMED_KIB)))
    for function in defined_functions(module):
        constants = ConstantAnalysis()
        for op in ops_where(function, winograd_candidate):
            tiles = output_tiles(op, tile)
            channels = ir.RankedTensorType(op.operands[0].type).shape[-1]
            transformed_kib = (tile + 2) ** 2 * tiles * channels * 4 / 1024
            if (tiles >= min_tiles and transformed_kib <= max_kib
                    and constants.value_is_constant(op.operands[1])):
                rewrite_conv(op, tile)


def output_tiles(op: ir.Operation, tile: int) -> int:
    """How many ``tile x tile`` output tiles a convolution has over its batch (the rows of
    each of its Winograd matmuls)."""
    batch, out_h, out_w, _filters = ir.RankedTensorType(op.operands[2].type).shape
    return batch * -(-out_h // tile) * -(-out_w // tile)


def winograd_elements(tile: int = DEFAULT_TILE, min_tiles: int = DEFAULT_MIN_TILES,
                      max_transformed_kib: int = DEFAULT_MAX_TRANSFORMED_KIB) -> list[str]:
    """The pass elements to append to a graph stage that has folded its constants (the
    default one at opt_level >= 2): the rewrite, then the folder again for the filter
    transform, then the cleanup the stage ends with. Appended, not inserted before the
    first folding: batch norms fold into a convolution, not into its Winograd form."""
    transforms(tile)
    positive_int_option("min-tiles", str(min_tiles))
    positive_int_option("max-transformed-kib", str(max_transformed_kib))
    options = f"tile={tile} min-tiles={min_tiles} max-transformed-kib={max_transformed_kib}"
    return [f"tilecraft-winograd-conv{{{options}}}", "tilecraft-fold-constants", "canonicalize", "cse"]
