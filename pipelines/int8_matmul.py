"""``tilecraft-int8-matmul``: 8-bit integer matmuls as u8 x s8 dot products (AVX-512 VNNI).

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
    NT = 64); per 4 values of k, one broadcast of A's 4 bytes per row and one load of B'
    per 16 columns;
  - a signed A is made unsigned by flipping its bytes' sign bit (``a + 128``) and the
    accumulators start at ``-128 * column_sums(B)``, which undoes it exactly.

  The kernel reads its operands through the function's arguments, so the later passes
  that rewrite constant reads (blocked_constants.py) leave the packed layout alone.
* **Widened operands and ``linalg.matmul`` on i32** otherwise (no VNNI, an unsigned or
  run-time B, dynamic shapes): the form the default schedule vectorizes.

Why here, after the graph passes: B has to be a literal constant, which the constant
folder makes it (a DequantizeLinear-free integer weight, a transposed one, ...); and the
matmul has to be replaced before fusion groups are tagged. Why not a schedule of the
generic: the dot-product instruction consumes B in a layout (four k of a column adjacent)
that no tiling of the (K, N) operand gives, and the vectorizer has no pattern for it.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from mlir import ir
from mlir.dialects import func, linalg, vector

from ..errors import PipelineError
from ..frontend.emit import core
from ..frontend.resources import constant_array
from .ir_queries import defined_functions, defining_op, is_zero_fill, ops_where
from .passes import positive_int_option, register_pass

INT8_MATMUL_PASS = "tilecraft-int8-matmul"
KERNEL_PREFIX = "tilecraft_int8_matmul"
LANES = 16        # i32 lanes of a 512-bit accumulator
GROUP = 4         # bytes of k one lane's dot product sums
MAX_VECTORS = 4   # accumulator vectors per row of the register tile (64 columns)
MAX_ROWS = 12     # rows of the register tile: one broadcast of A per row and step of k
ACCUMULATORS = 24  # of the 32 vector registers; the rest hold B' and the broadcast of A
K_BLOCK = 64      # groups of k per block: its B' panel (64 x 256 bytes) stays in L1
_SIGN_FLIP = -2139062144  # 0x80808080: each byte's sign bit

# acc[i] += sum_j ext(a[i, j]) * ext(b[i, j]): vpdpbusd's meaning, on (16 lanes, 4 bytes).
_DOT_TRAITS = ('{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, '
               'affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"], '
               'kind = #vector.kind<add>}')
_MATMUL_MAPS = ["(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)"]


def _maps(op: ir.Operation) -> list[str]:
    return [str(ir.AffineMapAttr(m).value) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]


def integer_product_signedness(op: ir.Operation) -> tuple[bool, bool] | None:
    """(A unsigned, B unsigned) when ``op`` is ``contraction.integer_matmul``'s generic: 2-D
    i8 operands, an i32 result, ``acc + ext(a) * ext(b)``; ``None`` otherwise."""
    if op.name != "linalg.generic" or len(op.operands) != 3 or len(op.results) != 1:
        return None
    if _maps(op) != _MATMUL_MAPS:
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


def _literal_array(value: ir.Value) -> np.ndarray | None:
    """The values of ``value`` when an ``arith.constant`` defines it."""
    constant = defining_op(value)
    if constant is None or constant.name != "arith.constant":
        return None
    return constant_array(constant)


# ---- the kernel's shape -----------------------------------------------------------------


def register_tile(n: int) -> tuple[int, int]:
    """(rows MR, accumulator vectors per row NV) of the register tile for N columns."""
    vectors = min(MAX_VECTORS, -(-n // LANES))
    return min(MAX_ROWS, ACCUMULATORS // vectors), vectors


def pack_weights(b: np.ndarray, columns: int) -> np.ndarray:
    """``B'[n / NT, k / 4, (n % NT) * 4 + k % 4]`` of a (K, N) int8 ``b``, zero-padded."""
    k, n = b.shape
    groups, tiles = -(-k // GROUP), -(-n // columns)
    padded = np.zeros((groups * GROUP, tiles * columns), np.int8)
    padded[:k, :n] = b
    return np.ascontiguousarray(
        padded.reshape(groups, GROUP, tiles, columns).transpose(2, 0, 3, 1)
    ).reshape(tiles, groups, columns * GROUP)


def accumulator_start(b: np.ndarray, columns: int, a_unsigned: bool) -> np.ndarray:
    """Each column's first accumulator value: 0, or ``-128 * column_sum`` for a signed A
    whose bytes the kernel offsets by 128."""
    k, n = b.shape
    start = np.zeros(-(-n // columns) * columns, np.int32)
    if not a_unsigned:
        start[:n] = -128 * b.astype(np.int32).sum(axis=0)
    return start


def _row_blocks(m: int, column_tiles: int, rows: int, threads: int) -> int:
    """Rows per task: whole register tiles, about two tasks per thread in all."""
    wanted = max(1, -(-2 * threads // column_tiles)) if threads > 1 else 1
    tiles = -(-m // rows)
    blocks = min(wanted, tiles)
    return rows * -(-tiles // blocks)


def kernel_name(m: int, n: int, k: int, a_unsigned: bool, threads: int) -> str:
    return f"{KERNEL_PREFIX}_{m}x{n}x{k}_{'u8' if a_unsigned else 's8'}_t{threads}"


def kernel_source(m: int, n: int, k: int, a_unsigned: bool, threads: int) -> str:
    """The kernel function's MLIR (see the module docstring): ``(A: MxKxi8, B': packed,
    start: i32 per padded column) -> MxNxi32``.

    Per task (a block of rows by one column tile): the tile is first filled with the start
    values; then, per block of ``K_BLOCK`` groups of k (its B' panel, 16 KB, stays in L1
    while every register tile of the task's rows uses it), each register tile loads its
    accumulators from the tile, adds the block's dot products and stores them back; a K
    that is not a multiple of 4 ends with one masked group."""
    rows, vectors = register_tile(n)
    columns = vectors * LANES
    tiles, groups = -(-n // columns), -(-k // GROUP)
    full_groups = k // GROUP
    blocks = -(-full_groups // K_BLOCK)
    block_rows = _row_blocks(m, tiles, rows, threads)
    row_blocks = -(-m // block_rows)
    name = kernel_name(m, n, k, a_unsigned, threads)
    a_type = f"tensor<{m}x{k}xi8>"
    b_type = f"tensor<{tiles}x{groups}x{columns * GROUP}xi8>"
    s_type = f"tensor<{tiles * columns}xi32>"
    c_type = f"tensor<{m}x{n}xi32>"
    tile_type = "tensor<?x?xi32>"
    acc = "vector<16xi32>"
    # Column tiles all whole: the accumulators' loads and stores need no mask.
    columns_in_bounds = "true" if n % columns == 0 else "false"
    lines = [
        f"func.func private @{name}(%a: {a_type}, %b: {b_type}, %start: {s_type}) -> {c_type} {{",
        "  %c0 = arith.constant 0 : index",
        "  %c1 = arith.constant 1 : index",
        f"  %c_rows = arith.constant {rows} : index",
        f"  %c_full = arith.constant {full_groups} : index",
        f"  %c_blocks = arith.constant {blocks} : index",
        "  %i8_0 = arith.constant 0 : i8",
        "  %i32_0 = arith.constant 0 : i32",
        f"  %flip = arith.constant dense<{_SIGN_FLIP}> : {acc}",
        *(f"  %c{offset} = arith.constant {offset} : index"
          for offset in sorted(({v * 64 for v in range(vectors)} | {v * LANES for v in range(vectors)}) - {0})),
        f"  %empty = tensor.empty() : {c_type}",
        f"  %c = scf.forall (%rb, %t) in ({row_blocks}, {tiles}) shared_outs(%out = %empty) -> ({c_type}) {{",
        f"    %m0 = affine.apply affine_map<(d0) -> (d0 * {block_rows})>(%rb)",
        f"    %n0 = affine.apply affine_map<(d0) -> (d0 * {columns})>(%t)",
        f"    %nrows = affine.min affine_map<(d0) -> ({block_rows}, {m} - d0 * {block_rows})>(%rb)",
        f"    %ncols = affine.min affine_map<(d0) -> ({columns}, {n} - d0 * {columns})>(%t)",
        f"    %tile = tensor.extract_slice %out[%m0, %n0] [%nrows, %ncols] [1, 1] : {c_type} to {tile_type}",
        f"    %main = affine.apply affine_map<(d0) -> (d0 - d0 mod {rows})>(%nrows)",
    ]
    for v in range(vectors):
        lines.append(f"    %s{v}_at = affine.apply affine_map<(d0) -> (d0 + {v * LANES})>(%n0)")
        lines.append(f"    %s{v} = vector.transfer_read %start[%s{v}_at], %i32_0 {{in_bounds = [true]}} : {s_type}, {acc}")
    # The tile starts at the start values.
    lines.append(f"    %filled = scf.for %r = %c0 to %nrows step %c1 iter_args(%tf = %tile) -> ({tile_type}) {{")
    current = "%tf"
    for v in range(vectors):
        lines.append(f"      %tf{v} = vector.transfer_write %s{v}, {current}[%r, %c{v * LANES}] "
                     f"{{in_bounds = [{columns_in_bounds}]}} : {acc}, {tile_type}")
        current = f"%tf{v}"
    lines += [f"      scf.yield {current} : {tile_type}", "    }"]

    def step_body(tag: str, mr: int, group: str, in_bounds: str, accs: list[str], indent: str
                  ) -> tuple[list[str], list[str]]:
        """One group of four k: loads of B', broadcasts of A, the dot products."""
        body = [f"{indent}%k_{tag} = affine.apply affine_map<(d0) -> (d0 * {GROUP})>({group})"]
        for v in range(vectors):
            body += [f"{indent}%b{v}_{tag} = vector.transfer_read %b[%t, {group}, %c{v * 64}], %i8_0 "
                     f"{{in_bounds = [true]}} : {b_type}, vector<64xi8>",
                     f"{indent}%bs{v}_{tag} = vector.shape_cast %b{v}_{tag} : vector<64xi8> to vector<16x4xi8>",
                     f"{indent}%be{v}_{tag} = arith.extsi %bs{v}_{tag} : vector<16x4xi8> to vector<16x4xi32>"]
        new = []
        for r in range(mr):
            body += [
                f"{indent}%a{r}_{tag} = vector.transfer_read %a[%row{r}_{tag}, %k_{tag}], %i8_0 "
                f"{{in_bounds = [{in_bounds}]}} : {a_type}, vector<4xi8>",
                f"{indent}%w{r}_{tag} = vector.bitcast %a{r}_{tag} : vector<4xi8> to vector<1xi32>",
                f"{indent}%x{r}_{tag} = vector.extract %w{r}_{tag}[0] : i32 from vector<1xi32>",
                f"{indent}%y{r}_{tag} = vector.broadcast %x{r}_{tag} : i32 to {acc}",
            ]
            word = f"%y{r}_{tag}"
            if not a_unsigned:
                body.append(f"{indent}%f{r}_{tag} = arith.xori %y{r}_{tag}, %flip : {acc}")
                word = f"%f{r}_{tag}"
            body += [f"{indent}%q{r}_{tag} = vector.bitcast {word} : {acc} to vector<64xi8>",
                     f"{indent}%qs{r}_{tag} = vector.shape_cast %q{r}_{tag} : vector<64xi8> to vector<16x4xi8>",
                     f"{indent}%qe{r}_{tag} = arith.extui %qs{r}_{tag} : vector<16x4xi8> to vector<16x4xi32>"]
            for v in range(vectors):
                result = f"%d{r}_{v}_{tag}"
                body.append(f"{indent}{result} = vector.contract {_DOT_TRAITS} %qe{r}_{tag}, %be{v}_{tag}, "
                            f"{accs[r * vectors + v]} : vector<16x4xi32>, vector<16x4xi32> into {acc}")
                new.append(result)
        return body, new

    def row_loop(tag: str, mr: int, lower: str, upper: str, step: str, source: str,
                 group_range: tuple[str, str] | None) -> list[str]:
        """scf.for over register tiles of ``mr`` rows in [lower, upper) of the task's tile:
        accumulators loaded, the groups of ``group_range`` added (the masked last group
        when ``None``), stored."""
        out = [f"      %{tag} = scf.for %i_{tag} = {lower} to {upper} step {step} "
               f"iter_args(%tl_{tag} = {source}) -> ({tile_type}) {{"]
        for r in range(mr):
            out += [f"        %local{r}_{tag} = affine.apply affine_map<(d0) -> (d0 + {r})>(%i_{tag})",
                    f"        %row{r}_{tag} = affine.apply affine_map<(d0, d1) -> (d0 + d1 + {r})>(%m0, %i_{tag})"]
        loaded = []
        for r in range(mr):
            for v in range(vectors):
                loaded.append(f"%ld{r}_{v}_{tag}")
                out.append(f"        %ld{r}_{v}_{tag} = vector.transfer_read %tl_{tag}[%local{r}_{tag}, %c{v * LANES}], "
                           f"%i32_0 {{in_bounds = [{columns_in_bounds}]}} : {tile_type}, {acc}")
        count = len(loaded)
        if group_range is None:
            body, final = step_body(tag, mr, "%c_full", "false", loaded, "        ")
            out += body
        else:
            carried = [f"%l{j}_{tag}" for j in range(count)]
            out.append(f"        %r_{tag}:{count} = scf.for %g_{tag} = {group_range[0]} to {group_range[1]} step %c1 "
                       f"iter_args({', '.join(f'{c} = {i}' for c, i in zip(carried, loaded))}) "
                       f"-> ({', '.join([acc] * count)}) {{")
            body, new = step_body(tag, mr, f"%g_{tag}", "true", carried, "          ")
            out += body
            out += [f"          scf.yield {', '.join(new)} : {', '.join([acc] * count)}", "        }"]
            final = [f"%r_{tag}#{j}" for j in range(count)]
        current = f"%tl_{tag}"
        for r in range(mr):
            for v in range(vectors):
                written = f"%o{r}_{v}_{tag}"
                out.append(f"        {written} = vector.transfer_write {final[r * vectors + v]}, {current}"
                           f"[%local{r}_{tag}, %c{v * LANES}] {{in_bounds = [{columns_in_bounds}]}} : {acc}, {tile_type}")
                current = written
        out += [f"        scf.yield {current} : {tile_type}", "      }"]
        return out

    lines += [
        f"    %summed = scf.for %kb = %c0 to %c_blocks step %c1 iter_args(%tk = %filled) -> ({tile_type}) {{",
        f"      %g0 = affine.apply affine_map<(d0) -> (d0 * {K_BLOCK})>(%kb)",
        f"      %g1 = affine.min affine_map<(d0) -> (d0 * {K_BLOCK} + {K_BLOCK}, {full_groups})>(%kb)",
    ]
    lines += row_loop("full", rows, "%c0", "%main", "%c_rows", "%tk", ("%g0", "%g1"))
    lines += row_loop("rest", 1, "%main", "%nrows", "%c1", "%full", ("%g0", "%g1"))
    lines += ["      scf.yield %rest : " + tile_type, "    }"]
    result = "%summed"
    if k % GROUP:
        lines += row_loop("tailfull", rows, "%c0", "%main", "%c_rows", "%summed", None)
        lines += row_loop("tailrest", 1, "%main", "%nrows", "%c1", "%tailfull", None)
        result = "%tailrest"
    lines += [
        "    scf.forall.in_parallel {",
        f"      tensor.parallel_insert_slice {result} into %out[%m0, %n0] [%nrows, %ncols] [1, 1] : {tile_type} into {c_type}",
        "    }",
        "  }",
        f"  return %c : {c_type}",
        "}",
    ]
    return "\n".join(lines)


def _kernel(module: ir.Operation, m: int, n: int, k: int, a_unsigned: bool, threads: int) -> str:
    """The kernel's symbol, its function added to ``module`` unless already there."""
    name = kernel_name(m, n, k, a_unsigned, threads)
    body = module.regions[0].blocks[0]
    for op in body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.operation.attributes["sym_name"]).value == name:
            return name
    parsed = ir.Module.parse(kernel_source(m, n, k, a_unsigned, threads), module.context)
    with ir.InsertionPoint(body):
        for op in parsed.body.operations:
            op.operation.clone()
    return name


def _to_vnni_kernel(module: ir.Operation, op: ir.Operation, b: np.ndarray, a_unsigned: bool, threads: int) -> None:
    a = op.operands[0]
    m, k = ir.RankedTensorType(a.type).shape
    n = b.shape[1]
    _, vectors = register_tile(n)
    columns = vectors * LANES
    name = _kernel(module, m, n, k, a_unsigned, threads)
    with ir.InsertionPoint(op), op.location:
        packed = core.constant(pack_weights(b, columns), name="vnni_weights")
        start = core.constant(accumulator_start(b, columns, a_unsigned), name="vnni_start")
        call = func.CallOp([op.results[0].type], ir.FlatSymbolRefAttr.get(name), [a, packed, start])
    op.results[0].replace_all_uses_with(call.results[0])
    op.erase()


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
             "num-threads": "threads the kernels' parallel loops are split for (default 1)"},
)
def int8_matmul_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    vnni = options.get("vnni", "0")
    if vnni not in ("0", "1"):
        raise PipelineError(f"{INT8_MATMUL_PASS}: vnni must be 0 or 1, got {vnni!r}")
    threads = positive_int_option("num-threads", options.get("num-threads", "1"))
    for function in defined_functions(module):
        products = [(op, integer_product_signedness(op)) for op in ops_where(function, lambda o: o.name == "linalg.generic")]
        for op, signedness in products:
            if signedness is None:
                continue
            a_unsigned, b_unsigned = signedness
            a, b, init = op.operands
            static = all(ir.RankedTensorType(v.type).has_static_shape for v in (a, b))
            takes_kernel = vnni == "1" and static and not b_unsigned and is_zero_fill(init)
            weights = _literal_array(b) if takes_kernel else None  # read only when it can be used
            if weights is not None:
                _to_vnni_kernel(module, op, weights, a_unsigned, threads)
            else:
                _to_widened_matmul(op, a_unsigned, b_unsigned)


# ---- the dot products, once the kernel is on buffers -------------------------------------

VNNI_DOTS_PASS = "tilecraft-vnni-dot-products"
_VPDPBUSD = "llvm.x86.avx512.vpdpbusd.512"
_DOT_MAPS = ["(d0, d1) -> (d0, d1)", "(d0, d1) -> (d0, d1)", "(d0, d1) -> (d0)"]


def _dot_operands(op: ir.Operation) -> tuple[ir.Value, ir.Value] | None:
    """The (u8, s8) ``vector<16x4xi8>`` operands of a ``vector.contract`` meaning one
    ``vpdpbusd`` (``_DOT_TRAITS``), else ``None``."""
    if op.name != "vector.contract" or str(op.results[0].type) != "vector<16xi32>":
        return None
    if [str(ir.AffineMapAttr(m).value) for m in ir.ArrayAttr(op.attributes["indexing_maps"])] != _DOT_MAPS:
        return None
    if "#vector.kind<add>" not in str(op.attributes["kind"]):
        return None
    sources = []
    for operand, extension in zip(op.operands[:2], ("arith.extui", "arith.extsi")):
        ext = defining_op(operand)
        if ext is None or ext.name != extension or str(ext.operands[0].type) != "vector<16x4xi8>":
            return None
        sources.append(ext.operands[0])
    return sources[0], sources[1]


@register_pass(
    VNNI_DOTS_PASS,
    "vector.contract ops meaning one u8 x s8 dot product into 16 i32 lanes become "
    "vpdpbusd (AVX-512 VNNI) intrinsic calls",
)
def vnni_dot_products_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why a late pass rather than the intrinsic in the kernel: bufferization refuses ops
    with unknown memory effects (an LLVM intrinsic call), and the contraction is the
    portable meaning, correct on any target if this pass does not run."""
    bytes64 = "vector<64xi8>"
    dots = [(op, _dot_operands(op)) for op in ops_where(module, lambda o: o.name == "vector.contract")]
    for op, operands in dots:
        if operands is None:
            continue
        unsigned, signed = operands
        with ir.InsertionPoint(op), op.location:
            flat = ir.Type.parse(bytes64)
            operands = [op.operands[2], *(vector.shape_cast(flat, v) for v in (unsigned, signed))]
            call = ir.Operation.create(
                "llvm.call_intrinsic", results=[op.results[0].type], operands=operands,
                attributes={"intrin": ir.StringAttr.get(_VPDPBUSD),
                            "op_bundle_sizes": ir.DenseI32ArrayAttr.get([]),
                            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([3, 0])})
        op.results[0].replace_all_uses_with(call.results[0])
        op.erase()
