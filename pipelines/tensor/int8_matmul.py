"""``tilecraft-int8-matmul``: 8-bit integer matmuls as u8 x s8 dot products (AVX-512 VNNI);
``tilecraft-int8-epilogues``: their requantization moved onto the accumulators.

The ONNX frontend forms the product of quantized operands (MatMulInteger, QLinearMatMul)
from the raw 8-bit values, ``contraction.integer_matmul``::

    C[m, n] += ext(A[m, k]) * ext(B[k, n])      A: i8 (u8 or s8), B: i8, C: i32

This pass decides how that product runs, once per matmul:

* **A VNNI kernel** when the target has ``avx512vnni``, B is a literal constant of signed
  bytes and the shapes are static. ``vpdpbusd`` multiplies 64 unsigned bytes of A by 64
  signed bytes of B and adds each group of four products into one of 16 i32 lanes: 64
  multiply-adds per instruction, four times an f32 FMA's. The pass packs B at compile time
  as ``B'[n / NT, k / 4, (n % NT) * 4 + k % 4]`` (NT = the register tile's columns, K padded
  to a multiple of 4 with zeros, N to a multiple of NT), so one 64-byte load holds four k of
  16 columns, and emits a private function (one per shape and A signedness) that
  ``func.call`` replaces the matmul with:

  - ``scf.forall`` over (row blocks, column tiles), about two tasks per thread;
  - per task, register tiles of MR rows x NT columns (MR x NT/16 accumulators, MR = 6 for
    NT = 64) that stay in registers over the whole of k; per 4 values of k, one broadcast
    of A's 4 bytes per row and one load of B' per 16 columns;
  - a signed A is made unsigned by flipping its bytes' sign bit (``a + 128``) and the
    accumulators start at ``-128 * column_sums(B)``, which undoes it exactly;
  - for a convolution (``conv.integer_conv2d``: A is the im2col matrix of a padded NHWC
    input, ``im2col_window``) with channels a multiple of 4, the kernel reads each row's
    window from the padded input itself (implicit GEMM, ``Window``): k runs over the taps,
    then over their channels, and the im2col copy (9 times the input for a 3x3 filter, in
    scalar loops: a sizeable share of an int8 ResNet-50, docs/performance.md) is gone.
    Other channel counts (RGB's 3) get up to three more channels of zero weights, in the
    input's padding copy (``widened_window``), and take the same kernel.

  The kernel reads its operands through the function's arguments, so the later passes
  that rewrite constant reads (blocked_constants.py) leave the packed layout alone.

  ``tilecraft-int8-epilogues`` (after elementwise fusion) regenerates a kernel whose i32
  result feeds one elementwise generic (the requantization: zero-point offsets, scales,
  bias, ReLU, a residual, QuantizeLinear's rounding and clamp) as a variant that applies
  the generic's body, on vectors, to its accumulators and writes the generic's result
  (``Epilogue``). The generic may see the product reshaped (M into N, H, W for a
  convolution; N into heads for attention): its operands are read as full (M x N),
  per-column or scalar. The i32 product, 4 bytes per output written and read back, is
  never stored. Where the generic adds another kernel's product, quantized first (a
  projection shortcut in QDQ form), that product's quantization becomes its own kernel's
  epilogue (``quantize_other_products``), so it too is stored in 8 bits, not as i32.
  Where the epilogue's result is only padded for the next convolution or max pool, the
  kernel writes into the padded tensor (kernel_destinations.py's ``PaddedResult``, as the
  bf16 kernels do): the entry function copied each such result into the pad's interior.
  In the epilogue, QuantizeLinear's division by a constant scale multiplies by the scale's
  reciprocal (``requantize_by_reciprocals``: a rounding can move by one 8-bit step where the
  quotient is within an ulp of a half-integer, as in onnxruntime's QLinearConv and
  QLinearAdd), not the exact division's 8 vector ops.
* **Widened operands and ``linalg.matmul`` on i32** otherwise (no VNNI, an unsigned or
  run-time B, dynamic shapes): the form the default schedule vectorizes.

Why here, after the graph passes: B has to be a literal constant, which the constant
folder makes it (a DequantizeLinear-free integer weight, a transposed one, ...); and the
matmul has to be replaced before fusion groups are tagged. Why not a schedule of the
generic: the dot-product instruction consumes B in a layout (four k of a column adjacent)
that no tiling of the (K, N) operand gives, and the vectorizer has no pattern for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, func, linalg, scf, tensor, vector
from mlir.passmanager import PassManager

from ...errors import PipelineError
from ...ir import core, kernels
from ...ir.maps import indexing_map_texts, indexing_maps
from ...ir.contraction import collapse, expand
from ...ir.resources import literal_array
from ..ir_queries import defined_functions, defining_op, is_zero_fill, linear_form, ops_where, splat_float, users
from ..passes import positive_int_option, register_pass
from .kernel_destinations import (PaddedResult, fill_task, kernel_forall, padded_destination, store_register_tile,
                                  task_tile)
from .register_tiles import (CONFIGS_OPTION, MATMUL_MAPS, DotInstruction, KernelConfig, TaskGrid, add_kernel,
                             call_dot_instructions, config_suffix, kernel_config, pack_k_groups,
                             parse_kernel_configs)
from .vector_bodies import clonable_body, define_vector_function, is_all_parallel, is_identity
from .zero_channels import widened_channels

INT8_MATMUL_PASS = "tilecraft-int8-matmul"
KERNEL_PREFIX = "tilecraft_int8_matmul"
# On a kernel call: {a_unsigned, threads[, window][, config]} (kernel_settings), what the epilogue
# pass needs to regenerate it.
KERNEL_ATTRIBUTE = "tilecraft.int8_kernel"
GROUP = 4         # bytes of k one lane's dot product sums (register tile: register_tiles.py)
_SIGN_FLIP = -2139062144  # 0x80808080: each byte's sign bit


def integer_product_signedness(op: ir.Operation) -> tuple[bool, bool] | None:
    """(A unsigned, B unsigned) when ``op`` is ``contraction.integer_matmul``'s generic: 2-D
    i8 operands, an i32 result, ``acc + ext(a) * ext(b)``; ``None`` otherwise."""
    if op.name != "linalg.generic" or len(op.operands) != 3 or len(op.results) != 1:
        return None
    if indexing_map_texts(op) != MATMUL_MAPS:
        return None
    types = [ir.RankedTensorType(v.type) if isinstance(v.type, ir.RankedTensorType) else None
             for v in op.operands]
    if None in types or [str(t.element_type) for t in types] != ["i8", "i8", "i32"]:
        return None
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    extensions = ("arith.extsi", "arith.extui")
    if len(body) != 5 or body[0].name not in extensions or body[1].name not in extensions \
            or [o.name for o in body[2:]] != ["arith.muli", "arith.addi", "linalg.yield"]:
        return None
    x, w, acc = block.arguments
    signedness: dict[str, bool] = {}
    for ext in body[:2]:
        source = ext.operands[0]
        if source == x:
            signedness["a"] = ext.name == "arith.extui"
        elif source == w:
            signedness["b"] = ext.name == "arith.extui"
    if set(signedness) != {"a", "b"}:
        return None
    mul, add, yielded = body[2:]
    if set(mul.operands) != {body[0].results[0], body[1].results[0]}:
        return None
    if set(add.operands) != {acc, mul.results[0]} or yielded.operands[0] != add.results[0]:
        return None
    return signedness["a"], signedness["b"]


# ---- the kernel's shape -----------------------------------------------------------------


def pack_weights(b: np.ndarray, columns: int) -> np.ndarray:
    """``B'[n / NT, k / 4, (n % NT) * 4 + k % 4]`` of a (K, N) int8 ``b``, zero-padded."""
    return pack_k_groups(b, columns, GROUP, np.int8)


