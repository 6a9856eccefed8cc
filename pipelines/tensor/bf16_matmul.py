"""bf16 dot-product kernels for matmuls with bf16 weights (``precision="bf16"`` on
AVX512-BF16 CPUs), and ``tilecraft-bf16-dot-products``.

``vdpbf16ps`` multiplies 32 bf16 values of one register by 32 of another and adds each pair
of products into one of 16 f32 lanes: 32 multiply-adds per instruction, twice an f32 FMA's,
with the sums in f32. On such a target ``tilecraft-bf16-weights{kernels=1}`` (bf16_weights.py)
replaces a matmul by a constant f32 matrix with a call of a kernel that takes the weights
rounded to bf16, packed at compile time as

    W'[n / NT, k / 2, (n % NT) * 2 + k % 2]      (NT = the register tile's columns)

so that one 64-byte load holds two k of 16 columns (K padded to even with zeros), and rounds
each pair of A's f32 values to bf16 once, broadcast to every lane. The kernel:

  - ``scf.forall`` over (row blocks, column tiles), about two tasks per thread;
  - per task, register tiles of MR rows x NT columns of f32 accumulators that stay in
    registers over the whole of k; per pair of k, one broadcast of A's pair per row and one
    load of W' per 16 columns;
  - each dot product written as the ``vector.contract`` that means it
    (``acc[i] += sum_j extf(a[i, j]) * extf(w[i, j])`` on (16 lanes, 2 values)): correct
    on any CPU; ``tilecraft-bf16-dot-products`` makes it ``vdpbf16ps`` (the LLVM intrinsic
    ``llvm.x86.avx512bf16.dpbf16ps.512``) in the vector stage where the target has it.

Taken, with a zero-filled accumulator and static shapes: plain matmuls (the graph stage's
weight panels are left out of a bf16 pipeline that uses the kernel, so constant-weight
matmuls stay plain); 1x1 stride-1 NHWC convolutions, as a matmul of the pixels; and every
other NHWC convolution with an even number of input channels, as an implicit GEMM: row m is
the output pixel (image, oh, ow), k runs over (kernel row, kernel column, channel) -- the
order of the flattened HWCF filter -- and each row's pair of k is read from the (already
padded) input at its window's tap (``int8_matmul.Window``, the VNNI kernels' form), so no
im2col copy is made. A pair of channels then always lies in one tap. A convolution of an
odd channel count (a first RGB layer) at dilation 1 along the width reads its windows by
kernel rows instead (``RowSpan``: a kernel row's KW*C values are consecutive in the input);
a width-dilated one takes the kernel on a zero channel (graph/even_channels.py). Epilogues
(bias, activation, residual) move onto the accumulators (``tilecraft-bf16-epilogues``); where
the epilogue's NHWC result is then only padded for the next convolution or pool, the kernel
writes into the padded tensor itself (kernel_destinations.py's ``PaddedResult``, shared with
the int8 kernels): a call returning its own M x N tensor left the entry a strided copy into
the pad's interior, which no M x N view of it can avoid.

The kernel is built with MLIR's Python builders (ir/kernels.py) once per shape: its loop
structure is fixed, only its constants vary; its lane count is the instruction's.
"""

from __future__ import annotations

from typing import Callable, Mapping

import ml_dtypes
import numpy as np
from mlir import ir
from mlir.dialects import arith, func, scf, vector

from ...ir.maps import has_indexing_maps, indexing_map_texts
from ...errors import PipelineError
from ...ir import core, kernels
from ...ir.contraction import collapse, expand
from ..ir_queries import defined_functions, is_zero_fill, ops_where
from ..passes import register_pass
from .int8_matmul import (Epilogue, Window, declare_epilogue, elementwise_consumer, epilogue_constants,
                          epilogue_extras, erase_uncalled_kernels, fuse_epilogue, kernel_settings, settings_of,
                          stored_value, window_k_loop)
from .kernel_destinations import (PaddedResult, fill_task, kernel_forall, padded_destination, store_register_tile,
                                  task_tile)
