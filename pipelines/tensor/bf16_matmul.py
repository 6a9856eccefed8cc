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

Only plain matmuls and 1x1 stride-1 NHWC convolutions (a matmul of the pixels) with a
zero-filled accumulator and static shapes are taken (the graph stage's weight panels are left
out of a bf16 pipeline that uses the kernel, so constant-weight matmuls stay plain); other
convolutions keep the widened weights (bf16_weights.py). Epilogues (bias,
activation) stay elementwise kernels after the call.

The kernel is MLIR text parsed once per shape, as int8_matmul.py's VNNI kernel is: its loop
structure is fixed, only its constants vary.
"""

from __future__ import annotations

from typing import Mapping

import ml_dtypes
import numpy as np
from mlir import ir
from mlir.dialects import func

from ...errors import PipelineError
from ...frontend.emit import core
from ...frontend.emit.contraction import collapse, expand
from ..ir_queries import is_zero_fill
from ..passes import register_pass
from .register_tiles import (DOT_TRAITS, LANES, MATMUL_MAPS, DotInstruction, add_kernel, call_dot_instructions,
                             indexing_maps, pack_k_groups, register_tile, row_block)

BF16_DOTS_PASS = "tilecraft-bf16-dot-products"
KERNEL_PREFIX = "tilecraft_bf16_matmul"
PAIR = 2          # bf16 values of k one lane's dot product sums (register tile: register_tiles.py)
# vdpbf16ps: acc[i] += sum_j a[i, j] * w[i, j] on (16 lanes, 2 bf16 values), the sums in f32.
VDPBF16PS = DotInstruction("llvm.x86.avx512bf16.dpbf16ps.512", "vector<16xf32>", "vector<16x2xbf16>",
                           "vector<32xbf16>", ("arith.extf", "arith.extf"))


def pack_weights(w: np.ndarray, columns: int) -> np.ndarray:
    """``W'[n / NT, k / 2, (n % NT) * 2 + k % 2]`` of a (K, N) bf16 ``w``, zero-padded."""
    return pack_k_groups(w, columns, PAIR, ml_dtypes.bfloat16)


def kernel_name(m: int, n: int, k: int, threads: int) -> str:
    return f"{KERNEL_PREFIX}_{m}x{n}x{k}_t{threads}"