def accumulator_start(b: np.ndarray, columns: int, a_unsigned: bool) -> np.ndarray:
    """Each column's first accumulator value: 0, or ``-128 * column_sum`` for a signed A
    whose bytes the kernel offsets by 128."""
    k, n = b.shape
    start = np.zeros(-(-n // columns) * columns, np.int32)
    if not a_unsigned:
        start[:n] = -128 * b.astype(np.int32).sum(axis=0)
    return start


@dataclass(frozen=True)
class Window:
    """A 2-D convolution's windows, which the kernel reads in place of im2col's rows
    (implicit GEMM): A is the padded NHWC input, row m is the output pixel (image, oh, ow)
    and k runs over (kernel row, kernel column, channel), the order of the packed filter.
    The channels are a multiple of 4, so that each group of four k lies in one tap."""

    input_shape: tuple[int, int, int, int]
    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    out_h: int
    out_w: int

    @property
    def channels(self) -> int:
        return self.input_shape[3]

    @property
    def rows(self) -> int:
        return self.input_shape[0] * self.out_h * self.out_w

    @property
    def depth(self) -> int:
        return self.kernel[0] * self.kernel[1] * self.channels

    def as_list(self) -> list[int]:
        return [*self.input_shape, *self.kernel, *self.strides, *self.dilations, self.out_h, self.out_w]

    @classmethod
    def from_list(cls, values: list[int]) -> "Window":
        return cls(tuple(values[0:4]), tuple(values[4:6]), tuple(values[6:8]), tuple(values[8:10]),
                   values[10], values[11])

    def pixel(self, row: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """Row ``row``'s output pixel: (image, output row, output column)."""
        out_h, out_w = self.out_h, self.out_w
        return (kernels.apply(lambda d0: ir.AffineExpr.get_floor_div(d0, out_h * out_w), row),
                kernels.apply(lambda d0: ir.AffineExpr.get_floor_div(d0, out_w) % out_h, row),
                kernels.apply(lambda d0: d0 % out_w, row))

    def tap_at(self, pixel: tuple[ir.Value, ir.Value, ir.Value], tap: ir.Value) -> list[ir.Value]:
        """The padded input's (image, row, column) that tap ``tap`` (kernel row * KW +
        kernel column) of ``pixel``'s window reads."""
        image, oh, ow = pixel
        (sh, sw), (dh, dw), kw = self.strides, self.dilations, self.kernel[1]
        ih = kernels.apply(lambda d0, d1: d0 * sh + ir.AffineExpr.get_floor_div(d1, kw) * dh, oh, tap)
        iw = kernels.apply(lambda d0, d1: d0 * sw + (d1 % kw) * dw, ow, tap)
        return [image, ih, iw]

    def suffix(self) -> str:
        return ("_conv" + "x".join(map(str, self.input_shape)) + f"_k{self.kernel[0]}x{self.kernel[1]}"
                f"_s{self.strides[0]}x{self.strides[1]}_d{self.dilations[0]}x{self.dilations[1]}")


def kernel_name(m: int, n: int, k: int, a_unsigned: bool, threads: int, window: Window | None = None,
                config: KernelConfig | None = None) -> str:
    """The kernel's symbol: its shape, A's signedness, threads and window, and ``config``
    unless it is the default."""
    return (f"{KERNEL_PREFIX}_{m}x{n}x{k}_{'u8' if a_unsigned else 's8'}_t{threads}"
            + (window.suffix() if window else "") + config_suffix(m, n, VPDPBUSD.lanes, threads, config))


def im2col_window(a: ir.Value) -> tuple[ir.Value, Window] | None:
    """(padded NHWC input, its windows) when ``a`` is ``conv.integer_conv2d``'s im2col
    matrix: the (N*OH*OW, KH*KW*C) collapse of a copy generic reading
    ``x[n, oh * s0 + kh * d0, ow * s1 + kw * d1, c]``, with C a multiple of 4."""
    windows = _im2col_source(a)
    return windows if windows and windows[1].channels % GROUP == 0 else None


def widened_window(a: ir.Value, b: np.ndarray) -> tuple[ir.Value, Window, np.ndarray] | None:
    """(input, windows, filter) of an im2col matrix ``a`` whose channels are not a multiple
    of 4 (a network's first layer on RGB: 3), made one: the padded NHWC input with up to
    three more channels and ``b`` (KH*KW*C x N) with zero rows at their place, so that the
    kernel reads the windows in place (tensor/zero_channels.py's ``widened_channels``, which
    widens bf16 kernels' inputs too). Built at the insertion point; ``None`` when ``a`` is
    no im2col matrix.

    Why: im2col of C % 4 channels is a scalar byte copy of KH*KW times the input (ResNet-50's
    7x7 stem: 1.8 MB a call, 0.4 ms of ~13, more than the stem's kernel), while the window
    kernel needs each group of four k in one tap. The new channels' weights are zero, so
    every sum is what it was whatever they hold; they hold the input's padding value, in
    the same copy where the input is a ``tensor.pad`` of static amounts (the importer pads
    a convolution's input so), else a new pad copies the (unpadded) input once. The
    kernel's accumulator start (column sums of ``b``) is unchanged by zero rows."""
    windows = _im2col_source(a)
    if windows is None or windows[1].channels % GROUP == 0:
        return None
    source, window = windows
    channels = window.channels
    extra = -channels % GROUP
    widened = widened_channels(source, GROUP)
    taps = window.kernel[0] * window.kernel[1]
    filter_ = np.pad(b.reshape(taps, channels, b.shape[1]), [(0, 0), (0, extra), (0, 0)])
    shape = (*window.input_shape[:3], channels + extra)
    window = Window(shape, window.kernel, window.strides, window.dilations, window.out_h, window.out_w)
    return widened, window, filter_.reshape(taps * (channels + extra), b.shape[1])


def _im2col_source(a: ir.Value) -> tuple[ir.Value, Window] | None:
    """``im2col_window`` for any channel count."""
    collapse = defining_op(a)
    if collapse is None or collapse.name != "tensor.collapse_shape":
        return None
    groups = [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)] for g in ir.ArrayAttr(collapse.attributes["reassociation"])]
    copy = defining_op(collapse.operands[0])
    if groups != [[0, 1, 2], [3, 4, 5]] or copy is None or copy.name != "linalg.generic" or len(copy.operands) != 2:
        return None
    body = [o.operation for o in copy.regions[0].blocks[0].operations]
    if len(body) != 1 or body[0].operands[0] != copy.regions[0].blocks[0].arguments[0]:
        return None
    source = copy.operands[0]
    if not isinstance(source.type, ir.RankedTensorType) or not ir.RankedTensorType(source.type).has_static_shape:
        return None
    input_shape = tuple(ir.RankedTensorType(source.type).shape)
    images, out_h, out_w, kh, kw, channels = ir.RankedTensorType(copy.results[0].type).shape
    read, written = indexing_maps(copy)
    if not is_identity(written) or len(read.results) != 4:
        return None
    forms = [linear_form(e) for e in read.results]
    if forms[0] != {0: 1} or forms[3] != {5: 1} or None in forms:
        return None
    height, width = forms[1], forms[2]
    if set(height) - {1, 3} or set(width) - {2, 4} or min(*height.values(), *width.values()) < 1:
        return None
    if len(input_shape) != 4 or input_shape[0] != images or input_shape[3] != channels:
        return None
    return source, Window(input_shape, (kh, kw), (height.get(1, 1), width.get(2, 1)),
                          (height.get(3, 1), width.get(4, 1)), out_h, out_w)


def build_kernel(m: int, n: int, k: int, a_unsigned: bool, threads: int,
                 epilogue: "Epilogue | None" = None, name: str | None = None,
                 window: "Window | None" = None, *, public: bool = False,
                 config: KernelConfig | None = None, into: PaddedResult | None = None) -> func.FuncOp:
    """The kernel function (see the module docstring), built at the insertion point:
    ``(A: MxKxi8, B': packed, start: i32 per padded column[, the epilogue's operands]) ->
    MxN`` of i32, or of the epilogue's result type, whose vector function is declared just
    before it (its body is the epilogue pass's to fill in). ``public``: not private (while
    the epilogue is inlined into it, so that symbol-dce keeps it). ``config``: the register
    tile and task rows (register_tiles.KernelConfig; default: its ``default``); B' and the
    start values must be packed for its columns. ``into``: the kernel takes one more
    argument, the padded tensor its M = N*OH*OW rows are written into
    (kernel_destinations.PaddedResult), and returns it; its tasks are then blocks of whole
    output rows of one image, about ``task_rows`` rows each.

    Per task (a block of rows by one column tile), per register tile of its rows: the
    accumulators start at the start values, take every group of k (a K that is not a
    multiple of 4 ends with one masked group) and are stored, through ``epilogue`` when
    there is one. Why all of k in registers rather than blocks of k with partial sums
    stored between them: the partial sums of a task's rows (up to 800 KB for ResNet-50's
    first layers on one thread) went out of L1 and back once per block, which cost as much
    as streaming B' from L2 for each register tile; and the epilogue can then work on the
    accumulators themselves."""
    if into is not None:
        into.check(m, n, "int8 kernel")
    lanes = VPDPBUSD.lanes
    config = kernel_config(m, n, lanes, threads, config)
    grid = TaskGrid.of(m, n, lanes, config)
    rows, vectors, columns, tiles = config.rows, config.vectors, grid.columns, grid.tiles
    groups, full_groups = -(-k // GROUP), k // GROUP
    name = name or kernel_name(m, n, k, a_unsigned, threads, window, config) + (into.suffix() if into else "")
    i8, i32 = ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(32)
    result_element = ir.Type.parse(epilogue.result) if epilogue else i32
    a_type = ir.RankedTensorType.get(list(window.input_shape) if window else [m, k], i8)
    c_type = ir.RankedTensorType.get(list(into.shape) if into else [m, n], result_element)
    acc = ir.VectorType.get([lanes], i32)
    group_i8, group_i32 = ir.VectorType.get([lanes, GROUP], i8), ir.VectorType.get([lanes, GROUP], i32)
    extras = epilogue_extras(epilogue)
    # Column tiles all whole: the accumulators' loads and stores need no mask.
    columns_in_bounds = n % columns == 0
    declare_epilogue(epilogue, lanes, result_element)
    inputs = [a_type, ir.RankedTensorType.get([tiles, groups, columns * GROUP], i8),
              ir.RankedTensorType.get([tiles * columns], i32)]
    inputs += [operand.tensor_type(m, n) for _, operand in extras]
    inputs += [c_type] if into else []
    function = kernels.private_function(name, inputs, [c_type])
    if public:
        del function.attributes["sym_visibility"]
    a, b, start = list(function.arguments)[:3]
    extra_args = dict(zip((i for i, _ in extras), list(function.arguments)[3:]))
    with ir.InsertionPoint(function.entry_block):
        c = kernels.IndexConstants()
        c0, c1, _, c_full = c(0), c(1), c(rows), c(full_groups)  # the row loops' step, made first
        if window:  # window_k_loop's bounds, made here (in this order) for every loop to share
            c(window.kernel[0] * window.kernel[1]), c(window.channels // GROUP)
        i8_0, i32_0 = core.scalar_constant(0, i8), core.scalar_constant(0, i32)
        flip = arith.constant(acc, ir.DenseElementsAttr.get_splat(acc, ir.IntegerAttr.get(i32, _SIGN_FLIP)))
        for offset in sorted(({v * lanes * GROUP for v in range(vectors)} | {v * lanes for v in range(vectors)}) - {0}):
            c(offset)
        pads, splats = epilogue_constants(extras, extra_args)
        forall = kernel_forall(grid, config.task_rows, m, n, result_element, into,
                               list(function.arguments)[-1] if into else None)
        with ir.InsertionPoint(forall.body):
            task = task_tile(forall, m, n, config.task_rows, columns, rows, result_element, into)
            t, m0, n0 = task.column_tile, task.m0, task.n0
            column_at, starts, column_values = [], [], {}
            for v in range(vectors):
                column_at.append(kernels.apply(lambda d0: d0 + v * lanes, n0))
                starts.append(kernels.read(start, [column_at[v]], i32_0, lanes))
                for i, operand in extras:
                    if operand.kind == "column":
                        column_values[i, v] = kernels.read(extra_args[i], [column_at[v]], pads[i], lanes,
                                                           in_bounds=columns_in_bounds)

            def step_body(mr: int, group: ir.Value, in_bounds: bool, accs: list[ir.Value],
                          a_at: list[list[ir.Value]], b_group: ir.Value | None = None) -> list[ir.Value]:
                """One group of four k: loads of B' (group ``b_group``, default ``group``),
                broadcasts of A (its 4 bytes at k = 4 * ``group`` of each row, or of each
                row's window tap: ``a_at`` without k), the dot products."""
                b_group = b_group or group
                k_at = kernels.apply(lambda d0: d0 * GROUP, group)
                weights = []
                for v in range(vectors):
                    loaded = kernels.read(b, [t, b_group, c(v * lanes * GROUP)], i8_0, lanes * GROUP)
                    weights.append(arith.extsi(group_i32, vector.shape_cast(group_i8, loaded)))
                new = []
                for r in range(mr):
                    word = kernels.read(a, [*a_at[r], k_at], i8_0, GROUP, in_bounds=in_bounds)
                    word = kernels.first_element(vector.bitcast(ir.VectorType.get([1], i32), word))
                    spread = vector.broadcast(acc, word)
                    if not a_unsigned:
                        spread = arith.xori(spread, flip)
                    spread = vector.shape_cast(group_i8, vector.bitcast(ir.VectorType.get([lanes * GROUP], i8), spread))
                    spread = arith.extui(group_i32, spread)
                    new += [kernels.dot_product(spread, weights[v], accs[r * vectors + v]) for v in range(vectors)]
                return new

            def stored(row: ir.Value, v: int, value: ir.Value) -> ir.Value:
                """The value stored for accumulator vector ``value`` (row ``row``, vector ``v``)."""
                return stored_value(epilogue, value, row, v, lanes, result_element, splats=splats,
                                    column_values=column_values, extra_args=extra_args, pads=pads,
                                    column_at=column_at, in_bounds=columns_in_bounds)

            def row_loop(mr: int, lower: ir.Value, upper: ir.Value, stride: ir.Value, source: ir.Value) -> ir.Value:
                """scf.for over register tiles of ``mr`` rows in [lower, upper) of the task's
                tile: accumulators from the start values, every group of k added, stored."""
                loop = kernels.for_loop(lower, upper, stride, [source])
                with ir.InsertionPoint(loop.body):
                    i, current = loop.induction_variable, loop.inner_iter_args[0]
                    local, row_at, pixels = [], [], []
                    for r in range(mr):
                        local.append(kernels.apply(lambda d0: d0 + r, i))
                        row_at.append(kernels.apply(lambda d0, d1: d0 + d1 + r, m0, i))
                        if window:
                            pixels.append(window.pixel(row_at[r]))
                    starts_all = [starts[v] for _ in range(mr) for v in range(vectors)]
                    if window is None:
                        over_k = kernels.for_loop(c0, c_full, c1, starts_all)
                        with ir.InsertionPoint(over_k.body):
                            scf.YieldOp(step_body(mr, over_k.induction_variable, True, list(over_k.inner_iter_args),
                                                  [[row] for row in row_at]))
                    else:  # per tap of the window, its channels: a group of k is 4 channels of one tap
                        over_k = window_k_loop(window, pixels, GROUP, starts_all, c,
                                               lambda cg, accs, a_at, g: step_body(mr, cg, True, accs, a_at, b_group=g))
                    final = list(over_k.results)
                    if k % GROUP:
                        final = step_body(mr, c_full, False, final, [[row] for row in row_at])
                    scf.YieldOp([store_register_tile(current, final, row_at, local, vectors, lanes, c, stored,
                                                     columns_in_bounds, into)])
                return loop.results[0]

            fill_task(forall, task, rows, c, row_loop)
        func.ReturnOp([forall.results[0]])
    return function


def kernel_module(m: int, n: int, k: int, a_unsigned: bool, threads: int, epilogue: "Epilogue | None" = None,
                  name: str | None = None, window: "Window | None" = None, *, public: bool = False,
                  config: KernelConfig | None = None, into: PaddedResult | None = None) -> ir.Module:
    """The kernel (and its epilogue's declaration) alone in a new module, in the current
    context: to read, test, or fill in the epilogue before it joins the model."""
    module = ir.Module.create()
    with ir.InsertionPoint(module.body), ir.Location.unknown():
        build_kernel(m, n, k, a_unsigned, threads, epilogue, name, window, public=public, config=config, into=into)
    return module


def _kernel(module: ir.Operation, m: int, n: int, k: int, a_unsigned: bool, threads: int,
            window: Window | None, config: KernelConfig) -> str:
    """The kernel's symbol, its function added to ``module`` unless already there."""
    return add_kernel(module, kernel_name(m, n, k, a_unsigned, threads, window, config),
                      lambda: build_kernel(m, n, k, a_unsigned, threads, window=window, config=config))


def kernel_settings(threads: int, window: Window | None, config: KernelConfig, default: KernelConfig,
                    **more: ir.Attribute) -> ir.DictAttr:
    """The attribute a kernel call carries (``more``, threads, window, a config other than
    ``default``): what an epilogue pass needs to build the kernel again."""
    settings = {**more, "threads": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), threads)}
    if window:
        settings["window"] = ir.DenseI64ArrayAttr.get(window.as_list())
    if config != default:
        settings["config"] = ir.DenseI64ArrayAttr.get(config.as_list())
    return ir.DictAttr.get(settings)


def settings_of(settings: ir.DictAttr) -> tuple[int, Window | None, KernelConfig | None]:
    """(threads, window, config: ``None`` for the default) of a :func:`kernel_settings` attribute."""
    threads = ir.IntegerAttr(settings["threads"]).value
    window = Window.from_list(list(ir.DenseI64ArrayAttr(settings["window"]))) if "window" in settings else None
    config = KernelConfig.from_list(list(ir.DenseI64ArrayAttr(settings["config"]))) if "config" in settings else None
    return threads, window, config


def _to_vnni_kernel(module: ir.Operation, op: ir.Operation, b: np.ndarray, a_unsigned: bool, threads: int,
                    configs: Mapping[str, KernelConfig]) -> None:
    """Replace ``op`` by a call of the VNNI kernel for its shape, with the config ``configs``
    gives its default kernel name, if any."""
    a = op.operands[0]
    m, k = ir.RankedTensorType(a.type).shape
    n = b.shape[1]
    windows = im2col_window(a)
    source, window = windows if windows else (a, None)
    if window is None:
        with ir.InsertionPoint(op), op.location:
            widened = widened_window(a, b)
        if widened:
            source, window, b = widened
            k = window.depth
    default = KernelConfig.default(m, n, VPDPBUSD.lanes, threads)
    config = kernel_config(m, n, VPDPBUSD.lanes, threads, configs.get(kernel_name(m, n, k, a_unsigned, threads, window)))
    columns = config.vectors * VPDPBUSD.lanes
    name = _kernel(module, m, n, k, a_unsigned, threads, window, config)
    settings = kernel_settings(threads, window, config, default, a_unsigned=ir.BoolAttr.get(a_unsigned))
    with ir.InsertionPoint(op), op.location:
        packed = core.constant(pack_weights(b, columns), name="vnni_weights")
        start = core.constant(accumulator_start(b, columns, a_unsigned), name="vnni_start")
        call = func.CallOp([op.results[0].type], ir.FlatSymbolRefAttr.get(name), [source, packed, start])
        call.attributes[KERNEL_ATTRIBUTE] = settings
    op.results[0].replace_all_uses_with(call.results[0])
    op.erase()
    if window:  # the im2col copy (and a pad only it read), unless something else reads them
        collapse = defining_op(a)
        copy = defining_op(collapse.operands[0])
        image = defining_op(copy.operands[0])
        for dead in (collapse, copy, image):
            if dead is None or dead.name not in ("tensor.collapse_shape", "linalg.generic", "tensor.pad"):
                break
            if list(dead.results[0].uses):
                break
            dead.erase()


def _to_widened_matmul(op: ir.Operation, a_unsigned: bool, b_unsigned: bool) -> None:
    i32 = ir.IntegerType.get_signless(32)
    a, b, init = op.operands
    with ir.InsertionPoint(op), op.location:
        wide_a = core.elementwise([a], i32, lambda x: core.convert_scalar(x, i32, unsigned=a_unsigned))
        wide_b = core.elementwise([b], i32, lambda x: core.convert_scalar(x, i32, unsigned=b_unsigned))
        product = linalg.matmul(wide_a, wide_b, outs=[init])
    op.results[0].replace_all_uses_with(product)
    op.erase()


@register_pass(
    INT8_MATMUL_PASS,
    "8-bit integer matmuls: u8 x s8 dot-product kernels (AVX-512 VNNI) for constant signed "
    "weights, else widened operands and an i32 linalg.matmul",
    options={"vnni": "1: the target has AVX-512 VNNI (default 0)",
             "num-threads": "threads the kernels' parallel loops are split for (default 1)",
             CONFIGS_OPTION: "kernel configs by default kernel name, <name>:<rows>.<vectors>.<task rows>, "
                             "comma-separated (tuning records: schedule/record_plan.py); default none"},
)
def int8_matmul_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    vnni = options.get("vnni", "0")
    if vnni not in ("0", "1"):
        raise PipelineError(f"{INT8_MATMUL_PASS}: vnni must be 0 or 1, got {vnni!r}")
    threads = positive_int_option("num-threads", options.get("num-threads", "1"))
    configs = parse_kernel_configs(options.get(CONFIGS_OPTION, ""), INT8_MATMUL_PASS)
    for function in defined_functions(module):
        products = [(op, integer_product_signedness(op)) for op in ops_where(function, lambda o: o.name == "linalg.generic")]
        for op, signedness in products:
            if signedness is None:
                continue
            a_unsigned, b_unsigned = signedness
            a, b, init = op.operands
            static = all(ir.RankedTensorType(v.type).has_static_shape for v in (a, b))
            takes_kernel = vnni == "1" and static and not b_unsigned and is_zero_fill(init)
            weights = literal_array(b) if takes_kernel else None  # read only when it can be used
            if weights is not None:
                _to_vnni_kernel(module, op, weights, a_unsigned, threads, configs)
            else:
                _to_widened_matmul(op, a_unsigned, b_unsigned)


# ---- the dot products, once the kernel is on buffers -------------------------------------

VNNI_DOTS_PASS = "tilecraft-vnni-dot-products"
# vpdpbusd: acc[i] += sum_j extui(a[i, j]) * extsi(b[i, j]) on (16 lanes, 4 bytes).
VPDPBUSD = DotInstruction("llvm.x86.avx512.vpdpbusd.512", "vector<16xi32>", "vector<16x4xi8>",
                          "vector<64xi8>", ("arith.extui", "arith.extsi"))


@register_pass(
    VNNI_DOTS_PASS,
    "vector.contract ops meaning one u8 x s8 dot product into 16 i32 lanes become "
    "vpdpbusd (AVX-512 VNNI) intrinsic calls",
)
def vnni_dot_products_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Late, after bufferization: see ``register_tiles.call_dot_instructions``."""
    call_dot_instructions(module, VPDPBUSD)


# ---- the epilogue, on the accumulators -----------------------------------------------------

INT8_EPILOGUE_PASS = "tilecraft-int8-epilogues"


@dataclass(frozen=True)
class EpilogueOperand:
    """An operand of the elementwise epilogue, as the kernel reads it at an accumulator's
    place: ``full`` (M x N, the element at its row and column), ``column`` (N, per column:
    a per-channel scale or bias) or ``scalar`` (0-d)."""

    kind: str
    element: str

    def element_type(self) -> ir.Type:
        return ir.Type.parse(self.element)

    def tensor_type(self, m: int, n: int) -> ir.RankedTensorType:
        shape = {"full": [m, n], "column": [n], "scalar": []}[self.kind]
        return ir.RankedTensorType.get(shape, self.element_type())

    def vector_type(self) -> ir.VectorType:
        """The operand's values at one accumulator vector's lanes."""
        return ir.VectorType.get([VPDPBUSD.lanes], self.element_type())


@dataclass(frozen=True)
class Epilogue:
    """What the kernel applies to each accumulator vector before storing it: the vector
    function ``function`` of ``operands`` (the accumulator at position ``accumulator``),
    whose result has element type ``result``."""

    function: str
    operands: tuple[EpilogueOperand, ...]
    accumulator: int
    result: str


def stored_value(epilogue: "Epilogue | None", value: ir.Value, row: ir.Value, v: int, lanes: int,
                 result_element: ir.Type, *, splats: Mapping[int, ir.Value],
                 column_values: Mapping[tuple[int, int], ir.Value], extra_args: Sequence[ir.Value],
                 pads: Mapping[int, ir.Value], column_at: Sequence[ir.Value], in_bounds: bool) -> ir.Value:
    """What a register-tile kernel (int8 here, bf16 in bf16_matmul.py) stores for accumulator
    vector ``value`` at row ``row``, column vector ``v``: the value itself, or the call of the
    fused ``epilogue`` on it and its other operands' values there (scalars as ``splats``,
    per-column ones read once per task as ``column_values``, the rest read at the row)."""
    if epilogue is None:
        return value
    arguments = []
    for i, operand in enumerate(epilogue.operands):
        if i == epilogue.accumulator:
            arguments.append(value)
        elif operand.kind == "scalar":
            arguments.append(splats[i])
        elif operand.kind == "column":
            arguments.append(column_values[i, v])
        else:
            arguments.append(kernels.read(extra_args[i], [row, column_at[v]], pads[i], lanes, in_bounds=in_bounds))
    return func.CallOp([ir.VectorType.get([lanes], result_element)],
                       ir.FlatSymbolRefAttr.get(epilogue.function), arguments).results[0]


# ---- what the int8 and bf16 kernel builders share (bf16_matmul.py) -----------------------


def epilogue_extras(epilogue: "Epilogue | None") -> list[tuple[int, EpilogueOperand]]:
    """(position, operand) of the epilogue's operands other than the accumulator: the
    kernel's arguments after its own."""
    if epilogue is None:
        return []
    return [(index, operand) for index, operand in enumerate(epilogue.operands) if index != epilogue.accumulator]