from .register_tiles import (MATMUL_MAPS, DotInstruction, KernelConfig, TaskGrid, add_kernel, call_dot_instructions,
                             config_suffix, kernel_config, pack_k_groups)

BF16_DOTS_PASS = "tilecraft-bf16-dot-products"
BF16_EPILOGUE_PASS = "tilecraft-bf16-epilogues"
KERNEL_PREFIX = "tilecraft_bf16_matmul"
# On a kernel call: {threads[, window][, config][, row_span]} (int8_matmul.kernel_settings), what
# the epilogue pass needs to regenerate it.
KERNEL_ATTRIBUTE = "tilecraft.bf16_kernel"
PAIR = 2          # bf16 values of k one lane's dot product sums (register tile: register_tiles.py)
# What a kernel whose A operand is bf16 (bf16_activations.py) adds to its name.
BF16_INPUT_SUFFIX = "_abf16"
# On a kernel call's KERNEL_ATTRIBUTE: the kernel reads its window by rows (``RowSpan``).
ROW_SPAN_KEY = "row_span"
# vdpbf16ps: acc[i] += sum_j a[i, j] * w[i, j] on (16 lanes, 2 bf16 values), the sums in f32.
VDPBF16PS = DotInstruction("llvm.x86.avx512bf16.dpbf16ps.512", "vector<16xf32>", "vector<16x2xbf16>",
                           "vector<32xbf16>", ("arith.extf", "arith.extf"))


def pack_weights(w: np.ndarray, columns: int) -> np.ndarray:
    """``W'[n / NT, k / 2, (n % NT) * 2 + k % 2]`` of a (K, N) bf16 ``w``, zero-padded."""
    return pack_k_groups(w, columns, PAIR, ml_dtypes.bfloat16)