def kernel_source(m: int, n: int, k: int, threads: int) -> str:
    """The kernel's MLIR: ``(A: MxKxf32, W': packed bf16) -> MxN f32`` (module docstring)."""
    rows, vectors = register_tile(n)
    columns = vectors * LANES
    tiles, pairs, full_pairs = -(-n // columns), -(-k // PAIR), k // PAIR
    block_rows = row_block(m, tiles, rows, threads)
    row_blocks = -(-m // block_rows)
    a_type, w_type = f"tensor<{m}x{k}xf32>", f"tensor<{tiles}x{pairs}x{columns * PAIR}xbf16>"
    c_type, tile_type, acc = f"tensor<{m}x{n}xf32>", "tensor<?x?xf32>", "vector<16xf32>"
    columns_in_bounds = "true" if n % columns == 0 else "false"
    lines = [
        f"func.func private @{kernel_name(m, n, k, threads)}(%a: {a_type}, %w: {w_type}) -> {c_type} {{",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
        f"  %c_rows = arith.constant {rows} : index",
        f"  %c_full = arith.constant {full_pairs} : index",
        "  %f0 = arith.constant 0.0 : f32",
        "  %bf0 = arith.constant 0.0 : bf16",
        f"  %zero = arith.constant dense<0.0> : {acc}",
        *(f"  %c{offset} = arith.constant {offset} : index"
          for offset in sorted(({v * 2 * LANES for v in range(vectors)} | {v * LANES for v in range(vectors)}) - {0})),
        f"  %empty = tensor.empty() : {c_type}",
        f"  %c = scf.forall (%rb, %t) in ({row_blocks}, {tiles}) shared_outs(%out = %empty) -> ({c_type}) {{",
        f"    %m0 = affine.apply affine_map<(d0) -> (d0 * {block_rows})>(%rb)",
        f"    %n0 = affine.apply affine_map<(d0) -> (d0 * {columns})>(%t)",
        f"    %nrows = affine.min affine_map<(d0) -> ({block_rows}, {m} - d0 * {block_rows})>(%rb)",
        f"    %ncols = affine.min affine_map<(d0) -> ({columns}, {n} - d0 * {columns})>(%t)",
        f"    %tile = tensor.extract_slice %out[%m0, %n0] [%nrows, %ncols] [1, 1] : {c_type} to {tile_type}",
        f"    %main = affine.apply affine_map<(d0) -> (d0 - d0 mod {rows})>(%nrows)",
    ]

    def step(tag: str, mr: int, pair: str, in_bounds: str, accs: list[str], indent: str) -> tuple[list[str], list[str]]:
        """One pair of k: loads of W', A's pair of each row rounded to bf16 and broadcast,
        the dot products."""
        body = [f"{indent}%k_{tag} = affine.apply affine_map<(d0) -> (d0 * {PAIR})>({pair})"]
        for v in range(vectors):
            body += [f"{indent}%w{v}_{tag} = vector.transfer_read %w[%t, {pair}, %c{v * 2 * LANES}], %bf0 "
                     f"{{in_bounds = [true]}} : {w_type}, vector<32xbf16>",
                     f"{indent}%ws{v}_{tag} = vector.shape_cast %w{v}_{tag} : vector<32xbf16> to vector<16x2xbf16>",
                     f"{indent}%we{v}_{tag} = arith.extf %ws{v}_{tag} : vector<16x2xbf16> to vector<16x2xf32>"]
        new = []
        for r in range(mr):
            body += [
                f"{indent}%a{r}_{tag} = vector.transfer_read %a[%row{r}, %k_{tag}], %f0 "
                f"{{in_bounds = [{in_bounds}]}} : {a_type}, vector<2xf32>",
                f"{indent}%h{r}_{tag} = arith.truncf %a{r}_{tag} : vector<2xf32> to vector<2xbf16>",
                f"{indent}%i{r}_{tag} = vector.bitcast %h{r}_{tag} : vector<2xbf16> to vector<1xi32>",
                f"{indent}%x{r}_{tag} = vector.extract %i{r}_{tag}[0] : i32 from vector<1xi32>",
                f"{indent}%y{r}_{tag} = vector.broadcast %x{r}_{tag} : i32 to vector<16xi32>",
                f"{indent}%q{r}_{tag} = vector.bitcast %y{r}_{tag} : vector<16xi32> to vector<32xbf16>",
                f"{indent}%qs{r}_{tag} = vector.shape_cast %q{r}_{tag} : vector<32xbf16> to vector<16x2xbf16>",
                f"{indent}%qe{r}_{tag} = arith.extf %qs{r}_{tag} : vector<16x2xbf16> to vector<16x2xf32>",
            ]
            for v in range(vectors):
                result = f"%d{r}_{v}_{tag}"
                body.append(f"{indent}{result} = vector.contract {DOT_TRAITS} %qe{r}_{tag}, %we{v}_{tag}, "
                            f"{accs[r * vectors + v]} : vector<16x2xf32>, vector<16x2xf32> into {acc}")
                new.append(result)
        return body, new

    def row_loop(tag: str, mr: int, lower: str, upper: str, stride: str, source: str) -> list[str]:
        out = [f"    %{tag} = scf.for %i = {lower} to {upper} step {stride} iter_args(%tl = {source}) -> ({tile_type}) {{"]
        for r in range(mr):
            out += [f"      %local{r} = affine.apply affine_map<(d0) -> (d0 + {r})>(%i)",
                    f"      %row{r} = affine.apply affine_map<(d0, d1) -> (d0 + d1 + {r})>(%m0, %i)"]
        count = mr * vectors
        carried = [f"%l{j}" for j in range(count)]
        types = ", ".join([acc] * count)
        out.append(f"      %r:{count} = scf.for %g = %c0 to %c_full step %c1 "
                   f"iter_args({', '.join(f'{c} = %zero' for c in carried)}) -> ({types}) {{")
        body, new = step("g", mr, "%g", "true", carried, "        ")
        out += body + [f"        scf.yield {', '.join(new)} : {types}", "      }"]
        final = [f"%r#{j}" for j in range(count)]
        if k % PAIR:  # the last k alone: A read masked (0 past K), W' zero-padded
            body, final = step("tail", mr, "%c_full", "false", final, "      ")
            out += body
        current = "%tl"
        for r in range(mr):
            for v in range(vectors):
                written = f"%o{r}_{v}"
                out.append(f"      {written} = vector.transfer_write {final[r * vectors + v]}, {current}"
                           f"[%local{r}, %c{v * LANES}] {{in_bounds = [{columns_in_bounds}]}} : {acc}, {tile_type}")
                current = written
        return out + [f"      scf.yield {current} : {tile_type}", "    }"]

    lines += row_loop("full", rows, "%c0", "%main", "%c_rows", "%tile")
    lines += row_loop("rest", 1, "%main", "%nrows", "%c1", "%full")
    lines += [
        "    scf.forall.in_parallel {",
        f"      tensor.parallel_insert_slice %rest into %out[%m0, %n0] [%nrows, %ncols] [1, 1] : {tile_type} into {c_type}",
        "    }",
        "  }",
        f"  return %c : {c_type}",
        "}",
    ]
    return "\n".join(lines)


def _kernel(module: ir.Operation, m: int, n: int, k: int, threads: int) -> str:
    """The kernel's symbol, its function added to ``module`` unless already there."""
    return add_kernel(module, kernel_name(m, n, k, threads), kernel_source(m, n, k, threads))


def _pointwise_conv(op: ir.Operation) -> bool:
    """A 1x1, stride-1 NHWC convolution: a matmul of the pixels (N*H*W, C) by the filter (C, F)."""
    if op.name != "linalg.conv_2d_nhwc_hwcf" or len(op.operands) != 3:
        return False
    filter_shape = ir.RankedTensorType(op.operands[1].type).shape
    strides = op.attributes["strides"] if "strides" in op.attributes else None
    return filter_shape[:2] == [1, 1] and (strides is None or str(strides).startswith("dense<1>"))


def takes_kernel(op: ir.Operation) -> bool:
    """A plain ``linalg.matmul``, or a 1x1 stride-1 NHWC convolution, of static f32 shapes
    whose accumulator is a zero fill."""
    if op.name == "linalg.matmul" and len(op.operands) == 3:
        if "indexing_maps" in op.attributes:
            if indexing_maps(op) != MATMUL_MAPS:
                return False
    elif not _pointwise_conv(op):
        return False
    types = [ir.RankedTensorType(v.type) for v in op.operands]
    return all(t.has_static_shape for t in types) and [str(t.element_type) for t in types] == ["f32"] * 3 \
        and is_zero_fill(op.operands[2])


def to_bf16_kernel(module: ir.Operation, op: ir.Operation, weights: np.ndarray, threads: int) -> None:
    """Replace ``op`` (``takes_kernel``) by a call of the bf16 kernel for its shape, its B
    operand's values ``weights`` (K x N, or a 1x1xKxN filter; rounded to bf16 here) packed
    for it. A convolution's pixels are the rows: its input and result are viewed as
    (N*H*W, C) and (N*H*W, F) (``tensor.collapse_shape`` / ``expand_shape``: no copy)."""
    conv = op.name != "linalg.matmul"
    weights = weights.reshape(weights.shape[-2:])
    k, n = weights.shape
    _, vectors = register_tile(n)
    with ir.InsertionPoint(op), op.location:
        a = collapse(op.operands[0], [[0, 1, 2], [3]]) if conv else op.operands[0]
        m = ir.RankedTensorType(a.type).shape[0]
        name = _kernel(module, m, n, k, threads)
        packed = core.constant(pack_weights(weights.astype(ml_dtypes.bfloat16), vectors * LANES), name="bf16_panels")
        result_type = ir.RankedTensorType.get([m, n], ir.F32Type.get())
        product = func.CallOp([result_type], ir.FlatSymbolRefAttr.get(name), [a, packed]).results[0]
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