def declare_epilogue(epilogue: "Epilogue | None", lanes: int, result_element: ir.Type) -> None:
    """The epilogue's vector function, declared at the insertion point (before the kernel)
    for ``fuse_epilogue`` to fill in; nothing without an epilogue."""
    if epilogue is not None:
        kernels.declare_function(epilogue.function, [o.vector_type() for o in epilogue.operands],
                                 [ir.VectorType.get([lanes], result_element)])


def epilogue_constants(extras: Sequence[tuple[int, EpilogueOperand]], extra_args: Mapping[int, ir.Value]
                       ) -> tuple[dict[int, ir.Value], dict[int, ir.Value]]:
    """(padding value per extra operand, its broadcast per scalar operand), made once at
    the kernel's entry."""
    pads, splats = {}, {}
    for i, operand in extras:
        pads[i] = core.scalar_constant(0, operand.element_type())
        if operand.kind == "scalar":
            splats[i] = vector.broadcast(operand.vector_type(), tensor.extract(extra_args[i], []))
    return pads, splats


def window_k_loop(window: Window, pixels: Sequence[tuple[ir.Value, ir.Value, ir.Value]], group: int,
                  initial: Sequence[ir.Value], c: "kernels.IndexConstants",
                  step: Callable[[ir.Value, list[ir.Value], list[list[ir.Value]], ir.Value], list[ir.Value]]
                  ) -> scf.ForOp:
    """k of a register tile of convolution rows (implicit GEMM): per tap of ``window``, its
    channels in groups of ``group`` (a group of k lies in one tap), read from the padded
    input at each row's pixel (``pixels``) moved by the tap. ``step(group in the tap,
    accumulators, index prefix of each row's read, group of k)`` adds one group of k; the
    loop carries the accumulators from ``initial``."""
    over_taps = kernels.for_loop(c(0), c(window.kernel[0] * window.kernel[1]), c(1), list(initial))
    with ir.InsertionPoint(over_taps.body):
        tap = over_taps.induction_variable
        a_at = [window.tap_at(pixel, tap) for pixel in pixels]
        tap_groups = kernels.apply(lambda d0: d0 * (window.channels // group), tap)
        channels = kernels.for_loop(c(0), c(window.channels // group), c(1), list(over_taps.inner_iter_args))
        with ir.InsertionPoint(channels.body):
            in_tap = channels.induction_variable
            k_group = kernels.apply(lambda d0, d1: d0 + d1, tap_groups, in_tap)
            scf.YieldOp(step(in_tap, list(channels.inner_iter_args), a_at, k_group))
        scf.YieldOp(list(channels.results))
    return over_taps


def _operand_kind(value: ir.AffineMap, rank: int, column_dims: list[int]) -> str | None:
    """How an epilogue operand is read, from its indexing map: ``full`` (identity),
    ``column`` (the dims N was expanded into, in order), ``scalar`` (none)."""
    results = [str(e) for e in value.results]
    if results == [f"d{i}" for i in range(rank)]:
        return "full"
    if results == [f"d{i}" for i in column_dims]:
        return "column"
    if not results:
        return "scalar"
    return None


def _row_and_column_dims(reshape: ir.Operation | None) -> tuple[list[int], list[int]]:
    """The dims of the epilogue's domain that M and N were expanded into (by ``reshape``,
    e.g. [1, 56, 56] x [64] for NHWC, or [128] x [12, 64] for attention heads)."""
    if reshape is None:
        return [0], [1]
    rows, columns = ([ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)]
                     for g in ir.ArrayAttr(reshape.attributes["reassociation"]))
    return rows, columns


def elementwise_consumer(call: ir.Operation) -> tuple[ir.Operation, ir.Operation | None, int] | None:
    """(generic, expand_shape or None, the accumulator's input position) when the kernel
    call's result (directly or through one ``tensor.expand_shape`` of its rows and columns)
    has one use, as an identity-mapped input of an all-parallel, single-result
    ``linalg.generic`` whose body an epilogue can take; else ``None``."""
    value, reshape = call.results[0], None
    uses = users(value)
    if len(uses) == 1 and uses[0].name == "tensor.expand_shape":
        reshape = uses[0]
        value = reshape.results[0]
        uses = users(value)
    if len(uses) != 1 or uses[0].name != "linalg.generic":
        return None
    generic = uses[0]
    if not is_all_parallel(generic) or not clonable_body(generic):
        return None
    inputs = list(generic.operands)[:-1]
    maps = indexing_maps(generic)
    positions = [i for i, v in enumerate(inputs) if v == value]
    if len(positions) != 1:
        return None
    position = positions[0]
    rank = ir.RankedTensorType(value.type).rank
    if not is_identity(maps[position]) or not is_identity(maps[-1]):
        return None
    _, column_dims = _row_and_column_dims(reshape)
    for operand, map_attr in zip(inputs, maps):
        kind = _operand_kind(map_attr, rank, column_dims)
        if kind is None or not isinstance(operand.type, ir.RankedTensorType) \
                or not ir.RankedTensorType(operand.type).has_static_shape:
            return None
        if kind == "full" and ir.RankedTensorType(operand.type).shape != ir.RankedTensorType(value.type).shape:
            return None
    return generic, reshape, position


def _reciprocal(divisor: float) -> np.float32 | None:
    """The f32 reciprocal of ``divisor`` when both are finite and normal; else ``None``."""
    if not np.isfinite(divisor) or divisor == 0:
        return None
    reciprocal = np.float32(1) / np.float32(divisor)
    tiny = np.finfo(np.float32).tiny
    return reciprocal if np.isfinite(reciprocal) and abs(reciprocal) >= tiny and abs(divisor) >= tiny else None


def requantize_by_reciprocals(generic: ir.Operation) -> int:
    """In an int8 epilogue's body, each division by a constant scale whose quotient is only
    rounded to an integer (QuantizeLinear: ``roundeven(x / scale)``) becomes a multiplication
    by the scale's f32 reciprocal; the number of divisions rewritten.

    Why: tilecraft-divide-by-reciprocal keeps such a division exact with Markstein's
    correction, 8 vector ops per 16 outputs where this is 1, and a residual block's epilogue
    has two of them (its product's quantization before the Add and the sum's after): 16 of
    its 35 ops (docs/performance.md, "int8 kernels write into the next layer's padding").
    ``roundeven(x * (1/s))`` differs from ``roundeven(x / s)`` only where ``x / s`` lies
    within about an ulp of a half-integer, by one 8-bit step: what onnxruntime's
    QLinearConv and QLinearAdd do too (they requantize by a multiplier). A division by a
    run-time scale (DynamicQuantizeLinear's) or one not followed by a rounding is left as
    it is, so dynamic int8 and float epilogues do not change."""
    rewritten = 0
    for op in list(generic.regions[0].blocks[0].operations):
        op = op.operation
        if op.name != "arith.divf" or not isinstance(op.results[0].type, ir.F32Type):
            continue
        uses = users(op.results[0])
        divisor = splat_float(op.operands[1])
        reciprocal = None if divisor is None else _reciprocal(divisor)
        if reciprocal is None or not uses or any(use.name != "math.roundeven" for use in uses):
            continue
        # The factor outside the body, as the divisor is: the body is cloned onto vectors.
        with ir.InsertionPoint(generic), op.location:
            factor = arith.ConstantOp(op.results[0].type, ir.FloatAttr.get(op.results[0].type, float(reciprocal)))
        with ir.InsertionPoint(op), op.location:
            product = arith.MulFOp(op.operands[0], factor.result)
        op.results[0].replace_all_uses_with(product.result)
        op.erase()
        rewritten += 1
    return rewritten


def _fuse_epilogue(module: ir.Operation, call: ir.Operation, generic: ir.Operation,
                   reshape: ir.Operation | None, position: int) -> None:
    """Replace ``call`` and ``generic`` by a call of a kernel that applies the generic's body
    to its accumulators (its requantizations by reciprocals: ``requantize_by_reciprocals``)."""
    requantize_by_reciprocals(generic)
    settings = ir.DictAttr(call.attributes[KERNEL_ATTRIBUTE])
    a_unsigned = ir.BoolAttr(settings["a_unsigned"]).value
    threads, window, config = settings_of(settings)
    a = call.operands[0]
    m, k = (window.rows, window.depth) if window else ir.RankedTensorType(a.type).shape
    n = ir.RankedTensorType(call.results[0].type).shape[1]
    consumer = (generic, reshape, position)
    padded = padded_destination(consumer)  # None: the kernel returns its own M x N tensor
    into, destination = padded if padded else (None, None)
    fuse_epilogue(module, call, consumer, m, n,
                  kernel_name(m, n, k, a_unsigned, threads, window, config) + (into.suffix() if into else ""),
                  lambda epilogue, name: kernel_module(m, n, k, a_unsigned, threads, epilogue, name, window,
                                                       public=True, config=config, into=into), VPDPBUSD.lanes,
                  destination=destination)


def fuse_epilogue(module: ir.Operation, call: ir.Operation,
                  consumer: tuple[ir.Operation, ir.Operation | None, int], m: int, n: int, base: str,
                  kernel_with: Callable[[Epilogue, str], ir.Module], lanes: int,
                  destination: tuple[ir.Value, ir.Operation] | None = None) -> None:
    """Replace ``call`` (of a dot-product kernel whose M x N result ``consumer``, from
    ``elementwise_consumer``, reads) and the consumer's generic by a call of the kernel
    regenerated with the generic's body applied to its accumulators: ``kernel_with(epilogue,
    name)`` builds it (public, in a module of its own) with ``lanes``-lane accumulators. The
    new call takes the old one's operands, then the epilogue's other operands. Shared by the
    int8 and bf16 kernels (bf16_matmul.py). ``destination`` (value, op): the kernel writes
    into the value, its last operand, and returns it in place of the op's result
    (kernel_destinations.padded_destination: the op is the pad the generic's result went
    into)."""
    generic, reshape, position = consumer
    inputs = list(generic.operands)[:-1]
    rank = ir.RankedTensorType(inputs[position].type).rank
    row_dims, column_dims = _row_and_column_dims(reshape)
    maps = indexing_maps(generic)
    operands = tuple(EpilogueOperand(_operand_kind(map_attr, rank, column_dims),
                                     str(ir.RankedTensorType(v.type).element_type))
                     for v, map_attr in zip(inputs, maps))
    result_type = ir.RankedTensorType(generic.results[0].type)
    existing = {ir.StringAttr(op.operation.attributes["sym_name"]).value
                for op in module.regions[0].blocks[0].operations if "sym_name" in op.operation.attributes}
    base = f"{base}_epilogue"
    name = next(f"{base}{i}" for i in range(len(existing) + 1) if f"{base}{i}" not in existing)
    epilogue = Epilogue(f"{name}_body", operands, position, str(result_type.element_type))
    # Public while the epilogue is inlined into it: symbol-dce would drop it, unused, otherwise.
    with module.context, ir.Location.unknown():
        kernel = kernel_with(epilogue, name)
    define_vector_function(kernel, epilogue.function, generic, lanes)
    PassManager.parse("builtin.module(inline, symbol-dce)", module.context).run(kernel.operation)
    with ir.InsertionPoint(module.regions[0].blocks[0]):
        for op in kernel.body.operations:
            clone = op.operation.clone()
            clone.attributes["sym_visibility"] = ir.StringAttr.get("private")
    with ir.InsertionPoint(generic), generic.location:
        extras = []
        for index, (value, operand) in enumerate(zip(inputs, operands)):
            if index == position:
                continue
            if operand.kind == "full":  # to (M, N); collapse leaves a 2-D operand as it is
                value = collapse(value, [row_dims, column_dims])
            elif operand.kind == "column":  # to (N,)
                value = collapse(value, [list(range(len(column_dims)))])
            extras.append(value)
        # The product's location first, then the epilogue's: the call is still the product's
        # kernel, and what names it (a profile's kernel, pipelines/profiling.py) takes a fused
        # location's first name; the generic's alone named the stem's kernel after the
        # QuantizeLinear that follows it.
        at = ir.Location.fused([call.location, generic.location])
        if destination is None:
            flat_type = ir.RankedTensorType.get([m, n], result_type.element_type)
            fused = func.CallOp([flat_type], ir.FlatSymbolRefAttr.get(name), [*call.operands, *extras], loc=at)
            result, replaced = expand(fused.results[0], [row_dims, column_dims], result_type.shape), generic
        else:
            fused = func.CallOp([destination[0].type], ir.FlatSymbolRefAttr.get(name),
                                [*call.operands, *extras, destination[0]], loc=at)
            result, replaced = fused.results[0], destination[1]
    replaced.results[0].replace_all_uses_with(result)
    if destination is not None:
        destination[1].erase()
    generic.erase()
    if reshape is not None:
        reshape.erase()
    call.erase()


def _kernel_product(value: ir.Value) -> bool:
    """``value`` is an int8 kernel call's i32 result, directly or through one
    ``tensor.expand_shape``, read by nothing else."""
    op = defining_op(value)
    if op is not None and op.name == "tensor.expand_shape" and len(users(value)) == 1:
        value, op = op.operands[0], defining_op(op.operands[0])
    return (op is not None and op.name == "func.call" and KERNEL_ATTRIBUTE in op.attributes
            and len(users(value)) == 1)


def _quantized_slice(generic: ir.Operation, index: int) -> tuple[list[ir.Operation], ir.Value] | None:
    """(ops, value) where the generic's body turns its input ``index`` into an 8-bit integer
    ``value`` by ``ops`` (in body order, ``value``'s the last) that read no other full-size
    input and that nothing else reads: QuantizeLinear of a product, as the QDQ form writes
    it before an ``Add``. ``None`` when there is no such value."""
    block = generic.regions[0].blocks[0]
    argument = block.arguments[index]
    body = [op.operation for op in block.operations][:-1]
    rank = ir.RankedTensorType(generic.results[0].type).rank
    full = {i for i, m in enumerate(indexing_maps(generic)[:-1]) if len(m.results) == rank and i != index}
    for candidate in body:
        result_type = candidate.results[0].type if len(candidate.results) == 1 else None
        if not (isinstance(result_type, ir.IntegerType) and ir.IntegerType(result_type).width == 8):
            continue
        inside = [candidate]  # its backward slice within the body, in reverse body order
        for op in reversed(body[:body.index(candidate)]):
            if any(user in inside for result in op.results for user in users(result)):
                inside.append(op)
        ops = inside[::-1]
        read = {operand.arg_number for op in ops for operand in op.operands
                if isinstance(operand, ir.BlockArgument) and operand.owner == block}
        if index not in read or read & full or len(block.arguments) - 1 in read:
            continue
        if not all(user in ops for user in users(argument)):
            continue
        if all(user in ops for op in ops[:-1] for result in op.results for user in users(result)):
            return ops, candidate.results[0]
    return None


def quantize_other_products(generic: ir.Operation, position: int) -> bool:
    """Give each other int8 kernel product that ``generic`` reads besides its accumulator
    (input ``position``) a generic of its own that quantizes it to 8 bits, where the body
    does so (``_quantized_slice``), and read that instead.

    Why: a bottleneck block's projection shortcut adds two products, the last 1x1
    convolution's and the downsample's, each quantized first (the QDQ form). Elementwise
    fusion makes that one generic; one product becomes the kernel's accumulator and the
    other was stored as i32 and read back (ResNet-50's first stage: 3136 x 256 x 4 bytes
    each way). Quantized in a generic of its own, it becomes its own kernel's epilogue,
    which stores 8 bits, and the shortcut's epilogue reads a quarter of the bytes. Exact:
    the same ops on the same values, in two functions instead of one.

    True when it moved any: then the inputs that only the moved ops read (the product's
    scales) are dropped, which replaces ``generic``, so look the consumer up again."""
    block = generic.regions[0].blocks[0]
    maps = indexing_maps(generic)
    rank = ir.RankedTensorType(generic.results[0].type).rank
    inputs = list(generic.operands)[:-1]
    i8 = ir.IntegerType.get_signless(8)
    moved = False
    for index, value in enumerate(inputs):
        if index == position or not is_identity(maps[index]) or not _kernel_product(value):
            continue
        found = _quantized_slice(generic, index)
        if found is None:
            continue
        ops, quantized = found
        read = sorted({operand.arg_number for op in ops for operand in op.operands
                       if isinstance(operand, ir.BlockArgument) and operand.owner == block} - {index})
        with ir.InsertionPoint(generic), generic.location:
            init = core.empty(ir.RankedTensorType(value.type).shape, i8)
            own = linalg.GenericOp(
                [init.type], [value, *(inputs[i] for i in read)], [init],
                ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in (maps[index], *(maps[i] for i in read),
                                                                     ir.AffineMap.get_identity(rank))]),
                generic.attributes["iterator_types"])
            own_block = own.regions[0].blocks.append(*(block.arguments[i].type for i in (index, *read)), i8)
        renamed = list(zip([block.arguments[i] for i in (index, *read)], own_block.arguments))
        with ir.InsertionPoint(own_block), generic.location:
            for op in ops:
                clone = op.clone()
                for number, operand in enumerate(clone.operands):
                    new = next((n for old, n in renamed if old == operand), None)
                    if new is not None:
                        clone.operands[number] = new
                renamed.extend(zip(op.results, clone.results))
            linalg.YieldOp([next(n for old, n in renamed if old == quantized)])
        block.arguments[index].set_type(i8)
        quantized.replace_all_uses_with(block.arguments[index])
        for op in reversed(ops):
            op.erase()
        generic.operands[index] = own.results[0]
        moved = True
    if moved:
        _drop_unread_inputs(generic)
    return moved


def _drop_unread_inputs(generic: ir.Operation) -> None:
    """Replace ``generic`` by a generic like it without the inputs its body does not read
    (its body moved over), if it has any."""
    block = generic.regions[0].blocks[0]
    inputs = list(generic.operands)[:-1]
    kept = [i for i in range(len(inputs)) if list(block.arguments[i].uses)]
    if len(kept) == len(inputs):
        return
    maps = indexing_maps(generic)
    with ir.InsertionPoint(generic), generic.location:
        new = linalg.GenericOp(
            [generic.results[0].type], [inputs[i] for i in kept], [generic.operands[-1]],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(maps[i]) for i in (*kept, len(inputs))]),
            generic.attributes["iterator_types"])
    for i in reversed(range(len(inputs))):
        if i not in kept:
            block.erase_argument(i)
    block.append_to(new.regions[0])
    generic.results[0].replace_all_uses_with(new.results[0])
    generic.erase()