class RowSpan:
    """How a convolution of an odd channel count (an RGB stem) reads its windows by rows.

    With C odd a pair of channels would straddle two taps. But at dilation 1 along the
    width, one kernel row of a window -- its KW taps of C channels -- is KW*C consecutive
    values of the padded NHWC input, which is (N, H, W*C) viewed with each row flat (a
    ``tensor.collapse_shape``, no copy). So k runs over (kernel row, pair of that span), the
    span padded to an even ``span`` with one zero row of the filter where KW*C is odd: the
    last pair of a kernel row then reads its one value and a zero (not the next pixel's
    value, which could be an inf: inf * 0 is NaN). That is KH*KW*C + KH multiply-adds where a
    zero channel (graph/even_channels.py) made KH*KW*(C+1), and KW/2 times longer runs of
    the inner loop (ResNet-50's stem: 154 k in 7 runs of 11 pairs, not 196 in 49 of 2)."""

    @staticmethod
    def fits(window: Window) -> bool:
        """An odd channel count, read at dilation 1 along the width."""
        return window.channels % PAIR == 1 and window.dilations[1] == 1

    @staticmethod
    def span(window: Window) -> int:
        """One kernel row's values, KW*C, rounded up to whole pairs."""
        return -(-window.kernel[1] * window.channels // PAIR) * PAIR

    @classmethod
    def depth(cls, window: Window) -> int:
        """The kernel's K: a span per kernel row."""
        return window.kernel[0] * cls.span(window)

    @staticmethod
    def input_shape(window: Window) -> list[int]:
        """The padded input as the kernel reads it: (N, H, W*C)."""
        n, h, w, c = window.input_shape
        return [n, h, w * c]

    @classmethod
    def filter_rows(cls, weights: np.ndarray) -> np.ndarray:
        """A KHxKWxCxF filter as the kernel's (KH*span) x F rows, each span zero-padded."""
        kh, kw, c, f = weights.shape
        rows = weights.reshape(kh, kw * c, f)
        span = -(-kw * c // PAIR) * PAIR
        return np.pad(rows, [(0, 0), (0, span - kw * c), (0, 0)]).reshape(kh * span, f)


def kernel_name(m: int, n: int, k: int, threads: int, window: Window | None = None,
                config: KernelConfig | None = None, *, bf16_input: bool = False, row_span: bool = False) -> str:
    """The kernel's symbol: its shape, threads and window (read by rows: ``RowSpan``),
    ``config`` unless it is the default, and whether A is bf16. (Tuning records name the
    kernel without the last.)"""
    return (f"{KERNEL_PREFIX}_{m}x{n}x{k}_t{threads}" + (window.suffix() if window else "")
            + ("_rows" if row_span else "")
            + config_suffix(m, n, VDPBF16PS.lanes, threads, config) + (BF16_INPUT_SUFFIX if bf16_input else ""))


def build_kernel(m: int, n: int, k: int, threads: int, window: Window | None = None,
                 epilogue: Epilogue | None = None, name: str | None = None, *, public: bool = False,
                 config: KernelConfig | None = None, into: PaddedResult | None = None,
                 bf16_input: bool = False, row_span: bool = False) -> func.FuncOp:
    """The kernel function ``(A: MxKxf32, W': packed bf16[, the epilogue's operands]) -> MxN``
    f32, or of the epilogue's result type (module docstring), built at the insertion point.
    With ``window`` A is the padded NHWC input of a convolution whose channels are even,
    read at each row's window (implicit GEMM). With ``epilogue`` (int8_matmul.Epilogue: its
    vector function is declared just before the kernel, for ``fuse_epilogue`` to fill in)
    each accumulator vector is stored through it. ``public``: not private (while the
    epilogue is inlined into it, so that symbol-dce keeps it). ``config``: the register tile
    and task rows (register_tiles.KernelConfig; default: its ``default``); W' must be
    packed for its columns. ``into``: the kernel takes one more argument, the padded tensor
    its M = N*OH*OW rows are written into (``PaddedResult``), and returns it; its tasks are
    blocks of whole output rows of one image, about ``task_rows`` rows each. ``bf16_input``:
    A is bf16 (a bf16 kernel's stored result: bf16_activations.py); each pair of it is
    broadcast as it is, with no rounding. ``row_span``: the window's channels are odd and A is
    read by kernel rows (``RowSpan``: A is the padded input viewed as (N, H, W*C))."""
    if row_span:
        if window is None or not RowSpan.fits(window) or window.rows != m or RowSpan.depth(window) != k:
            raise PipelineError(f"bf16 convolution kernel: window {window} cannot be read by rows as a {m}x{k} A")
    elif window is not None and (window.channels % PAIR or window.rows != m or window.depth != k):
        raise PipelineError(f"bf16 convolution kernel: window {window} does not make a {m}x{k} A of whole pairs")
    if into is not None:
        into.check(m, n, "bf16 kernel")
    lanes = VDPBF16PS.lanes
    config = kernel_config(m, n, lanes, threads, config)
    grid = TaskGrid.of(m, n, lanes, config)
    rows, vectors, columns = config.rows, config.vectors, grid.columns
    pairs, full_pairs = -(-k // PAIR), k // PAIR
    f32, bf16, i32 = ir.F32Type.get(), ir.BF16Type.get(), ir.IntegerType.get_signless(32)
    result_element = ir.Type.parse(epilogue.result) if epilogue else f32
    c_type = ir.RankedTensorType.get(list(into.shape) if into else [m, n], result_element)
    pair_f32, pair_bf16 = (ir.VectorType.get([lanes, PAIR], t) for t in (f32, bf16))
    columns_in_bounds = n % columns == 0
    a_element = bf16 if bf16_input else f32
    a_shape = RowSpan.input_shape(window) if row_span else list(window.input_shape) if window else [m, k]
    a_type = ir.RankedTensorType.get(a_shape, a_element)
    extras = epilogue_extras(epilogue)
    declare_epilogue(epilogue, lanes, result_element)
    name = name or (kernel_name(m, n, k, threads, window, config, bf16_input=bf16_input, row_span=row_span)
                    + (into.suffix() if into else ""))
    function = kernels.private_function(name, [
        a_type, ir.RankedTensorType.get([grid.tiles, pairs, columns * PAIR], bf16),
        *(operand.tensor_type(m, n) for _, operand in extras), *([c_type] if into else [])], [c_type])
    if public:
        del function.attributes["sym_visibility"]
    a, w = list(function.arguments)[:2]
    extra_args = dict(zip((i for i, _ in extras), list(function.arguments)[2:]))
    with ir.InsertionPoint(function.entry_block):
        c = kernels.IndexConstants()
        c0, c1, _, c_full = c(0), c(1), c(rows), c(full_pairs)  # the row loops' step, made first
        if row_span:  # _row_span_k_loop's bounds, likewise
            c(window.kernel[0]), c(window.kernel[1] * window.channels // PAIR), c(RowSpan.span(window) // PAIR)
        elif window:  # window_k_loop's bounds, made here (in this order) for every loop to share
            c(window.kernel[0] * window.kernel[1]), c(window.channels // PAIR)
        bf0 = core.scalar_constant(0.0, bf16)
        a0 = bf0 if bf16_input else core.scalar_constant(0.0, f32)
        zero = kernels.zero_vector(lanes, f32)
        for offset in sorted(({v * PAIR * lanes for v in range(vectors)} | {v * lanes for v in range(vectors)}) - {0}):
            c(offset)
        pads, splats = epilogue_constants(extras, extra_args)
        forall = kernel_forall(grid, config.task_rows, m, n, result_element, into,
                               list(function.arguments)[-1] if into else None)
        with ir.InsertionPoint(forall.body):
            task = task_tile(forall, m, n, config.task_rows, columns, rows, result_element, into)
            t, m0, n0 = task.column_tile, task.m0, task.n0
            column_at, column_values = [], {}
            for v in range(vectors if epilogue else 0):
                column_at.append(kernels.apply(lambda d0: d0 + v * lanes, n0))
                for i, operand in extras:
                    if operand.kind == "column":
                        column_values[i, v] = kernels.read(extra_args[i], [column_at[v]], pads[i], lanes,
                                                           in_bounds=columns_in_bounds)

            def stored(row: ir.Value, v: int, value: ir.Value) -> ir.Value:
                """The value stored for accumulator vector ``value`` (row ``row``, vector ``v``)."""
                return stored_value(epilogue, value, row, v, lanes, result_element, splats=splats,
                                    column_values=column_values, extra_args=extra_args, pads=pads,
                                    column_at=column_at, in_bounds=columns_in_bounds)

            def step(mr: int, pair: ir.Value, in_bounds: bool, accs: list[ir.Value],
                     a_at: list[list[ir.Value]], w_pair: ir.Value | None = None,
                     bases: list[ir.Value] | None = None, half: bool = False) -> list[ir.Value]:
                """One pair of k: loads of W' (pair ``w_pair``, default ``pair``), A's pair
                of each row (at k = 2 * ``pair`` of index prefix ``a_at``: the row, or its
                window's tap; plus ``bases``' of the row where given: its span's start;
                ``half``: its first value and a zero) rounded to bf16 (unless A is bf16) and
                broadcast, the dot products."""
                w_pair = w_pair or pair
                k_at = kernels.apply(lambda d0: d0 * PAIR, pair)
                k_of = ([kernels.apply(lambda d0, d1: d0 + d1 * PAIR, base, pair) for base in bases] if bases
                        else [k_at] * mr)
                weights = []
                for v in range(vectors):
                    loaded = kernels.read(w, [t, w_pair, c(v * PAIR * lanes)], bf0, PAIR * lanes)
                    weights.append(arith.extf(pair_f32, vector.shape_cast(pair_bf16, loaded)))
                new = []
                for r in range(mr):
                    if half:
                        pair_a = vector.from_elements(ir.VectorType.get([PAIR], a_element), [
                            kernels.first_element(kernels.read(a, [*a_at[r], k_of[r]], a0, 1)), a0])
                    else:
                        pair_a = kernels.read(a, [*a_at[r], k_of[r]], a0, PAIR, in_bounds=in_bounds)
                    rounded = pair_a if bf16_input else arith.truncf(ir.VectorType.get([PAIR], bf16), pair_a)
                    as_word = kernels.first_element(vector.bitcast(ir.VectorType.get([1], i32), rounded))
                    spread = vector.broadcast(ir.VectorType.get([lanes], i32), as_word)
                    spread = vector.bitcast(ir.VectorType.get([lanes * PAIR], bf16), spread)
                    spread = arith.extf(pair_f32, vector.shape_cast(pair_bf16, spread))
                    new += [kernels.dot_product(spread, weights[v], accs[r * vectors + v]) for v in range(vectors)]
                return new

            def row_loop(mr: int, lower: ir.Value, upper: ir.Value, stride: ir.Value, source: ir.Value) -> ir.Value:
                loop = kernels.for_loop(lower, upper, stride, [source])
                with ir.InsertionPoint(loop.body):
                    i, current = loop.induction_variable, loop.inner_iter_args[0]
                    local, row_indices = [], []
                    for r in range(mr):
                        local.append(kernels.apply(lambda d0: d0 + r, i))
                        row_indices.append(kernels.apply(lambda d0, d1: d0 + d1 + r, m0, i))
                    if window is None:
                        over_k = kernels.for_loop(c0, c_full, c1, [zero] * (mr * vectors))
                        with ir.InsertionPoint(over_k.body):
                            scf.YieldOp(step(mr, over_k.induction_variable, True, list(over_k.inner_iter_args),
                                             [[row] for row in row_indices]))
                    elif row_span:  # per kernel row, the pairs of its span
                        over_k = _row_span_k_loop(window, [window.pixel(row) for row in row_indices],
                                                  [zero] * (mr * vectors), c,
                                                  lambda p, accs, a_at, bases, pair, half: step(
                                                      mr, p, True, accs, a_at, w_pair=pair, bases=bases, half=half))
                    else:  # per tap of the window, its channels: a pair of k is 2 channels of one tap
                        over_k = window_k_loop(window, [window.pixel(row) for row in row_indices], PAIR,
                                               [zero] * (mr * vectors), c,
                                               lambda cp, accs, a_at, pair: step(mr, cp, True, accs, a_at, w_pair=pair))
                    final = list(over_k.results)
                    if k % PAIR:  # the last k alone: A read masked (0 past K), W' zero-padded
                        final = step(mr, c_full, False, final, [[row] for row in row_indices])
                    scf.YieldOp([store_register_tile(current, final, row_indices, local, vectors, lanes, c, stored,
                                                     columns_in_bounds, into)])
                return loop.results[0]

            fill_task(forall, task, rows, c, row_loop)
        func.ReturnOp([forall.results[0]])
    return function


def _row_span_k_loop(window: Window, pixels: list[tuple[ir.Value, ir.Value, ir.Value]], initial: list[ir.Value],
                     c: "kernels.IndexConstants",
                     step: Callable[[ir.Value, list[ir.Value], list[list[ir.Value]], list[ir.Value], ir.Value, bool],
                                    list[ir.Value]]) -> scf.ForOp:
    """k of a register tile of convolution rows read by kernel rows (``RowSpan``): per kernel
    row, the whole pairs of its span, then (KW*C odd) its last value alone, each row's span
    starting at its pixel's first column in the (N, H, W*C) input: every read lies inside
    the window. ``step(pair in the span, accumulators, (image, input row) of each row, each
    row's span start, pair of k, whether the pair is the last value alone)`` adds one pair;
    the loop carries ``initial``."""
    (sh, sw), dh, channels = window.strides, window.dilations[0], window.channels
    pairs, whole = RowSpan.span(window) // PAIR, window.kernel[1] * channels // PAIR
    bases = [kernels.apply(lambda d0: d0 * (sw * channels), ow) for _, _, ow in pixels]
    over_rows = kernels.for_loop(c(0), c(window.kernel[0]), c(1), list(initial))
    with ir.InsertionPoint(over_rows.body):
        kernel_row = over_rows.induction_variable
        a_at = [[image, kernels.apply(lambda d0, d1: d0 * sh + d1 * dh, oh, kernel_row)] for image, oh, _ in pixels]
        row_pairs = kernels.apply(lambda d0: d0 * pairs, kernel_row)
        in_span = kernels.for_loop(c(0), c(whole), c(1), list(over_rows.inner_iter_args))
        with ir.InsertionPoint(in_span.body):
            pair = in_span.induction_variable
            k_pair = kernels.apply(lambda d0, d1: d0 + d1, row_pairs, pair)
            scf.YieldOp(step(pair, list(in_span.inner_iter_args), a_at, bases, k_pair, False))
        accs = list(in_span.results)
        if whole < pairs:
            accs = step(c(whole), accs, a_at, bases, kernels.apply(lambda d0: d0 + whole, row_pairs), True)
        scf.YieldOp(accs)
    return over_rows


def kernel_module(m: int, n: int, k: int, threads: int, window: Window | None = None,
                  epilogue: Epilogue | None = None, name: str | None = None, *, public: bool = False,
                  config: KernelConfig | None = None, into: PaddedResult | None = None,
                  bf16_input: bool = False, row_span: bool = False) -> ir.Module:
    """The kernel alone in a new module (in the current context): to read or test it, or
    for ``fuse_epilogue`` to complete."""
    module = ir.Module.create()
    with ir.InsertionPoint(module.body), ir.Location.unknown():
        build_kernel(m, n, k, threads, window, epilogue, name, public=public, config=config, into=into,
                     bf16_input=bf16_input, row_span=row_span)
    return module


def _kernel(module: ir.Operation, m: int, n: int, k: int, threads: int, window: Window | None,
            config: KernelConfig, bf16_input: bool = False, row_span: bool = False) -> str:
    """The kernel's symbol, its function added to ``module`` unless already there."""
    return add_kernel(module, kernel_name(m, n, k, threads, window, config, bf16_input=bf16_input, row_span=row_span),
                      lambda: build_kernel(m, n, k, threads, window, config=config, bf16_input=bf16_input,
                                           row_span=row_span))


def call_geometry(call: ir.Operation) -> tuple[int, int, int, int, Window | None, KernelConfig, bool, bool]:
    """(M, N, K, threads, window, config, whether A is bf16, whether the window is read by
    rows) of a bf16 kernel call (``KERNEL_ATTRIBUTE``): what regenerating its kernel takes."""
    settings = ir.DictAttr(call.attributes[KERNEL_ATTRIBUTE])
    threads, window, config = settings_of(settings)
    row_span = ROW_SPAN_KEY in settings
    a_type = ir.RankedTensorType(call.operands[0].type)
    m, k = (window.rows, RowSpan.depth(window) if row_span else window.depth) if window else a_type.shape
    n = ir.RankedTensorType(call.results[0].type).shape[1]
    return m, n, k, threads, window, config, a_type.element_type == ir.BF16Type.get(), row_span


def read_bf16_input(module: ir.Operation, call: ir.Operation) -> None:
    """Point ``call``, whose A operand has just become bf16 (bf16_activations.py), at the
    kernel that reads A as bf16 (added to ``module`` unless already there)."""
    m, n, k, threads, window, config, bf16_input, row_span = call_geometry(call)
    if not bf16_input:
        raise PipelineError(f"bf16 kernel call: A is {call.operands[0].type}, not bf16")
    with call.location:
        call.attributes["callee"] = ir.FlatSymbolRefAttr.get(_kernel(module, m, n, k, threads, window, config, True,
                                                                     row_span))


def _attribute_pair(op: ir.Operation, name: str) -> tuple[int, int]:
    """A convolution's ``strides`` or ``dilations`` (1, 1 when absent)."""
    if name not in op.attributes:
        return 1, 1
    values = [int(v) for v in ir.DenseIntElementsAttr(op.attributes[name])]
    return values[0], values[1]


def _pointwise_conv(op: ir.Operation) -> bool:
    """A 1x1, stride-1 NHWC convolution: a matmul of the pixels (N*H*W, C) by the filter (C, F)."""
    filter_shape = ir.RankedTensorType(op.operands[1].type).shape
    return filter_shape[:2] == [1, 1] and _attribute_pair(op, "strides") == (1, 1)


def conv_window(op: ir.Operation) -> Window:
    """The windows of a static NHWC/HWCF convolution (``linalg.conv_2d_nhwc_hwcf``) that
    the kernel reads in place of im2col's rows."""
    input_shape = tuple(ir.RankedTensorType(op.operands[0].type).shape)
    kh, kw = ir.RankedTensorType(op.operands[1].type).shape[:2]
    _, out_h, out_w, _ = ir.RankedTensorType(op.results[0].type).shape
    return Window(input_shape, (kh, kw), _attribute_pair(op, "strides"), _attribute_pair(op, "dilations"),
                  out_h, out_w)


def takes_kernel(op: ir.Operation) -> bool:
    """A plain ``linalg.matmul``, or an NHWC convolution whose channels are even (or a 1x1
    stride-1 one, any channels), of static f32 shapes whose accumulator is a zero fill."""
    if op.name == "linalg.matmul" and len(op.operands) == 3:
        if has_indexing_maps(op):
            if indexing_map_texts(op) != MATMUL_MAPS:
                return False
    elif op.name != "linalg.conv_2d_nhwc_hwcf" or len(op.operands) != 3:
        return False
    types = [ir.RankedTensorType(v.type) for v in op.operands]
    if not all(t.has_static_shape for t in types) or [str(t.element_type) for t in types] != ["f32"] * 3:
        return False
    if op.name != "linalg.matmul" and not _pointwise_conv(op) and types[0].shape[3] % PAIR:
        return False
    return is_zero_fill(op.operands[2])


def takes_row_span_kernel(op: ir.Operation) -> bool:
    """A windowed NHWC convolution of an odd channel count at dilation 1 along the width, of
    static f32 shapes whose accumulator is a zero fill: the kernel reads it by rows (``RowSpan``)."""
    if op.name != "linalg.conv_2d_nhwc_hwcf" or len(op.operands) != 3 or _pointwise_conv(op):
        return False
    types = [ir.RankedTensorType(v.type) for v in op.operands]
    if not all(t.has_static_shape for t in types) or [str(t.element_type) for t in types] != ["f32"] * 3:
        return False
    return RowSpan.fits(conv_window(op)) and is_zero_fill(op.operands[2])


def to_bf16_kernel(module: ir.Operation, op: ir.Operation, weights: np.ndarray, threads: int,
                   configs: Mapping[str, KernelConfig] | None = None, *, row_span: bool = False) -> None:
    """Replace ``op`` (``takes_kernel``) by a call of the bf16 kernel for its shape, its B
    operand's values ``weights`` (K x N, or a KHxKWxCxF filter, read as (KH*KW*C) x F;
    rounded to bf16 here) packed for it. A 1x1 stride-1 convolution's pixels are the rows:
    its input and result are viewed as (N*H*W, C) and (N*H*W, F) (``tensor.collapse_shape``
    / ``expand_shape``: no copy); another convolution's kernel reads the input itself at
    each pixel's window, and its (N*OH*OW, F) result is expanded the same way. ``configs``:
    kernel configs by default kernel name (tuning records); a kernel not there takes the
    default config. ``row_span``: a convolution that ``takes_row_span_kernel``, its input viewed
    as (N, H, W*C) and its filter's kernel rows padded to whole pairs (``RowSpan``)."""
    conv = op.name != "linalg.matmul"
    window = conv_window(op) if conv and not _pointwise_conv(op) else None
    if row_span and not (window is not None and takes_row_span_kernel(op)):
        raise PipelineError(f"bf16 kernel: {op.name} cannot be read by rows")
    weights = RowSpan.filter_rows(weights) if row_span else weights.reshape(-1, weights.shape[-1])
    k, n = weights.shape
    lanes = VDPBF16PS.lanes
    with ir.InsertionPoint(op), op.location:
        if row_span:
            a, m = collapse(op.operands[0], [[0], [1], [2, 3]]), window.rows
        elif window is not None:
            a, m = op.operands[0], window.rows
        else:
            a = collapse(op.operands[0], [[0, 1, 2], [3]]) if conv else op.operands[0]
            m = ir.RankedTensorType(a.type).shape[0]
        default = KernelConfig.default(m, n, lanes, threads)
        # Tuning records name a convolution's kernel by its window's KH*KW*C (tuning/kernel_tasks.py,
        # which sees the call's window, not how the kernel reads it): a rows kernel is looked up so.
        record_name = kernel_name(m, n, window.depth if row_span else k, threads, window)
        config = kernel_config(m, n, lanes, threads, (configs or {}).get(record_name))
        name = _kernel(module, m, n, k, threads, window, config, row_span=row_span)
        packed = core.constant(pack_weights(weights.astype(ml_dtypes.bfloat16), config.vectors * lanes),
                               name="bf16_panels")
        result_type = ir.RankedTensorType.get([m, n], ir.F32Type.get())
        call = func.CallOp([result_type], ir.FlatSymbolRefAttr.get(name), [a, packed])
        call.attributes[KERNEL_ATTRIBUTE] = kernel_settings(
            threads, window, config, default, **({ROW_SPAN_KEY: ir.UnitAttr.get()} if row_span else {}))
        product = call.results[0]
        if conv:
            product = expand(product, [[0, 1, 2], [3]], ir.RankedTensorType(op.results[0].type).shape)
    op.results[0].replace_all_uses_with(product)
    op.erase()


@register_pass(
    BF16_DOTS_PASS,
    "vector.contract ops meaning one bf16-pair dot product into 16 f32 lanes become vdpbf16ps "
    "(AVX512-BF16) intrinsic calls",
)
def bf16_dot_products_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Late, as int8_matmul.py's vpdpbusd: see ``register_tiles.call_dot_instructions``."""
    if options:
        raise PipelineError(f"{BF16_DOTS_PASS} takes no options, got {sorted(options)}")
    call_dot_instructions(module, VDPBF16PS)


@register_pass(
    BF16_EPILOGUE_PASS,
    "An elementwise linalg.generic consuming a bf16 kernel's f32 result (bias, activation, "
    "residual) moves into the kernel, onto its accumulators",
)
def bf16_epilogues_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: the f32 schedule fuses a matmul's or convolution's bias, activation and residual
    into its tiles; without this a kernel wrote its product and an elementwise kernel read
    it back (BERT's 128 x 3072 feed-forward product is 1.5 MB). As
    ``tilecraft-int8-epilogues`` (int8_matmul.py, whose machinery this shares), after
    elementwise fusion. A kernel whose epilogue's result only goes into a ``tensor.pad``
    writes into the padded tensor (``PaddedResult``; the module docstring says why)."""
    if options:
        raise PipelineError(f"{BF16_EPILOGUE_PASS} takes no options, got {sorted(options)}")
    for function in defined_functions(module):
        calls = ops_where(function, lambda o: o.name == "func.call" and KERNEL_ATTRIBUTE in o.attributes)
        for call in calls:
            consumer = elementwise_consumer(call)
            if consumer is None:
                continue
            m, n, k, threads, window, config, bf16_input, row_span = call_geometry(call)
            padded = padded_destination(consumer)  # None: the kernel returns its own M x N tensor
            into, destination = padded if padded else (None, None)
            fuse_epilogue(module, call, consumer, m, n,
                          kernel_name(m, n, k, threads, window, config, bf16_input=bf16_input, row_span=row_span)
                          + (into.suffix() if into else ""),
                          lambda epilogue, name: kernel_module(m, n, k, threads, window, epilogue, name, public=True,
                                                               config=config, into=into, bf16_input=bf16_input,
                                                               row_span=row_span),
                          VDPBF16PS.lanes, destination=destination)
    erase_uncalled_kernels(module, KERNEL_PREFIX)