@register_pass(
    INT8_EPILOGUE_PASS,
    "An elementwise linalg.generic consuming an int8 kernel's i32 result (requantization: "
    "scale, bias, activation, residual, rounding) moves into the kernel, onto its accumulators",
)
def int8_epilogues_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: the i32 product is 4 bytes per output that the kernel would write and the
    requantizing generic read back (a ResNet-50 layer's 3136 x 256 product is 3.2 MB, past
    L2); applied to the accumulators, the kernel writes the final, usually 8-bit, values.
    Runs after elementwise fusion, so that the whole chain from the i32 sum to the next
    tensor is one generic. A kernel whose epilogue's result only goes into a ``tensor.pad``
    writes into the padded tensor (``PaddedResult``: kernel_destinations.py says why)."""
    for function in defined_functions(module):
        calls = ops_where(function, lambda o: o.name == "func.call" and KERNEL_ATTRIBUTE in o.attributes)
        for call in calls:
            consumer = elementwise_consumer(call)
            if consumer is not None and quantize_other_products(consumer[0], consumer[2]):
                consumer = elementwise_consumer(call)
            if consumer is not None:
                _fuse_epilogue(module, call, *consumer)
    erase_uncalled_kernels(module, KERNEL_PREFIX)


def erase_uncalled_kernels(module: ir.Operation, prefix: str) -> None:
    """Kernel functions whose every call took an epilogue: LLVM would still compile them."""
    called = {ir.FlatSymbolRefAttr(op.attributes["callee"]).value
              for op in ops_where(module, lambda o: o.name == "func.call")}
    for op in list(module.regions[0].blocks[0].operations):
        op = op.operation
        if op.name == "func.func" and "sym_name" in op.attributes:
            name = ir.StringAttr(op.attributes["sym_name"]).value
            if name.startswith(prefix) and name not in called:
                op.erase()
